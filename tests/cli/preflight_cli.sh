#!/usr/bin/env bash
# `zerotrain preflight`: each check passing and failing.
#   preflight_cli.sh ZEROTRAIN HOLD_PORT SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 HOLD=$2 SRC=$3 WORK=$4 CASE=$5
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
MODEL="$SRC/tests/golden/tiny_untied_gqa"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; cat "$W/out.txt" 2>/dev/null; exit 1; }
data() {  # $1 = per-rank W (0: single file); 61 one-block documents
    awk 'BEGIN{srand(3); for(d=0; d<61; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    local pr=(); [ "$1" -gt 0 ] && pr=(--per-rank "$1")
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 "${pr[@]}" -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
}
expect() {  # expect RC PATTERN...: last run's exit status and output lines
    local want=$1; shift
    [ "$rc" -eq "$want" ] || fail "exit status $rc, expected $want"
    for p in "$@"; do grep -q -- "$p" "$W/out.txt" || fail "output lacks '$p'"; done
    echo "ok [$CASE]"; grep -E '^\[' "$W/out.txt"
}
case "$CASE" in
keep_memory)  # keep-gathered whose memory (plan's formula) exceeds the device's: refused, naming the sizes
    data 0
    "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/data" --model "$MODEL" --reshard-after-forward false \
        --assume-device-memory 1000000 >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "\[FAIL\] memory: keep-gathered needs [0-9.]* MiB per rank by the planner's formula (parameters .*gathered buffers [0-9.]* MB (every unit kept).*) x 2 ranks on this node; the host has 976.56 KiB available (assumed)" "$W/out.txt" \
        && grep -q "reshard after forward (drop --reshard-after-forward false)" "$W/out.txt" \
        && ! grep -q "1 data integrity" "$W/out.txt" || fail "exit $rc: keep-gathered over the host's memory must be refused"
    need=$(sed -n 's/.*keep-gathered needs \([0-9.]*\) MiB per rank.*/\1/p' "$W/out.txt" | head -1)
    # the same job resharding after forward: no memory check, the gate passes
    "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/data" --model "$MODEL" --assume-device-memory 1000000 \
        >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 0 ] && ! grep -q "memory:" "$W/out.txt" || fail "exit $rc: resharding must not be checked"
    # the GPU engine: bf16 gathers, the GPU's memory (here assumed; this machine has none), one rank per GPU
    "$ZT" preflight --data "$W/data" --model "$MODEL" --device cuda --reshard-after-forward false \
        --assume-device-memory 1000000 >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "\[FAIL\] memory: keep-gathered needs .* per rank .*; the GPU holds 976.56 KiB (assumed)" "$W/out.txt" \
        || fail "exit $rc: keep-gathered over the GPU's memory must be refused"
    # enough memory: it passes and the six checks follow; train runs the same check against /proc/meminfo
    "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/data" --model "$MODEL" --reshard-after-forward false \
        --assume-device-memory 1000000000 >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 0 ] && grep -q "\[PASS\] memory: keep-gathered needs $need MiB per rank" "$W/out.txt" \
        || fail "exit $rc: keep-gathered within 1 GB must pass"
    "${MPIRUN[@]}" -n 2 "$ZT" train --data "$W/data" --model "$MODEL" --run-dir "$W/run" --steps 1 --no-save-final \
        --reshard-after-forward false >"$W/out.txt" 2>&1; rc=$?
    expect 0 "\[PASS\] memory: keep-gathered needs $need MiB per rank .* x 2 ranks on this node; the host has .* available"
    ;;
