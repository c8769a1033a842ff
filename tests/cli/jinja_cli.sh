#!/usr/bin/env bash
# `zerotrain pack --input chat` with a Jinja chat template (data/chat_jinja.c, data/jinja*.c):
#   fastpath      the Qwen3 template through the engine (--chat-template tokenizer_config.json)
#                 packs the example conversations into the same block files as the built-in
#                 renderer (--train-on all); chat_template.jinja beside tokenizer.json is used
#   generation    trl's qwen3_training.jinja: --train-on assistant trains the {% generation %}
#                 spans, last only the final one; a template without them trains what rendering
#                 prefix by prefix finds, and refuses a conversation where that is not a prefix
#   bad_template  a construct the engine lacks is refused at start, naming FILE:LINE:COL
#   raise         raise_exception ends the conversation with its message and FILE:LINE;
#                 --skip-bad counts and skips it
#   limits        endless recursion, unbounded output and a runaway loop stop at their limits
#   vars          --template-var reaches the template; a malformed one is refused
# One case per invocation.   jinja_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
CONV="$SRC/examples/sft/conversations.jsonl"
TOK="$SRC/assets/qwen3-tokenizer"
TPL="$SRC/tests/golden/chat_templates/templates"
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
expect_error() {  # PATTERN... -- CMD...: CMD fails with exit ${EXPECT_RC:-1} and prints every PATTERN
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
pack() { "$ZT" pack --input chat --seq-len 256 --threads 2 "$@"; }
# trained FILE: the number of trained words (no-loss bit clear) of a block file
trained() { od -An -tu4 -v "$1" | tr -s ' ' '\n' | sed '/^$/d' | awk '$1 < 2147483648 { n++ } END { print n + 0 }'; }

case "$CASE" in
fastpath)
    # the example conversations and the tool-calling ones (tools, tool calls, tool results; less
    # the lines with "weight", which only the built-in renderer takes)
    cat "$CONV" >"$W/in.jsonl" && grep -v '"weight"' "$SRC/examples/sft/tools_messages.jsonl" >>"$W/in.jsonl"
    CONV="$W/in.jsonl"
    pack --quiet --train-on all "$CONV" -o "$W/builtin" >/dev/null || fail "built-in pack"
    pack --train-on all --chat-template "$TOK/tokenizer_config.json" "$CONV" -o "$W/engine" >"$W/engine.txt" 2>&1 ||
        { cat "$W/engine.txt"; fail "engine pack"; }
    grep -q "chat template jinja tokenizer_config.json crc32c:" "$W/engine.txt" || { cat "$W/engine.txt"; fail "header"; }
    cmp "$W/builtin/data.u32" "$W/engine/data.u32" || fail "the engine's blocks differ from the built-in renderer's"
    grep -q '"chat_template":.*"jinja tokenizer_config.json crc32c:' "$W/engine/dataset.json" || fail "dataset.json"
    # a model directory with chat_template.jinja: used without --chat-template
    mkdir -p "$W/model"
    cp "$TOK/tokenizer.json" "$TOK/tokenizer_config.json" "$W/model/"
    cp "$TPL/qwen3.jinja" "$W/model/chat_template.jinja"
    head -20 "$CONV" >"$W/few.jsonl"
    pack --train-on all --tokenizer "$W/model" "$W/few.jsonl" -o "$W/dir" >"$W/dir.txt" 2>&1 || { cat "$W/dir.txt"; fail "dir pack"; }
    grep -q "chat template jinja chat_template.jinja crc32c:" "$W/dir.txt" || { cat "$W/dir.txt"; fail "dir header"; }
    echo "ok [$CASE]: the engine's blocks equal the built-in renderer's ($(stat -c %s "$W/engine/data.u32") bytes)"
    ;;
