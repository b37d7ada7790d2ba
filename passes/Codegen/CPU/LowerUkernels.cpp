//===- LowerUkernels.cpp - Marked linalg ops as runtime kernel calls ------===//
//
// Some ops run best as hand-written kernels with per-ISA variants chosen
// when the code runs. A contraction (the INT8 dot products of quantized
// matmuls: VNNI, AVX2 or portable) carries `sits.ukernel`; what linalg
// cannot express (paged attention, reading the KV pool through block
// tables; the writes into a pool of KIVI blocks) is a `sits.ukernel.*` op.
// Tiling and vectorization leave both whole, and once on buffers each becomes
// one call of the runtime's kernel with pointers and strides.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/Common/Ukernels.h"

#include "dialects/Sits/IR/SitsOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPULOWERUKERNELS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

/// The runtime's INT8 dot-product kernel (runtime/src/core/qdot.cpp).
constexpr llvm::StringLiteral kQDot = "sitsRuntimeQDot";
/// The runtime's paged attention (runtime/src/core/paged_attention.cpp),
/// over an f32 pool and over quantized ones (rows of INT8 or FP8 E4M3
/// codes and their scale; strides in bytes).
constexpr llvm::StringLiteral kPagedAttention = "sitsRuntimePagedAttention";
constexpr llvm::StringLiteral kPagedAttentionI8 = "sitsRuntimePagedAttentionI8";
constexpr llvm::StringLiteral kPagedAttentionF8 =
    "sitsRuntimePagedAttentionF8E4M3";
/// Over KIVI blocks (runtime/src/core/kivi.h), and their writer.
constexpr llvm::StringLiteral kPagedAttentionKivi =
    "sitsRuntimePagedAttentionKivi";
constexpr llvm::StringLiteral kKiviWrite = "sitsRuntimeKiviWrite";
/// sitsRuntimeKiviWrite's flag: give a filled block's tail pages back.
constexpr int64_t kKiviReleaseTail = 1;

/// The kernel `name` with argument types `inputs` (no results), declared
/// in `module` on first use.
func::FuncOp getOrDeclare(ModuleOp module, StringRef name,
                          ArrayRef<Type> inputs) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto decl =
      func::FuncOp::create(b, module.getLoc(), name,
                           FunctionType::get(module.getContext(), inputs, {}));
  decl.setPrivate();
  return decl;
}

func::FuncOp getOrDeclareQDot(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  Type i64 = IntegerType::get(ctx, 64), ptr = LLVM::LLVMPointerType::get(ctx);
  return getOrDeclare(
      module, kQDot,
      {i64, i64, i64, i64, i64, ptr, i64, ptr, i64, ptr, ptr, i64, ptr, i64});
}

/// The paged attention kernel for pools of `poolType` (f32, i8 or
/// f8E4M3FN).
func::FuncOp getOrDeclarePagedAttention(ModuleOp module, Type poolType) {
  MLIRContext *ctx = module.getContext();
  Type i64 = IntegerType::get(ctx, 64), ptr = LLVM::LLVMPointerType::get(ctx),
       f32 = Float32Type::get(ctx);
  Type element = cast<ShapedType>(poolType).getElementType();
  StringRef name = element.isInteger(8)             ? kPagedAttentionI8
                   : isa<Float8E4M3FNType>(element) ? kPagedAttentionF8
                                                    : kPagedAttention;
  return getOrDeclare(module, name,
                      {i64, i64, i64, i64, i64, ptr, i64, i64, i64,
                       ptr, i64, i64, i64, i64, i64, i64, i64, ptr,
                       i64, i64, ptr, f32, ptr, i64, i64, i64});
}

func::FuncOp getOrDeclareKiviAttention(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  Type i64 = IntegerType::get(ctx, 64), ptr = LLVM::LLVMPointerType::get(ctx),
       f32 = Float32Type::get(ctx);
  return getOrDeclare(module, kPagedAttentionKivi,
                      {i64, i64, i64, i64, i64, ptr, i64, i64,
                       i64, ptr, i64, i64, i64, i64, i64, ptr,
                       i64, i64, ptr, f32, ptr, i64, i64, i64});
}

