// config.json files that contradict themselves, read as transformers 5 reads them (issue 47), and
// the RoPE settings refused by the rule they break. One case per invocation:
//   rope        rope_scaling against rope_parameters: each config of tests/golden/hf_config/facts.json
//               (tests/reference/make_hf_config_facts.py) reads to the RoPE transformers' config
//               class keeps (a non-empty rope_scaling replaces rope_parameters whole, rope_theta
//               included), and the parse's note names both exactly where they disagree
//   tie         the tie flag of each Qwen3 / Qwen3_5ForCausalLM / Qwen3_5ForConditionalGeneration
//               config of the same file is the one its class ties by (the VLM: the top level's, not
//               text_config's), with a note where the two flags of a VLM disagree
//   q35_yarn    Qwen3.5 with YaRN is refused as "YaRN is not implemented for Qwen3.5" (it was refused
//               with Qwen3's partial-rotary rule)
//   yarn_range  a YaRN factor whose scaled range (factor x original) a position count cannot hold is
//               refused by name (1e30 x 32 once overflowed, and the gate then reported the unscaled 64)
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/config.h"
#include "tests/support/test_util.h"

static cJSON *facts(void) {
    char *text = zt_read_file(ZT_GOLDEN_DIR "/hf_config/facts.json", NULL);
    if (!text) zt_die_on_err();
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) zt_fatal("facts.json is not JSON");
    return root;
}

static int parse(const cJSON *config, zt_model_config *c) {
    char *j = cJSON_PrintUnformatted(config);
    const int rc = zt_model_config_parse(c, j, "config.json");
    free(j);
    return rc;
}

static double num(const cJSON *o, const char *key, double dflt) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

static void rope(void) {
    cJSON *root = facts();
    const cJSON *set;
    int n = 0;
    cJSON_ArrayForEach(set, cJSON_GetObjectItemCaseSensitive(root, "rope")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(set, "name")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(set, "transformers");
        const int disagree = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(set, "disagree"));
        zt_model_config c;
        if (parse(cJSON_GetObjectItemCaseSensitive(set, "config"), &c) != 0) {
            CHECK(0, "%s: refused: %s", name, zt_errmsg());
            continue;
        }
        const int yarn = !strcmp(cJSON_GetObjectItemCaseSensitive(want, "rope_type")->valuestring, "yarn");
        CHECK(c.rope_yarn == yarn, "%s: %s RoPE, transformers %s", name, c.rope_yarn ? "YaRN" : "plain",
              yarn ? "YaRN" : "plain");
        CHECK(c.rope_theta == num(want, "rope_theta", -1), "%s: rope_theta %g, transformers %g", name, c.rope_theta,
              num(want, "rope_theta", -1));
        if (yarn) {
            CHECK(c.rope_factor == num(want, "factor", -1), "%s: factor %g, transformers %g", name, c.rope_factor,
                  num(want, "factor", -1));
            CHECK(c.rope_original_max_positions == (int64_t)num(want, "original_max_position_embeddings", -1),
                  "%s: original_max_position_embeddings %lld, transformers %g", name,
                  (long long)c.rope_original_max_positions, num(want, "original_max_position_embeddings", -1));
        }
        if (c.partial_rotary_factor > 0)
            CHECK(c.partial_rotary_factor == num(want, "partial_rotary_factor", -1),
                  "%s: partial_rotary_factor %g, transformers %g", name, c.partial_rotary_factor,
                  num(want, "partial_rotary_factor", -1));
        const int noted = strstr(c.note, "rope_scaling (") && strstr(c.note, "rope_parameters (") &&
                          strstr(c.note, "transformers 5 reads rope_scaling");
        CHECK(noted == disagree, "%s: %s, but rope_scaling and rope_parameters %s (note: \"%s\")", name,
              noted ? "noted" : "not noted", disagree ? "disagree" : "agree", c.note);
        printf("%-88s %s rope_theta %g%s\n", name, c.rope_yarn ? "YaRN" : "plain", c.rope_theta,
               noted ? ", noted" : "");
        n++;
    }
    CHECK(n == 11, "%d RoPE cases read", n);
    cJSON_Delete(root);
}

