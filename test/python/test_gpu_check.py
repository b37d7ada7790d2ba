"""The split GPU check (test/bench/gpu_check.py) and the runtime-only
package it runs with on a GPU host (tools/dev/runtime_package.sh), driven
here for the CPU: a bundle compiled for `cpu`, run on the `cpu` device by
a Python that imports `sits_mlir.runtime` from the runtime-only package."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

# Builds the runtime once more and compiles a decoder.
pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "test" / "bench" / "gpu_check.py"


@pytest.fixture(scope="module")
def runtime_package(tmp_path_factory):
    out = tmp_path_factory.mktemp("runtime_only")
    done = subprocess.run([str(ROOT / "tools" / "dev" / "runtime_package.sh"), str(out),
                           sys.executable], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle")
    done = subprocess.run([sys.executable, str(CHECK), "prepare", str(out), "--target", "cpu",
                           "--cases", "mm_f16_a,llama,llama_paged", "--compress"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _run(package, bundle, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(package)
    return subprocess.run([sys.executable, str(CHECK), "run", str(bundle), "--device", "cpu",
                           *args], capture_output=True, text=True, timeout=600, env=env,
                          cwd=package)


def test_runtime_package_needs_no_compiler(runtime_package, tmp_path):
    """The package imports the runtime from itself, not from the installed
    sits_mlir, and has none of MLIR's native libraries."""
    import sits_mlir

    art = sits_mlir.compile(_add_model(tmp_path), output=tmp_path / "add.sitsm")
    code = ("import sys, numpy as np\n"
            "from sits_mlir import runtime\n"
            "import sits_mlir\n"
            "assert sits_mlir.__file__.startswith(sys.argv[1]), sits_mlir.__file__\n"
            "try:\n"
            "    import sits_mlir._mlir_libs._sits\n"
            "    raise SystemExit('the compiler is importable')\n"
            "except ImportError:\n"
            "    pass\n"
            "m = runtime.load(sys.argv[2])\n"
            "print(m(np.arange(4, dtype=np.float32)).tolist())\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(runtime_package)
    done = subprocess.run([sys.executable, "-c", code, str(runtime_package), str(art.path)],
                          capture_output=True, text=True, env=env, cwd=runtime_package)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == [0.0, 2.0, 4.0, 6.0]


def _add_model(tmp_path):
    from onnx import TensorProto as TP
    from onnx import helper as h

    graph = h.make_graph([h.make_node("Add", ["x", "x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", TP.FLOAT, [4])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [4])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_bundle_runs_with_the_runtime_only(runtime_package, bundle):
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert [c["name"] for c in manifest["cases"]] == ["mm_f16_a", "llama", "llama_paged"]
    assert (bundle / "llama.sitsm.xz").exists() and not (bundle / "llama.sitsm").exists()
    paged = manifest["cases"][2]
    assert paged["weights_bytes"] > 1_000_000
    done = _run(runtime_package, bundle, "--repeat", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()
            if line.split() and line.split()[0] in ("mm_f16_a", "llama", "llama_paged")}
    assert rows["mm_f16_a"][-1] == "ok" and rows["llama"][-1] == "ok"
    assert float(rows["llama"][1]) < 1e-3  # relative error over the prefill and 8 steps
    # The paged decoder served at batch 1, 8 and 32, every token checked.
    assert rows["llama_paged"][-1] == "ok"
    assert re.search(r"llama_paged: ok \(b1 [\d.]+ tok/s[^;]*; b8 [\d.]+ tok/s[^;]*; "
                     r"b32 [\d.]+ tok/s", done.stdout), done.stdout


def test_paged_tokens_that_depart_fail_the_check(runtime_package, bundle, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in bundle.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    data = dict(np.load(broken / "llama_paged.npz"))
    data["c0.out.0"][5, 3] += 1
    np.savez(broken / "llama_paged.npz", **data)
    done = _run(runtime_package, broken, "--check-only", "--cases", "llama_paged")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "batch 8: sequence 5 departs from the CPU engine's tokens at step 3" in done.stdout


def test_a_wrong_result_fails_the_check(runtime_package, bundle, tmp_path):
    """Expected outputs off by 5 % fail the case, and the check exits 1
    naming it."""
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in bundle.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    data = dict(np.load(broken / "mm_f16_a.npz"))
    data["c0.out.0"] = data["c0.out.0"] * 1.05
    np.savez(broken / "mm_f16_a.npz", **data)
    done = _run(runtime_package, broken, "--check-only")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "failed: mm_f16_a" in done.stdout
    assert "relative error" in done.stdout
