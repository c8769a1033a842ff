// Qwen3.5's Gated DeltaNet under context parallelism on the GPU, by head sharding (model/qwen3_5_cuda_context.h;
// model/qwen3_5_context.c is the CPU version and the spec; docs/design.md "Context parallelism for Qwen3.5").
// Each rank projects its held tokens as without the split (qkv bf16; in_proj_b's and in_proj_a's outputs
// fp32, sent as their bytes: two bf16 words each, so the gates see the unsplit run's fp32 values); the
// group all-gathers them into the whole block's rows; each rank runs the causal conv1d, the l2 norms,
// the gates and the gated delta rule over the whole block for its value heads [v0, v0 + nv) with the
// kernels of the unsplit path. The GPU rule (model/qwen3_5.c context_rule_gpu: C divides the key heads)
// gives each rank whole key heads (nk = nv / grp of them), so the delta rule runs on this rank's q, k
// and v as they are, sums dq, dk over a key head's value heads itself as without the split, and no
// channel is shared between ranks. The delta rule's output (this rank's heads, zeros elsewhere) is
// reduce-scattered (fp32) back to each rank's held tokens: one rank's value and zeros, exact. The
// backward all-gathers the gated norm's dcore (bf16), runs the delta rule's, the gates', the l2 norms'
// and the conv's backward for this rank's channels over the block, and reduce-scatters the gradients of
// qkv | b | a (fp32: one rank's value and zeros) back to the held tokens. The positions are gathered
// once per micro-batch (the first linear layer's forward), so the conv window and the state restart at
// every document start exactly as without the split. The conv weight's rows, A_log's and dt_bias's
// entries of this rank's heads get this rank's whole-block gradient (the others' 0), summed over the
// group with every parameter gradient.
// defines: zt_q35_gcx_bytes, zt_q35_gcx_create, zt_q35_gcx_free, zt_q35_gcx_at, zt_q35_gcx_attention,
//          zt_q35_gcx_mix_fwd, zt_q35_gcx_mix_bwd, zt_q35_gcx_scratch_bytes
#include "model/qwen3_5_cuda_context.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cuda/zt_cuda_check.h"
#include "model/family.h"
#include "model/qwen3_5.h"

typedef struct {  // one linear layer's block tensors kept from its forward to its backward (my channels, heads)
    zt_bf16 *xs, *pre;              // [Nb, Cs] the conv's input and pre-activation
    zt_bf16 *lq, *lk, *lq_n, *lk_n;  // [Nb, nk Dk]
    zt_bf16 *lv;                    // [Nb, nv Dv]
    float *lq_r, *lk_r;             // [Nb nk]
    float *asub, *beta, *g;         // [Nb, nv]: in_proj_a's output, beta, the decay
    float *saved;                   // the delta rule's states (zt_cuda_delta_saved_floats(B, Sb, nv, ..))
} keep;

struct zt_q35_gcx {
    zt_family_cuda_context x;  // x.index points at index_h
    int32_t *index_h;
    int64_t B, Sb, Sl, Nl, Nb;
    int64_t Hk, Hv, Dk, Dv, K, Kd, Vd, Cch, grp;
    int64_t v0, nv, k0, nk, nq, Cs;  // my value heads, my key heads, nq = nk Dk, my channels
    int64_t Wp, Wq;                  // bf16 words of a forward row (qkv | b | a, padded even), a gradient row
    int L, first_lin, recompute, layer;
    const char *pass;
    keep *lin;                       // [L] (recompute: all point at lin[first_lin]'s)
    int32_t *blk_in, *index, *pos_all, *pos_blk;  // device: block row <- gathered row; rank r's rows <- block
    zt_bf16 *in_mine, *in_all, *in_blk;           // [Nl, Wp], [C Nl, Wp], [Nb, Wp]
    zt_bf16 *wsub, *conv_out, *o_sub, *o_blk, *d_all;
    float *bsub, *dwsub, *o_all32, *o_mine32;
    zt_bf16 *dlqn, *dlkn, *dlq, *dlk, *dlv, *dconv, *dxs, *dbs, *das, *g_blk, *g_mine;
    float *dgd, *dbeta, *g_all32, *g_mine32;
    zt_qwen3_cuda_cx *att;           // the full-attention layers' K/V exchange (NULL: none)
    zt_qwen3_cuda_dims adm;          // its dims (S = S_local)
};