func::FuncOp getOrDeclareKiviWrite(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  Type i64 = IntegerType::get(ctx, 64), ptr = LLVM::LLVMPointerType::get(ctx);
  return getOrDeclare(module, kKiviWrite,
                      {i64, i64, i64, i64, ptr, ptr, i64, i64, i64, ptr, i64,
                       ptr, i64, i64, i64, i64, i64, i64});
}

/// Whether every dimension of `type` from `from` on is contiguous row-major
/// (static strides equal to the products of the later extents).
bool innerContiguous(MemRefType type, int64_t from) {
  auto [strides, offset] = type.getStridesAndOffset();
  int64_t expected = 1;
  for (int64_t d = type.getRank() - 1; d >= from; --d) {
    if (strides[d] != expected || type.isDynamicDim(d))
      return false;
    expected *= type.getDimSize(d);
  }
  return true;
}

/// One buffer as the kernel takes it: the address of its first element and
/// the strides of its dimensions, in elements, as i64.
struct Buffer {
  Value pointer;
  SmallVector<Value> strides;

  /// The outermost dimension's stride.
  Value rowStride() const { return strides.front(); }
};

Buffer getBuffer(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  Type i64 = b.getI64Type();
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  Value offset =
      arith::MulIOp::create(b, loc, metadata.getOffset(),
                            arith::ConstantIndexOp::create(b, loc, bytes));
  Value address = arith::IndexCastUIOp::create(
      b, loc, i64, arith::AddIOp::create(b, loc, base, offset));
  Value pointer = LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), address);
  SmallVector<Value> strides;
  for (Value stride : metadata.getStrides())
    strides.push_back(arith::IndexCastOp::create(b, loc, i64, stride));
  return {pointer, strides};
}

/// A fresh identity-layout buffer of `memref`'s shape, holding a copy of it
/// when `copyIn`: the caller writes it back (when it is an output) and frees
/// it (this runs after deallocation was placed).
Value identityCopy(OpBuilder &b, Location loc, Value memref, bool copyIn) {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dynamicSizes.push_back(memref::DimOp::create(b, loc, memref, d));
  Value copy = memref::AllocOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()),
      dynamicSizes);
  if (copyIn)
    memref::CopyOp::create(b, loc, memref, copy);
  return copy;
}

/// `memref` itself when its innermost dimension is contiguous (a static unit
/// stride), else identityCopy.
Value withContiguousRows(OpBuilder &b, Location loc, Value memref,
                         bool copyIn) {
  auto type = cast<MemRefType>(memref.getType());
  if (type.getStridesAndOffset().first.back() == 1)
    return memref;
  return identityCopy(b, loc, memref, copyIn);
}

