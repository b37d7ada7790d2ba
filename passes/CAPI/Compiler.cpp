//===- Compiler.cpp - C API of SITS code emission -------------------------===//

#include "passes/CAPI/Compiler.h"

#include "passes/Targets/LLVMObject.h"
#include "passes/Transforms/ConstantData.h"
#include "passes/Transforms/Passes.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"

using namespace mlir;

static sits::LLVMObjectOptions unwrapOptions(SitsLLVMObjectOptions options) {
  sits::LLVMObjectOptions result;
  result.triple = unwrap(options.triple).str();
  result.cpu = unwrap(options.cpu).str();
  result.features = unwrap(options.features).str();
  result.optLevel = options.optLevel < 0 ? 0u : unsigned(options.optLevel);
  result.jobs = options.jobs < 0 ? 0u : unsigned(options.jobs);
  return result;
}

MlirLogicalResult sitsEmitLLVMObject(MlirOperation module,
                                     SitsLLVMObjectOptions options,
                                     MlirStringCallback callback,
                                     void *userData) {
  FailureOr<std::string> object =
      sits::emitLLVMObject(unwrap(module), unwrapOptions(options));
  if (failed(object))
    return mlirLogicalResultFailure();
  callback(mlirStringRefCreate(object->data(), object->size()), userData);
  return mlirLogicalResultSuccess();
}

MlirLogicalResult sitsEmitLLVMObjects(MlirOperation module,
                                      SitsLLVMObjectOptions options,
                                      MlirStringCallback callback,
                                      void *userData) {
  FailureOr<SmallVector<std::string>> objects =
      sits::emitLLVMObjects(unwrap(module), unwrapOptions(options));
  if (failed(objects))
    return mlirLogicalResultFailure();
  for (const std::string &object : *objects)
    callback(mlirStringRefCreate(object.data(), object.size()), userData);
  return mlirLogicalResultSuccess();
}

MlirLogicalResult sitsEmitOptimizedLLVMIR(MlirOperation module,
                                          SitsLLVMObjectOptions options,
                                          MlirStringCallback callback,
                                          void *userData) {
  FailureOr<std::string> ir =
      sits::emitOptimizedLLVMIR(unwrap(module), unwrapOptions(options));
  if (failed(ir))
    return mlirLogicalResultFailure();
  callback(mlirStringRefCreate(ir->data(), ir->size()), userData);
  return mlirLogicalResultSuccess();
}

void sitsSetWeightFile(MlirContext context, int fd, uint64_t base) {
  sits::setWeightFile(unwrap(context), fd, base);
}

MlirLogicalResult sitsSerializeWeights(MlirOperation module,
                                       MlirStringCallback callback,
                                       void *userData) {
  auto moduleOp = dyn_cast<ModuleOp>(unwrap(module));
  if (!moduleOp)
    return mlirLogicalResultFailure();
  return wrap(sits::serializeWeights(moduleOp, [&](StringRef bytes) {
    callback(mlirStringRefCreate(bytes.data(), bytes.size()), userData);
  }));
}
