#!/usr/bin/env bash
# Faults across the network of the two-node test cluster (tests/cluster/cluster.sh),
# every job launched from the login namespace with launch/zerotrain-2node.sh on a
# hostfile "node0 slots=2 / node1 slots=2" (W = 4), the watcher in the login namespace:
#   kill_node   every process on node 1 SIGKILLed mid-step: the job ends (no hang), the
#               watcher says CRASHED naming node 1's ranks 2 and 3, the last checkpoint loads
#   link_down   node 1's link set down mid-step: node 0's collective deadline fires naming
#               the stuck collective, exit 3 within the deadline + a few seconds
#   uneven      the field's per-rank uneven blocks across the nodes: evenfix stops every
#               rank at the same step; --no-evenfix --no-preflight: the deadline names rank
#               and collective on both nodes
# Each fault's detection time and exit code go to WORK/faults.tsv and stdout.
#   faults_test.sh ZEROTRAIN SOURCE_DIR WORK_DIR [CASE...]
set -u
ZT=$1 SRC=$2 WORK=$3; shift 3
CASES=${*:-kill_node link_down uneven}
GOLD="$SRC/tests/golden"
. "$SRC/tests/cluster/cluster.sh"
cluster_test_start "$WORK"
printf 'node0 slots=2\nnode1 slots=2\n' >"$W/hosts"
printf 'fault\tdetected_after_s\texit_code\tverdict\n' >"$WORK/faults.tsv"
record() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$WORK/faults.tsv"; echo "fault $1: detected after $2 s, exit $3: $4"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
LAUNCH=(env ZT_BIN="$ZT" ZT_NODES=2 ZT_GPUS_PER_NODE=2 NCCL_SOCKET_IFNAME=zt0 OMP_NUM_THREADS=1
        bash "$SRC/launch/zerotrain-2node.sh")
