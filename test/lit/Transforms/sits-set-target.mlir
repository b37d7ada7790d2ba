// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-set-target{target=avx2})' | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-set-target{target=H100})' | FileCheck %s --check-prefix=GPU
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-set-target)' | FileCheck %s --check-prefix=HOST
// RUN: not sits-opt %s --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v9})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// sits-set-target replaces the module's target with the one named, stored
// under its canonical name (an alias such as `avx2` names x86-64-v3), so a
// pipeline that starts with it compiles for the same target on any machine.
// The default is the host, `cpu`.

// CHECK: module attributes {sits.target = #sits.target<"x86-64-v3">}
// GPU: module attributes {sits.target = #sits.target<"h100">}
// HOST: module attributes {sits.target = #sits.target<"cpu">}

// An unknown name is an error at the module, listing the known targets.
// UNKNOWN: sits-set-target.mlir:[[# @LINE + 1]]:1: error: unknown target 'x86-64-v9'; known targets: h100, h200, a100, v100, mi300x, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, aarch64, cpu
module attributes {sits.target = #sits.target<"aarch64">} {
  func.func @f() {
    return
  }
}
