"""The eager attention of decoders exported from `transformers` with their
KV cache imports as one `sits.attention {causal}` per layer: the causal mask
built at run time from positions (no attention-mask input) is proven causal
and dropped, and Llama's repeat_kv (GQA) is read as the op's head grouping.

Hand-built variants of the same subgraph check that only the exact causal
mask and the exact repeat_kv are recognised: an off-by-one, a sliding
window, a top-left-aligned mask and a head repeat in the other order stay
what they are, and every variant computes what onnxruntime computes."""

import re

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

from sits_mlir.frontend.onnx import import_model
from sits_mlir.testing.reference import evaluate

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

ATTENTION = re.compile(r"sits\.attention [^:]*:\s*\(tensor<([^>]*)>, tensor<([^>]*)>")


def attention_ops(text):
    """[(query type, key type, causal, has mask)] of every sits.attention."""
    out = []
    for line in text.splitlines():
        if "sits.attention" not in line:
            continue
        m = ATTENTION.search(line)
        out.append((m.group(1), m.group(2), "{causal" in line, "mask(" in line))
    return out


# -- the transformers exports ----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name,heads,kv_heads", [("gpt2", 4, 4), ("llama", 4, 2)])
@pytest.mark.parametrize("dtype,elem", [("float32", "f32"), ("float16", "f16")])
def test_hf_export_imports_one_causal_attention_per_layer(tmp_path, name, heads, kv_heads,
                                                          dtype, elem):
    # fp16 exports mask with finfo(float16).min = -65504 and round-trip the
    # probabilities through f32 (softmax(dtype=float32).to(float16)).
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from hf_decoders import build

    dec = build(name, str(tmp_path), dtype=dtype)
    text = import_model(dec.path).module.operation.get_asm(large_elements_limit=16)
    ops = attention_ops(text)
    assert len(ops) == dec.layers
    for q, k, causal, has_mask in ops:
        assert causal and not has_mask
        assert q == f"?x{heads}x?x{dec.head_dim}x{elem}"
        # The unrepeated KV cache: Hkv heads, Tk = past + new.
        assert k == f"?x{kv_heads}x?x{dec.head_dim}x{elem}"
    assert "sits.softmax" not in text
    # The mask's comparison and the repeat_kv broadcast are gone.
    assert "arith.cmpi sle" not in text
    assert not re.search(r"linalg\.broadcast[^\n]*tensor<\?x\d+x\d+x\?x\d+x" + elem + ">",
                         text)


# -- hand-built variants -----------------------------------------------------------------

H, HKV, D = 4, 2, 8


def _i64(name, *v):
    return numpy_helper.from_array(np.array(v if len(v) != 1 else v[0], np.int64), name)


