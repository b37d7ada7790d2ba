//===- UpdatedResults.cpp - Results that update an argument in place ------===//
//
// A result marked `sits.updates = i` is argument i after the function wrote
// it (the paged KV pool). Returning it as well would make it an out-param
// the caller must allocate and the code must copy the whole pool into; it is
// dropped instead, the caller's argument buffer being the result; calls
// of the function use the argument they pass.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/BitVector.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUDROPUPDATEDRESULTS
#define GEN_PASS_DEF_SITSCPURESULTSTOOUTPARAMS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using mlir::sits::kUpdatesAttr;

namespace {

/// The buffer `value` is, looking through casts and through loop and branch
/// results that only pass a buffer along (an `scf.for` whose iteration
/// yields its own iter_arg back, an `scf.if` whose branches yield one
/// buffer): what in-place updates bufferize to.
Value underlyingBuffer(Value value) {
  while (true) {
    if (auto cast = value.getDefiningOp<memref::CastOp>()) {
      value = cast.getSource();
      continue;
    }
    auto result = dyn_cast<OpResult>(value);
    if (!result)
      return value;
    unsigned index = result.getResultNumber();
    if (auto loop = dyn_cast<scf::ForOp>(result.getOwner())) {
      if (underlyingBuffer(loop.getYieldedValues()[index]) !=
          loop.getRegionIterArgs()[index])
        return value;
      value = loop.getInits()[index];
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(result.getOwner())) {
      if (branch.getElseRegion().empty())
        return value;
      Value then = underlyingBuffer(branch.thenYield().getOperand(index));
      if (then != underlyingBuffer(branch.elseYield().getOperand(index)))
        return value;
      value = then;
      continue;
    }
    return value;
  }
}

/// Removes the results `erase` marks from `func` and from its return.
LogicalResult eraseResults(func::FuncOp func, const llvm::BitVector &erase) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<Value> kept;
  for (OpOperand &operand : ret->getOpOperands())
    if (!erase.test(operand.getOperandNumber()))
      kept.push_back(operand.get());
  ret->setOperands(kept);
  if (failed(func.eraseResults(erase)))
    return func.emitError("cannot remove results of ") << func.getSymName();
  return success();
}

struct SitsCpuDropUpdatedResultsPass
    : sits::cpu::impl::SitsCpuDropUpdatedResultsBase<
          SitsCpuDropUpdatedResultsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::DenseMap<Operation *, SmallVector<func::CallOp>> calls;
    llvm::DenseMap<Operation *, SmallVector<func::FuncOp>> callees;
    SymbolTableCollection symbols;
    module.walk([&](func::CallOp call) {
      auto callee =
          dyn_cast_or_null<func::FuncOp>(call.resolveCallableInTable(&symbols));
      if (!callee)
        return;
      calls[callee].push_back(call);
      callees[call->getParentOfType<func::FuncOp>()].push_back(callee);
    });
    // Callees first: a caller returning what a call returned sees the
    // argument it passed once the callee's updated result is dropped.
    llvm::DenseSet<Operation *> visited;
    std::function<LogicalResult(func::FuncOp)> visit =
        [&](func::FuncOp func) -> LogicalResult {
      if (!visited.insert(func).second)
        return success();
      for (func::FuncOp callee : callees.lookup(func))
        if (failed(visit(callee)))
          return failure();
      return success(func.isExternal() ||
                     succeeded(dropUpdatedResults(func, calls[func])));
    };
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(visit(func)))
        return signalPassFailure();
  }

  /// Drops `func`'s updated results; `calls` use the arguments they pass
  /// instead.
  LogicalResult dropUpdatedResults(func::FuncOp func,
                                   ArrayRef<func::CallOp> calls) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    llvm::BitVector drop(func.getNumResults());
    SmallVector<int64_t> updates(func.getNumResults(), -1);
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
      auto index = func.getResultAttrOfType<IntegerAttr>(i, kUpdatesAttr);
      if (!index)
        continue;
      int64_t arg = index.getInt();
      if (arg < 0 || arg >= int64_t(func.getNumArguments()) ||
          func.getArgument(arg).getType() != ret.getOperand(i).getType())
        return func.emitError("result #")
               << i << " is marked " << kUpdatesAttr << " = " << arg
               << ", which is not an argument of the same type";
      Value argument = func.getArgument(arg);
      if (underlyingBuffer(ret.getOperand(i)) != argument) {
        // Correct, at the cost of a copy: an entry point's caller is told.
        OpBuilder b(ret);
        memref::CopyOp::create(b, ret.getLoc(), ret.getOperand(i), argument);
        if (func.isPublic())
          func.emitRemark("result #")
              << i << " was not bufferized in place into argument #" << arg
              << "; it is copied there";
      }
      drop.set(i);
      updates[i] = arg;
    }
    if (drop.none())
      return success();
    if (failed(eraseResults(func, drop)))
      return failure();

    for (func::CallOp call : calls) {
      OpBuilder b(call);
      auto replacement =
          func::CallOp::create(b, call.getLoc(), func, call.getOperands());
      replacement->setDiscardableAttrs(call->getDiscardableAttrDictionary());
      unsigned next = 0;
      for (auto [i, result] : llvm::enumerate(call.getResults())) {
        Value value = updates[i] < 0 ? replacement.getResult(next++)
                                     : call.getOperand(updates[i]);
        if (value.getType() != result.getType())
          value =
              memref::CastOp::create(b, call.getLoc(), result.getType(), value);
        result.replaceAllUsesWith(value);
      }
      call.erase();
    }
    return success();
  }
};

