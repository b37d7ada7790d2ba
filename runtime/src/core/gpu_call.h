//===- gpu_call.h - Calls of a GPU model's entry points (internal) -------===//
//
// `GpuCalls` runs the entry points of a model loaded on a GPU: host views
// are copied to device buffers, the code runs on a stream of the device's
// pool bound to the calling thread (its mgpu* calls use it), and outputs,
// and inputs the code updates in place, come back to the caller's buffers.
//
// A call whose input signature repeats (the same shapes, and the same
// addresses of the views already on the device) is recorded once as a
// graph and replayed from then on: a decode step is hundreds of small
// kernels, whose launches cost the host more than the GPU takes to run
// them. A recording owns one device block for the call's host views and
// a page-locked mirror of it: around each replay the caller's data is
// gathered into the mirror and goes down in one copy, and what comes back
// does so in one. It also owns its temporaries, so a recording is made
// only where that costs little.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_GPU_CALL_H
#define SITS_RUNTIME_CORE_GPU_CALL_H

#include "gpu_device.h"

#include "sits/runtime/artifact.h"
#include "sits/runtime/module.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace sits::runtime {

using EntryFn = void (*)(void **);

// Shared with module.cpp's CPU calls.
/// Copies a strided view into contiguous row-major `contiguous` (or back
/// when `toView`).
void copyStrided(const BufferView &view, uint8_t *contiguous, bool toView);
/// A memref descriptor {allocated, aligned, offset, sizes[], strides[]}.
std::vector<int64_t> descriptor(void *data, const std::vector<int64_t> &shape);
/// The error of a call whose code set its status argument to `flag`.
Status statusFailure(const EntryPointSpec &ep, int32_t flag);

class GpuCalls {
public:
  /// `weights`: the model's weights on the device (`weightBytes` long).
  GpuCalls(std::shared_ptr<GpuDevice> gpu, void *weights, int64_t weightBytes,
           bool record);
  /// Destroys the recordings (before the code whose kernels they launch is
  /// unloaded).
  ~GpuCalls();
  GpuCalls(const GpuCalls &) = delete;
  GpuCalls &operator=(const GpuCalls &) = delete;

  /// Runs `fn`, the host code of `ep`, on checked views.
  Status run(EntryFn fn, const EntryPointSpec &ep,
             const std::vector<BufferView> &inputs,
             const std::vector<BufferView> &outputs);

  GpuCallStats stats() const;

  /// Recordings kept; the least recently used idle one makes room.
  static constexpr size_t kMaxRecordings = 16;
  /// A call is recorded only when its host views take at most this many
  /// bytes of device memory (decode steps, not prefills of long prompts or
  /// a KV pool that lives on the host).
  static constexpr size_t kMaxRecordedBytes = size_t(64) << 20;

  /// Where a call's arguments live on the device.
  struct Layout {
    std::vector<std::vector<int64_t>> descs;
    /// Device buffers made for the call's host views and its status flag.
    std::vector<void *> owned;
    /// A host view: copied to its device buffer before the code runs
    /// (inputs), back after (outputs, inputs updated in place).
    struct Transfer {
      bool output;
      size_t index;
      void *device;
      bool toDevice, toHost;
      /// Packed layouts: the offset in `block` and `staging`.
      size_t offset = 0;
    };
    std::vector<Transfer> transfers;
    void *status = nullptr;
    /// Packed (a recording's): every host view and the status flag in one
    /// device block, mirrored by page-locked `staging`, ordered so that one
    /// copy, [0, down), takes everything down and one, [up, size), brings
    /// everything back. No staging: each view is copied on its own.
    uint8_t *block = nullptr, *staging = nullptr;
    size_t down = 0, up = 0, size = 0, statusOffset = 0;
  };

private:
  struct Recording {
    Layout layout;
    GpuDevice::Recording graph = nullptr;
    uint64_t kernels = 0;
    uint64_t lastUse = 0;
    bool busy = false;
  };
  using Key = std::vector<int64_t>;

  /// What a call does: replay `recording`, record one, or launch plainly.
  struct Plan {
    Recording *replay = nullptr;
    bool record = false;
  };
  /// Whether a call with these views can be recorded at all.
  bool mayRecord(const std::vector<BufferView> &inputs,
                 const std::vector<BufferView> &outputs) const;
  Plan plan(const EntryPointSpec &ep, const Key &key);
  Status launchPlainly(EntryFn fn, const EntryPointSpec &ep,
                       const std::vector<BufferView> &inputs,
                       const std::vector<BufferView> &outputs,
                       GpuDevice::Stream stream, uint64_t &kernels,
                       std::chrono::steady_clock::time_point &queued);
  /// Records `fn`; nullptr (and counted) when the driver refuses.
  Recording *record(EntryFn fn, const EntryPointSpec &ep, const Key &key,
                    const std::vector<BufferView> &inputs,
                    const std::vector<BufferView> &outputs,
                    GpuDevice::Stream stream);
  Status replay(Recording &r, const EntryPointSpec &ep,
                const std::vector<BufferView> &inputs,
                const std::vector<BufferView> &outputs,
                GpuDevice::Stream stream,
                std::chrono::steady_clock::time_point &queued);
  void release(Recording &r);
  void destroy(Recording &r);

  std::shared_ptr<GpuDevice> gpu_;
  void *weights_;
  int64_t weightBytes_;
  const bool record_;

  std::mutex mu_;
  std::map<Key, std::unique_ptr<Recording>> recordings_;
  /// How often each signature not yet recorded was seen, or kRecording.
  std::map<Key, int> seen_;
  static constexpr int kRecording = -1;
  /// Entry points whose recording the driver refused: launched plainly.
  std::set<const EntryPointSpec *> refused_;
  uint64_t clock_ = 0;

  std::atomic<uint64_t> calls_{0}, replays_{0}, made_{0}, recordFailures_{0},
      kernels_{0}, launches_{0}, hostNanoseconds_{0};
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_CORE_GPU_CALL_H
