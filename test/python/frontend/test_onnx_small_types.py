"""fp8, fp4, int4, uint4 and int2 at the model boundary and in casts and
quantization, against ONNX's reference implementation (bit for bit where
the reference defines the bits).

These types have no NumPy or LLVM equivalent: arrays of them are ml_dtypes
arrays, they cross the runtime boundary as their bytes, and the compiled
code converts them in integer arithmetic (sits-cpu-expand-small-floats)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import sits_mlir
from sits_mlir.runtime import SignatureError

FP8 = {
    "float8_e4m3fn": TP.FLOAT8E4M3FN,
    "float8_e5m2": TP.FLOAT8E5M2,
    "float8_e4m3fnuz": TP.FLOAT8E4M3FNUZ,
    "float8_e5m2fnuz": TP.FLOAT8E5M2FNUZ,
}


def _model(nodes, inputs, outputs, opset=23):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _compile(model, tmp_path):
    return sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()


def _sweep() -> np.ndarray:
    """Values of every magnitude, ties, overflow and the special values."""
    rng = np.random.default_rng(0)
    x = [rng.standard_normal(500).astype(np.float32) * s for s in (1e-6, 1e-3, 1, 300, 6e4, 1e7)]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 448, 449, 464, 465, 480, 240, 248,
               57344, 61439, 61440, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -16,
               2.0 ** -17, 3 * 2.0 ** -18, 1.0625, 1.1875, -1.0625]
    return np.concatenate(x + [np.array(special, np.float32)])


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    return (got.view(np.uint8) == want.view(np.uint8)) | nan


@pytest.mark.parametrize("target", ["cpu", "level"])
def test_cast_to_bfloat16_rounds_to_nearest_even(target, tmp_path):
    """f32 -> bf16 is one instruction on CPUs with AVX-512 BF16 and integer
    code elsewhere (LLVM's fallback, a call to __truncsfbf2, is missing
    from most C runtimes): the host (`cpu`) and its named level (`level`,
    never with BF16) both round to nearest even, bit for bit."""
    from sits_mlir import targets

    name = "cpu" if target == "cpu" else targets.lookup("cpu").isa_level
    x = _sweep()
    model = _model([h.make_node("Cast", ["x"], ["y"], to=TP.BFLOAT16)],
                   [("x", TP.FLOAT, [x.size])], [("y", TP.BFLOAT16, [x.size])])
    got = sits_mlir.compile(model, target=name, output=tmp_path / "m.sitsm").load()(x)
    want = x.astype(ml_dtypes.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got.astype(np.float32))
                                                            & np.isnan(x))
    assert same.all(), f"{name}: {x[~same][:5]} -> {got[~same][:5]}, want {want[~same][:5]}"


@pytest.mark.parametrize("target", ["cpu", "level"])
def test_bfloat16_arithmetic(target, tmp_path):
    """bf16 arithmetic computes in f32 and rounds to bf16 where the target
    has no bf16 conversion too (LLVM's own lowering would call
    __truncsfbf2): a Celu, an Add and a Range-like chain match the
    reference within one bf16 rounding."""
    from sits_mlir import targets

    name = "cpu" if target == "cpu" else targets.lookup("cpu").isa_level
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(257) * 4).astype(ml_dtypes.bfloat16)
    y = (rng.standard_normal(257) * 4).astype(ml_dtypes.bfloat16)
    model = _model([h.make_node("Celu", ["x"], ["c"], alpha=2.0),
                    h.make_node("Add", ["c", "y"], ["z"])],
                   [("x", TP.BFLOAT16, [257]), ("y", TP.BFLOAT16, [257])],
                   [("z", TP.BFLOAT16, [257])])
    got = sits_mlir.compile(model, target=name, output=tmp_path / "m.sitsm").load()(x, y)
    want = ReferenceEvaluator(model).run(None, {"x": x, "y": y})[0]
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                               rtol=2 ** -7, atol=2 ** -7)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("name", sorted(FP8))
def test_cast_to_fp8_rounds_like_the_reference(name, saturate, tmp_path):
    x = _sweep()
    model = _model([h.make_node("Cast", ["x"], ["y"], to=FP8[name], saturate=saturate)],
                   [("x", TP.FLOAT, [x.size])], [("y", FP8[name], [x.size])])
    got = _compile(model, tmp_path)(x)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert got.dtype == np.dtype(getattr(ml_dtypes, name))
    same = _same_bits(got, want)
    assert same.all(), (x[~same][:8], got[~same][:8], want[~same][:8])


@pytest.mark.parametrize("name", sorted(FP8))
def test_every_fp8_code_decodes_exactly(name, tmp_path):
    dtype = np.dtype(getattr(ml_dtypes, name))
    codes = np.arange(256, dtype=np.uint8).view(dtype)
    model = _model([h.make_node("Cast", ["x"], ["y"], to=TP.FLOAT16)],
                   [("x", FP8[name], [256])], [("y", TP.FLOAT16, [256])])
    got = _compile(model, tmp_path)(codes)
    want = codes.astype(np.float16)
    both_nan = np.isnan(got) & np.isnan(want)
    np.testing.assert_array_equal(got[~both_nan], want[~both_nan])
    assert np.array_equal(np.isnan(got), np.isnan(want))


def test_fp8_to_fp8_and_fp4(tmp_path):
    x = _sweep()
    model = _model([h.make_node("Cast", ["x"], ["a"], to=TP.FLOAT8E5M2),
                    h.make_node("Cast", ["a"], ["b"], to=TP.FLOAT8E4M3FN),
                    h.make_node("Cast", ["x"], ["c"], to=TP.FLOAT4E2M1)],
                   [("x", TP.FLOAT, [x.size])],
                   [("b", TP.FLOAT8E4M3FN, [x.size]), ("c", TP.FLOAT4E2M1, [x.size])])
    b, c = _compile(model, tmp_path)(x)
    want_b, want_c = ReferenceEvaluator(model).run(None, {"x": x})
    assert _same_bits(b, want_b).all()
    # fp4 has no NaN; what NaN becomes is left open (the reference gives -0).
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(c.astype(np.float32)[finite], want_c.astype(np.float32)[finite])


@pytest.mark.parametrize("to", [TP.INT4, TP.UINT4, TP.INT2, TP.UINT2])
def test_sub_byte_integer_casts(to, tmp_path):
    x = np.arange(-9, 17, dtype=np.float32) * 0.75
    back = TP.INT8 if to in (TP.INT4, TP.INT2) else TP.UINT8
    model = _model([h.make_node("Cast", ["x"], ["q"], to=to),
                    h.make_node("Cast", ["q"], ["w"], to=back),
                    h.make_node("Cast", ["q"], ["f"], to=TP.FLOAT)],
                   [("x", TP.FLOAT, [x.size])],
                   [("q", to, [x.size]), ("w", back, [x.size]), ("f", TP.FLOAT, [x.size])])
    got = _compile(model, tmp_path)(x)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32))


@pytest.mark.parametrize("qtype", [TP.INT4, TP.UINT4, TP.INT2, TP.UINT8, TP.UINT16,
                                   TP.FLOAT8E4M3FN])
def test_quantize_dequantize_activations(qtype, tmp_path):
    """Per-axis QuantizeLinear into the type and DequantizeLinear back, the
    quantized tensor and the zero point being run-time values."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 8)) * 4).astype(np.float32)
    scale = np.array([0.5, 1.0, 2.0], np.float32)
    dtype = h.tensor_dtype_to_np_dtype(qtype)
    if qtype == TP.FLOAT8E4M3FN:
        zp_values = np.zeros(3)
    elif qtype in (TP.UINT4, TP.UINT8, TP.UINT16):
        zp_values = np.array([0, 1, 2])
    else:
        zp_values = np.array([0, 1, -1])
    zp = zp_values.astype(dtype)
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
             h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)]
    model = _model(nodes, [("x", TP.FLOAT, [3, 8]), ("s", TP.FLOAT, [3]), ("z", qtype, [3])],
                   [("q", qtype, [3, 8]), ("y", TP.FLOAT, [3, 8])], opset=21)
    q, y = _compile(model, tmp_path)(x, scale, zp)
    want_q, want_y = ReferenceEvaluator(model).run(None, {"x": x, "s": scale, "z": zp})
    assert q.dtype == want_q.dtype
    np.testing.assert_array_equal(q.astype(np.float32), want_q.astype(np.float32))
    np.testing.assert_array_equal(y, want_y)


