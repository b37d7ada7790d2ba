#!/usr/bin/env python3
"""Writes the numerical tests of sits-convert-to-linalg (test/lit/Integration).

Every test builds its inputs as constants (or dense_resource blobs for packed
weights), runs SITS ops lowered by sits-convert-to-linalg and a reference CPU
pipeline under mlir-runner, and prints each result with printMemrefF32. The
expected values come from a float64 NumPy reference written here op by op,
independently of the lowering.

printMemrefF32 prints 6 significant digits. A value whose printed form could
change under a relative error of REL (the accuracy the lowering must reach in
f32) is matched by a FileCheck regex accepting every printed form within that
error.

    python3 test/lit/Integration/Inputs/generate.py   # rewrites the tests
"""

import math
import os
import re

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.dirname(HERE)
REL = 3e-6

RUN = ("// RUN: sits-opt %s --sits-convert-to-linalg | sits-opt %lower-to-llvm"
       " | %run-main | FileCheck %s")
RUN_APFLOAT = (
    "// RUN: sits-opt %s --sits-convert-to-linalg --convert-arith-to-apfloat"
    " | sits-opt %lower-to-llvm | %mlir-runner -e main"
    " -entry-point-result=void"
    " -shared-libs=%libmlir_runner_utils,%libmlir_c_runner_utils,"
    "%libmlir_apfloat_wrappers | FileCheck %s")


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------

