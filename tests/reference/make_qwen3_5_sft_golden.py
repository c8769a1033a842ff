#!/usr/bin/env python3
"""Qwen3.5 fine-tuning end to end: the golden of tests/cli/qwen3_5_sft.sh, which packs conversations
with `zerotrain pack --input chat --tokenizer <Qwen3.5 tokenizer.json> --chat-template
qwen3_5_think_training.jinja`, trains one step at lr 0 at W = 2 and compares the loss with the one
transformers' Qwen3_5ForCausalLM gives on each conversation alone.

Unlike make_qwen3_5_chat_golden.py (which had to borrow Qwen3's tokenizer and template), everything
here is Qwen3.5's: the tokenizer is tests/data/tokenizer/qwen3_5/tokenizer.json.gz (transformers'
PreTrainedTokenizerFast over the same file, no tokenizer_config.json: no special-token variables, as
pack sees the directory), the template trl's qwen3_5_think_training.jinja
(tests/golden/chat_templates/templates/), the model a tiny Qwen3.5 (both layer kinds) over the real
248,320-entry vocabulary, tied, hidden 32. The conversations are cases of
tests/golden/chat_templates/corpus.jsonl: single and multi-turn, system prompts, reasoning_content,
tool calls with every JSON type of argument and tool results.

Each conversation: apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True,
return_assistant_tokens_mask=True) with the training template (its {% generation %} spans: pack's
--train-on assistant); its loss is the sum over trained targets j >= 1 of -log p(id_j | ids before
j), the model run on it alone (positions from 0): what a packed, isolated block trains on. In
float64 with the float64 delta rule (make_qwen3_5_golden.delta_rule_f64); the fp32 model must agree
to 1e-5 (asserted).

To keep the committed weights small only the embedding rows of the ids the conversations use are
random; every other row repeats one of 13 rows (they still enter every softmax); gzip (mtime 0).

Writes tests/golden/q35_sft/:
    conversations.jsonl   the conversations ({"messages", "tools"?} lines)
    config.json           save_pretrained's (model_type qwen3_5_text)
    model.safetensors.gz  F32 weights, HF names
    golden.json           {"loss": sum / count, "count", "per_conversation": [{"loss_sum", "count", "tokens"}]}
Run from the repository root (transformers 5.25 with Qwen3.5, torch):
    python3 tests/reference/make_qwen3_5_sft_golden.py
"""

import gzip
import json
import os
import shutil
import sys
import tempfile

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save
from transformers import PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(__file__))
import make_golden as mg  # noqa: E402
import make_qwen3_5_golden as m35  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TOKJSON = os.path.join(ROOT, "tests", "data", "tokenizer", "qwen3_5", "tokenizer.json.gz")
TEMPLATE = os.path.join(ROOT, "tests", "golden", "chat_templates", "templates", "qwen3_5_think_training.jinja")
CORPUS = os.path.join(ROOT, "tests", "golden", "chat_templates", "corpus.jsonl")
CASES = [0, 1, 2, 4, 5, 12, 6, 7]  # no "vars" (pack's --template-var is one per dataset)
OUT = os.path.join(mg.GOLDEN, "q35_sft")
SEED = 3535
PERIOD = 13

CONFIG = dict(
    vocab_size=248320, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
    num_attention_heads=2, num_key_value_heads=1, head_dim=16,
    layer_types=["linear_attention", "full_attention", "linear_attention"],
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
    tie_word_embeddings=True,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25},
    **{**m35.COMMON, "initializer_range": 0.2, "max_position_embeddings": 1024},
)


def tokenized(tok, tpl, cases):
    out = []
    for c in cases:
        kw = {"tools": c["tools"]} if c.get("tools") else {}
        text = tok.apply_chat_template(c["messages"], chat_template=tpl, tokenize=False, **kw)
        r = tok.apply_chat_template(c["messages"], chat_template=tpl, tokenize=True, return_dict=True,
                                    return_assistant_tokens_mask=True, **kw)
        assert r["input_ids"] == tok(text, add_special_tokens=False)["input_ids"]
        out.append((r["input_ids"], r["assistant_masks"]))
    return out


