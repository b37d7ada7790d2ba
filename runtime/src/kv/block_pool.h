//===- block_pool.h - Per-tier block metadata (internal)
//-------------------===//
//
// One `BlockPool` per tier (device, host). Struct-of-arrays metadata, an
// intrusive doubly linked free list in two parts (FREE then CACHED, spec
// I9), and an open-addressing hash index. Every store goes through `put` so
// that batch calls can roll back through the `UndoLog`.
//
// Per-block layout (26 bytes on the device tier, plus the index):
//   link0  int32   reference count while the block is outside the free list,
//                  the `prev` link while it is inside (a listed block has
//                  ref 0 by definition, so one word serves both)
//   next   int32   `next` link while listed
//   meta   uint16  state (3 bits) | sealed (1 bit) | filled (9 bits) | mark
//   hash   16 B    the block's chained hash while sealed
// The index is a Robin Hood table with a power of two >= 1.25 × blocks of
// 8-byte slots (block id + 32 key bits): 10.5 B per block for 100,000
// blocks. Optional arrays: pins
// (ASYNC copy mode), verification tokens and parent hash (verify mode).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_SRC_KV_BLOCK_POOL_H
#define SITS_RUNTIME_SRC_KV_BLOCK_POOL_H

#include "sits/runtime/kv/allocator.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace sits::runtime::kv::detail {

constexpr int32_t kNil = -1;

/// Small metadata helpers must fold into the allocator's per-block loops.
#define SITS_KV_INLINE __attribute__((always_inline)) inline
/// The same for a lambda (after its parameter list).
#define SITS_KV_LAMBDA_INLINE __attribute__((always_inline))

/// Raw-memory undo log: records the old bytes of every store made while it
/// is active; `rollback` restores them newest first. Only fixed-address
/// storage (arrays sized at creation, scalar members) is logged this way.
class UndoLog {
public:
  bool active() const { return active_; }
  void begin() {
    active_ = true;
    entries_.clear();
  }
  void record(void *p, size_t n) {
    uint8_t *src = static_cast<uint8_t *>(p);
    while (n > 0) {
      const size_t chunk = n < kInline ? n : kInline;
      Entry e;
      e.ptr = src;
      e.size = uint32_t(chunk);
      std::memcpy(e.bytes, src, chunk);
      entries_.push_back(e);
      src += chunk;
      n -= chunk;
    }
  }
  void rollback() {
    for (size_t i = entries_.size(); i > 0; --i) {
      const Entry &e = entries_[i - 1];
      std::memcpy(e.ptr, e.bytes, e.size);
    }
    end();
  }
  /// Ends the transaction; the entries' capacity is kept for the next one.
  void end() {
    active_ = false;
    entries_.clear();
  }

private:
  static constexpr size_t kInline = 16;
  struct Entry {
    void *ptr;
    uint32_t size;
    uint8_t bytes[kInline];
  };
  bool active_ = false;
  std::vector<Entry> entries_;
};

// meta bit layout.
constexpr uint16_t kStateMask = 0x7;
constexpr uint16_t kSealedBit = 0x8;
constexpr int kFilledShift = 4;
constexpr uint16_t kFilledMask = uint16_t(0x1FF << kFilledShift);
/// Scratch bit, set and cleared within one call (never visible between
/// calls, never logged).
constexpr uint16_t kMarkBit = 0x8000;

class BlockPool {
public:
  BlockPool() = default;
  /// Sizes every array; all usable blocks FREE in ascending id order.
  void init(Tier tier, int32_t numBlocks, int32_t firstUsable,
            int32_t blockSize, bool withPins, bool withVerify, UndoLog *log);
  /// Back to the initial state (used by resetPrefixCache).
  void resetToInitial();

  template <typename T>
  __attribute__((always_inline)) void put(T &field, T value) {
    if (log_->active())
      log_->record(&field, sizeof(T));
    field = value;
  }

  // --- read accessors -------------------------------------------------------
  __attribute__((always_inline)) BlockState state(int32_t b) const {
    return BlockState(meta[b] & kStateMask);
  }
  __attribute__((always_inline)) bool listed(int32_t b) const {
    BlockState s = state(b);
    return s == BlockState::kFree || s == BlockState::kCached;
  }
  __attribute__((always_inline)) bool sealed(int32_t b) const {
    return (meta[b] & kSealedBit) != 0;
  }
  __attribute__((always_inline)) int32_t filled(int32_t b) const {
    return (meta[b] & kFilledMask) >> kFilledShift;
  }
  __attribute__((always_inline)) int32_t ref(int32_t b) const {
    return listed(b) ? 0 : link0[b];
  }
  __attribute__((always_inline)) int32_t pinCount(int32_t b) const {
    return pins.empty() ? 0 : pins[b];
  }
  __attribute__((always_inline)) int32_t seqRefs(int32_t b) const {
    return ref(b) - pinCount(b);
  }
  __attribute__((always_inline)) bool writable(int32_t b) const {
    return seqRefs(b) == 1 && !sealed(b);
  }
  __attribute__((always_inline)) bool marked(int32_t b) const {
    return (meta[b] & kMarkBit) != 0;
  }

