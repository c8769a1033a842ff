#!/usr/bin/env bash
# Kill-and-resume: a run stopped by SIGUSR1 at step k and resumed must equal the
# uninterrupted run — bit for bit at the same world size, to 1e-5 when resumed at
# another world size (reshard) — and must train the same blocks at every step.
#   resume_cli.sh ZEROTRAIN ST_COMPARE SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 CMP=$2 SRC=$3 WORK=$4 CASE=$5
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
# 48 single-block documents: with a global batch of 4 blocks, 12 steps per epoch; of 6, 8.
. "$SRC/tests/support/tiny_ids_data.sh"
COMMON=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --lr 1e-3 --adam-eps 1e-4 --warmup 2 --save-dtype fp32
        --trace-blocks --log-every 0 --threads 1)

run() {  # run NPROCS RUN_DIR ARGS... (output to RUN_DIR.out)
    local n=$1 dir=$2; shift 2
    timeout 300 "${MPIRUN[@]}" -n "$n" "$ZT" train "${COMMON[@]}" --run-dir "$dir" "$@" >"$dir.out" 2>&1 \
        || { cat "$dir.out"; fail "run in $dir failed"; }
}
# The blocks of each global step, all ranks merged and sorted: "step b1 b2 ..." per line.
steps_blocks() {
    cat "$1"/ranks/rank-*.blocks | awk '{s=$1; for(i=2;i<=NF;i++) print s, $i}' | sort -k1,1n -k2,2 \
        | awk '{if($1!=p){if(NR>1)print line; line=$1; p=$1} line=line " " $2} END{print line}'
}

case "$CASE" in
same_world)  # W=2 x G=2 (global batch 4), 20 steps (2 epochs of 12 would be 24; stop inside epoch 1)
    run 2 "$W/full" --steps 20 --grad-accum 2
    run 2 "$W/part" --steps 20 --grad-accum 2 --debug-signal-at-step 7
    grep -q "stopped: a stop signal" "$W/part.out" || { cat "$W/part.out"; fail "no graceful stop"; }
    [ ! -e "$W/part/complete.json" ] || fail "a stopped run must not write complete.json"
    grep -q '"state": "stopped"' "$W/part/heartbeat.json" || fail "heartbeat should say stopped"
    run 2 "$W/part" --steps 20 --grad-accum 2 --resume
    grep -q "resume: .*step 7" "$W/part.out" || { cat "$W/part.out"; fail "did not resume from step 7"; }
    "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 0 || fail "not bit-identical"
    diff <(steps_blocks "$W/full") <(steps_blocks "$W/part") || fail "block ids per step differ"
    diff <(cut -d, -f1-3 "$W/full/metrics.jsonl") <(cut -d, -f1-3 "$W/part/metrics.jsonl") || fail "loss per step differs"
    echo "ok [$CASE]: stopped at 7, resumed, 20 steps bit-identical, same blocks per step"
    ;;
qwen3_5)  # Qwen3.5 (tests/golden/q35_mix: Gated DeltaNet + full attention), W=2 x G=2, 12 steps: stopped at 6 and resumed
    COMMON=(--init "$GOLD/q35_mix" "${COMMON[@]:2}")
    run 2 "$W/full" --steps 12 --grad-accum 2
    grep -q "model: Qwen3.5 4 layers (3 linear + 1 full)" "$W/full.out" || { cat "$W/full.out"; fail "no Qwen3.5 model line"; }
    run 2 "$W/part" --steps 12 --grad-accum 2 --debug-signal-at-step 6
    grep -q "stopped: a stop signal" "$W/part.out" || { cat "$W/part.out"; fail "no graceful stop"; }
    run 2 "$W/part" --steps 12 --grad-accum 2 --resume
    grep -q "resume: .*step 6" "$W/part.out" || { cat "$W/part.out"; fail "did not resume from step 6"; }
    "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 0 || fail "not bit-identical"
    diff <(steps_blocks "$W/full") <(steps_blocks "$W/part") || fail "block ids per step differ"
    diff <(cut -d, -f1-3 "$W/full/metrics.jsonl") <(cut -d, -f1-3 "$W/part/metrics.jsonl") || fail "loss per step differs"
    [ "$(grep -c '"loss":' "$W/part/metrics.jsonl")" -eq 12 ] || fail "metrics.jsonl should have 12 step lines"
    echo "ok [$CASE]: Qwen3.5 stopped at 6, resumed, 12 steps bit-identical, same blocks per step"
    ;;