node_clear() {  # node_clear HOST T0: seconds after T0 until HOST runs no zerotrain (60 s at most)
    for _ in $(seq 1 600); do
        ip netns pids "$(zc_ns "$1")" | xargs -r ps -o comm= -p 2>/dev/null | grep -q zerotrain || { since "$2"; return 0; }
        sleep 0.1
    done
    return 1
}
wait_steps() {  # wait_steps RUN N: until metrics.jsonl has N lines (60 s at most)
    for _ in $(seq 1 600); do
        [ -f "$1/metrics.jsonl" ] && [ "$(wc -l <"$1/metrics.jsonl")" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
cluster_ids_data "$ZT" 7 2000 "$W"
TRAIN=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --steps 400 --threads 1 --log-every 0 --lr 1e-3 --save-every 3
       --alive-interval 1)

for CASE in $CASES; do
echo "==== $CASE"
case "$CASE" in
kill_node)
    R="$W/kill"
    on login env ZT_WATCH_ARGS="--interval 0.5 --alive-interval 1" ZT_WATCH_GRACE=60 \
        timeout 150 "${LAUNCH[@]}" --no-preflight "$W/hosts" "${TRAIN[@]}" --run-dir "$R" >"$W/kill.out" 2>&1 &
    job=$!
    wait_steps "$R" 7 || { cat "$W/kill.out"; fail "the job did not reach step 7"; }
    pids=$(ip netns pids "$ZC_NS_node1" | tr '\n' ' ')
    [ -n "$pids" ] || fail "no processes on node 1"
    t0=$(now) step=$(wc -l <"$R/metrics.jsonl")
    # shellcheck disable=SC2086
    kill -KILL $pids
    echo "killed every process on node 1 at step $step: $pids"
    # the job is over when node 0 has no zerotrain left (mpirun takes the rest down)
    t_end=$(node_clear node0 "$t0")
    wait $job; rc=$?
    t=$(since "$t0")
    cat "$W/kill.out"; echo "---- watch.log"; tail -n 12 "$R/watch.log"
    [ $rc -ne 124 ] || fail "the job hung (outer timeout)"
    [ -n "$t_end" ] || fail "node 0's ranks still ran 60 s after node 1 died"
    grep -q "zerotrain-2node: mpirun exited with 0" "$W/kill.out" && fail "mpirun exited 0 after node 1 died"
    mrc=$(sed -n 's/^zerotrain-2node: mpirun exited with \([0-9]*\)$/\1/p' "$W/kill.out")
    verdict=$(grep -E '\] CRASHED:' "$R/watch.log" | tail -1)
    [ -n "$verdict" ] || fail "the watcher did not report CRASHED"
    echo "$verdict" | grep -E -q "rank [23] .*host node1" || fail "CRASHED does not name a rank of node 1: $verdict"
    for r in 2 3; do grep -E -q "^  rank $r: tick .*host node1" "$R/watch.log" || fail "the report does not place rank $r on node1"; done
    wv=$(sed -n 's/.*watcher: .*(exit \([0-9]*\))$/\1/p' "$W/kill.out")
    record kill_node "job over ${t_end}, CRASHED ${t}" "mpirun $mrc, watch $wv" "$(echo "$verdict" | cut -c12-150)"
    # the last checkpoint loads: W = 1 x grad-accum 4 (the same global batch) resumes from it and takes a step
    last=$(cat "$R/checkpoints/latest")
    n=$((10#${last#step-}))
    on node0 "$ZT" train "${TRAIN[@]}" --grad-accum 4 --run-dir "$R" --resume auto --debug-signal-at-step $((n + 1)) --no-preflight >"$W/kill-resume.out" 2>&1 ||
        { cat "$W/kill-resume.out"; fail "the last checkpoint $last does not load"; }
    grep -i -E "resum|checkpoint" "$W/kill-resume.out" | head -3
    [ "$(tail -1 "$R/metrics.jsonl" | sed 's/.*"step":\([0-9]*\).*/\1/')" = $((n + 1)) ] || fail "no step $((n + 1)) after the resume"
    echo "ok [$CASE]: checkpoint $last loads"
    ;;
link_down)
    R="$W/link"
    on login env ZT_WATCH_ARGS="--interval 0.5 --alive-interval 1" ZT_WATCH_GRACE=5 \
        timeout 150 "${LAUNCH[@]}" --no-preflight "$W/hosts" "${TRAIN[@]}" --save-every 0 --run-dir "$R" --collective-timeout 3 \
        >"$W/link.out" 2>&1 &
    job=$!
    # mid-step, not inside a checkpoint save (that one has --save-timeout, 1800 s)
    wait_steps "$R" 7 || { cat "$W/link.out"; fail "the job did not reach step 7"; }
    t0=$(now)
    cluster_link node1 down
    echo "node 1's link (its switch port) set down at step $(wc -l <"$R/metrics.jsonl")"
    t_ranks=$(node_clear node0 "$t0")
    wait $job; rc=$?
    t=$(since "$t0")
    cluster_link node1 up
    cat "$W/link.out"
    [ $rc -ne 124 ] || fail "the job hung (outer timeout)"
    grep -E 'rank [01]: collective deadline exceeded after 3 s: stuck in [a-z_]+\(' "$W/link.out" ||
        fail "node 0's ranks did not report the stuck collective"
    [ $rc -eq 3 ] || fail "exit $rc, expected 3"
    [ -n "$t_ranks" ] || fail "node 0's ranks still ran 60 s after the link went down"
    awk -v t="$t_ranks" 'BEGIN { exit !(t < 3 + 4) }' || fail "node 0's ranks ended $t_ranks s after the link went down: more than the 3 s deadline + 4 s"
    awk -v t="$t" 'BEGIN { exit !(t < 3 + 20) }' || fail "the launch took $t s to end: more than the 3 s deadline + 20 s"
    record link_down "node 0 ranks exit ${t_ranks}, launch over ${t}" "$rc" "$(grep -m1 -E 'rank [01]: collective deadline exceeded' "$W/link.out" | cut -c1-160)"
    echo "ok [$CASE]"
    ;;
uneven)
    # 4 x 8 - 1 blocks dealt round-robin to 4 per-rank files: ranks 0-2 get 8, rank 3 (node 1) 7
    mkdir -p "$W/uneven"
    cluster_ids_data "$ZT" 7 31 "$W/uneven" --per-rank 4
    U=(--init "$GOLD/tiny_untied_gqa" --data "$W/uneven/data" --epochs 1 --lr 1e-3 --threads 1 --log-every 0)
    on login env ZT_WATCH_ARGS="--interval 0.5" ZT_WATCH_GRACE=10 timeout 120 "${LAUNCH[@]}" "$W/hosts" "${U[@]}" \
        --run-dir "$W/even" --collective-timeout 20 >"$W/even.out" 2>&1 || { cat "$W/even.out"; fail "evenfix run failed"; }
    grep -E "evenfix|stops after" "$W/even.out"
    grep -q "every rank stops after 7 steps" "$W/even.out" || fail "evenfix did not settle on 7 steps"
    [ "$(wc -l <"$W/even/metrics.jsonl")" -eq 7 ] || fail "expected 7 steps in metrics.jsonl"
    for r in 0 1 2 3; do
        [ "$(wc -l <"$W/even/ranks/rank-0000$r.metrics.jsonl")" -eq 7 ] || fail "rank $r did not stop at step 7"
    done
    t0=$(now)
    on login env ZT_WATCH_ARGS="--interval 0.5" ZT_WATCH_GRACE=5 timeout 120 "${LAUNCH[@]}" --no-preflight "$W/hosts" \
        "${U[@]}" --run-dir "$W/noeven" --no-evenfix --no-preflight --collective-timeout 3 --first-collective-timeout 30 >"$W/noeven.out" 2>&1
    rc=$? t=$(since "$t0")
    cat "$W/noeven.out"
    [ $rc -ne 124 ] || fail "the --no-evenfix job hung (outer timeout)"
    [ $rc -eq 3 ] || fail "exit $rc, expected 3"
    grep -E 'zerotrain: rank 3: collective deadline exceeded.*barrier\("epoch-end save"\)|rank 3: in barrier\("epoch-end save"\)' "$W/noeven.out" ||
        fail "no report names rank 3 (node 1) in the epoch-end barrier"
    grep -E 'rank [01]: (collective deadline exceeded.*stuck in|in) (allgather|reduce_scatter)' "$W/noeven.out" ||
        fail "no report names a node 0 rank in a data collective"
    record uneven_no_evenfix "launch over $t (deadline 3)" "$rc" "$(grep -m1 'collective deadline exceeded' "$W/noeven.out" | cut -c1-160)"
    echo "ok [$CASE]"
    ;;
*) fail "unknown case $CASE" ;;
esac
done
echo "==== faults"
column -t -s $'\t' "$WORK/faults.tsv" 2>/dev/null || cat "$WORK/faults.tsv"
