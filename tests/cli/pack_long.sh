#!/usr/bin/env bash
# Long blocks end to end (issue 37): `zerotrain pack` at --seq-len 131072 (ZT_SEQ_LEN_MAX) for
# ids, bytes, tokenized JSON Lines and chat, each followed by `pack --verify` (the dataset
# loader: sizes, every CRC-32C, every id); the chat words checked one by one (a document start on
# every block, padding runs, document lengths past 100,000 tokens); a block one token longer
# refused by pack and by the loader; and the gate: a dataset longer than the model's YaRN range
# refused at start by preflight and by train, naming both numbers. Few documents, long ones.
# One case per invocation.
#   pack_long.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/$CASE"
S=131072
rm -rf "$W" && mkdir -p "$W"
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
json_num() { grep -m1 -E "^	\"$2\":" "$1" | sed -E 's/.*:[[:space:]]*([0-9]+).*/\1/'; }
# file_num FILE KEY: the same for the first entry of "files"
file_num() { grep -m1 -E "^			\"$2\":" "$1" | sed -E 's/.*:[[:space:]]*([0-9]+).*/\1/'; }
# pack_and_verify OUT PACK_ARGS...: pack, then pack --verify; the block file is whole blocks of S words;
# sets $blocks
pack_and_verify() {
    local out=$1; shift
    "$ZT" pack --quiet --seq-len $S "$@" -o "$out" >"$W/pack.txt" 2>&1 || { cat "$W/pack.txt"; fail "pack $*"; }
    cat "$W/pack.txt"
    "$ZT" pack --verify "$out" >"$W/verify.txt" 2>&1 || { cat "$W/verify.txt"; fail "pack --verify"; }
    cat "$W/verify.txt"
    grep -q "seq_len $S" "$W/verify.txt" || fail "verify does not report seq_len $S"
    [ "$(json_num "$out/dataset.json" seq_len)" = "$S" ] || fail "dataset.json seq_len"
    local size
    blocks=$(file_num "$out/dataset.json" blocks)
    size=$(stat -c %s "$out/data.u32")
    [ "$size" -eq $((blocks * S * 4)) ] || fail "data.u32 holds $size bytes, not $blocks blocks of $S words"
}
# words FILE: one "id doc_start no_loss" line per uint32 word
words() { od -An -tu4 -v "$1" | tr -s ' ' '\n' | sed '/^$/d' |
    awk '{ w = $1; nl = w >= 2147483648; if (nl) w -= 2147483648; ds = w >= 1073741824; if (ds) w -= 1073741824; print w, ds, nl }'; }

case "$CASE" in
ids)
    # three documents of 100,000 ids each (+ eos): 300,003 tokens = 2 blocks, 37,859 dropped
    awk 'BEGIN { srand(7); for (d = 0; d < 3; d++) { for (i = 0; i < 100000; i++) printf "%d ", int(rand() * 999); print "" } }' \
        >"$W/ids.txt"
    pack_and_verify "$W/data" --input ids --vocab-size 1000 --eos 999 "$W/ids.txt"
    [ "$blocks" = 2 ] || fail "ids: $blocks blocks, not 2"
    grep -q "300003 tokens" "$W/pack.txt" || fail "ids: 300,003 tokens expected"
    # block 1 word 0 is token 131072 of the stream: document 1 (ids 100001..200000), its word 31072
    want=$(awk 'NR == 2 { print $31072 }' "$W/ids.txt")
    got=$(od -An -tu4 -j $((S * 4)) -N4 "$W/data/data.u32" | tr -d ' ')
    [ "$want" = "$got" ] || fail "block 1 starts with $got, not $want"
    echo "ok [$CASE]"
    ;;
