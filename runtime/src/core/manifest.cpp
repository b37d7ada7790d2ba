//===- manifest.cpp - The manifest schema
//----------------------------------===//
//
// parseManifest() is the one definition of what a valid manifest is; the
// reader applies it to every file and the writer to what it is about to
// write. Unknown keys are allowed everywhere (newer writers may add some).
//
//===----------------------------------------------------------------------===//
#include "manifest_internal.h"
#include "sits/runtime/kivi_layout.h"

#include "artifact_format.h"
#include "json.h"
#include "sits/runtime/buffer.h"
#include "sits/runtime/host.h"

#include <cctype>
#include <set>

namespace sits::runtime {
namespace {

// Bounds on a status argument's messages (one per check in the code).
constexpr size_t kMaxStatusMessages = 65536;
constexpr size_t kMaxStatusMessageBytes = 4096;

Status schemaError(const std::string &field, const std::string &why) {
  return Status(StatusCode::kCorruptArtifact,
                "manifest field '" + field + "' " + why)
      .withSubject(field);
}

bool isIdentifier(const std::string &s) {
  if (s.empty() ||
      !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

Status getString(const json::Value &obj, const std::string &path,
                 const char *key, std::string &out, bool required = true,
                 bool allowEmpty = false) {
  const json::Value *v = obj.find(key);
  std::string field = path.empty() ? key : path + "." + key;
  if (!v) {
    if (required)
      return schemaError(field, "is missing");
    return Status::OK();
  }
  if (!v->isString())
    return schemaError(field, std::string("must be a string, not ") +
                                  json::Value::kindName(v->kind()));
  if (!allowEmpty && v->asString().empty())
    return schemaError(field, "must not be empty");
  out = v->asString();
  return Status::OK();
}

Status parseArg(const json::Value &a, const std::string &path, ArgSpec &arg) {
  if (!a.isObject())
    return schemaError(path, "must be an object");
  std::string role;
  SITS_RETURN_IF_ERROR(getString(a, path, "role", role));
  if (role == "weights")
    arg.role = ArgRole::kWeights;
  else if (role == "input")
    arg.role = ArgRole::kInput;
  else if (role == "output")
    arg.role = ArgRole::kOutput;
  else if (role == "status")
    arg.role = ArgRole::kStatus;
  else
    return schemaError(path + ".role",
                       "must be \"weights\", \"input\", \"output\" or "
                       "\"status\", not \"" +
                           role + "\"");
  SITS_RETURN_IF_ERROR(getString(a, path, "name", arg.name));
  std::string dtype;
  SITS_RETURN_IF_ERROR(getString(a, path, "dtype", dtype));
  std::optional<DType> dt = parseDType(dtype);
  if (!dt)
    return schemaError(path + ".dtype",
                       "names an unknown element type \"" + dtype +
                           "\" (known: f64 f32 f16 bf16 i64 i32 i16 i8 u64 "
                           "u32 u16 u8 bool)");
  arg.dtype = *dt;
  const json::Value *shape = a.find("shape");
  if (!shape)
    return schemaError(path + ".shape", "is missing");
  if (!shape->isArray())
    return schemaError(path + ".shape", "must be an array of integers");
  if (shape->items().size() > 64)
    return schemaError(path + ".shape", "has more than 64 dimensions");
  for (const json::Value &d : shape->items()) {
    if (!d.isInt() || d.asInt() < -1)
      return schemaError(path + ".shape",
                         "must hold integers >= 0, or -1 for a dynamic extent");
    arg.shape.push_back(d.asInt());
  }
  if (const json::Value *names = a.find("dim_names")) {
    if (!names->isArray() || names->items().size() != arg.shape.size())
      return schemaError(path + ".dim_names",
                         "must be an array with one entry per dimension");
    bool any = false;
    for (const json::Value &n : names->items()) {
      if (n.isNull()) {
        arg.dimNames.emplace_back();
      } else if (n.isString()) {
        arg.dimNames.push_back(n.asString());
        any = any || !n.asString().empty();
      } else {
        return schemaError(path + ".dim_names",
                           "entries must be strings or null");
      }
    }
    if (!any)
      arg.dimNames.clear();
  }
  if (const json::Value *updated = a.find("updated_in_place")) {
    if (!updated->isBool())
      return schemaError(path + ".updated_in_place", "must be a boolean");
    if (updated->asBool() && arg.role != ArgRole::kInput)
      return schemaError(path + ".updated_in_place",
                         "is only valid on an input");
    arg.updatedInPlace = updated->asBool();
  }
  if (const json::Value *kivi = a.find("kivi")) {
    // A KIVI pool's geometry: five positive integers on an i8 [?, n] input.
    if (!kivi->isObject() || arg.role != ArgRole::kInput ||
        arg.dtype != DType::kI8 || arg.shape.size() != 2)
      return schemaError(path + ".kivi",
                         "must be an object on an i8 [blocks, bytes] input");
    std::pair<const char *, int64_t *> fields[] = {
        {"bits", &arg.kivi.bits},
        {"layers", &arg.kivi.layers},
        {"kv_heads", &arg.kivi.kvHeads},
        {"block_size", &arg.kivi.blockSize},
        {"head_dim", &arg.kivi.headDim}};
    for (auto [key, field] : fields) {
      const json::Value *v = kivi->find(key);
      if (!v || !v->isInt() || v->asInt() <= 0 || v->asInt() > (1 << 30))
        return schemaError(path + ".kivi." + key,
                           "must be an integer in [1, 2^30]");
      *field = v->asInt();
    }
    // Keys per token like values (the per_token_group layout).
    if (const json::Value *keys = kivi->find("keys")) {
      if (!keys->isString() ||
          (keys->asString() != "channel" && keys->asString() != "token"))
        return schemaError(path + ".kivi.keys",
                           "must be \"channel\" or \"token\"");
      if (keys->asString() == "token")
        arg.kivi.bits += kivi::kKeysPerToken;
    }
    // A width per (layer, kv head) (kv_dtype "auto"), layer by layer.
    if (const json::Value *widths = kivi->find("widths")) {
      if (!widths->isArray() ||
          int64_t(widths->items().size()) !=
              arg.kivi.layers * arg.kivi.kvHeads ||
          arg.kivi.bits != 4)
        return schemaError(path + ".kivi.widths",
                           "must be an array of layers × kv_heads widths, "
                           "with bits 4");
      for (const json::Value &w : widths->items()) {
        if (!w.isInt() || (w.asInt() != 4 && w.asInt() != 2))
          return schemaError(path + ".kivi.widths", "widths are 4 or 2");
        arg.kivi.widths.push_back(uint8_t(w.asInt()));
      }
      arg.kivi.bits = kivi::kMixedWidths;
    }
  }
  if (arg.role == ArgRole::kWeights &&
      (arg.dtype != DType::kI8 || arg.shape.size() != 1))
    return schemaError(path, "is the weights argument, which must be a rank-1 "
                             "i8 memref, not " +
                                 arg.typeString());
  if (arg.role == ArgRole::kStatus) {
    if (arg.dtype != DType::kI32 || !arg.shape.empty() || !arg.dimNames.empty())
      return schemaError(path, "is the status argument, which must be an i32 "
                               "scalar, not " +
                                   arg.typeString());
    const json::Value *messages = a.find("messages");
    if (!messages || !messages->isArray() || messages->items().empty() ||
        messages->items().size() > kMaxStatusMessages)
      return schemaError(path + ".messages",
                         "must be an array of 1 to " +
                             std::to_string(kMaxStatusMessages) + " strings");
    for (const json::Value &m : messages->items()) {
      if (!m.isString() || m.asString().size() > kMaxStatusMessageBytes)
        return schemaError(path + ".messages",
                           "entries must be strings of at most " +
                               std::to_string(kMaxStatusMessageBytes) +
                               " bytes");
      arg.messages.push_back(m.asString());
    }
  }
  return Status::OK();
}

Status parseEntryPoint(const json::Value &e, const std::string &path,
                       EntryPointSpec &ep) {
  if (!e.isObject())
    return schemaError(path, "must be an object");
  SITS_RETURN_IF_ERROR(getString(e, path, "name", ep.name));
  if (!isIdentifier(ep.name))
    return schemaError(
        path + ".name",
        "must be an identifier ([A-Za-z_][A-Za-z0-9_]*), not \"" + ep.name +
            "\"");
  SITS_RETURN_IF_ERROR(getString(e, path, "symbol", ep.symbol));
  if (!isIdentifier(ep.symbol))
    return schemaError(path + ".symbol",
                       "must be a C identifier, not \"" + ep.symbol + "\"");
  const json::Value *args = e.find("args");
  if (!args)
    return schemaError(path + ".args", "is missing");
  if (!args->isArray())
    return schemaError(path + ".args", "must be an array");
  std::set<std::string> names;
  ArgRole last = ArgRole::kWeights;
  for (size_t i = 0; i < args->items().size(); ++i) {
    std::string argPath = path + ".args[" + std::to_string(i) + "]";
    ArgSpec arg;
    SITS_RETURN_IF_ERROR(parseArg(args->items()[i], argPath, arg));
    if (arg.role == ArgRole::kWeights && i != 0)
      return schemaError(argPath, "is a weights argument, which may only be "
                                  "the first argument");
    if (i > 0 && arg.role < last)
      return schemaError(argPath, "comes out of order: arguments are "
                                  "[weights], inputs..., outputs..., [status]");
    if (i > 0 && arg.role == ArgRole::kStatus && last == ArgRole::kStatus)
      return schemaError(argPath, "is a second status argument");
    last = arg.role;
    if (!names.insert(arg.name).second)
      return schemaError(argPath + ".name",
                         "repeats the argument name \"" + arg.name + "\"");
    ep.args.push_back(std::move(arg));
  }
  return Status::OK();
}

} // namespace

Status manifestFromJson(const json::Value &root, Manifest &m) {
  if (!root.isObject())
    return schemaError("(root)", "must be a JSON object");
  const json::Value *fv = root.find("format_version");
  if (!fv)
    return schemaError("format_version", "is missing");
  if (!fv->isInt() || fv->asInt() < 1 || fv->asInt() > 0xffffffffLL)
    return schemaError("format_version", "must be a positive integer");
  m.formatVersion = uint32_t(fv->asInt());
  SITS_RETURN_IF_ERROR(getString(root, "", "sits_version", m.sitsVersion));
  SITS_RETURN_IF_ERROR(getString(root, "", "llvm_version", m.llvmVersion));

  const json::Value *target = root.find("target");
  if (!target)
    return schemaError("target", "is missing");
  if (!target->isObject())
    return schemaError("target", "must be an object");
  SITS_RETURN_IF_ERROR(getString(*target, "target", "name", m.target.name));
  if (!format::isValidSectionName("code." + m.target.name))
    return schemaError("target.name",
                       "must be 1-34 characters of [a-z0-9_.-], not \"" +
                           m.target.name + "\"");
  SITS_RETURN_IF_ERROR(getString(*target, "target", "triple", m.target.triple));
  SITS_RETURN_IF_ERROR(getString(*target, "target", "cpu", m.target.cpu,
                                 /*required=*/true, /*allowEmpty=*/true));
  const json::Value *features = target->find("features");
  if (!features)
    return schemaError("target.features", "is missing");
  if (!features->isArray())
    return schemaError("target.features", "must be an array of strings");
  for (const json::Value &f : features->items()) {
    if (!f.isString() || f.asString().size() < 2 ||
        (f.asString()[0] != '+' && f.asString()[0] != '-'))
      return schemaError("target.features",
                         "entries must be LLVM feature strings such as "
                         "\"+avx512f\" or \"-amx-tile\"");
    m.target.features.push_back(f.asString());
  }

  if (const json::Value *device = root.find("device")) {
    if (!device->isObject())
      return schemaError("device", "must be an object");
    DeviceCodeSpec d;
    SITS_RETURN_IF_ERROR(getString(*device, "device", "kind", d.kind));
    SITS_RETURN_IF_ERROR(getString(*device, "device", "abi", d.abi));
    SITS_RETURN_IF_ERROR(getString(*device, "device", "chip", d.chip, false));
    SITS_RETURN_IF_ERROR(
        getString(*device, "device", "image_format", d.imageFormat, false));
    m.device = std::move(d);
  }

  const json::Value *eps = root.find("entry_points");
  if (!eps)
    return schemaError("entry_points", "is missing");
  if (!eps->isArray() || eps->items().empty())
    return schemaError("entry_points", "must be a non-empty array");
  std::set<std::string> names, symbols;
  for (size_t i = 0; i < eps->items().size(); ++i) {
    std::string path = "entry_points[" + std::to_string(i) + "]";
    EntryPointSpec ep;
    SITS_RETURN_IF_ERROR(parseEntryPoint(eps->items()[i], path, ep));
    if (!names.insert(ep.name).second)
      return schemaError(path + ".name",
                         "repeats the entry point name \"" + ep.name + "\"");
    if (!symbols.insert(ep.symbol).second)
      return schemaError(path + ".symbol",
                         "repeats the symbol \"" + ep.symbol + "\"");
    m.entryPoints.push_back(std::move(ep));
  }

  if (const json::Value *wd = root.find(format::kWeightsDigestKey)) {
    if (!wd->isObject())
      return schemaError(format::kWeightsDigestKey,
                         "must be an object {\"algorithm\", \"hex\"}");
    WeightsDigest d;
    SITS_RETURN_IF_ERROR(
        getString(*wd, format::kWeightsDigestKey, "algorithm", d.algorithm));
    if (d.algorithm != format::kWeightsDigestAlgorithm)
      return schemaError(std::string(format::kWeightsDigestKey) + ".algorithm",
                         "must be \"" +
                             std::string(format::kWeightsDigestAlgorithm) +
                             "\", not \"" + d.algorithm + "\"");
    SITS_RETURN_IF_ERROR(
        getString(*wd, format::kWeightsDigestKey, "hex", d.hex));
    if (d.hex.size() != format::kWeightsDigestHexChars ||
        d.hex.find_first_not_of("0123456789abcdef") != std::string::npos)
      return schemaError(std::string(format::kWeightsDigestKey) + ".hex",
                         "must be 32 lowercase hex digits");
    m.weightsDigest = std::move(d);
  }

  SITS_RETURN_IF_ERROR(getString(root, "", "content_hash", m.contentHash));
  if (m.contentHash.size() != format::kContentHashHexChars ||
      m.contentHash.find_first_not_of("0123456789abcdef") != std::string::npos)
    return schemaError("content_hash", "must be 64 lowercase hex digits");
  return Status::OK();
}

StatusOr<Manifest> parseManifest(std::string_view text) {
  if (!json::isValidUtf8(text))
    return Status(StatusCode::kCorruptArtifact,
                  "the manifest is not valid UTF-8")
        .withSubject("manifest");
  json::Value root;
  std::string error;
  if (!json::parse(text, root, error))
    return Status(StatusCode::kCorruptArtifact,
                  "the manifest is not valid JSON: " + error)
        .withSubject("manifest");
  Manifest m;
  SITS_RETURN_IF_ERROR(manifestFromJson(root, m));
  m.json = std::string(text);
  return m;
}

//===----------------------------------------------------------------------===//
// Small accessors declared in artifact.h
//===----------------------------------------------------------------------===//

std::string_view argRoleName(ArgRole role) {
  switch (role) {
  case ArgRole::kWeights:
    return "weights";
  case ArgRole::kInput:
    return "input";
  case ArgRole::kOutput:
    return "output";
  case ArgRole::kStatus:
    return "status";
  }
  return "?";
}

std::string ArgSpec::typeString() const {
  return std::string(dtypeName(dtype)) + shapeToString(shape);
}

std::vector<const ArgSpec *> EntryPointSpec::inputs() const {
  std::vector<const ArgSpec *> out;
  for (const ArgSpec &a : args)
    if (a.role == ArgRole::kInput)
      out.push_back(&a);
  return out;
}

std::vector<const ArgSpec *> EntryPointSpec::outputs() const {
  std::vector<const ArgSpec *> out;
  for (const ArgSpec &a : args)
    if (a.role == ArgRole::kOutput)
      out.push_back(&a);
  return out;
}

std::string TargetSpec::arch() const {
  return normalizeArch(triple.substr(0, triple.find('-')));
}

const EntryPointSpec *Manifest::findEntryPoint(std::string_view name) const {
  for (const EntryPointSpec &e : entryPoints)
    if (e.name == name)
      return &e;
  return nullptr;
}

} // namespace sits::runtime
