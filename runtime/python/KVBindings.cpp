//===- KVBindings.cpp - The KV allocator in sits_mlir._sits_runtime -------===//
//
// Binds the paged KV-cache allocator (runtime/include/sits/runtime/kv/) into
// the runtime's nanobind module; sits_mlir.runtime.kv is the Python API over
// it. Kept thin, like the rest of the module: every rule is checked in C++,
// and each failed Status becomes the typed exception of spec §4.9 (built by
// sits_mlir.runtime.errors._from_status, KV domain).
//
//   * Ownership: KVAllocator holds a shared_ptr to the C++ allocator. A call
//     that releases the GIL works on its own copy of that pointer, so
//     close() (or the Python object going away) while another thread is
//     inside a call cannot free the pool under it (spec T88).
//   * The GIL is released for every batch call, check_invariants,
//     snapshot, and the calls that hash caller tokens (add_sequence with
//     tokens, lookup_prefix, can_add). Single O(1) calls keep it: they take
//     well under a microsecond, less than a release/reacquire pair.
//   * KVMemory (the KV tensors, kv/memory.h) hands out zero-copy views:
//     every view owns a shared_ptr to the memory, so the pools live as long
//     as the KVMemory object or any view of them, whichever goes last.
//   * Arrays cross as nanobind ndarrays: numpy (or any DLPack/buffer
//     object on the CPU) of the right dtype is used in place; other
//     array-likes are converted once with numpy. Outputs
//     (write_block_tables, slot_mapping) are written straight into the
//     caller's array, which must already have the right dtype and layout:
//     nothing is copied, and a mismatch raises KVInvalidArgument instead of
//     silently writing into a converted copy (spec T87).
//
//===----------------------------------------------------------------------===//
#include "PyStatus.h"
#include "sits/runtime/kv/allocator.h"
#include "sits/runtime/kv/device_backend.h"
#include "sits/runtime/kv/memory.h"
#include "sits/runtime/kv/testing.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace sits::runtime::python {
namespace {

namespace kv = ::sits::runtime::kv;

//===----------------------------------------------------------------------===//
// Errors and arrays
//===----------------------------------------------------------------------===//

[[noreturn]] void raiseKV(const Status &st) { raise(st, ErrorDomain::kKV); }

inline void checkKV(const Status &st) {
  if (!st.ok())
    raiseKV(st);
}

template <typename T> T unwrapKV(StatusOr<T> &&r) {
  if (!r.ok())
    raiseKV(r.status());
  return std::move(r).value();
}

/// KVInvalidArgument (a ValueError) naming the argument.
[[noreturn]] void badArgument(const std::string &name, const std::string &why) {
  ErrorInfo e;
  e.code = StatusCode::kInvalidArgument;
  e.subject = name;
  e.message = name + ": " + why;
  raiseKV(Status(std::move(e)));
}

template <typename T>
using In1D = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
template <typename T>
using Out1D = nb::ndarray<T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Out2D = nb::ndarray<int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

template <typename T> const char *numpyName();
template <> const char *numpyName<int32_t>() { return "int32"; }
template <> const char *numpyName<int64_t>() { return "int64"; }
template <> const char *numpyName<uint64_t>() { return "uint64"; }

nb::object &numpyModule() {
  // Leaked on purpose: no Python object may be released after finalization.
  static nb::object *np = new nb::object(nb::module_::import_("numpy"));
  return *np;
}

std::string describe(nb::handle obj) {
  nb::object dtype = nb::getattr(obj, "dtype", nb::none());
  nb::object shape = nb::getattr(obj, "shape", nb::none());
  std::string out = nb::cast<std::string>(nb::str(obj.type().attr("__name__")));
  if (!dtype.is_none())
    out += " of dtype " + nb::cast<std::string>(nb::str(dtype));
  if (!shape.is_none())
    out += " and shape " + nb::cast<std::string>(nb::str(shape));
  return out;
}

/// A read-only 1-D view of `obj` as T: in place when it already is a
/// contiguous T array, else converted once by numpy.
template <typename T> In1D<T> asVector(nb::handle obj, const char *name) {
  In1D<T> a;
  if (nb::try_cast(obj, a, /*convert=*/false))
    return a;
  nb::object converted;
  try {
    converted = numpyModule().attr("ascontiguousarray")(
        obj, "dtype"_a = numpyName<T>());
  } catch (nb::python_error &e) {
    badArgument(name, "expected a 1-D sequence of " +
                          std::string(numpyName<T>()) + " values (" + e.what() +
                          ")");
  }
  if (!nb::try_cast(converted, a, /*convert=*/false))
    badArgument(name, "expected a 1-D sequence of " +
                          std::string(numpyName<T>()) + " values, got " +
                          describe(obj));
  return a;
}

/// A numpy array that owns `v`'s buffer (no copy).
template <typename T> nb::object toNumpy(std::vector<T> &&v) {
  auto *owned = new std::vector<T>(std::move(v));
  nb::capsule owner(
      owned, [](void *p) noexcept { delete static_cast<std::vector<T> *>(p); });
  const size_t n = owned->size();
  return nb::cast(
      nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->data(), {n}, owner));
}

kv::Tier parseTier(const std::string &name) {
  if (name == kv::tierName(kv::Tier::kDevice))
    return kv::Tier::kDevice;
  if (name == kv::tierName(kv::Tier::kHost))
    return kv::Tier::kHost;
  badArgument("tier", "'" + name + "': supported: device, host");
}

nb::tuple copyTuple(const kv::BlockCopy &c) {
  return nb::make_tuple(c.epoch, kv::tierName(c.src_tier), c.src,
                        kv::tierName(c.dst_tier), c.dst, c.tokens);
}

nb::list copyList(const std::vector<kv::BlockCopy> &copies) {
  nb::list out;
  for (const kv::BlockCopy &c : copies)
    out.append(copyTuple(c));
  return out;
}

nb::tuple addResultTuple(kv::AddResult &&r) {
  return nb::make_tuple(r.cached_tokens, toNumpy(std::move(r.block_ids)),
                        r.num_new_blocks, r.num_onboarded, copyList(r.copies));
}

nb::tuple appendResultTuple(kv::AppendResult &&r) {
  return nb::make_tuple(toNumpy(std::move(r.new_block_ids)),
                        copyList(r.copies));
}

//===----------------------------------------------------------------------===//
// PoolConfig: one table of fields drives the properties, the keyword
// constructor, repr, equality and replace().
//===----------------------------------------------------------------------===//

struct ConfigField {
  const char *name;
  const char *doc;
  std::function<nb::object(const kv::PoolConfig &)> get;
  std::function<void(kv::PoolConfig &, nb::handle)> set;
};

