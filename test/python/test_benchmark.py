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


PEERS = os.path.join(os.path.dirname(RUN), "llm_peers.py")


def test_decode_benchmark_of_record_runs_sits_and_onnxruntime(tmp_path):
    """llm_peers.py on a toy Llama: SITS's engine and onnxruntime decode,
    SITS's greedy tokens are transformers', and a peer whose package is
    missing is named as skipped rather than failing the run."""
    out = tmp_path / "peers.json"
    done = subprocess.run([sys.executable, PEERS, "--shape", "custom", "--hidden", "64",
                           "--heads", "4", "--kv-heads", "2", "--vocab", "512",
                           "--engines", "sits,ort,genai-fp32", "--prompt-len", "8",
                           "--new-tokens", "4", "--batches", "1,2", "--repeat", "1",
                           "--workdir", str(tmp_path / "work"), "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert len(report["reference"]) == 4 and report["bandwidth_gbs"] > 0
    for engine in ("sits", "ort"):
        for batch in ("1", "2"):
            row = report["rows"][engine][batch]
            assert row["decode_tps"] > 0 and row["ttft_s"] > 0 and row["peak_rss"] > 0, row
        assert report["rows"][engine]["1"]["tokens"] == report["reference"], engine
    assert "genai-fp32" in report["rows"] or any(
        n.startswith("genai-fp32 skipped") for n in report["notes"])
    assert "| sits | fp32 |" in done.stdout


def test_decode_benchmark_of_record_rejects_unknown_engines(tmp_path):
    done = subprocess.run([sys.executable, PEERS, "--engines", "sits,vllm",
                           "--workdir", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "unknown engines ['vllm']" in done.stderr
