//===- Passes.td - SITS graph-level passes -----------------*- tablegen -*-===//

#ifndef SITS_PASSES_TRANSFORMS_PASSES_TD
#define SITS_PASSES_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

// Op-agnostic: the rewrite is local to one producer/consumer pair, so the pass
// runs on whatever op it is scheduled on (a module or a single function).
def SitsFuseEpilogue : Pass<"sits-fuse-epilogue"> {
  let summary = "Fold activations into the epilogue of their producing contraction";
  let description = [{
    Rewrites `sits.activation` applied to the only use of a `sits.matmul`,
    `sits.conv` or `sits.qmatmul` result into that op's `activation`
    epilogue, so the activation is computed while the contraction's output
    is still in registers instead of in a second pass over memory.

    A contraction that already has an activation, or whose result has other
    users, is left alone: fusing would change what the other users see.

    Before:
    ```mlir
    %0 = sits.matmul %x, %w bias(%b) : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    %1 = sits.activation <gelu> %0 : tensor<8x4096xf32>
    ```

    After:
    ```mlir
    %1 = sits.matmul %x, %w bias(%b) {activation = #sits.activation<gelu>} : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    ```
  }];
  let dependentDialects = ["::mlir::sits::SitsDialect"];
  let statistics = [
    Statistic<"numFused", "num-fused",
              "Number of activations fused into a contraction">,
  ];
}

def SitsFoldWeightTransposes : Pass<"sits-fold-weight-transposes"> {
  let summary = "Store transposed constant weights already transposed";
  let description = [{
    ONNX models multiply by `W^T` with W constant (`Gemm transB=1`, a
    `MatMul` after a `Transpose`, every PyTorch `Linear`). A
    `sits.matmul {transpose_rhs}` whose rhs is a constant used nowhere else
    gets a transposed copy of the constant instead, computed once at compile
    time, and loses the flag: the kernel then streams the weight along its
    rows, and the original constant is dropped.

    ```mlir
    // Before
    %w = arith.constant dense_resource<fc1.weight> : tensor<4096x1024xf32>
    %y = sits.matmul %x, %w {transpose_rhs} : (tensor<8x1024xf32>, tensor<4096x1024xf32>) -> tensor<8x4096xf32>
    // After
    %w = arith.constant dense_resource<fc1.weight.t> : tensor<1024x4096xf32>
    %y = sits.matmul %x, %w : (tensor<8x1024xf32>, tensor<1024x4096xf32>) -> tensor<8x4096xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numFolded", "num-folded", "Constant weights stored transposed">,
  ];
}

def SitsExternalizeWeights
    : Pass<"sits-externalize-weights", "::mlir::ModuleOp"> {
  let summary = "Read large constants from a weights buffer instead of code";
  let description = [{
    After bufferization, every `memref.get_global` of a constant global of at
    least `min-bytes` bytes in a public function becomes a `memref.view` into
    a new leading function argument `%weights: memref<?xi8>`, at an offset
    aligned to 64 bytes. The module records the layout in the
    `sits.weights` attribute (an array of `{name, offset, value}`, `value`
    being the constant itself) and the globals are erased.

    The compiled code then stays as small as the graph, while the weights
    go into their own section of the artifact, which the runtime maps and
    passes in; `sitsSerializeWeights` (C API) writes that section from the
    `sits.weights` attribute.

    ```mlir
    // Before
    memref.global "private" constant @w : memref<1024x4096xf32> = dense_resource<fc1.weight>
    func.func @main(%x: memref<8x1024xf32>, %y: memref<8x4096xf32>) {
      %w = memref.get_global @w : memref<1024x4096xf32>
    // After (the module's sits.weights records name "w" at offset 0 with
    // its value)
      func.func @main(%weights: memref<?xi8>, %x: memref<8x1024xf32>, %y: memref<8x4096xf32>) {
        %c0 = arith.constant 0 : index
        %w = memref.view %weights[%c0][] : memref<?xi8> to memref<1024x4096xf32>
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"minBytes", "min-bytes", "int64_t", /*default=*/"4096",
           "Smallest constant moved to the weights buffer">,
  ];
  let statistics = [
    Statistic<"numWeights", "num-weights", "Constants moved to the weights buffer">,
    Statistic<"numBytes", "num-bytes", "Bytes in the weights buffer">,
  ];
}

#endif // SITS_PASSES_TRANSFORMS_PASSES_TD
