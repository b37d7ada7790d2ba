//===- memory_test.cpp - The KV tensors and the copies on them
//-------------===//
//
// Sizes, overflow and allocation errors, alignment, and that the copies the
// allocator emits (CoW, swap-out, swap-in, offload on eviction, onboarding)
// move the right bytes: a "kernel" writes a pattern per (token, position)
// through slot_mapping, and every live sequence's KV is read back through
// its block table after each step.
//
//===----------------------------------------------------------------------===//
#include "kv_test_util.h"

#include "sits/runtime/kivi_layout.h"
#include "sits/runtime/kv/memory.h"

#include <cstring>
#include <map>
#include <random>
#include <set>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

namespace {

/// bs 4, 2 layers, K and V, 2 heads, head_dim 4, f32: 512-byte blocks.
PoolConfig smallConfig(int64_t device, int64_t host = 0) {
  PoolConfig c;
  c.num_blocks = device;
  c.num_host_blocks = host;
  c.block_size = 4;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.dtype = DType::kF32;
  c.max_seq_len = 1 << 16;
  return c;
}

/// smallConfig with int8 codes and a per-(token, head) f32 scale: rows of
/// 4 codes + 4 scale bytes, 256-byte blocks.
PoolConfig quantizedConfig(int64_t device, int64_t host = 0) {
  PoolConfig c = smallConfig(device, host);
  c.dtype = DType::kInt8;
  c.quantization = KVQuantization::kPerTokenHead;
  return c;
}

std::unique_ptr<Memory> makeMemory(const PoolConfig &c,
                                   MemoryOptions options = MemoryOptions()) {
  auto r = Memory::create(c, std::move(options));
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? std::move(*r) : nullptr;
}

bool allBytes(const void *p, size_t n, uint8_t value) {
  const auto *b = static_cast<const uint8_t *>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != value)
      return false;
  return true;
}

/// The byte a kernel writes at byte `i` of the (layer, kv, head) row of the
/// token `token` at position `pos`: content-addressed like the prefix cache,
/// so blocks shared by a hit hold the same bytes.
uint8_t pattern(int32_t token, int64_t pos, int64_t row, int64_t i) {
  uint32_t h = uint32_t(token) * 0x9E3779B1u ^ uint32_t(pos) * 0x85EBCA77u ^
               uint32_t(row) * 0xC2B2AE3Du ^ uint32_t(i) * 0x27D4EB2Fu;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 13;
  return uint8_t(h);
}

/// Allocator + memory + a model of what every live sequence's KV must read.
struct Harness {
  std::unique_ptr<Allocator> alloc;
  std::unique_ptr<Memory> mem;
  std::map<uint64_t, std::vector<int32_t>> tokens; // live sequences
  std::set<uint64_t> swapped;
  int64_t copiesApplied = 0;
  uint64_t lastEpoch = 0;

  explicit Harness(const PoolConfig &c)
      : alloc(makePool(c)), mem(makeMemory(c)) {}

  const MemoryLayout &L() const { return mem->layout(); }
  int64_t rows() const {
    return L().num_layers * L().kv_factor * L().num_kv_heads;
  }
  /// Row r's tile of token `slot % bs` of device block `slot / bs`.
  uint8_t *tokenRow(int32_t block, int64_t tok, int64_t row) const {
    return static_cast<uint8_t *>(mem->block(Tier::kDevice, block)) +
           row * L().head_stride + tok * L().token_stride;
  }

  /// The step's copies, before any kernel runs (STREAM_ORDERED).
  void sync() {
    std::vector<BlockCopy> copies;
    KV_ASSERT_OK(alloc->takePendingCopies(&copies));
    KV_ASSERT_OK(mem->apply(copies));
    copiesApplied += int64_t(copies.size());
    if (!copies.empty())
      lastEpoch = copies.back().epoch;
  }

  /// The kernel: writes positions [from, to) of `seq` through its slots.
  void write(uint64_t seq, int64_t from, int64_t to) {
    if (to <= from)
      return;
    std::vector<int64_t> slots(size_t(to - from));
    KV_ASSERT_OK(alloc->slotMapping(seq, from, to - from, slots.data()));
    const int64_t bs = L().block_size;
    for (int64_t p = from; p < to; ++p) {
      const int64_t slot = slots[size_t(p - from)];
      for (int64_t r = 0; r < rows(); ++r) {
        uint8_t *dst = tokenRow(int32_t(slot / bs), slot % bs, r);
        for (int64_t i = 0; i < L().token_stride; ++i)
          dst[i] = pattern(tokens[seq][size_t(p)], p, r, i);
      }
    }
  }

  /// Reads every position of `seq` through its block table.
  void check(uint64_t seq) const {
    const std::vector<int32_t> &toks = tokens.at(seq);
    auto table = alloc->blockTable(seq);
    ASSERT_TRUE(table.ok()) << table.status().toString();
    const int64_t bs = L().block_size;
    for (int64_t p = 0; p < int64_t(toks.size()); ++p) {
      const int32_t b = (*table)[size_t(p / bs)];
      for (int64_t r = 0; r < rows(); ++r) {
        const uint8_t *src = tokenRow(b, p % bs, r);
        for (int64_t i = 0; i < L().token_stride; ++i)
          ASSERT_EQ(src[i], pattern(toks[size_t(p)], p, r, i))
              << "seq " << seq << " position " << p << " (block " << b
              << ") row " << r << " byte " << i;
      }
    }
  }
  void checkAll() const {
    for (const auto &[seq, toks] : tokens)
      if (!swapped.count(seq))
        check(seq);
  }

