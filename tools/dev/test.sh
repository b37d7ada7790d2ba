#!/usr/bin/env bash
# The whole test suite, from a fresh checkout: installs sits-mlir into .venv
# (tools/dev/install.sh) and runs the lit suite, the pytest suite and the C++
# unit tests against the installed package, then the runtime's gtests under
# ASan+UBSan and TSan (tools/dev/sanitize.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
start=$(date +%s)

"$root/tools/dev/install.sh" SITS_BUILD_CPP_TESTS=ON
venv="${SITS_VENV:-$root/.venv}"
export PATH="$venv/bin:$PATH"
jobs="${SITS_TEST_JOBS:-$(nproc)}"

echo "==> lit"
lit -sv -j "$jobs" test/lit

echo "==> pytest"
python -m pytest -q test/python

echo "==> C++ unit tests"
ctest --test-dir build/pip --output-on-failure --no-tests=error -j "$jobs"

echo "==> C++ runtime under sanitizers"
"$root/tools/dev/sanitize.sh"

echo "==> all suites passed in $(( $(date +%s) - start )) s"
