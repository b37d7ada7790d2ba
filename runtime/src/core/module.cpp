//===- module.cpp - Loading and running compiled models
//--------------------===//
#include "artifact_internal.h"
#include "code_loader.h"
#include "gpu_call.h"

#include "sits/runtime/host.h"
#include "sits/runtime/module.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

namespace sits::runtime {

struct Module::Impl {
  ArtifactReader reader;
  std::shared_ptr<Device> device;
  std::unique_ptr<LoadedCode> code;
  struct Entry {
    const EntryPointSpec *spec;
    EntryFn fn;
  };
  std::vector<Entry> entries;
  ByteSpan weights;
  /// GPU models: the device (also `device`) and the weights uploaded to it.
  std::shared_ptr<GpuDevice> gpu;
  void *deviceWeights = nullptr;
  std::unique_ptr<GpuCalls> gpuCalls;

  explicit Impl(ArtifactReader r) : reader(std::move(r)) {}
  ~Impl() {
    if (!gpu || !gpu->makeCurrent().ok())
      return;
    gpuCalls.reset(); // its recordings launch the code's kernels
    code.reset();     // its ELF destructor unloads the device code
    (void)gpu->free(deviceWeights);
  }
  const Entry *find(std::string_view name) const {
    for (const Entry &e : entries)
      if (e.spec->name == name)
        return &e;
    return nullptr;
  }
};

namespace {

/// A never-dereferenced, aligned stand-in for the data of empty buffers.
alignas(kBufferAlignment) uint8_t gEmpty[kBufferAlignment];

Status mismatch(std::string message, const ArgSpec &arg, int64_t index,
                std::string expected, std::string actual) {
  return Status(StatusCode::kSignatureMismatch, std::move(message))
      .withSubject(arg.name)
      .withIndex(index)
      .withExpected(std::move(expected), std::move(actual));
}

std::string argLabel(const EntryPointSpec &ep, const ArgSpec &arg,
                     int64_t pos) {
  return std::string(argRoleName(arg.role)) + " '" + arg.name + "' (#" +
         std::to_string(pos) + ") of entry point '" + ep.name + "'";
}

std::string listNames(const std::vector<const ArgSpec *> &args) {
  std::string out;
  for (const ArgSpec *a : args)
    out += (out.empty() ? "" : ", ") + a->name;
  return out;
}

/// Evaluates a dimension name that is arithmetic of other names
/// ("past + seq", "2*n - 1", "(a + b) // 2": integers, names, + - * //
/// with Python's precedence and floor division, parentheses, unary minus),
/// as the compiler writes extents it derived from input extents. nullopt
/// for a plain name, anything unparsable, an unbound name, overflow or a
/// division by zero.
class ExtentExpression {
public:
  using Lookup = std::function<std::optional<int64_t>(std::string_view)>;
  ExtentExpression(std::string_view text, Lookup lookup)
      : text_(text), lookup_(std::move(lookup)) {}

  std::optional<int64_t> evaluate() {
    std::optional<int64_t> v = sum();
    skipSpace();
    if (!v || pos_ != text_.size() || !sawOperator_)
      return std::nullopt;
    return v;
  }

private:
  void skipSpace() {
    while (pos_ < text_.size() && text_[pos_] == ' ')
      ++pos_;
  }
  bool accept(std::string_view token) {
    skipSpace();
    if (text_.substr(pos_, token.size()) != token)
      return false;
    pos_ += token.size();
    return true;
  }
  /// Binary operators, loosest first; each level's operands are the next
  /// level's (the last level's are unary expressions). "//" before "*" so
  /// that it is matched whole.
  static constexpr std::string_view kLevels[2][2] = {{"+", "-"}, {"//", "*"}};

