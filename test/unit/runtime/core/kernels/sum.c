/* sits_entry_main(x: f32[?]) -> (total: f32[], count: i64[]): rank-0
   (scalar) outputs, whose descriptors are {allocated, aligned, offset}. */
#include "memref.h"

SITS_EXPORT void sits_entry_main(void **args) {
  MemRef1 *x = (MemRef1 *)args[0];
  MemRef0 *total = (MemRef0 *)args[1], *count = (MemRef0 *)args[2];
  SITS_CHECK_ALIGNED(total->aligned, 4);
  SITS_CHECK_ALIGNED(count->aligned, 8);
  float s = 0;
  for (int64_t i = 0; i < x->sizes[0]; ++i)
    s += ((const float *)x->aligned)[i];
  *(float *)total->aligned = s;
  *(int64_t *)count->aligned = x->sizes[0];
}
