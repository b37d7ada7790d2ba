//===- gpu_driver_test.cpp - The CUDA driver against the fake libcuda
//------===//
//
// The runtime's real CUDA code paths (probe, enumeration, primary context,
// device memory, copies both ways, module load, kernel launch, the mgpu*
// ABI, error mapping, teardown) run against test/unit/runtime/fake_cuda,
// which this binary selects with $SITS_CUDA_DRIVER before the registry is
// first used. The host code is kernels/gpu_add.c, whose device image names
// a kernel the fake runs on the host, so results are real numbers.
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"
#include "sits/runtime/device_memory.h"
#include "sits/runtime/kv/device_backend.h"

#include <atomic>
#include <dlfcn.h>
#include <thread>

using namespace sits::runtime;
using namespace sits::runtime::test;

namespace {

// Before main: the registry reads $SITS_CUDA_DRIVER / $SITS_HIP_DRIVER when
// first asked. The fake serves both.
const bool kDriverSelected = [] {
  setenv("SITS_CUDA_DRIVER", SITS_TEST_FAKE_CUDA, 1);
  setenv("SITS_HIP_DRIVER", SITS_TEST_FAKE_CUDA, 1);
  unsetenv("SITS_FAKE_CUDA_FAIL");
  return true;
}();

/// The fake's introspection (the same loaded object the runtime uses).
struct Fake {
  Fake() {
    void *h = dlopen(SITS_TEST_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    stats = reinterpret_cast<decltype(stats)>(dlsym(h, "sitsFakeCudaStats"));
    graphStats = reinterpret_cast<decltype(graphStats)>(
        dlsym(h, "sitsFakeCudaGraphStats"));
    reset = reinterpret_cast<decltype(reset)>(dlsym(h, "sitsFakeCudaReset"));
    launch = reinterpret_cast<decltype(launch)>(dlsym(h, "sitsFakeCudaLaunch"));
  }
  struct Stats {
    long long buffers, modules, streams, contexts, launches, calls, jitOpt,
        toDevice, toHost, releaseThreshold;
  };
  Stats get(const char *fn = nullptr) const {
    long long v[10];
    stats(fn, v);
    return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]};
  }
  struct Graphs {
    long long graphs, instantiated, launches, capturing, pinned;
  };
  Graphs graphs() const {
    long long v[5];
    graphStats(v);
    return {v[0], v[1], v[2], v[3], v[4]};
  }
  void (*stats)(const char *, long long *);
  void (*graphStats)(long long *);
  void (*reset)();
  int (*launch)(int, char *, int, unsigned *, int *, int *);
};

const Fake &fake() {
  static Fake f;
  return f;
}

/// Sets $SITS_FAKE_CUDA_FAIL (and resets the fake's call counts) for a scope.
struct FailCalls {
  explicit FailCalls(const char *spec) {
    fake().reset();
    setenv("SITS_FAKE_CUDA_FAIL", spec, 1);
  }
  ~FailCalls() { unsetenv("SITS_FAKE_CUDA_FAIL"); }
};

std::string gpuManifest(const std::string &kind = "cuda",
                        const std::string &abi = "mlir-gpu-runtime") {
  return manifestJson(
      {entryJson("main", {{"weights", "weights", "i8", {16}, {}},
                          {"input", "x", "f32", {-1, 4}, {"rows", ""}},
                          {"output", "z", "f32", {-1, 4}, {"rows", ""}}})},
      {}, hostTriple(),
      ", \"device\": {\"kind\": \"" + kind + "\", \"abi\": \"" + abi +
          "\", \"chip\": \"sm_90\", \"image_format\": \"bin\"}");
}

std::vector<uint8_t> gpuArtifact(const std::string &manifest = gpuManifest()) {
  std::vector<float> w = {1, 2, 3, 4};
  std::vector<uint8_t> weights(reinterpret_cast<uint8_t *>(w.data()),
                               reinterpret_cast<uint8_t *>(w.data()) + 16);
  return writeArtifact(manifest, kernelBytes("gpu_add"), &weights);
}

StatusOr<Module> loadGpu(const std::vector<uint8_t> &bytes = gpuArtifact(),
                         const std::string &device = "cuda:0",
                         bool graphs = true) {
  LoadOptions o;
  o.device = device;
  o.gpuGraphs = graphs;
  return Module::load(bytes.data(), bytes.size(), o);
}

