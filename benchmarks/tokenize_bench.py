#!/usr/bin/env python3
"""Tokens per second: `zerotrain pack --input jsonl` against Hugging Face
`tokenizers` (Tokenizer.encode_batch) on the same corpus, the same tokenizer.json
and the same number of threads, in one run.

The corpus is JSON Lines built from text found on the machine, so no download:
Python's standard library sources (code and docstrings), the text documents under
/usr/share/doc (English prose: copyright files, READMEs, changelogs), and the
multilingual synthetic documents of tests/reference/make_tokenizer_golden.py
(Chinese, Japanese, Korean, emoji, mixed scripts, ...), shuffled with a fixed seed.

What is timed (the two alternate, --repeat times, best of each kept):
  tokenizers  encode_batch(texts) and encode_batch_fast(texts) on texts already in
              memory (JSON parsing and writing ids excluded), RAYON_NUM_THREADS=N;
  zerotrain   the whole `zerotrain pack --threads N` process: loading tokenizer.json,
              reading and parsing the JSONL, tokenizing, packing, writing the block
              file and dataset.json (wall clock); its own
              summary line (pack time without the tokenizer load) is reported too.
Token totals must agree (pack adds one <|endoftext|> per document).
--bpe-qwen adds PyPI's `bpe-qwen` (a Rust BPE for Qwen's vocab.json + merges.txt,
made from the same tokenizer.json) at 1 thread: QwenTokenizer.encode per document.
--tokenizer picks the tokenizer.json (default: the shipped Qwen3 one); a .gz path
is unpacked first (Qwen3.5's: tests/data/tokenizer/qwen3_5/tokenizer.json.gz).

usage: python3 benchmarks/tokenize_bench.py [--mb 64] [--threads 1,2] [--repeat 3]
                                            [--zerotrain build/zerotrain] [--tokenizer PATH]
"""
import argparse
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER = os.path.join(ROOT, "assets/qwen3-tokenizer/tokenizer.json")
MAX_FILE = 256 << 10  # a document is one file of at most 256 KiB (compressed size for .gz)


def local_texts(limit_bytes, rng):
    docs, total = [], 0
    stdlib = sysconfig.get_paths()["stdlib"]
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages", "test", "tests", "idlelib"))
        for fn in sorted(filenames):
            if fn.endswith((".py", ".txt", ".rst")):
                if os.path.getsize(os.path.join(dirpath, fn)) > MAX_FILE:
                    continue
                try:
                    with open(os.path.join(dirpath, fn), encoding="utf-8") as f:
                        docs.append(("code", f.read()))
                except (UnicodeDecodeError, OSError):
                    pass
    for dirpath, dirnames, filenames in os.walk("/usr/share/doc"):
        dirnames.sort()
        for fn in sorted(filenames):
            p = os.path.join(dirpath, fn)
            low = fn.lower()
            if not (low == "copyright" or low.startswith(("readme", "changelog", "news", "changes"))):
                continue  # prose only: no PostScript, HTML or data files
            try:
                if os.path.getsize(p) > MAX_FILE:
                    continue
                if fn.endswith(".gz"):
                    with gzip.open(p, "rt", encoding="utf-8") as f:
                        docs.append(("prose", f.read()))
                else:
                    with open(p, encoding="utf-8") as f:
                        docs.append(("prose", f.read()))
            except (UnicodeDecodeError, OSError, EOFError, gzip.BadGzipFile):
                pass
    rng.shuffle(docs)
    out = []
    for kind, text in docs:
        if not text or len(text) > 4 * MAX_FILE:
            continue
        out.append(text)
        total += len(text.encode())
        if total >= limit_bytes:
            break
    return out, total


def synthetic_texts(limit_bytes, rng):
    sys.path.insert(0, os.path.join(ROOT, "tests/reference"))
    import make_tokenizer_golden as g
    out, total, i = [], 0, 0
    while total < limit_bytes:
        d = g.corpus_doc(rng, i)
        i += 1
        if d and "\x00" not in d:  # cJSON cannot carry NUL: pack would refuse such lines
            out.append(d)
            total += len(d.encode())
    return out, total


