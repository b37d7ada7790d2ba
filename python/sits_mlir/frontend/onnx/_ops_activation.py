"""Activation ONNX ops: Relu, Sigmoid, Tanh and Gelu as `sits.activation`,
the other smooth and piecewise activations (Softplus, Selu, LeakyRelu,
HardSwish, ...) and the hyperbolic and inverse trigonometric functions as
`arith`/`math`, Softmax as `sits.softmax`, and LogSoftmax.
"""

from __future__ import annotations

from ...dialects import arith, math, sits
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import i64_attr, need_float, norm_axis
from ._ops_registry import converter


_SMOOTH = ("Softplus", "Softsign", "Selu", "Celu", "ThresholdedRelu", "Mish", "Shrink",
           "Swish", "Sinh", "Cosh", "Asin", "Acos", "Asinh", "Acosh", "Atanh")


@converter(*_SMOOTH, check=need_float)
def _smooth(ctx, node):
    a = ctx.attrs(node)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)

    def c(v):
        return ctx.b.splat(float(v), shape, e)

    def softplus(v):  # log(1 + exp(v)) without overflow: max(v, 0) + log1p(exp(-|v|))
        return arith.addf(arith.maximumf(v, c(0)), math.log1p(math.exp(arith.negf(math.absf(v)))))

    op = node.op_type
    if op == "Softplus":
        return [softplus(x)]
    if op == "Softsign":
        return [arith.divf(x, arith.addf(c(1), math.absf(x)))]
    if op == "Mish":
        return [arith.mulf(x, math.tanh(softplus(x)))]
    if op == "Swish":
        alpha = a.get("alpha", 1.0)
        return [arith.mulf(x, sits.activation(sits.ActivationKind.Sigmoid, arith.mulf(x, c(alpha))))]
    if op in ("Selu", "Celu"):
        alpha = a.get("alpha", 1.67326319217681884765625 if op == "Selu" else 1.0)
        if op == "Selu":
            gamma = a.get("gamma", 1.05070102214813232421875)
            neg = arith.mulf(c(alpha), math.expm1(x))
            y = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, c(0)), x, neg)
            return [arith.mulf(c(gamma), y)]
        # Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
        neg = arith.mulf(c(alpha), math.expm1(arith.divf(x, c(alpha))))
        return [arith.addf(arith.maximumf(x, c(0)), arith.minimumf(neg, c(0)))]
    if op == "ThresholdedRelu":
        alpha = a.get("alpha", 1.0)
        return [arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, c(alpha)), x, c(0))]
    if op == "Shrink":
        lambd, bias = a.get("lambd", 0.5), a.get("bias", 0.0)
        lo = arith.cmpf(arith.CmpFPredicate.OLT, x, c(-lambd))
        hi = arith.cmpf(arith.CmpFPredicate.OGT, x, c(lambd))
        return [arith.select(lo, arith.addf(x, c(bias)),
                             arith.select(hi, arith.subf(x, c(bias)), c(0)))]
    fn = {"Sinh": math.sinh, "Cosh": math.cosh, "Asin": math.asin, "Acos": math.acos,
          "Asinh": math.asinh, "Acosh": math.acosh, "Atanh": math.atanh}[op]
    return [fn(x)]


_ACTIVATIONS = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh"}


def _check_gelu(g, node):
    approx = attributes(node).get("approximate", "none")
    if approx not in ("none", "tanh"):
        return f"unsupported attribute value approximate='{approx}' (none or tanh)"
    return need_float(g, node)


@converter("Relu", "Sigmoid", "Tanh", check=need_float)
def _activation(ctx, node):
    kind = getattr(sits.ActivationKind, _ACTIVATIONS[node.op_type])
    return [sits.activation(kind, ctx.get(node.input[0]))]


@converter("Gelu", check=_check_gelu)
def _gelu(ctx, node):
    approx = ctx.attrs(node).get("approximate", "none")
    kind = sits.ActivationKind.GeluTanh if approx == "tanh" else sits.ActivationKind.Gelu
    return [sits.activation(kind, ctx.get(node.input[0]))]


@converter("LeakyRelu", check=need_float)
def _leaky_relu(ctx, node):
    alpha = ctx.attrs(node).get("alpha", 0.01)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)
    zero = ctx.b.splat(0.0, shape, e)
    neg = arith.mulf(x, ctx.b.splat(alpha, shape, e))
    return [arith.select(arith.cmpf(arith.CmpFPredicate.OGE, x, zero), x, neg)]


@converter("PRelu", check=need_float)
def _prelu(ctx, node):
    x = ctx.get(node.input[0])
    slope = ctx.get(node.input[1])
    shape = ctx.b.broadcast_shape([x, slope], ctx.g.shape(node.output[0]))
    x = ctx.b.broadcast_to(x, shape)
    slope = ctx.b.broadcast_to(slope, shape)
    zero = ctx.b.splat(0.0, shape, elem_of(x))
    return [arith.select(arith.cmpf(arith.CmpFPredicate.OLT, x, zero), arith.mulf(x, slope), x)]


@converter("Elu", check=need_float)
def _elu(ctx, node):
    alpha = ctx.attrs(node).get("alpha", 1.0)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)
    zero = ctx.b.splat(0.0, shape, e)
    neg = arith.mulf(ctx.b.splat(alpha, shape, e), math.expm1(x))
    return [arith.select(arith.cmpf(arith.CmpFPredicate.OGE, x, zero), x, neg)]


@converter("HardSigmoid", "HardSwish", check=need_float)
def _hard_sigmoid(ctx, node):
    a = ctx.attrs(node)
    alpha, beta = (a.get("alpha", 0.2), a.get("beta", 0.5)) if node.op_type == "HardSigmoid" \
        else (1.0 / 6.0, 0.5)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)
    y = arith.addf(arith.mulf(x, ctx.b.splat(alpha, shape, e)), ctx.b.splat(beta, shape, e))
    y = arith.minimumf(arith.maximumf(y, ctx.b.splat(0.0, shape, e)), ctx.b.splat(1.0, shape, e))
    if node.op_type == "HardSwish":
        y = arith.mulf(x, y)
    return [y]


@converter("Softmax", check=need_float)
def _softmax(ctx, node):
    axis = ctx.attrs(node).get("axis", -1)
    return [sits.softmax(ctx.get(node.input[0]), axis=i64_attr(axis))]


@converter("LogSoftmax", check=need_float)
def _log_softmax(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    axis = norm_axis(ctx.attrs(node).get("axis", -1), rank)
    shape = b.mixed_shape(x)
    m = b.keep_dims(b.reduce(x, [axis], arith.maximumf, float("-inf")), rank, [axis])
    s = arith.subf(x, b.broadcast_to(m, shape))
    z = b.reduce(math.exp(s), [axis], lambda v, acc: arith.addf(acc, v), 0.0)
    lz = b.keep_dims(math.log(z), rank, [axis])
    return [arith.subf(s, b.broadcast_to(lz, shape))]
