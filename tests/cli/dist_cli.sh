#!/usr/bin/env bash
# Multi-rank CLI tests of `zerotrain train` under mpirun (oversubscribed CPU ranks):
# the field deadlock reproduced with --no-evenfix and prevented by evenfix, clear
# errors for impossible layouts, and W=2 agreeing with W=1 on the same global batch.
#   dist_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }

# 61 documents of exactly one 16-token block each, dealt round-robin to 2 ranks:
# rank 0 gets 31 blocks, rank 1 gets 30 (the field report had 30,888 vs 30,835).
uneven_data() {
    awk 'BEGIN{srand(11); for(d=0; d<61; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 --per-rank 2 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
}

case "$CASE" in
evenfix_completes)
    uneven_data
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --epochs 1 --lr 1e-3 --collective-timeout 20 --log-every 10 >"$W/out.txt" 2>&1 \
        || { cat "$W/out.txt"; fail "evenfix run failed"; }
    cat "$W/out.txt"
    grep -q "rank 0 has 31 blocks, drops 1" "$W/out.txt" || fail "evenfix log does not name rank 0's dropped block"
    grep -q "every rank stops after 30 steps" "$W/out.txt" || fail "evenfix did not settle on 30 steps"
    [ "$(wc -l <"$W/run/metrics.jsonl")" -eq 30 ] || fail "expected 30 steps in metrics.jsonl"
    for r in 0 1; do  # per-rank metrics: every rank logs its own split of every step
        f="$W/run/ranks/rank-0000$r.metrics.jsonl"
        [ "$(wc -l <"$f")" -eq 30 ] || fail "$f should have 30 lines"
        grep -q "\"rank\":$r,.*\"comm_wait_s\"" "$f" || fail "$f lacks the rank's wait time"
    done
    echo "ok [$CASE]"
    ;;
no_evenfix_deadlock)
    uneven_data
    start=$(date +%s)
    timeout 90 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --epochs 1 --lr 1e-3 --no-evenfix --no-preflight --collective-timeout 3 --first-collective-timeout 30 --log-every 10 \
        >"$W/out.txt" 2>&1
    rc=$? elapsed=$(( $(date +%s) - start ))
    cat "$W/out.txt"
    [ $rc -ne 124 ] || fail "the job hung: killed by the outer 90 s timeout instead of the 3 s collective deadline"
    [ $rc -ne 0 ] || fail "the job exited 0; rank 1 should have left the epoch one step early and the job aborted"
    grep -q "WILL HANG" "$W/out.txt" || fail "no warning about --no-evenfix with uneven ranks"
    grep -q 'rank 1.*barrier.*epoch-end save' "$W/out.txt" || fail "rank 1 should report the epoch-end barrier"
    grep -E -q 'rank 0.*(allgather|reduce_scatter)' "$W/out.txt" || fail "rank 0 should report a data collective"
    ls "$W/run/ranks/"rank-0000[01].flight.json >/dev/null 2>&1 || fail "flight recorder dumps missing in RUN/ranks"
    echo "ok [$CASE]: aborted with exit $rc after ${elapsed} s"
    ;;
save_hang_watched)
    # A rank stalls inside the checkpoint save (after the symmetric barrier) while its peer
    # waits in HDF5's collective write: the comm watchdog must report the host wait and
    # abort the job at --save-timeout instead of hanging (the limit the field team hit).
    uneven_data
    start=$(date +%s)
    timeout 90 "${MPIRUN[@]}" -n 2 -x ZT_CKPT_DEBUG_STALL_RANK=1 -x ZT_CKPT_DEBUG_STALL_S=600 "$ZT" train \
        --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" --steps 2 --save-every 1 \
        --save-timeout 3 --collective-timeout 3 --log-every 1 >"$W/out.txt" 2>&1
    rc=$? elapsed=$(( $(date +%s) - start ))
    cat "$W/out.txt"
    [ $rc -ne 124 ] || fail "the job hung in the checkpoint save: killed by the outer 90 s timeout"
    [ $rc -ne 0 ] || fail "the job exited 0 although rank 1 never finished its save"
    grep -q "stalling inside the checkpoint save" "$W/out.txt" || fail "the stall was not injected"
    grep -q 'checkpoint save (HDF5 collective write; limit: --save-timeout)' "$W/out.txt" || fail "no report names the checkpoint save"
    grep -q 'host wait outside the comm layer' "$W/out.txt" || fail "the report does not say it was a host wait"
    [ "$elapsed" -lt 40 ] || fail "took ${elapsed} s; the 3 s save deadline should end it within seconds"
    [ ! -e "$W/run/checkpoints/step-00000001" ] || fail "a checkpoint was committed although its save never finished"
    echo "ok [$CASE]: aborted with exit $rc after ${elapsed} s"
    ;;
