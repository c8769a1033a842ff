// Qwen3 decoder layer on the GPU from the zt_cuda ops (see qwen3_cuda_layer.h). The op
// sequence mirrors zt_qwen3_layer_fwd/bwd in model/qwen3.c line by line.
#include "model/qwen3_cuda_layer.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/zt_cuda_check.h"
#include "kernels/cuda/attention/dispatch.h"
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
}

void zt_qwen3_cuda_work_free(zt_qwen3_cuda_work *w) {
    void *p[] = {w->dh, w->dg, w->du, w->dln, w->dmid, w->datt, w->dq, w->dk, w->dv, w->dqp, w->dkp};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) zt_cuda_free(p[i]);
    memset(w, 0, sizeof *w);
}

// ---- profiling ---------------------------------------------------------------------------
void zt_gprof_init(zt_gprof *p) {
    memset(p, 0, sizeof *p);
    for (int i = 0; i < ZT_GPROF_MAX; i++) ZT_CUDA_CHECK(cudaEventCreate((cudaEvent_t *)&p->ev[i]));
    ZT_CUDA_CHECK(cudaEventCreate((cudaEvent_t *)&p->start));
}

void zt_gprof_free(zt_gprof *p) {
    for (int i = 0; i < ZT_GPROF_MAX; i++) cudaEventDestroy((cudaEvent_t)p->ev[i]);
    cudaEventDestroy((cudaEvent_t)p->start);
}

static void mark(zt_gprof *p, void *stream, const char *name) {
    if (!p) return;
    if (p->n >= ZT_GPROF_MAX) zt_fatal("zt_gprof: more than %d marks", ZT_GPROF_MAX);
    p->name[p->n] = name;
    ZT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)p->ev[p->n], (cudaStream_t)stream));
    p->n++;
}

void zt_gprof_report(const zt_gprof *p, const char *title) {
    const char *names[ZT_GPROF_MAX];
    double ms[ZT_GPROF_MAX], total = 0;
    int nn = 0;
    for (int i = 0; i < p->n; i++) {
        float t = 0;
        ZT_CUDA_CHECK(cudaEventElapsedTime(&t, (cudaEvent_t)(i ? p->ev[i - 1] : p->start), (cudaEvent_t)p->ev[i]));
        int j = 0;
        while (j < nn && strcmp(names[j], p->name[i])) j++;
        if (j == nn) {
            names[nn] = p->name[i];
            ms[nn++] = 0;
        }
        ms[j] += t;
        total += t;
    }
    printf("%s (one pass, events after every op; total %.3f ms)\n", title, total);
    for (int j = 0; j < nn; j++) printf("  %-28s %9.3f ms  %5.1f%%\n", names[j], ms[j], 100.0 * ms[j] / total);
}

// ---- the layer ------------------------------------------------------------------------------------
// The layer's attention call (kernels/cuda/attention/dispatch.h): the kind dm->attention chose,
// over whole rows; across the context group: model/qwen3_cuda_context.c.
static zt_attn_call attention_call(const zt_qwen3_cuda_dims *dm, const int32_t *pos) {
    return (zt_attn_call){.kind = dm->attention, .B = dm->B, .S = dm->S, .H = dm->H, .Hkv = dm->Hkv, .D = dm->D,
                          .pos = pos, .docs = dm->docs, .docs_table = dm->docs_table};
}

static void attention_fwd(zt_cuda_ctx *c, void *st, const zt_qwen3_cuda_dims *dm, const int32_t *pos,
                          zt_qwen3_cuda_acts *a) {
    if (dm->cx) {
        zt_qwen3_cuda_cx_attention_fwd(c, st, dm, pos, a);
        return;
    }
    const zt_attn_call call = attention_call(dm, pos);
    zt_attn_fwd(c, st, &call, a->att, a->lse, a->q, a->k, a->v);
}

