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
#include <vector>

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
/// A layout's mode for widths chosen per (layer, kv head), 4 or 2 bits
/// each (kv_dtype "auto"): slabs keep their order, each its own width's
/// size. The widths table, one byte per (layer, head) in that order, is
/// the layout's input; in a pool it is the first bytes of the null block
/// 0 (which never holds K/V), where the kernels read it, so compiled code
/// passes this mode alone.
constexpr int64_t kMixedWidths = 512;

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
  /// kMixedWidths: the width of (layer, head) at [layer * kvHeads + head],
  /// and each slab's offset in a block at [(layer * 2 + kind) * kvHeads +
  /// head] (then bits, rowBytes, paramsOffset, slabBytes, kindStride and
  /// layerStride are 0: no one size). Empty for one width.
  std::vector<uint8_t> widths;
  std::vector<int64_t> slabOffsets;

  /// One slab's width and where its parts are.
  struct Slab {
    int64_t bits, rowBytes, paramsOffset;
  };

  int64_t valueGroups() const { return headDim / valueGroup; }
  bool mixed() const { return !widths.empty(); }

  /// The width, row size and parameters' offset of (layer, head)'s slabs.
  Slab slabShape(int64_t layer, int64_t head) const {
    if (widths.empty())
      return {bits, rowBytes, paramsOffset};
    const int64_t b = widths[size_t(layer * kvHeads + head)];
    return {b, headDim * b / 8, blockSize * (headDim * b / 8)};
  }

  /// Byte offset in the pool of the slab of (block, layer, kind 0 = K or
  /// 1 = V, kv head).
  int64_t slab(int64_t block, int64_t layer, int64_t kind, int64_t head) const {
    if (!widths.empty())
      return block * blockStride +
             slabOffsets[size_t((layer * 2 + kind) * kvHeads + head)];
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
  /// quantized per token) codes, or with mode kMixedWidths of the widths
  /// in `widths` ([numLayers][kvHeads], each 4 or 2); false when the
  /// geometry is invalid (a count below 1, headDim * bits not whole bytes,
  /// headDim or blockSize above its maximum, a width other than 4 or 2 or
  /// no table) or a size overflows int64.
  static bool make(int64_t numLayers, int64_t kvHeads, int64_t blockSize,
                   int64_t headDim, int64_t mode, Layout *out,
                   const uint8_t *widths = nullptr) {
    if (mode == kMixedWidths)
      return makeMixed(numLayers, kvHeads, blockSize, headDim, widths, out);
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

private:
  /// kMixedWidths: the 4-bit layout's tail and parameters, slabs of each
  /// head's own width, one after the other.
  static bool makeMixed(int64_t numLayers, int64_t kvHeads, int64_t blockSize,
                        int64_t headDim, const uint8_t *widths, Layout *out) {
    Layout l;
    int64_t heads;
    if (!widths || headDim % 4 != 0 ||
        !make(numLayers, kvHeads, blockSize, headDim, 4, &l) ||
        __builtin_mul_overflow(numLayers, kvHeads, &heads))
      return false;
    const int64_t params = l.slabBytes - l.paramsOffset;
    l.widths.assign(widths, widths + heads);
    l.slabOffsets.resize(size_t(2 * heads));
    int64_t at = 0;
    for (int64_t layer = 0; layer < numLayers; ++layer)
      for (int64_t kind = 0; kind < 2; ++kind)
        for (int64_t h = 0; h < kvHeads; ++h) {
          const int64_t b = l.widths[size_t(layer * kvHeads + h)];
          if (b != 4 && b != 2)
            return false;
          l.slabOffsets[size_t((layer * 2 + kind) * kvHeads + h)] = at;
          // At most the 4-bit layout's size, which did not overflow.
          at += blockSize * (headDim * b / 8) + params;
        }
    l.bits = l.rowBytes = l.paramsOffset = l.slabBytes = 0;
    l.kindStride = l.layerStride = 0;
    l.blockBytes = at;
    l.tailOffset = at + kTailPageBytes - 1;
    l.tailOffset -= l.tailOffset % kTailPageBytes;
    l.blockStride = l.tailOffset + l.tailBlockBytes;
    *out = std::move(l);
    return true;
  }
};

} // namespace sits::runtime::kivi

#endif // SITS_RUNTIME_KIVI_LAYOUT_H
