#!/usr/bin/env bash
# `zerotrain pack --input chat` on conversations with tools in the three input formats, weighted
# mixtures, and `zerotrain train` on a packed tools dataset at W = 1 and 2; one case per
# invocation, on examples/sft/tools_{messages,openai,sharegpt}.jsonl (the same 120
# conversations; examples/sft/make_tool_conversations.py).
#   sft_tools_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
EX="$SRC/examples/sft"
MODEL="$SRC/examples/tiny-qwen3-chat"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
# expect_error PATTERN... -- CMD...: CMD must fail with exit $EXPECT_RC (1) and print every PATTERN (grep -E)
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
json_num() { grep -m1 -E "^	\"$2\":" "$1" | sed -E 's/.*:[[:space:]]*([0-9.]+).*/\1/'; }
# inputs FILE KEY: the values of "KEY" in the "inputs" entries of a dataset.json, space-separated
inputs() { grep -E "^			\"$2\":" "$1" | sed -E 's/.*:[[:space:]]*"?([^",]*)"?,?$/\1/' | tr '\n' ' '; }
# field FILE KEY: the values of "KEY": in the lines of FILE that have it
field() { grep "\"$2\":" "$1" | sed "s/.*\"$2\":\([-0-9.eE+naif]*\).*/\1/"; }

case "$CASE" in
formats)
    # the same conversations as messages, OpenAI and ShareGPT: each format detected and said, the
    # same words, the format recorded; given with --format: the same again
    for f in messages openai sharegpt; do
        "$ZT" pack --input chat --seq-len 320 "$EX/tools_$f.jsonl" -o "$W/$f" >"$W/$f.txt" 2>&1 ||
            { cat "$W/$f.txt"; fail "pack $f"; }
        grep -Eq "pack: [^ ]*tools_$f.jsonl: $f format \(line 1 has " "$W/$f.txt" || { cat "$W/$f.txt"; fail "format not said"; }
        grep -q "^packed 120 conversations" "$W/$f.txt" || { cat "$W/$f.txt"; fail "$f: 120 conversations"; }
        [ "$(inputs "$W/$f/dataset.json" format)" = "$f " ] || { cat "$W/$f/dataset.json"; fail "$f: dataset.json format"; }
        "$ZT" pack --verify "$W/$f" >/dev/null || fail "verify $f"
        "$ZT" pack --quiet --input chat --format $f --seq-len 320 "$EX/tools_$f.jsonl" -o "$W/given-$f" >/dev/null ||
            fail "pack --format $f"
        cmp -s "$W/$f/data.u32" "$W/given-$f/data.u32" || fail "--format $f packs other words than detection"
        grep -q '"format_from":[[:space:]]*"--format"' "$W/given-$f/dataset.json" || fail "format_from --format"
    done
    cmp "$W/messages/data.u32" "$W/openai/data.u32" || fail "OpenAI's form packs other words than the messages form"
    cmp "$W/messages/data.u32" "$W/sharegpt/data.u32" || fail "ShareGPT packs other words than the messages form"
    t=$(json_num "$W/openai/dataset.json" trained_tokens)
    [ "$t" = "$(json_num "$W/sharegpt/dataset.json" trained_tokens)" ] || fail "trained tokens differ"
    # the weight-0 turns train nothing: with every weight 1 more tokens are trained
    sed 's/, "weight": 0//' "$EX/tools_messages.jsonl" >"$W/noweight.jsonl"
    cmp -s "$W/noweight.jsonl" "$EX/tools_messages.jsonl" && fail "the example has no weight-0 turn"
    "$ZT" pack --quiet --input chat --seq-len 320 "$W/noweight.jsonl" -o "$W/noweight" >/dev/null || fail "pack noweight"
    t1=$(json_num "$W/noweight/dataset.json" trained_tokens)
    [ "$t1" -gt "$t" ] || fail "weight 0 changes nothing: $t1 vs $t trained"
    # a wrong format given is refused with FILE:LINE and the member
    expect_error "tools_messages.jsonl:1: messages\[[0-9]+\] \(assistant\): tool_calls\[0\]: no \"id\" member" -- \
        "$ZT" pack --quiet --input chat --format openai --seq-len 320 "$EX/tools_messages.jsonl" -o "$W/wrong"
    echo "ok [$CASE]: the three forms pack to the same $(json_num "$W/openai/dataset.json" documents) conversations, $t trained tokens ($t1 with every weight 1)"
    ;;
