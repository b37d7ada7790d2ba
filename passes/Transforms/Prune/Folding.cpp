//===- Folding.cpp - Weight folding, identities and dead code -------------===//
//
// The non-structural half of sits-prune: weight-only subgraphs become
// constants without duplicating weights (resources are read and written
// directly, which upstream folders cannot), identities go (SITS ops through
// their own folders), and what is left dead is erased.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/ConstantData.h"
#include "passes/Transforms/Prune/WeightValues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cstring>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::prune;

//===----------------------------------------------------------------------===//
// Constant folding
//===----------------------------------------------------------------------===//

/// Transposes row-major `bytes` of `shape` by `permutation`.
static AsmResourceBlob transposeBytes(ArrayRef<char> bytes,
                                      int64_t elementBytes,
                                      ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> permutation) {
  int64_t rank = shape.size();
  SmallVector<int64_t> inStrides = getStrides(shape), outShape(rank),
                       strideOfOut(rank);
  for (int64_t d = 0; d < rank; ++d) {
    outShape[d] = shape[permutation[d]];
    strideOfOut[d] = inStrides[permutation[d]];
  }
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(bytes.size(), 64);
  char *out = blob.getMutableData().data();
  SmallVector<int64_t> index(rank, 0);
  int64_t elements = int64_t(bytes.size()) / elementBytes;
  for (int64_t i = 0; i < elements; ++i) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d)
      source += index[d] * strideOfOut[d];
    std::memcpy(out + i * elementBytes, bytes.data() + source * elementBytes,
                elementBytes);
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == outShape[d]; --d)
      index[d] = 0;
  }
  return blob;
}

/// Resources cannot be read by upstream folders: hand them inline data.
static Attribute asFoldOperand(Attribute attr) {
  auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(attr);
  if (!resource)
    return attr;
  std::optional<ArrayRef<char>> bytes = getConstantBytes(resource);
  if (!bytes)
    return {};
  return DenseElementsAttr::getFromRawBuffer(resource.getType(), *bytes);
}

FailureOr<Value> mlir::sits::foldConstantSubgraph(RewriterBase &rewriter,
                                                  Operation *op) {
  if (op->getNumResults() != 1 || isa<arith::ConstantOp>(op) || !isPure(op))
    return failure();
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!resultType || !resultType.hasStaticShape())
    return failure();
  // Ops whose folders evaluate constant operands (arith on tensors, the
  // tensor reshapes, casts and slices), and transposes evaluated here. Any
  // other op would have its constant operands copied for nothing.
  auto transpose = dyn_cast<linalg::TransposeOp>(op);
  if (!transpose && !isa<arith::ArithDialect>(op->getDialect()) &&
      !isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::ReshapeOp,
           tensor::CastOp, tensor::ExtractSliceOp>(op))
    return failure();
  SmallVector<Value> inputs = transpose
                                  ? SmallVector<Value>{transpose.getInput()}
                                  : SmallVector<Value>(op->getOperands());
  SmallVector<Attribute> operands;
  for (Value input : inputs) {
    Attribute attr;
    if (!matchPattern(input, m_Constant(&attr)))
      return failure();
    // Folding must not duplicate weights: a non-splat constant operand has
    // to die with this op.
    auto dense = dyn_cast<DenseElementsAttr>(attr);
    if (isa<ElementsAttr>(attr) && !(dense && dense.isSplat()) &&
        !input.hasOneUse())
      return failure();
    operands.push_back(attr);
  }

  TypedAttr folded;
  StringRef suffix = ".folded";
  if (transpose) {
    auto value = dyn_cast<ElementsAttr>(operands[0]);
    auto dense = dyn_cast_or_null<DenseElementsAttr>(value);
    if (dense && dense.isSplat()) {
      folded = dense.resizeSplat(resultType);
    } else {
      std::optional<ArrayRef<char>> bytes =
          value ? getConstantBytes(value) : std::nullopt;
      if (!bytes)
        return failure();
      auto type = cast<RankedTensorType>(value.getType());
      folded = makeConstantLike(value, resultType,
                                transposeBytes(*bytes, getElementBytes(type),
                                               type.getShape(),
                                               transpose.getPermutation()),
                                ".t");
    }
  } else {
    for (Attribute &attr : operands)
      if (!(attr = asFoldOperand(attr)))
        return failure();
    SmallVector<OpFoldResult> results;
    if (failed(op->fold(operands, results)) || results.size() != 1)
      return failure();
    auto value =
        dyn_cast_or_null<DenseElementsAttr>(dyn_cast<Attribute>(results[0]));
    if (!value || value.getType() != resultType)
      return failure();
    folded = value;
    // Large results go back into a resource, not into the IR text.
    if (!value.isSplat() && getStorageBytes(value) >= 1024) {
      ArrayRef<char> raw = value.getRawData();
      AsmResourceBlob blob = HeapAsmResourceBlob::allocate(raw.size(), 64);
      std::memcpy(blob.getMutableData().data(), raw.data(), raw.size());
      auto &manager =
          DenseResourceElementsHandle::getManagerInterface(op->getContext());
      folded = DenseResourceElementsAttr::get(
          resultType, manager.insert(getReportName(op->getLoc()) + suffix.str(),
                                     std::move(blob)));
    }
  }
  rewriter.setInsertionPoint(op);
  Value constant = createConstant(rewriter, op->getLoc(), folded);
  rewriter.replaceOp(op, constant);
  return constant;
}

