// The CPU blocks every family composes its decoder layers of (model/blocks.h): RMSNorm, the GQA
// attention block with its options (output gate, partial RoPE, (1 + w) norms) and the SwiGLU MLP, each
// forward and backward on top of the op table (kernels/ops.h).
// defines: zt_block_norm_fwd/bwd, zt_attn_params_at, zt_attn_grads_at, zt_block_attention_fwd/bwd,
//          zt_mlp_params_at, zt_mlp_grads_at, zt_block_mlp_fwd/bwd, zt_block_attn_layer_fwd/bwd
#include "model/blocks.h"

#include <math.h>
#include <string.h>

#define TICK(e) \
    do {        \
        if ((e)->progress) (e)->progress((e)->progress_ctx); \
    } while (0)

// The weight a norm multiplies by: w, or 1 + w in the env's scratch.
static const float *norm_weight(const zt_block_env *e, const float *w, int64_t d) {
    if (!e->norm_one_plus) return w;
    for (int64_t i = 0; i < d; i++) e->w1[i] = 1.0f + w[i];
    return e->w1;
}

void zt_block_norm_fwd(const zt_block_env *e, float *y, float *rstd, const float *x, const float *w, int64_t rows,
                       int64_t d) {
    e->ops->rmsnorm_fwd(y, rstd, x, norm_weight(e, w, d), rows, d, e->eps);
}

// d(1 + w) = dw: the gradient lands on w as it would on the (1 + w) the forward multiplied by.
void zt_block_norm_bwd(const zt_block_env *e, float *dx, float *dw, const float *dy, const float *x, const float *w,
                       const float *rstd, int64_t rows, int64_t d) {
    e->ops->rmsnorm_bwd(dx, dw, dy, x, norm_weight(e, w, d), rstd, rows, d);
}

zt_attn_params zt_attn_params_at(const zt_unit_layout *u, const float *p, int i) {
#define AT(k) (p + u->t[i + (k)].offset)
    return (zt_attn_params){AT(0), AT(1), AT(2), AT(3), AT(4), AT(5), AT(6)};
#undef AT
}

zt_attn_grads zt_attn_grads_at(const zt_unit_layout *u, float *dp, int i) {
#define AT(k) (dp + u->t[i + (k)].offset)
    return (zt_attn_grads){AT(0), AT(1), AT(2), AT(3), AT(4), AT(5), AT(6)};
#undef AT
}

zt_mlp_params zt_mlp_params_at(const zt_unit_layout *u, const float *p, int i) {
    return (zt_mlp_params){p + u->t[i].offset, p + u->t[i + 1].offset, p + u->t[i + 2].offset,
                           p + u->t[i + 3].offset};
}

zt_mlp_grads zt_mlp_grads_at(const zt_unit_layout *u, float *dp, int i) {
    return (zt_mlp_grads){dp + u->t[i].offset, dp + u->t[i + 1].offset, dp + u->t[i + 2].offset,
                          dp + u->t[i + 3].offset};
}

// ---- attention --------------------------------------------------------------------------------------

