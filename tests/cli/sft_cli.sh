#!/usr/bin/env bash
# `zerotrain train` on supervised fine-tuning data (pack --input chat): loss masks,
# isolated packed conversations, the validation loss; one case per invocation.
#   sft_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
MODEL="$SRC/examples/tiny-qwen3-chat"
CONV="$SRC/examples/sft/conversations.jsonl"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
expect_error() {  # CMD...: must fail and print every pattern of PATTERNS
    "$@" >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "command succeeded but should have failed: $*"; }
    for p in "${PATTERNS[@]}"; do
        grep -q -- "$p" "$W/out.txt" || { cat "$W/out.txt"; fail "error output lacks '$p'"; }
    done
    echo "ok [$CASE]: $(grep -m1 'error' "$W/out.txt")"
}
# pack the first N conversations (train) and the next M (eval)
chat_data() {
    local n=$1 m=${2:-0}
    head -n "$n" "$CONV" >"$W/train.jsonl"
    "$ZT" pack --quiet --input chat --seq-len 128 -o "$W/data" "$W/train.jsonl" >"$W/pack.txt" 2>&1 ||
        { cat "$W/pack.txt"; fail "pack --input chat"; }
    if [ "$m" -gt 0 ]; then
        tail -n +"$((n + 1))" "$CONV" | head -n "$m" >"$W/eval.jsonl"
        "$ZT" pack --quiet --input chat --seq-len 128 -o "$W/eval" "$W/eval.jsonl" >"$W/pack-eval.txt" 2>&1 ||
            { cat "$W/pack-eval.txt"; fail "pack --input chat (eval)"; }
    fi
}
# field FILE KEY: the values of "KEY": in the lines of FILE that have it
field() { grep "\"$2\":" "$1" | sed "s/.*\"$2\":\([-0-9.eE+naif]*\).*/\1/"; }

case "$CASE" in
train)
    # masked, isolated chat data: the loss falls, every step names its trained tokens, the
    # evaluation runs every 8 steps and at the end
    chat_data 100 16
    grep -Eq '"version":[[:space:]]*2' "$W/data/dataset.json" || fail "dataset.json is not version 2"
    "$ZT" train --model "$MODEL" --data "$W/data" --eval-data "$W/eval" --eval-every 8 --run-dir "$W/run" \
        --steps 24 --micro-batch 2 --lr 3e-3 --warmup 5 --threads 2 --log-every 10 >"$W/out.txt" 2>&1 ||
        { cat "$W/out.txt"; fail "train exited non-zero"; }
    cat "$W/out.txt"
    grep -q "documents isolated" "$W/out.txt" || fail "the run does not say documents are isolated"
    M="$W/run/metrics.jsonl"
    [ "$(grep -c '"loss":' "$M")" -eq 24 ] || fail "metrics.jsonl should have 24 step lines"
    [ "$(grep -c '"eval_loss":' "$M")" -eq 3 ] || fail "metrics.jsonl should have 3 eval lines (steps 8, 16, 24)"
    # trained tokens: present on every step, fewer than the step's targets (masks), never 0 here
    field "$M" trained_tokens | awk '{ if ($1 <= 0 || $1 >= 2 * 127) bad = 1 } END { exit bad }' ||
        fail "trained_tokens per step out of (0, 254): $(field "$M" trained_tokens | tr '\n' ' ')"
    first=$(field "$M" loss | head -1) last=$(field "$M" loss | tail -1)
    e1=$(field "$M" eval_loss | head -1) e3=$(field "$M" eval_loss | tail -1)
    awk -v f="$first" -v l="$last" -v a="$e1" -v b="$e3" 'BEGIN{exit !(f > 9 && l < f - 2 && b < a)}' ||
        fail "losses did not fall: train $first -> $last, eval $e1 -> $e3"
    grep -Eq '"doc_attention":[[:space:]]*"isolated"' "$W/run/run.json" || fail "run.json lacks doc_attention"
    echo "ok [$CASE]: train loss $first -> $last, eval loss $e1 -> $e3"
    ;;
