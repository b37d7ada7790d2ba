/* sits_entry_main(weights: i8[16], x: f32[4]) -> y: f32[4]:
   y[i] = x[i] * w[i] + w[i], w the four floats stored in the weights. */
#include "memref.h"

SITS_EXPORT void sits_entry_main(void **args) {
  MemRef1 *w = (MemRef1 *)args[0], *x = (MemRef1 *)args[1],
          *y = (MemRef1 *)args[2];
  SITS_CHECK_ALIGNED(w->aligned, 64);
  SITS_CHECK_ALIGNED(x->aligned, 4);
  SITS_CHECK_ALIGNED(y->aligned, 4);
  if (w->sizes[0] != 16 || w->strides[0] != 1)
    __builtin_trap();
  const float *wf = (const float *)w->aligned;
  for (int64_t i = 0; i < 4; ++i)
    ((float *)y->aligned)[i] = ((const float *)x->aligned)[i] * wf[i] + wf[i];
}
