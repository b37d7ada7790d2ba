/* Exports sits_entry_main but needs a function nothing provides: the
   dynamic loader must refuse it (RTLD_NOW). */
#include "memref.h"

void sits_test_function_nobody_defines(void);

SITS_EXPORT void sits_entry_main(void **args) {
  (void)args;
  sits_test_function_nobody_defines();
}
