"""Whole models through the ONNX frontend: the benchmark models and MiniLM.

Each model is exported with torch at test time, imported, verified, checked
for the SITS ops it must contain, and evaluated with the NumPy reference
interpreter against onnxruntime on the benchmark inputs.
"""

import re
from collections import Counter

import numpy as np
import pytest

from sits_mlir import ir
from sits_mlir.frontend.onnx import import_model
from sits_mlir.testing.reference import evaluate

from bench_models import relative_error, run_onnxruntime

# ops (counted in the printed IR) each model must contain
EXPECTED = {
    "mlp": {"sits.matmul": 3, "sits.activation <gelu>": 2},
    "gpt_prefill": {"sits.attention": 2, "sits.layer_norm": 5, "sits.matmul": 8,
                    "sits.activation <gelu>": 2, "sits.softmax": 0},
    "gpt_decode": {"sits.attention": 2, "sits.layer_norm": 5, "sits.matmul": 8,
                   "tensor.concat": 4, "sits.activation <gelu>": 2, "sits.softmax": 0},
    "cnn": {"sits.conv": 20, "sits.activation <relu>": 17, "linalg.pooling_nchw_max": 1,
            "sits.matmul": 1},
    "cnn_bn": {"sits.conv": 20, "sits.activation <relu>": 17, "arith.mulf": 0},
    "minilm": {"sits.attention": 6, "sits.layer_norm": 13, "sits.activation <gelu>": 6,
               "sits.softmax": 0, "math.erf": 0},
}

MODELS = ["mlp", "gpt_prefill", "gpt_decode", "cnn", "cnn_bn", "minilm"]


def op_counts(text: str) -> Counter:
    c = Counter(re.findall(r"= ([a-z_]+\.[a-z_0-9]+)", text))
    c.update(f"sits.activation <{k}>" for k in re.findall(r"sits\.activation <([a-z_]+)>", text))
    return c


@pytest.fixture(scope="module")
def imported(model_path):
    cache = {}

    def get(name):
        if name not in cache:
            path, inputs = model_path(name)
            cache[name] = (path, inputs, import_model(path))
        return cache[name]
    return get


@pytest.mark.parametrize("name", MODELS)
def test_model_imports_with_expected_ops(imported, name):
    path, inputs, im = imported(name)
    assert im.module.operation.verify()
    text = im.module.operation.get_asm(large_resource_limit=64)
    counts = op_counts(text)
    for op, n in EXPECTED[name].items():
        assert counts[op] == n, f"{name}: expected {n} x {op}, got {counts[op]}\n{dict(counts)}"
    # One public @main with the graph's inputs and outputs, no target attribute.
    funcs = [op for op in im.module.body.operations if op.operation.name == "func.func"]
    assert len(funcs) == 1 and str(funcs[0].attributes["sym_name"]) == '"main"'
    assert "sits.target" not in text
    assert [s.name for s in im.inputs] == list(inputs)
    assert im.opset == 17


def test_gpt_prefill_attention_is_causal_and_decode_is_not(imported):
    prefill = imported("gpt_prefill")[2].module.operation.get_asm(large_resource_limit=64)
    decode = imported("gpt_decode")[2].module.operation.get_asm(large_resource_limit=64)
    assert prefill.count("{causal}") == 2
    assert "causal" not in decode
    # The KV cache is concatenated and fed to attention.
    assert re.search(r"tensor\.concat dim\(2\) %arg1", decode)


def test_minilm_attention_takes_the_padding_mask(imported):
    text = imported("minilm")[2].module.operation.get_asm(large_resource_limit=64)
    assert len(re.findall(r"sits\.attention [^\n]* mask\(", text)) == 6


@pytest.mark.parametrize("name", ["gpt_prefill", "cnn"])
def test_locations_name_onnx_nodes(imported, name):
    import onnx

    path, _, im = imported(name)
    graph = onnx.load(path, load_external_data=False).graph
    node_names = {n.name for n in graph.node} | {graph.name}
    text = im.module.operation.get_asm(large_resource_limit=64, enable_debug_info=True)
    locs = set(re.findall(r'^#loc\d* = loc\("([^"]*)"\)', text, re.M))
    assert locs, "no name locations"
    init_names = {t.name for t in onnx.load(path, load_external_data=False).graph.initializer}
    graph_io = {s.name for s in im.inputs + im.outputs}
    assert locs <= node_names | init_names | graph_io
    # Every op is located (the module, @main and its return at the graph).
    assert "unknown" not in text.split("{-#")[0]