  Status add(uint64_t seq, std::vector<int32_t> toks) {
    auto r = alloc->addSequence(seq, toks.data(), int64_t(toks.size()));
    if (!r.ok())
      return r.status();
    tokens[seq] = std::move(toks);
    sync();
    write(seq, r->cached_tokens, int64_t(tokens[seq].size()));
    return Status::OK();
  }
  Status append(uint64_t seq, const std::vector<int32_t> &more) {
    Status st = alloc->append(seq, more.data(), int64_t(more.size()));
    if (!st.ok())
      return st;
    std::vector<int32_t> &t = tokens[seq];
    const int64_t from = int64_t(t.size());
    t.insert(t.end(), more.begin(), more.end());
    sync();
    write(seq, from, int64_t(t.size()));
    return st;
  }
  Status fork(uint64_t parent, uint64_t child, int64_t pos) {
    Status st = alloc->fork(parent, child, pos);
    if (!st.ok())
      return st;
    const std::vector<int32_t> &p = tokens[parent];
    const size_t n = pos < 0 ? p.size() : size_t(pos);
    tokens[child].assign(p.begin(), p.begin() + ptrdiff_t(n));
    sync();
    return st;
  }
  Status truncate(uint64_t seq, int64_t n) {
    Status st = alloc->truncate(seq, n);
    if (st.ok())
      tokens[seq].resize(size_t(n));
    return st;
  }
  Status free(uint64_t seq) {
    Status st = alloc->free(seq);
    if (st.ok()) {
      tokens.erase(seq);
      swapped.erase(seq);
    }
    return st;
  }
  Status swapOut(uint64_t seq) {
    Status st = alloc->swapOut(seq);
    if (st.ok()) {
      swapped.insert(seq);
      sync();
    }
    return st;
  }
  Status swapIn(uint64_t seq) {
    Status st = alloc->swapIn(seq);
    if (st.ok()) {
      swapped.erase(seq);
      sync();
    }
    return st;
  }
};

/// Wraps the host backend: counts live allocations, fails the n-th one.
class CountingBackend final : public MemoryBackend {
public:
  explicit CountingBackend(int failAt, size_t align = 0)
      : failAt_(failAt), align_(align) {}
  const char *name() const override { return "counting"; }
  bool hostAccessible() const override { return true; }
  int32_t dlpackDeviceType() const override { return 1; }
  size_t alignment() const override {
    return align_ ? align_ : host_->alignment();
  }
  StatusOr<void *> allocate(size_t bytes) override {
    if (++calls == failAt_) {
      ErrorInfo e;
      e.code = StatusCode::kOutOfMemory;
      e.message = "injected failure";
      return Status(std::move(e));
    }
    auto r = host_->allocate(bytes);
    if (r.ok())
      ++live;
    return r;
  }
  void deallocate(void *p, size_t bytes) noexcept override {
    --live;
    host_->deallocate(p, bytes);
  }
  Status copy(const CopyRegion *regions, size_t count) override {
    for (size_t i = 0; i < count; ++i)
      kinds.push_back(regions[i].kind);
    return host_->copy(regions, count);
  }
  int calls = 0;
  int live = 0;
  std::vector<CopyKind> kinds;

private:
  int failAt_;
  size_t align_;
  std::shared_ptr<MemoryBackend> host_ = hostMemoryBackend();
};

} // namespace

// --- sizes, layout, alignment ------------------------------------------------

TEST(KVMemory, SizesAndLayoutFollowTheConfig) {
  auto m = makeMemory(smallConfig(8, 5));
  ASSERT_TRUE(m);
  const MemoryLayout &l = m->layout();
  EXPECT_EQ(l.token_stride, 16);  // head_dim 4 × f32
  EXPECT_EQ(l.head_stride, 64);   // × block_size 4
  EXPECT_EQ(l.kv_stride, 128);    // × 2 heads
  EXPECT_EQ(l.layer_stride, 256); // × K, V
  EXPECT_EQ(l.block_stride, 512); // × 2 layers
  EXPECT_EQ(l.block_stride, m->geometry().bytes_per_block);
  EXPECT_EQ(l.offset(3, 1, 1, 1, 2), 3 * 512 + 256 + 128 + 64 + 2 * 16);
  EXPECT_EQ(m->numBlocks(Tier::kDevice), 8);
  EXPECT_EQ(m->numBlocks(Tier::kHost), 5);
  EXPECT_EQ(m->bytes(Tier::kDevice), 8 * 512);
  EXPECT_EQ(m->bytes(Tier::kHost), 5 * 512);
  EXPECT_EQ(m->bytes(Tier::kDevice), m->geometry().total_bytes);
  EXPECT_EQ(m->bytes(Tier::kHost), m->geometry().host_total_bytes);
  auto *base = static_cast<char *>(m->data(Tier::kDevice));
  EXPECT_EQ(m->block(Tier::kDevice, 7), base + 7 * 512);
  EXPECT_EQ(m->blockLayer(Tier::kDevice, 7, 1), base + 7 * 512 + 256);
  EXPECT_EQ(m->block(Tier::kDevice, 8), nullptr);
  EXPECT_EQ(m->block(Tier::kDevice, -1), nullptr);
  EXPECT_EQ(m->block(Tier::kHost, 5), nullptr);
  EXPECT_EQ(m->blockLayer(Tier::kDevice, 0, 2), nullptr);
  EXPECT_EQ(m->block(Tier(7), 0), nullptr);
  EXPECT_STREQ(m->backend(Tier::kDevice).name(), "host");
  // Zero-filled: the null block reads as zeros.
  EXPECT_TRUE(allBytes(m->data(Tier::kDevice), 8 * 512, 0));
  EXPECT_TRUE(allBytes(m->data(Tier::kHost), 5 * 512, 0));
}

TEST(KVMemory, QuantizedRowsCarryTheirScale) {
  auto m = makeMemory(quantizedConfig(8, 3));
  ASSERT_TRUE(m);
  const MemoryLayout &l = m->layout();
  EXPECT_EQ(l.elem_size, 1);
  EXPECT_EQ(l.scale_size, 4);
  EXPECT_EQ(l.scale_offset, 4);   // after head_dim 4 int8 codes
  EXPECT_EQ(l.token_stride, 8);   // codes + scale
  EXPECT_EQ(l.head_stride, 32);   // × block_size 4
  EXPECT_EQ(l.kv_stride, 64);     // × 2 heads
  EXPECT_EQ(l.layer_stride, 128); // × K, V
  EXPECT_EQ(l.block_stride, 256); // × 2 layers
  EXPECT_EQ(l.block_stride, m->geometry().bytes_per_block);
  EXPECT_EQ(l.offset(3, 1, 1, 1, 2), 3 * 256 + 128 + 64 + 32 + 2 * 8);
  EXPECT_EQ(m->bytes(Tier::kDevice), 8 * 256);
  EXPECT_EQ(m->bytes(Tier::kHost), 3 * 256);
  EXPECT_EQ(m->blockLayer(Tier::kDevice, 7, 1),
            static_cast<char *>(m->data(Tier::kDevice)) + 7 * 256 + 128);
  EXPECT_TRUE(allBytes(m->data(Tier::kDevice), 8 * 256, 0));
  // The scale of row (b, l, kv, h, t): element = code × scale.
  auto *base = static_cast<uint8_t *>(m->data(Tier::kDevice));
  const float scale = 0.25f;
  std::memcpy(base + l.offset(5, 1, 0, 1, 3) + l.scale_offset, &scale, 4);
  base[l.offset(5, 1, 0, 1, 3) + 2] = uint8_t(int8_t(-8));
  float got;
  std::memcpy(&got, base + 5 * 256 + 128 + 32 + 3 * 8 + 4, 4);
  EXPECT_EQ(float(int8_t(base[5 * 256 + 128 + 32 + 3 * 8 + 2])) * got, -2.0f);
  // An unquantized pool: no scale, rows of head_dim elements.
  PoolConfig plain = quantizedConfig(8);
  plain.quantization = KVQuantization::kNone;
  auto p = makeMemory(plain);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->layout().scale_size, 0);
  EXPECT_EQ(p->layout().scale_offset, 4);
  EXPECT_EQ(p->layout().token_stride, 4);
  EXPECT_EQ(p->layout().block_stride, 128);
  EXPECT_EQ(smallConfig(1).quantization, KVQuantization::kNone);
  EXPECT_EQ(makeMemory(smallConfig(8))->layout().scale_size, 0);
}

