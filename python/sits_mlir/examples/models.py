"""Example ONNX models built with onnx.helper from fixed seeds.

`mlp()` has the architecture of the project's benchmark MLP (Linear
1024->4096, GELU, Linear 4096->4096, GELU, Linear 4096->1024, batch 8),
exported the way PyTorch exports it at opset 17: Gemm with transB=1 and GELU
as the Erf subgraph. Its weights are seeded random numbers, 25.2 M
parameters (100 MB of fp32).
"""

from __future__ import annotations

import numpy as np

__all__ = ["mlp"]


def _gelu(helper, x: str, out: str, prefix: str) -> list:
    """0.5 * x * (1 + erf(x / sqrt(2))), as torch.onnx exports F.gelu."""
    return [
        helper.make_node("Div", [x, "sqrt2"], [f"{prefix}_div"], name=f"{prefix}/Div"),
        helper.make_node("Erf", [f"{prefix}_div"], [f"{prefix}_erf"], name=f"{prefix}/Erf"),
        helper.make_node("Add", [f"{prefix}_erf", "one"], [f"{prefix}_add"], name=f"{prefix}/Add"),
        helper.make_node("Mul", [x, f"{prefix}_add"], [f"{prefix}_mul"], name=f"{prefix}/Mul"),
        helper.make_node("Mul", [f"{prefix}_mul", "half"], [out], name=f"{prefix}/Mul_1"),
    ]


def mlp(batch: int = 8, widths=(1024, 4096, 4096, 1024), seed: int = 0):
    """(onnx.ModelProto, {"x": input array}) for the benchmark-style MLP."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    initializers = [
        numpy_helper.from_array(np.array(np.sqrt(2.0), np.float32), "sqrt2"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
    ]
    nodes, x = [], "x"
    layers = len(widths) - 1
    for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        bound = 1.0 / np.sqrt(fan_in)  # PyTorch's default Linear init range
        w = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        b = rng.uniform(-bound, bound, (fan_out,)).astype(np.float32)
        initializers += [numpy_helper.from_array(w, f"fc{i + 1}.weight"),
                         numpy_helper.from_array(b, f"fc{i + 1}.bias")]
        out = "y" if i == layers - 1 else f"h{i + 1}"
        nodes.append(helper.make_node("Gemm", [x, f"fc{i + 1}.weight", f"fc{i + 1}.bias"],
                                      [out], name=f"/fc{i + 1}/Gemm", transB=1))
        if i < layers - 1:
            nodes += _gelu(helper, out, f"a{i + 1}", f"/gelu{i + 1}")
            out = f"a{i + 1}"
        x = out
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, widths[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, widths[-1]])],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="sits_mlir.examples")
    onnx.checker.check_model(model)
    inputs = {"x": rng.standard_normal((batch, widths[0])).astype(np.float32)}
    return model, inputs
