"""f16 matmuls on a real NVIDIA GPU: on sm_80 and newer they run on tensor
cores (mma.sync), and the results must match numpy (float32 products of the
float16 inputs) within rtol 1e-2, and a GPT-2 block in float16 the float32
block run by onnxruntime within 1e-2 (relative). Skipped with the reason
without a CUDA device (see test_gpu_execution.py)."""

from __future__ import annotations

import numpy as np
import pytest

import sits_mlir
from sits_mlir import runtime, targets
from bench_models import relative_error, run_onnxruntime
from f16_models import gpt_block_f16, matmul_f16
from test_gpu_execution import cuda_device, gpu_target

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    """(target, uri) of the CUDA device present."""
    device = cuda_device()
    return gpu_target(device), device["uri"]


def _tensor_cores(art, target) -> bool:
    chip = targets.lookup(target).chip
    return int(chip[3:]) >= 80 and "mma.sync" in art.device_code.ptx


@pytest.mark.parametrize("shape", [(128, 256, 512), (64, 1024, 64), (256, 64, 2304)])
def test_f16_matmul_matches_numpy(tmp_path, cuda, shape):
    target, uri = cuda
    path, x, w = matmul_f16(tmp_path / "mm.onnx", *shape)
    art = sits_mlir.compile(path, target=target, output=tmp_path / f"mm.{target}.sitsm")
    if int(targets.lookup(target).chip[3:]) >= 80:
        assert _tensor_cores(art, target)
    model = runtime.load(art.path, device=uri)
    y = model.run(x)
    y = y[0] if isinstance(y, (list, tuple)) else y
    assert y.dtype == np.float16 and y.shape == (shape[0], shape[2])
    expected = x.astype(np.float32) @ w.astype(np.float32)
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(y.astype(np.float32), expected, rtol=1e-2, atol=1e-2 * scale)


def test_f16_gpt_block_matches_onnxruntime(tmp_path, cuda):
    pytest.importorskip("torch")
    target, uri = cuda
    f16, f32, x = gpt_block_f16(tmp_path)
    art = sits_mlir.compile(f16, target=target, output=tmp_path / f"gpt.{target}.sitsm")
    model = runtime.load(art.path, device=uri)
    y = model.run(x.astype(np.float16))
    y = y[0] if isinstance(y, (list, tuple)) else y
    expected = run_onnxruntime(f32, {"x": x})[0]
    assert np.isfinite(y).all()
    assert relative_error(y.astype(np.float32), expected) < 1e-2