  std::optional<int64_t> sum() { return binary(0); }
  std::optional<int64_t> operand(int level) {
    return level + 1 < 2 ? binary(level + 1) : unary();
  }
  std::optional<int64_t> binary(int level) {
    std::optional<int64_t> left = operand(level);
    while (left) {
      std::string_view op;
      for (std::string_view candidate : kLevels[level])
        if (accept(candidate)) {
          op = candidate;
          break;
        }
      if (op.empty())
        break;
      std::optional<int64_t> right = operand(level);
      if (!right || !(left = apply(op, *left, *right)))
        return std::nullopt;
      sawOperator_ = true;
    }
    return left;
  }
  static std::optional<int64_t> apply(std::string_view op, int64_t a,
                                      int64_t b) {
    int64_t out;
    if (op == "+")
      return __builtin_add_overflow(a, b, &out) ? std::nullopt
                                                : std::optional<int64_t>(out);
    if (op == "-")
      return __builtin_sub_overflow(a, b, &out) ? std::nullopt
                                                : std::optional<int64_t>(out);
    if (op == "*")
      return __builtin_mul_overflow(a, b, &out) ? std::nullopt
                                                : std::optional<int64_t>(out);
    if (b == 0 || (a == INT64_MIN && b == -1))
      return std::nullopt;
    out = a / b;
    if (a % b != 0 && (a < 0) != (b < 0))
      --out; // floor, as Python's //
    return out;
  }
  std::optional<int64_t> unary() {
    if (accept("-")) {
      sawOperator_ = true;
      std::optional<int64_t> v = unary();
      if (!v || *v == INT64_MIN)
        return std::nullopt;
      return -*v;
    }
    return atom();
  }
  std::optional<int64_t> atom() {
    if (++depth_ > 64) // nesting bound: the text comes from an artifact
      return std::nullopt;
    skipSpace();
    std::optional<int64_t> v;
    if (accept("(")) {
      sawOperator_ = true;
      v = sum();
      if (!accept(")"))
        v.reset();
    } else if (pos_ < text_.size() && std::isdigit(uint8_t(text_[pos_]))) {
      int64_t n = 0;
      while (pos_ < text_.size() && std::isdigit(uint8_t(text_[pos_]))) {
        if (__builtin_mul_overflow(n, 10, &n) ||
            __builtin_add_overflow(n, text_[pos_] - '0', &n))
          return std::nullopt;
        ++pos_;
      }
      v = n;
    } else {
      size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(uint8_t(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      if (pos_ > start)
        v = lookup_(text_.substr(start, pos_ - start));
    }
    --depth_;
    return v;
  }

  std::string_view text_;
  Lookup lookup_;
  size_t pos_ = 0;
  int depth_ = 0;
  bool sawOperator_ = false; // a plain name is not an expression
};

/// Binds dimension names to extents and checks one buffer against its spec.
class SignatureChecker {
public:
  explicit SignatureChecker(const EntryPointSpec &ep) : ep_(ep) {}

  Status check(const ArgSpec &arg, int64_t pos, const BufferView &view,
               bool bindNames) {
    std::string label = argLabel(ep_, arg, pos);
    if (view.dtype != arg.dtype)
      return mismatch(label + " has dtype " +
                          std::string(dtypeName(view.dtype)) + ", expected " +
                          std::string(dtypeName(arg.dtype)),
                      arg, pos, std::string(dtypeName(arg.dtype)),
                      std::string(dtypeName(view.dtype)));
    if (view.rank() != arg.rank())
      return mismatch(label + " has shape " + shapeToString(view.shape) +
                          " (rank " + std::to_string(view.rank()) +
                          "), expected " + shapeToString(arg.shape) +
                          " (rank " + std::to_string(arg.rank()) + ")",
                      arg, pos, shapeToString(arg.shape),
                      shapeToString(view.shape));
    if (!view.strides.empty() && view.strides.size() != view.shape.size())
      return Status(StatusCode::kInvalidArgument,
                    label + " has " + std::to_string(view.strides.size()) +
                        " strides for " + std::to_string(view.shape.size()) +
                        " dimensions")
          .withSubject(arg.name)
          .withIndex(pos);
    for (size_t d = 0; d < arg.shape.size(); ++d) {
      int64_t got = view.shape[d];
      if (got < 0)
        return mismatch(label + " has a negative extent in shape " +
                            shapeToString(view.shape),
                        arg, pos, shapeToString(arg.shape),
                        shapeToString(view.shape));
      if (arg.shape[d] >= 0 && got != arg.shape[d])
        return mismatch(
            label + " has shape " + shapeToString(view.shape) + ", expected " +
                shapeToString(arg.shape) + " (dimension " + std::to_string(d) +
                " must be " + std::to_string(arg.shape[d]) + ")",
            arg, pos, shapeToString(arg.shape), shapeToString(view.shape));
      if (d < arg.dimNames.size() && !arg.dimNames[d].empty()) {
        const std::string &dn = arg.dimNames[d];
        auto it = bound_.find(dn);
        if (it == bound_.end()) {
          // An output extent the compiler derived from input extents
          // ("past + seq") must be exactly that: the code writes it.
          if (!bindNames) {
            if (std::optional<int64_t> want = evaluate(dn);
                want && *want != got)
              return mismatch(label + " has shape " +
                                  shapeToString(view.shape) + ": dimension " +
                                  std::to_string(d) + " ('" + dn +
                                  "') must be " + std::to_string(*want),
                              arg, pos, dn + " = " + std::to_string(*want),
                              std::to_string(got));
          } else {
            bound_[dn] = {got, arg.name};
          }
        } else if (it->second.first != got) {
          return mismatch(
              label + " has shape " + shapeToString(view.shape) +
                  ": dimension " + std::to_string(d) + " ('" + dn + "') is " +
                  std::to_string(got) + " but '" + it->second.second +
                  "' has " + dn + " = " + std::to_string(it->second.first),
              arg, pos, dn + " = " + std::to_string(it->second.first),
              dn + " = " + std::to_string(got));
        }
      }
    }
    if (!view.data && view.numElements() != 0)
      return Status(StatusCode::kInvalidArgument, label + " has no data")
          .withSubject(arg.name)
          .withIndex(pos);
    return Status::OK();
  }

  /// The shape output `arg` must have; an unresolved dynamic extent stays
  /// -1.
  std::vector<int64_t> resolve(const ArgSpec &arg) const {
    std::vector<int64_t> shape = arg.shape;
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] < 0 && d < arg.dimNames.size() && !arg.dimNames[d].empty()) {
        auto it = bound_.find(arg.dimNames[d]);
        if (it != bound_.end())
          shape[d] = it->second.first;
        else if (std::optional<int64_t> v = evaluate(arg.dimNames[d]);
                 v && *v >= 0)
          shape[d] = *v;
      }
    return shape;
  }

