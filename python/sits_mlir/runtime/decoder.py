"""Serving a compiled decoder from the paged KV pool.

`PagedRunner` runs a decoder compiled with `kv_cache="paged"`: its
attention reads every sequence's context through the block tables and writes
the new tokens' K/V into their slots, in the pool itself, for the whole batch
in one call. `PastKVRunner` runs a decoder with the exported signature, which
takes the past K/V contiguous (`input_ids`, `position_ids`, `past_key_<l>`,
`past_value_<l>` -> `logits`, `present_key_<l>`, `present_value_<l>`), by
copying each sequence's context out of the pool and back; it is the
reference the paged path is checked against.

    from sits_mlir.runtime import kv
    from sits_mlir.runtime.decoder import PastKVRunner
    from sits_mlir.runtime.engine import Engine, GREEDY

    pool = kv.KVAllocator(num_blocks=256, block_size=16, num_layers=2,
                          num_kv_heads=2, head_dim=16, dtype="f32", max_seq_len=512)
    runner = PastKVRunner(sits_mlir.runtime.load("llama.sitsm"), kv.KVMemory(pool))
    engine = Engine(pool, runner, max_batch_size=8)

The pool is the only place K/V live: every step gathers each sequence's
past from its blocks into contiguous arrays, runs the model on the new
tokens, and scatters the new tokens' K/V into their slots. That costs a copy
of the context per step, which a paged-attention kernel (reading the blocks
in place) avoids; the results are the same, so this runner is the reference
the paged path is checked against.
"""

from __future__ import annotations

import numpy as np

from .. import _sits_runtime as _native
from .engine import StepBatch

__all__ = ["PagedRunner", "PastKVRunner"]


def _vocab_size(entry, logits_output: int) -> int:
    """The static last extent of the logits output (0 when dynamic): the
    engine refuses token ids at or past it."""
    outputs = entry.outputs
    if not 0 <= logits_output < len(outputs) or not outputs[logits_output].shape:
        return 0
    return max(int(outputs[logits_output].shape[-1]), 0)


class PagedRunner:
    """An engine `ModelRunner` over a decoder compiled with
    `kv_cache="paged"` (see `sits_mlir.compile`). `memory` is the pool's
    `KVMemory`; its device pool is passed to the model, which updates it in
    place. A step runs as at most two calls: the decoding sequences (one new
    token each) together, and the prefilling ones together, left-padded to
    the longest (padding tokens have slot -1 and write nothing).

    The runner is native (C++): an `Engine` given this runner runs whole
    steps without Python, with the GIL released. `execute(batch)` runs one
    step from Python (for wrappers and tests)."""

    def __init__(self, model, memory, *, logits_output: int = 0):
        self.model = model
        self.memory = memory
        entry = model.default_entry
        #: The native runner the engine drives; it checks the signature and
        #: the pool (ValueError).
        self.native = _native.PagedRunner(model._module, memory._m, entry.name, logits_output,
                                          entry.shape_function or "")
        self.takes_positions = self.native.takes_positions
        self.block_size = self.native.block_size
        self.logits_output = logits_output
        self.vocab_size = _vocab_size(entry, logits_output)

    @property
    def steps(self) -> int:
        """Steps run (`execute` calls, by the engine or directly)."""
        return self.native.steps

    @property
    def calls(self) -> int:
        """Model calls (at most two per step)."""
        return self.native.calls

    def execute(self, batch: StepBatch) -> np.ndarray:
        """Logits [len(batch.sequences), vocab] of each sequence's last new
        token, after running the batch's copies."""
        return self.native.execute(batch.copies, batch.sequences)


class PastKVRunner:
    """An engine `ModelRunner` over a compiled decoder with contiguous past
    K/V inputs. `model` is a loaded artifact (`CompiledModel`), `memory` the
    pool's `KVMemory` (f32, the model's layers, K/V heads and head size).
    Sequences run one at a time (each has its own context length, and the
    exported graph has no padding mask)."""

    def __init__(self, model, memory, *, past_names: str = "past_{kind}_{layer}",
                 logits_output: int = 0):
        self.model = model
        self.memory = memory
        blocks, layers, kv_factor, heads, block_size, head_dim = memory.device.shape
        if kv_factor != 2:
            raise ValueError(f"the pool must hold K and V (kv_factor 2), got {kv_factor}")
        if memory.device.dtype != np.float32:
            raise ValueError(f"the pool must be float32, got {memory.device.dtype}")
        self.layers, self.heads, self.block_size, self.head_dim = layers, heads, block_size, head_dim
        self.names = [(past_names.format(kind="key", layer=i), past_names.format(kind="value", layer=i))
                      for i in range(layers)]
        self.logits_output = logits_output
        self.vocab_size = _vocab_size(model.default_entry, logits_output)
        self.steps = 0

    def _gather(self, table: np.ndarray, count: int, layer: int, kind: int) -> np.ndarray:
        """[1, heads, count, head_dim] from the first `count` slots of a
        block table."""
        pos = np.arange(count)
        blocks = table[pos // self.block_size]
        cache = self.memory.device[:, layer, kind]  # [blocks, heads, bs, d]
        return np.ascontiguousarray(
            cache[blocks, :, pos % self.block_size, :].transpose(1, 0, 2)[None])

    def execute(self, batch: StepBatch) -> np.ndarray:
        self.memory.apply_copies(batch.copies)
        rows = []
        for seq in batch.sequences:
            new = len(seq.token_ids)
            past = seq.context_len - new
            feeds = {"input_ids": np.asarray(seq.token_ids, np.int64)[None],
                     "position_ids": np.asarray(seq.positions, np.int64)[None]}
            for layer, (key, value) in enumerate(self.names):
                feeds[key] = self._gather(seq.block_table, past, layer, 0)
                feeds[value] = self._gather(seq.block_table, past, layer, 1)
            outputs = self.model.run(**feeds)
            logits = outputs[self.logits_output]
            presents = [o for i, o in enumerate(outputs) if i != self.logits_output]
            if len(presents) != 2 * self.layers:
                raise ValueError(f"the model returns {len(presents)} K/V tensors, "
                                 f"expected {2 * self.layers}")
            slots = np.asarray(seq.slot_mapping, np.int64)
            blocks, offsets = slots // self.block_size, slots % self.block_size
            for layer in range(self.layers):
                for kind in (0, 1):
                    present = presents[2 * layer + kind]  # [1, heads, past + new, d]
                    if present.shape != (1, self.heads, past + new, self.head_dim):
                        raise ValueError(f"present K/V of layer {layer} has shape "
                                         f"{present.shape}, expected "
                                         f"{(1, self.heads, past + new, self.head_dim)}")
                    self.memory.device[blocks, layer, kind, :, offsets, :] = \
                        present[0, :, past:, :].transpose(1, 0, 2)
            rows.append(logits[0, -1])
        self.steps += 1
        return np.stack(rows).astype(np.float32, copy=False)
