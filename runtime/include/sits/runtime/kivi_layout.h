//===- kivi_layout.h - 4-/2-bit KV blocks with a full-precision tail ------===//
//
// The geometry of a KV pool quantized the KIVI way (Liu et al., 2024): keys
// per channel over the tokens of a block, values per token over groups of
// channels, both asymmetric (code * scale + min) in 4 or 2 bits, and the
// tokens of a block that is not full yet kept in f32 until it fills.
// Keys have outlier channels (a few channels far larger than the rest), so
// a scale per channel loses little where a scale per token loses the small
// channels; values have none, and their error is averaged by attention.
// One header so that the writer and the attention kernels (runtime core),
// the pool (kv::Memory) and the compiler agree on every byte.
//
// A block is `blockStride` bytes: its quantized part, then its tail.
//
// The quantized part (`blockBytes`, the block's memory once full), row-major
// [layers][2 (K, V)][kvHeads] slabs of `slabBytes`. A slab holds
// `blockSize` rows of `rowBytes` codes (element d of a row: 4 bits at byte
// d / 2, the low nibble for even d; 2 bits at byte d / 4, bits 2 * (d %
// 4)), then its parameters as IEEE f16:
//   K: scale[headDim], then min[headDim] (per channel, over the block),
//      or as V's with kKeysPerToken;
//   V: scale[blockSize][headDim / valueGroup], then min[...] (per token
//      and group of `valueGroup` channels).
// Both kinds reserve the larger of the two parameter sizes, so that every
// slab has one size; valueGroup is min(blockSize, headDim) (the largest
// divisor of headDim not above that), which makes the two equal whenever
// blockSize <= headDim and divides it.
//
// The tail, from `tailOffset` (blockBytes rounded up to a page): per layer
// a page-aligned run of `tailLayerBytes`, an int32 count of valid rows and
// int32 flags (the rest of a 64-byte header), then f32 [2][kvHeads]
// [blockSize][headDim]. It holds the rows of a block until its last
// position is written; the writer then quantizes the block and marks the
// tail retained, the attention of that layer and call reads the block's
// rows from it (a prefill attends over the K/V it computed, unquantized)
// and then gives the tail's pages back (they read as zeros: a count of
// 0). So a pool reserves address
// space for every block's tail but commits memory for the blocks being
// filled only (a few per sequence); its mapping must not use huge pages,
// which would commit tails with their neighbours.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KIVI_LAYOUT_H
#define SITS_RUNTIME_KIVI_LAYOUT_H

#include "sits/runtime/half.h"

#include <cstdint>

namespace sits::runtime::kivi {

/// Bytes before a tail's rows (its row count, padded for alignment).
constexpr int64_t kTailHeaderBytes = 64;
/// A tail run per block and layer is a whole number of these, so that its
/// pages can be given back alone.
constexpr int64_t kTailPageBytes = 4096;
/// Added to a layout's `bits` (as the kernels, the compiler's `kivi`
/// attribute and the manifest take it): keys are quantized per token and
/// channel group like values, instead of per channel over the block. The
/// plain per-token layout that KIVI's per-channel keys are measured
/// against; its slabs have the same size.
constexpr int64_t kKeysPerToken = 256;
/// The largest head size and block size a layout takes (kernels keep
/// per-thread scratch of a few rows of the head size).
constexpr int64_t kMaxHeadDim = 4096, kMaxBlockSize = 1024;

struct Layout {
  int64_t numLayers = 0, kvHeads = 0, blockSize = 0, headDim = 0, bits = 0;
  /// Keys laid out and quantized as values (kKeysPerToken).
  bool keysPerToken = false;
  /// Channels per (scale, min) pair of a V row.
  int64_t valueGroup = 0;
  /// One row's codes: headDim * bits / 8.
  int64_t rowBytes = 0;
  /// Where a slab's parameters start: blockSize * rowBytes.
  int64_t paramsOffset = 0;
  /// K's scales then mins: headDim f16 each; V's: blockSize * groups each.
  int64_t keyParams = 0, valueParams = 0;
  int64_t slabBytes = 0;
  /// Byte strides in the quantized part: a K/V kind's heads, a layer, and
  /// its size.
  int64_t kindStride = 0, layerStride = 0, blockBytes = 0;
  /// The tail: where it starts in a block, a layer's run, its size.
  int64_t tailOffset = 0, tailLayerBytes = 0, tailBlockBytes = 0;
  /// Bytes per block, quantized part and tail.
  int64_t blockStride = 0;