TEST(KVMemory, QuantizedPoolsNeedInt8OrFp8E4M3) {
  PoolConfig c = quantizedConfig(8);
  c.dtype = DType::kF32;
  auto r = Memory::create(c);
  ASSERT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().subject, "quantization");
  c.dtype = DType::kF16;
  EXPECT_EQ(Memory::create(c).status().info().subject, "quantization");
  c.dtype = DType::kFP8E5M2;
  EXPECT_EQ(Memory::create(c).status().info().subject, "quantization");
  c.dtype = DType::kFP8E4M3;
  EXPECT_TRUE(makeMemory(c));
}

TEST(KVMemory, Fp8QuantizedRowsHaveTheInt8Layout) {
  // fp8_e4m3 codes: one byte each, then the f32 scale, as for int8.
  PoolConfig c = quantizedConfig(8, 3);
  c.dtype = DType::kFP8E4M3;
  auto m = makeMemory(c);
  ASSERT_TRUE(m);
  auto i8 = makeMemory(quantizedConfig(8, 3));
  ASSERT_TRUE(i8);
  const MemoryLayout &l = m->layout(), &w = i8->layout();
  EXPECT_EQ(l.elem_size, 1);
  EXPECT_EQ(l.scale_size, 4);
  EXPECT_EQ(l.scale_offset, 4);
  EXPECT_EQ(l.token_stride, 8);
  EXPECT_EQ(l.head_stride, 32);
  EXPECT_EQ(l.kv_stride, 64);
  EXPECT_EQ(l.layer_stride, 128);
  EXPECT_EQ(l.block_stride, 256);
  EXPECT_EQ(l.block_stride, m->geometry().bytes_per_block);
  EXPECT_EQ(l.offset(3, 1, 1, 1, 2), w.offset(3, 1, 1, 1, 2));
  EXPECT_EQ(m->bytes(Tier::kDevice), 8 * 256);
  EXPECT_EQ(m->bytes(Tier::kHost), 3 * 256);
  EXPECT_TRUE(allBytes(m->data(Tier::kDevice), 8 * 256, 0));
  // Element = fp8(code) × scale: 0x44 is E4M3FN 3.0 (exponent 8 − 7 = 1,
  // mantissa 1.5), 0xB8 is −1.0.
  auto *base = static_cast<uint8_t *>(m->data(Tier::kDevice));
  const float scale = 0.25f;
  const int64_t row = l.offset(5, 1, 0, 1, 3);
  std::memcpy(base + row + l.scale_offset, &scale, 4);
  base[row + 1] = 0x44;
  base[row + 2] = 0xB8;
  float got;
  std::memcpy(&got, base + 5 * 256 + 128 + 32 + 3 * 8 + 4, 4);
  EXPECT_EQ(got, 0.25f);
  EXPECT_EQ(base[5 * 256 + 128 + 32 + 3 * 8 + 1], 0x44);
  // A partial copy moves the codes and the scale of each row.
  const BlockCopy cow{0, Tier::kDevice, 5, Tier::kDevice, 6, 4};
  KV_ASSERT_OK(m->apply(&cow, 1));
  EXPECT_EQ(
      std::memcmp(m->block(Tier::kDevice, 6), m->block(Tier::kDevice, 5), 256),
      0);
}

TEST(KVMemory, NoHostTierAllocatesNothingForIt) {
  auto m = makeMemory(smallConfig(4));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->data(Tier::kHost), nullptr);
  EXPECT_EQ(m->bytes(Tier::kHost), 0);
  EXPECT_EQ(m->numBlocks(Tier::kHost), 0);
  EXPECT_EQ(m->block(Tier::kHost, 0), nullptr);
}

TEST(KVMemory, PoolsAndBlocksAreAligned) {
  PoolConfig c = smallConfig(16, 16);
  c.dtype = DType::kBF16; // 256-byte blocks
  auto m = makeMemory(c);
  ASSERT_TRUE(m);
  for (Tier t : {Tier::kDevice, Tier::kHost}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data(t)) % 4096, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data(t)) %
                  m->backend(t).alignment(),
              0u);
    for (int64_t b = 0; b < 16; ++b)
      EXPECT_EQ(reinterpret_cast<uintptr_t>(m->block(t, b)) % 64, 0u);
  }
  // A backend that cannot promise 64 bytes is refused.
  MemoryOptions o;
  o.device_backend = std::make_shared<CountingBackend>(0, 32);
  auto r = Memory::create(c, o);
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
}

// --- errors ------------------------------------------------------------------

TEST(KVMemory, BadConfigsNameTheField) {
  PoolConfig c = smallConfig(8);
  c.num_layers = 0;
  auto r = Memory::create(c);
  ASSERT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().subject, "num_layers");
  c = smallConfig(8);
  c.num_blocks = -3;
  EXPECT_EQ(Memory::create(c).status().info().subject, "num_blocks");
  c = smallConfig(8);
  c.dtype = DType(42);
  EXPECT_EQ(Memory::create(c).status().info().subject, "dtype");
}

