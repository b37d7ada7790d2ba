//===- SitsRuntimeModule.cpp - sits_mlir._sits_runtime
//---------------------===//
//
// The nanobind module over the runtime: the core here, the KV-cache
// allocator in KVBindings.cpp (bindKV). It is deliberately thin: every
// check (artifact integrity, compatibility, signatures) happens in C++, and
// each failed Status becomes the matching typed exception of
// sits_mlir.runtime.errors (built by its `_from_status`, see PyStatus.h).
// The friendly Python API lives in sits_mlir/runtime/.
//
// Arrays cross as nanobind ndarrays, so anything with the buffer protocol or
// DLPack (numpy, PyTorch, JAX on CPU) is accepted without a copy; outputs are
// allocated 64-byte aligned and returned as numpy arrays that own them. The
// GIL is released while compiled code runs.
//
//===----------------------------------------------------------------------===//
#include "PyStatus.h"
#include "sits/runtime/runtime.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>

namespace nb = nanobind;
using namespace nb::literals;
using namespace sits::runtime;

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

namespace sits::runtime::python {

void raise(const Status &status, ErrorDomain domain) {
  const ErrorInfo &info = status.info();
  nb::object exc;
  try {
    // The whole payload; _from_status keeps what the exception class uses.
    nb::dict payload;
    payload["subject"] = info.subject;
    payload["expected"] = info.expected;
    payload["given"] = info.actual;
    payload["index"] = info.index;
    payload["missing"] = nb::cast(info.missing);
    payload["value"] = info.value;
    payload["limit"] = info.limit;
    payload["needed"] = info.needed;
    payload["available"] = info.available;
    payload["evictable"] = info.evictable;
    payload["evicting"] = info.evicting;
    payload["seq_id"] = info.has_seq_id ? nb::cast(info.seq_id) : nb::none();
    payload["block_id"] = info.block_id;
    payload["invariant"] = info.invariant;
    payload["state"] = info.state;
    payload["batch_index"] = info.batch_index;
    nb::object errors = nb::module_::import_("sits_mlir.runtime.errors");
    exc = errors.attr("_from_status")(
        statusCodeName(info.code), info.message, nb::arg("payload") = payload,
        nb::arg("kv") = domain == ErrorDomain::kKV);
  } catch (nb::python_error &) {
    // The Python package is not importable: fall back to a builtin.
    throw std::runtime_error(status.toString());
  }
  PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

} // namespace sits::runtime::python

namespace {

using sits::runtime::python::check;
using sits::runtime::python::raise;
using sits::runtime::python::unwrap;

//===----------------------------------------------------------------------===//
// Arrays
//===----------------------------------------------------------------------===//

std::optional<DType> fromDlpack(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1)
    return std::nullopt;
  switch (C(t.code)) {
  case C::Float:
    return t.bits == 64   ? std::optional(DType::kF64)
           : t.bits == 32 ? std::optional(DType::kF32)
           : t.bits == 16 ? std::optional(DType::kF16)
                          : std::nullopt;
  case C::Bfloat:
    return t.bits == 16 ? std::optional(DType::kBF16) : std::nullopt;
  case C::Int:
    return t.bits == 64   ? std::optional(DType::kI64)
           : t.bits == 32 ? std::optional(DType::kI32)
           : t.bits == 16 ? std::optional(DType::kI16)
           : t.bits == 8  ? std::optional(DType::kI8)
                          : std::nullopt;
  case C::UInt:
    return t.bits == 64   ? std::optional(DType::kU64)
           : t.bits == 32 ? std::optional(DType::kU32)
           : t.bits == 16 ? std::optional(DType::kU16)
           : t.bits == 8  ? std::optional(DType::kU8)
                          : std::nullopt;
  case C::Bool:
    return t.bits == 8 ? std::optional(DType::kBool) : std::nullopt;
  default:
    return std::nullopt;
  }
}

nb::dlpack::dtype toDlpack(DType d) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C code, int bits) {
    nb::dlpack::dtype t;
    t.code = uint8_t(code);
    t.bits = uint8_t(bits);
    t.lanes = 1;
    return t;
  };
  switch (d) {
  case DType::kF64:
    return make(C::Float, 64);
  case DType::kF32:
    return make(C::Float, 32);
  case DType::kF16:
    return make(C::Float, 16);
  case DType::kBF16:
    // numpy has no bfloat16: outputs carry its bits as uint16.
    return make(C::UInt, 16);
  case DType::kI64:
    return make(C::Int, 64);
  case DType::kI32:
    return make(C::Int, 32);
  case DType::kI16:
    return make(C::Int, 16);
  case DType::kI8:
    return make(C::Int, 8);
  case DType::kU64:
    return make(C::UInt, 64);
  case DType::kU32:
    return make(C::UInt, 32);
  case DType::kU16:
    return make(C::UInt, 16);
  case DType::kU8:
    return make(C::UInt, 8);
  case DType::kBool:
    return make(C::Bool, 8);
  default:
    // Types NumPy lacks travel as their bits (dtype.h).
    return toDlpack(storageDType(d));
  }
  return make(C::UInt, 8);
}

