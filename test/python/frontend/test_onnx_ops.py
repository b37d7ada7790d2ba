"""Every supported ONNX op, one small model each: the frontend's IR, run by
the NumPy reference interpreter, must agree with onnxruntime."""


import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

import sits_mlir
from sits_mlir.frontend.onnx import import_model
from sits_mlir.testing.reference import evaluate

ort = pytest.importorskip("onnxruntime")

_IR_VERSION = {13: 7, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 23: 11}
RNG = np.random.default_rng(1234)


def rand(*shape, dtype=np.float32, low=-2.0, high=2.0):
    if np.dtype(dtype).kind in "iu":
        return np.asarray(RNG.integers(int(low), int(high), shape)).astype(dtype)
    if dtype == np.bool_:
        return np.asarray(RNG.random(shape) > 0.5)
    return np.asarray(RNG.uniform(low, high, shape)).astype(dtype)


def make(nodes, inputs, inits=None, outputs=None, opset=17, extra_opsets=(), output_like=None):
    """A model of `nodes` with runtime `inputs` and constant `inits`; output
    types are inferred, or copied from input `output_like`."""
    inits = inits or {}
    seen = set()
    for i, n in enumerate(nodes):
        if n.name in seen:
            n.name = f"{n.name}_{i}"
        seen.add(n.name)
    if outputs is None:
        outputs = [o for o in nodes[-1].output if o]
    graph = h.make_graph(
        nodes, "test",
        [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [h.make_empty_tensor_value_info(o) if output_like is None else
         h.make_tensor_value_info(o, h.np_dtype_to_tensor_dtype(inputs[output_like].dtype),
                                  inputs[output_like].shape) for o in outputs],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)] +
                         [h.make_opsetid(d, v) for d, v in extra_opsets],
                         ir_version=_IR_VERSION[opset])
    return onnx.shape_inference.infer_shapes(model)


def run_both(model, inputs):
    im = import_model(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    # Exact semantics: no QDQ fusion or other approximating rewrites.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    expected = sess.run(None, inputs)
    actual = evaluate(im, inputs)
    return im, actual, expected


def check(nodes, inputs, inits=None, *, opset=17, rtol=1e-4, atol=1e-5, expect=(),
          reject=(), outputs=None, extra_opsets=(), output_like=None):
    """Imports, compares with onnxruntime, and checks the printed IR contains
    every string in `expect` and none in `reject`. Returns the IR text."""
    if isinstance(nodes, onnx.NodeProto):
        nodes = [nodes]
    model = make(nodes, inputs, inits, outputs, opset, extra_opsets, output_like)
    im, actual, expected = run_both(model, inputs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape, (a.shape, e.shape)
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(a, e)
    text = im.module.operation.get_asm(large_resource_limit=64)
    for s in expect:
        assert s in text, f"'{s}' not in\n{text}"
    for s in reject:
        assert s not in text, f"'{s}' in\n{text}"
    return text


def node(op, ins, outs=("y",), **attrs):
    return h.make_node(op, list(ins), list(outs), name=f"the_{op.lower()}", **attrs)


# -- elementwise ---------------------------------------------------------------

BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)),
              ((1,), (2, 3)), ((), (2, 3)), ((5, 1, 1, 7), (1, 6, 1))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("sa,sb", BROADCASTS)
def test_binary_broadcasting(op, sa, sb):
    b = rand(*sb, low=0.5, high=2.0)
    text = check(node(op, ["a", "b"]), {"a": rand(*sa), "b": b})
    if sa != sb:
        assert "linalg.broadcast" in text or "tensor.expand_shape" in text


def test_broadcasting_property(tmp_path):
    """Random mutually broadcastable shapes through a binary op and Where."""
    pytest.importorskip("hypothesis")
    from hypothesis import given, settings, strategies as st
    from hypothesis.configuration import set_hypothesis_home_dir
    from hypothesis.extra import numpy as hnp

    set_hypothesis_home_dir(str(tmp_path))  # keep .hypothesis/ out of the checkout

    @settings(max_examples=30, deadline=None, derandomize=True, database=None)
    @given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4,
                                                    min_side=1, max_side=3),
           op=st.sampled_from(["Add", "Mul", "Sub", "Max", "Greater"]))
    def run(shapes, op):
        a, b, c = shapes.input_shapes
        nodes = [node(op, ["a", "b"], ["t"])]
        if op == "Greater":
            nodes.append(node("Where", ["t", "a", "b"]))
        else:
            nodes.append(node("Where", ["c", "t", "b"]))
        check(nodes, {"a": rand(*a), "b": rand(*b), "c": rand(*c, dtype=np.bool_)})
    run()


@pytest.mark.parametrize("op", ["Add", "Mul", "Sub"])
def test_binary_with_constant_operands(op):
    # A scalar constant becomes a splat; a vector constant is broadcast.
    text = check([node(op, ["x", "s"], ["t"]), node(op, ["t", "v"])],
                 {"x": rand(2, 3, 4)}, {"s": np.array(0.5, np.float32), "v": rand(4)})
    assert "dense<5.000000e-01> : tensor<2x3x4xf32>" in text


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_integer_binary(op, dtype):
    a = rand(3, 4, dtype=dtype, low=-50, high=50)
    b = rand(4, dtype=dtype, low=1, high=9) * np.where(rand(4) > 0, 1, -1).astype(dtype)
    check(node(op, ["a", "b"]), {"a": a, "b": b})


