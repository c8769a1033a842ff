// Qwen3.5's text model on the CPU (model/qwen3_5.h): its layout, initial values, counts, FLOPs
// and the passes of each unit on top of the op table (kernels/ops.h; the Gated DeltaNet ops are
// kernels/cpu/delta.c, conv1d.c). Every activation the backward reads is kept (as Qwen3's);
// the delta rule keeps its state at chunk starts only (zt_delta_saved_floats).
// defines: zt_qwen3_5_family, zt_qwen3_5_27b_config
#include "model/qwen3_5.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/ops.h"
#include "model/blocks.h"
#include "model/qwen3_5_context.h"

// ---- layout -----------------------------------------------------------------------------------

// Tensor order inside a layer unit, per kind.
enum { LIN_IN_NORM, LIN_QKV, LIN_Z, LIN_B, LIN_A, LIN_CONV, LIN_DT, LIN_ALOG, LIN_NORM, LIN_OUT, LIN_POST_NORM,
       LIN_GATE, LIN_UP, LIN_DOWN, LIN_N };
// A full-attention layer's are model/layout.h's ZT_L_* (input norm, q, k, v, o, q_norm, k_norm, post norm,
// gate, up, down), the order the attention layer of model/blocks.h reads.

// One tensor of nd dimensions (decay on 2 or more: matrices, the embedding, the conv kernel; not
// norms, A_log or dt_bias), through the layout's own adder.
static void add(zt_unit_layout *u, const char *name, int nd, int64_t s0, int64_t s1, int64_t s2) {
    const int64_t shape[3] = {s0, s1, s2};
    if (zt_layout_add_tensor(u, name, nd, shape) != 0) zt_die_on_err();
}

typedef struct {
    int64_t d, F, H, Hkv, D, rd, Hk, Hv, Dk, Dv, Kd, Vd, C, K, V;
} dims;

static dims dims_of(const zt_model_config *c) {
    const zt_qwen3_5_fields *q = zt_q35(c);
    dims x = {.d = c->hidden_size, .F = c->intermediate_size, .H = c->num_heads, .Hkv = c->num_kv_heads,
              .D = c->head_dim, .rd = c->rotary_dim, .Hk = q->lin_key_heads, .Hv = q->lin_value_heads,
              .Dk = q->lin_key_dim, .Dv = q->lin_value_dim, .K = q->lin_conv_kernel, .V = c->vocab_size};
    x.Kd = x.Hk * x.Dk;
    x.Vd = x.Hv * x.Dv;
    x.C = 2 * x.Kd + x.Vd;
    return x;
}

// The family's rule for a context split of C ranks (zt_family.context_rule): its Gated DeltaNet layers
// shard their value heads over the context group (model/qwen3_5_context.c), one at least per rank.
static int context_rule(const zt_model_config *c, int C) {
    int linear = 0;
    for (int l = 0; l < c->num_layers; l++) linear += zt_q35(c)->layer_linear[l] != 0;
    if (C > 1 && linear && C > zt_q35(c)->lin_value_heads)
        return zt_err("--context-parallel %d: Qwen3.5's Gated DeltaNet layers split their %d value heads "
                      "(linear_num_value_heads) over the context group, each rank running whole blocks for a "
                      "contiguous range of them, so C must be at most %d",
                      C, zt_q35(c)->lin_value_heads, zt_q35(c)->lin_value_heads);
    return 0;
}

static int layout_init(zt_model_layout *lay, const zt_model_config *cfg) {
    memset(lay, 0, sizeof *lay);
    lay->cfg = *cfg;
    const dims z = dims_of(cfg);
    const int L = cfg->num_layers;
    lay->nunits = L + 2;
    lay->units = zt_xcalloc((size_t)lay->nunits, sizeof *lay->units);
    char n[96];
    zt_unit_layout *u = &lay->units[0];
    u->kind = ZT_UNIT_EMBED;
    u->layer = -1;
    add(u, "model.embed_tokens.weight", 2, z.V, z.d, 0);
    for (int l = 0; l < L; l++) {
        u = &lay->units[1 + l];
        u->kind = ZT_UNIT_LAYER;
        u->layer = l;
#define T(suffix, nd, a, b, c)                                      \
    do {                                                            \
        snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix);     \
        add(u, n, nd, a, b, c);                                     \
    } while (0)
        T("input_layernorm.weight", 1, z.d, 0, 0);
        if (zt_q35(cfg)->layer_linear[l]) {
            T("linear_attn.in_proj_qkv.weight", 2, z.C, z.d, 0);
            T("linear_attn.in_proj_z.weight", 2, z.Vd, z.d, 0);
            T("linear_attn.in_proj_b.weight", 2, z.Hv, z.d, 0);
            T("linear_attn.in_proj_a.weight", 2, z.Hv, z.d, 0);
            T("linear_attn.conv1d.weight", 3, z.C, 1, z.K);
            T("linear_attn.dt_bias", 1, z.Hv, 0, 0);
            T("linear_attn.A_log", 1, z.Hv, 0, 0);
            T("linear_attn.norm.weight", 1, z.Dv, 0, 0);
            T("linear_attn.out_proj.weight", 2, z.d, z.Vd, 0);
        } else {
            T("self_attn.q_proj.weight", 2, 2 * z.H * z.D, z.d, 0);
            T("self_attn.k_proj.weight", 2, z.Hkv * z.D, z.d, 0);
            T("self_attn.v_proj.weight", 2, z.Hkv * z.D, z.d, 0);
            T("self_attn.o_proj.weight", 2, z.d, z.H * z.D, 0);
            T("self_attn.q_norm.weight", 1, z.D, 0, 0);
            T("self_attn.k_norm.weight", 1, z.D, 0, 0);
        }
        T("post_attention_layernorm.weight", 1, z.d, 0, 0);
        T("mlp.gate_proj.weight", 2, z.F, z.d, 0);
        T("mlp.up_proj.weight", 2, z.F, z.d, 0);
        T("mlp.down_proj.weight", 2, z.d, z.F, 0);
#undef T
    }
    u = &lay->units[L + 1];
    u->kind = ZT_UNIT_HEAD;
    u->layer = -1;
    add(u, "model.norm.weight", 1, z.d, 0, 0);
    if (!cfg->tie_word_embeddings) add(u, "lm_head.weight", 2, z.V, z.d, 0);
    for (int i = 0; i < lay->nunits; i++) lay->total_numel += lay->units[i].numel;
    return 0;
}

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

