#!/usr/bin/env bash
# The main job on the bundled default model: installs sits-mlir into .venv,
# compiles the bundled MLP for this CPU, runs it, checks it against
# onnxruntime and prints both latencies (python -m sits_mlir.demo --help).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$root/tools/dev/install.sh"
venv="${SITS_VENV:-$root/.venv}"
exec "$venv/bin/python" -m sits_mlir.demo "$@"