def _bit_shift_reference(x, y, left):
    """ONNX BitShift: the amount read as unsigned; shifting by the width or
    more leaves 0, or the sign of a signed value shifted right."""
    bits = x.dtype.itemsize * 8
    amount = y.astype(np.uint64) & np.uint64(2 ** bits - 1)
    wide = x.astype(object)
    out = []
    for v, a in zip(wide.ravel(), amount.ravel()):
        a = int(a)
        if left:
            out.append(0 if a >= bits else (v << a))
        else:
            out.append((-1 if v < 0 else 0) if a >= bits else (v >> a))
    mask = 2 ** bits - 1
    return np.array([o & mask for o in out], dtype=np.uint64).astype(
        x.dtype.str.replace("i", "u")).view(x.dtype).reshape(x.shape)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift_by_the_width_or_more(dtype, direction, tmp_path):
    """Compiled, not interpreted: LLVM leaves shifts by the width or more
    undefined and each ISA answers its own way (AVX-512 shifts bytes
    natively, AVX2 widens them), so the code must not depend on it."""
    bits = np.dtype(dtype).itemsize * 8
    x = np.array([-8, 4, -1, 1, 100, -128, 37, 0] * 4).astype(dtype)
    y = np.array(list(range(0, bits + 2, max(1, bits // 8)))[:8] + [bits - 1, bits, bits + 1, 127,
                 -1, -8, -16, 255] * 3)[:x.size].astype(dtype)
    # Signed types are BitShift's since opset 28.
    tensor = h.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = h.make_graph([node("BitShift", ["x", "y"], direction=direction)], "shift",
                         [h.make_tensor_value_info(n, tensor, [x.size]) for n in "xy"],
                         [h.make_tensor_value_info("y_out", tensor, [x.size])])
    graph.node[0].output[0] = "y_out"
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 28)])
    got = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()(x, y)
    np.testing.assert_array_equal(got, _bit_shift_reference(x, y, direction == "LEFT"))


@pytest.mark.parametrize("fmod,dtype", [(0, np.int64), (1, np.int32), (1, np.float32)])
def test_mod(fmod, dtype):
    a = rand(3, 5, dtype=dtype, low=-20, high=20)
    b = np.array([3, -4, 5, -7, 2], dtype=dtype)
    check(node("Mod", ["a", "b"], fmod=fmod), {"a": a, "b": b}, expect=["arith.rem"])


def test_pow():
    check(node("Pow", ["a", "b"]), {"a": rand(2, 3, low=0.1, high=3), "b": rand(3)},
          expect=["math.powf"])
    check(node("Pow", ["a", "e"]), {"a": rand(2, 3)}, {"e": np.array(2.0, np.float32)},
          expect=["arith.mulf"])
    check(node("Pow", ["a", "e"]), {"a": rand(2, 3, low=0, high=3)},
          {"e": np.array(3, np.int64)}, expect=["math.powf"])


@pytest.mark.parametrize("op", ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_comparisons(op, dtype):
    a = rand(2, 3, 4, dtype=dtype, low=-3, high=3).round().astype(dtype)
    b = rand(3, 1, dtype=dtype, low=-3, high=3).round().astype(dtype)
    check(node(op, ["a", "b"]), {"a": a, "b": b}, expect=["arith.cmp"])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    check(node(op, ["a", "b"]), {"a": rand(2, 3, dtype=np.bool_), "b": rand(3, dtype=np.bool_)})


def test_not_and_where():
    check([node("Not", ["c"], ["n"]), node("Where", ["n", "a", "b"])],
          {"c": rand(3, 1, dtype=np.bool_), "a": rand(2, 3, 4), "b": rand(4)},
          expect=["arith.select"])


def test_variadic_sum_mean_max():
    ins = {"a": rand(2, 3), "b": rand(3), "c": rand(1, 3)}
    for op in ("Sum", "Mean", "Max", "Min"):
        check(node(op, ["a", "b", "c"]), ins)


UNARY = [("Sqrt", 0.1, 4), ("Exp", -3, 3), ("Log", 0.1, 5), ("Erf", -3, 3), ("Abs", -3, 3),
         ("Neg", -3, 3), ("Floor", -3, 3), ("Ceil", -3, 3), ("Round", -3, 3), ("Sin", -3, 3),
         ("Cos", -3, 3), ("Tan", -1, 1), ("Atan", -3, 3), ("Reciprocal", 0.5, 3)]


@pytest.mark.parametrize("op,low,high", UNARY)
def test_unary_float(op, low, high):
    check(node(op, ["x"]), {"x": rand(3, 4, low=low, high=high)})


def test_round_half_to_even():
    check(node("Round", ["x"]), {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], np.float32)})


def test_integer_abs_neg_and_isnan():
    check(node("Abs", ["x"]), {"x": rand(5, dtype=np.int64, low=-9, high=9)})
    check(node("Neg", ["x"]), {"x": rand(5, dtype=np.int32, low=-9, high=9)})
    check(node("IsNaN", ["x"]), {"x": np.array([1.0, np.nan, -np.inf], np.float32)})


