#!/usr/bin/env python3
"""The supervised loss of transformers' Qwen3_5ForCausalLM on chat conversations, each alone: the
golden of tests/cli/qwen3_5_chat.sh, which packs the same conversations with `zerotrain pack --input
chat`, trains one step at lr 0 at W = 2 and compares the logged loss.

Qwen3.5's own tokenizer.json and chat template are not in this repository, so the Qwen3 tokenizer
and template (assets/qwen3-tokenizer, the ones pack --input chat renders) stand in to make the data:
token ids are ids. The model is a tiny Qwen3.5 whose vocabulary covers them (151669, the Qwen3
tokenizer's size), tied, so its one big matrix is the embedding. To keep the committed weights small,
only the rows of the ids the conversations use are random; every other row repeats one of 13 rows
(they still enter every softmax), and the file is stored gzip-compressed (mtime 0).

Each conversation is rendered and tokenized by transformers (apply_chat_template); its trained
targets are the "assistant" rule of pack (every assistant turn after its header, up to and including
<|im_end|>: transformers' assistant_masks under the generation-tagged copy of the template, as
make_chat_golden.py builds it and test_chat checks pack against). The loss of conversation c is the
sum over its trained tokens j >= 1 of -log p(id_j | ids before j), the model run on c alone
(positions from 0): what a packed, isolated block trains on. In float64, the delta rule too
(make_qwen3_5_golden.delta_rule_f64); the fp32 model must agree to 1e-5 (asserted).

Writes tests/golden/q35_chat/:
    conversations.jsonl     the conversations (the first 14 of examples/sft/conversations.jsonl)
    config.json             save_pretrained's (model_type qwen3_5_text)
    model.safetensors.gz    F32 weights, HF names, gzip-compressed
    golden.json             {"loss": sum / count, "count": trained targets, "per_conversation": [...]}
Run from the repository root (transformers 5 with Qwen3.5, torch, jinja2):
    python3 tests/reference/make_qwen3_5_chat_golden.py
"""

import gzip
import io
import json
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import render_jinja_template

sys.path.insert(0, os.path.dirname(__file__))
import make_golden as mg  # noqa: E402  (determinism, the golden directory)
import make_chat_golden as mc  # noqa: E402  (the generation-tagged template, transformers' overlap rule)
import make_qwen3_5_golden as m35  # noqa: E402  (model builder, weight setter, the float64 delta rule)

NCONV = 14  # 6 blocks of 128 tokens when packed: one step of W = 2 x grad-accum 3 takes them all
SOURCE = "examples/sft/conversations.jsonl"
OUT = os.path.join(mg.GOLDEN, "q35_chat")
SEED = 3737
PERIOD = 13  # distinct rows among the embedding rows of ids no conversation uses

CONFIG = dict(
    vocab_size=151669, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
    num_attention_heads=2, num_key_value_heads=1, head_dim=16,
    layer_types=["linear_attention", "full_attention", "linear_attention"],
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
    tie_word_embeddings=True,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25},
    **{**m35.COMMON,
       # 0.2: the layers' outputs weigh in the residual stream against the embedding, so what a token
       # sees matters: here a conversation packed after another and attending to it (no isolation)
       # moves the loss by ~4e-3 of itself (measured), 400 times the test's tolerance
       "initializer_range": 0.2},
)


def tokenized(tok, lines):
    """(ids, assistant mask) of each conversation, as make_chat_golden.py derives them."""
    gtpl = mc.gen_template(tok.chat_template)
    out = []
    for line in lines:
        msgs = json.loads(line)["messages"]
        text = tok.apply_chat_template(msgs, tokenize=False)
        ids = tok.apply_chat_template(msgs, tokenize=True)["input_ids"]
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert enc["input_ids"] == ids
        r = tok.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                    chat_template=gtpl)
        assert r["input_ids"] == ids
        rendered, gen = render_jinja_template(conversations=[msgs], chat_template=gtpl,
                                              return_assistant_tokens_mask=True, **tok.special_tokens_map)
        assert rendered[0] == text and mc.overlap_mask(enc["offset_mapping"], gen[0]) == r["assistant_masks"]
        out.append((ids, r["assistant_masks"]))
    return out


