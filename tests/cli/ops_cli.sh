#!/usr/bin/env bash
# CLI tests of the operations commands: zerotrain triage / calibrate / watch on the
# sample logs in tests/data/triage and on run directories written here, and end to
# end on real `zerotrain train` runs under mpirun (a clean run is COMPLETE; the field
# deadlock reproduced with --no-evenfix is HUNG, diagnosed and killed by --on-hang).
#   ops_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
# To add a case: a new branch below, and its name in tests/ops.cmake.
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
S="$SRC/tests/data/triage"
GOLD="$SRC/tests/golden"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
# expect RC CMD...: run, keep output in $W/out.txt, check the exit code
expect() {
    local want=$1; shift
    "$@" >"$W/out.txt" 2>&1
    local rc=$?
    cat "$W/out.txt"
    [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $*"
}
has() { grep -q -- "$1" "$W/out.txt" || fail "output lacks: $1"; }
now() { date +%s.%N | cut -c1-14; }
ago() { awk -v t="$1" -v d="$2" 'BEGIN{printf "%.3f", t-d}'; }

# Fake run directory pieces (the formats the trainer writes; docs/formats.md)
heartbeat() {  # DIR STATE STEP TOTAL TIME WORLD
    printf '{"run_id": "t", "state": "%s", "step": %s, "total_steps": %s, "epoch": 0, "tokens": 0, "time": %s, "elapsed_s": 1, "step_time_s": 0.5, "tok_per_s": 1000, "loss": 3.5, "world_size": %s}\n' \
        "$2" "$3" "$4" "$5" "$6" >"$1/heartbeat.json.tmp" && mv "$1/heartbeat.json.tmp" "$1/heartbeat.json"
}
alive() {  # DIR RANK TIME STATE
    local f; f=$(printf '%s/ranks/rank-%05d.alive' "$1" "$2")
    printf '{"rank": %d, "pid": %d, "host": "h", "time": %s, "step": 3, "state": "%s"}\n' "$2" $((100 + $2)) "$3" "$4" >"$f.tmp" && mv "$f.tmp" "$f"
}

# A long real 2-rank run in the background (job=its mpirun), once rank 1 has done a step;
# pid = rank 1's process. Extra train flags as arguments.
start_long_run() {
    awk 'BEGIN{srand(4); for(d=0; d<400; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --steps 100000 --alive-interval 0.5 --log-every 0 "$@" >"$W/train.txt" 2>&1 &
    job=$!
    for _ in $(seq 1 300); do
        grep -q '"step": [1-9]' "$W/run/ranks/rank-00001.alive" 2>/dev/null && break
        sleep 0.1
    done
    pid=$(sed 's/.*"pid": \([0-9]*\).*/\1/' "$W/run/ranks/rank-00001.alive")
}

case "$CASE" in
triage_samples)
    expect 4 "$ZT" triage "$S/node0.smi.csv" "$S/node1.smi.csv"
    has "8 GPUs in 2 files, 60 snapshots (0 partial)"
    grep -E -q "checkpoint +8 snapshots.*at 0%: GPU 0$" "$W/out.txt" || fail "checkpoint stretch with GPU 0"
    grep -E -q "deadlock +15 snapshots.*at 0%: GPU 5$" "$W/out.txt" || fail "deadlock stretch naming GPU 5 (node 1 index 1)"
    has "verdict: DEADLOCK: 1 stretch of >= 2 snapshots; longest 15 s"
    expect 0 "$ZT" triage "$S/node.dmon.log"
    grep -E -q "starvation +8 snapshots" "$W/out.txt" || fail "starvation stretch"
    grep -E -q "communication +8 snapshots" "$W/out.txt" || fail "communication stretch"
    has "verdict: no deadlock"
    expect 4 "$ZT" triage --per-sample "$S"/ranks/rank-0000?.power.csv
    [ "$(grep -c 'deadlock .*4/4 GPUs.*at 0%: 2$' "$W/out.txt")" -eq 10 ] || fail "10 deadlock snapshots naming rank 2"
    expect 0 "$ZT" triage --min-deadlock 11 -q "$S"/ranks/rank-0000?.power.csv
    expect 0 "$ZT" triage "$S/idle.dmon-dt.log"
    grep -E -q "idle +30 snapshots +30 s +100.0%" "$W/out.txt" || fail "idle totals"
    echo "ok [$CASE]"
    ;;
