// Qwen3.5's text model (transformers' Qwen3_5ForCausalLM), the second model family: decoder
// layers of two kinds, chosen per layer by the config's layer_types. A "linear_attention" layer
// is a Gated DeltaNet (in_proj_qkv -> causal depthwise conv1d + SiLU -> q, k l2-normalised, v;
// beta = sigmoid(in_proj_b), decay g = -exp(A_log) softplus(in_proj_a + dt_bias); the gated delta
// rule; a gated RMSNorm with silu(in_proj_z); out_proj). A "full_attention" layer is Qwen3's
// attention with QK-norm, RoPE on the first rotary_dim of each head, and a sigmoid output gate
// (q_proj yields per head D query rows then D gate rows). Every RMSNorm but the gated one
// scales by (1 + w) (weights start at 0). Units as Qwen3's: 0 = embedding, 1..L = layers,
// L + 1 = final norm (+ lm_head when untied). Packed documents: attention, the conv window and
// the recurrent state all restart at every document start. Context parallelism (CPU passes):
// model/qwen3_5_context.c shards the Gated DeltaNet value heads over the context group.
// defines: zt_qwen3_5_family, zt_qwen3_5_layer_linear, zt_qwen3_5_27b_config
#ifndef ZT_QWEN3_5_H
#define ZT_QWEN3_5_H
#include "model/family.h"

extern const zt_family zt_qwen3_5_family;

// 1 when layer l of a Qwen3.5 config is Gated DeltaNet.
static inline int zt_qwen3_5_layer_linear(const zt_model_config *c, int l) { return c->layer_linear[l] != 0; }

// The 27B text model's config (examples/qwen3.5-27b/config.json), built in for `plan`.
void zt_qwen3_5_27b_config(zt_model_config *c);
#endif
