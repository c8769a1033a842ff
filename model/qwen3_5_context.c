// Qwen3.5's Gated DeltaNet under context parallelism by head sharding (model/qwen3_5_context.h,
// docs/design.md "Context parallelism for Qwen3.5"). Each rank projects its held tokens (qkv, b, a)
// as without the split; the group all-gathers them into the whole block's rows; each rank runs the
// causal conv1d, the l2 norms and the gated delta rule over the whole block for its own value heads
// [v0, v0 + nv) (the key heads they read, v / (Hv / Hk), copied per value head so a key head may be
// shared by two ranks) with the same kernels as the unsplit run, so every head's values are those of
// the unsplit run; the head-sliced outputs (zeros in the other heads' slots) are reduce-scattered back
// to each rank's tokens before the gated norm. The backward mirrors it: the gated norm's dcore is
// all-gathered, each rank runs the delta rule's and conv's backward for its heads, and the conv
// input's, b's and a's gradients (each rank's channels, shared key channels summed) are
// reduce-scattered back. The documents' starts (positions) are gathered once per micro-batch, so
// the conv window and the state restart at each document start exactly as without the split.
// Parameters: the conv rows, A_log and dt_bias of this rank's heads get this rank's whole-block
// gradient (the others' zero), summed over the group as every parameter gradient is.
// defines: zt_q35_cx_create, zt_q35_cx_bytes, zt_q35_cx_free, zt_q35_cx_kv, zt_q35_cx_heads,
//          zt_q35_cx_set_batch, zt_q35_cx_mix_fwd, zt_q35_cx_mix_bwd
#include "model/qwen3_5_context.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/qwen3_5.h"

typedef struct {  // what one linear layer keeps from its forward to its backward (whole block, my heads)
    float *xs, *pre;             // [Nb, Cs] the conv's inputs and pre-activation in my channels
    float *lq, *lk, *lq_n, *lk_n;  // [Nb, nk, Dk] q, k of my key heads before and after the l2 norm
    float *lq_r, *lk_r;          // [Nb, nk] their 1/norm
    float *lv;                   // [Nb, nv, Dv]
    float *araw, *beta, *g;      // [Nb, nv] in_proj_a's output, beta, the decay
    float *saved;                // the delta rule's states at chunk starts (zt_delta_saved_floats)
} lin_keep;

struct zt_q35_cx {
    zt_family_context cx;   // index: kv.index or own_index (copied)
    int32_t *own_index;
    zt_context_kv kv;
    int has_kv;
    const zt_ops *ops;
    int64_t B, Sb, Nl, Nb;  // rows; block tokens; held tokens; block tokens of the micro-batch
    int64_t Hk, Hv, Dk, Dv, K, Kd, Vd, Cch, Wg, grp;
    int64_t v0, nv, k0, nk, Cs;  // my value heads, the key heads they read, my channels
    int64_t *ch;                 // [Cs] each of my channels' place among the Cch: q | k of my key heads, v of mine
    int L;
    lin_keep *lin;               // [L] (zeros for full-attention layers)
    int pos_ready;
    float *pos_mine, *pos_all, *pos_blockf;  // the held tokens' positions (as floats), the group's, the block's
    int32_t *pos_block;                      // [Nb]
    float *in_mine, *in_all, *in_block;      // [Nl, Wg], [C, Nl, Wg], [Nb, Wg]: qkv | b | a (and their gradients)
    float *conv_out, *eq, *ek, *o_sub, *o_block, *o_all, *wsub, *dwsub;
    float *dq, *dk, *dv, *dgd, *dbeta, *dlqn, *dlkn, *dlq, *dlk, *dconv, *dxs;
};

void zt_q35_cx_heads(int64_t Hv, int C, int r, int64_t *v0, int64_t *nv) {
    *v0 = (int64_t)r * Hv / C;
    *nv = (int64_t)(r + 1) * Hv / C - *v0;
}

// The sizes of rank r's share (no allocation).
static void shape(zt_q35_cx *x, const zt_model_config *c, int C, int r, int64_t B, int64_t S, int64_t Sl) {
    x->B = B, x->Sb = S, x->Nl = B * Sl, x->Nb = B * S;
    const zt_qwen3_5_fields *q = zt_q35(c);
    x->Hk = q->lin_key_heads, x->Hv = q->lin_value_heads, x->Dk = q->lin_key_dim, x->Dv = q->lin_value_dim;
    x->K = q->lin_conv_kernel, x->Kd = x->Hk * x->Dk, x->Vd = x->Hv * x->Dv, x->Cch = 2 * x->Kd + x->Vd;
    x->Wg = x->Cch + 2 * x->Hv, x->grp = x->Hv / x->Hk;
    zt_q35_cx_heads(x->Hv, C, r, &x->v0, &x->nv);
    x->k0 = x->v0 / x->grp;
    x->nk = x->nv > 0 ? (x->v0 + x->nv - 1) / x->grp + 1 - x->k0 : 0;
    x->Cs = 2 * x->nk * x->Dk + x->nv * x->Dv;
    x->L = c->num_layers;
}

