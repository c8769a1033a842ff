#!/usr/bin/env python3
"""Tiny Qwen3.5 checkpoints as released (transformers 5, float32, seeded) for the carry tests.

Usage (from the repository root):
    python3 tests/reference/make_qwen3_5_fixtures.py

Writes
    tests/golden/qwen3_5_vlm/        Qwen3_5ForConditionalGeneration (model_type "qwen3_5"): config.json
                                     (text under "text_config") + model.safetensors: the text model under
                                     model.language_model.*, a vision tower under model.visual.*,
                                     lm_head.weight at the top level, and an MTP head (mtp.*, bf16)
    tests/golden/qwen3_5_text_mtp/   Qwen3_5ForCausalLM (model_type "qwen3_5_text"): model.* + lm_head.weight
                                     + the same MTP head (mtp.*, bf16)
Text config (both): vocab 96, hidden 32, intermediate 64, 4 layers [linear, linear, linear, full],
4 heads / 2 KV heads of head_dim 16, linear attention 2 key heads / 4 value heads of dims 8 / 8,
conv kernel 4, partial_rotary_factor 0.25, mtp_num_hidden_layers 1. Vision (VLM only): depth 1,
hidden 16, 2 heads, intermediate 32, patch 2, temporal patch 2, spatial merge 2, out_hidden 32.

transformers has no MTP module (it drops "^mtp.*" on load), so the MTP head is written here in
the released checkpoints' naming (mtp.fc, mtp.pre_fc_norm_{embedding,hidden}, mtp.norm and one
full-attention decoder layer mtp.layers.0.*), bf16 as released. zerotrain carries every mtp.*
and model.visual.* tensor byte for byte (checkpoint/hf_carry.c); the CLI test
tests/cli/qwen3_5_carry.sh trains one step at lr 0 and checks the export against these files.

Deterministic: fixed seeds, one CPU thread; two runs give byte-identical files.
"""

import json
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "tests", "golden")

TEXT = dict(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
    linear_conv_kernel_dim=4,
    max_position_embeddings=64,
    rms_norm_eps=1e-6,
    initializer_range=0.1,
    tie_word_embeddings=False,
    bos_token_id=1,
    eos_token_id=2,
    mtp_num_hidden_layers=1,
    # rotary dim = 16 x 0.25 = 4: the mrope sections (of rotary dim / 2 frequencies) sum to 2
    rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                         mrope_section=[1, 1, 0], mrope_interleaved=True),
)

VISION = dict(
    depth=1,
    hidden_size=16,
    num_heads=2,
    intermediate_size=32,
    in_channels=3,
    patch_size=2,
    temporal_patch_size=2,
    spatial_merge_size=2,
    out_hidden_size=32,
    num_position_embeddings=16,
    initializer_range=0.1,
)


def mtp_tensors(seed):
    """The MTP head of a released Qwen3.5 checkpoint, tiny: one full-attention layer (gated q_proj)."""
    g = torch.Generator().manual_seed(seed)
    d, f, h, kv, hd = TEXT["hidden_size"], TEXT["intermediate_size"], 4, 2, 16

    def w(*shape):
        return (0.1 * torch.randn(*shape, generator=g)).to(torch.bfloat16)

    def norm(n):
        return (1 + 0.1 * torch.randn(n, generator=g)).to(torch.bfloat16)

    p = "mtp.layers.0."
    return {
        "mtp.fc.weight": w(d, 2 * d),
        "mtp.pre_fc_norm_embedding.weight": norm(d),
        "mtp.pre_fc_norm_hidden.weight": norm(d),
        p + "input_layernorm.weight": norm(d),
        p + "self_attn.q_proj.weight": w(2 * h * hd, d),
        p + "self_attn.k_proj.weight": w(kv * hd, d),
        p + "self_attn.v_proj.weight": w(kv * hd, d),
        p + "self_attn.o_proj.weight": w(d, h * hd),
        p + "self_attn.q_norm.weight": norm(hd),
        p + "self_attn.k_norm.weight": norm(hd),
        p + "post_attention_layernorm.weight": norm(d),
        p + "mlp.gate_proj.weight": w(f, d),
        p + "mlp.up_proj.weight": w(f, d),
        p + "mlp.down_proj.weight": w(d, f),
        "mtp.norm.weight": norm(d),
    }


def perturb_norms(model, seed):
    """RMSNorm weights 1 + 0.1 randn (transformers starts them at 0 or 1): non-trivial values."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") and p.dim() == 1:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))


def write(model, out, seed):
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    model.save_pretrained(out, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(out, extra)):
            os.remove(os.path.join(out, extra))
    path = os.path.join(out, "model.safetensors")
    tensors = load_file(path)
    tensors.update(mtp_tensors(seed + 1))
    save_file({k: tensors[k].contiguous() for k in sorted(tensors)}, path, metadata={"format": "pt"})
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    print(f"{out}: {cfg['architectures']}, {len(tensors)} tensors, {os.path.getsize(path)} bytes")


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    torch.manual_seed(1234)
    cfg = Qwen3_5Config(text_config=dict(TEXT), vision_config=dict(VISION), tie_word_embeddings=False)
    vlm = Qwen3_5ForConditionalGeneration(cfg).to(torch.float32).eval()
    perturb_norms(vlm, 4321)
    write(vlm, os.path.join(GOLDEN, "qwen3_5_vlm"), 1234)
    names = load_file(os.path.join(GOLDEN, "qwen3_5_vlm", "model.safetensors")).keys()
    assert any(n.startswith("model.language_model.") for n in names)
    assert any(n.startswith("model.visual.") for n in names)
    assert "lm_head.weight" in names and any(n.startswith("mtp.") for n in names)

    torch.manual_seed(5678)
    text = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**TEXT)).to(torch.float32).eval()
    perturb_norms(text, 8765)
    write(text, os.path.join(GOLDEN, "qwen3_5_text_mtp"), 5678)

    # both load back as the class they were saved from (the MTP head dropped, as transformers does)
    Qwen3_5ForConditionalGeneration.from_pretrained(os.path.join(GOLDEN, "qwen3_5_vlm"))
    Qwen3_5ForCausalLM.from_pretrained(os.path.join(GOLDEN, "qwen3_5_text_mtp"))


if __name__ == "__main__":
    main()
