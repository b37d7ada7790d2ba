// sits-opt registers the SITS dialect next to the upstream ones the graph
// is written with (arith, func, linalg, math, tensor) and the GPU ones
// (gpu, llvm, nvvm, rocdl).
//
// RUN: sits-opt --show-dialects | FileCheck %s

// CHECK: Available Dialects:
// CHECK-SAME: arith
// CHECK-SAME: func
// CHECK-SAME: gpu
// CHECK-SAME: linalg
// CHECK-SAME: llvm
// CHECK-SAME: math
// CHECK-SAME: nvvm
// CHECK-SAME: rocdl
// CHECK-SAME: ,sits,
// CHECK-SAME: tensor
