// The benchmark MLP (make_models.py `mlp`): Linear 1024->4096, GELU,
// Linear 4096->4096, GELU, Linear 4096->1024, batch 8. Weights are in the
// PyTorch/ONNX Gemm layout [out, in], hence transpose_rhs; the GELUs are
// separate ops as an importer produces them.
//
// Parses, verifies and round-trips (custom, generic and bytecode forms):
// RUN: sits-opt %s -o %t.mlir
// RUN: sits-opt %t.mlir -o %t.2.mlir
// RUN: diff %t.mlir %t.2.mlir
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt -o %t.generic.mlir
// RUN: diff %t.mlir %t.generic.mlir
// RUN: sits-opt %s --emit-bytecode | sits-opt -o %t.bytecode.mlir
// RUN: diff %t.mlir %t.bytecode.mlir
// RUN: FileCheck %s --input-file=%t.mlir
//
// And sits-fuse-epilogue folds both GELUs into the matmuls:
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-fuse-epilogue))' | FileCheck %s --check-prefix=FUSED

module attributes {sits.target = #sits.target<"h100">} {
  func.func @mlp(%x: tensor<8x1024xf32>,
                 %w1: tensor<4096x1024xf32>, %b1: tensor<4096xf32>,
                 %w2: tensor<4096x4096xf32>, %b2: tensor<4096xf32>,
                 %w3: tensor<1024x4096xf32>, %b3: tensor<1024xf32>) -> tensor<8x1024xf32> {
    %h1 = sits.matmul %x, %w1 bias(%b1) {transpose_rhs}
        : (tensor<8x1024xf32>, tensor<4096x1024xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    %a1 = sits.activation <gelu> %h1 : tensor<8x4096xf32>
    %h2 = sits.matmul %a1, %w2 bias(%b2) {transpose_rhs}
        : (tensor<8x4096xf32>, tensor<4096x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    %a2 = sits.activation <gelu> %h2 : tensor<8x4096xf32>
    %y = sits.matmul %a2, %w3 bias(%b3) {transpose_rhs}
        : (tensor<8x4096xf32>, tensor<1024x4096xf32>, tensor<1024xf32>) -> tensor<8x1024xf32>
    return %y : tensor<8x1024xf32>
  }
}

// CHECK: module attributes {sits.target = #sits.target<"h100">}
// CHECK-LABEL: func.func @mlp
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<8x1024xf32>,
//  CHECK-SAME: %[[W1:[^:]+]]: tensor<4096x1024xf32>, %[[B1:[^:]+]]: tensor<4096xf32>,
//  CHECK-SAME: %[[W2:[^:]+]]: tensor<4096x4096xf32>, %[[B2:[^:]+]]: tensor<4096xf32>,
//  CHECK-SAME: %[[W3:[^:]+]]: tensor<1024x4096xf32>, %[[B3:[^:]+]]: tensor<1024xf32>)
//       CHECK:   %[[H1:.+]] = sits.matmul %[[X]], %[[W1]] bias(%[[B1]]) {transpose_rhs}
//  CHECK-SAME:     -> tensor<8x4096xf32>
//       CHECK:   %[[A1:.+]] = sits.activation <gelu> %[[H1]] : tensor<8x4096xf32>
//       CHECK:   %[[H2:.+]] = sits.matmul %[[A1]], %[[W2]] bias(%[[B2]]) {transpose_rhs}
//  CHECK-SAME:     -> tensor<8x4096xf32>
//       CHECK:   %[[A2:.+]] = sits.activation <gelu> %[[H2]] : tensor<8x4096xf32>
//       CHECK:   %[[Y:.+]] = sits.matmul %[[A2]], %[[W3]] bias(%[[B3]]) {transpose_rhs}
//  CHECK-SAME:     -> tensor<8x1024xf32>
//       CHECK:   return %[[Y]] : tensor<8x1024xf32>

// FUSED-LABEL: func.func @mlp
//       FUSED:   %[[H1:.+]] = sits.matmul {{.+}} {activation = #sits.activation<gelu>, transpose_rhs}
//       FUSED:   %[[H2:.+]] = sits.matmul %[[H1]], {{.+}} {activation = #sits.activation<gelu>, transpose_rhs}
//       FUSED:   %[[Y:.+]] = sits.matmul %[[H2]], {{.+}} {transpose_rhs}
//   FUSED-NOT:   sits.activation
//       FUSED:   return %[[Y]]
