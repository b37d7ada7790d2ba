# sits-convert-to-linalg is registered in every sits_mlir context: run it
# through PassManager.parse, check that the result verifies and re-parses in
# sits-opt, and that a failure raises with the op's location.
#
# RUN: %python %s | sits-opt | FileCheck %s

from sits_mlir import ir, passmanager

SOURCE = """
func.func @block(%x: tensor<4x64xf32>, %w: tensor<64x32xi4, #sits.packed<storage = i8, axis = 0>>,
                 %s: tensor<32xf32>) -> tensor<4x32xf32> {
  %y = sits.qmatmul %x, %w, %s {axis = 1 : i64}
      : (tensor<4x64xf32>, tensor<64x32xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32xf32>) -> tensor<4x32xf32>
  %z = sits.softmax %y : tensor<4x32xf32>
  return %z : tensor<4x32xf32>
}
"""

BAD = """
func.func @bad(%w: tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>) -> tensor<4x4xi4, #sits.packed<storage = i8, axis = 1>> {
  %s = tensor.extract_slice %w[0, 0] [4, 4] [1, 1] : tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>> to tensor<4x4xi4, #sits.packed<storage = i8, axis = 1>>
  return %s : tensor<4x4xi4, #sits.packed<storage = i8, axis = 1>>
}
"""

with ir.Context():
    module = ir.Module.parse(SOURCE)
    passmanager.PassManager.parse("builtin.module(sits-convert-to-linalg)").run(module.operation)
    assert module.operation.verify()
    assert "sits." not in str(module)
    print(module)

    bad = ir.Module.parse(BAD)
    try:
        passmanager.PassManager.parse("builtin.module(sits-convert-to-linalg)").run(bad.operation)
        raise AssertionError("the conversion should have failed")
    except ir.MLIRError as error:
        message = str(error)
        assert '"-":3:8' in message, message
        assert "a #sits.packed tensor" in message, message

# CHECK-LABEL: func.func @block
#  CHECK-SAME: %{{.+}}: tensor<32x32xi8>
#       CHECK:   linalg.generic
#       CHECK:     arith.shrui
#       CHECK:   linalg.matmul
#       CHECK:   math.exp
#   CHECK-NOT:   sits.