triage_errors)
    printf 'time,gpu,power_w,util_pct,mem_used_mib\n1.0,0,900,100,1\n2.0,0,900,101,1\n' >"$W/rank-00000.power.csv"
    expect 1 "$ZT" triage "$W/rank-00000.power.csv"
    has "rank-00000.power.csv:3: util_pct 101 outside \[0, 100\]"
    printf 'timestamp, index, power.draw [W], utilization.gpu [%%]\n2025/11/29 13:45:01.000, 0, [N/A], 100 %%\n' >"$W/na.csv"
    expect 1 "$ZT" triage "$W/na.csv"
    has "na.csv:2: power.draw is '\[N/A\]', not a number (this GPU does not report it"
    printf '    0   71   34   -   0\n' >"$W/headless.dmon"
    expect 1 "$ZT" triage "$W/headless.dmon"
    has "headless.dmon:1: unknown sample format"
    printf '# gpu pwr sm\n# Idx W %%\n 0 900 100\n 1 900\n' >"$W/short.dmon"
    expect 1 "$ZT" triage "$W/short.dmon"
    has "short.dmon:4: 2 fields, the dmon header has 3"
    expect 1 "$ZT" triage "$S/node.dmon.log" "$S/node0.smi.csv"
    has "node0.smi.csv: its samples have absolute time, but .*node.dmon.log has no time"
    printf '{"format": "zerotrain-bands", "version": 1, "edges_w": {"idle_max": 400, "hang_max": 385, "compute_min": 790}, "util_pct": {"zero_max": 5, "busy_min": 90, "uneven_spread": 20}}\n' >"$W/bands.json"
    expect 1 "$ZT" triage --bands "$W/bands.json" "$S/node.dmon.log"
    has "bands.json: edges_w.hang_max (385) must be above edges_w.idle_max (400)"
    expect 1 "$ZT" triage "$W/missing.csv"
    has "missing.csv"
    expect 2 "$ZT" triage
    expect 2 "$ZT" triage --window 0 "$S/node.dmon.log"
    has "--window"
    expect 2 "$ZT" triage --format nvml "$S/node.dmon.log"
    echo "ok [$CASE]"
    ;;
calibrate)
    expect 0 "$ZT" calibrate --healthy "$S/node.dmon.log" --idle "$S/idle.dmon-dt.log" --gpu "B300 again" -o "$W/b.json"
    has "edges idle <= 165.0 W, hang <= 381.2 W, compute >= 758.7 W"
    grep -q '"gpu":.*"B300 again"' "$W/b.json" || fail "gpu name in the band file"
    expect 4 "$ZT" triage --bands "$W/b.json" "$S/node0.smi.csv" "$S/node1.smi.csv"
    has "bands: B300 again ($W/b.json)"
    grep -E -q "deadlock +15 snapshots" "$W/out.txt" || fail "calibrated bands still find the deadlock"
    expect 1 "$ZT" calibrate --healthy "$S/idle.dmon-dt.log" --idle "$S/node.dmon.log" -o "$W/c.json"
    has "are --healthy and --idle swapped?"
    [ ! -e "$W/c.json" ] || fail "a failed calibration wrote a band file"
    expect 2 "$ZT" calibrate --healthy "$S/node.dmon.log" -o "$W/c.json"
    has "no --idle files"
    echo "ok [$CASE]"
    ;;
watch_once)
    t=$(now)
    mkdir -p "$W/empty"
    expect 6 "$ZT" watch --once "$W/empty"
    has "STARTING: waiting for"
    mkdir -p "$W/run/ranks"
    heartbeat "$W/run" running 3 10 "$t" 2
    alive "$W/run" 0 "$t" running; alive "$W/run" 1 "$t" running
    expect 6 "$ZT" watch --once "$W/run"
    has "RUNNING step 3/10 (30.0%) | 1.0k tok/s | ETA 4 s | loss 3.5000"
    has "ticks 2/2 fresh"
    alive "$W/run" 1 "$(ago "$t" 40)" running
    expect 3 "$ZT" watch --once --on-crash 'echo "hook $ZT_WATCH_STATE $ZT_RUN_DIR $ZT_WATCH_JSON"' "$W/run"
    has "CRASHED: liveness ticks stopped: rank 1 (1 of 2)"
    has "diagnosis: ranks 0-1: no flight recorder"
    has "hook CRASHED $W/run $W/run/watch.json"
    grep -q '"state":.*"CRASHED"' "$W/run/watch.json" || fail "watch.json"
    alive "$W/run" 1 "$t" running
    heartbeat "$W/run" running 3 10 "$(ago "$t" 100)" 2
    expect 4 "$ZT" watch --once --min-stall 20 --on-hang 'echo "hook $ZT_WATCH_STATE"; exit 7' "$W/run"
    has "HUNG: step 3 has not advanced for 10[0-9] s (bound 20 s = max(--min-stall 20, 10 x median step time 0.5 s))"
    has "hook HUNG"
    has "hook exited with 7"
    heartbeat "$W/run" failed 3 0 "$t" 2
    expect 5 "$ZT" watch --once "$W/run"
    has "FAILED: heartbeat.json: the trainer reported failure at step 3"
    printf '{"run_id": "t", "step": 10, "time": %s, "final": "%s/final"}\n' "$t" "$W/run" >"$W/run/complete.json"
    expect 0 "$ZT" watch --once "$W/run"
    has "COMPLETE: complete.json: step 10, final $W/run/final"
    expect 1 "$ZT" watch --once "$W/nonexistent"
    has "nonexistent: cannot read the run directory: No such file or directory"
    # a file in the run directory instead of the directory: said so (it said "Permission denied")
    expect 1 "$ZT" watch --once "$W/run/complete.json"
    has "complete.json: cannot read the run directory: is not a directory (give the run directory, not a file in it)"
    expect 2 "$ZT" watch
    expect 2 "$ZT" watch --interval x "$W/run"
    echo "ok [$CASE]"
    ;;
