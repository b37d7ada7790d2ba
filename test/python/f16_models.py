"""Half-precision test models for the tensor-core path: an ONNX MatMul of
float16 inputs, and a GPT-2 block (`test/bench/benchmark_models.Block`)
exported in float32 and converted to float16 (weights, constants, casts,
inputs and outputs)."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def matmul_f16(path, m=128, k=256, n=512, seed=0):
    """`y = x @ w` (x: [m, k] float16 input, w: [k, n] float16 weight);
    returns (path, x, w)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float16)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul_f16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [m, n])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path), x, w


def _to_f16(tensor):
    if tensor.data_type == TensorProto.FLOAT:
        tensor.CopyFrom(numpy_helper.from_array(
            numpy_helper.to_array(tensor).astype(np.float16), tensor.name))


def gpt_block_f16(out_dir):
    """One GPT-2 block over a 128-token prefill, in float16. Returns
    (f16 path, f32 path, x as float32): the float32 model is the reference
    (its weights are the float16 ones' originals)."""
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    os.pardir, "bench"))
    import benchmark_models as bm

    torch.manual_seed(1)
    block = bm.Block()
    block.apply(bm._gpt_init)

    class OneBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = block

        def forward(self, x):
            return self.block(x)[0]

    g = torch.Generator().manual_seed(101)
    x = torch.randn(1, bm.PREFILL_SEQ, bm.D_MODEL, generator=g)
    f32 = os.path.join(str(out_dir), "gpt_block_f32.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(OneBlock().eval(), (x,), f32, input_names=["x"],
                          output_names=["y"], opset_version=17, dynamo=False)
    model = onnx.load(f32)
    for init in model.graph.initializer:
        _to_f16(init)
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                _to_f16(attr.t)
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.FLOAT16
    for value in list(model.graph.input) + list(model.graph.output):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    del model.graph.value_info[:]
    onnx.checker.check_model(model)
    f16 = os.path.join(str(out_dir), "gpt_block_f16.onnx")
    onnx.save(model, f16)
    return f16, f32, x.numpy()