reshard_4_to_2)  # global batch 4: W=4 x G=1, then W=2 x G=2
    run 4 "$W/full" --steps 16
    run 4 "$W/part" --steps 16 --debug-signal-at-step 5
    grep -q "stopped: a stop signal" "$W/part.out" || { cat "$W/part.out"; fail "no graceful stop"; }
    run 2 "$W/part" --steps 16 --grad-accum 2 --resume
    grep -q "saved by 4 ranks, loaded by 2" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message"; }
    "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 1e-5 || fail "final weights differ"
    diff <(steps_blocks "$W/full") <(steps_blocks "$W/part") || fail "block ids per step differ"
    echo "ok [$CASE]"
    ;;
reshard_2_to_3)  # global batch 6: W=2 x G=3, then W=3 x G=2
    run 2 "$W/full" --steps 12 --grad-accum 3
    run 2 "$W/part" --steps 12 --grad-accum 3 --debug-signal-at-step 4
    run 3 "$W/part" --steps 12 --grad-accum 2 --resume
    grep -q "saved by 2 ranks, loaded by 3" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message"; }
    "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 1e-5 || fail "final weights differ"
    diff <(steps_blocks "$W/full") <(steps_blocks "$W/part") || fail "block ids per step differ"
    echo "ok [$CASE]"
    ;;
hsdp_same)  # hybrid sharding 2 x 2 (global batch 4): stopped at step 5 and resumed under the same strategy
    run 4 "$W/full" --steps 16 --shard-group 2
    grep -q "sharding: hybrid over groups of 2 ranks x 2 replicas" "$W/full.out" || { cat "$W/full.out"; fail "no strategy line"; }
    run 4 "$W/part" --steps 16 --shard-group 2 --debug-signal-at-step 5
    grep -q "stopped: a stop signal" "$W/part.out" || { cat "$W/part.out"; fail "no graceful stop"; }
    run 4 "$W/part" --steps 16 --shard-group 2 --resume
    grep -q "resume: .*step 5" "$W/part.out" || { cat "$W/part.out"; fail "did not resume from step 5"; }
    "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 0 || fail "not bit-identical"
    diff <(steps_blocks "$W/full") <(steps_blocks "$W/part") || fail "block ids per step differ"
    diff <(cut -d, -f1-3 "$W/full/metrics.jsonl") <(cut -d, -f1-3 "$W/part/metrics.jsonl") || fail "loss per step differs"
    echo "ok [$CASE]: hybrid 2 x 2 stopped at 5, resumed, 16 steps bit-identical"
    ;;
hsdp_cross)  # global batch 12: full shard W=3 (x4) -> hybrid 2 x 2 (x3) -> full shard W=1 (x12), vs W=3 throughout
    run 3 "$W/full" --steps 12 --grad-accum 4
    run 3 "$W/part" --steps 12 --grad-accum 4 --debug-signal-at-step 4
    grep -q "stopped: a stop signal" "$W/part.out" || { cat "$W/part.out"; fail "no graceful stop (W=3)"; }
    run 4 "$W/part" --steps 12 --grad-accum 3 --shard-group 2 --resume --debug-signal-at-step 8
    grep -q "saved by 3 ranks, loaded by 4" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message (3 -> 2x2)"; }
    grep -q "stopped: a stop signal" "$W/part.out" || { cat "$W/part.out"; fail "no graceful stop (2x2)"; }
    run 1 "$W/part" --steps 12 --grad-accum 12 --resume
    grep -q "saved by 4 ranks, loaded by 1" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message (2x2 -> 1)"; }
    "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 1e-5 || fail "final weights differ"
    diff <(steps_blocks "$W/full") <(steps_blocks "$W/part") || fail "block ids per step differ"
    echo "ok [$CASE]: W=3 -> 2x2 -> W=1 equals W=3 throughout to 1e-5, same blocks per step"
    ;;
