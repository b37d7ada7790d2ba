// RUN: sits-opt %s --split-input-file --sits-cpu-bool-memory | FileCheck %s

// A bool element is one byte at aligned pointer + offset + index * stride.
// CHECK-LABEL: func.func @copy_bool
//  CHECK-SAME:   (%[[A:.+]]: memref<?xi1, strided<[?], offset: ?>>, %[[B:.+]]: memref<4xi1>, %[[I:.+]]: index)
//       CHECK:   %[[BASE:.+]], %[[OFF:.+]], %{{.+}}, %[[STRIDE:.+]] = memref.extract_strided_metadata %[[A]]
//       CHECK:   %[[SCALED:.+]] = arith.muli %[[I]], %[[STRIDE]]
//       CHECK:   %[[LIN:.+]] = arith.addi %[[OFF]], %[[SCALED]]
//       CHECK:   %[[PTR:.+]] = memref.extract_aligned_pointer_as_index %[[A]]
//       CHECK:   %[[ADDR:.+]] = arith.addi %[[PTR]], %[[LIN]]
//       CHECK:   %[[P:.+]] = llvm.inttoptr %{{.+}} : i64 to !llvm.ptr
//       CHECK:   %[[BYTE:.+]] = llvm.load %[[P]] : !llvm.ptr -> i8
//       CHECK:   %[[BIT:.+]] = arith.cmpi ne, %[[BYTE]], %{{.+}} : i8
//       CHECK:   %[[EXT:.+]] = arith.extui %[[BIT]] : i1 to i8
//       CHECK:   llvm.store %[[EXT]], %{{.+}} : i8, !llvm.ptr
//   CHECK-NOT:   memref.load
//   CHECK-NOT:   memref.store
func.func @copy_bool(%a: memref<?xi1, strided<[?], offset: ?>>, %b: memref<4xi1>, %i: index) {
  %v = memref.load %a[%i] : memref<?xi1, strided<[?], offset: ?>>
  memref.store %v, %b[%i] : memref<4xi1>
  return
}

// -----

// Other element types are left to the memref lowering.
// CHECK-LABEL: func.func @bytes_untouched
//       CHECK:   memref.load
//       CHECK:   memref.store
func.func @bytes_untouched(%a: memref<4xi8>, %i: index) {
  %v = memref.load %a[%i] : memref<4xi8>
  memref.store %v, %a[%i] : memref<4xi8>
  return
}

// -----

// i4 and f4 buffers hold one element per byte too (ml_dtypes' layout): a
// load truncates the byte, a store zero-extends the bits.
// CHECK-LABEL: func.func @sub_byte
//       CHECK:   %[[B4:.+]] = llvm.load %{{.+}} : !llvm.ptr -> i8
//       CHECK:   %[[V4:.+]] = arith.trunci %[[B4]] : i8 to i4
//       CHECK:   %[[S4:.+]] = arith.extui %[[V4]] : i4 to i8
//       CHECK:   llvm.store %[[S4]], %{{.+}} : i8, !llvm.ptr
//       CHECK:   %[[BF:.+]] = llvm.load %{{.+}} : !llvm.ptr -> i8
//       CHECK:   %[[TF:.+]] = arith.trunci %[[BF]] : i8 to i4
//       CHECK:   %[[F:.+]] = arith.bitcast %[[TF]] : i4 to f4E2M1FN
//       CHECK:   %[[FB:.+]] = arith.bitcast %[[F]] : f4E2M1FN to i4
//       CHECK:   arith.extui %[[FB]] : i4 to i8
//   CHECK-NOT:   memref.load
//   CHECK-NOT:   memref.store
func.func @sub_byte(%a: memref<4xi4>, %f: memref<4xf4E2M1FN>, %i: index) {
  %v = memref.load %a[%i] : memref<4xi4>
  memref.store %v, %a[%i] : memref<4xi4>
  %w = memref.load %f[%i] : memref<4xf4E2M1FN>
  memref.store %w, %f[%i] : memref<4xf4E2M1FN>
  return
}
