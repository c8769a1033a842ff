#!/usr/bin/env bash
# `plan --device cpu` against the CPU engine's own count: for each job, `train --device cpu` (one step)
# writes the bytes it allocated per rank to run.json (memory_per_rank_bytes); plan must print the same
# bytes for every part (params, grads, optimizer, buffers, activations) and the total. Jobs: Qwen3 at
# W = 1, 2 (keep-gathered), context parallel 2 and 3 on blocks that do not split evenly, hybrid 2 x 2
# with C = 2; Qwen3.5 (a mix of Gated DeltaNet and full layers) at W = 1 and 2, and context parallel 2.
#   plan_cpu_memory.sh ZEROTRAIN SOURCE_DIR WORK_DIR
set -u
ZT=$1 SRC=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail() { echo "FAIL: $*"; exit 1; }
# data: random ids below the vocabulary, blocks of S
data() {  # NAME VOCAB S
    awk -v v="$2" -v s="$3" 'BEGIN{srand(7); for(b=0; b<8; b++){ l=""; for(i=0;i<s;i++) l=l int(rand()*v) " "; print l }}' \
        >"$WORK/$1.ids"
    "$ZT" pack --quiet --input ids --vocab-size "$2" --eos none --seq-len "$3" -o "$WORK/$1" "$WORK/$1.ids" >/dev/null ||
        fail "pack $1"
}
data q3_256 257 256
data q3_250 257 250
data q35_64 96 64
n=0
check() {  # NAME MODEL DATA SEQ W C SG KEEP(true|false) MB
    local name=$1 model=$2 d=$3 S=$4 W=$5 C=$6 SG=$7 reshard=$8 B=$9
    local run="$WORK/run_$name"
    mpirun -n "$W" --bind-to none "$ZT" train --device cpu --model "$model" --data "$WORK/$d" --run-dir "$run" --steps 1 \
        --micro-batch "$B" --context-parallel "$C" --shard-group "$SG" --reshard-after-forward "$reshard" --threads 1 \
        --no-save-final --no-preflight >"$run.log" 2>&1 || { tail -20 "$run.log"; fail "$name: train"; }
    "$ZT" plan --device cpu --model "$model" --world "$W" --context-parallel "$C" --shard-group "$SG" --seq-len "$S" \
        --micro-batch "$B" --reshard-after-forward "$reshard" >"$WORK/plan_$name.txt" 2>&1 ||
        { cat "$WORK/plan_$name.txt"; fail "$name: plan"; }
    python3 - "$run/run.json" "$WORK/plan_$name.txt" "$name" <<'PY' || fail "$name: plan differs from the run"
import json, re, sys
m = json.load(open(sys.argv[1]))["memory_per_rank_bytes"]
rows = {}
for line in open(sys.argv[2]):
    g = re.match(r"\s+(\S+).*\((\d+) bytes\)", line)
    if g: rows[g.group(1).rstrip(",")] = int(g.group(2))
want = {"parameters": m["params"], "gradients": m["grads"], "optimizer": m["optimizer"],
        "activations": m["activations"], "total": sum(m.values())}
want["gathered-unit" if "gathered-unit" in rows else "gradient"] = m["buffers"]
bad = [f"{k}: run {v}, plan {rows.get(k)}" for k, v in want.items() if rows.get(k) != v]
if bad: print(sys.argv[3], "; ".join(bad)); sys.exit(1)
print(f"ok [{sys.argv[3]}]: {want['total']} bytes per rank, every part equal")
PY
    n=$((n + 1))
}
Q3="$SRC/examples/tiny-qwen3" Q35="$SRC/tests/golden/q35_mix"
check w1 "$Q3" q3_256 256 1 1 1 true 2
check w2_keep "$Q3" q3_256 256 2 1 2 false 1
check cp2_odd "$Q3" q3_250 250 2 2 2 true 1
check cp3_odd "$Q3" q3_250 250 3 3 3 true 2
check hsdp_cp2 "$Q3" q3_256 256 4 2 2 true 1
check q35_w1 "$Q35" q35_64 64 1 1 1 true 2
check q35_w2_keep "$Q35" q35_64 64 2 1 2 false 1
check q35_cp2 "$Q35" q35_64 64 2 2 2 true 1
echo "ok: $n jobs, plan --device cpu = the CPU engine's bytes per rank"
