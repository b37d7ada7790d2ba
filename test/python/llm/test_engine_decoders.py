"""The generation engine serving GPT-2 and Llama from the paged KV pool,
compiled paged (`PagedRunner`: attention reads and writes the pool through
the block tables, the batch in one call) and with the exported signature
(`PastKVRunner`: each step gathers the past from the sequence's blocks and
scatters the new K/V into its slots): continuous batching of different
prompts gives `transformers`' greedy tokens, token for token, and so it does
under preemption (a pool too small for all sequences at once), with prefix
caching on or off, and for n = 2 forked samples. The paged path's logits
equal the contiguous path's at every step."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_decoders import RecordingRunner, transformers_greedy  # noqa: E402

from sits_mlir.runtime import kv  # noqa: E402
from sits_mlir.runtime.decoder import PagedRunner, PastKVRunner  # noqa: E402
from sits_mlir.runtime.engine import GREEDY, Engine  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

NEW_TOKENS = 24
SHARED = [17, 3, 250, 96, 41, 8, 131, 77]  # two full blocks of 4
PROMPTS = [SHARED + [5, 200],
           SHARED + [64, 2, 19, 99, 1],
           [45, 180, 33, 7, 250, 12, 64]]
_REFS: dict = {}


def _references(dec):
    if dec.name not in _REFS:
        _REFS[dec.name] = [transformers_greedy(dec, p, NEW_TOKENS) for p in PROMPTS]
    return _REFS[dec.name]


def _serve(dec, model, runner_type, *, num_blocks=64, prefix_caching=True, batch=3, n=1,
           preemption="recompute", host_blocks=0, record=None):
    pool = kv.KVAllocator(num_blocks=num_blocks, block_size=4, num_layers=dec.layers,
                          num_kv_heads=dec.kv_heads, head_dim=dec.head_dim, dtype="f32",
                          max_seq_len=64, enable_prefix_caching=prefix_caching,
                          num_host_blocks=host_blocks)
    runner = runner_type(model, kv.KVMemory(pool))
    if record is not None:
        runner = RecordingRunner(runner)
        record.append(runner)
    engine = Engine(pool, runner, max_batch_size=batch, preemption=preemption)
    results = engine.generate(PROMPTS, NEW_TOKENS, sampling=GREEDY, n=n)
    assert all(r.finished and r.error is None for r in results)
    return [[s.tokens for s in r.samples] for r in results], engine.metrics


def test_batched_greedy_equals_transformers(served):
    dec, model, runner = served
    tokens, metrics = _serve(dec, model, runner)
    assert [t[0] for t in tokens] == _references(dec)
    # The two prompts sharing two full blocks: the second reuses them.
    assert metrics["prefix_cache_hit_tokens"] >= 8
    assert metrics["preemptions"] == 0


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_preemption_keeps_the_tokens(served, preemption):
    dec, model, runner = served
    # 3 sequences of up to 37 tokens need 30 blocks of 4; 16 usable blocks
    # force the newest ones out and back while the oldest progresses.
    tokens, metrics = _serve(dec, model, runner, num_blocks=17, preemption=preemption,
                             host_blocks=32 if preemption == "swap" else 0)
    assert metrics["preemptions"] > 0
    assert [t[0] for t in tokens] == _references(dec)


def test_prefix_caching_off_gives_the_same_tokens(served):
    dec, model, runner = served
    tokens, metrics = _serve(dec, model, runner, prefix_caching=False)
    assert metrics["prefix_cache_hit_tokens"] == 0
    assert [t[0] for t in tokens] == _references(dec)


def test_forked_greedy_samples_agree(served):
    dec, model, runner = served
    tokens, _ = _serve(dec, model, runner, n=2, batch=6)
    for samples, ref in zip(tokens, _references(dec)):
        assert samples == [ref, ref]


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_paged_logits_equal_contiguous(llm_models, name):
    """The same schedule through every compiled form: every step's logits
    agree (logits="last" computes the same last rows), and the paged model
    runs each step's decodes in one call."""
    runs = []
    for kv_cache, runner in (("contiguous", PastKVRunner), ("paged", PagedRunner),
                             ("paged-last", PagedRunner)):
        dec, model = llm_models(name, kv_cache)
        _serve(dec, model, runner, record=runs)
    contiguous, paged, last = runs
    for run in (paged, last):
        assert len(run.logits) == len(contiguous.logits)
        for a, b in zip(contiguous.logits, run.logits):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
        # Prefill steps take one call per kind of sequence, decode steps one.
        assert run.runner.calls <= 2 * run.runner.steps