typedef struct {
    float *(*alloc)(void *ctx, int64_t n);  // NULL: count only
    void *ctx;
    int64_t n;
} taker;
static float *take(taker *t, int64_t n) {
    t->n += n;
    return t->alloc ? t->alloc(t->ctx, n) : NULL;
}

// Every float buffer of a shaped x through t (the layer table itself: x->lin, allocated by the caller).
static void buffers(zt_q35_cx *x, const zt_model_config *c, int C, taker *t) {
    const int64_t Nb = x->Nb, Nl = x->Nl, kq = Nb * x->nk * x->Dk, ev = Nb * x->nv;
    for (int l = 0; l < x->L; l++) {
        if (!zt_q35(c)->layer_linear[l]) continue;
        lin_keep *k = &x->lin[l];
        k->xs = take(t, Nb * x->Cs), k->pre = take(t, Nb * x->Cs);
        k->lq = take(t, kq), k->lk = take(t, kq), k->lq_n = take(t, kq), k->lk_n = take(t, kq);
        k->lq_r = take(t, Nb * x->nk), k->lk_r = take(t, Nb * x->nk);
        k->lv = take(t, ev * x->Dv);
        k->araw = take(t, ev), k->beta = take(t, ev), k->g = take(t, ev);
        k->saved = take(t, zt_delta_saved_floats(x->B, x->Sb, x->nv, x->Dk, x->Dv));
    }
    x->pos_mine = take(t, Nl), x->pos_all = take(t, C * Nl), x->pos_blockf = take(t, Nb);
    x->pos_block = (int32_t *)take(t, Nb);  // sizeof(int32_t) == sizeof(float)
    x->in_mine = take(t, Nl * x->Wg), x->in_all = take(t, C * Nl * x->Wg), x->in_block = take(t, Nb * x->Wg);
    x->conv_out = take(t, Nb * x->Cs);
    x->eq = take(t, ev * x->Dk), x->ek = take(t, ev * x->Dk);
    x->o_sub = take(t, ev * x->Dv), x->o_block = take(t, Nb * x->Vd), x->o_all = take(t, C * Nl * x->Vd);
    x->wsub = take(t, x->Cs * x->K), x->dwsub = take(t, x->Cs * x->K);
    x->dq = take(t, ev * x->Dk), x->dk = take(t, ev * x->Dk), x->dv = take(t, ev * x->Dv);
    x->dgd = take(t, ev), x->dbeta = take(t, ev);
    x->dlqn = take(t, kq), x->dlkn = take(t, kq), x->dlq = take(t, kq), x->dlk = take(t, kq);
    x->dconv = take(t, Nb * x->Cs), x->dxs = take(t, Nb * x->Cs);
}

static int any_full(const zt_model_config *c) {
    for (int l = 0; l < c->num_layers; l++)
        if (!zt_q35(c)->layer_linear[l]) return 1;
    return 0;
}

int64_t zt_q35_cx_bytes(const zt_model_config *c, int C, int64_t B, int64_t S, int64_t S_local) {
    int64_t most = 0;
    for (int r = 0; r < C; r++) {
        zt_q35_cx x;
        memset(&x, 0, sizeof x);
        shape(&x, c, C, r, B, S, S_local);
        x.lin = zt_xcalloc((size_t)x.L, sizeof(lin_keep));
        taker t = {0};
        buffers(&x, c, C, &t);
        free(x.lin);
        most = t.n > most ? t.n : most;
    }
    const int64_t kv = any_full(c) ? zt_context_kv_bytes(C, B, S, S_local, (int64_t)c->num_kv_heads * c->head_dim) : 0;
    return most * (int64_t)sizeof(float) + kv;
}