bytes)
    # one 400,000-byte document: 400,001 tokens with eos = 3 blocks
    awk 'BEGIN { for (i = 0; i < 8000; i++) printf "line %05d of a long byte document, padded to 50.\n", i }' >"$W/doc.txt"
    [ "$(stat -c %s "$W/doc.txt")" -eq 400000 ] || fail "generator: $(stat -c %s "$W/doc.txt") bytes"
    pack_and_verify "$W/data" --input bytes "$W/doc.txt"
    [ "$blocks" = 3 ] || fail "bytes: $blocks blocks, not 3"
    cmp -n $((3 * S)) <(od -An -tu4 -v "$W/data/data.u32" | tr -s ' ' '\n' | sed '/^$/d' | awk '{ printf "%c", $1 }') \
        "$W/doc.txt" || fail "the words are not the document's bytes"
    echo "ok [$CASE]"
    ;;
jsonl)
    # two long text documents through the Qwen3 tokenizer (~150,000 tokens each)
    awk 'BEGIN { for (d = 0; d < 2; d++) { printf "{\"text\": \""; for (i = 0; i < 30000; i++) printf "Step %d of document %d: add %d and %d. ", i, d, i * 7 % 1000, i * 13 % 997; print "\"}" } }' \
        >"$W/docs.jsonl"
    pack_and_verify "$W/data" --input jsonl "$W/docs.jsonl"
    tokens=$(grep -Eo '[0-9]+ tokens' "$W/pack.txt" | head -1 | cut -d' ' -f1)
    [ "$blocks" -ge 2 ] && [ "$blocks" -eq $((tokens / S)) ] || fail "jsonl: $blocks blocks for $tokens tokens"
    echo "ok [$CASE]"
    ;;
chat)
    # Four conversations with long reasoning: 54,726, 74,908 and 124,972 tokens, and one of 151,487
    # (longer than a block: skipped and counted). The first two share block 0 (129,634 tokens, then
    # 1,438 of padding), the third does not fit beside them and fills block 1 (then 6,100 of padding).
    awk 'function conv(n, tag,   i) {
            printf "{\"messages\": [{\"role\": \"system\", \"content\": \"Think step by step.\"}, {\"role\": \"user\", \"content\": \"Sum the series %s.\"}, {\"role\": \"assistant\", \"reasoning_content\": \"", tag
            for (i = 0; i < n; i++) printf "Term %d is %d, so the partial sum %s is now %d. ", i, i * 3 % 101, tag, i * (i + 1) / 2
            printf "\", \"content\": \"The sum of %s is %d.\"}]}\n", tag, n * (n + 1) / 2 }
         BEGIN { conv(2150, "A"); conv(2900, "B"); conv(4750, "C"); conv(5700, "D") }' >"$W/long.jsonl"
    pack_and_verify "$W/data" --input chat "$W/long.jsonl"
    [ "$blocks" = 2 ] || fail "chat: $blocks blocks, not 2"
    [ "$(json_num "$W/data/dataset.json" documents)" = 3 ] || fail "documents"
    [ "$(json_num "$W/data/dataset.json" conversations_too_long)" = 1 ] || fail "conversations_too_long"
    grep -q "1 conversation longer than --seq-len skipped" "$W/pack.txt" || fail "too-long summary"
    # every block starts a document, padding runs reach the block's end; each document's length
    # (its DOC_START to the next: the positions the trainer derives restart there)
    words "$W/data/data.u32" | awk -v S=$S '
        { pos = (NR - 1) % S; pad = $1 == 151643 && $3 == 1
          if (pos == 0 && $2 != 1) { print "block " int((NR - 1) / S) " does not start a document"; bad = 1 }
          if ($2 == 1) { if (len) lens = lens " " len; len = 0; docs++; inpad = pad }
          else if (inpad && !pad) { print "word " NR - 1 ": padding run broken"; bad = 1 }
          len++; if (!$3) trained++ }
        END { lens = lens " " len; print "documents (with padding runs):" lens; print "trained", trained
              if (docs != 5) { print docs " document starts, not 5"; bad = 1 }
              exit bad }' >"$W/layout.txt" || { cat "$W/layout.txt"; fail "layout"; }
    cat "$W/layout.txt"
    grep -qx "documents (with padding runs): 54726 74908 1438 124972 6100" "$W/layout.txt" || fail "document lengths"
    trained=$(awk '/^trained/ { print $2 }' "$W/layout.txt")
    [ "$trained" = "$(json_num "$W/data/dataset.json" trained_tokens)" ] || fail "trained_tokens"
    echo "ok [$CASE]"
    ;;
