"""Decoders on onnxruntime's com.microsoft.GroupQueryAttention (RoPE inside,
BNSH past/present, per-sequence `seqlens_k`): compiled as exported they match
onnxruntime step by step, with right-padded past buffers and padded prompts
too; compiled paged, the engine serves them from the KV pool with
onnxruntime's greedy tokens, under preemption and with prefix caching."""

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

import gqa_decoder as gd  # noqa: E402
import onnx  # noqa: E402

import sits_mlir  # noqa: E402
from sits_mlir.errors import CompileError  # noqa: E402
from sits_mlir.runtime import kv  # noqa: E402
from sits_mlir.runtime.decoder import PagedRunner  # noqa: E402
from sits_mlir.runtime.engine import GREEDY, Engine  # noqa: E402

# Every test shares a decoder exported and compiled once (two minutes).
pytestmark = pytest.mark.slow

PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [1, 2, 3, 4, 5, 6, 7, 8, 40, 41, 42], [50, 3, 7]]
NEW_TOKENS = 20


@pytest.fixture(scope="module")
def gqa(tmp_path_factory):
    out = tmp_path_factory.mktemp("gqa")
    path = gd.build(str(out / "gqa.onnx"))
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    contiguous = sits_mlir.compile(path, "cpu", out / "gqa.sitsm", threads=2).load()
    paged = sits_mlir.compile(path, "cpu", out / "gqa-paged.sitsm", threads=2,
                              kv_cache="paged", kv_block_size=4).load()
    yield path, session, contiguous, paged
    del contiguous, paged


def _close(ours, ref):
    for a, r in zip(ours, ref):
        assert a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-3)


def test_steps_match_onnxruntime(gqa):
    _, session, model, _ = gqa
    rng = np.random.default_rng(0)
    ids = rng.integers(0, gd.VOCAB, (2, 5))
    past = [np.zeros((2, gd.KV_HEADS, 0, gd.HEAD_DIM), np.float32)] * 4
    for _ in range(4):  # the prompt, then decode steps
        feeds = gd.feeds(ids, past)
        ref = session.run(None, feeds)
        _close(model.run(**feeds), ref)
        ids, past = ref[0][:, -1].argmax(-1)[:, None], ref[1:]


def test_ragged_lengths_match_onnxruntime(gqa):
    _, session, model, _ = gqa
    rng = np.random.default_rng(1)
    # Decode into a right-padded past: sequence 1 holds 3 of the 6 slots.
    past = [rng.standard_normal((2, gd.KV_HEADS, 6, gd.HEAD_DIM)).astype(np.float32)
            for _ in range(4)]
    feeds = gd.feeds(rng.integers(0, gd.VOCAB, (2, 1)), past, lens=[7, 4])
    ref, ours = session.run(None, feeds), model.run(**feeds)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(ours[1][0], ref[1][0], atol=1e-5)
    np.testing.assert_allclose(ours[1][1, :, :4], ref[1][1, :, :4], atol=1e-5)
    # A right-padded first prompt: sequence 1 has 3 real tokens of 5.
    empty = [np.zeros((2, gd.KV_HEADS, 0, gd.HEAD_DIM), np.float32)] * 4
    feeds = gd.feeds(rng.integers(0, gd.VOCAB, (2, 5)), empty, lens=[5, 3])
    feeds["total_sequence_length"] = np.array(5, np.int32)
    ref, ours = session.run(None, feeds), model.run(**feeds)
    np.testing.assert_allclose(ours[0][0], ref[0][0], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(ours[0][1, :3], ref[0][1, :3], rtol=1e-4, atol=1e-3)


def _ort_greedy(session, prompt):
    ids = np.array([prompt])
    past = [np.zeros((1, gd.KV_HEADS, 0, gd.HEAD_DIM), np.float32)] * 4
    out = []
    for _ in range(NEW_TOKENS):
        ref = session.run(None, gd.feeds(ids, past))
        out.append(int(ref[0][0, -1].argmax()))
        ids, past = np.array([[out[-1]]]), ref[1:]
    return out


@pytest.mark.parametrize("num_blocks,preemption", [(64, "recompute"), (12, "recompute"),
                                                   (12, "swap")])
def test_paged_engine_gives_onnxruntime_tokens(gqa, num_blocks, preemption):
    _, session, _, model = gqa
    names = [s.name for s in model.inputs]
    # The lengths GQA read are the pool's context lengths now.
    assert names == ["input_ids", "kv_pool", "block_tables", "slot_mapping", "context_lens"]
    pool = kv.KVAllocator(num_blocks=num_blocks, block_size=4, num_layers=2,
                          num_kv_heads=gd.KV_HEADS, head_dim=gd.HEAD_DIM, dtype="f32",
                          max_seq_len=64, num_host_blocks=32 if preemption == "swap" else 0)
    engine = Engine(pool, PagedRunner(model, kv.KVMemory(pool)), max_batch_size=3,
                    preemption=preemption)
    results = engine.generate(PROMPTS, NEW_TOKENS, sampling=GREEDY)
    assert [r.samples[0].tokens for r in results] == [_ort_greedy(session, p) for p in PROMPTS]
    assert (engine.metrics["preemptions"] > 0) == (num_blocks == 12)
    assert engine.metrics["prefix_cache_hit_tokens"] >= 8  # the shared two blocks


def test_unsupported_forms_are_named(gqa, tmp_path):
    path = gqa[0]
    model = onnx.load(path)
    node = next(n for n in model.graph.node if n.op_type == "GroupQueryAttention")
    node.attribute.append(onnx.helper.make_attribute("local_window_size", 8))
    onnx.save(model, tmp_path / "window.onnx")
    with pytest.raises(CompileError, match="sliding window"):
        sits_mlir.compile(str(tmp_path / "window.onnx"), "cpu", tmp_path / "w.sitsm")
