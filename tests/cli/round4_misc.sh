#!/usr/bin/env bash
# Issue 47 ("Nothing trained wrong, round four"), items 5, 6, 7, 11, 12 and 13: what a job says of
# itself under context parallelism, refusals that must come before anything is written, a start-up
# that never completes, packs that yield no training data, and what a deadline abort leaves for the
# watcher. One case per ctest (tests/round4_misc.cmake).
#   round4_misc.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
case "$WORK" in /*) ;; *) WORK="$PWD/$WORK" ;; esac
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
. "$SRC/tests/support/tiny_ids_data.sh"  # GOLD, MPIRUN, fail, $W/data (48 blocks of 16, vocab 96)
COMMON=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --log-every 0 --threads 1)
py() { python3 - "$@"; }

case "$CASE" in
tokens_per_step)
    # W = 4, shard groups of 2, context parallel 2: the two ranks of a context group share each block,
    # so 2 data-parallel ranks x micro-batch 1 x grad-accum 2 x seq 16 = 64 tokens per step (W x ... =
    # 128 counts each block twice). The start line's factors multiply to its total, run.json says the
    # same, and `plan --from-run` takes each rank's share (16 tokens per step) for the run's MFU and
    # plans the run's own sharding (shard group 2, context parallel 2).
    timeout -k 5 120 "${MPIRUN[@]}" -n 4 "$ZT" train "${COMMON[@]}" --run-dir "$W/run" --steps 4 --grad-accum 2 \
        --shard-group 2 --context-parallel 2 --peak-tflops 0.05 --no-save-final >"$W/out.txt" 2>&1 ||
        { cat "$W/out.txt"; fail "training W = 4, G = 2, C = 2"; }
    line=$(grep -m1 "^train: " "$W/out.txt")
    echo "$line"
    echo "$line" | grep -q "2 data-parallel ranks (4 ranks / context parallel 2) x micro-batch 1 x grad-accum 2 x seq 16 = 64 tokens per step" ||
        fail "the start line must count 2 data-parallel ranks and 64 tokens: $line"
    "$ZT" plan --from-run "$W/run" >"$W/plan.txt" 2>&1 || { cat "$W/plan.txt"; fail "plan --from-run"; }
    cat "$W/plan.txt"
    py "$W/run" "$W/plan.txt" "$GOLD/tiny_untied_gqa/config.json" <<'P' || fail "run.json or plan --from-run"
import json, re, sys
run = json.load(open(sys.argv[1] + "/run.json")); out = open(sys.argv[2]).read(); c = json.load(open(sys.argv[3]))
tr, m, S, W = run["train"], run["mesh"], run["data"]["seq_len"], run["world_size"]
assert (m["world"], m["shard_group"], m["replicas"], m["context_parallel"], m["data_parallel_ranks"]) == (4, 2, 2, 2, 2), m
want = W // m["context_parallel"] * tr["micro_batch"] * tr["grad_accum"] * S
assert tr["tokens_per_step"] == want == 64, (tr["tokens_per_step"], want)
assert "4 ranks, shard group 2 x 2 replicas, context parallel 2 (2 data-parallel ranks, each rank 1/2 of each block)" in out
assert re.search(r"seq 16: 16 tokens per rank per step", out), "plan --from-run: each rank's 16 tokens"
assert "predicted against measured at W = 4 (hsdp, as the run trained)" in out
# the planner's MFU: each rank's tokens x the field convention's FLOPs per token / (peak x compute)
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l][1:]
compute = sum(s["compute_s"] for s in lines) / len(lines)
n = c["vocab_size"] * c["hidden_size"] * 2 + c["num_hidden_layers"] * (
    c["hidden_size"] * c["head_dim"] * (2 * c["num_attention_heads"] + 2 * c["num_key_value_heads"])
    + 3 * c["hidden_size"] * c["intermediate_size"] + 2 * c["head_dim"] + 2 * c["hidden_size"]) + c["hidden_size"]
field = 6 * n + 12 * c["num_hidden_layers"] * S * c["hidden_size"]
mfu = 64 / W * field / (run["device"]["peak_tflops_per_rank"] * 1e12 * compute)
got = float(re.search(r"the planner's MFU: ([0-9.]+)%", out).group(1))
assert abs(got - 100 * mfu) <= 0.006 + 1e-3 * 100 * mfu, (got, 100 * mfu)
print("ok: tokens_per_step 64 (2 data-parallel ranks), plan --from-run: 16 tokens per rank, MFU %.2f%% (here %.2f%%)"
      % (got, 100 * mfu))
P
    echo "ok [$CASE]"
    ;;
schedule_below_checkpoint)
    # --allow-new-schedule lets a resume change the run's length, not end it before the steps taken:
    # --steps 3 over a checkpoint of step 10 is refused naming step 10, and nothing the finished run
    # wrote (complete.json, heartbeat.json, run.json, metrics.jsonl) changes.
    A=("$ZT" train "${COMMON[@]}" --run-dir "$W/run")
    "${A[@]}" --steps 10 >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "the first 10 steps"; }
    for f in complete.json heartbeat.json run.json metrics.jsonl; do cp "$W/run/$f" "$W/before.$f"; done
    "${A[@]}" --steps 3 --resume auto --allow-new-schedule >"$W/b.out" 2>&1
    rc=$?
    cat "$W/b.out"
    [ "$rc" -ne 0 ] || fail "--steps 3 over a checkpoint of step 10 exited 0"
    grep -q "the checkpoint is at step 10, past this run's 3 total steps (--steps/--epochs)" "$W/b.out" ||
        fail "the refusal must name the checkpoint's step and the run's"
    for f in complete.json heartbeat.json run.json metrics.jsonl; do
        cmp -s "$W/run/$f" "$W/before.$f" || fail "$f changed"
    done
    "${A[@]}" --steps 3 --resume latest --allow-new-schedule >"$W/c.out" 2>&1 && fail "--resume latest: exit 0"
    grep -q "the checkpoint is at step 10" "$W/c.out" || { cat "$W/c.out"; fail "--resume latest: no refusal"; }
    echo "ok [$CASE]"
    ;;
mpi_start_deadline)
    # Rank 1 starts 40 s late (a stalled node): rank 0 waits inside MPI_Init_thread, before any
    # collective. With --first-collective-timeout 3 it gives up after ~3 s, says a rank never joined,
    # records that in heartbeat.json (the watcher reads FAILED with the reason) and the job ends.
    start=$(date +%s)
    timeout -k 5 60 "${MPIRUN[@]}" -n 1 "$ZT" train "${COMMON[@]}" --run-dir "$W/run" --steps 2 \
        --first-collective-timeout 3 : -n 1 sh -c 'sleep 40; exec "$0" "$@"' "$ZT" train "${COMMON[@]}" \
        --run-dir "$W/run" --steps 2 --first-collective-timeout 3 >"$W/out.txt" 2>&1
    rc=$? elapsed=$(($(date +%s) - start))
    cat "$W/out.txt"
    echo "exit $rc after $elapsed s"
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "the job hung until the outer timeout"
    [ "$rc" -ne 0 ] || fail "the job exited 0"
    [ "$elapsed" -lt 36 ] || fail "took $elapsed s: the 3 s start-up deadline must end it before rank 1 starts (40 s)"
    grep -q "rank 0: MPI did not initialise within 3 s (--first-collective-timeout): a rank of the job never joined" \
        "$W/out.txt" || fail "rank 0 must say MPI did not start within the deadline and a rank never joined"
    py "$W/run/heartbeat.json" <<'P' || fail "heartbeat.json"
import json, sys
h = json.load(open(sys.argv[1]))
assert h["state"] == "failed" and "a rank of the job never joined" in h["error"], h
P
    "$ZT" watch "$W/run" --once >"$W/watch.txt" 2>&1
    wrc=$?
    cat "$W/watch.txt"
    [ "$wrc" -eq 5 ] && grep -q "FAILED" "$W/watch.txt" && grep -q "never joined" "$W/watch.txt" ||
        fail "watch must say FAILED (exit 5, got $wrc) with the reason"
    echo "ok [$CASE]: ended after $elapsed s (exit $rc)"
    ;;
pack_no_blocks)
    # A pack that yields nothing to train on is refused (exit 1, no dataset.json), as a mixture that
    # yields nothing already was: one chat conversation longer than --seq-len; bytes at seq 131,072;
    # --per-rank 2 over one document (rank-00001.u32 would be empty).
    printf '{"messages": [{"role": "user", "content": "%s"}, {"role": "assistant", "content": "ok"}]}\n' \
        "$(printf 'word %.0s' $(seq 1 60))" >"$W/chat.jsonl"
    "$ZT" pack --quiet --input chat --seq-len 32 -o "$W/chat" "$W/chat.jsonl" >"$W/c.out" 2>&1 &&
        { cat "$W/c.out"; fail "chat: exit 0 with no block"; }
    cat "$W/c.out"
    grep -q "no block: every conversation (1) is longer than a block of 32 tokens" "$W/c.out" || fail "chat: message"
    [ ! -e "$W/chat/dataset.json" ] && [ ! -e "$W/chat/data.u32" ] || fail "chat: files left behind"
    printf 'a few bytes of text\n' >"$W/small.txt"
    "$ZT" pack --quiet --input bytes --seq-len 131072 -o "$W/bytes" "$W/small.txt" >"$W/b.out" 2>&1 &&
        { cat "$W/b.out"; fail "bytes: exit 0 with no block"; }
    cat "$W/b.out"
    grep -q "no block: the inputs gave 1 document of 21 tokens in all, fewer than one block of 131072" "$W/b.out" ||
        fail "bytes: message"
    [ ! -e "$W/bytes/dataset.json" ] || fail "bytes: dataset.json written"
    head -3 "$W/docs.txt" | tr '\n' ' ' >"$W/one.txt"  # one document of 48 ids (3 blocks of 16) ...
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 --per-rank 2 -o "$W/pr" "$W/one.txt" \
        >"$W/p.out" 2>&1 && { cat "$W/p.out"; fail "--per-rank 2 over one document: exit 0"; }
    cat "$W/p.out"
    grep -q "pack: --per-rank 2: .*rank-00001.u32 gets no block" "$W/p.out" || fail "per-rank: message"
    [ ! -e "$W/pr/dataset.json" ] && [ ! -e "$W/pr/rank-00000.u32" ] || fail "per-rank: files left behind"
    # ... which one file takes
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/one" "$W/one.txt" >/dev/null ||
        fail "one document of 3 blocks, one file"
    echo "ok [$CASE]"
    ;;
context_seq_rule)
    # 2C <= seq_len, one rule (engine/job_shape.h): plan's GPU model, plan --device cpu, preflight and
    # train refuse C = 8 at seq 10 / C = 2 at seq 3 with the same words (C <= S passed the GPU model).
    msg="--context-parallel 8: blocks of 10 tokens cannot be split into 2 x 8 chunks (each rank holds an early and a late chunk); C must be at most seq_len / 2 = 5"
    for dev in gpu cpu; do
        "$ZT" plan --model "$SRC/examples/qwen3-32b" --world 16 --shard full --seq-len 10 --context-parallel 8 \
            --device $dev >"$W/plan_$dev.txt" 2>&1
        rc=$?
        cat "$W/plan_$dev.txt"
        [ "$rc" -eq 2 ] || fail "plan --device $dev: exit $rc, want 2"
        grep -qF "zerotrain: error: $msg" "$W/plan_$dev.txt" || fail "plan --device $dev: message"
    done
    awk 'BEGIN{srand(3); for(d=0; d<16; d++){ l=""; for(i=0;i<3;i++) l=l int(rand()*90) " "; print l }}' >"$W/s3.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 3 -o "$W/s3" "$W/s3.txt" >/dev/null || fail "pack"
    msg2="--context-parallel 2: blocks of 3 tokens cannot be split into 2 x 2 chunks (each rank holds an early and a late chunk); C must be at most seq_len / 2 = 1"
    "$ZT" plan --model "$GOLD/tiny_untied_gqa" --world 2 --seq-len 3 --context-parallel 2 >"$W/plan2.txt" 2>&1 &&
        fail "plan: C = 2 at seq 3 passed"
    grep -qF -- "$msg2" "$W/plan2.txt" || { cat "$W/plan2.txt"; fail "plan: C = 2 at seq 3"; }
    timeout -k 5 60 "${MPIRUN[@]}" -n 2 "$ZT" preflight --data "$W/s3" --model "$GOLD/tiny_untied_gqa" \
        --context-parallel 2 >"$W/pre.txt" 2>&1 && { cat "$W/pre.txt"; fail "preflight passed"; }
    grep -qF -- "[FAIL] context parallelism: $msg2" "$W/pre.txt" || { cat "$W/pre.txt"; fail "preflight: message"; }
    timeout -k 5 60 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/s3" --run-dir "$W/run" \
        --steps 1 --context-parallel 2 --no-preflight >"$W/train.txt" 2>&1 && { cat "$W/train.txt"; fail "train ran"; }
    grep -qF -- "$msg2" "$W/train.txt" || { cat "$W/train.txt"; fail "train: message"; }
    echo "ok [$CASE]"
    ;;
context_refused_clean)
    # A --context-parallel that cannot run is refused before RUN is created or locked: nothing of
    # a fresh run directory (RUN/lock included) is left behind.
    refuse() {  # NPROCS DIR PATTERN ARGS...
        local n=$1 dir=$2 pat=$3; shift 3
        timeout -k 5 60 "${MPIRUN[@]}" -n "$n" "$ZT" train "${COMMON[@]}" --run-dir "$dir" --steps 1 "$@" \
            >"$dir.out" 2>&1 && { cat "$dir.out"; fail "$* ran"; }
        grep -qF -- "$pat" "$dir.out" || { cat "$dir.out"; fail "$*: no \"$pat\""; }
        [ ! -e "$dir" ] || { ls -la "$dir"; fail "$*: $dir was created (left: $(ls -A "$dir" | tr '\n' ' '))"; }
    }
    refuse 2 "$W/c3" "--context-parallel 3 does not divide the shard group of 2 ranks" --context-parallel 3
    awk 'BEGIN{srand(3); for(d=0; d<16; d++){ l=""; for(i=0;i<3;i++) l=l int(rand()*90) " "; print l }}' >"$W/s3.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 3 -o "$W/s3" "$W/s3.txt" >/dev/null || fail "pack"
    refuse 2 "$W/seq" "blocks of 3 tokens cannot be split into 2 x 2 chunks" --context-parallel 2 --data "$W/s3"
    refuse 2 "$W/seqnp" "blocks of 3 tokens cannot be split into 2 x 2 chunks" --context-parallel 2 --data "$W/s3" \
        --no-preflight
    refuse 2 "$W/cudnn" "with --attention cudnn: the cuDNN attention takes no positions" --context-parallel 2 \
        --device cuda --attention cudnn
    echo "ok [$CASE]"
    ;;
help_families)
    # the help names every family this build trains, from their tables (Qwen3.5 is one too)
    "$ZT" train --help >"$W/train.txt" 2>&1 || fail "train --help"
    "$ZT" --help >"$W/main.txt" 2>&1 || fail "--help"
    head -5 "$W/train.txt" "$W/main.txt"
    grep -q "Trains a Qwen3 or Qwen3.5 model" "$W/train.txt" || fail "train --help must name Qwen3 and Qwen3.5"
    grep -q "trainer for Qwen3 and Qwen3.5 models" "$W/main.txt" || fail "--help must name Qwen3 and Qwen3.5"
    ! grep -q "Qwen3 dense" "$W/train.txt" "$W/main.txt" || fail "a help text still says only Qwen3 dense"
    echo "ok [$CASE]"
    ;;
abort_heartbeat)
    # Rank 1 is stopped (SIGSTOP) mid-run: rank 0 hits the 3 s collective deadline and aborts the
    # job (exit 3). heartbeat.json then says "aborted" by rank 0 with the deadline's report and rank
    # 1's tick stopped by then (it said "running"), and `watch`'s post-mortem says HUNG and names
    # rank 1 as the rank the others waited for (not whichever tick happens to be oldest: the launcher
    # resumes a stopped rank to end it, so its tick is the newest once the job is gone).
    timeout -k 5 120 "${MPIRUN[@]}" -n 2 "$ZT" train "${COMMON[@]}" --run-dir "$W/run" --steps 1000000 \
        --collective-timeout 3 --save-timeout 3 --first-collective-timeout 60 --alive-interval 0.5 --no-save-final \
        >"$W/out.txt" 2>&1 &
    job=$!
    for i in $(seq 1 600); do  # past the first steps (the 3 s deadline applies once warm)
        s=$(sed -n 's/.*"step": \([0-9]*\).*/\1/p' "$W/run/heartbeat.json" 2>/dev/null)
        [ -n "$s" ] && [ "$s" -ge 3 ] && [ -f "$W/run/ranks/rank-00001.alive" ] && break
        sleep 0.1
    done
    pid=$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$W/run/ranks/rank-00001.alive")
    [ -n "$pid" ] || { kill $job; fail "no pid of rank 1"; }
    kill -STOP "$pid"
    wait $job
    rc=$?
    kill -KILL "$pid" 2>/dev/null  # what the launcher could not end while it was stopped
    cat "$W/out.txt" | grep -v "^zerotrain: rank [01]: \(recently\|rank\)" | tail -20
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "the job hung"
    [ "$rc" -ne 0 ] || fail "exit 0"
    grep -q "rank 0: collective deadline exceeded after 3 s" "$W/out.txt" || fail "rank 0 must report its deadline"
    py "$W/run/heartbeat.json" <<'P' || fail "heartbeat.json"