generation)
    head -100 "$CONV" >"$W/in.jsonl"
    CONV="$W/in.jsonl"
    pack --quiet --chat-template "$TPL/qwen3_training.jinja" "$CONV" -o "$W/asst" >/dev/null || fail "assistant"
    pack --quiet --chat-template "$TPL/qwen3_training.jinja" --train-on last "$CONV" -o "$W/last" >/dev/null || fail "last"
    pack --quiet --chat-template "$TPL/qwen3_training.jinja" --train-on all "$CONV" -o "$W/all" >/dev/null || fail "all"
    a=$(trained "$W/asst/data.u32") l=$(trained "$W/last/data.u32") t=$(trained "$W/all/data.u32")
    [ "$a" -gt 0 ] && [ "$l" -gt 0 ] && [ "$l" -lt "$a" ] && [ "$a" -lt "$t" ] || fail "trained words last $l, assistant $a, all $t"
    # without generation blocks (prefix mode, as TRL finds a completion): qwen2_5.jinja trains every
    # assistant turn, qwen3.jinja the last; qwen3.jinja renders an earlier turn otherwise than a
    # final one (its <think> rule), so --train-on assistant refuses a multi-turn conversation
    pack --quiet --chat-template "$TPL/qwen2_5.jinja" "$CONV" -o "$W/q25" >/dev/null || fail "qwen2_5 assistant"
    pack --quiet --chat-template "$TPL/qwen3.jinja" --train-on last "$CONV" -o "$W/q3last" >/dev/null || fail "qwen3 last"
    a2=$(trained "$W/q25/data.u32") l2=$(trained "$W/q3last/data.u32")
    [ "$a2" -gt 0 ] && [ "$l2" -gt 0 ] || fail "prefix mode trained words: qwen2_5 assistant $a2, qwen3 last $l2"
    expect_error "in.jsonl:4: the template's rendering of messages\[:3\] is not a prefix of its rendering of the whole" \
        "hint: a template with \{% generation %\} blocks" -- pack --chat-template "$TPL/qwen3.jinja" "$CONV" -o "$W/nogen"
    echo "ok [$CASE]: trained words: last $l < assistant $a < all $t; prefix mode: qwen2_5 assistant $a2, qwen3 last $l2"
    ;;
bad_template)
    printf 'line one\n  {%% include "other.jinja" %%}\n' >"$W/inc.jinja"
    expect_error "inc.jinja:2:6: the statement '\{% include %\}' is not supported by zerotrain's Jinja engine" -- \
        pack --train-on all --chat-template "$W/inc.jinja" "$CONV" -o "$W/out"
    printf '{%% for m in messages %%}\n{{ m.content | wordwrap(5) }}{%% endfor %%}' >"$W/filter.jinja"
    expect_error "filter.jinja:2:16: the filter 'wordwrap' is not supported" -- \
        pack --train-on all --chat-template "$W/filter.jinja" "$CONV" -o "$W/out"
    printf '{{ messages.pop() }}' >"$W/method.jinja"
    expect_error "method.jinja:1:16: the method 'pop' is not supported" -- \
        pack --train-on all --chat-template "$W/method.jinja" "$CONV" -o "$W/out"
    printf '{%% if messages %%}x' >"$W/open.jinja"
    expect_error "open.jinja:1:19: unexpected end of template, expected '\{% elif %\}'" -- \
        pack --train-on all --chat-template "$W/open.jinja" "$CONV" -o "$W/out"
    [ -e "$W/out" ] && fail "a refused pack created its output directory"
    ;;
raise)
    cat >"$W/boom.jinja" <<'J'
{%- for m in messages %}
{%- if m.content == 'boom' %}{{ raise_exception('no boom at message ' ~ loop.index) }}{% endif %}
<{{ m.role }}>{% generation %}{{ m.content }}{% endgeneration %}
{%- endfor %}
J
    good='{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}'
    boom='{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "boom"}]}'
    printf '%s\n%s\n%s\n' "$good" "$boom" "$good" >"$W/in.jsonl"
    expect_error "in.jsonl:2: the template raised: no boom at message 2 \(--skip-bad counts" -- \
        pack --chat-template "$W/boom.jinja" "$W/in.jsonl" -o "$W/out"
    [ -e "$W/out/dataset.json" ] && fail "a failed pack left a dataset.json"
    pack --skip-bad --chat-template "$W/boom.jinja" "$W/in.jsonl" -o "$W/skip" >"$W/skip.txt" 2>&1 ||
        { cat "$W/skip.txt"; fail "--skip-bad"; }
    grep -Eq "packed 2 conversations" "$W/skip.txt" && grep -Eq "1 bad" "$W/skip.txt" || { cat "$W/skip.txt"; fail "counts"; }
    echo "ok [$CASE]: raised, and skipped under --skip-bad"
    ;;
