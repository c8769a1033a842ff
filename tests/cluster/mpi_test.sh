#!/usr/bin/env bash
# mpirun across the two nodes of the test cluster (tests/cluster/cluster.sh), launched
# from the login namespace with launch/zerotrain-2node.sh exactly as a user types it (a
# hostfile of two hosts x 2 slots; OpenMPI reaches the nodes through
# tests/cluster/netns-agent.sh as its rsh agent, TCP only on zt0):
#   1. preflight on both nodes passes; with the rendezvous port held on node 1 only,
#      check 4 FAILs naming node 1's first rank (2) and the launch stops (exit 1)
#   2. W = 4 as 2 nodes x 2 ranks: checkpoints, an agreed stop at step 4 (SIGUSR1 on
#      rank 0), then --resume auto as 1 node x 4 ranks to step 8
#   3. the 8 losses equal (1e-5 relative) a one-node run of the same global batch
#      (W = 1 x grad-accum 4), and the node link carried the collectives
#   mpi_test.sh ZEROTRAIN HOLD_PORT SOURCE_DIR WORK_DIR
set -u
ZT=$1 HOLD=$2 SRC=$3 WORK=$4
GOLD="$SRC/tests/golden"
. "$SRC/tests/cluster/cluster.sh"
cluster_test_start "$WORK"
printf 'node0 slots=2\nnode1 slots=2\n' >"$W/hosts2x2"
printf 'node0 slots=4\n' >"$W/hosts1x4"
cluster_ids_data "$ZT" 5 48 "$W"
COMMON=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --steps 8 --lr 1e-3 --adam-eps 1e-4 --threads 1 --log-every 1)
PORT=29533
# ZT_BIND=none: 4 ranks on a 2-core "node" would overload --bind-to numa, and a remote
# orted that cannot bind exits without a word ("lost communication with a remote daemon").
launch() {  # launch NODES RANKS_PER_NODE HOSTFILE OUT ARGS...: the user's command, on the login host
    local n=$1 g=$2 hf=$3 out=$4; shift 4
    on login env ZT_BIN="$ZT" ZT_NODES="$n" ZT_GPUS_PER_NODE="$g" ZT_BIND=none NCCL_SOCKET_IFNAME=zt0 ZT_PREFLIGHT_ARGS="--port $PORT" \
        ZT_WATCH_ARGS="--interval 0.5" ZT_WATCH_GRACE=20 \
        timeout 120 bash "$SRC/launch/zerotrain-2node.sh" "$hf" "$@" >"$out" 2>&1
}

echo "==== 1. preflight on both nodes, then the port held on node 1 only"
# (nsenter execs hold_port, so $! is the process that holds the port)
nsenter --net="/run/netns/$ZC_NS_node1" "$HOLD" $PORT sleep 60 &
holder=$!
for _ in $(seq 1 50); do on node1 bash -c "exec 3<>/dev/tcp/$ZC_IP_node1/$PORT" 2>/dev/null && break; sleep 0.1; done
launch 2 2 "$W/hosts2x2" "$W/busy.out" "${COMMON[@]}" --run-dir "$W/busy"
rc=$?
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
grep -E '^\[(PASS|FAIL)\] 4' "$W/busy.out"
[ $rc -eq 1 ] || { cat "$W/busy.out"; fail "the launch with a busy port on node 1 exited $rc, expected 1 (the gate)"; }
grep -q "\[FAIL\] 4 rendezvous .*port $PORT is in use.* on the node of rank 2" "$W/busy.out" ||
    { cat "$W/busy.out"; fail "check 4 does not name node 1's rank 2"; }
grep -q "preflight failed (exit 1): not launching" "$W/busy.out" || fail "the launcher did not stop at the gate"
[ ! -e "$W/busy/run.json" ] || fail "training started after a failed gate"

echo "==== 2. 2 nodes x 2 ranks: checkpoints, agreed stop at step 4"
before=$(cluster_bytes node1)
launch 2 2 "$W/hosts2x2" "$W/a.out" "${COMMON[@]}" --run-dir "$W/run" --save-every 2 --debug-signal-at-step 4
rc=$?
after=$(cluster_bytes node1)
cat "$W/a.out"
[ $rc -eq 0 ] || fail "the 2 x 2 run exited $rc"
grep -q "\[PASS\] 4 rendezvous .*interface 'zt0' up on every rank; port $PORT free on every node" "$W/a.out" || fail "preflight check 4 did not pass on both nodes"
grep -q "stopped: .*checkpoint of step 4 committed" "$W/a.out" || fail "no agreed stop at step 4"
grep -q "watcher: .*STOPPED" "$W/a.out" || fail "the watcher did not report STOPPED"
hosts=$(sed -n 's/.*"host":"\([^"]*\)".*/\1/p' "$W/run/ranks/"rank-0000[0-3].alive 2>/dev/null | sort -u | tr '\n' ' ')
echo "ranks ran on: $hosts"
[ "$hosts" = "node0 node1 " ] || echo "(alive files do not carry host names in this form; checked the link bytes instead)"
link=$(awk -v a="$before" -v b="$after" 'BEGIN { split(a, x, " "); split(b, y, " "); print (y[1] - x[1]) + (y[2] - x[2]) }')
echo "node 1's zt0 carried $link bytes during the 2 x 2 run"
[ "$link" -gt 1000000 ] || fail "only $link bytes crossed node 1's link: the ranks did not talk across the nodes"

echo "==== 3. resume on 1 node x 4 ranks to step 8"
launch 1 4 "$W/hosts1x4" "$W/b.out" "${COMMON[@]}" --run-dir "$W/run" --resume auto
rc=$?
cat "$W/b.out"
[ $rc -eq 0 ] || fail "the 1 x 4 resume exited $rc"
grep -q "resume: .*step 4.*saved by 4 ranks, loaded by 4" "$W/b.out" || fail "did not resume from step 4"
grep -q "watcher: .*COMPLETE" "$W/b.out" || fail "the watcher did not report COMPLETE"

echo "==== 4. the same global batch on one node: W = 1 x grad-accum 4"
on node0 "$ZT" train "${COMMON[@]}" --run-dir "$W/ref" --grad-accum 4 >"$W/ref.out" 2>&1 || { cat "$W/ref.out"; fail "reference run"; }
loss() { sed -n 's/.*"step":\([0-9]*\),.*"loss":\([0-9.]*\).*/\1 \2/p' "$1" | sort -n -k1,1 | awk '{ l[$1] = $2 } END { for (s in l) print s, l[s] }' | sort -n; }
join <(loss "$W/ref/metrics.jsonl") <(loss "$W/run/metrics.jsonl") >"$W/losses.txt"
echo "step one-node(1x4ga) two-node(2x2 -> 1x4)"; cat "$W/losses.txt"
[ "$(wc -l <"$W/losses.txt")" -eq 8 ] || fail "expected 8 steps in both runs"
awk '{ d = $2 - $3; if (d < 0) d = -d; if (d > 1e-5 * $2) { print "step " $1 ": " $2 " vs " $3; bad = 1 } } END { exit bad }' "$W/losses.txt" ||
    fail "the two-node run's losses differ from the one-node run's by more than 1e-5 relative"
echo "ok: preflight on both nodes (busy port on node 1 named), 2 x 2 -> stop -> 1 x 4 resume, losses = one node"
