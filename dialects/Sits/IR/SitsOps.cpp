//===- SitsOps.cpp - SITS graph-level operations --------------------------===//
//
// Shape inference doubles as shape verification: every op whose result
// shape follows from its operands computes it in inferReturnTypes and
// reports the first inconsistency there, so the same message reaches a
// parser, a pass that builds the op, and a Python builder.
//
//===----------------------------------------------------------------------===//

#include "dialects/Sits/IR/SitsOps.h"

#include "sits/runtime/kivi_layout.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <type_traits>

using namespace mlir;
using namespace mlir::sits;

#include "dialects/Sits/IR/SitsInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/Sits/IR/SitsOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

namespace {

/// Prints a shape as `[2, ?, 4]` for diagnostics.
struct ShapeStr {
  ArrayRef<int64_t> shape;
};
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, ShapeStr s) {
  os << '[';
  llvm::interleaveComma(s.shape, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << '?';
    else
      os << d;
  });
  return os << ']';
}
Diagnostic &operator<<(Diagnostic &diag, ShapeStr s) {
  std::string str;
  llvm::raw_string_ostream os(str);
  os << s;
  return diag << str;
}

/// Two extents that may be equal at run time.
/// Whether every value of float type `narrow` is a value of `wide`: f16 and
/// bf16 in f32 or f64, f32 in f64.
bool widensExactly(Type narrow, Type wide) {
  auto n = dyn_cast<FloatType>(narrow), w = dyn_cast<FloatType>(wide);
  if (!n || !w || n == w)
    return false;
  if (!(n.isF16() || n.isBF16() || n.isF32()) || !(w.isF32() || w.isF64()))
    return false;
  return n.getWidth() < w.getWidth();
}

bool compatibleExtent(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// The static one of two compatible extents (dynamic when both are).
int64_t mergeExtent(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) ? b : a;
}

/// NumPy broadcasting of two extents; a static extent other than 1 wins over
/// a dynamic one. Fails on two different static extents neither of which is 1.
std::optional<int64_t> broadcastExtent(int64_t a, int64_t b) {
  if (a == 1)
    return b;
  if (b == 1)
    return a;
  if (ShapedType::isDynamic(a))
    return b;
  if (ShapedType::isDynamic(b))
    return a;
  if (a == b)
    return a;
  return std::nullopt;
}

/// NumPy broadcasting of two shapes, aligned at their trailing dimension.
LogicalResult broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                              SmallVectorImpl<int64_t> &result) {
  size_t rank = std::max(a.size(), b.size());
  result.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t ea = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t eb = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    std::optional<int64_t> e = broadcastExtent(ea, eb);
    if (!e)
      return failure();
    result[i] = *e;
  }
  return success();
}

/// Maps a possibly negative axis into [0, rank); nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The more static of two compatible shapes of equal rank.
SmallVector<int64_t> mergeShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  SmallVector<int64_t> merged;
  for (auto [x, y] : llvm::zip_equal(a, b))
    merged.push_back(mergeExtent(x, y));
  return merged;
}

/// An error reported at `loc`, prefixed like Operation::emitOpError.
template <typename OpTy> InFlightDiagnostic opError(Location loc) {
  return emitError(loc) << "'" << OpTy::getOperationName() << "' op ";
}

/// Emits `message` when inference runs with a location (parsing, verifying,
/// building with diagnostics); stays silent otherwise, as inference may be
/// probed speculatively.
template <typename OpTy, typename... Args>
LogicalResult inferError(std::optional<Location> loc, Args &&...args) {
  if (loc) {
    InFlightDiagnostic diag = opError<OpTy>(*loc);
    (diag << ... << std::forward<Args>(args));
  }
  return failure();
}

/// Checks the optional 1-D `bias` of a contraction producing `extent`
/// channels of `elementType`. A static bias extent refines a dynamic
/// `extent`, so the result type cannot contradict the bias.
template <typename OpTy>
LogicalResult checkBias(std::optional<Location> loc, Value bias,
                        int64_t &extent, Type elementType) {
  if (!bias)
    return success();
  auto type = cast<RankedTensorType>(bias.getType());
  if (type.getRank() != 1 || !compatibleExtent(type.getDimSize(0), extent))
    return inferError<OpTy>(loc, "bias must be a 1-D tensor of ",
                            ShapeStr{{extent}}, " elements, got ",
                            ShapeStr{type.getShape()});
  if (type.getElementType() != elementType)
    return inferError<OpTy>(loc, "bias element type ", type.getElementType(),
                            " differs from ", elementType);
  extent = mergeExtent(extent, type.getDimSize(0));
  return success();
}

/// Result types are compatible when every pair has the same element type and
/// encoding and no conflicting static extent: the declared type may be more
/// static than the inferred one.
bool compatibleTensorTypes(TypeRange inferred, TypeRange declared) {
  if (inferred.size() != declared.size())
    return false;
  for (auto [a, b] : llvm::zip_equal(inferred, declared)) {
    auto ta = dyn_cast<RankedTensorType>(a);
    auto tb = dyn_cast<RankedTensorType>(b);
    if (!ta || !tb || ta.getElementType() != tb.getElementType() ||
        ta.getEncoding() != tb.getEncoding() ||
        failed(verifyCompatibleShape(ta, tb)))
      return false;
  }
  return true;
}

