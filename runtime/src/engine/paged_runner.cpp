//===- paged_runner.cpp - The engine's runner for a paged-KV compiled decoder
//===//
//
// See paged_runner.h. The arrays of a call are built in place in vectors
// kept from step to step, and the outputs are kept too (reallocated only
// when a call needs more), so a decode step allocates nothing here.
//
//===----------------------------------------------------------------------===//
#include "sits/runtime/engine/paged_runner.h"

#include "sits/runtime/attention_scores.h"
#include "sits/runtime/half.h"
#include "sits/runtime/kivi_layout.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace sits::runtime::engine {
namespace {

Status badModel(const std::string &entry, const std::string &why) {
  return Status(StatusCode::kInvalidArgument,
                "entry point '" + entry +
                    "' does not have the paged decoder signature (input_ids, "
                    "kv_pool, block_tables, slot_mapping, context_lens, "
                    "optionally position_ids): " +
                    why + "; compile it with kv_cache='paged'")
      .withSubject(entry);
}

/// The runtime dtype of a KV pool's elements.
std::optional<DType> poolDType(kv::DType dtype) {
  switch (dtype) {
  case kv::DType::kF32:
    return DType::kF32;
  case kv::DType::kF16:
    return DType::kF16;
  case kv::DType::kBF16:
    return DType::kBF16;
  case kv::DType::kFP8E4M3:
    return DType::kF8E4M3FN;
  case kv::DType::kFP8E5M2:
    return DType::kF8E5M2;
  case kv::DType::kInt8:
  // KIVI blocks of 4- or 2-bit codes are passed as their bytes.
  case kv::DType::kInt4:
  case kv::DType::kInt2:
    return DType::kI8;
  }
  return std::nullopt;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// " (kivi blocks of int4 codes: 8 layers, ...)"; "per-token blocks" with
/// keys quantized per token.
std::string kiviText(const ArgSpec::Kivi &k) {
  const bool perToken = (k.bits & kivi::kKeysPerToken) != 0;
  std::string codes;
  if (k.bits == kivi::kMixedWidths) {
    codes = " (kivi blocks of widths [";
    for (size_t i = 0; i < k.widths.size(); ++i)
      codes += (i ? "," : "") + std::to_string(k.widths[i]);
    codes += "] per head";
  } else {
    codes = std::string(perToken ? " (per-token blocks of int"
                                 : " (kivi blocks of int") +
            std::to_string(k.bits & ~kivi::kKeysPerToken) + " codes";
  }
  return codes + ": " + std::to_string(k.layers) + " layers, " +
         std::to_string(k.kvHeads) + " kv heads, blocks of " +
         std::to_string(k.blockSize) + ", head dim " +
         std::to_string(k.headDim) + ")";
}

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// Row `src` of logits of type `dtype` (f32, f16 or bf16) as floats.
void widenRow(DType dtype, const void *src, int64_t n, float *dst) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
    return;
  }
  const uint16_t *h = static_cast<const uint16_t *>(src);
  for (int64_t i = 0; i < n; ++i)
    dst[i] = dtype == DType::kBF16 ? fromBits(uint32_t(h[i]) << 16)
                                   : halfToFloat(h[i]);
}

} // namespace

