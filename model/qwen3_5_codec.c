// Qwen3.5's config codec (model/hf_config_codec.h): its text model's own fields (transformers'
// Qwen3_5TextConfig: the Gated DeltaNet sizes, layer_types, the MTP head's layer count, partial
// RoPE and MRoPE sections) into zt_qwen3_5_fields, its defaults, YaRN refused, the wrapper
// config Qwen3_5ForConditionalGeneration (model_type "qwen3_5", the text under "text_config"),
// and its config.json written back.
// defines: zt_qwen3_5_codec
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/hf_config_codec.h"
#include "model/qwen3_5.h"

// Qwen3.5's RoPE fields: partial_rotary_factor (the RoPE object's, else the top level's, else
// 0.25: Qwen3_5TextConfig's default) and the MRoPE sections, from rd, the RoPE object
// transformers reads (read_rope), or NULL.
static int parse_rope(zt_model_config *c, const cJSON *root, const cJSON *rd, const char *what,
                             const char *origin) {
    double prf = 0.25;
    if (zt_codec_get_num(root, "partial_rotary_factor", &prf, 0, origin) < 0) return -1;
    if (rd && zt_codec_get_num(rd, "partial_rotary_factor", &prf, 0, origin) < 0) return -1;
    if (!(prf > 0 && prf <= 1))
        return zt_err("%s: partial_rotary_factor must be in (0, 1] (got %g)", origin, prf);
    c->partial_rotary_factor = prf;
    c->rotary_dim = (int)(c->head_dim * prf);  // Python's int(): truncation
    if (c->rotary_dim < 2 || c->rotary_dim % 2)
        return zt_err("%s: head_dim %d x partial_rotary_factor %g = %d rotated dims; RoPE needs an even number >= 2",
                      origin, c->head_dim, prf, c->rotary_dim);
    zt_q35_set(c)->mrope_section[0] = 11, zt_q35_set(c)->mrope_section[1] = 11, zt_q35_set(c)->mrope_section[2] = 10;
    zt_q35_set(c)->mrope_interleaved = 0;
    if (!rd) return 0;
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(rd, "mrope_section");
    if (ms && !cJSON_IsNull(ms)) {
        if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) != 3)
            return zt_err("%s: %s.mrope_section must be an array of 3 integers", origin, what);
        for (int i = 0; i < 3; i++) {
            const cJSON *e = cJSON_GetArrayItem(ms, i);
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
                e->valuedouble > ZT_LIM_HEAD_DIM)
                return zt_err("%s: %s.mrope_section[%d] must be an integer in [0, %d]", origin, what, i,
                              ZT_LIM_HEAD_DIM);
            zt_q35_set(c)->mrope_section[i] = (int)e->valuedouble;
        }
    }
    const cJSON *mi = cJSON_GetObjectItemCaseSensitive(rd, "mrope_interleaved");
    if (mi && !cJSON_IsNull(mi) && !cJSON_IsBool(mi))
        return zt_err("%s: %s.mrope_interleaved must be true or false", origin, what);
    zt_q35_set(c)->mrope_interleaved = mi && cJSON_IsTrue(mi);
    return 0;
}

// Qwen3.5's text fields (transformers' Qwen3_5TextConfig, its defaults where a field is absent;
// its RoPE fields are parse_rope's).
static int parse_fields(zt_model_config *c, const cJSON *root, const char *origin) {
    const cJSON *gate = cJSON_GetObjectItemCaseSensitive(root, "attn_output_gate");
    if (gate && !cJSON_IsNull(gate) && !cJSON_IsBool(gate))
        return zt_err("%s: attn_output_gate must be true or false", origin);
    if (gate && cJSON_IsFalse(gate))
        return zt_err("%s: attn_output_gate is false; Qwen3.5's full attention always has its sigmoid output gate "
                      "(transformers' Qwen3_5Attention)", origin);
    zt_q35_set(c)->attn_output_gate = 1;
    if (zt_codec_get_dim(root, "linear_conv_kernel_dim", &zt_q35_set(c)->lin_conv_kernel, 4, 64, origin) ||
        zt_codec_get_dim(root, "linear_key_head_dim", &zt_q35_set(c)->lin_key_dim, 128, ZT_LIM_HEAD_DIM, origin) ||
        zt_codec_get_dim(root, "linear_value_head_dim", &zt_q35_set(c)->lin_value_dim, 128, ZT_LIM_HEAD_DIM, origin) ||
        zt_codec_get_dim(root, "linear_num_key_heads", &zt_q35_set(c)->lin_key_heads, 16, ZT_LIM_HEADS, origin) ||
        zt_codec_get_dim(root, "linear_num_value_heads", &zt_q35_set(c)->lin_value_heads, 32, ZT_LIM_HEADS, origin))
        return -1;
    if (zt_q35(c)->lin_value_heads % zt_q35(c)->lin_key_heads)
        return zt_err("%s: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d (each key head "
                      "serves a whole number of value heads)",
                      origin, zt_q35(c)->lin_value_heads, zt_q35(c)->lin_key_heads);
    int64_t v = 0;
    if (zt_codec_get_int(root, "mtp_num_hidden_layers", &v, 0, 0, 64, origin) < 0) return -1;
    zt_q35_set(c)->mtp_layers = (int)v;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->num_layers)
            return zt_err("%s: layer_types must be an array of num_hidden_layers = %d strings", origin, c->num_layers);
        int l = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, lt) {
            if (cJSON_IsString(e) && !strcmp(e->valuestring, "linear_attention"))
                zt_q35_set(c)->layer_linear[l] = 1;
            else if (!cJSON_IsString(e) || strcmp(e->valuestring, "full_attention") != 0)
                return zt_err("%s: layer_types[%d] is %s%s%s; Qwen3.5 has \"linear_attention\" and \"full_attention\"",
                              origin, l, cJSON_IsString(e) ? "\"" : "", cJSON_IsString(e) ? e->valuestring : "not a string",
                              cJSON_IsString(e) ? "\"" : "");
            l++;
        }
    } else {  // transformers: every full_attention_interval-th layer is full attention
        int64_t every = 4;
        if (zt_codec_get_int(root, "full_attention_interval", &every, 0, 1, ZT_LIM_LAYERS, origin) < 0) return -1;
        for (int l = 0; l < c->num_layers; l++) zt_q35_set(c)->layer_linear[l] = (l + 1) % every != 0;
    }
    return 0;
}

