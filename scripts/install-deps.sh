#!/usr/bin/env bash
# Installs what zerotrain needs to build and test on Debian/Ubuntu (CPU path).
# The CUDA toolkit (nvcc, cuBLASLt, cuDNN, NCCL) is used when present but not installed here.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config gawk
      libopenmpi-dev openmpi-bin libhdf5-openmpi-dev libopenblas-dev libcjson-dev libpcre2-dev
      libutf8proc-dev zlib1g-dev
      clang libclang-rt-dev libomp-dev)  # tests/fuzz: libFuzzer, ASan, UBSan, OpenMP for clang
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#PKGS[@]} packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
