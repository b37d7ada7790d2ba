//===- parallel_for.cpp - The fork-join compiled code's loops call --------===//
//
// `sitsRuntimeParallelFor(body, context, n)` runs `body(context, i)` for
// every i in [0, n) and returns when all have run: the calling thread takes
// iterations from a shared counter, and up to threads - 1 helper tasks
// queued on the worker pool take them too. The job lives on the caller's
// stack, so the caller returns only once every helper has let go of it: a
// helper's last access is the decrement of `helpers`. A helper that starts
// after the iterations ran out just does that. While it waits, the caller
// runs queued tasks (its own helpers, if no worker took them yet, or a
// nested loop's), then polls, then blocks until the last helper wakes it.
//
// sits-cpu-parallel-to-runtime emits the calls (one per outermost parallel
// loop, a chunk of tiles per iteration).
//
//===----------------------------------------------------------------------===//
#include "worker_pool.h"

#include "sits/runtime/export.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace sits::runtime {
namespace {

using Body = void (*)(void *, int64_t);

struct Job {
  Body body;
  void *context;
  int64_t n;
  std::atomic<int64_t> next{0};
  /// Helper tasks queued and not yet finished with the job.
  std::atomic<int> helpers{0};
};

/// Where callers whose helpers are still running block. A helper notifies
/// only when some caller may be waiting: it decrements its job's count,
/// then reads `gWaiters`; a caller increments `gWaiters`, then reads the
/// count (both sequentially consistent), so one of the two sees the other.
std::mutex gJoinMu;
std::condition_variable gJoinCv;
std::atomic<int> gWaiters{0};

void runIterations(Job &job) {
  for (int64_t i;
       (i = job.next.fetch_add(1, std::memory_order_relaxed)) < job.n;)
    job.body(job.context, i);
}

void helper(void *arg) {
  auto *job = static_cast<Job *>(arg);
  runIterations(*job);
  job->helpers.fetch_sub(1, std::memory_order_seq_cst);
  // `job` may be gone from here on.
  if (gWaiters.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(gJoinMu);
    gJoinCv.notify_all();
  }
}

} // namespace
} // namespace sits::runtime

extern "C" SITS_RUNTIME_API void
sitsRuntimeParallelFor(void (*body)(void *, int64_t), void *context,
                       int64_t n) {
  using namespace sits::runtime;
  if (n <= 0)
    return;
  int threads = pool::sizeHint();
  if (n == 1 || threads <= 1) {
    for (int64_t i = 0; i < n; ++i)
      body(context, i);
    return;
  }
  Job job{body, context, n};
  int helpers = int(std::min<int64_t>(n - 1, threads - 1));
  job.helpers.store(helpers, std::memory_order_relaxed);
  pool::submit({helper, &job}, helpers);
  runIterations(job);

  auto done = [&] { return job.helpers.load(std::memory_order_seq_cst) == 0; };
  while (!done()) {
    // The queue's lock only when something is queued: a worker popping
    // the helper holds it at just this moment.
    if (pool::hasQueuedTasks() && pool::tryRunOne())
      continue;
    if (pool::spinUntil([&] { return done() || pool::hasQueuedTasks(); }))
      continue;
    std::unique_lock<std::mutex> lock(gJoinMu);
    gWaiters.fetch_add(1, std::memory_order_seq_cst);
    gJoinCv.wait(lock, done);
    gWaiters.fetch_sub(1, std::memory_order_seq_cst);
  }
}