limits)
    # one conversation: a batch of lines that each run into a limit would each take its time
    head -1 "$CONV" >"$W/one.jsonl"
    CONV="$W/one.jsonl"
    printf '{%% macro f(n) %%}{{ f(n + 1) }}{%% endmacro %%}{{ f(0) }}' >"$W/rec.jinja"
    expect_error "one.jsonl:1: the template failed at its line 1: macro calls nested deeper than 200 \(limit\)" -- \
        pack --train-on all --chat-template "$W/rec.jinja" "$CONV" -o "$W/out"
    printf '{%% set ns = namespace(s="ab") %%}{%% for i in range(26) %%}{%% set ns.s = ns.s ~ ns.s %%}{%% endfor %%}{{ ns.s }}' >"$W/big.jinja"
    expect_error "one.jsonl:1: the template failed at its line 1: the template's output passed 67108864 bytes \(limit\)" -- \
        pack --train-on all --chat-template "$W/big.jinja" "$CONV" -o "$W/out"
    printf '{%% for i in range(100000) %%}{%% for j in range(1000) %%}{%% endfor %%}{%% endfor %%}x' >"$W/loop.jinja"
    expect_error "one.jsonl:1: the template failed at its line 1: the template ran more than 10000000 loop iterations and calls \(limit\)" -- \
        pack --train-on all --chat-template "$W/loop.jinja" "$CONV" -o "$W/out"
    ;;
vars)
    printf '{{ greeting }}|{{ enable_thinking }}|{{ add_generation_prompt }}|{{ n + 1 }}|{{ xs | length }}{%% for m in messages %%}{{ m.content }}{%% endfor %%}' >"$W/v.jinja"
    pack --quiet --train-on all --chat-template "$W/v.jinja" \
        --template-var 'greeting=hello world,enable_thinking=false,n=41,xs=[1, 2, 3]' "$CONV" -o "$W/out" >/dev/null ||
        fail "pack with --template-var"
    # the same blocks as the values written into the template
    printf 'hello world|False|False|42|3{%% for m in messages %%}{{ m.content }}{%% endfor %%}' >"$W/lit.jinja"
    pack --quiet --train-on all --chat-template "$W/lit.jinja" "$CONV" -o "$W/lit" >/dev/null || fail "literal pack"
    cmp -s "$W/out/data.u32" "$W/lit/data.u32" || fail "--template-var values did not reach the template"
    # strftime_now from SOURCE_DATE_EPOCH: 2026-12-07 12:00:00 UTC is "07 Dec 2026"
    printf '{{ strftime_now("%%d %%b %%Y") }}{%% for m in messages %%}{{ m.content }}{%% endfor %%}' >"$W/date.jinja"
    head -3 "$CONV" >"$W/three.jsonl"
    SOURCE_DATE_EPOCH=1796644800 pack --quiet --train-on all --chat-template "$W/date.jinja" "$W/three.jsonl" -o "$W/d1" >/dev/null ||
        fail "date pack"
    printf '07 Dec 2026{%% for m in messages %%}{{ m.content }}{%% endfor %%}' >"$W/fixed.jinja"
    pack --quiet --train-on all --chat-template "$W/fixed.jinja" "$W/three.jsonl" -o "$W/d2" >/dev/null || fail "fixed pack"
    cmp -s "$W/d1/data.u32" "$W/d2/data.u32" || fail "strftime_now did not follow SOURCE_DATE_EPOCH"
    expect_error "--template-var: \"1x\" is not a variable name" -- \
        pack --train-on all --chat-template "$W/v.jinja" --template-var '1x=3' "$CONV" -o "$W/bad"
    EXPECT_RC=2 expect_error "--chat-template and --template-var only apply to --input chat" -- \
        "$ZT" pack --input lines --chat-template "$W/v.jinja" "$CONV" -o "$W/bad"
    expect_error "--template-var needs a Jinja template" -- pack --template-var 'a=1' "$CONV" -o "$W/bad"
    ;;
*) fail "unknown case" ;;
esac
echo "ok [$CASE]"
