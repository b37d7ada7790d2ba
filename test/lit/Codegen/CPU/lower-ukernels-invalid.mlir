// RUN: sits-opt %s --sits-cpu-lower-ukernels --split-input-file --verify-diagnostics

// A pool whose head dim is not contiguous has no kernel call (and is never
// copied: it is the whole KV cache).

func.func @strided_pool(%q: memref<1x8x1x64xf32>, %pool: memref<9x4x2x2x16x64xf32, strided<[32768, 8192, 4096, 2048, 128, 2]>>,
                        %tables: memref<1x5xi32>, %lens: memref<1xi32>, %out: memref<1x8x1x64xf32>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op needs a pool whose head dim is contiguous, got 'memref<9x4x2x2x16x64xf32, strided<[32768, 8192, 4096, 2048, 128, 2]>>'}}
  sits.ukernel.paged_attention ins(%q, %pool, %tables, %lens : memref<1x8x1x64xf32>,
      memref<9x4x2x2x16x64xf32, strided<[32768, 8192, 4096, 2048, 128, 2]>>, memref<1x5xi32>, memref<1xi32>)
      layer(%layer) outs(%out : memref<1x8x1x64xf32>) {scale = 0.125 : f32}
  return
}

// -----

// On tensors (bufferization has not run), nothing can be called.

func.func @tensors(%q: tensor<1x8x1x64xf32>, %pool: tensor<9x4x2x2x16x64xf32>, %tables: tensor<1x5xi32>,
                   %lens: tensor<1xi32>, %out: tensor<1x8x1x64xf32>, %layer: index) -> tensor<1x8x1x64xf32> {
  // expected-error @+1 {{'sits.ukernel.paged_attention' op must be on buffers to become a kernel call}}
  %o = sits.ukernel.paged_attention ins(%q, %pool, %tables, %lens : tensor<1x8x1x64xf32>,
      tensor<9x4x2x2x16x64xf32>, tensor<1x5xi32>, tensor<1xi32>)
      layer(%layer) outs(%out : tensor<1x8x1x64xf32>) {scale = 0.125 : f32} -> tensor<1x8x1x64xf32>
  return %o : tensor<1x8x1x64xf32>
}
