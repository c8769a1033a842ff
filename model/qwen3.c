// Qwen3 forward and backward, one FSDP unit at a time, on top of the op table.
// The residual stream x[l] of every layer and each layer's activations are kept
// for backward (no recomputation: gradient checkpointing is for memory pressure only),
// except attention's probabilities: it keeps each row's softmax max and 1/sum and
// recomputes them (kernels/cpu/attention.c), so nothing of size S x S is held.
// defines: zt_qwen3_create/destroy, zt_qwen3_{embed,layer,head}_{fwd,bwd}, zt_qwen3_fwd_bwd, zt_qwen3_logits,
//          zt_qwen3_family (the family table: model/family.h)
#include "model/qwen3.h"

#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "model/flops.h"
#include "model/rope.h"
#include "base/common.h"

static float *falloc(void *mv, int64_t n) {  // counted in act_bytes
    zt_qwen3 *m = mv;
    m->act_bytes += n * (int64_t)sizeof(float);
    return zt_xcalloc((size_t)n, sizeof(float));
}
#define FALLOC(n) falloc(m, (n))

int zt_qwen3_create(zt_qwen3 *m, const zt_model_config *cfg, const zt_ops *ops, int64_t B, int64_t S) {
    return zt_qwen3_create_cx(m, cfg, ops, B, S, NULL);
}

int zt_qwen3_create_cx(zt_qwen3 *m, const zt_model_config *cfg, const zt_ops *ops, int64_t B, int64_t S_block,
                       const zt_family_context *cx) {
    memset(m, 0, sizeof *m);
    if (B <= 0 || S_block < 2) return zt_err("micro-batch %lld x seq_len %lld: need at least one block of 2 tokens",
                                             (long long)B, (long long)S_block);
    if (cx && (cx->C < 2 || cx->S != S_block || cx->S_local < 1 || cx->rank < 0 || cx->rank >= cx->C || !cx->index ||
               !cx->gather || !cx->scatter))
        return zt_err("context parallelism: a split of %d ranks (rank %d) holding %lld of %lld tokens per block does "
                      "not fit blocks of %lld tokens", cx->C, cx->rank, (long long)cx->S_local, (long long)cx->S,
                      (long long)S_block);
    const int64_t S = cx ? cx->S_local : S_block;  // the tokens of a block this model holds
    zt_qwen3_layout_init(&m->lay, cfg);
    m->lay.cfg.family = &zt_qwen3_family;  // a config built by hand may name none: this model is Qwen3
    m->ops = ops;
    m->B = B;
    m->S = S;
    m->S_block = S_block;
    m->N = B * S;
    const int64_t N = m->N, d = cfg->hidden_size, F = cfg->intermediate_size, D = cfg->head_dim;
    const int64_t H = cfg->num_heads, Hkv = cfg->num_kv_heads, L = cfg->num_layers;
    m->rope_cos = FALLOC(S_block * D / 2);  // positions reach the whole block's
    m->rope_sin = FALLOC(S_block * D / 2);
    zt_rope_freqs freqs;
    zt_qwen3_rope_freqs(cfg, &freqs);
    zt_rope_table_freqs(m->rope_cos, m->rope_sin, S_block, D, &freqs);
    if (cx) {
        m->cp = 1;
        m->cx = *cx;
        zt_qwen3_cx_alloc(m, falloc);
    }
    m->x = zt_xcalloc((size_t)L + 1, sizeof(float *));
    for (int64_t l = 0; l <= L; l++) m->x[l] = FALLOC(N * d);
    m->acts = zt_xcalloc((size_t)L, sizeof(zt_layer_acts));
    for (int64_t l = 0; l < L; l++) {
        zt_layer_acts *a = &m->acts[l];
        a->ln1 = FALLOC(N * d);
        a->rstd1 = FALLOC(N);
        a->q_pre = FALLOC(N * H * D);
        a->k_pre = FALLOC(N * Hkv * D);
        a->q = FALLOC(N * H * D);
        a->k = FALLOC(N * Hkv * D);
        a->v = FALLOC(N * Hkv * D);
        a->qn_rstd = FALLOC(N * H);
        a->kn_rstd = FALLOC(N * Hkv);
        a->att_stats = FALLOC(B * H * S * 2);  // softmax max and 1/sum per query row
        a->att = FALLOC(N * H * D);
        a->x_mid = FALLOC(N * d);
        a->ln2 = FALLOC(N * d);
        a->rstd2 = FALLOC(N);
        a->gate = FALLOC(N * F);
        a->up = FALLOC(N * F);
        a->h = FALLOC(N * F);
    }
    m->head_xf = FALLOC(N * d);
    m->head_rstd = FALLOC(N);
    m->w_dh = FALLOC(N * F);
    m->w_dg = FALLOC(N * F);
    m->w_du = FALLOC(N * F);
    m->w_dln = FALLOC(N * d);
    m->w_dmid = FALLOC(N * d);
    m->w_datt = FALLOC(N * H * D);
    m->w_dq = FALLOC(N * H * D);
    m->w_dk = FALLOC(N * Hkv * D);
    m->w_dv = FALLOC(N * Hkv * D);
    m->w_dqp = FALLOC(N * H * D);
    m->w_dkp = FALLOC(N * Hkv * D);
    m->targets = zt_xcalloc((size_t)N, sizeof(int32_t));
    m->ids = zt_xcalloc((size_t)N, sizeof(uint32_t));
    m->pos = zt_xcalloc((size_t)N, sizeof(int32_t));
    return 0;
}