bad_lines)
    # each malformed conversation on line 2 after a good one: FILE:2 and the member
    good_o='{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}'
    good_s='{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}'
    i=0
    while read -r entry; do
        fmt=${entry%%' | '*} rest=${entry#*' | '}
        line=${rest%%' ==> '*} want=${rest#*' ==> '}
        i=$((i + 1))
        if [ "$fmt" = sharegpt ]; then good=$good_s; else good=$good_o; fi
        printf '%s\n%s\n' "$good" "$line" >"$W/bad$i.jsonl"
        expect_error "bad$i.jsonl:2: $want" "--skip-bad counts and skips" -- \
            "$ZT" pack --quiet --input chat --format "$fmt" --seq-len 256 "$W/bad$i.jsonl" -o "$W/out$i"
        [ -e "$W/out$i/dataset.json" ] && fail "a failed pack left a dataset.json"
    done <<'EOF'
openai | {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "content": "r"}, {"role": "assistant", "content": "a"}]} ==> messages\[2\] \(tool\): no "tool_call_id" member
openai | {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c9", "content": "r"}, {"role": "assistant", "content": "a"}]} ==> messages\[2\] \(tool\): tool_call_id "c9" is not the id of a tool call of the assistant turn before it
openai | {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}]} ==> messages\[1\] \(assistant\): tool_calls\[0\].function: arguments is an object, not a string
openai | {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": 2}]} ==> messages\[1\] \(assistant\): weight is another number, not 0 or 1
openai | {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "tools": [{"name": "f"}]} ==> tools\[0\]: a bare schema
openai | {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "functions": []} ==> "functions" \(OpenAI's legacy form of tools\) is not supported
messages | {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "tools": [{"type": "function", "function": {"description": "d"}}]} ==> tools\[0\].function: no "name" member
messages | {"messages": [{"role": "user", "content": "q", "weight": 1}, {"role": "assistant", "content": "a"}]} ==> messages\[0\] \(user\): "weight" applies to assistant turns only
sharegpt | {"conversations": [{"from": "human", "value": "q"}, {"from": "human", "value": "q2"}]} ==> conversations\[1\] \(human\): a "human" turn where LLaMA-Factory expects gpt or function_call
sharegpt | {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}, {"from": "human", "value": "q2"}]} ==> member "conversations" has 3 turns after the system turn; LLaMA-Factory needs an even number
sharegpt | {"conversations": [{"from": "human", "value": "q"}, {"from": "function_call", "value": "get_weather(Oslo)"}]} ==> conversations\[1\] \(function_call\): value: not valid JSON at column 1 of the string
sharegpt | {"conversations": [{"from": "human", "value": "q"}, {"from": "function_call", "value": "{\"name\": \"f\"}"}]} ==> conversations\[1\] \(function_call\): value: no "arguments" member
sharegpt | {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}], "tools": "[{\"name\": 1}]"} ==> tools\[0\]: name is a number, not a string
sharegpt | {"conversations": [{"from": "user", "value": "q"}, {"from": "gpt", "value": "a"}]} ==> conversations\[0\]: from "user" is not one of system, human, gpt, function_call, observation
EOF
    [ "$i" -eq 14 ] || fail "ran $i cases, not 14"
    # --skip-bad: counted, and said per input in dataset.json
    { echo "$good_s"; echo '{"conversations": [{"from": "gpt", "value": "a"}]}'; echo "$good_s"; } >"$W/mixed.jsonl"
    "$ZT" pack --input chat --skip-bad --seq-len 64 "$W/mixed.jsonl" -o "$W/skip" >"$W/skip.txt" 2>&1 ||
        { cat "$W/skip.txt"; fail "pack --skip-bad"; }
    grep -q "^1 bad conversation skipped" "$W/skip.txt" || { cat "$W/skip.txt"; fail "1 bad"; }
    grep -q "pack: skipping [^ ]*mixed.jsonl:2: conversations\[0\] (gpt): a \"gpt\" turn" "$W/skip.txt" || fail "warning"
    [ "$(inputs "$W/skip/dataset.json" bad_skipped)" = "1 " ] || fail "bad_skipped in dataset.json"
    echo "ok [$CASE]: $i malformed conversations refused with FILE:LINE and the member"
    ;;
