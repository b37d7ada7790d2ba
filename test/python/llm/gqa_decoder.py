"""A decoder built on onnxruntime's `com.microsoft.GroupQueryAttention`, as
onnxruntime-genai exports them: per layer, Q/K/V projections into one GQA
node (rotary inside, past/present K/V in BNSH, `seqlens_k` and
`total_sequence_length` inputs), an output projection and a residual; seeded
random weights.

Inputs: `input_ids` [batch, seq] i64, `seqlens_k` [batch] i32 (each
sequence's total length - 1), `total_sequence_length` [] i32, and
`past_key_<l>`/`past_value_<l>` [batch, kv_heads, past, head_dim]. Outputs:
`logits` and `present_key_<l>`/`present_value_<l>`.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, MAX_POS = 64, 64, 4, 2, 16, 128


def build(path: str, layers: int = 2, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def weight(name, shape, scale=0.3):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    inv = 1.0 / (10000 ** (np.arange(0, HEAD_DIM, 2) / HEAD_DIM))
    angles = np.arange(MAX_POS)[:, None] * inv[None, :]
    inits.append(numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos_cache"))
    inits.append(numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin_cache"))
    nodes.append(helper.make_node("Gather", [weight("embed", (VOCAB, HIDDEN), 1.0), "input_ids"],
                                  ["x0"]))
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]),
              helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])]
    outputs = []
    x = "x0"
    for i in range(layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_{kind}_{i}", TensorProto.FLOAT, ["batch", KV_HEADS, "past", HEAD_DIM]))
            outputs.append(helper.make_tensor_value_info(
                f"present_{kind}_{i}", TensorProto.FLOAT, ["batch", KV_HEADS, "total", HEAD_DIM]))
        for n, width in (("q", HEADS), ("k", KV_HEADS), ("v", KV_HEADS)):
            nodes.append(helper.make_node("MatMul", [x, weight(f"w{n}{i}", (HIDDEN, width * HEAD_DIM))],
                                          [f"{n}{i}"]))
        nodes.append(helper.make_node(
            "GroupQueryAttention",
            [f"q{i}", f"k{i}", f"v{i}", f"past_key_{i}", f"past_value_{i}", "seqlens_k",
             "total_sequence_length", "cos_cache", "sin_cache"],
            [f"attn{i}", f"present_key_{i}", f"present_value_{i}"], domain="com.microsoft",
            num_heads=HEADS, kv_num_heads=KV_HEADS, do_rotary=1, name=f"gqa{i}"))
        nodes.append(helper.make_node("MatMul", [f"attn{i}", weight(f"wo{i}", (HEADS * HEAD_DIM, HIDDEN))],
                                      [f"o{i}"]))
        nodes.append(helper.make_node("Add", [x, f"o{i}"], [f"x{i + 1}"]))
        x = f"x{i + 1}"
    nodes.append(helper.make_node("MatMul", [x, weight("lm_head", (HIDDEN, VOCAB))], ["logits"]))
    outputs.insert(0, helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                    ["batch", "seq", VOCAB]))
    graph = helper.make_graph(nodes, "gqa_decoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def feeds(ids: np.ndarray, past: list[np.ndarray], lens: np.ndarray | None = None) -> dict:
    """The step's inputs: `ids` [B, S] after `past` (2 per layer, [B, kv,
    P, D]); `lens` each sequence's total length (default P + S)."""
    batch, seq = ids.shape
    total = past[0].shape[2] + seq
    lens = np.full(batch, total) if lens is None else np.asarray(lens)
    f = {"input_ids": ids.astype(np.int64), "seqlens_k": (lens - 1).astype(np.int32),
         "total_sequence_length": np.array(total, np.int32)}
    for i in range(len(past) // 2):
        f[f"past_key_{i}"], f[f"past_value_{i}"] = past[2 * i], past[2 * i + 1]
    return f
