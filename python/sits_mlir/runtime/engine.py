"""The generation engine: continuous batching over the paged KV pool.

    import numpy as np
    from sits_mlir.runtime import kv
    from sits_mlir.runtime.engine import Engine, SamplingParams

    pool = kv.KVAllocator(num_blocks=4096, block_size=16, num_layers=32,
                          num_kv_heads=8, head_dim=128, dtype="bf16")

    class Runner:                                   # the model, one step at a time
        def execute(self, batch):                   # -> float32 [len(batch.sequences), vocab]
            mem.apply_copies(batch.copies)          # CoW / offload / onboard / swap first
            ...                                     # K/V of seq.token_ids at seq.slot_mapping,
                                                    # attention over seq.block_table
    engine = Engine(pool, Runner(), max_batch_size=8)
    rid = engine.add_request(prompt_ids, max_new_tokens=64, n=2,
                             sampling=SamplingParams(temperature=0.8, top_p=0.95, seed=1))
    engine.run_until_done()
    engine.result(rid).samples[0].tokens

``engine.abort(rid)`` ends a request early (finish reason ``"abort"``) and
frees its KV blocks at once.

All the work happens in the C++ core (runtime/src/engine, design note
runtime/src/engine/README.md): each ``step()`` decodes one token for every
running sequence, preempts the newest one when the pool runs out of blocks
(by recompute, or ``preemption="swap"`` to the host tier), admits waiting
requests (prefix caching through the allocator's token-aware add) within
``max_batch_size``, forks requests with ``n > 1`` after their prompt, calls
the runner once and samples. Sampling (greedy, temperature, top-k, top-p) is
keyed by (seed, sample, step), so results do not depend on batching,
preemption or prefix caching.

The engine must be the allocator's only user. A Python runner is called
with the GIL held; an exception it raises fails that step's requests and is
raised again by ``step()`` / ``run_until_done()``. The paged decoder's runner
(``sits_mlir.runtime.decoder.PagedRunner``) is native: steps run in C++
with the GIL released, and a failed model call raises its typed error the
same way. Bad arguments raise
``KVInvalidArgument`` (a ``ValueError``) naming the field; a request that can
never fit raises ``KVCapacityError``.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Protocol, Sequence

import numpy as np

from .. import _sits_runtime as _native
from . import kv as _kv
from .errors import _from_status

__all__ = ["Engine", "ModelRunner", "RequestResult", "Sample", "SamplingParams",
           "ScheduledSequence", "StepBatch", "sample"]


class SamplingParams(NamedTuple):
    """``temperature`` 0 is greedy; ``top_k`` 0 and ``top_p`` 1 are off;
    ``seed`` None keys the draws by the engine seed and the request id."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None


GREEDY = SamplingParams(temperature=0.0)


class ScheduledSequence(NamedTuple):
    """One sequence of a step: the tokens whose K/V to compute, their
    positions and slots (block_id * block_size + offset), the whole block
    table and the context length after the step."""

    seq_id: int
    is_prefill: bool
    token_ids: np.ndarray  # int32
    positions: np.ndarray  # int64
    slot_mapping: np.ndarray  # int64
    block_table: np.ndarray  # int32
    context_len: int


class StepBatch(NamedTuple):
    """What the runner gets: copies to run first, then the sequences."""

    copies: list[_kv.BlockCopy]
    sequences: list[ScheduledSequence]


class ModelRunner(Protocol):
    def execute(self, batch: StepBatch) -> np.ndarray:
        """Returns float32 logits [len(batch.sequences), vocab]: the last
        position of each sequence."""


class Sample(NamedTuple):
    tokens: list[int]
    #: "stop", "length", "error", "abort", or "none" while running.
    finish_reason: str
    #: With `logprobs` >= 0: per token, its log-probability under the
    #: model (log-softmax of the raw logits, before temperature and filters).
    logprobs: list[float] | None = None
    #: With `logprobs` k > 0: per token, the k most likely (token, logprob).
    top_logprobs: list[list[tuple[int, float]]] | None = None
    #: With `return_logits`: [tokens, vocab] float32, the raw logits row each
    #: token was drawn (or forced) from.
    logits: np.ndarray | None = None


class RequestResult(NamedTuple):
    id: int
    finished: bool
    samples: list[Sample]
    #: arrival_s, first_token_s, finish_s, ttft_s, tpot_s, prompt_tokens,
    #: output_tokens, cached_tokens, preemptions.
    metrics: dict[str, Any]
    #: Why the request failed (a SitsError), or None.
    error: Exception | None


