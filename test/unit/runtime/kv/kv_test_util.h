//===- kv_test_util.h - Helpers for the KV allocator tests
//-----------------===//
//
// Every error test compares a full `snapshot()` taken before and after the
// failing call (spec §5): EXPECT_FAILS_UNCHANGED does exactly that.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_TEST_UNIT_RUNTIME_KV_KV_TEST_UTIL_H
#define SITS_TEST_UNIT_RUNTIME_KV_KV_TEST_UTIL_H

#include "sits/runtime/kv/allocator.h"
#include "sits/runtime/kv/testing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

namespace sits::runtime::kv::test {

inline const Status &statusOf(const Status &s) { return s; }
template <typename T> const Status &statusOf(const StatusOr<T> &s) {
  return s.status();
}

#define KV_ASSERT_OK(expr)                                                     \
  do {                                                                         \
    const auto &_kv_r = (expr);                                                \
    ASSERT_TRUE(::sits::runtime::kv::test::statusOf(_kv_r).ok())               \
        << #expr << " -> "                                                     \
        << ::sits::runtime::kv::test::statusOf(_kv_r).toString();              \
  } while (0)

#define KV_EXPECT_OK(expr)                                                     \
  do {                                                                         \
    const auto &_kv_r = (expr);                                                \
    EXPECT_TRUE(::sits::runtime::kv::test::statusOf(_kv_r).ok())               \
        << #expr << " -> "                                                     \
        << ::sits::runtime::kv::test::statusOf(_kv_r).toString();              \
  } while (0)

#define KV_ASSERT_INVARIANTS(alloc) KV_ASSERT_OK((alloc).checkInvariants())

/// Runs `expr` (a Status or StatusOr), expects `code`, and checks that the
/// observable state is byte-identical before and after.
#define KV_EXPECT_FAILS_UNCHANGED(alloc, expr, expectedCode)                   \
  do {                                                                         \
    auto _kv_before = (alloc).snapshot();                                      \
    ASSERT_TRUE(_kv_before.ok());                                              \
    const auto &_kv_r = (expr);                                                \
    const ::sits::runtime::kv::Status &_kv_s =                                 \
        ::sits::runtime::kv::test::statusOf(_kv_r);                            \
    EXPECT_EQ(_kv_s.code(), (expectedCode))                                    \
        << #expr << " -> " << _kv_s.toString();                                \
    auto _kv_after = (alloc).snapshot();                                       \
    ASSERT_TRUE(_kv_after.ok());                                               \
    EXPECT_EQ(_kv_before->diff(*_kv_after), "")                                \
        << #expr << " changed the state";                                      \
  } while (0)

inline PoolConfig poolConfig(int64_t numBlocks, int64_t blockSize = 16) {
  PoolConfig c;
  c.num_blocks = numBlocks;
  c.block_size = blockSize;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_seq_len = 1 << 20;
  return c;
}

inline std::unique_ptr<Allocator> makePool(const PoolConfig &c) {
  auto r = Allocator::create(c);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  if (!r.ok())
    return nullptr;
  return std::move(*r);
}

/// Tokens base, base + 1, ... (distinct per base range).
inline std::vector<int32_t> tokenRange(int64_t n, int32_t base) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), base);
  return t;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a,
                                   const std::vector<int32_t> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline std::vector<int32_t> table(Allocator &a, uint64_t seq) {
  auto t = a.blockTable(seq);
  EXPECT_TRUE(t.ok()) << t.status().toString();
  return t.ok() ? *t : std::vector<int32_t>{};
}

inline std::vector<int32_t> freeOrder(Allocator &a) {
  auto s = a.snapshot();
  EXPECT_TRUE(s.ok());
  return s.ok() ? s->device_free_order : std::vector<int32_t>{};
}

inline BlockInfo block(Allocator &a, int32_t b, Tier tier = Tier::kDevice) {
  auto r = AllocatorTestHooks::blockInfo(a, tier, b);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? *r : BlockInfo{};
}

inline Stats stats(Allocator &a) {
  auto s = a.stats();
  EXPECT_TRUE(s.ok()) << s.status().toString();
  return s.ok() ? *s : Stats{};
}

inline std::vector<int32_t> ids(int32_t from, int32_t to) {
  std::vector<int32_t> v;
  for (int32_t i = from; i < to; ++i)
    v.push_back(i);
  return v;
}

/// add_sequence with tokens, returning cached tokens (asserting success).
inline int64_t addTokens(Allocator &a, uint64_t seq,
                         const std::vector<int32_t> &tokens,
                         const AddOptions &opts = AddOptions()) {
  auto r = a.addSequence(seq, tokens.data(), int64_t(tokens.size()), opts);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? r->cached_tokens : -1;
}

} // namespace sits::runtime::kv::test

#endif // SITS_TEST_UNIT_RUNTIME_KV_KV_TEST_UTIL_H
