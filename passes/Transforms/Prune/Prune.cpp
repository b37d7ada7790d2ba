//===- Prune.cpp - The pruning passes -------------------------------------===//
//
// `sits-prune` runs every step (folding, identities, dead code, channels,
// heads); `sits-prune-channels` and `sits-prune-heads` run one structural
// step alone. The rewrites themselves are FailureOr<> functions over one op
// (Passes.h); the passes collect candidates in program order, apply them and
// record what they removed in `sits.report.pruning`.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/Prune/WeightValues.h"

#include "dialects/Target/KnownTargets.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <cmath>

namespace mlir::sits {
#define GEN_PASS_DEF_SITSPRUNE
#define GEN_PASS_DEF_SITSPRUNECHANNELS
#define GEN_PASS_DEF_SITSPRUNEHEADS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::prune;

namespace {

/// The entries of `sits.report.pruning`: `{op, kind, ...}` per removal.
class PruningReport {
public:
  explicit PruningReport(ModuleOp module)
      : module(module), b(module.getContext()) {}

  void record(Operation *op, StringRef kind, ArrayRef<NamedAttribute> extra) {
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("op", b.getStringAttr(getReportName(op->getLoc()))),
        b.getNamedAttr("kind", b.getStringAttr(kind))};
    llvm::append_range(fields, extra);
    entries.push_back(b.getDictionaryAttr(fields));
  }

  /// A fold or identity removal of an op named `name`.
  void recordSimplification(StringRef name, StringRef kind, StringRef what) {
    entries.push_back(
        b.getDictionaryAttr({b.getNamedAttr("op", b.getStringAttr(name)),
                             b.getNamedAttr("kind", b.getStringAttr(kind)),
                             b.getNamedAttr("what", b.getStringAttr(what))}));
  }

  void recordStructure(Operation *op, StringRef kind,
                       const PrunedStructure &pruned, double threshold,
                       Operation *consumer, int64_t multiple = 1) {
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("removed", b.getI64IntegerAttr(pruned.removed.size())),
        b.getNamedAttr("total", b.getI64IntegerAttr(pruned.total)),
        b.getNamedAttr("indices", b.getI64ArrayAttr(pruned.removed)),
        b.getNamedAttr("bytes", b.getI64IntegerAttr(pruned.bytesRemoved)),
        b.getNamedAttr("threshold", b.getF64FloatAttr(threshold))};
    if (consumer) {
      fields.push_back(b.getNamedAttr(
          "consumer", b.getStringAttr(getReportName(consumer->getLoc()))));
      fields.push_back(
          b.getNamedAttr("multiple", b.getI64IntegerAttr(multiple)));
    }
    if (pruned.foldedIntoBias)
      fields.push_back(b.getNamedAttr(
          "folded_into_bias", b.getI64IntegerAttr(pruned.foldedIntoBias)));
    // Grouped-query attention: key/value heads are not the query heads.
    if (pruned.kvTotal && pruned.kvTotal != pruned.total) {
      fields.push_back(b.getNamedAttr(
          "kv_removed", b.getI64IntegerAttr(pruned.kvRemoved.size())));
      fields.push_back(
          b.getNamedAttr("kv_total", b.getI64IntegerAttr(pruned.kvTotal)));
      fields.push_back(
          b.getNamedAttr("kv_indices", b.getI64ArrayAttr(pruned.kvRemoved)));
      fields.push_back(b.getNamedAttr(
          "kept_for_groups", b.getI64IntegerAttr(pruned.keptForGroups)));
    }
    record(op, kind, fields);
  }

  void recordSummary(int64_t bytesBefore, int64_t bytesAfter,
                     double threshold) {
    record(module, "summary",
           {b.getNamedAttr("constant_bytes_before",
                           b.getI64IntegerAttr(bytesBefore)),
            b.getNamedAttr("constant_bytes_after",
                           b.getI64IntegerAttr(bytesAfter)),
            b.getNamedAttr("threshold", b.getF64FloatAttr(threshold))});
  }

