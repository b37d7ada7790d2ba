//===- gpu_driver.cpp - The cuda and hip drivers over the vendor libraries
//-===//
//
// One driver and one device class, templated over a vendor's table of
// driver functions (`CudaApi`, `HipApi`): the CUDA driver API and HIP's
// module API have the same shape, and differ in names, in the type of a
// device pointer (an integer for CUDA, a pointer for HIP) and in how error
// names are returned. The vendor library is dlopen'ed on first use and never
// linked, so building SITS needs no GPU SDK; $SITS_CUDA_DRIVER /
// $SITS_HIP_DRIVER point the runtime at another library with the same API
// (the tests use a fake backed by host memory).
//
// Devices are opened with their primary context retained and shared by
// every model loaded on them while any is alive; the last one out destroys
// its streams and releases the context.
//
//===----------------------------------------------------------------------===//
#include "gpu_device.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <dlfcn.h>
#include <limits>
#include <mutex>
#include <vector>

namespace sits::runtime {
namespace {

/// Resolves a library's functions into typed slots, collecting the names of
/// required ones that are missing.
class Symbols {
public:
  explicit Symbols(void *library) : library_(library) {}
  template <typename F>
  void get(F &slot, const char *name, bool required = true) {
    slot = reinterpret_cast<F>(dlsym(library_, name));
    if (!slot && required)
      missing_ += (missing_.empty() ? "" : ", ") + std::string(name);
  }
  const std::string &missing() const { return missing_; }

private:
  void *library_;
  std::string missing_;
};

// Error codes both vendors share.
constexpr int kErrorOutOfMemory = 2;
constexpr int kErrorNotSupported = 801;
// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (hipMemPoolAttrReleaseThreshold).
constexpr int kMemPoolReleaseThreshold = 4;
// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL (hipStreamCaptureModeThreadLocal):
// only this thread's unsafe calls invalidate a capture.
constexpr int kCaptureThreadLocal = 1;
// CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
// (hipGraphInstantiateFlagAutoFreeOnLaunch).
constexpr unsigned long long kInstantiateAutoFree = 1;
// JIT options (CUjit_option; hipJitOption mirrors them).
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSize = 6;
constexpr int kJitOptimizationLevel = 7;

//===----------------------------------------------------------------------===//
// Vendor tables
//===----------------------------------------------------------------------===//

struct CudaApi {
  static constexpr const char *kVendor = "CUDA";
  static constexpr const char *kScheme = "cuda";
  static constexpr const char *kEnvVar = "SITS_CUDA_DRIVER";
  static constexpr DeviceKind kKind = DeviceKind::kCuda;
  static constexpr bool kJitsPtx = true;
  static std::vector<const char *> libraries() {
    return {"libcuda.so.1", "libcuda.so"};
  }

  using DevicePtr = unsigned long long; // CUdeviceptr
  struct Functions {
    int (*init)(unsigned);
    int (*deviceGetCount)(int *);
    int (*deviceGet)(int *, int);
    int (*deviceGetName)(char *, int, int);
    int (*deviceGetAttribute)(int *, int, int);
    int (*primaryCtxRetain)(void **, int);
    int (*primaryCtxRelease)(int);
    int (*ctxSetCurrent)(void *);
    int (*memAlloc)(DevicePtr *, size_t);
    int (*memFree)(DevicePtr);
    int (*memHostAlloc)(void **, size_t, unsigned); // optional
    int (*memFreeHost)(void *);
    int (*memAllocAsync)(DevicePtr *, size_t, void *); // optional: CUDA 11.2
    int (*memFreeAsync)(DevicePtr, void *);
    int (*deviceGetDefaultMemPool)(void **, int); // optional, with the above
    int (*memPoolSetAttribute)(void *, int, void *);
    int (*memcpyHtoDAsync)(DevicePtr, const void *, size_t, void *);
    int (*memcpyDtoHAsync)(void *, DevicePtr, size_t, void *);
    int (*memcpyDtoDAsync)(DevicePtr, DevicePtr, size_t, void *);
    int (*memsetD8Async)(DevicePtr, unsigned char, size_t, void *);
    int (*streamCreate)(void **, unsigned);
    int (*streamDestroy)(void *);
    int (*streamSynchronize)(void *);
    int (*moduleLoadData)(void **, const void *);
    int (*moduleLoadDataEx)(void **, const void *, unsigned, int *, void **);
    int (*moduleUnload)(void *);
    int (*moduleGetFunction)(void **, void *, const char *);
    int (*launchKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                        unsigned, unsigned, unsigned, void *, void **, void **);
    // Graphs (optional: CUDA 11.4, ROCm 5.3).
    int (*streamBeginCapture)(void *, int);
    int (*streamEndCapture)(void *, void **);
    int (*graphInstantiate)(void **, void *, unsigned long long);
    int (*graphLaunch)(void *, void *);
    int (*graphExecDestroy)(void *);
    int (*graphDestroy)(void *);
    int (*getErrorName)(int, const char **);
    int (*getErrorString)(int, const char **);
  };

