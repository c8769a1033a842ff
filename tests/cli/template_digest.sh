#!/usr/bin/env bash
# A chat dataset rendered with another chat template than the model directory's is refused at start,
# naming both digests (data/dataset.c: zt_dataset_check_template, called with the tokenizer check),
# by the preflight gate's check 1 and, with --no-preflight, by train's own start-up. The model is
# tests/golden/q35_sft's tiny Qwen3.5 with the Qwen3.5 tokenizer.json, so the tokenizer check passes
# and only the template differs:
#  - packed with trl's qwen3_5_think_training.jinja (the tokenizer directory has no template of its
#    own, so none is recorded beside it), model directory with qwen3_5_nothink.jinja as
#    chat_template.jinja: refused (the think layout trained for a model that renders nothink);
#  - the same data, model directory whose tokenizer_config.json "chat_template" is the rendered
#    template itself: trains (the tokenizer_config.json path, equal digests).
# (Accepting a variant packed with --tokenizer MODEL_DIR --chat-template FILE, which records the
# model's template as "model_chat_template", is tests/cli/qwen3_5_sft.sh's run.)
#   template_digest.sh ZEROTRAIN SOURCE_DIR WORK
set -u
ZT=$1 SRC=$2 WORK=$3
W="$WORK/template_digest"
rm -rf "$W" && mkdir -p "$W/model" "$W/tok"
fail() { echo "FAIL [template_digest]: $*"; exit 1; }
GOLD="$SRC/tests/golden/q35_sft"
TPL="$SRC/tests/golden/chat_templates/templates"
cp "$GOLD/config.json" "$W/model/" && gzip -dc "$GOLD/model.safetensors.gz" >"$W/model/model.safetensors" &&
    gzip -dc "$SRC/tests/data/tokenizer/qwen3_5/tokenizer.json.gz" >"$W/tok/tokenizer.json" &&
    cp "$W/tok/tokenizer.json" "$W/model/" && cp "$TPL/qwen3_5_nothink.jinja" "$W/model/chat_template.jinja" ||
    fail "making the model directory"
head -3 "$GOLD/conversations.jsonl" >"$W/convs.jsonl"
"$ZT" pack --quiet --input chat --tokenizer "$W/tok" --chat-template "$TPL/qwen3_5_think_training.jinja" \
    --seq-len 128 -o "$W/data" "$W/convs.jsonl" >"$W/pack.out" 2>&1 || { cat "$W/pack.out"; fail "pack"; }
rec=$(sed -n 's/.*"chat_template":[[:space:]]*"jinja qwen3_5_think_training.jinja \(crc32c:[0-9a-f]*\)".*/\1/p' "$W/data/dataset.json")
[ -n "$rec" ] || { cat "$W/data/dataset.json"; fail "dataset.json records no template digest"; }
grep -q model_chat_template "$W/data/dataset.json" && fail "a model template recorded for a directory without one"
T=(--data "$W/data" --steps 1 --micro-batch 1 --lr 0 --warmup 0 --threads 1 --log-every 0 --no-save-final)

"$ZT" train --init "$W/model" "${T[@]}" --run-dir "$W/run1" >"$W/bad.out" 2>&1 && { cat "$W/bad.out"; fail "trained on data rendered with another template"; }
msg="rendered with chat template jinja qwen3_5_think_training.jinja $rec, but the model's $W/model/chat_template.jinja is crc32c:[0-9a-f]\{8\}"
grep -q "^\[FAIL\] 1 data integrity .*$msg" "$W/bad.out" || { cat "$W/bad.out"; fail "not the preflight gate's check 1 naming both digests"; }
grep -q "hint: pack the data again with --tokenizer $W/model" "$W/bad.out" || { cat "$W/bad.out"; fail "no hint"; }
"$ZT" train --init "$W/model" "${T[@]}" --no-preflight --run-dir "$W/run2" >"$W/bad2.out" 2>&1 && { cat "$W/bad2.out"; fail "trained without the gate"; }
grep -q "zerotrain train: error: .*$msg" "$W/bad2.out" || { cat "$W/bad2.out"; fail "train's own check"; }

rm "$W/model/chat_template.jinja"
# the template as a JSON string (the file has no final newline; no control characters but newlines)
json=$(sed 's/\\/\\\\/g; s/"/\\"/g' "$TPL/qwen3_5_think_training.jinja" | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')
printf '{"chat_template": "%s"}\n' "$json" >"$W/model/tokenizer_config.json"
"$ZT" train --init "$W/model" "${T[@]}" --run-dir "$W/run3" >"$W/good.out" 2>&1 || { cat "$W/good.out"; fail "the matching template was refused"; }
echo "ok [template_digest]: $rec refused against qwen3_5_nothink.jinja, trained with tokenizer_config.json's copy of it"
