#!/usr/bin/env bash
# The third fault battery (issue 35), the trainer's settings: ranks started with settings that
# differ (mpirun's MPMD form, a stale run file on one node) are refused at start on every rank
# naming each setting, its values and the ranks; a finished run extended with
# --allow-new-schedule; --shard-group 0 and the sharding the memory line names.
#   faults3_lead.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
case "$WORK" in /*) ;; *) WORK="$PWD/$WORK" ;; esac
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
. "$SRC/tests/support/tiny_ids_data.sh"  # GOLD, MPIRUN, fail, $W/data (48 blocks of 16, vocab 96)
COMMON=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --log-every 0 --threads 1 --no-save-final)

# mpmd OUT ARGS_A -- ARGS_B: 2 ranks with ARGS_A, then 2 with ARGS_B (ranks 0-1 and 2-3), in
# time: a disagreement that is not caught hangs until a deadline, which the timeout ends
mpmd() {
    local out=$1 a=() b=()
    shift
    while [ "$1" != "--" ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    timeout -k 5 120 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" "${a[@]}" : -n 2 "$ZT" train "${COMMON[@]}" "${b[@]}" \
        >"$out" 2>&1
}
# refused OUT PATTERN: the job failed at start, all 4 ranks say PATTERN, nothing was written
refused() {
    local rc=$1 out=$2 pat=$3
    [ "$rc" -ne 0 ] || { cat "$out"; fail "ranks with different settings trained (exit 0)"; }
    [ "$rc" -ne 124 ] || { cat "$out"; fail "ranks with different settings hung until the timeout"; }
    # every rank refuses; mpirun ends the others once the first has exited, so not every
    # rank may get to print: at least one does, and none says anything else
    local n
    n=$(grep -cE "zerotrain train: error: the ranks' settings differ .*$pat" "$out")
    [ "$n" -ge 1 ] || { cat "$out"; fail "no rank names /$pat/"; }
    [ "$n" -eq "$(grep -c "zerotrain train: error:" "$out")" ] || { cat "$out"; fail "a rank reports another error"; }
    [ ! -e "$W/run" ] || { ls -R "$W/run"; fail "the run directory was created or written"; }
}

case "$CASE" in
agree_lr)
    # a run file that differs between the nodes (a stale copy on one of them): lr 1e-3 vs 2e-3
    printf 'lr: 1e-3\nwarmup: 2\n' >"$W/a.yaml"
    printf 'lr: 2e-3\nwarmup: 2\n' >"$W/b.yaml"
    mpmd "$W/out.txt" --run-dir "$W/run" --steps 4 --config "$W/a.yaml" -- --run-dir "$W/run" --steps 4 --config "$W/b.yaml"
    refused $? "$W/out.txt" "lr: 0\.001 on ranks 0-1, 0\.002 on ranks 2-3; config_file_crc32c: [0-9a-f]{8} on ranks 0-1, [0-9a-f]{8} on ranks 2-3"
    # the same file contents under two names agree; a comment alone is a difference of the file
    cp "$W/a.yaml" "$W/c.yaml"
    printf 'lr: 1e-3\nwarmup: 2  # stale\n' >"$W/d.yaml"
    mpmd "$W/out2.txt" --run-dir "$W/run" --steps 4 --config "$W/a.yaml" -- --run-dir "$W/run" --steps 4 --config "$W/d.yaml"
    refused $? "$W/out2.txt" "\(1 setting\): config_file_crc32c: [0-9a-f]{8} on ranks 0-1, [0-9a-f]{8} on ranks 2-3"
    mpmd "$W/out3.txt" --run-dir "$W/run" --steps 4 --config "$W/a.yaml" -- --run-dir "$W/run" --steps 4 --config "$W/c.yaml" ||
        { cat "$W/out3.txt"; fail "the same run file under another path must train"; }
    echo "ok [$CASE]: $(grep -m1 -o "the ranks' settings differ.*ranks 2-3\. " "$W/out.txt")"
    ;;
agree_seed)
    # a different --seed per rank made two ranks train the same block
    timeout -k 5 120 "${MPIRUN[@]}" -n 1 "$ZT" train "${COMMON[@]}" --run-dir "$W/run" --steps 4 --seed 1 : \
        -n 1 "$ZT" train "${COMMON[@]}" --run-dir "$W/run" --steps 4 --seed 2 >"$W/out.txt" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$W/out.txt"; fail "exit $rc"; }
    [ "$(grep -c "settings differ (1 setting): seed: 1 on rank 0, 2 on rank 1\. " "$W/out.txt")" -ge 1 ] ||
        { cat "$W/out.txt"; fail "the refusal must name the seeds and the ranks"; }
    [ ! -e "$W/run" ] || fail "the run directory was created"
    echo "ok [$CASE]"
    ;;
agree_steps)
    # a different --steps deadlocked until the collective deadline
    mpmd "$W/out.txt" --run-dir "$W/run" --steps 4 --collective-timeout 30 -- --run-dir "$W/run" --steps 5 \
        --collective-timeout 30
    refused $? "$W/out.txt" "\(1 setting\): steps: 4 on ranks 0-1, 5 on ranks 2-3"
    echo "ok [$CASE]"
    ;;
agree_shard_group)
    # a different --shard-group hung in allreduce("building the model") for the start-up deadline
    mpmd "$W/out.txt" --run-dir "$W/run" --steps 4 --first-collective-timeout 60 -- --run-dir "$W/run" --steps 4 \
        --shard-group 2 --first-collective-timeout 60
    refused $? "$W/out.txt" "\(1 setting\): shard_group: null on ranks 0-1, \"2\" on ranks 2-3"
    echo "ok [$CASE]"
    ;;
agree_threads)
    # the CPU threads per rank are a node's own (they change no result): they may differ
    timeout -k 5 120 "${MPIRUN[@]}" -n 1 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --log-every 0 \
        --no-save-final --run-dir "$W/run" --steps 3 --threads 1 : -n 1 "$ZT" train --init "$GOLD/tiny_untied_gqa" \
        --data "$W/data" --log-every 0 --no-save-final --run-dir "$W/run" --steps 3 --threads 2 >"$W/out.txt" 2>&1 ||
        { cat "$W/out.txt"; fail "ranks with different --threads must train"; }
    [ -f "$W/run/complete.json" ] || fail "no complete.json"
    echo "ok [$CASE]"
    ;;
agree_preflight)
    # `zerotrain preflight` checks one job: its ranks' flags must agree too
    timeout -k 5 120 "${MPIRUN[@]}" -n 1 "$ZT" preflight --data "$W/data" --keep-last 3 : -n 1 "$ZT" preflight \
        --data "$W/data" --keep-last 2 >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "preflight passed"; }
    grep -q "zerotrain preflight: error: the ranks' settings differ (1 setting): keep_last: 3 on rank 0, 2 on rank 1" \
        "$W/out.txt" || { cat "$W/out.txt"; fail "preflight must name the setting"; }
    echo "ok [$CASE]"
    ;;
extend_run)
    # a finished run of 6 steps continued to 10: refused without the flag (naming it), then
    # extended; the new steps take the rate a 10-step run has at the same step numbers
    A=("$ZT" train "${COMMON[@]}" --run-dir "$W/run" --lr 1e-3 --warmup 2)
    "${A[@]}" --steps 6 >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "the first 6 steps"; }
    "${A[@]}" --steps 10 --resume auto >"$W/b.out" 2>&1 && { cat "$W/b.out"; fail "a longer run resumed without the flag"; }
    grep -q "checkpoint has total_steps 6, the run has 10 (to continue this run for another number of steps or with another learning-rate schedule, pass --allow-new-schedule" "$W/b.out" ||
        { cat "$W/b.out"; fail "the refusal must name --allow-new-schedule"; }
    "${A[@]}" --steps 10 --resume auto --allow-new-schedule >"$W/c.out" 2>&1 || { cat "$W/c.out"; fail "extending"; }
    grep -q 'resume: --allow-new-schedule: the checkpoint.s schedule {"total_steps":6} becomes 10 steps in all; steps 1-6 keep their numbers and step 7 continues' "$W/c.out" ||
        { cat "$W/c.out"; fail "the resume must say how the steps taken map onto the new schedule"; }
    [ -f "$W/run/checkpoints/step-00000010/meta.json" ] || fail "no checkpoint of step 10"
    tr -d ' \t\n' <"$W/run/run.json" >"$W/run.flat"
    grep -q '"schedule_changed_at_step":6' "$W/run.flat" || fail "run.json lacks schedule_changed_at_step 6"
    grep -q '"schedule_before":{"total_steps":6}' "$W/run.flat" || fail "run.json lacks the checkpoint's total_steps"
    # the same rates at steps 7-10 as a run started with 10 steps
    "$ZT" train "${COMMON[@]}" --run-dir "$W/ref" --lr 1e-3 --warmup 2 --steps 10 >"$W/ref.out" 2>&1 || fail "reference run"
    lr_of() { grep -o "\"step\":$2,[^}]*\"lr\":[^,]*" "$1/metrics.jsonl" | tail -1 | sed 's/.*"lr"://'; }
    for s in 7 8 9 10; do
        a=$(lr_of "$W/run" $s) b=$(lr_of "$W/ref" $s)
        [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $s: lr $a, a 10-step run has $b"
    done
    # and the extended run continues further without the flag now (its checkpoints carry 10)
    "${A[@]}" --steps 10 --resume auto >"$W/d.out" 2>&1 || { cat "$W/d.out"; fail "resume of the extended run"; }
    grep -q "nothing to train (to train on, give a larger --steps with --allow-new-schedule)" "$W/d.out" ||
        { cat "$W/d.out"; fail "a finished run must say how to train on"; }
    echo "ok [$CASE]: steps 7-10 at the rates of a 10-step run ($(lr_of "$W/run" 7) at step 7)"
    ;;
shard_group_zero)
    # the divisor rule's message offers 0 for full shard: 0 is accepted and is full shard;
    # the memory line names the shard group's share (1/G), not 1/W
    timeout -k 5 120 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --run-dir "$W/run0" --steps 2 --shard-group 0 \
        >"$W/z.out" 2>&1 || { cat "$W/z.out"; fail "--shard-group 0"; }
    grep -q "optimizer .* (sharded 1/2)" "$W/z.out" || { cat "$W/z.out"; fail "--shard-group 0 at W=2 is not full shard"; }
    timeout -k 5 120 "${MPIRUN[@]}" -n 4 "$ZT" train "${COMMON[@]}" --run-dir "$W/run2" --steps 2 --shard-group 2 \
        >"$W/g.out" 2>&1 || { cat "$W/g.out"; fail "--shard-group 2 at W=4"; }
    grep -q "optimizer .* (sharded 1/2)" "$W/g.out" || { cat "$W/g.out"; fail "the memory line must say 1/G = 1/2"; }
    "$ZT" train "${COMMON[@]}" --run-dir "$W/run3" --steps 2 --shard-group 3 >"$W/b.out" 2>&1 && fail "G = 3 at W = 1"
    grep -q "(or 0 / the world: full shard)" "$W/b.out" || { cat "$W/b.out"; fail "the refusal must offer 0"; }
    echo "ok [$CASE]"
    ;;
*)
    fail "unknown case"
    ;;
esac