  // --- meta stores
  // ------------------------------------------------------------
  __attribute__((always_inline)) void setStateRaw(int32_t b, BlockState s) {
    put(meta[b], uint16_t((meta[b] & ~kStateMask) | uint16_t(s)));
  }
  __attribute__((always_inline)) void setSealed(int32_t b, bool on) {
    put(meta[b],
        uint16_t(on ? (meta[b] | kSealedBit) : (meta[b] & ~kSealedBit)));
  }
  /// Sets filled(b), keeping physicalTokens in step for ACTIVE blocks.
  __attribute__((always_inline)) void setFilled(int32_t b, int32_t f) {
    int32_t old = filled(b);
    if (old == f)
      return;
    if (state(b) == BlockState::kActive)
      put(physicalTokens, physicalTokens + (f - old));
    put(meta[b],
        uint16_t((meta[b] & ~kFilledMask) | uint16_t(f << kFilledShift)));
  }
  __attribute__((always_inline)) void raiseFilled(int32_t b, int32_t f) {
    if (f > filled(b))
      setFilled(b, f);
  }
  __attribute__((always_inline)) void setMark(int32_t b) {
    meta[b] = uint16_t(meta[b] | kMarkBit);
  }
  __attribute__((always_inline)) void clearMark(int32_t b) {
    meta[b] = uint16_t(meta[b] & ~kMarkBit);
  }
  __attribute__((always_inline)) void setRef(int32_t b, int32_t r) {
    put(link0[b], r);
  }

  // --- free list
  // ----------------------------------------------------------------
  void pushFreeHead(int32_t b);
  void pushFreeTail(int32_t b);
  void pushCachedTail(int32_t b);
  /// Unlinks a listed block (FREE or CACHED) in O(1). Does not change its
  /// state; the caller sets it (and link0 becomes the ref word again).
  void unlink(int32_t b);

  // --- hash index
  // ---------------------------------------------------------------
  /// First entry for `key` that is not marked and, when verifying, whose
  /// stored parent and tokens match. kNil if none.
  int32_t find(const Hash128 &key, const Hash128 &parent,
               const int32_t *tokens) const;
  /// True if any entry has `key` (no verification).
  bool containsKey(const Hash128 &key) const;
  /// True if an entry has `key` and (when verifying) the parent and tokens
  /// of block `src` of `other`; marks are ignored.
  bool containsContentOf(const BlockPool &other, int32_t src) const;
  void indexInsert(int32_t b);
  template <bool kLogged> void insertEntry(int32_t b);
  /// Removes b's entry (hash[b] must still be its key). False if absent.
  bool indexErase(int32_t b) {
    return log_->active() ? eraseEntry<true>(b) : eraseEntry<false>(b);
  }
  /// indexErase with the stores logged (kLogged) or not; the allocator's
  /// eviction loop, which runs without a transaction, calls the unlogged
  /// form directly.
  template <bool kLogged> bool eraseEntry(int32_t b);

  /// Seals b under `key` (index insert, verification record).
  void seal(int32_t b, const Hash128 &key, const Hash128 &parent,
            const int32_t *tokens);
  /// Copies the seal (hash + verification record) of `src` in `from` to b.
  void sealFrom(int32_t b, const BlockPool &from, int32_t src);
  /// Drops b's hash: index erase, unsealed, hash cleared. False if the entry
  /// was missing (impossible state).
  bool unseal(int32_t b);

  size_t metadataBytes() const;

  Tier tier = Tier::kDevice;
  int32_t numBlocks = 0;
  int32_t firstUsable = 0;
  int32_t blockSize = 0;
  bool verify = false;
  UndoLog *log_ = nullptr;

  std::vector<int32_t> link0;
  std::vector<int32_t> next;
  std::vector<uint16_t> meta;
  std::vector<Hash128> hash;
  std::vector<int32_t> pins;
  std::vector<int32_t> vtokens;
  std::vector<Hash128> vparent;

  int32_t freeHead = kNil, freeTail = kNil;
  int32_t cachedHead = kNil, cachedTail = kNil;
  int64_t numFree = 0, numCached = 0, numActive = 0, numEvicting = 0;
  int64_t numShared = 0, physicalTokens = 0;