/// Replaces a "qdot_i4" / "qdot_i8" contraction (lowerQMatmulToIntegerDot's
/// form, on buffers) by its kernel call. Fails, changing nothing, when the
/// operands are not that form.
LogicalResult lowerQDot(OpBuilder &b, linalg::GenericOp op, int64_t bits,
                        func::FuncOp qdot) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 4 ||
      op.getNumDpsInits() != 1)
    return failure();
  auto type = [&](Value v) { return dyn_cast<MemRefType>(v.getType()); };
  Value codes = op.getDpsInputs()[0], weight = op.getDpsInputs()[1],
        rowScales = op.getDpsInputs()[2], scale = op.getDpsInputs()[3],
        out = op.getDpsInits()[0];
  MemRefType codesType = type(codes), weightType = type(weight),
             rowScalesType = type(rowScales), scaleType = type(scale),
             outType = type(out);
  int64_t codesRank = bits == 4 ? 5 : 4;
  if (!codesType || !weightType || !rowScalesType || !scaleType || !outType ||
      codesType.getRank() != codesRank || weightType.getRank() != 5 ||
      rowScalesType.getRank() != 2 || outType.getRank() != 3 ||
      (scaleType.getRank() != 2 && scaleType.getRank() != 3) ||
      !codesType.getElementType().isInteger(8) ||
      !weightType.getElementType().isInteger(8) ||
      !rowScalesType.getElementType().isF32() ||
      !scaleType.getElementType().isF32() || !outType.getElementType().isF32())
    return failure();
  // Rows may be strided; everything inside a row, and the weights, are
  // contiguous. The group and the column blocks are static.
  if (!innerContiguous(codesType, 1) || !innerContiguous(weightType, 0) ||
      !innerContiguous(rowScalesType, 1) || !innerContiguous(outType, 1) ||
      !innerContiguous(scaleType, scaleType.getRank() == 3 ? 1 : 0) ||
      outType.getDimSize(2) != 16 || codesType.isDynamicDim(1))
    return failure();
  int64_t group = 1;
  for (int64_t d = 2; d < codesRank; ++d)
    group *= codesType.getDimSize(d);
  int64_t groups = codesType.getDimSize(1);

  Location loc = op.getLoc();
  b.setInsertionPoint(op);
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, i64, v).getResult();
  };
  Value m = arith::IndexCastOp::create(b, loc, i64,
                                       memref::DimOp::create(b, loc, out, 0));
  Value n = arith::MulIOp::create(
      b, loc,
      arith::IndexCastOp::create(b, loc, i64,
                                 memref::DimOp::create(b, loc, out, 1)),
      constant(16));
  Buffer x = getBuffer(b, loc, codes), sx = getBuffer(b, loc, rowScales),
         w = getBuffer(b, loc, weight), ws = getBuffer(b, loc, scale),
         y = getBuffer(b, loc, out);
  // Per-column weight scales have no stride between groups.
  Value wsStride = scaleType.getRank() == 3 ? ws.rowStride() : constant(0);
  func::CallOp::create(b, loc, qdot,
                       ValueRange{constant(bits), m, n,
                                  constant(groups * group), constant(group),
                                  x.pointer, x.rowStride(), sx.pointer,
                                  sx.rowStride(), w.pointer, ws.pointer,
                                  wsStride, y.pointer, y.rowStride()});
  op->erase();
  return success();
}

/// The operands of a sits.ukernel.paged_attention call: the query, tables,
/// lengths and output with contiguous rows (copies where theirs are not),
/// and the pool, as the kernels take them.
struct AttentionOperands {
  Value query, tables, lens, out;
  Buffer q, pool, t, l, o;

  AttentionOperands(OpBuilder &b, Location loc, UkernelPagedAttentionOp op)
      : query(withContiguousRows(b, loc, op.getQuery(), /*copyIn=*/true)),
        tables(withContiguousRows(b, loc, op.getBlockTables(), true)),
        lens(withContiguousRows(b, loc, op.getContextLens(), true)),
        out(withContiguousRows(b, loc, op.getInit(), /*copyIn=*/false)),
        q(getBuffer(b, loc, query)), pool(getBuffer(b, loc, op.getPool())),
        t(getBuffer(b, loc, tables)), l(getBuffer(b, loc, lens)),
        o(getBuffer(b, loc, out)) {}

  /// After the call: the output copied back, the copies freed, `op` gone.
  void finish(OpBuilder &b, Location loc, UkernelPagedAttentionOp op) {
    if (out != op.getInit())
      memref::CopyOp::create(b, loc, out, op.getInit());
    Value copies[] = {query, tables, lens, out};
    Value originals[] = {op.getQuery(), op.getBlockTables(),
                         op.getContextLens(), op.getInit()};
    for (auto [copy, original] : llvm::zip_equal(copies, originals))
      if (copy != original)
        memref::DeallocOp::create(b, loc, copy);
    op->erase();
  }
};

