#!/usr/bin/env bash
# The second fault battery (issue 22), one case per invocation: what a demanding user does
# to a run directory and its data while jobs run, and what must never follow from it (a
# destroyed input, two jobs mixing one run directory, a silent SIGBUS, a lost checkpoint,
# a first error replaced by a later one, a corrupt newest checkpoint blocking a resume).
#   faults_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
. "$SRC/tests/support/fault_case.sh"  # W, GOLD, MPIRUN, fail, expect_error, wait_step, hb

# 48 single-block documents of 16 ids (vocab 96): 48 blocks, 48 steps per epoch at W=1, B=1.
awk 'BEGIN{srand(21); for(d=0; d<48; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
COMMON=(--init "$GOLD/tiny_untied_gqa" --lr 1e-3 --warmup 2 --log-every 0 --threads 1 --no-save-final)

case "$CASE" in
pack_self_input)
    # the input inside the output directory under the output's name: refused, untouched
    mkdir -p "$W/d"
    cp "$W/data/data.u32" "$W/d/data.u32"
    cp "$W/d/data.u32" "$W/orig.u32"
    expect_error "d/data.u32: this input is .*d/data.u32, a file the pack writes \(the same path\)" \
        "would destroy the input" -- "$ZT" pack --input u32 --vocab-size 96 --seq-len 16 "$W/d/data.u32" -o "$W/d"
    cmp -s "$W/d/data.u32" "$W/orig.u32" || fail "pack --input u32 changed its input"
    [ ! -e "$W/d/dataset.json" ] && [ ! -e "$W/d/data.u32.partial" ] || fail "pack wrote beside the refused input"
    # the same with --input chat (a JSONL of conversations named like the block file)
    mkdir -p "$W/c"
    head -3 "$SRC/examples/sft/conversations.jsonl" >"$W/c/data.u32"
    cp "$W/c/data.u32" "$W/orig.jsonl"
    expect_error "a file the pack writes" -- "$ZT" pack --input chat --seq-len 512 "$W/c/data.u32" -o "$W/c"
    cmp -s "$W/c/data.u32" "$W/orig.jsonl" || fail "pack --input chat changed its input"
    # a hard link and a symlink to an output name, per-rank names included
    mkdir -p "$W/h" "$W/s"
    ln "$W/orig.u32" "$W/h/data.u32"
    expect_error "orig.u32: this input is .*h/data.u32.*through a link" -- \
        "$ZT" pack --input u32 --vocab-size 96 --seq-len 16 "$W/orig.u32" -o "$W/h"
    ln -s ../orig.u32 "$W/s/rank-00001.u32"
    expect_error "s/rank-00001.u32.*through a link" -- \
        "$ZT" pack --input u32 --vocab-size 96 --seq-len 16 --per-rank 2 "$W/orig.u32" -o "$W/s"
    cmp -s "$W/d/data.u32" "$W/orig.u32" || fail "a linked input changed"
    echo "ok [$CASE]: inputs that are outputs refused (same path, hard link, symlink; u32 and chat), inputs intact"
    ;;
pack_partial_names)
    # while a pack runs, nothing under the final names: a reader (or a crash) never sees a
    # half-written dataset that looks complete
    mkfifo "$W/in.fifo"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/p" "$W/in.fifo" >"$W/pack.txt" 2>&1 &
    P=$!
    exec 3>"$W/in.fifo"
    head -24 "$W/docs.txt" >&3
    for _ in $(seq 50); do [ -e "$W/p/data.u32.partial" ] && break; sleep 0.1; done
    [ -e "$W/p/data.u32.partial" ] || fail "no data.u32.partial while packing"
    [ ! -e "$W/p/data.u32" ] && [ ! -e "$W/p/dataset.json" ] || fail "final names exist before the pack ended"
    tail -24 "$W/docs.txt" >&3
    exec 3>&-
    wait $P || { cat "$W/pack.txt"; fail "pack failed"; }
    [ -e "$W/p/data.u32" ] && [ -e "$W/p/dataset.json" ] && [ ! -e "$W/p/data.u32.partial" ] || fail "final names"
    cmp -s "$W/p/data.u32" "$W/data/data.u32" || fail "the blocks differ from a pack of the same input"
    echo "ok [$CASE]"
    ;;
