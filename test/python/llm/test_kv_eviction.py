"""Token eviction (`Engine.add_request(kv_budget=...)`) on compiled paged
decoders: a sequence over its KV budget drops whole blocks after each step
and the model attends over the kept tokens, at their own positions.

The window policy's logits are checked against the transformers model run
with a 4-D attention mask in which each token sees exactly the tokens its
sequence kept when it was computed; a budget above the sequence's length
changes no bit, on f32 and KIVI int4 pools; the pool holds at most the
budget (and the block being filled) per sequence."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import sits_mlir  # noqa: E402

from hf_decoders import build  # noqa: E402

from sits_mlir.runtime import errors, kv  # noqa: E402
from sits_mlir.runtime.decoder import PagedRunner  # noqa: E402
from sits_mlir.runtime.engine import GREEDY, Engine  # noqa: E402
from sits_mlir.tools.runtime import decoder_geometry  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

#: Block sizes: f32 and KIVI int4 (whose value groups need a block of at
#: least the head size, 16 here).
BLOCKS = {None: 4, "int4": 16}
PROMPT = [17, 3, 250, 96, 41, 8, 131, 77, 5, 200, 45, 180, 33, 7, 250, 12, 64, 9, 99, 120,
          31, 2, 77, 140, 6, 18, 230, 75, 11, 3]
NEW_TOKENS = 40


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    out = tmp_path_factory.mktemp("llama-eviction")
    dec = build("llama", str(out))
    models = {dtype: sits_mlir.compile(dec.path, "cpu", out / f"{dtype or 'f32'}.sitsm",
                                       threads=2, kv_cache="paged", kv_block_size=block,
                                       kv_dtype=dtype).load()
              for dtype, block in BLOCKS.items()}
    yield dec, models
    models.clear()


def _engine(model, block, blocks=64, batch=1):
    """An engine over a pool of `blocks` blocks for `model`, and the pool."""
    g = decoder_geometry(model)
    alloc = kv.KVAllocator(num_blocks=blocks, block_size=block, num_layers=g["layers"],
                           num_kv_heads=g["kv_heads"], head_dim=g["head_dim"], max_seq_len=256,
                           dtype=g["kv_dtype"], quantization=g["kv_quantization"])
    return Engine(alloc, PagedRunner(model, kv.KVMemory(alloc)), max_batch_size=batch), alloc


def _generate(model, block, *, forced=(), batch=1, prompts=(PROMPT,), **eviction):
    """(per prompt: tokens, logits [tokens, vocab]), engine metrics, and the
    most KV blocks in use after any step."""
    engine, alloc = _engine(model, block, batch=batch)
    ids = [engine.add_request(p, NEW_TOKENS, sampling=GREEDY, forced_tokens=list(forced),
                              return_logits=True, **eviction) for p in prompts]
    peak = 0
    while engine.has_unfinished:
        engine.step()
        peak = max(peak, alloc.stats().active_blocks)
    out = []
    for i in ids:
        r = engine.result(i)
        assert r.finished and r.error is None, r.error
        out.append((r.samples[0].tokens, r.samples[0].logits))
    return out, engine.metrics, peak


@pytest.mark.parametrize("dtype", list(BLOCKS), ids=lambda d: d or "f32")
@pytest.mark.parametrize("policy", ["window", "attention"])
def test_a_budget_above_the_sequence_changes_no_bit(llama, dtype, policy):
    _, models = llama
    block = BLOCKS[dtype]
    (plain,), _, _ = _generate(models[dtype], block)
    (same,), metrics, _ = _generate(models[dtype], block, kv_budget=256, eviction=policy)
    assert same[0] == plain[0]
    assert np.array_equal(same[1], plain[1])
    assert metrics["evicted_tokens"] == 0


def _kept_masks(prompt_len: int, total: int, block: int, budget: int, sinks: int):
    """The window policy's view: row p of a [total, total] boolean mask is
    what position p attended to when it was computed."""
    kept = list(range(prompt_len))
    mask = np.zeros((total, total), bool)
    for p in range(prompt_len):
        mask[p, :p + 1] = True

    def evict():
        sink_blocks = -(-sinks // block)
        while len(kept) > budget:
            del kept[sink_blocks * block:(sink_blocks + 1) * block]

    evict()
    for p in range(prompt_len, total):
        kept.append(p)
        mask[p, kept] = True
        evict()
    return mask


def test_window_eviction_matches_the_masked_reference(llama):
    # Budget 16 of a 30-token prompt and 40 new tokens: the first block
    # (the sinks) and the latest tokens stay; every step's logits equal the
    # transformers model's with each token seeing what was kept for it.
    import torch

    dec, models = llama
    block, budget = BLOCKS[None], 16
    ((tokens, logits),), metrics, peak = _generate(models[None], block, kv_budget=budget,
                                                   eviction="window")
    assert metrics["evicted_tokens"] > 0
    # The prompt (8 blocks) is held whole once; then at most 16 tokens + 1.
    assert peak <= -(-len(PROMPT) // block)
    total = len(PROMPT) + len(tokens) - 1
    mask = _kept_masks(len(PROMPT), total, block, budget, sinks=4)
    ids = torch.tensor([PROMPT + tokens[:-1]])
    bias = torch.where(torch.from_numpy(mask), 0.0, float("-inf"))[None, None]
    with torch.no_grad():
        want = dec.model(ids, position_ids=torch.arange(total)[None],
                         attention_mask=bias).logits[0, len(PROMPT) - 1:].numpy()
    assert logits.shape == want.shape
    np.testing.assert_allclose(logits, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("dtype", list(BLOCKS), ids=lambda d: d or "f32")
@pytest.mark.parametrize("policy", ["window", "attention"])
def test_sequences_stay_within_their_budget(llama, dtype, policy):
    # Four sequences served together (one shares a prefix with another):
    # after their prompts, each holds at most its budget plus the block
    # being filled; eviction stays close to the full run.
    _, models = llama
    block = BLOCKS[dtype]
    budget = 3 * block if policy == "window" else 4 * block
    prompts = [PROMPT, PROMPT[:20] + [5, 6, 7], PROMPT[::-1], [1, 2, 3] * 9]
    results, metrics, peak = _generate(models[dtype], block, batch=4, prompts=prompts,
                                       kv_budget=budget, eviction=policy)
    assert metrics["evicted_tokens"] > 0
    assert metrics["evicted_tokens"] == block * metrics["evicted_blocks"]
    prompt_blocks = sum(-(-len(p) // block) for p in prompts)
    assert peak <= max(prompt_blocks, 4 * (budget // block + 1))
    for tokens, logits in results:
        assert len(tokens) == NEW_TOKENS and np.isfinite(logits).all()


def test_bad_evictions_are_refused(llama):
    _, models = llama
    engine, _ = _engine(models[None], 4, blocks=16)
    with pytest.raises(errors.KVInvalidArgument, match="kv_budget"):
        engine.add_request(PROMPT, 4, kv_budget=8)
    with pytest.raises(errors.KVInvalidArgument, match="supported: none, window, attention"):
        engine.add_request(PROMPT, 4, kv_budget=32, eviction="h2o")
    with pytest.raises(errors.KVInvalidArgument, match="forced_tokens"):
        engine.add_request(PROMPT, 4, forced_tokens=[1, 1 << 20])


def test_long_generations_fit_a_small_pool_under_a_budget(llama):
    # 4 sequences of 6 + 200 tokens in 14 blocks of 4 (52 usable slots):
    # without eviction one alone would not fit; with a budget of 16 all
    # complete, the ones preempted by recompute prefilling their kept
    # tokens at their own positions.
    _, models = llama
    engine, alloc = _engine(models[None], 4, blocks=14, batch=4)
    with pytest.raises(errors.KVCapacityError):
        engine.add_request(PROMPT, 200)
    prompts = [PROMPT[i:i + 6] for i in range(0, 24, 6)]
    ids = [engine.add_request(p, 200, kv_budget=16, eviction="window") for p in prompts]
    engine.run_until_done()
    for i in ids:
        r = engine.result(i)
        assert r.error is None and len(r.samples[0].tokens) == 200
    m = engine.metrics
    assert m["preemptions"] > 0 and m["evicted_tokens"] > 0
    alloc.check_invariants()