// RoPE (or its backward) on x [N, nh, D]: in place when it covers the whole head, else on the first rd
// dims of each head through s->rot.
static void rope(const zt_block_env *e, const zt_attn_shape *s, float *x, int64_t nh, int bwd) {
    void (*f)(float *, const float *, const float *, const int32_t *, int64_t, int64_t, int64_t, int64_t) =
        bwd ? e->ops->rope_bwd : e->ops->rope_fwd;
    const int64_t N = s->B * s->S, D = s->D, rd = s->rd;
    if (rd == D) {
        f(x, s->rope_cos, s->rope_sin, s->pos, s->B, s->S, nh, D);
        return;
    }
    for (int64_t i = 0; i < N * nh; i++) memcpy(s->rot + i * rd, x + i * D, (size_t)rd * sizeof(float));
    f(s->rot, s->rope_cos, s->rope_sin, s->pos, s->B, s->S, nh, rd);
    for (int64_t i = 0; i < N * nh; i++) memcpy(x + i * D, s->rot + i * rd, (size_t)rd * sizeof(float));
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

// q | gate per head (D rows each) into q_pre and gate, and back (dq | dgate into dqg).
static void split_gate(const zt_attn_shape *s, const float *qg, float *q, float *gate) {
    const int64_t D = s->D;
    for (int64_t i = 0; i < s->B * s->S * s->H; i++) {
        memcpy(q + i * D, qg + i * 2 * D, (size_t)D * sizeof(float));
        memcpy(gate + i * D, qg + i * 2 * D + D, (size_t)D * sizeof(float));
    }
}

static void join_gate(const zt_attn_shape *s, const float *dq, const float *dgate, float *dqg) {
    const int64_t D = s->D;
    for (int64_t i = 0; i < s->B * s->S * s->H; i++) {
        memcpy(dqg + i * 2 * D, dq + i * D, (size_t)D * sizeof(float));
        memcpy(dqg + i * 2 * D + D, dgate + i * D, (size_t)D * sizeof(float));
    }
}

static void attend_fwd(const zt_block_env *e, const zt_attn_shape *s, const zt_attn_acts *a) {
    if (s->kv)  // the keys of the whole block: gathered over the context group (model/context.c)
        zt_context_attention_fwd(s->kv, e->ops, s->layer, a->att, a->att_stats, a->q, a->k, a->v, s->pos, s->H,
                                 s->Hkv, s->D);
    else
        e->ops->attention_fwd(a->att, a->att_stats, a->q, a->k, a->v, s->pos, s->B, s->S, s->H, s->Hkv, s->D);
}

static void attend_bwd(const zt_block_env *e, const zt_attn_shape *s, const zt_attn_acts *a, const zt_attn_work *ws) {
    if (s->kv)  // dK/dV of the keys held elsewhere go back to their ranks
        zt_context_attention_bwd(s->kv, e->ops, s->layer, ws->dq, ws->dk, ws->dv, ws->datt, a->att, a->att_stats, a->q,
                                 a->k, a->v, s->pos, s->H, s->Hkv, s->D);
    else
        e->ops->attention_bwd(ws->dq, ws->dk, ws->dv, ws->datt, a->att, a->att_stats, a->q, a->k, a->v, s->pos, s->B,
                              s->S, s->H, s->Hkv, s->D);
}

void zt_block_attention_fwd(const zt_block_env *e, const zt_attn_shape *s, const zt_attn_params *w,
                            const zt_attn_acts *a, const float *x, float *x_mid) {
    const zt_ops *op = e->ops;
    const int64_t N = s->B * s->S, d = s->d, H = s->H, Hkv = s->Hkv, D = s->D, HD = H * D;
    zt_block_norm_fwd(e, a->ln1, a->rstd1, x, w->in_norm, N, d);
    TICK(e);
    if (s->out_gate) {
        op->matmul_fwd(a->qg, a->ln1, w->q, N, d, 2 * HD);
        split_gate(s, a->qg, a->q_pre, a->gate);
    } else {
        op->matmul_fwd(a->q_pre, a->ln1, w->q, N, d, HD);
    }
    TICK(e);
    op->matmul_fwd(a->k_pre, a->ln1, w->k, N, d, Hkv * D);
    TICK(e);
    op->matmul_fwd(a->v, a->ln1, w->v, N, d, Hkv * D);
    TICK(e);
    // QK-norm over head_dim, one weight shared by all heads, before RoPE.
    zt_block_norm_fwd(e, a->q, a->qn_rstd, a->q_pre, w->q_norm, N * H, D);
    TICK(e);
    zt_block_norm_fwd(e, a->k, a->kn_rstd, a->k_pre, w->k_norm, N * Hkv, D);
    TICK(e);
    rope(e, s, a->q, H, 0);
    TICK(e);
    rope(e, s, a->k, Hkv, 0);
    TICK(e);
    attend_fwd(e, s, a);
    TICK(e);
    const float *o_in = a->att;
    if (s->out_gate) {
        for (int64_t i = 0; i < N * HD; i++) a->gated[i] = a->att[i] * sigmoidf(a->gate[i]);
        o_in = a->gated;
    }
    op->matmul_fwd(x_mid, o_in, w->o, N, HD, d);
    TICK(e);
    op->add(x_mid, x_mid, x, N * d);
    TICK(e);
}

void zt_block_attention_bwd(const zt_block_env *e, const zt_attn_shape *s, const zt_attn_params *w,
                            const zt_attn_grads *dw, const zt_attn_acts *a, const zt_attn_work *ws, const float *x,
                            const float *dmid, float *dx) {
    const zt_ops *op = e->ops;
    const int64_t N = s->B * s->S, d = s->d, H = s->H, Hkv = s->Hkv, D = s->D, HD = H * D;
    if (s->out_gate) {  // o read att * sigmoid(gate)
        op->matmul_bwd(ws->dgated, dw->o, dmid, a->gated, w->o, N, HD, d, 0);
        for (int64_t i = 0; i < N * HD; i++) {
            const float g = sigmoidf(a->gate[i]);
            ws->datt[i] = ws->dgated[i] * g;
            ws->dgate[i] = ws->dgated[i] * a->att[i] * g * (1.0f - g);
        }
    } else {
        op->matmul_bwd(ws->datt, dw->o, dmid, a->att, w->o, N, HD, d, 0);
    }
    TICK(e);
    attend_bwd(e, s, a, ws);
    TICK(e);
    rope(e, s, ws->dq, H, 1);
    TICK(e);
    rope(e, s, ws->dk, Hkv, 1);
    TICK(e);
    zt_block_norm_bwd(e, ws->dqp, dw->q_norm, ws->dq, a->q_pre, w->q_norm, a->qn_rstd, N * H, D);
    TICK(e);
    zt_block_norm_bwd(e, ws->dkp, dw->k_norm, ws->dk, a->k_pre, w->k_norm, a->kn_rstd, N * Hkv, D);
    TICK(e);
    if (s->out_gate) {
        join_gate(s, ws->dqp, ws->dgate, ws->dqg);
        op->matmul_bwd(ws->dln, dw->q, ws->dqg, a->ln1, w->q, N, d, 2 * HD, 0);
    } else {
        op->matmul_bwd(ws->dln, dw->q, ws->dqp, a->ln1, w->q, N, d, HD, 0);
    }
    TICK(e);
    op->matmul_bwd(ws->dln, dw->k, ws->dkp, a->ln1, w->k, N, d, Hkv * D, 1);
    TICK(e);
    op->matmul_bwd(ws->dln, dw->v, ws->dv, a->ln1, w->v, N, d, Hkv * D, 1);
    TICK(e);
    zt_block_norm_bwd(e, dx, dw->in_norm, ws->dln, x, w->in_norm, a->rstd1, N, d);
    TICK(e);
    op->add(dx, dx, dmid, N * d);  // residual
}

// ---- MLP --------------------------------------------------------------------------------------------

void zt_block_mlp_fwd(const zt_block_env *e, const zt_mlp_params *w, const zt_mlp_acts *a, const float *x_mid,
                      float *y, int64_t N, int64_t d, int64_t F) {
    const zt_ops *op = e->ops;
    zt_block_norm_fwd(e, a->ln2, a->rstd2, x_mid, w->norm, N, d);
    TICK(e);
    op->matmul_fwd(a->gate, a->ln2, w->gate, N, d, F);
    TICK(e);
    op->matmul_fwd(a->up, a->ln2, w->up, N, d, F);
    TICK(e);
    op->swiglu_fwd(a->h, a->gate, a->up, N * F);
    TICK(e);
    op->matmul_fwd(y, a->h, w->down, N, F, d);
    TICK(e);
    op->add(y, y, x_mid, N * d);
    TICK(e);
}

void zt_block_mlp_bwd(const zt_block_env *e, const zt_mlp_params *w, const zt_mlp_grads *dw, const zt_mlp_acts *a,
                      const zt_mlp_work *ws, const float *x_mid, const float *dy, float *dmid, int64_t N, int64_t d,
                      int64_t F) {
    const zt_ops *op = e->ops;
    op->matmul_bwd(ws->dh, dw->down, dy, a->h, w->down, N, F, d, 0);
    TICK(e);
    op->swiglu_bwd(ws->dg, ws->du, ws->dh, a->gate, a->up, N * F);
    TICK(e);
    op->matmul_bwd(ws->dln, dw->gate, ws->dg, a->ln2, w->gate, N, d, F, 0);
    TICK(e);
    op->matmul_bwd(ws->dln, dw->up, ws->du, a->ln2, w->up, N, d, F, 1);
    TICK(e);
    zt_block_norm_bwd(e, dmid, dw->norm, ws->dln, x_mid, w->norm, a->rstd2, N, d);
    TICK(e);
    op->add(dmid, dmid, dy, N * d);  // residual
}

// ---- the attention decoder layer ------------------------------------------------------------------

void zt_block_attn_layer_fwd(const zt_block_env *e, const zt_attn_shape *s, const zt_unit_layout *u, const float *p,
                             const zt_attn_layer_acts *a, const float *x, float *y, int64_t F) {
    const zt_attn_params aw = zt_attn_params_at(u, p, ZT_L_INPUT_NORM);
    const zt_mlp_params mw = zt_mlp_params_at(u, p, ZT_L_POST_NORM);
    zt_block_attention_fwd(e, s, &aw, &a->at, x, a->x_mid);
    zt_block_mlp_fwd(e, &mw, &a->mlp, a->x_mid, y, s->B * s->S, s->d, F);
}

void zt_block_attn_layer_bwd(const zt_block_env *e, const zt_attn_shape *s, const zt_unit_layout *u, const float *p,
                             float *dp, const zt_attn_layer_acts *a, const zt_attn_layer_work *ws, const float *x,
                             float *dx, int64_t F) {
    const zt_attn_params aw = zt_attn_params_at(u, p, ZT_L_INPUT_NORM);
    const zt_attn_grads ag = zt_attn_grads_at(u, dp, ZT_L_INPUT_NORM);
    const zt_mlp_params mw = zt_mlp_params_at(u, p, ZT_L_POST_NORM);
    const zt_mlp_grads mg = zt_mlp_grads_at(u, dp, ZT_L_POST_NORM);
    zt_block_mlp_bwd(e, &mw, &mg, &a->mlp, &ws->mlp, a->x_mid, dx, ws->dmid, s->B * s->S, s->d, F);
    zt_block_attention_bwd(e, s, &aw, &ag, &a->at, &ws->at, x, ws->dmid, dx);
}
#undef TICK
