//===- SitsBase.td - SITS dialect definition ---------------*- tablegen -*-===//
//
// The SITS dialect holds a neural network at graph level: the ops that the
// graph passes (pruning, mixed-precision fusion, topology-aware reordering)
// need to see whole. Everything upstream dialects already say (elementwise
// arithmetic, reshapes, concatenation, constants) stays in arith/tensor/linalg.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECT_SITSBASE_TD
#define SITS_DIALECT_SITSBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Sits_Dialect : Dialect {
  let name = "sits";
  let cppNamespace = "::mlir::sits";
  let summary = "Graph-level operations of the SITS inference compiler";
  let description = [{
    The `sits` dialect models an inference graph at the level where whole-model
    decisions are made: which weights to prune, which precision each weight
    block gets, which ops fuse and in which order they run on a given piece of
    hardware.

    It has one op per computation whose *semantics* a graph pass needs:
    contractions with fused epilogues (`sits.matmul`, `sits.conv`,
    `sits.qmatmul`), attention (`sits.attention`), normalizations
    (`sits.layer_norm`, `sits.rms_norm`), `sits.softmax`, activations
    (`sits.activation`) and quantization (`sits.quantize`,
    `sits.dequantize`). Everything else a model needs is written with upstream
    dialects: `arith` and `math` on tensors for elementwise math, `tensor` for
    shapes and concatenation, `linalg` for broadcasts and transposes.

    Two attributes carry facts about data and hardware:

    * `#sits.packed<...>` is a tensor encoding for low-bit weights packed
      several to a storage word;
    * `#sits.target<"h100">` names the hardware a module is compiled for; it
      is attached to the module as the `sits.target` attribute and resolved
      against the known-target table.

    ```mlir
    module attributes {sits.target = #sits.target<"h100">} {
      func.func @mlp(%x: tensor<8x1024xf32>, %w: tensor<1024x4096xf32>,
                     %b: tensor<4096xf32>) -> tensor<8x4096xf32> {
        %y = sits.matmul %x, %w bias(%b) {activation = #sits.activation<gelu>}
            : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>)
            -> tensor<8x4096xf32>
        return %y : tensor<8x4096xf32>
      }
    }
    ```
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Name of the module attribute naming the compilation target.
    static constexpr ::llvm::StringLiteral getTargetAttrName() {
      return ::llvm::StringLiteral("sits.target");
    }
    /// Name of the module attribute laying out the weights buffer (written
    /// by sits-externalize-weights).
    static constexpr ::llvm::StringLiteral getWeightsAttrName() {
      return ::llvm::StringLiteral("sits.weights");
    }
    /// Name of the module attribute giving how many leading bytes of the
    /// weights buffer are already at their place in the artifact file.
    static constexpr ::llvm::StringLiteral getWeightsPlacedAttrName() {
      return ::llvm::StringLiteral("sits.weights_placed");
    }

  private:
    void registerAttributes();
  public:
  }];
}

class Sits_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sits_Dialect, mnemonic, traits>;

class Sits_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Sits_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // SITS_DIALECT_SITSBASE_TD
