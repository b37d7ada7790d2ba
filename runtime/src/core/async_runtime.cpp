//===- async_runtime.cpp - MLIR's async runtime ABI on the SITS pool
//-------===//
//
// Compiled code lowered from MLIR's `async` dialect (async-to-async-runtime,
// convert-async-to-llvm; `async-parallel-for` for multi-threaded loops, as
// artifacts did before sits-cpu-parallel-to-runtime and parallel_for.cpp)
// calls the C functions below, which upstream declares in
// mlir/ExecutionEngine/AsyncRuntime.h and implements on llvm::ThreadPool.
// This is an independent implementation with the same semantics on the SITS
// worker pool, so the runtime needs no LLVM:
//
// * Tokens and values start with two references (one for the caller, one
//   dropped when the producer emplaces them); groups with one. `DropRef` to
//   zero destroys.
// * A token/value becomes available or error exactly once. Continuations
//   registered with `Await*AndExecute` then run on the thread that emplaces
//   (inline, as upstream does, but outside any lock), and only after them do
//   threads blocked in `Await*` wake: as upstream, a blocking await returns
//   after every continuation of the object has run.
// * A group is created with the number of tokens that will be added; it is
//   ready when that many have become ready (`IsGroupError` if any was an
//   error). `AddTokenToGroup` returns the token's rank in the group.
// * `Execute` queues a coroutine resumption on the pool.
// * A blocking await on a pool worker runs queued tasks while it waits; on
//   any other thread it does too when the thread count is above one (the
//   awaiting thread is one of them, see worker_pool.h), and polls for
//   pool::kSpinBudget before it blocks.
//
// The symbol `mlirAsyncRuntimGetNumWorkerThreads` (sic) is the name the
// upstream lowering calls; the correctly spelled alias is exported too.
//
//===----------------------------------------------------------------------===//
#include "worker_pool.h"

#include "sits/runtime/export.h"
#include "sits/runtime/thread_pool.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace sits::runtime {
namespace {

std::atomic<int64_t> gLiveObjects{0};

enum class Kind : uint8_t { kToken, kValue, kGroup };
enum State : uint8_t { kUnavailable = 0, kAvailable = 1, kError = 2 };

using Resume = void (*)(void *);

/// A continuation waiting on a token, value or group.
struct Awaiter {
  enum class What : uint8_t { kResume, kGroupMember } what;
  void *a; // kResume: the coroutine handle; kGroupMember: the group
  Resume resume;
};

struct RefCounted {
  RefCounted(Kind kind, int64_t refs) : refs(refs), kind(kind) {
    gLiveObjects.fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<int64_t> refs;
  Kind kind;
};

struct Token : RefCounted {
  explicit Token(Kind kind = Kind::kToken) : RefCounted(kind, 2) {}
  std::atomic<uint8_t> state{kUnavailable};
  /// Set after the continuations ran; what blocking awaits wait for.
  std::atomic<bool> settled{false};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Awaiter> awaiters;
};

struct Value : Token {
  explicit Value(int64_t size) : Token(Kind::kValue) {
    size_t bytes = size > 0 ? size_t(size) : 1;
    bytes = (bytes + 63) / 64 * 64;
    storage = static_cast<std::byte *>(std::aligned_alloc(64, bytes));
    if (!storage) {
      std::fprintf(
          stderr,
          "sits runtime: cannot allocate an async value of %lld bytes\n",
          static_cast<long long>(size));
      std::abort();
    }
  }
  ~Value() { std::free(storage); }
  std::byte *storage;
};

struct Group : RefCounted {
  explicit Group(int64_t size)
      : RefCounted(Kind::kGroup, 1), pending(size), settled(size <= 0) {}
  std::atomic<int64_t> pending;
  std::atomic<bool> settled;
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> rank{0};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Awaiter> awaiters;
};

void destroy(RefCounted *obj) {
  switch (obj->kind) {
  case Kind::kToken:
    delete static_cast<Token *>(obj);
    break;
  case Kind::kValue:
    delete static_cast<Value *>(obj);
    break;
  case Kind::kGroup:
    delete static_cast<Group *>(obj);
    break;
  }
  gLiveObjects.fetch_sub(1, std::memory_order_relaxed);
}

void addRef(RefCounted *obj, int64_t count) {
  obj->refs.fetch_add(count, std::memory_order_relaxed);
}

void dropRef(RefCounted *obj, int64_t count) {
  int64_t previous = obj->refs.fetch_sub(count, std::memory_order_acq_rel);
  if (previous == count)
    destroy(obj);
  else if (previous < count) {
    std::fprintf(stderr, "sits runtime: async object reference count went "
                         "below zero (compiled code bug)\n");
    std::abort();
  }
}

void runAwaiters(std::vector<Awaiter> &awaiters, bool error);

/// One member of `group` became ready.
void groupMemberReady(Group *group, bool error) {
  if (error)
    group->errors.fetch_add(1, std::memory_order_relaxed);
  std::vector<Awaiter> ready;
  bool last;
  {
    std::lock_guard<std::mutex> lock(group->mu);
    last = group->pending.fetch_sub(1, std::memory_order_acq_rel) == 1;
    if (last)
      ready.swap(group->awaiters);
  }
  if (!last)
    return;
  // The caller of groupMemberReady keeps the group alive until we return.
  runAwaiters(ready, false);
  std::lock_guard<std::mutex> lock(group->mu);
  group->settled.store(true, std::memory_order_release);
  group->cv.notify_all();
}

void runAwaiters(std::vector<Awaiter> &awaiters, bool error) {
  for (Awaiter &a : awaiters) {
    if (a.what == Awaiter::What::kResume) {
      a.resume(a.a);
    } else {
      Group *group = static_cast<Group *>(a.a);
      groupMemberReady(group, error);
      dropRef(group, 1); // taken in AddTokenToGroup
    }
  }
}

/// Makes a token or value available/error and runs its continuations.
void setState(Token *t, State s) {
  std::vector<Awaiter> awaiters;
  {
    std::lock_guard<std::mutex> lock(t->mu);
    if (t->state.load(std::memory_order_relaxed) != kUnavailable) {
      std::fprintf(stderr, "sits runtime: async token or value emplaced twice "
                           "(compiled code bug)\n");
      std::abort();
    }
    t->state.store(s, std::memory_order_release);
    awaiters.swap(t->awaiters);
  }
  runAwaiters(awaiters, s == kError);
  {
    std::lock_guard<std::mutex> lock(t->mu);
    t->settled.store(true, std::memory_order_release);
    t->cv.notify_all();
  }
  // The reference the producer held since creation.
  dropRef(t, 1);
}

bool isReady(Token *t) {
  return t->state.load(std::memory_order_acquire) != kUnavailable;
}
bool isSettled(Token *t) { return t->settled.load(std::memory_order_acquire); }

/// Blocks until `ready()`; pool workers keep running queued tasks meanwhile.
template <typename Ready>
void blockUntil(std::mutex &mu, std::condition_variable &cv, Ready ready) {
  if (pool::onWorkerThread()) {
    while (!ready()) {
      if (pool::tryRunOne())
        continue;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::microseconds(200), ready);
    }
    return;
  }
  // The caller of a parallel region computes its first block and then
  // waits for the rest; it takes queued blocks too (the region is cut in
  // more blocks than threads), and polls briefly for the last ones, which
  // usually finish within microseconds, before paying for a futex wait and
  // the wake (see pool::kSpinBudget).
  bool helps = pool::callerRunsTasks();
  while (!ready()) {
    if (helps && pool::tryRunOne())
      continue;
    if (pool::spinUntil(
            [&] { return ready() || (helps && pool::hasQueuedTasks()); }))
      continue;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, ready);
  }
}