zt_q35_cx *zt_q35_cx_create(const zt_model_config *c, const zt_ops *ops, const zt_family_context *cx, int64_t B,
                            float *(*alloc)(void *ctx, int64_t n), void *ctx) {
    zt_q35_cx *x = zt_xcalloc(1, sizeof *x);
    x->ops = ops;
    x->cx = *cx;
    shape(x, c, cx->C, cx->rank, B, cx->S, cx->S_local);
    if (any_full(c)) {
        zt_context_kv_init(&x->kv, cx, B, (int64_t)c->num_kv_heads * c->head_dim, alloc, ctx);
        x->has_kv = 1;
        x->cx.index = x->kv.index;
    } else {
        x->own_index = zt_xmalloc((size_t)(cx->C * cx->S_local) * sizeof(int32_t));
        memcpy(x->own_index, cx->index, (size_t)(cx->C * cx->S_local) * sizeof(int32_t));
        x->cx.index = x->own_index;
    }
    x->ch = zt_xmalloc((size_t)(x->Cs > 0 ? x->Cs : 1) * sizeof(int64_t));
    const int64_t nq = x->nk * x->Dk;
    for (int64_t i = 0; i < nq; i++) {
        x->ch[i] = x->k0 * x->Dk + i;
        x->ch[nq + i] = x->Kd + x->k0 * x->Dk + i;
    }
    for (int64_t i = 0; i < x->nv * x->Dv; i++) x->ch[2 * nq + i] = 2 * x->Kd + x->v0 * x->Dv + i;
    x->lin = zt_xcalloc((size_t)x->L, sizeof(lin_keep));
    taker t = {.alloc = alloc, .ctx = ctx};
    buffers(x, c, cx->C, &t);
    return x;
}

void zt_q35_cx_free(zt_q35_cx *x) {
    if (!x) return;
    for (int l = 0; l < x->L; l++) {
        lin_keep *k = &x->lin[l];
        float *b[] = {k->xs, k->pre, k->lq, k->lk, k->lq_n, k->lk_n, k->lq_r, k->lk_r, k->lv, k->araw, k->beta, k->g,
                      k->saved};
        for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) free(b[i]);
    }
    float *w[] = {x->pos_mine, x->pos_all, x->pos_blockf, (float *)x->pos_block, x->in_mine, x->in_all, x->in_block,
                  x->conv_out, x->eq, x->ek, x->o_sub, x->o_block, x->o_all, x->wsub, x->dwsub, x->dq, x->dk, x->dv,
                  x->dgd, x->dbeta, x->dlqn, x->dlkn, x->dlq, x->dlk, x->dconv, x->dxs};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) free(w[i]);
    if (x->has_kv) zt_context_kv_free(&x->kv);
    free(x->own_index), free(x->ch), free(x->lin), free(x);
}

zt_context_kv *zt_q35_cx_kv(zt_q35_cx *x) { return x->has_kv ? &x->kv : NULL; }

void zt_q35_cx_set_batch(zt_q35_cx *x, const int32_t *pos) {
    for (int64_t i = 0; i < x->Nl; i++) x->pos_mine[i] = (float)pos[i];  // exact: positions < 2^24
    x->pos_ready = 0;
}

// The whole block's positions (a document's start: 0), once per micro-batch, at its first linear layer.
static void block_positions(zt_q35_cx *x) {
    if (x->pos_ready) return;
    zt_context_gather_rows(&x->cx, x->B, x->pos_mine, x->pos_all, x->pos_blockf, 1, "positions context all-gather");
    for (int64_t i = 0; i < x->Nb; i++) x->pos_block[i] = (int32_t)x->pos_blockf[i];
    x->pos_ready = 1;
}

static float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }
static float softplusf(float v) { return v > 20.0f ? v : log1pf(expf(v)); }  // torch's (beta 1, threshold 20)
static float dsoftplusf(float v) {
    if (v > 20.0f) return 1.0f;
    const float e = expf(v);
    return e / (e + 1.0f);
}

// My channels' rows of the conv weight [Cch, K] (packed [Cs, K]).
static void conv_weight(zt_q35_cx *x, const float *wconv) {
    for (int64_t j = 0; j < x->Cs; j++) memcpy(x->wsub + j * x->K, wconv + x->ch[j] * x->K, (size_t)x->K * sizeof(float));
}

// q, k of each of my value heads' key head (the delta rule then reads one key head per value head).
static void expand_keys(zt_q35_cx *x, const lin_keep *k) {
    const int64_t Dk = x->Dk, nk = x->nk, nv = x->nv;
    for (int64_t t = 0; t < x->Nb; t++)
        for (int64_t j = 0; j < nv; j++) {
            const int64_t kh = (x->v0 + j) / x->grp - x->k0;
            memcpy(x->eq + (t * nv + j) * Dk, k->lq_n + (t * nk + kh) * Dk, (size_t)Dk * sizeof(float));
            memcpy(x->ek + (t * nv + j) * Dk, k->lk_n + (t * nk + kh) * Dk, (size_t)Dk * sizeof(float));
        }
}

