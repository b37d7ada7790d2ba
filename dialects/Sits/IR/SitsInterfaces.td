//===- SitsInterfaces.td - SITS op interfaces --------------*- tablegen -*-===//

#ifndef SITS_DIALECT_SITSINTERFACES_TD
#define SITS_DIALECT_SITSINTERFACES_TD

include "mlir/IR/OpBase.td"

def Sits_FusedEpilogueOpInterface : OpInterface<"FusedEpilogueOpInterface"> {
  let cppNamespace = "::mlir::sits";
  let description = [{
    A contraction whose single result can absorb an elementwise activation
    applied to it (its "epilogue"), so that the activation runs on values
    still in registers instead of in a second pass over memory.
  }];
  let methods = [
    InterfaceMethod<"The activation applied to the result.",
      "::mlir::sits::ActivationKind", "getActivationKind", (ins), [{}], [{
        return $_op.getActivation();
      }]>,
    InterfaceMethod<"Replaces the activation applied to the result.",
      "void", "setActivationKind", (ins "::mlir::sits::ActivationKind":$kind),
      [{}], [{
        $_op.setActivation(kind);
      }]>,
  ];
}

#endif // SITS_DIALECT_SITSINTERFACES_TD
