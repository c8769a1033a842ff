#!/usr/bin/env python3
"""Causal GQA attention alone, forward and backward on the CPU: zerotrain's kernel
(kernels/cpu/attention.c, through build/zt_attention_bench) against PyTorch's
scaled_dot_product_attention (is_causal=True, enable_gqa=True) + autograd, on the same inputs, one
thread each by default.

    python3 benchmarks/attention_vs_torch.py [--bench build/zt_attention_bench] [--S 8192 --H 8
        --Hkv 2 --D 32] [--reps 3] [--threads 1]

The default shape is one attention call of the 8,192-token head-to-head config (docs/benchmarks.md
§2.6). Each side's forward and backward are timed apart (fastest of --reps; PyTorch's after one
untimed call); the outputs (o, dq, dk, dv) must agree to --tol relative (max |ours - torch| /
max |torch| per tensor), or the script exits 1. It prints both sides' times, GFLOP/s (useful work: 4·D per visible (query, key) pair and
head forward, 10·D backward) and the ratios torch / zerotrain. Exit 77: torch or numpy missing.
"""

import argparse
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from vs_torch import compare, driver_args, run_driver, value_after
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    driver_args(ap, "zt_attention_bench", 1e-4)
    ap.add_argument("--S", type=int, default=8192)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--Hkv", type=int, default=2)
    ap.add_argument("--D", type=int, default=32)
    a = ap.parse_args()
    S, H, Hkv, D = a.S, a.H, a.Hkv, a.D

    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    q, dout = torch.randn(1, S, H, D), torch.randn(1, S, H, D)
    k, v = torch.randn(1, S, Hkv, D), torch.randn(1, S, Hkv, D)

    # torch: [B, heads, S, D] views of the same [B, S, heads, D] tensors
    tf, tb = float("inf"), float("inf")
    for r in range(a.reps + 1):  # the first, untimed: autograd's one-time set-up
        leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
        t0 = time.perf_counter()
        o = F.scaled_dot_product_attention(*[x.transpose(1, 2) for x in leaves], is_causal=True, enable_gqa=True)
        t1 = time.perf_counter()
        o.backward(dout.transpose(1, 2))
        t2 = time.perf_counter()
        if r > 0:
            tf, tb = min(tf, t1 - t0), min(tb, t2 - t1)
    ref = [o.detach().transpose(1, 2).contiguous()] + [x.grad for x in leaves]

    cmd = [a.bench, "--B", "1", "--S", str(S), "--H", str(H), "--Hkv", str(Hkv), "--D", str(D), "--reps", str(a.reps)]
    out, ours = run_driver(cmd, (q, k, v, dout), ref, a.threads)
    zf, zb = value_after(out, "best_fwd_s"), value_after(out, "best_bwd_s")
    ok = compare(("o", "dq", "dk", "dv"), ours, ref, a.tol)
    pairs = S * (S + 1) / 2 * H
    gf = lambda t, c: c * D * pairs / t * 1e-9
    print(f"shape B=1 S={S} H={H} Hkv={Hkv} D={D}, {a.threads} thread(s), best of {a.reps}")
    print(f"torch SDPA   forward {tf:.3f} s ({gf(tf, 4):.0f} GFLOP/s), backward {tb:.3f} s ({gf(tb, 10):.0f} GFLOP/s)")
    print(f"zerotrain    forward {zf:.3f} s ({gf(zf, 4):.0f} GFLOP/s), backward {zb:.3f} s ({gf(zb, 10):.0f} GFLOP/s)")
    print(f"ratio torch / zerotrain: forward {tf / zf:.2f}x, backward {tb / zb:.2f}x, "
          f"both {(tf + tb) / (zf + zb):.2f}x")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