TEST(KVMemory, SizeOverflowIsAnErrorNotACrash) {
  // bytes_per_block: 2 × 2^20 × 2^20 × 2^20 × 4 × 4 overflows int64.
  PoolConfig c = smallConfig(8);
  c.num_layers = c.num_kv_heads = c.head_dim = int64_t(1) << 20;
  auto r = Memory::create(c);
  ASSERT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().subject, "bytes_per_block");
  // num_blocks × bytes_per_block: 2^30 × 2^40 overflows.
  c = smallConfig(int64_t(1) << 30);
  c.num_layers = int64_t(1) << 20;
  c.head_dim = int64_t(1) << 14; // 2^20 × 2 × 2 × 2^14 × 4 × 4 = 2^40
  r = Memory::create(c);
  ASSERT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().subject, "total_bytes");
  c.num_blocks = 8;
  c.num_host_blocks = int64_t(1) << 30;
  r = Memory::create(c);
  ASSERT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().subject, "host_total_bytes");
}

TEST(KVMemory, AllocationFailureIsOutOfMemoryWithTheBytes) {
  // 2^30 blocks × 2^23 bytes = 2^53 bytes: beyond any address space.
  PoolConfig c = smallConfig(int64_t(1) << 30);
  c.num_layers = 1;
  c.num_kv_heads = 1;
  c.head_dim = int64_t(1) << 16;
  c.block_size = 16; // 2 × 2^16 × 16 tokens × 4 B = 2^23 bytes per block
  auto r = Memory::create(c);
  ASSERT_EQ(r.code(), StatusCode::kOutOfMemory) << r.status().toString();
  EXPECT_EQ(r.status().info().value, int64_t(1) << 53);
  EXPECT_EQ(r.status().info().subject, "device_tier");
  c.num_blocks = 4;
  c.num_host_blocks = int64_t(1) << 30;
  r = Memory::create(c);
  ASSERT_EQ(r.code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(r.status().info().subject, "host_tier");
  EXPECT_EQ(r.status().info().value, int64_t(1) << 53);
}

TEST(KVMemory, FailedCreateLeavesNothingAllocated) {
  auto backend = std::make_shared<CountingBackend>(/*failAt=*/2);
  MemoryOptions o;
  o.device_backend = o.host_backend = backend;
  auto r = Memory::create(smallConfig(8, 4), o);
  ASSERT_EQ(r.code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(r.status().info().subject, "host_tier");
  EXPECT_EQ(r.status().info().value, 4 * 512);
  EXPECT_EQ(backend->calls, 2);
  EXPECT_EQ(backend->live, 0); // the device pool went back
  {
    auto ok = Memory::create(smallConfig(8, 4), o);
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(backend->live, 2);
  }
  EXPECT_EQ(backend->live, 0); // and both go back with the memory
}

TEST(KVMemory, BadCopiesChangeNothing) {
  PoolConfig c = smallConfig(8, 4);
  auto m = makeMemory(c);
  ASSERT_TRUE(m);
  std::memset(m->data(Tier::kDevice), 0x11, size_t(m->bytes(Tier::kDevice)));
  std::memset(m->block(Tier::kDevice, 0), 0, 512);
  const BlockCopy good{0, Tier::kDevice, 1, Tier::kDevice, 2, 4};
  struct Case {
    BlockCopy bad;
    const char *field;
  };
  const Case cases[] = {
      {{0, Tier::kDevice, 8, Tier::kDevice, 2, 4}, "src"},
      {{0, Tier::kDevice, -1, Tier::kDevice, 2, 4}, "src"},
      {{0, Tier::kDevice, 1, Tier::kHost, 4, 4}, "dst"},
      {{0, Tier::kDevice, 1, Tier::kDevice, 0, 4}, "dst"}, // the null block
      {{0, Tier::kDevice, 1, Tier::kDevice, 3, 5}, "tokens"},
      {{0, Tier::kDevice, 1, Tier::kDevice, 3, -1}, "tokens"},
      {{0, Tier(2), 1, Tier::kDevice, 3, 4}, "src_tier"},
      {{0, Tier::kDevice, 1, Tier(-1), 3, 4}, "dst_tier"},
  };
  for (const Case &k : cases) {
    const std::vector<BlockCopy> copies = {good, k.bad};
    const Status st = m->apply(copies);
    ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << k.field;
    EXPECT_EQ(st.info().subject, k.field);
    EXPECT_EQ(st.info().batch_index, 1);
  }
  // Validation runs before the first byte moves: block 2 is untouched.
  EXPECT_TRUE(allBytes(m->block(Tier::kDevice, 0), 512, 0));
  EXPECT_TRUE(allBytes(m->block(Tier::kDevice, 1), 7 * 512, 0x11));
  // Without a host tier, any host block is out of range.
  auto noHost = makeMemory(smallConfig(8));
  const BlockCopy toHost{0, Tier::kDevice, 1, Tier::kHost, 0, 4};
  EXPECT_EQ(noHost->apply(&toHost, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(noHost->apply(nullptr, 1).code(), StatusCode::kInvalidArgument);
  KV_EXPECT_OK(noHost->apply(nullptr, 0));
}

// --- copies move the right bytes ---------------------------------------------

TEST(KVMemory, PartialCopyMovesTheValidPrefixOfEveryTile) {
  PoolConfig c = smallConfig(4, 2);
  auto backend = std::make_shared<CountingBackend>(0);
  MemoryOptions o;
  o.device_backend = backend;
  auto m = makeMemory(c, o);
  ASSERT_TRUE(m);
  const MemoryLayout &l = m->layout();
  auto *src = static_cast<uint8_t *>(m->block(Tier::kDevice, 1));
  for (int64_t i = 0; i < l.block_stride; ++i)
    src[i] = uint8_t(i * 7 + 1);
  std::memset(m->block(Tier::kDevice, 2), 0xEE, size_t(l.block_stride));
  const BlockCopy cow{0, Tier::kDevice, 1, Tier::kDevice, 2, 3};
  KV_ASSERT_OK(m->apply(&cow, 1));
  auto *dst = static_cast<uint8_t *>(m->block(Tier::kDevice, 2));
  for (int64_t layer = 0; layer < 2; ++layer)
    for (int64_t kv = 0; kv < 2; ++kv)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t t = 0; t < 4; ++t)
          for (int64_t i = 0; i < l.token_stride; ++i) {
            const int64_t at = l.offset(0, layer, kv, h, t) + i;
            EXPECT_EQ(dst[at], t < 3 ? src[at] : 0xEE)
                << layer << " " << kv << " " << h << " " << t << " " << i;
          }
  // Full blocks, across tiers, in list order: 1 → host 0 → device 3.
  const std::vector<BlockCopy> chain = {
      {1, Tier::kDevice, 1, Tier::kHost, 0, 4},
      {1, Tier::kHost, 0, Tier::kDevice, 3, 4},
      {1, Tier::kDevice, 3, Tier::kDevice, 3, 4}, // src == dst: no-op
      {1, Tier::kDevice, 1, Tier::kDevice, 2, 0}, // no tokens: no-op
  };
  KV_ASSERT_OK(m->apply(chain));
  EXPECT_EQ(std::memcmp(m->block(Tier::kHost, 0), src, 512), 0);
  EXPECT_EQ(std::memcmp(m->block(Tier::kDevice, 3), src, 512), 0);
  // Every copy ran on the device backend, with its direction.
  EXPECT_EQ(backend->kinds, (std::vector<CopyKind>{CopyKind::kDeviceToDevice,
                                                   CopyKind::kDeviceToHost,
                                                   CopyKind::kHostToDevice}));
}

TEST(KVMemory, QuantizedCopiesMoveCodesAndScales) {
  auto m = makeMemory(quantizedConfig(6, 2));
  ASSERT_TRUE(m);
  const MemoryLayout &l = m->layout();
  // Every byte of block 1 distinct from its neighbours', the scales f32
  // values of their own (row r, token t: scale r + t / 8).
  auto *src = static_cast<uint8_t *>(m->block(Tier::kDevice, 1));
  for (int64_t i = 0; i < l.block_stride; ++i)
    src[i] = uint8_t(i * 7 + 1);
  const int64_t rows = l.num_layers * l.kv_factor * l.num_kv_heads;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < l.block_size; ++t) {
      const float scale = float(r) + float(t) / 8 + 0.5f;
      std::memcpy(src + r * l.head_stride + t * l.token_stride + l.scale_offset,
                  &scale, sizeof(scale));
    }
  auto *dst = static_cast<uint8_t *>(m->block(Tier::kDevice, 2));
  std::memset(dst, 0xEE, size_t(l.block_stride));
  // A partial copy (CoW of a 3-token tail): codes and scales of tokens 0-2.
  const BlockCopy cow{0, Tier::kDevice, 1, Tier::kDevice, 2, 3};
  KV_ASSERT_OK(m->apply(&cow, 1));
  for (int64_t layer = 0; layer < 2; ++layer)
    for (int64_t kv = 0; kv < 2; ++kv)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t t = 0; t < 4; ++t) {
          const int64_t row = l.offset(0, layer, kv, h, t);
          for (int64_t i = 0; i < l.token_stride; ++i)
            EXPECT_EQ(dst[row + i], t < 3 ? src[row + i] : 0xEE)
                << layer << " " << kv << " " << h << " " << t << " " << i;
          if (t < 3) {
            float got, want;
            std::memcpy(&got, dst + row + l.scale_offset, 4);
            std::memcpy(&want, src + row + l.scale_offset, 4);
            EXPECT_EQ(got, want);
            EXPECT_EQ(got,
                      float((layer * 2 + kv) * 2 + h) + float(t) / 8 + 0.5f);
          }
        }
  // Byte past the block's last row untouched (block 3 was zero).
  EXPECT_TRUE(allBytes(m->block(Tier::kDevice, 3), size_t(l.block_stride), 0));
  // Full copies across tiers carry everything: device 1 → host 1 → device 4,
  // and a partial swap of 1 token: device 1 → host 0.
  std::memset(m->block(Tier::kHost, 0), 0x55, size_t(l.block_stride));
  const std::vector<BlockCopy> chain = {
      {1, Tier::kDevice, 1, Tier::kHost, 1, 4},
      {1, Tier::kHost, 1, Tier::kDevice, 4, 4},
      {1, Tier::kDevice, 1, Tier::kHost, 0, 1},
  };
  KV_ASSERT_OK(m->apply(chain));
  EXPECT_EQ(std::memcmp(m->block(Tier::kHost, 1), src, 256), 0);
  EXPECT_EQ(std::memcmp(m->block(Tier::kDevice, 4), src, 256), 0);
  auto *host0 = static_cast<uint8_t *>(m->block(Tier::kHost, 0));
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(std::memcmp(host0 + r * l.head_stride, src + r * l.head_stride,
                          size_t(l.token_stride)),
              0)
        << "row " << r;
    EXPECT_TRUE(allBytes(host0 + r * l.head_stride + l.token_stride,
                         size_t(l.head_stride - l.token_stride), 0x55))
        << "row " << r;
  }
}

