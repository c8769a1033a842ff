// Causal grouped-query attention, the reference (optionally document-causal: with pos[], a
// query sees only its own document's earlier tokens), flash-style in square blocks of
// ZT_ATT_BLOCK query rows by ZT_ATT_BLOCK keys: only key blocks some row of a query block may
// see are computed (none above the diagonal, none before the block's first document start),
// and nothing of size S x S exists. Forward keeps each query's running max and sum over the key
// blocks in order (its output rescaled when the max grows) and saves the final max and 1/sum
// (att_stats); backward recomputes each block's probabilities from them and takes
// rowsum(P * dP) as dO . O. Forward works on transposed scores (keys x queries: P V then packs
// without a transpose), backward on scores (queries x keys: P^T dO and dS^T Q do). K, V (and
// forward's Q block) are packed once for the sgemm kernel and reused by every block product
// (cpu_sgemm_packed). Products are the sgemm's, the elementwise passes attention_rows.c's: both
// give the same bits with every sgemm kernel, and every sum runs in an order fixed by the block
// grid, so the results depend neither on the instruction set nor on the thread count. Query
// head h reads KV head h / (H / Hkv) in place.
//
// The _rows variants take a subset of a block's queries (context parallelism: the tokens a rank
// holds against the whole block's keys, without block-sized query buffers): query row r of Sq
// sits at block position qmap[r] (-1: padding, taken as position 0 seeing key 0 only), its
// document position is pos[b * Sq + r]; query blocks are runs of ZT_ATT_BLOCK local rows, each
// computing the key blocks some row of it may see (below its largest block position, from its
// smallest first key). Without a map (the plain entry points) a row's block position is its
// index, and everything is as before, bit for bit.
// defines: cpu_attention_fwd, cpu_attention_bwd, cpu_attention_fwd_rows, cpu_attention_bwd_rows
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "base/common.h"

// Rows and keys per block: a multiple of every kernel's tile (12 x 32, 6 x 16, 4 x 8), so the
// products run whole tiles, and the block's scores (36 KiB) stay in L1/L2; 96 ran 6-10% faster
// than 64, 128 or 192 at S = 4096. Each thread runs its own products.
#define ZT_ATT_BLOCK 96

typedef struct {
    const float *q, *k, *v;
    const int32_t *pos;
    int64_t S, D, group, qs, kvs;  // qs, kvs: floats from one token's q (k, v) row to the next
    float scale;
    const cpu_att_row_ops *rows;
    const int32_t *qmap;  // NULL: query row i is block position i (Sq = S)
    int64_t Sq;           // query rows per batch row
} att_args;

// Query row i's block position.
static inline int64_t qpos(const att_args *a, int64_t i) { return a->qmap ? (a->qmap[i] < 0 ? 0 : a->qmap[i]) : i; }

// The first key query row i of batch row b may see: 0, or its document's first token.
static inline int64_t first_key(const att_args *a, int64_t b, int64_t i) {
    if (a->qmap && a->qmap[i] < 0) return 0;
    return a->pos ? qpos(a, i) - a->pos[b * a->Sq + i] : 0;
}

// The first key any query of rows [i0, i1) may see.
static int64_t block_first_key(const att_args *a, int64_t b, int64_t i0, int64_t i1) {
    int64_t lo = qpos(a, i0);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t f = first_key(a, b, i);
        lo = f < lo ? f : lo;
    }
    return lo;
}

// The largest block position of rows [i0, i1) (the last key any of them may see).
static int64_t block_last_pos(const att_args *a, int64_t i0, int64_t i1) {
    if (!a->qmap) return i1 - 1;
    int64_t hi = 0;
    for (int64_t i = i0; i < i1; i++) hi = qpos(a, i) > hi ? qpos(a, i) : hi;
    return hi;
}

// Row i's visible keys in the key block [j0, j1), as columns [*c0, *c1) of the block.
static inline void row_band(const att_args *a, int64_t b, int64_t i, int64_t j0, int64_t j1, int64_t *c0, int64_t *c1) {
    const int64_t g = qpos(a, i), lo = first_key(a, b, i), hi = g + 1 < j1 ? g + 1 : j1;
    *c0 = (lo < j0 ? j0 : lo < j1 ? lo : j1) - j0;
    *c1 = hi - j0 > *c0 ? hi - j0 : *c0;
}