  static void resolve(Symbols &s, Functions &f) {
    s.get(f.init, "cuInit");
    s.get(f.deviceGetCount, "cuDeviceGetCount");
    s.get(f.deviceGet, "cuDeviceGet");
    s.get(f.deviceGetName, "cuDeviceGetName");
    s.get(f.deviceGetAttribute, "cuDeviceGetAttribute", false);
    s.get(f.primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    s.get(f.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    s.get(f.ctxSetCurrent, "cuCtxSetCurrent");
    s.get(f.memAlloc, "cuMemAlloc_v2");
    s.get(f.memFree, "cuMemFree_v2");
    s.get(f.memHostAlloc, "cuMemHostAlloc", false);
    s.get(f.memFreeHost, "cuMemFreeHost", false);
    s.get(f.memAllocAsync, "cuMemAllocAsync", false);
    s.get(f.memFreeAsync, "cuMemFreeAsync", false);
    s.get(f.deviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", false);
    s.get(f.memPoolSetAttribute, "cuMemPoolSetAttribute", false);
    s.get(f.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    s.get(f.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    s.get(f.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", false);
    s.get(f.memsetD8Async, "cuMemsetD8Async", false);
    s.get(f.streamCreate, "cuStreamCreate");
    s.get(f.streamDestroy, "cuStreamDestroy_v2");
    s.get(f.streamSynchronize, "cuStreamSynchronize");
    s.get(f.moduleLoadData, "cuModuleLoadData");
    s.get(f.moduleLoadDataEx, "cuModuleLoadDataEx");
    s.get(f.moduleUnload, "cuModuleUnload");
    s.get(f.moduleGetFunction, "cuModuleGetFunction");
    s.get(f.launchKernel, "cuLaunchKernel");
    s.get(f.streamBeginCapture, "cuStreamBeginCapture_v2", false);
    s.get(f.streamEndCapture, "cuStreamEndCapture", false);
    s.get(f.graphInstantiate, "cuGraphInstantiateWithFlags", false);
    s.get(f.graphLaunch, "cuGraphLaunch", false);
    s.get(f.graphExecDestroy, "cuGraphExecDestroy", false);
    s.get(f.graphDestroy, "cuGraphDestroy", false);
    s.get(f.getErrorName, "cuGetErrorName", false);
    s.get(f.getErrorString, "cuGetErrorString", false);
  }
  static DevicePtr toDevice(const void *p) { return DevicePtr(uintptr_t(p)); }
  static void *fromDevice(DevicePtr p) {
    return reinterpret_cast<void *>(uintptr_t(p));
  }
  static std::string errorName(const Functions &f, int rc) {
    const char *s = nullptr;
    return f.getErrorName && f.getErrorName(rc, &s) == 0 && s ? s
                                                              : "CUDA error";
  }
  static std::string errorString(const Functions &f, int rc) {
    const char *s = nullptr;
    return f.getErrorString && f.getErrorString(rc, &s) == 0 && s ? s : "";
  }
  /// "sm_90" from CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR.
  static std::string chip(const Functions &f, int device) {
    int major = 0, minor = 0;
    if (!f.deviceGetAttribute ||
        f.deviceGetAttribute(&major, 75, device) != 0 ||
        f.deviceGetAttribute(&minor, 76, device) != 0)
      return "";
    return "sm_" + std::to_string(major) + std::to_string(minor);
  }
};

struct HipApi {
  static constexpr const char *kVendor = "HIP";
  static constexpr const char *kScheme = "hip";
  static constexpr const char *kEnvVar = "SITS_HIP_DRIVER";
  static constexpr DeviceKind kKind = DeviceKind::kHip;
  static constexpr bool kJitsPtx = false;
  static std::vector<const char *> libraries() {
    return {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
  }

  using DevicePtr = void *; // hipDeviceptr_t
  struct Functions {
    int (*init)(unsigned);
    int (*deviceGetCount)(int *);
    int (*deviceGet)(int *, int);
    int (*deviceGetName)(char *, int, int);
    int (*primaryCtxRetain)(void **, int);
    int (*primaryCtxRelease)(int);
    int (*ctxSetCurrent)(void *);
    int (*memAlloc)(DevicePtr *, size_t);
    int (*memFree)(DevicePtr);
    int (*memHostAlloc)(void **, size_t, unsigned); // optional
    int (*memFreeHost)(void *);
    int (*memAllocAsync)(DevicePtr *, size_t, void *); // optional: ROCm 5.2
    int (*memFreeAsync)(DevicePtr, void *);
    int (*deviceGetDefaultMemPool)(void **, int);
    int (*memPoolSetAttribute)(void *, int, void *);
    int (*memcpyHtoDAsync)(DevicePtr, void *, size_t, void *);
    int (*memcpyDtoHAsync)(void *, DevicePtr, size_t, void *);
    int (*memcpyDtoDAsync)(DevicePtr, DevicePtr, size_t, void *);
    int (*memsetD8Async)(DevicePtr, unsigned char, size_t, void *);
    int (*streamCreate)(void **, unsigned);
    int (*streamDestroy)(void *);
    int (*streamSynchronize)(void *);
    int (*moduleLoadData)(void **, const void *);
    int (*moduleLoadDataEx)(void **, const void *, unsigned, int *, void **);
    int (*moduleUnload)(void *);
    int (*moduleGetFunction)(void **, void *, const char *);
    int (*launchKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                        unsigned, unsigned, unsigned, void *, void **, void **);
    // Graphs (optional: CUDA 11.4, ROCm 5.3).
    int (*streamBeginCapture)(void *, int);
    int (*streamEndCapture)(void *, void **);
    int (*graphInstantiate)(void **, void *, unsigned long long);
    int (*graphLaunch)(void *, void *);
    int (*graphExecDestroy)(void *);
    int (*graphDestroy)(void *);
    const char *(*getErrorName)(int);
    const char *(*getErrorString)(int);
  };

  static void resolve(Symbols &s, Functions &f) {
    s.get(f.init, "hipInit");
    s.get(f.deviceGetCount, "hipGetDeviceCount");
    s.get(f.deviceGet, "hipDeviceGet");
    s.get(f.deviceGetName, "hipDeviceGetName");
    s.get(f.primaryCtxRetain, "hipDevicePrimaryCtxRetain");
    s.get(f.primaryCtxRelease, "hipDevicePrimaryCtxRelease");
    s.get(f.ctxSetCurrent, "hipCtxSetCurrent");
    s.get(f.memAlloc, "hipMalloc");
    s.get(f.memFree, "hipFree");
    s.get(f.memHostAlloc, "hipHostMalloc", false);
    s.get(f.memFreeHost, "hipHostFree", false);
    s.get(f.memAllocAsync, "hipMallocAsync", false);
    s.get(f.memFreeAsync, "hipFreeAsync", false);
    s.get(f.deviceGetDefaultMemPool, "hipDeviceGetDefaultMemPool", false);
    s.get(f.memPoolSetAttribute, "hipMemPoolSetAttribute", false);
    s.get(f.memcpyHtoDAsync, "hipMemcpyHtoDAsync");
    s.get(f.memcpyDtoHAsync, "hipMemcpyDtoHAsync");
    s.get(f.memcpyDtoDAsync, "hipMemcpyDtoDAsync", false);
    s.get(f.memsetD8Async, "hipMemsetD8Async", false);
    s.get(f.streamCreate, "hipStreamCreateWithFlags");
    s.get(f.streamDestroy, "hipStreamDestroy");
    s.get(f.streamSynchronize, "hipStreamSynchronize");
    s.get(f.moduleLoadData, "hipModuleLoadData");
    s.get(f.moduleLoadDataEx, "hipModuleLoadDataEx");
    s.get(f.moduleUnload, "hipModuleUnload");
    s.get(f.moduleGetFunction, "hipModuleGetFunction");
    s.get(f.launchKernel, "hipModuleLaunchKernel");
    s.get(f.streamBeginCapture, "hipStreamBeginCapture", false);
    s.get(f.streamEndCapture, "hipStreamEndCapture", false);
    s.get(f.graphInstantiate, "hipGraphInstantiateWithFlags", false);
    s.get(f.graphLaunch, "hipGraphLaunch", false);
    s.get(f.graphExecDestroy, "hipGraphExecDestroy", false);
    s.get(f.graphDestroy, "hipGraphDestroy", false);
    s.get(f.getErrorName, "hipGetErrorName", false);
    s.get(f.getErrorString, "hipGetErrorString", false);
  }
  static DevicePtr toDevice(const void *p) { return const_cast<void *>(p); }
  static void *fromDevice(DevicePtr p) { return p; }
  static std::string errorName(const Functions &f, int rc) {
    const char *s = f.getErrorName ? f.getErrorName(rc) : nullptr;
    return s ? s : "HIP error";
  }
  static std::string errorString(const Functions &f, int rc) {
    const char *s = f.getErrorString ? f.getErrorString(rc) : nullptr;
    return s ? s : "";
  }
  /// The gfx name needs hipGetDeviceProperties, whose struct changes
  /// between ROCm releases: not read.
  static std::string chip(const Functions &, int) { return ""; }
};

//===----------------------------------------------------------------------===//
// The library, the device and the driver, once for both vendors
//===----------------------------------------------------------------------===//

template <typename Api> struct Library {
  typename Api::Functions fns{};
  /// OK once loaded, initialised and enumerated.
  Status status;
  std::vector<DeviceInfo> devices;
  std::vector<int> handles;
};

template <typename Api> class VendorDevice final : public GpuDevice {
public:
  using Fns = typename Api::Functions;
  using DevicePtr = typename Api::DevicePtr;

  VendorDevice(std::shared_ptr<const Library<Api>> library, int ordinal)
      : library_(std::move(library)), fns_(library_->fns), ordinal_(ordinal),
        handle_(library_->handles[size_t(ordinal)]),
        name_(library_->devices[size_t(ordinal)].name),
        chip_(library_->devices[size_t(ordinal)].arch),
        uri_(std::string(Api::kScheme) + ":" + std::to_string(ordinal)),
        asyncAlloc_(fns_.memAllocAsync && fns_.memFreeAsync),
        graphs_(fns_.streamBeginCapture && fns_.streamEndCapture &&
                fns_.graphInstantiate && fns_.graphLaunch &&
                fns_.graphExecDestroy && fns_.graphDestroy) {}

  /// Retains the primary context; call once after construction.
  Status open() {
    if (int rc = fns_.primaryCtxRetain(&context_, handle_))
      return error("primaryCtxRetain", rc);
    SITS_RETURN_IF_ERROR(makeCurrent());
    keepPoolMemory();
    return Status::OK();
  }

  ~VendorDevice() override {
    if (!context_)
      return;
    (void)makeCurrent();
    for (Stream s : streams_)
      (void)fns_.streamDestroy(s);
    (void)fns_.primaryCtxRelease(handle_);
  }

  DeviceKind kind() const override { return Api::kKind; }
  std::string uri() const override { return uri_; }
  int ordinal() const override { return ordinal_; }
  std::string description() const override {
    return name_ + " (" + uri_ + (chip_.empty() ? "" : ", " + chip_) + ")";
  }
  std::string_view codeSectionPrefix() const override { return "code."; }
  const std::string &chip() const override { return chip_; }

  Status makeCurrent() override {
    if (int rc = fns_.ctxSetCurrent(context_))
      return error("ctxSetCurrent", rc);
    return Status::OK();
  }

  StatusOr<void *> allocate(size_t bytes) override {
    if (bytes == 0)
      return static_cast<void *>(nullptr);
    DevicePtr p{};
    if (int rc = fns_.memAlloc(&p, bytes))
      return error("memAlloc", rc, bytes);
    return Api::fromDevice(p);
  }

  Status free(void *ptr) override {
    if (!ptr)
      return Status::OK();
    if (int rc = fns_.memFree(Api::toDevice(ptr)))
      return error("memFree", rc);
    return Status::OK();
  }

  StatusOr<void *> allocateHost(size_t bytes) override {
    if (bytes == 0)
      return static_cast<void *>(nullptr);
    if (!fns_.memHostAlloc || !fns_.memFreeHost)
      return unsupported("memHostAlloc");
    void *p = nullptr;
    if (int rc = fns_.memHostAlloc(&p, bytes, 0))
      return error("memHostAlloc", rc, bytes);
    return p;
  }

  void freeHost(void *ptr) override {
    if (ptr)
      (void)fns_.memFreeHost(ptr);
  }

  StatusOr<void *> allocateAsync(size_t bytes, Stream stream) override {
    if (bytes == 0)
      return static_cast<void *>(nullptr);
    if (asyncAlloc_) {
      DevicePtr p{};
      int rc = fns_.memAllocAsync(&p, bytes, stream);
      if (rc == 0)
        return Api::fromDevice(p);
      if (rc != kErrorNotSupported)
        return error("memAllocAsync", rc, bytes);
      // No memory pools on this device: plain allocations from now on
      // (nothing was allocated from a pool, so frees stay consistent).
      asyncAlloc_ = false;
    }
    return allocate(bytes);
  }

  Status freeAsync(void *ptr, Stream stream) override {
    if (!ptr)
      return Status::OK();
    if (!asyncAlloc_)
      return free(ptr);
    if (int rc = fns_.memFreeAsync(Api::toDevice(ptr), stream))
      return error("memFreeAsync", rc);
    return Status::OK();
  }

  Status copyToDevice(void *dst, const void *src, size_t bytes,
                      Stream stream) override {
    if (bytes == 0)
      return Status::OK();
    if (int rc = fns_.memcpyHtoDAsync(Api::toDevice(dst),
                                      const_cast<void *>(src), bytes, stream))
      return error("memcpyHtoDAsync", rc, bytes);
    return Status::OK();
  }

  Status copyToHost(void *dst, const void *src, size_t bytes,
                    Stream stream) override {
    if (bytes == 0)
      return Status::OK();
    if (int rc = fns_.memcpyDtoHAsync(dst, Api::toDevice(src), bytes, stream))
      return error("memcpyDtoHAsync", rc, bytes);
    return Status::OK();
  }

  Status copyOnDevice(void *dst, const void *src, size_t bytes,
                      Stream stream) override {
    if (bytes == 0)
      return Status::OK();
    if (!fns_.memcpyDtoDAsync)
      return unsupported("memcpyDtoDAsync");
    if (int rc = fns_.memcpyDtoDAsync(Api::toDevice(dst), Api::toDevice(src),
                                      bytes, stream))
      return error("memcpyDtoDAsync", rc, bytes);
    return Status::OK();
  }

  Status fillZero(void *dst, size_t bytes, Stream stream) override {
    if (bytes == 0)
      return Status::OK();
    if (!fns_.memsetD8Async)
      return unsupported("memsetD8Async");
    if (int rc = fns_.memsetD8Async(Api::toDevice(dst), 0, bytes, stream))
      return error("memsetD8Async", rc, bytes);
    return Status::OK();
  }

  StatusOr<Stream> acquireStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!streams_.empty()) {
        Stream s = streams_.back();
        streams_.pop_back();
        return s;
      }
    }
    Stream s = nullptr;
    // Non-blocking: never synchronizes with the legacy default stream.
    if (int rc = fns_.streamCreate(&s, /*NON_BLOCKING=*/1))
      return error("streamCreate", rc);
    return s;
  }

  void releaseStream(Stream stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.push_back(stream);
  }

  Status synchronize(Stream stream) override {
    if (int rc = fns_.streamSynchronize(stream))
      return error("streamSynchronize", rc);
    return Status::OK();
  }

  StatusOr<ModuleHandle> loadModule(const void *image) override {
    ModuleHandle m = nullptr;
    if (int rc = fns_.moduleLoadData(&m, image))
      return error("moduleLoadData", rc);
    return m;
  }

  StatusOr<ModuleHandle> loadModuleJit(const char *ptx, int optLevel) override {
    if (!Api::kJitsPtx)
      return Status(StatusCode::kUnimplemented,
                    uri_ + ": the " + std::string(Api::kVendor) +
                        " driver cannot compile PTX; this artifact is for "
                        "NVIDIA GPUs")
          .withSubject(uri_);
    char log[4096] = {0};
    int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize,
                     kJitOptimizationLevel};
    void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log) - 1)),
                      reinterpret_cast<void *>(intptr_t(optLevel))};
    ModuleHandle m = nullptr;
    if (int rc = fns_.moduleLoadDataEx(&m, ptx, 3, options, values)) {
      Status s = error("moduleLoadDataEx", rc);
      if (log[0])
        s.mutableInfo().message +=
            "; the PTX compiler says: " + std::string(log);
      return s;
    }
    return m;
  }

