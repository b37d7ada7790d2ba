// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of the SITS attributes on their own: #sits.activation,
// #sits.packed as a tensor encoding, #sits.target on modules.

// CHECK-LABEL: func.func @activation_attrs
//  CHECK-SAME: attributes {acts = [#sits.activation<none>, #sits.activation<relu>, #sits.activation<gelu>, #sits.activation<gelu_tanh>, #sits.activation<silu>, #sits.activation<sigmoid>, #sits.activation<tanh>]}
func.func @activation_attrs() attributes {acts = [#sits.activation<none>, #sits.activation<relu>,
    #sits.activation<gelu>, #sits.activation<gelu_tanh>, #sits.activation<silu>,
    #sits.activation<sigmoid>, #sits.activation<tanh>]} {
  return
}

// -----

// #sits.packed on function arguments, results and upstream ops, for every
// storage width; integer and float elements; a dynamic extent along the
// packing axis is allowed.
#int4 = #sits.packed<storage = i8, axis = 1>
// CHECK-LABEL: func.func @packed_encodings
//  CHECK-SAME: %{{.+}}: tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 1>>
//  CHECK-SAME: %{{.+}}: tensor<16x8xui2, #sits.packed<storage = i16, axis = 0>>
//  CHECK-SAME: %{{.+}}: tensor<3x8xf8E4M3FN, #sits.packed<storage = i32, axis = 1>>
//  CHECK-SAME: %{{.+}}: tensor<?x32xi1, #sits.packed<storage = i8, axis = 0>>
//  CHECK-SAME: %{{.+}}: tensor<2x4xi16, #sits.packed<storage = i32, axis = 1>>
//  CHECK-SAME: -> tensor<128x64xi4, #sits.packed<storage = i8, axis = 1>>
//       CHECK:   %[[E:.+]] = tensor.empty() : tensor<128x64xi4, #sits.packed<storage = i8, axis = 1>>
//       CHECK:   return %[[E]] : tensor<128x64xi4, #sits.packed<storage = i8, axis = 1>>
func.func @packed_encodings(%a: tensor<4096x4096xi4, #int4>,
                            %b: tensor<16x8xui2, #sits.packed<storage = i16, axis = 0>>,
                            %c: tensor<3x8xf8E4M3FN, #sits.packed<storage = i32, axis = 1>>,
                            %d: tensor<?x32xi1, #sits.packed<axis = 0, storage = i8>>,
                            %e: tensor<2x4xi16, #sits.packed<storage = i32, axis = 1>>)
    -> tensor<128x64xi4, #int4> {
  %0 = tensor.empty() : tensor<128x64xi4, #int4>
  return %0 : tensor<128x64xi4, #int4>
}

// -----

// Two encodings that differ only in the axis are different types.
// CHECK-LABEL: func.func @packed_axis_distinguishes
//  CHECK-SAME: (%{{.+}}: tensor<8x8xi4, #sits.packed<storage = i8, axis = 0>>, %{{.+}}: tensor<8x8xi4, #sits.packed<storage = i8, axis = 1>>)
func.func @packed_axis_distinguishes(%a: tensor<8x8xi4, #sits.packed<storage = i8, axis = 0>>,
                                     %b: tensor<8x8xi4, #sits.packed<storage = i8, axis = 1>>) {
  return
}

// -----

// CHECK: module attributes {sits.target = #sits.target<"h100">}
module attributes {sits.target = #sits.target<"h100">} {
}

// -----

// Every known target by name and by alias (matched case-insensitively; the
// spelling is kept), on nested modules.
// CHECK-LABEL: module @targets
//   CHECK-DAG: module @h100 attributes {sits.target = #sits.target<"h100">}
//   CHECK-DAG: module @h100_sxm attributes {sits.target = #sits.target<"h100-sxm">}
//   CHECK-DAG: module @sm_90 attributes {sits.target = #sits.target<"sm_90">}
//   CHECK-DAG: module @sm_90a attributes {sits.target = #sits.target<"sm_90a">}
//   CHECK-DAG: module @h200 attributes {sits.target = #sits.target<"h200">}
//   CHECK-DAG: module @h200_sxm attributes {sits.target = #sits.target<"h200-sxm">}
//   CHECK-DAG: module @a100 attributes {sits.target = #sits.target<"a100">}
//   CHECK-DAG: module @a100_80 attributes {sits.target = #sits.target<"a100-sxm-80gb">}
//   CHECK-DAG: module @sm_80 attributes {sits.target = #sits.target<"sm_80">}
//   CHECK-DAG: module @v100 attributes {sits.target = #sits.target<"v100">}
//   CHECK-DAG: module @v100_sxm2 attributes {sits.target = #sits.target<"v100-sxm2">}
//   CHECK-DAG: module @sm_70 attributes {sits.target = #sits.target<"sm_70">}
//   CHECK-DAG: module @mi300x attributes {sits.target = #sits.target<"mi300x">}
//   CHECK-DAG: module @gfx942 attributes {sits.target = #sits.target<"gfx942">}
//   CHECK-DAG: module @cpu attributes {sits.target = #sits.target<"cpu">}
//   CHECK-DAG: module @host attributes {sits.target = #sits.target<"host">}
//   CHECK-DAG: module @upper attributes {sits.target = #sits.target<"H100">}
module @targets {
  module @h100 attributes {sits.target = #sits.target<"h100">} {}
  module @h100_sxm attributes {sits.target = #sits.target<"h100-sxm">} {}
  module @sm_90 attributes {sits.target = #sits.target<"sm_90">} {}
  module @sm_90a attributes {sits.target = #sits.target<"sm_90a">} {}
  module @h200 attributes {sits.target = #sits.target<"h200">} {}
  module @h200_sxm attributes {sits.target = #sits.target<"h200-sxm">} {}
  module @a100 attributes {sits.target = #sits.target<"a100">} {}
  module @a100_80 attributes {sits.target = #sits.target<"a100-sxm-80gb">} {}
  module @sm_80 attributes {sits.target = #sits.target<"sm_80">} {}
  module @v100 attributes {sits.target = #sits.target<"v100">} {}
  module @v100_sxm2 attributes {sits.target = #sits.target<"v100-sxm2">} {}
  module @sm_70 attributes {sits.target = #sits.target<"sm_70">} {}
  module @mi300x attributes {sits.target = #sits.target<"mi300x">} {}
  module @gfx942 attributes {sits.target = #sits.target<"gfx942">} {}
  module @cpu attributes {sits.target = #sits.target<"cpu">} {}
  module @host attributes {sits.target = #sits.target<"host">} {}
  module @upper attributes {sits.target = #sits.target<"H100">} {}
}

// -----

// An attribute alias for the target, next to other module attributes.
#h100 = #sits.target<"sm_90a">
// CHECK: module attributes {sits.target = #sits.target<"sm_90a">, test.other = 1 : i32}
// CHECK:   func.func @with_target
module attributes {sits.target = #h100, test.other = 1 : i32} {
  func.func @with_target() {
    return
  }
}

// -----

// Graph passes record their decisions as `sits.report.<pass>` on the module.
// CHECK: module attributes {sits.report.pruning = [{kind = "dead", op = "fc1"}]}
module attributes {sits.report.pruning = [{op = "fc1", kind = "dead"}]} {}
