//===- EngineBindings.cpp - The generation engine in sits_mlir._sits_runtime
//==//
//
// Binds runtime/include/sits/runtime/engine/ thinly; sits_mlir.runtime.engine
// is the Python face. The engine shares a native `KVAllocator`'s pool and
// runs either a native `PagedRunner` (a paged-KV compiled decoder: the step
// runs in C++ with the GIL released) or a Python callable as its
// ModelRunner, with the GIL held throughout: `runner(copies, sequences)`
// gets the copy tuples (as take_pending_copies returns them) and one dict
// per scheduled sequence, and returns float32 logits [len(sequences),
// vocab]. An exception the callable raises, or a failed model call, fails
// that step's requests and is re-raised by step()/run_until_done() (model
// errors as the core's typed exceptions, as Module.run raises them). Other
// errors are the KV family's typed exceptions.
//
//===----------------------------------------------------------------------===//
#include "PyStatus.h"
#include "sits/runtime/engine/engine.h"
#include "sits/runtime/engine/paged_runner.h"
#include "sits/runtime/kv/allocator.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace sits::runtime::python {
namespace {

namespace eng = ::sits::runtime::engine;
namespace kv = ::sits::runtime::kv;

[[noreturn]] void raiseEngine(const Status &st) { raise(st, ErrorDomain::kKV); }

[[noreturn]] void badEngineArgument(const std::string &name,
                                    const std::string &why) {
  ErrorInfo e;
  e.code = StatusCode::kInvalidArgument;
  e.subject = name;
  e.message = name + ": " + why;
  raiseEngine(Status(std::move(e)));
}

template <typename T> nb::object numpyCopy(const std::vector<T> &v) {
  auto *owned = new std::vector<T>(v);
  nb::capsule owner(
      owned, [](void *p) noexcept { delete static_cast<std::vector<T> *>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(
      owned->data(), {owned->size()}, owner));
}

using LogitsArray =
    nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

/// The ModelRunner over a Python callable. Keeps the first exception the
/// callable raised until the binding re-raises it.
class PyRunner : public eng::ModelRunner {
public:
  explicit PyRunner(nb::object fn) : fn_(std::move(fn)) {}

  Status execute(const eng::StepBatch &batch, eng::StepOutput *out) override {
    try {
      nb::list copies;
      for (const kv::BlockCopy &c : batch.copies)
        copies.append(nb::make_tuple(c.epoch, kv::tierName(c.src_tier), c.src,
                                     kv::tierName(c.dst_tier), c.dst,
                                     c.tokens));
      nb::list seqs;
      for (const eng::ScheduledSequence &q : batch.sequences) {
        nb::dict d;
        d["seq_id"] = q.seq_id;
        d["is_prefill"] = q.is_prefill;
        d["token_ids"] = numpyCopy(q.token_ids);
        d["positions"] = numpyCopy(q.positions);
        d["slot_mapping"] = numpyCopy(q.slot_mapping);
        d["block_table"] = numpyCopy(q.block_table);
        d["context_len"] = q.context_len;
        seqs.append(d);
      }
      nb::object result = fn_(copies, seqs);
      LogitsArray logits;
      if (!nb::try_cast(result, logits, /*convert=*/true))
        return Status(StatusCode::kInvalidArgument,
                      "the model runner must return float32 logits of shape "
                      "[num_sequences, vocab]");
      if (logits.shape(0) != batch.sequences.size() || logits.shape(1) == 0)
        return Status(StatusCode::kInvalidArgument,
                      "the model runner returned logits of shape [" +
                          std::to_string(logits.shape(0)) + ", " +
                          std::to_string(logits.shape(1)) + "] for " +
                          std::to_string(batch.sequences.size()) +
                          " sequences");
      out->vocab_size = static_cast<int64_t>(logits.shape(1));
      out->logits.resize(logits.size());
      std::memcpy(out->logits.data(), logits.data(),
                  logits.size() * sizeof(float));
      return Status::OK();
    } catch (nb::python_error &e) {
      std::string what = e.what();
      if (!pending_)
        pending_.emplace(std::move(e));
      return Status(StatusCode::kInternal, "the model runner raised: " + what);
    }
  }

  /// Re-raises the runner's exception, if any.
  void rethrow() {
    if (!pending_)
      return;
    nb::python_error e = std::move(*pending_);
    pending_.reset();
    throw e;
  }

private:
  nb::object fn_;
  std::optional<nb::python_error> pending_;
};

/// The native PagedRunner (sits_mlir.runtime.decoder.PagedRunner's core).
/// Keeps the first failure of a model call until the binding raises it.
/// Not thread-safe: one engine (or caller) drives it.
class PyPagedRunner : public eng::ModelRunner {
public:
  PyPagedRunner(const Module &model, nb::handle memory,
                const std::string &entry, int64_t logitsOutput,
                const std::string &shapeFunction) {
    eng::PagedRunnerOptions options;
    options.entry = entry;
    options.logits_output = logitsOutput;
    options.shape_function = shapeFunction;
    auto r = eng::PagedRunner::create(model, sharedMemory(memory), options);
    if (!r.ok()) // InvalidArgument: a ValueError, like the engine's own
      raiseEngine(r.status());
    runner_ = std::move(*r);
  }

  Status execute(const eng::StepBatch &batch, eng::StepOutput *out) override {
    Status st = runner_->execute(batch, out);
    if (!st.ok() && !pending_)
      pending_ = st;
    return st;
  }
  bool takesPositions() const override { return runner_->takesPositions(); }
  bool scoresAttention() const override { return runner_->scoresAttention(); }

  /// Raises the failure of a model call, if any.
  void rethrow() {
    if (!pending_)
      return;
    Status st = std::move(*pending_);
    pending_.reset();
    raise(st);
  }

  /// One step outside an engine: `copies` as take_pending_copies returns
  /// them, `sequences` ScheduledSequence tuples (seq_id, is_prefill,
  /// token_ids, positions, slot_mapping, block_table, context_len).
  nb::object executePy(nb::handle copies, nb::handle sequences) {
    eng::StepBatch batch;
    batch.copies = parseCopies(copies);
    size_t i = 0;
    for (nb::handle item : nb::iter(sequences)) {
      eng::ScheduledSequence q;
      try {
        if (nb::len(item) != 7)
          throw nb::cast_error();
        q.seq_id = nb::cast<uint64_t>(item[0]);
        q.is_prefill = nb::cast<bool>(item[1]);
        q.token_ids = nb::cast<std::vector<int32_t>>(item[2]);
        q.positions = nb::cast<std::vector<int64_t>>(item[3]);
        q.slot_mapping = nb::cast<std::vector<int64_t>>(item[4]);
        q.block_table = nb::cast<std::vector<int32_t>>(item[5]);
        q.context_len = nb::cast<int64_t>(item[6]);
      } catch (nb::cast_error &) {
        badEngineArgument("sequences",
                          "item " + std::to_string(i) +
                              ": expected a ScheduledSequence (seq_id, "
                              "is_prefill, token_ids, positions, "
                              "slot_mapping, block_table, context_len)");
      }
      batch.sequences.push_back(std::move(q));
      ++i;
    }
    auto *out = new eng::StepOutput();
    Status st;
    {
      nb::gil_scoped_release release;
      st = runner_->execute(batch, out);
    }
    if (!st.ok()) {
      delete out;
      raise(st);
    }
    nb::capsule owner(out, [](void *p) noexcept {
      delete static_cast<eng::StepOutput *>(p);
    });
    size_t vocab = size_t(out->vocab_size);
    return nb::cast(nb::ndarray<nb::numpy, float, nb::ndim<2>>(
        out->logits.data(), {batch.sequences.size(), vocab}, owner));
  }

  const eng::PagedRunner &get() const { return *runner_; }

private:
  std::unique_ptr<eng::PagedRunner> runner_;
  std::optional<Status> pending_;
};

eng::PreemptionMode parsePreemption(const std::string &name) {
  if (name == eng::preemptionModeName(eng::PreemptionMode::kRecompute))
    return eng::PreemptionMode::kRecompute;
  if (name == eng::preemptionModeName(eng::PreemptionMode::kSwap))
    return eng::PreemptionMode::kSwap;
  badEngineArgument("preemption", "'" + name + "': supported: recompute, swap");
}

nb::dict requestMetricsDict(const eng::RequestMetrics &m) {
  nb::dict d;
  d["arrival_s"] = m.arrival_s;
  d["first_token_s"] = m.first_token_s;
  d["finish_s"] = m.finish_s;
  d["ttft_s"] = m.ttft_s;
  d["tpot_s"] = m.tpot_s;
  d["prompt_tokens"] = m.prompt_tokens;
  d["output_tokens"] = m.output_tokens;
  d["cached_tokens"] = m.cached_tokens;
  d["preemptions"] = m.preemptions;
  d["evicted_tokens"] = m.evicted_tokens;
  return d;
}

eng::EvictionPolicy parseEviction(const std::string &name) {
  for (eng::EvictionPolicy p :
       {eng::EvictionPolicy::kNone, eng::EvictionPolicy::kWindow,
        eng::EvictionPolicy::kAttention})
    if (name == eng::evictionPolicyName(p))
      return p;
  badEngineArgument("eviction",
                    "'" + name + "': supported: none, window, attention");
}

nb::dict engineMetricsDict(const eng::EngineMetrics &m) {
  nb::dict d;
#define SITS_ENGINE_METRIC(name) d[#name] = m.name;
  SITS_ENGINE_METRIC(steps)
  SITS_ENGINE_METRIC(prefills)
  SITS_ENGINE_METRIC(decodes)
  SITS_ENGINE_METRIC(computed_tokens)
  SITS_ENGINE_METRIC(output_tokens)
  SITS_ENGINE_METRIC(preemptions)
  SITS_ENGINE_METRIC(swap_outs)
  SITS_ENGINE_METRIC(swap_ins)
  SITS_ENGINE_METRIC(prefix_cache_hit_tokens)
  SITS_ENGINE_METRIC(evicted_tokens)
  SITS_ENGINE_METRIC(evicted_blocks)
  SITS_ENGINE_METRIC(requests_finished)
  SITS_ENGINE_METRIC(requests_failed)
  SITS_ENGINE_METRIC(requests_aborted)
  SITS_ENGINE_METRIC(busy_s)
  SITS_ENGINE_METRIC(tokens_per_s)
  SITS_ENGINE_METRIC(kv_blocks_peak)
  SITS_ENGINE_METRIC(kv_utilization_peak)
  SITS_ENGINE_METRIC(kv_utilization_mean)
  SITS_ENGINE_METRIC(mean_ttft_s)
  SITS_ENGINE_METRIC(mean_tpot_s)
#undef SITS_ENGINE_METRIC
  return d;
}

class PyEngine {
public:
  PyEngine(nb::handle allocator, nb::object runner, int64_t maxBatchSize,
           uint64_t seed, const std::string &preemption, int64_t vocabSize)
      : alloc_(sharedAllocator(allocator)), runnerObject_(runner) {
    eng::ModelRunner *used;
    if (nb::isinstance<PyPagedRunner>(runner)) {
      native_ = &nb::cast<PyPagedRunner &>(runner);
      used = native_;
    } else {
      callable_ = std::make_unique<PyRunner>(std::move(runner));
      used = callable_.get();
    }
    eng::EngineConfig cfg;
    cfg.max_batch_size = maxBatchSize;
    cfg.vocab_size = vocabSize;
    cfg.seed = seed;
    cfg.preemption = parsePreemption(preemption);
    auto e = eng::Engine::create(cfg, alloc_.get(), used);
    if (!e.ok())
      raiseEngine(e.status());
    engine_ = std::move(*e);
  }

  uint64_t addRequest(std::vector<int32_t> prompt, int64_t maxNewTokens,
                      float temperature, int32_t topK, float topP,
                      std::optional<uint64_t> seed, int64_t n,
                      std::vector<int32_t> stopTokens, int32_t logprobs,
                      const std::string &eviction, int64_t budget,
                      int64_t sinkTokens, int64_t recentTokens, int64_t observe,
                      std::vector<int32_t> forcedTokens, bool returnLogits) {
    eng::Request r;
    r.prompt = std::move(prompt);
    r.max_new_tokens = maxNewTokens;
    r.sampling.temperature = temperature;
    r.sampling.top_k = topK;
    r.sampling.top_p = topP;
    r.sampling.seed = seed;
    r.n = n;
    r.stop_tokens = std::move(stopTokens);
    r.logprobs = logprobs;
    r.eviction.policy = parseEviction(eviction);
    r.eviction.budget = budget;
    r.eviction.sink_tokens = sinkTokens;
    r.eviction.recent_tokens = recentTokens;
    r.eviction.observe = observe;
    r.forced_tokens = std::move(forcedTokens);
    r.return_logits = returnLogits;
    auto id = engine_->addRequest(std::move(r));
    if (!id.ok())
      raiseEngine(id.status());
    return *id;
  }

  void step() {
    finish(native_ ? withoutGil([&] { return engine_->step(); })
                   : engine_->step());
  }

  void runUntilDone() {
    finish(native_ ? withoutGil([&] { return engine_->runUntilDone(); })
                   : engine_->runUntilDone());
  }

  /// (id, finished, error (code, message) or None, [(tokens, reason,
  /// logprobs or None, top logprobs [[(token, logprob)]] or None, logits
  /// [tokens, vocab] or None)], metrics dict).
  nb::tuple result(uint64_t id) const {
    auto r = engine_->result(id);
    if (!r.ok())
      raiseEngine(r.status());
    nb::list samples;
    const int32_t wanted = r->logprobs;
    for (const eng::SampleResult &s : r->samples) {
      nb::object logprobs = nb::none(), top = nb::none();
      if (wanted >= 0)
        logprobs = numpyCopy(s.logprobs);
      if (wanted > 0) {
        nb::list rows;
        for (const auto &best : s.top_logprobs) {
          nb::list row;
          for (const eng::TokenLogprob &t : best)
            row.append(nb::make_tuple(t.token, t.logprob));
          rows.append(row);
        }
        top = rows;
      }
      nb::object logits = nb::none();
      if (!s.tokens.empty() && !s.logits.empty()) {
        const int64_t rows = static_cast<int64_t>(s.tokens.size());
        logits = numpyCopy(s.logits).attr("reshape")(
            rows, static_cast<int64_t>(s.logits.size()) / rows);
      }
      samples.append(nb::make_tuple(numpyCopy(s.tokens),
                                    eng::finishReasonName(s.finish_reason),
                                    logprobs, top, logits));
    }
    nb::object error = nb::none();
    if (!r->status.ok())
      error =
          nb::make_tuple(statusCodeName(r->status.code()), r->status.message());
    return nb::make_tuple(r->id, r->finished, error, samples,
                          requestMetricsDict(r->metrics));
  }

  void release(uint64_t id) {
    Status st = engine_->release(id);
    if (!st.ok())
      raiseEngine(st);
  }

  void abort(uint64_t id) {
    Status st = engine_->abort(id);
    if (!st.ok())
      raiseEngine(st);
  }

  nb::dict metrics() const { return engineMetricsDict(engine_->metrics()); }
  bool hasUnfinished() const { return engine_->hasUnfinished(); }
  size_t numRunning() const { return engine_->numRunning(); }
  size_t numWaiting() const { return engine_->numWaiting(); }
  size_t numSwapped() const { return engine_->numSwapped(); }

private:
  template <typename F> static Status withoutGil(F &&f) {
    nb::gil_scoped_release release;
    return f();
  }
  /// Raises the runner's error first (it failed the step), else the step's.
  void finish(const Status &st) {
    if (native_)
      native_->rethrow();
    else
      callable_->rethrow();
    if (!st.ok())
      raiseEngine(st);
  }

  std::shared_ptr<kv::Allocator> alloc_;
  /// The runner: a native one (kept alive by runnerObject_) or a callable.
  nb::object runnerObject_;
  PyPagedRunner *native_ = nullptr;
  std::unique_ptr<PyRunner> callable_;
  std::unique_ptr<eng::Engine> engine_;
};

/// `logits`: a float32 1-D row (an object, so that the signature stays
/// plain Python for the stub check).
int32_t samplePy(nb::handle row, float temperature, int32_t topK, float topP,
                 uint64_t seed, uint64_t stream, uint64_t step) {
  nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu> logits;
  if (!nb::try_cast(row, logits, /*convert=*/true))
    badEngineArgument("logits", "expected a 1-D float32 array");
  eng::SamplingParams p;
  p.temperature = temperature;
  p.top_k = topK;
  p.top_p = topP;
  eng::Sampler sampler;
  auto t = sampler.sample(logits.data(), static_cast<int64_t>(logits.shape(0)),
                          p, seed, stream, step);
  if (!t.ok())
    raiseEngine(t.status());
  return *t;
}

} // namespace

void bindEngine(nb::module_ &m) {
  nb::class_<PyPagedRunner>(
      m, "PagedRunner",
      "The engine's runner for a paged-KV compiled decoder (C++ core). Use "
      "sits_mlir.runtime.decoder.PagedRunner.")
      .def(nb::init<const Module &, nb::handle, const std::string &, int64_t,
                    const std::string &>(),
           "module"_a, "memory"_a, "entry"_a, "logits_output"_a,
           "shape_function"_a)
      .def("execute", &PyPagedRunner::executePy, "copies"_a, "sequences"_a)
      .def_prop_ro("vocab_size",
                   [](const PyPagedRunner &r) { return r.get().vocabSize(); })
      .def_prop_ro("block_size",
                   [](const PyPagedRunner &r) { return r.get().blockSize(); })
      .def_prop_ro(
          "takes_positions",
          [](const PyPagedRunner &r) { return r.get().takesPositions(); })
      .def_prop_ro("steps",
                   [](const PyPagedRunner &r) { return r.get().steps(); })
      .def_prop_ro("calls",
                   [](const PyPagedRunner &r) { return r.get().calls(); });
  nb::class_<PyEngine>(m, "Engine",
                       "The generation engine (C++ core). Use "
                       "sits_mlir.runtime.engine.Engine.")
      .def(nb::init<nb::handle, nb::object, int64_t, uint64_t,
                    const std::string &, int64_t>(),
           "allocator"_a, "runner"_a, "max_batch_size"_a, "seed"_a,
           "preemption"_a, "vocab_size"_a = 0)
      .def("add_request", &PyEngine::addRequest, "prompt"_a, "max_new_tokens"_a,
           "temperature"_a, "top_k"_a, "top_p"_a, "seed"_a.none(), "n"_a,
           "stop_tokens"_a, "logprobs"_a, "eviction"_a = "none",
           "kv_budget"_a = 0, "sink_tokens"_a = 4, "recent_tokens"_a = -1,
           "observe"_a = 32, "forced_tokens"_a = std::vector<int32_t>(),
           "return_logits"_a = false)
      .def("step", &PyEngine::step)
      .def("run_until_done", &PyEngine::runUntilDone)
      .def("result", &PyEngine::result, "request_id"_a)
      .def("release", &PyEngine::release, "request_id"_a)
      .def("abort", &PyEngine::abort, "request_id"_a)
      .def("metrics", &PyEngine::metrics)
      .def_prop_ro("has_unfinished", &PyEngine::hasUnfinished)
      .def_prop_ro("num_running", &PyEngine::numRunning)
      .def_prop_ro("num_waiting", &PyEngine::numWaiting)
      .def_prop_ro("num_swapped", &PyEngine::numSwapped);
  m.def("engine_sample", &samplePy, "logits"_a, "temperature"_a, "top_k"_a,
        "top_p"_a, "seed"_a, "stream"_a, "step"_a,
        "One draw of the engine's sampler (float32 logits row).");
}

} // namespace sits::runtime::python