// transformers' _init_weights: matrices and the conv kernel N(0, initializer_range); the
// (1 + w) norms 0; the gated norm's weight and dt_bias 1; A_log = log(U(0.01, 16)).
static void init_unit(const zt_model_layout *lay, int unit, float *params, uint64_t seed) {
    const zt_unit_layout *u = &lay->units[unit];
    const double std = lay->cfg.initializer_range;
    for (int i = 0; i < u->ntensors; i++) {
        const zt_tensor_desc *t = &u->t[i];
        float *p = params + t->offset;
        zt_rng r;
        zt_rng_seed(&r, seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(unit * 64 + i + 1)));
        if (ends_with(t->name, "linear_attn.A_log")) {
            for (int64_t j = 0; j < t->numel; j++) p[j] = (float)log(0.01 + (16 - 0.01) * zt_rng_uniform(&r));
        } else if (ends_with(t->name, "linear_attn.norm.weight") || ends_with(t->name, "linear_attn.dt_bias")) {
            for (int64_t j = 0; j < t->numel; j++) p[j] = 1.0f;
        } else if (t->ndim == 1) {
            for (int64_t j = 0; j < t->numel; j++) p[j] = 0.0f;
        } else {
            for (int64_t j = 0; j < t->numel; j++) p[j] = (float)(std * zt_rng_normal(&r));
        }
    }
}

static int64_t param_count(const zt_model_config *c) {
    const dims z = dims_of(c);
    const __int128 d = z.d, F = z.F;
    const __int128 mlp = 3 * F * d + 2 * d;
    const __int128 lin = (__int128)z.C * d + (__int128)z.Vd * d + 2 * (__int128)z.Hv * d + (__int128)z.C * z.K +
                         2 * (__int128)z.Hv + z.Dv + d * z.Vd + mlp;
    const __int128 full = 2 * (__int128)z.H * z.D * d + 2 * (__int128)z.Hkv * z.D * d + d * z.H * z.D + 2 * z.D + mlp;
    __int128 n = (__int128)z.V * d * (c->tie_word_embeddings ? 1 : 2) + d;
    for (int l = 0; l < c->num_layers; l++) n += zt_q35(c)->layer_linear[l] ? lin : full;
    return n < 0 || n > (__int128)INT64_MAX ? -1 : (int64_t)n;
}

static int64_t max_positions(const zt_model_config *c) { return c->max_position_embeddings; }

// ---- FLOPs (model/flops.h's convention: forward + backward = 3 x forward) ----------------------

static int n_linear(const zt_model_config *c) {
    int n = 0;
    for (int l = 0; l < c->num_layers; l++) n += zt_q35(c)->layer_linear[l] != 0;
    return n;
}

// Forward FLOPs of one token in one layer of each kind, without the S x S attention: 2 x every
// matrix's parameters, and in a linear layer the conv (2 K per channel) and the delta rule (per value
// head: the read S^T k, the rank-1 update and the output S^T q, 2 Dk Dv each).
static double lin_fwd_token(const dims *z) {
    const double mlp = 3.0 * z->F * z->d;
    const double mat = (double)z->C * z->d + (double)z->Vd * z->d + 2.0 * z->Hv * z->d + (double)z->d * z->Vd + mlp;
    return 2.0 * mat + 2.0 * z->K * z->C + 6.0 * z->Hv * z->Dk * z->Dv;
}

static double full_fwd_token(const dims *z) {
    const double mlp = 3.0 * z->F * z->d;
    return 2.0 * (2.0 * z->H * z->D * z->d + 2.0 * z->Hkv * z->D * z->d + (double)z->d * z->H * z->D + mlp);
}

static double fwd_per_token(const zt_model_config *c) {
    const dims z = dims_of(c);
    const int nl = n_linear(c), nf = c->num_layers - nl;
    return nl * lin_fwd_token(&z) + nf * full_fwd_token(&z) + 2.0 * (double)z.V * z.d;
}

static double flops_per_token(const zt_model_config *c) { return 3.0 * fwd_per_token(c); }

// Causal attention of the full-attention layers only: as Qwen3's, 6 H D per squared token.
static double flops_mixing(const zt_model_config *c, double sum_sq) {
    return 6.0 * (c->num_layers - n_linear(c)) * (double)c->num_heads * c->head_dim * sum_sq;
}

static double recompute_flops(const zt_model_config *c, double tokens, double sum_sq) {
    const double lm = 2.0 * (double)c->vocab_size * c->hidden_size;  // the head is not recomputed
    return (fwd_per_token(c) - lm) * tokens + flops_mixing(c, sum_sq) / 3.0;
}

// ---- the planner's counts (model/family.h zt_layer_plan) ----------------------------------------

enum { KIND_LINEAR, KIND_FULL };

static int layer_kind(const zt_model_config *c, int l) { return zt_q35(c)->layer_linear[l] ? KIND_LINEAR : KIND_FULL; }

