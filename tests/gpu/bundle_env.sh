# env.sh of the GPU bundle (tests/gpu/bundle.sh copies this file to the prefix's root).
# Sourced by bash: points the loader, Open MPI and PMIx at the prefix, wherever it was unpacked
# (Debian's Open MPI 4.1 and PMIx relocate by these variables; never unpack the prefix over /).
# The CUDA/cuDNN/NCCL libraries are not in the bundle: add the image's (tests/gpu/run.sh does).
ZT_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ZT_BUNDLE
export LD_LIBRARY_PATH="$ZT_BUNDLE/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$ZT_BUNDLE/usr" OPAL_SYSCONFDIR="$ZT_BUNDLE/etc/openmpi"
# Debian's PMIx was configured with absolute libdir/datadir: its prefix alone does not move them
export PMIX_PREFIX="$ZT_BUNDLE/usr/lib/x86_64-linux-gnu/pmix2"
export PMIX_LIBDIR="$PMIX_PREFIX/lib" PMIX_DATADIR="$PMIX_PREFIX/share"
export PATH="$ZT_BUNDLE/usr/bin:$PATH"
