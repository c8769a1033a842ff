#!/usr/bin/env bash
# Regenerates the seed corpora in tests/fuzz/corpus/ (checked in; run by hand when a
# format changes). Needs a built ./build/zerotrain and ./build-fuzz/fuzz_ckpt_meta
# (tests/fuzz/run.sh --build-only) and python3.
#   bash tests/fuzz/make_seeds.sh
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ZT=${ZT:-$SRC/build/zerotrain}
C=$SRC/tests/fuzz/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
rm -rf "$C" && mkdir -p "$C"/{safetensors,dataset,config,tokenizer,jsonl,ckpt_meta,flight,watch}

# safetensors: the file the Python library wrote, and one of every dtype the reader knows
cp "$SRC/tests/data/safetensors/python_written.safetensors" "$C/safetensors/python_written"
python3 - "$C/safetensors" <<'PY'
import json, struct, sys
out = sys.argv[1]
def st(name, tensors, meta=None):
    hdr, data = {}, b""
    if meta: hdr["__metadata__"] = meta
    for n, (dt, shape, raw) in tensors.items():
        hdr[n] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(f"{out}/{name}", "wb").write(struct.pack("<Q", len(h)) + h + data)
st("all_dtypes", {
    "f32": ("F32", [2, 2], struct.pack("<4f", 1, -2, 3.5, 0)),
    "bf16": ("BF16", [3], bytes.fromhex("803f00c00040")),
    "f16": ("F16", [2], bytes.fromhex("003c00c0")),
    "f64": ("F64", [1], struct.pack("<d", 2.5)),
    "i64": ("I64", [2], struct.pack("<2q", -1, 7)),
    "i32": ("I32", [2], struct.pack("<2i", 3, -4)),
    "u32": ("U32", [1], struct.pack("<I", 9)),
    "u8": ("U8", [3], b"\x01\x02\x03"),
}, {"format": "pt"})
st("empty_tensor", {"e": ("F32", [0, 4], b""), "s": ("F32", [], struct.pack("<f", 1))})
st("bool_other", {"b": ("BOOL", [2], b"\x00\x01"), "x": ("F32", [1], struct.pack("<f", 1))})
PY

# dataset: real packs (single file, 2 and 3 ranks) in the harness's container format
for layout in single 2 3; do
    awk -v s=$layout 'BEGIN{srand(length(s)); for(d=0; d<9; d++){ n=1+int(rand()*9); line=""; for(i=0;i<n;i++) line=line int(rand()*50) " "; print line }}' >"$T/docs-$layout.txt"
    extra=(); [ "$layout" = single ] || extra=(--per-rank "$layout")
    "$ZT" pack --quiet --input ids --vocab-size 50 --eos 49 --seq-len 4 "${extra[@]}" -o "$T/ds-$layout" "$T/docs-$layout.txt" >/dev/null
    python3 - "$T/ds-$layout" "$C/dataset/pack_$layout" <<'PY'
import os, struct, sys
d, out = sys.argv[1:]
blob = open(f"{d}/dataset.json", "rb").read() + b"\0"
for n in ["data.u32", "rank-00000.u32", "rank-00001.u32", "rank-00002.u32", "rank-00003.u32"]:
    b = open(f"{d}/{n}", "rb").read() if os.path.exists(f"{d}/{n}") else b""
    blob += struct.pack("<H", len(b)) + b
open(out, "wb").write(blob)
PY
done

# config: the tiny test models and Qwen3-32B's
cp "$SRC/tests/golden/tiny_untied_gqa/config.json" "$C/config/tiny_untied_gqa"
cp "$SRC/tests/golden/tiny_tied/config.json" "$C/config/tiny_tied"
cat >"$C/config/qwen3_32b" <<'J'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 5120,
 "intermediate_size": 25600, "num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8,
 "head_dim": 128, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "rope_scaling": null, "tie_word_embeddings": false,
 "initializer_range": 0.02, "max_position_embeddings": 40960, "bos_token_id": 151643, "eos_token_id": [151645, 151643],
 "attention_bias": false, "hidden_act": "silu", "use_sliding_window": false, "torch_dtype": "bfloat16",
 "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"}}
