//===- parallel_for_test.cpp - The fork-join compiled loops call ----------===//
//
// Calls `sitsRuntimeParallelFor` as compiled code does (its unmangled name,
// a plain function pointer and context): every iteration runs exactly once,
// on several threads, nested and from several callers at once, and the call
// returns only after all ran, also when a helper outlasts the spin budget
// and the caller blocks. The same tests run under ThreadSanitizer in a
// SITS_SANITIZE=thread build.
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

extern "C" void sitsRuntimeParallelFor(void (*)(void *, int64_t), void *,
                                       int64_t);

using namespace sits::runtime;

namespace {

class ParallelFor : public ::testing::Test {
protected:
  void TearDown() override { SITS_ASSERT_OK(setNumThreads(0)); }
};

/// Counts the runs of each iteration.
struct Counts {
  explicit Counts(int64_t n) : runs(n) {}
  std::vector<std::atomic<int>> runs;
  static void body(void *context, int64_t i) {
    static_cast<Counts *>(context)->runs[i].fetch_add(1);
  }
  bool eachOnce() const {
    for (const std::atomic<int> &r : runs)
      if (r.load() != 1)
        return false;
    return true;
  }
};

TEST_F(ParallelFor, RunsEveryIterationOnce) {
  for (int threads : {1, 2, 4}) {
    SITS_ASSERT_OK(setNumThreads(threads));
    for (int64_t n : {0, 1, 2, 3, 7, 100, 10000}) {
      Counts counts(n);
      sitsRuntimeParallelFor(&Counts::body, &counts, n);
      EXPECT_TRUE(counts.eachOnce()) << "threads " << threads << ", n " << n;
    }
  }
}

TEST_F(ParallelFor, NegativeCountRunsNothing) {
  bool ran = false;
  sitsRuntimeParallelFor(
      [](void *context, int64_t) { *static_cast<bool *>(context) = true; },
      &ran, -3);
  EXPECT_FALSE(ran);
}

struct Threads {
  std::mutex mu;
  std::set<std::thread::id> seen;
  static void body(void *context, int64_t) {
    auto *self = static_cast<Threads *>(context);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard<std::mutex> lock(self->mu);
    self->seen.insert(std::this_thread::get_id());
  }
};

TEST_F(ParallelFor, SpreadsOverThePool) {
  SITS_ASSERT_OK(setNumThreads(4));
  Threads threads;
  sitsRuntimeParallelFor(&Threads::body, &threads, 16);
  EXPECT_GE(threads.seen.size(), 2u);
  EXPECT_LE(threads.seen.size(), 4u);
}

TEST_F(ParallelFor, OneThreadRunsOnTheCaller) {
  SITS_ASSERT_OK(setNumThreads(1));
  Threads threads;
  sitsRuntimeParallelFor(&Threads::body, &threads, 4);
  ASSERT_EQ(threads.seen.size(), 1u);
  EXPECT_EQ(*threads.seen.begin(), std::this_thread::get_id());
}

/// An outer loop whose iterations each run an inner loop.
struct Nested {
  static constexpr int64_t kInner = 9;
  explicit Nested(int64_t outer) : counts(outer * kInner) {}
  Counts counts;
  struct Row {
    Nested *self;
    int64_t row;
  };
  static void inner(void *context, int64_t j) {
    auto *r = static_cast<Row *>(context);
    Counts::body(&r->self->counts, r->row * kInner + j);
  }
  static void outer(void *context, int64_t i) {
    Row r{static_cast<Nested *>(context), i};
    sitsRuntimeParallelFor(&inner, &r, kInner);
  }
};

TEST_F(ParallelFor, NestedLoopsComplete) {
  SITS_ASSERT_OK(setNumThreads(3));
  Nested nested(17);
  sitsRuntimeParallelFor(&Nested::outer, &nested, 17);
  EXPECT_TRUE(nested.counts.eachOnce());
}

TEST_F(ParallelFor, ConcurrentCallers) {
  SITS_ASSERT_OK(setNumThreads(2));
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        Counts counts(16);
        sitsRuntimeParallelFor(&Counts::body, &counts, 16);
        if (!counts.eachOnce())
          failures.fetch_add(1);
      }
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ParallelFor, WaitsForASlowHelper) {
  // Iteration 0 (the caller's) is quick; the other outlasts the spin budget
  // by far, so the caller blocks and the helper must wake it. The helper's
  // write is visible after the call returns.
  SITS_ASSERT_OK(setNumThreads(2));
  struct Slow {
    std::atomic<int> done{0};
    int64_t last = -1;
    static void body(void *context, int64_t i) {
      auto *self = static_cast<Slow *>(context);
      if (i == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        self->last = i;
      }
      self->done.fetch_add(1);
    }
  };
  for (int round = 0; round < 3; ++round) {
    Slow slow;
    sitsRuntimeParallelFor(&Slow::body, &slow, 2);
    EXPECT_EQ(slow.done.load(), 2);
    EXPECT_EQ(slow.last, 1);
  }
}

} // namespace
