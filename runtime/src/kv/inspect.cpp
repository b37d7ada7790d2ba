//===- inspect.cpp - stats, snapshot, checkInvariants (O14)
//----------------===//
#include "allocator_impl.h"
#include "errors.h"

#include <algorithm>
#include <sstream>

namespace sits::runtime::kv {

using detail::kNil;
using Sequence = detail::Sequence;

//===----------------------------------------------------------------------===//
// stats
//===----------------------------------------------------------------------===//

Stats Allocator::Impl::statsLocked() const {
  Stats s = counters_;
  s.total_blocks = config_.num_blocks;
  s.usable_blocks = geometry_.usable_blocks;
  s.free_blocks = dev_.numFree;
  s.cached_blocks = dev_.numCached;
  s.active_blocks = dev_.numActive;
  s.shared_blocks = dev_.numShared;
  s.evicting_blocks = dev_.numEvicting;
  s.host_total = config_.num_host_blocks;
  s.host_used = host_.numActive;
  s.host_cached = host_.numCached;
  s.num_sequences = numLive_;
  s.swapped_sequences = numSwapped_;
  const double usable = double(geometry_.usable_blocks);
  s.utilization = double(s.active_blocks) / usable;
  s.occupancy = double(s.active_blocks + s.cached_blocks) / usable;
  s.logical_tokens = logicalTokens_;
  s.physical_tokens = dev_.physicalTokens;
  s.internal_frag_waste_slots = s.active_blocks * bs_ - s.physical_tokens;
  s.waste_pct = s.active_blocks ? 100.0 * double(s.internal_frag_waste_slots) /
                                      double(s.active_blocks * bs_)
                                : 0.0;
  s.sharing_factor =
      s.active_blocks ? double(tableRefs_) / double(s.active_blocks) : 0.0;
  s.hit_rate = s.prefix_query_tokens
                   ? double(s.prefix_hit_tokens) / double(s.prefix_query_tokens)
                   : 0.0;
  return s;
}

StatusOr<Stats> Allocator::Impl::stats() {
  return run([&]() -> StatusOr<Stats> { return statsLocked(); });
}

StatusOr<SequenceInfo> Allocator::Impl::sequenceInfo(uint64_t seq) {
  return run([&]() -> StatusOr<SequenceInfo> {
    Sequence *s = findSeq(seq);
    if (!s)
      return errors::unknownSequence(seq);
    SequenceInfo info;
    info.id = s->id;
    info.state = s->state;
    info.num_tokens = s->n;
    info.lookahead = s->lookahead;
    info.num_blocks = int64_t(s->table.size());
    for (int32_t h : s->hostTable)
      info.num_host_blocks += h != kNil;
    info.tokens_known = s->tokensKnown;
    return info;
  });
}

double Allocator::Impl::metadataBytesPerDeviceBlock() const {
  return double(dev_.metadataBytes()) / double(config_.num_blocks);
}

//===----------------------------------------------------------------------===//
// snapshot
//===----------------------------------------------------------------------===//

namespace {

void snapshotTier(const detail::BlockPool &pool,
                  std::vector<StateSnapshot::Block> *blocks,
                  std::vector<int32_t> *order, std::vector<int32_t> *slots) {
  blocks->resize(size_t(pool.numBlocks));
  for (int32_t b = 0; b < pool.numBlocks; ++b) {
    StateSnapshot::Block &o = (*blocks)[size_t(b)];
    o.state = int32_t(pool.state(b));
    o.ref = pool.ref(b);
    o.pins = pool.pinCount(b);
    o.sealed = pool.sealed(b);
    o.filled = pool.filled(b);
    o.hash = pool.hash[size_t(b)];
  }
  order->clear();
  for (int32_t b = pool.freeHead;
       b != kNil && order->size() <= size_t(pool.numBlocks);
       b = pool.next[size_t(b)])
    order->push_back(b);
  for (int32_t b = pool.cachedHead;
       b != kNil && order->size() <= 2 * size_t(pool.numBlocks);
       b = pool.next[size_t(b)])
    order->push_back(b);
  slots->resize(pool.slots.size());
  for (size_t i = 0; i < pool.slots.size(); ++i)
    (*slots)[i] = pool.slots[i] == detail::BlockPool::kEmptySlot
                      ? kNil
                      : detail::BlockPool::slotBlock(pool.slots[i]);
}

} // namespace

StatusOr<StateSnapshot> Allocator::Impl::snapshot() {
  return run([&]() -> StatusOr<StateSnapshot> {
    StateSnapshot snap;
    snapshotTier(dev_, &snap.device, &snap.device_free_order,
                 &snap.device_index_slots);
    snapshotTier(host_, &snap.host, &snap.host_free_order,
                 &snap.host_index_slots);
    seqIndex_.forEach([&](uint64_t id, uint32_t slot) {
      const Sequence &s = seqSlots_[slot];
      StateSnapshot::Sequence o;
      o.id = id;
      o.state = int32_t(s.state);
      o.n = s.n;
      o.lookahead = s.lookahead;
      o.first_owned = s.firstOwned;
      o.tokens_known = s.tokensKnown;
      o.root = s.root;
      o.table = s.table;
      o.host_table = s.hostTable;
      o.tokens = s.tokens;
      for (const BlockExtra &e : s.extras) {
        o.extra_blocks.push_back(e.block_index);
        o.extra_data.push_back(e.data);
      }
      snap.sequences.push_back(std::move(o));
    });
    std::sort(snap.sequences.begin(), snap.sequences.end(),
              [](const StateSnapshot::Sequence &a,
                 const StateSnapshot::Sequence &b) { return a.id < b.id; });
    snap.pending_copies = pending_;
    snap.inflight_copies.assign(inflight_.begin(), inflight_.end());
    snap.epoch = epoch_;
    snap.stats = statsLocked();
    snap.stats.out_of_blocks_failures = 0;
    snap.stats.failed_calls = 0;
    snap.stats.lookups = 0;
    return snap;
  });
}

namespace {

bool statsEqual(const Stats &a, const Stats &b, std::string *field) {
#define SITS_KV_CMP(type, f)                                                   \
  if (a.f != b.f) {                                                            \
    *field = #f;                                                               \
    return false;                                                              \
  }
  SITS_KV_STATS_FIELDS(SITS_KV_CMP)
#undef SITS_KV_CMP
  return true;
}

template <typename T>
std::string firstMismatch(const char *name, const std::vector<T> &a,
                          const std::vector<T> &b) {
  if (a.size() != b.size())
    return std::string(name) + ": size " + std::to_string(a.size()) + " vs " +
           std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]))
      return std::string(name) + "[" + std::to_string(i) + "] differs";
  return {};
}

} // namespace

