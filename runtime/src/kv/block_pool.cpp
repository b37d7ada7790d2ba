//===- block_pool.cpp - Per-tier block metadata
//----------------------------===//
#include "block_pool.h"

#include <algorithm>

namespace sits::runtime::kv::detail {

void BlockPool::init(Tier t, int32_t n, int32_t first, int32_t bs,
                     bool withPins, bool withVerify, UndoLog *log) {
  tier = t;
  numBlocks = n;
  firstUsable = first;
  blockSize = bs;
  verify = withVerify;
  log_ = log;
  link0.assign(size_t(n), 0);
  next.assign(size_t(n), kNil);
  meta.assign(size_t(n), 0);
  hash.assign(size_t(n), Hash128{});
  if (withPins)
    pins.assign(size_t(n), 0);
  if (withVerify) {
    vtokens.assign(size_t(n) * size_t(bs), 0);
    vparent.assign(size_t(n), Hash128{});
  }
  // Index capacity: a power of two >= 1.25 × blocks, so the load factor
  // stays <= 0.8 even with every block sealed.
  uint64_t cap = 16;
  const uint64_t want = uint64_t(n) + uint64_t(n) / 4 + 1;
  while (cap < want)
    cap <<= 1;
  slots.assign(size_t(cap), kEmptySlot);
  mask = cap - 1;
  resetToInitial();
}

void BlockPool::resetToInitial() {
  freeHead = freeTail = cachedHead = cachedTail = kNil;
  numFree = numCached = numActive = numEvicting = numShared = 0;
  physicalTokens = 0;
  std::fill(link0.begin(), link0.end(), 0);
  std::fill(next.begin(), next.end(), kNil);
  std::fill(hash.begin(), hash.end(), Hash128{});
  std::fill(pins.begin(), pins.end(), 0);
  std::fill(vtokens.begin(), vtokens.end(), 0);
  std::fill(vparent.begin(), vparent.end(), Hash128{});
  std::fill(slots.begin(), slots.end(), kEmptySlot);
  indexSize = 0;
  for (int32_t b = 0; b < numBlocks; ++b)
    meta[size_t(b)] =
        uint16_t(b < firstUsable ? BlockState::kReserved : BlockState::kFree);
  // Ascending ids: link every usable block in order.
  for (int32_t b = firstUsable; b < numBlocks; ++b) {
    link0[size_t(b)] = b == firstUsable ? kNil : b - 1;
    next[size_t(b)] = b + 1 < numBlocks ? b + 1 : kNil;
  }
  if (firstUsable < numBlocks) {
    freeHead = firstUsable;
    freeTail = numBlocks - 1;
    numFree = numBlocks - firstUsable;
  }
}

// The index is a Robin Hood table: along a probe path entries are ordered by
// home slot, so a lookup stops at the first entry closer to its home than
// the probe is to the key's (the key would have displaced it), and a
// deletion shifts back only the entries that are away from their home. Each
// entry's home comes from the key bits stored in its slot: no `hash[]` read.
// Entries of one key share a home and keep their insertion order (see
// indexInsert), so a lookup returns the oldest of duplicate blocks.

int32_t BlockPool::find(const Hash128 &key, const Hash128 &parent,
                        const int32_t *tokens) const {
  const uint32_t frag = uint32_t(key.lo);
  size_t pos = home(key);
  for (size_t dist = 0;; pos = (pos + 1) & mask, ++dist) {
    const uint64_t s = slots[pos];
    if (s == kEmptySlot || slotDistance(pos, s) < dist)
      return kNil;
    if (uint32_t(s >> 32) != frag)
      continue;
    const int32_t b = slotBlock(s);
    if (hash[size_t(b)] != key || marked(b))
      continue;
    if (verify) {
      if (vparent[size_t(b)] != parent)
        continue;
      if (std::memcmp(&vtokens[size_t(b) * size_t(blockSize)], tokens,
                      size_t(blockSize) * sizeof(int32_t)) != 0)
        continue;
    }
    return b;
  }
}

bool BlockPool::containsKey(const Hash128 &key) const {
  const uint32_t frag = uint32_t(key.lo);
  size_t pos = home(key);
  for (size_t dist = 0;; pos = (pos + 1) & mask, ++dist) {
    const uint64_t s = slots[pos];
    if (s == kEmptySlot || slotDistance(pos, s) < dist)
      return false;
    if (uint32_t(s >> 32) == frag && hash[size_t(slotBlock(s))] == key)
      return true;
  }
}

bool BlockPool::containsContentOf(const BlockPool &other, int32_t src) const {
  const Hash128 &key = other.hash[size_t(src)];
  if (!verify || !other.verify)
    return containsKey(key);
  const uint32_t frag = uint32_t(key.lo);
  size_t pos = home(key);
  for (size_t dist = 0;; pos = (pos + 1) & mask, ++dist) {
    const uint64_t s = slots[pos];
    if (s == kEmptySlot || slotDistance(pos, s) < dist)
      return false;
    if (uint32_t(s >> 32) != frag)
      continue;
    const int32_t b = slotBlock(s);
    if (hash[size_t(b)] == key &&
        vparent[size_t(b)] == other.vparent[size_t(src)] &&
        std::memcmp(&vtokens[size_t(b) * size_t(blockSize)],
                    &other.vtokens[size_t(src) * size_t(blockSize)],
                    size_t(blockSize) * sizeof(int32_t)) == 0)
      return true;
  }
}

void BlockPool::indexInsert(int32_t b) {
  if (log_->active())
    insertEntry<true>(b);
  else
    insertEntry<false>(b);
}

template <bool kLogged> void BlockPool::insertEntry(int32_t b) {
  // Locals, as in eraseEntry: stores into `slots` may alias `mask`.
  uint64_t *const table = slots.data();
  const uint64_t m = mask;
  auto store = [this](uint64_t &slot, uint64_t value) {
    if (kLogged)
      put(slot, value);
    else
      slot = value;
  };
  size_t pos = size_t(hash[size_t(b)].lo & m);
  // The entry's place: after every entry at least as far from its home as
  // the new one would be there (so after the older entries of its own home:
  // duplicates of one key keep their insertion order).
  for (size_t dist = 0;; pos = (pos + 1) & m, ++dist) {
    const uint64_t s = table[pos];
    if (s == kEmptySlot || ((pos - (s >> 32)) & m) < dist)
      break;
  }
  // Robin Hood displacement: the run from there to the next empty slot
  // moves one slot on (each entry one step further from its home, so the
  // order along the probe path holds).
  uint64_t carry = packSlot(b, hash[size_t(b)]);
  for (;; pos = (pos + 1) & m) {
    const uint64_t s = table[pos];
    store(table[pos], carry);
    if (s == kEmptySlot)
      break;
    carry = s;
  }
  if (kLogged)
    put(indexSize, indexSize + 1);
  else
    ++indexSize;
}

void BlockPool::seal(int32_t b, const Hash128 &key, const Hash128 &parent,
                     const int32_t *tokens) {
  put(hash[size_t(b)], key);
  setSealed(b, true);
  indexInsert(b);
  if (verify) {
    put(vparent[size_t(b)], parent);
    int32_t *dst = &vtokens[size_t(b) * size_t(blockSize)];
    if (log_->active())
      log_->record(dst, size_t(blockSize) * sizeof(int32_t));
    std::memcpy(dst, tokens, size_t(blockSize) * sizeof(int32_t));
  }
}

void BlockPool::sealFrom(int32_t b, const BlockPool &from, int32_t src) {
  const int32_t *tokens =
      from.verify ? &from.vtokens[size_t(src) * size_t(blockSize)] : nullptr;
  const Hash128 parent = from.verify ? from.vparent[size_t(src)] : Hash128{};
  put(hash[size_t(b)], from.hash[size_t(src)]);
  setSealed(b, true);
  indexInsert(b);
  if (verify && tokens) {
    put(vparent[size_t(b)], parent);
    int32_t *dst = &vtokens[size_t(b) * size_t(blockSize)];
    if (log_->active())
      log_->record(dst, size_t(blockSize) * sizeof(int32_t));
    std::memcpy(dst, tokens, size_t(blockSize) * sizeof(int32_t));
  }
}

bool BlockPool::unseal(int32_t b) {
  const bool ok = indexErase(b);
  setSealed(b, false);
  put(hash[size_t(b)], Hash128{});
  return ok;
}

size_t BlockPool::metadataBytes() const {
  return link0.size() * sizeof(int32_t) + next.size() * sizeof(int32_t) +
         meta.size() * sizeof(uint16_t) + hash.size() * sizeof(Hash128) +
         pins.size() * sizeof(int32_t) + vtokens.size() * sizeof(int32_t) +
         vparent.size() * sizeof(Hash128) + slots.size() * sizeof(uint64_t);
}

} // namespace sits::runtime::kv::detail
