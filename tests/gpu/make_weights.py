#!/usr/bin/env python3
"""Random Hugging Face weights for `zerotrain train --init` at several depths of one config, for
tests/gpu/trainer.sh's speed steps (the trainer's own seeded init draws serially on the host:
minutes at 32B shapes; transformers' initialisation on the GPU takes seconds).

The model with the deepest depth is built by transformers from the config (its own _init_weights,
on --device) in bf16, and its tensors are written once, one safetensors file per decoder layer plus
one for the embedding and one for the rest (final norm, lm_head). Each depth L gets its own folder
DIR/L<L>: config.json (the source config with num_hidden_layers = L and, where it has one,
layer_types cut to L), model.safetensors.index.json naming the shared files of layers < L, and
symbolic links to those files. Prints "RESULT weights_s=..." and the folders.

  make_weights.py --config CONFIG.json --depths 2,4 --out DIR [--device cuda]
"""
import argparse
import json
import os
import re
import sys
import time

import torch


def cut_config(src, layers):
    """The source config.json with `layers` decoder layers (layer_types cut alike)."""
    c = dict(src)
    c["num_hidden_layers"] = layers
    if isinstance(c.get("layer_types"), list):
        if len(c["layer_types"]) < layers:
            sys.exit("make_weights.py: the config has %d layer_types, %d layers asked" % (len(c["layer_types"]), layers))
        c["layer_types"] = c["layer_types"][:layers]
    return c


def build(cfg_dict, device):
    """transformers' model for the config, initialised on `device`, in bf16."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(**cfg_dict)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--depths", required=True, help="comma list of decoder-layer counts, e.g. 2,4")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    t0 = time.time()
    src = json.load(open(a.config))
    depths = sorted({int(x) for x in a.depths.split(",")})
    deepest = depths[-1]
    model = build(cut_config(src, deepest), a.device)
    from safetensors.torch import save_file

    shards = os.path.join(a.out, "shards")
    os.makedirs(shards, exist_ok=True)
    files = {}  # tensor name -> shard file name
    groups = {}
    for name, t in model.state_dict().items():
        m = re.match(r"(?:model\.)?(?:language_model\.)?layers\.(\d+)\.", name)
        f = "layer-%03d.safetensors" % int(m.group(1)) if m else (
            "embed.safetensors" if "embed_tokens" in name else "rest.safetensors")
        groups.setdefault(f, {})[name] = t
        files[name] = f
    nbytes = 0
    for f, tensors in groups.items():
        host = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
        nbytes += sum(v.numel() * v.element_size() for v in host.values())
        save_file(host, os.path.join(shards, f), metadata={"format": "pt"})
    del model, groups
    for L in depths:
        d = os.path.join(a.out, "L%d" % L)
        os.makedirs(d, exist_ok=True)
        keep = {}
        for name, f in files.items():
            m = re.match(r"(?:model\.)?(?:language_model\.)?layers\.(\d+)\.", name)
            if not m or int(m.group(1)) < L:
                keep[name] = f
        for f in sorted(set(keep.values())):
            link = os.path.join(d, f)
            if not os.path.lexists(link):
                os.symlink(os.path.join("..", "shards", f), link)
        json.dump({"metadata": {}, "weight_map": keep}, open(os.path.join(d, "model.safetensors.index.json"), "w"),
                  indent=1)
        json.dump(cut_config(src, L), open(os.path.join(d, "config.json"), "w"), indent=2)
        print("weights: %s: %d layers, %d tensors" % (d, L, len(keep)))
    print("RESULT weights_s=%.1f bytes=%d device=%s" % (time.time() - t0, nbytes, a.device))


if __name__ == "__main__":
    main()