void zt_q35_cx_mix_fwd(zt_q35_cx *x, int layer, const float *qkv, const float *b, const float *a,
                       const float *wconv, const float *A_log, const float *dt, float *core) {
    const zt_ops *op = x->ops;
    lin_keep *k = &x->lin[layer];
    const int64_t Nb = x->Nb, Wg = x->Wg, Cch = x->Cch, Hv = x->Hv, nv = x->nv, Cs = x->Cs, nq = x->nk * x->Dk;
    block_positions(x);
    for (int64_t t = 0; t < x->Nl; t++) {  // qkv | b | a of each held token
        memcpy(x->in_mine + t * Wg, qkv + t * Cch, (size_t)Cch * sizeof(float));
        memcpy(x->in_mine + t * Wg + Cch, b + t * Hv, (size_t)Hv * sizeof(float));
        memcpy(x->in_mine + t * Wg + Cch + Hv, a + t * Hv, (size_t)Hv * sizeof(float));
    }
    char what[96];
    snprintf(what, sizeof what, "layer %d conv input|b|a context all-gather", layer);
    zt_context_gather_rows(&x->cx, x->B, x->in_mine, x->in_all, x->in_block, Wg, what);
    for (int64_t t = 0; t < Nb; t++)
        for (int64_t j = 0; j < Cs; j++) k->xs[t * Cs + j] = x->in_block[t * Wg + x->ch[j]];
    conv_weight(x, wconv);
    op->conv1d_silu_fwd(x->conv_out, k->pre, k->xs, x->wsub, x->pos_block, x->B, x->Sb, Cs, x->K);
    for (int64_t t = 0; t < Nb; t++) {  // split my channels: q | k | v
        memcpy(k->lq + t * nq, x->conv_out + t * Cs, (size_t)nq * sizeof(float));
        memcpy(k->lk + t * nq, x->conv_out + t * Cs + nq, (size_t)nq * sizeof(float));
        memcpy(k->lv + t * nv * x->Dv, x->conv_out + t * Cs + 2 * nq, (size_t)(nv * x->Dv) * sizeof(float));
    }
    op->l2norm_fwd(k->lq_n, k->lq_r, k->lq, Nb * x->nk, x->Dk, 1e-6f);
    op->l2norm_fwd(k->lk_n, k->lk_r, k->lk, Nb * x->nk, x->Dk, 1e-6f);
    for (int64_t t = 0; t < Nb; t++)
        for (int64_t j = 0; j < nv; j++) {
            const int64_t h = x->v0 + j, i = t * nv + j;
            const float bb = x->in_block[t * Wg + Cch + h], aa = x->in_block[t * Wg + Cch + Hv + h];
            k->araw[i] = aa;
            k->beta[i] = sigmoidf(bb);
            k->g[i] = -expf(A_log[h]) * softplusf(aa + dt[h]);
        }
    expand_keys(x, k);
    op->delta_fwd(x->o_sub, k->saved, x->eq, x->ek, k->lv, k->g, k->beta, x->pos_block, x->B, x->Sb, nv, nv, x->Dk,
                  x->Dv);
    memset(x->o_block, 0, (size_t)(Nb * x->Vd) * sizeof(float));
    for (int64_t t = 0; t < Nb; t++)
        memcpy(x->o_block + t * x->Vd + x->v0 * x->Dv, x->o_sub + t * nv * x->Dv, (size_t)(nv * x->Dv) * sizeof(float));
    snprintf(what, sizeof what, "layer %d delta output context reduce-scatter", layer);
    zt_context_scatter_rows(&x->cx, x->B, x->o_block, x->o_all, core, x->Vd, what);
}

