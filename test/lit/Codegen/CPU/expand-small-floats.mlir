// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v4},func.func(sits-cpu-expand-small-floats))' | FileCheck %s
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v4},func.func(sits-cpu-expand-small-floats),convert-to-llvm)' | FileCheck %s --check-prefix=LLVM

// fp8 -> f32 decodes the byte: subnormals through uitofp and a scale,
// normals by assembling f32 bits, NaN (E4M3FN: all-ones magnitude) last.
// The code stays in the operand's vector shape.
// CHECK-LABEL: func.func @extf_e4m3fn
//   CHECK-DAG:   arith.constant dense<0.001953125> : vector<8xf32>
//   CHECK-DAG:   arith.constant dense<2143289344> : vector<8xi32>
//   CHECK-NOT:   arith.extf
//       CHECK:   arith.bitcast %{{.+}} : vector<8xf8E4M3FN> to vector<8xi8>
//       CHECK:   arith.extui %{{.+}} : vector<8xi8> to vector<8xi32>
//       CHECK:   arith.uitofp
//       CHECK:   arith.bitcast %{{.+}} : vector<8xi32> to vector<8xf32>
//   CHECK-NOT:   arith.extf
// LLVM-LABEL: llvm.func @extf_e4m3fn
//  LLVM-NOT:   builtin.unrealized_conversion_cast
func.func @extf_e4m3fn(%x: vector<8xf8E4M3FN>) -> vector<8xf32> {
  %0 = arith.extf %x : vector<8xf8E4M3FN> to vector<8xf32>
  return %0 : vector<8xf32>
}

// -----

// E5M2 has infinities: exponent all ones with a zero mantissa.
// CHECK-LABEL: func.func @extf_e5m2_to_f16
//       CHECK:   arith.constant 2139095040 : i32
//       CHECK:   arith.truncf %{{.+}} : f32 to f16
func.func @extf_e5m2_to_f16(%x: f8E5M2) -> f16 {
  %0 = arith.extf %x : f8E5M2 to f16
  return %0 : f16
}

// -----

// f32 -> fp8 rounds to nearest even in integer arithmetic (normal results)
// or by scaling and roundeven (subnormal results); E4M3FN has no infinity,
// so overflow gives NaN (0x7F).
// CHECK-LABEL: func.func @truncf_e4m3fn
//   CHECK-DAG:   arith.constant dense<126> : vector<4xi32>
//   CHECK-DAG:   arith.constant dense<127> : vector<4xi32>
//   CHECK-NOT:   arith.truncf
//       CHECK:   math.roundeven %{{.+}} : vector<4xf32>
//       CHECK:   arith.trunci %{{.+}} : vector<4xi32> to vector<4xi8>
//       CHECK:   arith.bitcast %{{.+}} : vector<4xi8> to vector<4xf8E4M3FN>
// LLVM-LABEL: llvm.func @truncf_e4m3fn
//      LLVM:   llvm.intr.roundeven
func.func @truncf_e4m3fn(%x: vector<4xf32>) -> vector<4xf8E4M3FN> {
  %0 = arith.truncf %x : vector<4xf32> to vector<4xf8E4M3FN>
  return %0 : vector<4xf8E4M3FN>
}

// -----

// The FNUZ formats encode NaN as negative zero (0x80): a zero result drops
// its sign. f16 sources widen to f32 first (exactly).
// CHECK-LABEL: func.func @truncf_e5m2fnuz_from_f16
//   CHECK-DAG:   arith.constant 128 : i32
//       CHECK:   arith.extf %{{.+}} : f16 to f32
//       CHECK:   arith.bitcast %{{.+}} : i8 to f8E5M2FNUZ
func.func @truncf_e5m2fnuz_from_f16(%x: f16) -> f8E5M2FNUZ {
  %0 = arith.truncf %x : f16 to f8E5M2FNUZ
  return %0 : f8E5M2FNUZ
}

// -----

