/* sits_entry_main(x: f32[n], y: f32[n]) -> (z: f32[n], threads: i64[1]):
   z = x + y computed in blocks on the runtime's worker pool through the MLIR
   async runtime ABI, the way async-parallel-for lowers: one token per block
   added to a group, a blocking wait on the group, and a continuation
   registered with AwaitAllInGroupAndExecute. `threads` receives the number
   of distinct threads that ran blocks. */
#include "memref.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
  const float *a, *b;
  float *c;
  int64_t begin, end;
  void *token;
  pthread_t thread;
} Block;

static void runBlock(void *handle) {
  Block *blk = (Block *)handle;
  for (int64_t i = blk->begin; i < blk->end; ++i)
    blk->c[i] = blk->a[i] + blk->b[i];
  blk->thread = pthread_self();
  mlirAsyncRuntimeEmplaceToken(blk->token);
}

typedef struct {
  void *token;
  int ran;
} Continuation;

static void whenAllDone(void *handle) {
  Continuation *k = (Continuation *)handle;
  k->ran = 1;
  mlirAsyncRuntimeEmplaceToken(k->token);
}

SITS_EXPORT void sits_entry_main(void **args) {
  MemRef1 *x = (MemRef1 *)args[0], *y = (MemRef1 *)args[1],
          *z = (MemRef1 *)args[2];
  MemRef1 *threads = (MemRef1 *)args[3];
  SITS_CHECK_ALIGNED(x->aligned, 4);
  SITS_CHECK_ALIGNED(z->aligned, 4);
  int64_t n = x->sizes[0];
  int64_t workers = mlirAsyncRuntimGetNumWorkerThreads();
  int64_t blocks = workers * 4;
  if (blocks > n)
    blocks = n > 0 ? n : 1;
  Block *blk = (Block *)calloc((size_t)blocks, sizeof(Block));
  void *group = mlirAsyncRuntimeCreateGroup(blocks);
  for (int64_t k = 0; k < blocks; ++k) {
    blk[k].a = (const float *)x->aligned;
    blk[k].b = (const float *)y->aligned;
    blk[k].c = (float *)z->aligned;
    blk[k].begin = n * k / blocks;
    blk[k].end = n * (k + 1) / blocks;
    blk[k].token = mlirAsyncRuntimeCreateToken();
    mlirAsyncRuntimeAddTokenToGroup(blk[k].token, group);
    mlirAsyncRuntimeExecute(&blk[k], runBlock);
  }
  Continuation k = {mlirAsyncRuntimeCreateToken(), 0};
  mlirAsyncRuntimeAwaitAllInGroupAndExecute(group, &k, whenAllDone);
  mlirAsyncRuntimeAwaitAllInGroup(group);
  mlirAsyncRuntimeAwaitToken(k.token);
  if (mlirAsyncRuntimeIsGroupError(group) || !k.ran)
    __builtin_trap();
  int64_t distinct = 0;
  for (int64_t i = 0; i < blocks; ++i) {
    int seen = 0;
    for (int64_t j = 0; j < i; ++j)
      if (pthread_equal(blk[i].thread, blk[j].thread))
        seen = 1;
    distinct += !seen;
  }
  ((int64_t *)threads->aligned)[0] = distinct;
  for (int64_t i = 0; i < blocks; ++i)
    mlirAsyncRuntimeDropRef(blk[i].token, 1);
  mlirAsyncRuntimeDropRef(k.token, 1);
  mlirAsyncRuntimeDropRef(group, 1);
  free(blk);
}
