// Qwen3.5's Gated DeltaNet under context parallelism by head sharding (model/qwen3_5_context.h,
// docs/design.md "Context parallelism for Qwen3.5"). Each rank projects its held tokens (qkv, b, a)
// as without the split; one all-to-all hands every rank its own channels (the q, k of the key heads
// its value heads read, the v, b, a of its value heads) of every rank's tokens (sequence -> heads),
// so each rank runs the causal conv1d, the l2 norms and the gated delta rule over the whole block
// for its own value heads [v0, v0 + nv) (the key heads they read, v / (Hv / Hk), copied per value
// head so a key head may be shared by two ranks) with the same kernels as the unsplit run, and every
// head's values are those of the unsplit run; a second all-to-all hands each rank its tokens' rows
// of every rank's heads (heads -> sequence: no head is computed twice, so nothing is summed) before
// the gated norm. The backward mirrors it: the gated norm's dcore goes heads-ward by all-to-all, each
// rank runs the delta rule's and conv's backward for its heads, and the conv input's, b's and a's
// gradients of its channels go back to the tokens' ranks by all-to-all, where the two contributions
// to a shared key head's channels are summed (in rank order). The documents' starts (positions) are
// gathered once per micro-batch, so the conv window and the state restart at each document start
// exactly as without the split. The block-wide scratch of the forward and of the backward share one
// arena (their lifetimes never overlap; within each pass the phases reuse it too).
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

typedef struct {                   // one rank's share of the heads
    int64_t v0, nv, k0, nk, Cs, w;  // value heads, the key heads they read, channels, w = Cs + 2 nv (| b | a)
} share;

struct zt_q35_cx {
    zt_family_context cx;   // index: kv.index or own_index (copied)
    int32_t *own_index;
    zt_context_kv kv;
    int has_kv;
    const zt_ops *ops;
    int64_t B, Sb, Nl, Nb;  // rows; block tokens; held tokens; block tokens of the micro-batch
    int64_t Hk, Hv, Dk, Dv, K, Kd, Vd, Cch, grp;
    int64_t v0, nv, k0, nk, Cs;  // my value heads, the key heads they read, my channels
    share *sh;                   // [C] every rank's (sh[rank]: mine)
    int64_t sum_w;               // sum of the group's w
    int64_t *sn, *rn;            // [C] the all-to-alls' counts
    int L;
    lin_keep *lin;               // [L] (zeros for full-attention layers)
    int pos_ready;
    float *pos_mine, *pos_all, *pos_blockf;  // the held tokens' positions (as floats), the group's, the block's
    int32_t *pos_block;                      // [Nb]
    float *wsub, *dwsub;                     // [Cs, K] my channels' conv weight and its gradient
    float *arena;                            // arena_floats: the forward's and the backward's block-wide scratch
    int64_t arena_floats;
};

void zt_q35_cx_heads(int64_t Hv, int C, int r, int64_t *v0, int64_t *nv) {
    *v0 = (int64_t)r * Hv / C;
    *nv = (int64_t)(r + 1) * Hv / C - *v0;
}

static share share_of(const zt_model_config *c, int C, int r) {
    const zt_qwen3_5_fields *q = zt_q35(c);
    const int64_t grp = q->lin_value_heads / q->lin_key_heads;
    share s;
    zt_q35_cx_heads(q->lin_value_heads, C, r, &s.v0, &s.nv);
    s.k0 = s.v0 / grp;
    s.nk = s.nv > 0 ? (s.v0 + s.nv - 1) / grp + 1 - s.k0 : 0;
    s.Cs = 2 * s.nk * q->lin_key_dim + s.nv * q->lin_value_dim;
    s.w = s.Cs + 2 * s.nv;
    return s;
}

// The sizes of rank r's share (no allocation; x->sh: C entries, filled).
static void shape(zt_q35_cx *x, const zt_model_config *c, int C, int r, int64_t B, int64_t S, int64_t Sl) {
    x->B = B, x->Sb = S, x->Nl = B * Sl, x->Nb = B * S;
    const zt_qwen3_5_fields *q = zt_q35(c);
    x->Hk = q->lin_key_heads, x->Hv = q->lin_value_heads, x->Dk = q->lin_key_dim, x->Dv = q->lin_value_dim;
    x->K = q->lin_conv_kernel, x->Kd = x->Hk * x->Dk, x->Vd = x->Hv * x->Dv, x->Cch = 2 * x->Kd + x->Vd;
    x->grp = x->Hv / x->Hk;
    x->sum_w = 0;
    for (int i = 0; i < C; i++) x->sh[i] = share_of(c, C, i), x->sum_w += x->sh[i].w;
    x->v0 = x->sh[r].v0, x->nv = x->sh[r].nv, x->k0 = x->sh[r].k0, x->nk = x->sh[r].nk, x->Cs = x->sh[r].Cs;
    x->L = c->num_layers;
}

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

