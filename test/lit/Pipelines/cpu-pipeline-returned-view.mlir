// A function returning a view of its argument (an outlined layer whose
// result is a reshape to a shape computed at run time) returns a copy: the
// ownership-based deallocation clones the view, and the clone becomes an
// allocation and a copy before LLVM (nothing is left unconverted).
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-codegen{target=x86-64-v3 num-threads=2})' | FileCheck %s

// CHECK-NOT: bufferization.clone
// CHECK-NOT: unrealized_conversion_cast
// CHECK-LABEL: llvm.func @layer(
// CHECK: llvm.call @_mlir_memref_to_llvm_alloc
// CHECK: %[[V:.+]] = llvm.load %{{.+}} : !llvm.ptr -> f32
// CHECK: llvm.store %[[V]], %{{.+}} : f32, !llvm.ptr
// CHECK: llvm.return
func.func private @layer(%x: tensor<?x1xf32>) -> tensor<?x?x1x1xf32> attributes {sits.layer} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i64
  %d0 = tensor.dim %x, %c0 : tensor<?x1xf32>
  %a = arith.index_cast %d0 : index to i64
  %h = arith.divui %a, %c2 : i64
  %shape = tensor.from_elements %h, %c2, %c1, %c1 : tensor<4xi64>
  %r = tensor.reshape %x(%shape) : (tensor<?x1xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
  %c = tensor.cast %r : tensor<?x?x?x?xf32> to tensor<?x?x1x1xf32>
  return %c : tensor<?x?x1x1xf32>
}

func.func @main(%x: tensor<?x1xf32>, %y: tensor<?x1xf32>) -> (tensor<?x?x1x1xf32>, tensor<?x?x1x1xf32>) {
  %a = call @layer(%x) : (tensor<?x1xf32>) -> tensor<?x?x1x1xf32>
  %b = call @layer(%y) : (tensor<?x1xf32>) -> tensor<?x?x1x1xf32>
  return %a, %b : tensor<?x?x1x1xf32>, tensor<?x?x1x1xf32>
}
