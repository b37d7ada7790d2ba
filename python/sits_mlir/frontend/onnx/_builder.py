"""IR building blocks shared by the op converters and the fused patterns.

`Builder` creates ops at the current insertion point and location (the
importer sets both per ONNX node). Shapes are handled as *mixed* lists: an
int for a static extent, an `index` Value (from `tensor.dim`) for a dynamic
one. Implicit ONNX broadcasting is made explicit here: operands of
elementwise ops are brought to the result shape by dropping unit dimensions
(`tensor.collapse_shape`) and `linalg.broadcast`ing into a `tensor.empty`.
"""

from __future__ import annotations

import mmap
import re
from typing import Optional, Sequence

import numpy as np

from ... import ir
from ...dialects import arith, linalg, tensor
from . import _types

DYN = ir.ShapedType.get_dynamic_size()
#: Constants with more elements than this become `dense_resource` blobs.
INLINE_LIMIT = 64
_ALIGN = 64


def shape_of(v: ir.Value) -> tuple:
    """Static shape of a ranked tensor value, None for dynamic extents."""
    t = ir.RankedTensorType(v.type)
    return tuple(None if d == DYN else d for d in t.shape)


def elem_of(v: ir.Value) -> ir.Type:
    return ir.RankedTensorType(v.type).element_type


def is_mapped(a: np.ndarray) -> bool:
    """Whether `a` is a C-contiguous view of a mapped file (an initializer's
    bytes in the model file or its external data): a resource can point at
    it as it is."""
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    mapped = isinstance(base, mmap.mmap) or (
        isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap))
    return mapped and a.flags.c_contiguous


def alignment_of(a: np.ndarray) -> int:
    """The largest power of two, up to 64, that `a`'s address is a multiple of."""
    address = a.ctypes.data
    return min(_ALIGN, address & -address) if address else _ALIGN