  Status unloadModule(ModuleHandle module) override {
    if (int rc = fns_.moduleUnload(module))
      return error("moduleUnload", rc);
    return Status::OK();
  }

  StatusOr<Function> function(ModuleHandle module, const char *name) override {
    Function f = nullptr;
    if (int rc = fns_.moduleGetFunction(&f, module, name)) {
      Status s = error("moduleGetFunction", rc);
      s.mutableInfo().message += " (kernel '" + std::string(name) + "')";
      return s;
    }
    return f;
  }

  Status launch(Function function, const int64_t grid[3],
                const int64_t block[3], int32_t sharedBytes, Stream stream,
                void **params, void **extra) override {
    // An empty grid (a dynamic extent of 0) has no work; the driver would
    // call it invalid.
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
      return Status::OK();
    unsigned g[3], b[3];
    for (int i = 0; i < 3; ++i) {
      if (grid[i] < 1 || block[i] < 1 ||
          grid[i] > int64_t(std::numeric_limits<unsigned>::max()) ||
          block[i] > int64_t(std::numeric_limits<unsigned>::max()) ||
          sharedBytes < 0)
        return Status(StatusCode::kInternal,
                      uri_ + ": compiled code launched a kernel with grid (" +
                          dims(grid) + "), block (" + dims(block) + ") and " +
                          std::to_string(sharedBytes) +
                          " bytes of shared memory")
            .withSubject(uri_);
      g[i] = unsigned(grid[i]);
      b[i] = unsigned(block[i]);
    }
    if (int rc =
            fns_.launchKernel(function, g[0], g[1], g[2], b[0], b[1], b[2],
                              unsigned(sharedBytes), stream, params, extra))
      return error("launchKernel", rc);
    return Status::OK();
  }

