"""The sits-run command line."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from runtime_helpers import ADD_ENTRY


def sits_run(*args, env=None):
    cmd = [sys.executable, "-m", "sits_mlir.tools.run", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


@pytest.fixture
def add_artifact(make_artifact):
    return make_artifact("add", [ADD_ENTRY])


def test_prints_outputs_and_latency(add_artifact, tmp_path):
    inputs = tmp_path / "in.npz"
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.savez(inputs, x=x, y=np.ones((2, 4), np.float32))
    r = sits_run(add_artifact, "--inputs", inputs, "--repeat", 5, "--threads", 2)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "entry point 'main' on cpu with 2 threads" in out
    assert "z: shape (2, 4) f32" in out
    assert "min 1  max 8  mean 4.5" in out
    assert "[1., 2., 3., 4., 5., 6., ...]" in out
    assert "latency over 5 runs: median" in out and " ms, min " in out


def test_positional_npz_and_saving(add_artifact, tmp_path):
    inputs, saved = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, np.ones((1, 4), np.float32), np.full((1, 4), 2, np.float32))
    r = sits_run(add_artifact, "--inputs", inputs, "--repeat", 1, "--save", saved)
    assert r.returncode == 0, r.stderr
    assert "latency over 1 run:" in r.stdout
    np.testing.assert_array_equal(np.load(saved)["z"], np.full((1, 4), 3, np.float32))


def test_info(add_artifact):
    r = sits_run(add_artifact, "--info")
    assert r.returncode == 0, r.stderr
    assert "entry point main (sits_entry_main)" in r.stdout
    assert "input  x: f32[?, 4]" in r.stdout and "output z: f32[?, 4]" in r.stdout


def test_errors_are_reported_not_raised(add_artifact, tmp_path):
    inputs = tmp_path / "bad.npz"
    np.savez(inputs, x=np.ones((2, 4), np.float64), y=np.ones((2, 4), np.float32))
    r = sits_run(add_artifact, "--inputs", inputs)
    assert r.returncode == 1
    assert "sits-run: error: input 'x' (#0) of entry point 'main' has dtype f64, expected f32" in r.stderr
    assert "Traceback" not in r.stderr
    corrupt = tmp_path / "corrupt.sitsm"
    data = bytearray(add_artifact.read_bytes())
    data[-3] ^= 1
    corrupt.write_bytes(bytes(data))
    r = sits_run(corrupt, "--inputs", inputs)
    assert r.returncode == 1 and "content hash mismatch" in r.stderr
    r = sits_run(add_artifact, "--repeat", 0)
    assert r.returncode == 2


@pytest.mark.skipif(shutil.which("sits-run") is None, reason="sits-run is not installed")
def test_installed_console_script(add_artifact, tmp_path):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.ones((1, 4), np.float32), y=np.ones((1, 4), np.float32))
    r = subprocess.run(["sits-run", str(add_artifact), "--inputs", str(inputs), "--repeat", "2"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "z: shape (1, 4) f32" in r.stdout
