#!/usr/bin/env python3
"""transformers' loss on a zerotrain dataset, for the trainer's evaluation loss to be checked
against (tests/gpu/trainer.sh, step `trainer`): loads a Hugging Face directory (RUN/final, written
by `zerotrain train`) with AutoModelForCausalLM in fp32, reads every block of a `zerotrain pack`
dataset (dataset.json and its headerless little-endian uint32 block files; version 1: plain
blocks), and prints the mean next-token cross-entropy over every target of every block (S - 1 per
block: what the trainer's `eval_loss` averages):
  RESULT hf_eval_loss=X blocks=N targets=T device=D
  hf_eval.py MODEL_DIR DATASET_DIR [--device cuda|cpu]
"""
import argparse
import json
import os

import numpy as np
import torch


def blocks(ds_dir):
    meta = json.load(open(os.path.join(ds_dir, "dataset.json")))
    if meta.get("version", 1) != 1:
        raise SystemExit("hf_eval.py: %s is a version %s dataset; plain (version 1) blocks only" % (ds_dir, meta["version"]))
    S = meta["seq_len"]
    out = [np.fromfile(os.path.join(ds_dir, f["name"]), dtype="<u4").reshape(-1, S) for f in meta["files"]]
    return np.concatenate(out).astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(a.device).eval()
    ids = torch.from_numpy(blocks(a.data)).to(a.device)
    total, n = 0.0, 0
    with torch.no_grad():
        for b in ids:
            logits = model(input_ids=b[None]).logits[0, :-1].float()
            total += torch.nn.functional.cross_entropy(logits, b[1:], reduction="sum").item()
            n += b.numel() - 1
    print("RESULT hf_eval_loss=%.8f blocks=%d targets=%d device=%s" % (total / n, ids.shape[0], n, a.device))


if __name__ == "__main__":
    main()
