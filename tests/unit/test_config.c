// model/config.c against out-of-range and ill-typed fields: every value the trainer cannot
// represent is refused with a message naming the field, before any conversion (no field
// may wrap: 4294967296 layers used to train a 0-layer model and exit 0; 4294967300 heads
// became 4; a vocabulary of 1e20 read as INT64_MIN), and every valid Qwen3 config still
// reads to the same values.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
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
    zt_qwen3_config c;
    int rc = zt_qwen3_config_parse(&c, j, "cfg.json");
    CHECK(rc != 0, "%s = %s must be refused (parsed: layers %d heads %d vocab %lld)", key, value, c.num_layers,
          c.num_heads, (long long)c.vocab_size);
    if (rc != 0) {
        CHECK(strstr(zt_errmsg(), "cfg.json") && strstr(zt_errmsg(), want), "%s = %s: message \"%s\" lacks \"%s\"",
              key, value, zt_errmsg(), want);
    }
    free(j);
}

int main(void) {
    zt_qwen3_config c;
    char *j = with("num_hidden_layers", "64");
    CHECK(zt_qwen3_config_parse(&c, j, "cfg.json") == 0, "the Qwen3-32B config must parse: %s", zt_errmsg());
    CHECK(c.num_layers == 64 && c.num_heads == 64 && c.num_kv_heads == 8 && c.head_dim == 128 &&
              c.vocab_size == 151936 && c.eos_token_id == 151645 && !c.tie_word_embeddings,
          "Qwen3-32B values");
    CHECK(zt_qwen3_param_count(&c) == 32762123264ll, "Qwen3-32B has 32,762,123,264 parameters (got %lld)",
          (long long)zt_qwen3_param_count(&c));
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
    CHECK(zt_qwen3_config_parse(&c, j, "cfg.json") == 0 && c.eos_token_id == 151645, "eos_token_id as a list: %s",
          zt_errmsg());
    free(j);
    j = with("tie_word_embeddings", "true");
    CHECK(zt_qwen3_config_parse(&c, j, "cfg.json") == 0 && c.tie_word_embeddings, "tie_word_embeddings true");
    free(j);
    // the parameter count reports overflow instead of wrapping
    zt_qwen3_config big = c;
    big.vocab_size = (int64_t)1 << 53;
    big.hidden_size = 2048;
    big.tie_word_embeddings = 0;
    CHECK(zt_qwen3_param_count(&big) > 0 || zt_qwen3_param_count(&big) == -1, "param count");
    big.num_layers = 1 << 30, big.intermediate_size = (int64_t)1 << 40;
    CHECK(zt_qwen3_param_count(&big) == -1, "an overflowing parameter count must be -1 (got %lld)",
          (long long)zt_qwen3_param_count(&big));
    TEST_END();
}
