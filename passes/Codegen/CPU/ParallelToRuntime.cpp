//===- ParallelToRuntime.cpp - Parallel loops as runtime fork-joins -------===//
//
// Each outermost scf.parallel becomes one call of the runtime's
// `sitsRuntimeParallelFor(body, context, n)`, which runs `body(context, i)`
// for every linear iteration i on the worker pool, the calling thread
// included, and returns when all have run. The body is outlined into a
// function of (context, i); the values it uses from outside travel in a
// struct on the caller's stack, in their LLVM form (a memref as its
// descriptor), converted back with casts the LLVM conversions resolve.
//
// Upstream's async-parallel-for reaches the same pool through coroutines,
// tokens and groups: a decode step runs hundreds of small loops, and that
// bookkeeping (allocations, locks, reference counts) cost more than a
// third of a small model's step. A fork-join needs one queue push per
// helper thread and one counter.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/ParallelLoops.h"
#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUPARALLELTORUNTIME
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;

namespace {

/// The runtime's entry point (runtime/src/core/parallel_for.cpp).
constexpr llvm::StringLiteral kParallelFor = "sitsRuntimeParallelFor";

/// The body's type: (context, linear iteration) -> ().
FunctionType bodyType(MLIRContext *ctx) {
  return FunctionType::get(
      ctx, {LLVM::LLVMPointerType::get(ctx), IntegerType::get(ctx, 64)}, {});
}

/// `sitsRuntimeParallelFor`'s declaration in `module`, created on first use.
func::FuncOp getOrDeclareParallelFor(ModuleOp module) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(kParallelFor))
    return existing;
  MLIRContext *ctx = module.getContext();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto decl = func::FuncOp::create(
      b, module.getLoc(), kParallelFor,
      FunctionType::get(ctx,
                        {bodyType(ctx), LLVM::LLVMPointerType::get(ctx),
                         IntegerType::get(ctx, 64)},
                        {}));
  decl.setPrivate();
  return decl;
}

/// `value` as `type`: itself when it has that type, else through a cast
/// the LLVM conversions resolve (a memref and its descriptor, an index and
/// an i64).
Value castTo(OpBuilder &b, Location loc, Value value, Type type) {
  if (value.getType() == type)
    return value;
  return UnrealizedConversionCastOp::create(b, loc, type, value).getResult(0);
}