std::string StateSnapshot::diff(const StateSnapshot &o) const {
  std::string d;
  // Keeps the first difference, in field order.
  auto compare = [&](const char *name, const auto &mine, const auto &theirs) {
    if (d.empty())
      d = firstMismatch(name, mine, theirs);
  };
  compare("device", device, o.device);
  compare("host", host, o.host);
  compare("device_free_order", device_free_order, o.device_free_order);
  compare("host_free_order", host_free_order, o.host_free_order);
  compare("device_index_slots", device_index_slots, o.device_index_slots);
  compare("host_index_slots", host_index_slots, o.host_index_slots);
  compare("sequences", sequences, o.sequences);
  compare("pending_copies", pending_copies, o.pending_copies);
  compare("inflight_copies", inflight_copies, o.inflight_copies);
  if (!d.empty())
    return d;
  if (epoch != o.epoch)
    return "epoch differs";
  std::string field;
  if (!statsEqual(stats, o.stats, &field))
    return "stats." + field + " differs";
  return {};
}

//===----------------------------------------------------------------------===//
// checkInvariants
//===----------------------------------------------------------------------===//

namespace {

/// Checks I1–I4 and the index part of I6 for one tier. `expected` holds the
/// references the sequence tables (and pins) imply. Invariant numbers are
/// remapped to `tierInvariant` for the host tier (I10).
Status checkTier(const detail::BlockPool &p, const std::vector<int32_t> &expRef,
                 const std::vector<int32_t> &expPins, bool allowEvicting,
                 bool host) {
  auto bad = [&](int inv, const std::string &msg) {
    return errors::internal(host ? 10 : inv,
                            std::string(host ? "host tier: " : "") + msg);
  };
  const int32_t n = p.numBlocks;
  // I1: exactly one state per block.
  for (int32_t b = 0; b < n; ++b) {
    const BlockState st = p.state(b);
    const bool reservedSlot = b < p.firstUsable;
    const bool ok =
        reservedSlot ? st == BlockState::kReserved
                     : (st == BlockState::kFree || st == BlockState::kCached ||
                        st == BlockState::kActive ||
                        (st == BlockState::kEvicting && allowEvicting));
    if (!ok)
      return bad(1, "block " + std::to_string(b) + " has state " +
                        std::to_string(int(st)));
  }
  // I2: ref(b) = table entries naming b + pins.
  for (int32_t b = p.firstUsable; b < n; ++b) {
    const BlockState st = p.state(b);
    if (st != BlockState::kActive && st != BlockState::kEvicting)
      continue;
    const int32_t want = expRef[size_t(b)] + expPins[size_t(b)];
    if (p.ref(b) != want || p.pinCount(b) != expPins[size_t(b)])
      return bad(2, "block " + std::to_string(b) + " has ref " +
                        std::to_string(p.ref(b)) + " (pins " +
                        std::to_string(p.pinCount(b)) + "), tables say " +
                        std::to_string(expRef[size_t(b)]) + " (+ " +
                        std::to_string(expPins[size_t(b)]) + " pins)");
    if (st == BlockState::kActive && expRef[size_t(b)] == 0)
      return bad(2, "ACTIVE block " + std::to_string(b) +
                        " is held by no sequence");
    if (st == BlockState::kEvicting &&
        (expRef[size_t(b)] != 0 || expPins[size_t(b)] == 0))
      return bad(2, "EVICTING block " + std::to_string(b) +
                        " must be held by pending copies only");
  }
  // I3 / I9: the free list.
  std::vector<uint8_t> seen(size_t(n), 0);
  auto walk = [&](int32_t head, int32_t tail, int64_t count,
                  BlockState want) -> Status {
    int32_t prev = kNil;
    int64_t len = 0;
    for (int32_t b = head; b != kNil; b = p.next[size_t(b)]) {
      if (b < p.firstUsable || b >= n)
        return bad(3, "free list holds invalid id " + std::to_string(b));
      if (seen[size_t(b)])
        return bad(3, "free list holds block " + std::to_string(b) + " twice");
      seen[size_t(b)] = 1;
      if (p.state(b) != want)
        return bad(9, "block " + std::to_string(b) + " in state " +
                          blockStateName(p.state(b)) + " sits in the " +
                          blockStateName(want) + " part of the free list");
      if (p.link0[size_t(b)] != prev)
        return bad(3, "broken prev link at block " + std::to_string(b));
      if (expRef[size_t(b)] != 0 || expPins[size_t(b)] != 0)
        return bad(want == BlockState::kCached ? 8 : 3,
                   "block " + std::to_string(b) +
                       " is in the free list but referenced");
      prev = b;
      if (++len > n)
        return bad(3, "free list is cyclic");
    }
    if (prev != tail)
      return bad(3, "free list tail mismatch");
    if (len != count)
      return bad(3, "free list length " + std::to_string(len) + " != counter " +
                        std::to_string(count));
    return Status::OK();
  };
  if (Status st = walk(p.freeHead, p.freeTail, p.numFree, BlockState::kFree);
      !st.ok())
    return st;
  if (Status st =
          walk(p.cachedHead, p.cachedTail, p.numCached, BlockState::kCached);
      !st.ok())
    return st;
  for (int32_t b = p.firstUsable; b < n; ++b)
    if (p.listed(b) && !seen[size_t(b)])
      return bad(3, "block " + std::to_string(b) + " is " +
                        blockStateName(p.state(b)) +
                        " but not in the free list");
  // I4: counters.
  int64_t active = 0, evicting = 0, shared = 0, physical = 0;
  for (int32_t b = p.firstUsable; b < n; ++b) {
    if (p.state(b) == BlockState::kActive) {
      ++active;
      physical += p.filled(b);
      shared += p.seqRefs(b) > 1;
    } else if (p.state(b) == BlockState::kEvicting) {
      ++evicting;
    }
  }
  if (active != p.numActive || evicting != p.numEvicting ||
      shared != p.numShared || physical != p.physicalTokens)
    return bad(4, "counters (active " + std::to_string(p.numActive) +
                      ", evicting " + std::to_string(p.numEvicting) +
                      ", shared " + std::to_string(p.numShared) +
                      ", physical " + std::to_string(p.physicalTokens) +
                      ") disagree with a recount (" + std::to_string(active) +
                      ", " + std::to_string(evicting) + ", " +
                      std::to_string(shared) + ", " + std::to_string(physical) +
                      ")");
  if (p.numFree + p.numCached + active + evicting + p.firstUsable != n)
    return bad(4, "free + cached + active + evicting + reserved != total");
  // I6 (index part).
  std::vector<uint8_t> indexed(size_t(n), 0);
  int64_t entries = 0;
  for (size_t pos = 0; pos < p.slots.size(); ++pos) {
    if (p.slots[pos] == detail::BlockPool::kEmptySlot)
      continue;
    const int32_t b = detail::BlockPool::slotBlock(p.slots[pos]);
    ++entries;
    if (b < p.firstUsable || b >= n)
      return bad(6, "index holds invalid id " + std::to_string(b));
    if (indexed[size_t(b)])
      return bad(6, "index holds block " + std::to_string(b) + " twice");
    indexed[size_t(b)] = 1;
    const BlockState st = p.state(b);
    if (!p.sealed(b) ||
        (st != BlockState::kActive && st != BlockState::kCached))
      return bad(6, "index entry for block " + std::to_string(b) +
                        " that is not ACTIVE-sealed or CACHED");
    if (p.slots[pos] != detail::BlockPool::packSlot(b, p.hash[size_t(b)]))
      return bad(6, "index slot of block " + std::to_string(b) +
                        " does not carry its key");
    // Reachable: no hole between the home slot and this slot, and the
    // Robin Hood order (no entry on the way is closer to its home than
    // this one was at that slot), which lookups rely on to stop early.
    for (size_t q = p.home(p.hash[size_t(b)]), d = 0; q != pos;
         q = (q + 1) & p.mask, ++d)
      if (p.slots[q] == detail::BlockPool::kEmptySlot ||
          p.slotDistance(q, p.slots[q]) < d)
        return bad(6, "index entry of block " + std::to_string(b) +
                          " is unreachable from its home slot");
  }
  if (entries != p.indexSize)
    return bad(6, "index size counter mismatch");
  for (int32_t b = p.firstUsable; b < n; ++b) {
    if (p.sealed(b) && !indexed[size_t(b)])
      return bad(6, "sealed block " + std::to_string(b) + " is not indexed");
    if (p.state(b) == BlockState::kCached && !p.sealed(b))
      return bad(6, "CACHED block " + std::to_string(b) + " has no hash");
    if (p.sealed(b) && p.filled(b) != p.blockSize)
      return bad(6, "sealed block " + std::to_string(b) + " is not full");
  }
  return Status::OK();
}

} // namespace

