// RUN: sits-opt %s --sits-cpu-mark-entry-points --convert-func-to-llvm --sits-cpu-pack-entry-points --verify-diagnostics

// Results must have been turned into out-params first.
// expected-error @+1 {{entry point 'main' must take only memrefs and return nothing; run buffer-results-to-out-params first}}
func.func @main(%in: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %v = memref.load %in[%c0] : memref<4xf32>
  return %v : f32
}
