#!/usr/bin/env bash
# Formats the project's C and C++ sources in place with the pinned
# clang-format (the `test` extra), LLVM style from .clang-format. Vendored
# third-party code keeps its own style; test/python/test_format.py checks
# the same list.
#   tools/dev/format.sh            every tracked source
#   tools/dev/format.sh FILE...    only these
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
venv="${SITS_VENV:-$root/.venv}"
clang_format="$venv/bin/clang-format"
[ -x "$clang_format" ] || clang_format=clang-format
if [ $# -eq 0 ]; then
  mapfile -t files < <(git ls-files -- '*.c' '*.cpp' '*.h' ':!:*third_party/*')
else
  files=("$@")
fi
"$clang_format" -i "${files[@]}"
echo "formatted ${#files[@]} files"
