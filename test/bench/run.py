"""SITS next to onnxruntime on the benchmark models, in one process.

    python test/bench/run.py [--models mlp,gpt_prefill,gpt_decode,cnn]
                             [--threads 2] [--repeat 30] [--json out.json]
                             [--target cpu|x86-64-v3|x86-64-v4|...]

For each model: export it with torch (fixed weights and inputs), compile it
with SITS for the target (default: the host CPU, `cpu`), load it, then time both engines on the same
inputs, interleaved (SITS, ORT, ORT, SITS, ...) so that machine noise hits
both alike. Reports median latency, the SITS/ORT ratio (below 1 means SITS
is faster) and its geometric mean, compile time, peak memory (compile, and
each engine's load plus first run) and the largest relative error against
onnxruntime.

Compile time and peak memory are measured in fresh processes, as a user
running `sits-compile` or serving one model would see them: the peak
resident set (VmHWM) less the resident set after the imports, for compiling,
and for each engine loading the model and running it once.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmark_models import BENCH_MODELS, export  # noqa: E402


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure_phase(phase: str, model: str, artifact: str, inputs: str, threads: int,
                  target: str = "cpu") -> dict:
    """Runs in a fresh process: one phase, its wall time and peak memory."""
    import onnxruntime as ort

    import sits_mlir
    from sits_mlir import runtime

    feeds = dict(np.load(inputs))
    base = _status_mib("VmRSS")
    start = time.perf_counter()
    if phase == "compile":
        sits_mlir.compile(model, target=target, output=artifact, threads=threads)
    elif phase == "sits":
        runtime.set_num_threads(threads)
        runtime.load(artifact)(**feeds)
    elif phase == "ort":
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(None, feeds)
    else:
        raise ValueError(phase)
    return {"seconds": time.perf_counter() - start, "peak_mib": _status_mib("VmHWM") - base}


def run_phase(phase: str, model: str, artifact: str, inputs: str, threads: int,
              target: str = "cpu") -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--model-path", model,
               "--artifact", artifact, "--inputs", inputs, "--threads", str(threads),
               "--target", target]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{phase} of {model} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def relative_error(actual, expected) -> float:
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    den = np.linalg.norm(e)
    return float(np.linalg.norm(a - e) / den) if den else float(np.linalg.norm(a))


def bench_model(name: str, workdir: str, threads: int, repeat: int, warmup: int,
                target: str = "cpu") -> dict:
    import onnxruntime as ort

    from sits_mlir import runtime

    path, inputs = export(name, workdir)
    feeds = os.path.join(workdir, f"{name}.inputs.npz")
    np.savez(feeds, **inputs)
    artifact_path = os.path.join(workdir, f"{name}.sitsm")
    compiled_phase = run_phase("compile", path, artifact_path, feeds, threads, target)
    sits_phase = run_phase("sits", path, artifact_path, feeds, threads)
    ort_phase = run_phase("ort", path, artifact_path, feeds, threads)

    compiled = runtime.load(artifact_path)
    sits_out = compiled.run(**inputs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    ort_out = session.run(None, inputs)

    error = max(relative_error(a, e) for a, e in zip(sits_out, ort_out))

    def sits_run():
        compiled.run(**inputs)

    def ort_run():
        session.run(None, inputs)

    for _ in range(warmup):
        sits_run()
        ort_run()
    samples = {"sits": [], "ort": []}
    engines = [("sits", sits_run), ("ort", ort_run)]
    for i in range(repeat):
        # Alternate which engine goes first, so neither always runs on the
        # caches (and turbo state) the other left behind.
        for key, fn in engines if i % 2 == 0 else reversed(engines):
            start = time.perf_counter()
            fn()
            samples[key].append(time.perf_counter() - start)

    sits_ms = statistics.median(samples["sits"]) * 1e3
    ort_ms = statistics.median(samples["ort"]) * 1e3
    return {
        "model": name,
        "target": target,
        "sits_ms": sits_ms,
        "ort_ms": ort_ms,
        "ratio": sits_ms / ort_ms,
        "compile_s": compiled_phase["seconds"],
        "compile_peak_mib": compiled_phase["peak_mib"],
        "sits_peak_mib": sits_phase["peak_mib"],
        "ort_peak_mib": ort_phase["peak_mib"],
        "artifact_mib": os.path.getsize(artifact_path) / 2**20,
        "max_rel_error": error,
    }


def print_table(rows: list[dict], threads: int, repeat: int) -> None:
    print(f"\n{threads} thread(s), median of {repeat} interleaved runs, SITS compiled for "
          f"{rows[0]['target'] if rows else '?'}; "
          "ratio = SITS / onnxruntime latency (below 1: SITS is faster)\n")
    header = (f"{'model':<12} {'SITS ms':>9} {'ORT ms':>9} {'ratio':>6} {'compile s':>10} "
              f"{'compile MiB':>12} {'SITS MiB':>9} {'ORT MiB':>8} {'rel err':>8}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['model']:<12} {r['sits_ms']:>9.2f} {r['ort_ms']:>9.2f} {r['ratio']:>6.2f} "
              f"{r['compile_s']:>10.1f} {r['compile_peak_mib']:>12.0f} {r['sits_peak_mib']:>9.0f} "
              f"{r['ort_peak_mib']:>8.0f} {r['max_rel_error']:>8.1e}")
    geomean = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"\ngeometric mean SITS/ORT ratio: {geomean:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(BENCH_MODELS),
                        help="comma-separated (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--target", default="cpu",
                        help="SITS target: cpu (this host) or a named CPU level such as "
                             "x86-64-v3 (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--workdir", help="keep the exported models and artifacts here")
    parser.add_argument("--json", help="also write the results to this file")
    # One measured phase in a fresh process (used by the benchmark itself).
    parser.add_argument("--phase", choices=["compile", "sits", "ort"], help=argparse.SUPPRESS)
    parser.add_argument("--model-path", help=argparse.SUPPRESS)
    parser.add_argument("--artifact", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        print(json.dumps(measure_phase(args.phase, args.model_path, args.artifact, args.inputs,
                                       args.threads, args.target)))
        return 0
    if args.threads < 1 or args.repeat < 1:
        parser.error("--threads and --repeat must be at least 1")
    models = [m for m in args.models.split(",") if m]

    from sits_mlir import runtime

    runtime.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sits-bench-") as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        for name in models:
            print(f"{name}: export, compile, run ...", flush=True)
            rows.append(bench_model(name, workdir, args.threads, args.repeat, args.warmup,
                                    args.target))
    print_table(rows, args.threads, args.repeat)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"threads": args.threads, "repeat": args.repeat, "target": args.target,
                       "results": rows}, out,
                      indent=2)
    return 0 if all(r["max_rel_error"] < 1e-4 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
