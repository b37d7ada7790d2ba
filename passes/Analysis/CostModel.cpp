//===- CostModel.cpp - Roofline cost of SITS and linalg ops ---------------===//

#include "passes/Analysis/CostModel.h"

#include "dialects/Sits/IR/SitsOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::cost;

/// Elements of `type`, dynamic extents counted as 1.
static int64_t getNumElements(ShapedType type, bool &dynamic) {
  int64_t n = 1;
  for (int64_t d : type.getShape()) {
    if (ShapedType::isDynamic(d))
      dynamic = true;
    else
      n *= d;
  }
  return n;
}

int64_t cost::getTensorBytes(Type type, bool *dynamic) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return 0;
  bool dyn = false;
  int64_t n = getNumElements(tensor, dyn);
  if (dynamic)
    *dynamic |= dyn;
  // Index elements (shape tensors) take 64 bits in memory; complex numbers
  // two of their parts.
  Type element = tensor.getElementType();
  if (auto complex = dyn_cast<ComplexType>(element))
    element = complex.getElementType();
  int64_t bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 64;
  if (isa<ComplexType>(tensor.getElementType()))
    bits *= 2;
  if (isa_and_nonnull<PackedEncodingAttr>(tensor.getEncoding()))
    return (n * bits + 7) / 8;
  return n * ((bits + 7) / 8);
}

bool cost::isFreeOp(Operation *op) {
  if (op->hasTrait<OpTrait::ConstantLike>() ||
      isa<tensor::EmptyOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
          tensor::ExtractSliceOp, tensor::CastOp, tensor::BitcastOp,
          tensor::ReshapeOp>(op))
    return true;
  // Scalar and index arithmetic (sizes of dynamic tensors).
  return op->getNumRegions() == 0 &&
         llvm::none_of(op->getResultTypes(), llvm::IsaPred<ShapedType>);
}

/// FLOPs per element of an activation (exp, erf and tanh as the polynomials
/// the code generators emit).
static double getActivationFlops(ActivationKind kind) {
  switch (kind) {
  case ActivationKind::None:
    return 0;
  case ActivationKind::Relu:
    return 1;
  case ActivationKind::Sigmoid:
    return 4;
  case ActivationKind::Silu:
    return 5;
  case ActivationKind::Tanh:
    return 6;
  case ActivationKind::Gelu:
  case ActivationKind::GeluTanh:
    return 8;
  }
  return 0;
}

static int64_t getDim(Value value, int64_t dim, bool &dynamic) {
  auto type = cast<ShapedType>(value.getType());
  if (dim < 0)
    dim += type.getRank();
  if (dim < 0 || dim >= type.getRank())
    return 1;
  int64_t d = type.getDimSize(dim);
  if (ShapedType::isDynamic(d)) {
    dynamic = true;
    return 1;
  }
  return d;
}

/// FLOPs of the arithmetic in a linalg op's body per iteration.
static double getBodyFlops(linalg::LinalgOp op) {
  double flops = 0;
  op.getBlock()->walk([&](Operation *inner) {
    Dialect *dialect = inner->getDialect();
    if (!dialect || inner->hasTrait<OpTrait::IsTerminator>() ||
        inner->hasTrait<OpTrait::ConstantLike>() || isa<linalg::IndexOp>(inner))
      return;
    // Transcendentals expand into a polynomial of several FMAs.
    flops += isa<math::MathDialect>(dialect) ? 8 : 1;
  });
  return flops;
}

