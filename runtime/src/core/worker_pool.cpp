//===- worker_pool.cpp - The process-wide worker threads
//-------------------===//
#include "worker_pool.h"

#include "sits/runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <vector>

namespace sits::runtime {
namespace pool {
namespace {

constexpr int kMaxThreads = 4096;

/// Workers for `threads` computing threads: with more than one, the thread
/// that awaits a parallel loop runs its iterations too (parallel_for.cpp,
/// async_runtime.cpp), so one fewer; with one, that one worker runs async
/// code's tasks (a fork-join then runs on its caller).
int workersFor(int threads) { return threads > 1 ? threads - 1 : 1; }

struct State {
  std::mutex mu;
  std::condition_variable workCv;
  std::deque<Task> queue;
  /// queue.size(), written under `mu`; what spinning workers poll unlocked.
  std::atomic<int64_t> queued{0};
  /// Workers polling the queue without the lock, and threads waiting on
  /// workCv; both under `mu`. submit() wakes a parked thread only when the
  /// spinners cannot take every queued task: each spinner rechecks the
  /// queue under `mu` before it parks, so no task is left unserved.
  int spinning = 0;
  int parked = 0;
  /// The threads compiled code computes on: the awaiting caller and
  /// workersFor(target) workers; workers with an id >= workersFor(target)
  /// leave. Written under `mu`; read unlocked by spinners.
  std::atomic<int> target{0};
  bool started = false;
  /// threads[id] is worker `id`.
  std::vector<std::thread> threads;
  /// Serialises resize() calls (held while joining, never with `mu`).
  std::mutex resizeMu;
  std::atomic<int64_t> executed{0};
};

std::atomic<State *> gState{nullptr};
std::mutex gCreateMu;
thread_local State *tWorkerOf = nullptr;

void atforkPrepare() { gCreateMu.lock(); }
void atforkParent() { gCreateMu.unlock(); }
void atforkChild() {
  // The child has none of the parent's threads; abandon (leak) the old
  // state, whose mutexes may be held by threads that do not exist here.
  State *old = gState.load(std::memory_order_relaxed);
  int target = old ? old->target.load(std::memory_order_relaxed) : 0;
  gState.store(nullptr, std::memory_order_relaxed);
  if (target > 0) {
    State *fresh = new State();
    fresh->target = target;
    gState.store(fresh, std::memory_order_relaxed);
  }
  gCreateMu.unlock(); // locked by atforkPrepare on this (the only) thread
}

State &state() {
  State *s = gState.load(std::memory_order_acquire);
  if (s)
    return *s;
  std::lock_guard<std::mutex> lock(gCreateMu);
  s = gState.load(std::memory_order_relaxed);
  if (!s) {
    static bool registered = [] {
      pthread_atfork(atforkPrepare, atforkParent, atforkChild);
      return true;
    }();
    (void)registered;
    s = new State();
    s->target = defaultNumThreads();
    gState.store(s, std::memory_order_release);
  }
  return *s;
}

// Called with s.mu held and the queue non-empty.
Task popLocked(State &s) {
  Task t = s.queue.front();
  s.queue.pop_front();
  s.queued.store(int64_t(s.queue.size()), std::memory_order_relaxed);
  return t;
}

void workerMain(State *s, int id) {
  tWorkerOf = s;
  std::unique_lock<std::mutex> lock(s->mu);
  // True right after running a task: only then is it worth spinning.
  bool busy = false;
  while (id < workersFor(s->target.load(std::memory_order_relaxed))) {
    if (!s->queue.empty()) {
      Task t = popLocked(*s);
      lock.unlock();
      t.fn(t.arg);
      s->executed.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
      busy = true;
      continue;
    }
    if (busy) {
      busy = false;
      ++s->spinning;
      lock.unlock();
      // Spinning only right after work, so an idle pool parks (see
      // kSpinBudget): the next region usually comes within the budget.
      bool found = spinUntil([&] {
        return s->queued.load(std::memory_order_relaxed) > 0 ||
               id >= workersFor(s->target.load(std::memory_order_relaxed));
      });
      lock.lock();
      --s->spinning;
      if (found)
        continue;
    }
    ++s->parked;
    s->workCv.wait(lock, [&] {
      return id >= workersFor(s->target.load(std::memory_order_relaxed)) ||
             !s->queue.empty();
    });
    --s->parked;
  }
  // A submit may have skipped the wake because this worker was spinning;
  // leaving without taking its task, pass the wake on.
  if (!s->queue.empty())
    s->workCv.notify_all();
}

// Called with s.mu held.
void startLocked(State &s) {
  if (s.started)
    return;
  s.started = true;
  int workers = workersFor(s.target.load(std::memory_order_relaxed));
  for (int id = int(s.threads.size()); id < workers; ++id)
    s.threads.emplace_back(workerMain, &s, id);
}

} // namespace

void submit(Task task, int copies) {
  State &s = state();
  int64_t wake;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    startLocked(s);
    for (int i = 0; i < copies; ++i)
      s.queue.push_back(task);
    s.queued.store(int64_t(s.queue.size()), std::memory_order_relaxed);
    // Spinners take tasks without a futex wake; see State.
    wake = std::min<int64_t>(s.parked,
                             int64_t(s.queue.size()) - int64_t(s.spinning));
  }
  for (int64_t i = 0; i < wake; ++i)
    s.workCv.notify_one();
}

bool tryRunOne() {
  State &s = state();
  Task t;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.queue.empty())
      return false;
    t = popLocked(s);
  }
  t.fn(t.arg);
  s.executed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void waitForWork(std::chrono::microseconds timeout) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.queue.empty()) {
    ++s.parked;
    s.workCv.wait_for(lock, timeout);
    --s.parked;
  }
}

