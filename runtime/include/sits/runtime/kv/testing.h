//===- testing.h - Test hooks of the KV allocator
//--------------------------===//
//
// Hooks that reach below the public API, for the tests the spec asks for:
// block-level unref (DoubleFree, T54), injecting a colliding hash (T39),
// evicting one chosen cached block (T43), corrupting a reference count to
// poison the pool (T65), and reading one block's state. They take the
// allocator's lock like every public call. Not for production use.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KV_TESTING_H
#define SITS_RUNTIME_KV_TESTING_H

#include "sits/runtime/kv/allocator.h"

namespace sits::runtime::kv {

struct BlockInfo {
  BlockState state = BlockState::kFree;
  int32_t ref = 0;
  int32_t pins = 0;
  bool sealed = false;
  int32_t filled = 0;
  Hash128 hash;
};

class AllocatorTestHooks {
public:
  static StatusOr<BlockInfo> blockInfo(Allocator &a, Tier tier, int32_t block);
  /// Block-level unref as a `free_blocks`-style API would do it: a block
  /// with reference count 0 gives `DoubleFree` and changes nothing. Only
  /// ref-0 blocks are accepted (anything else would break I2 on purpose);
  /// referenced blocks give InvalidArgument.
  static Status unrefBlock(Allocator &a, Tier tier, int32_t block);
  /// Re-keys a sealed block under `hash` (as if its content collided with
  /// another chain).
  static Status setBlockHash(Allocator &a, Tier tier, int32_t block,
                             const Hash128 &hash);
  /// Evicts one CACHED device block, wherever it is in the LRU order.
  static Status evictBlock(Allocator &a, int32_t block);
  /// Overwrites the reference count of an ACTIVE block (corruption).
  static Status corruptRef(Allocator &a, Tier tier, int32_t block, int32_t ref);
  /// The chain hashes of `tokens` as `addSequence` computes them.
  static std::vector<Hash128> chainHashes(Allocator &a, const int32_t *tokens,
                                          int64_t numTokens,
                                          const AddOptions &opts);
};

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_KV_TESTING_H
