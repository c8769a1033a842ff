#!/usr/bin/env bash
# CLI tests of `zerotrain train`: one case per invocation, so ctest reports each.
#   train_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
# Each case exits 0 only if the trainer behaved as required (including failing
# with the right message on bad input).
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
fail() { echo "FAIL [$CASE]: $*"; exit 1; }

# expect_error CMD...: the command must exit non-zero and print every pattern in $PATTERNS.
expect_error() {
    "$@" >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "command succeeded but should have failed: $*"; }
    for p in "${PATTERNS[@]}"; do
        grep -q -- "$p" "$W/out.txt" || { cat "$W/out.txt"; fail "error output lacks '$p'"; }
    done
    echo "ok [$CASE]: $(grep -m1 'error' "$W/out.txt")"
}

small_data() {  # 96-token-vocab ids data for the golden tiny configs
    python_free_ids() {
        local n=$1 seed=$2
        awk -v n="$n" -v s="$seed" 'BEGIN{srand(s); for(d=0; d<n; d++){ line=""; for(i=0;i<40;i++) line=line int(rand()*80) " "; print line }}'
    }
    python_free_ids 64 7 >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 80 --eos 2 --seq-len 12 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
}

case "$CASE" in
loss_falls)
    # The demo path in miniature: bytes of English text, the tiny example model.
    head -c 60000 "$SRC/examples/data/python-reference.txt" >"$W/text.txt"
    "$ZT" pack --quiet --input bytes --seq-len 32 -o "$W/data" "$W/text.txt" >/dev/null || fail "pack"
    "$ZT" train --model "$SRC/examples/tiny-qwen3" --data "$W/data" --run-dir "$W/run" --steps 40 \
        --micro-batch 4 --grad-accum 2 --lr 3e-3 --warmup 5 --threads 2 --log-every 10 >"$W/out.txt" 2>&1 \
        || { cat "$W/out.txt"; fail "train exited non-zero"; }
    cat "$W/out.txt"
    [ "$(wc -l <"$W/run/metrics.jsonl")" -eq 40 ] || fail "metrics.jsonl should have 40 lines"
    first=$(head -1 "$W/run/metrics.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
    last=$(tail -1 "$W/run/metrics.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
    awk -v f="$first" -v l="$last" 'BEGIN{exit !(f > 5.0 && l < f - 1.5)}' \
        || fail "loss did not fall enough: first $first last $last (need first > 5, last < first - 1.5)"
    grep -q '"run_id"' "$W/run/run.json" || fail "run.json lacks run_id"
    [ -s "$W/run/final/model.safetensors" ] && [ -s "$W/run/final/config.json" ] || fail "final/ not written"
    echo "ok [$CASE]: loss $first -> $last"
    ;;
init_roundtrip)
    # Start from HF weights (sharded, tied), train 0 updates worth? No: train 2 steps,
    # export fp32, and the export must load back as --init of another run.
    small_data
    "$ZT" train --init "$GOLD/tiny_tied" --data "$W/data" --run-dir "$W/run" --steps 2 --save-dtype fp32 \
        --threads 1 >"$W/out.txt" 2>&1 || { cat "$W/out.txt"; fail "train from HF weights"; }
    grep -q "loaded Hugging Face weights" "$W/out.txt" || fail "no init message"
    "$ZT" train --init "$W/run/final" --data "$W/data" --run-dir "$W/run2" --steps 1 --threads 1 \
        >"$W/out2.txt" 2>&1 || { cat "$W/out2.txt"; fail "train from exported weights"; }
    echo "ok [$CASE]"
    ;;
run_dir_exists)
    small_data
    "$ZT" train --init "$GOLD/tiny_tied" --data "$W/data" --run-dir "$W/run" --steps 1 --threads 1 >/dev/null 2>&1 || fail "first run"
    PATTERNS=("run.json already exists" "--overwrite")
    expect_error "$ZT" train --init "$GOLD/tiny_tied" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
truncated_safetensors)
    small_data
    mkdir -p "$W/model" && cp "$GOLD/tiny_untied_gqa/config.json" "$W/model/"
    head -c 30000 "$GOLD/tiny_untied_gqa/model.safetensors" >"$W/model/model.safetensors"
    PATTERNS=("model.safetensors" "truncated")
    expect_error "$ZT" train --init "$W/model" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
corrupt_header)
    small_data
    mkdir -p "$W/model" && cp "$GOLD/tiny_untied_gqa/config.json" "$W/model/"
    printf '\x0f\x00\x00\x00\x00\x00\x00\x00{"a": nonsense}' >"$W/model/model.safetensors"
    PATTERNS=("model.safetensors" "JSON")
    expect_error "$ZT" train --init "$W/model" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
