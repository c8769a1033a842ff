#!/usr/bin/env bash
# Packed, isolated conversations on Qwen3.5 at W = 2: the supervised loss of one step at lr 0 equals
# transformers' Qwen3_5ForCausalLM run on each conversation alone (tests/golden/q35_chat/golden.json,
# written by tests/reference/make_qwen3_5_chat_golden.py; no python at test time). The Qwen3
# tokenizer and chat template stand in to make the data (pack --input chat knows no other): token ids
# are ids, and the tiny model's vocabulary covers them. 14 conversations pack into 6 blocks of 128,
# several to a block: one step of 2 ranks x grad-accum 3 trains them all, so the step's loss is the
# golden's sum over every conversation's trained targets divided by their count.
#   qwen3_5_chat.sh ZEROTRAIN SOURCE_DIR WORK
set -u
ZT=$1 SRC=$2 WORK=$3
CASE=qwen3_5_chat
W="$WORK/qwen3_5_chat"
rm -rf "$W" && mkdir -p "$W/model"
GOLD="$SRC/tests/golden/q35_chat"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
# golden KEY: a top-level number of golden.json
golden() { sed -n "s/^ \"$1\": \([-0-9.eE+]*\),\{0,1\}$/\1/p" "$GOLD/golden.json"; }

cp "$GOLD/config.json" "$W/model/" && gzip -dc "$GOLD/model.safetensors.gz" >"$W/model/model.safetensors" ||
    fail "unpacking the model"
"$ZT" pack --quiet --input chat --seq-len 128 -o "$W/data" "$GOLD/conversations.jsonl" >"$W/pack.out" 2>&1 ||
    { cat "$W/pack.out"; fail "pack --input chat"; }
grep -Eq '"blocks":[[:space:]]*6[,}]' "$W/data/dataset.json" || { cat "$W/data/dataset.json"; fail "expected 6 blocks"; }

timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$W/model" --data "$W/data" --run-dir "$W/run" --steps 1 \
    --micro-batch 1 --grad-accum 3 --lr 0 --warmup 0 --threads 1 --log-every 0 --no-save-final >"$W/train.out" 2>&1 ||
    { cat "$W/train.out"; fail "train"; }
grep -q "documents isolated" "$W/train.out" || { cat "$W/train.out"; fail "the run does not say documents are isolated"; }
grep -q "model: Qwen3.5 3 layers (2 linear + 1 full)" "$W/train.out" || { cat "$W/train.out"; fail "no Qwen3.5 model line"; }
M="$W/run/metrics.jsonl"
loss=$(sed -n 's/^{"step":1,.*"loss":\([^,]*\),.*/\1/p' "$M")
trained=$(sed -n 's/^{"step":1,.*"trained_tokens":\([0-9]*\).*/\1/p' "$M")
want=$(golden loss) count=$(golden count)
[ -n "$loss" ] && [ -n "$want" ] || { cat "$M"; fail "no loss in metrics.jsonl or golden.json"; }
[ "$trained" = "$count" ] || fail "trained targets $trained, transformers' masks $count"
awk -v a="$loss" -v b="$want" 'BEGIN{ d = (a - b) / b; if (d < 0) d = -d; printf "loss %s, transformers %.9f: rel %.2e (tol 1e-5)\n", a, b, d; exit !(d <= 1e-5) }' ||
    fail "the packed loss differs from transformers on each conversation alone"
echo "ok [$CASE]: $trained trained targets of 14 conversations in 6 blocks at W = 2"
