//===- gpu_runtime.cpp - MLIR's GPU runtime ABI over the SITS GPU drivers
//--===//
//
// Compiled GPU host code (gpu-to-llvm, #gpu.select_object) calls the C
// functions below, which upstream implements in
// mlir/lib/ExecutionEngine/CudaRuntimeWrappers.cpp over libcuda with a
// context and stream of its own. Here they act on the `GpuCall` the runtime
// binds to the calling thread (gpu_device.h): the model's device, the
// stream of the current call, and the call's first error, since none of
// these signatures can return one. After a failure every later operation
// of the call except a free is skipped: launching kernels on buffers that
// were never allocated would poison the device's context.
//
// Module handles given to the code are runtime objects that own the
// driver's module and a cache of its functions; their ELF destructor
// (mgpuModuleUnload at dlclose) needs no call to be bound.
//
//===----------------------------------------------------------------------===//
#include "gpu_device.h"

#include "sits/runtime/export.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace sits::runtime {
namespace {

thread_local GpuCall *tCall = nullptr;

struct LoadedGpuModule {
  std::shared_ptr<GpuDevice> device;
  GpuDevice::ModuleHandle module;
  std::mutex mu;
  std::unordered_map<std::string, GpuDevice::Function> functions;
};

/// The bound call when it can still do work, else nullptr.
GpuCall *activeCall() {
  GpuCall *call = tCall;
  return call && call->device && call->status.ok() ? call : nullptr;
}

void *loaded(StatusOr<GpuDevice::ModuleHandle> module, GpuCall &call) {
  if (!module.ok()) {
    call.fail(std::move(module).status());
    return nullptr;
  }
  return new LoadedGpuModule{call.device, *module, {}, {}};
}

} // namespace

GpuCallScope::GpuCallScope(GpuCall &call) : previous_(tCall) { tCall = &call; }
GpuCallScope::~GpuCallScope() { tCall = previous_; }
GpuCall *currentGpuCall() { return tCall; }

} // namespace sits::runtime

using namespace sits::runtime;

extern "C" {

SITS_RUNTIME_API void *mgpuModuleLoad(void *data, size_t /*size*/) {
  GpuCall *call = activeCall();
  return call ? loaded(call->device->loadModule(data), *call) : nullptr;
}

SITS_RUNTIME_API void *mgpuModuleLoadJIT(void *data, int optLevel) {
  GpuCall *call = activeCall();
  return call ? loaded(call->device->loadModuleJit(
                           static_cast<const char *>(data), optLevel),
                       *call)
              : nullptr;
}

SITS_RUNTIME_API void mgpuModuleUnload(void *module) {
  auto *m = static_cast<LoadedGpuModule *>(module);
  if (!m)
    return;
  // Destructors run wherever the code is unloaded: make the context current.
  Status s = m->device->makeCurrent();
  if (s.ok())
    s = m->device->unloadModule(m->module);
  if (!s.ok() && tCall)
    tCall->fail(std::move(s));
  delete m;
}

SITS_RUNTIME_API void *mgpuModuleGetFunction(void *module, const char *name) {
  GpuCall *call = activeCall();
  auto *m = static_cast<LoadedGpuModule *>(module);
  if (!call)
    return nullptr;
  if (!m) {
    call->fail(Status(StatusCode::kLoadFailed,
                      call->device->uri() + ": kernel '" + std::string(name) +
                          "' was asked of device code that did not load")
                   .withSubject(call->device->uri()));
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(m->mu);
  auto it = m->functions.find(name);
  if (it != m->functions.end())
    return it->second;
  StatusOr<GpuDevice::Function> f = m->device->function(m->module, name);
  if (!f.ok()) {
    call->fail(std::move(f).status());
    return nullptr;
  }
  m->functions.emplace(name, *f);
  return *f;
}

SITS_RUNTIME_API void *mgpuStreamCreate() {
  GpuCall *call = activeCall();
  return call ? call->stream : nullptr;
}

/// The call's stream belongs to the runtime, which reuses it.
SITS_RUNTIME_API void mgpuStreamDestroy(void * /*stream*/) {}

/// Skipped while recording: a capturing stream cannot be synchronized, and
/// the runtime synchronizes after the replay (the code has no way to read
/// device memory, so nothing of it waits on the result).
SITS_RUNTIME_API void mgpuStreamSynchronize(void *stream) {
  if (GpuCall *call = activeCall(); call && !call->recording)
    if (Status s = call->device->synchronize(stream); !s.ok())
      call->fail(std::move(s));
}

SITS_RUNTIME_API void mgpuLaunchKernel(void *function, intptr_t gridX,
                                       intptr_t gridY, intptr_t gridZ,
                                       intptr_t blockX, intptr_t blockY,
                                       intptr_t blockZ, int32_t smem,
                                       void *stream, void **params,
                                       void **extra, size_t /*paramsCount*/) {
  GpuCall *call = activeCall();
  if (!call || !function)
    return;
  const int64_t grid[3] = {gridX, gridY, gridZ};
  const int64_t block[3] = {blockX, blockY, blockZ};
  if (Status s = call->device->launch(function, grid, block, smem, stream,
                                      params, extra);
      !s.ok())
    call->fail(std::move(s));
  else if (gridX > 0 && gridY > 0 && gridZ > 0)
    ++call->launches;
}

SITS_RUNTIME_API void *mgpuMemAlloc(uint64_t bytes, void *stream,
                                    bool hostShared) {
  GpuCall *call = activeCall();
  if (!call)
    return nullptr;
  if (hostShared) {
    call->fail(Status(StatusCode::kUnimplemented,
                      call->device->uri() +
                          ": compiled code asked for host-shared "
                          "memory, which SITS does not provide")
                   .withSubject(call->device->uri()));
    return nullptr;
  }
  StatusOr<void *> p = call->device->allocateAsync(size_t(bytes), stream);
  if (!p.ok()) {
    call->fail(std::move(p).status());
    return nullptr;
  }
  return *p;
}

SITS_RUNTIME_API void mgpuMemFree(void *ptr, void *stream) {
  GpuCall *call = tCall;
  if (!call || !call->device || !ptr)
    return;
  if (Status s = call->device->freeAsync(ptr, stream); !s.ok())
    call->fail(std::move(s));
}

} // extern "C"
