#!/usr/bin/env bash
# `zerotrain train --device cuda` end to end on the CPU: zerotrain_cudaemu is zerotrain
# built with its real GPU code — the CUDA kernels, the cuBLASLt mapping, the GPU engine
# (engine/fsdp_cuda.c) and the NCCL process group (engine/comm_nccl.c) — on the CPU
# execution of the CUDA programming model (tests/cudaemu: asynchronous streams, emulated
# cuBLASLt and NCCL, the happens-before checker). It runs the real training loop's cuda
# wiring: the device choice, the second comm, --init into the host copies and up to the
# device, to_host before every checkpoint, resume back onto the device, final/ export.
#   cudaemu_cli.sh ZEROTRAIN_CUDAEMU ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZH=$1 ZT=$2 SRC=$3 WORK=$4 CASE=$5
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
losses() { sed 's/.*"loss":\([0-9.]*\).*/\1/' "$1"; }
# compare A B TOL: two loss columns must agree to TOL relative on every step
compare() {
    paste -d' ' <(losses "$1") <(losses "$2") >"$W/losses.txt"
    cat "$W/losses.txt"
    [ "$(wc -l <"$W/losses.txt")" -eq "$4" ] || fail "expected $4 steps in each run"
    awk -v t="$3" '{d=$1-$2; if(d<0)d=-d; if(!(d <= t*$2)){print "step " NR ": " $1 " vs " $2; bad=1}} END{exit bad}' \
        "$W/losses.txt" || fail "loss trajectories differ by more than $3 relative"
}

awk 'BEGIN{srand(5); for(d=0; d<48; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
# --no-preflight: the gate's device check asks NVML about a real GPU, which the emulation is not
common=(--init "$GOLD/tiny_untied_gqa" --data "$W/data" --lr 1e-3 --threads 1 --log-every 1 --no-preflight)

# dataset_digest STEP_DIR: "dataset sha256" of every dataset's bytes (the ranges inspect names)
dataset_digest() {
    "$ZT" inspect "$1" | sed -nE 's|^  (/units/[0-9]+/[a-z_]+) .*file bytes \[([0-9]+), ([0-9]+)\).*|\1 \2 \3|p' |
        while read -r ds a b; do
            echo "$ds $(tail -c +$((a + 1)) "$1/ckpt.h5" | head -c $((b - a)) | sha256sum | cut -c1-16)"
        done
}

# Qwen3.5 (the q35_* cases): tests/golden/q35_mix (DeltaNet, DeltaNet, full attention, DeltaNet;
# head_dim 16), the released layouts with carried tensors (qwen3_5_text_mtp, qwen3_5_vlm), and
# q35_mix's config with head_dim 256 (Qwen3.5-27B's attention head) initialised from its config.
q35=(--data "$W/data" --lr 1e-3 --threads 1 --log-every 1 --no-preflight)
# same_tensors INPUT_DIR EXPORT_DIR: every tensor of the input's model.safetensors is in the export
# with the same dtype, shape and bytes, and nothing else (tests/cli/qwen3_5_carry.sh's check)
same_tensors() {
    python3 - "$1" "$2" <<'EOF' || fail "$2 differs from $1"
import json, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    head.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()}
a, b = tensors(sys.argv[1] + "/model.safetensors"), tensors(sys.argv[2] + "/model.safetensors")
bad = [k for k in a if k not in b or a[k] != b[k]] + [k for k in b if k not in a]
carried = [k for k in a if k.startswith(("mtp.", "model.visual."))]
print(f"{sys.argv[2]}: {len(b)} tensors ({len(carried)} carried), {len(bad)} differ{': ' + ', '.join(bad[:5]) if bad else ''}")
sys.exit(1 if bad or not carried else 0)
EOF
}
# q35_three NAME_OF_CASE_DIR STEPS MODEL_FLAGS...: the GPU engine with the default attention (gpu),
# with --attention tiled (tiled), and the fp32 CPU engine (cpu), each into $W/<name>
q35_three() {
    local steps=$1
    shift
    for name in gpu tiled cpu; do
        local bin=$ZH dev=(--device cuda)
        [ $name = tiled ] && dev=(--device cuda --attention tiled)
        [ $name = cpu ] && bin=$ZT dev=(--device cpu)
        "$bin" train "${q35[@]}" "$@" --steps "$steps" --grad-accum 2 "${dev[@]}" --run-dir "$W/$name" \
            >"$W/$name.txt" 2>&1 || { cat "$W/$name.txt"; fail "$name run failed"; }
    done
    grep -q "cuda backend: cudaemu.*GEMM attention (auto)" "$W/gpu.txt" || { cat "$W/gpu.txt"; fail "auto: not the GEMM attention"; }
    grep -q "cuda backend: cudaemu.*tiled attention" "$W/tiled.txt" || { cat "$W/tiled.txt"; fail "not the tiled attention"; }
    compare "$W/gpu/metrics.jsonl" "$W/cpu/metrics.jsonl" 3e-2 "$steps"
    compare "$W/tiled/metrics.jsonl" "$W/cpu/metrics.jsonl" 3e-2 "$steps"
}

