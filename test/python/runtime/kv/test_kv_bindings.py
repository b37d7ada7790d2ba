"""The KV allocator's Python bindings: spec T85-T90, plus the Python face of
construction (T01-T06), batch calls (T16), tables (T17-T19) and stats."""

from __future__ import annotations

import ast
import copy
import gc
import pathlib
import pickle
import sys
import threading
import time

import numpy as np
import pytest

from kv_checks import fails_unchanged, state
from sits_mlir import _sits_runtime
from sits_mlir.errors import SitsError
from sits_mlir.runtime import errors, kv

ROOT = pathlib.Path(__file__).resolve().parents[4]


# --- construction (T01-T06) ---------------------------------------------------------


def test_config_fields_come_from_cpp_and_validate():
    c = kv.PoolConfig(num_blocks=17, block_size=8, dtype="bf16", num_layers=2,
                      num_kv_heads=4, head_dim=64)
    assert c.num_blocks == 17 and c.dtype == "bf16" and c.copy_ordering == "stream_ordered"
    assert c.quantization == "none"
    assert c.replace(block_size=16).block_size == 16 and c.block_size == 8
    assert c == kv.PoolConfig(**{f: getattr(c, f) for f in c._fields})
    geometry = c.validate()
    assert geometry["bytes_per_block"] == 2 * 2 * 4 * 64 * 8 * 2
    assert geometry["usable_blocks"] == 16
    with pytest.raises(TypeError, match="no field 'blocks'"):
        kv.PoolConfig(blocks=3)
    with pytest.raises(kv.KVInvalidArgument, match="supported: f32, f16, bf16"):
        kv.PoolConfig(dtype="f64")
    with pytest.raises(kv.KVInvalidArgument, match="stream_ordered, async"):
        kv.PoolConfig(copy_ordering="eager")
    with pytest.raises(kv.KVInvalidArgument, match="none, per_token_head"):
        kv.PoolConfig(quantization="int8")


@pytest.mark.parametrize("name, canonical", [("sha256", "sha256"), ("xxh3_128", "xxh3_128"),
                                             ("murmur3_128", "xxh3_128")])
def test_hash_algo_names(name, canonical):
    """sha256 and xxh3_128 are the names; murmur3_128, the fast option's
    name before XXH3 replaced MurmurHash3, stays accepted as an alias."""
    c = kv.PoolConfig(num_blocks=8, hash_algo=name)
    assert c.hash_algo == canonical
    assert c.validate()["verify_hits"] is (canonical != "sha256")


@pytest.mark.parametrize("name", ["xxh3", "xxh3-128", "XXH3_128", "md5", ""])
def test_unknown_hash_algo_is_refused(name):
    with pytest.raises(kv.KVInvalidArgument, match="supported: sha256, xxh3_128"):
        kv.PoolConfig(hash_algo=name)


@pytest.mark.parametrize("algo", ["sha256", "xxh3_128"])
def test_prefix_hits_with_each_hash_algo(pool, algo):
    """Both block hashes find the shared prefix (and only it): the same
    first two blocks, a different third; the fast hash verifies hits."""
    a = pool(hash_algo=algo, num_blocks=17)
    assert a.config.hash_algo == algo
    prompt = list(range(100, 112))
    a.add_sequence(1, prompt + [7])
    a.add_sequence(2, prompt[:8] + [0, 0, 0, 0, 7])
    t1, t2 = a.block_table(1).tolist(), a.block_table(2).tolist()
    assert t2[:2] == t1[:2] and t2[2] != t1[2]
    assert a.stats().prefix_hit_tokens == 8
    # Another namespace (salt) shares nothing.
    a.add_sequence(3, prompt + [7], options=kv.AddOptions(cache_salt="tenant-b"))
    assert not set(a.block_table(3).tolist()) & set(t1)


def test_t01_initial_state(pool):
    a = pool(num_blocks=9)
    s = a.stats()
    assert (s.total_blocks, s.usable_blocks, s.free_blocks, s.active_blocks) == (9, 8, 8, 0)
    assert a.snapshot()["device"]["free_order"].tolist() == list(range(1, 9))
    assert isinstance(s, kv.Stats) and s.as_dict()["blocks_allocated"] == 0


