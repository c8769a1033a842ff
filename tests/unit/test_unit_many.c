// A unit of many tensors (an MoE layer holds hundreds): 300 tensors appended to decoder layer 0
// of a tiny Qwen3 layout go through every code path that once had a fixed per-unit array
// (ZT_UNIT_MAX_TENSORS = 16): the layout's list (zt_layout_add_tensor, find), the optimizer's
// spans (zt_unit_spans, zt_adamw_range against a naive per-element AdamW in double), the Hugging
// Face load's seen table (save, load, a missing tensor named), and the checkpoint's unit table
// (zt_ckpt_save, zt_ckpt_load, zt_ckpt_export_hf read back).
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "checkpoint/ckpt.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "engine/optim.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "tests/support/test_util.h"

#define EXTRA 300

static float **alloc_units(const zt_model_layout *lay) {
    float **p = zt_xcalloc((size_t)lay->nunits, sizeof *p);
    for (int u = 0; u < lay->nunits; u++) p[u] = zt_xcalloc((size_t)lay->units[u].numel, sizeof(float));
    return p;
}

static void free_units(const zt_model_layout *lay, float **p) {
    for (int u = 0; u < lay->nunits; u++) free(p[u]);
    free(p);
}

static int units_equal(const zt_model_layout *lay, float *const *a, float *const *b) {
    for (int u = 0; u < lay->nunits; u++)
        if (memcmp(a[u], b[u], (size_t)lay->units[u].numel * sizeof(float))) return 0;
    return 1;
}

// The layout's own list: 11 + EXTRA tensors, tiling the unit in order, each found by name.
static void check_layout(const zt_model_layout *lay) {
    const zt_unit_layout *u = &lay->units[1];
    CHECK(u->ntensors == ZT_L_NTENSORS + EXTRA, "unit 1 holds %d tensors", u->ntensors);
    int64_t next = 0, bad = 0;
    for (int i = 0; i < u->ntensors; i++) bad += u->t[i].offset != next, next += u->t[i].numel;
    CHECK(bad == 0 && next == u->numel, "tensors tile the unit: %lld out of place, %lld of %lld", (long long)bad,
          (long long)next, (long long)u->numel);
    int uu = -1, k = -1;
    CHECK(zt_model_layout_find(lay, "model.layers.0.mlp.experts.299.w", &uu, &k) == 0 && uu == 1 &&
              k == ZT_L_NTENSORS + 299,
          "find the last expert tensor: unit %d index %d", uu, k);
}

// The spans of a range over many tensors, and AdamW over them, against a naive AdamW per element
// in double whose weight decay is the element's own tensor's (found by scanning the offsets).
static void check_optimizer(const zt_model_layout *lay) {
    const zt_unit_layout *u = &lay->units[1];
    const int64_t lo = u->t[5].offset + 1, n = u->t[ZT_L_NTENSORS + 250].offset - lo + 2;  // ~255 tensors
    zt_tensor_span *sp = zt_xcalloc((size_t)u->ntensors, sizeof *sp);
    const int ns = zt_unit_spans(u, lo, n, sp);
    CHECK(ns == ZT_L_NTENSORS + 251 - 5, "spans of [%lld, +%lld): %d", (long long)lo, (long long)n, ns);
    int64_t covered = 0;
    for (int i = 0; i < ns; i++) covered += sp[i].len;
    CHECK(covered == n, "spans cover %lld of %lld elements", (long long)covered, (long long)n);
    free(sp);

    float *p = zt_xmalloc((size_t)n * 4), *g = zt_xmalloc((size_t)n * 4), *m = zt_xcalloc((size_t)n, 4),
          *v = zt_xcalloc((size_t)n, 4);
    double *rp = zt_xmalloc((size_t)n * 8);
    zt_rng r;
    zt_rng_seed(&r, 7);
    for (int64_t i = 0; i < n; i++) p[i] = (float)zt_rng_normal(&r), g[i] = (float)zt_rng_normal(&r), rp[i] = p[i];
    const zt_hparams hp = {.lr = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.5};
    zt_adamw_range(&zt_cpu_ops, u, lo, n, p, g, m, v, hp.lr, &hp, 1);
    double worst = 0;
    int64_t decayed = 0;
    for (int64_t i = 0; i < n; i++) {
        int t = 0;
        while (!(lo + i >= u->t[t].offset && lo + i < u->t[t].offset + u->t[t].numel)) t++;
        const double wd = u->t[t].decay ? hp.weight_decay : 0;
        decayed += u->t[t].decay;
        // step 1 from m = v = 0: m = (1 - b1) g, v = (1 - b2) g^2, bias-corrected
        const double mi = (1 - hp.beta1) * g[i], vi = (1 - hp.beta2) * (double)g[i] * g[i];
        const double want = rp[i] * (1 - hp.lr * wd) -
                            hp.lr / (1 - hp.beta1) * mi / (sqrt(vi) / sqrt(1 - hp.beta2) + hp.eps);
        const double e = fabs(p[i] - want) / (fabs(want) > 1 ? fabs(want) : 1);
        if (e > worst) worst = e;
    }
    CHECK(decayed > 0 && decayed < n, "both kinds in the range (%lld of %lld decayed)", (long long)decayed, (long long)n);
    CHECK(worst < 1e-5, "AdamW over the spans against naive AdamW: max rel error %.3g (tol 1e-5)", worst);
    free(p), free(g), free(m), free(v), free(rp);
}