// The arena's phases (floats; ev = Nb nv, the offsets mix_fwd and mix_bwd use):
//   forward  a: send [Nl sum_w] | recv [C Nl w]   (sequence -> heads)
//            b: conv_out [Nb Cs]
//            c: o_sub [ev Dv] | eq, ek [ev Dk each]
//            d: recv [Nl Vd] (over o_sub, written after the packing) .. send [C Nl nv Dv] at max(ev Dv, Nl Vd)
//   backward P: dgd, dbeta [ev each] (throughout) | X: dO -> dconv -> send | Z (phases below)
//            X = max(ev Dv, Nb Cs, C Nl w)
//            Z a: send [Nl Vd] | recv [C Nl nv Dv]; b, c: E = max(2 ev Dk, 4 kq) (eq, ek; then dlqn, dlkn,
//              dlq, dlk) | dq, dk [ev Dk each] | dv [ev Dv]; d: dxs [Nb Cs]; e: recv [Nl sum_w]
static int64_t bwd_x(const zt_q35_cx *x) {
    const int64_t C = x->cx.C, ev = x->Nb * x->nv;
    return max2(max2(ev * x->Dv, x->Nb * x->Cs), C * x->Nl * x->sh[x->cx.rank].w);
}
static int64_t bwd_e(const zt_q35_cx *x) {
    const int64_t ev = x->Nb * x->nv, kq = x->Nb * x->nk * x->Dk;
    return max2(2 * ev * x->Dk, 4 * kq);
}
static int64_t arena_size(const zt_q35_cx *x) {
    const int64_t C = x->cx.C, Nl = x->Nl, Nb = x->Nb, ev = Nb * x->nv, w = x->sh[x->cx.rank].w;
    int64_t fwd = Nl * x->sum_w + C * Nl * w;
    fwd = max2(fwd, Nb * x->Cs);
    fwd = max2(fwd, ev * x->Dv + 2 * ev * x->Dk);
    fwd = max2(fwd, max2(ev * x->Dv, Nl * x->Vd) + C * Nl * x->nv * x->Dv);
    int64_t z = Nl * x->Vd + C * Nl * x->nv * x->Dv;
    z = max2(z, bwd_e(x) + 2 * ev * x->Dk + ev * x->Dv);
    z = max2(z, Nb * x->Cs);
    z = max2(z, Nl * x->sum_w);
    const int64_t bwd = 2 * ev + bwd_x(x) + z;
    return max2(fwd, bwd);
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
    x->wsub = take(t, x->Cs * x->K), x->dwsub = take(t, x->Cs * x->K);
    x->arena_floats = arena_size(x);
    x->arena = take(t, x->arena_floats);
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
        x.sh = zt_xcalloc((size_t)C, sizeof(share));
        x.cx.C = C, x.cx.rank = r;
        shape(&x, c, C, r, B, S, S_local);
        x.lin = zt_xcalloc((size_t)x.L, sizeof(lin_keep));
        taker t = {0};
        buffers(&x, c, C, &t);
        free(x.lin), free(x.sh);
        most = t.n > most ? t.n : most;
    }
    const int64_t kv = any_full(c) ? zt_context_kv_bytes(C, B, S, S_local, (int64_t)c->num_kv_heads * c->head_dim) : 0;
    return most * (int64_t)sizeof(float) + kv;
}

zt_q35_cx *zt_q35_cx_create(const zt_model_config *c, const zt_ops *ops, const zt_family_context *cx, int64_t B,
                            float *(*alloc)(void *ctx, int64_t n), void *ctx) {
    if (!cx->alltoall) zt_fatal("Qwen3.5 context parallelism: the engine supplies no all-to-all");
    zt_q35_cx *x = zt_xcalloc(1, sizeof *x);
    x->ops = ops;
    x->cx = *cx;
    x->sh = zt_xcalloc((size_t)cx->C, sizeof(share));
    x->sn = zt_xcalloc(2 * (size_t)cx->C, sizeof(int64_t));
    x->rn = x->sn + cx->C;
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
    float *w[] = {x->pos_mine, x->pos_all, x->pos_blockf, (float *)x->pos_block, x->wsub, x->dwsub, x->arena};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) free(w[i]);
    if (x->has_kv) zt_context_kv_free(&x->kv);
    free(x->own_index), free(x->sh), free(x->sn), free(x->lin), free(x);
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

