// The known-target table from sits-opt: the module's target, a named one,
// or all of them. Unknown names are an error listing the known ones.
//
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target)' -o /dev/null | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=sm_70})' -o /dev/null | FileCheck %s --check-prefix=V100
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-print-target{target=all})' -o /dev/null | FileCheck %s --check-prefix=ALL
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

// ALL-COUNT-6: target: {{h100|h200|a100|v100|mi300x|cpu}}

// UNKNOWN: error: unknown target 'tpu9'; known targets: h100, h200, a100, v100, mi300x, cpu
module attributes {sits.target = #sits.target<"h200">} {}
