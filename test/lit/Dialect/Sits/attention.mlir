// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.attention: MHA, GQA, MQA, causal prefill and decode
// against a KV cache, boolean and additive masks, explicit scale, Dv != D.

func.func @mha_causal(%q: tensor<1x12x128x64xf32>, %k: tensor<1x12x128x64xf32>, %v: tensor<1x12x128x64xf32>) -> tensor<1x12x128x64xf32> {
  %o = sits.attention %q, %k, %v {causal}
      : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x128x64xf32>
  return %o : tensor<1x12x128x64xf32>
}
// CHECK-LABEL: func.func @mha_causal
//  CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x12x128x64xf32>, %[[K:[^:]+]]: tensor<1x12x128x64xf32>, %[[V:[^:]+]]: tensor<1x12x128x64xf32>)
//       CHECK:   %[[O:.+]] = sits.attention %[[Q]], %[[K]], %[[V]] {causal}
//  CHECK-SAME:     : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x128x64xf32>
//       CHECK:   return %[[O]]

// -----

// One decode step of a GPT-2 head group against a 512-token cache.
func.func @decode_kv_cache(%q: tensor<1x12x1x64xf32>, %past_k: tensor<1x12x512x64xf32>, %k_new: tensor<1x12x1x64xf32>,
                           %past_v: tensor<1x12x512x64xf32>, %v_new: tensor<1x12x1x64xf32>) -> tensor<1x12x1x64xf32> {
  %k = tensor.concat dim(2) %past_k, %k_new
      : (tensor<1x12x512x64xf32>, tensor<1x12x1x64xf32>) -> tensor<1x12x513x64xf32>
  %v = tensor.concat dim(2) %past_v, %v_new
      : (tensor<1x12x512x64xf32>, tensor<1x12x1x64xf32>) -> tensor<1x12x513x64xf32>
  %o = sits.attention %q, %k, %v {causal}
      : (tensor<1x12x1x64xf32>, tensor<1x12x513x64xf32>, tensor<1x12x513x64xf32>) -> tensor<1x12x1x64xf32>
  return %o : tensor<1x12x1x64xf32>
}
// CHECK-LABEL: func.func @decode_kv_cache
//  CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x12x1x64xf32>, %[[PK:[^:]+]]: tensor<1x12x512x64xf32>, %[[KN:[^:]+]]: tensor<1x12x1x64xf32>, %[[PV:[^:]+]]: tensor<1x12x512x64xf32>, %[[VN:[^:]+]]: tensor<1x12x1x64xf32>)
//   CHECK-DAG:   %[[K:.+]] = tensor.concat dim(2) %[[PK]], %[[KN]]
//   CHECK-DAG:   %[[V:.+]] = tensor.concat dim(2) %[[PV]], %[[VN]]
//       CHECK:   sits.attention %[[Q]], %[[K]], %[[V]] {causal}
//  CHECK-SAME:     : (tensor<1x12x1x64xf32>, tensor<1x12x513x64xf32>, tensor<1x12x513x64xf32>) -> tensor<1x12x1x64xf32>

// -----

// Grouped-query attention: 32 query heads read 8 key/value heads.
func.func @gqa(%q: tensor<2x32x16x128xf16>, %k: tensor<2x8x16x128xf16>, %v: tensor<2x8x16x128xf16>) -> tensor<2x32x16x128xf16> {
  %o = sits.attention %q, %k, %v {causal, scale = 0.088388347648318447 : f64}
      : (tensor<2x32x16x128xf16>, tensor<2x8x16x128xf16>, tensor<2x8x16x128xf16>) -> tensor<2x32x16x128xf16>
  return %o : tensor<2x32x16x128xf16>
}
// CHECK-LABEL: func.func @gqa
//       CHECK:   sits.attention
//  CHECK-SAME:     {causal, scale = 0.088388347648318447 : f64}
//  CHECK-SAME:     : (tensor<2x32x16x128xf16>, tensor<2x8x16x128xf16>, tensor<2x8x16x128xf16>) -> tensor<2x32x16x128xf16>

// -----

// Multi-query attention (one key/value head) with a head dim of the values
// different from the keys' (the result takes Dv).
func.func @mqa_dv(%q: tensor<1x8x4x64xbf16>, %k: tensor<1x1x10x64xbf16>, %v: tensor<1x1x10x32xbf16>) -> tensor<1x8x4x32xbf16> {
  %o = sits.attention %q, %k, %v : (tensor<1x8x4x64xbf16>, tensor<1x1x10x64xbf16>, tensor<1x1x10x32xbf16>) -> tensor<1x8x4x32xbf16>
  return %o : tensor<1x8x4x32xbf16>
}
// CHECK-LABEL: func.func @mqa_dv
//       CHECK:   sits.attention
//   CHECK-NOT:   causal
//  CHECK-SAME:     : (tensor<1x8x4x64xbf16>, tensor<1x1x10x64xbf16>, tensor<1x1x10x32xbf16>) -> tensor<1x8x4x32xbf16>

// -----

// BERT: an additive float mask [B, 1, 1, Tk] broadcast over heads and queries.
func.func @additive_mask(%q: tensor<4x12x128x64xf32>, %k: tensor<4x12x128x64xf32>, %v: tensor<4x12x128x64xf32>,
                         %m: tensor<4x1x1x128xf32>) -> tensor<4x12x128x64xf32> {
  %o = sits.attention %q, %k, %v mask(%m)
      : (tensor<4x12x128x64xf32>, tensor<4x12x128x64xf32>, tensor<4x12x128x64xf32>, tensor<4x1x1x128xf32>) -> tensor<4x12x128x64xf32>
  return %o : tensor<4x12x128x64xf32>
}
// CHECK-LABEL: func.func @additive_mask
//  CHECK-SAME: (%[[Q:[^:]+]]: tensor<4x12x128x64xf32>, %[[K:[^:]+]]: tensor<4x12x128x64xf32>, %[[V:[^:]+]]: tensor<4x12x128x64xf32>, %[[M:[^:]+]]: tensor<4x1x1x128xf32>)
//       CHECK:   sits.attention %[[Q]], %[[K]], %[[V]] mask(%[[M]])
//  CHECK-SAME:     : (tensor<4x12x128x64xf32>, tensor<4x12x128x64xf32>, tensor<4x12x128x64xf32>, tensor<4x1x1x128xf32>) -> tensor<4x12x128x64xf32>

// -----

// A boolean mask of lower rank ([Tq, Tk]) combined with causal.
func.func @bool_mask_causal(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>,
                            %m: tensor<8x8xi1>) -> tensor<1x4x8x16xf32> {
  %o = sits.attention %q, %k, %v mask(%m) {causal, scale = 2.500000e-01 : f64}
      : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<8x8xi1>) -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}
// CHECK-LABEL: func.func @bool_mask_causal
//       CHECK:   sits.attention %{{[^,]+}}, %{{[^,]+}}, %{{[^ ]+}} mask(%{{[^)]+}}) {causal, scale = 2.500000e-01 : f64}
//  CHECK-SAME:     : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<8x8xi1>) -> tensor<1x4x8x16xf32>
