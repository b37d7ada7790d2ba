// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of the SITS attributes (#sits.packed, #sits.target) and
// of the dialect's module attribute `sits.target`.

//===----------------------------------------------------------------------===//
// #sits.packed: the attribute itself
//===----------------------------------------------------------------------===//

// expected-error @+1 {{packed storage must be i8, i16 or i32, got 'i4'}}
func.func @storage_i4(%a: tensor<8xi2, #sits.packed<storage = i4, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{packed storage must be i8, i16 or i32, got 'i64'}}
func.func @storage_i64(%a: tensor<8xi4, #sits.packed<storage = i64, axis = 0>>) {
  return
}

// -----

// Regression: signed or unsigned storage words were accepted although the
// storage is a raw (signless) word.
// expected-error @+1 {{packed storage must be i8, i16 or i32, got 'ui8'}}
func.func @storage_unsigned(%a: tensor<8xi4, #sits.packed<storage = ui8, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{packed storage must be i8, i16 or i32, got 'si16'}}
func.func @storage_signed(%a: tensor<8xi4, #sits.packed<storage = si16, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{packing axis must be non-negative, got -1}}
func.func @negative_axis(%a: tensor<8xi4, #sits.packed<storage = i8, axis = -1>>) {
  return
}

// -----

// The storage parameter is an integer type.
// expected-error @+2 {{invalid kind of type specified: expected builtin.integer, but found 'f32'}}
// expected-error @+1 {{failed to parse Sits_PackedEncodingAttr parameter 'storage' which is to be a `::mlir::IntegerType`}}
func.func @float_storage(%a: tensor<8xi4, #sits.packed<storage = f32, axis = 0>>) {
  return
}

// -----

// Both parameters are required.
// expected-error @+1 {{expected ','}}
func.func @missing_axis(%a: tensor<8xi4, #sits.packed<storage = i8>>) {
  return
}

// -----

//===----------------------------------------------------------------------===//
// #sits.packed: as the encoding of a tensor type
//===----------------------------------------------------------------------===//

// expected-error @+1 {{packed elements must be integers or floats, got 'index'}}
func.func @index_elements(%a: tensor<8xindex, #sits.packed<storage = i8, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{packed elements must be integers or floats, got 'complex<f16>'}}
func.func @complex_elements(%a: tensor<8xcomplex<f16>, #sits.packed<storage = i32, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{cannot pack 'i8' into 'i8': the element must be narrower and its width must divide the storage width}}
func.func @not_narrower(%a: tensor<8xi8, #sits.packed<storage = i8, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{cannot pack 'f32' into 'i16': the element must be narrower and its width must divide the storage width}}
func.func @wider(%a: tensor<8xf32, #sits.packed<storage = i16, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{cannot pack 'i3' into 'i8': the element must be narrower and its width must divide the storage width}}
func.func @not_dividing(%a: tensor<8xi3, #sits.packed<storage = i8, axis = 0>>) {
  return
}

// -----

// Regression: a zero-width element divided the storage width by zero
// (SIGFPE) instead of being rejected.
// expected-error @+1 {{cannot pack 'i0' into 'i8': the element must be narrower and its width must divide the storage width}}
func.func @zero_width(%a: tensor<4xi0, #sits.packed<storage = i8, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{packing axis 2 is out of range for a tensor of rank 2}}
func.func @axis_out_of_range(%a: tensor<8x8xi4, #sits.packed<storage = i8, axis = 2>>) {
  return
}

// -----

// expected-error @+1 {{packing axis 0 is out of range for a tensor of rank 0}}
func.func @rank_0(%a: tensor<i4, #sits.packed<storage = i8, axis = 0>>) {
  return
}

// -----

// expected-error @+1 {{extent 7 along packing axis 1 is not a multiple of the packing factor 2}}
func.func @odd_extent(%a: tensor<8x7xi4, #sits.packed<storage = i8, axis = 1>>) {
  return
}

// -----

// 2-bit elements in a 32-bit word: 16 per word.
// expected-error @+1 {{extent 24 along packing axis 0 is not a multiple of the packing factor 16}}
func.func @extent_factor_16(%a: tensor<24xui2, #sits.packed<storage = i32, axis = 0>>) {
  return
}

// -----

// The encoding is checked wherever the type appears, e.g. on an op result.
func.func @on_op_result(%x: tensor<16x31xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{extent 31 along packing axis 1 is not a multiple of the packing factor 2}}
  %0 = sits.quantize %x, %s : (tensor<16x31xf32>, tensor<f32>) -> tensor<16x31xi4, #sits.packed<storage = i8, axis = 1>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// #sits.target
//===----------------------------------------------------------------------===//

// expected-error @+1 {{unknown target 'b200'; known targets: h100, h200, a100, v100, mi300x, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, aarch64, cpu}}
module attributes {sits.target = #sits.target<"b200">} {
}

// -----

// expected-error @+1 {{unknown target ''; known targets: h100, h200, a100, v100, mi300x, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, aarch64, cpu}}
module attributes {sits.target = #sits.target<"">} {
}

// -----

// Aliases are matched whole: a prefix of a name is not a target.
// expected-error @+1 {{unknown target 'sm_9'; known targets: h100, h200, a100, v100, mi300x, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, aarch64, cpu}}
module attributes {sits.target = #sits.target<"sm_9">} {
}

// -----

//===----------------------------------------------------------------------===//
// The `sits.*` attributes of an operation (SitsDialect::verifyOperationAttribute)
//===----------------------------------------------------------------------===//

// Regression: the name used to be printed with its quotes
// (unknown SITS attribute '"sits.targets"').
// expected-error @+1 {{unknown SITS attribute 'sits.targets'}}
module attributes {sits.targets = #sits.target<"h100">} {
}

// -----

module {
  // expected-error @+1 {{unknown SITS attribute 'sits.fused'}}
  func.func @unknown_on_func() attributes {sits.fused} {
    return
  }
}

// -----

module {
  // expected-error @+1 {{'sits.target' is only valid on a builtin.module}}
  func.func @target_on_func() attributes {sits.target = #sits.target<"h100">} {
    return
  }
}

// -----

func.func @target_on_op(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'sits.target' is only valid on a builtin.module}}
  %0 = sits.matmul %a, %b {sits.target = #sits.target<"h100">} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

// expected-error @+1 {{'sits.target' must be a #sits.target attribute, got "h100"}}
module attributes {sits.target = "h100"} {
}

// -----

// expected-error @+1 {{'sits.target' must be a #sits.target attribute, got #sits.activation<relu>}}
module attributes {sits.target = #sits.activation<relu>} {
}

// -----

// expected-error @+1 {{unknown SITS argument attribute 'sits.weight' on argument 1}}
func.func @arg_attr(%x: tensor<4xf32>, %w: tensor<4xf32> {sits.weight}) {
  return
}

// -----

// expected-error @+1 {{unknown SITS result attribute 'sits.output' on result 0}}
func.func @result_attr(%x: tensor<4xf32>) -> (tensor<4xf32> {sits.output}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sits.name' on argument 0 must be a non-empty string, got 3 : i64}}
func.func @arg_name(%x: tensor<4xf32> {sits.name = 3}) {
  return
}

// -----

// expected-error @+1 {{'sits.kv_quantization' on argument 0 must be "per_token_head", "kivi" or "per_token_group", got "per_tensor"}}
func.func @kv_quantization(%x: tensor<4xi8> {sits.kv_quantization = "per_tensor"}) {
  return
}

// -----

// expected-error @+1 {{'sits.updates' on result 0 must be the index of an argument of the result's type, got 1 : i64}}
func.func @updates_type(%x: tensor<4xf32>, %y: tensor<8xf32>) -> (tensor<4xf32> {sits.updates = 1}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sits.updates' on result 0 must be the index of an argument of the result's type, got 2 : i64}}
func.func @updates_range(%x: tensor<4xf32>) -> (tensor<4xf32> {sits.updates = 2}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sits.status' on result 0 must be a non-empty array of strings on an i32 scalar result, got ["x"]}}
func.func @status_type(%x: tensor<i64>) -> (tensor<i64> {sits.status = ["x"]}) {
  return %x : tensor<i64>
}

// -----

// expected-error @+1 {{'sits.status' on result 0 must be a non-empty array of strings on an i32 scalar result, got []}}
func.func @status_empty(%x: tensor<i32>) -> (tensor<i32> {sits.status = []}) {
  return %x : tensor<i32>
}

// -----

// expected-error @+1 {{'sits.status' on result 0 must be a non-empty array of strings on an i32 scalar result, got [1]}}
func.func @status_messages(%x: tensor<i32>) -> (tensor<i32> {sits.status = [1]}) {
  return %x : tensor<i32>
}

// -----

// expected-error @+1 {{'sits.status' on argument 0 must be a non-empty array of strings on an i32 scalar argument, got ["x"]}}
func.func @status_argument(%x: memref<2xi32> {sits.status = ["x"]}) {
  return
}

// -----

// Valid status results and out-parameters: no diagnostic.
func.func @status_ok(%x: tensor<i32>) -> (tensor<i32> {sits.status = ["Gather node 'g': an index is out of range"]}) {
  return %x : tensor<i32>
}
func.func @status_out(%x: memref<i32> {sits.status = ["Gather node 'g': an index is out of range"]}) {
  return
}

// -----

// expected-error @+1 {{'sits.weights' entries must be {name = string, offset = integer, value = elements}, got {name = "w", offset = 0 : i64}}}
module attributes {sits.weights = [{name = "w", offset = 0 : i64}]} {}

// -----

// expected-error @+1 {{'sits.weights' must be an array, got "w"}}
module attributes {sits.weights = "w"} {}

// -----

// expected-error @+1 {{'sits.weights_placed' must be a non-negative integer, got -64 : i64}}
module attributes {sits.weights_placed = -64 : i64} {}

// -----

// expected-error @+1 {{'sits.weights_placed' must be a non-negative integer, got "all"}}
module attributes {sits.weights_placed = "all"} {}

// -----

module {
  // expected-error @+1 {{'sits.weights_placed' is only valid on a builtin.module}}
  func.func @f() attributes {sits.weights_placed = 0 : i64} {
    return
  }
}

// -----

module {
  // expected-error @+1 {{'sits.weights' is only valid on a builtin.module}}
  func.func @f() attributes {sits.weights = []} {
    return
  }
}

// -----

// `sits.inline` and `sits.node_names`: a layer function the ONNX importer
// emitted once and its calls (see sits-inline-layers).
module {
  // expected-error @+1 {{'sits.inline' must be a unit attribute on a function}}
  func.func private @f() attributes {sits.inline = 1 : i64, sits.node_names = []} {
    return
  }
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sits.inline' must be a unit attribute on a function}}
  %y = arith.negf %x {sits.inline} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @f() {
  // expected-error @+1 {{'sits.node_names' must be an array of strings on a function or a call, got [1]}}
  call @g() {sits.node_names = [1]} : () -> ()
  return
}
func.func private @g()

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sits.node_names' must be an array of strings on a function or a call, got ["/Neg"]}}
  %y = arith.negf %x {sits.node_names = ["/Neg"]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A layer function and a call: no diagnostic.
func.func @calls(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @layer(%x) {sits.node_names = ["/l1/Neg"]} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func private @layer(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sits.inline, sits.node_names = ["/l0/Neg"]} {
  %y = arith.negf %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// `sits.report.<pass>`: the decisions of a graph pass, an array of
// dictionaries on the module.
// expected-error @+1 {{'sits.report.schedule' must be an array of dictionaries, got [1]}}
module attributes {sits.report.schedule = [1 : i64]} {}

// -----

module {
  // expected-error @+1 {{'sits.report.pruning' is only valid on a builtin.module}}
  func.func @f() attributes {sits.report.pruning = []} {
    return
  }
}

// -----

// sits.ukernel and sits.weight_layout name a runtime kernel and its weight
// layout: strings, on an op with a body (a linalg op).
func.func @ukernel_not_string(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sits.ukernel' must be a string attribute on a linalg op}}
  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%a : tensor<4xf32>) attrs = {sits.ukernel = 1 : i64} {
  ^bb0(%out: f32):
    linalg.yield %out : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @weight_layout_without_body(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sits.weight_layout' must be a string attribute on a linalg op}}
  %0 = arith.addf %a, %a {sits.weight_layout = "qdot_i8"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{'sits.kivi' on argument 0 must be [bits, layers, kv heads, block size, head dim], all positive, with bits 512 followed by the width (4 or 2) of each (layer, kv head), got array<i64: 4, 2, 2, 32>}}
func.func @kivi_geometry(%x: tensor<?x4096xi8> {sits.kivi = array<i64: 4, 2, 2, 32>}) {
  return
}

// -----

// expected-error @+1 {{'sits.kivi' on argument 0 must be [bits, layers, kv heads, block size, head dim], all positive, with bits 512 followed by the width (4 or 2) of each (layer, kv head), got array<i64: 512, 1, 2, 32, 64, 4, 3>}}
func.func @kivi_widths(%x: tensor<?x4096xi8> {sits.kivi = array<i64: 512, 1, 2, 32, 64, 4, 3>}) {
  return
}
