#!/usr/bin/env python3
"""Decode throughput of an exported decoder (GPT-2 or Llama from a
`transformers` config, random weights) at batch 1 and batch 8, in one run:

* onnxruntime on the exported ONNX, contiguous past K/V (the peer);
* SITS, the compiled artifact in the same contiguous loop;
* SITS's generation engine over the paged KV pool (`sits_mlir.runtime.engine`)
  serving the same artifact with `PastKVRunner`, which copies each
  sequence's past out of its blocks every step, one sequence per call;
* the engine serving the decoder compiled with `kv_cache="paged"` and
  `logits="last"`, the serving form (`PagedRunner`): attention reads and
  writes K/V in the pool through the block tables, the whole batch in one
  call.

Each engine runs in a process of its own, as a user serves one model (in
one process, onnxruntime's idle worker threads spin after each run and take
the cores from the next engine). Each batch decodes `--new-tokens` greedy
tokens after a `--prompt-len` prefill, best of 3; decode tokens/s counts
the decode steps only (engine: output tokens
after the first over the time after the last first token). Also prints the
peak KV memory of the paged pool against a contiguous `--max-seq-len`
reservation per sequence, and the pool's mean waste_pct (slots allocated
but not filled) over the paged run's steps.

    python test/bench/llm_decode.py [--model llama] [--layers 8 --hidden 512 --heads 8 --vocab 32000]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python" / "llm"))

BLOCK = 16  # KV block size (tokens)


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


def _engine(model, runner_type, dec, batch, prompt_len, new_tokens, max_seq_len, rng):
    """(decode seconds, peak KV bytes, mean waste_pct) of the engine."""
    from sits_mlir.runtime import kv
    from sits_mlir.runtime.engine import GREEDY, Engine

    pool = kv.KVAllocator(num_blocks=batch * (max_seq_len // BLOCK) + 1, block_size=BLOCK,
                          num_layers=dec.layers, num_kv_heads=dec.kv_heads,
                          head_dim=dec.head_dim, dtype="f32", max_seq_len=max_seq_len)
    engine = Engine(pool, runner_type(model, kv.KVMemory(pool)), max_batch_size=batch)
    for _ in range(batch):
        engine.add_request(rng.integers(0, dec.vocab, prompt_len).tolist(), new_tokens,
                           sampling=GREEDY)
    engine.step()  # every prefill (and first token)
    peak, waste = 0, []
    start = time.perf_counter()
    while engine.has_unfinished:
        engine.step()
        stats = pool.stats()
        peak = max(peak, stats.active_blocks)
        if stats.active_blocks:
            waste.append(stats.waste_pct)
    return (time.perf_counter() - start, peak * pool.geometry["bytes_per_block"],
            float(np.mean(waste)) if waste else 0.0)


def _measure(kind: str, spec: dict) -> dict:
    """One engine in this (fresh) process: best decode seconds of 3 runs
    (engines: with the paged pool's peak bytes and mean waste_pct)."""
    import types

    dec = types.SimpleNamespace(**spec["decoder"])
    batch, prompt_len, new_tokens = spec["batch"], spec["prompt_len"], spec["new_tokens"]
    if kind == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = spec["threads"]
        session = ort.InferenceSession(dec.path, so, providers=["CPUExecutionProvider"])
        run = lambda f: session.run(None, f)  # noqa: E731
    else:
        from sits_mlir import runtime

        runtime.set_num_threads(spec["threads"])
        model = runtime.load(spec["paged" if kind == "paged" else "contiguous"])
        run = lambda f: model.run(**f)  # noqa: E731
    if kind in ("ort", "sits"):
        _contiguous(run, dec, batch, prompt_len, 2, np.random.default_rng(0))  # warm
        return {"seconds": min(_contiguous(run, dec, batch, prompt_len, new_tokens,
                                           np.random.default_rng(1)) for _ in range(3))}
    from sits_mlir.runtime.decoder import PagedRunner, PastKVRunner

    runner = PagedRunner if kind == "paged" else PastKVRunner
    seconds, peak, waste = min(_engine(model, runner, dec, batch, prompt_len, new_tokens,
                                       spec["max_seq_len"], np.random.default_rng(1))
                               for _ in range(3))
    return {"seconds": seconds, "kv_peak": peak, "waste": waste}


def _in_process_of_its_own(kind: str, spec: dict) -> dict:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", kind,
                           "--spec", json.dumps(spec)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} at batch {spec['batch']} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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
    p.add_argument("--no-outline-layers", action="store_true",
                   help="compile every layer inline (compile_options outline_layers=False), "
                        "to compare")
    p.add_argument("--measure", choices=("ort", "sits", "copy", "paged"), help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.measure:
        print(json.dumps(_measure(args.measure, json.loads(args.spec))))
        return 0

    import sits_mlir
    from hf_decoders import build

    out = tempfile.mkdtemp(prefix="sits-llm-bench-")
    dec = build(args.model, out, layers=args.layers, hidden=args.hidden, heads=args.heads,
                vocab=args.vocab, positions=args.max_seq_len)
    options = {"threads": args.threads, "outline_layers": not args.no_outline_layers}
    start = time.perf_counter()
    sits_mlir.compile(dec.path, "cpu", os.path.join(out, "model.sitsm"), **options)
    compile_s = time.perf_counter() - start
    # The serving form: the engine samples from each sequence's last logits.
    sits_mlir.compile(dec.path, "cpu", os.path.join(out, "paged.sitsm"), **options,
                      kv_cache="paged", kv_block_size=BLOCK, logits="last")
    spec = {"decoder": {k: getattr(dec, k) for k in ("path", "vocab", "layers", "kv_heads",
                                                     "head_dim")},
            "contiguous": os.path.join(out, "model.sitsm"),
            "paged": os.path.join(out, "paged.sitsm"), "threads": args.threads,
            "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
            "max_seq_len": args.max_seq_len}

    print(f"{args.model}: {args.layers} layers, hidden {args.hidden}, {args.heads} heads "
          f"({dec.kv_heads} K/V), vocabulary {args.vocab}; prompt {args.prompt_len}, "
          f"{args.new_tokens} new tokens; {args.threads} threads; SITS compile {compile_s:.1f} s")
    print("decode tokens/s, each engine in a process of its own: onnxruntime and SITS with "
          "contiguous past; the SITS engine over the paged pool copying the past (past-copy) "
          "and compiled paged (paged)")
    print(f"{'batch':>5} {'onnxruntime':>12} {'SITS':>10} {'past-copy':>10} {'paged':>10} "
          f"{'SITS/ort':>9} {'copy/ort':>9} {'paged/ort':>10}")
    bytes_per_token = 2 * dec.layers * dec.kv_heads * dec.head_dim * 4
    for batch in (1, 8):
        spec["batch"] = batch
        result = {kind: _in_process_of_its_own(kind, spec)
                  for kind in ("ort", "sits", "copy", "paged")}
        ort_rate, sits_rate = (batch * args.new_tokens / result[k]["seconds"]
                               for k in ("ort", "sits"))
        copy_rate, paged_rate = (batch * (args.new_tokens - 1) / result[k]["seconds"]
                                 for k in ("copy", "paged"))
        print(f"{batch:>5} {ort_rate:>12.1f} {sits_rate:>10.1f} {copy_rate:>10.1f} "
              f"{paged_rate:>10.1f} {sits_rate / ort_rate:>9.2f} {copy_rate / ort_rate:>9.2f} "
              f"{paged_rate / ort_rate:>10.2f}")
        kv_peak, waste = result["paged"]["kv_peak"], result["paged"]["waste"]
        print(f"      paged KV peak {kv_peak / 2**20:.2f} MiB vs contiguous "
              f"{batch * args.max_seq_len * bytes_per_token / 2**20:.2f} MiB "
              f"({batch} x {args.max_seq_len} tokens); waste_pct {waste:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
