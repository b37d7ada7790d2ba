// One GPT-2-small decoder block at prefill (make_models.py `gpt_prefill`:
// d = 768, 12 heads of 64, MLP 3072, batch 1, 128 tokens): pre-LayerNorm,
// fused QKV projection with bias, causal attention, output projection,
// residual adds (arith.addf on tensors), GELU MLP. Returns the hidden state
// and the K/V heads (the present KV cache).
//
// RUN: sits-opt %s -o %t.mlir
// RUN: sits-opt %t.mlir -o %t.2.mlir
// RUN: diff %t.mlir %t.2.mlir
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt -o %t.generic.mlir
// RUN: diff %t.mlir %t.generic.mlir
// RUN: sits-opt %s --emit-bytecode | sits-opt -o %t.bytecode.mlir
// RUN: diff %t.mlir %t.bytecode.mlir
// RUN: FileCheck %s --input-file=%t.mlir
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-fuse-epilogue))' | FileCheck %s --check-prefix=FUSED

module attributes {sits.target = #sits.target<"h100">} {
  func.func @gpt2_block(%x: tensor<1x128x768xf32>,
                        %ln1_g: tensor<768xf32>, %ln1_b: tensor<768xf32>,
                        %w_qkv: tensor<768x2304xf32>, %b_qkv: tensor<2304xf32>,
                        %w_proj: tensor<768x768xf32>, %b_proj: tensor<768xf32>,
                        %ln2_g: tensor<768xf32>, %ln2_b: tensor<768xf32>,
                        %w_fc: tensor<768x3072xf32>, %b_fc: tensor<3072xf32>,
                        %w_out: tensor<3072x768xf32>, %b_out: tensor<768xf32>)
      -> (tensor<1x128x768xf32>, tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) {
    // Attention.
    %h = sits.layer_norm %x, %ln1_g, %ln1_b {epsilon = 1.0e-05 : f64}
        : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
    %qkv = sits.matmul %h, %w_qkv bias(%b_qkv)
        : (tensor<1x128x768xf32>, tensor<768x2304xf32>, tensor<2304xf32>) -> tensor<1x128x2304xf32>
    %q = tensor.extract_slice %qkv[0, 0, 0] [1, 128, 768] [1, 1, 1] : tensor<1x128x2304xf32> to tensor<1x128x768xf32>
    %k = tensor.extract_slice %qkv[0, 0, 768] [1, 128, 768] [1, 1, 1] : tensor<1x128x2304xf32> to tensor<1x128x768xf32>
    %v = tensor.extract_slice %qkv[0, 0, 1536] [1, 128, 768] [1, 1, 1] : tensor<1x128x2304xf32> to tensor<1x128x768xf32>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 128, 12, 64] : tensor<1x128x768xf32> into tensor<1x128x12x64xf32>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 128, 12, 64] : tensor<1x128x768xf32> into tensor<1x128x12x64xf32>
    %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 128, 12, 64] : tensor<1x128x768xf32> into tensor<1x128x12x64xf32>
    %e = tensor.empty() : tensor<1x12x128x64xf32>
    %qh = linalg.transpose ins(%q4 : tensor<1x128x12x64xf32>) outs(%e : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<1x128x12x64xf32>) outs(%e : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %vh = linalg.transpose ins(%v4 : tensor<1x128x12x64xf32>) outs(%e : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %att = sits.attention %qh, %kh, %vh {causal}
        : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x128x64xf32>
    %e2 = tensor.empty() : tensor<1x128x12x64xf32>
    %att_t = linalg.transpose ins(%att : tensor<1x12x128x64xf32>) outs(%e2 : tensor<1x128x12x64xf32>) permutation = [0, 2, 1, 3]
    %att2 = tensor.collapse_shape %att_t [[0], [1], [2, 3]] : tensor<1x128x12x64xf32> into tensor<1x128x768xf32>
    %proj = sits.matmul %att2, %w_proj bias(%b_proj)
        : (tensor<1x128x768xf32>, tensor<768x768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
    %x1 = arith.addf %x, %proj : tensor<1x128x768xf32>
    // MLP.
    %h2 = sits.layer_norm %x1, %ln2_g, %ln2_b {epsilon = 1.0e-05 : f64}
        : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
    %fc = sits.matmul %h2, %w_fc bias(%b_fc)
        : (tensor<1x128x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<1x128x3072xf32>
    %g = sits.activation <gelu> %fc : tensor<1x128x3072xf32>
    %out = sits.matmul %g, %w_out bias(%b_out)
        : (tensor<1x128x3072xf32>, tensor<3072x768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
    %x2 = arith.addf %x1, %out : tensor<1x128x768xf32>
    return %x2, %kh, %vh : tensor<1x128x768xf32>, tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>
  }
}

// CHECK-LABEL: func.func @gpt2_block
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<1x128x768xf32>,
//  CHECK-SAME: %[[LN1G:[^:]+]]: tensor<768xf32>, %[[LN1B:[^:]+]]: tensor<768xf32>,
//  CHECK-SAME: %[[WQKV:[^:]+]]: tensor<768x2304xf32>, %[[BQKV:[^:]+]]: tensor<2304xf32>,
//  CHECK-SAME: %[[WPROJ:[^:]+]]: tensor<768x768xf32>, %[[BPROJ:[^:]+]]: tensor<768xf32>,
//  CHECK-SAME: %[[LN2G:[^:]+]]: tensor<768xf32>, %[[LN2B:[^:]+]]: tensor<768xf32>,
//  CHECK-SAME: %[[WFC:[^:]+]]: tensor<768x3072xf32>, %[[BFC:[^:]+]]: tensor<3072xf32>,
//  CHECK-SAME: %[[WOUT:[^:]+]]: tensor<3072x768xf32>, %[[BOUT:[^:]+]]: tensor<768xf32>)
//       CHECK:   %[[H:.+]] = sits.layer_norm %[[X]], %[[LN1G]], %[[LN1B]] : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
//       CHECK:   %[[QKV:.+]] = sits.matmul %[[H]], %[[WQKV]] bias(%[[BQKV]]) : {{.+}} -> tensor<1x128x2304xf32>
//   CHECK-DAG:   %[[Q:.+]] = tensor.extract_slice %[[QKV]][0, 0, 0] [1, 128, 768] [1, 1, 1]
//   CHECK-DAG:   %[[K:.+]] = tensor.extract_slice %[[QKV]][0, 0, 768] [1, 128, 768] [1, 1, 1]
//   CHECK-DAG:   %[[V:.+]] = tensor.extract_slice %[[QKV]][0, 0, 1536] [1, 128, 768] [1, 1, 1]
//   CHECK-DAG:   %[[Q4:.+]] = tensor.expand_shape %[[Q]] {{\[\[}}0], [1], [2, 3]] output_shape [1, 128, 12, 64]
//   CHECK-DAG:   %[[K4:.+]] = tensor.expand_shape %[[K]] {{\[\[}}0], [1], [2, 3]] output_shape [1, 128, 12, 64]
//   CHECK-DAG:   %[[V4:.+]] = tensor.expand_shape %[[V]] {{\[\[}}0], [1], [2, 3]] output_shape [1, 128, 12, 64]
//   CHECK-DAG:   %[[QH:.+]] = linalg.transpose ins(%[[Q4]] : tensor<1x128x12x64xf32>) outs(%{{.+}} : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
//   CHECK-DAG:   %[[KH:.+]] = linalg.transpose ins(%[[K4]] : tensor<1x128x12x64xf32>) outs(%{{.+}} : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
//   CHECK-DAG:   %[[VH:.+]] = linalg.transpose ins(%[[V4]] : tensor<1x128x12x64xf32>) outs(%{{.+}} : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
//       CHECK:   %[[ATT:.+]] = sits.attention %[[QH]], %[[KH]], %[[VH]] {causal}
//  CHECK-SAME:     -> tensor<1x12x128x64xf32>
//       CHECK:   %[[ATTT:.+]] = linalg.transpose ins(%[[ATT]] : tensor<1x12x128x64xf32>)
//       CHECK:   %[[ATT2:.+]] = tensor.collapse_shape %[[ATTT]] {{\[\[}}0], [1], [2, 3]] : tensor<1x128x12x64xf32> into tensor<1x128x768xf32>
//       CHECK:   %[[PROJ:.+]] = sits.matmul %[[ATT2]], %[[WPROJ]] bias(%[[BPROJ]])
//       CHECK:   %[[X1:.+]] = arith.addf %[[X]], %[[PROJ]] : tensor<1x128x768xf32>
//       CHECK:   %[[H2:.+]] = sits.layer_norm %[[X1]], %[[LN2G]], %[[LN2B]]
//       CHECK:   %[[FC:.+]] = sits.matmul %[[H2]], %[[WFC]] bias(%[[BFC]]) : {{.+}} -> tensor<1x128x3072xf32>
//       CHECK:   %[[G:.+]] = sits.activation <gelu> %[[FC]] : tensor<1x128x3072xf32>
//       CHECK:   %[[OUT:.+]] = sits.matmul %[[G]], %[[WOUT]] bias(%[[BOUT]]) : {{.+}} -> tensor<1x128x768xf32>
//       CHECK:   %[[X2:.+]] = arith.addf %[[X1]], %[[OUT]] : tensor<1x128x768xf32>
//       CHECK:   return %[[X2]], %[[KH]], %[[VH]]

// Only the MLP's GELU has a contraction producer with a single use.
// FUSED-LABEL: func.func @gpt2_block
//       FUSED:   sits.matmul {{.+}} -> tensor<1x128x2304xf32>
//       FUSED:   sits.attention
//       FUSED:   %[[FC:.+]] = sits.matmul {{.+}} {activation = #sits.activation<gelu>} : {{.+}} -> tensor<1x128x3072xf32>
//   FUSED-NOT:   sits.activation
//       FUSED:   sits.matmul %[[FC]],
