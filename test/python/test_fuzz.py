"""The coverage-guided fuzz targets of test/fuzz (README.md there).

`test_campaign` (slow tier, so CI runs it and `--quick` does not) runs each
target for $SITS_FUZZ_SECONDS (default 60) under atheris and fails on any
finding, naming the reproducer and the command that replays it; it also
checks from libFuzzer's statistics that inputs really ran and coverage was
collected, so that a broken setup cannot pass. `test_regression` (fast
tier) replays every reproducer under test/fuzz/regressions/<target>/
through the target's one-input function, as plain Python.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import re
import subprocess
import sys

import pytest

FUZZ = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
if str(FUZZ) not in sys.path:
    sys.path.insert(0, str(FUZZ))

import _harness  # noqa: E402

TARGETS = ["onnx_import", "artifact", "engine_request"]
SECONDS = int(os.environ.get("SITS_FUZZ_SECONDS", "60"))
#: The fewest inputs per second of campaign each target must run, far below
#: what it runs on one loaded core (onnx_import ~300/s, artifact ~2000/s,
#: engine_request ~500/s): fewer means the target is broken, not slow.
MIN_RATE = {"onnx_import": 2, "artifact": 20, "engine_request": 1}

#: Reproducers of findings not fixed yet: target/file -> (exception, the
#: finding's signature as `--known` matches it, why). Each reproducer must
#: still fail (strict xfail), so that a fix is noticed and the entry removed;
#: meanwhile campaigns dismiss the finding (and note it) rather than stop at it.
KNOWN: dict = {}


def _regressions():
    for target in TARGETS:
        for path in _harness.regression_files(target):
            key = f"{target}/{path.name}"
            marks = ()
            if key in KNOWN:
                error, _, why = KNOWN[key]
                marks = (pytest.mark.xfail(strict=True, raises=error, reason=why),)
            yield pytest.param(target, path, id=key, marks=marks)


#: Replays a reproducer of a native crash or of an out-of-memory in a
#: subprocess, with the address space limited, so that a regression fails
#: this test instead of the test run (or the machine): running out of
#: memory anywhere (MemoryError, or std::bad_alloc from C++) is a failure
#: even where the code under test recovers from it.
_ISOLATED = """
import resource, sys
limit = 4 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.path.insert(0, {fuzz!r})
import {target}_fuzz as target
data = open({path!r}, "rb").read()
where = []

def trace(frame, event, arg):
    if event == "exception" and (issubclass(arg[0], MemoryError) or "bad_alloc" in str(arg[1])):
        where.append(f"{{frame.f_code.co_filename}}:{{frame.f_lineno}}")
    return trace

sys.settrace(trace)
target.one_input(data)
sys.settrace(None)
assert not where, "ran out of memory (4 GiB of address space) at " + ", ".join(where[:4])
"""


@pytest.mark.parametrize("target, path", list(_regressions()))
def test_regression(target, path):
    """A reproducer of a finding: the target's contract holds for it.
    Native crashes and out-of-memory findings (files named native-* and
    oom-*) replay in a subprocess (`_ISOLATED`)."""
    if path.name.startswith(("native-", "oom-")):
        code = _ISOLATED.format(fuzz=str(FUZZ), target=target, path=str(path))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{path} (exit status {done.returncode}):\n{done.stderr}"
        return
    module = importlib.import_module(f"{target}_fuzz")
    module.one_input(path.read_bytes())


def test_known_findings_have_reproducers():
    for key in KNOWN:
        assert (_harness.REGRESSIONS_DIR / key).is_file(), key


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_campaign(target, tmp_path):
    pytest.importorskip("atheris")
    script = FUZZ / f"{target}_fuzz.py"
    crashes = tmp_path / "crashes"
    known = [arg for key, (_, signature, _) in KNOWN.items() if key.startswith(f"{target}/")
             for arg in ("--known", signature)]
    done = subprocess.run(
        [sys.executable, str(script), "--seconds", str(SECONDS), "--crash-dir", str(crashes),
         "--notes-dir", str(tmp_path / "notes"), *known],
        cwd=tmp_path, capture_output=True, text=True, timeout=SECONDS + 900)
    log = "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                    if not line.startswith("INFO: Instrumenting"))
    found = sorted(crashes.iterdir()) if crashes.is_dir() else []
    if done.returncode != 0 or found:
        repro = "\n".join(f"  {f}\n  reproduce: python {script} {f}" for f in found)
        pytest.fail(f"fuzzing {target} for {SECONDS} s: exit status {done.returncode}, "
                    f"{len(found)} finding(s)\n{repro}\n"
                    "(add a fixed finding's reproducer to test/fuzz/regressions/"
                    f"{target}/)\n--- log (end) ---\n{log[-6000:]}")
    runs = re.search(r"stat::number_of_executed_units:\s*(\d+)", log)
    assert runs, f"no libFuzzer statistics in the log:\n{log[-3000:]}"
    stats = re.findall(r"#\d+\s+(?:INITED|DONE|pulse)\s+cov: (\d+) ft: (\d+)", log)
    assert stats and int(stats[-1][0]) > 0, f"no coverage was collected:\n{log[-3000:]}"
    minimum = MIN_RATE[target] * SECONDS
    assert int(runs.group(1)) >= minimum, (
        f"{target} ran {runs.group(1)} inputs in {SECONDS} s, fewer than {minimum}:\n"
        f"{log[-3000:]}")