/// KIVI blocks of int4 codes: 2 layers, 2 heads of 16, block size 4.
PoolConfig kiviConfig(int64_t device, int64_t host = 0) {
  PoolConfig c = smallConfig(device, host);
  c.head_dim = 16;
  c.dtype = DType::kInt4;
  c.quantization = KVQuantization::kKivi;
  return c;
}

TEST(KVMemory, KiviWidthsPerHeadLiveInTheNullBlock) {
  PoolConfig c = kiviConfig(5, 2);
  c.kivi_widths = {4, 2, 2, 2};
  sits::runtime::kivi::Layout k;
  ASSERT_TRUE(sits::runtime::kivi::Layout::make(
      2, 2, 4, 16, sits::runtime::kivi::kMixedWidths, &k,
      c.kivi_widths.data()));
  auto g = validatePoolConfig(c);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  // Slabs of 4 rows of 8 (4 bits) or 4 (2 bits) bytes, then 64 of
  // parameters: one 4-bit head of the four.
  EXPECT_EQ(g->bytes_per_block, 2 * ((4 * 8 + 64) + 3 * (4 * 4 + 64)));
  EXPECT_EQ(g->block_stride, k.blockStride);
  EXPECT_EQ(kiviMode(c), sits::runtime::kivi::kMixedWidths);
  auto m = makeMemory(c);
  ASSERT_TRUE(m);
  for (Tier tier : {Tier::kDevice, Tier::kHost})
    EXPECT_EQ(std::memcmp(m->block(tier, 0), c.kivi_widths.data(), 4), 0);
  auto bad = [](PoolConfig c, const char *field) {
    auto r = validatePoolConfig(c);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().info().subject, field) << r.status().toString();
  };
  PoolConfig x = c;
  x.kivi_widths = {4, 2, 2};
  bad(x, "kivi_widths");
  x.kivi_widths = {4, 2, 8, 2};
  bad(x, "kivi_widths");
  x = c;
  x.dtype = DType::kInt2;
  bad(x, "kivi_widths");
  x = c;
  x.quantization = KVQuantization::kPerTokenGroup;
  bad(x, "kivi_widths");
  x = c;
  x.reserve_null_block = false;
  bad(x, "reserve_null_block");
}

