"""The layering of the source tree: the dialect is the bottom layer, the
passes build on it, and nothing in dialects/ reaches back into passes/
(neither an include nor a link to a pass library)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PASS_LIBRARIES = ("SitsTransforms", "SitsConversion", "SitsCpuCodegen", "SitsGpuCodegen",
                  "SitsCodegenCommon", "SitsPipelines", "SitsTargetsLLVM", "SitsAnalysis",
                  "SitsPassesCAPI")


def _sources(folder: str, suffixes=(".h", ".cpp", ".td")):
    return [p for p in (ROOT / folder).rglob("*") if p.suffix in suffixes]


def test_the_tree_is_there():
    assert len(_sources("dialects")) >= 8
    assert (ROOT / "passes" / "CAPI" / "Passes.cpp").is_file()


def test_dialects_include_nothing_from_passes():
    offenders = [f"{p.relative_to(ROOT)}: {line.strip()}"
                 for p in _sources("dialects")
                 for line in p.read_text().splitlines()
                 if re.match(r'\s*#\s*include\s+"passes/', line)
                 or re.match(r'\s*include\s+"passes/', line)]
    assert not offenders, "dialects/ must not depend on passes/:\n" + "\n".join(offenders)


def test_dialect_libraries_link_no_pass_library():
    offenders = []
    for cmake in (ROOT / "dialects").rglob("CMakeLists.txt"):
        text = re.sub(r"#.*", "", cmake.read_text())
        offenders += [f"{cmake.relative_to(ROOT)}: {lib}" for lib in PASS_LIBRARIES
                      if re.search(rf"\b{lib}\b", text)]
    assert not offenders, "dialects/ must not link pass libraries:\n" + "\n".join(offenders)


def test_one_list_of_pass_registrations():
    """sits-opt and the C API register the SITS passes through one function."""
    calls = re.compile(r"^\s+(?:[\w:]+::)?register(SitsPasses|SitsConversionPasses|SitsCpuPasses"
                       r"|SitsGpuPasses|SitsPipelines)\(\);", re.M)
    users = sorted(str(p.relative_to(ROOT)) for folder in ("tools", "passes", "dialects", "python")
                   for p in _sources(folder, (".h", ".cpp")) if calls.search(p.read_text()))
    assert users == ["passes/InitAllPasses.h"], users


def test_public_runtime_headers_include_only_public_headers():
    """The runtime's installed headers (runtime/include) include nothing but
    each other and system headers: internal ones such as SHA-256
    (runtime/src/support/sha256.h) are not part of the API."""
    include = ROOT / "runtime" / "include"
    headers = list(include.rglob("*.h"))
    assert headers
    offenders = []
    for p in headers:
        for line in p.read_text().splitlines():
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m and not (include / m.group(1)).is_file():
                offenders.append(f"{p.relative_to(ROOT)}: {line.strip()}")
    assert not offenders, "public runtime headers include non-public ones:\n" + "\n".join(offenders)
    assert not list(include.rglob("sha256*.h")), "SHA-256 is internal to the runtime"


# Big files become folders split by responsibility (Prune/, MixedPrecision/,
# SitsToLinalg/, the frontend's op families): none grows back past this.
MAX_LINES = 1000


def test_no_compiler_source_is_over_a_thousand_lines():
    sources = _sources("passes", (".h", ".cpp", ".td")) + \
        _sources("python/sits_mlir/frontend", (".py",))
    assert len(sources) > 50
    too_long = [f"{p.relative_to(ROOT)}: {n} lines" for p in sources
                if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not too_long, "split these by responsibility:\n" + "\n".join(too_long)
