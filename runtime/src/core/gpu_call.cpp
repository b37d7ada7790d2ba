//===- gpu_call.cpp - Calls of a GPU model's entry points ----------------===//
//
// See gpu_call.h. A call goes one of three ways:
//
// * plainly: device buffers for the host views from the stream-ordered
//   allocator, copies in, the host code launches its kernels, copies out;
// * recorded: the first time a signature repeats, the host code runs
//   while the stream is captured (its kernels are recorded, not run), on
//   a packed block the recording keeps, then the recording is replayed;
// * replayed: the inputs gathered into page-locked staging and copied down
//   at once, one graph launch, one copy back, spread over the outputs.
//
// Every call ends with one wait for the stream, and returns it to the pool.
//
//===----------------------------------------------------------------------===//
#include "gpu_call.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>

namespace sits::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using Layout = GpuCalls::Layout;

size_t bytesOf(const BufferView &v) {
  return size_t(v.numElements()) * dtypeSize(v.dtype);
}

/// The bytes a call's host views take on the device.
size_t hostViewBytes(const std::vector<BufferView> &inputs,
                     const std::vector<BufferView> &outputs) {
  size_t n = 0;
  for (const std::vector<BufferView> *views : {&inputs, &outputs})
    for (const BufferView &v : *views)
      if (v.onHost())
        n += bytesOf(v);
  return n;
}

/// What makes one call's work the same as another's: the entry point, each
/// view's shape, and the address of each view the code uses in place.
std::vector<int64_t> signatureOf(const EntryPointSpec &ep,
                                 const std::vector<BufferView> &inputs,
                                 const std::vector<BufferView> &outputs) {
  std::vector<int64_t> key{int64_t(reinterpret_cast<intptr_t>(&ep))};
  for (const std::vector<BufferView> *views : {&inputs, &outputs})
    for (const BufferView &v : *views) {
      key.push_back(int64_t(v.shape.size()));
      key.insert(key.end(), v.shape.begin(), v.shape.end());
      key.push_back(v.onHost() ? 0
                               : int64_t(reinterpret_cast<intptr_t>(v.data)));
    }
  return key;
}

/// A plain call's layout: a stream-ordered device buffer for each host
/// view and the status flag, and the descriptors of every argument.
Status layOut(Layout &l, GpuDevice &gpu, GpuDevice::Stream stream,
              const EntryPointSpec &ep, void *weights, int64_t weightBytes,
              const std::vector<BufferView> &inputs,
              const std::vector<BufferView> &outputs) {
  auto allocate = [&](size_t bytes) {
    return gpu.allocateAsync(bytes, stream);
  };
  if (ep.hasWeights())
    l.descs.push_back(descriptor(weights, {weightBytes}));
  auto place = [&](const BufferView &v, bool output, size_t index,
                   bool updated) -> Status {
    if (!v.onHost()) { // on this device (checked): used there
      l.descs.push_back(descriptor(v.data, v.shape));
      return Status::OK();
    }
    StatusOr<void *> p = allocate(bytesOf(v));
    if (!p.ok())
      return p.status();
    if (*p)
      l.owned.push_back(*p);
    l.transfers.push_back({output, index, *p, !output, output || updated});
    l.descs.push_back(descriptor(*p, v.shape));
    return Status::OK();
  };
  std::vector<const ArgSpec *> inSpecs = ep.inputs();
  for (size_t i = 0; i < inputs.size(); ++i)
    SITS_RETURN_IF_ERROR(place(
        inputs[i], false, i, i < inSpecs.size() && inSpecs[i]->updatedInPlace));
  for (size_t i = 0; i < outputs.size(); ++i)
    SITS_RETURN_IF_ERROR(place(outputs[i], true, i, false));
  if (ep.status()) { // one i32, zeroed before each call and read back after
    StatusOr<void *> p = allocate(sizeof(int32_t));
    if (!p.ok())
      return p.status();
    l.owned.push_back(*p);
    l.status = *p;
    l.descs.push_back(descriptor(*p, {}));
  }
  return Status::OK();
}