case "$CASE" in
q35_w1_matches_cpu)
    # the GPU engine (emulated) with Qwen3.5's GPU passes vs the fp32 CPU engine, same data and
    # weights: the default attention (auto: GEMM here, where no cuDNN is built) and --attention tiled
    q35_three 6 --init "$GOLD/q35_mix"
    grep -q "model: Qwen3.5 4 layers (3 linear + 1 full)" "$W/gpu.txt" || { cat "$W/gpu.txt"; fail "no Qwen3.5 model line"; }
    for f in final/model.safetensors final/config.json complete.json; do
        [ -f "$W/gpu/$f" ] || fail "no $f from the cuda run"
    done
    echo "ok [$CASE]"
    ;;
q35_hd256_matches_cpu)
    # head_dim 256 with partial rotary 0.25 (rotary_dim 64), as Qwen3.5-27B's full-attention layers:
    # q35_mix's config, weights initialised from it (the same init streams on both backends); the
    # default attention and the tiled one (its 256-wide kernels) on the GPU engine vs the CPU engine
    mkdir -p "$W/hd256"
    sed 's/"head_dim": 16,/"head_dim": 256,/' "$GOLD/q35_mix/config.json" >"$W/hd256/config.json"
    grep -q '"head_dim": 256,' "$W/hd256/config.json" || fail "could not write the head_dim 256 config"
    # blocks of 80 tokens: the tiled kernels' second 64-row tile, and the delta rule's second chunk
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 80 -o "$W/data80" "$W/docs.txt" >/dev/null || fail "pack 80"
    q35_three 4 --model "$W/hd256/config.json" --data "$W/data80"
    grep -q "head_dim 256" "$W/gpu.txt" || { cat "$W/gpu.txt"; fail "the model line does not say head_dim 256"; }
    echo "ok [$CASE]"
    ;;
q35_w2_matches_w1)
    # Qwen3.5 on the GPU engine sharded over 2 ranks vs 1 rank, same global batch; --recompute exact
    t=(--init "$GOLD/q35_mix" "${q35[@]}" --steps 6 --device cuda)
    "$ZH" train "${t[@]}" --grad-accum 2 --run-dir "$W/w1" >"$W/w1.txt" 2>&1 || { cat "$W/w1.txt"; fail "W=1 failed"; }
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${t[@]}" --grad-accum 1 --run-dir "$W/w2" >"$W/w2.txt" 2>&1 \
        || { cat "$W/w2.txt"; fail "W=2 failed"; }
    compare "$W/w2/metrics.jsonl" "$W/w1/metrics.jsonl" 3e-3 6
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${t[@]}" --grad-accum 1 --recompute --run-dir "$W/w2r" >"$W/w2r.txt" 2>&1 \
        || { cat "$W/w2r.txt"; fail "W=2 --recompute failed"; }
    grep -q "activation recomputation" "$W/w2r.txt" || { cat "$W/w2r.txt"; fail "--recompute not reported"; }
    diff <(losses "$W/w2/metrics.jsonl") <(losses "$W/w2r/metrics.jsonl") || fail "--recompute changed the losses"
    echo "ok [$CASE]"
    ;;
