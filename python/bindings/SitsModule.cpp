//===- SitsModule.cpp - The sits_mlir._mlir_libs._sits extension ----------===//
//
// Registers the SITS dialect and passes with every Python-created context
// (through _site_initialize_0), exposes the known-target table, and binds
// the SITS attributes as Python classes. Built with RTTI, so it only calls
// the C API.
//
//===----------------------------------------------------------------------===//

#include "dialects/CAPI/Sits.h"
#include "passes/CAPI/Compiler.h"
#include "passes/CAPI/Passes.h"

#include "mlir-c/IR.h"
#include "mlir/Bindings/Python/IRAttributes.h"
#include "mlir/Bindings/Python/IRCore.h"
#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"

#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace mlir::python::MLIR_BINDINGS_PYTHON_DOMAIN::sits {
namespace {

nb::str toStr(MlirStringRef s) { return nb::str(s.data, s.length); }

std::string knownTargetNames() {
  std::string names;
  for (intptr_t i = 0, e = sitsGetNumKnownTargets(); i < e; ++i) {
    MlirStringRef name = sitsGetKnownTarget(i).name;
    if (i)
      names += ", ";
    names.append(name.data, name.length);
  }
  return names;
}

nb::dict targetInfoDict(intptr_t pos) {
  SitsTargetInfo t = sitsGetKnownTarget(pos);
  nb::dict d, peak;
#define SITS_TARGET_STRING(NAME, PY) d[#PY] = toStr(t.NAME);
#define SITS_TARGET_INT(NAME, PY) d[#PY] = t.NAME;
#define SITS_TARGET_REAL(NAME, PY) d[#PY] = t.NAME;
#define SITS_TARGET_PEAK(NAME, DTYPE) peak[#DTYPE] = t.NAME;
#define SITS_TARGET_ALIASES(NAME, PY)                                          \
  {                                                                            \
    nb::list aliases;                                                          \
    for (intptr_t i = 0; i < t.numAliases; ++i)                                \
      aliases.append(toStr(sitsGetKnownTargetAlias(pos, i)));                  \
    d[#PY] = aliases;                                                          \
  }
#define SITS_TARGET_VENDOR(NAME, PY) d[#PY] = toStr(t.NAME);
#define SITS_TARGET_FP8(NAME, PY)                                              \
  {                                                                            \
    nb::list formats;                                                          \
    if (t.fp8E4M3)                                                             \
      formats.append("e4m3");                                                  \
    if (t.fp8E5M2)                                                             \
      formats.append("e5m2");                                                  \
    d[#PY] = formats;                                                          \
  }
#include "dialects/Target/TargetFields.def"
  d["peak_tflops"] = peak;
  return d;
}

struct TargetAttr : PyConcreteAttribute<TargetAttr> {
  static constexpr IsAFunctionTy isaFunction = sitsAttributeIsATarget;
  static constexpr GetTypeIDFunctionTy getTypeIdFunction =
      sitsTargetAttrGetTypeID;
  static constexpr const char *pyClassName = "TargetAttr";
  using Base::Base;

  static void bindDerived(ClassTy &c) {
    c.def_static(
        "get",
        [](const std::string &name, DefaultingPyMlirContext context) {
          MlirAttribute attr = sitsTargetAttrGet(
              context->get(), mlirStringRefCreate(name.data(), name.size()));
          if (mlirAttributeIsNull(attr))
            throw nb::value_error(("unknown target '" + name +
                                   "'; known targets: " + knownTargetNames())
                                      .c_str());
          return TargetAttr(context->getRef(), attr);
        },
        "name"_a, "context"_a = nb::none(),
        "Gets a #sits.target attribute from a target name or alias.");
    c.def_prop_ro("name", [](TargetAttr &self) {
      return toStr(sitsTargetAttrGetName(self));
    });
    c.def_prop_ro(
        "info",
        [](TargetAttr &self) {
          return targetInfoDict(sitsLookupTarget(sitsTargetAttrGetName(self)));
        },
        "The known-target table entry this attribute names.");
  }
};

struct PackedEncodingAttr : PyConcreteAttribute<PackedEncodingAttr> {
  static constexpr IsAFunctionTy isaFunction = sitsAttributeIsAPackedEncoding;
  static constexpr GetTypeIDFunctionTy getTypeIdFunction =
      sitsPackedEncodingAttrGetTypeID;
  static constexpr const char *pyClassName = "PackedEncodingAttr";
  using Base::Base;

  static void bindDerived(ClassTy &c) {
    c.def_static(
        "get",
        [](PyType &storage, int64_t axis, DefaultingPyMlirContext context) {
          MlirAttribute attr =
              sitsPackedEncodingAttrGet(context->get(), storage, axis);
          if (mlirAttributeIsNull(attr))
            throw nb::value_error(
                ("invalid #sits.packed encoding: storage must be i8, i16 or "
                 "i32 and axis non-negative, got axis " +
                 std::to_string(axis))
                    .c_str());
          return PackedEncodingAttr(context->getRef(), attr);
        },
        "storage"_a, "axis"_a, "context"_a = nb::none(),
        "Gets a #sits.packed tensor encoding.");
    c.def_prop_ro("storage", [](PackedEncodingAttr &self) {
      return PyType(self.getContext(), sitsPackedEncodingAttrGetStorage(self))
          .maybeDownCast();
    });
    c.def_prop_ro("axis", [](PackedEncodingAttr &self) {
      return sitsPackedEncodingAttrGetAxis(self);
    });
  }
};

/// A diagnostic captured while a C API call ran: (severity, location, text).
using CapturedDiagnostic = std::tuple<std::string, std::string, std::string>;

MlirLogicalResult captureDiagnostic(MlirDiagnostic diag, void *userData) {
  auto *out = static_cast<std::vector<CapturedDiagnostic> *>(userData);
  auto append = [](MlirStringRef s, void *data) {
    static_cast<std::string *>(data)->append(s.data, s.length);
  };
  std::string location, message;
  mlirLocationPrint(mlirDiagnosticGetLocation(diag), append, &location);
  mlirDiagnosticPrint(diag, append, &message);
  const char *severity = "error";
  switch (mlirDiagnosticGetSeverity(diag)) {
  case MlirDiagnosticWarning:
    severity = "warning";
    break;
  case MlirDiagnosticNote:
    severity = "note";
    break;
  case MlirDiagnosticRemark:
    severity = "remark";
    break;
  default:
    break;
  }
  out->emplace_back(severity, location, message);
  return mlirLogicalResultSuccess();
}

/// Runs `produce(callback, userData)` -- a C API call streaming bytes to a
/// callback -- with the GIL released and the context's diagnostics captured.
/// Returns (ok, bytes, [(severity, location, message)]).
/// With `pieces`, every callback call is one bytes object of a list.
template <typename Produce>
nb::tuple runCapturingDiagnostics(MlirContext context, Produce produce,
                                  bool pieces = false) {
  std::vector<CapturedDiagnostic> diagnostics;
  std::vector<std::string> output(1);
  MlirDiagnosticHandlerID handler = mlirContextAttachDiagnosticHandler(
      context, captureDiagnostic, &diagnostics, nullptr);
  MlirLogicalResult result;
  {
    nb::gil_scoped_release release;
    if (pieces) {
      output.clear();
      result = produce(
          [](MlirStringRef s, void *data) {
            static_cast<std::vector<std::string> *>(data)->emplace_back(
                s.data, s.length);
          },
          &output);
    } else {
      result = produce(
          [](MlirStringRef s, void *data) {
            static_cast<std::string *>(data)->append(s.data, s.length);
          },
          &output.front());
    }
  }
  mlirContextDetachDiagnosticHandler(context, handler);
  nb::list diags;
  for (auto &[severity, location, message] : diagnostics)
    diags.append(nb::make_tuple(severity, location, message));
  nb::object data;
  if (pieces) {
    nb::list list;
    for (const std::string &piece : output)
      list.append(nb::bytes(piece.data(), piece.size()));
    data = list;
  } else {
    data = nb::bytes(output.front().data(), output.front().size());
  }
  return nb::make_tuple(mlirLogicalResultIsSuccess(result), data, diags);
}

/// An emission entry point (object or LLVM IR) through
/// runCapturingDiagnostics.
nb::tuple runEmission(MlirLogicalResult (*emit)(MlirOperation,
                                                SitsLLVMObjectOptions,
                                                MlirStringCallback, void *),
                      MlirOperation module, const std::string &triple,
                      const std::string &cpu, const std::string &features,
                      int optLevel, int jobs = 1, bool pieces = false) {
  SitsLLVMObjectOptions options{
      mlirStringRefCreate(triple.data(), triple.size()),
      mlirStringRefCreate(cpu.data(), cpu.size()),
      mlirStringRefCreate(features.data(), features.size()), optLevel, jobs};
  return runCapturingDiagnostics(
      mlirOperationGetContext(module),
      [&](MlirStringCallback callback, void *userData) {
        return emit(module, options, callback, userData);
      },
      pieces);
}

} // namespace
} // namespace mlir::python::MLIR_BINDINGS_PYTHON_DOMAIN::sits

using namespace mlir::python::MLIR_BINDINGS_PYTHON_DOMAIN::sits;

NB_MODULE(_sits, m) {
  m.doc() = "SITS dialect registration, known targets and attributes";

  m.def(
      "register_dialects",
      [](MlirDialectRegistry registry) {
        mlirDialectHandleInsertDialect(mlirGetDialectHandle__sits__(),
                                       registry);
        sitsRegisterPasses();
      },
      "registry"_a,
      "Adds the SITS dialect to `registry` and registers the SITS passes.");

  m.def("version", [] { return toStr(sitsGetVersion()); });
  m.def("llvm_version", [] { return toStr(sitsGetLLVMVersion()); });

  m.def(
      "known_targets",
      [] {
        nb::list targets;
        for (intptr_t i = 0, e = sitsGetNumKnownTargets(); i < e; ++i)
          targets.append(targetInfoDict(i));
        return targets;
      },
      "Every entry of the known-target table, as dicts.");
  m.def(
      "lookup_target",
      [](const std::string &name) -> nb::object {
        intptr_t pos =
            sitsLookupTarget(mlirStringRefCreate(name.data(), name.size()));
        if (pos < 0)
          return nb::none();
        return targetInfoDict(pos);
      },
      "name"_a, "The entry for a target name or alias, or None.");

  m.def(
      "emit_object",
      [](MlirOperation module, const std::string &triple,
         const std::string &cpu, const std::string &features, int optLevel) {
        return runEmission(sitsEmitLLVMObject, module, triple, cpu, features,
                           optLevel);
      },
      "module"_a, "triple"_a = "", "cpu"_a = "", "features"_a = "",
      "opt_level"_a = 3,
      "Translates a module in the LLVM dialect to a native object file. "
      "Returns (ok, object bytes, diagnostics).");
  m.def(
      "emit_objects",
      [](MlirOperation module, const std::string &triple,
         const std::string &cpu, const std::string &features, int optLevel,
         int jobs) {
        return runEmission(sitsEmitLLVMObjects, module, triple, cpu, features,
                           optLevel, jobs, /*pieces=*/true);
      },
      "module"_a, "triple"_a = "", "cpu"_a = "", "features"_a = "",
      "opt_level"_a = 3, "jobs"_a = 0,
      "Like emit_object, with the module in parts optimized and emitted on "
      "`jobs` threads (0: one per core). Returns (ok, [object bytes], "
      "diagnostics); linked together, the objects are the module's code.");
  m.def(
      "emit_llvm_ir",
      [](MlirOperation module, const std::string &triple,
         const std::string &cpu, const std::string &features, int optLevel) {
        return runEmission(sitsEmitOptimizedLLVMIR, module, triple, cpu,
                           features, optLevel);
      },
      "module"_a, "triple"_a = "", "cpu"_a = "", "features"_a = "",
      "opt_level"_a = 3,
      "Like emit_object, returning optimized textual LLVM IR.");

  m.def(
      "serialize_weights",
      [](MlirOperation module) {
        return runCapturingDiagnostics(
            mlirOperationGetContext(module),
            [&](MlirStringCallback callback, void *userData) {
              return sitsSerializeWeights(module, callback, userData);
            });
      },
      "module"_a,
      "The weights buffer of a module processed by "
      "sits-externalize-weights. Returns (ok, bytes, diagnostics).");

  m.def(
      "set_weight_file",
      [](MlirOperation module, int fd, uint64_t base) {
        sitsSetWeightFile(mlirOperationGetContext(module), fd, base);
      },
      "module"_a, "fd"_a, "base"_a = 0,
      "Writes the packed weights that lowering `module` produces straight "
      "to the file open as `fd` (duplicated), from byte `base` on; fd=-1 "
      "stops that for the module's context.");
  m.def(
      "weight_views",
      [](MlirOperation module) {
        // The pieces serialization writes, recorded instead of copied: each
        // points into a weight's resource blob (owned by the context) or at
        // static zero padding.
        std::vector<std::pair<const char *, size_t>> pieces;
        nb::tuple result = runCapturingDiagnostics(
            mlirOperationGetContext(module), [&](MlirStringCallback, void *) {
              return sitsSerializeWeights(
                  module,
                  [](MlirStringRef s, void *data) {
                    static_cast<decltype(pieces) *>(data)->emplace_back(
                        s.data, s.length);
                  },
                  &pieces);
            });
        nb::list views;
        for (auto [data, size] : pieces)
          views.append(nb::steal(PyMemoryView_FromMemory(
              const_cast<char *>(data), Py_ssize_t(size), PyBUF_READ)));
        return nb::make_tuple(result[0], views, result[2]);
      },
      "module"_a,
      "The weights buffer of `module` as read-only memoryviews of its "
      "pieces, in order, without copying: views of the weights' resource "
      "blobs, valid while the module's context lives. Returns (ok, "
      "[memoryview], diagnostics).");

  TargetAttr::bind(m);
  PackedEncodingAttr::bind(m);
}