//===----------------------------------------------------------------------===//
// Identities
//===----------------------------------------------------------------------===//

/// Whether `value` is a constant whose every element equals `expected`.
static bool isConstantSplat(Value value, double expected) {
  Attribute attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return false;
  if (auto scalar = dyn_cast<FloatAttr>(attr))
    return scalar.getValueAsDouble() == expected;
  auto dense = dyn_cast<DenseFPElementsAttr>(attr);
  return dense && dense.isSplat() &&
         toDouble(dense.getSplatValue<APFloat>()) == expected;
}

/// The operand `op` passes through unchanged, if it is an identity.
static Value getIdentitySource(Operation *op) {
  if (op->getNumResults() != 1)
    return {};
  Type type = op->getResult(0).getType();
  auto sameType = [&](Value v) {
    return v && v.getType() == type ? v : Value();
  };
  // A reshape between equal dynamic types may still change the extents
  // (its shape operand is data): only a static one is an identity.
  if (isa<tensor::ReshapeOp>(op))
    return cast<ShapedType>(type).hasStaticShape() ? sameType(op->getOperand(0))
                                                   : Value();
  if (isa<tensor::CastOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
          arith::ExtFOp, arith::TruncFOp>(op))
    return sameType(op->getOperand(0));
  if (auto transpose = dyn_cast<linalg::TransposeOp>(op)) {
    ArrayRef<int64_t> perm = transpose.getPermutation();
    for (int64_t d = 0, e = perm.size(); d < e; ++d)
      if (perm[d] != d)
        return {};
    return sameType(transpose.getInput());
  }
  // SITS ops know their own identities (`sits.activation <none>`,
  // `relu(relu(x))`, `quantize(dequantize(q))`): their folders say.
  if (isa<SitsDialect>(op->getDialect())) {
    SmallVector<Attribute> noConstants(op->getNumOperands());
    SmallVector<OpFoldResult> results;
    if (failed(op->fold(noConstants, results)) || results.size() != 1)
      return {};
    return sameType(dyn_cast<Value>(results[0]));
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    auto sourceType = slice.getSourceType();
    bool full = sourceType.hasStaticShape() &&
                llvm::all_of(slice.getStaticOffsets(),
                             [](int64_t o) { return o == 0; }) &&
                llvm::all_of(slice.getStaticStrides(),
                             [](int64_t s) { return s == 1; }) &&
                slice.getStaticSizes() == sourceType.getShape();
    return full ? sameType(slice.getSource()) : Value();
  }
  if (auto pad = dyn_cast<tensor::PadOp>(op)) {
    auto zero = [](int64_t p) { return p == 0; };
    return llvm::all_of(pad.getStaticLow(), zero) &&
                   llvm::all_of(pad.getStaticHigh(), zero)
               ? sameType(pad.getSource())
               : Value();
  }
  // x * 1, 1 * x, x / 1, x + 0, 0 + x, x - 0: `+ 0` may turn a -0 into +0,
  // the only difference it makes.
  Value lhs = op->getNumOperands() == 2 ? op->getOperand(0) : Value();
  Value rhs = op->getNumOperands() == 2 ? op->getOperand(1) : Value();
  if (isa<arith::MulFOp>(op)) {
    if (isConstantSplat(rhs, 1.0))
      return sameType(lhs);
    if (isConstantSplat(lhs, 1.0))
      return sameType(rhs);
  }
  if (isa<arith::DivFOp>(op) && isConstantSplat(rhs, 1.0))
    return sameType(lhs);
  if (isa<arith::AddFOp>(op)) {
    if (isConstantSplat(rhs, 0.0))
      return sameType(lhs);
    if (isConstantSplat(lhs, 0.0))
      return sameType(rhs);
  }
  if (isa<arith::SubFOp>(op) && isConstantSplat(rhs, 0.0))
    return sameType(lhs);
  return {};
}

FailureOr<Value> mlir::sits::removeIdentityOp(RewriterBase &rewriter,
                                              Operation *op) {
  Value source = getIdentitySource(op);
  if (!source)
    return rewriter.notifyMatchFailure(op, "not an identity");
  rewriter.replaceOp(op, source);
  return source;
}

//===----------------------------------------------------------------------===//
// Dead code
//===----------------------------------------------------------------------===//

int64_t mlir::sits::eraseDeadOps(RewriterBase &rewriter, Region &region) {
  int64_t erased = 0;
  for (Block &block : region)
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isOpTriviallyDead(&op)) {
        rewriter.eraseOp(&op);
        ++erased;
      }
  return erased;
}