/// Checks one quantization parameter tensor (a scale or a zero point; `what`
/// names it) against the quantized tensor: its rank selects per-tensor,
/// per-channel or per-group granularity.
LogicalResult
verifyQuantParamShape(function_ref<InFlightDiagnostic()> emitError,
                      StringRef what, ArrayRef<int64_t> shape,
                      ArrayRef<int64_t> paramShape, std::optional<int64_t> dim,
                      std::optional<int64_t> blockSize) {
  int64_t rank = shape.size();
  if (paramShape.empty()) {
    if (dim || blockSize)
      return emitError() << "a per-tensor (0-D) " << what
                         << " takes no axis or block_size";
  } else if (blockSize) {
    if (!dim)
      return emitError() << "a per-group " << what << " needs an axis";
    if (static_cast<int64_t>(paramShape.size()) != rank)
      return emitError() << "a per-group " << what
                         << " must have the quantized tensor's rank " << rank
                         << ", got " << ShapeStr{paramShape};
    for (int64_t i = 0; i < rank; ++i) {
      int64_t expected = shape[i];
      if (i == *dim && !ShapedType::isDynamic(expected))
        expected = ceilDiv(expected, *blockSize);
      if (!compatibleExtent(expected, paramShape[i]))
        return emitError() << "per-group " << what << " of shape "
                           << ShapeStr{paramShape}
                           << " does not match a tensor of shape "
                           << ShapeStr{shape} << " in groups of " << *blockSize
                           << " along axis " << *dim;
    }
  } else if (paramShape.size() == 1) {
    if (!dim)
      return emitError() << "a per-channel (1-D) " << what << " needs an axis";
    if (!compatibleExtent(paramShape[0], shape[*dim]))
      return emitError() << "per-channel " << what << " has "
                         << ShapeStr{paramShape} << " elements but axis "
                         << *dim << " has extent " << ShapeStr{shape[*dim]};
  } else {
    return emitError() << what
                       << " must be 0-D (per tensor), 1-D with an axis (per "
                          "channel), or of the quantized tensor's rank with "
                          "an axis and a block_size (per group); got "
                       << ShapeStr{paramShape};
  }
  return success();
}

/// Checks a quantization parameter set (shared by quantize, dequantize and
/// qmatmul): the scale and the zero point each match the quantized tensor,
/// and each other.
LogicalResult verifyQuantParams(function_ref<InFlightDiagnostic()> emitError,
                                RankedTensorType valueType,
                                RankedTensorType scaleType,
                                RankedTensorType zeroPointType,
                                std::optional<int64_t> axis,
                                std::optional<int64_t> blockSize) {
  int64_t rank = valueType.getRank();
  ArrayRef<int64_t> shape = valueType.getShape();
  std::optional<int64_t> dim;
  if (axis) {
    dim = normalizeAxis(*axis, rank);
    if (!dim)
      return emitError() << "axis " << *axis
                         << " is out of range for a tensor of rank " << rank;
  }
  if (blockSize && *blockSize <= 0)
    return emitError() << "block_size must be positive, got " << *blockSize;
  if (failed(verifyQuantParamShape(emitError, "scale", shape,
                                   scaleType.getShape(), dim, blockSize)))
    return failure();
  if (!zeroPointType)
    return success();
  if (isa<FloatType>(valueType.getElementType()))
    return emitError() << "fp8 quantization takes no zero point";
  if (failed(verifyCompatibleShape(zeroPointType.getShape(),
                                   scaleType.getShape())))
    return emitError() << "zero point shape "
                       << ShapeStr{zeroPointType.getShape()}
                       << " differs from scale shape "
                       << ShapeStr{scaleType.getShape()};
  return verifyQuantParamShape(emitError, "zero point", shape,
                               zeroPointType.getShape(), dim, blockSize);
}

/// The adaptor with ODS default values filled in. Inference runs before the
/// op exists (e.g. from a Python builder), when attributes left at their
/// default have not been materialized yet; reading them through the adaptor
/// would dereference a null attribute. (SITS ops have no regions.)
template <typename OpTy>
typename OpTy::Adaptor withDefaults(MLIRContext *context,
                                    typename OpTy::Adaptor adaptor) {
  typename OpTy::Properties properties = adaptor.getProperties();
  OpTy::populateDefaultProperties(
      OperationName(OpTy::getOperationName(), context), properties);
  return typename OpTy::Adaptor(adaptor.getOperands(), adaptor.getAttributes(),
                                properties);
}

RankedTensorType rankedOrNull(Value value) {
  return value ? cast<RankedTensorType>(value.getType()) : RankedTensorType();
}

} // namespace

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = dyn_cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = dyn_cast<RankedTensorType>(adaptor.getRhs().getType());
  if (!lhs || !rhs)
    return inferError<MatmulOp>(loc, "operands must be ranked tensors");
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return inferError<MatmulOp>(loc, "operands must have rank >= 2, got ",
                                lhs.getRank(), " and ", rhs.getRank());
  // Weights may be stored in a narrower float type than the activations
  // (fp16/bf16 weights of an fp32 model): widened exactly, in registers.
  if (lhs.getElementType() != rhs.getElementType() &&
      !widensExactly(rhs.getElementType(), lhs.getElementType()))
    return inferError<MatmulOp>(
        loc, "operand element types differ: ", lhs.getElementType(), " vs ",
        rhs.getElementType(),
        " (the rhs may only be a narrower float the lhs type holds exactly)");
  ArrayRef<int64_t> ls = lhs.getShape(), rs = rhs.getShape();
  int64_t r0 = ls.size() - 2, r1 = ls.size() - 1;
  int64_t m = adaptor.getTransposeLhs() ? ls[r1] : ls[r0];
  int64_t kl = adaptor.getTransposeLhs() ? ls[r0] : ls[r1];
  int64_t s0 = rs.size() - 2, s1 = rs.size() - 1;
  int64_t kr = adaptor.getTransposeRhs() ? rs[s1] : rs[s0];
  int64_t n = adaptor.getTransposeRhs() ? rs[s0] : rs[s1];
  if (!compatibleExtent(kl, kr))
    return inferError<MatmulOp>(loc, "contracting dimensions differ: lhs has ",
                                ShapeStr{{kl}}, ", rhs has ", ShapeStr{{kr}});
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(ls.drop_back(2), rs.drop_back(2), shape)))
    return inferError<MatmulOp>(loc, "batch dimensions ",
                                ShapeStr{ls.drop_back(2)}, " and ",
                                ShapeStr{rs.drop_back(2)}, " do not broadcast");
  if (failed(
          checkBias<MatmulOp>(loc, adaptor.getBias(), n, lhs.getElementType())))
    return failure();
  shape.append({m, n});
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

