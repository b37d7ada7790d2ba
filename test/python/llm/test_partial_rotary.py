"""A decoder whose rotary embedding covers the whole head (GPT-NeoX with
rotary_pct=1.0): its attention concatenates each rotated head with an empty
pass-through slice, which the importer skips (Concat does not read
statically empty inputs). Logits equal transformers'."""

import copy
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import sits_mlir  # noqa: E402
from sits_mlir.compiler.hf import decoder_geometry, export_decoder  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("rotary_pct", [1.0, 0.5])
def test_gpt_neox_rotary_fraction(rotary_pct, tmp_path):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    config = transformers.GPTNeoXConfig(
        vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, rotary_pct=rotary_pct, max_position_embeddings=64,
        attn_implementation="eager")
    model = transformers.GPTNeoXForCausalLM(config).eval()
    layers, kv_heads, head_dim = decoder_geometry(config)
    path = tmp_path / "neox.onnx"
    export_decoder(copy.deepcopy(model), path, layers, kv_heads, head_dim)
    compiled = sits_mlir.compile(str(path), "cpu", tmp_path / "neox.sitsm", threads=2).load()
    ids = np.array([[5, 7, 9, 11, 13, 17]], np.int64)
    feeds = {"input_ids": ids, "position_ids": np.arange(ids.shape[1])[None]}
    for i in range(layers):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{i}"] = np.zeros((1, kv_heads, 0, head_dim), np.float32)
    logits = compiled.run(**feeds)[0]
    with torch.no_grad():
        reference = model(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(logits, reference, rtol=1e-4, atol=1e-5)