std::string dlpackName(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  if (std::optional<DType> d = fromDlpack(t))
    return std::string(dtypeName(*d));
  const char *kind = C(t.code) == C::Complex ? "complex" : "dtype-code-";
  return kind + std::to_string(C(t.code) == C::Complex ? t.bits : t.code) +
         (C(t.code) == C::Complex ? "" : "/" + std::to_string(t.bits));
}

[[noreturn]] void notAnArray(const EntryPointSpec &ep, const ArgSpec &arg,
                             size_t pos, nb::handle obj) {
  std::string given =
      nb::cast<std::string>(nb::str(obj.type().attr("__name__")));
  ErrorInfo info;
  info.code = StatusCode::kSignatureMismatch;
  info.message = std::string(argRoleName(arg.role)) + " '" + arg.name + "' (#" +
                 std::to_string(pos) + ") of entry point '" + ep.name +
                 "' must be an array (numpy, or any DLPack tensor on the CPU), "
                 "not " +
                 given;
  info.subject = arg.name;
  info.index = int64_t(pos);
  info.expected = "array";
  info.actual = given;
  raise(Status(std::move(info)));
}

/// A view of a Python array as the runtime's BufferView, checking what only
/// the binding can see (array-ness, element type support, device).
template <typename Array>
BufferView viewOf(const Array &a, const EntryPointSpec &ep, const ArgSpec &arg,
                  size_t pos) {
  std::string label = std::string(argRoleName(arg.role)) + " '" + arg.name +
                      "' (#" + std::to_string(pos) + ") of entry point '" +
                      ep.name + "'";
  // GPU memory goes to the runtime tagged with its device, which must be
  // the model's (Module::run checks); other devices are refused here.
  if (a.device_type() != nb::device::cpu::value &&
      a.device_type() != nb::device::cuda::value &&
      a.device_type() != nb::device::rocm::value) {
    ErrorInfo info;
    info.code = StatusCode::kDeviceUnavailable;
    info.message = label + " lives on a device of DLPack type " +
                   std::to_string(a.device_type()) +
                   "; pass arrays in host memory (for a GPU model the runtime "
                   "copies them to its device) or on the model's GPU";
    info.subject = arg.name;
    info.index = int64_t(pos);
    raise(Status(std::move(info)));
  }
  std::optional<DType> dtype = fromDlpack(a.dtype());
  // bf16, fp8, int4, ... have no numpy type: their bits may be passed as
  // uint16 / uint8.
  if (dtype && dtype != arg.dtype && *dtype == storageDType(arg.dtype))
    dtype = arg.dtype;
  if (!dtype) {
    ErrorInfo info;
    info.code = StatusCode::kSignatureMismatch;
    info.message = label + " has unsupported element type " +
                   dlpackName(a.dtype()) + ", expected " +
                   std::string(dtypeName(arg.dtype));
    info.subject = arg.name;
    info.index = int64_t(pos);
    info.expected = std::string(dtypeName(arg.dtype));
    info.actual = dlpackName(a.dtype());
    raise(Status(std::move(info)));
  }
  BufferView v;
  v.data = const_cast<void *>(static_cast<const void *>(a.data()));
  v.dtype = *dtype;
  v.deviceType = int32_t(a.device_type());
  v.deviceId = int32_t(a.device_id());
  for (size_t i = 0; i < a.ndim(); ++i)
    v.shape.push_back(int64_t(a.shape(i)));
  if (a.stride_ptr())
    for (size_t i = 0; i < a.ndim(); ++i)
      v.strides.push_back(a.stride(i));
  return v;
}

