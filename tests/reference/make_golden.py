#!/usr/bin/env python3
"""Generate fp32 golden files for the zerotrain C tests from Hugging Face transformers.

Usage (from the repository root):
    python3 tests/reference/make_golden.py [CASE ...]     (default: every case)

Writes, for each tiny Qwen3 config, a directory tests/golden/<name>/ with
    config.json                          HF config (save_pretrained) + top-level "rope_theta"
    model.safetensors                    (untied case) F32 weights, HF names
    model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json   (tied case, sharded)
    golden.safetensors                   tokens, logits, loss, grads, 3 AdamW steps
See tests/reference/README.md for the exact conventions.

Everything is deterministic: fixed seeds, torch.use_deterministic_algorithms(True),
one CPU thread, float32, eager attention.
"""

import copy
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "tests", "golden")

# ---- optimizer constants (shared by both configs) ----
LR = 1e-2
BETA1, BETA2 = 0.9, 0.95
# Adam divides by sqrt(v): a gradient element near the fp32 rounding floor gets a
# full-size update whose sign is noise. With eps = 1e-8 even HF fp32 and HF fp64
# disagree by up to 1.6e-3 after 3 steps on these tiny models, so no fp32 code could
# be held to 1e-5. eps = 1e-4 (gradients here are mostly ~1e-3..1e-2, so Adam still
# normalises) makes the 3-step result well-conditioned: fp32 vs fp64 agree to ~3e-6,
# which the script asserts below (CONDITION_TOL).
EPS = 1e-4
CONDITION_TOL = 1e-5
WEIGHT_DECAY = 0.1
CLIP = 1.0  # must be below every pre-clip grad norm (asserted) so clipping is active
N_STEPS = 3

COMMON = dict(
    rms_norm_eps=1e-6,
    max_position_embeddings=64,
    initializer_range=0.1,
    attention_bias=False,
    hidden_act="silu",
    use_sliding_window=False,
    bos_token_id=1,
    eos_token_id=2,
)

CASES = [
    dict(
        name="tiny_untied_gqa",
        seed=1234,
        batch=2,
        seq_len=16,
        sharded=False,
        config=dict(
            vocab_size=96,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,  # deliberately != hidden_size / num_attention_heads (= 12)
            tie_word_embeddings=False,
            rope_theta=10000.0,
            **COMMON,
        ),
    ),
    dict(
        name="tiny_tied",
        seed=5678,
        batch=2,
        seq_len=12,
        sharded=True,
        config=dict(
            vocab_size=80,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,  # GQA ratio 4
            head_dim=8,
            tie_word_embeddings=True,
            rope_theta=1000000.0,
            **COMMON,
        ),
    ),
]

# YaRN (rope_scaling / rope_parameters rope_type "yarn"), in both spellings transformers 5
# reads: the released Qwen3 checkpoints' legacy `rope_scaling` beside a top-level rope_theta,
# and transformers 5's `rope_parameters` (rope_theta inside it), with every optional field.
YARN_COMMON = {k: v for k, v in COMMON.items() if k != "max_position_embeddings"}
CASES += [
    dict(
        name="tiny_yarn",
        seed=4321,
        batch=2,
        seq_len=16,
        sharded=False,
        rope_spelling="rope_scaling",
        config=dict(
            vocab_size=96,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            tie_word_embeddings=False,
            rope_theta=10000.0,
            max_position_embeddings=16384,
            # correction range (beta 32 / 1) over frequencies 2..6 of 8: extrapolated, ramped and
            # interpolated frequencies all occur; attention factor 0.1 ln 4 + 1
            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
            **YARN_COMMON,
        ),
    ),
    dict(
        name="tiny_yarn_params",
        seed=8765,
        batch=2,
        seq_len=12,
        sharded=False,
        rope_spelling="rope_parameters",
        config=dict(
            vocab_size=80,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=8,
            tie_word_embeddings=True,
            max_position_embeddings=16384,
            # no truncation: the ramp crosses a frequency part-way; the attention factor from
            # mscale / mscale_all_dim; beta_fast / beta_slow given
            rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 8.0,
                             "original_max_position_embeddings": 2048, "beta_fast": 16.0, "beta_slow": 2.0,
                             "truncate": False, "mscale": 1.0, "mscale_all_dim": 0.5},
            **YARN_COMMON,
        ),
    ),
]