bool MatmulOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleTensorTypes(l, r);
}

//===----------------------------------------------------------------------===//
// ConvOp
//===----------------------------------------------------------------------===//

int64_t ConvOp::getNumSpatialDims() {
  return getInput().getType().getRank() - 2;
}

static SmallVector<int64_t> valuesOr(std::optional<ArrayRef<int64_t>> values,
                                     size_t size, int64_t fill) {
  if (values)
    return llvm::to_vector(*values);
  return SmallVector<int64_t>(size, fill);
}

SmallVector<int64_t> ConvOp::getStridesOrDefault() {
  return valuesOr(getStrides(), getNumSpatialDims(), 1);
}
SmallVector<int64_t> ConvOp::getPaddingOrDefault() {
  return valuesOr(getPadding(), 2 * getNumSpatialDims(), 0);
}
SmallVector<int64_t> ConvOp::getDilationsOrDefault() {
  return valuesOr(getDilations(), getNumSpatialDims(), 1);
}

/// The result type of sits.conv and sits.qconv, which share operands and
/// attributes; only sits.conv's filter has the input's element type (a
/// qconv filter holds INT8 codes).
template <typename OpTy>
static LogicalResult inferConvResultType(MLIRContext *context,
                                         std::optional<Location> loc,
                                         typename OpTy::Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  adaptor = withDefaults<OpTy>(context, adaptor);
  auto input = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  auto filter = dyn_cast<RankedTensorType>(adaptor.getFilter().getType());
  if (!input || !filter)
    return inferError<OpTy>(loc, "operands must be ranked tensors");
  int64_t rank = input.getRank();
  if (rank < 3 || rank > 5)
    return inferError<OpTy>(
        loc, "input must be [N, C, D1, ..., Dk] with 1 <= k <= 3, got rank ",
        rank);
  if (filter.getRank() != rank)
    return inferError<OpTy>(loc, "filter rank ", filter.getRank(),
                            " differs from input rank ", rank);
  if (std::is_same_v<OpTy, ConvOp> &&
      input.getElementType() != filter.getElementType())
    return inferError<OpTy>(
        loc, "operand element types differ: ", input.getElementType(), " vs ",
        filter.getElementType());
  size_t k = rank - 2;
  SmallVector<int64_t> strides = valuesOr(adaptor.getStrides(), k, 1);
  SmallVector<int64_t> padding = valuesOr(adaptor.getPadding(), 2 * k, 0);
  SmallVector<int64_t> dilations = valuesOr(adaptor.getDilations(), k, 1);
  if (strides.size() != k || dilations.size() != k || padding.size() != 2 * k)
    return inferError<OpTy>(loc, "expected ", k, " strides, ", k,
                            " dilations and ", 2 * k, " padding values for ", k,
                            " spatial dimensions");
  if (llvm::any_of(strides, [](int64_t s) { return s <= 0; }) ||
      llvm::any_of(dilations, [](int64_t d) { return d <= 0; }))
    return inferError<OpTy>(loc, "strides and dilations must be positive");
  if (llvm::any_of(padding, [](int64_t p) { return p < 0; }))
    return inferError<OpTy>(loc, "padding must be non-negative");

  int64_t groups = adaptor.getGroups();
  ArrayRef<int64_t> in = input.getShape(), w = filter.getShape();
  if (groups <= 0)
    return inferError<OpTy>(loc, "groups must be positive, got ", groups);
  if (!ShapedType::isDynamic(w[0]) && w[0] % groups != 0)
    return inferError<OpTy>(loc, "output channels ", w[0],
                            " are not divisible by groups ", groups);
  int64_t expectedChannels = ShapedType::isDynamic(w[1]) ? w[1] : w[1] * groups;
  if (!compatibleExtent(in[1], expectedChannels))
    return inferError<OpTy>(
        loc, "input has ", ShapeStr{{in[1]}},
        " channels but the filter expects ", ShapeStr{{expectedChannels}}, " (",
        ShapeStr{{w[1]}}, " per group x ", groups, " groups)");

  int64_t outChannels = w[0];
  if (failed(checkBias<OpTy>(loc, adaptor.getBias(), outChannels,
                             input.getElementType())))
    return failure();
  SmallVector<int64_t> shape = {in[0], outChannels};
  for (size_t i = 0; i < k; ++i) {
    int64_t d = in[i + 2], kernel = w[i + 2];
    if (!ShapedType::isDynamic(kernel) && kernel <= 0)
      return inferError<OpTy>(loc,
                              "filter spatial extents must be "
                              "positive, got ",
                              ShapeStr{w.drop_front(2)});
    if (ShapedType::isDynamic(d) || ShapedType::isDynamic(kernel)) {
      shape.push_back(ShapedType::kDynamic);
      continue;
    }
    int64_t span = dilations[i] * (kernel - 1) + 1;
    int64_t padded = d + padding[i] + padding[i + k];
    if (padded < span)
      return inferError<OpTy>(
          loc, "spatial dimension ", i, " of extent ", d, " (padded to ",
          padded, ") is smaller than the dilated kernel extent ", span);
    shape.push_back((padded - span) / strides[i] + 1);
  }
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  return inferConvResultType<ConvOp>(context, loc, adaptor, inferred);
}