/// Runs `resume(handle)` now if `ready`, else when the object is ready.
void awaitAndExecute(std::mutex &mu, std::vector<Awaiter> &awaiters,
                     bool (*readyLocked)(void *), void *obj, void *handle,
                     Resume resume) {
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!readyLocked(obj)) {
      awaiters.push_back({Awaiter::What::kResume, handle, resume});
      return;
    }
  }
  resume(handle);
}

} // namespace

ThreadPoolStats threadPoolStats() {
  ThreadPoolStats s;
  s.threads = pool::size();
  s.tasksExecuted = pool::tasksExecuted();
  s.liveAsyncObjects = gLiveObjects.load(std::memory_order_relaxed);
  return s;
}

} // namespace sits::runtime

using namespace sits::runtime;

#define SITS_ASYNC_API extern "C" SITS_RUNTIME_API

SITS_ASYNC_API void mlirAsyncRuntimeAddRef(void *obj, int64_t count) {
  addRef(static_cast<RefCounted *>(obj), count);
}

SITS_ASYNC_API void mlirAsyncRuntimeDropRef(void *obj, int64_t count) {
  dropRef(static_cast<RefCounted *>(obj), count);
}

SITS_ASYNC_API void *mlirAsyncRuntimeCreateToken() {
  return static_cast<RefCounted *>(new Token());
}

SITS_ASYNC_API void *mlirAsyncRuntimeCreateValue(int64_t size) {
  return static_cast<RefCounted *>(new Value(size));
}

SITS_ASYNC_API void *mlirAsyncRuntimeCreateGroup(int64_t size) {
  return static_cast<RefCounted *>(new Group(size));
}

