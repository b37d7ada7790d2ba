//===- Passes.h - SITS conversion passes ------------------------*- C++ -*-===//

#ifndef SITS_PASSES_CONVERSION_PASSES_H
#define SITS_PASSES_CONVERSION_PASSES_H

#include "passes/Conversion/SitsToLinalg/SitsToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir::sits {

#define GEN_PASS_DECL
#include "passes/Conversion/Passes.h.inc"

/// Registers every SITS conversion pass (registerSitsConversionPasses()).
#define GEN_PASS_REGISTRATION
#include "passes/Conversion/Passes.h.inc"

} // namespace mlir::sits

#endif // SITS_PASSES_CONVERSION_PASSES_H
