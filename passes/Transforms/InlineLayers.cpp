//===- InlineLayers.cpp - The importer's layer functions inlined ----------===//
//
// The ONNX importer emits each distinct repeated layer once, as a function
// called once per layer, so that Python infers shapes, folds and emits a
// layer once. Everything after import expects the flat module it emitted
// before: the calls are inlined here, each clone located at its own layer's
// ONNX nodes. Cloning in C++ costs little next to emitting from Python.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSINLINELAYERS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

namespace {

/// A unit attribute on a function the importer made of a layer.
constexpr llvm::StringLiteral kInlineAttr = "sits.inline";
/// The ONNX node names of a layer function's ops, or of a call's layer.
constexpr llvm::StringLiteral kNodeNamesAttr = "sits.node_names";

/// `attr` as an array of strings, or nullopt.
std::optional<SmallVector<StringAttr>> getNames(Attribute attr) {
  auto array = dyn_cast_or_null<ArrayAttr>(attr);
  if (!array)
    return std::nullopt;
  SmallVector<StringAttr> names;
  names.reserve(array.size());
  for (Attribute element : array) {
    auto name = dyn_cast<StringAttr>(element);
    if (!name)
      return std::nullopt;
    names.push_back(name);
  }
  return names;
}

/// A layer function: its body and the position of each of its node names.
struct Callee {
  Block *body = nullptr;
  unsigned numNames = 0;
  llvm::DenseMap<StringAttr, unsigned> index;
};

struct SitsInlineLayersPass
    : sits::impl::SitsInlineLayersBase<SitsInlineLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    // Everything is checked before anything changes: a failure leaves the
    // module as it was.
    llvm::MapVector<func::FuncOp, Callee> callees;
    SmallVector<std::pair<func::CallOp, func::FuncOp>> calls;
    bool failed = false;
    auto getCallee = [&](func::FuncOp func) -> Callee * {
      auto [it, inserted] = callees.try_emplace(func);
      Callee &callee = it->second;
      if (!inserted)
        return callee.body ? &callee : nullptr;
      if (func.isExternal() || !func.getBody().hasOneBlock() ||
          !isa<func::ReturnOp>(func.getBody().front().back())) {
        func.emitError() << "a '" << kInlineAttr
                         << "' function must have a body of one block, ending "
                            "in 'func.return'";
        return nullptr;
      }
      std::optional<SmallVector<StringAttr>> names =
          getNames(func->getAttr(kNodeNamesAttr));
      if (!names) {
        func.emitError() << "a '" << kInlineAttr << "' function needs '"
                         << kNodeNamesAttr << "', an array of strings";
        return nullptr;
      }
      callee.numNames = names->size();
      for (auto [i, name] : llvm::enumerate(*names))
        callee.index.try_emplace(name, i);
      callee.body = &func.getBody().front();
      return &callee;
    };
    module.walk([&](func::CallOp call) {
      auto func = symbols.lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (!func || !func->hasAttr(kInlineAttr))
        return;
      // A clone of this call would be left calling an erased function.
      if (auto parent = call->getParentOfType<func::FuncOp>();
          parent && parent->hasAttr(kInlineAttr)) {
        call.emitError() << "a '" << kInlineAttr
                         << "' function cannot call another";
        failed = true;
        return;
      }
      Callee *callee = getCallee(func);
      if (!callee) {
        failed = true;
        return;
      }
      if (Attribute attr = call->getAttr(kNodeNamesAttr)) {
        std::optional<SmallVector<StringAttr>> names = getNames(attr);
        if (!names || names->size() != callee->numNames) {
          call.emitError() << "'" << kNodeNamesAttr << "' must be an array of "
                           << callee->numNames << " strings, like @"
                           << func.getSymName() << "'s";
          failed = true;
          return;
        }
      }
      calls.emplace_back(call, func);
    });
    // Layer functions nothing calls are checked and erased too.
    module.walk([&](func::FuncOp func) {
      if (func->hasAttr(kInlineAttr) && !getCallee(func))
        failed = true;
    });
    if (failed)
      return signalPassFailure();

    for (auto [call, func] : calls)
      inlineCall(call, callees.find(func)->second);
    for (auto &entry : callees)
      entry.first.erase();
  }

  void inlineCall(func::CallOp call, const Callee &callee) {
    IRMapping mapping;
    mapping.map(callee.body->getArguments(), call.getOperands());
    // Each call's replacer caches the locations it remapped: a location
    // shared by many ops is remapped once per call.
    std::optional<AttrTypeReplacer> replacer;
    if (std::optional<SmallVector<StringAttr>> names =
            getNames(call->getAttr(kNodeNamesAttr))) {
      replacer.emplace();
      replacer->addReplacement([&callee, names = std::move(*names)](
                                   NameLoc loc) -> std::optional<Attribute> {
        auto it = callee.index.find(loc.getName());
        if (it == callee.index.end())
          return std::nullopt;
        // The replacer goes on into the child location.
        return NameLoc::get(names[it->second], loc.getChildLoc());
      });
    }
    // A constant only this call reads (a layer's weight) moves to its first
    // reader, where importing node by node puts it: the module is the same
    // whichever way it was imported, down to the order of its ops.
    llvm::SmallPtrSet<Operation *, 16> sink;
    for (Value operand : call.getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && def->hasTrait<OpTrait::ConstantLike>() &&
          def->getBlock() == call->getBlock() &&
          llvm::all_of(def->getUsers(),
                       [&](Operation *user) { return user == call; }))
        sink.insert(def);
    OpBuilder builder(call);
    for (Operation &op : callee.body->without_terminator()) {
      Operation *clone = builder.clone(op, mapping);
      if (replacer)
        replacer->recursivelyReplaceElementsIn(clone, /*replaceAttrs=*/false,
                                               /*replaceLocs=*/true);
      if (sink.empty())
        continue;
      clone->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (Operation *def = operand.getDefiningOp(); def && sink.erase(def))
            def->moveBefore(clone);
      });
    }
    auto ret = cast<func::ReturnOp>(callee.body->getTerminator());
    for (auto [result, value] :
         llvm::zip_equal(call.getResults(), ret.getOperands()))
      result.replaceAllUsesWith(mapping.lookupOrDefault(value));
    call.erase();
  }
};

} // namespace
