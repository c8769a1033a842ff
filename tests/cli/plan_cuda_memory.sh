#!/usr/bin/env bash
# `plan --device cuda` against the GPU engine's own count, on the CPU execution of CUDA (never a GPU):
# for each job, `train --device cuda` (one step, zerotrain_cudaemu: the real CLI with the CUDA code
# linked in) writes the device bytes it asked for per rank to run.json (memory_per_rank_bytes: the
# sharded state and pools by their sizes, the family's activations and the context split's buffers
# measured around their allocation, the scratch arena and cuBLASLt workspace from the op context);
# plan, which lists the same parts from the shapes (engine/rank_memory.c, the families'
# act_bytes_for, the kernels' scratch functions), must print the same bytes for every part and the
# total. Jobs: Qwen3 at W = 1 and 2, recompute on and off, keep-gathered, context parallel 2 on
# blocks that do not split evenly, GEMM and tiled attention; Qwen3.5 (Gated DeltaNet and full
# layers) at W = 1 and 2, and at C = 2 on the uneven blocks (model/qwen3_5_cuda_context.c's head
# sharding and the full layer's K/V exchange in `context`; recompute).
#   plan_cuda_memory.sh ZEROTRAIN_CUDAEMU ZEROTRAIN SOURCE_DIR WORK_DIR
set -u
ZH=$1 ZT=$2 SRC=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL: $*"; exit 1; }
data() {  # NAME S: random ids below the tiny configs' vocabulary of 96, blocks of S
    awk -v s="$2" 'BEGIN{srand(7); for(b=0; b<8; b++){ l=""; for(i=0;i<s;i++) l=l int(rand()*90) " "; print l }}' \
        >"$WORK/$1.ids"
    "$ZT" pack --quiet --input ids --vocab-size 96 --eos none --seq-len "$2" -o "$WORK/$1" "$WORK/$1.ids" >/dev/null ||
        fail "pack $1"
}
data s16 16
data s19 19
n=0
check() {  # NAME MODEL DATA SEQ W C KEEP(true|false) MB ATTENTION RECOMPUTE(0|1)
    local name=$1 model=$2 d=$3 S=$4 W=$5 C=$6 reshard=$7 B=$8 att=$9 rec=${10}
    local run="$WORK/run_$name" r=()
    [ "$rec" = 1 ] && r=(--recompute)
    local launch=("$ZH")
    [ "$W" -gt 1 ] && launch=(timeout 300 "${MPIRUN[@]}" -n "$W" "$ZH")
    "${launch[@]}" train --device cuda --model "$model" --data "$WORK/$d" --run-dir "$run" --steps 1 \
        --micro-batch "$B" --grad-accum 2 --context-parallel "$C" --reshard-after-forward "$reshard" \
        --attention "$att" "${r[@]}" --threads 1 --no-save-final --no-preflight >"$run.log" 2>&1 ||
        { tail -20 "$run.log"; fail "$name: train"; }
    ! grep "scratch arena grew" "$run.log" || fail "$name: an op grew the scratch past the engine's reservation"
    "$ZH" plan --device cuda --model "$model" --world "$W" --context-parallel "$C" --seq-len "$S" \
        --micro-batch "$B" --grad-accum 2 --reshard-after-forward "$reshard" --attention "$att" "${r[@]}" \
        >"$WORK/plan_$name.txt" 2>&1 || { cat "$WORK/plan_$name.txt"; fail "$name: plan"; }
    python3 - "$run/run.json" "$WORK/plan_$name.txt" "$name" <<'PY' || fail "$name: plan differs from the run"
import json, re, sys
m = json.load(open(sys.argv[1]))["memory_per_rank_bytes"]
rows = {}
for line in open(sys.argv[2]):
    g = re.match(r"\s+(\S+).*\((\d+) bytes\)", line)
    if g: rows[g.group(1)] = int(g.group(2))
names = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer", "buffers": "buffers",
         "activations": "activations", "context": "context", "scratch": "scratch", "workspace": "workspace"}
missing = [k for k in names if k not in m]
if missing: print(sys.argv[3], "run.json lacks", missing); sys.exit(1)
want = {names[k]: m[k] for k in names}
want["total"] = sum(want.values())
bad = [f"{k}: run {v}, plan {rows.get(k)}" for k, v in want.items() if rows.get(k) != v]
if bad: print(sys.argv[3], "; ".join(bad)); sys.exit(1)
print(f"ok [{sys.argv[3]}]: {want['total']} bytes per rank, every part equal: " +
      ", ".join(f"{k} {v}" for k, v in want.items() if k != "total"))
PY
    n=$((n + 1))
}
Q3="$SRC/tests/golden/tiny_untied_gqa" Q35="$SRC/tests/golden/q35_mix"
check q3_w1_gemm "$Q3" s16 16 1 1 true 2 gemm 0
check q3_w1_tiled_rec "$Q3" s16 16 1 1 true 2 tiled 1
check q3_w2_keep_gemm "$Q3" s16 16 2 1 false 1 gemm 0
check q3_w2_tiled_rec "$Q3" s16 16 2 1 true 1 tiled 1
check q3_cp2_tiled "$Q3" s19 19 2 2 true 1 tiled 0
check q3_cp2_gemm_rec "$Q3" s19 19 2 2 true 2 gemm 1
check q35_w1_gemm "$Q35" s16 16 1 1 true 2 gemm 0
check q35_w2_tiled_rec "$Q35" s16 16 2 1 false 1 tiled 1
check q35_cp2_tiled_rec "$Q35" s19 19 2 2 true 1 tiled 1
echo "ok: $n jobs, plan --device cuda = the GPU engine's device bytes per rank (on the CPU execution of CUDA)"
