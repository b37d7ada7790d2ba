//===- device.cpp - The device registry and its built-in drivers
//-----------===//
//
// cpu: always present, runs code. cuda / hip (gpu_driver.cpp): the vendor
// driver library is dlopen'ed on first use (never linked), initialised and
// asked for its devices, so machines without a GPU stack get a clear "no
// CUDA driver found" and GPU machines list and open their devices.
//
//===----------------------------------------------------------------------===//
#include "gpu_device.h"

#include "sits/runtime/device.h"
#include "sits/runtime/host.h"
#include "sits/runtime/thread_pool.h"

#include <cctype>

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
                      "': expected <scheme>[:<ordinal>] such as cpu, cuda:0, "
                      "hip:1")
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
    return {{"cpu",
             host.modelName.empty() ? host.arch + " CPU" : host.modelName,
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

} // namespace

DeviceRegistry::DeviceRegistry() = default;
DeviceRegistry::~DeviceRegistry() = default;

DeviceRegistry &DeviceRegistry::global() {
  // Never destroyed: devices may be in use during static destruction.
  static DeviceRegistry *registry = [] {
    auto *r = new DeviceRegistry();
    (void)r->registerDriver(std::make_unique<CpuDriver>());
    (void)r->registerDriver(makeCudaDriver());
    (void)r->registerDriver(makeHipDriver());
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

StatusOr<std::shared_ptr<Device>>
DeviceRegistry::open(std::string_view text) const {
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
