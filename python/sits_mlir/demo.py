"""The main job: compile the bundled default model, run it, and time it next
to onnxruntime.

    python -m sits_mlir.demo [--model PATH.onnx] [--repeat N] [--threads N]

Without --model it builds the bundled MLP (sits_mlir.examples.mlp: the
benchmark MLP's architecture with seeded weights), compiles it for the host
CPU into one .sitsm artifact, runs it, checks the outputs against
onnxruntime's and prints both latencies.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np


def _time(fn, repeat: int) -> list[float]:
    fn()  # warm up: first touch of weights and code
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def _fmt(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e3:8.2f} ms   min {min(samples) * 1e3:8.2f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sits_mlir.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="an ONNX model (default: the bundled MLP)")
    parser.add_argument("--inputs", help="inputs .npz for --model (default: seeded random)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0,
                        help="threads for both SITS and onnxruntime (default: all cores)")
    args = parser.parse_args(argv)

    import onnx

    import sits_mlir
    from sits_mlir import runtime

    if args.model:
        model = onnx.load(args.model)
        name = os.path.basename(args.model)
    else:
        from sits_mlir.examples import mlp

        model, inputs = mlp()
        name = "bundled MLP 1024-4096-4096-1024, batch 8"
    if args.model:
        if args.inputs:
            inputs = dict(np.load(args.inputs))
        else:
            rng = np.random.default_rng(0)
            inputs = {}
            for value in model.graph.input:
                dims = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
                dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
                inputs[value.name] = rng.standard_normal(dims).astype(dtype)

    threads = args.threads or os.cpu_count() or 1
    print(f"model: {name}")
    with tempfile.TemporaryDirectory(prefix="sits-demo-") as tmp:
        start = time.perf_counter()
        artifact = sits_mlir.compile(model, target="cpu", output=os.path.join(tmp, "model.sitsm"),
                                     threads=args.threads)
        compile_s = time.perf_counter() - start
        size = os.path.getsize(artifact.path) / 2**20
        print(f"compiled for {artifact.manifest['target']['cpu']} in {compile_s:.2f} s "
              f"-> one artifact of {size:.1f} MiB")
        runtime.set_num_threads(threads)
        compiled = artifact.load()
        outputs = compiled.run(**inputs)
        sits_times = _time(lambda: compiled.run(**inputs), args.repeat)

    try:
        import onnxruntime as ort
    except ImportError:
        print(f"SITS         {_fmt(sits_times)}")
        print("onnxruntime is not installed; install it to compare (pip install onnxruntime)")
        return 0
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    ort_times = _time(lambda: session.run(None, inputs), args.repeat)

    worst = max(float(np.linalg.norm(a.astype(np.float64) - e) / (np.linalg.norm(e) or 1.0))
                for a, e in zip(outputs, expected))
    print(f"outputs match onnxruntime: max relative error {worst:.1e}")
    print(f"latency over {args.repeat} runs, {threads} thread(s):")
    print(f"  SITS         {_fmt(sits_times)}")
    print(f"  onnxruntime  {_fmt(ort_times)}")
    print(f"  ratio        {statistics.median(ort_times) / statistics.median(sits_times):.2f}x "
          "(onnxruntime time / SITS time; above 1 means SITS is faster)")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