def g6(v):
    """How printMemrefF32 (std::ostream, 6 significant digits) prints v."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "%g" % v


def expect(v):
    """FileCheck pattern for one float64 reference value."""
    v = float(v)
    # Every 6-digit form of a value within REL of v (the last digit is worth
    # at least 1e-6 relative, so 61 samples cannot skip one).
    forms = sorted({g6(v * (1 + REL * k / 30)) for k in range(-30, 31)})
    if len(forms) == 1:
        return forms[0]
    return "{{(" + "|".join(re.escape(f) for f in forms) + ")}}"


def mlir_float(v):
    """A float literal that parses back to exactly v (an f32 value)."""
    return repr(float(v))


def tensor_type(shape, elt):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elt + ">"


def dense(values, elt, shape=None, encoding=None):
    values = np.asarray(values)
    shape = values.shape if shape is None else shape
    if elt.startswith(("f", "bf")):
        fmt = mlir_float
    elif elt == "i1":
        fmt = lambda v: "true" if v else "false"
    else:
        fmt = lambda v: str(int(v))

    def rec(a):
        if a.ndim == 0:
            return fmt(a)
        return "[" + ", ".join(rec(x) for x in a) + "]"

    t = tensor_type(shape, elt)
    if encoding:
        t = t[:-1] + ", " + encoding + ">"
    return f"dense<{rec(values)}> : {t}"


# ---------------------------------------------------------------------------
# A tiny module builder
# ---------------------------------------------------------------------------

class Test:
    def __init__(self, name, summary, run=RUN):
        self.name, self.summary, self.run = name, summary, run
        self.body, self.checks, self.resources = [], [], {}
        self.n = 0

    def fresh(self):
        self.n += 1
        return f"%v{self.n}"

    def const(self, values, elt, encoding=None):
        v = self.fresh()
        self.body.append(f"  {v} = arith.constant {dense(values, elt, encoding=encoding)}")
        return v

    def resource(self, name, blob, shape, elt, encoding):
        """A constant backed by a dense_resource blob of raw bytes."""
        self.resources[name] = "0x01000000" + bytes(blob).hex().upper()
        v = self.fresh()
        t = tensor_type(shape, elt)[:-1] + ", " + encoding + ">"
        self.body.append(f"  {v} = arith.constant dense_resource<{name}> : {t}")
        return v

    def bool_tensor(self, mask):
        """A 2-D i1 tensor computed by a generic from the linear index (bit k
        of a constant is element k). Not a constant: the reference pipeline
        cannot load i1 from memory, so the mask must fuse into its consumer,
        and nothing folds this generic into a constant."""
        rows, cols = mask.shape
        bits = sum(1 << k for k, v in enumerate(mask.flatten()) if v)
        t = tensor_type(mask.shape, "i1")
        empty = self.op(f"tensor.empty() : {t}")
        v = self.fresh()
        self.body += [
            f"  {v} = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>],"
            f" iterator_types = [\"parallel\", \"parallel\"]}} outs({empty} : {t}) {{",
            "  ^bb0(%out: i1):",
            "    %i = linalg.index 0 : index",
            "    %j = linalg.index 1 : index",
            f"    %cols = arith.constant {cols} : index",
            "    %row = arith.muli %i, %cols : index",
            "    %k = arith.addi %row, %j : index",
            "    %k64 = arith.index_cast %k : index to i64",
            f"    %bits = arith.constant {bits} : i64",
            "    %shifted = arith.shrui %bits, %k64 : i64",
            "    %bit = arith.trunci %shifted : i64 to i1",
            "    linalg.yield %bit : i1",
            f"  }} -> {t}"]
        return v

    def op(self, text):
        v = self.fresh()
        self.body.append(f"  {v} = {text}")
        return v

    def comment(self, text):
        if self.body:
            self.body.append("")
        self.body.append(f"  // {text}")
        self.checks.append("")
        self.checks.append(f"// {text}")

    def print(self, value, shape, expected, elt="f32"):
        """Prints `value` (shape, elt) as a 2-D (or 1-D) f32 memref and checks
        it against `expected`."""
        expected = np.asarray(expected, dtype=np.float64).reshape(shape)
        if elt != "f32":
            value = self.op(f"arith.extf {value} : {tensor_type(shape, elt)} to "
                            f"{tensor_type(shape, 'f32')}")
        if len(shape) > 2:
            rows = int(np.prod(shape[:-1]))
            groups = "[" + ", ".join(str(i) for i in range(len(shape) - 1)) + \
                f"], [{len(shape) - 1}]"
            value = self.op(f"tensor.collapse_shape {value} [{groups}] : "
                            f"{tensor_type(shape, 'f32')} into "
                            f"{tensor_type((rows, shape[-1]), 'f32')}")
            shape = (rows, shape[-1])
        u = self.fresh()
        self.body.append(f"  {u} = tensor.cast {value} : {tensor_type(shape, 'f32')}"
                         " to tensor<*xf32>")
        self.body.append(f"  call @printMemrefF32({u}) : (tensor<*xf32>) -> ()")
        rank = len(shape)
        sizes = ", ".join(str(d) for d in shape)
        strides = ", ".join(str(int(np.prod(shape[i + 1:]))) for i in range(rank))
        self.checks.append(
            f"// CHECK: rank = {rank} offset = 0 sizes = [{sizes}] strides = "
            f"[{strides}] data =")
        rows = expected.reshape(-1, shape[-1]) if rank == 2 else [expected]
        for row in rows:
            self.checks.append("// CHECK-NEXT: {{\\[}}" +
                               ", ".join(expect(v) for v in row) + "]")

    def write(self):
        lines = [f"// {line}" if line else "//" for line in self.summary]
        lines += ["//", "// Generated by Inputs/generate.py: edit that script, not this file.",
                  "//", "// REQUIRES: mlir-runner", self.run, "",
                  "func.func @main() {"]
        lines += self.body
        lines += ["  return", "}", "",
                  "func.func private @printMemrefF32(tensor<*xf32>)"
                  " attributes {llvm.emit_c_interface}"]
        lines += self.checks
        if self.resources:
            lines += ["", "{-#", "  dialect_resources: {", "    builtin: {"]
            items = list(self.resources.items())
            for i, (name, blob) in enumerate(items):
                comma = "," if i + 1 < len(items) else ""
                lines.append(f'      {name}: "{blob}"{comma}')
            lines += ["    }", "  }", "#-}"]
        with open(os.path.join(OUT, self.name), "w") as f:
            f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------
# References (float64)
# ---------------------------------------------------------------------------

def act(kind, x):
    x = np.asarray(x, dtype=np.float64)
    erf = np.vectorize(math.erf)
    return {
        "none": lambda: x,
        "relu": lambda: np.maximum(x, 0.0),
        "gelu": lambda: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0))),
        "gelu_tanh": lambda: 0.5 * x * (1.0 + np.tanh(
            math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
        "silu": lambda: x / (1.0 + np.exp(-x)),
        "sigmoid": lambda: 1.0 / (1.0 + np.exp(-x)),
        "tanh": lambda: np.tanh(x),
    }[kind]()


def ref_matmul(a, b, ta=False, tb=False, bias=None, activation="none"):
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(a, b)
    if bias is not None:
        y = y + bias
    return act(activation, y)


def ref_conv(x, w, bias=None, strides=None, padding=None, dilations=None,
             groups=1, activation="none"):
    k = x.ndim - 2
    strides = strides or [1] * k
    dilations = dilations or [1] * k
    padding = padding or [0] * (2 * k)
    pad = [(0, 0), (0, 0)] + [(padding[i], padding[k + i]) for i in range(k)]
    xp = np.pad(x, pad)
    n, c = x.shape[:2]
    o = w.shape[0]
    cg, og = c // groups, o // groups
    out_sp = [(xp.shape[2 + i] - dilations[i] * (w.shape[2 + i] - 1) - 1)
              // strides[i] + 1 for i in range(k)]
    y = np.zeros([n, o] + out_sp)
    for idx in np.ndindex(*([n, o] + out_sp)):
        b_, oc = idx[:2]
        g = oc // og
        acc = 0.0
        for ic in range(cg):
            for kw in np.ndindex(*w.shape[2:]):
                pos = tuple(idx[2 + i] * strides[i] + kw[i] * dilations[i]
                            for i in range(k))
                acc += xp[(b_, g * cg + ic) + pos] * w[(oc, ic) + kw]
        y[idx] = acc
    if bias is not None:
        y += bias.reshape([1, o] + [1] * k)
    return act(activation, y)


LOWEST = -np.finfo(np.float32).max


def ref_attention(q, k, v, mask=None, causal=False, scale=None):
    """onnxruntime's CPU semantics: masked scores become the lowest finite
    f32, so a fully masked row averages V."""
    B, Hq, Tq, D = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    out = np.zeros((B, Hq, Tq, v.shape[3]))
    m = None if mask is None else np.broadcast_to(mask, (B, Hq, Tq, Tk))
    for b in range(B):
        for h in range(Hq):
            hk = h // (Hq // Hkv)
            s = scale * q[b, h] @ k[b, hk].T
            if m is not None:
                if m.dtype == bool:
                    s = np.where(m[b, h], s, LOWEST)
                else:
                    s = s + m[b, h]
            if causal:
                for i in range(Tq):
                    s[i, Tk - Tq + i + 1:] = LOWEST
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            out[b, h] = p @ v[b, hk]
    return out


def ref_layer_norm(x, g, b, axis, eps):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * g
    return y if b is None else y + b


def ref_rms_norm(x, g, axis, eps):
    axes = tuple(range(axis % x.ndim, x.ndim))
    return x / np.sqrt((x ** 2).mean(axis=axes, keepdims=True) + eps) * g


def ref_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def param_index(shape, axis, block):
    """Index arrays broadcasting a scale of per-tensor/channel/group layout."""
    if axis is None:
        return lambda s: s
    def f(s):
        idx = np.indices(shape)
        if s.ndim == 1:
            return s[idx[axis]]
        idx[axis] //= block
        return s[tuple(idx)]
    return f


def ref_quantize(x, s, zp, qmin, qmax, axis=None, block=None):
    bc = param_index(x.shape, axis, block)
    q = np.round(x / bc(s))  # half to even
    if zp is not None:
        q = q + bc(zp)
    return np.clip(q, qmin, qmax) + 0.0  # no negative zero


def ref_dequantize(q, s, zp, axis=None, block=None):
    bc = param_index(q.shape, axis, block)
    zp = 0 if zp is None else bc(zp)
    return (q - zp) * bc(s) + 0.0


def round_float(v, mbits, emin, largest):
    """v rounded to nearest even in a binary format with `mbits` mantissa
    bits and minimum normal exponent `emin`, saturated to +-largest."""
    if abs(v) >= largest:
        return math.copysign(largest, v)
    if v == 0:
        return v
    e = max(math.floor(math.log2(abs(v))), emin)
    step = 2.0 ** (e - mbits)
    r = math.copysign(round(v / step) * step, v)  # keeps the sign of zero
    return max(min(r, largest), -largest)


def pack(values, axis, bits, storage_bits=8):
    """Packs integers along `axis`, the first element in the low bits, into
    little-endian storage words; returns the bytes."""
    values = np.moveaxis(np.asarray(values, dtype=np.int64), axis, -1)
    factor = storage_bits // bits
    fields = values.reshape(values.shape[:-1] + (-1, factor)) & ((1 << bits) - 1)
    words = np.zeros(fields.shape[:-1], dtype=np.int64)
    for f in range(factor):
        words |= fields[..., f] << (f * bits)
    words = np.moveaxis(words, -1, axis)
    dtype = {8: "<u1", 16: "<u2", 32: "<u4"}[storage_bits]
    return np.ascontiguousarray(words).astype(dtype).tobytes()


rng = np.random.default_rng(20250604)


def grid(shape, lo=-2.0, hi=2.0, step=1 / 16):
    """Random values on a grid exact in f16 and f32: products and sums of a
    few of them are exact too."""
    n = rng.integers(round(lo / step), round(hi / step) + 1, size=shape)
    return n * step


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------

def matmul_test():
    t = Test("matmul.mlir", [
        "sits.matmul lowered to linalg.matmul, linalg.batch_matmul and a",
        "contraction generic, with bias and activation epilogues, run on the CPU."])

    t.comment("2-D, bias, exact GELU: linalg.matmul.")
    a, b, bias = grid((3, 4)), grid((4, 5)), grid((5,))
    va, vb, vbias = t.const(a, "f32"), t.const(b, "f32"), t.const(bias, "f32")
    y = t.op(f"sits.matmul {va}, {vb} bias({vbias}) {{activation = #sits.activation<gelu>}}"
             " : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>")
    t.print(y, (3, 5), ref_matmul(a, b, bias=bias, activation="gelu"))

    t.comment("x @ W^T with a rank-3 x: batch folded into M, transposed map; SiLU.")
    a, b = grid((2, 3, 4)), grid((5, 4))
    va, vb = t.const(a, "f32"), t.const(b, "f32")
    y = t.op(f"sits.matmul {va}, {vb} {{transpose_rhs, activation = #sits.activation<silu>}}"
             " : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>")
    t.print(y, (2, 3, 5), ref_matmul(a, b, tb=True, activation="silu"))

    t.comment("Transposed lhs, batched rhs, bias, tanh: linalg.batch_matmul.")
    a, b, bias = grid((2, 4, 3)), grid((2, 4, 5)), grid((5,))
    va, vb, vbias = t.const(a, "f32"), t.const(b, "f32"), t.const(bias, "f32")
    y = t.op(f"sits.matmul {va}, {vb} bias({vbias}) {{transpose_lhs, activation = #sits.activation<tanh>}}"
             " : (tensor<2x4x3xf32>, tensor<2x4x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>")
    t.print(y, (2, 3, 5), ref_matmul(a, b, ta=True, bias=bias, activation="tanh"))

    t.comment("A shared 2-D lhs broadcast over the rhs batch, bias, ReLU.")
    a, b, bias = grid((3, 4)), grid((2, 4, 5)), grid((5,))
    va, vb, vbias = t.const(a, "f32"), t.const(b, "f32"), t.const(bias, "f32")
    y = t.op(f"sits.matmul {va}, {vb} bias({vbias}) {{activation = #sits.activation<relu>}}"
             " : (tensor<3x4xf32>, tensor<2x4x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>")
    t.print(y, (2, 3, 5), ref_matmul(a, b, bias=bias, activation="relu"))

    t.comment("Partial batch broadcast [2, 1] x [3]: a contraction generic; sigmoid.")
    a, b = grid((2, 1, 3, 4)), grid((3, 4, 2))
    va, vb = t.const(a, "f32"), t.const(b, "f32")
    y = t.op(f"sits.matmul {va}, {vb} {{activation = #sits.activation<sigmoid>}}"
             " : (tensor<2x1x3x4xf32>, tensor<3x4x2xf32>) -> tensor<2x3x3x2xf32>")
    t.print(y, (2, 3, 3, 2), ref_matmul(a, b, activation="sigmoid"))

    t.comment("Rank-4 scores q @ k^T, tanh-approximated GELU.")
    a, b = grid((1, 2, 3, 4)), grid((1, 2, 5, 4))
    va, vb = t.const(a, "f32"), t.const(b, "f32")
    y = t.op(f"sits.matmul {va}, {vb} {{transpose_rhs, activation = #sits.activation<gelu_tanh>}}"
             " : (tensor<1x2x3x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x2x3x5xf32>")
    t.print(y, (1, 2, 3, 5), ref_matmul(a, b, tb=True, activation="gelu_tanh"))

    t.comment("f16 operands accumulate in f32; one rounding to f16 at the end.")
    a, b, bias = grid((2, 3), step=1 / 8), grid((3, 4), step=1 / 8), grid((4,), step=1 / 8)
    va, vb, vbias = t.const(a, "f16"), t.const(b, "f16"), t.const(bias, "f16")
    y = t.op(f"sits.matmul {va}, {vb} bias({vbias})"
             " : (tensor<2x3xf16>, tensor<3x4xf16>, tensor<4xf16>) -> tensor<2x4xf16>")
    expected = np.float16(ref_matmul(a, b, bias=bias)).astype(np.float64)
    t.print(y, (2, 4), expected, elt="f16")
    t.write()


def conv_test():
    t = Test("conv.mlir", [
        "sits.conv lowered to tensor.pad and linalg.conv_* (grouped: NGCHW views,",
        "or a generic in 1-D and 3-D), with bias and activation, run on the CPU."])

    def case(title, xs, ws, bias=True, activation="none", **attrs):
        t.comment(title)
        x, w = grid(xs, step=1 / 8), grid(ws, step=1 / 8)
        b = grid((ws[0],), step=1 / 8) if bias else None
        y = ref_conv(x, w, b, activation=activation, **attrs)
        vx, vw = t.const(x, "f32"), t.const(w, "f32")
        operands = f"{vx}, {vw}"
        types = f"{tensor_type(xs, 'f32')}, {tensor_type(ws, 'f32')}"
        if bias:
            operands += f" bias({t.const(b, 'f32')})"
            types += f", {tensor_type((ws[0],), 'f32')}"
        parts = []
        for key in ["strides", "padding", "dilations"]:
            if key in attrs:
                parts.append(f"{key} = array<i64: " +
                             ", ".join(str(v) for v in attrs[key]) + ">")
        if attrs.get("groups", 1) != 1:
            parts.append(f"groups = {attrs['groups']} : i64")
        if activation != "none":
            parts.append(f"activation = #sits.activation<{activation}>")
        attr = " {" + ", ".join(parts) + "}" if parts else ""
        v = t.op(f"sits.conv {operands}{attr} : ({types}) -> "
                 f"{tensor_type(y.shape, 'f32')}")
        t.print(v, y.shape, y)

    case("2-D, stride 2, padding 1, bias, ReLU: linalg.conv_2d_nchw_fchw.",
         (1, 2, 5, 5), (3, 2, 3, 3), activation="relu", strides=[2, 2],
         padding=[1, 1, 1, 1])
    case("2-D grouped (2 groups), strides (2, 1), dilations (1, 2), asymmetric"
         " padding: linalg.conv_2d_ngchw_gfchw.",
         (2, 4, 5, 6), (4, 2, 3, 2), groups=2, strides=[2, 1], dilations=[1, 2],
         padding=[1, 0, 2, 1])
    case("2-D depthwise (groups = channels), SiLU.",
         (1, 3, 4, 4), (3, 1, 2, 2), groups=3, activation="silu")
    case("1-D, bias: linalg.conv_1d_ncw_fcw.",
         (2, 3, 7), (2, 3, 3), strides=[2], padding=[1, 2])
    case("1-D grouped, stride 2, dilation 2, padding (2, 1): a grouped generic.",
         (1, 4, 9), (6, 2, 3), groups=2, strides=[2], dilations=[2],
         padding=[2, 1])
    case("3-D: linalg.conv_3d_ncdhw_fcdhw.",
         (1, 2, 3, 4, 3), (2, 2, 2, 2, 2), padding=[0, 1, 0, 0, 1, 1])
    case("3-D grouped, stride 2: a grouped generic.",
         (1, 2, 4, 4, 4), (4, 1, 2, 2, 2), groups=2, strides=[2, 2, 2],
         bias=False, activation="tanh")
    t.write()


def attention_test():
    t = Test("attention.mlir", [
        "sits.attention decomposed into contraction, mask, softmax and",
        "normalization generics: GQA, causal masks with a KV cache (Tk > Tq),",
        "boolean and additive masks, fully masked rows (onnxruntime: the mean of V)."])

    def case(title, qs, ks, vs, mask=None, mask_elt=None, causal=False, scale=None):
        t.comment(title)
        q, k, v = grid(qs), grid(ks), grid(vs)
        vq, vk, vv = t.const(q, "f32"), t.const(k, "f32"), t.const(v, "f32")
        operands = f"{vq}, {vk}, {vv}"
        types = ", ".join(tensor_type(s, "f32") for s in (qs, ks, vs))
        if mask is not None and mask_elt == "i1":
            operands += f" mask({t.bool_tensor(mask)})"
        elif mask is not None:
            operands += f" mask({t.const(mask, mask_elt)})"
        if mask is not None:
            types += ", " + tensor_type(mask.shape, mask_elt)
        parts = []
        if causal:
            parts.append("causal")
        if scale is not None:
            parts.append(f"scale = {mlir_float(scale)} : f64")
        attr = " {" + ", ".join(parts) + "}" if parts else ""
        out_shape = qs[:3] + (vs[3],)
        y = t.op(f"sits.attention {operands}{attr} : ({types}) -> "
                 f"{tensor_type(out_shape, 'f32')}")
        ref_mask = None
        if mask is not None:
            ref_mask = mask.astype(bool) if mask_elt == "i1" else mask
        t.print(y, out_shape, ref_attention(q, k, v, ref_mask, causal, scale))

    case("GQA (4 query heads on 2 key/value heads), causal, 3 cached keys:"
         " Tq = 2, Tk = 5.", (1, 4, 2, 4), (1, 2, 5, 4), (1, 2, 5, 3), causal=True)
    mask = np.array([[1, 1, 0, 1], [0, 0, 0, 0], [1, 0, 1, 1]], dtype=np.int64)
    case("Boolean mask with a fully masked row, explicit scale.",
         (2, 2, 3, 2), (2, 2, 4, 2), (2, 2, 4, 2), mask=mask, mask_elt="i1",
         scale=0.75)
    fmask = grid((2, 1, 1, 3), lo=-1, hi=1)
    case("Multi-query (1 key/value head), additive [B, 1, 1, Tk] mask, causal"
         " prefill (Tk = Tq).", (2, 3, 3, 4), (2, 1, 3, 4), (2, 1, 3, 2),
         mask=fmask, mask_elt="f32", causal=True)
    case("One-token decode against a 5-token cache, causal (every key visible).",
         (1, 2, 1, 4), (1, 2, 5, 4), (1, 2, 5, 4), causal=True)
    t.write()


def norm_test():
    t = Test("norms.mlir", [
        "sits.layer_norm and sits.rms_norm: reductions over [axis, rank) with",
        "epsilon, scale and bias, run on the CPU."])

    t.comment("layer_norm over the last axis, with bias.")
    x, g, b = grid((2, 3, 8)), grid((8,)), grid((8,))
    vx, vg, vb = t.const(x, "f32"), t.const(g, "f32"), t.const(b, "f32")
    y = t.op(f"sits.layer_norm {vx}, {vg}, {vb} {{epsilon = 1.0e-05 : f64}}"
             " : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>")
    t.print(y, (2, 3, 8), ref_layer_norm(x, g, b, -1, 1e-5))

    t.comment("layer_norm over the last two axes (axis = 1), no bias.")
    x, g = grid((2, 3, 4), lo=-4, hi=4), grid((3, 4))
    vx, vg = t.const(x, "f32"), t.const(g, "f32")
    y = t.op(f"sits.layer_norm {vx}, {vg} {{axis = 1 : i64, epsilon = 1.0e-03 : f64}}"
             " : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>")
    t.print(y, (2, 3, 4), ref_layer_norm(x, g, None, 1, 1e-3))

    t.comment("rms_norm over the last axis.")
    x, g = grid((3, 8)), grid((8,))
    vx, vg = t.const(x, "f32"), t.const(g, "f32")
    y = t.op(f"sits.rms_norm {vx}, {vg} {{epsilon = 1.0e-06 : f64}}"
             " : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>")
    t.print(y, (3, 8), ref_rms_norm(x, g, -1, 1e-6))

    t.comment("rms_norm over the last two axes, f16 in, f32 statistics.")
    x, g = grid((2, 2, 4), step=1 / 8), grid((2, 4), step=1 / 8)
    vx, vg = t.const(x, "f16"), t.const(g, "f16")
    y = t.op(f"sits.rms_norm {vx}, {vg} {{axis = 1 : i64}}"
             " : (tensor<2x2x4xf16>, tensor<2x4xf16>) -> tensor<2x2x4xf16>")
    t.print(y, (2, 2, 4),
            np.float16(ref_rms_norm(x, g, 1, 1e-5)).astype(np.float64), elt="f16")
    t.write()


def softmax_activation_test():
    t = Test("softmax-activation.mlir", [
        "sits.softmax (max-subtracted, any axis) and every sits.activation kind,",
        "run on the CPU."])

    t.comment("softmax along the last axis.")
    x = grid((2, 5), lo=-4, hi=4)
    vx = t.const(x, "f32")
    y = t.op(f"sits.softmax {vx} : tensor<2x5xf32>")
    t.print(y, (2, 5), ref_softmax(x, -1))

    t.comment("softmax along a middle axis; large logits do not overflow.")
    x = grid((3, 2, 4), lo=-4, hi=4)
    x[0, :, 0] = [80.0, 100.0]
    vx = t.const(x, "f32")
    y = t.op(f"sits.softmax {vx} {{axis = 1 : i64}} : tensor<3x2x4xf32>")
    t.print(y, (3, 2, 4), ref_softmax(x, 1))

    x = np.array([-6.0, -2.5, -1.0, -0.25, 0.0, 0.375, 1.5, 4.0])
    for kind in ["relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"]:
        t.comment(f"activation <{kind}>.")
        vx = t.const(x.reshape(1, 8), "f32")
        y = t.op(f"sits.activation <{kind}> {vx} : tensor<1x8xf32>")
        t.print(y, (1, 8), act(kind, x))
    t.write()


def quant_test():
    t = Test("quantize.mlir", [
        "sits.quantize and sits.dequantize: per tensor, per channel and per group,",
        "zero points, round half to even, saturation, packed int4 storage."])
    one = t.const(np.float64(1.0), "f32")

    t.comment("Per-tensor i8: ties round to even, out-of-range values saturate"
              " (read back with scale 1).")
    x = np.array([[0.625, 0.875, -0.625, -0.875, 0.0, 0.25],
                  [40.0, -40.0, 31.75, -32.0, 0.375, -0.125]])
    s = 0.25
    vx, vs = t.const(x, "f32"), t.const(np.float64(s), "f32")
    q = t.op(f"sits.quantize {vx}, {vs} : (tensor<2x6xf32>, tensor<f32>) -> tensor<2x6xi8>")
    y = t.op(f"sits.dequantize {q}, {one} : (tensor<2x6xi8>, tensor<f32>) -> tensor<2x6xf32>")
    t.print(y, (2, 6), ref_quantize(x, s, None, -128, 127))

    t.comment("Per-channel ui8 with zero points (axis 0), dequantized with the"
              " same parameters.")
    x = grid((3, 4), lo=-3, hi=3)
    s, zp = np.array([0.03125, 0.0625, 0.125]), np.array([128, 3, 250])
    vx, vs, vz = t.const(x, "f32"), t.const(s, "f32"), t.const(zp, "ui8")
    q = t.op(f"sits.quantize {vx}, {vs}, {vz} {{axis = 0 : i64}}"
             " : (tensor<3x4xf32>, tensor<3xf32>, tensor<3xui8>) -> tensor<3x4xui8>")
    y = t.op(f"sits.dequantize {q}, {vs}, {vz} {{axis = 0 : i64}}"
             " : (tensor<3x4xui8>, tensor<3xf32>, tensor<3xui8>) -> tensor<3x4xf32>")
    qr = ref_quantize(x, s, zp, 0, 255, axis=0)
    t.print(y, (3, 4), ref_dequantize(qr, s, zp, axis=0))

    packed1 = "#sits.packed<storage = i8, axis = 1>"
    t.comment("Per-group i4 with (packed) zero points, groups of 4 along axis 1"
              " (the last group partial).")
    x = grid((2, 6), lo=-2, hi=2)
    s = np.array([[0.125, 0.25], [0.0625, 0.5]])
    zp = np.array([[1, -2], [0, 3]])
    vx, vs = t.const(x, "f32"), t.const(s, "f32")
    vz = t.const(zp, "i4", encoding=packed1)
    zt = f"tensor<2x2xi4, {packed1}>"
    q = t.op(f"sits.quantize {vx}, {vs}, {vz} {{axis = 1 : i64, block_size = 4 : i64}}"
             f" : (tensor<2x6xf32>, tensor<2x2xf32>, {zt}) -> tensor<2x6xi4>")
    y = t.op(f"sits.dequantize {q}, {vs}, {vz} {{axis = 1 : i64, block_size = 4 : i64}}"
             f" : (tensor<2x6xi4>, tensor<2x2xf32>, {zt}) -> tensor<2x6xf32>")
    qr = ref_quantize(x, s, zp, -8, 7, axis=1, block=4)
    t.print(y, (2, 6), ref_dequantize(qr, s, zp, axis=1, block=4))

    t.comment("Quantize into packed i4 (two per byte along axis 1) and back.")
    x = grid((2, 8), lo=-1, hi=1)
    s = 0.125
    vx, vs = t.const(x, "f32"), t.const(np.float64(s), "f32")
    q = t.op(f"sits.quantize {vx}, {vs} : (tensor<2x8xf32>, tensor<f32>)"
             f" -> tensor<2x8xi4, {packed1}>")
    y = t.op(f"sits.dequantize {q}, {vs} : (tensor<2x8xi4, {packed1}>, tensor<f32>)"
             " -> tensor<2x8xf32>")
    t.print(y, (2, 8), ref_dequantize(ref_quantize(x, s, None, -8, 7), s, None))

    packed0 = "#sits.packed<storage = i8, axis = 0>"
    t.comment("Dequantize raw packed ui4 bytes (a dense_resource, low nibble"
              " first along axis 0) with per-channel scales and zero points.")
    qv = rng.integers(0, 16, size=(4, 4))
    s, zp = np.array([0.5, 0.25, 2.0, 0.125]), np.array([8, 0, 15, 3])
    vq = t.resource("ui4_weights", pack(qv, 0, 4), (4, 4), "ui4", packed0)
    vs = t.const(s, "f32")
    vz = t.resource("ui4_zero_points", pack(zp, 0, 4), (4,), "ui4", packed0)
    y = t.op(f"sits.dequantize {vq}, {vs}, {vz} {{axis = 1 : i64}}"
             f" : (tensor<4x4xui4, {packed0}>, tensor<4xf32>, tensor<4xui4, {packed0}>)"
             " -> tensor<4x4xf32>")
    t.print(y, (4, 4), ref_dequantize(qv, s, zp, axis=1))

    t.comment("A packed i4 constant, repacked by the conversion, and i16.")
    qv = rng.integers(-8, 8, size=(2, 4))
    vq = t.const(qv, "i4", encoding=packed1)
    y = t.op(f"sits.dequantize {vq}, {one} : (tensor<2x4xi4, {packed1}>, tensor<f32>)"
             " -> tensor<2x4xf32>")
    t.print(y, (2, 4), qv)
    x = np.array([[3000.5, -20000.0, 70000.0, 1.5]])
    vx = t.const(x, "f32")
    q = t.op(f"sits.quantize {vx}, {one} : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xi16>")
    y = t.op(f"sits.dequantize {q}, {one} : (tensor<1x4xi16>, tensor<f32>) -> tensor<1x4xf32>")
    t.print(y, (1, 4), ref_quantize(x, 1.0, None, -32768, 32767))
    t.write()


def fp8_test():
    t = Test("quantize-fp8.mlir", [
        "sits.quantize/dequantize to OCP FP8 (E4M3FN, E5M2): round to nearest",
        "even, saturate to the largest finite value. The CPU has no fp8, so the",
        "arith ops run through MLIR's APFloat runtime (convert-arith-to-apfloat)."],
        run=RUN_APFLOAT)
    x = f32([[1.0, 2.3, -1.7, 1000.0, 0.013, -0.25, 3.1, -70000.0],
             [0.0009, -0.004, 7.4, 0.5625, 100.0, -3.0e-5, 0.0, 17.0]])
    s = 0.5
    vx, vs = t.const(x, "f32"), t.const(np.float64(s), "f32")
    for elt, mbits, emin, largest in [("f8E4M3FN", 3, -6, 448.0),
                                      ("f8E5M2", 2, -14, 57344.0)]:
        t.comment(f"{elt}.")
        expected = np.vectorize(
            lambda v: round_float(v / s, mbits, emin, largest) * s)(x)
        q = t.op(f"sits.quantize {vx}, {vs} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8x{elt}>")
        y = t.op(f"sits.dequantize {q}, {vs} : (tensor<2x8x{elt}>, tensor<f32>) -> tensor<2x8xf32>")
        t.print(y, (2, 8), expected)
    t.write()


def qmatmul_test():
    t = Test("qmatmul.mlir", [
        "sits.qmatmul: the weight is dequantized (unpacked, per-group scales and",
        "zero points) in a generic feeding the matmul, run on the CPU."])

    packed0 = "#sits.packed<storage = i8, axis = 0>"
    packed1 = "#sits.packed<storage = i8, axis = 1>"
    t.comment("GPTQ layout: int4 [K, N] packed two per byte along K, one scale"
              " and zero point per 4 rows (zero points packed along N), bias, SiLU.")
    K, N, M, bs = 8, 4, 2, 4
    x = grid((M, K))
    w = rng.integers(-8, 8, size=(K, N))
    s = grid((K // bs, N), lo=0.0625, hi=0.5, step=1 / 32)
    zp = rng.integers(-2, 3, size=(K // bs, N))
    bias = grid((N,))
    vx = t.const(x, "f32")
    vw = t.resource("gptq_int4", pack(w, 0, 4), (K, N), "i4", packed0)
    vs, vb = t.const(s, "f32"), t.const(bias, "f32")
    vz = t.const(zp, "i4", encoding=packed1)
    y = t.op(f"sits.qmatmul {vx}, {vw}, {vs} zero_point({vz}) bias({vb})"
             f" {{axis = 0 : i64, block_size = {bs} : i64, activation = #sits.activation<silu>}}"
             f" : (tensor<{M}x{K}xf32>, tensor<{K}x{N}xi4, {packed0}>, tensor<{K // bs}x{N}xf32>,"
             f" tensor<{K // bs}x{N}xi4, {packed1}>, tensor<{N}xf32>) -> tensor<{M}x{N}xf32>")
    wd = ref_dequantize(w, s, zp, axis=0, block=bs)
    t.print(y, (M, N), act("silu", x @ wd + bias))

    t.comment("MatMulNBits layout: uint4 [N, K] (transpose_weight) packed along K,"
              " per-group scales and packed zero points, rank-3 input.")
    K, N, bs = 8, 3, 4
    x = grid((2, 2, K))
    w = rng.integers(0, 16, size=(N, K))
    s = grid((N, K // bs), lo=0.0625, hi=0.5, step=1 / 32)
    zp = rng.integers(0, 16, size=(N, K // bs))
    vx = t.const(x, "f32")
    vw = t.resource("nbits_uint4", pack(w, 1, 4), (N, K), "ui4", packed1)
    vs = t.const(s, "f32")
    vz = t.resource("nbits_zero_points", pack(zp, 1, 4), (N, K // bs), "ui4", packed1)
    y = t.op(f"sits.qmatmul {vx}, {vw}, {vs} zero_point({vz})"
             f" {{axis = 1 : i64, block_size = {bs} : i64, transpose_weight}}"
             f" : (tensor<2x2x{K}xf32>, tensor<{N}x{K}xui4, {packed1}>, tensor<{N}x{K // bs}xf32>,"
             f" tensor<{N}x{K // bs}xui4, {packed1}>) -> tensor<2x2x{N}xf32>")
    wd = ref_dequantize(w, s, zp, axis=1, block=bs)
    t.print(y, (2, 2, N), x @ wd.T)

    t.comment("Per-channel int8 (one scale per output column), no zero point.")
    x = grid((3, 5))
    w = rng.integers(-128, 128, size=(5, 2))
    s = np.array([0.015625, 0.0078125])
    vx, vw, vs = t.const(x, "f32"), t.const(w, "i8"), t.const(s, "f32")
    y = t.op(f"sits.qmatmul {vx}, {vw}, {vs} {{axis = 1 : i64}}"
             " : (tensor<3x5xf32>, tensor<5x2xi8>, tensor<2xf32>) -> tensor<3x2xf32>")
    t.print(y, (3, 2), x @ ref_dequantize(w, s, None, axis=1))
    t.write()


if __name__ == "__main__":
    matmul_test()
    conv_test()
    attention_test()
    norm_test()
    softmax_activation_test()
    quant_test()
    fp8_test()
    qmatmul_test()