refuse)
    printf '1 2 3\n' >"$W/ids.txt"
    "$ZT" pack --seq-len $((S + 1)) --vocab-size 10 "$W/ids.txt" -o "$W/out" >"$W/out.txt" 2>&1 && fail "seq-len $((S + 1)) packed"
    grep -q "seq_len $((S + 1)) is above the maximum of $S tokens per block" "$W/out.txt" || { cat "$W/out.txt"; fail "message"; }
    [ ! -e "$W/out" ] || fail "a refused pack left $W/out"
    "$ZT" pack --help | grep -q "at most 131072" || fail "--help does not state the maximum"
    # one block buffer per rank file: 8,193 files of 131,072 words would take 4 GiB + 512 KiB
    "$ZT" pack --seq-len $S --per-rank 8193 --vocab-size 10 "$W/ids.txt" -o "$W/out" >"$W/out2.txt" 2>&1 &&
        fail "8193 files of $S packed"
    grep -q "per-rank 8193 files of --seq-len $S blocks need 4096.5 MiB of block buffers .* more than the 4096 MiB" \
        "$W/out2.txt" || { cat "$W/out2.txt"; fail "buffer message"; }
    [ ! -e "$W/out" ] || fail "a refused pack left $W/out"
    echo "ok [$CASE]: $(cat "$W/out.txt")"
    ;;
yarn_gate)
    # seq_len 131072 against tests/golden/tiny_yarn: factor 4 x 4096 original = 16384 positions
    awk 'BEGIN { srand(3); for (d = 0; d < 2; d++) { for (i = 0; i < 131072; i++) printf "%d ", int(rand() * 90); print "" } }' \
        >"$W/ids.txt"
    pack_and_verify "$W/data" --input ids --vocab-size 96 --eos none "$W/ids.txt"
    MODEL="$SRC/tests/golden/tiny_yarn"
    msg="seq_len 131072 exceeds the model's YaRN range (factor x original_max_position_embeddings) 16384"
    "$ZT" preflight --data "$W/data" --model "$MODEL" --micro-batch 1 --grad-accum 1 >"$W/pf.txt" 2>&1 &&
        { cat "$W/pf.txt"; fail "preflight passed"; }
    grep -q "\[FAIL\] 1 data integrity.*$msg" "$W/pf.txt" || { cat "$W/pf.txt"; fail "preflight message"; }
    "$ZT" train --data "$W/data" --model "$MODEL" --run-dir "$W/run" --steps 1 --micro-batch 1 --grad-accum 1 \
        --threads 1 >"$W/train.txt" 2>&1 && { cat "$W/train.txt"; fail "train started"; }
    grep -q "$msg" "$W/train.txt" && grep -q "stopping before training" "$W/train.txt" ||
        { cat "$W/train.txt"; fail "train message"; }
    ! grep -q "^step " "$W/train.txt" || fail "a step ran"
    "$ZT" preflight --data "$W/data" --model "$MODEL" --micro-batch 1 --grad-accum 1 --allow-long-seq >"$W/pf2.txt" 2>&1
    grep -q "\[PASS\] 1 data integrity.*allowed by --allow-long-seq" "$W/pf2.txt" || { cat "$W/pf2.txt"; fail "--allow-long-seq"; }
    echo "ok [$CASE]"
    ;;
*) fail "unknown case" ;;
esac