@pytest.mark.parametrize("op,kind", [("Relu", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh")])
def test_activations(op, kind):
    check(node(op, ["x"]), {"x": rand(2, 8, low=-5, high=5)},
          expect=[f"sits.activation <{kind}>"])


@pytest.mark.parametrize("approximate,kind", [("none", "gelu"), ("tanh", "gelu_tanh")])
def test_gelu_opset20(approximate, kind):
    check(node("Gelu", ["x"], approximate=approximate), {"x": rand(4, 16, low=-4, high=4)},
          opset=20, expect=[f"sits.activation <{kind}>"])


@pytest.mark.parametrize("op,attrs", [("LeakyRelu", {"alpha": 0.2}), ("Elu", {"alpha": 0.7}),
                                      ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
                                      ("HardSwish", {})])
def test_other_activations(op, attrs):
    check(node(op, ["x"], **attrs), {"x": rand(3, 7, low=-5, high=5)})


def test_prelu():
    check(node("PRelu", ["x", "s"]), {"x": rand(2, 3, 4, 4)}, {"s": rand(3, 1, 1)})


def test_clip():
    check(node("Clip", ["x", "lo", "hi"]), {"x": rand(3, 4, low=-3, high=3)},
          {"lo": np.array(-1.0, np.float32), "hi": np.array(0.5, np.float32)})
    check(node("Clip", ["x", "", "hi"]), {"x": rand(3, 4)}, {"hi": np.array(0.0, np.float32)})
    check(node("Clip", ["x", "lo"]), {"x": rand(6, dtype=np.int64, low=-9, high=9)},
          {"lo": np.array(-2, np.int64)})


CASTS = [(np.float32, TP.INT64), (np.float32, TP.INT32), (np.int64, TP.FLOAT),
         (np.float32, TP.FLOAT16), (np.float32, TP.DOUBLE), (np.float32, TP.BOOL),
         (np.bool_, TP.FLOAT), (np.int32, TP.INT64), (np.int64, TP.INT8), (np.bool_, TP.INT32),
         (np.uint8, TP.FLOAT), (np.int64, TP.BOOL)]


@pytest.mark.parametrize("src,to", CASTS)
def test_cast(src, to):
    if src == np.bool_:
        x = rand(2, 5, dtype=np.bool_)
    elif np.dtype(src).kind == "f":
        x = rand(2, 5, low=-100, high=100)
    elif src == np.uint8:
        x = rand(2, 5, dtype=np.uint8, low=0, high=255)
    else:
        x = rand(2, 5, dtype=src, low=-300, high=300)
    check(node("Cast", ["x"], to=to), {"x": x})


def test_identity_and_dropout():
    check([node("Identity", ["x"], ["i"]), node("Dropout", ["i", "r"], ["y"])],
          {"x": rand(3, 3)}, {"r": np.array(0.3, np.float32)})


# -- contractions ----------------------------------------------------------------

MATMULS = [((4, 8), (8, 5)), ((2, 4, 8), (8, 5)), ((2, 3, 4, 8), (2, 3, 8, 5)),
           ((8,), (8, 5)), ((4, 8), (8,)), ((2, 1, 4, 8), (3, 8, 6)), ((8,), (2, 8, 3))]


@pytest.mark.parametrize("sa,sb", MATMULS)
def test_matmul(sa, sb):
    check(node("MatMul", ["a", "b"]), {"a": rand(*sa), "b": rand(*sb)}, expect=["sits.matmul"])


def test_matmul_with_constant_weight_and_bias_fuses():
    text = check([node("MatMul", ["x", "w"], ["m"]), node("Add", ["b", "m"])],
                 {"x": rand(2, 6, 8)}, {"w": rand(8, 16), "b": rand(16)},
                 expect=["sits.matmul", "bias("], reject=["arith.addf"])
    assert 'loc("the_matmul")' not in text  # locations are printed only with debug info


GEMMS = [dict(), dict(transA=1), dict(transB=1), dict(transA=1, transB=1),
         dict(alpha=0.5), dict(beta=2.0), dict(alpha=1.5, beta=0.25, transB=1)]


@pytest.mark.parametrize("attrs", GEMMS)
@pytest.mark.parametrize("c_shape", [(6,), (1, 6), (4, 6), (4, 1), ()])
def test_gemm(attrs, c_shape):
    a = rand(8, 4) if attrs.get("transA") else rand(4, 8)
    b = rand(6, 8) if attrs.get("transB") else rand(8, 6)
    text = check(node("Gemm", ["a", "b", "c"], **attrs), {"a": a},
                 {"b": b, "c": rand(*c_shape)}, expect=["sits.matmul"])
    if attrs.get("transB"):
        assert "transpose_rhs" in text
    if c_shape in ((6,), (1, 6)) and attrs.get("alpha", 1.0) == 1.0:
        assert "bias(" in text


def test_gemm_without_c_and_with_runtime_c():
    check(node("Gemm", ["a", "b"], transB=1), {"a": rand(3, 5), "b": rand(4, 5)})
    check(node("Gemm", ["a", "b", "c"], beta=0.5), {"a": rand(3, 5), "b": rand(5, 4),
                                                    "c": rand(4)}, expect=["bias("])


CONVS = [
    dict(x=(1, 3, 9, 9), w=(4, 3, 3, 3)),
    dict(x=(2, 4, 10, 8), w=(6, 4, 3, 3), pads=[1, 1, 1, 1], strides=[2, 2]),
    dict(x=(1, 4, 11, 11), w=(4, 1, 3, 3), group=4, dilations=[2, 2], pads=[2, 2, 2, 2]),
    dict(x=(1, 4, 8, 8), w=(6, 2, 3, 3), group=2, pads=[0, 1, 2, 1]),
    dict(x=(1, 3, 10, 9), w=(5, 3, 3, 2), auto_pad="SAME_UPPER", strides=[2, 2]),
    dict(x=(1, 3, 10, 9), w=(5, 3, 4, 4), auto_pad="SAME_LOWER", strides=[3, 2]),
    dict(x=(1, 3, 10, 9), w=(5, 3, 3, 3), auto_pad="VALID", strides=[2, 1]),
    dict(x=(2, 3, 16), w=(4, 3, 5), pads=[2, 1], strides=[2]),
    dict(x=(1, 2, 6, 6, 6), w=(3, 2, 3, 3, 3), pads=[1, 1, 1, 1, 1, 1]),
]


@pytest.mark.parametrize("case", CONVS, ids=lambda c: "x".join(map(str, c["x"])) + str(len(c)))
@pytest.mark.parametrize("bias", [False, True])
def test_conv(case, bias):
    case = dict(case)
    x, w = rand(*case.pop("x")), rand(*case.pop("w"))
    ins = ["x", "w"] + (["b"] if bias else [])
    inits = {"w": w}
    if bias:
        inits["b"] = rand(w.shape[0])
    check(node("Conv", ins, **case), {"x": x}, inits, expect=["sits.conv"])


def test_conv_with_runtime_filter():
    check(node("Conv", ["x", "w"], pads=[1, 1, 1, 1]), {"x": rand(1, 2, 5, 5), "w": rand(3, 2, 3, 3)})


def bn_params(c):
    return {"s": rand(c, low=0.5, high=1.5), "bb": rand(c), "m": rand(c),
            "v": rand(c, low=0.5, high=2.0)}


def test_conv_batchnorm_folds():
    inits = {"w": rand(8, 3, 3, 3), "cb": rand(8), **bn_params(8)}
    check([node("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]),
           node("BatchNormalization", ["c", "s", "bb", "m", "v"], epsilon=1e-3)],
          {"x": rand(1, 3, 8, 8)}, inits, expect=["sits.conv"],
          reject=["arith.mulf", "arith.addf"])


def test_batchnorm_alone_and_with_runtime_parameters():
    check(node("BatchNormalization", ["x", "s", "bb", "m", "v"]), {"x": rand(2, 4, 3, 3)},
          bn_params(4), expect=["arith.mulf", "arith.addf"])
    check(node("BatchNormalization", ["x", "s", "bb", "m", "v"]),
          {"x": rand(2, 4, 5), **bn_params(4)})
    # A conv whose result is also used elsewhere keeps its own op.
    inits = {"w": rand(4, 3, 1, 1), **bn_params(4)}
    check([node("Conv", ["x", "w"], ["c"]), node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
           node("Add", ["c", "n"])], {"x": rand(1, 3, 4, 4)}, inits, expect=["arith.mulf"])


# -- pooling ---------------------------------------------------------------------

POOLS = [dict(kernel_shape=[3, 3]),
         dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
         dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 0, 1], ceil_mode=1),
         dict(kernel_shape=[2, 2], auto_pad="SAME_UPPER", strides=[2, 2]),
         dict(kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2])]


@pytest.mark.parametrize("attrs", POOLS)
def test_max_pool(attrs):
    check(node("MaxPool", ["x"], **attrs), {"x": rand(2, 3, 9, 10)}, opset=19,
          expect=["linalg.pooling_nchw_max"])


@pytest.mark.parametrize("attrs", POOLS)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool(attrs, include_pad):
    check(node("AveragePool", ["x"], count_include_pad=include_pad, **attrs),
          {"x": rand(2, 3, 9, 10)}, opset=19, expect=["linalg.pooling_nchw_sum"])


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(op):
    check(node(op, ["x"]), {"x": rand(2, 5, 4, 6)}, expect=["linalg.reduce"])


# -- normalization and softmax --------------------------------------------------

@pytest.mark.parametrize("axis,scale_shape,bias", [(-1, (16,), True), (-2, (6, 16), True),
                                                   (-1, (16,), False), (2, (1, 16), True)])
def test_layer_normalization(axis, scale_shape, bias):
    ins = ["x", "g"] + (["b"] if bias else [])
    inits = {"g": rand(*scale_shape), "b": rand(*scale_shape)} if bias else {"g": rand(*scale_shape)}
    check(node("LayerNormalization", ins, axis=axis, epsilon=1e-3), {"x": rand(2, 6, 16)}, inits,
          expect=["sits.layer_norm"])


def test_rms_normalization_opset23():
    check(node("RMSNormalization", ["x", "g"], epsilon=1e-6), {"x": rand(2, 5, 32)},
          {"g": rand(32)}, opset=23, expect=["sits.rms_norm"])


def test_simplified_layer_normalization_contrib():
    check(node("SimplifiedLayerNormalization", ["x", "g"], epsilon=1e-6),
          {"x": rand(2, 5, 32)}, {"g": rand(32)}, expect=["sits.rms_norm"], output_like="x")


@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
def test_softmax(axis):
    check(node("Softmax", ["x"], axis=axis), {"x": rand(3, 4, 5, low=-5, high=5)},
          expect=["sits.softmax"])


@pytest.mark.parametrize("axis", [-1, 1])
def test_log_softmax(axis):
    check(node("LogSoftmax", ["x"], axis=axis), {"x": rand(3, 4, 5, low=-5, high=5)})


# -- reductions ------------------------------------------------------------------

REDUCES = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
           "ReduceSumSquare", "ReduceL1", "ReduceL2"]