StatusOr<std::unique_ptr<PagedRunner>>
PagedRunner::create(Module model, std::shared_ptr<kv::Memory> memory,
                    PagedRunnerOptions options) {
  if (!memory)
    return Status(StatusCode::kInvalidArgument, "memory: null")
        .withSubject("memory");
  const EntryPointSpec *ep = model.signature(options.entry);
  if (!ep)
    return Status(StatusCode::kInvalidArgument,
                  "the model has no entry point named '" + options.entry + "'")
        .withSubject(options.entry);
  if (!options.shape_function.empty() &&
      !model.signature(options.shape_function))
    return Status(StatusCode::kInvalidArgument,
                  "the model has no shape function named '" +
                      options.shape_function + "'")
        .withSubject(options.shape_function);

  std::unique_ptr<PagedRunner> r(new PagedRunner(model));
  std::vector<const ArgSpec *> inputs = ep->inputs();
  struct Expected {
    std::string_view name;
    int *index;
    DType dtype;
    int64_t rank;
    bool optional;
  };
  const Expected expected[] = {
      {"input_ids", &r->idsIndex_, DType::kI64, 2, false},
      {"position_ids", &r->positionsIndex_, DType::kI64, 2, true},
      {"kv_pool", &r->poolIndex_, DType::kF32, 6, false},
      {"block_tables", &r->tablesIndex_, DType::kI32, 2, false},
      {"slot_mapping", &r->slotsIndex_, DType::kI64, 2, false},
      {"context_lens", &r->lensIndex_, DType::kI32, 1, false},
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Expected *e = nullptr;
    for (const Expected &c : expected)
      if (c.name == inputs[i]->name)
        e = &c;
    if (!e || *e->index >= 0)
      return badModel(options.entry, "it takes '" + inputs[i]->name + "'");
    // The pool's dtype is the model's choice; it is checked against the
    // memory below.
    if ((e->name != "kv_pool" &&
         (inputs[i]->dtype != e->dtype || inputs[i]->rank() != e->rank)))
      return badModel(options.entry, "its input '" + inputs[i]->name + "' is " +
                                         inputs[i]->typeString());
    *e->index = int(i);
  }
  for (const Expected &c : expected)
    if (*c.index < 0 && !c.optional)
      return badModel(options.entry,
                      "it has no input '" + std::string(c.name) + "'");
  r->numInputs_ = inputs.size();
  // On a GPU, calls whose shapes repeat are recorded and replayed: a
  // decode batch's tables grow by a block every block_size steps, so
  // their width is rounded up to a few buckets per doubling.
  r->bucketTables_ = model.device().kind() != DeviceKind::kCpu &&
                     inputs[size_t(r->tablesIndex_)]->shape[1] < 0;

  // The pool: the memory's device tier, as the model declares it. A row is
  // token_stride bytes: head_dim elements, plus the f32 scale of a quantized
  // pool (per_token_head: i8 or f8E4M3FN [..., head_dim + 4], one-byte codes
  // then the scale's bytes).
  const ArgSpec &poolSpec = *inputs[size_t(r->poolIndex_)];
  const kv::PoolConfig &config = memory->config();
  const kv::MemoryLayout &layout = memory->layout();
  std::optional<DType> dtype = poolDType(config.dtype);
  std::vector<int64_t> shape = {memory->numBlocks(kv::Tier::kDevice),
                                layout.num_layers,
                                layout.kv_factor,
                                layout.num_kv_heads,
                                layout.block_size,
                                layout.token_stride / layout.elem_size};
  // KIVI blocks: bytes [blocks, block_stride] (their geometry sets the stride).
  if (kv::isKiviLayout(config.quantization))
    shape = {memory->numBlocks(kv::Tier::kDevice), layout.block_stride};
  bool fits = dtype && *dtype == poolSpec.dtype &&
              poolSpec.rank() == int64_t(shape.size());
  // KIVI: the stride alone does not tell geometries apart (the blocks are
  // page-rounded); the manifest names the model's.
  const ArgSpec::Kivi &kivi = poolSpec.kivi;
  const bool kiviPool = kv::isKiviLayout(config.quantization);
  if (kiviPool != (kivi.bits != 0) ||
      (kiviPool &&
       (kivi.bits != kv::kiviMode(config) || kivi.layers != config.num_layers ||
        kivi.kvHeads != config.num_kv_heads ||
        kivi.blockSize != config.block_size ||
        kivi.headDim != config.head_dim || kivi.widths != config.kivi_widths)))
    fits = false;
  for (size_t d = 1; d < shape.size(); ++d)
    fits = fits && (poolSpec.shape[d] < 0 || poolSpec.shape[d] == shape[d]);
  if (!fits) {
    std::string have = kv::dtypeName(config.dtype) + shapeToString(shape);
    if (config.quantization == kv::KVQuantization::kPerTokenHead)
      have += std::string(" (") + kv::kvQuantizationName(config.quantization) +
              ": " + std::to_string(layout.head_dim) +
              " codes + an f32 scale per row)";
    else if (kiviPool)
      have += kiviText({kv::kiviMode(config), config.num_layers,
                        config.num_kv_heads, config.block_size, config.head_dim,
                        config.kivi_widths});
    std::string want = poolSpec.typeString();
    if (kivi.bits)
      want += kiviText(kivi);
    return Status(StatusCode::kInvalidArgument,
                  "the KV pool is " + have +
                      ", the model expects kv_pool: " + want)
        .withSubject("kv_pool")
        .withExpected(want, have);
  }
  r->pool_ = BufferView(memory->data(kv::Tier::kDevice), *dtype, shape);
  // A pool in a GPU's memory is passed as it lies; the model must run on
  // that GPU (Module::run checks).
  const kv::MemoryBackend &backend = memory->backend(kv::Tier::kDevice);
  if (!backend.hostAccessible()) {
    r->pool_.deviceType = backend.dlpackDeviceType();
    r->pool_.deviceId = backend.deviceId();
  }

  std::vector<const ArgSpec *> outputs = ep->outputs();
  if (options.logits_output < 0 ||
      size_t(options.logits_output) >= outputs.size())
    return Status(StatusCode::kInvalidArgument,
                  "logits_output " + std::to_string(options.logits_output) +
                      ": the entry point has " +
                      std::to_string(outputs.size()) + " outputs")
        .withSubject("logits_output");
  const ArgSpec &logits = *outputs[size_t(options.logits_output)];
  const bool floating = logits.dtype == DType::kF32 ||
                        logits.dtype == DType::kF16 ||
                        logits.dtype == DType::kBF16;
  if (!floating || logits.rank() != 3)
    return badModel(options.entry,
                    "its logits output is " + logits.typeString() +
                        " (expected f32, f16 or bf16 [batch, tokens, vocab])");
  r->vocabSize_ = std::max<int64_t>(logits.shape[2], 0);
  r->outputSpecs_ = std::move(outputs);

  r->memory_ = std::move(memory);
  r->options_ = std::move(options);
  r->inputs_.resize(r->numInputs_);
  return r;
}

