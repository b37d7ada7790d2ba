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


# A decoder's shapes are dynamic (tokens of the step, past length): its
# parallel dynamic loops are tiled by one, a block per index.
@pytest.mark.parametrize("target", ["h100", "mi300x"])
def test_gpu_tiled_decoder_with_dynamic_shapes_matches_onnxruntime(tmp_path, target):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import pathlib
    import sys

    import onnxruntime as ort

    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "llm"))
    import hf_decoders

    dec = hf_decoders.build("llama", str(tmp_path), layers=2, hidden=64, heads=4)
    with ir.Context() as ctx:
        module = import_model(dec.path, context=ctx).module
        module.operation.attributes["sits.target"] = sits.TargetAttr.get(target)
        passmanager.PassManager.parse(GPU_TILING).run(module.operation)
        # Block loops whose extent is only known at run time.
        text = str(module)
        assert "#gpu.block<linear_dim_1>" in text and "#gpu.thread<linear_dim_0>" in text
        dynamic_blocks = [line for line in text.splitlines()
                          if "scf.forall" in line and " to (%" in line]
        assert dynamic_blocks, "no block loop over a dynamic extent"
        model = sits_mlir.compile(module, target="cpu", output=tmp_path / "dec.sitsm",
                                  threads=1).load()
    session = ort.InferenceSession(dec.path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    # Two sequences: a prefill of 5 tokens, then decode steps over a
    # growing past.
    past = {f"past_{kind}_{i}": np.zeros((2, dec.kv_heads, 0, dec.head_dim), np.float32)
            for i in range(dec.layers) for kind in ("key", "value")}
    ids, position = np.array([[3, 1, 4, 1, 5], [2, 7, 1, 8, 2]], np.int64), 0
    for step in range(4):
        positions = np.arange(position, position + ids.shape[1], dtype=np.int64)
        feeds = {"input_ids": ids, "position_ids": np.stack([positions] * 2), **past}
        # Compiled from a module, the model's inputs are positional.
        ours = model.run(*[feeds[i.name] for i in session.get_inputs()])
        expected = session.run(None, feeds)
        for name, actual, reference in zip(names, ours, expected):
            assert actual.shape == reference.shape, (step, name)
            err = relative_error(actual, reference)
            assert err < 1e-4, f"step {step}, {name}: differs by {err:.2e} (relative)"
        past = {k.replace("present", "past"): v for k, v in zip(names[1:], expected[1:])}
        position += ids.shape[1]
        ids = np.argmax(expected[0][:, -1], axis=-1).astype(np.int64)[:, None]