bool ConvOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleTensorTypes(l, r);
}

//===----------------------------------------------------------------------===//
// QConvOp
//===----------------------------------------------------------------------===//

int64_t QConvOp::getNumSpatialDims() {
  return getInput().getType().getRank() - 2;
}
SmallVector<int64_t> QConvOp::getStridesOrDefault() {
  return valuesOr(getStrides(), getNumSpatialDims(), 1);
}
SmallVector<int64_t> QConvOp::getPaddingOrDefault() {
  return valuesOr(getPadding(), 2 * getNumSpatialDims(), 0);
}
SmallVector<int64_t> QConvOp::getDilationsOrDefault() {
  return valuesOr(getDilations(), getNumSpatialDims(), 1);
}

LogicalResult QConvOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  return inferConvResultType<QConvOp>(context, loc, adaptor, inferred);
}

bool QConvOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleTensorTypes(l, r);
}

LogicalResult QConvOp::verify() {
  RankedTensorType input = getInput().getType(), scale = getScale().getType();
  int64_t channels = getFilter().getType().getDimSize(0);
  if (scale.getElementType() != input.getElementType())
    return emitOpError("scale element type ")
           << scale.getElementType() << " differs from the input's "
           << input.getElementType();
  if (scale.getRank() != 1 || !compatibleExtent(scale.getDimSize(0), channels))
    return emitOpError("scale must have one element per output channel (")
           << ShapeStr{{channels}} << "), got " << ShapeStr{scale.getShape()};
  return success();
}

//===----------------------------------------------------------------------===//
// QMatmulOp
//===----------------------------------------------------------------------===//

LogicalResult QMatmulOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = dyn_cast<RankedTensorType>(adaptor.getWeight().getType());
  if (!input || !weight)
    return inferError<QMatmulOp>(loc, "operands must be ranked tensors");
  if (input.getRank() < 2)
    return inferError<QMatmulOp>(loc, "input must have rank >= 2, got ",
                                 input.getRank());
  if (weight.getRank() != 2)
    return inferError<QMatmulOp>(loc, "weight must be 2-D, got rank ",
                                 weight.getRank());
  ArrayRef<int64_t> ws = weight.getShape();
  int64_t kw = adaptor.getTransposeWeight() ? ws[1] : ws[0];
  int64_t n = adaptor.getTransposeWeight() ? ws[0] : ws[1];
  int64_t k = input.getShape().back();
  if (!compatibleExtent(k, kw))
    return inferError<QMatmulOp>(loc,
                                 "contracting dimensions differ: input "
                                 "has ",
                                 ShapeStr{{k}}, ", weight has ",
                                 ShapeStr{{kw}});
  if (failed(checkBias<QMatmulOp>(loc, adaptor.getBias(), n,
                                  input.getElementType())))
    return failure();
  SmallVector<int64_t> shape(input.getShape().drop_back());
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

bool QMatmulOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleTensorTypes(l, r);
}

LogicalResult QMatmulOp::verify() {
  RankedTensorType input = getInput().getType(), scale = getScale().getType();
  RankedTensorType weight = getWeight().getType();
  RankedTensorType zeroPoint = rankedOrNull(getZeroPoint());
  if (scale.getElementType() != input.getElementType())
    return emitOpError("scale element type ")
           << scale.getElementType() << " differs from the input's "
           << input.getElementType();
  if (zeroPoint && zeroPoint.getElementType() != weight.getElementType())
    return emitOpError("zero point element type ")
           << zeroPoint.getElementType() << " differs from the weight's "
           << weight.getElementType();
  return verifyQuantParams([&] { return emitOpError(); }, weight, scale,
                           zeroPoint, getAxis(), getBlockSize());
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// Attention's softmax scale: `scale` when set, else 1/sqrt(head dim), or
/// std::nullopt when that is dynamic.
static std::optional<double> scaleOrDefault(std::optional<APFloat> scale,
                                            RankedTensorType query) {
  if (scale)
    return scale->convertToDouble();
  int64_t headDim = query.getDimSize(3);
  if (ShapedType::isDynamic(headDim) || headDim <= 0)
    return std::nullopt;
  return 1.0 / std::sqrt(double(headDim));
}

/// An explicit attention scale must be finite and positive.
static LogicalResult verifyScale(Operation *op, std::optional<APFloat> scale) {
  if (scale && (!scale->isFinite() || scale->isNegative() || scale->isZero()))
    return op->emitOpError("scale must be finite and positive, got ")
           << scale->convertToDouble();
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto q = dyn_cast<RankedTensorType>(adaptor.getQuery().getType());
  auto k = dyn_cast<RankedTensorType>(adaptor.getKey().getType());
  auto v = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!q || !k || !v)
    return inferError<AttentionOp>(loc, "operands must be ranked tensors");
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return inferError<AttentionOp>(
        loc,
        "query, key and value must be 4-D [batch, heads, seq, head_dim], "
        "got ranks ",
        q.getRank(), ", ", k.getRank(), " and ", v.getRank());
  ArrayRef<int64_t> qs = q.getShape();
  inferred.push_back(RankedTensorType::get(
      {qs[0], qs[1], qs[2], v.getDimSize(3)}, q.getElementType()));
  return success();
}