// Qwen3.5's text config (Qwen3_5ForCausalLM): the fields both families share, then its own.
static char *write_json(const zt_model_config *c) {
    cJSON *o = zt_codec_json_head(c, "Qwen3_5ForCausalLM", "qwen3_5_text");
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "attention_bias", 0);
    cJSON_AddBoolToObject(o, "attn_output_gate", 1);
    cJSON_AddNumberToObject(o, "linear_conv_kernel_dim", zt_q35(c)->lin_conv_kernel);
    cJSON_AddNumberToObject(o, "linear_key_head_dim", zt_q35(c)->lin_key_dim);
    cJSON_AddNumberToObject(o, "linear_value_head_dim", zt_q35(c)->lin_value_dim);
    cJSON_AddNumberToObject(o, "linear_num_key_heads", zt_q35(c)->lin_key_heads);
    cJSON_AddNumberToObject(o, "linear_num_value_heads", zt_q35(c)->lin_value_heads);
    cJSON *lt = cJSON_AddArrayToObject(o, "layer_types");
    for (int l = 0; l < c->num_layers; l++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(zt_q35(c)->layer_linear[l] ? "linear_attention" : "full_attention"));
    cJSON_AddNumberToObject(o, "max_position_embeddings", (double)c->max_position_embeddings);
    zt_codec_add_exact(o, "rms_norm_eps", c->rms_norm_eps);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
    cJSON *rp = cJSON_AddObjectToObject(o, "rope_parameters");
    cJSON_AddStringToObject(rp, "rope_type", "default");
    zt_codec_add_exact(rp, "rope_theta", c->rope_theta);
    zt_codec_add_exact(rp, "partial_rotary_factor", c->partial_rotary_factor);
    cJSON_AddBoolToObject(rp, "mrope_interleaved", zt_q35(c)->mrope_interleaved);
    cJSON *ms = cJSON_AddArrayToObject(rp, "mrope_section");
    for (int i = 0; i < 3; i++) cJSON_AddItemToArray(ms, cJSON_CreateNumber(zt_q35(c)->mrope_section[i]));
    if (zt_q35(c)->mtp_layers) cJSON_AddNumberToObject(o, "mtp_num_hidden_layers", zt_q35(c)->mtp_layers);
    if (c->bos_token_id >= 0) cJSON_AddNumberToObject(o, "bos_token_id", (double)c->bos_token_id);
    if (c->eos_token_id >= 0) cJSON_AddNumberToObject(o, "eos_token_id", (double)c->eos_token_id);
    zt_codec_add_exact(o, "initializer_range", c->initializer_range);
    cJSON_AddStringToObject(o, "torch_dtype", "bfloat16");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

// Read from the wrapper: its weights are named under ZT_QWEN3_5_VLM_PREFIX (zt_family.hf_prefix).
static void wrapped(zt_model_config *c) { zt_q35_set(c)->vlm = 1; }

const zt_config_codec zt_qwen3_5_codec = {
    .family = &zt_qwen3_5_family,
    .model_type = "qwen3_5_text",
    .implements = "\"qwen3_5_text\" / \"qwen3_5\" (Qwen3.5's text model)",
    .head_dim_default = 256,          // Qwen3_5TextConfig's
    .max_positions_default = 32768,
    .yarn = 0,
    .parse_rope = parse_rope,
    .parse = parse_fields,
    .wrapper_type = "qwen3_5",
    .wrapper_class = "Qwen3_5ForConditionalGeneration",
    .wrapped = wrapped,
    .write = write_json,
};
