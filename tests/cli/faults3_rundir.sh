#!/usr/bin/env bash
# The third fault battery (issue 35), the run directory's share, one case per invocation:
# links planted where the trainer, pack, export, watch and report write (each refused naming
# the path, and the link's target outside never written nor created), RUN/lock removed while
# a job runs (a second job still refused), and a disk full for a moment (every lost metrics
# record warned and counted, the file never holding a torn line).
#   faults3_rundir.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE   (exit 77: skipped)
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
umount "$WORK/$CASE/mnt" 2>/dev/null  # a tmpfs an earlier run of this case left mounted
WAIT_POLLS=3000
. "$SRC/tests/support/fault_case.sh"  # W, GOLD, MPIRUN, fail, expect_error, wait_step, hb

# ---- links planted in output directories, pointing outside them ----
OUT="$W/outside"  # every link's target is here; nothing in it may change, nothing be created
mkdir -p "$OUT"
K=0
# plant KIND PATH: a symbolic link at PATH to a new name in $OUT: KIND file (a file of known
# bytes, kept as NAME.orig), dir (an empty directory) or none (nothing: a dangling link)
plant() {
    K=$((K + 1))
    local t="$OUT/t$K"
    case "$1" in
    file) printf 'not zerotrain'"'"'s: %s\n' "$2" >"$t" && cp "$t" "$t.orig" ;;
    dir) mkdir "$t" ;;
    esac
    mkdir -p "$(dirname "$2")" && ln -s "$t" "$2" || fail "cannot plant $2"
}
# outside_intact: every file in $OUT as planted, every directory empty, nothing created
outside_intact() {
    local f
    for f in "$OUT"/*; do
        [ -e "$f" ] || continue
        case "$f" in *.orig) continue ;; esac
        if [ -d "$f" ]; then
            [ -z "$(ls -A "$f")" ] || fail "written through a link: $f holds $(ls -A "$f" | head -3 | tr '\n' ' ')"
        elif [ -f "$f.orig" ]; then
            cmp -s "$f" "$f.orig" || fail "written through a link: $f changed ($(head -c 80 "$f"))"
        else
            fail "created through a dangling link: $f"
        fi
    done
}
# refused PATH CMD...: CMD fails naming PATH as a link to $OUT; nothing outside is written
refused() {
    local p=$1
    shift
    expect_error "$p is a symbolic link \(to $OUT/t[0-9]+\)" -- "$@"
    outside_intact
}
# each KINDS PATH CMD...: for each kind (file/dir/none), a fresh run directory with a link at
# PATH, refused by CMD
each() {
    local kinds=$1 p=$2 k
    shift 2
    for k in $kinds; do
        rm -rf "$W/run" && mkdir -p "$W/run/ranks"
        plant "$k" "$p"
        refused "$p" "$@"
    done
}

# 48 single-block documents of 16 ids (vocab 96): 48 blocks, 48 steps per epoch at W=1, B=1.
awk 'BEGIN{srand(21); for(d=0; d<48; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
COMMON=(--init "$GOLD/tiny_untied_gqa" --lr 1e-3 --warmup 2 --log-every 0 --threads 1 --no-save-final)
# big_data: $W/big, 8000 blocks (no epoch end, so no epoch-end checkpoint, for 8000 steps)
big_data() {
    awk 'BEGIN{srand(5); for(d=0; d<8000; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/big.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/big" "$W/big.txt" >/dev/null || fail "pack big"
}
TRAIN=("$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$W/run" --steps 4)
TRAIN2=(timeout 300 "${MPIRUN[@]}" -n 2 "${TRAIN[@]}")
R="$W/run"

case "$CASE" in
link_lock)
    # before: the lock JSON truncated the target over (a dangling link created it)
    each "file none" "$R/lock" "${TRAIN[@]}"
    echo "ok [$CASE]: $(grep -m1 error "$W/out.txt")"
    ;;
link_metrics)
    each "file none" "$R/metrics.jsonl" "${TRAIN[@]}"
    # a resumed run appends to it: refused the same
    rm -rf "$R" && "${TRAIN[@]}" --debug-signal-at-step 2 >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "first run"; }
    rm "$R/metrics.jsonl" && plant file "$R/metrics.jsonl"
    refused "$R/metrics.jsonl" "${TRAIN[@]}" --resume auto
    echo "ok [$CASE]"
    ;;
link_rank_metrics)
    # rank 1's own file at W = 2
    each "file none" "$R/ranks/rank-00001.metrics.jsonl" "${TRAIN2[@]}"
    grep -q "rank 1: " "$W/out.txt" || { cat "$W/out.txt"; fail "the refusal does not name rank 1"; }
    echo "ok [$CASE]"
    ;;
link_heartbeat)
    # before: replaced (renamed over) every step with a warning at most: now refused at start
    each "file none" "$R/heartbeat.json" "${TRAIN[@]}"
    [ ! -e "$R/metrics.jsonl" ] || fail "the refused run trained"
    echo "ok [$CASE]"
    ;;
link_run_json)
    each "file none" "$R/run.json" "${TRAIN[@]}"
    echo "ok [$CASE]"
    ;;
link_rank_files)
    # every other file a rank writes in RUN (W = 2: rank 1's), and rank 0's complete.json
    for f in ranks/rank-00001.alive ranks/rank-00001.flight ranks/rank-00001.blocks complete.json; do
        each "file none" "$R/$f" "${TRAIN2[@]}" --trace-blocks
    done
    each "dir none" "$R/tb/ranks/rank-00001" "${TRAIN2[@]}"
    echo "ok [$CASE]"
    ;;
link_checkpoints)
    # RUN/checkpoints a link to a directory outside: before, every checkpoint was written there
    each "dir none" "$R/checkpoints" "${TRAIN[@]}"
    # RUN/checkpoints/latest a link (to a file naming the checkpoint): a resume is refused
    rm -rf "$R" && "${TRAIN[@]}" --debug-signal-at-step 2 >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "first run"; }
    rm "$R/checkpoints/latest" && plant file "$R/checkpoints/latest"
    echo step-00000002 >"$OUT/t$K" && cp "$OUT/t$K" "$OUT/t$K.orig"
    refused "$R/checkpoints/latest" "${TRAIN[@]}" --resume auto
    echo "ok [$CASE]"
    ;;
link_final)
    # RUN/final (the trainer's export): refused at start, before the steps are spent
    each "dir none" "$R/final" "$ZT" train --init "$GOLD/tiny_untied_gqa" --lr 1e-3 --warmup 2 --log-every 0 \
        --threads 1 --data "$W/data" --run-dir "$R" --steps 4
    [ ! -e "$R/metrics.jsonl" ] || fail "the refused run trained"
    echo "ok [$CASE]"
    ;;
link_pack)
    # pack's outputs: the block file, a per-rank one, dataset.json, a stale .partial
    PACK=("$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 "$W/docs.txt")
    for f in data.u32 dataset.json data.u32.partial; do
        for k in file none; do
            rm -rf "$W/p" && mkdir -p "$W/p"
            plant $k "$W/p/$f"
            refused "$W/p/$f" "${PACK[@]}" -o "$W/p"
            [ ! -e "$W/p/dataset.json" ] || [ -L "$W/p/dataset.json" ] || fail "a refused pack wrote dataset.json"
        done
    done
    rm -rf "$W/p" && mkdir -p "$W/p"
    plant none "$W/p/rank-00001.u32"
    refused "$W/p/rank-00001.u32" "${PACK[@]}" --per-rank 2 -o "$W/p"
    echo "ok [$CASE]"
    ;;
link_export)
    # export's output directory holding a link (named in the refusal), or a dangling link itself
    rm -rf "$R" && "${TRAIN[@]}" >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "train"; }
    for f in model.safetensors config.json; do
        rm -rf "$W/e" && mkdir -p "$W/e"
        plant file "$W/e/$f"
        expect_error "$W/e exists and is not empty \(it holds $W/e/$f, a symbolic link to $OUT/t[0-9]+\)" -- \
            "$ZT" export "$R" "$W/e"
        outside_intact
    done
    rm -rf "$W/e"
    plant none "$W/e"
    refused "$W/e" "$ZT" export "$R" "$W/e"
    "$ZT" export "$R" "$W/e2" >"$W/ok.out" 2>&1 || { cat "$W/ok.out"; fail "a plain export failed"; }
    echo "ok [$CASE]"
    ;;
link_watch_report)
    # what watch and report write into a run directory (watch.json is a side output of watch:
    # its refusal is a warning, the exit stays the run's state)
    rm -rf "$R" && "${TRAIN[@]}" >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "train"; }
    for k in file none; do
        plant $k "$R/watch.json"
        "$ZT" watch --once "$R" >"$W/out.txt" 2>&1
        grep -Eq "cannot write $R/watch.json: $R/watch.json is a symbolic link \(to $OUT/t[0-9]+\)" "$W/out.txt" ||
            { cat "$W/out.txt"; fail "watch does not refuse the link at watch.json"; }
        outside_intact
        rm "$R/watch.json"
        plant $k "$R/report.html"
        refused "$R/report.html" "$ZT" report "$R"
        rm "$R/report.html"
    done
    echo "ok [$CASE]"
    ;;
lock_removed)
    # rm RUN/lock while a job trains: a --resume auto job is still refused (RUN itself is
    # locked); the first job writes the file again at its next checkpoint (step 2000) and ends well
    big_data
    timeout 300 "$ZT" train "${COMMON[@]}" --data "$W/big" --run-dir "$R" --steps 6000 --save-every 2000 \
        >"$W/a.out" 2>&1 & PA=$!
    wait_step "$R" 100
    pid=$(sed -nE 's/.*"pid":([0-9]+).*/\1/p' "$R/lock")
    rm "$R/lock"
    # (under load the first job may be past step 2000 and have written it again already)
    expect_error "$R is in use by another job \((a job whose lock file $R/lock is missing|host [^,]+, pid $pid, )" -- \
        "$ZT" train "${COMMON[@]}" --data "$W/big" --run-dir "$R" --steps 6000 --save-every 2000 --resume auto
    grep -m1 -o "is in use by another job ([^;]*" "$W/out.txt"
    # RUN/lock written again: a job refused then is told who holds the run
    for _ in $(seq 600); do [ -f "$R/lock" ] && grep -q '"pid"' "$R/lock" && break; sleep 0.1; done
    expect_error "is in use by another job \(host [^,]+, pid $pid, " -- \
        "$ZT" train "${COMMON[@]}" --data "$W/big" --run-dir "$R" --steps 6000 --save-every 2000 --resume auto
    wait $PA || { cat "$W/a.out"; fail "the first job failed"; }
    grep -q "warning: $R/lock was removed or replaced while this job holds $R .*written again" "$W/a.out" ||
        { cat "$W/a.out"; fail "the first job did not say its lock file was removed"; }
    [ "$(grep -c '"loss"' "$R/metrics.jsonl")" -eq 6000 ] || fail "metrics.jsonl: $(grep -c '"loss"' "$R/metrics.jsonl") step lines"
    [ "$(grep -o '"step":[0-9]*,' "$R/metrics.jsonl" | sort | uniq -d | wc -l)" -eq 0 ] || fail "a step logged twice"
    echo "ok [$CASE]"
    ;;
lock_removed_file_only)
    # a file system that cannot lock a directory (NFS; forced here): the job whose RUN/lock was
    # removed stops before its next commit, naming why, and commits nothing after
    timeout 300 env ZT_DEBUG_RUN_LOCK_FILE_ONLY=1 "$ZT" train "${COMMON[@]}" --data "$W/data" --run-dir "$R" \
        --steps 100000 --save-every 100 >"$W/a.out" 2>&1 & PA=$!
    wait_step "$R" 150
    rm "$R/lock"
    wait $PA; rc=$?
    [ $rc -eq 1 ] || { tail -5 "$W/a.out"; fail "exit $rc, expected 1"; }
    grep -Eq "step [0-9]+: checkpoint refused: $R/lock was removed or replaced while this job held it \(this file system cannot lock the directory itself\)" \
        "$W/a.out" || { tail -5 "$W/a.out"; fail "no named error"; }
    grep -q '"state": "failed"' "$R/heartbeat.json" || fail "heartbeat: $(cat "$R/heartbeat.json")"
    echo "ok [$CASE]: $(grep -m1 -o 'step [0-9]*: checkpoint refused' "$W/a.out")"
    ;;
