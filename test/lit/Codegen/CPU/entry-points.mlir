// RUN: sits-opt %s --sits-cpu-mark-entry-points | FileCheck %s --check-prefix=MARK
// RUN: sits-opt %s --sits-cpu-mark-entry-points --convert-func-to-llvm --sits-cpu-pack-entry-points | FileCheck %s --check-prefix=PACK

// Public functions get a C interface; private helpers do not.
// MARK-LABEL: func.func @main
//  MARK-SAME:   attributes {llvm.emit_c_interface}
// MARK-LABEL: func.func private @helper
//   MARK-NOT:   llvm.emit_c_interface

// The packed entry point loads one descriptor pointer per argument from
// args[i] and calls the C interface with them.
//       PACK: llvm.func @sits_entry_main(%[[ARGS:.+]]: !llvm.ptr)
//       PACK:   %[[P0:.+]] = llvm.getelementptr %[[ARGS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
//       PACK:   %[[D0:.+]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
//       PACK:   %[[P1:.+]] = llvm.getelementptr %[[ARGS]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
//       PACK:   %[[D1:.+]] = llvm.load %[[P1]] : !llvm.ptr -> !llvm.ptr
//       PACK:   llvm.call @_mlir_ciface_main(%[[D0]], %[[D1]]) : (!llvm.ptr, !llvm.ptr) -> ()
//   PACK-NOT: @sits_entry_helper
func.func @main(%in: memref<4xf32>, %out: memref<4xf32>) {
  call @helper(%in, %out) : (memref<4xf32>, memref<4xf32>) -> ()
  return
}
func.func private @helper(%in: memref<4xf32>, %out: memref<4xf32>) {
  memref.copy %in, %out : memref<4xf32> to memref<4xf32>
  return
}