Status PagedRunner::execute(const StepBatch &batch, StepOutput *out) {
  // Every sequence is checked before anything runs: a bad one leaves the
  // pool untouched.
  const int64_t blockSize = memory_->config().block_size;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const ScheduledSequence &q = batch.sequences[i];
    const int64_t n = int64_t(q.token_ids.size());
    if (n == 0 || q.positions.size() != q.token_ids.size() ||
        q.slot_mapping.size() != q.token_ids.size() || q.context_len < n ||
        q.context_len > INT32_MAX ||
        int64_t(q.block_table.size()) < ceilDiv(q.context_len, blockSize))
      return Status(StatusCode::kInvalidArgument,
                    "sequence " + std::to_string(q.seq_id) +
                        ": it needs at least one token, a position and a slot "
                        "per token, a context length in [tokens, 2^31) and "
                        "a block table covering it")
          .withSubject("sequences")
          .withIndex(int64_t(i));
  }
  SITS_RETURN_IF_ERROR(memory_->apply(batch.copies));
  decode_.clear();
  prefill_.clear();
  for (size_t i = 0; i < batch.sequences.size(); ++i)
    (batch.sequences[i].token_ids.size() == 1 ? decode_ : prefill_)
        .push_back(i);
  // Every sequence's row is written; the logits' storage is kept.
  out->vocab_size = 0;
  out->attention.resize(batch.sequences.size());
  for (std::vector<float> &a : out->attention)
    a.clear();
  out->attention_heads = memory_->config().num_kv_heads;
  if (batch.sequences.empty())
    out->logits.clear();
  for (const std::vector<size_t> *group : {&decode_, &prefill_})
    if (!group->empty())
      SITS_RETURN_IF_ERROR(run(batch, *group, out));
  ++steps_;
  return Status::OK();
}