struct AllocatedOutput {
  void *data;
  std::vector<size_t> shape;
  DType dtype;
};

nb::object toNumpy(AllocatedOutput out) {
  nb::capsule owner(out.data,
                    [](void *p) noexcept { AlignedBuffer::freeReleased(p); });
  return nb::cast(nb::ndarray<nb::numpy>(out.data, out.shape.size(),
                                         out.shape.data(), owner, nullptr,
                                         toDlpack(out.dtype)));
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

nb::dict argDict(const ArgSpec &a) {
  nb::dict d;
  d["role"] = std::string(argRoleName(a.role));
  d["name"] = a.name;
  d["dtype"] = std::string(dtypeName(a.dtype));
  d["shape"] = nb::tuple(nb::cast(a.shape));
  nb::list names;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    if (i < a.dimNames.size() && !a.dimNames[i].empty())
      names.append(a.dimNames[i]);
    else
      names.append(nb::none());
  }
  d["dim_names"] = nb::tuple(names);
  if (a.role == ArgRole::kStatus)
    d["messages"] = nb::tuple(nb::cast(a.messages));
  return d;
}

nb::dict signatureDict(const EntryPointSpec &ep) {
  nb::dict d;
  d["name"] = ep.name;
  d["symbol"] = ep.symbol;
  nb::list args;
  for (const ArgSpec &a : ep.args)
    args.append(argDict(a));
  d["args"] = args;
  return d;
}

const EntryPointSpec &entryOf(const Module &m, const std::string &name) {
  const EntryPointSpec *ep = m.signature(name);
  if (!ep) {
    std::string known;
    for (const std::string &n : m.entryPoints())
      known += (known.empty() ? "" : ", ") + n;
    raise(Status(StatusCode::kInvalidArgument,
                 "no entry point named '" + name + "'; the model has: " + known)
              .withSubject(name));
  }
  return *ep;
}

std::vector<BufferView> inputViews(const EntryPointSpec &ep,
                                   const nb::list &inputs,
                                   std::vector<nb::ndarray<nb::ro>> &keep) {
  std::vector<const ArgSpec *> specs = ep.inputs();
  std::vector<BufferView> views;
  for (size_t i = 0; i < nb::len(inputs); ++i) {
    if (i >= specs.size()) {
      views.emplace_back(); // too many: the runtime words the count error
      continue;
    }
    nb::handle obj = inputs[i];
    nb::ndarray<nb::ro> a;
    if (!nb::try_cast(obj, a, /*convert=*/false) || !a.is_valid())
      notAnArray(ep, *specs[i], i, obj);
    views.push_back(viewOf(a, ep, *specs[i], i));
    keep.push_back(std::move(a));
  }
  return views;
}