keep_gathered)  # --reshard-after-forward false through train, alone and with hybrid sharding: bit-identical, fewer bytes
    for g in 4 2; do
        run 4 "$W/re$g" --steps 8 --shard-group $g
        run 4 "$W/keep$g" --steps 8 --shard-group $g --reshard-after-forward false
        grep -q "parameters kept gathered from forward to backward" "$W/keep$g.out" || { cat "$W/keep$g.out"; fail "no strategy line"; }
        "$CMP" "$W/re$g/final/model.safetensors" "$W/keep$g/final/model.safetensors" 0 || fail "G=$g: keep-gathered not bit-identical"
        diff <(cut -d, -f1-5 "$W/re$g/metrics.jsonl") <(cut -d, -f1-5 "$W/keep$g/metrics.jsonl") || fail "G=$g: loss/grad norm differ"
        re=$(grep -o '"bytes_gathered":[0-9]*' "$W/re$g/metrics.jsonl" | tail -1 | cut -d: -f2)
        kg=$(grep -o '"bytes_gathered":[0-9]*' "$W/keep$g/metrics.jsonl" | tail -1 | cut -d: -f2)
        awk -v a="$kg" -v b="$re" 'BEGIN{exit !(a > 0 && a < 0.6 * b)}' || fail "G=$g: gathered $kg B with keep-gathered vs $re B"
        echo "G=$g: gathered per step $re B resharding, $kg B kept ($(awk -v a="$kg" -v b="$re" 'BEGIN{printf "%.3f", a/b}'))"
    done
    grep -q '"bytes_replicated":[1-9]' "$W/keep2/metrics.jsonl" || fail "hybrid: no bytes_replicated in metrics.jsonl"
    ! grep -q '"bytes_replicated"' "$W/keep4/metrics.jsonl" || fail "full shard: bytes_replicated must be absent"
    echo "ok [$CASE]"
    ;;
hsdp_replica_mismatch)  # one replica's state made to differ (test hook): the save is refused naming both ranks
    timeout 300 "${MPIRUN[@]}" -x ZT_TEST_CORRUPT_REPLICA=3 -n 4 "$ZT" train "${COMMON[@]}" --run-dir "$W/run" \
        --steps 4 --shard-group 2 >"$W/run.out" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] || { cat "$W/run.out"; fail "a run with diverged replicas must fail"; }
    grep -q "rank 3 (replica 1 of shard 1, CRC-32C 0x[0-9a-f]*) differs from rank 1 (replica 0, the writer" "$W/run.out" \
        || { cat "$W/run.out"; fail "the error must name rank 3 and its writer rank 1"; }
    ! ls -d "$W/run/checkpoints/step-"* >/dev/null 2>&1 || fail "no checkpoint may be written from diverged replicas"
    echo "ok [$CASE]: exit $rc, ranks named, nothing written"
    ;;
external_signal)  # a real SIGUSR1 from outside to one rank (pid from its liveness tick)
    awk 'BEGIN{srand(8); for(d=0; d<400; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs2.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data2" "$W/docs2.txt" >/dev/null || fail "pack"
    timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data2" --run-dir "$W/run" \
        --steps 100000 --epochs 1 --alive-interval 0.2 --log-every 0 >"$W/run.out" 2>&1 &
    job=$!
    for _ in $(seq 1 300); do
        [ -f "$W/run/ranks/rank-00001.alive" ] && grep -q '"step": [1-9]' "$W/run/ranks/rank-00001.alive" && break
        sleep 0.1
    done
    pid=$(sed 's/.*"pid": \([0-9]*\).*/\1/' "$W/run/ranks/rank-00001.alive")
    kill -USR1 "$pid" || fail "could not signal rank 1 (pid $pid)"
    wait $job; rc=$?
    cat "$W/run.out" | tail -5
    [ $rc -eq 0 ] || fail "the job should exit 0 after a graceful stop (exit $rc)"
    grep -q "stopped: a stop signal (SIGUSR1/SIGTERM) reached 1 rank" "$W/run.out" || fail "no stop message"
    ls "$W/run/checkpoints/latest" >/dev/null || fail "no checkpoint after the signal"
    echo "ok [$CASE]: $(grep -m1 '^stopped' "$W/run.out")"
    ;;
