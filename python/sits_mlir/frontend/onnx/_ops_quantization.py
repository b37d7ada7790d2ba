"""Quantization ONNX ops: QuantizeLinear and DequantizeLinear as
`sits.quantize`/`sits.dequantize` (per tensor, per axis, blocked),
DynamicQuantizeLinear, com.microsoft MatMulNBits as `sits.qmatmul`, and the
integer contractions MatMulInteger, QLinearMatMul, ConvInteger and
QLinearConv as `linalg` on i32.
"""

from __future__ import annotations

import numpy as np

from ... import ir
from ...dialects import arith, linalg, math, sits, tensor
from . import _types
from ._builder import DYN, elem_of, shape_of
from ._graph import attributes
from ._ops_common import (_fmt, cast_value, conv_padding, has_input, i64_attr, need_const,
                          need_float, norm_axis, pad_tensor)
from ._ops_registry import converter


def _quant_params(g, node, quantized_name):
    """(scale name, zero point name or None, axis or None, block_size or
    None), or a str reason. A one-element scale is per tensor."""
    a = attributes(node)
    qs = g.shape(quantized_name)
    ss = g.shape(node.input[1])
    if qs is None or ss is None:
        return "input ranks are unknown"
    axis = block = None
    if a.get("block_size", 0):
        block = int(a["block_size"])
        axis = norm_axis(a.get("axis", 1), len(qs))
    elif len(ss) == 0 or (len(ss) == 1 and ss[0] == 1):
        pass
    elif len(ss) == 1:
        axis = norm_axis(a.get("axis", 1), len(qs))
    else:
        return f"a scale of shape {_fmt(ss)} needs block_size"
    zp = node.input[2] if has_input(node, 2) else None
    return node.input[1], zp, axis, block


_FP8 = ("float8_e4m3fn", "float8_e5m2")


_QUANT_INTS = {np.dtype(d) for d in (np.int8, np.int16, np.uint8, np.uint16)}


def _check_q(g, node):
    if node.op_type == "DequantizeLinear":
        qname, fname = node.input[0], node.output[0]
    else:
        qname, fname = node.output[0], node.input[0]
    qt, ft = g.dtype(qname), g.dtype(fname)
    if ft is None or not _types.is_float(ft) or _types.is_small_float(ft):
        return "needs a floating-point scale and dequantized type"
    if qt is None:
        return "unsupported quantized element type"
    sub_byte = _types.is_byte_coded(qt) and not _types.is_small_float(qt)
    if np.dtype(qt) not in _QUANT_INTS and not sub_byte and str(qt) not in _FP8:
        return f"quantized element type {np.dtype(qt).name} is not supported"
    if g.dtype(node.input[1]) != ft:
        return "the scale's element type must be the dequantized type"
    if node.op_type == "QuantizeLinear" and attributes(node).get("precision", 0):
        return "the precision attribute (opset 24) is not supported yet"
    p = _quant_params(g, node, qname)
    return p if isinstance(p, str) else None


def _quant_type(g, name, shape):
    """(MLIR element type, tensor type) of quantized value `name` as the
    SITS quantization ops take it: unsigned integers as `ui<N>`."""
    dt = np.dtype(g.dtype(name))
    elem = _types.mlir_type(dt)
    if _types.is_unsigned(dt):
        elem = ir.IntegerType.get_unsigned(ir.IntegerType(elem).width)
    return elem, ir.RankedTensorType.get([DYN if d is None else d for d in shape], elem)


def _as_quantized(ctx, v: ir.Value, elem: ir.Type) -> ir.Value:
    """`v` (signless, as the importer holds integers) as `elem`'s signedness."""
    if elem_of(v) == elem:
        return v
    return tensor.bitcast(ctx.b.tensor_type(shape_of(v), elem), v)


def _quant_input(ctx, name: str, elem: ir.Type) -> ir.Value:
    """Quantized data or zero point `name` as an operand of `elem`."""
    g = ctx.g
    if g.is_const(name) and not _types.is_byte_coded(g.dtype(name)):
        return ctx.const_value(g.const(name), name, elem=elem)
    return _as_quantized(ctx, ctx.get(name), elem)


def _scale_value(ctx, name, axis, block):
    g, b = ctx.g, ctx.b
    s = g.shape(name)
    v = ctx.get(name)
    if axis is None and len(s) == 1:
        v = b.collapse(v, [], ())
    return v


