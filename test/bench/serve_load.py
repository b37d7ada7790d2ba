"""Load test of `sits-runtime serve` (a benchmark, not a test).

    python test/bench/serve_load.py --config model.sitsm [--requests 64]
    python test/bench/serve_load.py --tiny            # builds the tests' tiny Llama first

Starts `sits-runtime serve` on the artifact as a process of its own on
127.0.0.1 (so that the client does not share its interpreter), then drives `/v1/completions` with streaming requests at each
concurrency (default 1, 8, 32): random prompts (words of the tokenizer's
text, `--prompt-len` tokens ±50%) and random output lengths (`--output-len`
±50%, EOS ignored so that every request generates exactly its length). With
`--client aiperf` (the `bench` extra) the load comes from `aiperf profile`
instead of the script's own asyncio + httpx client.

Prints one row per concurrency: time to first token and inter-token
latency (p50, p99), output tokens/s, requests completed and failed (429s
counted apart), and the KV blocks in use once the run is over (must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python" / "serving"))


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


async def _one(client, url: str, model: str, prompt: str, max_tokens: int, out: dict) -> None:
    """One streamed completion: its TTFT, inter-token gaps and tokens."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "temperature": 0, "ignore_eos": True, "return_token_ids": True}
    start = time.perf_counter()
    last = None
    tokens = 0
    try:
        async with client.stream("POST", url + "/v1/completions", json=body) as r:
            if r.status_code == 429:
                out["rejected"] += 1
                return
            if r.status_code != 200:
                out["errors"] += 1
                return
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    out["errors"] += 1
                    return
                got = sum(len(c.get("token_ids") or []) for c in chunk["choices"])
                if not got:
                    continue
                now = time.perf_counter()
                if last is None:
                    out["ttft"].append(now - start)
                else:
                    # Tokens of one chunk arrived together: spread the gap.
                    out["itl"].extend([(now - last) / got] * got)
                last = now
                tokens += got
    except Exception:  # a transport failure counts as an error, not a crash of the bench
        out["errors"] += 1
        return
    out["tokens"] += tokens
    out["completed"] += 1


async def _drive(url: str, model: str, prompts: list[tuple[str, int]], concurrency: int) -> dict:
    import httpx

    out = {"ttft": [], "itl": [], "tokens": 0, "completed": 0, "errors": 0, "rejected": 0}
    queue = list(prompts)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        async def worker():
            while queue:
                prompt, max_tokens = queue.pop()
                await _one(client, url, model, prompt, max_tokens, out)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        out["wall_s"] = time.perf_counter() - start
    return out