/// Runs main on rows x 4 inputs 0, 1, 2, ...; returns z.
StatusOr<std::vector<float>> runRows(const Module &m, int64_t rows) {
  std::vector<float> x(size_t(rows) * 4), z(x.size(), -1.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(i);
  Status s = m.run("main", {BufferView(x.data(), DType::kF32, {rows, 4})},
                   {BufferView(z.data(), DType::kF32, {rows, 4})});
  if (!s.ok())
    return s;
  return z;
}

/// z = x + 2 w for x = 0, 1, 2, ... and w = (1, 2, 3, 4) broadcast over rows.
bool isSum(const std::vector<float> &z) {
  for (size_t i = 0; i < z.size(); ++i)
    if (z[i] != float(i) + 2.0f * float(i % 4 + 1))
      return false;
  return true;
}

void expectSum(const std::vector<float> &z) {
  for (size_t i = 0; i < z.size(); ++i)
    ASSERT_EQ(z[i], float(i) + 2.0f * float(i % 4 + 1)) << i;
}

/// Runs main on `rows` rows and checks the sum.
void expectRowsSum(const Module &m, int64_t rows) {
  StatusOr<std::vector<float>> z = runRows(m, rows);
  ASSERT_TRUE(z.ok()) << z.status().toString();
  expectSum(*z);
}

/// Runs main on `rows` x 4 inputs 0, 1, 2, ... read through a view with
/// a column stride of 2 (staged on the host), and checks the sum.
void expectStridedSum(const Module &m, int64_t rows) {
  std::vector<float> x(size_t(rows) * 8), z(size_t(rows) * 4, -1.0f);
  for (size_t k = 0; k < z.size(); ++k)
    x[2 * k] = float(k);
  SITS_ASSERT_OK(m.run("main",
                       {BufferView(x.data(), DType::kF32, {rows, 4}, {8, 2})},
                       {BufferView(z.data(), DType::kF32, {rows, 4})}));
  expectSum(z);
}

void expectNothingLive() {
  Fake::Stats s = fake().get();
  EXPECT_EQ(s.buffers, 0);
  EXPECT_EQ(s.modules, 0);
  EXPECT_EQ(s.streams, 0);
  EXPECT_EQ(s.contexts, 0);
}

TEST(CudaDriver, EnumeratesAndOpensDevices) {
  ASSERT_TRUE(kDriverSelected);
  DeviceRegistry &r = DeviceRegistry::global();
  SITS_ASSERT_OK(r.driver("cuda")->probe());
  std::vector<DeviceInfo> cuda = r.driver("cuda")->enumerate();
  ASSERT_EQ(cuda.size(), 1u);
  EXPECT_EQ(cuda[0].uri, "cuda:0");
  EXPECT_EQ(cuda[0].name, "SITS fake CUDA device 0");
  EXPECT_EQ(cuda[0].arch, "sm_90");
  {
    StatusOr<std::shared_ptr<Device>> d = r.open("CUDA:0");
    ASSERT_TRUE(d.ok()) << d.status().toString();
    EXPECT_EQ((*d)->kind(), DeviceKind::kCuda);
    EXPECT_EQ((*d)->uri(), "cuda:0");
    EXPECT_EQ((*d)->description(), "SITS fake CUDA device 0 (cuda:0, sm_90)");
    // The default memory pool keeps what it has (max release threshold).
    EXPECT_EQ(fake().get().releaseThreshold, -1);
    // One device object (and one context retain) while it is in use.
    StatusOr<std::shared_ptr<Device>> again = r.open("cuda");
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->get(), d->get());
    EXPECT_EQ(fake().get().contexts, 1);
  }
  EXPECT_EQ(fake().get().contexts, 0);
  StatusOr<std::shared_ptr<Device>> missing = r.open("cuda:1");
  EXPECT_EQ(missing.code(), StatusCode::kDeviceUnavailable);
  EXPECT_NE(missing.status().message().find("found 1 CUDA device(s)"),
            std::string::npos);
}

