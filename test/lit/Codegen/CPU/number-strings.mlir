// RUN: sits-opt %s --sits-cpu-number-strings | FileCheck %s

// Private string constants are named by their position, per base name,
// whatever counter upstream drew their names from; their uses follow.
// Other globals (public, mutable, not bytes) keep their names.

// CHECK: llvm.mlir.global private constant @assert_msg_0("first\00")
// CHECK: llvm.mlir.global private constant @assert_msg_1("second\00")
// CHECK: llvm.mlir.global private constant @vector_print_str_0("x\00")
// CHECK: llvm.mlir.global private constant @assert_msg_2("third\00")
// CHECK: llvm.mlir.global internal constant @table(dense<1> : tensor<4xi32>)
// CHECK: llvm.mlir.global external constant @exported_17("kept\00")
// CHECK: llvm.mlir.global private @mutable_3("kept\00")
llvm.mlir.global private constant @assert_msg_41("first\00") {addr_space = 0 : i32}
llvm.mlir.global private constant @assert_msg_0("second\00") {addr_space = 0 : i32}
llvm.mlir.global private constant @vector_print_str("x\00") {addr_space = 0 : i32}
llvm.mlir.global private constant @assert_msg_1("third\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @table(dense<1> : tensor<4xi32>) {addr_space = 0 : i32} : !llvm.array<4 x i32>
llvm.mlir.global external constant @exported_17("kept\00") {addr_space = 0 : i32}
llvm.mlir.global private @mutable_3("kept\00") {addr_space = 0 : i32}

// CHECK-LABEL: llvm.func @uses
//       CHECK:   llvm.mlir.addressof @assert_msg_0
//       CHECK:   llvm.mlir.addressof @assert_msg_1
//       CHECK:   llvm.mlir.addressof @assert_msg_2
//       CHECK:   llvm.mlir.addressof @vector_print_str_0
llvm.func @uses() -> !llvm.ptr {
  %0 = llvm.mlir.addressof @assert_msg_41 : !llvm.ptr
  %1 = llvm.mlir.addressof @assert_msg_0 : !llvm.ptr
  %2 = llvm.mlir.addressof @assert_msg_1 : !llvm.ptr
  %3 = llvm.mlir.addressof @vector_print_str : !llvm.ptr
  llvm.return %0 : !llvm.ptr
}
