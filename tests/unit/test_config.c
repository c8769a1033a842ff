// model/config.c against out-of-range and ill-typed fields: every value the trainer cannot
// represent is refused with a message naming the field, before any conversion (no field
// may wrap: 4294967296 layers used to train a 0-layer model and exit 0; 4294967300 heads
// became 4; a vocabulary of 1e20 read as INT64_MIN), and every valid Qwen3 config still
// reads to the same values.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/rope.h"
#include "base/common.h"
#include "tests/support/test_util.h"

static const char *BASE =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 151936, \"hidden_size\": 5120, \"intermediate_size\": 25600, "
    "\"num_hidden_layers\": 64, \"num_attention_heads\": 64, \"num_key_value_heads\": 8, \"head_dim\": 128, "
    "\"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000, \"tie_word_embeddings\": false, \"initializer_range\": 0.02, "
    "\"max_position_embeddings\": 40960, \"bos_token_id\": 151643, \"eos_token_id\": 151645 @}";

// BASE with one field replaced (or added, when absent): key = value
static char *with(const char *key, const char *value) {
    char *j = zt_xmalloc(strlen(BASE) + strlen(key) + strlen(value) + 64);
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *at = strstr(BASE, pat);
    if (at) {
        const char *end = at + strlen(pat);
        while (*end && *end != ',' && *end != '@') end++;
        sprintf(j, "%.*s\"%s\": %s%s", (int)(at - BASE), BASE, key, value, end);
    } else {
        sprintf(j, "%.*s, \"%s\": %s @}", (int)(strstr(BASE, " @}") - BASE), BASE, key, value);
    }
    char *m = strchr(j, '@');  // the end marker, and the space before it if any
    if (m > j && m[-1] == ' ') m--;
    memmove(m, strchr(m, '@') + 1, strlen(strchr(m, '@') + 1) + 1);
    return j;
}

static void refused(const char *key, const char *value, const char *want) {
    char *j = with(key, value);
    zt_model_config c;
    int rc = zt_model_config_parse(&c, j, "cfg.json");
    CHECK(rc != 0, "%s = %s must be refused (parsed: layers %d heads %d vocab %lld)", key, value, c.num_layers,
          c.num_heads, (long long)c.vocab_size);
    if (rc != 0) {
        CHECK(strstr(zt_errmsg(), "cfg.json") && strstr(zt_errmsg(), want), "%s = %s: message \"%s\" lacks \"%s\"",
              key, value, zt_errmsg(), want);
    }
    free(j);
}