TEST(CudaDriver, RunsGpuHostCode) {
  {
    StatusOr<Module> m = loadGpu();
    ASSERT_TRUE(m.ok()) << m.status().toString();
    EXPECT_EQ(m->device().uri(), "cuda:0");
    // Loaded: the weights on the device, the image in a module.
    Fake::Stats loaded = fake().get();
    EXPECT_EQ(loaded.buffers, 1);
    EXPECT_EQ(loaded.modules, 1);
    fake().reset();
    StatusOr<std::vector<float>> z = runRows(*m, 5);
    ASSERT_TRUE(z.ok()) << z.status().toString();
    expectSum(*z);
    Fake::Stats ran = fake().get();
    EXPECT_EQ(ran.launches, 2);
    EXPECT_EQ(ran.toDevice, 5 * 4 * 4);
    EXPECT_EQ(ran.toHost, 5 * 4 * 4);
    EXPECT_EQ(ran.buffers, 1); // the call's buffers are gone
    char name[64];
    unsigned dims[7];
    int params = 0, inBuffers = 0;
    ASSERT_EQ(fake().launch(1, name, sizeof(name), dims, &params, &inBuffers),
              0);
    EXPECT_STREQ(name, "sits_fake_add_f32");
    EXPECT_EQ(std::vector<unsigned>(dims, dims + 7),
              (std::vector<unsigned>{1, 1, 1, 128, 1, 1, 0}));
    EXPECT_EQ(params, 5);
    EXPECT_EQ(inBuffers, 3); // a, b (the weights) and c are device buffers
    // Strided views are staged on the host; empty ones need no buffer.
    expectStridedSum(*m, 2);
    // Empty inputs: no buffers, and the launches of an empty grid are no-ops
    // (the driver would reject them).
    fake().reset();
    SITS_ASSERT_OK(m->run("main", {BufferView(nullptr, DType::kF32, {0, 4})},
                          {BufferView(nullptr, DType::kF32, {0, 4})}));
    EXPECT_EQ(fake().get().launches, 0);
  }
  expectNothingLive();
}

TEST(CudaDriver, FallsBackWithoutMemoryPools) {
  setenv("SITS_FAKE_CUDA_NO_POOLS", "1", 1);
  {
    StatusOr<Module> m = loadGpu();
    ASSERT_TRUE(m.ok()) << m.status().toString();
    fake().reset();
    expectRowsSum(*m, 3);
    EXPECT_EQ(fake().get("cuMemAlloc_v2").calls, 3);   // x, z, the temporary
    EXPECT_EQ(fake().get("cuMemAllocAsync").calls, 1); // tried once
  }
  unsetenv("SITS_FAKE_CUDA_NO_POOLS");
  expectNothingLive();
}

TEST(CudaDriver, ConcurrentCallsUseTheirOwnStreams) {
  {
    StatusOr<Module> m = loadGpu();
    ASSERT_TRUE(m.ok()) << m.status().toString();
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) {
          StatusOr<std::vector<float>> z = runRows(*m, 1 + (t + i) % 7);
          if (!z.ok() || !isSum(*z))
            ++failures;
        }
      });
    for (std::thread &t : threads)
      t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_LE(fake().get().streams, 4);
  }
  expectNothingLive();
}

TEST(CudaDriver, DriverErrorsBecomeTypedStatuses) {
  {
    // Plain launches: a recording that fails falls back to them.
    StatusOr<Module> m = loadGpu(gpuArtifact(), "cuda:0", false);
    ASSERT_TRUE(m.ok()) << m.status().toString();
    {
      FailCalls fail("cuMemAllocAsync=2@3"); // the call's temporary buffer
      StatusOr<std::vector<float>> z = runRows(*m, 2);
      ASSERT_FALSE(z.ok());
      const ErrorInfo &e = z.status().info();
      EXPECT_EQ(e.code, StatusCode::kDriverError);
      EXPECT_EQ(e.subject, "cuda:0");
      EXPECT_EQ(e.expected, "cuMemAllocAsync");
      EXPECT_EQ(e.actual, "CUDA_ERROR_OUT_OF_MEMORY");
      EXPECT_EQ(e.value, 2);
      EXPECT_EQ(
          e.message,
          "cuda:0 (SITS fake CUDA device 0): cuMemAllocAsync failed with "
          "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory (allocating 32 bytes)");
      // Nothing launched after the failure, nothing leaked.
      EXPECT_EQ(fake().get().launches, 0);
      EXPECT_EQ(fake().get().buffers, 1);
    }
    {
      FailCalls fail("cuLaunchKernel=719@2");
      StatusOr<std::vector<float>> z = runRows(*m, 2);
      ASSERT_FALSE(z.ok());
      EXPECT_EQ(z.status().info().expected, "cuLaunchKernel");
      EXPECT_EQ(z.status().info().actual, "CUDA_ERROR_LAUNCH_FAILED");
      EXPECT_EQ(fake().get().buffers, 1);
    }
    {
      FailCalls fail("cuMemcpyDtoHAsync_v2=1");
      SITS_EXPECT_CODE(runRows(*m, 2).status(), StatusCode::kDriverError);
    }
    {
      FailCalls fail("cuStreamSynchronize=700");
      StatusOr<std::vector<float>> z = runRows(*m, 1);
      EXPECT_EQ(z.status().info().actual, "CUDA_ERROR_ILLEGAL_ADDRESS");
    }
    // The model still works once the driver does.
    StatusOr<std::vector<float>> z = runRows(*m, 2);
    ASSERT_TRUE(z.ok()) << z.status().toString();
    expectSum(*z);
  }
  expectNothingLive();
}

