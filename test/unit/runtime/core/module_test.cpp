//===- module_test.cpp - Loading and running real shared objects
//-----------===//
#include "core_test_util.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <thread>
#include <vector>

using namespace sits::runtime;
using namespace sits::runtime::test;

namespace {

StatusOr<Module> loadAdd() {
  std::vector<uint8_t> bytes = writeArtifact(
      manifestJson({addEntry(),
                    entryJson("scale", {{"input", "x", "f32", {-1}, {}},
                                        {"output", "out", "f32", {-1}, {}}})}),
      kernelBytes("add"));
  return Module::load(bytes.data(), bytes.size());
}

/// 64-byte-aligned float storage.
struct Floats {
  explicit Floats(size_t n, float start = 0) {
    StatusOr<AlignedBuffer> b = AlignedBuffer::allocate(n * sizeof(float) + 64);
    buffer = std::move(b).value();
    for (size_t i = 0; i < n; ++i)
      data()[i] = start + float(i);
  }
  float *data() { return static_cast<float *>(buffer.data()); }
  AlignedBuffer buffer;
};

TEST(Module, RunsAnEntryPoint) {
  StatusOr<Module> m = loadAdd();
  ASSERT_TRUE(m.ok()) << m.status().toString();
  EXPECT_EQ(m->entryPoints(), (std::vector<std::string>{"main", "scale"}));
  ASSERT_NE(m->signature("main"), nullptr);
  EXPECT_EQ(m->signature("main")->args.size(), 3u);
  EXPECT_EQ(m->signature("nope"), nullptr);
  EXPECT_EQ(m->device().uri(), "cpu");

  Floats x(12, 0), y(12, 100), z(12, -1);
  BufferView xv(x.data(), DType::kF32, {3, 4}),
      yv(y.data(), DType::kF32, {3, 4}), zv(z.data(), DType::kF32, {3, 4});
  StatusOr<std::vector<std::vector<int64_t>>> shapes =
      m->outputShapes("main", {xv, yv});
  ASSERT_TRUE(shapes.ok()) << shapes.status().toString();
  EXPECT_EQ(shapes->at(0), (std::vector<int64_t>{3, 4}));
  SITS_ASSERT_OK(m->run("main", {xv, yv}, {zv}));
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(z.data()[i], float(2 * i + 100));

  Floats s(5, 1), out(5);
  SITS_ASSERT_OK(m->run("scale", {BufferView(s.data(), DType::kF32, {5})},
                        {BufferView(out.data(), DType::kF32, {5})}));
  EXPECT_EQ(out.data()[4], 10.0f);
  // Empty tensors are fine.
  SITS_ASSERT_OK(m->run("main",
                        {BufferView(nullptr, DType::kF32, {0, 4}),
                         BufferView(nullptr, DType::kF32, {0, 4})},
                        {BufferView(nullptr, DType::kF32, {0, 4})}));
}

TEST(Module, StagesMisalignedAndStridedBuffers) {
  StatusOr<Module> m = loadAdd();
  ASSERT_TRUE(m.ok());
  // Contiguous buffers one float past a cache line (used in place: the
  // kernel checks float alignment only) and one byte past one (staged
  // through aligned copies: the kernel traps on them).
  for (size_t shift : {sizeof(float), size_t(1)}) {
    std::vector<uint8_t> xs(64 + 8 * sizeof(float) + 64), ys(xs.size()),
        zs(xs.size());
    auto place = [&](std::vector<uint8_t> &raw) {
      uintptr_t base = reinterpret_cast<uintptr_t>(raw.data());
      return raw.data() + (64 - base % 64) % 64 + shift;
    };
    uint8_t *x = place(xs), *y = place(ys), *z = place(zs);
    for (int i = 0; i < 8; ++i) {
      float a = float(i), b = 10.0f * float(i);
      std::memcpy(x + i * sizeof(float), &a, sizeof(float));
      std::memcpy(y + i * sizeof(float), &b, sizeof(float));
    }
    SITS_ASSERT_OK(m->run("main",
                          {BufferView(x, DType::kF32, {2, 4}),
                           BufferView(y, DType::kF32, {2, 4})},
                          {BufferView(z, DType::kF32, {2, 4})}));
    for (int i = 0; i < 8; ++i) {
      float c;
      std::memcpy(&c, z + i * sizeof(float), sizeof(float));
      EXPECT_EQ(c, 11.0f * float(i)) << "shift " << shift;
    }
  }

  // A transposed input (column-major 4x2 viewed as 2x4) and a strided output
  // (every other element of a larger buffer).
  Floats t(8), big(16);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c)
      t.data()[c * 2 + r] = float(r * 4 + c);
  Floats zero(8, 0);
  for (int i = 0; i < 8; ++i)
    zero.data()[i] = 0;
  for (int i = 0; i < 16; ++i)
    big.data()[i] = -7;
  SITS_ASSERT_OK(m->run("main",
                        {BufferView(t.data(), DType::kF32, {2, 4}, {1, 2}),
                         BufferView(zero.data(), DType::kF32, {2, 4})},
                        {BufferView(big.data(), DType::kF32, {2, 4}, {8, 2})}));
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(big.data()[r * 8 + c * 2], float(r * 4 + c));
      EXPECT_EQ(big.data()[r * 8 + c * 2 + 1], -7.0f) << "gaps untouched";
    }
  // Negative strides (a reversed row) on an input.
  Floats rev(4), zeros(4, 0), out4(4);
  for (int i = 0; i < 4; ++i) {
    rev.data()[i] = float(i);
    zeros.data()[i] = 0;
  }
  SITS_ASSERT_OK(
      m->run("main",
             {BufferView(rev.data() + 3, DType::kF32, {1, 4}, {4, -1}),
              BufferView(zeros.data(), DType::kF32, {1, 4})},
             {BufferView(out4.data(), DType::kF32, {1, 4})}));
  EXPECT_EQ(out4.data()[0], 3.0f);
  EXPECT_EQ(out4.data()[3], 0.0f);
}

