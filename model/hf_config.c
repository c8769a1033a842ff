// The Hugging Face config.json of a checkpoint, read with cJSON and validated against what this
// trainer implements (SiLU MLP, no attention bias, no sliding window, plain RoPE or YaRN), and
// written back. Every field is taken from the file. The fields every family has are read here;
// the family is chosen by model_type through the codecs' table (model/hf_config_codec.h), whose
// entry reads its own fields, its RoPE extras and a wrapper config, and writes the file back.
// Here, below the model (model/config.c loads it from a path), because the training
// checkpoint stores and validates the config too (checkpoint/ckpt.c, ckpt_h5.c).
// defines: zt_model_config_parse, zt_model_config_json, zt_config_codecs, zt_config_codec_of, zt_codec_get_int,
//          zt_codec_get_num, zt_codec_get_dim, zt_codec_add_exact, zt_codec_json_head
#include "base/json_util.h"
#include "model/hf_config.h"
#include "model/family.h"
#include "model/hf_config_codec.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

// An integer field within [lo, hi]: the range is checked on the JSON number itself, before
// any conversion, so 4294967296 layers or a vocabulary of 1e20 are refused instead of
// wrapping to 0 layers or INT64_MIN.
int zt_codec_get_int(const cJSON *root, const char *key, int64_t *out, int required, int64_t lo, int64_t hi,
                   const char *origin) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) return zt_err("%s: required field \"%s\" is missing", origin, key);
        return 1;
    }
    const double x = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    if (!cJSON_IsNumber(it) || !isfinite(x) || x != floor(x))
        return zt_err("%s: field \"%s\" must be an integer", origin, key);
    if (x < (double)lo || x > (double)hi)
        return zt_err("%s: field \"%s\" = %.17g is outside the range this trainer supports, [%lld, %lld]", origin, key,
                      x, (long long)lo, (long long)hi);
    *out = (int64_t)x;
    return 0;
}

int zt_codec_get_num(const cJSON *root, const char *key, double *out, int required, const char *origin) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) return zt_err("%s: required field \"%s\" is missing", origin, key);
        return 1;
    }
    if (!cJSON_IsNumber(it)) return zt_err("%s: field \"%s\" must be a number", origin, key);
    *out = it->valuedouble;
    return 0;
}


// ---- the codecs' table --------------------------------------------------------------------------

extern const zt_config_codec zt_qwen3_codec, zt_qwen3_5_codec;  // model/qwen3_codec.c, model/qwen3_5_codec.c

// Adding a family's codec: its entry here (the first is a config's without model_type).
static const zt_config_codec *const codecs[] = {&zt_qwen3_codec, &zt_qwen3_5_codec, NULL};

const zt_config_codec *const *zt_config_codecs(void) { return codecs; }

// By the family's name, its key (as the CUDA module's table): a copy of a table (a test's
// variant of a family) keeps its family's codec.
const zt_config_codec *zt_config_codec_of(const zt_family *f) {
    for (int i = 0; f && codecs[i]; i++)
        if (codecs[i]->family == f || !strcmp(codecs[i]->family->name, f->name)) return codecs[i];
    return NULL;
}

// The codec of a text model's model_type (NULL: the first, a config written before families).
static const zt_config_codec *codec_of_type(const char *model_type) {
    if (!model_type) return codecs[0];
    for (int i = 0; codecs[i]; i++)
        if (!strcmp(codecs[i]->model_type, model_type)) return codecs[i];
    return NULL;
}

static const zt_config_codec *codec_of_wrapper(const char *model_type) {
    for (int i = 0; codecs[i]; i++)
        if (codecs[i]->wrapper_type && !strcmp(codecs[i]->wrapper_type, model_type)) return codecs[i];
    return NULL;
}

// What the codecs implement, for the unknown model_type message: "A and B", "A, B and C".
static void implemented(char *out, size_t n) {
    int k = 0;
    while (codecs[k]) k++;
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < k && o < n; i++)
        o += (size_t)snprintf(out + o, n - o, "%s%s", i == 0 ? "" : i == k - 1 ? " and " : ", ", codecs[i]->implements);
}

// rope_type (or the older "type") of a RoPE settings object, or NULL.
static const char *rope_type_of(const cJSON *o) {
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
    if (!rt) rt = cJSON_GetObjectItemCaseSensitive(o, "type");
    return rt && cJSON_IsString(rt) ? rt->valuestring : NULL;
}