void zt_qwen3_destroy(zt_qwen3 *m) {
    if (!m->x) return;
    const int L = m->lay.cfg.num_layers;
    for (int l = 0; l <= L; l++) free(m->x[l]);
    free(m->x);
    for (int l = 0; l < L; l++) {
        zt_layer_acts *a = &m->acts[l];
        float *bufs[] = {a->ln1, a->rstd1, a->q_pre, a->k_pre, a->q, a->k, a->v, a->qn_rstd, a->kn_rstd,
                         a->att_stats, a->att, a->x_mid, a->ln2, a->rstd2, a->gate, a->up, a->h};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    }
    free(m->acts);
    float *ws[] = {m->rope_cos, m->rope_sin, m->head_xf, m->head_rstd, m->w_dh, m->w_dg, m->w_du, m->w_dln,
                   m->w_dmid, m->w_datt, m->w_dq, m->w_dk, m->w_dv, m->w_dqp, m->w_dkp};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) free(ws[i]);
    free(m->targets);
    free(m->ids);
    free(m->pos);
    zt_qwen3_cx_free(m);
    zt_model_layout_free(&m->lay);
    memset(m, 0, sizeof *m);
}

void zt_qwen3_targets(const uint32_t *tokens, int64_t B, int64_t S, int32_t *targets) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < S; t++) targets[b * S + t] = t + 1 < S ? (int32_t)tokens[b * S + t + 1] : -1;
}

void zt_qwen3_embed_fwd(zt_qwen3 *m, const float *emb, const uint32_t *tokens) {
    m->ops->embedding_fwd(m->x[0], emb, tokens, m->N, m->lay.cfg.hidden_size);
}

void zt_qwen3_embed_bwd(zt_qwen3 *m, const uint32_t *tokens, const float *dx, float *demb) {
    m->ops->embedding_bwd(demb, dx, tokens, m->N, m->lay.cfg.hidden_size);
}

#define W(idx) (params + u->t[(idx)].offset)
#define DW(idx) (dparams + u->t[(idx)].offset)

// The engine's progress hook between ops (zt_qwen3.progress).
#define TICK(m) \
    do {        \
        if ((m)->progress) (m)->progress((m)->progress_ctx); \
    } while (0)

