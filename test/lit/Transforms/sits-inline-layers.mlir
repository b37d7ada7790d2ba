// RUN: sits-opt %s --split-input-file --sits-inline-layers --verify-diagnostics -mlir-print-debuginfo -mlir-print-local-scope | FileCheck %s

// sits-inline-layers inlines each call of a `sits.inline` function (a layer
// the importer emitted once) and erases the function; each call's clones are
// located at its own layer's ONNX nodes (`sits.node_names`, position by
// position; the first of equal names wins).

// CHECK-LABEL: func.func @main
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>
//   CHECK-NOT:   call @
//       CHECK:   %[[C0:.+]] = arith.constant dense<1.000000e+00> : tensor<4xf32> loc("/l0/Const"("model.onnx":1:1))
//       CHECK:   %[[A0:.+]] = arith.addf %[[X]], %[[C0]] : tensor<4xf32> loc(fused["/l0/Add", "model.onnx":2:1])
//       CHECK:   %[[E0:.+]] = tensor.empty() : tensor<4xf32> loc("/l0/Relu")
//       CHECK:   %[[G0:.+]] = linalg.generic {{.*}} ins(%[[A0]] : tensor<4xf32>) outs(%[[E0]] : tensor<4xf32>) {
//  CHECK-NEXT:   ^bb0(%{{.+}}: f32 loc("/l0/Relu"("model.onnx":3:1)), %{{.+}}: f32 loc("/l0/Relu")):
//  CHECK-NEXT:     %[[Z0:.+]] = arith.constant 0.000000e+00 : f32 loc("/l0/Relu")
//  CHECK-NEXT:     %[[M0:.+]] = arith.maximumf %{{.+}}, %[[Z0]] : f32 loc("/l0/Relu")
//  CHECK-NEXT:     linalg.yield %[[M0]] : f32 loc("/l0/Relu")
//  CHECK-NEXT:   } -> tensor<4xf32> loc(callsite("/l0/Relu" at "/l0/Add"))
//       CHECK:   %[[S0:.+]] = arith.mulf %[[G0]], %[[G0]] : tensor<4xf32> loc("/l0/Outer"("/l0/Add"))
//       CHECK:   %[[U0:.+]] = arith.subf %[[S0]], %[[X]] : tensor<4xf32> loc("/l0/Unlisted")
//       CHECK:   %[[C1:.+]] = arith.constant dense<1.000000e+00> : tensor<4xf32> loc("/l1/Const"("model.onnx":1:1))
//       CHECK:   %[[A1:.+]] = arith.addf %[[U0]], %[[C1]] : tensor<4xf32> loc(fused["/l1/Add", "model.onnx":2:1])
//       CHECK:   %[[E1:.+]] = tensor.empty() : tensor<4xf32> loc("/l1/Relu")
//       CHECK:   %[[G1:.+]] = linalg.generic {{.*}} ins(%[[A1]] : tensor<4xf32>) outs(%[[E1]] : tensor<4xf32>) {
//  CHECK-NEXT:   ^bb0(%{{.+}}: f32 loc("/l1/Relu"("model.onnx":3:1)), %{{.+}}: f32 loc("/l1/Relu")):
//  CHECK-NEXT:     %[[Z1:.+]] = arith.constant 0.000000e+00 : f32 loc("/l1/Relu")
//  CHECK-NEXT:     %[[M1:.+]] = arith.maximumf %{{.+}}, %[[Z1]] : f32 loc("/l1/Relu")
//  CHECK-NEXT:     linalg.yield %[[M1]] : f32 loc("/l1/Relu")
//  CHECK-NEXT:   } -> tensor<4xf32> loc(callsite("/l1/Relu" at "/l1/Add"))
//       CHECK:   %[[S1:.+]] = arith.mulf %[[G1]], %[[G1]] : tensor<4xf32> loc("/l1/Outer"("/l1/Add"))
//       CHECK:   %[[U1:.+]] = arith.subf %[[S1]], %[[U0]] : tensor<4xf32> loc("/l0/Unlisted")
//       CHECK:   return %[[U1]], %[[G1]] : tensor<4xf32>, tensor<4xf32>
//   CHECK-NOT: func.func private @layer
// The layer's fifth name repeats its second: the second's wins (layer 1's
// "/l1/Other" names nothing). "/l0/Unlisted" is not a node name: kept.
#id = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a, %r0 = call @layer(%x) {sits.node_names = ["/l0/Const", "/l0/Add", "/l0/Relu", "/l0/Outer", "/l0/Add"]} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %b, %r1 = call @layer(%a) {sits.node_names = ["/l1/Const", "/l1/Add", "/l1/Relu", "/l1/Outer", "/l1/Other"]} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %b, %r1 : tensor<4xf32>, tensor<4xf32>
}
func.func private @layer(%h: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    attributes {sits.inline, sits.node_names = ["/l0/Const", "/l0/Add", "/l0/Relu", "/l0/Outer", "/l0/Add"]} {
  %c = arith.constant dense<1.0> : tensor<4xf32> loc("/l0/Const"("model.onnx":1:1))
  %a = arith.addf %h, %c : tensor<4xf32> loc(fused["/l0/Add", "model.onnx":2:1])
  %e = tensor.empty() : tensor<4xf32> loc("/l0/Relu")
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32 loc("/l0/Relu"("model.onnx":3:1)), %out: f32 loc("/l0/Relu")):
    %z = arith.constant 0.0 : f32 loc("/l0/Relu")
    %m = arith.maximumf %in, %z : f32 loc("/l0/Relu")
    linalg.yield %m : f32 loc("/l0/Relu")
  } -> tensor<4xf32> loc(callsite("/l0/Relu" at "/l0/Add"))
  %s = arith.mulf %g, %g : tensor<4xf32> loc("/l0/Outer"("/l0/Add"))
  %u = arith.subf %s, %h : tensor<4xf32> loc("/l0/Unlisted")
  return %u, %g : tensor<4xf32>, tensor<4xf32>
}

