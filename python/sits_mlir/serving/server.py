"""sits-runtime serve: an OpenAI-compatible HTTP server over the engine.

    sits-runtime serve --config model.sitsm --host 127.0.0.1 --port 8000

Endpoints: `POST /v1/completions`, `POST /v1/chat/completions` (the model's
chat template), `GET /v1/models`, `GET /health`, `GET /metrics` (Prometheus
text format). Text goes in and out through the tokenizer bundled in the
artifact (`sits_mlir.runtime.text.TextCodec`); without one, completions take
token-id prompts and answer with token ids only.

Threads. One engine thread owns the engine, the KV pool and the tokenizer's
decoders (`EngineWorker`): it admits new requests, applies aborts, steps,
detokenizes the new tokens (incrementally: never half a UTF-8 character),
matches stop strings, and hands each request's events to its handler's
asyncio queue through `loop.call_soon_threadsafe`. The event loop never
waits on a step; a step's kernels run with the GIL released.

Back-pressure. At most `--max-queue` requests wait for their first token;
past that a request is answered 429 with `Retry-After` (an estimate from
recent service times), never queued without bound. A request must fit
`--max-seq-len` (prompt + max_tokens) and the KV pool, or it is a 400 that
says why; the pool is allocated once at start, so load cannot exhaust
memory: when it runs out of blocks the engine preempts (recompute or swap).

Cancellation. A client that disconnects (mid-stream, or while waiting for a
non-streaming answer) has its request aborted (`Engine.abort`) before the
engine's next step, which frees its KV blocks. A stop string ends its sample
on the text; when every sample of a request has ended, the request is
aborted in the engine at once.

`/health` is 200 when the engine thread runs and, with work in flight, has
completed a step within `--stall-timeout` seconds; 503 (with the reason)
otherwise, and while shutting down. SIGINT/SIGTERM: stop admitting (503),
let in-flight requests finish for up to `--shutdown-timeout` seconds, abort
the rest, stop the engine thread.

Errors use OpenAI's shape, `{"error": {"message", "type", "param",
"code"}}`: 400 for malformed JSON and bad fields (validation errors
included), 401 without the API key (`--api-key` or $SITS_API_KEY), 404 for
an unknown model, 429 when the queue is full, 503 when not serving.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hmac
import json
import logging
import math
import os
import sys
import threading
import time
import uuid
from typing import Any, AsyncIterator, Sequence

try:  # at module level: FastAPI resolves the handlers' annotations here
    from starlette.requests import Request
except ImportError:  # the serve extra is missing: main() says so
    Request = Any

__all__ = ["EngineWorker", "ServeOptions", "ServerState", "create_app", "main", "serve"]

log = logging.getLogger("sits_mlir.serving")

#: The most stop strings and stop token ids a request may give.
MAX_STOPS = 16
#: The longest stop string, in characters.
MAX_STOP_LEN = 256
#: The engine's limit on top log-probabilities per token (kMaxLogprobs).
MAX_LOGPROBS = 20
_U64 = 1 << 64


@dataclasses.dataclass
class ServeOptions:
    """What `sits-runtime serve` takes (the names of its options). The KV
    pool fields are those of `sits_mlir.tools.runtime.pool_config`."""

    config: str
    host: str = "127.0.0.1"
    port: int = 8000
    batch_size: int = 8
    max_seq_len: int = 2048
    block_size: int | None = None
    num_blocks: int | None = None
    host_blocks: int = 0
    preemption: str = "recompute"
    no_prefix_caching: bool = False
    kv_budget: int | None = None
    kv_eviction: str = "attention"
    kv_sink_tokens: int = 4
    seed: int = 0
    max_queue: int = 64
    stall_timeout: float = 30.0
    shutdown_timeout: float = 10.0
    api_key: str | None = None
    served_model_name: str | None = None
    trusted_key: list[str] | None = None
    #: "auto": an artifact compiled for a GPU on its kind's first device.
    device: str = "auto"
    log_level: str = "info"


class ApiError(Exception):
    """An error answered in OpenAI's shape."""

    _TYPES = {400: "invalid_request_error", 401: "authentication_error",
              404: "not_found_error", 429: "rate_limit_error",
              500: "server_error", 503: "service_unavailable_error"}

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message,
                          "type": self._TYPES.get(self.status, "server_error"),
                          "param": self.param, "code": self.code}}


# --------------------------------------------------------------------- requests
@dataclasses.dataclass
class GenParams:
    """One generation, checked: what the engine thread is given."""

    prompt_ids: list[int]
    max_tokens: int
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop_ids: list[int] = dataclasses.field(default_factory=list)
    stop_strings: list[str] = dataclasses.field(default_factory=list)
    #: None: no log-probabilities; k >= 0: the sampled token's and k others.
    logprobs: int | None = None
    skip_special_tokens: bool = True
    #: Token eviction keywords of Engine.add_request (the request's own
    #: "kv_budget" / "kv_eviction"), or None for the server's default.
    eviction: dict | None = None


class _SampleState:
    """One sample of a job, on the engine thread: its decoder, the text
    held back while it may be the start of a stop string, and where it is."""

    def __init__(self, decoder, stops: list[str]):
        self.decoder = decoder
        self.stops = stops
        self.buffer = ""
        self.seen = 0  # engine tokens consumed
        self.tokens = 0  # tokens counted as output (up to a stop string)
        self.done = False
        self.reason: str | None = None
        self.last_token_t: float | None = None

    def feed(self, text: str, final: bool) -> tuple[str, bool]:
        """The text that can be emitted after adding `text`, and whether a
        stop string ended the sample (the text is then cut before it)."""
        self.buffer += text
        if self.stops:
            hits = [i for i in (self.buffer.find(s) for s in self.stops) if i >= 0]
            if hits:
                out, self.buffer = self.buffer[:min(hits)], ""
                return out, True
            if not final:
                # Hold back the longest tail that may begin a stop string.
                keep = 0
                for s in self.stops:
                    for size in range(min(len(s) - 1, len(self.buffer)), keep, -1):
                        if self.buffer.endswith(s[:size]):
                            keep = size
                            break
                cut = len(self.buffer) - keep
                out, self.buffer = self.buffer[:cut], self.buffer[cut:]
                return out, False
        out, self.buffer = self.buffer, ""
        return out, False


