// Reading the golden files of tests/reference/ (safetensors written by transformers' side) in the
// model golden tests: a float tensor of an expected size, a token / word tensor, a metadata
// number, and every parameter gradient of a layout against grad.<HF name> (relative 1e-4).
// Header-only: test_model_golden.c (Qwen3) and test_qwen3_5_golden.c (Qwen3.5) include it.
// defines: zt_golden_f32, zt_golden_ids, zt_golden_meta, zt_golden_check_grads
#ifndef ZT_GOLDEN_READ_H
#define ZT_GOLDEN_READ_H
#include <stdio.h>
#include <stdlib.h>

#include "base/common.h"
#include "checkpoint/safetensors.h"
#include "model/layout.h"
#include "tests/support/test_util.h"

// The tensor `name` as floats (malloc'd), checked to hold expect_numel; NULL (a failed check)
// when it is missing.
static inline float *zt_golden_f32(const zt_st_file *g, const char *name, int64_t expect_numel) {
    const zt_st_tensor *t = zt_st_find(g, name);
    if (!t) {
        CHECK(0, "golden tensor %s missing", name);
        return NULL;
    }
    CHECK(t->numel == expect_numel, "%s numel %lld != %lld", name, (long long)t->numel, (long long)expect_numel);
    float *p = zt_xmalloc((size_t)t->numel * sizeof(float));
    if (zt_st_read_f32(g, t, p) != 0) zt_die_on_err();
    return p;
}

// An integer tensor (token ids, or block words with their flag bits) as uint32 (malloc'd);
// *numel its size when numel is not NULL. A missing tensor is fatal.
static inline uint32_t *zt_golden_ids(const zt_st_file *g, const char *name, int64_t *numel) {
    const zt_st_tensor *t = zt_st_find(g, name);
    if (!t) zt_fatal("golden tensor %s missing", name);
    int64_t *tmp = zt_xmalloc((size_t)t->numel * sizeof(int64_t));
    if (zt_st_read_i64(g, t, tmp) != 0) zt_die_on_err();
    uint32_t *out = zt_xmalloc((size_t)t->numel * sizeof(uint32_t));
    for (int64_t i = 0; i < t->numel; i++) out[i] = (uint32_t)tmp[i];
    free(tmp);
    if (numel) *numel = t->numel;
    return out;
}

static inline double zt_golden_meta(const zt_st_file *g, const char *key) {
    char buf[64];
    if (zt_st_metadata(g, key, buf, sizeof buf) != 0) zt_die_on_err();
    return atof(buf);
}

// Every parameter gradient of lay against the golden file's grad.<HF name> (relative 1e-4);
// returns how many were compared (the caller checks the count).
static inline int zt_golden_check_grads(const zt_st_file *g, const zt_model_layout *lay, float *const *grads,
                                        const char *tag) {
    int n = 0;
    for (int u = 0; u < lay->nunits; u++)
        for (int k = 0; k < lay->units[u].ntensors; k++) {
            const zt_tensor_desc *d = &lay->units[u].t[k];
            char name[160], what[200];
            snprintf(name, sizeof name, "grad.%s", d->name);
            float *gr = zt_golden_f32(g, name, d->numel);
            if (!gr) continue;
            snprintf(what, sizeof what, "%s%s", tag, name);
            CHECK_CLOSE(what, grads[u] + d->offset, gr, d->numel, 1e-4);
            n++;
            free(gr);
        }
    return n;
}
#endif
