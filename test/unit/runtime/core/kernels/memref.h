/* MLIR memref descriptors and the async runtime ABI, as compiled SITS code
   sees them. Shared by the test kernels of the C++ and Python suites. */
#ifndef SITS_TEST_KERNELS_MEMREF_H
#define SITS_TEST_KERNELS_MEMREF_H

#include <stdbool.h>
#include <stdint.h>

#define SITS_EXPORT __attribute__((visibility("default")))

/* A rank-0 (scalar) memref. */
typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
} MemRef0;

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
} MemRef1;

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
} MemRef2;

/* Compiled code assumes contiguous buffers aligned to their elements (and
   the weights section to 64 bytes); trap when the runtime hands it anything
   else. */
#define SITS_CHECK_ALIGNED(p, bytes)                                           \
  do {                                                                         \
    if (((uintptr_t)(p)) % (bytes) != 0)                                       \
      __builtin_trap();                                                        \
  } while (0)

void *mlirAsyncRuntimeCreateToken(void);
void *mlirAsyncRuntimeCreateValue(int64_t size);
void *mlirAsyncRuntimeCreateGroup(int64_t size);
int64_t mlirAsyncRuntimeAddTokenToGroup(void *token, void *group);
void mlirAsyncRuntimeEmplaceToken(void *token);
void mlirAsyncRuntimeSetTokenError(void *token);
void mlirAsyncRuntimeExecute(void *handle, void (*resume)(void *));
void mlirAsyncRuntimeAwaitToken(void *token);
void mlirAsyncRuntimeAwaitAllInGroup(void *group);
void mlirAsyncRuntimeAwaitAllInGroupAndExecute(void *group, void *handle,
                                               void (*resume)(void *));
bool mlirAsyncRuntimeIsGroupError(void *group);
void mlirAsyncRuntimeAddRef(void *obj, int64_t count);
void mlirAsyncRuntimeDropRef(void *obj, int64_t count);
int64_t mlirAsyncRuntimGetNumWorkerThreads(void);

#endif
