//===- DistributeCopies.cpp - Cooperative copies into shared memory -------===//
//
//   gpu.barrier                       // nobody still reads the old tile
//   for (v = tid; v < elements / V; v += threads)
//     dst[delinearize(v * V)] = src[delinearize(v * V)]   // V elements
//   gpu.barrier                       // the whole tile is there
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <numeric>

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUDISTRIBUTECOPIES
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// The number of threads of `launch` when static.
std::optional<int64_t> staticBlockSize(mlir::gpu::LaunchOp launch) {
  int64_t size = 1;
  for (Value v : {launch.getBlockSizeX(), launch.getBlockSizeY(),
                  launch.getBlockSizeZ()}) {
    std::optional<int64_t> c = getConstantIntValue(v);
    if (!c)
      return std::nullopt;
    size *= *c;
  }
  return size;
}

/// The largest number `value` is known to be a multiple of (0 stands for
/// the value 0, a multiple of everything).
int64_t knownDivisor(Value value, int depth = 12);

int64_t knownDivisor(AffineExpr e, ArrayRef<int64_t> dims,
                     ArrayRef<int64_t> syms) {
  switch (e.getKind()) {
  case AffineExprKind::Constant:
    return std::abs(cast<AffineConstantExpr>(e).getValue());
  case AffineExprKind::DimId:
    return dims[cast<AffineDimExpr>(e).getPosition()];
  case AffineExprKind::SymbolId:
    return syms[cast<AffineSymbolExpr>(e).getPosition()];
  case AffineExprKind::Add: {
    auto bin = cast<AffineBinaryOpExpr>(e);
    return std::gcd(knownDivisor(bin.getLHS(), dims, syms),
                    knownDivisor(bin.getRHS(), dims, syms));
  }
  case AffineExprKind::Mul: {
    auto bin = cast<AffineBinaryOpExpr>(e);
    return knownDivisor(bin.getLHS(), dims, syms) *
           knownDivisor(bin.getRHS(), dims, syms);
  }
  default:
    return 1;
  }
}

int64_t knownDivisor(Value value, int depth) {
  if (std::optional<int64_t> c = getConstantIntValue(value))
    return std::abs(*c);
  if (depth == 0)
    return 1;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp()))
      if (arg == loop.getInductionVar())
        return std::gcd(knownDivisor(loop.getLowerBound(), depth - 1),
                        knownDivisor(loop.getStep(), depth - 1));
    return 1;
  }
  Operation *def = value.getDefiningOp();
  if (auto apply = dyn_cast<affine::AffineApplyOp>(def)) {
    AffineMap map = apply.getAffineMap();
    SmallVector<int64_t> dims, syms;
    for (Value operand : apply.getDimOperands())
      dims.push_back(knownDivisor(operand, depth - 1));
    for (Value operand : apply.getSymbolOperands())
      syms.push_back(knownDivisor(operand, depth - 1));
    return knownDivisor(map.getResult(0), dims, syms);
  }
  if (auto add = dyn_cast<arith::AddIOp>(def))
    return std::gcd(knownDivisor(add.getLhs(), depth - 1),
                    knownDivisor(add.getRhs(), depth - 1));
  if (auto mul = dyn_cast<arith::MulIOp>(def))
    return knownDivisor(mul.getLhs(), depth - 1) *
           knownDivisor(mul.getRhs(), depth - 1);
  return 1;
}

/// Whether element (i0, ..., in) of `buffer` with in a multiple of `width`
/// is at an address that is a multiple of `width` elements: its base is
/// (the runtime passes, and the allocators return, aligned buffers), and
/// every stride and offset keeps it so.
bool isAlignedForVectors(Value buffer, int64_t width, int depth = 8) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || strides.empty() ||
      strides.back() != 1)
    return false;
  for (int64_t stride : ArrayRef<int64_t>(strides).drop_back())
    if (ShapedType::isDynamic(stride) || stride % width != 0)
      return false;
  if (!ShapedType::isDynamic(offset))
    return offset % width == 0;
  if (depth == 0)
    return false;
  // A dynamic offset: a subview whose offsets keep the alignment of an
  // aligned source.
  auto subview = buffer.getDefiningOp<memref::SubViewOp>();
  if (!subview || !isAlignedForVectors(subview.getSource(), width, depth - 1))
    return false;
  SmallVector<int64_t> sourceStrides;
  int64_t sourceOffset;
  if (failed(subview.getSourceType().getStridesAndOffset(sourceStrides,
                                                         sourceOffset)))
    return false;
  for (auto [ofr, stride] :
       llvm::zip_equal(subview.getMixedOffsets(), sourceStrides)) {
    if (!ShapedType::isDynamic(stride) && stride % width == 0)
      continue;
    int64_t divisor = isa<Value>(ofr) ? knownDivisor(cast<Value>(ofr))
                                      : std::abs(*getConstantIntValue(ofr));
    if (divisor != 0 && divisor % width != 0)
      return false;
  }
  return true;
}