nb::list runModule(const Module &m, const std::string &name,
                   const nb::list &inputs, std::optional<nb::list> outputs) {
  const EntryPointSpec &ep = entryOf(m, name);
  std::vector<nb::ndarray<nb::ro>> keepIn;
  std::vector<BufferView> in = inputViews(ep, inputs, keepIn);
  std::vector<const ArgSpec *> outSpecs = ep.outputs();
  std::vector<BufferView> out;
  nb::list result;
  std::vector<nb::ndarray<>> keepOut;
  std::vector<AllocatedOutput> allocated;
  if (outputs) {
    for (size_t i = 0; i < nb::len(*outputs); ++i) {
      nb::handle obj = (*outputs)[i];
      result.append(obj);
      if (i >= outSpecs.size()) {
        out.emplace_back(); // too many: the runtime words the count error
        continue;
      }
      nb::ndarray<> a;
      if (!nb::try_cast(obj, a, false) || !a.is_valid()) {
        nb::ndarray<nb::ro> ro;
        if (nb::try_cast(obj, ro, false) && ro.is_valid())
          raise(Status(StatusCode::kSignatureMismatch,
                       "output '" + outSpecs[i]->name + "' (#" +
                           std::to_string(i) + ") of entry point '" + ep.name +
                           "' is read-only")
                    .withSubject(outSpecs[i]->name)
                    .withIndex(int64_t(i)));
        notAnArray(ep, *outSpecs[i], i, obj);
      }
      out.push_back(viewOf(a, ep, *outSpecs[i], i));
      keepOut.push_back(a);
    }
  } else {
    std::vector<std::vector<int64_t>> shapes = unwrap(m.outputShapes(name, in));
    for (size_t i = 0; i < shapes.size(); ++i) {
      DType dt = outSpecs[i]->dtype;
      size_t count = 1;
      std::vector<size_t> shape;
      for (int64_t d : shapes[i]) {
        count *= size_t(d);
        shape.push_back(size_t(d));
      }
      AlignedBuffer buf =
          unwrap(AlignedBuffer::allocate(count * dtypeSize(dt)));
      // Not cleared: the code writes every element of its outputs (a
      // memset here cost a tenth of a GPT-2 decode step, 6 MB of present
      // K/V written twice).
      void *p = buf.release();
      allocated.push_back({p, shape, dt});
      out.push_back(BufferView(p, dt, shapes[i]));
    }
  }
  Status s;
  {
    nb::gil_scoped_release release;
    s = m.run(name, in, out);
  }
  if (!s.ok()) {
    for (AllocatedOutput &a : allocated)
      AlignedBuffer::freeReleased(a.data);
    raise(s);
  }
  if (!outputs)
    for (AllocatedOutput &a : allocated)
      result.append(toNumpy(a));
  return result;
}

//===----------------------------------------------------------------------===//
// Artifacts
//===----------------------------------------------------------------------===//

/// Keeps the Python buffers of the sections alive and readable, and the
/// first Python exception a chunk iterator raised.
struct SectionBuffers {
  std::vector<std::pair<std::string, Py_buffer>> views;
  std::shared_ptr<std::optional<nb::python_error>> error =
      std::make_shared<std::optional<nb::python_error>>();
  SectionBuffers() = default;
  SectionBuffers(const SectionBuffers &) = delete;
  ~SectionBuffers() {
    for (auto &v : views)
      PyBuffer_Release(&v.second);
  }
  /// Re-raises what an iterator raised (called with the GIL held).
  void rethrow() {
    if (error->has_value()) {
      nb::python_error e = std::move(**error);
      error->reset();
      throw e;
    }
  }
};

