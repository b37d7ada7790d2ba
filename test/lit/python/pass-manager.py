# The SITS passes are registered in every sits_mlir context: parse a module in
# Python, run sits-fuse-epilogue and canonicalize through the PassManager, and
# check that sits-opt re-parses the result.
#
# RUN: %python %s | sits-opt | FileCheck %s

from sits_mlir import ir, passmanager

SOURCE = """
func.func @mlp(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %0 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %1 = sits.activation <gelu> %0 : tensor<8x64xf32>
  %2 = sits.activation <none> %1 : tensor<8x64xf32>
  return %2 : tensor<8x64xf32>
}
"""

with ir.Context():
    module = ir.Module.parse(SOURCE)
    pm = passmanager.PassManager.parse(
        "builtin.module(canonicalize,func.func(sits-fuse-epilogue))")
    pm.run(module.operation)
    assert module.operation.verify()
    print(module)

# CHECK-LABEL: func.func @mlp
#  CHECK-SAME: (%[[X:.+]]: tensor<8x64xf32>, %[[W:.+]]: tensor<64x64xf32>)
#       CHECK:   %[[M:.+]] = sits.matmul %[[X]], %[[W]] {activation = #sits.activation<gelu>}
#   CHECK-NOT:   sits.activation
#       CHECK:   return %[[M]]
