// Qwen3-32B-shaped decoder layer, forward + backward, from the zt_cuda ops:
// d=5120, ffn=25600, H=64, Hkv=8, D=128, seq 2048, micro-batch 1, bf16 storage.
// Times with CUDA events (median of --iters after --warmup), measures the bf16
// matmul peak of the same GPU with one large cuBLASLt product (8192^3, random
// data), and reports layer TFLOP/s and the fraction of that measured peak.
// FLOPs (forward + backward = 3 x forward, causal attention at half the square):
//   6 N (d*H*D + 2 d*Hkv*D + H*D*d + 3 d*F) + 3 * 4 B S^2 H D / 2
// Prints "RESULT key=value" lines for tests/gpu/run.sh.
//   bench_layer [--seq S] [--batch B] [--iters N] [--warmup N] [--peak-n N]
//               [--attn gemm|tiled|tiled-scalar|cudnn] [--smoke]
// --attn: the attention (default gemm, the path the earlier GPU runs measured); tiled is the
// layers' tiled path (tensor cores, kernels/cuda/attention_tc.cu, at head_dim 128: RESULT
// attn=tiled-tc), tiled-scalar the fp32 CUDA-core tiles (attention_tiled.cu); both do only
// the tiles at or below the diagonal (the FLOP count's half square plus the diagonal tiles) and
// its backward 7 tile products where the count credits 4 (dQ has its own pass: no atomics).
// --smoke: a small layer and two iterations (the ctest registration). Exit 77 without a device.
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/zt_cuda.h"
#include "kernels/cuda/zt_cuda_check.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "base/common.h"
#include "model/qwen3_cuda_layer.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/attention_test.h"

// bf16 GEMM peak: C[n,n] = A[n,n] B[n,n]^T, random data, median of iters.
static double measure_peak(zt_cuda_ctx *c, cudaStream_t st, int64_t n, int warmup, int iters) {
    zt_bf16 *A = zt_cuda_malloc((size_t)(n * n) * 2), *B = zt_cuda_malloc((size_t)(n * n) * 2);
    zt_bf16 *C = zt_cuda_malloc((size_t)(n * n) * 2);
    zt_cuda_fill_uniform(A, ZT_BF16, n * n, -1.0f, 1.0f, 11, st);
    zt_cuda_fill_uniform(B, ZT_BF16, n * n, -1.0f, 1.0f, 12, st);
    cudaEvent_t e0, e1;
    ZT_CUDA_CHECK(cudaEventCreate(&e0));
    ZT_CUDA_CHECK(cudaEventCreate(&e1));
    double *ms = zt_xmalloc((size_t)iters * sizeof(double));
    for (int it = 0; it < warmup + iters; it++) {
        ZT_CUDA_CHECK(cudaEventRecord(e0, st));
        zt_cuda_matmul_fwd(c, st, C, ZT_BF16, A, B, n, n, n);
        ZT_CUDA_CHECK(cudaEventRecord(e1, st));
        ZT_CUDA_CHECK(cudaEventSynchronize(e1));
        float t;
        ZT_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= warmup) ms[it - warmup] = t;
    }
    double med = zt_median(ms, iters);
    double tflops = 2.0 * (double)n * n * n / (med * 1e-3) / 1e12;
    printf("matmul peak: %lld^3 bf16 (fp32 accumulate) median %.3f ms over %d -> %.1f TFLOP/s\n", (long long)n, med,
           iters, tflops);
    free(ms);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    zt_cuda_free(A);
    zt_cuda_free(B);
    zt_cuda_free(C);
    return tflops;
}