/// Replaces a sits.ukernel.paged_attention on buffers by its kernel call.
/// The pool's head dim must be contiguous (it is in the identity layout the
/// pool has as a function argument); the other operands are copied into
/// contiguous buffers when theirs is not.
LogicalResult lowerPagedAttention(OpBuilder &b, UkernelPagedAttentionOp op,
                                  func::FuncOp kernel) {
  if (!op.hasPureBufferSemantics())
    return op.emitOpError("must be on buffers to become a kernel call");
  auto poolType = cast<MemRefType>(op.getPool().getType());
  if (poolType.getStridesAndOffset().first.back() != 1)
    return op.emitOpError("needs a pool whose head dim is contiguous, got ")
           << poolType;
  Location loc = op.getLoc();
  b.setInsertionPoint(op);
  Type i64 = b.getI64Type();
  auto dim = [&](Value memref, int64_t d) -> Value {
    return arith::IndexCastOp::create(b, loc, i64,
                                      memref::DimOp::create(b, loc, memref, d));
  };
  AttentionOperands a(b, loc, op);
  const Buffer &pool = a.pool;
  // Layer l's K starts l * stride(1) into a block, its V stride(2) later.
  Value layer = arith::IndexCastOp::create(b, loc, i64, op.getLayer());
  Value keyOffset = arith::MulIOp::create(b, loc, layer, pool.strides[1]);
  Value valueOffset = arith::AddIOp::create(b, loc, keyOffset, pool.strides[2]);
  Value scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
  func::CallOp::create(b, loc, kernel, ValueRange{dim(a.query, 0),
                                                  dim(a.query, 2),
                                                  dim(a.query, 1),
                                                  dim(op.getPool(), 3),
                                                  dim(a.query, 3),
                                                  a.q.pointer,
                                                  a.q.strides[0],
                                                  a.q.strides[1],
                                                  a.q.strides[2],
                                                  pool.pointer,
                                                  dim(op.getPool(), 0),
                                                  pool.strides[0],
                                                  keyOffset,
                                                  valueOffset,
                                                  pool.strides[3],
                                                  dim(op.getPool(), 4),
                                                  pool.strides[4],
                                                  a.t.pointer,
                                                  dim(a.tables, 1),
                                                  a.t.strides[0],
                                                  a.l.pointer,
                                                  scale,
                                                  a.o.pointer,
                                                  a.o.strides[0],
                                                  a.o.strides[1],
                                                  a.o.strides[2]});
  a.finish(b, loc, op);
  return success();
}

/// `memref` itself when it has the identity layout, else identityCopy
/// (copied in; the caller frees it).
Value withIdentityLayout(OpBuilder &b, Location loc, Value memref) {
  if (cast<MemRefType>(memref.getType()).getLayout().isIdentity())
    return memref;
  return identityCopy(b, loc, memref, /*copyIn=*/true);
}

/// Replaces a sits.ukernel.kivi_write on buffers by its kernel call. Key
/// and value share one set of strides in the call: both are taken in the
/// identity layout (copied when they are not).
LogicalResult lowerKiviWrite(OpBuilder &b, UkernelKiviWriteOp op,
                             func::FuncOp kernel) {
  if (!op.hasPureBufferSemantics())
    return op.emitOpError("must be on buffers to become a kernel call");
  if (!cast<MemRefType>(op.getPool().getType()).getLayout().isIdentity())
    return op.emitOpError("needs a KIVI pool in the identity layout, got ")
           << op.getPool().getType();
  Location loc = op.getLoc();
  b.setInsertionPoint(op);
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, i64, v).getResult();
  };
  auto dim = [&](Value memref, int64_t d) -> Value {
    return arith::IndexCastOp::create(b, loc, i64,
                                      memref::DimOp::create(b, loc, memref, d));
  };
  Value key = withIdentityLayout(b, loc, op.getKey());
  Value value = withIdentityLayout(b, loc, op.getValue());
  Value slots = withContiguousRows(b, loc, op.getSlotMapping(), true);
  Buffer k = getBuffer(b, loc, key), v = getBuffer(b, loc, value),
         s = getBuffer(b, loc, slots), pool = getBuffer(b, loc, op.getPool());
  KiviPool kivi = *getKiviPool(op.getKivi());
  func::CallOp::create(
      b, loc, kernel,
      ValueRange{dim(key, 0), dim(key, 2), dim(key, 1), dim(key, 3), k.pointer,
                 v.pointer, k.strides[0], k.strides[2], k.strides[1], s.pointer,
                 s.strides[0], pool.pointer, dim(op.getPool(), 0),
                 constant(kivi.layers),
                 arith::IndexCastOp::create(b, loc, i64, op.getLayer()),
                 constant(kivi.blockSize), constant(kivi.bits),
                 constant(kKiviReleaseTail)});
  Value copies[] = {key, value, slots};
  Value originals[] = {op.getKey(), op.getValue(), op.getSlotMapping()};
  for (auto [copy, original] : llvm::zip_equal(copies, originals))
    if (copy != original)
      memref::DeallocOp::create(b, loc, copy);
  op->erase();
  return success();
}

