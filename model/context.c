// Family-neutral context parallelism (model/context.h): the reorder between held tokens and block
// rows, row exchanges in block order, and softmax attention's K/V exchange. The K/V one: this rank
// holds S_local tokens of each block (an early and a late chunk), the group's K and V are
// all-gathered after RoPE into the whole block's rows, and the op table's attention over a subset of
// queries (attention_fwd_rows) runs the held queries against the whole block's keys, so the held rows'
// values are those of the unsplit block. Backward re-gathers K/V, runs the op's backward for the held
// queries (dK, dV of every key of the block), and hands each rank the dK/dV of its own keys by
// reduce-scatter.
// defines: zt_context_bind_check, zt_context_to_block, zt_context_from_block, zt_context_gather_rows,
//          zt_context_scatter_rows, zt_context_kv_init, zt_context_kv_bytes, zt_context_kv_free,
//          zt_context_attention_fwd, zt_context_attention_bwd
#include "model/context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

int zt_context_bind_check(int64_t B, int64_t S, const zt_family_context *cx) {
    if (B <= 0 || S < 2)
        return zt_err("micro-batch %lld x seq_len %lld: need at least one block of 2 tokens", (long long)B,
                      (long long)S);
    if (cx && (cx->C < 2 || cx->S != S || cx->S_local < 1 || cx->rank < 0 || cx->rank >= cx->C || !cx->index ||
               !cx->gather || !cx->scatter))
        return zt_err("context parallelism: a split of %d ranks (rank %d) holding %lld of %lld tokens per block does "
                      "not fit blocks of %lld tokens", cx->C, cx->rank, (long long)cx->S_local, (long long)cx->S,
                      (long long)S);
    return 0;
}

void zt_context_to_block(const zt_family_context *cx, int r, int64_t B, const float *src, float *dst, int64_t w) {
    const int64_t S = cx->S_local, Sb = cx->S;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < S; t++) {
            const int64_t g = cx->index[(int64_t)r * S + t];
            if (g >= 0) memcpy(dst + (b * Sb + g) * w, src + (b * S + t) * w, (size_t)w * sizeof(float));
        }
}

void zt_context_from_block(const zt_family_context *cx, int r, int64_t B, const float *src, float *dst, int64_t w) {
    const int64_t S = cx->S_local, Sb = cx->S;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < S; t++) {
            const int64_t g = cx->index[(int64_t)r * S + t];
            if (g >= 0)
                memcpy(dst + (b * S + t) * w, src + (b * Sb + g) * w, (size_t)w * sizeof(float));
            else
                memset(dst + (b * S + t) * w, 0, (size_t)w * sizeof(float));
        }
}

void zt_context_gather_rows(const zt_family_context *cx, int64_t B, const float *mine, float *all, float *block,
                            int64_t w, const char *what) {
    const int64_t n = B * cx->S_local * w;
    cx->gather(cx->ctx, mine, all, n, what);
    for (int r = 0; r < cx->C; r++) zt_context_to_block(cx, r, B, all + (int64_t)r * n, block, w);
}

void zt_context_scatter_rows(const zt_family_context *cx, int64_t B, const float *block, float *all, float *mine,
                             int64_t w, const char *what) {
    const int64_t n = B * cx->S_local * w;
    for (int r = 0; r < cx->C; r++) zt_context_from_block(cx, r, B, block, all + (int64_t)r * n, w);
    cx->scatter(cx->ctx, all, mine, n, what);
}

void zt_context_kv_init(zt_context_kv *x, const zt_family_context *cx, int64_t B, int64_t kvs,
                        float *(*alloc)(void *ctx, int64_t n), void *ctx) {
    memset(x, 0, sizeof *x);
    const int64_t C = cx->C, N = B * cx->S_local;
    x->cx = *cx;
    x->index = zt_xmalloc((size_t)(C * cx->S_local) * sizeof(int32_t));
    memcpy(x->index, cx->index, (size_t)(C * cx->S_local) * sizeof(int32_t));
    x->cx.index = x->index;
    x->B = B, x->kvs = kvs;
    x->kv_mine = alloc(ctx, 2 * N * kvs);
    x->kv_all = alloc(ctx, C * 2 * N * kvs);
    x->k = alloc(ctx, B * cx->S * kvs);
    x->v = alloc(ctx, B * cx->S * kvs);
}