class Job:
    """One HTTP request's generation, shared by its handler (event loop) and
    the engine thread. Events on `queue`: ("admitted",), ("delta", sample,
    text, token_ids, logprob entries), ("finish", sample, reason), ("end",
    usage), ("error", status, message)."""

    def __init__(self, params: GenParams, loop: asyncio.AbstractEventLoop):
        self.params = params
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue()
        self.arrival = time.monotonic()
        self.rid: int | None = None
        self.samples: list[_SampleState] = []
        self.started = False  # first token seen (it left the queue)
        self.dequeued = False
        self.retired = False
        self.finished = False  # the final event was sent (or nobody listens)
        self.cancel_t: float | None = None

    def emit(self, event: tuple) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)
        except RuntimeError:  # the loop is closed: nobody is listening
            pass

    @property
    def completion_tokens(self) -> int:
        return sum(s.tokens for s in self.samples)


class ServerMetrics:
    """The Prometheus metrics of one server (a registry of its own, so that
    servers in one process do not collide)."""

    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        r = self.registry = CollectorRegistry()
        self.queue_depth = Gauge("sits_queue_depth", "Requests waiting for their first token",
                                 registry=r)
        self.running = Gauge("sits_running_sequences", "Sequences the engine runs", registry=r)
        self.waiting = Gauge("sits_waiting_sequences", "Sequences queued in the engine",
                             registry=r)
        self.kv_used = Gauge("sits_kv_blocks_used", "KV blocks held by sequences", registry=r)
        self.kv_cached = Gauge("sits_kv_blocks_cached",
                               "KV blocks kept for prefix caching (evictable)", registry=r)
        self.kv_free = Gauge("sits_kv_blocks_free", "Free KV blocks", registry=r)
        self.kv_total = Gauge("sits_kv_blocks_total", "Usable KV blocks", registry=r)
        self.in_flight = Gauge("sits_requests_in_flight", "Admitted requests not finished",
                               registry=r)
        self.prefix_hits = Counter("sits_prefix_cache_hit_tokens",
                                   "Prompt tokens served by the prefix cache", registry=r)
        self.prompt_tokens = Counter("sits_prompt_tokens", "Prompt tokens admitted",
                                     registry=r)
        self.generated_tokens = Counter("sits_generation_tokens", "Tokens generated",
                                        registry=r)
        self.steps = Counter("sits_engine_steps", "Engine steps", registry=r)
        self.requests = Counter("sits_requests", "Requests by outcome", ["outcome"],
                                registry=r)
        buckets = (.001, .0025, .005, .01, .025, .05, .075, .1, .15, .2, .3, .5, .75, 1.0,
                   2.5, 5.0, 10.0, 30.0)
        self.ttft = Histogram("sits_time_to_first_token_seconds", "Time to first token",
                              buckets=buckets, registry=r)
        self.itl = Histogram("sits_inter_token_latency_seconds",
                             "Time between the tokens of a sample", buckets=buckets, registry=r)
        self.abort_free = Histogram("sits_abort_to_free_seconds",
                                    "From a cancellation to its KV blocks being free",
                                    buckets=buckets, registry=r)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


