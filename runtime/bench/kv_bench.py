#!/usr/bin/env python3
"""Spec kv-allocator.md §6 (T80, T82) through the Python bindings.

Replays the seeded workload of the spec with BATCH calls of
sits_mlir.runtime.kv (add_sequences, append_batch, free_batch) and prints the
cost per block and per sequence next to vLLM 0.33.0's pure-Python figures
from the spec, with the ratio (the project's target: >= 10x per operation).
The inputs are runtime/bench/data (written by generate.py with Python's
random.Random, the same files the C++ kv_bench reads). Timings are the best
of --runs (default 6, like the spec's vLLM figures).

It also checks the workload's facts: the seed-1234 totals and rounds
(741 + 259), the prefix hit rates (0.767 / 0.994 / 0.994 / 0.767) and
waste_pct on the seed-1237 lengths (0.6967%); the exit status is 1 if one
differs. --cxx PATH also runs the C++ benchmark (build/.../runtime/kv_bench)
and prints its table.

    PYTHONPATH=build/<dir>/python_packages python runtime/bench/kv_bench.py \\
        [--runs N] [--cxx build/<dir>/runtime/kv_bench]
"""

from __future__ import annotations

import argparse
import math
import pathlib
import subprocess
import sys
import time

import numpy as np

from sits_mlir.runtime import kv

DATA = pathlib.Path(__file__).resolve().parent / "data"
POOL_BLOCKS, BS = 100_000, 16
FAILURES: list[str] = []
ROWS: list[tuple] = []


def config(caching: bool) -> kv.PoolConfig:
    """The §6 pool: 100,000 blocks of 16 tokens, block 0 the null block."""
    return kv.PoolConfig(num_blocks=POOL_BLOCKS, block_size=BS, num_layers=32,
                         num_kv_heads=8, head_dim=128, dtype="bf16", max_seq_len=1 << 20,
                         enable_prefix_caching=caching)


def column(name: str) -> np.ndarray:
    return np.array([int(r.split()[0]) for r in rows(name)], np.int64)


def rows(name: str) -> list[str]:
    return [r for r in (DATA / name).read_text().splitlines() if r and not r.startswith("#")]


def blocks_of(n):
    return (n + BS - 1) // BS


def check(ok: bool, what: str) -> None:
    if not ok:
        FAILURES.append(what)
        print(f"CHECK FAILED: {what}", file=sys.stderr)


def row(op: str, vllm: float | None, ours: float, unit: str, note: str = "") -> None:
    ROWS.append((op, vllm, ours, unit, note))


def best(runs: int, fn) -> float:
    return min(fn() for _ in range(runs))


# --- B/C: allocation and free, 1000 sequences in rounds --------------------------------------


def rounds_of(lens: np.ndarray) -> list[np.ndarray]:
    out, cur, used = [], [], 0
    for i, n in enumerate(lens):
        if used + blocks_of(n) > POOL_BLOCKS - 1:
            out.append(np.array(cur, np.uint64))
            cur, used = [], 0
        used += blocks_of(n)
        cur.append(i)
    out.append(np.array(cur, np.uint64))
    return out


def allocation_pass(a, lens, rounds, tokens, base):
    """One pass over the rounds with batch calls: (add seconds, free seconds)."""
    t_add = t_free = 0.0
    for r in rounds:
        ids = r + np.uint64(base)
        if tokens is None:
            n = lens[r.astype(np.int64)]
            t0 = time.perf_counter()
            a.add_sequences(ids, num_tokens=n)
        else:
            toks = [tokens[i] for i in r]
            t0 = time.perf_counter()
            a.add_sequences(ids, toks)
        t1 = time.perf_counter()
        a.free_batch(ids)
        t2 = time.perf_counter()
        t_add += t1 - t0
        t_free += t2 - t1
    return t_add, t_free