/// main and update (pool += x in place, z = pool + w; gpu_add.c).
std::vector<uint8_t> gpuUpdateArtifact() {
  std::string update =
      entryJson("update", {{"weights", "weights", "i8", {16}, {}},
                           {"input", "pool", "f32", {-1, 4}, {"rows", ""}},
                           {"input", "x", "f32", {-1, 4}, {"rows", ""}},
                           {"output", "z", "f32", {-1, 4}, {"rows", ""}}});
  const std::string pool = "\"name\": \"pool\"";
  update.replace(update.find(pool), pool.size(),
                 pool + ", \"updated_in_place\": true");
  std::string manifest = gpuManifest();
  const std::string entries = "\"entry_points\": [";
  manifest.insert(manifest.find(entries) + entries.size(), update + ", ");
  return gpuArtifact(manifest);
}

TEST(CudaDriver, RepeatedCallsAreRecordedAndReplayed) {
  {
    StatusOr<Module> m = loadGpu();
    ASSERT_TRUE(m.ok()) << m.status().toString();
    fake().reset();
    // The first call of a signature launches its kernels.
    expectRowsSum(*m, 3);
    EXPECT_EQ(fake().graphs().instantiated, 0);
    // The second is recorded (nothing runs while it is), then replayed.
    expectRowsSum(*m, 3);
    Fake::Graphs g = fake().graphs();
    EXPECT_EQ(g.graphs, 0); // the graph went once instantiated
    EXPECT_EQ(g.instantiated, 1);
    EXPECT_EQ(g.launches, 1);
    EXPECT_EQ(g.capturing, 0);
    // Later calls replay it: one launch each, new data each time (strided
    // too), the two kernels run in order.
    for (int i = 0; i < 5; ++i)
      expectStridedSum(*m, 3);
    EXPECT_EQ(fake().graphs().launches, 6);
    // The first call's two, and the two the recording captured.
    EXPECT_EQ(fake().get("cuLaunchKernel").calls, 4);
    EXPECT_EQ(fake().get().launches, 2 + 6 * 2);
    GpuCallStats st = m->gpuStats();
    EXPECT_EQ(st.calls, 7u);
    EXPECT_EQ(st.recordings, 1u);
    EXPECT_EQ(st.replays, 6u);
    EXPECT_EQ(st.recordFailures, 0u);
    EXPECT_EQ(st.kernels, 14u);
    EXPECT_EQ(st.launches, 8u);
    EXPECT_GT(st.hostNanoseconds, 0u);
    // Another shape is another signature.
    for (int i = 0; i < 2; ++i) {
      expectRowsSum(*m, 5);
    }
    // The recording keeps x and z in one device block, mirrored in
    // page-locked memory, and its temporary.
    EXPECT_EQ(fake().graphs().instantiated, 2);
    EXPECT_EQ(fake().graphs().pinned, 2);
    EXPECT_EQ(fake().get().buffers, 1 + 2 * 2);
    // A replay: one copy down, one launch, one copy back.
    fake().reset();
    expectRowsSum(*m, 5);
    EXPECT_EQ(fake().get("cuMemcpyHtoDAsync_v2").calls, 1);
    EXPECT_EQ(fake().get("cuMemcpyDtoHAsync_v2").calls, 1);
    EXPECT_EQ(fake().get("cuGraphLaunch").calls, 1);
    EXPECT_EQ(fake().get().toDevice, 5 * 4 * 4);
    // At most kMaxRecordings are kept: the least recently used goes.
    for (int64_t rows = 10; rows < 30; ++rows)
      for (int i = 0; i < 2; ++i)
        ASSERT_TRUE(runRows(*m, rows).ok());
    EXPECT_EQ(fake().graphs().instantiated, 16);
    EXPECT_EQ(m->gpuStats().recordings, 22u);
  }
  // The recordings and their buffers go with the model.
  EXPECT_EQ(fake().graphs().instantiated, 0);
  EXPECT_EQ(fake().graphs().pinned, 0);
  expectNothingLive();
}

