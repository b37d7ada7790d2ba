//===- async_runtime_test.cpp - The MLIR async runtime ABI
//-----------------===//
//
// Calls the C functions exactly as compiled code does (through their
// unmangled names), checking tokens, values, groups, errors, continuations
// and reference counting, with many tasks from many threads. The same
// tests run under ThreadSanitizer in a SITS_SANITIZE=thread build.
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <set>
#include <thread>
#include <time.h>

extern "C" {
void *mlirAsyncRuntimeCreateToken();
void *mlirAsyncRuntimeCreateValue(int64_t);
void *mlirAsyncRuntimeCreateGroup(int64_t);
int64_t mlirAsyncRuntimeAddTokenToGroup(void *, void *);
void mlirAsyncRuntimeEmplaceToken(void *);
void mlirAsyncRuntimeEmplaceValue(void *);
void mlirAsyncRuntimeSetTokenError(void *);
void mlirAsyncRuntimeSetValueError(void *);
bool mlirAsyncRuntimeIsTokenError(void *);
bool mlirAsyncRuntimeIsValueError(void *);
bool mlirAsyncRuntimeIsGroupError(void *);
void mlirAsyncRuntimeAwaitToken(void *);
void mlirAsyncRuntimeAwaitValue(void *);
void mlirAsyncRuntimeAwaitAllInGroup(void *);
std::byte *mlirAsyncRuntimeGetValueStorage(void *);
void mlirAsyncRuntimeExecute(void *, void (*)(void *));
void mlirAsyncRuntimeAwaitTokenAndExecute(void *, void *, void (*)(void *));
void mlirAsyncRuntimeAwaitValueAndExecute(void *, void *, void (*)(void *));
void mlirAsyncRuntimeAwaitAllInGroupAndExecute(void *, void *,
                                               void (*)(void *));
void mlirAsyncRuntimeAddRef(void *, int64_t);
void mlirAsyncRuntimeDropRef(void *, int64_t);
int64_t mlirAsyncRuntimGetNumWorkerThreads();
int64_t mlirAsyncRuntimeGetNumWorkerThreads();
}

using namespace sits::runtime;
using namespace sits::runtime::test;

namespace {

int64_t live() { return threadPoolStats().liveAsyncObjects; }

/// Waits (bounded) until the pool has dropped its references, which happens
/// just after the work we waited for signalled completion.
void expectLiveReturnsTo(int64_t baseline) {
  for (int i = 0; i < 2000 && live() != baseline; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(live(), baseline);
}

class AsyncRuntime : public ::testing::Test {
protected:
  void SetUp() override { baseline_ = live(); }
  void TearDown() override {
    expectLiveReturnsTo(baseline_);
    SITS_ASSERT_OK(setNumThreads(0));
  }
  int64_t baseline_ = 0;
};

TEST_F(AsyncRuntime, TokenEmplacedBeforeAndAfterAwait) {
  void *t = mlirAsyncRuntimeCreateToken();
  EXPECT_EQ(live(), baseline_ + 1);
  mlirAsyncRuntimeEmplaceToken(t); // drops the producer's reference
  mlirAsyncRuntimeAwaitToken(t);
  EXPECT_FALSE(mlirAsyncRuntimeIsTokenError(t));
  mlirAsyncRuntimeDropRef(t, 1);
  EXPECT_EQ(live(), baseline_);

  void *u = mlirAsyncRuntimeCreateToken();
  std::thread producer([u] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    mlirAsyncRuntimeEmplaceToken(u);
  });
  mlirAsyncRuntimeAwaitToken(u);
  producer.join();
  mlirAsyncRuntimeDropRef(u, 1);
}

TEST_F(AsyncRuntime, ReferenceCounting) {
  void *t = mlirAsyncRuntimeCreateToken();
  mlirAsyncRuntimeAddRef(t, 3);
  mlirAsyncRuntimeDropRef(t, 2);
  mlirAsyncRuntimeDropRef(t, 1);
  EXPECT_EQ(live(), baseline_ + 1)
      << "still one caller and one producer reference";
  mlirAsyncRuntimeEmplaceToken(t);
  EXPECT_EQ(live(), baseline_ + 1);
  mlirAsyncRuntimeDropRef(t, 1);
  EXPECT_EQ(live(), baseline_);
  // The caller may drop first; the producer's reference keeps it alive.
  void *v = mlirAsyncRuntimeCreateValue(8);
  mlirAsyncRuntimeDropRef(v, 1);
  EXPECT_EQ(live(), baseline_ + 1);
  mlirAsyncRuntimeEmplaceValue(v);
  EXPECT_EQ(live(), baseline_);
}

TEST_F(AsyncRuntime, ValuesCarryTheirPayload) {
  void *v = mlirAsyncRuntimeCreateValue(sizeof(double) * 3);
  auto *storage =
      reinterpret_cast<double *>(mlirAsyncRuntimeGetValueStorage(v));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(storage) % 64, 0u);
  std::thread producer([v, storage] {
    storage[0] = 1.5;
    storage[2] = -3.0;
    mlirAsyncRuntimeEmplaceValue(v);
  });
  mlirAsyncRuntimeAwaitValue(v);
  EXPECT_FALSE(mlirAsyncRuntimeIsValueError(v));
  EXPECT_EQ(storage[0], 1.5);
  EXPECT_EQ(storage[2], -3.0);
  producer.join();
  mlirAsyncRuntimeDropRef(v, 1);
  void *empty = mlirAsyncRuntimeCreateValue(0);
  EXPECT_NE(mlirAsyncRuntimeGetValueStorage(empty), nullptr);
  mlirAsyncRuntimeEmplaceValue(empty);
  mlirAsyncRuntimeDropRef(empty, 1);
}

