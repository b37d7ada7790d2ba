"""The GPU kernels' algorithms, checked on the CPU: the tensor-level part of
the GPU pipeline, as tiled for NVIDIA and for AMD (convolutions as GEMMs,
fusion groups over blocks and threads, operand tiles staged per reduction
step, per-thread vectors) is exact sequential code (each thread copies its
block's staged tile for itself), so it can be lowered for the CPU and
compared with onnxruntime.
What only a GPU can check (threads sharing the staged copies between
barriers) is the SPMD part; see passes/Codegen/GPU/README.md.
"""

import numpy as np
import pytest

import sits_mlir
from sits_mlir import ir, passmanager
from sits_mlir.dialects import sits
from sits_mlir.frontend.onnx import import_model
from bench_models import relative_error, run_onnxruntime

# Every case compiles a benchmark model at its real size.
pytestmark = pytest.mark.slow

# sits-gpu-pipeline's passes up to vectorization, with the staged tiles in
# the default memory space instead of workgroup memory.
GPU_TILING = ("builtin.module("
              "sits-graph-pipeline,sits-fold-weight-transposes,sits-convert-to-linalg,"
              "canonicalize,cse,"
              "func.func(convert-elementwise-to-linalg,sits-gpu-conv-to-gemm,"
              "sits-gpu-materialize-copies,sits-cpu-fuse-elementwise),canonicalize,cse,"
              "func.func(sits-gpu-tile-and-fuse,"
              "sits-gpu-promote-operands{workgroup-memory=false}),canonicalize,cse,"
              "func.func(sits-gpu-vectorize),canonicalize,cse)")


# NVIDIA (warps of 32, 132 SMs) and AMD (wavefronts of 64, 304 CUs) tile
# differently: split reductions have twice the lanes, blocks shrink further.
@pytest.mark.parametrize("target", ["h100", "mi300x"])
@pytest.mark.parametrize("name", ["mlp", "gpt_prefill", "gpt_decode", "cnn", "minilm"])
def test_gpu_tiled_model_matches_onnxruntime(model_path, tmp_path, name, target):
    path, inputs = model_path(name)
    with ir.Context() as ctx:
        module = import_model(path, context=ctx).module
        module.operation.attributes["sits.target"] = sits.TargetAttr.get(target)
        passmanager.PassManager.parse(GPU_TILING).run(module.operation)
        # The block and thread loops are there, as the GPU gets them.
        text = str(module)
        assert "#gpu.block<linear_dim_0>" in text and "#gpu.thread<linear_dim_0>" in text
        assert "sits_cooperative" in text
        artifact = sits_mlir.compile(module, target="cpu", output=tmp_path / f"{name}.sitsm",
                                     threads=1)
    outputs = artifact.load().run(*inputs.values())
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    expected = run_onnxruntime(path, inputs)
    assert len(outputs) == len(expected)
    for actual, reference in zip(outputs, expected):
        assert actual.shape == reference.shape
        err = relative_error(actual, reference)
        assert err < 1e-4, f"{name}: differs by {err:.2e} (relative)"
        assert np.isfinite(actual).all()