// What create() below keeps of a layer of each kind, per token: every layer its input x, ln1, x_mid, ln2
// and the MLP's gate, up and silu*up (values), both norms' rstd (fp32). A linear layer: qkv, the conv's
// pre-activation and output (3 C), q, k, v split and q, k l2-normalised (4 Kd + Vd), z, the delta rule's
// output and the gated norm's output (3 Vd), the b and a projections (2 Hv) as values; the l2 norms' 1/norm
// (2 Hk), beta, the decay g and the gated norm's rstd (3 Hv) in fp32, and per row the delta rule's state at
// each chunk start (zt_delta_saved_floats, fp32). A full layer: the q|gate projection, q and the gate split
// from it, q normed+roped, the attention output and the gated output (7 H D), k before and after, v
// (3 Hkv D); fp32 q/k norms' rstd per head and the softmax's log-sum-exp per head (a flash kernel's; the
// CPU's attention keeps two floats, its max and 1/sum). The backward workspace: the CPU's of the kind
// (the MLP's 3 F + 3 d and the kind's own: below), one layer's at a time on the GPU.
static void layer_plan(const zt_model_config *c, int kind, int64_t S, zt_layer_plan *out) {
    const dims z = dims_of(c);
    const double d = (double)z.d, F = (double)z.F;
    const double common = 4 * d + 3 * F, mlp_work = 3 * F + 3 * d;
    if (kind == KIND_LINEAR) {
        snprintf(out->name, sizeof out->name, "linear attention (Gated DeltaNet, heads %lld/%lld x %lld/%lld)",
                 (long long)z.Hk, (long long)z.Hv, (long long)z.Dk, (long long)z.Dv);
        out->values = common + 3.0 * z.C + 4.0 * z.Kd + 4.0 * z.Vd + 2.0 * z.Hv;
        out->stats = 2 + 2.0 * z.Hk + 3.0 * z.Hv;
        out->row_stats = (double)zt_delta_saved_floats(1, S, z.Hv, z.Dk, z.Dv);
        // dnormed, dcore, dz, dv; dq, dk before and after their l2 norm; dg, dbeta, da, db; dconv, dqkv
        out->work = mlp_work + 4.0 * z.Vd + 4.0 * z.Kd + 4.0 * z.Hv + 2.0 * z.C;
        out->flops = 3.0 * lin_fwd_token(&z) * (double)S;
        out->attention = 0;
    } else {
        snprintf(out->name, sizeof out->name, "full attention (gated, heads %lld/%lld x %lld)", (long long)z.H,
                 (long long)z.Hkv, (long long)z.D);
        const double HD = (double)z.H * z.D, KD = (double)z.Hkv * z.D;
        out->values = common + 7 * HD + 3 * KD;
        out->stats = 2 + 2.0 * z.H + z.Hkv;
        out->row_stats = 0;
        // dgated, datt, dgate, dq, dq before its norm, d(q|gate) (7 H D); dk, dv, dk before its norm; the
        // rotated slice RoPE works in (max(H, Hkv) rd)
        out->work = mlp_work + 7 * HD + 3 * KD + (double)(z.H > z.Hkv ? z.H : z.Hkv) * z.rd;
        out->flops = 3.0 * full_fwd_token(&z) * (double)S + 6.0 * HD * (double)S * (double)S;
        out->attention = 1;
    }
}

// ---- the bound model --------------------------------------------------------------------------

typedef struct {
    // every layer: x_mid and the MLP block's (model/blocks.h); a full-attention layer: the attention block's
    zt_attn_layer_acts blk;
    // a Gated DeltaNet layer: its input norm and mixing
    float *ln1, *rstd1;
    float *qkv, *conv_pre, *conv, *lq, *lk, *lv, *lq_n, *lk_n, *lq_r, *lk_r, *z, *b, *a, *beta, *g, *core,
        *saved, *gn_rstd, *normed;
} acts;

typedef struct {
    zt_model_layout lay;
    const zt_ops *ops;
    dims z;
    int64_t B, S, N;             // S: the tokens of a block this model holds (S_block without a split)
    int64_t S_block;
    zt_q35_cx *cpx;              // context parallelism (model/qwen3_5_context.c); NULL: whole rows
    float *rope_cos, *rope_sin;  // [S_block, rd/2]
    float **x;                   // L+1 residual-stream buffers [N, d]
    acts *a;
    float *head_xf, *head_rstd;
    float *w1;                   // 1 + w of the norm in use
    float *rot;                  // [N, max(H, Hkv), rd]: the rotated slice of q or k
    // backward workspaces
    zt_attn_layer_work work;     // the blocks' (model/blocks.h): work.at.dln is work.mlp.dln
    float *w_dx1;
    float *w_dnormed, *w_dcore, *w_dz, *w_dlq, *w_dlk, *w_dlqn, *w_dlkn, *w_dlv, *w_dgd, *w_dbeta, *w_da, *w_db,
        *w_dconv, *w_dqkv;
    int32_t *targets, *pos;
    uint32_t *ids;
    int isolated;
    int64_t act_bytes;
    void (*progress)(void *ctx);
    void *progress_ctx;
} q35;

static float *falloc(void *mv, int64_t n) {
    q35 *m = mv;
    m->act_bytes += n * (int64_t)sizeof(float);
    return zt_xcalloc((size_t)(n > 0 ? n : 1), sizeof(float));
}
#define FA(n) falloc(m, (n))

static void destroy(void *mv);

