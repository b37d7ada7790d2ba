/* sits_entry_main(x: f32[?], y: f32[?], status: i32 scalar): y = x, and
   the status argument as compiled index checks set it: 1 when some x < 0,
   else 3 when some x > 1000 (a code past the two messages the tests give),
   else left as the runtime zeroed it. */
#include "memref.h"

SITS_EXPORT void sits_entry_main(void **args) {
  MemRef1 *x = (MemRef1 *)args[0], *y = (MemRef1 *)args[1];
  MemRef0 *status = (MemRef0 *)args[2];
  SITS_CHECK_ALIGNED(status->aligned, 4);
  int32_t *flag = (int32_t *)status->aligned;
  if (*flag != 0)
    __builtin_trap(); /* the runtime must zero it before every call */
  const float *xs = (const float *)x->aligned;
  for (int64_t i = 0; i < x->sizes[0]; ++i) {
    ((float *)y->aligned)[i] = xs[i];
    if (xs[i] < 0 && *flag == 0)
      *flag = 1;
    else if (xs[i] > 1000 && *flag == 0)
      *flag = 3;
  }
}
