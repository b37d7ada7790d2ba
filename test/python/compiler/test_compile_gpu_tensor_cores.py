"""f16 matmuls on tensor cores, without a GPU: compiled for a100 (sm_80) and
h100 (sm_90) their PTX multiplies with `mma.sync.aligned.m16n8k16` on
fragments loaded with `ldmatrix` and passes `ptxas` for the chip; v100
(sm_70) and float32 models keep FMAs on CUDA cores. Numerical results need
a GPU: test/python/runtime/test_gpu_tensor_cores.py; the warp tiling itself
is checked on the CPU here (the tensor-level IR is exact sequential code)."""

import re
import subprocess

import numpy as np
import onnx
import pytest

import sits_mlir
from sits_mlir import targets
from sits_mlir.compiler import gpu
from f16_models import gpt_block_f16, matmul_f16

MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def _assemble(ptx, chip, tmp_path):
    """ptxas -arch=chip on `ptx` (skips without a ptxas for the chip)."""
    ptxas = gpu.find_ptxas()
    if ptxas is None or not gpu.ptxas_supports(ptxas, chip):
        pytest.skip(f"no ptxas that targets {chip}: install the CUDA toolkit "
                    "(or set SITS_PTXAS) to validate PTX")
    path = tmp_path / "kernels.ptx"
    path.write_text(ptx)
    proc = subprocess.run([ptxas, f"-arch={chip}", str(path), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


#: (m, k, n): a square-ish GEMM, a long reduction, a wide projection (the
#: shapes test/python/runtime/test_gpu_tensor_cores.py runs on a GPU).
SHAPES = [(128, 256, 512), (64, 1024, 64), (256, 64, 2304)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("target", ["a100", "h100"])
def test_f16_matmul_runs_on_tensor_cores(tmp_path, target, shape):
    path, _, _ = matmul_f16(tmp_path / "mm.onnx", *shape)
    art = sits_mlir.compile(path, target=target, output=tmp_path / f"mm.{target}.sitsm")
    ptx = art.device_code.ptx
    chip = targets.lookup(target).chip
    assert f".target {chip}" in ptx
    assert MMA in ptx
    # A from the shared-memory tile as four 8x8 matrices, B as two, transposed.
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in ptx
    # Warps of 32 lanes: every launch has whole warps.
    for kernel in art.manifest["device"]["kernels"]:
        assert kernel["block"][0] % 32 == 0
    _assemble(ptx, chip, tmp_path)


def test_v100_and_f32_keep_fma(tmp_path):
    path, _, _ = matmul_f16(tmp_path / "mm.onnx")
    ptx = sits_mlir.compile(path, target="v100", output=tmp_path / "mm.v100.sitsm").device_code.ptx
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert "fma.rn.f32" in ptx
    # The same matmul in float32: exact fp32 FMAs, no TF32 tensor cores.
    model = onnx.load(path)
    w = onnx.numpy_helper.to_array(model.graph.initializer[0]).astype(np.float32)
    model.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(w, "w"))
    for value in list(model.graph.input) + list(model.graph.output):
        value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    onnx.save(model, tmp_path / "mm32.onnx")
    ptx = sits_mlir.compile(tmp_path / "mm32.onnx", target="h100",
                            output=tmp_path / "mm32.h100.sitsm").device_code.ptx
    assert "mma.sync" not in ptx
    assert "fma.rn.f32" in ptx


@pytest.mark.slow
@pytest.mark.parametrize("target", ["a100", "h100"])
def test_f16_gpt_block_runs_on_tensor_cores(tmp_path, target):
    pytest.importorskip("torch")
    path, _, _ = gpt_block_f16(tmp_path)
    art = sits_mlir.compile(path, target=target, output=tmp_path / f"gpt.{target}.sitsm")
    ptx = art.device_code.ptx
    # The kernels of qkv, proj, fc, fc_out and Q x K^T run on tensor cores;
    # softmax(QK^T) x V multiplies f32 probabilities, on CUDA cores.
    kernels = re.split(r"\.entry ", ptx)[1:]
    assert sum(MMA in kernel for kernel in kernels) == 5
    _assemble(ptx, targets.lookup(target).chip, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["matmul", "gpt_block"])
def test_warp_tiling_is_exact_on_the_cpu(tmp_path, model):
    """The tensor-level half for a100 (warp loops whose lanes each compute
    their warp's whole m16n8 tile, staged operands, the epilogue reading
    the block's result) lowered for the CPU gives the model's results: the
    tiling is right; the fragment split among lanes (upstream's) needs a
    GPU."""
    from sits_mlir import ir, passmanager
    from sits_mlir.dialects import sits
    from sits_mlir.frontend.onnx import import_model
    from bench_models import relative_error, run_onnxruntime
    from test_gpu_tiling_on_cpu import GPU_TILING

    if model == "matmul":
        path, x, w = matmul_f16(tmp_path / "mm.onnx")
        expected = x.astype(np.float32) @ w.astype(np.float32)
    else:
        pytest.importorskip("torch")
        path, f32, x = gpt_block_f16(tmp_path)
        expected = run_onnxruntime(f32, {"x": x})[0]
        x = x.astype(np.float16)
    with ir.Context() as ctx:
        module = import_model(path, context=ctx).module
        module.operation.attributes["sits.target"] = sits.TargetAttr.get("a100")
        passmanager.PassManager.parse(GPU_TILING).run(module.operation)
        text = str(module)
        # Warp loops: m16n8 tiles, 32 lanes innermost.
        assert re.search(r"step \((1, 1, )?16, 8, 1\)", text)
        artifact = sits_mlir.compile(module, target="cpu", output=tmp_path / "tiled.sitsm",
                                     threads=1)
    y = artifact.load().run(x)
    y = (y[0] if isinstance(y, (list, tuple)) else y).astype(np.float32)
    assert y.shape == expected.shape and np.isfinite(y).all()
    assert relative_error(y, expected) < 1e-2
