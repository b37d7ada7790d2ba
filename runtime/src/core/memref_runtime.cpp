//===- memref_runtime.cpp - Runtime helpers MLIR's memref lowering calls
//---===//
//
// `memref.copy` between memrefs that are not both contiguous lowers to a
// call of `memrefCopy` (upstream: mlir/lib/ExecutionEngine/CRunnerUtils.cpp,
// in libmlir_c_runner_utils). SitsRuntime exports an implementation with the
// same signature so compiled code needs no MLIR library at run time.
//
//===----------------------------------------------------------------------===//
#include "sits/runtime/export.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace {
/// An unranked memref: the rank and a pointer to a ranked descriptor
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;
};

struct RankedView {
  char *aligned;
  int64_t offset;
  const int64_t *sizes;
  const int64_t *strides;
};

RankedView view(const UnrankedMemRef *m) {
  auto *words = static_cast<int64_t *>(m->descriptor);
  RankedView v;
  std::memcpy(&v.aligned, &words[1], sizeof(void *));
  v.offset = words[2];
  v.sizes = words + 3;
  v.strides = words + 3 + m->rank;
  return v;
}
} // namespace

extern "C" SITS_RUNTIME_API void
memrefCopy(int64_t elemSize, UnrankedMemRef *srcArg, UnrankedMemRef *dstArg) {
  int64_t rank = srcArg->rank;
  RankedView src = view(srcArg), dst = view(dstArg);
  char *s = src.aligned + src.offset * elemSize;
  char *d = dst.aligned + dst.offset * elemSize;
  if (rank == 0) {
    std::memcpy(d, s, size_t(elemSize));
    return;
  }
  int64_t total = 1;
  for (int64_t i = 0; i < rank; ++i)
    total *= src.sizes[i];
  if (total == 0)
    return;
  // Both contiguous row-major: one memcpy.
  bool contiguous = true;
  int64_t expect = 1;
  for (int64_t i = rank; i-- > 0;) {
    if (src.sizes[i] != 1 &&
        (src.strides[i] != expect || dst.strides[i] != expect))
      contiguous = false;
    expect *= src.sizes[i];
  }
  if (contiguous) {
    std::memmove(d, s, size_t(total * elemSize));
    return;
  }
  std::vector<int64_t> index(size_t(rank), 0);
  int64_t sOff = 0, dOff = 0;
  for (int64_t n = 0; n < total; ++n) {
    std::memcpy(d + dOff * elemSize, s + sOff * elemSize, size_t(elemSize));
    for (int64_t axis = rank - 1; axis >= 0; --axis) {
      ++index[axis];
      sOff += src.strides[axis];
      dOff += dst.strides[axis];
      if (index[axis] < src.sizes[axis])
        break;
      sOff -= src.strides[axis] * src.sizes[axis];
      dOff -= dst.strides[axis] * src.sizes[axis];
      index[axis] = 0;
    }
  }
}
