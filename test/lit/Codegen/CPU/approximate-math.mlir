// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-cpu-approximate-math))' | FileCheck %s

// A vector exp (softmax) becomes FMA polynomials in the same vector type,
// with no libm call left per lane.
// CHECK-LABEL: func.func @vector_exp
//   CHECK-NOT:   math.exp
//       CHECK:   math.fma {{.+}} : vector<8xf32>
//   CHECK-NOT:   math.exp
//       CHECK:   return {{.+}} : vector<8xf32>
func.func @vector_exp(%x: vector<8xf32>) -> vector<8xf32> {
  %0 = math.exp %x : vector<8xf32>
  return %0 : vector<8xf32>
}

// -----

// erf (GELU) and tanh (tanh-GELU) likewise.
// CHECK-LABEL: func.func @vector_erf_tanh
//   CHECK-NOT:   math.erf
//   CHECK-NOT:   math.tanh
//       CHECK:   return
func.func @vector_erf_tanh(%x: vector<4x8xf32>) -> (vector<4x8xf32>, vector<4x8xf32>) {
  %0 = math.erf %x : vector<4x8xf32>
  %1 = math.tanh %x : vector<4x8xf32>
  return %0, %1 : vector<4x8xf32>, vector<4x8xf32>
}

// -----

// Scalars (remainder loops) take the same polynomial.
// CHECK-LABEL: func.func @scalar_exp
//   CHECK-NOT:   math.exp
//       CHECK:   math.fma {{.+}} : f32
func.func @scalar_exp(%x: f32) -> f32 {
  %0 = math.exp %x : f32
  return %0 : f32
}

// -----

// f16 computes in f32 and truncates back.
// CHECK-LABEL: func.func @f16_exp
//       CHECK:   arith.extf {{.+}} : vector<8xf16> to vector<8xf32>
//   CHECK-NOT:   math.exp
//       CHECK:   arith.truncf {{.+}} : vector<8xf32> to vector<8xf16>
func.func @f16_exp(%x: vector<8xf16>) -> vector<8xf16> {
  %0 = math.exp %x : vector<8xf16>
  return %0 : vector<8xf16>
}

// -----

// Functions without an accurate approximation keep their math op (and
// become libm calls later).
// CHECK-LABEL: func.func @kept
//       CHECK:   math.powf
//       CHECK:   math.tan
func.func @kept(%x: vector<8xf32>, %y: vector<8xf32>) -> (vector<8xf32>, vector<8xf32>) {
  %0 = math.powf %x, %y : vector<8xf32>
  %1 = math.tan %x : vector<8xf32>
  return %0, %1 : vector<8xf32>, vector<8xf32>
}
