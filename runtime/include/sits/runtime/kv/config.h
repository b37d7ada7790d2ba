//===- config.h - KV pool configuration and its validation
//-----------------===//
//
// `PoolConfig` is the input of `Allocator::create` (spec §4.2).
// `validatePoolConfig` applies every creation rule and computes the derived
// sizes with overflow checks; the allocator calls it, and the runtime may call
// it to size the KV tensors before creating an allocator.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KV_CONFIG_H
#define SITS_RUNTIME_KV_CONFIG_H

#include "sits/runtime/kv/hash.h"
#include "sits/runtime/kv/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sits::runtime::kv {

/// Element type of the KV tensors.
enum class DType : int32_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kFP8E4M3 = 3,
  kFP8E5M2 = 4,
  kInt8 = 5,
  /// 4- and 2-bit codes: KIVI blocks only (quantization kivi).
  kInt4 = 6,
  kInt2 = 7,
};

/// "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4", "int2".
const char *dtypeName(DType dtype);
/// Size of one element in bytes; 0 for the sub-byte codes (int4, int2) and
/// for a value outside the enum.
int64_t dtypeSize(DType dtype);
/// Bits of one element (4 and 2 for int4 and int2), 0 outside the enum.
int64_t dtypeBits(DType dtype);
/// Parses a dtype name; the error lists the supported set.
StatusOr<DType> parseDType(std::string_view name);
/// "f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8, int4, int2".
const char *supportedDTypes();

/// How the KV elements are quantized (spec §geometry's "scale blocks for
/// quantized dtypes"; see "Memory" in runtime/src/kv/README.md).
enum class KVQuantization : int32_t {
  /// Elements are stored as `dtype` values.
  kNone = 0,
  /// Each (block, layer, kv, head, token) row is `head_dim` one-byte codes
  /// followed by one little-endian f32 scale: element = value(code) ×
  /// scale, the code an int8 (dtype int8) or an OCP FP8 E4M3FN float (dtype
  /// fp8_e4m3: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits, no
  /// infinities, max finite 448). Valid only with dtype int8 or fp8_e4m3.
  kPerTokenHead = 1,
  /// KIVI blocks of int4 or int2 codes (sits/runtime/kivi_layout.h): keys
  /// per channel over the block, values per token and channel group, and
  /// the rows of a block being filled in an f32 tail inside the block.
  /// Valid only with dtype int4 or int2 and kv_factor 2.
  kKivi = 2,
  /// As kKivi but keys too are quantized per token and channel group (the
  /// plain per-token 4-/2-bit layout KIVI's per-channel keys are measured
  /// against). Valid only with dtype int4 or int2 and kv_factor 2.
  kPerTokenGroup = 3,
};

/// Whether `quantization` stores the blocks of sits/runtime/kivi_layout.h
/// (kivi, per_token_group).
inline bool isKiviLayout(KVQuantization quantization) {
  return quantization == KVQuantization::kKivi ||
         quantization == KVQuantization::kPerTokenGroup;
}

/// "none" / "per_token_head" / "kivi" / "per_token_group".
const char *kvQuantizationName(KVQuantization quantization);
/// Parses a quantization name; the error lists the supported set.
StatusOr<KVQuantization> parseKVQuantization(std::string_view name);
/// "none, per_token_head, kivi, per_token_group".
const char *supportedKVQuantizations();
/// Bytes of the scale stored after each row's codes: 4 (f32) with
/// kPerTokenHead, 0 without quantization (or for a value outside the enum).
int64_t kvScaleSize(KVQuantization quantization);

/// How the runtime executes the copies the allocator emits (spec O12).
enum class CopyOrdering : int32_t {
  /// Each epoch's copies run on the compute stream before that step's
  /// kernels: a copy source may be handed out again at once.
  kStreamOrdered = 0,
  /// Copies run asynchronously (on one copy stream, in list order): device
  /// blocks named by a copy stay pinned until `complete(epoch)`; a source
  /// whose last holder is gone is EVICTING meanwhile.
  kAsync = 1,
};

