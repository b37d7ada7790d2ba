// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Dynamic extents: ops with `?` dimensions verify, and a declared result may
// be more static (or less static) than the inferred one as long as no static
// extents conflict.

// CHECK-LABEL: func.func @matmul_dynamic
//       CHECK:   sits.matmul {{.+}} : (tensor<?x16xf32>, tensor<16x?xf32>) -> tensor<?x?xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<8x?xf32>, tensor<?x32xf32>) -> tensor<8x32xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<8x32xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<?x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<?x8x16xf32>, tensor<4x16x32xf32>) -> tensor<?x8x32xf32>
//       CHECK:   sits.matmul {{.+}} bias({{.+}}) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
func.func @matmul_dynamic(%a: tensor<?x16xf32>, %b: tensor<16x?xf32>, %c: tensor<8x?xf32>, %d: tensor<?x32xf32>,
                          %e: tensor<?x?xf32>, %f: tensor<?x8x16xf32>, %g: tensor<4x16x32xf32>, %bias: tensor<?xf32>) {
  %0 = sits.matmul %a, %b : (tensor<?x16xf32>, tensor<16x?xf32>) -> tensor<?x?xf32>
  %1 = sits.matmul %c, %d : (tensor<8x?xf32>, tensor<?x32xf32>) -> tensor<8x32xf32>
  %2 = sits.matmul %e, %e : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<8x32xf32>
  // A dynamic batch extent broadcasts against a static one.
  %3 = sits.matmul %f, %g : (tensor<?x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
  // The declared type may be less static than the inferred one.
  %4 = sits.matmul %f, %g : (tensor<?x8x16xf32>, tensor<4x16x32xf32>) -> tensor<?x8x32xf32>
  %5 = sits.matmul %e, %e bias(%bias) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  return
}

// -----

// CHECK-LABEL: func.func @conv_dynamic
//       CHECK:   sits.conv {{.+}} : (tensor<?x3x?x?xf32>, tensor<64x3x7x7xf32>) -> tensor<?x64x?x?xf32>
//       CHECK:   sits.conv {{.+}} : (tensor<?x3x?x?xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x56x56xf32>
//       CHECK:   sits.conv {{.+}} : (tensor<1x?x8x8xf32>, tensor<?x?x3x3xf32>) -> tensor<1x16x6x6xf32>
//       CHECK:   sits.conv {{.+}} bias({{.+}}) : (tensor<1x?x8x8xf32>, tensor<?x?x3x3xf32>, tensor<?xf32>) -> tensor<1x?x6x6xf32>
func.func @conv_dynamic(%x: tensor<?x3x?x?xf32>, %w: tensor<64x3x7x7xf32>, %y: tensor<1x?x8x8xf32>,
                        %v: tensor<?x?x3x3xf32>, %b: tensor<?xf32>) {
  %0 = sits.conv %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 3, 3, 3, 3>}
      : (tensor<?x3x?x?xf32>, tensor<64x3x7x7xf32>) -> tensor<?x64x?x?xf32>
  %1 = sits.conv %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 3, 3, 3, 3>}
      : (tensor<?x3x?x?xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x56x56xf32>
  %2 = sits.conv %y, %v {groups = 4 : i64} : (tensor<1x?x8x8xf32>, tensor<?x?x3x3xf32>) -> tensor<1x16x6x6xf32>
  %3 = sits.conv %y, %v bias(%b) : (tensor<1x?x8x8xf32>, tensor<?x?x3x3xf32>, tensor<?xf32>) -> tensor<1x?x6x6xf32>
  return
}

// -----

// CHECK-LABEL: func.func @qmatmul_dynamic
//       CHECK:   sits.qmatmul {{.+}} : (tensor<?x?x4096xf16>, tensor<4096x?xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32x?xf16>) -> tensor<?x?x?xf16>
//       CHECK:   sits.qmatmul {{.+}} : (tensor<?x?xf16>, tensor<?x?xi8>, tensor<?xf16>) -> tensor<2x11008xf16>
func.func @qmatmul_dynamic(%x: tensor<?x?x4096xf16>, %w: tensor<4096x?xi4, #sits.packed<storage = i8, axis = 0>>,
                           %s: tensor<32x?xf16>, %y: tensor<?x?xf16>, %w8: tensor<?x?xi8>, %s8: tensor<?xf16>) {
  %0 = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 128 : i64}
      : (tensor<?x?x4096xf16>, tensor<4096x?xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32x?xf16>) -> tensor<?x?x?xf16>
  %1 = sits.qmatmul %y, %w8, %s8 {axis = 1 : i64, transpose_weight}
      : (tensor<?x?xf16>, tensor<?x?xi8>, tensor<?xf16>) -> tensor<2x11008xf16>
  return
}

// -----