const BufferView &viewOf(const Layout::Transfer &t,
                         const std::vector<BufferView> &inputs,
                         const std::vector<BufferView> &outputs) {
  return t.output ? outputs[t.index] : inputs[t.index];
}

/// A recording's layout: one device block and its page-locked mirror (see
/// Layout), the block kept by the recording.
Status layOutPacked(Layout &l, GpuDevice &gpu, const EntryPointSpec &ep,
                    void *weights, int64_t weightBytes,
                    const std::vector<BufferView> &inputs,
                    const std::vector<BufferView> &outputs) {
  std::vector<const ArgSpec *> inSpecs = ep.inputs();
  auto updated = [&](size_t i) {
    return i < inSpecs.size() && inSpecs[i]->updatedInPlace;
  };
  // `at`: the next 256-byte aligned offset; `end`: the end of the last
  // view placed (copies stop there, not at the padding).
  size_t at = 0, end = 0;
  auto place = [&](size_t bytes) {
    size_t offset = at;
    end = at + bytes;
    at = (end + 255) / 256 * 256;
    return offset;
  };
  // Inputs only read; inputs updated in place and the status flag (down and
  // back); outputs.
  std::vector<size_t> inAt(inputs.size()), outAt(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].onHost() && !updated(i))
      inAt[i] = place(bytesOf(inputs[i]));
  l.up = at;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].onHost() && updated(i))
      inAt[i] = place(bytesOf(inputs[i]));
  if (ep.status())
    l.statusOffset = place(sizeof(int32_t));
  l.down = end;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].onHost())
      outAt[i] = place(bytesOf(outputs[i]));
  l.size = end;
  l.up = std::min(l.up, l.size);
  if (l.size) {
    StatusOr<void *> block = gpu.allocate(l.size);
    if (!block.ok())
      return block.status();
    l.block = static_cast<uint8_t *>(*block);
    l.owned.push_back(*block);
    // Without page-locked memory, each view is copied on its own.
    StatusOr<void *> staging = gpu.allocateHost(l.size);
    l.staging = staging.ok() ? static_cast<uint8_t *>(*staging) : nullptr;
  }
  if (ep.hasWeights())
    l.descs.push_back(descriptor(weights, {weightBytes}));
  auto bind = [&](const BufferView &v, bool output, size_t index, size_t offset,
                  bool isUpdated) {
    if (!v.onHost()) {
      l.descs.push_back(descriptor(v.data, v.shape));
      return;
    }
    void *device = l.block + offset;
    l.transfers.push_back(
        {output, index, device, !output, output || isUpdated, offset});
    l.descs.push_back(descriptor(device, v.shape));
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    bind(inputs[i], false, i, inAt[i], updated(i));
  for (size_t i = 0; i < outputs.size(); ++i)
    bind(outputs[i], true, i, outAt[i], false);
  if (ep.status()) {
    l.status = l.block + l.statusOffset;
    l.descs.push_back(descriptor(l.status, {}));
  }
  return Status::OK();
}

/// The host side of a call's copies: staging for strided views, kept until
/// the stream has finished with it, and what is left to do once it has.
struct HostSide {
  std::vector<std::vector<uint8_t>> staged;
  std::vector<std::pair<const BufferView *, uint8_t *>> copyBack;
  /// A packed layout whose staging holds what came back.
  const Layout *packed = nullptr;
  int32_t flag = 0;