OpCost cost::estimateOpCost(Operation *op) {
  OpCost cost;
  if (isFreeOp(op))
    return cost;
  bool &dyn = cost.dynamic;
  for (Type t : op->getResultTypes())
    cost.bytesWritten += getTensorBytes(t, &dyn);
  auto resultElements = [&]() -> int64_t {
    if (op->getNumResults() == 0)
      return 0;
    auto type = dyn_cast<ShapedType>(op->getResult(0).getType());
    return type ? getNumElements(type, dyn) : 0;
  };
  if (op->getNumResults() != 0)
    if (auto type = dyn_cast<ShapedType>(op->getResult(0).getType()))
      cost.computeType = type.getElementType();

  // Linalg: inputs, and inits only when the body reads them.
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    for (OpOperand *input : linalgOp.getDpsInputOperands())
      cost.bytesRead += getTensorBytes(input->get().getType(), &dyn);
    for (OpOperand &init : linalgOp.getDpsInitsMutable())
      if (linalgOp.payloadUsesValueFromOperand(&init))
        cost.bytesRead += getTensorBytes(init.get().getType(), &dyn);
    double iterations = 1;
    for (int64_t range : linalgOp.getStaticLoopRanges()) {
      if (ShapedType::isDynamic(range))
        dyn = true;
      else
        iterations *= double(range);
    }
    cost.flops = iterations * getBodyFlops(linalgOp);
    return cost;
  }

  for (Value operand : op->getOperands())
    cost.bytesRead += getTensorBytes(operand.getType(), &dyn);
  double n = double(resultElements());
  auto epilogue = [&](bool hasBias, ActivationKind kind) {
    return n * ((hasBias ? 1 : 0) + getActivationFlops(kind));
  };
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](MatmulOp matmul) {
        int64_t k =
            getDim(matmul.getLhs(), matmul.getTransposeLhs() ? -2 : -1, dyn);
        cost.flops = 2 * n * double(k) +
                     epilogue(bool(matmul.getBias()), matmul.getActivation());
      })
      .Case([&](QMatmulOp matmul) {
        int64_t k = getDim(matmul.getInput(), -1, dyn);
        // One multiply-add per weight element to dequantize it in registers,
        // for every row block of the input that reuses it: counted once.
        bool wdyn = false;
        double weights = double(getNumElements(
            cast<ShapedType>(matmul.getWeight().getType()), wdyn));
        cost.flops = 2 * n * double(k) + 2 * weights +
                     epilogue(bool(matmul.getBias()), matmul.getActivation());
        cost.computeType =
            cast<ShapedType>(matmul.getInput().getType()).getElementType();
      })
      .Case([&](ConvOp conv) {
        auto filter = cast<ShapedType>(conv.getFilter().getType());
        double window = 1;
        for (int64_t i = 1; i < filter.getRank(); ++i)
          window *= double(getDim(conv.getFilter(), i, dyn));
        cost.flops = 2 * n * window +
                     epilogue(bool(conv.getBias()), conv.getActivation());
      })
      .Case([&](QConvOp conv) {
        // As a convolution, plus one scale per output element; the INT8
        // codes widen in registers at no extra pass over memory.
        auto filter = cast<ShapedType>(conv.getFilter().getType());
        double window = 1;
        for (int64_t i = 1; i < filter.getRank(); ++i)
          window *= double(getDim(conv.getFilter(), i, dyn));
        cost.flops = 2 * n * window + n +
                     epilogue(bool(conv.getBias()), conv.getActivation());
        cost.computeType =
            cast<ShapedType>(conv.getInput().getType()).getElementType();
      })
      .Case([&](AttentionOp attention) {
        double bhq = double(getDim(attention.getQuery(), 0, dyn)) *
                     double(getDim(attention.getQuery(), 1, dyn)) *
                     double(getDim(attention.getQuery(), 2, dyn));
        double tk = double(getDim(attention.getKey(), 2, dyn));
        double d = double(getDim(attention.getQuery(), 3, dyn));
        double dv = double(getDim(attention.getValue(), 3, dyn));
        // QK^T and PV, plus scale, max, exp, sum and divide on the scores.
        cost.flops = 2 * bhq * tk * (d + dv) + 12 * bhq * tk;
      })
      .Case([&](PagedAttentionOp attention) {
        // As attention over the block tables' whole width (what is
        // gathered), plus the gather itself: data movement only.
        double bhq = double(getDim(attention.getQuery(), 0, dyn)) *
                     double(getDim(attention.getQuery(), 1, dyn)) *
                     double(getDim(attention.getQuery(), 2, dyn));
        int64_t blockSize = attention.getPoolBlockSize();
        double tk = double(getDim(attention.getBlockTables(), 1, dyn)) *
                    double(ShapedType::isDynamic(blockSize) ? dyn : blockSize);
        double d = double(getDim(attention.getQuery(), 3, dyn));
        cost.flops = 4 * bhq * tk * d + 12 * bhq * tk;
      })
      .Case([&](LayerNormOp) { cost.flops = 8 * n; })
      .Case([&](RMSNormOp) { cost.flops = 5 * n; })
      .Case([&](SoftmaxOp) { cost.flops = 12 * n; })
      .Case([&](ActivationOp act) {
        cost.flops = n * getActivationFlops(act.getKind());
      })
      .Case([&](QuantizeOp) { cost.flops = 3 * n; })
      .Case([&](DequantizeOp) { cost.flops = 2 * n; })
      .Default([&](Operation *other) {
        Dialect *dialect = other->getDialect();
        if (dialect && isa<math::MathDialect>(dialect))
          cost.flops = 8 * n;
        else if (dialect && dialect->getNamespace() == "arith")
          cost.flops = n;
        // Everything else (pads, concatenations, inserts) only moves data.
      });
  return cost;
}