static void shape(zt_q35_gcx *g, const zt_model_config *c, int C, int r, int64_t B, int64_t S, int64_t Sl) {
    const zt_qwen3_5_fields *q = zt_q35(c);
    g->B = B, g->Sb = S, g->Sl = Sl, g->Nl = B * Sl, g->Nb = B * S;
    g->Hk = q->lin_key_heads, g->Hv = q->lin_value_heads, g->Dk = q->lin_key_dim, g->Dv = q->lin_value_dim;
    g->K = q->lin_conv_kernel, g->Kd = g->Hk * g->Dk, g->Vd = g->Hv * g->Dv, g->Cch = 2 * g->Kd + g->Vd;
    g->grp = g->Hk > 0 ? g->Hv / g->Hk : 1;
    g->nv = g->Hv / C, g->v0 = r * g->nv, g->nk = g->Hk / C, g->k0 = r * g->nk;
    g->nq = g->nk * g->Dk, g->Cs = 2 * g->nq + g->nv * g->Dv;
    g->Wp = (g->Cch + 4 * g->Hv + 1) / 2 * 2, g->Wq = (g->Cch + 2 * g->Hv + 1) / 2 * 2;
    g->L = c->num_layers;
    g->first_lin = -1;
    for (int l = g->L - 1; l >= 0; l--)
        if (q->layer_linear[l]) g->first_lin = l;
}

typedef struct {
    int alloc;  // 0: count only
    int64_t n;
} taker;
static void *take(taker *t, int64_t bytes) {
    t->n += bytes;
    return t->alloc ? zt_cuda_malloc((size_t)(bytes > 0 ? bytes : 16)) : NULL;
}

// Every device buffer of a shaped g through t (the maps, the saved block tensors, the workspaces).
static void buffers(zt_q35_gcx *g, int C, taker *t) {
    const int64_t Nb = g->Nb, Nl = g->Nl, ev = Nb * g->nv;
    for (int l = 0; l < g->L; l++) {
        if (l != g->first_lin && (g->recompute || !g->lin[l].xs)) continue;  // lin[l].xs: marks a linear layer
        keep *k = &g->lin[l];
        k->xs = take(t, 2 * Nb * g->Cs), k->pre = take(t, 2 * Nb * g->Cs);
        k->lq = take(t, 2 * Nb * g->nq), k->lk = take(t, 2 * Nb * g->nq);
        k->lq_n = take(t, 2 * Nb * g->nq), k->lk_n = take(t, 2 * Nb * g->nq);
        k->lv = take(t, 2 * ev * g->Dv);
        k->lq_r = take(t, 4 * Nb * g->nk), k->lk_r = take(t, 4 * Nb * g->nk);
        k->asub = take(t, 4 * ev), k->beta = take(t, 4 * ev), k->g = take(t, 4 * ev);
        k->saved = take(t, 4 * zt_cuda_delta_saved_floats(g->B, g->Sb, g->nv, g->Dk, g->Dv));
    }
    g->blk_in = take(t, 4 * g->Sb), g->index = take(t, 4 * C * g->Sl);
    g->pos_all = take(t, 4 * C * Nl), g->pos_blk = take(t, 4 * Nb);
    g->in_mine = take(t, 2 * Nl * g->Wp), g->in_all = take(t, 2 * C * Nl * g->Wp), g->in_blk = take(t, 2 * Nb * g->Wp);
    g->wsub = take(t, 2 * g->Cs * g->K), g->dwsub = take(t, 4 * g->Cs * g->K);
    g->conv_out = take(t, 2 * Nb * g->Cs), g->bsub = take(t, 4 * ev);
    g->o_sub = take(t, 2 * ev * g->Dv), g->o_blk = take(t, 2 * Nb * g->Vd);
    g->o_all32 = take(t, 4 * C * Nl * g->Vd), g->o_mine32 = take(t, 4 * Nl * g->Vd);
    g->d_all = take(t, 2 * C * Nl * g->Vd);
    g->dlqn = take(t, 2 * Nb * g->nq), g->dlkn = take(t, 2 * Nb * g->nq);
    g->dlq = take(t, 2 * Nb * g->nq), g->dlk = take(t, 2 * Nb * g->nq), g->dlv = take(t, 2 * ev * g->Dv);
    g->dgd = take(t, 4 * ev), g->dbeta = take(t, 4 * ev), g->dbs = take(t, 2 * ev), g->das = take(t, 2 * ev);
    g->dconv = take(t, 2 * Nb * g->Cs), g->dxs = take(t, 2 * Nb * g->Cs);
    g->g_blk = take(t, 2 * Nb * g->Wq), g->g_all32 = take(t, 4 * C * Nl * g->Wq);
    g->g_mine32 = take(t, 4 * Nl * g->Wq), g->g_mine = take(t, 2 * Nl * g->Wq);
}

