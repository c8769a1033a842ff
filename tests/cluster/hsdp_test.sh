#!/usr/bin/env bash
# Hybrid sharding across the two nodes of the test cluster (tests/cluster/cluster.sh): at
# 2 x 2 and 2 x 4 CPU ranks (ranks placed node by node), grad-accum 4, the tiny model, one
# benchmarks/strong_scaling.sh run per strategy -- full shard, hsdp (--shard-group node),
# full + keep-gathered, hsdp + keep-gathered -- with the bytes that crossed the node link
# (node0's + node1's zt0 tx_bytes over the whole run, per step), the step time and the loss
# after the last step. Each strategy runs a second time for 1 step: the difference of the two
# runs' link bytes over the difference of their steps is the node-link bytes of one step, with
# the start-up (launch, wire-up, loading, sub-communicators) and the exit subtracted; that is
# compared with `zerotrain plan --collectives mpi --param-dtype fp32` for the same job.
# Asserts: hsdp's node-link bytes per step at most 1/4 of full shard's (with and without
# keep-gathered), every strategy's losses equal to full shard's to 1e-5, and each strategy's
# start-up-subtracted node-link bytes per step within 20% of plan's prediction.
# The table lands in WORK/hsdp.md.
#   hsdp_test.sh ZEROTRAIN SOURCE_DIR WORK_DIR
set -u
ZT=$1 SRC=$2 WORK=$3
. "$SRC/tests/cluster/cluster.sh"
cluster_test_start "$WORK"
printf 'node0 slots=8\nnode1 slots=8\n' >"$W/hosts"
cluster_ids_data "$ZT" 5 200 "$W"
cat >"$W/link-bytes.sh" <<EOS
for ns in $ZC_NS_node0 $ZC_NS_node1; do ip netns exec \$ns cat /sys/class/net/zt0/statistics/tx_bytes; done
EOS
STEPS=4 WARM=1
run() {  # run RANKS NAME [strong_scaling args...]: STEPS + WARM steps, and NAME1 for 1 step
    local w=$1 name=$2
    shift 2
    run_steps "$w" "$name" $STEPS $WARM "$@"
    run_steps "$w" "${name}1" 1 0 "$@"
}
run_steps() {  # run_steps RANKS NAME STEPS WARMUP [strong_scaling args...]
    local w=$1 name=$2 steps=$3 warm=$4
    shift 4
    on login env OMP_NUM_THREADS=1 timeout 300 bash "$SRC/benchmarks/strong_scaling.sh" --zerotrain "$ZT" \
        --model "$SRC/tests/golden/tiny_untied_gqa" --data "$W/data" --ranks "$w" --global-batch $((4 * w)) \
        --steps $steps --warmup $warm --hostfile "$W/hosts" --link-bytes "bash $W/link-bytes.sh" \
        --work "$W/$name-$w" --tsv "$W/$name-$w.tsv" --check "$@" >"$W/$name-$w.out" 2>&1 \
        || { cat "$W/$name-$w.out"; fail "$name at $w ranks: strong_scaling.sh failed"; }
}
{
    echo "| nodes x ranks | strategy | node link MB / step (whole run) | node link MB / step (start-up subtracted) | plan MB / step | measured / plan | gathered MB / rank / step | scattered MB / rank / step | step s | loss after $((STEPS + WARM)) steps |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$WORK/hsdp.md"
for w in 4 8; do
    run $w full
    run $w hsdp --shard-group node
    run $w keep -- --reshard-after-forward false
    run $w hsdpkeep --shard-group node -- --reshard-after-forward false
    for s in full hsdp keep hsdpkeep; do
        case $s in full) label="full shard" ;; hsdp) label="hsdp (node)" ;; keep) label="full + keep-gathered" ;;
                   hsdpkeep) label="hsdp + keep-gathered" ;; esac
        loss=$(tail -1 "$W/$s-$w/ranks-$w/metrics.jsonl" | grep -o '"loss":[0-9.]*' | cut -d: -f2)
        # one step's node-link bytes: (the 5-step run's - the 1-step run's) / 4
        b5=$(cat "$W/$s-$w/ranks-$w.link") b1=$(cat "$W/${s}1-$w/ranks-$w.link")
        meas=$(awk -v a="$b5" -v b="$b1" -v n=$((STEPS + WARM - 1)) 'BEGIN { printf "%.0f", (a - b) / n }')
        popt=(--shard full)
        case $s in hsdp | hsdpkeep) popt=(--shard hsdp) ;; esac
        case $s in keep | hsdpkeep) popt+=(--reshard-after-forward false) ;; esac
        "$ZT" plan --model "$SRC/tests/golden/tiny_untied_gqa" --world "$w" --worlds "$w" --gpus-per-node $((w / 2)) \
            --grad-accum 4 --seq-len 16 --param-dtype fp32 --reduce-dtype fp32 --collectives mpi "${popt[@]}" \
            >"$W/plan-$s-$w.txt" 2>&1 || { cat "$W/plan-$s-$w.txt"; fail "plan for $s at $w ranks failed"; }
        pred=$(sed -n "s/^node link bytes per step, all nodes' sends summed: \([0-9]*\)$/\1/p" "$W/plan-$s-$w.txt")
        [ -n "$pred" ] && [ "$pred" -gt 0 ] || { cat "$W/plan-$s-$w.txt"; fail "no node-link prediction from plan for $s at $w ranks"; }
        awk -F'\t' -v w="$w" -v l="$label" -v loss="$loss" -v m="$meas" -v p="$pred" 'NR == 2 { printf "| 2 x %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.4f | %s |\n", w / 2, l, $22, m / 1e6, p / 1e6, m / p, $20, $21, $17, loss }' \
            "$W/$s-$w.tsv" >>"$WORK/hsdp.md"
        echo "$s at $w ranks: node link per step $meas bytes (start-up subtracted), plan $pred"
        awk -v m="$meas" -v p="$pred" 'BEGIN { r = m / p; exit !(r >= 0.8 && r <= 1.2) }' \
            || fail "$s at $w ranks: $meas bytes per step over the node link, plan predicts $pred (not within 20%)"
        # every step's loss equal to full shard's to 1e-5
        paste -d' ' <(grep -o '"loss":[0-9.]*' "$W/full-$w/ranks-$w/metrics.jsonl" | cut -d: -f2) \
                    <(grep -o '"loss":[0-9.]*' "$W/$s-$w/ranks-$w/metrics.jsonl" | cut -d: -f2) |
            awk -v s="$s" -v w="$w" '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) { print s " at " w " ranks, step " NR ": loss " $2 " vs full " $1; bad = 1 } } END { exit bad }' \
            || fail "$s at $w ranks: losses differ from full shard's"
    done
    for pair in "full hsdp" "keep hsdpkeep"; do
        read -r a b <<<"$pair"
        la=$(awk -F'\t' 'NR == 2 { print $22 }' "$W/$a-$w.tsv") lb=$(awk -F'\t' 'NR == 2 { print $22 }' "$W/$b-$w.tsv")
        awk -v a="$la" -v b="$lb" 'BEGIN { exit !(b > 0 && a >= 4 * b) }' \
            || fail "$w ranks: $b sends $lb MB per step over the node link, $a $la MB (expected at least 4x less)"
        echo "$w ranks: node link per step $a $la MB, $b $lb MB ($(awk -v a="$la" -v b="$lb" 'BEGIN { printf "%.1f", a / b }')x less)"
    done
done
cat "$WORK/hsdp.md"
echo "ok: hybrid sharding over node0 + node1: at least 4x fewer node-link bytes per step, the same losses, plan's node-link bytes within 20%"
