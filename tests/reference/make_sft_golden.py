#!/usr/bin/env python3
"""Golden file for packed supervised fine-tuning: loss masks and isolated documents.

Usage (from the repository root, after make_golden.py):
    python3 tests/reference/make_sft_golden.py

Takes the weights of tests/golden/tiny_untied_gqa and tiny_tied (written by
make_golden.py) and a batch of B packed blocks of S version-2 words (data/dataset.h:
bits 0..29 the id, bit 30 "starts a document", bit 31 "not a trained target"), each
block holding several documents of different lengths (one of a single token, one
ending at the block end, one starting mid-block). The reference runs Hugging Face
transformers' Qwen3ForCausalLM (eager, fp32) on every document *separately*
(positions from 0, its own causal mask), takes the cross-entropy of each trained
target of the document (a target t+1 inside the document whose word has no no-loss
bit), sums over all documents and divides by the number of trained targets: the loss
a packed, isolated, masked block must reproduce. Its gradients (of that mean) are
the reference for zerotrain's fp32 CPU model on the packed block.

Writes tests/golden/<case>/sft.safetensors:
    words   [B, S] int64   the packed words, flags included
    loss    [1]    f32     mean over trained targets
    count   [1]    int64   trained targets
    grad.<HF name>         d(loss)/d(parameter)
Deterministic: fixed seed, one thread, torch.use_deterministic_algorithms(True).
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import make_golden as mg  # noqa: E402  (the same model builder and writer)

DOC_START = 1 << 30
NO_LOSS = 1 << 31

# (case, B, S, document lengths per block); the lengths of a block sum to S.
CASES = [
    ("tiny_untied_gqa", 2, 16, [[5, 1, 7, 3], [16]]),
    ("tiny_tied", 2, 12, [[3, 4, 5], [1, 6, 1, 4]]),
]


def make_words(gen, B, S, V, docs):
    """Random ids, a document start at each document's first token, and no-loss on a
    random third of the tokens (never all of a document, so every case trains)."""
    ids = torch.randint(0, V, (B, S), generator=gen, dtype=torch.int64)
    words = ids.clone()
    spans = []
    for b in range(B):
        assert sum(docs[b]) == S, docs[b]
        t = 0
        for n in docs[b]:
            words[b, t] |= DOC_START
            spans.append((b, t, n))
            t += n
        for t in range(S):
            if int(torch.randint(0, 3, (1,), generator=gen)) == 0:
                words[b, t] |= NO_LOSS
    return ids, words, spans


def main():
    mg.setup_determinism()
    for name, B, S, docs in CASES:
        case = next(c for c in mg.CASES if c["name"] == name)
        cfg = case["config"]
        outdir = os.path.join(mg.GOLDEN, name)
        w = mg.read_weights(outdir, case["sharded"])
        model = mg.build_model(cfg)
        mg.set_weights(model, w)
        gen = torch.Generator().manual_seed(case["seed"] + 99)
        ids, words, spans = make_words(gen, B, S, cfg["vocab_size"], docs)

        # each document alone; targets inside it that are trained
        model.zero_grad(set_to_none=True)
        total, count = None, 0
        for b, t0, n in spans:
            if n < 2:
                continue  # a one-token document has no target inside it
            x = ids[b, t0 : t0 + n].unsqueeze(0)
            logits = model(input_ids=x).logits[0, :-1, :]  # position j predicts token j+1
            tgt = ids[b, t0 + 1 : t0 + n]
            keep = torch.tensor([not (int(words[b, t0 + 1 + j]) & NO_LOSS) for j in range(n - 1)])
            if keep.sum() == 0:
                continue
            ce = F.cross_entropy(logits[keep], tgt[keep], reduction="sum")
            total = ce if total is None else total + ce
            count += int(keep.sum())
        assert count > 0
        loss = total / count
        loss.backward()

        golden = {
            "words": words.contiguous(),
            "loss": loss.detach().reshape(1).contiguous(),
            "count": torch.tensor([count], dtype=torch.int64),
        }
        for n, p in model.named_parameters():
            golden["grad." + n] = p.grad.detach().contiguous()
        mg._ST_DTYPES[torch.int64] = "I64"
        path = os.path.join(outdir, "sft.safetensors")
        mg.write_safetensors_sorted(path, golden, {"format": "pt", "documents": str(docs)})
        print(f"{path}: B={B} S={S} documents {docs}, {count} trained targets, loss {float(loss):.6f}")


if __name__ == "__main__":
    main()