int64_t zt_context_kv_bytes(int C, int64_t B, int64_t S, int64_t S_local, int64_t kvs) {
    const int64_t N = B * S_local;
    return (2 * N * kvs + (int64_t)C * 2 * N * kvs + 2 * B * S * kvs) * (int64_t)sizeof(float);
}

void zt_context_kv_free(zt_context_kv *x) {
    free(x->kv_mine), free(x->kv_all), free(x->k), free(x->v), free(x->index);
    memset(x, 0, sizeof *x);
}

// This rank's held tokens' block rows (-1: padding), the query map of attention_fwd_rows.
static const int32_t *my_rows(const zt_context_kv *x) { return x->index + (int64_t)x->cx.rank * x->cx.S_local; }

// The whole block's K and V (after RoPE) into x->k, x->v: one all-gather of every rank's K|V.
static void gather_kv(zt_context_kv *x, int layer, const float *k, const float *v, const char *pass) {
    const int64_t kvs = x->kvs, n = x->B * x->cx.S_local * kvs;
    memcpy(x->kv_mine, k, (size_t)n * sizeof(float));
    memcpy(x->kv_mine + n, v, (size_t)n * sizeof(float));
    char what[64];
    snprintf(what, sizeof what, "layer %d K/V context all-gather (%s)", layer, pass);
    x->cx.gather(x->cx.ctx, x->kv_mine, x->kv_all, 2 * n, what);
    for (int r = 0; r < x->cx.C; r++) {
        zt_context_to_block(&x->cx, r, x->B, x->kv_all + (int64_t)r * 2 * n, x->k, kvs);
        zt_context_to_block(&x->cx, r, x->B, x->kv_all + (int64_t)r * 2 * n + n, x->v, kvs);
    }
}

void zt_context_attention_fwd(zt_context_kv *x, const zt_ops *ops, int layer, float *att, float *stats,
                              const float *q, const float *k, const float *v, const int32_t *pos, int64_t H,
                              int64_t Hkv, int64_t D) {
    gather_kv(x, layer, k, v, "forward");
    ops->attention_fwd_rows(att, stats, q, x->k, x->v, pos, my_rows(x), x->B, x->cx.S_local, x->cx.S, H, Hkv, D);
}

void zt_context_attention_bwd(zt_context_kv *x, const zt_ops *ops, int layer, float *dq, float *dk, float *dv,
                              const float *datt, const float *att, const float *stats, const float *q,
                              const float *k, const float *v, const int32_t *pos, int64_t H, int64_t Hkv, int64_t D) {
    const int64_t B = x->B, Sb = x->cx.S, kvs = x->kvs, n = B * x->cx.S_local * kvs;
    gather_kv(x, layer, k, v, "backward");
    // what this rank's queries give every key of the block, dK and dV, into the front of kv_all
    // (free until the scatter; C * 2 N kvs >= 2 B Sb kvs as C * S_local >= Sb), then copied into k, v
    // (K and V are no longer needed) so that kv_all takes them rank-major
    float *dk_all = x->kv_all, *dv_all = x->kv_all + B * Sb * kvs;
    ops->attention_bwd_rows(dq, dk_all, dv_all, datt, att, stats, q, x->k, x->v, pos, my_rows(x), B, x->cx.S_local,
                            Sb, H, Hkv, D);
    memcpy(x->k, dk_all, (size_t)(B * Sb * kvs) * sizeof(float));
    memcpy(x->v, dv_all, (size_t)(B * Sb * kvs) * sizeof(float));
    for (int r = 0; r < x->cx.C; r++) {
        zt_context_from_block(&x->cx, r, B, x->k, x->kv_all + (int64_t)r * 2 * n, kvs);
        zt_context_from_block(&x->cx, r, B, x->v, x->kv_all + (int64_t)r * 2 * n + n, kvs);
    }
    char what[64];
    snprintf(what, sizeof what, "layer %d dK/dV context reduce-scatter", layer);
    x->cx.scatter(x->cx.ctx, x->kv_all, x->kv_mine, 2 * n, what);
    memcpy(dk, x->kv_mine, (size_t)n * sizeof(float));
    memcpy(dv, x->kv_mine + n, (size_t)n * sizeof(float));
}