TEST(CudaDriver, ReplaysUpdateDevicePoolsInPlace) {
  {
    std::vector<uint8_t> bytes = gpuUpdateArtifact();
    StatusOr<Module> m = loadGpu(bytes);
    ASSERT_TRUE(m.ok()) << m.status().toString();
    StatusOr<std::shared_ptr<DeviceMemory>> mem = DeviceMemory::open("cuda:0");
    ASSERT_TRUE(mem.ok());
    StatusOr<void *> pool = (*mem)->allocate(2 * 4 * 4);
    ASSERT_TRUE(pool.ok());
    BufferView onDevice(*pool, DType::kF32, {2, 4});
    onDevice.deviceType = kDLPackCuda;
    std::vector<float> x(8, 1.0f), z(8);
    for (int step = 1; step <= 4; ++step) {
      SITS_ASSERT_OK(m->run(
          "update", {onDevice, BufferView(x.data(), DType::kF32, {2, 4})},
          {BufferView(z.data(), DType::kF32, {2, 4})}));
      for (size_t i = 0; i < 8; ++i)
        ASSERT_EQ(z[i], float(step) + float(i % 4 + 1)) << step;
    }
    EXPECT_EQ(m->gpuStats().replays, 3u);
    // A pool at another address is another signature.
    StatusOr<void *> other = (*mem)->allocate(2 * 4 * 4);
    ASSERT_TRUE(other.ok());
    BufferView moved(*other, DType::kF32, {2, 4});
    moved.deviceType = kDLPackCuda;
    SITS_ASSERT_OK(m->run("update",
                          {moved, BufferView(x.data(), DType::kF32, {2, 4})},
                          {BufferView(z.data(), DType::kF32, {2, 4})}));
    EXPECT_EQ(z[0], 1.0f + 1.0f);
    EXPECT_EQ(m->gpuStats().replays, 3u);
    SITS_ASSERT_OK((*mem)->free(*pool));
    SITS_ASSERT_OK((*mem)->free(*other));
  }
  expectNothingLive();
}

TEST(CudaDriver, RefusedRecordingsFallBackToLaunches) {
  for (const char *spec :
       {"cuGraphInstantiateWithFlags=2", "cuStreamBeginCapture_v2=801",
        "cuStreamEndCapture=901", "cuMemAlloc_v2=2@1"}) {
    SCOPED_TRACE(spec);
    {
      StatusOr<Module> m = loadGpu();
      ASSERT_TRUE(m.ok()) << m.status().toString();
      FailCalls fail(spec);
      for (int i = 0; i < 4; ++i) {
        expectRowsSum(*m, 2);
      }
      GpuCallStats st = m->gpuStats();
      EXPECT_EQ(st.recordFailures, 1u);
      EXPECT_EQ(st.replays, 0u);
      EXPECT_EQ(st.launches, 8u);
      // Tried once, not at every call; nothing of it is left.
      EXPECT_LE(fake().get("cuStreamBeginCapture_v2").calls, 1);
      Fake::Graphs g = fake().graphs();
      EXPECT_EQ(g.graphs + g.instantiated + g.capturing, 0);
      EXPECT_EQ(fake().get().buffers, 1);
    }
    expectNothingLive();
  }
  // Without page-locked memory, a recording copies each view on its own.
  {
    StatusOr<Module> m = loadGpu();
    ASSERT_TRUE(m.ok());
    FailCalls fail("cuMemHostAlloc=2");
    for (int i = 0; i < 3; ++i)
      expectStridedSum(*m, 3);
    EXPECT_EQ(m->gpuStats().replays, 2u);
    EXPECT_EQ(fake().graphs().pinned, 0);
  }
  expectNothingLive();
  // Off by choice: every call launches.
  {
    StatusOr<Module> m = loadGpu(gpuArtifact(), "cuda:0", false);
    ASSERT_TRUE(m.ok());
    fake().reset();
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(runRows(*m, 2).ok());
    EXPECT_EQ(fake().get("cuStreamBeginCapture_v2").calls, 0);
    EXPECT_EQ(m->gpuStats().launches, 6u);
  }
  // HIP's graphs, by their names.
  {
    StatusOr<Module> m = loadGpu(gpuArtifact(gpuManifest("hip")), "hip:0");
    ASSERT_TRUE(m.ok());
    for (int i = 0; i < 3; ++i) {
      expectRowsSum(*m, 2);
    }
    EXPECT_EQ(m->gpuStats().replays, 2u);
  }
  expectNothingLive();
}

