//===- allocator_impl.h - Allocator internals (internal)
//-------------------===//
#ifndef SITS_RUNTIME_SRC_KV_ALLOCATOR_IMPL_H
#define SITS_RUNTIME_SRC_KV_ALLOCATOR_IMPL_H

#include "block_pool.h"
#include "seq_index.h"
#include "sits/runtime/kv/allocator.h"

#include <atomic>
#include <deque>
#include <exception>
#include <mutex>
#include <string_view>

namespace sits::runtime::kv {

namespace detail {

struct Sequence {
  uint64_t id = 0;
  bool live = false;
  SeqState state = SeqState::kActive;
  bool tokensKnown = false;
  int64_t n = 0;
  int64_t lookahead = 0;
  /// Table entries below this index were inherited (prefix hits, fork): a
  /// sealed one among them is never exposed as a write slot.
  int64_t firstOwned = 0;
  /// Batch transaction that already saved this sequence (undo).
  uint64_t txnStamp = 0;
  Hash128 root;
  /// Device block ids; kNil where the block lives on the host (SWAPPED).
  std::vector<int32_t> table;
  /// SWAPPED only: host block id per entry, kNil where it stayed on device.
  std::vector<int32_t> hostTable;
  std::vector<int32_t> tokens;
  /// Sorted by block_index, at most one per index.
  std::vector<BlockExtra> extras;

  std::string_view extraFor(int64_t blockIndex) const;
};

/// Thrown by internals that find an impossible state; `guarded` turns it
/// into a poisoned pool and an `Internal` error.
struct InternalError : std::exception {
  InternalError(int inv, std::string msg)
      : invariant(inv), text(std::move(msg)) {}
  const char *what() const noexcept override { return text.c_str(); }
  int invariant;
  std::string text;
};

/// Chain hashes computed before taking the lock.
struct ChainHashes {
  Hash128 root;
  /// h[i] for every full block of the request.
  std::vector<Hash128> h;
};

/// Undo record of a sequence-level change inside a batch.
struct SeqUndo {
  enum Kind { kCreated, kErased, kModified } kind;
  uint32_t slot = 0;
  uint64_t id = 0;
  bool slotWasAppended = false;
  // kModified: saved scalars and sizes.
  int64_t n = 0, lookahead = 0, firstOwned = 0;
  SeqState state = SeqState::kActive;
  size_t tokensSize = 0;
  size_t tableOffset = 0, tableLen = 0;
};

/// Per-call options resolved from AddOptions (borrowed pointers).
struct AddArgs {
  uint64_t seq = 0;
  int64_t n = 0;
  const int32_t *tokens = nullptr;
  const AddOptions *opts = nullptr;
};

/// A prefix-lookup result: per hit position, the tier and block.
struct HitPlan {
  std::vector<int32_t> blocks;
  std::vector<uint8_t> onHost;
  int64_t cachedDeviceHits = 0;
  int64_t hostHits = 0;
  int64_t size() const { return int64_t(blocks.size()); }
};

} // namespace detail

class Allocator::Impl {
public:
  using Sequence = detail::Sequence;

  Status init(const PoolConfig &config, const PoolGeometry &geometry);

