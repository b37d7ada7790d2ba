"""Fuzz target: the serving request path of `sits-runtime`. The input is a
prompts file (one JSON request per line, at most `MAX_REQUESTS` lines): each
line goes through the CLI's parsing and validation (`tools.runtime.parse_request`)
and then to the engine (`sits_mlir.runtime.engine.Engine`) serving a tiny
GPT-2 decoder (models/gpt2_tiny.onnx) compiled at start, which runs until
every request is done.

Contract: a bad request raises a `ValueError` (the CLI's validation, JSON or
UTF-8 decoding, or the engine's `KVInvalidArgument`) or a `KVError`
(`KVCapacityError`: it can never fit the pool); an accepted one generates:
`n` samples of 1 to `max_new_tokens` token ids of the vocabulary, ending
with `stop_token` when that stopped them. Any other exception, an engine
that does not finish within a bound on its steps, a native crash, a hang
or an out-of-memory is a finding. The engine's configuration (paged or
contiguous KV cache, batch size, pool size, swap or recompute preemption)
is one of `CONFIGS`, picked by a hash of the input: deterministic.

    python test/fuzz/engine_request_fuzz.py --seconds 600
    python test/fuzz/engine_request_fuzz.py crash-1234     # reproduce one input
"""

from __future__ import annotations

import json
import pathlib
import random
import subprocess
import sys
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _harness  # noqa: E402

with _harness.instrumented("sits_mlir.errors", "sits_mlir.runtime", "sits_mlir.tools.runtime"):
    from sits_mlir.runtime import errors, kv
    from sits_mlir.runtime.decoder import PagedRunner, PastKVRunner
    from sits_mlir.runtime.engine import Engine, SamplingParams
    from sits_mlir.runtime.model import load
    from sits_mlir.tools import runtime as cli

NAME = "engine_request"
MAX_LEN = 1 << 14
MAX_REQUESTS = 4

#: Engine configurations: (KV cache of the model, sits-runtime flags).
CONFIGS = [
    ("contiguous", ["--batch-size", "4", "--max-seq-len", "64", "--block-size", "4",
                    "--output-len", "8"]),
    ("paged", ["--batch-size", "4", "--max-seq-len", "64", "--output-len", "8"]),
    # Few blocks: preemption by recompute, prefix caching.
    ("paged", ["--batch-size", "4", "--max-seq-len", "32", "--num-blocks", "9",
               "--output-len", "16"]),
    # Swap preemption to a host tier.
    ("paged", ["--batch-size", "2", "--max-seq-len", "32", "--num-blocks", "9",
               "--host-blocks", "16", "--preemption", "swap", "--output-len", "12"]),
    ("contiguous", ["--batch-size", "8", "--max-seq-len", "24", "--block-size", "8",
                    "--num-blocks", "5", "--no-prefix-caching", "--temperature", "0.7",
                    "--top-k", "5", "--seed", "3", "--output-len", "4"]),
    ("paged", ["--batch-size", "1", "--max-seq-len", "96", "--output-len", "3",
               "--top-p", "0.5"]),
]

#: The decoder: GPT-2 exported with its KV cache (make_corpus.py --decoder),
#: compiled with the exported signature and with kv_cache="paged", in a
#: subprocess (the compiler stays out of the fuzzing process).
DECODER = _harness.FUZZ_DIR / "models" / "gpt2_tiny.onnx"
_COMPILE = r'''
import sys
import sits_mlir

onnx_path, out = sys.argv[1], sys.argv[2]
sits_mlir.compile(onnx_path, "cpu", f"{out}/contiguous.sitsm", threads=1)
sits_mlir.compile(onnx_path, "cpu", f"{out}/paged.sitsm", threads=1, kv_cache="paged",
                  kv_block_size=4)
'''

_MODELS: dict = {}


def setup() -> None:
    if _MODELS:
        return
    out = _harness.scratch_dir() / "decoder"
    out.mkdir(exist_ok=True)
    if not (out / "paged.sitsm").exists():
        subprocess.run([sys.executable, "-c", _COMPILE, str(DECODER), str(out)], check=True,
                       env=_harness.plain_env())
    for kind in ("contiguous", "paged"):
        model = load(out / f"{kind}.sitsm")
        _MODELS[kind] = (model, cli.decoder_geometry(model))


