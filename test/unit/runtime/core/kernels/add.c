/* sits_entry_main(x: f32[?, 4], y: f32[?, 4]) -> z: f32[?, 4], z = x + y.
   Also exports sits_entry_scale(x: f32[?]) -> out: f32[?], out = 2 x. */
#include "memref.h"

SITS_EXPORT void sits_entry_main(void **args) {
  MemRef2 *x = (MemRef2 *)args[0], *y = (MemRef2 *)args[1],
          *z = (MemRef2 *)args[2];
  SITS_CHECK_ALIGNED(x->aligned, 4);
  SITS_CHECK_ALIGNED(y->aligned, 4);
  SITS_CHECK_ALIGNED(z->aligned, 4);
  if (x->strides[1] != 1 || x->strides[0] != x->sizes[1] || z->strides[1] != 1)
    __builtin_trap();
  int64_t n = x->sizes[0] * x->sizes[1];
  const float *a = (const float *)x->aligned + x->offset;
  const float *b = (const float *)y->aligned + y->offset;
  float *c = (float *)z->aligned + z->offset;
  for (int64_t i = 0; i < n; ++i)
    c[i] = a[i] + b[i];
}

SITS_EXPORT void sits_entry_scale(void **args) {
  MemRef1 *x = (MemRef1 *)args[0], *out = (MemRef1 *)args[1];
  SITS_CHECK_ALIGNED(x->aligned, 4);
  SITS_CHECK_ALIGNED(out->aligned, 4);
  for (int64_t i = 0; i < x->sizes[0]; ++i)
    ((float *)out->aligned)[i] = 2.0f * ((const float *)x->aligned)[i];
}
