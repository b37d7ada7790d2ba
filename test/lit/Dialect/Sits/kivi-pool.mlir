// RUN: sits-opt %s | sits-opt | FileCheck %s

// Paged attention over a pool of KIVI blocks: `kivi = [bits, layers, kv
// heads, block size]`, the pool [blocks, block bytes] i8. Two layers of 2
// kv heads of 16, blocks of 4 at 4 bits: 12288 bytes a block (the
// quantized part in a page, then a page of f32 tail per layer).

// CHECK-LABEL: func.func @paged
//       CHECK:   sits.paged_attention {{.*}} {kivi = array<i64: 4, 2, 2, 4>, layer = 1 : i64}
func.func @paged(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                 %pool: tensor<?x12288xi8>, %t: tensor<?x?xi32>, %s: tensor<?x1xi64>,
                 %l: tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x12288xi8>) {
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 4, 2, 2, 4>, layer = 1}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x12288xi8>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x12288xi8>)
  return %o, %p : tensor<?x4x1x16xf32>, tensor<?x12288xi8>
}
