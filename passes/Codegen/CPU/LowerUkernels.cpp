//===- LowerUkernels.cpp - Marked linalg ops as runtime kernel calls ------===//
//
// Some contractions run best as hand-written kernels with per-ISA variants
// chosen when the code runs (the INT8 dot products of quantized matmuls:
// VNNI, AVX2 or portable): their op carries `sits.ukernel`, tiling and
// vectorization leave it whole, and once on buffers it becomes one call of
// the runtime's kernel with pointers and strides.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/Common/Ukernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPULOWERUKERNELS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

/// The runtime's INT8 dot-product kernel (runtime/src/core/qdot.cpp).
constexpr llvm::StringLiteral kQDot = "sitsRuntimeQDot";

func::FuncOp getOrDeclareQDot(ModuleOp module) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(kQDot))
    return existing;
  MLIRContext *ctx = module.getContext();
  Type i64 = IntegerType::get(ctx, 64), ptr = LLVM::LLVMPointerType::get(ctx);
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto decl = func::FuncOp::create(
      b, module.getLoc(), kQDot,
      FunctionType::get(ctx,
                        {i64, i64, i64, i64, i64, ptr, i64, ptr, i64, ptr, ptr,
                         i64, ptr, i64},
                        {}));
  decl.setPrivate();
  return decl;
}

/// Whether every dimension of `type` from `from` on is contiguous row-major
/// (static strides equal to the products of the later extents).
bool innerContiguous(MemRefType type, int64_t from) {
  auto [strides, offset] = type.getStridesAndOffset();
  int64_t expected = 1;
  for (int64_t d = type.getRank() - 1; d >= from; --d) {
    if (strides[d] != expected || type.isDynamicDim(d))
      return false;
    expected *= type.getDimSize(d);
  }
  return true;
}

/// One buffer as the kernel takes it: the address of its first element and
/// the stride of its outermost dimension, in elements.
struct Buffer {
  Value pointer, rowStride;
};

Buffer getBuffer(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  Type i64 = b.getI64Type();
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  Value offset =
      arith::MulIOp::create(b, loc, metadata.getOffset(),
                            arith::ConstantIndexOp::create(b, loc, bytes));
  Value address = arith::IndexCastUIOp::create(
      b, loc, i64, arith::AddIOp::create(b, loc, base, offset));
  Value pointer = LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), address);
  Value stride =
      arith::IndexCastOp::create(b, loc, i64, metadata.getStrides().front());
  return {pointer, stride};
}

/// Replaces a "qdot_i4" / "qdot_i8" contraction (lowerQMatmulToIntegerDot's
/// form, on buffers) by its kernel call. Fails, changing nothing, when the
/// operands are not that form.
LogicalResult lowerQDot(OpBuilder &b, linalg::GenericOp op, int64_t bits,
                        func::FuncOp qdot) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 4 ||
      op.getNumDpsInits() != 1)
    return failure();
  auto type = [&](Value v) { return dyn_cast<MemRefType>(v.getType()); };
  Value codes = op.getDpsInputs()[0], weight = op.getDpsInputs()[1],
        rowScales = op.getDpsInputs()[2], scale = op.getDpsInputs()[3],
        out = op.getDpsInits()[0];
  MemRefType codesType = type(codes), weightType = type(weight),
             rowScalesType = type(rowScales), scaleType = type(scale),
             outType = type(out);
  int64_t codesRank = bits == 4 ? 5 : 4;
  if (!codesType || !weightType || !rowScalesType || !scaleType || !outType ||
      codesType.getRank() != codesRank || weightType.getRank() != 5 ||
      rowScalesType.getRank() != 2 || outType.getRank() != 3 ||
      (scaleType.getRank() != 2 && scaleType.getRank() != 3) ||
      !codesType.getElementType().isInteger(8) ||
      !weightType.getElementType().isInteger(8) ||
      !rowScalesType.getElementType().isF32() ||
      !scaleType.getElementType().isF32() || !outType.getElementType().isF32())
    return failure();
  // Rows may be strided; everything inside a row, and the weights, are
  // contiguous. The group and the column blocks are static.
  if (!innerContiguous(codesType, 1) || !innerContiguous(weightType, 0) ||
      !innerContiguous(rowScalesType, 1) || !innerContiguous(outType, 1) ||
      !innerContiguous(scaleType, scaleType.getRank() == 3 ? 1 : 0) ||
      outType.getDimSize(2) != 16 || codesType.isDynamicDim(1))
    return failure();
  int64_t group = 1;
  for (int64_t d = 2; d < codesRank; ++d)
    group *= codesType.getDimSize(d);
  int64_t groups = codesType.getDimSize(1);

  Location loc = op.getLoc();
  b.setInsertionPoint(op);
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, i64, v).getResult();
  };
  Value m = arith::IndexCastOp::create(b, loc, i64,
                                       memref::DimOp::create(b, loc, out, 0));
  Value n = arith::MulIOp::create(
      b, loc,
      arith::IndexCastOp::create(b, loc, i64,
                                 memref::DimOp::create(b, loc, out, 1)),
      constant(16));
  Buffer x = getBuffer(b, loc, codes), sx = getBuffer(b, loc, rowScales),
         w = getBuffer(b, loc, weight), ws = getBuffer(b, loc, scale),
         y = getBuffer(b, loc, out);
  // Per-column weight scales have no stride between groups.
  Value wsStride = scaleType.getRank() == 3 ? ws.rowStride : constant(0);
  func::CallOp::create(b, loc, qdot,
                       ValueRange{constant(bits), m, n,
                                  constant(groups * group), constant(group),
                                  x.pointer, x.rowStride, sx.pointer,
                                  sx.rowStride, w.pointer, ws.pointer, wsStride,
                                  y.pointer, y.rowStride});
  op->erase();
  return success();
}

struct SitsCpuLowerUkernelsPass
    : cpu::impl::SitsCpuLowerUkernelsBase<SitsCpuLowerUkernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::GenericOp> marked;
    module.walk([&](linalg::GenericOp op) {
      if (op->hasAttr(kUkernelAttr))
        marked.push_back(op);
    });
    if (marked.empty())
      return;
    func::FuncOp qdot = getOrDeclareQDot(module);
    OpBuilder b(&getContext());
    for (linalg::GenericOp op : marked) {
      auto name = op->getAttrOfType<StringAttr>(kUkernelAttr);
      StringRef kernel = name ? name.getValue() : StringRef();
      int64_t bits = kernel == kQDotI4 ? 4 : kernel == kQDotI8 ? 8 : 0;
      if (bits && succeeded(lowerQDot(b, op, bits, qdot)))
        ++numCalls;
      else
        ++numLeft;
    }
    if (qdot.symbolKnownUseEmpty(module))
      qdot.erase();
  }
};

} // namespace
