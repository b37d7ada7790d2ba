"""sits_mlir.runtime.engine: the C++ generation engine from Python, with a
runner written in Python that simulates the KV slots (each remembers the
token and position written there; the step's copies move them) and computes
logits from the token history it reads back through the block table, so
any mistake in tables, slots, positions or copies changes the tokens."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from sits_mlir.runtime import kv
from sits_mlir.runtime.engine import Engine, SamplingParams, sample
from sits_mlir.runtime.errors import KVCapacityError, KVInvalidArgument

VOCAB = 24
BS = 4


def logits_of(history) -> np.ndarray:
    digest = hashlib.blake2b(np.asarray(history, np.int32).tobytes(), digest_size=8).digest()
    rng = np.random.default_rng(int.from_bytes(digest, "little"))
    return rng.uniform(-3, 3, VOCAB).astype(np.float32)


def reference(prompt, max_new, params=SamplingParams(temperature=0.0), stream=0, stop=None):
    tokens, out = list(prompt), []
    for step in range(max_new):
        t = sample(logits_of(tokens), params, stream=stream, step=step)
        tokens.append(t)
        out.append(t)
        if t == stop:
            break
    return out


class SlotRunner:
    def __init__(self, num_blocks, num_host_blocks=0, memory=None, fail_at=None,
                 bad_shape=False):
        self.device = {}
        self.host = {}
        self.steps = 0
        self.memory = memory
        self.fail_at = fail_at
        self.bad_shape = bad_shape
        self.max_batch = 0

    def execute(self, batch):
        step = self.steps
        self.steps += 1
        if step == self.fail_at:
            raise RuntimeError("boom")
        if self.memory is not None:
            self.memory.apply_copies(batch.copies)
        for c in batch.copies:
            src = self.device if c.src_tier == "device" else self.host
            dst = self.device if c.dst_tier == "device" else self.host
            for t in range(c.tokens):
                dst[c.dst * BS + t] = src.get(c.src * BS + t)
        self.max_batch = max(self.max_batch, len(batch.sequences))
        for s in batch.sequences:
            assert s.token_ids.dtype == np.int32 and s.slot_mapping.dtype == np.int64
            assert s.positions[-1] == s.context_len - 1
            for tok, pos, slot in zip(s.token_ids, s.positions, s.slot_mapping):
                assert slot == s.block_table[pos // BS] * BS + pos % BS
                self.device[int(slot)] = (int(tok), int(pos))
        rows = []
        for s in batch.sequences:
            history = []
            for p in range(s.context_len):
                tok, pos = self.device[int(s.block_table[p // BS]) * BS + p % BS]
                assert pos == p
                history.append(tok)
            rows.append(logits_of(history))
        if self.bad_shape:
            return np.zeros((len(rows) + 1, VOCAB), np.float32)
        return np.stack(rows)


def pool(num_blocks, caching=True, host=0):
    return kv.KVAllocator(num_blocks=num_blocks, block_size=BS, num_layers=1, num_kv_heads=1,
                          head_dim=4, dtype="f32", max_seq_len=128,
                          enable_prefix_caching=caching, num_host_blocks=host)


def prompts(count):
    return [[5, 6, 7, 8, 9, 10] + [(i * 7 + j) % 50 for j in range(1 + i % 5)]
            for i in range(count)]


@pytest.mark.parametrize("num_blocks,batch,caching,host,preemption", [
    (256, 1, True, 0, "recompute"),
    (256, 6, False, 0, "recompute"),
    (12, 6, True, 0, "recompute"),
    (12, 6, True, 64, "swap"),
])
def test_greedy_matches_reference(num_blocks, batch, caching, host, preemption):
    a = pool(num_blocks, caching, host)
    runner = SlotRunner(num_blocks)
    e = Engine(a, runner, max_batch_size=batch, preemption=preemption)
    ps = prompts(8)
    results = e.generate(ps, max_new_tokens=20, sampling=SamplingParams(temperature=0.0),
                         stop_token=3)
    for p, r in zip(ps, results):
        assert r.finished and r.error is None
        assert r.samples[0].tokens == reference(p, 20, stop=3)
        assert r.samples[0].finish_reason in ("stop", "length")
    m = e.metrics
    assert runner.max_batch == batch
    assert m["requests_finished"] == 8
    assert (m["preemptions"] > 0) == (num_blocks == 12)
    assert (m["prefix_cache_hit_tokens"] > 0) == caching
    assert a.stats().num_sequences == 0


def test_parallel_samples_fork_and_are_seed_reproducible():
    a = pool(64)
    e = Engine(a, SlotRunner(64), max_batch_size=4)
    prompt = list(range(10))
    greedy = e.generate([prompt], 8, sampling=SamplingParams(temperature=0.0), n=3)[0]
    assert [s.tokens for s in greedy.samples] == [reference(prompt, 8)] * 3
    assert a.stats().forks == 2
    params = SamplingParams(temperature=1.0, top_k=10, top_p=0.9, seed=11)
    hot = e.generate([prompt], 8, sampling=params, n=3)[0]
    assert [s.tokens for s in hot.samples] == [reference(prompt, 8, params, stream=k)
                                               for k in range(3)]
    assert len({tuple(s.tokens) for s in hot.samples}) > 1
    again = Engine(pool(16), SlotRunner(16), max_batch_size=3).generate(
        [prompt], 8, sampling=params, n=3)[0]
    assert again.samples == hot.samples


def test_runner_sees_copies_it_can_apply_to_kv_memory():
    a = pool(32)
    mem = kv.KVMemory(a)
    e = Engine(a, SlotRunner(32, memory=mem), max_batch_size=4)
    r = e.generate([list(range(6))], 5, sampling=SamplingParams(temperature=0.0), n=4)[0]
    assert a.stats().cow_copies == 3
    assert all(s.tokens == reference(list(range(6)), 5) for s in r.samples)


def test_bad_arguments_raise_typed_errors():
    a = pool(16)
    e = Engine(a, SlotRunner(16), max_batch_size=2)
    with pytest.raises(KVInvalidArgument, match="temperature"):
        e.add_request([1, 2], 4, sampling=SamplingParams(temperature=-1.0))
    with pytest.raises(ValueError, match="top_p"):
        e.add_request([1, 2], 4, sampling=SamplingParams(top_p=0.0))
    with pytest.raises(ValueError, match="n"):
        e.add_request([1, 2], 4, n=3)
    with pytest.raises(ValueError, match="prompt"):
        e.add_request([], 4)
    with pytest.raises(KVCapacityError, match="max_seq_len"):
        e.add_request([1, 2], 127)
    with pytest.raises(KVCapacityError, match="usable_blocks"):
        e.add_request([1, 2], 70)
    with pytest.raises(ValueError, match="preemption"):
        Engine(pool(8), SlotRunner(8), preemption="drop")
    with pytest.raises(ValueError, match="host tier"):
        Engine(pool(8), SlotRunner(8), preemption="swap")
    with pytest.raises(ValueError, match="max_batch_size"):
        Engine(pool(8), SlotRunner(8), max_batch_size=0)
    with pytest.raises(ValueError, match="request_id"):
        e.result(99)


def test_token_ids_past_the_vocabulary_are_refused():
    """A runner's vocab_size (the compiled-model runners read it off the
    logits) bounds prompt and stop tokens; the request is refused before
    any token reaches the model's embedding table."""
    runner = SlotRunner(16)
    runner.vocab_size = 50
    e = Engine(pool(16), runner, max_batch_size=2)
    with pytest.raises(KVInvalidArgument, match=r"prompt\[1\] = 50: token ids must be in "
                                                r"\[0, vocab_size = 50\)"):
        e.add_request([1, 50], 4)
    with pytest.raises(KVInvalidArgument, match=r"prompt\[0\] = 1000000"):
        e.add_request([1000000], 4)
    with pytest.raises(KVInvalidArgument, match="stop_token = 50"):
        e.add_request([1, 2], 4, stop_token=50)
    assert not e.has_unfinished and runner.steps == 0
    e.add_request([0, 49], 2, stop_token=49)
    e.run_until_done()
    # An explicit vocab_size overrides the runner's; 0 checks nothing.
    Engine(pool(16), runner, vocab_size=0).add_request([1000000], 1)
    with pytest.raises(KVInvalidArgument, match="vocab_size = 10"):
        Engine(pool(16), runner, vocab_size=10).add_request([10], 1)
    with pytest.raises(KVInvalidArgument, match="vocab_size = -1"):
        Engine(pool(16), runner, vocab_size=-1)