# --------------------------------------------------------------------- engine thread
class EngineWorker:
    """The engine thread: owns `engine`, `pool` and the decoders; every
    other thread talks to it through `submit` and `cancel`."""

    def __init__(self, engine, pool, codec, metrics: ServerMetrics, *, max_queue: int,
                 batch_size: int, stall_timeout: float, eviction: dict | None = None):
        self.engine = engine
        #: Token eviction keywords of every request (tools.runtime.eviction_options).
        self.eviction = eviction or {}
        self.pool = pool
        self.codec = codec
        self.metrics = metrics
        self.max_queue = max_queue
        self.batch_size = batch_size
        self.stall_timeout = stall_timeout
        self._cv = threading.Condition()
        self._submits: list[Job] = []
        self._cancels: list[Job] = []
        self._stopping = False
        self._jobs: dict[int, Job] = {}  # engine thread only
        self.queued = 0  # jobs without a first token (guarded by _cv)
        self.active = 0  # jobs submitted and not retired (guarded by _cv)
        self.last_progress = time.monotonic()
        self.broken: BaseException | None = None
        self._step_failures = 0
        self._service_s = 1.0  # moving mean of request durations, for Retry-After
        self._prefix_hits = 0
        self._steps = 0
        self._token_text: dict[int, str] = {}
        #: The latest gauges, for tests and the load script.
        self.snapshot: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, name="sits-engine", daemon=True)

    # ---- any thread
    def start(self) -> None:
        self._publish()
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queues `job`; ApiError 429 (queue full) or 503 (not serving)."""
        with self._cv:
            if self._stopping:
                raise ApiError(503, "the server is shutting down", code="shutting_down")
            if self.broken is not None:
                raise ApiError(503, f"the engine failed: {self.broken}", code="engine_failed")
            if self.queued >= self.max_queue:
                self.metrics.requests.labels("rejected").inc()
                retry = max(1, min(60, math.ceil(self._service_s * (self.queued + 1)
                                                 / self.batch_size)))
                raise ApiError(429, f"the server is at capacity ({self.queued} requests "
                                    f"queued, --max-queue {self.max_queue}): retry later",
                               code="queue_full", headers={"Retry-After": str(retry)})
            if self.active == 0:  # from idle: the stall clock starts now
                self.last_progress = time.monotonic()
            self.queued += 1
            self.active += 1
            self.metrics.queue_depth.set(self.queued)
            self._submits.append(job)
            self._cv.notify()

    def cancel(self, job: Job) -> None:
        """Aborts `job` before the engine's next step (its KV blocks are
        then free); nothing when it has finished."""
        with self._cv:
            if job.finished or job.cancel_t is not None:
                return
            job.cancel_t = time.monotonic()
            self._cancels.append(job)
            self._cv.notify()

    def stop(self, timeout: float | None = None) -> None:
        """Aborts what is in flight and ends the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stopping

    def health(self) -> tuple[bool, str]:
        if self.broken is not None:
            return False, f"the engine failed: {self.broken}"
        if self._stopping:
            return False, "shutting down"
        if not self._thread.is_alive():
            return False, "the engine thread is not running"
        with self._cv:
            active = self.active
        idle = time.monotonic() - self.last_progress
        if active and idle > self.stall_timeout:
            return False, (f"no engine step completed for {idle:.1f} s with {active} "
                           f"requests in flight (--stall-timeout {self.stall_timeout:g})")
        return True, "ok"

    # ---- engine thread
    def _run(self) -> None:
        try:
            while True:
                with self._cv:
                    while not (self._submits or self._cancels or self._stopping or self._jobs):
                        self._cv.wait(1.0)
                    submits, self._submits = self._submits, []
                    cancels, self._cancels = self._cancels, []
                    stopping = self._stopping
                for job in cancels:
                    self._cancel(job)
                for job in submits:
                    if job.cancel_t is None:
                        self._admit(job)
                    else:  # the client left before admission
                        self._retire(job)
                if stopping:
                    self._fail_all(503, "the server is shutting down")
                    break
                if self._jobs:
                    self._step()
                self._publish()
        except BaseException as e:  # a bug: fail what is in flight, report unhealthy
            log.exception("the engine thread failed")
            self.broken = e
            try:
                self._fail_all(500, f"the engine failed: {e}")
            except BaseException:
                log.exception("failing the requests in flight")
        finally:
            self._publish()

    def _admit(self, job: Job) -> None:
        from ..errors import SitsError
        from ..runtime.engine import SamplingParams

        p = job.params
        try:
            rid = self.engine.add_request(
                p.prompt_ids, p.max_tokens, n=p.n,
                sampling=SamplingParams(p.temperature, p.top_k, p.top_p, p.seed),
                stop_token=p.stop_ids, logprobs=p.logprobs,
                **(self.eviction if p.eviction is None else p.eviction))
        except (ValueError, SitsError) as e:  # can never fit, or out of range for the model
            self.metrics.requests.labels("bad_request").inc()
            self._end(job, ("error", 400, str(e)))
            return
        job.rid = rid
        self._jobs[rid] = job
        job.samples = [
            _SampleState(self.codec.incremental_decoder(p.prompt_ids, p.skip_special_tokens)
                         if self.codec is not None else None, p.stop_strings)
            for _ in range(p.n)]
        self.metrics.prompt_tokens.inc(len(p.prompt_ids))
        job.emit(("admitted",))

    def _step(self) -> None:
        try:
            self.engine.step()
            self._step_failures = 0
        except Exception as e:  # a runner error fails its batch (collected below)
            self._step_failures += 1
            log.error("engine step failed: %s", e)
            if self._step_failures >= 2:  # not a one-off: the engine is unusable
                self.broken = e
                self._fail_all(500, f"the engine failed: {e}")
                return
        self._steps += 1
        self.metrics.steps.inc()
        self.last_progress = time.monotonic()
        self._collect()

    def _collect(self) -> None:
        now = time.monotonic()
        for rid, job in list(self._jobs.items()):
            r = self.engine.result(rid)
            if r.error is not None:
                self.metrics.requests.labels("failed").inc()
                self._drop(job)
                self._end(job, ("error", 500, f"generation failed: {r.error}"))
                continue
            for k, sample in enumerate(r.samples):
                self._advance(job, k, sample, now)
            if not r.finished and all(s.done for s in job.samples):
                self.engine.abort(rid)  # every sample hit a stop string
            if r.finished or all(s.done for s in job.samples):
                self._drop(job)
                self.metrics.requests.labels("completed").inc()
                self._service_s = 0.8 * self._service_s + 0.2 * (now - job.arrival)
                usage = {"prompt_tokens": len(job.params.prompt_ids),
                         "completion_tokens": job.completion_tokens,
                         "total_tokens": len(job.params.prompt_ids) + job.completion_tokens}
                self._end(job, ("end", usage))

    def _advance(self, job: Job, k: int, sample, now: float) -> None:
        """Hands sample `k`'s new tokens to the job as text."""
        st = job.samples[k]
        if st.done:
            return
        tokens = sample.tokens
        new = tokens[st.seen:]
        final = sample.finish_reason in ("stop", "length")
        if not new and not final:
            return
        pieces, ids, entries = [], [], []
        for i in range(st.seen, len(tokens)):
            if not job.started:
                job.started = True
                self._dequeue(job)
                self.metrics.ttft.observe(now - job.arrival)
            elif st.last_token_t is not None:
                self.metrics.itl.observe(now - st.last_token_t)
            st.last_token_t = now
            st.tokens += 1
            tok = tokens[i]
            ids.append(tok)
            if job.params.logprobs is not None:
                top = sample.top_logprobs[i] if sample.top_logprobs else []
                entries.append((tok, sample.logprobs[i], top))
            if sample.finish_reason == "stop" and i == len(tokens) - 1:
                continue  # a stop token: not part of the text
            if st.decoder is not None:
                pieces.append(st.decoder.push(tok))
        self.metrics.generated_tokens.inc(len(new))
        st.seen = len(tokens)
        if final and st.decoder is not None:
            pieces.append(st.decoder.flush())
        text, stopped = st.feed("".join(pieces), final)
        if stopped or final:
            st.done = True
            st.reason = "stop" if stopped else sample.finish_reason
        if text or ids:
            job.emit(("delta", k, text, ids, entries))
        if st.done:
            job.emit(("finish", k, st.reason))

    def _cancel(self, job: Job) -> None:
        if job.rid is not None and job.rid in self._jobs:
            self.engine.abort(job.rid)  # frees the blocks now
            self._drop(job)
            self.metrics.abort_free.observe(time.monotonic() - job.cancel_t)
            self.metrics.requests.labels("cancelled").inc()
        self._retire(job)
        job.finished = True

    def _drop(self, job: Job) -> None:
        """Forgets the job's engine request (finished or aborted)."""
        del self._jobs[job.rid]
        self.engine.release(job.rid)

    def _end(self, job: Job, event: tuple) -> None:
        self._retire(job)
        job.finished = True
        job.emit(event)

    def _dequeue(self, job: Job) -> None:
        if not job.dequeued:
            job.dequeued = True
            with self._cv:
                self.queued -= 1

    def _retire(self, job: Job) -> None:
        self._dequeue(job)
        if not job.retired:
            job.retired = True
            with self._cv:
                self.active -= 1

    def _fail_all(self, status: int, message: str) -> None:
        for job in list(self._jobs.values()):
            try:
                self.engine.abort(job.rid)
                self.engine.release(job.rid)
            except Exception:  # a broken engine refuses; the requests end anyway
                log.exception("aborting request %d", job.rid)
            del self._jobs[job.rid]
            self._end(job, ("error", status, message))
        with self._cv:
            pending, self._submits = self._submits, []
        for job in pending:
            self._end(job, ("error", status, message))

    def _publish(self) -> None:
        """Gauges from the engine and the pool (only this thread reads them)."""
        m = self.metrics
        stats = self.pool.stats()
        em = self.engine.metrics
        hits = em["prefix_cache_hit_tokens"]
        m.prefix_hits.inc(hits - self._prefix_hits)
        self._prefix_hits = hits
        snap = {"queue_depth": self.queued, "in_flight": self.active,
                "running_sequences": self.engine.num_running,
                "waiting_sequences": self.engine.num_waiting,
                "kv_blocks_used": stats.active_blocks, "kv_blocks_cached": stats.cached_blocks,
                "kv_blocks_free": stats.free_blocks, "kv_blocks_total": stats.usable_blocks,
                "sequences": stats.num_sequences, "steps": self._steps}
        m.queue_depth.set(snap["queue_depth"])
        m.in_flight.set(snap["in_flight"])
        m.running.set(snap["running_sequences"])
        m.waiting.set(snap["waiting_sequences"])
        m.kv_used.set(snap["kv_blocks_used"])
        m.kv_cached.set(snap["kv_blocks_cached"])
        m.kv_free.set(snap["kv_blocks_free"])
        m.kv_total.set(snap["kv_blocks_total"])
        self.snapshot = snap

    def token_text(self, token: int) -> str:
        """A token's own text (special tokens included), for log-probabilities."""
        text = self._token_text.get(token)
        if text is None:
            text = (self.codec.decode([token], skip_special_tokens=False)
                    if self.codec is not None else "")
            self._token_text[token] = text
        return text


