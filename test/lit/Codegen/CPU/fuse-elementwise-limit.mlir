// A chain of 300 elementwise generics (one op each) fuses into loops of at
// most 256 operations, not one: two generics holding all 300 products.
//
// RUN: %python %S/Inputs/elementwise_chain.py 300 > %t.mlir
// RUN: sits-opt %t.mlir --pass-pipeline='builtin.module(func.func(sits-cpu-fuse-elementwise))' > %t.out
// RUN: FileCheck %s < %t.out
// RUN: grep -c arith.mulf %t.out | FileCheck %s --check-prefix=COUNT

// CHECK-LABEL: func.func @chain
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:     linalg.generic
// COUNT: 300
