// Hugging Face weight import/export: save -> load round trips (fp32 bit-exact,
// bf16 within one rounding), and the errors for a missing tensor, an unexpected
// tensor, a tensor of a layer the config does not have, and a bf16 checkpoint
// read through the converter. Carried tensors (checkpoint/hf_carry.c), family-agnostic: a
// test-local copy of Qwen3's family table with carry prefixes and a VLM config reads text
// weights under model.language_model., carries mtp.* and model.visual.* into RUN/carry, and
// export writes them back byte for byte next to the text weights under the input's names,
// with the input's config.json; damaged or missing carries, a VLM checkpoint without text
// weights and an unknown tensor are refused. Tensors of 3 dimensions through the loader,
// a checkpoint and export.
#include <cjson/cJSON.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt.h"
#include "checkpoint/safetensors.h"
#include "model/family.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"
#include "base/common.h"
#include "base/out_file.h"
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

// ---- carried tensors and 3-D tensors --------------------------------------------------------

static const char *const test_carry_prefixes[] = {"mtp.", "model.visual.", NULL};

// Bytes of a carried tensor (any dtype: the loader never converts them).
static uint8_t carried_bf16[3 * 5 * 2], carried_f32[2 * 3 * 4 * 4], carried_f8[7];

// A VLM-named checkpoint of the layout's values p: text tensors under model.language_model.
// (lm_head.weight at the top), unless `plain`; plus the carried tensors and `extra` (1-D, hidden).
static void write_vlm(const zt_model_layout *lay, float *const *p, const char *path, int plain, const char *extra) {
    zt_st_writer *w = zt_st_writer_new();
    const int64_t s_bf16[2] = {3, 5}, s_f32[3] = {2, 3, 4}, s_f8[1] = {7};
    // carried ones first and in the middle of the file: export must find them wherever they are
    if (zt_st_writer_add_raw(w, "mtp.0.x", "BF16", 2, s_bf16, carried_bf16, sizeof carried_bf16) != 0) zt_die_on_err();
    for (int u = 0; u < lay->nunits; u++) {
        if (u == 1 && zt_st_writer_add_raw(w, "model.visual.blocks.0.w", "F32", 3, s_f32, carried_f32,
                                           sizeof carried_f32) != 0)
            zt_die_on_err();
        for (int k = 0; k < lay->units[u].ntensors; k++) {
            const zt_tensor_desc *d = &lay->units[u].t[k];
            char name[300];
            zt_hf_export_name(plain ? NULL : ZT_QWEN3_5_VLM_PREFIX, d->name, name, sizeof name);
            if (zt_st_writer_add_f32(w, name, p[u] + d->offset, d->ndim, d->shape, ZT_ST_F32) != 0) zt_die_on_err();
        }
    }
    if (zt_st_writer_add_raw(w, "mtp.fc.scale", "F8_E4M3", 1, s_f8, carried_f8, sizeof carried_f8) != 0)
        zt_die_on_err();
    if (extra) {
        int64_t shape[1] = {lay->cfg.hidden_size};
        if (zt_st_writer_add_f32(w, extra, p[0], 1, shape, ZT_ST_F32) != 0) zt_die_on_err();
    }
    if (zt_st_write(w, path) != 0) zt_die_on_err();
    zt_st_writer_free(w);
}

// Every tensor of src is in the export dir's files (index or model.safetensors) with the same
// dtype, shape and bytes; and nothing else is.
static void check_export_identical(const char *src_file, const char *out) {
    zt_st_file s;
    if (zt_st_open(&s, src_file) != 0) zt_die_on_err();
    char path[4400];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", out);
    char **files = NULL;
    int nfiles = 0;
    if (zt_hf_list_files(out, &files, &nfiles) != 0) zt_die_on_err();
    int found = 0, total = 0;
    for (int f = 0; f < nfiles; f++) {
        zt_st_file e;
        if (zt_st_open(&e, files[f]) != 0) zt_die_on_err();
        total += e.ntensors;
        for (int k = 0; k < e.ntensors; k++) {
            const zt_st_tensor *a = &e.tensors[k], *b = zt_st_find(&s, a->name);
            CHECK(b != NULL, "export %s: tensor %s is not in the source", files[f], a->name);
            if (!b) continue;
            found++;
            int same = a->ndim == b->ndim && !strcmp(a->dtype_name, b->dtype_name) && a->end - a->begin == b->end - b->begin;
            for (int j = 0; j < a->ndim && same; j++) same = a->shape[j] == b->shape[j];
            CHECK(same && !memcmp(e.map + a->begin, s.map + b->begin, a->end - a->begin),
                  "export %s: tensor %s (%s) is not byte-identical to the source's (%s)", files[f], a->name,
                  a->dtype_name, b->dtype_name);
        }
        zt_st_close(&e);
        free(files[f]);
    }
    free(files);
    CHECK(found == s.ntensors && total == s.ntensors, "export %s holds %d tensors (%d of the source's %d)", out, total,
          found, s.ntensors);
    zt_st_close(&s);
}

