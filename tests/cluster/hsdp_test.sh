#!/usr/bin/env bash
# Hybrid sharding across the two nodes of the test cluster (tests/cluster/cluster.sh): at
# 2 x 2 and 2 x 4 CPU ranks (ranks placed node by node), grad-accum 4, the tiny model, one
# benchmarks/strong_scaling.sh run per strategy -- full shard, hsdp (--shard-group node),
# full + keep-gathered, hsdp + keep-gathered -- with the bytes that crossed the node link
# (node0's + node1's zt0 tx_bytes over the whole run, per step), the step time and the loss
# after the last step. Asserts: hsdp's node-link bytes per step at most 1/4 of full shard's
# (with and without keep-gathered), every strategy's losses equal to full shard's to 1e-5.
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
run() {  # run RANKS NAME [strong_scaling args...]
    local w=$1 name=$2
    shift 2
    on login env OMP_NUM_THREADS=1 timeout 300 bash "$SRC/benchmarks/strong_scaling.sh" --zerotrain "$ZT" \
        --model "$SRC/tests/golden/tiny_untied_gqa" --data "$W/data" --ranks "$w" --global-batch $((4 * w)) \
        --steps $STEPS --warmup $WARM --hostfile "$W/hosts" --link-bytes "bash $W/link-bytes.sh" \
        --work "$W/$name-$w" --tsv "$W/$name-$w.tsv" --check "$@" >"$W/$name-$w.out" 2>&1 \
        || { cat "$W/$name-$w.out"; fail "$name at $w ranks: strong_scaling.sh failed"; }
}
{
    echo "| nodes x ranks | strategy | node link MB / step | gathered MB / rank / step | scattered MB / rank / step | step s | loss after $((STEPS + WARM)) steps |"
    echo "|---|---|---:|---:|---:|---:|---:|"
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
        awk -F'\t' -v w="$w" -v l="$label" -v loss="$loss" 'NR == 2 { printf "| 2 x %d | %s | %.3f | %.3f | %.3f | %.4f | %s |\n", w / 2, l, $22, $20, $21, $17, loss }' \
            "$W/$s-$w.tsv" >>"$WORK/hsdp.md"
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
echo "ok: hybrid sharding over node0 + node1: at least 4x fewer node-link bytes per step, the same losses"