def _engine(kind: str, args):
    """The pool and engine `sits_mlir.tools.runtime.run` builds."""
    model, geometry = _MODELS[kind]
    config = cli.pool_config(args, geometry)
    config.validate()
    pool = kv.KVAllocator(config)
    runner = (PagedRunner if geometry["paged"] else PastKVRunner)(model, kv.KVMemory(pool))
    engine = Engine(pool, runner, max_batch_size=args.batch_size, seed=args.seed,
                    preemption=args.preemption)
    return engine, geometry["vocab"]


def _check_result(result, r: dict, vocab: int) -> None:
    assert result.finished, result
    if result.error is not None:
        assert isinstance(result.error, errors.SitsError), repr(result.error)
        _harness.note(f"accepted request failed: {type(result.error).__name__}: "
                      f"{str(result.error)[:120]}", json.dumps(r).encode())
        return
    assert len(result.samples) == r["n"], (len(result.samples), r)
    for s in result.samples:
        tokens = s.tokens
        assert 1 <= len(tokens) <= r["max_new_tokens"], (len(tokens), r)
        assert all(isinstance(t, int) and 0 <= t < vocab for t in tokens), tokens
        assert s.finish_reason in ("stop", "length"), s.finish_reason
        if s.finish_reason == "stop":
            assert r["stop_token"] is not None and tokens[-1] == r["stop_token"], (s, r)
        else:
            assert len(tokens) == r["max_new_tokens"], (s, r)
        if r["stop_token"] is not None:
            assert r["stop_token"] not in tokens[:-1], (s, r)


def one_input(data: bytes) -> None:
    if not _MODELS:
        setup()
    try:
        text = data.decode("utf-8")  # as sits-runtime reads a prompts file
    except UnicodeDecodeError:
        return
    lines = [line for line in text.splitlines() if line.strip()][:MAX_REQUESTS]
    if not lines:
        return
    kind, flags = CONFIGS[zlib.crc32(data) % len(CONFIGS)]
    args = _ARGS[tuple(flags)]
    engine, vocab = _engine(kind, args)
    accepted = []
    for line in lines:
        try:
            r = cli.parse_request(line, args, vocab)
        except ValueError as e:  # json.JSONDecodeError too
            _harness.feedback("request", type(e).__name__, str(e)[:60])
            continue
        try:
            sampling = SamplingParams(r["temperature"], r["top_k"], r["top_p"], r["seed"])
            rid = engine.add_request(r["prompt_ids"], r["max_new_tokens"], sampling=sampling,
                                     n=r["n"], stop_token=r["stop_token"])
        except (ValueError, errors.KVError) as e:
            _harness.feedback("add_request", type(e).__name__, str(e)[:60])
            if not isinstance(e, errors.KVCapacityError):
                # _request promises that what it accepts can only fail for
                # capacity: a gap in its validation.
                _harness.note(f"validated request refused: {type(e).__name__}: "
                              f"{str(e)[:120]}", data)
            continue
        accepted.append((rid, r))
    # Every accepted request fits the pool alone, so the engine finishes:
    # each step makes progress on some sequence.
    budget = 16 + 8 * sum(r["n"] * (len(r["prompt_ids"]) + r["max_new_tokens"])
                          for _, r in accepted)
    steps = 0
    while engine.has_unfinished:
        engine.step()
        steps += 1
        assert steps <= budget, f"the engine has not finished after {steps} steps"
    m = engine.metrics
    _harness.feedback("engine", kind, len(accepted), min(m["preemptions"], 4),
                      min(m["swap_outs"], 4), m["prefix_cache_hit_tokens"] > 0)
    for rid, r in accepted:
        result = engine.result(rid)
        _harness.feedback("finish", *sorted({s.finish_reason for s in result.samples}))
        _check_result(result, r, vocab)


_ARGS = {tuple(flags): cli._parser().parse_args(["--config", "decoder.sitsm", "--synthetic", "1",
                                                 *flags])
         for _, flags in CONFIGS}


# -- seeds and the structure-aware mutator ----------------------------------------

SEEDS = [
    {"prompt_ids": [1, 2, 3]},
    {"prompt_ids": [5, 9, 33, 1], "max_new_tokens": 6, "temperature": 0.8, "top_k": 5,
     "top_p": 0.9, "seed": 7},
    {"prompt_ids": [40, 41, 42, 43, 44, 45, 46], "n": 2, "stop_token": 17, "max_new_tokens": 12},
    {"prompt_ids": [7] * 20, "max_new_tokens": 30, "temperature": 0},
    {"prompt_ids": [63, 0], "max_new_tokens": 1, "n": 4, "temperature": 1.5, "seed": 0},
]


