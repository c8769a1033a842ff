// A model's configuration, as in a Hugging Face config.json, and its codec. `family` names
// the model family's table (model/family.h); the named fields are those every family has (Qwen3's
// whole config), and `own` holds the fields of one family alone. Every field comes from the file (head_dim is never derived when
// present). It lives in model/, the lowest layer that both the model (model/config.h loads a
// file or directory) and the training checkpoint (which stores and validates it) stand on.
// defines: zt_model_config, zt_model_config_parse, zt_model_config_json, zt_model_param_count,
//          zt_model_max_positions
#ifndef ZT_HF_CONFIG_H
#define ZT_HF_CONFIG_H
#include <stdint.h>

typedef struct zt_family zt_family;  // model/family.h

// Bytes of a config's family-owned fields (zt_model_config.own).
#define ZT_FAMILY_FIELDS_BYTES 4352

typedef struct {
    const zt_family *family;    // the model family (set by the codec from model_type; a config built by
                                // hand names its table, e.g. &zt_qwen3_family)
    int64_t vocab_size;
    int64_t hidden_size;        // d
    int64_t intermediate_size;  // F
    int num_layers;             // L
    int num_heads;              // H
    int num_kv_heads;           // Hkv
    int head_dim;               // D
    double rms_norm_eps;
    double rope_theta;
    int tie_word_embeddings;
    double initializer_range;
    int64_t max_position_embeddings;
    int64_t bos_token_id;       // -1 when absent
    int64_t eos_token_id;       // -1 when absent
    // RoPE scaling: rope_scaling (or transformers 5's rope_parameters) with rope_type "yarn".
    // All zero: plain RoPE; a zero optional field is "not given" (transformers' default).
    int rope_yarn;                      // 1: YaRN
    double rope_factor;                 // yarn: factor (> 1)
    int64_t rope_original_max_positions;  // yarn: original_max_position_embeddings
    double rope_attention_factor;       // yarn, optional: attention_factor (> 0)
    double rope_beta_fast, rope_beta_slow;  // yarn, optional (32 and 1)
    double rope_mscale, rope_mscale_all_dim;  // yarn, optional
    int rope_no_truncate;               // yarn: "truncate": false
    // Partial RoPE: RoPE on the first rotary_dim of each head.
    int rotary_dim;                     // rotated dims of a head: head_dim x partial_rotary_factor (Qwen3: head_dim)
    double partial_rotary_factor;       // as written (0: absent, i.e. 1)
    // The fields of the config that only its family has (Qwen3.5's: zt_qwen3_5_fields, model/qwen3_5.h;
    // Qwen3: none), all zero for a family without any. Only the family's own code reads or writes
    // them (its codec, passes, checkpoint rule and descriptions through its table); every other
    // folder sees bytes. Sized for the largest family's fields (each family asserts its own fit).
    union {
        unsigned char bytes[ZT_FAMILY_FIELDS_BYTES];
        int64_t align_i;
        double align_d;
    } own;
    // What the codec chose where the file contradicts itself and transformers reads one side
    // (rope_scaling against rope_parameters; a wrapper's tie_word_embeddings against its
    // text_config's): one line for the caller to show as a warning, "" when nothing was. Only
    // the parse of a file sets it; it is no part of the model (never written, never compared).
    char note[1024];
} zt_model_config;

// Parse from JSON text; `origin` names the source in error messages.
int zt_model_config_parse(zt_model_config *c, const char *json, const char *origin);
// HF-compatible config.json text (malloc'd).
char *zt_model_config_json(const zt_model_config *c);
// Through c->family (model/family.c): the parameter count (tied embeddings counted once; -1
// on overflow), and the positions the model's position encoding covers (Qwen3: with YaRN the
// scaled range).
int64_t zt_model_param_count(const zt_model_config *c);
int64_t zt_model_max_positions(const zt_model_config *c);
#endif