template <typename T>
ConfigField plainField(const char *name, T kv::PoolConfig::*member,
                       const char *doc) {
  return ConfigField{
      name, doc,
      [member](const kv::PoolConfig &c) { return nb::cast(c.*member); },
      [member](kv::PoolConfig &c, nb::handle v) {
        c.*member = nb::cast<T>(v);
      }};
}

template <typename E>
ConfigField enumField(const char *name, E kv::PoolConfig::*member,
                      const char *(*toName)(E),
                      StatusOr<E> (*parse)(std::string_view), const char *doc) {
  return ConfigField{name, doc,
                     [member, toName](const kv::PoolConfig &c) {
                       return nb::cast(std::string(toName(c.*member)));
                     },
                     [member, parse](kv::PoolConfig &c, nb::handle v) {
                       c.*member = unwrapKV(parse(nb::cast<std::string>(v)));
                     }};
}

const std::vector<ConfigField> &configFields() {
  static const std::vector<ConfigField> fields = {
      plainField("num_blocks", &kv::PoolConfig::num_blocks,
                 "Device blocks, the null block included (> 0)."),
      plainField("block_size", &kv::PoolConfig::block_size,
                 "Tokens per block: a power of two in [1, 256]."),
      plainField("num_layers", &kv::PoolConfig::num_layers, "> 0"),
      plainField("num_kv_heads", &kv::PoolConfig::num_kv_heads, "> 0"),
      plainField("head_dim", &kv::PoolConfig::head_dim, "> 0"),
      enumField("dtype", &kv::PoolConfig::dtype, kv::dtypeName, kv::parseDType,
                "KV element type: f32, f16, bf16, fp8_e4m3, fp8_e5m2, int8, "
                "int4, int2 (the last two with quantization kivi only)."),
      enumField("quantization", &kv::PoolConfig::quantization,
                kv::kvQuantizationName, kv::parseKVQuantization,
                "none (default), per_token_head (dtype int8 or fp8_e4m3 "
                "only): each (token, head) row holds head_dim one-byte codes "
                "then its f32 scale, kivi (dtype int4 or int2): keys per "
                "channel over a block, values per token and channel group, "
                "a filling block's rows in f32, or per_token_group: the same "
                "with keys per token like values."),
      plainField("kv_factor", &kv::PoolConfig::kv_factor,
                 "2 (K and V) or 1 (MLA)."),
      plainField("max_seq_len", &kv::PoolConfig::max_seq_len, "> 0"),
      plainField("enable_prefix_caching",
                 &kv::PoolConfig::enable_prefix_caching, ""),
      plainField("reserve_null_block", &kv::PoolConfig::reserve_null_block,
                 "Block 0 is never handed out and pads block tables."),
      plainField("num_host_blocks", &kv::PoolConfig::num_host_blocks,
                 "0: no host tier."),
      plainField("watermark_blocks", &kv::PoolConfig::watermark_blocks,
                 "Admissions (add, swap_in) leave this many blocks free."),
      enumField("hash_algo", &kv::PoolConfig::hash_algo, kv::hashAlgoName,
                kv::parseHashAlgo,
                "sha256 (default) or xxh3_128 (fast, non-cryptographic; "
                "hits always verified). murmur3_128 is a deprecated alias "
                "of xxh3_128."),
      ConfigField{"hash_seed", "At least 16 bytes (str is UTF-8 encoded).",
                  [](const kv::PoolConfig &c) {
                    return nb::cast(
                        nb::bytes(c.hash_seed.data(), c.hash_seed.size()));
                  },
                  [](kv::PoolConfig &c, nb::handle v) {
                    if (nb::isinstance<nb::bytes>(v)) {
                      nb::bytes b = nb::borrow<nb::bytes>(v);
                      c.hash_seed.assign(b.c_str(), b.size());
                    } else {
                      c.hash_seed = nb::cast<std::string>(v);
                    }
                  }},
      ConfigField{"kivi_widths",
                  "quantization kivi, dtype int4: the bits of each (layer, "
                  "kv head), 4 or 2, [num_layers][num_kv_heads] in order "
                  "(kv_dtype \"auto\"); empty: all int4.",
                  [](const kv::PoolConfig &c) {
                    nb::list out;
                    for (uint8_t w : c.kivi_widths)
                      out.append(int(w));
                    return nb::object(out);
                  },
                  [](kv::PoolConfig &c, nb::handle v) {
                    c.kivi_widths.clear();
                    for (nb::handle w : v) {
                      const int64_t x = nb::cast<int64_t>(w);
                      // Anything but 4 or 2 is refused by validation.
                      c.kivi_widths.push_back(
                          uint8_t(std::clamp<int64_t>(x, 0, 255)));
                    }
                  }},
      plainField("verify_hits", &kv::PoolConfig::verify_hits,
                 "Verify hits against stored tokens (always on for "
                 "xxh3_128)."),
      enumField("copy_ordering", &kv::PoolConfig::copy_ordering,
                kv::copyOrderingName, kv::parseCopyOrdering,
                "stream_ordered (default) or async."),
  };
  return fields;
}

void setConfigField(kv::PoolConfig &c, const ConfigField &field,
                    nb::handle value) {
  try {
    field.set(c, value);
  } catch (nb::cast_error &) {
    throw nb::type_error((std::string("PoolConfig.") + field.name +
                          ": cannot take a " + describe(value))
                             .c_str());
  }
}

void setConfigFields(kv::PoolConfig &c, const nb::kwargs &kw) {
  for (auto [key, value] : kw) {
    const std::string name = nb::cast<std::string>(key);
    const ConfigField *field = nullptr;
    for (const ConfigField &f : configFields())
      if (name == f.name)
        field = &f;
    if (!field)
      throw nb::type_error(("PoolConfig has no field '" + name + "'").c_str());
    setConfigField(c, *field, value);
  }
}

nb::dict geometryDict(const kv::PoolGeometry &g) {
  nb::dict d;
  d["bytes_per_block"] = g.bytes_per_block;
  d["total_bytes"] = g.total_bytes;
  d["host_total_bytes"] = g.host_total_bytes;
  d["block_stride"] = g.block_stride;
  d["usable_blocks"] = g.usable_blocks;
  d["max_blocks_per_seq"] = g.max_blocks_per_seq;
  d["verify_hits"] = g.verify_hits;
  return d;
}

//===----------------------------------------------------------------------===//
// The allocator object
//===----------------------------------------------------------------------===//

class PyAllocator {
public:
  explicit PyAllocator(const kv::PoolConfig &config)
      : alloc_(unwrapKV(kv::Allocator::create(config))) {}

