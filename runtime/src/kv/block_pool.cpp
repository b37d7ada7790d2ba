//===- block_pool.cpp - Per-tier block metadata ----------------------------===//
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
    meta[size_t(b)] = uint16_t(b < firstUsable ? BlockState::kReserved
                                               : BlockState::kFree);
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

int32_t BlockPool::find(const Hash128 &key, const Hash128 &parent,
                        const int32_t *tokens) const {
  const uint32_t frag = uint32_t(key.lo);
  for (size_t pos = home(key);; pos = (pos + 1) & mask) {
    const uint64_t s = slots[pos];
    if (s == kEmptySlot)
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
  for (size_t pos = home(key);; pos = (pos + 1) & mask) {
    const uint64_t s = slots[pos];
    if (s == kEmptySlot)
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
  for (size_t pos = home(key);; pos = (pos + 1) & mask) {
    const uint64_t s = slots[pos];
    if (s == kEmptySlot)
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
  const Hash128 &key = hash[size_t(b)];
  size_t pos = home(key);
  while (slots[pos] != kEmptySlot)
    pos = (pos + 1) & mask;
  put(slots[pos], packSlot(b, key));
  put(indexSize, indexSize + 1);
}

bool BlockPool::indexErase(int32_t b) {
  size_t pos = home(hash[size_t(b)]);
  for (;; pos = (pos + 1) & mask) {
    if (slots[pos] == kEmptySlot)
      return false;
    if (slotBlock(slots[pos]) == b)
      break;
  }
  // Backward-shift deletion keeps every probe path free of holes; the home
  // of each later entry comes from its slot, so `hash` is not touched.
  size_t hole = pos;
  for (size_t j = (pos + 1) & mask; slots[j] != kEmptySlot;
       j = (j + 1) & mask) {
    const size_t k = slotHome(slots[j]);
    // Move slots[j] into the hole unless its home lies cyclically in
    // (hole, j].
    const bool homeBetween =
        hole <= j ? (k > hole && k <= j) : (k > hole || k <= j);
    if (!homeBetween) {
      put(slots[hole], slots[j]);
      hole = j;
    }
  }
  put(slots[hole], kEmptySlot);
  put(indexSize, indexSize - 1);
  return true;
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
