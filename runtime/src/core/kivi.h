//===- kivi.h - 4-/2-bit KV blocks: quantize, dequantize (internal) -------===//
//
// The arithmetic of the KIVI pool (sits/runtime/kivi_layout.h): the writer
// `sitsRuntimeKiviWrite` (kivi.cpp) quantizes a block when its last row is
// written, and the paged attention (paged_attention.cpp) dequantizes the
// rows of a chunk before its f32 kernels run on them.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_KIVI_H
#define SITS_RUNTIME_CORE_KIVI_H

#include "sits/runtime/export.h"
#include "sits/runtime/kivi_layout.h"

#include <cstdint>

/// Writes the new K/V rows of one layer: row (b, s, h) of `k` / `v` at
/// b * batchStride + s * tokenStride + h * headStride (floats) goes to
/// slot slots[b * slotStride + s] (block slot / blockSize, position slot %
/// blockSize; negative slots, the null block 0 and blocks past `numBlocks`
/// are skipped) in the pool of `numBlocks` KIVI blocks at `pool`. Rows land
/// in the block's f32 tail; when a block's last position is written, its
/// rows are quantized into the block and the tail is kept, marked
/// retained, so that the paged attention of the same layer and call reads
/// the rows it computed unquantized (as KIVI and vLLM's prefills attend
/// over the fresh K/V); that call then empties the tail (releaseTail; with
/// `flags` bit 0 set and the pool page-aligned, the tail's pages go back
/// to the OS). A block written again after a shorter
/// context (a truncated sequence) first takes back the rows before the new
/// one from its quantized slab. Rows of one sequence are written in order;
/// sequences may run on several threads. Invalid geometry writes nothing.
extern "C" SITS_RUNTIME_API void sitsRuntimeKiviWrite(
    int64_t batch, int64_t tokens, int64_t kvHeads, int64_t headDim,
    const float *k, const float *v, int64_t batchStride, int64_t tokenStride,
    int64_t headStride, const int64_t *slots, int64_t slotStride, uint8_t *pool,
    int64_t numBlocks, int64_t numLayers, int64_t layer, int64_t blockSize,
    int64_t bits, int64_t flags);

namespace sits::runtime::kivi {

/// Bit 0 of sitsRuntimeKiviWrite's flags: give a filled block's tail pages
/// back (the pool is an anonymous mapping without huge pages).
constexpr int64_t kReleaseTail = 1;

/// A tail's header: int32 rows held at byte 0, int32 flags at byte 4.
/// kTailRetained: the block is full and quantized, its rows kept for the
/// attention of the call that filled it; kTailReleasePages: releaseTail
/// gives the pages back.
constexpr int32_t kTailRetained = 1, kTailReleasePages = 2;

/// Whether (block, layer)'s tail holds the retained rows of a full block.
SITS_RUNTIME_API bool tailRetained(const Layout &l, const uint8_t *pool,
                                   int64_t block, int64_t layer);
/// Empties (block, layer)'s tail: its pages go back to the OS when its
/// writer asked for it (reading as zeros: no rows, no flags), else its
/// header is cleared.
SITS_RUNTIME_API void releaseTail(const Layout &l, uint8_t *pool, int64_t block,
                                  int64_t layer);

/// Rows [r0, r1) of the K slab of (block, layer, head) in `pool`,
/// dequantized into dst[(r - r0) * headDim + d] with `lanes`-wide vectors
/// (16: AVX-512, 8: AVX2 with FMA; the caller checks the CPU has them;
/// else portable). Every path gives the same bits (code * scale + min,
/// fused or not: the product of a code below 16 and an f16 scale is exact
/// in f32).
SITS_RUNTIME_API void dequantKeys(const Layout &l, const uint8_t *pool,
                                  int64_t block, int64_t layer, int64_t head,
                                  int64_t r0, int64_t r1, float *dst,
                                  int lanes);
/// Rows [r0, r1) of the V slab of (block, layer, head), likewise.
SITS_RUNTIME_API void dequantValues(const Layout &l, const uint8_t *pool,
                                    int64_t block, int64_t layer, int64_t head,
                                    int64_t r0, int64_t r1, float *dst,
                                    int lanes);
/// Quantizes (block, layer) from its full tail `rows` (f32, as
/// Layout::tailRow lays them out from the header) into the pool.
SITS_RUNTIME_API void quantizeLayer(const Layout &l, const float *rows,
                                    uint8_t *pool, int64_t block,
                                    int64_t layer);

} // namespace sits::runtime::kivi

#endif // SITS_RUNTIME_CORE_KIVI_H
