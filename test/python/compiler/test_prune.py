"""sits-prune on the benchmark models: heads, FFN channels and convolution
channels zeroed in the ONNX weights go away at compile time without
changing outputs, and the artifact's weights shrink by exactly their
bytes (channels kept rounded up to a multiple of the CPU's SIMD width); a
threshold prunes small weights, changes outputs a little and reports what
it removed."""

import os
import shutil
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

import sits_mlir  # noqa: E402
from sits_mlir import ir, passmanager, targets  # noqa: E402
from sits_mlir.frontend.onnx import import_model  # noqa: E402

# The small model is exported with torch's TorchScript exporter.
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Converting a tensor to a Python boolean")]

D, HEAD_DIM, FF = 768, 64, 3072
# gpt_prefill: heads zeroed (query, key, value columns and biases, and
# output projection rows), per block.
GPT_HEADS = {0: [1, 5], 1: [7]}
# FFN channels: block 0 through its output rows (fc_out), block 1 through
# its input columns and bias (GELU(0) = 0).
GPT_FFN_ROWS = list(range(0, FF, 4))
GPT_FFN_COLUMNS = list(range(300))
# cnn: channels between c1 and c2 of a BasicBlock (c1 -> BN folded -> ReLU
# -> c2): layers.0 through c2's input slices, layers.3 through c1's filters
# and bias (ReLU(0) = 0).
CNN_C2_INPUTS = list(range(0, 64, 4))
CNN_C1_FILTERS = list(range(40))
# Channels kept are a multiple of the target's SIMD width.
LANES = targets.lookup("cpu").simd_width


