"""The package imports, is re-rooted under sits_mlir, and every context has
the SITS dialect loaded."""

import importlib
import re

import sits_mlir
from sits_mlir import ir, passmanager
from sits_mlir.dialects import sits


def test_versions():
    assert re.fullmatch(r"\d+\.\d+\.\d+", sits_mlir.__version__)
    assert sits_mlir.llvm_version() == "22.1.8"


def test_mlir_api_is_rerooted_under_sits_mlir():
    assert ir.__name__ == "sits_mlir.ir"
    assert passmanager.__name__ == "sits_mlir.passmanager"
    assert ir.Context.__module__.startswith("sits_mlir.")
    # The upstream dialects ship with the package too.
    for name in ["arith", "func", "linalg", "tensor", "math", "gpu", "nvvm", "rocdl"]:
        assert importlib.import_module(f"sits_mlir.dialects.{name}")


def test_every_context_has_sits_loaded():
    for _ in range(2):
        with ir.Context() as ctx:
            assert not ctx.allow_unregistered_dialects
            assert ctx.is_registered_operation("sits.matmul")
            # Parsing needs no explicit registration or allow_unregistered.
            attr = ir.Attribute.parse("#sits.activation<silu>")
            assert str(attr) == "#sits.activation<silu>"
            assert ctx.dialects["sits"] is not None


def test_generated_op_classes():
    assert sits.MatmulOp.OPERATION_NAME == "sits.matmul"
    names = {cls.OPERATION_NAME for cls in vars(sits).values()
             if isinstance(cls, type) and hasattr(cls, "OPERATION_NAME")}
    assert names == {
        "sits.matmul", "sits.conv", "sits.qconv", "sits.qmatmul", "sits.attention",
        "sits.paged_attention", "sits.layer_norm", "sits.rms_norm", "sits.softmax",
        "sits.activation", "sits.quantize", "sits.dequantize",
        "sits.ukernel.paged_attention", "sits.ukernel.kivi_write",
    }
    assert str(sits.ActivationKind.GeluTanh) == "gelu_tanh"