bool callerRunsTasks() {
  return state().target.load(std::memory_order_relaxed) > 1;
}

bool hasQueuedTasks() {
  return state().queued.load(std::memory_order_relaxed) > 0;
}

bool onWorkerThread() { return tWorkerOf != nullptr; }

int size() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.target.load(std::memory_order_relaxed);
}

int sizeHint() { return state().target.load(std::memory_order_relaxed); }

int64_t tasksExecuted() {
  return state().executed.load(std::memory_order_relaxed);
}

Status resize(int n) {
  if (n < 0 || n > kMaxThreads)
    return Status(StatusCode::kInvalidArgument,
                  "thread count must be between 0 (the default) and " +
                      std::to_string(kMaxThreads) + ", got " +
                      std::to_string(n))
        .withSubject("threads");
  if (onWorkerThread())
    return Status(StatusCode::kInvalidArgument,
                  "the thread pool cannot be resized from one of its workers")
        .withSubject("threads");
  if (n == 0)
    n = defaultNumThreads();
  State &s = state();
  std::lock_guard<std::mutex> resizeLock(s.resizeMu);
  std::vector<std::thread> leaving;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.target.store(n, std::memory_order_relaxed);
    if (!s.started)
      return Status::OK();
    int workers = workersFor(n);
    while (int(s.threads.size()) > workers) {
      leaving.push_back(std::move(s.threads.back()));
      s.threads.pop_back();
    }
    for (int id = int(s.threads.size()); id < workers; ++id)
      s.threads.emplace_back(workerMain, &s, id);
  }
  s.workCv.notify_all();
  for (std::thread &t : leaving)
    t.join();
  return Status::OK();
}

} // namespace pool

int defaultNumThreads() {
  if (const char *env = std::getenv("SITS_NUM_THREADS")) {
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(env, &end, 10);
    if (errno == 0 && end != env && *end == '\0' && v > 0 &&
        v <= pool::kMaxThreads)
      return int(v);
  }
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0)
      return n;
  }
#endif
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? int(hc) : 1;
}

int numThreads() { return pool::size(); }

Status setNumThreads(int n) { return pool::resize(n); }

} // namespace sits::runtime