@pytest.mark.parametrize("op", REDUCES)
@pytest.mark.parametrize("axes,keepdims", [([-1], 1), ([0, 2], 0), (None, 1), ([1], 0)])
@pytest.mark.parametrize("opset", [13, 18])
def test_reductions(op, axes, keepdims, opset):
    x = rand(3, 4, 5, low=0.5, high=1.5)
    takes_input = opset >= 18 or op == "ReduceSum"
    if axes is None:
        n = node(op, ["x"], keepdims=keepdims)
        inits = {}
    elif takes_input:
        n = node(op, ["x", "axes"], keepdims=keepdims)
        inits = {"axes": np.array(axes, np.int64)}
    else:
        n = node(op, ["x"], axes=axes, keepdims=keepdims)
        inits = {}
    check(n, {"x": x}, inits, opset=opset, expect=["linalg.reduce"])


def test_reduce_noop_and_integer_max():
    check(node("ReduceSum", ["x", "axes"], noop_with_empty_axes=1), {"x": rand(2, 3)},
          {"axes": np.array([], np.int64)})
    check(node("ReduceMax", ["x"], axes=[1], keepdims=0), {"x": rand(3, 4, dtype=np.int64, low=-9, high=9)},
          opset=13)


# -- shapes ------------------------------------------------------------------------