static inline void zero_outside(float *row, int64_t c0, int64_t c1, int64_t n) {
    if (c0 > 0) memset(row, 0, (size_t)c0 * sizeof(float));
    if (c1 < n) memset(row + c1, 0, (size_t)(n - c1) * sizeof(float));
}

// Key block [j0, j1) seen from query rows [i0, i0 + m): -inf where a query may not see a key,
// in the transposed scores st[j - j0][i - i0] (ld m). Nothing to do for a block wholly visible.
static void mask_block_t(const att_args *a, float *st, int64_t b, int64_t i0, int64_t m, int64_t j0, int64_t j1) {
    for (int64_t r = 0; r < m; r++) {
        int64_t c0, c1;
        row_band(a, b, i0 + r, j0, j1, &c0, &c1);
        for (int64_t c = 0; c < c0; c++) st[c * m + r] = -INFINITY;
        for (int64_t c = c1; c < j1 - j0; c++) st[c * m + r] = -INFINITY;
    }
}

// K and V of every (batch, KV head) cut into key blocks, each packed for the sgemm kernel once:
// K block as A (forward's S^T = K Q^T), V block as B (O += P V).
typedef struct {
    float *k, *v;
    int64_t ka, vb, nkb;  // floats per packed K block and V block, key blocks per (batch, KV head)
} att_packed_kv;

static void pack_kv(const att_args *a, att_packed_kv *p, int64_t b, int64_t kh, int64_t x) {
    const int64_t j0 = x * ZT_ATT_BLOCK, n = a->S - j0 < ZT_ATT_BLOCK ? a->S - j0 : ZT_ATT_BLOCK, D = a->D;
    const int64_t at = (b * (a->kvs / D) + kh) * p->nkb + x, row = (b * a->S + j0) * a->kvs + kh * D;
    cpu_sgemm_pack_a(p->k + at * p->ka, 0, a->k + row, a->kvs, n, D);
    cpu_sgemm_pack_b(p->v + at * p->vb, 0, a->v + row, a->kvs, n, D);
}

// Query rows [i0, i1) of head h, batch b. Per key block: S^T = K Q^T / sqrt(D); per query the
// softmax step (attention_rows.c: running max and sum, alpha = exp(old max - new max)); the
// output's row times alpha; O += P V (P^T read in place). At the end O /= sum; stats = (max, 1/sum).
static void fwd_block(const att_args *a, const att_packed_kv *p, float *buf, float *o, float *stats, int64_t b,
                      int64_t h, int64_t i0, int64_t i1) {
    const int64_t Sq = a->Sq, D = a->D, qs = a->qs, m = i1 - i0;
    const float *pk = p->k + (b * (a->kvs / D) + h / a->group) * p->nkb * p->ka;
    const float *pv = p->v + (b * (a->kvs / D) + h / a->group) * p->nkb * p->vb;
    float *st = buf, *pq = st + ZT_ATT_BLOCK * ZT_ATT_BLOCK + 32, *mx = pq + cpu_sgemm_packed_floats('B', ZT_ATT_BLOCK, D);
    float *sum = mx + ZT_ATT_BLOCK, *alpha = sum + ZT_ATT_BLOCK;
    float *O = o + (b * Sq + i0) * qs + h * D;
    cpu_sgemm_pack_b(pq, 1, a->q + (b * Sq + i0) * qs + h * D, qs, D, m);  // Q^T
    // the queries' first keys (smallest and largest), block positions (smallest) and the key end
    int64_t first = qpos(a, i0), last = 0, low = qpos(a, i0);
    const int64_t end = block_last_pos(a, i0, i1) + 1;
    for (int64_t r = 0; r < m; r++) {
        const int64_t f = first_key(a, b, i0 + r), g = qpos(a, i0 + r);
        first = f < first ? f : first;
        last = f > last ? f : last;
        low = g < low ? g : low;
        mx[r] = -INFINITY;
        sum[r] = 0.0f;
        memset(O + r * qs, 0, (size_t)D * sizeof(float));
    }
    for (int64_t j0 = first / ZT_ATT_BLOCK * ZT_ATT_BLOCK; j0 < end; j0 += ZT_ATT_BLOCK) {
        // the whole packed key block (the V panels' stride is its length), keys past `end` masked: a block
        // cut at `end` read every V column panel but the first at the wrong offset (D > NR, held rows)
        const int64_t j1 = j0 + ZT_ATT_BLOCK < a->S ? j0 + ZT_ATT_BLOCK : a->S, n = j1 - j0, x = j0 / ZT_ATT_BLOCK;
        cpu_sgemm_packed(n, m, D, a->scale, pk + x * p->ka, pq, 0.0f, st, m);
        if (j1 > low + 1 || last > j0) mask_block_t(a, st, b, i0, m, j0, j1);
        a->rows->col_step(st, n, m, m, mx, sum, alpha);
        for (int64_t r = 0; r < m; r++)
            if (alpha[r] != 1.0f)
                for (int64_t d = 0; d < D; d++) O[r * qs + d] *= alpha[r];
        cpu_sgemm_packed_at(m, D, n, 1.0f, st, m, pv + x * p->vb, 1.0f, O, qs);
    }
    float *stq = stats + (b * (qs / D) + h) * Sq * 2;
    for (int64_t r = 0; r < m; r++) {
        const float inv = 1.0f / sum[r];
        for (int64_t d = 0; d < D; d++) O[r * qs + d] *= inv;
        stq[2 * (i0 + r)] = mx[r];
        stq[2 * (i0 + r) + 1] = inv;
    }
}