wrong_shapes)
    # tiny_tied config with tiny_untied_gqa weights: every shape differs.
    small_data
    mkdir -p "$W/model" && cp "$GOLD/tiny_tied/config.json" "$W/model/"
    cp "$GOLD/tiny_untied_gqa/model.safetensors" "$W/model/"
    PATTERNS=("has shape" "the config needs")
    expect_error "$ZT" train --init "$W/model" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
missing_shard)
    small_data
    mkdir -p "$W/model" && cp "$GOLD/tiny_tied/"*.json "$W/model/" && cp "$GOLD/tiny_tied/model-00001-of-00002.safetensors" "$W/model/"
    PATTERNS=("model-00002-of-00002.safetensors" "does not exist")
    expect_error "$ZT" train --init "$W/model" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
token_out_of_range)
    # Id 500 in a dataset whose header claims vocab 96, with a model of vocab 96.
    printf '1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n5 6 7 8 9 10 11 12 500 14 15 16 17 18 19 20\n' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 1000 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    # Claim vocab 96 in dataset.json so the per-token scan (not the header check) must catch id 500.
    sed -i -E 's/"vocab_size":[[:space:]]*1000/"vocab_size": 96/' "$W/data/dataset.json"
    grep -q '"vocab_size": 96' "$W/data/dataset.json" || fail "could not edit dataset.json"
    PATTERNS=("data.u32" "block 1" "position 8" "500")
    expect_error "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
truncated_blocks)
    small_data
    truncate -s -6 "$W/data/data.u32"
    PATTERNS=("data.u32" "truncated")
    expect_error "$ZT" train --init "$GOLD/tiny_tied" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
missing_dataset_json)
    small_data
    rm "$W/data/dataset.json"
    PATTERNS=("dataset.json" "zerotrain pack")
    expect_error "$ZT" train --init "$GOLD/tiny_tied" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
yarn)
    # YaRN RoPE scaling (issue 37) through the trainer: the config is kept in run.json, the
    # checkpoint (inspect) and RUN/final/config.json; a resume with plain RoPE is refused by
    # name; the gate measures seq_len against the scaled range.
    small_data
    "$ZT" train --init "$GOLD/tiny_yarn_params" --data "$W/data" --run-dir "$W/run" --steps 2 --threads 1 \
        --log-every 0 >"$W/out.txt" 2>&1 || { cat "$W/out.txt"; fail "training a YaRN model"; }
    tr -d ' \t\n' <"$W/run/run.json" >"$W/run.flat"
    grep -q '"rope_scaling":{"rope_type":"yarn","factor":8,"original_max_position_embeddings":2048,"beta_fast":16,"beta_slow":2,"mscale":1,"mscale_all_dim":0.5,"truncate":false}' "$W/run.flat" ||
        { cat "$W/run/run.json"; fail "run.json lacks the YaRN settings"; }
    tr -d ' \t\n' <"$W/run/final/config.json" | grep -q '"rope_scaling":{"rope_type":"yarn","factor":8,' ||
        fail "RUN/final/config.json lacks rope_scaling"
    "$ZT" inspect "$W/run" >"$W/inspect.txt" 2>&1 || { cat "$W/inspect.txt"; fail "inspect"; }
    grep -q "rope scaling: YaRN, factor 8, original_max_position_embeddings 2048 (16384 positions)" "$W/inspect.txt" ||
        { cat "$W/inspect.txt"; fail "inspect must show the scaling"; }
    # the exported directory trains again with the same config (the export round-trips it)
    "$ZT" train --init "$W/run/final" --data "$W/data" --run-dir "$W/run2" --steps 1 --threads 1 --log-every 0 \
        >"$W/out2.txt" 2>&1 || { cat "$W/out2.txt"; fail "training from the exported YaRN model"; }
    tr -d ' \t\n' <"$W/run2/run.json" | grep -q '"rope_scaling":{"rope_type":"yarn","factor":8,"original_max_position_embeddings":2048,"beta_fast":16,"beta_slow":2,"mscale":1,"mscale_all_dim":0.5,"truncate":false}' ||
        fail "the exported config lost a YaRN field"
    # a resume whose config has plain RoPE: refused naming the difference
    mkdir -p "$W/plain"
    sed -e '/"rope_parameters"/,/}/d' "$GOLD/tiny_yarn_params/config.json" |
        sed 's/"rms_norm_eps": 1e-06,/"rms_norm_eps": 1e-06, "rope_theta": 1000000.0,/' >"$W/plain/config.json"
    PATTERNS=("checkpoint has YaRN RoPE, the run has plain")
    expect_error "$ZT" train --model "$W/plain/config.json" --data "$W/data" --run-dir "$W/run" --steps 4 --resume \
        --allow-new-schedule --threads 1
    # the gate: seq_len 12 against a range of 8 plain positions fails, 8 x factor 4 = 32 passes
    printf '{"model_type": "qwen3", "vocab_size": 80, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 8, "max_position_embeddings": 8, "rope_theta": 10000.0%s}\n' \
        '' >"$W/p8.json"
    printf '{"model_type": "qwen3", "vocab_size": 80, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 8, "max_position_embeddings": 8, "rope_theta": 10000.0%s}\n' \
        ', "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}' >"$W/y8.json"
    "$ZT" preflight --data "$W/data" --model "$W/p8.json" >"$W/p8.txt" 2>&1 && { cat "$W/p8.txt"; fail "seq 12 > 8 passed"; }
    grep -q "seq_len 12 exceeds the model's max_position_embeddings 8" "$W/p8.txt" || { cat "$W/p8.txt"; fail "p8 message"; }
    "$ZT" preflight --data "$W/data" --model "$W/y8.json" >"$W/y8.txt" 2>&1 || { cat "$W/y8.txt"; fail "seq 12 <= 32 refused"; }
    echo "ok [$CASE]"
    ;;