def test_reshape_collapse_expand_and_general():
    x = rand(2, 3, 4)
    check(node("Reshape", ["x", "s"]), {"x": x}, {"s": np.array([2, 12], np.int64)},
          expect=["tensor.collapse_shape"])
    check(node("Reshape", ["x", "s"]), {"x": x}, {"s": np.array([0, 3, 2, -1], np.int64)},
          expect=["tensor.expand_shape"])
    check(node("Reshape", ["x", "s"]), {"x": x}, {"s": np.array([4, 6], np.int64)},
          expect=["tensor.reshape"])


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(axis):
    check(node("Flatten", ["x"], axis=axis), {"x": rand(2, 3, 4)})


def test_squeeze_unsqueeze():
    check(node("Squeeze", ["x", "a"]), {"x": rand(1, 3, 1, 4)}, {"a": np.array([0, -2], np.int64)},
          expect=["tensor.collapse_shape"])
    check(node("Unsqueeze", ["x", "a"]), {"x": rand(3, 4)}, {"a": np.array([0, -1], np.int64)},
          expect=["tensor.expand_shape"])
    check(node("Squeeze", ["x"]), {"x": rand(1, 3, 1)})


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], None])
def test_transpose(perm):
    attrs = {"perm": perm} if perm else {}
    check(node("Transpose", ["x"], **attrs), {"x": rand(2, 3, 4)}, expect=["linalg.transpose"])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for i, s in enumerate(shapes):
        s[axis] += i
    check(node("Concat", ["a", "b", "c"], axis=axis),
          {"a": rand(*shapes[0])}, {"b": rand(*shapes[1]), "c": rand(*shapes[2])},
          expect=["tensor.concat"])


SLICES = [([1], [3], None, None), ([-3], [1000], [1], None), ([0, 1], [-1, 5], [0, 2], [2, 2]),
          ([2], [-1], [-1], [3]), ([-100], [100], [0], None)]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice(starts, ends, axes, steps):
    inits = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64)}
    ins = ["x", "s", "e"]
    if axes is not None:
        inits["a"] = np.array(axes, np.int64)
        ins.append("a")
    if steps is not None:
        if axes is None:
            ins.append("")
        inits["st"] = np.array(steps, np.int64)
        ins.append("st")
    check(node("Slice", ins), {"x": rand(4, 6, 9)}, inits)


def test_split():
    x = {"x": rand(2, 9, 4)}
    check(node("Split", ["x", "s"], ["a", "b", "c"], axis=1), x, {"s": np.array([2, 3, 4], np.int64)},
          expect=["tensor.extract_slice"])
    check(node("Split", ["x"], ["a", "b", "c"], axis=1), x)
    check(node("Split", ["x"], ["a", "b"], axis=-2, num_outputs=2), x, opset=18)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_runtime_indices(axis):
    data = rand(5, 6, 7)
    idx = RNG.integers(-data.shape[axis], data.shape[axis], (2, 3)).astype(np.int64)
    check(node("Gather", ["d", "i"], axis=axis), {"i": idx}, {"d": data},
          expect=["linalg.generic", "tensor.extract"])


def test_gather_embedding_and_constant_indices():
    table = rand(50, 8)
    check(node("Gather", ["t", "i"]), {"i": np.array([[1, 49, 0, 7]], np.int64)}, {"t": table})
    check(node("Gather", ["x", "i"], axis=1), {"x": rand(3, 5, 2)}, {"i": np.array(-2, np.int64)},
          expect=["tensor.extract_slice"], reject=["linalg.generic"])
    check(node("Gather", ["x", "i"], axis=1), {"x": rand(3, 5, 2)}, {"i": np.array([1, 2, 3], np.int64)},
          reject=["linalg.generic"])
    check(node("Gather", ["x", "i"], axis=1), {"x": rand(3, 5, 2)},
          {"i": np.array([[4, 0], [2, 2]], np.int64)}, expect=["linalg.generic"])