  void finish(const std::vector<BufferView> &inputs,
              const std::vector<BufferView> &outputs) {
    if (packed) {
      for (const Layout::Transfer &t : packed->transfers)
        if (t.toHost)
          copyBack.emplace_back(&viewOf(t, inputs, outputs),
                                packed->staging + t.offset);
      if (packed->status)
        std::memcpy(&flag, packed->staging + packed->statusOffset,
                    sizeof(int32_t));
    }
    for (auto &[view, p] : copyBack) {
      if (view->isContiguous())
        std::memcpy(view->data, p, bytesOf(*view));
      else
        copyStrided(*view, p, true);
    }
  }
};

Status copyIn(GpuDevice &gpu, const Layout &l,
              const std::vector<BufferView> &inputs,
              const std::vector<BufferView> &outputs, GpuDevice::Stream stream,
              HostSide &host) {
  if (l.staging) { // gathered into the staging, then one copy
    for (const Layout::Transfer &t : l.transfers) {
      if (!t.toDevice)
        continue;
      const BufferView &v = viewOf(t, inputs, outputs);
      if (v.isContiguous())
        std::memcpy(l.staging + t.offset, v.data, bytesOf(v));
      else
        copyStrided(v, l.staging + t.offset, false);
    }
    if (l.status)
      std::memset(l.staging + l.statusOffset, 0, sizeof(int32_t));
    return gpu.copyToDevice(l.block, l.staging, l.down, stream);
  }
  for (const Layout::Transfer &t : l.transfers) {
    if (!t.toDevice)
      continue;
    const BufferView &v = viewOf(t, inputs, outputs);
    size_t bytes = bytesOf(v);
    const void *data = v.data;
    if (bytes && !v.isContiguous()) {
      host.staged.emplace_back(bytes);
      copyStrided(v, host.staged.back().data(), false);
      data = host.staged.back().data();
    }
    SITS_RETURN_IF_ERROR(gpu.copyToDevice(t.device, data, bytes, stream));
  }
  static const int32_t kZero = 0;
  if (l.status)
    SITS_RETURN_IF_ERROR(
        gpu.copyToDevice(l.status, &kZero, sizeof(int32_t), stream));
  return Status::OK();
}

Status copyOut(GpuDevice &gpu, const Layout &l,
               const std::vector<BufferView> &inputs,
               const std::vector<BufferView> &outputs, GpuDevice::Stream stream,
               HostSide &host) {
  if (l.staging) { // one copy; spread over the views once it has landed
    host.packed = &l;
    return gpu.copyToHost(l.staging + l.up, l.block + l.up, l.size - l.up,
                          stream);
  }
  for (const Layout::Transfer &t : l.transfers) {
    if (!t.toHost)
      continue;
    const BufferView &v = viewOf(t, inputs, outputs);
    size_t bytes = bytesOf(v);
    void *data = v.data;
    if (bytes && !v.isContiguous()) {
      host.staged.emplace_back(bytes);
      data = host.staged.back().data();
      host.copyBack.emplace_back(&v, host.staged.back().data());
    }
    SITS_RETURN_IF_ERROR(gpu.copyToHost(data, t.device, bytes, stream));
  }
  if (l.status)
    SITS_RETURN_IF_ERROR(
        gpu.copyToHost(&host.flag, l.status, sizeof(int32_t), stream));
  return Status::OK();
}

std::vector<void *> argPointers(Layout &l) {
  std::vector<void *> args;
  args.reserve(l.descs.size());
  for (std::vector<int64_t> &d : l.descs)
    args.push_back(d.data());
  return args;
}

} // namespace

GpuCalls::GpuCalls(std::shared_ptr<GpuDevice> gpu, void *weights,
                   int64_t weightBytes, bool record)
    : gpu_(std::move(gpu)), weights_(weights), weightBytes_(weightBytes),
      record_(record) {}

GpuCalls::~GpuCalls() {
  if (recordings_.empty() || !gpu_->makeCurrent().ok())
    return;
  for (auto &[key, r] : recordings_)
    destroy(*r);
}

void GpuCalls::destroy(Recording &r) {
  gpu_->destroyRecording(r.graph);
  for (void *p : r.layout.owned)
    (void)gpu_->free(p);
  gpu_->freeHost(r.layout.staging);
}

