#!/usr/bin/env python3
"""The gated delta rule alone, forward + backward on the CPU: zerotrain's kernel (kernels/cpu/delta_chunk.c,
through build/zt_delta_bench) against transformers' PyTorch fallback torch_chunk_gated_delta_rule
(chunk 64) + autograd, on the same inputs, one thread each by default.

    python3 benchmarks/delta_rule_vs_torch.py [--bench build/zt_delta_bench] [--S 2048 --Hk 4 --Hv 12
        --Dk 128 --Dv 128] [--reps 3] [--threads 1]

The default shape is one Gated DeltaNet layer of Qwen3.5-27B at a quarter of its heads (B = 1,
S = 2048). q, k are l2-normalised before the call on both sides (the op's contract; torch gets
use_qk_l2norm_in_kernel=False), g = -exp(A) softplus(a) as the model makes it, beta = sigmoid(b).
Each side's time is its fastest of --reps repetitions of forward + backward. The outputs (o and the
five gradients) must agree to --tol relative (max |ours - torch| / max |torch| per tensor), or the
script exits 1; it prints the times and the ratio torch / zerotrain. Exit 77: torch or
transformers missing.
"""

import argparse
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m
    from vs_torch import compare, driver_args, run_driver, value_after
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    driver_args(ap, "zt_delta_bench", 1e-3)
    ap.add_argument("--S", type=int, default=2048)
    ap.add_argument("--Hk", type=int, default=4)
    ap.add_argument("--Hv", type=int, default=12)
    ap.add_argument("--Dk", type=int, default=128)
    ap.add_argument("--Dv", type=int, default=128)
    a = ap.parse_args()
    S, Hk, Hv, Dk, Dv = a.S, a.Hk, a.Hv, a.Dk, a.Dv

    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    q = m.l2norm(torch.randn(1, S, Hk, Dk))
    k = m.l2norm(torch.randn(1, S, Hk, Dk))
    v = torch.randn(1, S, Hv, Dv)
    A = torch.log(torch.empty(Hv).uniform_(0.01, 16))
    g = -A.exp() * F.softplus(torch.randn(1, S, Hv))
    beta = torch.sigmoid(torch.randn(1, S, Hv))
    dout = torch.randn(1, S, Hv, Dv)

    # torch: forward + autograd backward
    best_t = float("inf")
    for _ in range(a.reps):
        leaves = [x.clone().requires_grad_(True) for x in (q, k, v, g, beta)]
        t0 = time.perf_counter()
        o, _ = m.torch_chunk_gated_delta_rule(*leaves, chunk_size=64, use_qk_l2norm_in_kernel=False)
        o.backward(dout)
        best_t = min(best_t, time.perf_counter() - t0)
    ref = [o.detach()] + [x.grad for x in leaves]

    # zerotrain: the same inputs through the C driver
    cmd = [a.bench, "--B", "1", "--S", str(S), "--Hk", str(Hk), "--Hv", str(Hv), "--Dk", str(Dk), "--Dv", str(Dv),
           "--reps", str(a.reps)]
    out, ours = run_driver(cmd, (q, k, v, g, beta, dout), ref, a.threads)
    best_z = value_after(out, "best_s")
    ok = compare(("o", "dq", "dk", "dv", "dg", "dbeta"), ours, ref, a.tol)
    print(f"shape B=1 S={S} Hk={Hk} Hv={Hv} Dk={Dk} Dv={Dv}, {a.threads} thread(s), best of {a.reps}")
    print(f"torch_chunk_gated_delta_rule fwd+bwd: {best_t:.3f} s")
    print(f"zerotrain delta_fwd+delta_bwd:        {best_z:.3f} s")
    print(f"ratio torch / zerotrain: {best_t / best_z:.2f}x")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