/// A SectionReader over a Python iterator of bytes-like chunks; called by
/// the writer without the GIL, it takes the GIL for each chunk. A chunk may
/// be any size: what does not fit the writer's buffer is kept for the next
/// call. Destroyed with the writer, while the GIL is held.
struct PyChunkState {
  nb::object iterator;
  std::shared_ptr<std::optional<nb::python_error>> error;
  Py_buffer view{};
  bool haveView = false;
  size_t offset = 0;
  ~PyChunkState() {
    if (haveView)
      PyBuffer_Release(&view);
  }
  StatusOr<size_t> read(uint8_t *buffer, size_t capacity) {
    nb::gil_scoped_acquire gil;
    size_t filled = 0;
    while (filled < capacity) {
      if (!haveView) {
        if (!iterator.is_valid())
          break;
        PyObject *next = PyIter_Next(iterator.ptr());
        if (!next) {
          iterator.reset();
          if (PyErr_Occurred())
            return fail();
          break;
        }
        int rc = PyObject_GetBuffer(next, &view, PyBUF_C_CONTIGUOUS);
        Py_DECREF(next);
        if (rc != 0)
          return fail();
        haveView = true;
        offset = 0;
      }
      size_t n = std::min(capacity - filled, size_t(view.len) - offset);
      std::memcpy(buffer + filled, static_cast<uint8_t *>(view.buf) + offset,
                  n);
      filled += n;
      offset += n;
      if (offset == size_t(view.len)) {
        PyBuffer_Release(&view);
        haveView = false;
      }
    }
    return filled;
  }
  Status fail() {
    nb::python_error e; // takes the raised exception
    std::string what = e.what();
    if (!error->has_value())
      error->emplace(std::move(e));
    return Status(StatusCode::kInvalidArgument,
                  "the weights iterator raised: " + what)
        .withSubject("weights");
  }
};

ArtifactWriter makeWriter(const std::string &manifestJson,
                          const nb::list &sections, SectionBuffers &buffers) {
  ArtifactWriter w;
  check(w.setManifest(manifestJson));
  for (nb::handle item : sections) {
    nb::tuple t = nb::cast<nb::tuple>(item);
    if (nb::len(t) == 3 && nb::isinstance<nb::str>(t[1]) &&
        nb::cast<std::string>(t[1]) == "file") {
      // (name, "file", path): copied from the file in chunks.
      check(w.addSectionFromFile(nb::cast<std::string>(t[0]),
                                 nb::cast<std::string>(t[2])));
      continue;
    }
    if (nb::len(t) == 4 && nb::isinstance<nb::str>(t[1]) &&
        nb::cast<std::string>(t[1]) == "chunks") {
      // (name, "chunks", iterator, size or -1): pulled while written.
      auto state = std::make_shared<PyChunkState>();
      state->iterator = nb::borrow(t[2]);
      state->error = buffers.error;
      check(w.addSectionFromReader(
          nb::cast<std::string>(t[0]),
          [state](uint8_t *buffer, size_t capacity) {
            return state->read(buffer, capacity);
          },
          nb::cast<int64_t>(t[3])));
      continue;
    }
    if (nb::len(t) != 2)
      throw nb::value_error("sections are (name, bytes-like), "
                            "(name, 'file', path) or "
                            "(name, 'chunks', iterator, size) tuples");
    std::string name = nb::cast<std::string>(t[0]);
    Py_buffer view;
    if (PyObject_GetBuffer(t[1].ptr(), &view, PyBUF_C_CONTIGUOUS) != 0)
      throw nb::python_error();
    buffers.views.emplace_back(name, view);
    check(w.addSection(name, view.buf, size_t(view.len)));
  }
  return w;
}

nb::dict infoDict(const ArtifactInfo &info) {
  nb::dict d;
  d["content_hash"] = info.contentHash;
  d["file_size"] = info.fileSize;
  nb::list sections;
  for (const SectionInfo &s : info.sections)
    sections.append(nb::make_tuple(s.name, s.offset, s.size));
  d["sections"] = sections;
  d["manifest_json"] = info.manifestJson;
  return d;
}

nb::dict readerDict(const ArtifactReader &r) {
  ArtifactInfo info;
  info.contentHash = r.contentHash();
  info.fileSize = r.fileSize();
  info.sections = r.sections();
  info.manifestJson = r.manifest().json;
  nb::dict d = infoDict(info);
  d["format_version"] = r.formatVersion();
  d["weights_verified"] = r.weightsVerified();
  return d;
}

/// "full" or "metadata" (see Verify in artifact.h).
Verify verifyOption(const std::string &v) {
  if (v == "full")
    return Verify::kFull;
  if (v == "metadata")
    return Verify::kMetadata;
  throw nb::value_error(
      ("verify must be 'full' or 'metadata', not '" + v + "'").c_str());
}