lock_ab | lock_ba)
    # two jobs started together on one run directory (different seeds), in both orders: one
    # trains, the other is refused naming the holder; nothing of the loser is in the run.
    # 8000 steps (~8 s quiet): the winner must still hold the run when the loser gets to its
    # lock, which under load can take mpirun some seconds (1500 steps, ~1.5 s, lost that race)
    A=(-n 2 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 8000 --save-every 2000 --seed 1)
    B=("$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 8000 --save-every 2000 --seed 2)
    if [ "$CASE" = lock_ab ]; then
        timeout 300 "${MPIRUN[@]}" "${A[@]}" >"$W/a.out" 2>&1 & PA=$!
        timeout 300 "${B[@]}" >"$W/b.out" 2>&1 & PB=$!
    else
        timeout 300 "${B[@]}" >"$W/b.out" 2>&1 & PB=$!
        timeout 300 "${MPIRUN[@]}" "${A[@]}" >"$W/a.out" 2>&1 & PA=$!
    fi
    wait $PA; ra=$?
    wait $PB; rb=$?
    echo "job A (2 ranks, seed 1) exit $ra, job B (1 rank, seed 2) exit $rb"
    if [ $ra -eq 0 ]; then win=a lose=b seed=1; else win=b lose=a seed=2; fi
    [ $((ra == 0)) -ne $((rb == 0)) ] || { cat "$W/a.out" "$W/b.out"; fail "exactly one job must run (exits $ra, $rb)"; }
    grep -Eq "is in use by another job \(host [^,]+, pid [0-9]+, run id [0-9TZ]+-[0-9a-f]+, since [0-9T:Z-]+" "$W/$lose.out" ||
        { cat "$W/$lose.out"; fail "the refused job does not name the holder"; }
    id=$(sed -nE 's/.*"run_id":[[:space:]]*"([^"]+)".*/\1/p' "$W/run/run.json")
    [ -n "$id" ] && [ "$(hb "$W/run" run_id)" = "$id" ] || fail "run.json and heartbeat name different runs"
    grep -Eq "\"seed\":[[:space:]]*$seed," "$W/run/run.json" || fail "run.json is not the winner's (seed $seed)"
    for m in "$W"/run/checkpoints/step-*/meta.json; do
        grep -Eq "\"run_id\":[[:space:]]*\"$id\"" "$m" || fail "$m carries another run id"
    done
    [ "$(grep -c '"loss"' "$W/run/metrics.jsonl")" -eq 8000 ] || fail "metrics.jsonl: $(grep -c '"loss"' "$W/run/metrics.jsonl") step lines, expected 8000"
    [ "$(grep -o '"step":[0-9]*' "$W/run/metrics.jsonl" | sort | uniq -d | wc -l)" -eq 0 ] || fail "a step logged twice"
    echo "ok [$CASE]: job $win ran, job $lose refused naming the holder; one run id everywhere"
    ;;
lock_joiner)
    # a --resume auto joiner while a job trains is refused and removes nothing; the job ends well
    timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 3000 \
        --save-every 100 --keep-last 0 >"$W/a.out" 2>&1 & PA=$!
    wait_step "$W/run" 150
    for _ in 1 2 3; do
        expect_error "is in use by another job .*pid [0-9]+" -- \
            "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 3000 --save-every 100 --keep-last 0 \
            --resume auto
    done
    wait $PA || { cat "$W/a.out"; fail "the first job failed after a joiner was refused"; }
    [ -f "$W/run/complete.json" ] || fail "no complete.json"
    # every 100 steps and every epoch end (24 steps at W = 2): 30 + 125 - 5 checkpoints, all complete
    [ "$(ls -d "$W"/run/checkpoints/step-???????? | wc -l)" -eq 150 ] || fail "expected 150 checkpoints: $(ls "$W/run/checkpoints")"
    [ "$(ls -d "$W"/run/checkpoints/step-* | wc -l)" -eq 150 ] || fail "a checkpoint is left incomplete"
    "$ZT" inspect "$W/run" >/dev/null 2>&1 || fail "the last checkpoint does not verify"
    echo "ok [$CASE]"
    ;;