static void mark_linear(zt_q35_gcx *g, const zt_model_config *c) {
    static zt_bf16 mark;  // a non-NULL placeholder the count walk reads as "a linear layer"
    for (int l = 0; l < g->L; l++) g->lin[l].xs = zt_q35(c)->layer_linear[l] ? &mark : NULL;
}

static int any_full(const zt_model_config *c) {
    for (int l = 0; l < c->num_layers; l++)
        if (!zt_q35(c)->layer_linear[l]) return 1;
    return 0;
}

static zt_qwen3_cuda_dims att_dims(const zt_model_config *c, int64_t B, int64_t Sl, zt_attn_kind attention) {
    return (zt_qwen3_cuda_dims){.B = B, .S = Sl, .N = B * Sl, .d = c->hidden_size, .F = c->intermediate_size,
                                .H = c->num_heads, .Hkv = c->num_kv_heads, .D = c->head_dim,
                                .eps = (float)c->rms_norm_eps, .attention = attention};
}

int64_t zt_q35_gcx_bytes(const zt_model_config *c, int C, int64_t B, int64_t S, int64_t S_local, int recompute,
                         zt_attn_kind attention) {
    zt_q35_gcx g;
    memset(&g, 0, sizeof g);
    shape(&g, c, C, 0, B, S, S_local);  // every rank's share is the same size (C divides Hk)
    g.recompute = recompute;
    g.lin = zt_xcalloc((size_t)(g.L > 0 ? g.L : 1), sizeof(keep));
    mark_linear(&g, c);
    taker t = {0};
    buffers(&g, C, &t);
    free(g.lin);
    if (any_full(c)) {
        const zt_qwen3_cuda_dims dm = att_dims(c, B, S_local, attention);
        t.n += zt_qwen3_cuda_cx_bytes(&dm, C, S);
    }
    return t.n;
}

size_t zt_q35_gcx_scratch_bytes(const zt_model_config *c, int C, int64_t B, int64_t S) {
    zt_q35_gcx g;
    memset(&g, 0, sizeof g);
    shape(&g, c, C, 0, B, S, S);
    const size_t d = zt_cuda_delta_scratch_bytes(B, S, g.nv, g.Dk, g.Dv), cv = (size_t)(256 * g.Cs * g.K) * 4;
    return d > cv ? d : cv;
}

