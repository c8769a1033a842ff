#!/usr/bin/env bash
# The third fault battery (issue 35), run files and mixtures, one case per invocation: a YAML
# run file that is an alias bomb, nested deep, too long, a /proc file, or holds a bad byte on
# line 4; --print-config of paths YAML cannot hold as they are; mixture weights at a double's
# extremes, a file named b.jsonl:1, a mixture that yields no block.
#   faults3_yaml.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
case "$WORK" in /*) ;; *) WORK="$PWD/$WORK" ;; esac
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
cd "$W" || exit 1
GOLD="$SRC/tests/golden"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
# expect_error RC PATTERN... -- CMD...: CMD must exit RC, its output must hold every PATTERN (grep -F)
expect_error() {
    local want=$1 pats=() rc
    shift
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    "$@" >"$W/out.txt" 2>&1
    rc=$?
    [ "$rc" -eq "$want" ] || { cat "$W/out.txt"; fail "exit $rc, not $want: $*"; }
    for p in "${pats[@]}"; do
        grep -qF -- "$p" "$W/out.txt" || { cat "$W/out.txt"; fail "output lacks '$p'"; }
    done
    echo "refused as expected: $(head -c 400 "$W/out.txt")"
}
# peak_kb CMD...: runs CMD (output to out.txt): RC its exit status, KB its peak resident set
peak_kb() {
    /usr/bin/time -f '%M' -o "$W/peak.txt" "$@" >"$W/out.txt" 2>&1
    RC=$?
    KB=$(tail -1 "$W/peak.txt")
}
# two JSON Lines text inputs of 40 documents each (the tokenizer in assets/)
text_inputs() {
    for s in 1 2; do
        awk -v s=$s 'BEGIN { srand(s); for (i = 0; i < 40; i++) { l = ""; for (j = 0; j < 3 + i % 7; j++) l = l "w" s int(rand() * 300) " "; print "{\"text\": \"" l "\"}" } }' >"in$s.jsonl"
    done
}
# inputs FILE KEY: the values of "KEY" in the "inputs" entries of a dataset.json, space-separated
inputs() { grep -E "^			\"$2\":" "$1" | sed -E 's/.*:[[:space:]]*"?([^",]*)"?,?$/\1/' | tr '\n' ' '; }

case "$CASE" in
config_alias_bomb)
    # 145 KB: a 50 KB string aliased 20,000 times in a list flag (before: copied each time, 1 GB
    # resident) and the nested kind: refused at the alias that passes the limit, in bounded memory
    python3 - <<'P'
open("bomb.yaml", "w").write('gpu: &a "' + "x" * 50000 + '"\nhealthy: [' + ",".join(["*a"] * 20000) + "]\n")
lines = ['lr: &a0 "lol"']
for i in range(1, 9):
    lines.append(f"x{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]")
open("laughs.yaml", "w").write("\n".join(lines) + "\n")
P
    (ulimit -v 400000; exec timeout 60 "$ZT" calibrate --config bomb.yaml --print-config) >out.txt 2>&1
    rc=$?
    [ $rc -eq 2 ] || { head -c 600 out.txt; fail "the alias bomb: exit $rc under a 400 MB address space, not 2"; }
    grep -qF "bomb.yaml:2:" out.txt && grep -qF "the aliases expand past the limit of a run file at *a" out.txt &&
        grep -qF "at most 10000 nodes and 1048576 bytes" out.txt || { cat out.txt; fail "the error lacks FILE:LINE or the limit"; }
    echo "refused: $(cat out.txt)"
    if [ -x /usr/bin/time ]; then
        peak_kb "$ZT" calibrate --config bomb.yaml --print-config
        [ "$RC" -eq 2 ] && [ "$KB" -lt 100000 ] || { head -c 600 out.txt; fail "exit $RC, peak resident $KB KB (want 2, < 100 MB)"; }
        echo "peak resident set: $KB KB"
    fi
    expect_error 2 "laughs.yaml:" "the aliases expand past the limit of a run file" -- \
        timeout 60 "$ZT" train --config laughs.yaml --print-config
    # anchors a run file may use: a value shared by two flags
    printf 'gpu: &g G\nhealthy: &h [a.csv, b.csv]\nidle: *h\n' >ok.yaml
    "$ZT" calibrate --config ok.yaml --print-config >ok.txt 2>&1 || { cat ok.txt; fail "a file with two aliases"; }
    [ "$(grep -c '^  - [ab].csv$' ok.txt)" -eq 4 ] || { cat ok.txt; fail "the aliased list"; }
    echo "ok [$CASE]"
    ;;
config_deep_nesting)
    # 400 KB of nested flow collections (before: libyaml's scanner, quadratic in the nesting, ran
    # for minutes): refused at once with FILE:LINE:COL and the limit, a mapping nested 9 deep too
    python3 -c "
n = 100000
open('deep.yaml', 'w').write('lr: ' + '{a: ' * n + '1' + '}' * n + '\n')
open('deep2.yaml', 'w').write('seed: 1\nlr: ' + '[' * n + ']' * n + '\n')
"
    for f in deep deep2; do
        s=$(date +%s%N)
        expect_error 2 "$f.yaml:" "collections nested more than 8 deep, the most a run file may nest" -- \
            timeout 20 "$ZT" train --config $f.yaml --print-config
        ms=$((($(date +%s%N) - s) / 1000000))
        [ $ms -lt 5000 ] || fail "$f.yaml refused after $ms ms"
        echo "$f.yaml: refused in $ms ms"
    done
    grep -qF "deep2.yaml:2:" out.txt || fail "the line of the nesting in deep2.yaml"
    printf 'optimizer:\n  lr: [[[[[[[[1]]]]]]]]\n' >nine.yaml
    expect_error 2 "nine.yaml:2:" "nested more than 8 deep" -- "$ZT" train --config nine.yaml --print-config
    echo "ok [$CASE]"
    ;;
config_error_lines)
    # bytes libyaml's reader refuses are placed at their line and column (before: FILE:1:1)
    printf 'lr: 1e-3\nseed: 2\nsteps: 3\nrun_dir: "a\033b"\n' >ctl.yaml
    expect_error 2 "ctl.yaml:4:12: not YAML: control characters are not allowed (U+001B" -- \
        "$ZT" train --config ctl.yaml --print-config
    printf 'lr: 1e-3\n\n# a comment\nseed: 2\nsteps: 3\n\nrun_dir: a\377b\n' >utf.yaml
    expect_error 2 "utf.yaml:7:11: not YAML: invalid leading UTF-8 octet (0xff" -- \
        "$ZT" train --config utf.yaml --print-config
    printf 'lr: 1e-3\r\nseed: 2\r\n\r\ndata: "\xc3\xa4\xc3\xa4\x01"\r\n' >crlf.yaml  # CR LF, two-byte characters
    expect_error 2 "crlf.yaml:4:10: not YAML: control characters are not allowed (U+0001" -- \
        "$ZT" train --config crlf.yaml --print-config
    printf 'lr: 1e-3\nseed: 2\ndata: "\xe2\x28\xa1"\n' >trail.yaml
    expect_error 2 "trail.yaml:3:9: not YAML: invalid trailing UTF-8 octet (0x28" -- \
        "$ZT" train --config trail.yaml --print-config
    echo "ok [$CASE]"
    ;;
config_print_hostile)
    # --print-config of paths holding U+2028, U+0085, U+FEFF, a C1 control: fed back with
    # --config, byte-identical run.json settings; a path that is not UTF-8: refused by name
    awk 'BEGIN{srand(31); for(d=0; d<64; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*78) " "; print line }}' >docs.txt
    D=$'da\xc2\x85ta\xe2\x80\xa9'
    R=$'r\xe2\x80\xa8un\xef\xbb\xbf\xc2\x9f'
    "$ZT" pack --quiet --input ids --vocab-size 80 --seq-len 16 -o "$D" docs.txt >/dev/null || fail "pack"
    F=(--init "$GOLD/tiny_untied_gqa" --data "$D" --run-dir "$R" --lr 1e-3 --warmup 2 --micro-batch 2 --steps 3
       --threads 1 --log-every 0 --no-tensorboard --seed 99 --keep-last 1 --eval-data "$D" --eval-batches 1)
    "$ZT" train "${F[@]}" >a.txt 2>&1 || { cat a.txt; fail "run from flags"; }
    mv "$R" run-flags
    "$ZT" train "${F[@]}" --print-config >cfg.yaml 2>err.txt || { cat err.txt; fail "--print-config"; }
    grep -qF 'run_dir: "r\u2028un\ufeff\x9f"' cfg.yaml && grep -qF 'data: "da\x85ta\u2029"' cfg.yaml ||
        { grep -E '^(run_dir|data):' cfg.yaml | od -c | head; fail "the paths are not escaped"; }
    "$ZT" train --config cfg.yaml --print-config >cfg2.yaml 2>&1 || { cat cfg2.yaml; fail "--print-config of the file"; }
    cmp cfg.yaml cfg2.yaml || fail "--print-config of the file differs from the flags'"
    "$ZT" train --config cfg.yaml >b.txt 2>&1 || { cat b.txt; fail "run from the config file"; }
    [ -f "$R/run.json" ] || fail "the run from the file is not in the same run directory"
    python3 - run-flags "$R" <<'P' || fail "run.json's settings differ"
import json, sys
a, b = (json.load(open(d + "/run.json"))["config"]["settings"] for d in sys.argv[1:3])
assert json.dumps(a) == json.dumps(b), "config.settings differ"
assert b["run_dir"] == "r\u2028un\ufeff\x9f" and b["data"] == "da\x85ta\u2029", (b["run_dir"], b["data"])
print("ok:", len(a), "settings identical, run_dir", ascii(b["run_dir"]), "data", ascii(b["data"]))
P
    expect_error 2 "--run-dir: the value is not UTF-8 text (byte 0xff at byte 3 of it)" -- \
        "$ZT" train --data d --run-dir $'bad\xffdir' --print-config
    [ "$(grep -c '^' out.txt)" -eq 1 ] || { cat out.txt; fail "printed settings before the refusal"; }
    echo "ok [$CASE]"
    ;;
config_proc_file)
    # a /proc file (st_size 0) is read to its end and refused for what it holds (before: read as
    # empty, exit 0 with the defaults); an empty file or one of comments sets nothing and is accepted
    expect_error 2 "/proc/self/status:1: unknown key 'Name'" -- "$ZT" train --config /proc/self/status --print-config
    : >empty.yaml
    printf '# nothing set yet\n\n' >comments.yaml
    "$ZT" train --print-config >defaults.txt 2>&1 || fail "--print-config"
    for f in empty comments; do
        "$ZT" train --config $f.yaml --print-config >$f.txt 2>&1 || { cat $f.txt; fail "$f.yaml refused"; }
        cmp defaults.txt $f.txt || fail "$f.yaml changed a setting"
    done
    echo "ok [$CASE]"
    ;;
config_too_long)
    # a file past 1 MiB (comments and all): refused with the line where the limit falls
    python3 -c "open('long.yaml', 'w').write('lr: 1e-3\n' + ('# ' + 'x' * 98 + '\n') * 11000)"
    expect_error 2 "long.yaml:10383: the config file goes on past 1048576 bytes" -- \
        "$ZT" train --config long.yaml --print-config
    echo "ok [$CASE]"
    ;;
mix_huge_weights)
    # weights 1e308 and 1e308 (before: their sum overflowed: 0 blocks, "mixture of
    # -9223372036854775808 tokens", negative counts): the same mixture as 1 and 1, byte for byte
    text_inputs
    "$ZT" pack --quiet --input jsonl --seq-len 16 in1.jsonl:1e308 in2.jsonl:1e308 -o big >big.txt 2>&1 ||
        { cat big.txt; fail "weights 1e308"; }
    "$ZT" pack --quiet --input jsonl --seq-len 16 in1.jsonl:1 in2.jsonl:1 -o one >one.txt 2>&1 ||
        { cat one.txt; fail "weights 1"; }
    cat big.txt
    cmp big/data.u32 one/data.u32 || fail "1e308:1e308 packs other blocks than 1:1"
    grep -qE "^mixture of [1-9][0-9]* tokens" big.txt || fail "the mixture's size"
    [ "$(inputs big/dataset.json taken_tokens)" = "$(inputs one/dataset.json taken_tokens)" ] ||
        fail "taken tokens $(inputs big/dataset.json taken_tokens) vs $(inputs one/dataset.json taken_tokens)"
    grep -q -- '-[0-9]' big/dataset.json && fail "a negative number in dataset.json"
    # 1e308 beside 1e-300: the small one's share is 0, nothing of it taken, said
    "$ZT" pack --input jsonl --seq-len 16 in1.jsonl:1e308 in2.jsonl:1e-300 -o far >far.txt 2>&1 ||
        { cat far.txt; fail "weights 1e308 and 1e-300"; }
    grep -qF "in2.jsonl: its share of 0 tokens is less than half of a document: nothing of it is taken" far.txt ||
        { cat far.txt; fail "the warning"; }
    expect_error 2 "in1.jsonl:1e309: weight 1e309: out of the range of a double" -- \
        "$ZT" pack --quiet --input jsonl in1.jsonl:1e309 in2.jsonl:1 -o e1
    expect_error 2 "in1.jsonl:1e-400: weight 1e-400: out of the range of a double" -- \
        "$ZT" pack --quiet --input jsonl in1.jsonl:1e-400 in2.jsonl:1 -o e2
    expect_error 2 "in2.jsonl:nan: weight nan: a mixture's weights are positive numbers" -- \
        "$ZT" pack --quiet --input jsonl in1.jsonl:1 in2.jsonl:nan -o e3
    echo "ok [$CASE]"
    ;;
mix_colon_file)
    # a file named b.jsonl:1 (before: "1 of the 2 inputs have none", naming neither)
    text_inputs
    cp in2.jsonl 'b.jsonl:1'
    expect_error 2 "1 of the 2 inputs have none: 'b.jsonl:1' (the file b.jsonl:1 exists and b.jsonl does not, so it is read as a path; write b.jsonl:1:WEIGHT to weight it)" -- \
        "$ZT" pack --quiet --input jsonl in1.jsonl:1 b.jsonl:1 -o a
    cp in2.jsonl b.jsonl
    expect_error 2 "'b.jsonl:1' is ambiguous: the file b.jsonl:1 exists, and so does b.jsonl" -- \
        "$ZT" pack --quiet --input jsonl in1.jsonl:1 b.jsonl:1 -o b
    expect_error 2 "'in2.jsonl:x' ('x' after the last colon is no number" -- \
        "$ZT" pack --quiet --input jsonl in1.jsonl:1 in2.jsonl:x -o c
    expect_error 2 "'c.jsonl:1': read as PATH:WEIGHT, c.jsonl with weight 1, but c.jsonl does not exist (nor does a file named c.jsonl:1)" -- \
        "$ZT" pack --quiet --input jsonl in1.jsonl:1 c.jsonl:1 -o d
    # the file b.jsonl:1 weighted, and b.jsonl weighted with the weight spelled apart
    "$ZT" pack --quiet --input jsonl --seq-len 16 in1.jsonl:1 b.jsonl:1:2 -o e >e.txt 2>&1 || { cat e.txt; fail "b.jsonl:1:2"; }
    grep -qF "  b.jsonl:1: weight 2 (share 0.6667)" e.txt || { cat e.txt; fail "the weighted file b.jsonl:1"; }
    "$ZT" pack --quiet --input jsonl --seq-len 16 in1.jsonl:1 b.jsonl:1.0 -o f >f.txt 2>&1 || { cat f.txt; fail "b.jsonl:1.0"; }
    grep -qF "  b.jsonl: weight 1 (share 0.5000)" f.txt || { cat f.txt; fail "the weighted file b.jsonl"; }
    echo "ok [$CASE]"
    ;;
mix_no_block)
    # --mix-tokens 1 (before: exit 0, an empty dataset): refused with the numbers, nothing left
    text_inputs
    expect_error 1 "the mixture yields no block: a mixture of 1 tokens (--mix-tokens) takes 0 documents of 0 tokens, and a block holds 16 (--seq-len)" -- \
        "$ZT" pack --quiet --input jsonl --seq-len 16 in1.jsonl:1 in2.jsonl:1 --mix-tokens 1 -o m
    [ -e m/dataset.json ] && fail "a refused mixture left a dataset.json"
    ls -A m 2>/dev/null | grep -q . && fail "a refused mixture left files: $(ls -A m)"
    # the default size of inputs smaller than a block: refused the same way
    expect_error 1 "the mixture yields no block: a mixture of" "(the default size)" -- \
        "$ZT" pack --quiet --input jsonl --seq-len 4096 in1.jsonl:1 in2.jsonl:1 -o n
    "$ZT" pack --quiet --input jsonl --seq-len 16 in1.jsonl:1 in2.jsonl:1 --mix-tokens 64 -o ok >ok.txt 2>&1 ||
        { cat ok.txt; fail "a mixture of 4 blocks"; }
    echo "ok [$CASE]"
    ;;
*) fail "unknown case $CASE" ;;
esac