// RoPE on rows of dm->S tokens; under context parallelism the table is the block's (cx->Sb rows).
static void rope(int bwd, void *st, zt_bf16 *x, const float *rc, const float *rs, const int32_t *pos,
                 const zt_qwen3_cuda_dims *dm, int64_t nh) {
    if (dm->cx && bwd)
        zt_cuda_rope_table_bwd(st, x, rc, rs, dm->cx->Sb, pos, dm->B, dm->S, nh, dm->D);
    else if (dm->cx)
        zt_cuda_rope_table_fwd(st, x, rc, rs, dm->cx->Sb, pos, dm->B, dm->S, nh, dm->D);
    else if (bwd)
        zt_cuda_rope_bwd(st, x, rc, rs, pos, dm->B, dm->S, nh, dm->D);
    else
        zt_cuda_rope_fwd(st, x, rc, rs, pos, dm->B, dm->S, nh, dm->D);
}

#define W(i) (params + off[(i)])
#define DW(i) (dparams + off[(i)])

void zt_qwen3_cuda_layer_fwd(zt_cuda_ctx *c, void *st, const zt_qwen3_cuda_dims *dm, const zt_bf16 *params, const float *rc,
                   const float *rs, const int32_t *pos, const zt_bf16 *x, zt_bf16 *y, zt_qwen3_cuda_acts *a,
                   zt_gprof *prof) {
    int64_t off[ZT_L_NTENSORS + 1];
    zt_qwen3_cuda_layer_offsets(dm, off);
    const int64_t N = dm->N, d = dm->d, F = dm->F, H = dm->H, Hkv = dm->Hkv, D = dm->D;
    zt_cuda_rmsnorm_fwd(st, a->ln1, a->rstd1, x, W(ZT_L_INPUT_NORM), N, d, dm->eps);
    mark(prof, st, "rmsnorm");
    zt_cuda_matmul_fwd(c, st, a->q_pre, ZT_BF16, a->ln1, W(ZT_L_Q), N, d, H * D);
    zt_cuda_matmul_fwd(c, st, a->k_pre, ZT_BF16, a->ln1, W(ZT_L_K), N, d, Hkv * D);
    zt_cuda_matmul_fwd(c, st, a->v, ZT_BF16, a->ln1, W(ZT_L_V), N, d, Hkv * D);
    mark(prof, st, "gemm qkv");
    zt_cuda_rmsnorm_fwd(st, a->q, a->qn_rstd, a->q_pre, W(ZT_L_QNORM), N * H, D, dm->eps);
    zt_cuda_rmsnorm_fwd(st, a->k, a->kn_rstd, a->k_pre, W(ZT_L_KNORM), N * Hkv, D, dm->eps);
    mark(prof, st, "qk-norm");
    rope(0, st, a->q, rc, rs, pos, dm, H);
    rope(0, st, a->k, rc, rs, pos, dm, Hkv);
    mark(prof, st, "rope");
    attention_fwd(c, st, dm, pos, a);
    mark(prof, st, "attention fwd");
    zt_cuda_matmul_fwd(c, st, a->x_mid, ZT_BF16, a->att, W(ZT_L_O), N, H * D, d);
    mark(prof, st, "gemm o");
    zt_cuda_add(st, a->x_mid, a->x_mid, x, ZT_BF16, N * d);
    mark(prof, st, "residual add");
    zt_cuda_rmsnorm_fwd(st, a->ln2, a->rstd2, a->x_mid, W(ZT_L_POST_NORM), N, d, dm->eps);
    mark(prof, st, "rmsnorm");
    zt_cuda_matmul_fwd(c, st, a->gate, ZT_BF16, a->ln2, W(ZT_L_GATE), N, d, F);
    zt_cuda_matmul_fwd(c, st, a->up, ZT_BF16, a->ln2, W(ZT_L_UP), N, d, F);
    mark(prof, st, "gemm gate/up");
    zt_cuda_swiglu_fwd(st, a->h, a->gate, a->up, N * F);
    mark(prof, st, "swiglu");
    zt_cuda_matmul_fwd(c, st, y, ZT_BF16, a->h, W(ZT_L_DOWN), N, F, d);
    mark(prof, st, "gemm down");
    zt_cuda_add(st, y, y, a->x_mid, ZT_BF16, N * d);
    mark(prof, st, "residual add");
}