  /// `name` as arithmetic of bound names, or nullopt.
  std::optional<int64_t> evaluate(std::string_view name) const {
    return ExtentExpression(
               name,
               [this](std::string_view n) -> std::optional<int64_t> {
                 auto it = bound_.find(std::string(n));
                 if (it == bound_.end())
                   return std::nullopt;
                 return it->second.first;
               })
        .evaluate();
  }

private:
  const EntryPointSpec &ep_;
  std::map<std::string, std::pair<int64_t, std::string>> bound_;
};

Status checkCounts(const EntryPointSpec &ep, size_t want, size_t got,
                   const char *what, const std::vector<const ArgSpec *> &args) {
  if (want == got)
    return Status::OK();
  return Status(StatusCode::kSignatureMismatch,
                "entry point '" + ep.name + "' takes " + std::to_string(want) +
                    " " + what + (want == 1 ? "" : "s") +
                    (args.empty() ? "" : " (" + listNames(args) + ")") +
                    ", got " + std::to_string(got))
      .withSubject(what)
      .withExpected(std::to_string(want), std::to_string(got));
}

/// "cpu", "cuda:0", "rocm:1": a DLPack device, for messages.
std::string dlpackDeviceName(int32_t type, int32_t id) {
  switch (type) {
  case kDLPackCpu:
    return "cpu";
  case kDLPackCuda:
    return "cuda:" + std::to_string(id);
  case kDLPackRocm:
    return "rocm:" + std::to_string(id);
  default:
    return "DLPack device " + std::to_string(type) + ":" + std::to_string(id);
  }
}

/// Views outside host memory must be on the model's own device (`type`,
/// `id`; a CPU model takes none) and contiguous: the code reads and writes
/// them in place, with nothing to stage them through.
Status checkViewDevices(const EntryPointSpec &ep,
                        const std::vector<const ArgSpec *> &specs,
                        const std::vector<BufferView> &views, int32_t type,
                        int32_t id) {
  for (size_t i = 0; i < views.size() && i < specs.size(); ++i) {
    const BufferView &v = views[i];
    if (v.onHost())
      continue;
    std::string where = dlpackDeviceName(v.deviceType, v.deviceId);
    std::string label = argLabel(ep, *specs[i], int64_t(i));
    if (v.deviceType != type || v.deviceId != id)
      return Status(StatusCode::kDeviceUnavailable,
                    label + " lives on " + where + ", but the model runs on " +
                        dlpackDeviceName(type, id) +
                        ": pass it in host memory or on the model's device")
          .withSubject(specs[i]->name)
          .withIndex(int64_t(i))
          .withExpected(dlpackDeviceName(type, id), where);
    if (!v.isContiguous())
      return Status(StatusCode::kSignatureMismatch,
                    label + " lives on " + where +
                        " and is not contiguous: device arrays are used in "
                        "place, so they must be row-major")
          .withSubject(specs[i]->name)
          .withIndex(int64_t(i));
  }
  return Status::OK();
}

Status validateInputs(const EntryPointSpec &ep,
                      const std::vector<BufferView> &inputs,
                      SignatureChecker &checker) {
  std::vector<const ArgSpec *> specs = ep.inputs();
  SITS_RETURN_IF_ERROR(
      checkCounts(ep, specs.size(), inputs.size(), "input", specs));
  for (size_t i = 0; i < specs.size(); ++i)
    SITS_RETURN_IF_ERROR(checker.check(*specs[i], int64_t(i), inputs[i], true));
  return Status::OK();
}

} // namespace

void copyStrided(const BufferView &view, uint8_t *contiguous, bool toView) {
  size_t elem = dtypeSize(view.dtype);
  int64_t total = view.numElements();
  if (total == 0)
    return;
  size_t rank = view.shape.size();
  std::vector<int64_t> strides =
      view.strides.empty() ? view.contiguousStrides() : view.strides;
  auto *base = static_cast<uint8_t *>(view.data);
  if (rank == 0) {
    if (toView)
      std::memcpy(base, contiguous, elem);
    else
      std::memcpy(contiguous, base, elem);
    return;
  }
  std::vector<int64_t> index(rank, 0);
  int64_t off = 0;
  for (int64_t n = 0; n < total; ++n) {
    uint8_t *strided = base + off * int64_t(elem);
    if (toView)
      std::memcpy(strided, contiguous + size_t(n) * elem, elem);
    else
      std::memcpy(contiguous + size_t(n) * elem, strided, elem);
    for (size_t axis = rank; axis-- > 0;) {
      ++index[axis];
      off += strides[axis];
      if (index[axis] < view.shape[axis])
        break;
      off -= strides[axis] * view.shape[axis];
      index[axis] = 0;
    }
  }
}

std::vector<int64_t> descriptor(void *data, const std::vector<int64_t> &shape) {
  std::vector<int64_t> d(3 + 2 * shape.size());
  int64_t ptr;
  static_assert(sizeof(void *) == sizeof(int64_t), "64-bit hosts only");
  std::memcpy(&ptr, &data, sizeof(ptr));
  d[0] = ptr;
  d[1] = ptr;
  d[2] = 0;
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    d[3 + i] = shape[i];
    d[3 + shape.size() + i] = stride;
    stride *= shape[i];
  }
  return d;
}