TEST_F(AsyncRuntime, ErrorsPropagateToTokensValuesAndGroups) {
  void *t = mlirAsyncRuntimeCreateToken();
  mlirAsyncRuntimeSetTokenError(t);
  mlirAsyncRuntimeAwaitToken(t); // an error is a terminal state: no hang
  EXPECT_TRUE(mlirAsyncRuntimeIsTokenError(t));

  void *v = mlirAsyncRuntimeCreateValue(4);
  mlirAsyncRuntimeSetValueError(v);
  mlirAsyncRuntimeAwaitValue(v);
  EXPECT_TRUE(mlirAsyncRuntimeIsValueError(v));
  mlirAsyncRuntimeDropRef(v, 1);

  void *g = mlirAsyncRuntimeCreateGroup(3);
  void *ok = mlirAsyncRuntimeCreateToken();
  void *late = mlirAsyncRuntimeCreateToken();
  EXPECT_EQ(mlirAsyncRuntimeAddTokenToGroup(t, g), 0); // already in error
  EXPECT_EQ(mlirAsyncRuntimeAddTokenToGroup(ok, g), 1);
  EXPECT_EQ(mlirAsyncRuntimeAddTokenToGroup(late, g), 2);
  mlirAsyncRuntimeEmplaceToken(ok);
  mlirAsyncRuntimeSetTokenError(late);
  mlirAsyncRuntimeAwaitAllInGroup(g);
  EXPECT_TRUE(mlirAsyncRuntimeIsGroupError(g));
  for (void *x : {t, ok, late})
    mlirAsyncRuntimeDropRef(x, 1);
  mlirAsyncRuntimeDropRef(g, 1);

  void *clean = mlirAsyncRuntimeCreateGroup(1);
  void *c = mlirAsyncRuntimeCreateToken();
  mlirAsyncRuntimeAddTokenToGroup(c, clean);
  mlirAsyncRuntimeEmplaceToken(c);
  mlirAsyncRuntimeAwaitAllInGroup(clean);
  EXPECT_FALSE(mlirAsyncRuntimeIsGroupError(clean));
  mlirAsyncRuntimeDropRef(c, 1);
  mlirAsyncRuntimeDropRef(clean, 1);
}

struct Counter {
  std::atomic<int> n{0};
  std::atomic<bool> onPool{false};
};
void bump(void *p) { static_cast<Counter *>(p)->n.fetch_add(1); }