static void exchange(zt_q35_cx *x, const float *send, float *recv, const char *what) {
    x->cx.alltoall(x->cx.ctx, send, x->sn, recv, x->rn, what);
}

static float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }
static float softplusf(float v) { return v > 20.0f ? v : log1pf(expf(v)); }  // torch's (beta 1, threshold 20)
static float dsoftplusf(float v) {
    if (v > 20.0f) return 1.0f;
    const float e = expf(v);
    return e / (e + 1.0f);
}

// A row's channels of share s in its packed order, q | k of its key heads, v of its value heads
// (from a [Cch] row: copy, dst [Cs]); the inverse adds (first: assigns) into a [Cch] row, the q, k of
// key heads <= shared_k (read by an earlier rank too) added, the rest assigned.
static void pick(const zt_q35_cx *x, const share *s, const float *row, float *dst) {
    const int64_t nq = s->nk * x->Dk;
    memcpy(dst, row + s->k0 * x->Dk, (size_t)nq * sizeof(float));
    memcpy(dst + nq, row + x->Kd + s->k0 * x->Dk, (size_t)nq * sizeof(float));
    memcpy(dst + 2 * nq, row + 2 * x->Kd + s->v0 * x->Dv, (size_t)(s->nv * x->Dv) * sizeof(float));
}
static void place(const zt_q35_cx *x, const share *s, const float *src, float *row, int64_t shared_k) {
    const int64_t Dk = x->Dk, nq = s->nk * Dk;
    for (int part = 0; part < 2; part++) {  // q, k
        float *d = row + part * x->Kd + s->k0 * Dk;
        const float *p = src + part * nq;
        for (int64_t i = 0; i < nq; i++) {
            if (s->k0 + i / Dk <= shared_k)
                d[i] += p[i];
            else
                d[i] = p[i];
        }
    }
    memcpy(row + 2 * x->Kd + s->v0 * x->Dv, src + 2 * nq, (size_t)(s->nv * x->Dv) * sizeof(float));
}

// My channels' rows of the conv weight [Cch, K] (packed [Cs, K]).
static void conv_weight(zt_q35_cx *x, const float *wconv) {
    const share *s = &x->sh[x->cx.rank];
    const int64_t K = x->K, nq = s->nk * x->Dk;
    memcpy(x->wsub, wconv + s->k0 * x->Dk * K, (size_t)(nq * K) * sizeof(float));
    memcpy(x->wsub + nq * K, wconv + (x->Kd + s->k0 * x->Dk) * K, (size_t)(nq * K) * sizeof(float));
    memcpy(x->wsub + 2 * nq * K, wconv + (2 * x->Kd + s->v0 * x->Dv) * K, (size_t)(s->nv * x->Dv * K) * sizeof(float));
}

// The channel of the conv weight my packed channel j stands for.
static int64_t chan(const zt_q35_cx *x, int64_t j) {
    const int64_t nq = x->nk * x->Dk;
    if (j < nq) return x->k0 * x->Dk + j;
    if (j < 2 * nq) return x->Kd + x->k0 * x->Dk + (j - nq);
    return 2 * x->Kd + x->v0 * x->Dv + (j - 2 * nq);
}

// q, k of each of my value heads' key head (the delta rule then reads one key head per value head).
static void expand_keys(const zt_q35_cx *x, const lin_keep *k, float *eq, float *ek) {
    const int64_t Dk = x->Dk, nk = x->nk, nv = x->nv;
    for (int64_t t = 0; t < x->Nb; t++)
        for (int64_t j = 0; j < nv; j++) {
            const int64_t kh = (x->v0 + j) / x->grp - x->k0;
            memcpy(eq + (t * nv + j) * Dk, k->lq_n + (t * nk + kh) * Dk, (size_t)Dk * sizeof(float));
            memcpy(ek + (t * nv + j) * Dk, k->lk_n + (t * nk + kh) * Dk, (size_t)Dk * sizeof(float));
        }
}

