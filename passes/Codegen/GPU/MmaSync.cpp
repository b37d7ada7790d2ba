//===- MmaSync.cpp - Warp-level contractions on tensor cores --------------===//
//
// sits-gpu-tile-and-fuse gives each warp of a block an m16n8 output tile of
// an f16 contraction, in a thread loop whose innermost dimension runs
// over the warp's lanes and which nothing in its body reads: as sequential
// code every lane computes its warp's whole tile. Upstream's vector-to-GPU
// conversion (for nvgpu) divides exactly such warp-level vector code among
// the lanes, in the fragment layouts of mma.sync; it is tested upstream, so
// this pass only finds the warp-level loops and hands them to it.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Conversion/VectorToGPU/VectorToGPU.h"
#include "mlir/Dialect/NVGPU/Transforms/Transforms.h"
#include "mlir/IR/Iterators.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUMMASYNC
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// Whether `forall` is warp-level code: a thread loop whose `linear_dim_0`
/// (consecutive threads) has `warpSize` iterations from 0 by 1, the lanes,
/// and whose body does not read that index.
bool isWarpLevel(scf::ForallOp forall, int64_t warpSize) {
  std::optional<ArrayAttr> mapping = forall.getMapping();
  if (!mapping)
    return false;
  for (auto [i, attr] : llvm::enumerate(*mapping)) {
    auto thread = dyn_cast<mlir::gpu::GPUThreadMappingAttr>(attr);
    if (!thread)
      return false;
    if (thread.getThread() != mlir::gpu::MappingId::LinearDim0)
      continue;
    return forall.getStaticLowerBound()[i] == 0 &&
           forall.getStaticUpperBound()[i] == warpSize &&
           forall.getStaticStep()[i] == 1 &&
           forall.getInductionVar(i).use_empty();
  }
  return false;
}

/// Whether `contract` multiplies f16 or bf16 vectors (f32 ones with `tf32`)
/// into f32 ones.
bool isMmaContract(vector::ContractionOp contract, bool tf32) {
  Type lhs = contract.getLhsType().getElementType();
  Type rhs = contract.getRhsType().getElementType();
  auto acc = dyn_cast<VectorType>(contract.getAccType());
  return lhs == rhs && (lhs.isF16() || lhs.isBF16() || (tf32 && lhs.isF32())) &&
         acc && acc.getElementType().isF32();
}

/// Erases the ops of `root` whose results are unused and that have no
/// effects (what the conversion leaves of the vector code it replaced).
void eraseDeadOps(RewriterBase &rewriter, Operation *root) {
  root->walk<WalkOrder::PostOrder, ReverseIterator>([&](Operation *op) {
    if (op != root && isOpTriviallyDead(op))
      rewriter.eraseOp(op);
  });
}

struct SitsGpuMmaSyncPass
    : sits::gpu::impl::SitsGpuMmaSyncBase<SitsGpuMmaSyncPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    sits::gpu::GpuTilingConfig config = sits::gpu::getGpuTilingConfig(func);
    if (!config.mmaSync)
      return;
    SmallVector<scf::ForallOp> warpLoops;
    func.walk([&](scf::ForallOp forall) {
      bool contracts = false;
      forall.walk([&](vector::ContractionOp) { contracts = true; });
      if (contracts && isWarpLevel(forall, config.warpSize))
        warpLoops.push_back(forall);
    });

    IRRewriter rewriter(&getContext());
    for (scf::ForallOp forall : warpLoops) {
      // Contractions in the form mma.sync takes: f16 operands (a generic
      // op's body extends them to f32 first: the extension folds into the
      // contraction), (m, k) x (n, k) with the transposes folded into the
      // reads.
      RewritePatternSet patterns(&getContext());
      vector::populateFoldArithExtensionPatterns(patterns);
      populatePrepareVectorToMMAPatterns(patterns, /*useNvGpu=*/true);
      SmallVector<Operation *> ops;
      forall.getBody()->walk([&](Operation *op) { ops.push_back(op); });
      GreedyRewriteConfig strict;
      strict.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
      (void)applyOpPatternsGreedily(ops, std::move(patterns), strict);
      bool mma = false;
      forall.walk([&](vector::ContractionOp contract) {
        mma |= isMmaContract(contract, tf32);
      });
      if (!mma)
        continue;

      // A contraction left over would run whole on every lane: 32 times
      // the work, silently. Fail instead.
      bool converted =
          succeeded(convertVectorToNVVMCompatibleMMASync(rewriter, forall));
      if (converted) {
        eraseDeadOps(rewriter, forall);
        converted = !forall
                         .walk([](vector::ContractionOp) {
                           return WalkResult::interrupt();
                         })
                         .wasInterrupted();
      }
      if (!converted) {
        forall.emitOpError(
            "warp-level contraction does not map onto nvgpu.mma.sync");
        return signalPassFailure();
      }
      // f32 operands: TF32 tensor core operations (mma.sync has no f32).
      if (tf32) {
        RewritePatternSet tf32Patterns(&getContext());
        nvgpu::populateMmaSyncF32ToTF32Patterns(tf32Patterns);
        SmallVector<Operation *> mmaOps;
        forall.walk([&](nvgpu::MmaSyncOp op) { mmaOps.push_back(op); });
        (void)applyOpPatternsGreedily(mmaOps, std::move(tf32Patterns));
      }
      ++numWarpLoops;
      forall.walk([&](nvgpu::MmaSyncOp) { ++numMma; });
    }
  }
};

} // namespace