  /// For calls that keep the GIL: nobody can close() meanwhile.
  kv::Allocator &get() const {
    if (!alloc_)
      raiseClosed();
    return *alloc_;
  }
  /// For calls that release the GIL: the copy keeps the pool alive even if
  /// another thread closes this object during the call. (Copies and
  /// close() run with the GIL held, which serializes them.)
  std::shared_ptr<kv::Allocator> share() const {
    if (!alloc_)
      raiseClosed();
    return alloc_;
  }
  void close() { alloc_.reset(); }
  bool closed() const { return !alloc_; }

private:
  [[noreturn]] static void raiseClosed() {
    ErrorInfo e;
    e.code = StatusCode::kInvalidState;
    e.state = "CLOSED";
    e.message = "state CLOSED: the allocator was closed";
    raiseKV(Status(std::move(e)));
  }
  std::shared_ptr<kv::Allocator> alloc_;
};

const kv::AddOptions *optionsOf(nb::handle obj) {
  if (obj.is_none())
    return nullptr;
  return &nb::cast<const kv::AddOptions &>(obj);
}

/// Per-item token arrays of a batch: a list/tuple of 1-D arrays, or a 2-D
/// array (one row per item); `allowFlat` also takes a 1-D array of one
/// token per item (append_batch's decode step).
struct BatchTokens {
  std::vector<In1D<int32_t>> rows; // list form (keeps the arrays alive)
  nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> grid;
  In1D<int32_t> flat;
  enum { kNone, kRows, kGrid, kFlat } kind = kNone;

  void load(nb::handle obj, size_t count, bool allowFlat) {
    if (obj.is_none())
      return;
    if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj)) {
      const size_t n = nb::len(obj);
      if (n != count)
        badArgument("tokens", "has " + std::to_string(n) + " entries for " +
                                  std::to_string(count) + " sequences");
      rows.reserve(n);
      for (nb::handle item : obj)
        rows.push_back(asVector<int32_t>(item, "tokens"));
      kind = kRows;
      return;
    }
    if (nb::try_cast(obj, grid, false) ||
        nb::try_cast(
            numpyModule().attr("ascontiguousarray")(obj, "dtype"_a = "int32"),
            grid, false)) {
      if (grid.shape(0) != count)
        badArgument("tokens", "has " + std::to_string(grid.shape(0)) +
                                  " rows for " + std::to_string(count) +
                                  " sequences");
      kind = kGrid;
      return;
    }
    if (allowFlat) {
      flat = asVector<int32_t>(obj, "tokens");
      if (flat.shape(0) != count)
        badArgument("tokens", "has " + std::to_string(flat.shape(0)) +
                                  " tokens for " + std::to_string(count) +
                                  " sequences (one each)");
      kind = kFlat;
      return;
    }
    badArgument("tokens", "expected a list of 1-D int32 arrays or a 2-D "
                          "int32 array, got " +
                              describe(obj));
  }
  int64_t size(size_t i) const {
    switch (kind) {
    case kRows:
      return int64_t(rows[i].shape(0));
    case kGrid:
      return int64_t(grid.shape(1));
    case kFlat:
      return 1;
    case kNone:
      break;
    }
    return 0;
  }
  const int32_t *data(size_t i) const {
    switch (kind) {
    case kRows:
      return rows[i].data();
    case kGrid:
      return grid.data() + i * grid.shape(1);
    case kFlat:
      return flat.data() + i;
    case kNone:
      break;
    }
    return nullptr;
  }
};

/// Per-item counts of a count-only batch: an int for all, or an array.
std::vector<int64_t> batchCounts(nb::handle obj, size_t count) {
  if (nb::isinstance<nb::int_>(obj))
    return std::vector<int64_t>(count, nb::cast<int64_t>(obj));
  In1D<int64_t> a = asVector<int64_t>(obj, "num_tokens");
  if (a.shape(0) != count)
    badArgument("num_tokens", "has " + std::to_string(a.shape(0)) +
                                  " entries for " + std::to_string(count) +
                                  " sequences");
  return std::vector<int64_t>(a.data(), a.data() + count);
}

nb::object addSequences(PyAllocator &self, nb::handle seqsObj,
                        nb::handle numTokens, nb::handle tokensObj,
                        nb::handle optionsObj, int want) {
  In1D<uint64_t> seqs = asVector<uint64_t>(seqsObj, "seqs");
  const size_t count = seqs.shape(0);
  BatchTokens tokens;
  tokens.load(tokensObj, count, /*allowFlat=*/false);
  std::vector<int64_t> counts;
  if (tokens.kind == BatchTokens::kNone) {
    if (numTokens.is_none())
      badArgument("num_tokens", "give tokens or num_tokens");
    counts = batchCounts(numTokens, count);
  } else if (!numTokens.is_none()) {
    badArgument("num_tokens", "give tokens or num_tokens, not both");
  }
  // Options: one for the whole batch, or one per item.
  std::vector<const kv::AddOptions *> opts(count, nullptr);
  if (nb::isinstance<nb::list>(optionsObj) ||
      nb::isinstance<nb::tuple>(optionsObj)) {
    if (nb::len(optionsObj) != count)
      badArgument("options", "has " + std::to_string(nb::len(optionsObj)) +
                                 " entries for " + std::to_string(count) +
                                 " sequences");
    size_t i = 0;
    for (nb::handle o : optionsObj)
      opts[i++] = optionsOf(o);
  } else {
    const kv::AddOptions *shared = optionsOf(optionsObj);
    std::fill(opts.begin(), opts.end(), shared);
  }
  std::vector<kv::AddRequest> reqs(count);
  for (size_t i = 0; i < count; ++i) {
    kv::AddRequest &r = reqs[i];
    r.seq = seqs.data()[i];
    if (tokens.kind == BatchTokens::kNone) {
      r.num_tokens = counts[i];
    } else {
      r.num_tokens = tokens.size(i);
      r.tokens = tokens.data(i);
    }
    r.opts = opts[i];
  }
  // want: 0 nothing, 1 the cached tokens per item, 2 every AddResult.
  // Sequences without token ids are never cached: their results (table
  // copies) are not even asked for.
  const bool needResults =
      want == 2 || (want == 1 && tokens.kind != BatchTokens::kNone);
  std::shared_ptr<kv::Allocator> a = self.share();
  std::vector<kv::AddResult> results;
  Status st;
  {
    nb::gil_scoped_release release;
    st = a->addSequences(reqs.data(), count, needResults ? &results : nullptr);
  }
  checkKV(st);
  if (want == 0)
    return nb::none();
  if (want == 1) {
    std::vector<int64_t> cached(count, 0);
    for (size_t i = 0; i < results.size(); ++i)
      cached[i] = results[i].cached_tokens;
    return toNumpy(std::move(cached));
  }
  nb::list out;
  for (kv::AddResult &r : results)
    out.append(addResultTuple(std::move(r)));
  return out;
}