TEST(KVMemory, KiviPoolsFollowTheirLayout) {
  PoolConfig c = kiviConfig(5, 2);
  sits::runtime::kivi::Layout k;
  ASSERT_TRUE(sits::runtime::kivi::Layout::make(2, 2, 4, 16, 4, &k));
  auto g = validatePoolConfig(c);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  // A slab: 4 rows of 8 bytes, then 16 (scale, min) f16 pairs.
  EXPECT_EQ(k.slabBytes, 4 * 8 + 64);
  EXPECT_EQ(g->bytes_per_block, 2 * 2 * 2 * (4 * 8 + 64));
  EXPECT_EQ(g->block_stride, k.blockStride);
  EXPECT_EQ(g->total_bytes, 5 * k.blockStride);
  EXPECT_EQ(g->host_total_bytes, 2 * k.blockStride);
  auto m = makeMemory(c);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->layout().block_stride, k.blockStride);
  EXPECT_EQ(m->layout().layer_stride, k.layerStride);
  EXPECT_EQ(m->bytes(Tier::kDevice), 5 * k.blockStride);
  EXPECT_EQ(static_cast<char *>(m->block(Tier::kDevice, 3)) -
                static_cast<char *>(m->data(Tier::kDevice)),
            3 * k.blockStride);
  // Every tail starts on a page.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->block(Tier::kDevice, 1)) %
                sits::runtime::kivi::kTailPageBytes,
            0u);
  EXPECT_EQ(k.tailOffset % sits::runtime::kivi::kTailPageBytes, 0);

  // int4 / int2 and kivi go together, with K and V.
  auto bad = [](PoolConfig c, const char *field) {
    auto r = validatePoolConfig(c);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().info().subject, field) << r.status().toString();
  };
  PoolConfig x = kiviConfig(4);
  x.quantization = KVQuantization::kNone;
  bad(x, "dtype");
  x = kiviConfig(4);
  x.dtype = DType::kInt8;
  bad(x, "quantization");
  x = kiviConfig(4);
  x.kv_factor = 1;
  bad(x, "kv_factor");
  x = kiviConfig(4);
  x.head_dim = 3; // 12 bits a row
  bad(x, "head_dim");
  x = kiviConfig(4);
  x.dtype = DType::kInt2;
  x.head_dim = 4;
  EXPECT_TRUE(validatePoolConfig(x).ok());
  x.head_dim = 6;
  bad(x, "head_dim");
  EXPECT_EQ(std::string(dtypeName(DType::kInt4)), "int4");
  EXPECT_EQ(dtypeSize(DType::kInt4), 0);
  EXPECT_EQ(dtypeBits(DType::kInt2), 2);
  EXPECT_EQ(std::string(kvQuantizationName(KVQuantization::kKivi)), "kivi");
}

TEST(KVMemory, KiviCopiesCarryTheTailOfAPartialBlock) {
  auto m = makeMemory(kiviConfig(6, 2));
  ASSERT_TRUE(m);
  sits::runtime::kivi::Layout k;
  ASSERT_TRUE(sits::runtime::kivi::Layout::make(2, 2, 4, 16, 4, &k));
  auto *base = static_cast<uint8_t *>(m->data(Tier::kDevice));
  auto count = [&](void *block, int64_t layer) {
    int32_t n;
    std::memcpy(&n,
                static_cast<uint8_t *>(block) + k.tailOffset +
                    layer * k.tailLayerBytes,
                sizeof n);
    return n;
  };
  auto row = [&](void *block, int64_t layer, int64_t kind, int64_t head,
                 int64_t t) {
    return reinterpret_cast<float *>(static_cast<uint8_t *>(block) +
                                     k.tailOffset + layer * k.tailLayerBytes) +
           k.tailRow(kind, head, t);
  };
  // Block 1: a quantized part of its own, 3 rows in each layer's tail.
  uint8_t *b1 = base + k.blockStride;
  for (int64_t i = 0; i < k.blockBytes; ++i)
    b1[i] = uint8_t(i * 7 + 1);
  for (int64_t layer = 0; layer < 2; ++layer) {
    const int32_t three = 3;
    std::memcpy(b1 + k.tailOffset + layer * k.tailLayerBytes, &three, 4);
    for (int64_t kind = 0; kind < 2; ++kind)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t t = 0; t < 4; ++t)
          for (int64_t d = 0; d < 16; ++d)
            row(b1, layer, kind, h, t)[d] =
                float(((layer * 2 + kind) * 2 + h) * 100 + t * 16 + d);
  }
  // Block 2 had a filling tail of its own: 2 rows counted, row 3 set.
  void *b2 = m->block(Tier::kDevice, 2);
  for (int64_t layer = 0; layer < 2; ++layer) {
    const int32_t two = 2;
    std::memcpy(static_cast<uint8_t *>(b2) + k.tailOffset +
                    layer * k.tailLayerBytes,
                &two, 4);
    row(b2, layer, 1, 1, 3)[0] = -1.f;
  }
  // CoW of 2 of block 1's 3 rows into block 2.
  const BlockCopy cow{0, Tier::kDevice, 1, Tier::kDevice, 2, 2};
  KV_ASSERT_OK(m->apply(&cow, 1));
  EXPECT_EQ(std::memcmp(b2, b1, size_t(k.blockBytes)), 0);
  for (int64_t layer = 0; layer < 2; ++layer) {
    EXPECT_EQ(count(b2, layer), 2);
    for (int64_t kind = 0; kind < 2; ++kind)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t t = 0; t < 2; ++t)
          EXPECT_EQ(std::memcmp(row(b2, layer, kind, h, t),
                                row(b1, layer, kind, h, t), 16 * 4),
                    0);
    EXPECT_EQ(row(b2, layer, 1, 1, 3)[0], -1.f); // past the copy: as it was
  }
  // Swap out and back in (3 tokens): the rows come back.
  const std::vector<BlockCopy> swap = {
      {1, Tier::kDevice, 1, Tier::kHost, 1, 3},
      {1, Tier::kHost, 1, Tier::kDevice, 4, 3}};
  KV_ASSERT_OK(m->apply(swap));
  void *b4 = m->block(Tier::kDevice, 4);
  for (int64_t layer = 0; layer < 2; ++layer) {
    EXPECT_EQ(count(m->block(Tier::kHost, 1), layer), 3);
    EXPECT_EQ(count(b4, layer), 3);
    EXPECT_EQ(
        std::memcmp(row(b4, layer, 1, 1, 2), row(b1, layer, 1, 1, 2), 16 * 4),
        0);
  }
  // A full block (its tail given back: count 0) copied over block 4: the
  // quantized part moves, and block 4's tail is empty after.
  for (int64_t layer = 0; layer < 2; ++layer)
    std::memset(b1 + k.tailOffset + layer * k.tailLayerBytes, 0, 4);
  const BlockCopy full{2, Tier::kDevice, 1, Tier::kDevice, 4, 4};
  KV_ASSERT_OK(m->apply(&full, 1));
  EXPECT_EQ(std::memcmp(b4, b1, size_t(k.blockBytes)), 0);
  for (int64_t layer = 0; layer < 2; ++layer)
    EXPECT_EQ(count(b4, layer), 0);
  // Nothing else was written.
  EXPECT_TRUE(allBytes(m->block(Tier::kDevice, 3), size_t(k.blockStride), 0));
  EXPECT_TRUE(allBytes(m->block(Tier::kDevice, 0), size_t(k.blockStride), 0));
}

