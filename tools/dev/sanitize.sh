#!/usr/bin/env bash
# Sanitizer runs of the C++ runtime (spec kv-allocator.md T71), from a fresh
# checkout: the runtime alone (cmake -S runtime: no LLVM or MLIR needed) is
# built twice with its gtests,
#   * with AddressSanitizer + UndefinedBehaviorSanitizer: every runtime gtest
#     (KV allocator, generation engine and core) and the fuzz targets of the
#     artifact reader and its JSON parser (runtime/fuzz: a seeded run over
#     their corpus and thousands of mutated inputs, ctest label "fuzz");
#   * with ThreadSanitizer: the concurrency tests (KV: KVConcurrency.*; core:
#     the async runtime / thread pool, the quantized matmul kernel and
#     concurrent module runs, also on the fake CUDA driver), and the
#     engine's tests (single-threaded, but cheap).
# Build dirs build/sanitize-asan and build/sanitize-tsan persist and ccache
# is used when present, so a rerun only recompiles what changed. Needs a C++
# compiler with the sanitizers (GCC or Clang), CMake and GoogleTest
# (tools/dev/system-packages.sh). SITS_SANITIZE_JOBS sets the parallelism
# (default 2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
jobs="${SITS_SANITIZE_JOBS:-2}"
start=$(date +%s)

export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
common=(-DSITS_BUILD_CPP_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
command -v ninja >/dev/null && common+=(-G Ninja)
command -v ccache >/dev/null && common+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# Fail on the first report, with a stack; tests that kill themselves on
# purpose are not part of these suites.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

build() { # dir, sanitizers, extra targets...
  cmake -S runtime -B "$1" "${common[@]}" "-DSITS_SANITIZE=$2" >/dev/null
  cmake --build "$1" -j "$jobs" --target sits_kv_tests sits_runtime_core_tests \
    sits_runtime_gpu_tests sits_engine_tests "${@:3}"
}

echo "==> runtime gtests and fuzz targets under ASan + UBSan (build/sanitize-asan)"
build build/sanitize-asan "address;undefined" sits_json_fuzz sits_artifact_fuzz
ctest --test-dir build/sanitize-asan --output-on-failure --no-tests=error -j "$jobs"

echo "==> runtime concurrency tests under TSan (build/sanitize-tsan)"
build build/sanitize-tsan thread
# ASLR layouts that TSan cannot map make it abort before main on some
# kernels; run without randomization when setarch allows it.
run=()
setarch "$(uname -m)" -R true 2>/dev/null && run=(setarch "$(uname -m)" -R)
"${run[@]}" build/sanitize-tsan/sits_kv_tests --gtest_filter='KVConcurrency.*'
# Paged attention splits its work the same way on every ISA and pool format
# (ASan runs them all): under TSan, the AVX2 path (every x86-64 CI host has
# it) with f32 and INT8 pools, and the exported entries.
"${run[@]}" build/sanitize-tsan/src/core/sits_runtime_core_tests \
  --gtest_filter='AsyncRuntime.*:ParallelFor.*:QDot*:PagedAttention.*:PagedAttention/*/avx2_f32:PagedAttention/*/avx2_int8:Module.AsyncKernelSplitsWorkAcrossThreads:Module.ConcurrentRunsFromManyThreads'
"${run[@]}" build/sanitize-tsan/src/core/sits_runtime_gpu_tests \
  --gtest_filter='CudaDriver.ConcurrentCallsUseTheirOwnStreams'
"${run[@]}" build/sanitize-tsan/sits_engine_tests

echo "==> sanitizers clean in $(( $(date +%s) - start )) s"
