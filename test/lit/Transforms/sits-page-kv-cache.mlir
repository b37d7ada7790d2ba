// RUN: sits-opt %s --sits-page-kv-cache=block-size=4 | FileCheck %s
// RUN: sits-opt %s --sits-page-kv-cache --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS
// RUN: not sits-opt %s --sits-page-kv-cache=block-size=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=int8" | FileCheck %s --check-prefix=INT8
// RUN: sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=fp8" | FileCheck %s --check-prefix=FP8
// RUN: sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=int4" | FileCheck %s --check-prefix=INT4
// RUN: sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=int2" | FileCheck %s --check-prefix=INT2
// RUN: sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=int4-token" | FileCheck %s --check-prefix=TOKEN
// RUN: not sits-opt %s --sits-page-kv-cache="kv-dtype=int3" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not sits-opt %s --sits-page-kv-cache="block-size=2048 kv-dtype=int4" 2>&1 | FileCheck %s --check-prefix=LAYOUT
// RUN: sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=mixed kv-widths=4,2,2,4" | FileCheck %s --check-prefix=MIXED
// RUN: not sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=mixed" 2>&1 | FileCheck %s --check-prefix=NOWIDTHS
// RUN: not sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=int4 kv-widths=4,4,4,4" 2>&1 | FileCheck %s --check-prefix=NOWIDTHS
// RUN: not sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=mixed kv-widths=4,2" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not sits-opt %s --sits-page-kv-cache="block-size=4 kv-dtype=mixed kv-widths=4,2,8,4" 2>&1 | FileCheck %s --check-prefix=WIDTH

// Two decoder layers (GQA: 4 query heads on 2 K/V heads) exported with
// their KV cache: each attention reads past ++ new. Paged, the past/present
// K/V leave the signature, the pool and the allocator's tables come in, and
// the layers chain the updated pool.