import json, sys
h = json.load(open(sys.argv[1]))
assert h["state"] == "aborted" and h["stopped_by_rank"] == 0 and h["ranks_not_ticking"] == [1], h
assert h["error"].startswith("rank 0: collective deadline exceeded after 3 s") and "exit code 3" in h["error"], h
assert h["step"] >= 3 and h["run_id"], h
P
    "$ZT" watch "$W/run" --once --alive-interval 0.5 >"$W/watch.txt" 2>&1
    wrc=$?
    cat "$W/watch.txt"
    [ "$wrc" -eq 4 ] || fail "watch: exit $wrc, want 4 (HUNG)"
    grep -q "HUNG: heartbeat.json: rank 0 hit the collective deadline and aborted the job after step" "$W/watch.txt" ||
        fail "watch: the reason"
    grep -q "rank 0 hit the collective deadline and aborted the job; rank 1 had stopped ticking by then" \
        "$W/watch.txt" || fail "watch: the post-mortem must name rank 1"
    "$ZT" report "$W/run" >"$W/report.txt" 2>&1 || { cat "$W/report.txt"; fail "report"; }
    cat "$W/report.txt"
    grep -q "state hung;.* rank 0 hit the collective deadline and aborted the job; rank 1 had stopped ticking" \
        "$W/report.txt" || fail "report: the state and the diagnosis"
    grep -q "heartbeat.json: rank 0 hit the collective deadline and aborted the job after step" "$W/run/report.html" ||
        fail "report.html: the reason"
    echo "ok [$CASE]"
    ;;
*) fail "unknown case" ;;
esac
