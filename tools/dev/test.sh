#!/usr/bin/env bash
# The test suite, from a fresh checkout: installs sits-mlir into .venv
# (tools/dev/install.sh), then runs the suites against the installed package.
#
#   tools/dev/test.sh           everything (CI): lit, the whole pytest suite
#                               (slow and conformance tiers included), the C++
#                               unit tests, and the runtime's gtests under
#                               ASan+UBSan and TSan (tools/dev/sanitize.sh)
#   tools/dev/test.sh --quick   the inner loop: the build, lit and the fast
#                               pytest tier (-m "not slow and not conformance")
#
# Extra arguments after the flags go to pytest, e.g.
#   tools/dev/test.sh --quick -k paged
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
start=$(date +%s)

quick=0
pytest_args=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pytest_args+=("$arg") ;;
  esac
done

"$root/tools/dev/install.sh" SITS_BUILD_CPP_TESTS=ON
venv="${SITS_VENV:-$root/.venv}"
export PATH="$venv/bin:$PATH"
jobs="${SITS_TEST_JOBS:-$(nproc)}"
installed=$(date +%s)

echo "==> lit"
lit -sv -j "$jobs" test/lit

# One pytest worker per core; a file's tests stay on one worker, so that the
# models a module compiles once are compiled once.
xdist=(-n "$jobs" --dist loadfile)

if [ "$quick" -eq 1 ]; then
  echo "==> pytest (fast tier: not slow, not conformance)"
  python -m pytest -q test/python "${xdist[@]}" -m "not slow and not conformance" \
    ${pytest_args[@]+"${pytest_args[@]}"}
  echo "==> quick tier passed in $(( $(date +%s) - start )) s" \
       "($(( installed - start )) s build and install)"
  exit 0
fi

echo "==> pytest"
python -m pytest -q test/python "${xdist[@]}" --durations=25 ${pytest_args[@]+"${pytest_args[@]}"}

echo "==> C++ unit tests"
ctest --test-dir build/pip --output-on-failure --no-tests=error -j "$jobs"

echo "==> C++ runtime under sanitizers"
"$root/tools/dev/sanitize.sh"

echo "==> all suites passed in $(( $(date +%s) - start )) s" \
     "($(( installed - start )) s build and install)"
