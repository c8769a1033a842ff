#!/usr/bin/env python3
"""Qwen3.5 ids and assistant masks for the Qwen3.5 / 3.6 / 3.8 chat templates of trl (the files
qwen3_5_*.jinja, qwen3_6*.jinja, qwen3_8*.jinja of tests/golden/chat_templates/templates/) on the
conversations of corpus.jsonl, with the Qwen3.5 tokenizer (tests/data/tokenizer/qwen3_5/
tokenizer.json.gz, transformers' PreTrainedTokenizerFast over it, given the Qwen3 tokenizer's
special-token variables so that the rendered text is expected.jsonl.gz's: asserted). Read by
test_jinja_templates, which compares zerotrain's Qwen3.5 ids and masks with these.

Writes tests/golden/chat_templates/expected_qwen3_5.jsonl.gz: one line per template x case that
renders: {"t": file, "c": case, "ids": input_ids, "mask": return_assistant_tokens_mask (templates
with {% generation %} only)}.
    python3 tests/reference/make_chat_templates_q35_golden.py   (transformers 5.25.0, jinja2 3.1.6)
"""
import gzip, json, os, re, shutil, tempfile

from transformers import PreTrainedTokenizerFast
from transformers.utils import chat_template_utils as ctu

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GOLD = os.path.join(ROOT, "tests", "golden", "chat_templates")
TOKJSON = os.path.join(ROOT, "tests", "data", "tokenizer", "qwen3_5", "tokenizer.json.gz")
PICK = re.compile(r"^qwen3_(5|6|8)[_.].*jinja$")


def main():
    with gzip.open(os.path.join(GOLD, "expected.jsonl.gz"), "rt", encoding="utf-8") as f:
        head, *recs = [json.loads(line) for line in f]
    want = {(r["t"], r["c"]): r for r in recs}
    tmp = tempfile.mkdtemp()
    try:
        with gzip.open(TOKJSON, "rb") as f, open(os.path.join(tmp, "tokenizer.json"), "wb") as g:
            g.write(f.read())
        st = head["special_tokens"]
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(tmp, "tokenizer.json"),
                                      **{k: v for k, v in st.items() if k != "additional_special_tokens"})
    finally:
        shutil.rmtree(tmp)
    with open(os.path.join(GOLD, "corpus.jsonl"), encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    names = sorted(f for f in os.listdir(os.path.join(GOLD, "templates")) if PICK.match(f))
    out = []
    for name in names:
        tpl = open(os.path.join(GOLD, "templates", name), encoding="utf-8").read()
        gen = re.search(r"\{\%-?\s*generation\s*-?\%\}", tpl) is not None
        for ci, c in enumerate(cases):
            w = want[(name, ci)]
            if "error" in w:
                continue
            kw = dict(c.get("vars", {}))
            text = tok.apply_chat_template(c["messages"], tools=c.get("tools"), chat_template=tpl, tokenize=False, **kw)
            assert text == w["text"], (name, ci)
            rec = {"t": name, "c": ci}
            if gen:
                r = tok.apply_chat_template(c["messages"], tools=c.get("tools"), chat_template=tpl, tokenize=True,
                                            return_dict=True, return_assistant_tokens_mask=True, **kw)
                rec["ids"], rec["mask"] = list(r["input_ids"]), list(r["assistant_masks"])
            else:
                rec["ids"] = tok.encode(text, add_special_tokens=False)
            assert rec["ids"] == tok.encode(text, add_special_tokens=False)
            out.append(rec)
    with open(os.path.join(GOLD, "expected_qwen3_5.jsonl.gz"), "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
            gz.write("".join(json.dumps(r) + "\n" for r in out).encode("utf-8"))
    print(f"{len(names)} templates, {len(out)} renders, {sum('mask' in r for r in out)} masks")


if __name__ == "__main__":
    main()
