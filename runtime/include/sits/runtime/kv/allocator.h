//===- allocator.h - The paged KV-cache block allocator
//--------------------===//
//
// The C++ core of spec `kv-allocator.md` §4: it manages block ids only (the
// KV tensors, sized from `bytes_per_block`, are `kv::Memory`'s (memory.h),
// which executes the copies listed by `takePendingCopies`).
//
// Contract, for every public method:
//   * Errors are returned as `Status` / `StatusOr` (spec §4.9); nothing
//     throws across this API.
//   * Every mutating call is all-or-nothing: on error, the observable state
//     (`snapshot()`, apart from failure counters) is unchanged.
//   * Linearizable: one mutex per allocator serializes every call, including
//     the read-only ones, so `stats()` and the table copies are consistent
//     snapshots. Hashing of caller-provided tokens happens before the lock.
//   * Deterministic: the same calls on the same configuration return the
//     same block ids (I11).
//   * Once the pool is poisoned (a failed `checkInvariants` or an impossible
//     state), every call fails fast with `Internal`.
//
// Plain value types (requests, results, `Stats`) use the spec's snake_case
// field names so that the bindings can expose them unchanged; batch calls
// take pointer + length arrays; block tables and slot mappings are written
// into caller buffers.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KV_ALLOCATOR_H
#define SITS_RUNTIME_KV_ALLOCATOR_H

#include "sits/runtime/kv/config.h"
#include "sits/runtime/kv/hash.h"
#include "sits/runtime/kv/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sits::runtime::kv {

class AllocatorTestHooks;

/// The two block-id spaces.
enum class Tier : int32_t { kDevice = 0, kHost = 1 };
const char *tierName(Tier tier);

/// Block states of spec §4.4 (per tier; the host tier has no RESERVED block).
enum class BlockState : int32_t {
  kReserved = 0, ///< the null block
  kFree = 1,     ///< Idle: ref 0, no hash, in the free list
  kCached = 2,   ///< ref 0, hash registered, in the LRU part of the free list
  kActive = 3,   ///< ref >= 1 (sub-flags: sealed, shared)
  kEvicting = 4, ///< ASYNC mode: only pending copies hold it
};
const char *blockStateName(BlockState state);

/// Sequence states (a freed id is simply absent).
enum class SeqState : int32_t { kActive = 0, kSwapped = 1 };
const char *seqStateName(SeqState state);

/// One copy the runtime must execute (spec O12).
struct BlockCopy {
  uint64_t epoch = 0;
  Tier src_tier = Tier::kDevice;
  int32_t src = -1;
  Tier dst_tier = Tier::kDevice;
  int32_t dst = -1;
  /// Valid tokens to copy from the start of the block (block_size for a
  /// full block).
  int32_t tokens = 0;
  friend bool operator==(const BlockCopy &a, const BlockCopy &b) {
    return a.epoch == b.epoch && a.src_tier == b.src_tier && a.src == b.src &&
           a.dst_tier == b.dst_tier && a.dst == b.dst && a.tokens == b.tokens;
  }
};

/// Per-block extra hash input (multimodal item ids with their offsets):
/// hashed into block `block_index`'s chain link.
struct BlockExtra {
  int64_t block_index = 0;
  std::string data;
};

/// Options of `addSequence` / `lookupPrefix` / `canAdd`.
struct AddOptions {
  /// Namespace of the chain: model and weights version, LoRA id, ...
  /// (hashed into the chain root).
  std::string extra_key;
  /// Per-tenant salt (hashed into the chain root). Different salts never
  /// share cache entries.
  std::string cache_salt;
  /// At most one entry per block index, each >= 0.
  std::vector<BlockExtra> block_extras;
  /// Cap of the prefix hit in tokens, rounded down to a block boundary.
  /// -1 means n - 1 (at least one token is computed).
  int64_t max_cache_hit = -1;
};

struct AddResult {
  /// Tokens served from the prefix cache (a multiple of block_size).
  int64_t cached_tokens = 0;
  /// The whole block table of the new sequence.
  std::vector<int32_t> block_ids;
  /// Of those, blocks freshly allocated (including onboarded ones).
  int64_t num_new_blocks = 0;
  /// Of the cached blocks, those onboarded from the host tier (H2D copies).
  int64_t num_onboarded = 0;
  /// Copies this call emitted (onboarding, offload of evicted victims).
  std::vector<BlockCopy> copies;
};

