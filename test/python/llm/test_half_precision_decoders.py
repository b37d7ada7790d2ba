"""Decoders shipped in fp16 or bf16 (`model.half()` / `.bfloat16()` before
export: weights, activations and the KV cache all in that type) compile as
they are: the weights stay 16-bit in the artifact, attention fuses causal (the export's -65504 mask and
f32 round trip of the probabilities are recognised), and the engine serves
the paged model from a 16-bit KV pool with the tokens of the contiguous
model, whose logits follow `transformers` run in f32 on the same 16-bit
weights."""

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import sits_mlir  # noqa: E402

from hf_decoders import build, greedy_contiguous  # noqa: E402

from sits_mlir.runtime import kv  # noqa: E402
from sits_mlir.runtime.decoder import PagedRunner  # noqa: E402
from sits_mlir.runtime.engine import GREEDY, Engine  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

PROMPTS = [[17, 3, 250, 96, 41, 8, 131, 77, 5], [45, 180, 33, 7]]
NEW_TOKENS = 12


# (torch dtype, KV element type, numpy dtype, logits tolerance against f32:
# bf16 keeps 8 significant bits, fp16 11).
DTYPES = {"float16": ("f16", np.float16, 2e-2),
          "bfloat16": ("bf16", ml_dtypes.bfloat16, 4e-2)}


@pytest.fixture(scope="module", params=sorted(DTYPES))
def fp16_llama(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"llama-{request.param}")
    dec = build("llama", str(out), dtype=request.param)
    compiled = {kind: sits_mlir.compile(dec.path, "cpu", out / f"{kind}.sitsm", threads=2,
                                        kv_cache=kind, kv_block_size=4)
                for kind in ("contiguous", "paged")}
    return dec, compiled, DTYPES[request.param]


def _f32_logits(dec, tokens):
    """`transformers` in f32 on the fp16 weights: the last position's logits."""
    import copy

    import torch

    model = copy.deepcopy(dec.model).float()
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0, -1].numpy()


def test_weights_stay_16_bit(fp16_llama):
    dec, compiled, (kv_dtype, _, _) = fp16_llama
    params = sum(p.numel() for p in dec.model.parameters())
    for artifact in compiled.values():
        args = artifact.manifest["entry_points"][0]["args"]
        weight_bytes = next(a["shape"][0] for a in args if a["role"] == "weights")
        # Two bytes a parameter (small ones such as the norm weights live in
        # the code), plus the rotary tables and alignment.
        assert 1.9 * params <= weight_bytes < 2.3 * params, (weight_bytes, params)
        kv_args = [a for a in args if a["name"].startswith(("past_", "kv_pool"))]
        assert kv_args and all(a["dtype"] == kv_dtype for a in kv_args)


def test_paged_engine_serves_the_contiguous_tokens(fp16_llama):
    dec, compiled, (kv_dtype, np_dtype, tolerance) = fp16_llama
    contiguous = compiled["contiguous"].load()

    def run(**feeds):
        return contiguous.run(**feeds)

    expected = []
    for prompt in PROMPTS:
        tokens, _ = greedy_contiguous(run, dec, prompt, NEW_TOKENS, dtype=np_dtype)
        expected.append(tokens)
        # The 16-bit model follows the f32 computation on its weights.
        ours = np.asarray(contiguous.run(**_feeds(dec, prompt, np_dtype))[0],
                          np.float32)[0, -1]
        ref = _f32_logits(dec, prompt)
        assert np.abs(ours - ref).max() <= tolerance * np.abs(ref).max()
    pool = kv.KVAllocator(num_blocks=32, block_size=4, num_layers=dec.layers,
                          num_kv_heads=dec.kv_heads, head_dim=dec.head_dim, dtype=kv_dtype,
                          max_seq_len=64)
    runner = PagedRunner(compiled["paged"].load(), kv.KVMemory(pool))
    results = Engine(pool, runner, max_batch_size=2).generate(PROMPTS, NEW_TOKENS,
                                                              sampling=GREEDY)
    assert all(r.finished and r.error is None for r in results)
    assert [r.samples[0].tokens for r in results] == expected


def _feeds(dec, prompt, np_dtype):
    feeds = {"input_ids": np.asarray([prompt], np.int64),
             "position_ids": np.arange(len(prompt), dtype=np.int64)[None]}
    for i in range(dec.layers):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{i}"] = np.zeros((1, dec.kv_heads, 0, dec.head_dim), np_dtype)
    return feeds
