//===- memory.cpp - The KV tensors and the copies on them
//------------------===//
#include "sits/runtime/kv/memory.h"

#include "sits/runtime/kivi_layout.h"

#include "errors.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define SITS_KV_HAVE_MMAP 1
#endif

namespace sits::runtime::kv {
namespace {

constexpr size_t kMinAlignment = 64;

/// Host memory: anonymous mappings rather than malloc, because a pool is
/// large and long-lived: the pages come zero-filled (the null block must read
/// as zeros, and zeroing gigabytes up front would touch every page), are
/// committed on first touch, and go back to the OS at once on destruction.
class HostBackend final : public MemoryBackend {
public:
  const char *name() const override { return "host"; }
  bool hostAccessible() const override { return true; }
  int32_t dlpackDeviceType() const override { return 1; } // kDLCPU
  size_t alignment() const override { return pageSize(); }

  StatusOr<void *> allocate(size_t bytes) override {
    if (bytes == 0)
      return errors::invalidArgument("bytes", 0, "must be > 0");
#ifdef SITS_KV_HAVE_MMAP
    StatusOr<void *> p = map(bytes, 0);
#ifdef MADV_HUGEPAGE
    // Kernels read blocks scattered over the whole pool: fewer TLB misses
    // with huge pages. Advisory only; failure changes nothing.
    if (p.ok() && bytes >= (size_t(2) << 20))
      (void)::madvise(*p, bytes, MADV_HUGEPAGE);
#endif
    return p;
#else
    void *p =
        ::operator new(bytes, std::align_val_t(kMinAlignment), std::nothrow);
    if (!p)
      return errors::outOfMemory(int64_t(bytes));
    std::memset(p, 0, bytes);
    return p;
#endif
  }

  StatusOr<void *> allocateSparse(size_t bytes) override {
#if defined(SITS_KV_HAVE_MMAP) && defined(MAP_NORESERVE)
    if (bytes == 0)
      return errors::invalidArgument("bytes", 0, "must be > 0");
    StatusOr<void *> p = map(bytes, MAP_NORESERVE);
#ifdef MADV_NOHUGEPAGE
    // A huge page would commit a filled block's tail with its neighbours.
    if (p.ok())
      (void)::madvise(*p, bytes, MADV_NOHUGEPAGE);
#endif
    return p;
#else
    return allocate(bytes);
#endif
  }

  void deallocate(void *ptr, size_t bytes) noexcept override {
    if (!ptr)
      return;
#ifdef SITS_KV_HAVE_MMAP
    (void)::munmap(ptr, bytes);
#else
    (void)bytes;
    ::operator delete(ptr, std::align_val_t(kMinAlignment));
#endif
  }

  Status copy(const CopyRegion *regions, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      const CopyRegion &r = regions[i];
      if (r.height == 1 || r.width == r.pitch) {
        std::memcpy(r.dst, r.src, size_t(r.width) * size_t(r.height));
        continue;
      }
      auto *dst = static_cast<char *>(r.dst);
      auto *src = static_cast<const char *>(r.src);
      for (int64_t row = 0; row < r.height; ++row)
        std::memcpy(dst + row * r.pitch, src + row * r.pitch, size_t(r.width));
    }
    return Status::OK();
  }

private:
#ifdef SITS_KV_HAVE_MMAP
  /// `bytes` of zero pages, private and anonymous, with `flags` added.
  static StatusOr<void *> map(size_t bytes, int flags) {
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      Status st = errors::outOfMemory(int64_t(bytes));
      st.mutableInfo().message +=
          std::string(" (mmap: ") + std::strerror(err) + ")";
      return st;
    }
    return p;
  }
#endif

  static size_t pageSize() {
#ifdef SITS_KV_HAVE_MMAP
    static const size_t page = [] {
      const long p = ::sysconf(_SC_PAGESIZE);
      return p >= long(kMinAlignment) ? size_t(p) : kMinAlignment;
    }();
    return page;
#else
    return kMinAlignment;
#endif
  }
};

Status badCopy(size_t index, const char *field, int64_t value,
               const std::string &detail) {
  Status st = errors::invalidArgument(
      field, value, "copy " + std::to_string(index) + ": " + detail);
  st.mutableInfo().batch_index = int64_t(index);
  return st;
}