nb::object appendBatch(PyAllocator &self, nb::handle seqsObj,
                       nb::handle numTokens, nb::handle tokensObj,
                       bool wantResults) {
  In1D<uint64_t> seqs = asVector<uint64_t>(seqsObj, "seqs");
  const size_t count = seqs.shape(0);
  BatchTokens tokens;
  tokens.load(tokensObj, count, /*allowFlat=*/true);
  std::vector<int64_t> counts;
  if (tokens.kind == BatchTokens::kNone) {
    if (numTokens.is_none())
      badArgument("num_tokens", "give tokens or num_tokens");
    counts = batchCounts(numTokens, count);
  } else if (!numTokens.is_none()) {
    badArgument("num_tokens", "give tokens or num_tokens, not both");
  }
  std::vector<kv::AppendRequest> reqs(count);
  for (size_t i = 0; i < count; ++i) {
    kv::AppendRequest &r = reqs[i];
    r.seq = seqs.data()[i];
    if (tokens.kind == BatchTokens::kNone) {
      r.num_tokens = counts[i];
    } else {
      r.num_tokens = tokens.size(i);
      r.tokens = tokens.data(i);
    }
  }
  std::shared_ptr<kv::Allocator> a = self.share();
  std::vector<kv::AppendResult> results;
  Status st;
  {
    nb::gil_scoped_release release;
    st = a->appendBatch(reqs.data(), count, wantResults ? &results : nullptr);
  }
  checkKV(st);
  if (!wantResults)
    return nb::none();
  nb::list out;
  for (kv::AppendResult &r : results)
    out.append(appendResultTuple(std::move(r)));
  return out;
}

nb::object writeBlockTables(PyAllocator &self, nb::handle seqsObj,
                            nb::handle outObj, std::optional<int32_t> pad) {
  In1D<uint64_t> seqs = asVector<uint64_t>(seqsObj, "seqs");
  Out2D out;
  if (!nb::try_cast(outObj, out, /*convert=*/false))
    badArgument("out", "must be a writable, C-contiguous 2-D int32 array "
                       "(it is written in place), got " +
                           describe(outObj));
  const size_t count = seqs.shape(0);
  if (out.shape(0) < count)
    badArgument("out", "has " + std::to_string(out.shape(0)) + " rows for " +
                           std::to_string(count) + " sequences");
  std::shared_ptr<kv::Allocator> a = self.share();
  const int32_t padValue = pad ? *pad : a->defaultPad();
  Status st;
  {
    nb::gil_scoped_release release;
    st = a->writeBlockTables(seqs.data(), count, out.data(),
                             int64_t(out.shape(1)), padValue);
  }
  checkKV(st);
  return nb::borrow(outObj);
}

nb::object slotMapping(PyAllocator &self, uint64_t seq, int64_t start,
                       std::optional<int64_t> countArg, nb::handle outObj) {
  kv::Allocator &a = self.get();
  int64_t count = 0;
  if (countArg) {
    count = *countArg;
  } else {
    kv::SequenceInfo info = unwrapKV(a.sequenceInfo(seq));
    count = info.num_tokens + info.lookahead - start;
  }
  if (outObj.is_none()) {
    std::vector<int64_t> slots(size_t(count < 0 ? 0 : count));
    checkKV(a.slotMapping(seq, start, count, slots.data()));
    return toNumpy(std::move(slots));
  }
  Out1D<int64_t> out;
  if (!nb::try_cast(outObj, out, /*convert=*/false))
    badArgument("out", "must be a writable, C-contiguous 1-D int64 array "
                       "(it is written in place), got " +
                           describe(outObj));
  if (count > int64_t(out.shape(0)))
    badArgument("out", "holds " + std::to_string(out.shape(0)) + " slots, " +
                           std::to_string(count) + " needed");
  checkKV(a.slotMapping(seq, start, count, out.data()));
  return nb::borrow(outObj);
}

nb::dict snapshotDict(PyAllocator &self) {
  std::shared_ptr<kv::Allocator> a = self.share();
  StatusOr<kv::StateSnapshot> r = [&] {
    nb::gil_scoped_release release;
    return a->snapshot();
  }();
  kv::StateSnapshot snap = unwrapKV(std::move(r));
  auto tierDict = [](const std::vector<kv::StateSnapshot::Block> &blocks,
                     std::vector<int32_t> &&order) {
    std::vector<int32_t> state, ref, pins, filled;
    std::vector<uint8_t> sealed;
    for (const kv::StateSnapshot::Block &b : blocks) {
      state.push_back(b.state);
      ref.push_back(b.ref);
      pins.push_back(b.pins);
      filled.push_back(b.filled);
      sealed.push_back(b.sealed);
    }
    nb::dict d;
    d["state"] = toNumpy(std::move(state));
    d["ref"] = toNumpy(std::move(ref));
    d["pins"] = toNumpy(std::move(pins));
    d["filled"] = toNumpy(std::move(filled));
    d["sealed"] = toNumpy(std::move(sealed)).attr("astype")("bool");
    d["free_order"] = toNumpy(std::move(order));
    return d;
  };
  nb::dict out;
  out["device"] = tierDict(snap.device, std::move(snap.device_free_order));
  out["host"] = tierDict(snap.host, std::move(snap.host_free_order));
  nb::dict seqs;
  for (kv::StateSnapshot::Sequence &s : snap.sequences) {
    nb::dict d;
    d["state"] = kv::seqStateName(kv::SeqState(s.state));
    d["num_tokens"] = s.n;
    d["lookahead"] = s.lookahead;
    d["table"] = toNumpy(std::move(s.table));
    d["host_table"] = toNumpy(std::move(s.host_table));
    d["tokens_known"] = s.tokens_known;
    seqs[nb::cast(s.id)] = d;
  }
  out["sequences"] = seqs;
  out["pending_copies"] = copyList(snap.pending_copies);
  out["epoch"] = snap.epoch;
  out["stats"] = nb::cast(snap.stats);
  return out;
}

//===----------------------------------------------------------------------===//
// The KV memory
//===----------------------------------------------------------------------===//

class PyMemory {
public:
  /// `device`: where the device tier lives ("cpu" or empty: host memory;
  /// "cuda:0", "hip:0": that GPU's memory).
  PyMemory(const kv::PoolConfig &config, const std::string &device)
      : mem_(unwrapKV(kv::Memory::create(config, options(device)))) {}

  kv::Memory &get() const {
    if (!mem_)
      raiseClosed();
    return *mem_;
  }
  /// Views and GIL-free calls hold their own reference.
  std::shared_ptr<kv::Memory> share() const {
    if (!mem_)
      raiseClosed();
    return mem_;
  }
  void close() { mem_.reset(); }
  bool closed() const { return !mem_; }

private:
  static kv::MemoryOptions options(const std::string &device) {
    kv::MemoryOptions options;
    if (device.empty() || device == "cpu")
      return options;
    StatusOr<std::shared_ptr<kv::MemoryBackend>> backend =
        kv::deviceMemoryBackend(device);
    if (!backend.ok())
      raise(backend.status());
    options.device_backend = std::move(*backend);
    return options;
  }