// YaRN frequencies against transformers (tests/golden/yarn/freqs.json, made by
// tests/reference/make_yarn_freqs.py): for each parameter set the config parses, inv_freq and
// the attention factor match _compute_yarn_parameters, and the CPU table matches
// Qwen3RotaryEmbedding's fp32 cos and sin. The fp32 operations are the same, but torch's
// vectorised pow is SLEEF's (1 ulp), not correctly rounded as powf and zerotrain's are, so an
// inverse frequency may be an ulp apart (<= 2.5e-7 relative) and the angle at position
// 131,071 then moves by ~1e-6 rad: the table within 4e-6 of the attention factor.
static void yarn_against_transformers(void) {
    char *text = zt_read_file(ZT_GOLDEN_DIR "/yarn/freqs.json", NULL);
    if (!text) zt_die_on_err();
    cJSON *root = cJSON_Parse(text), *set;
    int n = 0;
    cJSON_ArrayForEach(set, cJSON_GetObjectItem(root, "sets")) {
        char *cj = cJSON_PrintUnformatted(cJSON_GetObjectItem(set, "config"));
        zt_model_config c;
        CHECK(zt_model_config_parse(&c, cj, "freqs.json") == 0, "set %d: %s", n, zt_errmsg());
        free(cj);
        zt_rope_freqs f;
        zt_qwen3_rope_freqs(&c, &f);
        const double att = cJSON_GetObjectItem(set, "attention_factor")->valuedouble;
        CHECK(fabs(f.attention - att) <= 1e-15 * att, "set %d: attention factor %.17g, transformers %.17g", n,
              f.attention, att);
        const int half = c.head_dim / 2;
        const cJSON *inv = cJSON_GetObjectItem(set, "inv_freq");
        int bad = 0, exact = 0;
        for (int i = 0; i < half; i++) {
            const float want = (float)cJSON_GetArrayItem(inv, i)->valuedouble;
            const float got = zt_rope_inv_freq(&f, i, c.head_dim);
            exact += got == want;
            if (fabsf(got - want) > 2.5e-7f * want && bad++ < 3)
                CHECK(0, "set %d: inv_freq[%d] %.9g, transformers %.9g", n, i, got, want);
        }
        CHECK(!bad, "set %d: %d of %d inverse frequencies differ from transformers' by more than an ulp", n, bad, half);
        const cJSON *pos = cJSON_GetObjectItem(set, "positions");
        const int np = cJSON_GetArraySize(pos);
        const int64_t S = (int64_t)cJSON_GetArrayItem(pos, np - 1)->valuedouble + 1;
        float *ct = zt_xmalloc((size_t)(S * half) * sizeof(float)), *st = zt_xmalloc((size_t)(S * half) * sizeof(float));
        zt_rope_table_freqs(ct, st, S, c.head_dim, &f);
        double worst = 0;
        for (int k = 0; k < np; k++) {
            const int64_t p = (int64_t)cJSON_GetArrayItem(pos, k)->valuedouble;
            for (int t = 0; t < 2; t++) {
                const cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(set, t ? "sin" : "cos"), k);
                for (int i = 0; i < half; i++) {
                    const double d = fabs((t ? st : ct)[p * half + i] - cJSON_GetArrayItem(row, i)->valuedouble) / att;
                    if (d > worst) worst = d;
                }
            }
        }
        CHECK(worst <= 4e-6, "set %d: cos/sin differ from transformers' by %.3g (relative to the factor)", n, worst);
        printf("yarn set %d: head_dim %d, factor %g, attention %.6f, range %g..%g: inv_freq %d of %d bit-equal (the "
               "rest within an ulp), table within %.2g\n",
               n, c.head_dim, c.rope_factor, f.attention, f.low, f.high, exact, half, worst);
        free(ct);
        free(st);
        n++;
    }
    CHECK(n == 5, "%d YaRN sets read", n);
    cJSON_Delete(root);
    free(text);
}