q35_resume_exact)
    # 2 ranks, Qwen3.5 with a carried MTP head (qwen3_5_text_mtp): uninterrupted 6 steps vs SIGUSR1
    # after step 3 + --resume to 6: identical losses; RUN/carry written once and kept by the resume
    t=(--init "$GOLD/qwen3_5_text_mtp" "${q35[@]}" --steps 6 --device cuda)
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${t[@]}" --run-dir "$W/a" >"$W/a.txt" 2>&1 \
        || { cat "$W/a.txt"; fail "uninterrupted run failed"; }
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${t[@]}" --run-dir "$W/b" --debug-signal-at-step 3 >"$W/b1.txt" 2>&1 \
        || { cat "$W/b1.txt"; fail "interrupted run failed"; }
    grep -q "stopped" "$W/b1.txt" || { cat "$W/b1.txt"; fail "the signal did not stop the run"; }
    grep -q "init: carried [0-9]* tensors" "$W/b1.txt" || { cat "$W/b1.txt"; fail "no carry reported"; }
    [ "$(wc -l <"$W/b/metrics.jsonl")" -eq 3 ] || fail "the interrupted run should have logged 3 steps"
    before=$(stat -c '%i %Y' "$W/b/carry/carried.safetensors") || fail "no RUN/carry"
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${t[@]}" --run-dir "$W/b" --resume latest >"$W/b2.txt" 2>&1 \
        || { cat "$W/b2.txt"; fail "resume failed"; }
    grep -q "resume: .*step 3" "$W/b2.txt" || { cat "$W/b2.txt"; fail "did not resume from step 3"; }
    diff <(losses "$W/a/metrics.jsonl") <(losses "$W/b/metrics.jsonl") \
        || fail "resumed losses differ from the uninterrupted run's"
    [ "$(stat -c '%i %Y' "$W/b/carry/carried.safetensors")" = "$before" ] || fail "the resume rewrote RUN/carry"
    [ -f "$W/b/final/model.safetensors" ] || fail "no final/ after the resume"
    echo "ok [$CASE]: steps 1-6 identical after stop + resume"
    ;;
q35_init_carry)
    # --init of a Qwen3_5ForConditionalGeneration directory (text weights under model.language_model.,
    # the vision tower and the MTP head carried) onto the GPU engine at W = 2, one step at lr 0: the
    # fp32 RUN/final holds every input tensor byte for byte (the text weights through the device and
    # back), config.json verbatim
    command -v python3 >/dev/null || { echo "SKIP [$CASE]: no python3 to read the safetensors headers"; exit 77; }
    in="$GOLD/qwen3_5_vlm"
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train --init "$in" "${q35[@]}" --lr 0 --warmup 0 --steps 1 --device cuda \
        --save-dtype fp32 --run-dir "$W/run" >"$W/run.txt" 2>&1 || { cat "$W/run.txt"; fail "train"; }
    grep -q "cuda backend: cudaemu" "$W/run.txt" || { cat "$W/run.txt"; fail "the run did not report the cuda backend"; }
    grep -q "init: carried [0-9]* tensors" "$W/run.txt" || { cat "$W/run.txt"; fail "no carry reported"; }
    cmp "$in/config.json" "$W/run/carry/config.json" || fail "RUN/carry/config.json is not the input's"
    cmp "$in/config.json" "$W/run/final/config.json" || fail "RUN/final/config.json is not the input's"
    same_tensors "$in" "$W/run/final"
    echo "ok [$CASE]"
    ;;