world)
    # ZeRO-3 at W = 1, 2, 3 on the same global batch (6 blocks): the same losses to 1e-5; with
    # --lr 0 the parameters stay put, so the evaluation must agree to summation order (1e-12)
    chat_data 60 12
    for w in 1 2 3; do
        ga=$((6 / w))
        mpirun -n $w --bind-to none "$ZT" train --model "$MODEL" --data "$W/data" --run-dir "$W/run$w" --steps 4 \
            --micro-batch 1 --grad-accum $ga --lr 3e-3 --threads 1 --no-save-final --eval-data "$W/eval" \
            >"$W/out$w.txt" 2>&1 || { cat "$W/out$w.txt"; fail "train at W=$w"; }
        mpirun -n $w --bind-to none "$ZT" train --model "$MODEL" --data "$W/data" --run-dir "$W/lr0_$w" --steps 1 \
            --micro-batch 1 --grad-accum $ga --lr 0 --threads 1 --no-save-final --eval-data "$W/eval" \
            >"$W/lr0_out$w.txt" 2>&1 || { cat "$W/lr0_out$w.txt"; fail "eval run at W=$w"; }
    done
    for w in 2 3; do
        paste <(field "$W/run1/metrics.jsonl" loss) <(field "$W/run$w/metrics.jsonl" loss) |
            awk -v w=$w '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) { print "step " NR ": W=1 " $1 " W=" w " " $2; bad = 1 } } END { exit bad || NR != 4 }' ||
            fail "losses at W=$w differ from W=1"
        paste <(field "$W/run1/metrics.jsonl" trained_tokens) <(field "$W/run$w/metrics.jsonl" trained_tokens) |
            awk '$1 != $2 { bad = 1 } END { exit bad }' || fail "trained tokens per step differ at W=$w"
        a=$(field "$W/run1/metrics.jsonl" eval_loss) b=$(field "$W/run$w/metrics.jsonl" eval_loss)
        awk -v a="$a" -v b="$b" 'BEGIN{ d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }' ||
            fail "eval loss after training: W=1 $a, W=$w $b"
        a=$(field "$W/lr0_1/metrics.jsonl" eval_loss) b=$(field "$W/lr0_$w/metrics.jsonl" eval_loss)
        awk -v a="$a" -v b="$b" 'BEGIN{ d = a - b; if (d < 0) d = -d; exit !(d <= 1e-12 * a) }' ||
            fail "eval loss on the same parameters: W=1 $a, W=$w $b"
    done
    echo "ok [$CASE]: losses $(field "$W/run1/metrics.jsonl" loss | tr '\n' ' ')equal at W=1,2,3; eval $(field "$W/lr0_1/metrics.jsonl" eval_loss) at every W"
    ;;
resume)
    # a stop at step 3 and --resume continue bit-for-bit: steps 4..6 print the same losses,
    # the same trained tokens and the same final evaluation as an uninterrupted run
    chat_data 60 10
    common=(--model "$MODEL" --data "$W/data" --eval-data "$W/eval" --eval-every 2 --steps 6 --micro-batch 2
        --lr 3e-3 --threads 2 --no-save-final)
    "$ZT" train "${common[@]}" --run-dir "$W/full" >"$W/full.txt" 2>&1 || { cat "$W/full.txt"; fail "full run"; }
    "$ZT" train "${common[@]}" --run-dir "$W/part" --debug-signal-at-step 3 >"$W/part1.txt" 2>&1 ||
        { cat "$W/part1.txt"; fail "stopped run"; }
    grep -q "stopped" "$W/part1.txt" || { cat "$W/part1.txt"; fail "the run did not stop at the signal"; }
    "$ZT" train "${common[@]}" --run-dir "$W/part" --resume >"$W/part2.txt" 2>&1 ||
        { cat "$W/part2.txt"; fail "resumed run"; }
    for k in loss trained_tokens eval_loss; do
        diff <(field "$W/full/metrics.jsonl" $k) <(field "$W/part/metrics.jsonl" $k) >/dev/null ||
            fail "$k differs after resume: $(field "$W/full/metrics.jsonl" $k | tr '\n' ' ') vs $(field "$W/part/metrics.jsonl" $k | tr '\n' ' ')"
    done
    echo "ok [$CASE]: losses $(field "$W/part/metrics.jsonl" loss | tr '\n' ' ')identical after a stop at step 3"
    ;;
