#!/usr/bin/env python3
"""One Qwen3.5 Gated DeltaNet decoder layer, forward + backward on the CPU: zerotrain's (model/qwen3_5.c
through build/zt_deltanet_layer_bench) against transformers' Qwen3_5DecoderLayer of the same weights
(its linear-attention mixer on transformers' pure-PyTorch fallback: torch_chunk_gated_delta_rule and
causal_conv1d_fn, the path users get without flash-linear-attention), on the same input and upstream
gradient, the same thread count.

    python3 benchmarks/deltanet_layer_vs_torch.py [--bench build/zt_deltanet_layer_bench] [--hidden 1024
        --ffn 3456 --S 2048 --Hk 4 --Hv 12 --Dk 128 --Dv 128] [--reps 3] [--threads 1]

Default: hidden 1024, MLP 3456 (the 27B's 17408 / 5120 ratio), the 27B's Gated DeltaNet heads at a
quarter (16 -> 4 key heads, 48 -> 12 value heads of 128), 2,048 tokens, one thread. The layer is the
whole decoder layer (input norm, mixer, residual, post norm, SwiGLU MLP). Each side's time is its
fastest of --reps forward + backward passes. Every parameter gradient and d(input) must agree to
--tol (max |ours - torch| / max |torch| per tensor) or the script exits 1. Exit 77: no torch.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3_5TextConfig
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "zt_deltanet_layer_bench"))
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=3456)
    ap.add_argument("--S", type=int, default=2048)
    ap.add_argument("--Hk", type=int, default=4)
    ap.add_argument("--Hv", type=int, default=12)
    ap.add_argument("--Dk", type=int, default=128)
    ap.add_argument("--Dv", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", help="write the benchmark's input directory here (to profile the C side alone)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    N, d = a.S, a.hidden
    cfg = Qwen3_5TextConfig(vocab_size=N, hidden_size=d, intermediate_size=a.ffn, num_hidden_layers=1,
                            num_attention_heads=8, num_key_value_heads=2, head_dim=128,
                            layer_types=["linear_attention"], linear_num_key_heads=a.Hk,
                            linear_num_value_heads=a.Hv, linear_key_head_dim=a.Dk, linear_value_head_dim=a.Dv,
                            linear_conv_kernel_dim=4, tie_word_embeddings=False, initializer_range=0.02,
                            rms_norm_eps=1e-6, max_position_embeddings=max(4096, N),
                            rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25})
    cfg._attn_implementation = "eager"
    layer = mq.Qwen3_5DecoderLayer(cfg, 0).float()
    with torch.no_grad():  # transformers' init for the layer's own parameters (as the model's _init_weights)
        for n, p in layer.named_parameters():
            if n.endswith("A_log"):
                p.copy_(torch.empty(p.shape).uniform_(0.01, 16).log())
            elif n.endswith("dt_bias") or n.endswith("linear_attn.norm.weight"):
                p.fill_(1.0)
            elif p.ndim == 1:
                p.normal_(0, 0.1)  # the (1 + w) norms: away from 0 so that their gradients matter
            else:
                p.normal_(0, 0.02)
    x = torch.randn(1, N, d)
    r = torch.randn(1, N, d)
    with tempfile.TemporaryDirectory() as tmp:
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            tmp = a.keep
        c = cfg.to_dict()
        json.dump(c, open(os.path.join(tmp, "config.json"), "w"))
        w = {"model.embed_tokens.weight": x[0].contiguous(), "model.norm.weight": torch.zeros(d),
             "lm_head.weight": torch.zeros(N, d)}
        for n, p in layer.named_parameters():
            w["model.layers.0." + n] = p.detach().contiguous()
        save_file(w, os.path.join(tmp, "model.safetensors"))
        r[0].numpy().astype(np.float32).tofile(os.path.join(tmp, "r.bin"))
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        out = subprocess.run([a.bench, tmp, str(a.reps)], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stdout, out.stderr)
            sys.exit(1)
        t_zt = float(out.stdout.split()[1])
        grads = np.fromfile(os.path.join(tmp, "zt_grads.bin"), dtype=np.float32)
        dx = np.fromfile(os.path.join(tmp, "zt_dx.bin"), dtype=np.float32)
        lay = [l.split() for l in open(os.path.join(tmp, "zt_layout.txt"))]

    rope = mq.Qwen3_5TextRotaryEmbedding(cfg)
    pos = torch.arange(N)[None]
    pe = rope(x, pos)
    best = 1e30
    for _ in range(a.reps):
        layer.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_(True)
        t0 = time.perf_counter()
        y = layer(xi, position_embeddings=pe, attention_mask=None)
        (y * r).sum().backward()
        best = min(best, time.perf_counter() - t0)
    worst, worst_name = 0.0, ""
    named = dict(layer.named_parameters())
    for name, off, n in lay:
        ref = named[name.replace("model.layers.0.", "")].grad.reshape(-1).numpy()
        got = grads[int(off):int(off) + int(n)]
        e = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        if e > worst:
            worst, worst_name = e, name
    ex = float(np.abs(dx - xi.grad[0].reshape(-1).numpy()).max() / np.abs(xi.grad.numpy()).max())
    print(f"Gated DeltaNet decoder layer, hidden {d}, MLP {a.ffn}, {a.Hk} key / {a.Hv} value heads of "
          f"{a.Dk}/{a.Dv}, {N} tokens, {a.threads} thread(s), best of {a.reps}:")
    print(f"  transformers (PyTorch fallback) {best:.3f} s, zerotrain {t_zt:.3f} s: {best / t_zt:.2f}x")
    print(f"  worst parameter gradient difference {worst:.2e} ({worst_name}), d(input) {ex:.2e} (tol {a.tol:g})")
    load = os.getloadavg()[0]
    print(f"  load average {load:.2f} on {os.cpu_count()} cores; torch {torch.__version__}")
    sys.exit(0 if worst <= a.tol and ex <= a.tol else 1)


if __name__ == "__main__":
    main()
