// Diagnostics of sits-reorder: bad options are errors on the module; a
// schedule that does not fit the target's memory is applied with a warning.
//
// RUN: not sits-opt %s --pass-pipeline='builtin.module(sits-reorder{target=tpu9})' 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not sits-opt %s --pass-pipeline='builtin.module(sits-reorder{profile=fast})' 2>&1 | FileCheck %s --check-prefix=PROFILE
// RUN: not sits-opt %s --pass-pipeline='builtin.module(sits-reorder{memory-limit=-1})' 2>&1 | FileCheck %s --check-prefix=LIMIT
// RUN: not sits-opt %s --pass-pipeline='builtin.module(sits-reorder{schedule-file=%t.missing/dir/x.sits})' 2>&1 | FileCheck %s --check-prefix=FILE
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-reorder{memory-limit=4096})' --verify-diagnostics -o /dev/null
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-reorder{target=a100 memory-limit=4096})' -o /dev/null 2>&1 | FileCheck %s --check-prefix=A100

// TARGET: error: unknown target 'tpu9'; known targets: h100, h200, a100, v100, mi300x, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, aarch64, cpu
// PROFILE: error: profile must be 'latency' or 'memory', got 'fast'
// LIMIT: error: memory-limit must be non-negative, got -1
// FILE: error: cannot write the schedule file: {{.*}}x.sits

// 2 x 4 KiB of activations plus 16 KiB of weights in 4 KiB.
// A100: warning: peak live memory of 8192 bytes plus 16384 bytes of weights exceeds the 4096 bytes of memory of target 'a100'
module {
  // expected-warning @+1 {{peak live memory of 8192 bytes plus 16384 bytes of weights exceeds the 4096 bytes of memory of target 'cpu'}}
  func.func @main(%x: tensor<16x64xf32>) -> tensor<16x64xf32> {
    %w = arith.constant dense<0.5> : tensor<64x64xf32>
    %h = sits.matmul %x, %w : (tensor<16x64xf32>, tensor<64x64xf32>) -> tensor<16x64xf32>
    %y = sits.softmax %h : tensor<16x64xf32>
    return %y : tensor<16x64xf32>
  }
}