  /// Stores the entries on the module, after those of an earlier pruning
  /// pass when `append` (the single-step passes), else in their place.
  void write(bool append) {
    SmallVector<Attribute> all;
    if (auto earlier = module->getAttrOfType<ArrayAttr>("sits.report.pruning");
        earlier && append)
      llvm::append_range(all, earlier);
    llvm::append_range(all, entries);
    module->setAttr("sits.report.pruning", b.getArrayAttr(all));
  }

private:
  ModuleOp module;
  Builder b;
  SmallVector<Attribute> entries;
};

/// What one run removed, for the pass statistics.
struct PruneCounts {
  int64_t folded = 0, identities = 0, dead = 0, channels = 0, heads = 0,
          kvHeads = 0;
};

} // namespace

static int64_t getConstantBytes(ModuleOp module) {
  int64_t bytes = 0;
  module->walk([&](arith::ConstantOp op) {
    if (auto value = dyn_cast<ElementsAttr>(op.getValue()))
      bytes += getStorageBytes(value);
  });
  return bytes;
}

static LogicalResult verifyThreshold(ModuleOp module, StringRef pass,
                                     double threshold) {
  if (threshold >= 0.0 && !std::isinf(threshold))
    return success();
  return module.emitError() << pass
                            << ": 'threshold' must be a finite number >= 0, "
                               "got "
                            << threshold;
}

/// Checks the options of a pass pruning channels and returns the channel
/// multiple to keep: 0 means the target's SIMD width (float lanes of a CPU,
/// a GPU's warp), no rounding without a target.
static FailureOr<int64_t> resolveChannelOptions(ModuleOp module, StringRef pass,
                                                double threshold,
                                                int64_t multiple) {
  if (failed(verifyThreshold(module, pass, threshold)))
    return failure();
  if (multiple < 0)
    return module.emitError()
           << pass << ": 'channel-multiple' must be >= 0, got " << multiple;
  if (multiple != 0)
    return multiple;
  if (const target::TargetInfo *info = getModuleTarget(module))
    return std::max<int64_t>(1, info->simdWidth);
  return 1;
}

