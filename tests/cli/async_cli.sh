#!/usr/bin/env bash
# --async-save (checkpoint/ckpt_async.c, train/save.c async_settle): the background write gives
# the same ckpt.h5 datasets as the synchronous save; a resume from an async checkpoint equals
# the uninterrupted run (bit for bit at the same W, 1e-5 after resharding); a save point that
# arrives during a write waits and logs the wait; --keep-last counts committed checkpoints;
# a stop signal, kill -9 of one or all ranks, ENOSPC (injected and on a small tmpfs) and a
# stalled writer during the write each leave the last committed checkpoint loadable and
# `latest` naming it; the snapshot's host memory is checked and shown at start.
#   async_cli.sh ZEROTRAIN ST_COMPARE SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 CMP=$2 SRC=$3 WORK=$4 CASE=$5
W="$WORK/$CASE"
if mountpoint -q "$W/mnt" 2>/dev/null; then umount "$W/mnt"; fi
rm -rf "$W" && mkdir -p "$W"
# 48 single-block documents: a global batch of 4 blocks gives 12 steps per epoch.
. "$SRC/tests/support/tiny_ids_data.sh"
COMMON=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --lr 1e-3 --adam-eps 1e-4 --warmup 2 --save-dtype fp32
        --log-every 0 --threads 1)

