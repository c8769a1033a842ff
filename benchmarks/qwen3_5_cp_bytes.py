#!/usr/bin/env python3
"""Qwen3.5-27B's Gated DeltaNet under context parallelism: head sharding (as built,
model/qwen3_5_cuda_context.c) vs state passing (fla's ops/cp, not built), per linear layer and rank,
computed from the formulas in docs/design.md "Context parallelism for Qwen3.5" (not measured).
Micro-batch 1, blocks of S tokens, C ranks; bytes each rank sends per collective: (C-1)/C of its
full size (ring). Head sharding's memory is zt_family.context_plan's (model/qwen3_5.c) with
--recompute (one linear layer's block tensors kept); state passing's the gathered chunk maps."""
import math, sys

Hk, Hv, Dk, Dv, K, L_lin = 16, 48, 128, 128, 4, 48
Kd, Vd = Hk * Dk, Hv * Dv
Cch = 2 * Kd + Vd
Wp, Wq = (Cch + 4 * Hv + 1) // 2 * 2, (Cch + 2 * Hv + 1) // 2 * 2


def head_sharding(S, C):
    Nb, Nl = S, S / C
    nv, nk = Hv / C, Hk / C
    nq, nvd = nk * Dk, nv * Dv
    Cs = 2 * nq + nvd
    full = [2 * S * Wp, 4 * S * Vd, 2 * S * Vd, 4 * S * Wq]  # fwd AG, fwd RS, bwd AG, bwd RS
    sent = sum(full) * (C - 1) / C
    saved = nv * math.ceil(S / 64) * Dk * Dv
    keep = 2 * 2 * Nb * Cs + 4 * 2 * Nb * nq + 2 * Nb * nvd + 2 * 4 * Nb * nk + 3 * 4 * Nb * nv + 4 * saved
    maps = 8 * S + 4 * C * Nl + 4 * Nb
    fwd = (2 * Nl * Wp + 2 * C * Nl * Wp + 2 * Nb * Wp + 6 * Cs * K + 2 * Nb * Cs + 4 * Nb * nv + 2 * Nb * nvd
           + 2 * Nb * Vd + 4 * C * Nl * Vd + 4 * Nl * Vd + 2 * C * Nl * Vd)
    bwd = (4 * 2 * Nb * nq + 2 * Nb * nvd + 2 * 4 * Nb * nv + 2 * 2 * Nb * nv + 2 * 2 * Nb * Cs + 2 * Nb * Wq
           + 4 * C * Nl * Wq + 4 * Nl * Wq + 2 * Nl * Wq)
    return sent, keep + maps + fwd + bwd


def state_passing(S, C):
    # each rank holds 2 chunks (zig-zag); per chunk and value head the affine map of the state:
    # A (Dk x Dk) and the chunk's contribution (Dk x Dv), fp32, plus the conv's last K-1 inputs (bf16)
    per_rank_fwd = 2 * (Hv * (Dk * Dk + Dk * Dv) * 4 + (K - 1) * Cch * 2)
    per_rank_bwd = 2 * (Hv * Dk * Dv * 4 + (K - 1) * Cch * 4)  # the state's and the tail's gradients
    sent = (per_rank_fwd + per_rank_bwd) * (C - 1)  # all-gather: each rank sends (C-1)/C of C x its part
    mem = C * (per_rank_fwd + per_rank_bwd)  # the gathered maps of one layer (kept for the backward)
    return sent, mem


print(f"{'S':>7} {'C':>2} {'rule':>8} {'HS sent/layer MB':>17} {'HS step GB':>11} {'HS mem GB':>10} "
      f"{'SP sent/layer MB':>17} {'SP step GB':>11} {'SP mem MB':>10}")
for S in (32768, 131072):
    for C in range(2, 9):
        hs, hm = head_sharding(S, C)
        sp, sm = state_passing(S, C)
        rule = "GPU+CPU" if Hk % C == 0 else "CPU only"
        print(f"{S:7d} {C:2d} {rule:>8} {hs / 1e6:17.1f} {hs * L_lin / 1e9:11.2f} {hm / 1e9:10.2f} "
              f"{sp / 1e6:17.1f} {sp * L_lin / 1e9:11.2f} {sm / 1e6:10.1f}")
