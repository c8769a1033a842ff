// Qwen3 forward and backward, one FSDP unit at a time: a decoder layer is the attention block and the
// MLP block (model/blocks.c, on top of the op table) with Qwen3's options (full RoPE, no output gate).
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
    if (zt_context_bind_check(B, S_block, cx) != 0) return -1;
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
        zt_attn_acts *t = &a->at;
        t->ln1 = FALLOC(N * d);
        t->rstd1 = FALLOC(N);
        t->q_pre = FALLOC(N * H * D);
        t->k_pre = FALLOC(N * Hkv * D);
        t->q = FALLOC(N * H * D);
        t->k = FALLOC(N * Hkv * D);
        t->v = FALLOC(N * Hkv * D);
        t->qn_rstd = FALLOC(N * H);
        t->kn_rstd = FALLOC(N * Hkv);
        t->att_stats = FALLOC(B * H * S * 2);  // softmax max and 1/sum per query row
        t->att = FALLOC(N * H * D);
        a->x_mid = FALLOC(N * d);
        a->mlp.ln2 = FALLOC(N * d);
        a->mlp.rstd2 = FALLOC(N);
        a->mlp.gate = FALLOC(N * F);
        a->mlp.up = FALLOC(N * F);
        a->mlp.h = FALLOC(N * F);
    }
    m->head_xf = FALLOC(N * d);
    m->head_rstd = FALLOC(N);
    zt_attn_layer_work *w = &m->work;
    w->mlp.dh = FALLOC(N * F);
    w->mlp.dg = FALLOC(N * F);
    w->mlp.du = FALLOC(N * F);
    w->mlp.dln = w->at.dln = FALLOC(N * d);
    w->dmid = FALLOC(N * d);
    w->at.datt = FALLOC(N * H * D);
    w->at.dq = FALLOC(N * H * D);
    w->at.dk = FALLOC(N * Hkv * D);
    w->at.dv = FALLOC(N * Hkv * D);
    w->at.dqp = FALLOC(N * H * D);
    w->at.dkp = FALLOC(N * Hkv * D);
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
        const zt_attn_acts *t = &a->at;
        float *bufs[] = {t->ln1, t->rstd1, t->q_pre, t->k_pre, t->q, t->k, t->v, t->qn_rstd, t->kn_rstd,
                         t->att_stats, t->att, a->x_mid, a->mlp.ln2, a->mlp.rstd2, a->mlp.gate, a->mlp.up, a->mlp.h};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    }
    free(m->acts);
    const zt_attn_layer_work *w = &m->work;
    float *ws[] = {m->rope_cos, m->rope_sin, m->head_xf, m->head_rstd, w->mlp.dh, w->mlp.dg, w->mlp.du, w->mlp.dln,
                   w->dmid, w->at.datt, w->at.dq, w->at.dk, w->at.dv, w->at.dqp, w->at.dkp};
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

// The blocks' env (model/blocks.h): Qwen3's norms multiply by w.
static zt_block_env block_env(const zt_qwen3 *m) {
    return (zt_block_env){.ops = m->ops, .eps = (float)m->lay.cfg.rms_norm_eps, .progress = m->progress,
                          .progress_ctx = m->progress_ctx};
}

// Qwen3's attention: full RoPE, no output gate; positions given for packed documents and under a split.
static zt_attn_shape attn_shape(zt_qwen3 *m, int layer) {
    const zt_model_config *c = &m->lay.cfg;
    return (zt_attn_shape){.B = m->B, .S = m->S, .d = c->hidden_size, .H = c->num_heads, .Hkv = c->num_kv_heads,
                           .D = c->head_dim, .rd = c->head_dim, .rope_cos = m->rope_cos, .rope_sin = m->rope_sin,
                           .pos = m->isolated || m->cp ? m->pos : NULL, .kv = m->cp ? &m->cp_kv : NULL,
                           .layer = layer};
}

// A decoder layer: the attention block, then the MLP block (model/blocks.c).
void zt_qwen3_layer_fwd(zt_qwen3 *m, int layer, const float *params) {
    const zt_block_env e = block_env(m);
    const zt_attn_shape s = attn_shape(m, layer);
    zt_block_attn_layer_fwd(&e, &s, &m->lay.units[1 + layer], params, &m->acts[layer], m->x[layer],
                            m->x[layer + 1], m->lay.cfg.intermediate_size);
}

void zt_qwen3_layer_bwd(zt_qwen3 *m, int layer, const float *params, float *dparams, float *dx) {
    const zt_block_env e = block_env(m);
    const zt_attn_shape s = attn_shape(m, layer);
    zt_block_attn_layer_bwd(&e, &s, &m->lay.units[1 + layer], params, dparams, &m->acts[layer], &m->work,
                            m->x[layer], dx, m->lay.cfg.intermediate_size);
}

double zt_qwen3_head_fwd_bwd(zt_qwen3 *m, const float *head_params, const float *lm_w, const int32_t *targets,
                             float scale, float *dx, float *dhead, float *dlm_w) {
    const zt_ops *op = m->ops;
    const zt_model_config *c = &m->lay.cfg;
    const int64_t N = m->N, d = c->hidden_size;
    const int L = c->num_layers;
    const zt_block_env e = block_env(m);
    zt_block_norm_fwd(&e, m->head_xf, m->head_rstd, m->x[L], head_params, N, d);
    double loss = op->lmhead_xent(dx ? m->work.mlp.dln : NULL, dlm_w, m->head_xf, lm_w, targets, N, d, c->vocab_size,
                                  scale);
    if (dx) zt_block_norm_bwd(&e, dx, dhead, m->work.mlp.dln, m->x[L], head_params, m->head_rstd, N, d);
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
    const zt_block_env e = block_env(m);
    zt_block_norm_fwd(&e, m->head_xf, m->head_rstd, m->x[L], params[L + 1], m->N, c->hidden_size);
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