void zt_qwen3_layer_fwd(zt_qwen3 *m, int layer, const float *params) {
    const zt_ops *op = m->ops;
    const zt_model_config *c = &m->lay.cfg;
    const zt_unit_layout *u = &m->lay.units[1 + layer];
    const int64_t N = m->N, d = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    const int64_t H = c->num_heads, Hkv = c->num_kv_heads;
    const float eps = (float)c->rms_norm_eps;
    zt_layer_acts *a = &m->acts[layer];
    const float *x = m->x[layer];
    float *y = m->x[layer + 1];

    op->rmsnorm_fwd(a->ln1, a->rstd1, x, W(ZT_L_INPUT_NORM), N, d, eps);
    TICK(m);
    op->matmul_fwd(a->q_pre, a->ln1, W(ZT_L_Q), N, d, H * D);
    TICK(m);
    op->matmul_fwd(a->k_pre, a->ln1, W(ZT_L_K), N, d, Hkv * D);
    TICK(m);
    op->matmul_fwd(a->v, a->ln1, W(ZT_L_V), N, d, Hkv * D);
    TICK(m);
    // QK-norm over head_dim, one weight shared by all heads, before RoPE.
    op->rmsnorm_fwd(a->q, a->qn_rstd, a->q_pre, W(ZT_L_QNORM), N * H, D, eps);
    TICK(m);
    op->rmsnorm_fwd(a->k, a->kn_rstd, a->k_pre, W(ZT_L_KNORM), N * Hkv, D, eps);
    TICK(m);
    const int32_t *pos = m->isolated || m->cp ? m->pos : NULL;
    op->rope_fwd(a->q, m->rope_cos, m->rope_sin, pos, m->B, m->S, H, D);
    TICK(m);
    op->rope_fwd(a->k, m->rope_cos, m->rope_sin, pos, m->B, m->S, Hkv, D);
    TICK(m);
    if (m->cp)  // the keys of the whole block: gathered over the context group
        zt_qwen3_cx_attention_fwd(m, layer, a);
    else
        op->attention_fwd(a->att, a->att_stats, a->q, a->k, a->v, pos, m->B, m->S, H, Hkv, D);
    TICK(m);
    op->matmul_fwd(a->x_mid, a->att, W(ZT_L_O), N, H * D, d);
    TICK(m);
    op->add(a->x_mid, a->x_mid, x, N * d);
    TICK(m);

    op->rmsnorm_fwd(a->ln2, a->rstd2, a->x_mid, W(ZT_L_POST_NORM), N, d, eps);
    TICK(m);
    op->matmul_fwd(a->gate, a->ln2, W(ZT_L_GATE), N, d, F);
    TICK(m);
    op->matmul_fwd(a->up, a->ln2, W(ZT_L_UP), N, d, F);
    TICK(m);
    op->swiglu_fwd(a->h, a->gate, a->up, N * F);
    TICK(m);
    op->matmul_fwd(y, a->h, W(ZT_L_DOWN), N, F, d);
    TICK(m);
    op->add(y, y, a->x_mid, N * d);
    TICK(m);
}

