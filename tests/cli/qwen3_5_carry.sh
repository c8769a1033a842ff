#!/usr/bin/env bash
# Tensors the model does not train, carried from --init to export and RUN/final (checkpoint/hf_carry.c):
# the released Qwen3.5 layouts (tests/reference/make_qwen3_5_fixtures.py) trained one step at lr 0.
# At lr 0 nothing moves (AdamW's decay is lr x wd x p), so an fp32 export must hold every tensor of
# the input byte for byte: the text weights under the input's names, the MTP head (bf16) and the
# vision tower as they were, and config.json verbatim. One case per invocation:
#   vlm       Qwen3_5ForConditionalGeneration (model.language_model.*, model.visual.*, mtp.*)
#   text_mtp  Qwen3_5ForCausalLM with an MTP head
#   resume    a resume keeps RUN/carry as it is; a damaged carry is refused on resume and on export
#   qwen3_5_carry.sh ZEROTRAIN SOURCE_DIR WORK CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/qwen3_5_carry/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP [$CASE]: no python3 to read the safetensors headers"; exit 77; }

# same_tensors INPUT_DIR EXPORT_DIR: every tensor of the input's model.safetensors is in the export
# (model.safetensors, or the shards of its index) with the same dtype, shape and bytes, and nothing else.
same_tensors() {
    python3 - "$1" "$2" <<'EOF' || fail "$2 differs from $1"
import json, os, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    head.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()}
def model(d):
    ix = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(ix))["weight_map"].values())) if os.path.exists(ix) else ["model.safetensors"]
    out = {}
    for f in files:
        out.update(tensors(os.path.join(d, f)))
    return out
a, b = model(sys.argv[1]), model(sys.argv[2])
bad = [k for k in a if k not in b or a[k] != b[k]] + [k for k in b if k not in a]
carried = [k for k in a if k.startswith(("mtp.", "model.visual."))]
print(f"{sys.argv[2]}: {len(b)} tensors ({len(carried)} carried), {len(bad)} differ{': ' + ', '.join(bad[:5]) if bad else ''}")
sys.exit(1 if bad or not carried else 0)
EOF
}

awk 'BEGIN{srand(7); for(d=0; d<16; d++){ line=""; for(i=0;i<16;i++) line=line int(3+rand()*90) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
T=(--data "$W/data" --lr 0 --warmup 0 --threads 1 --log-every 0 --save-dtype fp32)

# train_export INPUT: one step from INPUT, RUN/final and `zerotrain export` both checked.
train_export() {
    local in="$GOLD/$1"
    "$ZT" train --init "$in" "${T[@]}" --run-dir "$W/run" --steps 1 >"$W/train.out" 2>&1 ||
        { cat "$W/train.out"; fail "train"; }
    grep -q "init: carried [0-9]* tensors" "$W/train.out" || { cat "$W/train.out"; fail "no carry reported"; }
    cmp "$in/config.json" "$W/run/carry/config.json" || fail "RUN/carry/config.json is not the input's"
    "$ZT" export --dtype fp32 "$W/run" "$W/hf" >"$W/export.out" 2>&1 || { cat "$W/export.out"; fail "export"; }
    for out in "$W/run/final" "$W/hf"; do
        cmp "$in/config.json" "$out/config.json" || fail "$out/config.json is not the input's"
        same_tensors "$in" "$out"
    done
    # sharded: the carried tensors named in the index, still byte-identical
    "$ZT" export --dtype fp32 --max-shard-size 20KB "$W/run" "$W/hf-sharded" >/dev/null 2>&1 || fail "sharded export"
    [ -f "$W/hf-sharded/model.safetensors.index.json" ] || fail "no index in the sharded export"
    same_tensors "$in" "$W/hf-sharded"
}

case "$CASE" in
vlm)
    train_export qwen3_5_vlm
    # it loads as the class it came from (where transformers is installed)
    if python3 -c "import transformers" 2>/dev/null; then
        python3 -c "
import sys
from transformers import Qwen3_5ForConditionalGeneration
Qwen3_5ForConditionalGeneration.from_pretrained(sys.argv[1])" "$W/hf" >"$W/hf.out" 2>&1 ||
            { cat "$W/hf.out"; fail "transformers cannot load the export"; }
    fi
    ;;
text_mtp)
    train_export qwen3_5_text_mtp
    ;;
resume)
    in="$GOLD/qwen3_5_vlm"
    "$ZT" train --init "$in" "${T[@]}" --run-dir "$W/run" --steps 1 >"$W/a.out" 2>&1 || { cat "$W/a.out"; fail "train"; }
    before=$(stat -c '%i %Y' "$W/run/carry/carried.safetensors")
    "$ZT" train --init "$in" "${T[@]}" --run-dir "$W/run" --steps 2 --resume latest --allow-new-schedule >"$W/b.out" 2>&1 ||
        { cat "$W/b.out"; fail "resume"; }
    [ "$(stat -c '%i %Y' "$W/run/carry/carried.safetensors")" = "$before" ] || fail "the resume rewrote RUN/carry"
    same_tensors "$in" "$W/run/final"
    # damaged: refused clearly, naming the file (resume and export)
    printf '\x5a' | dd of="$W/run/carry/carried.safetensors" bs=1 seek=200 conv=notrunc status=none
    "$ZT" train --init "$in" "${T[@]}" --run-dir "$W/run" --steps 3 --resume latest --allow-new-schedule >"$W/c.out" 2>&1 &&
        fail "a resume over a damaged carry succeeded"
    grep -q "carried.safetensors: .* are damaged" "$W/c.out" || { cat "$W/c.out"; fail "resume: no damage named"; }
    "$ZT" export "$W/run" "$W/hf" >"$W/d.out" 2>&1 && fail "an export of a damaged carry succeeded"
    grep -q "carried.safetensors: .* are damaged" "$W/d.out" || { cat "$W/d.out"; fail "export: no damage named"; }
    [ ! -e "$W/hf" ] || fail "a refused export wrote $W/hf"
    ;;
*) fail "unknown case" ;;
esac
echo "ok [$CASE]"