keep_memory_qwen3_5)  # the same gate on a Qwen3.5 model (tests/golden/q35_mix): its layer kinds' counts
    data 0
    Q35="$SRC/tests/golden/q35_mix"
    # 3 Gated DeltaNet layers of 16 tokens at 29,568 bytes, 1 full-attention layer at 28,928, the head 7,680
    # and one layer's backward workspace 27,136 (docs/plan.md "Qwen3.5"): 152,448 bytes of activations
    "$ZT" preflight --data "$W/data" --model "$Q35" --device cuda --reshard-after-forward false \
        --assume-device-memory 1000000 >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "\[FAIL\] memory: keep-gathered needs 1.99 MiB per rank by the planner's formula (.*activations 0.152 MB); the GPU holds 976.56 KiB (assumed)" "$W/out.txt" \
        || fail "exit $rc: a Qwen3.5 model's keep-gathered over the GPU's memory must be refused"
    "$ZT" preflight --data "$W/data" --model "$Q35" --reshard-after-forward false \
        --assume-device-memory 1000000000 >"$W/out.txt" 2>&1; rc=$?
    expect 0 "\[PASS\] memory: keep-gathered needs 2.06 MiB per rank by the planner's formula (.*activations 0.152 MB)"
    ;;
shard_group)  # --shard-group: a group that does not divide W, `node` on the wrong layout, a bad word; the good ones
    data 0
    "${MPIRUN[@]}" -n 4 "$ZT" preflight --data "$W/data" --shard-group 3 >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "\[FAIL\] sharding: --shard-group 3 does not divide the world of 4 ranks" "$W/out.txt" \
        || fail "exit $rc: G = 3 at W = 4 must be refused"
    "$ZT" preflight --data "$W/data" --world 6 --shard-group 4 >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "\[FAIL\] sharding: --shard-group 4 does not divide the world of 6 ranks" "$W/out.txt" \
        || fail "exit $rc: G = 4 for --world 6 must be refused"
    "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/data" --world 4 --shard-group node >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "\[FAIL\] sharding: --shard-group node: the node layout is this launch's (2 ranks), not --world 4's" \
        "$W/out.txt" || fail "exit $rc: node for another world must be refused"
    "$ZT" preflight --data "$W/data" --shard-group two >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "expected a number of ranks (a divisor of W = 1; 0 or W: full shard) or \`node\`" "$W/out.txt" \
        || fail "exit $rc: a word must be refused"
    "${MPIRUN[@]}" -n 2 "$ZT" train --data "$W/data" --model "$MODEL" --run-dir "$W/run" --steps 1 --shard-group 4 \
        --no-preflight >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -ne 0 ] && grep -q "does not divide the world of 2 ranks" "$W/out.txt" || fail "exit $rc: train must refuse G = 4 at W = 2"
    "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/data" --shard-group node >"$W/out.txt" 2>&1; rc=$?
    grep -q "\[PASS\] sharding: full shard, groups of 2 ranks x 1 replica" "$W/out.txt" || fail "node on one node: G = 2"
    "${MPIRUN[@]}" -n 4 "$ZT" preflight --data "$W/data" --shard-group 2 >"$W/out.txt" 2>&1; rc=$?
    expect 0 "\[PASS\] sharding: hybrid shard, groups of 2 ranks x 2 replicas" "all checks passed"
    ;;
all_pass)
    data 0
    "$ZT" preflight --data "$W/data" --model "$MODEL" --run-dir "$W/run" --expect-tokens 976 --port 29533 >"$W/out.txt" 2>&1; rc=$?
    expect 0 "\[PASS\] 1 data integrity" "\[PASS\] 2 token total" "\[SKIP\] 3 devices" "\[PASS\] 4 rendezvous" \
        "\[PASS\] 5 checkpoint disk" "\[SKIP\] 6 interconnect" "all checks passed"
    ;;
long_seq)
    # blocks longer than the model's max_position_embeddings (64): a failure, unless allowed
    awk 'BEGIN{srand(3); for(d=0; d<4; d++){ line=""; for(i=0;i<128;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 128 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    "$ZT" preflight --data "$W/data" --model "$MODEL" >"$W/out.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "\[FAIL\] 1 data integrity.*seq_len 128 exceeds the model's max_position_embeddings 64" "$W/out.txt" \
        || fail "exit $rc: check 1 must fail on seq_len 128 > 64"
    "$ZT" preflight --data "$W/data" --model "$MODEL" --allow-long-seq >"$W/out.txt" 2>&1; rc=$?
    expect 0 "\[PASS\] 1 data integrity.*allowed by --allow-long-seq"
    ;;