lock_stale)
    # the holder killed: its lock file stays, naming a dead pid; a requeued job is not blocked
    "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 100000 --save-every 200 >"$W/a.out" 2>&1 &
    PA=$!
    wait_step "$W/run" 250
    kill -9 $PA
    wait $PA 2>/dev/null
    grep -q "\"pid\":$PA," "$W/run/lock" || fail "the lock file does not name the dead holder: $(cat "$W/run/lock")"
    s=$(sed 's/step-0*//' "$W/run/checkpoints/latest")
    timeout 300 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 100000 --save-every 200 \
        --resume auto --debug-signal-at-step $((s + 20)) >"$W/b.out" 2>&1 || { cat "$W/b.out"; fail "the requeued job was blocked"; }
    grep -q "resume: .*step $s " "$W/b.out" || { cat "$W/b.out"; fail "did not resume from step $s"; }
    grep -q "\"pid\":" "$W/run/lock" && ! grep -q "\"pid\":$PA," "$W/run/lock" || fail "lock not taken over"
    echo "ok [$CASE]: resumed from step $s over the dead holder's lock"
    ;;
data_truncated_rank0 | data_truncated_rank1)
    # a per-rank block file truncated while training: a named error on every rank, the heartbeat
    # failed, a checkpoint of the last good step (which loads); before: SIGBUS, exit 135, silence
    r=${CASE#data_truncated_rank}
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 --per-rank 2 -o "$W/pr" "$W/docs.txt" >/dev/null || fail "pack"
    timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --data "$W/pr" --run-dir "$W/run" --steps 1000000 \
        --save-every 100000 --keep-last 0 >"$W/train.out" 2>&1 & P=$!
    wait_step "$W/run" 300
    truncate -s 0 "$W/pr/rank-0000$r.u32"
    wait $P; rc=$?
    cat "$W/train.out" | tail -5
    [ $rc -eq 1 ] || fail "exit $rc, expected 1 (a named error)"
    grep -q "rank-0000$r.u32: the file changed while training (it now holds 0 bytes" "$W/train.out" ||
        fail "the error does not name the file and what changed"
    [ "$(hb "$W/run" state)" = failed ] || fail "heartbeat: $(cat "$W/run/heartbeat.json")"
    grep -q '"error": ".*rank-0000'"$r"'.u32: the file changed while training' "$W/run/heartbeat.json" ||
        fail "the heartbeat lacks the error"
    s=$(hb "$W/run" step)
    # the last good step is checkpointed now, or was at that very step (an epoch end: 24 steps)
    grep -Eq "the checkpoint of step $s, the last good step, is committed|nothing trained since the last checkpoint \(step $s\)" \
        "$W/train.out" || fail "no last-good-step checkpoint"
    [ "$(cat "$W/run/checkpoints/latest")" = "$(printf 'step-%08d' "$s")" ] || fail "latest is not step $s"
    "$ZT" inspect "$W/run" >/dev/null 2>&1 || fail "the last good checkpoint does not verify"
    "$ZT" watch --once "$W/run" >"$W/watch.txt" 2>&1
    grep -q "FAILED: heartbeat.json: the trainer reported failure at step $s: .*rank-0000$r.u32: the file changed" \
        "$W/watch.txt" || { cat "$W/watch.txt"; fail "the watcher does not say why"; }
    echo "ok [$CASE]: named error at step $((s + 1)), checkpoint of step $s committed"
    ;;
data_rewritten)
    # cp of another file of the same size over the block file (same inode, new content)
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/other" <(tac "$W/docs.txt") >/dev/null || fail "pack other"
    cmp -s "$W/data/data.u32" "$W/other/data.u32" && fail "the other data must differ"
    timeout 300 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 1000000 --save-every 100000 \
        >"$W/train.out" 2>&1 & P=$!
    wait_step "$W/run" 300
    cp "$W/other/data.u32" "$W/data/data.u32"
    wait $P; rc=$?
    [ $rc -eq 1 ] || { tail "$W/train.out"; fail "exit $rc, expected 1"; }
    grep -Eq "data/data.u32: the file changed while training \((it was written to|it now holds)" "$W/train.out" ||
        { tail "$W/train.out"; fail "no named error"; }
    [ "$(hb "$W/run" state)" = failed ] || fail "heartbeat not failed"
    echo "ok [$CASE]"
    ;;
