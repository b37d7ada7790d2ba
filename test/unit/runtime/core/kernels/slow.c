/* sits_entry_main(seconds: f64[1]) -> out: f64[1]: sleeps `seconds`, then
   copies the input (for checking the caller's lock is released). */
#include "memref.h"

#include <time.h>

SITS_EXPORT void sits_entry_main(void **args) {
  MemRef1 *in = (MemRef1 *)args[0], *out = (MemRef1 *)args[1];
  double s = ((const double *)in->aligned)[0];
  struct timespec ts;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  nanosleep(&ts, 0);
  ((double *)out->aligned)[0] = s;
}
