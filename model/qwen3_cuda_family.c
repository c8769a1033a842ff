// Qwen3's GPU passes (model/family_cuda.h): the activations of one micro-batch and the
// unit passes of model/qwen3_cuda_layer.c on them, for the GPU FSDP backend. With
// recompute, one layer's saved activations serve every layer: its forward runs again,
// from the kept input, right before its backward. Under context parallelism (opts.cx) a row is
// this rank's S_local tokens of a block, RoPE's table covers the block, and each layer's attention
// runs across the split (model/qwen3_cuda_context.c). With the cuDNN attention and packed
// documents, set_positions turns each micro-batch's host positions into cuDNN's variable-length
// batch (kernels/cuda/cudnn_docs.h) and uploads it ahead of the micro-batch (compiled only).
// defines: zt_qwen3_cuda_family
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cuda/cudnn_docs.h"
#include "kernels/cuda/attention/dispatch.h"
#include "kernels/cuda/zt_cuda.h"
#include "kernels/cuda/zt_cuda_check.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "model/family_cuda.h"
#include "model/layout.h"
#include "model/qwen3_cuda_layer.h"
#include "model/rope.h"

typedef struct {
    zt_cuda_ctx *ctx;
    void *cs;                        // the compute stream
    zt_qwen3_cuda_dims dm;
    int L;
    int64_t V;
    int64_t norm_off, lm_off;        // the head unit's tensors: final norm, lm_head (untied)
    int recompute;
    zt_qwen3_cuda_acts *acts;        // [L], or [1] with recompute
    zt_qwen3_cuda_work work;
    zt_qwen3_cuda_head_acts hacts;
    zt_bf16 **X;                     // [L+1] residual stream, X[l] = layer l's input
    zt_bf16 *dx;                     // activation gradient
    float *rope_cos, *rope_sin;      // [S_block, D/2]
    int64_t S_attn;                  // the keys attention ranges over: S, or the block's S under context parallelism
    int64_t cx_bytes;                // what the context split's buffers took (zt_cuda_malloc_bytes around them)
    // cuDNN with packed documents (set_positions): the micro-batch's table (model/blocks_cuda.h);
    // zeroed: not cuDNN.
    zt_cuda_docs_stage docs;
} qwen3_gpu;

static int check(const zt_model_config *c, int64_t S) {
    if (c->head_dim % 2 || S < 2)
        return zt_err("GPU FSDP engine: head_dim (%d) must be even and seq_len (%lld) >= 2", c->head_dim,
                      (long long)S);
    return 0;
}

static void destroy(void *mv);

static void *create(const zt_model_config *c, zt_cuda_ctx *ctx, void *stream, int64_t B, int64_t S,
                    const zt_family_cuda_opts *o) {
    const int64_t S_block = o->cx ? o->cx->S : S;
    if (check(c, S_block) != 0 || (o->cx && zt_qwen3_cuda_cx_check(o->cx, o->attention) != 0)) return NULL;
    qwen3_gpu *m = zt_xcalloc(1, sizeof *m);
    m->S_attn = S_block;
    const int L = c->num_layers;
    const int64_t N = B * S, d = c->hidden_size;
    m->ctx = ctx;
    m->cs = stream;
    m->L = L;
    m->V = c->vocab_size;
    zt_model_layout lay;
    zt_qwen3_layout_init(&lay, c);
    m->norm_off = lay.units[L + 1].t[0].offset;
    m->lm_off = lay.units[L + 1].ntensors > 1 ? lay.units[L + 1].t[1].offset : -1;
    zt_model_layout_free(&lay);
    m->dm = (zt_qwen3_cuda_dims){.B = B, .S = S, .N = N, .d = d, .F = c->intermediate_size, .H = c->num_heads,
                                 .Hkv = c->num_kv_heads, .D = c->head_dim, .eps = (float)c->rms_norm_eps,
                                 .attention = o->attention};
    m->recompute = o->recompute != 0;
    const int nacts = m->recompute ? (L > 0) : L;
    m->acts = zt_xcalloc((size_t)(L > 0 ? L : 1), sizeof *m->acts);
    for (int l = 0; l < nacts; l++) zt_qwen3_cuda_acts_alloc(&m->acts[l], &m->dm);
    zt_qwen3_cuda_work_alloc(&m->work, &m->dm);
    m->X = zt_xcalloc((size_t)L + 1, sizeof(zt_bf16 *));
    for (int l = 0; l <= L; l++) m->X[l] = zt_cuda_malloc((size_t)(N * d) * 2);
    m->hacts.xf = zt_cuda_malloc((size_t)(N * d) * 2);
    m->hacts.dln = zt_cuda_malloc((size_t)(N * d) * 2);
    m->dx = zt_cuda_malloc((size_t)(N * d) * 2);
    m->hacts.rstd = zt_cuda_malloc((size_t)N * 4);
    m->rope_cos = zt_cuda_malloc((size_t)(S_block * c->head_dim / 2) * 4);
    m->rope_sin = zt_cuda_malloc((size_t)(S_block * c->head_dim / 2) * 4);
    zt_rope_freqs freqs;  // plain or YaRN, as the CPU model's table (model/rope.h)
    zt_qwen3_rope_freqs(c, &freqs);
    zt_cuda_rope_table_freqs(stream, m->rope_cos, m->rope_sin, S_block, c->head_dim, &freqs);
    if (o->attention == ZT_ATTN_CUDNN && !o->cx) zt_cuda_docs_stage_init(&m->docs, N);  // set_positions' buffers
    const int64_t before = zt_cuda_malloc_bytes();
    if (o->cx && !(m->dm.cx = zt_qwen3_cuda_cx_create(o->cx, &m->dm, stream))) {
        destroy(m);
        return NULL;
    }
    m->cx_bytes = zt_cuda_malloc_bytes() - before;
    return m;
}