// -----

// A constant only one call reads (that layer's weight) moves to its first
// reader; one read elsewhere too stays where it is.
// CHECK-LABEL: func.func @weights
//       CHECK:   %[[S:.+]] = arith.constant dense<2.000000e+00>
//       CHECK:   %[[N:.+]] = arith.negf
//  CHECK-NEXT:   %[[W0:.+]] = arith.constant dense<[1.000000e+00, 2.000000e+00]>
//  CHECK-NEXT:   arith.mulf %[[N]], %[[W0]]
//       CHECK:   %[[N1:.+]] = arith.negf
//  CHECK-NEXT:   %[[W1:.+]] = arith.constant dense<[3.000000e+00, 4.000000e+00]>
//  CHECK-NEXT:   arith.mulf %[[N1]], %[[W1]]
func.func @weights(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %w0 = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %w1 = arith.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %s = arith.constant dense<2.0> : tensor<2xf32>
  %a = call @scale(%x, %w0, %s) {sits.node_names = ["/l0/Neg", "/l0/Mul", "/l0/Add"]} : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %b = call @scale(%a, %w1, %s) {sits.node_names = ["/l1/Neg", "/l1/Mul", "/l1/Add"]} : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %b, %s : tensor<2xf32>, tensor<2xf32>
}
func.func private @scale(%x: tensor<2xf32>, %w: tensor<2xf32>, %s: tensor<2xf32>) -> tensor<2xf32> attributes {sits.inline, sits.node_names = ["/l0/Neg", "/l0/Mul", "/l0/Add"]} {
  %n = arith.negf %x : tensor<2xf32>
  %m = arith.mulf %n, %w : tensor<2xf32>
  %r = arith.addf %m, %s : tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// A call without `sits.node_names`, in any function, keeps the layer's
// locations.

// CHECK-LABEL: func.func @unnamed
//       CHECK:   %[[R:.+]] = arith.negf %{{.+}} : tensor<4xf32> loc("/l0/Neg")
//       CHECK:   return %[[R]]
// CHECK-LABEL: func.func @named
//       CHECK:   %[[R:.+]] = arith.negf %{{.+}} : tensor<4xf32> loc("/l3/Neg")
//       CHECK:   return %[[R]]
//   CHECK-NOT: func.func private @neg
func.func @unnamed(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @neg(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @named(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @neg(%x) {sits.node_names = ["/l3/Neg"]} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @neg(%h: tensor<4xf32>) -> tensor<4xf32>
    attributes {sits.inline, sits.node_names = ["/l0/Neg"]} {
  %n = arith.negf %h : tensor<4xf32> loc("/l0/Neg")
  return %n : tensor<4xf32>
}

// -----

// A function not marked `sits.inline` is left alone.

// CHECK-LABEL: func.func @kept
//       CHECK:   call @plain
//       CHECK: func.func private @plain
func.func @kept(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @plain(%x) {sits.node_names = ["/l1/Neg"]} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @plain(%h: tensor<4xf32>) -> tensor<4xf32> attributes {sits.node_names = ["/l0/Neg"]} {
  %n = arith.negf %h : tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sits.node_names' must be an array of 1 strings, like @neg's}}
  %y = call @neg(%x) {sits.node_names = ["/l1/Neg", "/l1/Extra"]} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @neg(%h: tensor<4xf32>) -> tensor<4xf32>
    attributes {sits.inline, sits.node_names = ["/l0/Neg"]} {
  %n = arith.negf %h : tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @decl(%x) {sits.node_names = ["/l1/Neg"]} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
// expected-error @+1 {{a 'sits.inline' function must have a body of one block, ending in 'func.return'}}
func.func private @decl(%h: tensor<4xf32>) -> tensor<4xf32> attributes {sits.inline, sits.node_names = ["/l0/Neg"]}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @unnamed(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
// expected-error @+1 {{a 'sits.inline' function needs 'sits.node_names', an array of strings}}
func.func private @unnamed(%h: tensor<4xf32>) -> tensor<4xf32> attributes {sits.inline} {
  %n = arith.negf %h : tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// A clone of @inner's call would outlive @inner.
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @outer(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @outer(%h: tensor<4xf32>) -> tensor<4xf32> attributes {sits.inline, sits.node_names = []} {
  // expected-error @+1 {{a 'sits.inline' function cannot call another}}
  %n = call @inner(%h) : (tensor<4xf32>) -> tensor<4xf32>
  return %n : tensor<4xf32>
}
func.func private @inner(%h: tensor<4xf32>) -> tensor<4xf32> attributes {sits.inline, sits.node_names = []} {
  %n = arith.negf %h : tensor<4xf32>
  return %n : tensor<4xf32>
}
