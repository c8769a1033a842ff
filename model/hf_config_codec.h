// The config codec of each family (config.json <-> zt_model_config), a table entry per family
// registered in model/hf_config.c's list. Not in zt_family itself: a codec needs cJSON, which the
// GPU-only build lacks. model/hf_config.c reads and writes the fields every family has and calls
// the entry of the config's model_type for the rest; the helpers below are the ones a codec uses
// (range-checked reads, exact writes). Qwen3's: model/qwen3_codec.c; Qwen3.5's: model/qwen3_5_codec.c.
// defines: zt_config_codec, zt_config_codecs, zt_config_codec_of, zt_codec_get_int, zt_codec_get_num,
//          zt_codec_get_dim, zt_codec_add_exact, zt_codec_json_head, ZT_LIM_*
#ifndef ZT_HF_CONFIG_CODEC_H
#define ZT_HF_CONFIG_CODEC_H
#include <cjson/cJSON.h>
#include <stdint.h>

#include "model/hf_config.h"

// Limits: generous for any dense Qwen3 (Qwen3-32B: 64 layers, 5120 hidden, 25600 ffn, 64/8
// heads of 128, 151936 tokens) and small enough that every size computed from them fits an
// int64 (and token ids an int32).
#define ZT_LIM_VOCAB (((int64_t)1 << 31) - 1)
#define ZT_LIM_HIDDEN ((int64_t)1 << 20)
#define ZT_LIM_FFN ((int64_t)1 << 22)
#define ZT_LIM_LAYERS 4096
#define ZT_LIM_HEADS 4096
#define ZT_LIM_HEAD_DIM 4096
#define ZT_LIM_POSITIONS ((int64_t)1 << 31)

typedef struct zt_config_codec {
    const zt_family *family;          // the table a config of this model_type gets
    const char *model_type;           // its text model's config.json model_type (= family->model_type)
    const char *implements;           // the unknown model_type message's words: "\"qwen3\" (dense Qwen3)"
    int64_t head_dim_default;         // head_dim when absent (0: hidden_size / num_attention_heads)
    int64_t max_positions_default;    // max_position_embeddings when absent (transformers' default)
    int yarn;                         // 1: YaRN RoPE scaling is implemented; 0: refused by name
    // Its RoPE fields beyond the shared ones, read after them (rd: the RoPE object transformers reads,
    // named `what`, or NULL). NULL: the whole head rotates (rotary_dim = head_dim).
    int (*parse_rope)(zt_model_config *c, const cJSON *root, const cJSON *rd, const char *what, const char *origin);
    // Its own fields (zt_model_config.own), read and validated after the shared ones. NULL: none.
    int (*parse)(zt_model_config *c, const cJSON *root, const char *origin);
    // A wrapper config whose text model's config is its "text_config" (a vision-language model's:
    // "qwen3_5", class Qwen3_5ForConditionalGeneration); NULL: none. `wrapped` marks a config read
    // from one (its weights are then named under the family's hf_prefix).
    const char *wrapper_type, *wrapper_class;
    void (*wrapped)(zt_model_config *c);
    // config.json text (malloc'd) of its text model: transformers reads it back to the same model.
    char *(*write)(const zt_model_config *c);
} zt_config_codec;

// Every codec this build knows (NULL-terminated; the first is the one of a config without a
// model_type or without a family), and the codec of a family, by its name (NULL: none).
const zt_config_codec *const *zt_config_codecs(void);
const zt_config_codec *zt_config_codec_of(const zt_family *f);

// An integer field within [lo, hi] (checked on the JSON number itself): 0, 1 when absent and not
// required, -1 + zt_err.
int zt_codec_get_int(const cJSON *root, const char *key, int64_t *out, int required, int64_t lo, int64_t hi,
                     const char *origin);
// A number field: 0, 1 when absent and not required, -1 + zt_err.
int zt_codec_get_num(const cJSON *root, const char *key, double *out, int required, const char *origin);
// An optional positive integer field in [1, hi] with a default: 0 or -1 + zt_err.
int zt_codec_get_dim(const cJSON *root, const char *key, int *out, int dflt, int64_t hi, const char *origin);
// A double as the shortest text that reads back to the same bits.
void zt_codec_add_exact(cJSON *o, const char *key, double v);
// A config.json's first fields, the same in every family: the class, model_type and the sizes.
cJSON *zt_codec_json_head(const zt_model_config *c, const char *arch_name, const char *model_type);
#endif