bool validTier(Tier t) { return t == Tier::kDevice || t == Tier::kHost; }

CopyKind kindOf(Tier src, Tier dst) {
  if (src == Tier::kDevice)
    return dst == Tier::kDevice ? CopyKind::kDeviceToDevice
                                : CopyKind::kDeviceToHost;
  return dst == Tier::kDevice ? CopyKind::kHostToDevice : CopyKind::kHostToHost;
}

} // namespace

MemoryBackend::~MemoryBackend() = default;

std::shared_ptr<MemoryBackend> hostMemoryBackend() {
  // Never destroyed: pools may outlive static destruction order (Python).
  static auto *backend =
      new std::shared_ptr<MemoryBackend>(std::make_shared<HostBackend>());
  return *backend;
}

MemoryLayout MemoryLayout::of(const PoolConfig &c) {
  // Every stride divides bytes_per_block, which validatePoolConfig computed
  // without overflow, so none of these products can overflow.
  MemoryLayout l;
  l.num_layers = c.num_layers;
  l.kv_factor = c.kv_factor;
  l.num_kv_heads = c.num_kv_heads;
  l.block_size = c.block_size;
  l.head_dim = c.head_dim;
  if (isKiviLayout(c.quantization)) {
    // Byte strides of the quantized part; rows are a token's packed codes.
    // Mixed widths have no one row or slab size: those strides are 0.
    kivi::Layout k;
    (void)kivi::Layout::make(c.num_layers, c.num_kv_heads, c.block_size,
                             c.head_dim, kiviMode(c), &k, c.kivi_widths.data());
    l.elem_size = 1;
    l.token_stride = k.rowBytes;
    l.head_stride = k.slabBytes;
    l.kv_stride = k.kindStride;
    l.layer_stride = k.layerStride;
    l.block_stride = k.blockStride;
    return l;
  }
  l.elem_size = dtypeSize(c.dtype);
  l.scale_size = kvScaleSize(c.quantization);
  l.scale_offset = c.head_dim * l.elem_size;
  l.token_stride = l.scale_offset + l.scale_size;
  l.head_stride = c.block_size * l.token_stride;
  l.kv_stride = c.num_kv_heads * l.head_stride;
  l.layer_stride = c.kv_factor * l.kv_stride;
  l.block_stride = c.num_layers * l.layer_stride;
  return l;
}