def decoder_attention(mask="causal", repeat="gqa", outputs=(), fill=None):
    """One attention step over a KV cache, as transformers exports it: the
    query [B, 4, seq, D], past K/V [B, kv, past, D] and new K/V [B, kv, seq, D]
    (kv = 2 with a repeat, else 4)."""
    kv = HKV if repeat else H
    n = h.make_node
    nodes = [
        n("Concat", ["past_k", "k_new"], ["k"], axis=2),
        n("Concat", ["past_v", "v_new"], ["v"], axis=2),
        n("Shape", ["past_k"], ["pk_shape"]), n("Gather", ["pk_shape", "two"], ["past_len"]),
        n("Shape", ["q"], ["q_shape"]), n("Gather", ["q_shape", "two"], ["seq_len"]),
        n("Add", ["past_len", "seq_len"], ["total"]),
        n("Range", ["zero", "seq_len", "one"], ["q_range"]),
        n("Range", ["zero", "total", "one"], ["k_pos"]),
    ]
    # "top_left" numbers the queries from 0, ignoring the past.
    if mask != "top_left":
        nodes.append(n("Add", ["q_range", "past_len"], ["q_pos"]))
    nodes += [n("Unsqueeze", ["q_range" if mask == "top_left" else "q_pos", "axes_q"], ["q4"]),
              n("Unsqueeze", ["k_pos", "axes_k"], ["k4"])]
    if mask == "off_by_one":    # strict: a query does not see itself
        nodes.append(n("Less", ["k4", "q4"], ["allowed"]))
    elif mask == "window":      # sliding window of 3: causal AND j > i - 3
        nodes += [n("LessOrEqual", ["k4", "q4"], ["causal"]),
                  n("Sub", ["q4", "three"], ["lo"]),
                  n("Greater", ["k4", "lo"], ["recent"]),
                  n("And", ["causal", "recent"], ["allowed"])]
    elif mask == "greater_equal":   # the same causal mask, written Q >= K
        nodes.append(n("GreaterOrEqual", ["q4", "k4"], ["allowed"]))
    else:
        nodes.append(n("LessOrEqual", ["k4", "q4"], ["allowed"]))
    if mask != "bool":          # "bool": Where(allowed, scores, min) below
        nodes.append(n("Where", ["allowed", "fzero", "fmin"], ["mask"]))
    k_full, v_full = "k", "v"
    if repeat:
        # repeat_kv: [B, 2, T, D] -> [B, 2, 2, T, D] -> [B, 4, T, D] ("gqa");
        # "interleaved" unsqueezes before the heads: head h reads h % 2.
        axis = "axis2" if repeat == "gqa" else "axis1"
        for x in ("k", "v"):
            nodes += [n("Shape", [x], [f"{x}_shape"]),
                      n("Gather", [f"{x}_shape", "zero"], [f"{x}_b"]),
                      n("Gather", [f"{x}_shape", "two"], [f"{x}_t"]),
                      n("Unsqueeze", [f"{x}_b", "axis0"], [f"{x}_b1"]),
                      n("Unsqueeze", [f"{x}_t", "axis0"], [f"{x}_t1"]),
                      n("Concat", [f"{x}_b1", "kv2", "rep2", f"{x}_t1", "d1"]
                        if repeat == "gqa" else [f"{x}_b1", "rep2", "kv2", f"{x}_t1", "d1"],
                        [f"{x}_eshape"], axis=0),
                      n("Concat", [f"{x}_b1", "h4", f"{x}_t1", "d1"], [f"{x}_rshape"], axis=0),
                      n("Unsqueeze", [x, axis], [f"{x}_u"]),
                      n("Expand", [f"{x}_u", f"{x}_eshape"], [f"{x}_e"]),
                      n("Reshape", [f"{x}_e", f"{x}_rshape"], [f"{x}_rep"])]
        k_full, v_full = "k_rep", "v_rep"
    nodes += [n("Transpose", [k_full], ["kt"], perm=[0, 1, 3, 2]),
              n("MatMul", ["q", "kt"], ["s"]),
              n("Mul", ["s", "scale"], ["ss"]),
              n("Where", ["allowed", "ss", "fmin"], ["sm"]) if mask == "bool" else
              n("Add", ["ss", "mask"], ["sm"]),
              n("Softmax", ["sm"], ["p"], axis=-1),
              n("Cast", ["p"], ["pc"], to=TP.FLOAT),
              n("MatMul", ["pc", v_full], ["out"])]
    inits = [_i64("zero", 0), _i64("one", 1), _i64("two", 2), _i64("three", 3),
             _i64("axes_q", 0, 1, 3), _i64("axes_k", 0, 1, 2),
             _i64("axis0", [0]), _i64("axis1", [1]), _i64("axis2", [2]),
             _i64("kv2", [HKV]), _i64("rep2", [H // HKV]), _i64("h4", [H]), _i64("d1", [D]),
             numpy_helper.from_array(np.array(0.0, np.float32), "fzero"),
             numpy_helper.from_array(np.array(np.finfo(np.float32).min if fill is None else fill,
                                              np.float32), "fmin"),
             numpy_helper.from_array(np.array(1 / np.sqrt(D), np.float32), "scale")]
    for i, node in enumerate(nodes):
        node.name = f"n{i}_{node.op_type}"
    inputs = [h.make_tensor_value_info("q", TP.FLOAT, ["batch", H, "seq", D])]
    for x in ("k", "v"):
        inputs += [h.make_tensor_value_info(f"past_{x}", TP.FLOAT, ["batch", kv, "past", D]),
                   h.make_tensor_value_info(f"{x}_new", TP.FLOAT, ["batch", kv, "seq", D])]
    graph = h.make_graph(nodes, "decoder_attention", inputs,
                         [h.make_tensor_value_info("out", TP.FLOAT, ["batch", H, "seq", D])] +
                         [h.make_tensor_value_info(o, TP.FLOAT, ["batch", H, "total", D]) for o in outputs],
                         initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def check_against_onnxruntime(model, kv):
    ort = pytest.importorskip("onnxruntime")
    im = import_model(model)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    # prefill over an empty cache, prefill over a cache, one-token decode
    for batch, seq, past in [(1, 5, 0), (2, 4, 3), (2, 1, 6)]:
        feeds = {"q": rng.standard_normal((batch, H, seq, D)).astype(np.float32)}
        for x in ("k", "v"):
            feeds[f"past_{x}"] = rng.standard_normal((batch, kv, past, D)).astype(np.float32)
            feeds[f"{x}_new"] = rng.standard_normal((batch, kv, seq, D)).astype(np.float32)
        ours, ref = evaluate(im, feeds), sess.run(None, feeds)
        assert len(ours) == len(ref)
        for a, b in zip(ours, ref):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return im.module.operation.get_asm(large_elements_limit=16)


@pytest.mark.parametrize("mask", ["causal", "greater_equal", "bool"])
@pytest.mark.parametrize("repeat", ["gqa", None])
def test_causal_positions_mask_fuses(mask, repeat):
    text = check_against_onnxruntime(decoder_attention(mask, repeat), HKV if repeat else H)
    [(q, k, causal, has_mask)] = attention_ops(text)
    assert causal and not has_mask
    assert k == f"?x{HKV if repeat else H}x?x{D}xf32"
    assert "sits.softmax" not in text


@pytest.mark.parametrize("mask", ["off_by_one", "window", "top_left"])
def test_other_masks_are_not_causal(mask):
    # Not the causal mask: it stays a run-time mask (computed as exported).
    text = check_against_onnxruntime(decoder_attention(mask, "gqa"), HKV)
    assert "{causal" not in text
    for q, k, causal, has_mask in attention_ops(text):
        assert has_mask


def test_fill_above_the_type_minimum_is_a_mask():
    # -65504 removes a key only in f16 (it is that type's lowest value); in
    # an f32 graph the mask stays, computed as exported.
    text = check_against_onnxruntime(decoder_attention("causal", "gqa", fill=-65504.0), HKV)
    [(q, k, causal, has_mask)] = attention_ops(text)
    assert not causal and has_mask


def test_interleaved_head_repeat_is_not_grouped_query():
    # Heads repeated as [kv0, kv1, kv0, kv1]: query head h reads kv head
    # h % 2, not h // 2; the repeated K/V stay materialised.
    text = check_against_onnxruntime(decoder_attention("causal", "interleaved"), HKV)
    [(q, k, causal, has_mask)] = attention_ops(text)
    assert causal and k == f"?x{H}x?x{D}xf32"


def test_repeated_kv_used_elsewhere_stays():
    # The repeated K is also a graph output: it is computed, and attention
    # reads it (4 heads) rather than the cache.
    text = check_against_onnxruntime(decoder_attention("causal", "gqa", ["k_rep"]), HKV)
    [(q, k, causal, has_mask)] = attention_ops(text)
    assert causal and k == f"?x{H}x?x{D}xf32"
