//===- device.h - Devices addressed by URI, behind a driver registry
//-------===//
//
// A device is named by a URI `<scheme>[:<ordinal>]`: "cpu", "cuda:0",
// "hip:1" (the ordinal defaults to 0). Each scheme belongs to a `Driver`
// registered in the `DeviceRegistry`; the registry parses the URI, asks the
// driver and hands out `Device`s. Vendor libraries are loaded only when a
// driver is first asked (dlopen of libcuda.so.1 / libamdhip64.so), so a
// CPU-only build and machine work unchanged, and a missing GPU stack is an
// ordinary kDeviceUnavailable error ("no CUDA driver found ...").
//
// `cpu` runs host code; `cuda` and `hip` (gpu_driver.cpp) open a GPU with
// its primary context, and run artifacts compiled for it (their host code
// calls MLIR's GPU runtime ABI, which the runtime implements over the
// vendor's driver library; passes/Codegen/GPU/README.md).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_DEVICE_H
#define SITS_RUNTIME_DEVICE_H

#include "sits/runtime/export.h"
#include "sits/runtime/status.h"

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace sits::runtime {

enum class DeviceKind : uint8_t { kCpu, kCuda, kHip };
/// "cpu", "cuda", "hip".
SITS_RUNTIME_API std::string_view deviceKindName(DeviceKind kind);

/// A parsed device URI.
struct SITS_RUNTIME_API DeviceUri {
  std::string scheme;
  int ordinal = 0;
  /// "cpu", "cuda:0", "CUDA:1 " (case and surrounding space ignored).
  /// kInvalidArgument for anything else.
  static StatusOr<DeviceUri> parse(std::string_view uri);
  /// Canonical spelling: "cpu" for cpu:0, else "<scheme>:<ordinal>".
  std::string str() const;
};

/// One device of a driver, as enumerated.
struct DeviceInfo {
  std::string uri;
  std::string name;
  DeviceKind kind = DeviceKind::kCpu;
  /// The device's architecture where the driver reports it ("sm_90"),
  /// else "".
  std::string arch;
};

class SITS_RUNTIME_API Device {
public:
  virtual ~Device();
  virtual DeviceKind kind() const = 0;
  /// Canonical URI ("cpu", "cuda:0").
  virtual std::string uri() const = 0;
  /// Human-readable ("x86_64 CPU, 2 threads: Intel Xeon ...").
  virtual std::string description() const = 0;
  /// The artifact section prefix holding code for this device ("code." for
  /// the host, "device." for accelerators).
  virtual std::string_view codeSectionPrefix() const = 0;
};

class SITS_RUNTIME_API Driver {
public:
  virtual ~Driver();
  /// The URI scheme ("cpu", "cuda", "hip").
  virtual std::string_view scheme() const = 0;
  /// OK when the driver's vendor library is present and initialises, else
  /// kDeviceUnavailable saying why.
  virtual Status probe() = 0;
  /// The devices present (empty when probe() fails).
  virtual std::vector<DeviceInfo> enumerate() = 0;
  /// The device with this ordinal.
  virtual StatusOr<std::shared_ptr<Device>> open(int ordinal) = 0;
};

class SITS_RUNTIME_API DeviceRegistry {
public:
  /// The process-wide registry, with the built-in cpu, cuda and hip drivers.
  static DeviceRegistry &global();

  DeviceRegistry();
  ~DeviceRegistry();
  DeviceRegistry(const DeviceRegistry &) = delete;
  DeviceRegistry &operator=(const DeviceRegistry &) = delete;

  /// Adds a driver; kInvalidArgument when its scheme is taken.
  Status registerDriver(std::unique_ptr<Driver> driver);
  /// Registered schemes, in registration order.
  std::vector<std::string> schemes() const;
  /// The driver for `scheme`, or nullptr.
  Driver *driver(std::string_view scheme) const;
  /// Opens the device named by `uri`. kInvalidArgument for a malformed URI,
  /// kDeviceUnavailable for an unknown scheme, a missing driver library or
  /// an ordinal out of range, kDriverError when the driver fails to open
  /// the device.
  StatusOr<std::shared_ptr<Device>> open(std::string_view uri) const;
  /// Every device of every driver whose probe succeeds.
  std::vector<DeviceInfo> enumerate() const;

private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Driver>> drivers_;
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_DEVICE_H
