"""The ONNX backend's uncached artifacts live exactly as long as their rep."""

import gc
import glob
import os
import tempfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from sits_mlir.errors import CompileError
from sits_mlir.testing.onnx_backend import SitsBackend


def _model(op: str = "Relu") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def backend_tmp(tmp_path, monkeypatch):
    """Points tempfile at a fresh directory so the test sees only its own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _dirs(root) -> list[str]:
    return glob.glob(os.path.join(root, "sits-backend-*"))


def test_uncached_artifact_is_removed_with_its_rep(backend_tmp):
    rep = SitsBackend.prepare(_model())
    assert [os.path.dirname(rep.artifact)] == _dirs(backend_tmp)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(rep.run([x])[0], np.maximum(x, 0))
    del rep
    gc.collect()
    assert _dirs(backend_tmp) == []


def test_failed_compile_leaves_nothing(backend_tmp):
    with pytest.raises(CompileError):
        SitsBackend.prepare(_model("NoSuchOp"))
    assert _dirs(backend_tmp) == []
