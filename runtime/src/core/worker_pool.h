//===- worker_pool.h - The process-wide worker threads (internal)
//----------===//
//
// One FIFO queue of plain (function, argument) tasks served by N - 1
// std::threads for a thread count of N > 1, the thread awaiting a parallel
// region running queued tasks as well, and by one thread for N = 1. The async
// runtime ABI submits coroutine resumptions here. A worker that blocks in an
// await keeps draining the queue while it waits, so blocking awaits inside
// tasks cannot starve the pool. A worker that runs out of work polls the queue
// for kSpinBudget before it parks, and submit() wakes a parked worker only when
// the spinning ones cannot take the task.
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
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sits::runtime::pool {

struct Task {
  void (*fn)(void *);
  void *arg;
};

/// Queues `copies` copies of `task`, starting the pool if needed.
void submit(Task task, int copies = 1);
/// Runs one queued task on the calling thread; false when none was queued.
bool tryRunOne();
/// Whether a thread awaiting tasks runs queued ones itself (it counts as
/// one of the threads when there are several).
bool callerRunsTasks();
/// Whether tasks are queued (a relaxed read: a hint for pollers).
bool hasQueuedTasks();
/// Whether the calling thread is one of the pool's workers.
bool onWorkerThread();
int size();
/// The thread count, read without the pool's lock (a hint for callers that
/// decide how many helpers to queue).
int sizeHint();
Status resize(int n);
int64_t tasksExecuted();
/// Parks the calling worker for at most `timeout` or until new work is
/// queued (used by awaits that help while they wait).
void waitForWork(std::chrono::microseconds timeout);

/// How long a thread that just finished work polls for more (an idle worker
/// for a task, an await for its object) before it blocks. Parallel regions
/// of compiled code take tens of microseconds, with little serial work in
/// between; blocking after each costs a futex wait and a wake (perf: ~1/4
/// of a small decode step in the kernel). The bound keeps an idle process
/// from burning cores: past it, threads block until woken.
inline constexpr std::chrono::microseconds kSpinBudget{200};

/// Polls `done()` for at most `budget`: first with the CPU's pause hint,
/// then yielding each time, so that a poller gives its core to the thread
/// it waits for when there are more threads than cores. Returns whether
/// `done()` became true.
template <typename Done>
bool spinUntil(Done done, std::chrono::microseconds budget = kSpinBudget) {
  constexpr int kPausePolls = 64;
  for (int i = 0; i < kPausePolls; ++i) {
    if (done())
      return true;
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  auto deadline = std::chrono::steady_clock::now() + budget;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::yield();
  }
  return true;
}

} // namespace sits::runtime::pool

#endif // SITS_RUNTIME_CORE_WORKER_POOL_H
