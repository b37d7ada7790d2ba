"""The paged KV-cache allocator (spec ``kv-allocator.md`` §4), from Python.

    import numpy as np
    from sits_mlir.runtime import kv

    pool = kv.KVAllocator(num_blocks=4096, block_size=16, num_layers=32,
                          num_kv_heads=8, head_dim=128, dtype="bf16")
    r = pool.add_sequence(7, prompt_ids)              # prefix cache hit + new blocks
    pool.add_sequences(ids, tokens=prompts)           # batch: one call, GIL released
    pool.append_batch(ids, tokens=next_ids)           # a decode step, 1 token each
    tables = np.zeros((len(ids), 64), np.int32)
    pool.write_block_tables(ids, tables)              # in place, padded with the null block
    pool.free_batch(ids)

    mem = kv.KVMemory(pool)                           # the KV tensors of that pool
    mem.apply_copies(pool.take_pending_copies())      # CoW / swap / offload, before the kernels
    k_layer3 = mem.device[:, 3, 0]                    # [blocks, heads, block_size, head_dim] view

    # INT8 KV with an f32 scale per (token, head) row (element = code × scale):
    q = kv.KVMemory(pool.config, dtype="int8", quantization="per_token_head")
    q.device                                          # int8 [..., head_dim + 4]: the kv_pool
    q.codes(), q.scales()                             # int8 [..., head_dim], float32 [...] views
    # FP8 E4M3FN codes, the same layout (views in ml_dtypes.float8_e4m3fn):
    f = kv.KVMemory(pool.config, dtype="fp8_e4m3", quantization="per_token_head")

The allocator manages block ids only; :class:`KVMemory` owns the KV tensors
(``bytes_per_block`` × blocks per tier) and executes the copies the allocator
lists, so the contents follow the blocks. All the work happens in the C++
core (runtime/src/kv); this module adds the Python conventions:

* **Errors** are typed exceptions, one class per code of spec §4.9, all
  ``sits_mlir.errors.SitsError`` subclasses with the payload as attributes
  (``KVOutOfBlocks.needed``/``available``/``evictable``...): see
  :mod:`sits_mlir.runtime.errors`. An error never changes the allocator's
  state; a batch call is all-or-nothing and the error's ``batch_index`` names
  the failing item.
* **Arrays**: sequence ids are uint64, tokens int32, block ids int32 and
  slots int64. Numpy arrays of those dtypes are used in place, other
  sequences are converted once. ``write_block_tables`` and ``slot_mapping``
  write straight into the caller's array (no copy is made, so a wrong dtype
  or layout is an error, never a silent copy). Block tables returned by
  ``block_table`` are copies.
* **Threads**: every method may be called from any number of threads (one
  lock per allocator inside C++). The GIL is released during batch calls,
  ``check_invariants``, ``snapshot`` and the calls that hash tokens, so other
  Python threads keep running. ``close()`` (or ``with``) releases the pool;
  a call running meanwhile in another thread keeps its own reference, so it
  completes safely, and later calls raise ``InvalidState`` (state
  ``"CLOSED"``).
* **Copying and pickling** an allocator raise ``TypeError``: it is the
  owner of block ids handed out to live sequences, which a copy would
  duplicate. Create a new allocator from ``allocator.config`` instead.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import ml_dtypes
import numpy as np

from .. import _sits_runtime as _native
from .errors import (DoubleFree, HostTierFull, InvalidState, KVCapacityError, KVError,
                     KVInternalError, KVInvalidArgument, KVOutOfBlocks, KVOutOfMemory,
                     SequenceExists, UnknownSequence, _from_status)

__all__ = [
    "AddOptions",
    "AddResult",
    "AppendResult",
    "BlockCopy",
    "DoubleFree",
    "HostTierFull",
    "InvalidState",
    "KVAllocator",
    "KVCapacityError",
    "KVError",
    "KVInternalError",
    "KVInvalidArgument",
    "KVMemory",
    "KVOutOfBlocks",
    "KVOutOfMemory",
    "PoolConfig",
    "SequenceExists",
    "Stats",
    "UnknownSequence",
]

#: Creation parameters (spec §4.2), defined once in C++ (kv/config.h):
#: ``PoolConfig(num_blocks=..., block_size=16, ...)``; ``replace(**fields)``,
#: ``validate()`` (the derived sizes, or the error ``KVAllocator`` would raise).
PoolConfig = _native.KVPoolConfig
#: Options of ``add_sequence`` / ``lookup_prefix`` / ``can_add``:
#: ``AddOptions(extra_key="", cache_salt="", block_extras=[], max_cache_hit=-1)``.
AddOptions = _native.KVAddOptions
#: The statistics snapshot of spec §4.10 (read-only attributes, ``as_dict()``).
Stats = _native.KVStats


class BlockCopy(NamedTuple):
    """One copy the runtime must execute (spec O12): ``tokens`` valid tokens
    from block ``src`` of tier ``src_tier`` to block ``dst`` of ``dst_tier``
    (tiers are ``"device"`` and ``"host"``). Copies of one
    ``take_pending_copies`` share an ``epoch``."""

    epoch: int
    src_tier: str
    src: int
    dst_tier: str
    dst: int
    tokens: int


class AddResult(NamedTuple):
    """What ``add_sequence`` did: ``cached_tokens`` served by the prefix cache
    (a multiple of block_size), the whole ``block_ids`` table, how many of its
    blocks are new (``num_new_blocks``, onboarded ones included) or came from
    the host tier (``num_onboarded``), and the ``copies`` it emitted."""

    cached_tokens: int
    block_ids: np.ndarray
    num_new_blocks: int
    num_onboarded: int
    copies: list[BlockCopy]


class AppendResult(NamedTuple):
    """What ``append``/``reserve`` added to the table (a copy-on-write block
    first) and the copies it emitted."""

    new_block_ids: np.ndarray
    copies: list[BlockCopy]


def _copies(raw: list) -> list[BlockCopy]:
    return [BlockCopy._make(c) for c in raw]


def _add_result(raw: tuple) -> AddResult:
    cached, ids, new, onboarded, copies = raw
    return AddResult(cached, ids, new, onboarded, _copies(copies))


def _append_result(raw: tuple) -> AppendResult:
    ids, copies = raw
    return AppendResult(ids, _copies(copies))


def _token_count(tokens: Any, num_tokens: int | None) -> tuple[Any, int]:
    """(tokens as int32 array or None, n) for the single-sequence calls."""
    if tokens is None:
        if num_tokens is None:
            raise TypeError("give tokens or num_tokens")
        return None, int(num_tokens)
    tokens = np.ascontiguousarray(tokens, dtype=np.int32)
    if num_tokens is not None and int(num_tokens) != len(tokens):
        raise _from_status("InvalidArgument",
                           f"num_tokens = {num_tokens}: {len(tokens)} tokens were given",
                           payload={"subject": "num_tokens", "value": int(num_tokens)},
                           kv=True)
    return tokens, len(tokens)


class KVAllocator:
    """A paged KV-cache pool: block ids for sequences, with prefix caching,
    copy-on-write forks, a host tier and exact statistics (spec §4.3).

    ``KVAllocator(config)`` or ``KVAllocator(**fields)``, or both (fields
    override the config's); the fields are those of :class:`PoolConfig`. An
    invalid config raises ``KVInvalidArgument`` naming the field.
    """

    __slots__ = ("_a", "__weakref__")

    def __init__(self, config: PoolConfig | None = None, /, **fields: Any):
        if config is None:
            config = PoolConfig(**fields)
        elif fields:
            config = config.replace(**fields)
        self._a = _native.KVAllocator(config)

    # --- lifetime -----------------------------------------------------------

    def close(self) -> None:
        """Releases the pool now (idempotent). A call running in another
        thread completes; later calls raise ``InvalidState`` ("CLOSED")."""
        self._a.close()

    @property
    def closed(self) -> bool:
        return self._a.closed

    def __enter__(self) -> KVAllocator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __copy__(self):
        raise TypeError(
            "a KVAllocator cannot be copied: it owns block ids handed out to live "
            "sequences; create a new one with KVAllocator(allocator.config)")

    def __deepcopy__(self, memo):
        self.__copy__()

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "a KVAllocator cannot be pickled: it owns block ids handed out to live "
            "sequences; pickle allocator.config fields and create a new one")

    def __repr__(self) -> str:
        if self.closed:
            return "KVAllocator(<closed>)"
        s = self._a.stats()
        return (f"KVAllocator(num_blocks={s.total_blocks}, sequences={s.num_sequences}, "
                f"active={s.active_blocks}, cached={s.cached_blocks}, free={s.free_blocks})")

    # --- configuration ------------------------------------------------------

    @property
    def config(self) -> PoolConfig:
        """A copy of the configuration."""
        return self._a.config

    @property
    def geometry(self) -> dict[str, int]:
        """Derived sizes: bytes_per_block (a block's memory), block_stride
        (bytes from one block to the next: bytes_per_block, or with ``kivi``
        the quantized part rounded up to a page plus the f32 tail a block
        uses while it fills), total_bytes and host_total_bytes (blocks ×
        block_stride: the address space of each tier), usable_blocks,
        max_blocks_per_seq, verify_hits."""
        return self._a.geometry

    @property
    def default_pad(self) -> int:
        """The block id padding tables: the null block (0), or -1 without."""
        return self._a.default_pad

    @property
    def poisoned(self) -> bool:
        """True once an impossible state was found: every call then raises
        ``KVInternalError``."""
        return self._a.poisoned

    # --- O1 admission ----------------------------------------------------------

    def add_sequence(self, seq: int, tokens: Sequence[int] | np.ndarray | None = None, *,
                     num_tokens: int | None = None,
                     options: AddOptions | None = None) -> AddResult:
        """Adds sequence ``seq`` (a new id) with its prompt ``tokens`` (int32
        ids; prefix caching reuses the longest cached run of full blocks) or
        with ``num_tokens`` slots and no ids (never cached)."""
        arr, n = _token_count(tokens, num_tokens)
        return _add_result(self._a.add_sequence(seq, n, arr, options))

    def add_sequences(self, seqs: Sequence[int] | np.ndarray,
                      tokens: Sequence[Any] | np.ndarray | None = None, *,
                      num_tokens: int | Sequence[int] | np.ndarray | None = None,
                      options: AddOptions | Sequence[AddOptions | None] | None = None,
                      return_results: bool = False) -> np.ndarray | list[AddResult]:
        """``add_sequence`` for every id of ``seqs`` in order, as one
        all-or-nothing call with the GIL released. ``tokens``: one int32 array
        per sequence (a list, or a 2-D array for equal lengths); or
        ``num_tokens``: one count for all, or one per sequence. ``options``:
        one for all, or one per sequence.

        Returns the cached tokens of each sequence (an int64 array), or the
        full ``AddResult`` list with ``return_results``; read the tables with
        ``write_block_tables``."""
        raw = self._a.add_sequences(seqs, num_tokens, tokens, options,
                                    2 if return_results else 1)
        return [_add_result(r) for r in raw] if return_results else raw

    # --- O2/O3 growth ------------------------------------------------------------

    def append(self, seq: int, tokens: Sequence[int] | np.ndarray | None = None, *,
               num_tokens: int | None = None) -> AppendResult:
        """Grows ``seq`` by ``tokens`` (required when the sequence was added
        with token ids) or by ``num_tokens`` slots: copy-on-write of a shared
        or sealed tail, new blocks at boundaries, full blocks sealed."""
        arr, n = _token_count(tokens, num_tokens)
        return _append_result(self._a.append(seq, n, arr))

    def append_batch(self, seqs: Sequence[int] | np.ndarray,
                     tokens: Sequence[Any] | np.ndarray | None = None, *,
                     num_tokens: int | Sequence[int] | np.ndarray | None = None,
                     return_results: bool = False) -> list[AppendResult] | None:
        """``append`` for every id of ``seqs`` in order, all-or-nothing, GIL
        released. ``tokens``: a 1-D int32 array of one token per sequence (a
        decode step), a 2-D array ``[len(seqs), k]``, or a list of arrays; or
        ``num_tokens``. Returns None, or the ``AppendResult`` list with
        ``return_results`` (copies are also queued for
        ``take_pending_copies``)."""
        raw = self._a.append_batch(seqs, num_tokens, tokens, return_results)
        return [_append_result(r) for r in raw] if return_results else None

    def reserve(self, seq: int, lookahead: int) -> AppendResult:
        """Makes the table cover ``n + lookahead`` slots for speculative
        drafts (replacing an earlier reservation); released by ``append`` or
        ``truncate``. Draft slots are never sealed."""
        return _append_result(self._a.reserve(seq, lookahead))

    # --- O4-O6 ----------------------------------------------------------------------

    def fork(self, parent: int, child: int, pos: int = -1) -> None:
        """``child`` (a new id) shares the first ``ceil(pos / block_size)``
        blocks of ``parent`` (``pos`` -1: all of it). Needs no free block; the
        first writer of a shared partial tail copies it."""
        self._a.fork(parent, child, pos)

    def truncate(self, seq: int, new_n: int) -> None:
        """Shrinks ``seq`` to ``new_n`` tokens (and drops any reservation)."""
        self._a.truncate(seq, new_n)

    def drop_blocks(self, seq: int, first: int, count: int = 1) -> None:
        """Token eviction: removes the ``count`` full blocks at table
        indices ``[first, first + count)`` of ``seq`` and shrinks it by
        ``count * block_size`` tokens (later entries move down). The
        sequence stops tracking token ids, so the blocks it fills afterwards
        are never offered to the prefix cache."""
        self._a.drop_blocks(seq, first, count)

    def free(self, seq: int) -> None:
        """Releases every block of ``seq``, last to first; the id stops being
        live (a second free raises ``UnknownSequence``)."""
        self._a.free(seq)

    def free_batch(self, seqs: Sequence[int] | np.ndarray) -> None:
        """``free`` for every id in order, all-or-nothing, GIL released."""
        self._a.free_batch(seqs)

    # --- O7 kernel views ---------------------------------------------------------------

    def block_table(self, seq: int) -> np.ndarray:
        """A copy of ``seq``'s block table (int32)."""
        return self._a.block_table(seq)

    def write_block_tables(self, seqs: Sequence[int] | np.ndarray, out: np.ndarray,
                           pad: int | None = None) -> np.ndarray:
        """Writes the tables of ``seqs`` into rows ``0..len(seqs)-1`` of
        ``out`` (a writable, C-contiguous 2-D int32 array, e.g. the kernel's
        block-table buffer), padding each row with ``pad`` (default: the null
        block). In place, no copy; fails (writing nothing) if a table is
        longer than a row. Returns ``out``."""
        return self._a.write_block_tables(seqs, out, pad)

    def slot_mapping(self, seq: int, start: int = 0, count: int | None = None,
                     out: np.ndarray | None = None) -> np.ndarray:
        """Slots ``block_id * block_size + offset`` of positions ``start ..
        start + count - 1`` (default: up to ``n + lookahead``), written into
        ``out`` (a writable 1-D int64 array) or a new array. Only slots this
        sequence may write are exposed: a shared partial block raises
        ``InvalidState`` (copy it by appending first)."""
        return self._a.slot_mapping(seq, start, count, out)

    # --- O8/O9 queries -----------------------------------------------------------------

    def lookup_prefix(self, tokens: Sequence[int] | np.ndarray, *,
                      options: AddOptions | None = None) -> int:
        """Tokens ``add_sequence(tokens)`` would take from the cache; changes
        nothing but the ``lookups`` counter."""
        return self._a.lookup_prefix(tokens, options)

    def can_add(self, num_tokens: int, tokens: Sequence[int] | np.ndarray | None = None, *,
                options: AddOptions | None = None) -> bool:
        """Whether ``add_sequence`` would succeed capacity-wise (False exactly
        where it would raise ``KVOutOfBlocks``)."""
        return self._a.can_add(num_tokens, tokens, options)

    def blocks_needed(self, seq: int, k: int) -> int:
        """Blocks ``append(seq, k tokens)`` would take, a pending copy-on-write
        block included."""
        return self._a.blocks_needed(seq, k)

    def num_free_blocks(self) -> int:
        """FREE + CACHED device blocks."""
        return self._a.num_free_blocks()

    def num_evictable_blocks(self) -> int:
        """CACHED device blocks."""
        return self._a.num_evictable_blocks()

    def num_allocatable_blocks(self) -> int:
        """Blocks an allocation may take now."""
        return self._a.num_allocatable_blocks()

    # --- O10 host tier -------------------------------------------------------------------

    def swap_out(self, seq: int) -> None:
        """Moves the blocks ``seq`` owns alone to the host tier (D2H copies)."""
        self._a.swap_out(seq)

    def swap_in(self, seq: int) -> None:
        """Brings a swapped ``seq`` back (H2D copies), all-or-nothing."""
        self._a.swap_in(seq)

    # --- O12/O13 --------------------------------------------------------------------------

    def take_pending_copies(self) -> list[BlockCopy]:
        """The copies to run before this step's kernels; starts a new epoch."""
        return _copies(self._a.take_pending_copies())

    def complete(self, epoch: int) -> int:
        """ASYNC copy mode: the copies of every epoch <= ``epoch`` ran.
        Returns how many copies completed."""
        return self._a.complete(epoch)

    def evict(self, k: int) -> int:
        """Evicts up to ``k`` cached blocks in LRU order; returns the count."""
        return self._a.evict(k)

    def reset_prefix_cache(self) -> None:
        """Drops every hash (weights update); ``InvalidState`` while any block
        is in use."""
        self._a.reset_prefix_cache()

    # --- O14 ------------------------------------------------------------------------------------

    def stats(self) -> Stats:
        """A consistent snapshot of the statistics (spec §4.10)."""
        return self._a.stats()

    def check_invariants(self) -> None:
        """Checks invariants I1-I10 (O(blocks)); raises ``KVInternalError``
        naming the first violated one, which poisons the allocator."""
        self._a.check_invariants()

    def snapshot(self) -> dict[str, Any]:
        """The observable state, for tests and debugging: per tier ``state``,
        ``ref``, ``pins``, ``filled``, ``sealed`` arrays and the free-list
        order; ``sequences`` (id -> state, num_tokens, lookahead, table,
        host_table); ``pending_copies``; ``epoch``; ``stats``."""
        return self._a.snapshot()

    def sequence_info(self, seq: int) -> dict[str, Any]:
        """``seq``'s state, num_tokens, lookahead, num_blocks,
        num_host_blocks, tokens_known."""
        return self._a.sequence_info(seq)

    def metadata_bytes_per_device_block(self) -> float:
        """Allocator metadata per device block (spec T84)."""
        return self._a.metadata_bytes_per_device_block()


#: NumPy dtype of each KV element type (ml_dtypes for bf16 and fp8).
NUMPY_DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int8": np.dtype(np.int8),
    # KIVI pools (quantization="kivi") are viewed as their bytes, typed as a
    # compiled model's kv_pool argument (i8).
    "int4": np.dtype(np.int8),
    "int2": np.dtype(np.int8),
}


class KVMemory:
    """The KV tensors of a pool: one array per tier, allocated from the
    config's geometry (``num_blocks`` × ``bytes_per_block`` for the device
    tier, ``num_host_blocks`` × ``bytes_per_block`` for the host tier; sizes
    overflow-checked, page-aligned, zero-filled).

    ``KVMemory(config)``, ``KVMemory(allocator)`` (its config) or
    ``KVMemory(**fields)``. Every array has the shape
    ``[blocks, num_layers, kv_factor, num_kv_heads, block_size, head_dim]``
    (K is ``kv`` 0, V is 1) and the config's dtype: a paged-attention kernel
    of layer ``l`` reads ``device[:, l]`` and addresses block ``b`` through
    the int32 block tables of ``KVAllocator.write_block_tables``; see
    ``layout`` for the byte strides. The device tier lives in host memory,
    or with ``device="cuda:0"`` (``"hip:0"``) in that GPU's memory,
    allocated and copied through the runtime's GPU driver: a model loaded on
    the same GPU reads and writes it in place (no copy per step), and it is
    reached through ``dlpack()`` rather than NumPy views. The host tier
    stays in host memory.

    A quantized pool (``quantization="per_token_head"`` with ``dtype="int8"``
    or ``"fp8_e4m3"``) stores each (token, head) row as ``head_dim`` one-byte
    codes followed by the row's float32 scale (4 bytes, little-endian;
    element = code × scale, the code an int8 or an FP8 E4M3FN float): its
    arrays are ``[..., block_size, head_dim + 4]`` in the pool's dtype (int8
    or ``ml_dtypes.float8_e4m3fn``, the scale's 4 bytes included as 4
    elements: what a compiled model takes as ``kv_pool``), and ``codes()`` /
    ``scales()`` are strided views of the codes (same dtype) and of the
    scales.

    Views (``device``, ``host``, ``view()``, ``dlpack()``) are zero-copy and
    keep the memory alive: ``close()`` drops this object's reference, and
    the pools go when the last view does. ``apply_copies`` runs the copies
    ``KVAllocator.take_pending_copies`` lists; it is not synchronised with
    other writers of the same blocks (it runs where the runtime runs the
    step's copies: before that step's kernels).
    """

    __slots__ = ("_m", "__weakref__")

    def __init__(self, config: PoolConfig | KVAllocator | None = None, /, *,
                 device: str = "cpu", **fields: Any):
        if isinstance(config, KVAllocator):
            config = config.config
        if config is None:
            config = PoolConfig(**fields)
        elif fields:
            config = config.replace(**fields)
        self._m = _native.KVMemory(config, device)

    # --- lifetime -----------------------------------------------------------

    def close(self) -> None:
        """Drops this object's reference to the memory (idempotent); views
        taken before keep it alive. Later calls raise ``InvalidState``."""
        self._m.close()

    @property
    def closed(self) -> bool:
        return self._m.closed

    def __enter__(self) -> KVMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __copy__(self):
        raise TypeError("a KVMemory cannot be copied: copy its arrays (np.array(mem.device)) "
                        "or create a new one from mem.config")

    def __deepcopy__(self, memo):
        self.__copy__()

    def __reduce_ex__(self, protocol):
        raise TypeError("a KVMemory cannot be pickled: save its arrays and config instead")

    def __repr__(self) -> str:
        if self.closed:
            return "KVMemory(<closed>)"
        lay = self.layout
        return (f"KVMemory(dtype={lay['dtype']}, block_shape={lay['block_shape']}, "
                f"num_blocks={lay['num_blocks']}, num_host_blocks={lay['num_host_blocks']}, "
                f"device_backend={self.backend('device')['name']!r})")

    # --- geometry ------------------------------------------------------------

    @property
    def config(self) -> PoolConfig:
        """A copy of the configuration."""
        return self._m.config

    @property
    def layout(self) -> dict[str, Any]:
        """``dtype``, ``quantization``, ``elem_size``, ``head_dim``,
        ``num_blocks``, ``num_host_blocks``, ``block_shape`` (layers, kv,
        heads, block_size, row: a row is ``head_dim`` elements, or
        ``head_dim + 4`` one-byte elements with ``per_token_head``; with
        ``kivi``, the block's bytes: ``(block_stride,)``),
        ``bytes_per_block`` (a block's memory; with ``kivi`` its quantized
        part, without the tail of a block being filled), the byte strides
        ``block_stride`` (= ``bytes_per_block`` but with ``kivi``), ``layer_stride``,
        ``kv_stride``, ``head_stride``, ``token_stride`` (one row, its scale
        included), and ``scale_size`` (4 with ``per_token_head``, else 0) and
        ``scale_offset`` (the scale's byte offset in a row: ``head_dim ×
        elem_size``)."""
        return self._m.layout

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the elements (ml_dtypes for bf16 and fp8; for a
        quantized pool that of its codes: int8 or float8_e4m3fn; int8, the
        bytes, for a ``kivi`` pool)."""
        return NUMPY_DTYPES[self._m.layout["dtype"]]

    def backend(self, tier: str = "device") -> dict[str, Any]:
        """Where the tier lives: ``name`` ("host" today), ``host_accessible``,
        ``dlpack_device`` (type, id) and ``alignment`` of the pool."""
        return self._m.backend(tier)

    # --- views ---------------------------------------------------------------

    def view(self, tier: str = "device") -> np.ndarray:
        """The tier's pool as a writable NumPy array of shape ``[blocks,
        layers, kv_factor, heads, block_size, head_dim]`` (zero-copy); for a
        ``per_token_head`` pool the raw rows ``[..., head_dim + 4]`` in the
        pool's dtype (int8 or float8_e4m3fn: codes, then the scale's 4
        bytes as 4 elements); for a ``kivi`` pool its bytes ``[blocks,
        block_stride]`` (see sits/runtime/kivi_layout.h)."""
        lay = self._m.layout
        blocks = lay["num_blocks"] if tier == "device" else lay["num_host_blocks"]
        raw = self._m.buffer(tier)
        return raw.view(self.dtype).reshape((blocks, *lay["block_shape"]))

    def codes(self, tier: str = "device") -> np.ndarray:
        """The codes of a quantized (``per_token_head``) pool, in its dtype
        (int8, or ``ml_dtypes.float8_e4m3fn`` for ``fp8_e4m3``): a writable
        zero-copy strided view ``[blocks, layers, kv_factor, heads,
        block_size, head_dim]`` of the tier (the first ``head_dim`` bytes of
        every row). ``TypeError`` for a pool without quantization."""
        lay, raw, blocks, strides = self._quantized(tier, "codes")
        return np.ndarray((blocks, *lay["block_shape"][:4], lay["head_dim"]), self.dtype,
                          buffer=raw, offset=0, strides=(*strides, lay["elem_size"]))

    def scales(self, tier: str = "device") -> np.ndarray:
        """The float32 scales of a quantized (``per_token_head``) pool: a
        writable zero-copy strided view ``[blocks, layers, kv_factor, heads,
        block_size]`` of the tier (bytes ``scale_offset`` to ``scale_offset
        + 4`` of every row; element = code × scale). ``TypeError`` for a pool
        without quantization."""
        lay, raw, blocks, strides = self._quantized(tier, "scales")
        return np.ndarray((blocks, *lay["block_shape"][:4]), np.dtype("<f4"), buffer=raw,
                          offset=lay["scale_offset"] if blocks else 0, strides=strides)

    def _quantized(self, tier: str, what: str) -> tuple[dict[str, Any], np.ndarray, int,
                                                       tuple[int, ...]]:
        lay = self._m.layout
        if lay["scale_size"] == 0:
            raise TypeError(f"KVMemory.{what}() needs a quantized pool "
                            f"(quantization='per_token_head'); this one is "
                            f"quantization={lay['quantization']!r}, dtype={lay['dtype']!r}: "
                            f"use view()")
        raw = self._m.buffer(tier)
        blocks = raw.nbytes // lay["block_stride"]
        strides = (lay["block_stride"], lay["layer_stride"], lay["kv_stride"],
                   lay["head_stride"], lay["token_stride"])
        return lay, raw, blocks, strides

    @property
    def device(self) -> np.ndarray:
        """``view("device")``: the device tier (block 0 is the null block when
        the config reserves it: zeros, never written by copies)."""
        return self.view("device")

    @property
    def host(self) -> np.ndarray:
        """``view("host")``: the host tier (0 blocks without one)."""
        return self.view("host")

    def dlpack(self, tier: str = "device") -> Any:
        """The tier's pool as a DLPack-capable array on its backend's device,
        with the same shape and dtype as ``view()`` (``torch.from_dlpack(
        mem.dlpack())``; bf16 and fp8 included, which NumPy's own DLPack
        cannot carry)."""
        return self._m.dlpack(tier)

    def data_ptr(self, tier: str = "device") -> int:
        """Address of the tier's pool (0 for an empty tier)."""
        return self._m.data_ptr(tier)

    # --- copies --------------------------------------------------------------

    def apply_copies(self, copies: Sequence[BlockCopy] | Sequence[tuple]) -> int:
        """Runs ``copies`` (``KVAllocator.take_pending_copies()``, or any
        ``(epoch, src_tier, src, dst_tier, dst, tokens)`` tuples) in order:
        the first ``tokens`` token slots (rows, scales included) of every
        (layer, kv, head) of block ``dst`` become those of ``src``. All are
        validated first (ids in range, ``tokens`` in ``[0, block_size]``,
        never into the null block): ``KVInvalidArgument`` (with
        ``batch_index``) copies nothing. The GIL is released while the bytes
        move. Returns the number of copies."""
        return self._m.apply_copies(copies)