nonfinite)
    # Weights so large that the first forward overflows: the job stops before the update with
    # an honest message (it once said "on 2 ranks" in a 1-rank job: the flag counted the loss
    # and the norm, not ranks), and says that no checkpoint exists yet (it said "the last
    # checkpoint is untouched" with none, issue 35). Every float 0x7f7f7f7f = 3.4e38, finite.
    small_data
    mkdir -p "$W/big" && cp "$GOLD/tiny_untied_gqa/config.json" "$GOLD/tiny_untied_gqa/model.safetensors" "$W/big/"
    hdr=$(od -An -tu8 -N8 "$W/big/model.safetensors" | tr -d ' ')
    size=$(stat -c %s "$W/big/model.safetensors")
    head -c $((size - 8 - hdr)) /dev/zero | tr '\0' '\177' |
        dd of="$W/big/model.safetensors" bs=1 seek=$((8 + hdr)) conv=notrunc status=none
    "$ZT" train --init "$W/big" --data "$W/data" --run-dir "$W/run" --steps 2 --threads 1 >"$W/out.txt" 2>&1 \
        && { cat "$W/out.txt"; fail "overflowing weights must stop the run"; }
    grep -Eq "step 1: the (loss is not finite on 1 of 1 rank|gradient norm is not finite); stopping before the update" "$W/out.txt" \
        || { cat "$W/out.txt"; fail "the message must say what was not finite, on how many of the ranks"; }
    grep -q "on 2 ranks" "$W/out.txt" && fail "a 1-rank job must not report 2 ranks"
    grep -q "no checkpoint of this run exists yet" "$W/out.txt" || { cat "$W/out.txt"; fail "must say no checkpoint exists"; }
    grep -q "untouched" "$W/out.txt" && fail "names an untouched checkpoint that does not exist"
    echo "ok [$CASE]: $(grep -m1 -o 'step 1: the.*update' "$W/out.txt")"
    # NaN weights: refused while loading, naming the tensor, not blamed on --lr or the data
    mkdir -p "$W/nan" && cp "$GOLD/tiny_untied_gqa/config.json" "$GOLD/tiny_untied_gqa/model.safetensors" "$W/nan/"
    head -c 65536 /dev/zero | tr '\0' '\377' | dd of="$W/nan/model.safetensors" bs=1 seek=$((8 + hdr)) conv=notrunc status=none
    "$ZT" train --init "$W/nan" --data "$W/data" --run-dir "$W/run2" --steps 2 --threads 1 >"$W/out.txt" 2>&1 \
        && { cat "$W/out.txt"; fail "NaN weights must stop the run"; }
    grep -Eq -- "--init .*/nan: tensor model\.[a-z_.0-9]+ holds a non-finite value \(-?nan\) at \[" "$W/out.txt" ||
        { cat "$W/out.txt"; fail "NaN --init weights must be refused naming the tensor"; }
    grep -q "Lower --lr" "$W/out.txt" && fail "NaN --init weights blamed on --lr"
    echo "ok [$CASE]: $(grep -m1 -o 'tensor .* at \[[0-9, ]*\]' "$W/out.txt")"
    ;;