@pytest.mark.parametrize("name", ["mlp", "gpt_prefill"])
def test_weights_stay_out_of_the_ir(imported, name):
    _, _, im = imported(name)
    text = im.module.operation.get_asm(large_resource_limit=64)
    assert len(text) < 30_000, len(text)
    assert "dense_resource<" in text
    from sits_mlir.frontend.onnx._builder import is_mapped

    nbytes = sum(w.nbytes for w in im.weights.values())
    assert nbytes > 50_000_000
    # The weights are the model file's bytes where they lie, however they
    # fall in it; only what is not in the file (folded values) is a copy of
    # its own, aligned.
    assert sum(w.nbytes for w in im.weights.values() if is_mapped(w)) > 0.9 * nbytes
    for name_, w in im.weights.items():
        assert w.flags.c_contiguous and (is_mapped(w) or w.ctypes.data % 64 == 0), name_
        assert f"dense_resource<{name_}>" in text or f'dense_resource<"{name_}">' in text


@pytest.mark.parametrize("name", MODELS)
def test_reference_matches_onnxruntime(imported, name):
    path, inputs, im = imported(name)
    expected = run_onnxruntime(path, inputs)
    actual = evaluate(im, inputs)
    assert len(actual) == len(expected)
    for spec, a, e in zip(im.outputs, actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype, spec.name
        err = relative_error(a, e)
        assert err < 1e-4, f"{name}/{spec.name}: relative error {err:.2e}"
        scale = float(np.max(np.abs(e)))
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5 * max(scale, 1.0),
                                   err_msg=f"{name}/{spec.name}")


def test_opset14_decomposed_layer_norm_is_recognised(model_path):
    """At opset 14 torch decomposes LayerNormalization into ReduceMean/Sub/
    Pow/ReduceMean/Add/Sqrt/Div/Mul/Add."""
    for name in ("gpt_prefill_opset14",):
        path, inputs = model_path(name)
        im = import_model(path)
        counts = op_counts(im.module.operation.get_asm(large_resource_limit=64))
        assert counts["sits.layer_norm"] == 5 and counts["sits.attention"] == 2, name
        for a, e in zip(evaluate(im, inputs), run_onnxruntime(path, inputs)):
            assert relative_error(a, e) < 1e-4, name


def test_dynamic_batch_and_sequence(model_path):
    """Symbolic batch and sequence stay `?`; the causal mask built at run time
    from the sequence length is still recognised; results match at another
    batch and length than the export's."""
    path, _ = model_path("gpt_prefill_dyn")
    im = import_model(path)
    text = im.module.operation.get_asm(large_resource_limit=64)
    assert "tensor<?x?x768xf32>" in text
    assert text.count("{causal}") == 2
    assert im.inputs[0].shape == (None, None, 768)
    x = np.random.default_rng(0).standard_normal((2, 37, 768)).astype(np.float32)
    for a, e in zip(evaluate(im, {"x": x}), run_onnxruntime(path, {"x": x})):
        assert a.shape == e.shape and relative_error(a, e) < 1e-4


def test_dynamic_cache_length_with_pinned_batch(model_path):
    path, inputs = model_path("gpt_decode_dyn")
    im = import_model(path, dynamic_dims={"batch": 1})
    assert im.inputs[1].shape == (1, 12, None, 64)
    text = im.module.operation.get_asm(large_resource_limit=64)
    assert text.count("sits.attention") == 2
    feeds = {k: v[:, :, :100] if k.startswith("past") else v for k, v in inputs.items()}
    for a, e in zip(evaluate(im, feeds), run_onnxruntime(path, feeds)):
        assert a.shape == e.shape and relative_error(a, e) < 1e-4


def test_imported_module_round_trips_through_text(imported):
    """The printed module (with its resources) parses back in a fresh context
    and evaluates to the same results: the text form is self-contained."""
    _, inputs, im = imported("gpt_decode")
    text = im.module.operation.get_asm()
    with ir.Context():
        module = ir.Module.parse(text)
        again = evaluate(module, [inputs[s.name] for s in im.inputs])
    first = evaluate(im, inputs)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