// stats[B, H, Sq, 2]: per query row its softmax max and 1/sum.
static void attention_fwd(const att_args *ap, float *o, float *stats, int64_t B, int64_t H, int64_t Hkv) {
    const att_args a = *ap;
    const int64_t S = a.S, Sq = a.Sq, D = a.D;
    const int64_t nkb = (S + ZT_ATT_BLOCK - 1) / ZT_ATT_BLOCK, nqb = (Sq + ZT_ATT_BLOCK - 1) / ZT_ATT_BLOCK;
    att_packed_kv p = {NULL, NULL, cpu_sgemm_packed_floats('A', ZT_ATT_BLOCK, D),
                       cpu_sgemm_packed_floats('B', D, ZT_ATT_BLOCK), nkb};
    p.k = zt_xmalloc((size_t)(B * Hkv * nkb * (p.ka + p.vb)) * sizeof(float));
    p.v = p.k + B * Hkv * nkb * p.ka;
#pragma omp parallel
    {
#pragma omp for collapse(3) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t kh = 0; kh < Hkv; kh++)
                for (int64_t x = 0; x < nkb; x++) pack_kv(&a, &p, b, kh, x);
        // scores (with room for the in-place read of P^T), Q^T packed, max, sum, alpha
        float *buf = zt_xmalloc((size_t)(ZT_ATT_BLOCK * ZT_ATT_BLOCK + 32 + cpu_sgemm_packed_floats('B', ZT_ATT_BLOCK, D) +
                                         3 * ZT_ATT_BLOCK) * sizeof(float));
        // the longest query blocks (the most key blocks) first; each block is one thread's
#pragma omp for collapse(3) schedule(dynamic)
        for (int64_t x = 0; x < nqb; x++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++) {
                    const int64_t i0 = (nqb - 1 - x) * ZT_ATT_BLOCK, i1 = i0 + ZT_ATT_BLOCK < Sq ? i0 + ZT_ATT_BLOCK : Sq;
                    fwd_block(&a, &p, buf, o, stats, b, h, i0, i1);
                }
        free(buf);
    }
    free(p.k);
}

void cpu_attention_fwd(float *o, float *stats, const float *q, const float *k, const float *v, const int32_t *pos,
                       int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const att_args a = {q, k, v, pos, S, D, H / Hkv, H * D, Hkv * D, 1.0f / sqrtf((float)D), cpu_att_rows(), NULL, S};
    attention_fwd(&a, o, stats, B, H, Hkv);
}

void cpu_attention_fwd_rows(float *o, float *stats, const float *q, const float *k, const float *v, const int32_t *pos,
                            const int32_t *qmap, int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const att_args a = {q, k, v, pos, S, D, H / Hkv, H * D, Hkv * D, 1.0f / sqrtf((float)D), cpu_att_rows(), qmap, Sq};
    attention_fwd(&a, o, stats, B, H, Hkv);
}

typedef struct {
    float *dq, *dk, *dv;
    const float *dout, *o, *stats;
} att_grads;

// One thread's buffers for bwd_kv: the block's P and dS (with room for the in-place reads of
// P^T and dS^T), dS packed as A; the KV head's K^T and V^T packed as B (columns j0.. at + j0 * D),
// its K blocks as B; the current head's Q and dO blocks as A and as B; di per row of the group.
typedef struct {
    float *P, *dS, *pds, *kt, *vt, *kb, *qa, *oa, *qb, *ob, *di;
    int64_t na, nb;  // floats per packed block as A, as B
} att_bwd_buf;

