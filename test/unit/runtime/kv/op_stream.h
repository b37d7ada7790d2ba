//===- op_stream.h - Operation byte-stream driver (T74)
//--------------------===//
//
// Interprets a byte stream as a pool configuration followed by allocator
// operations, runs each one, and checks after every operation that
//   * checkInvariants() passes, and
//   * a failed operation left the snapshot unchanged.
// The gtest drives it with seeded random streams; the same function can back
// a libFuzzer target (LLVMFuzzerTestOneInput) in a clang build.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_TEST_UNIT_RUNTIME_KV_OP_STREAM_H
#define SITS_TEST_UNIT_RUNTIME_KV_OP_STREAM_H

#include "sits/runtime/kv/allocator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sits::runtime::kv::test {

class ByteReader {
public:
  ByteReader(const uint8_t *data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return uint16_t(u8() | (u8() << 8)); }

private:
  const uint8_t *data_;
  size_t size_;
  size_t pos_ = 0;
};

/// Outcome of one stream: an empty `failure` means every check held.
struct OpStreamResult {
  std::string failure;
  int64_t ops = 0;
  int64_t errors = 0;
};

inline OpStreamResult runOpStream(const uint8_t *data, size_t size,
                                  bool snapshotOnError = true) {
  OpStreamResult result;
  ByteReader in(data, size);
  PoolConfig c;
  c.num_blocks = 4 + in.u8() % 61;
  c.block_size = int64_t(1) << (in.u8() % 4); // 1, 2, 4, 8
  c.num_layers = 1;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.max_seq_len = 64 * c.block_size;
  const uint8_t flags = in.u8();
  c.enable_prefix_caching = (flags & 1) == 0;
  c.num_host_blocks = (flags & 2) ? in.u8() % 17 : 0;
  c.copy_ordering =
      (flags & 4) ? CopyOrdering::kAsync : CopyOrdering::kStreamOrdered;
  c.hash_algo = (flags & 8) ? HashAlgo::kXxh3_128 : HashAlgo::kSha256;
  c.reserve_null_block = (flags & 16) == 0;
  const int64_t usable = c.num_blocks - (c.reserve_null_block ? 1 : 0);
  c.watermark_blocks = (flags & 32) ? std::min<int64_t>(2, usable - 1) : 0;
  auto created = Allocator::create(c);
  if (!created.ok()) {
    result.failure = "create: " + created.status().toString();
    return result;
  }
  Allocator &a = **created;
  const int64_t bs = c.block_size;

  auto tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto &x : t)
      x = int32_t(in.u8() % 3); // tiny alphabet: prefixes collide often
    return t;
  };

  while (!in.done() && result.failure.empty()) {
    const uint8_t op = in.u8() % 16;
    const uint64_t seq = in.u8() % 12; // small id space: many conflicts
    StateSnapshot before;
    if (snapshotOnError) {
      auto s = a.snapshot();
      if (!s.ok()) {
        result.failure = "snapshot: " + s.status().toString();
        break;
      }
      before = std::move(*s);
    }
    Status st;
    switch (op) {
    case 0:
    case 1: {
      const int64_t n = int64_t(in.u8() % (4 * bs + 2)) - 1; // may be -1
      if (in.u8() & 1) {
        auto t = tokens(std::max<int64_t>(n, 0));
        AddOptions opts;
        const uint8_t o = in.u8();
        if (o % 4 == 0)
          opts.cache_salt = "s";
        if (o % 5 == 1)
          opts.block_extras = {{int64_t(o % 3), "mm"}};
        st = a.addSequence(seq, n < 0 ? nullptr : t.data(), n, opts).status();
      } else {
        st = a.addSequence(seq, n).status();
      }
      break;
    }
    case 2:
    case 3: {
      const int64_t k = int64_t(in.u8() % (2 * bs + 2)) - 1;
      auto info = a.sequenceInfo(seq);
      if (info.ok() && info->tokens_known) {
        auto t = tokens(std::max<int64_t>(k, 0));
        st = a.append(seq, t.data(), k);
      } else {
        st = a.append(seq, k);
      }
      break;
    }
    case 4: {
      AppendResult out;
      st = a.reserve(seq, int64_t(in.u8() % (2 * bs + 1)) - 1, &out);
      break;
    }
    case 5:
      st = a.fork(seq, in.u8() % 12, int64_t(in.u8() % (4 * bs)) - 2);
      break;
    case 6: {
      auto info = a.sequenceInfo(seq);
      const int64_t n = info.ok() ? info->num_tokens : 0;
      st = a.truncate(seq, int64_t(in.u8() % (n + 3)) - 1);
      break;
    }
    case 7:
    case 8:
      st = a.free(seq);
      break;
    case 9:
      st = a.swapOut(seq);
      break;
    case 10:
      st = a.swapIn(seq);
      break;
    case 11:
      st = a.evict(in.u8() % 4).status();
      break;
    case 12: {
      std::vector<BlockCopy> copies;
      st = a.takePendingCopies(&copies);
      if (st.ok() && !copies.empty() && (in.u8() & 1))
        st = a.complete(copies.back().epoch).status();
      break;
    }
    case 13: {
      auto t = tokens(in.u8() % (4 * bs));
      st = a.lookupPrefix(t.data(), int64_t(t.size())).status();
      break;
    }
    case 14: {
      const uint64_t ids[] = {seq, uint64_t(in.u8() % 12)};
      const uint8_t kind = in.u8() % 3;
      if (kind == 0) {
        st = a.freeBatch(ids, 2);
      } else if (kind == 1) {
        auto t = tokens(in.u8() % (3 * bs));
        const AddRequest reqs[] = {
            {ids[0], int64_t(t.size()), t.data(), nullptr},
            {ids[1], int64_t(in.u8() % (2 * bs)), nullptr, nullptr},
            {uint64_t(in.u8() % 12), int64_t(t.size()) / 2, t.data(), nullptr}};
        std::vector<AddResult> results;
        st = a.addSequences(reqs, 3, &results);
      } else {
        const AppendRequest reqs[] = {{ids[0], 1, nullptr},
                                      {ids[1], int64_t(in.u8() % 3), nullptr}};
        st = a.appendBatch(reqs, 2);
      }
      break;
    }
    case 15:
      st = (in.u8() % 8 == 0) ? a.resetPrefixCache() : a.checkInvariants();
      break;
    }
    ++result.ops;
    if (!st.ok()) {
      ++result.errors;
      if (st.code() == StatusCode::kInternal) {
        result.failure = "op " + std::to_string(op) + ": " + st.toString();
        break;
      }
      if (snapshotOnError) {
        auto after = a.snapshot();
        const std::string d = before.diff(*after);
        if (!d.empty()) {
          result.failure = "op " + std::to_string(op) + " failed with " +
                           st.toString() + " but changed the state: " + d;
          break;
        }
      }
    }
    const Status inv = a.checkInvariants();
    if (!inv.ok())
      result.failure = "after op " + std::to_string(op) + " (" + st.toString() +
                       "): " + inv.toString();
  }
  return result;
}

} // namespace sits::runtime::kv::test

#endif // SITS_TEST_UNIT_RUNTIME_KV_OP_STREAM_H
