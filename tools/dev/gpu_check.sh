#!/usr/bin/env bash
# GPU check, one shot, on a machine with an NVIDIA GPU and this checkout built
# (the dev build in build/pip, or tools/dev/install.sh's .venv):
#
#   1. lists the devices the runtime finds (fails when there is no cuda:0);
#   2. runs the GPU tests (pytest -m gpu: the benchmark models compiled for
#      this GPU, run on cuda:0 and compared with onnxruntime on the CPU);
#   3. times the benchmark models end to end (numpy in, numpy out, so the
#      copies to and from the device count) on cuda:0 against
#      onnxruntime-gpu (CUDAExecutionProvider) when installed, else torch on
#      cuda when installed, else onnxruntime on the CPU, and prints a table.
#
#   tools/dev/gpu_check.sh [--repeat N] [--models mlp,gpt_prefill,...]
#
# Environment: SITS_GPU_CHECK_SKIP_TESTS=1 skips step 2.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

repeat=50
models="mlp,gpt_prefill,gpt_decode,cnn"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    *) echo "usage: $0 [--repeat N] [--models a,b,...]" >&2; exit 2 ;;
  esac
done

# The dev build when there is one, else the installed package.
if [[ -d "$root/build/pip/python_packages/sits_mlir" ]]; then
  export PYTHONPATH="$root/build/pip/python_packages${PYTHONPATH:+:$PYTHONPATH}"
  export PATH="$root/build/pip/bin:$root/.venv/bin:$PATH"
else
  export PATH="${SITS_VENV:-$root/.venv}/bin:$PATH"
fi
if [[ -n "${SITS_CUDA_DRIVER:-}" ]]; then
  echo "SITS_CUDA_DRIVER is set ($SITS_CUDA_DRIVER): unset it to use the real driver" >&2
  exit 2
fi

echo "==> devices"
python - <<'EOF'
import sys
from sits_mlir import runtime

for d in runtime.devices():
    print(f"  {d['uri']:8} {d['name']}  {d.get('arch', '')}")
try:
    print("  cuda:0 opens:", runtime.open_device("cuda:0")[1])
except runtime.DeviceError as e:
    sys.exit(f"no usable NVIDIA GPU: {e}")
EOF

if [[ "${SITS_GPU_CHECK_SKIP_TESTS:-0}" != 1 ]]; then
  echo "==> GPU tests"
  python -m pytest -q -p no:cacheprovider -m gpu -rs test/python/runtime/test_gpu_execution.py
fi

echo "==> latency (median of $repeat calls, ms)"
SITS_BENCH_MODELS="$models" SITS_BENCH_REPEAT="$repeat" python - <<'EOF'
import os
import statistics
import sys
import tempfile
import time

import numpy as np

root = os.getcwd()
sys.path.insert(0, os.path.join(root, "test", "bench"))
sys.path.insert(0, os.path.join(root, "test", "python", "runtime"))
sys.path.insert(0, os.path.join(root, "test", "python"))
import sits_mlir
from sits_mlir import runtime
from benchmark_models import build_model, export
from bench_models import relative_error
from test_gpu_execution import gpu_target

models = os.environ["SITS_BENCH_MODELS"].split(",")
repeat = int(os.environ["SITS_BENCH_REPEAT"])
device = next(d for d in runtime.devices() if d["uri"] == "cuda:0")
target = gpu_target(device)


def median_ms(fn):
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def baseline(name, path, inputs):
    """(engine, run) of the strongest reference available."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    if "CUDAExecutionProvider" in ort.get_available_providers():
        sess = ort.InferenceSession(path, so, providers=["CUDAExecutionProvider"])
        return "onnxruntime-gpu", lambda: sess.run(None, inputs)
    try:
        import torch
        if torch.cuda.is_available():
            module = build_model(name)[0].cuda()

            def run():
                with torch.no_grad():
                    args = [torch.from_numpy(a).cuda() for a in inputs.values()]
                    out = module(*args)
                    outs = out if isinstance(out, (tuple, list)) else (out,)
                    return [o.cpu().numpy() for o in outs]
            return "torch cuda", run
    except ImportError:
        pass
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return "onnxruntime cpu", lambda: sess.run(None, inputs)


def reference(path, inputs):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, inputs)


rows = []
with tempfile.TemporaryDirectory() as tmp:
    for name in models:
        path, inputs = export(name, tmp)
        start = time.perf_counter()
        art = sits_mlir.compile(path, target=target, output=os.path.join(tmp, f"{name}.sitsm"))
        compile_s = time.perf_counter() - start
        model = runtime.load(art.path, device="cuda:0")
        outs = model.run(*inputs.values())
        err = max(relative_error(a, e) for a, e in zip(outs, reference(path, inputs)))
        sits_ms = median_ms(lambda: model.run(*inputs.values()))
        engine, run = baseline(name, path, inputs)
        base_ms = median_ms(run)
        rows.append((name, sits_ms, engine, base_ms, sits_ms / base_ms, err, compile_s))

print(f"GPU: {device['name']} ({device.get('arch', '?')}), SITS target {target}")
print(f"{'model':12} {'SITS cuda:0':>12} {'baseline':>10}  {'engine':16} {'ratio':>6} "
      f"{'rel.err':>8} {'compile s':>9}")
for name, s, engine, b, r, err, c in rows:
    print(f"{name:12} {s:12.3f} {b:10.3f}  {engine:16} {r:6.2f} {err:8.1e} {c:9.1f}")
print("ratio = SITS / baseline (below 1: SITS is faster); rel.err against onnxruntime cpu")
EOF