// An optional number of a rope_scaling object that must be finite and > 0 when given.
static int get_pos_num(const cJSON *o, const char *key, double *out, const char *what, const char *origin) {
    const int rc = zt_codec_get_num(o, key, out, 0, origin);
    if (rc < 0) return -1;
    if (rc == 0 && !(isfinite(*out) && *out > 0))
        return zt_err("%s: %s.%s must be a finite number > 0 (got %g)", origin, what, key, *out);
    return 0;
}

// rope_scaling / rope_parameters: "default" (plain) or "yarn" with transformers'
// fields (_compute_yarn_parameters); every other kind is refused by name. An object without a
// type is "default" (transformers' setdefault), unless it names a factor: a scaling of unknown kind.
static int parse_rope_scaling(zt_model_config *c, const cJSON *rs, const char *what, const char *origin) {
    if (!cJSON_IsObject(rs)) return zt_err("%s: %s must be an object or null", origin, what);
    const char *type = rope_type_of(rs);
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (rt && !cJSON_IsString(rt)) return zt_err("%s: %s.rope_type must be a string", origin, what);
    if (!type && cJSON_GetObjectItemCaseSensitive(rs, "factor")) return zt_err("%s: %s has no rope_type", origin, what);
    if (!type || !strcmp(type, "default")) return 0;
    if (strcmp(type, "yarn") != 0)
        return zt_err("%s: %s.rope_type \"%s\" is not supported (plain RoPE or \"yarn\")", origin, what, type);
    const zt_config_codec *codec = zt_config_codec_of(c->family);
    if (codec && !codec->yarn)  // before Qwen3's rules, which are not the other family's
        return zt_err("%s: %s.rope_type is \"yarn\": YaRN is not implemented for %s (its rope_type must be "
                      "\"default\")", origin, what, zt_model_title(c));
    c->rope_yarn = 1;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(rs, "factor");
    if (!f || cJSON_IsNull(f))
        return zt_err("%s: %s is YaRN but has no \"factor\" (Qwen3: 4.0 with original_max_position_embeddings "
                      "32768 for 131072 positions)", origin, what);
    if (zt_codec_get_num(rs, "factor", &c->rope_factor, 1, origin) < 0) return -1;
    if (!(isfinite(c->rope_factor) && c->rope_factor > 1))
        return zt_err("%s: %s.factor must be a finite number > 1 (got %g): YaRN stretches the trained positions by it",
                      origin, what, c->rope_factor);
    // transformers' default: the config's max_position_embeddings (read before this)
    c->rope_original_max_positions = c->max_position_embeddings;
    if (zt_codec_get_int(rs, "original_max_position_embeddings", &c->rope_original_max_positions, 0, 1, ZT_LIM_POSITIONS,
                origin) < 0)
        return -1;
    // The scaled range is what the gate holds seq_len to: it must be a number of positions this
    // trainer can count (a factor of 1e30 once overflowed it, and the gate reported the unscaled 64).
    const double range = c->rope_factor * (double)c->rope_original_max_positions;
    if (range > (double)ZT_LIM_POSITIONS)
        return zt_err("%s: %s.factor %g x original_max_position_embeddings %lld = %.4g positions, beyond the %lld this "
                      "trainer supports (as for max_position_embeddings): YaRN's factor is the context length over "
                      "the original one (Qwen3: 4.0 with 32768)",
                      origin, what, c->rope_factor, (long long)c->rope_original_max_positions, range,
                      (long long)ZT_LIM_POSITIONS);
    if (get_pos_num(rs, "attention_factor", &c->rope_attention_factor, what, origin) < 0 ||
        get_pos_num(rs, "beta_fast", &c->rope_beta_fast, what, origin) < 0 ||
        get_pos_num(rs, "beta_slow", &c->rope_beta_slow, what, origin) < 0 ||
        get_pos_num(rs, "mscale", &c->rope_mscale, what, origin) < 0 ||
        get_pos_num(rs, "mscale_all_dim", &c->rope_mscale_all_dim, what, origin) < 0)
        return -1;
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(rs, "truncate");
    if (tr && !cJSON_IsNull(tr) && !cJSON_IsBool(tr)) return zt_err("%s: %s.truncate must be true or false", origin, what);
    c->rope_no_truncate = tr && cJSON_IsFalse(tr);
    double prf = 1;
    if (zt_codec_get_num(rs, "partial_rotary_factor", &prf, 0, origin) < 0) return -1;
    if (prf != 1)
        return zt_err("%s: %s.partial_rotary_factor %g: Qwen3 rotates the whole head (1.0)", origin, what, prf);
    return 0;
}