def test_expand_tile_pad():
    check(node("Expand", ["x", "s"]), {"x": rand(3, 1)}, {"s": np.array([2, 3, 4], np.int64)},
          expect=["linalg.broadcast"])
    check(node("Tile", ["x", "r"]), {"x": rand(2, 3)}, {"r": np.array([2, 3], np.int64)})
    check(node("Pad", ["x", "p", "v"]), {"x": rand(2, 3)},
          {"p": np.array([0, 1, 2, 0], np.int64), "v": np.array(1.5, np.float32)},
          expect=["tensor.pad"])
    check(node("Pad", ["x", "p", "", "a"]), {"x": rand(2, 3, 4)},
          {"p": np.array([1, 2], np.int64), "a": np.array([-1], np.int64)}, opset=18)


@pytest.mark.parametrize("upper,k", [(1, 0), (0, 0), (1, 1), (0, -1)])
def test_trilu_runtime(upper, k):
    check(node("Trilu", ["x", "k"], upper=upper), {"x": rand(2, 4, 5)}, {"k": np.array(k, np.int64)})


def test_shape_arithmetic_folds_at_import():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write it.
    nodes = [node("Shape", ["x"], ["sh"]), node("Gather", ["sh", "zero"], ["b"], axis=0),
             node("Unsqueeze", ["b", "ax"], ["b1"]), node("Concat", ["b1", "m1"], ["ns"], axis=0),
             node("Reshape", ["x", "ns"])]
    text = check(nodes, {"x": rand(2, 3, 4)}, {"zero": np.array(0, np.int64),
                                               "ax": np.array([0], np.int64),
                                               "m1": np.array([-1], np.int64)})
    assert "tensor.collapse_shape" in text and "tensor.from_elements" not in text


def test_constant_nodes_and_range_fold():
    nodes = [h.make_node("Constant", [], ["c"], value=numpy_helper.from_array(rand(4, 5), "c")),
             node("Range", ["s", "l", "d"], ["r"]), node("Cast", ["r"], ["rf"], to=TP.FLOAT),
             node("Add", ["x", "c"], ["t"]), node("Mul", ["t", "rf"])]
    check(nodes, {"x": rand(4, 5)}, {"s": np.array(0, np.int64), "l": np.array(5, np.int64),
                                     "d": np.array(1, np.int64)}, reject=["linalg.generic"])


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["4d", "3d"])
def test_rotary_embedding(interleaved, layout):
    # Llama-style RoPE: [B, H, S, D] (or [B, S, H*D] with num_heads), cos/sin
    # caches indexed by position_ids, half of each head rotated.
    b, heads, s, d, max_pos = 2, 3, 5, 8, 16
    x = rand(b, heads, s, d) if layout == "4d" else rand(b, s, heads * d)
    angles = np.arange(max_pos)[:, None] * (0.5 ** np.arange(d // 4))[None, :]
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": d // 2}
    if layout == "3d":
        attrs["num_heads"] = heads
    pos = np.array([[0, 1, 2, 3, 4], [7, 3, 9, 15, 0]], np.int64)
    check(node("RotaryEmbedding", ["x", "cos", "sin", "pos"], **attrs), {"x": x},
          {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32),
           "pos": pos}, opset=23)


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),                      # implicit output
    ("ii->i", [(4, 4)]),                              # diagonal
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("...j,...j->...", [(2, 1, 4), (1, 3, 4)]),       # broadcast under ...
    ("i,i", [(6,), (6,)]),                            # to a scalar
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 8), (1, 2, 5, 8)]),
])
def test_einsum(equation, shapes, tmp_path):
    # Compiled (the IR evaluator runs only parallel generics) against NumPy.
    ins = {f"x{k}": rand(*s) for k, s in enumerate(shapes)}
    want = np.einsum(equation, *ins.values())
    graph = h.make_graph(
        [node("Einsum", list(ins), equation=equation)], "einsum",
        [h.make_tensor_value_info(n, TP.FLOAT, a.shape) for n, a in ins.items()],
        [h.make_tensor_value_info("y", TP.FLOAT, want.shape)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    got = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()(*ins.values())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_ops_without_a_converter_import_through_their_function(tmp_path):
    # SwiGLU (opset 26+) has no converter of its own: the importer expands
    # its ONNX function body, so the model imports with no SwiGLU left.
    from onnx.reference import ReferenceEvaluator

    a, b = rand(3, 8), rand(3, 8)
    graph = h.make_graph([node("SwiGLU", ["a", "b"], alpha=1.5)], "swiglu",
                         [h.make_tensor_value_info(n, TP.FLOAT, (3, 8)) for n in "ab"],
                         [h.make_tensor_value_info("y", TP.FLOAT, (3, 8))])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 28)])
    text = str(import_model(model).module)
    assert "SwiGLU" not in text
    got = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()(a, b)
    want = ReferenceEvaluator(model).run(None, {"a": a, "b": b})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_castlike_of_a_constant_folds():
    # CastLike takes only its second input's type: a constant cast like a
    # graph input is a constant (Pad needs its value at import time).
    nodes = [node("CastLike", ["v", "x"], ["vc"]), node("Pad", ["x", "p", "vc"])]
    check(nodes, {"x": rand(2, 3).astype(np.float16)},
          {"v": np.array(-1.5, np.float32), "p": np.array([0, 1, 1, 0], np.int64)}, opset=19,
          reject=["CastLike"])


# -- quantization -------------------------------------------------------------------