  bool canRecord() const override { return graphs_ && asyncAlloc_; }

  Status beginRecording(Stream stream) override {
    if (!canRecord())
      return unsupported("streamBeginCapture");
    if (int rc = fns_.streamBeginCapture(stream, kCaptureThreadLocal))
      return error("streamBeginCapture", rc);
    return Status::OK();
  }

  StatusOr<Recording> endRecording(Stream stream) override {
    void *graph = nullptr;
    int rc = fns_.streamEndCapture(stream, &graph);
    if (rc) {
      if (graph)
        (void)fns_.graphDestroy(graph);
      return error("streamEndCapture", rc);
    }
    void *exec = nullptr;
    rc = fns_.graphInstantiate(&exec, graph, kInstantiateAutoFree);
    // The instantiation is independent of the graph it came from.
    (void)fns_.graphDestroy(graph);
    if (rc)
      return error("graphInstantiate", rc);
    return exec;
  }

  Status replay(Recording recording, Stream stream) override {
    if (int rc = fns_.graphLaunch(recording, stream))
      return error("graphLaunch", rc);
    return Status::OK();
  }

  void destroyRecording(Recording recording) override {
    if (recording)
      (void)fns_.graphExecDestroy(recording);
  }

private:
  /// A call's intermediate buffers come from the device's default memory
  /// pool, which by default hands its memory back to the OS at every
  /// stream synchronization, i.e. after every call, so that the next call
  /// maps it again. Keep it cached instead (what CUDA's guide recommends for
  /// repeated allocations); best effort, the pool works either way.
  void keepPoolMemory() {
    if (!asyncAlloc_ || !fns_.deviceGetDefaultMemPool ||
        !fns_.memPoolSetAttribute)
      return;
    void *pool = nullptr;
    uint64_t threshold = std::numeric_limits<uint64_t>::max();
    if (fns_.deviceGetDefaultMemPool(&pool, handle_) == 0 && pool)
      (void)fns_.memPoolSetAttribute(pool, kMemPoolReleaseThreshold,
                                     &threshold);
  }