def _removed(total, zeroed, multiple):
    """How many of `total` channels go when `zeroed` are prunable."""
    return total - min(total, -(-(total - zeroed) // multiple) * multiple)


def _initializers(model):
    return {t.name: i for i, t in enumerate(model.graph.initializer)}


def _update(model, name, edit):
    index = _initializers(model)[name]
    array = numpy_helper.to_array(model.graph.initializer[index]).copy()
    edit(array)
    model.graph.initializer[index].CopyFrom(numpy_helper.from_array(array, name))


def _node_inputs(model, node_name):
    (node,) = [n for n in model.graph.node if n.name == node_name]
    return list(node.input)


def _zero(columns=None, rows=None):
    def edit(array):
        if columns is not None:
            array[:, columns] = 0
        if rows is not None:
            array[rows] = 0
    return edit


def zeroed_gpt(path, multiple=1):
    """gpt_prefill with GPT_HEADS and the FFN channels zeroed, and the
    bytes sits-prune should remove keeping a multiple of `multiple`
    channels."""
    model = onnx.load(path)
    removed = 0
    for block, heads in GPT_HEADS.items():
        w_qkv = _node_inputs(model, f"/blocks.{block}/qkv/MatMul")[1]
        w_o = _node_inputs(model, f"/blocks.{block}/proj/MatMul")[1]
        for h in heads:
            cols = [p * D + h * HEAD_DIM + d for p in range(3) for d in range(HEAD_DIM)]
            rows = list(range(h * HEAD_DIM, (h + 1) * HEAD_DIM))
            _update(model, w_qkv, _zero(columns=cols))
            _update(model, f"blocks.{block}.qkv.bias", _zero(rows=cols))
            _update(model, w_o, _zero(rows=rows))
            removed += len(cols) * (D + 1) + len(rows) * D
    _update(model, _node_inputs(model, "/blocks.0/fc_out/MatMul")[1], _zero(rows=GPT_FFN_ROWS))
    _update(model, _node_inputs(model, "/blocks.1/fc/MatMul")[1], _zero(columns=GPT_FFN_COLUMNS))
    _update(model, "blocks.1.fc.bias", _zero(rows=GPT_FFN_COLUMNS))
    # Per channel: a column of W1 and its bias, a row of W2.
    channels = _removed(FF, len(GPT_FFN_ROWS), multiple) + \
        _removed(FF, len(GPT_FFN_COLUMNS), multiple)
    removed += channels * (D + 1 + D)
    return model, removed * 4


def zeroed_cnn(path, multiple=1):
    model = onnx.load(path)
    init = {t.name: t for t in model.graph.initializer}
    _, w2, _ = _node_inputs(model, "/layers/layers.0/c2/Conv")
    _update(model, w2, lambda a: a.__setitem__((slice(None), CNN_C2_INPUTS), 0))
    _, w1, b1 = _node_inputs(model, "/layers/layers.3/c1/Conv")
    _update(model, w1, _zero(rows=CNN_C1_FILTERS))
    _update(model, b1, _zero(rows=CNN_C1_FILTERS))

    def channel_bytes(block, channels):
        _, f1, _ = _node_inputs(model, f"/layers/layers.{block}/c1/Conv")
        _, f2, _ = _node_inputs(model, f"/layers/layers.{block}/c2/Conv")
        s1, s2 = init[f1].dims, init[f2].dims
        per = np.prod(s1[1:]) + 1 + s2[0] * np.prod(s2[2:])
        return int(per) * _removed(s1[0], len(channels), multiple) * 4
    return model, channel_bytes(0, CNN_C2_INPUTS) + channel_bytes(3, CNN_C1_FILTERS)


def _weight_bytes(artifact):
    (entry,) = artifact.manifest["entry_points"]
    weights = [a for a in entry["args"] if a["role"] == "weights"]
    return weights[0]["shape"][0] if weights else 0


def _compile_and_run(model, inputs, tmp_path, name, **options):
    artifact = sits_mlir.compile(model, target="cpu", output=tmp_path / f"{name}.sitsm",
                                 **options)
    return artifact, artifact.load().run(**inputs)


def _entries(model, threshold=None, multiple=1):
    """(kind, op, removed, bytes) of each structured-pruning report entry."""
    with ir.Context() as context:
        module = import_model(model, context=context).module
        option = f"{{channel-multiple={multiple}"
        option += "}" if threshold is None else f" threshold={threshold!r}}}"
        passmanager.PassManager.parse(f"builtin.module(sits-prune{option})").run(module.operation)
        entries = []
        for entry in ir.ArrayAttr(module.operation.attributes["sits.report.pruning"]):
            entry = ir.DictAttr(entry)
            kind = ir.StringAttr(entry["kind"]).value
            if kind in ("ffn_channels", "conv_channels", "attention_heads"):
                entries.append((kind, ir.StringAttr(entry["op"]).value,
                                ir.IntegerAttr(entry["removed"]).value,
                                ir.IntegerAttr(entry["bytes"]).value))
        return entries


def _assert_same(actual, expected, rtol=1e-5):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        scale = float(np.abs(e).max())
        np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol * scale)


@pytest.mark.slow
def test_gpt_prefill_zero_heads_and_channels(model_path, tmp_path):
    path, inputs = model_path("gpt_prefill")
    model, expected_bytes = zeroed_gpt(path, LANES)
    base, reference = _compile_and_run(model, inputs, tmp_path, "base", prune=False)
    pruned, outputs = _compile_and_run(model, inputs, tmp_path, "pruned")
    _assert_same(outputs, reference)
    saved = _weight_bytes(base) - _weight_bytes(pruned)
    # The weights section aligns every weight to 64 bytes.
    assert abs(saved - expected_bytes) <= 64 * 16, (saved, expected_bytes)

    entries = _entries(model, multiple=LANES)
    heads = {op: n for kind, op, n, _ in entries if kind == "attention_heads"}
    assert sorted(heads.values()) == sorted(len(h) for h in GPT_HEADS.values())
    channels = sorted(n for kind, _, n, _ in entries if kind == "ffn_channels")
    assert channels == sorted([_removed(FF, len(GPT_FFN_ROWS), LANES),
                               _removed(FF, len(GPT_FFN_COLUMNS), LANES)])
    assert sum(b for *_, b in entries) == expected_bytes
    # Without rounding, every zeroed channel goes.
    channels = sorted(n for kind, _, n, _ in _entries(model) if kind == "ffn_channels")
    assert channels == sorted([len(GPT_FFN_ROWS), len(GPT_FFN_COLUMNS)])


@pytest.mark.slow
def test_gpt_decode_keeps_heads_of_a_returned_cache(model_path, tmp_path):
    """gpt_decode (same weights): the attention reads past + new keys and
    values, which are also returned. Reading only the live heads would copy
    the cache, which costs more than the pruned weights save: the heads
    stay (with a remark), the FFN channels go, outputs do not change."""
    path, inputs = model_path("gpt_decode")
    model, _ = zeroed_gpt(path, LANES)
    expected_bytes = (_removed(FF, len(GPT_FFN_ROWS), LANES) +
                      _removed(FF, len(GPT_FFN_COLUMNS), LANES)) * (D + 1 + D) * 4
    base, reference = _compile_and_run(model, inputs, tmp_path, "base", prune=False)
    pruned, outputs = _compile_and_run(model, inputs, tmp_path, "pruned")
    _assert_same(outputs, reference)
    saved = _weight_bytes(base) - _weight_bytes(pruned)
    assert abs(saved - expected_bytes) <= 64 * 16, (saved, expected_bytes)
    kinds = sorted(kind for kind, *_ in _entries(model))
    assert kinds == ["ffn_channels", "ffn_channels"]


@pytest.mark.slow
def test_cnn_zero_channels(model_path, tmp_path):
    path, inputs = model_path("cnn")
    model, expected_bytes = zeroed_cnn(path, LANES)
    base, reference = _compile_and_run(model, inputs, tmp_path, "base", prune=False)
    pruned, outputs = _compile_and_run(model, inputs, tmp_path, "pruned")
    _assert_same(outputs, reference)
    saved = _weight_bytes(base) - _weight_bytes(pruned)
    assert abs(saved - expected_bytes) <= 64 * 8, (saved, expected_bytes)
    entries = _entries(model, multiple=LANES)
    assert sorted((op, n) for kind, op, n, _ in entries if kind == "conv_channels") == [
        ("/layers/layers.0/c1/Conv", _removed(64, len(CNN_C2_INPUTS), LANES)),
        ("/layers/layers.3/c1/Conv", _removed(128, len(CNN_C1_FILTERS), LANES))]


def test_unmodified_model_keeps_its_weights(model_path):
    """Nothing in the trained benchmark weights is exactly zero: exact
    pruning removes no channel or head."""
    path, _ = model_path("gpt_prefill")
    assert _entries(onnx.load(path)) == []


@pytest.mark.slow
def test_threshold_prunes_small_weights(model_path, tmp_path):
    """Two heads' output projection rows and 512 FFN channels' output rows
    scaled by 1e-3 (|w| < 1e-3) are pruned at threshold 1e-3; not being
    zero, they change the outputs slightly. The heads' keys and values are
    model outputs (the KV cache) and not zero: their columns stay."""
    path, inputs = model_path("gpt_prefill")
    model = onnx.load(path)
    w_o = _node_inputs(model, "/blocks.0/proj/MatMul")[1]
    _update(model, w_o, lambda a: a.__setitem__(slice(2 * HEAD_DIM, 4 * HEAD_DIM),
                                               a[2 * HEAD_DIM:4 * HEAD_DIM] * 1e-3))
    w2 = _node_inputs(model, "/blocks.1/fc_out/MatMul")[1]
    _update(model, w2, lambda a: a.__setitem__(slice(0, 512), a[:512] * 1e-3))

    assert _entries(model) == []  # exact pruning finds nothing
    entries = _entries(model, threshold=1e-3)
    # Query columns and biases, output projection rows.
    assert ("attention_heads", "/blocks.0/MatMul_1", 2,
            4 * 2 * HEAD_DIM * (D + 1 + D)) in entries
    assert [(k, op, n) for k, op, n, _ in entries if k == "ffn_channels"] == [
        ("ffn_channels", "/blocks.1/fc/MatMul", 512)]

    _, reference = _compile_and_run(model, inputs, tmp_path, "base", prune=False)
    _, outputs = _compile_and_run(model, inputs, tmp_path, "pruned", prune_threshold=1e-3)
    hidden, ref = outputs[0].astype(np.float64), reference[0].astype(np.float64)
    error = np.linalg.norm(hidden - ref) / np.linalg.norm(ref)
    assert 0 < error < 1e-3, error
    # Block 0's keys and values are computed as before.
    _assert_same(outputs[1:3], reference[1:3])


def test_pipeline_options():
    from sits_mlir.compiler.driver import CompileOptions, _cpu_pipeline

    assert "prune=true" in _cpu_pipeline(CompileOptions())
    assert "prune-threshold" not in _cpu_pipeline(CompileOptions())
    assert "prune=false" in _cpu_pipeline(CompileOptions(prune=False))
    assert "prune-threshold=0.001" in _cpu_pipeline(CompileOptions(prune_threshold=1e-3))
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="prune_threshold"):
            _cpu_pipeline(CompileOptions(prune_threshold=bad))