zt_q35_gcx *zt_q35_gcx_create(const zt_model_config *c, const zt_family_cuda_context *x, int64_t B, int recompute,
                              zt_attn_kind attention, void *stream) {
    if (!c->family || !c->family->context_rule_gpu || c->family->context_rule_gpu(c, x->C) != 0) {
        if (c->family && !c->family->context_rule_gpu) zt_err("GPU context parallelism, Qwen3.5: no GPU rule");
        return NULL;
    }
    if (x->C < 2 || x->rank < 0 || x->rank >= x->C || x->S_local < 1 || !x->index || !x->gather || !x->scatter) {
        zt_err("GPU context parallelism, Qwen3.5: a split of %d ranks (rank %d) holding %lld of %lld tokens", x->C,
               x->rank, (long long)x->S_local, (long long)x->S);
        return NULL;
    }
    zt_q35_gcx *g = zt_xcalloc(1, sizeof *g);
    shape(g, c, x->C, x->rank, B, x->S, x->S_local);
    if (g->first_lin >= 0 && (g->Vd % 2 || (g->nv * g->Dv) % 2)) {
        zt_err("GPU context parallelism, Qwen3.5: the linear value widths %lld (heads x dim) and %lld (a rank's "
               "share) must be even",
               (long long)g->Vd, (long long)(g->nv * g->Dv));
        free(g);
        return NULL;
    }
    g->recompute = recompute != 0;
    g->x = *x;
    g->pass = "forward";
    const int C = x->C;
    g->index_h = zt_xmalloc((size_t)(C * g->Sl) * sizeof(int32_t));
    memcpy(g->index_h, x->index, (size_t)(C * g->Sl) * sizeof(int32_t));
    g->x.index = g->index_h;
    g->lin = zt_xcalloc((size_t)(g->L > 0 ? g->L : 1), sizeof(keep));
    mark_linear(g, c);
    taker t = {.alloc = 1};
    buffers(g, C, &t);
    if (g->recompute)
        for (int l = 0; l < g->L; l++)
            if (zt_q35(c)->layer_linear[l]) g->lin[l] = g->lin[g->first_lin];
    for (int l = 0; l < g->L; l++)
        if (!zt_q35(c)->layer_linear[l]) memset(&g->lin[l], 0, sizeof(keep));
    // blk_in[b] = the gathered row (rank-major [C][B][S_local]) of block row b, less the row's n S_local
    int32_t *blk_in = zt_xmalloc((size_t)g->Sb * sizeof(int32_t));
    for (int64_t b = 0; b < g->Sb; b++) blk_in[b] = -1;
    for (int r = 0; r < C; r++)
        for (int64_t t2 = 0; t2 < g->Sl; t2++) {
            const int32_t b = x->index[r * g->Sl + t2];
            if (b < 0) continue;
            if (b >= g->Sb || blk_in[b] >= 0)
                zt_fatal("GPU context parallelism, Qwen3.5: block position %d held twice or past %lld", b,
                         (long long)g->Sb);
            blk_in[b] = (int32_t)(r * g->Nl + t2);
        }
    for (int64_t b = 0; b < g->Sb; b++)
        if (blk_in[b] < 0) zt_fatal("GPU context parallelism, Qwen3.5: block position %lld held by no rank", (long long)b);
    cudaStream_t st = (cudaStream_t)stream;
    ZT_CUDA_CHECK(cudaMemcpyAsync(g->blk_in, blk_in, (size_t)g->Sb * 4, cudaMemcpyHostToDevice, st));
    ZT_CUDA_CHECK(cudaMemcpyAsync(g->index, g->index_h, (size_t)(C * g->Sl) * 4, cudaMemcpyHostToDevice, st));
    ZT_CUDA_CHECK(cudaMemsetAsync(g->in_mine, 0, (size_t)(2 * g->Nl * g->Wp), st));  // the pad word, sent as 0
    ZT_CUDA_CHECK(cudaMemsetAsync(g->pos_blk, 0, (size_t)(4 * g->Nb), st));
    ZT_CUDA_CHECK(cudaStreamSynchronize(st));  // blk_in is pageable host memory, freed next
    free(blk_in);
    if (any_full(c)) {
        g->adm = att_dims(c, B, g->Sl, attention);
        if (!(g->att = zt_qwen3_cuda_cx_create(x, &g->adm, stream))) {
            zt_q35_gcx_free(g);
            return NULL;
        }
        g->adm.cx = g->att;
    }
    return g;
}

void zt_q35_gcx_free(zt_q35_gcx *g) {
    if (!g) return;
    for (int l = 0; l < g->L; l++) {
        keep *k = &g->lin[l];
        if (!k->xs || (g->recompute && l != g->first_lin)) continue;
        void *p[] = {k->xs, k->pre, k->lq, k->lk, k->lq_n, k->lk_n, k->lv, k->lq_r, k->lk_r, k->asub, k->beta, k->g,
                     k->saved};
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) zt_cuda_free(p[i]);
    }
    void *w[] = {g->blk_in, g->index, g->pos_all, g->pos_blk, g->in_mine, g->in_all, g->in_blk, g->wsub, g->dwsub,
                 g->conv_out, g->bsub, g->o_sub, g->o_blk, g->o_all32, g->o_mine32, g->d_all, g->dlqn, g->dlkn,
                 g->dlq, g->dlk, g->dlv, g->dgd, g->dbeta, g->dbs, g->das, g->dconv, g->dxs, g->g_blk, g->g_all32,
                 g->g_mine32, g->g_mine};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (w[i]) zt_cuda_free(w[i]);
    zt_qwen3_cuda_cx_free(g->att);
    free(g->index_h), free(g->lin), free(g);
}