func.func @main(%x: tensor<?x?x64xf32>, %past_k0: tensor<?x2x?x16xf32>, %past_v0: tensor<?x2x?x16xf32>,
                %past_k1: tensor<?x2x?x16xf32>, %past_v1: tensor<?x2x?x16xf32>,
                %q0: tensor<?x4x?x16xf32>, %k0: tensor<?x2x?x16xf32>, %v0: tensor<?x2x?x16xf32>)
    -> (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) {
  %kc0 = tensor.concat dim(2) %past_k0, %k0 : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %vc0 = tensor.concat dim(2) %past_v0, %v0 : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %o0 = sits.attention %q0, %kc0, %vc0 {causal} : (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x4x?x16xf32>
  %kc1 = tensor.concat dim(2) %past_k1, %v0 : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %vc1 = tensor.concat dim(2) %past_v1, %k0 : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %o1 = sits.attention %o0, %kc1, %vc1 {causal, scale = 0.5 : f64} : (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %o1, %kc0, %vc0, %kc1, %vc1 : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
}
// CHECK-LABEL: func.func @main
//  CHECK-SAME:   (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[Q0:[^:]+]]: tensor<?x4x?x16xf32>, %[[K0:[^:]+]]: tensor<?x2x?x16xf32>, %[[V0:[^:]+]]: tensor<?x2x?x16xf32>,
//  CHECK-SAME:    %[[POOL:[^:]+]]: tensor<?x2x2x2x4x16xf32> {sits.name = "kv_pool"}, %[[T:[^:]+]]: tensor<?x?xi32> {sits.name = "block_tables"},
//  CHECK-SAME:    %[[S:[^:]+]]: tensor<?x?xi64> {sits.name = "slot_mapping"}, %[[L:[^:]+]]: tensor<?xi32> {sits.name = "context_lens"})
//  CHECK-SAME:   -> (tensor<?x4x?x16xf32>, tensor<?x2x2x2x4x16xf32> {sits.updates = 4 : i64})
//   CHECK-NOT:   tensor.concat
//       CHECK:   %[[O0:.+]], %[[P0:.+]] = sits.paged_attention %[[Q0]], %[[K0]], %[[V0]], %[[POOL]], %[[T]], %[[S]], %[[L]] {layer = 0 : i64}
//       CHECK:   %[[O1:.+]], %[[P1:.+]] = sits.paged_attention %[[O0]], %[[V0]], %[[K0]], %[[P0]], %[[T]], %[[S]], %[[L]] {layer = 1 : i64, scale = 5.000000e-01 : f64}
//       CHECK:   return %[[O1]], %[[P1]]

// STATS: 2 num-layers

// ZERO: error: sits-page-kv-cache: block-size must be positive, got 0

// With kv-dtype=int8 the pool's rows are 16 codes and a 4-byte scale.
// INT8-LABEL: func.func @main
//  INT8-SAME:    %[[POOL:[^:]+]]: tensor<?x2x2x2x4x20xi8> {sits.kv_quantization = "per_token_head", sits.name = "kv_pool"}
//  INT8-SAME:   -> (tensor<?x4x?x16xf32>, tensor<?x2x2x2x4x20xi8> {sits.updates = 4 : i64})
//      INT8:   sits.paged_attention {{.*}}, %[[POOL]], {{.*}} {layer = 0 : i64}
//      INT8:   sits.paged_attention {{.*}} {layer = 1 : i64, scale = 5.000000e-01 : f64}

// DTYPE: error: sits-page-kv-cache: unsupported kv-dtype 'int3'; supported: int8, fp8, int4, int2, int4-token, int2-token, mixed (with kv-widths) (or none: the model's K/V type)

// With kv-dtype=int4 or int2 the pool is KIVI blocks, [blocks, bytes]: per
// block 2 layers x K/V x 2 heads of 4 rows of 16 codes (8 or 4 bytes) and
// 16 f16 (scale, min) pairs (64 bytes), in one page (4096), then a page
// per layer for the f32 tail (64 + 2 x 2 x 4 x 16 x 4 bytes): 12288.
// INT4-LABEL: func.func @main
//  INT4-SAME:    %[[POOL:[^:]+]]: tensor<?x12288xi8> {sits.kivi = array<i64: 4, 2, 2, 4, 16>, sits.kv_quantization = "kivi", sits.name = "kv_pool"}
//  INT4-SAME:   -> (tensor<?x4x?x16xf32>, tensor<?x12288xi8> {sits.updates = 4 : i64})
//      INT4:   sits.paged_attention {{.*}}, %[[POOL]], {{.*}} {kivi = array<i64: 4, 2, 2, 4>, layer = 0 : i64}
//      INT4:   sits.paged_attention {{.*}} {kivi = array<i64: 4, 2, 2, 4>, layer = 1 : i64, scale = 5.000000e-01 : f64}

// INT2-LABEL: func.func @main
//  INT2-SAME:    tensor<?x12288xi8> {sits.kivi = array<i64: 2, 2, 2, 4, 16>, sits.kv_quantization = "kivi", sits.name = "kv_pool"}
//      INT2:   sits.paged_attention {{.*}} {kivi = array<i64: 2, 2, 2, 4>, layer = 0 : i64}

// Keys per token like values: the same blocks, bits 4 + 256.
// TOKEN-LABEL: func.func @main
//  TOKEN-SAME:    tensor<?x12288xi8> {sits.kivi = array<i64: 260, 2, 2, 4, 16>, sits.kv_quantization = "per_token_group", sits.name = "kv_pool"}
//      TOKEN:   sits.paged_attention {{.*}} {kivi = array<i64: 260, 2, 2, 4>, layer = 0 : i64}

// LAYOUT: error: sits-page-kv-cache: no 4-bit KIVI layout for head dim 16 and blocks of 2048

// A width per (layer, kv head): bits 512, then the widths; slabs of 2 bits
// take 4 bytes a row instead of 8 (still within the first page).
// MIXED-LABEL: func.func @main
//  MIXED-SAME:    tensor<?x12288xi8> {sits.kivi = array<i64: 512, 2, 2, 4, 16, 4, 2, 2, 4>, sits.kv_quantization = "kivi", sits.name = "kv_pool"}
//      MIXED:   sits.paged_attention {{.*}} {kivi = array<i64: 512, 2, 2, 4, 4, 2, 2, 4>, layer = 0 : i64}
// NOWIDTHS: error: sits-page-kv-cache: kv-widths (the bits of each layer's kv heads) goes with kv-dtype=mixed, and mixed needs it
// COUNT: error: sits-page-kv-cache: kv-widths has 2 widths for 2 layers of 2 kv heads (4)
// WIDTH: error: sits-page-kv-cache: kv-widths are 4 or 2 bits, got 8

// FP8-LABEL: func.func @main
//  FP8-SAME:    tensor<?x2x2x2x4x20xf8E4M3FN> {sits.kv_quantization = "per_token_head", sits.name = "kv_pool"}
//  FP8-SAME:   -> (tensor<?x4x?x16xf32>, tensor<?x2x2x2x4x20xf8E4M3FN> {sits.updates = 4 : i64})