SITS_ASYNC_API int64_t mlirAsyncRuntimeAddTokenToGroup(void *tokenPtr,
                                                       void *groupPtr) {
  auto *token = static_cast<Token *>(static_cast<RefCounted *>(tokenPtr));
  auto *group = static_cast<Group *>(static_cast<RefCounted *>(groupPtr));
  int64_t rank = group->rank.fetch_add(1, std::memory_order_relaxed);
  bool readyNow;
  {
    std::lock_guard<std::mutex> lock(token->mu);
    readyNow = isReady(token);
    if (!readyNow) {
      // Keep the group alive until the token is ready.
      addRef(group, 1);
      token->awaiters.push_back({Awaiter::What::kGroupMember, group, nullptr});
    }
  }
  if (readyNow)
    groupMemberReady(group,
                     token->state.load(std::memory_order_acquire) == kError);
  return rank;
}

SITS_ASYNC_API void mlirAsyncRuntimeEmplaceToken(void *token) {
  setState(static_cast<Token *>(static_cast<RefCounted *>(token)), kAvailable);
}

SITS_ASYNC_API void mlirAsyncRuntimeEmplaceValue(void *value) {
  setState(static_cast<Value *>(static_cast<RefCounted *>(value)), kAvailable);
}

SITS_ASYNC_API void mlirAsyncRuntimeSetTokenError(void *token) {
  setState(static_cast<Token *>(static_cast<RefCounted *>(token)), kError);
}

SITS_ASYNC_API void mlirAsyncRuntimeSetValueError(void *value) {
  setState(static_cast<Value *>(static_cast<RefCounted *>(value)), kError);
}

SITS_ASYNC_API bool mlirAsyncRuntimeIsTokenError(void *token) {
  return static_cast<Token *>(static_cast<RefCounted *>(token))
             ->state.load(std::memory_order_acquire) == kError;
}

SITS_ASYNC_API bool mlirAsyncRuntimeIsValueError(void *value) {
  return static_cast<Value *>(static_cast<RefCounted *>(value))
             ->state.load(std::memory_order_acquire) == kError;
}

SITS_ASYNC_API bool mlirAsyncRuntimeIsGroupError(void *group) {
  return static_cast<Group *>(static_cast<RefCounted *>(group))
             ->errors.load(std::memory_order_acquire) > 0;
}

SITS_ASYNC_API void mlirAsyncRuntimeAwaitToken(void *tokenPtr) {
  auto *token = static_cast<Token *>(static_cast<RefCounted *>(tokenPtr));
  blockUntil(token->mu, token->cv, [token] { return isSettled(token); });
}

SITS_ASYNC_API void mlirAsyncRuntimeAwaitValue(void *valuePtr) {
  auto *value = static_cast<Value *>(static_cast<RefCounted *>(valuePtr));
  blockUntil(value->mu, value->cv, [value] { return isSettled(value); });
}

SITS_ASYNC_API void mlirAsyncRuntimeAwaitAllInGroup(void *groupPtr) {
  auto *group = static_cast<Group *>(static_cast<RefCounted *>(groupPtr));
  blockUntil(group->mu, group->cv, [group] {
    return group->settled.load(std::memory_order_acquire);
  });
}

SITS_ASYNC_API std::byte *mlirAsyncRuntimeGetValueStorage(void *value) {
  return static_cast<Value *>(static_cast<RefCounted *>(value))->storage;
}

SITS_ASYNC_API void mlirAsyncRuntimeExecute(void *handle,
                                            void (*resume)(void *)) {
  pool::submit({resume, handle});
}

SITS_ASYNC_API void
mlirAsyncRuntimeAwaitTokenAndExecute(void *tokenPtr, void *handle,
                                     void (*resume)(void *)) {
  auto *token = static_cast<Token *>(static_cast<RefCounted *>(tokenPtr));
  awaitAndExecute(
      token->mu, token->awaiters,
      [](void *t) { return isReady(static_cast<Token *>(t)); }, token, handle,
      resume);
}

SITS_ASYNC_API void
mlirAsyncRuntimeAwaitValueAndExecute(void *valuePtr, void *handle,
                                     void (*resume)(void *)) {
  auto *value = static_cast<Value *>(static_cast<RefCounted *>(valuePtr));
  awaitAndExecute(
      value->mu, value->awaiters,
      [](void *v) { return isReady(static_cast<Value *>(v)); }, value, handle,
      resume);
}

SITS_ASYNC_API void
mlirAsyncRuntimeAwaitAllInGroupAndExecute(void *groupPtr, void *handle,
                                          void (*resume)(void *)) {
  auto *group = static_cast<Group *>(static_cast<RefCounted *>(groupPtr));
  awaitAndExecute(
      group->mu, group->awaiters,
      [](void *g) {
        return static_cast<Group *>(g)->pending.load(
                   std::memory_order_acquire) <= 0;
      },
      group, handle, resume);
}

SITS_ASYNC_API int64_t mlirAsyncRuntimGetNumWorkerThreads() {
  return pool::size();
}

SITS_ASYNC_API int64_t mlirAsyncRuntimeGetNumWorkerThreads() {
  return pool::size();
}

SITS_ASYNC_API void mlirAsyncRuntimePrintCurrentThreadId() {
  std::printf("Current thread id: %zu\n",
              std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::fflush(stdout);
}