/// A read-only uint8 array over section `name` of `reader`'s mapping (None
/// when absent); the array keeps the mapping alive.
nb::object sectionArray(const ArtifactReader &reader, std::string_view name) {
  std::optional<ByteSpan> span = reader.section(name);
  if (!span)
    return nb::none();
  auto *keep = new ArtifactReader(reader);
  nb::capsule owner(
      keep, [](void *p) noexcept { delete static_cast<ArtifactReader *>(p); });
  size_t shape[1] = {span->size};
  return nb::cast(nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>>(
      span->data, 1, shape, owner));
}

std::vector<uint8_t> bytesOf(nb::handle data) {
  Py_buffer view;
  if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0)
    throw nb::python_error();
  std::vector<uint8_t> out(static_cast<uint8_t *>(view.buf),
                           static_cast<uint8_t *>(view.buf) + view.len);
  PyBuffer_Release(&view);
  return out;
}

} // namespace

NB_MODULE(_sits_runtime, m) {
  m.doc() = "SITS runtime (C++): artifacts, loading and running compiled "
            "models, devices, the thread pool, the paged KV-cache allocator. "
            "Use sits_mlir.runtime and sits_mlir.runtime.kv.";
  m.attr("FORMAT_VERSION") = kArtifactFormatVersion;

  nb::class_<Module>(m, "Module")
      .def_static(
          "load",
          [](const std::string &path, const std::string &device,
             const std::string &verify, nb::object verifier, bool gpuGraphs) {
            LoadOptions o;
            o.device = device;
            o.verify = verifyOption(verify);
            o.gpuGraphs = gpuGraphs;
            if (verifier.is_none()) {
              StatusOr<Module> r = [&] {
                nb::gil_scoped_release release; // hashing a big file
                return Module::load(path, o);
              }();
              return unwrap(std::move(r));
            }
            // Open and verify the bytes, let the caller judge them (a
            // signature), and only then load the code: nothing in the file
            // runs before `verifier` returns.
            StatusOr<ArtifactReader> reader = [&] {
              nb::gil_scoped_release release;
              return ArtifactReader::open(path, o.verify);
            }();
            ArtifactReader opened = unwrap(std::move(reader));
            verifier(opened.contentHash(), sectionArray(opened, "weights"));
            StatusOr<Module> r = [&] {
              nb::gil_scoped_release release;
              return Module::load(opened, o);
            }();
            return unwrap(std::move(r));
          },
          "path"_a, "device"_a = "cpu", "verify"_a = "full",
          "verifier"_a = nb::none(), "gpu_graphs"_a = true,
          "Verifies and loads the artifact at `path` (see ARTIFACT.md); "
          "verify='metadata' skips the weights digest. `verifier`, when "
          "given, is called as verifier(content_hash, weights) once the "
          "file is verified and before any of its code is loaded; "
          "`weights` is a read-only uint8 array over the mapped weights "
          "section (None without one). What it raises propagates. "
          "gpu_graphs=False launches every kernel of a GPU model at every "
          "call instead of replaying recordings of repeated calls.")
      .def_static(
          "load_bytes",
          [](nb::handle data, const std::string &device, nb::object verifier,
             bool gpuGraphs) {
            std::vector<uint8_t> bytes = bytesOf(data);
            LoadOptions o;
            o.device = device;
            o.gpuGraphs = gpuGraphs;
            StatusOr<ArtifactReader> reader = [&] {
              nb::gil_scoped_release release;
              return ArtifactReader::fromMemory(bytes.data(), bytes.size());
            }();
            ArtifactReader opened = unwrap(std::move(reader));
            if (!verifier.is_none())
              verifier(opened.contentHash(), sectionArray(opened, "weights"));
            StatusOr<Module> r = [&] {
              nb::gil_scoped_release release;
              return Module::load(opened, o);
            }();
            return unwrap(std::move(r));
          },
          "data"_a, "device"_a = "cpu", "verifier"_a = nb::none(),
          "gpu_graphs"_a = true,
          "Loads an artifact held in memory (copied); `verifier` as for "
          "load().")
      .def_prop_ro("entry_points", &Module::entryPoints)
      .def(
          "signature",
          [](const Module &self, const std::string &name) {
            return signatureDict(entryOf(self, name));
          },
          "name"_a)
      .def_prop_ro("manifest_json",
                   [](const Module &self) { return self.manifest().json; })
      .def_prop_ro(
          "content_hash",
          [](const Module &self) { return self.manifest().contentHash; })
      .def_prop_ro("device",
                   [](const Module &self) { return self.device().uri(); })
      .def_prop_ro(
          "device_description",
          [](const Module &self) { return self.device().description(); })
      .def(
          "output_shapes",
          [](const Module &self, const std::string &name,
             const nb::list &inputs) {
            const EntryPointSpec &ep = entryOf(self, name);
            std::vector<nb::ndarray<nb::ro>> keep;
            std::vector<BufferView> in = inputViews(ep, inputs, keep);
            nb::list out;
            for (const std::vector<int64_t> &s :
                 unwrap(self.outputShapes(name, in)))
              out.append(nb::tuple(nb::cast(s)));
            return out;
          },
          "name"_a, "inputs"_a)
      .def(
          "gpu_stats",
          [](const Module &self) {
            GpuCallStats st = self.gpuStats();
            nb::dict d;
            d["calls"] = st.calls;
            d["replays"] = st.replays;
            d["recordings"] = st.recordings;
            d["record_failures"] = st.recordFailures;
            d["kernels"] = st.kernels;
            d["launches"] = st.launches;
            d["host_seconds"] = double(st.hostNanoseconds) * 1e-9;
            return d;
          },
          "Counters of the calls so far on a GPU (zeros on the CPU): calls, "
          "replays and recordings of repeated calls, recordings the driver "
          "refused, kernels run, launch calls into the driver, and the host "
          "seconds spent issuing the work.")
      .def("run", &runModule, "name"_a, "inputs"_a, "outputs"_a = nb::none(),
           "Runs entry point `name`; returns the outputs (new numpy arrays, "
           "or the given `outputs`).");

  m.def(
      "write_artifact",
      [](const std::string &path, const std::string &manifestJson,
         const nb::list &sections) {
        SectionBuffers buffers;
        ArtifactWriter w = makeWriter(manifestJson, sections, buffers);
        StatusOr<ArtifactInfo> info = [&] {
          nb::gil_scoped_release release;
          return w.write(path);
        }();
        buffers.rethrow();
        return infoDict(unwrap(std::move(info)));
      },
      "path"_a, "manifest_json"_a, "sections"_a,
      "Writes an artifact; returns {content_hash, file_size, sections, "
      "manifest_json}. Sections are (name, bytes-like), (name, 'file', "
      "path) or (name, 'chunks', iterator of bytes-like, size or -1).");
  nb::class_<PlacedWeightsFile>(m, "PlacedWeightsFile")
      .def_static(
          "create",
          [](const std::string &directory) {
            return unwrap(PlacedWeightsFile::create(directory));
          },
          "directory"_a,
          "A new unnamed file in `directory` whose weights a compiler "
          "writes in place before write_artifact(..., placed=) completes "
          "it; it disappears unless that names it.")
      .def_prop_ro("fd", &PlacedWeightsFile::fd)
      .def_prop_ro("named", &PlacedWeightsFile::named)
      .def_ro_static("weights_offset", &PlacedWeightsFile::kWeightsOffset)
      .def("close", &PlacedWeightsFile::close,
           "Closes it (removing the file unless it was named).");
  m.def(
      "write_artifact_around",
      [](const std::string &path, const std::string &manifestJson,
         const nb::list &sections, PlacedWeightsFile &file, uint64_t placed) {
        SectionBuffers buffers;
        ArtifactWriter w = makeWriter(manifestJson, sections, buffers);
        StatusOr<ArtifactInfo> info = [&] {
          nb::gil_scoped_release release;
          return w.writeAround(path, file, placed);
        }();
        buffers.rethrow();
        return infoDict(unwrap(std::move(info)));
      },
      "path"_a, "manifest_json"_a, "sections"_a, "file"_a, "placed"_a,
      "Like write_artifact, completing `file` whose first `placed` bytes "
      "of weights are already at file.weights_offset; the 'weights' "
      "section, if given, is the rest of them.");
  m.def(
      "serialize_artifact",
      [](const std::string &manifestJson, const nb::list &sections) {
        SectionBuffers buffers;
        ArtifactWriter w = makeWriter(manifestJson, sections, buffers);
        StatusOr<std::vector<uint8_t>> serialized = [&] {
          nb::gil_scoped_release release;
          return w.serialize();
        }();
        buffers.rethrow();
        std::vector<uint8_t> bytes = unwrap(std::move(serialized));
        return nb::bytes(reinterpret_cast<const char *>(bytes.data()),
                         bytes.size());
      },
      "manifest_json"_a, "sections"_a, "The bytes write_artifact would write.");
  m.def(
      "read_artifact",
      [](const std::string &path, const std::string &verify) {
        Verify v = verifyOption(verify);
        StatusOr<ArtifactReader> r = [&] {
          nb::gil_scoped_release release;
          return ArtifactReader::open(path, v);
        }();
        return readerDict(unwrap(std::move(r)));
      },
      "path"_a, "verify"_a = "full",
      "Verifies an artifact's integrity (no code runs) and describes it.");
  m.def(
      "read_artifact_bytes",
      [](nb::handle data) {
        std::vector<uint8_t> bytes = bytesOf(data);
        return readerDict(
            unwrap(ArtifactReader::fromMemory(bytes.data(), bytes.size())));
      },
      "data"_a);
  m.def(
      "check_compatibility",
      [](const std::string &path) {
        ArtifactReader r = unwrap(ArtifactReader::open(path));
        check(checkHostCompatibility(r));
      },
      "path"_a, "Raises unless the artifact could run on this host.");

  m.def("num_threads", &numThreads);
  m.def("default_num_threads", &defaultNumThreads);
  m.def("set_num_threads", [](int n) { check(setNumThreads(n)); }, "n"_a);
  m.def("thread_pool_stats", [] {
    ThreadPoolStats s = threadPoolStats();
    nb::dict d;
    d["threads"] = s.threads;
    d["tasks_executed"] = s.tasksExecuted;
    d["live_async_objects"] = s.liveAsyncObjects;
    return d;
  });

  m.def("host_cpu", [] {
    const HostCpuInfo &h = hostCpuInfo();
    nb::dict d;
    d["arch"] = h.arch;
    d["os"] = h.os;
    d["model_name"] = h.modelName;
    d["vendor"] = h.vendor;
    d["features"] = h.features;
    d["known_features"] = h.knownFeatures;
    return d;
  });
  m.def("devices", [] {
    nb::list out;
    for (const DeviceInfo &info : DeviceRegistry::global().enumerate()) {
      nb::dict d;
      d["uri"] = info.uri;
      d["name"] = info.name;
      d["kind"] = std::string(deviceKindName(info.kind));
      if (!info.arch.empty())
        d["arch"] = info.arch;
      out.append(d);
    }
    return out;
  });
  m.def(
      "open_device",
      [](const std::string &uri) {
        std::shared_ptr<Device> d = unwrap(DeviceRegistry::global().open(uri));
        return nb::make_tuple(d->uri(), d->description());
      },
      "uri"_a,
      "Opens a device: (canonical uri, description), or raises DeviceError.");
  m.def("version", [] { return std::string(sitsVersion()); });
  m.def("llvm_version", [] { return std::string(llvmVersion()); });

  sits::runtime::python::bindKV(m);
  sits::runtime::python::bindEngine(m);
}
