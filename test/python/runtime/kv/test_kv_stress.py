"""Concurrency through the bindings (spec T67-T70 from Python): 8 threads
of random single and batch operations, shared prompts so that prefix hits,
forks and copy-on-write cross threads, and reader threads taking stats and
tables meanwhile. Only KVOutOfBlocks may fail; at the end every sequence is
freed, the invariants hold and every reference count is back to exactly 0.

KV_STRESS_SECONDS (default 2) sets how long the workers run.
"""

from __future__ import annotations

import os
import random
import threading
import time

import numpy as np

from sits_mlir.runtime import kv

THREADS = 8
SECONDS = float(os.environ.get("KV_STRESS_SECONDS", "2"))


def worker(a: kv.KVAllocator, tid: int, prompts, deadline, errors, counts):
    rng = random.Random(tid)
    mine: dict[int, int] = {}  # live seq id -> token count
    next_id = tid << 32

    def fresh():
        nonlocal next_id
        next_id += 1
        return next_id

    while time.perf_counter() < deadline:
        op = rng.random()
        try:
            if op < 0.25 or not mine:  # admit: a shared prompt plus a private suffix
                seq = fresh()
                toks = np.concatenate([rng.choice(prompts),
                                       np.arange(rng.randrange(0, 40), dtype=np.int32) + tid])
                a.add_sequence(seq, toks)
                mine[seq] = len(toks)
            elif op < 0.35:  # a batch admission
                seqs = [fresh() for _ in range(rng.randrange(1, 6))]
                toks = [rng.choice(prompts)[: rng.randrange(1, 64)] for _ in seqs]
                a.add_sequences(seqs, toks)
                mine.update({s: len(t) for s, t in zip(seqs, toks)})
            elif op < 0.6:  # a decode step over my live sequences
                seqs = list(mine)
                a.append_batch(seqs, tokens=np.full(len(seqs), tid, np.int32))
                for s in seqs:
                    mine[s] += 1
            elif op < 0.7:  # parallel sampling: fork, then both write (CoW)
                parent = rng.choice(list(mine))
                child = fresh()
                a.fork(parent, child)
                mine[child] = mine[parent]
                a.append(child, [7])
                mine[child] += 1
            elif op < 0.75:
                seq = rng.choice(list(mine))
                new_n = rng.randrange(0, mine[seq] + 1)
                a.truncate(seq, new_n)
                mine[seq] = new_n
            elif op < 0.9:
                seqs = rng.sample(list(mine), rng.randrange(1, len(mine) + 1))
                a.free_batch(seqs)
                for s in seqs:
                    del mine[s]
            else:
                seq = rng.choice(list(mine))
                out = np.zeros((1, 64), np.int32)
                a.write_block_tables([seq], out)
                assert (out[0, : len(a.block_table(seq))] > 0).all()
            counts[tid] += 1
        except kv.KVOutOfBlocks:
            if mine:  # make room: free my oldest sequence
                oldest = next(iter(mine))
                a.free(oldest)
                del mine[oldest]
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(f"thread {tid}: {type(e).__name__}: {e}")
            return
    if mine:
        a.free_batch(list(mine))


def reader(a: kv.KVAllocator, stop, errors):
    while not stop.is_set():
        s = a.stats()
        total = s.free_blocks + s.cached_blocks + s.active_blocks + s.evicting_blocks + 1
        if total != s.total_blocks:  # I4 on every snapshot: no torn reads
            errors.append(f"torn stats: {s}")
            return


def test_eight_threads_through_the_bindings():
    a = kv.KVAllocator(num_blocks=1025, block_size=16, max_seq_len=1 << 14)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 1000, size=n, dtype=np.int32) for n in (64, 100, 160, 33)]
    errors: list[str] = []
    counts = [0] * THREADS
    deadline = time.perf_counter() + SECONDS
    stop = threading.Event()
    readers = [threading.Thread(target=reader, args=(a, stop, errors)) for _ in range(2)]
    workers = [threading.Thread(target=worker, args=(a, t, prompts, deadline, errors, counts))
               for t in range(THREADS)]
    for t in readers + workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors, errors[:5]
    assert min(counts) > 0
    a.check_invariants()
    s = a.stats()
    assert s.num_sequences == 0 and s.active_blocks == 0
    assert a.num_free_blocks() == s.usable_blocks == 1024
    snap = a.snapshot()
    assert not snap["device"]["ref"].any()  # refs exact: every one back to 0
    assert s.forks > 0 and s.cow_copies > 0 and s.prefix_hit_tokens > 0
    assert s.sequences_added == s.sequences_freed
