#!/usr/bin/env bash
# JSON Lines and control characters: a raw control character inside a string is invalid
# JSON and is refused with FILE:LINE and the column (a raw NUL used to cut the document
# short without a word, rc 0); the escaped \u0000 is valid JSON and is carried into the
# document (it used to be refused), with the ids Hugging Face tokenizers gives.
#   jsonl_control.sh ZEROTRAIN DATA_DIR WORK_DIR
set -u
ZT=$1 D=$2 W=$3
rm -rf "$W" && mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
for f in raw_nul raw_tab; do
    "$ZT" pack --input jsonl --seq-len 4 -o "$W/$f" "$D/$f.jsonl" >"$W/$f.txt" 2>&1 && { cat "$W/$f.txt"; fail "$f.jsonl must be refused"; }
    grep -q "$f.jsonl:[12]: raw control character 0x0[09] at column 14" "$W/$f.txt" || { cat "$W/$f.txt"; fail "$f: message"; }
    echo "ok: $(grep -m1 error "$W/$f.txt")"
done
# malformed escapes: cJSON reads "\u12" and "\uZZZZ" as \u0000 (the document was cut there,
# rc 0); json.loads refuses both, and so does pack, naming line and column
for f in bad_escape:2:15 bad_escape_hex:1:15; do
    n=${f%%:*} at=${f#*:}
    "$ZT" pack --input jsonl --seq-len 4 -o "$W/$n" "$D/$n.jsonl" >"$W/$n.txt" 2>&1 && { cat "$W/$n.txt"; fail "$n.jsonl must be refused"; }
    grep -q "$n.jsonl:${at%%:*}: malformed escape \"\\\\u.*\" at column ${at#*:}" "$W/$n.txt" || { cat "$W/$n.txt"; fail "$n: message"; }
    echo "ok: $(grep -m1 error "$W/$n.txt")"
done
# ids of json.loads(line)["text"] + eos per line, from tokenizers 0.23.3 with assets/qwen3-tokenizer:
#   t = Tokenizer.from_file("assets/qwen3-tokenizer/tokenizer.json"); t.encode(text).ids + [151643]
want="14990 188 14615 151643 64 188 188 65 3958 141334 151643"
"$ZT" pack --quiet --input jsonl --seq-len 11 -o "$W/nul" "$D/nul_escape.jsonl" >"$W/nul.txt" 2>&1 || { cat "$W/nul.txt"; fail "nul_escape.jsonl must pack"; }
got=$(od -An -tu4 -v "$W/nul/data.u32" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
[ "$got" = "$want" ] || fail "ids of the \\u0000 documents: got '$got', want '$want'"
echo "ok: \\u0000 carried through: $got"
