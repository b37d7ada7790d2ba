"""Weights stored inside the .onnx file (no external data) are read where
they lie, as external data is: the protobuf parsed at import holds the graph
and the small tensors, and each big initializer becomes a reference to its
own bytes in the model file, mapped, not copied three times (file read,
parse, array). The model means exactly what it means read in full."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

from sits_mlir.errors import CompileError
from sits_mlir.frontend.onnx import _load, import_model
from sits_mlir.testing.reference import evaluate


def _model():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((128, 256)).astype(np.float32)        # 128 KiB: mapped
    small = rng.standard_normal((256,)).astype(np.float32)          # 1 KiB: parsed
    half = rng.standard_normal((256, 128)).astype(np.float16)       # 64 KiB: mapped
    graph = h.make_graph(
        [h.make_node("MatMul", ["x", "big"], ["y"]),
         h.make_node("Add", ["y", "small"], ["z"]),
         h.make_node("Cast", ["z"], ["z16"], to=TP.FLOAT16),
         h.make_node("MatMul", ["z16", "half"], ["out"])],
        "inline", [h.make_tensor_value_info("x", TP.FLOAT, ["n", 128])],
        [h.make_tensor_value_info("out", TP.FLOAT16, ["n", 128])],
        [numpy_helper.from_array(big, "big"), numpy_helper.from_array(small, "small"),
         numpy_helper.from_array(half, "half")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    model.doc_string = "fields after the graph are kept"
    return model


def test_big_inline_weights_become_references_to_the_file(tmp_path):
    model = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    proto, _ = _load.read_model(str(path))
    inits = {t.name: t for t in proto.graph.initializer}
    assert inits["small"].data_location == TP.DEFAULT and inits["small"].raw_data
    for name in ("big", "half"):
        t = inits[name]
        assert t.data_location == TP.EXTERNAL and not t.raw_data
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == "m.onnx"
        with open(path, "rb") as f:
            f.seek(int(info["offset"]))
            stored = f.read(int(info["length"]))
        original = next(i for i in model.graph.initializer if i.name == name)
        assert stored == original.raw_data
    assert proto.doc_string == model.doc_string
    assert os.path.getsize(path) > 3 * proto.ByteSize()

    loaded = _load.load(str(path))
    from sits_mlir.frontend.onnx._graph import Graph

    g = Graph(loaded)
    big = g.const("big")
    assert not big.flags.owndata  # a view of the mapped file
    np.testing.assert_array_equal(big, numpy_helper.to_array(model.graph.initializer[0]))


def test_imports_as_the_model_read_in_full(tmp_path):
    model = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = np.random.default_rng(1).standard_normal((3, 128)).astype(np.float32)
    from_file = evaluate(import_model(str(path)), {"x": x})
    from_bytes = evaluate(import_model(model.SerializeToString()), {"x": x})
    for a, b in zip(from_file, from_bytes):
        np.testing.assert_array_equal(a, b)


def test_symlinked_model_is_read_in_full(tmp_path):
    model = _model()
    real = tmp_path / "real.onnx"
    onnx.save(model, real)
    link = tmp_path / "link.onnx"
    link.symlink_to(real)
    proto, _ = _load.read_model(str(link))
    assert all(t.data_location == TP.DEFAULT for t in proto.graph.initializer)


@pytest.mark.parametrize("cut", [1, 7, 100, 40000])
def test_truncated_model_is_a_compile_error(tmp_path, cut):
    path = tmp_path / "m.onnx"
    data = _model().SerializeToString()
    path.write_bytes(data[:-cut])
    with pytest.raises(CompileError):
        import_model(str(path))