flags)
    EXPECT_RC=2
    expect_error "--format openai only applies to --input chat" -- \
        "$ZT" pack --input jsonl --format openai "$EX/tools_openai.jsonl" -o "$W/a"
    expect_error "--format xml: expected auto, messages, openai or sharegpt" -- \
        "$ZT" pack --input chat --format xml "$EX/tools_openai.jsonl" -o "$W/b"
    expect_error "a mixture gives every input a weight \(PATH:WEIGHT\); 1 of the 2 inputs have none" -- \
        "$ZT" pack --input chat "$EX/tools_openai.jsonl:0.5" "$EX/conversations.jsonl" -o "$W/c"
    expect_error "tools_openai.jsonl:0: weight 0: a mixture's weights are positive numbers" -- \
        "$ZT" pack --input chat "$EX/tools_openai.jsonl:0" "$EX/conversations.jsonl:1" -o "$W/d"
    expect_error "--mix-tokens and --seed apply to a mixture" -- \
        "$ZT" pack --input chat --mix-tokens 1000 "$EX/tools_openai.jsonl" -o "$W/e"
    expect_error "--mix-tokens and --seed apply to a mixture" -- \
        "$ZT" pack --input chat --seed 7 "$EX/tools_openai.jsonl" -o "$W/f"
    expect_error "a mixture \(PATH:WEIGHT inputs\) takes --input jsonl, text, lines or chat" -- \
        "$ZT" pack --vocab-size 100 "$W/x.txt:1" "$W/y.txt:2" -o "$W/g"
    EXPECT_RC=1
    : >"$W/empty.jsonl"
    expect_error "empty.jsonl: the input holds no document to take \(it is empty\), so its weight 1 cannot be met" -- \
        "$ZT" pack --quiet --input chat "$W/empty.jsonl:1" "$EX/conversations.jsonl:1" -o "$W/h"
    [ -e "$W/h/dataset.json" ] && fail "a failed mixture left a dataset.json"
    ls -A "$W/h" 2>/dev/null | grep -q . && fail "a failed mixture left files: $(ls -A "$W/h")"
    echo "ok [$CASE]"
    ;;
mixture_chat)
    # tools (OpenAI's format) and plain conversations, 3:1 of 30000 tokens; the same seed: the same
    # bytes; another seed: another order, the same counts; the default size takes one input once
    mix() { "$ZT" pack --input chat --seq-len 320 "$EX/tools_openai.jsonl:3" "$EX/conversations.jsonl:1" "$@"; }
    mix --mix-tokens 30000 -o "$W/a" >"$W/a.txt" 2>&1 || { cat "$W/a.txt"; fail "mixture"; }
    mix --mix-tokens 30000 -o "$W/b" >"$W/b.txt" 2>&1 || { cat "$W/b.txt"; fail "mixture again"; }
    mix --mix-tokens 30000 --seed 99 -o "$W/c" >"$W/c.txt" 2>&1 || { cat "$W/c.txt"; fail "mixture seed 99"; }
    cat "$W/a.txt"
    grep -q "^mixture of 30000 tokens (seed 1234):" "$W/a.txt" || fail "summary"
    grep -Eq "^  [^ ]*tools_openai.jsonl: weight 3 \(share 0.7500\): [0-9]+ of 120 conversations taken \([0-9.]+ epochs\)" \
        "$W/a.txt" || fail "summary of the tools input"
    grep -q "pack: mixture: [^ ]*conversations.jsonl: 400 conversations" "$W/a.txt" || fail "progress"
    cmp "$W/a/data.u32" "$W/b/data.u32" && cmp "$W/a/dataset.json" "$W/b/dataset.json" || fail "the same seed, other bytes"
    cmp -s "$W/a/data.u32" "$W/c/data.u32" && fail "another seed, the same order"
    for k in taken_documents taken_tokens taken_trained_tokens available_documents epochs; do
        [ "$(inputs "$W/a/dataset.json" $k)" = "$(inputs "$W/c/dataset.json" $k)" ] ||
            fail "$k differs with another seed: $(inputs "$W/a/dataset.json" $k) vs $(inputs "$W/c/dataset.json" $k)"
    done
    for k in documents trained_tokens; do
        [ "$(json_num "$W/a/dataset.json" $k)" = "$(json_num "$W/c/dataset.json" $k)" ] || fail "$k differs with another seed"
    done
    grep -Eq '"weights_by":[[:space:]]*"tokens"' "$W/a/dataset.json" || fail "dataset.json mixture"
    read -r t1 t2 <<<"$(inputs "$W/a/dataset.json" taken_tokens)"
    # each share within half a conversation (at most 300 tokens) of 22500 and 7500
    [ $((t1 - 22500)) -le 150 ] && [ $((22500 - t1)) -le 150 ] && [ $((t2 - 7500)) -le 150 ] && [ $((7500 - t2)) -le 150 ] ||
        fail "taken tokens $t1 and $t2 for shares of 22500 and 7500"
    # the documents packed are those taken
    d=$(json_num "$W/a/dataset.json" documents)
    read -r n1 n2 <<<"$(inputs "$W/a/dataset.json" taken_documents)"
    [ "$d" -eq $((n1 + n2)) ] || fail "$d conversations packed, $n1 + $n2 taken"
    "$ZT" pack --verify "$W/a" >/dev/null || fail "verify"
    "$ZT" preflight --data "$W/a" --model "$MODEL" --world 2 >"$W/pre.txt" 2>&1 || { cat "$W/pre.txt"; fail "preflight"; }
    # the default size: the largest that takes no input more than once (the tools input is the limit)
    mix -o "$W/d" >"$W/d.txt" 2>&1 || { cat "$W/d.txt"; fail "default size"; }
    [ "$(inputs "$W/d/dataset.json" epochs | cut -d' ' -f1)" = 1 ] || { cat "$W/d/dataset.json"; fail "default: epochs"; }
    # more tokens than the inputs hold: taken more than once
    mix --mix-tokens 200000 -o "$W/e" >"$W/e.txt" 2>&1 || { cat "$W/e.txt"; fail "upsampled"; }
    awk -v e="$(inputs "$W/e/dataset.json" epochs)" 'BEGIN { split(e, x, " "); exit !(x[1] > 3 && x[2] > 1) }' ||
        fail "upsampled epochs $(inputs "$W/e/dataset.json" epochs)"
    echo "ok [$CASE]: $n1 + $n2 conversations, $t1 + $t2 tokens; same seed same bytes, seed 99 another order"
    ;;
