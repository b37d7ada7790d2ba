//===- MaterializeCopies.cpp - Data movement as linalg ops ----------------===//
//
// Bufferization turns some tensor ops into memref.copy on the host side of
// the program (a pad's interior, a concatenation's parts, a result that is
// an argument). On a GPU the host never touches device memory, so these
// become linalg ops here, which sits-gpu-tile-and-fuse puts into kernels
// like any elementwise op.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <functional>

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUMATERIALIZECOPIES
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// An all-parallel linalg.generic writing `init` (no inputs) whose element
/// at each position is `element(b, indices)`, given the position's
/// linalg.index values.
Value indexedGeneric(
    OpBuilder &b, Location loc, Value init,
    function_ref<Value(OpBuilder &, ArrayRef<Value>)> element) {
  auto type = cast<RankedTensorType>(init.getType());
  unsigned rank = type.getRank();
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, type, ValueRange{}, ValueRange{init},
      SmallVector<AffineMap>{
          AffineMap::getMultiDimIdentityMap(rank, b.getContext())},
      iterators, [&](OpBuilder &nb, Location, ValueRange) {
        SmallVector<Value> indices;
        for (unsigned d = 0; d < rank; ++d)
          indices.push_back(linalg::IndexOp::create(nb, loc, d));
        linalg::YieldOp::create(nb, loc, element(nb, indices));
      });
  return generic.getResult(0);
}

/// tensor.pad -> an all-parallel generic reading the source inside its
/// bounds and yielding the padding value outside.
struct PadToGeneric : OpRewritePattern<tensor::PadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::PadOp pad,
                                PatternRewriter &rewriter) const override {
    Value padding = pad.getConstantPaddingValue();
    RankedTensorType type = pad.getResultType();
    if (!padding || !type.hasStaticShape() ||
        !pad.getSourceType().hasStaticShape())
      return rewriter.notifyMatchFailure(pad, "needs a constant padding value "
                                              "and static shapes");
    Location loc = pad.getLoc();
    unsigned rank = type.getRank();
    Value source = pad.getSource();
    ArrayRef<int64_t> sourceShape = pad.getSourceType().getShape();
    SmallVector<OpFoldResult> low = pad.getMixedLowPad();
    Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                         type.getElementType());
    Value result = indexedGeneric(
        rewriter, loc, init, [&](OpBuilder &b, ArrayRef<Value> position) {
          Value valid;
          SmallVector<Value> indices;
          Value zero = arith::ConstantIndexOp::create(b, loc, 0);
          for (unsigned d = 0; d < rank; ++d) {
            Value i = position[d];
            Value lo = getValueOrCreateConstantIndexOp(b, loc, low[d]);
            Value s = arith::SubIOp::create(b, loc, i, lo);
            Value extent =
                arith::ConstantIndexOp::create(b, loc, sourceShape[d]);
            Value ge = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                             s, zero);
            Value lt = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                             s, extent);
            Value in = arith::AndIOp::create(b, loc, ge, lt);
            valid = valid ? arith::AndIOp::create(b, loc, valid, in).getResult()
                          : in;
            indices.push_back(s);
          }
          // Outside the source, read its first element (always there).
          for (Value &index : indices)
            index = arith::SelectOp::create(b, loc, valid, index, zero);
          Value v = tensor::ExtractOp::create(b, loc, source, indices);
          return arith::SelectOp::create(b, loc, valid, v, padding).getResult();
        });
    rewriter.replaceOp(pad, result);
    return success();
  }
};

/// A dynamically shaped tensor.concat -> an all-parallel generic whose
/// element at each position along the concatenated dimension comes from
/// the input covering it, chosen by branches: an input may be empty (a
/// past of length 0), and only the branch taken reads.
LogicalResult dynamicConcatToGeneric(tensor::ConcatOp concat,
                                     PatternRewriter &rewriter) {
  Location loc = concat.getLoc();
  RankedTensorType type = concat.getResultType();
  int64_t dim = concat.getDim();
  ValueRange inputs = concat.getInputs();
  // Where each input ends along `dim`, computed once on the host.
  SmallVector<Value> ends;
  Value end = arith::ConstantIndexOp::create(rewriter, loc, 0);
  for (Value input : inputs) {
    Value extent = tensor::DimOp::create(rewriter, loc, input, dim);
    end = arith::AddIOp::create(rewriter, loc, end, extent);
    ends.push_back(end);
  }
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(rewriter, loc, inputs.front());
  sizes[dim] = end;
  Value init =
      tensor::EmptyOp::create(rewriter, loc, sizes, type.getElementType());
  Value result = indexedGeneric(
      rewriter, loc, init, [&](OpBuilder &b, ArrayRef<Value> indices) {
        Value position = indices[dim];
        // Input i's element; later inputs in the else branch.
        std::function<Value(OpBuilder &, unsigned)> from =
            [&](OpBuilder &b, unsigned i) -> Value {
          SmallVector<Value> at(indices);
          if (i > 0)
            at[dim] = arith::SubIOp::create(b, loc, position, ends[i - 1]);
          if (i + 1 == inputs.size())
            return tensor::ExtractOp::create(b, loc, inputs[i], at);
          Value inside = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::slt, position, ends[i]);
          auto branch = scf::IfOp::create(
              b, loc, inside,
              [&](OpBuilder &b, Location) {
                scf::YieldOp::create(
                    b, loc,
                    tensor::ExtractOp::create(b, loc, inputs[i], at)
                        .getResult());
              },
              [&](OpBuilder &b, Location) {
                scf::YieldOp::create(b, loc, from(b, i + 1));
              });
          return branch.getResult(0);
        };
        return from(b, 0);
      });
  if (result.getType() != type)
    result = tensor::CastOp::create(rewriter, loc, type, result);
  rewriter.replaceOp(concat, result);
  return success();
}

