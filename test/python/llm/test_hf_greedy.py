"""GPT-2 and Llama (GQA, RoPE) decoders from `transformers` configs with
random weights, exported to ONNX with their KV cache and compiled once by
SITS with every extent dynamic: greedy generation of 64 tokens with a
contiguous KV cache equals `transformers`' greedy `generate`, token for
token, for prompts of different lengths; each step's logits and present
K/V match onnxruntime on the same export."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hf_decoders import greedy_contiguous, transformers_greedy  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

NEW_TOKENS = 64
PROMPTS = [[17, 3, 250, 96, 41],
           [5, 200, 8, 8, 131, 77, 64, 2, 19],
           [99, 1, 45, 180, 33, 7, 250, 12, 64, 90, 5, 6, 222]]


def test_greedy_equals_transformers(compiled):
    dec, model = compiled
    min_gap = np.inf
    for prompt in PROMPTS:
        ours, gap = greedy_contiguous(model.run, dec, prompt, NEW_TOKENS)
        min_gap = min(min_gap, gap)
        theirs = transformers_greedy(dec, prompt, NEW_TOKENS)
        assert len(theirs) == NEW_TOKENS
        assert ours == theirs, f"prompt {prompt}: first difference at token " \
            f"{next(i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b)}"
    # The comparison means something only if no step was a near-tie.
    assert min_gap > 1e-4


def test_steps_match_onnxruntime(compiled):
    ort = pytest.importorskip("onnxruntime")
    dec, model = compiled
    session = ort.InferenceSession(dec.path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    # A batch of two, prefill of 5 over a past of 3, then decode over 8.
    for batch, seq, past in [(2, 5, 3), (2, 1, 8), (1, 4, 0)]:
        feeds = {"input_ids": rng.integers(0, dec.vocab, (batch, seq)).astype(np.int64),
                 "position_ids": np.broadcast_to(np.arange(past, past + seq),
                                                 (batch, seq)).astype(np.int64).copy()}
        for i in range(dec.layers):
            for kind in ("key", "value"):
                feeds[f"past_{kind}_{i}"] = rng.standard_normal(
                    (batch, dec.kv_heads, past, dec.head_dim)).astype(np.float32)
        ours = model.run(**feeds)
        ref = session.run(None, feeds)
        assert len(ours) == len(ref)
        for a, b in zip(ours, ref):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