// Rank r's held token t of row b: its block row b Sb + g, or -1 (padding).
static int64_t block_row(const zt_q35_cx *x, int r, int64_t b, int64_t t) {
    const int64_t g = x->cx.index[(int64_t)r * x->cx.S_local + t];
    return g < 0 ? -1 : b * x->Sb + g;
}

// Heads -> sequence: src [Nb, n] block rows of my heads; every rank s gets [Nl, n], its held tokens'
// rows (zeros for padding), packed into send.
static void pack_rows(const zt_q35_cx *x, const float *src, int64_t n, float *send) {
    const int64_t Sl = x->cx.S_local;
    for (int s = 0; s < x->cx.C; s++)
        for (int64_t b = 0; b < x->B; b++)
            for (int64_t t = 0; t < Sl; t++) {
                const int64_t g = block_row(x, s, b, t);
                float *d = send + ((int64_t)s * x->Nl + b * Sl + t) * n;
                if (g >= 0)
                    memcpy(d, src + g * n, (size_t)n * sizeof(float));
                else
                    memset(d, 0, (size_t)n * sizeof(float));
            }
}

// Sequence -> heads: recv holds every rank's held tokens' rows [C, Nl, n]; the block's rows into dst [Nb, n].
static void unpack_rows(const zt_q35_cx *x, const float *recv, int64_t n, float *dst) {
    for (int s = 0; s < x->cx.C; s++) zt_context_to_block(&x->cx, s, x->B, recv + (int64_t)s * x->Nl * n, dst, n);
}

void zt_q35_cx_mix_fwd(zt_q35_cx *x, int layer, const float *qkv, const float *b, const float *a,
                       const float *wconv, const float *A_log, const float *dt, float *core) {
    const zt_ops *op = x->ops;
    lin_keep *k = &x->lin[layer];
    const int C = x->cx.C, me = x->cx.rank;
    const int64_t Nb = x->Nb, Nl = x->Nl, Cch = x->Cch, Hv = x->Hv, nv = x->nv, Cs = x->Cs, nq = x->nk * x->Dk;
    const int64_t Dv = x->Dv, ev = Nb * nv, w = x->sh[me].w, Sl = x->cx.S_local;
    block_positions(x);
    // a: every rank's channels | b | a of my held tokens to it; every rank's held tokens in my channels back
    float *send = x->arena, *recv = x->arena + Nl * x->sum_w;
    float *p = send;
    for (int r = 0; r < C; r++) {
        const share *s = &x->sh[r];
        for (int64_t t = 0; t < Nl; t++, p += s->w) {
            pick(x, s, qkv + t * Cch, p);
            memcpy(p + s->Cs, b + t * Hv + s->v0, (size_t)s->nv * sizeof(float));
            memcpy(p + s->Cs + s->nv, a + t * Hv + s->v0, (size_t)s->nv * sizeof(float));
        }
        x->sn[r] = Nl * s->w, x->rn[r] = Nl * w;
    }
    char what[96];
    snprintf(what, sizeof what, "layer %d conv input|b|a context all-to-all", layer);
    exchange(x, send, recv, what);
    for (int s = 0; s < C; s++)
        for (int64_t bb = 0; bb < x->B; bb++)
            for (int64_t t = 0; t < Sl; t++) {
                const int64_t g = block_row(x, s, bb, t);
                if (g < 0) continue;
                const float *q = recv + ((int64_t)s * Nl + bb * Sl + t) * w;
                memcpy(k->xs + g * Cs, q, (size_t)Cs * sizeof(float));
                for (int64_t j = 0; j < nv; j++) {
                    k->beta[g * nv + j] = sigmoidf(q[Cs + j]);
                    k->araw[g * nv + j] = q[Cs + nv + j];
                }
            }
    // b: the conv over the block in my channels
    float *conv_out = x->arena;
    conv_weight(x, wconv);
    op->conv1d_silu_fwd(conv_out, k->pre, k->xs, x->wsub, x->pos_block, x->B, x->Sb, Cs, x->K);
    for (int64_t t = 0; t < Nb; t++) {  // split my channels: q | k | v
        memcpy(k->lq + t * nq, conv_out + t * Cs, (size_t)nq * sizeof(float));
        memcpy(k->lk + t * nq, conv_out + t * Cs + nq, (size_t)nq * sizeof(float));
        memcpy(k->lv + t * nv * Dv, conv_out + t * Cs + 2 * nq, (size_t)(nv * Dv) * sizeof(float));
    }
    op->l2norm_fwd(k->lq_n, k->lq_r, k->lq, Nb * x->nk, x->Dk, 1e-6f);
    op->l2norm_fwd(k->lk_n, k->lk_r, k->lk, Nb * x->nk, x->Dk, 1e-6f);
    for (int64_t t = 0; t < Nb; t++)
        for (int64_t j = 0; j < nv; j++) {
            const int64_t h = x->v0 + j, i = t * nv + j;
            k->g[i] = -expf(A_log[h]) * softplusf(k->araw[i] + dt[h]);
        }
    // c: the delta rule for my heads
    float *o_sub = x->arena, *eq = o_sub + ev * Dv, *ek = eq + ev * x->Dk;
    expand_keys(x, k, eq, ek);
    op->delta_fwd(o_sub, k->saved, eq, ek, k->lv, k->g, k->beta, x->pos_block, x->B, x->Sb, nv, nv, x->Dk, Dv);
    // d: my heads' rows to the tokens' ranks; every head of my tokens back
    float *recv2 = x->arena, *send2 = x->arena + max2(ev * Dv, Nl * x->Vd);
    pack_rows(x, o_sub, nv * Dv, send2);
    for (int r = 0; r < C; r++) x->sn[r] = Nl * nv * Dv, x->rn[r] = Nl * x->sh[r].nv * Dv;
    snprintf(what, sizeof what, "layer %d delta output context all-to-all", layer);
    exchange(x, send2, recv2, what);
    const float *src = recv2;
    for (int r = 0; r < C; r++) {
        const int64_t n = x->sh[r].nv * Dv;
        for (int64_t t = 0; t < Nl; t++)
            memcpy(core + t * x->Vd + x->sh[r].v0 * Dv, src + t * n, (size_t)n * sizeof(float));
        src += Nl * n;
    }
}

