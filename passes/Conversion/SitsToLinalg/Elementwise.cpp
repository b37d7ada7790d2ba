//===- Elementwise.cpp - Activations to linalg ----------------------------===//
//
// The activations (buildActivation, shared with the contraction epilogue)
// and the lowering of sits.activation: one elementwise generic.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/SitsToLinalg/Patterns.h"
#include "passes/Conversion/SitsToLinalg/Utils.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::detail;

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

Value mlir::sits::buildActivation(OpBuilder &b, Location loc,
                                  ActivationKind kind, Value x) {
  Type type = x.getType();
  auto c = [&](double value) { return floatConst(b, loc, type, value); };
  auto mul = [&](Value l, Value r) -> Value {
    return arith::MulFOp::create(b, loc, l, r);
  };
  auto add = [&](Value l, Value r) -> Value {
    return arith::AddFOp::create(b, loc, l, r);
  };
  // 1 / (1 + exp(-x)): saturates to 0 and 1 without NaN.
  // (Operands are built one statement at a time: the order in which C++
  // evaluates call arguments, hence the printed IR, is unspecified.)
  auto sigmoid = [&](Value v) -> Value {
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, v));
    Value denominator = add(c(1.0), e);
    return arith::DivFOp::create(b, loc, c(1.0), denominator);
  };
  switch (kind) {
  case ActivationKind::None:
    return x;
  case ActivationKind::Relu:
    return arith::MaximumFOp::create(b, loc, x, c(0.0));
  case ActivationKind::Gelu: {
    // 0.5 x (1 + erf(x / sqrt(2))), written 0.5 x erfc(-x / sqrt(2)): the
    // same function, without the cancellation of 1 + erf for x << 0 (which
    // would cost f32 up to 1e-3 relative error in the negative tail).
    Value scaled = mul(x, c(-llvm::numbers::inv_sqrt2));
    Value erfc = math::ErfcOp::create(b, loc, scaled);
    return mul(mul(c(0.5), x), erfc);
  }
  case ActivationKind::GeluTanh: {
    // 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), written
    // x sigmoid(2 u) for the same reason.
    Value cube = mul(mul(x, x), x);
    Value poly = add(x, mul(c(0.044715), cube));
    return mul(x, sigmoid(mul(c(2.0 * 0.7978845608028654), poly)));
  }
  case ActivationKind::Silu:
    return mul(x, sigmoid(x));
  case ActivationKind::Sigmoid:
    return sigmoid(x);
  case ActivationKind::Tanh:
    return math::TanhOp::create(b, loc, x);
  }
  llvm_unreachable("unknown activation");
}

//===----------------------------------------------------------------------===//
// Per-op lowerings
//===----------------------------------------------------------------------===//

FailureOr<Value> mlir::sits::lowerActivationOp(OpBuilder &b, ActivationOp op,
                                               ActivationOp::Adaptor operands) {
  Location loc = op.getLoc();
  Value input = operands.getInput();
  RankedTensorType type = op.getType();
  Type element = type.getElementType();
  FloatType computeType = getComputeType(element);
  ActivationKind kind = op.getKind();
  Value y = buildElementwise(
      b, loc, {input}, {b.getMultiDimIdentityMap(type.getRank())},
      tensor::getMixedSizes(b, loc, input), element,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = castFloat(nb, l, args[0], computeType);
        return castFloat(nb, l, buildActivation(nb, l, kind, x), element);
      });
  return castToType(b, loc, y, type);
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

void mlir::sits::detail::populateElementwisePatterns(
    TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SitsOpLowering<ActivationOp, lowerActivationOp>>(typeConverter,
                                                                ctx);
}