/// Folds weight-only ops and removes identities in program order (a folded
/// producer makes its consumer foldable), then erases what is dead.
static void simplify(FunctionOpInterface func, RewriterBase &rewriter,
                     PruningReport &report, PruneCounts &counts) {
  SmallVector<Operation *> ops;
  func->walk([&](Operation *op) {
    if (op->getParentOp() == func.getOperation())
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    std::string name = getReportName(op->getLoc());
    StringRef opName = op->getName().getStringRef();
    if (succeeded(foldConstantSubgraph(rewriter, op))) {
      ++counts.folded;
      report.recordSimplification(name, "constant_fold", opName);
      continue;
    }
    if (succeeded(removeIdentityOp(rewriter, op))) {
      ++counts.identities;
      report.recordSimplification(name, "identity", opName);
    }
  }
}

/// Erases the dead ops of `func`, recording them when `record`.
static void eraseDead(FunctionOpInterface func, RewriterBase &rewriter,
                      PruningReport &report, PruneCounts &counts, bool record) {
  int64_t dead = eraseDeadOps(rewriter, func.getFunctionBody());
  Builder b(func.getContext());
  if (dead && record)
    report.record(func, "dead_code",
                  {b.getNamedAttr("ops", b.getI64IntegerAttr(dead))});
  counts.dead += dead;
}

/// Channels in program order: pruning a consumer's input channels leaves it
/// a valid producer for the next pair.
static void pruneChannels(FunctionOpInterface func, RewriterBase &rewriter,
                          double threshold, int64_t multiple,
                          PruningReport &report, PruneCounts &counts) {
  SmallVector<Operation *> contractions;
  func->walk([&](Operation *op) {
    if (isa<MatmulOp, ConvOp>(op))
      contractions.push_back(op);
  });
  for (Operation *op : contractions) {
    Operation *consumer = nullptr;
    if (op->getResult(0).hasOneUse()) {
      consumer = *op->getResult(0).getUsers().begin();
      if (isa<ActivationOp>(consumer) && consumer->getResult(0).hasOneUse())
        consumer = *consumer->getResult(0).getUsers().begin();
    }
    FailureOr<PrunedStructure> pruned =
        pruneContractionChannels(rewriter, op, threshold, multiple);
    if (failed(pruned))
      continue;
    counts.channels += pruned->removed.size();
    report.recordStructure(op,
                           isa<ConvOp>(op) ? "conv_channels" : "ffn_channels",
                           *pruned, threshold, consumer, multiple);
  }
}

static void pruneHeads(FunctionOpInterface func, RewriterBase &rewriter,
                       double threshold, PruningReport &report,
                       PruneCounts &counts) {
  SmallVector<AttentionOp> attentions;
  func->walk([&](AttentionOp op) { attentions.push_back(op); });
  for (AttentionOp op : attentions) {
    FailureOr<PrunedStructure> pruned =
        pruneAttentionHeads(rewriter, op, threshold);
    if (failed(pruned))
      continue;
    counts.heads += pruned->removed.size();
    if (pruned->kvTotal != pruned->total)
      counts.kvHeads += pruned->kvRemoved.size();
    report.recordStructure(op, "attention_heads", *pruned, threshold, nullptr);
  }
}

/// The steps a pruning pass runs on every function with a body.
struct PruneSteps {
  bool simplify = false, channels = false, heads = false;
};

/// Runs `steps` over `module` in the order sits-prune runs them, records
/// them in the module's report (after an earlier one when `append`) and
/// returns what they removed, with the constant bytes saved.
static PruneCounts runPruning(ModuleOp module, PruneSteps steps,
                              double threshold, int64_t multiple, bool append,
                              int64_t &bytesRemoved) {
  IRRewriter rewriter(module.getContext());
  PruningReport report(module);
  PruneCounts counts;
  int64_t bytesBefore = getConstantBytes(module);
  module->walk([&](FunctionOpInterface func) {
    if (func.isExternal())
      return;
    if (steps.simplify) {
      simplify(func, rewriter, report, counts);
      eraseDead(func, rewriter, report, counts, /*record=*/true);
    }
    if (!steps.channels && !steps.heads)
      return;
    if (steps.channels)
      pruneChannels(func, rewriter, threshold, multiple, report, counts);
    if (steps.heads)
      pruneHeads(func, rewriter, threshold, report, counts);
    eraseDead(func, rewriter, report, counts, /*record=*/false);
  });
  int64_t bytesAfter = getConstantBytes(module);
  bytesRemoved = bytesBefore - bytesAfter;
  report.recordSummary(bytesBefore, bytesAfter, threshold);
  report.write(append);
  return counts;
}

namespace {

struct SitsPrunePass : sits::impl::SitsPruneBase<SitsPrunePass> {
  using SitsPruneBase::SitsPruneBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<int64_t> multiple = resolveChannelOptions(
        module, getArgument(), threshold, channelMultiple);
    if (failed(multiple))
      return signalPassFailure();
    int64_t bytes = 0;
    PruneCounts counts =
        runPruning(module, {true, structured, structured}, threshold, *multiple,
                   /*append=*/false, bytes);
    numFolded += counts.folded;
    numIdentities += counts.identities;
    numDead += counts.dead;
    numChannels += counts.channels;
    numHeads += counts.heads;
    numKVHeads += counts.kvHeads;
    numBytes += bytes;
  }
};

struct SitsPruneChannelsPass
    : sits::impl::SitsPruneChannelsBase<SitsPruneChannelsPass> {
  using SitsPruneChannelsBase::SitsPruneChannelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<int64_t> multiple = resolveChannelOptions(
        module, getArgument(), threshold, channelMultiple);
    if (failed(multiple))
      return signalPassFailure();
    int64_t bytes = 0;
    PruneCounts counts = runPruning(module, {false, true, false}, threshold,
                                    *multiple, /*append=*/true, bytes);
    numChannels += counts.channels;
    numBytes += bytes;
  }
};

struct SitsPruneHeadsPass : sits::impl::SitsPruneHeadsBase<SitsPruneHeadsPass> {
  using SitsPruneHeadsBase::SitsPruneHeadsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyThreshold(module, getArgument(), threshold)))
      return signalPassFailure();
    int64_t bytes = 0;
    PruneCounts counts = runPruning(module, {false, false, true}, threshold,
                                    /*multiple=*/1, /*append=*/true, bytes);
    numHeads += counts.heads;
    numKVHeads += counts.kvHeads;
    numBytes += bytes;
  }
};

} // namespace