static void destroy(void *mv) {
    qwen3_gpu *m = mv;
    if (!m) return;
    zt_qwen3_cuda_cx_free(m->dm.cx);
    zt_cuda_docs_stage_free(&m->docs);
    for (int l = 0; l < (m->recompute ? (m->L > 0) : m->L); l++) zt_qwen3_cuda_acts_free(&m->acts[l]);
    zt_qwen3_cuda_work_free(&m->work);
    for (int l = 0; l <= m->L; l++) zt_cuda_free(m->X[l]);
    void *dv[] = {m->hacts.xf, m->hacts.dln, m->dx, m->hacts.rstd, m->rope_cos, m->rope_sin};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) zt_cuda_free(dv[i]);
    free(m->acts), free(m->X), free(m);
}

// The attention's scratch: O(H*S) for the tiled kernels (attention_tc.cu, attention_tiled.cu), one KV-head
// group's S x S scores for the GEMM path (attention.cu); cuDNN grows its own workspace. Under
// context parallelism the tiled kernels' S is the held rows' (their queries), the GEMM path's the
// whole block's (it runs over it). Or the head's or a norm's when larger (scratch_for).
static size_t scratch_for(const zt_qwen3_cuda_dims *dm, int64_t S_attn, int64_t V);
static size_t scratch_bytes(const void *mv) {
    const qwen3_gpu *m = mv;
    return scratch_for(&m->dm, m->S_attn, m->V);
}

// The largest scratch one op of a step takes (the engine reserves it before the first): the attention
// (GEMM: over the S_attn keys; tiled: the dm->S held rows'), the head's lm_head chunk, the norms' dw partials.
static size_t scratch_for(const zt_qwen3_cuda_dims *dm, int64_t S_attn, int64_t V) {
    const int64_t N = dm->N, H = dm->H, Hkv = dm->Hkv, D = dm->D;
    const size_t need[] = {zt_attn_scratch_bytes(dm->attention, dm->S, S_attn, H, Hkv, D),
                           zt_cuda_lmhead_xent_scratch_bytes(N, V), zt_cuda_rmsnorm_bwd_scratch_bytes(N, dm->d),
                           zt_cuda_rmsnorm_bwd_scratch_bytes(N * H, D), zt_cuda_rmsnorm_bwd_scratch_bytes(N * Hkv, D)};
    size_t s = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) s = need[i] > s ? need[i] : s;
    return s;
}

static size_t scratch_bytes_for(const zt_model_config *c, int64_t B, int64_t S, const zt_family_cuda_opts *o) {
    const zt_qwen3_cuda_dims dm = {.B = B, .S = S, .N = B * S, .d = c->hidden_size, .H = c->num_heads,
                                   .Hkv = c->num_kv_heads, .D = c->head_dim, .attention = o->attention};
    return scratch_for(&dm, o->cx ? o->cx->S : S, c->vocab_size);
}

// What create allocates, listed again from the shapes (the engine measures create's own calls:
// plan_cuda_memory holds the two equal): per kept layer (all L, or one with recompute) the bf16
// ln1, q_pre, k_pre, q, k, v, att, x_mid, ln2, gate, up, h and the fp32 rstd1, rstd2, q/k-norm rstds
// and lse; the backward workspace of one layer; the residual stream X[0..L]; the head's xf, dln and
// rstd, the activation gradient dx; RoPE's cos and sin over the block; cuDNN's document table; the
// context split's buffers.
static int64_t act_bytes_for(const zt_model_config *c, int64_t B, int64_t S, const zt_family_cuda_opts *o,
                             int64_t *context) {
    const int64_t L = c->num_layers, N = B * S, d = c->hidden_size, F = c->intermediate_size, H = c->num_heads;
    const int64_t Hkv = c->num_kv_heads, HD = H * c->head_dim, KVD = Hkv * c->head_dim;
    const int64_t S_block = o->cx ? o->cx->S : S;
    const int64_t layer = 2 * N * (3 * d + 3 * HD + 3 * KVD + 3 * F) + 4 * N * (2 + H + Hkv) + 4 * B * H * S;
    const int64_t work = 2 * N * (3 * F + 2 * d + 3 * HD + 3 * KVD);
    const int64_t head = 2 * N * d * (L + 1) + 3 * 2 * N * d + 4 * N;  // X[0..L]; xf, dln, dx; rstd
    const int64_t rope = 2 * 4 * (S_block * c->head_dim / 2);
    *context = 0;
    if (o->cx) {
        const zt_qwen3_cuda_dims dm = {.B = B, .S = S, .N = N, .d = d, .F = F, .H = H, .Hkv = Hkv, .D = c->head_dim,
                                       .attention = o->attention};
        *context = zt_qwen3_cuda_cx_bytes(&dm, o->cx->C, o->cx->S);
    }
    // cuDNN with packed documents: set_positions' device table (create allocates it for any cuDNN run)
    const int64_t docs = o->attention == ZT_ATTN_CUDNN && !o->cx ? zt_cuda_docs_stage_bytes(N) : 0;
    return (o->recompute ? (L > 0) : L) * layer + work + head + rope + docs + *context;
}