GpuCallStats GpuCalls::stats() const {
  GpuCallStats s;
  s.calls = calls_;
  s.replays = replays_;
  s.recordings = made_;
  s.recordFailures = recordFailures_;
  s.kernels = kernels_;
  s.launches = launches_;
  s.hostNanoseconds = hostNanoseconds_;
  return s;
}

bool GpuCalls::mayRecord(const std::vector<BufferView> &inputs,
                         const std::vector<BufferView> &outputs) const {
  return record_ && gpu_->canRecord() &&
         hostViewBytes(inputs, outputs) <= kMaxRecordedBytes;
}

GpuCalls::Plan GpuCalls::plan(const EntryPointSpec &ep, const Key &key) {
  Plan p;
  std::lock_guard<std::mutex> lock(mu_);
  if (refused_.count(&ep))
    return p;
  if (auto it = recordings_.find(key); it != recordings_.end()) {
    Recording &r = *it->second;
    if (r.busy) // another thread replays it: launch this call plainly
      return p;
    r.busy = true;
    r.lastUse = ++clock_;
    p.replay = &r;
    return p;
  }
  // Record at the second sighting: a one-off call (a prompt of unusual
  // length) costs no recording. One thread records; until it is done, the
  // others launch plainly.
  if (seen_.size() > 1024)
    for (auto it = seen_.begin(); it != seen_.end();)
      it = it->second == kRecording ? std::next(it) : seen_.erase(it);
  int &seen = seen_[key];
  if (seen == kRecording)
    return p;
  p.record = ++seen >= 2;
  if (p.record)
    seen = kRecording;
  return p;
}

void GpuCalls::release(Recording &r) {
  std::lock_guard<std::mutex> lock(mu_);
  r.busy = false;
}

