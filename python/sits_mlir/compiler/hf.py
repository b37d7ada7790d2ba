"""Hugging Face decoders to ONNX, with their KV cache.

`sits_mlir.compile("path/to/hf-model", kv_cache="paged")` exports the
folder's causal LM here first (torch and transformers: `pip install
'sits-mlir[hf]'`), the way deployment exports decoders: one graph for
prefill and decode alike, taking `input_ids` [batch, seq], `position_ids`
[batch, seq] and the past K/V of every layer, `past_key_<l>` /
`past_value_<l>` [batch, kv_heads, past, head_dim], and returning `logits`
[batch, seq, vocab] and `present_key_<l>` / `present_value_<l>` [batch,
kv_heads, past + seq, head_dim] (the signature sits_mlir.runtime.decoder
and sits-runtime serve). Attention is the eager MatMul/Softmax form, with no
attention-mask input: each sequence runs on its own (no padding), and the
paged KV cache (sits-page-kv-cache) takes over the masking.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from ..errors import CompileError

__all__ = ["decoder_geometry", "export_decoder", "export_folder", "is_model_folder"]


def is_model_folder(path: Any) -> bool:
    """Whether the model `path` names is a directory, which compile() takes
    for a Hugging Face model folder."""
    return isinstance(path, (str, os.PathLike)) and os.path.isdir(path)


def _require():
    """(torch, transformers), or a CompileError naming the extra."""
    try:
        import torch
        import transformers
    except ImportError as e:
        raise CompileError(f"compiling a Hugging Face model folder exports it with torch and "
                           f"transformers, which are not installed ({e.name} is missing): "
                           "pip install 'sits-mlir[hf]'") from None
    return torch, transformers


def decoder_geometry(config) -> tuple[int, int, int]:
    """(layers, K/V heads, head size) of a `transformers` decoder config."""
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return int(layers), int(kv_heads), int(head_dim)


def export_decoder(model, path: str | os.PathLike, layers: int, kv_heads: int, head_dim: int,
                   dtype: str = "float32") -> None:
    """Exports a `transformers` decoder (a causal LM module, with eager
    attention) as one step graph to `path`: inputs `input_ids`,
    `position_ids`, `past_{key,value}_<i>` (of `dtype`, the model's);
    outputs `logits`, `present_{key,value}_<i>`. Tracing changes the module:
    pass a copy of one that is used afterwards."""
    torch, transformers = _require()

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, position_ids, *past):
            cache = transformers.DynamicCache()
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(input_ids=input_ids, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
            flat = []
            for layer in out.past_key_values.layers[:layers]:
                flat += [layer.keys, layer.values]
            return (out.logits, *flat)

    # Example extents that differ from each other, so that tracing keeps
    # batch, new tokens and past apart.
    b, t, p = 1, 3, 2
    ids = torch.zeros((b, t), dtype=torch.int64)
    pos = torch.arange(p, p + t).unsqueeze(0)
    past = [torch.zeros(b, kv_heads, p, head_dim, dtype=getattr(torch, dtype))
            for _ in range(2 * layers)]
    names = ["input_ids", "position_ids"] + [
        f"past_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    outs = ["logits"] + [f"present_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "position_ids": {0: "batch", 1: "seq"},
               "logits": {0: "batch", 1: "seq"}}
    for n in names[2:]:
        dynamic[n] = {0: "batch", 2: "past"}
    for n in outs[1:]:
        dynamic[n] = {0: "batch", 2: "total"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Step(model), (ids, pos, *past), os.fspath(path), input_names=names,
                          output_names=outs, dynamic_axes=dynamic, opset_version=17,
                          dynamo=False)


def export_folder(folder: str | os.PathLike, path: str | os.PathLike) -> dict:
    """Loads the causal LM of a Hugging Face model folder (config.json and
    its weights; offline, no remote code) in float32, the KV pool's type,
    and exports it to `path` (export_decoder). Returns {"layers",
    "kv_heads", "head_dim", "vocab"}. CompileError when torch or
    transformers are missing or the folder holds no causal LM they load."""
    folder = os.fspath(folder)
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise CompileError(f"{folder}: not a Hugging Face model folder (no config.json)")
    torch, transformers = _require()
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, attn_implementation="eager", local_files_only=True,
            trust_remote_code=False)
    except (OSError, ValueError, KeyError) as e:
        raise CompileError(f"{folder}: transformers cannot load a causal LM from it: {e}") \
            from None
    model.eval()
    layers, kv_heads, head_dim = decoder_geometry(model.config)
    export_decoder(model, path, layers, kv_heads, head_dim)
    return {"layers": layers, "kv_heads": kv_heads, "head_dim": head_dim,
            "vocab": int(model.config.get_text_config().vocab_size)}
