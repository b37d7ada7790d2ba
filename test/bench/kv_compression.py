#!/usr/bin/env python3
"""KV-cache compression: memory and quality against the uncompressed pool.

Llama-shaped decoders are built from `transformers` configs (seeded random
weights, no download), exported with their KV cache and compiled with
``kv_cache="paged"``, once with the model's f32 pool and once per
compressed KV type (``kv_dtype``). Each prompt of `--prompt-len` random
tokens is prefilled, then `--steps` decode steps run one token at a time,
every model fed the f32 model's greedy token (teacher forcing, so that all
runs see the same contexts). Reported per KV type, against the f32 run:

* KV bytes per token, from the allocator's geometry (scales included; for
  KIVI blocks their quantized part, without the f32 tail each sequence
  uses for the block it is filling), and the reduction against an f32 and
  an f16 pool of the same shape;
* the worst logit error, relative to the standard deviation of the f32
  logits of that step (max over steps and prompts);
* the mean KL divergence of the next-token distribution, KL(f32 || ours),
  over every decode step (and the prefill's last position).

Random weights have no real redundancy: the ``outliers`` configuration
scales a few key channels of every layer (pairs of rotary channels, as
real models' keys show), where per-token scales lose the most.

Token eviction (`--eviction-budget`, a fraction of prompt + steps) runs
through the engine: each prompt is generated with the f32 model's greedy
tokens forced (teacher forcing) and the logits kept, once without eviction
and once per policy ("window": attention sinks + recent tokens;
"attention": the blocks that received the least attention weight go
first), also on a KIVI int4 pool. Its KL is over the decode steps only
(the prefill, before any eviction, is the same), and its memory is the KV
bytes per token of context at the end (the pool's bytes per token times
the share of the context kept).

    python test/bench/kv_compression.py                   # the 55 M shape
    python test/bench/kv_compression.py --shape custom --prompt-len 128

A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import copy
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compile_scale  # noqa: E402  (shapes; the ONNX export)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: Compressed KV types (compile's kv_dtype) and the allocator's fields.
KV_TYPES = {"int8": dict(dtype="int8", quantization="per_token_head"),
            "fp8": dict(dtype="fp8_e4m3", quantization="per_token_head"),
            "int4": dict(dtype="int4", quantization="kivi"),
            "int2": dict(dtype="int2", quantization="kivi"),
            # Keys per token like values: the plain 4-/2-bit baseline.
            "int4-token": dict(dtype="int4", quantization="per_token_group"),
            "int2-token": dict(dtype="int2", quantization="per_token_group"),
            # A width per (layer, kv head), chosen by compile (the widths
            # come from the model's manifest).
            "auto": dict(dtype="int4", quantization="kivi")}


def block_size(kv_type: str | None) -> int:
    """The block size compile() gives a pool of this type by default."""
    from sits_mlir.compiler.driver import default_kv_block_size

    return default_kv_block_size(kv_type)


def build(shape: dict, outliers: bool, seed: int, path: str) -> None:
    """Exports a Llama decoder of `shape` to `path`; with `outliers`, four
    rotary channel pairs of every head's keys are scaled by 8 to 16."""
    import torch
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"], hidden_size=shape["hidden"],
        intermediate_size=shape["ffn"] or 2 * shape["hidden"], vocab_size=shape["vocab"],
        max_position_embeddings=4096, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(cfg).eval()
    head_dim = shape["hidden"] // shape["heads"]
    if outliers:
        gen = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for layer in model.model.layers:
                weight = layer.self_attn.k_proj.weight  # [kv_heads * D, hidden]
                for h in range(shape["kv_heads"]):
                    channels = torch.randperm(head_dim // 2, generator=gen)[:4]
                    gains = 8 + 8 * torch.rand(4, generator=gen)
                    for c, g in zip(channels.tolist(), gains.tolist()):
                        for pair in (c, c + head_dim // 2):  # rotated together
                            weight[h * head_dim + pair] *= g
    compile_scale.hf_decoders.export(copy.deepcopy(model), path, shape["layers"],
                                     shape["kv_heads"], head_dim)


class Run:
    """One compiled paged decoder and its pool, fed step by step."""

    def __init__(self, model, shape: dict, tokens: int, fields: dict, block: int):
        from sits_mlir.runtime import kv

        head_dim = shape["hidden"] // shape["heads"]
        self.model = model
        self.alloc = kv.KVAllocator(num_blocks=tokens // block + 2, block_size=block,
                                    num_layers=shape["layers"],
                                    num_kv_heads=shape["kv_heads"], head_dim=head_dim,
                                    max_seq_len=tokens + block, enable_prefix_caching=False,
                                    **fields)
        self.memory = kv.KVMemory(self.alloc)
        self.bytes_per_token = self.alloc.geometry["bytes_per_block"] / block
        self.started = False

    def step(self, ids) -> np.ndarray:
        """Logits [vocab] after feeding `ids` (the prompt, then one token)."""
        ids = np.asarray(ids, np.int64)
        if not self.started:
            self.alloc.add_sequence(0, num_tokens=len(ids))
            self.started = True
            start = 0
        else:
            start = self.alloc.sequence_info(0)["num_tokens"]
            self.alloc.append(0, num_tokens=len(ids))
        n = start + len(ids)
        table = self.alloc.block_table(0)[None].astype(np.int32)
        slots = self.alloc.slot_mapping(0, start, len(ids))[None].astype(np.int64)
        feeds = {"input_ids": ids[None], "position_ids": np.arange(start, n)[None],
                 "kv_pool": self.memory.device, "block_tables": table,
                 "slot_mapping": slots, "context_lens": np.array([n], np.int32)}
        names = {s.name for s in self.model.default_entry.inputs}
        logits = self.model.run(**{k: v for k, v in feeds.items() if k in names})[0]
        return np.asarray(logits, np.float32)[0, -1]


def pool_fields(model, kv_type: str | None) -> dict:
    """The allocator's fields for a model compiled with `kv_type`."""
    from sits_mlir.tools.runtime import decoder_geometry

    fields = dict(KV_TYPES.get(kv_type, {"dtype": "f32"}))
    widths = decoder_geometry(model).get("kivi_widths")
    if widths:
        fields["kivi_widths"] = widths
    return fields


def kl(p_logits: np.ndarray, q_logits: np.ndarray) -> float:
    """KL(softmax(p) || softmax(q)) in float64."""
    p = p_logits.astype(np.float64) - p_logits.max()
    q = q_logits.astype(np.float64) - q_logits.max()
    lp = p - np.log(np.exp(p).sum())
    lq = q - np.log(np.exp(q).sum())
    return float((np.exp(lp) * (lp - lq)).sum())


#: Eviction runs: (label, kv_dtype, policy).
EVICTIONS = (("f32 + window", None, "window"), ("f32 + attention", None, "attention"),
             ("int4 + attention", "int4", "attention"))


def generate(model, prompt, steps: int, forced, block: int, tokens: int, **eviction):
    """The engine's logits rows [steps + 1, vocab] for `prompt` (greedy, the
    `forced` tokens emitted first), and the share of the context the
    sequence kept in the pool at the end."""
    from sits_mlir.runtime import kv
    from sits_mlir.runtime.decoder import PagedRunner
    from sits_mlir.runtime.engine import GREEDY, Engine
    from sits_mlir.tools.runtime import decoder_geometry

    g = decoder_geometry(model)
    alloc = kv.KVAllocator(num_blocks=tokens // block + 4, block_size=block,
                           num_layers=g["layers"], num_kv_heads=g["kv_heads"],
                           head_dim=g["head_dim"], max_seq_len=tokens + block,
                           dtype=g["kv_dtype"], quantization=g["kv_quantization"])
    engine = Engine(alloc, PagedRunner(model, kv.KVMemory(alloc)), max_batch_size=1)
    rid = engine.add_request(prompt, steps + 1, sampling=GREEDY, forced_tokens=forced,
                             return_logits=True, **eviction)
    engine.run_until_done()
    result = engine.result(rid)
    if result.error is not None:
        raise result.error
    context = len(prompt) + steps
    return result.samples[0].logits, 1 - engine.metrics["evicted_tokens"] / context


def measure_eviction(models: dict, vocab: int, args) -> dict:
    """Per EVICTIONS label: the KL of each decode step against the f32 run
    without eviction, and the share of the context kept."""
    rng = np.random.default_rng(args.seed)
    tokens = args.prompt_len + args.steps
    budget = int(args.eviction_budget * tokens)
    rows = {label: {"kl": [], "kept": [], "err": 0.0} for label, _, _ in EVICTIONS}
    for _ in range(args.prompts):
        prompt = rng.integers(3, vocab, args.prompt_len).tolist()
        ref, _ = generate(models[None], prompt, args.steps, [], block_size(None), tokens)
        path = [int(t) for t in ref[:-1].argmax(-1)]
        for label, dtype, policy in EVICTIONS:
            logits, kept = generate(models[dtype], prompt, args.steps, path, block_size(dtype),
                                    tokens, kv_budget=budget, eviction=policy)
            rows[label]["kl"].extend(kl(a, b) for a, b in zip(ref[1:], logits[1:]))
            rows[label]["err"] = max(rows[label]["err"], max(
                float(np.abs(b - a).max() / a.std()) for a, b in zip(ref[1:], logits[1:])))
            rows[label]["kept"].append(kept)
    return rows


def measure(shape: dict, outliers: bool, args, work: str) -> dict:
    """Rows per KV type (and per eviction run) of one configuration."""
    import sits_mlir

    path = os.path.join(work, f"{'outliers' if outliers else 'plain'}.onnx")
    t0 = time.time()
    build(shape, outliers, args.seed, path)
    names = [None, *args.kv_types]
    if args.eviction_budget and "int4" not in names:
        names.append("int4")
    models = {}
    for name in names:
        out = os.path.join(work, f"{'outliers' if outliers else 'plain'}-{name or 'f32'}.sitsm")
        models[name] = sits_mlir.compile(path, "cpu", out, kv_cache="paged",
                                         kv_block_size=block_size(name), kv_dtype=name,
                                         kv_error_budget=args.kv_error_budget,
                                         threads=args.threads).load()
    print(f"  built and compiled in {time.time() - t0:.0f} s", file=sys.stderr)
    rng = np.random.default_rng(args.seed)
    tokens = args.prompt_len + args.steps
    rows = {name: {"err": 0.0, "kl": []} for name in args.kv_types}
    bytes_per_token = {}
    for _ in range(args.prompts):
        prompt = rng.integers(3, shape["vocab"], args.prompt_len)
        runs = {name: Run(models[name], shape, tokens, pool_fields(models[name], name),
                          block_size(name))
                for name in models}
        bytes_per_token = {name: r.bytes_per_token for name, r in runs.items()}
        feed = prompt
        for _step in range(args.steps + 1):
            ref = runs[None].step(feed)
            for name in args.kv_types:
                ours = runs[name].step(feed)
                rows[name]["err"] = max(rows[name]["err"],
                                        float(np.abs(ours - ref).max() / ref.std()))
                rows[name]["kl"].append(kl(ref, ours))
            feed = [int(ref.argmax())]
    head_dim = shape["hidden"] // shape["heads"]
    f16 = 2 * 2 * shape["layers"] * shape["kv_heads"] * head_dim
    result = {name: {"bytes_per_token": bytes_per_token[name],
                     "vs_f32": bytes_per_token[None] / bytes_per_token[name],
                     "vs_f16": f16 / bytes_per_token[name],
                     "worst_err_sigma": rows[name]["err"],
                     "mean_kl": float(np.mean(rows[name]["kl"]))}
              for name in args.kv_types}
    if args.eviction_budget:
        evicted = measure_eviction(models, shape["vocab"], args)
        for label, dtype, _ in EVICTIONS:
            r = evicted[label]
            per_token = bytes_per_token[dtype] * float(np.mean(r["kept"]))
            result[f"{label}, budget {args.eviction_budget:.0%}"] = {
                             "bytes_per_token": per_token,
                             "vs_f32": bytes_per_token[None] / per_token,
                             "vs_f16": f16 / per_token, "worst_err_sigma": r["err"],
                             "mean_kl": float(np.mean(r["kl"]))}
    return result

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=tuple(compile_scale.SHAPES), default="small")
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--steps", type=int, default=32, help="decode steps after the prefill")
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--kv-types", nargs="+", default=list(KV_TYPES), choices=tuple(KV_TYPES))
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kv-error-budget", type=float, default=0.2,
                   help="kv_dtype='auto': the mean relative K/V error allowed")
    p.add_argument("--eviction-budget", type=float, default=0.5,
                   help="token eviction runs at this share of prompt + steps (0: none)")
    p.add_argument("--workdir", help="where the models go (default: a temporary folder)")
    args = p.parse_args(argv)
    shape = compile_scale.SHAPES[args.shape]
    print(f"shape {args.shape}: {shape}; {args.prompts} prompts of {args.prompt_len} tokens, "
          f"{args.steps} decode steps", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or tmp
        os.makedirs(work, exist_ok=True)
        results = {}
        for outliers in (False, True):
            config = "outlier keys" if outliers else "plain"
            print(f"[{config}]", file=sys.stderr)
            results[config] = measure(shape, outliers, args, work)
    print("| model | KV type | KV bytes/token | less than f32 | less than f16 "
          "| worst logit error | mean KL |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for config, per_type in results.items():
        for name, r in per_type.items():
            print(f"| {config} | {name} | {r['bytes_per_token']:.0f} | {r['vs_f32']:.2f}x "
                  f"| {r['vs_f16']:.2f}x | {r['worst_err_sigma']:.4f} sigma "
                  f"| {r['mean_kl']:.2e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