static void *create(const zt_model_config *c, const zt_ops *ops, int64_t B, int64_t S, const zt_family_context *cx) {
    if (zt_context_bind_check(B, S, cx) != 0 || (cx && context_rule(c, cx->C) != 0)) return NULL;
    const int64_t S_block = S;
    if (cx) S = cx->S_local;  // the tokens of a block this model holds
    q35 *m = zt_xcalloc(1, sizeof *m);
    layout_init(&m->lay, c);
    m->lay.cfg.family = &zt_qwen3_5_family;
    m->ops = ops;
    m->z = dims_of(c);
    const dims z = m->z;
    m->B = B, m->S = S, m->N = B * S, m->S_block = S_block;
    const int64_t N = m->N, L = c->num_layers;
    const int cp = cx != NULL;
    m->rope_cos = FA(S_block * z.rd / 2);  // positions reach the whole block's
    m->rope_sin = FA(S_block * z.rd / 2);
    zt_rope_table(m->rope_cos, m->rope_sin, S_block, z.rd, c->rope_theta);
    if (cp) m->cpx = zt_q35_cx_create(c, ops, cx, B, falloc, m);
    m->x = zt_xcalloc((size_t)L + 1, sizeof(float *));
    for (int64_t l = 0; l <= L; l++) m->x[l] = FA(N * z.d);
    m->a = zt_xcalloc((size_t)L, sizeof(acts));
    int any_lin = 0, any_full = 0;
    for (int64_t l = 0; l < L; l++) {
        acts *a = &m->a[l];
        if (zt_q35(c)->layer_linear[l]) {
            any_lin = 1;
            a->ln1 = FA(N * z.d), a->rstd1 = FA(N);
            a->qkv = FA(N * z.C), a->z = FA(N * z.Vd), a->b = FA(N * z.Hv), a->a = FA(N * z.Hv);
            a->core = FA(N * z.Vd), a->gn_rstd = FA(N * z.Hv), a->normed = FA(N * z.Vd);
            if (!cp) {  // the conv and the delta rule over whole rows (under a split: model/qwen3_5_context.c's)
                a->conv_pre = FA(N * z.C), a->conv = FA(N * z.C);
                a->lq = FA(N * z.Kd), a->lk = FA(N * z.Kd), a->lv = FA(N * z.Vd);
                a->lq_n = FA(N * z.Kd), a->lk_n = FA(N * z.Kd), a->lq_r = FA(N * z.Hk), a->lk_r = FA(N * z.Hk);
                a->beta = FA(N * z.Hv), a->g = FA(N * z.Hv), a->saved = FA(zt_delta_saved_floats(B, S, z.Hv, z.Dk, z.Dv));
            }
        } else {
            any_full = 1;
            zt_attn_acts *t = &a->blk.at;
            t->ln1 = FA(N * z.d), t->rstd1 = FA(N);
            t->qg = FA(N * 2 * z.H * z.D), t->q_pre = FA(N * z.H * z.D), t->gate = FA(N * z.H * z.D);
            t->k_pre = FA(N * z.Hkv * z.D), t->q = FA(N * z.H * z.D), t->k = FA(N * z.Hkv * z.D);
            t->v = FA(N * z.Hkv * z.D), t->qn_rstd = FA(N * z.H), t->kn_rstd = FA(N * z.Hkv);
            t->att_stats = FA(B * z.H * S * 2), t->att = FA(N * z.H * z.D), t->gated = FA(N * z.H * z.D);
        }
        a->blk.x_mid = FA(N * z.d), a->blk.mlp.ln2 = FA(N * z.d), a->blk.mlp.rstd2 = FA(N);
        a->blk.mlp.gate = FA(N * z.F), a->blk.mlp.up = FA(N * z.F), a->blk.mlp.h = FA(N * z.F);
    }
    m->head_xf = FA(N * z.d), m->head_rstd = FA(N);
    int64_t wmax = z.d > z.D ? z.d : z.D;
    m->w1 = FA(wmax);
    zt_attn_layer_work *w = &m->work;
    w->mlp.dh = FA(N * z.F), w->mlp.dg = FA(N * z.F), w->mlp.du = FA(N * z.F);
    w->mlp.dln = w->at.dln = FA(N * z.d), w->dmid = FA(N * z.d), m->w_dx1 = FA(N * z.d);
    if (any_full) {
        const int64_t hd = N * z.H * z.D, kd = N * z.Hkv * z.D;
        m->rot = FA(N * (z.H > z.Hkv ? z.H : z.Hkv) * z.rd);
        w->at.dgated = FA(hd), w->at.datt = FA(hd), w->at.dgate = FA(hd), w->at.dq = FA(hd), w->at.dqp = FA(hd);
        w->at.dk = FA(kd), w->at.dv = FA(kd), w->at.dkp = FA(kd), w->at.dqg = FA(2 * hd);
    }
    if (any_lin) {
        m->w_dnormed = FA(N * z.Vd), m->w_dcore = FA(N * z.Vd), m->w_dz = FA(N * z.Vd);
        m->w_da = FA(N * z.Hv), m->w_db = FA(N * z.Hv), m->w_dqkv = FA(N * z.C);
        if (!cp) {
            m->w_dlv = FA(N * z.Vd), m->w_dgd = FA(N * z.Hv), m->w_dbeta = FA(N * z.Hv), m->w_dconv = FA(N * z.C);
            m->w_dlq = FA(N * z.Kd), m->w_dlk = FA(N * z.Kd), m->w_dlqn = FA(N * z.Kd), m->w_dlkn = FA(N * z.Kd);
        }
    }
    m->targets = zt_xcalloc((size_t)N, sizeof(int32_t));
    m->pos = zt_xcalloc((size_t)N, sizeof(int32_t));
    m->ids = zt_xcalloc((size_t)N, sizeof(uint32_t));
    return m;
}

static void destroy(void *mv) {
    q35 *m = mv;
    if (!m) return;
    const int L = m->lay.cfg.num_layers;
    for (int l = 0; l <= L; l++) free(m->x[l]);
    free(m->x);
    for (int l = 0; l < L; l++) {
        acts *a = &m->a[l];
        const zt_attn_acts *t = &a->blk.at;
        const zt_mlp_acts *ml = &a->blk.mlp;
        float *bufs[] = {t->ln1, t->rstd1, t->qg, t->q_pre, t->gate, t->k_pre, t->q, t->k, t->v, t->qn_rstd,
                         t->kn_rstd, t->att_stats, t->att, t->gated, a->ln1, a->rstd1, a->qkv, a->conv_pre, a->conv,
                         a->lq, a->lk, a->lv, a->lq_n, a->lk_n, a->lq_r, a->lk_r, a->z, a->b, a->a, a->beta, a->g,
                         a->core, a->saved, a->gn_rstd, a->normed, a->blk.x_mid, ml->ln2, ml->rstd2, ml->gate, ml->up,
                         ml->h};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    }
    free(m->a);
    const zt_attn_layer_work *w = &m->work;
    float *ws[] = {m->rope_cos, m->rope_sin, m->head_xf, m->head_rstd, m->w1, m->rot, w->mlp.dh, w->mlp.dg, w->mlp.du,
                   w->mlp.dln, w->dmid, m->w_dx1, w->at.dgated, w->at.datt, w->at.dgate, w->at.dq, w->at.dk, w->at.dv,
                   w->at.dqp, w->at.dkp, w->at.dqg, m->w_dnormed, m->w_dcore, m->w_dz, m->w_dlq, m->w_dlk, m->w_dlqn,
                   m->w_dlkn, m->w_dlv, m->w_dgd, m->w_dbeta, m->w_da, m->w_db, m->w_dconv, m->w_dqkv};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) free(ws[i]);
    free(m->targets), free(m->pos), free(m->ids);
    zt_q35_cx_free(m->cpx);
    zt_model_layout_free(&m->lay);
    free(m);
}

static int64_t act_bytes(const void *m) { return ((const q35 *)m)->act_bytes; }

