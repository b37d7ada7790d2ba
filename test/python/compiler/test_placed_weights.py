"""Packed weights go straight to their place in the artifact: lowering
writes them into the new artifact's file (from its weights offset on), and
the writer completes the file around them, so that no byte of them is
written twice. The artifact verifies in full and runs as before; a compile
that fails leaves no file behind."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import sits_mlir
from sits_mlir.errors import CompileError


def mlp(path, hidden=512, ffn=1024, seed=0):
    """x[n, hidden] -> relu(x @ w1 + b1) @ w2: two weights of 2 MiB (packed,
    so placed) and a small bias (copied after them)."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((hidden, ffn)) / np.sqrt(hidden)).astype(np.float32)
    b1 = rng.standard_normal(ffn).astype(np.float32)
    w2 = (rng.standard_normal((ffn, hidden)) / np.sqrt(ffn)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", hidden])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return lambda x: np.maximum(x @ w1 + b1, 0) @ w2


def test_packed_weights_are_placed_first_and_verify(tmp_path):
    reference = mlp(tmp_path / "m.onnx")
    art = sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / "m.sitsm")
    info = sits_mlir.runtime.read_artifact(art.path)  # every byte verified
    assert info.weights_verified
    offset, size = info.sections["weights"]
    # Placed: the weights lead the file, before the manifest and the code.
    assert offset == 4096
    assert all(o > offset for name, (o, _) in info.sections.items() if name != "weights")
    assert size >= 2 * 512 * 1024 * 4
    assert os.path.getsize(art.path) == info.file_size
    x = np.random.default_rng(1).standard_normal((3, 512)).astype(np.float32)
    np.testing.assert_allclose(art.load()(x), reference(x), rtol=1e-4, atol=1e-4)
    # Nothing else was left in the directory.
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.sitsm"]


def test_small_weights_are_written_after_the_code(tmp_path):
    reference = mlp(tmp_path / "m.onnx", hidden=64, ffn=128)
    art = sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / "m.sitsm")
    info = sits_mlir.runtime.read_artifact(art.path)
    offset, _ = info.sections["weights"]
    assert offset > info.sections[f"code.{info.manifest['target']['name']}"][0]
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    np.testing.assert_allclose(art.load()(x), reference(x), rtol=1e-4, atol=1e-4)


def test_default_output_next_to_the_model(tmp_path):
    reference = mlp(tmp_path / "m.onnx")
    art = sits_mlir.compile(str(tmp_path / "m.onnx"))
    assert art.path == str(tmp_path / "m.sitsm")
    assert sits_mlir.runtime.read_artifact(art.path).sections["weights"][0] == 4096
    x = np.ones((2, 512), np.float32)
    np.testing.assert_allclose(art.load()(x), reference(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stage", ["emit_objects", "weight_views"])
def test_a_failed_compile_leaves_no_file(tmp_path, monkeypatch, stage):
    from sits_mlir.compiler import driver

    mlp(tmp_path / "m.onnx")
    real = driver._native_call

    def failing(name, *args):
        if name == stage:
            raise CompileError(f"{stage} failed on purpose")
        return real(name, *args)
    monkeypatch.setattr(driver, "_native_call", failing)
    with pytest.raises(CompileError, match="on purpose"):
        sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / "m.sitsm")
    assert os.listdir(tmp_path) == ["m.onnx"]
    # The next compile in the same process places its weights again.
    monkeypatch.setattr(driver, "_native_call", real)
    art = sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / "m.sitsm")
    assert sits_mlir.runtime.read_artifact(art.path).sections["weights"][0] == 4096


def test_placed_weights_file_api(tmp_path):
    """The runtime's side on its own: the weights of a compiled artifact,
    part of them written at their place through the descriptor and the rest
    given as the weights section, make an artifact that verifies and runs
    as the original."""
    from sits_mlir.runtime import artifact

    reference = mlp(tmp_path / "m.onnx", hidden=64, ffn=128)
    original = sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / "m.sitsm")
    info = artifact.read_artifact(original.path)
    code_name = f"code.{info.manifest['target']['name']}"
    with open(original.path, "rb") as f:
        data = f.read()
    (w_at, w_size), (c_at, c_size) = info.sections["weights"], info.sections[code_name]
    weights, code = data[w_at:w_at + w_size], data[c_at:c_at + c_size]
    head = 8192
    assert w_size > head

    out = tmp_path / "out"
    out.mkdir()
    file = artifact.placed_weights_file(out)
    os.pwrite(file.fd, weights[:head], file.weights_offset)
    assert os.listdir(out) == []  # unnamed until written
    written = artifact.write_artifact(out / "a.sitsm", manifest=info.manifest, code=code,
                                      weights=weights[head:], target=info.manifest["target"]["name"],
                                      placed=(file, head))
    assert file.named
    assert written.sections["weights"] == (4096, w_size)
    read = artifact.read_artifact(out / "a.sitsm")  # every byte verified
    assert read.weights_verified and read.content_hash == written.content_hash
    assert read.manifest["weights_digest"] == info.manifest["weights_digest"]
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    np.testing.assert_allclose(sits_mlir.runtime.load(out / "a.sitsm")(x), reference(x),
                               rtol=1e-4, atol=1e-4)
    file.close()
    assert os.listdir(out) == ["a.sitsm"]


@pytest.mark.parametrize("fold", [False, True])
def test_a_weight_packed_twice_reads_the_same_bytes(tmp_path, fold):
    """Once packed, a weight's own pages are given back (the file's pages
    unmapped, a copy's kept): a second matmul packing the same weight, or
    the first one's code reading it, still sees its values. `fold`: the
    weight is a frontend-computed value (a copy), not the file's bytes."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((512, 1024)) / 32).astype(np.float32)
    source = w.T.copy() if fold else w
    nodes = [helper.make_node("Transpose", ["ws"], ["w"], perm=[1, 0])] if fold else []
    nodes += [helper.make_node("MatMul", ["x", "w"], ["a"]),
              helper.make_node("Relu", ["a"], ["r"]),
              helper.make_node("Mul", ["x", "two"], ["x2"]),
              helper.make_node("MatMul", ["x2", "w"], ["b"]),
              helper.make_node("Add", ["r", "b"], ["y"])]
    graph = helper.make_graph(
        nodes, "twice", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1024])],
        [numpy_helper.from_array(source, "ws" if fold else "w"),
         numpy_helper.from_array(np.array(2, np.float32), "two")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "m.onnx")
    art = sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / "m.sitsm")
    x = rng.standard_normal((4, 512)).astype(np.float32)
    np.testing.assert_allclose(art.load()(x), np.maximum(x @ w, 0) + (2 * x) @ w,
                               rtol=1e-4, atol=1e-4)
