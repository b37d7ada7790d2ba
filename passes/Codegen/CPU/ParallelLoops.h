//===- ParallelLoops.h - Linearized iterations of scf.parallel --*- C++ -*-===//
//
// What sits-cpu-chunk-parallel-loops and sits-cpu-parallel-to-runtime share:
// both run an scf.parallel's iterations by one linear index.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CODEGEN_CPU_PARALLELLOOPS_H
#define SITS_PASSES_CODEGEN_CPU_PARALLELLOOPS_H

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::sits::cpu {

/// The trip count of each dimension of `loop` (at least 0), built at `b`'s
/// insertion point and folded where the bounds are constant; `total` is
/// their product.
SmallVector<Value> buildTripCounts(OpBuilder &b, Location loc,
                                   scf::ParallelOp loop, Value &total);

/// The induction variables of linear iteration `linear` of a loop with
/// `trips`, `lowerBounds` and `steps` per dimension, the last fastest.
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ValueRange trips, ValueRange lowerBounds,
                               ValueRange steps);

} // namespace mlir::sits::cpu

#endif // SITS_PASSES_CODEGEN_CPU_PARALLELLOOPS_H
