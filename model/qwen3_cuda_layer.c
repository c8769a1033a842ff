// Qwen3 decoder layer on the GPU: the blocks of model/blocks_cuda.c (see qwen3_cuda_layer.h). The
// op sequence mirrors zt_qwen3_layer_fwd/bwd in model/qwen3.c line by line.
#include "model/qwen3_cuda_layer.h"

#include <string.h>

#include "base/common.h"

void zt_qwen3_cuda_layer_offsets(const zt_qwen3_cuda_dims *dm, int64_t off[ZT_L_NTENSORS + 1]) {
    int64_t shape[ZT_L_NTENSORS][2];
    zt_qwen3_layer_shapes(dm->d, dm->F, dm->H, dm->Hkv, dm->D, shape);  // model/layout.c's shapes
    off[0] = 0;
    for (int i = 0; i < ZT_L_NTENSORS; i++) off[i + 1] = off[i] + shape[i][0] * (shape[i][1] ? shape[i][1] : 1);
}

static zt_bf16 *bfa(int64_t n) { return zt_cuda_malloc((size_t)n * 2); }
static float *f32a(int64_t n) { return zt_cuda_malloc((size_t)n * 4); }

void zt_qwen3_cuda_acts_alloc(zt_qwen3_cuda_acts *a, const zt_qwen3_cuda_dims *dm) {
    const int64_t N = dm->N, d = dm->d, F = dm->F, HD = dm->H * dm->D, KVD = dm->Hkv * dm->D;
    a->ln1 = bfa(N * d);
    a->q_pre = bfa(N * HD);
    a->k_pre = bfa(N * KVD);
    a->q = bfa(N * HD);
    a->k = bfa(N * KVD);
    a->v = bfa(N * KVD);
    a->att = bfa(N * HD);
    a->x_mid = bfa(N * d);
    a->ln2 = bfa(N * d);
    a->gate = bfa(N * F);
    a->up = bfa(N * F);
    a->h = bfa(N * F);
    a->rstd1 = f32a(N);
    a->rstd2 = f32a(N);
    a->qn_rstd = f32a(N * dm->H);
    a->kn_rstd = f32a(N * dm->Hkv);
    a->lse = f32a(dm->B * dm->H * dm->S);
    a->ogate = a->gated = NULL;  // no output gate
}

void zt_qwen3_cuda_acts_free(zt_qwen3_cuda_acts *a) {
    void *p[] = {a->ln1, a->q_pre, a->k_pre, a->q, a->k, a->v, a->att, a->x_mid, a->ln2, a->gate, a->up, a->h,
                 a->rstd1, a->rstd2, a->qn_rstd, a->kn_rstd, a->lse};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) zt_cuda_free(p[i]);
    memset(a, 0, sizeof *a);
}

void zt_qwen3_cuda_work_alloc(zt_qwen3_cuda_work *w, const zt_qwen3_cuda_dims *dm) {
    const int64_t N = dm->N, d = dm->d, F = dm->F, HD = dm->H * dm->D, KVD = dm->Hkv * dm->D;
    w->dh = bfa(N * F);
    w->dg = bfa(N * F);
    w->du = bfa(N * F);
    w->dln = bfa(N * d);
    w->dmid = bfa(N * d);
    w->datt = bfa(N * HD);
    w->dq = bfa(N * HD);
    w->dk = bfa(N * KVD);
    w->dv = bfa(N * KVD);
    w->dqp = bfa(N * HD);
    w->dkp = bfa(N * KVD);
    w->qg = w->dqg = w->dgated = w->dgate = NULL;  // no output gate
}

void zt_qwen3_cuda_work_free(zt_qwen3_cuda_work *w) {
    void *p[] = {w->dh, w->dg, w->du, w->dln, w->dmid, w->datt, w->dq, w->dk, w->dv, w->dqp, w->dkp};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) zt_cuda_free(p[i]);
    memset(w, 0, sizeof *w);
}

