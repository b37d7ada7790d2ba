//===- Reorder.cpp - Topology-aware scheduling of a model's graph ---------===//
//
// Groups, orders and plans memory for each public function with the
// scheduling model of passes/Analysis (see Schedule.h), applies the order,
// and records it (`sits.report.schedule`, optionally a schedule file).
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Analysis/CostModel.h"
#include "passes/Analysis/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSREORDER
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::schedule;

namespace {

/// Version of the schedule file format (passes/Analysis/ScheduleFormat.md).
constexpr int kScheduleFormatVersion = 1;

/// A token of the schedule file: bare when it has no space, quote, '#' or
/// backslash, else double-quoted with `"` and `\` escaped.
std::string quote(StringRef token) {
  if (!token.empty() &&
      token.find_first_of(" \t\n\r\"'\\#=") == StringRef::npos)
    return token.str();
  std::string out = "\"";
  for (char c : token) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + "\"";
}

std::string formatNumber(double x) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.6g", x);
  return s;
}

std::string formatShape(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || shaped.getRank() == 0)
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(
      shaped.getShape(), os,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << '?';
        else
          os << d;
      },
      "x");
  return s;
}

std::string formatType(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << cast<ShapedType>(type).getElementType();
  return s;
}

/// A report or schedule value as one schedule-file token.
std::string formatAttribute(Attribute attr) {
  if (auto s = dyn_cast<StringAttr>(attr))
    return quote(s.getValue());
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue() ? "true" : "false";
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return std::to_string(i.getInt());
  if (auto f = dyn_cast<FloatAttr>(attr))
    return formatNumber(f.getValueAsDouble());
  if (auto array = dyn_cast<ArrayAttr>(attr)) {
    std::string s;
    for (auto [i, element] : llvm::enumerate(array)) {
      std::string e;
      if (auto str = dyn_cast<StringAttr>(element))
        e = str.getValue().str();
      else
        e = formatAttribute(element);
      s += (i ? "," : "") + e;
    }
    return quote(s);
  }
  std::string s;
  llvm::raw_string_ostream(s) << attr;
  return quote(s);
}

/// Writes `key=value` fields of a report entry (all but `op` and `kind`).
void writeFields(raw_ostream &os, DictionaryAttr entry) {
  for (NamedAttribute field : entry)
    if (field.getName() != "op" && field.getName() != "kind")
      os << ' ' << field.getName().getValue() << '='
         << formatAttribute(field.getValue());
}

std::string getConstantName(Operation *op) {
  if (auto value = op->getAttrOfType<DenseResourceElementsAttr>("value"))
    return value.getRawHandle().getKey().str();
  return schedule::getOpName(op);
}