// What Qwen3 dense does not have and zerotrain does not implement: 0, or -1 + zt_err.
static int refuse_unsupported(const cJSON *root, const char *origin) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "attention_bias");
    if (it && cJSON_IsTrue(it))
        return zt_err("%s: attention_bias is true; Qwen3 dense has no attention biases and zerotrain does not "
                      "implement them", origin);
    it = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (it && cJSON_IsString(it) && strcmp(it->valuestring, "silu") != 0)
        return zt_err("%s: hidden_act \"%s\" is not supported (only \"silu\")", origin, it->valuestring);
    it = cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window");
    if (it && cJSON_IsTrue(it))
        return zt_err("%s: use_sliding_window is true; sliding-window attention is not implemented", origin);
    return 0;
}

// An optional positive integer field with a default.
int zt_codec_get_dim(const cJSON *root, const char *key, int *out, int dflt, int64_t hi, const char *origin) {
    int64_t v = dflt;
    if (zt_codec_get_int(root, key, &v, 0, 1, hi, origin) < 0) return -1;
    *out = (int)v;
    return 0;
}

// The RoPE settings of rd, the object transformers reads (NULL: none), named `what`: rope_theta
// (rd's, else the top level's, else 10000), the scaling, and the family's own rotary fields
// (its codec's parse_rope).
static int read_rope(zt_model_config *c, const cJSON *root, const cJSON *rd, const char *what, const char *origin) {
    c->rope_theta = 10000.0;
    c->rope_yarn = c->rope_no_truncate = 0;
    c->rope_factor = c->rope_attention_factor = c->rope_beta_fast = c->rope_beta_slow = 0;
    c->rope_mscale = c->rope_mscale_all_dim = 0;
    c->rope_original_max_positions = 0;
    if (zt_codec_get_num(root, "rope_theta", &c->rope_theta, 0, origin) < 0) return -1;
    if (rd && zt_codec_get_num(rd, "rope_theta", &c->rope_theta, 0, origin) < 0) return -1;
    if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return zt_err("%s: rope_theta must be a finite number > 0", origin);
    if (rd && parse_rope_scaling(c, rd, what, origin) != 0) return -1;
    const zt_config_codec *codec = zt_config_codec_of(c->family);
    if (codec && codec->parse_rope) return codec->parse_rope(c, root, rd, what, origin);
    c->rotary_dim = c->head_dim;
    return 0;
}

// One RoPE reading in words, for the note on two that disagree.
static void rope_words(const zt_model_config *c, char *out, size_t n) {
    size_t o = (size_t)snprintf(out, n, "%s, rope_theta %g", c->rope_yarn ? "YaRN" : "plain RoPE", c->rope_theta);
    if (c->rope_yarn && o < n)
        o += (size_t)snprintf(out + o, n - o, ", factor %g, original_max_position_embeddings %lld", c->rope_factor,
                              (long long)c->rope_original_max_positions);
    if (c->partial_rotary_factor > 0 && o < n)
        snprintf(out + o, n - o, ", partial_rotary_factor %g", c->partial_rotary_factor);
}

static int same_rope(const zt_model_config *a, const zt_model_config *b) {
    return a->rope_theta == b->rope_theta && a->rope_yarn == b->rope_yarn && a->rope_factor == b->rope_factor &&
           a->rope_original_max_positions == b->rope_original_max_positions &&
           a->rope_attention_factor == b->rope_attention_factor && a->rope_beta_fast == b->rope_beta_fast &&
           a->rope_beta_slow == b->rope_beta_slow && a->rope_mscale == b->rope_mscale &&
           a->rope_mscale_all_dim == b->rope_mscale_all_dim && a->rope_no_truncate == b->rope_no_truncate &&
           a->partial_rotary_factor == b->partial_rotary_factor && a->rotary_dim == b->rotary_dim &&
           !memcmp(a->own.bytes, b->own.bytes, sizeof a->own.bytes);  // the family's RoPE fields (read first)
}