def hf_run(texts_path, threads, repeat):
    """encode_batch in a child process, so that RAYON_NUM_THREADS takes effect."""
    code = r"""
import json, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
texts = [json.loads(l)["text"] for l in open(sys.argv[2], encoding="utf-8")]
res = {"docs": len(texts)}
# encode_batch_fast (tokenizers >= 0.21) skips the offsets; time both, keep the best of each
for name in ["encode_batch", "encode_batch_fast"]:
    fn = getattr(tok, name, None)
    if fn is None:
        continue
    best = None
    for _ in range(int(sys.argv[3])):
        t = time.perf_counter()
        enc = fn(texts, add_special_tokens=False)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    res[name] = best
    res["tokens"] = sum(len(e.ids) for e in enc)
print(json.dumps(res))
"""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
    r = subprocess.run([sys.executable, "-c", code, TOKENIZER, texts_path, str(repeat)], env=env, check=True,
                       capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def bpe_qwen_run(texts_path, repeat, workdir):
    """bpe-qwen's QwenTokenizer, one document at a time on one thread, in a child process."""
    d = os.path.join(workdir, "bpe_qwen")
    os.makedirs(d, exist_ok=True)
    j = json.load(open(TOKENIZER, encoding="utf-8"))
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(j["model"]["vocab"], f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in j["model"]["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    code = r"""
import json, sys, time
import bpe_qwen
tok = bpe_qwen.QwenTokenizer(sys.argv[1])
texts = [json.loads(l)["text"] for l in open(sys.argv[2], encoding="utf-8")]
best = None
for _ in range(int(sys.argv[3])):
    t = time.perf_counter()
    n = sum(len(tok.encode(x)) for x in texts)
    dt = time.perf_counter() - t
    best = dt if best is None else min(best, dt)
print(json.dumps({"seconds": best, "tokens": n}))
"""
    env = dict(os.environ, RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code, d, texts_path, str(repeat)], env=env, check=True,
                       capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def zt_run(exe, texts_path, threads, repeat, workdir):
    best, summary = None, None
    for k in range(repeat):
        out = os.path.join(workdir, "out-%d-%d" % (threads, k))
        t = time.perf_counter()
        r = subprocess.run([exe, "pack", "--input", "jsonl", "--threads", str(threads), "--quiet", "--tokenizer",
                            TOKENIZER, texts_path, "-o", out], check=True, capture_output=True, text=True)
        dt = time.perf_counter() - t
        shutil.rmtree(out)
        m = re.search(r"packed (\d+) documents .*?: (\d+) tokens .*?, ([0-9.]+) s \(", r.stdout)
        if best is None or dt < best:
            best, summary = dt, {"docs": int(m.group(1)), "tokens": int(m.group(2)), "pack_seconds": float(m.group(3))}
    summary["seconds"] = best
    return summary


def main():
    global TOKENIZER
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=64, help="corpus size in MB (default 64)")
    ap.add_argument("--threads", default="1,%d" % os.cpu_count(), help="thread counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build/zerotrain"))
    ap.add_argument("--keep", help="write the corpus here and keep it")
    ap.add_argument("--bpe-qwen", action="store_true", help="also time bpe-qwen (PyPI) at 1 thread")
    ap.add_argument("--tokenizer", default=TOKENIZER, help="tokenizer.json (or .json.gz) to compare with")
    a = ap.parse_args()
    TOKENIZER = a.tokenizer
    rng = random.Random(1234)
    limit = int(a.mb * 1e6)
    local, lb = local_texts(int(limit * 0.75), rng)
    synth, sb = synthetic_texts(limit - lb, rng)
    texts = local + synth
    rng.shuffle(texts)
    workdir = tempfile.mkdtemp(prefix="zt_tokbench_")
    path = a.keep or os.path.join(workdir, "corpus.jsonl")
    if TOKENIZER.endswith(".gz"):
        os.makedirs(os.path.join(workdir, "tok"), exist_ok=True)
        plain = os.path.join(workdir, "tok", "tokenizer.json")
        with gzip.open(TOKENIZER, "rb") as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        TOKENIZER = plain
    print("tokenizer: %s" % a.tokenizer)
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    size = os.path.getsize(path)
    print("corpus: %d documents, %.1f MB of text (%.1f MB local code and prose, %.1f MB synthetic multilingual), "
          "JSONL %.1f MB; machine: %d cores" % (len(texts), (lb + sb) / 1e6, lb / 1e6, sb / 1e6, size / 1e6,
                                                os.cpu_count()))
    print()
    print("| threads | tokens | tokenizers encode_batch | encode_batch_fast | zerotrain pack, whole process | "
          "ratio to the faster of the two | pack without the tokenizer load |")
    print("|---|---|---|---|---|---|---|")
    for n in [int(x) for x in a.threads.split(",")]:
        # alternate the two, so that both see the same load on a shared machine
        hf, zt, bq = None, None, None
        for _ in range(a.repeat):
            h = hf_run(path, n, 1)
            z = zt_run(a.zerotrain, path, n, 1, workdir)
            if a.bpe_qwen and n == 1:
                b = bpe_qwen_run(path, 1, workdir)
                bq = b if bq is None or b["seconds"] < bq["seconds"] else bq
            hf = h if hf is None else {k: min(v, hf[k]) if k.startswith("encode") else v for k, v in h.items()}
            zt = z if zt is None or z["seconds"] < zt["seconds"] else zt
        if zt["tokens"] != hf["tokens"] + hf["docs"]:
            sys.exit("token totals differ: zerotrain %d, tokenizers %d + %d eos" % (zt["tokens"], hf["tokens"], hf["docs"]))
        rate = lambda sec: "%.2fM tok/s (%.2f s)" % (hf["tokens"] / sec / 1e6, sec) if sec else "n/a"
        hf_best = min(v for k, v in hf.items() if k.startswith("encode_batch"))
        print("| %d | %d | %s | %s | %s | %.1fx | %s |" %
              (n, hf["tokens"], rate(hf.get("encode_batch")), rate(hf.get("encode_batch_fast")), rate(zt["seconds"]),
               hf_best / zt["seconds"], rate(zt["pack_seconds"])))
        if bq:
            print("|   | bpe-qwen encode per document, 1 thread: %.2fM tok/s (%.2f s, %d tokens); zerotrain pack "
                  "(whole process) / bpe-qwen: %.1fx |" % (bq["tokens"] / bq["seconds"] / 1e6, bq["seconds"],
                                                           bq["tokens"], bq["seconds"] / zt["seconds"]))
        sys.stdout.flush()
    if not a.keep:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