def aligned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `a` whose data starts on a 64-byte boundary."""
    a = np.asarray(a)
    nbytes = max(a.nbytes, 1)
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % _ALIGN
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def reassociation(big: Sequence, small: Sequence) -> Optional[list]:
    """Groups of consecutive dims of `big` whose products are the dims of
    `small` (None = dynamic), or None when `small` is not a collapse of
    `big`. A dynamic dim of `small` takes exactly one dynamic dim of `big`
    (plus unit dims)."""
    groups, i, n = [], 0, len(big)
    for t in small:
        start = i
        if t is None:
            while i < n and big[i] == 1:
                i += 1
            if i >= n or big[i] is not None:
                return None
            i += 1
        else:
            prod = 1
            while i < n:
                d = big[i]
                if d is None:
                    return None
                prod *= d
                i += 1
                if prod == t:
                    break
                if t != 0 and prod > t:
                    return None
            if prod != t:
                return None
        groups.append(list(range(start, i)))
    while i < n and big[i] == 1:
        if not groups:
            i += 1
            continue
        groups[-1].append(i)
        i += 1
    if i != n:
        return None
    if not groups and any(d != 1 for d in big):
        return None
    return groups


def reshape_kind(src: Sequence, dst: Sequence) -> Optional[str]:
    """How `src` provably becomes `dst` (static ints, None for dynamic):
    'same' (at most a `tensor.cast`), 'collapse', 'expand', 'reshape' (a
    static `tensor.reshape`), or None when the shapes alone cannot tell
    (e.g. [?, ?] to [?, ?] may swap the extents)."""
    src, dst = tuple(src), tuple(dst)
    if len(src) == len(dst):
        differ = [i for i, (a, b) in enumerate(zip(src, dst)) if not (a == b and a is not None)]
        # Equal products: one unknown position among equal static ones is equal.
        if len(differ) <= 1:
            return "same"
    elif len(src) > len(dst) and reassociation(src, dst) is not None:
        return "collapse"
    elif len(src) < len(dst) and reassociation(dst, src) is not None:
        return "expand"
    if None not in dst:
        return "reshape"
    return None


# Dtypes NumPy's buffer protocol cannot describe: passed as same-width ints.
_SPECIAL = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
_RESOURCE_CHARS = re.compile(r"[^A-Za-z0-9_.]")


class Builder:
    """Op-building helpers; `weights` collects every resource blob."""

    def __init__(self, weights: dict):
        self.weights = weights
        self._index_consts = {}

    # -- types ----------------------------------------------------------------

    @staticmethod
    def tensor_type(shape: Sequence, dtype) -> ir.RankedTensorType:
        elem = dtype if isinstance(dtype, ir.Type) else _types.mlir_type(dtype)
        return ir.RankedTensorType.get([DYN if d is None else int(d) for d in shape], elem)

    # -- constants ------------------------------------------------------------

    def index(self, i: int) -> ir.Value:
        """An `index` constant; those at function level are shared (they
        dominate everything built after them), those in regions are not."""
        top = ir.InsertionPoint.current.block.owner.name == "func.func"
        v = self._index_consts.get(i) if top else None
        if v is None:
            v = arith.constant(ir.IndexType.get(), int(i))
            if top:
                self._index_consts[i] = v
        return v

    def scalar(self, value, elem: ir.Type) -> ir.Value:
        """A scalar (not tensor) constant of MLIR type `elem`."""
        if isinstance(elem, ir.FloatType):
            return arith.constant(elem, ir.FloatAttr.get(elem, float(value)))
        if isinstance(elem, ir.IndexType):
            return arith.constant(elem, int(value))
        width = ir.IntegerType(elem).width
        v = int(value)
        if width == 1:
            v = 1 if v else 0
        elif v >= 1 << (width - 1):
            v -= 1 << width  # two's complement for signless attributes
        return arith.constant(elem, ir.IntegerAttr.get(elem, v))

    def constant(self, array: np.ndarray, *, name: str = "cst", elem: Optional[ir.Type] = None) -> ir.Value:
        """`arith.constant` of `array`: a splat or up to INLINE_LIMIT elements
        inline, anything larger as a `dense_resource` blob whose (aligned)
        buffer is kept in `self.weights`. `elem` overrides the element type
        (e.g. `ui8` for unsigned quantized weights)."""
        a = np.asarray(array)
        if elem is None and _types.is_byte_coded(a.dtype) and str(a.dtype) not in _SPECIAL:
            # Sub-byte elements have no dense attribute of their own: their
            # bytes are the constant.
            i8 = ir.IntegerType.get_signless(8)
            stored = self.constant(a.view(np.uint8), name=name, elem=i8)
            return self.from_bytes(stored, a.dtype)
        elem = elem or _types.mlir_type(a.dtype)
        ttype = self.tensor_type(a.shape, elem)
        special = str(a.dtype) in _SPECIAL
        if a.size > 1:
            flat = a.reshape(-1)
            if special:
                flat = flat.view(_int_view(a.dtype))
            # Weights differ within their first elements: only a uniform
            # head makes it worth reading the whole tensor.
            head = flat[:64]
            splat = bool(np.all(head == head[0])) and bool(np.all(flat == flat[0]))
        else:
            splat = a.size == 1
        if splat and a.size > 0:
            attr = self._dense(a.reshape(-1)[:1].reshape(()), ttype, special, splat=True)
        elif a.dtype == np.bool_:
            # Stored as bytes and compared with 0: a buffer of i1 (one byte
            # per element in memory) has no LLVM lowering as a global.
            i8 = ir.IntegerType.get_signless(8)
            stored = self.constant(a.astype(np.int8), name=name, elem=i8)
            zero = self.splat(0, list(a.shape), i8)
            return arith.cmpi(arith.CmpIPredicate.ne, stored, zero)
        elif a.size <= INLINE_LIMIT and not special:
            attr = self._dense(a, ttype, special)
        else:
            attr = self._resource(a, name, ttype)
        return arith.constant(ttype, attr)

    def _dense(self, a, ttype, special, splat=False):
        if a.dtype == np.bool_:
            if splat:
                return ir.DenseElementsAttr.get_splat(
                    ttype, ir.IntegerAttr.get(ir.IntegerType.get_signless(1), int(bool(a))))
            return ir.DenseElementsAttr.get(np.packbits(np.ascontiguousarray(a).reshape(-1),
                                                        bitorder="little"), type=ttype)
        if special:
            a = a.view(_int_view(a.dtype))
        return ir.DenseElementsAttr.get(np.ascontiguousarray(a), type=ttype)

    def _resource(self, a: np.ndarray, name: str, ttype) -> ir.Attribute:
        # Mapped weights are used where they lie, however their bytes fall in
        # the file (the compiler reads constants bytewise, and the artifact
        # aligns each weight anew); anything else is copied to an aligned
        # buffer of its own.
        mapped = is_mapped(a)
        buf = a if mapped else aligned_copy(a)
        if str(buf.dtype) in _SPECIAL:
            view = buf.view(_int_view(buf.dtype))
        else:
            view = buf
        key = _RESOURCE_CHARS.sub("_", name).strip("_.") or "cst"
        if key[0].isdigit():
            key = "w_" + key
        # Only mapped file bytes are immutable blobs: the compiler drops their
        # pages once it has read them (releaseConstantPages), which would
        # zero anonymous memory.
        attr = ir.DenseResourceElementsAttr.get_from_buffer(memoryview(view), key, ttype,
                                                             alignment=alignment_of(buf),
                                                             is_mutable=not mapped)
        text = str(attr)
        actual = text[len("dense_resource<"):text.index(">")].strip('"')
        self.weights[actual] = buf
        return attr

    def from_bytes(self, v: ir.Value, dtype) -> ir.Value:
        """An i8 tensor holding `dtype` values one per byte, ml_dtypes style
        (value in the low bits), as a tensor of `dtype`'s MLIR type."""
        elem = _types.mlir_type(dtype)
        shape = [None if ir.ShapedType(v.type).is_dynamic_dim(i) else d
                 for i, d in enumerate(ir.ShapedType(v.type).shape)]
        is_float = isinstance(elem, ir.FloatType)
        width = ir.FloatType(elem).width if is_float else ir.IntegerType(elem).width
        if width < 8:
            v = arith.trunci(self.tensor_type(shape, ir.IntegerType.get_signless(width)), v)
        if is_float:
            v = arith.bitcast(self.tensor_type(shape, elem), v)
        return v

    def to_bytes(self, v: ir.Value, dtype) -> ir.Value:
        """The inverse of from_bytes: one byte per element, upper bits zero."""
        elem = _types.mlir_type(dtype)
        shape = [None if ir.ShapedType(v.type).is_dynamic_dim(i) else d
                 for i, d in enumerate(ir.ShapedType(v.type).shape)]
        is_float = isinstance(elem, ir.FloatType)
        width = ir.FloatType(elem).width if is_float else ir.IntegerType(elem).width
        if is_float:
            v = arith.bitcast(self.tensor_type(shape, ir.IntegerType.get_signless(width)), v)
        if width < 8:
            v = arith.extui(self.tensor_type(shape, ir.IntegerType.get_signless(8)), v)
        return v

    def splat(self, value, shape: Sequence, elem: ir.Type) -> ir.Value:
        """A tensor of `shape` (mixed) filled with `value`."""
        if all(isinstance(d, int) for d in shape):
            ttype = self.tensor_type(shape, elem)
            if isinstance(elem, ir.FloatType):
                a = ir.FloatAttr.get(elem, float(value))
            else:
                width = ir.IntegerType(elem).width
                v = int(value)
                if width == 1:
                    v = int(bool(v))
                a = ir.IntegerAttr.get(elem, v)
            return arith.constant(ttype, ir.DenseElementsAttr.get_splat(ttype, a))
        return self.fill(self.scalar(value, elem), self.empty(shape, elem))

    # -- shapes ---------------------------------------------------------------

    def dim(self, v: ir.Value, i: int) -> ir.Value:
        return tensor.dim(v, self.index(i))

    def mixed_shape(self, v: ir.Value) -> list:
        return [d if d is not None else self.dim(v, i) for i, d in enumerate(shape_of(v))]

    def empty(self, shape: Sequence, elem: ir.Type) -> ir.Value:
        return tensor.empty(list(shape), elem)

    def fill(self, scalar: ir.Value, init: ir.Value) -> ir.Value:
        return linalg.fill(scalar, outs=[init])

    def broadcast_shape(self, operands: Sequence[ir.Value], hint: Optional[Sequence] = None) -> list:
        """Mixed NumPy-broadcast shape of `operands`; `hint` (the ONNX
        inferred shape) pins extents that are dynamic on every operand."""
        rank = max(len(shape_of(v)) for v in operands)
        out = []
        for o in range(rank):
            static, sources = 1, []
            for v in operands:
                s = shape_of(v)
                i = o - (rank - len(s))
                if i < 0:
                    continue
                if s[i] is None:
                    sources.append((v, i))
                elif s[i] != 1:
                    static = s[i]
            if static != 1:
                out.append(static)
            elif sources:
                h = hint[o] if hint is not None and o < len(hint) else None
                if h is not None:
                    out.append(h)
                    continue
                # Run-time extents are 1 or the broadcast extent: the
                # largest one is the result's.
                extent = self.dim(*sources[0])
                for source in sources[1:]:
                    extent = arith.maxui(extent, self.dim(*source))
                out.append(extent)
            else:
                out.append(1)
        return out

    def cast_to(self, v: ir.Value, shape: Sequence) -> ir.Value:
        """`tensor.cast` to a compatible, differently static shape."""
        target = tuple(d if isinstance(d, int) else None for d in shape)
        if shape_of(v) == target:
            return v
        return tensor.cast(self.tensor_type(target, elem_of(v)), v)

    def collapse(self, v: ir.Value, groups: list, shape: Sequence) -> ir.Value:
        return tensor.collapse_shape(self.tensor_type(shape, elem_of(v)), v, groups)

    def expand(self, v: ir.Value, groups: list, shape: Sequence) -> ir.Value:
        """`tensor.expand_shape` to `shape` (static, None for dynamic); each
        dynamic result dim takes the extent of its group's source dim."""
        dyn = []
        for gi, g in enumerate(groups):
            for j in g:
                if shape[j] is None:
                    dyn.append(self.dim(v, gi))
        static = [DYN if d is None else d for d in shape]
        return tensor.expand_shape(self.tensor_type(shape, elem_of(v)), v, groups, dyn, static)

    def expand_sized(self, v: ir.Value, groups: list, shape: Sequence,
                     sizes: Sequence) -> ir.Value:
        """`tensor.expand_shape` to `shape` whose dynamic extents are the
        index values `sizes` gives at their positions. A group with several
        dynamic extents (`batch*seq` -> `batch, seq`) becomes a
        `tensor.reshape` instead: a memref expansion takes at most one
        dynamic extent per group."""
        if any(sum(shape[j] is None for j in g) > 1 for g in groups):
            i64 = ir.IntegerType.get_signless(64)
            extents = [arith.index_cast(i64, self.index(d) if d is not None else sizes[j])
                       for j, d in enumerate(shape)]
            target = tensor.from_elements(ir.RankedTensorType.get([len(shape)], i64), extents)
            return tensor.reshape(self.tensor_type(shape, elem_of(v)), v, target)
        dyn = [sizes[j] for g in groups for j in g if shape[j] is None]
        static = [DYN if d is None else d for d in shape]
        return tensor.expand_shape(self.tensor_type(shape, elem_of(v)), v, groups, dyn, static)

    def reshape(self, v: ir.Value, shape: Sequence) -> ir.Value:
        """Reshape to `shape` (static ints / None), which the caller knows to
        be right: a collapse or expansion when it is one, a `tensor.cast`
        between compatible shapes of one rank, else `tensor.reshape` (static
        result)."""
        src = shape_of(v)
        shape = tuple(shape)
        if len(src) == len(shape) and all(a == b or a is None or b is None
                                          for a, b in zip(src, shape)):
            return self.cast_to(v, shape)
        if len(src) > len(shape):
            groups = reassociation(src, shape)
            if groups is not None:
                return self.collapse(v, groups, shape)
        elif len(src) < len(shape):
            groups = reassociation(shape, src)
            if groups is not None:
                return self.expand(v, groups, shape)
        if None in shape:
            raise ValueError(f"cannot reshape {src} to {shape}")
        shp = self.constant(np.array(shape, dtype=np.int64), name="shape")
        return tensor.reshape(self.tensor_type(shape, elem_of(v)), v, shp)

    def drop_unit_dims(self, v: ir.Value, keep: Sequence[int]) -> ir.Value:
        """Collapses away every dim of `v` not in `keep` (all must be 1)."""
        src = shape_of(v)
        groups, pending = [], []
        for i in range(len(src)):
            if i in keep:
                groups.append(pending + [i])
                pending = []
            elif groups:
                groups[-1].append(i)
            else:
                pending.append(i)
        return self.collapse(v, groups, [src[i] for i in keep])

    def broadcast_to(self, v: ir.Value, shape: Sequence) -> ir.Value:
        """NumPy-broadcasts `v` to the mixed `shape`."""
        src = shape_of(v)
        r_in, r_out = len(src), len(shape)
        off = r_out - r_in
        if any(d is None and not self._same_extent(v, i, shape[i + off])
               for i, d in enumerate(src)):
            return self._runtime_broadcast(v, shape)
        static = [d if isinstance(d, int) else None for d in shape]
        keep, mapped = [], set()
        for i, d in enumerate(src):
            o = i + off
            if d == 1 and static[o] != 1:
                continue
            keep.append(i)
            mapped.add(o)
        if len(keep) == r_in and r_in == r_out:
            return self.cast_to(v, static)
        if len(keep) < r_in:
            v = self.drop_unit_dims(v, keep)
        # Extents a kept dim is broadcast to must agree; make them as static
        # as the result.
        kept_shape = [static[i + off] if static[i + off] is not None else src[i] for i in keep]
        v = self.cast_to(v, kept_shape)
        added = [o for o in range(r_out) if o not in mapped]
        if all(static[o] == 1 for o in added):
            if not added:
                return v
            # Only unit dims are added: an expand_shape says so.
            groups = reassociation(static, kept_shape)
            if groups is not None:
                return self.expand(v, groups, static)
        init = self.empty(shape, elem_of(v))
        return linalg.broadcast(v, outs=[init], dimensions=added).results[0]

    @staticmethod
    def _same_extent(v: ir.Value, i: int, target) -> bool:
        """Whether the mixed extent `target` is dim `i` of `v` itself."""
        if not isinstance(target, ir.Value):
            return False
        op = target.owner
        if not isinstance(op, ir.Operation) and hasattr(op, "operation"):
            op = op.operation
        if getattr(op, "name", None) != "tensor.dim" or op.operands[0] != v:
            return False
        index = op.operands[1].owner
        index = getattr(index, "operation", index)
        try:
            return ir.IntegerAttr(index.attributes["value"]).value == i
        except (KeyError, ValueError, TypeError):
            return False

    def _runtime_broadcast(self, v: ir.Value, shape: Sequence) -> ir.Value:
        """Broadcast of `v` whose dynamic extents may be 1 at run time (so
        broadcast) or the target extent: a `linalg.generic` reading `v` at
        index 0 along every such dim whose run-time extent is 1."""
        src = shape_of(v)
        n = len(shape)
        off = n - len(src)
        elem = elem_of(v)
        init = self.empty(shape, elem)
        index = ir.IndexType.get()
        dims = {i: self.dim(v, i) for i, d in enumerate(src) if d is None}
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        op = linalg.GenericOp([init.type], [], [init],
                              ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))]),
                              ir.ArrayAttr.get([parallel] * n))
        block = op.regions[0].blocks.append(elem)
        with ir.InsertionPoint(block):
            zero = arith.constant(index, 0)
            one = arith.constant(index, 1)
            coords = []
            for i, d in enumerate(src):
                if d == 1:
                    coords.append(zero)
                    continue
                at = linalg.IndexOp(i + off).result
                if d is None:
                    unit = arith.cmpi(arith.CmpIPredicate.eq, dims[i], one)
                    at = arith.select(unit, zero, at)
                coords.append(at)
            linalg.YieldOp([tensor.extract(v, coords)])
        return op.results[0]

    def transpose(self, v: ir.Value, perm: Sequence[int]) -> ir.Value:
        perm = [int(p) for p in perm]
        if perm == list(range(len(perm))):
            return v
        shape = self.mixed_shape(v)
        init = self.empty([shape[p] for p in perm], elem_of(v))
        return linalg.transpose(v, outs=[init], permutation=perm).results[0]

    # -- elementwise ----------------------------------------------------------

    def elementwise(self, fn, operands: Sequence[ir.Value], hint=None) -> ir.Value:
        """`fn(*operands)` after broadcasting every operand to their common
        shape; `hint` is the ONNX-inferred result shape."""
        shapes = {shape_of(v) for v in operands}
        if len(shapes) == 1 and None not in next(iter(shapes)):
            return fn(*operands)
        shape = self.broadcast_shape(operands, hint)
        return fn(*[self.broadcast_to(v, shape) for v in operands])

    # -- reductions -----------------------------------------------------------

    def reduce(self, v: ir.Value, axes: Sequence[int], combine, init_value) -> ir.Value:
        """`linalg.reduce` of `v` over `axes` (sorted) with the scalar
        `combine(x, acc)`, starting from `init_value`."""
        axes = sorted(int(a) for a in axes)
        elem = elem_of(v)
        shape = self.mixed_shape(v)
        out_shape = [d for i, d in enumerate(shape) if i not in axes]
        init = self.fill(self.scalar(init_value, elem), self.empty(out_shape, elem))
        rtype = self.tensor_type([d if isinstance(d, int) else None for d in out_shape], elem)
        op = linalg.ReduceOp([rtype], [v], [init], axes)
        block = op.regions[0].blocks.append(elem, elem)
        with ir.InsertionPoint(block):
            linalg.YieldOp([combine(block.arguments[0], block.arguments[1])])
        return op.results[0]

    def keep_dims(self, reduced: ir.Value, full_rank: int, axes: Sequence[int]) -> ir.Value:
        """Re-inserts the reduced `axes` as unit dims."""
        src = shape_of(reduced)
        shape, it = [], iter(src)
        for i in range(full_rank):
            shape.append(1 if i in axes else next(it))
        groups = reassociation(shape, src)
        return self.expand(reduced, groups, shape)


def _int_view(dtype) -> np.dtype:
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize])
