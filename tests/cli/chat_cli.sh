#!/usr/bin/env bash
# `zerotrain pack --input chat` from the command line: pack + --verify of the example
# conversations (version 2 words, the block layout checked word by word with od/awk),
# FILE:LINE errors for each bad conversation, --skip-bad counting, --train-on last,
# conversations longer than --seq-len skipped and counted, a changed chat template
# refused, flags that do not apply refused, JSON nested past cJSON's limit said as such
# (deep_template; deep_line once data/pack_text.c uses base/json_util.h's zt_json_depth_error).
# One case per invocation.
#   chat_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
CONV="$SRC/examples/sft/conversations.jsonl"
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
# expect_error PATTERN... -- CMD...: CMD must fail, its output must match every PATTERN (grep -E);
# and exit with $EXPECT_RC: 1 (a failing pack, the default) or 2 (a usage error)
expect_error() {
    local pats=() rc
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    "$@" >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "command succeeded but should have failed: $*"; }
    rc=$?
    [ "$rc" -eq "${EXPECT_RC:-1}" ] || { cat "$W/out.txt"; fail "exit $rc, not ${EXPECT_RC:-1}: $*"; }
    for p in "${pats[@]}"; do
        grep -Eq -- "$p" "$W/out.txt" || { cat "$W/out.txt"; fail "output lacks /$p/"; }
    done
    echo "ok [$CASE]: $(grep -m1 'error' "$W/out.txt")"
}
# json_num FILE KEY: the first top-level "KEY": number of a dataset.json (cJSON writes a tab after the colon)
json_num() { grep -m1 -E "^	\"$2\":" "$1" | sed -E 's/.*:[[:space:]]*([0-9]+).*/\1/'; }
# file_num FILE KEY: the same for the first entry of "files"
file_num() { grep -m1 -E "^			\"$2\":" "$1" | sed -E 's/.*:[[:space:]]*([0-9]+).*/\1/'; }
# words FILE: one "id doc_start no_loss" line per uint32 word
words() { od -An -tu4 -v "$1" | tr -s ' ' '\n' | sed '/^$/d' |
    awk '{ w = $1; nl = w >= 2147483648; if (nl) w -= 2147483648; ds = w >= 1073741824; if (ds) w -= 1073741824; print w, ds, nl }'; }
# check_layout FILE SEQ_LEN: every block starts a document; padding is <|endoftext|> with no loss,
# a run of it starts a document and reaches the block's end; prints "trained padding docs"
check_layout() {
    words "$1" | awk -v S="$2" '
        { pos = (NR - 1) % S; padw = $1 == 151643 && $3 == 1
          if (pos == 0 && $2 != 1) { print "block " int((NR - 1) / S) " does not start a document"; bad = 1 }
          if ($2 == 1) {
              if (inpad && pos != 0) { print "word " NR - 1 ": a padding run ends before its block"; bad = 1 }
              inpad = padw; docs++
              if (inpad && pos == 0) { print "block " int((NR - 1) / S) " is only padding"; bad = 1 }
          } else if (inpad && !padw) { print "word " NR - 1 ": padding run broken"; bad = 1 }
          if (inpad) pad++
          if (!$3) trained++ }
        END { if (NR % S) { print "not whole blocks"; bad = 1 } print trained + 0, pad + 0, docs + 0; exit bad }'
}

