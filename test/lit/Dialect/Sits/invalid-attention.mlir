// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.attention.

func.func @rank(%q: tensor<12x128x64xf32>, %k: tensor<1x12x128x64xf32>) -> tensor<12x128x64xf32> {
  // expected-error @+2 {{'sits.attention' op query, key and value must be 4-D [batch, heads, seq, head_dim], got ranks 3, 4 and 4}}
  // expected-error @+1 {{'sits.attention' op failed to infer returned types}}
  %0 = sits.attention %q, %k, %k : (tensor<12x128x64xf32>, tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<12x128x64xf32>
  return %0 : tensor<12x128x64xf32>
}

// -----

// Regression: the op verifier runs before shape inference and used to index
// dimension 3 of this rank-3 query (assertion failure / out-of-bounds read).
func.func @query_rank_3_same_batch(%q: tensor<1x12x64xf32>, %k: tensor<1x12x128x64xf32>) -> tensor<1x12x64xf32> {
  // expected-error @+2 {{query, key and value must be 4-D [batch, heads, seq, head_dim], got ranks 3, 4 and 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.attention %q, %k, %k : (tensor<1x12x64xf32>, tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x64xf32>
  return %0 : tensor<1x12x64xf32>
}

// -----

func.func @value_rank(%q: tensor<1x12x128x64xf32>, %v: tensor<1x1x12x128x64xf32>) -> tensor<1x12x128x64xf32> {
  // expected-error @+2 {{query, key and value must be 4-D [batch, heads, seq, head_dim], got ranks 4, 4 and 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.attention %q, %q, %v : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>, tensor<1x1x12x128x64xf32>) -> tensor<1x12x128x64xf32>
  return %0 : tensor<1x12x128x64xf32>
}

// -----

func.func @element_types(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf16>, %v: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'sits.attention' op query, key and value element types differ: 'f32', 'f16', 'f32'}}
  %0 = sits.attention %q, %k, %v : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf16>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @batch(%q: tensor<2x4x8x16xf32>, %k: tensor<1x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  // expected-error @+1 {{'sits.attention' op batch sizes differ: query [2], key [1], value [1]}}
  %0 = sits.attention %q, %k, %k : (tensor<2x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %0 : tensor<2x4x8x16xf32>
}

// -----

// A dynamic key batch does not hide a conflict between query and value.
func.func @batch_dynamic_key(%q: tensor<1x4x8x16xf32>, %k: tensor<?x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{batch sizes differ: query [1], key [?], value [2]}}
  %0 = sits.attention %q, %k, %v : (tensor<1x4x8x16xf32>, tensor<?x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @kv_heads(%q: tensor<1x8x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x8x8x16xf32> {
  // expected-error @+1 {{'sits.attention' op key [1, 4, 8, 16] and value [1, 2, 8, 16] must agree on heads and sequence length}}
  %0 = sits.attention %q, %k, %v : (tensor<1x8x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x8x8x16xf32>
  return %0 : tensor<1x8x8x16xf32>
}

// -----

// A KV cache joined for keys but not for values.
func.func @kv_seq(%q: tensor<1x12x1x64xf32>, %k: tensor<1x12x513x64xf32>, %v: tensor<1x12x512x64xf32>) -> tensor<1x12x1x64xf32> {
  // expected-error @+1 {{key [1, 12, 513, 64] and value [1, 12, 512, 64] must agree on heads and sequence length}}
  %0 = sits.attention %q, %k, %v {causal} : (tensor<1x12x1x64xf32>, tensor<1x12x513x64xf32>, tensor<1x12x512x64xf32>) -> tensor<1x12x1x64xf32>
  return %0 : tensor<1x12x1x64xf32>
}

// -----

func.func @head_dim(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x32xf32>) -> tensor<1x4x8x32xf32> {
  // expected-error @+1 {{'sits.attention' op query head dim [64] differs from key head dim [32]}}
  %0 = sits.attention %q, %k, %k : (tensor<1x4x8x64xf32>, tensor<1x4x8x32xf32>, tensor<1x4x8x32xf32>) -> tensor<1x4x8x32xf32>
  return %0 : tensor<1x4x8x32xf32>
}

// -----

// GQA needs Hq to be a multiple of Hkv.
func.func @gqa_heads(%q: tensor<1x32x8x128xf16>, %k: tensor<1x6x8x128xf16>) -> tensor<1x32x8x128xf16> {
  // expected-error @+1 {{'sits.attention' op query heads (32) must be a multiple of key/value heads (6)}}
  %0 = sits.attention %q, %k, %k : (tensor<1x32x8x128xf16>, tensor<1x6x8x128xf16>, tensor<1x6x8x128xf16>) -> tensor<1x32x8x128xf16>
  return %0 : tensor<1x32x8x128xf16>
}

// -----

// More key/value heads than query heads.
func.func @more_kv_heads(%q: tensor<1x8x8x128xf16>, %k: tensor<1x32x8x128xf16>) -> tensor<1x8x8x128xf16> {
  // expected-error @+1 {{query heads (8) must be a multiple of key/value heads (32)}}
  %0 = sits.attention %q, %k, %k : (tensor<1x8x8x128xf16>, tensor<1x32x8x128xf16>, tensor<1x32x8x128xf16>) -> tensor<1x8x8x128xf16>
  return %0 : tensor<1x8x8x128xf16>
}

// -----

// Zero key/value heads (no division by zero).
func.func @zero_kv_heads(%q: tensor<1x8x8x16xf32>, %k: tensor<1x0x8x16xf32>) -> tensor<1x8x8x16xf32> {
  // expected-error @+1 {{query heads (8) must be a multiple of key/value heads (0)}}
  %0 = sits.attention %q, %k, %k : (tensor<1x8x8x16xf32>, tensor<1x0x8x16xf32>, tensor<1x0x8x16xf32>) -> tensor<1x8x8x16xf32>
  return %0 : tensor<1x8x8x16xf32>
}

// -----

// The static value heads stand in for dynamic key heads.
func.func @gqa_heads_dynamic_key(%q: tensor<1x32x8x16xf32>, %k: tensor<1x?x8x16xf32>, %v: tensor<1x5x8x16xf32>) -> tensor<1x32x8x16xf32> {
  // expected-error @+1 {{query heads (32) must be a multiple of key/value heads (5)}}
  %0 = sits.attention %q, %k, %v : (tensor<1x32x8x16xf32>, tensor<1x?x8x16xf32>, tensor<1x5x8x16xf32>) -> tensor<1x32x8x16xf32>
  return %0 : tensor<1x32x8x16xf32>
}

// -----

func.func @causal_fewer_keys(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x4x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'sits.attention' op causal attention needs at least as many keys (4) as queries (8)}}
  %0 = sits.attention %q, %k, %k {causal} : (tensor<1x4x8x16xf32>, tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @causal_fewer_keys_dynamic_key(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x?x16xf32>, %v: tensor<1x4x4x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{causal attention needs at least as many keys (4) as queries (8)}}
  %0 = sits.attention %q, %k, %v {causal} : (tensor<1x4x8x16xf32>, tensor<1x4x?x16xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @scale_zero(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'sits.attention' op scale must be finite and positive, got 0.000000e+00}}
  %0 = sits.attention %q, %q, %q {scale = 0.0 : f64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @scale_negative(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{scale must be finite and positive, got -2.500000e-01}}
  %0 = sits.attention %q, %q, %q {scale = -0.25 : f64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @scale_negative_zero(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{scale must be finite and positive, got -0.000000e+00}}
  %0 = sits.attention %q, %q, %q {scale = -0.0 : f64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @scale_infinite(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{scale must be finite and positive, got INF}}
  %0 = sits.attention %q, %q, %q {scale = 0x7FF0000000000000 : f64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @scale_nan(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{scale must be finite and positive, got nan}}
  %0 = sits.attention %q, %q, %q {scale = 0x7FF8000000000000 : f64} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @float_mask_type(%q: tensor<1x4x8x16xf16>, %m: tensor<1x1x8x8xf32>) -> tensor<1x4x8x16xf16> {
  // expected-error @+1 {{'sits.attention' op a float mask must have the query's element type 'f16', got 'f32'}}
  %0 = sits.attention %q, %q, %q mask(%m) : (tensor<1x4x8x16xf16>, tensor<1x4x8x16xf16>, tensor<1x4x8x16xf16>, tensor<1x1x8x8xf32>) -> tensor<1x4x8x16xf16>
  return %0 : tensor<1x4x8x16xf16>
}

// -----

func.func @mask_extent(%q: tensor<1x4x8x16xf32>, %m: tensor<1x1x8x9xi1>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'sits.attention' op mask of shape [1, 1, 8, 9] does not broadcast to the scores' shape [1, 4, 8, 8]}}
  %0 = sits.attention %q, %q, %q mask(%m) : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x1x8x9xi1>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// A mask may broadcast to the scores, not the other way round: Tq = 1 in
// decode, the mask has 8 query rows.
func.func @mask_larger_than_scores(%q: tensor<1x4x1x16xf32>, %k: tensor<1x4x8x16xf32>, %m: tensor<8x8xf32>) -> tensor<1x4x1x16xf32> {
  // expected-error @+1 {{mask of shape [8, 8] does not broadcast to the scores' shape [1, 4, 1, 8]}}
  %0 = sits.attention %q, %k, %k mask(%m) : (tensor<1x4x1x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<8x8xf32>) -> tensor<1x4x1x16xf32>
  return %0 : tensor<1x4x1x16xf32>
}

// -----

func.func @mask_rank_5(%q: tensor<1x4x8x16xf32>, %m: tensor<1x1x1x8x8xi1>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{mask of shape [1, 1, 1, 8, 8] does not broadcast to the scores' shape [1, 4, 8, 8]}}
  %0 = sits.attention %q, %q, %q mask(%m) : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x1x1x8x8xi1>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// The scores' key length comes from the value when the key's is dynamic.
func.func @mask_extent_dynamic_key(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x?x16xf32>, %v: tensor<1x4x4x16xf32>,
                                   %m: tensor<8x6xi1>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{mask of shape [8, 6] does not broadcast to the scores' shape [1, 4, 8, 4]}}
  %0 = sits.attention %q, %k, %v mask(%m) : (tensor<1x4x8x16xf32>, tensor<1x4x?x16xf32>, tensor<1x4x4x16xf32>, tensor<8x6xi1>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// InferTypeOpInterface: the result is [B, Hq, Tq, Dv].
func.func @result_shape(%q: tensor<1x8x4x64xf32>, %k: tensor<1x1x10x64xf32>, %v: tensor<1x1x10x32xf32>) -> tensor<1x8x4x64xf32> {
  // expected-error @+2 {{'sits.attention' op inferred type(s) 'tensor<1x8x4x32xf32>' are incompatible with return type(s) of operation 'tensor<1x8x4x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.attention %q, %k, %v : (tensor<1x8x4x64xf32>, tensor<1x1x10x64xf32>, tensor<1x1x10x32xf32>) -> tensor<1x8x4x64xf32>
  return %0 : tensor<1x8x4x64xf32>
}

// -----

// ODS type constraints: integer masks other than i1 are rejected.
func.func @i8_mask(%q: tensor<1x4x8x16xf32>, %m: tensor<1x1x8x8xi8>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'sits.attention' op operand #3 must be ranked tensor of 1-bit signless integer or 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<1x1x8x8xi8>'}}
  %0 = sits.attention %q, %q, %q mask(%m) : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x1x8x8xi8>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

func.func @scale_f32(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'sits.attention' op attribute 'scale' failed to satisfy constraint: 64-bit float attribute}}
  %0 = sits.attention %q, %q, %q {scale = 0.25 : f32} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}
