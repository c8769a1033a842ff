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
// defines: zt_qwen3_5_family, zt_qwen3_5_fields, zt_q35, zt_q35_set, ZT_QWEN3_5_VLM_PREFIX,
//          zt_qwen3_5_layer_linear, zt_qwen3_5_27b_config
#ifndef ZT_QWEN3_5_H
#define ZT_QWEN3_5_H
#include "model/family.h"

extern const zt_family zt_qwen3_5_family;

// A vision-language wrapper's (Qwen3_5ForConditionalGeneration) prefix of the text model's
// "model.X" tensors: its name adapter (zt_family.hf_prefix).
#define ZT_QWEN3_5_VLM_PREFIX "model.language_model."

// Qwen3.5's own fields of a config (zt_model_config.own; model_type "qwen3_5_text", or "qwen3_5"
// with these under "text_config"). Layer l is Gated DeltaNet ("linear_attention") when
// layer_linear[l], else full attention with a sigmoid output gate (attn_output_gate: q_proj 2 H D
// rows: per head D query rows then D gate rows) and RoPE on the first rotary_dim of each head.
// may_alias: the bytes of zt_model_config.own are read through this type.
typedef struct __attribute__((may_alias)) {
    int attn_output_gate;
    int lin_conv_kernel;                // linear_conv_kernel_dim
    int lin_key_heads, lin_value_heads; // linear_num_key_heads, linear_num_value_heads
    int lin_key_dim, lin_value_dim;     // linear_key_head_dim, linear_value_head_dim
    int mtp_layers;                     // mtp_num_hidden_layers: the MTP head's weights are carried, not trained
    int mrope_section[3], mrope_interleaved;  // rope_parameters' (text positions make them inert): written back
    int vlm;                            // read from a Qwen3_5ForConditionalGeneration config (text under
                                        // "text_config", weights under ZT_QWEN3_5_VLM_PREFIX)
    unsigned char layer_linear[4096];   // per layer (LIM_LAYERS in hf_config.c)
} zt_qwen3_5_fields;
_Static_assert(sizeof(zt_qwen3_5_fields) <= ZT_FAMILY_FIELDS_BYTES, "Qwen3.5's fields fit zt_model_config.own");

// A config's Qwen3.5 fields, to read (zt_q35) or to set (zt_q35_set).
static inline const zt_qwen3_5_fields *zt_q35(const zt_model_config *c) {
    return (const zt_qwen3_5_fields *)(const void *)c->own.bytes;
}
static inline zt_qwen3_5_fields *zt_q35_set(zt_model_config *c) { return (zt_qwen3_5_fields *)(void *)c->own.bytes; }

// 1 when layer l of a Qwen3.5 config is Gated DeltaNet.
static inline int zt_qwen3_5_layer_linear(const zt_model_config *c, int l) { return zt_q35(c)->layer_linear[l] != 0; }

// The 27B text model's config (examples/qwen3.5-27b/config.json), built in for `plan`.
void zt_qwen3_5_27b_config(zt_model_config *c);
#endif