CostModel::CostModel(const target::TargetInfo &info, double peakGflopsOverride,
                     double bandwidthGBsOverride)
    : info(info) {
  peakFp32 = info.peakFp32Tflops * 1e12;
  bandwidth = info.memoryBandwidthGBs * 1e9;
  // The host and the named CPU instruction-set entries leave peak and
  // bandwidth unknown (they are measured, not listed). Nominal figures from
  // what the table does know keep the estimates' ratios meaningful: one FMA
  // (2 FLOPs) per SIMD lane per cycle on two pipes at 2.5 GHz per core (the
  // compiling machine's cores for a named level), and 10 GB/s of DRAM
  // bandwidth per
  // core. They are marked nominal wherever they are shown.
  if (peakFp32 <= 0) {
    peakFp32 = double(target::getComputeUnits(info)) *
               double(std::max<int64_t>(info.simdWidth, 1)) * 2 * 2 * 2.5e9;
    nominal = true;
  }
  if (bandwidth <= 0) {
    bandwidth = double(target::getComputeUnits(info)) * 10e9;
    nominal = true;
  }
  if (peakGflopsOverride > 0)
    peakFp32 = peakGflopsOverride * 1e9;
  if (bandwidthGBsOverride > 0)
    bandwidth = bandwidthGBsOverride * 1e9;
  if (peakGflopsOverride > 0 && bandwidthGBsOverride > 0)
    nominal = false;
}

double CostModel::getPeakFlops(Type elementType) const {
  auto scaled = [&](double tflops) {
    // The override scales every dtype's peak like the fp32 one.
    return tflops > 0 && info.peakFp32Tflops > 0
               ? tflops / info.peakFp32Tflops * peakFp32
               : peakFp32;
  };
  if (!elementType)
    return peakFp32;
  if (elementType.isF16())
    return scaled(info.peakFp16Tflops);
  if (elementType.isBF16())
    return scaled(info.peakBf16Tflops ? info.peakBf16Tflops
                                      : info.peakFp16Tflops);
  if (isa<Float8E4M3FNType, Float8E5M2Type>(elementType))
    return scaled(info.peakFp8Tflops);
  if (elementType.isInteger(8))
    return scaled(info.peakInt8Tops);
  return peakFp32;
}

int64_t CostModel::getMemoryBytes() const {
  return int64_t(target::getMemoryGB(info) * 1e9);
}

Estimate CostModel::estimate(double flops, int64_t bytes,
                             Type computeType) const {
  Estimate e;
  e.computeSeconds = flops / getPeakFlops(computeType);
  e.memorySeconds = double(bytes) / bandwidth;
  e.memoryBound = e.memorySeconds > e.computeSeconds;
  e.seconds = std::max(e.computeSeconds, e.memorySeconds);
  return e;
}