TEST_F(AsyncRuntime, ContinuationsRunWhenReadyOrAtOnce) {
  Counter k;
  void *t = mlirAsyncRuntimeCreateToken();
  mlirAsyncRuntimeAwaitTokenAndExecute(t, &k, bump);
  mlirAsyncRuntimeAwaitTokenAndExecute(t, &k, bump);
  EXPECT_EQ(k.n.load(), 0);
  mlirAsyncRuntimeEmplaceToken(t);
  EXPECT_EQ(k.n.load(), 2) << "continuations run when the token is emplaced";
  mlirAsyncRuntimeAwaitTokenAndExecute(t, &k, bump);
  EXPECT_EQ(k.n.load(), 3) << "and at once when it is already ready";
  mlirAsyncRuntimeDropRef(t, 1);

  void *v = mlirAsyncRuntimeCreateValue(1);
  mlirAsyncRuntimeAwaitValueAndExecute(v, &k, bump);
  mlirAsyncRuntimeEmplaceValue(v);
  EXPECT_EQ(k.n.load(), 4);
  mlirAsyncRuntimeDropRef(v, 1);

  void *g = mlirAsyncRuntimeCreateGroup(2);
  void *a = mlirAsyncRuntimeCreateToken(), *b = mlirAsyncRuntimeCreateToken();
  mlirAsyncRuntimeAddTokenToGroup(a, g);
  mlirAsyncRuntimeAwaitAllInGroupAndExecute(g, &k, bump);
  mlirAsyncRuntimeAddTokenToGroup(b, g);
  mlirAsyncRuntimeEmplaceToken(a);
  EXPECT_EQ(k.n.load(), 4) << "one of two members is not enough";
  mlirAsyncRuntimeEmplaceToken(b);
  EXPECT_EQ(k.n.load(), 5);
  mlirAsyncRuntimeAwaitAllInGroupAndExecute(g, &k, bump);
  EXPECT_EQ(k.n.load(), 6);
  mlirAsyncRuntimeDropRef(a, 1);
  mlirAsyncRuntimeDropRef(b, 1);
  mlirAsyncRuntimeDropRef(g, 1);

  void *none = mlirAsyncRuntimeCreateGroup(0);
  mlirAsyncRuntimeAwaitAllInGroup(none); // an empty group is ready
  mlirAsyncRuntimeAwaitAllInGroupAndExecute(none, &k, bump);
  EXPECT_EQ(k.n.load(), 7);
  mlirAsyncRuntimeDropRef(none, 1);
}

/// A task in the style of lowered async.execute: do work, emplace a token.
struct Task {
  void *token = nullptr;
  std::atomic<int> *sum = nullptr;
  int value = 0;
  std::thread::id ranOn;
};
void runTask(void *p) {
  auto *t = static_cast<Task *>(p);
  t->sum->fetch_add(t->value);
  t->ranOn = std::this_thread::get_id();
  mlirAsyncRuntimeEmplaceToken(t->token);
}

TEST_F(AsyncRuntime, ExecuteRunsOnThePoolInParallel) {
  SITS_ASSERT_OK(setNumThreads(4));
  EXPECT_EQ(mlirAsyncRuntimGetNumWorkerThreads(), 4);
  EXPECT_EQ(mlirAsyncRuntimeGetNumWorkerThreads(), 4);
  const int n = 64;
  std::vector<Task> tasks(n);
  std::atomic<int> sum{0};
  void *g = mlirAsyncRuntimeCreateGroup(n);
  for (int i = 0; i < n; ++i) {
    tasks[i] = {mlirAsyncRuntimeCreateToken(), &sum, i, {}};
    EXPECT_EQ(mlirAsyncRuntimeAddTokenToGroup(tasks[i].token, g), i);
    mlirAsyncRuntimeExecute(&tasks[i], runTask);
  }
  mlirAsyncRuntimeAwaitAllInGroup(g);
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
  // Three workers and the awaiting caller, which runs queued tasks too.
  std::set<std::thread::id> threads;
  for (Task &t : tasks) {
    threads.insert(t.ranOn);
    mlirAsyncRuntimeDropRef(t.token, 1);
  }
  EXPECT_LE(threads.size(), 4u);
  EXPECT_EQ(threadPoolStats().threads, 4);
  mlirAsyncRuntimeDropRef(g, 1);
}

