//===- seq_index.h - Sequence id → slot map (internal)
//---------------------===//
//
// Open addressing with linear probing and backward-shift deletion; keys are
// arbitrary uint64 ids, values slot numbers (UINT32_MAX marks an empty
// slot). Grows at load 1/2. Only its logical content is observable, so batch
// rollback undoes it logically (erase what was inserted, re-insert what was
// erased).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_SRC_KV_SEQ_INDEX_H
#define SITS_RUNTIME_SRC_KV_SEQ_INDEX_H

#include <cstdint>
#include <vector>

namespace sits::runtime::kv::detail {

class SeqIndex {
public:
  static constexpr uint32_t kEmpty = UINT32_MAX;

  SeqIndex() { rehash(64); }

  uint32_t find(uint64_t key) const {
    for (size_t pos = home(key);; pos = (pos + 1) & mask_) {
      if (vals_[pos] == kEmpty)
        return kEmpty;
      if (keys_[pos] == key)
        return vals_[pos];
    }
  }

  /// Precondition: key absent.
  void insert(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 2 > vals_.size())
      rehash(vals_.size() * 2);
    place(key, value);
    ++size_;
  }

  bool erase(uint64_t key) {
    size_t pos = home(key);
    for (;; pos = (pos + 1) & mask_) {
      if (vals_[pos] == kEmpty)
        return false;
      if (keys_[pos] == key)
        break;
    }
    size_t hole = pos;
    for (size_t j = (pos + 1) & mask_; vals_[j] != kEmpty;
         j = (j + 1) & mask_) {
      const size_t k = home(keys_[j]);
      const bool homeBetween =
          hole <= j ? (k > hole && k <= j) : (k > hole || k <= j);
      if (!homeBetween) {
        keys_[hole] = keys_[j];
        vals_[hole] = vals_[j];
        hole = j;
      }
    }
    vals_[hole] = kEmpty;
    --size_;
    return true;
  }

  size_t size() const { return size_; }

  template <typename Fn> void forEach(Fn &&fn) const {
    for (size_t i = 0; i < vals_.size(); ++i)
      if (vals_[i] != kEmpty)
        fn(keys_[i], vals_[i]);
  }

private:
  static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }
  size_t home(uint64_t key) const { return size_t(mix(key) & mask_); }
  void place(uint64_t key, uint32_t value) {
    size_t pos = home(key);
    while (vals_[pos] != kEmpty)
      pos = (pos + 1) & mask_;
    keys_[pos] = key;
    vals_[pos] = value;
  }
  void rehash(size_t capacity) {
    std::vector<uint64_t> oldKeys = std::move(keys_);
    std::vector<uint32_t> oldVals = std::move(vals_);
    keys_.assign(capacity, 0);
    vals_.assign(capacity, kEmpty);
    mask_ = capacity - 1;
    for (size_t i = 0; i < oldVals.size(); ++i)
      if (oldVals[i] != kEmpty)
        place(oldKeys[i], oldVals[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

} // namespace sits::runtime::kv::detail

#endif // SITS_RUNTIME_SRC_KV_SEQ_INDEX_H
