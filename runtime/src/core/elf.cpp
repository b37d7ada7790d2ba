//===- elf.cpp - Reading an ELF shared object's exports
//--------------------===//
#include "elf.h"

#include <cstring>
#include <elf.h>

namespace sits::runtime {
namespace {

Status bad(const std::string &what, const std::string &why) {
  return Status(StatusCode::kCorruptArtifact,
                "section '" + what +
                    "' is not a loadable shared object: " + why)
      .withSubject(what);
}

bool inBounds(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

std::string machineArch(uint16_t machine) {
  switch (machine) {
  case EM_X86_64:
    return "x86_64";
  case EM_AARCH64:
    return "aarch64";
#ifdef EM_RISCV
  case EM_RISCV:
    return "riscv64";
#endif
  case EM_PPC64:
    return "ppc64";
  case EM_S390:
    return "s390x";
  default:
    return "elf-machine-" + std::to_string(machine);
  }
}

} // namespace

StatusOr<ElfSummary> inspectSharedObject(ByteSpan bytes,
                                         const std::string &what) {
  if (bytes.size < sizeof(Elf64_Ehdr))
    return bad(what, "too small for an ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data, sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return bad(what, "no ELF magic");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64)
    return bad(what, "not a 64-bit ELF object");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return bad(what, "not a little-endian ELF object");
  if (eh.e_type != ET_DYN)
    return bad(what, "not a shared object (ELF type " +
                         std::to_string(eh.e_type) + ")");
  ElfSummary out;
  out.arch = machineArch(eh.e_machine);

  if (eh.e_shoff == 0 || eh.e_shnum == 0)
    return bad(what, "no section headers");
  if (eh.e_shentsize != sizeof(Elf64_Shdr))
    return bad(what, "unexpected section header size");
  if (!inBounds(eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr),
                bytes.size))
    return bad(what, "section headers outside the object");

  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data + eh.e_shoff + i * sizeof(Elf64_Shdr),
                sizeof(sh));
    return sh;
  };

  bool foundDynsym = false;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = section(i);
    if (sh.sh_type != SHT_DYNSYM)
      continue;
    foundDynsym = true;
    if (sh.sh_entsize != sizeof(Elf64_Sym) ||
        !inBounds(sh.sh_offset, sh.sh_size, bytes.size))
      return bad(what, "malformed dynamic symbol table");
    if (sh.sh_link >= eh.e_shnum)
      return bad(what, "dynamic symbol table without a string table");
    Elf64_Shdr strtab = section(sh.sh_link);
    if (strtab.sh_type != SHT_STRTAB ||
        !inBounds(strtab.sh_offset, strtab.sh_size, bytes.size))
      return bad(what, "malformed dynamic string table");
    const char *strings =
        reinterpret_cast<const char *>(bytes.data + strtab.sh_offset);
    size_t count = sh.sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < count; ++k) {
      Elf64_Sym sym;
      std::memcpy(&sym, bytes.data + sh.sh_offset + k * sizeof(Elf64_Sym),
                  sizeof(sym));
      unsigned bind = ELF64_ST_BIND(sym.st_info);
      unsigned type = ELF64_ST_TYPE(sym.st_info);
      unsigned vis = ELF64_ST_VISIBILITY(sym.st_other);
      if (sym.st_shndx == SHN_UNDEF || type != STT_FUNC ||
          (bind != STB_GLOBAL && bind != STB_WEAK) ||
          (vis != STV_DEFAULT && vis != STV_PROTECTED))
        continue;
      if (sym.st_name >= strtab.sh_size)
        return bad(what, "symbol name outside the string table");
      const char *name = strings + sym.st_name;
      size_t maxLen = strtab.sh_size - sym.st_name;
      size_t len = strnlen(name, maxLen);
      if (len == maxLen)
        return bad(what, "unterminated symbol name");
      out.exportedFunctions.emplace(name, len);
    }
  }
  if (!foundDynsym)
    return bad(what, "no dynamic symbol table");
  return out;
}

} // namespace sits::runtime
