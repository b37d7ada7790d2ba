"""The compiled code never writes into the caller's input arrays.

The runtime passes contiguous inputs aligned to their elements to the code
without copying them, so an op that bufferization could run in place on its operand (a
scatter, an elementwise op on an input) must write into a buffer of its
own (sits-read-only-inputs); only an argument the model declares it
updates (the paged KV pool) is written.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

import sits_mlir


def _placed(values: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `values` whose data starts `offset` bytes past a 64-byte
    boundary (a multiple of its element size), which the runtime passes to
    the code without staging it."""
    raw = np.empty(values.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    assert out.ctypes.data % 64 == offset
    return out


def _model(nodes, inputs, outputs):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])


CASES = {
    "scatter_nd": ([h.make_node("ScatterND", ["x", "i", "u"], ["y"])],
                   [("x", TP.FLOAT, [4, 8]), ("i", TP.INT64, [2, 1]), ("u", TP.FLOAT, [2, 8])],
                   lambda x, i, u: _scatter_nd(x, i, u)),
    "scatter_elements": ([h.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)],
                         [("x", TP.FLOAT, [4, 8]), ("i", TP.INT64, [2, 8]),
                          ("u", TP.FLOAT, [2, 8])],
                         lambda x, i, u: _scatter_elements(x, i, u)),
    "add_relu": ([h.make_node("Add", ["x", "u"], ["s"]), h.make_node("Relu", ["s"], ["y"])],
                 [("x", TP.FLOAT, [4, 8]), ("u", TP.FLOAT, [4, 8])],
                 lambda x, u: np.maximum(x + u, 0)),
}


def _scatter_nd(x, i, u):
    y = x.copy()
    y[i[:, 0]] = u
    return y


def _scatter_elements(x, i, u):
    y = x.copy()
    np.put_along_axis(y, i, u, axis=0)
    return y


@pytest.mark.parametrize("offset", [0, 8], ids=["cache-line", "8-bytes-past"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_unstaged_inputs_are_left_unchanged(case, offset, tmp_path):
    nodes, inputs, reference = CASES[case]
    model = _model(nodes, inputs, [("y", TP.FLOAT, [4, 8])])
    onnx.checker.check_model(model)
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    rng = np.random.default_rng(0)
    args = []
    for name, _, shape in inputs:
        if name == "i":
            value = np.array([[3], [1]]) if case == "scatter_nd" else \
                np.stack([rng.permutation(4)[:2] for _ in range(8)], 1)
            args.append(_placed(value.astype(np.int64), offset))
        else:
            args.append(_placed(rng.standard_normal(shape).astype(np.float32), offset))
    before = [a.copy() for a in args]
    for _ in range(2):  # a second call sees the same inputs
        np.testing.assert_allclose(m(*args), reference(*before), rtol=1e-6)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