TEST_F(AsyncRuntime, ManyTasksFromManyThreads) {
  SITS_ASSERT_OK(setNumThreads(3));
  const int submitters = 8, perThread = 1500;
  std::atomic<int> sum{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < submitters; ++s)
    threads.emplace_back([&sum, s] {
      std::vector<Task> tasks(perThread);
      void *g = mlirAsyncRuntimeCreateGroup(perThread);
      for (int i = 0; i < perThread; ++i) {
        tasks[i] = {mlirAsyncRuntimeCreateToken(), &sum, 1, {}};
        mlirAsyncRuntimeAddTokenToGroup(tasks[i].token, g);
        mlirAsyncRuntimeExecute(&tasks[i], runTask);
        if (i % 2 == 0) // the caller drops its reference early half the time
          mlirAsyncRuntimeDropRef(tasks[i].token, 1);
      }
      Counter done;
      mlirAsyncRuntimeAwaitAllInGroupAndExecute(g, &done, bump);
      mlirAsyncRuntimeAwaitAllInGroup(g);
      EXPECT_EQ(done.n.load(), 1);
      EXPECT_FALSE(mlirAsyncRuntimeIsGroupError(g));
      for (int i = 1; i < perThread; i += 2)
        mlirAsyncRuntimeDropRef(tasks[i].token, 1);
      mlirAsyncRuntimeDropRef(g, 1);
      (void)s;
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(sum.load(), submitters * perThread);
}

// A task that blocks on a token only a later task emplaces: with one worker
// this deadlocks unless a blocked worker keeps running queued tasks.
struct Waiter {
  void *wait = nullptr;
  void *done = nullptr;
};
void blockThenFinish(void *p) {
  auto *w = static_cast<Waiter *>(p);
  mlirAsyncRuntimeAwaitToken(w->wait);
  mlirAsyncRuntimeEmplaceToken(w->done);
}
void emplaceIt(void *token) { mlirAsyncRuntimeEmplaceToken(token); }

TEST_F(AsyncRuntime, BlockingAwaitOnAWorkerDoesNotStarveThePool) {
  SITS_ASSERT_OK(setNumThreads(1));
  Waiter w{mlirAsyncRuntimeCreateToken(), mlirAsyncRuntimeCreateToken()};
  mlirAsyncRuntimeExecute(&w, blockThenFinish);
  mlirAsyncRuntimeExecute(w.wait, emplaceIt);
  mlirAsyncRuntimeAwaitToken(w.done);
  mlirAsyncRuntimeDropRef(w.wait, 1);
  mlirAsyncRuntimeDropRef(w.done, 1);
}

TEST_F(AsyncRuntime, ResizingWhileTasksRun) {
  std::atomic<int> sum{0};
  const int n = 400;
  std::vector<Task> tasks(n);
  void *g = mlirAsyncRuntimeCreateGroup(n);
  for (int i = 0; i < n; ++i) {
    tasks[i] = {mlirAsyncRuntimeCreateToken(), &sum, 1, {}};
    mlirAsyncRuntimeAddTokenToGroup(tasks[i].token, g);
    mlirAsyncRuntimeExecute(&tasks[i], runTask);
    if (i == n / 4)
      SITS_ASSERT_OK(setNumThreads(5));
    if (i == n / 2)
      SITS_ASSERT_OK(setNumThreads(1));
    if (i == 3 * n / 4)
      SITS_ASSERT_OK(setNumThreads(2));
  }
  mlirAsyncRuntimeAwaitAllInGroup(g);
  EXPECT_EQ(sum.load(), n);
  EXPECT_EQ(numThreads(), 2);
  for (Task &t : tasks)
    mlirAsyncRuntimeDropRef(t.token, 1);
  mlirAsyncRuntimeDropRef(g, 1);
}

// Idle workers spin for a bounded time after work, then park: submits that
// come while they spin, just after they parked, or long after must all run
// (a lost wake-up hangs here), from the caller and from tasks.
void submitNext(void *p) {
  auto *t = static_cast<Task *>(p);
  t->sum->fetch_add(1);
  mlirAsyncRuntimeExecute(t + 1, runTask); // to a peer that may be spinning
  mlirAsyncRuntimeEmplaceToken(t->token);
}

TEST_F(AsyncRuntime, WorkAfterIdleGapsOfAnyLengthRuns) {
  for (int threads : {1, 2, 3}) {
    SITS_ASSERT_OK(setNumThreads(threads));
    std::atomic<int> sum{0};
    for (int i = 0; i < 120; ++i) {
      // 0 to 300 us idle: inside and past the workers' spin budget.
      std::this_thread::sleep_for(std::chrono::microseconds(i % 7 * 50));
      Task pair[2] = {{mlirAsyncRuntimeCreateToken(), &sum, 1, {}},
                      {mlirAsyncRuntimeCreateToken(), &sum, 1, {}}};
      void *g = mlirAsyncRuntimeCreateGroup(2);
      mlirAsyncRuntimeAddTokenToGroup(pair[0].token, g);
      mlirAsyncRuntimeAddTokenToGroup(pair[1].token, g);
      mlirAsyncRuntimeExecute(&pair[0], submitNext);
      mlirAsyncRuntimeAwaitAllInGroup(g);
      for (Task &t : pair)
        mlirAsyncRuntimeDropRef(t.token, 1);
      mlirAsyncRuntimeDropRef(g, 1);
    }
    EXPECT_EQ(sum.load(), 2 * 120);
  }
}

double processCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

TEST_F(AsyncRuntime, IdleWorkersStopSpinning) {
  SITS_ASSERT_OK(setNumThreads(4));
  const int n = 64;
  std::vector<Task> tasks(n);
  std::atomic<int> sum{0};
  void *g = mlirAsyncRuntimeCreateGroup(n);
  for (int i = 0; i < n; ++i) {
    tasks[i] = {mlirAsyncRuntimeCreateToken(), &sum, 1, {}};
    mlirAsyncRuntimeAddTokenToGroup(tasks[i].token, g);
    mlirAsyncRuntimeExecute(&tasks[i], runTask);
  }
  mlirAsyncRuntimeAwaitAllInGroup(g);
  for (Task &t : tasks)
    mlirAsyncRuntimeDropRef(t.token, 1);
  mlirAsyncRuntimeDropRef(g, 1);
  // Well past the spin budget every worker is parked: four spinning
  // workers would burn about 4 x 300 ms of CPU in the window below.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double before = processCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(processCpuSeconds() - before, 0.1);
}

void tryResize(void *p) {
  auto *t = static_cast<Task *>(p);
  Status s = setNumThreads(7);
  t->value = s.code() == StatusCode::kInvalidArgument ? 1 : 0;
  mlirAsyncRuntimeEmplaceToken(t->token);
}

TEST_F(AsyncRuntime, ThreadCountControl) {
  EXPECT_GE(defaultNumThreads(), 1);
  SITS_EXPECT_CODE(setNumThreads(-1), StatusCode::kInvalidArgument);
  SITS_EXPECT_CODE(setNumThreads(100000), StatusCode::kInvalidArgument);
  SITS_ASSERT_OK(setNumThreads(3));
  EXPECT_EQ(numThreads(), 3);
  SITS_ASSERT_OK(setNumThreads(0));
  EXPECT_EQ(numThreads(), defaultNumThreads());

  ::setenv("SITS_NUM_THREADS", "5", 1);
  EXPECT_EQ(defaultNumThreads(), 5);
  SITS_ASSERT_OK(setNumThreads(0));
  EXPECT_EQ(numThreads(), 5);
  for (const char *bad : {"0", "-2", "many", "3x", ""}) {
    ::setenv("SITS_NUM_THREADS", bad, 1);
    EXPECT_NE(defaultNumThreads(), 5) << "ignored: '" << bad << "'";
  }
  ::unsetenv("SITS_NUM_THREADS");

  // Workers may not resize the pool they run on. (With one thread the
  // awaiting caller runs no tasks itself: the task runs on the worker.)
  SITS_ASSERT_OK(setNumThreads(1));
  Task t{mlirAsyncRuntimeCreateToken(), nullptr, 0, {}};
  mlirAsyncRuntimeExecute(&t, tryResize);
  mlirAsyncRuntimeAwaitToken(t.token);
  EXPECT_EQ(t.value, 1);
  mlirAsyncRuntimeDropRef(t.token, 1);
}

TEST_F(AsyncRuntime, SymbolsAreVisibleToDlopenedCode) {
  // What compiled code does: look the ABI up in the global scope.
  for (const char *name :
       {"mlirAsyncRuntimeCreateToken", "mlirAsyncRuntimeExecute",
        "mlirAsyncRuntimeAwaitAllInGroupAndExecute",
        "mlirAsyncRuntimGetNumWorkerThreads", "memrefCopy"})
    EXPECT_NE(dlsym(RTLD_DEFAULT, name), nullptr) << name;
}

} // namespace