  int64_t valueGroups() const { return headDim / valueGroup; }

  /// Byte offset in the pool of the slab of (block, layer, kind 0 = K or
  /// 1 = V, kv head).
  int64_t slab(int64_t block, int64_t layer, int64_t kind, int64_t head) const {
    return block * blockStride + layer * layerStride + kind * kindStride +
           head * slabBytes;
  }
  /// Byte offset in the pool of (block, layer)'s tail header.
  int64_t tail(int64_t block, int64_t layer) const {
    return block * blockStride + tailOffset + layer * tailLayerBytes;
  }
  /// Float offset, from the header, of row `t` of (kind, head).
  int64_t tailRow(int64_t kind, int64_t head, int64_t t) const {
    return kTailHeaderBytes / 4 +
           ((kind * kvHeads + head) * blockSize + t) * headDim;
  }

  /// The layout of a pool of `bits` (4 or 2, plus kKeysPerToken for keys
  /// quantized per token) codes; false when the geometry is invalid (a
  /// count below 1, headDim * bits not whole bytes, headDim or blockSize
  /// above its maximum) or a size overflows int64.
  static bool make(int64_t numLayers, int64_t kvHeads, int64_t blockSize,
                   int64_t headDim, int64_t mode, Layout *out) {
    const bool keysPerToken = (mode & kKeysPerToken) != 0;
    const int64_t bits = mode & ~kKeysPerToken;
    if (numLayers < 1 || kvHeads < 1 || blockSize < 1 || headDim < 1 ||
        (bits != 4 && bits != 2) || headDim * bits % 8 != 0 ||
        headDim > kMaxHeadDim || blockSize > kMaxBlockSize)
      return false;
    Layout l;
    l.numLayers = numLayers;
    l.kvHeads = kvHeads;
    l.blockSize = blockSize;
    l.headDim = headDim;
    l.bits = bits;
    l.keysPerToken = keysPerToken;
    l.valueGroup = blockSize < headDim ? blockSize : headDim;
    while (headDim % l.valueGroup != 0)
      --l.valueGroup;
    l.rowBytes = headDim * bits / 8;
    l.paramsOffset = blockSize * l.rowBytes;
    l.valueParams = 4 * blockSize * l.valueGroups();
    l.keyParams = keysPerToken ? l.valueParams : 4 * headDim;
    l.slabBytes = l.paramsOffset +
                  (l.keyParams > l.valueParams ? l.keyParams : l.valueParams);
    int64_t tailRows;
    if (__builtin_mul_overflow(kvHeads, l.slabBytes, &l.kindStride) ||
        __builtin_mul_overflow(l.kindStride, 2, &l.layerStride) ||
        __builtin_mul_overflow(l.layerStride, numLayers, &l.blockBytes) ||
        __builtin_mul_overflow(2 * kvHeads, blockSize * headDim, &tailRows) ||
        __builtin_mul_overflow(tailRows, 4, &tailRows) ||
        __builtin_add_overflow(tailRows, kTailHeaderBytes + kTailPageBytes - 1,
                               &l.tailLayerBytes))
      return false;
    l.tailLayerBytes -= l.tailLayerBytes % kTailPageBytes;
    if (__builtin_mul_overflow(l.tailLayerBytes, numLayers,
                               &l.tailBlockBytes) ||
        __builtin_add_overflow(l.blockBytes, kTailPageBytes - 1, &l.tailOffset))
      return false;
    l.tailOffset -= l.tailOffset % kTailPageBytes;
    if (__builtin_add_overflow(l.tailOffset, l.tailBlockBytes, &l.blockStride))
      return false;
    *out = l;
    return true;
  }
};

} // namespace sits::runtime::kivi

#endif // SITS_RUNTIME_KIVI_LAYOUT_H