bool AttentionOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleTensorTypes(l, r);
}

LogicalResult AttentionOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKey().getType(),
                   v = getValue().getType();
  // Operands that are not 4-D are reported by shape inference, which verifies
  // after this (it is a region trait); do not index their shapes here.
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return success();
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return emitOpError("query, key and value element types differ: ")
           << q.getElementType() << ", " << k.getElementType() << ", "
           << v.getElementType();
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  if (!compatibleExtent(qs[0], ks[0]) || !compatibleExtent(ks[0], vs[0]) ||
      !compatibleExtent(qs[0], vs[0]))
    return emitOpError("batch sizes differ: query ")
           << ShapeStr{{qs[0]}} << ", key " << ShapeStr{{ks[0]}} << ", value "
           << ShapeStr{{vs[0]}};
  if (!compatibleExtent(ks[1], vs[1]) || !compatibleExtent(ks[2], vs[2]))
    return emitOpError("key ") << ShapeStr{ks} << " and value " << ShapeStr{vs}
                               << " must agree on heads and sequence length";
  // Key and value agree; a static extent of either stands for both, so that a
  // dynamic key extent does not hide a static value extent below.
  int64_t batch = mergeExtent(qs[0], mergeExtent(ks[0], vs[0]));
  int64_t kvHeads = mergeExtent(ks[1], vs[1]);
  int64_t kvLen = mergeExtent(ks[2], vs[2]);
  if (!compatibleExtent(qs[3], ks[3]))
    return emitOpError("query head dim ")
           << ShapeStr{{qs[3]}} << " differs from key head dim "
           << ShapeStr{{ks[3]}};
  if (!ShapedType::isDynamic(qs[1]) && !ShapedType::isDynamic(kvHeads) &&
      (kvHeads == 0 || qs[1] % kvHeads != 0))
    return emitOpError("query heads (")
           << qs[1] << ") must be a multiple of key/value heads (" << kvHeads
           << ")";
  if (getCausal() && !ShapedType::isDynamic(qs[2]) &&
      !ShapedType::isDynamic(kvLen) && qs[2] > kvLen)
    return emitOpError("causal attention needs at least as many keys (")
           << kvLen << ") as queries (" << qs[2] << ")";
  if (failed(verifyScale(*this, getScale())))
    return failure();
  if (Value mask = getMask()) {
    auto m = cast<RankedTensorType>(mask.getType());
    Type et = m.getElementType();
    if (!et.isInteger(1) && et != q.getElementType())
      return emitOpError("a float mask must have the query's element type ")
             << q.getElementType() << ", got " << et;
    SmallVector<int64_t> scores = {batch, qs[1], qs[2], kvLen}, broadcast;
    if (m.getRank() > 4 ||
        failed(broadcastShapes(m.getShape(), scores, broadcast)) ||
        failed(verifyCompatibleShape(broadcast, scores)))
      return emitOpError("mask of shape ")
             << ShapeStr{m.getShape()}
             << " does not broadcast to the scores' shape " << ShapeStr{scores};
  }
  return success();
}

std::optional<double> AttentionOp::getScaleOrDefault() {
  return scaleOrDefault(getScale(), getQuery().getType());
}

//===----------------------------------------------------------------------===//
// PagedAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult
PagedAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  auto q = dyn_cast<RankedTensorType>(adaptor.getQuery().getType());
  auto pool = dyn_cast<RankedTensorType>(adaptor.getPool().getType());
  if (!q || !pool)
    return inferError<PagedAttentionOp>(loc, "operands must be ranked tensors");
  if (q.getRank() != 4)
    return inferError<PagedAttentionOp>(
        loc, "query must be 4-D [batch, heads, seq, head_dim], got rank ",
        q.getRank());
  inferred.push_back(q);
  inferred.push_back(pool);
  return success();
}

bool PagedAttentionOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleTensorTypes(l, r);
}

std::optional<KiviPool>
mlir::sits::getKiviPool(std::optional<ArrayRef<int64_t>> attr) {
  if (!attr || attr->size() < 4)
    return std::nullopt;
  KiviPool pool{(*attr)[0], (*attr)[1], (*attr)[2], (*attr)[3], {}};
  if (pool.bits != ::sits::runtime::kivi::kMixedWidths)
    return attr->size() == 4 ? std::optional<KiviPool>(pool) : std::nullopt;
  int64_t heads;
  if (pool.layers < 1 || pool.kvHeads < 1 ||
      __builtin_mul_overflow(pool.layers, pool.kvHeads, &heads) ||
      int64_t(attr->size()) != 4 + heads)
    return std::nullopt;
  pool.widths = attr->drop_front(4);
  return pool;
}

