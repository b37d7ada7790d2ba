//===- worker_pool.h - The process-wide worker threads (internal) ----------===//
//
// One FIFO queue of plain (function, argument) tasks served by N std::threads.
// The async runtime ABI submits coroutine resumptions here. A worker that
// blocks in an await keeps draining the queue while it waits, so blocking
// awaits inside tasks cannot starve the pool.
//
// Lifetime: the pool is created on first use and never destroyed (compiled
// code may still run while static destructors do); a forked child starts a
// fresh pool on first use instead of inheriting threads that do not exist.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_WORKER_POOL_H
#define SITS_RUNTIME_CORE_WORKER_POOL_H

#include "sits/runtime/status.h"

#include <chrono>
#include <cstdint>

namespace sits::runtime::pool {

struct Task {
  void (*fn)(void *);
  void *arg;
};

/// Queues `task`, starting the pool if needed.
void submit(Task task);
/// Runs one queued task on the calling thread; false when none was queued.
bool tryRunOne();
/// Whether the calling thread is one of the pool's workers.
bool onWorkerThread();
int size();
Status resize(int n);
int64_t tasksExecuted();
/// Parks the calling worker for at most `timeout` or until new work is
/// queued (used by awaits that help while they wait).
void waitForWork(std::chrono::microseconds timeout);

} // namespace sits::runtime::pool

#endif // SITS_RUNTIME_CORE_WORKER_POOL_H