struct AppendResult {
  /// Blocks added to the table by this call (a CoW block first).
  std::vector<int32_t> new_block_ids;
  /// Copies this call emitted (CoW, offload of evicted victims).
  std::vector<BlockCopy> copies;
  void clear() {
    new_block_ids.clear();
    copies.clear();
  }
};

/// One item of `addSequences`. `tokens` may be null (then `num_tokens`
/// slots without token ids, which are never cached); `opts` may be null.
struct AddRequest {
  uint64_t seq = 0;
  int64_t num_tokens = 0;
  const int32_t *tokens = nullptr;
  const AddOptions *opts = nullptr;
};

/// One item of `appendBatch`; `tokens` may be null (count only).
struct AppendRequest {
  uint64_t seq = 0;
  int64_t num_tokens = 0;
  const int32_t *tokens = nullptr;
};

struct SequenceInfo {
  uint64_t id = 0;
  SeqState state = SeqState::kActive;
  int64_t num_tokens = 0;
  int64_t lookahead = 0;
  /// Table length: ceil((num_tokens + lookahead) / block_size).
  int64_t num_blocks = 0;
  /// Of those, blocks held on the host tier (SWAPPED only).
  int64_t num_host_blocks = 0;
  bool tokens_known = false;
};

/// Spec §4.10. Counts are blocks; counters are monotonic.
struct Stats {
  // Counts (device tier).
  int64_t total_blocks = 0;
  int64_t usable_blocks = 0;
  int64_t free_blocks = 0;   ///< FREE (clean)
  int64_t cached_blocks = 0; ///< CACHED (evictable)
  int64_t active_blocks = 0;
  int64_t shared_blocks = 0; ///< ACTIVE with more than one holder
  int64_t evicting_blocks = 0;
  // Host tier.
  int64_t host_total = 0;
  int64_t host_used = 0;   ///< ACTIVE host blocks (swapped sequences)
  int64_t host_cached = 0; ///< CACHED host blocks
  // Sequences.
  int64_t num_sequences = 0;
  int64_t swapped_sequences = 0;
  // Ratios.
  double utilization = 0; ///< active / usable
  double occupancy = 0;   ///< (active + cached) / usable
  // Tokens.
  int64_t logical_tokens = 0;  ///< Σ n over live sequences
  int64_t physical_tokens = 0; ///< Σ filled(b) over ACTIVE blocks
  // Waste.
  int64_t internal_frag_waste_slots = 0; ///< active × bs − physical
  /// In percent: 100 × waste_slots / (active × bs); 0 when nothing is active.
  double waste_pct = 0;
  // Sharing.
  double sharing_factor = 0; ///< Σ len(table) / active
  // Monotonic counters.
  int64_t blocks_allocated = 0; ///< blocks taken from the free list
  int64_t blocks_released = 0;  ///< blocks whose last holder let go
  int64_t sequences_added = 0;  ///< addSequence and fork children
  int64_t sequences_freed = 0;
  int64_t forks = 0;
  int64_t cow_copies = 0;
  int64_t prefix_queries = 0; ///< addSequence calls that looked up a prefix
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  double hit_rate = 0;   ///< prefix_hit_tokens / prefix_query_tokens
  int64_t lookups = 0;   ///< lookupPrefix calls (pure queries)
  int64_t evictions = 0; ///< device hashes dropped (victims, evict())
  int64_t offloads = 0;  ///< D2H copies of evicted blocks
  int64_t onboards = 0;  ///< H2D copies of host hits
  int64_t swapped_out_blocks = 0;
  int64_t swapped_in_blocks = 0;
  int64_t peak_active_blocks = 0;
  // Failure counters (the only fields an error may change).
  int64_t out_of_blocks_failures = 0;
  int64_t failed_calls = 0;
};