def test_runner_exception_fails_its_batch_and_is_raised():
    a = pool(64)
    e = Engine(a, SlotRunner(64, fail_at=1), max_batch_size=2)
    ids = [e.add_request(p, 6, sampling=SamplingParams(temperature=0.0)) for p in prompts(3)]
    e.step()
    with pytest.raises(RuntimeError, match="boom"):
        e.step()
    e.run_until_done()
    failed = [e.result(i) for i in ids[:2]]
    assert all(r.finished and r.error is not None for r in failed)
    assert all(s.finish_reason == "error" for r in failed for s in r.samples)
    ok = e.result(ids[2])
    assert ok.error is None and ok.samples[0].tokens == reference(prompts(3)[2], 6)
    assert a.stats().num_sequences == 0


def test_runner_returning_the_wrong_shape_is_an_error():
    e = Engine(pool(16), SlotRunner(16, bad_shape=True), max_batch_size=2)
    rid = e.add_request([1, 2, 3], 4)
    with pytest.raises(ValueError, match="shape"):
        e.step()
    assert e.result(rid).error is not None


def test_sample():
    row = np.array([0.5, 2.0, -1.0, 2.0], np.float32)
    assert sample(row) == 1
    assert sample(row, SamplingParams(temperature=1.0, top_k=1)) == 1
    draws = {sample(row, SamplingParams(temperature=1.0, seed=3), step=s) for s in range(200)}
    assert draws <= {0, 1, 2, 3} and len(draws) >= 3
    with pytest.raises(ValueError, match="top_k"):
        sample(row, SamplingParams(top_k=-1))


