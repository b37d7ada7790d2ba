//===- module.h - A loaded compiled model
//----------------------------------===//
//
// `Module::load` verifies an artifact (integrity, then compatibility with
// this host), loads its code from memory and resolves its entry points.
// `Module::run` calls an entry point with caller-owned buffers:
//
//   auto m = sits::runtime::Module::load("model.sitsm");
//   if (!m.ok()) { std::cerr << m.status().toString(); return 1; }
//   float x[8], y[8];
//   BufferView in(x, DType::kF32, {2, 4}), out(y, DType::kF32, {2, 4});
//   Status s = m->run("main", {in}, {out});
//
// A Module is a cheap, copyable handle; copies share the loaded code, which
// is unloaded with the last copy. `run` may be called from many threads at
// once. Compiled code that splits work across threads uses the process-wide
// pool of `thread_pool.h`.
//
// On a GPU (`LoadOptions::device` "cuda:0", "hip:0") the weights are
// uploaded to the device once, at load; each `run` takes the caller's host
// buffers, copies the inputs to device buffers, runs the code on a stream of
// its own and copies the outputs back before returning. Driver failures are
// kDriverError.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_MODULE_H
#define SITS_RUNTIME_MODULE_H

#include "sits/runtime/artifact.h"
#include "sits/runtime/buffer.h"
#include "sits/runtime/device.h"
#include "sits/runtime/export.h"
#include "sits/runtime/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sits::runtime {

struct LoadOptions {
  /// Device URI (see device.h): "cpu" for CPU artifacts, "cuda:N" / "hip:N"
  /// for artifacts compiled for that kind of GPU.
  std::string device = "cpu";
  /// What the reader verifies (artifact.h): by default everything,
  /// Verify::kMetadata skips the weights digest.
  Verify verify = Verify::kFull;
  /// GPU models: a call whose input signature (shapes, and the addresses of
  /// inputs already on the device) repeats is recorded once as a CUDA / HIP
  /// graph and replayed from then on, one launch instead of one per kernel.
  /// false launches every kernel at every call.
  bool gpuGraphs = true;
};

/// What a GPU model's calls cost on the host (Module::gpuStats); all zero
/// for CPU models.
struct GpuCallStats {
  uint64_t calls = 0;
  /// Calls served by replaying a recording, and recordings made.
  uint64_t replays = 0, recordings = 0;
  /// Recordings the driver refused; those calls launched their kernels.
  uint64_t recordFailures = 0;
  /// Kernels run (a replay counts those it recorded), and launch calls into
  /// the driver (one per kernel of a plain call, one per replay).
  uint64_t kernels = 0, launches = 0;
  /// Host time spent issuing the calls' work: from the call's start to its
  /// final wait for the device.
  uint64_t hostNanoseconds = 0;
};

class SITS_RUNTIME_API Module {
public:
  /// Loads the artifact at `path`. The file is mapped read-only; the code is
  /// copied to an anonymous in-memory file before the dynamic loader sees
  /// it, so replacing `path` afterwards changes nothing. The weights are
  /// served from the mapping: do not write to the file in place while it is
  /// loaded (replacing it by rename is fine).
  static StatusOr<Module> load(const std::string &path,
                               const LoadOptions &options = {});
  /// Loads an artifact held in memory (copied).
  static StatusOr<Module> load(const void *data, size_t size,
                               const LoadOptions &options = {});
  /// Loads an artifact the caller has already opened.
  static StatusOr<Module> load(const ArtifactReader &reader,
                               const LoadOptions &options = {});

  /// Entry point names, in manifest order.
  std::vector<std::string> entryPoints() const;
  /// The signature of entry point `name`, or nullptr.
  const EntryPointSpec *signature(std::string_view name) const;
  const Manifest &manifest() const;
  const ArtifactReader &artifact() const;
  const Device &device() const;

  /// The shapes the outputs of `name` take for these inputs: static extents,
  /// and dynamic ones resolved through `dim_names` shared with an input.
  /// kSignatureMismatch when the inputs do not fit the signature or an
  /// output extent cannot be determined from them.
  StatusOr<std::vector<std::vector<int64_t>>>
  outputShapes(std::string_view name,
               const std::vector<BufferView> &inputs) const;

  /// Runs entry point `name`. `inputs` and `outputs` follow the signature's
  /// order (the weights argument is supplied by the runtime). Their count,
  /// dtypes and shapes are checked first (kSignatureMismatch, naming the
  /// argument and the expected vs given). Views that are not contiguous or
  /// not aligned to their element size are staged through aligned copies.
  Status run(std::string_view name, const std::vector<BufferView> &inputs,
             const std::vector<BufferView> &outputs) const;

  /// Counters of the calls so far (GPU models; zeros on the CPU).
  GpuCallStats gpuStats() const;

  struct Impl;

private:
  explicit Module(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_MODULE_H
