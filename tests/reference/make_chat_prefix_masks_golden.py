#!/usr/bin/env python3
"""Goldens for `pack --train-on assistant|last` with a chat template that has no
{% generation %} blocks (data/chat_jinja.c, "prefix mode"): the trained spans found by rendering
the conversation prefix by prefix, as TRL's SFTTrainer finds a prompt-completion example's
completion (the prompt rendered with add_generation_prompt=True must be a prefix of prompt +
completion). For each assistant message i (assistant: every one; last: the final one):

  P = apply_chat_template(messages[:i], add_generation_prompt=True)
  F = apply_chat_template(messages[:i+1], add_generation_prompt=False)
  W = apply_chat_template(messages)           (the conversation as pack renders it)

P must be a prefix of F and F a prefix of W; the span is [len(P), len(F)) of W. Otherwise the
conversation is refused ("prefix"); a template that raises on any of them refuses it ("raise");
no assistant message refuses it ("none"), and so does an assistant message first ("empty":
transformers renders no empty conversation). The mask is transformers' return_assistant_tokens_mask
rule applied to those spans (a token is trained when it overlaps a span; tokenization_utils_base).

Writes tests/golden/chat_templates/prefix_masks.jsonl.gz: a first line {"special_tokens",
"templates", "cases"}, then one line per template x case x rule: {"t", "c", "rule", "text",
"spans" (UTF-8 byte offsets), "ids", "mask"} or {"t", "c", "rule", "error": raise|prefix|none|empty}.
Same corpus (corpus.jsonl), tokenizer (assets/qwen3-tokenizer) and fixed strftime_now as
make_chat_templates_golden.py.

    python3 tests/reference/make_chat_prefix_masks_golden.py   (transformers 5.25.0, jinja2 3.1.6)
"""
import gzip, json, os, sys

from transformers import AutoTokenizer
from transformers.utils import chat_template_utils as ctu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_chat_templates_golden import FIXED_NOW, GOLD, ROOT  # noqa: E402

# trl 1.16.0 templates without generation blocks, of several families
TEMPLATES = ["qwen3.jinja", "qwen2_5.jinja", "qwen3_5_think.jinja", "llama3_1.jinja", "gemma3.jinja", "phi3_5.jinja",
             "deepseekv3.jinja", "cohere2.jinja", "gptoss.jinja", "glm4moe.jinja"]


def main():
    tok = AutoTokenizer.from_pretrained(os.path.join(ROOT, "assets", "qwen3-tokenizer"))
    cases = [json.loads(l) for l in open(os.path.join(GOLD, "corpus.jsonl"), encoding="utf-8")]
    out, counts = [], {}
    for name in TEMPLATES:
        tpl = open(os.path.join(GOLD, "templates", name), encoding="utf-8").read()
        compiled = ctu._compile_jinja_template(tpl)
        compiled.environment.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)

        def render(msgs, kw):
            return tok.apply_chat_template(msgs, tools=c.get("tools"), chat_template=tpl, tokenize=False, **kw)

        for ci, c in enumerate(cases):
            msgs = c["messages"]
            kw = dict(c.get("vars", {}))
            for rule in ("assistant", "last"):
                rec = {"t": name, "c": ci, "rule": rule}
                turns = [i for i, m in enumerate(msgs) if m.get("role") == "assistant"]
                if rule == "last":
                    turns = turns[-1:]
                try:
                    whole = render(msgs, kw)
                    spans = []
                    for i in turns:
                        if i == 0:  # no prompt before it: transformers refuses an empty conversation
                            rec["error"] = "empty"
                            break
                        p = render(msgs[:i], {**kw, "add_generation_prompt": True})
                        f = render(msgs[:i + 1], {**kw, "add_generation_prompt": False})
                        if not f.startswith(p) or not whole.startswith(f):
                            rec["error"] = "prefix"
                            break
                        spans.append((len(p), len(f)))
                    if "error" not in rec and not turns:
                        rec["error"] = "none"
                except Exception:  # any render raising
                    rec["error"] = "raise"
                if "error" not in rec:
                    enc = tok._tokenizer.encode(whole, add_special_tokens=False)
                    mask, si = [0] * len(enc.ids), 0
                    for k, (ts, te) in enumerate(enc.offsets):  # transformers' rule, verbatim
                        while si < len(spans) and ts >= spans[si][1]:
                            si += 1
                        if si == len(spans):
                            break
                        if te > spans[si][0]:
                            mask[k] = 1
                    b = lambda i: len(whole[:i].encode("utf-8"))
                    rec.update(text=whole, spans=[[b(s), b(e)] for s, e in spans], ids=list(enc.ids), mask=mask)
                counts[rec.get("error", "ok")] = counts.get(rec.get("error", "ok"), 0) + 1
                out.append(rec)
    lines = [json.dumps({"special_tokens": tok.special_tokens_map, "templates": len(TEMPLATES), "cases": len(cases)},
                        ensure_ascii=False)]
    lines += [json.dumps(r, ensure_ascii=False) for r in out]
    with open(os.path.join(GOLD, "prefix_masks.jsonl.gz"), "wb") as raw:  # mtime 0: the same bytes every run
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
            gz.write(("\n".join(lines) + "\n").encode("utf-8"))
    print(f"{len(TEMPLATES)} templates x {len(cases)} cases x 2 rules = {len(out)} conversations: {counts}")


if __name__ == "__main__":
    sys.exit(main())