case "$CASE" in
pack_verify)
    "$ZT" pack --input chat --seq-len 128 "$CONV" -o "$W/data" >"$W/pack.txt" 2>&1 || { cat "$W/pack.txt"; fail "pack"; }
    cat "$W/pack.txt"
    grep -Eq "^packed 400 conversations .* -> [0-9]+ blocks of 128 in 1 file, 0 conversations longer than --seq-len skipped" "$W/pack.txt" ||
        fail "summary"
    grep -q "chat template qwen3 crc32c:e40207bb, train on assistant" "$W/pack.txt" || fail "progress header"
    "$ZT" pack --verify "$W/data" >"$W/verify.txt" 2>&1 || { cat "$W/verify.txt"; fail "pack --verify"; }
    cat "$W/verify.txt"
    grep -q "zerotrain-tokens v2" "$W/verify.txt" || fail "verify does not read version 2"
    grep -q "trained tokens (as dataset.json says)" "$W/verify.txt" || fail "verify: trained tokens"
    J="$W/data/dataset.json"
    for m in '"version":[[:space:]]*2,' '"doc_start_bit":[[:space:]]*30' '"no_loss_bit":[[:space:]]*31' \
        '"doc_attention":[[:space:]]*"isolated"' '"input":[[:space:]]*"chat"' '"field":[[:space:]]*"messages"' \
        '"train_on":[[:space:]]*"assistant"' '"chat_template":[[:space:]]*"qwen3 crc32c:e40207bb"' \
        '"conversations_too_long":[[:space:]]*0' '"bad_documents_skipped":[[:space:]]*0' '"documents":[[:space:]]*400' \
        '"dropped_tokens":[[:space:]]*0'; do
        grep -Eq "$m" "$J" || { cat "$J"; fail "dataset.json lacks /$m/"; }
    done
    grep -q '"eos_id"' "$J" && fail "chat data has no eos_id"
    blocks=$(file_num "$J" blocks) trained=$(json_num "$J" trained_tokens) padding=$(json_num "$J" padding_tokens)
    [ "$(stat -c %s "$W/data/data.u32")" -eq $((blocks * 128 * 4)) ] || fail "data.u32 is not $blocks blocks"
    read -r t p d < <(check_layout "$W/data/data.u32" 128) || fail "layout: $t $p $d"
    [ "$t" = "$trained" ] && [ "$p" = "$padding" ] ||
        fail "the words hold $t trained and $p padding, dataset.json says $trained and $padding"
    echo "ok [$CASE]: $blocks blocks, $trained trained, $padding padding words, $d document starts"
    ;;
per_rank)
    "$ZT" pack --quiet --input chat --seq-len 112 --per-rank 3 --threads 2 "$CONV" -o "$W/data" >"$W/pack.txt" 2>&1 ||
        { cat "$W/pack.txt"; fail "pack"; }
    grep -Eq "^packed 400 conversations .* in 3 files" "$W/pack.txt" || { cat "$W/pack.txt"; fail "summary"; }
    "$ZT" pack --verify "$W/data" >"$W/verify.txt" 2>&1 || { cat "$W/verify.txt"; fail "verify"; }
    for r in 0 1 2; do
        check_layout "$W/data/rank-0000$r.u32" 112 >/dev/null || fail "rank $r layout"
    done
    # round-robin: 134, 133, 133 conversations
    [ "$(grep -E '^			"documents":' "$W/data/dataset.json" | sed -E 's/[^0-9]//g' | tr '\n' ' ')" = "134 133 133 " ] ||
        { cat "$W/data/dataset.json"; fail "conversations are not dealt round-robin"; }
    echo "ok [$CASE]"
    ;;
train_on_last)
    "$ZT" pack --quiet --input chat --seq-len 128 "$CONV" -o "$W/asst" >/dev/null || fail "pack assistant"
    "$ZT" pack --quiet --input chat --seq-len 128 --train-on last "$CONV" -o "$W/last" >"$W/last.txt" 2>&1 ||
        { cat "$W/last.txt"; fail "pack last"; }
    "$ZT" pack --quiet --input chat --seq-len 128 --train-on all "$CONV" -o "$W/all" >/dev/null || fail "pack all"
    grep -q "trained under --train-on last" "$W/last.txt" || fail "summary names the rule"
    grep -Eq '"train_on":[[:space:]]*"last"' "$W/last/dataset.json" || fail "dataset.json train_on"
    a=$(json_num "$W/asst/dataset.json" trained_tokens) l=$(json_num "$W/last/dataset.json" trained_tokens)
    all=$(json_num "$W/all/dataset.json" trained_tokens) pad=$(json_num "$W/all/dataset.json" padding_tokens)
    b=$(file_num "$W/all/dataset.json" blocks)
    # some conversations have two assistant turns: last trains fewer; all trains every non-padding word
    [ "$l" -lt "$a" ] && [ "$a" -lt "$all" ] || fail "trained: last $l, assistant $a, all $all"
    [ "$all" -eq $((b * 128 - pad)) ] || fail "all: $all trained, $b blocks, $pad padding"
    "$ZT" pack --verify "$W/last" >/dev/null || fail "verify last"
    echo "ok [$CASE]: trained tokens: last $l < assistant $a < all $all"
    ;;
