//===- SitsAttrs.td - SITS attributes and enums ------------*- tablegen -*-===//

#ifndef SITS_DIALECT_SITSATTRS_TD
#define SITS_DIALECT_SITSATTRS_TD

include "dialects/Sits/IR/SitsBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/TensorEncoding.td"

//===----------------------------------------------------------------------===//
// Activation functions
//===----------------------------------------------------------------------===//

def Sits_ActivationKind : I32EnumAttr<"ActivationKind",
    "elementwise activation function", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Relu", 1, "relu">,
      I32EnumAttrCase<"Gelu", 2, "gelu">,
      I32EnumAttrCase<"GeluTanh", 3, "gelu_tanh">,
      I32EnumAttrCase<"Silu", 4, "silu">,
      I32EnumAttrCase<"Sigmoid", 5, "sigmoid">,
      I32EnumAttrCase<"Tanh", 6, "tanh">
    ]> {
  let cppNamespace = "::mlir::sits";
  let genSpecializedAttr = 0;
}

def Sits_ActivationAttr : EnumAttr<Sits_Dialect, Sits_ActivationKind,
                                   "activation"> {
  let summary = "An elementwise activation function";
  let description = [{
    Names an activation: `none` (identity), `relu`, `gelu` (exact, with
    `erf`), `gelu_tanh` (the tanh approximation), `silu` (x·sigmoid(x)),
    `sigmoid` or `tanh`. Used by `sits.activation` and as the epilogue of
    contractions.
  }];
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Packed low-bit storage
//===----------------------------------------------------------------------===//

def Sits_PackedEncodingAttr : Sits_Attr<"PackedEncoding", "packed",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let summary = "Tensor encoding: low-bit elements packed into storage words";
  let description = [{
    A tensor encoding saying that the tensor's logical elements (e.g. `i4`)
    are stored packed, `storage.width / element.width` of them per `storage`
    word, consecutive along dimension `axis`, the first element in the least
    significant bits (the layout of ONNX INT4 and of GPTQ/AWQ checkpoints).

    The logical shape and element type stay those of the tensor, so graph
    passes reason about `K x N` weights of `i4`, while lowering knows the
    bytes hold `K x N/2` words of `i8`.

    ```mlir
    tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 1>>
    ```

    The element type must be an integer or float narrower than `storage`
    whose width divides it, and a static extent along `axis` must be a
    multiple of the packing factor.
  }];
  let parameters = (ins "::mlir::IntegerType":$storage, "int64_t":$axis);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// How many logical elements one storage word holds.
    int64_t getPackingFactor(::mlir::Type elementType) const;
  }];
}

//===----------------------------------------------------------------------===//
// Compilation target
//===----------------------------------------------------------------------===//

def Sits_TargetAttr : Sits_Attr<"Target", "target"> {
  let summary = "The hardware a module is compiled for";
  let description = [{
    Names a known target or one of its aliases: `h100` (`h100-sxm`, `sm_90`,
    `sm_90a`), `h200`, `a100` (`a100-sxm-80gb`, `sm_80`), `v100` (`v100-sxm2`,
    `sm_70`), `mi300x` (`gfx942`) or `cpu` (`host`). Passes that need hardware
    facts (compute units, bandwidth, peak throughput per dtype, supported
    low-precision formats) read them from the known-target table through
    this attribute; the figures live in that table only.

    ```mlir
    module attributes {sits.target = #sits.target<"a100">} {}
    ```
  }];
  let parameters = (ins StringRefParameter<"target name or alias">:$name);
  let assemblyFormat = "`<` $name `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The known-target table entry this attribute names (never null for a
    /// verified attribute).
    const ::mlir::sits::target::TargetInfo *getInfo() const;
  }];
}

#endif // SITS_DIALECT_SITSATTRS_TD
