"""Decoders compiled with `kv_cache="paged", kv_dtype="int8"` or `"fp8"`:
the KV pool holds INT8 or FP8 (E4M3) codes with an f32 scale per token and
head (the allocator's `per_token_head` quantization), the new K/V are quantized as they are
written and attention dequantizes them in registers. The engine serves the
model from such a pool: its logits stay within a small fraction of their
spread of the f32 pool's at every step the two runs share a context, and a
block takes 4 D / (D + 4) times fewer bytes."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import sits_mlir  # noqa: E402

from hf_decoders import RecordingRunner, build  # noqa: E402

from sits_mlir.runtime import kv  # noqa: E402
from sits_mlir.runtime.decoder import PagedRunner  # noqa: E402
from sits_mlir.runtime.engine import GREEDY, Engine  # noqa: E402
from sits_mlir.tools.runtime import decoder_geometry  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

BLOCK = 4
NEW_TOKENS = 16
PROMPTS = [[17, 3, 250, 96, 41, 8, 131, 77, 5, 200], [45, 180, 33, 7, 250, 12, 64]]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    out = tmp_path_factory.mktemp("llama-quantized-kv")
    dec = build("llama", str(out))
    models = {dtype: sits_mlir.compile(dec.path, "cpu", out / f"{dtype or 'f32'}.sitsm",
                                       threads=2, kv_cache="paged", kv_block_size=BLOCK,
                                       kv_dtype=dtype).load()
              for dtype in (None, "int8", "fp8")}
    yield dec, models
    models.clear()


def _pool(dec, **fields):
    return kv.KVAllocator(num_blocks=32, block_size=BLOCK, num_layers=dec.layers,
                          num_kv_heads=dec.kv_heads, head_dim=dec.head_dim,
                          max_seq_len=64, **fields)


def _serve(model, pool):
    runner = RecordingRunner(PagedRunner(model, kv.KVMemory(pool)))
    # One sequence at a time: a step's logits depend on its context only.
    results = Engine(pool, runner, max_batch_size=1).generate(PROMPTS, NEW_TOKENS,
                                                              sampling=GREEDY)
    assert all(r.finished and r.error is None for r in results)
    return [r.samples[0].tokens for r in results], runner.logits


#: compile's kv_dtype -> (the manifest's kv_pool dtype, the pool's dtype).
KV_TYPES = {"int8": ("i8", "int8"), "fp8": ("f8e4m3fn", "fp8_e4m3")}


@pytest.mark.parametrize("kind", sorted(KV_TYPES))
def test_signature_names_the_quantized_pool(llama, kind):
    dec, models = llama
    pool = models[kind].default_entry.inputs
    spec = next(s for s in pool if s.name == "kv_pool")
    assert spec.dtype == KV_TYPES[kind][0]
    assert spec.shape[1:] == (dec.layers, 2, dec.kv_heads, BLOCK, dec.head_dim + 4)
    geometry = decoder_geometry(models[kind])
    assert (geometry["kv_dtype"], geometry["kv_quantization"], geometry["head_dim"]) == \
        (KV_TYPES[kind][1], "per_token_head", dec.head_dim)
    assert decoder_geometry(models[None])["kv_dtype"] == "f32"


# FP8 E4M3 keeps 3 mantissa bits (a relative step of 1/16 near each row's
# largest values, where INT8's is 1/254): on this small model with large
# weights its logits move about 3.5 times as far as INT8's.
@pytest.mark.parametrize("kind,tolerance", [("int8", 0.1), ("fp8", 0.8)])
def test_engine_serves_quantized_kv_close_to_f32(llama, kind, tolerance):
    dec, models = llama
    f32_pool = _pool(dec, dtype="f32")
    int8_pool = _pool(dec, dtype=KV_TYPES[kind][1], quantization="per_token_head")
    d = dec.head_dim
    assert f32_pool.geometry["bytes_per_block"] * (d + 4) == \
        int8_pool.geometry["bytes_per_block"] * 4 * d
    tokens, logits = _serve(models[None], f32_pool)
    tokens8, logits8 = _serve(models[kind], int8_pool)
    # Steps run prompt by prompt: compare while the contexts agree.
    step = 0
    compared = 0
    for ref, ours in zip(tokens, tokens8):
        for i in range(NEW_TOKENS):
            a, b = logits[step][0], logits8[step][0]
            assert np.abs(a - b).max() <= tolerance * a.std(), (step, np.abs(a - b).max(),
                                                                a.std())
            compared += 1
            step += 1
            if ref[i] != ours[i]:
                step += NEW_TOKENS - 1 - i
                break
    assert compared >= 2 * 4
    assert tokens8[0][0] == tokens[0][0] and tokens8[1][0] == tokens[1][0]


def test_pool_and_model_must_agree(llama):
    dec, models = llama
    with pytest.raises(ValueError, match="kv_pool"):
        PagedRunner(models["int8"], kv.KVMemory(_pool(dec, dtype="f32")))
    with pytest.raises(ValueError, match="kv_pool"):
        PagedRunner(models[None], kv.KVMemory(_pool(dec, dtype="int8",
                                                     quantization="per_token_head")))


def test_kv_dtype_is_checked():
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        sits_mlir.compile("unused.onnx", "cpu", kv_cache="paged", kv_dtype="int3")


def test_kv_dtype_needs_the_paged_cache():
    with pytest.raises(ValueError, match="needs kv_cache='paged'"):
        sits_mlir.compile("unused.onnx", "cpu", kv_dtype="int8")


@pytest.mark.parametrize("kind", sorted(KV_TYPES))
def test_sits_runtime_sizes_the_quantized_pool(llama, kind, tmp_path, capsys):
    """`sits-runtime` serves the model from a pool of its KV type, whose
    blocks count the scales."""
    import json

    from sits_mlir.tools import runtime as cli

    dec, models = llama
    report_path = tmp_path / "report.json"
    rc = cli.main(["--config", models[kind].path, "--batch-size", "2", "--max-seq-len", "64",
                   "--synthetic", "3", "--prompt-len", "9", "--output-len", "6",
                   "--seed", "1", "--json", str(report_path)])
    assert rc == 0, capsys.readouterr().err
    report = json.loads(report_path.read_text())
    assert report["failed"] == 0 and report["output_tokens"] > 0
    assert (report["kv_dtype"], report["kv_quantization"]) == (KV_TYPES[kind][1],
                                                               "per_token_head")
    d = dec.head_dim
    row_bytes = 2 * dec.layers * dec.kv_heads * BLOCK * (d + 4)
    assert report["kv_contiguous_bytes"] == 2 * 64 * row_bytes // BLOCK


# --- KIVI blocks: kv_dtype="int4" / "int2" -------------------------------------

#: Blocks of 8 positions: the first prompt (10 tokens) fills one, whose keys
#: are then quantized per channel; of 32: every context stays in the f32
#: tail of its first block.
KIVI_BLOCK, KIVI_TAIL_ONLY = 8, 32


@pytest.fixture(scope="module")
def kivi(llama, tmp_path_factory):
    dec, models = llama
    out = tmp_path_factory.mktemp("llama-kivi")
    compiled = {(dtype, block): sits_mlir.compile(dec.path, "cpu", out / f"{dtype}-{block}.sitsm",
                                                  threads=2, kv_cache="paged",
                                                  kv_block_size=block, kv_dtype=dtype).load()
                for dtype in ("int4", "int2") for block in (KIVI_BLOCK, KIVI_TAIL_ONLY)}
    compiled["int4-token", KIVI_BLOCK] = sits_mlir.compile(
        dec.path, "cpu", out / "int4-token.sitsm", threads=2, kv_cache="paged",
        kv_block_size=KIVI_BLOCK, kv_dtype="int4-token").load()
    compiled[None, KIVI_BLOCK] = sits_mlir.compile(dec.path, "cpu", out / "f32-8.sitsm",
                                                   threads=2, kv_cache="paged",
                                                   kv_block_size=KIVI_BLOCK).load()
    yield dec, compiled
    compiled.clear()


def _kivi_pool(dec, dtype, block):
    return kv.KVAllocator(num_blocks=32, block_size=block, num_layers=dec.layers,
                          num_kv_heads=dec.kv_heads, head_dim=dec.head_dim, max_seq_len=64,
                          dtype=dtype, quantization="kivi")


@pytest.mark.parametrize("dtype", ["int4", "int2"])
def test_kivi_signature_carries_the_geometry(kivi, dtype):
    dec, models = kivi
    model = models[dtype, KIVI_BLOCK]
    spec = next(s for s in model.default_entry.inputs if s.name == "kv_pool")
    # [blocks, bytes of a block] i8: the geometry is in the manifest.
    stride = _kivi_pool(dec, dtype, KIVI_BLOCK).geometry["block_stride"]
    assert spec.dtype == "i8" and spec.shape[1:] == (stride,)
    geometry = decoder_geometry(model)
    assert (geometry["kv_dtype"], geometry["kv_quantization"], geometry["block_size"],
            geometry["layers"], geometry["kv_heads"], geometry["head_dim"]) == \
        (dtype, "kivi", KIVI_BLOCK, dec.layers, dec.kv_heads, dec.head_dim)


def test_per_token_keys_signature_and_serving(kivi):
    """kv_dtype="int4-token": the same blocks with keys quantized per token
    (the allocator's per_token_group), served within the bounds of KIVI's."""
    dec, models = kivi
    model = models["int4-token", KIVI_BLOCK]
    geometry = decoder_geometry(model)
    assert (geometry["kv_dtype"], geometry["kv_quantization"]) == ("int4", "per_token_group")
    entry = next(a for e in model.manifest["entry_points"] for a in e["args"]
                 if a["name"] == "kv_pool")
    assert entry["kivi"]["keys"] == "token" and entry["kivi"]["bits"] == 4
    pool = kv.KVAllocator(num_blocks=32, block_size=KIVI_BLOCK, num_layers=dec.layers,
                          num_kv_heads=dec.kv_heads, head_dim=dec.head_dim, max_seq_len=64,
                          dtype="int4", quantization="per_token_group")
    tokens, _ = _serve(model, pool)
    assert all(len(t) == NEW_TOKENS for t in tokens)
    # A KIVI pool is not a per-token one (same bytes, other meaning).
    with pytest.raises(ValueError, match="per-token blocks"):
        PagedRunner(model, kv.KVMemory(_kivi_pool(dec, "int4", KIVI_BLOCK)))


def test_kivi_default_block_size_is_32(kivi, tmp_path):
    from sits_mlir.compiler.driver import default_kv_block_size

    assert (default_kv_block_size("int4"), default_kv_block_size("int8"),
            default_kv_block_size(None)) == (32, 16, 16)


@pytest.mark.parametrize("dtype", ["int4", "int2"])
def test_kivi_tail_holds_exact_rows(llama, kivi, dtype):
    """While a block is being filled its rows are f32: with every context
    inside one block the engine's logits are the f32 pool's."""
    dec, models = kivi
    _, f32_models = llama
    f32_pool = _pool(dec, dtype="f32")
    tokens, logits = _serve(f32_models[None], f32_pool)
    tokens4, logits4 = _serve(models[dtype, KIVI_TAIL_ONLY],
                              _kivi_pool(dec, dtype, KIVI_TAIL_ONLY))
    assert tokens4 == tokens
    for a, b in zip(logits, logits4):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4 * np.abs(a).max())


def test_kivi_quantized_blocks_stay_close_to_f32(kivi):
    """Once blocks fill, their keys and values are 4- or 2-bit codes: the
    logits move from the f32 pool's by a fraction of their spread (this
    small model's large weights amplify KV errors; int8 rows stay within
    0.1), 2 bits further than 4."""
    dec, models = kivi
    f32_pool = kv.KVAllocator(num_blocks=32, block_size=KIVI_BLOCK, num_layers=dec.layers,
                              num_kv_heads=dec.kv_heads, head_dim=dec.head_dim,
                              max_seq_len=64, dtype="f32")
    tokens, logits = _serve(models[None, KIVI_BLOCK], f32_pool)
    worst = {}
    for dtype in ("int4", "int2"):
        ours_tokens, ours = _serve(models[dtype, KIVI_BLOCK],
                                   _kivi_pool(dec, dtype, KIVI_BLOCK))
        # The first prompt's first step reads one quantized block; compare
        # the steps whose contexts agree.
        errors, step = [], 0
        for ref, got in zip(tokens, ours_tokens):
            for i in range(NEW_TOKENS):
                a, b = logits[step][0], ours[step][0]
                errors.append(float(np.abs(a - b).max() / a.std()))
                step += 1
                if ref[i] != got[i]:
                    step += NEW_TOKENS - 1 - i
                    break
        worst[dtype] = max(errors)
        assert ours_tokens[1][0] == tokens[1][0]  # 7 tokens: all in the tail
    assert 0 < worst["int4"] < 1.0 and worst["int4"] < worst["int2"] < 4.0, worst


def test_kivi_pool_and_model_must_agree(kivi):
    dec, models = kivi
    with pytest.raises(ValueError, match="kv_pool"):
        PagedRunner(models["int4", KIVI_BLOCK], kv.KVMemory(_kivi_pool(dec, "int2", KIVI_BLOCK)))
    with pytest.raises(ValueError, match="kv_pool"):
        PagedRunner(models["int4", KIVI_BLOCK], kv.KVMemory(_kivi_pool(dec, "int4", 16)))
    with pytest.raises(ValueError, match="kv_pool"):
        PagedRunner(models["int4", KIVI_BLOCK], kv.KVMemory(_pool(dec, dtype="f32")))


def test_sits_runtime_serves_a_kivi_pool(kivi, tmp_path, capsys):
    import json

    from sits_mlir.tools import runtime as cli

    dec, models = kivi
    report_path = tmp_path / "report.json"
    rc = cli.main(["--config", models["int4", KIVI_BLOCK].path, "--batch-size", "2",
                   "--max-seq-len", "64", "--synthetic", "3", "--prompt-len", "9",
                   "--output-len", "12", "--seed", "1", "--json", str(report_path)])
    assert rc == 0, capsys.readouterr().err
    report = json.loads(report_path.read_text())
    assert report["failed"] == 0 and report["output_tokens"] > 0
    assert (report["kv_dtype"], report["kv_quantization"]) == ("int4", "kivi")
    # Per token: K and V slabs of 8 rows of 8 bytes and 64 bytes of (scale,
    # min) pairs, for each of 2 layers x 2 heads.
    assert report["kv_bytes_per_token"] == 2 * 2 * 2 * (8 * 8 + 64) / KIVI_BLOCK
    f32_row = 2 * dec.layers * dec.kv_heads * dec.head_dim * 4
    assert report["kv_compression_vs_f32"] == pytest.approx(f32_row / report["kv_bytes_per_token"])
    assert "bytes per token" in capsys.readouterr().out


def test_kivi_tails_follow_fork_and_swap(kivi):
    """A partial block's f32 rows live in its tail: copy-on-write after a
    fork (n > 1) and swapping a preempted sequence out and back must carry
    them, so the tokens are those of a run that does neither."""
    dec, models = kivi
    model = models["int4", KIVI_BLOCK]
    prompts = [[17, 3, 250, 96, 41, 8, 131, 77, 5, 200], [45, 180, 33, 7, 250, 12, 64],
               [9, 99, 199, 29, 39, 49, 59, 69, 79, 89, 101]]

    def serve(pool, n=1, batch=3, preemption="recompute"):
        engine = Engine(pool, PagedRunner(model, kv.KVMemory(pool)), max_batch_size=batch,
                        preemption=preemption)
        results = engine.generate(prompts, NEW_TOKENS, sampling=GREEDY, n=n)
        assert all(r.finished and r.error is None for r in results)
        return [[s.tokens for s in r.samples] for r in results], engine.metrics

    def pool(blocks, host=0):
        return kv.KVAllocator(num_blocks=blocks, num_host_blocks=host, block_size=KIVI_BLOCK,
                              num_layers=dec.layers, num_kv_heads=dec.kv_heads,
                              head_dim=dec.head_dim, max_seq_len=64, dtype="int4",
                              quantization="kivi", enable_prefix_caching=False)

    alone, _ = serve(pool(64), batch=1)
    # Three greedy samples share the prompt's blocks, then copy the tail.
    forked, _ = serve(pool(64), n=3)
    assert all(samples == [ref[0]] * 3 for samples, ref in zip(forked, alone))
    # Too few blocks for all three: the youngest is swapped out and back.
    swapped, metrics = serve(pool(9, host=16), preemption="swap")
    assert metrics["swap_outs"] > 0 and metrics["swap_ins"] > 0, metrics
    assert swapped == alone