  /// Index slots: block id in the low 32 bits, the low 32 bits of the
  /// block's key in the high 32 bits (home slot and a first filter without
  /// touching `hash`), kEmptySlot when free.
  static constexpr uint64_t kEmptySlot = ~uint64_t(0);
  std::vector<uint64_t> slots;
  uint64_t mask = 0;
  int64_t indexSize = 0;

  static uint64_t packSlot(int32_t b, const Hash128 &key) {
    return (key.lo << 32) | uint32_t(b);
  }
  static int32_t slotBlock(uint64_t s) { return int32_t(uint32_t(s)); }
  size_t home(const Hash128 &key) const { return size_t(key.lo & mask); }
  /// Home slot of an occupied slot, from its stored key bits.
  size_t slotHome(uint64_t s) const { return size_t((s >> 32) & mask); }
  /// How far the entry in slot `pos` sits from its home (Robin Hood DIB).
  size_t slotDistance(size_t pos, uint64_t s) const {
    return (pos - slotHome(s)) & mask;
  }

private:
  void linkAfter(int32_t b, int32_t prevB, int32_t nextB, int32_t &head,
                 int32_t &tail);
};

// Backward-shift deletion from the Robin Hood index (see block_pool.cpp):
// the entries after b's that are not at their home move one slot closer to
// it. Inline: it is the per-victim work of eviction.
template <bool kLogged> SITS_KV_INLINE bool BlockPool::eraseEntry(int32_t b) {
  // Locals: a store into `slots` may alias `mask` for the compiler, which
  // would reload it (and the array pointer) on every step.
  uint64_t *const table = slots.data();
  const uint64_t m = mask;
  auto store = [this](uint64_t &slot, uint64_t value) {
    if (kLogged)
      put(slot, value);
    else
      slot = value;
  };
  size_t pos = size_t(hash[size_t(b)].lo & m);
  for (size_t dist = 0;; pos = (pos + 1) & m, ++dist) {
    const uint64_t s = table[pos];
    if (s == kEmptySlot || ((pos - (s >> 32)) & m) < dist)
      return false;
    if (slotBlock(s) == b)
      break;
  }
  for (size_t next = (pos + 1) & m;; next = (next + 1) & m) {
    const uint64_t s = table[next];
    if (s == kEmptySlot || ((s >> 32) & m) == next)
      break;
    store(table[pos], s);
    pos = next;
  }
  store(table[pos], kEmptySlot);
  if (kLogged)
    put(indexSize, indexSize - 1);
  else
    --indexSize;
  return true;
}

// Hot list operations, inline so they fold into the allocator's loops.
SITS_KV_INLINE void BlockPool::linkAfter(int32_t b, int32_t prevB,
                                         int32_t nextB, int32_t &head,
                                         int32_t &tail) {
  put(link0[size_t(b)], prevB);
  put(next[size_t(b)], nextB);
  if (prevB == kNil)
    put(head, b);
  else
    put(next[size_t(prevB)], b);
  if (nextB == kNil)
    put(tail, b);
  else
    put(link0[size_t(nextB)], b);
}

SITS_KV_INLINE void BlockPool::pushFreeHead(int32_t b) {
  linkAfter(b, kNil, freeHead, freeHead, freeTail);
  put(numFree, numFree + 1);
}

SITS_KV_INLINE void BlockPool::pushFreeTail(int32_t b) {
  linkAfter(b, freeTail, kNil, freeHead, freeTail);
  put(numFree, numFree + 1);
}

SITS_KV_INLINE void BlockPool::pushCachedTail(int32_t b) {
  linkAfter(b, cachedTail, kNil, cachedHead, cachedTail);
  put(numCached, numCached + 1);
}

SITS_KV_INLINE void BlockPool::unlink(int32_t b) {
  const bool inFree = state(b) == BlockState::kFree;
  int32_t &head = inFree ? freeHead : cachedHead;
  int32_t &tail = inFree ? freeTail : cachedTail;
  const int32_t p = link0[size_t(b)];
  const int32_t n = next[size_t(b)];
  if (p == kNil)
    put(head, n);
  else
    put(next[size_t(p)], n);
  if (n == kNil)
    put(tail, p);
  else
    put(link0[size_t(n)], p);
  put(next[size_t(b)], kNil);
  put(link0[size_t(b)], 0);
  if (inFree)
    put(numFree, numFree - 1);
  else
    put(numCached, numCached - 1);
}

} // namespace sits::runtime::kv::detail

#endif // SITS_RUNTIME_SRC_KV_BLOCK_POOL_H