def weights(used):
    torch.manual_seed(SEED)
    model = m35.build_model(CONFIG)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.ndim != 1 or n.endswith("A_log"):
                continue
            base = 1.0 if (n.endswith("linear_attn.norm.weight") or n.endswith("dt_bias")) else 0.0
            p.copy_(base + 0.1 * torch.randn(p.shape))
        emb = model.model.embed_tokens.weight
        V, H = emb.shape
        rows = 0.02 * torch.randn(PERIOD, H)
        emb.copy_(rows[torch.arange(V) % PERIOD])
        idx = torch.tensor(sorted(used))
        emb[idx] = torch.randn(len(idx), H)
    return {n: p.detach().clone().contiguous() for n, p in model.named_parameters()}


def losses(w0, convs, dtype):
    model = m35.build_model(CONFIG, dtype)
    m35.set_weights(model, {n: t.to(dtype) for n, t in w0.items()})
    model.eval()
    out = []
    with torch.no_grad():
        for ids, mask in convs:
            x = torch.tensor(ids).unsqueeze(0)
            logits = model(input_ids=x, use_cache=False).logits[0, :-1, :]
            keep = torch.tensor(mask[1:], dtype=torch.bool)
            ce = F.cross_entropy(logits[keep], x[0, 1:][keep], reduction="sum")
            out.append((float(ce), int(keep.sum())))
            del logits
    return out


def main():
    mg.setup_determinism()
    print(f"torch {torch.__version__}  transformers {transformers.__version__}")
    tmp = tempfile.mkdtemp()
    try:
        with gzip.open(TOKJSON, "rb") as f, open(os.path.join(tmp, "tokenizer.json"), "wb") as g:
            g.write(f.read())
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(tmp, "tokenizer.json"))
    finally:
        shutil.rmtree(tmp)
    with open(TEMPLATE, encoding="utf-8") as f:
        tpl = f.read()
    with open(CORPUS, encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f.read().splitlines()]
    cases = []
    for i in CASES:
        c = corpus[i]
        assert "vars" not in c
        cases.append({k: c[k] for k in ("messages", "tools") if k in c})
    convs = tokenized(tok, tpl, cases)
    used = {i for ids, _ in convs for i in ids}
    w0 = weights(used)

    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    with open(os.path.join(OUT, "conversations.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases))
    m35.build_model(CONFIG).config.save_pretrained(OUT)
    blob = save(w0, metadata={"format": "pt"})
    with gzip.GzipFile(os.path.join(OUT, "model.safetensors.gz"), "wb", mtime=0, compresslevel=9) as f:
        f.write(blob)
    tmpw = os.path.join(OUT, "model.safetensors")
    with open(tmpw, "wb") as f:
        f.write(blob)
    hf = transformers.Qwen3_5ForCausalLM.from_pretrained(OUT, dtype=torch.float32)
    os.remove(tmpw)
    for n, p in hf.named_parameters():
        assert torch.equal(p.detach(), w0[n]), n
    del hf

    chunked = m35.mq.torch_chunk_gated_delta_rule
    m35.mq.torch_chunk_gated_delta_rule = m35.delta_rule_f64
    try:
        l64 = losses(w0, convs, torch.float64)
    finally:
        m35.mq.torch_chunk_gated_delta_rule = chunked
    l32 = losses(w0, convs, torch.float32)
    total, count = sum(s for s, _ in l64), sum(c for _, c in l64)
    t32 = sum(s for s, _ in l32)
    lens = [len(i) for i, _ in convs]
    print(f"{len(convs)} conversations, tokens {lens}, {count} trained targets, {len(used)} distinct ids; "
          f"loss {total / count:.9f} (fp32 {t32 / count:.9f}, rel {abs(t32 - total) / total:.1e})")
    assert abs(t32 - total) <= 1e-5 * total
    golden = {"loss": total / count, "count": count, "conversations": len(convs),
              "per_conversation": [{"loss_sum": s, "count": c, "tokens": n} for (s, c), n in zip(l64, lens)],
              "ids": [ids for ids, _ in convs], "masks": ["".join("1" if m else "0" for m in mk) for _, mk in convs],
              "torch": torch.__version__, "transformers": transformers.__version__}
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    sizes = {f: os.path.getsize(os.path.join(OUT, f)) for f in sorted(os.listdir(OUT))}
    print(f"files {sizes}")
    assert sum(sizes.values()) < 1 << 20


if __name__ == "__main__":
    main()
