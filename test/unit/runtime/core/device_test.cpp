//===- device_test.cpp - Device URIs, the registry, the host CPU
//-----------===//
#include "core_test_util.h"

#include <algorithm>
#include <dlfcn.h>

using namespace sits::runtime;
using namespace sits::runtime::test;

namespace {

TEST(DeviceUri, ParsesAndPrints) {
  StatusOr<DeviceUri> u = DeviceUri::parse("cpu");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "cpu");
  EXPECT_EQ(u->ordinal, 0);
  EXPECT_EQ(u->str(), "cpu");
  u = DeviceUri::parse(" CUDA:1 ");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "cuda");
  EXPECT_EQ(u->ordinal, 1);
  EXPECT_EQ(u->str(), "cuda:1");
  EXPECT_EQ(DeviceUri::parse("hip")->str(), "hip:0");
  for (const char *bad : {"", ":0", "cuda:", "cuda:-1", "cuda:x", "cu da:0",
                          "cuda:1:2", "cuda:12345678"})
    EXPECT_EQ(DeviceUri::parse(bad).code(), StatusCode::kInvalidArgument)
        << bad;
}

TEST(DeviceRegistry, CpuIsAlwaysThere) {
  DeviceRegistry &r = DeviceRegistry::global();
  EXPECT_EQ(r.schemes(), (std::vector<std::string>{"cpu", "cuda", "hip"}));
  StatusOr<std::shared_ptr<Device>> cpu = r.open("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->kind(), DeviceKind::kCpu);
  EXPECT_EQ((*cpu)->uri(), "cpu");
  EXPECT_EQ((*cpu)->codeSectionPrefix(), "code.");
  EXPECT_NE((*cpu)->description().find(hostCpuInfo().arch), std::string::npos);
  EXPECT_TRUE(r.open("cpu:0").ok());
  EXPECT_EQ(r.open("cpu:1").code(), StatusCode::kDeviceUnavailable);
  bool listed = false;
  for (const DeviceInfo &d : r.enumerate())
    listed = listed || d.uri == "cpu";
  EXPECT_TRUE(listed);
}

TEST(DeviceRegistry, GpuDriversReportWhyTheyCannotRun) {
  DeviceRegistry &r = DeviceRegistry::global();
  bool haveCuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) || [] {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h != nullptr;
  }();
  StatusOr<std::shared_ptr<Device>> cuda = r.open("cuda:0");
  if (!haveCuda) {
    ASSERT_FALSE(cuda.ok());
    EXPECT_EQ(cuda.code(), StatusCode::kDeviceUnavailable);
    EXPECT_NE(cuda.status().message().find("no CUDA driver found"),
              std::string::npos)
        << cuda.status().toString();
    EXPECT_EQ(cuda.status().info().subject, "cuda:0");
  } else {
    // A driver without a usable GPU says so; with one, the device opens.
    EXPECT_TRUE(cuda.ok() || cuda.code() == StatusCode::kDeviceUnavailable)
        << cuda.status().toString();
  }
  StatusOr<std::shared_ptr<Device>> hip = r.open("hip:0");
  ASSERT_FALSE(hip.ok());
  if (hip.code() == StatusCode::kDeviceUnavailable &&
      !dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_NE(hip.status().message().find("no HIP driver found"),
              std::string::npos);
  }
  EXPECT_EQ(r.open("tpu:0").code(), StatusCode::kDeviceUnavailable);
  EXPECT_NE(
      r.open("tpu:0").status().message().find("known schemes: cpu, cuda, hip"),
      std::string::npos);
  EXPECT_EQ(r.open("cuda:zero").code(), StatusCode::kInvalidArgument);
}