void zt_q35_gcx_at(zt_q35_gcx *g, int layer, const char *pass) {
    g->layer = layer, g->pass = pass;
    if (g->att) g->att->layer = layer, g->att->pass = pass;
}

zt_qwen3_cuda_cx *zt_q35_gcx_attention(zt_q35_gcx *g) { return g->att; }

// Rank r's held rows of a [B, Sb, w] bf16 block matrix, rank-major in fp32 (the reduce-scatter's input):
// the block rows each rank holds (padding: 0).
static void held_rows_f32(const zt_q35_gcx *g, void *st, float *all, const zt_bf16 *blk, int64_t w) {
    for (int r = 0; r < g->x.C; r++)
        zt_cuda_rows_gather_to_f32(st, all + r * g->Nl * w, blk, g->index + r * g->Sl, g->B, g->Sl, g->Sb, w);
}

// My channels' rows of the conv weight [Cch, K] (q, k of my key heads, v of my value heads) into wsub [Cs, K].
static void conv_weight(zt_q35_gcx *g, void *stream, const zt_bf16 *wconv) {
    cudaStream_t st = (cudaStream_t)stream;
    const int64_t K = g->K, nq = g->nq, nvd = g->nv * g->Dv;
    ZT_CUDA_CHECK(cudaMemcpyAsync(g->wsub, wconv + g->k0 * g->Dk * K, (size_t)(nq * K) * 2, cudaMemcpyDeviceToDevice, st));
    ZT_CUDA_CHECK(cudaMemcpyAsync(g->wsub + nq * K, wconv + (g->Kd + g->k0 * g->Dk) * K, (size_t)(nq * K) * 2,
                                  cudaMemcpyDeviceToDevice, st));
    ZT_CUDA_CHECK(cudaMemcpyAsync(g->wsub + 2 * nq * K, wconv + (2 * g->Kd + g->v0 * g->Dv) * K, (size_t)(nvd * K) * 2,
                                  cudaMemcpyDeviceToDevice, st));
}