def test_engine_drives_the_native_runner(llm_models, monkeypatch):
    """An engine given a PagedRunner runs its steps in C++ (Python's
    execute is never called, the native counters move); a subclass that
    overrides execute is driven through Python, with the same tokens."""
    dec, model = llm_models("llama", "paged")
    called, execute = [], PagedRunner.execute
    monkeypatch.setattr(PagedRunner, "execute",
                        lambda self, batch: called.append(1) or execute(self, batch))
    runs = []
    _serve(dec, model, PagedRunner, record=runs)  # through Python: the recorder
    tokens, metrics = _serve(dec, model, PagedRunner)
    assert called == [1] * len(runs[0].logits)  # the recorder's calls only
    monkeypatch.undo()

    class Counting(PagedRunner):
        def execute(self, batch):
            called.append(2)
            return super().execute(batch)

    called.clear()
    assert _serve(dec, model, Counting)[0] == tokens
    assert len(called) == metrics["steps"]
    assert tokens == [[r] for r in _references(dec)]


def test_last_position_logits(llm_models):
    """logits="last": a left-padded prefill returns [B, 1, V], each row the
    full model's last row; an empty step returns [B, 0, V]; the manifest
    names the extent min(seq, 1) and the shape function computes it."""
    _, full = llm_models("llama", "paged")
    dec, last = llm_models("llama", "paged-last")
    names = {a["name"]: a for a in last.manifest["entry_points"][0]["args"]}
    assert names["logits"]["shape"][1] == -1
    assert names["logits"]["dim_names"][1].startswith("1 - 1 // (")
    rng = np.random.default_rng(5)
    for batch, width in [(3, 9), (1, 1), (2, 0)]:
        ids = rng.integers(0, dec.vocab, (batch, width)).astype(np.int64)
        feeds = {"input_ids": ids,
                 "position_ids": np.broadcast_to(np.arange(width), (batch, width)).copy(),
                 "block_tables": np.arange(batch * 3, dtype=np.int32).reshape(batch, 3),
                 "slot_mapping": (np.arange(batch)[:, None] * 12 + np.arange(width)),
                 "context_lens": np.full(batch, width, np.int32)}
        outs = []
        for model in (full, last):
            pool = np.zeros((batch * 3 + 1, dec.layers, 2, dec.kv_heads, 4, dec.head_dim),
                            np.float32)
            outs.append(model.run(kv_pool=pool, **feeds)[0])
        assert outs[1].shape == (batch, min(width, 1), dec.vocab)
        np.testing.assert_allclose(outs[1], outs[0][:, width - min(width, 1):],
                                   rtol=1e-5, atol=1e-5)


def test_paged_runner_checks_the_model(compiled):
    dec, model = compiled
    pool = kv.KVAllocator(num_blocks=8, block_size=4, num_layers=dec.layers,
                          num_kv_heads=dec.kv_heads, head_dim=dec.head_dim, dtype="f32",
                          max_seq_len=16)
    with pytest.raises(ValueError, match="compile it with kv_cache='paged'"):
        PagedRunner(model, kv.KVMemory(pool))


def test_paged_runner_checks_the_pool(llm_models):
    dec, model = llm_models("llama", "paged")
    pool = kv.KVAllocator(num_blocks=8, block_size=8, num_layers=dec.layers,
                          num_kv_heads=dec.kv_heads, head_dim=dec.head_dim, dtype="f32",
                          max_seq_len=16)
    with pytest.raises(ValueError, match="the model expects kv_pool"):
        PagedRunner(model, kv.KVMemory(pool))


def test_runner_checks_the_pool():
    pool = kv.KVAllocator(num_blocks=8, block_size=4, num_layers=1, num_kv_heads=1,
                          head_dim=4, dtype="f16", max_seq_len=16)
    with pytest.raises(ValueError, match="must be float32"):
        PastKVRunner(object(), kv.KVMemory(pool))
    assert np.dtype("float32") != kv.KVMemory(pool).device.dtype


def test_token_ids_past_the_vocabulary_are_refused(served):
    """The runners know the vocabulary from the logits; the engine refuses
    a token id past it instead of handing it to the embedding Gather."""
    dec, model, runner_type = served
    pool = kv.KVAllocator(num_blocks=16, block_size=4, num_layers=dec.layers,
                          num_kv_heads=dec.kv_heads, head_dim=dec.head_dim, dtype="f32",
                          max_seq_len=64)
    runner = runner_type(model, kv.KVMemory(pool))
    assert runner.vocab_size == dec.vocab
    engine = Engine(pool, runner, max_batch_size=2)
    with pytest.raises(kv.KVInvalidArgument, match=f"prompt\\[1\\] = 1000000: token ids must be "
                                                   f"in \\[0, vocab_size = {dec.vocab}\\)"):
        engine.add_request([1, 1000000], 4)
    (result,) = engine.generate([[1, dec.vocab - 1]], 2, sampling=GREEDY)
    assert result.error is None and len(result.samples[0].tokens) == 2