def seeds() -> list[bytes]:
    lines = [json.dumps(s) for s in SEEDS]
    out = [line.encode() for line in lines]
    out.append("\n".join(lines[:3]).encode())  # a batch, sharing nothing
    out.append(("\n".join(json.dumps({"prompt_ids": [3, 1, 4, 1, 5, 9, 2, 6][:k] + [k],
                                      "max_new_tokens": 9}) for k in range(1, 5))).encode())
    return out


_KEYS = ["prompt_ids", "max_new_tokens", "n", "temperature", "top_k", "top_p", "seed",
         "stop_token", "prompt", "unknown"]
_INTS = [0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65, 95, 96, 97, 128, -1, -2,
         2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30]
_FLOATS = [0.0, -0.0, 0.5, 1.0, 1.5, 2.0, 1e-45, 1e-300, 1e300, -1.0, float("inf"),
           float("nan"), 1.0000001, 0.9999999]


def _value(rng: random.Random, key: str):
    r = rng.random()
    if key == "prompt_ids" and r < 0.7:
        length = rng.choice([1, 1, 2, 3, 5, 8, 16, 31, 32, 33, 63, 64, 65, 100])
        ids = [rng.randrange(64) for _ in range(length)]
        if rng.random() < 0.3:
            ids[rng.randrange(length)] = rng.choice(_INTS + [1.0, True, None, "1", [1]])
        return ids
    if r < 0.5:
        return rng.choice(_INTS)
    if r < 0.75:
        return rng.choice(_FLOATS)
    return rng.choice([None, True, False, "", "7", [], {}, [1, 2], {"a": 1}])


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return _harness.raw_mutate(data, max_size, seed)
    if not lines:
        lines = [json.dumps(rng.choice(SEEDS))]
    r = rng.random()
    i = rng.randrange(len(lines))
    if r < 0.7:
        try:
            obj = json.loads(lines[i])
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            for _ in range(rng.choice([1, 1, 2, 3])):
                key = rng.choice(_KEYS)
                if key in obj and rng.random() < 0.2:
                    del obj[key]
                elif key == "prompt_ids" and isinstance(obj.get(key), list) and obj[key] \
                        and rng.random() < 0.5:
                    ids = obj[key]
                    k = rng.randrange(len(ids))
                    if rng.random() < 0.5:
                        ids[k] = rng.randrange(64)
                    elif rng.random() < 0.5:
                        ids.insert(k, rng.randrange(64))
                    else:
                        del ids[k]
                else:
                    obj[key] = _value(rng, key)
            lines[i] = json.dumps(obj)
        else:
            lines[i] = json.dumps(rng.choice(SEEDS))
    elif r < 0.8:
        t = rng.random()
        if t < 0.4 and len(lines) < MAX_REQUESTS + 1:
            lines.insert(i, rng.choice(lines + [json.dumps(rng.choice(SEEDS))]))
        elif t < 0.7 and len(lines) > 1:
            del lines[i]
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
    elif r < 0.85:
        depth = rng.choice([10, 100, 1000, 3000])
        lines[i] = rng.choice([
            "[" * depth + "]" * depth,
            '{"prompt_ids": ' + "[" * depth + "1" + "]" * depth + "}",
            '{"prompt_ids": [1], "seed": ' + "9" * rng.choice([20, 4300, 5000]) + "}",
            '{"prompt_ids": [1], "temperature": NaN}',
            '{"prompt_ids": [1], "top_p": Infinity}',
            '{"prompt_ids": [1], "prompt_ids": [2, 3]}',
            '{"prompt_ids": [1.0e0]}',
            '{"prompt_ids": [1], "max_new_tokens": 1e2}',
            "\ufeff" + json.dumps(rng.choice(SEEDS)),
            "", "null", "true", '"prompt_ids"', "{}",
        ])
    else:
        return _harness.raw_mutate(data, max_size, seed)
    out = "\n".join(lines).encode("utf-8", "surrogatepass")
    return out if len(out) <= max_size else data


if __name__ == "__main__":
    sys.exit(_harness.main(NAME, one_input, custom_mutator=mutate, seeds=seeds, setup=setup,
                           max_len=MAX_LEN))