def _small_gpt():
    """One small GPT block (d = 64, 4 heads, FFN 256) with head 2 and FFN
    channels 0-31 zeroed."""
    torch = pytest.importorskip("torch")
    import io
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
    from benchmark_models import Block

    torch.manual_seed(0)
    block = Block(d=64, h=4, ff=256).eval()
    with torch.no_grad():
        for w in (block.qkv.weight, ):
            for p in range(3):
                w[p * 64 + 32:p * 64 + 48] = 0
        for p in range(3):
            block.qkv.bias[p * 64 + 32:p * 64 + 48] = 0
        block.proj.weight[:, 32:48] = 0
        block.fc_out.weight[:, :32] = 0
    buffer = io.BytesIO()
    x = torch.randn(1, 16, 64)
    with torch.no_grad():
        torch.onnx.export(block, (x,), buffer, input_names=["x"], opset_version=17,
                          dynamo=False, do_constant_folding=True)
    return onnx.load_from_string(buffer.getvalue()), {"x": x.numpy()}


def test_sits_opt_reproduces_python(tmp_path):
    """The graph pipeline with pruning gives the same IR from Python and
    from sits-opt."""
    sits_opt = shutil.which("sits-opt")
    if sits_opt is None:
        pytest.skip("sits-opt not on PATH")
    model, _ = _small_gpt()
    pipeline = "builtin.module(sits-graph-pipeline{prune-threshold=0.0})"
    with ir.Context() as context:
        module = import_model(model, context=context).module
        source = tmp_path / "model.mlir"
        # With locations: the report names ops after them.
        source.write_text(module.operation.get_asm(enable_debug_info=True))
        passmanager.PassManager.parse(pipeline).run(module.operation)
        from_python = str(module)
    assert "sits.report.pruning" in from_python
    assert "-> tensor<1x3x16x16xf32>" in from_python  # 3 of 4 heads left
    from_tool = subprocess.run([sits_opt, str(source), f"--pass-pipeline={pipeline}"],
                               capture_output=True, text=True, check=True).stdout
    assert from_tool.strip() == from_python.strip()