  [[noreturn]] static void raiseClosed() {
    ErrorInfo e;
    e.code = StatusCode::kInvalidState;
    e.state = "CLOSED";
    e.message = "state CLOSED: the KV memory was closed (views taken before "
                "keep their pools alive)";
    raiseKV(Status(std::move(e)));
  }
  std::shared_ptr<kv::Memory> mem_;
};

/// A capsule that keeps the memory alive for as long as a view of it.
nb::capsule keepAlive(std::shared_ptr<kv::Memory> mem) {
  auto *owned = new std::shared_ptr<kv::Memory>(std::move(mem));
  return nb::capsule(owned, [](void *p) noexcept {
    delete static_cast<std::shared_ptr<kv::Memory> *>(p);
  });
}

/// The tier's pool, or a valid dummy address for an empty tier (views of
/// zero elements still need a non-null pointer).
void *viewData(kv::Memory &m, kv::Tier tier) {
  alignas(64) static uint8_t empty[64];
  return m.data(tier) ? m.data(tier) : empty;
}

void requireHostAccess(kv::Memory &m, kv::Tier tier, const char *what) {
  if (m.backend(tier).hostAccessible())
    return;
  ErrorInfo e;
  e.code = StatusCode::kInvalidState;
  e.state = "NOT_HOST_ACCESSIBLE";
  e.message = std::string("state NOT_HOST_ACCESSIBLE: the ") +
              kv::tierName(tier) + " tier lives in '" + m.backend(tier).name() +
              "' memory; " + what + " needs host memory (use dlpack())";
  raiseKV(Status(std::move(e)));
}

nb::dlpack::dtype dlpackDType(kv::DType dtype) {
  using nb::dlpack::dtype_code;
  switch (dtype) {
  case kv::DType::kF32:
    return {uint8_t(dtype_code::Float), 32, 1};
  case kv::DType::kF16:
    return {uint8_t(dtype_code::Float), 16, 1};
  case kv::DType::kBF16:
    return {uint8_t(dtype_code::Bfloat), 16, 1};
  case kv::DType::kFP8E4M3:
    return {uint8_t(dtype_code::Float8_E4M3FN), 8, 1};
  case kv::DType::kFP8E5M2:
    return {uint8_t(dtype_code::Float8_E5M2), 8, 1};
  case kv::DType::kInt8:
    return {uint8_t(dtype_code::Int), 8, 1};
  }
  return {uint8_t(dtype_code::UInt), 8, 1};
}

/// The tier's pool as raw bytes: a writable 1-D uint8 numpy array over the
/// memory itself (sits_mlir.runtime.kv views it with the config's dtype and
/// shape).
nb::object memoryBuffer(PyMemory &self, const std::string &tierName) {
  std::shared_ptr<kv::Memory> m = self.share();
  const kv::Tier tier = parseTier(tierName);
  requireHostAccess(*m, tier, "a NumPy view");
  const size_t bytes = size_t(m->bytes(tier));
  void *data = viewData(*m, tier);
  return nb::cast(nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(
      data, {bytes}, keepAlive(std::move(m))));
}

/// Elements of one row: head_dim, plus the scale's bytes of a quantized
/// (int8 or fp8_e4m3) pool, whose rows are head_dim codes then an f32
/// scale.
int64_t rowElems(const kv::MemoryLayout &l) {
  return l.token_stride / l.elem_size;
}

/// The tier's pool as a typed 6-D DLPack tensor
/// [blocks][layers][kv][heads][block_size][row] on the backend's device
/// (torch.from_dlpack(...) and the like); row is head_dim, or head_dim + 4
/// one-byte elements for a per_token_head pool (the codes, then the
/// scale's bytes).
nb::object memoryDLPack(PyMemory &self, const std::string &tierName) {
  std::shared_ptr<kv::Memory> m = self.share();
  const kv::Tier tier = parseTier(tierName);
  const kv::MemoryLayout &l = m->layout();
  if (kv::isKiviLayout(m->config().quantization)) {
    // KIVI blocks are bytes: [blocks][block_stride] int8 (a compiled model's
    // kv_pool type).
    const size_t shape[2] = {size_t(m->numBlocks(tier)),
                             size_t(l.block_stride)};
    const kv::MemoryBackend &backend = m->backend(tier);
    void *data = viewData(*m, tier);
    return nb::cast(nb::ndarray<nb::array_api>(
        data, 2, shape, keepAlive(std::move(m)), nullptr,
        nb::dlpack::dtype{uint8_t(nb::dlpack::dtype_code::Int), 8, 1},
        backend.dlpackDeviceType(), backend.deviceId()));
  }
  const size_t shape[6] = {size_t(m->numBlocks(tier)), size_t(l.num_layers),
                           size_t(l.kv_factor),        size_t(l.num_kv_heads),
                           size_t(l.block_size),       size_t(rowElems(l))};
  const kv::MemoryBackend &backend = m->backend(tier);
  void *data = viewData(*m, tier);
  const nb::dlpack::dtype dtype = dlpackDType(m->config().dtype);
  const int deviceType = backend.dlpackDeviceType();
  const int deviceId = backend.deviceId();
  return nb::cast(nb::ndarray<nb::array_api>(data, 6, shape,
                                             keepAlive(std::move(m)), nullptr,
                                             dtype, deviceType, deviceId));
}

nb::dict memoryLayoutDict(const kv::Memory &m) {
  const kv::MemoryLayout &l = m.layout();
  nb::dict d;
  d["dtype"] = kv::dtypeName(m.config().dtype);
  d["quantization"] = kv::kvQuantizationName(m.config().quantization);
  d["elem_size"] = l.elem_size;
  d["head_dim"] = l.head_dim;
  d["num_blocks"] = m.numBlocks(kv::Tier::kDevice);
  d["num_host_blocks"] = m.numBlocks(kv::Tier::kHost);
  // The shape of a block as the views have it: the last extent is a row's
  // elements (head_dim, or head_dim + 4 one-byte ones with per_token_head).
  // KIVI blocks are bytes: one extent, the block stride.
  if (kv::isKiviLayout(m.config().quantization))
    d["block_shape"] = nb::make_tuple(l.block_stride);
  else
    d["block_shape"] = nb::make_tuple(l.num_layers, l.kv_factor, l.num_kv_heads,
                                      l.block_size, rowElems(l));
  d["bytes_per_block"] = m.geometry().bytes_per_block;
  d["block_stride"] = l.block_stride;
  d["layer_stride"] = l.layer_stride;
  d["kv_stride"] = l.kv_stride;
  d["head_stride"] = l.head_stride;
  d["token_stride"] = l.token_stride;
  d["scale_size"] = l.scale_size;
  d["scale_offset"] = l.scale_offset;
  return d;
}

} // namespace

