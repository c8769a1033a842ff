// Tiny Qwen3.5 configs of the GPU tests, written out because the GPU programs have no cJSON
// (model/hf_config.c): tests/golden/q35_mix/config.json (untied; DeltaNet, DeltaNet, full,
// DeltaNet; Hv = 2 Hk) and tests/golden/q35_tied/config.json (tied; full, DeltaNet, DeltaNet)
// with 6 value heads instead of 2 (Hv = 3 Hk); the files' initializer_range 0.02. (At 0.1, with
// the norms moved off their zero start, the fp32 and bf16 models' gradients part by 13-57 %
// per unit through 4 layers while their losses agree to 1e-3, on the CPU execution of CUDA:
// too chaotic a regime to compare gradients at bf16 tolerance.)
// zt_q35_tiny_hd256: q35_mix with Qwen3.5-27B's attention head (head_dim 256, partial rotary 0.25:
// rotary_dim 64), 2 heads over 1 KV head, and only its first and full layers (DeltaNet, full).
// defines: zt_q35_tiny, zt_q35_tiny_hd256
#ifndef ZT_Q35_TINY_H
#define ZT_Q35_TINY_H
#include <string.h>

#include "model/qwen3_5.h"

static inline zt_model_config zt_q35_tiny(int tied) {
    zt_model_config c;
    memset(&c, 0, sizeof c);
    c.family = &zt_qwen3_5_family;
    c.rms_norm_eps = 1e-6, c.initializer_range = 0.02, c.max_position_embeddings = 256;
    c.bos_token_id = 1, c.eos_token_id = 2, zt_q35_set(&c)->attn_output_gate = 1, zt_q35_set(&c)->lin_conv_kernel = 4;
    if (!tied) {  // q35_mix
        c.vocab_size = 96, c.hidden_size = 48, c.intermediate_size = 48, c.num_layers = 4;
        c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 16, c.rotary_dim = 4, c.partial_rotary_factor = 0.25;
        c.rope_theta = 10000.0;
        zt_q35_set(&c)->lin_key_heads = 2, zt_q35_set(&c)->lin_value_heads = 4, zt_q35_set(&c)->lin_key_dim = 8, zt_q35_set(&c)->lin_value_dim = 12;
        zt_q35_set(&c)->layer_linear[0] = zt_q35_set(&c)->layer_linear[1] = zt_q35_set(&c)->layer_linear[3] = 1;
    } else {  // q35_tied, 6 value heads
        c.vocab_size = 80, c.hidden_size = 32, c.intermediate_size = 64, c.num_layers = 3;
        c.num_heads = 4, c.num_kv_heads = 1, c.head_dim = 8, c.rotary_dim = 4, c.partial_rotary_factor = 0.5;
        c.rope_theta = 1000000.0;
        zt_q35_set(&c)->lin_key_heads = 2, zt_q35_set(&c)->lin_value_heads = 6, zt_q35_set(&c)->lin_key_dim = 8, zt_q35_set(&c)->lin_value_dim = 8;
        zt_q35_set(&c)->layer_linear[1] = zt_q35_set(&c)->layer_linear[2] = 1;
        c.tie_word_embeddings = 1;
    }
    return c;
}

static inline zt_model_config zt_q35_tiny_hd256(void) {
    zt_model_config c = zt_q35_tiny(0);
    c.num_layers = 2, zt_q35_set(&c)->layer_linear[1] = 0, zt_q35_set(&c)->layer_linear[2] = zt_q35_set(&c)->layer_linear[3] = 0;
    c.num_heads = 2, c.num_kv_heads = 1, c.head_dim = 256, c.rotary_dim = 64;
    return c;
}
#endif