eval_truncated)
    # the evaluation data truncated while evaluations run (every step, 48 blocks each)
    cp -r "$W/data" "$W/eval"
    timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --data "$W/data" --eval-data "$W/eval" --eval-every 1 \
        --run-dir "$W/run" --steps 1000000 --save-every 100000 >"$W/train.out" 2>&1 & P=$!
    wait_step "$W/run" 30
    truncate -s 0 "$W/eval/data.u32"
    wait $P; rc=$?
    [ $rc -eq 1 ] || { tail "$W/train.out"; fail "exit $rc, expected 1"; }
    grep -q "eval/data.u32: the file changed while training" "$W/train.out" || { tail "$W/train.out"; fail "no named error"; }
    s=$(hb "$W/run" step)
    grep -Eq "the checkpoint of step $s, the last good step, is committed|nothing trained since the last checkpoint \(step $s\)" \
        "$W/train.out" || fail "no checkpoint of step $s"
    [ "$(cat "$W/run/checkpoints/latest")" = "$(printf 'step-%08d' "$s")" ] || fail "latest is not step $s"
    echo "ok [$CASE]: named eval error, checkpoint of step $s"
    ;;
stop_in_eval)
    # a stop signal reaching one rank (the last) during an evaluation ends the pass at the next
    # micro-batch on both ranks and checkpoints first; the resumed run completes
    timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --data "$W/data" --eval-data "$W/data" --eval-every 5 \
        --run-dir "$W/run" --steps 20 --debug-signal-in-eval 3 >"$W/train.out" 2>&1 || { cat "$W/train.out"; fail "train"; }
    grep -q "eval      5 | ended after 2 of 24 micro-batches: a stop signal reached 1 rank" "$W/train.out" ||
        { cat "$W/train.out"; fail "the evaluation did not end at micro-batch 3"; }
    grep -q "checkpoint: step 5 " "$W/train.out" &&
        grep -q "stopped: a stop signal .* reached 1 rank during evaluation; checkpoint of step 5 committed" "$W/train.out" ||
        fail "no checkpoint of step 5"
    [ "$(hb "$W/run" state)" = stopped ] || fail "heartbeat not stopped"
    ! grep -q '"eval_loss"' "$W/run/metrics.jsonl" || fail "an interrupted evaluation was recorded"
    timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --data "$W/data" --eval-data "$W/data" --eval-every 5 \
        --run-dir "$W/run" --steps 20 --resume >"$W/resume.out" 2>&1 || { cat "$W/resume.out"; fail "resume"; }
    [ "$(grep -c '"eval_loss"' "$W/run/metrics.jsonl")" -eq 3 ] || fail "expected evaluations at 10, 15, 20"
    echo "ok [$CASE]"
    ;;
eval_no_targets)
    # held-out conversations whose every word is masked out of the loss (the no-loss bit set on
    # each word of a chat pack; dataset.json's crc and trained_tokens made to match): refused at
    # start, warned by pack --verify; JSON never gets a NaN
    "$ZT" pack --quiet --input chat --seq-len 64 "$SRC/examples/sft/conversations.jsonl" -o "$W/tr" >/dev/null 2>&1 || fail "pack train"
    head -5 "$SRC/examples/sft/conversations.jsonl" >"$W/few.jsonl"
    "$ZT" pack --quiet --input chat --seq-len 64 "$W/few.jsonl" -o "$W/ev" >/dev/null 2>&1 || fail "pack eval"
    perl -e 'local $/; my $d = <STDIN>; print pack("V*", map { $_ | 0x80000000 } unpack("V*", $d))' \
        <"$W/ev/data.u32" >"$W/ev/masked" && mv "$W/ev/masked" "$W/ev/data.u32" || fail "perl"
    sed -i -E 's/("trained_tokens":[[:space:]]*)[0-9]+/\10/' "$W/ev/dataset.json"
    crc=$("$ZT" pack --verify "$W/ev" 2>&1 | sed -nE 's/.*file has (0x[0-9a-f]+).*/\1/p')
    [ -n "$crc" ] || fail "no crc from pack --verify"
    sed -i -E "s/(\"crc32c\":[[:space:]]*\")0x[0-9a-f]+/\1$crc/" "$W/ev/dataset.json"
    "$ZT" pack --verify "$W/ev" >"$W/verify.txt" 2>&1 || { cat "$W/verify.txt"; fail "verify"; }
    grep -q "warning: .*ev: its blocks hold no trained target.*refuses it as --eval-data" "$W/verify.txt" ||
        { cat "$W/verify.txt"; fail "pack --verify does not warn"; }
    expect_error "--eval-data .*ev: the [0-9]+ blocks? an evaluation reads hold no trained target" -- \
        "$ZT" train --model "$SRC/examples/tiny-qwen3-chat" --data "$W/tr" --eval-data "$W/ev" --run-dir "$W/run" \
        --steps 2 --threads 1
    [ ! -e "$W/run/metrics.jsonl" ] || fail "a refused run wrote metrics"
    echo "ok [$CASE]"
    ;;