static void set_batch(void *mv, const uint32_t *ids, const int32_t *targets, const int32_t *pos) {
    q35 *m = mv;
    const size_t N = (size_t)m->N;
    memcpy(m->ids, ids, N * sizeof(uint32_t));
    memcpy(m->targets, targets, N * sizeof(int32_t));
    m->isolated = pos != NULL;
    if (pos) memcpy(m->pos, pos, N * sizeof(int32_t));
    if (m->cpx) zt_q35_cx_set_batch(m->cpx, m->pos);  // under a split pos is always given
}

static void set_progress(void *mv, void (*fn)(void *), void *ctx) {
    q35 *m = mv;
    m->progress = fn;
    m->progress_ctx = ctx;
}

#define TICK()                                                  \
    do {                                                        \
        if (m->progress) m->progress(m->progress_ctx);          \
    } while (0)
#define W(i) (p + u->t[(i)].offset)
#define DW(i) (dp + u->t[(i)].offset)

// The blocks' env (model/blocks.h): Qwen3_5RMSNorm, x * rsqrt(mean(x^2) + eps) * (1 + w).
static zt_block_env block_env(const q35 *m) {
    return (zt_block_env){.ops = m->ops, .eps = (float)m->lay.cfg.rms_norm_eps, .norm_one_plus = 1, .w1 = m->w1,
                          .progress = m->progress, .progress_ctx = m->progress_ctx};
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
// torch's softplus (beta 1, threshold 20) and its derivative
static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
static float dsoftplusf(float x) {
    if (x > 20.0f) return 1.0f;
    const float e = expf(x);
    return e / (e + 1.0f);
}

// A full-attention layer: the attention block with Qwen3.5's output gate and partial RoPE, then the MLP.
// Positions: given with packed documents and always under a split (set_batch then has them: isolated).
static zt_attn_shape attn_shape(q35 *m, int layer) {
    const dims z = m->z;
    return (zt_attn_shape){.B = m->B, .S = m->S, .d = z.d, .H = z.H, .Hkv = z.Hkv, .D = z.D, .rd = z.rd,
                           .out_gate = 1, .rope_cos = m->rope_cos, .rope_sin = m->rope_sin,
                           .pos = m->isolated ? m->pos : NULL, .kv = m->cpx ? zt_q35_cx_kv(m->cpx) : NULL,
                           .layer = layer, .rot = m->rot};
}

static void full_fwd(q35 *m, const zt_unit_layout *u, acts *a, const float *p, const float *x, float *y) {
    const zt_block_env e = block_env(m);
    const zt_attn_shape s = attn_shape(m, u->layer);
    zt_block_attn_layer_fwd(&e, &s, u, p, &a->blk, x, y, m->z.F);
}

static void full_bwd(q35 *m, const zt_unit_layout *u, acts *a, const float *p, float *dp, const float *x, float *dx) {
    const zt_block_env e = block_env(m);
    const zt_attn_shape s = attn_shape(m, u->layer);
    zt_block_attn_layer_bwd(&e, &s, u, p, dp, &a->blk, &m->work, x, dx, m->z.F);
}

// The conv, the l2 norms, beta and the decay, and the delta rule over this model's whole rows: qkv, b, a in,
// core out (under a split, zt_q35_cx_mix_fwd instead).
static void mix_fwd(q35 *m, const zt_unit_layout *u, acts *a, const float *p) {
    const zt_ops *op = m->ops;
    const dims z = m->z;
    const int64_t N = m->N;
    const int32_t *pos = m->isolated ? m->pos : NULL;
    op->conv1d_silu_fwd(a->conv, a->conv_pre, a->qkv, W(LIN_CONV), pos, m->B, m->S, z.C, z.K);
    for (int64_t t = 0; t < N; t++) {  // split the channels: q | k | v
        memcpy(a->lq + t * z.Kd, a->conv + t * z.C, (size_t)z.Kd * sizeof(float));
        memcpy(a->lk + t * z.Kd, a->conv + t * z.C + z.Kd, (size_t)z.Kd * sizeof(float));
        memcpy(a->lv + t * z.Vd, a->conv + t * z.C + 2 * z.Kd, (size_t)z.Vd * sizeof(float));
    }
    op->l2norm_fwd(a->lq_n, a->lq_r, a->lq, N * z.Hk, z.Dk, 1e-6f);
    op->l2norm_fwd(a->lk_n, a->lk_r, a->lk, N * z.Hk, z.Dk, 1e-6f);
    const float *A_log = W(LIN_ALOG), *dt = W(LIN_DT);
    for (int64_t t = 0; t < N; t++)
        for (int64_t h = 0; h < z.Hv; h++) {
            const int64_t i = t * z.Hv + h;
            a->beta[i] = sigmoidf(a->b[i]);
            a->g[i] = -expf(A_log[h]) * softplusf(a->a[i] + dt[h]);
        }
    TICK();
    op->delta_fwd(a->core, a->saved, a->lq_n, a->lk_n, a->lv, a->g, a->beta, pos, m->B, m->S, z.Hk, z.Hv, z.Dk, z.Dv);
}

static void lin_fwd(q35 *m, const zt_unit_layout *u, acts *a, const float *p, const float *x, float *y) {
    const zt_ops *op = m->ops;
    const dims z = m->z;
    const int64_t N = m->N;
    const zt_block_env e = block_env(m);
    zt_block_norm_fwd(&e, a->ln1, a->rstd1, x, W(LIN_IN_NORM), N, z.d);
    TICK();
    op->matmul_fwd(a->qkv, a->ln1, W(LIN_QKV), N, z.d, z.C);
    TICK();
    op->matmul_fwd(a->z, a->ln1, W(LIN_Z), N, z.d, z.Vd);
    TICK();
    op->matmul_fwd(a->b, a->ln1, W(LIN_B), N, z.d, z.Hv);
    op->matmul_fwd(a->a, a->ln1, W(LIN_A), N, z.d, z.Hv);
    TICK();
    if (m->cpx)  // the block's conv + delta rule for this rank's value heads (model/qwen3_5_context.c)
        zt_q35_cx_mix_fwd(m->cpx, u->layer, a->qkv, a->b, a->a, W(LIN_CONV), W(LIN_ALOG), W(LIN_DT), a->core);
    else
        mix_fwd(m, u, a, p);
    TICK();
    op->rmsnorm_gated_fwd(a->normed, a->gn_rstd, a->core, a->z, W(LIN_NORM), N * z.Hv, z.Dv,
                          (float)m->lay.cfg.rms_norm_eps);
    op->matmul_fwd(a->blk.x_mid, a->normed, W(LIN_OUT), N, z.Vd, z.d);
    TICK();
    op->add(a->blk.x_mid, a->blk.x_mid, x, N * z.d);
    const zt_mlp_params mw = zt_mlp_params_at(u, p, LIN_POST_NORM);
    zt_block_mlp_fwd(&e, &mw, &a->blk.mlp, a->blk.x_mid, y, N, z.d, z.F);
}

// mix_fwd's backward: w_dcore in; w_dqkv, w_db, w_da out; the conv's, A_log's, dt_bias's gradients (+=).
static void mix_bwd(q35 *m, const zt_unit_layout *u, acts *a, const float *p, float *dp) {
    const zt_ops *op = m->ops;
    const dims z = m->z;
    const int64_t N = m->N;
    const int32_t *pos = m->isolated ? m->pos : NULL;
    op->delta_bwd(m->w_dlqn, m->w_dlkn, m->w_dlv, m->w_dgd, m->w_dbeta, m->w_dcore, a->saved, a->lq_n, a->lk_n, a->lv,
                  a->g, a->beta, pos, m->B, m->S, z.Hk, z.Hv, z.Dk, z.Dv);
    TICK();
    // the decay and beta back to in_proj_a / in_proj_b, A_log and dt_bias
    const float *A_log = W(LIN_ALOG), *dt = W(LIN_DT);
    float *dA = DW(LIN_ALOG), *ddt = DW(LIN_DT);
    for (int64_t t = 0; t < N; t++)
        for (int64_t h = 0; h < z.Hv; h++) {
            const int64_t i = t * z.Hv + h;
            const float dg = m->w_dgd[i];
            dA[h] += dg * a->g[i];  // g = -exp(A_log) sp: dg/dA_log = g
            const float da = dg * -expf(A_log[h]) * dsoftplusf(a->a[i] + dt[h]);
            m->w_da[i] = da;
            ddt[h] += da;
            m->w_db[i] = m->w_dbeta[i] * a->beta[i] * (1.0f - a->beta[i]);
        }
    op->l2norm_bwd(m->w_dlq, m->w_dlqn, a->lq, a->lq_r, N * z.Hk, z.Dk);
    op->l2norm_bwd(m->w_dlk, m->w_dlkn, a->lk, a->lk_r, N * z.Hk, z.Dk);
    for (int64_t t = 0; t < N; t++) {
        memcpy(m->w_dconv + t * z.C, m->w_dlq + t * z.Kd, (size_t)z.Kd * sizeof(float));
        memcpy(m->w_dconv + t * z.C + z.Kd, m->w_dlk + t * z.Kd, (size_t)z.Kd * sizeof(float));
        memcpy(m->w_dconv + t * z.C + 2 * z.Kd, m->w_dlv + t * z.Vd, (size_t)z.Vd * sizeof(float));
    }
    op->conv1d_silu_bwd(m->w_dqkv, DW(LIN_CONV), m->w_dconv, a->conv_pre, a->qkv, W(LIN_CONV), pos, m->B, m->S, z.C,
                        z.K);
}

static void lin_bwd(q35 *m, const zt_unit_layout *u, acts *a, const float *p, float *dp, const float *x, float *dx) {
    const zt_ops *op = m->ops;
    const dims z = m->z;
    const int64_t N = m->N;
    const zt_block_env e = block_env(m);
    const zt_mlp_params mw = zt_mlp_params_at(u, p, LIN_POST_NORM);
    const zt_mlp_grads mg = zt_mlp_grads_at(u, dp, LIN_POST_NORM);
    zt_block_mlp_bwd(&e, &mw, &mg, &a->blk.mlp, &m->work.mlp, a->blk.x_mid, dx, m->work.dmid, N, z.d, z.F);
    op->matmul_bwd(m->w_dnormed, DW(LIN_OUT), m->work.dmid, a->normed, W(LIN_OUT), N, z.Vd, z.d, 0);
    TICK();
    op->rmsnorm_gated_bwd(m->w_dcore, m->w_dz, DW(LIN_NORM), m->w_dnormed, a->core, a->z, W(LIN_NORM), a->gn_rstd,
                          N * z.Hv, z.Dv);
    if (m->cpx)  // the block's delta rule + conv backward for this rank's value heads
        zt_q35_cx_mix_bwd(m->cpx, u->layer, m->w_dcore, W(LIN_CONV), DW(LIN_CONV), W(LIN_ALOG), DW(LIN_ALOG), W(LIN_DT),
                          DW(LIN_DT), m->w_dqkv, m->w_db, m->w_da);
    else
        mix_bwd(m, u, a, p, dp);
    TICK();
    op->matmul_bwd(m->work.mlp.dln, DW(LIN_QKV), m->w_dqkv, a->ln1, W(LIN_QKV), N, z.d, z.C, 0);
    TICK();
    op->matmul_bwd(m->work.mlp.dln, DW(LIN_Z), m->w_dz, a->ln1, W(LIN_Z), N, z.d, z.Vd, 1);
    TICK();
    op->matmul_bwd(m->work.mlp.dln, DW(LIN_B), m->w_db, a->ln1, W(LIN_B), N, z.d, z.Hv, 1);
    op->matmul_bwd(m->work.mlp.dln, DW(LIN_A), m->w_da, a->ln1, W(LIN_A), N, z.d, z.Hv, 1);
    TICK();
    zt_block_norm_bwd(&e, dx, DW(LIN_IN_NORM), m->work.mlp.dln, x, W(LIN_IN_NORM), a->rstd1, N, z.d);
    op->add(dx, dx, m->work.dmid, N * z.d);
}

static void layer_fwd(void *mv, int l, const float *p) {
    q35 *m = mv;
    const zt_unit_layout *u = &m->lay.units[1 + l];
    if (zt_q35(&m->lay.cfg)->layer_linear[l])
        lin_fwd(m, u, &m->a[l], p, m->x[l], m->x[l + 1]);
    else
        full_fwd(m, u, &m->a[l], p, m->x[l], m->x[l + 1]);
}

static void layer_bwd(void *mv, int l, const float *p, float *dp, float *dx) {
    q35 *m = mv;
    const zt_unit_layout *u = &m->lay.units[1 + l];
    if (zt_q35(&m->lay.cfg)->layer_linear[l])
        lin_bwd(m, u, &m->a[l], p, dp, m->x[l], dx);
    else
        full_bwd(m, u, &m->a[l], p, dp, m->x[l], dx);
}
#undef W
#undef DW
#undef TICK

static void embed_fwd(void *mv, const float *p) {
    q35 *m = mv;
    m->ops->embedding_fwd(m->x[0], p, m->ids, m->N, m->z.d);
}

static void embed_bwd(void *mv, const float *dx, float *demb) {
    q35 *m = mv;
    m->ops->embedding_bwd(demb, dx, m->ids, m->N, m->z.d);
}

// Final (1 + w) norm + lm_head + cross-entropy; tied: the embedding's matrix.
static double head(void *mv, const float *p, const float *emb, float scale, float *dx, float *dhead, float *demb) {
    q35 *m = mv;
    const int64_t N = m->N, d = m->z.d;
    const int L = m->lay.cfg.num_layers;
    const int64_t lm_off = m->lay.units[m->lay.nunits - 1].t[m->lay.cfg.tie_word_embeddings ? 0 : 1].offset;
    const float *lm_w = emb ? emb : p + lm_off;
    float *dlm = dhead ? (demb ? demb : dhead + lm_off) : NULL;
    const zt_block_env e = block_env(m);
    zt_block_norm_fwd(&e, m->head_xf, m->head_rstd, m->x[L], p, N, d);
    const double loss = m->ops->lmhead_xent(dhead ? m->work.mlp.dln : NULL, dlm, m->head_xf, lm_w, m->targets, N, d,
                                            m->z.V, scale);
    if (dhead) zt_block_norm_bwd(&e, dx, dhead, m->work.mlp.dln, m->x[L], p, m->head_rstd, N, d);
    return loss;
}

static void logits(void *mv, const float *p, const float *emb, float *out) {
    q35 *m = mv;
    const int L = m->lay.cfg.num_layers;
    const float *lm_w = emb ? emb : p + m->lay.units[m->lay.nunits - 1].t[1].offset;
    const zt_block_env e = block_env(m);
    zt_block_norm_fwd(&e, m->head_xf, m->head_rstd, m->x[L], p, m->N, m->z.d);
    m->ops->matmul_fwd(out, m->head_xf, lm_w, m->N, m->z.d, m->z.V);
}

// create's FA calls, summed (plan_cpu_memory: equal to what a run reports); under a context split of C,
// the rank of the group that allocates most (model/qwen3_5_context.c: its value heads may be uneven).
static int64_t act_bytes_for(const zt_model_config *c, int64_t B, int64_t S, int C, int64_t S_local) {
    const int cp = C > 1;
    if (cp && context_rule(c, C) != 0) return -1;
    const dims z = dims_of(c);
    const int64_t Sh = cp ? S_local : S, N = B * Sh, L = c->num_layers;
    int64_t n = S * z.rd + (L + 1) * N * z.d;  // RoPE table of the whole block (cos, sin), layer inputs
    if (cp) n += zt_q35_cx_bytes(c, C, B, S, S_local) / (int64_t)sizeof(float);
    int any_lin = 0, any_full = 0;
    for (int64_t l = 0; l < L; l++) {
        n += N * (z.d + 1);  // ln1, rstd1
        if (zt_q35(c)->layer_linear[l]) {
            any_lin = 1;
            n += N * (z.C + 3 * z.Vd + 3 * z.Hv);  // qkv, z, b, a, core, gn_rstd, normed
            if (!cp)                                // the conv's, the l2 norms', beta, g, the delta rule's
                n += N * (2 * z.C + 4 * z.Kd + z.Vd + 2 * z.Hk + 2 * z.Hv) + zt_delta_saved_floats(B, S, z.Hv, z.Dk, z.Dv);
        } else {
            any_full = 1;
            n += N * (2 * z.H * z.D + 2 * z.H * z.D + z.Hkv * z.D + z.H * z.D + 2 * z.Hkv * z.D + z.H + z.Hkv) +
                 B * z.H * Sh * 2 + N * 2 * z.H * z.D;
        }
        n += N * (2 * z.d + 1 + 3 * z.F);  // x_mid, ln2, rstd2, mgate, up, h
    }
    n += N * (z.d + 1) + (z.d > z.D ? z.d : z.D) + N * (3 * z.F + 3 * z.d);  // head, w1, MLP/norm workspaces
    if (any_full) n += N * (z.H > z.Hkv ? z.H : z.Hkv) * z.rd + 5 * N * z.H * z.D + 3 * N * z.Hkv * z.D +
                       2 * N * z.H * z.D;
    if (any_lin) n += cp ? 3 * N * z.Vd + 2 * N * z.Hv + N * z.C : 4 * N * z.Vd + 4 * N * z.Kd + 4 * N * z.Hv + 2 * N * z.C;
    return n * (int64_t)sizeof(float);
}

static const zt_family_cpu qwen3_5_cpu = {
    .logits = logits,
    .create = create,
    .destroy = destroy,
    .act_bytes = act_bytes,
    .act_bytes_for = act_bytes_for,
    .set_batch = set_batch,
    .set_progress = set_progress,
    .embed_fwd = embed_fwd,
    .layer_fwd = layer_fwd,
    .head = head,
    .layer_bwd = layer_bwd,
    .embed_bwd = embed_bwd,
};

static const char *const carried[] = {"mtp.", "model.visual.", NULL};

// What a checkpoint must agree on beyond the common fields (zt_family.config_diff).
static void appendf(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *out, size_t n, const char *fmt, ...) {
    size_t len = strlen(out);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + len, n - len, fmt, ap);
    va_end(ap);
}
static int config_diff(const zt_model_config *a, const zt_model_config *b, char *out, size_t n, int k) {
#define DI(field, name)                                                                                        \
    if ((int64_t)a->field != (int64_t)b->field)                                                                \
        appendf(out, n, "%scheckpoint has %s %lld, the run has %lld", k++ ? "; " : "", name, (long long)a->field, \
                (long long)b->field);
#define DQ(field, name)                                                                                        \
    if ((int64_t)zt_q35(a)->field != (int64_t)zt_q35(b)->field)                                                \
        appendf(out, n, "%scheckpoint has %s %lld, the run has %lld", k++ ? "; " : "", name,                   \
                (long long)zt_q35(a)->field, (long long)zt_q35(b)->field);
    DI(rotary_dim, "rotary dims (head_dim x partial_rotary_factor)")
    DQ(lin_conv_kernel, "linear_conv_kernel_dim")
    DQ(lin_key_heads, "linear_num_key_heads")
    DQ(lin_value_heads, "linear_num_value_heads")
    DQ(lin_key_dim, "linear_key_head_dim")
    DQ(lin_value_dim, "linear_value_head_dim")
#undef DI
#undef DQ
    for (int l = 0; l < a->num_layers && l < b->num_layers; l++)
        if (zt_q35(a)->layer_linear[l] != zt_q35(b)->layer_linear[l]) {
            appendf(out, n, "%scheckpoint has layer %d as %s, the run as %s", k++ ? "; " : "", l,
                    zt_q35(a)->layer_linear[l] ? "linear_attention" : "full_attention",
                    zt_q35(b)->layer_linear[l] ? "linear_attention" : "full_attention");
            break;
        }
    return k;
}

