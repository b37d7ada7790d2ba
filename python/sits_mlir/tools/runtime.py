"""sits-runtime: serve a compiled decoder (.sitsm) with continuous batching
over the paged KV cache, and report how it went.

    sits-runtime --config model.sitsm --batch-size 8 --max-seq-len 2048 --prompts prompts.jsonl
    sits-runtime --config model.sitsm --synthetic 32 --prompt-len 128 --output-len 64 --seed 1
    sits-runtime serve --config model.sitsm --port 8000      # the OpenAI API: sits_mlir.serving

The model is a decoder exported with its KV cache, compiled with
`kv_cache="paged"` (its attention reads and writes the KV pool through the
block tables, the whole batch in one call; the block size is the model's) or
with the exported signature (`input_ids`, `position_ids`,
`past_key_<l>`/`past_value_<l>` -> `logits`, `present_key_<l>`/
`present_value_<l>`: each sequence's past is copied out of the pool and back,
one sequence at a time). Its layers, K/V heads and head size are read from
the signature. Each line of the prompts file is a JSON
object: `prompt_ids` (token ids) or, when the artifact bundles a tokenizer
(sits-compile of a Hugging Face model folder, or --tokenizer), `prompt`
(text: encoded with the model's special tokens, generation stops at the
model's EOS ids, and the report has each sample's decoded `text`); and
optionally `max_new_tokens`, `n`, `temperature`, `top_k`, `top_p`, `seed`,
`stop_token`. A line that is
not such a request (or that the pool can never hold) fails that request
alone: the others are served, and the report and the exit status (1) say
which failed and why. The synthetic
workload draws prompt and output lengths uniformly within ±50% of
`--prompt-len`/`--output-len` and random tokens, from `--seed`; with
`--shared-prefix K` every prompt starts with the same K tokens.

The report gives time to first token and per output token, tokens/s, KV
utilization, `waste_pct` (slots allocated but not filled, spec §4.10),
the peak KV memory against reserving `--max-seq-len` tokens for every
sequence of a batch, and the prefix-cache hit rate. `--json FILE` writes it,
with every request's tokens, as JSON.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from typing import Sequence

import numpy as np

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sits-runtime",
        description="Serve a compiled decoder with continuous batching over the paged KV cache.",
        epilog="`sits-runtime serve --config model.sitsm --port 8000` serves it over the "
               "OpenAI HTTP API instead (`sits-runtime serve --help`).")
    p.add_argument("--config", required=True, metavar="SITSM",
                   help="the compiled decoder (.sitsm)")
    p.add_argument("--batch-size", type=int, default=8, metavar="N",
                   help="sequences per step (default: 8)")
    p.add_argument("--max-seq-len", type=int, default=2048, metavar="N",
                   help="longest sequence, prompt and output (default: 2048)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompts", metavar="JSONL", help="requests, one JSON object per line")
    src.add_argument("--synthetic", type=int, metavar="N", help="N synthetic requests")
    p.add_argument("--prompt-len", type=int, default=64, metavar="N",
                   help="synthetic: mean prompt length (default: 64)")
    p.add_argument("--output-len", type=int, default=64, metavar="N",
                   help="synthetic, and requests without max_new_tokens: mean output "
                        "length (default: 64)")
    p.add_argument("--shared-prefix", type=int, default=0, metavar="N",
                   help="synthetic: tokens every prompt starts with (default: 0)")
    p.add_argument("--seed", type=int, default=0, help="synthetic workload and sampling seed")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="default sampling temperature (default: 0, greedy)")
    p.add_argument("--top-k", type=int, default=0, help="default top-k (default: 0, off)")
    p.add_argument("--top-p", type=float, default=1.0, help="default top-p (default: 1, off)")
    add_pool_arguments(p)
    p.add_argument("--json", metavar="FILE", help="write the report and the tokens as JSON")
    return p


def add_pool_arguments(p: argparse.ArgumentParser) -> None:
    """The KV pool's, the engine's and the artifact trust options, which the
    batch CLI and `sits-runtime serve` share (read by `pool_config`)."""
    p.add_argument("--block-size", type=int, metavar="N",
                   help="tokens per KV block (default: the paged model's, or 16)")
    p.add_argument("--num-blocks", type=int, metavar="N",
                   help="KV blocks (default: enough for --batch-size sequences of "
                        "--max-seq-len tokens)")
    p.add_argument("--host-blocks", type=int, default=0, metavar="N",
                   help="host-tier KV blocks for swapping (default: 0)")
    p.add_argument("--preemption", choices=("recompute", "swap"), default="recompute",
                   help="when blocks run out (default: recompute)")
    p.add_argument("--no-prefix-caching", action="store_true",
                   help="do not share the KV of common prompt prefixes")
    p.add_argument("--kv-budget", type=int, metavar="N",
                   help="token eviction: after each step a sequence holding more than N "
                        "tokens in the KV pool drops whole blocks (default: none)")
    p.add_argument("--kv-eviction", choices=("attention", "window"), default="attention",
                   help="which blocks go over the budget: the least attended (H2O/SnapKV; "
                        "the default) or the oldest after the sinks (StreamingLLM)")
    p.add_argument("--kv-sink-tokens", type=int, default=4, metavar="N",
                   help="first tokens never evicted (attention sinks; default: 4)")
    p.add_argument("--threads", type=int, metavar="N", help="worker threads")
    p.add_argument("--device", default="auto", metavar="URI",
                   help="where the model runs: cpu, cuda:N or hip:N (default: auto, the "
                        "first GPU of the artifact's kind when it was compiled for one, else "
                        "cpu); a paged model on a GPU keeps its KV pool there")
    p.add_argument("--trusted-key", action="append", metavar="PUB",
                   help="require a signature by this Ed25519 public key (PEM; repeatable; "
                        "default: $SITS_TRUSTED_KEYS)")


#: A paged model's kv_pool element type → the KV pool's (dtype,
#: quantization).
_KV_DTYPES = {"f32": ("f32", "none"), "f16": ("f16", "none"), "bf16": ("bf16", "none"),
              "i8": ("int8", "per_token_head"), "f8e4m3fn": ("fp8_e4m3", "per_token_head")}


def _kivi_geometry(model) -> dict | None:
    """The `kivi` entry of a paged model's kv_pool argument in its manifest
    (bits, layers, kv_heads, block_size, head_dim), None for other pools."""
    manifest = getattr(model, "manifest", None) or {}
    for entry in manifest.get("entry_points", []):
        for arg in entry.get("args", []):
            if arg.get("name") == "kv_pool" and isinstance(arg.get("kivi"), dict):
                return arg["kivi"]
    return None


def decoder_geometry(model) -> dict:
    """Layers, K/V heads, head size and vocabulary of a compiled decoder with
    the exported KV-cache signature; ValueError naming what is missing."""
    inputs = {s.name: s for s in model.inputs}
    logits = model.outputs[0]
    if logits.rank != 3 or logits.shape[2] is None:
        raise ValueError(f"output 0 must be the logits [batch, seq, vocab], got {logits}")
    if "kv_pool" in inputs:  # compiled with kv_cache="paged"
        kivi = _kivi_geometry(model)
        if kivi is not None:  # [blocks, bytes] of KIVI blocks: the manifest has the rest
            geometry = {"layers": kivi["layers"], "kv_heads": kivi["kv_heads"],
                        "head_dim": kivi["head_dim"], "vocab": logits.shape[2],
                        "block_size": kivi["block_size"], "paged": True,
                        "kv_dtype": f"int{kivi['bits']}",
                        "kv_quantization": "per_token_group" if kivi.get("keys") == "token"
                        else "kivi"}
            if kivi.get("widths"):  # kv_dtype="auto": a width per (layer, kv head)
                geometry["kivi_widths"] = list(kivi["widths"])
            return geometry
        pool = inputs["kv_pool"].shape  # [blocks, layers, 2, kv_heads, block, head_dim]
        # A quantized pool's rows are the head's codes and a 4-byte f32
        # scale (kv_dtype="int8"/"fp8": the allocator's per_token_head
        # quantization).
        dtype, quantization = _KV_DTYPES.get(inputs["kv_pool"].dtype, ("f32", "none"))
        return {"layers": pool[1], "kv_heads": pool[3],
                "head_dim": pool[5] - (4 if quantization != "none" else 0),
                "vocab": logits.shape[2], "block_size": pool[4], "paged": True,
                "kv_dtype": dtype, "kv_quantization": quantization}
    for name in ("input_ids", "position_ids", "past_key_0", "past_value_0"):
        if name not in inputs:
            raise ValueError(f"the model has no input '{name}': sits-runtime serves decoders "
                             "exported with their KV cache (input_ids, position_ids, "
                             "past_key_<l>, past_value_<l>)")
    layers = 0
    while f"past_key_{layers}" in inputs and f"past_value_{layers}" in inputs:
        layers += 1
    past = inputs["past_key_0"].shape
    if len(past) != 4 or past[1] is None or past[3] is None:
        raise ValueError(f"past_key_0 must be [batch, kv_heads, past, head_dim] with static "
                         f"heads and head size, got {inputs['past_key_0']}")
    return {"layers": layers, "kv_heads": past[1], "head_dim": past[3], "vocab": logits.shape[2],
            "block_size": None, "paged": False, "kv_dtype": "f32", "kv_quantization": "none"}


def _int(r: dict, key: str, low: int, high: int, default=None):
    """r[key] as an int in [low, high) (JSON integers only: no floats,
    booleans or strings); `default` when absent or null."""
    v = r.get(key)
    if v is None:
        v = default
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"'{key}' must be an integer, got {json.dumps(v)}")
    if not low <= v < high:
        raise ValueError(f"'{key}' = {v} must be in [{low}, {high})")
    return v


def _float(r: dict, key: str, default: float) -> float:
    v = r.get(key)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"'{key}' must be a finite number, got {json.dumps(v)}")
    return float(v)


def _text_codec(codec):
    """The artifact's TextCodec (`codec`: one, None, or a callable giving
    one or None); ValueError when there is none."""
    codec = codec() if callable(codec) else codec
    if codec is None:
        raise ValueError("'prompt' is text and the model bundles no tokenizer: give "
                         "'prompt_ids', or compile the model with its tokenizer (sits-compile "
                         "of a Hugging Face model folder, or --tokenizer DIR)")
    return codec


def _request(r, args, vocab: int, codec=None) -> dict:
    """One request's fields, checked (ValueError naming the field): what
    the engine is then given can only fail for capacity. A text `prompt` is
    encoded with `codec` (see _text_codec) and stops at its EOS ids."""
    if not isinstance(r, dict):
        raise ValueError(f"expected a JSON object with 'prompt_ids', got {json.dumps(r)[:80]}")
    text = r.get("prompt")
    stops = []
    if "prompt" in r and "prompt_ids" in r:
        raise ValueError("give 'prompt' (text) or 'prompt_ids' (token ids), not both")
    if isinstance(text, str):
        codec = _text_codec(codec)
        ids = codec.encode(text)
        if not ids:
            raise ValueError("'prompt' encodes to no tokens")
        stops = list(codec.eos_token_ids)
    else:
        ids = r.get("prompt_ids")
        if not isinstance(ids, list) or not ids:
            raise ValueError("expected a JSON object with 'prompt_ids' (a non-empty list of "
                             "token ids) or 'prompt' (text)")
        text = None
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab:
            what = "'prompt' encodes to token id" if text is not None else f"prompt_ids[{i}] ="
            raise ValueError(f"{what} {json.dumps(t)}: token ids must be integers "
                             f"in [0, {vocab})")
    stop_token = _int(r, "stop_token", 0, vocab)
    if stop_token is not None:
        stops.append(stop_token)
    return {"prompt_ids": ids, "prompt": text, "stop_tokens": sorted(set(stops)),
            "max_new_tokens": _int(r, "max_new_tokens", 1, 1 << 31, args.output_len),
            "n": _int(r, "n", 1, args.batch_size + 1, 1),
            "temperature": _float(r, "temperature", args.temperature),
            "top_k": _int(r, "top_k", 0, 1 << 31, args.top_k),
            "top_p": _float(r, "top_p", args.top_p),
            "seed": _int(r, "seed", 0, 1 << 64),
            "stop_token": stop_token}


def parse_request(line: str, args, vocab: int, codec=None) -> dict:
    """One line of a prompts file as a checked request (`_request`, text
    prompts encoded with `codec`); a ValueError for anything else, malformed
    or too deeply nested JSON included."""
    try:
        r = json.loads(line)
    except RecursionError:  # nested deeper than the parser goes
        raise ValueError("the JSON is nested too deeply") from None
    return _request(r, args, vocab, codec)


def _requests(args, vocab: int, codec=None) -> list:
    """The requests: checked dicts, or for each bad one of a prompts file
    the ValueError saying why (the others are still served)."""
    if args.prompts:
        out = []
        with open(args.prompts) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    out.append(parse_request(line, args, vocab, codec))
                except ValueError as e:
                    out.append(ValueError(f"{args.prompts}:{number}: {e}"))
        if not out:
            raise ValueError(f"{args.prompts}: no requests")
        return out
    rng = np.random.default_rng(args.seed)
    prefix = rng.integers(0, vocab, args.shared_prefix).tolist()

    def length(mean):
        return int(rng.integers(max(1, mean // 2), max(2, mean + mean // 2 + 1)))
    return [_request({"prompt_ids": prefix + rng.integers(0, vocab, length(args.prompt_len)).tolist(),
                      "max_new_tokens": length(args.output_len)}, args, vocab)
            for _ in range(args.synthetic)]


def _available_bytes() -> int | None:
    """Memory the system can still give (MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def pool_config(args, geometry: dict):
    """The KV pool the options ask for, for a decoder of `geometry`
    (`decoder_geometry`); ValueError when the block size contradicts a
    paged model's."""
    from ..runtime import kv

    bs = args.block_size or geometry["block_size"] or 16
    if geometry["paged"] and bs != geometry["block_size"]:
        raise ValueError(f"--block-size {bs} differs from the model's KV block size "
                         f"{geometry['block_size']} (it was compiled with kv_block_size="
                         f"{geometry['block_size']})")
    num_blocks = args.num_blocks or (args.batch_size * math.ceil(args.max_seq_len / bs) + 1)
    return kv.PoolConfig(num_blocks=num_blocks, block_size=bs, num_layers=geometry["layers"],
                         num_kv_heads=geometry["kv_heads"], head_dim=geometry["head_dim"],
                         dtype=geometry.get("kv_dtype", "f32"),
                         quantization=geometry.get("kv_quantization", "none"),
                         kivi_widths=geometry.get("kivi_widths", []),
                         max_seq_len=args.max_seq_len,
                         enable_prefix_caching=not args.no_prefix_caching,
                         num_host_blocks=args.host_blocks)


def model_device(path, device: str) -> str:
    """`--device`: "auto" runs an artifact compiled for a GPU on the first
    device of its kind ("cuda:0", "hip:0") and any other on the CPU."""
    if device != "auto":
        return device
    from ..runtime import read_artifact

    kind = (read_artifact(path, verify="metadata").manifest.get("device") or {}).get("kind")
    return f"{kind}:0" if kind else "cpu"


def eviction_options(args) -> dict:
    """`Engine.add_request`'s token eviction keywords for the options of
    `add_pool_arguments` (none without --kv-budget)."""
    budget = getattr(args, "kv_budget", None)
    if budget is None:
        return {}
    return {"kv_budget": budget, "eviction": args.kv_eviction,
            "sink_tokens": args.kv_sink_tokens}


def fitting_pool_config(args, geometry: dict, device: str = "cpu"):
    """`pool_config`, checked against the memory left (MemAvailable): a
    pool past it is refused with a ValueError before anything is
    allocated, rather than left for the OOM killer to end."""
    config = pool_config(args, geometry)
    sizes = config.validate()
    # The memory the blocks can fill (a KIVI pool reserves more address
    # space, for the tails of blocks being filled, than it ever commits).
    # (The device tier of a model on a GPU is that GPU's memory.)
    device_blocks = config.num_blocks if device == "cpu" else 0
    pool_bytes = sizes["bytes_per_block"] * (device_blocks + args.host_blocks)
    available = _available_bytes()
    if available is not None and pool_bytes > available:
        raise ValueError(f"the KV pool would take {pool_bytes / (1 << 30):.1f} GiB "
                         f"({config.num_blocks} device + {args.host_blocks} host blocks of "
                         f"{sizes['bytes_per_block']} bytes), more than the "
                         f"{available / (1 << 30):.1f} GiB of memory available: lower "
                         "--batch-size, --max-seq-len or --num-blocks")
    return config


def run(args) -> dict:
    from ..errors import SitsError
    from ..runtime import kv
    from ..runtime.decoder import PagedRunner, PastKVRunner
    from ..runtime.engine import Engine, SamplingParams
    from ..runtime.model import load

    model = load(args.config, device=model_device(args.config, args.device),
                 trusted_keys=args.trusted_key)
    geometry = decoder_geometry(model)

    @functools.cache
    def codec():
        """The bundled tokenizer, read at the first text prompt (id prompts
        need neither it nor the 'tokenizers' package)."""
        from ..runtime.text import TextCodec

        try:
            return TextCodec.from_artifact(model)
        except ImportError as e:
            raise ValueError(str(e)) from None

    requests = _requests(args, geometry["vocab"], codec)
    config = fitting_pool_config(args, geometry, model.device)
    num_blocks, bs = config.num_blocks, config.block_size
    pool = kv.KVAllocator(config)
    runner_type = PagedRunner if geometry["paged"] else PastKVRunner
    # A paged model on a GPU reads its pool in place there.
    memory = kv.KVMemory(pool, device=model.device if geometry["paged"] else "cpu")
    engine = Engine(pool, runner_type(model, memory),
                    max_batch_size=args.batch_size, seed=args.seed, preemption=args.preemption)
    eviction = eviction_options(args)
    ids, refused = [], {}  # refused: request index -> why
    for index, r in enumerate(requests):
        if isinstance(r, Exception):
            refused[index] = str(r)
            continue
        try:
            sampling = SamplingParams(r["temperature"], r["top_k"], r["top_p"], r["seed"])
            ids.append((index, engine.add_request(r["prompt_ids"], r["max_new_tokens"],
                                                  sampling=sampling, n=r["n"],
                                                  stop_token=r["stop_tokens"], **eviction)))
        except (ValueError, SitsError) as e:  # out of range for the pool or model
            refused[index] = f"request {index}: {e}"
    # Step by step, sampling the pool between steps: its waste and peak.
    start = time.perf_counter()
    waste, peak_blocks = [], 0
    gpu_before = model.gpu_stats()
    while engine.has_unfinished:
        engine.step()
        stats = pool.stats()
        peak_blocks = max(peak_blocks, stats.active_blocks)
        if stats.active_blocks:
            waste.append(stats.waste_pct)
    wall = time.perf_counter() - start
    m = engine.metrics
    results = [engine.result(i) for _, i in ids]
    served = [requests[index] for index, _ in ids]
    bytes_per_block = pool.geometry["bytes_per_block"]
    bytes_per_token = bytes_per_block / bs
    stats = pool.stats()
    prompt_tokens = sum(len(r["prompt_ids"]) for r in served)
    output_tokens = sum(len(s.tokens) for r in results for s in r.samples)
    gpu = {k: v - gpu_before[k] for k, v in model.gpu_stats().items()}
    return {
        "model": args.config, "device": model.device, **geometry,
        "requests": len(requests),
        "failed": len(refused) + sum(r.error is not None for r in results),
        "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
        "wall_s": wall, "tokens_per_s": output_tokens / wall if wall > 0 else 0.0,
        "ttft_ms": 1e3 * m["mean_ttft_s"], "tpot_ms": 1e3 * m["mean_tpot_s"],
        "steps": m["steps"], "preemptions": m["preemptions"],
        "kv_budget": eviction.get("kv_budget"), "kv_eviction": eviction.get("eviction"),
        "evicted_tokens": m["evicted_tokens"],
        "prefix_hit_rate": m["prefix_cache_hit_tokens"] / prompt_tokens if prompt_tokens else 0.0,
        "kv_utilization_peak": m["kv_utilization_peak"],
        "kv_utilization_mean": m["kv_utilization_mean"],
        "waste_pct": float(np.mean(waste)) if waste else 0.0,
        # Bytes a token takes in the pool (every layer, K and V, scales
        # included; KIVI: its quantized blocks), and how many times fewer
        # than f32 and f16 rows of the same heads.
        "kv_bytes_per_token": bytes_per_token,
        "kv_compression_vs_f32": raw_bytes_per_token(geometry, 4) / bytes_per_token,
        "kv_compression_vs_f16": raw_bytes_per_token(geometry, 2) / bytes_per_token,
        "kv_peak_bytes": int(peak_blocks * bytes_per_block),
        "kv_contiguous_bytes": int(args.batch_size * args.max_seq_len * bytes_per_token),
        "kv_blocks": num_blocks, "block_size": bs,
        "kv_cache": "paged" if geometry["paged"] else "contiguous past",
        "cached_blocks_at_end": stats.cached_blocks,
        # On a GPU, what the model calls cost the host: a decode step's
        # calls are recorded once and replayed (CompiledModel.gpu_stats).
        "gpu": {"calls": gpu["calls"], "replayed": gpu["replays"],
                "kernels_per_step": gpu["kernels"] / m["steps"],
                "launches_per_step": gpu["launches"] / m["steps"],
                "host_ms_per_step": 1e3 * gpu["host_seconds"] / m["steps"]}
        if gpu["calls"] and m["steps"] else None,
        "outputs": sorted(
            [{"request": index, "id": r.id, "error": str(r.error) if r.error else None,
              "samples": [_sample(s, requests[index], codec) for s in r.samples]}
             for (index, _), r in zip(ids, results)] +
            [{"request": index, "id": None, "error": why, "samples": []}
             for index, why in refused.items()], key=lambda o: o["request"]),
    }


def raw_bytes_per_token(geometry: dict, element_bytes: int) -> int:
    """K and V of every layer and K/V head of one token, `element_bytes`
    an element and nothing else."""
    return 2 * geometry["layers"] * geometry["kv_heads"] * geometry["head_dim"] * element_bytes


def _sample(s, request: dict, codec) -> dict:
    """A sample of the report: its tokens and finish reason, and for a text
    prompt its text (without the stop token that ended it)."""
    out = {"tokens": s.tokens, "finish_reason": s.finish_reason}
    if request["prompt"] is not None:
        tokens = s.tokens
        if s.finish_reason == "stop" and tokens and tokens[-1] in request["stop_tokens"]:
            tokens = tokens[:-1]
        out["text"] = codec().decode(tokens)
    return out


def _print(report: dict, out) -> None:
    mib = 1 << 20
    print(f"model {report['model']} on {report['device']}: {report['layers']} layers, "
          f"{report['kv_heads']} KV heads "
          f"x {report['head_dim']}, vocabulary {report['vocab']}, KV cache "
          f"{report['kv_cache']} (blocks of {report['block_size']})", file=out)
    print(f"requests {report['requests']} ({report['failed']} failed), prompt tokens "
          f"{report['prompt_tokens']}, output tokens {report['output_tokens']}, "
          f"{report['steps']} steps in {report['wall_s']:.2f} s", file=out)
    print(f"time to first token {report['ttft_ms']:.1f} ms, per output token "
          f"{report['tpot_ms']:.2f} ms, {report['tokens_per_s']:.1f} tokens/s", file=out)
    print(f"KV utilization peak {100 * report['kv_utilization_peak']:.1f}%, mean "
          f"{100 * report['kv_utilization_mean']:.1f}%, waste_pct {report['waste_pct']:.2f}%, "
          f"peak KV {report['kv_peak_bytes'] / mib:.2f} MiB vs "
          f"{report['kv_contiguous_bytes'] / mib:.2f} MiB contiguous", file=out)
    print(f"KV {report['kv_dtype']} ({report['kv_quantization']}): "
          f"{report['kv_bytes_per_token']:.0f} bytes per token, "
          f"{report['kv_compression_vs_f32']:.2f}x less than f32, "
          f"{report['kv_compression_vs_f16']:.2f}x less than f16", file=out)
    print(f"prefix hit rate {100 * report['prefix_hit_rate']:.1f}%, preemptions "
          f"{report['preemptions']}", file=out)
    if report["gpu"]:
        g = report["gpu"]
        print(f"GPU: {g['replayed']} of {g['calls']} calls replayed from recordings; per step "
              f"{g['kernels_per_step']:.0f} kernels in {g['launches_per_step']:.1f} launches, "
              f"{g['host_ms_per_step']:.3f} ms on the host", file=out)
    if report["kv_budget"] is not None:
        print(f"token eviction ({report['kv_eviction']}) at {report['kv_budget']} tokens per "
              f"sequence: {report['evicted_tokens']} tokens evicted", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:  # the OpenAI-compatible server (sits_mlir.serving)
        from ..serving.server import main as serve_main

        return serve_main(argv[1:])
    args = _parser().parse_args(argv)
    for name in ("batch_size", "max_seq_len", "block_size", "prompt_len", "output_len",
                 "num_blocks"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            print(f"sits-runtime: error: --{name.replace('_', '-')} must be positive",
                  file=sys.stderr)
            return 2
    if args.synthetic is not None and args.synthetic <= 0:
        print("sits-runtime: error: --synthetic must be positive", file=sys.stderr)
        return 2
    for name in ("host_blocks", "shared_prefix", "top_k"):
        if getattr(args, name) < 0:
            print(f"sits-runtime: error: --{name.replace('_', '-')} must be >= 0",
                  file=sys.stderr)
            return 2
    if not 0 <= args.seed < 1 << 64:
        print("sits-runtime: error: --seed must be in [0, 2^64)", file=sys.stderr)
        return 2
    if args.threads:
        import os
        os.environ["SITS_NUM_THREADS"] = str(args.threads)
    from ..errors import SitsError

    try:
        report = run(args)
    except (OSError, ValueError, SitsError) as e:
        print(f"sits-runtime: error: {e}", file=sys.stderr)
        return 1
    _print(report, sys.stdout)
    for o in report["outputs"]:
        if o["error"]:
            print(f"sits-runtime: request {o['request']} failed: {o['error']}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if report["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
