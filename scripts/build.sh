#!/usr/bin/env bash
# Configure and build into ./build (Release). CUDA is compiled in when nvcc is found.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v nvcc >/dev/null 2>&1; then :; elif [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake -S . -B build -G Ninja -DZT_TEST_FILTER='.*' "$@" >build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build 2>&1 | tee -a build.log | grep -E "warning|error|FAILED" || true
[ -x build/zerotrain ] || { tail -50 build.log; echo "build failed (see build.log)"; exit 1; }
echo "build: ok ($(grep -m1 -o 'ZT_CUDA.*' build/CMakeCache.txt || true))"