J

# tokenizer: scripts, combining marks (NFC), added tokens, newlines before letters (safe cuts)
printf 'Hello, world!\nSecond line: 12345 apples.\n' >"$C/tokenizer/ascii"
printf 'Caf\xc3\xa9 cafe\xcc\x81 \xc3\x85ngstr\xc3\xb6m \xe1\xba\xa1\xcc\x82\nna\xc3\xafve\r\nZ' >"$C/tokenizer/nfc"
printf '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n</think>\nOK<|endoftext|>' >"$C/tokenizer/added"
printf '\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\n\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd' >"$C/tokenizer/scripts"
printf '    def f(x):\n\treturn x  # tabs   and spaces\n\n\n   \nEnd' >"$C/tokenizer/code"
printf 'bad \xff byte \xc3 cut' >"$C/tokenizer/invalid"
# NFC of text that starts with a combining mark called memcpy(NULL, s, 0) (UBSan; fixed)
printf '\xcc\x81x starts with a combining mark' >"$C/tokenizer/combining_first"
# tokenizer_split: the same texts, and marks after letters, punctuation, digits and spaces (Qwen3.5's \p{M})
mkdir -p "$C/tokenizer_split" && cp "$C"/tokenizer/* "$C/tokenizer_split/"
printf 'a\xcc\x81b .\xcc\x81 1\xcc\x81 \xcc\x81 \xe0\xa4\x95\xe0\xa4\xbe\xe0\xa4\x82 x\xe2\x83\x9d!\xcd\xa3\n\xcc\x81' >"$C/tokenizer_split/marks"

# jsonl: knob byte 0x00 (tiny buffers), then the file
for f in sample nul_escape raw_nul raw_tab; do
    { printf '\x00'; cat "$SRC/tests/data/tokenizer/cli/$f.jsonl"; } >"$C/jsonl/$f"
done
{ printf '\xc5'; printf '%s\n' '{"id": 1, "text": "caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t", "meta": {"a": [1, {"text": "no"}]}}' \
    '' '   ' '{"text": "second\r\nline"}' '{"text": ""}' '{"text": 5}' '{"other": "x"}' '[1,2]' '{"text": "x"} trailing' \
    '{"text": "lone \udc00"}' '{"t\u0065xt": "escaped key"}'; printf '{"text": "no newline at the end"}'; } >"$C/jsonl/mixed"
printf '\x41{"text": "a\\u0000b", "text": "dup"}\r\n{"text": "Caf\xc3\xa9\\n\\nNext paragraph\\nAnd more"}\n' >"$C/jsonl/dup_crlf"

# ckpt_meta: a real checkpoint of the tiny model, dumped as the harness's script
awk 'BEGIN{srand(2); for(d=0; d<8; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$T/d.txt"
"$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$T/data" "$T/d.txt" >/dev/null
OMP_NUM_THREADS=1 "$ZT" train --init "$SRC/tests/golden/tiny_untied_gqa" --data "$T/data" --run-dir "$T/run" \
    --steps 2 --save-every 2 --log-every 0 --no-preflight >/dev/null
ZT_FUZZ_DUMP="$T/run/checkpoints/step-00000002/ckpt.h5" "$SRC/build-fuzz/fuzz_ckpt_meta" >"$C/ckpt_meta/tiny_step2" 2>/dev/null
grep -v '^/units/' "$C/ckpt_meta/tiny_step2" >"$C/ckpt_meta/header_only"
# flight, watch: small rings in engine/flight.h's layout and run directories' watcher files
python3 "$SRC/tests/fuzz/flight_seeds.py" "$C"
du -sh "$C"/* | sed 's/^/make_seeds: /'