static void tie(void) {
    cJSON *root = facts();
    const cJSON *set;
    int n = 0;
    cJSON_ArrayForEach(set, cJSON_GetObjectItemCaseSensitive(root, "tie")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(set, "name")->valuestring;
        const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(set, "config");
        const int tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(set, "tied"));
        zt_model_config c;
        if (parse(cfg, &c) != 0) {
            CHECK(0, "%s: refused: %s", name, zt_errmsg());
            continue;
        }
        CHECK(!c.tie_word_embeddings == !tied, "%s: zerotrain %s, transformers' class %s", name,
              c.tie_word_embeddings ? "ties" : "does not tie", tied ? "ties" : "does not tie");
        // a VLM whose text_config says otherwise than the flag its class reads: said, naming both
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
        const cJSON *tt = tc ? cJSON_GetObjectItemCaseSensitive(tc, "tie_word_embeddings") : NULL;
        const int contradicts = cJSON_IsBool(tt) && !cJSON_IsTrue(tt) != !tied;
        const int noted = strstr(c.note, "text_config.tie_word_embeddings") != NULL;
        CHECK(noted == contradicts, "%s: %s (note: \"%s\")", name, noted ? "noted" : "not noted", c.note);
        printf("%-60s %s%s\n", name, c.tie_word_embeddings ? "tied" : "untied", noted ? ", noted" : "");
        n++;
    }
    CHECK(n == 14, "%d tie cases read", n);
    cJSON_Delete(root);
}

static const char *TEXT =
    "{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 64, "
    "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
    "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 8, "
    "\"linear_value_head_dim\": 8, \"max_position_embeddings\": 64, %s}";

static void refused(const char *json, const char *want, const char *what) {
    zt_model_config c;
    const int rc = zt_model_config_parse(&c, json, "config.json");
    CHECK(rc != 0, "%s must be refused", what);
    if (rc != 0)
        CHECK(strstr(zt_errmsg(), want) != NULL, "%s: the message \"%s\" lacks \"%s\"", what, zt_errmsg(), want);
    if (rc != 0) printf("%s: %s\n", what, zt_errmsg());
}

static void q35_yarn(void) {
    char j[1200];
    // transformers 5's spelling (partial_rotary_factor inside rope_parameters, as released)
    snprintf(j, sizeof j, TEXT,
             "\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e7, \"factor\": 4, "
             "\"original_max_position_embeddings\": 16, \"partial_rotary_factor\": 0.25}");
    refused(j, "YaRN is not implemented for Qwen3.5", "qwen3_5_text with rope_parameters yarn");
    CHECK(!strstr(zt_errmsg(), "Qwen3 rotates the whole head"), "Qwen3's rule named: %s", zt_errmsg());
    snprintf(j, sizeof j, TEXT, "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}");
    refused(j, "YaRN is not implemented for Qwen3.5", "qwen3_5_text with rope_scaling yarn");
    // the wrapper too
    char w[1600];
    snprintf(j, sizeof j, TEXT,
             "\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, \"partial_rotary_factor\": 0.25}");
    snprintf(w, sizeof w, "{\"model_type\": \"qwen3_5\", \"text_config\": %s}", j);
    refused(w, "YaRN is not implemented for Qwen3.5", "Qwen3_5ForConditionalGeneration with yarn");
}

static const char *QWEN3 =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 64, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
    "\"max_position_embeddings\": 64, \"rope_scaling\": {\"rope_type\": \"yarn\", %s}}";

static void yarn_range(void) {
    char j[800];
    snprintf(j, sizeof j, QWEN3, "\"factor\": 1e30, \"original_max_position_embeddings\": 32");
    refused(j, "factor 1e+30 x original_max_position_embeddings 32 = 3.2e+31 positions", "factor 1e30");
    snprintf(j, sizeof j, QWEN3, "\"factor\": 1e30");  // the original range defaults to max_position_embeddings
    refused(j, "x original_max_position_embeddings 64", "factor 1e30 over the default original range");
    snprintf(j, sizeof j, QWEN3, "\"factor\": 67108865, \"original_max_position_embeddings\": 32");
    refused(j, "beyond the 2147483648", "a range one step past 2^31");
    // the largest range a position count holds reads, and the gate's range is the true one
    snprintf(j, sizeof j, QWEN3, "\"factor\": 67108864, \"original_max_position_embeddings\": 32");
    zt_model_config c;
    CHECK(zt_model_config_parse(&c, j, "config.json") == 0, "factor 2^26 x 32 = 2^31: %s", zt_errmsg());
    CHECK(zt_model_max_positions(&c) == (int64_t)1 << 31, "range %lld, want 2^31", (long long)zt_model_max_positions(&c));
    snprintf(j, sizeof j, QWEN3, "\"factor\": 4, \"original_max_position_embeddings\": 32");
    CHECK(zt_model_config_parse(&c, j, "config.json") == 0 && zt_model_max_positions(&c) == 128, "factor 4 x 32: %lld",
          (long long)zt_model_max_positions(&c));
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "rope")) rope();
    else if (!strcmp(mode, "tie")) tie();
    else if (!strcmp(mode, "q35_yarn")) q35_yarn();
    else if (!strcmp(mode, "yarn_range")) yarn_range();
    else {
        fprintf(stderr, "usage: test_hf_config_facts rope|tie|q35_yarn|yarn_range\n");
        return 2;
    }
    TEST_END();
}
