#!/usr/bin/env python3
"""Expected results of `zerotrain pack` on text, from a plain Python packer and
Hugging Face `tokenizers`, for tests/unit/test_pack_text.c.

The inputs are derived from the documents of tests/data/tokenizer/golden.bin.gz
(the test writes the same files from the same documents; the rules are below and
in test_pack_text.c), tokenized here with `tokenizers`, packed the obvious way --
ids of a document, then <|endoftext|>; documents dealt round-robin to W ranks by
their index; each stream cut into blocks of seq_len; the tail dropped -- and
summarised per output file as blocks, tokens and CRC-32C of the block file.
Writes tests/data/tokenizer/pack_expected.json. Run from the repository root:
    python3 tests/reference/make_pack_golden.py
"""
import gzip
import json
import struct

from tokenizers import Tokenizer

TOKENIZER = "assets/qwen3-tokenizer/tokenizer.json"
GOLDEN = "tests/data/tokenizer/golden.bin.gz"
OUT = "tests/data/tokenizer/pack_expected.json"
EOS = 151643
N_JSONL = 3000       # the first documents of the corpus go to the JSON Lines input
N_FILES = 40         # and to the text-files input, after one big document
BAD_EVERY = 400      # a bad line before document i when i % BAD_EVERY == BAD_EVERY // 2 - 1
BLANK_EVERY = 1000   # a blank line before document i when i % BLANK_EVERY == BLANK_EVERY // 2


def crc32c(data, crc=0):
    table = crc32c.table
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c.table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    crc32c.table.append(c)
assert crc32c(b"123456789") == 0xE3069283


def golden_texts():
    d = gzip.open(GOLDEN).read()
    assert d[:8] == b"ZTTOKGD1"
    n = struct.unpack_from("<I", d, 8)[0]
    p, out = 12, []
    for _ in range(n):
        tl = struct.unpack_from("<I", d, p)[0]
        p += 4
        out.append(d[p:p + tl])
        p += tl
        ni = struct.unpack_from("<I", d, p)[0]
        p += 4 + 4 * ni
        dl = struct.unpack_from("<I", d, p)[0]
        p += 4
        if dl != 0xFFFFFFFF:
            p += dl
    return out


def pack(doc_ids, seq_len, per_rank):
    """doc_ids: token ids of each document in order. Returns the summary pack writes."""
    w = max(per_rank, 1)
    streams = [[] for _ in range(w)]
    for i, ids in enumerate(doc_ids):
        streams[i % w] += ids + [EOS]
    files = []
    for s in streams:
        blocks = len(s) // seq_len
        kept = s[:blocks * seq_len]
        files.append({"blocks": blocks, "tokens": blocks * seq_len, "dropped": len(s) - len(kept),
                      "crc32c": "0x%08x" % crc32c(struct.pack("<%dI" % len(kept), *kept))})
    return {"documents": len(doc_ids), "tokens": sum(len(s) for s in streams),
            "blocks": sum(f["blocks"] for f in files), "dropped": sum(f["dropped"] for f in files), "files": files}


def main():
    tok = Tokenizer.from_file(TOKENIZER)
    texts = golden_texts()[:10000]  # the corpus part (the probes follow it)
    enc = lambda docs: [e.ids for e in tok.encode_batch([d.decode("utf-8") for d in docs], add_special_tokens=False)]

    # JSON Lines: documents 0..N_JSONL-1; empty ones are bad, and so is every injected bad
    # line. Documents holding NUL are written with \u0000 and carried through (pack decodes
    # such a member itself; it refused them before 2026-12-01).
    jdocs = texts[:N_JSONL]
    injected = sum(1 for i in range(N_JSONL) if i % BAD_EVERY == BAD_EVERY // 2 - 1)
    good = [d for d in jdocs if d]
    bad = injected + len(jdocs) - len(good)
    good_ids = enc(good)

    # lines: the same documents joined by "\n"; each non-empty line (a trailing CR
    # removed) is a document
    lines = [l[:-1] if l.endswith(b"\r") else l for l in b"\n".join(jdocs).split(b"\n")]
    lines = [l for l in lines if l]
    line_ids = enc(lines)

    # text files: one big document (all corpus documents joined by "\n", > 2 MB so
    # that pack cuts it into pieces), then N_FILES documents, each its own file
    big = b"\n".join(texts)
    files = [big] + [d for d in texts[:N_FILES] if d]
    file_ids = enc(files)

    configs = [
        {"name": "jsonl_single", "input": "jsonl", "seq_len": 2048, "per_rank": 0, "bad_documents": bad,
         **pack(good_ids, 2048, 0)},
        {"name": "jsonl_per_rank", "input": "jsonl", "seq_len": 128, "per_rank": 4, "bad_documents": bad,
         **pack(good_ids, 128, 4)},
        {"name": "lines_single", "input": "lines", "seq_len": 512, "per_rank": 0, "bad_documents": 0,
         **pack(line_ids, 512, 0)},
        {"name": "text_per_rank", "input": "text", "seq_len": 1024, "per_rank": 3, "bad_documents": 0,
         "big_document_bytes": len(big), **pack(file_ids, 1024, 3)},
    ]
    with open(OUT, "w") as f:
        json.dump({"eos": EOS, "n_jsonl": N_JSONL, "n_files": N_FILES, "bad_every": BAD_EVERY,
                   "blank_every": BLANK_EVERY, "configs": configs}, f, indent=1)
        f.write("\n")
    for c in configs:
        print(c["name"], c["documents"], "documents", c["tokens"], "tokens", c["blocks"], "blocks",
              [x["blocks"] for x in c["files"]], "dropped", c["dropped"], "bad", c["bad_documents"])


if __name__ == "__main__":
    main()