/// Outlines `loop` (an outermost scf.parallel without results in `parent`)
/// into a body function and replaces it with a call of the runtime. Fails,
/// changing nothing, when a value the body uses has no LLVM form; the loop
/// then runs sequentially (scf-to-cf lowers it).
LogicalResult outlineParallelLoop(scf::ParallelOp loop, func::FuncOp parent,
                                  SymbolTable &symbols,
                                  const LLVMTypeConverter &converter) {
  MLIRContext *ctx = loop.getContext();
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  auto i64 = b.getI64Type();
  auto ptrType = LLVM::LLVMPointerType::get(ctx);

  // What the body reads from outside: constants are cloned into it, the
  // rest travels in the context struct. Checked before anything is built.
  llvm::SetVector<Value> used;
  getUsedValuesDefinedAbove(loop.getRegion(), used);
  used.insert(loop.getLowerBound().begin(), loop.getLowerBound().end());
  used.insert(loop.getStep().begin(), loop.getStep().end());
  SmallVector<Value> captures;
  SmallVector<Operation *> constants;
  SmallVector<Type> fields;
  auto use = [&](Value value) {
    Operation *def = value.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>()) {
      constants.push_back(def);
      return true;
    }
    Type field = converter.convertType(value.getType());
    if (!field || !LLVM::isCompatibleType(field))
      return false;
    captures.push_back(value);
    fields.push_back(field);
    return true;
  };
  if (!llvm::all_of(used, use))
    return failure();

  // Trip counts, computed by the caller; the body delinearizes with them.
  Value total;
  SmallVector<Value> trips = sits::cpu::buildTripCounts(b, loc, loop, total);
  for (Value trip : trips)
    if (used.insert(trip))
      (void)use(trip); // an index: always has an LLVM form
  // An empty struct is not an LLVM type worth allocating: one i64 keeps
  // the context a valid pointer.
  if (fields.empty())
    fields.push_back(i64);
  auto structType = LLVM::LLVMStructType::getLiteral(ctx, fields);

  // The body: func(context, i) loading its captures, the original
  // induction variables from i (last fastest), then the loop's body.
  std::string name = (parent.getSymName() + "_parallel").str();
  OpBuilder moduleBuilder(parent);
  moduleBuilder.setInsertionPointAfter(parent);
  auto body = func::FuncOp::create(moduleBuilder, loc, name, bodyType(ctx));
  body.setPrivate();
  symbols.insert(body); // renames on collision
  Block *entry = body.addEntryBlock();
  OpBuilder bb = OpBuilder::atBlockBegin(entry);
  IRMapping mapping;
  for (Operation *constant : constants)
    bb.clone(*constant, mapping);
  Value context = entry->getArgument(0);
  for (auto [index, capture] : llvm::enumerate(captures)) {
    Value field = LLVM::GEPOp::create(
        bb, loc, ptrType, structType, context,
        ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(index)});
    Value loaded = LLVM::LoadOp::create(bb, loc, fields[index], field);
    mapping.map(capture, castTo(bb, loc, loaded, capture.getType()));
  }
  Value rest = arith::IndexCastOp::create(bb, loc, bb.getIndexType(),
                                          entry->getArgument(1));
  auto mapped = [&](ValueRange values) {
    return llvm::map_to_vector(
        values, [&](Value v) { return mapping.lookupOrDefault(v); });
  };
  SmallVector<Value> ivs = sits::cpu::delinearize(bb, loc, rest, mapped(trips),
                                                  mapped(loop.getLowerBound()),
                                                  mapped(loop.getStep()));
  mapping.map(loop.getInductionVars(), ivs);
  for (Operation &op : loop.getBody()->without_terminator())
    bb.clone(op, mapping);
  func::ReturnOp::create(bb, loc);

  // The call: the context struct in the caller's entry block (one per
  // loop, reused by every execution of it), filled just before.
  OpBuilder allocaBuilder =
      OpBuilder::atBlockBegin(&parent.getFunctionBody().front());
  Value one = LLVM::ConstantOp::create(allocaBuilder, loc, i64,
                                       allocaBuilder.getI64IntegerAttr(1));
  Value contextPtr =
      LLVM::AllocaOp::create(allocaBuilder, loc, ptrType, structType, one);
  for (auto [index, capture] : llvm::enumerate(captures)) {
    Value converted = castTo(b, loc, capture, fields[index]);
    Value field = LLVM::GEPOp::create(
        b, loc, ptrType, structType, contextPtr,
        ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(index)});
    LLVM::StoreOp::create(b, loc, converted, field);
  }
  Value fn =
      func::ConstantOp::create(b, loc, bodyType(ctx), SymbolRefAttr::get(body));
  Value count = arith::IndexCastOp::create(b, loc, i64, total);
  func::FuncOp parallelFor =
      getOrDeclareParallelFor(parent->getParentOfType<ModuleOp>());
  func::CallOp::create(b, loc, parallelFor, ValueRange{fn, contextPtr, count});
  loop.erase();
  return success();
}

struct SitsCpuParallelToRuntimePass
    : sits::cpu::impl::SitsCpuParallelToRuntimeBase<
          SitsCpuParallelToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    LLVMTypeConverter converter(&getContext());
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp func : funcs) {
      if (func.isExternal())
        continue;
      SmallVector<scf::ParallelOp> loops;
      func.walk([&](scf::ParallelOp loop) {
        if (loop.getNumResults() == 0 &&
            !loop->getParentOfType<scf::ParallelOp>())
          loops.push_back(loop);
      });
      for (scf::ParallelOp loop : loops) {
        if (succeeded(outlineParallelLoop(loop, func, symbols, converter)))
          ++numOutlined;
        else
          ++numSequential;
      }
    }
  }
};

} // namespace
