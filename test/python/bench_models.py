"""Test fixtures over the benchmark models (`test/bench/benchmark_models.py`):
`model_path(name) -> (onnx path, inputs)`, exported once per test session,
and onnxruntime as the reference.
"""

from __future__ import annotations

import os
import sys

import pytest

_BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "bench")
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)
from bench_compare import relative_error  # noqa: E402,F401  (re-exported for the tests)

_CACHE: dict = {}


@pytest.fixture(scope="session")
def model_path(tmp_path_factory):
    """`model_path(name)` -> (path, inputs): exported once per session.
    torch (the exporter) is imported by the first test that asks, not by
    every test run."""
    pytest.importorskip("torch")
    from benchmark_models import export

    root = tmp_path_factory.mktemp("onnx_models")

    def get(name):
        if name not in _CACHE:
            try:
                _CACHE[name] = export(name, str(root))
            except ImportError as error:  # MiniLM's weights or transformers
                pytest.skip(f"cannot export {name}: {error}")
        return _CACHE[name]
    return get


def run_onnxruntime(path_or_model, feeds):
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    src = path_or_model if isinstance(path_or_model, str) else path_or_model.SerializeToString()
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)
