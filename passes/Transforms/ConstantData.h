//===- ConstantData.h - Reading and re-laying out constant data -*- C++ -*-===//
//
// Passes that re-lay out weights at compile time (transposed, in panels,
// as a GEMM filter) read a constant's raw bytes and write new ones. These
// helpers are the one place that knows how constants hold their data, and
// where a weight's constants are: its own `arith.constant`, or, in a
// model's repeated layer outlined into one private function, the constant
// each call passes for the argument.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_TRANSFORMS_CONSTANTDATA_H
#define SITS_PASSES_TRANSFORMS_CONSTANTDATA_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <string>

namespace mlir::sits {

/// The row-major bytes of a constant (inline dense data or a resource
/// blob), when it has them: statically shaped, byte-sized elements, not a
/// splat. The view is valid as long as the attribute is.
std::optional<ArrayRef<char>> getConstantBytes(ElementsAttr value);

/// Hints that the data of `value`, just re-laid out into a new constant,
/// is not needed again soon. For imported weights (immutable resource
/// blobs, which the frontend maps from the model's file) this drops their
/// pages from the compiler's resident set, so that the original and the
/// re-laid-out copy of every weight are not resident together; the page
/// cache keeps them for a later read. It never changes the data
/// (madvise(MADV_DONTNEED) of file pages); a no-op for anything else. An
/// immutable blob must therefore view a file (mapped copy-on-write and
/// never written, or shared): anonymous data is a mutable blob.
void releaseConstantPages(ElementsAttr value);

/// `size` bytes of re-laid-out weight data, written by `fill`, as an
/// immutable blob. Large ones are filled on the heap, then written to an
/// unlinked scratch file and mapped from it read-only, so their pages stay
/// out of the compiler's resident set until read (and are unmapped again
/// past a window of the newest): in anonymous memory every re-laid-out
/// weight of a model would stay resident until the artifact is written (4
/// GiB for a 1 B-parameter model), while the artifact writer reads them
/// back one at a time. Small ones, or when no scratch file can be made,
/// stay on the heap.
AsmResourceBlob makeWeightBlob(size_t size,
                               function_ref<void(MutableArrayRef<char>)> fill);

/// Writes bytes [begin, begin + out.size()) of a weight's new layout to
/// `out`. Called for disjoint ranges at once from several threads.
using WeightRangeFill =
    function_ref<void(size_t begin, MutableArrayRef<char> out)>;

/// Like makeWeightBlob, for weights in their final layout (what the code
/// reads; no later pass re-lays them out), filled a range at a time on the
/// context's threads, each range a whole number of `grain` bytes. When the
/// compile in `context` has a weight file (setWeightFile), large ones are
/// written straight to their place in it, the artifact being compiled, so
/// that each of their bytes is written once.
AsmResourceBlob makeFinalWeightBlob(MLIRContext *context, size_t size,
                                    size_t grain, WeightRangeFill fill);

/// Sends the final weights of compiles in `context` (of 64 KiB or more) to
/// the file open as `fd` (duplicated), one after the other on 64-byte
/// boundaries from byte `base` on; `fd` < 0 stops that. The blobs already
/// there stay mapped while the context holds them.
void setWeightFile(MLIRContext *context, int fd, uint64_t base);

/// Where in `context`'s weight file (from its base) the blob whose data
/// `bytes` are was written, when it was.
std::optional<uint64_t> getWeightFileOffset(MLIRContext *context,
                                            ArrayRef<char> bytes);

/// The bytes of the one element of a splat of byte-sized elements (a zero
/// bias, say).
std::optional<ArrayRef<char>> getSplatElementBytes(ElementsAttr value);

/// `parts` (each plain data, getConstantBytes, or a splat, of `type`'s
/// element type and rank 1 or 2) joined along `dim` (0 or, for rank 2, 1)
/// into one constant of `type`, written with makeWeightBlob.
TypedAttr joinConstants(ArrayRef<ElementsAttr> parts, int64_t dim,
                        RankedTensorType type);

/// Bytes per element of a constant whose data getConstantBytes can read.
int64_t getElementBytes(ShapedType type);

/// The first `out.size()` elements of raw constant data of float type
/// `type` (f32, f16 or bf16: every value of which f32 holds exactly).
void loadFloats(ArrayRef<char> bytes, FloatType type,
                MutableArrayRef<float> out);

/// A new constant of `type` holding `blob`: a resource named after
/// `original` (with `suffix`) when `original` is one, inline dense data
/// otherwise.
TypedAttr makeConstantLike(ElementsAttr original, RankedTensorType type,
                           AsmResourceBlob blob, StringRef suffix);

/// The calls of a module's private functions, found once per pass run so
/// that finding the constants of every weight stays linear in the module.
class CallSites {
public:
  explicit CallSites(ModuleOp module);

  /// Every call of `func` when it is private and referenced by calls only
  /// (in IR order); nothing otherwise.
  ArrayRef<func::CallOp> lookup(func::FuncOp func) const;

private:
  DenseMap<Operation *, SmallVector<func::CallOp>> calls;
};

/// One constant a value holds on a path into it.
struct ConstantSource {
  arith::ConstantOp op;
  ElementsAttr value;
  /// The call passing `op` for a function argument; null for the value's
  /// own constant.
  func::CallOp call;
};

/// The constants `value` holds on every path into it: the `arith.constant`
/// defining it, or, for an argument of a private function, the one each of
/// its calls passes. Empty when a path brings anything else, or the
/// function has other uses than calls.
SmallVector<ConstantSource> getConstantSources(Value value,
                                               const CallSites &calls);

/// A value, where `value` is, holding `derive` of each of its `sources`
/// (getConstantSources of `value`), all of one type: for a constant, a new
/// constant at the rewriter's insertion point; for a function argument, a
/// new argument at the end of the function's, for which each call passes
/// the constant derived from its own, created right before the call.
Value deriveConstant(RewriterBase &rewriter, Value value,
                     ArrayRef<ConstantSource> sources,
                     function_ref<TypedAttr(const ConstantSource &)> derive);

/// The constants of a value computed from `parts` (the weights a
/// `tensor.concat` joins), path by path, each path holding one constant per
/// part: one path when every part is its own constant, one per call when
/// every part is an argument of one private function. Empty when a part has
/// no constants or the parts mix the two.
SmallVector<SmallVector<ConstantSource>>
getJoinedConstantSources(ValueRange parts, const CallSites &calls);

/// deriveConstant for a value computed from `parts` whose constants are
/// `paths` (getJoinedConstantSources): `derive` of each path's constants, as
/// a constant or, for arguments, a new argument of their function.
Value deriveJoinedConstant(
    RewriterBase &rewriter, ValueRange parts,
    ArrayRef<SmallVector<ConstantSource>> paths,
    function_ref<TypedAttr(ArrayRef<ConstantSource>)> derive);

/// Erases `value`, whose constants are `sources` (getConstantSources of
/// `value`), once nothing uses it: its constant, or the function argument
/// with what each call passes for it (and that constant, when this was its
/// last use). Does nothing without sources.
void eraseIfUnused(RewriterBase &rewriter, Value value,
                   ArrayRef<ConstantSource> sources);

/// What `value` is on the path through `call`: the operand `call` passes
/// for it when `value` is an argument of the function `call` calls; `value`
/// itself otherwise, or when `call` is null.
Value getPassedValue(Value value, func::CallOp call);

} // namespace mlir::sits

#endif // SITS_PASSES_TRANSFORMS_CONSTANTDATA_H