corrupt_file)
    data 0
    printf '\x07' | dd of="$W/data/data.u32" bs=1 seek=100 conv=notrunc 2>/dev/null
    "$ZT" preflight --data "$W/data" --model "$MODEL" >"$W/out.txt" 2>&1; rc=$?
    expect 1 "\[FAIL\] 1 data integrity" "crc32c mismatch" "data.u32"
    ;;
uneven_no_evenfix)
    data 2
    "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/data" --model "$MODEL" --no-evenfix >"$W/out.txt" 2>&1; rc=$?
    [ $rc -ne 0 ] || fail "uneven per-rank data with --no-evenfix must fail"
    rc=1; expect 1 "min 30 max 31 spread 1" "WILL deadlock"
    ;;
uneven_evenfix)
    data 2
    "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/data" --model "$MODEL" >"$W/out.txt" 2>&1; rc=$?
    expect 0 "spread 1; evenfix drops 1 blocks" "\[PASS\] 1 data integrity"
    ;;
balance_for_world)
    # Without mpirun: check the balance for a 4-rank job from the launch host.
    data 0
    "$ZT" preflight --data "$W/data" --world 4 --grad-accum 2 >"$W/out.txt" 2>&1; rc=$?
    expect 0 "blocks per rank (W=4) min 14 max 16 spread 2"
    ;;
token_total)
    data 0
    "$ZT" preflight --data "$W/data" --expect-tokens 2000 >"$W/out.txt" 2>&1; rc=$?
    expect 1 "\[FAIL\] 2 token total" "976 tokens vs expected 2000"
    ;;
small_disk)
    data 0
    "$ZT" preflight --data "$W/data" --model "$MODEL" --run-dir "$W/run" --assume-free 1000000 --keep-last 3 >"$W/out.txt" 2>&1; rc=$?
    expect 1 "\[FAIL\] 5 checkpoint disk" "(keep-last 3 + 1)"
    ;;
busy_port)
    data 0
    "$HOLD" 29534 "$ZT" preflight --data "$W/data" --port 29534 >"$W/out.txt" 2>&1; rc=$?
    expect 1 "\[FAIL\] 4 rendezvous" "port 29534 is in use"
    ;;
bad_master_port)
    # MASTER_PORT outside 1..65535 or not a number fails check 4, naming it (70000 was cut to
    # 16 bits: port 4464 probed and "port 70000 free" printed; 65536 probed port 0)
    data 0
    for p in 70000 65536 0 http abc 29500x -1 " 29500"; do
        MASTER_PORT="$p" "$ZT" preflight --data "$W/data" >"$W/out.txt" 2>&1; rc=$?
        [ "$rc" -eq 1 ] && grep -q "\[FAIL\] 4 rendezvous *MASTER_PORT=$p is not a TCP port: it must be a whole number in 1..65535" "$W/out.txt" \
            || fail "MASTER_PORT='$p': exit $rc, check 4 must fail naming MASTER_PORT and its value"
        grep -q "port $p free" "$W/out.txt" && fail "MASTER_PORT='$p' reported free"
    done
    MASTER_PORT=29535 "$ZT" preflight --data "$W/data" >"$W/out.txt" 2>&1; rc=$?
    expect 0 "\[PASS\] 4 rendezvous.*port 29535 free on every node"
    ;;
missing_interface)
    data 0
    "$ZT" preflight --data "$W/data" --ifname nosuchif0 >"$W/out.txt" 2>&1; rc=$?
    expect 1 "\[FAIL\] 4 rendezvous" "interface 'nosuchif0' does not exist"
    ;;
cuda_without_gpu)
    data 0
    "$ZT" preflight --data "$W/data" --device cuda >"$W/out.txt" 2>&1; rc=$?
    if nvidia-smi >/dev/null 2>&1; then echo "SKIP [$CASE]: a GPU is present"; exit 77; fi
    expect 1 "\[FAIL\] 3 devices"
    ;;
probe)
    data 0
    "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/data" --probe-bandwidth --min-bus-gbps 100000 >"$W/out.txt" 2>&1; rc=$?
    [ $rc -ne 0 ] || fail "an impossible bandwidth threshold must fail"
    rc=1; expect 1 "\[FAIL\] 6 interconnect probe" "BELOW threshold"
    ;;
*) fail "unknown case" ;;
esac
