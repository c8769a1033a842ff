#!/usr/bin/env python3
"""YaRN RoPE tables from transformers for tests/unit/test_config.c (issue 37).

Writes tests/golden/yarn/freqs.json: for several rope_scaling parameter sets (every optional
field of _compute_yarn_parameters: attention_factor given, mscale / mscale_all_dim, beta_fast /
beta_slow, truncate false, a correction range that collapses), the config fields, the inverse
frequencies and attention factor transformers computes, and Qwen3RotaryEmbedding's fp32 cos and
sin at a few positions. Deterministic (no randomness).

    python3 tests/reference/make_yarn_freqs.py
"""
import json
import os

import torch
import transformers
from transformers import Qwen3Config
from transformers.models.qwen3 import modeling_qwen3 as mq

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "golden", "yarn", "freqs.json")
POSITIONS = [0, 1, 2, 7, 100, 4095, 32767, 131071]

SETS = [
    # Qwen3-32B's published YaRN setting
    dict(head_dim=128, rope_theta=1000000.0, max_position_embeddings=40960,
         rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)),
    dict(head_dim=16, rope_theta=10000.0, max_position_embeddings=16384,
         rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=4096)),
    dict(head_dim=64, rope_theta=500000.0, max_position_embeddings=8192,
         rope_scaling=dict(rope_type="yarn", factor=2.5, original_max_position_embeddings=2048, attention_factor=0.9)),
    dict(head_dim=32, rope_theta=10000.0, max_position_embeddings=65536,
         rope_scaling=dict(rope_type="yarn", factor=16.0, original_max_position_embeddings=4096, beta_fast=8.0,
                           beta_slow=0.5, truncate=False, mscale=0.707, mscale_all_dim=1.0)),
    # a correction range that collapses to one index (low == high: transformers adds 0.001)
    dict(head_dim=8, rope_theta=10000.0, max_position_embeddings=64,
         rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16)),
]


def main():
    torch.set_default_dtype(torch.float32)
    out = []
    for s in SETS:
        cfg = Qwen3Config(vocab_size=96, hidden_size=2 * s["head_dim"], intermediate_size=8, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=s["head_dim"],
                          max_position_embeddings=s["max_position_embeddings"], rope_theta=s["rope_theta"],
                          rope_scaling=dict(s["rope_scaling"]))
        rot = mq.Qwen3RotaryEmbedding(config=cfg)
        pos = torch.tensor([POSITIONS])
        cos, sin = rot(torch.zeros(1, len(POSITIONS), 1), pos)
        half = s["head_dim"] // 2
        out.append(dict(config=dict(model_type="qwen3", vocab_size=96, hidden_size=2 * s["head_dim"],
                                    intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
                                    num_key_value_heads=1, head_dim=s["head_dim"],
                                    max_position_embeddings=s["max_position_embeddings"],
                                    rope_theta=s["rope_theta"], rope_scaling=s["rope_scaling"]),
                        inv_freq=[float(v) for v in rot.inv_freq.tolist()],
                        attention_factor=float(rot.attention_scaling),
                        positions=POSITIONS,
                        cos=[[float(v) for v in row[:half]] for row in cos[0].tolist()],
                        sin=[[float(v) for v in row[:half]] for row in sin[0].tolist()]))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(dict(generator="tests/reference/make_yarn_freqs.py", torch=torch.__version__,
                       transformers=transformers.__version__, sets=out), f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(out)} sets")


if __name__ == "__main__":
    main()
