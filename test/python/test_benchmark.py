"""The benchmark command runs end to end (a smoke run on the MLP: one
interleaved repetition; the numbers themselves are the benchmark's job)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

# Runs the benchmark command, which exports and compiles models.
pytestmark = pytest.mark.slow

RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "bench", "run.py")


def test_benchmark_reports_every_column(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, RUN, "--models", "mlp", "--repeat", "1", "--warmup", "0",
                           "--workdir", str(tmp_path), "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "geometric mean SITS/ORT ratio" in done.stdout
    report = json.loads(out.read_text())
    assert report["threads"] == 2
    (row,) = report["results"]
    assert row["model"] == "mlp"
    assert row["max_rel_error"] < 1e-4
    for key in ("sits_ms", "ort_ms", "ratio", "compile_s"):
        assert row[key] > 0, key
    # Serving the MLP holds its 100 MB of fp32 weights at least once.
    assert row["sits_peak_mib"] > 90 and row["compile_peak_mib"] > 90
    assert (tmp_path / "mlp.sitsm").stat().st_size > 100e6


def test_benchmark_rejects_bad_arguments():
    done = subprocess.run([sys.executable, RUN, "--repeat", "0"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "--threads, --repeat and --rounds must be at least 1" in done.stderr
