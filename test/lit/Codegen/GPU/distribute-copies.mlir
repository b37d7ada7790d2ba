// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-distribute-copies))' --verify-diagnostics | FileCheck %s

// Each reduction step, the 64 threads copy the 32x16 tile of A (128
// vectors of 4) and the 16x32 tile of B: thread t copies vectors t, t + 64,
// ... of each, 16-byte aligned (both buffers are: row strides and offsets
// are multiples of 4 elements). One barrier before the copies (nobody still
// reads the last tiles) and one after (the tiles are there); the two copies
// share them.

// CHECK-LABEL: func.func @staged
//       CHECK:   gpu.launch
//       CHECK:     scf.for %[[K:.+]] =
//   CHECK-NOT:       linalg.copy
//       CHECK:       gpu.barrier
//       CHECK:       %[[TID:.+]] = gpu.thread_id x
//       CHECK:       scf.for %[[V:.+]] = %[[TID]] to %c128{{[_0-9]*}} step %c64{{[_0-9]*}} {
//       CHECK:         %[[E:.+]] = arith.muli %[[V]], %c4{{[_0-9]*}}
//       CHECK:         %[[IJ:.+]]:2 = affine.delinearize_index %[[E]] into (32, 16)
//       CHECK:         %[[X:.+]] = vector.load %{{.+}}[%[[IJ]]#0, %[[IJ]]#1] {alignment = 16 : i64} : memref<32x16xf32, strided<[256, 1], offset: ?>>, vector<4xf32>
//       CHECK:         vector.store %[[X]], %{{.+}}[%[[IJ]]#0, %[[IJ]]#1] {alignment = 16 : i64} : memref<32x16xf32, #gpu.address_space<workgroup>>, vector<4xf32>
//       CHECK:       }
//       CHECK:       gpu.barrier
//   CHECK-NOT:       gpu.barrier
//       CHECK:       scf.for %{{.+}} = %{{.+}} to %c128{{[_0-9]*}} step %c64{{[_0-9]*}} {
//       CHECK:         vector.load
//       CHECK:         vector.store
//       CHECK:       }
//       CHECK:       gpu.barrier
//       CHECK:       memref.load
func.func @staged(%a: memref<128x256xf32>, %b: memref<256x512xf32>, %c: memref<128x512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c64, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1)
      workgroup(%as : memref<32x16xf32, #gpu.address_space<workgroup>>, %bs : memref<16x32xf32, #gpu.address_space<workgroup>>) {
    %m = affine.apply affine_map<()[s0] -> ((s0 floordiv 16) * 32)>()[%bx]
    %n = affine.apply affine_map<()[s0] -> ((s0 mod 16) * 32)>()[%bx]
    scf.for %k = %c0 to %c256 step %c16 {
      %at = memref.subview %a[%m, %k] [32, 16] [1, 1] : memref<128x256xf32> to memref<32x16xf32, strided<[256, 1], offset: ?>>
      linalg.copy {sits_cooperative} ins(%at : memref<32x16xf32, strided<[256, 1], offset: ?>>) outs(%as : memref<32x16xf32, #gpu.address_space<workgroup>>)
      %bt = memref.subview %b[%k, %n] [16, 32] [1, 1] : memref<256x512xf32> to memref<16x32xf32, strided<[512, 1], offset: ?>>
      linalg.copy {sits_cooperative} ins(%bt : memref<16x32xf32, strided<[512, 1], offset: ?>>) outs(%bs : memref<16x32xf32, #gpu.address_space<workgroup>>)
      %x = memref.load %as[%c0, %c0] : memref<32x16xf32, #gpu.address_space<workgroup>>
      memref.store %x, %c[%m, %n] : memref<128x512xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// A row of 6 elements is copied two at a time; a source whose alignment is
// unknown (an offset that is not a known multiple of the width) one at a
// time.

// CHECK-LABEL: func.func @widths
//       CHECK:   vector.load %{{.+}} {alignment = 8 : i64} : memref<8x6xf32>, vector<2xf32>
//       CHECK:   memref.load %{{.+}} : memref<8x8xf32, strided<[16, 1], offset: ?>>
func.func @widths(%a: memref<8x6xf32>, %b: memref<8x16xf32>, %off: index) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
      workgroup(%as : memref<8x6xf32, #gpu.address_space<workgroup>>, %bs : memref<8x8xf32, #gpu.address_space<workgroup>>) {
    linalg.copy {sits_cooperative} ins(%a : memref<8x6xf32>) outs(%as : memref<8x6xf32, #gpu.address_space<workgroup>>)
    %bt = memref.subview %b[0, %off] [8, 8] [1, 1] : memref<8x16xf32> to memref<8x8xf32, strided<[16, 1], offset: ?>>
    linalg.copy {sits_cooperative} ins(%bt : memref<8x8xf32, strided<[16, 1], offset: ?>>) outs(%bs : memref<8x8xf32, #gpu.address_space<workgroup>>)
    gpu.terminator
  }
  return
}

// -----

// A copy only some threads reach would deadlock at its barriers.

func.func @predicated(%a: memref<8x8xf32>, %p: i1) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
      workgroup(%as : memref<8x8xf32, #gpu.address_space<workgroup>>) {
    scf.if %p {
      // expected-error @below {{a cooperative copy runs on some threads of the block only}}
      linalg.copy {sits_cooperative} ins(%a : memref<8x8xf32>) outs(%as : memref<8x8xf32, #gpu.address_space<workgroup>>)
    }
    gpu.terminator
  }
  return
}