run() {  # run NPROCS RUN_DIR ARGS... (output to RUN_DIR.out); must succeed
    local n=$1 dir=$2; shift 2
    timeout 300 "${MPIRUN[@]}" -n "$n" "$ZT" train "${COMMON[@]}" --run-dir "$dir" "$@" >"$dir.out" 2>&1 \
        || { cat "$dir.out"; fail "run in $dir failed"; }
}
# dataset_digest STEP_DIR: "dataset sha256" of every dataset's bytes (the ranges inspect names)
dataset_digest() {
    "$ZT" inspect "$1" | sed -nE 's|^  (/units/[0-9]+/[a-z_]+) .*file bytes \[([0-9]+), ([0-9]+)\).*|\1 \2 \3|p' |
        while read -r ds a b; do
            echo "$ds $(tail -c +$((a + 1)) "$1/ckpt.h5" | head -c $((b - a)) | sha256sum | cut -c1-16)"
        done
}
latest_is() {  # latest_is RUN NAME: latest names NAME, and that checkpoint verifies
    local got
    got=$(cat "$1/checkpoints/latest" 2>/dev/null)
    [ "$got" = "$2" ] || fail "latest names '$got', expected $2"
    "$ZT" inspect "$1/checkpoints/$2" >"$1.inspect" 2>&1 || { cat "$1.inspect"; fail "$2 does not verify"; }
}
rank_pid() {  # rank_pid RUN RANK: the pid from the rank's liveness tick
    sed 's/.*"pid": \([0-9]*\).*/\1/' "$1/ranks/rank-0000$2.alive"
}
wait_for() {  # wait_for FILE PATTERN SECONDS
    for _ in $(seq 1 $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

case "$CASE" in
identical)
    # the same 6 steps at W=2, synchronous and asynchronous saves every 2 steps
    run 2 "$W/sync" --steps 6 --save-every 2 --keep-last 0 --save-io mpiio  # HDF5 collective writes: the same bytes
    # the writer thread's snapshot copy held back 0.5 s: the next step's update must wait for it
    # (the engine's update fence), or the snapshot would hold that step's values
    timeout 300 "${MPIRUN[@]}" -n 2 -x ZT_CKPT_DEBUG_COPY_DELAY_S=0.5 "$ZT" train "${COMMON[@]}" --run-dir "$W/async" \
        --steps 6 --save-every 2 --keep-last 0 --async-save >"$W/async.out" 2>&1 || { cat "$W/async.out"; fail "async run"; }
    grep -q "checkpoint: step 2 snapshot" "$W/async.out" || { cat "$W/async.out"; fail "step 2 was not saved in the background"; }
    grep -q "checkpoint: step 4 -> .*written in the background" "$W/async.out" || fail "step 4 was not committed from the background"
    grep -q '"ckpt_event":"snapshot"' "$W/async/metrics.jsonl" || fail "no snapshot record in metrics.jsonl"
    grep -q 'snapshot' "$W/sync.out" && fail "the synchronous run took a snapshot"
    n=0
    for s in 00000002 00000004 00000006; do
        a=$(dataset_digest "$W/sync/checkpoints/step-$s") b=$(dataset_digest "$W/async/checkpoints/step-$s")
        [ "$(echo "$a" | grep -c units)" -gt 0 ] || fail "no datasets listed for step $s"
        [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") | head; fail "step $s: datasets differ between sync and async"; }
        n=$((n + $(echo "$a" | grep -c units)))
    done
    # the comparison can fail: two different steps' datasets differ
    [ "$(dataset_digest "$W/sync/checkpoints/step-00000002")" != "$(dataset_digest "$W/sync/checkpoints/step-00000004")" ] \
        || fail "steps 2 and 4 have identical datasets: the comparison proves nothing"
    diff <(cut -d, -f1-3 "$W/sync/metrics.jsonl") <(grep -v ckpt_event "$W/async/metrics.jsonl" | cut -d, -f1-3) \
        || fail "losses differ"
    grep '"ckpt_event":"copied"' "$W/async/metrics.jsonl" | grep -q '"ckpt_blocked_s":0\.[3-9]' \
        || { grep ckpt_event "$W/async/metrics.jsonl"; fail "no update waited ~0.5 s for the delayed snapshot copy"; }
    ls -d "$W"/async/checkpoints/*.partial 2>/dev/null && fail "a .partial directory was left behind"
    echo "ok [$CASE]: $n datasets of steps 2, 4, 6 byte-identical between sync and async saves"
    ;;
hsdp)
    # hybrid sharding (W=4, --shard-group 2): the background write gives the synchronous save's
    # datasets (one writer per shard), and a replica that diverged is refused as in the sync save
    run 4 "$W/sync" --steps 4 --save-every 2 --keep-last 0 --shard-group 2
    run 4 "$W/async" --steps 4 --save-every 2 --keep-last 0 --shard-group 2 --async-save
    grep -q "checkpoint: step 2 snapshot" "$W/async.out" || { cat "$W/async.out"; fail "step 2 was not saved in the background"; }
    for s in 00000002 00000004; do
        a=$(dataset_digest "$W/sync/checkpoints/step-$s") b=$(dataset_digest "$W/async/checkpoints/step-$s")
        [ "$(echo "$a" | grep -c units)" -gt 0 ] || fail "no datasets listed for step $s"
        [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") | head; fail "step $s: datasets differ between sync and async"; }
    done
    ZT_TEST_CORRUPT_REPLICA=3 timeout 300 "${MPIRUN[@]}" -x ZT_TEST_CORRUPT_REPLICA -n 4 "$ZT" train "${COMMON[@]}" \
        --run-dir "$W/bad" --steps 4 --save-every 2 --shard-group 2 --async-save >"$W/bad.out" 2>&1 &&
        { cat "$W/bad.out"; fail "a diverged replica was not refused"; }
    grep -q "rank 3 (replica 1 of shard 1" "$W/bad.out" || { cat "$W/bad.out"; fail "the refusal does not name rank 3"; }
    [ -e "$W/bad/checkpoints/latest" ] && fail "a checkpoint was committed from diverged replicas"
    echo "ok [$CASE]: hybrid 2 x 2: async datasets of steps 2 and 4 equal the sync ones; a diverged replica refused"
    ;;
resume_same_world | resume_reshard)
    # uninterrupted 12 steps vs. resuming the asynchronously written step-8 checkpoint
    run 2 "$W/full" --steps 12 --grad-accum 2
    run 2 "$W/part" --steps 12 --grad-accum 2 --async-save --save-every 4
    grep -q "checkpoint: step 8 snapshot" "$W/part.out" || { cat "$W/part.out"; fail "step 8 was not an async save"; }
    grep -q "checkpoint: step 8 -> .*written in the background" "$W/part.out" || fail "step 8 not committed"
    rm -rf "$W/part/final"
    if [ "$CASE" = resume_same_world ]; then
        run 2 "$W/part" --steps 12 --grad-accum 2 --resume "$W/part/checkpoints/step-00000008"
        grep -q "resume: .*step 8" "$W/part.out" || { cat "$W/part.out"; fail "did not resume from step 8"; }
        "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 0 || fail "not bit-identical"
        diff <(cut -d, -f1-3 "$W/full/metrics.jsonl") <(grep -v ckpt_event "$W/part/metrics.jsonl" | cut -d, -f1-3) \
            || fail "loss per step differs"
        echo "ok [$CASE]: resumed the async step-8 checkpoint at W=2: final weights and every loss bit-identical"
    else
        run 1 "$W/part" --steps 12 --grad-accum 4 --resume "$W/part/checkpoints/step-00000008"
        grep -q "saved by 2 ranks, loaded by 1" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message"; }
        "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 1e-5 || fail "final weights differ"
        echo "ok [$CASE]: the async step-8 checkpoint of W=2 resumed at W=1: final weights within 1e-5"
    fi
    ;;
wait_logged)
    # step 2's write pauses 2 s: the save point of step 3 waits for it and says so; with
    # --keep-last 1 only committed checkpoints count (one left, no .partial)
    timeout 300 "${MPIRUN[@]}" -n 2 -x ZT_CKPT_DEBUG_PAUSE_S=2 -x ZT_CKPT_DEBUG_PAUSE_STEP=2 "$ZT" train "${COMMON[@]}" \
        --run-dir "$W/run" --steps 5 --save-every 1 --keep-last 1 --async-save >"$W/run.out" 2>&1 \
        || { cat "$W/run.out"; fail "run failed"; }
    cat "$W/run.out" | grep checkpoint
    grep -q "pausing the checkpoint write of step 2" "$W/run.out" || fail "the pause was not injected"
    line=$(grep '"ckpt_event":"snapshot"' "$W/run/metrics.jsonl" | grep '"ckpt_step":3,')
    [ -n "$line" ] || fail "no snapshot record for step 3"
    wait_s=$(echo "$line" | sed -E 's/.*"ckpt_wait_s":([0-9.]+).*/\1/')
    awk -v w="$wait_s" 'BEGIN{exit !(w >= 1.0)}' || fail "step 3's save point waited $wait_s s (expected >= 1 s)"
    grep -q "waited .* for the write of step 2" "$W/run.out" || fail "the wait is not said on the terminal"
    grep -aq "ckpt/wait_s" "$W"/run/tb/events.out.tfevents.* || fail "no ckpt/wait_s in TensorBoard"
    complete=$(ls -d "$W"/run/checkpoints/step-???????? | wc -l)
    [ "$complete" -eq 1 ] || { ls "$W/run/checkpoints"; fail "--keep-last 1 left $complete complete checkpoints"; }
    ls -d "$W"/run/checkpoints/*.partial 2>/dev/null && fail "a .partial directory was left behind"
    latest_is "$W/run" step-00000005
    echo "ok [$CASE]: step 3 waited $wait_s s for step 2's write (metrics.jsonl, TensorBoard, terminal); one checkpoint kept"
    ;;
stop_during_write)
    # SIGUSR1 during step 3 while step 2's write is paused: the stop waits, commits step 2,
    # saves step 3 synchronously, exits 0
    timeout 300 "${MPIRUN[@]}" -n 2 -x ZT_CKPT_DEBUG_PAUSE_S=3 -x ZT_CKPT_DEBUG_PAUSE_STEP=2 "$ZT" train "${COMMON[@]}" \
        --run-dir "$W/run" --steps 10 --save-every 2 --keep-last 0 --async-save --debug-signal-at-step 3 \
        >"$W/run.out" 2>&1 || { cat "$W/run.out"; fail "the stopped job should exit 0"; }
    grep -q "stopped: a stop signal" "$W/run.out" || { cat "$W/run.out"; fail "no graceful stop"; }
    grep -q "checkpoint: step 2 -> .*written in the background" "$W/run.out" || fail "step 2 was not committed"
    grep -q "checkpoint: waited .* for the write of step 2" "$W/run.out" || fail "the stop did not wait for the write"
    latest_is "$W/run" step-00000003
    "$ZT" inspect "$W/run/checkpoints/step-00000002" >/dev/null || fail "step 2 does not verify"
    run 2 "$W/run" --steps 10 --save-every 2 --keep-last 0 --async-save --resume
    grep -q "resume: .*step 3" "$W/run.out" || { cat "$W/run.out"; fail "did not resume from step 3"; }
    echo "ok [$CASE]: the stop waited for step 2's write, committed it and step 3, exit 0, resumed"
    ;;
kill_rank | kill_all)
    # kill -9 during step 4's background write (paused half way): step 2 stays committed,
    # latest names it, --resume auto continues from it
    timeout 300 "${MPIRUN[@]}" -n 2 -x ZT_CKPT_DEBUG_PAUSE_S=60 -x ZT_CKPT_DEBUG_PAUSE_STEP=4 "$ZT" train \
        "${COMMON[@]}" --run-dir "$W/run" --steps 6 --save-every 2 --async-save --alive-interval 0.2 \
        >"$W/run.out" 2>&1 &
    job=$!
    wait_for "$W/run.out" "pausing the checkpoint write of step 4" 120 || { kill $job; cat "$W/run.out"; fail "no pause"; }
    # the heartbeat and the watcher show the write in flight (step 6, the last, waits for it)
    wait_for "$W/run/heartbeat.json" '"step": 6' 60 || { kill $job; fail "step 6 never reached"; }
    grep -q '"checkpoint_writing": {"step": 4' "$W/run/heartbeat.json" || { kill $job; fail "heartbeat: no write in flight"; }
    "$ZT" watch "$W/run" --once >"$W/watch.out" 2>&1
    grep -q "checkpoint of step 4 writing in the background" "$W/watch.out" || { kill $job; cat "$W/watch.out"; fail "watch: no write in flight"; }
    # and the report page (checkpoints fact)
    "$ZT" report "$W/run" -o "$W/report.html" >/dev/null 2>&1 || { kill $job; fail "report"; }
    grep -q "step 4 being written in the background" "$W/report.html" || { kill $job; fail "report: no write in flight"; }
    if [ "$CASE" = kill_rank ]; then
        kill -9 "$(rank_pid "$W/run" 1)" || fail "could not kill rank 1"
    else
        kill -9 "$(rank_pid "$W/run" 0)" "$(rank_pid "$W/run" 1)" || fail "could not kill the ranks"
    fi
    wait $job; rc=$?
    [ $rc -ne 0 ] || fail "the job exited 0 after a kill -9"
    [ $rc -ne 124 ] || fail "the job hung after a kill -9"
    [ -d "$W/run/checkpoints/step-00000004" ] && fail "step 4 was committed although its write never finished"
    latest_is "$W/run" step-00000002
    run 2 "$W/run" --steps 6 --save-every 2 --resume auto
    grep -q "resume: .*step 2" "$W/run.out" || { cat "$W/run.out"; fail "--resume auto did not continue from step 2"; }
    [ -f "$W/run/complete.json" ] || fail "the resumed run did not complete"
    ls -d "$W"/run/checkpoints/*.partial 2>/dev/null && fail "the dead write's .partial was not cleared"
    echo "ok [$CASE]: killed during step 4's write (exit $rc): latest = step-2, verified, resumed to step 6"
    ;;
enospc_inject)
    # rank 1's write of step 4 fails like a full disk: every rank learns it at a step boundary,
    # the error names rank 1 and ENOSPC, the job fails as a failed save does, step 2 stays
    cat >"$W/rank1_full.sh" <<EOF
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && export ZT_CKPT_FAIL_AFTER_BYTES=1000 ZT_CKPT_DEBUG_FAIL_STEP=4
exec "$ZT" "\$@"
EOF
    chmod +x "$W/rank1_full.sh"
    timeout 300 "${MPIRUN[@]}" -n 2 "$W/rank1_full.sh" train "${COMMON[@]}" --run-dir "$W/run" --steps 12 \
        --save-every 2 --keep-last 0 --async-save >"$W/run.out" 2>&1
    rc=$?
    cat "$W/run.out" | tail -4
    [ $rc -eq 1 ] || fail "expected exit 1 (a failed save), got $rc"
    for r in 0 1; do
        grep -q "rank $r: step 4: the checkpoint written in the background .*rank 1: .*No space left on device" "$W/run.out" \
            || fail "rank $r did not report rank 1's ENOSPC"
    done
    [ -d "$W/run/checkpoints/step-00000004" ] && fail "step 4 was committed"
    ls -d "$W"/run/checkpoints/*.partial 2>/dev/null && fail "the failed write's .partial is still there"
    grep -q "latest still names it" "$W/run.out" || fail "the error does not say latest is untouched"
    latest_is "$W/run" step-00000002
    echo "ok [$CASE]: rank 1's ENOSPC reached both ranks (exit 1); latest = step-2, verified"
    ;;
enospc_tmpfs)
    # a real full disk: the run directory on a tmpfs that holds one checkpoint and a half
    mkdir -p "$W/mnt"
    run 2 "$W/probe" --steps 2 --no-tensorboard  # how big one checkpoint of this model is
    ck=$(stat -c %s "$W/probe/checkpoints/step-00000002/ckpt.h5") || fail "no probe checkpoint"
    size=$(( ck * 3 / 2 + 200000 ))  # the run's other files and one checkpoint and a half
    mount -t tmpfs -o size=$size tmpfs "$W/mnt" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$W/mnt" 2>/dev/null' EXIT
    timeout 300 "${MPIRUN[@]}" -n 2 -x ZT_CKPT_NO_SPACE_CHECK=1 -x ZT_CKPT_NO_RESERVE=1 "$ZT" train "${COMMON[@]}" \
        --run-dir "$W/mnt/run" --steps 12 --save-every 2 --keep-last 0 --async-save --no-preflight --no-tensorboard \
        >"$W/run.out" 2>&1
    rc=$?
    tail -4 "$W/run.out"; df -h "$W/mnt" | tail -1
    [ $rc -eq 1 ] || fail "expected exit 1 (a failed save), got $rc"
    grep -q "the checkpoint written in the background.*No space left on device" "$W/run.out" || fail "no ENOSPC named"
    ls -d "$W"/mnt/run/checkpoints/*.partial 2>/dev/null && fail "the failed write's .partial is still there"
    latest_is "$W/mnt/run" step-00000002
    echo "ok [$CASE]: a real ENOSPC during step 4's background write: exit 1, latest = step-2, verified"
    ;;
stall)
    # rank 1's writer stalls in step 4's save: past --save-timeout every rank reports the
    # background write like a stuck collective and the job exits 3; step 2 stays
    start=$(date +%s)
    timeout 120 "${MPIRUN[@]}" -n 2 -x ZT_CKPT_DEBUG_STALL_RANK=1 -x ZT_CKPT_DEBUG_STALL_STEP=4 -x ZT_CKPT_DEBUG_STALL_S=600 \
        "$ZT" train "${COMMON[@]}" --run-dir "$W/run" --steps 100000 --epochs 1 --save-every 2 --async-save \
        --save-timeout 3 --collective-timeout 5 >"$W/run.out" 2>&1
    rc=$? elapsed=$(( $(date +%s) - start ))
    tail -30 "$W/run.out"
    [ $rc -ne 124 ] || fail "the job hung: killed by the outer timeout"
    [ $rc -ne 0 ] || fail "exit 0 although rank 1's writer never finished"
    grep -q "stalling inside the checkpoint save of step 4" "$W/run.out" || fail "the stall was not injected"
    grep -q 'background checkpoint write of step 4 (limit: --save-timeout)' "$W/run.out" || fail "no report names the background write"
    grep -q 'collective deadline exceeded' "$W/run.out" || fail "not reported like a stuck collective"
    [ "$elapsed" -lt 60 ] || fail "took $elapsed s"
    [ -d "$W/run/checkpoints/step-00000004" ] && fail "step 4 was committed"
    latest_is "$W/run" step-00000002
    echo "ok [$CASE]: the stalled writer was reported and the job aborted (exit $rc) after $elapsed s; latest = step-2"
    ;;
memory)
    # the plan line shows the snapshot; too little host memory is refused naming the sizes
    run 2 "$W/ok" --steps 2 --async-save
    grep -q "checkpoints: asynchronous (--async-save): host snapshot .* per rank" "$W/ok.out" \
        || { cat "$W/ok.out"; fail "no snapshot size in the plan"; }
    timeout 120 "${MPIRUN[@]}" -n 2 -x ZT_DEBUG_MEM_AVAILABLE=100000 "$ZT" train "${COMMON[@]}" --run-dir "$W/no" \
        --steps 2 --async-save >"$W/no.out" 2>&1 && { cat "$W/no.out"; fail "should be refused"; }
    grep -q -- "--async-save: the checkpoint snapshot needs .* per rank, .* for the 2 ranks on this node, and the node has 97.66 KiB available" "$W/no.out" \
        || { cat "$W/no.out"; fail "the refusal does not name the sizes"; }
    [ -d "$W/no/checkpoints" ] && ls "$W/no/checkpoints" | grep -q step && fail "a refused run saved something"
    echo "ok [$CASE]: $(grep -m1 -o 'host snapshot [^(]*per rank' "$W/ok.out"); refusal: $(grep -m1 -o 'needs .* available' "$W/no.out" | head -c 160)"
    ;;
*) fail "unknown case" ;;
esac