GpuCalls::Recording *GpuCalls::record(EntryFn fn, const EntryPointSpec &ep,
                                      const Key &key,
                                      const std::vector<BufferView> &inputs,
                                      const std::vector<BufferView> &outputs,
                                      GpuDevice::Stream stream) {
  auto r = std::make_unique<Recording>();
  // Buffers the recording keeps: plain allocations, outside any stream.
  Status s = layOutPacked(r->layout, *gpu_, ep, weights_, weightBytes_, inputs,
                          outputs);
  GpuCall call;
  call.device = gpu_;
  call.stream = stream;
  call.recording = true;
  if (s.ok())
    s = gpu_->beginRecording(stream);
  if (s.ok()) {
    std::vector<void *> args = argPointers(r->layout);
    {
      GpuCallScope scope(call);
      fn(args.data());
    }
    StatusOr<GpuDevice::Recording> graph = gpu_->endRecording(stream);
    if (!call.status.ok()) {
      if (graph.ok())
        gpu_->destroyRecording(*graph);
      s = call.status;
    } else if (!graph.ok()) {
      s = graph.status();
    } else {
      r->graph = *graph;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  seen_.erase(key);
  if (!s.ok()) {
    // The call launches plainly, and so do later ones: what failed (the
    // driver's graphs, or the code) fails the same way again. A real error
    // of the code is reported by the plain call.
    destroy(*r);
    refused_.insert(&ep);
    ++recordFailures_;
    return nullptr;
  }
  r->kernels = call.launches;
  r->busy = true;
  r->lastUse = ++clock_;
  ++made_;
  // Room for it: the least recently used idle recording goes.
  if (recordings_.size() >= kMaxRecordings) {
    auto victim = recordings_.end();
    for (auto it = recordings_.begin(); it != recordings_.end(); ++it)
      if (!it->second->busy && (victim == recordings_.end() ||
                                it->second->lastUse < victim->second->lastUse))
        victim = it;
    if (victim != recordings_.end()) {
      destroy(*victim->second);
      recordings_.erase(victim);
    }
  }
  Recording *out = r.get();
  recordings_[key] = std::move(r);
  return out;
}

Status GpuCalls::replay(Recording &r, const EntryPointSpec &ep,
                        const std::vector<BufferView> &inputs,
                        const std::vector<BufferView> &outputs,
                        GpuDevice::Stream stream,
                        std::chrono::steady_clock::time_point &queued) {
  HostSide host;
  Status s = copyIn(*gpu_, r.layout, inputs, outputs, stream, host);
  if (s.ok())
    s = gpu_->replay(r.graph, stream);
  if (s.ok()) {
    ++replays_;
    ++launches_;
    kernels_ += r.kernels;
    s = copyOut(*gpu_, r.layout, inputs, outputs, stream, host);
  }
  queued = Clock::now();
  if (Status f = gpu_->synchronize(stream); !f.ok() && s.ok())
    s = std::move(f);
  release(r);
  SITS_RETURN_IF_ERROR(s);
  host.finish(inputs, outputs);
  return host.flag ? statusFailure(ep, host.flag) : Status::OK();
}

Status GpuCalls::launchPlainly(EntryFn fn, const EntryPointSpec &ep,
                               const std::vector<BufferView> &inputs,
                               const std::vector<BufferView> &outputs,
                               GpuDevice::Stream stream, uint64_t &kernels,
                               std::chrono::steady_clock::time_point &queued) {
  Layout l;
  HostSide host;
  Status s =
      layOut(l, *gpu_, stream, ep, weights_, weightBytes_, inputs, outputs);
  if (s.ok())
    s = copyIn(*gpu_, l, inputs, outputs, stream, host);
  if (s.ok()) {
    std::vector<void *> args = argPointers(l);
    GpuCall call;
    call.device = gpu_;
    call.stream = stream;
    {
      GpuCallScope scope(call);
      fn(args.data());
    }
    kernels = call.launches;
    s = std::move(call.status);
  }
  if (s.ok())
    s = copyOut(*gpu_, l, inputs, outputs, stream, host);
  // The call's buffers go on every path; the first error wins.
  for (void *p : l.owned)
    if (Status f = gpu_->freeAsync(p, stream); !f.ok() && s.ok())
      s = std::move(f);
  queued = Clock::now();
  if (Status f = gpu_->synchronize(stream); !f.ok() && s.ok())
    s = std::move(f);
  SITS_RETURN_IF_ERROR(s);
  host.finish(inputs, outputs);
  return host.flag ? statusFailure(ep, host.flag) : Status::OK();
}

Status GpuCalls::run(EntryFn fn, const EntryPointSpec &ep,
                     const std::vector<BufferView> &inputs,
                     const std::vector<BufferView> &outputs) {
  Clock::time_point start = Clock::now();
  ++calls_;
  SITS_RETURN_IF_ERROR(gpu_->makeCurrent());
  StatusOr<GpuDevice::Stream> acquired = gpu_->acquireStream();
  if (!acquired.ok())
    return acquired.status();
  GpuDevice::Stream stream = *acquired;
  Plan p;
  Key key;
  if (mayRecord(inputs, outputs)) {
    key = signatureOf(ep, inputs, outputs);
    p = plan(ep, key);
  }
  Recording *r = p.replay;
  if (p.record)
    r = record(fn, ep, key, inputs, outputs, stream);
  Status s;
  Clock::time_point queued = start;
  if (r) {
    s = replay(*r, ep, inputs, outputs, stream, queued);
  } else {
    uint64_t kernels = 0;
    s = launchPlainly(fn, ep, inputs, outputs, stream, kernels, queued);
    kernels_ += kernels;
    launches_ += kernels;
  }
  gpu_->releaseStream(stream);
  if (queued > start)
    hostNanoseconds_ += uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(queued - start)
            .count());
  return s;
}

} // namespace sits::runtime