/// "stream_ordered" / "async".
const char *copyOrderingName(CopyOrdering ordering);
/// Parses a copy-ordering name; the error lists the supported set.
StatusOr<CopyOrdering> parseCopyOrdering(std::string_view name);
/// Parses a hash algorithm name: "sha256" or "xxh3_128"; "murmur3_128" is a
/// deprecated alias of "xxh3_128" (the fast option used MurmurHash3 before;
/// hashes are never persisted, so only the name survives). The error lists
/// the canonical names.
StatusOr<HashAlgo> parseHashAlgo(std::string_view name);

/// The default 16-byte hash seed (deployments SHOULD set their own).
inline constexpr const char *kDefaultHashSeed = "sits-kv-seed-v1!";

/// Creation parameters (spec §4.2). Field names match the spec so the
/// bindings can expose them unchanged.
struct PoolConfig {
  int64_t num_blocks = 0;
  /// Tokens per block: a power of two in [1, 256].
  int64_t block_size = 16;
  int64_t num_layers = 1;
  int64_t num_kv_heads = 1;
  int64_t head_dim = 128;
  DType dtype = DType::kF16;
  /// 2 (K and V) or 1 (MLA).
  int64_t kv_factor = 2;
  int64_t max_seq_len = 131072;
  bool enable_prefix_caching = true;
  /// Block 0 is never handed out and pads kernel block tables.
  bool reserve_null_block = true;
  /// 0: no host tier.
  int64_t num_host_blocks = 0;
  /// Admission (`addSequence`, `swapIn`) must leave this many blocks free.
  int64_t watermark_blocks = 0;
  HashAlgo hash_algo = HashAlgo::kSha256;
  /// At least 16 bytes; part of every chain root.
  std::string hash_seed = kDefaultHashSeed;
  /// Verify every prefix hit against the block's stored tokens and parent
  /// hash. Always on for a non-cryptographic `hash_algo`; optional for
  /// SHA-256.
  bool verify_hits = false;
  CopyOrdering copy_ordering = CopyOrdering::kStreamOrdered;
  /// kPerTokenHead (dtype int8 or fp8_e4m3 only): every row of `head_dim`
  /// codes carries its f32 scale, and bytes_per_block counts the scales.
  KVQuantization quantization = KVQuantization::kNone;
  /// kivi only, optional: the width of each (layer, kv head), 4 or 2 bits,
  /// [num_layers][num_kv_heads] (kv_dtype "auto"); dtype then names the
  /// widest (int4). The table is kept in the null block (which must be
  /// reserved), where the kernels read it.
  std::vector<uint8_t> kivi_widths;
};

/// A kivi or per_token_group config's sits/runtime/kivi_layout.h mode: its
/// dtype's bits, plus kivi::kKeysPerToken for per_token_group, or
/// kivi::kMixedWidths with `kivi_widths`.
int64_t kiviMode(const PoolConfig &config);

/// Sizes derived from a valid config.
struct PoolGeometry {
  /// The memory of one block: kv_factor × num_layers × num_kv_heads ×
  /// block_size × token bytes, where token bytes = head_dim × sizeof(dtype)
  /// + the scale (4 with per_token_head quantization, else 0); with kivi,
  /// the block's quantized part (its tail is committed only while the block
  /// is being filled).
  int64_t bytes_per_block = 0;
  /// Bytes from one block to the next in a tier: bytes_per_block, or with
  /// kivi the quantized part rounded up to a page plus the tail.
  int64_t block_stride = 0;
  /// num_blocks × block_stride (device tier).
  int64_t total_bytes = 0;
  /// num_host_blocks × block_stride.
  int64_t host_total_bytes = 0;
  /// num_blocks − 1 with a null block, else num_blocks.
  int64_t usable_blocks = 0;
  /// ceil(max_seq_len / block_size).
  int64_t max_blocks_per_seq = 0;
  /// True when hits are verified (verify_hits or a non-cryptographic hash).
  bool verify_hits = false;
};

/// Applies every rule of spec §4.2. Errors are `InvalidArgument` naming the
/// field (and, for block_size / dtype / hash_algo / copy_ordering /
/// quantization, the supported set). per_token_head quantization with a
/// dtype other than int8 or fp8_e4m3 is InvalidArgument naming
/// `quantization`.
StatusOr<PoolGeometry> validatePoolConfig(const PoolConfig &config);

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_KV_CONFIG_H
