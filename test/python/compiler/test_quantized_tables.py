"""Embedding tables under quantized weights: with `precision="int8"` or
`"int4"`, a large float table that a Gather reads rows of at run time is
stored as INT8 codes with a scale per row and widened after the gather. The
artifact holds a quarter of the table's fp32 bytes, each gathered element is
within half a step of the float one, an out-of-range id is still refused,
and fp32 compiles (and small or constant-indexed tables) are unchanged."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import sits_mlir  # noqa: E402
from sits_mlir.frontend.onnx import import_model  # noqa: E402
from sits_mlir.runtime.errors import InputOutOfRangeError  # noqa: E402

# 1,100 x 1,024: just over the 2^20 elements a table needs to be quantized.
V, D = 1100, 1024


def _model(table, dtype=TP.FLOAT):
    """ids [B, T] -> Gather(table) (through a Cast for a half-precision
    table) -> [B, T, D] in fp32."""
    n = h.make_node
    nodes = [n("Gather", ["table32" if dtype != TP.FLOAT else "table", "ids"], ["x"])]
    if dtype != TP.FLOAT:
        nodes.insert(0, n("Cast", ["table"], ["table32"], to=TP.FLOAT))
    graph = h.make_graph(
        nodes, "embed", [h.make_tensor_value_info("ids", TP.INT64, ["batch", "seq"])],
        [h.make_tensor_value_info("x", TP.FLOAT, ["batch", "seq", D])],
        [numpy_helper.from_array(table, "table")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def _table(dtype=np.float32):
    rng = np.random.default_rng(0)
    t = rng.standard_normal((V, D)).astype(np.float32)
    t[7] = 0  # an all-zero row (scale 1, codes 0)
    t[9] *= 1e-3
    return t.astype(dtype)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = {}
    table = _table()
    for precision in ("fp32", "int8", "int4"):
        path = tmp_path_factory.mktemp(precision) / "embed.sitsm"
        out[precision] = sits_mlir.compile(_model(table), "cpu", path, precision=precision,
                                           threads=1)
    return table, out


def test_quantized_rows_are_within_half_a_step(compiled):
    table, artifacts = compiled
    ids = np.array([[0, 7, 9, V - 1], [3, 3, 500, 1]], np.int64)
    exact = artifacts["fp32"].load()(ids)
    np.testing.assert_array_equal(exact, table[ids])
    step = np.abs(table).max(axis=1) / 127
    for precision in ("int8", "int4"):
        got = artifacts[precision].load()(ids)
        err = np.abs(got - table[ids])
        assert np.all(err <= step[ids][..., None] / 2 * (1 + 1e-6)), precision
        assert np.all(got[0, 1] == 0)
        assert err.max() > 0  # quantized, not the float rows


def test_the_artifact_holds_int8_rows(compiled):
    table, artifacts = compiled
    fp32 = os.path.getsize(artifacts["fp32"].path)
    assert fp32 > table.nbytes
    for precision in ("int8", "int4"):
        size = os.path.getsize(artifacts[precision].path)
        # Codes (a byte per element) and a scale per row, no float copy.
        assert table.size + V * 4 < size < table.nbytes / 3, precision


def test_out_of_range_ids_are_refused(compiled):
    _, artifacts = compiled
    model = artifacts["int8"].load()
    with pytest.raises(InputOutOfRangeError, match="index of 'ids'"):
        model(np.array([[1, V]], np.int64))


def test_half_precision_and_small_tables():
    """An fp16 table (kept narrow) is quantized from its stored values; a
    table at or under the limit, a constant index and fp32 compiles are
    left as they are."""
    big16 = _table(np.float16)
    text = import_model(_model(big16, TP.FLOAT16), quantize_tables=True).module \
        .operation.get_asm(large_elements_limit=16)
    assert "tensor<1100x1024xi8>" in text and "tensor<1100x1xf32>" in text
    assert "tensor<1100x1024xf16>" not in text
    small = _table()[:1024]  # 2^20 elements
    text = import_model(_model(small), quantize_tables=True).module \
        .operation.get_asm(large_elements_limit=16)
    assert "xi8>" not in text
    text = import_model(_model(_table())).module.operation.get_asm(large_elements_limit=16)
    assert "xi8>" not in text