EOS = 2


_ST_DTYPES = {torch.float32: "F32", torch.int32: "I32"}


def write_safetensors_sorted(path, tensors, metadata):
    """Byte-reproducible safetensors writer (safetensors.save_file orders the
    __metadata__ keys through a hash map, so its bytes differ run to run).
    Header: __metadata__ first, then tensors sorted by name; data contiguous in
    the same order; header padded with spaces to a multiple of 8."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    blobs, off = [], 0
    for n in sorted(tensors):
        t = tensors[n].detach().contiguous().cpu()
        raw = t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()
        header[n] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(hj).to_bytes(8, "little"))
        f.write(hj)
        for raw in blobs:
            f.write(raw)
    back = load_file(path)  # validate with the reference reader
    assert sorted(back) == sorted(tensors)
    for n in tensors:
        assert back[n].dtype == tensors[n].dtype and torch.equal(back[n], tensors[n].detach().cpu()), n
    with safe_open(path, "pt") as f:
        assert f.metadata() == metadata


def setup_determinism():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)


def make_config(cfg):
    c = Qwen3Config(**copy.deepcopy(cfg))  # transformers writes into a rope dict it is given
    c._attn_implementation = "eager"
    return c


def build_model(cfg):
    config = make_config(cfg)
    model = Qwen3ForCausalLM(config).to(torch.float32)
    model.config._attn_implementation = "eager"
    model.train()  # dropout is 0.0 anyway; training mode has no other effect here
    return model


def param_names(model):
    # named_parameters() de-duplicates shared tensors: with tied embeddings only
    # model.embed_tokens.weight is listed (lm_head.weight is the same Parameter).
    return [n for n, _ in model.named_parameters()]


def weights_dict(model):
    return {n: p.detach().clone().contiguous() for n, p in model.named_parameters()}


def set_weights(model, w):
    with torch.no_grad():
        names = param_names(model)
        assert sorted(names) == sorted(w.keys()), (sorted(names), sorted(w.keys()))
        for n, p in model.named_parameters():
            p.copy_(w[n])


def random_tokens(gen, shape, vocab):
    t = torch.randint(0, vocab, shape, generator=gen, dtype=torch.int64)
    # make sure EOS (an ordinary token for the loss) occurs, as input and as target
    flat = t.view(-1, shape[-1])
    for r in range(flat.shape[0]):
        pos = int(torch.randint(1, shape[-1] - 1, (1,), generator=gen))
        flat[r, pos] = EOS
    return t


def check_loss(logits, tokens, loss):
    V = logits.shape[-1]
    ref = F.cross_entropy(logits[:, :-1, :].reshape(-1, V).double(), tokens[:, 1:].reshape(-1))
    assert abs(float(ref) - float(loss)) <= 1e-5 * max(1.0, abs(float(ref))), (float(ref), float(loss))
    ref32 = F.cross_entropy(logits[:, :-1, :].reshape(-1, V), tokens[:, 1:].reshape(-1))
    assert abs(float(ref32) - float(loss)) <= 1e-6 * max(1.0, abs(float(ref32))), (float(ref32), float(loss))


def write_weights(model, outdir, sharded):
    w = weights_dict(model)
    assert "lm_head.weight" not in w or not model.config.tie_word_embeddings
    if not sharded:
        save_file(w, os.path.join(outdir, "model.safetensors"), metadata={"format": "pt"})
        return w
    names = list(w.keys())
    total = sum(t.numel() * t.element_size() for t in w.values())
    shard1, acc = [], 0
    for n in names:
        if acc >= total / 2:
            break
        shard1.append(n)
        acc += w[n].numel() * w[n].element_size()
    shard2 = [n for n in names if n not in shard1]
    assert shard1 and shard2
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    for fname, group in zip(files, (shard1, shard2)):
        save_file({n: w[n] for n in group}, os.path.join(outdir, fname), metadata={"format": "pt"})
        for n in group:
            weight_map[n] = fname
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(outdir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return w


def read_weights(outdir, sharded):
    if not sharded:
        return load_file(os.path.join(outdir, "model.safetensors"))
    with open(os.path.join(outdir, "model.safetensors.index.json")) as f:
        index = json.load(f)
    w = {}
    for fname in sorted(set(index["weight_map"].values())):
        part = load_file(os.path.join(outdir, fname))
        for n, t in part.items():
            assert index["weight_map"][n] == fname
            w[n] = t
    assert sorted(w) == sorted(index["weight_map"])
    total = sum(t.numel() * t.element_size() for t in w.values())
    assert total == index["metadata"]["total_size"]
    return w


def write_config(model, outdir, rope_theta, rope_spelling=None, case_cfg=None):
    model.config.save_pretrained(outdir)
    path = os.path.join(outdir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    if rope_spelling == "rope_scaling":
        # the released Qwen3 checkpoints' spelling: top-level rope_theta, rope_scaling beside it
        cfg.pop("rope_parameters", None)
        cfg["rope_theta"] = rope_theta
        cfg["rope_scaling"] = case_cfg["rope_scaling"]
    elif rope_spelling == "rope_parameters":
        # transformers 5's: everything inside rope_parameters, nothing top-level
        assert cfg["rope_parameters"]["rope_type"] == "yarn", cfg["rope_parameters"]
        cfg.pop("rope_theta", None)
        cfg.pop("rope_scaling", None)
    else:
        # transformers 5 nests rope_theta under "rope_parameters"; real Qwen3 releases
        # have it top-level.  Keep both so either parser path works.
        cfg["rope_theta"] = rope_theta
    cfg = dict(sorted(cfg.items()))
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    for k in ("head_dim", "tie_word_embeddings", "vocab_size", "hidden_size",
              "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "rms_norm_eps"):
        assert k in cfg, k
    return cfg


def manual_adamw_replay(cfg, w_init, step_tokens):
    """Re-derive the 3 steps with explicit formulas (the conventions in README.md)."""
    model = build_model(cfg)
    set_weights(model, w_init)
    named = list(model.named_parameters())
    m = {n: torch.zeros_like(p) for n, p in named}
    v = {n: torch.zeros_like(p) for n, p in named}
    for k in range(step_tokens.shape[0]):
        t = k + 1
        model.zero_grad(set_to_none=True)
        tk = step_tokens[k]
        model(input_ids=tk, labels=tk).loss.backward()
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for _, p in named))
        coef = min(1.0, CLIP / (float(norm) + 1e-6))
        with torch.no_grad():
            for n, p in named:
                g = p.grad * coef
                wd = WEIGHT_DECAY if p.ndim >= 2 else 0.0
                p.mul_(1.0 - LR * wd)                      # decoupled decay first
                m[n].mul_(BETA1).add_(g, alpha=1 - BETA1)
                v[n].mul_(BETA2).addcmul_(g, g, value=1 - BETA2)
                bc1 = 1 - BETA1 ** t
                bc2 = 1 - BETA2 ** t
                denom = (v[n].sqrt() / math.sqrt(bc2)).add_(EPS)
                p.addcdiv_(m[n], denom, value=-LR / bc1)
    return {n: p.detach().clone() for n, p in named}


def make_case(case):
    name, seed, B, S = case["name"], case["seed"], case["batch"], case["seq_len"]
    cfg = case["config"]
    V = cfg["vocab_size"]
    outdir = os.path.join(GOLDEN, name)
    os.makedirs(outdir, exist_ok=True)
    for f in os.listdir(outdir):
        os.remove(os.path.join(outdir, f))

    torch.manual_seed(seed)
    model = build_model(cfg)
    # Norm weights: 1 + 0.1*randn so their gradients matter.
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.ndim == 1:
                assert n.endswith("norm.weight"), n
                p.copy_(1.0 + 0.1 * torch.randn(p.shape))
    if cfg["tie_word_embeddings"]:
        assert model.lm_head.weight is model.model.embed_tokens.weight
        assert "lm_head.weight" not in param_names(model)
    else:
        assert model.lm_head.weight is not model.model.embed_tokens.weight

    write_config(model, outdir, cfg.get("rope_theta"), case.get("rope_spelling"), cfg)
    w0 = write_weights(model, outdir, case["sharded"])

    # Round-trip check: the files on disk reproduce the in-memory weights exactly.
    w_disk = read_weights(outdir, case["sharded"])
    assert sorted(w_disk) == sorted(w0)
    for n in w0:
        assert w_disk[n].dtype == torch.float32 and torch.equal(w_disk[n], w0[n]), n

    gen = torch.Generator().manual_seed(seed + 1)
    tokens = random_tokens(gen, (B, S), V)
    step_tokens = random_tokens(gen, (N_STEPS, B, S), V)

    # ---- forward / backward on the initial weights ----
    model.zero_grad(set_to_none=True)
    out = model(input_ids=tokens, labels=tokens)
    logits, loss = out.logits, out.loss
    assert logits.dtype == torch.float32 and tuple(logits.shape) == (B, S, V)
    check_loss(logits.detach(), tokens, loss.detach())
    loss.backward()

    golden = {
        "tokens": tokens.to(torch.int32).contiguous(),
        "logits": logits.detach().contiguous(),
        "loss": loss.detach().reshape(1).contiguous(),
    }
    for n, p in model.named_parameters():
        assert p.grad is not None, n
        golden["grad." + n] = p.grad.detach().clone().contiguous()

    # Independent check: from_pretrained on the written directory gives the same logits.
    hf = Qwen3ForCausalLM.from_pretrained(outdir, dtype=torch.float32, attn_implementation="eager")
    hf.eval()
    with torch.no_grad():
        lg2 = hf(input_ids=tokens).logits
    assert torch.equal(lg2, golden["logits"]), float((lg2 - golden["logits"]).abs().max())
    assert hf.config.head_dim == cfg["head_dim"]
    del hf
    if case.get("rope_spelling"):
        # the scaling must matter on this data: plain RoPE of the same base gives other logits
        plain = {k: v for k, v in cfg.items() if k not in ("rope_scaling", "rope_parameters")}
        plain["rope_theta"] = cfg.get("rope_theta") or cfg["rope_parameters"]["rope_theta"]
        pm = build_model(plain)
        set_weights(pm, w0)
        with torch.no_grad():
            d = float((pm(input_ids=tokens).logits - golden["logits"]).abs().max() / golden["logits"].abs().max())
        print(f"{name}: YaRN vs plain RoPE logits differ by {d:.3g} (relative)")
        assert d > 1e-2, d
        del pm

    # ---- 3 AdamW steps from the same initial weights ----
    model = build_model(cfg)
    set_weights(model, w_disk)
    decay = [p for _, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for _, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": WEIGHT_DECAY},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False, fused=False,
    )
    params = [p for _, p in model.named_parameters()]
    losses, norms = [], []
    for k in range(N_STEPS):
        opt.zero_grad(set_to_none=True)
        tk = step_tokens[k]
        out = model(input_ids=tk, labels=tk)
        check_loss(out.logits.detach(), tk, out.loss.detach())
        out.loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, max_norm=CLIP)
        assert float(gn) > CLIP, f"{name}: clipping not active at step {k}: norm {float(gn)} <= {CLIP}"
        losses.append(float(out.loss.detach()))
        norms.append(float(gn))
        opt.step()

    # Cross-check the documented conventions with a hand-written clip + AdamW replay.
    manual = manual_adamw_replay(cfg, w_disk, step_tokens)
    for n, p in model.named_parameters():
        err = float((manual[n] - p.detach()).abs().max())
        assert err <= 1e-5, (name, n, err)

    # Conditioning: the same 3 steps in float64 must agree with float32, or the
    # golden would encode rounding noise rather than the algorithm.
    model64 = build_model(cfg).to(torch.float64)
    set_weights(model64, {k: v.to(torch.float64) for k, v in w_disk.items()})
    d64 = [p for _, p in model64.named_parameters() if p.ndim >= 2]
    n64 = [p for _, p in model64.named_parameters() if p.ndim < 2]
    opt64 = torch.optim.AdamW([{"params": d64, "weight_decay": WEIGHT_DECAY}, {"params": n64, "weight_decay": 0.0}],
                              lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False, fused=False)
    p64 = [p for _, p in model64.named_parameters()]
    for k in range(N_STEPS):
        opt64.zero_grad(set_to_none=True)
        out = model64(input_ids=step_tokens[k], labels=step_tokens[k])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(p64, max_norm=CLIP)
        opt64.step()
    worst = 0.0
    ref64 = dict(model64.named_parameters())
    for n, p in model.named_parameters():
        r = ref64[n].detach()
        worst = max(worst, float((p.detach().double() - r).abs().max() / r.abs().max()))
    print(f"{name}: 3-step fp32 vs fp64 worst relative difference {worst:.2e} (must be <= {CONDITION_TOL:.0e})")
    assert worst <= CONDITION_TOL, (name, worst)

    golden["steps.tokens"] = step_tokens.to(torch.int32).contiguous()
    golden["steps.losses"] = torch.tensor(losses, dtype=torch.float32)
    golden["steps.gradnorms"] = torch.tensor(norms, dtype=torch.float32)
    for n, p in model.named_parameters():
        golden["step3." + n] = p.detach().clone().contiguous()

    meta = {
        "config": name,
        "lr": repr(LR),
        "beta1": repr(BETA1),
        "beta2": repr(BETA2),
        "eps": repr(EPS),
        "weight_decay": repr(WEIGHT_DECAY),
        "weight_decay_applies_to": "ndim>=2 (matrices and embedding); 0.0 for 1-D norm weights",
        "clip": repr(CLIP),
        "clip_coef": "min(1, clip / (norm + 1e-6))",
        "steps": str(N_STEPS),
        "batch": str(B),
        "seq_len": str(S),
        "seed": str(seed),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    write_safetensors_sorted(os.path.join(outdir, "golden.safetensors"), golden, meta)
    return outdir


def sanity(outdir):
    path = os.path.join(outdir, "golden.safetensors")
    g = load_file(path)
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    print(f"== {os.path.relpath(outdir, REPO)}")
    print("   metadata:", json.dumps(meta, sort_keys=True))
    for n in sorted(g):
        print(f"   {n:60s} {str(g[n].dtype).replace('torch.', ''):8s} {list(g[n].shape)}")
    print(f"   max|logits|      = {g['logits'].abs().max().item():.9g}")
    print(f"   loss             = {g['loss'].item():.9g}")
    gnorm = math.sqrt(sum(float((t.double() ** 2).sum()) for n, t in g.items() if n.startswith("grad.")))
    print(f"   total grad norm  = {gnorm:.9g}")
    for n in sorted(k for k in g if k.startswith("grad.")):
        print(f"     |{n}| = {g[n].norm().item():.6g}")
    print("   steps.losses     =", [f"{x:.9g}" for x in g["steps.losses"].tolist()])
    print("   steps.gradnorms  =", [f"{x:.9g}" for x in g["steps.gradnorms"].tolist()], f"(clip {meta['clip']})")
    sizes = {f: os.path.getsize(os.path.join(outdir, f)) for f in sorted(os.listdir(outdir))}
    print("   files:", sizes, "total", sum(sizes.values()), "bytes")
    assert sum(sizes.values()) < 1 << 20


def main():
    setup_determinism()
    print(f"torch {torch.__version__}  transformers {transformers.__version__}  python {sys.version.split()[0]}")
    only = sys.argv[1:]
    unknown = [n for n in only if n not in [c["name"] for c in CASES]]
    assert not unknown, f"unknown case(s) {unknown}; cases: {[c['name'] for c in CASES]}"
    outs = [make_case(c) for c in CASES if not only or c["name"] in only]
    for o in outs:
        sanity(o)


if __name__ == "__main__":
    main()