# --------------------------------------------------------------------- the model
class ServerState:
    """The loaded model, its engine thread and the request parsing: what the
    app serves. `load` builds it from ServeOptions."""

    def __init__(self, options: ServeOptions, worker: EngineWorker, *, vocab: int,
                 model_name: str):
        self.options = options
        self.worker = worker
        self.codec = worker.codec
        self.metrics = worker.metrics
        self.vocab = vocab
        self.model_name = model_name
        self.created = int(time.time())
        self.draining = False
        key = options.api_key if options.api_key is not None else os.environ.get("SITS_API_KEY")
        self.api_key = key or None

    @classmethod
    def load(cls, options: ServeOptions) -> "ServerState":
        """Loads the artifact, allocates the KV pool (refused when it would
        not fit the memory left) and starts the engine thread."""
        from ..runtime import kv
        from ..runtime.decoder import PagedRunner, PastKVRunner
        from ..runtime.engine import Engine
        from ..runtime.model import load
        from ..runtime.text import TextCodec
        from ..tools.runtime import (decoder_geometry, eviction_options, fitting_pool_config,
                                     model_device)

        model = load(options.config, device=model_device(options.config, options.device),
                     trusted_keys=options.trusted_key)
        geometry = decoder_geometry(model)
        config = fitting_pool_config(options, geometry, model.device)
        codec = TextCodec.from_artifact(model)
        pool = kv.KVAllocator(config)
        runner_type = PagedRunner if geometry["paged"] else PastKVRunner
        # A paged model on a GPU reads its pool in place there.
        memory = kv.KVMemory(pool, device=model.device if geometry["paged"] else "cpu")
        engine = Engine(pool, runner_type(model, memory),
                        max_batch_size=options.batch_size, seed=options.seed,
                        preemption=options.preemption)
        worker = EngineWorker(engine, pool, codec, ServerMetrics(), max_queue=options.max_queue,
                              batch_size=options.batch_size, stall_timeout=options.stall_timeout,
                              eviction=eviction_options(options))
        name = options.served_model_name or os.path.splitext(
            os.path.basename(options.config))[0]
        state = cls(options, worker, vocab=geometry["vocab"], model_name=name)
        state.model = model  # keeps the mapped artifact alive
        worker.start()
        return state

    def close(self) -> None:
        self.worker.stop()

    # ---- checks
    def check_auth(self, request) -> None:
        if self.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(),
                                                                 self.api_key.encode()):
            raise ApiError(401, "a valid API key is required (Authorization: Bearer <key>)",
                           code="invalid_api_key")

    def parse(self, body: Any, chat: bool) -> tuple[GenParams, dict]:
        """The generation a request body asks for, and what shapes the answer
        (stream, include_usage, logprobs); ApiError 400 naming the field."""
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        f = _Fields(body)
        model = f.get("model", str)
        if model is not None and model != self.model_name:
            raise ApiError(404, f"the model '{model}' does not exist: this server serves "
                                f"'{self.model_name}'", param="model", code="model_not_found")
        for name in ("presence_penalty", "frequency_penalty"):
            if f.number(name, -2.0, 2.0, 0.0) != 0.0:
                raise ApiError(400, f"'{name}' is not supported (only 0)", param=name)
        if f.get("logit_bias", dict):
            raise ApiError(400, "'logit_bias' is not supported", param="logit_bias")
        if f.get("tools", list) or f.get("functions", list):
            raise ApiError(400, "tools and functions are not supported", param="tools")
        if f.get("response_format", dict) not in (None, {"type": "text"}):
            raise ApiError(400, "only response_format {\"type\": \"text\"} is supported",
                           param="response_format")
        if not chat:
            if f.flag("echo", False):
                raise ApiError(400, "'echo' is not supported", param="echo")
            if f.get("suffix", str):
                raise ApiError(400, "'suffix' is not supported", param="suffix")
        n = f.integer("n", 1, self.options.batch_size, 1)
        best_of = f.integer("best_of", 1, self.options.batch_size, None)
        if best_of is not None and best_of != n:
            raise ApiError(400, "'best_of' other than n is not supported", param="best_of")
        if chat:
            prompt_ids = self._chat_prompt(f)
            max_tokens = f.integer("max_completion_tokens", 1, 1 << 31, None)
            if max_tokens is None:
                max_tokens = f.integer("max_tokens", 1, 1 << 31, None)
            if f.flag("logprobs", False):
                logprobs = f.integer("top_logprobs", 0, MAX_LOGPROBS, 0)
            else:
                logprobs = None
                if f.get("top_logprobs", int) is not None:
                    raise ApiError(400, "'top_logprobs' needs 'logprobs': true",
                                   param="top_logprobs")
        else:
            prompt_ids = self._completion_prompt(f)
            max_tokens = f.integer("max_tokens", 1, 1 << 31, None)
            logprobs = f.integer("logprobs", 0, MAX_LOGPROBS, None)
        limit = self.options.max_seq_len
        if len(prompt_ids) >= limit:
            raise ApiError(400, f"the prompt is {len(prompt_ids)} tokens, and --max-seq-len "
                                f"{limit} leaves no room for output (prompt + max_tokens must "
                                f"be at most {limit})", param="messages" if chat else "prompt",
                           code="context_length_exceeded")
        if max_tokens is None:  # OpenAI's completions default, else what is left
            max_tokens = min(16, limit - len(prompt_ids)) if not chat else limit - len(prompt_ids)
        elif len(prompt_ids) + max_tokens > limit:
            raise ApiError(400, f"prompt ({len(prompt_ids)} tokens) + max_tokens ({max_tokens}) "
                                f"= {len(prompt_ids) + max_tokens} exceeds --max-seq-len "
                                f"{limit}", param="max_tokens", code="context_length_exceeded")
        stop_strings, stop_ids = self._stops(f)
        if not f.flag("ignore_eos", False) and self.codec is not None:
            stop_ids += [t for t in self.codec.eos_token_ids if t not in stop_ids]
        if stop_strings and self.codec is None:
            raise ApiError(400, "stop strings need a tokenizer, and this model bundles none",
                           param="stop")
        top_k = f.integer("top_k", -1, 1 << 31, 0)
        # Token eviction (an extension): the request's own KV budget.
        eviction = None
        budget = f.integer("kv_budget", 1, 1 << 31, None)
        policy = f.get("kv_eviction", str)
        if policy is not None and policy not in ("attention", "window"):
            raise ApiError(400, f"'kv_eviction' must be 'attention' or 'window', got "
                                f"{json.dumps(policy)[:40]}", param="kv_eviction")
        if policy is not None and budget is None:
            raise ApiError(400, "'kv_eviction' needs 'kv_budget'", param="kv_eviction")
        if budget is not None:
            eviction = {"kv_budget": budget, "eviction": policy or "attention",
                        "sink_tokens": self.options.kv_sink_tokens}
        params = GenParams(
            prompt_ids=prompt_ids, max_tokens=max_tokens, n=n,
            temperature=f.number("temperature", 0.0, 2.0, 1.0),
            top_p=f.number("top_p", 0.0, 1.0, 1.0, open_low=True),
            top_k=max(top_k, 0), seed=f.integer("seed", -(1 << 63), _U64 - 1, None),
            stop_ids=stop_ids, stop_strings=stop_strings, logprobs=logprobs,
            skip_special_tokens=f.flag("skip_special_tokens", True), eviction=eviction)
        if params.seed is not None and params.seed < 0:  # two's complement, as a u64
            params.seed += _U64
        stream = f.flag("stream", False)
        options = f.get("stream_options", dict)
        if options is not None and not stream:
            raise ApiError(400, "'stream_options' needs 'stream': true", param="stream_options")
        include_usage = bool(options and options.get("include_usage"))
        if options and not isinstance(options.get("include_usage", False), bool):
            raise ApiError(400, "'stream_options.include_usage' must be a boolean",
                           param="stream_options")
        # The generated token ids (an extension, as vLLM's return_token_ids):
        # asked for, or all there is without a tokenizer.
        token_ids = f.flag("return_token_ids", False) or self.codec is None
        return params, {"stream": stream, "include_usage": include_usage,
                        "logprobs": logprobs, "token_ids": token_ids}

    def _completion_prompt(self, f: "_Fields") -> list[int]:
        prompt = f.body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            if self.codec is None:
                raise ApiError(400, "this model bundles no tokenizer: give the prompt as "
                                    "token ids", param="prompt")
            ids = self.codec.encode(prompt)
        elif isinstance(prompt, list) and prompt and all(
                isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = prompt
            for i, t in enumerate(ids):
                if not 0 <= t < self.vocab:
                    raise ApiError(400, f"prompt[{i}] = {t}: token ids must be in "
                                        f"[0, {self.vocab})", param="prompt")
        elif isinstance(prompt, list) and len(prompt) > 1:
            raise ApiError(400, "one prompt per request is supported (use n for several "
                                "samples)", param="prompt")
        else:
            raise ApiError(400, "'prompt' must be a string or a non-empty list of token ids",
                           param="prompt")
        if not ids:
            raise ApiError(400, "'prompt' encodes to no tokens", param="prompt")
        return list(ids)

    def _chat_prompt(self, f: "_Fields") -> list[int]:
        messages = f.body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty list", param="messages")
        if self.codec is None:
            raise ApiError(400, "this model bundles no tokenizer: chat needs one",
                           param="messages")
        plain = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise ApiError(400, f"messages[{i}] must be an object with a string 'role'",
                               param="messages")
            content = m.get("content")
            if isinstance(content, list):  # content parts: text only
                texts = []
                for part in content:
                    if not (isinstance(part, dict) and part.get("type") == "text"
                            and isinstance(part.get("text"), str)):
                        raise ApiError(400, f"messages[{i}].content: only text parts are "
                                            "supported", param="messages")
                    texts.append(part["text"])
                content = "".join(texts)
            elif content is None:
                content = ""
            elif not isinstance(content, str):
                raise ApiError(400, f"messages[{i}].content must be a string or a list of "
                                    "text parts", param="messages")
            plain.append({"role": m["role"], "content": content})
        try:
            text = self.codec.apply_chat_template(plain, add_generation_prompt=True)
        except ValueError as e:
            raise ApiError(400, str(e), param="messages") from None
        ids = self.codec.encode(text, add_special_tokens=False)
        if not ids:
            raise ApiError(400, "the chat template rendered no tokens", param="messages")
        return ids

    def _stops(self, f: "_Fields") -> tuple[list[str], list[int]]:
        stop = f.body.get("stop")
        items = [] if stop is None else [stop] if isinstance(stop, (str, int)) else stop
        if not isinstance(items, list) or len(items) > MAX_STOPS:
            raise ApiError(400, f"'stop' must be a string or a list of at most {MAX_STOPS} "
                                "strings or token ids", param="stop")
        extra = f.body.get("stop_token_ids") or []
        if not isinstance(extra, list) or len(extra) > MAX_STOPS:
            raise ApiError(400, f"'stop_token_ids' must be a list of at most {MAX_STOPS} "
                                "token ids", param="stop_token_ids")
        strings, ids = [], []
        for item in items + extra:
            if isinstance(item, str) and item:
                if len(item) > MAX_STOP_LEN:
                    raise ApiError(400, f"stop strings must be at most {MAX_STOP_LEN} "
                                        "characters", param="stop")
                strings.append(item)
            elif isinstance(item, int) and not isinstance(item, bool) and 0 <= item < self.vocab:
                ids.append(item)
            else:
                raise ApiError(400, f"stop entry {json.dumps(item)[:40]}: stop strings must be "
                                    f"non-empty, token ids in [0, {self.vocab})", param="stop")
        return strings, ids

    # ---- generation
    async def generate(self, request, params: GenParams, shape: dict, chat: bool):
        from fastapi.responses import JSONResponse, StreamingResponse

        if self.draining:
            raise ApiError(503, "the server is shutting down", code="shutting_down")
        job = Job(params, asyncio.get_running_loop())
        self.worker.submit(job)
        worker = self.worker

        class JobStream(StreamingResponse):
            async def __call__(self, scope, receive, send) -> None:
                try:
                    await super().__call__(scope, receive, send)
                finally:  # also when the body never started (the client left first)
                    if not job.finished:
                        worker.cancel(job)

        try:
            first = await _next_event(job, request)
            if first[0] == "error":
                raise ApiError(first[1], first[2])
            if shape["stream"]:
                return JobStream(self._sse(job, shape, chat), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
            texts = [""] * params.n
            ids: list[list[int]] = [[] for _ in range(params.n)]
            reasons: list[str | None] = [None] * params.n
            lps: list[list] = [[] for _ in range(params.n)]
            while True:
                event = await _next_event(job, request)
                kind = event[0]
                if kind == "delta":
                    texts[event[1]] += event[2]
                    ids[event[1]].extend(event[3])
                    lps[event[1]].extend(event[4])
                elif kind == "finish":
                    reasons[event[1]] = event[2]
                elif kind == "error":
                    raise ApiError(event[1], event[2])
                elif kind == "end":
                    usage = event[1]
                    break
        except BaseException:  # the client left, or the answer failed: stop generating
            self.worker.cancel(job)
            raise
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        choices = []
        for k in range(params.n):
            logprobs = self._logprobs(lps[k], chat) if shape["logprobs"] is not None else None
            if chat:
                choices.append({"index": k, "message": {"role": "assistant", "content": texts[k]},
                                "logprobs": logprobs, "finish_reason": reasons[k]})
            else:
                choices.append({"index": k, "text": texts[k], "logprobs": logprobs,
                                "finish_reason": reasons[k]})
            if shape["token_ids"]:
                choices[-1]["token_ids"] = ids[k]
        return JSONResponse({"id": rid, "object": "chat.completion" if chat else "text_completion",
                             "created": int(time.time()), "model": self.model_name,
                             "choices": choices, "usage": usage})

    async def _sse(self, job: Job, shape: dict, chat: bool) -> AsyncIterator[str]:
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        kind_name = "chat.completion.chunk" if chat else "text_completion"
        n = job.params.n
        offsets = [0] * n

        def chunk(choices: list, usage: dict | None = None) -> str:
            body = {"id": rid, "object": kind_name, "created": created,
                    "model": self.model_name, "choices": choices}
            if shape["include_usage"]:
                body["usage"] = usage
            return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

        try:
            if chat:
                yield chunk([{"index": k, "delta": {"role": "assistant", "content": ""},
                              "logprobs": None, "finish_reason": None} for k in range(n)])
            while True:
                event = await job.queue.get()
                kind = event[0]
                if kind == "delta":
                    _, k, text, ids, entries = event
                    if not text and shape["logprobs"] is None and not shape["token_ids"]:
                        continue  # tokens that end no character yet: nothing to send
                    logprobs = None
                    if shape["logprobs"] is not None:
                        logprobs = self._logprobs(entries, chat, offsets[k])
                    offsets[k] += len(text)
                    if chat:
                        choice = {"index": k, "delta": {"content": text}, "logprobs": logprobs,
                                  "finish_reason": None}
                    else:
                        choice = {"index": k, "text": text, "logprobs": logprobs,
                                  "finish_reason": None}
                    if shape["token_ids"]:
                        choice["token_ids"] = ids
                    yield chunk([choice])
                elif kind == "finish":
                    _, k, reason = event
                    choice = ({"index": k, "delta": {}, "logprobs": None, "finish_reason": reason}
                              if chat else {"index": k, "text": "", "logprobs": None,
                                            "finish_reason": reason})
                    yield chunk([choice])
                elif kind == "end":
                    if shape["include_usage"]:
                        yield chunk([], event[1])
                    yield "data: [DONE]\n\n"
                    return
                elif kind == "error":
                    yield f"data: {json.dumps(ApiError(event[1], event[2]).body())}\n\n"
                    yield "data: [DONE]\n\n"
                    return
        finally:  # the client disconnected (the task was cancelled), or we are done
            if not job.finished:
                self.worker.cancel(job)

    def _logprobs(self, entries: list, chat: bool, offset: int = 0) -> dict:
        """OpenAI's logprobs object of (token, logprob, top) entries."""
        text_of = self.worker.token_text
        if chat:
            def item(tok, lp):
                t = text_of(tok)
                return {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))}
            return {"content": [{**item(tok, lp), "top_logprobs": [item(a, b) for a, b in top]}
                                for tok, lp, top in entries]}
        tokens, token_logprobs, tops, offsets = [], [], [], []
        for tok, lp, top in entries:
            t = text_of(tok)
            tokens.append(t)
            token_logprobs.append(lp)
            best = {text_of(a): b for a, b in top}
            best.setdefault(t, lp)
            tops.append(best)
            offsets.append(offset)
            offset += len(t)
        return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": tops,
                "text_offset": offsets}