def test_dequantize_linear():
    # Per tensor, runtime int8 input.
    check(node("DequantizeLinear", ["q", "s", "z"]), {"q": rand(4, 6, dtype=np.int8, low=-128, high=127)},
          {"s": np.array(0.05, np.float32), "z": np.array(3, np.int8)}, expect=["sits.dequantize"])
    # Per channel int8 weights feeding a MatMul.
    check([node("DequantizeLinear", ["q", "s", "z"], ["w"], axis=0), node("MatMul", ["x", "w"])],
          {"x": rand(2, 4)}, {"q": rand(4, 6, dtype=np.int8, low=-128, high=127),
                              "s": rand(4, low=0.01, high=0.1), "z": np.array([0, 1, -2, 5], np.int8)},
          expect=["sits.dequantize", "axis = 0"])
    # Constant uint8 weights keep their unsigned type.
    check([node("DequantizeLinear", ["q", "s", "z"], ["w"]), node("MatMul", ["x", "w"])],
          {"x": rand(2, 4)}, {"q": rand(4, 3, dtype=np.uint8, low=0, high=255),
                              "s": np.array(0.02, np.float32), "z": np.array(128, np.uint8)},
          expect=["xui8>"])


def test_quantize_dequantize_round_trip():
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]
    check(nodes, {"x": rand(3, 4, low=-4, high=4)},
          {"s": rand(4, low=0.02, high=0.05), "z": np.array([0, 3, -5, 1], np.int8)},
          expect=["sits.quantize", "sits.dequantize"])
    check(node("QuantizeLinear", ["x", "s", "z"], ["q"]), {"x": rand(3, 4, low=-4, high=4)},
          {"s": np.array(0.03, np.float32), "z": np.array(-3, np.int8)})


# -- patterns -----------------------------------------------------------------------

SQRT2 = np.array(np.sqrt(2.0), np.float32)
HALF, ONE = np.array(0.5, np.float32), np.array(1.0, np.float32)
INV_SQRT2 = np.array(1 / np.sqrt(2.0), np.float32)


@pytest.mark.parametrize("variant", ["torch", "half_first", "half_last", "mul_inv_sqrt2"])
def test_erf_gelu_is_one_activation(variant):
    pre = node("Div", ["x", "sqrt2"], ["d"]) if variant != "mul_inv_sqrt2" else \
        node("Mul", ["inv", "x"], ["d"])
    nodes = [pre, node("Erf", ["d"], ["e"]), node("Add", ["one", "e"], ["a"])]
    if variant in ("torch", "mul_inv_sqrt2"):
        nodes += [node("Mul", ["x", "a"], ["m"]), node("Mul", ["m", "half"], ["y"])]
    elif variant == "half_first":
        nodes += [node("Mul", ["x", "half"], ["h"]), node("Mul", ["h", "a"], ["y"])]
    else:
        nodes += [node("Mul", ["a", "half"], ["h"]), node("Mul", ["x", "h"], ["y"])]
    for i, n in enumerate(nodes):
        n.name = f"gelu_{i}"
    text = check(nodes, {"x": rand(4, 32, low=-4, high=4)},
                 {"sqrt2": SQRT2, "one": ONE, "half": HALF, "inv": INV_SQRT2},
                 expect=["sits.activation <gelu>"], reject=["math.erf", "arith.mulf"])
    assert text.count("sits.activation") == 1


def test_gelu_pattern_with_extra_use_falls_back():
    nodes = [node("Div", ["x", "sqrt2"], ["d"]), node("Erf", ["d"], ["e"]),
             node("Add", ["e", "one"], ["a"]), node("Mul", ["x", "a"], ["m"]),
             node("Mul", ["m", "half"], ["g"]), node("Add", ["g", "e"])]
    check(nodes, {"x": rand(4, 8)}, {"sqrt2": SQRT2, "one": ONE, "half": HALF},
          expect=["math.erf"], reject=["sits.activation"])


def test_silu():
    check([node("Sigmoid", ["x"], ["s"]), node("Mul", ["s", "x"])], {"x": rand(3, 16, low=-6, high=6)},
          expect=["sits.activation <silu>"], reject=["sigmoid"])


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("affine", [True, False])
def test_decomposed_layer_norm(opset, affine):
    def mean(inp, out):
        if opset >= 18:
            return node("ReduceMean", [inp, "axes"], [out])
        return node("ReduceMean", [inp], [out], axes=[-1])
    nodes = [mean("x", "m"), node("Sub", ["x", "m"], ["d"]), node("Pow", ["d", "two"], ["p"]),
             mean("p", "v"), node("Add", ["v", "eps"], ["ve"]), node("Sqrt", ["ve"], ["s"]),
             node("Div", ["d", "s"], ["n" if affine else "y"])]
    if affine:
        nodes += [node("Mul", ["n", "g"], ["ng"]), node("Add", ["ng", "b"], ["y"])]
    for i, n in enumerate(nodes):
        n.name = f"ln_{i}"
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
             "g": rand(24), "b": rand(24)}
    if opset >= 18:
        inits["axes"] = np.array([-1], np.int64)
    if not affine:
        del inits["g"], inits["b"]
    check(nodes, {"x": rand(2, 7, 24)}, inits, opset=opset, expect=["sits.layer_norm"],
          reject=["linalg.reduce", "math.sqrt"])


