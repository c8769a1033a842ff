#!/usr/bin/env bash
# Installs what zerotrain needs to build and test on Debian/Ubuntu (CPU path).
# The CUDA toolkit (nvcc, cuBLASLt, cuDNN, NCCL) is used when present but not installed here.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config gawk
      libopenmpi-dev openmpi-bin libhdf5-openmpi-dev libopenblas-dev libcjson-dev libpcre2-dev
      libutf8proc-dev zlib1g-dev libyaml-dev  # libyaml: --config run files (cli/flags.c)
      clang libclang-rt-dev libomp-dev  # tests/fuzz: libFuzzer, ASan, UBSan, OpenMP for clang
      universal-ctags  # tests/lint: function sizes
      iproute2 util-linux slurm-wlm slurmctld slurmd munge  # tests/cluster: namespaces, Slurm
      chromium fonts-dejavu-core python3 python3-pip)  # report_cli_browser (headless), tb_check.py
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#PKGS[@]} packages present"
else
    echo "install-deps: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Python packages for tests only (the product never runs Python): TensorBoard's event reader
# for train_cli_tensorboard / train_cli_fake_nvml. Best effort: without network those
# tests say SKIPPED (exit 77) instead of reading the events back.
if ! python3 -c "import tensorboard" 2>/dev/null; then
    echo "install-deps: pip install tensorboard (tests only)"
    python3 -m pip install -q --break-system-packages tensorboard 2>/dev/null ||
        python3 -m pip install -q tensorboard 2>/dev/null ||
        echo "install-deps: warning: could not pip install tensorboard; its read-back tests will be skipped"
fi
