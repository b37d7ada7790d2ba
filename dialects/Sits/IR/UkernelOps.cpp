//===- UkernelOps.cpp - Ops computed by runtime kernels -------------------===//
//
// Verification, memory effects and bufferization of the `sits.ukernel.*`
// ops. They are in destination style: on tensors the result is the init
// written; on buffers the init is written in place and there is no result.
//
//===----------------------------------------------------------------------===//

#include "dialects/Sits/IR/SitsOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"

using namespace mlir;
using namespace mlir::sits;

namespace {

/// Read effects on the buffer inputs and write effects on the buffer init of
/// a destination-style op; nothing on tensors.
void addBufferEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    if (op.isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

/// Replaces a destination-style op on tensors by the same op on their
/// buffers, the init's buffer standing for the result.
LogicalResult
bufferizeDestinationStyle(RewriterBase &rewriter,
                          DestinationStyleOpInterface op,
                          const bufferization::BufferizationOptions &options,
                          bufferization::BufferizationState &state) {
  if (op.hasPureBufferSemantics())
    return success();
  SmallVector<Value> operands;
  for (Value operand : op->getOperands()) {
    if (!isa<TensorType>(operand.getType())) {
      operands.push_back(operand);
      continue;
    }
    FailureOr<Value> buffer =
        bufferization::getBuffer(rewriter, operand, options, state);
    if (failed(buffer))
      return failure();
    operands.push_back(*buffer);
  }
  SmallVector<Value> results;
  for (OpOperand &init : op.getDpsInitsMutable())
    results.push_back(operands[init.getOperandNumber()]);
  rewriter.setInsertionPoint(op);
  OperationState bufferOp(op->getLoc(), op->getName(), operands,
                          /*types=*/TypeRange{}, op->getAttrs());
  rewriter.create(bufferOp);
  bufferization::replaceOpWithBufferizedValues(rewriter, op, results);
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// UkernelPagedAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult UkernelPagedAttentionOp::verify() {
  auto shaped = [](Value v) { return cast<ShapedType>(v.getType()); };
  ShapedType q = shaped(getQuery()), pool = shaped(getPool()),
             tables = shaped(getBlockTables()), lens = shaped(getContextLens()),
             init = shaped(getInit());
  const bool kivi = getKivi().has_value();
  for (auto [name, type, rank] :
       {std::tuple<const char *, ShapedType, int64_t>{"query", q, 4},
        {"pool", pool, kivi ? 2 : 6},
        {"block_tables", tables, 2},
        {"context_lens", lens, 1},
        {"init", init, 4}})
    if (type.getRank() != rank)
      return emitOpError(name)
             << " must have rank " << rank << ", got " << type.getRank();
  bool buffers = isa<MemRefType>(q);
  for (Value v : getOperands().drop_front())
    if (isa<ShapedType>(v.getType()) && isa<MemRefType>(v.getType()) != buffers)
      return emitOpError("operands must be all tensors or all buffers");
  if (buffers != getResult().empty())
    return emitOpError(buffers ? "on buffers has no result"
                               : "on tensors has one result, the init");
  if (!buffers && getResult().front().getType() != init)
    return emitOpError("result type ") << getResult().front().getType()
                                       << " differs from the init's " << init;
  auto conflict = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  for (int64_t d = 0; d < 4; ++d)
    if (conflict(q.getDimSize(d), init.getDimSize(d)))
      return emitOpError("query and init shapes differ in dimension ") << d;
  if (conflict(q.getDimSize(0), tables.getDimSize(0)) ||
      conflict(q.getDimSize(0), lens.getDimSize(0)))
    return emitOpError("batch sizes (query, block_tables, context_lens) "
                       "differ");
  if (kivi) {
    if (failed(verifyKiviPool(*this, *getKivi(), pool, q.getDimSize(3))))
      return failure();
    int64_t qHeads = q.getDimSize(1), kvHeads = getKiviPool(getKivi())->kvHeads;
    if (!ShapedType::isDynamic(qHeads) && qHeads % kvHeads != 0)
      return emitOpError("query heads (")
             << qHeads << ") must be a multiple of key/value heads (" << kvHeads
             << ")";
    return success();
  }
  // A quantized pool's rows are the head dim's codes and a 4-byte scale.
  const bool quantized = isQuantizedKVElement(pool.getElementType());
  int64_t poolDim = pool.getDimSize(5);
  if (quantized && !ShapedType::isDynamic(poolDim))
    poolDim -= kKVScaleBytes;
  if (conflict(q.getDimSize(3), poolDim))
    return emitOpError("query head dim (")
           << q.getDimSize(3) << ") differs from the pool's (" << poolDim
           << (quantized ? ": rows less their 4 scale bytes" : "") << ")";
  if (conflict(pool.getDimSize(2), 2))
    return emitOpError("pool dimension 2 must hold K and V (extent 2), got ")
           << pool.getDimSize(2);
  int64_t qHeads = q.getDimSize(1), kvHeads = pool.getDimSize(3);
  if (!ShapedType::isDynamic(qHeads) && !ShapedType::isDynamic(kvHeads) &&
      (kvHeads == 0 || qHeads % kvHeads != 0))
    return emitOpError("query heads (")
           << qHeads << ") must be a multiple of key/value heads (" << kvHeads
           << ")";
  return success();
}

void UkernelPagedAttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addBufferEffects(*this, effects);
}

// Every element of the init is written (zeros where a query sees nothing):
// its old contents are not read.
bool UkernelPagedAttentionOp::bufferizesToMemoryRead(
    OpOperand &operand, const bufferization::AnalysisState &) {
  return !isDpsInit(&operand);
}

bool UkernelPagedAttentionOp::bufferizesToMemoryWrite(
    OpOperand &operand, const bufferization::AnalysisState &) {
  return isDpsInit(&operand);
}

bufferization::AliasingValueList UkernelPagedAttentionOp::getAliasingValues(
    OpOperand &operand, const bufferization::AnalysisState &) {
  if (!isDpsInit(&operand))
    return {};
  return {
      {getTiedOpResult(&operand), bufferization::BufferRelation::Equivalent}};
}

LogicalResult UkernelPagedAttentionOp::bufferize(
    RewriterBase &rewriter, const bufferization::BufferizationOptions &options,
    bufferization::BufferizationState &state) {
  return bufferizeDestinationStyle(rewriter, *this, options, state);
}

//===----------------------------------------------------------------------===//
// UkernelKiviWriteOp
//===----------------------------------------------------------------------===//

LogicalResult UkernelKiviWriteOp::verify() {
  auto shaped = [](Value v) { return cast<ShapedType>(v.getType()); };
  ShapedType k = shaped(getKey()), v = shaped(getValue()),
             slots = shaped(getSlotMapping()), pool = shaped(getPool());
  for (auto [name, type, rank] :
       {std::tuple<const char *, ShapedType, int64_t>{"key", k, 4},
        {"value", v, 4},
        {"slot_mapping", slots, 2}})
    if (type.getRank() != rank)
      return emitOpError(name)
             << " must have rank " << rank << ", got " << type.getRank();
  bool buffers = isa<MemRefType>(k);
  for (Value operand : getOperands())
    if (isa<ShapedType>(operand.getType()) &&
        isa<MemRefType>(operand.getType()) != buffers)
      return emitOpError("operands must be all tensors or all buffers");
  if (buffers != getResult().empty())
    return emitOpError(buffers ? "on buffers has no result"
                               : "on tensors has one result, the pool");
  if (!buffers && getResult().front().getType() != pool)
    return emitOpError("result type ") << getResult().front().getType()
                                       << " differs from the pool's " << pool;
  if (k.getShape() != v.getShape())
    return emitOpError("key and value shapes differ");
  auto conflict = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  if (conflict(k.getDimSize(0), slots.getDimSize(0)) ||
      conflict(k.getDimSize(2), slots.getDimSize(1)))
    return emitOpError("key [B, Hkv, S, D] and slot_mapping [B, S] differ");
  if (failed(verifyKiviPool(*this, getKivi(), pool, k.getDimSize(3))))
    return failure();
  if (conflict(k.getDimSize(1), getKiviPool(getKivi())->kvHeads))
    return emitOpError("key heads (")
           << k.getDimSize(1) << ") differ from the KIVI pool's ("
           << getKiviPool(getKivi())->kvHeads << ")";
  return success();
}

void UkernelKiviWriteOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addBufferEffects(*this, effects);
  // The pool is read too (the tails of blocks being filled).
  if (isa<MemRefType>(getPool().getType()))
    effects.emplace_back(MemoryEffects::Read::get(), &getPoolMutable(),
                         SideEffects::DefaultResource::get());
}

bool UkernelKiviWriteOp::bufferizesToMemoryRead(
    OpOperand &, const bufferization::AnalysisState &) {
  return true;
}

bool UkernelKiviWriteOp::bufferizesToMemoryWrite(
    OpOperand &operand, const bufferization::AnalysisState &) {
  return isDpsInit(&operand);
}

bufferization::AliasingValueList
UkernelKiviWriteOp::getAliasingValues(OpOperand &operand,
                                      const bufferization::AnalysisState &) {
  if (!isDpsInit(&operand))
    return {};
  return {
      {getTiedOpResult(&operand), bufferization::BufferRelation::Equivalent}};
}

LogicalResult UkernelKiviWriteOp::bufferize(
    RewriterBase &rewriter, const bufferization::BufferizationOptions &options,
    bufferization::BufferizationState &state) {
  return bufferizeDestinationStyle(rewriter, *this, options, state);
}