Status Allocator::Impl::checkInvariantsLocked() {
  const int32_t nd = dev_.numBlocks;
  const int32_t nh = host_.numBlocks;
  std::vector<int32_t> expDev(size_t(nd), 0), expHost(size_t(nh), 0);
  std::vector<int32_t> pinsDev(size_t(nd), 0), pinsHost(size_t(nh), 0);
  Status tableProblem; // I5 / I10 problems found while counting references
  seqIndex_.forEach([&](uint64_t, uint32_t slot) {
    const Sequence &s = seqSlots_[slot];
    const bool swapped = s.state == SeqState::kSwapped;
    for (size_t j = 0; j < s.table.size(); ++j) {
      if (swapped && j < s.hostTable.size() && s.hostTable[j] != kNil) {
        const int32_t h = s.hostTable[j];
        if (h < 0 || h >= nh) {
          if (tableProblem.ok())
            tableProblem = errors::internal(10, "invalid host id in table");
          continue;
        }
        ++expHost[size_t(h)];
        continue;
      }
      const int32_t b = s.table[j];
      if (b < dev_.firstUsable || b >= nd) {
        if (tableProblem.ok())
          tableProblem = errors::internal(5, "seq " + std::to_string(s.id) +
                                                 " names invalid block " +
                                                 std::to_string(b));
        continue;
      }
      ++expDev[size_t(b)];
    }
  });
  if (async_) {
    auto count = [&](const BlockCopy &c) {
      if (c.src_tier == Tier::kDevice && c.src >= 0 && c.src < nd)
        ++pinsDev[size_t(c.src)];
      if (c.dst_tier == Tier::kDevice && c.dst >= 0 && c.dst < nd)
        ++pinsDev[size_t(c.dst)];
    };
    for (const BlockCopy &c : pending_)
      count(c);
    for (const BlockCopy &c : inflight_)
      count(c);
  }
  if (Status st = checkTier(dev_, expDev, pinsDev, async_, false); !st.ok())
    return st;

  // I5: tables.
  if (!tableProblem.ok() && tableProblem.info().invariant == 5)
    return tableProblem;
  std::vector<uint32_t> stamp(size_t(nd), 0);
  uint32_t round = 0;
  Status st;
  seqIndex_.forEach([&](uint64_t id, uint32_t slot) {
    if (!st.ok())
      return;
    const Sequence &s = seqSlots_[slot];
    const int64_t want = blocksFor(s.n + s.lookahead);
    if (int64_t(s.table.size()) != want) {
      st = errors::internal(
          5, "seq " + std::to_string(id) + " has " +
                 std::to_string(s.table.size()) +
                 " blocks, ceil((n + lookahead)/bs) = " + std::to_string(want));
      return;
    }
    if (s.tokensKnown && int64_t(s.tokens.size()) != s.n) {
      st = errors::internal(5,
                            "seq " + std::to_string(id) + " token count != n");
      return;
    }
    ++round;
    const bool swapped = s.state == SeqState::kSwapped;
    for (size_t j = 0; j < s.table.size(); ++j) {
      if (swapped && s.hostTable[j] != kNil)
        continue;
      const int32_t b = s.table[j];
      if (stamp[size_t(b)] == round) {
        st = errors::internal(5, "seq " + std::to_string(id) + " names block " +
                                     std::to_string(b) + " twice");
        return;
      }
      stamp[size_t(b)] = round;
    }
  });
  if (!st.ok())
    return st;

  // I6: the chain of every sequence with known tokens.
  seqIndex_.forEach([&](uint64_t id, uint32_t slot) {
    if (!st.ok())
      return;
    const Sequence &s = seqSlots_[slot];
    if (!s.tokensKnown || !caching_)
      return;
    Hash128 parent = s.root;
    const int64_t full = s.n >> bsShift_;
    for (int64_t j = 0; j < full; ++j) {
      const bool onHost =
          s.state == SeqState::kSwapped && s.hostTable[size_t(j)] != kNil;
      const detail::BlockPool &pool = onHost ? host_ : dev_;
      const int32_t b = onHost ? s.hostTable[size_t(j)] : s.table[size_t(j)];
      const Hash128 want = hasher_.block(
          parent, &s.tokens[size_t(j) << bsShift_], s.extraFor(j));
      if (!pool.sealed(b) || pool.hash[size_t(b)] != want) {
        st = errors::internal(6, "seq " + std::to_string(id) + " block " +
                                     std::to_string(j) +
                                     " is not sealed with its chain hash");
        return;
      }
      parent = want;
    }
  });
  if (!st.ok())
    return st;

  // I7: reserved draft slots are writable.
  seqIndex_.forEach([&](uint64_t id, uint32_t slot) {
    if (!st.ok())
      return;
    const Sequence &s = seqSlots_[slot];
    if (s.state != SeqState::kActive || s.lookahead == 0)
      return;
    for (int64_t j = s.n >> bsShift_; j <= (s.n + s.lookahead - 1) >> bsShift_;
         ++j)
      if (!dev_.writable(s.table[size_t(j)])) {
        st = errors::internal(7, "seq " + std::to_string(id) +
                                     " has reserved slots in a block it may "
                                     "not write");
        return;
      }
  });
  if (!st.ok())
    return st;

  // I10: host tier.
  if (!tableProblem.ok())
    return tableProblem;
  if (Status hs = checkTier(host_, expHost, pinsHost, false, true); !hs.ok())
    return hs;
  seqIndex_.forEach([&](uint64_t id, uint32_t slot) {
    if (!st.ok())
      return;
    const Sequence &s = seqSlots_[slot];
    if (s.state == SeqState::kActive) {
      if (!s.hostTable.empty())
        st = errors::internal(10, "ACTIVE seq " + std::to_string(id) +
                                      " has host blocks");
      return;
    }
    if (s.hostTable.size() != s.table.size()) {
      st = errors::internal(10, "SWAPPED seq " + std::to_string(id) +
                                    " has mismatched tables");
      return;
    }
    for (size_t j = 0; j < s.table.size(); ++j) {
      const bool onHost = s.hostTable[j] != kNil;
      const bool onDevice = s.table[j] != kNil;
      if (onHost == onDevice) {
        st = errors::internal(10, "SWAPPED seq " + std::to_string(id) +
                                      " entry " + std::to_string(j) +
                                      " must be on exactly one tier");
        return;
      }
      if (onHost && host_.ref(s.hostTable[j]) != 1) {
        st = errors::internal(10, "host block of SWAPPED seq " +
                                      std::to_string(id) + " is not exclusive");
        return;
      }
    }
  });
  return st;
}

Status Allocator::Impl::checkInvariants() {
  // A violation poisons the pool (so it is not counted as a failed call).
  return run([&]() -> Status {
    Status st = checkInvariantsLocked();
    return st.ok() ? st : poisonWith(st);
  });
}

} // namespace sits::runtime::kv