static int files_equal(const char *a, const char *b) {
    size_t na, nb;
    char *x = zt_read_file(a, &na), *y = zt_read_file(b, &nb);
    int eq = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return eq;
}

// A checkpoint of p (master; m and v zero) at run/checkpoints/step-00000001 with train_json.
static void save_ckpt(const zt_model_layout *lay, float *const *p, const char *run, const char *train_json) {
    zt_ckpt_slice *sl = zt_xcalloc((size_t)lay->nunits, sizeof *sl);
    for (int u = 0; u < lay->nunits; u++) {
        const int64_t n = lay->units[u].numel;
        sl[u] = (zt_ckpt_slice){n, 0, n, p[u], zt_xcalloc((size_t)n, 4), zt_xcalloc((size_t)n, 4)};
    }
    zt_ckpt_shards sh = {lay->nunits, sl};
    zt_ckpt_meta m;
    memset(&m, 0, sizeof m);
    m.step = 1;
    snprintf(m.run_id, sizeof m.run_id, "carry-test");
    char out[4200];
    if (zt_ckpt_save(MPI_COMM_WORLD, run, &m, lay, train_json, &sh, 0, out, sizeof out) != 0) zt_die_on_err();
    for (int u = 0; u < lay->nunits; u++) free(sl[u].m), free(sl[u].v);
    free(sl);
}

static void expect_export_error(const char *run, const char *out, const char *pattern) {
    int rc = zt_ckpt_export_hf(run, out, ZT_ST_F32, 0);
    CHECK(rc != 0 && strstr(zt_errmsg(), pattern), "export of %s should fail with '%s', got: %s", run, pattern,
          rc ? zt_errmsg() : "success");
    if (rc != 0) printf("  ok error: %s\n", zt_errmsg());
    struct stat st;
    CHECK(stat(out, &st) != 0, "a refused export wrote %s", out);
}

// A VLM wrapper's name adapter (zt_family.hf_prefix), as Qwen3.5's read from its wrapper config.
static const char *vlm_prefix(const zt_model_config *c) { return ZT_QWEN3_5_VLM_PREFIX; }

