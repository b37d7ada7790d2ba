"""T72: the KV allocator against a naive reference model (kv_model.py).

A Hypothesis RuleBasedStateMachine drives the bindings and the model with
the same operations (adds with tokens from a 4-symbol alphabet so prefixes
collide often, append, fork, truncate, free, free of dead ids,
swap_out/swap_in, evict, lookup_prefix, reset_prefix_cache, taking the
pending copies) on pools of 4-64 blocks, so that OOM paths are frequent.
After every step it compares the return value or the error code (with the
OutOfBlocks / HostTierFull payload), every table, every reference count,
the sealed set, the free-list order of both tiers and every statistic, and
runs check_invariants.

The default budget keeps the test to a few seconds; set
KV_MODEL_EXAMPLES (e.g. 2000) and KV_MODEL_STEPS for longer runs.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant,  # noqa: E402
                                 precondition, rule)

from kv_model import ACTIVE, CACHED, FREE, Model  # noqa: E402
from sits_mlir.runtime import kv  # noqa: E402

# Thousands of random allocator programs against the reference model.
pytestmark = pytest.mark.slow

STATE_CODE = {FREE: 1, CACHED: 2, ACTIVE: 3}  # kv::BlockState
IDS = st.integers(0, 7)
NAMESPACES = st.sampled_from(["", "", "lora-1"])


def result_of(fn, *args, **kwargs):
    """The binding call's result in the model's terms, or its error."""
    try:
        return fn(*args, **kwargs)
    except kv.KVOutOfBlocks as e:
        return ("Error", e.code, e.needed, e.available, e.evictable)
    except kv.HostTierFull as e:
        return ("Error", e.code, e.needed, e.available)
    except kv.KVError as e:
        return ("Error", e.code)


def failed(result):
    return type(result) is tuple and result[:1] == ("Error",)


def plain_copies(copies):
    return [tuple(c) for c in copies]


class KVMachine(RuleBasedStateMachine):
    @initialize(num_blocks=st.integers(4, 64), block_size=st.sampled_from([1, 2, 4]),
                host=st.sampled_from([0, 0, 3, 8, 32]),
                caching=st.sampled_from([True, True, True, False]))
    def setup(self, num_blocks, block_size, host, caching):
        self.bs = block_size
        self.a = kv.KVAllocator(num_blocks=num_blocks, block_size=block_size,
                                num_host_blocks=host, enable_prefix_caching=caching,
                                max_seq_len=1 << 20)
        self.m = Model(num_blocks, block_size, host, caching)
        self.prompts = []  # earlier prompts: new ones often extend their prefixes

    def tokens(self, data, most):
        tail = data.draw(st.lists(st.integers(0, 3), max_size=most), label="tokens")
        if self.prompts and data.draw(st.booleans(), label="shared prefix"):
            base = data.draw(st.sampled_from(self.prompts), label="prefix of")
            cut = data.draw(st.just(len(base)) | st.integers(0, len(base)), label="cut")
            return (base[:cut] + tail)[:4 * self.bs]
        return tail

    def live(self, data):
        return data.draw(st.sampled_from(sorted(self.m.seqs)), label="live seq")

    def check(self, got, want):
        assert got == want, f"allocator {got!r} != model {want!r}"

    @rule(data=st.data(), ns=NAMESPACES)
    def add(self, data, ns):
        # Mostly a new id; sometimes a live one (SequenceExists).
        new = [i for i in range(8) if i not in self.m.seqs]
        seq = data.draw(st.sampled_from(new) if new and data.draw(st.integers(0, 7))
                        else IDS, label="seq")
        toks = self.tokens(data, 4 * self.bs)
        self.prompts.append(toks)
        opts = kv.AddOptions(extra_key=ns) if ns else None
        got = result_of(self.a.add_sequence, seq, np.array(toks, np.int32), options=opts)
        if not failed(got):
            got = (got.cached_tokens, got.block_ids.tolist(), got.num_new_blocks,
                   got.num_onboarded, plain_copies(got.copies))
        self.check(got, self.m.call(self.m.add, seq, toks, ns))

    # Admissions and decode steps are most of a real workload: weight them.
    add_more = add

    def do_append(self, seq, toks):
        got = result_of(self.a.append, seq, toks)
        if not failed(got):
            got = (got.new_block_ids.tolist(), plain_copies(got.copies))
        self.check(got, self.m.call(self.m.append, seq, toks))

    @precondition(lambda self: self.m.seqs)
    @rule(data=st.data())
    def append(self, data):
        self.do_append(self.live(data), self.tokens(data, 2 * self.bs))

    append_more = append

    @precondition(lambda self: self.m.seqs)
    @rule(child=IDS, data=st.data())
    def fork(self, child, data):
        parent = self.live(data)
        n = len(self.m.seqs[parent].tokens)
        pos = data.draw(st.sampled_from([-1, -1, -2, n + 1]) | st.integers(0, n), label="pos")
        self.check(result_of(self.a.fork, parent, child, pos),
                   self.m.call(self.m.fork, parent, child, pos))

    @precondition(lambda self: self.m.seqs)
    @rule(data=st.data())
    def truncate(self, data):
        seq = self.live(data)
        n = len(self.m.seqs[seq].tokens)
        new_n = data.draw(st.integers(-1, n + 1), label="new_n")
        self.check(result_of(self.a.truncate, seq, new_n),
                   self.m.call(self.m.truncate, seq, new_n))

    @precondition(lambda self: self.m.seqs)
    @rule(data=st.data())
    def free(self, data):
        seq = self.live(data)
        self.check(result_of(self.a.free, seq), self.m.call(self.m.free, seq))

    @rule(seq=IDS, op=st.sampled_from(["free", "append", "swap_in"]))
    def any_id(self, seq, op):  # often a dead (never added, or freed) id
        if op == "free":
            self.check(result_of(self.a.free, seq), self.m.call(self.m.free, seq))
        elif op == "swap_in":
            self.check(result_of(self.a.swap_in, seq), self.m.call(self.m.swap_in, seq))
        else:
            self.do_append(seq, [1])

    @precondition(lambda self: self.m.seqs)
    @rule(data=st.data())
    def swap_out(self, data):
        seq = self.live(data)
        self.check(result_of(self.a.swap_out, seq), self.m.call(self.m.swap_out, seq))

    @precondition(lambda self: any(s.state == "SWAPPED" for s in self.m.seqs.values()))
    @rule(data=st.data())
    def swap_in(self, data):
        swapped = sorted(i for i, s in self.m.seqs.items() if s.state == "SWAPPED")
        seq = data.draw(st.sampled_from(swapped), label="swapped seq")
        self.check(result_of(self.a.swap_in, seq), self.m.call(self.m.swap_in, seq))

    @rule(k=st.integers(0, 4), reset=st.integers(0, 4))
    def evict(self, k, reset):
        if reset == 0:  # reset_prefix_cache, one time in five
            self.check(result_of(self.a.reset_prefix_cache), self.m.call(self.m.reset))
        else:
            self.check(result_of(self.a.evict, k), self.m.call(self.m.evict, k))

    @rule(data=st.data(), ns=NAMESPACES)
    def lookup_prefix(self, data, ns):
        toks = self.tokens(data, 4 * self.bs)
        opts = kv.AddOptions(extra_key=ns) if ns else None
        self.check(result_of(self.a.lookup_prefix, toks, options=opts),
                   self.m.call(self.m.lookup_prefix, toks, ns))

    @precondition(lambda self: self.m.pending)
    @rule()
    def take_copies(self):
        self.check(plain_copies(self.a.take_pending_copies()), self.m.take_copies())

    @invariant()
    def same_state(self):
        if not hasattr(self, "m"):
            return
        snap, m = self.a.snapshot(), self.m
        for name, tier, first in (("device", m.dev, 1), ("host", m.host, 0)):
            got = snap[name]
            blocks = sorted(tier.state)
            assert got["free_order"].tolist() == tier.free, name + " free-list order"
            assert got["state"].tolist()[first:] == [STATE_CODE[tier.state[b]] for b in blocks]
            assert got["ref"].tolist()[first:] == [tier.ref[b] for b in blocks], name + " refs"
            assert np.flatnonzero(got["sealed"]).tolist() == sorted(tier.key), name + " sealed"
        assert sorted(snap["sequences"]) == sorted(m.seqs)
        for seq, s in m.seqs.items():
            got = snap["sequences"][seq]
            assert got["state"] == s.state and got["num_tokens"] == len(s.tokens)
            assert got["table"].tolist() == [-1 if b is None else b for b in s.table]
            assert got["host_table"].tolist() == [-1 if h is None else h for h in s.host_table]
        assert self.a.stats().as_dict() == m.stats()
        self.a.check_invariants()

    def teardown(self):
        if hasattr(self, "a"):
            self.a.close()


KVMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("KV_MODEL_EXAMPLES", "200")),
    stateful_step_count=int(os.environ.get("KV_MODEL_STEPS", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_allocator_matches_reference_model = KVMachine.TestCase
