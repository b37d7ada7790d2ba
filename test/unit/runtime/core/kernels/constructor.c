/* Like add.c's sits_entry_main, plus an ELF constructor that creates the
   file named by $SITS_TEST_MARKER: tests use it to prove that refused
   artifacts never get as far as running code. */
#include "memref.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void markLoaded(void) {
  const char *path = getenv("SITS_TEST_MARKER");
  if (path && *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      (void)write(fd, "loaded\n", 7);
      close(fd);
    }
  }
}

SITS_EXPORT void sits_entry_main(void **args) {
  MemRef2 *x = (MemRef2 *)args[0], *y = (MemRef2 *)args[1],
          *z = (MemRef2 *)args[2];
  int64_t n = x->sizes[0] * x->sizes[1];
  for (int64_t i = 0; i < n; ++i)
    ((float *)z->aligned)[i] =
        ((const float *)x->aligned)[i] + ((const float *)y->aligned)[i];
}