LogicalResult distribute(RewriterBase &rewriter, linalg::CopyOp copy,
                         mlir::gpu::LaunchOp launch) {
  Location loc = copy.getLoc();
  Value src = copy.getDpsInputOperand(0)->get();
  Value dst = copy.getDpsInitOperand(0)->get();
  auto srcType = dyn_cast<MemRefType>(src.getType());
  auto dstType = dyn_cast<MemRefType>(dst.getType());
  if (!srcType || !dstType || !dstType.hasStaticShape())
    return copy.emitError() << "a cooperative copy needs static buffers";
  std::optional<int64_t> threads = staticBlockSize(launch);
  if (!threads)
    return copy.emitError() << "a cooperative copy needs a static block size";
  // Every thread must reach the barriers: the copy may not sit in code only
  // some threads run (a thread loop smaller than the block).
  for (Operation *p = copy->getParentOp(); p != launch; p = p->getParentOp())
    if (isa<scf::IfOp>(p))
      return copy.emitError() << "a cooperative copy runs on some threads "
                                 "of the block only";

  ArrayRef<int64_t> shape = dstType.getShape();
  int64_t elements = dstType.getNumElements();
  int64_t inner = shape.empty() ? 1 : shape.back();
  Type element = dstType.getElementType();
  // Up to 16 bytes at a time when rows and the alignment of both buffers
  // allow it (ld.global.v4.f32 / st.shared.v4.f32).
  int64_t width = 1;
  int64_t bits = element.getIntOrFloatBitWidth();
  for (int64_t w : {4, 2}) {
    if (w * bits > 128 || bits % 8 != 0 || inner % w != 0)
      continue;
    if (isAlignedForVectors(src, w) && isAlignedForVectors(dst, w)) {
      width = w;
      break;
    }
  }

  rewriter.setInsertionPoint(copy);
  mlir::gpu::BarrierOp::create(rewriter, loc);
  Value tid =
      mlir::gpu::ThreadIdOp::create(rewriter, loc, mlir::gpu::Dimension::x);
  Value step = arith::ConstantIndexOp::create(rewriter, loc, *threads);
  Value end = arith::ConstantIndexOp::create(rewriter, loc, elements / width);
  auto loop = scf::ForOp::create(rewriter, loc, tid, end, step);
  rewriter.setInsertionPointToStart(loop.getBody());
  Value linear = loop.getInductionVar();
  if (width > 1) {
    Value w = arith::ConstantIndexOp::create(rewriter, loc, width);
    linear = arith::MulIOp::create(rewriter, loc, linear, w);
  }
  SmallVector<Value> indices;
  if (shape.size() > 1) {
    auto delinearize = affine::AffineDelinearizeIndexOp::create(
        rewriter, loc, linear, shape, /*hasOuterBound=*/true);
    indices.assign(delinearize.getResults().begin(),
                   delinearize.getResults().end());
  } else if (shape.size() == 1) {
    indices.push_back(linear);
  }
  if (width > 1) {
    auto vectorType = VectorType::get({width}, element);
    llvm::MaybeAlign align(width * bits / 8);
    Value v = vector::LoadOp::create(rewriter, loc, vectorType, src, indices,
                                     /*nontemporal=*/false, align);
    vector::StoreOp::create(rewriter, loc, v, dst, indices,
                            /*nontemporal=*/false, align);
  } else {
    Value v = memref::LoadOp::create(rewriter, loc, src, indices);
    memref::StoreOp::create(rewriter, loc, v, dst, indices);
  }
  rewriter.setInsertionPointAfter(loop);
  mlir::gpu::BarrierOp::create(rewriter, loc);
  rewriter.eraseOp(copy);
  return success();
}

/// Erases barriers that follow another barrier with only pure ops (index
/// arithmetic, views) in between: the threads are in step already.
void eraseRepeatedBarriers(Operation *root, RewriterBase &rewriter) {
  SmallVector<mlir::gpu::BarrierOp> repeated;
  root->walk([&](mlir::gpu::BarrierOp barrier) {
    for (Operation *prev = barrier->getPrevNode(); prev;
         prev = prev->getPrevNode()) {
      if (isa<mlir::gpu::BarrierOp>(prev)) {
        repeated.push_back(barrier);
        return;
      }
      if (!isPure(prev))
        return;
    }
  });
  for (mlir::gpu::BarrierOp barrier : repeated)
    rewriter.eraseOp(barrier);
}

struct SitsGpuDistributeCopiesPass
    : sits::gpu::impl::SitsGpuDistributeCopiesBase<
          SitsGpuDistributeCopiesPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<std::pair<linalg::CopyOp, mlir::gpu::LaunchOp>> copies;
    getOperation().walk([&](linalg::CopyOp copy) {
      if (!copy->hasAttr(sits::gpu::kCooperativeAttrName))
        return;
      copies.push_back({copy, copy->getParentOfType<mlir::gpu::LaunchOp>()});
    });
    for (auto [copy, launch] : copies) {
      if (!launch) {
        copy.emitError() << "a cooperative copy outside a GPU kernel";
        return signalPassFailure();
      }
      if (failed(distribute(rewriter, copy, launch)))
        return signalPassFailure();
      ++numDistributed;
    }
    // Two staged tiles in a row share their barriers.
    eraseRepeatedBarriers(getOperation(), rewriter);
  }
};

} // namespace