static void layer_mix(const zt_model_config *c, char *out, size_t n) {
    int linear = 0;
    for (int l = 0; l < c->num_layers; l++) linear += zt_q35(c)->layer_linear[l] != 0;
    if (n) out[0] = 0;
    if (linear) snprintf(out, n, " (%d linear + %d full)", linear, c->num_layers - linear);
}

// The MTP head carried against mtp_num_hidden_layers: when any mtp.* tensor is there, its layers
// (mtp.layers.N.*) must be exactly 0 .. mtp_num_hidden_layers - 1, the head the config describes
// and an inference engine builds from it. None at all is what transformers saves (it drops mtp.* on
// load and keeps the config's count): nothing is carried then, and nothing disagrees.
static int check_carried(const zt_model_config *c, const char *const *names, int n) {
    unsigned char seen[65] = {0};  // mtp_num_hidden_layers <= 64 (hf_config.c)
    const char *any = NULL;
    for (int i = 0; i < n; i++) {
        if (strncmp(names[i], "mtp.", 4) != 0) continue;
        if (!any) any = names[i];
        int l = -1, k = 0;
        if (sscanf(names[i], "mtp.layers.%d.%n", &l, &k) < 1 || k == 0) continue;
        if (l < 0 || l >= zt_q35(c)->mtp_layers)
            return zt_err("tensor %s belongs to MTP layer %d, but the config has mtp_num_hidden_layers = %d: the "
                          "carried head would not be the one the config describes (set mtp_num_hidden_layers to the "
                          "head's layer count, or leave its mtp.* tensors out)",
                          names[i], l, zt_q35(c)->mtp_layers);
        seen[l] = 1;
    }
    for (int l = 0; any && l < zt_q35(c)->mtp_layers; l++)
        if (!seen[l])
            return zt_err("the config has mtp_num_hidden_layers = %d, but the checkpoint's MTP head (%s, ...) has no "
                          "tensor of layer %d (mtp.layers.%d.*): the carried head would not be the one the config "
                          "describes (set mtp_num_hidden_layers to the head's layer count)",
                          zt_q35(c)->mtp_layers, any, l, l);
    return 0;
}