static void add_note(zt_model_config *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(zt_model_config *c, const char *fmt, ...) {
    size_t o = strlen(c->note);
    if (o && o + 2 < sizeof c->note) o += (size_t)snprintf(c->note + o, sizeof c->note - o, "; ");
    va_list ap;
    va_start(ap, fmt);
    if (o < sizeof c->note) vsnprintf(c->note + o, sizeof c->note - o, fmt, ap);
    va_end(ap);
}

// Where transformers 5 (5.25: PreTrainedConfig.convert_rope_params_to_dict) takes RoPE from: a
// rope_scaling object that is not empty replaces rope_parameters whole, which is then not read at
// all (its rope_theta neither); else rope_parameters. When both are given and read differently,
// the note says so, naming both: a file that contradicts itself is read as transformers reads it,
// never silently.
static int read_rope_fields(zt_model_config *c, const cJSON *root, const char *origin) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp)) return zt_err("%s: rope_parameters must be an object", origin);
    if (rs && !cJSON_IsNull(rs) && !cJSON_IsObject(rs))
        return zt_err("%s: rope_scaling must be an object or null", origin);
    const int rs_wins = cJSON_IsObject(rs) && rs->child;
    const cJSON *rd = rs_wins ? rs : cJSON_IsObject(rp) ? rp : NULL;
    if (read_rope(c, root, rd, rs_wins ? "rope_scaling" : "rope_parameters", origin) != 0) return -1;
    if (!rs_wins || !cJSON_IsObject(rp) || !rp->child) return 0;
    zt_model_config *other = zt_xmalloc(sizeof *other);
    *other = *c;
    char won[200], lost[400];
    const int readable = read_rope(other, root, rp, "rope_parameters", origin) == 0;
    if (readable) {
        rope_words(other, lost, sizeof lost);
    } else {
        snprintf(lost, sizeof lost, "which zerotrain cannot read: %s", zt_errmsg());
        zt_err_clear();
    }
    const int same = readable && same_rope(c, other);
    free(other);
    if (same) return 0;
    rope_words(c, won, sizeof won);
    add_note(c, "%s: rope_scaling (%s) and rope_parameters (%s) disagree; transformers 5 reads rope_scaling and not "
                "rope_parameters, and so does zerotrain: remove the one that is wrong",
             origin, won, lost);
    return 0;
}