namespace {

/// Whether the artifact's code is for the kind of device it is loaded on.
Status checkDeviceCompatibility(const Manifest &m, const Device &device) {
  auto incompatible = [](std::string message, std::string subject) {
    return Status(StatusCode::kIncompatibleTarget, std::move(message))
        .withSubject(std::move(subject));
  };
  if (device.kind() == DeviceKind::kCpu) {
    if (m.device)
      return incompatible(
                 "artifact was compiled for " + m.device->kind +
                     " GPUs (target '" + m.target.name + "'" +
                     (m.device->chip.empty() ? "" : ", " + m.device->chip) +
                     "): load it on a " + m.device->kind + " device (e.g. \"" +
                     m.device->kind + ":0\"), not on " + device.uri(),
                 "device.kind")
          .withExpected(m.device->kind, "cpu");
    return Status::OK();
  }
  std::string kind(deviceKindName(device.kind()));
  if (!m.device)
    return incompatible("artifact was compiled for the CPU (target '" +
                            m.target.name +
                            "'): compile it for a GPU target to run it on " +
                            device.uri(),
                        "device")
        .withExpected(kind, "cpu");
  if (m.device->kind != kind)
    return incompatible("artifact's device code is for " + m.device->kind +
                            " GPUs, not for " + device.uri(),
                        "device.kind")
        .withExpected(kind, m.device->kind);
  if (m.device->abi != "mlir-gpu-runtime")
    return incompatible("artifact's host code calls the GPU runtime ABI '" +
                            m.device->abi +
                            "', which this runtime does not provide "
                            "(it provides 'mlir-gpu-runtime')",
                        "device.abi")
        .withExpected("mlir-gpu-runtime", m.device->abi);
  return Status::OK();
}

/// Uploads the weights section to the device, once per loaded model.
Status uploadWeights(GpuDevice &gpu, ByteSpan weights, void *&out) {
  StatusOr<void *> buffer = gpu.allocate(weights.size);
  if (!buffer.ok())
    return buffer.status();
  out = *buffer;
  StatusOr<GpuDevice::Stream> stream = gpu.acquireStream();
  if (!stream.ok())
    return stream.status();
  Status s = gpu.copyToDevice(out, weights.data, weights.size, *stream);
  Status synced = gpu.synchronize(*stream);
  gpu.releaseStream(*stream);
  return s.ok() ? synced : s;
}

} // namespace