// dq, dk of the value heads summed into their key heads, through the l2 norms, with dv into dconv [Nb, Cs].
static void key_grads(zt_q35_cx *x, const lin_keep *k) {
    const int64_t Dk = x->Dk, nk = x->nk, nv = x->nv, Cs = x->Cs, nq = nk * Dk, Nb = x->Nb;
    memset(x->dlqn, 0, (size_t)(Nb * nq) * sizeof(float));
    memset(x->dlkn, 0, (size_t)(Nb * nq) * sizeof(float));
    for (int64_t t = 0; t < Nb; t++)
        for (int64_t j = 0; j < nv; j++) {
            const int64_t kh = (x->v0 + j) / x->grp - x->k0;
            float *dq = x->dlqn + (t * nk + kh) * Dk, *dk = x->dlkn + (t * nk + kh) * Dk;
            const float *sq = x->dq + (t * nv + j) * Dk, *sk = x->dk + (t * nv + j) * Dk;
            for (int64_t i = 0; i < Dk; i++) dq[i] += sq[i], dk[i] += sk[i];
        }
    x->ops->l2norm_bwd(x->dlq, x->dlqn, k->lq, k->lq_r, Nb * nk, Dk);
    x->ops->l2norm_bwd(x->dlk, x->dlkn, k->lk, k->lk_r, Nb * nk, Dk);
    for (int64_t t = 0; t < Nb; t++) {
        memcpy(x->dconv + t * Cs, x->dlq + t * nq, (size_t)nq * sizeof(float));
        memcpy(x->dconv + t * Cs + nq, x->dlk + t * nq, (size_t)nq * sizeof(float));
        memcpy(x->dconv + t * Cs + 2 * nq, x->dv + t * nv * x->Dv, (size_t)(nv * x->Dv) * sizeof(float));
    }
}

void zt_q35_cx_mix_bwd(zt_q35_cx *x, int layer, const float *dcore, const float *wconv, float *dwconv,
                       const float *A_log, float *dA, const float *dt, float *ddt, float *dqkv, float *db, float *da) {
    const zt_ops *op = x->ops;
    const lin_keep *k = &x->lin[layer];
    const int64_t Nb = x->Nb, Wg = x->Wg, Cch = x->Cch, Hv = x->Hv, nv = x->nv, Cs = x->Cs, Dv = x->Dv;
    char what[96];
    snprintf(what, sizeof what, "layer %d delta output gradient context all-gather", layer);
    zt_context_gather_rows(&x->cx, x->B, dcore, x->o_all, x->o_block, x->Vd, what);
    for (int64_t t = 0; t < Nb; t++)
        memcpy(x->o_sub + t * nv * Dv, x->o_block + t * x->Vd + x->v0 * Dv, (size_t)(nv * Dv) * sizeof(float));
    expand_keys(x, k);
    op->delta_bwd(x->dq, x->dk, x->dv, x->dgd, x->dbeta, x->o_sub, k->saved, x->eq, x->ek, k->lv, k->g, k->beta,
                  x->pos_block, x->B, x->Sb, nv, nv, x->Dk, Dv);
    key_grads(x, k);
    conv_weight(x, wconv);
    memset(x->dwsub, 0, (size_t)(Cs * x->K) * sizeof(float));
    op->conv1d_silu_bwd(x->dxs, x->dwsub, x->dconv, k->pre, k->xs, x->wsub, x->pos_block, x->B, x->Sb, Cs, x->K);
    for (int64_t j = 0; j < Cs; j++)
        for (int64_t i = 0; i < x->K; i++) dwconv[x->ch[j] * x->K + i] += x->dwsub[j * x->K + i];
    // every token's gradient of qkv | b | a in my slots (zeros elsewhere), summed over the group at the held tokens
    memset(x->in_block, 0, (size_t)(Nb * Wg) * sizeof(float));
    for (int64_t t = 0; t < Nb; t++) {
        for (int64_t j = 0; j < Cs; j++) x->in_block[t * Wg + x->ch[j]] = x->dxs[t * Cs + j];
        for (int64_t j = 0; j < nv; j++) {
            const int64_t h = x->v0 + j, i = t * nv + j;
            const float dg = x->dgd[i];
            dA[h] += dg * k->g[i];  // g = -exp(A_log) sp: dg/dA_log = g
            const float dai = dg * -expf(A_log[h]) * dsoftplusf(k->araw[i] + dt[h]);
            ddt[h] += dai;
            x->in_block[t * Wg + Cch + h] = x->dbeta[i] * k->beta[i] * (1.0f - k->beta[i]);
            x->in_block[t * Wg + Cch + Hv + h] = dai;
        }
    }
    snprintf(what, sizeof what, "layer %d conv input|b|a gradient context reduce-scatter", layer);
    zt_context_scatter_rows(&x->cx, x->B, x->in_block, x->in_all, x->in_mine, Wg, what);
    for (int64_t t = 0; t < x->Nl; t++) {
        memcpy(dqkv + t * Cch, x->in_mine + t * Wg, (size_t)Cch * sizeof(float));
        memcpy(db + t * Hv, x->in_mine + t * Wg + Cch, (size_t)Hv * sizeof(float));
        memcpy(da + t * Hv, x->in_mine + t * Wg + Cch + Hv, (size_t)Hv * sizeof(float));
    }
}