// The fields every family shares (Qwen3's whole config; the start of Qwen3.5's text config).
static int parse_object(zt_model_config *c, const cJSON *root, const char *origin) {
    int rc = -1;
    int64_t v;
    const cJSON *it;

    // The family by model_type, through the codecs' table (absent: the first codec's, Qwen3's, as
    // every zerotrain config before families had it).
    it = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const zt_config_codec *codec = codec_of_type(it && cJSON_IsString(it) ? it->valuestring : NULL);
    if (!codec) {
        char known[512];
        implemented(known, sizeof known);
        zt_err("%s: model_type is \"%s\"; zerotrain implements %s", origin, cJSON_IsString(it) ? it->valuestring : "?",
               known);
        goto out;
    }
    c->family = codec->family;
    if (zt_codec_get_int(root, "vocab_size", &c->vocab_size, 1, 1, ZT_LIM_VOCAB, origin) ||
        zt_codec_get_int(root, "hidden_size", &c->hidden_size, 1, 1, ZT_LIM_HIDDEN, origin) ||
        zt_codec_get_int(root, "intermediate_size", &c->intermediate_size, 1, 1, ZT_LIM_FFN, origin))
        goto out;
    if (zt_codec_get_int(root, "num_hidden_layers", &v, 1, 1, ZT_LIM_LAYERS, origin)) goto out;
    c->num_layers = (int)v;
    if (zt_codec_get_int(root, "num_attention_heads", &v, 1, 1, ZT_LIM_HEADS, origin)) goto out;
    c->num_heads = (int)v;
    v = c->num_heads;  // HF default: num_key_value_heads = num_attention_heads
    if (zt_codec_get_int(root, "num_key_value_heads", &v, 0, 1, ZT_LIM_HEADS, origin) < 0) goto out;
    c->num_kv_heads = (int)v;
    if (c->num_heads % c->num_kv_heads) {
        zt_err("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", origin, c->num_heads,
               c->num_kv_heads);
        goto out;
    }
    int hd_rc = zt_codec_get_int(root, "head_dim", &v, 0, 1, ZT_LIM_HEAD_DIM, origin);
    if (hd_rc < 0) goto out;
    if (hd_rc == 1 && codec->head_dim_default) {
        v = codec->head_dim_default;  // the family's config class's default (Qwen3_5TextConfig: 256)
    } else if (hd_rc == 1) {
        if (c->hidden_size % c->num_heads) {
            zt_err("%s: head_dim is absent and hidden_size %lld is not divisible by num_attention_heads %d", origin,
                   (long long)c->hidden_size, c->num_heads);
            goto out;
        }
        v = c->hidden_size / c->num_heads;
    }
    if (v < 1 || v > ZT_LIM_HEAD_DIM) {
        zt_err("%s: head_dim %lld is outside [1, %d]", origin, (long long)v, ZT_LIM_HEAD_DIM);
        goto out;
    }
    if (v % 2) {
        zt_err("%s: head_dim %lld must be even (half-split RoPE)", origin, (long long)v);
        goto out;
    }
    c->head_dim = (int)v;

    c->rms_norm_eps = 1e-6;
    if (zt_codec_get_num(root, "rms_norm_eps", &c->rms_norm_eps, 0, origin) < 0) goto out;
    if (!(c->rms_norm_eps > 0) || !isfinite(c->rms_norm_eps)) {
        zt_err("%s: rms_norm_eps must be a finite number > 0 (got %g)", origin, c->rms_norm_eps);
        goto out;
    }
    it = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (it && !cJSON_IsNull(it) && !cJSON_IsBool(it)) {  // "yes" is not false
        zt_err("%s: tie_word_embeddings must be true or false", origin);
        goto out;
    }
    c->tie_word_embeddings = it ? cJSON_IsTrue(it) : 0;  // HF Qwen3Config default: false
    c->initializer_range = 0.02;
    if (zt_codec_get_num(root, "initializer_range", &c->initializer_range, 0, origin) < 0) goto out;
    if (!(c->initializer_range >= 0) || !isfinite(c->initializer_range)) {
        zt_err("%s: initializer_range must be a finite number >= 0 (got %g)", origin, c->initializer_range);
        goto out;
    }
    c->max_position_embeddings = codec->max_positions_default;
    if (zt_codec_get_int(root, "max_position_embeddings", &c->max_position_embeddings, 0, 1, ZT_LIM_POSITIONS,
                         origin) < 0)
        goto out;
    // RoPE (after max_position_embeddings, YaRN's default original range, and head_dim)
    if (read_rope_fields(c, root, origin) != 0) goto out;
    c->bos_token_id = c->eos_token_id = -1;
    if (zt_codec_get_int(root, "bos_token_id", &c->bos_token_id, 0, 0, c->vocab_size - 1, origin) < 0) goto out;
    it = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (it && cJSON_IsArray(it) && cJSON_GetArraySize(it) > 0) {  // several stop tokens: every one a token id
        const cJSON *e;
        cJSON_ArrayForEach(e, it) {
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
                e->valuedouble >= (double)c->vocab_size) {
                zt_err("%s: every eos_token_id must be an integer token id in [0, %lld)", origin,
                       (long long)c->vocab_size);
                goto out;
            }
        }
        c->eos_token_id = (int64_t)cJSON_GetArrayItem(it, 0)->valuedouble;
    } else if (zt_codec_get_int(root, "eos_token_id", &c->eos_token_id, 0, 0, c->vocab_size - 1, origin) < 0) {
        goto out;
    }
    if (codec->parse && codec->parse(c, root, origin) != 0) goto out;
    if (zt_model_param_count(c) < 0) {
        zt_err("%s: the parameter count of this config overflows a 64-bit integer", origin);
        goto out;
    }

    if (refuse_unsupported(root, origin) != 0) goto out;
    rc = 0;
out:
    return rc;
}