metrics_disk_full)
    # the run directory's disk full mid-run, until the first metrics record is lost and 0.2 s more
    # (a fixed window let a fast run reach its end-of-run checkpoint with the disk still full):
    # every metrics record lost is warned (file and steps), counted at the end and in
    # complete.json and the heartbeat; the file holds whole lines only. 8000 blocks: no
    # epoch-end checkpoint falls in the window.
    big_data
    mkdir -p "$W/mnt"
    mount -t tmpfs -o size=16m tmpfs "$W/mnt" 2>/dev/null || { echo "SKIP [$CASE]: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$W/mnt" 2>/dev/null' EXIT
    M="$W/mnt/run"
    timeout 300 "$ZT" train "${COMMON[@]}" --data "$W/big" --run-dir "$M" --steps 6000 --save-every 100000 \
        >"$W/train.out" 2>&1 & P=$!
    wait_step "$M" 500
    dd if=/dev/zero of="$W/mnt/fill" bs=64k 2>/dev/null  # until the disk is full
    for _ in $(seq 200); do  # at most 10 s
        grep -q "metrics.jsonl: the record of step [0-9]* is lost" "$W/train.out" && break
        sleep 0.05
    done
    sleep 0.2
    rm "$W/mnt/fill"
    kill -0 $P 2>/dev/null || fail "the run ended before the disk had room again (too fast for this test?)"
    wait $P; rc=$?
    grep -v 'heartbeat.json' "$W/train.out" | grep -E 'warning|error' | tail -6
    [ $rc -eq 0 ] || { tail -5 "$W/train.out"; fail "exit $rc"; }
    lines=$(grep -c '"loss"' "$M/metrics.jsonl")
    lost=$((6000 - lines))
    [ $lost -gt 0 ] || fail "no record was lost: the disk was not full while the job wrote (too fast?)"
    # whole lines only, each step once
    while IFS= read -r l; do
        case "$l" in '{"step":'*'}') ;; *) fail "a torn line in metrics.jsonl: $l" ;; esac
    done <"$M/metrics.jsonl"
    [ "$(tail -c 1 "$M/metrics.jsonl" | od -An -c | tr -d ' ')" = '\n' ] || fail "metrics.jsonl does not end in a newline"
    # warned as it happened, naming the file and the step; again at the end with the count and steps
    grep -Eq "warning: $M/metrics.jsonl: the record of step [0-9]+ is lost \(No space left on device\)" "$W/train.out" ||
        fail "no warning when the first record was lost"
    steps=$(sed -nE "s|.*warning: $M/metrics.jsonl: $lost records lost \(steps ([0-9, -]+)\).*|\1|p" "$W/train.out")
    [ -n "$steps" ] || { grep "records lost" "$W/train.out"; fail "the end of the run does not count the $lost lost records"; }
    # the steps named are exactly the steps missing
    missing=$(seq 1 6000 | grep -vxFf <(grep -o '"step":[0-9]*,"epoch"' "$M/metrics.jsonl" | grep -o '[0-9]*') |
              awk 'NR == 1 { a = b = $1; next } $1 == b + 1 { b = $1; next } { printf "%s, ", (a == b ? a : a "-" b); a = b = $1 }
                   END { printf "%s", (a == b ? a : a "-" b) }')
    [ "$missing" = "$steps" ] || fail "steps named lost ($steps) are not the steps missing ($missing)"
    grep -q "\"metrics_records_lost\":$lost," "$M/complete.json" || fail "complete.json: $(cat "$M/complete.json")"
    grep -q "\"metrics_records_lost\": $lost" "$M/heartbeat.json" || fail "heartbeat: $(cat "$M/heartbeat.json")"
    grep -Eq '"rank_metrics_records_lost":[1-9]' "$M/complete.json" || fail "the rank file's losses are not counted"
    echo "ok [$CASE]: $lost of 6000 records lost (steps $steps), each warned and counted"
    ;;
*)
    fail "unknown case $CASE"
    ;;
esac