LogicalResult mlir::sits::verifyKiviPool(Operation *op, ArrayRef<int64_t> attr,
                                         ShapedType pool, int64_t headDim) {
  std::optional<KiviPool> kivi = getKiviPool(attr);
  if (!kivi)
    return op->emitOpError("kivi must be [bits, layers, kv heads, block "
                           "size], with bits 512 followed by the width of "
                           "each (layer, kv head), got ")
           << attr.size() << " values";
  if (pool.getRank() != 2 || !pool.getElementType().isInteger(8))
    return op->emitOpError("a KIVI pool is [blocks, block bytes] i8, got ")
           << pool;
  if (ShapedType::isDynamic(headDim))
    return success();
  ::sits::runtime::kivi::Layout layout;
  SmallVector<uint8_t> widths;
  for (int64_t w : kivi->widths)
    widths.push_back(uint8_t(w == 4 || w == 2 ? w : 0));
  if (!::sits::runtime::kivi::Layout::make(kivi->layers, kivi->kvHeads,
                                           kivi->blockSize, headDim, kivi->bits,
                                           &layout, widths.data())) {
    InFlightDiagnostic diag = op->emitOpError("no KIVI layout for ");
    if (kivi->widths.empty())
      diag << kivi->bits << "-bit codes";
    else {
      std::string list;
      llvm::raw_string_ostream os(list);
      llvm::interleaveComma(kivi->widths, os);
      diag << "widths [" << list << "] per (layer, kv head)";
    }
    return diag << ", " << kivi->layers << " layers, " << kivi->kvHeads
                << " kv heads, blocks of " << kivi->blockSize
                << " and head dim " << headDim
                << " (bits 4 or 2, head dim x bits whole bytes, head dim <= "
                << ::sits::runtime::kivi::kMaxHeadDim
                << ", block size <= " << ::sits::runtime::kivi::kMaxBlockSize
                << ")";
  }
  if (!ShapedType::isDynamic(pool.getDimSize(1)) &&
      pool.getDimSize(1) != layout.blockStride)
    return op->emitOpError("a KIVI pool's blocks span ")
           << layout.blockStride << " bytes for this geometry, got "
           << pool.getDimSize(1);
  return success();
}

int64_t PagedAttentionOp::getPoolBlockSize() {
  if (std::optional<KiviPool> kivi = getKiviPool(getKivi()))
    return kivi->blockSize;
  return cast<ShapedType>(getPool().getType()).getDimSize(4);
}

/// sits.paged_attention over a KIVI pool: the checks of verify() that do not
/// read the pool's shape, and the pool against its attribute.
static LogicalResult verifyKiviPagedAttention(PagedAttentionOp op) {
  RankedTensorType q = op.getQuery().getType(), k = op.getKey().getType(),
                   v = op.getValue().getType(),
                   pool = cast<RankedTensorType>(op.getPool().getType());
  for (auto [name, type] :
       {std::pair<const char *, RankedTensorType>{"query", q},
        {"key", k},
        {"value", v}})
    if (type.getRank() != 4)
      return op.emitOpError(name)
             << " must have rank 4, got " << type.getRank();
  if (!q.getElementType().isF32() || !k.getElementType().isF32() ||
      !v.getElementType().isF32())
    return op.emitOpError("a KIVI pool takes f32 query, key and value");
  int64_t headDim = mergeExtent(q.getDimSize(3),
                                mergeExtent(k.getDimSize(3), v.getDimSize(3)));
  if (failed(verifyKiviPool(op, *op.getKivi(), pool, headDim)))
    return failure();
  if (op.getUpdatedPool().getType() != pool)
    return op.emitOpError("updated pool type ")
           << op.getUpdatedPool().getType() << " differs from the pool's "
           << pool;
  KiviPool kivi = *getKiviPool(op.getKivi());
  for (RankedTensorType t : {k, v})
    if (!ShapedType::isDynamic(t.getDimSize(1)) &&
        t.getDimSize(1) != kivi.kvHeads)
      return op.emitOpError("key/value heads (")
             << t.getDimSize(1) << ") differ from the KIVI pool's ("
             << kivi.kvHeads << ")";
  if (!ShapedType::isDynamic(q.getDimSize(1)) &&
      q.getDimSize(1) % kivi.kvHeads != 0)
    return op.emitOpError("query heads (")
           << q.getDimSize(1) << ") must be a multiple of key/value heads ("
           << kivi.kvHeads << ")";
  if (op.getLayer().has_value() == static_cast<bool>(op.getLayerIndex()))
    return op.emitOpError("expects exactly one of the 'layer' attribute and "
                          "a layer operand");
  std::optional<int64_t> layer = op.getConstantLayer();
  if (layer && (*layer < 0 || *layer >= kivi.layers))
    return op.emitOpError("layer ")
           << *layer << " is out of range for a pool of " << kivi.layers
           << " layers";
  return verifyScale(op, op.getScale());
}

