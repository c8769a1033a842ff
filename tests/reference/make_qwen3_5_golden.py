#!/usr/bin/env python3
"""fp32 golden files for zerotrain's Qwen3.5 text model (model/qwen3_5.c) from transformers 5's
Qwen3_5ForCausalLM (eager attention, the pure-PyTorch chunked gated delta rule and conv1d).

Usage (from the repository root):
    python3 tests/reference/make_qwen3_5_golden.py [CASE ...]     (default: every case)

Writes, for each tiny config, tests/golden/<case>/ with
    config.json          save_pretrained's (model_type qwen3_5_text)
    model.safetensors    F32 weights, HF names
    golden.safetensors   tokens, logits, loss, every gradient, 3 clipped AdamW steps (grad-accum
                         replayed by the C test as micro-batches of one block)
    sft.safetensors      packed documents (version-2 words: bit 30 starts a document, bit 31 no
                         loss): the loss and gradients of transformers run on each document alone
                         (in float64, its delta rule too: see delta_rule_f64)
The conventions (optimizer, weight decay on ndim >= 2) are make_golden.py's; clipping at 0.5.
Deterministic: fixed seeds, one thread, torch.use_deterministic_algorithms(True).
"""

import copy
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file
import transformers.models.qwen3_5.modeling_qwen3_5 as mq
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

sys.path.insert(0, os.path.dirname(__file__))
import make_golden as mg  # noqa: E402  (constants, the sorted safetensors writer, token maker)

CLIP = 0.5  # below every pre-clip norm at this init (asserted): clipping is active
DOC_START = 1 << 30
NO_LOSS = 1 << 31

COMMON = dict(
    rms_norm_eps=1e-6,
    max_position_embeddings=256,
    # 0.02 (the released config's): at 0.1 the tiny linear-attention layers are so sharply curved
    # that 3 AdamW steps in fp32 and fp64 part by 3e-2; at 0.02 by < 1e-5 (asserted below)
    initializer_range=0.02,
    attention_bias=False,
    hidden_act="silu",
    bos_token_id=1,
    eos_token_id=2,
    linear_conv_kernel_dim=4,
)

CASES = [
    dict(
        # three linear layers and one full, value heads != key heads, Dk != Dv, untied, more
        # tokens than one 64-token chunk of the delta rule
        name="q35_mix",
        seed=3535,
        batch=2,
        seq_len=80,
        docs=[[30, 1, 40, 9], [80]],
        config=dict(
            vocab_size=96, hidden_size=48, intermediate_size=48, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=12,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                             "mrope_section": [1, 1, 0], "mrope_interleaved": True},
            **COMMON,
        ),
    ),
    dict(
        # full attention first, tied, GQA 4, equal key and value heads, half the head rotated
        name="q35_tied",
        seed=3636,
        batch=2,
        seq_len=16,
        docs=[[5, 1, 7, 3], [16]],
        config=dict(
            vocab_size=80, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=1, head_dim=8,
            layer_types=["full_attention", "linear_attention", "linear_attention"],
            linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5},
            **COMMON,
        ),
    ),
]