def test_abort_frees_blocks_at_once():
    """`abort` ends a running (forked) and a waiting request at once with
    finish reason "abort", keeps the tokens drawn so far, frees their blocks
    before it returns, and leaves the other requests' tokens unchanged."""
    a = pool(64)
    e = Engine(a, SlotRunner(64), max_batch_size=3)
    greedy = SamplingParams(temperature=0.0)
    ps = prompts(4)
    ids = [e.add_request(ps[0], 12, sampling=greedy, n=2),
           e.add_request(ps[1], 12, sampling=greedy),
           e.add_request(ps[2], 12, sampling=greedy),
           e.add_request(ps[3], 12, sampling=greedy)]
    for _ in range(3):
        e.step()
    assert e.num_running == 3 and e.num_waiting == 2
    active = a.stats().active_blocks
    e.abort(ids[0])
    e.abort(ids[3])
    assert a.stats().num_sequences == 1
    assert a.stats().active_blocks < active
    assert e.num_running == 1 and e.num_waiting == 1
    r = e.result(ids[0])
    assert r.finished and r.error is None
    assert [s.finish_reason for s in r.samples] == ["abort", "abort"]
    assert [s.tokens for s in r.samples] == [reference(ps[0], 3)] * 2
    assert e.result(ids[3]).samples[0].tokens == []
    assert e.result(ids[3]).samples[0].finish_reason == "abort"
    e.abort(ids[0])  # again: nothing happens
    e.run_until_done()
    e.abort(ids[1])  # finished: nothing happens
    for i in (1, 2):
        assert e.result(ids[i]).samples[0].tokens == reference(ps[i], 12)
        assert e.result(ids[i]).samples[0].finish_reason == "length"
    assert e.metrics["requests_aborted"] == 2 and e.metrics["requests_finished"] == 2
    assert a.stats().num_sequences == 0 and a.stats().active_blocks == 0
    with pytest.raises(KVInvalidArgument, match="request_id = 99: no such request"):
        e.abort(99)
    e.release(ids[0])
    with pytest.raises(ValueError, match="no such request"):
        e.abort(ids[0])


def test_several_stop_tokens():
    """`stop_token` takes one id or several; any of them ends a sample."""
    e = Engine(pool(64), SlotRunner(64), max_batch_size=2)
    p = prompts(1)[0]
    free = reference(p, 10)
    stops = [t for t in range(VOCAB) if t not in free][:1] + [free[4]]
    greedy = SamplingParams(temperature=0.0)
    (r,) = e.generate([p], 10, sampling=greedy, stop_token=stops)
    cut = free.index(free[4]) + 1
    assert r.samples[0].tokens == free[:cut] and r.samples[0].finish_reason == "stop"
    (r,) = e.generate([p], 10, sampling=greedy, stop_token=np.int64(free[4]))
    assert r.samples[0].tokens == free[:cut]
    (r,) = e.generate([p], 10, sampling=greedy, stop_token=[])
    assert r.samples[0].tokens == free and r.samples[0].finish_reason == "length"
    with pytest.raises(KVInvalidArgument, match="stop_token = -3"):
        e.add_request(p, 4, stop_token=(1, -3))


def test_logprobs():
    """`logprobs=k`: per token the sampled token's log-softmax of the
    runner's logits and the k most likely; None records nothing."""
    e = Engine(pool(64), SlotRunner(64), max_batch_size=2)
    p = prompts(1)[0]
    ids = [e.add_request(p, 5, sampling=SamplingParams(0.0), logprobs=2),
           e.add_request(p, 5, sampling=SamplingParams(0.0))]
    e.run_until_done()
    r, q = e.result(ids[0]), e.result(ids[1])
    s = r.samples[0]
    assert s.tokens == reference(p, 5)
    history = list(p)
    for tok, lp, top in zip(s.tokens, s.logprobs, s.top_logprobs):
        row = logits_of(history).astype(np.float64)
        logsm = row - np.log(np.exp(row).sum())
        assert lp == pytest.approx(logsm[tok], abs=1e-5)
        order = np.argsort(-row, kind="stable")[:2]
        assert [t for t, _ in top] == order.tolist()
        assert [v for _, v in top] == pytest.approx(logsm[order].tolist(), abs=1e-5)
        history.append(tok)
    assert q.samples[0].logprobs is None and q.samples[0].top_logprobs is None
    with pytest.raises(KVInvalidArgument, match="logprobs = 21"):
        e.add_request(p, 4, logprobs=21)
