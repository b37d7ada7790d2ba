// sits-opt registers the SITS passes (with their statistics) next to the
// upstream ones.
//
// RUN: sits-opt --help | FileCheck %s
// RUN: sits-opt --help-hidden | FileCheck %s --check-prefix=UPSTREAM

// CHECK: --sits-fuse-epilogue
// CHECK-SAME: Fold activations into the epilogue of their producing contraction

// UPSTREAM-DAG: --canonicalize
// UPSTREAM-DAG: --gpu-module-to-binary
// UPSTREAM-DAG: --nvvm-attach-target
// UPSTREAM-DAG: --convert-gpu-to-nvvm