eval_empty)
    # an evaluation set of 0 blocks (shorter than one block): refused, not "evaluated every 1 steps"
    # pack refuses to make one (issue 47: exit 1, no dataset.json), so the set is written by hand: one
    # empty block file and the dataset.json a pack of it would have (as an older pack or another tool
    # could leave it)
    echo "1 2 3" >"$W/short.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/empty" "$W/short.txt" >/dev/null 2>&1 &&
        fail "pack made a dataset of 0 blocks"
    [ ! -e "$W/empty/dataset.json" ] || fail "pack left a dataset.json of 0 blocks"
    mkdir -p "$W/empty" && : >"$W/empty/data.u32"
    cat >"$W/empty/dataset.json" <<'J'
{"format": "zerotrain-tokens", "version": 1, "seq_len": 16, "vocab_size": 96, "tokenizer": "ids", "input": "ids",
 "layout": "single", "documents": 1, "dropped_tokens": 3,
 "files": [{"name": "data.u32", "blocks": 0, "tokens": 0, "crc32c": "0x00000000", "documents": 1, "dropped_tokens": 3}]}
J
    "$ZT" pack --verify "$W/empty" >"$W/verify.txt" 2>&1
    grep -q "warning: .*empty holds no blocks" "$W/verify.txt" || { cat "$W/verify.txt"; fail "pack --verify does not warn"; }
    expect_error "--eval-data .*empty: the dataset holds no blocks, so there is nothing to evaluate" -- \
        "$ZT" train "${COMMON[@]}" --data "$W/data" --eval-data "$W/empty" --eval-every 1 --run-dir "$W/run" --steps 2
    echo "ok [$CASE]"
    ;;
first_error)
    # the save fails (ENOSPC, injected) and so does every heartbeat write (a directory where the
    # trainer's process creates heartbeat.json.tmp.PID: the shell's pid, kept by exec; a directory
    # at heartbeat.json itself is refused at start): the save's error is the one reported, the
    # heartbeat's appended
    expect_error "step 4: saving checkpoint step 4 .*No space left on device \(injected" \
        "\(then, recording the failure: .*heartbeat.json" -- \
        bash -c 'mkdir -p "$0/heartbeat.json.tmp.$$" && exec "$@"' "$W/run" \
        env ZT_CKPT_FAIL_AFTER_BYTES=1000 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 8 \
        --save-every 4
    grep "zerotrain train: error:" "$W/out.txt" | grep -q "^zerotrain train: error: step 4: saving checkpoint" ||
        { grep "error:" "$W/out.txt"; fail "the first error is not the one reported first"; }
    echo "ok [$CASE]"
    ;;
auto_corrupt_newest)
    # --keep-last 2, a flipped byte in the newest checkpoint's data: --resume auto falls back to
    # the previous one, naming what it skipped and why
    "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 12 --save-every 3 --keep-last 2 \
        --debug-signal-at-step 6 >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "first run"; }
    ls "$W/run/checkpoints"
    f="$W/run/checkpoints/step-00000006/ckpt.h5"
    off=$("$ZT" inspect "$W/run/checkpoints/step-00000006" | sed -n 's|.*/units/001/master .*file bytes \[\([0-9]*\),.*|\1|p')
    [ -n "$off" ] || fail "no offset of /units/001/master"
    b=$(od -An -tu1 -j $((off + 41)) -N1 "$f" | tr -d ' ')
    printf "$(printf '\\%03o' $((b ^ 16)))" | dd of="$f" bs=1 seek=$((off + 41)) conv=notrunc status=none
    timeout 300 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 12 --save-every 3 --keep-last 2 \
        --resume auto >"$W/b.out" 2>&1 || { cat "$W/b.out"; fail "--resume auto did not fall back"; }
    grep -q "resume auto: .*step-00000006 does not load (.*crc32c mismatch" "$W/b.out" || { cat "$W/b.out"; fail "skip not named"; }
    grep -q "resume: .*step-00000003: step 3" "$W/b.out" || { cat "$W/b.out"; fail "did not resume from step 3"; }
    [ -f "$W/run/complete.json" ] || fail "did not complete"
    echo "ok [$CASE]"
    ;;
