"""The compile API's contract: options, errors, reproducibility with
sits-opt, and the command-line tools."""

import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import sits_mlir
from sits_mlir import ir
from sits_mlir.compiler import CompileOptions, lower
from sits_mlir.errors import CompileError, UnsupportedNode


def small_model(path, op="Relu", domain=""):
    """x[4,16] @ w[16,8] followed by `op` (node "act")."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
             helper.make_node(op, ["h"], ["y"], name="act", domain=domain)]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w])
    opsets = [helper.make_opsetid("", 17)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.save(model, path)
    return rng.standard_normal((4, 16)).astype(np.float32), rng


def test_compile_load_run(tmp_path):
    x, _ = small_model(tmp_path / "m.onnx")
    art = sits_mlir.compile(str(tmp_path / "m.onnx"))
    assert art.path == str(tmp_path / "m.sitsm") and os.path.exists(art.path)
    w = numpy_helper.to_array(onnx.load(tmp_path / "m.onnx").graph.initializer[0])
    np.testing.assert_allclose(art.load()(x), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)
    assert set(art.timings) == {"import", "lower", "codegen", "link", "write"}


def layered_model(path, layers, seed=0):
    """`layers` times: x <- gelu(rmsnorm-free residual x + x @ w_i) on
    x[?,64], each layer with its own weights, like a decoder's blocks."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = rng.standard_normal((64, 64)).astype(np.float32) / 8
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]),
                  helper.make_node("Gelu", [f"h{i}"], [f"g{i}"]),
                  helper.make_node("Add", [x, f"g{i}"], [f"x{i}"])]
        x = f"x{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        nodes, "layers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)
    return [numpy_helper.to_array(w) for w in inits]


def test_repeated_layers_compile_once_and_reproducibly(tmp_path):
    """Layers that differ only in their weights are one function in the
    code, however many there are; the code (emitted in parts on every core)
    is the same from one compile to the next, and right."""
    def kernels(layers):
        path = tmp_path / f"l{layers}.onnx"
        layered_model(path, layers)
        from sits_mlir.frontend.onnx import import_model

        with ir.Context() as ctx:
            module = import_model(str(path), context=ctx).module
            lower(module, "x86-64-v3")
            code = str(module)
            return code.count("llvm.func @main_dispatch_") + code.count("llvm.func @main_kernel_")

    assert kernels(2) == kernels(6) > 0

    weights = layered_model(tmp_path / "m.onnx", 6, seed=1)
    first = sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / "a.sitsm")
    second = sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / "b.sitsm")
    def code(artifact):
        info = sits_mlir.runtime.read_artifact(artifact.path)
        offset, size = info.sections[f"code.{info.manifest['target']['name']}"]
        with open(artifact.path, "rb") as f:
            f.seek(offset)
            return f.read(size)

    assert code(first) == code(second)
    from math import erf
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))
    x = np.random.default_rng(2).standard_normal((5, 64)).astype(np.float32)
    expected = x.astype(np.float64)
    for w in weights:
        expected = expected + gelu(expected @ w)
    np.testing.assert_allclose(first.load()(x), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 3])
def test_thread_option(tmp_path, threads):
    x, _ = small_model(tmp_path / "m.onnx")
    art = sits_mlir.compile(str(tmp_path / "m.onnx"), output=tmp_path / f"t{threads}.sitsm",
                            threads=threads)
    assert f"num-threads={threads}" in art.pipeline
    w = numpy_helper.to_array(onnx.load(tmp_path / "m.onnx").graph.initializer[0])
    np.testing.assert_allclose(art.load()(x), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)


def test_unsupported_nodes_are_all_reported(tmp_path):
    # An op of a domain no compiler knows: always unsupported.
    small_model(tmp_path / "bad.onnx", op="Frobnicate", domain="com.example")
    with pytest.raises(CompileError) as err:
        sits_mlir.compile(str(tmp_path / "bad.onnx"))
    problems = err.value.diagnostics
    assert any(isinstance(p, UnsupportedNode) and p.node_name == "act" for p in problems)
    assert "act" in str(err.value)


def test_bad_inputs(tmp_path):
    with pytest.raises(CompileError, match="not found"):
        sits_mlir.compile(str(tmp_path / "missing.onnx"))
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(CompileError):
        sits_mlir.compile(str(tmp_path / "junk.onnx"))
    with pytest.raises(TypeError, match="unexpected keyword"):
        sits_mlir.compile(str(tmp_path / "junk.onnx"), thread=2)


