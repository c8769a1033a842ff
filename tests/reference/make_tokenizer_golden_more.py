#!/usr/bin/env python3
"""Expected ids from Hugging Face `tokenizers` for two more tokenizer.json files, for
tests/unit/test_tokenizer_more.c:

  - Qwen3.5's (tests/data/tokenizer/qwen3_5/tokenizer.json.gz, written by
    make_qwen3_5_tokenizer.py): split regex with \\p{M}, 248,044 ranks,
    ignore_merges, 33 special tokens -> tests/data/tokenizer/golden_qwen3_5.bin.gz;
  - Qwen3's tokenizer.json with GPT-2's split regex in place of Qwen's, a regex
    zerotrain does not match by hand (the PCRE2 path) -> golden_pcre2.bin.gz.

The corpus is make_tokenizer_golden.py's generator (every script, emoji, code,
whitespace runs, special-token look-alikes, random code points, text NFC changes)
with its own seed, plus documents of combining marks (Latin, Devanagari, Thai,
Hebrew, Arabic, variation selectors, enclosing keycaps) next to letters, digits,
punctuation and spaces, and short probes of every pair from a mark-heavy alphabet.
Same file format as golden.bin.gz. Needs: tokenizers, unicodedata2 (PyPI).
Run from the repository root:
    python3 tests/reference/make_tokenizer_golden_more.py
"""
import gzip
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_golden as base  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

QWEN35 = "tests/data/tokenizer/qwen3_5/tokenizer.json.gz"
QWEN3 = "assets/qwen3-tokenizer/tokenizer.json"
# GPT-2's split regex (tiktoken's r50k/p50k pattern), as its tokenizer.json would hold it
GPT2_RE = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
SEED = 20261207
N_CORPUS = 2500
N_MARKS = 600

MARKS = ([chr(c) for c in range(0x300, 0x370)] + ["\u0901", "\u0902", "\u093F", "\u094D", "\u0941", "\u0E31", "\u0E34",
         "\u0E48", "\u0E49", "\u05B0", "\u05B4", "\u05BC", "\u064B", "\u064E", "\u0650", "\u0651", "\uFE0F", "\uFE0E",
         "\u20E3", "\u20DD", "\u0488", "\u1AB0", "\u1DC0", "\U000E0100", "\u302A", "\u3099", "\u309A"])
BASES = (list("aeiouAEIOUxyzsnk") + ["क", "म", "ส", "ก", "ש", "ב", "ع", "ب", "か", "ハ", "中", "α", "д", "1", "٣", " ",
         "  ", "\n", "\t", "'", "!", ".", "-", "(", "😀", "#", "*", "\u00A0", "_", "\u200D"])


def marks_doc(rng):
    out = []
    for _ in range(rng.randint(1, 40)):
        out.append(rng.choice(BASES) if rng.random() < 0.6 else "")
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            out.append(rng.choice(MARKS))
        if rng.random() < 0.1:
            out.append(rng.choice(["'s", "'LL", " the", "\r\n", "<think>", "<|im_end|>", "<tool_response>", "<|audio_pad"]))
    return "".join(out)


def mark_probes():
    reps = ["a", "é", "中", " ", "\n", "'", "1", "!", "\u0301", "\u093F", "\uFE0F", "\u20E3", "😀", "s", "\u00A0"]
    out = []
    for x in reps:
        for y in reps:
            for z in ["a", " ", "\u0301", "!", "1"]:
                out.append(x + y + z)
    return out


def corpus(specials):
    rng = random.Random(SEED)
    base.SPECIALS = base.SPECIALS + specials + [s[:-1] for s in specials] + [s[1:] for s in specials]
    docs = [base.corpus_doc(rng, i) for i in range(N_CORPUS)]
    docs += [marks_doc(rng) for _ in range(N_MARKS)]
    docs += ["", " ", "\n", "'s", "x" * 5000, "\u0301" * 300, "a\u0301" * 300, "e\u0301\u0302!\u0301 \u0301\n\u0301"]
    docs += mark_probes()
    return docs


def write(tok, docs, out):
    encs = tok.encode_batch(docs, add_special_tokens=False)
    body = bytearray(b"ZTTOKGD1") + struct.pack("<I", len(docs))
    ntok = 0
    for text, enc in zip(docs, encs):
        t = text.encode("utf-8")
        ids = enc.ids
        ntok += len(ids)
        dec = tok.decode(ids, skip_special_tokens=False).encode("utf-8")
        body += struct.pack("<I", len(t)) + t + struct.pack("<I", len(ids)) + struct.pack("<%dI" % len(ids), *ids)
        body += struct.pack("<I", 0xFFFFFFFF) if dec == t else struct.pack("<I", len(dec)) + dec
    with open(out, "wb") as f:
        f.write(gzip.compress(bytes(body), compresslevel=9, mtime=0))
    print("%s: %d documents, %d tokens, %.1f MB raw" % (out, len(docs), ntok, len(body) / 1e6), file=sys.stderr)


def main():
    q35 = Tokenizer.from_str(gzip.open(QWEN35).read().decode("utf-8"))
    specials = [t.content for t in q35.get_added_tokens_decoder().values()]
    docs = corpus(specials)
    write(q35, docs, "tests/data/tokenizer/golden_qwen3_5.bin.gz")
    j = json.load(open(QWEN3, encoding="utf-8"))
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = GPT2_RE
    write(Tokenizer.from_str(json.dumps(j)), docs, "tests/data/tokenizer/golden_pcre2.bin.gz")


if __name__ == "__main__":
    main()