std::vector<kv::BlockCopy> parseCopies(nb::handle copiesObj) {
  std::vector<kv::BlockCopy> copies;
  size_t i = 0;
  for (nb::handle item : nb::iter(copiesObj)) {
    kv::BlockCopy c;
    std::string srcTier, dstTier;
    bool ok = true;
    try {
      ok = nb::len(item) == 6;
      if (ok) {
        c.epoch = nb::cast<uint64_t>(item[0]);
        srcTier = nb::cast<std::string>(item[1]);
        c.src = nb::cast<int32_t>(item[2]);
        dstTier = nb::cast<std::string>(item[3]);
        c.dst = nb::cast<int32_t>(item[4]);
        c.tokens = nb::cast<int32_t>(item[5]);
      }
    } catch (nb::cast_error &) {
      ok = false;
    } catch (nb::python_error &) { // len() of a non-sequence
      ok = false;
    }
    if (!ok)
      badArgument("copies", "item " + std::to_string(i) +
                                ": expected a BlockCopy (epoch, src_tier, "
                                "src, dst_tier, dst, tokens), got " +
                                describe(item));
    c.src_tier = parseTier(srcTier);
    c.dst_tier = parseTier(dstTier);
    copies.push_back(c);
    ++i;
  }
  return copies;
}

namespace {

/// apply_copies: BlockCopy tuples (epoch, src_tier, src, dst_tier, dst,
/// tokens), as take_pending_copies returns them.
int64_t applyCopies(PyMemory &self, nb::handle copiesObj) {
  std::shared_ptr<kv::Memory> m = self.share();
  std::vector<kv::BlockCopy> copies = parseCopies(copiesObj);
  Status st;
  {
    nb::gil_scoped_release release;
    st = m->apply(copies);
  }
  checkKV(st);
  return int64_t(copies.size());
}

} // namespace

std::shared_ptr<kv::Allocator> sharedAllocator(nb::handle allocator) {
  return nb::cast<PyAllocator &>(allocator).share();
}

