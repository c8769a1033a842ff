#!/usr/bin/env bash
# Strong scaling across the two nodes of the test cluster (tests/cluster/cluster.sh):
# benchmarks/strong_scaling.sh in its two-node mode (--hostfile, --link-bytes) from the
# login namespace at 4 / 8 / 16 CPU ranks (half on each node, oversubscribed), the tiny
# model, the same global batch; the table gets the bytes that crossed the node link
# (node0's + node1's zt0 tx_bytes) and their share of all the bytes the ranks moved.
# Checked with --check; the table lands in WORK/scaling.md.
#   scaling_test.sh ZEROTRAIN SOURCE_DIR WORK_DIR
set -u
ZT=$1 SRC=$2 WORK=$3
. "$SRC/tests/cluster/cluster.sh"
cluster_test_start "$WORK"
printf 'node0 slots=8\nnode1 slots=8\n' >"$W/hosts"
cluster_ids_data "$ZT" 3 96 "$W"
# what the nodes sent over their links (ip netns exec: the namespace's own sysfs)
cat >"$W/link-bytes.sh" <<EOS
for ns in $ZC_NS_node0 $ZC_NS_node1; do ip netns exec \$ns cat /sys/class/net/zt0/statistics/tx_bytes; done
EOS
on login env OMP_NUM_THREADS=1 timeout 400 bash "$SRC/benchmarks/strong_scaling.sh" --zerotrain "$ZT" \
    --model "$SRC/tests/golden/tiny_untied_gqa" --data "$W/data" --ranks "4 8 16" --global-batch 16 --steps 3 --warmup 1 \
    --hostfile "$W/hosts" --link-bytes "bash $W/link-bytes.sh" --work "$W/bench" --out "$WORK/scaling.md" \
    --tsv "$WORK/scaling.tsv" --check >"$W/bench.out" 2>&1
rc=$?
cat "$W/bench.out"
[ $rc -eq 0 ] || fail "strong_scaling.sh exited $rc"
grep -q "node link share" "$W/bench.out" || fail "no node-link columns in the table"
awk -F'\t' 'NR > 1 { if ($22 <= 0 || $23 <= 0 || $23 > 1.5) { print "ranks " $1 ": link MB/step " $22 ", share " $23; bad = 1 } } END { exit bad }' \
    "$WORK/scaling.tsv" || fail "implausible node-link bytes"
for w in 4 8 16; do
    hosts=$(grep -h -o '"host": *"[^"]*"' "$W/bench/ranks-$w/ranks/"*.alive 2>/dev/null | sort -u | wc -l)
    [ "$hosts" -eq 2 ] || fail "the $w-rank run did not span both nodes ($hosts hosts in its liveness ticks)"
done
echo "ok: strong scaling at 4 / 8 / 16 ranks over node0 + node1 with the node link's bytes"
