#!/usr/bin/env bash
# The third fault battery (issue 35), data and resume cases, one case per invocation: a data
# file rewritten in place under a paused job (same size, times put back with touch -r), a
# --resume auto whose newest ckpt.h5 is truncated, empty or zeroed, and ranks whose views of
# the run directory name different checkpoints.
#   faults3_data.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
. "$SRC/tests/support/fault_case.sh"  # W, GOLD, MPIRUN, fail, wait_step, hb
# rank_pid RUN R: the pid rank R wrote into its liveness file
rank_pid() { sed -nE 's/.*"pid": ([0-9]+).*/\1/p' "$1/ranks/rank-0000$2.alive"; }
# stopped PID: the process is stopped (state T)
stopped() { [ "$(ps -o state= -p "$1" 2>/dev/null | tr -d ' ')" = T ]; }

# 960 single-block documents of 16 ids (vocab 96): 960 blocks, 480 steps per epoch at W = 2, B = 1
# (a job paused at step ~300 is inside an epoch, not at its end's checkpoint).
awk 'BEGIN{srand(21); for(d=0; d<960; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
COMMON=(--init "$GOLD/tiny_untied_gqa" --lr 1e-3 --warmup 2 --log-every 0 --threads 1 --no-save-final)

case "$CASE" in
inplace_oob_rank0 | inplace_oob_rank1 | inplace_inrange_rank0 | inplace_inrange_rank1 | inplace_oob_shared | \
    inplace_inrange_shared)
    # The block file is rewritten in place while both ranks are stopped: same size, same inode,
    # its access and modification times put back (touch -r; rsync --inplace -t does the same).
    # Out-of-range ids used to reach cpu_embedding_fwd (SIGSEGV, exit 139, no message, heartbeat
    # "running", no checkpoint); in-range ones trained on to "complete". Either way now: a named
    # error on every rank, exit 1, the heartbeat failed, a checkpoint of the last good step that
    # verifies; the run continues with --resume once the file is restored.
    kind=${CASE#inplace_}
    kind=${kind%%_*}
    where=${CASE##*_}
    if [ "$where" = shared ]; then
        "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/d" "$W/docs.txt" >/dev/null || fail "pack"
        "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/other" <(tac "$W/docs.txt") >/dev/null ||
            fail "pack other"
        f="$W/d/data.u32" other="$W/other/data.u32"
    else
        r=${where#rank}
        "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 --per-rank 2 -o "$W/d" "$W/docs.txt" >/dev/null ||
            fail "pack"
        "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 --per-rank 2 -o "$W/other" <(tac "$W/docs.txt") \
            >/dev/null || fail "pack other"
        f="$W/d/rank-0000$r.u32" other="$W/other/rank-0000$r.u32"
    fi
    size=$(stat -c %s "$f")
    if [ "$kind" = oob ]; then  # every id 1000000007 (vocab 96): an embedding row gigabytes past the table
        perl -e 'print pack("V*", (1000000007) x ($ARGV[0] / 4))' "$size" >"$W/new.u32"
    else  # valid ids, other blocks
        cp "$other" "$W/new.u32"
        cmp -s "$f" "$W/new.u32" && fail "the new bytes must differ"
    fi
    [ "$(stat -c %s "$W/new.u32")" = "$size" ] || fail "the new bytes must have the file's size"
    cp -p "$f" "$W/orig.u32"
    # 20000 steps: a job that missed the change would end "complete" (the case fails) in about a minute
    timeout -k 10 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --data "$W/d" --run-dir "$W/run" --steps 20000 \
        --save-every 100000 --keep-last 2 >"$W/train.out" 2>&1 & P=$!
    wait_step "$W/run" 300
    p0=$(rank_pid "$W/run" 0) p1=$(rank_pid "$W/run" 1)
    [ -n "$p0" ] && [ -n "$p1" ] || fail "no rank pids in $W/run/ranks"
    kill -STOP "$p0" "$p1" || fail "SIGSTOP"
    for _ in $(seq 100); do stopped "$p0" && stopped "$p1" && break; sleep 0.05; done
    stopped "$p0" && stopped "$p1" || { kill -CONT "$p0" "$p1"; fail "the ranks did not stop"; }
    ino=$(stat -c %i "$f")
    touch -r "$f" "$W/times"                                   # the file's times, kept
    dd if="$W/new.u32" of="$f" conv=notrunc status=none || fail "dd"  # in place: same inode, same size
    touch -r "$W/times" "$f"                                   # and put back
    [ "$(stat -c %i.%s.%Y.%y "$f")" = "$ino.$size.$(stat -c %Y.%y "$W/times")" ] || fail "not an in-place rewrite"
    cmp -s "$f" "$W/new.u32" || fail "the rewrite did not land"
    kill -CONT "$p0" "$p1"
    wait $P; rc=$?
    tail -4 "$W/train.out"
    [ $rc -eq 1 ] || fail "exit $rc, expected 1 (a named error)"
    name=$(basename "$f")
    grep -q "$name: the file changed while training (its status change time moved from .* while its size and modification time stayed" \
        "$W/train.out" || fail "the error does not name the file and what changed"
    grep -Eq "$name: .*; block [0-9]+ cannot be read as the data packed into it" "$W/train.out" || fail "no block named"
    # every rank ends with it (the shared file: whichever rank read it first is named)
    [ "$(grep -c "zerotrain train: error: .*$name: the file changed while training" "$W/train.out")" -ge 2 ] ||
        fail "not every rank names the change"
    ! grep -Eq "Segmentation|signal 11|exit code 139" "$W/train.out" || fail "a crash"
    [ "$(hb "$W/run" state)" = failed ] || fail "heartbeat: $(cat "$W/run/heartbeat.json")"
    grep -q "\"error\": \".*$name: the file changed while training" "$W/run/heartbeat.json" ||
        fail "the heartbeat lacks the error"
    s=$(hb "$W/run" step)
    # the last good step is checkpointed now, or was at that very step (an epoch end: 480 steps)
    grep -Eq "the checkpoint of step $s, the last good step, is committed|nothing trained since the last checkpoint \(step $s\)" \
        "$W/train.out" || fail "no last-good-step checkpoint"
    [ "$(cat "$W/run/checkpoints/latest")" = "$(printf 'step-%08d' "$s")" ] || fail "latest is not step $s"
    "$ZT" inspect "$W/run" >"$W/inspect.txt" 2>&1 || { cat "$W/inspect.txt"; fail "the last good checkpoint does not verify"; }
    # the metrics end at that step: the refused step trained nothing
    last=$(grep -o '"step":[0-9]*' "$W/run/metrics.jsonl" | tail -1 | cut -d: -f2)
    [ "$last" = "$s" ] || fail "metrics.jsonl ends at step $last, the heartbeat at $s"
    if [ "$kind" = inrange ]; then
        # the file restored (in place again): the run continues from that checkpoint
        dd if="$W/orig.u32" of="$f" conv=notrunc status=none
        timeout -k 10 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --data "$W/d" --run-dir "$W/run" \
            --steps 20000 --save-every 100000 --keep-last 2 --resume --debug-signal-at-step $((s + 5)) \
            >"$W/resume.out" 2>&1 || { tail "$W/resume.out"; fail "the resume after restoring the file failed"; }
        grep -q "resume: .*step $s " "$W/resume.out" || { tail "$W/resume.out"; fail "did not resume at step $s"; }
    fi
    echo "ok [$CASE]: named error after step $s, exit 1, heartbeat failed, checkpoint of step $s verifies"
    ;;
auto_truncated | auto_empty | auto_zeroed)
    # --resume auto when the ckpt.h5 latest names is truncated, empty or zeroed: it falls back to
    # the previous checkpoint as for a flipped byte, naming what it skipped and why; with every
    # ckpt.h5 damaged it refuses naming each one (it used to refuse naming only the newest)
    how=${CASE#auto_}
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/d" "$W/docs.txt" >/dev/null || fail "pack"
    RUN=(--data "$W/d" --steps 8 --save-every 2 --keep-last 0)
    timeout -k 10 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" "${RUN[@]}" --run-dir "$W/run" \
        --debug-signal-at-step 6 >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "first run"; }
    [ "$(cat "$W/run/checkpoints/latest")" = step-00000006 ] || fail "latest: $(cat "$W/run/checkpoints/latest")"
    damage() {
        local h=$1/ckpt.h5 n
        n=$(stat -c %s "$h")
        case $how in
        truncated) truncate -s $((n / 2)) "$h" ;;
        empty) : >"$h" ;;
        zeroed) dd if=/dev/zero of="$h" bs="$n" count=1 conv=notrunc status=none ;;
        esac
    }
    cp -a "$W/run" "$W/all"
    damage "$W/run/checkpoints/step-00000006"
    timeout -k 10 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" "${RUN[@]}" --run-dir "$W/run" --resume auto \
        >"$W/b.out" 2>&1 || { cat "$W/b.out"; fail "--resume auto did not fall back past a $how ckpt.h5"; }
    grep -q "warning: --resume auto: .*latest names step-00000006, whose ckpt.h5 does not read.*resuming from step-00000004.*skipped: step-00000006: ckpt.h5: " \
        "$W/b.out" || { cat "$W/b.out"; fail "the skipped checkpoint and why are not named"; }
    grep -q "resume: .*step-00000004: step 4 " "$W/b.out" || { cat "$W/b.out"; fail "did not resume from step 4"; }
    [ -f "$W/run/complete.json" ] || fail "did not complete"
    "$ZT" inspect "$W/run" >/dev/null 2>&1 || fail "the final checkpoint does not verify"
    # every ckpt.h5 damaged: refused, each named with its reason, nothing written
    for s in 2 4 6; do damage "$W/all/checkpoints/step-0000000$s"; done
    before=$(cd "$W/all" && find . -type f ! -name lock ! -name '*.alive' -exec md5sum {} + | sort)
    timeout -k 10 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" "${RUN[@]}" --run-dir "$W/all" --resume auto \
        >"$W/c.out" 2>&1 && { cat "$W/c.out"; fail "must refuse when no checkpoint reads"; }
    grep -q "none can be resumed from" "$W/c.out" || { cat "$W/c.out"; fail "the refusal must say why"; }
    for s in 2 4 6; do
        grep -q "step-0000000$s: ckpt.h5: " "$W/c.out" ||
            { cat "$W/c.out"; fail "the refusal does not name step-0000000$s and why"; }
    done
    after=$(cd "$W/all" && find . -type f ! -name lock ! -name '*.alive' -exec md5sum {} + | sort)
    [ "$before" = "$after" ] || fail "files in the run directory changed"
    echo "ok [$CASE]: fell back from step 6 to step 4; all three damaged: each named"
    ;;