StatusOr<std::unique_ptr<Memory>> Memory::create(const PoolConfig &config,
                                                 MemoryOptions options) {
  StatusOr<PoolGeometry> geometry = validatePoolConfig(config);
  if (!geometry.ok())
    return geometry.status();
  // validatePoolConfig keeps the totals within int64; they must also fit
  // size_t (32-bit hosts).
  constexpr uint64_t kMaxSize = std::numeric_limits<size_t>::max();
  if (uint64_t(geometry->total_bytes) > kMaxSize)
    return errors::invalidArgument("total_bytes", geometry->total_bytes,
                                   "exceeds the address space");
  if (uint64_t(geometry->host_total_bytes) > kMaxSize)
    return errors::invalidArgument("host_total_bytes",
                                   geometry->host_total_bytes,
                                   "exceeds the address space");
  try {
    std::unique_ptr<Memory> m(new Memory());
    m->config_ = config;
    m->geometry_ = *geometry;
    m->layout_ = MemoryLayout::of(config);
    m->device_.backend =
        options.device_backend ? options.device_backend : hostMemoryBackend();
    m->host_.backend =
        options.host_backend ? options.host_backend : hostMemoryBackend();
    struct Want {
      Pool *pool;
      int64_t blocks;
      int64_t bytes;
      const char *name;
    };
    const bool kivi = isKiviLayout(config.quantization);
    if (kivi)
      (void)kivi::Layout::make(config.num_layers, config.num_kv_heads,
                               config.block_size, config.head_dim,
                               kiviMode(config), &m->kivi_,
                               config.kivi_widths.data());
    const Want wants[] = {
        {&m->device_, config.num_blocks, geometry->total_bytes, "device_tier"},
        {&m->host_, config.num_host_blocks, geometry->host_total_bytes,
         "host_tier"}};
    for (const Want &w : wants) {
      MemoryBackend &backend = *w.pool->backend;
      if (backend.alignment() < kMinAlignment ||
          (backend.alignment() & (backend.alignment() - 1)) != 0)
        return errors::invalidArgument(
            std::string(w.name) + ".backend", int64_t(backend.alignment()),
            std::string("backend '") + backend.name() +
                "' must align to a power of two >= 64 bytes");
      w.pool->blocks = w.blocks;
      if (w.bytes == 0)
        continue;
      // KIVI: the writer kernel and apply() read and write the tails.
      if (kivi && !backend.hostAccessible())
        return errors::invalidArgument(
            std::string(w.name) + ".backend", 0,
            std::string("kivi pools need host-accessible memory; backend '") +
                backend.name() + "' is not");
      StatusOr<void *> p = kivi ? backend.allocateSparse(size_t(w.bytes))
                                : backend.allocate(size_t(w.bytes));
      if (!p.ok()) {
        // Whatever was allocated goes with `m`.
        Status st = p.status();
        if (st.code() == StatusCode::kOutOfMemory) {
          st.mutableInfo().subject = w.name;
          st.mutableInfo().value = w.bytes;
          st.mutableInfo().message += std::string(" for the ") + w.name + " (" +
                                      std::to_string(w.blocks) + " blocks × " +
                                      std::to_string(geometry->block_stride) +
                                      " bytes)";
        }
        return st;
      }
      w.pool->data = *p;
      w.pool->bytes = size_t(w.bytes);
      if (reinterpret_cast<uintptr_t>(*p) % backend.alignment() != 0)
        return Status(StatusCode::kInternal,
                      std::string("backend '") + backend.name() +
                          "' returned a misaligned " + w.name + " pool");
      // Widths per head: the kernels read them from the null block.
      if (!config.kivi_widths.empty())
        std::memcpy(*p, config.kivi_widths.data(), config.kivi_widths.size());
    }
    return StatusOr<std::unique_ptr<Memory>>(std::move(m));
  } catch (const std::bad_alloc &) {
    return errors::outOfMemory(int64_t(sizeof(Memory)));
  }
}

Memory::~Memory() {
  for (Pool *p : {&device_, &host_})
    if (p->data)
      p->backend->deallocate(p->data, p->bytes);
}

int64_t Memory::numBlocks(Tier tier) const {
  return validTier(tier) ? pool(tier).blocks : 0;
}

int64_t Memory::bytes(Tier tier) const {
  return validTier(tier) ? int64_t(pool(tier).bytes) : 0;
}

void *Memory::data(Tier tier) const {
  return validTier(tier) ? pool(tier).data : nullptr;
}

void *Memory::block(Tier tier, int64_t block) const {
  if (!validTier(tier) || block < 0 || block >= pool(tier).blocks)
    return nullptr;
  return static_cast<char *>(pool(tier).data) + block * layout_.block_stride;
}

void *Memory::blockLayer(Tier tier, int64_t block, int64_t layer) const {
  void *b = this->block(tier, block);
  if (!b || layer < 0 || layer >= layout_.num_layers)
    return nullptr;
  return static_cast<char *>(b) + layer * layout_.layer_stride;
}

MemoryBackend &Memory::backend(Tier tier) const { return *pool(tier).backend; }