def _zero_point_value(ctx, name, elem, axis, shape):
    g = ctx.g
    if name is None or isinstance(elem, ir.FloatType):
        return None  # fp8 zero points are zero by definition
    if g.is_const(name) and not _types.is_byte_coded(g.dtype(name)):
        z = g.const(name)
        if axis is None:
            z = z.reshape(())
        return ctx.const_value(z, name, elem=elem)
    v = _quant_input(ctx, name, elem)
    if axis is None and len(shape_of(v)) == 1:
        v = ctx.b.collapse(v, [], ())
    return v


@converter("DequantizeLinear", check=_check_q)
def _dequantize(ctx, node):
    g = ctx.g
    scale_name, zp_name, axis, block = _quant_params(g, node, node.input[0])
    elem, qtype = _quant_type(g, node.input[0], g.shape(node.input[0]))
    q = _quant_input(ctx, node.input[0], elem)
    scale = _scale_value(ctx, scale_name, axis, block)
    zp = _zero_point_value(ctx, zp_name, elem, axis, shape_of(q))
    out = ctx.b.tensor_type(shape_of(q), elem_of(scale))
    kw = {}
    if axis is not None:
        kw["axis"] = i64_attr(axis)
    if block is not None:
        kw["block_size"] = i64_attr(block)
    return [sits.dequantize(out, q, scale, zero_point=zp, **kw)]


@converter("QuantizeLinear", check=_check_q)
def _quantize(ctx, node):
    g = ctx.g
    x = ctx.get(node.input[0])
    scale_name, zp_name, axis, block = _quant_params(g, node, node.output[0])
    elem, qtype = _quant_type(g, node.output[0], shape_of(x))
    scale = _scale_value(ctx, scale_name, axis, block)
    zp = _zero_point_value(ctx, zp_name, elem, axis, shape_of(x))
    kw = {}
    if axis is not None:
        kw["axis"] = i64_attr(axis)
    if block is not None:
        kw["block_size"] = i64_attr(block)
    q = sits.quantize(qtype, x, scale, zero_point=zp, **kw)
    # The importer holds integers signless.
    signless = _types.mlir_type(g.dtype(node.output[0]))
    return [q if signless == elem else tensor.bitcast(ctx.b.tensor_type(shape_of(q), signless), q)]


def _check_dynamic_quantize(g, node):
    if g.dtype(node.input[0]) != np.float32:
        return "the input must be float32"
    return None


@converter("DynamicQuantizeLinear", check=_check_dynamic_quantize)
def _dynamic_quantize(ctx, node):
    """uint8 quantization with a scale and zero point that make the range
    [min(x, 0), max(x, 0)] fit [0, 255], computed at run time."""
    b = ctx.b
    x = ctx.get(node.input[0])
    f32, u8, i8 = ir.F32Type.get(), ir.IntegerType.get_unsigned(8), ir.IntegerType.get_signless(8)
    axes = list(range(len(shape_of(x))))

    def scalar(value):
        return b.splat(value, [], f32)

    hi = arith.maximumf(b.reduce(x, axes, lambda v, acc: arith.maximumf(acc, v), float("-inf")),
                        scalar(0.0))
    lo = arith.minimumf(b.reduce(x, axes, lambda v, acc: arith.minimumf(acc, v), float("inf")),
                        scalar(0.0))
    width = arith.subf(hi, lo)
    # A constant input (max == min) gets scale 1/255, as the reference.
    width = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, hi, lo), scalar(1.0), width)
    y_scale = arith.divf(width, scalar(255.0))
    zp = arith.subf(scalar(0.0), arith.divf(lo, y_scale))
    zp = math.roundeven(arith.minimumf(arith.maximumf(zp, scalar(0.0)), scalar(255.0)))
    y_zp = arith.fptoui(b.tensor_type([], i8), zp)
    y = sits.quantize(b.tensor_type(shape_of(x), u8), x, y_scale,
                      zero_point=_as_quantized(ctx, y_zp, u8))
    return [tensor.bitcast(b.tensor_type(shape_of(x), i8), y), y_scale, y_zp]


# -- com.microsoft MatMulNBits -------------------------------------------------

