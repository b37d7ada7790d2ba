// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.ukernel.paged_attention.

func.func @query_rank(%q: tensor<1x8x64xf32>, %pool: tensor<4x1x2x2x16x64xf32>, %t: tensor<1x2xi32>,
                      %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op query must have rank 4, got 3}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x64xf32>, tensor<4x1x2x2x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @pool_rank(%q: tensor<1x8x1x64xf32>, %pool: tensor<4x2x2x16x64xf32>, %t: tensor<1x2xi32>,
                     %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op pool must have rank 6, got 5}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x1x64xf32>, tensor<4x2x2x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @mixed(%q: memref<1x8x1x64xf32>, %pool: tensor<4x1x2x2x16x64xf32>, %t: tensor<1x2xi32>,
                 %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op operands must be all tensors or all buffers}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : memref<1x8x1x64xf32>, tensor<4x1x2x2x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @no_result(%q: tensor<1x8x1x64xf32>, %pool: tensor<4x1x2x2x16x64xf32>, %t: tensor<1x2xi32>,
                     %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op on tensors has one result, the init}}
  sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x1x64xf32>, tensor<4x1x2x2x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
  return
}

// -----

func.func @buffer_result(%q: memref<1x8x1x64xf32>, %pool: memref<4x1x2x2x16x64xf32>, %t: memref<1x2xi32>,
                         %l: memref<1xi32>, %init: memref<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op on buffers has no result}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : memref<1x8x1x64xf32>, memref<4x1x2x2x16x64xf32>,
      memref<1x2xi32>, memref<1xi32>) layer(%layer) outs(%init : memref<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @result_type(%q: tensor<1x8x1x64xf32>, %pool: tensor<4x1x2x2x16x64xf32>, %t: tensor<1x2xi32>,
                       %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op result type 'tensor<?x8x1x64xf32>' differs from the init's 'tensor<1x8x1x64xf32>'}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x1x64xf32>, tensor<4x1x2x2x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<?x8x1x64xf32>
  return
}

// -----

func.func @init_shape(%q: tensor<1x8x2x64xf32>, %pool: tensor<4x1x2x2x16x64xf32>, %t: tensor<1x2xi32>,
                      %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op query and init shapes differ in dimension 2}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x2x64xf32>, tensor<4x1x2x2x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @head_dim(%q: tensor<1x8x1x64xf32>, %pool: tensor<4x1x2x2x16x32xf32>, %t: tensor<1x2xi32>,
                    %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op query head dim (64) differs from the pool's (32)}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x1x64xf32>, tensor<4x1x2x2x16x32xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @batch(%q: tensor<1x8x1x64xf32>, %pool: tensor<4x1x2x2x16x64xf32>, %t: tensor<2x2xi32>,
                 %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op batch sizes (query, block_tables, context_lens) differ}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x1x64xf32>, tensor<4x1x2x2x16x64xf32>,
      tensor<2x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @kinds(%q: tensor<1x8x1x64xf32>, %pool: tensor<4x1x3x2x16x64xf32>, %t: tensor<1x2xi32>,
                 %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op pool dimension 2 must hold K and V (extent 2), got 3}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x1x64xf32>, tensor<4x1x3x2x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @heads(%q: tensor<1x6x1x64xf32>, %pool: tensor<4x1x2x4x16x64xf32>, %t: tensor<1x2xi32>,
                 %l: tensor<1xi32>, %init: tensor<1x6x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op query heads (6) must be a multiple of key/value heads (4)}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x6x1x64xf32>, tensor<4x1x2x4x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x6x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x6x1x64xf32>
  return
}

// -----

func.func @element_type(%q: tensor<1x8x1x64xf16>, %pool: tensor<4x1x2x2x16x64xf32>, %t: tensor<1x2xi32>,
                        %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op operand #0 must be ranked tensor of 32-bit float values or memref of 32-bit float values}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x1x64xf16>, tensor<4x1x2x2x16x64xf32>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}

// -----

func.func @int8_head_dim(%q: tensor<1x8x1x64xf32>, %pool: tensor<4x1x2x2x16x64xi8>, %t: tensor<1x2xi32>,
                         %l: tensor<1xi32>, %init: tensor<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op query head dim (64) differs from the pool's (60: rows less their 4 scale bytes)}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %t, %l : tensor<1x8x1x64xf32>, tensor<4x1x2x2x16x64xi8>,
      tensor<1x2xi32>, tensor<1xi32>) layer(%layer) outs(%init : tensor<1x8x1x64xf32>) {scale = 0.125 : f32}
      -> tensor<1x8x1x64xf32>
  return
}