/// Every field of `Stats`, in declaration order: X(type, name). One list for
/// the code that walks all of them (snapshot comparison, the bindings); the
/// static_assert below catches a field added to the struct but not here.
#define SITS_KV_STATS_FIELDS(X)                                                \
  X(int64_t, total_blocks)                                                     \
  X(int64_t, usable_blocks)                                                    \
  X(int64_t, free_blocks)                                                      \
  X(int64_t, cached_blocks)                                                    \
  X(int64_t, active_blocks)                                                    \
  X(int64_t, shared_blocks)                                                    \
  X(int64_t, evicting_blocks)                                                  \
  X(int64_t, host_total)                                                       \
  X(int64_t, host_used)                                                        \
  X(int64_t, host_cached)                                                      \
  X(int64_t, num_sequences)                                                    \
  X(int64_t, swapped_sequences)                                                \
  X(double, utilization)                                                       \
  X(double, occupancy)                                                         \
  X(int64_t, logical_tokens)                                                   \
  X(int64_t, physical_tokens)                                                  \
  X(int64_t, internal_frag_waste_slots)                                        \
  X(double, waste_pct)                                                         \
  X(double, sharing_factor)                                                    \
  X(int64_t, blocks_allocated)                                                 \
  X(int64_t, blocks_released)                                                  \
  X(int64_t, sequences_added)                                                  \
  X(int64_t, sequences_freed)                                                  \
  X(int64_t, forks)                                                            \
  X(int64_t, cow_copies)                                                       \
  X(int64_t, prefix_queries)                                                   \
  X(int64_t, prefix_query_tokens)                                              \
  X(int64_t, prefix_hit_tokens)                                                \
  X(double, hit_rate)                                                          \
  X(int64_t, lookups)                                                          \
  X(int64_t, evictions)                                                        \
  X(int64_t, offloads)                                                         \
  X(int64_t, onboards)                                                         \
  X(int64_t, swapped_out_blocks)                                               \
  X(int64_t, swapped_in_blocks)                                                \
  X(int64_t, peak_active_blocks)                                               \
  X(int64_t, out_of_blocks_failures)                                           \
  X(int64_t, failed_calls)

namespace detail {
#define SITS_KV_COUNT_FIELD(type, name) +1
constexpr size_t kNumStatsFields = 0 SITS_KV_STATS_FIELDS(SITS_KV_COUNT_FIELD);
#undef SITS_KV_COUNT_FIELD
static_assert(sizeof(Stats) == kNumStatsFields * 8,
              "SITS_KV_STATS_FIELDS must list every field of Stats");
} // namespace detail

/// The full observable state, for all-or-nothing tests (spec §5): block
/// states, refs, free-list order, hash maps, tables, counters other than the
/// failure counters, pending copies. Two snapshots compare equal iff the
/// states are identical.
struct StateSnapshot {
  struct Block {
    int32_t state = 0;
    int32_t ref = 0;
    int32_t pins = 0;
    bool sealed = false;
    int32_t filled = 0;
    Hash128 hash;
    friend bool operator==(const Block &a, const Block &b) {
      return a.state == b.state && a.ref == b.ref && a.pins == b.pins &&
             a.sealed == b.sealed && a.filled == b.filled && a.hash == b.hash;
    }
  };
  struct Sequence {
    uint64_t id = 0;
    int32_t state = 0;
    int64_t n = 0;
    int64_t lookahead = 0;
    int64_t first_owned = 0;
    bool tokens_known = false;
    Hash128 root;
    std::vector<int32_t> table;
    std::vector<int32_t> host_table;
    std::vector<int32_t> tokens;
    std::vector<int64_t> extra_blocks;
    std::vector<std::string> extra_data;
    friend bool operator==(const Sequence &a, const Sequence &b) {
      return a.id == b.id && a.state == b.state && a.n == b.n &&
             a.lookahead == b.lookahead && a.first_owned == b.first_owned &&
             a.tokens_known == b.tokens_known && a.root == b.root &&
             a.table == b.table && a.host_table == b.host_table &&
             a.tokens == b.tokens && a.extra_blocks == b.extra_blocks &&
             a.extra_data == b.extra_data;
    }
  };
  std::vector<Block> device;
  std::vector<Block> host;
  /// Free-list order: FREE blocks first, then CACHED (LRU first).
  std::vector<int32_t> device_free_order;
  std::vector<int32_t> host_free_order;
  /// Raw slots of the hash indexes (layout included, so probe order is too).
  std::vector<int32_t> device_index_slots;
  std::vector<int32_t> host_index_slots;
  /// Live sequences, sorted by id.
  std::vector<Sequence> sequences;
  std::vector<BlockCopy> pending_copies;
  std::vector<BlockCopy> inflight_copies;
  uint64_t epoch = 0;
  /// Stats with the failure counters zeroed and the `lookups` counter zeroed
  /// (lookupPrefix may change it: spec O8).
  Stats stats;