TEST(Module, SignatureMismatchesNameExpectedAndGiven) {
  StatusOr<Module> m = loadAdd();
  ASSERT_TRUE(m.ok());
  Floats a(8), b(8), c(8);
  BufferView x(a.data(), DType::kF32, {2, 4}), y(b.data(), DType::kF32, {2, 4}),
      z(c.data(), DType::kF32, {2, 4});

  Status s = m->run("main", {x}, {z});
  EXPECT_EQ(s.code(), StatusCode::kSignatureMismatch);
  EXPECT_NE(s.message().find("takes 2 inputs (x, y), got 1"), std::string::npos)
      << s.toString();
  EXPECT_EQ(s.info().expected, "2");
  EXPECT_EQ(s.info().actual, "1");

  s = m->run("main", {x, y}, {});
  EXPECT_NE(s.message().find("takes 1 output (z), got 0"), std::string::npos)
      << s.toString();

  BufferView yd = y;
  yd.dtype = DType::kF64;
  s = m->run("main", {x, yd}, {z});
  EXPECT_EQ(s.code(), StatusCode::kSignatureMismatch);
  EXPECT_EQ(s.message(),
            "input 'y' (#1) of entry point 'main' has dtype f64, expected f32");
  EXPECT_EQ(s.info().subject, "y");
  EXPECT_EQ(s.info().index, 1);
  EXPECT_EQ(s.info().expected, "f32");
  EXPECT_EQ(s.info().actual, "f64");

  s = m->run("main", {BufferView(a.data(), DType::kF32, {8}), y}, {z});
  EXPECT_NE(
      s.message().find("has shape [8] (rank 1), expected [?, 4] (rank 2)"),
      std::string::npos)
      << s.toString();

  s = m->run("main", {BufferView(a.data(), DType::kF32, {4, 2}), y}, {z});
  EXPECT_NE(s.message().find(
                "has shape [4, 2], expected [?, 4] (dimension 1 must be 4)"),
            std::string::npos)
      << s.toString();
  EXPECT_EQ(s.info().expected, "[?, 4]");
  EXPECT_EQ(s.info().actual, "[4, 2]");

  // The named dimension "batch" must agree across inputs and outputs.
  Floats big(16);
  s = m->run("main", {x, BufferView(big.data(), DType::kF32, {4, 4})}, {z});
  EXPECT_NE(s.message().find("('batch') is 4 but 'x' has batch = 2"),
            std::string::npos)
      << s.toString();
  s = m->run("main", {x, y}, {BufferView(big.data(), DType::kF32, {4, 4})});
  EXPECT_EQ(s.code(), StatusCode::kSignatureMismatch) << s.toString();
  EXPECT_NE(s.message().find("output 'z'"), std::string::npos) << s.toString();

  s = m->run("nope", {x, y}, {z});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("the model has: main, scale"), std::string::npos);
  s = m->run("main", {BufferView(nullptr, DType::kF32, {2, 4}), y}, {z});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

