"""Graph outputs declared with other extents than the graph computes.

Exporting with `dynamic_axes` on the inputs only leaves the outputs
declared with the example's static extents. The code must follow what the
graph computes from the inputs it is given (as onnxruntime does), never
the declaration: trusting it read and wrote past the buffers."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h, numpy_helper

import sits_mlir
from bench_models import run_onnxruntime


def _model(nodes, inputs, outputs, inits=(), out_type=TP.FLOAT):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info(n, out_type, s) for n, s in outputs],
                         list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_matmul_output_follows_the_dynamic_batch(tmp_path):
    w = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(8, 4), "w")
    model = _model([h.make_node("MatMul", ["x", "w"], ["y"])],
                   [("x", TP.FLOAT, ["batch", 8])], [("y", [2, 4])], [w])
    art = sits_mlir.compile(model, output=tmp_path / "m.sitsm")
    out = art.manifest["entry_points"][0]["args"][-1]
    assert out["shape"] == [-1, 4] and out["dim_names"] == ["batch", None]
    m = art.load()
    for batch in (1, 2, 3, 17):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        np.testing.assert_allclose(m(x), x @ numpy_helper.to_array(w), rtol=1e-5)


def test_gather_output_follows_the_dynamic_indices(tmp_path):
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    model = _model([h.make_node("Gather", ["table", "ids"], ["y"])],
                   [("ids", TP.INT64, ["batch", "seq"])], [("y", [1, 2, 4])], [table])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    for shape in [(1, 2), (3, 5), (2, 1)]:
        ids = np.random.default_rng(0).integers(0, 10, shape)
        np.testing.assert_array_equal(m(ids), numpy_helper.to_array(table)[ids])


def test_attention_block_exported_with_dynamic_inputs_only(tmp_path, model_path):
    """Two GPT-2 blocks exported with `dynamic_axes` on the input alone:
    every output is declared [1, 128, ...]; other batches and lengths must
    match onnxruntime."""
    torch = pytest.importorskip("torch")
    import warnings

    model_path("gpt_prefill")  # puts test/bench on sys.path
    from benchmark_models import build_model

    module, inputs, in_names, out_names = build_model("gpt_prefill")
    path = tmp_path / "gpt.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(inputs.values()), str(path), input_names=in_names,
                          output_names=out_names, opset_version=17, dynamo=False,
                          dynamic_axes={"x": {0: "batch", 1: "seq"}})
    m = sits_mlir.compile(str(path), output=tmp_path / "m.sitsm").load()
    for shape in [(2, 16, 768), (1, 7, 768)]:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        outs = m(x)
        for got, want in zip(outs, run_onnxruntime(str(path), {"x": x})):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_declared_extent_the_graph_contradicts_is_refused():
    model = _model([h.make_node("Relu", ["x"], ["y"])], [("x", TP.FLOAT, [3, 8])], [("y", [4, 8])])
    with pytest.raises(sits_mlir.CompileError,
                       match="'y' is declared with extent 4 in dimension 0 but the graph "
                             "computes 3"):
        sits_mlir.compile(model)


def test_declared_rank_the_graph_contradicts_is_refused():
    model = _model([h.make_node("Relu", ["x"], ["y"])], [("x", TP.FLOAT, ["n", 8])],
                   [("y", ["n", 8, 1])])
    with pytest.raises(sits_mlir.CompileError, match="'y' is declared with rank 3 but computed "
                                                     "with rank 2"):
        sits_mlir.compile(model)
