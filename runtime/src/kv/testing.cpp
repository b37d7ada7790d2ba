//===- testing.cpp - Test hooks
//--------------------------------------------===//
#include "sits/runtime/kv/testing.h"

#include "allocator_impl.h"
#include "errors.h"

namespace sits::runtime::kv {

namespace {

detail::BlockPool *poolFor(Allocator::Impl &impl, Tier tier) {
  return tier == Tier::kDevice ? &impl.dev_ : &impl.host_;
}

Status checkId(const detail::BlockPool &pool, int32_t block) {
  if (block < 0 || block >= pool.numBlocks)
    return errors::invalidArgument("block", block, "out of range");
  return Status::OK();
}

} // namespace

StatusOr<BlockInfo> AllocatorTestHooks::blockInfo(Allocator &a, Tier tier,
                                                  int32_t block) {
  Allocator::Impl &impl = *a.impl_;
  std::lock_guard<std::mutex> lock(impl.mu_);
  const detail::BlockPool &pool = *poolFor(impl, tier);
  if (Status st = checkId(pool, block); !st.ok())
    return st;
  BlockInfo info;
  info.state = pool.state(block);
  info.ref = pool.ref(block);
  info.pins = pool.pinCount(block);
  info.sealed = pool.sealed(block);
  info.filled = pool.filled(block);
  info.hash = pool.hash[size_t(block)];
  return info;
}

Status AllocatorTestHooks::unrefBlock(Allocator &a, Tier tier, int32_t block) {
  Allocator::Impl &impl = *a.impl_;
  std::lock_guard<std::mutex> lock(impl.mu_);
  if (impl.poisoned_.load() >= 0)
    return impl.poisonedStatus();
  const detail::BlockPool &pool = *poolFor(impl, tier);
  if (Status st = checkId(pool, block); !st.ok())
    return impl.fail(st);
  if (pool.ref(block) == 0)
    return impl.fail(errors::doubleFree(block));
  return impl.fail(errors::invalidArgument(
      "block", block,
      "is referenced by sequences; release it through free()/truncate()"));
}

Status AllocatorTestHooks::setBlockHash(Allocator &a, Tier tier, int32_t block,
                                        const Hash128 &hash) {
  Allocator::Impl &impl = *a.impl_;
  std::lock_guard<std::mutex> lock(impl.mu_);
  detail::BlockPool &pool = *poolFor(impl, tier);
  if (Status st = checkId(pool, block); !st.ok())
    return st;
  if (!pool.sealed(block))
    return errors::invalidArgument("block", block, "is not sealed");
  pool.indexErase(block);
  pool.hash[size_t(block)] = hash;
  pool.indexInsert(block);
  return Status::OK();
}

Status AllocatorTestHooks::evictBlock(Allocator &a, int32_t block) {
  Allocator::Impl &impl = *a.impl_;
  std::lock_guard<std::mutex> lock(impl.mu_);
  detail::BlockPool &pool = impl.dev_;
  if (Status st = checkId(pool, block); !st.ok())
    return st;
  if (pool.state(block) != BlockState::kCached)
    return errors::invalidArgument("block", block, "is not CACHED");
  pool.unlink(block);
  impl.dropVictimHash(block);
  pool.put(pool.meta[size_t(block)], uint16_t(BlockState::kFree));
  pool.pushFreeTail(block);
  return Status::OK();
}

Status AllocatorTestHooks::corruptRef(Allocator &a, Tier tier, int32_t block,
                                      int32_t ref) {
  Allocator::Impl &impl = *a.impl_;
  std::lock_guard<std::mutex> lock(impl.mu_);
  detail::BlockPool &pool = *poolFor(impl, tier);
  if (Status st = checkId(pool, block); !st.ok())
    return st;
  if (pool.listed(block))
    return errors::invalidArgument("block", block,
                                   "is in the free list (its ref word is a "
                                   "link)");
  pool.link0[size_t(block)] = ref;
  return Status::OK();
}

std::vector<Hash128> AllocatorTestHooks::chainHashes(Allocator &a,
                                                     const int32_t *tokens,
                                                     int64_t numTokens,
                                                     const AddOptions &opts) {
  detail::ChainHashes chain;
  a.impl_->computeChain(tokens, numTokens, &opts, &chain);
  return chain.h;
}

} // namespace sits::runtime::kv
