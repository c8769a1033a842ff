// The GPU families' attention and MLP blocks (see blocks_cuda.h). The op sequence is
// model/qwen3.c's layer (and model/qwen3_5.c's gated attention with the options set) op for op.
#include "model/blocks_cuda.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cuda/attention/dispatch.h"
#include "kernels/cuda/zt_cuda_check.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "model/qwen3_cuda_layer.h"  // the attention across a context split (model/qwen3_cuda_context.c)

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

void zt_gprof_mark(zt_gprof *p, void *stream, const char *name) {
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

#define mark zt_gprof_mark
#define W(t) (p + off->t)    // a weight of the unit
#define DW(t) (dp + off->t)  // its gradient

// ---- the norms' weight rule -------------------------------------------------------------------
const zt_bf16 *zt_cuda_norm_weight(const zt_cuda_block_dims *dm, void *st, const zt_bf16 *w, int64_t n) {
    if (!dm->w1) return w;
    zt_cuda_one_plus(st, dm->w1, w, n);
    return dm->w1;
}

// ---- the attention block ----------------------------------------------------------------------
// The block's attention call (kernels/cuda/attention/dispatch.h): the kind dm->attention chose,
// over whole rows; across the context group: model/qwen3_cuda_context.c.
static zt_attn_call attention_call(const zt_cuda_block_dims *dm, const int32_t *pos) {
    return (zt_attn_call){.kind = dm->attention, .B = dm->B, .S = dm->S, .H = dm->H, .Hkv = dm->Hkv, .D = dm->D,
                          .pos = pos, .docs = dm->docs, .docs_table = dm->docs_table};
}

// RoPE on rows of dm->S tokens: the rotary slice (dm->rd), or all D; under context parallelism
// the table is the block's (cx->Sb rows).
static void rope(int bwd, void *st, zt_bf16 *x, const float *rc, const float *rs, const int32_t *pos,
                 const zt_cuda_block_dims *dm, int64_t nh) {
    if (dm->rd && dm->cx && bwd)
        zt_cuda_rope_partial_table_bwd(st, x, rc, rs, dm->cx->Sb, pos, dm->B, dm->S, nh, dm->D, dm->rd);
    else if (dm->rd && dm->cx)
        zt_cuda_rope_partial_table_fwd(st, x, rc, rs, dm->cx->Sb, pos, dm->B, dm->S, nh, dm->D, dm->rd);
    else if (dm->rd && bwd)
        zt_cuda_rope_partial_bwd(st, x, rc, rs, pos, dm->B, dm->S, nh, dm->D, dm->rd);
    else if (dm->rd)
        zt_cuda_rope_partial_fwd(st, x, rc, rs, pos, dm->B, dm->S, nh, dm->D, dm->rd);
    else if (dm->cx && bwd)
        zt_cuda_rope_table_bwd(st, x, rc, rs, dm->cx->Sb, pos, dm->B, dm->S, nh, dm->D);
    else if (dm->cx)
        zt_cuda_rope_table_fwd(st, x, rc, rs, dm->cx->Sb, pos, dm->B, dm->S, nh, dm->D);
    else if (bwd)
        zt_cuda_rope_bwd(st, x, rc, rs, pos, dm->B, dm->S, nh, dm->D);
    else
        zt_cuda_rope_fwd(st, x, rc, rs, pos, dm->B, dm->S, nh, dm->D);
}

void zt_cuda_attn_block_fwd(zt_cuda_ctx *c, void *st, const zt_cuda_block_dims *dm, const zt_bf16 *p,
                            const zt_cuda_attn_off *off, const float *rc, const float *rs, const int32_t *pos,
                            const zt_bf16 *x, zt_cuda_block_acts *a, zt_cuda_block_work *wk, zt_gprof *prof) {
    const int64_t N = dm->N, d = dm->d, H = dm->H, Hkv = dm->Hkv, D = dm->D, HD = H * D;
    zt_cuda_rmsnorm_fwd(st, a->ln1, a->rstd1, x, zt_cuda_norm_weight(dm, st, W(in_norm), d), N, d, dm->eps);
    mark(prof, st, "rmsnorm");
    if (dm->out_gate) {  // per head: D query rows, then D gate rows
        zt_cuda_matmul_fwd(c, st, wk->qg, ZT_BF16, a->ln1, W(q), N, d, 2 * HD);
        zt_cuda_copy_cols(st, a->q_pre, D, wk->qg, 2 * D, N * H, D);
        zt_cuda_copy_cols(st, a->ogate, D, wk->qg + D, 2 * D, N * H, D);
    } else {
        zt_cuda_matmul_fwd(c, st, a->q_pre, ZT_BF16, a->ln1, W(q), N, d, HD);
    }
    zt_cuda_matmul_fwd(c, st, a->k_pre, ZT_BF16, a->ln1, W(k), N, d, Hkv * D);
    zt_cuda_matmul_fwd(c, st, a->v, ZT_BF16, a->ln1, W(v), N, d, Hkv * D);
    mark(prof, st, "gemm qkv");
    zt_cuda_rmsnorm_fwd(st, a->q, a->qn_rstd, a->q_pre, zt_cuda_norm_weight(dm, st, W(q_norm), D), N * H, D, dm->eps);
    zt_cuda_rmsnorm_fwd(st, a->k, a->kn_rstd, a->k_pre, zt_cuda_norm_weight(dm, st, W(k_norm), D), N * Hkv, D,
                        dm->eps);
    mark(prof, st, "qk-norm");
    rope(0, st, a->q, rc, rs, pos, dm, H);
    rope(0, st, a->k, rc, rs, pos, dm, Hkv);
    mark(prof, st, "rope");
    if (dm->cx) {
        zt_qwen3_cuda_cx_attention_fwd(c, st, dm, pos, a);
    } else {
        const zt_attn_call call = attention_call(dm, pos);
        zt_attn_fwd(c, st, &call, a->att, a->lse, a->q, a->k, a->v);
    }
    mark(prof, st, "attention fwd");
    if (dm->out_gate) {
        zt_cuda_sigmoid_gate_fwd(st, a->gated, a->att, a->ogate, N * HD);
        mark(prof, st, "output gate");
    }
    zt_cuda_matmul_fwd(c, st, a->x_mid, ZT_BF16, dm->out_gate ? a->gated : a->att, W(o), N, HD, d);
    mark(prof, st, "gemm o");
    zt_cuda_add(st, a->x_mid, a->x_mid, x, ZT_BF16, N * d);
    mark(prof, st, "residual add");
}

void zt_cuda_attn_block_bwd(zt_cuda_ctx *c, void *st, const zt_cuda_block_dims *dm, const zt_bf16 *p, float *dp,
                            const zt_cuda_attn_off *off, const float *rc, const float *rs, const int32_t *pos,
                            const zt_bf16 *x, const zt_cuda_block_acts *a, zt_cuda_block_work *wk, zt_bf16 *dx,
                            zt_gprof *prof) {
    const int64_t N = dm->N, d = dm->d, H = dm->H, Hkv = dm->Hkv, D = dm->D, HD = H * D;
    if (dm->out_gate) {
        zt_cuda_matmul_bwd(c, st, wk->dgated, DW(o), ZT_F32, wk->dmid, a->gated, W(o), N, HD, d, 0);
        mark(prof, st, "gemm o bwd");
        zt_cuda_sigmoid_gate_bwd(st, wk->datt, wk->dgate, wk->dgated, a->att, a->ogate, N * HD);
        mark(prof, st, "output gate bwd");
    } else {
        zt_cuda_matmul_bwd(c, st, wk->datt, DW(o), ZT_F32, wk->dmid, a->att, W(o), N, HD, d, 0);
        mark(prof, st, "gemm o bwd");
    }
    if (dm->cx) {
        zt_qwen3_cuda_cx_attention_bwd(c, st, dm, pos, a, wk);
    } else {
        const zt_attn_call call = attention_call(dm, pos);
        zt_attn_bwd(c, st, &call, wk->dq, wk->dk, wk->dv, wk->datt, a->att, a->lse, a->q, a->k, a->v);
    }
    mark(prof, st, "attention bwd");
    rope(1, st, wk->dq, rc, rs, pos, dm, H);
    rope(1, st, wk->dk, rc, rs, pos, dm, Hkv);
    mark(prof, st, "rope bwd");
    zt_cuda_rmsnorm_bwd(c, st, wk->dqp, DW(q_norm), wk->dq, a->q_pre, zt_cuda_norm_weight(dm, st, W(q_norm), D),
                        a->qn_rstd, N * H, D);
    zt_cuda_rmsnorm_bwd(c, st, wk->dkp, DW(k_norm), wk->dk, a->k_pre, zt_cuda_norm_weight(dm, st, W(k_norm), D),
                        a->kn_rstd, N * Hkv, D);
    mark(prof, st, "qk-norm bwd");
    if (dm->out_gate) {  // back into q_proj's interleaved rows
        zt_cuda_copy_cols(st, wk->dqg, 2 * D, wk->dqp, D, N * H, D);
        zt_cuda_copy_cols(st, wk->dqg + D, 2 * D, wk->dgate, D, N * H, D);
        zt_cuda_matmul_bwd(c, st, wk->dln, DW(q), ZT_F32, wk->dqg, a->ln1, W(q), N, d, 2 * HD, 0);
    } else {
        zt_cuda_matmul_bwd(c, st, wk->dln, DW(q), ZT_F32, wk->dqp, a->ln1, W(q), N, d, HD, 0);
    }
    zt_cuda_matmul_bwd(c, st, wk->dln, DW(k), ZT_F32, wk->dkp, a->ln1, W(k), N, d, Hkv * D, 1);
    zt_cuda_matmul_bwd(c, st, wk->dln, DW(v), ZT_F32, wk->dv, a->ln1, W(v), N, d, Hkv * D, 1);
    mark(prof, st, "gemm qkv bwd");
    zt_cuda_rmsnorm_bwd(c, st, dx, DW(in_norm), wk->dln, x, zt_cuda_norm_weight(dm, st, W(in_norm), d), a->rstd1, N,
                        d);
    mark(prof, st, "rmsnorm bwd");
    zt_cuda_add(st, dx, dx, wk->dmid, ZT_BF16, N * d);
    mark(prof, st, "residual add");
}

// ---- the MLP block -------------------------------------------------------------------------------
void zt_cuda_mlp_block_fwd(zt_cuda_ctx *c, void *st, const zt_cuda_block_dims *dm, const zt_bf16 *p,
                           const zt_cuda_mlp_off *off, zt_cuda_block_acts *a, zt_bf16 *y, zt_gprof *prof) {
    const int64_t N = dm->N, d = dm->d, F = dm->F;
    zt_cuda_rmsnorm_fwd(st, a->ln2, a->rstd2, a->x_mid, zt_cuda_norm_weight(dm, st, W(norm), d), N, d, dm->eps);
    mark(prof, st, "rmsnorm");
    zt_cuda_matmul_fwd(c, st, a->gate, ZT_BF16, a->ln2, W(gate), N, d, F);
    zt_cuda_matmul_fwd(c, st, a->up, ZT_BF16, a->ln2, W(up), N, d, F);
    mark(prof, st, "gemm gate/up");
    zt_cuda_swiglu_fwd(st, a->h, a->gate, a->up, N * F);
    mark(prof, st, "swiglu");
    zt_cuda_matmul_fwd(c, st, y, ZT_BF16, a->h, W(down), N, F, d);
    mark(prof, st, "gemm down");
    zt_cuda_add(st, y, y, a->x_mid, ZT_BF16, N * d);
    mark(prof, st, "residual add");
}

void zt_cuda_mlp_block_bwd(zt_cuda_ctx *c, void *st, const zt_cuda_block_dims *dm, const zt_bf16 *p, float *dp,
                           const zt_cuda_mlp_off *off, const zt_cuda_block_acts *a, zt_cuda_block_work *wk,
                           const zt_bf16 *dy, zt_gprof *prof) {
    const int64_t N = dm->N, d = dm->d, F = dm->F;
    zt_cuda_matmul_bwd(c, st, wk->dh, DW(down), ZT_F32, dy, a->h, W(down), N, F, d, 0);
    mark(prof, st, "gemm down bwd");
    zt_cuda_swiglu_bwd(st, wk->dg, wk->du, wk->dh, a->gate, a->up, N * F);
    mark(prof, st, "swiglu bwd");
    zt_cuda_matmul_bwd(c, st, wk->dln, DW(gate), ZT_F32, wk->dg, a->ln2, W(gate), N, d, F, 0);
    zt_cuda_matmul_bwd(c, st, wk->dln, DW(up), ZT_F32, wk->du, a->ln2, W(up), N, d, F, 1);
    mark(prof, st, "gemm gate/up bwd");
    zt_cuda_rmsnorm_bwd(c, st, wk->dmid, DW(norm), wk->dln, a->x_mid, zt_cuda_norm_weight(dm, st, W(norm), d),
                        a->rstd2, N, d);
    mark(prof, st, "rmsnorm bwd");
    zt_cuda_add(st, wk->dmid, wk->dmid, dy, ZT_BF16, N * d);
    mark(prof, st, "residual add");
}

// ---- the cuDNN attention's packed documents ---------------------------------------------------
int64_t zt_cuda_docs_stage_bytes(int64_t N) { return (int64_t)zt_cudnn_docs_bytes(2 * N); }

void zt_cuda_docs_stage_init(zt_cuda_docs_stage *s, int64_t N) {
    memset(s, 0, sizeof *s);
    s->cap = zt_cudnn_docs_bytes(2 * N);
    s->d = zt_cuda_malloc(s->cap);
    for (int j = 0; j < 2; j++) {
        ZT_CUDA_CHECK(cudaMallocHost(&s->h[j], s->cap));
        ZT_CUDA_CHECK(cudaEventCreateWithFlags((cudaEvent_t *)&s->ev[j], cudaEventDisableTiming));
    }
}

void zt_cuda_docs_stage_free(zt_cuda_docs_stage *s) {
    for (int j = 0; j < 2; j++) {
        if (s->ev[j]) ZT_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)s->ev[j]));
        if (s->h[j]) ZT_CUDA_CHECK(cudaFreeHost(s->h[j]));
    }
    zt_cuda_free(s->d);
    memset(s, 0, sizeof *s);
}

