#!/usr/bin/env python3
"""bpe-qwen (PyPI) as a whole process, for a timing of pack against it: load a Qwen
vocab.json + merges.txt directory, encode the "text" member of every line of a JSON Lines
file one document at a time, print the token count. Time it from outside (/usr/bin/time,
RAYON_NUM_THREADS=1) beside `zerotrain pack --input jsonl --threads 1` on the same file;
--prepare DIR writes the directory from a tokenizer.json first (not part of the timing).

usage: python3 benchmarks/bpe_qwen_encode.py --prepare DIR tokenizer.json
       RAYON_NUM_THREADS=1 python3 benchmarks/bpe_qwen_encode.py DIR corpus.jsonl [--no-encode]
--no-encode does all but the encoding (import, load, reading the lines): its time, taken from
the whole process's, is bpe-qwen's encoding alone.
"""
import json
import os
import sys

if len(sys.argv) == 4 and sys.argv[1] == "--prepare":
    d, j = sys.argv[2], json.load(open(sys.argv[3], encoding="utf-8"))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(j["model"]["vocab"], f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in j["model"]["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    sys.exit(0)
import bpe_qwen  # noqa: E402

tok = bpe_qwen.QwenTokenizer(sys.argv[1])
n = 0
with open(sys.argv[2], encoding="utf-8") as f:
    for line in f:
        text = json.loads(line)["text"]
        if "--no-encode" not in sys.argv[3:]:
            n += len(tok.encode(text))
print(n)