eval_no_disturb)
    # evaluating every step changes nothing of the training: the same losses and the same
    # final weights, byte for byte, as a run without --eval-data
    chat_data 40 8
    common=(--model "$MODEL" --data "$W/data" --steps 4 --micro-batch 2 --lr 3e-3 --threads 2 --save-dtype fp32)
    "$ZT" train "${common[@]}" --run-dir "$W/eval" --eval-data "$W/eval" --eval-every 1 >"$W/a.txt" 2>&1 ||
        { cat "$W/a.txt"; fail "run with evaluation"; }
    "$ZT" train "${common[@]}" --run-dir "$W/plain" >"$W/b.txt" 2>&1 || { cat "$W/b.txt"; fail "run without"; }
    [ "$(grep -c '"eval_loss":' "$W/eval/metrics.jsonl")" -eq 4 ] || fail "expected 4 evaluations"
    diff <(field "$W/eval/metrics.jsonl" loss) <(field "$W/plain/metrics.jsonl" loss) >/dev/null ||
        fail "evaluation changed the training losses"
    cmp -s "$W/eval/final/model.safetensors" "$W/plain/final/model.safetensors" ||
        fail "evaluation changed the trained weights"
    echo "ok [$CASE]: losses and final weights identical with and without evaluation"
    ;;
v1_isolated)
    # plain data has no document boundaries: isolation is refused, and full attention trains as before
    awk 'BEGIN{srand(3); for(d=0; d<40; d++){ l=""; for(i=0;i<30;i++) l=l int(rand()*900) " "; print l }}' >"$W/ids.txt"
    "$ZT" pack --quiet --input ids --vocab-size 151936 --eos 151643 --seq-len 32 -o "$W/data" "$W/ids.txt" >/dev/null ||
        fail "pack ids"
    PATTERNS=("--doc-attention isolated" "version 1 dataset" "pack --input chat")
    expect_error "$ZT" train --model "$MODEL" --data "$W/data" --run-dir "$W/run" --steps 1 --doc-attention isolated
    "$ZT" train --model "$MODEL" --data "$W/data" --run-dir "$W/run2" --steps 2 --threads 2 --no-save-final \
        >"$W/out2.txt" 2>&1 || { cat "$W/out2.txt"; fail "v1 data does not train"; }
    # every target of a v1 block trains: 31 per 32-token block
    [ "$(field "$W/run2/metrics.jsonl" trained_tokens | sort -u)" = 31 ] ||
        fail "a v1 step should train 31 targets: $(field "$W/run2/metrics.jsonl" trained_tokens)"
    echo "ok [$CASE]"
    ;;
eval_errors)
    chat_data 40
    PATTERNS=("--eval-every and --eval-batches need --eval-data")
    expect_error "$ZT" train --model "$MODEL" --data "$W/data" --run-dir "$W/run" --steps 1 --eval-every 5
    head -n 10 "$CONV" >"$W/e.jsonl"
    "$ZT" pack --quiet --input chat --seq-len 64 -o "$W/eval64" "$W/e.jsonl" >/dev/null || fail "pack eval"
    PATTERNS=("--eval-data" "seq_len 64 differs from the training data's 128")
    expect_error "$ZT" train --model "$MODEL" --data "$W/data" --run-dir "$W/run2" --steps 1 --eval-data "$W/eval64"
    ;;
nothing_trained)
    # a version 2 dataset whose every word has the no-loss flag: the gate refuses it
    mkdir -p "$W/data"
    perl -e 'print pack("V*", map { 0x80000000 | (($_ * 7) % 500) | ($_ == 0 ? 0x40000000 : 0) } 0 .. 63)' \
        >"$W/data/data.u32"
    cat >"$W/data/dataset.json" <<JSON
{"format": "zerotrain-tokens", "version": 2, "token_flags": {"doc_start_bit": 30, "no_loss_bit": 31},
 "doc_attention": "isolated", "seq_len": 32, "vocab_size": 151669, "trained_tokens": 0,
 "files": [{"name": "data.u32", "blocks": 2, "tokens": 64, "crc32c": "0x00000000"}]}
JSON
    PATTERNS=("data integrity" "no token is a trained target")
    expect_error "$ZT" train --model "$MODEL" --data "$W/data" --run-dir "$W/run" --steps 1 --no-verify-data
    ;;
*) fail "unknown case" ;;
esac