int main(void) {
    yarn_against_transformers();
    zt_model_config c;
    char *j = with("num_hidden_layers", "64");
    CHECK(zt_model_config_parse(&c, j, "cfg.json") == 0, "the Qwen3-32B config must parse: %s", zt_errmsg());
    CHECK(c.num_layers == 64 && c.num_heads == 64 && c.num_kv_heads == 8 && c.head_dim == 128 &&
              c.vocab_size == 151936 && c.eos_token_id == 151645 && !c.tie_word_embeddings,
          "Qwen3-32B values");
    CHECK(zt_model_param_count(&c) == 32762123264ll, "Qwen3-32B has 32,762,123,264 parameters (got %lld)",
          (long long)zt_model_param_count(&c));
    free(j);
    // integers that used to wrap or truncate
    refused("num_hidden_layers", "4294967296", "num_hidden_layers");
    refused("num_hidden_layers", "4294967297", "num_hidden_layers");
    refused("num_attention_heads", "4294967300", "num_attention_heads");
    refused("num_key_value_heads", "4294967304", "num_key_value_heads");
    refused("head_dim", "2147483648", "head_dim");
    refused("vocab_size", "1e20", "vocab_size");
    refused("vocab_size", "9007199254740992", "vocab_size");
    refused("hidden_size", "9007199254740992", "hidden_size");
    refused("intermediate_size", "-5", "intermediate_size");
    refused("num_hidden_layers", "0", "num_hidden_layers");
    refused("num_hidden_layers", "2.5", "num_hidden_layers");
    refused("max_position_embeddings", "0", "max_position_embeddings");
    refused("max_position_embeddings", "1e30", "max_position_embeddings");
    // floats and booleans
    refused("rms_norm_eps", "0", "rms_norm_eps");
    refused("rms_norm_eps", "-1e-6", "rms_norm_eps");
    refused("initializer_range", "-0.02", "initializer_range");
    refused("rope_theta", "0", "rope_theta");
    refused("tie_word_embeddings", "\"yes\"", "tie_word_embeddings");
    refused("tie_word_embeddings", "1", "tie_word_embeddings");
    // token ids inside the vocabulary
    refused("eos_token_id", "151936", "eos_token_id");
    refused("bos_token_id", "200000", "bos_token_id");
    refused("eos_token_id", "[151645, 999999]", "eos_token_id");
    refused("eos_token_id", "-7", "eos_token_id");
    // accepted forms
    j = with("eos_token_id", "[151645, 151643]");
    CHECK(zt_model_config_parse(&c, j, "cfg.json") == 0 && c.eos_token_id == 151645, "eos_token_id as a list: %s",
          zt_errmsg());
    free(j);
    j = with("tie_word_embeddings", "true");
    CHECK(zt_model_config_parse(&c, j, "cfg.json") == 0 && c.tie_word_embeddings, "tie_word_embeddings true");
    free(j);
    // YaRN (issue 37): the released Qwen3 spelling, transformers 5's, and what is refused
    j = with("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768}");
    CHECK(zt_model_config_parse(&c, j, "cfg.json") == 0 && c.rope_yarn && c.rope_factor == 4.0 &&
              c.rope_original_max_positions == 32768 && zt_model_max_positions(&c) == 131072,
          "Qwen3's YaRN rope_scaling: %s", zt_errmsg());
    free(j);
    j = with("rope_parameters", "{\"rope_type\": \"yarn\", \"rope_theta\": 5e5, \"factor\": 2, \"beta_fast\": 8, "
                                "\"truncate\": false}");
    CHECK(zt_model_config_parse(&c, j, "cfg.json") == 0 && c.rope_yarn && c.rope_factor == 2 &&
              c.rope_theta == 5e5 && c.rope_beta_fast == 8 && c.rope_no_truncate &&
              c.rope_original_max_positions == 40960 && zt_model_max_positions(&c) == 81920,
          "rope_parameters YaRN (original range defaults to max_position_embeddings; its rope_theta wins "
          "over the top-level one, as in transformers 5): %s", zt_errmsg());
    free(j);
    j = with("rope_scaling", "{\"type\": \"default\"}");
    CHECK(zt_model_config_parse(&c, j, "cfg.json") == 0 && !c.rope_yarn && zt_model_max_positions(&c) == 40960,
          "plain rope_scaling: %s", zt_errmsg());
    free(j);
    refused("rope_scaling", "{\"rope_type\": \"yarn\", \"original_max_position_embeddings\": 32768}",
            "is YaRN but has no \"factor\"");
    refused("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 1.0}", "factor must be a finite number > 1");
    refused("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 0.5}", "factor must be a finite number > 1");
    refused("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": \"4\"}", "\"factor\" must be a number");
    refused("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": 0}",
            "original_max_position_embeddings");
    refused("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4, \"attention_factor\": -1}",
            "attention_factor must be a finite number > 0");
    refused("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4, \"truncate\": 0}", "truncate must be true or false");
    refused("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4, \"partial_rotary_factor\": 0.5}",
            "partial_rotary_factor");
    refused("rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 4}", "rope_type \"linear\" is not supported");
    refused("rope_scaling", "{\"factor\": 4}", "has no rope_type");
    refused("rope_scaling", "4", "rope_scaling must be an object or null");
    refused("rope_parameters", "{\"rope_type\": \"llama3\", \"rope_theta\": 1e6}", "rope_parameters.rope_type \"llama3\"");
    // the parameter count reports overflow instead of wrapping
    zt_model_config big = c;
    big.vocab_size = (int64_t)1 << 53;
    big.hidden_size = 2048;
    big.tie_word_embeddings = 0;
    CHECK(zt_model_param_count(&big) > 0 || zt_model_param_count(&big) == -1, "param count");
    big.num_layers = 1 << 30, big.intermediate_size = (int64_t)1 << 40;
    CHECK(zt_model_param_count(&big) == -1, "an overflowing parameter count must be -1 (got %lld)",
          (long long)zt_model_param_count(&big));
    TEST_END();
}