LogicalResult PagedAttentionOp::verify() {
  if (getKivi())
    return verifyKiviPagedAttention(*this);
  RankedTensorType q = getQuery().getType(), k = getKey().getType(),
                   v = getValue().getType(),
                   pool = cast<RankedTensorType>(getPool().getType()),
                   tables = getBlockTables().getType(),
                   slots = getSlotMapping().getType(),
                   lens = getContextLens().getType();
  for (auto [name, type, rank] :
       {std::tuple<const char *, RankedTensorType, int64_t>{"query", q, 4},
        {"key", k, 4},
        {"value", v, 4},
        {"pool", pool, 6},
        {"block_tables", tables, 2},
        {"slot_mapping", slots, 2},
        {"context_lens", lens, 1}})
    if (type.getRank() != rank)
      return emitOpError(name)
             << " must have rank " << rank << ", got " << type.getRank();
  Type et = q.getElementType();
  // An i8 or f8E4M3FN pool is quantized: rows of D codes and a 4-byte
  // scale.
  bool quantized = isQuantizedKVElement(pool.getElementType());
  if (k.getElementType() != et || v.getElementType() != et ||
      (!quantized && pool.getElementType() != et))
    return emitOpError("query, key, value and pool element types differ: ")
           << et << ", " << k.getElementType() << ", " << v.getElementType()
           << ", " << pool.getElementType();
  Type updated =
      cast<RankedTensorType>(getUpdatedPool().getType()).getElementType();
  if (updated != pool.getElementType())
    return emitOpError("updated pool element type ")
           << updated << " differs from the pool's " << pool.getElementType();
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  SmallVector<int64_t> ps(pool.getShape());
  if (quantized && !ShapedType::isDynamic(ps[5])) {
    if (ps[5] <= kKVScaleBytes)
      return emitOpError("a quantized pool's rows hold the head dim's codes "
                         "and a 4-byte scale: extent ")
             << ps[5] << " is too small";
    ps[5] -= kKVScaleBytes;
  }
  // Each group of extents must agree: (what, [(shape, dim)...]).
  auto agree =
      [&](const char *what,
          std::initializer_list<std::pair<ArrayRef<int64_t>, int>> extents)
      -> LogicalResult {
    int64_t merged = ShapedType::kDynamic;
    for (auto [shape, dim] : extents) {
      if (!compatibleExtent(merged, shape[dim])) {
        InFlightDiagnostic diag = emitOpError(what) << " differ:";
        for (auto [s, d] : extents)
          diag << " " << ShapeStr{{s[d]}};
        return diag;
      }
      merged = mergeExtent(merged, shape[dim]);
    }
    return success();
  };
  ArrayRef<int64_t> ts = tables.getShape(), ss = slots.getShape(),
                    ls = lens.getShape();
  if (failed(agree("batch sizes (query, key, value, block_tables, "
                   "slot_mapping, context_lens)",
                   {{qs, 0}, {ks, 0}, {vs, 0}, {ts, 0}, {ss, 0}, {ls, 0}})) ||
      failed(agree("new token counts (query, key, value, slot_mapping)",
                   {{qs, 2}, {ks, 2}, {vs, 2}, {ss, 1}})) ||
      failed(agree("key/value heads (key, value, pool)",
                   {{ks, 1}, {vs, 1}, {ps, 3}})) ||
      failed(agree(quantized ? "head dims (query, key, value, pool rows "
                               "less their 4 scale bytes)"
                             : "head dims (query, key, value, pool)",
                   {{qs, 3}, {ks, 3}, {vs, 3}, {ps, 5}})))
    return failure();
  if (!ShapedType::isDynamic(ps[2]) && ps[2] != 2)
    return emitOpError("pool dimension 2 must hold K and V (extent 2), got ")
           << ps[2];
  if (getLayer().has_value() == static_cast<bool>(getLayerIndex()))
    return emitOpError("expects exactly one of the 'layer' attribute and a "
                       "layer operand");
  std::optional<int64_t> layer = getConstantLayer();
  if (layer && *layer < 0)
    return emitOpError("layer must be non-negative, got ") << *layer;
  if (layer && !ShapedType::isDynamic(ps[1]) && *layer >= ps[1])
    return emitOpError("layer ")
           << *layer << " is out of range for a pool of " << ps[1] << " layers";
  if (!ShapedType::isDynamic(ps[4]) && ps[4] <= 0)
    return emitOpError("block size must be positive, got ") << ps[4];
  int64_t kvHeads = mergeExtent(ks[1], mergeExtent(vs[1], ps[3]));
  if (!ShapedType::isDynamic(qs[1]) && !ShapedType::isDynamic(kvHeads) &&
      (kvHeads == 0 || qs[1] % kvHeads != 0))
    return emitOpError("query heads (")
           << qs[1] << ") must be a multiple of key/value heads (" << kvHeads
           << ")";
  if (failed(verifyScale(*this, getScale())))
    return failure();
  return success();
}

std::optional<double> PagedAttentionOp::getScaleOrDefault() {
  return scaleOrDefault(getScale(), getQuery().getType());
}

std::optional<int64_t> PagedAttentionOp::getConstantLayer() {
  if (std::optional<uint64_t> layer = getLayer())
    return *layer;
  APInt layer;
  if (!getLayerIndex() || !matchPattern(getLayerIndex(), m_ConstantInt(&layer)))
    return std::nullopt;
  return layer.getSExtValue();
}

LogicalResult PagedAttentionOp::fold(FoldAdaptor adaptor,
                                     SmallVectorImpl<OpFoldResult> &) {
  // A constant layer operand becomes the attribute, in place.
  auto layer = dyn_cast_if_present<IntegerAttr>(adaptor.getLayerIndex());
  if (!layer)
    return failure();
  setLayer(layer.getValue().getZExtValue());
  getLayerIndexMutable().clear();
  return success();
}

//===----------------------------------------------------------------------===//
// LayerNormOp / RMSNormOp
//===----------------------------------------------------------------------===//