preflight_catches_uneven)
    # The gate refuses --no-evenfix on uneven ranks in seconds instead of hanging at the epoch end.
    uneven_data
    start=$(date +%s)
    timeout 60 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --epochs 1 --no-evenfix >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "should be refused by preflight"; }
    grep -q "WILL deadlock" "$W/out.txt" || { cat "$W/out.txt"; fail "preflight message"; }
    grep -q "spread 1" "$W/out.txt" || fail "preflight should report the spread"
    echo "ok [$CASE]: refused in $(( $(date +%s) - start )) s: $(grep -m1 'WILL deadlock' "$W/out.txt" | cut -c1-160)"
    ;;
per_rank_mismatch)
    uneven_data
    timeout 60 "${MPIRUN[@]}" -n 3 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --steps 1 >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "should refuse 2 per-rank files on 3 ranks"; }
    grep -q "per-rank layout has 2 files for 3 ranks" "$W/out.txt" || { cat "$W/out.txt"; fail "preflight message"; }
    # Without the gate, the trainer itself refuses too.
    timeout 60 "${MPIRUN[@]}" -n 3 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run2" \
        --steps 1 --no-preflight >"$W/out2.txt" 2>&1 && { cat "$W/out2.txt"; fail "should refuse without preflight"; }
    grep -q "needs exactly 2 ranks, but the job has 3" "$W/out2.txt" || { cat "$W/out2.txt"; fail "message"; }
    echo "ok [$CASE]: $(grep -m1 'needs exactly' "$W/out2.txt")"
    ;;
more_ranks_than_blocks)
    awk 'BEGIN{for(d=0; d<3; d++){ line=""; for(i=0;i<16;i++) line=line (d*16+i)%90 " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    timeout 60 "${MPIRUN[@]}" -n 4 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --steps 1 >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "should refuse 3 blocks on 4 ranks"; }
    grep -q "fewer blocks than one step needs" "$W/out.txt" || { cat "$W/out.txt"; fail "preflight message"; }
    timeout 60 "${MPIRUN[@]}" -n 4 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run2" \
        --steps 1 --no-preflight >"$W/out2.txt" 2>&1 && { cat "$W/out2.txt"; fail "should refuse without preflight"; }
    grep -q "fewer than one step needs" "$W/out2.txt" || { cat "$W/out2.txt"; fail "message"; }
    echo "ok [$CASE]: $(grep -m1 'fewer than' "$W/out2.txt")"
    ;;
w2_matches_w1)
    # Same global batch: W=1 x grad-accum 2 vs W=2 x grad-accum 1 (rank r takes slice r of each step).
    awk 'BEGIN{srand(5); for(d=0; d<40; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    common=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --steps 8 --lr 1e-3 --adam-eps 1e-4 --threads 1 --log-every 0)
    "$ZT" train "${common[@]}" --run-dir "$W/w1" --grad-accum 2 >"$W/out1.txt" 2>&1 || { cat "$W/out1.txt"; fail "W=1"; }
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZT" train "${common[@]}" --run-dir "$W/w2" --grad-accum 1 >"$W/out2.txt" 2>&1 \
        || { cat "$W/out2.txt"; fail "W=2"; }
    paste -d' ' <(sed 's/.*"loss":\([0-9.]*\).*/\1/' "$W/w1/metrics.jsonl") \
                <(sed 's/.*"loss":\([0-9.]*\).*/\1/' "$W/w2/metrics.jsonl") >"$W/losses.txt"
    cat "$W/losses.txt"
    [ "$(wc -l <"$W/losses.txt")" -eq 8 ] || fail "expected 8 steps each"
    awk '{d=$1-$2; if(d<0)d=-d; if(d > 1e-5*$1){print "step " NR ": " $1 " vs " $2; bad=1}} END{exit bad}' "$W/losses.txt" \
        || fail "W=2 loss trajectory differs from W=1 by more than 1e-5 relative"
    echo "ok [$CASE]"
    ;;
*) fail "unknown case" ;;
esac