  // Public operations (lock inside).
  StatusOr<AddResult> addSequence(uint64_t seq, const int32_t *tokens,
                                  int64_t n, const AddOptions *opts);
  Status addSequences(const AddRequest *reqs, size_t count,
                      std::vector<AddResult> *results);
  Status append(uint64_t seq, const int32_t *tokens, int64_t k, bool withTokens,
                AppendResult *out);
  Status appendBatch(const AppendRequest *reqs, size_t count,
                     std::vector<AppendResult> *results);
  Status reserve(uint64_t seq, int64_t lookahead, AppendResult *out);
  Status fork(uint64_t parent, uint64_t child, int64_t pos);
  Status truncate(uint64_t seq, int64_t newN);
  Status dropBlocks(uint64_t seq, int64_t first, int64_t count);
  Status free(uint64_t seq);
  Status freeBatch(const uint64_t *seqs, size_t count);
  StatusOr<std::vector<int32_t>> blockTable(uint64_t seq);
  Status writeBlockTables(const uint64_t *seqs, size_t count, int32_t *out,
                          int64_t stride, int32_t pad);
  Status slotMapping(uint64_t seq, int64_t start, int64_t count, int64_t *out);
  StatusOr<int64_t> lookupPrefix(const int32_t *tokens, int64_t n,
                                 const AddOptions &opts);
  StatusOr<bool> canAdd(int64_t n, const int32_t *tokens,
                        const AddOptions &opts);
  StatusOr<int64_t> blocksNeeded(uint64_t seq, int64_t k);
  StatusOr<int64_t> numFreeBlocks();
  StatusOr<int64_t> numEvictableBlocks();
  StatusOr<int64_t> numAllocatableBlocks();
  Status swapOut(uint64_t seq);
  Status swapIn(uint64_t seq);
  Status takePendingCopies(std::vector<BlockCopy> *out);
  StatusOr<int64_t> complete(uint64_t epoch);
  StatusOr<int64_t> evict(int64_t k);
  Status resetPrefixCache();
  StatusOr<Stats> stats();
  Status checkInvariants();
  StatusOr<StateSnapshot> snapshot();
  StatusOr<SequenceInfo> sequenceInfo(uint64_t seq);
  double metadataBytesPerDeviceBlock() const;

  // --- everything below runs with mu_ held
  // ------------------------------------
  Status addLocked(const detail::AddArgs &args,
                   const detail::ChainHashes &chain, AddResult *out);
  Status appendLocked(uint64_t seq, const int32_t *tokens, int64_t k,
                      bool withTokens, AppendResult *out);
  Status freeLocked(uint64_t seq);
  Status checkInvariantsLocked();
  Stats statsLocked() const;

  // Validation shared by the operation and its query.
  Status validateAddArgs(const detail::AddArgs &args) const;
  Status addCapacityExceeded(int64_t n) const;
  void computeChain(const int32_t *tokens, int64_t n, const AddOptions *opts,
                    detail::ChainHashes *chain) const;
  int64_t hitCapBlocks(int64_t n, const AddOptions *opts) const;
  /// Longest verified hit (device, then host per position); marks are
  /// cleared before returning.
  void lookupLocked(const int32_t *tokens, const detail::ChainHashes &chain,
                    int64_t capBlocks, detail::HitPlan *plan);
  /// Blocks an allocation may take right now, given `cachedHits` CACHED
  /// blocks that the same call takes out of the LRU.
  int64_t allocatable(int64_t cachedHits = 0) const;
  bool cachedIsAllocatable() const { return !asyncHost_; }
  /// OutOfBlocks with the payload of spec §4.9; `admission` (addSequence,
  /// swapIn) also names the watermark.
  Status outOfBlocks(int64_t needed, int64_t available, int64_t cachedHits,
                     bool admission) const;
  /// Blocks that hold n slots: ceil(n / bs).
  int64_t blocksFor(int64_t n) const {
    return (n >> bsShift_) + ((n & (bs_ - 1)) != 0);
  }
  /// The live sequence `seq` in state ACTIVE, for operation `op`:
  /// UnknownSequence if it is not live, InvalidState "SWAPPED" if swapped.
  /// Inline, with the errors built out of line: it is on every hot path.
  SITS_KV_INLINE Status findActive(uint64_t seq, const char *op,
                                   Sequence **out) {
    Sequence *s = findSeq(seq);
    if (__builtin_expect(s != nullptr && s->state == SeqState::kActive, 1)) {
      *out = s;
      return Status();
    }
    return seqError(seq, s, op);
  }
  /// CapacityExceeded unless `s` may hold n + `extra` slots (max_seq_len,
  /// then usable_blocks; `what` names the request in the message). On
  /// success *target is the table length that needs.
  SITS_KV_INLINE Status checkGrowth(const Sequence &s, int64_t extra,
                                    const char *what, int64_t *target) const {
    if (__builtin_expect(extra <= config_.max_seq_len - s.n, 1)) {
      *target = blocksFor(s.n + extra);
      if (__builtin_expect(*target <= geometry_.usable_blocks, 1))
        return Status();
    }
    return growthError(s, extra, what);
  }
  Status seqError(uint64_t seq, const Sequence *s, const char *op) const;
  Status growthError(const Sequence &s, int64_t extra, const char *what) const;