StatusOr<Module> Module::load(const std::string &path,
                              const LoadOptions &options) {
  // Resolve the device first: a bad URI should not cost a full hash.
  StatusOr<std::shared_ptr<Device>> device =
      DeviceRegistry::global().open(options.device);
  if (!device.ok())
    return device.status();
  StatusOr<ArtifactReader> reader = ArtifactReader::open(path, options.verify);
  if (!reader.ok())
    return reader.status();
  return load(*reader, options);
}

StatusOr<Module> Module::load(const void *data, size_t size,
                              const LoadOptions &options) {
  StatusOr<std::shared_ptr<Device>> device =
      DeviceRegistry::global().open(options.device);
  if (!device.ok())
    return device.status();
  StatusOr<ArtifactReader> reader =
      ArtifactReader::fromMemory(data, size, options.verify);
  if (!reader.ok())
    return reader.status();
  return load(*reader, options);
}

StatusOr<Module> Module::load(const ArtifactReader &reader,
                              const LoadOptions &options) {
  StatusOr<std::shared_ptr<Device>> device =
      DeviceRegistry::global().open(options.device);
  if (!device.ok())
    return device.status();
  std::shared_ptr<GpuDevice> gpu;
  if ((*device)->kind() != DeviceKind::kCpu) {
    gpu = std::dynamic_pointer_cast<GpuDevice>(*device);
    if (!gpu)
      return Status(StatusCode::kUnimplemented,
                    "device " + (*device)->uri() + " cannot run compiled code")
          .withSubject((*device)->uri());
  }
  SITS_RETURN_IF_ERROR(checkDeviceCompatibility(reader.manifest(), **device));
  SITS_RETURN_IF_ERROR(checkHostCompatibility(reader));

  auto impl = std::make_shared<Impl>(reader);
  impl->device = *device;
  impl->gpu = gpu;
  const Manifest &m = impl->reader.manifest();
  if (std::optional<ByteSpan> w = impl->reader.section("weights"))
    impl->weights = *w;
  // GPU code: the weights go to the device first; the code's ELF
  // constructor then loads its device image through mgpuModuleLoad, bound
  // to this device by the call scope.
  GpuCall loadCall;
  std::optional<GpuCallScope> scope;
  if (gpu) {
    SITS_RETURN_IF_ERROR(gpu->makeCurrent());
    SITS_RETURN_IF_ERROR(
        uploadWeights(*gpu, impl->weights, impl->deviceWeights));
    loadCall.device = gpu;
    scope.emplace(loadCall);
  }
  std::optional<ByteSpan> code = impl->reader.section(m.codeSectionName());
  StatusOr<std::unique_ptr<LoadedCode>> loaded = LoadedCode::load(
      *code, m.target.name + ":" + m.contentHash.substr(0, 16));
  scope.reset();
  if (!loaded.ok())
    return loaded.status();
  impl->code = std::move(loaded).value();
  if (!loadCall.status.ok()) {
    Status s = loadCall.status;
    const std::string &function = s.info().expected;
    if (function.find("ModuleLoad") != std::string::npos && m.device)
      s.mutableInfo().message +=
          " (the artifact's device image is " +
          (m.device->imageFormat.empty() ? std::string("code")
                                         : m.device->imageFormat) +
          (m.device->chip.empty() ? "" : " for " + m.device->chip) +
          (gpu->chip().empty() ? "" : "; this device is " + gpu->chip()) + ")";
    return s;
  }
  for (const EntryPointSpec &ep : m.entryPoints) {
    void *sym = impl->code->symbol(ep.symbol);
    if (!sym)
      return Status(StatusCode::kMissingSymbol,
                    "entry point '" + ep.name + "': the loaded code has no '" +
                        ep.symbol + "'")
          .withSubject(ep.symbol);
    impl->entries.push_back({&ep, reinterpret_cast<EntryFn>(sym)});
  }
  if (gpu)
    impl->gpuCalls = std::make_unique<GpuCalls>(gpu, impl->deviceWeights,
                                                int64_t(impl->weights.size),
                                                options.gpuGraphs);
  return Module(std::move(impl));
}