mixture_text)
    # two JSON Lines text inputs 1:1 of 600 tokens: the same rules for text
    for s in 1 2; do
        awk -v s=$s 'BEGIN { srand(s); for (i = 0; i < 40; i++) { l = ""; for (j = 0; j < 3 + i % 7; j++) l = l "w" s int(rand() * 300) " "; print "{\"text\": \"" l "\"}" } }' >"$W/in$s.jsonl"
    done
    mix() { "$ZT" pack --input jsonl --seq-len 16 "$W/in1.jsonl:1" "$W/in2.jsonl:1" --mix-tokens 600 "$@"; }
    mix -o "$W/a" >"$W/a.txt" 2>&1 || { cat "$W/a.txt"; fail "mixture"; }
    mix -o "$W/b" >/dev/null 2>&1 || fail "again"
    mix --seed 5 -o "$W/c" >/dev/null 2>&1 || fail "seed 5"
    cat "$W/a.txt"
    grep -Eq "^  [^ ]*in1.jsonl: weight 1 \(share 0.5000\): [0-9]+ of 40 documents taken" "$W/a.txt" || fail "summary"
    cmp "$W/a/data.u32" "$W/b/data.u32" || fail "the same seed, other bytes"
    cmp -s "$W/a/data.u32" "$W/c/data.u32" && fail "another seed, the same order"
    [ "$(inputs "$W/a/dataset.json" taken_tokens)" = "$(inputs "$W/c/dataset.json" taken_tokens)" ] || fail "counts differ"
    grep -Eq '^			"format"' "$W/a/dataset.json" && fail "a text mixture has no format per input"
    read -r t1 t2 <<<"$(inputs "$W/a/dataset.json" taken_tokens)"
    # each within half a document (at most 40 tokens here) of 300
    [ $((t1 - 300)) -le 20 ] && [ $((300 - t1)) -le 20 ] && [ $((t2 - 300)) -le 20 ] && [ $((300 - t2)) -le 20 ] ||
        fail "taken $t1 and $t2 tokens for shares of 300"
    echo "ok [$CASE]: $t1 + $t2 tokens of 600"
    ;;
train_world)
    # the packed tools dataset (OpenAI's format) trained at W = 1 and W = 2 on the same global batch
    # (2 blocks): the same losses to 1e-5 and the same trained tokens per step
    "$ZT" pack --quiet --input chat --seq-len 320 "$EX/tools_openai.jsonl" -o "$W/data" >/dev/null || fail "pack"
    for w in 1 2; do
        mpirun -n $w --bind-to none "$ZT" train --model "$MODEL" --data "$W/data" --run-dir "$W/run$w" --steps 3 \
            --micro-batch 1 --grad-accum $((2 / w)) --lr 3e-3 --threads 1 --no-save-final \
            >"$W/out$w.txt" 2>&1 || { cat "$W/out$w.txt"; fail "train at W=$w"; }
    done
    paste <(field "$W/run1/metrics.jsonl" loss) <(field "$W/run2/metrics.jsonl" loss) |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) { print "step " NR ": W=1 " $1 " W=2 " $2; bad = 1 } } END { exit bad || NR != 3 }' ||
        fail "losses at W=2 differ from W=1"
    paste <(field "$W/run1/metrics.jsonl" trained_tokens) <(field "$W/run2/metrics.jsonl" trained_tokens) |
        awk '$1 != $2 || $1 <= 0 { bad = 1 } END { exit bad }' || fail "trained tokens per step differ"
    echo "ok [$CASE]: losses $(field "$W/run1/metrics.jsonl" loss | tr '\n' ' ')equal at W=1 and W=2"
    ;;
*) fail "unknown case" ;;
esac
