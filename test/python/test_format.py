"""The C and C++ sources are formatted in LLVM style (.clang-format) by the
pinned clang-format; `tools/dev/format.sh` fixes what this finds."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _clang_format() -> str:
    local = Path(sys.executable).parent / "clang-format"
    found = str(local) if local.exists() else shutil.which("clang-format")
    assert found, "clang-format is a test dependency (pyproject.toml, extra 'test')"
    return found


def _sources() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--", "*.c", "*.cpp", "*.h", ":!:*third_party/*"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    return [f for f in listed if (ROOT / f).is_file()]


def test_the_pinned_clang_format_runs():
    version = subprocess.run([_clang_format(), "--version"], check=True,
                             capture_output=True, text=True).stdout
    assert "clang-format version 22." in version


def test_sources_are_formatted():
    files = _sources()
    assert len(files) > 100 and (ROOT / ".clang-format").is_file()
    result = subprocess.run([_clang_format(), "--dry-run", "--Werror", *files],
                            cwd=ROOT, capture_output=True, text=True)
    unformatted = sorted({line.split(":", 1)[0] for line in result.stderr.splitlines()
                          if ": error: code should be clang-formatted" in line})
    assert result.returncode == 0, (
        "run tools/dev/format.sh; not formatted:\n" + "\n".join(unformatted or [result.stderr]))
