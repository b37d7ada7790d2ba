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

#endif // SITS_PASSES_TRANSFORMS_PASSES_TD
