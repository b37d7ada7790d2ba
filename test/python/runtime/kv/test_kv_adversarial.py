"""Adversarial use of the KV allocator through the bindings (spec §5 H, and
D's fork-then-write): each failing call raises its exact exception and
leaves the observable state byte-identical (``fails_unchanged``)."""

from __future__ import annotations

import numpy as np
import pytest

from kv_checks import fails_unchanged, state
from sits_mlir.runtime import kv


def test_t54_double_free(pool):
    a = pool()
    table = a.add_sequence(1, num_tokens=9).block_ids
    a.free(1)
    e = fails_unchanged(a, kv.UnknownSequence, a.free, 1)
    assert e.seq_id == 1
    # Block level (a free_blocks-style API): a ref-0 block is DoubleFree, not
    # a silent ref of -1 as in vLLM.
    for b in table:
        e = fails_unchanged(a, kv.DoubleFree, a._a._test_unref_block, "device", int(b))
        assert e.block_id == b


def test_t55_double_free_then_drain_allocates_every_block_once(pool):
    a = pool(num_blocks=33)
    a.add_sequence(1, num_tokens=30)
    a.free(1)
    with pytest.raises(kv.UnknownSequence):
        a.free(1)
    got = [int(a.add_sequence(100 + i, num_tokens=4).block_ids[0]) for i in range(32)]
    assert sorted(got) == list(range(1, 33))  # each usable block exactly once
    fails_unchanged(a, kv.KVOutOfBlocks, a.add_sequence, 999, num_tokens=1)


def test_t56_unknown_ids_for_every_call(pool):
    a = pool(num_host_blocks=4)
    a.add_sequence(1, num_tokens=5)
    out = np.zeros((2, 4), np.int32)
    for call, args in [(a.free, (42,)), (a.append, (42, [1])), (a.truncate, (42, 0)),
                       (a.fork, (42, 43)), (a.block_table, (42,)), (a.swap_out, (42,)),
                       (a.swap_in, (42,)), (a.blocks_needed, (42, 1)),
                       (a.slot_mapping, (42,)), (a.reserve, (42, 2)),
                       (a.write_block_tables, ([1, 42], out)),
                       (a.append_batch, ([1, 42], None)), (a.free_batch, ([1, 42],))]:
        kwargs = {"num_tokens": 1} if call == a.append_batch else {}
        e = fails_unchanged(a, kv.UnknownSequence, call, *args, **kwargs)
        assert e.seq_id == 42, call.__name__
    assert not out.any()
    assert a.stats().failed_calls == 13


def test_t57_oom_then_recovery(pool):
    a = pool(num_blocks=33)  # 32 usable blocks
    a.add_sequence(1, num_tokens=20 * 4)
    e = fails_unchanged(a, kv.KVOutOfBlocks, a.add_sequence, 2, num_tokens=20 * 4)
    assert (e.needed, e.available) == (20, 12)
    assert a.num_free_blocks() == 12 and a.stats().out_of_blocks_failures == 1
    assert not a.can_add(20 * 4)
    a.free(1)
    assert a.can_add(20 * 4)
    assert len(a.add_sequence(2, num_tokens=20 * 4).block_ids) == 20


def test_t58_huge_requests_are_capacity_errors_not_retryable(pool):
    a = pool(num_blocks=33, max_seq_len=100)
    e = fails_unchanged(a, kv.KVCapacityError, a.add_sequence, 1, num_tokens=32 * 4 + 1)
    assert not isinstance(e, kv.KVOutOfBlocks) and not e.retryable
    e = fails_unchanged(a, kv.KVCapacityError, a.add_sequence, 1, num_tokens=101)
    assert (e.limit_name, e.requested, e.limit) == ("max_seq_len", 101, 100)
    a.add_sequence(1, num_tokens=100)
    e = fails_unchanged(a, kv.KVCapacityError, a.append, 1, num_tokens=1)
    assert e.limit_name == "max_seq_len"
    e = fails_unchanged(a, kv.KVCapacityError, a.add_sequences, [2, 3], num_tokens=[1, 10**6])
    assert e.batch_index == 1


def test_t59_zero_lengths(pool):
    a = pool()
    r = a.add_sequence(1, [])
    assert r.block_ids.tolist() == [] and r.cached_tokens == 0
    assert a.append(1, []).new_block_ids.tolist() == []
    a.append(1, [5, 6])
    before = state(a)
    a.truncate(1, 2)  # truncate to n: a no-op
    assert state(a) == before
    a.fork(1, 2, 0)
    assert a.block_table(2).tolist() == [] and a.sequence_info(2)["num_tokens"] == 0
    a.free(1)
    a.free(2)
    assert a.num_free_blocks() == 32


