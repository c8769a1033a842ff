#!/usr/bin/env bash
# Times the preflight gate on a generated ~1B-token dataset (4 GB of uint32 blocks,
# 8 per-rank files) at 1, 2 and 8 ranks, the issue's target being < 3 s on one node.
#   benchmarks/preflight_gate.sh [WORK_DIR] [TOKENS]     (default /tmp/zt-preflight-bench, 1e9)
# The data is made once (random bytes packed as byte tokens); it needs ~5 GB of disk.
set -euo pipefail
ZT=${ZT_BIN:-$(dirname "$0")/../build/zerotrain}
WORK=${1:-/tmp/zt-preflight-bench}
TOKENS=${2:-1000000000}
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS)
mkdir -p "$WORK"
if [ ! -f "$WORK/data/dataset.json" ]; then
    echo "making $TOKENS tokens of data in $WORK (once)..."
    rm -rf "$WORK/src" "$WORK/data" && mkdir -p "$WORK/src"
    per=$(( TOKENS / 64 ))
    for i in $(seq -w 0 63); do head -c "$per" /dev/urandom >"$WORK/src/doc-$i.bin"; done
    "$ZT" pack --quiet --input bytes --seq-len 2048 --per-rank 8 -o "$WORK/data" "$WORK"/src/doc-*.bin
    rm -rf "$WORK/src"
fi
du -sh "$WORK/data"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for np in 1 2 8; do
    sync
    start=$(date +%s.%N)
    if [ "$np" -eq 1 ]; then
        "$ZT" preflight --data "$WORK/data" --world 8 --run-dir "$WORK/run" >"$WORK/out-$np.txt" 2>&1
    else
        OMP_NUM_THREADS=1 "${MPIRUN[@]}" -n "$np" "$ZT" preflight --data "$WORK/data" --world 8 \
            --run-dir "$WORK/run" >"$WORK/out-$np.txt" 2>&1 || true
    fi
    end=$(date +%s.%N)
    gate=$(grep -o 'in [0-9.]* s$' "$WORK/out-$np.txt" | tail -1)
    echo "ranks $np: gate says '$gate', wall $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.2f", b-a}') s (page cache warm after the first run)"
    grep '^\[' "$WORK/out-$np.txt" | head -1
done
