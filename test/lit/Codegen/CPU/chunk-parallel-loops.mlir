// RUN: sits-opt %s --split-input-file --sits-cpu-chunk-parallel-loops="num-threads=2 chunks-per-thread=2 serial-work=0" | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-cpu-chunk-parallel-loops="num-threads=1" | FileCheck %s --check-prefix=ONE

// A 2-D loop with run-time extents (rows x 16-column tiles) becomes at most
// 4 chunks of consecutive linearized iterations; each chunk recovers the
// original induction variables, last one fastest.
// CHECK-LABEL: func.func @dynamic
//  CHECK-SAME:   (%[[M:.+]]: memref<?x?xf32>, %[[R:.+]]: index, %[[C:.+]]: index)
//       CHECK:   %[[TR:.+]] = arith.maxsi %[[R]], %{{.+}}
//       CHECK:   %[[COLS:.+]] = arith.ceildivsi %[[C]], %{{.+}}
//       CHECK:   %[[TC:.+]] = arith.maxsi %[[COLS]], %{{.+}}
//       CHECK:   %[[TOTAL:.+]] = arith.muli %[[TR]], %[[TC]]
//       CHECK:   %[[C4:.+]] = arith.constant 4 : index
//       CHECK:   %[[N:.+]] = arith.minsi %[[TOTAL]], %[[C4]]
//       CHECK:   %[[SIZE:.+]] = arith.ceildivsi %[[TOTAL]], %{{.+}}
//       CHECK:   scf.parallel (%[[CH:.+]]) = (%{{.+}}) to (%[[N]]) step (%{{.+}})
//       CHECK:     %[[BEGIN:.+]] = arith.muli %[[CH]], %[[SIZE]]
//       CHECK:     %[[NEXT:.+]] = arith.addi %[[BEGIN]], %[[SIZE]]
//       CHECK:     %[[END:.+]] = arith.minsi %[[NEXT]], %[[TOTAL]]
//       CHECK:     scf.for %[[L:.+]] = %[[BEGIN]] to %[[END]] step %{{.+}} {
//       CHECK:       %[[J:.+]] = arith.remsi %[[L]], %[[TC]]
//       CHECK:       %[[I:.+]] = arith.divsi %[[L]], %[[TC]]
//       CHECK:       %[[COL:.+]] = arith.muli %[[J]], %{{.+}}
//       CHECK:       memref.store %{{.+}}, %[[M]][%[[I]], %[[COL]]]
//       CHECK:     }
//       CHECK:     scf.reduce
//
// Code for one thread keeps its loops.
// ONE-LABEL: func.func @dynamic
//       ONE:   scf.parallel (%{{.+}}, %{{.+}}) = (%{{.+}}, %{{.+}}) to (%{{.+}}, %{{.+}}) step (%{{.+}}, %{{.+}})
//   ONE-NOT:   scf.for
func.func @dynamic(%m: memref<?x?xf32>, %rows: index, %cols: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%rows, %cols) step (%c1, %c16) {
    memref.store %one, %m[%i, %j] : memref<?x?xf32>
    scf.reduce
  }
  return
}

// -----

// A loop of at most 4 static iterations already is at most 4 tasks.
// CHECK-LABEL: func.func @small
//       CHECK:   scf.parallel (%{{.+}}) = (%{{.+}}) to (%{{.+}}) step (%{{.+}})
//   CHECK-NOT:   scf.for
func.func @small(%m: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %one, %m[%i] : memref<4xf32>
    scf.reduce
  }
  return
}

// -----

// 64 static iterations from 8 in steps of 2: 4 chunks of 16, with the inner
// parallel loop left inside each chunk.
// CHECK-LABEL: func.func @static_with_nested
//   CHECK-DAG:   %[[C2:.+]] = arith.constant 2 : index
//   CHECK-DAG:   %[[C8:.+]] = arith.constant 8 : index
//   CHECK-DAG:   %[[C16:.+]] = arith.constant 16 : index
//       CHECK:   scf.parallel (%[[CH:.+]]) = (%{{.+}}) to (%{{.+}}) step (%{{.+}})
//       CHECK:     %[[BEGIN:.+]] = arith.muli %[[CH]], %[[C16]]
//       CHECK:     scf.for %[[L:.+]] = %[[BEGIN]] to %{{.+}} step %{{.+}} {
//       CHECK:       %[[SCALED:.+]] = arith.muli %[[L]], %[[C2]]
//       CHECK:       %[[I:.+]] = arith.addi %[[SCALED]], %[[C8]]
//       CHECK:       scf.parallel (%[[K:.+]]) =
//       CHECK:         memref.store %{{.+}}, %{{.+}}[%[[I]], %[[K]]]
func.func @static_with_nested(%m: memref<136x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c136 = arith.constant 136 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c8) to (%c136) step (%c2) {
    scf.parallel (%k) = (%c0) to (%c4) step (%c1) {
      memref.store %one, %m[%i, %k] : memref<136x4xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// A loop that reduces into results is left to async-parallel-for as it is.
// CHECK-LABEL: func.func @reduction
//       CHECK:   scf.parallel (%{{.+}}) = (%{{.+}}) to (%{{.+}}) step (%{{.+}}) init
//   CHECK-NOT:   scf.for
func.func @reduction(%m: memref<?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %sum = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
    %x = memref.load %m[%i] : memref<?xf32>
    scf.reduce(%x : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}