@pytest.mark.parametrize("field", ["num_blocks", "block_size", "num_layers",
                                   "num_kv_heads", "head_dim", "max_seq_len"])
def test_t02_bad_field_is_a_value_error_naming_it(field):
    with pytest.raises(kv.KVInvalidArgument) as info:
        kv.KVAllocator(**{"num_blocks": 8, field: 0})
    assert isinstance(info.value, ValueError)
    assert info.value.field == field and info.value.value == 0
    assert f"{field} = 0" in str(info.value)


def test_t05_single_block_without_null_block():
    with pytest.raises(kv.KVInvalidArgument):
        kv.KVAllocator(num_blocks=1)
    a = kv.KVAllocator(num_blocks=1, reserve_null_block=False)
    assert a.stats().usable_blocks == 1 and a.default_pad == -1


def test_t06_allocators_are_independent_and_tables_outlive_them(pool):
    a, b = pool(), pool()
    ta = a.add_sequence(1, num_tokens=10).block_ids
    b.add_sequence(1, num_tokens=40)
    a.close()
    del a
    gc.collect()
    assert ta.tolist() == [1, 2, 3]  # a copy, owned by numpy
    assert b.block_table(1).tolist() == list(range(1, 11))


# --- T85: error codes map to typed exceptions with payloads --------------------------


def test_t85_each_error_code_maps_to_its_exception(pool):
    a = pool(num_blocks=9, num_host_blocks=1)  # 8 usable blocks of 4 tokens
    a.add_sequence(1, num_tokens=12)  # 3 blocks
    a.add_sequence(2, num_tokens=8)  # 2 blocks

    e = fails_unchanged(a, kv.KVOutOfBlocks, a.add_sequence, 3, num_tokens=20)
    assert (e.needed, e.available, e.evictable, e.evicting) == (5, 3, 0, 0)
    assert "needed = 5, available = 3" in str(e) and e.retryable

    e = fails_unchanged(a, kv.KVCapacityError, a.add_sequence, 3, num_tokens=40)
    assert (e.limit_name, e.requested, e.limit) == ("usable_blocks", 10, 8)
    assert not e.retryable and "usable_blocks = 8" in str(e)

    e = fails_unchanged(a, kv.UnknownSequence, a.free, 42)
    assert isinstance(e, KeyError) and e.seq_id == 42 and str(e) == "seq 42 is not live"

    e = fails_unchanged(a, kv.SequenceExists, a.fork, 1, 2)
    assert e.seq_id == 2 and "seq 2" in str(e)

    e = fails_unchanged(a, kv.KVInvalidArgument, a.truncate, 1, 13)
    assert isinstance(e, ValueError) and (e.field, e.value) == ("new_n", 13)
    assert "new_n = 13" in str(e)

    e = fails_unchanged(a, kv.HostTierFull, a.swap_out, 1)
    assert (e.needed, e.available) == (3, 1) and "needed = 3, available = 1" in str(e)

    a.add_sequence(4, num_tokens=3)
    a.swap_out(4)
    e = fails_unchanged(a, kv.InvalidState, a.append, 4, num_tokens=1)
    assert (e.state, e.seq_id) == ("SWAPPED", 4) and "SWAPPED" in str(e)

    free_block = int(a.snapshot()["device"]["free_order"][0])
    e = fails_unchanged(a, kv.DoubleFree, a._a._test_unref_block, "device", free_block)
    assert e.block_id == free_block and f"block {free_block}" in str(e)

    a._a._test_corrupt_ref("device", int(a.block_table(1)[0]), 5)
    with pytest.raises(kv.KVInternalError) as info:
        a.check_invariants()
    assert info.value.invariant == 2 and "I2" in str(info.value)
    assert a.poisoned
    with pytest.raises(kv.KVInternalError):  # every later call fails fast
        a.num_free_blocks()

    for cls in (kv.KVOutOfBlocks, kv.KVCapacityError, kv.UnknownSequence, kv.SequenceExists,
                kv.KVInvalidArgument, kv.HostTierFull, kv.InvalidState, kv.DoubleFree,
                kv.KVInternalError, kv.KVOutOfMemory):
        assert issubclass(cls, kv.KVError) and issubclass(cls, SitsError)