  // Block primitives.
  int32_t takeDeviceBlock();
  /// Appends `count` new blocks to `table` (FREE head first, then victims).
  /// Block j of the table gets filled = clamp(n - j * bs, 0, bs). Outside a
  /// batch transaction the FREE part is popped in one pass with the counters
  /// updated once.
  void allocateInto(std::vector<int32_t> &table, int64_t count, int64_t n);
  /// Host block for an offload or a swap-out: FREE head, else the first
  /// unmarked CACHED block (its hash dropped). kNil when none.
  int32_t takeHostBlock(bool skipMarked);
  /// A CACHED device victim loses its hash: offloaded to the host tier when
  /// there is one and room (D2H copy), else dropped.
  void dropVictimHash(int32_t b);
  /// One sequence reference to a device block goes away.
  void releaseDevice(int32_t b);
  void releaseHost(int32_t h);
  /// releaseDevice for blocks[count-1], ..., blocks[0] (tail first). Outside
  /// a batch transaction the common cases are handled with the counters
  /// updated once.
  void releaseRun(const int32_t *blocks, size_t count);
  void addSeqRef(int32_t b);
  void emitCopy(Tier srcTier, int32_t src, Tier dstTier, int32_t dst,
                int32_t tokens);
  void unpinDevice(int32_t b);
  /// Copy-on-write of the tail block at index j of `s` (valid tokens
  /// `valid`).
  void copyOnWrite(Sequence &s, int64_t j, int32_t valid, AppendResult *out);
  /// Seals the full blocks [from, to) of `s` from its tokens.
  void sealRange(Sequence &s, int64_t from, int64_t to);
  void releaseTail(Sequence &s, int64_t newLen);
  bool tailNeedsCow(const Sequence &s) const;

  // Sequences.
  Sequence *findSeq(uint64_t id);
  Sequence &createSeq(uint64_t id);
  void eraseSeq(Sequence &s);
  void saveSeq(Sequence &s);
  void counter(int64_t &c, int64_t delta = 1) { dev_.put(c, c + delta); }

  // Batches.
  bool freeBatchCannotFail(const uint64_t *seqs, size_t count);
  bool appendBatchCannotFail(const AppendRequest *reqs, size_t count);
  bool addBatchCannotFail(const AddRequest *reqs, size_t count);
  void beginTxn();
  void rollbackTxn();
  void commitTxn();

  // Errors.
  Status fail(Status st);
  Status poisonedStatus() const;
  Status poison(int invariant, std::string detail);
  Status poisonWith(const Status &st);
  /// Runs `fn` and converts an escaping exception (std::bad_alloc) into a
  /// poisoned pool: the state may be half-changed, so no call may trust it.
  template <typename Fn> SITS_KV_INLINE auto guarded(Fn &&fn) -> decltype(fn());
  /// Runs `fn` (returning a Status or StatusOr) under the lock: a poisoned
  /// pool fails fast with Internal, and any other error `fn` returns goes
  /// through fail() (the failure counters). Callers wrap it in guarded().
  template <typename Fn>
  SITS_KV_INLINE auto underLock(Fn &&fn) -> decltype(fn());
  /// guarded(underLock(fn)): the frame of every public operation (inline:
  /// a single call is tens of nanoseconds).
  template <typename Fn> SITS_KV_INLINE auto run(Fn &&fn) -> decltype(fn()) {
    return guarded([&]() SITS_KV_LAMBDA_INLINE { return underLock(fn); });
  }
  /// Runs items 0..count-1 of a batch (`item(i)` returns a Status),
  /// all-or-nothing. When `cannotFail` (a batch pre-check proved it), they
  /// run directly and a failing item is an impossible state; otherwise they
  /// run in a transaction that is rolled back at the first failing item,
  /// then `reset()` clears the results and the error gets that item's
  /// `batch_index`. Runs under the lock.
  template <typename Item, typename Reset>
  Status runBatch(size_t count, bool cannotFail, Item &&item, Reset &&reset);