static int64_t context_bytes(const void *mv) { return ((const qwen3_gpu *)mv)->cx_bytes; }

// Packed documents with cuDNN: its variable-length batch (cuDNN >= 9.6.0; compiled only: never
// run on a GPU), refused naming the versions below that or without cuDNN (model/blocks_cuda.h).
static int check_data(const void *mv, int isolated) {
    return zt_cuda_docs_check(((const qwen3_gpu *)mv)->dm.attention, isolated);
}

// The micro-batch's document table for the cuDNN attention (model/blocks_cuda.h zt_cuda_docs_stage).
static int set_positions(void *mv, const int32_t *pos) {
    qwen3_gpu *m = mv;
    if (m->dm.attention != ZT_ATTN_CUDNN || m->dm.cx || !pos) return 0;
    m->dm.docs = NULL, m->dm.docs_table = NULL;
    if (zt_cuda_docs_stage_put(&m->docs, m->cs, pos, &m->dm) != 0) return -1;
    m->dm.docs = &m->docs.table, m->dm.docs_table = m->docs.d;
    return 0;
}

static void embed_fwd(void *mv, const zt_bf16 *p, const uint32_t *ids) {
    qwen3_gpu *m = mv;
    zt_cuda_embedding_fwd(m->cs, m->X[0], p, ids, m->dm.N, m->dm.d, m->V);
}

// The layer and pass the context exchange's labels name.
static void cx_at(qwen3_gpu *m, int l, const char *pass) {
    if (m->dm.cx) m->dm.cx->layer = l, m->dm.cx->pass = pass;
}

static void layer_fwd(void *mv, int l, const zt_bf16 *p, const int32_t *pos) {
    qwen3_gpu *m = mv;
    cx_at(m, l, "forward");
    zt_qwen3_cuda_layer_fwd(m->ctx, m->cs, &m->dm, p, m->rope_cos, m->rope_sin, pos, m->X[l], m->X[l + 1],
                            &m->acts[m->recompute ? 0 : l], NULL);
}

static void head(void *mv, const zt_bf16 *p, const zt_bf16 *emb, const int32_t *targets, float scale, double *loss,
                 float *dhead, float *demb) {
    qwen3_gpu *m = mv;
    const zt_bf16 *lm_w = emb ? emb : p + m->lm_off;
    float *dlm = dhead ? (demb ? demb : dhead + m->lm_off) : NULL;
    zt_qwen3_cuda_head_fwd_bwd(m->ctx, m->cs, &m->dm, m->V, p + m->norm_off, lm_w, m->X[m->L], targets, scale, loss,
                               &m->hacts, dhead ? dhead + m->norm_off : NULL, dlm, m->dx);
}

static void layer_bwd(void *mv, int l, const zt_bf16 *p, float *dp, const int32_t *pos) {
    qwen3_gpu *m = mv;
    cx_at(m, l, "recompute");
    if (m->recompute)  // the saved tensors again, from the kept input (X[l+1] is rewritten
                       // with the same values: the ops are deterministic)
        zt_qwen3_cuda_layer_fwd(m->ctx, m->cs, &m->dm, p, m->rope_cos, m->rope_sin, pos, m->X[l], m->X[l + 1],
                                &m->acts[0], NULL);
    zt_qwen3_cuda_layer_bwd(m->ctx, m->cs, &m->dm, p, dp, m->rope_cos, m->rope_sin, pos, m->X[l],
                            &m->acts[m->recompute ? 0 : l], &m->work, m->dx, NULL);
}

// embedding backward: token ids only, deterministic (no float atomics)
static void embed_bwd(void *mv, float *dp, const uint32_t *ids) {
    qwen3_gpu *m = mv;
    zt_cuda_embedding_bwd(m->cs, dp, m->dx, ids, m->dm.N, m->dm.d, m->V);
}

const zt_family_cuda zt_qwen3_cuda_family = {
    .name = "qwen3",
    .check = check,
    .create = create,
    .destroy = destroy,
    .scratch_bytes = scratch_bytes,
    .act_bytes_for = act_bytes_for,
    .scratch_bytes_for = scratch_bytes_for,
    .context_bytes = context_bytes,
    .check_data = check_data,
    .set_positions = set_positions,
    .embed_fwd = embed_fwd,
    .layer_fwd = layer_fwd,
    .head = head,
    .layer_bwd = layer_bwd,
    .embed_bwd = embed_bwd,
};
