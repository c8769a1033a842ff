#!/usr/bin/env python3
"""What transformers 5 reads from config.json files that contradict themselves (issue 47).

Writes tests/golden/hf_config/facts.json for tests/unit/test_hf_config_facts.c: for each config,
the RoPE settings transformers' config class ends up with (PreTrainedConfig.convert_rope_params_to_dict
and standardize_rope_params: a non-empty rope_scaling replaces rope_parameters whole; rope_theta is
then rope_scaling's, else the top level's, else the default) and whether the model class ties
lm_head.weight to the embedding (PreTrainedModel.get_expanded_tied_weights_keys reads
self.config.tie_word_embeddings of the model that declares _tied_weights_keys: for
Qwen3_5ForConditionalGeneration that is the wrapper's config, not text_config's).

The RoPE facts need only transformers' config classes. The tie facts are taken from the config the
class reads and, where torch is installed, checked on the built model itself (lm_head.weight is the
embedding's Parameter or not); facts.json records which ("tie_checked_on_model").

    python3 tests/reference/make_hf_config_facts.py

Deterministic (no randomness, no weights written).
"""
import json
import os

import transformers
from transformers import Qwen3_5Config, Qwen3_5TextConfig, Qwen3Config

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "golden", "hf_config", "facts.json")

QWEN3 = dict(model_type="qwen3", vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64)
TEXT = dict(model_type="qwen3_5_text", vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
            layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2,
            linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8, max_position_embeddings=64)
YARN4 = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16)
YARN2 = dict(rope_type="yarn", factor=2.0, rope_theta=20000.0, original_max_position_embeddings=32)

# (name, config.json as a dict)
ROPE_CASES = [
    ("qwen3: rope_scaling yarn 4 beats rope_parameters yarn 2 (and its rope_theta)",
     dict(QWEN3, rope_theta=5000.0, rope_scaling=YARN4, rope_parameters=YARN2)),
    ("qwen3: rope_scaling default beats rope_parameters yarn",
     dict(QWEN3, rope_scaling=dict(rope_type="default"), rope_parameters=YARN2)),
    ("qwen3: rope_scaling default beats rope_parameters yarn, top-level rope_theta",
     dict(QWEN3, rope_theta=7000.0, rope_scaling=dict(rope_type="default"), rope_parameters=YARN2)),
    ("qwen3: rope_scaling null: rope_parameters", dict(QWEN3, rope_scaling=None, rope_parameters=YARN2)),
    ("qwen3: rope_scaling {}: rope_parameters", dict(QWEN3, rope_scaling={}, rope_parameters=YARN2)),
    ("qwen3: rope_parameters' rope_theta beats the top level's",
     dict(QWEN3, rope_theta=5000.0, rope_parameters=dict(rope_type="default", rope_theta=20000.0))),
    ("qwen3: old spelling type yarn with a top-level rope_theta",
     dict(QWEN3, rope_theta=5000.0, rope_scaling=dict(type="yarn", factor=2.0))),
    ("qwen3: rope_scaling yarn without rope_theta, rope_parameters holds it: the default",
     dict(QWEN3, rope_scaling=YARN4, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    ("qwen3: both the same: nothing to tell", dict(QWEN3, rope_scaling=YARN2, rope_parameters=YARN2)),
    ("qwen3_5_text: rope_scaling default beats rope_parameters (rope_theta, partial_rotary_factor)",
     dict(TEXT, partial_rotary_factor=0.5, rope_scaling=dict(rope_type="default", rope_theta=100.0),
          rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                               mrope_section=[1, 1, 0], mrope_interleaved=True))),
    ("qwen3_5_text: rope_parameters alone",
     dict(TEXT, rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                                     mrope_section=[1, 1, 0], mrope_interleaved=True))),
]

TIE_CASES = [
    ("qwen3: tie true", dict(QWEN3, tie_word_embeddings=True)),
    ("qwen3: tie false", dict(QWEN3, tie_word_embeddings=False)),
    ("qwen3: tie absent", dict(QWEN3)),
    ("qwen3_5_text: tie true", dict(TEXT, tie_word_embeddings=True)),
    ("qwen3_5_text: tie absent", dict(TEXT)),
]
for top in (True, False, None):
    for text in (True, False, None):
        cfg = dict(model_type="qwen3_5", architectures=["Qwen3_5ForConditionalGeneration"],
                   text_config=dict(TEXT, **({} if text is None else {"tie_word_embeddings": text})),
                   vision_config=dict(depth=1, hidden_size=16, num_heads=2, intermediate_size=32, patch_size=2,
                                      temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=32,
                                      num_position_embeddings=16))
        if top is not None:
            cfg["tie_word_embeddings"] = top
        TIE_CASES.append((f"qwen3_5 (VLM): top-level tie {top}, text_config tie {text}".replace("None", "absent"), cfg))


def config_of(d):
    d = json.loads(json.dumps(d))
    kind = d.pop("model_type")
    d.pop("architectures", None)
    cls = {"qwen3": Qwen3Config, "qwen3_5_text": Qwen3_5TextConfig, "qwen3_5": Qwen3_5Config}[kind]
    return cls.from_dict(d)


def rope_fact(cfg):
    rp = dict(cfg.rope_parameters)
    kind = rp.get("rope_type", "default")
    fact = dict(rope_type=kind, rope_theta=float(rp["rope_theta"]))
    if kind == "yarn":
        fact.update(factor=float(rp["factor"]), original_max_position_embeddings=int(rp["original_max_position_embeddings"]))
    if "partial_rotary_factor" in rp:
        fact["partial_rotary_factor"] = float(rp["partial_rotary_factor"])
    return fact


def tie_on_model(d):
    """lm_head.weight is the embedding's Parameter in the built model (None without torch)."""
    try:
        import torch  # noqa: F401
        from transformers import Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3ForCausalLM
    except Exception:
        return None
    cfg = config_of(d)
    kind = d["model_type"]
    if kind == "qwen3":
        m = Qwen3ForCausalLM(cfg)
        emb = m.model.embed_tokens.weight
    elif kind == "qwen3_5_text":
        m = Qwen3_5ForCausalLM(cfg)
        emb = m.model.embed_tokens.weight
    else:
        m = Qwen3_5ForConditionalGeneration(cfg)
        emb = m.model.language_model.embed_tokens.weight
    return m.lm_head.weight is emb


def main():
    out = dict(transformers=transformers.__version__, rope=[], tie=[])
    for name, d in ROPE_CASES:
        fact = rope_fact(config_of(d))
        # what rope_parameters alone reads to: the two disagree when that is not what transformers uses
        alone = {k: v for k, v in d.items() if k != "rope_scaling"}
        both = bool(d.get("rope_scaling")) and bool(d.get("rope_parameters"))
        out["rope"].append(dict(name=name, config=d, transformers=fact,
                                disagree=both and rope_fact(config_of(alone)) != fact))
    checked = True
    for name, d in TIE_CASES:
        tied = bool(getattr(config_of(d), "tie_word_embeddings", False))
        on_model = tie_on_model(d)
        if on_model is None:
            checked = False
        elif on_model != tied:
            raise SystemExit(f"{name}: the model ties {on_model}, its config says {tied}")
        out["tie"].append(dict(name=name, config=d, tied=tied))
    out["tie_checked_on_model"] = checked
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{OUT}: {len(out['rope'])} RoPE and {len(out['tie'])} tie cases (transformers {transformers.__version__}, "
          f"ties checked on the model: {checked})")


if __name__ == "__main__":
    main()