def allocation(runs: int) -> None:
    lens = column("lengths_seed1234.txt")
    total_blocks = int(sum(blocks_of(n) for n in lens))
    rounds = rounds_of(lens)
    print(f"allocation workload: {len(lens)} sequences, {int(lens.sum())} tokens, "
          f"{total_blocks} blocks, rounds {' '.join(str(len(r)) for r in rounds)}")
    check(len(lens) == 1000 and lens.sum() == 2_160_580 and total_blocks == 135_501,
          "seed-1234 totals (2,160,580 tokens, 135,501 blocks)")
    check([len(r) for r in rounds] == [741, 259], "rounds 741 + 259")
    nseq = len(lens)
    tokens = [np.arange(i * 5000, i * 5000 + n, dtype=np.int32) for i, n in enumerate(lens)]

    off = [allocation_pass(kv.KVAllocator(config(False)), lens, rounds, None, 0)
           for _ in range(runs)]
    t_alloc, t_free = min(t[0] for t in off), min(t[1] for t in off)
    row("allocate, prefix caching off", 0.087, t_alloc / total_blocks * 1e6, "us/block",
        f"{t_alloc / nseq * 1e6:.2f} us/seq")
    row("free", 0.12, t_free / total_blocks * 1e6, "us/block",
        f"{t_free / nseq * 1e6:.2f} us/seq; to the FREE head")

    fresh, hashed, hashed_free, victims = [], [], [], []
    for _ in range(runs):
        a = kv.KVAllocator(config(True))
        fresh.append(allocation_pass(a, lens, rounds, None, 0)[0])
        t, f = allocation_pass(a, lens, rounds, tokens, 10_000)
        hashed.append(t)
        hashed_free.append(f)
        victims.append(allocation_pass(a, lens, rounds, None, 20_000)[0])
    row("allocate, prefix caching on", 0.25, min(fresh) / total_blocks * 1e6, "us/block",
        f"{min(fresh) / nseq * 1e6:.2f} us/seq; never-hashed FREE blocks")
    row("allocate, caching on, every block evicts a cached one", 0.25,
        min(victims) / total_blocks * 1e6, "us/block",
        f"{min(victims) / nseq * 1e6:.2f} us/seq; CACHED victims lose their hash")
    row("free of sealed blocks (caching on)", 0.12, min(hashed_free) / total_blocks * 1e6,
        "us/block", "to the LRU tail")
    row("hash + lookup + allocate, new request", 2.4 + 1.6,
        min(hashed) / total_blocks * 1e6, "us/block",
        f"{min(hashed) / nseq * 1e6:.1f} us/seq; vLLM: 2.4 hashing + 1.6 manager")


# --- T82: hashing --------------------------------------------------------------------------------