def test_t85_out_of_memory_and_unknown_codes_map():
    # Not triggerable safely (it needs a failing allocation): the mapping itself.
    e = errors._from_status("OutOfMemory", "could not allocate 64 bytes",
                            payload={"value": 64}, kv=True)
    assert isinstance(e, kv.KVOutOfMemory) and isinstance(e, MemoryError)
    assert e.requested == 64 and str(e) == "could not allocate 64 bytes"
    assert isinstance(errors._from_status("Bogus", "?", payload={}, kv=True),
                      kv.KVInternalError)
    # The core's InvalidArgument stays a RuntimeCoreError: the domain decides.
    assert isinstance(errors._from_status("InvalidArgument", "x"), errors.RuntimeCoreError)


def test_t85_batch_errors_name_the_item(pool):
    a = pool()
    a.add_sequence(5, num_tokens=1)
    e = fails_unchanged(a, kv.SequenceExists, a.add_sequences, [1, 2, 5], num_tokens=4)
    assert e.batch_index == 2 and str(e).endswith("(batch item 2)")
    e = fails_unchanged(a, kv.UnknownSequence, a.free_batch, [5, 6])
    assert e.batch_index == 1 and e.seq_id == 6


# --- T16, T17-T19: batches and tables ---------------------------------------------------


def test_t16_batch_calls_equal_sequential_calls(pool):
    rng = np.random.default_rng(5)
    base = rng.integers(0, 3, size=9, dtype=np.int32)
    prompts = [base, np.concatenate([base, base]), base[:4], base[:0],
               rng.integers(0, 3, size=30, dtype=np.int32)]
    steps = rng.integers(0, 3, size=(5, 6), dtype=np.int32)
    single, batch = pool(num_blocks=64), pool(num_blocks=64)
    ids = [10, 11, 12, 13, 14]
    for i, p in zip(ids, prompts):
        single.add_sequence(i, p)
    cached = batch.add_sequences(ids, prompts)
    for step in steps.T:
        for i, t in zip(ids, step):
            single.append(i, [t])
        batch.append_batch(ids, tokens=step)  # 1-D: one token per sequence
    single.append(12, steps[0])
    batch.append_batch([12], tokens=steps[:1])  # 2-D: a row per sequence
    assert state(single) == state(batch)
    assert cached.dtype == np.int64 and cached.tolist()[1] == 8  # shares 9 tokens' blocks
    for i in ids[::-1]:
        single.free(i)
    batch.free_batch(ids[::-1])
    assert state(single) == state(batch)


def test_t17_write_block_tables_pads_and_checks_the_stride(pool):
    a = pool()
    a.add_sequences([1, 2], num_tokens=[9, 3])
    out = np.full((3, 4), -9, np.int32)
    assert a.write_block_tables([1, 2], out) is out
    assert out.tolist() == [[1, 2, 3, 0], [4, 0, 0, 0], [-9, -9, -9, -9]]
    a.write_block_tables([2], out, pad=-1)
    assert out[0].tolist() == [4, -1, -1, -1]
    narrow = np.zeros((2, 2), np.int32)
    e = fails_unchanged(a, kv.KVInvalidArgument, a.write_block_tables, [1, 2], narrow)
    assert e.field == "stride" and not narrow.any()


