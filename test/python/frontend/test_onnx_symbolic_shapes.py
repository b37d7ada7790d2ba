"""Reshapes to targets computed at run time from Shape/Gather/Concat of
dynamic extents (how exported decoders split and merge heads): the importer
proves them collapses or expansions of symbolic extents (`batch*seq`) with
onnxruntime's symbolic shape inference, folds the static extents picked out
of a dynamic shape, computes the dynamic ones from the inputs' dimensions,
and one artifact runs every size."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import sits_mlir  # noqa: E402
from sits_mlir.errors import CompileError  # noqa: E402


def _const(name, values):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.INT64, [len(values)], values))


def _heads_model(path):
    """x [batch, seq, 64] -> [batch*seq, 64] -> (x 2) -> [batch, seq, 4, 16]
    -> transposed to [batch, 4, seq, 16], every target from Shape(x)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        _const("i0", [0]), _const("i1", [1]), _const("i2", [2]), _const("heads", [4]),
        helper.make_node("Gather", ["shape", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["s"], axis=0),
        helper.make_node("Gather", ["shape", "i2"], ["d"], axis=0),   # 64: static
        helper.make_node("Mul", ["b", "s"], ["bs"]),
        helper.make_node("Concat", ["bs", "d"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
        helper.make_node("Add", ["flat", "flat"], ["twice"]),
        helper.make_node("Div", ["d", "heads"], ["hd"]),
        helper.make_node("Concat", ["b", "s", "heads", "hd"], ["split_shape"], axis=0),
        helper.make_node("Reshape", ["twice", "split_shape"], ["split"]),
        helper.make_node("Transpose", ["split"], ["y"], perm=[0, 2, 1, 3]),
    ]
    graph = helper.make_graph(
        nodes, "heads",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, "seq", 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def test_reshapes_of_symbolic_extents(tmp_path):
    _heads_model(str(tmp_path / "heads.onnx"))
    model = sits_mlir.compile(str(tmp_path / "heads.onnx"), "cpu", tmp_path / "heads.sitsm",
                              threads=2).load()
    rng = np.random.default_rng(0)
    for batch, seq in [(2, 3), (1, 7), (3, 1)]:
        x = rng.standard_normal((batch, seq, 64)).astype(np.float32)
        (y,) = model.run(x=x)
        expected = (2 * x).reshape(batch, seq, 4, 16).transpose(0, 2, 1, 3)
        np.testing.assert_array_equal(y, expected)


def test_unprovable_reshape_reads_its_target_at_run_time(tmp_path):
    """A target whose extents come from data, not from shapes, is read when
    the model runs; one that does not fit fails the call."""
    from sits_mlir import runtime

    nodes = [helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")]
    graph = helper.make_graph(
        nodes, "data_shape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6]),
         helper.make_tensor_value_info("target", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "data.onnx"))
    m = sits_mlir.compile(str(tmp_path / "data.onnx"), "cpu", tmp_path / "data.sitsm").load()
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(m(x, np.array([3, 4])), x.reshape(3, 4))
    np.testing.assert_array_equal(m(x, np.array([-1, 2])), x.reshape(6, 2))
    with pytest.raises(runtime.InputOutOfRangeError, match="Reshape node 'reshape'"):
        m(x, np.array([5, 5]))
