"""Helpers shared by the pytest modules (importable by name: test/python is
on sys.path through pytest's rootdir handling)."""

from sits_mlir import ir


def tensor(shape, element="f32", encoding=None):
    """`tensor<...>` from a shape list; None is a dynamic extent."""
    elem = ir.Type.parse(element) if isinstance(element, str) else element
    dims = [ir.ShapedType.get_dynamic_size() if d is None else d for d in shape]
    return ir.RankedTensorType.get(dims, elem, encoding)