too_long)
    "$ZT" pack --input chat --seq-len 64 "$CONV" -o "$W/data" >"$W/pack.txt" 2>&1 || { cat "$W/pack.txt"; fail "pack"; }
    n=$(json_num "$W/data/dataset.json" conversations_too_long)
    [ "$n" -gt 10 ] || fail "expected more than 10 conversations over 64 tokens, got $n"
    grep -Eq "pack: skipping [^ ]*conversations.jsonl:[0-9]+: the conversation has (6[5-9]|[7-9][0-9]|1[0-9][0-9]) tokens, more than --seq-len 64" "$W/pack.txt" ||
        { cat "$W/pack.txt"; fail "warning line"; }
    grep -q "further conversations longer than --seq-len are only counted" "$W/pack.txt" || fail "warning cap"
    grep -Eq "^packed $((400 - n)) conversations .*, $n conversations longer than --seq-len skipped" "$W/pack.txt" ||
        { cat "$W/pack.txt"; fail "summary"; }
    check_layout "$W/data/data.u32" 64 >/dev/null || fail "layout"
    "$ZT" pack --verify "$W/data" >/dev/null || fail "verify"
    echo "ok [$CASE]: $n conversations longer than 64 tokens skipped"
    ;;
bad_lines)
    # each bad conversation on line 2 after a good one: the pack stops naming FILE:2 and the rule
    good='{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}'
    i=0
    while read -r entry; do
        line=${entry%%' ==> '*} want=${entry#*' ==> '}
        i=$((i + 1))
        printf '%s\n%s\n' "$good" "$line" >"$W/bad$i.jsonl"
        expect_error "bad$i.jsonl:2: $want" "--skip-bad counts and skips" -- \
            "$ZT" pack --quiet --input chat --seq-len 64 "$W/bad$i.jsonl" -o "$W/out$i"
        [ -e "$W/out$i/dataset.json" ] && fail "a failed pack left a dataset.json"
    done <<'EOF'
{"messages": [{"role": "user", "content": "hi"} ==> malformed JSON at column
["messages"] ==> the line is an array, not a JSON object with a "messages" member
{"conversation": []} ==> no "messages" member \(the object has "conversation"; choose one with --field\)
{"messages": {"role": "user"}} ==> member "messages" is an object, not an array of messages
{"messages": []} ==> member "messages" is an empty array
{"messages": [42]} ==> messages\[0\] is a number, not an object
{"messages": [{"role": "robot", "content": "x"}]} ==> messages\[0\]: role "robot" is not one of system, user, assistant, tool
{"messages": [{"role": "user", "content": null}, {"role": "assistant", "content": "a"}]} ==> messages\[0\] \(user\): content is null
{"messages": [{"role": "user", "content": 5}, {"role": "assistant", "content": "a"}]} ==> messages\[0\] \(user\): content is a number, not a string
{"messages": [{"role": "user"}, {"role": "assistant", "content": "a"}]} ==> messages\[0\] \(user\): no "content" member
{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": []}]} ==> messages\[1\] \(assistant\): reasoning_content is an array, not a string
{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": [{"function": {"name": "f"}}]}]} ==> messages\[1\] \(assistant\): tool_calls\[0\].function: no "arguments" member
{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": "f()"}]} ==> messages\[1\] \(assistant\): tool_calls is a string, not an array
{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "more"}]} ==> the last message \(messages\[2\]\) is from the user, not the assistant: --train-on assistant
{"messages": [{"role": "user", "content": "a\u0000b"}, {"role": "assistant", "content": "a"}]} ==> the line holds \\u0000: --input chat does not support NUL
{"messages": [{"role": "user", "content": "tab	raw"}, {"role": "assistant", "content": "a"}]} ==> raw control character 0x09 at column
EOF
    [ "$i" -eq 16 ] || fail "ran $i cases, not 16"
    # invalid UTF-8 inside a string
    { echo "$good"; printf '{"messages": [{"role": "user", "content": "bad \xff"}, {"role": "assistant", "content": "a"}]}\n'; } >"$W/utf8.jsonl"
    expect_error 'utf8.jsonl:2: messages\[0\] \(user\): content: invalid UTF-8 at byte 4 of the string \(byte 0xff\)' -- \
        "$ZT" pack --quiet --input chat "$W/utf8.jsonl" -o "$W/utf8"
    echo "ok [$CASE]: $((i + 1)) bad conversations refused with FILE:LINE"
    ;;
skip_bad)
    good='{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}'
    {
        echo "$good"
        echo '{"messages": []}'
        echo ''
        echo '{"messages": [{"role": "robot", "content": "x"}]}'
        echo "$good"
        echo '{"messages": [{"role": "user", "content": "q"}]}'
        echo 'not json'
        echo "$good"
    } >"$W/mixed.jsonl"
    "$ZT" pack --input chat --seq-len 64 --skip-bad "$W/mixed.jsonl" -o "$W/data" >"$W/out.txt" 2>&1 ||
        { cat "$W/out.txt"; fail "pack --skip-bad"; }
    grep -q "^packed 3 conversations" "$W/out.txt" || { cat "$W/out.txt"; fail "3 conversations"; }
    grep -q "^4 bad conversations skipped" "$W/out.txt" || { cat "$W/out.txt"; fail "4 bad"; }
    grep -q "pack: skipping [^ ]*mixed.jsonl:4: messages\[0\]: role \"robot\"" "$W/out.txt" || { cat "$W/out.txt"; fail "warning"; }
    grep -Eq '"bad_documents_skipped":[[:space:]]*4' "$W/data/dataset.json" || fail "dataset.json bad_documents_skipped"
    # --train-on all takes the conversation that ends with the user
    "$ZT" pack --quiet --input chat --seq-len 64 --skip-bad --train-on all "$W/mixed.jsonl" -o "$W/all" >"$W/all.txt" 2>&1 ||
        fail "pack all"
    grep -q "^3 bad conversations skipped" "$W/all.txt" || { cat "$W/all.txt"; fail "3 bad under all"; }
    echo "ok [$CASE]"
    ;;
field)
    sed 's/"messages"/"conv"/' "$CONV" | head -5 >"$W/conv.jsonl"
    "$ZT" pack --quiet --input chat --field conv --seq-len 128 "$W/conv.jsonl" -o "$W/data" >"$W/out.txt" 2>&1 ||
        { cat "$W/out.txt"; fail "pack --field conv"; }
    grep -q "^packed 5 conversations" "$W/out.txt" || fail "5 conversations"
    grep -Eq '"field":[[:space:]]*"conv"' "$W/data/dataset.json" || fail "dataset.json field"
    expect_error 'conv.jsonl:1: no "messages" member \(the object has "conv"; choose one with --field\)' -- \
        "$ZT" pack --quiet --input chat "$W/conv.jsonl" -o "$W/data2"
    ;;
wrong_template)
    # a tokenizer directory whose chat_template differs by one character is refused, naming the
    # file and both CRC-32Cs; so is one without tokenizer_config.json
    mkdir -p "$W/tok" "$W/notpl"
    cp "$SRC/assets/qwen3-tokenizer/tokenizer.json" "$W/tok/" && cp "$W/tok/tokenizer.json" "$W/notpl/"
    sed 's/last_query_index=messages|length - 1/last_query_index=messages|length - 2/' \
        "$SRC/assets/qwen3-tokenizer/tokenizer_config.json" >"$W/tok/tokenizer_config.json"
    cmp -s "$W/tok/tokenizer_config.json" "$SRC/assets/qwen3-tokenizer/tokenizer_config.json" && fail "sed changed nothing"
    expect_error "tok/tokenizer_config.json: the chat_template \(4116 bytes, crc32c:[0-9a-f]{8}\) differs from the Qwen3 template zerotrain implements \(4116 bytes, crc32c:e40207bb\)" \
        "hint: --tokenizer DIR" -- "$ZT" pack --input chat --tokenizer "$W/tok" "$CONV" -o "$W/data"
    expect_error "tok/tokenizer_config.json: the chat_template" -- \
        "$ZT" pack --input chat --tokenizer "$W/tok/tokenizer.json" "$CONV" -o "$W/data"
    expect_error "notpl/tokenizer_config.json: cannot open: .*: --input chat takes the chat template from the tokenizer_config.json beside tokenizer.json" -- \
        "$ZT" pack --input chat --tokenizer "$W/notpl" "$CONV" -o "$W/data"
    [ -e "$W/data" ] && fail "a refused pack created its output directory"
    # the same directory with the real config packs
    cp "$SRC/assets/qwen3-tokenizer/tokenizer_config.json" "$W/tok/"
    "$ZT" pack --quiet --input chat --tokenizer "$W/tok" --seq-len 128 "$CONV" -o "$W/data" >/dev/null || fail "real config"
    echo "ok [$CASE]"
    ;;
deep_template)
    # a tokenizer_config.json nested past cJSON's limit (1000) is refused as that, not as
    # "not valid JSON" (base/json_util.h: zt_json_depth_error)
    mkdir -p "$W/tok"
    ln -s "$SRC/assets/qwen3-tokenizer/tokenizer.json" "$W/tok/tokenizer.json"
    awk 'BEGIN { s = "{\"chat_template\": \"x\", \"deep\": "; for (i = 0; i < 1100; i++) s = s "["
                 for (i = 0; i < 1100; i++) s = s "]"; print s "}" }' >"$W/tok/tokenizer_config.json"
    expect_error "tok/tokenizer_config.json: nested deeper than 1000 levels \(cJSON's limit CJSON_NESTING_LIMIT\) at column 1031" -- \
        "$ZT" pack --input chat --tokenizer "$W/tok" "$CONV" -o "$W/data"
    if grep -q "not valid JSON" "$W/out.txt"; then fail "said 'not valid JSON' for a file nested too deep"; fi
    ;;