void zt_qwen3_layer_bwd(zt_qwen3 *m, int layer, const float *params, float *dparams, float *dx) {
    const zt_ops *op = m->ops;
    const zt_model_config *c = &m->lay.cfg;
    const zt_unit_layout *u = &m->lay.units[1 + layer];
    const int64_t N = m->N, d = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    const int64_t H = c->num_heads, Hkv = c->num_kv_heads;
    zt_layer_acts *a = &m->acts[layer];
    const float *x = m->x[layer];

    // MLP: y = x_mid + down(swiglu(gate(ln2), up(ln2)))
    op->matmul_bwd(m->w_dh, DW(ZT_L_DOWN), dx, a->h, W(ZT_L_DOWN), N, F, d, 0);
    TICK(m);
    op->swiglu_bwd(m->w_dg, m->w_du, m->w_dh, a->gate, a->up, N * F);
    TICK(m);
    op->matmul_bwd(m->w_dln, DW(ZT_L_GATE), m->w_dg, a->ln2, W(ZT_L_GATE), N, d, F, 0);
    TICK(m);
    op->matmul_bwd(m->w_dln, DW(ZT_L_UP), m->w_du, a->ln2, W(ZT_L_UP), N, d, F, 1);
    TICK(m);
    op->rmsnorm_bwd(m->w_dmid, DW(ZT_L_POST_NORM), m->w_dln, a->x_mid, W(ZT_L_POST_NORM), a->rstd2, N, d);
    TICK(m);
    op->add(m->w_dmid, m->w_dmid, dx, N * d);  // residual

    // attention: x_mid = x + o_proj(attn(rope(qnorm(q(ln1))), rope(knorm(k(ln1))), v(ln1)))
    op->matmul_bwd(m->w_datt, DW(ZT_L_O), m->w_dmid, a->att, W(ZT_L_O), N, H * D, d, 0);
    TICK(m);
    const int32_t *pos = m->isolated || m->cp ? m->pos : NULL;
    if (m->cp)  // dK/dV of the keys held elsewhere go back to their ranks
        zt_qwen3_cx_attention_bwd(m, layer, a);
    else
        op->attention_bwd(m->w_dq, m->w_dk, m->w_dv, m->w_datt, a->att, a->att_stats, a->q, a->k, a->v, pos, m->B,
                          m->S, H, Hkv, D);
    TICK(m);
    op->rope_bwd(m->w_dq, m->rope_cos, m->rope_sin, pos, m->B, m->S, H, D);
    TICK(m);
    op->rope_bwd(m->w_dk, m->rope_cos, m->rope_sin, pos, m->B, m->S, Hkv, D);
    TICK(m);
    op->rmsnorm_bwd(m->w_dqp, DW(ZT_L_QNORM), m->w_dq, a->q_pre, W(ZT_L_QNORM), a->qn_rstd, N * H, D);
    TICK(m);
    op->rmsnorm_bwd(m->w_dkp, DW(ZT_L_KNORM), m->w_dk, a->k_pre, W(ZT_L_KNORM), a->kn_rstd, N * Hkv, D);
    TICK(m);
    op->matmul_bwd(m->w_dln, DW(ZT_L_Q), m->w_dqp, a->ln1, W(ZT_L_Q), N, d, H * D, 0);
    TICK(m);
    op->matmul_bwd(m->w_dln, DW(ZT_L_K), m->w_dkp, a->ln1, W(ZT_L_K), N, d, Hkv * D, 1);
    TICK(m);
    op->matmul_bwd(m->w_dln, DW(ZT_L_V), m->w_dv, a->ln1, W(ZT_L_V), N, d, Hkv * D, 1);
    TICK(m);
    op->rmsnorm_bwd(dx, DW(ZT_L_INPUT_NORM), m->w_dln, x, W(ZT_L_INPUT_NORM), a->rstd1, N, d);
    TICK(m);
    op->add(dx, dx, m->w_dmid, N * d);  // residual
}
#undef TICK
#undef W
#undef DW

double zt_qwen3_head_fwd_bwd(zt_qwen3 *m, const float *head_params, const float *lm_w, const int32_t *targets,
                             float scale, float *dx, float *dhead, float *dlm_w) {
    const zt_ops *op = m->ops;
    const zt_model_config *c = &m->lay.cfg;
    const int64_t N = m->N, d = c->hidden_size;
    const int L = c->num_layers;
    op->rmsnorm_fwd(m->head_xf, m->head_rstd, m->x[L], head_params, N, d, (float)c->rms_norm_eps);
    double loss = op->lmhead_xent(dx ? m->w_dln : NULL, dlm_w, m->head_xf, lm_w, targets, N, d, c->vocab_size, scale);
    if (dx) op->rmsnorm_bwd(dx, dhead, m->w_dln, m->x[L], head_params, m->head_rstd, N, d);
    return loss;
}

const float *zt_qwen3_lm_head(const zt_model_layout *lay, float *const *params) {
    const int L = lay->cfg.num_layers;
    if (lay->cfg.tie_word_embeddings) return params[0];
    return params[L + 1] + lay->units[L + 1].t[1].offset;
}

