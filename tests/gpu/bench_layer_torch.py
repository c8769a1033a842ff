#!/usr/bin/env python3
"""The PyTorch baseline for tests/gpu/bench_layer.c: transformers' Qwen3DecoderLayer
at the Qwen3-32B shapes (d=5120, ffn=25600, H=64, Hkv=8, D=128), seq 2048, micro-batch
1, bf16 parameters and activations, SDPA attention (causal), forward + backward.
Same timing method as the C benchmark: CUDA events around fwd+bwd, median of
--iters after --warmup. Falls back to an equivalent hand-written layer (same math,
F.scaled_dot_product_attention) if transformers' layer cannot be built, and says so.
Prints "RESULT torch_layer_ms=..." for tests/gpu/run.sh. --seq takes a comma-separated
list (2048,8192): one layer per length in one process, each section led by "RESULT seq=S".
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F


def hf_layer(args, dev):
    from transformers import Qwen3Config
    from transformers.models.qwen3 import modeling_qwen3 as mq

    cfg = Qwen3Config(hidden_size=args.d, intermediate_size=args.ffn, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, head_dim=args.head_dim, num_hidden_layers=1,
                      rms_norm_eps=1e-6, rope_theta=1e6, max_position_embeddings=max(40960, args.seq),
                      vocab_size=151936, attention_dropout=0.0)
    cfg._attn_implementation = "sdpa"
    layer = mq.Qwen3DecoderLayer(cfg, layer_idx=0).to(device=dev, dtype=torch.bfloat16)
    rotary = mq.Qwen3RotaryEmbedding(config=cfg).to(dev)

    def run(x, pos):
        cos, sin = rotary(x, pos)
        out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=(cos, sin))
        return out[0] if isinstance(out, tuple) else out

    return layer, run, "transformers %s Qwen3DecoderLayer (sdpa)" % __import__("transformers").__version__


def manual_layer(args, dev):
    """Same math as Qwen3DecoderLayer, for when transformers is unavailable."""
    d, ffn, H, Hkv, D = args.d, args.ffn, args.heads, args.kv_heads, args.head_dim

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
            self.q, self.k, self.v, self.o = lin(d, H * D), lin(d, Hkv * D), lin(d, Hkv * D), lin(H * D, d)
            self.gate, self.up, self.down = lin(d, ffn), lin(d, ffn), lin(ffn, d)
            self.n1, self.n2 = torch.nn.RMSNorm(d, eps=1e-6), torch.nn.RMSNorm(d, eps=1e-6)
            self.qn, self.kn = torch.nn.RMSNorm(D, eps=1e-6), torch.nn.RMSNorm(D, eps=1e-6)

        def forward(self, x, cos, sin):
            B, S, _ = x.shape
            h = self.n1(x)
            q = self.qn(self.q(h).view(B, S, H, D)).transpose(1, 2)
            k = self.kn(self.k(h).view(B, S, Hkv, D)).transpose(1, 2)
            v = self.v(h).view(B, S, Hkv, D).transpose(1, 2)
            rot = lambda t: torch.cat((-t[..., D // 2:], t[..., :D // 2]), dim=-1)
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(B, S, H * D))
            h = self.n2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    layer = Layer().to(device=dev, dtype=torch.bfloat16)
    inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, dtype=torch.float32, device=dev) / D))

    def run(x, pos):
        ang = pos[0].float()[:, None] * inv[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        return layer(x, emb.cos().to(x.dtype), emb.sin().to(x.dtype))

    return layer, run, "hand-written Qwen3 layer (F.scaled_dot_product_attention)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", default="2048", help="sequence length(s), comma-separated")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--d", type=int, default=5120)
    ap.add_argument("--ffn", type=int, default=25600)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--manual", action="store_true", help="skip transformers, use the hand-written layer")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device")
        sys.exit(77)
    dev = torch.device("cuda")
    seqs = [int(v) for v in str(args.seq).split(",") if v]
    for i, seq in enumerate(seqs):
        if i:
            torch.cuda.empty_cache()
        args.seq = seq
        bench_one(args, dev)


def bench_one(args, dev):
    torch.manual_seed(0)
    try:
        if args.manual:
            raise RuntimeError("--manual")
        layer, run, what = hf_layer(args, dev)
    except Exception as e:  # noqa: BLE001 - report and fall back
        print("transformers layer unavailable (%s: %s); using the hand-written layer" % (type(e).__name__, e))
        layer, run, what = manual_layer(args, dev)
    with torch.no_grad():  # same initial distribution as the C benchmark
        for name, p in layer.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.9, 1.1)
            else:
                p.uniform_(-0.02 * 3 ** 0.5, 0.02 * 3 ** 0.5)
    x = (torch.rand(args.batch, args.seq, args.d, device=dev) * 2 - 1).to(torch.bfloat16).requires_grad_(True)
    dy = ((torch.rand(args.batch, args.seq, args.d, device=dev) * 2 - 1) * 1e-3).to(torch.bfloat16)
    pos = torch.arange(args.seq, device=dev)[None, :].expand(args.batch, -1)
    print("RESULT seq=%d" % args.seq)
    print("bench_layer_torch: %s on %s, torch %s" % (what, torch.cuda.get_device_name(), torch.__version__))
    print("shape: B=%d S=%d d=%d F=%d H=%d Hkv=%d D=%d, bf16" % (args.batch, args.seq, args.d, args.ffn, args.heads,
                                                                  args.kv_heads, args.head_dim))
    e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    fwd, bwd, tot = [], [], []
    for it in range(args.warmup + args.iters):
        x.grad = None  # parameter grads accumulate, as the C benchmark's do
        e0.record()
        y = run(x, pos)
        e1.record()
        y.backward(dy)
        e2.record()
        torch.cuda.synchronize()
        if it >= args.warmup:
            f, b = e0.elapsed_time(e1), e1.elapsed_time(e2)
            fwd.append(f)
            bwd.append(b)
            tot.append(f + b)
    med = statistics.median(tot)
    print("torch layer fwd+bwd: median %.3f ms over %d (fwd %.3f ms, bwd %.3f ms)" % (
        med, args.iters, statistics.median(fwd), statistics.median(bwd)))
    print("RESULT torch_layer_ms=%.4f" % med)
    print("RESULT torch_layer_fwd_ms=%.4f" % statistics.median(fwd))
    print("RESULT torch_layer_bwd_ms=%.4f" % statistics.median(bwd))
    print("RESULT torch_impl=%s" % ("transformers" if "transformers" in what else "manual"))
    del layer, run, x, dy, y


if __name__ == "__main__":
    main()
