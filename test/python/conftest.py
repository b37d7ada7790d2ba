import pytest

from sits_mlir import ir


@pytest.fixture
def ctx():
    """A fresh context with an unknown default location."""
    with ir.Context() as context, ir.Location.unknown(context):
        yield context



# `model_path(name) -> (onnx path, inputs)`: the benchmark models (and
# MiniLM), exported once per session, for every test directory.
from bench_models import model_path  # noqa: E402,F401