  /// Empty when equal, else a short description of the first difference.
  std::string diff(const StateSnapshot &other) const;
  friend bool operator==(const StateSnapshot &a, const StateSnapshot &b) {
    return a.diff(b).empty();
  }
};

/// The allocator. Create with `Allocator::create`; not copyable or movable
/// (share it through the owning pointer).
class Allocator {
public:
  /// Validates `config` (spec §4.2) and builds a pool whose usable blocks are
  /// all FREE in ascending id order. A failed create leaves nothing behind.
  static StatusOr<std::unique_ptr<Allocator>> create(const PoolConfig &config);

  ~Allocator();
  Allocator(const Allocator &) = delete;
  Allocator &operator=(const Allocator &) = delete;

  const PoolConfig &config() const;
  const PoolGeometry &geometry() const;
  /// The value padding unused block-table entries: the null block id (0), or
  /// -1 without a null block.
  int32_t defaultPad() const;

  // --- O1: admission -----------------------------------------------------
  /// A new sequence of `numTokens` slots without token ids (never cached).
  StatusOr<AddResult> addSequence(uint64_t seq, int64_t numTokens);
  /// A new sequence with token ids: with prefix caching, the longest cached
  /// run of full blocks (device, then host) is reused, capped by
  /// `opts.max_cache_hit`.
  StatusOr<AddResult> addSequence(uint64_t seq, const int32_t *tokens,
                                  int64_t numTokens,
                                  const AddOptions &opts = AddOptions());
  /// Equivalent to the calls made in order, all-or-nothing for the whole
  /// batch: on error nothing changed and `info().batch_index` names the item.
  Status addSequences(const AddRequest *requests, size_t count,
                      std::vector<AddResult> *results = nullptr);

  // --- O2: growth ----------------------------------------------------------
  /// Grows the sequence by `k` tokens without ids (sequences created without
  /// tokens, or any sequence when prefix caching is off).
  Status append(uint64_t seq, int64_t k, AppendResult *out = nullptr);
  /// Grows the sequence by `k` tokens. Copy-on-write of a non-writable tail;
  /// blocks that become full are sealed. Releases any reserved lookahead.
  Status append(uint64_t seq, const int32_t *tokens, int64_t k,
                AppendResult *out = nullptr);
  /// Equivalent to the calls made in order, all-or-nothing for the batch.
  Status appendBatch(const AppendRequest *requests, size_t count,
                     std::vector<AppendResult> *results = nullptr);

  // --- O3 ------------------------------------------------------------------
  /// Makes the table cover n + lookahead slots (the previous reservation is
  /// replaced). Draft slots are never sealed. A non-writable partial tail is
  /// copied first, so every reserved slot is writable (I7).
  Status reserve(uint64_t seq, int64_t lookahead, AppendResult *out = nullptr);

  // --- O4 ------------------------------------------------------------------
  /// `child` shares the first ceil(pos / bs) blocks of `parent` (pos = -1:
  /// n of parent). Needs no free block.
  Status fork(uint64_t parent, uint64_t child, int64_t pos = -1);

  // --- O5 ------------------------------------------------------------------
  /// Shrinks to `newN` tokens (and drops any reservation), releasing the
  /// blocks past ceil(newN / bs), tail first.
  Status truncate(uint64_t seq, int64_t newN);
  /// Token eviction: removes the `count` full blocks at table indices
  /// [first, first + count) (each must lie wholly below n) and shrinks n by
  /// count × bs; the later entries move down, any reservation is dropped.
  /// The sequence stops tracking token ids: blocks it fills from now on hold
  /// K/V computed without the dropped tokens, so they are never sealed or
  /// offered to the prefix cache (those sealed before stay valid).
  Status dropBlocks(uint64_t seq, int64_t first, int64_t count);

  // --- O6 ------------------------------------------------------------------
  /// Releases every block of the table, last to first.
  Status free(uint64_t seq);
  Status freeBatch(const uint64_t *seqs, size_t count);