def _aiperf(url: str, model: str, args, concurrency: int, count: int, tokenizer: str) -> dict:
    """One run of `aiperf profile` at `concurrency` (synthetic prompts
    tokenized with the served model's own tokenizer, the folder
    `tokenizer`); its JSON export's statistics in the script's shape."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["aiperf", "profile", "--model", model, "--url", url, "--endpoint-type",
               "completions", "--streaming", "--concurrency", str(concurrency),
               "--request-count", str(count), "--tokenizer", tokenizer,
               "--prompt-input-tokens-mean", str(args.prompt_len),
               "--prompt-input-tokens-stddev", str(args.prompt_len // 4),
               "--prompt-output-tokens-mean", str(args.output_len),
               "--prompt-output-tokens-stddev", str(args.output_len // 4),
               "--extra-inputs", "ignore_eos:true", "--random-seed", str(args.seed),
               # Output tokens as the server counts them (usage): text
               # re-tokenized merges differently from the ids generated.
               "--use-server-token-count", "--output-artifact-dir", tmp]
        # aiperf in offline mode looks tokenizers up in the hub's cache only,
        # never at a local path.
        env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - start
        found = sorted(pathlib.Path(tmp).rglob("profile_export_aiperf.json"))
        if done.returncode != 0 or not found:
            raise RuntimeError(f"aiperf failed (exit {done.returncode}):\n"
                               f"{(done.stderr or done.stdout)[-2000:]}")
        stats = json.loads(found[0].read_text())
    stats = stats.get("records", stats)

    def stat(name, key):
        entry = stats.get(name) or {}
        return float(entry.get(key) or 0)

    ms = 1e-3  # aiperf reports milliseconds
    return {"ttft_p": (stat("time_to_first_token", "p50") * ms,
                       stat("time_to_first_token", "p99") * ms),
            "itl_p": (stat("inter_token_latency", "p50") * ms,
                      stat("inter_token_latency", "p99") * ms),
            "tokens_per_s": stat("output_token_throughput", "avg"),
            "completed": int(stat("request_count", "avg") or count),
            "errors": int(stat("error_request_count", "avg")), "rejected": 0,
            "wall_s": wall}


def _tokenizer_folder(artifact: str, folder: pathlib.Path) -> str:
    """The artifact's bundled tokenizer files written to `folder`, which
    aiperf loads as a Hugging Face tokenizer."""
    from sits_mlir.runtime.text import _artifact_files

    folder.mkdir(parents=True, exist_ok=True)
    for name, data in _artifact_files(artifact).items():
        (folder / name).write_bytes(data)
    return str(folder)


def _prompts(codec, count: int, args, rng: random.Random) -> list[tuple[str, int]]:
    """Random prompts of about --prompt-len tokens and output lengths."""
    words = [w for w in (codec.decode([t]).strip() for t in range(codec.vocab_size)) if w]

    def length(mean):
        return rng.randint(max(1, mean // 2), max(1, mean + mean // 2))

    out = []
    for _ in range(count):
        target, text = length(args.prompt_len), ""
        while len(codec.encode(text)) < target:
            text += " " + rng.choice(words)
        out.append((text.strip(), length(args.output_len)))
    return out


@contextlib.contextmanager
def _served(artifact: str, args):
    """`sits-runtime serve` in a subprocess; yields its URL, SIGTERM at the end."""
    from server_helpers import free_port, wait_healthy

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sits_mlir.tools.runtime", "serve",
                             "--config", artifact, "--port", str(port), "--served-model-name",
                             "bench", "--batch-size", str(args.batch_size), "--max-seq-len",
                             str(args.max_seq_len), "--max-queue", str(args.max_queue),
                             "--log-level", "warning"])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, 120)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _kv_blocks_in_use(url: str, timeout: float = 30) -> int:
    """sits_kv_blocks_used once nothing is in flight (or at the timeout)."""
    import httpx
    from server_helpers import metric

    deadline = time.monotonic() + timeout
    while True:
        text = httpx.get(url + "/metrics").text
        used = int(metric(text, "sits_kv_blocks_used"))
        if (used == 0 and metric(text, "sits_requests_in_flight") == 0) \
                or time.monotonic() > deadline:
            return used
        time.sleep(0.05)


def _tiny_artifact(workdir: pathlib.Path) -> str:
    """The tests' tiny Llama (tiny_llm.py), compiled for serving."""
    import sits_mlir
    from tiny_llm import build_folder

    folder = build_folder(workdir / "tiny-llama")
    art = sits_mlir.compile(str(folder), "cpu", workdir / "tiny-llama.sitsm", kv_cache="paged",
                            kv_block_size=16, logits="last")
    return art.path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="the artifact to serve (.sitsm)")
    src.add_argument("--tiny", action="store_true", help="build and serve the tests' tiny Llama")
    p.add_argument("--concurrency", default="1,8,32", help="comma-separated (default: 1,8,32)")
    p.add_argument("--requests", type=int, default=0,
                   help="requests per concurrency (default: 4 x concurrency, at least 16)")
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-len", type=int, default=256)
    p.add_argument("--max-queue", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--client", choices=("auto", "own", "aiperf"), default="auto",
                   help="load generator (auto: aiperf when installed)")
    p.add_argument("--json", help="write the rows as JSON")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from sits_mlir.runtime.text import TextCodec

    use_aiperf = args.client == "aiperf" or (args.client == "auto" and shutil.which("aiperf"))
    with tempfile.TemporaryDirectory() as tmp:
        artifact = args.config or _tiny_artifact(pathlib.Path(tmp))
        codec = TextCodec.from_artifact(artifact)
        if codec is None:
            print("serve_load: the artifact bundles no tokenizer", file=sys.stderr)
            return 1
        rng = random.Random(args.seed)
        rows = []
        with _served(artifact, args) as url:
            for c in (int(x) for x in args.concurrency.split(",")):
                count = args.requests or max(16, 4 * c)
                if use_aiperf:
                    r = _aiperf(url, "bench", args, c, count,
                                _tokenizer_folder(artifact, pathlib.Path(tmp) / "tokenizer"))
                else:
                    raw = asyncio.run(_drive(url, "bench", _prompts(codec, count, args, rng), c))
                    r = {"ttft_p": (_percentile(raw["ttft"], 50), _percentile(raw["ttft"], 99)),
                         "itl_p": (_percentile(raw["itl"], 50), _percentile(raw["itl"], 99)),
                         "tokens_per_s": raw["tokens"] / raw["wall_s"],
                         "completed": raw["completed"], "errors": raw["errors"],
                         "rejected": raw["rejected"], "wall_s": raw["wall_s"]}
                r.update(concurrency=c, requests=count, kv_blocks_in_use=_kv_blocks_in_use(url),
                         client="aiperf" if use_aiperf else "asyncio+httpx")
                rows.append(r)
    print(f"| concurrency | requests | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms "
          f"| output tok/s | completed | errors | 429s | KV blocks in use after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['requests']} | {1e3 * r['ttft_p'][0]:.1f} "
              f"| {1e3 * r['ttft_p'][1]:.1f} | {1e3 * r['itl_p'][0]:.2f} "
              f"| {1e3 * r['itl_p'][1]:.2f} | {r['tokens_per_s']:.0f} | {r['completed']} "
              f"| {r['errors']} | {r['rejected']} | {r['kv_blocks_in_use']} |")
    print(f"(client: {rows[0]['client'] if rows else '-'})")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["kv_blocks_in_use"] == 0 and r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