/// The status kernel's entry: x -> y, and a status argument with two
/// messages.
std::string statusEntry() {
  std::string e = entryJson("main", {{"input", "x", "f32", {-1}, {"n"}},
                                     {"output", "y", "f32", {-1}, {"n"}}});
  e.insert(e.size() - 2, ", {\"role\": \"status\", \"name\": \"status\", "
                         "\"dtype\": \"i32\", \"shape\": [], \"messages\": "
                         "[\"Gather node 'g': an index is out of range\", "
                         "\"second\"]}");
  return e;
}

TEST(Module, StatusArgumentTurnsIntoOutOfRange) {
  std::vector<uint8_t> bytes =
      writeArtifact(manifestJson({statusEntry()}), kernelBytes("status"));
  StatusOr<Module> m = Module::load(bytes.data(), bytes.size());
  ASSERT_TRUE(m.ok()) << m.status().toString();
  const EntryPointSpec *ep = m->signature("main");
  ASSERT_NE(ep, nullptr);
  ASSERT_NE(ep->status(), nullptr);
  EXPECT_EQ(ep->status()->messages.size(), 2u);
  EXPECT_EQ(ep->outputs().size(), 1u) << "the status is not an output";

  Floats x(4, 1), y(4);
  BufferView xv(x.data(), DType::kF32, {4}), yv(y.data(), DType::kF32, {4});
  SITS_ASSERT_OK(m->run("main", {xv}, {yv}));
  EXPECT_EQ(y.data()[3], 4.0f);
  x.data()[2] = -1;
  Status s = m->run("main", {xv}, {yv});
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(),
            "entry point 'main': Gather node 'g': an index is out of range");
  EXPECT_EQ(s.info().subject, "main");
  // A code without a message still fails the call, naming the check.
  x.data()[2] = 5000;
  s = m->run("main", {xv}, {yv});
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "entry point 'main': check 3 failed");
  // Zeroed again for the next call (the kernel traps otherwise).
  x.data()[2] = 3;
  SITS_ASSERT_OK(m->run("main", {xv}, {yv}));
}

TEST(Module, DynamicOutputsWithoutANameCannotBeSized) {
  std::vector<uint8_t> bytes = writeArtifact(
      manifestJson({entryJson("scale", {{"input", "x", "f32", {-1}, {}},
                                        {"output", "out", "f32", {-1}, {}}})}),
      kernelBytes("add"));
  StatusOr<Module> m = Module::load(bytes.data(), bytes.size());
  ASSERT_TRUE(m.ok()) << m.status().toString();
  Floats x(4);
  StatusOr<std::vector<std::vector<int64_t>>> shapes =
      m->outputShapes("scale", {BufferView(x.data(), DType::kF32, {4})});
  EXPECT_EQ(shapes.code(), StatusCode::kSignatureMismatch);
  EXPECT_NE(shapes.status().message().find("no input determines dimension 0"),
            std::string::npos);
  // But running with caller-sized outputs works.
  Floats out(4);
  SITS_ASSERT_OK(m->run("scale", {BufferView(x.data(), DType::kF32, {4})},
                        {BufferView(out.data(), DType::kF32, {4})}));
  EXPECT_EQ(out.data()[3], 6.0f);
}

TEST(Module, WeightsArePassedFromTheArtifact) {
  float w[4] = {2.0f, 3.0f, 0.5f, -1.0f};
  std::vector<uint8_t> weights(reinterpret_cast<uint8_t *>(w),
                               reinterpret_cast<uint8_t *>(w) + sizeof(w));
  std::string manifest =
      manifestJson({entryJson("main", {{"weights", "weights", "i8", {16}, {}},
                                       {"input", "x", "f32", {4}, {}},
                                       {"output", "y", "f32", {4}, {}}})});
  std::vector<uint8_t> bytes =
      writeArtifact(manifest, kernelBytes("weights"), &weights);
  std::string path = tempDir() + "/weights.sitsm";
  writeBytes(path, bytes);
  StatusOr<Module> m = Module::load(path); // weights served from the mapping
  ASSERT_TRUE(m.ok()) << m.status().toString();
  Floats x(4, 1), y(4);
  SITS_ASSERT_OK(m->run("main", {BufferView(x.data(), DType::kF32, {4})},
                        {BufferView(y.data(), DType::kF32, {4})}));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(y.data()[i], float(i + 1) * w[i] + w[i]);
  // The artifact can be replaced (renamed over) while loaded.
  std::vector<uint8_t> other =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("add"));
  writeBytes(path + ".new", other);
  ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  SITS_ASSERT_OK(m->run("main", {BufferView(x.data(), DType::kF32, {4})},
                        {BufferView(y.data(), DType::kF32, {4})}));
  EXPECT_EQ(y.data()[0], 1 * 2.0f + 2.0f);
}