resume_auto)
    # --resume auto: a fresh start when there is no checkpoint, a resume when there is.
    run 1 "$W/r" --steps 6 --resume auto --debug-signal-at-step 3
    grep -q "resume:" "$W/r.out" && fail "nothing to resume from: must start fresh"
    grep -q "stopped: a stop signal" "$W/r.out" || { cat "$W/r.out"; fail "no graceful stop"; }
    run 1 "$W/r" --steps 6 --resume auto
    grep -q "resume: .*step 3" "$W/r.out" || { cat "$W/r.out"; fail "auto should resume from step 3"; }
    [ -f "$W/r/complete.json" ] || fail "no complete.json"
    echo "ok [$CASE]"
    ;;
auto_damaged_latest)
    # --resume auto with complete checkpoints but a missing, garbage or dangling latest must
    # resume from the newest complete one and never rewrite what was saved (it used to start
    # over from step 0, rewriting every ckpt.h5, run.json and metrics).
    run 2 "$W/base" --steps 10 --save-every 2 --keep-last 0 --debug-signal-at-step 6
    runid() { grep -o '"run_id":[[:space:]]*"[^"]*"' "$1/run.json" || echo NO-RUN-ID; }
    for how in missing garbage dangling; do
        rm -rf "$W/r" && cp -a "$W/base" "$W/r"
        case $how in
        missing) rm "$W/r/checkpoints/latest" ;;
        garbage) printf '\x00\xff not a name\n' >"$W/r/checkpoints/latest" ;;
        dangling) echo step-00000099 >"$W/r/checkpoints/latest" ;;
        esac
        before=$(cd "$W/r" && md5sum checkpoints/step-*/ckpt.h5; runid "$W/r")
        run 2 "$W/r" --steps 10 --save-every 2 --keep-last 0 --resume auto
        grep -q "resuming from step-00000006" "$W/r.out" || { cat "$W/r.out"; fail "$how latest: must resume from step-6"; }
        grep -q "resume: .*step 6" "$W/r.out" || { cat "$W/r.out"; fail "$how latest: did not resume at step 6"; }
        after=$(cd "$W/r" && md5sum checkpoints/step-0000000[246]/ckpt.h5; runid "$W/r")
        [ "$before" = "$after" ] || fail "$how latest: saved checkpoints were rewritten or the run id changed"
        [ -f "$W/r/checkpoints/step-00000010/ckpt.h5" ] || fail "$how latest: the resumed run did not reach step 10"
    done
    echo "ok [$CASE]: missing, garbage and dangling latest each resumed from step 6, nothing rewritten"
    ;;
auto_all_damaged)
    # every checkpoint unreadable: refuse (naming them), start nothing, change nothing
    run 1 "$W/r" --steps 4 --save-every 2 --keep-last 0
    rm "$W/r/checkpoints/latest"
    for f in "$W"/r/checkpoints/step-*/ckpt.h5; do head -c 100 "$f" >"$f.tmp" && mv "$f.tmp" "$f"; done
    # (RUN/lock excepted: it records whichever job last held the run directory, this one too)
    before=$(cd "$W/r" && find . -type f -newer "$W/docs.txt" ! -name lock -exec md5sum {} + | sort)
    timeout 60 "$ZT" train "${COMMON[@]}" --run-dir "$W/r" --steps 4 --resume auto >"$W/out.txt" 2>&1 \
        && { cat "$W/out.txt"; fail "must refuse when no checkpoint can be resumed from"; }
    grep -q "none can be resumed from" "$W/out.txt" || { cat "$W/out.txt"; fail "the refusal must say why"; }
    grep -q "step-00000002" "$W/out.txt" || { cat "$W/out.txt"; fail "the refusal must name the checkpoints"; }
    after=$(cd "$W/r" && find . -type f -newer "$W/docs.txt" ! -name lock -exec md5sum {} + | sort)
    [ "$before" = "$after" ] || fail "files in the run directory changed"
    echo "ok [$CASE]: $(grep -m1 -o 'none can be resumed from.\{0,80\}' "$W/out.txt")"
    ;;