TEST(CudaDriver, LoadFailuresLeaveNothingBehind) {
  for (const char *spec : {"cuModuleLoadData=209", "cuMemAlloc_v2=2",
                           "cuMemcpyHtoDAsync_v2=1", "cuStreamCreate=2"}) {
    FailCalls fail(spec);
    StatusOr<Module> m = loadGpu();
    ASSERT_FALSE(m.ok()) << spec;
    EXPECT_EQ(m.code(), StatusCode::kDriverError) << m.status().toString();
    expectNothingLive();
  }
  FailCalls fail("cuModuleLoadData=209");
  StatusOr<Module> m = loadGpu();
  EXPECT_EQ(
      m.status().message(),
      "cuda:0 (SITS fake CUDA device 0): cuModuleLoadData failed with "
      "CUDA_ERROR_NO_BINARY_FOR_GPU (209): fake driver error (the artifact's "
      "device image is bin for sm_90; this device is sm_90)");
}

TEST(GpuManifest, DeviceObjectFollowsTheSchema) {
  std::vector<uint8_t> code = kernelBytes("add");
  for (auto [device, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"[]", "manifest field 'device' must be an object"},
           {"{\"abi\": \"mlir-gpu-runtime\"}",
            "manifest field 'device.kind' is missing"},
           {"{\"kind\": \"cuda\", \"abi\": 3}",
            "manifest field 'device.abi' must be a string, not integer"},
           {"{\"kind\": \"cuda\", \"abi\": \"x\", \"chip\": 90}",
            "manifest field 'device.chip' must be a string, not integer"}}) {
    ArtifactWriter w;
    Status s = w.setManifest(manifestJson({addEntry()}, {}, hostTriple(),
                                          ", \"device\": " + device));
    if (s.ok())
      s = w.addSection("code.cpu", code.data(), code.size());
    if (s.ok())
      s = w.serialize().status();
    // The writer refuses what the reader would call corrupt.
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << device;
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
  }
}

TEST(HipDriver, RunsTheSameHostCode) {
  // The HIP instantiation of the driver: its names, its pointer types.
  {
    StatusOr<Module> m =
        loadGpu(gpuArtifact(gpuManifest("hip")), "hip:0", false);
    ASSERT_TRUE(m.ok()) << m.status().toString();
    EXPECT_EQ(m->device().kind(), DeviceKind::kHip);
    EXPECT_EQ(m->device().description(), "SITS fake CUDA device 0 (hip:0)");
    StatusOr<std::vector<float>> z = runRows(*m, 3);
    ASSERT_TRUE(z.ok()) << z.status().toString();
    expectSum(*z);
    FailCalls fail("cuMemAllocAsync=2@1");
    z = runRows(*m, 3);
    ASSERT_FALSE(z.ok());
    EXPECT_EQ(z.status().code(), StatusCode::kDriverError);
    EXPECT_EQ(z.status().info().subject, "hip:0");
    EXPECT_EQ(z.status().info().expected, "hipMallocAsync");
    EXPECT_EQ(z.status().info().value, 2);
    // CUDA code is not for a HIP device.
    EXPECT_EQ(loadGpu(gpuArtifact(), "hip:0").code(),
              StatusCode::kIncompatibleTarget);
  }
  expectNothingLive();
}