/// tensor.concat -> an all-parallel generic reading, along the concatenated
/// dimension, from the input that covers each position.
struct ConcatToGeneric : OpRewritePattern<tensor::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = concat.getResultType();
    if (!type.hasStaticShape() || llvm::any_of(concat.getInputs(), [](Value v) {
          return !cast<RankedTensorType>(v.getType()).hasStaticShape();
        }))
      return dynamicConcatToGeneric(concat, rewriter);
    Location loc = concat.getLoc();
    int64_t dim = concat.getDim();
    SmallVector<int64_t> starts;
    int64_t offset = 0;
    for (Value input : concat.getInputs()) {
      starts.push_back(offset);
      offset += cast<RankedTensorType>(input.getType()).getDimSize(dim);
    }
    Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                         type.getElementType());
    Value concatenated = indexedGeneric(
        rewriter, loc, init, [&](OpBuilder &b, ArrayRef<Value> indices) {
          Value position = indices[dim];
          Value zero = arith::ConstantIndexOp::create(b, loc, 0);
          // Last input first; each earlier one takes over below its end.
          Value result;
          for (unsigned i = starts.size(); i-- > 0;) {
            Value input = concat.getInputs()[i];
            int64_t extent =
                cast<RankedTensorType>(input.getType()).getDimSize(dim);
            Value start = arith::ConstantIndexOp::create(b, loc, starts[i]);
            Value last = arith::ConstantIndexOp::create(b, loc, extent - 1);
            // Clamped into the input, so the read is always in bounds.
            Value local = arith::SubIOp::create(b, loc, position, start);
            local = arith::MaxSIOp::create(b, loc, local, zero);
            local = arith::MinSIOp::create(b, loc, local, last);
            SmallVector<Value> at(indices);
            at[dim] = local;
            Value v = tensor::ExtractOp::create(b, loc, input, at);
            if (!result) {
              result = v;
              continue;
            }
            Value end =
                arith::ConstantIndexOp::create(b, loc, starts[i] + extent);
            Value inside = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::slt, position, end);
            result = arith::SelectOp::create(b, loc, inside, v, result);
          }
          return result;
        });
    rewriter.replaceOp(concat, concatenated);
    return success();
  }
};

bool isComputedByLinalg(Value value) {
  return isa_and_present<linalg::LinalgOp, tensor::InsertSliceOp>(
      value.getDefiningOp());
}

Value copyOf(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, value);
  Value init = tensor::EmptyOp::create(b, loc, sizes, type.getElementType());
  return linalg::CopyOp::create(b, loc, value, init).getResult(0);
}

struct SitsGpuMaterializeCopiesPass
    : sits::gpu::impl::SitsGpuMaterializeCopiesBase<
          SitsGpuMaterializeCopiesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    MLIRContext *ctx = &getContext();
    {
      RewritePatternSet patterns(ctx);
      patterns.add<PadToGeneric>(ctx);
      patterns.add<ConcatToGeneric>(ctx);
      if (failed(applyPatternsGreedily(func, std::move(patterns))))
        return signalPassFailure();
    }
    OpBuilder b(ctx);
    // Parts inserted into a larger tensor that no kernel computes.
    func.walk([&](tensor::InsertSliceOp insert) {
      Value source = insert.getSource();
      if (isComputedByLinalg(source) ||
          !isa<RankedTensorType>(source.getType()))
        return;
      b.setInsertionPoint(insert);
      Value copy = copyOf(b, insert.getLoc(), source);
      insert.getSourceMutable().set(copy);
    });
    // Results that are arguments, constants or views: the runtime's output
    // buffer is written by a kernel. A value returned twice is copied for
    // each further result.
    for (auto ret : func.getOps<func::ReturnOp>()) {
      llvm::SmallDenseSet<Value> seen;
      b.setInsertionPoint(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Value v = operand.get();
        if (!isa<RankedTensorType>(v.getType()))
          continue;
        if (isComputedByLinalg(v) && seen.insert(v).second)
          continue;
        operand.set(copyOf(b, ret.getLoc(), v));
      }
    }
  }
};

} // namespace