fresh_guard)
    # checkpoints but no run.json: a fresh start must be refused without --overwrite
    run 1 "$W/r" --steps 4 --save-every 2 --keep-last 1
    rm "$W/r/run.json"
    before=$(cd "$W/r" && md5sum checkpoints/step-*/ckpt.h5)
    timeout 60 "$ZT" train "${COMMON[@]}" --run-dir "$W/r" --steps 4 --save-every 2 --keep-last 1 >"$W/out.txt" 2>&1 \
        && { cat "$W/out.txt"; fail "a fresh start over saved checkpoints must be refused"; }
    grep -q "holds saved work" "$W/out.txt" || { cat "$W/out.txt"; fail "the refusal must say why"; }
    [ "$before" = "$(cd "$W/r" && md5sum checkpoints/step-*/ckpt.h5)" ] || fail "checkpoints changed"
    run 1 "$W/r" --steps 4 --save-every 2 --keep-last 1 --overwrite  # the explicit way
    [ -f "$W/r/complete.json" ] || fail "--overwrite should have started over"
    echo "ok [$CASE]"
    ;;
new_data)
    # resuming on other data (same size, other tokens) is refused naming the dataset, unless
    # --allow-new-data, which run.json then records
    run 1 "$W/r" --steps 6 --debug-signal-at-step 2
    awk 'BEGIN{srand(99); for(d=0; d<48; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs2.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data2" "$W/docs2.txt" >/dev/null || fail "pack"
    NEW=("${COMMON[@]}")
    for i in "${!NEW[@]}"; do [ "${NEW[$i]}" = "$W/data" ] && NEW[$i]="$W/data2"; done
    timeout 60 "$ZT" train "${NEW[@]}" --run-dir "$W/r" --steps 6 --resume >"$W/out.txt" 2>&1 \
        && { cat "$W/out.txt"; fail "resuming on other data must be refused"; }
    grep -q "dataset_files" "$W/out.txt" && grep -q -- "--allow-new-data" "$W/out.txt" \
        || { cat "$W/out.txt"; fail "the refusal must name the dataset and the way out"; }
    timeout 120 "$ZT" train "${NEW[@]}" --run-dir "$W/r" --steps 6 --resume --allow-new-data >"$W/out2.txt" 2>&1 \
        || { cat "$W/out2.txt"; fail "--allow-new-data must resume"; }
    grep -q '"data_changed_at_step":[[:space:]]*2' "$W/r/run.json" || fail "run.json must record data_changed_at_step 2"
    echo "ok [$CASE]: $(grep -m1 -o 'checkpoint has dataset_files.\{0,60\}' "$W/out.txt")"
    ;;
context_parallel)  # global batch 2: C = 3 (W = 3) stopped at 4 -> C = 1 (W = 1) stopped at 8 -> C = 2 (W = 2) to 12
    run 3 "$W/full" --steps 12 --grad-accum 2 --context-parallel 3
    grep -q "context parallelism: groups of 3 consecutive ranks" "$W/full.out" || { cat "$W/full.out"; fail "no context line"; }
    run 1 "$W/plain" --steps 12 --grad-accum 2
    run 3 "$W/part" --steps 12 --grad-accum 2 --context-parallel 3 --debug-signal-at-step 4
    grep -q "stopped: a stop signal" "$W/part.out" || { cat "$W/part.out"; fail "no graceful stop (C=3)"; }
    run 1 "$W/part" --steps 12 --grad-accum 2 --resume --debug-signal-at-step 8
    grep -q "saved by 3 ranks, loaded by 1" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message (C=3 -> 1)"; }
    run 2 "$W/part" --steps 12 --grad-accum 2 --context-parallel 2 --resume
    grep -q "saved by 1 rank, loaded by 2" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message (C=1 -> 2)"; }
    "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 1e-5 || fail "final weights differ (resumed)"
    "$CMP" "$W/plain/final/model.safetensors" "$W/full/final/model.safetensors" 1e-5 || fail "C = 3 differs from no split"
    # a context group's ranks train the same blocks: one copy of each per step
    diff <(steps_blocks "$W/plain") <(steps_blocks "$W/full" | awk '{l=$1; delete s; for(i=2;i<=NF;i++) if(!s[$i]++) l=l " " $i; print l}') \
        || fail "block ids per step differ (C = 3 vs none)"
    # the uninterrupted losses and grad norms, step by step (metrics.jsonl prints 6 decimals)
    for run_dir in "$W/part" "$W/plain"; do
        paste -d' ' <(grep -o '"loss":[0-9.e+-]*,"lr":[0-9.e+-]*,"grad_norm":[0-9.e+-]*' "$W/full/metrics.jsonl") \
                    <(grep -o '"loss":[0-9.e+-]*,"lr":[0-9.e+-]*,"grad_norm":[0-9.e+-]*' "$run_dir/metrics.jsonl") \
            | tr ',:"' '   ' | awk '{n++; for(i=2;i<=6;i+=2){a=$i; b=$(i+6); d=a-b; if(d<0)d=-d; if(d>2e-6+1e-5*(a<0?-a:a)) bad=1}}
                                      END{exit bad || n != 12}' \
            || { paste "$W/full/metrics.jsonl" "$run_dir/metrics.jsonl" | cut -c1-240; fail "losses differ from C = 3 ($run_dir)"; }
    done
    # the context exchange's bytes in metrics.jsonl (rank 0's): per micro-batch and layer a K|V gather in
    # forward and in backward received and a dK|dV reduce-scatter sent, each (C - 1) x this rank's
    # 2 x S_local x Hkv x D floats; absent without a split
    python3 - "$GOLD/tiny_untied_gqa/config.json" "$W/data/dataset.json" "$W/full/metrics.jsonl" "$W/plain/metrics.jsonl" <<'PY' ||