  /// The vendor's name of the function that failed: "cuMemAlloc_v2",
  /// "hipMalloc".
  static const char *vendorName(const char *op) {
    struct Name {
      const char *op, *cuda, *hip;
    };
    static const Name names[] = {
        {"primaryCtxRetain", "cuDevicePrimaryCtxRetain",
         "hipDevicePrimaryCtxRetain"},
        {"ctxSetCurrent", "cuCtxSetCurrent", "hipCtxSetCurrent"},
        {"memAlloc", "cuMemAlloc_v2", "hipMalloc"},
        {"memFree", "cuMemFree_v2", "hipFree"},
        {"memAllocAsync", "cuMemAllocAsync", "hipMallocAsync"},
        {"memHostAlloc", "cuMemHostAlloc", "hipHostMalloc"},
        {"memFreeAsync", "cuMemFreeAsync", "hipFreeAsync"},
        {"memcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", "hipMemcpyHtoDAsync"},
        {"memcpyDtoHAsync", "cuMemcpyDtoHAsync_v2", "hipMemcpyDtoHAsync"},
        {"memcpyDtoDAsync", "cuMemcpyDtoDAsync_v2", "hipMemcpyDtoDAsync"},
        {"memsetD8Async", "cuMemsetD8Async", "hipMemsetD8Async"},
        {"streamCreate", "cuStreamCreate", "hipStreamCreateWithFlags"},
        {"streamSynchronize", "cuStreamSynchronize", "hipStreamSynchronize"},
        {"moduleLoadData", "cuModuleLoadData", "hipModuleLoadData"},
        {"moduleLoadDataEx", "cuModuleLoadDataEx", "hipModuleLoadDataEx"},
        {"moduleUnload", "cuModuleUnload", "hipModuleUnload"},
        {"moduleGetFunction", "cuModuleGetFunction", "hipModuleGetFunction"},
        {"launchKernel", "cuLaunchKernel", "hipModuleLaunchKernel"},
        {"streamBeginCapture", "cuStreamBeginCapture_v2",
         "hipStreamBeginCapture"},
        {"streamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture"},
        {"graphInstantiate", "cuGraphInstantiateWithFlags",
         "hipGraphInstantiateWithFlags"},
        {"graphLaunch", "cuGraphLaunch", "hipGraphLaunch"},
    };
    for (const Name &n : names)
      if (std::string_view(n.op) == op)
        return Api::kKind == DeviceKind::kCuda ? n.cuda : n.hip;
    return op;
  }

