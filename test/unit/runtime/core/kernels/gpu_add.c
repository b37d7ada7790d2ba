/* GPU host code written by hand against MLIR's GPU runtime ABI (what
   gpu-to-llvm and #gpu.select_object emit), for the fake CUDA driver
   (test/unit/runtime/fake_cuda), which runs the kernel it names on the host:

     sits_entry_main(weights: i8[16] = 4 x f32 w, x: f32[?, 4]) -> z: f32[?, 4]
     t = x + w (broadcast over rows), z = t + w, through a buffer of
     mgpuMemAlloc; every pointer it sees is a device pointer.

     sits_entry_update(weights, pool: f32[?, 4], x: f32[?, 4]) -> z
     pool += x in place (the pool is an input the code updates, as a paged
     KV pool is), then z = pool + w.

   Like real host code, it loads its device image in an ELF constructor and
   unloads it in the destructor. */
#include "memref.h"

#include <stddef.h>

void *mgpuModuleLoad(void *data, size_t size);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void *mgpuStreamCreate(void);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamDestroy(void *stream);
void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool hostShared);
void mgpuMemFree(void *ptr, void *stream);

static const char kImage[] = "SITSFAKE\nsits_fake_add_f32\n";
static void *gModule;

__attribute__((constructor)) static void load(void) {
  gModule = mgpuModuleLoad((void *)kImage, sizeof(kImage));
}

__attribute__((destructor)) static void unload(void) {
  mgpuModuleUnload(gModule);
}

static void add(void *stream, const float *a, const float *b, float *c,
                int64_t n) {
  int64_t bn = 4;
  void *params[] = {&a, &b, &c, &n, &bn};
  /* No rows: a grid of 0 blocks, as compiled code computes it for an empty
     dynamic extent. */
  intptr_t block = 128, grid = (n + block - 1) / block;
  mgpuLaunchKernel(mgpuModuleGetFunction(gModule, "sits_fake_add_f32"), grid, 1,
                   1, block, 1, 1, 0, stream, params, NULL, 5);
}

SITS_EXPORT void sits_entry_main(void **args) {
  MemRef1 *w = (MemRef1 *)args[0];
  MemRef2 *x = (MemRef2 *)args[1], *z = (MemRef2 *)args[2];
  int64_t n = x->sizes[0] * x->sizes[1];
  void *stream = mgpuStreamCreate();
  float *t = (float *)mgpuMemAlloc((uint64_t)n * sizeof(float), stream, false);
  add(stream, (const float *)x->aligned, (const float *)w->aligned, t, n);
  add(stream, t, (const float *)w->aligned, (float *)z->aligned, n);
  mgpuMemFree(t, stream);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
}

SITS_EXPORT void sits_entry_update(void **args) {
  MemRef1 *w = (MemRef1 *)args[0];
  MemRef2 *pool = (MemRef2 *)args[1], *x = (MemRef2 *)args[2],
          *z = (MemRef2 *)args[3];
  int64_t n = x->sizes[0] * x->sizes[1];
  void *stream = mgpuStreamCreate();
  float *p = (float *)pool->aligned;
  void *params[] = {&p, &x->aligned, &p, &n, &n};
  intptr_t block = 128, grid = (n + block - 1) / block;
  mgpuLaunchKernel(mgpuModuleGetFunction(gModule, "sits_fake_add_f32"), grid, 1,
                   1, block, 1, 1, 0, stream, params, NULL, 5);
  add(stream, p, (const float *)w->aligned, (float *)z->aligned, n);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
}
