#!/usr/bin/env bash
# The main job on the bundled default model: installs sits-mlir into .venv
# and runs the SITS graph pipeline over the bundled MLP with timing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$root/tools/dev/install.sh"
venv="${SITS_VENV:-$root/.venv}"
exec "$venv/bin/python" -m sits_mlir.demo "$@"