@pytest.mark.slow
def test_small_gpt_outputs_unchanged(tmp_path):
    model, inputs = _small_gpt()
    _, reference = _compile_and_run(model, inputs, tmp_path, "base", prune=False)
    _, outputs = _compile_and_run(model, inputs, tmp_path, "pruned")
    _assert_same(outputs, reference)


@pytest.mark.slow
def test_sits_compile_options(tmp_path, capsys):
    from sits_mlir.tools.compile import main

    model, _ = _small_gpt()
    path = tmp_path / "block.onnx"
    onnx.save(model, str(path))
    with pytest.raises(SystemExit) as error:
        main([str(path), "--prune-threshold", "-1"])
    assert error.value.code == 2
    assert "must be a finite number >= 0" in capsys.readouterr().err
    assert main([str(path), "-q", "--prune-threshold", "0.5", "-o", str(tmp_path / "a.sitsm")]) == 0
    assert main([str(path), "-q", "--no-prune", "-o", str(tmp_path / "b.sitsm")]) == 0
    from sits_mlir import runtime

    pipelines = [runtime.read_manifest(str(tmp_path / f"{n}.sitsm"))["pipeline"]
                 for n in "ab"]
    assert "prune=true prune-threshold=0.5" in pipelines[0]
    assert "prune=false" in pipelines[1]


