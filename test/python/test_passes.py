"""SITS passes run through PassManager.parse, alone and inside pipelines
with upstream passes."""

import pytest

from sits_mlir import ir, passmanager

MLP = """
func.func @f(%x: tensor<8x64xf32>, %w1: tensor<64x64xf32>, %w2: tensor<64x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %0 = sits.matmul %x, %w1 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %1 = sits.activation <gelu> %0 : tensor<8x64xf32>
  %2 = sits.matmul %1, %w2 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %3 = sits.activation <relu> %2 : tensor<8x64xf32>
  %4 = sits.activation <none> %2 : tensor<8x64xf32>
  return %3, %4 : tensor<8x64xf32>, tensor<8x64xf32>
}
"""


def run(pipeline, source=MLP):
    m = ir.Module.parse(source)
    passmanager.PassManager.parse(pipeline).run(m.operation)
    return str(m)


def test_fuse_epilogue(ctx):
    out = run("builtin.module(func.func(sits-fuse-epilogue))")
    # The first activation fuses; the second matmul has two users, so nothing
    # fuses into it until canonicalization removed the identity activation.
    assert out.count("activation = #sits.activation<gelu>") == 1
    assert "sits.activation <relu>" in out


def test_fuse_epilogue_after_canonicalize(ctx):
    out = run("builtin.module(canonicalize,func.func(sits-fuse-epilogue))")
    # The identity activation folded away, but the second matmul's result is
    # still returned directly, so relu must stay a separate op.
    assert "sits.activation <none>" not in out
    assert out.count("activation = #sits.activation<gelu>") == 1
    assert "sits.activation <relu>" in out


def test_pass_is_registered_and_documented(ctx):
    pm = passmanager.PassManager.parse("builtin.module(func.func(sits-fuse-epilogue))")
    assert "sits-fuse-epilogue" in str(pm)


def test_unknown_pass_raises(ctx):
    with pytest.raises(ValueError, match="sits-no-such-pass"):
        passmanager.PassManager.parse("builtin.module(sits-no-such-pass)")


def test_upstream_pipeline_runs_after_sits(ctx):
    out = run("builtin.module(func.func(sits-fuse-epilogue),canonicalize,cse,symbol-dce)")
    assert "func.func @f" in out
