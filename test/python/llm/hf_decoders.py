"""Decoder LLMs built from `transformers` configs with seeded random weights,
exported to ONNX the way deployment exports them: one graph for prefill and
decode, taking `input_ids`, `position_ids` and the past K/V of every layer
([batch, kv_heads, past, head_dim], all extents dynamic) and returning the
logits and the present K/V (past + new tokens).

Attention is the eager MatMul/Softmax form; there is no attention-mask
input, so each sequence runs on its own (no padding).
"""

from __future__ import annotations

import copy
import dataclasses
import os

import numpy as np


@dataclasses.dataclass
class Decoder:
    name: str
    model: object          # the torch model (the reference)
    path: str              # the exported ONNX file
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int


def build(name: str, out_dir: str, *, layers: int = 2, hidden: int = 64, heads: int = 4,
          vocab: int = 256, positions: int = 256, dtype: str = "float32") -> Decoder:
    """GPT-2 ("gpt2") or Llama ("llama", two query heads per K/V head) of
    the given size, exported to `out_dir`/<name>.onnx; with
    dtype="float16" the model is converted to fp16 first (as LLMs ship),
    so the whole graph, its KV cache included, is fp16."""
    import torch
    import transformers

    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=layers, n_head=heads, n_embd=hidden,
                                      vocab_size=vocab, n_positions=positions,
                                      initializer_range=0.2)
        model_cls, kv_heads = transformers.GPT2LMHeadModel, heads
    elif name == "llama":
        cfg = transformers.LlamaConfig(num_hidden_layers=layers, num_attention_heads=heads,
                                       num_key_value_heads=heads // 2, hidden_size=hidden,
                                       intermediate_size=2 * hidden, vocab_size=vocab,
                                       max_position_embeddings=positions,
                                       initializer_range=0.2)
        model_cls, kv_heads = transformers.LlamaForCausalLM, heads // 2
    else:
        raise ValueError(name)
    cfg._attn_implementation = "eager"
    # Greedy generation runs the full 64 tokens: no end-of-sequence token.
    cfg.eos_token_id = None
    model = model_cls(cfg).eval().to(getattr(torch, dtype))
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    layers = cfg.num_hidden_layers
    head_dim = hidden // heads

    path = os.path.join(out_dir, f"{name}.onnx")
    # The exporter's tracing leaves the traced module changed; the reference
    # keeps its own copy.
    export(copy.deepcopy(model), path, layers, kv_heads, head_dim, dtype=dtype)
    return Decoder(name, model, path, layers, kv_heads, head_dim, cfg.vocab_size)


def export(model, path: str, layers: int, kv_heads: int, head_dim: int,
           dtype: str = "float32") -> None:
    """Exports a `transformers` decoder as one step graph (prefill and
    decode alike) to `path`: inputs `input_ids`, `position_ids`,
    `past_{key,value}_<i>` (of `dtype`, the model's); outputs `logits`,
    `present_{key,value}_<i>` (sits_mlir.compiler.hf.export_decoder, which
    compiling a model folder uses)."""
    from sits_mlir.compiler.hf import export_decoder

    export_decoder(model, path, layers, kv_heads, head_dim, dtype=dtype)


def greedy_contiguous(run, dec: Decoder, prompt, new_tokens: int, dtype=np.float32):
    """Greedy decoding through a compiled step (`run(**feeds) -> outputs`)
    with a contiguous past K/V (of `dtype`) that grows by each step's
    present: the prompt in one prefill step, then one token per step.
    Returns the new tokens and the smallest gap between the best and
    second-best logit seen."""
    past = [np.zeros((1, dec.kv_heads, 0, dec.head_dim), dtype)
            for _ in range(2 * dec.layers)]
    ids = np.asarray(prompt, np.int64)[None, :]
    position = 0
    tokens, gap = [], np.inf
    for _ in range(new_tokens):
        feeds = {"input_ids": ids,
                 "position_ids": np.arange(position, position + ids.shape[1], dtype=np.int64)[None]}
        for i in range(dec.layers):
            feeds[f"past_key_{i}"] = past[2 * i]
            feeds[f"past_value_{i}"] = past[2 * i + 1]
        logits, *past = run(**feeds)
        last = logits[0, -1]
        top2 = np.sort(last)[-2:]
        gap = min(gap, float(top2[1] - top2[0]))
        token = int(np.argmax(last))
        tokens.append(token)
        position += ids.shape[1]
        ids = np.array([[token]], np.int64)
    return tokens, gap


def transformers_greedy(dec: Decoder, prompt, new_tokens: int) -> list:
    """`transformers`' greedy `generate` of `new_tokens` after `prompt`."""
    import torch

    with torch.no_grad():
        out = dec.model.generate(torch.tensor([list(prompt)]), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False)
    return out[0, len(prompt):].tolist()


class RecordingRunner:
    """An engine runner wrapping `runner` that keeps every step's logits."""

    def __init__(self, runner):
        self.runner, self.logits = runner, []

    def execute(self, batch):
        out = self.runner.execute(batch)
        self.logits.append(out.copy())
        return out