/// The buffer a function allocates and returns as `value` (through casts),
/// or null.
memref::AllocOp returnedAlloc(Value value) {
  while (auto cast = value.getDefiningOp<memref::CastOp>())
    value = cast.getSource();
  auto alloc = value.getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != &alloc->getParentRegion()->front() ||
      !isa<func::FuncOp>(alloc->getParentOp()) ||
      !alloc.getType().getLayout().isIdentity())
    return nullptr;
  return alloc;
}

/// The caller's out-param that `result` is only copied into, or null: an
/// argument of the caller that nothing but that copy uses, so writing it
/// earlier, from inside the callee, is not observable.
BlockArgument copiedIntoOutParam(OpResult result) {
  if (!result.hasOneUse())
    return nullptr;
  auto copy = dyn_cast<memref::CopyOp>(*result.getUsers().begin());
  if (!copy || copy.getSource() != result)
    return nullptr;
  auto arg = dyn_cast<BlockArgument>(copy.getTarget());
  if (!arg || !arg.hasOneUse() ||
      !isa<func::FuncOp>(arg.getOwner()->getParentOp()) ||
      !cast<MemRefType>(arg.getType()).getLayout().isIdentity() ||
      !memref::CastOp::areCastCompatible(arg.getType(), result.getType()))
    return nullptr;
  return arg;
}

/// A layer's result that every call copies into its caller's out-param
/// (the present K/V a decoder returns per layer) becomes an out-param of
/// the layer: the layer writes where its buffer was allocated, and the
/// whole-cache copy after the call goes away.
LogicalResult forwardOutParamsIntoLayer(func::FuncOp func,
                                        ArrayRef<func::CallOp> calls) {
  if (calls.empty() || func.isExternal() || !func.getBody().hasOneBlock())
    return success();
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<memref::AllocOp> allocs;
  for (Value value : ret.getOperands())
    allocs.push_back(returnedAlloc(value));
  llvm::BitVector forward(func.getNumResults());
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    // A buffer returned twice stays with the callers.
    forward[i] = allocs[i] && llvm::count(allocs, allocs[i]) == 1 &&
                 llvm::all_of(calls, [&](func::CallOp call) {
                   return bool(copiedIntoOutParam(call->getResult(i)));
                 });
  if (forward.none())
    return success();

  // The callee: each forwarded buffer becomes a trailing argument.
  SmallVector<unsigned> forwarded(forward.set_bits());
  OpBuilder b(func.getContext());
  for (unsigned i : forwarded) {
    Type type = func.getResultTypes()[i];
    unsigned index = func.getNumArguments();
    if (failed(func.insertArgument(index, type, {}, allocs[i].getLoc())))
      return func.emitError("cannot add an out-param for result #") << i;
    Value arg = func.getArgument(index);
    b.setInsertionPoint(allocs[i]);
    if (arg.getType() != allocs[i].getType())
      arg = memref::CastOp::create(b, allocs[i].getLoc(), allocs[i].getType(),
                                   arg);
    allocs[i].replaceAllUsesWith(arg);
    allocs[i].erase();
  }
  if (failed(eraseResults(func, forward)))
    return failure();

  // The callers pass their out-params and copy nothing.
  for (func::CallOp call : calls) {
    OpBuilder cb(call);
    SmallVector<Value> operands(call.getOperands());
    SmallVector<Operation *> copies;
    for (unsigned i : forwarded) {
      BlockArgument out = copiedIntoOutParam(call->getResult(i));
      copies.push_back(*call->getResult(i).getUsers().begin());
      Value operand = out;
      Type type = func.getArgumentTypes()[operands.size()];
      if (operand.getType() != type)
        operand = memref::CastOp::create(cb, call.getLoc(), type, operand);
      operands.push_back(operand);
    }
    auto replacement = func::CallOp::create(cb, call.getLoc(), func, operands);
    replacement->setDiscardableAttrs(call->getDiscardableAttrDictionary());
    for (Operation *copy : copies)
      copy->erase();
    unsigned next = 0;
    for (auto [i, result] : llvm::enumerate(call.getResults()))
      if (!forward.test(i))
        result.replaceAllUsesWith(replacement.getResult(next++));
    call.erase();
  }
  return success();
}

struct SitsCpuResultsToOutParamsPass
    : sits::cpu::impl::SitsCpuResultsToOutParamsBase<
          SitsCpuResultsToOutParamsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bufferization::BufferResultsToOutParamsOpts options;
    options.filterFn = [](func::FuncOp *func) {
      return !(*func)->hasAttr(mlir::sits::kLayerAttr);
    };
    options.hoistStaticAllocs = true;
    options.modifyPublicFunctions = true;
    if (failed(bufferization::promoteBufferResultsToOutParams(module, options)))
      return signalPassFailure();

    // Layers and their calls; a layer referenced other than by a call
    // keeps its results.
    llvm::MapVector<Operation *, SmallVector<func::CallOp>> layers;
    llvm::DenseSet<Operation *> escaped;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(mlir::sits::kLayerAttr))
        layers[func];
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(&module.getBodyRegion()))
      for (const SymbolTable::SymbolUse &use : *uses) {
        Operation *callee = module.lookupSymbol(use.getSymbolRef());
        if (!callee || !layers.contains(callee))
          continue;
        if (auto call = dyn_cast<func::CallOp>(use.getUser()))
          layers[callee].push_back(call);
        else
          escaped.insert(callee);
      }
    for (auto &[func, calls] : layers)
      if (!escaped.contains(func) &&
          failed(forwardOutParamsIntoLayer(cast<func::FuncOp>(func), calls)))
        return signalPassFailure();
  }
};

} // namespace
