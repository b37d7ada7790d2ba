// RUN: sits-opt %s --split-input-file --sits-page-kv-cache --verify-diagnostics

// Every diagnostic of sits-page-kv-cache.

// expected-error @+1 {{sits-page-kv-cache needs a public function @main}}
module {
  func.func private @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Attention without a KV cache (an encoder) has nothing to page.
// expected-error @+1 {{cannot page the KV cache: no causal sits.attention reads a past key/value argument joined with new ones}}
func.func @main(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %o = sits.attention %q, %k, %k {causal} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @main(%q: tensor<?x4x?x16xf32>, %pk: tensor<?x?x?x16xf32>, %pv: tensor<?x?x?x16xf32>,
                %k: tensor<?x?x?x16xf32>, %v: tensor<?x?x?x16xf32>) -> tensor<?x4x?x16xf32> {
  %kc = tensor.concat dim(2) %pk, %k : (tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>) -> tensor<?x?x?x16xf32>
  %vc = tensor.concat dim(2) %pv, %v : (tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>) -> tensor<?x?x?x16xf32>
  // expected-error @+1 {{cannot page the KV cache: layer 0's new K/V 'tensor<?x?x?x16xf32>' does not fit a pool of static K/V heads and head dim shared by all layers, like layer 0's 'tensor<?x?x?x16xf32>'}}
  %o = sits.attention %q, %kc, %vc {causal} : (tensor<?x4x?x16xf32>, tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %o : tensor<?x4x?x16xf32>
}

// -----

// expected-error @+1 {{cannot page the KV cache: past argument #1 is read by more than the concatenation feeding layer 0's attention}}
func.func @main(%q: tensor<?x4x?x16xf32>, %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>,
                %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>) -> (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>) {
  %kc = tensor.concat dim(2) %pk, %k : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %vc = tensor.concat dim(2) %pv, %v : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %o = sits.attention %q, %kc, %vc {causal} : (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %o, %pk : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>
}

// -----

func.func @main(%q: tensor<?x4x?x16xf32>, %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>,
                %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>) -> (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>) {
  %kc = tensor.concat dim(2) %pk, %k : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %vc = tensor.concat dim(2) %pv, %v : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %o = sits.attention %q, %kc, %vc {causal} : (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x4x?x16xf32>
  // expected-error @+1 {{cannot page the KV cache: this op reads the joined K/V of layer 0, which only exists contiguously}}
  %e = sits.activation <relu> %kc : tensor<?x2x?x16xf32>
  return %o, %e : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>
}


// -----

// A local pool (GroupQueryAttention's) whose past is also read elsewhere.
// expected-error @+1 {{cannot page the KV cache: past argument #3 is still read after paging}}
func.func @main(%q: tensor<?x4x?x16xf32>, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>,
                %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>, %lens: tensor<?xi32>,
                %tables: tensor<?x1xi32>, %slots: tensor<?x?xi64>)
    -> (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = tensor.dim %pk, %c0 : tensor<?x2x?x16xf32>
  %t = tensor.dim %pk, %c2 : tensor<?x2x?x16xf32>
  %ke = tensor.expand_shape %pk [[0, 1, 2], [3], [4], [5]] output_shape [%b, 1, 1, 2, %t, 16]
      : tensor<?x2x?x16xf32> into tensor<?x1x1x2x?x16xf32>
  %ve = tensor.expand_shape %pv [[0, 1, 2], [3], [4], [5]] output_shape [%b, 1, 1, 2, %t, 16]
      : tensor<?x2x?x16xf32> into tensor<?x1x1x2x?x16xf32>
  %pool = tensor.concat dim(2) %ke, %ve
      : (tensor<?x1x1x2x?x16xf32>, tensor<?x1x1x2x?x16xf32>) -> tensor<?x1x2x2x?x16xf32>
  %o, %p1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 0}
      : (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x1x2x2x?x16xf32>,
         tensor<?x1xi32>, tensor<?x?xi64>, tensor<?xi32>) -> (tensor<?x4x?x16xf32>, tensor<?x1x2x2x?x16xf32>)
  // expected-note @+1 {{read here}}
  %e = sits.activation <relu> %pk : tensor<?x2x?x16xf32>
  return %o, %e : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>
}