Status PagedRunner::run(const StepBatch &batch, const std::vector<size_t> &seqs,
                        StepOutput *out) {
  const int64_t blockSize = memory_->config().block_size;
  const int64_t count = int64_t(seqs.size());
  int64_t width = 0, blocks = 0;
  for (size_t i : seqs) {
    const ScheduledSequence &q = batch.sequences[i];
    width = std::max<int64_t>(width, int64_t(q.token_ids.size()));
    blocks = std::max(blocks, ceilDiv(q.context_len, blockSize));
  }
  if (bucketTables_) {
    // Granules of a quarter of the width's power of two (at least 4 blocks):
    // at most a quarter of the entries are padding.
    int64_t granule = 4;
    while (granule * 8 <= blocks)
      granule *= 2;
    blocks = ceilDiv(blocks, granule) * granule;
  }

  // Left-padded rows: padding has token 0, position 0, slot -1 (written
  // nowhere) and table entries 0 (the null block, never read past the
  // context length).
  ids_.assign(size_t(count * width), 0);
  positions_.assign(size_t(count * width), 0);
  slots_.assign(size_t(count * width), -1);
  tables_.assign(size_t(count * blocks), 0);
  lens_.resize(size_t(count));
  for (int64_t r = 0; r < count; ++r) {
    const ScheduledSequence &q = batch.sequences[seqs[size_t(r)]];
    const size_t n = q.token_ids.size();
    const size_t at = size_t(r * width + width) - n;
    std::copy(q.token_ids.begin(), q.token_ids.end(), ids_.begin() + at);
    std::copy(q.positions.begin(), q.positions.end(), positions_.begin() + at);
    std::copy(q.slot_mapping.begin(), q.slot_mapping.end(),
              slots_.begin() + at);
    std::copy_n(q.block_table.begin(), ceilDiv(q.context_len, blockSize),
                tables_.begin() + r * blocks);
    lens_[size_t(r)] = int32_t(q.context_len);
  }
  inputs_[size_t(idsIndex_)] =
      BufferView(ids_.data(), DType::kI64, {count, width});
  if (positionsIndex_ >= 0)
    inputs_[size_t(positionsIndex_)] =
        BufferView(positions_.data(), DType::kI64, {count, width});
  inputs_[size_t(poolIndex_)] = pool_;
  inputs_[size_t(tablesIndex_)] =
      BufferView(tables_.data(), DType::kI32, {count, blocks});
  inputs_[size_t(slotsIndex_)] =
      BufferView(slots_.data(), DType::kI64, {count, width});
  inputs_[size_t(lensIndex_)] = BufferView(lens_.data(), DType::kI32, {count});

  std::vector<std::vector<int64_t>> shapes;
  if (options_.shape_function.empty()) {
    StatusOr<std::vector<std::vector<int64_t>>> s =
        model_.outputShapes(options_.entry, inputs_);
    if (!s.ok())
      return s.status();
    shapes = std::move(*s);
  } else {
    // The shape function's i64 extents fill the dynamic dimensions, in
    // output order.
    StatusOr<std::vector<std::vector<int64_t>>> fs =
        model_.outputShapes(options_.shape_function, inputs_);
    if (!fs.ok())
      return fs.status();
    if (fs->size() != 1 || fs->front().size() != 1)
      return Status(StatusCode::kInvalidArgument,
                    "shape function '" + options_.shape_function +
                        "' must return one 1-D i64 array");
    std::vector<int64_t> extents(size_t(fs->front()[0]));
    SITS_RETURN_IF_ERROR(model_.run(
        options_.shape_function, inputs_,
        {BufferView(extents.data(), DType::kI64, {int64_t(extents.size())})}));
    size_t next = 0;
    for (const ArgSpec *o : outputSpecs_) {
      std::vector<int64_t> shape = o->shape;
      for (int64_t &d : shape)
        if (d < 0) {
          if (next >= extents.size() || extents[next] < 0)
            return Status(StatusCode::kOutOfRange,
                          "shape function '" + options_.shape_function +
                              "' gave too few or negative extents");
          d = extents[next++];
        }
      shapes.push_back(std::move(shape));
    }
  }

  outputBuffers_.resize(shapes.size());
  outputs_.resize(shapes.size());
  const std::vector<const ArgSpec *> &outSpecs = outputSpecs_;
  for (size_t i = 0; i < shapes.size(); ++i) {
    size_t bytes = size_t(dtypeSize(outSpecs[i]->dtype));
    for (int64_t d : shapes[i])
      bytes *= size_t(d);
    if (outputBuffers_[i].size() < std::max<size_t>(bytes, 1)) {
      StatusOr<AlignedBuffer> b =
          AlignedBuffer::allocate(std::max<size_t>(bytes, 1));
      if (!b.ok())
        return b.status();
      outputBuffers_[i] = std::move(*b);
    }
    outputs_[i] =
        BufferView(outputBuffers_[i].data(), outSpecs[i]->dtype, shapes[i]);
  }
  // Score-based eviction: the kernels add the scored rows' attention
  // weights to scores_ while it is attached to the pool.
  int64_t observe = 0;
  for (size_t i : seqs)
    observe = std::max(observe, batch.sequences[i].score_queries);
  const int64_t heads = memory_->config().num_kv_heads;
  const int64_t positions = blocks * blockSize;
  if (observe > 0) {
    scores_.assign(size_t(count * positions * heads), 0.f);
    observe_.resize(size_t(count));
    for (int64_t r = 0; r < count; ++r)
      observe_[size_t(r)] = batch.sequences[seqs[size_t(r)]].score_queries;
    AttentionScores sink;
    sink.out = scores_.data();
    sink.rows = count;
    sink.positions = positions;
    sink.kv_heads = heads;
    sink.observe = observe;
    sink.row_observe = observe_.data();
    SITS_RETURN_IF_ERROR(attachAttentionScores(
        pool_.data, pool_.numElements() * dtypeSize(pool_.dtype), sink));
  }
  Status ran = model_.run(options_.entry, inputs_, outputs_);
  if (observe > 0)
    detachAttentionScores(pool_.data);
  SITS_RETURN_IF_ERROR(ran);
  ++calls_;
  if (observe > 0)
    for (int64_t r = 0; r < count; ++r) {
      const ScheduledSequence &q = batch.sequences[seqs[size_t(r)]];
      if (q.score_queries <= 0)
        continue;
      const float *row = scores_.data() + r * positions * heads;
      out->attention[seqs[size_t(r)]].assign(row, row + q.context_len * heads);
    }

  // Each sequence's row is the logits of its last position.
  const std::vector<int64_t> &logits = shapes[size_t(options_.logits_output)];
  const int64_t rows = logits[1], vocab = logits[2];
  if (logits[0] != count || rows < 1 || vocab < 1)
    return Status(StatusCode::kInternal, "the model returned logits of shape " +
                                             shapeToString(logits) + " for " +
                                             std::to_string(count) +
                                             " sequences");
  if (out->vocab_size == 0) {
    out->vocab_size = vocab;
    out->logits.resize(batch.sequences.size() * size_t(vocab));
  } else if (out->vocab_size != vocab) {
    return Status(StatusCode::kInternal,
                  "the model's calls of one step returned different vocabulary "
                  "sizes");
  }
  const size_t li = size_t(options_.logits_output);
  const DType dtype = outSpecs[li]->dtype;
  const auto *src = static_cast<const uint8_t *>(outputBuffers_[li].data());
  const size_t rowBytes = size_t(vocab) * size_t(dtypeSize(dtype));
  for (int64_t r = 0; r < count; ++r)
    widenRow(dtype, src + size_t((r + 1) * rows - 1) * rowBytes, vocab,
             out->logits.data() + seqs[size_t(r)] * size_t(vocab));
  return Status::OK();
}

} // namespace sits::runtime::engine