import json, sys
c, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
S, C, accum = d["seq_len"], 3, 2
sl = max((r + 1) * S // (2 * C) - r * S // (2 * C) + (2 * C - r) * S // (2 * C) - (2 * C - 1 - r) * S // (2 * C)
         for r in range(C))
want = accum * c["num_hidden_layers"] * 3 * (C - 1) * 2 * sl * c["num_key_value_heads"] * c["head_dim"] * 4
got = [json.loads(l).get("bytes_context") for l in open(sys.argv[3])]
plain = [json.loads(l).get("bytes_context") for l in open(sys.argv[4])]
if got != [want] * 12 or any(plain):
    sys.exit(f"bytes_context: C = 3 {got[:3]}..., expected {want} each step; without a split {plain[:3]}...")
print(f"bytes_context {want} per step at C = 3, absent without a split")
PY
        fail "bytes_context in metrics.jsonl"
    echo "ok [$CASE]: C = 3 -> C = 1 -> C = 2 equals C = 3 throughout and no split, to 1e-5, 12 steps"
    ;;
context_refusals)  # what context parallelism cannot run is refused at the start on every rank, naming the numbers
    expect_refused() {  # expect_refused NPROCS RUN_DIR PATTERN ARGS...
        local n=$1 dir=$2 pat=$3; shift 3
        timeout 120 "${MPIRUN[@]}" -n "$n" "$ZT" train "${COMMON[@]}" --run-dir "$dir" --steps 2 "$@" >"$dir.out" 2>&1 \
            && { cat "$dir.out"; fail "$* must be refused"; }
        grep -q -- "$pat" "$dir.out" || { cat "$dir.out"; fail "the refusal of $* must say: $pat"; }
        [ ! -e "$dir/run.json" ] || fail "$*: run.json written before the refusal"
    }
    expect_refused 2 "$W/c3w2" "--context-parallel 3 does not divide the shard group of 2 ranks" --context-parallel 3
    expect_refused 4 "$W/c4g2" "--context-parallel 4 does not divide the shard group of 2 ranks" --context-parallel 4 --shard-group 2
    expect_refused 2 "$W/cudnn" "with --attention cudnn: the cuDNN attention takes no positions" --context-parallel 2 --device cuda --attention cudnn
    awk 'BEGIN{srand(5); for(d=0; d<12; d++){ line=""; for(i=0;i<4;i++) line=line int(rand()*90) " "; print line }}' >"$W/short.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 4 -o "$W/short" "$W/short.txt" >/dev/null || fail "pack"
    expect_refused 3 "$W/seq" "blocks of 4 tokens cannot be split into 2 x 3 chunks" --context-parallel 3 --data "$W/short"
    expect_refused 3 "$W/seqnp" "blocks of 4 tokens cannot be split into 2 x 3 chunks" --context-parallel 3 --data "$W/short" --no-preflight
    echo "ok [$CASE]: C not dividing W or G, --attention cudnn, 2C > seq_len refused"
    ;;