TEST(CudaDriver, RefusesArtifactsForOtherDevices) {
  LoadOptions cuda;
  cuda.device = "cuda:0";
  // CPU code on the GPU and GPU code on the CPU.
  std::vector<uint8_t> cpu =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("add"));
  StatusOr<Module> m = Module::load(cpu.data(), cpu.size(), cuda);
  EXPECT_EQ(m.code(), StatusCode::kIncompatibleTarget);
  EXPECT_NE(m.status().message().find("compiled for the CPU"),
            std::string::npos);
  std::vector<uint8_t> gpu = gpuArtifact();
  m = Module::load(gpu.data(), gpu.size());
  EXPECT_EQ(m.code(), StatusCode::kIncompatibleTarget);
  EXPECT_EQ(
      m.status().message(),
      "artifact was compiled for cuda GPUs (target 'cpu', sm_90): load it on a "
      "cuda device (e.g. \"cuda:0\"), not on cpu");
  // Another vendor's code, another ABI.
  m = loadGpu(gpuArtifact(gpuManifest("hip")));
  EXPECT_EQ(m.code(), StatusCode::kIncompatibleTarget);
  EXPECT_EQ(m.status().info().subject, "device.kind");
  m = loadGpu(gpuArtifact(gpuManifest("cuda", "other-abi")));
  EXPECT_EQ(m.code(), StatusCode::kIncompatibleTarget);
  EXPECT_EQ(m.status().info().subject, "device.abi");
  expectNothingLive();
}

} // namespace

TEST(CudaDriver, DeviceMemoryAllocatesZeroedAndCopiesEveryWay) {
  {
    StatusOr<std::shared_ptr<DeviceMemory>> mem = DeviceMemory::open("cuda:0");
    ASSERT_TRUE(mem.ok()) << mem.status().toString();
    EXPECT_EQ((*mem)->uri(), "cuda:0");
    EXPECT_EQ((*mem)->dlpackDeviceType(), kDLPackCuda);
    EXPECT_EQ((*mem)->deviceId(), 0);
    StatusOr<void *> a = (*mem)->allocate(64), b = (*mem)->allocate(64);
    ASSERT_TRUE(a.ok() && b.ok());
    std::vector<float> host(16, -1.0f), back(16, -1.0f);
    SITS_ASSERT_OK((*mem)->copy(host.data(), *a, 64,
                                DeviceMemory::Direction::kDeviceToHost));
    EXPECT_EQ(host, std::vector<float>(16, 0.0f)); // zero-filled
    for (size_t i = 0; i < host.size(); ++i)
      host[i] = float(i);
    SITS_ASSERT_OK((*mem)->copy(*a, host.data(), 64,
                                DeviceMemory::Direction::kHostToDevice));
    SITS_ASSERT_OK(
        (*mem)->copy(*b, *a, 64, DeviceMemory::Direction::kDeviceToDevice));
    SITS_ASSERT_OK((*mem)->copy(back.data(), *b, 64,
                                DeviceMemory::Direction::kDeviceToHost));
    EXPECT_EQ(back, host);
    // A copy outside the buffer is the driver's error, typed.
    Status bad =
        (*mem)->copy(*b, *a, 4096, DeviceMemory::Direction::kDeviceToDevice);
    EXPECT_EQ(bad.code(), StatusCode::kDriverError);
    SITS_ASSERT_OK((*mem)->free(*a));
    SITS_ASSERT_OK((*mem)->free(*b));
  }
  EXPECT_EQ(DeviceMemory::open("cpu").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceMemory::open("cuda:7").code(),
            StatusCode::kDeviceUnavailable);
  expectNothingLive();
}

