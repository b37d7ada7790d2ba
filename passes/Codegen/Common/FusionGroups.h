//===- FusionGroups.h - Fusion groups and tile-size helpers -----*- C++ -*-===//
//
// What the CPU and GPU tilers share: which ops may be tiled, which producers
// join a consumer's fusion group, and whether fusing a producer through a
// slice would recompute it. Both tilers grow a group around its last op (the
// root), tile the root with scf.forall and fuse the group into each tile.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CODEGEN_COMMON_FUSIONGROUPS_H
#define SITS_PASSES_CODEGEN_COMMON_FUSIONGROUPS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SetVector.h"

#include <utility>

namespace mlir::sits::codegen {

/// Tiling slices each operand by the bounding box of its indexing map over
/// the tile, then applies the same map to tile-local indices: right for
/// linear maps, wrong for maps with mod/floordiv (upstream im2col), whose
/// value depends on where the tile starts. Such ops stay whole.
bool isSafelyTileable(Operation *op);

/// A linalg op with the contraction interface (matmul, batch matmul and
/// contraction generics).
bool isContraction(Operation *op);

/// Ops that are cheap enough to recompute in every tile that needs them.
bool isCheapToRecompute(Operation *op);

/// Whether every loop of `map` appears in exactly one of its results, each
/// a linear combination of loops (a permutation, or several loops flattened
/// into one dimension, such as pixels oh * OW + ow).
bool isLinearPartition(AffineMap map);

/// The contraction whose output `root` consumes elementwise, if any, and
/// the map from root loops to the contraction's output dimensions: its tile
/// shape then decides the group's.
std::pair<linalg::LinalgOp, AffineMap>
findAnchorContraction(linalg::LinalgOp root);

/// Whether `value` is computed from `iv` (through index arithmetic).
bool dependsOn(Value value, Value iv, int depth = 8);

/// Whether fusing through `slice` gives every tile of the innermost
/// enclosing scf.forall its own part of the producer. A slice that is the
/// same for all values of some tile loop (e.g. the lhs of a matmul tiled
/// along N: every N tile needs all of it) would recompute the whole
/// producer in each of those tiles.
bool isDisjointPerTile(tensor::ExtractSliceOp slice);

/// The ops that fuse into `root`'s tiles: producers in `root`'s block whose
/// every user is in the group (so fusing computes them once, inside the
/// tiles, and nowhere else), grown to a fixpoint so diamonds such as
/// softmax's max feeding both the exponent sum and the division join
/// together.
llvm::SetVector<Operation *> computeFusionGroup(linalg::LinalgOp root);

/// An elementwise op widening integer codes to floats: dequantization.
bool isDequantizing(Operation *op);

/// An all-parallel op that reads nothing but by index (tensor.extract):
/// the patch gather of a convolution computed as a GEMM.
bool isPatchGather(Operation *op);

/// The ops outlined as one dispatch with `root`: computeFusionGroup's
/// producers, except that a contraction's operands join only when they are
/// fills, dequantizations (its initial value and weights) or patch gathers
/// (each tile of the GEMM then gathers its own patches, which stay in
/// cache, instead of the whole patch matrix making a round trip through
/// memory). The
/// activations a contraction reads are their own dispatch's results, so a
/// chain of layers (each layer's output read by the next layer's
/// contractions and its residual) is one group per layer, not one group.
llvm::SetVector<Operation *> computeDispatchGroup(linalg::LinalgOp root);

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Index attributes for static tile sizes.
SmallVector<OpFoldResult> asFoldResults(MLIRContext *ctx,
                                        ArrayRef<int64_t> sizes);

} // namespace mlir::sits::codegen

#endif // SITS_PASSES_CODEGEN_COMMON_FUSIONGROUPS_H