double zt_qwen3_fwd_bwd(zt_qwen3 *m, float *const *params, float *const *grads, const uint32_t *tokens, float scale) {
    const int L = m->lay.cfg.num_layers;
    m->ntargets = zt_batch_words(tokens, m->B, m->S, m->isolated, m->ids, m->targets, m->pos);
    zt_qwen3_embed_fwd(m, params[0], m->ids);
    for (int l = 0; l < L; l++) zt_qwen3_layer_fwd(m, l, params[1 + l]);
    float *dx = zt_xmalloc((size_t)(m->N * m->lay.cfg.hidden_size) * sizeof(float));
    float *dlm = m->lay.cfg.tie_word_embeddings ? grads[0] : grads[L + 1] + m->lay.units[L + 1].t[1].offset;
    double loss = zt_qwen3_head_fwd_bwd(m, params[L + 1], zt_qwen3_lm_head(&m->lay, params), m->targets, scale, dx,
                                        grads[L + 1], dlm);
    for (int l = L - 1; l >= 0; l--) zt_qwen3_layer_bwd(m, l, params[1 + l], grads[1 + l], dx);
    zt_qwen3_embed_bwd(m, m->ids, dx, grads[0]);
    free(dx);
    return loss;
}

void zt_qwen3_logits(zt_qwen3 *m, float *const *params, const uint32_t *tokens, float *logits) {
    const zt_model_config *c = &m->lay.cfg;
    const int L = c->num_layers;
    m->ntargets = zt_batch_words(tokens, m->B, m->S, m->isolated, m->ids, m->targets, m->pos);
    zt_qwen3_embed_fwd(m, params[0], m->ids);
    for (int l = 0; l < L; l++) zt_qwen3_layer_fwd(m, l, params[1 + l]);
    m->ops->rmsnorm_fwd(m->head_xf, m->head_rstd, m->x[L], params[L + 1], m->N, c->hidden_size,
                        (float)c->rms_norm_eps);
    m->ops->matmul_fwd(logits, m->head_xf, zt_qwen3_lm_head(&m->lay, params), m->N, c->hidden_size, c->vocab_size);
}

// ---- the family table (model/family.h): the CPU passes on a bound model ---------------------

static void *cpu_create(const zt_model_config *c, const zt_ops *ops, int64_t B, int64_t S,
                        const zt_family_context *cx) {
    zt_qwen3 *m = zt_xcalloc(1, sizeof *m);
    if (zt_qwen3_create_cx(m, c, ops, B, S, cx) != 0) {
        free(m);
        return NULL;
    }
    return m;
}

static void cpu_destroy(void *m) {
    if (!m) return;
    zt_qwen3_destroy(m);
    free(m);
}

static int64_t cpu_act_bytes(const void *m) { return ((const zt_qwen3 *)m)->act_bytes; }

static void cpu_set_batch(void *mv, const uint32_t *ids, const int32_t *targets, const int32_t *pos) {
    zt_qwen3 *m = mv;
    const size_t N = (size_t)m->N;
    memcpy(m->ids, ids, N * sizeof(uint32_t));
    memcpy(m->targets, targets, N * sizeof(int32_t));
    m->isolated = pos != NULL;
    if (pos) memcpy(m->pos, pos, N * sizeof(int32_t));
}

static void cpu_set_progress(void *mv, void (*fn)(void *), void *ctx) {
    zt_qwen3 *m = mv;
    m->progress = fn;
    m->progress_ctx = ctx;
}

static void cpu_embed_fwd(void *mv, const float *p) {
    zt_qwen3 *m = mv;
    zt_qwen3_embed_fwd(m, p, m->ids);
}

static void cpu_layer_fwd(void *m, int l, const float *p) { zt_qwen3_layer_fwd(m, l, p); }