ranks_different_checkpoints)
    # Two ranks whose views of RUN differ (as on nodes with their own or a stale copy): latest
    # names step 4 for rank 0 and step 6 for rank 1, both intact. Refused as ranks that
    # resolved different checkpoints, naming both (it used to call the intact one corrupt, or
    # to load both and hang at the next save), for --resume and for --resume auto, which must not
    # fall back as if one were damaged; nothing written.
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/d" "$W/docs.txt" >/dev/null || fail "pack"
    RUN=(--data "$W/d" --steps 10 --save-every 2 --keep-last 0 --run-dir run --collective-timeout 30
         --first-collective-timeout 30)
    mkdir -p "$W/A"
    (cd "$W/A" && timeout -k 10 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" "${RUN[@]}" \
        --debug-signal-at-step 6 >"$W/a.out" 2>&1) || { cat "$W/a.out"; fail "first run"; }
    cp -a "$W/A" "$W/B"
    echo step-00000004 >"$W/A/run/checkpoints/latest"
    for c in 4 6; do
        "$ZT" inspect "$W/A/run/checkpoints/step-0000000$c" >/dev/null 2>&1 || fail "step $c does not verify"
    done
    for mode in latest auto; do
        snap() { (cd "$W" && find A B -type f ! -name lock ! -name '*.alive' ! -name '*.flight' -exec md5sum {} + | sort); }
        before=$(snap)
        timeout -k 10 120 "${MPIRUN[@]}" -n 1 --wdir "$W/A" "$ZT" train "${COMMON[@]}" "${RUN[@]}" --resume $mode : \
            -n 1 --wdir "$W/B" "$ZT" train "${COMMON[@]}" "${RUN[@]}" --resume $mode >"$W/$mode.out" 2>&1
        rc=$?
        [ $rc -eq 1 ] || { tail -20 "$W/$mode.out"; fail "--resume $mode: exit $rc, expected 1"; }
        grep -q "the ranks resolved different checkpoints: rank 0: run/checkpoints/step-00000004 (step 4) (ckpt.h5: [0-9]* bytes, modified [^)]*); rank 1: run/checkpoints/step-00000006 (step 6)" \
            "$W/$mode.out" || { grep error "$W/$mode.out"; fail "--resume $mode: the ranks and their checkpoints are not named"; }
        ! grep -Eq "corrupt|crc32c mismatch|does not load|trying the next" "$W/$mode.out" ||
            { grep -E "error|warning" "$W/$mode.out"; fail "--resume $mode: treated as a damaged checkpoint"; }
        [ "$(grep -c 'zerotrain train: error: .*the ranks resolved different checkpoints' "$W/$mode.out")" -eq 2 ] ||
            fail "--resume $mode: not both ranks report it"
        ls -d "$W"/A/run/checkpoints/*.partial "$W"/B/run/checkpoints/*.partial 2>/dev/null && fail "a save started"
        [ "$before" = "$(snap)" ] || fail "--resume $mode: files in the run directories changed"
    done
    echo "ok [$CASE]: $(grep -m1 -o 'the ranks resolved different checkpoints.\{0,160\}' "$W/latest.out")"
    ;;
*)
    fail "unknown case"
    ;;
esac