std::shared_ptr<kv::Memory> sharedMemory(nb::handle memory) {
  return nb::cast<PyMemory &>(memory).share();
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

void bindKV(nb::module_ &m) {
  // --- PoolConfig -----------------------------------------------------------
  auto config = nb::class_<kv::PoolConfig>(
      m, "KVPoolConfig",
      "Creation parameters of a KV pool (spec §4.2); keyword constructor, "
      "every field a property. Validated by KVAllocator (or validate()).");
  config.def("__init__", [](kv::PoolConfig *self, nb::kwargs kw) {
    new (self) kv::PoolConfig();
    setConfigFields(*self, kw);
  });
  for (const ConfigField &f : configFields()) {
    const ConfigField *field = &f;
    config.def_prop_rw(
        f.name, [field](const kv::PoolConfig &c) { return field->get(c); },
        [field](kv::PoolConfig &c, nb::handle v) {
          setConfigField(c, *field, v);
        },
        f.doc);
  }
  config.def_prop_ro_static("_fields", [](nb::handle) {
    nb::list names;
    for (const ConfigField &f : configFields())
      names.append(f.name);
    return nb::tuple(names);
  });
  config.def(
      "replace",
      [](const kv::PoolConfig &c, nb::kwargs kw) {
        kv::PoolConfig copy = c;
        setConfigFields(copy, kw);
        return copy;
      },
      "A copy with the given fields changed.");
  config.def(
      "validate",
      [](const kv::PoolConfig &c) {
        return geometryDict(unwrapKV(kv::validatePoolConfig(c)));
      },
      "Applies every creation rule; returns the derived sizes "
      "(bytes_per_block, total_bytes, usable_blocks, ...).");
  config.def(
      "__eq__",
      [](const kv::PoolConfig &a, nb::handle other) {
        if (!nb::isinstance<kv::PoolConfig>(other))
          return false;
        const kv::PoolConfig &b = nb::cast<const kv::PoolConfig &>(other);
        for (const ConfigField &f : configFields())
          if (!f.get(a).equal(f.get(b)))
            return false;
        return true;
      },
      "other"_a);
  config.def("__repr__", [](const kv::PoolConfig &c) {
    std::string out = "PoolConfig(";
    bool first = true;
    for (const ConfigField &f : configFields()) {
      out += (first ? "" : ", ") + std::string(f.name) + "=" +
             nb::cast<std::string>(nb::repr(f.get(c)));
      first = false;
    }
    return out + ")";
  });

  // --- AddOptions ------------------------------------------------------------
  nb::class_<kv::AddOptions>(
      m, "KVAddOptions",
      "Options of add_sequence / lookup_prefix / can_add (spec O1, §4.7).")
      .def(
          "__init__",
          [](kv::AddOptions *self, std::string extraKey, std::string cacheSalt,
             std::vector<std::pair<int64_t, nb::bytes>> extras,
             int64_t maxCacheHit) {
            new (self) kv::AddOptions();
            self->extra_key = std::move(extraKey);
            self->cache_salt = std::move(cacheSalt);
            for (auto &[index, data] : extras)
              self->block_extras.push_back(kv::BlockExtra{
                  index, std::string(data.c_str(), data.size())});
            self->max_cache_hit = maxCacheHit;
          },
          "extra_key"_a = "", "cache_salt"_a = "",
          "block_extras"_a = std::vector<std::pair<int64_t, nb::bytes>>(),
          "max_cache_hit"_a = -1)
      .def_ro("extra_key", &kv::AddOptions::extra_key,
              "Namespace of the chain: model/weights version, LoRA id.")
      .def_ro("cache_salt", &kv::AddOptions::cache_salt,
              "Per-tenant salt: different salts never share cache entries.")
      .def_prop_ro(
          "block_extras",
          [](const kv::AddOptions &o) {
            nb::list out;
            for (const kv::BlockExtra &e : o.block_extras)
              out.append(nb::make_tuple(
                  e.block_index, nb::bytes(e.data.data(), e.data.size())));
            return out;
          },
          "(block_index, bytes) pairs hashed into that block (multimodal).")
      .def_ro("max_cache_hit", &kv::AddOptions::max_cache_hit,
              "Cap of the prefix hit in tokens; -1 means n - 1.")
      .def("__repr__", [](const kv::AddOptions &o) {
        return "AddOptions(extra_key=" +
               nb::cast<std::string>(nb::repr(nb::cast(o.extra_key))) +
               ", cache_salt=" +
               nb::cast<std::string>(nb::repr(nb::cast(o.cache_salt))) +
               ", block_extras=<" + std::to_string(o.block_extras.size()) +
               ">, max_cache_hit=" + std::to_string(o.max_cache_hit) + ")";
      });

  // --- Stats
  // -------------------------------------------------------------------
  auto stats = nb::class_<kv::Stats>(
      m, "KVStats", "A consistent snapshot of the statistics (spec §4.10).");
#define SITS_KV_BIND_STAT(type, name) stats.def_ro(#name, &kv::Stats::name);
  SITS_KV_STATS_FIELDS(SITS_KV_BIND_STAT)
#undef SITS_KV_BIND_STAT
  stats.def_prop_ro_static("_fields", [](nb::handle) {
    nb::list names;
#define SITS_KV_STAT_NAME(type, name) names.append(#name);
    SITS_KV_STATS_FIELDS(SITS_KV_STAT_NAME)
#undef SITS_KV_STAT_NAME
    return nb::tuple(names);
  });
  stats.def("as_dict", [](const kv::Stats &s) {
    nb::dict d;
#define SITS_KV_STAT_ITEM(type, name) d[#name] = s.name;
    SITS_KV_STATS_FIELDS(SITS_KV_STAT_ITEM)
#undef SITS_KV_STAT_ITEM
    return d;
  });
  stats.def(
      "__eq__",
      [](const kv::Stats &a, nb::handle other) {
        if (!nb::isinstance<kv::Stats>(other))
          return false;
        const kv::Stats &b = nb::cast<const kv::Stats &>(other);
#define SITS_KV_STAT_EQ(type, name)                                            \
  if (a.name != b.name)                                                        \
    return false;
        SITS_KV_STATS_FIELDS(SITS_KV_STAT_EQ)
#undef SITS_KV_STAT_EQ
        return true;
      },
      "other"_a);
  stats.def("__repr__", [](const kv::Stats &s) {
    std::string out = "Stats(";
#define SITS_KV_STAT_REPR(type, name)                                          \
  out += #name "=" + nb::cast<std::string>(nb::repr(nb::cast(s.name))) + ", ";
    SITS_KV_STATS_FIELDS(SITS_KV_STAT_REPR)
#undef SITS_KV_STAT_REPR
    out.resize(out.size() - 2);
    return out + ")";
  });

  // --- the allocator
  // ----------------------------------------------------------
  nb::class_<PyAllocator>(m, "KVAllocator",
                          "The paged KV-cache allocator (C++ core). Use "
                          "sits_mlir.runtime.kv.KVAllocator.")
      .def(nb::init<const kv::PoolConfig &>(), "config"_a)
      .def_prop_ro("config",
                   [](PyAllocator &self) { return self.get().config(); })
      .def_prop_ro(
          "geometry",
          [](PyAllocator &self) { return geometryDict(self.get().geometry()); })
      .def_prop_ro("default_pad",
                   [](PyAllocator &self) { return self.get().defaultPad(); })
      .def_prop_ro("closed", &PyAllocator::closed)
      .def_prop_ro("poisoned",
                   [](PyAllocator &self) { return self.get().poisoned(); })
      .def("close", &PyAllocator::close)
      // O1
      .def(
          "add_sequence",
          [](PyAllocator &self, uint64_t seq, int64_t numTokens,
             nb::handle tokensObj, nb::handle optionsObj) {
            const kv::AddOptions *opts = optionsOf(optionsObj);
            if (tokensObj.is_none())
              return addResultTuple(
                  unwrapKV(self.get().addSequence(seq, numTokens)));
            In1D<int32_t> tokens = asVector<int32_t>(tokensObj, "tokens");
            if (numTokens != int64_t(tokens.shape(0)))
              badArgument("num_tokens", std::to_string(numTokens) + " for " +
                                            std::to_string(tokens.shape(0)) +
                                            " tokens");
            std::shared_ptr<kv::Allocator> a = self.share();
            StatusOr<kv::AddResult> r = [&] {
              nb::gil_scoped_release release; // hashing
              return a->addSequence(seq, tokens.data(),
                                    int64_t(tokens.shape(0)),
                                    opts ? *opts : kv::AddOptions());
            }();
            return addResultTuple(unwrapKV(std::move(r)));
          },
          "seq"_a, "num_tokens"_a, "tokens"_a.none() = nb::none(),
          "options"_a.none() = nb::none())
      .def("add_sequences", &addSequences, "seqs"_a,
           "num_tokens"_a.none() = nb::none(), "tokens"_a.none() = nb::none(),
           "options"_a.none() = nb::none(), "want"_a = 1)
      // O2, O3
      .def(
          "append",
          [](PyAllocator &self, uint64_t seq, int64_t k, nb::handle tokensObj) {
            kv::AppendResult r;
            if (tokensObj.is_none()) {
              checkKV(self.get().append(seq, k, &r));
            } else {
              In1D<int32_t> tokens = asVector<int32_t>(tokensObj, "tokens");
              checkKV(self.get().append(seq, tokens.data(),
                                        int64_t(tokens.shape(0)), &r));
            }
            return appendResultTuple(std::move(r));
          },
          "seq"_a, "k"_a, "tokens"_a.none() = nb::none())
      .def("append_batch", &appendBatch, "seqs"_a,
           "num_tokens"_a.none() = nb::none(), "tokens"_a.none() = nb::none(),
           "want_results"_a = false)
      .def(
          "reserve",
          [](PyAllocator &self, uint64_t seq, int64_t lookahead) {
            kv::AppendResult r;
            checkKV(self.get().reserve(seq, lookahead, &r));
            return appendResultTuple(std::move(r));
          },
          "seq"_a, "lookahead"_a)
      // O4–O6
      .def(
          "fork",
          [](PyAllocator &self, uint64_t parent, uint64_t child, int64_t pos) {
            checkKV(self.get().fork(parent, child, pos));
          },
          "parent"_a, "child"_a, "pos"_a = -1)
      .def(
          "truncate",
          [](PyAllocator &self, uint64_t seq, int64_t newN) {
            checkKV(self.get().truncate(seq, newN));
          },
          "seq"_a, "new_n"_a)
      .def(
          "drop_blocks",
          [](PyAllocator &self, uint64_t seq, int64_t first, int64_t count) {
            checkKV(self.get().dropBlocks(seq, first, count));
          },
          "seq"_a, "first"_a, "count"_a = 1)
      .def(
          "free",
          [](PyAllocator &self, uint64_t seq) {
            checkKV(self.get().free(seq));
          },
          "seq"_a)
      .def(
          "free_batch",
          [](PyAllocator &self, nb::handle seqsObj) {
            In1D<uint64_t> seqs = asVector<uint64_t>(seqsObj, "seqs");
            std::shared_ptr<kv::Allocator> a = self.share();
            Status st;
            {
              nb::gil_scoped_release release;
              st = a->freeBatch(seqs.data(), seqs.shape(0));
            }
            checkKV(st);
          },
          "seqs"_a)
      // O7
      .def(
          "block_table",
          [](PyAllocator &self, uint64_t seq) {
            return toNumpy(unwrapKV(self.get().blockTable(seq)));
          },
          "seq"_a)
      .def("write_block_tables", &writeBlockTables, "seqs"_a, "out"_a,
           "pad"_a.none() = nb::none())
      .def("slot_mapping", &slotMapping, "seq"_a, "start"_a = 0,
           "count"_a.none() = nb::none(), "out"_a.none() = nb::none())
      // O8, O9
      .def(
          "lookup_prefix",
          [](PyAllocator &self, nb::handle tokensObj, nb::handle optionsObj) {
            In1D<int32_t> tokens = asVector<int32_t>(tokensObj, "tokens");
            const kv::AddOptions *opts = optionsOf(optionsObj);
            std::shared_ptr<kv::Allocator> a = self.share();
            StatusOr<int64_t> r = [&] {
              nb::gil_scoped_release release;
              return a->lookupPrefix(tokens.data(), int64_t(tokens.shape(0)),
                                     opts ? *opts : kv::AddOptions());
            }();
            return unwrapKV(std::move(r));
          },
          "tokens"_a, "options"_a.none() = nb::none())
      .def(
          "can_add",
          [](PyAllocator &self, int64_t numTokens, nb::handle tokensObj,
             nb::handle optionsObj) {
            const kv::AddOptions *opts = optionsOf(optionsObj);
            if (tokensObj.is_none())
              return unwrapKV(self.get().canAdd(
                  numTokens, nullptr, opts ? *opts : kv::AddOptions()));
            In1D<int32_t> tokens = asVector<int32_t>(tokensObj, "tokens");
            if (int64_t(tokens.shape(0)) < numTokens)
              badArgument("tokens", "holds " + std::to_string(tokens.shape(0)) +
                                        " ids for num_tokens = " +
                                        std::to_string(numTokens));
            std::shared_ptr<kv::Allocator> a = self.share();
            StatusOr<bool> r = [&] {
              nb::gil_scoped_release release;
              return a->canAdd(numTokens, tokens.data(),
                               opts ? *opts : kv::AddOptions());
            }();
            return unwrapKV(std::move(r));
          },
          "num_tokens"_a, "tokens"_a.none() = nb::none(),
          "options"_a.none() = nb::none())
      .def(
          "blocks_needed",
          [](PyAllocator &self, uint64_t seq, int64_t k) {
            return unwrapKV(self.get().blocksNeeded(seq, k));
          },
          "seq"_a, "k"_a)
      .def("num_free_blocks",
           [](PyAllocator &self) {
             return unwrapKV(self.get().numFreeBlocks());
           })
      .def("num_evictable_blocks",
           [](PyAllocator &self) {
             return unwrapKV(self.get().numEvictableBlocks());
           })
      .def("num_allocatable_blocks",
           [](PyAllocator &self) {
             return unwrapKV(self.get().numAllocatableBlocks());
           })
      // O10
      .def(
          "swap_out",
          [](PyAllocator &self, uint64_t seq) {
            checkKV(self.get().swapOut(seq));
          },
          "seq"_a)
      .def(
          "swap_in",
          [](PyAllocator &self, uint64_t seq) {
            checkKV(self.get().swapIn(seq));
          },
          "seq"_a)
      // O12, O13
      .def("take_pending_copies",
           [](PyAllocator &self) {
             std::vector<kv::BlockCopy> copies;
             checkKV(self.get().takePendingCopies(&copies));
             return copyList(copies);
           })
      .def(
          "complete",
          [](PyAllocator &self, uint64_t epoch) {
            return unwrapKV(self.get().complete(epoch));
          },
          "epoch"_a)
      .def(
          "evict",
          [](PyAllocator &self, int64_t k) {
            return unwrapKV(self.get().evict(k));
          },
          "k"_a)
      .def("reset_prefix_cache",
           [](PyAllocator &self) { checkKV(self.get().resetPrefixCache()); })
      // O14
      .def("stats",
           [](PyAllocator &self) { return unwrapKV(self.get().stats()); })
      .def("check_invariants",
           [](PyAllocator &self) {
             std::shared_ptr<kv::Allocator> a = self.share();
             Status st;
             {
               nb::gil_scoped_release release;
               st = a->checkInvariants();
             }
             checkKV(st);
           })
      .def("snapshot", &snapshotDict)
      .def(
          "sequence_info",
          [](PyAllocator &self, uint64_t seq) {
            kv::SequenceInfo info = unwrapKV(self.get().sequenceInfo(seq));
            nb::dict d;
            d["id"] = info.id;
            d["state"] = kv::seqStateName(info.state);
            d["num_tokens"] = info.num_tokens;
            d["lookahead"] = info.lookahead;
            d["num_blocks"] = info.num_blocks;
            d["num_host_blocks"] = info.num_host_blocks;
            d["tokens_known"] = info.tokens_known;
            return d;
          },
          "seq"_a)
      .def("metadata_bytes_per_device_block",
           [](PyAllocator &self) {
             return self.get().metadataBytesPerDeviceBlock();
           })
      // Test hooks (spec T54, T65): below the public API.
      .def(
          "_test_unref_block",
          [](PyAllocator &self, const std::string &tier, int32_t block) {
            checkKV(kv::AllocatorTestHooks::unrefBlock(self.get(),
                                                       parseTier(tier), block));
          },
          "tier"_a, "block"_a)
      .def(
          "_test_corrupt_ref",
          [](PyAllocator &self, const std::string &tier, int32_t block,
             int32_t ref) {
            checkKV(kv::AllocatorTestHooks::corruptRef(
                self.get(), parseTier(tier), block, ref));
          },
          "tier"_a, "block"_a, "ref"_a);

  // --- the KV memory --------------------------------------------------------
  nb::class_<PyMemory>(m, "KVMemory",
                       "The KV tensors of a pool (C++ kv::Memory). Use "
                       "sits_mlir.runtime.kv.KVMemory.")
      .def(nb::init<const kv::PoolConfig &, const std::string &>(), "config"_a,
           "device"_a = "")
      .def_prop_ro("config", [](PyMemory &self) { return self.get().config(); })
      .def_prop_ro("layout",
                   [](PyMemory &self) { return memoryLayoutDict(self.get()); })
      .def_prop_ro("closed", &PyMemory::closed)
      .def("close", &PyMemory::close)
      .def(
          "backend",
          [](PyMemory &self, const std::string &tier) {
            const kv::MemoryBackend &b = self.get().backend(parseTier(tier));
            nb::dict d;
            d["name"] = b.name();
            d["host_accessible"] = b.hostAccessible();
            d["dlpack_device"] =
                nb::make_tuple(b.dlpackDeviceType(), b.deviceId());
            d["alignment"] = b.alignment();
            return d;
          },
          "tier"_a)
      .def(
          "data_ptr",
          [](PyMemory &self, const std::string &tier) {
            return uintptr_t(self.get().data(parseTier(tier)));
          },
          "tier"_a)
      .def("buffer", &memoryBuffer, "tier"_a)
      .def("dlpack", &memoryDLPack, "tier"_a)
      .def("apply_copies", &applyCopies, "copies"_a);
}

} // namespace sits::runtime::python