TEST(Module, AsyncKernelSplitsWorkAcrossThreads) {
  std::string manifest = manifestJson(
      {entryJson("main", {{"input", "x", "f32", {-1}, {"n"}},
                          {"input", "y", "f32", {-1}, {"n"}},
                          {"output", "z", "f32", {-1}, {"n"}},
                          {"output", "threads", "i64", {1}, {}}})});
  std::vector<uint8_t> bytes =
      writeArtifact(manifest, kernelBytes("async_add"));
  StatusOr<Module> m = Module::load(bytes.data(), bytes.size());
  ASSERT_TRUE(m.ok()) << m.status().toString();
  const int n = 1 << 16;
  Floats x(n, 0), y(n, 1), z(n);
  for (int threads : {1, 2, 4}) {
    SITS_ASSERT_OK(setNumThreads(threads));
    int64_t distinct = 0;
    for (int rep = 0; rep < 5; ++rep) {
      SITS_ASSERT_OK(m->run("main",
                            {BufferView(x.data(), DType::kF32, {n}),
                             BufferView(y.data(), DType::kF32, {n})},
                            {BufferView(z.data(), DType::kF32, {n}),
                             BufferView(&distinct, DType::kI64, {1})}));
      for (int i = 0; i < n; i += 997)
        ASSERT_EQ(z.data()[i], float(2 * i + 1));
      EXPECT_GE(distinct, 1);
      EXPECT_LE(distinct, threads);
    }
  }
  SITS_ASSERT_OK(setNumThreads(0));
}

TEST(Module, ConcurrentRunsFromManyThreads) {
  std::string manifest = manifestJson(
      {entryJson("main", {{"input", "x", "f32", {-1}, {"n"}},
                          {"input", "y", "f32", {-1}, {"n"}},
                          {"output", "z", "f32", {-1}, {"n"}},
                          {"output", "threads", "i64", {1}, {}}})});
  std::vector<uint8_t> bytes =
      writeArtifact(manifest, kernelBytes("async_add"));
  StatusOr<Module> loaded = Module::load(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok());
  Module m = *loaded; // copies share the code
  SITS_ASSERT_OK(setNumThreads(3));
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 6; ++t)
    callers.emplace_back([&m, &failures, t] {
      const int n = 5000 + t;
      Floats x(n, float(t)), y(n, 0), z(n);
      int64_t distinct = 0;
      for (int rep = 0; rep < 20; ++rep) {
        Status s = m.run("main",
                         {BufferView(x.data(), DType::kF32, {n}),
                          BufferView(y.data(), DType::kF32, {n})},
                         {BufferView(z.data(), DType::kF32, {n}),
                          BufferView(&distinct, DType::kI64, {1})});
        if (!s.ok() || z.data()[n - 1] != float(t + n - 1) + float(n - 1))
          failures.fetch_add(1);
      }
    });
  for (std::thread &c : callers)
    c.join();
  EXPECT_EQ(failures.load(), 0);
  SITS_ASSERT_OK(setNumThreads(0));
}