TEST(KVMemory, QuantizedContentFollowsTheBlocks) {
  // The kernel writes every byte of a row (codes and scale): fork + CoW,
  // swap out and in, eviction offload and onboarding keep each sequence's
  // rows whole.
  Harness h(quantizedConfig(12, 8));
  ASSERT_TRUE(h.alloc && h.mem);
  EXPECT_EQ(h.L().token_stride, 8);
  KV_ASSERT_OK(h.add(1, tokenRange(10, 100))); // [1, 2, 3], tail of 2
  KV_ASSERT_OK(h.fork(1, 2, -1));
  KV_ASSERT_OK(h.append(2, {7})); // CoW of the shared 2-token tail
  EXPECT_EQ(h.copiesApplied, 1);
  h.checkAll();
  KV_ASSERT_OK(h.swapOut(1));
  KV_ASSERT_OK(h.add(3, tokenRange(20, 500)));
  h.checkAll();
  KV_ASSERT_OK(h.free(3));
  KV_ASSERT_OK(h.swapIn(1));
  h.checkAll();
  KV_ASSERT_OK(h.free(2));
  KV_ASSERT_OK(h.free(1));                     // its sealed blocks are cached
  KV_ASSERT_OK(h.add(4, tokenRange(44, 900))); // offloads the cached ones
  KV_ASSERT_OK(h.free(4));
  KV_ASSERT_OK(h.add(5, tokenRange(10, 100))); // onboarded from the host
  EXPECT_GT(stats(*h.alloc).onboards, 0);
  h.checkAll();
  KV_ASSERT_INVARIANTS(*h.alloc);
}

TEST(KVMemory, ForkThenWriteCopiesTheSharedTail) {
  Harness h(smallConfig(16));
  ASSERT_TRUE(h.alloc && h.mem);
  KV_ASSERT_OK(h.add(1, tokenRange(6, 100))); // [1, 2], tail holds 2 tokens
  h.checkAll();
  KV_ASSERT_OK(h.fork(1, 2, -1));
  h.checkAll();
  // The child writes first: CoW of the shared tail (2 valid tokens).
  AppendResult out;
  const std::vector<int32_t> more = {7};
  KV_ASSERT_OK(h.alloc->append(2, more.data(), 1, &out));
  ASSERT_EQ(out.copies.size(), 1u);
  EXPECT_EQ(out.copies[0].tokens, 2);
  const int32_t shared = out.copies[0].src, copy = out.copies[0].dst;
  h.tokens[2].push_back(7);
  h.sync();
  // Before the kernel writes: the child's new block holds the parent's two
  // tokens, byte for byte.
  for (int64_t r = 0; r < h.rows(); ++r)
    EXPECT_EQ(std::memcmp(h.tokenRow(copy, 0, r), h.tokenRow(shared, 0, r),
                          size_t(2 * h.L().token_stride)),
              0);
  h.write(2, 6, 7);
  h.checkAll(); // the parent's tail is unchanged by the child's write
  // The parent writes next: its tail is exclusive now, no copy.
  KV_ASSERT_OK(h.append(1, {8, 9}));
  EXPECT_EQ(h.copiesApplied, 1);
  h.checkAll();
  KV_ASSERT_INVARIANTS(*h.alloc);
}

TEST(KVMemory, ForkMidBlockThenTruncateAndRewrite) {
  Harness h(smallConfig(16));
  KV_ASSERT_OK(h.add(1, tokenRange(11, 100))); // 3 blocks, tail of 3
  KV_ASSERT_OK(h.fork(1, 2, 5));               // child shares 2 blocks
  KV_ASSERT_OK(h.append(2, {1, 2, 3, 4, 5}));  // CoW of the 1-token tail
  EXPECT_EQ(h.copiesApplied, 1);
  h.checkAll();
  KV_ASSERT_OK(h.truncate(1, 6)); // the parent drops its third block
  KV_ASSERT_OK(h.append(1, {42, 43, 44}));
  h.checkAll();
  KV_ASSERT_INVARIANTS(*h.alloc);
}

TEST(KVMemory, SwapOutAndInCarryTheContent) {
  Harness h(smallConfig(12, 8));
  KV_ASSERT_OK(h.add(1, tokenRange(10, 100))); // [1, 2, 3], tail of 2
  KV_ASSERT_OK(h.fork(1, 2, 4));               // block 1 shared
  const auto before = table(*h.alloc, 1);
  KV_ASSERT_OK(h.swapOut(1)); // D2H of the two exclusive blocks
  EXPECT_EQ(h.copiesApplied, 2);
  // The host blocks hold the swapped tokens (the partial one, its 2 valid).
  for (int64_t r = 0; r < h.rows(); ++r) {
    auto *host1 = static_cast<uint8_t *>(h.mem->block(Tier::kHost, 1));
    for (int64_t i = 0; i < h.L().token_stride; ++i)
      EXPECT_EQ(host1[r * h.L().head_stride + h.L().token_stride + i],
                pattern(109, 9, r, i));
  }
  // Other sequences take and overwrite the freed device blocks.
  KV_ASSERT_OK(h.add(3, tokenRange(40, 500)));
  h.checkAll();
  KV_ASSERT_OK(h.free(3));
  KV_ASSERT_OK(h.add(4, tokenRange(8, 900)));
  KV_ASSERT_OK(h.swapIn(1)); // H2D into new blocks
  EXPECT_EQ(stats(*h.alloc).swapped_out_blocks, 2);
  EXPECT_EQ(stats(*h.alloc).swapped_in_blocks, 2);
  const auto after = table(*h.alloc, 1);
  EXPECT_EQ(after[0], before[0]); // the shared block never moved
  h.checkAll();
  KV_ASSERT_OK(h.append(1, {1, 2, 3}));
  h.checkAll();
  KV_ASSERT_INVARIANTS(*h.alloc);
}

