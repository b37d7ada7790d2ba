//===- SitsDialect.cpp - SITS dialect -------------------------------------===//

#include "dialects/Sits/IR/SitsOps.h"

#include "sits/runtime/kivi_layout.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

using namespace mlir;
using namespace mlir::sits;

#include "dialects/Sits/IR/SitsDialect.cpp.inc"

void SitsDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Sits/IR/SitsOps.cpp.inc"
      >();
  registerAttributes();
}

/// `sits.weights`: [{name = string, offset = i64, value = elements}, ...],
/// written by sits-externalize-weights.
static LogicalResult verifyWeightsLayout(Operation *op, Attribute value) {
  auto entries = dyn_cast<ArrayAttr>(value);
  if (!entries)
    return op->emitError() << "'" << SitsDialect::getWeightsAttrName()
                           << "' must be an array, got " << value;
  for (Attribute entry : entries) {
    auto dict = dyn_cast<DictionaryAttr>(entry);
    if (!dict || !isa_and_nonnull<StringAttr>(dict.get("name")) ||
        !isa_and_nonnull<IntegerAttr>(dict.get("offset")) ||
        !isa_and_nonnull<ElementsAttr>(dict.get("value")))
      return op->emitError()
             << "'" << SitsDialect::getWeightsAttrName()
             << "' entries must be {name = string, offset = integer, value = "
                "elements}, got "
             << entry;
  }
  return success();
}

/// `sits.report.<pass>`: [{op = ..., kind = string, ...}, ...], the
/// decisions a graph pass made, for the explain report and schedule file.
/// Each pass owns its keys beyond `op` and `kind`.
static LogicalResult verifyReport(Operation *op, NamedAttribute attr) {
  auto entries = dyn_cast<ArrayAttr>(attr.getValue());
  if (!entries || !llvm::all_of(entries, llvm::IsaPred<DictionaryAttr>))
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be an array of dictionaries, got "
                           << attr.getValue();
  return success();
}

/// `sits.input_stats` on a contraction: {mean, mean_square}, float elements
/// of one entry per input channel (K of a matmul, C of a convolution),
/// measured on a calibration set and read by sits-mixed-precision.
static LogicalResult verifyInputStats(Operation *op, NamedAttribute attr) {
  if (!isa<MatmulOp, QMatmulOp, ConvOp, QConvOp>(op))
    return op->emitError() << "'sits.input_stats' is only valid on "
                              "sits.matmul, sits.qmatmul, sits.conv and "
                              "sits.qconv";
  auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
  auto isVector = [](Attribute a) {
    auto e = dyn_cast_or_null<DenseElementsAttr>(a);
    return e && isa<FloatType>(e.getElementType()) &&
           e.getType().getRank() == 1;
  };
  if (!dict || !isVector(dict.get("mean")) ||
      !isVector(dict.get("mean_square")) ||
      cast<DenseElementsAttr>(dict.get("mean")).getNumElements() !=
          cast<DenseElementsAttr>(dict.get("mean_square")).getNumElements())
    return op->emitError() << "'sits.input_stats' must be {mean, "
                              "mean_square}, two 1-D float elements "
                              "attributes of equal size, got "
                           << attr.getValue();
  return success();
}

