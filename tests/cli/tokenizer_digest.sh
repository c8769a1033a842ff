#!/usr/bin/env bash
# A dataset packed with another tokenizer than the model directory's tokenizer.json is refused at
# start, naming both digests (data/dataset.c: zt_dataset_check_tokenizer), by the preflight gate's
# check 1 and, with --no-preflight, by train's own start-up (train/train.c: open_data). The tiny Qwen3.5 model of
# tests/golden/q35_chat has Qwen3's vocabulary size (151,669), so Qwen3 ids fit it either way: the
# model directory with Qwen3.5's tokenizer.json (tests/data/tokenizer/qwen3_5) must be refused,
# the same directory with Qwen3's tokenizer.json (the one pack used) must train.
#   tokenizer_digest.sh ZEROTRAIN SOURCE_DIR WORK
set -u
ZT=$1 SRC=$2 WORK=$3
W="$WORK/tokenizer_digest"
rm -rf "$W" && mkdir -p "$W/model"
fail() { echo "FAIL [tokenizer_digest]: $*"; exit 1; }
GOLD="$SRC/tests/golden/q35_chat"
cp "$GOLD/config.json" "$W/model/" && gzip -dc "$GOLD/model.safetensors.gz" >"$W/model/model.safetensors" ||
    fail "unpacking the model"
gzip -dc "$SRC/tests/data/tokenizer/qwen3_5/tokenizer.json.gz" >"$W/model/tokenizer.json" || fail "unpacking Qwen3.5's tokenizer"
for i in $(seq 40); do echo "Document $i: the quick brown fox jumps over the lazy dog, número $i."; done >"$W/docs.txt"
"$ZT" pack --quiet --input lines --seq-len 16 -o "$W/data" "$W/docs.txt" >"$W/pack.out" 2>&1 ||
    { cat "$W/pack.out"; fail "pack"; }
q3=$(sed -n 's/.*"tokenizer":[[:space:]]*"\(crc32c:[0-9a-f]*\)".*/\1/p' "$W/data/dataset.json")
[ -n "$q3" ] || { cat "$W/data/dataset.json"; fail "dataset.json records no tokenizer digest"; }
T=(--data "$W/data" --steps 1 --micro-batch 1 --lr 0 --warmup 0 --threads 1 --log-every 0 --no-save-final)

"$ZT" train --init "$W/model" "${T[@]}" --run-dir "$W/run1" >"$W/bad.out" 2>&1 && { cat "$W/bad.out"; fail "trained on a Qwen3 dataset with Qwen3.5's tokenizer.json"; }
grep -q "packed with tokenizer $q3, but the model's $W/model/tokenizer.json is crc32c:[0-9a-f]\{8\}" "$W/bad.out" ||
    { cat "$W/bad.out"; fail "the refusal does not name both digests"; }
grep -q "hint: pack the data again with --tokenizer $W/model" "$W/bad.out" || { cat "$W/bad.out"; fail "no hint"; }
grep -q "^\[FAIL\] 1 data integrity .*packed with tokenizer $q3" "$W/bad.out" || { cat "$W/bad.out"; fail "not the preflight gate's check 1"; }
# without the gate, train's own start-up check refuses it
"$ZT" train --init "$W/model" "${T[@]}" --no-preflight --run-dir "$W/run3" >"$W/bad2.out" 2>&1 && { cat "$W/bad2.out"; fail "trained without the gate"; }
grep -q "zerotrain train: error: .*packed with tokenizer $q3, but the model's" "$W/bad2.out" || { cat "$W/bad2.out"; fail "train's check"; }

cp "$SRC/assets/qwen3-tokenizer/tokenizer.json" "$W/model/tokenizer.json"
"$ZT" train --init "$W/model" "${T[@]}" --run-dir "$W/run2" >"$W/good.out" 2>&1 || { cat "$W/good.out"; fail "the matching tokenizer was refused"; }
echo "ok [tokenizer_digest]: $q3 refused against Qwen3.5's tokenizer.json, trained with Qwen3's"
