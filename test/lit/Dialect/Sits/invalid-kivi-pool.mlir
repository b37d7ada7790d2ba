// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of a KIVI pool (`kivi` on sits.paged_attention and the
// kernel ops).

func.func @attribute_length(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x16xf32>,
                            %pool: tensor<3x12288xi8>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op kivi must be [bits, layers, kv heads, block size], with bits 512 followed by the width of each (layer, kv head), got 3 values}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 4, 2, 2>, layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<3x12288xi8>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf32>, tensor<3x12288xi8>)
  return
}

// -----

func.func @pool_type(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x16xf32>,
                     %pool: tensor<3x2x2x2x4x16xf32>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op a KIVI pool is [blocks, block bytes] i8, got 'tensor<3x2x2x2x4x16xf32>'}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 4, 2, 2, 4>, layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<3x2x2x2x4x16xf32>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf32>, tensor<3x2x2x2x4x16xf32>)
  return
}

// -----

func.func @block_bytes(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x16xf32>,
                       %pool: tensor<3x4096xi8>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op a KIVI pool's blocks span 12288 bytes for this geometry, got 4096}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 4, 2, 2, 4>, layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<3x4096xi8>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf32>, tensor<3x4096xi8>)
  return
}

// -----

func.func @bits(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x16xf32>,
                %pool: tensor<3x12288xi8>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op no KIVI layout for 3-bit codes, 2 layers, 2 kv heads, blocks of 4 and head dim 16}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 3, 2, 2, 4>, layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<3x12288xi8>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf32>, tensor<3x12288xi8>)
  return
}

// -----

func.func @element_type(%q: tensor<1x4x1x16xf16>, %k: tensor<1x2x1x16xf16>, %v: tensor<1x2x1x16xf16>,
                        %pool: tensor<3x12288xi8>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op a KIVI pool takes f32 query, key and value}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 4, 2, 2, 4>, layer = 0}
      : (tensor<1x4x1x16xf16>, tensor<1x2x1x16xf16>, tensor<1x2x1x16xf16>, tensor<3x12288xi8>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf16>, tensor<3x12288xi8>)
  return
}

// -----

func.func @heads(%q: tensor<1x4x1x16xf32>, %k: tensor<1x1x1x16xf32>, %v: tensor<1x1x1x16xf32>,
                 %pool: tensor<3x12288xi8>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op key/value heads (1) differ from the KIVI pool's (2)}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 4, 2, 2, 4>, layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>, tensor<3x12288xi8>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf32>, tensor<3x12288xi8>)
  return
}

// -----

func.func @layer(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x16xf32>,
                 %pool: tensor<3x12288xi8>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op layer 2 is out of range for a pool of 2 layers}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 4, 2, 2, 4>, layer = 2}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<3x12288xi8>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf32>, tensor<3x12288xi8>)
  return
}

// -----

func.func @query_heads(%q: tensor<1x3x1x16xf32>, %pool: tensor<3x12288xi8>, %t: tensor<1x2xi32>,
                       %l: tensor<1xi32>, %init: tensor<1x3x1x16xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op query heads (3) must be a multiple of key/value heads (2)}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x3x1x16xf32>, tensor<3x12288xi8>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x3x1x16xf32>)
      {kivi = array<i64: 4, 2, 2, 4>, scale = 0.25 : f32} -> tensor<1x3x1x16xf32>
  return
}

// -----

func.func @kernel_pool(%q: tensor<1x4x1x16xf32>, %pool: tensor<3x2x2x2x4x16xf32>, %t: tensor<1x2xi32>,
                       %l: tensor<1xi32>, %init: tensor<1x4x1x16xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op pool must have rank 2, got 6}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x4x1x16xf32>, tensor<3x2x2x2x4x16xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x4x1x16xf32>)
      {kivi = array<i64: 4, 2, 2, 4>, scale = 0.25 : f32} -> tensor<1x4x1x16xf32>
  return
}

// -----

func.func @write_shapes(%k: tensor<1x2x1x16xf32>, %v: tensor<1x2x2x16xf32>, %s: tensor<1x1xi64>,
                        %pool: tensor<3x12288xi8>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.kivi_write' op key and value shapes differ}}
  %p = sits.ukernel.kivi_write ins(%k, %v, %s : tensor<1x2x1x16xf32>, tensor<1x2x2x16xf32>, tensor<1x1xi64>)
      layer(%layer) outs(%pool : tensor<3x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>} -> tensor<3x12288xi8>
  return
}

// -----

func.func @write_slots(%k: tensor<1x2x3x16xf32>, %v: tensor<1x2x3x16xf32>, %s: tensor<1x2xi64>,
                       %pool: tensor<3x12288xi8>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.kivi_write' op key [B, Hkv, S, D] and slot_mapping [B, S] differ}}
  %p = sits.ukernel.kivi_write ins(%k, %v, %s : tensor<1x2x3x16xf32>, tensor<1x2x3x16xf32>, tensor<1x2xi64>)
      layer(%layer) outs(%pool : tensor<3x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>} -> tensor<3x12288xi8>
  return
}

// -----

func.func @write_heads(%k: tensor<1x1x1x16xf32>, %v: tensor<1x1x1x16xf32>, %s: tensor<1x1xi64>,
                       %pool: tensor<3x12288xi8>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.kivi_write' op key heads (1) differ from the KIVI pool's (2)}}
  %p = sits.ukernel.kivi_write ins(%k, %v, %s : tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>, tensor<1x1xi64>)
      layer(%layer) outs(%pool : tensor<3x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>} -> tensor<3x12288xi8>
  return
}

// -----

func.func @write_result(%k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x16xf32>, %s: tensor<1x1xi64>,
                        %pool: memref<3x12288xi8>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.kivi_write' op operands must be all tensors or all buffers}}
  sits.ukernel.kivi_write ins(%k, %v, %s : tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x1xi64>)
      layer(%layer) outs(%pool : memref<3x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>}
  return
}

// -----

func.func @mixed_width_count(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x16xf32>,
                             %pool: tensor<3x12288xi8>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op kivi must be [bits, layers, kv heads, block size], with bits 512 followed by the width of each (layer, kv head), got 7 values}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 512, 2, 2, 4, 4, 2, 2>, layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<3x12288xi8>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf32>, tensor<3x12288xi8>)
  return
}

// -----

func.func @mixed_width_value(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x16xf32>,
                             %pool: tensor<3x12288xi8>, %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op no KIVI layout for widths [4, 2, 3, 4] per (layer, kv head), 2 layers, 2 kv heads, blocks of 4 and head dim 16}}
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 512, 2, 2, 4, 4, 2, 3, 4>, layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<3x12288xi8>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf32>, tensor<3x12288xi8>)
  return
}