// dq, dk of the value heads summed into their key heads, through the l2 norms, with dv into dconv [Nb, Cs].
static void key_grads(const zt_q35_cx *x, const lin_keep *k, const float *dq_v, const float *dk_v, const float *dv,
                      float *e, float *dconv) {
    const int64_t Dk = x->Dk, nk = x->nk, nv = x->nv, Cs = x->Cs, nq = nk * Dk, Nb = x->Nb, kq = Nb * nq;
    float *dlqn = e, *dlkn = e + kq, *dlq = e + 2 * kq, *dlk = e + 3 * kq;
    memset(dlqn, 0, (size_t)kq * sizeof(float));
    memset(dlkn, 0, (size_t)kq * sizeof(float));
    for (int64_t t = 0; t < Nb; t++)
        for (int64_t j = 0; j < nv; j++) {
            const int64_t kh = (x->v0 + j) / x->grp - x->k0;
            float *dq = dlqn + (t * nk + kh) * Dk, *dk = dlkn + (t * nk + kh) * Dk;
            const float *sq = dq_v + (t * nv + j) * Dk, *sk = dk_v + (t * nv + j) * Dk;
            for (int64_t i = 0; i < Dk; i++) dq[i] += sq[i], dk[i] += sk[i];
        }
    x->ops->l2norm_bwd(dlq, dlqn, k->lq, k->lq_r, Nb * nk, Dk);
    x->ops->l2norm_bwd(dlk, dlkn, k->lk, k->lk_r, Nb * nk, Dk);
    for (int64_t t = 0; t < Nb; t++) {
        memcpy(dconv + t * Cs, dlq + t * nq, (size_t)nq * sizeof(float));
        memcpy(dconv + t * Cs + nq, dlk + t * nq, (size_t)nq * sizeof(float));
        memcpy(dconv + t * Cs + 2 * nq, dv + t * nv * x->Dv, (size_t)(nv * x->Dv) * sizeof(float));
    }
}

