"""The lit suite holds on every CPU: a RUN line whose output depends on the
CPU target (the register block, vector width, panel width and core count the
CPU codegen passes read from `sits.target`, the instructions the target has)
names its target, instead of
taking the machine that runs the test (`cpu`, the default)."""

from __future__ import annotations

import pathlib
import re

LIT = pathlib.Path(__file__).resolve().parents[1] / "lit"

# Passes and pipelines that read the CPU target table entry.
TARGET_DEPENDENT = re.compile(
    r"sits-cpu-(pipeline|codegen|tile-and-fuse|pack-weights|conv-to-gemm|"
    r"expand-small-floats)\b")
# A pinned target: the pipeline's `target=` or sits-set-target before it.
PINNED = re.compile(r"sits-set-target\{target=[\w.-]+\}|"
                    r"sits-cpu-(pipeline|codegen)\{[^}]*\btarget=[\w.-]+")
HOST_NAMES = {"cpu", "host", "native"}


def run_lines(path: pathlib.Path) -> list[str]:
    """RUN commands with their `\\` continuations joined."""
    commands, current = [], ""
    for line in path.read_text().splitlines():
        match = re.match(r"\s*(//|#)\s*RUN:\s?(.*)", line)
        if not match:
            continue
        current += match.group(2)
        if current.endswith("\\"):
            current = current[:-1]
            continue
        commands.append(current)
        current = ""
    return commands


def lit_files() -> list[pathlib.Path]:
    return sorted(p for p in LIT.rglob("*") if p.suffix in (".mlir", ".py")
                  and "Inputs" not in p.parts)


def test_the_scan_sees_the_suite():
    files = lit_files()
    assert len(files) > 100
    assert any(TARGET_DEPENDENT.search(c) for f in files for c in run_lines(f))


def test_cpu_codegen_runs_pin_their_target():
    unpinned = []
    for path in lit_files():
        for command in run_lines(path):
            if TARGET_DEPENDENT.search(command) and not PINNED.search(command):
                unpinned.append(f"{path.relative_to(LIT)}: {command}")
    assert not unpinned, "RUN lines that compile for whatever CPU runs them:\n" + \
        "\n".join(unpinned)


def test_pinned_targets_are_named_levels():
    """`sits-set-target{target=cpu}` would pin nothing."""
    host = []
    for path in lit_files():
        for command in run_lines(path):
            for pin in PINNED.finditer(command):
                name = re.search(r"\btarget=([\w.-]+)", pin.group(0)).group(1)
                if name.lower() in HOST_NAMES:
                    host.append(f"{path.relative_to(LIT)}: {command}")
    assert not host, "RUN lines pinned to the host:\n" + "\n".join(host)
