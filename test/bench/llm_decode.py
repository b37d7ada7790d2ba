#!/usr/bin/env python3
"""Decode throughput of an exported decoder (GPT-2 or Llama from a
`transformers` config, random weights) at batch 1 and batch 8, in one run:

* onnxruntime on the exported ONNX, contiguous past K/V (the peer);
* SITS, the compiled artifact in the same contiguous loop;
* SITS's generation engine over the paged KV pool (`sits_mlir.runtime.engine`
  with `PastKVRunner`), which gathers each sequence's past from its blocks
  every step.

Each batch decodes `--new-tokens` greedy tokens after a `--prompt-len`
prefill; decode tokens/s counts the decode steps only (engine: output tokens
after the first over the time after the last first token). Also prints the
peak KV memory of the paged pool against a contiguous `--max-seq-len`
reservation per sequence.

    PYTHONPATH=build/pip/python_packages python test/bench/llm_decode.py [--model llama]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python" / "llm"))


def _contiguous(run, dec, batch, prompt_len, new_tokens, rng):
    """Greedy decoding with contiguous past; returns decode seconds."""
    ids = rng.integers(0, dec.vocab, (batch, prompt_len)).astype(np.int64)
    past = [np.zeros((batch, dec.kv_heads, 0, dec.head_dim), np.float32)
            for _ in range(2 * dec.layers)]
    position = 0
    decode_s = 0.0
    for step in range(new_tokens + 1):
        feeds = {"input_ids": ids, "position_ids": np.broadcast_to(
            np.arange(position, position + ids.shape[1]), ids.shape).astype(np.int64).copy()}
        for i in range(dec.layers):
            feeds[f"past_key_{i}"], feeds[f"past_value_{i}"] = past[2 * i], past[2 * i + 1]
        start = time.perf_counter()
        logits, *past = run(feeds)
        if step > 0:
            decode_s += time.perf_counter() - start
        position += ids.shape[1]
        ids = logits[:, -1].argmax(-1).astype(np.int64)[:, None]
    return decode_s


def _engine(model, dec, batch, prompt_len, new_tokens, max_seq_len, rng):
    from sits_mlir.runtime import kv
    from sits_mlir.runtime.decoder import PastKVRunner
    from sits_mlir.runtime.engine import GREEDY, Engine

    pool = kv.KVAllocator(num_blocks=batch * (max_seq_len // 16) + 1, block_size=16,
                          num_layers=dec.layers, num_kv_heads=dec.kv_heads,
                          head_dim=dec.head_dim, dtype="f32", max_seq_len=max_seq_len)
    engine = Engine(pool, PastKVRunner(model, kv.KVMemory(pool)), max_batch_size=batch)
    for _ in range(batch):
        engine.add_request(rng.integers(0, dec.vocab, prompt_len).tolist(), new_tokens,
                           sampling=GREEDY)
    engine.step()  # every prefill (and first token)
    peak = 0
    start = time.perf_counter()
    while engine.has_unfinished:
        engine.step()
        peak = max(peak, pool.stats().active_blocks)
    return time.perf_counter() - start, peak * pool.geometry["bytes_per_block"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--max-seq-len", type=int, default=1024)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)

    import onnxruntime as ort

    import sits_mlir
    from hf_decoders import build

    out = tempfile.mkdtemp(prefix="sits-llm-bench-")
    dec = build(args.model, out, layers=args.layers, hidden=args.hidden, heads=args.heads,
                vocab=args.vocab, positions=args.max_seq_len)
    start = time.perf_counter()
    model = sits_mlir.compile(dec.path, "cpu", os.path.join(out, "model.sitsm"),
                              threads=args.threads).load()
    compile_s = time.perf_counter() - start
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    session = ort.InferenceSession(dec.path, so, providers=["CPUExecutionProvider"])

    print(f"{args.model}: {args.layers} layers, hidden {args.hidden}, {args.heads} heads "
          f"({dec.kv_heads} K/V), vocabulary {args.vocab}; prompt {args.prompt_len}, "
          f"{args.new_tokens} new tokens; {args.threads} threads; SITS compile {compile_s:.1f} s")
    print(f"{'batch':>5} {'onnxruntime':>14} {'SITS':>14} {'SITS engine':>14} "
          f"{'SITS/ort':>9} {'engine/ort':>11}   (decode tokens/s)")
    bytes_per_token = 2 * dec.layers * dec.kv_heads * dec.head_dim * 4
    for batch in (1, 8):
        tokens = batch * args.new_tokens
        rates = []
        for runner in ("ort", "sits"):
            run = (lambda f: session.run(None, f)) if runner == "ort" else \
                (lambda f: model.run(**f))
            _contiguous(run, dec, batch, args.prompt_len, 2, np.random.default_rng(0))  # warm
            best = min(_contiguous(run, dec, batch, args.prompt_len, args.new_tokens,
                                   np.random.default_rng(1)) for _ in range(3))
            rates.append(tokens / best)
        engine_s, kv_peak = min(
            _engine(model, dec, batch, args.prompt_len, args.new_tokens, args.max_seq_len,
                    np.random.default_rng(1)) for _ in range(3))
        engine_rate = batch * (args.new_tokens - 1) / engine_s
        print(f"{batch:>5} {rates[0]:>14.1f} {rates[1]:>14.1f} {engine_rate:>14.1f} "
              f"{rates[1] / rates[0]:>9.2f} {engine_rate / rates[0]:>11.2f}")
        print(f"      paged KV peak {kv_peak / 2**20:.2f} MiB vs contiguous "
              f"{batch * args.max_seq_len * bytes_per_token / 2**20:.2f} MiB "
              f"({batch} x {args.max_seq_len} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
