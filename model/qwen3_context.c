// Qwen3's attention under context parallelism (model/family.h zt_family_context): this rank
// holds S_local tokens of each block (two chunks: an early and a late one), the group's K and V
// are all-gathered after RoPE into the whole block's rows, and the op table's attention over a
// subset of queries (attention_fwd_rows) runs this rank's held queries against the whole block's
// keys: a held query at block row g with position p sees keys g - p .. g (plain causal: p = g; a
// packed document: its own earlier tokens, wherever they are held), so the held rows' values are
// those of the unsplit block. Backward re-gathers K/V (nothing of the whole block is kept between
// passes), runs the op's backward for the held queries (dK, dV of every key of the block), and
// hands each rank the dK/dV of its own keys by reduce-scatter. Nothing of block size but K and V.
// defines: zt_qwen3_cx_alloc, zt_qwen3_cx_free, zt_qwen3_cx_attention_fwd, zt_qwen3_cx_attention_bwd
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/qwen3.h"

void zt_qwen3_cx_alloc(zt_qwen3 *m, float *(*alloc)(zt_qwen3 *m, int64_t n)) {
    const zt_model_config *c = &m->lay.cfg;
    const int64_t B = m->B, Sb = m->S_block, N = m->N, C = m->cx.C;
    const int64_t kvs = (int64_t)c->num_kv_heads * c->head_dim;
    m->cp_index = zt_xmalloc((size_t)(C * m->S) * sizeof(int32_t));
    memcpy(m->cp_index, m->cx.index, (size_t)(C * m->S) * sizeof(int32_t));
    m->cx.index = m->cp_index;
    m->cp_kv_mine = alloc(m, 2 * N * kvs);
    m->cp_kv_all = alloc(m, C * 2 * N * kvs);
    m->cp_k = alloc(m, B * Sb * kvs);
    m->cp_v = alloc(m, B * Sb * kvs);
}

void zt_qwen3_cx_free(zt_qwen3 *m) {
    if (!m->cp) return;
    float *bufs[] = {m->cp_kv_mine, m->cp_kv_all, m->cp_k, m->cp_v};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(m->cp_index);
}

// This rank's held tokens' block rows (-1: padding), the query map of attention_fwd_rows.
static const int32_t *my_rows(const zt_qwen3 *m) { return m->cp_index + (int64_t)m->cx.rank * m->S; }

// rows [n_rows, w] of this rank (src, held-token order) <-> the whole block's rows (dst, block order)
static void to_block(const zt_qwen3 *m, int r, const float *src, float *dst, int64_t w) {
    const int64_t S = m->S, Sb = m->S_block;
    for (int64_t b = 0; b < m->B; b++)
        for (int64_t t = 0; t < S; t++) {
            const int64_t g = m->cp_index[(int64_t)r * S + t];
            if (g >= 0) memcpy(dst + (b * Sb + g) * w, src + (b * S + t) * w, (size_t)w * sizeof(float));
        }
}
static void from_block(const zt_qwen3 *m, int r, const float *src, float *dst, int64_t w) {
    const int64_t S = m->S, Sb = m->S_block;
    for (int64_t b = 0; b < m->B; b++)
        for (int64_t t = 0; t < S; t++) {
            const int64_t g = m->cp_index[(int64_t)r * S + t];
            if (g >= 0)
                memcpy(dst + (b * S + t) * w, src + (b * Sb + g) * w, (size_t)w * sizeof(float));
            else
                memset(dst + (b * S + t) * w, 0, (size_t)w * sizeof(float));
        }
}

// The whole block's K and V (after RoPE) into cp_k, cp_v: one all-gather of every rank's K|V.
static void gather_kv(zt_qwen3 *m, int layer, const float *k, const float *v, const char *pass) {
    const int64_t kvs = (int64_t)m->lay.cfg.num_kv_heads * m->lay.cfg.head_dim, n = m->N * kvs;
    memcpy(m->cp_kv_mine, k, (size_t)n * sizeof(float));
    memcpy(m->cp_kv_mine + n, v, (size_t)n * sizeof(float));
    char what[64];
    snprintf(what, sizeof what, "layer %d K/V context all-gather (%s)", layer, pass);
    m->cx.gather(m->cx.ctx, m->cp_kv_mine, m->cp_kv_all, 2 * n, what);
    for (int r = 0; r < m->cx.C; r++) {
        to_block(m, r, m->cp_kv_all + (int64_t)r * 2 * n, m->cp_k, kvs);
        to_block(m, r, m->cp_kv_all + (int64_t)r * 2 * n + n, m->cp_v, kvs);
    }
}

void zt_qwen3_cx_attention_fwd(zt_qwen3 *m, int layer, zt_layer_acts *a) {
    const zt_model_config *c = &m->lay.cfg;
    const int64_t B = m->B, S = m->S, Sb = m->S_block, H = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim;
    gather_kv(m, layer, a->k, a->v, "forward");
    m->ops->attention_fwd_rows(a->att, a->att_stats, a->q, m->cp_k, m->cp_v, m->pos, my_rows(m), B, S, Sb, H, Hkv, D);
}

void zt_qwen3_cx_attention_bwd(zt_qwen3 *m, int layer, zt_layer_acts *a) {
    const zt_model_config *c = &m->lay.cfg;
    const int64_t B = m->B, S = m->S, Sb = m->S_block, H = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim;
    const int64_t kvs = Hkv * D, n = m->N * kvs;
    gather_kv(m, layer, a->k, a->v, "backward");
    // what this rank's queries give every key of the block, dK and dV, into the front of cp_kv_all
    // (free until the scatter; C * 2 N kvs >= 2 B Sb kvs as C * S >= Sb), then copied into cp_k, cp_v
    // (K and V are no longer needed) so that cp_kv_all takes them rank-major
    float *dk = m->cp_kv_all, *dv = m->cp_kv_all + B * Sb * kvs;
    m->ops->attention_bwd_rows(m->w_dq, dk, dv, m->w_datt, a->att, a->att_stats, a->q, m->cp_k, m->cp_v, m->pos,
                               my_rows(m), B, S, Sb, H, Hkv, D);
    // each rank's rows of dK|dV, rank-major, then summed over the group into this rank's own
    memcpy(m->cp_k, dk, (size_t)(B * Sb * kvs) * sizeof(float));
    memcpy(m->cp_v, dv, (size_t)(B * Sb * kvs) * sizeof(float));
    for (int r = 0; r < m->cx.C; r++) {
        from_block(m, r, m->cp_k, m->cp_kv_all + (int64_t)r * 2 * n, kvs);
        from_block(m, r, m->cp_v, m->cp_kv_all + (int64_t)r * 2 * n + n, kvs);
    }
    char what[64];
    snprintf(what, sizeof what, "layer %d dK/dV context reduce-scatter", layer);
    m->cx.scatter(m->cx.ctx, m->cp_kv_all, m->cp_kv_mine, 2 * n, what);
    memcpy(m->w_dk, m->cp_kv_mine, (size_t)n * sizeof(float));
    memcpy(m->w_dv, m->cp_kv_mine + n, (size_t)n * sizeof(float));
}
