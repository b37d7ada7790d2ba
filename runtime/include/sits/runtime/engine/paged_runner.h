//===- paged_runner.h - The engine's runner for a paged-KV compiled decoder
//===//
//
// `PagedRunner` is the `ModelRunner` of a decoder compiled with
// `kv_cache="paged"`: its entry point takes input_ids [B, T] (i64),
// optionally position_ids [B, T] (i64), kv_pool (the device tier of a
// `kv::Memory`, [blocks, layers, kv, heads, block_size, head_dim]; i8 or
// f8E4M3FN [..., head_dim + 4] for a per_token_head pool: codes, then the
// scale), block_tables [B, N] (i32), slot_mapping [B, T] (i64) and
// context_lens [B] (i32), and returns logits [B, T or 1, vocab] (f32, or
// f16/bf16 widened to f32 for the engine). Attention reads every sequence's
// context through its block table and writes the new tokens' K/V into their
// slots, in the pool itself.
//
// A step runs as at most two calls: the decoding sequences (one new token
// each) together, then the prefilling ones together, left-padded to the
// longest (padding has slot -1 and writes nothing). Everything happens in
// C++: the step's arrays and the outputs are reused from step to step, so a
// decode step costs the compiled code plus a few microseconds.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_ENGINE_PAGED_RUNNER_H
#define SITS_RUNTIME_ENGINE_PAGED_RUNNER_H

#include "sits/runtime/buffer.h"
#include "sits/runtime/engine/model_runner.h"
#include "sits/runtime/kv/memory.h"
#include "sits/runtime/module.h"

#include <memory>
#include <string>
#include <vector>

namespace sits::runtime::engine {

struct PagedRunnerOptions {
  /// The decoder's entry point.
  std::string entry = "main";
  /// Which output holds the logits.
  int64_t logits_output = 0;
  /// The entry point computing the extents of outputs that no input extent
  /// determines (the manifest's "shape_function"), or empty.
  std::string shape_function;
};

class PagedRunner : public ModelRunner {
public:
  /// Checks the entry point has the paged signature and that `memory`'s
  /// device tier is the pool it expects (dtype and every extent but the
  /// block count); InvalidArgument naming what does not fit. The runner
  /// keeps `model` and `memory` alive.
  static StatusOr<std::unique_ptr<PagedRunner>>
  create(Module model, std::shared_ptr<kv::Memory> memory,
         PagedRunnerOptions options = {});

  /// Runs the batch's copies, then its sequences (one or two calls). The
  /// compiled code's own errors (a token id past the embedding table, ...)
  /// come back as they are.
  Status execute(const StepBatch &batch, StepOutput *out) override;

  /// The static last extent of the logits output, 0 when dynamic.
  int64_t vocabSize() const { return vocabSize_; }
  bool takesPositions() const override { return positionsIndex_ >= 0; }
  bool scoresAttention() const override { return true; }
  int64_t blockSize() const { return memory_->config().block_size; }
  /// `execute` calls, and model calls among them.
  int64_t steps() const { return steps_; }
  int64_t calls() const { return calls_; }

private:
  explicit PagedRunner(Module model) : model_(std::move(model)) {}
  /// One call over `seqs` (indices into batch.sequences); writes their rows
  /// of out->logits.
  Status run(const StepBatch &batch, const std::vector<size_t> &seqs,
             StepOutput *out);

  Module model_;
  std::shared_ptr<kv::Memory> memory_;
  PagedRunnerOptions options_;
  /// Positions of the inputs in the signature; -1 for an absent
  /// position_ids.
  int idsIndex_ = -1, positionsIndex_ = -1, poolIndex_ = -1, tablesIndex_ = -1,
      slotsIndex_ = -1, lensIndex_ = -1;
  size_t numInputs_ = 0;
  /// The entry point's outputs (the model keeps the specs alive).
  std::vector<const ArgSpec *> outputSpecs_;
  BufferView pool_;
  int64_t vocabSize_ = 0;
  int64_t steps_ = 0, calls_ = 0;
  // Reused from call to call.
  std::vector<int64_t> ids_, positions_, slots_;
  std::vector<int32_t> tables_, lens_;
  /// Whether block tables are padded to bucketed widths (a GPU model).
  bool bucketTables_ = false;
  /// Attention weights of the scored rows: [count][blocks * bs][kv heads],
  /// and each row's scored queries.
  std::vector<float> scores_;
  std::vector<int64_t> observe_;
  std::vector<size_t> decode_, prefill_;
  std::vector<BufferView> inputs_, outputs_;
  std::vector<AlignedBuffer> outputBuffers_;
};

} // namespace sits::runtime::engine

#endif // SITS_RUNTIME_ENGINE_PAGED_RUNNER_H