// Causal attention with dynamic sequence lengths (the Tk >= Tq check only
// applies to static extents), dynamic heads and a dynamic mask.
// CHECK-LABEL: func.func @attention_dynamic
//       CHECK:   sits.attention {{.+}} {causal} : (tensor<?x32x?x128xf16>, tensor<?x8x?x128xf16>, tensor<?x8x?x128xf16>) -> tensor<?x32x?x128xf16>
//       CHECK:   sits.attention {{.+}} mask({{.+}}) : (tensor<1x?x?x64xf32>, tensor<1x?x?x64xf32>, tensor<1x?x?x64xf32>, tensor<?x?xf32>) -> tensor<1x12x1x64xf32>
//       CHECK:   sits.attention {{.+}} : (tensor<1x12x1x?xf32>, tensor<1x12x9x?xf32>, tensor<1x12x9x?xf32>) -> tensor<1x12x1x?xf32>
func.func @attention_dynamic(%q: tensor<?x32x?x128xf16>, %k: tensor<?x8x?x128xf16>,
                             %q2: tensor<1x?x?x64xf32>, %m: tensor<?x?xf32>,
                             %q3: tensor<1x12x1x?xf32>, %k3: tensor<1x12x9x?xf32>) {
  %0 = sits.attention %q, %k, %k {causal}
      : (tensor<?x32x?x128xf16>, tensor<?x8x?x128xf16>, tensor<?x8x?x128xf16>) -> tensor<?x32x?x128xf16>
  %1 = sits.attention %q2, %q2, %q2 mask(%m)
      : (tensor<1x?x?x64xf32>, tensor<1x?x?x64xf32>, tensor<1x?x?x64xf32>, tensor<?x?xf32>) -> tensor<1x12x1x64xf32>
  // Dynamic head dim: no default scale can be computed, which is fine.
  %2 = sits.attention %q3, %k3, %k3
      : (tensor<1x12x1x?xf32>, tensor<1x12x9x?xf32>, tensor<1x12x9x?xf32>) -> tensor<1x12x1x?xf32>
  return
}

// -----

// CHECK-LABEL: func.func @norm_softmax_activation_dynamic
//       CHECK:   sits.layer_norm {{.+}} : (tensor<?x?x768xf32>, tensor<768xf32>, tensor<?xf32>) -> tensor<?x?x768xf32>
//       CHECK:   sits.layer_norm {{.+}} : (tensor<?x?x768xf32>, tensor<768xf32>, tensor<?xf32>) -> tensor<2x128x768xf32>
//       CHECK:   sits.rms_norm {{.+}} {axis = 1 : i64} : (tensor<?x?x?xbf16>, tensor<16x64xbf16>) -> tensor<?x16x64xbf16>
//       CHECK:   sits.softmax {{.+}} : tensor<?x?xf32>
//       CHECK:   sits.activation <gelu> {{.+}} : tensor<?x?x768xf32>
func.func @norm_softmax_activation_dynamic(%x: tensor<?x?x768xf32>, %g: tensor<768xf32>, %b: tensor<?xf32>,
                                           %y: tensor<?x?x?xbf16>, %gy: tensor<16x64xbf16>, %s: tensor<?x?xf32>) {
  %0 = sits.layer_norm %x, %g, %b : (tensor<?x?x768xf32>, tensor<768xf32>, tensor<?xf32>) -> tensor<?x?x768xf32>
  %1 = sits.layer_norm %x, %g, %b : (tensor<?x?x768xf32>, tensor<768xf32>, tensor<?xf32>) -> tensor<2x128x768xf32>
  %2 = sits.rms_norm %y, %gy {axis = 1 : i64} : (tensor<?x?x?xbf16>, tensor<16x64xbf16>) -> tensor<?x16x64xbf16>
  %3 = sits.softmax %s : tensor<?x?xf32>
  %4 = sits.activation <gelu> %x : tensor<?x?x768xf32>
  return
}

// -----

// CHECK-LABEL: func.func @quant_dynamic
//       CHECK:   sits.quantize {{.+}} {axis = 0 : i64} : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xi8>
//       CHECK:   sits.quantize {{.+}} {axis = 1 : i64, block_size = 32 : i64} : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi4>) -> tensor<?x?xi4>
//       CHECK:   sits.dequantize {{.+}} {axis = 0 : i64} : (tensor<?x?xi8>, tensor<?xf32>) -> tensor<64x?xf32>
//       CHECK:   sits.dequantize {{.+}} : (tensor<?x?xi4, #sits.packed<storage = i8, axis = 1>>, tensor<f32>) -> tensor<?x?xf32>
func.func @quant_dynamic(%x: tensor<?x?xf32>, %s: tensor<?xf32>, %sg: tensor<?x?xf32>, %zg: tensor<?x?xi4>,
                         %p: tensor<?x?xi4, #sits.packed<storage = i8, axis = 1>>, %s0: tensor<f32>) {
  %0 = sits.quantize %x, %s {axis = 0 : i64} : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xi8>
  %1 = sits.quantize %x, %sg, %zg {axis = 1 : i64, block_size = 32 : i64}
      : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xi4>) -> tensor<?x?xi4>
  %2 = sits.dequantize %0, %s {axis = 0 : i64} : (tensor<?x?xi8>, tensor<?xf32>) -> tensor<64x?xf32>
  %3 = sits.dequantize %p, %s0 : (tensor<?x?xi4, #sits.packed<storage = i8, axis = 1>>, tensor<f32>) -> tensor<?x?xf32>
  return
}