GpuCallStats Module::gpuStats() const {
  return impl_->gpuCalls ? impl_->gpuCalls->stats() : GpuCallStats{};
}

std::vector<std::string> Module::entryPoints() const {
  std::vector<std::string> out;
  for (const Impl::Entry &e : impl_->entries)
    out.push_back(e.spec->name);
  return out;
}

const EntryPointSpec *Module::signature(std::string_view name) const {
  const Impl::Entry *e = impl_->find(name);
  return e ? e->spec : nullptr;
}

const Manifest &Module::manifest() const { return impl_->reader.manifest(); }
const ArtifactReader &Module::artifact() const { return impl_->reader; }
const Device &Module::device() const { return *impl_->device; }

namespace {
Status unknownEntry(const Module &m, std::string_view name) {
  std::string known;
  for (const std::string &n : m.entryPoints())
    known += (known.empty() ? "" : ", ") + n;
  return Status(StatusCode::kInvalidArgument, "no entry point named '" +
                                                  std::string(name) +
                                                  "'; the model has: " + known)
      .withSubject(std::string(name));
}
} // namespace

StatusOr<std::vector<std::vector<int64_t>>>
Module::outputShapes(std::string_view name,
                     const std::vector<BufferView> &inputs) const {
  const Impl::Entry *entry = impl_->find(name);
  if (!entry)
    return unknownEntry(*this, name);
  const EntryPointSpec &ep = *entry->spec;
  SignatureChecker checker(ep);
  SITS_RETURN_IF_ERROR(validateInputs(ep, inputs, checker));
  std::vector<std::vector<int64_t>> out;
  std::vector<const ArgSpec *> outputs = ep.outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::vector<int64_t> shape = checker.resolve(*outputs[i]);
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] < 0)
        return mismatch("output '" + outputs[i]->name + "' of entry point '" +
                            ep.name + "' has shape " +
                            shapeToString(outputs[i]->shape) +
                            " and no input "
                            "determines dimension " +
                            std::to_string(d) + "; pass preallocated outputs",
                        *outputs[i], int64_t(i),
                        shapeToString(outputs[i]->shape), "unknown");
    out.push_back(std::move(shape));
  }
  return out;
}

/// The error of a call whose code set its status argument to `flag`.
Status statusFailure(const EntryPointSpec &ep, int32_t flag) {
  const std::vector<std::string> &messages = ep.status()->messages;
  std::string what = flag >= 1 && size_t(flag) <= messages.size()
                         ? messages[size_t(flag) - 1]
                         : "check " + std::to_string(flag) + " failed";
  return Status(StatusCode::kOutOfRange,
                "entry point '" + ep.name + "': " + what)
      .withSubject(ep.name)
      .withValue(flag);
}

