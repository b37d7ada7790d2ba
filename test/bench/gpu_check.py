#!/usr/bin/env python3
"""The GPU check in two halves, so that the GPU host needs the runtime only.

`prepare` (on any host with the compiler) compiles the check's models for a
GPU target and writes a bundle: the artifacts, each one's calls (inputs and
the outputs expected of them, from onnxruntime or numpy on the CPU) and
tolerances. `run` (on the GPU host: `sits_mlir.runtime`, numpy, and torch
for the baseline when present) loads each artifact on the device, replays
its calls, compares, and times the first call against the baseline: torch
on the same device for the models it can build, else nothing.

    python test/bench/gpu_check.py prepare DIR [--target h200] [--cases a,b] [--compress]
    python test/bench/gpu_check.py run DIR [--device cuda:0] [--repeat 50]

The cases: the four benchmark models (f32), three f16 matmuls and an f16
GPT-2 block (tensor cores on sm_80+), a small Llama decoder with a
contiguous past, teacher-forced through a prefill and decode steps, and
the same decoder compiled with `kv_cache="paged"` and served by the
engine (`llama_paged`): greedy tokens at batch 1, 8 and 32 must equal the
CPU engine's, and its decode tokens/s is set against the device's
memory-bandwidth bound (weight bytes read per step).

`--compress` is for a bundle that must travel: the benchmark models' and
the f16 block's weights (and the benchmark models' inputs) are rounded to
17 levels per tensor (the same shapes, kernels and arithmetic; the
expected outputs come from the rounded models), which lets xz shrink the
artifacts about sevenfold. `run` decompresses them.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import pathlib
import statistics
import sys
import time
import traceback

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE.parent / "python" / "llm"))
from bench_compare import relative_error  # noqa: E402

DENSE = ["mlp", "gpt_prefill", "gpt_decode", "cnn"]
F16_MATMULS = {"mm_f16_a": (128, 256, 512), "mm_f16_b": (64, 1024, 64), "mm_f16_c": (256, 64, 2304)}
ALL_CASES = [*DENSE, *F16_MATMULS, "gpt_block_f16", "llama", "llama_paged"]
#: llama_paged: batch sizes served, prompt tokens, new tokens per sequence.
PAGED_BATCHES, PAGED_PROMPT, PAGED_NEW = (1, 8, 32), 16, 16


# ----------------------------------------------------------------------------- prepare
def _rounded(w: np.ndarray) -> np.ndarray:
    """`w` rounded to 17 levels (multiples of max|w| / 8), same dtype."""
    step = float(np.abs(w).max()) / 8 or 1.0
    return (np.round(w.astype(np.float32) / step) * step).astype(w.dtype)


def _round_weights(path: str, like: str | None = None) -> None:
    """Rounds every float initializer of the ONNX file to 17 levels, in
    place; with `like`, takes the (rounded) values of the same-named
    initializers of that file instead, cast to this file's dtype."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    source = {}
    if like:
        source = {i.name: numpy_helper.to_array(i) for i in onnx.load(like).graph.initializer}
    for init in model.graph.initializer:
        if init.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
            continue
        w = numpy_helper.to_array(init)
        w = source[init.name].astype(w.dtype) if init.name in source else _rounded(w)
        init.CopyFrom(numpy_helper.from_array(w, init.name))
    onnx.save(model, path)


