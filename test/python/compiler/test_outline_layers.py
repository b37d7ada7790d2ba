"""sits-outline-layers through the public API: a model whose layers repeat
compiles them once (one layer function, whatever the depth) and computes
what it computed with every layer inlined."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import sits_mlir  # noqa: E402
from sits_mlir import ir  # noqa: E402
from sits_mlir.compiler import driver  # noqa: E402
from sits_mlir.frontend.onnx import import_model  # noqa: E402

HIDDEN, FFN = 32, 64


def _stack(layers: int, seed: int = 0) -> onnx.ModelProto:
    """A pre-norm residual MLP stack over [batch, seq, HIDDEN] (batch and seq
    dynamic): per layer, LayerNorm -> MatMul -> Gelu -> MatMul -> Add, each
    layer with weights of its own; a final MatMul head."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def weight(name, *shape):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name))
        return name

    h = "x"
    for i in range(layers):
        scale = numpy_helper.from_array(
            (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32), f"ln{i}.scale")
        bias = numpy_helper.from_array(
            (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32), f"ln{i}.bias")
        inits += [scale, bias]
        nodes += [
            helper.make_node("LayerNormalization", [h, scale.name, bias.name], [f"n{i}"],
                             axis=-1),
            helper.make_node("MatMul", [f"n{i}", weight(f"up{i}", HIDDEN, FFN)], [f"u{i}"]),
            helper.make_node("Gelu", [f"u{i}"], [f"g{i}"]),
            helper.make_node("MatMul", [f"g{i}", weight(f"down{i}", FFN, HIDDEN)], [f"d{i}"]),
            helper.make_node("Add", [h, f"d{i}"], [f"h{i}"]),
        ]
        h = f"h{i}"
    nodes.append(helper.make_node("MatMul", [h, weight("head", HIDDEN, 16)], ["y"]))
    graph = helper.make_graph(
        nodes, "stack",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 16])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def _lowered_functions(model, **options):
    """The names of the functions left after the CPU pipeline."""
    with ir.Context():
        module = import_model(model).module
        driver.lower(module, "cpu", driver.CompileOptions(threads=2, **options))
        return [op.attributes["sym_name"].value for op in module.body.operations
                if op.operation.name == "llvm.func"]


@pytest.mark.parametrize("layers", [3, 12])
def test_one_layer_function_whatever_the_depth(layers):
    names = _lowered_functions(_stack(layers))
    assert names.count("main_layer") == 1
    # The layer's dispatches are compiled once: the deeper model has no more
    # functions than the shallower one.
    assert len(names) == len(_lowered_functions(_stack(3)))


def test_off_inlines_every_layer():
    names = _lowered_functions(_stack(3), outline_layers=False)
    assert "main_layer" not in names


@pytest.mark.parametrize("layers", [3, 6])
def test_outputs_equal_inlined_layers(tmp_path, layers):
    model = _stack(layers, seed=layers)
    x = np.random.default_rng(1).standard_normal((2, 5, HIDDEN)).astype(np.float32)
    results = []
    for outline in (True, False):
        artifact = sits_mlir.compile(model, "cpu", tmp_path / f"{outline}.sitsm", threads=2,
                                     outline_layers=outline)
        results.append(np.asarray(artifact.load()(x=x)))
    # The same kernels run in the same order: bit for bit.
    np.testing.assert_array_equal(results[0], results[1])
