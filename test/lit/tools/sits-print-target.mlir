// The known-target table from sits-opt: the module's target, a named one,
// or all of them. Unknown names are an error listing the known ones.
//
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target)' -o /dev/null | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=sm_70})' -o /dev/null | FileCheck %s --check-prefix=V100
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=all})' -o /dev/null | FileCheck %s --check-prefix=ALL
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=avx2})' -o /dev/null | FileCheck %s --check-prefix=V3
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=x86-64-v4})' -o /dev/null | FileCheck %s --check-prefix=V4
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=aarch64})' -o /dev/null | FileCheck %s --check-prefix=ARM
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=cpu})' -o /dev/null | FileCheck %s --check-prefix=HOST
// RUN: not sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=tpu9})' -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN

//      CHECK: target: h200
// CHECK-NEXT:   aliases: h200-sxm
// CHECK-NEXT:   vendor: nvidia
// CHECK-NEXT:   architecture: Hopper
// CHECK-NEXT:   triple: nvptx64-nvidia-cuda
// CHECK-NEXT:   chip: sm_90
// CHECK-NEXT:   compute_units: 132
// CHECK-NEXT:   simd_width: 32
// CHECK-NEXT:   memory_gb: 141
// CHECK-NEXT:   memory_bandwidth_gbs: 4800
// CHECK-NEXT:   last_level_cache_mb: 50
// CHECK-NEXT:   shared_memory_per_unit_kb: 228
// CHECK-NEXT:   peak_fp32_tflops: 67
// CHECK-NEXT:   peak_fp16_tflops: 989
// CHECK-NEXT:   peak_bf16_tflops: 989
// CHECK-NEXT:   peak_fp8_tflops: 1979
// CHECK-NEXT:   peak_int8_tops: 1979
// CHECK-NEXT:   fp8_e4m3: yes
// CHECK-NEXT:   fp8_e5m2: yes

// V100: target: v100
// V100:   peak_bf16_tflops: 0
// V100:   fp8_e4m3: no

//      ALL: target: h100
//      ALL: target: h200
//      ALL: target: a100
//      ALL: target: v100
//      ALL: target: mi300x
//      ALL: target: x86-64{{$}}
//      ALL: target: x86-64-v2
//      ALL: target: x86-64-v3
//      ALL: target: x86-64-v4
//      ALL: target: aarch64
//      ALL: target: cpu
//  ALL-NOT: target:

// The named CPU instruction-set levels: LLVM's features of each level, the
// vector width and register file the CPU tiling plans for, and no machine
// figures (their code is tiled for the compiling machine's cores).
//      V3: target: x86-64-v3
// V3-NEXT:   aliases: avx2
// V3-NEXT:   vendor: cpu
// V3-NEXT:   architecture: x86-64-v3 (AVX2, FMA)
// V3-NEXT:   triple: x86_64-unknown-linux-gnu
// V3-NEXT:   chip: x86-64-v3
// V3-NEXT:   isa_level: x86-64-v3
// V3-NEXT:   features: +avx2,+bmi,+bmi2,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fxsr,+lzcnt,+mmx,+movbe,+popcnt,+sahf,+sse,+sse2,+sse4.2,+xsave{{$}}
// V3-NEXT:   compute_units: 0
// V3-NEXT:   simd_width: 8
// V3-NEXT:   vector_registers: 16
// V3-NEXT:   memory_gb: 0

//      V4: target: x86-64-v4
//      V4:   features: +avx2,+avx512bw,+avx512cd,+avx512dq,+avx512vl,+bmi,+bmi2,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fxsr,+lzcnt,+mmx,+movbe,+popcnt,+sahf,+sse,+sse2,+sse4.2,+xsave{{$}}
//      V4:   simd_width: 16
// V4-NEXT:   vector_registers: 32

//      ARM: target: aarch64
//      ARM:   triple: aarch64-unknown-linux-gnu
// ARM-NEXT:   chip: generic
// ARM-NEXT:   isa_level: aarch64
// ARM-NEXT:   features: +fp-armv8,+neon
//      ARM:   simd_width: 4
// ARM-NEXT:   vector_registers: 32

// `cpu` is this machine with its exact features, and names the named level
// they include (which one depends on the machine).
//      HOST: target: cpu
// HOST-NEXT:   aliases: host, native
// HOST-NEXT:   vendor: cpu
//      HOST:   isa_level: {{x86-64|x86-64-v2|x86-64-v3|x86-64-v4|aarch64|none}}{{$}}

// UNKNOWN: error: unknown target 'tpu9'; known targets: h100, h200, a100, v100, mi300x, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, aarch64, cpu
module attributes {sits.target = #sits.target<"h200">} {}