@pytest.mark.slow
def test_minilm_heads(model_path, tmp_path):
    """BERT (MiniLM-L6): separate query/key/value projections and a padding
    mask shared by all heads. Heads 3 and 4 of layer 0 with zero output
    rows go; outputs do not change."""
    path, inputs = model_path("minilm")
    model = onnx.load(path)
    dense = _node_inputs(model, "/m/encoder/layer.0/attention/output/dense/MatMul")[1]
    _update(model, dense, _zero(rows=list(range(3 * 32, 5 * 32))))
    # Query, key and value columns (and biases) of 2 heads of 32, and the
    # output rows.
    assert _entries(model) == [("attention_heads", "/m/encoder/layer.0/attention/self/MatMul_1",
                                2, 4 * 2 * 32 * (3 * (384 + 1) + 384))]
    _, reference = _compile_and_run(model, inputs, tmp_path, "base", prune=False)
    _, outputs = _compile_and_run(model, inputs, tmp_path, "pruned")
    _assert_same(outputs, reference)


# Grouped-query attention built with onnx.helper: ONNX Attention (opset 23)
# on 3-D projections with q_num_heads > kv_num_heads, which the importer
# turns into sits.attention with fewer key/value heads.
GQA_D, GQA_HEAD_DIM, GQA_T = 64, 16, 8


