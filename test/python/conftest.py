import pytest

from sits_mlir import ir


@pytest.fixture
def ctx():
    """A fresh context with an unknown default location."""
    with ir.Context() as context, ir.Location.unknown(context):
        yield context


def tensor(shape, element="f32", encoding=None):
    """`tensor<...>` from a shape list; None is a dynamic extent."""
    elem = ir.Type.parse(element) if isinstance(element, str) else element
    dims = [ir.ShapedType.get_dynamic_size() if d is None else d for d in shape]
    return ir.RankedTensorType.get(dims, elem, encoding)
