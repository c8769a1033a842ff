#!/usr/bin/env bash
# Qwen3.5 fine-tuning end to end, all of it Qwen3.5's: `pack --input chat --tokenizer MODEL_DIR
# --chat-template qwen3_5_think_training.jinja` with the Qwen3.5 tokenizer.json
# (tests/data/tokenizer/qwen3_5) and trl's Qwen3.5 think training template, then a tiny Qwen3.5
# over the real 248,320-entry vocabulary (both layer kinds, hidden 32) trained one step at lr 0 at
# W = 2. Checked against transformers (tests/golden/q35_sft/golden.json, written by
# tests/reference/make_qwen3_5_sft_golden.py; no python here):
#  - the packed words: each conversation's ids and trained-token mask equal apply_chat_template's
#    input_ids and return_assistant_tokens_mask (exact);
#  - the step's loss (sum over every conversation's trained targets / their count, every block of
#    the dataset in the one step) equals Qwen3_5ForCausalLM run on each conversation alone, rel 1e-5.
# The model directory holds the model's own template (qwen3_5_think.jinja as chat_template.jinja):
# pack records it next to the training variant it rendered, so train's template check accepts the
# data (zt_dataset_check_template; tests/cli/template_digest.sh checks the refusals).
#   qwen3_5_sft.sh ZEROTRAIN SOURCE_DIR WORK
set -u
ZT=$1 SRC=$2 WORK=$3
CASE=qwen3_5_sft
W="$WORK/qwen3_5_sft"
rm -rf "$W" && mkdir -p "$W/model"
GOLD="$SRC/tests/golden/q35_sft"
TPL="$SRC/tests/golden/chat_templates/templates"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
golden() { sed -n "s/^ \"$1\": \([-0-9.eE+]*\),\{0,1\}$/\1/p" "$GOLD/golden.json"; }

cp "$GOLD/config.json" "$W/model/" && gzip -dc "$GOLD/model.safetensors.gz" >"$W/model/model.safetensors" &&
    gzip -dc "$SRC/tests/data/tokenizer/qwen3_5/tokenizer.json.gz" >"$W/model/tokenizer.json" &&
    cp "$TPL/qwen3_5_think.jinja" "$W/model/chat_template.jinja" || fail "making the model directory"
"$ZT" pack --input chat --tokenizer "$W/model" --chat-template "$TPL/qwen3_5_think_training.jinja" --seq-len 768 \
    -o "$W/data" "$GOLD/conversations.jsonl" >"$W/pack.out" 2>&1 || { cat "$W/pack.out"; fail "pack --input chat"; }
grep -q '"model_chat_template"' "$W/data/dataset.json" || { cat "$W/data/dataset.json"; fail "no model_chat_template"; }
blocks=$(sed -n 's/.*"blocks":[[:space:]]*\([0-9]*\).*/\1/p' "$W/data/dataset.json" | head -1)
[ "$blocks" = 4 ] || { cat "$W/data/dataset.json"; fail "expected 4 blocks, got $blocks"; }

# the packed words against transformers' ids and masks: each conversation starts a document
# (bit 30), trained words lack bit 31; the rest of a block is padding, a document of pad_id
# (<|endoftext|>, 248044) words, untrained
od -An -tu4 -v "$W/data/data.u32" | tr -s ' ' '\n' | sed '/^$/d' | awk '
    { w = $1; nl = (w >= 2147483648); if (nl) w -= 2147483648; ds = (w >= 1073741824); if (ds) w -= 1073741824
      if (ds) { if (n) print cur; cur = ""; n = 0; inside = 1 }
      else if (!inside) next
      cur = cur (n ? " " : "") w ":" (nl ? 0 : 1); n++ }
    END { if (n) print cur }' | grep -v '^248044:0' >"$W/packed.txt"
sed -n '/"ids": \[/,/^ \],$/p' "$GOLD/golden.json" | tr -d ' \n' | sed 's/^"ids":\[\[//; s/\]\],$//; s/\],\[/\n/g' >"$W/ids.txt"
sed -n '/"masks": \[/,/^ \],$/p' "$GOLD/golden.json" | sed -n 's/^  "\([01]*\)",\{0,1\}$/\1/p' >"$W/masks.txt"
paste -d'|' "$W/ids.txt" "$W/masks.txt" | awk -F'|' '{ n = split($1, id, ","); s = ""
    for (i = 1; i <= n; i++) s = s (i > 1 ? " " : "") id[i] ":" substr($2, i, 1); print s }' >"$W/want.txt"
[ -s "$W/want.txt" ] && [ "$(wc -l <"$W/want.txt")" = "$(golden conversations)" ] || fail "reading the golden ids"
cmp -s "$W/want.txt" "$W/packed.txt" || { diff "$W/want.txt" "$W/packed.txt" | head -c 2000; fail "ids or masks differ from apply_chat_template"; }
[ "$(wc -l <"$W/packed.txt")" = "$(golden conversations)" ] || fail "not one document per conversation"

timeout 300 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$W/model" --data "$W/data" --run-dir "$W/run" --steps 1 \
    --micro-batch 1 --grad-accum 2 --lr 0 --warmup 0 --threads 1 --log-every 0 --no-save-final >"$W/train.out" 2>&1 ||
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
echo "ok [$CASE]: $(golden conversations) conversations, ids and masks as transformers', $trained trained targets in $blocks blocks at W = 2"