TEST(KVMemory, EvictionOffloadAndOnboardingCarryTheContent) {
  Harness h(smallConfig(5, 8)); // 4 usable device blocks
  const auto prompt = tokenRange(10, 100);
  KV_ASSERT_OK(h.add(1, prompt)); // [1, 2, 3]: blocks 1, 2 sealed
  KV_ASSERT_OK(h.free(1));        // 1, 2 cached; 3 free
  // A new sequence takes every block: the cached victims are offloaded
  // (D2H listed before the new owner's writes).
  KV_ASSERT_OK(h.add(2, tokenRange(16, 700)));
  EXPECT_EQ(h.copiesApplied, 2);
  EXPECT_EQ(stats(*h.alloc).offloads, 2);
  h.checkAll();
  KV_ASSERT_OK(h.free(2));
  // The prompt is served by the host tier: onboarded by H2D copies.
  auto r = h.alloc->lookupPrefix(prompt.data(), int64_t(prompt.size()));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 8);
  // Its new blocks are victims again (offloaded first, in the same list).
  KV_ASSERT_OK(h.add(3, prompt));
  EXPECT_EQ(stats(*h.alloc).onboards, 2);
  h.checkAll(); // positions 0..7 came back from the host, 8..9 rewritten
  KV_ASSERT_INVARIANTS(*h.alloc);
}

TEST(KVMemory, AsyncModeCopiesBeforeComplete) {
  PoolConfig c = smallConfig(5, 8);
  c.copy_ordering = CopyOrdering::kAsync;
  Harness h(c);
  const auto prompt = tokenRange(10, 100);
  KV_ASSERT_OK(h.add(1, prompt));
  KV_ASSERT_OK(h.free(1));
  // The runtime's side of ASYNC: evict, run the copies, complete.
  auto offload = [&](int64_t k) {
    auto evicted = h.alloc->evict(k); // EVICTING until complete()
    ASSERT_TRUE(evicted.ok());
    EXPECT_EQ(*evicted, k);
    std::vector<BlockCopy> copies;
    KV_ASSERT_OK(h.alloc->takePendingCopies(&copies));
    KV_ASSERT_OK(h.mem->apply(copies));
    ASSERT_EQ(copies.size(), size_t(k));
    KV_ASSERT_OK(h.alloc->complete(copies.back().epoch));
  };
  offload(2);
  KV_ASSERT_OK(h.add(2, tokenRange(16, 700))); // reuses the sources
  h.checkAll();
  KV_ASSERT_OK(h.free(2));
  offload(4);
  KV_ASSERT_OK(h.add(3, prompt)); // onboarded from the host
  EXPECT_EQ(stats(*h.alloc).onboards, 2);
  h.checkAll();
  KV_ASSERT_OK(h.alloc->complete(h.lastEpoch));
  EXPECT_EQ(stats(*h.alloc).evicting_blocks, 0);
  KV_ASSERT_INVARIANTS(*h.alloc);
}

TEST(KVMemory, RandomOperationsKeepEverySequencesContent) {
  // Seeded random walk over add (prefix hits from a 3-token alphabet),
  // append, fork, truncate, free, swap out/in and evict on a small pool with
  // a host tier; after every step the copies are applied, the kernel writes
  // the new tokens, and every resident sequence reads back what it wrote.
  std::mt19937_64 rng(2024);
  auto pick = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };
  int64_t ops = 0, copies = 0;
  for (int round = 0; round < 6; ++round) {
    Harness h(smallConfig(24, 12));
    ASSERT_TRUE(h.alloc && h.mem);
    uint64_t nextId = 1;
    for (int step = 0; step < 400; ++step) {
      std::vector<uint64_t> live, resident;
      for (const auto &[seq, toks] : h.tokens) {
        live.push_back(seq);
        if (!h.swapped.count(seq))
          resident.push_back(seq);
      }
      auto randomTokens = [&](int64_t n) {
        std::vector<int32_t> t(static_cast<size_t>(n));
        for (auto &x : t)
          x = int32_t(1 + pick(3));
        return t;
      };
      Status st;
      const int64_t op = pick(10);
      if (op <= 1 || live.empty()) {
        st = h.add(nextId++, randomTokens(pick(14)));
      } else if (op <= 4 && !resident.empty()) {
        st = h.append(resident[size_t(pick(int64_t(resident.size())))],
                      randomTokens(1 + pick(5)));
      } else if (op == 5 && !resident.empty()) {
        const uint64_t p = resident[size_t(pick(int64_t(resident.size())))];
        const int64_t n = int64_t(h.tokens[p].size());
        st = h.fork(p, nextId++, pick(n + 1));
      } else if (op == 6 && !resident.empty()) {
        const uint64_t s = resident[size_t(pick(int64_t(resident.size())))];
        st = h.truncate(s, pick(int64_t(h.tokens[s].size()) + 1));
      } else if (op == 7) {
        st = h.free(live[size_t(pick(int64_t(live.size())))]);
      } else if (op == 8) {
        const uint64_t s = live[size_t(pick(int64_t(live.size())))];
        st = h.swapped.count(s) ? h.swapIn(s) : h.swapOut(s);
      } else {
        auto r = h.alloc->evict(1 + pick(3));
        st = r.status();
        h.sync();
      }
      if (!st.ok()) {
        const StatusCode code = st.code();
        ASSERT_TRUE(code == StatusCode::kOutOfBlocks ||
                    code == StatusCode::kHostTierFull ||
                    code == StatusCode::kInvalidState)
            << st.toString();
        continue;
      }
      ++ops;
      h.checkAll();
      if (::testing::Test::HasFatalFailure())
        return;
    }
    KV_ASSERT_INVARIANTS(*h.alloc);
    copies += h.copiesApplied;
  }
  RecordProperty("ops", std::to_string(ops));
  RecordProperty("copies", std::to_string(copies));
  EXPECT_GT(ops, 1500);
  EXPECT_GT(copies, 300);
}
