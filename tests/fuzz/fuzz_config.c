// libFuzzer harness: config.json (model/config.c). Input: the file's bytes.
// Properties, for every config that parses: the parameter count is defined and equals
// the sum of the layout's units (model/layout.c); the config written back as JSON
// (zt_model_config_json, what export writes) parses to the same config.
#include "fuzz_util.h"
#include "model/config.h"
#include "model/qwen3.h"
#include "base/common.h"

static int same(const zt_model_config *a, const zt_model_config *b) {
    return a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
           a->intermediate_size == b->intermediate_size && a->num_layers == b->num_layers &&
           a->num_heads == b->num_heads && a->num_kv_heads == b->num_kv_heads && a->head_dim == b->head_dim &&
           a->rms_norm_eps == b->rms_norm_eps && a->rope_theta == b->rope_theta &&
           a->tie_word_embeddings == b->tie_word_embeddings && a->initializer_range == b->initializer_range &&
           a->max_position_embeddings == b->max_position_embeddings && a->bos_token_id == b->bos_token_id &&
           a->eos_token_id == b->eos_token_id;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstr(data, size);
    zt_model_config c;
    int rc = zt_model_config_parse(&c, text, "fuzz/config.json");
    free(text);
    if (rc != 0) {
        FUZZ_ASSERT(zt_errmsg()[0], "a refused config must say why");
        return 0;
    }
    const int64_t n = zt_model_param_count(&c);
    FUZZ_ASSERT(n > 0, "param count %lld", (long long)n);
    zt_model_layout lay;
    if (c.num_layers <= 4096) {  // the layout allocates per layer
        FUZZ_ASSERT(zt_model_layout_init(&lay, &c) == 0, "layout of a valid config: %s", zt_errmsg());
        int64_t sum = 0;
        for (int u = 0; u < lay.nunits; u++) sum += lay.units[u].numel;
        FUZZ_ASSERT(sum == n, "layout holds %lld parameters, param count says %lld", (long long)sum, (long long)n);
        zt_model_layout_free(&lay);
    }
    char *back = zt_model_config_json(&c);
    zt_model_config c2;
    FUZZ_ASSERT(zt_model_config_parse(&c2, back, "fuzz/written") == 0, "the written config is refused: %s\n%s",
                zt_errmsg(), back);
    FUZZ_ASSERT(same(&c, &c2), "the written config reads back different:\n%s", back);
    free(back);
    return 0;
}