// The lm_head: the embedding's matrix when tied, else the head unit's second tensor.
static double cpu_head(void *mv, const float *p, const float *emb, float scale, float *dx, float *dhead,
                       float *demb) {
    zt_qwen3 *m = mv;
    const int64_t lm_off = m->lay.units[m->lay.nunits - 1].t[1].offset;  // untied: after the final norm
    const float *lm_w = emb ? emb : p + lm_off;
    float *dlm = dhead ? (demb ? demb : dhead + lm_off) : NULL;
    return zt_qwen3_head_fwd_bwd(m, p, lm_w, m->targets, scale, dhead ? dx : NULL, dhead, dlm);
}

static void cpu_layer_bwd(void *m, int l, const float *p, float *dp, float *dx) { zt_qwen3_layer_bwd(m, l, p, dp, dx); }

static void cpu_embed_bwd(void *mv, const float *dx, float *demb) {
    zt_qwen3 *m = mv;
    zt_qwen3_embed_bwd(m, m->ids, dx, demb);
}

// zt_qwen3_create_cx's and zt_qwen3_cx_alloc's FALLOC calls, summed (plan_cpu_memory: equal to what
// a run reports).
static int64_t cpu_act_bytes_for(const zt_model_config *c, int64_t B, int64_t S, int C, int64_t S_local) {
    const int64_t Sh = C > 1 ? S_local : S, N = B * Sh, d = c->hidden_size, F = c->intermediate_size;
    const int64_t D = c->head_dim, H = c->num_heads, Hkv = c->num_kv_heads, L = c->num_layers;
    const int64_t qs = H * D, kvs = Hkv * D;
    int64_t n = S * D;  // the RoPE table of the whole block (cos, sin: S x D/2 each)
    if (C > 1) n += zt_context_kv_bytes(C, B, S, S_local, kvs) / (int64_t)sizeof(float);  // K|V exchange
    n += (L + 1) * N * d;                                                       // layer inputs
    n += L * N * (3 * d + 2 + 3 * qs + 3 * kvs + 3 * H + Hkv + 3 * F);          // per layer (att_stats: 2 H)
    n += N * d + N;                                                             // head: final norm, rstd
    n += N * (3 * F + 2 * d + 3 * qs + 3 * kvs);                                // backward workspaces
    return n * (int64_t)sizeof(float);
}

static const zt_family_cpu qwen3_cpu = {
    .create = cpu_create,
    .destroy = cpu_destroy,
    .act_bytes = cpu_act_bytes,
    .act_bytes_for = cpu_act_bytes_for,
    .set_batch = cpu_set_batch,
    .set_progress = cpu_set_progress,
    .embed_fwd = cpu_embed_fwd,
    .layer_fwd = cpu_layer_fwd,
    .head = cpu_head,
    .layer_bwd = cpu_layer_bwd,
    .embed_bwd = cpu_embed_bwd,
};

const zt_family zt_qwen3_family = {
    .name = "qwen3",
    .title = "Qwen3",
    .model_type = "qwen3",
    .layout_init = zt_qwen3_layout_init,
    .init_unit = zt_qwen3_init_unit,
    .param_count = zt_qwen3_param_count,
    .max_positions = zt_qwen3_max_positions,
    .flops_matmul_per_token = zt_qwen3_flops_matmul_per_token,
    .flops_mixing = zt_qwen3_flops_attention,
    .recompute_flops = zt_qwen3_recompute_flops,
    .layer_kind = zt_qwen3_layer_kind,
    .layer_plan = zt_qwen3_layer_plan,
    .cpu = &qwen3_cpu,
    .context_parallel = ZT_CONTEXT_CPU | ZT_CONTEXT_GPU,
};

void zt_qwen3_32b_config(zt_model_config *c) {
    memset(c, 0, sizeof *c);
    c->family = &zt_qwen3_family;
    c->vocab_size = 151936;
    c->hidden_size = 5120;
    c->intermediate_size = 25600;
    c->num_layers = 64;
    c->num_heads = 64;
    c->num_kv_heads = 8;
    c->head_dim = 128;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 1000000;
    c->tie_word_embeddings = 0;
    c->initializer_range = 0.02;
    c->max_position_embeddings = 40960;
    c->bos_token_id = 151643;
    c->eos_token_id = 151645;
}