void zt_q35_cx_mix_bwd(zt_q35_cx *x, int layer, const float *dcore, const float *wconv, float *dwconv,
                       const float *A_log, float *dA, const float *dt, float *ddt, float *dqkv, float *db, float *da) {
    const zt_ops *op = x->ops;
    const lin_keep *k = &x->lin[layer];
    const int C = x->cx.C, me = x->cx.rank;
    const int64_t Nb = x->Nb, Nl = x->Nl, Cch = x->Cch, Hv = x->Hv, nv = x->nv, Cs = x->Cs, Dv = x->Dv, Dk = x->Dk;
    const int64_t ev = Nb * nv, w = x->sh[me].w, Sl = x->cx.S_local;
    float *dgd = x->arena, *dbeta = dgd + ev, *X = dbeta + ev, *Z = X + bwd_x(x);
    // a: my heads' dcore of every rank's tokens
    float *dO = X, *send = Z, *recv = Z + Nl * x->Vd;
    float *p = send;
    for (int r = 0; r < C; r++) {
        const int64_t n = x->sh[r].nv * Dv;
        for (int64_t t = 0; t < Nl; t++, p += n)
            memcpy(p, dcore + t * x->Vd + x->sh[r].v0 * Dv, (size_t)n * sizeof(float));
        x->sn[r] = Nl * n, x->rn[r] = Nl * nv * Dv;
    }
    char what[96];
    snprintf(what, sizeof what, "layer %d delta output gradient context all-to-all", layer);
    exchange(x, send, recv, what);
    unpack_rows(x, recv, nv * Dv, dO);
    // b: the delta rule's backward
    float *E = Z, *dq = E + bwd_e(x), *dk = dq + ev * Dk, *dv = dk + ev * Dk;
    float *eq = E, *ek = E + ev * Dk;
    expand_keys(x, k, eq, ek);
    op->delta_bwd(dq, dk, dv, dgd, dbeta, dO, k->saved, eq, ek, k->lv, k->g, k->beta, x->pos_block, x->B, x->Sb, nv,
                  nv, Dk, Dv);
    // c: the key heads' gradients through the l2 norms, with dv, into dconv
    float *dconv = X;
    key_grads(x, k, dq, dk, dv, E, dconv);
    // d: the conv's backward
    float *dxs = Z;
    conv_weight(x, wconv);
    memset(x->dwsub, 0, (size_t)(Cs * x->K) * sizeof(float));
    op->conv1d_silu_bwd(dxs, x->dwsub, dconv, k->pre, k->xs, x->wsub, x->pos_block, x->B, x->Sb, Cs, x->K);
    for (int64_t j = 0; j < Cs; j++) {
        const int64_t c = chan(x, j);
        for (int64_t i = 0; i < x->K; i++) dwconv[c * x->K + i] += x->dwsub[j * x->K + i];
    }
    // every block token's gradient of b, a in my heads (in place of dbeta, dgd)
    for (int64_t t = 0; t < Nb; t++)
        for (int64_t j = 0; j < nv; j++) {
            const int64_t h = x->v0 + j, i = t * nv + j;
            const float dg = dgd[i];
            dA[h] += dg * k->g[i];  // g = -exp(A_log) sp: dg/dA_log = g
            const float dai = dg * -expf(A_log[h]) * dsoftplusf(k->araw[i] + dt[h]);
            ddt[h] += dai;
            dbeta[i] = dbeta[i] * k->beta[i] * (1.0f - k->beta[i]);
            dgd[i] = dai;
        }
    // e: my channels' | b's | a's gradients of every rank's tokens to it; my tokens' from every rank back
    float *send2 = X, *recv2 = Z;
    p = send2;
    for (int s = 0; s < C; s++)
        for (int64_t bb = 0; bb < x->B; bb++)
            for (int64_t t = 0; t < Sl; t++, p += w) {
                const int64_t g = block_row(x, s, bb, t);
                if (g < 0) {
                    memset(p, 0, (size_t)w * sizeof(float));
                    continue;
                }
                memcpy(p, dxs + g * Cs, (size_t)Cs * sizeof(float));
                memcpy(p + Cs, dbeta + g * nv, (size_t)nv * sizeof(float));
                memcpy(p + Cs + nv, dgd + g * nv, (size_t)nv * sizeof(float));
            }
    for (int r = 0; r < C; r++) x->sn[r] = Nl * w, x->rn[r] = Nl * x->sh[r].w;
    snprintf(what, sizeof what, "layer %d conv input|b|a gradient context all-to-all", layer);
    exchange(x, send2, recv2, what);
    const float *src = recv2;
    int64_t shared_k = -1;  // the last key head an earlier rank's channels covered
    for (int r = 0; r < C; r++) {
        const share *s = &x->sh[r];
        for (int64_t t = 0; t < Nl; t++, src += s->w) {
            place(x, s, src, dqkv + t * Cch, shared_k);
            memcpy(db + t * Hv + s->v0, src + s->Cs, (size_t)s->nv * sizeof(float));
            memcpy(da + t * Hv + s->v0, src + s->Cs + s->nv, (size_t)s->nv * sizeof(float));
        }
        if (s->nk > 0) shared_k = s->k0 + s->nk - 1;
    }
}