qwen3_5_context_parallel)  # Qwen3.5 (q35_mix), global batch 2: C = 3 stopped at 2 -> C = 1 stopped at 4 -> C = 2 to 6
    COMMON=(--init "$GOLD/q35_mix" "${COMMON[@]:2}")
    run 3 "$W/full" --steps 6 --grad-accum 2 --context-parallel 3
    grep -q "context parallelism: groups of 3 consecutive ranks" "$W/full.out" || { cat "$W/full.out"; fail "no context line"; }
    run 1 "$W/plain" --steps 6 --grad-accum 2
    run 3 "$W/part" --steps 6 --grad-accum 2 --context-parallel 3 --debug-signal-at-step 2
    grep -q "stopped: a stop signal" "$W/part.out" || { cat "$W/part.out"; fail "no graceful stop (C=3)"; }
    run 1 "$W/part" --steps 6 --grad-accum 2 --resume --debug-signal-at-step 4
    grep -q "saved by 3 ranks, loaded by 1" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message (C=3 -> 1)"; }
    run 2 "$W/part" --steps 6 --grad-accum 2 --context-parallel 2 --resume
    grep -q "saved by 1 rank, loaded by 2" "$W/part.out" || { cat "$W/part.out"; fail "no reshard message (C=1 -> 2)"; }
    "$CMP" "$W/full/final/model.safetensors" "$W/part/final/model.safetensors" 1e-5 || fail "final weights differ (resumed)"
    "$CMP" "$W/plain/final/model.safetensors" "$W/full/final/model.safetensors" 1e-5 || fail "C = 3 differs from no split"
    for run_dir in "$W/part" "$W/plain"; do  # the uninterrupted losses and grad norms, step by step
        paste -d' ' <(grep -o '"loss":[0-9.e+-]*,"lr":[0-9.e+-]*,"grad_norm":[0-9.e+-]*' "$W/full/metrics.jsonl") \
                    <(grep -o '"loss":[0-9.e+-]*,"lr":[0-9.e+-]*,"grad_norm":[0-9.e+-]*' "$run_dir/metrics.jsonl") \
            | tr ',:"' '   ' | awk '{n++; for(i=2;i<=6;i+=2){a=$i; b=$(i+6); d=a-b; if(d<0)d=-d; if(d>2e-6+1e-5*(a<0?-a:a)) bad=1}}
                                      END{exit bad || n != 6}' \
            || { paste "$W/full/metrics.jsonl" "$run_dir/metrics.jsonl" | cut -c1-240; fail "losses differ from C = 3 ($run_dir)"; }
    done
    # the context exchange's bytes (rank 0's; a gather or reduce-scatter counts (C - 1) x the floats it takes
    # from this rank, an all-to-all the floats this rank receives from the others): per micro-batch the
    # positions gather (1 float per held token); per linear layer, per held token, four all-to-alls: the
    # conv input|b|a of rank 0's channels from each other rank (w_0 = 2 nk_0 Dk + nv_0 Dv + 2 nv_0 floats) and
    # their gradients of each other rank r's channels (w_r), the delta output of each other rank's heads
    # (nv_r Dv) and its gradient of rank 0's (nv_0 Dv); per full layer K/V gathered twice, dK/dV scattered
    python3 - "$GOLD/q35_mix/config.json" "$W/data/dataset.json" "$W/full/metrics.jsonl" "$W/plain/metrics.jsonl" <<'PY' ||
import json, sys
c, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
S, C, accum = d["seq_len"], 3, 2
sl = max((r + 1) * S // (2 * C) - r * S // (2 * C) + (2 * C - r) * S // (2 * C) - (2 * C - 1 - r) * S // (2 * C)
         for r in range(C))