  static std::string dims(const int64_t d[3]) {
    return std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " +
           std::to_string(d[2]);
  }

  /// "cuda:0 (NVIDIA H100): cuMemAlloc_v2 failed with
  /// CUDA_ERROR_OUT_OF_MEMORY (2): out of memory (allocating 64 bytes)".
  Status error(const char *op, int rc, size_t bytes = 0) const {
    const char *function = vendorName(op);
    std::string name = Api::errorName(fns_, rc);
    std::string text = Api::errorString(fns_, rc);
    std::string message = uri_ + " (" + name_ + "): " + function +
                          " failed with " + name + " (" + std::to_string(rc) +
                          ")";
    if (!text.empty())
      message += ": " + text;
    if (rc == kErrorOutOfMemory && bytes)
      message += " (allocating " + std::to_string(bytes) + " bytes)";
    ErrorInfo info;
    info.code = StatusCode::kDriverError;
    info.message = std::move(message);
    info.subject = uri_;
    info.expected = function;
    info.actual = std::move(name);
    info.value = rc;
    return Status(std::move(info));
  }

  /// An optional driver function this library does not export.
  Status unsupported(const char *op) const {
    return Status(StatusCode::kDriverError,
                  uri_ + " (" + name_ + "): the driver library has no " +
                      vendorName(op))
        .withSubject(uri_);
  }

