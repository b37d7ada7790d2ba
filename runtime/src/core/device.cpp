//===- device.cpp - The device registry and its built-in drivers -----------===//
//
// cpu: always present, runs code. cuda / hip: the vendor driver library is
// dlopen'ed on first use (never linked), initialised and asked for its
// devices, so machines without a GPU stack get a clear "no CUDA driver
// found" and GPU machines list their devices; opening one reports that GPU
// execution is not implemented yet.
//
//===----------------------------------------------------------------------===//
#include "sits/runtime/device.h"
#include "sits/runtime/host.h"
#include "sits/runtime/thread_pool.h"

#include <cctype>
#include <dlfcn.h>

namespace sits::runtime {

std::string_view deviceKindName(DeviceKind kind) {
  switch (kind) {
  case DeviceKind::kCpu:
    return "cpu";
  case DeviceKind::kCuda:
    return "cuda";
  case DeviceKind::kHip:
    return "hip";
  }
  return "?";
}

StatusOr<DeviceUri> DeviceUri::parse(std::string_view text) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1])))
    --e;
  std::string s;
  for (char c : text.substr(b, e - b))
    s += char(std::tolower(static_cast<unsigned char>(c)));
  auto bad = [&] {
    return Status(StatusCode::kInvalidArgument,
                  "malformed device URI '" + std::string(text) +
                      "': expected <scheme>[:<ordinal>] such as cpu, cuda:0, hip:1")
        .withSubject(std::string(text));
  };
  DeviceUri uri;
  size_t colon = s.find(':');
  uri.scheme = s.substr(0, colon);
  if (uri.scheme.empty())
    return bad();
  for (char c : uri.scheme)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
      return bad();
  if (colon != std::string::npos) {
    std::string ord = s.substr(colon + 1);
    if (ord.empty() || ord.size() > 6 ||
        ord.find_first_not_of("0123456789") != std::string::npos)
      return bad();
    uri.ordinal = std::stoi(ord);
  }
  return uri;
}

std::string DeviceUri::str() const {
  if (scheme == "cpu" && ordinal == 0)
    return "cpu";
  return scheme + ":" + std::to_string(ordinal);
}

Device::~Device() = default;
Driver::~Driver() = default;

namespace {

//===----------------------------------------------------------------------===//
// cpu
//===----------------------------------------------------------------------===//

class CpuDevice final : public Device {
public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string uri() const override { return "cpu"; }
  std::string description() const override {
    const HostCpuInfo &host = hostCpuInfo();
    std::string d = host.arch + " CPU";
    if (!host.modelName.empty())
      d += " (" + host.modelName + ")";
    d += ", " + std::to_string(numThreads()) + " threads";
    return d;
  }
  std::string_view codeSectionPrefix() const override { return "code."; }
};

class CpuDriver final : public Driver {
public:
  std::string_view scheme() const override { return "cpu"; }
  Status probe() override { return Status::OK(); }
  std::vector<DeviceInfo> enumerate() override {
    const HostCpuInfo &host = hostCpuInfo();
    return {{"cpu", host.modelName.empty() ? host.arch + " CPU" : host.modelName,
             DeviceKind::kCpu}};
  }
  StatusOr<std::shared_ptr<Device>> open(int ordinal) override {
    if (ordinal != 0)
      return Status(StatusCode::kDeviceUnavailable,
                    "cpu:" + std::to_string(ordinal) +
                        " does not exist: the host is one device, cpu (cpu:0)")
          .withSubject("cpu:" + std::to_string(ordinal));
    static const std::shared_ptr<Device> device = std::make_shared<CpuDevice>();
    return device;
  }
};

//===----------------------------------------------------------------------===//
// GPU drivers: a vendor library found at run time
//===----------------------------------------------------------------------===//

/// What a vendor library offers the probe: init, count, name.
struct VendorApi {
  const char *vendor;       // "CUDA", "HIP"
  const char *scheme;       // "cuda", "hip"
  std::vector<const char *> libraries;
  const char *initSymbol;   // int init(unsigned flags)
  const char *countSymbol;  // int count(int *)
  const char *nameSymbol;   // int name(char *, int, int ordinal-or-handle)
  const char *getSymbol;    // CUDA: int cuDeviceGet(int *dev, int ordinal); null for HIP
  DeviceKind kind;
};

class VendorDriver final : public Driver {
public:
  explicit VendorDriver(VendorApi api) : api_(std::move(api)) {}
  std::string_view scheme() const override { return api_.scheme; }

  Status probe() override {
    std::lock_guard<std::mutex> lock(mu_);
    ensureProbed();
    return status_;
  }

  std::vector<DeviceInfo> enumerate() override {
    std::lock_guard<std::mutex> lock(mu_);
    ensureProbed();
    return devices_;
  }

