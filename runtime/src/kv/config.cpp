//===- config.cpp - PoolConfig validation (spec §4.2) ---------------------===//
#include "sits/runtime/kv/config.h"

#include "errors.h"

#include "sits/runtime/kivi_layout.h"

namespace sits::runtime::kv {
namespace {

struct DTypeEntry {
  DType dtype;
  const char *name;
  int64_t bits;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::kF32, "f32", 32},         {DType::kF16, "f16", 16},
    {DType::kBF16, "bf16", 16},       {DType::kFP8E4M3, "fp8_e4m3", 8},
    {DType::kFP8E5M2, "fp8_e5m2", 8}, {DType::kInt8, "int8", 8},
    {DType::kInt4, "int4", 4},        {DType::kInt2, "int2", 2},
};

/// Block ids are int32 and the metadata is sized up front: cap the pool at
/// 2^30 blocks per tier.
constexpr int64_t kMaxBlocks = int64_t(1) << 30;
constexpr int64_t kMaxBlockSize = 256;

bool mulOverflows(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

} // namespace

const char *dtypeName(DType dtype) {
  for (const DTypeEntry &e : kDTypes)
    if (e.dtype == dtype)
      return e.name;
  return "unknown";
}

int64_t dtypeBits(DType dtype) {
  for (const DTypeEntry &e : kDTypes)
    if (e.dtype == dtype)
      return e.bits;
  return 0;
}

int64_t dtypeSize(DType dtype) { return dtypeBits(dtype) / 8; }

const char *supportedDTypes() {
  return "f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8, int4, int2";
}

StatusOr<DType> parseDType(std::string_view name) {
  for (const DTypeEntry &e : kDTypes)
    if (name == e.name)
      return e.dtype;
  Status st =
      errors::invalidArgument("dtype", -1,
                              "unsupported dtype '" + std::string(name) +
                                  "'; supported: " + supportedDTypes());
  return st;
}

const char *copyOrderingName(CopyOrdering ordering) {
  switch (ordering) {
  case CopyOrdering::kStreamOrdered:
    return "stream_ordered";
  case CopyOrdering::kAsync:
    return "async";
  }
  return "unknown";
}

StatusOr<CopyOrdering> parseCopyOrdering(std::string_view name) {
  for (CopyOrdering o : {CopyOrdering::kStreamOrdered, CopyOrdering::kAsync})
    if (name == copyOrderingName(o))
      return o;
  return errors::invalidArgument("copy_ordering", -1,
                                 "unsupported copy ordering '" +
                                     std::string(name) +
                                     "'; supported: stream_ordered, async");
}

const char *kvQuantizationName(KVQuantization quantization) {
  switch (quantization) {
  case KVQuantization::kNone:
    return "none";
  case KVQuantization::kPerTokenHead:
    return "per_token_head";
  case KVQuantization::kKivi:
    return "kivi";
  case KVQuantization::kPerTokenGroup:
    return "per_token_group";
  }
  return "unknown";
}

const char *supportedKVQuantizations() {
  return "none, per_token_head, kivi, per_token_group";
}

StatusOr<KVQuantization> parseKVQuantization(std::string_view name) {
  for (KVQuantization q :
       {KVQuantization::kNone, KVQuantization::kPerTokenHead,
        KVQuantization::kKivi, KVQuantization::kPerTokenGroup})
    if (name == kvQuantizationName(q))
      return q;
  return errors::invalidArgument(
      "quantization", -1,
      "unsupported quantization '" + std::string(name) +
          "'; supported: " + supportedKVQuantizations());
}

int64_t kvScaleSize(KVQuantization quantization) {
  return quantization == KVQuantization::kPerTokenHead ? 4 : 0;
}

StatusOr<HashAlgo> parseHashAlgo(std::string_view name) {
  for (HashAlgo a : {HashAlgo::kSha256, HashAlgo::kXxh3_128})
    if (name == hashAlgoName(a))
      return a;
  // The fast option's name while it was MurmurHash3 (deprecated alias).
  if (name == "murmur3_128")
    return HashAlgo::kXxh3_128;
  return errors::invalidArgument("hash_algo", -1,
                                 "unsupported hash algorithm '" +
                                     std::string(name) +
                                     "'; supported: sha256, xxh3_128");
}

int64_t kiviMode(const PoolConfig &c) {
  if (!c.kivi_widths.empty())
    return kivi::kMixedWidths;
  return dtypeBits(c.dtype) + (c.quantization == KVQuantization::kPerTokenGroup
                                   ? kivi::kKeysPerToken
                                   : 0);
}

StatusOr<PoolGeometry> validatePoolConfig(const PoolConfig &c) {
  using errors::invalidArgument;
  if (c.num_blocks <= 0)
    return invalidArgument("num_blocks", c.num_blocks, "must be > 0");
  if (c.reserve_null_block && c.num_blocks < 2)
    return invalidArgument("num_blocks", c.num_blocks,
                           "must be >= 2 when reserve_null_block is set "
                           "(block 0 is the null block)");
  if (c.num_blocks > kMaxBlocks)
    return invalidArgument("num_blocks", c.num_blocks,
                           "must be <= 2^30 (" + std::to_string(kMaxBlocks) +
                               ")");
  if (c.block_size <= 0 || c.block_size > kMaxBlockSize ||
      (c.block_size & (c.block_size - 1)) != 0)
    return invalidArgument("block_size", c.block_size,
                           "supported block sizes: 1, 2, 4, 8, 16, 32, 64, "
                           "128, 256 (powers of two <= 256)");
  if (c.num_layers <= 0)
    return invalidArgument("num_layers", c.num_layers, "must be > 0");
  if (c.num_kv_heads <= 0)
    return invalidArgument("num_kv_heads", c.num_kv_heads, "must be > 0");
  if (c.head_dim <= 0)
    return invalidArgument("head_dim", c.head_dim, "must be > 0");
  const int64_t elem = dtypeSize(c.dtype);
  if (dtypeBits(c.dtype) == 0)
    return invalidArgument("dtype", int64_t(c.dtype),
                           std::string("unsupported dtype; supported: ") +
                               supportedDTypes());
  if (c.kv_factor != 1 && c.kv_factor != 2)
    return invalidArgument("kv_factor", c.kv_factor,
                           "must be 1 (MLA) or 2 (K and V)");
  if (c.max_seq_len <= 0)
    return invalidArgument("max_seq_len", c.max_seq_len, "must be > 0");
  if (c.num_host_blocks < 0)
    return invalidArgument("num_host_blocks", c.num_host_blocks,
                           "must be >= 0 (0: no host tier)");
  if (c.num_host_blocks > kMaxBlocks)
    return invalidArgument("num_host_blocks", c.num_host_blocks,
                           "must be <= 2^30");
  const int64_t usable = c.num_blocks - (c.reserve_null_block ? 1 : 0);
  if (c.watermark_blocks < 0 || c.watermark_blocks >= usable)
    return invalidArgument("watermark_blocks", c.watermark_blocks,
                           "must be >= 0 and < usable blocks (" +
                               std::to_string(usable) + ")");
  if (c.hash_algo != HashAlgo::kSha256 && c.hash_algo != HashAlgo::kXxh3_128)
    return invalidArgument("hash_algo", int64_t(c.hash_algo),
                           "supported: sha256, xxh3_128");
  if (c.hash_seed.size() < 16)
    return invalidArgument("hash_seed", int64_t(c.hash_seed.size()),
                           "must be at least 16 bytes");
  if (c.copy_ordering != CopyOrdering::kStreamOrdered &&
      c.copy_ordering != CopyOrdering::kAsync)
    return invalidArgument("copy_ordering", int64_t(c.copy_ordering),
                           "supported: stream_ordered, async");
  if (c.quantization != KVQuantization::kNone &&
      c.quantization != KVQuantization::kPerTokenHead &&
      !isKiviLayout(c.quantization))
    return invalidArgument(
        "quantization", int64_t(c.quantization),
        std::string("unsupported quantization; supported: ") +
            supportedKVQuantizations());
  // One-byte codes whose scaled values cover a row: int8, and FP8 E4M3
  // (3 mantissa bits; E5M2's 2 lose too much for a scaled row).
  if (c.quantization == KVQuantization::kPerTokenHead &&
      c.dtype != DType::kInt8 && c.dtype != DType::kFP8E4M3)
    return invalidArgument(
        "quantization", int64_t(c.quantization),
        std::string("per_token_head stores one-byte codes with an f32 scale "
                    "per (token, head): it needs dtype int8 or fp8_e4m3, "
                    "not ") +
            dtypeName(c.dtype));

  const bool kivi = isKiviLayout(c.quantization);
  if (kivi != (c.dtype == DType::kInt4 || c.dtype == DType::kInt2))
    return invalidArgument(
        kivi ? "quantization" : "dtype",
        kivi ? int64_t(c.quantization) : int64_t(c.dtype),
        std::string("int4 and int2 codes are KIVI blocks: dtype int4 or "
                    "int2 and quantization kivi or per_token_group go "
                    "together (got "
                    "quantization ") +
            kvQuantizationName(c.quantization) + ", dtype " +
            dtypeName(c.dtype) + ")");
  PoolGeometry g;
  if (!c.kivi_widths.empty()) {
    if (c.quantization != KVQuantization::kKivi || c.dtype != DType::kInt4)
      return invalidArgument("kivi_widths", int64_t(c.kivi_widths.size()),
                             "widths per head need dtype int4 and "
                             "quantization kivi");
    if (int64_t(c.kivi_widths.size()) != c.num_layers * c.num_kv_heads)
      return invalidArgument("kivi_widths", int64_t(c.kivi_widths.size()),
                             "must hold num_layers × num_kv_heads = " +
                                 std::to_string(c.num_layers * c.num_kv_heads) +
                                 " widths");
    for (size_t i = 0; i < c.kivi_widths.size(); ++i)
      if (c.kivi_widths[i] != 4 && c.kivi_widths[i] != 2)
        return invalidArgument("kivi_widths", int64_t(c.kivi_widths[i]),
                               "widths are 4 or 2 bits (entry " +
                                   std::to_string(i) + ")");
    if (!c.reserve_null_block)
      return invalidArgument("reserve_null_block", 0,
                             "widths per head live in the null block: "
                             "reserve it");
  }
  if (kivi) {
    kivi::Layout l;
    if (c.kv_factor != 2)
      return invalidArgument("kv_factor", c.kv_factor,
                             "kivi blocks hold K and V: must be 2");
    if (!kivi::Layout::make(c.num_layers, c.num_kv_heads, c.block_size,
                            c.head_dim, kiviMode(c), &l, c.kivi_widths.data()))
      return invalidArgument(
          "head_dim", c.head_dim,
          "kivi blocks need head_dim × bits a whole number of bytes, "
          "head_dim <= " +
              std::to_string(kivi::kMaxHeadDim) +
              " and a block of fewer than 2^63 bytes");
    g.bytes_per_block = l.blockBytes;
    g.block_stride = l.blockStride;
  }
  // bytes_per_block = kv_factor × layers × heads × bs × token bytes, where
  // token bytes = head_dim × sizeof(dtype) + the row's scale (if quantized).
  // All factors are >= 1, so the partial products never exceed the result:
  // any overflow shows up in one of the steps.
  const char *overflow =
      c.quantization == KVQuantization::kNone
          ? "kv_factor × num_layers × num_kv_heads × head_dim × block_size × "
            "sizeof(dtype) overflows int64"
          : "kv_factor × num_layers × num_kv_heads × block_size × (head_dim "
            "× sizeof(dtype) + 4 scale bytes) overflows int64";
  if (!kivi) {
    int64_t token = 0;
    if (mulOverflows(c.head_dim, elem, &token) ||
        __builtin_add_overflow(token, kvScaleSize(c.quantization), &token))
      return invalidArgument("bytes_per_block", -1, overflow);
    int64_t bytes = c.kv_factor;
    const int64_t factors[] = {c.num_layers, c.num_kv_heads, c.block_size,
                               token};
    for (int64_t f : factors)
      if (mulOverflows(bytes, f, &bytes))
        return invalidArgument("bytes_per_block", -1, overflow);
    g.bytes_per_block = g.block_stride = bytes;
  }
  const int64_t bytes = g.block_stride;
  if (mulOverflows(c.num_blocks, bytes, &g.total_bytes))
    return invalidArgument("total_bytes", -1,
                           "num_blocks × block_stride (" +
                               std::to_string(bytes) + ") overflows int64");
  if (mulOverflows(c.num_host_blocks, bytes, &g.host_total_bytes))
    return invalidArgument("host_total_bytes", -1,
                           "num_host_blocks × block_stride (" +
                               std::to_string(bytes) + ") overflows int64");
  g.usable_blocks = usable;
  g.max_blocks_per_seq =
      c.max_seq_len / c.block_size + (c.max_seq_len % c.block_size != 0);
  g.verify_hits = c.verify_hits || !isCryptographic(c.hash_algo);
  return g;
}

} // namespace sits::runtime::kv