  std::shared_ptr<const Library<Api>> library_;
  const Fns &fns_;
  int ordinal_;
  int handle_;
  std::string name_, chip_, uri_;
  void *context_ = nullptr;
  /// Whether the stream-ordered allocator is used; cleared for good when
  /// the device says it has no memory pools.
  std::atomic<bool> asyncAlloc_;
  /// Whether the library has every graph function.
  const bool graphs_;
  std::mutex mu_;
  std::vector<Stream> streams_;
};

template <typename Api> class VendorDriver final : public Driver {
public:
  std::string_view scheme() const override { return Api::kScheme; }

  Status probe() override {
    std::lock_guard<std::mutex> lock(mu_);
    return library()->status;
  }

  std::vector<DeviceInfo> enumerate() override {
    std::lock_guard<std::mutex> lock(mu_);
    return library()->devices;
  }

  StatusOr<std::shared_ptr<Device>> open(int ordinal) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::shared_ptr<const Library<Api>> &lib = library();
    std::string uri = std::string(Api::kScheme) + ":" + std::to_string(ordinal);
    if (!lib->status.ok()) {
      Status s = lib->status;
      return s.withSubject(uri);
    }
    if (ordinal < 0 || size_t(ordinal) >= lib->devices.size())
      return Status(StatusCode::kDeviceUnavailable,
                    uri + " does not exist: found " +
                        std::to_string(lib->devices.size()) + " " +
                        Api::kVendor + " device(s)")
          .withSubject(uri);
    if (opened_.size() < lib->devices.size())
      opened_.resize(lib->devices.size());
    if (std::shared_ptr<Device> alive = opened_[size_t(ordinal)].lock())
      return alive;
    auto device = std::make_shared<VendorDevice<Api>>(lib, ordinal);
    SITS_RETURN_IF_ERROR(device->open());
    opened_[size_t(ordinal)] = device;
    return std::shared_ptr<Device>(std::move(device));
  }

private:
  /// Loads, initialises and enumerates the vendor library on first use. The
  /// library stays loaded for the process's life, as drivers do.
  const std::shared_ptr<const Library<Api>> &library() {
    if (library_)
      return library_;
    auto lib = std::make_shared<Library<Api>>();
    lib->status = load(*lib);
    library_ = std::move(lib);
    return library_;
  }

