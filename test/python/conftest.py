import pytest

from sits_mlir import ir


@pytest.fixture
def ctx():
    """A fresh context with an unknown default location."""
    with ir.Context() as context, ir.Location.unknown(context):
        yield context