@pytest.mark.parametrize("shift", [0.0, 3.0, -3.0])
def test_dynamic_quantize_linear(shift, tmp_path):
    x = (np.random.default_rng(2).standard_normal((4, 16)) + shift).astype(np.float32)
    model = _model([h.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
                   [("x", TP.FLOAT, [4, 16])],
                   [("y", TP.UINT8, [4, 16]), ("s", TP.FLOAT, []), ("z", TP.UINT8, [])])
    y, s, z = _compile(model, tmp_path)(x)
    want_y, want_s, want_z = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(s, want_s, rtol=1e-7)
    assert z == want_z
    # x / scale may land within an ulp of a rounding tie.
    assert np.abs(y.astype(int) - want_y.astype(int)).max() <= 1
    assert (y == want_y).mean() > 0.98


def test_boundary_refuses_the_wrong_small_type(tmp_path):
    model = _model([h.make_node("Cast", ["x"], ["y"], to=TP.FLOAT)],
                   [("x", TP.FLOAT8E4M3FN, [4])], [("y", TP.FLOAT, [4])])
    m = _compile(model, tmp_path)
    assert m.inputs[0].dtype == "f8e4m3fn"
    with pytest.raises(SignatureError, match="float8_e5m2"):
        m(np.zeros(4, ml_dtypes.float8_e5m2))
    # The bits themselves (uint8) are accepted, as for bf16's uint16.
    np.testing.assert_array_equal(m(np.array([0x38, 0x40, 0xb8, 0], np.uint8)),
                                  [1.0, 2.0, -1.0, 0.0])