int zt_cuda_docs_stage_put(zt_cuda_docs_stage *s, void *st, const int32_t *pos, const zt_cuda_block_dims *dm) {
    const int j = s->next;
    s->next ^= 1;
    ZT_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)s->ev[j]));
    const int pad = zt_cudnn_version() >= ZT_CUDNN_DOCS_ZERO_LEN_VERSION;
    if (zt_cudnn_docs_build(pos, dm->B, dm->S, dm->H, dm->Hkv, dm->D, pad, s->h[j], s->cap, &s->table) != 0)
        return -1;
    ZT_CUDA_CHECK(cudaMemcpyAsync(s->d, s->h[j], s->table.bytes, cudaMemcpyHostToDevice, (cudaStream_t)st));
    ZT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)s->ev[j], (cudaStream_t)st));
    return 0;
}

int zt_cuda_docs_check(zt_attn_kind attention, int isolated) {
    if (isolated && attention == ZT_ATTN_CUDNN && !zt_cudnn_sdpa_docs_supported()) {
        char why[ZT_ERR_MAX];  // zt_err writes the buffer zt_errmsg() reads
        snprintf(why, sizeof why, "%s", zt_errmsg());
        return zt_err("--attention cudnn cannot keep packed documents apart here: %s; use --attention tiled (or "
                      "gemm) or --doc-attention full",
                      why);
    }
    return 0;
}