void zt_q35_gcx_mix_fwd(zt_q35_gcx *g, void *stream, const int32_t *pos, const zt_bf16 *qkv, const float *b,
                        const float *a, const zt_bf16 *wconv, const zt_bf16 *A_log, const zt_bf16 *dt, zt_bf16 *core) {
    keep *k = &g->lin[g->layer];
    const int64_t Nb = g->Nb, Nl = g->Nl, Wp = g->Wp, Cch = g->Cch, Hv = g->Hv, nv = g->nv, Cs = g->Cs, nq = g->nq;
    const int64_t nvd = nv * g->Dv;
    if (!pos) zt_fatal("GPU context parallelism, Qwen3.5: the layer needs the held tokens' positions");
    if (!k->xs) zt_fatal("GPU context parallelism, Qwen3.5: layer %d is not a linear layer", g->layer);
    char what[96];
    if (g->layer == g->first_lin && !strcmp(g->pass, "forward")) {  // the micro-batch's block positions, once
        g->x.gather(g->x.ctx, (const zt_bf16 *)pos, (zt_bf16 *)g->pos_all, 2 * Nl, "positions context all-gather");
        zt_cuda_rows_gather(stream, g->pos_blk, g->pos_all, g->blk_in, g->B, g->Sb, g->Sl, 1);
    }
    // qkv | b | a of each held token (b, a: the fp32 values' bytes), gathered and placed at their block rows
    zt_cuda_copy_cols(stream, g->in_mine, Wp, qkv, Cch, Nl, Cch);
    zt_cuda_copy_cols(stream, g->in_mine + Cch, Wp, (const zt_bf16 *)b, 2 * Hv, Nl, 2 * Hv);
    zt_cuda_copy_cols(stream, g->in_mine + Cch + 2 * Hv, Wp, (const zt_bf16 *)a, 2 * Hv, Nl, 2 * Hv);
    snprintf(what, sizeof what, "layer %d conv input|b|a context all-gather (%s)", g->layer, g->pass);
    g->x.gather(g->x.ctx, g->in_mine, g->in_all, Nl * Wp, what);
    zt_cuda_rows_gather(stream, g->in_blk, g->in_all, g->blk_in, g->B, g->Sb, g->Sl, Wp / 2);
    // my channels: q, k of my key heads, v of my value heads
    zt_cuda_copy_cols(stream, k->xs, Cs, g->in_blk + g->k0 * g->Dk, Wp, Nb, nq);
    zt_cuda_copy_cols(stream, k->xs + nq, Cs, g->in_blk + g->Kd + g->k0 * g->Dk, Wp, Nb, nq);
    zt_cuda_copy_cols(stream, k->xs + 2 * nq, Cs, g->in_blk + 2 * g->Kd + g->v0 * g->Dv, Wp, Nb, nvd);
    conv_weight(g, stream, wconv);
    zt_cuda_conv1d_silu_fwd(stream, g->conv_out, k->pre, k->xs, g->wsub, g->pos_blk, g->B, g->Sb, Cs, g->K);
    zt_cuda_copy_cols(stream, k->lq, nq, g->conv_out, Cs, Nb, nq);
    zt_cuda_copy_cols(stream, k->lk, nq, g->conv_out + nq, Cs, Nb, nq);
    zt_cuda_copy_cols(stream, k->lv, nvd, g->conv_out + 2 * nq, Cs, Nb, nvd);
    zt_cuda_l2norm_fwd(stream, k->lq_n, k->lq_r, k->lq, Nb * g->nk, g->Dk, 1e-6f);
    zt_cuda_l2norm_fwd(stream, k->lk_n, k->lk_r, k->lk, Nb * g->nk, g->Dk, 1e-6f);
    // the gates of my heads from the block's b, a (fp32 words)
    zt_cuda_copy_cols(stream, (zt_bf16 *)g->bsub, 2 * nv, g->in_blk + Cch + 2 * g->v0, Wp, Nb, 2 * nv);
    zt_cuda_copy_cols(stream, (zt_bf16 *)k->asub, 2 * nv, g->in_blk + Cch + 2 * Hv + 2 * g->v0, Wp, Nb, 2 * nv);
    zt_cuda_delta_gates_fwd(stream, k->beta, k->g, g->bsub, k->asub, A_log + g->v0, dt + g->v0, Nb, nv);
    zt_cuda_delta_fwd(stream, g->o_sub, k->saved, k->lq_n, k->lk_n, k->lv, k->g, k->beta, g->pos_blk, g->B, g->Sb,
                      g->nk, nv, g->Dk, g->Dv);
    // my heads' output (zeros in the others') back to each rank's held tokens
    ZT_CUDA_CHECK(cudaMemsetAsync(g->o_blk, 0, (size_t)(2 * Nb * g->Vd), (cudaStream_t)stream));
    zt_cuda_copy_cols(stream, g->o_blk + g->v0 * g->Dv, g->Vd, g->o_sub, nvd, Nb, nvd);
    held_rows_f32(g, stream, g->o_all32, g->o_blk, g->Vd);
    snprintf(what, sizeof what, "layer %d delta output context reduce-scatter (%s)", g->layer, g->pass);
    g->x.scatter(g->x.ctx, g->o_all32, g->o_mine32, Nl * g->Vd, what);
    zt_cuda_f32_to_bf16(core, g->o_mine32, Nl * g->Vd, stream);
}