async_identical)
    # --async-save on the GPU engine (its state to the host copies, then the snapshot): the
    # same datasets as the synchronous save of the same W=2 run, the same losses
    # The async run's device-to-host snapshot copy starts 1 s late (ZT_CKPT_DEBUG_COPY_DELAY_S): a
    # writer that did not wait for it reads the host copies before the copy, which the CPU execution
    # of CUDA reports (mutation C4); without the delay the next step's collectives taught the host
    # that the copy was done before the writer read, and C4 survived.
    for mode in sync async; do
        extra=() delay=(); [ $mode = async ] && extra=(--async-save) delay=(-x ZT_CKPT_DEBUG_COPY_DELAY_S=1)
        timeout 600 "${MPIRUN[@]}" -n 2 "${delay[@]}" "$ZH" train "${common[@]}" --steps 4 --save-every 2 --keep-last 0 --device cuda \
            --run-dir "$W/$mode" "${extra[@]}" >"$W/$mode.txt" 2>&1 || { cat "$W/$mode.txt"; fail "$mode run failed"; }
    done
    grep -q "checkpoint: step 2 snapshot" "$W/async.txt" || { cat "$W/async.txt"; fail "step 2 was not saved in the background"; }
    grep -q "checkpoint: step 2 -> .*written in the background" "$W/async.txt" || fail "step 2 not committed"
    for s in 00000002 00000004; do
        a=$(dataset_digest "$W/sync/checkpoints/step-$s") b=$(dataset_digest "$W/async/checkpoints/step-$s")
        [ -n "$a" ] || fail "no datasets listed"
        [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") | head; fail "step $s: datasets differ between sync and async"; }
    done
    [ "$(dataset_digest "$W/sync/checkpoints/step-00000002")" != "$(dataset_digest "$W/sync/checkpoints/step-00000004")" ] \
        || fail "steps 2 and 4 identical: the comparison proves nothing"
    diff <(grep -v ckpt_event "$W/sync/metrics.jsonl" | cut -d, -f1-3) <(grep -v ckpt_event "$W/async/metrics.jsonl" | cut -d, -f1-3) \
        || fail "losses differ"
    echo "ok [$CASE]: cuda engine (emulated), W=2: steps 2 and 4 byte-identical between sync and async saves"
    ;;
w1_matches_cpu)
    # bf16 GPU engine (emulated) vs the fp32 CPU engine, same data and weights
    "$ZH" train "${common[@]}" --steps 6 --grad-accum 2 --device cuda --run-dir "$W/gpu" >"$W/gpu.txt" 2>&1 \
        || { cat "$W/gpu.txt"; fail "cuda run failed"; }
    grep -q "cuda backend: cudaemu" "$W/gpu.txt" \
        || { cat "$W/gpu.txt"; fail "the run did not report the cuda backend"; }
    "$ZT" train "${common[@]}" --steps 6 --grad-accum 2 --device cpu --run-dir "$W/cpu" >"$W/cpu.txt" 2>&1 \
        || { cat "$W/cpu.txt"; fail "cpu run failed"; }
    compare "$W/gpu/metrics.jsonl" "$W/cpu/metrics.jsonl" 3e-2 6
    [ -f "$W/gpu/final/model.safetensors" ] || fail "no final/ export from the cuda run"
    [ -f "$W/gpu/complete.json" ] || fail "no complete.json from the cuda run"
    echo "ok [$CASE]"
    ;;
w4_hsdp_matches_w1)
    # hybrid sharding 2 x 2 on the GPU engine vs 1 rank, same global batch; the final checkpoint
    # goes through the replicas' checksum agreement; keep-gathered on top: the same numbers exactly
    "$ZH" train "${common[@]}" --steps 4 --grad-accum 4 --device cuda --run-dir "$W/w1" >"$W/w1.txt" 2>&1 \
        || { cat "$W/w1.txt"; fail "W=1 failed"; }
    timeout 300 "${MPIRUN[@]}" -n 4 "$ZH" train "${common[@]}" --steps 4 --grad-accum 1 --device cuda --shard-group 2 \
        --run-dir "$W/h" >"$W/h.txt" 2>&1 || { cat "$W/h.txt"; fail "W=4 --shard-group 2 failed"; }
    grep -q "sharding: hybrid over groups of 2 ranks x 2 replicas" "$W/h.txt" || { cat "$W/h.txt"; fail "no strategy line"; }
    [ -f "$W/h/complete.json" ] || fail "no complete.json (final checkpoint) from the hybrid run"
    compare "$W/h/metrics.jsonl" "$W/w1/metrics.jsonl" 3e-3 4
    timeout 300 "${MPIRUN[@]}" -n 4 "$ZH" train "${common[@]}" --steps 4 --grad-accum 1 --device cuda --shard-group 2 \
        --reshard-after-forward false --run-dir "$W/hk" >"$W/hk.txt" 2>&1 || { cat "$W/hk.txt"; fail "keep-gathered failed"; }
    diff <(losses "$W/h/metrics.jsonl") <(losses "$W/hk/metrics.jsonl") || fail "keep-gathered changed the losses"
    echo "ok [$CASE]"
    ;;
