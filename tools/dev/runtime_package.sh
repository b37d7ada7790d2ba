#!/usr/bin/env bash
# The runtime alone, as an importable `sits_mlir` package for a host that
# only runs artifacts compiled elsewhere (a GPU server, a container): the
# nanobind module and libSitsRuntime.so built for PYTHON, beside the pure
# Python sources. No LLVM or MLIR: `sits_mlir.runtime` works, `compile` does
# not.
#
#   tools/dev/runtime_package.sh OUT_DIR [PYTHON]
#
# PYTHON (default python3) must have nanobind (< 3) and numpy; the package
# lands in OUT_DIR/sits_mlir, so `PYTHONPATH=OUT_DIR python -c "from
# sits_mlir import runtime"` works on any x86-64 Linux with that Python
# minor version and a glibc at least as new as this one's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?usage: $0 OUT_DIR [PYTHON]}"
python="${2:-python3}"
tag="$("$python" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')"
build="$root/build/runtime-$tag"

cmake -S "$root/runtime" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSITS_BUILD_CPP_TESTS=OFF -DSITS_RUNTIME_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v "$python")" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

mkdir -p "$out"
rm -rf "$out/sits_mlir"
# The Python sources: the source tree holds none of the compiler's native
# libraries (they are built into build/pip), so `compile` fails cleanly.
cp -r "$root/python/sits_mlir" "$out/sits_mlir"
find "$out/sits_mlir" -name __pycache__ -prune -exec rm -rf {} +
cp "$build"/python_packages/sits_mlir/* "$out/sits_mlir/"
echo "$out/sits_mlir ($tag)"