static void test_carry(const char *dir, const zt_model_config *base, float *const *p) {
    for (size_t i = 0; i < sizeof carried_bf16; i++) carried_bf16[i] = (uint8_t)(i * 37 + 11);
    for (size_t i = 0; i < sizeof carried_f32; i++) carried_f32[i] = (uint8_t)(i * 91 + 3);
    for (size_t i = 0; i < sizeof carried_f8; i++) carried_f8[i] = (uint8_t)(0xf0 + i);
    // Qwen3's table, with the carry prefixes and the VLM name adapter a family like Qwen3.5 sets
    zt_family fam = *base->family;
    fam.carry_prefixes = test_carry_prefixes;
    fam.hf_prefix = vlm_prefix;
    zt_model_config cfg = *base;
    cfg.family = &fam;
    zt_model_layout lay;
    zt_model_layout_init(&lay, &cfg);
    char src[4200], file[4300], cfgp[4300], run[4200], out[4300], sub[4600];
    snprintf(src, sizeof src, "%s/vlm", dir);
    zt_mkdirs(src);
    snprintf(file, sizeof file, "%s/model.safetensors", src);
    write_vlm(&lay, p, file, 0, NULL);
    // config.json: any bytes; what export writes back must be these, not a re-encoding
    snprintf(cfgp, sizeof cfgp, "%s/config.json", src);
    const char *cj = "{\n  \"architectures\": [\"SomethingForConditionalGeneration\"],\n\t\"note\": \"verbatim\" }\n";
    if (zt_write_file_atomic(cfgp, cj, strlen(cj)) != 0) zt_die_on_err();

    // load: the text weights, bit for bit; the carried ones passed over
    float **q = alloc_units(&lay);
    CHECK(zt_hf_load(&lay, src, q) == 0, "load of the VLM checkpoint: %s", zt_errmsg());
    for (int u = 0; u < lay.nunits; u++)
        CHECK(!memcmp(p[u], q[u], (size_t)lay.units[u].numel * sizeof(float)), "VLM load unit %d", u);

    // carry into RUN/carry
    snprintf(run, sizeof run, "%s/run", dir);
    zt_mkdirs(run);
    int n = -1;
    CHECK(zt_hf_carry_write(&lay, src, cfgp, run, &n) == 0 && n == 3, "carry: %d tensors (%s)", n, zt_errmsg());
    snprintf(sub, sizeof sub, "%s/carry/config.json", run);
    CHECK(files_equal(sub, cfgp), "RUN/carry/config.json is the input's, byte for byte");
    zt_hf_carry c;
    snprintf(sub, sizeof sub, "%s/carry", run);
    CHECK(zt_hf_carry_open(&c, sub) == 0, "carry open: %s", zt_errmsg());
    char record[64];
    snprintf(record, sizeof record, "%s", c.record);
    CHECK(c.st.ntensors == 3 && !strcmp(c.text_prefix, ZT_QWEN3_5_VLM_PREFIX), "carry: %d tensors, prefix %s",
          c.st.ntensors, c.text_prefix);
    zt_hf_carry_close(&c);

    // a checkpoint whose settings record the carry, exported: the source again, tensor for tensor
    char tj[256];
    snprintf(tj, sizeof tj, "{\"lr\":0.001,\"%s\":\"%s\"}", ZT_HF_CARRY_KEY, record);
    save_ckpt(&lay, q, run, tj);
    snprintf(out, sizeof out, "%s/export", dir);
    CHECK(zt_ckpt_export_hf(run, out, ZT_ST_F32, 0) == 0, "export: %s", zt_errmsg());
    check_export_identical(file, out);
    snprintf(sub, sizeof sub, "%s/config.json", out);
    CHECK(files_equal(sub, cfgp), "export's config.json is the input's, byte for byte");
    // sharded (tiny shards), bf16 text: the carried tensors still byte-identical, named in the index
    snprintf(out, sizeof out, "%s/export-sharded", dir);
    CHECK(zt_ckpt_export_hf(run, out, ZT_ST_BF16, 300) == 0, "sharded export: %s", zt_errmsg());
    {
        snprintf(sub, sizeof sub, "%s/model.safetensors.index.json", out);
        char *text = zt_read_file(sub, NULL);
        cJSON *ix = text ? cJSON_Parse(text) : NULL;
        const cJSON *wm = cJSON_GetObjectItemCaseSensitive(ix, "weight_map");
        zt_st_file s;
        if (zt_st_open(&s, file) != 0) zt_die_on_err();
        CHECK(cJSON_GetArraySize(wm) == s.ntensors, "index names %d tensors, the source has %d", cJSON_GetArraySize(wm),
              s.ntensors);
        const char *carried[3] = {"mtp.0.x", "model.visual.blocks.0.w", "mtp.fc.scale"};
        for (int i = 0; i < 3; i++) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(wm, carried[i]);
            CHECK(cJSON_IsString(f), "index names %s", carried[i]);
            if (!cJSON_IsString(f)) continue;
            char shard[4500];
            snprintf(shard, sizeof shard, "%s/%s", out, f->valuestring);
            zt_st_file e;
            if (zt_st_open(&e, shard) != 0) zt_die_on_err();
            const zt_st_tensor *a = zt_st_find(&e, carried[i]), *b = zt_st_find(&s, carried[i]);
            CHECK(a && b && !strcmp(a->dtype_name, b->dtype_name) && a->end - a->begin == b->end - b->begin &&
                      !memcmp(e.map + a->begin, s.map + b->begin, b->end - b->begin),
                  "sharded export: %s byte-identical", carried[i]);
            zt_st_close(&e);
        }
        CHECK(cJSON_GetObjectItemCaseSensitive(wm, "model.language_model.embed_tokens.weight") &&
                  cJSON_GetObjectItemCaseSensitive(wm, "lm_head.weight") &&
                  !cJSON_GetObjectItemCaseSensitive(wm, "model.embed_tokens.weight"),
              "sharded export: text weights under the input's names");
        zt_st_close(&s);
        cJSON_Delete(ix);
        free(text);
    }

    // a damaged carry: refused, naming the file; nothing written
    snprintf(sub, sizeof sub, "%s/carry/carried.safetensors", run);
    {
        size_t len;
        char *bytes = zt_read_file(sub, &len);
        bytes[len - 2] ^= 0x10;
        FILE *fp = fopen(sub, "r+b");
        fwrite(bytes, 1, len, fp);
        fclose(fp);
        snprintf(out, sizeof out, "%s/export-damaged", dir);
        expect_export_error(run, out, "carried.safetensors: ");
        CHECK(strstr(zt_errmsg(), "are damaged") != NULL, "damage named: %s", zt_errmsg());
        bytes[len - 2] ^= 0x10;
        fp = fopen(sub, "r+b");
        fwrite(bytes, 1, len, fp);
        fclose(fp);
        free(bytes);
    }
    // a carry that is not the recorded one, then none at all
    snprintf(tj, sizeof tj, "{\"lr\":0.001,\"%s\":\"manifest.json crc32c 00000000\"}", ZT_HF_CARRY_KEY);
    char run2[4300];
    snprintf(run2, sizeof run2, "%s/run2", dir);
    save_ckpt(&lay, q, run2, tj);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -r %s/carry %s/carry", run, run2);
    CHECK(system(cmd) == 0, "%s", cmd);
    snprintf(out, sizeof out, "%s/export-other", dir);
    expect_export_error(run2, out, "are not the ones this run started from");
    snprintf(sub, sizeof sub, "%s/carry", run2);
    zt_remove_tree(sub);
    expect_export_error(run2, out, "is missing");

    // refusals: a VLM checkpoint without text weights; an unknown tensor
    snprintf(sub, sizeof sub, "%s/plain.safetensors", dir);
    write_vlm(&lay, p, sub, 1, NULL);
    expect_error(&lay, sub, "no tensor has that prefix");
    CHECK(strstr(zt_errmsg(), sub) != NULL, "the refusal names the file: %s", zt_errmsg());
    snprintf(sub, sizeof sub, "%s/unknown.safetensors", dir);
    write_vlm(&lay, p, sub, 0, "model.visual_extra.w");
    expect_error(&lay, sub, "tensor model.visual_extra.w is not part of");
    write_vlm(&lay, p, sub, 0, "model.language_model.layers.0.self_attn.q_proj.bias");
    expect_error(&lay, sub, "tensor model.language_model.layers.0.self_attn.q_proj.bias is not part of");

    // a family without carry prefixes: nothing carried, nothing written; mtp.* refused as before
    zt_model_layout plain;
    zt_model_layout_init(&plain, base);
    snprintf(run2, sizeof run2, "%s/run3", dir);
    zt_mkdirs(run2);
    n = -1;
    CHECK(zt_hf_carry_write(&plain, src, cfgp, run2, &n) == 0 && n == 0, "no prefixes: %d carried", n);
    struct stat st;
    snprintf(sub, sizeof sub, "%s/carry", run2);
    CHECK(stat(sub, &st) != 0, "no prefixes: %s not written", sub);
    expect_error(&plain, file, "tensor mtp.0.x is not part of a Qwen3 model");

    free_units(&lay, q);
    zt_model_layout_free(&plain);
    zt_model_layout_free(&lay);
}