def test_t18_slot_mapping_spans_blocks(pool):
    a = pool()
    a.add_sequence(1, num_tokens=10)  # blocks 1, 2, 3
    assert a.slot_mapping(1).tolist() == [4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    out = np.zeros(4, np.int64)
    assert a.slot_mapping(1, 6, 3, out=out) is out
    assert out.tolist() == [10, 11, 12, 0]


def test_t19_tables_are_copies(pool):
    a = pool()
    t = a.add_sequence(1, num_tokens=9).block_ids
    table = a.block_table(1)
    a.free(1)
    a.add_sequence(2, num_tokens=30)
    assert t.tolist() == table.tolist() == [1, 2, 3]


def test_tokens_accept_lists_and_other_dtypes(pool):
    a = pool()
    a.add_sequence(1, [1, 2, 3, 4, 5])
    a.add_sequence(2, np.array([1, 2, 3, 4, 6], np.int64))
    assert a.block_table(2)[0] == a.block_table(1)[0]  # the same first block
    a.add_sequences(np.array([3, 4], np.int64), tokens=[[9] * 4, (9, 9, 9, 9, 9)])
    assert a.stats().prefix_hit_tokens == 4 + 4


# --- T86: the GIL is released in batch calls -----------------------------------------------


def test_t86_gil_released_during_batch_calls():
    a = kv.KVAllocator(num_blocks=70000, block_size=16, max_seq_len=1 << 16)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, 50000, size=1024, dtype=np.int32) for _ in range(1000)]
    ticks, stop, window = [], threading.Event(), []

    def spin():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    def batch():
        t0 = time.perf_counter()
        a.add_sequences(np.arange(1000), prompts)  # 64k blocks hashed and allocated
        a.check_invariants()
        window.extend([t0, time.perf_counter()])

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        spinner = threading.Thread(target=spin)
        spinner.start()
        worker = threading.Thread(target=batch)
        worker.start()
        worker.join()
        stop.set()
        spinner.join()
    finally:
        sys.setswitchinterval(old)
    t0, t1 = window
    inside = [t for t in ticks if t0 + 0.1 * (t1 - t0) < t < t1 - 0.1 * (t1 - t0)]
    # Holding the GIL for the whole call would leave the spinner no tick
    # inside the window; released, it keeps running.
    assert len(inside) > 100, (len(inside), t1 - t0)
    a.close()


# --- T87: numpy interop without copies ---------------------------------------------------------


def test_t87_outputs_are_written_in_place_never_copied(pool):
    a = pool()
    a.add_sequences([1, 2], num_tokens=[5, 13])
    buffer = np.full((4, 8), 7, np.int32)
    address = buffer.ctypes.data
    view = buffer[1:3]  # rows of a bigger, C-contiguous buffer
    assert a.write_block_tables([2, 1], view) is view
    assert buffer.ctypes.data == address
    assert buffer[1:3].tolist() == [[3, 4, 5, 6, 0, 0, 0, 0], [1, 2, 0, 0, 0, 0, 0, 0]]
    assert (buffer[0] == 7).all() and (buffer[3] == 7).all()
    # Anything the binding would have to convert (and so copy) is refused.
    for bad in (np.zeros((2, 8), np.int64), np.zeros((8, 2), np.int32).T,
                np.zeros((2, 8), np.int32)[:, ::2], np.zeros(16, np.int32), [[0] * 8] * 2):
        before = np.array(bad, copy=True)
        e = fails_unchanged(a, kv.KVInvalidArgument, a.write_block_tables, [1, 2], bad)
        assert e.field == "out" and "in place" in str(e)
        assert np.array_equal(np.asarray(bad), before)
    ro = np.zeros((2, 8), np.int32)
    ro.flags.writeable = False
    fails_unchanged(a, kv.KVInvalidArgument, a.write_block_tables, [1, 2], ro)
    slots = np.zeros(5, np.int64)
    assert a.slot_mapping(1, out=slots) is slots and slots.tolist() == [4, 5, 6, 7, 8]
    fails_unchanged(a, kv.KVInvalidArgument, a.slot_mapping, 1, out=np.zeros(5, np.int32))


# --- T88: lifetime ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_t88_closing_or_deleting_during_a_call_is_safe():
    rng = np.random.default_rng(2)
    prompts = [rng.integers(0, 50000, size=2048, dtype=np.int32) for _ in range(300)]
    in_flight = 0
    for _ in range(10):
        a = kv.KVAllocator(num_blocks=40000, block_size=16, max_seq_len=1 << 16)
        native, outcome, started = a._a, {}, threading.Event()

        def batch(alloc):
            started.set()
            outcome["start"] = time.perf_counter()
            try:
                outcome["cached"] = alloc.add_sequences(np.arange(300), prompts)
            except kv.InvalidState as e:  # closed before the call took the pool
                outcome["error"] = e.state
            outcome["end"] = time.perf_counter()

        worker = threading.Thread(target=batch, args=(a,))
        worker.start()
        started.wait()
        time.sleep(0.001)
        closed_at = time.perf_counter()
        a.close()  # and drop the last references, while the worker runs
        del a
        gc.collect()
        worker.join()
        if "cached" in outcome:
            assert len(outcome["cached"]) == 300
            in_flight += outcome["start"] < closed_at < outcome["end"]
        else:
            assert outcome["error"] == "CLOSED"
        with pytest.raises(kv.InvalidState) as info:
            native.stats()
        assert info.value.state == "CLOSED"
    # The interesting case happened: a call completed on the pool it held
    # although the allocator was closed (and deleted) meanwhile.
    assert in_flight > 0