Status Memory::apply(const BlockCopy *copies, size_t count) {
  if (count == 0)
    return Status::OK();
  if (!copies)
    return errors::invalidArgument("copies", int64_t(count),
                                   "null array for a non-empty list");
  const int64_t bs = config_.block_size;
  for (size_t i = 0; i < count; ++i) {
    const BlockCopy &c = copies[i];
    if (!validTier(c.src_tier))
      return badCopy(i, "src_tier", int64_t(c.src_tier),
                     "not a tier (device = 0, host = 1)");
    if (!validTier(c.dst_tier))
      return badCopy(i, "dst_tier", int64_t(c.dst_tier),
                     "not a tier (device = 0, host = 1)");
    const int64_t srcBlocks = pool(c.src_tier).blocks;
    const int64_t dstBlocks = pool(c.dst_tier).blocks;
    if (c.src < 0 || c.src >= srcBlocks)
      return badCopy(i, "src", c.src,
                     std::string("outside the ") + tierName(c.src_tier) +
                         " tier's " + std::to_string(srcBlocks) + " blocks");
    if (c.dst < 0 || c.dst >= dstBlocks)
      return badCopy(i, "dst", c.dst,
                     std::string("outside the ") + tierName(c.dst_tier) +
                         " tier's " + std::to_string(dstBlocks) + " blocks");
    // Kernels read the null block as padding: it stays zero.
    if (c.dst_tier == Tier::kDevice && c.dst == 0 && config_.reserve_null_block)
      return badCopy(i, "dst", c.dst, "the null block is never written");
    if (c.tokens < 0 || c.tokens > bs)
      return badCopy(i, "tokens", c.tokens,
                     "must be in [0, block_size = " + std::to_string(bs) + "]");
  }
  if (isKiviLayout(config_.quantization))
    return applyKivi(copies, count);
  try {
    std::vector<CopyRegion> regions;
    regions.reserve(count);
    const int64_t rows =
        layout_.num_layers * layout_.kv_factor * layout_.num_kv_heads;
    for (size_t i = 0; i < count; ++i) {
      const BlockCopy &c = copies[i];
      if (c.tokens == 0 || (c.src_tier == c.dst_tier && c.src == c.dst))
        continue;
      CopyRegion r;
      r.dst = block(c.dst_tier, c.dst);
      r.src = block(c.src_tier, c.src);
      r.kind = kindOf(c.src_tier, c.dst_tier);
      if (c.tokens == bs) { // the whole block: one contiguous span
        r.width = r.pitch = layout_.block_stride;
        r.height = 1;
      } else {
        // The valid prefix of every (layer, kv, head) tile, in whole rows:
        // a quantized row's scale moves with its codes.
        r.width = c.tokens * layout_.token_stride;
        r.pitch = layout_.head_stride;
        r.height = rows;
      }
      regions.push_back(r);
    }
    if (regions.empty())
      return Status::OK();
    return device_.backend->copy(regions.data(), regions.size());
  } catch (const std::bad_alloc &) {
    return errors::outOfMemory(int64_t(count * sizeof(CopyRegion)));
  }
}

Status Memory::applyKivi(const BlockCopy *copies, size_t count) {
  // One copy at a time, in list order: a copy reads its source's tail row
  // counts, which an earlier copy of the list may have written.
  const kivi::Layout &k = kivi_;
  const int64_t rowBytes = k.headDim * int64_t(sizeof(float));
  for (size_t i = 0; i < count; ++i) {
    const BlockCopy &c = copies[i];
    if (c.tokens == 0 || (c.src_tier == c.dst_tier && c.src == c.dst))
      continue;
    auto *dst = static_cast<char *>(block(c.dst_tier, c.dst));
    auto *src = static_cast<const char *>(block(c.src_tier, c.src));
    const CopyKind kind = kindOf(c.src_tier, c.dst_tier);
    // The quantized part (meaningful once the block is full), then per
    // layer the tail rows the source holds of the tokens copied.
    CopyRegion part{dst, src, k.blockBytes, 1, k.blockBytes, kind};
    if (Status st = device_.backend->copy(&part, 1); !st.ok())
      return st;
    for (int64_t layer = 0; layer < k.numLayers; ++layer) {
      const int64_t at = k.tailOffset + layer * k.tailLayerBytes;
      int32_t held, had;
      std::memcpy(&held, src + at, sizeof held);
      std::memcpy(&had, dst + at, sizeof had);
      const int32_t n =
          held > 0 ? int32_t(std::min<int64_t>(held, c.tokens)) : 0;
      if (n > 0) {
        CopyRegion rows{dst + at + kivi::kTailHeaderBytes,
                        src + at + kivi::kTailHeaderBytes,
                        n * rowBytes,
                        2 * k.kvHeads,
                        k.blockSize * rowBytes,
                        kind};
        if (Status st = device_.backend->copy(&rows, 1); !st.ok())
          return st;
      }
      // Written only when it changes: a given-back tail stays uncommitted.
      if (had != n)
        std::memcpy(dst + at, &n, sizeof n);
    }
  }
  return Status::OK();
}

} // namespace sits::runtime::kv