watch_loop)
    # A live fake job: ticks every 0.2 s; steps advance for 1 s, then stop (HUNG after
    # the 1 s bound, the hook fires); a second run completes while watched.
    mkdir -p "$W/run/ranks"
    ( for i in $(seq 1 60); do t=$(now); alive "$W/run" 0 "$t" running; alive "$W/run" 1 "$t" running
          [ "$i" -le 5 ] && heartbeat "$W/run" running "$i" 100 "$t" 2; sleep 0.2; done ) &
    writer=$!
    sleep 0.3
    expect 4 timeout 30 "$ZT" watch --interval 0.2 --min-stall 1 --stall-factor 1 --on-hang "touch $W/hung" "$W/run"
    kill "$writer" 2>/dev/null; wait "$writer" 2>/dev/null
    has "RUNNING step"
    has "HUNG: step 5 has not advanced"
    [ -e "$W/hung" ] || fail "--on-hang did not run"
    mkdir -p "$W/run2/ranks"
    ( for i in $(seq 1 8); do t=$(now); alive "$W/run2" 0 "$t" running; heartbeat "$W/run2" running "$i" 8 "$t" 1; sleep 0.2; done
      printf '{"run_id": "t", "step": 8, "time": %s, "final": ""}\n' "$(now)" >"$W/run2/complete.json" ) &
    writer=$!
    expect 0 timeout 30 "$ZT" watch --interval 0.2 "$W/run2"
    wait "$writer"
    has "COMPLETE: complete.json: step 8"
    echo "ok [$CASE]"
    ;;
train_complete)
    awk 'BEGIN{srand(3); for(d=0; d<16; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --steps 4 --lr 1e-3 --log-every 0 --alive-interval 0.2 >"$W/train.txt" 2>&1 || { cat "$W/train.txt"; fail "train"; }
    expect 0 "$ZT" watch --once "$W/run"
    has "COMPLETE: complete.json: step 4"
    grep -q '"state": "done"' "$W/run/ranks/rank-00001.alive" || fail "rank 1's last tick should say done"
    echo "ok [$CASE]"
    ;;
train_hang)
    # The field deadlock: 31 vs 30 blocks per rank and --no-evenfix; the collective
    # deadline is far away (120 s), so the watcher must catch the hang first.
    awk 'BEGIN{srand(11); for(d=0; d<61; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 --per-rank 2 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --epochs 1 --lr 1e-3 --no-evenfix --no-preflight --collective-timeout 120 --first-collective-timeout 120 \
        --alive-interval 0.5 --log-every 10 >"$W/train.txt" 2>&1 &
    job=$!
    expect 4 timeout 100 "$ZT" watch --interval 0.5 --min-stall 6 --stall-factor 5 --startup-grace 60 \
        --on-hang "kill $job" "$W/run"
    wait "$job"; jrc=$?
    cat "$W/train.txt" | tail -5
    [ "$jrc" -ne 0 ] || fail "the hung job should have been killed by the hook"
    has "HUNG: step 30 has not advanced"
    has 'barrier("epoch-end save")'
    has "collective mismatch"
    grep -q '"state":.*"HUNG"' "$W/run/watch.json" || fail "watch.json"
    echo "ok [$CASE]"
    ;;