void zt_qwen3_cuda_layer_bwd(zt_cuda_ctx *c, void *st, const zt_qwen3_cuda_dims *dm, const zt_bf16 *params, float *dparams,
                   const float *rc, const float *rs, const int32_t *pos, const zt_bf16 *x, const zt_qwen3_cuda_acts *a,
                   zt_qwen3_cuda_work *w, zt_bf16 *dx, zt_gprof *prof) {
    int64_t off[ZT_L_NTENSORS + 1];
    zt_qwen3_cuda_layer_offsets(dm, off);
    const int64_t N = dm->N, d = dm->d, F = dm->F, H = dm->H, Hkv = dm->Hkv, D = dm->D;
    // MLP: y = x_mid + down(swiglu(gate(ln2), up(ln2)))
    zt_cuda_matmul_bwd(c, st, w->dh, DW(ZT_L_DOWN), ZT_F32, dx, a->h, W(ZT_L_DOWN), N, F, d, 0);
    mark(prof, st, "gemm down bwd");
    zt_cuda_swiglu_bwd(st, w->dg, w->du, w->dh, a->gate, a->up, N * F);
    mark(prof, st, "swiglu bwd");
    zt_cuda_matmul_bwd(c, st, w->dln, DW(ZT_L_GATE), ZT_F32, w->dg, a->ln2, W(ZT_L_GATE), N, d, F, 0);
    zt_cuda_matmul_bwd(c, st, w->dln, DW(ZT_L_UP), ZT_F32, w->du, a->ln2, W(ZT_L_UP), N, d, F, 1);
    mark(prof, st, "gemm gate/up bwd");
    zt_cuda_rmsnorm_bwd(c, st, w->dmid, DW(ZT_L_POST_NORM), w->dln, a->x_mid, W(ZT_L_POST_NORM), a->rstd2, N, d);
    mark(prof, st, "rmsnorm bwd");
    zt_cuda_add(st, w->dmid, w->dmid, dx, ZT_BF16, N * d);
    mark(prof, st, "residual add");
    // attention
    zt_cuda_matmul_bwd(c, st, w->datt, DW(ZT_L_O), ZT_F32, w->dmid, a->att, W(ZT_L_O), N, H * D, d, 0);
    mark(prof, st, "gemm o bwd");
    if (dm->cx) {
        zt_qwen3_cuda_cx_attention_bwd(c, st, dm, pos, a, w);
    } else {
        const zt_attn_call call = attention_call(dm, pos);
        zt_attn_bwd(c, st, &call, w->dq, w->dk, w->dv, w->datt, a->att, a->lse, a->q, a->k, a->v);
    }
    mark(prof, st, "attention bwd");
    rope(1, st, w->dq, rc, rs, pos, dm, H);
    rope(1, st, w->dk, rc, rs, pos, dm, Hkv);
    mark(prof, st, "rope bwd");
    zt_cuda_rmsnorm_bwd(c, st, w->dqp, DW(ZT_L_QNORM), w->dq, a->q_pre, W(ZT_L_QNORM), a->qn_rstd, N * H, D);
    zt_cuda_rmsnorm_bwd(c, st, w->dkp, DW(ZT_L_KNORM), w->dk, a->k_pre, W(ZT_L_KNORM), a->kn_rstd, N * Hkv, D);
    mark(prof, st, "qk-norm bwd");
    zt_cuda_matmul_bwd(c, st, w->dln, DW(ZT_L_Q), ZT_F32, w->dqp, a->ln1, W(ZT_L_Q), N, d, H * D, 0);
    zt_cuda_matmul_bwd(c, st, w->dln, DW(ZT_L_K), ZT_F32, w->dkp, a->ln1, W(ZT_L_K), N, d, Hkv * D, 1);
    zt_cuda_matmul_bwd(c, st, w->dln, DW(ZT_L_V), ZT_F32, w->dv, a->ln1, W(ZT_L_V), N, d, Hkv * D, 1);
    mark(prof, st, "gemm qkv bwd");
    zt_cuda_rmsnorm_bwd(c, st, dx, DW(ZT_L_INPUT_NORM), w->dln, x, W(ZT_L_INPUT_NORM), a->rstd1, N, d);
    mark(prof, st, "rmsnorm bwd");
    zt_cuda_add(st, dx, dx, w->dmid, ZT_BF16, N * d);
    mark(prof, st, "residual add");
}
#undef W
#undef DW

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
