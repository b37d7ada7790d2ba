"""The README's main job: the bundled model compiles, runs, matches
onnxruntime and both latencies are printed."""

import subprocess
import sys

import numpy as np
import pytest

# Builds the 25M-parameter bundled model and runs the README's main job.
pytestmark = pytest.mark.slow


def test_bundled_model_is_deterministic():
    from sits_mlir.examples import mlp

    (m1, x1), (m2, x2) = mlp(), mlp()
    assert m1.SerializeToString() == m2.SerializeToString()
    np.testing.assert_array_equal(x1["x"], x2["x"])
    ops = [n.op_type for n in m1.graph.node]
    assert ops.count("Gemm") == 3 and ops.count("Erf") == 2


def test_main_job(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sits_mlir.demo", "--repeat", "3"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "outputs match onnxruntime" in out.stdout
    assert "SITS" in out.stdout and "onnxruntime" in out.stdout and "ratio" in out.stdout
