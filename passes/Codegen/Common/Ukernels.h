//===- Ukernels.h - Ops computed by runtime kernels -------------*- C++ -*-===//
//
// The attributes that mark linalg ops for the runtime's hand-written kernels,
// shared by the lowering that creates them (sits-convert-to-linalg) and the
// codegen passes that keep them whole and call the kernels.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CODEGEN_COMMON_UKERNELS_H
#define SITS_PASSES_CODEGEN_COMMON_UKERNELS_H

#include "llvm/ADT/StringRef.h"

namespace mlir::sits {

/// On a `linalg.generic` that a runtime kernel computes (the kernel's name):
/// tiling, fusion and vectorization leave it whole, and
/// sits-cpu-lower-ukernels replaces it, once on buffers, by a call.
constexpr llvm::StringLiteral kUkernelAttr = "sits.ukernel";
/// On a `linalg.generic` re-laying out weight codes for a
/// runtime kernel (the layout's name): sits-cpu-pack-weights computes it at
/// compile time when its input is constant.
constexpr llvm::StringLiteral kWeightLayoutAttr = "sits.weight_layout";
/// The INT8-activation quantized matmuls (lowerQMatmulToIntegerDot) and the
/// layout of their weights, both for `sitsRuntimeQDot`:
///  * "qdot_i4": [N/16][K/8][16][4] bytes, the low nibble of byte
///    (nb, o, j, b) holding code(k = 8o + b, n = 16nb + j) + 8 and the high
///    nibble code(8o + 4 + b, n) + 8;
///  * "qdot_i8": [N/16][K/4][16][4] bytes, byte (nb, o, j, b) holding
///    code(4o + b, 16nb + j) + 128.
constexpr llvm::StringLiteral kQDotI4 = "qdot_i4";
constexpr llvm::StringLiteral kQDotI8 = "qdot_i8";

} // namespace mlir::sits

#endif // SITS_PASSES_CODEGEN_COMMON_UKERNELS_H