  // --- O7: kernel views (read-only) ----------------------------------------
  StatusOr<std::vector<int32_t>> blockTable(uint64_t seq) const;
  /// Writes `count` tables into `out[count][stride]`, padding with `pad`.
  /// Fails (writing nothing) if stride < the longest table.
  Status writeBlockTables(const uint64_t *seqs, size_t count, int32_t *out,
                          int64_t stride, int32_t pad) const;
  Status writeBlockTables(const uint64_t *seqs, size_t count, int32_t *out,
                          int64_t stride) const;
  /// out[i] = block_id × bs + offset of position start + i, for positions in
  /// [0, n + lookahead). Only blocks this sequence writes are exposed: an
  /// exclusive unsealed block, or a sealed block it filled itself. A shared
  /// partial block, a prefix-cache hit or a block inherited by fork gives
  /// InvalidState (nothing written).
  Status slotMapping(uint64_t seq, int64_t start, int64_t count,
                     int64_t *out) const;

  // --- O8 ------------------------------------------------------------------
  /// Tokens `addSequence` would take from the cache (same cap). Changes
  /// nothing but the `lookups` counter.
  StatusOr<int64_t> lookupPrefix(const int32_t *tokens, int64_t numTokens,
                                 const AddOptions &opts = AddOptions());

  // --- O9: scheduler queries -----------------------------------------------
  /// True iff `addSequence` would succeed capacity-wise (false exactly where
  /// it would give OutOfBlocks); the other errors are returned as they would
  /// be (CapacityExceeded, InvalidArgument).
  StatusOr<bool> canAdd(int64_t numTokens, const int32_t *tokens = nullptr,
                        const AddOptions &opts = AddOptions()) const;
  /// Blocks `append(seq, k)` would allocate, including a pending CoW block.
  StatusOr<int64_t> blocksNeeded(uint64_t seq, int64_t k) const;
  /// FREE + CACHED device blocks (spec I4).
  StatusOr<int64_t> numFreeBlocks() const;
  /// CACHED device blocks.
  StatusOr<int64_t> numEvictableBlocks() const;
  /// Blocks an allocation may take now (FREE, plus CACHED unless ASYNC mode
  /// with a host tier, where CACHED blocks must be offloaded by evict()).
  StatusOr<int64_t> numAllocatableBlocks() const;

  // --- O10: host tier --------------------------------------------------------
  /// Moves the blocks the sequence owns exclusively to the host (D2H copies);
  /// shared blocks stay on the device with one reference kept. Drops any
  /// reservation.
  Status swapOut(uint64_t seq);
  /// Brings a SWAPPED sequence back (H2D copies); all-or-nothing, counting
  /// the watermark.
  Status swapIn(uint64_t seq);

  // --- O12: copies -----------------------------------------------------------
  /// Moves the pending copies into `out` (replacing its content) and starts a
  /// new epoch. The copies of one take share one epoch.
  Status takePendingCopies(std::vector<BlockCopy> *out);
  /// ASYNC: the copies of every taken epoch <= `epoch` have run; unpins their
  /// blocks (EVICTING ones become FREE). Returns the number of copies
  /// completed. STREAM_ORDERED: accepted, returns 0.
  StatusOr<int64_t> complete(uint64_t epoch);

  // --- O13 -------------------------------------------------------------------
  /// Evicts up to `k` CACHED device blocks in LRU order; returns the count.
  StatusOr<int64_t> evict(int64_t k);
  /// Drops every hash on both tiers and puts every block back FREE in id
  /// order. InvalidState while any block is ACTIVE or EVICTING.
  Status resetPrefixCache();

  // --- O14 -------------------------------------------------------------------
  StatusOr<Stats> stats() const;
  /// O(num_blocks + Σ tables). Returns the first violated invariant as
  /// `Internal` (and poisons the pool).
  Status checkInvariants();
  /// The full observable state (tests; bindings' snapshot()).
  StatusOr<StateSnapshot> snapshot() const;
  StatusOr<SequenceInfo> sequenceInfo(uint64_t seq) const;
  /// Bytes of allocator metadata per device block (arrays + hash index),
  /// for spec T84.
  double metadataBytesPerDeviceBlock() const;
  bool poisoned() const;

  class Impl;

private:
  explicit Allocator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class AllocatorTestHooks;
};

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_KV_ALLOCATOR_H
