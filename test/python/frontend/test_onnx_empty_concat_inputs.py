"""Concat inputs that are statically empty along the axis are not read.

Exported decoders with a partial rotary embedding split each head into a
rotated part and a pass-through part and concatenate them again; when the
rotary part covers the whole head, the pass-through slice is empty. Concat
skips such inputs, so their producers are not imported and the model
compiles (other empty tensors are still refused with the reason).
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

import sits_mlir

INT64_MAX = np.iinfo(np.int64).max


def _model(rot_end: int, pass_end: int):
    """y = concat(x[..., :rot_end] * 2, x[..., rot_end:pass_end]) over the
    last axis of x [2, s, 4, 8]."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("zero", [0]), ("rot", [rot_end]), ("end", [pass_end]), ("axis", [-1]))]
    inits.append(numpy_helper.from_array(np.array(2, np.float32), "two"))
    nodes = [h.make_node("Slice", ["x", "zero", "rot", "axis"], ["r"], name="rotary_part"),
             h.make_node("Mul", ["r", "two"], ["r2"], name="rotate"),
             h.make_node("Slice", ["x", "rot", "end", "axis"], ["p"], name="pass_part"),
             h.make_node("Concat", ["r2", "p"], ["y"], axis=-1, name="join")]
    graph = h.make_graph(nodes, "partial_rotary",
                         [h.make_tensor_value_info("x", TP.FLOAT, [2, "s", 4, 8])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [2, "s", 4, 8])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("pass_end", [8, INT64_MAX], ids=["end-8", "end-max"])
def test_whole_head_rotary_with_an_empty_pass_through(pass_end, tmp_path):
    m = sits_mlir.compile(_model(8, pass_end), output=tmp_path / "m.sitsm").load()
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(m(x), x * 2)


def test_partial_rotary_still_concatenates(tmp_path):
    m = sits_mlir.compile(_model(6, INT64_MAX), output=tmp_path / "m.sitsm").load()
    x = np.random.default_rng(1).standard_normal((2, 5, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(m(x), np.concatenate([x[..., :6] * 2, x[..., 6:]], -1))


def test_an_empty_tensor_read_by_other_ops_is_still_refused():
    model = _model(8, 8)
    # The empty pass-through part is also an output: it must be computed.
    model.graph.output.append(h.make_tensor_value_info("p", TP.FLOAT, [2, "s", 4, 0]))
    with pytest.raises(sits_mlir.CompileError, match="empty tensors are not supported"):
        sits_mlir.compile(model)