// fp4 (E2M1FN) has neither infinity nor NaN: overflow saturates to 6.0
// (code 7) and the result is 4 bits wide. Conversions between wider floats
// are left to LLVM.
// CHECK-LABEL: func.func @others
//   CHECK-DAG:   arith.constant 7 : i32
//   CHECK-NOT:   arith.truncf %{{.+}} : f32 to f4E2M1FN
//       CHECK:   arith.trunci %{{.+}} : i32 to i4
//       CHECK:   arith.bitcast %{{.+}} : i4 to f4E2M1FN
//       CHECK:   arith.truncf %{{.+}} : f32 to f16
func.func @others(%x: f32, %y: f4E2M1FN) -> (f4E2M1FN, f16, f32) {
  %0 = arith.truncf %x : f32 to f4E2M1FN
  %1 = arith.truncf %x : f32 to f16
  %2 = arith.extf %y : f4E2M1FN to f32
  return %0, %1, %2 : f4E2M1FN, f16, f32
}

// -----

// f32 -> bf16 without AVX-512 BF16 (none of the named x86 levels has it):
// integer code rounding to nearest even (add 0x7fff plus the kept lsb, keep
// the high half), NaN to the quiet NaN 0x7fc0, so LLVM never calls
// __truncsfbf2.
// CHECK-LABEL: func.func @truncf_bf16
//   CHECK-DAG:   %[[NAN:.+]] = arith.constant dense<32704> : vector<8xi16>
//   CHECK-DAG:   %[[HALF:.+]] = arith.constant dense<32767> : vector<8xi32>
//       CHECK:   %[[ISNAN:.+]] = arith.cmpf une, %[[X:.+]], %[[X]] : vector<8xf32>
//       CHECK:   arith.addi %{{.+}}, %[[HALF]] : vector<8xi32>
//       CHECK:   %[[HIGH:.+]] = arith.trunci %{{.+}} : vector<8xi32> to vector<8xi16>
//       CHECK:   %[[BITS:.+]] = arith.select %[[ISNAN]], %[[NAN]], %[[HIGH]]
//       CHECK:   arith.bitcast %[[BITS]] : vector<8xi16> to vector<8xbf16>
//   CHECK-NOT:   arith.truncf
// LLVM-LABEL: llvm.func @truncf_bf16
//   LLVM-NOT:   llvm.fptrunc
func.func @truncf_bf16(%x: vector<8xf32>) -> vector<8xbf16> {
  %0 = arith.truncf %x : vector<8xf32> to vector<8xbf16>
  return %0 : vector<8xbf16>
}

// -----

// bf16 arithmetic: LLVM would compute it in f32 and round each result with
// __truncsfbf2, so it becomes f32 arithmetic rounded by the integer code
// above. The conversions between two ops carry `contract` and fold away: a
// chain of elementwise ops rounds once, at its end.
// CHECK-LABEL: func.func @arith_bf16
//       CHECK:   %[[B:.+]] = arith.bitcast %{{.+}} : vector<8xi32> to vector<8xf32>
//       CHECK:   %[[A:.+]] = arith.bitcast %{{.+}} : vector<8xi32> to vector<8xf32>
//       CHECK:   %[[SUM:.+]] = arith.addf %[[A]], %[[B]] : vector<8xf32>
//       CHECK:   %[[MAX:.+]] = arith.maximumf %[[SUM]], %[[A]] : vector<8xf32>
//       CHECK:   arith.cmpf une, %[[MAX]], %[[MAX]] : vector<8xf32>
//       CHECK:   arith.bitcast %{{.+}} : vector<8xi16> to vector<8xbf16>
//   CHECK-NOT:   arith.truncf
// LLVM-LABEL: llvm.func @arith_bf16
//   LLVM-NOT:   llvm.fptrunc
//   LLVM-NOT:   llvm.f{{add|sub|mul|div}} {{.+}} : vector<8xbf16>
//   LLVM-NOT:   llvm.intr.maximum({{.+}}) : (vector<8xbf16>
//       LLVM:   llvm.return
func.func @arith_bf16(%x: vector<8xbf16>, %y: vector<8xbf16>) -> vector<8xbf16> {
  %0 = arith.addf %x, %y : vector<8xbf16>
  %1 = arith.maximumf %0, %x : vector<8xbf16>
  return %1 : vector<8xbf16>
}
