#!/usr/bin/env python3
"""An output of zerotrain (RUN/final or `zerotrain export`) loads in transformers as the class its input
came from, with every tensor of the input present and equal (the run trained at lr 0), tied or untied as
the input loads. Exit 77 where torch or transformers is not installed (CI has neither).

  hf_tie_check.py IN_DIR OUT_DIR... [-- IN_DIR OUT_DIR...]...   (one torch start for every group)
"""
import json
import os
import sys

try:
    import torch
    import transformers
    from safetensors.torch import load_file
except Exception as e:  # noqa: BLE001
    print(f"SKIP: {e}")
    sys.exit(77)


def file_tensors(d):
    ix = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(ix))["weight_map"].values())) if os.path.exists(ix) else ["model.safetensors"]
    out = {}
    for f in files:
        out.update(load_file(os.path.join(d, f)))
    return out


def load(cls, d):
    m = cls.from_pretrained(d, dtype=torch.float32).eval()
    emb = m.get_input_embeddings().weight
    return m, m.lm_head.weight is emb


def loss(m, vocab):
    ids = torch.arange(3, 3 + 16).remainder(vocab).unsqueeze(0)
    with torch.no_grad():
        return float(m(input_ids=ids, labels=ids).loss)


def check(src, outs):
    """0 when every output loads as src's class with src's tensors, tied as src loads."""
    cfg = json.load(open(os.path.join(src, "config.json")))
    default = {"qwen3": "Qwen3ForCausalLM", "qwen3_5_text": "Qwen3_5ForCausalLM"}.get(cfg.get("model_type"))
    cls = getattr(transformers, (cfg.get("architectures") or [default])[0])
    m_in, tied_in = load(cls, src)
    vocab = m_in.get_input_embeddings().weight.shape[0]
    files = {k: v for k, v in file_tensors(src).items() if not k.startswith("mtp.")}  # transformers drops mtp.*
    sd_in = m_in.state_dict()
    unread = [k for k in files if k not in sd_in or not torch.equal(sd_in[k], files[k].to(torch.float32))]
    if unread:
        print(f"{src}: transformers itself does not load {unread[:5]} as stored")
        return 1
    bad = 0
    for out in outs:
        m, tied = load(cls, out)
        sd = m.state_dict()
        differ = [k for k in files if k not in sd or not torch.equal(sd[k], files[k].to(torch.float32))]
        differ += [k for k in sd_in if k not in sd or not torch.equal(sd[k], sd_in[k])]
        ok = type(m) is cls and not differ and tied == tied_in
        print(f"{out}: {type(m).__name__}, {'tied' if tied else 'untied'} (input: {'tied' if tied_in else 'untied'}), "
              f"{len(files)} input tensors, {len(differ)} differ{': ' + ', '.join(differ[:5]) if differ else ''}; "
              f"loss {loss(m, vocab):.6f} (input {loss(m_in, vocab):.6f}) with transformers {transformers.__version__}")
        bad += not ok
    return bad


def main():
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    groups, cur = [], []
    for a in sys.argv[1:] + ["--"]:
        if a == "--":
            if cur:
                groups.append(cur)
            cur = []
        else:
            cur.append(a)
    sys.exit(1 if sum(check(g[0], g[1:]) for g in groups) else 0)


if __name__ == "__main__":
    main()
