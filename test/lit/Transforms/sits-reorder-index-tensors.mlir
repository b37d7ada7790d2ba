// Shape tensors (index elements, as an exported decoder's run-time reshape
// targets are) count 8 bytes per element in the cost model.
//
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-reorder{schedule-file=-})' -o /dev/null | FileCheck %s

// CHECK: op 0 {{.*}}bytes=24 {{.*}}name=tensor.from_elements
func.func @main(%x: tensor<?x8xf32>, %a: index, %b: index) -> tensor<?x?x8xf32> {
  %c8 = arith.constant 8 : index
  %shape = tensor.from_elements %a, %b, %c8 : tensor<3xindex>
  %y = tensor.reshape %x(%shape) : (tensor<?x8xf32>, tensor<3xindex>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}
