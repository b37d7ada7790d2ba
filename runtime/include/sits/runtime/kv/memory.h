//===- memory.h - The KV tensors: pools of blocks and the copies on them
//---===//
//
// The allocator (allocator.h) manages block ids only; `Memory` owns the bytes
// those ids name: one pool per tier, `num_blocks × bytes_per_block` for the
// device tier and `num_host_blocks × bytes_per_block` for the host tier (the
// sizes of `validatePoolConfig`, overflow-checked), and it executes the
// allocator's copy lists (`Allocator::takePendingCopies`) on them, so the KV
// contents follow the blocks through copy-on-write, swap, offload and
// onboarding.
//
// Layout of one block (row-major, the TensorRT-LLM pool layout, "HND"):
//
//     [num_layers][kv_factor][num_kv_heads][block_size][row]
//
// where a row (one token of one head) is `head_dim` elements, and with
// `per_token_head` quantization (dtype int8 or fp8_e4m3) `head_dim`
// one-byte codes (int8, or FP8 E4M3FN floats) followed at once by the row's
// f32 scale (4 bytes, little-endian; element = value(code) × scale). A pool is
// `[blocks]` of those, so element (b, l, kv, h, t, d) lives at byte
// `b·block_stride + l·layer_stride + kv·kv_stride + h·head_stride +
// t·token_stride + d·elem_size` (`MemoryLayout::offset`) and its scale at
// `offset(b, l, kv, h, t) + scale_offset`. Why block-major: every copy the
// allocator emits moves whole blocks across all layers, so a full block is one
// contiguous span (one memcpy, one DMA on a device) rather than one per layer;
// a paged-attention kernel of layer l still sees a regular
// `[blocks][kv][heads][block_size][row]` tensor whose block stride is
// `bytes_per_block`. Why heads outside tokens: the kernel for one (sequence,
// head) streams that head's `block_size` rows of each block, one contiguous
// read. Why scales inside the rows: a row and its scale are written together
// and read together, and a partial copy (tokens < block_size) stays one strided
// copy: `layers × kv × heads` runs of `tokens × token_stride` bytes, scales
// included.
//
// Where the bytes live is a `MemoryBackend`'s business (allocation and
// copies). The built-in backend is host memory; with no GPU driver the
// device tier lives in host memory too. A GPU backend (device memory for the
// device tier, pinned memory for the host tier, copies on a stream) plugs in
// through `MemoryOptions` without changing the layout or the callers.
//
// Thread safety: `Memory` has no lock. `apply` writes blocks the allocator
// handed out, exactly like a kernel does; the runtime orders it with the
// kernels (spec O12: before the step's kernels in STREAM_ORDERED mode).
// Concurrent `apply` calls on disjoint blocks are safe.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KV_MEMORY_H
#define SITS_RUNTIME_KV_MEMORY_H

#include "sits/runtime/kivi_layout.h"
#include "sits/runtime/kv/allocator.h"
#include "sits/runtime/kv/config.h"
#include "sits/runtime/kv/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace sits::runtime::kv {

/// Byte strides of the block layout (see the file comment), all positive,
/// `block_stride == bytes_per_block`, and where a quantized row keeps its
/// scale.
struct MemoryLayout {
  int64_t num_layers = 0;
  int64_t kv_factor = 0;
  int64_t num_kv_heads = 0;
  int64_t block_size = 0;
  int64_t head_dim = 0;
  int64_t elem_size = 0;

  int64_t block_stride = 0;
  int64_t layer_stride = 0; ///< kv_factor × kv_stride
  int64_t kv_stride = 0;    ///< num_kv_heads × head_stride
  int64_t head_stride = 0;  ///< block_size × token_stride
  /// head_dim × elem_size + scale_size: one row, its scale included.
  int64_t token_stride = 0;
  /// Bytes of a row's scale: 4 (f32) with per_token_head quantization, else
  /// 0.
  int64_t scale_size = 0;
  /// Byte offset of the scale inside a row (head_dim × elem_size, right
  /// after the codes); meaningful when scale_size > 0.
  int64_t scale_offset = 0;

  /// Byte offset of token `token` of head `head`, K (kv 0) or V (kv 1), of
  /// layer `layer` in block `block`: the row's first element (its scale, if
  /// any, is `scale_offset` further). No range checks (a kernel's address).
  int64_t offset(int64_t block, int64_t layer, int64_t kv, int64_t head,
                 int64_t token) const {
    return block * block_stride + layer * layer_stride + kv * kv_stride +
           head * head_stride + token * token_stride;
  }

  /// The layout of a valid config (`validatePoolConfig` first).
  static MemoryLayout of(const PoolConfig &config);
};

/// Direction of one copy, for backends whose tiers are different memories.
enum class CopyKind : int32_t {
  kDeviceToDevice = 0,
  kDeviceToHost = 1,
  kHostToDevice = 2,
  kHostToHost = 3,
};

/// One strided copy: `height` rows of `width` bytes, row starts `pitch`
/// bytes apart on both sides (a cudaMemcpy2D). A contiguous copy has
/// `height == 1` (or `width == pitch`).
struct CopyRegion {
  void *dst = nullptr;
  const void *src = nullptr;
  int64_t width = 0;
  int64_t height = 0;
  int64_t pitch = 0;
  CopyKind kind = CopyKind::kDeviceToDevice;
};