class _Disconnected(Exception):
    """The client went away while its request was waiting."""


async def _next_event(job: Job, request, poll_s: float = 0.25) -> tuple:
    """The job's next event, watching for the client going away meanwhile."""
    getter = asyncio.ensure_future(job.queue.get())
    try:
        while True:
            done, _ = await asyncio.wait({getter}, timeout=poll_s)
            if done:
                return getter.result()
            if await request.is_disconnected():
                raise _Disconnected()
    finally:
        if not getter.done():
            getter.cancel()


class _Fields:
    """Typed access to a request body's fields (ApiError 400 naming the
    field for a wrong type or range; None and absent give the default)."""

    def __init__(self, body: dict):
        self.body = body

    def get(self, name: str, kind: type):
        v = self.body.get(name)
        if v is None:
            return None
        if kind is int and isinstance(v, bool) or not isinstance(v, kind):
            raise ApiError(400, f"'{name}' must be a {_KIND_NAMES[kind]}, got "
                                f"{json.dumps(v)[:40]}", param=name)
        return v

    def flag(self, name: str, default: bool) -> bool:
        v = self.get(name, bool)
        return default if v is None else v

    def integer(self, name: str, low: int, high: int, default):
        v = self.body.get(name)
        if v is None:
            return default
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ApiError(400, f"'{name}' must be an integer, got {json.dumps(v)[:40]}",
                           param=name)
        if not low <= v <= high:
            raise ApiError(400, f"'{name}' = {v} must be in [{low}, {high}]", param=name)
        return v

    def number(self, name: str, low: float, high: float, default: float, *,
               open_low: bool = False) -> float:
        v = self.body.get(name)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ApiError(400, f"'{name}' must be a number, got {json.dumps(v)[:40]}",
                           param=name)
        if not (low < v if open_low else low <= v) or v > high:
            raise ApiError(400, f"'{name}' = {v} must be in {'(' if open_low else '['}{low}, "
                                f"{high}]", param=name)
        return float(v)