TEST(Module, ReloadingNeverReturnsAnEarlierModulesCode) {
  // Each load gets its own in-memory file; the dynamic loader identifies
  // objects by name (/proc/self/fd/N), so a reused N must never hand back
  // an earlier module.
  std::vector<uint8_t> add =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("add"));
  std::string wm =
      manifestJson({entryJson("main", {{"weights", "w", "i8", {16}, {}},
                                       {"input", "x", "f32", {4}, {}},
                                       {"output", "y", "f32", {4}, {}}})});
  float w[4] = {1, 1, 1, 1};
  std::vector<uint8_t> weights(reinterpret_cast<uint8_t *>(w),
                               reinterpret_cast<uint8_t *>(w) + 16);
  std::vector<uint8_t> mul =
      writeArtifact(wm, kernelBytes("weights"), &weights);
  for (int i = 0; i < 20; ++i) {
    bool useAdd = i % 2 == 0;
    const std::vector<uint8_t> &bytes = useAdd ? add : mul;
    StatusOr<Module> m = Module::load(bytes.data(), bytes.size());
    ASSERT_TRUE(m.ok()) << m.status().toString();
    Floats x(8, 1), y(8, 1), z(8);
    Status s = useAdd ? m->run("main",
                               {BufferView(x.data(), DType::kF32, {2, 4}),
                                BufferView(y.data(), DType::kF32, {2, 4})},
                               {BufferView(z.data(), DType::kF32, {2, 4})})
                      : m->run("main", {BufferView(x.data(), DType::kF32, {4})},
                               {BufferView(z.data(), DType::kF32, {4})});
    SITS_ASSERT_OK(s);
    EXPECT_EQ(z.data()[0], 2.0f) << "iteration " << i;
    EXPECT_EQ(z.data()[1], useAdd ? 4.0f : 3.0f) << "iteration " << i;
  }
}

TEST(Module, LoadsFromAFileAndFromAReader) {
  std::vector<uint8_t> bytes =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("add"));
  std::string path = tempDir() + "/add.sitsm";
  writeBytes(path, bytes);
  StatusOr<ArtifactReader> r = ArtifactReader::open(path);
  ASSERT_TRUE(r.ok());
  SITS_ASSERT_OK(checkHostCompatibility(*r));
  StatusOr<Module> m = Module::load(*r);
  ASSERT_TRUE(m.ok()) << m.status().toString();
  EXPECT_EQ(m->manifest().contentHash, r->contentHash());
  EXPECT_EQ(m->artifact().fileSize(), bytes.size());
}

TEST(Module, MemrefCopyHelperCopiesStridedMemrefs) {
  using CopyFn = void (*)(int64_t, void *, void *);
  auto copy = reinterpret_cast<CopyFn>(dlsym(RTLD_DEFAULT, "memrefCopy"));
  ASSERT_NE(copy, nullptr);
  float src[6] = {0, 1, 2, 3, 4, 5}, dst[6] = {};
  // src: 2x3 row-major; dst: 2x3 column-major (strides 1, 2).
  int64_t sd[7], dd[7];
  float *sp = src, *dp = dst;
  std::memcpy(&sd[0], &sp, 8);
  std::memcpy(&sd[1], &sp, 8);
  sd[2] = 0;
  sd[3] = 2;
  sd[4] = 3;
  sd[5] = 3;
  sd[6] = 1;
  std::memcpy(&dd[0], &dp, 8);
  std::memcpy(&dd[1], &dp, 8);
  dd[2] = 0;
  dd[3] = 2;
  dd[4] = 3;
  dd[5] = 1;
  dd[6] = 2;
  struct {
    int64_t rank;
    void *desc;
  } s{2, sd}, d{2, dd};
  copy(sizeof(float), &s, &d);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(dst[c * 2 + r], src[r * 3 + c]);
}

} // namespace

namespace {

TEST(Module, CodeIsLoadedFromAnAnonymousInMemoryFile) {
  std::vector<uint8_t> bytes =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("add"));
  std::string path = tempDir() + "/memfd.sitsm";
  writeBytes(path, bytes);
  StatusOr<Module> m = Module::load(path);
  ASSERT_TRUE(m.ok()) << m.status().toString();
  std::string label =
      "memfd:sits:cpu:" + m->manifest().contentHash.substr(0, 16);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool executableFromMemfd = false;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms;
    fields >> range >> perms;
    if (line.find(label) != std::string::npos &&
        perms.find('x') != std::string::npos)
      executableFromMemfd = true;
    // The .sitsm itself is only mapped read-only (for the weights).
    if (line.find(path) != std::string::npos) {
      EXPECT_EQ(perms, "r--p") << line;
    }
    EXPECT_EQ(line.find("sits-code-"), std::string::npos)
        << "temp-file fallback used";
  }
  EXPECT_TRUE(executableFromMemfd) << "no executable mapping named " << label;
}

} // namespace