def test_amd_target_without_its_toolchain_is_refused_clearly(tmp_path, monkeypatch):
    # AMD kernels need an AMDGPU-enabled LLVM besides the wheels (see
    # test_compile_gpu.py); where there is none, the error says what to
    # install.
    small_model(tmp_path / "m.onnx")
    monkeypatch.setenv("SITS_AMDGPU_LLVM", str(tmp_path / "no-such-llvm"))
    with pytest.raises(CompileError, match="no AMDGPU-enabled LLVM toolchain found") as err:
        sits_mlir.compile(str(tmp_path / "m.onnx"), target="mi300x")
    assert "llvm-22 lld-22 rocm-device-libs" in str(err.value)
    assert "no-such-llvm: no llvm-link, opt, llc, ld.lld" in str(err.value)


def test_mlir_input_and_sits_opt_reproduce_the_same_code(tmp_path):
    source = """
    func.func @main(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>) -> tensor<8x32xf32> {
      %h = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
      %y = sits.activation <gelu> %h : tensor<8x32xf32>
      return %y : tensor<8x32xf32>
    }"""
    path = tmp_path / "m.mlir"
    path.write_text(source)
    art = sits_mlir.compile(str(path), output=tmp_path / "m.sitsm")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    h = x @ w
    from math import erf
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))(h.astype(np.float64))
    np.testing.assert_allclose(art.load()(x, w), gelu, rtol=1e-5, atol=1e-5)

    # The same pipeline through sits-opt gives the same LLVM dialect module.
    with ir.Context():
        module = ir.Module.parse(source)
        pipeline = lower(module, "cpu")
        in_process = str(module)
    tool = shutil.which("sits-opt", path=os.pathsep.join([os.path.dirname(sys.executable),
                                                           os.environ.get("PATH", "")]))
    with ir.Context():
        annotated = ir.Module.parse(source)
        from sits_mlir.dialects import sits
        annotated.operation.attributes["sits.target"] = sits.TargetAttr.get("cpu")
        # With its locations: the graph passes' reports name ops by them.
        text = annotated.operation.get_asm(enable_debug_info=True)
    out = subprocess.run([tool, f"--pass-pipeline={pipeline}"], input=text, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == in_process.strip()


def _tool(name):
    return shutil.which(name, path=os.pathsep.join([os.path.dirname(sys.executable),
                                                    os.environ.get("PATH", "")]))


@pytest.mark.slow
@pytest.mark.skipif(_tool("sits-compile") is None, reason="sits-compile is not installed")
def test_command_line(tmp_path):
    x, _ = small_model(tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=x)
    out = subprocess.run([_tool("sits-compile"), str(tmp_path / "m.onnx"), "--target", "cpu",
                          "-o", str(tmp_path / "m.sitsm")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "input  x: 4x16 f32" in out.stdout and "output y: 4x8 f32" in out.stdout
    run = subprocess.run([_tool("sits-run"), str(tmp_path / "m.sitsm"), "--inputs",
                          str(tmp_path / "in.npz")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "y: shape (4, 8)" in run.stdout and "latency" in run.stdout

    small_model(tmp_path / "bad.onnx", op="Frobnicate", domain="com.example")
    bad = subprocess.run([_tool("sits-compile"), str(tmp_path / "bad.onnx")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "act" in bad.stderr and "Frobnicate" in bad.stderr


def test_out_of_memory_is_a_compile_error_naming_the_stage(tmp_path, monkeypatch):
    """A MemoryError in a stage (here the weights' views for the writer)
    comes out as CompileOutOfMemoryError, a CompileError and a MemoryError
    naming the stage."""
    from sits_mlir.compiler import driver
    from sits_mlir.errors import CompileOutOfMemoryError

    real = driver._native_call

    def failing(name, *args):
        if name == "weight_views":
            raise MemoryError("std::bad_alloc")
        return real(name, *args)
    monkeypatch.setattr(driver, "_native_call", failing)
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
                              [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(CompileOutOfMemoryError, match=r"out of memory during codegen") as e:
        sits_mlir.compile(model, output=tmp_path / "m.sitsm")
    assert isinstance(e.value, MemoryError) and isinstance(e.value, CompileError)
    assert "std::bad_alloc" in str(e.value)
