#!/usr/bin/env bash
# GPU check, one shot, on a machine with an NVIDIA GPU and this checkout built
# (the dev build in build/pip, or tools/dev/install.sh's .venv):
#
#   1. lists the devices the runtime finds (fails when there is no cuda:0);
#   2. runs the GPU tests (pytest -m gpu: the benchmark models compiled for
#      this GPU, run on cuda:0 and compared with onnxruntime on the CPU);
#   3. test/bench/gpu_check.py: compiles its cases (the benchmark models,
#      f16 matmuls and block, a small Llama decoder) for this GPU, checks
#      every call's outputs on cuda:0 and times them end to end (numpy in,
#      numpy out, so the copies to and from the device count) against torch
#      on the same GPU, and prints a table; and serves the decoder compiled
#      with kv_cache="paged" through the engine at batch 1, 8 and 32 (greedy
#      tokens equal to the CPU engine's; decode tokens/s against the GPU's
#      memory-bandwidth bound).
#
#   tools/dev/gpu_check.sh [--repeat N] [--cases mlp,gpt_prefill,...]
#   tools/dev/gpu_check.sh --bundle DIR   # runtime only: a bundle made by
#       `gpu_check.py prepare DIR --target T --compress` on another host,
#       with the runtime from tools/dev/runtime_package.sh on PYTHONPATH
#
# Environment: SITS_GPU_CHECK_SKIP_TESTS=1 skips step 2; PYTHON names the
# interpreter (default python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

repeat=50
cases=""  # default: every case gpu_check.py has
bundle=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --cases) cases="$2"; shift 2 ;;
    --bundle) bundle="$2"; shift 2 ;;
    *) echo "usage: $0 [--repeat N] [--cases a,b,...] [--bundle DIR]" >&2; exit 2 ;;
  esac
done

# The dev build when there is one, else the installed package.
if [[ -d "$root/build/pip/python_packages/sits_mlir" ]]; then
  export PYTHONPATH="$root/build/pip/python_packages${PYTHONPATH:+:$PYTHONPATH}"
  export PATH="$root/build/pip/bin:$root/.venv/bin:$PATH"
else
  export PATH="${SITS_VENV:-$root/.venv}/bin:$PATH"
fi
py="${PYTHON:-python3}"
if [[ -n "${SITS_CUDA_DRIVER:-}" ]]; then
  echo "SITS_CUDA_DRIVER is set ($SITS_CUDA_DRIVER): unset it to use the real driver" >&2
  exit 2
fi

echo "==> devices"
"$py" - <<'EOF'
import sys
from sits_mlir import runtime

for d in runtime.devices():
    print(f"  {d['uri']:8} {d['name']}  {d.get('arch', '')}")
try:
    print("  cuda:0 opens:", runtime.open_device("cuda:0")[1])
except runtime.DeviceError as e:
    sys.exit(f"no usable NVIDIA GPU: {e}")
EOF

if [[ -z "$bundle" && "${SITS_GPU_CHECK_SKIP_TESTS:-0}" != 1 ]]; then
  echo "==> GPU tests"
  "$py" -m pytest -q -p no:cacheprovider -m gpu -rs test/python/runtime/test_gpu_execution.py
fi

if [[ -n "$bundle" ]]; then
  echo "==> bundle $bundle"
  exec "$py" test/bench/gpu_check.py run "$bundle" --repeat "$repeat"
fi
target="$("$py" - <<'EOF'
import sys
sys.path[:0] = ["test/python/runtime", "test/python"]
from sits_mlir import runtime
from test_gpu_execution import gpu_target
print(gpu_target(next(d for d in runtime.devices() if d["uri"] == "cuda:0")))
EOF
)"
echo "==> correctness and latency for $target (median of $repeat calls)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" test/bench/gpu_check.py prepare "$tmp" --target "$target" ${cases:+--cases "$cases"}
"$py" test/bench/gpu_check.py run "$tmp" --repeat "$repeat"
