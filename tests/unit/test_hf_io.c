// Hugging Face weight import/export: save -> load round trips (fp32 bit-exact,
// bf16 within one rounding), and the errors for a missing tensor, an unexpected
// tensor, a tensor of a layer the config does not have, and a bf16 checkpoint
// read through the converter.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "model/qwen3.h"
#include "base/common.h"
#include "tests/support/test_util.h"
#include "checkpoint/hf.h"

static float **alloc_units(const zt_model_layout *lay) {
    float **p = zt_xcalloc((size_t)lay->nunits, sizeof(float *));
    for (int u = 0; u < lay->nunits; u++) p[u] = zt_xcalloc((size_t)lay->units[u].numel, sizeof(float));
    return p;
}
static void free_units(const zt_model_layout *lay, float **p) {
    for (int u = 0; u < lay->nunits; u++) free(p[u]);
    free(p);
}

// Write the model's tensors to a safetensors file, leaving out `skip` and adding `extra`.
static void write_variant(const zt_model_layout *lay, float *const *p, const char *path, const char *skip,
                          const char *extra) {
    zt_st_writer *w = zt_st_writer_new();
    for (int u = 0; u < lay->nunits; u++)
        for (int k = 0; k < lay->units[u].ntensors; k++) {
            const zt_tensor_desc *d = &lay->units[u].t[k];
            if (skip && !strcmp(d->name, skip)) continue;
            if (zt_st_writer_add_f32(w, d->name, p[u] + d->offset, d->ndim, d->shape, ZT_ST_F32) != 0) zt_die_on_err();
        }
    if (extra) {
        int64_t shape[1] = {lay->cfg.hidden_size};
        if (zt_st_writer_add_f32(w, extra, p[0], 1, shape, ZT_ST_F32) != 0) zt_die_on_err();
    }
    if (zt_st_write(w, path) != 0) zt_die_on_err();
    zt_st_writer_free(w);
}

static void expect_error(const zt_model_layout *lay, const char *path, const char *pattern) {
    float **q = alloc_units(lay);
    int rc = zt_hf_load(lay, path, q);
    CHECK(rc != 0, "loading %s should fail", path);
    CHECK(rc != 0 && strstr(zt_errmsg(), pattern), "error should mention '%s', got: %s", pattern, zt_errmsg());
    if (rc != 0) printf("  ok error: %s\n", zt_errmsg());
    free_units(lay, q);
}

int main(void) {
    char dir[] = "/tmp/zt_hf_io_XXXXXX", path[4200], sub[4200];
    if (!mkdtemp(dir)) zt_fatal("mkdtemp failed");
    zt_model_config cfg;
    snprintf(path, sizeof path, "%s/tiny_untied_gqa", ZT_GOLDEN_DIR);
    if (zt_model_config_load(&cfg, path) != 0) zt_die_on_err();
    zt_model_layout lay;
    zt_model_layout_init(&lay, &cfg);
    float **p = alloc_units(&lay), **q = alloc_units(&lay);
    if (zt_hf_load(&lay, path, p) != 0) zt_die_on_err();

    // fp32 round trip: bit-exact
    snprintf(sub, sizeof sub, "%s/fp32", dir);
    if (zt_hf_save(&lay, p, sub, ZT_ST_F32) != 0) zt_die_on_err();
    if (zt_hf_load(&lay, sub, q) != 0) zt_die_on_err();
    for (int u = 0; u < lay.nunits; u++)
        CHECK(!memcmp(p[u], q[u], (size_t)lay.units[u].numel * sizeof(float)), "fp32 round trip unit %d", u);
    // the written config.json parses back to the same config
    zt_model_config c2;
    if (zt_model_config_load(&c2, sub) != 0) zt_die_on_err();
    CHECK(c2.hidden_size == cfg.hidden_size && c2.head_dim == cfg.head_dim && c2.num_kv_heads == cfg.num_kv_heads &&
              c2.rope_theta == cfg.rope_theta && c2.tie_word_embeddings == cfg.tie_word_embeddings,
          "config.json round trip");

    // bf16 round trip: each value is the bf16 rounding of the original
    snprintf(sub, sizeof sub, "%s/bf16", dir);
    if (zt_hf_save(&lay, p, sub, ZT_ST_BF16) != 0) zt_die_on_err();
    if (zt_hf_load(&lay, sub, q) != 0) zt_die_on_err();
    int64_t mism = 0;
    for (int u = 0; u < lay.nunits; u++)
        for (int64_t i = 0; i < lay.units[u].numel; i++)
            mism += q[u][i] != zt_bf16_to_f32(zt_f32_to_bf16(p[u][i]));
    CHECK(mism == 0, "bf16 round trip: %lld values differ from their bf16 rounding", (long long)mism);
    CHECK_CLOSE("bf16 round trip relative error", q[1], p[1], lay.units[1].numel, 4e-3);

    // slices: each of 3 "ranks" reads only its part of every unit; together they equal the full load
    for (int r = 0; r < 3; r++) {
        int64_t lo[16], valid[16];
        float *dst[16];
        for (int u = 0; u < lay.nunits; u++) {
            int64_t n = lay.units[u].numel, shard = (n + 2) / 3;
            lo[u] = r * shard;
            valid[u] = lo[u] >= n ? 0 : (n - lo[u] < shard ? n - lo[u] : shard);
            dst[u] = q[u] + lo[u];
            memset(q[u], 0, (size_t)n * sizeof(float));
        }
        snprintf(path, sizeof path, "%s/tiny_untied_gqa", ZT_GOLDEN_DIR);
        if (zt_hf_load_slices(&lay, path, lo, valid, dst) != 0) zt_die_on_err();
        for (int u = 0; u < lay.nunits; u++) {
            int64_t outside = 0;
            for (int64_t i = 0; i < lay.units[u].numel; i++) {
                int mine = i >= lo[u] && i < lo[u] + valid[u];
                if (mine) CHECK(q[u][i] == p[u][i], "slice %d unit %d element %lld", r, u, (long long)i);
                else outside += q[u][i] != 0.0f;
            }
            CHECK(outside == 0, "slice %d unit %d wrote %lld elements outside its range", r, u, (long long)outside);
        }
    }

    // errors
    snprintf(sub, sizeof sub, "%s/missing.safetensors", dir);
    write_variant(&lay, p, sub, "model.layers.1.self_attn.k_norm.weight", NULL);
    expect_error(&lay, sub, "model.layers.1.self_attn.k_norm.weight is missing");
    snprintf(sub, sizeof sub, "%s/extra.safetensors", dir);
    write_variant(&lay, p, sub, NULL, "model.layers.0.self_attn.q_proj.bias");
    expect_error(&lay, sub, "is not part of a Qwen3 model");
    snprintf(sub, sizeof sub, "%s/layer.safetensors", dir);
    write_variant(&lay, p, sub, NULL, "model.layers.7.input_layernorm.weight");
    expect_error(&lay, sub, "belongs to layer 7 but the config has num_hidden_layers = 2");
    snprintf(sub, sizeof sub, "%s/nothing-here", dir);
    zt_mkdirs(sub);
    expect_error(&lay, sub, "neither model.safetensors nor model.safetensors.index.json");

    free_units(&lay, p);
    free_units(&lay, q);
    zt_model_layout_free(&lay);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    TEST_END();
}