void zt_q35_gcx_mix_bwd(zt_q35_gcx *g, zt_cuda_ctx *c, void *stream, const zt_bf16 *dcore, const zt_bf16 *wconv,
                        float *dwconv, const zt_bf16 *A_log, float *dA_log, const zt_bf16 *dt, float *ddt,
                        zt_bf16 *dqkv, zt_bf16 *db, zt_bf16 *da) {
    const keep *k = &g->lin[g->layer];
    const int64_t Nb = g->Nb, Nl = g->Nl, Cch = g->Cch, Hv = g->Hv, nv = g->nv, Cs = g->Cs, nq = g->nq, K = g->K;
    const int64_t nvd = nv * g->Dv, Wq = g->Wq;
    cudaStream_t st = (cudaStream_t)stream;
    if (!k->xs) zt_fatal("GPU context parallelism, Qwen3.5: layer %d is not a linear layer", g->layer);
    char what[96];
    snprintf(what, sizeof what, "layer %d delta output gradient context all-gather", g->layer);
    g->x.gather(g->x.ctx, dcore, g->d_all, Nl * g->Vd, what);
    zt_cuda_rows_gather(stream, g->o_blk, g->d_all, g->blk_in, g->B, g->Sb, g->Sl, g->Vd / 2);
    zt_cuda_copy_cols(stream, g->o_sub, nvd, g->o_blk + g->v0 * g->Dv, g->Vd, Nb, nvd);
    zt_cuda_delta_bwd(c, stream, g->dlqn, g->dlkn, g->dlv, g->dgd, g->dbeta, g->o_sub, k->saved, k->lq_n, k->lk_n,
                      k->lv, k->g, k->beta, g->pos_blk, g->B, g->Sb, g->nk, nv, g->Dk, g->Dv);
    zt_cuda_delta_gates_bwd(stream, g->dbs, g->das, dA_log + g->v0, ddt + g->v0, g->dgd, g->dbeta, k->asub, k->beta,
                            k->g, A_log + g->v0, dt + g->v0, Nb, nv);
    zt_cuda_l2norm_bwd(stream, g->dlq, g->dlqn, k->lq, k->lq_r, Nb * g->nk, g->Dk);
    zt_cuda_l2norm_bwd(stream, g->dlk, g->dlkn, k->lk, k->lk_r, Nb * g->nk, g->Dk);
    zt_cuda_copy_cols(stream, g->dconv, Cs, g->dlq, nq, Nb, nq);
    zt_cuda_copy_cols(stream, g->dconv + nq, Cs, g->dlk, nq, Nb, nq);
    zt_cuda_copy_cols(stream, g->dconv + 2 * nq, Cs, g->dlv, nvd, Nb, nvd);
    conv_weight(g, stream, wconv);
    ZT_CUDA_CHECK(cudaMemsetAsync(g->dwsub, 0, (size_t)(4 * Cs * K), st));
    zt_cuda_conv1d_silu_bwd(c, stream, g->dxs, g->dwsub, g->dconv, k->pre, k->xs, g->wsub, g->pos_blk, g->B, g->Sb, Cs,
                            K);
    // my channels' rows of the conv weight's gradient (+=, as the unsplit kernel adds its sum)
    float *dq0 = dwconv + g->k0 * g->Dk * K, *dk0 = dwconv + (g->Kd + g->k0 * g->Dk) * K;
    float *dv0 = dwconv + (2 * g->Kd + g->v0 * g->Dv) * K;
    zt_cuda_add(stream, dq0, dq0, g->dwsub, ZT_F32, nq * K);
    zt_cuda_add(stream, dk0, dk0, g->dwsub + nq * K, ZT_F32, nq * K);
    zt_cuda_add(stream, dv0, dv0, g->dwsub + 2 * nq * K, ZT_F32, nvd * K);
    // every block token's gradient of qkv | b | a in my slots (zeros elsewhere), to the held tokens
    ZT_CUDA_CHECK(cudaMemsetAsync(g->g_blk, 0, (size_t)(2 * Nb * Wq), st));
    zt_cuda_copy_cols(stream, g->g_blk + g->k0 * g->Dk, Wq, g->dxs, Cs, Nb, nq);
    zt_cuda_copy_cols(stream, g->g_blk + g->Kd + g->k0 * g->Dk, Wq, g->dxs + nq, Cs, Nb, nq);
    zt_cuda_copy_cols(stream, g->g_blk + 2 * g->Kd + g->v0 * g->Dv, Wq, g->dxs + 2 * nq, Cs, Nb, nvd);
    zt_cuda_copy_cols(stream, g->g_blk + Cch + g->v0, Wq, g->dbs, nv, Nb, nv);
    zt_cuda_copy_cols(stream, g->g_blk + Cch + Hv + g->v0, Wq, g->das, nv, Nb, nv);
    held_rows_f32(g, stream, g->g_all32, g->g_blk, Wq);
    snprintf(what, sizeof what, "layer %d conv input|b|a gradient context reduce-scatter", g->layer);
    g->x.scatter(g->x.ctx, g->g_all32, g->g_mine32, Nl * Wq, what);
    zt_cuda_f32_to_bf16(g->g_mine, g->g_mine32, Nl * Wq, stream);
    zt_cuda_copy_cols(stream, dqkv, Cch, g->g_mine, Wq, Nl, Cch);
    zt_cuda_copy_cols(stream, db, Hv, g->g_mine + Cch, Wq, Nl, Hv);
    zt_cuda_copy_cols(stream, da, Hv, g->g_mine + Cch + Hv, Wq, Nl, Hv);
}
