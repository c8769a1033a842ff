#!/usr/bin/env bash
# Qwen3.5 under --context-parallel 2 on the GPU engine (model/qwen3_5_cuda_context.c), for a lease
# with 2 GPUs or more (run.sh's q35_cp step, only when ZT_STEPS names it: NCCL takes one rank per
# GPU): tests/golden/q35_mix trained 6 steps at W = 1 (grad-accum 2) and at W = 2, C = 2 (one
# context group, grad-accum 2: the same global batch), plain blocks of 48 tokens; every step's loss
# within 3e-3 relative (the CPU execution of CUDA's test emu_fsdp_cuda_q35_cp_w2_c2 holds them there).
#   q35_cp.sh ZEROTRAIN MPIRUN_PREFIX... -- WORK_DIR
# e.g. q35_cp.sh build/bundle/zt/usr/bin/zerotrain build/bundle/in-bundle mpirun -- /tmp/q35cp
# (on the CPU: q35_cp.sh build/tests/zerotrain_cudaemu mpirun --oversubscribe -- /tmp/q35cp)
set -u
ZT=$1
shift
MPI=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do MPI+=("$1"); shift; done
shift
W=$1
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "FAIL [q35_cp]: $*"; exit 1; }
losses() { sed -n 's/.*"loss":\([0-9.]*\).*/\1/p' "$1"; }
rm -rf "$W" && mkdir -p "$W"
awk 'BEGIN{srand(11); for(d=0; d<64; d++){ l=""; for(i=0;i<48;i++) l=l int(rand()*90) " "; print l }}' >"$W/docs.txt"
"${MPI[0]}" --version >/dev/null 2>&1 || [ -x "${MPI[0]}" ] || fail "no ${MPI[0]}"
run1() { "$ZT" "$@"; }
[ "${MPI[0]##*/}" = in-bundle ] && run1() { "${MPI[0]}" "$ZT" "$@"; }
run1 pack --quiet --input ids --vocab-size 96 --seq-len 48 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
t=(train --init "$SRC/tests/golden/q35_mix" --data "$W/data" --lr 1e-3 --steps 6 --grad-accum 2 --log-every 1
   --no-preflight --device cuda)
run1 "${t[@]}" --run-dir "$W/w1" >"$W/w1.txt" 2>&1 || { cat "$W/w1.txt"; fail "W = 1"; }
timeout 300 "${MPI[@]}" -n 2 "$ZT" "${t[@]}" --context-parallel 2 --run-dir "$W/cp" >"$W/cp.txt" 2>&1 ||
    { cat "$W/cp.txt"; fail "--context-parallel 2"; }
grep -q "context parallelism: groups of 2 consecutive ranks" "$W/cp.txt" || { cat "$W/cp.txt"; fail "no split reported"; }
paste -d' ' <(losses "$W/cp/metrics.jsonl") <(losses "$W/w1/metrics.jsonl") >"$W/losses.txt"
cat "$W/losses.txt"
[ "$(wc -l <"$W/losses.txt")" -eq 6 ] || fail "expected 6 steps in each run"
awk '{d=$1-$2; if(d<0)d=-d; r=d/$2; if(r>m)m=r; if(!(r <= 3e-3)){print "step " NR ": " $1 " vs " $2; bad=1}}
     END{printf "RESULT q35_cp max_rel=%.3e\n", m; exit bad}' "$W/losses.txt" || fail "C = 2 differs from W = 1 by more than 3e-3"
echo "ok [q35_cp]: Qwen3.5 --context-parallel 2 = W = 1 (3e-3), 6 steps"
