//===- thread_pool.h - The worker threads compiled code runs on
//------------===//
//
// Compiled code that splits work across threads does so through the
// runtime's fork-join (`sitsRuntimeParallelFor`, one call per parallel loop)
// or, in older artifacts, MLIR's async runtime ABI (`mlirAsyncRuntimeExecute`,
// `...AwaitAllInGroup`, ...), both of which SitsRuntime implements on one
// process-wide pool of std::threads. Code computes on `numThreads()` threads:
// the thread that called it, which runs iterations of each parallel loop
// while it waits for the loop, and `numThreads() - 1` pool workers; with a
// count of 1, a fork-join runs on the caller and async code on one worker. The
// count starts at `defaultNumThreads()`: the value of SITS_NUM_THREADS when it
// is a positive integer, else the number of CPUs this process may run on. It
// can be changed at any time, also while code runs (workers above the new count
// leave after their current task).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_THREAD_POOL_H
#define SITS_RUNTIME_THREAD_POOL_H

#include "sits/runtime/export.h"
#include "sits/runtime/status.h"

#include <cstdint>

namespace sits::runtime {

/// SITS_NUM_THREADS when set to a positive integer, else the CPUs in this
/// process's affinity mask (at least 1).
SITS_RUNTIME_API int defaultNumThreads();
/// The threads compiled code computes on (the caller and the pool's
/// workers; what the pool will start with, if not started yet).
SITS_RUNTIME_API int numThreads();
/// Sets the thread count; 0 restores `defaultNumThreads()`. kInvalidArgument
/// for n < 0 or n > 4096, or when called from a pool worker.
SITS_RUNTIME_API Status setNumThreads(int n);

/// Counters for tests and diagnostics.
struct ThreadPoolStats {
  int threads = 0;
  int64_t tasksExecuted = 0;
  /// Async runtime objects (tokens, values, groups) not yet destroyed.
  int64_t liveAsyncObjects = 0;
};
SITS_RUNTIME_API ThreadPoolStats threadPoolStats();

} // namespace sits::runtime

#endif // SITS_RUNTIME_THREAD_POOL_H