_KIND_NAMES = {str: "string", int: "integer", bool: "boolean", dict: "JSON object",
               list: "list"}


# --------------------------------------------------------------------- the app
def create_app(state: ServerState, *, owns_state: bool = True):
    """The FastAPI app over `state`; with `owns_state` its shutdown stops
    the engine thread."""
    import contextlib

    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, PlainTextResponse, Response
    from starlette.exceptions import HTTPException

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        state.draining = True
        if owns_state:
            # In-flight requests have finished or been cancelled by now
            # (uvicorn waits up to timeout_graceful_shutdown); abort the rest.
            await asyncio.get_running_loop().run_in_executor(None, state.close)

    app = FastAPI(title="sits-runtime serve", lifespan=lifespan, docs_url=None,
                  redoc_url=None, openapi_url=None)
    app.state.sits = state

    def error(e: ApiError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(ApiError)
    async def _api_error(request, e: ApiError):
        return error(e)

    @app.exception_handler(RequestValidationError)
    async def _validation(request, e: RequestValidationError):
        errors = e.errors()
        where = ".".join(str(p) for p in errors[0].get("loc", ())[1:]) if errors else None
        message = errors[0].get("msg", "invalid request") if errors else "invalid request"
        return error(ApiError(400, f"{where}: {message}" if where else message, param=where))

    @app.exception_handler(HTTPException)
    async def _http(request, e: HTTPException):
        return error(ApiError(e.status_code, str(e.detail)))

    @app.exception_handler(_Disconnected)
    async def _gone(request, e):
        return Response(status_code=499)

    @app.exception_handler(Exception)
    async def _internal(request, e: Exception):
        log.exception("request failed")
        return error(ApiError(500, f"internal error: {type(e).__name__}: {e}"))

    async def body_of(request: Request) -> Any:
        raw = await request.body()
        try:
            return json.loads(raw)
        except RecursionError:
            raise ApiError(400, "the JSON is nested too deeply") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the request body is not valid JSON: {e}") from None

    @app.post("/v1/completions")
    async def completions(request: Request):
        state.check_auth(request)
        params, shape = state.parse(await body_of(request), chat=False)
        return await state.generate(request, params, shape, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        state.check_auth(request)
        params, shape = state.parse(await body_of(request), chat=True)
        return await state.generate(request, params, shape, chat=True)

    @app.get("/v1/models")
    async def models(request: Request):
        state.check_auth(request)
        return {"object": "list", "data": [
            {"id": state.model_name, "object": "model", "created": state.created,
             "owned_by": "sits", "max_model_len": state.options.max_seq_len}]}

    @app.get("/health")
    async def health():
        ok, why = state.worker.health()
        if state.draining:
            ok, why = False, "shutting down"
        return JSONResponse({"status": "ok" if ok else "unavailable", "reason": why},
                            status_code=200 if ok else 503)

    @app.get("/metrics")
    async def metrics():
        from prometheus_client import CONTENT_TYPE_LATEST

        return PlainTextResponse(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return app


# --------------------------------------------------------------------- running it
def _uvicorn_server(state: ServerState, app, **config):
    """A uvicorn Server whose exit (signal or should_exit) first stops
    admission."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            state.draining = True
            super().handle_exit(sig, frame)
            # The graceful shutdown answers the signal: exit 0 afterwards
            # rather than have uvicorn raise it again.
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    return Server(uvicorn.Config(app, host=state.options.host, port=state.options.port,
                                 log_level=state.options.log_level,
                                 timeout_graceful_shutdown=state.options.shutdown_timeout,
                                 **config))


def serve(options: ServeOptions) -> None:
    """Loads the model and serves until SIGINT/SIGTERM."""
    state = ServerState.load(options)
    try:
        server = _uvicorn_server(state, create_app(state))
        server.run()
    finally:
        state.close()


def _parser() -> argparse.ArgumentParser:
    from ..tools.runtime import add_pool_arguments

    p = argparse.ArgumentParser(
        prog="sits-runtime serve",
        description="Serve a compiled decoder over an OpenAI-compatible HTTP API.")
    p.add_argument("--config", required=True, metavar="SITSM", help="the compiled decoder")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: "
                                                       "127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument("--served-model-name", metavar="NAME",
                   help="the model's id in the API (default: the artifact's file name)")
    p.add_argument("--batch-size", type=int, default=8, metavar="N",
                   help="sequences per step (default: 8)")
    p.add_argument("--max-seq-len", type=int, default=2048, metavar="N",
                   help="longest sequence, prompt + max_tokens (default: 2048)")
    p.add_argument("--max-queue", type=int, default=64, metavar="N",
                   help="requests waiting for their first token before 429s (default: 64)")
    p.add_argument("--stall-timeout", type=float, default=30.0, metavar="S",
                   help="/health is 503 when work is in flight and no step completed for "
                        "this long (default: 30)")
    p.add_argument("--shutdown-timeout", type=float, default=10.0, metavar="S",
                   help="on SIGINT/SIGTERM, how long in-flight requests may finish before "
                        "they are aborted (default: 10)")
    p.add_argument("--api-key", metavar="KEY",
                   help="require 'Authorization: Bearer KEY' (default: $SITS_API_KEY)")
    p.add_argument("--seed", type=int, default=0, help="seed of unseeded requests' sampling")
    add_pool_arguments(p)
    p.add_argument("--log-level", default="info",
                   choices=("critical", "error", "warning", "info", "debug"))
    return p


def options_from_args(args: argparse.Namespace) -> ServeOptions:
    """ServeOptions of parsed arguments; ValueError for out-of-range values."""
    for name in ("batch_size", "max_seq_len", "max_queue", "block_size", "num_blocks"):
        v = getattr(args, name)
        if v is not None and v <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive")
    if not 0 < args.port < 65536:
        raise ValueError("--port must be in [1, 65535]")
    if args.host_blocks < 0:
        raise ValueError("--host-blocks must be >= 0")
    if not 0 <= args.seed < _U64:
        raise ValueError("--seed must be in [0, 2^64)")
    if not args.stall_timeout > 0 or not args.shutdown_timeout >= 0:
        raise ValueError("--stall-timeout must be positive and --shutdown-timeout >= 0")
    fields = {f.name for f in dataclasses.fields(ServeOptions)}
    return ServeOptions(**{k: v for k, v in vars(args).items() if k in fields})


def main(argv: Sequence[str] | None = None) -> int:
    """`sits-runtime serve ...`."""
    args = _parser().parse_args(argv)
    try:
        options = options_from_args(args)
    except ValueError as e:
        print(f"sits-runtime serve: error: {e}", file=sys.stderr)
        return 2
    if args.threads:
        os.environ["SITS_NUM_THREADS"] = str(args.threads)
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        print(f"sits-runtime serve: error: {e.name} is missing: install the server with "
              "pip install 'sits-mlir[serve]'", file=sys.stderr)
        return 1
    from ..errors import SitsError

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(message)s")
    try:
        serve(options)
    except (OSError, ValueError, SitsError) as e:
        print(f"sits-runtime serve: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
