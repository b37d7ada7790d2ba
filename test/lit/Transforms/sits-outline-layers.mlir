// RUN: sits-opt %s --split-input-file --sits-outline-layers='min-ops=4' | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-outline-layers='min-ops=4' --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// sits-outline-layers replaces blocks of ops that repeat but for their
// weights by calls of one function: each call passes its own weights and the
// previous block's results; splat and scalar constants are cloned in.

// CHECK-LABEL: func.func @three_layers
//  CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>)
//       CHECK:   %[[W0:.+]] = arith.constant dense<{{\[}}[1.0{{.*}}> : tensor<4x4xf32>
//       CHECK:   %[[L0:.+]] = call @three_layers_layer(%[[X]], %[[W0]])
//       CHECK:   %[[W1:.+]] = arith.constant dense<{{\[}}[2.0{{.*}}> : tensor<4x4xf32>
//       CHECK:   %[[L1:.+]] = call @three_layers_layer(%[[L0]], %[[W1]])
//       CHECK:   %[[W2:.+]] = arith.constant dense<{{\[}}[3.0{{.*}}> : tensor<4x4xf32>
//       CHECK:   %[[L2:.+]] = call @three_layers_layer(%[[L1]], %[[W2]])
//       CHECK:   %[[OUT:.+]] = sits.activation <relu> %[[L2]]
//       CHECK:   return %[[OUT]]
//       CHECK: func.func private @three_layers_layer(%[[H:.+]]: tensor<2x4xf32>, %[[W:.+]]: tensor<4x4xf32>) -> tensor<2x4xf32> attributes {sits.layer}
//       CHECK:   %[[M:.+]] = sits.matmul %[[H]], %[[W]]
//       CHECK:   %[[A:.+]] = sits.activation <gelu> %[[M]]
//       CHECK:   %[[S:.+]] = arith.addf %[[A]], %[[H]]
//       CHECK:   %[[C:.+]] = arith.constant dense<2.000000e+00> : tensor<2x4xf32>
//       CHECK:   %[[O:.+]] = arith.mulf %[[S]], %[[C]]
//       CHECK:   return %[[O]]
//   CHECK-NOT: func.func private
// STATS: (S) 3 num-layers
// STATS: (S) 1 num-functions
func.func @three_layers(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = arith.constant dense<[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %m0 = sits.matmul %x, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a0 = sits.activation <gelu> %m0 : tensor<2x4xf32>
  %s0 = arith.addf %a0, %x : tensor<2x4xf32>
  %c0 = arith.constant dense<2.0> : tensor<2x4xf32>
  %o0 = arith.mulf %s0, %c0 : tensor<2x4xf32>
  %w1 = arith.constant dense<[[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %m1 = sits.matmul %o0, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a1 = sits.activation <gelu> %m1 : tensor<2x4xf32>
  %s1 = arith.addf %a1, %o0 : tensor<2x4xf32>
  %c1 = arith.constant dense<2.0> : tensor<2x4xf32>
  %o1 = arith.mulf %s1, %c1 : tensor<2x4xf32>
  %w2 = arith.constant dense<[[3.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %m2 = sits.matmul %o1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a2 = sits.activation <gelu> %m2 : tensor<2x4xf32>
  %s2 = arith.addf %a2, %o1 : tensor<2x4xf32>
  %c2 = arith.constant dense<2.0> : tensor<2x4xf32>
  %o2 = arith.mulf %s2, %c2 : tensor<2x4xf32>
  %out = sits.activation <relu> %o2 : tensor<2x4xf32>
  return %out : tensor<2x4xf32>
}

// -----

// A paged attention's layer becomes an argument of the layer, and the pool
// it writes is its argument updated in place.

// CHECK-LABEL: func.func @paged
//  CHECK-SAME: (%[[Q:.+]]: tensor<?x4x?x16xf32>, %[[K:.+]]: tensor<?x2x?x16xf32>, %[[V:.+]]: tensor<?x2x?x16xf32>, %[[POOL:.+]]: tensor<?x2x2x2x16x16xf32>, %[[T:.+]]: tensor<?x?xi32>, %[[S:.+]]: tensor<?x?xi64>, %[[N:.+]]: tensor<?xi32>)
//   CHECK-DAG:   %[[C0:.+]] = arith.constant 0 : index
//   CHECK-DAG:   %[[C1:.+]] = arith.constant 1 : index
//       CHECK:   %[[A:.+]]:2 = call @paged_layer(%[[Q]], %[[K]], %[[V]], %[[POOL]], %[[T]], %[[S]], %[[N]], %[[C0]])
//       CHECK:   %[[B:.+]]:2 = call @paged_layer(%[[A]]#1, %[[K]], %[[V]], %[[A]]#0, %[[T]], %[[S]], %[[N]], %[[C1]])
//       CHECK:   return %[[B]]#1, %[[B]]#0
//       CHECK: func.func private @paged_layer(
//  CHECK-SAME:     %[[LAYER:[^:]+]]: index)
//  CHECK-SAME:     -> (tensor<?x2x2x2x16x16xf32> {sits.updates = 3 : i64}, tensor<?x4x?x16xf32>) attributes {sits.layer}
//       CHECK:   sits.paged_attention {{.*}} layer(%[[LAYER]])
func.func @paged(%q: tensor<?x4x?x16xf32>, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>, %pool: tensor<?x2x2x2x16x16xf32>, %t: tensor<?x?xi32>, %s: tensor<?x?xi64>, %n: tensor<?xi32>) -> (tensor<?x4x?x16xf32>, tensor<?x2x2x2x16x16xf32> {sits.updates = 3 : i64}) {
  %r0, %p0 = sits.paged_attention %q, %k, %v, %pool, %t, %s, %n {layer = 0 : i64} : (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x2x2x16x16xf32>, tensor<?x?xi32>, tensor<?x?xi64>, tensor<?xi32>) -> (tensor<?x4x?x16xf32>, tensor<?x2x2x2x16x16xf32>)
  %h0 = arith.addf %r0, %q : tensor<?x4x?x16xf32>
  %g0 = math.exp %h0 : tensor<?x4x?x16xf32>
  %o0 = arith.mulf %g0, %h0 : tensor<?x4x?x16xf32>
  %r1, %p1 = sits.paged_attention %o0, %k, %v, %p0, %t, %s, %n {layer = 1 : i64} : (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x2x2x16x16xf32>, tensor<?x?xi32>, tensor<?x?xi64>, tensor<?xi32>) -> (tensor<?x4x?x16xf32>, tensor<?x2x2x2x16x16xf32>)
  %h1 = arith.addf %r1, %o0 : tensor<?x4x?x16xf32>
  %g1 = math.exp %h1 : tensor<?x4x?x16xf32>
  %o1 = arith.mulf %g1, %h1 : tensor<?x4x?x16xf32>
  return %o1, %p1 : tensor<?x4x?x16xf32>, tensor<?x2x2x2x16x16xf32>
}

// -----

// Blocks that differ in anything but their weights stay as they are.

// CHECK-LABEL: func.func @different
//   CHECK-NOT:   call
//       CHECK:   return
func.func @different(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %a0 = sits.activation <gelu> %x : tensor<2x4xf32>
  %s0 = arith.addf %a0, %x : tensor<2x4xf32>
  %c0 = arith.constant dense<2.0> : tensor<2x4xf32>
  %o0 = arith.mulf %s0, %c0 : tensor<2x4xf32>
  %a1 = sits.activation <gelu> %o0 : tensor<2x4xf32>
  %s1 = arith.addf %a1, %o0 : tensor<2x4xf32>
  %c1 = arith.constant dense<3.0> : tensor<2x4xf32>
  %o1 = arith.mulf %s1, %c1 : tensor<2x4xf32>
  return %o1 : tensor<2x4xf32>
}

// -----

// A block reading its inputs in another pattern (the first block's input
// twice, the second's two different values) is not the same layer.

// CHECK-LABEL: func.func @other_inputs
//   CHECK-NOT:   call
//       CHECK:   return
func.func @other_inputs(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %a0 = arith.addf %x, %x : tensor<2x4xf32>
  %b0 = arith.mulf %a0, %a0 : tensor<2x4xf32>
  %c0 = arith.subf %b0, %a0 : tensor<2x4xf32>
  %d0 = arith.divf %c0, %b0 : tensor<2x4xf32>
  %a1 = arith.addf %d0, %y : tensor<2x4xf32>
  %b1 = arith.mulf %a1, %a1 : tensor<2x4xf32>
  %c1 = arith.subf %b1, %a1 : tensor<2x4xf32>
  %d1 = arith.divf %c1, %b1 : tensor<2x4xf32>
  return %d1 : tensor<2x4xf32>
}

// -----

// Repeats are searched before and after the largest one too: two runs of
// different layers are two functions.

// CHECK-LABEL: func.func @two_runs
//       CHECK:   call @two_runs_layer(
//       CHECK:   call @two_runs_layer(
//       CHECK:   call @two_runs_layer(
//       CHECK:   call @two_runs_layer_0(
//       CHECK:   call @two_runs_layer_0(
//       CHECK: func.func private @two_runs_layer(
//       CHECK:   arith.addf
//       CHECK: func.func private @two_runs_layer_0(
//       CHECK:   arith.subf
func.func @two_runs(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %a0 = arith.addf %x, %x : tensor<2x4xf32>
  %b0 = arith.mulf %a0, %x : tensor<2x4xf32>
  %c0 = math.exp %b0 : tensor<2x4xf32>
  %d0 = arith.divf %c0, %a0 : tensor<2x4xf32>
  %a1 = arith.addf %d0, %d0 : tensor<2x4xf32>
  %b1 = arith.mulf %a1, %d0 : tensor<2x4xf32>
  %c1 = math.exp %b1 : tensor<2x4xf32>
  %d1 = arith.divf %c1, %a1 : tensor<2x4xf32>
  %a2 = arith.addf %d1, %d1 : tensor<2x4xf32>
  %b2 = arith.mulf %a2, %d1 : tensor<2x4xf32>
  %c2 = math.exp %b2 : tensor<2x4xf32>
  %d2 = arith.divf %c2, %a2 : tensor<2x4xf32>
  %e0 = arith.subf %d2, %x : tensor<2x4xf32>
  %f0 = math.tanh %e0 : tensor<2x4xf32>
  %g0 = math.sqrt %f0 : tensor<2x4xf32>
  %h0 = arith.mulf %g0, %e0 : tensor<2x4xf32>
  %e1 = arith.subf %h0, %x : tensor<2x4xf32>
  %f1 = math.tanh %e1 : tensor<2x4xf32>
  %g1 = math.sqrt %f1 : tensor<2x4xf32>
  %h1 = arith.mulf %g1, %e1 : tensor<2x4xf32>
  return %h1 : tensor<2x4xf32>
}

// -----

// The first layer computes what every layer reads (here exp(%t)): that moves
// before it, and the first layer is one of the others.

// CHECK-LABEL: func.func @first_layer_computes_shared
//  CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>, %[[T:.+]]: tensor<2x4xf32>)
//       CHECK:   %[[E:.+]] = math.exp %[[T]]
//       CHECK:   %[[L0:.+]] = call @first_layer_computes_shared_layer(%[[X]], %{{.+}}, %[[E]])
//       CHECK:   %[[L1:.+]] = call @first_layer_computes_shared_layer(%[[L0]], %{{.+}}, %[[E]])
//       CHECK:   %[[L2:.+]] = call @first_layer_computes_shared_layer(%[[L1]], %{{.+}}, %[[E]])
//       CHECK:   return %[[L2]]
//   CHECK-NOT:   math.exp
func.func @first_layer_computes_shared(%x: tensor<2x4xf32>, %t: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = arith.constant dense<[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %m0 = sits.matmul %x, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %e = math.exp %t : tensor<2x4xf32>
  %a0 = arith.addf %m0, %e : tensor<2x4xf32>
  %g0 = math.tanh %a0 : tensor<2x4xf32>
  %o0 = arith.mulf %g0, %x : tensor<2x4xf32>
  %w1 = arith.constant dense<[[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %m1 = sits.matmul %o0, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a1 = arith.addf %m1, %e : tensor<2x4xf32>
  %g1 = math.tanh %a1 : tensor<2x4xf32>
  %o1 = arith.mulf %g1, %o0 : tensor<2x4xf32>
  %w2 = arith.constant dense<[[3.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %m2 = sits.matmul %o1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a2 = arith.addf %m2, %e : tensor<2x4xf32>
  %g2 = math.tanh %a2 : tensor<2x4xf32>
  %o2 = arith.mulf %g2, %o1 : tensor<2x4xf32>
  return %o2 : tensor<2x4xf32>
}

// -----

// A splat constant of one layer that the next reads too (the graph shared
// it) stays a constant, cloned into the layer: never a result.

// CHECK-LABEL: func.func @shared_splat
//       CHECK:   call @shared_splat_layer(%{{.+}}, %{{.+}}) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
//       CHECK:   call @shared_splat_layer(%{{.+}}, %{{.+}}) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
//       CHECK:   call @shared_splat_layer(%{{.+}}, %{{.+}}) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
//       CHECK: func.func private @shared_splat_layer
//       CHECK:   arith.constant dense<2.000000e+00> : tensor<2x4xf32>
//   CHECK-NOT: func.func private
func.func @shared_splat(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %c = arith.constant dense<2.0> : tensor<2x4xf32>
  %w0 = arith.constant dense<[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %p0 = arith.mulf %x, %c : tensor<2x4xf32>
  %m0 = sits.matmul %p0, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a0 = math.tanh %m0 : tensor<2x4xf32>
  %c0 = arith.constant dense<2.0> : tensor<2x4xf32>
  %o0 = arith.addf %a0, %c0 : tensor<2x4xf32>
  %w1 = arith.constant dense<[[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %p1 = arith.mulf %o0, %c0 : tensor<2x4xf32>
  %m1 = sits.matmul %p1, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a1 = math.tanh %m1 : tensor<2x4xf32>
  %c1 = arith.constant dense<2.0> : tensor<2x4xf32>
  %o1 = arith.addf %a1, %c1 : tensor<2x4xf32>
  %w2 = arith.constant dense<[[3.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]> : tensor<4x4xf32>
  %p2 = arith.mulf %o1, %c1 : tensor<2x4xf32>
  %m2 = sits.matmul %p2, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %a2 = math.tanh %m2 : tensor<2x4xf32>
  %c2 = arith.constant dense<2.0> : tensor<2x4xf32>
  %o2 = arith.addf %a2, %c2 : tensor<2x4xf32>
  return %o2 : tensor<2x4xf32>
}

// -----

// Weights that canonicalization hoisted together repeat too, but a block of
// constants alone has nothing to outline.

// CHECK-LABEL: func.func @constants_only
//   CHECK-NOT:   call
//       CHECK:   return
func.func @constants_only(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %a0 = arith.constant dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>
  %b0 = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %c0 = arith.constant dense<[1, 2]> : tensor<2xi32>
  %d0 = arith.constant dense<[[1.0], [2.0]]> : tensor<2x1xf32>
  %a1 = arith.constant dense<[[5.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>
  %b1 = arith.constant dense<[5.0, 2.0]> : tensor<2xf32>
  %c1 = arith.constant dense<[5, 2]> : tensor<2xi32>
  %d1 = arith.constant dense<[[5.0], [2.0]]> : tensor<2x1xf32>
  %a2 = arith.constant dense<[[6.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>
  %b2 = arith.constant dense<[6.0, 2.0]> : tensor<2xf32>
  %c2 = arith.constant dense<[6, 2]> : tensor<2xi32>
  %d2 = arith.constant dense<[[6.0], [2.0]]> : tensor<2x1xf32>
  %y = math.exp %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