  PoolConfig config_;
  PoolGeometry geometry_;
  int32_t bs_ = 0;
  int32_t bsShift_ = 0;
  bool caching_ = true;
  bool hostTier_ = false;
  bool async_ = false;
  bool asyncHost_ = false;
  int32_t defaultPad_ = 0;
  BlockHasher hasher_{HashAlgo::kSha256, kDefaultHashSeed, 16};
  Hash128 defaultRoot_;

  mutable std::mutex mu_;
  std::atomic<int> poisoned_{-1};
  std::string poisonMessage_;

  detail::UndoLog log_;
  detail::BlockPool dev_;
  detail::BlockPool host_;

  std::deque<Sequence> seqSlots_;
  std::vector<uint32_t> freeSlots_;
  detail::SeqIndex seqIndex_;
  int64_t numLive_ = 0;
  int64_t numSwapped_ = 0;
  int64_t logicalTokens_ = 0;
  int64_t tableRefs_ = 0;

  std::vector<BlockCopy> pending_;
  std::deque<BlockCopy> inflight_;
  uint64_t epoch_ = 0;

  Stats counters_; // only the monotonic counter fields are used

  // Batch transaction state.
  bool inTxn_ = false;
  uint64_t txnId_ = 0;
  std::vector<detail::SeqUndo> seqUndo_;
  std::vector<int32_t> savedTables_;
  std::vector<uint32_t> erasedSlots_;
  size_t txnPendingSize_ = 0;
};

template <typename Fn>
SITS_KV_INLINE auto Allocator::Impl::guarded(Fn &&fn) -> decltype(fn()) {
  int invariant = 0;
  std::string message;
  try {
    return fn();
  } catch (const detail::InternalError &e) {
    invariant = e.invariant;
    message = e.text;
  } catch (const std::exception &e) {
    message = std::string("exception inside the allocator: ") + e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (inTxn_)
    rollbackTxn();
  else if (log_.active())
    log_.end();
  return poison(invariant, std::move(message));
}

namespace detail {
inline Status takeStatus(Status &s) { return std::move(s); }
template <typename T> Status takeStatus(StatusOr<T> &s) {
  return std::move(s).status();
}
} // namespace detail

template <typename Fn>
SITS_KV_INLINE auto Allocator::Impl::underLock(Fn &&fn) -> decltype(fn()) {
  std::lock_guard<std::mutex> lock(mu_);
  if (poisoned_.load() >= 0)
    return poisonedStatus();
  auto result = fn();
  if (!result.ok() && poisoned_.load() < 0)
    return fail(detail::takeStatus(result));
  return result;
}

template <typename Item, typename Reset>
inline Status Allocator::Impl::runBatch(size_t count, bool cannotFail,
                                        Item &&item, Reset &&reset) {
  if (cannotFail) {
    for (size_t i = 0; i < count; ++i)
      if (Status st = item(i); !st.ok())
        throw detail::InternalError(0, "batch item failed after its check: " +
                                           st.toString());
    return Status::OK();
  }
  beginTxn();
  for (size_t i = 0; i < count; ++i) {
    Status st = item(i);
    if (!st.ok()) {
      rollbackTxn();
      reset();
      st.mutableInfo().batch_index = int64_t(i);
      return st;
    }
  }
  commitTxn();
  return Status::OK();
}

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_SRC_KV_ALLOCATOR_IMPL_H