// ---- the layer: the two blocks with Qwen3's weights ---------------------------------------------
static void layer_off(const zt_qwen3_cuda_dims *dm, zt_cuda_attn_off *ao, zt_cuda_mlp_off *mo) {
    int64_t off[ZT_L_NTENSORS + 1];
    zt_qwen3_cuda_layer_offsets(dm, off);
    *ao = (zt_cuda_attn_off){.in_norm = off[ZT_L_INPUT_NORM], .q = off[ZT_L_Q], .k = off[ZT_L_K], .v = off[ZT_L_V],
                             .o = off[ZT_L_O], .q_norm = off[ZT_L_QNORM], .k_norm = off[ZT_L_KNORM]};
    *mo = (zt_cuda_mlp_off){.norm = off[ZT_L_POST_NORM], .gate = off[ZT_L_GATE], .up = off[ZT_L_UP],
                            .down = off[ZT_L_DOWN]};
}

void zt_qwen3_cuda_layer_fwd(zt_cuda_ctx *c, void *st, const zt_qwen3_cuda_dims *dm, const zt_bf16 *params, const float *rc,
                   const float *rs, const int32_t *pos, const zt_bf16 *x, zt_bf16 *y, zt_qwen3_cuda_acts *a,
                   zt_gprof *prof) {
    zt_cuda_attn_off ao;
    zt_cuda_mlp_off mo;
    layer_off(dm, &ao, &mo);
    zt_cuda_attn_block_fwd(c, st, dm, params, &ao, rc, rs, pos, x, a, NULL, prof);
    zt_cuda_mlp_block_fwd(c, st, dm, params, &mo, a, y, prof);
}

void zt_qwen3_cuda_layer_bwd(zt_cuda_ctx *c, void *st, const zt_qwen3_cuda_dims *dm, const zt_bf16 *params, float *dparams,
                   const float *rc, const float *rs, const int32_t *pos, const zt_bf16 *x, const zt_qwen3_cuda_acts *a,
                   zt_qwen3_cuda_work *w, zt_bf16 *dx, zt_gprof *prof) {
    zt_cuda_attn_off ao;
    zt_cuda_mlp_off mo;
    layer_off(dm, &ao, &mo);
    zt_cuda_mlp_block_bwd(c, st, dm, params, dparams, &mo, a, w, dx, prof);  // dx: d(loss)/dy -> w->dmid
    zt_cuda_attn_block_bwd(c, st, dm, params, dparams, &ao, rc, rs, pos, x, a, w, dx, prof);
}

void zt_qwen3_cuda_head_fwd_bwd(zt_cuda_ctx *c, void *st, const zt_qwen3_cuda_dims *dm, int64_t V, const zt_bf16 *norm_w,
                    const zt_bf16 *lm_w, const zt_bf16 *x, const int32_t *targets, float scale, double *loss,
                    zt_qwen3_cuda_head_acts *a, float *dnorm, float *dlm, zt_bf16 *dx) {
    const int64_t N = dm->N, d = dm->d;
    zt_cuda_rmsnorm_fwd(st, a->xf, a->rstd, x, norm_w, N, d, dm->eps);
    if (!dnorm) {  // loss only
        zt_cuda_lmhead_xent(c, st, loss, NULL, NULL, ZT_F32, a->xf, lm_w, targets, N, d, V, scale);
        return;
    }
    zt_cuda_lmhead_xent(c, st, loss, a->dln, dlm, ZT_F32, a->xf, lm_w, targets, N, d, V, scale);
    zt_cuda_rmsnorm_bwd(c, st, dx, dnorm, a->dln, x, norm_w, a->rstd, N, d);
}

double zt_qwen3_cuda_layer_flops(const zt_qwen3_cuda_dims *dm) {
    const double N = (double)dm->N, d = (double)dm->d, F = (double)dm->F, HD = (double)(dm->H * dm->D),
                 KVD = (double)(dm->Hkv * dm->D);
    const double matmul_params = d * HD + 2 * d * KVD + HD * d + 3 * d * F;
    const double attn_fwd = 4.0 * (double)dm->B * (double)dm->S * (double)dm->S * HD / 2.0;  // causal half
    return 6.0 * N * matmul_params + 3.0 * attn_fwd;
}