/// Shared checks: `scale` (and `bias`) have the normalized shape
/// input.shape[axis:], and epsilon is a usable non-negative number.
template <typename OpTy>
static LogicalResult
inferNormalization(std::optional<Location> loc, Value inputValue,
                   Value scaleValue, Value biasValue, int64_t axis,
                   double epsilon, SmallVectorImpl<Type> &inferred) {
  auto input = dyn_cast<RankedTensorType>(inputValue.getType());
  if (!input)
    return inferError<OpTy>(loc, "input must be a ranked tensor");
  std::optional<int64_t> dim = normalizeAxis(axis, input.getRank());
  if (!dim)
    return inferError<OpTy>(loc, "axis ", axis,
                            " is out of range for an input of rank ",
                            input.getRank());
  SmallVector<int64_t> normalized(input.getShape().drop_front(*dim));
  for (auto [name, value] :
       {std::pair<const char *, Value>{"scale", scaleValue},
        std::pair<const char *, Value>{"bias", biasValue}}) {
    if (!value)
      continue;
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || failed(verifyCompatibleShape(type.getShape(), normalized)))
      return inferError<OpTy>(loc, name, " must have the normalized shape ",
                              ShapeStr{normalized}, ", got ",
                              type ? ShapeStr{type.getShape()} : ShapeStr{});
    if (type.getElementType() != input.getElementType())
      return inferError<OpTy>(loc, name, " element type ",
                              type.getElementType(), " differs from ",
                              input.getElementType());
    // A static extent of the scale pins a dynamic one of the input, so that
    // the bias is checked against it too.
    for (auto [extent, given] : llvm::zip_equal(normalized, type.getShape()))
      extent = mergeExtent(extent, given);
  }
  if (!std::isfinite(epsilon) || epsilon < 0.0)
    return inferError<OpTy>(loc,
                            "epsilon must be finite and non-negative, "
                            "got ",
                            epsilon);
  inferred.push_back(input);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  adaptor = withDefaults<LayerNormOp>(context, adaptor);
  return inferNormalization<LayerNormOp>(
      loc, adaptor.getInput(), adaptor.getScale(), adaptor.getBias(),
      adaptor.getAxis(), adaptor.getEpsilon().convertToDouble(), inferred);
}

bool LayerNormOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleTensorTypes(l, r);
}

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  adaptor = withDefaults<RMSNormOp>(context, adaptor);
  return inferNormalization<RMSNormOp>(
      loc, adaptor.getInput(), adaptor.getScale(), Value(), adaptor.getAxis(),
      adaptor.getEpsilon().convertToDouble(), inferred);
}

bool RMSNormOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleTensorTypes(l, r);
}

//===----------------------------------------------------------------------===//
// SoftmaxOp / ActivationOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  // I64Attr getters return the value unsigned; axes are signed.
  int64_t axis = getAxisAttr().getInt();
  int64_t rank = getInput().getType().getRank();
  if (!normalizeAxis(axis, rank))
    return emitOpError("axis ")
           << axis << " is out of range for an input of rank " << rank;
  return success();
}

OpFoldResult ActivationOp::fold(FoldAdaptor) {
  // The identity activation is a no-op.
  if (getKind() == ActivationKind::None)
    return getInput();
  // relu(relu(x)) == relu(x).
  if (auto producer = getInput().getDefiningOp<ActivationOp>();
      producer && getKind() == ActivationKind::Relu &&
      producer.getKind() == ActivationKind::Relu)
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// QuantizeOp / DequantizeOp
//===----------------------------------------------------------------------===//

/// Shared verifier. `quantized` is the low-bit side, `real` the float side.
template <typename OpTy>
static LogicalResult verifyQuantOp(OpTy op, RankedTensorType real,
                                   RankedTensorType quantized) {
  if (failed(verifyCompatibleShape(real.getShape(), quantized.getShape())))
    return op.emitOpError("input shape ")
           << ShapeStr{op.getInput().getType().getShape()}
           << " differs from result shape "
           << ShapeStr{op.getResult().getType().getShape()};
  // Check the parameters against everything static about the shape, on
  // whichever side it is known.
  quantized = RankedTensorType::get(
      mergeShapes(real.getShape(), quantized.getShape()),
      quantized.getElementType(), quantized.getEncoding());
  RankedTensorType scale = op.getScale().getType();
  RankedTensorType zeroPoint = rankedOrNull(op.getZeroPoint());
  if (zeroPoint && zeroPoint.getElementType() != quantized.getElementType())
    return op.emitOpError("zero point element type ")
           << zeroPoint.getElementType()
           << " differs from the quantized element type "
           << quantized.getElementType();
  return verifyQuantParams([&] { return op.emitOpError(); }, quantized, scale,
                           zeroPoint, op.getAxis(), op.getBlockSize());
}

LogicalResult QuantizeOp::verify() {
  Type scaleElement = getScale().getType().getElementType();
  if (scaleElement != getInput().getType().getElementType())
    return emitOpError("scale element type ")
           << scaleElement << " differs from the input's "
           << getInput().getType().getElementType();
  return verifyQuantOp(*this, getInput().getType(), getResult().getType());
}

OpFoldResult QuantizeOp::fold(FoldAdaptor) {
  // quantize(dequantize(q)) with the same parameters gives q back exactly.
  auto dequant = getInput().getDefiningOp<DequantizeOp>();
  if (!dequant || dequant.getInput().getType() != getResult().getType() ||
      dequant.getScale() != getScale() ||
      dequant.getZeroPoint() != getZeroPoint() ||
      dequant.getAxis() != getAxis() ||
      dequant.getBlockSize() != getBlockSize())
    return {};
  return dequant.getInput();
}

LogicalResult DequantizeOp::verify() {
  RankedTensorType scale = getScale().getType();
  if (getResult().getType().getElementType() != scale.getElementType())
    return emitOpError("result element type ")
           << getResult().getType().getElementType()
           << " differs from the scale's " << scale.getElementType();
  return verifyQuantOp(*this, getResult().getType(), getInput().getType());
}