  StatusOr<std::shared_ptr<Device>> open(int ordinal) override {
    std::lock_guard<std::mutex> lock(mu_);
    ensureProbed();
    std::string uri = std::string(api_.scheme) + ":" + std::to_string(ordinal);
    if (!status_.ok()) {
      Status s = status_;
      return s.withSubject(uri);
    }
    if (ordinal < 0 || size_t(ordinal) >= devices_.size())
      return Status(StatusCode::kDeviceUnavailable,
                    uri + " does not exist: found " +
                        std::to_string(devices_.size()) + " " + api_.vendor +
                        " device(s)")
          .withSubject(uri);
    return Status(StatusCode::kUnimplemented,
                  "running compiled code on " + uri + " (" +
                      devices_[size_t(ordinal)].name + ") is not implemented "
                      "yet; this runtime executes on cpu only")
        .withSubject(uri);
  }

private:
  void ensureProbed() {
    if (probed_)
      return;
    probed_ = true;
    std::string tried;
    void *lib = nullptr;
    for (const char *name : api_.libraries) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib)
        break;
      const char *e = dlerror();
      if (!tried.empty())
        tried += "; ";
      tried += e ? e : name;
    }
    if (!lib) {
      status_ = Status(StatusCode::kDeviceUnavailable,
                       std::string("no ") + api_.vendor + " driver found (" +
                           tried + ")")
                    .withSubject(api_.scheme);
      return;
    }
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int *);
    using NameFn = int (*)(char *, int, int);
    using GetFn = int (*)(int *, int);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, api_.initSymbol));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, api_.countSymbol));
    auto name = reinterpret_cast<NameFn>(dlsym(lib, api_.nameSymbol));
    auto get = api_.getSymbol ? reinterpret_cast<GetFn>(dlsym(lib, api_.getSymbol))
                              : nullptr;
    if (!init || !count || !name || (api_.getSymbol && !get)) {
      status_ = Status(StatusCode::kDeviceUnavailable,
                       std::string("the ") + api_.vendor +
                           " driver library lacks the functions SITS needs")
                    .withSubject(api_.scheme);
      return;
    }
    if (int rc = init(0); rc != 0) {
      status_ = Status(StatusCode::kDeviceUnavailable,
                       std::string(api_.vendor) + " driver found but " +
                           api_.initSymbol + " failed with error " +
                           std::to_string(rc) + " (no usable GPU?)")
                    .withSubject(api_.scheme);
      return;
    }
    int n = 0;
    if (int rc = count(&n); rc != 0) {
      status_ = Status(StatusCode::kDeviceUnavailable,
                       std::string(api_.vendor) + " driver found but " +
                           api_.countSymbol + " failed with error " +
                           std::to_string(rc))
                    .withSubject(api_.scheme);
      return;
    }
    for (int i = 0; i < n; ++i) {
      int handle = i;
      if (get && get(&handle, i) != 0)
        handle = i;
      char buf[256] = {0};
      if (name(buf, int(sizeof(buf) - 1), handle) != 0)
        buf[0] = '\0';
      devices_.push_back({std::string(api_.scheme) + ":" + std::to_string(i),
                          buf[0] ? buf : std::string(api_.vendor) + " device",
                          api_.kind});
    }
    if (devices_.empty())
      status_ = Status(StatusCode::kDeviceUnavailable,
                       std::string(api_.vendor) + " driver found but it reports "
                                                  "no devices")
                    .withSubject(api_.scheme);
    // The library stays loaded for the process's life, as drivers do.
  }

  VendorApi api_;
  std::mutex mu_;
  bool probed_ = false;
  Status status_;
  std::vector<DeviceInfo> devices_;
};

} // namespace

DeviceRegistry::DeviceRegistry() = default;
DeviceRegistry::~DeviceRegistry() = default;

DeviceRegistry &DeviceRegistry::global() {
  // Never destroyed: devices may be in use during static destruction.
  static DeviceRegistry *registry = [] {
    auto *r = new DeviceRegistry();
    (void)r->registerDriver(std::make_unique<CpuDriver>());
    (void)r->registerDriver(std::make_unique<VendorDriver>(VendorApi{
        "CUDA", "cuda", {"libcuda.so.1", "libcuda.so"}, "cuInit",
        "cuDeviceGetCount", "cuDeviceGetName", "cuDeviceGet", DeviceKind::kCuda}));
    (void)r->registerDriver(std::make_unique<VendorDriver>(VendorApi{
        "HIP", "hip", {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"},
        "hipInit", "hipGetDeviceCount", "hipDeviceGetName", nullptr,
        DeviceKind::kHip}));
    return r;
  }();
  return *registry;
}

Status DeviceRegistry::registerDriver(std::unique_ptr<Driver> driver) {
  if (!driver)
    return Status(StatusCode::kInvalidArgument, "null driver");
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &d : drivers_)
    if (d->scheme() == driver->scheme())
      return Status(StatusCode::kInvalidArgument,
                    "a driver for '" + std::string(driver->scheme()) +
                        "' is already registered")
          .withSubject(std::string(driver->scheme()));
  drivers_.push_back(std::move(driver));
  return Status::OK();
}

std::vector<std::string> DeviceRegistry::schemes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto &d : drivers_)
    out.emplace_back(d->scheme());
  return out;
}

Driver *DeviceRegistry::driver(std::string_view scheme) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &d : drivers_)
    if (d->scheme() == scheme)
      return d.get();
  return nullptr;
}

StatusOr<std::shared_ptr<Device>> DeviceRegistry::open(std::string_view text) const {
  StatusOr<DeviceUri> uri = DeviceUri::parse(text);
  if (!uri.ok())
    return uri.status();
  Driver *d = driver(uri->scheme);
  if (!d) {
    std::string known;
    for (const std::string &s : schemes())
      known += (known.empty() ? "" : ", ") + s;
    return Status(StatusCode::kDeviceUnavailable,
                  "no driver for device '" + std::string(text) +
                      "' (known schemes: " + known + ")")
        .withSubject(std::string(text));
  }
  return d->open(uri->ordinal);
}

std::vector<DeviceInfo> DeviceRegistry::enumerate() const {
  std::vector<Driver *> drivers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &d : drivers_)
      drivers.push_back(d.get());
  }
  std::vector<DeviceInfo> out;
  for (Driver *d : drivers)
    for (DeviceInfo &info : d->enumerate())
      out.push_back(std::move(info));
  return out;
}

} // namespace sits::runtime