/// Where a tier's bytes live. Implementations must be thread-safe.
class MemoryBackend {
public:
  virtual ~MemoryBackend();
  /// "host", "cuda", ...
  virtual const char *name() const = 0;
  /// True when the CPU may read and write the memory (NumPy views).
  virtual bool hostAccessible() const = 0;
  /// The DLPack device of the memory (kDLCPU = 1, kDLCUDA = 2, ...).
  virtual int32_t dlpackDeviceType() const = 0;
  virtual int32_t deviceId() const { return 0; }
  /// Alignment of every pointer `allocate` returns (>= 64).
  virtual size_t alignment() const = 0;
  /// `bytes` (> 0) of zero-filled memory, or OutOfMemory carrying `bytes`
  /// (`ErrorInfo::value`). Never throws.
  virtual StatusOr<void *> allocate(size_t bytes) = 0;
  /// As allocate, for a pool of which only some pages are ever in use
  /// (KIVI pools: a block's tail holds rows only while the block is being
  /// filled, then its pages are given back): address space without a
  /// commitment up front and without huge pages. Default: allocate.
  virtual StatusOr<void *> allocateSparse(size_t bytes) {
    return allocate(bytes);
  }
  virtual void deallocate(void *ptr, size_t bytes) noexcept = 0;
  /// Runs `regions` in order. A backend with streams may return once they
  /// are enqueued in order on the stream the kernels run on.
  virtual Status copy(const CopyRegion *regions, size_t count) = 0;
};

/// The host-memory backend (a process-wide instance): page-aligned,
/// zero-filled anonymous mappings (committed on first touch; transparent
/// huge pages requested for pools of 2 MiB and more; sparse ones without
/// swap reservation or huge pages), copies by memcpy.
std::shared_ptr<MemoryBackend> hostMemoryBackend();

struct MemoryOptions {
  /// The device tier's memory; null: host memory (today's only backend:
  /// without a GPU driver the device tier lives in host memory). This
  /// backend also executes every copy, both tiers' included.
  std::shared_ptr<MemoryBackend> device_backend;
  /// The host tier's memory; null: host memory. A GPU backend would pass
  /// pinned memory here.
  std::shared_ptr<MemoryBackend> host_backend;
};

/// The KV tensors of one pool. Create with `Memory::create`; not copyable
/// or movable (share it through the owning pointer).
class Memory {
public:
  /// Validates `config` (`validatePoolConfig`) and allocates both tiers,
  /// zero-filled. Errors: InvalidArgument naming the field (a bad config or
  /// an overflowing size), OutOfMemory carrying the bytes requested
  /// (`subject` "device_tier" or "host_tier"). A failed create leaves
  /// nothing allocated.
  static StatusOr<std::unique_ptr<Memory>>
  create(const PoolConfig &config, MemoryOptions options = MemoryOptions());

  ~Memory();
  Memory(const Memory &) = delete;
  Memory &operator=(const Memory &) = delete;

  const PoolConfig &config() const { return config_; }
  const PoolGeometry &geometry() const { return geometry_; }
  const MemoryLayout &layout() const { return layout_; }

  /// Blocks of the tier: num_blocks (device, the null block included) or
  /// num_host_blocks.
  int64_t numBlocks(Tier tier) const;
  /// numBlocks(tier) × bytes_per_block.
  int64_t bytes(Tier tier) const;
  /// Base of the tier's pool (aligned to its backend's alignment); null for
  /// an empty tier (no host tier).
  void *data(Tier tier) const;
  /// Start of block `block` of the tier, or null when out of range.
  void *block(Tier tier, int64_t block) const;
  /// Start of layer `layer` of block `block` (its [kv][heads][tokens]
  /// [row]), or null when either is out of range.
  void *blockLayer(Tier tier, int64_t block, int64_t layer) const;
  MemoryBackend &backend(Tier tier) const;

  /// Executes `copies` in order (the order `takePendingCopies` lists them
  /// in): for each, the first `tokens` token slots (rows, scales included)
  /// of every (layer, kv, head) of block `dst` become those of block `src`;
  /// the other slots of `dst` are left as they were. Every copy is validated
  /// first (tier, ids in range, `tokens` in [0, block_size], never into the
  /// null block): InvalidArgument (`batch_index` the copy's index) copies
  /// nothing. Copies with no tokens or with src == dst on one tier do nothing.
  Status apply(const BlockCopy *copies, size_t count);
  Status apply(const std::vector<BlockCopy> &copies) {
    return apply(copies.data(), copies.size());
  }

private:
  struct Pool {
    std::shared_ptr<MemoryBackend> backend;
    void *data = nullptr;
    int64_t blocks = 0;
    size_t bytes = 0;
  };
  Memory() = default;
  const Pool &pool(Tier tier) const {
    return tier == Tier::kHost ? host_ : device_;
  }

  /// KIVI pools: their tails follow a partial block through its copies.
  Status applyKivi(const BlockCopy *copies, size_t count);

  PoolConfig config_;
  PoolGeometry geometry_;
  MemoryLayout layout_;
  /// kivi quantization only.
  kivi::Layout kivi_;
  Pool device_;
  Pool host_;
};

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_KV_MEMORY_H