bad_config)
    small_data
    mkdir -p "$W/model"
    sed 's/"num_key_value_heads": *[0-9]*/"num_key_value_heads": 3/' "$GOLD/tiny_untied_gqa/config.json" >"$W/model/config.json"
    PATTERNS=("config.json" "not a multiple of num_key_value_heads 3")
    expect_error "$ZT" train --model "$W/model" --data "$W/data" --run-dir "$W/run" --steps 1
    ;;
bad_flag)
    PATTERNS=("--lr" "not a number")
    expect_error "$ZT" train --model x --data y --run-dir z --lr fast
    # an int option beyond int: refused, not wrapped (--log-every 2147483648 became negative)
    PATTERNS=("--log-every" "2147483648")
    expect_error "$ZT" train --model x --data y --run-dir z --log-every 2147483648
    ;;
cpu_gemm_env)
    # ZT_CPU_GEMM naming no sgemm kernel this CPU runs: refused before the run directory exists
    small_data
    PATTERNS=("ZT_CPU_GEMM=sse" "not one of generic, avx2, avx512")
    ZT_CPU_GEMM=sse expect_error "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" --steps 1 \
        --threads 1
    [ ! -e "$W/run" ] || fail "the refused run created $W/run: $(ls "$W/run")"
    # a kernel it does run: the start line names it
    ZT_CPU_GEMM=generic "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" --steps 1 \
        --threads 1 --log-every 0 >"$W/ok.txt" 2>&1 || { cat "$W/ok.txt"; fail "ZT_CPU_GEMM=generic"; }
    grep -q "cpu backend (portable C sgemm kernel)" "$W/ok.txt" || { cat "$W/ok.txt"; fail "the start line lacks the kernel"; }
    echo "ok [$CASE]: a bad ZT_CPU_GEMM refused with nothing written; generic named in the start line"
    ;;
device)
    # --device: a bad name is refused; cuda without a GPU (or without the GPU engine) fails
    # before any state is written, naming the rank or the missing backend; auto falls back to cpu.
    PATTERNS=("--device tpu" "expected auto, cuda or cpu")
    expect_error "$ZT" train --model x --data y --run-dir z --device tpu
    small_data
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        echo "ok [$CASE]: a GPU is visible here; the no-GPU error is not exercised"
    else
        PATTERNS=("--device cuda" "sees no CUDA device\|built without the GPU engine")
        expect_error "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" --steps 1 \
            --device cuda
        [ -e "$W/run/checkpoints" ] && fail "a checkpoint directory was created by a run that could not start"
        "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run2" --steps 1 --device auto \
            >"$W/auto.txt" 2>&1 || { cat "$W/auto.txt"; fail "--device auto failed without a GPU"; }
        grep -q "cpu backend" "$W/auto.txt" || { cat "$W/auto.txt"; fail "--device auto did not say it chose the cpu backend"; }
        echo "ok [$CASE]: --device auto chose the cpu backend"
    fi
    ;;
tensorboard)
    # RUN/tb read by TensorBoard's own reader equals metrics.jsonl, each step once, also after a
    # resume from an earlier checkpoint over steps that were already logged (they are replaced)
    small_data
    common=(--init "$GOLD/tiny_tied" --data "$W/data" --run-dir "$W/run" --steps 5 --threads 1 --no-save-final
        --save-every 2 --keep-last 0 --eval-data "$W/data" --eval-every 2)
    "$ZT" train "${common[@]}" >"$W/out.txt" 2>&1 || { cat "$W/out.txt"; fail "train"; }
    ls "$W/run/tb"/events.out.tfevents.* >/dev/null 2>&1 || fail "no event file in RUN/tb"
    "$ZT" train "${common[@]}" --resume "$W/run/checkpoints/step-00000002" >"$W/out2.txt" 2>&1 ||
        { cat "$W/out2.txt"; fail "resume from step 2"; }
    python3 "$SRC/tests/cli/tb_check.py" "$W/run"
    rc=$?
    [ $rc -eq 77 ] && exit 77
    [ $rc -eq 0 ] || fail "TensorBoard's reader disagrees with metrics.jsonl"
    "$ZT" train "${common[@]}" --run-dir "$W/run_off" --no-tensorboard >/dev/null 2>&1 || fail "--no-tensorboard run"
    [ ! -e "$W/run_off/tb" ] || fail "--no-tensorboard wrote RUN/tb"
    echo "ok [$CASE]"
    ;;