  static Status load(Library<Api> &lib) {
    auto unavailable = [](std::string message) {
      return Status(StatusCode::kDeviceUnavailable, std::move(message))
          .withSubject(Api::kScheme);
    };
    std::vector<std::string> candidates;
    const char *override = std::getenv(Api::kEnvVar);
    if (override && *override)
      candidates.emplace_back(override);
    else
      for (const char *name : Api::libraries())
        candidates.emplace_back(name);
    std::string tried;
    void *handle = nullptr;
    for (const std::string &name : candidates) {
      handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle)
        break;
      const char *e = dlerror();
      tried += (tried.empty() ? "" : "; ") + (e ? std::string(e) : name);
    }
    if (!handle)
      return unavailable(
          std::string("no ") + Api::kVendor + " driver found (" + tried + ")" +
          (override && *override ? std::string(" [") + Api::kEnvVar + " is set]"
                                 : ""));
    Symbols symbols(handle);
    Api::resolve(symbols, lib.fns);
    if (!symbols.missing().empty())
      return unavailable(std::string("the ") + Api::kVendor +
                         " driver library lacks functions SITS needs: " +
                         symbols.missing() + " (driver too old?)");
    const auto &f = lib.fns;
    if (int rc = f.init(0))
      return unavailable(std::string(Api::kVendor) +
                         " driver found but its init "
                         "failed with " +
                         Api::errorName(f, rc) + " (" + std::to_string(rc) +
                         "): no usable GPU?");
    int n = 0;
    if (int rc = f.deviceGetCount(&n))
      return unavailable(std::string(Api::kVendor) +
                         " driver found but counting "
                         "devices failed with " +
                         Api::errorName(f, rc) + " (" + std::to_string(rc) +
                         ")");
    for (int i = 0; i < n; ++i) {
      int device = i;
      if (f.deviceGet(&device, i) != 0)
        continue;
      char buf[256] = {0};
      if (f.deviceGetName(buf, int(sizeof(buf) - 1), device) != 0)
        buf[0] = '\0';
      DeviceInfo info;
      info.uri =
          std::string(Api::kScheme) + ":" + std::to_string(lib.devices.size());
      info.name = buf[0] ? buf : std::string(Api::kVendor) + " device";
      info.kind = Api::kKind;
      info.arch = Api::chip(f, device);
      lib.devices.push_back(std::move(info));
      lib.handles.push_back(device);
    }
    if (lib.devices.empty())
      return unavailable(std::string(Api::kVendor) +
                         " driver found but it reports no devices");
    return Status::OK();
  }

  std::mutex mu_;
  std::shared_ptr<const Library<Api>> library_;
  std::vector<std::weak_ptr<Device>> opened_;
};

} // namespace

std::unique_ptr<Driver> makeCudaDriver() {
  return std::make_unique<VendorDriver<CudaApi>>();
}

std::unique_ptr<Driver> makeHipDriver() {
  return std::make_unique<VendorDriver<HipApi>>();
}

} // namespace sits::runtime