struct SitsReorderPass
    : public mlir::sits::impl::SitsReorderBase<SitsReorderPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<const target::TargetInfo *> resolved =
        resolveTarget(module, target);
    if (failed(resolved))
      return signalPassFailure();
    const target::TargetInfo *info = *resolved;
    if (profile != "latency" && profile != "memory") {
      module.emitError() << "profile must be 'latency' or 'memory', got '"
                         << profile << "'";
      return signalPassFailure();
    }
    if (memoryLimit < 0) {
      module.emitError() << "memory-limit must be non-negative, got "
                         << int64_t(memoryLimit);
      return signalPassFailure();
    }

    cost::CostModel model(*info, peakGflops, bandwidthGBs);
    int64_t limit = memoryLimit > 0 ? memoryLimit : model.getMemoryBytes();
    MLIRContext *ctx = &getContext();
    Builder b(ctx);

    std::string text;
    llvm::raw_string_ostream file(text);
    file << "sits-schedule " << kScheduleFormatVersion << "\n"
         << "# Written by sits-reorder; format: "
            "passes/Analysis/ScheduleFormat.md\n"
         << "target " << quote(info->name)
         << " vendor=" << target::stringifyVendor(info->vendor)
         << " memory_bytes=" << model.getMemoryBytes()
         << " bandwidth_gbs=" << formatNumber(model.getBandwidth() / 1e9)
         << " peak_fp32_gflops="
         << formatNumber(model.getPeakFlops(b.getF32Type()) / 1e9)
         << " peak_fp16_gflops="
         << formatNumber(model.getPeakFlops(b.getF16Type()) / 1e9)
         << " nominal=" << (model.isNominal() ? "true" : "false") << "\n"
         << "profile " << profile << "\n";

    SmallVector<Attribute> report;
    for (auto func : module.getOps<func::FuncOp>()) {
      // A layer's ops are scheduled in the layer, once for every call.
      if (func.isExternal() ||
          !(func.isPublic() || func->hasAttr(kLayerAttr)) ||
          !llvm::hasSingleElement(func.getBody()))
        continue;
      scheduleFunction(func, model, limit, report, file);
    }
    module->setAttr("sits.report.schedule", b.getArrayAttr(report));

    if (scheduleFile.empty())
      return;
    std::string error;
    auto output = openOutputFile(scheduleFile, &error);
    if (!output) {
      module.emitError() << "cannot write the schedule file: " << error;
      return signalPassFailure();
    }
    output->os() << text;
    output->keep();
  }

  void scheduleFunction(func::FuncOp func, const cost::CostModel &model,
                        int64_t limit, SmallVectorImpl<Attribute> &report,
                        raw_ostream &file) {
    Builder b(&getContext());
    Block &block = func.getBody().front();
    BlockSchedule sched(block, model);
    ArrayRef<Group> groups = sched.getGroups();
    SmallVector<int> before = sched.getCurrentOrder();
    SmallVector<int> order = sched.minimizeMemory();
    int64_t peakBefore = sched.computePeak(before);
    int64_t peakMin = sched.computePeak(order);
    if (profile == "latency") {
      // Interleaving may use memory the original order already needed,
      // never more.
      int64_t budget = std::max(peakMin, peakBefore);
      SmallVector<int> interleaved = sched.interleave(budget);
      if (interleaved.size() == order.size() &&
          sched.computePeak(interleaved) <= budget)
        order = interleaved;
    }
    int64_t peakAfter = sched.computePeak(order);

    int64_t weightBytes = 0;
    SmallVector<Operation *> constants;
    for (Operation &op : block.without_terminator())
      if (op.hasTrait<OpTrait::ConstantLike>() && op.getNumResults() == 1 &&
          isa<RankedTensorType>(op.getResult(0).getType())) {
        weightBytes += cost::getTensorBytes(op.getResult(0).getType());
        constants.push_back(&op);
      }
    if (peakAfter + weightBytes > limit)
      func.emitWarning() << "peak live memory of " << peakAfter
                         << " bytes plus " << weightBytes
                         << " bytes of weights exceeds the " << limit
                         << " bytes of memory of target '"
                         << model.getTarget().name << "'";

    numGroups += groups.size();
    for (auto [i, g] : llvm::enumerate(order))
      if (before[i] != g)
        ++numMoved;
    statPeakBefore += peakBefore;
    statPeakAfter += peakAfter;
    sched.apply(order);
    MemoryPlan plan = sched.planMemory(order);

    double seconds = 0;
    for (int g : order)
      seconds += groups[g].estimate.seconds;
    double overlapped = sched.estimateOverlappedSeconds(order);

    SmallVector<int> position(groups.size());
    for (auto [i, g] : llvm::enumerate(order))
      position[g] = i;

    auto entry = [&](StringRef op, StringRef kind,
                     ArrayRef<NamedAttribute> fields) {
      SmallVector<NamedAttribute> all{
          b.getNamedAttr("op", b.getStringAttr(op)),
          b.getNamedAttr("kind", b.getStringAttr(kind))};
      all.append(fields.begin(), fields.end());
      DictionaryAttr dict = b.getDictionaryAttr(all);
      report.push_back(dict);
      return dict;
    };
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    auto f64 = [&](double v) { return b.getF64FloatAttr(v); };
    auto str = [&](StringRef v) { return b.getStringAttr(v); };

    file << "function " << quote(func.getSymName()) << "\n";
    DictionaryAttr summary = entry(
        func.getSymName(), "summary",
        {b.getNamedAttr("target", str(model.getTarget().name)),
         b.getNamedAttr("profile", str(profile)),
         b.getNamedAttr("groups", i64(groups.size())),
         b.getNamedAttr("peak_bytes_before", i64(peakBefore)),
         b.getNamedAttr("peak_bytes_after", i64(peakAfter)),
         b.getNamedAttr("arena_bytes", i64(plan.arenaBytes)),
         b.getNamedAttr("weight_bytes", i64(weightBytes)),
         b.getNamedAttr("memory_limit", i64(limit)),
         b.getNamedAttr("est_time_us", f64(seconds * 1e6)),
         b.getNamedAttr("est_time_overlapped_us", f64(overlapped * 1e6)),
         b.getNamedAttr("nominal", i64(model.isNominal())),
         // Dynamic extents were counted as 1: bytes and times are per unit
         // of each dynamic dimension.
         b.getNamedAttr("dynamic", i64(llvm::any_of(groups, [](const Group &g) {
                          return g.cost.dynamic;
                        })))});
    file << "summary";
    writeFields(file, summary);
    file << "\n";

    for (auto [pos, g] : llvm::enumerate(order)) {
      const Group &group = groups[g];
      SmallVector<Attribute> names;
      for (Operation *op : group.ops)
        names.push_back(str(schedule::getOpName(op)));
      SmallVector<Attribute> after;
      for (int p : group.predecessors)
        after.push_back(i64(position[p]));
      DictionaryAttr dict = entry(
          schedule::getOpName(group.anchor), "group",
          {b.getNamedAttr("id", i64(pos)),
           b.getNamedAttr("anchor",
                          str(group.anchor->getName().getStringRef())),
           b.getNamedAttr(
               "bound", str(group.estimate.memoryBound ? "memory" : "compute")),
           b.getNamedAttr("est_time_us", f64(group.estimate.seconds * 1e6)),
           b.getNamedAttr("flops", i64(int64_t(group.cost.flops))),
           b.getNamedAttr("bytes", i64(group.cost.bytes())),
           b.getNamedAttr("after", b.getArrayAttr(after)),
           b.getNamedAttr("ops", b.getArrayAttr(names))});
      file << "group " << pos
           << " name=" << quote(schedule::getOpName(group.anchor));
      writeFields(file, dict);
      file << "\n";
    }
    int step = 0;
    for (auto [pos, g] : llvm::enumerate(order)) {
      for (Operation *op : groups[g].ops) {
        cost::OpCost c = cost::estimateOpCost(op);
        cost::Estimate e = model.estimate(c);
        DictionaryAttr dict = entry(
            schedule::getOpName(op), "op",
            {b.getNamedAttr("index", i64(step)),
             b.getNamedAttr("group", i64(pos)),
             b.getNamedAttr("name", str(op->getName().getStringRef())),
             b.getNamedAttr("bound", str(e.memoryBound ? "memory" : "compute")),
             b.getNamedAttr("est_time_us", f64(e.seconds * 1e6)),
             b.getNamedAttr("flops", i64(int64_t(c.flops))),
             b.getNamedAttr("bytes", i64(c.bytes()))});
        file << "op " << step++ << " op=" << quote(schedule::getOpName(op));
        writeFields(file, dict);
        file << "\n";
      }
    }

    // Precision per tensor: activations passed between groups, weights,
    // then the per-block decisions of sits-mixed-precision.
    ArrayRef<Buffer> buffers = sched.getBuffers();
    for (const Allocation &a : plan.allocations) {
      const Buffer &buffer = buffers[a.buffer];
      Operation *def = buffer.value.getDefiningOp();
      file << "tensor " << a.buffer
           << " name=" << quote(schedule::getOpName(def))
           << " result=" << cast<OpResult>(buffer.value).getResultNumber()
           << " group=" << position[buffer.producer]
           << " dtype=" << quote(formatType(buffer.value.getType()))
           << " shape=" << formatShape(buffer.value.getType())
           << " bytes=" << buffer.bytes << " offset=" << a.offset
           << " start=" << a.start << " end=" << a.end
           << " returned=" << (buffer.returned ? "true" : "false") << "\n";
    }
    for (Operation *op : constants) {
      Type type = op->getResult(0).getType();
      auto tensor = cast<RankedTensorType>(type);
      file << "weight name=" << quote(getConstantName(op))
           << " dtype=" << quote(formatType(type))
           << " shape=" << formatShape(type)
           << " bytes=" << cost::getTensorBytes(type) << " packed="
           << (isa_and_nonnull<PackedEncodingAttr>(tensor.getEncoding())
                   ? "true"
                   : "false")
           << "\n";
    }
    // Weight precision per block, and the KV pool's width per (layer, kv
    // head) that kv_dtype="auto" chose.
    for (auto [name, line] :
         {std::pair<StringRef, StringRef>{"sits.report.precision", "precision"},
          {"sits.report.kv_cache", "kv"}}) {
      auto entries = getOperation()->getAttrOfType<ArrayAttr>(name);
      if (!entries)
        continue;
      for (auto dict : entries.getAsRange<DictionaryAttr>()) {
        auto op = dict.getAs<StringAttr>("op");
        auto kind = dict.getAs<StringAttr>("kind");
        file << line << " op=" << quote(op ? op.getValue() : "?")
             << " kind=" << quote(kind ? kind.getValue() : "?");
        writeFields(file, dict);
        file << "\n";
      }
    }
    file << "memory peak_before=" << peakBefore << " peak_after=" << peakAfter
         << " arena=" << plan.arenaBytes << " limit=" << limit
         << " weights=" << weightBytes << "\n"
         << "end\n";
  }
};

} // namespace
