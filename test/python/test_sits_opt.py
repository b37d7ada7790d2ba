"""The sits-opt tool on PATH agrees with the Python API."""

import shutil
import subprocess

import pytest

from sits_mlir import ir, passmanager
from sits_mlir.dialects import func, sits

from ir_helpers import tensor

SITS_OPT = shutil.which("sits-opt")
pytestmark = pytest.mark.skipif(SITS_OPT is None, reason="sits-opt is not on PATH")


def sits_opt(*args, stdin=""):
    return subprocess.run([SITS_OPT, *args], input=stdin, capture_output=True, text=True)


def test_version_and_dialects():
    out = sits_opt("--version").stdout
    assert "SITS" in out and "LLVM version 22.1.8" in out
    dialects = sits_opt("--show-dialects").stdout
    assert "sits" in dialects.split(":", 1)[1].replace(" ", "").strip().split(",")


def test_roundtrips_ir_built_in_python(ctx):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("f", ([tensor([8, 1024]), tensor([1024, 4096]), tensor([4096])], []))
        with ir.InsertionPoint(f.add_entry_block()):
            x, w, b = f.arguments
            h = sits.matmul(x, w, bias=b)
            y = sits.activation(sits.ActivationKind.Gelu, h)
            func.ReturnOp([y])
        f.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in f.arguments], [y.type]))
    text = str(module)
    result = sits_opt(stdin=text)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == text.strip()


def test_same_pipeline_same_result(ctx):
    source = """
    func.func @f(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %0 = sits.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      %1 = sits.activation <silu> %0 : tensor<4x4xf32>
      return %1 : tensor<4x4xf32>
    }"""
    pipeline = "builtin.module(func.func(sits-fuse-epilogue),canonicalize)"
    m = ir.Module.parse(source)
    passmanager.PassManager.parse(pipeline).run(m.operation)
    tool = sits_opt(f"--pass-pipeline={pipeline}", stdin=source)
    assert tool.returncode == 0, tool.stderr
    assert tool.stdout.strip() == str(m).strip()


def test_diagnostic_goes_to_stderr_with_location():
    bad = 'func.func @f(%x: tensor<2x3xf32>) { %0 = sits.softmax %x {axis = 7 : i64} : tensor<2x3xf32> loc("net":1:2) return }'
    result = sits_opt(stdin=bad)
    assert result.returncode != 0
    assert 'net:1:2: error: \'sits.softmax\' op axis 7 is out of range' in result.stderr
