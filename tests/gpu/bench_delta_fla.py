#!/usr/bin/env python3
"""fla's chunk_gated_delta_rule (flash-linear-attention, Triton) on the shapes of tests/gpu/bench_delta.c:
one Gated DeltaNet core of Qwen3.5-27B's linear layers, 16 key / 48 value heads x 128, B = 1,
S = 8,192, bf16 inputs (l2-normalised q, k; g < 0; beta in (0, 1)), forward and backward, CUDA-event
times (median of --iters after --warmup). The key heads are repeated to the value heads before
the timed region when fla does not take fewer key heads (as transformers' Qwen3.5 does before its
call). Prints "RESULT delta_bench form=fla seq=S fwd_ms=.. bwd_ms=.. total_ms=..".
tests/gpu/run.sh's step delta_tc runs it with the bundle's fla wheels on the path; exit 77 when
torch, CUDA or fla is missing. Test tool only (zerotrain never needs Python).
"""
import argparse
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    try:
        import torch
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception as e:  # noqa: BLE001 - any import failure is a skip
        print(f"SKIPPED: {e}")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device")
        sys.exit(77)
    import fla

    B, S, Hk, Hv, D = 1, a.seq, 16, 48, 128
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(B, S, Hk, D, device=dev, generator=gen), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(B, S, Hk, D, device=dev, generator=gen), dim=-1).bfloat16()
    v = torch.randn(B, S, Hv, D, device=dev, generator=gen).bfloat16()
    g = -(torch.rand(B, S, Hv, device=dev, generator=gen) * 1.49 + 0.01)  # fp32, as zerotrain's
    beta = (torch.rand(B, S, Hv, device=dev, generator=gen) * 0.9 + 0.05).bfloat16()
    do = torch.randn(B, S, Hv, D, device=dev, generator=gen).bfloat16()
    scale = D ** -0.5

    def call(qq, kk):
        return chunk_gated_delta_rule(qq, kk, vv, g=gg, beta=bb, scale=scale, output_final_state=False)

    repeated = False
    qq, kk = q.clone().requires_grad_(), k.clone().requires_grad_()
    vv, gg, bb = v.clone().requires_grad_(), g.clone().requires_grad_(), beta.clone().requires_grad_()
    try:
        o = call(qq, kk)
        o = o[0] if isinstance(o, tuple) else o
        assert o.shape == v.shape
    except Exception:  # noqa: BLE001 - this fla takes one key head per value head
        repeated = True
        qq = q.repeat_interleave(Hv // Hk, dim=2).requires_grad_()
        kk = k.repeat_interleave(Hv // Hk, dim=2).requires_grad_()
    fwd, bwd = [], []
    e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    for it in range(-a.warmup, a.iters):
        for t in (qq, kk, vv, gg, bb):
            t.grad = None
        e0.record()
        o = call(qq, kk)
        o = o[0] if isinstance(o, tuple) else o
        e1.record()
        o.backward(do)
        e2.record()
        torch.cuda.synchronize()
        if it >= 0:
            fwd.append(e0.elapsed_time(e1))
            bwd.append(e1.elapsed_time(e2))
    f, b = statistics.median(fwd), statistics.median(bwd)
    print(f"fla {getattr(fla, '__version__', '?')}, torch {torch.__version__}, {torch.cuda.get_device_name()}; "
          f"key heads {'repeated to the value heads' if repeated else 'taken as they are'}")
    print(f"RESULT delta_bench form=fla seq={S} fwd_ms={f:.3f} bwd_ms={b:.3f} total_ms={f + b:.3f}")


if __name__ == "__main__":
    main()