def delta_rule_f64(query, key, value, g, beta, initial_state=None, output_final_state=False,
                   use_qk_l2norm_in_kernel=False, **kwargs):
    """transformers' torch_recurrent_gated_delta_rule, step for step, in the inputs' dtype (transformers
    casts to float32 inside; the packed reference below wants float64 throughout)."""
    B, S, Hk, Dk = key.shape
    Hv, Dv = value.shape[-2:]
    if Hk != Hv:
        query = query.repeat_interleave(Hv // Hk, dim=2)
        key = key.repeat_interleave(Hv // Hk, dim=2)
    if use_qk_l2norm_in_kernel:
        query = query * torch.rsqrt((query * query).sum(-1, keepdim=True) + 1e-6)
        key = key * torch.rsqrt((key * key).sum(-1, keepdim=True) + 1e-6)
    query = query / (Dk ** 0.5)
    St = torch.zeros(B, Hv, Dk, Dv, dtype=value.dtype)
    out = []
    for t in range(S):
        St = St * g[:, t].exp()[..., None, None]
        kv = (St * key[:, t][..., None]).sum(-2)
        delta = (value[:, t] - kv) * beta[:, t][..., None]
        St = St + key[:, t][..., None] * delta[..., None, :]
        out.append((St * query[:, t][..., None]).sum(-2))
    return torch.stack(out, 1), None


def build_model(cfg, dtype=torch.float32):
    c = Qwen3_5TextConfig(**copy.deepcopy(cfg))
    c._attn_implementation = "eager"
    model = Qwen3_5ForCausalLM(c).to(dtype)
    model.config._attn_implementation = "eager"
    model.train()
    return model


def set_weights(model, w):
    with torch.no_grad():
        names = [n for n, _ in model.named_parameters()]
        assert sorted(names) == sorted(w), (sorted(names), sorted(w))
        for n, p in model.named_parameters():
            p.copy_(w[n])


def adamw(model):
    decay = [p for _, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for _, p in model.named_parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": mg.WEIGHT_DECAY},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=mg.LR, betas=(mg.BETA1, mg.BETA2), eps=mg.EPS, foreach=False, fused=False)


def run_steps(model, step_tokens, check=True):
    opt = adamw(model)
    params = [p for _, p in model.named_parameters()]
    losses, norms = [], []
    for k in range(step_tokens.shape[0]):
        opt.zero_grad(set_to_none=True)
        tk = step_tokens[k]
        out = model(input_ids=tk, labels=tk)
        out.loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, max_norm=CLIP)
        if check:
            assert float(gn) > CLIP, f"clipping not active at step {k}: norm {float(gn)}"
        losses.append(float(out.loss.detach()))
        norms.append(float(gn))
        opt.step()
    return losses, norms


def make_case(case):
    name, seed, B, S, cfg = case["name"], case["seed"], case["batch"], case["seq_len"], case["config"]
    V = cfg["vocab_size"]
    outdir = os.path.join(mg.GOLDEN, name)
    os.makedirs(outdir, exist_ok=True)
    for f in os.listdir(outdir):
        os.remove(os.path.join(outdir, f))
    torch.manual_seed(seed)
    model = build_model(cfg)
    # every 1-D weight away from its initial constant so that its gradient matters
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.ndim != 1:
                continue
            if n.endswith("A_log"):
                continue  # HF's init: log(U(0.01, 16)), random already
            base = 1.0 if (n.endswith("linear_attn.norm.weight") or n.endswith("dt_bias")) else 0.0
            p.copy_(base + 0.1 * torch.randn(p.shape))
    if cfg["tie_word_embeddings"]:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    model.config.save_pretrained(outdir)
    w0 = {n: p.detach().clone().contiguous() for n, p in model.named_parameters()}
    save_file(w0, os.path.join(outdir, "model.safetensors"), metadata={"format": "pt"})
    hf = Qwen3_5ForCausalLM.from_pretrained(outdir, dtype=torch.float32, attn_implementation="eager")

    gen = torch.Generator().manual_seed(seed + 1)
    tokens = mg.random_tokens(gen, (B, S), V)
    step_tokens = mg.random_tokens(gen, (mg.N_STEPS, B, S), V)

    model.zero_grad(set_to_none=True)
    out = model(input_ids=tokens, labels=tokens)
    mg.check_loss(out.logits.detach(), tokens, out.loss.detach())
    out.loss.backward()
    golden = {"tokens": tokens.to(torch.int32).contiguous(), "logits": out.logits.detach().contiguous(),
              "loss": out.loss.detach().reshape(1).contiguous()}
    for n, p in model.named_parameters():
        golden["grad." + n] = p.grad.detach().clone().contiguous()
    with torch.no_grad():  # the written directory reproduces the logits
        assert torch.equal(hf(input_ids=tokens).logits, golden["logits"])
    # the chunked delta rule against transformers' token-by-token recurrence (an independent form)
    gdn = next(m for m in model.modules() if isinstance(m, mq.Qwen3_5GatedDeltaNet))
    q = torch.randn(1, S, gdn.num_k_heads, gdn.head_k_dim, generator=gen)
    k = torch.randn(1, S, gdn.num_k_heads, gdn.head_k_dim, generator=gen)
    v = torch.randn(1, S, gdn.num_v_heads, gdn.head_v_dim, generator=gen)
    g = -torch.rand(1, S, gdn.num_v_heads, generator=gen) * 3
    bt = torch.rand(1, S, gdn.num_v_heads, generator=gen)
    a1, _ = mq.torch_chunk_gated_delta_rule(q, k, v, g=g, beta=bt, use_qk_l2norm_in_kernel=True)
    a2, _ = mq.torch_recurrent_gated_delta_rule(q, k, v, g=g, beta=bt, use_qk_l2norm_in_kernel=True)
    print(f"{name}: chunked vs recurrent delta rule max diff {float((a1 - a2).abs().max()):.2e}")
    assert float((a1 - a2).abs().max()) < 1e-4

    # 3 AdamW steps, fp32, and the same in fp64 (conditioning: the golden must encode the algorithm)
    m32 = build_model(cfg)
    set_weights(m32, w0)
    losses, norms = run_steps(m32, step_tokens)
    m64 = build_model(cfg, torch.float64)
    set_weights(m64, {n: t.double() for n, t in w0.items()})
    run_steps(m64, step_tokens, check=False)
    ref64 = dict(m64.named_parameters())
    worst = max(float((p.detach().double() - ref64[n].detach()).abs().max() / ref64[n].detach().abs().max())
                for n, p in m32.named_parameters())
    print(f"{name}: 3-step fp32 vs fp64 worst relative difference {worst:.2e} (<= {mg.CONDITION_TOL:.0e})")
    assert worst <= mg.CONDITION_TOL, worst
    golden["steps.tokens"] = step_tokens.to(torch.int32).contiguous()
    golden["steps.losses"] = torch.tensor(losses, dtype=torch.float32)
    golden["steps.gradnorms"] = torch.tensor(norms, dtype=torch.float32)
    for n, p in m32.named_parameters():
        golden["step3." + n] = p.detach().clone().contiguous()
    meta = {"config": name, "lr": repr(mg.LR), "beta1": repr(mg.BETA1), "beta2": repr(mg.BETA2),
            "eps": repr(mg.EPS), "weight_decay": repr(mg.WEIGHT_DECAY),
            "weight_decay_applies_to": "ndim>=2 (matrices, embedding, conv1d kernel); 0 for 1-D weights",
            "clip": repr(CLIP), "steps": str(mg.N_STEPS), "batch": str(B), "seq_len": str(S),
            "seed": str(seed), "torch": torch.__version__, "transformers": transformers.__version__}
    mg.write_safetensors_sorted(os.path.join(outdir, "golden.safetensors"), golden, meta)

    # packed, isolated, masked documents: each document alone through transformers
    gen = torch.Generator().manual_seed(seed + 99)
    docs = case["docs"]
    ids = torch.randint(0, V, (B, S), generator=gen, dtype=torch.int64)
    words = ids.clone()
    spans = []
    for b in range(B):
        assert sum(docs[b]) == S
        t = 0
        for n in docs[b]:
            words[b, t] |= DOC_START
            spans.append((b, t, n))
            t += n
        for t in range(S):
            if int(torch.randint(0, 3, (1,), generator=gen)) == 0:
                words[b, t] |= NO_LOSS
    def packed(dtype):
        model = build_model(cfg, dtype)
        set_weights(model, {n: t.to(dtype) for n, t in w0.items()})
        model.zero_grad(set_to_none=True)
        total, count = None, 0
        for b, t0, n in spans:
            if n < 2:
                continue
            logits = model(input_ids=ids[b, t0:t0 + n].unsqueeze(0), use_cache=False).logits[0, :-1, :]
            tgt = ids[b, t0 + 1:t0 + n]
            keep = torch.tensor([not (int(words[b, t0 + 1 + j]) & NO_LOSS) for j in range(n - 1)])
            if keep.sum() == 0:
                continue
            ce = F.cross_entropy(logits[keep], tgt[keep], reduction="sum")
            total = ce if total is None else total + ce
            count += int(keep.sum())
        loss = total / count
        loss.backward()
        return loss, count, {n: p.grad.detach() for n, p in model.named_parameters()}

    # The packed reference is transformers' model run on each document alone in float64, with
    # its delta rule in float64 too (delta_rule_f64): in fp32 the chunked form's rounding moves
    # the tiny A_log / dt_bias gradients of these cases by up to 6e-4 of their size (measured:
    # zerotrain's fp32 recurrence lands within 1e-6 of the fp64 values there). The fp32 run
    # must agree with it to 1e-3 per tensor (asserted).
    loss32, count, g32 = packed(torch.float32)
    chunked = mq.torch_chunk_gated_delta_rule
    mq.torch_chunk_gated_delta_rule = delta_rule_f64
    try:
        loss, count64, g64 = packed(torch.float64)
    finally:
        mq.torch_chunk_gated_delta_rule = chunked
    assert count64 == count and abs(float(loss) - float(loss32)) < 1e-5, (float(loss), float(loss32))
    worst = max(float((g32[n].double() - g64[n]).abs().max() / g64[n].abs().max()) for n in g64)
    print(f"{name}: packed gradients, transformers fp32 vs the fp64 reference: worst {worst:.2e} (<= 1e-3)")
    assert worst <= 1e-3, worst
    sft = {"words": words.contiguous(), "loss": loss.detach().float().reshape(1).contiguous(),
           "count": torch.tensor([count], dtype=torch.int64)}
    for n in g64:
        sft["grad." + n] = g64[n].float().contiguous()
    mg._ST_DTYPES[torch.int64] = "I64"
    mg.write_safetensors_sorted(os.path.join(outdir, "sft.safetensors"), sft, {"format": "pt", "documents": str(docs)})
    sizes = {f: os.path.getsize(os.path.join(outdir, f)) for f in sorted(os.listdir(outdir))}
    print(f"{name}: loss {float(golden['loss'].detach()):.6f}, packed loss {float(loss):.6f} over {count} targets; files {sizes}")
    assert sum(sizes.values()) < 2 << 20


def main():
    mg.setup_determinism()
    print(f"torch {torch.__version__}  transformers {transformers.__version__}")
    only = sys.argv[1:]
    for c in CASES:
        if not only or c["name"] in only:
            make_case(c)


if __name__ == "__main__":
    main()