progress)
    # on a terminal (script(1) gives one): a progress line rewritten in place with the ETA and the
    # next checkpoint; into a file: only the plain --log-every lines, nothing rewritten
    small_data
    common=(--init "$GOLD/tiny_tied" --data "$W/data" --steps 8 --threads 1 --no-save-final --log-every 4
        --save-every 5)
    command -v script >/dev/null || { echo "SKIPPED: script(1) not installed"; exit 77; }
    script -qec "$(printf '%q ' "$ZT" train "${common[@]}" --run-dir "$W/tty")" /dev/null >"$W/tty.txt" 2>&1 ||
        { cat "$W/tty.txt"; fail "train on a terminal"; }
    grep -q "ETA" "$W/tty.txt" || { cat -v "$W/tty.txt"; fail "no progress line with an ETA on a terminal"; }
    grep -q "next checkpoint in 3 steps" "$W/tty.txt" || { cat -v "$W/tty.txt"; fail "progress lacks the next checkpoint"; }
    grep -q $'\r' "$W/tty.txt" || fail "the progress line is not rewritten in place"
    grep -Eq '[0-9] tok/s \| MFU [0-9.]+% \| loss' "$W/tty.txt" || { cat -v "$W/tty.txt"; fail "the progress line has no MFU"; }
    "$ZT" train "${common[@]}" --run-dir "$W/file" >"$W/file.txt" 2>&1 || { cat "$W/file.txt"; fail "train into a file"; }
    ! grep -q "ETA" "$W/file.txt" && ! grep -q $'\r' "$W/file.txt" || fail "progress line written to a file"
    [ "$(grep -c '^step ' "$W/file.txt")" -eq 3 ] || { cat "$W/file.txt"; fail "expected 3 plain step lines (1, 4, 8)"; }
    echo "ok [$CASE]"
    ;;
fake_nvml)
    # NVML through tests/fakenvml (a stand-in libnvidia-ml.so.1 at 950 W): the sampler writes
    # power.csv once a second, the rank's TensorBoard run gets power/board_w, the report draws
    # the power picture. What a GPU machine's driver would give, minus the real numbers.
    [ -n "${ZT_FAKE_NVML_DIR:-}" ] && [ -f "$ZT_FAKE_NVML_DIR/libnvidia-ml.so.1" ] || { echo "SKIPPED: no fake NVML built"; exit 77; }
    head -c 60000 "$SRC/examples/data/python-reference.txt" >"$W/text.txt"
    "$ZT" pack --quiet --input bytes --seq-len 64 -o "$W/data" "$W/text.txt" >/dev/null || fail "pack"
    LD_LIBRARY_PATH="$ZT_FAKE_NVML_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ZT_FAKE_NVML_WATTS=950 \
        "$ZT" train --model "$SRC/examples/tiny-qwen3" --data "$W/data" --run-dir "$W/run" --steps 30 \
        --micro-batch 4 --threads 2 --no-save-final --log-every 10 >"$W/out.txt" 2>&1 || { cat "$W/out.txt"; fail "train"; }
    P="$W/run/ranks/rank-00000.power.csv"
    [ -f "$P" ] || { cat "$W/out.txt"; fail "no power.csv: the sampler did not start on the fake NVML"; }
    n=$(grep -c ',0,950.0,97,' "$P")  # one sample at the start, then one a second
    [ "$n" -ge 1 ] && [ "$n" -eq "$(($(wc -l <"$P") - 1))" ] || { cat "$P"; fail "expected only samples of 950 W at 97% (got $n)"; }
    "$ZT" report "$W/run" -o "$W/report.html" >/dev/null 2>&1 || fail "report"
    grep -q 'no power samples' "$W/report.html" && fail "the report says there are no power samples"
    python3 - "$W/run" <<'PY'
import os, sys
try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("tensorboard not installed: power tags not read back"); sys.exit(0)
a = EventAccumulator(os.path.join(sys.argv[1], "tb", "ranks", "rank-00000"), size_guidance={"scalars": 0})
a.Reload()
w = [e.value for e in a.Scalars("power/board_w")]
sys.exit(0 if w and all(v == 950.0 for v in w) else f"power/board_w {w[:5]}")
PY
    [ $? -eq 0 ] || fail "TensorBoard power tags"
    echo "ok [$CASE]: $n power samples at 950 W through NVML, in TensorBoard and the report"
    ;;
*) fail "unknown case" ;;
esac