def _check_matmul_nbits(g, node):
    # A contrib op: onnx.checker does not know its arity.
    if len(node.input) < 3 or not all(node.input[:3]) or len(node.output) != 1:
        return "MatMulNBits takes the inputs A, B and scales (and optional ones) and one output"
    a = attributes(node)
    r = need_float(g, node)
    if r:
        return r
    if a.get("bits", 4) not in (4, 8):
        return f"bits={a.get('bits')} is not supported (4 or 8)"
    for key in ("K", "N", "block_size"):
        if not a.get(key) or a[key] < 1:
            return f"attribute {key} must be a positive integer"
    if a["block_size"] < 16 or a["block_size"] & (a["block_size"] - 1):
        return "block_size must be a power of two of at least 16"
    r = need_const(g, node, 1, 2, 3, 4, 5, what="the weights and their quantization")
    if r:
        return r
    if has_input(node, 4):
        return "g_idx (act-order) is not supported"
    if g.dtype(node.input[2]) != g.dtype(node.input[0]):
        return "the scales' element type must be the input's"
    return None


def _nbits_unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Low-bit values packed into bytes, lowest bits first, per row."""
    b = packed.reshape(packed.shape[0], -1).astype(np.uint8)
    if bits == 8:
        return b[:, :count]
    return np.stack([b & 0x0F, b >> 4], axis=-1).reshape(b.shape[0], -1)[:, :count]


@converter("MatMulNBits", check=_check_matmul_nbits, domain="com.microsoft", reads=(0,))
def _matmul_nbits(ctx, node):
    """onnxruntime's block-quantized weights: B is [N, K/bs, bs·bits/8] bytes,
    scales [N, K/bs], zero points packed like B (default 2^(bits-1)) or as
    floats. The weights become a sits.qmatmul over [N, K] int8 values with
    the zero point folded in, one scale per block along K; its input may be
    rounded to INT8 only with accuracy_level 4, as onnxruntime does."""
    g, b = ctx.g, ctx.b
    a = ctx.attrs(node)
    bits, bs, k, n = a.get("bits", 4), a["block_size"], a["K"], a["N"]
    blocks = -(-k // bs)
    q = _nbits_unpack(np.asarray(g.const(node.input[1])), bits, blocks * bs).astype(np.int16)
    scales = np.asarray(g.const(node.input[2])).reshape(n, blocks)
    offset = 1 << (bits - 1)
    if has_input(node, 3):
        zp = np.asarray(g.const(node.input[3]))
        if _types.is_float(zp.dtype):  # float zero points: w = (q - zp) * s = q*s - zp*s
            w = (q.reshape(n, blocks, bs).astype(np.float32)
                 - zp.reshape(n, blocks, 1).astype(np.float32)) * \
                scales.reshape(n, blocks, 1).astype(np.float32)
            w = w.reshape(n, -1)[:, :k].T.astype(scales.dtype)
            y = emit_matmul_const(ctx, node.input[0], np.ascontiguousarray(w), node.output[0])
            return [y]
        zp = _nbits_unpack(zp.reshape(n, -1), bits, blocks).astype(np.int16)
    else:
        zp = np.full((n, blocks), offset, np.int16)
    scale = b.constant(np.ascontiguousarray(scales), name=node.input[2])
    zero_point = None
    if bits == 4:  # q - zp fits int8: no zero point left in the inner loop
        centered = (q.reshape(n, blocks, bs) - zp[:, :, None]).reshape(n, -1)[:, :k]
        weight = b.constant(np.ascontiguousarray(centered.astype(np.int8)), name=node.input[1])
    else:  # 8-bit: unsigned weights and zero points as they are
        ui8 = ir.IntegerType.get_unsigned(8)
        weight = b.constant(np.ascontiguousarray(q[:, :k].astype(np.uint8)), name=node.input[1],
                            elem=ui8)
        zero_point = b.constant(np.ascontiguousarray(zp.astype(np.uint8)), name="zero_point",
                                elem=ui8)
    x = ctx.get(node.input[0])
    bias = None
    if has_input(node, 5):
        bias = b.constant(np.asarray(g.const(node.input[5])).reshape(n), name=node.input[5])
    # accuracy_level 4 lets the input be computed in INT8 (what onnxruntime's
    # CPU kernel then does); below it, the input stays in floating point.
    float_input = a.get("accuracy_level", 0) < 4
    return [sits.qmatmul(x, weight, scale, zero_point=zero_point, bias=bias, axis=i64_attr(1),
                         block_size=i64_attr(bs), transpose_weight=True,
                         float_input=float_input)]


def emit_matmul_const(ctx, x_name, w: np.ndarray, out_name):
    """x @ w for a constant [K, N] weight."""
    b = ctx.b
    x = ctx.get(x_name)
    return sits.matmul(x, b.constant(w, name=out_name + "_weight"))


# -- integer matmuls: MatMulInteger, QLinearMatMul ------------------------------

_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))


def _scalar_input(g, node, k):
    s = g.shape(node.input[k]) if has_input(node, k) else ()
    return s is not None and int(np.prod([d or 0 for d in s], dtype=np.int64)) <= 1 and \
        None not in s


def _check_int_matmul(g, node):
    a_name, b_name = (node.input[0], node.input[1]) if node.op_type == "MatMulInteger" else \
        (node.input[0], node.input[3])
    for name in (a_name, b_name):
        if g.dtype(name) not in _INT8:
            return "needs int8 or uint8 operands"
    sa, sb = g.shape(a_name), g.shape(b_name)
    if sa is None or sb is None or len(sa) != len(sb) or len(sa) not in (2, 3):
        return "needs operands of one rank, 2 or 3"
    if len(sa) == 3 and (sa[0] != sb[0] or sa[0] is None):
        return "batched operands need one static batch extent"
    params = range(2, 4) if node.op_type == "MatMulInteger" else (1, 2, 4, 5, 6, 7)
    for k in params:
        if has_input(node, k) and not _scalar_input(g, node, k):
            return f"input {k} ('{node.input[k]}') must be a scalar (per-row/column not supported)"
    return None


def _int32_operand(ctx, name, zp_name, axis=None):
    """`name` widened to i32 with its zero point subtracted: a scalar, or
    one per index of `axis` (a filter's output channels)."""
    g, b = ctx.g, ctx.b
    i32 = np.dtype(np.int32)
    v = cast_value(ctx, ctx.get(name), g.dtype(name), i32)
    if zp_name:
        zp = cast_value(ctx, ctx.get(zp_name), g.dtype(zp_name), i32)
        rank = len(shape_of(v))
        if axis is not None and int(np.prod(shape_of(zp))) > 1:
            zp = b.reshape(zp, tuple(shape_of(v)[axis] if d == axis else 1 for d in range(rank)))
        else:
            zp = b.reshape(zp, ())
        v = arith.subi(v, b.broadcast_to(zp, b.mixed_shape(v)))
    return v


def _int_matmul(ctx, a, b_):
    """a @ b_ on i32 tensors of rank 2 or 3 (linalg.matmul / batch_matmul)."""
    b = ctx.b
    sa, sb = shape_of(a), shape_of(b_)
    shape = list(sa[:-1]) + [sb[-1]]
    i32 = elem_of(a)
    init = linalg.fill(b.scalar(0, i32), outs=[b.empty(shape, i32)])
    op = linalg.matmul if len(sa) == 2 else linalg.batch_matmul
    return op(a, b_, outs=[init])


def _opt(node, k):
    return node.input[k] if has_input(node, k) else None


@converter("MatMulInteger", check=_check_int_matmul)
def _matmul_integer(ctx, node):
    a = _int32_operand(ctx, node.input[0], _opt(node, 2))
    b_ = _int32_operand(ctx, node.input[1], _opt(node, 3))
    return [_int_matmul(ctx, a, b_)]


@converter("QLinearMatMul", check=_check_int_matmul)
def _qlinear_matmul(ctx, node):
    """The i32 product of the zero-point-free operands, requantized as
    onnxruntime does: round-half-even(acc * a_scale * b_scale / y_scale)
    + y_zero_point, saturated to the output type."""
    acc = _int_matmul(ctx, _int32_operand(ctx, node.input[0], node.input[2]),
                      _int32_operand(ctx, node.input[3], node.input[5]))
    return [_requantize(ctx, node, acc)]


def _requantize(ctx, node, acc):
    """QLinear* output: round-half-even(acc * s1 * s4 / s6) + zp7 (inputs
    1, 4, 6 and 7 of QLinearMatMul and QLinearConv), saturated to the
    output type."""
    g, b = ctx.g, ctx.b
    shape = b.mixed_shape(acc)
    f32 = np.dtype(np.float32)

    def scalar_f32(k):
        v = cast_value(ctx, ctx.get(node.input[k]), g.dtype(node.input[k]), f32)
        return b.broadcast_to(b.reshape(v, ()), shape)
    scale = arith.divf(arith.mulf(scalar_f32(1), scalar_f32(4)), scalar_f32(6))
    y = math.roundeven(arith.mulf(cast_value(ctx, acc, np.dtype(np.int32), f32), scale))
    if has_input(node, 7):
        y = arith.addf(y, scalar_f32(7))
    out_dt = g.dtype(node.output[0])
    info = np.iinfo(out_dt)
    e = elem_of(y)
    y = arith.minimumf(arith.maximumf(y, b.splat(float(info.min), shape, e)),
                       b.splat(float(info.max), shape, e))
    return cast_value(ctx, y, f32, out_dt)


# -- integer convolutions: ConvInteger, QLinearConv -----------------------------

def _check_int_conv(g, node):
    x_name, w_name = (node.input[0], node.input[1]) if node.op_type == "ConvInteger" else \
        (node.input[0], node.input[3])
    for name in (x_name, w_name):
        if g.dtype(name) not in _INT8:
            return "needs int8 or uint8 operands"
    xs, ws = g.shape(x_name), g.shape(w_name)
    if xs is None or ws is None or len(xs) != 4 or None in xs or None in ws:
        return "needs static 2-D NCHW operands"
    if attributes(node).get("group", 1) != 1:
        return "grouped integer convolutions are not supported"
    pads = conv_padding(g, node, xs, ws)
    if isinstance(pads, str):
        return pads
    params = (2,) if node.op_type == "ConvInteger" else (1, 2, 4, 5, 6, 7)
    for k in params:
        if has_input(node, k) and not _scalar_input(g, node, k):
            return f"input {k} ('{node.input[k]}') must be a scalar (per-channel not supported)"
    if node.op_type == "ConvInteger" and has_input(node, 3) and not _scalar_input(g, node, 3) \
            and g.shape(node.input[3]) != (ws[0],):
        return "the filter's zero point must be a scalar or one per output channel"
    if node.op_type == "QLinearConv" and has_input(node, 8) and g.dtype(node.input[8]) != np.int32:
        return "the bias must be int32"
    return None


def _int_conv(ctx, node, x, w):
    """Conv of i32 operands (zero points already subtracted, so padding is
    0) as linalg.conv_2d_nchw_fchw."""
    b, g = ctx.b, ctx.g
    a = ctx.attrs(node)
    pads = conv_padding(g, node, shape_of(x), shape_of(w))
    x = pad_tensor(ctx, x, [0, 0] + pads[:2], [0, 0] + pads[2:], 0)
    shape = list(g.shape(node.output[0]))
    i32 = elem_of(x)
    init = linalg.fill(b.scalar(0, i32), outs=[b.empty(shape, i32)])
    return linalg.conv_2d_nchw_fchw(x, w, outs=[init], strides=list(a.get("strides", [1, 1])),
                                    dilations=list(a.get("dilations", [1, 1])))


@converter("ConvInteger", check=_check_int_conv)
def _conv_integer(ctx, node):
    x = _int32_operand(ctx, node.input[0], _opt(node, 2))
    w = _int32_operand(ctx, node.input[1], _opt(node, 3), axis=0)
    return [_int_conv(ctx, node, x, w)]


@converter("QLinearConv", check=_check_int_conv)
def _qlinear_conv(ctx, node):
    """The i32 convolution (+ the i32 bias) requantized like QLinearMatMul."""
    b = ctx.b
    acc = _int_conv(ctx, node, _int32_operand(ctx, node.input[0], node.input[2]),
                    _int32_operand(ctx, node.input[3], node.input[5]))
    shape = b.mixed_shape(acc)
    if has_input(node, 8):
        bias = b.reshape(ctx.get(node.input[8]), (1, shape[1], 1, 1))
        acc = arith.addi(acc, b.broadcast_to(bias, shape))
    return [_requantize(ctx, node, acc)]
