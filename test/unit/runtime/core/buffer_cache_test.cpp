//===- buffer_cache_test.cpp - Buffers compiled code allocates ------------===//
//
// Calls the allocation functions exactly as compiled code does (through
// their unmangled names): alignment, reuse of freed buffers per size class,
// the cache limit, plain blocks (small or over-aligned), and allocations
// from many threads.
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include "sits/runtime/buffer.h"

#include <cstring>
#include <thread>
#include <vector>

extern "C" {
void *_mlir_memref_to_llvm_alloc(size_t);
void *_mlir_memref_to_llvm_aligned_alloc(size_t, size_t);
void _mlir_memref_to_llvm_free(void *);
}

namespace {

using sits::runtime::bufferCacheStats;
using sits::runtime::setBufferCacheLimit;

bool aligned(void *p, size_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

class BufferCacheTest : public ::testing::Test {
protected:
  void SetUp() override { setBufferCacheLimit(int64_t(64) << 20); }
  void TearDown() override { setBufferCacheLimit(-1); }
};

TEST_F(BufferCacheTest, FreedBufferIsReusedForTheSameSizeClass) {
  setBufferCacheLimit(0); // empty
  setBufferCacheLimit(int64_t(64) << 20);
  void *a = _mlir_memref_to_llvm_alloc(1 << 20);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(aligned(a, 64));
  std::memset(a, 0x5a, 1 << 20); // the whole size is usable
  _mlir_memref_to_llvm_free(a);
  EXPECT_GE(bufferCacheStats().cachedBytes, 1 << 20);
  int64_t hits = bufferCacheStats().hits;
  // A slightly smaller request falls in the same class (1 MiB .. 1.125 MiB).
  void *b = _mlir_memref_to_llvm_alloc((1 << 20) - 100);
  EXPECT_EQ(a, b);
  EXPECT_EQ(bufferCacheStats().hits, hits + 1);
  EXPECT_EQ(bufferCacheStats().cachedBytes, 0);
  // A request past the class boundary gets another block.
  void *c = _mlir_memref_to_llvm_alloc((1 << 20) + (1 << 17) + 1);
  EXPECT_NE(c, b);
  std::memset(c, 1, (1 << 20) + (1 << 17) + 1);
  _mlir_memref_to_llvm_free(b);
  _mlir_memref_to_llvm_free(c);
}

TEST_F(BufferCacheTest, LimitBoundsWhatIsKept) {
  setBufferCacheLimit(int64_t(3) << 20);
  std::vector<void *> blocks;
  for (int i = 0; i < 8; ++i)
    blocks.push_back(_mlir_memref_to_llvm_alloc(1 << 20));
  for (void *p : blocks)
    _mlir_memref_to_llvm_free(p);
  EXPECT_LE(bufferCacheStats().cachedBytes, int64_t(3) << 20);
  EXPECT_GE(bufferCacheStats().cachedBytes, int64_t(2) << 20);
  setBufferCacheLimit(0);
  EXPECT_EQ(bufferCacheStats().cachedBytes, 0);
  // With caching off nothing is kept.
  _mlir_memref_to_llvm_free(_mlir_memref_to_llvm_alloc(1 << 20));
  EXPECT_EQ(bufferCacheStats().cachedBytes, 0);
}

TEST_F(BufferCacheTest, SmallAndOverAlignedBlocks) {
  for (size_t bytes :
       {size_t(0), size_t(1), size_t(63), size_t(4096), size_t(65535)}) {
    void *p = _mlir_memref_to_llvm_alloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned(p, 64));
    std::memset(p, 7, bytes);
    _mlir_memref_to_llvm_free(p);
  }
  for (size_t alignment : {size_t(8), size_t(64), size_t(128), size_t(4096)}) {
    for (size_t bytes : {size_t(10), size_t(1) << 20}) {
      void *p = _mlir_memref_to_llvm_aligned_alloc(alignment, bytes);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned(p, alignment > 64 ? alignment : 64));
      std::memset(p, 3, bytes);
      _mlir_memref_to_llvm_free(p);
    }
  }
  EXPECT_EQ(_mlir_memref_to_llvm_aligned_alloc(48, 100), nullptr)
      << "an alignment that is not a power of two";
  _mlir_memref_to_llvm_free(nullptr);
}

TEST_F(BufferCacheTest, ManyThreads) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 2000; ++i) {
        size_t bytes = (size_t(64) << 10) * size_t(1 + (i + t) % 7);
        auto *p =
            static_cast<unsigned char *>(_mlir_memref_to_llvm_alloc(bytes));
        ASSERT_NE(p, nullptr);
        p[0] = p[bytes - 1] = static_cast<unsigned char>(t);
        EXPECT_EQ(p[bytes - 1], t);
        _mlir_memref_to_llvm_free(p);
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_LE(bufferCacheStats().cachedBytes, int64_t(64) << 20);
  EXPECT_GT(bufferCacheStats().hits, 0);
}

} // namespace

namespace {

TEST_F(BufferCacheTest, AlignedBuffersShareTheCache) {
  using sits::runtime::AlignedBuffer;
  setBufferCacheLimit(0);
  setBufferCacheLimit(int64_t(64) << 20);
  void *first = nullptr;
  {
    auto buffer = AlignedBuffer::allocate(3 << 20);
    ASSERT_TRUE(buffer.ok());
    first = buffer->data();
    EXPECT_TRUE(aligned(first, 64));
  }
  EXPECT_GE(bufferCacheStats().cachedBytes, 3 << 20);
  // An output of the same size next call gets the same pages; a released
  // one (a numpy array's) goes back through freeReleased.
  auto again = AlignedBuffer::allocate(3 << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), first);
  AlignedBuffer::freeReleased(again->release());
  EXPECT_GE(bufferCacheStats().cachedBytes, 3 << 20);
}

} // namespace
