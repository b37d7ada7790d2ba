"""Repeated layers imported once (`_layers`, `import_model(shared_layers=)`):
the module is the one the node-by-node import builds, ops named by their
own layer's node, while only one layer is inferred and emitted."""

import collections
import contextlib
import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from ir_helpers import module_summary  # noqa: E402
from sits_mlir import ir  # noqa: E402
from sits_mlir.frontend.onnx import _layers, _load, _without_converter, import_model  # noqa: E402
from sits_mlir.frontend.onnx._importer import Importer  # noqa: E402

HIDDEN, FFN = 16, 32


def _stack(layers: int, *, seed: int = 0, transpose_weights: bool = False,
           skip_from: int = 0, shapes=None, gather: bool = False) -> onnx.ModelProto:
    """A residual stack over [batch, seq, HIDDEN], 19 nodes per layer: an
    RMSNorm written out, a gated MLP, a reshape into heads and back (its
    shape a per-layer initializer), and a per-layer state (a graph input
    and output, like a KV cache). `transpose_weights` stores the down
    projection transposed behind a Transpose node; `skip_from` >= 2 makes
    layer k read layer k-2's result too; `shapes` gives per-layer reshape
    targets; `gather` adds a row of a per-layer table picked by the graph
    input `ids` (a run-time index check in every layer)."""
    rng = np.random.default_rng(seed)
    nodes, inits, inputs, outputs = [], [], [], []

    def init(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(name, *shape):
        return init(name, (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32))

    inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", HIDDEN]))
    if gather:
        inputs.append(helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]))
    h = "x"
    hist = ["x"]
    for i in range(layers):
        p = f"l{i}."
        inputs.append(helper.make_tensor_value_info(f"state{i}", TensorProto.FLOAT,
                                                    ["batch", "seq", HIDDEN]))
        outputs.append(helper.make_tensor_value_info(f"new_state{i}", TensorProto.FLOAT,
                                                     ["batch", "seq", HIDDEN]))
        if transpose_weights:
            nodes.append(helper.make_node("Transpose", [weight(p + "down_t", HIDDEN, FFN)],
                                          [p + "down"], perm=[1, 0]))
            down = p + "down"
        else:
            down = weight(p + "down", FFN, HIDDEN)
        heads = shapes[i] if shapes else [0, 0, 2, HIDDEN // 2]
        x_in = h
        if skip_from and i >= skip_from:
            nodes.append(helper.make_node("Add", [h, hist[-2]], [p + "skip"]))
            x_in = p + "skip"
        if gather:
            nodes += [helper.make_node("Gather", [weight(p + "table", 16, HIDDEN), "ids"],
                                       [p + "row"], axis=0),
                      helper.make_node("Add", [x_in, p + "row"], [p + "xr"])]
            x_in = p + "xr"
        nodes += [
            helper.make_node("Pow", [x_in, init(p + "two", np.float32(2))], [p + "sq"]),
            helper.make_node("ReduceMean", [p + "sq"], [p + "ms"], axes=[-1], keepdims=1),
            helper.make_node("Add", [p + "ms", init(p + "eps", np.float32(1e-6))], [p + "mse"]),
            helper.make_node("Sqrt", [p + "mse"], [p + "rms"]),
            helper.make_node("Div", [x_in, p + "rms"], [p + "nx"]),
            helper.make_node("Mul", [p + "nx", init(p + "g", (1 + 0.1 * rng.standard_normal(
                HIDDEN)).astype(np.float32))], [p + "n"]),
            helper.make_node("MatMul", [p + "n", weight(p + "gate", HIDDEN, FFN)], [p + "a"]),
            helper.make_node("Sigmoid", [p + "a"], [p + "sa"]),
            helper.make_node("Mul", [p + "a", p + "sa"], [p + "silu"]),
            helper.make_node("MatMul", [p + "n", weight(p + "up", HIDDEN, FFN)], [p + "u"]),
            helper.make_node("Mul", [p + "silu", p + "u"], [p + "gu"]),
            helper.make_node("MatMul", [p + "gu", down], [p + "d"]),
            helper.make_node("Reshape", [p + "d", init(p + "heads", np.array(heads, np.int64))],
                             [p + "dh"]),
            helper.make_node("Transpose", [p + "dh"], [p + "dt"], perm=[0, 2, 1, 3]),
            helper.make_node("Transpose", [p + "dt"], [p + "db"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [p + "db", init(p + "flat", np.array([0, 0, -1], np.int64))],
                             [p + "df"]),
            helper.make_node("Add", [x_in, p + "df"], [p + "h"]),
            helper.make_node("Add", [f"state{i}", p + "h"], [f"new_state{i}"]),
            helper.make_node("Mul", [p + "h", init(p + "half", np.float32(0.5))], [p + "out"]),
        ]
        h = p + "out"
        hist.append(h)
    nodes.append(helper.make_node("MatMul", [h, weight("head", HIDDEN, 8)], ["y"]))
    outputs.insert(0, helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 8]))
    graph = helper.make_graph(nodes, "stack", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _plan(model):
    return _layers.find_layers(model.graph)


def _feeds(layers, batch=2, seq=3, seed=1, gather=False):
    rng = np.random.default_rng(seed)
    feeds = {"x": rng.standard_normal((batch, seq, HIDDEN)).astype(np.float32)}
    if gather:
        feeds["ids"] = rng.integers(0, 16, (batch, seq)).astype(np.int64)
    for i in range(layers):
        feeds[f"state{i}"] = rng.standard_normal((batch, seq, HIDDEN)).astype(np.float32)
    return feeds


def test_finds_every_layer():
    plan = _plan(_stack(6))
    assert plan is not None and plan.count * plan.period >= 5 * 19
    kinds = collections.Counter(s.kind for s in plan.slots)
    assert kinds["carried"] >= 1 and kinds["varying"] >= 4 and kinds["constant"] >= 1


@pytest.mark.parametrize("layers", [3, 8])
def test_same_module_as_node_by_node(layers):
    model = _stack(layers)
    with ir.Context():
        loaded = _load.load(model, expand=_without_converter, layers=True)
        assert loaded.layers is not None
        # Only the prefix, one layer and the suffix are analysed.
        assert len(loaded.model.graph.node) < len(model.graph.node) - (layers - 2) * 19
        shared = import_model(model)
        flat = import_model(model, shared_layers=False)
        assert [(s.name, s.shape, s.dim_names) for s in shared.inputs] == \
            [(s.name, s.shape, s.dim_names) for s in flat.inputs]
        assert [(s.name, s.shape, s.dim_names) for s in shared.outputs] == \
            [(s.name, s.shape, s.dim_names) for s in flat.outputs]
        assert shared.shared_layers is not None and shared.shared_layers[0] >= layers - 1
        assert flat.shared_layers is None
        text = str(shared.module)
        assert "call @" not in text and "sits.node_names" not in text
        ops_shared, locs_shared = module_summary(shared.module)
        ops_flat, locs_flat = module_summary(flat.module)
    assert ops_shared == ops_flat
    # Every op carries its own layer's node name.
    assert locs_shared == locs_flat
    assert any("l5." in loc for loc in locs_shared) or layers < 6


@pytest.mark.parametrize("gather", [False, True])
def test_outputs_match_reference(tmp_path, gather):
    import sits_mlir

    model = _stack(4, gather=gather)
    feeds = _feeds(4, gather=gather)
    expected = ReferenceEvaluator(model).run(None, feeds)
    with ir.Context():
        assert _load.load(model, expand=_without_converter, layers=True).layers is not None
        ops_shared, locs_shared = module_summary(import_model(model).module)
        ops_flat, locs_flat = module_summary(import_model(model, shared_layers=False).module)
    assert (ops_shared, locs_shared) == (ops_flat, locs_flat)
    artifact = sits_mlir.compile(model, "cpu", tmp_path / "stack.sitsm", threads=2)
    run = artifact.load()
    got = run(**feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(expected)
    for have, want in zip(got, expected):
        np.testing.assert_allclose(np.asarray(have), want, rtol=1e-4, atol=1e-5)
    if not gather:
        # Progress output says the layers were imported as one.
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            sits_mlir.compile(model, "cpu", tmp_path / "again.sitsm", threads=2, progress=True)
        assert "repeated layers of 19 nodes imported as one" in err.getvalue()
    if gather:
        # Every layer's index check still runs: an index out of the table
        # is refused, not read.
        bad = dict(feeds, ids=np.full_like(feeds["ids"], 16))
        with pytest.raises(Exception, match="(?i)index|range|bound"):
            run(**bad)


def test_folded_weights_fall_back_to_node_by_node():
    # A Transpose of each layer's weight folds at import: what the first
    # layer folds would hold for the others, so the layers are not shared.
    model = _stack(4, transpose_weights=True)
    with ir.Context():
        loaded = _load.load(model, expand=_without_converter, layers=True)
        if loaded.layers is not None:
            with pytest.raises(_layers.NoLayers):
                Importer(loaded).check_layers()
        ops_shared, _ = module_summary(import_model(model).module)
        ops_flat, _ = module_summary(import_model(model, shared_layers=False).module)
    assert ops_shared == ops_flat


def test_layer_reading_two_back_is_not_shared():
    plan = _plan(_stack(6, skip_from=2))
    # Layers 2.. read the result of two layers before: no run of them is a
    # repeat the importer can share.
    assert plan is None or plan.count * plan.period < 3 * 20


def test_small_constants_must_match():
    shapes = [[0, 0, 2, HIDDEN // 2]] * 3 + [[0, 0, 4, HIDDEN // 4]] * 3
    plan = _plan(_stack(6, shapes=shapes))
    # Two runs of three layers, not one of six: the first is taken.
    assert plan is not None and (plan.start, plan.count) == (0, 3)