@pytest.mark.parametrize("variant", ["reciprocal", "div_one", "div_x"])
def test_decomposed_rms_norm(variant):
    nodes = [node("Pow", ["x", "two"], ["p"]), node("ReduceMean", ["p"], ["m"], axes=[-1]),
             node("Add", ["m", "eps"], ["e"]), node("Sqrt", ["e"], ["s"])]
    if variant == "reciprocal":
        nodes += [node("Reciprocal", ["s"], ["r"]), node("Mul", ["x", "r"], ["n"])]
    elif variant == "div_one":
        nodes += [node("Div", ["one", "s"], ["r"]), node("Mul", ["r", "x"], ["n"])]
    else:
        nodes += [node("Div", ["x", "s"], ["n"])]
    nodes.append(node("Mul", ["n", "g"]))
    check(nodes, {"x": rand(2, 5, 32)}, {"two": np.array(2.0, np.float32), "one": ONE,
                                         "eps": np.array(1e-6, np.float32), "g": rand(32)},
          expect=["sits.rms_norm"], reject=["linalg.reduce", "math.sqrt"])


def attention_nodes(scale_op="Mul", mask="add", q_scale=False):
    nodes = []
    q = "q"
    if q_scale:
        nodes.append(node("Mul", ["q", "qs"], ["q2"]))
        q = "q2"
    nodes += [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
              node("MatMul", [q, "kt"], ["s"]),
              node(scale_op, ["s", "c"], ["ss"])]
    if mask == "add":
        nodes.append(node("Add", ["ss", "mask"], ["sm"]))
    elif mask == "where":
        nodes.append(node("Where", ["mask", "ss", "ninf"], ["sm"]))
    else:
        nodes.append(node("Identity", ["ss"], ["sm"]))
    nodes += [node("Softmax", ["sm"], ["p"], axis=-1), node("MatMul", ["p", "v"])]
    for i, n in enumerate(nodes):
        n.name = f"attn_{i}"
    return nodes


def test_attention_causal_constant_mask():
    tq = tk = 6
    mask = np.triu(np.full((tq, tk), -np.inf, np.float32), 1)
    text = check(attention_nodes(), {"q": rand(1, 2, tq, 8), "k": rand(1, 2, tk, 8), "v": rand(1, 2, tk, 8)},
                 {"c": np.array(1 / np.sqrt(8), np.float32), "mask": mask},
                 expect=["sits.attention", "{causal}"], reject=["sits.softmax"])
    assert "scale" not in text


def test_attention_causal_where_bottom_right_multi_query():
    # One key/value head broadcast over four query heads (MQA), Tk > Tq.
    tq, tk = 3, 7
    keep = np.tril(np.ones((tq, tk), bool), tk - tq)
    check(attention_nodes("Div", "where"), {"q": rand(2, 4, tq, 8), "k": rand(2, 1, tk, 8), "v": rand(2, 1, tk, 5)},
          {"c": np.array(2.0, np.float32), "mask": keep, "ninf": np.array(-np.inf, np.float32)},
          expect=["sits.attention", "causal", "scale = 5.000000e-01"])


def test_attention_runtime_additive_mask_and_q_scale():
    check(attention_nodes(q_scale=True), {"q": rand(1, 3, 5, 8), "k": rand(1, 3, 5, 8),
                                          "v": rand(1, 3, 5, 8), "mask": rand(1, 1, 1, 5, low=-9, high=0)},
          {"c": np.array(0.25, np.float32), "qs": np.array(0.5, np.float32)},
          expect=["sits.attention", "mask("], reject=["sits.softmax"])


def test_attention_boolean_runtime_mask():
    check(attention_nodes(mask="where"), {"q": rand(1, 2, 4, 8), "k": rand(1, 2, 4, 8),
                                          "v": rand(1, 2, 4, 8),
                                          "mask": np.array([[True, True, False, True]] * 4)},
          {"c": np.array(0.3, np.float32), "ninf": np.array(-np.inf, np.float32)},
          expect=["sits.attention", "mask("])


def test_attention_that_does_not_match_falls_back():
    # Softmax over a non-last axis: not attention.
    nodes = attention_nodes(mask="none")
    nodes[-2] = node("Softmax", ["sm"], ["p"], axis=2)
    check(nodes, {"q": rand(1, 2, 4, 4), "k": rand(1, 2, 4, 4), "v": rand(1, 2, 4, 4)},
          {"c": np.array(0.5, np.float32)}, expect=["sits.softmax", "sits.matmul"],
          reject=["sits.attention"])


# -- dynamic shapes ------------------------------------------------------------------

def dynamic_mlp():
    x = h.make_tensor_value_info("x", TP.FLOAT, ["batch", 8])
    nodes = [node("Gemm", ["x", "w", "b"], ["h"], transB=1), node("Relu", ["h"], ["r"]),
             node("Add", ["r", "c"], ["y"])]
    inits = [numpy_helper.from_array(rand(16, 8), "w"), numpy_helper.from_array(rand(16), "b"),
             numpy_helper.from_array(rand(16), "c")]
    g = h.make_graph(nodes, "dyn", [x], [h.make_tensor_value_info("y", TP.FLOAT, ["batch", 16])],
                     initializer=inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_dynamic_batch_stays_dynamic():
    model = dynamic_mlp()
    im = import_model(model)
    text = str(im.module)
    assert "tensor<?x8xf32>" in text and "tensor.dim" in text
    assert im.inputs[0].shape == (None, 8) and im.outputs[0].shape == (None, 16)
    x = rand(5, 8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(evaluate(im, {"x": x})[0], sess.run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)


def test_dynamic_dims_fix_symbolic_sizes():
    im = import_model(dynamic_mlp(), dynamic_dims={"batch": 3})
    assert im.inputs[0].shape == (3, 8)
    assert "?" not in im.module.operation.get_asm(large_resource_limit=64)
