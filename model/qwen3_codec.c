// Qwen3's config codec (model/hf_config_codec.h): its fields are the ones every family has, read
// by model/hf_config.c; this entry gives its defaults and writes its config.json back.
// defines: zt_qwen3_codec
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "model/hf_config_codec.h"
#include "model/qwen3.h"

// Qwen3's config.json (Qwen3ForCausalLM): the shared fields are its whole config.
static char *write_json(const zt_model_config *c) {
    cJSON *o = zt_codec_json_head(c, "Qwen3ForCausalLM", "qwen3");
    zt_codec_add_exact(o, "rms_norm_eps", c->rms_norm_eps);
    zt_codec_add_exact(o, "rope_theta", c->rope_theta);
    if (c->rope_yarn) {  // the spelling every transformers reads (5 converts it to rope_parameters)
        cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "yarn");
        zt_codec_add_exact(rs, "factor", c->rope_factor);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)c->rope_original_max_positions);
        if (c->rope_attention_factor > 0) zt_codec_add_exact(rs, "attention_factor", c->rope_attention_factor);
        if (c->rope_beta_fast > 0) zt_codec_add_exact(rs, "beta_fast", c->rope_beta_fast);
        if (c->rope_beta_slow > 0) zt_codec_add_exact(rs, "beta_slow", c->rope_beta_slow);
        if (c->rope_mscale > 0) zt_codec_add_exact(rs, "mscale", c->rope_mscale);
        if (c->rope_mscale_all_dim > 0) zt_codec_add_exact(rs, "mscale_all_dim", c->rope_mscale_all_dim);
        if (c->rope_no_truncate) cJSON_AddFalseToObject(rs, "truncate");
    } else {
        cJSON_AddNullToObject(o, "rope_scaling");
    }
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
    zt_codec_add_exact(o, "initializer_range", c->initializer_range);
    cJSON_AddNumberToObject(o, "max_position_embeddings", (double)c->max_position_embeddings);
    if (c->bos_token_id >= 0) cJSON_AddNumberToObject(o, "bos_token_id", (double)c->bos_token_id);
    if (c->eos_token_id >= 0) cJSON_AddNumberToObject(o, "eos_token_id", (double)c->eos_token_id);
    cJSON_AddBoolToObject(o, "attention_bias", 0);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "use_sliding_window", 0);
    cJSON_AddStringToObject(o, "torch_dtype", "bfloat16");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

const zt_config_codec zt_qwen3_codec = {
    .family = &zt_qwen3_family,
    .model_type = "qwen3",
    .implements = "\"qwen3\" (dense Qwen3)",
    .head_dim_default = 0,            // hidden_size / num_attention_heads
    .max_positions_default = 40960,   // Qwen3Config's
    .yarn = 1,
    .write = write_json,
};