def _ort(path, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _dense_case(name, tmp, compress):
    from benchmark_models import export

    path, inputs = export(name, tmp)
    if compress:
        _round_weights(path)
        inputs = {k: _rounded(v) for k, v in inputs.items()}
    return path, [(inputs, _ort(path, inputs))], {"rel": 1e-3, "elementwise": 1e-3}


def _f16_matmul_case(name, tmp):
    from f16_models import matmul_f16

    path, x, w = matmul_f16(os.path.join(tmp, f"{name}.onnx"), *F16_MATMULS[name])
    expected = x.astype(np.float32) @ w.astype(np.float32)
    return path, [({"x": x}, [expected])], {"rel": 1e-2, "elementwise": 1e-2}


def _gpt_block_f16_case(tmp, compress):
    from f16_models import gpt_block_f16

    f16, f32, x = gpt_block_f16(tmp)
    if compress:
        _round_weights(f32)
        _round_weights(f16, like=f32)
    return f16, [({"x": x.astype(np.float16)}, _ort(f32, {"x": x}))], {"rel": 1e-2}


def _llama_case(tmp, steps=8, batch=2, prompt=16):
    """A 2-layer Llama (hidden 256, GQA 8/4) with a contiguous past: a
    prefill of `prompt` tokens, then `steps` one-token steps fed the
    reference's greedy tokens and past."""
    import hf_decoders

    dec = hf_decoders.build("llama", tmp, layers=2, hidden=256, heads=8)
    rng = np.random.default_rng(7)
    ids = rng.integers(0, dec.vocab, (batch, prompt)).astype(np.int64)
    past = [np.zeros((batch, dec.kv_heads, 0, dec.head_dim), np.float32)
            for _ in range(2 * dec.layers)]
    calls, position = [], 0
    for _ in range(steps + 1):
        feeds = {"input_ids": ids, "position_ids": np.broadcast_to(
            np.arange(position, position + ids.shape[1]), ids.shape).astype(np.int64).copy()}
        for i in range(dec.layers):
            feeds[f"past_key_{i}"], feeds[f"past_value_{i}"] = past[2 * i], past[2 * i + 1]
        outs = _ort(dec.path, feeds)
        calls.append((feeds, outs))
        position += ids.shape[1]
        ids = np.argmax(outs[0][:, -1], axis=-1).astype(np.int64)[:, None]
        past = outs[1:]
    # Time a decode step (the last call), not the prefill.
    return dec.path, calls, {"rel": 1e-3, "time_call": len(calls) - 1}


def _paged_generate(model, prompts: np.ndarray, new: int) -> tuple[np.ndarray, float, dict]:
    """Greedy generation of `new` tokens for each prompt by the engine over
    a paged decoder, its KV pool in the model's device memory; (tokens
    [B, new], seconds of the decode steps, the prefill excluded, the
    model's gpu_stats() per decode step)."""
    from sits_mlir.runtime import kv
    from sits_mlir.runtime.decoder import PagedRunner
    from sits_mlir.runtime.engine import GREEDY, Engine

    spec = {s.name: s for s in model.inputs}["kv_pool"]
    layers, kv_heads, block, head_dim = (spec.shape[i] for i in (1, 3, 4, 5))
    batch, length = prompts.shape
    per_seq = -(-(length + new) // block)
    allocator = kv.KVAllocator(num_blocks=batch * per_seq + 1, block_size=block,
                               num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim,
                               dtype=spec.dtype, max_seq_len=per_seq * block,
                               enable_prefix_caching=False)
    memory = kv.KVMemory(allocator, device=model.device)
    engine = Engine(allocator, PagedRunner(model, memory), max_batch_size=batch)
    ids = [engine.add_request(p, new, sampling=GREEDY) for p in prompts]
    while not all(engine.result(i).samples[0].tokens for i in ids):
        engine.step()
    before, steps = model.gpu_stats(), 0
    start = time.perf_counter()
    while engine.has_unfinished:
        engine.step()
        steps += 1
    decode_s = time.perf_counter() - start
    per_step = {k: (v - before[k]) / max(steps, 1) for k, v in model.gpu_stats().items()}
    return np.array([engine.result(i).samples[0].tokens for i in ids]), decode_s, per_step


def _llama_paged_case(tmp):
    """The `llama` case's decoder for kv_cache="paged": the prompts, and
    each one's greedy tokens from the CPU engine."""
    import hf_decoders
    import sits_mlir
    from sits_mlir import runtime

    dec = hf_decoders.build("llama", tmp, layers=2, hidden=256, heads=8)
    reference = sits_mlir.compile(dec.path, target="cpu", kv_cache="paged",
                                  output=os.path.join(tmp, "llama_paged.cpu.sitsm"))
    rng = np.random.default_rng(11)
    prompts = rng.integers(0, dec.vocab, (max(PAGED_BATCHES), PAGED_PROMPT)).astype(np.int64)
    tokens, _, _ = _paged_generate(runtime.load(reference.path), prompts, PAGED_NEW)
    return dec.path, [({"prompts": prompts}, [tokens])], {"rel": 0.0}


def _run_paged(model, calls, bandwidth: float, weights_bytes: int) -> tuple[str, float]:
    """Serves the prompts at each batch size; checks every token; returns
    the table's note and batch 1's decode tokens/s. `bandwidth` is the
    target's memory bandwidth in GB/s (0: unknown)."""
    prompts, expected = calls[0][0]["prompts"], calls[0][1][0]
    # The whole weights are read once per decode step, whatever the batch.
    bound = bandwidth * 1e9 / weights_bytes if bandwidth and weights_bytes else float("nan")
    notes, first, on_gpu = [], float("nan"), False
    for batch in PAGED_BATCHES:
        tokens, seconds, per_step = _paged_generate(model, prompts[:batch], PAGED_NEW)
        differ = np.argwhere(tokens != expected[:batch])
        assert not len(differ), (f"batch {batch}: sequence {differ[0][0]} departs from the "
                                 f"CPU engine's tokens at step {differ[0][1]}")
        rate = batch * (PAGED_NEW - 1) / seconds
        first = rate if batch == 1 else first
        share = f" ({rate / batch / bound:.1%} of the bound)" if bound == bound else ""
        notes.append(f"b{batch} {rate:.1f} tok/s{share}")
        on_gpu = bool(per_step["calls"])
        if on_gpu:  # what a decode step costs the host
            print(f"  llama_paged b{batch}: {per_step['launches']:.1f} driver launches and "
                  f"{per_step['kernels']:.0f} kernels per step, "
                  f"{per_step['replays'] / per_step['calls']:.0%} of calls replayed, "
                  f"host {1e3 * per_step['host_seconds']:.3f} ms per step", flush=True)
    if on_gpu:
        # The same at batch 1 with every kernel launched: what recording saves.
        from sits_mlir import runtime

        plain = runtime.load(model.path, device=model.device, gpu_graphs=False)
        tokens, seconds, per_step = _paged_generate(plain, prompts[:1], PAGED_NEW)
        assert np.array_equal(tokens, expected[:1]), "batch 1 without graphs: tokens depart"
        print(f"  llama_paged b1 without graphs: {(PAGED_NEW - 1) / seconds:.1f} tok/s, "
              f"{per_step['launches']:.0f} launches, host "
              f"{1e3 * per_step['host_seconds']:.3f} ms per step", flush=True)
    if bound == bound:
        print(f"  llama_paged: bandwidth bound {bound:.0f} steps/s "
              f"({weights_bytes / 1e6:.1f} MB of weights at {bandwidth:.0f} GB/s)", flush=True)
    return "; ".join(notes), first


def prepare(out: pathlib.Path, target: str, cases: list[str], compress: bool) -> None:
    import tempfile

    import sits_mlir

    out.mkdir(parents=True, exist_ok=True)
    bundle = {"target": target, "cases": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name in cases:
            start = time.perf_counter()
            if name in DENSE:
                path, calls, tol = _dense_case(name, tmp, compress)
            elif name in F16_MATMULS:
                path, calls, tol = _f16_matmul_case(name, tmp)
            elif name == "gpt_block_f16":
                path, calls, tol = _gpt_block_f16_case(tmp, compress)
            elif name == "llama":
                path, calls, tol = _llama_case(tmp)
            elif name == "llama_paged":
                path, calls, tol = _llama_paged_case(tmp)
            else:
                raise SystemExit(f"unknown case {name!r}: one of {', '.join(ALL_CASES)}")
            paged = {"kv_cache": "paged"} if name == "llama_paged" else {}
            art = sits_mlir.compile(path, target=target, output=out / f"{name}.sitsm", **paged)
            compile_s = time.perf_counter() - start
            weights_bytes = _weights_bytes(art.path) if paged else 0
            bandwidth = sits_mlir.targets.lookup(target).memory_bandwidth_gbs
            artifact = f"{name}.sitsm"
            if compress:
                with open(art.path, "rb") as f, lzma.open(out / f"{artifact}.xz", "wb", preset=6) as z:
                    z.write(f.read())
                os.remove(art.path)
                artifact += ".xz"
            arrays = {}
            for j, (feeds, expected) in enumerate(calls):
                arrays.update({f"c{j}.in.{k}": v for k, v in feeds.items()})
                arrays.update({f"c{j}.out.{i}": v for i, v in enumerate(expected)})
            (np.savez_compressed if compress else np.savez)(out / f"{name}.npz", **arrays)
            bundle["cases"].append({"name": name, "artifact": artifact, "data": f"{name}.npz",
                                    "calls": len(calls), "tolerance": tol,
                                    "compile_s": round(compile_s, 1),
                                    "weights_bytes": weights_bytes,
                                    "bandwidth_gbs": bandwidth})
            print(f"  {name}: compiled in {compile_s:.1f} s", flush=True)
    (out / "bundle.json").write_text(json.dumps(bundle, indent=1))
    print(f"bundle for {target}: {out}")


def _weights_bytes(path) -> int:
    from sits_mlir.runtime import read_artifact

    return read_artifact(path, verify="metadata").sections.get("weights", (0, 0))[1]


# ----------------------------------------------------------------------------- run
def _calls(data_path, count):
    data = np.load(data_path)
    calls = []
    for j in range(count):
        feeds = {k.split(".", 2)[2]: data[k] for k in data.files if k.startswith(f"c{j}.in.")}
        outs = sorted((int(k.split(".")[2]), data[k]) for k in data.files
                      if k.startswith(f"c{j}.out."))
        calls.append((feeds, [v for _, v in outs]))
    return calls


def _check(outputs, expected, tol) -> float:
    """The largest relative error; raises AssertionError past `tol`."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    assert len(outputs) == len(expected), f"{len(outputs)} outputs, expected {len(expected)}"
    worst = 0.0
    for i, (a, e) in enumerate(zip(outputs, expected)):
        assert a.shape == e.shape, f"output {i}: shape {a.shape}, expected {e.shape}"
        a32, e32 = a.astype(np.float32), e.astype(np.float32)
        assert np.isfinite(a32).all(), f"output {i}: non-finite values"
        err = relative_error(a32, e32)
        worst = max(worst, err)
        assert err < tol["rel"], f"output {i}: relative error {err:.2e} > {tol['rel']:.0e}"
        if "elementwise" in tol:
            scale = float(np.abs(e32).max()) or 1.0
            bad = np.abs(a32 - e32) > tol["elementwise"] * (np.abs(e32) + scale)
            assert not bad.any(), (f"output {i}: {int(bad.sum())} elements off, first at "
                                   f"{np.argwhere(bad)[0].tolist()}")
    return worst


def _median_ms(fn, repeat):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _torch_baseline(name, feeds, device):
    """A callable running the same computation with torch on `device`
    (numpy in and out, like SITS's call), or None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    dev = torch.device("cuda", int(device.split(":")[1]) if ":" in device else 0)
    if name in DENSE:
        from benchmark_models import build_model

        module = build_model(name)[0].to(dev)
    elif name in F16_MATMULS:
        m, k, n = F16_MATMULS[name]
        w = torch.randn(k, n, dtype=torch.float16, device=dev)
        module = lambda x: x @ w  # noqa: E731
    else:
        return None

    def run():
        with torch.no_grad():
            out = module(*[torch.from_numpy(v).to(dev) for v in feeds.values()])
            outs = out if isinstance(out, (tuple, list)) else (out,)
            return [o.cpu().numpy() for o in outs]
    return run


def run(bundle_dir: pathlib.Path, device: str, repeat: int, only=None,
        check_only: bool = False) -> int:
    from sits_mlir import runtime

    bundle = json.loads((bundle_dir / "bundle.json").read_text())
    if only:
        bundle["cases"] = [c for c in bundle["cases"] if c["name"] in only]
    listed = {d["uri"]: d for d in runtime.devices()}
    for d in listed.values():
        print(f"  {d['uri']:8} {d['name']}  {d.get('arch', '')}")
    if device not in listed:
        print(f"{device} not found", file=sys.stderr)
        return 2
    rows, failures = [], 0
    for case in bundle["cases"]:
        name = case["name"]
        try:
            art = bundle_dir / case["artifact"]
            if art.suffix == ".xz":
                plain = bundle_dir / art.stem
                if not plain.exists():
                    with lzma.open(art) as z, open(plain, "wb") as f:
                        f.write(z.read())
                art = plain
            calls = _calls(bundle_dir / case["data"], case["calls"])
            start = time.perf_counter()
            model = runtime.load(str(art), device=device)
            load_ms = 1e3 * (time.perf_counter() - start)
            if name == "llama_paged":  # served by the engine; SITS ms: per batch-1 token
                note, rate = _run_paged(model, calls, case.get("bandwidth_gbs", 0),
                                        case.get("weights_bytes", 0))
                rows.append((name, "ok", 0.0, load_ms, float("nan"), 1e3 / rate,
                             float("nan")))
                print(f"  {name}: ok ({note})", flush=True)
                continue
            start = time.perf_counter()
            first = model.run(**calls[0][0])
            first_ms = 1e3 * (time.perf_counter() - start)
            err = _check(first, calls[0][1], case["tolerance"])
            for feeds, expected in calls[1:]:
                err = max(err, _check(model.run(**feeds), expected, case["tolerance"]))
            if check_only:
                rows.append((name, "ok", err, load_ms, first_ms, float("nan"), float("nan")))
                print(f"  {name}: ok", flush=True)
                continue
            if len(calls) == 1:  # calls from several threads share the loaded model
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(4) as pool:
                    for outs in pool.map(lambda _: model.run(**calls[0][0]), range(16)):
                        err = max(err, _check(outs, calls[0][1], case["tolerance"]))
            feeds = calls[case["tolerance"].get("time_call", 0)][0]
            sits_ms = _median_ms(lambda: model.run(**feeds), repeat)
            base_ms = float("nan")
            try:  # the baseline's failure is not the case's
                base = _torch_baseline(name, feeds, device)
                base_ms = _median_ms(base, repeat) if base else base_ms
            except Exception as e:
                print(f"  {name}: no torch baseline: {type(e).__name__}: {e}")
            rows.append((name, "ok", err, load_ms, first_ms, sits_ms, base_ms))
        except Exception as e:  # one case's failure must not hide the others'
            failures += 1
            traceback.print_exc()
            rows.append((name, f"FAIL: {type(e).__name__}: {str(e)[:160]}", float("nan"),
                         float("nan"), float("nan"), float("nan"), float("nan")))
        print(f"  {name}: {rows[-1][1]}", flush=True)

    print(f"\ntarget {bundle['target']} on {device} ({listed[device]['name']}); "
          f"median of {repeat} calls, numpy in and out")
    print(f"{'case':14} {'rel.err':>8} {'load ms':>8} {'1st ms':>8} {'SITS ms':>9} "
          f"{'torch ms':>9} {'ratio':>6}  result")
    for name, result, err, load, first, s, b in rows:
        print(f"{name:14} {err:8.1e} {load:8.1f} {first:8.1f} {s:9.3f} {b:9.3f} "
              f"{s / b:6.2f}  {result}")
    print("ratio = SITS / torch on the same device (below 1: SITS is faster)")
    failed = [r[0] for r in rows if r[1] != "ok"]
    if failed:
        print("failed:", ",".join(failed))
    return 1 if failures else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pp = sub.add_parser("prepare", help="compile the cases into a bundle")
    pp.add_argument("dir", type=pathlib.Path)
    pp.add_argument("--target", default="h200")
    pp.add_argument("--cases", default=",".join(ALL_CASES))
    pp.add_argument("--compress", action="store_true",
                    help="round f32 weights to 17 levels and xz the artifacts")
    pr = sub.add_parser("run", help="run a bundle on a GPU")
    pr.add_argument("dir", type=pathlib.Path)
    pr.add_argument("--device", default="cuda:0")
    pr.add_argument("--repeat", type=int, default=50)
    pr.add_argument("--cases", help="only these cases (comma-separated)")
    pr.add_argument("--check-only", action="store_true",
                    help="one pass over the calls: no threads, no timing (for profilers)")
    args = p.parse_args(argv)
    if args.command == "prepare":
        prepare(args.dir, args.target, args.cases.split(","), args.compress)
        return 0
    return run(args.dir, args.device, args.repeat, args.cases.split(",") if args.cases else None,
               args.check_only)


if __name__ == "__main__":
    sys.exit(main())