metrics_nul)
    # a NUL byte in metrics.jsonl: --resume keeps every line after it (it only drops lines of
    # steps after the checkpoint) and says it kept a line it could not parse
    "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 10 --debug-signal-at-step 6 \
        >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "first run"; }
    M="$W/run/metrics.jsonl"
    awk 'NR == 2 { printf "%s", substr($0, 1, 10); printf "%c", 0; print substr($0, 11); next } { print }' "$M" >"$M.x"
    mv "$M.x" "$M"
    timeout 300 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 10 --resume >"$W/b.out" 2>&1 ||
        { cat "$W/b.out"; fail "resume"; }
    grep -q "metrics.jsonl: 1 line that does not parse (first: line 2) kept as it is" "$W/b.out" || { cat "$W/b.out"; fail "no warning"; }
    for s in 1 3 4 5 6 7 8 9 10; do
        [ "$(tr -d '\000' <"$M" | grep -c "\"step\":$s,")" -eq 1 ] || fail "step $s: $(tr -d '\000' <"$M" | grep -c "\"step\":$s,") lines"
    done
    echo "ok [$CASE]"
    ;;
prune_removing)
    # a prune interrupted by a crash leaves step-N.removing: cleared at the next start; pruning
    # itself never leaves a step-N/ behind
    "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 12 --save-every 2 --keep-last 2 \
        --debug-signal-at-step 6 >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "first run"; }
    mkdir -p "$W/run/checkpoints/step-00000002.removing"
    echo '{"step": 2}' >"$W/run/checkpoints/step-00000002.removing/meta.json"
    timeout 300 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 12 --save-every 2 --keep-last 2 \
        --resume auto >"$W/b.out" 2>&1 || { cat "$W/b.out"; fail "resume"; }
    grep -q "checkpoints: removed .*step-00000002.removing (a removal an earlier job did not finish)" "$W/b.out" ||
        { cat "$W/b.out"; fail "no removal message"; }
    [ "$(ls "$W/run/checkpoints" | tr '\n' ' ')" = "latest step-00000010 step-00000012 " ] ||
        fail "checkpoints left: $(ls "$W/run/checkpoints" | tr '\n' ' ')"
    echo "ok [$CASE]"
    ;;
stopped_heartbeat)
    # the "stopped" heartbeat carries the GPU-hours spent (it said 0 while the metrics had more)
    "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 400 --debug-signal-at-step 300 \
        >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "run"; }
    [ "$(hb "$W/run" state)" = stopped ] || fail "not stopped"
    g=$(hb "$W/run" gpu_hours)
    m=$(tail -1 "$W/run/metrics.jsonl" | sed -E 's/.*"gpu_hours":([0-9.e-]+).*/\1/')
    awk -v g="$g" -v m="$m" 'BEGIN { exit !(g > 0 && g >= m && g < 2 * m + 1e-5) }' ||
        fail "stopped heartbeat gpu_hours $g, last metrics line $m"
    echo "ok [$CASE]: gpu_hours $g (metrics $m)"
    ;;
signal_at_startup)
    # a stop signal while the job is still starting (here: blocked opening a dataset.json that
    # is a FIFO nobody writes) ends the process instead of being noted for a loop never reached
    mkdir -p "$W/fifo"
    mkfifo "$W/fifo/dataset.json"
    "$ZT" train "${COMMON[@]}" --data "$W/fifo" --no-preflight --run-dir "$W/run" --steps 2 >"$W/a.out" 2>&1 & P=$!
    for _ in $(seq 100); do [ -f "$W/run/lock" ] && break; sleep 0.05; done
    sleep 0.5
    kill -TERM $P
    for _ in $(seq 50); do kill -0 $P 2>/dev/null || break; sleep 0.1; done
    if kill -0 $P 2>/dev/null; then kill -9 $P; fail "SIGTERM during start-up did not end the process"; fi
    wait $P; rc=$?
    [ $rc -eq 143 ] || { cat "$W/a.out"; fail "exit $rc, expected 143"; }
    grep -q "arrived before training started; exiting, nothing to save" "$W/a.out" || { cat "$W/a.out"; fail "no message"; }
    echo "ok [$CASE]"
    ;;
*)
    fail "unknown case"
    ;;
esac