static att_bwd_buf bwd_buf_alloc(const att_args *a) {
    const int64_t S = a->S, D = a->D, nkb = (S + ZT_ATT_BLOCK - 1) / ZT_ATT_BLOCK, sq = ZT_ATT_BLOCK * ZT_ATT_BLOCK + 32;
    const int64_t nqb = (a->Sq + ZT_ATT_BLOCK - 1) / ZT_ATT_BLOCK;
    att_bwd_buf w = {0};
    w.na = cpu_sgemm_packed_floats('A', ZT_ATT_BLOCK, D);
    w.nb = cpu_sgemm_packed_floats('B', D, ZT_ATT_BLOCK);
    const int64_t nt = cpu_sgemm_packed_floats('B', S, D), npa = cpu_sgemm_packed_floats('A', ZT_ATT_BLOCK, ZT_ATT_BLOCK);
    w.P = zt_xmalloc((size_t)(2 * sq + npa + 2 * nt + nkb * w.nb + nqb * (2 * w.na + 2 * w.nb) + a->group * a->Sq) *
                     sizeof(float));
    w.dS = w.P + sq, w.pds = w.dS + sq, w.kt = w.pds + npa, w.vt = w.kt + nt, w.kb = w.vt + nt;
    w.qa = w.kb + nkb * w.nb, w.oa = w.qa + nqb * w.na, w.qb = w.oa + nqb * w.na, w.ob = w.qb + nqb * w.nb;
    w.di = w.ob + nqb * w.nb;
    return w;
}

