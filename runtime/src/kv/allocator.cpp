//===- allocator.cpp - The paged KV-cache allocator
//------------------------===//
//
// Operations O1–O13 of spec `kv-allocator.md`. Every mutating operation
// validates and computes the capacity it needs before its first store, so a
// single call that fails has changed nothing. Batch calls run the single-call
// code in order inside a transaction whose undo log restores every store if
// a later item fails (the whole batch is all-or-nothing, spec T63).
//
//===----------------------------------------------------------------------===//
#include "allocator_impl.h"
#include "errors.h"

#include <algorithm>
#include <exception>
#include <new>

namespace sits::runtime::kv {

using detail::AddArgs;
using detail::ChainHashes;
using detail::HitPlan;
using detail::kNil;
using detail::SeqIndex;
using detail::SeqUndo;
using Sequence = detail::Sequence;

namespace detail {

std::string_view Sequence::extraFor(int64_t blockIndex) const {
  if (extras.empty())
    return {};
  auto it = std::lower_bound(
      extras.begin(), extras.end(), blockIndex,
      [](const BlockExtra &e, int64_t j) { return e.block_index < j; });
  if (it != extras.end() && it->block_index == blockIndex)
    return it->data;
  return {};
}

} // namespace detail

using detail::InternalError;

namespace {

/// a + b for non-negative operands, clamped at INT64_MAX (error payloads).
int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t out;
  return __builtin_add_overflow(a, b, &out) ? INT64_MAX : out;
}

std::vector<BlockExtra> sortedExtras(const AddOptions *opts) {
  std::vector<BlockExtra> out;
  if (!opts)
    return out;
  out = opts->block_extras;
  std::sort(out.begin(), out.end(),
            [](const BlockExtra &a, const BlockExtra &b) {
              return a.block_index < b.block_index;
            });
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

const char *tierName(Tier tier) {
  return tier == Tier::kDevice ? "device" : "host";
}

const char *blockStateName(BlockState state) {
  switch (state) {
  case BlockState::kReserved:
    return "RESERVED";
  case BlockState::kFree:
    return "FREE";
  case BlockState::kCached:
    return "CACHED";
  case BlockState::kActive:
    return "ACTIVE";
  case BlockState::kEvicting:
    return "EVICTING";
  }
  return "INVALID";
}

const char *seqStateName(SeqState state) {
  return state == SeqState::kActive ? "ACTIVE" : "SWAPPED";
}

//===----------------------------------------------------------------------===//
// Construction
//===----------------------------------------------------------------------===//

Status Allocator::Impl::init(const PoolConfig &config,
                             const PoolGeometry &geometry) {
  config_ = config;
  geometry_ = geometry;
  bs_ = int32_t(config.block_size);
  bsShift_ = __builtin_ctz(uint32_t(bs_));
  caching_ = config.enable_prefix_caching;
  hostTier_ = config.num_host_blocks > 0;
  async_ = config.copy_ordering == CopyOrdering::kAsync;
  asyncHost_ = async_ && hostTier_;
  defaultPad_ = config.reserve_null_block ? 0 : -1;
  hasher_ = BlockHasher(config.hash_algo, config.hash_seed, bs_);
  defaultRoot_ = hasher_.root("", "");
  const bool verify = geometry.verify_hits;
  dev_.init(Tier::kDevice, int32_t(config.num_blocks),
            config.reserve_null_block ? 1 : 0, bs_, async_, verify, &log_);
  host_.init(Tier::kHost, int32_t(config.num_host_blocks), 0, bs_, false,
             verify && hostTier_, &log_);
  return Status::OK();
}

Allocator::Allocator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Allocator::~Allocator() = default;

StatusOr<std::unique_ptr<Allocator>>
Allocator::create(const PoolConfig &config) {
  StatusOr<PoolGeometry> geometry = validatePoolConfig(config);
  if (!geometry.ok())
    return geometry.status();
  try {
    auto impl = std::make_unique<Impl>();
    Status st = impl->init(config, *geometry);
    if (!st.ok())
      return st;
    return std::unique_ptr<Allocator>(new Allocator(std::move(impl)));
  } catch (const std::bad_alloc &) {
    // Metadata: ~26 B per block per tier plus the index (4 B × 1.25–2.5).
    const int64_t blocks = config.num_blocks + config.num_host_blocks;
    return errors::outOfMemory(blocks * 36);
  }
}

const PoolConfig &Allocator::config() const { return impl_->config_; }
const PoolGeometry &Allocator::geometry() const { return impl_->geometry_; }
int32_t Allocator::defaultPad() const { return impl_->defaultPad_; }

//===----------------------------------------------------------------------===//
// Errors, poisoning, transactions
//===----------------------------------------------------------------------===//

Status Allocator::Impl::fail(Status st) {
  counters_.failed_calls += 1;
  if (st.code() == StatusCode::kOutOfBlocks)
    counters_.out_of_blocks_failures += 1;
  return st;
}

Status Allocator::Impl::poisonedStatus() const {
  ErrorInfo e;
  e.code = StatusCode::kInternal;
  e.invariant = poisoned_.load();
  e.message = poisonMessage_;
  return Status(std::move(e));
}

Status Allocator::Impl::poison(int invariant, std::string detail) {
  return poisonWith(errors::internal(invariant, std::move(detail)));
}

Status Allocator::Impl::poisonWith(const Status &st) {
  if (poisoned_.load() < 0) {
    poisonMessage_ = st.message();
    poisoned_.store(st.info().invariant);
  }
  return poisonedStatus();
}

void Allocator::Impl::beginTxn() {
  inTxn_ = true;
  ++txnId_;
  seqUndo_.clear();
  savedTables_.clear();
  erasedSlots_.clear();
  txnPendingSize_ = pending_.size();
  log_.begin();
}

void Allocator::Impl::rollbackTxn() {
  log_.rollback();
  for (size_t i = seqUndo_.size(); i > 0; --i) {
    const SeqUndo &u = seqUndo_[i - 1];
    Sequence &s = seqSlots_[u.slot];
    switch (u.kind) {
    case SeqUndo::kCreated:
      seqIndex_.erase(u.id);
      s.live = false;
      if (u.slotWasAppended)
        seqSlots_.pop_back();
      else
        freeSlots_.push_back(u.slot);
      break;
    case SeqUndo::kErased:
      seqIndex_.insert(u.id, u.slot);
      s.live = true;
      break;
    case SeqUndo::kModified:
      s.n = u.n;
      s.lookahead = u.lookahead;
      s.firstOwned = u.firstOwned;
      s.state = u.state;
      s.tokens.resize(u.tokensSize);
      s.table.assign(savedTables_.begin() + ptrdiff_t(u.tableOffset),
                     savedTables_.begin() +
                         ptrdiff_t(u.tableOffset + u.tableLen));
      break;
    }
  }
  pending_.resize(txnPendingSize_);
  seqUndo_.clear();
  savedTables_.clear();
  erasedSlots_.clear();
  inTxn_ = false;
}

void Allocator::Impl::commitTxn() {
  log_.end();
  for (uint32_t slot : erasedSlots_)
    freeSlots_.push_back(slot);
  seqUndo_.clear();
  savedTables_.clear();
  erasedSlots_.clear();
  inTxn_ = false;
}

//===----------------------------------------------------------------------===//
// Batch pre-checks
//
// A batch whose success can be proven up front runs without the undo log.
// The proofs are conservative (a false "cannot fail" is impossible; a false
// "may fail" only costs the journaled path, whose result is exact):
//   * free: every id live and distinct.
//   * append: every sequence live, ACTIVE and distinct, every item valid on
//     its own, and Σ blocksNeeded <= allocatable. Earlier items can only
//     lower a later item's need (a CoW releases its source) and never lower
//     the allocatable count below what they took.
//   * add: every id new and distinct, every item valid on its own, and
//     Σ ceil(n / bs) + watermark <= allocatable: an item takes at most
//     ceil(n / bs) allocatable blocks (new blocks plus CACHED hits).
//===----------------------------------------------------------------------===//

bool Allocator::Impl::freeBatchCannotFail(const uint64_t *seqs, size_t count) {
  const uint64_t stamp = ++txnId_;
  for (size_t i = 0; i < count; ++i) {
    Sequence *s = findSeq(seqs[i]);
    if (!s || s->txnStamp == stamp)
      return false;
    s->txnStamp = stamp;
  }
  return true;
}

bool Allocator::Impl::appendBatchCannotFail(const AppendRequest *reqs,
                                            size_t count) {
  const uint64_t stamp = ++txnId_;
  int64_t needed = 0;
  for (size_t i = 0; i < count; ++i) {
    const AppendRequest &r = reqs[i];
    Sequence *s = findSeq(r.seq);
    if (!s || s->txnStamp == stamp || s->state != SeqState::kActive ||
        r.num_tokens < 0 || (s->tokensKnown && !r.tokens && r.num_tokens > 0) ||
        r.num_tokens > config_.max_seq_len - s->n)
      return false;
    s->txnStamp = stamp;
    const int64_t target = blocksFor(s->n + r.num_tokens);
    if (target > geometry_.usable_blocks)
      return false;
    if (r.num_tokens > 0)
      needed += int64_t(tailNeedsCow(*s)) +
                std::max<int64_t>(0, target - int64_t(s->table.size()));
  }
  return needed <= allocatable();
}

bool Allocator::Impl::addBatchCannotFail(const AddRequest *reqs, size_t count) {
  int64_t blocks = 0;
  for (size_t i = 0; i < count; ++i) {
    const AddRequest &r = reqs[i];
    AddArgs args{r.seq, r.num_tokens, r.tokens, r.opts};
    if (findSeq(r.seq) || !validateAddArgs(args).ok() ||
        !addCapacityExceeded(r.num_tokens).ok())
      return false;
    blocks += blocksFor(r.num_tokens);
  }
  // Distinct ids: sort a copy (ids of new sequences have no stamp to use).
  std::vector<uint64_t> ids(count);
  for (size_t i = 0; i < count; ++i)
    ids[i] = reqs[i].seq;
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end())
    return false;
  return blocks + config_.watermark_blocks <= allocatable();
}

//===----------------------------------------------------------------------===//
// Sequences
//===----------------------------------------------------------------------===//

Sequence *Allocator::Impl::findSeq(uint64_t id) {
  const uint32_t slot = seqIndex_.find(id);
  return slot == SeqIndex::kEmpty ? nullptr : &seqSlots_[slot];
}

Sequence &Allocator::Impl::createSeq(uint64_t id) {
  uint32_t slot;
  bool appended = false;
  if (!freeSlots_.empty()) {
    slot = freeSlots_.back();
    freeSlots_.pop_back();
  } else {
    slot = uint32_t(seqSlots_.size());
    seqSlots_.emplace_back();
    appended = true;
  }
  Sequence &s = seqSlots_[slot];
  s.id = id;
  s.live = true;
  s.state = SeqState::kActive;
  s.tokensKnown = false;
  s.n = 0;
  s.lookahead = 0;
  s.firstOwned = 0;
  s.txnStamp = inTxn_ ? txnId_ : 0;
  s.root = Hash128{};
  s.table.clear();
  s.hostTable.clear();
  s.tokens.clear();
  s.extras.clear();
  seqIndex_.insert(id, slot);
  dev_.put(numLive_, numLive_ + 1);
  if (inTxn_) {
    SeqUndo u{};
    u.kind = SeqUndo::kCreated;
    u.slot = slot;
    u.id = id;
    u.slotWasAppended = appended;
    seqUndo_.push_back(u);
  }
  return s;
}

void Allocator::Impl::eraseSeq(Sequence &s) {
  const uint32_t slot = seqIndex_.find(s.id);
  seqIndex_.erase(s.id);
  s.live = false;
  dev_.put(numLive_, numLive_ - 1);
  if (inTxn_) {
    SeqUndo u{};
    u.kind = SeqUndo::kErased;
    u.slot = slot;
    u.id = s.id;
    seqUndo_.push_back(u);
    erasedSlots_.push_back(slot);
  } else {
    freeSlots_.push_back(slot);
  }
}

void Allocator::Impl::saveSeq(Sequence &s) {
  if (!inTxn_ || s.txnStamp == txnId_)
    return;
  s.txnStamp = txnId_;
  SeqUndo u{};
  u.kind = SeqUndo::kModified;
  u.slot = seqIndex_.find(s.id);
  u.id = s.id;
  u.n = s.n;
  u.lookahead = s.lookahead;
  u.firstOwned = s.firstOwned;
  u.state = s.state;
  u.tokensSize = s.tokens.size();
  u.tableOffset = savedTables_.size();
  u.tableLen = s.table.size();
  savedTables_.insert(savedTables_.end(), s.table.begin(), s.table.end());
  seqUndo_.push_back(u);
}

//===----------------------------------------------------------------------===//
// Block primitives
//===----------------------------------------------------------------------===//

int64_t Allocator::Impl::allocatable(int64_t cachedHits) const {
  return dev_.numFree + (asyncHost_ ? 0 : dev_.numCached - cachedHits);
}

Status Allocator::Impl::outOfBlocks(int64_t needed, int64_t available,
                                    int64_t cachedHits, bool admission) const {
  const int64_t evictable =
      asyncHost_ ? dev_.numCached : dev_.numCached - cachedHits;
  return errors::outOfBlocks(needed, available, evictable, dev_.numEvicting,
                             admission ? config_.watermark_blocks : 0);
}

Status Allocator::Impl::seqError(uint64_t seq, const Sequence *s,
                                 const char *op) const {
  if (!s)
    return errors::unknownSequence(seq);
  return errors::invalidSeqState(seq, "SWAPPED",
                                 std::string(op) +
                                     " needs an ACTIVE sequence; swap_in "
                                     "first");
}

Status Allocator::Impl::growthError(const Sequence &s, int64_t extra,
                                    const char *what) const {
  if (extra > config_.max_seq_len - s.n)
    return errors::capacityExceeded("max_seq_len", saturatingAdd(s.n, extra),
                                    config_.max_seq_len, what);
  return errors::capacityExceeded("usable_blocks", blocksFor(s.n + extra),
                                  geometry_.usable_blocks, "blocks needed");
}

void Allocator::Impl::emitCopy(Tier srcTier, int32_t src, Tier dstTier,
                               int32_t dst, int32_t tokens) {
  pending_.push_back(BlockCopy{epoch_, srcTier, src, dstTier, dst, tokens});
  if (!async_)
    return;
  // ASYNC: the device endpoints stay pinned until complete(epoch).
  auto pin = [&](int32_t b) {
    dev_.put(dev_.pins[size_t(b)], dev_.pins[size_t(b)] + 1);
    dev_.put(dev_.link0[size_t(b)], dev_.link0[size_t(b)] + 1);
  };
  if (srcTier == Tier::kDevice)
    pin(src);
  if (dstTier == Tier::kDevice)
    pin(dst);
}

void Allocator::Impl::unpinDevice(int32_t b) {
  if (dev_.pinCount(b) <= 0)
    throw InternalError(2, "unpin of block " + std::to_string(b) +
                               " without a pin");
  dev_.put(dev_.pins[size_t(b)], dev_.pins[size_t(b)] - 1);
  const int32_t r = dev_.link0[size_t(b)] - 1;
  dev_.setRef(b, r);
  if (r == 0 && dev_.state(b) == BlockState::kEvicting) {
    dev_.put(dev_.meta[size_t(b)], uint16_t(BlockState::kFree));
    dev_.put(dev_.numEvicting, dev_.numEvicting - 1);
    dev_.pushFreeHead(b);
  }
}

int32_t Allocator::Impl::takeHostBlock(bool skipMarked) {
  int32_t h = host_.freeHead;
  if (h != kNil) {
    host_.unlink(h);
    return h;
  }
  for (h = host_.cachedHead; h != kNil; h = host_.next[size_t(h)]) {
    if (skipMarked && host_.marked(h))
      continue;
    host_.unlink(h);
    if (!host_.unseal(h))
      throw InternalError(10, "host block " + std::to_string(h) +
                                  " is CACHED but not in the host index");
    return h;
  }
  return kNil;
}

void Allocator::Impl::dropVictimHash(int32_t b) {
  if (hostTier_) {
    const bool onHost = host_.containsContentOf(dev_, b);
    if (!onHost) {
      const int32_t h = takeHostBlock(/*skipMarked=*/true);
      if (h != kNil) {
        emitCopy(Tier::kDevice, b, Tier::kHost, h, bs_);
        host_.put(host_.meta[size_t(h)],
                  uint16_t(uint16_t(BlockState::kCached) |
                           uint16_t(bs_ << detail::kFilledShift)));
        host_.sealFrom(h, dev_, b);
        host_.pushCachedTail(h);
        counter(counters_.offloads);
      }
    }
  }
  if (!dev_.unseal(b))
    throw InternalError(6, "cached block " + std::to_string(b) +
                               " is missing from the device index");
  counter(counters_.evictions);
}

int32_t Allocator::Impl::takeDeviceBlock() {
  int32_t b = dev_.freeHead;
  if (b != kNil) {
    dev_.unlink(b);
  } else {
    b = dev_.cachedHead;
    if (b == kNil || asyncHost_)
      throw InternalError(4, "allocation found no allocatable block after "
                             "the capacity check passed");
    dev_.unlink(b);
    dropVictimHash(b);
  }
  // ACTIVE, ref 1, unsealed, filled 0 (one store).
  dev_.put(dev_.meta[size_t(b)], uint16_t(BlockState::kActive));
  dev_.setRef(b, dev_.link0[size_t(b)] + 1); // + pins of a victim's offload
  dev_.put(dev_.numActive, dev_.numActive + 1);
  if (dev_.numActive > counters_.peak_active_blocks)
    dev_.put(counters_.peak_active_blocks, dev_.numActive);
  counter(counters_.blocks_allocated);
  return b;
}

void Allocator::Impl::allocateInto(std::vector<int32_t> &table, int64_t count,
                                   int64_t n) {
  const size_t first = table.size();
  table.resize(first + size_t(count));
  int32_t *out = table.data() + first;
  // By value: stores into the block arrays may alias members.
  const int32_t bs = bs_, shift = bsShift_;
  auto fillOf = [n, bs, shift](size_t index) {
    const int64_t rest = n - (int64_t(index) << shift);
    return int32_t(rest <= 0 ? 0 : (rest >= bs ? bs : rest));
  };
  int64_t done = 0;
  if (!log_.active()) {
    // Fast path: unlink a run of FREE blocks from the head at once.
    detail::BlockPool &p = dev_;
    int64_t physical = 0;
    int32_t b = p.freeHead;
    for (; done < count && b != kNil; ++done) {
      const int32_t nextB = p.next[size_t(b)];
      const int32_t fill = fillOf(first + size_t(done));
      out[done] = b;
      p.next[size_t(b)] = kNil;
      p.link0[size_t(b)] = 1;
      p.meta[size_t(b)] = uint16_t(uint16_t(BlockState::kActive) |
                                   uint16_t(fill << detail::kFilledShift));
      physical += fill;
      b = nextB;
    }
    if (done) {
      p.freeHead = b;
      if (b == kNil)
        p.freeTail = kNil;
      else
        p.link0[size_t(b)] = kNil;
      p.numFree -= done;
      p.numActive += done;
      p.physicalTokens += physical;
      counters_.blocks_allocated += done;
      if (p.numActive > counters_.peak_active_blocks)
        counters_.peak_active_blocks = p.numActive;
    }
  }
  if (done < count && !log_.active() && !hostTier_ && !asyncHost_ &&
      dev_.freeHead == kNil) {
    // Fast path for victims without a host tier: CACHED blocks from the LRU
    // head lose their hash and become ACTIVE, counters updated once. First
    // the run is unlinked (a walk along `next`, which is mostly sequential
    // memory); then each victim's index entry is erased, with the entries
    // of the victims kPrefetch ahead fetched meanwhile: the index slot is
    // the one random access per victim.
    constexpr int64_t kPrefetch = 8;
    detail::BlockPool &p = dev_;
    // Locals: the stores below may alias members for the compiler.
    int32_t *const next = p.next.data();
    int32_t *const link0 = p.link0.data();
    uint16_t *const meta = p.meta.data();
    Hash128 *const hash = p.hash.data();
    const uint64_t *const slots = p.slots.data();
    const uint64_t mask = p.mask;
    const int64_t start = done;
    int32_t b = p.cachedHead;
    for (; done < count && b != kNil; ++done) {
      out[done] = b;
      b = next[size_t(b)];
    }
    p.cachedHead = b;
    if (b == kNil)
      p.cachedTail = kNil;
    else
      link0[size_t(b)] = kNil;
    for (int64_t i = start; i < start + kPrefetch && i < done; ++i)
      __builtin_prefetch(&slots[hash[size_t(out[i])].lo & mask]);
    int64_t physical = 0;
    for (int64_t i = start; i < done; ++i) {
      if (i + kPrefetch < done)
        __builtin_prefetch(&slots[hash[size_t(out[i + kPrefetch])].lo & mask]);
      const int32_t v = out[i];
      if (!p.eraseEntry</*kLogged=*/false>(v))
        throw InternalError(6, "cached block " + std::to_string(v) +
                                   " is missing from the device index");
      hash[size_t(v)] = Hash128{};
      const int32_t fill = fillOf(first + size_t(i));
      next[size_t(v)] = kNil;
      link0[size_t(v)] = 1;
      meta[size_t(v)] = uint16_t(uint16_t(BlockState::kActive) |
                                 uint16_t(fill << detail::kFilledShift));
      physical += fill;
    }
    const int64_t evicted = done - start;
    p.numCached -= evicted;
    p.numActive += evicted;
    p.physicalTokens += physical;
    counters_.blocks_allocated += evicted;
    counters_.evictions += evicted;
    if (p.numActive > counters_.peak_active_blocks)
      counters_.peak_active_blocks = p.numActive;
  }
  for (; done < count; ++done) {
    const int32_t b = takeDeviceBlock();
    out[done] = b;
    dev_.setFilled(b, fillOf(first + size_t(done)));
  }
}

void Allocator::Impl::addSeqRef(int32_t b) {
  if (dev_.state(b) == BlockState::kCached) {
    // Reusing: a prefix hit takes the block out of the LRU in O(1).
    dev_.unlink(b);
    dev_.setStateRaw(b, BlockState::kActive);
    dev_.setRef(b, 1);
    dev_.put(dev_.numActive, dev_.numActive + 1);
    dev_.put(dev_.physicalTokens, dev_.physicalTokens + dev_.filled(b));
    if (dev_.numActive > counters_.peak_active_blocks)
      dev_.put(counters_.peak_active_blocks, dev_.numActive);
    return;
  }
  if (dev_.state(b) != BlockState::kActive)
    throw InternalError(1, "reference to block " + std::to_string(b) +
                               " in state " + blockStateName(dev_.state(b)));
  dev_.setRef(b, dev_.ref(b) + 1);
  if (dev_.seqRefs(b) == 2)
    dev_.put(dev_.numShared, dev_.numShared + 1);
}

void Allocator::Impl::releaseDevice(int32_t b) {
  const int32_t seqRefs = dev_.seqRefs(b);
  if (dev_.state(b) != BlockState::kActive || seqRefs <= 0)
    throw InternalError(2, "unref of device block " + std::to_string(b) +
                               " that no sequence holds");
  const int32_t r = dev_.ref(b);
  if (seqRefs > 1) {
    dev_.setRef(b, r - 1);
    if (seqRefs == 2)
      dev_.put(dev_.numShared, dev_.numShared - 1);
    return;
  }
  counter(counters_.blocks_released);
  dev_.put(dev_.numActive, dev_.numActive - 1);
  dev_.put(dev_.physicalTokens, dev_.physicalTokens - dev_.filled(b));
  if (r > 1) {
    // Only pending copies hold it now (ASYNC): EVICTING, without a hash.
    if (dev_.sealed(b) && !dev_.unseal(b))
      throw InternalError(6, "sealed block " + std::to_string(b) +
                                 " missing from the index");
    dev_.setRef(b, r - 1);
    dev_.put(dev_.meta[size_t(b)], uint16_t(BlockState::kEvicting));
    dev_.put(dev_.numEvicting, dev_.numEvicting + 1);
    return;
  }
  if (dev_.sealed(b) && caching_) {
    dev_.setStateRaw(b, BlockState::kCached);
    dev_.pushCachedTail(b);
  } else {
    dev_.put(dev_.meta[size_t(b)], uint16_t(BlockState::kFree));
    dev_.pushFreeHead(b);
  }
}

void Allocator::Impl::releaseRun(const int32_t *blocks, size_t count) {
  if (log_.active() || async_) {
    for (size_t i = count; i > 0; --i)
      releaseDevice(blocks[i - 1]);
    return;
  }
  detail::BlockPool &p = dev_;
  int64_t released = 0, physical = 0, unshared = 0, toFree = 0, toCached = 0;
  for (size_t i = count; i > 0; --i) {
    const int32_t b = blocks[i - 1];
    const uint16_t m = p.meta[size_t(b)];
    const int32_t r = p.link0[size_t(b)];
    if ((m & detail::kStateMask) != uint16_t(BlockState::kActive) || r <= 0)
      throw InternalError(2, "unref of device block " + std::to_string(b) +
                                 " that no sequence holds");
    if (r > 1) {
      p.link0[size_t(b)] = r - 1;
      unshared += r == 2;
      continue;
    }
    ++released;
    physical += (m & detail::kFilledMask) >> detail::kFilledShift;
    if ((m & detail::kSealedBit) && caching_) {
      // CACHED at the LRU tail.
      p.meta[size_t(b)] =
          uint16_t((m & ~detail::kStateMask) | uint16_t(BlockState::kCached));
      p.link0[size_t(b)] = p.cachedTail;
      p.next[size_t(b)] = kNil;
      if (p.cachedTail == kNil)
        p.cachedHead = b;
      else
        p.next[size_t(p.cachedTail)] = b;
      p.cachedTail = b;
      ++toCached;
    } else {
      // FREE at the head (LIFO).
      p.meta[size_t(b)] = uint16_t(BlockState::kFree);
      p.link0[size_t(b)] = kNil;
      p.next[size_t(b)] = p.freeHead;
      if (p.freeHead == kNil)
        p.freeTail = b;
      else
        p.link0[size_t(p.freeHead)] = b;
      p.freeHead = b;
      ++toFree;
    }
  }
  p.numShared -= unshared;
  p.numActive -= released;
  p.physicalTokens -= physical;
  p.numFree += toFree;
  p.numCached += toCached;
  counters_.blocks_released += released;
}

void Allocator::Impl::releaseHost(int32_t h) {
  if (host_.state(h) != BlockState::kActive || host_.ref(h) != 1)
    throw InternalError(10, "unref of host block " + std::to_string(h) +
                                " that is not exclusively held");
  host_.put(host_.numActive, host_.numActive - 1);
  host_.put(host_.physicalTokens, host_.physicalTokens - host_.filled(h));
  if (host_.sealed(h) && caching_) {
    host_.setStateRaw(h, BlockState::kCached);
    host_.pushCachedTail(h);
  } else {
    host_.put(host_.meta[size_t(h)], uint16_t(BlockState::kFree));
    host_.pushFreeHead(h);
  }
}

bool Allocator::Impl::tailNeedsCow(const Sequence &s) const {
  if ((s.n & (bs_ - 1)) == 0)
    return false;
  return !dev_.writable(s.table[size_t(s.n >> bsShift_)]);
}

void Allocator::Impl::copyOnWrite(Sequence &s, int64_t j, int32_t valid,
                                  AppendResult *out) {
  const int32_t old = s.table[size_t(j)];
  const int32_t d = takeDeviceBlock();
  emitCopy(Tier::kDevice, old, Tier::kDevice, d, valid);
  dev_.setFilled(d, valid);
  s.table[size_t(j)] = d;
  releaseDevice(old);
  s.firstOwned = std::min<int64_t>(s.firstOwned, j);
  counter(counters_.cow_copies);
  if (out)
    out->new_block_ids.push_back(d);
}

void Allocator::Impl::sealRange(Sequence &s, int64_t from, int64_t to) {
  for (int64_t j = from; j < to; ++j) {
    const int32_t b = s.table[size_t(j)];
    if (!dev_.writable(b))
      throw InternalError(7, "sealing block " + std::to_string(b) +
                                 " that is not writable");
    Hash128 parent = s.root;
    if (j > 0) {
      const int32_t pb = s.table[size_t(j - 1)];
      if (!dev_.sealed(pb))
        throw InternalError(6, "parent block " + std::to_string(pb) +
                                   " of a full block is not sealed");
      parent = dev_.hash[size_t(pb)];
    }
    const int32_t *toks = &s.tokens[size_t(j) << bsShift_];
    dev_.seal(b, hasher_.block(parent, toks, s.extraFor(j)), parent, toks);
  }
}

void Allocator::Impl::releaseTail(Sequence &s, int64_t newLen) {
  while (int64_t(s.table.size()) > newLen) {
    const int32_t b = s.table.back();
    s.table.pop_back();
    dev_.put(tableRefs_, tableRefs_ - 1);
    releaseDevice(b);
  }
}

//===----------------------------------------------------------------------===//
// O1: addSequence
//===----------------------------------------------------------------------===//

Status Allocator::Impl::validateAddArgs(const AddArgs &a) const {
  if (a.n < 0)
    return errors::invalidArgument("num_tokens", a.n, "must be >= 0");
  if (a.opts) {
    if (a.opts->max_cache_hit < -1)
      return errors::invalidArgument("max_cache_hit", a.opts->max_cache_hit,
                                     "must be >= 0, or -1 for n - 1");
    const auto &extras = a.opts->block_extras;
    if (!extras.empty()) {
      std::vector<int64_t> indices;
      indices.reserve(extras.size());
      for (const BlockExtra &e : extras) {
        if (e.block_index < 0)
          return errors::invalidArgument("block_extras", e.block_index,
                                         "block_index must be >= 0");
        indices.push_back(e.block_index);
      }
      std::sort(indices.begin(), indices.end());
      auto dup = std::adjacent_find(indices.begin(), indices.end());
      if (dup != indices.end())
        return errors::invalidArgument(
            "block_extras", *dup,
            "at most one extra per block (concatenate them)");
    }
  }
  return Status::OK();
}

Status Allocator::Impl::addCapacityExceeded(int64_t n) const {
  if (n > config_.max_seq_len)
    return errors::capacityExceeded("max_seq_len", n, config_.max_seq_len,
                                    "num_tokens");
  const int64_t blocks = blocksFor(n);
  if (blocks > geometry_.usable_blocks)
    return errors::capacityExceeded("usable_blocks", blocks,
                                    geometry_.usable_blocks, "blocks needed");
  return Status::OK();
}

void Allocator::Impl::computeChain(const int32_t *tokens, int64_t n,
                                   const AddOptions *opts,
                                   ChainHashes *chain) const {
  const bool plainRoot =
      !opts || (opts->extra_key.empty() && opts->cache_salt.empty());
  chain->root = plainRoot ? defaultRoot_
                          : hasher_.root(opts->extra_key, opts->cache_salt);
  const int64_t full = n >> bsShift_;
  chain->h.resize(size_t(full));
  std::vector<BlockExtra> extras = sortedExtras(opts);
  size_t e = 0;
  Hash128 parent = chain->root;
  for (int64_t i = 0; i < full; ++i) {
    while (e < extras.size() && extras[e].block_index < i)
      ++e;
    std::string_view extra;
    if (e < extras.size() && extras[e].block_index == i)
      extra = extras[e].data;
    parent = hasher_.block(parent, tokens + (i << bsShift_), extra);
    chain->h[size_t(i)] = parent;
  }
}

int64_t Allocator::Impl::hitCapBlocks(int64_t n, const AddOptions *opts) const {
  int64_t cap = n > 0 ? n - 1 : 0;
  if (opts && opts->max_cache_hit >= 0)
    cap = std::min(opts->max_cache_hit, n);
  return cap >> bsShift_;
}

void Allocator::Impl::lookupLocked(const int32_t *tokens,
                                   const ChainHashes &chain, int64_t capBlocks,
                                   HitPlan *plan) {
  plan->blocks.clear();
  plan->onHost.clear();
  plan->cachedDeviceHits = 0;
  plan->hostHits = 0;
  capBlocks = std::min<int64_t>(capBlocks, int64_t(chain.h.size()));
  for (int64_t i = 0; i < capBlocks; ++i) {
    const Hash128 &parent = i == 0 ? chain.root : chain.h[size_t(i - 1)];
    const int32_t *toks = tokens + (i << bsShift_);
    const int32_t b = dev_.find(chain.h[size_t(i)], parent, toks);
    if (b != kNil) {
      dev_.setMark(b);
      plan->blocks.push_back(b);
      plan->onHost.push_back(0);
      if (dev_.state(b) == BlockState::kCached)
        ++plan->cachedDeviceHits;
      continue;
    }
    if (hostTier_) {
      const int32_t h = host_.find(chain.h[size_t(i)], parent, toks);
      if (h != kNil) {
        host_.setMark(h);
        plan->blocks.push_back(h);
        plan->onHost.push_back(1);
        ++plan->hostHits;
        continue;
      }
    }
    break;
  }
  for (size_t i = 0; i < plan->blocks.size(); ++i) {
    if (plan->onHost[i])
      host_.clearMark(plan->blocks[i]);
    else
      dev_.clearMark(plan->blocks[i]);
  }
}

Status Allocator::Impl::addLocked(const AddArgs &a, const ChainHashes &chain,
                                  AddResult *out) {
  if (Status st = validateAddArgs(a); !st.ok())
    return st;
  if (Status st = addCapacityExceeded(a.n); !st.ok())
    return st;
  if (findSeq(a.seq))
    return errors::sequenceExists(a.seq);

  const bool withCache = caching_ && a.tokens != nullptr;
  HitPlan plan;
  if (withCache)
    lookupLocked(a.tokens, chain, hitCapBlocks(a.n, a.opts), &plan);
  const int64_t total = blocksFor(a.n);
  const int64_t deviceHits = plan.size() - plan.hostHits;
  const int64_t needed = total - deviceHits;
  const int64_t available = allocatable(plan.cachedDeviceHits);
  if (needed + config_.watermark_blocks > available)
    return outOfBlocks(needed, available, plan.cachedDeviceHits,
                       /*admission=*/true);

  // --- commit (no error past this point) ---
  const size_t copyStart = pending_.size();
  Sequence &s = createSeq(a.seq);
  s.table.reserve(size_t(total));
  // Device hits first, so that the allocations below never pick them.
  for (int64_t i = 0; i < plan.size(); ++i)
    if (!plan.onHost[size_t(i)])
      addSeqRef(plan.blocks[size_t(i)]);
  // Host hits may not serve as offload targets while they are onboarded.
  for (int64_t i = 0; i < plan.size(); ++i)
    if (plan.onHost[size_t(i)])
      host_.setMark(plan.blocks[size_t(i)]);
  for (int64_t i = 0; i < plan.size(); ++i) {
    if (!plan.onHost[size_t(i)]) {
      s.table.push_back(plan.blocks[size_t(i)]);
      continue;
    }
    const int32_t h = plan.blocks[size_t(i)];
    const int32_t d = takeDeviceBlock();
    emitCopy(Tier::kHost, h, Tier::kDevice, d, bs_);
    dev_.setFilled(d, bs_);
    dev_.sealFrom(d, host_, h);
    counter(counters_.onboards);
    s.table.push_back(d);
  }
  for (int64_t i = 0; i < plan.size(); ++i)
    if (plan.onHost[size_t(i)])
      host_.clearMark(plan.blocks[size_t(i)]);

  const int64_t full = a.n >> bsShift_;
  allocateInto(s.table, total - plan.size(), a.n);
  if (withCache)
    for (int64_t j = plan.size(); j < full; ++j) {
      const Hash128 &parent = j == 0 ? chain.root : chain.h[size_t(j - 1)];
      dev_.seal(s.table[size_t(j)], chain.h[size_t(j)], parent,
                a.tokens + (j << bsShift_));
    }

  s.n = a.n;
  s.firstOwned = plan.size();
  s.tokensKnown = withCache;
  if (withCache) {
    s.root = chain.root;
    s.tokens.assign(a.tokens, a.tokens + a.n);
    s.extras = sortedExtras(a.opts);
  }
  dev_.put(logicalTokens_, logicalTokens_ + a.n);
  dev_.put(tableRefs_, tableRefs_ + total);
  counter(counters_.sequences_added);
  if (withCache) {
    counter(counters_.prefix_queries);
    counter(counters_.prefix_query_tokens, a.n);
    counter(counters_.prefix_hit_tokens, plan.size() << bsShift_);
  }
  if (out) {
    out->cached_tokens = plan.size() << bsShift_;
    out->block_ids = s.table;
    out->num_new_blocks = total - deviceHits;
    out->num_onboarded = plan.hostHits;
    out->copies.assign(pending_.begin() + ptrdiff_t(copyStart), pending_.end());
  }
  return Status::OK();
}

StatusOr<AddResult> Allocator::Impl::addSequence(uint64_t seq,
                                                 const int32_t *tokens,
                                                 int64_t n,
                                                 const AddOptions *opts) {
  return guarded([&]() -> StatusOr<AddResult> {
    AddArgs args{seq, n, tokens, opts};
    ChainHashes chain;
    // Hash before taking the lock (pure), when the request is sane.
    if (poisoned_.load() < 0 && caching_ && tokens &&
        validateAddArgs(args).ok() && addCapacityExceeded(n).ok())
      computeChain(tokens, n, opts, &chain);
    return underLock([&]() -> StatusOr<AddResult> {
      AddResult result;
      if (Status st = addLocked(args, chain, &result); !st.ok())
        return st;
      return result;
    });
  });
}

Status Allocator::Impl::addSequences(const AddRequest *reqs, size_t count,
                                     std::vector<AddResult> *results) {
  return guarded([&]() -> Status {
    std::vector<ChainHashes> chains(count);
    if (poisoned_.load() < 0 && caching_ && reqs)
      for (size_t i = 0; i < count; ++i) {
        AddArgs args{reqs[i].seq, reqs[i].num_tokens, reqs[i].tokens,
                     reqs[i].opts};
        if (reqs[i].tokens && validateAddArgs(args).ok() &&
            addCapacityExceeded(reqs[i].num_tokens).ok())
          computeChain(reqs[i].tokens, reqs[i].num_tokens, reqs[i].opts,
                       &chains[i]);
      }
    return underLock([&]() -> Status {
      if (count > 0 && !reqs)
        return errors::invalidArgument("requests", 0, "null array");
      if (results) {
        results->clear();
        results->resize(count);
      }
      return runBatch(
          count, addBatchCannotFail(reqs, count),
          [&](size_t i) {
            AddArgs args{reqs[i].seq, reqs[i].num_tokens, reqs[i].tokens,
                         reqs[i].opts};
            return addLocked(args, chains[i],
                             results ? &(*results)[i] : nullptr);
          },
          [&] {
            if (results)
              results->clear();
          });
    });
  });
}

//===----------------------------------------------------------------------===//
// O2 append, O3 reserve
//===----------------------------------------------------------------------===//

Status Allocator::Impl::appendLocked(uint64_t seq, const int32_t *tokens,
                                     int64_t k, bool withTokens,
                                     AppendResult *out) {
  if (k < 0)
    return errors::invalidArgument("k", k, "must be >= 0");
  if (withTokens && k > 0 && !tokens)
    return errors::invalidArgument("tokens", 0,
                                   "null token pointer with k > 0");
  Sequence *s = nullptr;
  if (Status st = findActive(seq, "append", &s); !st.ok())
    return st;
  if (s->tokensKnown && !withTokens && k > 0)
    return errors::invalidArgument(
        "tokens", 0,
        "the sequence tracks token ids for prefix caching: pass the tokens");
  int64_t target = 0;
  if (Status st = checkGrowth(*s, k, "num_tokens", &target); !st.ok())
    return st;
  const int64_t n = s->n;
  if (out)
    out->clear();
  if (k == 0)
    return Status::OK();
  const bool cow = tailNeedsCow(*s);
  const int64_t len = int64_t(s->table.size());
  const int64_t grow = std::max<int64_t>(0, target - len);
  const int64_t needed = int64_t(cow) + grow;
  if (needed > 0) {
    const int64_t available = allocatable();
    if (needed > available)
      return outOfBlocks(needed, available, 0, /*admission=*/false);
  }

  // --- commit ---
  const size_t copyStart = pending_.size();
  saveSeq(*s);
  if (cow)
    copyOnWrite(*s, n >> bsShift_, int32_t(n & (bs_ - 1)), out);
  // The tokens land in the partial tail: this sequence fills that block
  // from now on, so its slots stay exposed once it is sealed. (An inherited
  // tail that became exclusive, its other holders gone, is written in place
  // without a copy; slotMapping used to refuse it once sealed.)
  if (n & (bs_ - 1))
    s->firstOwned = std::min<int64_t>(s->firstOwned, n >> bsShift_);
  if (grow) {
    allocateInto(s->table, grow, 0); // filled below, as tokens land
    if (out)
      out->new_block_ids.insert(out->new_block_ids.end(),
                                s->table.end() - ptrdiff_t(grow),
                                s->table.end());
    dev_.put(tableRefs_, tableRefs_ + grow);
  }
  if (len > target)
    releaseTail(*s, target);
  s->lookahead = 0;
  if (s->tokensKnown)
    s->tokens.insert(s->tokens.end(), tokens, tokens + k);
  const int64_t first = n >> bsShift_;
  const int64_t last = (n + k - 1) >> bsShift_;
  for (int64_t j = first; j <= last; ++j)
    dev_.raiseFilled(s->table[size_t(j)],
                     int32_t(std::min<int64_t>(bs_, n + k - (j << bsShift_))));
  if (s->tokensKnown)
    sealRange(*s, n >> bsShift_, (n + k) >> bsShift_);
  s->n = n + k;
  dev_.put(logicalTokens_, logicalTokens_ + k);
  if (out && pending_.size() > copyStart)
    out->copies.assign(pending_.begin() + ptrdiff_t(copyStart), pending_.end());
  return Status::OK();
}

Status Allocator::Impl::append(uint64_t seq, const int32_t *tokens, int64_t k,
                               bool withTokens, AppendResult *out) {
  return run([&] { return appendLocked(seq, tokens, k, withTokens, out); });
}

Status Allocator::Impl::appendBatch(const AppendRequest *reqs, size_t count,
                                    std::vector<AppendResult> *results) {
  return run([&]() -> Status {
    if (count > 0 && !reqs)
      return errors::invalidArgument("requests", 0, "null array");
    if (results)
      results->resize(count);
    return runBatch(
        count, appendBatchCannotFail(reqs, count),
        [&](size_t i) {
          return appendLocked(reqs[i].seq, reqs[i].tokens, reqs[i].num_tokens,
                              reqs[i].tokens != nullptr,
                              results ? &(*results)[i] : nullptr);
        },
        [&] {
          if (results)
            for (AppendResult &r : *results)
              r.clear();
        });
  });
}

Status Allocator::Impl::reserve(uint64_t seq, int64_t lookahead,
                                AppendResult *out) {
  return run([&]() -> Status {
    if (lookahead < 0)
      return errors::invalidArgument("lookahead", lookahead, "must be >= 0");
    Sequence *s = nullptr;
    if (Status st = findActive(seq, "reserve", &s); !st.ok())
      return st;
    int64_t target = 0;
    if (Status st =
            checkGrowth(*s, lookahead, "num_tokens + lookahead", &target);
        !st.ok())
      return st;
    const int64_t n = s->n;
    const bool cow = lookahead > 0 && tailNeedsCow(*s);
    const int64_t len = int64_t(s->table.size());
    const int64_t grow = std::max<int64_t>(0, target - len);
    const int64_t needed = int64_t(cow) + grow;
    if (needed > 0) {
      const int64_t available = allocatable();
      if (needed > available)
        return outOfBlocks(needed, available, 0, /*admission=*/false);
    }
    if (out)
      out->clear();
    const size_t copyStart = pending_.size();
    if (cow)
      copyOnWrite(*s, n >> bsShift_, int32_t(n & (bs_ - 1)), out);
    for (int64_t g = 0; g < grow; ++g) {
      const int32_t b = takeDeviceBlock();
      s->table.push_back(b);
      if (out)
        out->new_block_ids.push_back(b);
    }
    if (grow)
      dev_.put(tableRefs_, tableRefs_ + grow);
    if (len > target)
      releaseTail(*s, target);
    s->lookahead = lookahead;
    if (out && pending_.size() > copyStart)
      out->copies.assign(pending_.begin() + ptrdiff_t(copyStart),
                         pending_.end());
    return Status::OK();
  });
}

//===----------------------------------------------------------------------===//
// O4 fork, O5 truncate, O6 free
//===----------------------------------------------------------------------===//

Status Allocator::Impl::fork(uint64_t parent, uint64_t child, int64_t pos) {
  return run([&]() -> Status {
    if (pos < -1)
      return errors::invalidArgument("pos", pos,
                                     "must be in [-1, n of parent]");
    Sequence *p = nullptr;
    if (Status st = findActive(parent, "fork (as parent)", &p); !st.ok())
      return st;
    const int64_t at = pos == -1 ? p->n : pos;
    if (at > p->n)
      return errors::invalidArgument(
          "pos", pos,
          "must be in [-1, n of parent = " + std::to_string(p->n) + "]");
    if (findSeq(child))
      return errors::sequenceExists(child);
    const int64_t shared = blocksFor(at);
    if (p->lookahead > 0 && (p->n & (bs_ - 1)) != 0 &&
        shared > (p->n >> bsShift_))
      return errors::invalidSeqState(
          parent, "RESERVED",
          "the parent's reserved draft slots lie in the block the child "
          "would share; truncate or append first");

    Sequence &c = createSeq(child); // deque: `p` stays valid
    c.table.assign(p->table.begin(), p->table.begin() + ptrdiff_t(shared));
    for (int32_t b : c.table)
      addSeqRef(b);
    c.n = at;
    c.firstOwned = shared;
    c.tokensKnown = p->tokensKnown;
    c.root = p->root;
    if (p->tokensKnown)
      c.tokens.assign(p->tokens.begin(), p->tokens.begin() + ptrdiff_t(at));
    for (const BlockExtra &e : p->extras)
      if (e.block_index < shared)
        c.extras.push_back(e);
    dev_.put(logicalTokens_, logicalTokens_ + at);
    dev_.put(tableRefs_, tableRefs_ + shared);
    counter(counters_.forks);
    counter(counters_.sequences_added);
    return Status::OK();
  });
}

Status Allocator::Impl::truncate(uint64_t seq, int64_t newN) {
  return run([&]() -> Status {
    if (newN < 0)
      return errors::invalidArgument("new_n", newN, "must be in [0, n]");
    Sequence *s = nullptr;
    if (Status st = findActive(seq, "truncate", &s); !st.ok())
      return st;
    if (newN > s->n)
      return errors::invalidArgument(
          "new_n", newN, "must be in [0, n = " + std::to_string(s->n) + "]");
    const int64_t target = blocksFor(newN);
    releaseTail(*s, target);
    s->lookahead = 0;
    if (newN & (bs_ - 1)) {
      const int32_t t = s->table[size_t(newN >> bsShift_)];
      if (dev_.writable(t))
        dev_.setFilled(t, int32_t(newN & (bs_ - 1)));
    }
    if (s->tokensKnown)
      s->tokens.resize(size_t(newN));
    while (!s->extras.empty() && s->extras.back().block_index >= target)
      s->extras.pop_back();
    s->firstOwned = std::min<int64_t>(s->firstOwned, target);
    dev_.put(logicalTokens_, logicalTokens_ - (s->n - newN));
    s->n = newN;
    return Status::OK();
  });
}

Status Allocator::Impl::dropBlocks(uint64_t seq, int64_t first, int64_t count) {
  return run([&]() -> Status {
    Sequence *s = nullptr;
    if (Status st = findActive(seq, "dropBlocks", &s); !st.ok())
      return st;
    const int64_t full = s->n >> bsShift_;
    if (first < 0 || first > full)
      return errors::invalidArgument(
          "first", first,
          "must be in [0, full blocks = " + std::to_string(full) + "]");
    if (count < 0 || count > full - first)
      return errors::invalidArgument("count", count,
                                     "must be in [0, full blocks - first = " +
                                         std::to_string(full - first) + "]");
    if (count == 0)
      return Status::OK();
    releaseTail(*s, blocksFor(s->n)); // the reservation
    s->lookahead = 0;
    const auto at = s->table.begin() + ptrdiff_t(first);
    for (int64_t j = first + count; j > first; --j)
      releaseDevice(s->table[size_t(j - 1)]);
    s->table.erase(at, at + ptrdiff_t(count));
    dev_.put(tableRefs_, tableRefs_ - count);
    // Inherited entries past the gap move down with it.
    if (s->firstOwned > first)
      s->firstOwned = std::max(first, s->firstOwned - count);
    s->tokensKnown = false;
    s->tokens.clear();
    s->extras.clear();
    const int64_t dropped = count << bsShift_;
    dev_.put(logicalTokens_, logicalTokens_ - dropped);
    s->n -= dropped;
    return Status::OK();
  });
}

Status Allocator::Impl::freeLocked(uint64_t seq) {
  Sequence *s = findSeq(seq);
  if (!s)
    return errors::unknownSequence(seq);
  const bool swapped = s->state == SeqState::kSwapped;
  if (!swapped) {
    releaseRun(s->table.data(), s->table.size());
  } else {
    for (size_t j = s->table.size(); j > 0; --j) {
      if (s->hostTable[j - 1] != kNil)
        releaseHost(s->hostTable[j - 1]);
      else
        releaseDevice(s->table[j - 1]);
    }
  }
  dev_.put(tableRefs_, tableRefs_ - int64_t(s->table.size()));
  dev_.put(logicalTokens_, logicalTokens_ - s->n);
  if (swapped)
    dev_.put(numSwapped_, numSwapped_ - 1);
  counter(counters_.sequences_freed);
  eraseSeq(*s);
  return Status::OK();
}

Status Allocator::Impl::free(uint64_t seq) {
  return run([&] { return freeLocked(seq); });
}

Status Allocator::Impl::freeBatch(const uint64_t *seqs, size_t count) {
  return run([&]() -> Status {
    if (count > 0 && !seqs)
      return errors::invalidArgument("seqs", 0, "null array");
    return runBatch(
        count, freeBatchCannotFail(seqs, count),
        [&](size_t i) { return freeLocked(seqs[i]); }, [] {});
  });
}

//===----------------------------------------------------------------------===//
// O7 kernel views
//===----------------------------------------------------------------------===//

StatusOr<std::vector<int32_t>> Allocator::Impl::blockTable(uint64_t seq) {
  return run([&]() -> StatusOr<std::vector<int32_t>> {
    Sequence *s = nullptr;
    if (Status st = findActive(seq, "block_table", &s); !st.ok())
      return st;
    return s->table;
  });
}

Status Allocator::Impl::writeBlockTables(const uint64_t *seqs, size_t count,
                                         int32_t *out, int64_t stride,
                                         int32_t pad) {
  return run([&]() -> Status {
    if (count > 0 && !seqs)
      return errors::invalidArgument("seqs", 0, "null array");
    if (count > 0 && !out)
      return errors::invalidArgument("out", 0, "null output buffer");
    if (stride < 0)
      return errors::invalidArgument("stride", stride, "must be >= 0");
    int64_t longest = 0;
    for (size_t i = 0; i < count; ++i) {
      Sequence *s = nullptr;
      if (Status st = findActive(seqs[i], "block_table", &s); !st.ok()) {
        st.mutableInfo().batch_index = int64_t(i);
        return st;
      }
      longest = std::max<int64_t>(longest, int64_t(s->table.size()));
    }
    if (stride < longest)
      return errors::invalidArgument("stride", stride,
                                     "must be >= the longest table (" +
                                         std::to_string(longest) + ")");
    for (size_t i = 0; i < count; ++i) {
      const Sequence *s = findSeq(seqs[i]);
      int32_t *row = out + ptrdiff_t(i) * stride;
      const size_t len = s->table.size();
      if (len)
        std::memcpy(row, s->table.data(), len * sizeof(int32_t));
      std::fill(row + len, row + stride, pad);
    }
    return Status::OK();
  });
}

Status Allocator::Impl::slotMapping(uint64_t seq, int64_t start, int64_t count,
                                    int64_t *out) {
  return run([&]() -> Status {
    if (start < 0)
      return errors::invalidArgument("start", start, "must be >= 0");
    if (count < 0)
      return errors::invalidArgument("count", count, "must be >= 0");
    if (count > 0 && !out)
      return errors::invalidArgument("out", 0, "null output buffer");
    Sequence *s = nullptr;
    if (Status st = findActive(seq, "slot_mapping", &s); !st.ok())
      return st;
    const int64_t limit = s->n + s->lookahead;
    if (start > limit || count > limit - start)
      return errors::invalidArgument(
          "count", count,
          "positions [start, start + count) must lie in [0, n + lookahead = " +
              std::to_string(limit) + ")");
    // Only slots this sequence may write are exposed (I7): an exclusive
    // unsealed block, or a sealed block this sequence filled itself (its
    // prefill, even if a later request already hit it). Never a shared
    // partial block, a prefix-cache hit or a block inherited from a fork.
    for (int64_t p = start; p < start + count;
         p = ((p >> bsShift_) + 1) << bsShift_) {
      const int64_t j = p >> bsShift_;
      const int32_t b = s->table[size_t(j)];
      const bool ok =
          dev_.sealed(b) ? j >= s->firstOwned : dev_.seqRefs(b) == 1;
      if (!ok) {
        Status st = errors::invalidSeqState(
            seq, dev_.sealed(b) ? "INHERITED_BLOCK" : "SHARED_BLOCK",
            "position " + std::to_string(p) + " lies in block " +
                std::to_string(b) +
                " that this sequence may not write (a shared partial block, "
                "a prefix-cache hit or a block inherited by fork)");
        st.mutableInfo().value = p;
        return st;
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      const int64_t p = start + i;
      out[i] = int64_t(s->table[size_t(p >> bsShift_)]) * bs_ + (p & (bs_ - 1));
    }
    return Status::OK();
  });
}

//===----------------------------------------------------------------------===//
// O8 lookupPrefix, O9 queries
//===----------------------------------------------------------------------===//

StatusOr<int64_t> Allocator::Impl::lookupPrefix(const int32_t *tokens,
                                                int64_t n,
                                                const AddOptions &opts) {
  return guarded([&]() -> StatusOr<int64_t> {
    AddArgs args{0, n, tokens, &opts};
    ChainHashes chain;
    const bool sane = validateAddArgs(args).ok() && (n == 0 || tokens);
    if (poisoned_.load() < 0 && caching_ && sane && n <= config_.max_seq_len)
      computeChain(tokens, n, &opts, &chain);
    return underLock([&]() -> StatusOr<int64_t> {
      if (Status st = validateAddArgs(args); !st.ok())
        return st;
      if (n > 0 && !tokens)
        return errors::invalidArgument("tokens", 0, "null token pointer");
      if (n > config_.max_seq_len)
        return errors::capacityExceeded("max_seq_len", n, config_.max_seq_len,
                                        "num_tokens");
      counters_.lookups += 1;
      if (!caching_)
        return int64_t(0);
      HitPlan plan;
      lookupLocked(tokens, chain, hitCapBlocks(n, &opts), &plan);
      return plan.size() << bsShift_;
    });
  });
}

StatusOr<bool> Allocator::Impl::canAdd(int64_t n, const int32_t *tokens,
                                       const AddOptions &opts) {
  return guarded([&]() -> StatusOr<bool> {
    AddArgs args{0, n, tokens, &opts};
    ChainHashes chain;
    if (poisoned_.load() < 0 && caching_ && tokens &&
        validateAddArgs(args).ok() && addCapacityExceeded(n).ok())
      computeChain(tokens, n, &opts, &chain);
    return underLock([&]() -> StatusOr<bool> {
      if (Status st = validateAddArgs(args); !st.ok())
        return st;
      if (Status st = addCapacityExceeded(n); !st.ok())
        return st;
      HitPlan plan;
      if (caching_ && tokens)
        lookupLocked(tokens, chain, hitCapBlocks(n, &opts), &plan);
      const int64_t needed = blocksFor(n) - (plan.size() - plan.hostHits);
      return needed + config_.watermark_blocks <=
             allocatable(plan.cachedDeviceHits);
    });
  });
}

StatusOr<int64_t> Allocator::Impl::blocksNeeded(uint64_t seq, int64_t k) {
  // The same checks as appendLocked, in the same order (spec O9: the query
  // agrees exactly with the operation).
  return run([&]() -> StatusOr<int64_t> {
    if (k < 0)
      return errors::invalidArgument("k", k, "must be >= 0");
    Sequence *s = nullptr;
    if (Status st = findActive(seq, "append", &s); !st.ok())
      return st;
    int64_t target = 0;
    if (Status st = checkGrowth(*s, k, "num_tokens", &target); !st.ok())
      return st;
    if (k == 0)
      return int64_t(0);
    return int64_t(tailNeedsCow(*s)) +
           std::max<int64_t>(0, target - int64_t(s->table.size()));
  });
}

StatusOr<int64_t> Allocator::Impl::numFreeBlocks() {
  return run(
      [&]() -> StatusOr<int64_t> { return dev_.numFree + dev_.numCached; });
}

StatusOr<int64_t> Allocator::Impl::numEvictableBlocks() {
  return run([&]() -> StatusOr<int64_t> { return dev_.numCached; });
}

StatusOr<int64_t> Allocator::Impl::numAllocatableBlocks() {
  return run([&]() -> StatusOr<int64_t> { return allocatable(); });
}

//===----------------------------------------------------------------------===//
// O10 swap
//===----------------------------------------------------------------------===//

Status Allocator::Impl::swapOut(uint64_t seq) {
  return run([&]() -> Status {
    Sequence *s = findSeq(seq);
    if (!s)
      return errors::unknownSequence(seq);
    if (!hostTier_)
      return errors::invalidSeqState(seq, "NO_HOST_TIER",
                                     "swap_out needs num_host_blocks > 0");
    if (s->state == SeqState::kSwapped)
      return errors::invalidSeqState(seq, "SWAPPED",
                                     "the sequence is already swapped");
    const int64_t keep = blocksFor(s->n);
    int64_t exclusive = 0;
    for (int64_t j = 0; j < keep; ++j)
      exclusive += dev_.seqRefs(s->table[size_t(j)]) == 1;
    const int64_t hostAvailable = host_.numFree + host_.numCached;
    if (exclusive > hostAvailable)
      return errors::hostTierFull(exclusive, hostAvailable);

    // Reserved draft blocks hold no tokens: release them.
    releaseTail(*s, keep);
    s->lookahead = 0;
    s->hostTable.assign(size_t(keep), kNil);
    // Front to back: a host block and a D2H copy per exclusive block.
    for (int64_t j = 0; j < keep; ++j) {
      const int32_t b = s->table[size_t(j)];
      if (dev_.seqRefs(b) != 1)
        continue;
      const int32_t h = takeHostBlock(/*skipMarked=*/false);
      if (h == kNil)
        throw InternalError(10, "host tier ran out after the check passed");
      // A sealed block moves whole (it is immutable content, even when a
      // truncate left this sequence using only part of it).
      const int32_t valid =
          dev_.sealed(b)
              ? bs_
              : int32_t(std::min<int64_t>(bs_, s->n - (j << bsShift_)));
      emitCopy(Tier::kDevice, b, Tier::kHost, h, valid);
      host_.put(host_.meta[size_t(h)], uint16_t(BlockState::kActive));
      host_.setRef(h, 1);
      host_.put(host_.numActive, host_.numActive + 1);
      host_.setFilled(h, valid);
      if (dev_.sealed(b)) {
        // The hash moves with the content.
        host_.sealFrom(h, dev_, b);
        if (!dev_.unseal(b))
          throw InternalError(6, "sealed block missing from the index");
      }
      s->hostTable[size_t(j)] = h;
    }
    // Back to front: the device side lets go of the moved blocks.
    for (int64_t j = keep; j > 0; --j) {
      if (s->hostTable[size_t(j - 1)] == kNil)
        continue;
      const int32_t b = s->table[size_t(j - 1)];
      s->table[size_t(j - 1)] = kNil;
      releaseDevice(b);
    }
    s->state = SeqState::kSwapped;
    dev_.put(numSwapped_, numSwapped_ + 1);
    counter(counters_.swapped_out_blocks, exclusive);
    return Status::OK();
  });
}

Status Allocator::Impl::swapIn(uint64_t seq) {
  return run([&]() -> Status {
    Sequence *s = findSeq(seq);
    if (!s)
      return errors::unknownSequence(seq);
    if (!hostTier_)
      return errors::invalidSeqState(seq, "NO_HOST_TIER",
                                     "swap_in needs num_host_blocks > 0");
    if (s->state != SeqState::kSwapped)
      return errors::invalidSeqState(seq, "ACTIVE",
                                     "swap_in needs a SWAPPED sequence");
    int64_t needed = 0;
    for (int32_t h : s->hostTable)
      needed += h != kNil;
    const int64_t available = allocatable();
    if (needed + config_.watermark_blocks > available)
      return outOfBlocks(needed, available, 0, /*admission=*/true);
    const size_t len = s->table.size();
    for (size_t j = 0; j < len; ++j) {
      const int32_t h = s->hostTable[j];
      if (h == kNil)
        continue;
      const int32_t d = takeDeviceBlock();
      const int32_t valid = host_.filled(h);
      emitCopy(Tier::kHost, h, Tier::kDevice, d, valid);
      dev_.setFilled(d, valid);
      if (host_.sealed(h))
        dev_.sealFrom(d, host_, h);
      s->table[j] = d;
    }
    for (size_t j = len; j > 0; --j)
      if (s->hostTable[j - 1] != kNil)
        releaseHost(s->hostTable[j - 1]);
    s->hostTable.clear();
    s->state = SeqState::kActive;
    dev_.put(numSwapped_, numSwapped_ - 1);
    counter(counters_.swapped_in_blocks, needed);
    return Status::OK();
  });
}

//===----------------------------------------------------------------------===//
// O12 copies, O13 eviction
//===----------------------------------------------------------------------===//

Status Allocator::Impl::takePendingCopies(std::vector<BlockCopy> *out) {
  return run([&]() -> Status {
    if (!out)
      return errors::invalidArgument("out", 0, "null output vector");
    out->assign(pending_.begin(), pending_.end());
    if (async_)
      inflight_.insert(inflight_.end(), pending_.begin(), pending_.end());
    pending_.clear();
    ++epoch_;
    return Status::OK();
  });
}

StatusOr<int64_t> Allocator::Impl::complete(uint64_t epoch) {
  return run([&]() -> StatusOr<int64_t> {
    if (epoch >= epoch_)
      return errors::invalidArgument(
          "epoch", int64_t(epoch),
          "not taken yet (take_pending_copies has handed out epochs < " +
              std::to_string(epoch_) + ")");
    int64_t done = 0;
    while (!inflight_.empty() && inflight_.front().epoch <= epoch) {
      const BlockCopy c = inflight_.front();
      inflight_.pop_front();
      if (c.src_tier == Tier::kDevice)
        unpinDevice(c.src);
      if (c.dst_tier == Tier::kDevice)
        unpinDevice(c.dst);
      ++done;
    }
    return done;
  });
}

StatusOr<int64_t> Allocator::Impl::evict(int64_t k) {
  return run([&]() -> StatusOr<int64_t> {
    if (k < 0)
      return errors::invalidArgument("k", k, "must be >= 0");
    int64_t evicted = 0;
    while (evicted < k && dev_.cachedHead != kNil) {
      const int32_t b = dev_.cachedHead;
      dev_.unlink(b);
      dropVictimHash(b);
      if (dev_.pinCount(b) > 0) {
        // ASYNC offload pending: not allocatable until complete(epoch).
        dev_.put(dev_.meta[size_t(b)], uint16_t(BlockState::kEvicting));
        dev_.put(dev_.numEvicting, dev_.numEvicting + 1);
      } else {
        // Stays where it was: right after the FREE blocks.
        dev_.put(dev_.meta[size_t(b)], uint16_t(BlockState::kFree));
        dev_.pushFreeTail(b);
      }
      ++evicted;
    }
    return evicted;
  });
}

Status Allocator::Impl::resetPrefixCache() {
  return run([&]() -> Status {
    if (dev_.numActive > 0)
      return errors::invalidState(
          "ACTIVE", std::to_string(dev_.numActive) +
                        " device blocks are in use; free every sequence first");
    if (dev_.numEvicting > 0)
      return errors::invalidState(
          "EVICTING", std::to_string(dev_.numEvicting) +
                          " device blocks wait for complete(epoch)");
    if (host_.numActive > 0)
      return errors::invalidState("ACTIVE",
                                  std::to_string(host_.numActive) +
                                      " host blocks hold swapped sequences");
    dev_.resetToInitial();
    host_.resetToInitial();
    return Status::OK();
  });
}

//===----------------------------------------------------------------------===//
// Allocator forwarding
//===----------------------------------------------------------------------===//

StatusOr<AddResult> Allocator::addSequence(uint64_t seq, int64_t numTokens) {
  return impl_->addSequence(seq, nullptr, numTokens, nullptr);
}

StatusOr<AddResult> Allocator::addSequence(uint64_t seq, const int32_t *tokens,
                                           int64_t numTokens,
                                           const AddOptions &opts) {
  if (numTokens > 0 && !tokens) {
    // The token form needs tokens; report it like every argument error.
    return impl_->run([]() -> StatusOr<AddResult> {
      return errors::invalidArgument("tokens", 0,
                                     "null token pointer with num_tokens > 0");
    });
  }
  // A zero-length token sequence still tracks tokens (appends must carry
  // them): pass a non-null pointer.
  static const int32_t kNoTokens = 0;
  return impl_->addSequence(seq, tokens ? tokens : &kNoTokens, numTokens,
                            &opts);
}

Status Allocator::addSequences(const AddRequest *requests, size_t count,
                               std::vector<AddResult> *results) {
  return impl_->addSequences(requests, count, results);
}

Status Allocator::append(uint64_t seq, int64_t k, AppendResult *out) {
  return impl_->append(seq, nullptr, k, false, out);
}

Status Allocator::append(uint64_t seq, const int32_t *tokens, int64_t k,
                         AppendResult *out) {
  return impl_->append(seq, tokens, k, true, out);
}

Status Allocator::appendBatch(const AppendRequest *requests, size_t count,
                              std::vector<AppendResult> *results) {
  return impl_->appendBatch(requests, count, results);
}

Status Allocator::reserve(uint64_t seq, int64_t lookahead, AppendResult *out) {
  return impl_->reserve(seq, lookahead, out);
}

Status Allocator::fork(uint64_t parent, uint64_t child, int64_t pos) {
  return impl_->fork(parent, child, pos);
}

Status Allocator::truncate(uint64_t seq, int64_t newN) {
  return impl_->truncate(seq, newN);
}

Status Allocator::dropBlocks(uint64_t seq, int64_t first, int64_t count) {
  return impl_->dropBlocks(seq, first, count);
}

Status Allocator::free(uint64_t seq) { return impl_->free(seq); }

Status Allocator::freeBatch(const uint64_t *seqs, size_t count) {
  return impl_->freeBatch(seqs, count);
}

StatusOr<std::vector<int32_t>> Allocator::blockTable(uint64_t seq) const {
  return impl_->blockTable(seq);
}

Status Allocator::writeBlockTables(const uint64_t *seqs, size_t count,
                                   int32_t *out, int64_t stride,
                                   int32_t pad) const {
  return impl_->writeBlockTables(seqs, count, out, stride, pad);
}

Status Allocator::writeBlockTables(const uint64_t *seqs, size_t count,
                                   int32_t *out, int64_t stride) const {
  return impl_->writeBlockTables(seqs, count, out, stride, impl_->defaultPad_);
}

Status Allocator::slotMapping(uint64_t seq, int64_t start, int64_t count,
                              int64_t *out) const {
  return impl_->slotMapping(seq, start, count, out);
}

StatusOr<int64_t> Allocator::lookupPrefix(const int32_t *tokens,
                                          int64_t numTokens,
                                          const AddOptions &opts) {
  return impl_->lookupPrefix(tokens, numTokens, opts);
}

StatusOr<bool> Allocator::canAdd(int64_t numTokens, const int32_t *tokens,
                                 const AddOptions &opts) const {
  return impl_->canAdd(numTokens, tokens, opts);
}

StatusOr<int64_t> Allocator::blocksNeeded(uint64_t seq, int64_t k) const {
  return impl_->blocksNeeded(seq, k);
}

StatusOr<int64_t> Allocator::numFreeBlocks() const {
  return impl_->numFreeBlocks();
}

StatusOr<int64_t> Allocator::numEvictableBlocks() const {
  return impl_->numEvictableBlocks();
}

StatusOr<int64_t> Allocator::numAllocatableBlocks() const {
  return impl_->numAllocatableBlocks();
}

Status Allocator::swapOut(uint64_t seq) { return impl_->swapOut(seq); }
Status Allocator::swapIn(uint64_t seq) { return impl_->swapIn(seq); }

Status Allocator::takePendingCopies(std::vector<BlockCopy> *out) {
  return impl_->takePendingCopies(out);
}

StatusOr<int64_t> Allocator::complete(uint64_t epoch) {
  return impl_->complete(epoch);
}

StatusOr<int64_t> Allocator::evict(int64_t k) { return impl_->evict(k); }

Status Allocator::resetPrefixCache() { return impl_->resetPrefixCache(); }

StatusOr<Stats> Allocator::stats() const { return impl_->stats(); }

Status Allocator::checkInvariants() { return impl_->checkInvariants(); }

StatusOr<StateSnapshot> Allocator::snapshot() const {
  return impl_->snapshot();
}

StatusOr<SequenceInfo> Allocator::sequenceInfo(uint64_t seq) const {
  return impl_->sequenceInfo(seq);
}

double Allocator::metadataBytesPerDeviceBlock() const {
  return impl_->metadataBytesPerDeviceBlock();
}

bool Allocator::poisoned() const { return impl_->poisoned_.load() >= 0; }

} // namespace sits::runtime::kv