deep_line)
    # a conversation nested 1,100 deep is refused as nested past cJSON's limit, naming FILE:LINE
    # and the column of the 1001st bracket, not as "malformed JSON at column ..."
    good='{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}'
    { echo "$good"
      awk 'BEGIN { s = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\", \"x\": "
                   for (i = 0; i < 1100; i++) s = s "["
                   for (i = 0; i < 1100; i++) s = s "]"; print s "}]}" }'; } >"$W/deep.jsonl"
    expect_error "deep.jsonl:2: nested deeper than 1000 levels \(cJSON's limit CJSON_NESTING_LIMIT\) at column 1051" -- \
        "$ZT" pack --quiet --input chat --seq-len 64 "$W/deep.jsonl" -o "$W/out"
    if grep -q "malformed JSON" "$W/out.txt"; then fail "said 'malformed JSON' for a line nested too deep"; fi
    ;;
flags)
    # usage errors: exit 2
    EXPECT_RC=2
    expect_error "--train-on last only applies to --input chat" -- \
        "$ZT" pack --input jsonl --train-on last "$CONV" -o "$W/a"
    expect_error "--train-on assistant only applies to --input chat" -- \
        "$ZT" pack --train-on assistant --vocab-size 100 "$CONV" -o "$W/b"
    expect_error "--train-on everything: expected assistant, last or all" -- \
        "$ZT" pack --input chat --train-on everything "$CONV" -o "$W/c"
    expect_error "--eos does not apply to --input chat" -- "$ZT" pack --input chat --eos 151645 "$CONV" -o "$W/d"
    expect_error "--input chatml: expected ids, u32, bytes, jsonl, text, lines or chat" -- \
        "$ZT" pack --input chatml "$CONV" -o "$W/e"
    ;;
*) fail "unknown case" ;;
esac
