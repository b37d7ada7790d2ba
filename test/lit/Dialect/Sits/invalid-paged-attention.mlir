// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.paged_attention.

func.func @query_rank(%q: tensor<4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x16xf32>,
                      %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op query must have rank 4, got 3}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<4x1x16xf32>, tensor<8x1x2x2x4x16xf32>)
  return
}

// -----

func.func @pool_rank(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x2x2x4x16xf32>,
                     %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op pool must have rank 6, got 5}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x2x2x4x16xf32>)
  return
}

// -----

func.func @element_types(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x16xf16>,
                         %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op query, key, value and pool element types differ: 'f32', 'f32', 'f32', 'f16'}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x16xf16>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x2x4x16xf16>)
  return
}

// -----

func.func @batch(%q: tensor<2x4x1x16xf32>, %k: tensor<2x2x1x16xf32>, %pool: tensor<8x1x2x2x4x16xf32>,
                 %t: tensor<3x2xi32>, %s: tensor<2x1xi64>, %l: tensor<2xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op batch sizes (query, key, value, block_tables, slot_mapping, context_lens) differ: [2] [2] [2] [3] [2] [2]}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<2x4x1x16xf32>, tensor<2x2x1x16xf32>, tensor<2x2x1x16xf32>, tensor<8x1x2x2x4x16xf32>, tensor<3x2xi32>, tensor<2x1xi64>, tensor<2xi32>)
      -> (tensor<2x4x1x16xf32>, tensor<8x1x2x2x4x16xf32>)
  return
}

// -----

func.func @tokens(%q: tensor<1x4x3x16xf32>, %k: tensor<1x2x3x16xf32>, %pool: tensor<8x1x2x2x4x16xf32>,
                  %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op new token counts (query, key, value, slot_mapping) differ: [3] [3] [3] [1]}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x3x16xf32>, tensor<1x2x3x16xf32>, tensor<1x2x3x16xf32>, tensor<8x1x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x3x16xf32>, tensor<8x1x2x2x4x16xf32>)
  return
}

// -----

func.func @kv_heads(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x4x4x16xf32>,
                    %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op key/value heads (key, value, pool) differ: [2] [2] [4]}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x4x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x4x4x16xf32>)
  return
}

// -----

func.func @head_dim(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x8xf32>,
                    %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op head dims (query, key, value, pool) differ: [16] [16] [16] [8]}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x8xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x2x4x8xf32>)
  return
}

// -----

func.func @kinds(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x1x2x4x16xf32>,
                 %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op pool dimension 2 must hold K and V (extent 2), got 1}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x1x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x1x2x4x16xf32>)
  return
}

// -----

func.func @layer(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x2x2x2x4x16xf32>,
                 %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op layer 2 is out of range for a pool of 2 layers}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 2}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x2x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x2x2x2x4x16xf32>)
  return
}

// -----

func.func @layer_twice(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x2x2x2x4x16xf32>,
                       %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>, %i: index) {
  // expected-error @+1 {{'sits.paged_attention' op expects exactly one of the 'layer' attribute and a layer operand}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l layer(%i) {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x2x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x2x2x2x4x16xf32>)
  return
}

// -----

func.func @no_layer(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x2x2x2x4x16xf32>,
                    %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op expects exactly one of the 'layer' attribute and a layer operand}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x2x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x2x2x2x4x16xf32>)
  return
}

// -----

func.func @constant_layer(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x2x2x2x4x16xf32>,
                          %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  %c2 = arith.constant 2 : index
  // expected-error @+1 {{'sits.paged_attention' op layer 2 is out of range for a pool of 2 layers}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l layer(%c2)
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x2x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x2x2x2x4x16xf32>)
  return
}

// -----

func.func @negative_layer(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x?x2x2x4x16xf32>,
                          %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  %c-1 = arith.constant -1 : index
  // expected-error @+1 {{'sits.paged_attention' op layer must be non-negative, got -1}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l layer(%c-1)
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x?x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x?x2x2x4x16xf32>)
  return
}

// -----

func.func @block_size(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x0x16xf32>,
                      %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op block size must be positive, got 0}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x0x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x2x0x16xf32>)
  return
}

// -----

func.func @groups(%q: tensor<1x3x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x16xf32>,
                  %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op query heads (3) must be a multiple of key/value heads (2)}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x3x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x3x1x16xf32>, tensor<8x1x2x2x4x16xf32>)
  return
}

// -----

func.func @scale(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x16xf32>,
                 %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op scale must be finite and positive, got -1}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0, scale = -1.0 : f64}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x2x4x16xf32>)
  return
}

// -----

func.func @table_type(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x16xf32>,
                      %t: tensor<1x2xi64>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op operand #4 must be ranked tensor of 32-bit signless integer values}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x16xf32>, tensor<1x2xi64>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x2x4x16xf32>)
  return
}

// -----

// An INT8 pool's rows are the head dim's codes and a 4-byte scale.
func.func @int8_row(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x16xi8>,
                    %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op head dims (query, key, value, pool rows less their 4 scale bytes) differ: [16] [16] [16] [12]}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x16xi8>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x2x4x16xi8>)
  return
}

// -----

func.func @int8_row_too_small(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x4xi8>,
                              %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op a quantized pool's rows hold the head dim's codes and a 4-byte scale: extent 4 is too small}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x4xi8>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x2x4x4xi8>)
  return
}

// -----

func.func @int8_updated(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %pool: tensor<8x1x2x2x4x20xi8>,
                        %t: tensor<1x2xi32>, %s: tensor<1x1xi64>, %l: tensor<1xi32>) {
  // expected-error @+1 {{'sits.paged_attention' op updated pool element type 'f32' differs from the pool's 'i8'}}
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l {layer = 0}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x1x2x2x4x20xi8>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x1x2x2x4x20xf32>)
  return
}