train_kill9)
    # kill -9 of one rank of a real run: mpirun tears the job down, the liveness ticks
    # stop without complete.json, and the watcher says CRASHED.
    start_long_run
    kill -9 "$pid" || fail "could not kill rank 1 (pid $pid)"
    wait "$job"
    expect 3 timeout 100 "$ZT" watch --interval 0.5 --alive-interval 0.5 --startup-grace 60 "$W/run"
    has "CRASHED"
    has "liveness ticks stopped"
    # the killed rank is named as gone, not read as a collective mismatch (mpirun then
    # tears rank 0 down too, so either may be the first whose tick stopped)
    has "is gone (process"
    # (the verdict lines; the flight summary below them may still say the ranks are in
    # different collectives, which is true)
    ! grep -E "^\[|^  diagnosis:" "$W/out.txt" | grep -q "mismatch\|transport is stuck" ||
        fail "a killed rank diagnosed as a mismatch or transport"
    [ ! -e "$W/run/complete.json" ] || fail "a killed run must not have complete.json"
    echo "ok [$CASE]"
    ;;
train_sigstop)
    # SIGSTOP of one rank of a real run: its tick stops, rank 0 waits in a collective;
    # the watcher says HUNG and names rank 1 as stopped (not "the transport is stuck").
    start_long_run --collective-timeout 120
    kill -STOP "$pid" || fail "could not stop rank 1 (pid $pid)"
    expect 4 timeout 100 "$ZT" watch --interval 0.5 --alive-interval 0.5 --startup-grace 60 "$W/run"
    kill -CONT "$pid"; kill -9 "$pid" 2>/dev/null; wait "$job"
    has "HUNG: rank 1 stopped answering: rank 1 is stopped (process $pid on this host is in state T: SIGSTOP"
    has "diagnosis: .* rank 1 is stopped"
    ! grep -E "^\[|^  diagnosis:" "$W/out.txt" | grep -q "mismatch\|transport is stuck" ||
        fail "a stopped rank diagnosed as a mismatch or transport"
    echo "ok [$CASE]"
    ;;
launch_2node)
    # The two-node launcher: its 2 x 8 command lines (dry run), then for real on this
    # host as 1 node x 2 ranks on the CPU: preflight, train, watcher verdict COMPLETE.
    echo "node01 slots=8" >"$W/hosts"; echo "node02 slots=8" >>"$W/hosts"
    expect 0 env ZT_BIN="$ZT" bash "$SRC/launch/zerotrain-2node.sh" --dry-run "$W/hosts" --init "$GOLD/tiny_untied_gqa" \
        --data=/shared/data --run-dir /shared/runs/r1 --micro-batch 1 --lr 1e-4
    has "+ mpirun -np 16 --hostfile $W/hosts --map-by ppr:8:node --bind-to numa -x NCCL_SOCKET_IFNAME -x NCCL_IB_HCA -x NCCL_DEBUG"
    has "$ZT preflight --data /shared/data --run-dir /shared/runs/r1 --micro-batch 1 --model $GOLD/tiny_untied_gqa"
    has "$ZT train --init $GOLD/tiny_untied_gqa --data=/shared/data --run-dir /shared/runs/r1 --micro-batch 1 --lr 1e-4 --no-preflight"
    has "$ZT watch /shared/runs/r1 --interval 30 --on-hang"
    expect 2 env ZT_BIN="$ZT" bash "$SRC/launch/zerotrain-2node.sh" "$W/hosts" --data /x --steps 1
    has "need --run-dir"
    awk 'BEGIN{srand(3); for(d=0; d<16; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    echo "localhost slots=2" >"$W/local"
    expect 0 env ZT_BIN="$ZT" ZT_NODES=1 ZT_GPUS_PER_NODE=2 NCCL_SOCKET_IFNAME=lo ZT_WATCH_ARGS="--interval 0.5" \
        ZT_MPIRUN_ARGS="--oversubscribe --allow-run-as-root --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none" \
        timeout 120 bash "$SRC/launch/zerotrain-2node.sh" "$W/local" --init "$GOLD/tiny_untied_gqa" --data "$W/data" \
        --run-dir "$W/run" --steps 4 --threads 1 --log-every 0
    has "preflight: all checks passed"
    has "zerotrain-2node: watcher: .* COMPLETE: complete.json: step 4"
    has "zerotrain-2node: mpirun exited with 0"
    # a failing gate stops the launch: no such interface
    expect 1 env ZT_BIN="$ZT" ZT_NODES=1 ZT_GPUS_PER_NODE=2 NCCL_SOCKET_IFNAME=zt-nonexistent0 \
        ZT_MPIRUN_ARGS="--oversubscribe --allow-run-as-root --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none" \
        timeout 120 bash "$SRC/launch/zerotrain-2node.sh" "$W/local" --init "$GOLD/tiny_untied_gqa" --data "$W/data" \
        --run-dir "$W/run2" --steps 4
    has "preflight failed (exit 1): not launching"
    [ ! -e "$W/run2/run.json" ] || fail "training started after a failed gate"
    echo "ok [$CASE]"
    ;;
*)
    fail "unknown case"
    ;;
esac