Status Module::run(std::string_view name, const std::vector<BufferView> &inputs,
                   const std::vector<BufferView> &outputs) const {
  const Impl::Entry *entry = impl_->find(name);
  if (!entry)
    return unknownEntry(*this, name);
  const EntryPointSpec &ep = *entry->spec;
  SignatureChecker checker(ep);
  SITS_RETURN_IF_ERROR(validateInputs(ep, inputs, checker));
  std::vector<const ArgSpec *> outSpecs = ep.outputs();
  SITS_RETURN_IF_ERROR(
      checkCounts(ep, outSpecs.size(), outputs.size(), "output", outSpecs));
  // The weights are read from the file's mapping: one fstat a call.
  SITS_RETURN_IF_ERROR(impl_->reader.intact());
  // Outputs: static extents and names bound by the inputs must match.
  for (size_t i = 0; i < outSpecs.size(); ++i)
    SITS_RETURN_IF_ERROR(
        checker.check(*outSpecs[i], int64_t(i), outputs[i], false));
  auto [deviceType, deviceId] =
      impl_->gpu ? impl_->gpu->dlpackDevice()
                 : std::pair<int32_t, int32_t>{kDLPackCpu, 0};
  SITS_RETURN_IF_ERROR(
      checkViewDevices(ep, ep.inputs(), inputs, deviceType, deviceId));
  SITS_RETURN_IF_ERROR(
      checkViewDevices(ep, outSpecs, outputs, deviceType, deviceId));
  if (impl_->gpuCalls)
    return impl_->gpuCalls->run(entry->fn, ep, inputs, outputs);

  // Descriptors, staging what is not contiguous or not aligned to its
  // element. The code assumes no more than element alignment of its
  // arguments (its vector loads and stores say align = the element's
  // size), so a numpy array 16 bytes past a cache line is used in place.
  std::vector<std::vector<int64_t>> descs;
  std::vector<AlignedBuffer> scratch;
  std::vector<std::pair<const BufferView *, void *>> copyBack;
  descs.reserve(ep.args.size());
  if (ep.hasWeights()) {
    void *w = impl_->weights.size ? const_cast<uint8_t *>(impl_->weights.data)
                                  : static_cast<void *>(gEmpty);
    descs.push_back(descriptor(w, {int64_t(impl_->weights.size)}));
  }
  // A staged input the code updates in place is copied back like an output.
  auto stage = [&](const BufferView &view, bool isOutput,
                   bool isUpdated) -> StatusOr<void *> {
    if (view.numElements() == 0)
      return static_cast<void *>(gEmpty);
    size_t element = std::max<size_t>(1, dtypeSize(view.dtype));
    if (view.isContiguous() &&
        reinterpret_cast<uintptr_t>(view.data) % element == 0)
      return view.data;
    size_t bytes = size_t(view.numElements()) * dtypeSize(view.dtype);
    StatusOr<AlignedBuffer> buf = AlignedBuffer::allocate(bytes);
    if (!buf.ok())
      return buf.status();
    void *p = buf->data();
    if (view.isContiguous()) {
      if (!isOutput)
        std::memcpy(p, view.data, bytes);
    } else if (!isOutput) {
      copyStrided(view, static_cast<uint8_t *>(p), false);
    }
    scratch.push_back(std::move(buf).value());
    if (isOutput || isUpdated)
      copyBack.emplace_back(&view, p);
    return p;
  };
  std::vector<const ArgSpec *> inSpecs = ep.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const BufferView &in = inputs[i];
    StatusOr<void *> p =
        stage(in, false, i < inSpecs.size() && inSpecs[i]->updatedInPlace);
    if (!p.ok())
      return p.status();
    descs.push_back(descriptor(*p, in.shape));
  }
  for (const BufferView &out : outputs) {
    StatusOr<void *> p = stage(out, true, false);
    if (!p.ok())
      return p.status();
    descs.push_back(descriptor(*p, out.shape));
  }
  // The code's checks report through a zeroed i32 after the outputs.
  alignas(64) int32_t statusFlag = 0;
  if (ep.status())
    descs.push_back(descriptor(&statusFlag, {}));
  std::vector<void *> args;
  args.reserve(descs.size());
  for (std::vector<int64_t> &d : descs)
    args.push_back(d.data());

  entry->fn(args.data());

  for (auto &[view, p] : copyBack) {
    if (view->isContiguous())
      std::memcpy(view->data, p,
                  size_t(view->numElements()) * dtypeSize(view->dtype));
    else
      copyStrided(*view, static_cast<uint8_t *>(p), true);
  }
  return statusFlag ? statusFailure(ep, statusFlag) : Status::OK();
}

} // namespace sits::runtime