TEST(DeviceRegistry, ModuleLoadRejectsUnavailableDevicesBeforeReading) {
  LoadOptions options;
  options.device = "cuda:0";
  StatusOr<Module> m =
      Module::load(tempDir() + "/does-not-exist.sitsm", options);
  // No GPU: the device error comes before the missing file's.
  EXPECT_TRUE(m.code() == StatusCode::kDeviceUnavailable ||
              (DeviceRegistry::global().open("cuda:0").ok() &&
               m.code() == StatusCode::kNotFound))
      << m.status().toString();
}

class FakeDriver : public Driver {
public:
  std::string_view scheme() const override { return "fake"; }
  Status probe() override { return Status::OK(); }
  std::vector<DeviceInfo> enumerate() override {
    return {{"fake:0", "Fake", DeviceKind::kCpu}};
  }
  StatusOr<std::shared_ptr<Device>> open(int) override {
    return Status(StatusCode::kUnimplemented, "fake");
  }
};

TEST(DeviceRegistry, DriversCanBeAdded) {
  DeviceRegistry r;
  SITS_ASSERT_OK(r.registerDriver(std::make_unique<FakeDriver>()));
  EXPECT_EQ(r.registerDriver(std::make_unique<FakeDriver>()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(r.driver("fake"), nullptr);
  EXPECT_EQ(r.open("fake:3").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(r.enumerate().size(), 1u);
}

TEST(HostCpu, DetectsArchitectureAndFeatures) {
  const HostCpuInfo &h = hostCpuInfo();
  EXPECT_EQ(h.os, "linux");
#if defined(__x86_64__)
  EXPECT_EQ(h.arch, "x86_64");
  EXPECT_EQ(h.hasFeature("sse2"), std::optional<bool>(true));
  EXPECT_EQ(h.hasFeature("+64bit"), std::optional<bool>(true));
  EXPECT_TRUE(h.hasFeature("avx512f").has_value());
  // Agrees with the kernel's view for a few common flags.
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      flags = " " + line.substr(line.find(':') + 1) + " ";
      break;
    }
  for (auto [llvm, procName] : std::vector<std::pair<std::string, std::string>>{
           {"avx2", "avx2"},
           {"avx512f", "avx512f"},
           {"sse4.2", "sse4_2"},
           {"avx512bf16", "avx512_bf16"},
           {"fma", "fma"},
           {"sha", "sha_ni"}})
    EXPECT_EQ(*h.hasFeature(llvm),
              flags.find(" " + procName + " ") != std::string::npos)
        << llvm;
#endif
  EXPECT_EQ(h.hasFeature("definitely-not-a-feature"), std::nullopt);
  EXPECT_TRUE(std::is_sorted(h.features.begin(), h.features.end()));
  EXPECT_EQ(normalizeArch("AMD64"), "x86_64");
  EXPECT_EQ(normalizeArch("arm64"), "aarch64");
  EXPECT_EQ(normalizeArch("riscv64"), "riscv64");
}

TEST(Dtypes, NamesAndSizes) {
  size_t n = 0;
  const DType *all = allDTypes(&n);
  EXPECT_EQ(n, 23u);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(parseDType(dtypeName(all[i])), all[i]);
    // Types NumPy lacks travel as integers of their storage size.
    EXPECT_EQ(dtypeSize(storageDType(all[i])), dtypeSize(all[i]));
  }
  EXPECT_EQ(dtypeSize(DType::kBF16), 2u);
  EXPECT_EQ(dtypeSize(DType::kBool), 1u);
  EXPECT_EQ(dtypeSize(DType::kI4), 1u); // one element per byte, as ml_dtypes
  EXPECT_EQ(parseDType("f8e4m3fn"), DType::kF8E4M3FN);
  EXPECT_EQ(storageDType(DType::kF8E5M2), DType::kU8);
  EXPECT_EQ(storageDType(DType::kBF16), DType::kU16);
  EXPECT_EQ(storageDType(DType::kF32), DType::kF32);
  EXPECT_EQ(parseDType("i1"), DType::kBool);
  EXPECT_EQ(parseDType("f8"), std::nullopt);
}

} // namespace
