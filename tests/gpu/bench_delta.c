// One Gated DeltaNet core (the chunked gated delta rule) of Qwen3.5-27B's linear layers on the GPU:
// 16 key / 48 value heads x 128, B = 1, S = 8,192 by default, forward and backward, the fp32
// chunked kernels (delta_chunk.cu) against the tensor-core ones (delta_chunk_tc.cu) on the same
// inputs: CUDA-event times (median of --iters after --warmup) and the tensor-core outputs' max-norm
// relative difference from the fp32 kernels' (o, saved states, dq, dk, dv, dg, dbeta).
// tests/gpu/run.sh's step delta_tc runs it beside fla's chunk_gated_delta_rule (bench_delta_fla.py).
// --smoke: a small shape, one iteration (the code path; its times mean nothing).
// Prints "RESULT delta_bench form=F seq=S fwd_ms=.. bwd_ms=.. total_ms=.." and
// "RESULT delta_bench_diff op=X err=..". Exit 77 without a device.
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cuda/zt_cuda.h"
#include "kernels/cuda/zt_cuda_check.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

typedef struct {
    zt_bf16 *o, *dq, *dk, *dv;
    float *saved, *dg, *db;
} outs;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    zt_skip_without_device();
    int64_t B = 1, S = 8192, Hk = 16, Hv = 48, D = 128;
    int iters = 10, warmup = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--smoke")) S = 130, Hk = 1, Hv = 3, D = 32, iters = 1, warmup = 0;
        else if (!strcmp(argv[i], "--seq") && i + 1 < argc) S = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_delta [--smoke] [--seq S] [--iters N]\n");
            return 2;
        }
    }
    if (iters < 1 || iters > 1000) iters = 1;
    const int64_t N = B * S, nq = N * Hk * D, nv = N * Hv * D, ng = N * Hv;
    const int64_t ns = zt_cuda_delta_saved_floats(B, S, Hv, D, D);
    printf("delta rule B=%lld S=%lld Hk=%lld Hv=%lld Dk=Dv=%lld, %d iterations after %d warm-up\n", (long long)B,
           (long long)S, (long long)Hk, (long long)Hv, (long long)D, iters, warmup);
    // inputs as the model feeds them: l2-normalised q, k rows; g = -exp(A_log) softplus(.) < 0; beta in (0, 1)
    float *q = zt_host_normal(nq, 1.0f, 11, 0), *k = zt_host_normal(nq, 1.0f, 12, 0), *ri = zt_xmalloc((size_t)N * Hk * 4);
    zt_cpu_ops.l2norm_fwd(q, ri, q, N * Hk, D, 1e-6f);
    zt_cpu_ops.l2norm_fwd(k, ri, k, N * Hk, D, 1e-6f);
    float *v = zt_host_normal(nv, 1.0f, 13, 1), *dout = zt_host_normal(nv, 1.0f, 14, 1);
    float *g = zt_host_uniform(ng, -1.5f, -0.01f, 15, 0), *beta = zt_host_uniform(ng, 0.05f, 0.95f, 16, 0);
    zt_bf16 *gq = zt_dev_bf16(q, nq), *gk = zt_dev_bf16(k, nq), *gv = zt_dev_bf16(v, nv), *gdo = zt_dev_bf16(dout, nv);
    float *gg = zt_dev_f32(g, ng), *gb = zt_dev_f32(beta, ng);
    zt_cuda_ctx *c = zt_cuda_ctx_create();
    outs r[2];
    const char *name[2] = {"chunk_fp32", "chunk_tc"};
    cudaEvent_t e0, e1, e2;
    ZT_CUDA_CHECK(cudaEventCreate(&e0));
    ZT_CUDA_CHECK(cudaEventCreate(&e1));
    ZT_CUDA_CHECK(cudaEventCreate(&e2));
    double *tf = zt_xmalloc(sizeof(double) * (size_t)iters), *tb = zt_xmalloc(sizeof(double) * (size_t)iters);
    for (int f = 0; f < 2; f++) {
        outs *o = &r[f];
        o->o = zt_cuda_malloc((size_t)nv * 2), o->dv = zt_cuda_malloc((size_t)nv * 2);
        o->dq = zt_cuda_malloc((size_t)nq * 2), o->dk = zt_cuda_malloc((size_t)nq * 2);
        o->saved = zt_cuda_malloc((size_t)ns * 4), o->dg = zt_cuda_malloc((size_t)ng * 4), o->db = zt_cuda_malloc((size_t)ng * 4);
        for (int it = -warmup; it < iters; it++) {
            ZT_CUDA_CHECK(cudaEventRecord(e0, NULL));
            (f ? zt_cuda_delta_tc_fwd : zt_cuda_delta_chunk_fwd)(NULL, o->o, o->saved, gq, gk, gv, gg, gb, NULL, B, S,
                                                               Hk, Hv, D, D);
            ZT_CUDA_CHECK(cudaEventRecord(e1, NULL));
            (f ? zt_cuda_delta_tc_bwd : zt_cuda_delta_chunk_bwd)(c, NULL, o->dq, o->dk, o->dv, o->dg, o->db, gdo,
                                                               o->saved, gq, gk, gv, gg, gb, NULL, B, S, Hk, Hv, D, D);
            ZT_CUDA_CHECK(cudaEventRecord(e2, NULL));
            ZT_CUDA_CHECK(cudaEventSynchronize(e2));
            float a = 0.0f, b2 = 0.0f;
            ZT_CUDA_CHECK(cudaEventElapsedTime(&a, e0, e1));
            ZT_CUDA_CHECK(cudaEventElapsedTime(&b2, e1, e2));
            if (it >= 0) tf[it] = a, tb[it] = b2;
        }
        qsort(tf, (size_t)iters, sizeof(double), cmp_double);
        qsort(tb, (size_t)iters, sizeof(double), cmp_double);
        printf("RESULT delta_bench form=%s seq=%lld fwd_ms=%.3f bwd_ms=%.3f total_ms=%.3f\n", name[f], (long long)S,
               tf[iters / 2], tb[iters / 2], tf[iters / 2] + tb[iters / 2]);
        fflush(stdout);
    }
    // the tensor-core results against the fp32 kernels' (the same inputs)
    struct {
        const char *op;
        const void *a, *b;
        int64_t n;
        int bf;
    } d[] = {{"o", r[1].o, r[0].o, nv, 1},          {"saved", r[1].saved, r[0].saved, ns, 0},
             {"dq", r[1].dq, r[0].dq, nq, 1},       {"dk", r[1].dk, r[0].dk, nq, 1},
             {"dv", r[1].dv, r[0].dv, nv, 1},       {"dg", r[1].dg, r[0].dg, ng, 0},
             {"dbeta", r[1].db, r[0].db, ng, 0}};
    int bad = 0;
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        float *x = zt_xmalloc((size_t)d[i].n * 4), *y = zt_xmalloc((size_t)d[i].n * 4);
        if (d[i].bf)
            zt_dev_get_bf16(x, d[i].a, d[i].n), zt_dev_get_bf16(y, d[i].b, d[i].n);
        else
            zt_dev_get_f32(x, d[i].a, d[i].n), zt_dev_get_f32(y, d[i].b, d[i].n);
        const double e = zt_relerr(x, y, d[i].n), tol = d[i].bf && i == 0 ? 1e-2 : 2e-2;
        printf("RESULT delta_bench_diff op=%s seq=%lld err=%.3e tol=%.0e ok=%d\n", d[i].op, (long long)S, e, tol, e <= tol);
        bad |= !(e <= tol);
        free(x), free(y);
    }
    for (int f = 0; f < 2; f++) {
        void *p[] = {r[f].o, r[f].dq, r[f].dk, r[f].dv, r[f].saved, r[f].dg, r[f].db};
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) zt_cuda_free(p[i]);
    }
    zt_cuda_ctx_destroy(c);
    void *fr[] = {q, k, ri, v, dout, g, beta, tf, tb};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gq, gk, gv, gdo, gg, gb};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
    return bad;
}