int main(int argc, char **argv) {
    zt_qwen3_cuda_dims dm = {.B = 1, .S = 2048, .d = 5120, .F = 25600, .H = 64, .Hkv = 8, .D = 128, .eps = 1e-6f,
                             .attention = ZT_ATTN_GEMM};
    int iters = 10, warmup = 3, smoke = 0, scalar = 0;
    int64_t peak_n = 8192;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--smoke")) smoke = 1;
        else if (!strcmp(a, "--seq") && v) dm.S = atoll(argv[++i]);
        else if (!strcmp(a, "--batch") && v) dm.B = atoll(argv[++i]);
        else if (!strcmp(a, "--iters") && v) iters = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup") && v) warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--peak-n") && v) peak_n = atoll(argv[++i]);
        else if (!strcmp(a, "--attn") && v) {
            const char *k = argv[++i];
            if (!strcmp(k, "gemm")) dm.attention = ZT_ATTN_GEMM;
            else if (!strcmp(k, "tiled")) dm.attention = ZT_ATTN_TILED;
            else if (!strcmp(k, "tiled-scalar")) dm.attention = ZT_ATTN_TILED, scalar = 1;  // test-only choice
            else if (!strcmp(k, "cudnn")) dm.attention = ZT_ATTN_CUDNN;
            else zt_fatal("bench_layer: --attn %s: gemm, tiled, tiled-scalar or cudnn", k);
        }
        else zt_fatal("bench_layer: unknown argument '%s' (see the comment at the top of tests/gpu/bench_layer.c)", a);
    }
    zt_skip_without_device();
    if (smoke) {  // small and quick: proves the layer runs end to end
        dm = (zt_qwen3_cuda_dims){.B = 2, .S = 128, .d = 256, .F = 512, .H = 8, .Hkv = 2, .D = 32, .eps = 1e-6f,
                              .attention = dm.attention};
        iters = 2;
        warmup = 1;
        peak_n = 1024;
    }
    if (iters < 1) iters = 1;
    dm.N = dm.B * dm.S;
    if (dm.attention == ZT_ATTN_CUDNN && !zt_cudnn_sdpa_built()) {
        printf("cuDNN SDPA attention: not built (cuDNN was not found when this build was configured); using the "
               "GEMM path\n");
        dm.attention = ZT_ATTN_GEMM;
    }
    zt_attn_test_scalar_tiles(scalar);
    const char *attn_name = dm.attention == ZT_ATTN_CUDNN ? "cudnn"
                            : dm.attention == ZT_ATTN_TILED
                                ? (!scalar && zt_cuda_attention_tc_supported(dm.D) ? "tiled-tc" : "tiled-scalar")
                                : "gemm";
    char dev[256];
    zt_cuda_device_describe(dev, sizeof dev);
    printf("RESULT seq=%lld\n", (long long)dm.S);  // run.sh reads each length's section after this line
    printf("bench_layer on %s\n", dev);
    printf("layer: B=%lld S=%lld d=%lld F=%lld H=%lld Hkv=%lld D=%lld, bf16, attention=%s\n", (long long)dm.B,
           (long long)dm.S, (long long)dm.d, (long long)dm.F, (long long)dm.H, (long long)dm.Hkv, (long long)dm.D,
           attn_name);

    cudaStream_t st;
    ZT_CUDA_CHECK(cudaStreamCreate(&st));
    zt_cuda_ctx *c = zt_cuda_ctx_create();
    int64_t off[ZT_L_NTENSORS + 1];
    zt_qwen3_cuda_layer_offsets(&dm, off);
    const int64_t P = off[ZT_L_NTENSORS], N = dm.N, d = dm.d;
    // Parameters: matrices U(-a, a) with std 0.02, norm weights U(0.9, 1.1).
    zt_bf16 *params = zt_cuda_malloc((size_t)P * 2);
    const float a = 0.02f * 1.7320508f;
    for (int t = 0; t < ZT_L_NTENSORS; t++) {
        const int is_norm = t == ZT_L_INPUT_NORM || t == ZT_L_QNORM || t == ZT_L_KNORM || t == ZT_L_POST_NORM;
        zt_cuda_fill_uniform(params + off[t], ZT_BF16, off[t + 1] - off[t], is_norm ? 0.9f : -a, is_norm ? 1.1f : a,
                             100 + (uint64_t)t, st);
    }
    float *grads = zt_cuda_malloc((size_t)P * 4);
    ZT_CUDA_CHECK(cudaMemsetAsync(grads, 0, (size_t)P * 4, st));
    zt_bf16 *x = zt_cuda_malloc((size_t)(N * d) * 2), *y = zt_cuda_malloc((size_t)(N * d) * 2);
    zt_bf16 *dy = zt_cuda_malloc((size_t)(N * d) * 2), *dx = zt_cuda_malloc((size_t)(N * d) * 2);
    zt_cuda_fill_uniform(x, ZT_BF16, N * d, -1.0f, 1.0f, 7, st);
    zt_cuda_fill_uniform(dy, ZT_BF16, N * d, -1e-3f, 1e-3f, 8, st);
    float *rc = zt_cuda_malloc((size_t)(dm.S * dm.D / 2) * 4), *rs = zt_cuda_malloc((size_t)(dm.S * dm.D / 2) * 4);
    zt_cuda_rope_table(st, rc, rs, dm.S, dm.D, 1e6);
    zt_qwen3_cuda_acts acts;
    zt_qwen3_cuda_work work;
    zt_qwen3_cuda_acts_alloc(&acts, &dm);
    zt_qwen3_cuda_work_alloc(&work, &dm);
    zt_cuda_ctx_reserve(c, zt_cuda_attention_scratch_bytes(dm.S, dm.H, dm.Hkv, dm.D), st);
    size_t free_b, total_b;
    ZT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("memory: params %.2f GiB bf16, grads %.2f GiB fp32, attention scratch %.2f GiB; %.1f GiB free of %.1f\n",
           P * 2.0 / (1 << 30), P * 4.0 / (1 << 30),
           zt_cuda_attention_scratch_bytes(dm.S, dm.H, dm.Hkv, dm.D) / (double)(1 << 30), free_b / (double)(1 << 30),
           total_b / (double)(1 << 30));

    cudaEvent_t e0, e1, e2;
    ZT_CUDA_CHECK(cudaEventCreate(&e0));
    ZT_CUDA_CHECK(cudaEventCreate(&e1));
    ZT_CUDA_CHECK(cudaEventCreate(&e2));
    double *tot = zt_xmalloc((size_t)iters * sizeof(double)), *fwd = zt_xmalloc((size_t)iters * sizeof(double));
    double *bwd = zt_xmalloc((size_t)iters * sizeof(double));
    for (int it = 0; it < warmup + iters; it++) {
        // dx is overwritten in place by backward: restore d(loss)/dy each iteration (outside the timed region)
        ZT_CUDA_CHECK(cudaMemcpyAsync(dx, dy, (size_t)(N * d) * 2, cudaMemcpyDeviceToDevice, st));
        ZT_CUDA_CHECK(cudaEventRecord(e0, st));
        zt_qwen3_cuda_layer_fwd(c, st, &dm, params, rc, rs, NULL, x, y, &acts, NULL);
        ZT_CUDA_CHECK(cudaEventRecord(e1, st));
        zt_qwen3_cuda_layer_bwd(c, st, &dm, params, grads, rc, rs, NULL, x, &acts, &work, dx, NULL);
        ZT_CUDA_CHECK(cudaEventRecord(e2, st));
        ZT_CUDA_CHECK(cudaEventSynchronize(e2));
        float t1, t2;
        ZT_CUDA_CHECK(cudaEventElapsedTime(&t1, e0, e1));
        ZT_CUDA_CHECK(cudaEventElapsedTime(&t2, e1, e2));
        if (it >= warmup) {
            fwd[it - warmup] = t1;
            bwd[it - warmup] = t2;
            tot[it - warmup] = t1 + t2;
        }
    }
    zt_cuda_sync(st, "bench_layer timing loop");
    // sanity: the output and the input gradient are finite
    {
        float *h = zt_xmalloc((size_t)(N * d) * sizeof(float));
        zt_dev_get_bf16(h, y, N * d);
        int bad = 0;
        for (int64_t i = 0; i < N * d; i++) bad += !(h[i] == h[i]) || h[i] > 3e38f || h[i] < -3e38f;
        zt_dev_get_bf16(h, dx, N * d);
        for (int64_t i = 0; i < N * d; i++) bad += !(h[i] == h[i]) || h[i] > 3e38f || h[i] < -3e38f;
        free(h);
        if (bad) zt_fatal("bench_layer: %d non-finite values in the layer output or input gradient", bad);
    }
    const double tmed = zt_median(tot, iters), fmed = zt_median(fwd, iters), bmed = zt_median(bwd, iters);
    const double flops = zt_qwen3_cuda_layer_flops(&dm);
    const double tflops = flops / (tmed * 1e-3) / 1e12;
    printf("layer fwd+bwd: median %.3f ms over %d (fwd %.3f ms, bwd %.3f ms); %.3f TFLOP per pass -> %.1f TFLOP/s\n",
           tmed, iters, fmed, bmed, flops / 1e12, tflops);

    // One more pass with an event after every op: where the time goes.
    zt_gprof prof;
    zt_gprof_init(&prof);
    ZT_CUDA_CHECK(cudaMemcpyAsync(dx, dy, (size_t)(N * d) * 2, cudaMemcpyDeviceToDevice, st));
    ZT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)prof.start, st));
    zt_qwen3_cuda_layer_fwd(c, st, &dm, params, rc, rs, NULL, x, y, &acts, &prof);
    zt_qwen3_cuda_layer_bwd(c, st, &dm, params, grads, rc, rs, NULL, x, &acts, &work, dx, &prof);
    zt_cuda_sync(st, "bench_layer profile pass");
    zt_gprof_report(&prof, "breakdown");
    zt_gprof_free(&prof);

    const double peak = measure_peak(c, st, peak_n, smoke ? 1 : 3, smoke ? 2 : 20);
    printf("layer: %.1f TFLOP/s = %.1f%% of the measured matmul peak\n", tflops, 100.0 * tflops / peak);
    printf("RESULT layer_ms=%.4f\nRESULT layer_fwd_ms=%.4f\nRESULT layer_bwd_ms=%.4f\nRESULT layer_tflop=%.4f\n", tmed,
           fmed, bmed, flops / 1e12);
    printf("RESULT layer_tflops=%.2f\nRESULT peak_tflops=%.2f\nRESULT pct_peak=%.1f\n", tflops, peak,
           100.0 * tflops / peak);
    printf("RESULT attn=%s\n", attn_name);

    zt_qwen3_cuda_acts_free(&acts);
    zt_qwen3_cuda_work_free(&work);
    void *gf[] = {params, grads, x, y, dy, dx, rc, rs};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
    zt_cuda_ctx_destroy(c);
    free(tot);
    free(fwd);
    free(bwd);
    return 0;
}
