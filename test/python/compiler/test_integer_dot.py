"""Quantized matmuls in INT8 dot products (CompileOptions.int8_activations,
sits-convert-to-linalg's integer-dot, the runtime's sitsRuntimeQDot): the
input is quantized per row and group of K when the code runs and multiplied
by the weight codes in integers. The outputs equal a NumPy model of exactly
that arithmetic (signed INT4 packed along K with per-group scales, INT8 per
output channel, MatMulNBits' INT4 through INT8 codes, rank-3 and dynamic
inputs, bias and activation, all-zero rows) at every batch size, the kernel
call is in the artifact, and int8_activations=False keeps the weight-only
dequantization."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import sits_mlir  # noqa: E402

K, N, G = 256, 48, 64


def quantize_rows(x, group):
    """The lowering's activation quantization, in float32 like the code."""
    m, k = x.shape
    xg = x.reshape(m, k // group, group).astype(np.float32)
    amax = np.abs(xg).max(-1)
    inverse = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0)
    inverse = inverse.astype(np.float32)
    q = np.clip(np.rint(xg * inverse[..., None]), -127, 127).astype(np.int64)
    return q, (amax / np.float32(127)).astype(np.float32)


def qdot_reference(x, codes, scale, group, per_channel):
    """sum_g sx[m, g] * ws(g, n) * sum_k q[m, k] * code[k, n], the integer
    sums exact and the float accumulation in group order."""
    q, sx = quantize_rows(x, group)
    k, n = codes.shape
    acc = np.einsum("mgk,gkn->mgn", q, codes.reshape(k // group, group, n).astype(np.int64))
    y = np.zeros((x.shape[0], n), np.float32)
    for g in range(k // group):
        factor = sx[:, g, None] if per_channel else sx[:, g, None] * scale[g][None, :]
        y = (y + acc[:, g, :].astype(np.float32) * factor).astype(np.float32)
    return y * scale[None, :] if per_channel else y


def _dense(values, type_text):
    rows = ", ".join("[" + ", ".join(repr(v) for v in row) + "]" for row in values.tolist())
    return f"dense<[{rows}]> : {type_text}"


def _module(i4_codes, i4_scale, bias, i8_codes, i8_scale):
    """@main(x [?, K], x3 [2, ?, K]): an INT4 qmatmul (packed along K, one
    scale per group of G, bias, SiLU) and an INT8 per-channel one."""
    i4_type = f"tensor<{K}x{N}xi4, #sits.packed<storage = i8, axis = 0>>"
    return f"""
func.func @main(%x: tensor<?x{K}xf32>, %x3: tensor<2x?x{K}xf32>)
    -> (tensor<?x{N}xf32>, tensor<2x?x{N}xf32>) {{
  %w4 = arith.constant {_dense(i4_codes, i4_type)}
  %s4 = arith.constant {_dense(i4_scale, f"tensor<{K // G}x{N}xf32>")}
  %b = arith.constant dense<{bias.tolist()}> : tensor<{N}xf32>
  %w8 = arith.constant {_dense(i8_codes, f"tensor<{K}x{N}xi8>")}
  %s8 = arith.constant dense<{i8_scale.tolist()}> : tensor<{N}xf32>
  %0 = sits.qmatmul %x, %w4, %s4 bias(%b) {{axis = 0 : i64, block_size = {G} : i64,
      activation = #sits.activation<silu>}}
      : (tensor<?x{K}xf32>, {i4_type}, tensor<{K // G}x{N}xf32>, tensor<{N}xf32>)
      -> tensor<?x{N}xf32>
  %1 = sits.qmatmul %x3, %w8, %s8 {{axis = 1 : i64}}
      : (tensor<2x?x{K}xf32>, tensor<{K}x{N}xi8>, tensor<{N}xf32>) -> tensor<2x?x{N}xf32>
  return %0, %1 : tensor<?x{N}xf32>, tensor<2x?x{N}xf32>
}}
"""


@pytest.fixture(scope="module")
def weights():
    rng = np.random.default_rng(7)
    return {
        "i4": rng.integers(-8, 8, size=(K, N)),
        "s4": (rng.random((K // G, N)) * 0.05 + 0.01).astype(np.float32),
        "bias": rng.standard_normal(N).astype(np.float32),
        "i8": rng.integers(-128, 128, size=(K, N)),
        "s8": (rng.random(N) * 0.01 + 0.001).astype(np.float32),
    }


def _compile(weights, path, **options):
    source = path.with_suffix(".mlir")
    source.write_text(_module(weights["i4"], weights["s4"], weights["bias"], weights["i8"],
                              weights["s8"]))
    return sits_mlir.compile(str(source), "cpu", path, threads=2, **options)


def _silu(v):
    return v / (1 + np.exp(-v.astype(np.float64)))


@pytest.fixture(scope="module")
def integer_dot(weights, tmp_path_factory):
    return _compile(weights, tmp_path_factory.mktemp("qdot") / "qdot.sitsm")


@pytest.mark.parametrize("rows", [1, 3, 17, 64])
def test_outputs_equal_the_integer_arithmetic(weights, integer_dot, rows):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, K)).astype(np.float32)
    x3 = rng.standard_normal((2, rows, K)).astype(np.float32)
    x3[1, 0] = 0.0  # an all-zero row: scale 0, codes 0
    y4, y8 = integer_dot.load().run(x, x3)
    acc4 = qdot_reference(x, weights["i4"], weights["s4"], G, per_channel=False)
    np.testing.assert_allclose(y4, _silu(acc4 + weights["bias"]), rtol=2e-5, atol=2e-5)
    # INT8 per channel: activation groups of 128 along K.
    acc8 = qdot_reference(x3.reshape(-1, K), weights["i8"], weights["s8"], 128,
                          per_channel=True)
    np.testing.assert_allclose(y8.reshape(-1, N), acc8, rtol=1e-5, atol=1e-6)
    assert not np.any(y8[1, 0])


def test_kernel_is_called(integer_dot):
    data = open(integer_dot.path, "rb").read()
    assert b"sitsRuntimeQDot" in data


def test_off_keeps_weight_only_dequantization(weights, tmp_path):
    artifact = _compile(weights, tmp_path / "weight-only.sitsm", int8_activations=False)
    assert b"sitsRuntimeQDot" not in open(artifact.path, "rb").read()
    x = np.random.default_rng(1).standard_normal((3, K)).astype(np.float32)
    x3 = np.random.default_rng(2).standard_normal((2, 2, K)).astype(np.float32)
    y4, y8 = artifact.load().run(x, x3)
    w4 = (weights["i4"].reshape(K // G, G, N) * weights["s4"][:, None, :]).reshape(K, N)
    np.testing.assert_allclose(y4, _silu(x.astype(np.float64) @ w4 + weights["bias"]),
                               rtol=1e-4, atol=1e-4)
    w8 = weights["i8"] * weights["s8"][None, :]
    np.testing.assert_allclose(y8.reshape(-1, N), x3.reshape(-1, K).astype(np.float64) @ w8,
                               rtol=1e-4, atol=1e-4)


def test_matmul_nbits(tmp_path):
    """onnxruntime's MatMulNBits (INT4 with its default zero point 8, stored
    [N, K]) with accuracy_level 4 reaches the INT8 kernel as centred INT8
    codes; below level 4 its input stays in floating point."""
    rng = np.random.default_rng(3)
    n, k, bs = 32, 128, 32
    q = rng.integers(0, 16, size=(n, k))
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8).reshape(n, k // bs, bs // 2)
    scales = (rng.random((n, k // bs)) * 0.1 + 0.01).astype(np.float32)
    node = h.make_node("MatMulNBits", ["x", "b", "scales"], ["y"], domain="com.microsoft",
                       K=k, N=n, bits=4, block_size=bs, accuracy_level=4)
    graph = h.make_graph([node], "nbits", [h.make_tensor_value_info("x", TP.FLOAT, ["m", k])],
                         [h.make_tensor_value_info("y", TP.FLOAT, ["m", n])],
                         [numpy_helper.from_array(packed, "b"),
                          numpy_helper.from_array(scales, "scales")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17),
                                               h.make_opsetid("com.microsoft", 1)])
    path = tmp_path / "nbits.onnx"
    onnx.save(model, str(path))
    artifact = sits_mlir.compile(str(path), "cpu", tmp_path / "nbits.sitsm", threads=2)
    assert b"sitsRuntimeQDot" in open(artifact.path, "rb").read()
    x = rng.standard_normal((5, k)).astype(np.float32)
    (y,) = artifact.load().run(x=x)
    codes = (q - 8).T  # [K, N]
    np.testing.assert_allclose(y, qdot_reference(x, codes, scales.T.copy(), bs, False),
                               rtol=1e-5, atol=1e-5)

    level = next(a for a in model.graph.node[0].attribute if a.name == "accuracy_level")
    level.i = 1  # fp32 compute
    onnx.save(model, str(path))
    artifact = sits_mlir.compile(str(path), "cpu", tmp_path / "nbits-f32.sitsm", threads=2)
    assert b"sitsRuntimeQDot" not in open(artifact.path, "rb").read()
    (y,) = artifact.load().run(x=x)
    w = (codes.reshape(k // bs, bs, n) * scales.T[:, None, :]).reshape(k, n)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