def test_t88_stress_close_while_threads_call():
    for _ in range(20):
        a = kv.KVAllocator(num_blocks=2000, block_size=4)
        errors_seen = []

        def hammer(base):
            try:
                for i in range(200):
                    a.add_sequences([base + i], num_tokens=8)
                    a.free_batch([base + i])
            except kv.InvalidState as e:
                errors_seen.append(e.state)

        threads = [threading.Thread(target=hammer, args=(k * 1000,)) for k in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.001)
        a.close()
        for t in threads:
            t.join()
        assert set(errors_seen) <= {"CLOSED"}


# --- T89: copying and pickling are refused ------------------------------------------------------


def test_t89_copy_and_pickle_are_refused(pool):
    a = pool()
    for attempt in (lambda: copy.copy(a), lambda: copy.deepcopy(a), lambda: pickle.dumps(a),
                    lambda: pickle.dumps(a._a)):
        with pytest.raises(TypeError):
            attempt()
    with pytest.raises(TypeError, match="create a new one"):
        copy.copy(a)
    b = kv.KVAllocator(a.config)  # the documented way
    assert b.config == a.config


def test_context_manager_closes(pool):
    with kv.KVAllocator(num_blocks=8) as a:
        a.add_sequence(1, num_tokens=3)
    assert a.closed
    with pytest.raises(kv.InvalidState, match="closed"):
        a.add_sequence(2, num_tokens=3)


# --- T90: the type stubs match the module ----------------------------------------------------------


def _stub(tree):
    """From a .pyi: {"f" or "Class.m": ast.arguments} of the functions and
    methods (properties excluded), and {"Class": member names}."""
    funcs, members = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            funcs[node.name] = node.args
        elif isinstance(node, ast.ClassDef):
            names = members[node.name] = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    names.add(item.name)
                    if "property" not in {getattr(d, "id", "") for d in item.decorator_list}:
                        funcs[f"{node.name}.{item.name}"] = item.args
                elif isinstance(item, ast.AnnAssign):
                    names.add(item.target.id)
    return funcs, members


def _runtime_args(fn):
    """The parameters of a nanobind function, parsed from its signature."""
    sig = fn.__nb_signature__[0][0].replace("\\", "").split(" -> ")[0]
    return ast.parse("def f" + sig[sig.index("("):] + ": ...").body[0].args


def _shape(args):
    """What stubtest compares at run time: names, defaults, *args, **kwargs."""
    return ([a.arg for a in args.posonlyargs + args.args], len(args.defaults),
            [a.arg for a in args.kwonlyargs], bool(args.vararg), bool(args.kwarg))


def test_t90_type_stubs_match_the_module():
    funcs, members = _stub(ast.parse((ROOT / "runtime/python/_sits_runtime.pyi").read_text()))
    public = {n for n in dir(_sits_runtime) if not n.startswith("__")}
    assert public == {n for n in funcs if "." not in n} | set(members) | {"FORMAT_VERSION"}
    for name, names in members.items():
        runtime = {m for m in vars(getattr(_sits_runtime, name)) if not m.startswith("__")}
        assert runtime == {m for m in names if not m.startswith("__")}, name
    mismatches = []
    for qual, args in funcs.items():
        obj = _sits_runtime
        for part in qual.split("."):
            obj = getattr(obj, part)
        if _shape(_runtime_args(obj)) != _shape(args):
            mismatches.append((qual, _shape(_runtime_args(obj)), _shape(args)))
    assert not mismatches, mismatches


def test_python_api_covers_spec_operations():
    ops = ["add_sequence", "add_sequences", "append", "append_batch", "reserve", "fork",
           "truncate", "free", "free_batch", "block_table", "write_block_tables",
           "slot_mapping", "lookup_prefix", "can_add", "blocks_needed", "num_free_blocks",
           "num_evictable_blocks", "swap_out", "swap_in", "take_pending_copies", "complete",
           "evict", "reset_prefix_cache", "stats", "check_invariants"]
    for op in ops:
        assert callable(getattr(kv.KVAllocator, op)), op
        assert getattr(kv.KVAllocator, op).__doc__, op