def weights(used):
    torch.manual_seed(SEED)
    model = m35.build_model(CONFIG)
    with torch.no_grad():
        for n, p in model.named_parameters():  # 1-D weights away from their constants (make_qwen3_5_golden.py)
            if p.ndim != 1 or n.endswith("A_log"):
                continue
            base = 1.0 if (n.endswith("linear_attn.norm.weight") or n.endswith("dt_bias")) else 0.0
            p.copy_(base + 0.1 * torch.randn(p.shape))
        # the embedding (and lm_head): random rows of scale 1 for the ids used, whose logits (of order
        # several units) then outweigh the ~151k others in every softmax, so the loss depends on what
        # each token sees (its conversation's earlier tokens only); the others repeat PERIOD rows at 0.02
        emb = model.model.embed_tokens.weight
        V, H = emb.shape
        rows = 0.02 * torch.randn(PERIOD, H)
        emb.copy_(rows[torch.arange(V) % PERIOD])
        idx = torch.tensor(sorted(used))
        emb[idx] = torch.randn(len(idx), H)
    return model, {n: p.detach().clone().contiguous() for n, p in model.named_parameters()}


def losses(w0, convs, dtype):
    """Per conversation: (summed loss over its trained targets, their count), the model on it alone."""
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
    return out


def main():
    mg.setup_determinism()
    print(f"torch {torch.__version__}  transformers {transformers.__version__}")
    tok = AutoTokenizer.from_pretrained(mc.TOK_DIR)
    assert len(tok) == CONFIG["vocab_size"]
    with open(SOURCE, encoding="utf-8") as f:
        lines = f.read().splitlines()[:NCONV]
    convs = tokenized(tok, lines)
    used = {i for ids, _ in convs for i in ids}
    model, w0 = weights(used)

    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    with open(os.path.join(OUT, "conversations.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(line + "\n" for line in lines))
    model.config.save_pretrained(OUT)
    blob = save(w0, metadata={"format": "pt"})
    with gzip.GzipFile(os.path.join(OUT, "model.safetensors.gz"), "wb", mtime=0) as f:
        f.write(blob)
    # the written directory loads as the same model
    tmp = os.path.join(OUT, "model.safetensors")
    with open(tmp, "wb") as f:
        f.write(blob)
    hf = transformers.Qwen3_5ForCausalLM.from_pretrained(OUT, dtype=torch.float32)
    os.remove(tmp)
    for n, p in hf.named_parameters():
        assert torch.equal(p.detach(), w0[n]), n

    chunked = m35.mq.torch_chunk_gated_delta_rule
    m35.mq.torch_chunk_gated_delta_rule = m35.delta_rule_f64
    try:
        l64 = losses(w0, convs, torch.float64)
    finally:
        m35.mq.torch_chunk_gated_delta_rule = chunked
    l32 = losses(w0, convs, torch.float32)
    total, count = sum(s for s, _ in l64), sum(c for _, c in l64)
    t32 = sum(s for s, _ in l32)
    print(f"{len(convs)} conversations, {sum(len(i) for i, _ in convs)} tokens, {count} trained targets, "
          f"{len(used)} distinct ids; loss {total / count:.9f} (fp32 {t32 / count:.9f}, rel {abs(t32 - total) / total:.1e})")
    assert abs(t32 - total) <= 1e-5 * total
    golden = {"loss": total / count, "count": count, "conversations": len(convs),
              "per_conversation": [{"loss_sum": s, "count": c} for s, c in l64],
              "torch": torch.__version__, "transformers": transformers.__version__}
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    sizes = {f: os.path.getsize(os.path.join(OUT, f)) for f in sorted(os.listdir(OUT))}
    print(f"files {sizes}")
    assert sum(sizes.values()) < 1 << 20


if __name__ == "__main__":
    main()