w2_matches_w1)
    # the GPU engine sharded over 2 ranks vs 1 rank, same global batch
    "$ZH" train "${common[@]}" --steps 6 --grad-accum 2 --device cuda --run-dir "$W/w1" >"$W/w1.txt" 2>&1 \
        || { cat "$W/w1.txt"; fail "W=1 failed"; }
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${common[@]}" --steps 6 --grad-accum 1 --device cuda \
        --run-dir "$W/w2" >"$W/w2.txt" 2>&1 || { cat "$W/w2.txt"; fail "W=2 failed"; }
    compare "$W/w2/metrics.jsonl" "$W/w1/metrics.jsonl" 3e-3 6
    # --recompute: the same numbers exactly
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${common[@]}" --steps 6 --grad-accum 1 --device cuda --recompute \
        --run-dir "$W/w2r" >"$W/w2r.txt" 2>&1 || { cat "$W/w2r.txt"; fail "W=2 --recompute failed"; }
    grep -q "activation recomputation" "$W/w2r.txt" || { cat "$W/w2r.txt"; fail "--recompute not reported"; }
    diff <(losses "$W/w2/metrics.jsonl") <(losses "$W/w2r/metrics.jsonl") || fail "--recompute changed the losses"
    echo "ok [$CASE]"
    ;;
cp2_matches)
    # --context-parallel 2 on the GPU engine (2 ranks share each block, zig-zag chunks, K/V exchanged
    # in every layer) vs --device cuda on 1 rank without the split (same global batch: one data-
    # parallel group, grad-accum 2), and vs the fp32 cpu engine at the same split
    "$ZH" train "${common[@]}" --steps 6 --grad-accum 2 --device cuda --run-dir "$W/w1" >"$W/w1.txt" 2>&1 \
        || { cat "$W/w1.txt"; fail "W=1 failed"; }
    timeout 300 "${MPIRUN[@]}" -n 2 "$ZH" train "${common[@]}" --steps 6 --grad-accum 2 --device cuda \
        --context-parallel 2 --run-dir "$W/cp" >"$W/cp.txt" 2>&1 || { cat "$W/cp.txt"; fail "cuda --context-parallel 2 failed"; }
    grep -q "cuda backend: cudaemu" "$W/cp.txt" || { cat "$W/cp.txt"; fail "the run did not report the cuda backend"; }
    grep -q "context parallelism: groups of 2 consecutive ranks" "$W/cp.txt" || { cat "$W/cp.txt"; fail "no split reported"; }
    compare "$W/cp/metrics.jsonl" "$W/w1/metrics.jsonl" 3e-3 6
    timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train "${common[@]}" --steps 6 --grad-accum 2 --device cpu \
        --context-parallel 2 --run-dir "$W/cpu" >"$W/cpu.txt" 2>&1 || { cat "$W/cpu.txt"; fail "cpu --context-parallel 2 failed"; }
    compare "$W/cp/metrics.jsonl" "$W/cpu/metrics.jsonl" 3e-2 6
    [ -f "$W/cp/complete.json" ] || fail "no complete.json (final checkpoint) from the split run"
    echo "ok [$CASE]: cuda --context-parallel 2 = cuda W=1 (3e-3) = cpu --context-parallel 2 (3e-2)"
    ;;
resume_exact)
    # 2 ranks: uninterrupted 6 steps vs SIGUSR1 after step 3 (checkpoint from the device
    # state, stop) + --resume to 6: identical losses on steps 4..6
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${common[@]}" --steps 6 --device cuda --run-dir "$W/a" \
        >"$W/a.txt" 2>&1 || { cat "$W/a.txt"; fail "uninterrupted run failed"; }
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${common[@]}" --steps 6 --device cuda --run-dir "$W/b" \
        --debug-signal-at-step 3 >"$W/b1.txt" 2>&1 || { cat "$W/b1.txt"; fail "interrupted run failed"; }
    grep -q "stopped" "$W/b1.txt" || { cat "$W/b1.txt"; fail "the signal did not stop the run"; }
    [ "$(wc -l <"$W/b/metrics.jsonl")" -eq 3 ] || fail "the interrupted run should have logged 3 steps"
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZH" train "${common[@]}" --steps 6 --device cuda --run-dir "$W/b" \
        --resume latest >"$W/b2.txt" 2>&1 || { cat "$W/b2.txt"; fail "resume failed"; }
    grep -q "resume: .*step 3" "$W/b2.txt" || { cat "$W/b2.txt"; fail "did not resume from step 3"; }
    diff <(losses "$W/a/metrics.jsonl") <(losses "$W/b/metrics.jsonl") \
        || fail "resumed losses differ from the uninterrupted run's"
    echo "ok [$CASE]: steps 1-6 identical after stop + resume"
    ;;
*) fail "unknown case" ;;
esac