// Hugging Face save + load, and a missing tensor of the 300 named.
static void check_hf(const zt_model_layout *lay, float *const *p, const char *dir) {
    char sub[4200];
    float **q = alloc_units(lay);
    snprintf(sub, sizeof sub, "%s/hf", dir);
    CHECK(zt_hf_save(lay, p, sub, ZT_ST_F32) == 0, "hf save: %s", zt_errmsg());
    CHECK(zt_hf_load(lay, sub, q) == 0 && units_equal(lay, p, q), "hf load of 311-tensor unit: %s", zt_errmsg());
    snprintf(sub, sizeof sub, "%s/missing.safetensors", dir);
    zt_st_writer *w = zt_st_writer_new();
    for (int u = 0; u < lay->nunits; u++)
        for (int k = 0; k < lay->units[u].ntensors; k++) {
            const zt_tensor_desc *t = &lay->units[u].t[k];
            if (strcmp(t->name, "model.layers.0.mlp.experts.250.b") != 0 &&
                zt_st_writer_add_f32(w, t->name, p[u] + t->offset, t->ndim, t->shape, ZT_ST_F32) != 0)
                zt_die_on_err();
        }
    if (zt_st_write(w, sub) != 0) zt_die_on_err();
    zt_st_writer_free(w);
    const int rc = zt_hf_load(lay, sub, q);
    CHECK(rc != 0 && strstr(zt_errmsg(), "model.layers.0.mlp.experts.250.b is missing"), "missing tensor: %s",
          rc ? zt_errmsg() : "loaded");
    free_units(lay, q);
}

// The checkpoint's unit table: save, load back (master, m, v), export and read the export back.
static void check_ckpt(const zt_model_layout *lay, float *const *p, const char *dir) {
    zt_ckpt_slice *sl = zt_xcalloc((size_t)lay->nunits, sizeof *sl), *ld = zt_xcalloc((size_t)lay->nunits, sizeof *ld);
    for (int u = 0; u < lay->nunits; u++) {
        const int64_t n = lay->units[u].numel;
        sl[u] = (zt_ckpt_slice){n, 0, n, p[u], zt_xcalloc((size_t)n, 4), zt_xcalloc((size_t)n, 4)};
        for (int64_t i = 0; i < n; i++) sl[u].m[i] = 0.5f * p[u][i], sl[u].v[i] = (float)i;
        ld[u] = (zt_ckpt_slice){n, 0, n, zt_xcalloc((size_t)n, 4), zt_xcalloc((size_t)n, 4), zt_xcalloc((size_t)n, 4)};
    }
    zt_ckpt_shards sh = {lay->nunits, sl}, lsh = {lay->nunits, ld};
    zt_ckpt_meta m;
    memset(&m, 0, sizeof m);
    m.step = 3;
    snprintf(m.run_id, sizeof m.run_id, "unit-many");
    char run[4300], out[4400];
    snprintf(run, sizeof run, "%s/run", dir);
    CHECK(zt_ckpt_save(MPI_COMM_WORLD, run, &m, lay, "{}", &sh, 0, out, sizeof out) == 0, "ckpt save: %s",
          zt_errmsg());
    zt_ckpt_meta got;
    CHECK(zt_ckpt_load(MPI_COMM_WORLD, run, lay, &got, &lsh) == 0 && got.step == 3, "ckpt load: %s", zt_errmsg());
    int same = 1;
    for (int u = 0; u < lay->nunits; u++) {
        const size_t b = (size_t)lay->units[u].numel * 4;
        same &= !memcmp(ld[u].master, sl[u].master, b) && !memcmp(ld[u].m, sl[u].m, b) && !memcmp(ld[u].v, sl[u].v, b);
    }
    CHECK(same, "ckpt load: master, m and v of every unit as saved");
    snprintf(out, sizeof out, "%s/export", dir);
    CHECK(zt_ckpt_export_hf(run, out, ZT_ST_F32, 0) == 0, "export: %s", zt_errmsg());
    float **q = alloc_units(lay);
    CHECK(zt_hf_load(lay, out, q) == 0 && units_equal(lay, p, q), "export read back: %s", zt_errmsg());
    free_units(lay, q);
    for (int u = 0; u < lay->nunits; u++) free(sl[u].m), free(sl[u].v), free(ld[u].master), free(ld[u].m), free(ld[u].v);
    free(sl), free(ld);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    char dir[] = "/tmp/zt_unit_many_XXXXXX", path[4200];
    if (!mkdtemp(dir)) zt_fatal("mkdtemp failed");
    zt_model_config cfg;
    snprintf(path, sizeof path, "%s/tiny_untied_gqa", ZT_GOLDEN_DIR);
    if (zt_model_config_load(&cfg, path) != 0) zt_die_on_err();
    zt_model_layout lay;
    if (zt_model_layout_init(&lay, &cfg) != 0) zt_die_on_err();
    for (int e = 0; e < EXTRA; e++) {  // alternately a vector (no decay) and a matrix (decay)
        char name[96];
        const int64_t shape[2] = {e % 2 ? 2 : 3, 3};
        snprintf(name, sizeof name, "model.layers.0.mlp.experts.%d.%s", e, e % 2 ? "w" : "b");
        if (zt_layout_add_tensor(&lay.units[1], name, e % 2 ? 2 : 1, shape) != 0) zt_die_on_err();
    }
    float **p = alloc_units(&lay);
    zt_rng r;
    zt_rng_seed(&r, 11);
    for (int u = 0; u < lay.nunits; u++)
        for (int64_t i = 0; i < lay.units[u].numel; i++) p[u][i] = (float)zt_rng_normal(&r);
    check_layout(&lay);
    check_optimizer(&lay);
    check_hf(&lay, p, dir);
    check_ckpt(&lay, p, dir);
    free_units(&lay, p);
    zt_model_layout_free(&lay);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    MPI_Finalize();
    TEST_END();
}
