"""SITS next to onnxruntime on the benchmark models.

    python test/bench/run.py [--models mlp,gpt_prefill,gpt_decode,cnn]
                             [--threads 2] [--repeat 30] [--rounds 3] [--json out.json]
                             [--target cpu|x86-64-v3|x86-64-v4|...]

For each model: export it with torch (fixed weights and inputs), compile it
with SITS for the target (default: the host CPU, `cpu`), then time each
engine on the same inputs in a process of its own, as a user serving one
model runs it: `--rounds` rounds, each a fresh SITS process then a fresh
onnxruntime one (alternating which goes first), each timing `--repeat`
runs after `--warmup`, so that machine noise hits both alike. (In one
process, onnxruntime's worker threads spin for a while after each run and
take the cores from the next SITS run: interleaving the two engines there
timed SITS's contention with them, not SITS.) Reports median latency over
all rounds, the SITS/ORT ratio (below 1 means SITS is faster) and its
geometric mean, compile time, peak memory (compile, and each engine's load
plus first run) and the largest relative error against onnxruntime.

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
from bench_compare import relative_error  # noqa: E402


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _engine(engine: str, model: str, artifact: str, threads: int):
    """A callable running `engine` ("sits" or "ort") on a dict of inputs."""
    if engine == "sits":
        from sits_mlir import runtime

        runtime.set_num_threads(threads)
        compiled = runtime.load(artifact)
        return lambda feeds: compiled.run(**feeds)
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)


def measure_phase(phase: str, model: str, artifact: str, inputs: str, threads: int,
                  target: str = "cpu", repeat: int = 0, warmup: int = 0) -> dict:
    """Runs in a fresh process: one phase, its wall time and peak memory;
    time-sits / time-ort also the seconds of `repeat` runs after `warmup`."""
    import sits_mlir

    feeds = dict(np.load(inputs))
    base = _status_mib("VmRSS")
    start = time.perf_counter()
    if phase == "compile":
        sits_mlir.compile(model, target=target, output=artifact, threads=threads)
        return {"seconds": time.perf_counter() - start, "peak_mib": _status_mib("VmHWM") - base}
    timed = phase.startswith("time-")
    engine = phase.removeprefix("time-")
    if engine not in ("sits", "ort"):
        raise ValueError(phase)
    run = _engine(engine, model, artifact, threads)
    run(feeds)
    result = {"seconds": time.perf_counter() - start, "peak_mib": _status_mib("VmHWM") - base}
    if timed:
        for _ in range(warmup):
            run(feeds)
        samples = []
        for _ in range(repeat):
            begin = time.perf_counter()
            run(feeds)
            samples.append(time.perf_counter() - begin)
        result["samples"] = samples
    return result


def run_phase(phase: str, model: str, artifact: str, inputs: str, threads: int,
              target: str = "cpu", repeat: int = 0, warmup: int = 0) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--phase", phase, "--model-path", model,
               "--artifact", artifact, "--inputs", inputs, "--threads", str(threads),
               "--target", target, "--repeat", str(max(repeat, 1)), "--warmup", str(warmup)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{phase} of {model} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_model(name: str, workdir: str, threads: int, repeat: int, warmup: int,
                target: str = "cpu", rounds: int = 3) -> dict:
    path, inputs = export(name, workdir)
    feeds = os.path.join(workdir, f"{name}.inputs.npz")
    np.savez(feeds, **inputs)
    artifact_path = os.path.join(workdir, f"{name}.sitsm")
    compiled_phase = run_phase("compile", path, artifact_path, feeds, threads, target)
    sits_phase = run_phase("sits", path, artifact_path, feeds, threads)
    ort_phase = run_phase("ort", path, artifact_path, feeds, threads)

    sits_out = _engine("sits", path, artifact_path, threads)(inputs)
    ort_out = _engine("ort", path, artifact_path, threads)(inputs)
    error = max(relative_error(a, e) for a, e in zip(sits_out, ort_out))

    samples = {"sits": [], "ort": []}
    for i in range(rounds):
        # Alternate which engine goes first, so neither always runs on the
        # caches (and turbo state) the other left behind.
        for key in ("sits", "ort") if i % 2 == 0 else ("ort", "sits"):
            timed = run_phase(f"time-{key}", path, artifact_path, feeds, threads,
                              repeat=repeat, warmup=warmup)
            samples[key] += timed["samples"]

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


def print_table(rows: list[dict], threads: int, repeat: int, rounds: int) -> None:
    print(f"\n{threads} thread(s), median of {rounds} x {repeat} runs, each engine in processes "
          f"of its own, SITS compiled for "
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
    parser.add_argument("--rounds", type=int, default=3,
                        help="processes per engine, alternating (default: %(default)s)")
    parser.add_argument("--workdir", help="keep the exported models and artifacts here")
    parser.add_argument("--json", help="also write the results to this file")
    # One measured phase in a fresh process (used by the benchmark itself).
    parser.add_argument("--phase", choices=["compile", "sits", "ort", "time-sits", "time-ort"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--model-path", help=argparse.SUPPRESS)
    parser.add_argument("--artifact", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        print(json.dumps(measure_phase(args.phase, args.model_path, args.artifact, args.inputs,
                                       args.threads, args.target, args.repeat, args.warmup)))
        return 0
    if args.threads < 1 or args.repeat < 1 or args.rounds < 1:
        parser.error("--threads, --repeat and --rounds must be at least 1")
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
                                    args.target, args.rounds))
    print_table(rows, args.threads, args.repeat, args.rounds)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"threads": args.threads, "repeat": args.repeat, "rounds": args.rounds,
                       "target": args.target, "results": rows}, out,
                      indent=2)
    return 0 if all(r["max_rel_error"] < 1e-4 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