class Engine:
    """Continuous batching of requests over ``allocator`` (a
    :class:`kv.KVAllocator`, which the engine must be the only user of) with
    ``runner`` (:class:`ModelRunner`)."""

    def __init__(self, allocator: _kv.KVAllocator, runner: ModelRunner, *,
                 max_batch_size: int = 8, seed: int = 0, preemption: str = "recompute",
                 vocab_size: int | None = None):
        """`vocab_size` (default: the runner's `vocab_size` attribute, which
        the compiled-model runners have) bounds the token ids of requests:
        one past it is refused by `add_request`, never read out of the
        embedding table."""
        self._runner = runner
        if vocab_size is None:
            vocab_size = getattr(runner, "vocab_size", None) or 0

        def call(copies: list, seqs: list) -> np.ndarray:
            batch = StepBatch(_kv._copies(copies), [ScheduledSequence(**d) for d in seqs])
            return np.ascontiguousarray(runner.execute(batch), dtype=np.float32)

        native_alloc = allocator._a if isinstance(allocator, _kv.KVAllocator) else allocator
        # The paged decoder's runner is native: whole steps run in C++
        # (unless a subclass overrides execute).
        from .decoder import PagedRunner

        native = isinstance(runner, PagedRunner) and \
            type(runner).execute is PagedRunner.execute
        self._e = _native.Engine(native_alloc, runner.native if native else call,
                                 max_batch_size, seed, preemption, int(vocab_size))
        self._allocator = allocator  # keeps the pool alive

    def add_request(self, prompt: Sequence[int] | np.ndarray, max_new_tokens: int = 16, *,
                    sampling: SamplingParams | None = None, n: int = 1,
                    stop_token: int | Iterable[int] | None = None,
                    logprobs: int | None = None, kv_budget: int | None = None,
                    eviction: str = "attention", sink_tokens: int = 4,
                    recent_tokens: int | None = None, observe: int = 32,
                    forced_tokens: Sequence[int] | None = None,
                    return_logits: bool = False) -> int:
        """Queues a request; returns its id. `stop_token`: one stop token id
        or several (any of them ends a sample). `logprobs`: None records no
        log-probabilities, 0 the sampled tokens', k in [1, 20] also the k
        most likely tokens' at each step (`Sample.logprobs`,
        `Sample.top_logprobs`).

        `kv_budget`: token eviction. After each step a sequence holding more
        than `kv_budget` tokens in the KV pool drops whole blocks until it
        holds at most that many; the first `sink_tokens` (attention sinks)
        and the last `recent_tokens` (default: a quarter of the budget for
        "attention", none for "window") are kept. `eviction`: "attention"
        (H2O/SnapKV: the block that received the least attention weight,
        accumulated over layers, heads, the prompt's last `observe` queries
        and every decode step; a compiled paged runner only) or "window"
        (StreamingLLM: the oldest block after the sinks). None: no
        eviction.

        `forced_tokens`: tokens every sample emits in place of drawing, one
        per step, before sampling takes over (teacher forcing: score a given
        continuation). `return_logits`: keep each step's raw logits row
        (`Sample.logits`)."""
        p = sampling if sampling is not None else SamplingParams()
        return self._e.add_request([int(t) for t in np.asarray(prompt).reshape(-1)],
                                   max_new_tokens, p.temperature, p.top_k, p.top_p,
                                   p.seed, n, _stop_tokens(stop_token),
                                   -1 if logprobs is None else logprobs,
                                   "none" if kv_budget is None else eviction,
                                   0 if kv_budget is None else kv_budget, sink_tokens,
                                   -1 if recent_tokens is None else recent_tokens, observe,
                                   [int(t) for t in forced_tokens or ()], return_logits)

    def step(self) -> None:
        self._e.step()

    def run_until_done(self) -> None:
        self._e.run_until_done()

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int = 16, *,
                 sampling: SamplingParams | None = None, n: int = 1,
                 stop_token: int | Iterable[int] | None = None) -> list[RequestResult]:
        """Adds the prompts, runs to completion, returns (and releases) their
        results in order."""
        ids = [self.add_request(p, max_new_tokens, sampling=sampling, n=n,
                                stop_token=stop_token) for p in prompts]
        self.run_until_done()
        out = [self.result(i) for i in ids]
        for i in ids:
            self.release(i)
        return out

    def result(self, request_id: int) -> RequestResult:
        rid, finished, error, samples, metrics = self._e.result(request_id)
        exc = None
        if error is not None:
            exc = _from_status(error[0], error[1], kv=True, payload={})
        return RequestResult(rid, finished,
                             [Sample(t.tolist(), reason,
                                     None if lp is None else lp.tolist(),
                                     None if top is None else
                                     [[(int(a), float(b)) for a, b in row] for row in top],
                                     logits)
                              for t, reason, lp, top, logits in samples],
                             metrics, exc)

    def release(self, request_id: int) -> None:
        """Forgets a finished request."""
        self._e.release(request_id)

    def abort(self, request_id: int) -> None:
        """Finishes an unfinished request now: its unfinished samples end
        with finish reason "abort" (keeping the tokens drawn so far) and
        its KV blocks are free when this returns. A finished request is left
        as it is; an unknown (or released) id raises KVInvalidArgument (a
        ValueError). Call it between steps, from the thread that steps."""
        self._e.abort(request_id)

    @property
    def metrics(self) -> dict[str, Any]:
        """steps, prefills, decodes, computed_tokens, output_tokens,
        preemptions, swap_outs, swap_ins, prefix_cache_hit_tokens,
        requests_finished, requests_failed, requests_aborted, busy_s, tokens_per_s,
        kv_blocks_peak, kv_utilization_peak, kv_utilization_mean, mean_ttft_s,
        mean_tpot_s."""
        return self._e.metrics()

    @property
    def has_unfinished(self) -> bool:
        return self._e.has_unfinished

    @property
    def num_running(self) -> int:
        return self._e.num_running

    @property
    def num_waiting(self) -> int:
        return self._e.num_waiting

    @property
    def num_swapped(self) -> int:
        return self._e.num_swapped


def _stop_tokens(stop: int | Iterable[int] | None) -> list[int]:
    """The stop token ids as a list: None, one id, or an iterable of ids
    (checked by the engine)."""
    if stop is None:
        return []
    if isinstance(stop, (int, np.integer)):
        return [int(stop)]
    return [int(t) for t in stop]


def sample(logits: np.ndarray, params: SamplingParams = GREEDY, *, stream: int = 0,
           step: int = 0) -> int:
    """One draw of the engine's sampler from a logits row, keyed by
    (params.seed or 0, stream, step)."""
    row = np.ascontiguousarray(logits, dtype=np.float32).reshape(-1)
    return _native.engine_sample(row, params.temperature, params.top_k, params.top_p,
                                 params.seed or 0, stream, step)
