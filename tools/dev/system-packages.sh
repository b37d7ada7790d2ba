#!/usr/bin/env bash
# Installs the Debian packages the build and the test suites use, when they
# are missing: ccache and lld speed up rebuilds; GoogleTest builds the C++
# unit tests; an AMDGPU-enabled llc and ld.lld (the LLVM wheels have no
# AMDGPU back end) and the ROCm device libraries (ocml, ockl) finish AMD GPU
# kernels into code objects. Needs root (or sudo) the first time; a no-op
# afterwards.
set -euo pipefail

packages=(ccache lld libgtest-dev llvm-22 lld-22 rocm-device-libs)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
  echo "error: missing Debian packages ${missing[*]} and no root/sudo to install them" >&2
  exit 1
fi
echo "==> apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