// The name adapter: read from a Qwen3_5ForConditionalGeneration config, the text model's "model.X"
// tensors are "model.language_model.X" (lm_head.weight stays at the top level).
static const char *hf_prefix(const zt_model_config *c) { return zt_q35(c)->vlm ? ZT_QWEN3_5_VLM_PREFIX : NULL; }

const zt_family zt_qwen3_5_family = {
    .name = "qwen3_5",
    .title = "Qwen3.5",
    .model_type = "qwen3_5_text",
    .layout_init = layout_init,
    .init_unit = init_unit,
    .param_count = param_count,
    .max_positions = max_positions,
    .flops_matmul_per_token = flops_per_token,
    .flops_mixing = flops_mixing,
    .recompute_flops = recompute_flops,
    .layer_kind = layer_kind,
    .layer_plan = layer_plan,
    .cpu = &qwen3_5_cpu,
    .carry_prefixes = carried,
    .config_diff = config_diff,
    .layer_mix = layer_mix,
    .ckpt_config_json = 1,
    .check_carried = check_carried,
    .hf_prefix = hf_prefix,
    .context_parallel = ZT_CONTEXT_CPU,
    .context_rule = context_rule,
};

void zt_qwen3_5_27b_config(zt_model_config *c) {
    memset(c, 0, sizeof *c);
    c->family = &zt_qwen3_5_family;
    c->vocab_size = 248320;
    c->hidden_size = 5120;
    c->intermediate_size = 17408;
    c->num_layers = 64;
    c->num_heads = 24;
    c->num_kv_heads = 4;
    c->head_dim = 256;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000000;
    c->partial_rotary_factor = 0.25;
    c->rotary_dim = 64;
    zt_q35_set(c)->mrope_section[0] = 11, zt_q35_set(c)->mrope_section[1] = 11, zt_q35_set(c)->mrope_section[2] = 10;
    zt_q35_set(c)->mrope_interleaved = 1;
    zt_q35_set(c)->attn_output_gate = 1;
    zt_q35_set(c)->lin_conv_kernel = 4;
    zt_q35_set(c)->lin_key_heads = 16, zt_q35_set(c)->lin_value_heads = 48;
    zt_q35_set(c)->lin_key_dim = 128, zt_q35_set(c)->lin_value_dim = 128;
    zt_q35_set(c)->mtp_layers = 1;
    c->tie_word_embeddings = 0;
    c->initializer_range = 0.02;
    c->max_position_embeddings = 262144;
    c->bos_token_id = c->eos_token_id = 248044;
    for (int l = 0; l < 64; l++) zt_q35_set(c)->layer_linear[l] = (l + 1) % 4 != 0;
}