kinds = c["layer_types"]
Kd = c["linear_num_key_heads"] * c["linear_key_head_dim"]
Hv = c["linear_num_value_heads"]
Vd = Hv * c["linear_value_head_dim"]
Dk, Dv, grp = c["linear_key_head_dim"], c["linear_value_head_dim"], Hv // c["linear_num_key_heads"]
def share(r):  # rank r's value heads [v0, v0 + nv), the key heads they read, its width w (model/qwen3_5_context.c)
    v0, nv = r * Hv // C, (r + 1) * Hv // C - r * Hv // C
    nk = (v0 + nv - 1) // grp + 1 - v0 // grp if nv else 0
    return nv, 2 * nk * Dk + nv * Dv + 2 * nv
nv0, w0 = share(0)
per_lin = (C - 1) * (w0 + nv0 * Dv) + sum(share(r)[1] + share(r)[0] * Dv for r in range(1, C))
lin = sum(k == "linear_attention" for k in kinds) * per_lin
full = sum(k == "full_attention" for k in kinds) * 3 * 2 * c["num_key_value_heads"] * c["head_dim"]
want = accum * sl * ((C - 1) * (1 + full) + lin) * 4
got = [json.loads(l).get("bytes_context") for l in open(sys.argv[3])]
plain = [json.loads(l).get("bytes_context") for l in open(sys.argv[4])]
if got != [want] * 6 or any(plain):
    sys.exit(f"bytes_context: C = 3 {got[:3]}..., expected {want} each step; without a split {plain[:3]}...")
print(f"bytes_context {want} per step at C = 3, absent without a split")
PY
        fail "bytes_context in metrics.jsonl"
    echo "ok [$CASE]: Qwen3.5 C = 3 -> C = 1 -> C = 2 equals C = 3 throughout and no split, to 1e-5, 6 steps"
    ;;
qwen3_5_context_refusals)  # Qwen3.5's own rule and the GPU passes' refusal: at the start, every rank, nothing written
    COMMON=(--init "$GOLD/q35_mix" "${COMMON[@]:2}")
    expect_refused() {  # expect_refused NPROCS RUN_DIR PATTERN ARGS...
        local n=$1 dir=$2 pat=$3; shift 3
        timeout 120 "${MPIRUN[@]}" -n "$n" "$ZT" train "${COMMON[@]}" --run-dir "$dir" --steps 2 "$@" >"$dir.out" 2>&1 \
            && { cat "$dir.out"; fail "$* must be refused"; }
        grep -q -- "$pat" "$dir.out" || { cat "$dir.out"; fail "the refusal of $* must say: $pat"; }
        [ ! -e "$dir/run.json" ] || fail "$*: run.json written before the refusal"
    }
    expect_refused 5 "$W/c5" "split their 4 value heads (linear_num_value_heads) over the context group.*C must be at most 4" \
        --context-parallel 5
    expect_refused 5 "$W/c5np" "C must be at most 4" --context-parallel 5 --no-preflight
    expect_refused 4 "$W/gpu" "GPU passes give each rank of the context group whole key heads.*so C must divide 2" \
        --context-parallel 4 --device cuda
    echo "ok [$CASE]: C > value heads and the GPU passes' rule (C divides the key heads) refused, nothing written"
    ;;
config_mismatch)
    run 1 "$W/a" --steps 2
    mkdir -p "$W/m" && sed 's/"intermediate_size": *80/"intermediate_size": 64/' "$GOLD/tiny_untied_gqa/config.json" >"$W/m/config.json"
    timeout 60 "$ZT" train --model "$W/m" --data "$W/data" --run-dir "$W/a" --steps 4 --resume --no-preflight \
        >"$W/out.txt" 2>&1 && fail "a different model config must be refused"
    grep -q "intermediate_size" "$W/out.txt" || { cat "$W/out.txt"; fail "the message must name intermediate_size"; }
    timeout 60 "$ZT" train "${COMMON[@]}" --run-dir "$W/a" --steps 2 --lr 5e-4 --resume >"$W/out2.txt" 2>&1 \
        && fail "a different learning rate must be refused"
    grep -q '"lr"\|lr' "$W/out2.txt" || { cat "$W/out2.txt"; fail "the message must name lr"; }
    echo "ok [$CASE]: $(grep -m1 error "$W/out.txt" | cut -c1-200)"
    ;;
*) fail "unknown case" ;;
esac
