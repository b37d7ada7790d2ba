"""The ONNX backend node tests (onnx.backend.test, kind "node") against the
expected-status lists in test/conformance: every case listed as pass must
pass (every input fed at run time), one listed as frozen must pass at least
with its parameter inputs frozen to constants (which is not counted as a
pass), a case that does better must be promoted, and every case must be
listed. Static mode compiles each model with its own shapes; dynamic mode
first marks every input dimension dynamic.

The cases run once per mode in worker processes (one per core) with the
artifact cache of sits_mlir.testing.conformance; each case is then one test.
"""

from __future__ import annotations

import os
import pathlib

import onnx
import pytest

from sits_mlir.testing import conformance

pytestmark = pytest.mark.conformance

LISTS = pathlib.Path(__file__).resolve().parents[2] / "conformance"
MODES = ("static", "dynamic")

if onnx.__version__ != conformance.ONNX_VERSION:
    pytest.skip(f"the expected-status lists are for onnx {conformance.ONNX_VERSION}; "
                f"onnx {onnx.__version__} has other cases", allow_module_level=True)


def expected(mode: str) -> dict[str, tuple[str, str]]:
    return conformance.read_expected(str(LISTS / f"onnx-node-{mode}.txt"))


EXPECTED = {mode: expected(mode) for mode in MODES}
_RESULTS: dict[str, dict] = {}


def results(mode: str) -> dict:
    if mode not in _RESULTS:
        jobs = int(os.environ.get("SITS_TEST_JOBS", "0"))
        _RESULTS[mode] = conformance.run_cases(sorted(EXPECTED[mode]), mode=mode, jobs=jobs)
    return _RESULTS[mode]


@pytest.mark.parametrize("mode", MODES)
def test_every_case_is_listed(mode):
    cases = set(conformance.load_cases())
    listed = set(EXPECTED[mode])
    assert not cases - listed, f"unlisted cases: {sorted(cases - listed)[:10]}"
    assert not listed - cases, f"listed cases that do not exist: {sorted(listed - cases)[:10]}"


@pytest.mark.parametrize("mode,name", [(m, n) for m in MODES for n in sorted(EXPECTED[m])])
def test_case(mode, name):
    r = results(mode)[name]
    want = EXPECTED[mode][name][0]
    promote = (f"{name} ({mode}) is {r.status} now: promote it "
               f"(python -m sits_mlir.testing.conformance --mode {mode} "
               f"--update test/conformance/onnx-node-{mode}.txt)")
    if want == "pass":
        assert r.status == "pass", f"{name} ({mode}) regressed to {r.status}: {r.reason}"
        return
    if want == "frozen":
        # Passes with its parameter inputs frozen; not a pass.
        assert r.status in ("pass", "frozen"), (
            f"{name} ({mode}) regressed to {r.status}: {r.reason}")
        assert r.status == "frozen", promote
    else:
        assert r.status not in ("pass", "frozen"), promote
    pytest.xfail(f"{r.status}: {r.reason}")
