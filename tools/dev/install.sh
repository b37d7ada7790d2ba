#!/usr/bin/env bash
# Builds and installs sits-mlir into .venv (created if missing) for
# development and CI: the pinned toolchain from pyproject.toml is installed
# into the venv once, and the CMake build directory build/pip persists, so a
# rebuild only recompiles what changed (ccache also covers a fresh clone).
#
# Extra arguments are passed to CMake as -D definitions, e.g.
#   tools/dev/install.sh SITS_BUILD_CPP_TESTS=ON
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

"$root/tools/dev/system-packages.sh"

venv="${SITS_VENV:-$root/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  echo "==> creating $venv"
  python3 -m venv "$venv"
fi
py="$venv/bin/python"
pip=("$py" -m pip --disable-pip-version-check)

echo "==> installing the pinned build toolchain"
"${pip[@]}" install -q $("$py" "$root/tools/dev/build_requirements.py")

# ccache keys on paths relative to the checkout, so a fresh clone reuses
# objects compiled in another one.
export CCACHE_BASEDIR="$root"
export CCACHE_NOHASHDIR=1
defines=()
for d in "$@"; do defines+=("-Ccmake.define.$d"); done

echo "==> building and installing sits-mlir (build dir: build/pip)"
start=$(date +%s)
"${pip[@]}" install -q --no-build-isolation \
  -Cbuild-dir=build/pip "${defines[@]}" ".[test,demo]"
echo "==> installed in $(( $(date +%s) - start )) s"