def hashing(runs: int) -> float:
    """Chained SHA-256 of every full block of the seed-1234 prompts, timed
    through lookup_prefix on an empty cache (the hash chain is computed for
    the whole prompt; the lookup stops at the first block)."""
    lens = column("lengths_seed1234.txt")
    tokens = [np.arange(i * 5000, i * 5000 + n, dtype=np.int32) for i, n in enumerate(lens)]
    full = int(sum(n // BS for n in lens))
    a = kv.KVAllocator(config(True))

    def run():
        t0 = time.perf_counter()
        for t in tokens:
            a.lookup_prefix(t)
        return time.perf_counter() - t0

    t = best(runs, run)
    row("chained sha256 hashing (at admission)", 2.4, t / full * 1e6, "us/block",
        "SHA-NI" if sha_ni() else "portable SHA-256")
    return t / full * 1e6


def sha_ni() -> bool:
    return "sha_ni" in open("/proc/cpuinfo").read() if pathlib.Path("/proc/cpuinfo").exists() \
        else False


# --- decode: 256 sequences x 256 steps -------------------------------------------------------


def decode(runs: int) -> None:
    prompts = column("decode_prompts_seed1235.txt")
    nseq, steps = len(prompts), 256
    ids = np.arange(nseq, dtype=np.uint64)
    step_tokens = [np.arange(nseq, dtype=np.int32) * 512 + 1_000_000 + s for s in range(steps)]

    def run(with_tokens):
        a = kv.KVAllocator(config(True))
        if with_tokens:
            a.add_sequences(ids, [np.arange(i * 4096, i * 4096 + n, dtype=np.int32)
                                  for i, n in enumerate(prompts)])
        else:
            a.add_sequences(ids, num_tokens=prompts)
        t0 = time.perf_counter()
        for s in range(steps):
            if with_tokens:
                a.append_batch(ids, tokens=step_tokens[s])
            else:
                a.append_batch(ids, num_tokens=1)
        return time.perf_counter() - t0

    for with_tokens in (False, True):
        t = best(runs, lambda: run(with_tokens))
        row("decode step append(1), append_batch of 256" +
            (", token ids + sealing" if with_tokens else ", count only"),
            5.6, t / (nseq * steps) * 1e6, "us/seq",
            f"{t / steps * 1e6:.1f} us per step")


# --- prefix: 16 system prompts x 1000 requests, four rounds ---------------------------------------


def prefix(runs: int) -> tuple[float, ...]:
    reqs = [tuple(map(int, r.split())) for r in rows("prefix_requests_seed1237.txt")]
    check(len(reqs) == 1000, "1000 prefix requests")
    toks = [np.concatenate([np.arange(1000 + p * 1024, 1000 + p * 1024 + 1024, dtype=np.int32),
                            np.arange(10_000_000 + r * 1024, 10_000_000 + r * 1024 + suffix,
                                      dtype=np.int32)])
            for r, (p, suffix) in enumerate(reqs)]
    nblocks = sum(blocks_of(len(t)) for t in toks)

    def run():
        a = kv.KVAllocator(config(True))
        spent = 0.0
        rates = []

        def round_(base):
            nonlocal spent
            before = a.stats()
            ids = np.arange(len(toks), dtype=np.uint64) + np.uint64(base)
            t0 = time.perf_counter()
            a.add_sequences(ids, toks)
            spent += time.perf_counter() - t0
            after = a.stats()
            rates.append((after.prefix_hit_tokens - before.prefix_hit_tokens) /
                         (after.prefix_query_tokens - before.prefix_query_tokens))

        def free(base):
            a.free_batch(np.arange(len(toks), dtype=np.uint64) + np.uint64(base))

        round_(0)  # cold
        round_(1000)  # warm, blocks in use
        free(0)
        free(1000)
        round_(2000)  # warm, cached-but-free blocks
        free(2000)
        fillers = np.arange(390, dtype=np.uint64) + np.uint64(100_000)
        a.add_sequences(fillers, [np.arange(50_000_000 + f * 4096, 50_000_000 + f * 4096 + 4096,
                                            dtype=np.int32) for f in range(390)])
        a.free_batch(fillers)  # LRU pressure
        round_(3000)
        free(3000)
        a.check_invariants()
        return spent, rates

    results = [run() for _ in range(runs)]
    spent, rates = min(results, key=lambda r: r[0])
    row("prefix workload: hash + lookup + allocate, 4 rounds", 2.4 + 1.6,
        spent / (4 * nblocks) * 1e6, "us/block", "hits, hashing, sealing")
    print("prefix hit rate (cold / warm in use / warm cached / after LRU pressure): "
          + " / ".join(f"{r:.5f}" for r in rates) + "   (spec: 0.767 / 0.994 / 0.994 / 0.767)")
    for got, want, name in zip(rates, (767, 994, 994, 767),
                               ("cold", "warm in use", "warm cached", "after LRU pressure")):
        check(round(got * 1000) == want, f"{name} hit rate {want / 1000}")
    return tuple(rates)


def waste() -> float:
    lens = column("lengths_seed1237.txt")
    a = kv.KVAllocator(config(False))
    a.add_sequences(np.arange(len(lens), dtype=np.uint64), num_tokens=lens)
    w = a.stats().waste_pct
    print(f"waste_pct, seed-1237 lengths: {w:.4f}%   (spec: 0.70%, analytic 0.6967%)")
    check(abs(w - 0.6967) < 5e-5, "waste_pct 0.6967%")
    return w


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--only", choices=["allocation", "hashing", "decode", "prefix"])
    parser.add_argument("--cxx", help="also run this C++ kv_bench and print its table")
    args = parser.parse_args()
    want = lambda part: args.only in (None, part)  # noqa: E731
    print(f"kv_bench.py: pool {POOL_BLOCKS} blocks x {BS} tokens, Python bindings with batch "
          f"calls, best of {args.runs} runs\n")
    if want("allocation"):
        allocation(args.runs)
    if want("hashing"):
        hash_us = hashing(args.runs)
        combined = [r for r in ROWS if r[0] == "hash + lookup + allocate, new request"]
        if combined:
            # vLLM's 1.6 us/block is the manager-level lookup + allocate,
            # with the hashes computed earlier (at request creation); ours
            # hashes inside add_sequences, so this row is derived.
            row("lookup + allocate for a new request (derived: the row above "
                "minus hashing)", 1.6, combined[0][2] - hash_us, "us/block")
    if want("decode"):
        decode(args.runs)
    if want("prefix"):
        prefix(args.runs)
    if args.only is None:
        waste()
        meta = kv.KVAllocator(config(True)).metadata_bytes_per_device_block()
        print(f"metadata: {meta:.2f} bytes per device block (T84, target <= 32)")

    print("\n| operation | vLLM 0.33.0 | SITS via Python (batch) | unit | ratio | note |")
    print("|---|---|---|---|---|---|")
    for op, vllm, ours, unit, note in ROWS:
        ratio = f"{vllm / ours:.0f}x" if vllm and ours > 0 else "-"
        vllm_s = "-" if vllm is None else f"{vllm:.3g}"
        print(f"| {op} | {vllm_s} | {ours:.4f} | {unit} | {ratio} | {note} |")
    below = [op for op, vllm, ours, *_ in ROWS if vllm and vllm / ours < 10]
    if below:
        print(f"\nbelow the 10x target: {', '.join(below)}")

    if args.cxx:
        print(f"\n--- C++ {args.cxx} ---", flush=True)
        code = subprocess.call([args.cxx, "--runs", str(args.runs)])
        check(code == 0, "the C++ kv_bench checks")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) FAILED")
        return 1
    print("\nall workload checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
