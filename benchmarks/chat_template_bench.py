#!/usr/bin/env python3
"""Conversations rendered, tokenized and masked per second: `zerotrain pack --input chat
--chat-template T --threads 1` (the Jinja engine in C, data/jinja*.c) against transformers'
apply_chat_template(..., tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
(jinja2 + Hugging Face tokenizers), on the same conversations, the same template and the Qwen3
tokenizer, at 1 thread (RAYON_NUM_THREADS=1, OMP_NUM_THREADS=1).

Corpus: the conversations of tests/golden/chat/conversations.jsonl and
tests/golden/chat_tools/messages.jsonl.gz (multilingual text, reasoning, tool calls, tools) that
the template renders under transformers (the others are left out of both), repeated to --n.
What is timed (best of --repeat):
  transformers  the apply_chat_template loop over messages already in memory (no JSON reading);
  zerotrain     the whole `zerotrain pack` process (wall clock: tokenizer load, reading and
                parsing the JSON Lines, rendering, tokenizing, masking, packing, writing), and
                the time pack's summary line reports (the same without loading tokenizer.json).
Token totals are checked to agree (pack's trained-token count against the masks' sum).

usage: python3 benchmarks/chat_template_bench.py [--template qwen3_training] [--n 4000] [--repeat 3]
                                                 [--zerotrain build/zerotrain]
"""
import argparse, gzip, json, os, re, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_corpus():
    lines = open(os.path.join(ROOT, "tests/golden/chat/conversations.jsonl"), encoding="utf-8").read().split("\n")
    with gzip.open(os.path.join(ROOT, "tests/golden/chat_tools/messages.jsonl.gz"), "rt", encoding="utf-8") as f:
        lines += f.read().split("\n")
    return [l for l in lines if l.strip() and '"weight"' not in l]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", default="qwen3_training")
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build/zerotrain"))
    a = ap.parse_args()
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(os.path.join(ROOT, "assets/qwen3-tokenizer"))
    tpl_path = os.path.join(ROOT, "tests/golden/chat_templates/templates", a.template + ".jinja")
    tpl = open(tpl_path, encoding="utf-8").read()

    def hf(conv):
        return tok.apply_chat_template(conv["messages"], tools=conv.get("tools"), chat_template=tpl, tokenize=True,
                                       return_dict=True, return_assistant_tokens_mask=True)

    kept = []
    for l in load_corpus():
        c = json.loads(l)
        try:
            r = hf(c)
        except Exception:
            continue
        if sum(r["assistant_masks"]) > 0:
            kept.append((l, c))
    corpus = (kept * (a.n // len(kept) + 1))[: a.n]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "conv.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for l, _ in corpus:
                f.write(l + "\n")
        best_hf = best_zt = best_pack = float("inf")
        trained_hf = 0
        for rep in range(a.repeat):
            t0 = time.perf_counter()
            trained_hf = 0
            for _, c in corpus:
                trained_hf += sum(hf(c)["assistant_masks"])
            best_hf = min(best_hf, time.perf_counter() - t0)
            out = os.path.join(tmp, f"out{rep}")
            t0 = time.perf_counter()
            p = subprocess.run([a.zerotrain, "pack", "--input", "chat", "--threads", "1", "--seq-len", "32768",
                                "--chat-template", tpl_path, path, "-o", out], capture_output=True, text=True)
            best_zt = min(best_zt, time.perf_counter() - t0)
            if p.returncode:
                sys.exit(p.stderr)
            mt = re.search(r"skipped, ([0-9.]+) s \(", p.stdout)
            if mt:
                best_pack = min(best_pack, float(mt.group(1)))
            m = re.search(r"\((\d+) trained under", p.stdout)
            trained_zt = int(m.group(1)) if m else -1
            if trained_zt != trained_hf:
                sys.exit(f"trained tokens differ: zerotrain {trained_zt}, transformers {trained_hf}\n{p.stdout}")
    n = len(corpus)
    print(f"template {a.template}, {n} conversations ({len(kept)} distinct), {trained_hf} trained tokens, 1 thread")
    print(f"transformers apply_chat_template+tokenizers: {best_hf:.2f} s, {n / best_hf:,.0f} conversations/s")
    print(f"zerotrain pack --chat-template (whole process): {best_zt:.2f} s, {n / best_zt:,.0f} conversations/s")
    print(f"zerotrain pack's own time (its summary: no tokenizer load): {best_pack:.2f} s, "
          f"{n / best_pack:,.0f} conversations/s")
    print(f"speed-up: {best_hf / best_zt:.1f}x (whole process), {best_hf / best_pack:.1f}x (pack's own time)")


if __name__ == "__main__":
    main()