// A 3-D tensor (a conv kernel [C, 1, K], as Qwen3.5's conv1d.weight) appended to the head unit:
// loaded, refused with the wrong shape, stored in a checkpoint and exported with its shape.
static void test_3d(const char *dir, const zt_model_config *cfg, float *const *p) {
    zt_model_layout lay;
    zt_model_layout_init(&lay, cfg);
    const int h = lay.nunits - 1;
    const int64_t shape[3] = {4, 1, 3};
    CHECK(zt_layout_add_tensor(&lay.units[h], "model.conv.weight", 3, shape) == 0, "add a 3-D tensor");
    const zt_tensor_desc *d = &lay.units[h].t[lay.units[h].ntensors - 1];
    CHECK(d->ndim == 3 && d->numel == 12 && d->decay == 1 && d->offset + 12 == lay.units[h].numel,
          "3-D tensor: ndim %d numel %lld decay %d", d->ndim, (long long)d->numel, d->decay);
    float **v = alloc_units(&lay), **q = alloc_units(&lay);
    for (int u = 0; u < lay.nunits; u++) {
        const int64_t n = u == h ? d->offset : lay.units[u].numel;
        memcpy(v[u], p[u], (size_t)n * sizeof(float));
    }
    for (int i = 0; i < 12; i++) v[h][d->offset + i] = 0.25f * (float)i - 1;
    char path[4600];
    snprintf(path, sizeof path, "%s/conv.safetensors", dir);
    zt_st_writer *w = zt_st_writer_new();
    for (int u = 0; u < lay.nunits; u++)
        for (int k = 0; k < lay.units[u].ntensors; k++) {
            const zt_tensor_desc *t = &lay.units[u].t[k];
            if (zt_st_writer_add_f32(w, t->name, v[u] + t->offset, t->ndim, t->shape, ZT_ST_F32) != 0) zt_die_on_err();
        }
    if (zt_st_write(w, path) != 0) zt_die_on_err();
    zt_st_writer_free(w);
    CHECK(zt_hf_load(&lay, path, q) == 0 && !memcmp(q[h], v[h], (size_t)lay.units[h].numel * 4), "3-D load: %s",
          zt_errmsg());
    // the wrong shape: refused, naming both
    snprintf(path, sizeof path, "%s/conv-bad.safetensors", dir);
    w = zt_st_writer_new();
    for (int u = 0; u < lay.nunits; u++)
        for (int k = 0; k < lay.units[u].ntensors; k++) {
            const zt_tensor_desc *t = &lay.units[u].t[k];
            const int64_t bad[3] = {4, 3, 1};
            if (zt_st_writer_add_f32(w, t->name, v[u] + t->offset, t->ndim, t->ndim == 3 ? bad : t->shape, ZT_ST_F32) != 0)
                zt_die_on_err();
        }
    if (zt_st_write(w, path) != 0) zt_die_on_err();
    zt_st_writer_free(w);
    expect_error(&lay, path, "tensor model.conv.weight has shape [4, 3, 1]; the config needs [4, 1, 3]");
    // a checkpoint's unit table holds the 3-D shape; export writes it back
    char run[4300], out[4300];
    snprintf(run, sizeof run, "%s/run3d", dir);
    save_ckpt(&lay, v, run, "{}");
    snprintf(out, sizeof out, "%s/export3d", dir);
    CHECK(zt_ckpt_export_hf(run, out, ZT_ST_F32, 0) == 0, "3-D export: %s", zt_errmsg());
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    zt_st_file e;
    if (zt_st_open(&e, path) != 0) zt_die_on_err();
    const zt_st_tensor *t = zt_st_find(&e, "model.conv.weight");
    CHECK(t && t->ndim == 3 && t->shape[0] == 4 && t->shape[1] == 1 && t->shape[2] == 3 &&
              !memcmp(e.map + t->begin, v[h] + d->offset, 48),
          "3-D export: shape and values");
    zt_st_close(&e);
    free_units(&lay, v);
    free_units(&lay, q);
    zt_model_layout_free(&lay);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
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
    {  // the refusal names the config's family: Qwen3.5 (tests/golden/q35_mix) with a bias it lacks
        zt_model_config c35;
        char q35[512];
        snprintf(q35, sizeof q35, "%s/q35_mix", ZT_GOLDEN_DIR);
        if (zt_model_config_load(&c35, q35) != 0) zt_die_on_err();
        zt_model_layout l35;
        if (zt_model_layout_init(&l35, &c35) != 0) zt_die_on_err();
        float **p35 = alloc_units(&l35);
        snprintf(sub, sizeof sub, "%s/extra35.safetensors", dir);
        write_variant(&l35, p35, sub, NULL, "model.layers.2.self_attn.q_proj.bias");
        expect_error(&l35, sub, "tensor model.layers.2.self_attn.q_proj.bias is not part of a Qwen3.5 model");
        free_units(&l35, p35);
        zt_model_layout_free(&l35);
    }
    snprintf(sub, sizeof sub, "%s/layer.safetensors", dir);
    write_variant(&lay, p, sub, NULL, "model.layers.7.input_layernorm.weight");
    expect_error(&lay, sub, "belongs to layer 7 but the config has num_hidden_layers = 2");
    snprintf(sub, sizeof sub, "%s/nothing-here", dir);
    zt_mkdirs(sub);
    expect_error(&lay, sub, "neither model.safetensors nor model.safetensors.index.json");

    test_carry(dir, &cfg, p);
    test_3d(dir, &cfg, p);

    free_units(&lay, p);
    free_units(&lay, q);
    zt_model_layout_free(&lay);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    MPI_Finalize();
    TEST_END();
}