/// Replaces a sits.ukernel.paged_attention over a KIVI pool on buffers by
/// its kernel call.
LogicalResult lowerKiviAttention(OpBuilder &b, UkernelPagedAttentionOp op,
                                 func::FuncOp kernel) {
  if (!op.hasPureBufferSemantics())
    return op.emitOpError("must be on buffers to become a kernel call");
  auto poolType = cast<MemRefType>(op.getPool().getType());
  if (!poolType.getLayout().isIdentity())
    return op.emitOpError("needs a KIVI pool in the identity layout, got ")
           << poolType;
  Location loc = op.getLoc();
  b.setInsertionPoint(op);
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, i64, v).getResult();
  };
  auto dim = [&](Value memref, int64_t d) -> Value {
    return arith::IndexCastOp::create(b, loc, i64,
                                      memref::DimOp::create(b, loc, memref, d));
  };
  AttentionOperands a(b, loc, op);
  KiviPool kivi = *getKiviPool(op.getKivi());
  Value scale = arith::ConstantOp::create(b, loc, op.getScaleAttr());
  func::CallOp::create(
      b, loc, kernel,
      ValueRange{dim(a.query, 0),
                 dim(a.query, 2),
                 dim(a.query, 1),
                 constant(kivi.kvHeads),
                 dim(a.query, 3),
                 a.q.pointer,
                 a.q.strides[0],
                 a.q.strides[1],
                 a.q.strides[2],
                 a.pool.pointer,
                 dim(op.getPool(), 0),
                 constant(kivi.layers),
                 arith::IndexCastOp::create(b, loc, i64, op.getLayer()),
                 constant(kivi.blockSize),
                 constant(kivi.bits),
                 a.t.pointer,
                 dim(a.tables, 1),
                 a.t.strides[0],
                 a.l.pointer,
                 scale,
                 a.o.pointer,
                 a.o.strides[0],
                 a.o.strides[1],
                 a.o.strides[2]});
  a.finish(b, loc, op);
  return success();
}

struct SitsCpuLowerUkernelsPass
    : cpu::impl::SitsCpuLowerUkernelsBase<SitsCpuLowerUkernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(&getContext());
    SmallVector<UkernelKiviWriteOp> writes;
    module.walk([&](UkernelKiviWriteOp op) { writes.push_back(op); });
    for (UkernelKiviWriteOp op : writes) {
      if (failed(lowerKiviWrite(b, op, getOrDeclareKiviWrite(module))))
        return signalPassFailure();
      ++numCalls;
    }
    SmallVector<UkernelPagedAttentionOp> attention;
    module.walk([&](UkernelPagedAttentionOp op) { attention.push_back(op); });
    for (UkernelPagedAttentionOp op : attention) {
      LogicalResult lowered =
          op.getKivi()
              ? lowerKiviAttention(b, op, getOrDeclareKiviAttention(module))
              : lowerPagedAttention(
                    b, op,
                    getOrDeclarePagedAttention(module, op.getPool().getType()));
      if (failed(lowered))
        return signalPassFailure();
      ++numCalls;
    }
    SmallVector<linalg::GenericOp> marked;
    module.walk([&](linalg::GenericOp op) {
      if (op->hasAttr(kUkernelAttr))
        marked.push_back(op);
    });
    if (marked.empty())
      return;
    func::FuncOp qdot = getOrDeclareQDot(module);
    for (linalg::GenericOp op : marked) {
      auto name = op->getAttrOfType<StringAttr>(kUkernelAttr);
      StringRef kernel = name ? name.getValue() : StringRef();
      int64_t bits = kernel == kQDotI4 ? 4 : kernel == kQDotI8 ? 8 : 0;
      if (bits && succeeded(lowerQDot(b, op, bits, qdot)))
        ++numCalls;
      else
        ++numLeft;
    }
    if (qdot.symbolKnownUseEmpty(module))
      qdot.erase();
  }
};

} // namespace