// Backward of KV head kh of batch b (the group's query heads all add into its dK, dV rows, so
// they stay on one thread): for each query head of the group, each key block, each query
// block that sees the key block, in that order:
//   P = exp(S - mx) * inv;  dP = dO V^T;  dS = P * (dP - dO . O) / sqrt(D);
//   dV += P^T dO;  dK += dS^T Q;  dQ += dS K
static void bwd_kv(const att_args *a, const att_grads *g, const att_bwd_buf *w, int64_t b, int64_t kh) {
    const int64_t S = a->S, Sq = a->Sq, D = a->D, qs = a->qs, kvs = a->kvs, H = qs / D;
    const int64_t nblk = (S + ZT_ATT_BLOCK - 1) / ZT_ATT_BLOCK, nqb = (Sq + ZT_ATT_BLOCK - 1) / ZT_ATT_BLOCK;
    const float *K = a->k + b * S * kvs + kh * D, *V = a->v + b * S * kvs + kh * D;
    float *dK = g->dk + b * S * kvs + kh * D, *dV = g->dv + b * S * kvs + kh * D;
    cpu_sgemm_pack_b(w->kt, 1, K, kvs, D, S);
    cpu_sgemm_pack_b(w->vt, 1, V, kvs, D, S);
    for (int64_t x = 0; x < nblk; x++) {
        const int64_t j0 = x * ZT_ATT_BLOCK, n = S - j0 < ZT_ATT_BLOCK ? S - j0 : ZT_ATT_BLOCK;
        cpu_sgemm_pack_b(w->kb + x * w->nb, 0, K + j0 * kvs, kvs, n, D);
    }
    for (int64_t j = 0; j < S; j++) {
        memset(dK + j * kvs, 0, (size_t)D * sizeof(float));
        memset(dV + j * kvs, 0, (size_t)D * sizeof(float));
    }
    for (int64_t x = 0; x < a->group; x++) {
        const int64_t h = kh * a->group + x;
        const float *Q = a->q + b * Sq * qs + h * D, *dO = g->dout + b * Sq * qs + h * D;
        const float *st = g->stats + (b * H + h) * Sq * 2;
        float *dQ = g->dq + b * Sq * qs + h * D, *di = w->di;
        for (int64_t i = 0; i < Sq; i++) {  // di = rowsum(P * dP) = dO . O
            const float *O = g->o + (b * Sq + i) * qs + h * D;
            double acc = 0;
            for (int64_t d = 0; d < D; d++) acc += (double)dO[i * qs + d] * O[d];
            di[i] = (float)acc;
            memset(dQ + i * qs, 0, (size_t)D * sizeof(float));
        }
        for (int64_t y = 0; y < nqb; y++) {
            const int64_t i0 = y * ZT_ATT_BLOCK, m = Sq - i0 < ZT_ATT_BLOCK ? Sq - i0 : ZT_ATT_BLOCK;
            cpu_sgemm_pack_a(w->qa + y * w->na, 0, Q + i0 * qs, qs, m, D);
            cpu_sgemm_pack_a(w->oa + y * w->na, 0, dO + i0 * qs, qs, m, D);
            cpu_sgemm_pack_b(w->qb + y * w->nb, 0, Q + i0 * qs, qs, m, D);
            cpu_sgemm_pack_b(w->ob + y * w->nb, 0, dO + i0 * qs, qs, m, D);
        }
        for (int64_t j0 = 0; j0 < S; j0 += ZT_ATT_BLOCK) {
            const int64_t j1 = j0 + ZT_ATT_BLOCK < S ? j0 + ZT_ATT_BLOCK : S, n = j1 - j0;
            // without a map the query grid is the key grid: the blocks from j0's on
            for (int64_t i0 = a->qmap ? 0 : j0; i0 < Sq; i0 += ZT_ATT_BLOCK) {
                const int64_t i1 = i0 + ZT_ATT_BLOCK < Sq ? i0 + ZT_ATT_BLOCK : Sq, m = i1 - i0, y = i0 / ZT_ATT_BLOCK;
                if (block_first_key(a, b, i0, i1) >= j1 || block_last_pos(a, i0, i1) < j0) continue;
                cpu_sgemm_packed(m, n, D, a->scale, w->qa + y * w->na, w->kt + j0 * D, 0.0f, w->P, n);  // = forward's S^T
                cpu_sgemm_packed(m, n, D, 1.0f, w->oa + y * w->na, w->vt + j0 * D, 0.0f, w->dS, n);     // dP
                for (int64_t r = 0; r < m; r++) {
                    const int64_t i = i0 + r;
                    float *p = w->P + r * n, *ds = w->dS + r * n;
                    int64_t c0, c1;
                    row_band(a, b, i, j0, j1, &c0, &c1);
                    if (c1 > c0) a->rows->grad(p + c0, ds + c0, c1 - c0, st[2 * i], st[2 * i + 1], di[i], a->scale);
                    zero_outside(p, c0, c1, n);
                    zero_outside(ds, c0, c1, n);
                }
                cpu_sgemm_packed_at(n, D, m, 1.0f, w->P, n, w->ob + y * w->nb, 1.0f, dV + j0 * kvs, kvs);
                cpu_sgemm_packed_at(n, D, m, 1.0f, w->dS, n, w->qb + y * w->nb, 1.0f, dK + j0 * kvs, kvs);
                cpu_sgemm_pack_a(w->pds, 0, w->dS, n, m, n);
                cpu_sgemm_packed(m, D, n, 1.0f, w->pds, w->kb + j0 / ZT_ATT_BLOCK * w->nb, 1.0f, dQ + i0 * qs, qs);
            }
        }
    }
}

static void attention_bwd(const att_args *ap, const att_grads *gp, int64_t B, int64_t Hkv) {
    const att_args a = *ap;
    const att_grads g = *gp;
#pragma omp parallel
    {
        const att_bwd_buf w = bwd_buf_alloc(&a);
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t kh = 0; kh < Hkv; kh++) bwd_kv(&a, &g, &w, b, kh);
        free(w.P);
    }
}

void cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *o, const float *stats,
                       const float *q, const float *k, const float *v, const int32_t *pos, int64_t B, int64_t S,
                       int64_t H, int64_t Hkv, int64_t D) {
    const att_args a = {q, k, v, pos, S, D, H / Hkv, H * D, Hkv * D, 1.0f / sqrtf((float)D), cpu_att_rows(), NULL, S};
    const att_grads g = {dq, dk, dv, dout, o, stats};
    attention_bwd(&a, &g, B, Hkv);
}

void cpu_attention_bwd_rows(float *dq, float *dk, float *dv, const float *dout, const float *o, const float *stats,
                            const float *q, const float *k, const float *v, const int32_t *pos, const int32_t *qmap,
                            int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const att_args a = {q, k, v, pos, S, D, H / Hkv, H * D, Hkv * D, 1.0f / sqrtf((float)D), cpu_att_rows(), qmap, Sq};
    const att_grads g = {dq, dk, dv, dout, o, stats};
    attention_bwd(&a, &g, B, Hkv);
}
