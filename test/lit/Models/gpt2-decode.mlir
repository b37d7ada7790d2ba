// One GPT-2-small decode step (make_models.py `gpt_decode`): a single new
// token attends to a 512-token KV cache. The new K/V heads are joined to the
// past ones with tensor.concat along the sequence dimension, and
// sits.attention {causal} runs with Tq = 1 against Tk = 513 (bottom-right
// aligned: the query sits at position 512 and sees every key). Returns the
// hidden state and the present K/V (513 tokens).
//
// RUN: sits-opt %s -o %t.mlir
// RUN: sits-opt %t.mlir -o %t.2.mlir
// RUN: diff %t.mlir %t.2.mlir
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt -o %t.generic.mlir
// RUN: diff %t.mlir %t.generic.mlir
// RUN: sits-opt %s --emit-bytecode | sits-opt -o %t.bytecode.mlir
// RUN: diff %t.mlir %t.bytecode.mlir
// RUN: FileCheck %s --input-file=%t.mlir

module attributes {sits.target = #sits.target<"h100">} {
  func.func @gpt2_decode_step(%x: tensor<1x1x768xf32>,
                              %past_k: tensor<1x12x512x64xf32>, %past_v: tensor<1x12x512x64xf32>,
                              %ln1_g: tensor<768xf32>, %ln1_b: tensor<768xf32>,
                              %w_qkv: tensor<768x2304xf32>, %b_qkv: tensor<2304xf32>,
                              %w_proj: tensor<768x768xf32>, %b_proj: tensor<768xf32>,
                              %ln2_g: tensor<768xf32>, %ln2_b: tensor<768xf32>,
                              %w_fc: tensor<768x3072xf32>, %b_fc: tensor<3072xf32>,
                              %w_out: tensor<3072x768xf32>, %b_out: tensor<768xf32>)
      -> (tensor<1x1x768xf32>, tensor<1x12x513x64xf32>, tensor<1x12x513x64xf32>) {
    %h = sits.layer_norm %x, %ln1_g, %ln1_b
        : (tensor<1x1x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x1x768xf32>
    %qkv = sits.matmul %h, %w_qkv bias(%b_qkv)
        : (tensor<1x1x768xf32>, tensor<768x2304xf32>, tensor<2304xf32>) -> tensor<1x1x2304xf32>
    // With one token, [1, 1, 12, 64] -> [1, 12, 1, 64] is a pure reshape.
    %qkv2 = tensor.collapse_shape %qkv [[0, 1], [2]] : tensor<1x1x2304xf32> into tensor<1x2304xf32>
    %q = tensor.extract_slice %qkv2[0, 0] [1, 768] [1, 1] : tensor<1x2304xf32> to tensor<1x768xf32>
    %k = tensor.extract_slice %qkv2[0, 768] [1, 768] [1, 1] : tensor<1x2304xf32> to tensor<1x768xf32>
    %v = tensor.extract_slice %qkv2[0, 1536] [1, 768] [1, 1] : tensor<1x2304xf32> to tensor<1x768xf32>
    %qh = tensor.expand_shape %q [[0], [1, 2, 3]] output_shape [1, 12, 1, 64] : tensor<1x768xf32> into tensor<1x12x1x64xf32>
    %k_new = tensor.expand_shape %k [[0], [1, 2, 3]] output_shape [1, 12, 1, 64] : tensor<1x768xf32> into tensor<1x12x1x64xf32>
    %v_new = tensor.expand_shape %v [[0], [1, 2, 3]] output_shape [1, 12, 1, 64] : tensor<1x768xf32> into tensor<1x12x1x64xf32>
    %kc = tensor.concat dim(2) %past_k, %k_new
        : (tensor<1x12x512x64xf32>, tensor<1x12x1x64xf32>) -> tensor<1x12x513x64xf32>
    %vc = tensor.concat dim(2) %past_v, %v_new
        : (tensor<1x12x512x64xf32>, tensor<1x12x1x64xf32>) -> tensor<1x12x513x64xf32>
    %att = sits.attention %qh, %kc, %vc {causal}
        : (tensor<1x12x1x64xf32>, tensor<1x12x513x64xf32>, tensor<1x12x513x64xf32>) -> tensor<1x12x1x64xf32>
    %att3 = tensor.collapse_shape %att [[0], [1, 2, 3]] : tensor<1x12x1x64xf32> into tensor<1x768xf32>
    %att4 = tensor.expand_shape %att3 [[0, 1], [2]] output_shape [1, 1, 768] : tensor<1x768xf32> into tensor<1x1x768xf32>
    %proj = sits.matmul %att4, %w_proj bias(%b_proj)
        : (tensor<1x1x768xf32>, tensor<768x768xf32>, tensor<768xf32>) -> tensor<1x1x768xf32>
    %x1 = arith.addf %x, %proj : tensor<1x1x768xf32>
    %h2 = sits.layer_norm %x1, %ln2_g, %ln2_b
        : (tensor<1x1x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x1x768xf32>
    %fc = sits.matmul %h2, %w_fc bias(%b_fc) {activation = #sits.activation<gelu>}
        : (tensor<1x1x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<1x1x3072xf32>
    %out = sits.matmul %fc, %w_out bias(%b_out)
        : (tensor<1x1x3072xf32>, tensor<3072x768xf32>, tensor<768xf32>) -> tensor<1x1x768xf32>
    %x2 = arith.addf %x1, %out : tensor<1x1x768xf32>
    return %x2, %kc, %vc : tensor<1x1x768xf32>, tensor<1x12x513x64xf32>, tensor<1x12x513x64xf32>
  }
}

// CHECK-LABEL: func.func @gpt2_decode_step
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<1x1x768xf32>,
//  CHECK-SAME: %[[PK:[^:]+]]: tensor<1x12x512x64xf32>, %[[PV:[^:]+]]: tensor<1x12x512x64xf32>,
//       CHECK:   %[[QKV:.+]] = sits.matmul {{.+}} -> tensor<1x1x2304xf32>
//       CHECK:   %[[QKV2:.+]] = tensor.collapse_shape %[[QKV]]
//   CHECK-DAG:   %[[Q:.+]] = tensor.extract_slice %[[QKV2]][0, 0] [1, 768]
//   CHECK-DAG:   %[[K:.+]] = tensor.extract_slice %[[QKV2]][0, 768] [1, 768]
//   CHECK-DAG:   %[[V:.+]] = tensor.extract_slice %[[QKV2]][0, 1536] [1, 768]
//   CHECK-DAG:   %[[QH:.+]] = tensor.expand_shape %[[Q]] {{.+}} into tensor<1x12x1x64xf32>
//   CHECK-DAG:   %[[KN:.+]] = tensor.expand_shape %[[K]] {{.+}} into tensor<1x12x1x64xf32>
//   CHECK-DAG:   %[[VN:.+]] = tensor.expand_shape %[[V]] {{.+}} into tensor<1x12x1x64xf32>
//   CHECK-DAG:   %[[KC:.+]] = tensor.concat dim(2) %[[PK]], %[[KN]] : (tensor<1x12x512x64xf32>, tensor<1x12x1x64xf32>) -> tensor<1x12x513x64xf32>
//   CHECK-DAG:   %[[VC:.+]] = tensor.concat dim(2) %[[PV]], %[[VN]] : (tensor<1x12x512x64xf32>, tensor<1x12x1x64xf32>) -> tensor<1x12x513x64xf32>
//       CHECK:   %[[ATT:.+]] = sits.attention %[[QH]], %[[KC]], %[[VC]] {causal}
//  CHECK-SAME:     : (tensor<1x12x1x64xf32>, tensor<1x12x513x64xf32>, tensor<1x12x513x64xf32>) -> tensor<1x12x1x64xf32>
//       CHECK:   tensor.collapse_shape %[[ATT]]
//       CHECK:   %[[X1:.+]] = arith.addf %[[X]], %{{.+}} : tensor<1x1x768xf32>
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<gelu>} : {{.+}} -> tensor<1x1x3072xf32>
//       CHECK:   %[[X2:.+]] = arith.addf %[[X1]], %{{.+}} : tensor<1x1x768xf32>
//       CHECK:   return %[[X2]], %[[KC]], %[[VC]] : tensor<1x1x768xf32>, tensor<1x12x513x64xf32>, tensor<1x12x513x64xf32>