def test_t60_fork_then_write_copies_on_write(pool):
    a = pool()
    a.add_sequence(1, num_tokens=6)  # blocks 1, 2 (2 tokens in the shared tail)
    a.fork(1, 2)
    assert a.stats().shared_blocks == 2
    # Neither holder may write the shared partial block through its slots.
    e = fails_unchanged(a, kv.InvalidState, a.slot_mapping, 2, 4, 2)
    assert e.state == "SHARED_BLOCK"
    fails_unchanged(a, kv.InvalidState, a.slot_mapping, 1, 4, 2)
    # The child writes first: it gets a copy of the tail (T23) ...
    r = a.append(2, num_tokens=1)
    assert r.new_block_ids.tolist() == [3]
    assert [tuple(c)[1:] for c in r.copies] == [("device", 2, "device", 3, 2)]
    assert a.block_table(2).tolist() == [1, 3] and a.block_table(1).tolist() == [1, 2]
    assert a.slot_mapping(2, 4, 3).tolist() == [12, 13, 14]
    # ... and the parent now owns its tail alone: no copy (T22's mirror).
    assert a.append(1, num_tokens=2).copies == []
    assert a.slot_mapping(1, 4, 4).tolist() == [8, 9, 10, 11]
    assert [c.dst for c in a.take_pending_copies()] == [3]
    assert a.stats().cow_copies == 1


def test_t27_cow_in_a_full_pool_changes_nothing(pool):
    a = pool(num_blocks=3)  # 2 usable blocks
    a.add_sequence(1, num_tokens=6)
    a.fork(1, 2)
    e = fails_unchanged(a, kv.KVOutOfBlocks, a.append, 2, num_tokens=1)
    assert e.needed == 1 and e.available == 0
    assert a.blocks_needed(2, 1) == 1  # the query counts the pending copy


def test_t61_invalid_sizes(pool):
    a = pool()
    a.add_sequence(1, num_tokens=5)
    for call, args, field in [(a.truncate, (1, -1), "new_n"), (a.truncate, (1, 6), "new_n"),
                              (a.fork, (1, 2, -2), "pos"), (a.fork, (1, 2, 6), "pos"),
                              (a.reserve, (1, -1), "lookahead"),
                              (a.blocks_needed, (1, -1), "k"), (a.evict, (-1,), "k")]:
        e = fails_unchanged(a, kv.KVInvalidArgument, call, *args)
        assert e.field == field and isinstance(e, ValueError)


def test_t62_existing_id_wins_over_oom(pool):
    a = pool(num_blocks=3)
    a.add_sequence(1, num_tokens=4)
    assert not a.can_add(8)  # a new id would get KVOutOfBlocks
    fails_unchanged(a, kv.SequenceExists, a.add_sequence, 1, num_tokens=8)


def test_t63_batches_are_all_or_nothing(pool):
    a = pool(num_blocks=9)  # 8 usable blocks
    e = fails_unchanged(a, kv.KVOutOfBlocks, a.add_sequences, [1, 2, 3],
                        num_tokens=[8, 8, 20])
    assert e.batch_index == 2
    a.add_sequences([1, 2], num_tokens=[8, 8])
    e = fails_unchanged(a, kv.KVOutOfBlocks, a.append_batch, [1, 2, 1],
                        num_tokens=[4, 4, 12])
    assert e.batch_index == 2


def test_t64_watermark_applies_to_admission_only(pool):
    a = pool(num_blocks=9, watermark_blocks=2)
    a.add_sequence(1, num_tokens=4 * 6)  # 6 blocks, leaves exactly the watermark
    e = fails_unchanged(a, kv.KVOutOfBlocks, a.add_sequence, 2, num_tokens=1)
    assert "watermark = 2" in str(e)
    a.append(1, num_tokens=8)  # running sequences may use the reserve


def test_t65_poisoned_pool_fails_fast(pool):
    a = pool()
    a.add_sequence(1, num_tokens=5)
    a._a._test_corrupt_ref("device", 1, 3)
    with pytest.raises(kv.KVInternalError):
        a.check_invariants()
    for call, args in [(a.add_sequence, (2,)), (a.free, (1,)), (a.stats, ()),
                       (a.free_batch, ([1],)), (a.snapshot, ())]:
        kwargs = {"num_tokens": 1} if call == a.add_sequence else {}
        with pytest.raises(kv.KVInternalError) as info:
            call(*args, **kwargs)
        assert info.value.invariant == 2


def test_reset_prefix_cache_refuses_active_blocks(pool):
    a = pool()
    a.add_sequence(1, list(range(9)))
    e = fails_unchanged(a, kv.InvalidState, a.reset_prefix_cache)
    assert e.state == "ACTIVE"
    a.free(1)
    assert a.lookup_prefix(list(range(9))) == 8
    a.reset_prefix_cache()
    assert a.lookup_prefix(list(range(9))) == 0
    assert a.snapshot()["device"]["free_order"].tolist() == list(range(1, 33))


def test_swapped_sequences(pool):
    a = pool(num_host_blocks=8)
    a.add_sequence(1, list(range(10)))
    fails_unchanged(a, kv.InvalidState, a.swap_in, 1)
    a.swap_out(1)
    copies = a.take_pending_copies()
    assert [(c.src_tier, c.dst_tier, c.tokens) for c in copies] == [
        ("device", "host", 4), ("device", "host", 4), ("device", "host", 2)]
    for call, args in [(a.block_table, (1,)), (a.append, (1, [1])), (a.fork, (1, 2)),
                       (a.swap_out, (1,)), (a.truncate, (1, 0))]:
        assert fails_unchanged(a, kv.InvalidState, call, *args).state == "SWAPPED"
    a.swap_in(1)
    assert len(a.block_table(1)) == 3 and a.stats().host_used == 0
    b = pool()
    b.add_sequence(7, num_tokens=1)
    assert fails_unchanged(b, kv.InvalidState, b.swap_out, 7).state == "NO_HOST_TIER"
