//===- compat.cpp - Can this artifact run on this host?
//--------------------===//
#include "elf.h"

#include "sits/runtime/artifact.h"
#include "sits/runtime/host.h"

namespace sits::runtime {
namespace {

std::string tripleOs(const std::string &triple) {
  // arch-vendor-os[-env] or arch-os[-env].
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dash = triple.find('-', start);
    parts.push_back(triple.substr(start, dash - start));
    if (dash == std::string::npos)
      break;
    start = dash + 1;
  }
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i].rfind("linux", 0) == 0)
      return "linux";
  for (size_t i = 1; i < parts.size(); ++i)
    for (const char *os :
         {"darwin", "macos", "ios", "windows", "freebsd", "netbsd", "openbsd",
          "wasi", "none", "cuda", "amdhsa"})
      if (parts[i].rfind(os, 0) == 0)
        return os;
  return "";
}

std::string joinFeatures(const std::vector<std::string> &features) {
  std::string out;
  for (size_t i = 0; i < features.size(); ++i) {
    if (i)
      out += i + 1 == features.size() ? " and " : ", ";
    out += features[i];
  }
  return out;
}

} // namespace

Status checkHostCompatibility(const ArtifactReader &reader) {
  const Manifest &m = reader.manifest();
  const HostCpuInfo &host = hostCpuInfo();
  std::string arch = m.target.arch();
  if (arch != host.arch)
    return Status(StatusCode::kIncompatibleTarget,
                  "artifact was built for " + arch + " (" + m.target.triple +
                      "), but this host is " + host.arch)
        .withSubject("target.triple")
        .withExpected(arch, host.arch);
  std::string os = tripleOs(m.target.triple);
  if (!os.empty() && os != host.os)
    return Status(StatusCode::kIncompatibleTarget,
                  "artifact was built for " + os + " (" + m.target.triple +
                      "), but this host runs " + host.os)
        .withSubject("target.triple")
        .withExpected(os, host.os);

  std::vector<std::string> missing, unknown;
  for (const std::string &f : m.target.features) {
    if (f.empty() || f[0] != '+')
      continue; // disabled features never hurt
    std::optional<bool> has = host.hasFeature(f);
    if (!has)
      unknown.push_back(f);
    else if (!*has)
      missing.push_back(f);
  }
  if (!missing.empty() || !unknown.empty()) {
    std::string msg = "artifact was built for " + arch;
    if (!missing.empty())
      msg += " with " + joinFeatures(missing) + ", which this CPU lacks";
    if (!unknown.empty())
      msg += std::string(missing.empty() ? " with " : "; and with ") +
             joinFeatures(unknown) +
             ", which this runtime cannot detect on this CPU";
    if (!host.modelName.empty())
      msg += " (" + host.modelName + ")";
    ErrorInfo info;
    info.code = StatusCode::kIncompatibleTarget;
    info.message = msg;
    info.subject = "target.features";
    info.missing = missing;
    info.missing.insert(info.missing.end(), unknown.begin(), unknown.end());
    return Status(std::move(info));
  }

  std::string codeName = m.codeSectionName();
  std::optional<ByteSpan> code = reader.section(codeName);
  if (!code)
    return Status(StatusCode::kCorruptArtifact,
                  "the artifact has no '" + codeName +
                      "' section for its target '" + m.target.name + "'")
        .withSubject(codeName);
  StatusOr<ElfSummary> elf = inspectSharedObject(*code, codeName);
  if (!elf.ok())
    return elf.status();
  if (elf->arch != host.arch)
    return Status(StatusCode::kIncompatibleTarget,
                  "the code in section '" + codeName + "' is for " + elf->arch +
                      ", but this host is " + host.arch)
        .withSubject(codeName)
        .withExpected(host.arch, elf->arch);
  for (const EntryPointSpec &ep : m.entryPoints)
    if (!elf->exportedFunctions.count(ep.symbol))
      return Status(StatusCode::kMissingSymbol,
                    "entry point '" + ep.name + "' needs the function '" +
                        ep.symbol + "', which the code does not export")
          .withSubject(ep.symbol);
  return Status::OK();
}

} // namespace sits::runtime
