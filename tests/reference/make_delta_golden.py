#!/usr/bin/env python3
"""Golden values for the Gated DeltaNet CPU ops (tests/unit/test_delta_ops.c), straight from
transformers' own torch functions (modeling_qwen3_5: causal_conv1d_fn, torch_chunk_gated_delta_rule
with chunk 64 and use_qk_l2norm_in_kernel, Qwen3_5RMSNormGated) and their autograd gradients.

Usage (from the repository root):
    python3 tests/reference/make_delta_golden.py

Writes tests/golden/delta_ops/golden.safetensors (float32, ~180 KB). Each loss is sum(r * y) with
r[i] = sin(0.5 + 0.37 i) over y's flat index, so the C test rebuilds r instead of reading it.
Deterministic: fixed seed, one thread, torch.use_deterministic_algorithms(True); two runs write
byte-identical files. Generated with python 3.11.7, torch 2.15.0+cu132 (CPU), transformers 5.25.0,
safetensors 0.8.0.
"""

import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers.models.qwen3_5 import modeling_qwen3_5 as m

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "golden", "delta_ops")

S, HK, HV, DK, DV = 150, 2, 4, 8, 12  # B = 1
C, K = 16, 4  # conv channels and taps
NR, ND = 64, 12  # gated norm rows and width


def probe(y):
    i = torch.arange(y.numel(), dtype=torch.float64)
    return torch.sin(0.5 + 0.37 * i).to(torch.float32).reshape(y.shape)


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def main():
    torch.manual_seed(20260)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    # the hub kernels (fla, causal_conv1d) must not stand in for the torch code
    assert m.torch_chunk_gated_delta_rule.__module__ == m.__name__
    out = {}

    # conv: HF's layout x [B, C, S], weight [C, K]; stored token-major x [S, C]
    x = leaf(torch.randn(1, C, S))
    w = leaf(torch.randn(C, K) * 0.5)
    y = m.causal_conv1d_fn(x, w, None, activation="silu")
    (probe(y.transpose(1, 2)) * y.transpose(1, 2)).sum().backward()
    out.update({"conv.x": x[0].T, "conv.w": w, "conv.y": y[0].T, "conv.dx": x.grad[0].T, "conv.dw": w.grad})

    # the delta rule with q, k l2-normalised in the kernel; g = -exp(A) softplus(a + dt) spans ~0 .. -40
    q = leaf(torch.randn(1, S, HK, DK))
    k = leaf(torch.randn(1, S, HK, DK))
    v = leaf(torch.randn(1, S, HV, DV))
    A = torch.log(torch.empty(HV).uniform_(0.01, 16))
    g = leaf(-A.exp() * F.softplus(torch.randn(1, S, HV) * 1.5))
    beta = leaf(torch.sigmoid(torch.randn(1, S, HV)))
    o, _ = m.torch_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=64, use_qk_l2norm_in_kernel=True)
    (probe(o) * o).sum().backward()
    out.update({"delta.q": q, "delta.k": k, "delta.v": v, "delta.g": g, "delta.beta": beta, "delta.o": o,
                "delta.dq": q.grad, "delta.dk": k.grad, "delta.dv": v.grad, "delta.dg": g.grad,
                "delta.dbeta": beta.grad})

    # gated RMSNorm over rows of ND
    norm = m.Qwen3_5RMSNormGated(ND, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.3 * torch.randn(ND))
    nx = leaf(torch.randn(NR, ND) * 2)
    nz = leaf(torch.randn(NR, ND) * 2)
    ny = norm(nx, nz)
    (probe(ny) * ny).sum().backward()
    out.update({"norm.x": nx, "norm.z": nz, "norm.w": norm.weight, "norm.y": ny, "norm.dx": nx.grad,
                "norm.dz": nz.grad, "norm.dw": norm.weight.grad})

    os.makedirs(OUT, exist_ok=True)
    tensors = {n: t.detach().to(torch.float32).contiguous() for n, t in out.items()}
    # one metadata key: safetensors writes several in a random order, and the file should be
    # byte-identical run to run
    meta = {"shapes": f"S={S} Hk={HK} Hv={HV} Dk={DK} Dv={DV} C={C} K={K} norm_rows={NR} norm_d={ND}"}
    path = os.path.join(OUT, "golden.safetensors")
    save_file(tensors, path, metadata=meta)
    print(f"wrote {path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