TEST(CudaDriver, DeviceViewsAreUsedInPlace) {
  {
    StatusOr<Module> m = loadGpu();
    ASSERT_TRUE(m.ok()) << m.status().toString();
    StatusOr<std::shared_ptr<DeviceMemory>> mem = DeviceMemory::open("cuda:0");
    ASSERT_TRUE(mem.ok());
    StatusOr<void *> x = (*mem)->allocate(3 * 4 * 4);
    ASSERT_TRUE(x.ok());
    std::vector<float> rows(12);
    for (size_t i = 0; i < rows.size(); ++i)
      rows[i] = float(i);
    SITS_ASSERT_OK((*mem)->copy(*x, rows.data(), 48,
                                DeviceMemory::Direction::kHostToDevice));
    BufferView onDevice(*x, DType::kF32, {3, 4});
    onDevice.deviceType = kDLPackCuda;
    std::vector<float> z(12, -1.0f);
    fake().reset();
    SITS_ASSERT_OK(m->run("main", {onDevice},
                          {BufferView(z.data(), DType::kF32, {3, 4})}));
    expectSum(z);
    EXPECT_EQ(fake().get().toDevice, 0); // x was not copied down
    EXPECT_EQ(fake().get().toHost, 48);
    // Another device's memory, or a strided device view, is refused.
    BufferView elsewhere = onDevice;
    elsewhere.deviceId = 1;
    Status wrong = m->run("main", {elsewhere},
                          {BufferView(z.data(), DType::kF32, {3, 4})});
    EXPECT_EQ(wrong.code(), StatusCode::kDeviceUnavailable);
    EXPECT_NE(wrong.message().find("lives on cuda:1, but the model runs on "
                                   "cuda:0"),
              std::string::npos)
        << wrong.message();
    BufferView strided(*x, DType::kF32, {2, 4}, {8, 1});
    strided.deviceType = kDLPackCuda;
    EXPECT_EQ(
        m->run("main", {strided}, {BufferView(z.data(), DType::kF32, {2, 4})})
            .code(),
        StatusCode::kSignatureMismatch);
    SITS_ASSERT_OK((*mem)->free(*x));
  }
  expectNothingLive();
}

TEST(CudaDriver, KVPoolDeviceTierInGpuMemory) {
  {
    StatusOr<std::shared_ptr<kv::MemoryBackend>> backend =
        kv::deviceMemoryBackend("cuda:0");
    ASSERT_TRUE(backend.ok()) << backend.status().toString();
    EXPECT_FALSE((*backend)->hostAccessible());
    EXPECT_EQ((*backend)->dlpackDeviceType(), kDLPackCuda);
    kv::PoolConfig config;
    config.num_blocks = 4;
    config.num_host_blocks = 2;
    config.block_size = 2;
    config.head_dim = 4;
    config.dtype = kv::DType::kF32;
    kv::MemoryOptions options;
    options.device_backend = *backend;
    StatusOr<std::unique_ptr<kv::Memory>> mem =
        kv::Memory::create(config, options);
    ASSERT_TRUE(mem.ok()) << mem.status().toString();
    const int64_t stride = (*mem)->layout().block_stride;
    std::vector<uint8_t> block(size_t(stride), 7), back(size_t(stride), 0);
    auto *device = static_cast<uint8_t *>((*mem)->data(kv::Tier::kDevice));
    DeviceMemory::Direction down = DeviceMemory::Direction::kHostToDevice,
                            up = DeviceMemory::Direction::kDeviceToHost;
    StatusOr<std::shared_ptr<DeviceMemory>> gpu = DeviceMemory::open("cuda:0");
    ASSERT_TRUE(gpu.ok());
    SITS_ASSERT_OK((*gpu)->copy(device + stride, block.data(), stride, down));
    // Copy-on-write on the device, an offload to the host tier and back.
    kv::BlockCopy cow, out, in;
    cow.src = 1, cow.dst = 2, cow.tokens = 2;
    out.src = 1, out.dst_tier = kv::Tier::kHost, out.dst = 0, out.tokens = 2;
    in.src_tier = kv::Tier::kHost, in.src = 0, in.dst = 3, in.tokens = 2;
    SITS_ASSERT_OK((*mem)->apply({cow, out, in}));
    for (int64_t b : {2, 3}) {
      SITS_ASSERT_OK(
          (*gpu)->copy(back.data(), device + b * stride, stride, up));
      EXPECT_EQ(back, block) << "block " << b;
    }
    auto *host = static_cast<uint8_t *>((*mem)->data(kv::Tier::kHost));
    EXPECT_EQ(std::vector<uint8_t>(host, host + stride), block);
    SITS_ASSERT_OK((*gpu)->copy(back.data(), device, stride, up));
    EXPECT_EQ(back, std::vector<uint8_t>(size_t(stride), 0)); // the null block
  }
  expectNothingLive();
}