// A wrapper config of `codec`'s family: its "text_config" read as the family's text config, with
// the wrapper's tie_word_embeddings. -1 + zt_err, or parse_object's result.
static int parse_wrapped(zt_model_config *c, const cJSON *root, const zt_config_codec *codec, const char *origin) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_IsObject(tc))
        return zt_err("%s: model_type \"%s\" (%s) needs a \"text_config\" object: zerotrain trains the text model",
                      origin, codec->wrapper_type, codec->wrapper_class);
    cJSON *text = cJSON_Duplicate(tc, 1);
    const cJSON *tmt = cJSON_GetObjectItemCaseSensitive(text, "model_type");
    if (!tmt) cJSON_AddStringToObject(text, "model_type", codec->model_type);
    else if (!cJSON_IsString(tmt) || strcmp(tmt->valuestring, codec->model_type) != 0) {
        cJSON_Delete(text);
        return zt_err("%s: text_config.model_type must be \"%s\"", origin, codec->model_type);
    }
    // Tied or not is the wrapper's own tie_word_embeddings (Qwen3_5Config's; absent: false):
    // transformers 5 ties lm_head.weight by the config of the model that declares the tie
    // (PreTrainedModel.get_expanded_tied_weights_keys reads self.config.tie_word_embeddings,
    // and Qwen3_5ForConditionalGeneration's config is the wrapper's). text_config's is not read.
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    const cJSON *ttie = cJSON_GetObjectItemCaseSensitive(text, "tie_word_embeddings");
    if ((tie && !cJSON_IsNull(tie) && !cJSON_IsBool(tie)) || (ttie && !cJSON_IsNull(ttie) && !cJSON_IsBool(ttie))) {
        cJSON_Delete(text);
        return zt_err("%s: %stie_word_embeddings must be true or false", origin,
                      tie && !cJSON_IsNull(tie) && !cJSON_IsBool(tie) ? "" : "text_config.");
    }
    const int tied = tie && cJSON_IsTrue(tie);
    const int text_says = ttie && cJSON_IsBool(ttie) ? cJSON_IsTrue(ttie) : -1;
    cJSON_DeleteItemFromObjectCaseSensitive(text, "tie_word_embeddings");
    cJSON_AddBoolToObject(text, "tie_word_embeddings", tied);
    char where[600];
    snprintf(where, sizeof where, "%s (text_config)", origin);
    const int rc = parse_object(c, text, where);
    if (codec->wrapped) codec->wrapped(c);
    if (rc == 0 && text_says >= 0 && text_says != tied)
        add_note(c, "%s: tie_word_embeddings is %s but text_config.tie_word_embeddings is %s; transformers 5's "
                    "%s reads the top-level one, and so does zerotrain: lm_head.weight is %s",
                 origin, tied ? "true" : "false", text_says ? "true" : "false", codec->wrapper_class,
                 tied ? "the embedding (tied)" : "a matrix of its own (untied), read from the checkpoint");
    cJSON_Delete(text);
    return rc;
}

int zt_model_config_parse(zt_model_config *c, const char *json, const char *origin) {
    memset(c, 0, sizeof *c);
    cJSON *root = cJSON_Parse(json);
    if (!root) {
        char deep[160];
        const size_t n = strlen(json);
        if (zt_json_depth_error(json, n, zt_json_error_col(json, n), deep, sizeof deep))
            return zt_err("%s: %s", origin, deep);
        return zt_err("%s: not valid JSON (near: %.40s)", origin, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return zt_err("%s: top level must be a JSON object", origin);
    }
    // A wrapper (a codec's wrapper_type: Qwen3_5ForConditionalGeneration, model_type "qwen3_5"): the
    // text model's config is "text_config"; the rest (a vision tower's) is carried, not read.
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const zt_config_codec *wrapper = cJSON_IsString(mt) ? codec_of_wrapper(mt->valuestring) : NULL;
    const int rc = wrapper ? parse_wrapped(c, root, wrapper, origin) : parse_object(c, root, origin);
    cJSON_Delete(root);
    return rc;
}

// A double as the shortest text that reads back to the same bits (15, 16 or 17 digits): cJSON's
// own printing accepts a 15-digit text within a relative epsilon, so 8.888888888888889e+51 came
// back one unit in the last place off, and a written config did not equal the one it came from
// (fuzz_config).
void zt_codec_add_exact(cJSON *o, const char *key, double v) {
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    cJSON_AddItemToObject(o, key, cJSON_CreateRaw(buf));
}

// A config.json's first fields, the same in both families: the class, model_type and the sizes.
cJSON *zt_codec_json_head(const zt_model_config *c, const char *arch_name, const char *model_type) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(arch_name));
    cJSON_AddStringToObject(o, "model_type", model_type);
    cJSON_AddNumberToObject(o, "vocab_size", (double)c->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_size", (double)c->hidden_size);
    cJSON_AddNumberToObject(o, "intermediate_size", (double)c->intermediate_size);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->num_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->num_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->num_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    return o;
}

char *zt_model_config_json(const zt_model_config *c) {
    const zt_config_codec *codec = c->family ? zt_config_codec_of(c->family) : codecs[0];
    if (!codec) zt_fatal("no config codec for the %s family", zt_model_title(c));
    return codec->write(c);
}