LogicalResult SitsDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName().getValue() == "sits.input_stats")
    return verifyInputStats(op, attr);
  if (attr.getName().getValue().starts_with("sits.report.")) {
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' is only valid on a builtin.module";
    return verifyReport(op, attr);
  }
  // A function sits-outline-layers made of a model's repeated layer.
  if (attr.getName().getValue() == "sits.layer") {
    if (!isa<FunctionOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'sits.layer' must be a unit attribute on a function";
    return success();
  }
  // A layer function the ONNX importer emitted once, for sits-inline-layers
  // to inline at each of its calls.
  if (attr.getName().getValue() == "sits.inline") {
    if (!isa<FunctionOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'sits.inline' must be a unit attribute on a function";
    return success();
  }
  // A register tile's K loop whose weights are read from memory once, for
  // sits-cpu-lower-vectors to prefetch, and a loop over row blocks of which
  // only the first iteration reads them so.
  StringRef name = attr.getName().getValue();
  if (name == "sits.streamed" || name == "sits.first_streams") {
    if (!isa<LoopLikeOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a unit attribute on a loop";
    return success();
  }
  // The ONNX node names of such a function's layer, or of a call's.
  if (attr.getName().getValue() == "sits.node_names") {
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    if (!isa<FunctionOpInterface, CallOpInterface>(op) || !names ||
        !llvm::all_of(names, llvm::IsaPred<StringAttr>))
      return op->emitError() << "'sits.node_names' must be an array of "
                                "strings on a function or a call, got "
                             << attr.getValue();
    return success();
  }
  // A linalg op a runtime kernel computes, and one re-laying out weight
  // codes for such a kernel (passes/Codegen/Common/Ukernels.h): the name of
  // the kernel or layout.
  if (name == "sits.ukernel" || name == "sits.weight_layout") {
    if (!isa<StringAttr>(attr.getValue()) || op->getNumRegions() != 1)
      return op->emitError()
             << "'" << name << "' must be a string attribute on a linalg op";
    return success();
  }
  if (attr.getName() != getTargetAttrName() &&
      attr.getName() != getWeightsAttrName() &&
      attr.getName() != getWeightsPlacedAttrName())
    return op->emitError() << "unknown SITS attribute '"
                           << attr.getName().getValue() << "'";
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' is only valid on a builtin.module";
  if (attr.getName() == getWeightsAttrName())
    return verifyWeightsLayout(op, attr.getValue());
  if (attr.getName() == getWeightsPlacedAttrName()) {
    auto placed = dyn_cast<IntegerAttr>(attr.getValue());
    if (!placed || placed.getValue().isNegative())
      return op->emitError()
             << "'" << getWeightsPlacedAttrName()
             << "' must be a non-negative integer, got " << attr.getValue();
    return success();
  }
  if (!isa<TargetAttr>(attr.getValue()))
    return op->emitError() << "'" << getTargetAttrName()
                           << "' must be a #sits.target attribute, got "
                           << attr.getValue();
  return success();
}

// Argument and result attributes of compiler-rewritten signatures:
// `sits.name` names an argument a pass added (the runtime's name for it),
// `sits.updates = i` marks a result as argument i updated in place, and
// `sits.status = [messages]` marks the i32 scalar result that reports the
// model's run-time checks (0, or k when check k failed; the runtime's
// status argument), and `sits.kv_quantization = "per_token_head"` marks a
// KV pool argument of INT8 rows, `"kivi"` one of KIVI blocks whose
// `sits.kivi = [bits, layers, kv heads, block size, head dim]` gives the
// geometry (sits-page-kv-cache).
// Other `sits.*` ones are rejected rather than let a misspelt or misplaced
// attribute pass silently.
/// `sits.status` on an i32 scalar: the graph's tensor<i32> result, then
/// the memref<i32> result, the out-parameter it becomes and, in the LLVM
/// dialect, that parameter's pointer (not a shaped type: not checked).
static LogicalResult verifyStatusAttr(Operation *op, NamedAttribute attr,
                                      StringRef what, unsigned index,
                                      Type type) {
  auto messages = dyn_cast<ArrayAttr>(attr.getValue());
  auto shaped = dyn_cast_or_null<ShapedType>(type);
  if (!messages || messages.empty() ||
      !llvm::all_of(messages, llvm::IsaPred<StringAttr>) || !type ||
      (shaped && (!shaped.hasRank() || shaped.getRank() != 0 ||
                  !shaped.getElementType().isSignlessInteger(32))))
    return op->emitError() << "'sits.status' on " << what << " " << index
                           << " must be a non-empty array of strings on an "
                              "i32 scalar "
                           << what << ", got " << attr.getValue();
  return success();
}

LogicalResult SitsDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  if (attr.getName().getValue() == "sits.status") {
    auto func = dyn_cast<FunctionOpInterface>(op);
    return verifyStatusAttr(op, attr, "argument", argIndex,
                            func ? func.getArgumentTypes()[argIndex] : Type());
  }
  if (attr.getName().getValue() == "sits.name") {
    auto name = dyn_cast<StringAttr>(attr.getValue());
    if (!name || name.getValue().empty())
      return op->emitError()
             << "'sits.name' on argument " << argIndex
             << " must be a non-empty string, got " << attr.getValue();
    return success();
  }
  if (attr.getName().getValue() == "sits.kv_quantization") {
    auto scheme = dyn_cast<StringAttr>(attr.getValue());
    if (!scheme ||
        (scheme.getValue() != "per_token_head" && scheme.getValue() != "kivi" &&
         scheme.getValue() != "per_token_group"))
      return op->emitError()
             << "'sits.kv_quantization' on argument " << argIndex
             << " must be \"per_token_head\", \"kivi\" or "
                "\"per_token_group\", got "
             << attr.getValue();
    return success();
  }
  if (attr.getName().getValue() == "sits.kivi") {
    // Mixed widths (bits 512): then the width, 4 or 2, of each (layer,
    // kv head).
    auto geometry = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    auto valid = [&] {
      if (!geometry || geometry.size() < 5 ||
          llvm::any_of(geometry.asArrayRef().take_front(5),
                       [](int64_t v) { return v <= 0; }))
        return false;
      ArrayRef<int64_t> g = geometry.asArrayRef();
      if (g[0] != ::sits::runtime::kivi::kMixedWidths)
        return g.size() == 5;
      return g[1] <= (1 << 20) && g[2] <= (1 << 20) &&
             int64_t(g.size()) == 5 + g[1] * g[2] &&
             llvm::all_of(g.drop_front(5),
                          [](int64_t w) { return w == 4 || w == 2; });
    };
    if (!valid())
      return op->emitError()
             << "'sits.kivi' on argument " << argIndex
             << " must be [bits, layers, kv heads, block size, head dim], "
                "all positive, with bits 512 followed by the width (4 or 2) "
                "of each (layer, kv head), got "
             << attr.getValue();
    return success();
  }
  return op->emitError() << "unknown SITS argument attribute '"
                         << attr.getName().getValue() << "' on argument "
                         << argIndex;
}

LogicalResult SitsDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  if (attr.getName().getValue() == "sits.updates") {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!index || !func || index.getInt() < 0 ||
        index.getInt() >= int64_t(func.getNumArguments()) ||
        func.getArgumentTypes()[index.getInt()] !=
            func.getResultTypes()[resultIndex])
      return op->emitError()
             << "'sits.updates' on result " << resultIndex
             << " must be the index of an argument of the result's type, got "
             << attr.getValue();
    return success();
  }
  if (attr.getName().getValue() == "sits.status") {
    auto func = dyn_cast<FunctionOpInterface>(op);
    return verifyStatusAttr(op, attr, "result", resultIndex,
                            func ? func.getResultTypes()[resultIndex] : Type());
  }
  return op->emitError() << "unknown SITS result attribute '"
                         << attr.getName().getValue() << "' on result "
                         << resultIndex;
}
