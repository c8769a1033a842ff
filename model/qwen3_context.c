// Qwen3's attention under context parallelism (model/family.h zt_family_context): this rank
// holds S_local tokens of each block (two chunks: an early and a late one), the group's K and V
// are all-gathered after RoPE into the whole block's rows, the held queries are placed at their
// block rows of a zeroed query buffer, and the op table's attention runs over the whole block:
// a held query at block row g with position p sees keys g - p .. g (plain causal: p = g; a
// packed document: its own earlier tokens, wherever they are held). Every other row of the
// buffer has position 0 (it sees only its own key, with a zero query: no NaN, no gradient), so
// the held rows' values are those of the unsplit block. Backward re-gathers K/V (nothing of
// the whole block is kept between passes), runs the op's backward over the whole block, and
// hands each rank the dK/dV of its own keys by reduce-scatter. The op's equal-length Q and K
// cost a [B * S_block, H * D] query buffer here; a kernel taking query offsets would not.
// defines: zt_qwen3_cx_alloc, zt_qwen3_cx_free, zt_qwen3_cx_set_batch, zt_qwen3_cx_attention_fwd,
//          zt_qwen3_cx_attention_bwd
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/qwen3.h"

void zt_qwen3_cx_alloc(zt_qwen3 *m, float *(*alloc)(zt_qwen3 *m, int64_t n)) {
    const zt_model_config *c = &m->lay.cfg;
    const int64_t B = m->B, Sb = m->S_block, N = m->N, C = m->cx.C;
    const int64_t qs = (int64_t)c->num_heads * c->head_dim, kvs = (int64_t)c->num_kv_heads * c->head_dim;
    m->cp_index = zt_xmalloc((size_t)(C * m->S) * sizeof(int32_t));
    memcpy(m->cp_index, m->cx.index, (size_t)(C * m->S) * sizeof(int32_t));
    m->cx.index = m->cp_index;
    m->cp_pos = zt_xcalloc((size_t)(B * Sb), sizeof(int32_t));
    m->cp_kv_mine = alloc(m, 2 * N * kvs);
    m->cp_kv_all = alloc(m, C * 2 * N * kvs);
    m->cp_k = alloc(m, B * Sb * kvs);
    m->cp_v = alloc(m, B * Sb * kvs);
    m->cp_q = alloc(m, B * Sb * qs);
    m->cp_o = alloc(m, B * Sb * qs);
    m->cp_do = alloc(m, B * Sb * qs);
    m->cp_dq = alloc(m, B * Sb * qs);
    m->cp_stats = alloc(m, B * c->num_heads * Sb * 2);
}

void zt_qwen3_cx_free(zt_qwen3 *m) {
    if (!m->cp) return;
    float *bufs[] = {m->cp_kv_mine, m->cp_kv_all, m->cp_k, m->cp_v, m->cp_q, m->cp_o, m->cp_do, m->cp_dq, m->cp_stats};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(m->cp_index);
    free(m->cp_pos);
}

// The block row of this rank's token t (-1: padding).
static int64_t my_row(const zt_qwen3 *m, int64_t t) { return m->cp_index[(int64_t)m->cx.rank * m->S + t]; }

void zt_qwen3_cx_set_batch(zt_qwen3 *m) {
    const int64_t S = m->S, Sb = m->S_block;
    memset(m->cp_pos, 0, (size_t)(m->B * Sb) * sizeof(int32_t));
    for (int64_t b = 0; b < m->B; b++)
        for (int64_t t = 0; t < S; t++) {
            const int64_t g = my_row(m, t);
            if (g >= 0) m->cp_pos[b * Sb + g] = m->pos[b * S + t];
        }
}

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
    to_block(m, m->cx.rank, a->q, m->cp_q, H * D);  // the other rows stay zero
    m->ops->attention_fwd(m->cp_o, m->cp_stats, m->cp_q, m->cp_k, m->cp_v, m->cp_pos, B, Sb, H, Hkv, D);
    from_block(m, m->cx.rank, m->cp_o, a->att, H * D);
    for (int64_t bh = 0; bh < B * H; bh++)  // each held row's max and 1/sum, for the backward
        for (int64_t t = 0; t < S; t++) {
            const int64_t g = my_row(m, t);
            float *st = a->att_stats + (bh * S + t) * 2;
            st[0] = g >= 0 ? m->cp_stats[(bh * Sb + g) * 2] : 0.0f;
            st[1] = g >= 0 ? m->cp_stats[(bh * Sb + g) * 2 + 1] : 1.0f;
        }
}

void zt_qwen3_cx_attention_bwd(zt_qwen3 *m, int layer, zt_layer_acts *a) {
    const zt_model_config *c = &m->lay.cfg;
    const int64_t B = m->B, S = m->S, Sb = m->S_block, H = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim;
    const int64_t kvs = Hkv * D, n = m->N * kvs;
    gather_kv(m, layer, a->k, a->v, "backward");
    to_block(m, m->cx.rank, a->q, m->cp_q, H * D);
    to_block(m, m->cx.rank, m->w_datt, m->cp_do, H * D);  // the other rows stay zero: no gradient from them
    for (int64_t i = 0; i < B * H * Sb; i++) m->cp_stats[2 * i] = 0.0f, m->cp_stats[2 * i + 1] = 1.0f;
    for (int64_t bh = 0; bh < B * H; bh++)
        for (int64_t t = 0; t < S; t++) {
            const int64_t g = my_row(m, t);
            if (g >= 0) memcpy(m->cp_stats + (bh * Sb + g) * 2, a->att_stats + (bh * S + t) * 2, 2 * sizeof(float));
        }
    // dQ into cp_dq; what this rank's queries give every key of the block, dK and dV, into the front
    // of cp_kv_all (free until the scatter; C * 2 N kvs >= 2 B Sb kvs as C * S >= Sb), then copied
    // into cp_k, cp_v (K and V are no longer needed) so that cp_kv_all takes them rank-major
    float *dk = m->cp_kv_all, *dv = m->cp_kv_all + B * Sb * kvs;
    // the forward's output at the held rows (cp_o: the other rows' values are never read where dO is 0,
    // as every row's dO . O is); dQ into cp_dq
    to_block(m, m->cx.rank, a->att, m->cp_o, H * D);
    m->ops->attention_bwd(m->cp_dq, dk, dv, m->cp_do, m->cp_o, m->cp_stats, m->cp_q, m->cp_k, m->cp_v, m->cp_pos, B,
                          Sb, H, Hkv, D);
    from_block(m, m->cx.rank, m->cp_dq, m->w_dq, H * D);
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