def _gqa_model(hq, hkv, dead_heads=(), dead_values=()):
    """Q/K/V projections (MatMul + Add), Attention, output MatMul. Query
    heads `dead_heads` get zero query columns, bias and output rows; the
    key/value heads `dead_values` zero value columns and bias."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    d, dh = GQA_D, GQA_HEAD_DIM
    w = {name: (rng.standard_normal(shape) / 4).astype(np.float32) for name, shape in (
        ("wq", (d, hq * dh)), ("bq", (hq * dh,)), ("wk", (d, hkv * dh)), ("bk", (hkv * dh,)),
        ("wv", (d, hkv * dh)), ("bv", (hkv * dh,)), ("wo", (hq * dh, d)))}
    for h in dead_heads:
        cols = slice(h * dh, (h + 1) * dh)
        w["wq"][:, cols] = 0
        w["bq"][cols] = 0
        w["wo"][cols] = 0
    for j in dead_values:
        cols = slice(j * dh, (j + 1) * dh)
        w["wv"][:, cols] = 0
        w["bv"][cols] = 0
    nodes = []
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{p}"], [f"{p}_mm"], name=f"{p}_proj"),
                  helper.make_node("Add", [f"{p}_mm", f"b{p}"], [p], name=f"{p}_bias")]
    nodes += [helper.make_node("Attention", ["q", "k", "v"], ["a"], name="attention",
                               q_num_heads=hq, kv_num_heads=hkv, is_causal=1),
              helper.make_node("MatMul", ["a", "wo"], ["y"], name="o_proj")]
    graph = helper.make_graph(
        nodes, "gqa", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, GQA_T, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, GQA_T, d])],
        [numpy_helper.from_array(a, name) for name, a in w.items()])
    model = onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("hq, hkv, dead_heads, dead_values, removed, kv_removed", [
    # A whole group (key/value head 1's four query heads).
    (8, 2, [4, 5, 6, 7], [], [4, 5, 6, 7], [1]),
    # One head per group: groups of 3 remain, both key/value heads stay.
    (8, 2, [1, 6], [], [1, 6], []),
    # Key/value head 0's values are zero: its group averages zeros.
    (8, 2, [], [0], [0, 1, 2, 3], [0]),
    # Group 0 could lose 3 heads, group 1 only head 6: groups keep 3, so
    # two of group 0's prunable heads are put back (the first ones, all
    # being zero).
    (8, 2, [0, 1, 2, 6], [], [2, 6], []),
    # Groups {0, 1}, {2, 3}, {4, 5}, {6, 7}: group 1 goes, head 6 stays to
    # keep groups of 2.
    (8, 4, [2, 3, 6], [], [2, 3], [1]),
    # Multi-query attention: any query heads can go.
    (4, 1, [1, 2], [], [1, 2], []),
    # Removing head 0 alone would leave groups of 1 and 2: nothing goes.
    (4, 2, [0], [], [], []),
])
def test_gqa_heads(tmp_path, hq, hkv, dead_heads, dead_values, removed, kv_removed):
    """Grouped-query and multi-query attention: query heads go only while
    every key/value head keeps the same number of them (sits.attention maps
    query head h to key/value head h / (Hq / Hkv)), a key/value head goes
    with its last query head, outputs do not change and the weights shrink
    by the report's bytes."""
    model = _gqa_model(hq, hkv, dead_heads, dead_values)
    path = tmp_path / "gqa.onnx"
    onnx.save(model, str(path))
    inputs = {"x": np.random.default_rng(1).standard_normal((1, GQA_T, GQA_D)).astype(np.float32)}
    base = sits_mlir.compile(str(path), "cpu", str(tmp_path / "base.sitsm"), prune=False)
    pruned = sits_mlir.compile(str(path), "cpu", str(tmp_path / "pruned.sitsm"), prune=True)
    (reference,) = base.load().run(**inputs)
    (output,) = pruned.load().run(**inputs)
    np.testing.assert_allclose(output, reference, rtol=1e-5, atol=1e-5)

    with ir.Context() as context:
        module = import_model(model, context=context).module
        passmanager.PassManager.parse("builtin.module(sits-prune)").run(module.operation)
        entries = [ir.DictAttr(e) for e in ir.ArrayAttr(module.operation.attributes["sits.report.pruning"])]
        heads = [e for e in entries if ir.StringAttr(e["kind"]).value == "attention_heads"]
        if not removed:
            assert heads == []
            assert _weight_bytes(pruned) == _weight_bytes(base)
            return
        (entry,) = heads
        assert [ir.IntegerAttr(i).value for i in ir.ArrayAttr(entry["indices"])] == removed
        assert [ir.IntegerAttr(i).value for i in ir.ArrayAttr(entry["kv_indices"])] == kv_removed
        assert ir.IntegerAttr(entry["kv_total"]).value == hkv
        reported = ir.IntegerAttr(entry["bytes"]).value
    # Per query head: query columns, bias and output rows; per key/value
    # head: key and value columns and biases.
    d, dh = GQA_D, GQA_HEAD_DIM
    expected = 4 * (len(removed) * (d * dh + dh + dh * d) + len(kv_removed) * 2 * (d * dh + dh))
    assert reported == expected
    saved = _weight_bytes(base) - _weight_bytes(pruned)
    # Biases this small stay in the code; the weights section aligns
    # every weight to 64 bytes.
    assert abs(saved - expected) <= 64 * 8, (saved, expected)
