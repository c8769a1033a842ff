// Host helpers for the GPU test programs (see gpu_test_util.h).
#include "tests/gpu/gpu_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "tests/support/test_util.h"  // zt_max_rel_err

float *zt_host_normal(int64_t n, float std, uint64_t seed, int round_bf16) {
    float *x = zt_xmalloc((size_t)n * sizeof(float));
    zt_rng r;
    zt_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(std * zt_rng_normal(&r));
        x[i] = round_bf16 ? zt_bf16_round(v) : v;
    }
    return x;
}

float *zt_host_uniform(int64_t n, float lo, float hi, uint64_t seed, int round_bf16) {
    float *x = zt_xmalloc((size_t)n * sizeof(float));
    zt_rng r;
    zt_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(lo + (hi - lo) * zt_rng_uniform(&r));
        x[i] = round_bf16 ? zt_bf16_round(v) : v;
    }
    return x;
}

zt_bf16 *zt_dev_bf16(const float *x, int64_t n) {
    uint16_t *h = zt_xmalloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) h[i] = zt_f32_to_bf16(x[i]);
    zt_bf16 *d = zt_cuda_malloc((size_t)n * 2);
    zt_cuda_memcpy_h2d(d, h, (size_t)n * 2);
    free(h);
    return d;
}

float *zt_dev_f32(const float *x, int64_t n) {
    float *d = zt_cuda_malloc((size_t)n * sizeof(float));
    zt_cuda_memcpy_h2d(d, x, (size_t)n * sizeof(float));
    return d;
}

void zt_dev_get_bf16(float *dst, const zt_bf16 *src, int64_t n) {
    uint16_t *h = zt_xmalloc((size_t)n * 2);
    zt_cuda_memcpy_d2h(h, src, (size_t)n * 2);
    for (int64_t i = 0; i < n; i++) dst[i] = zt_bf16_to_f32(h[i]);
    free(h);
}

void zt_dev_get_f32(float *dst, const float *src, int64_t n) { zt_cuda_memcpy_d2h(dst, src, (size_t)n * sizeof(float)); }

// The shared helper (tests/support/test_util.h) under the GPU tests' convention.
double zt_relerr(const float *got, const float *ref, int64_t n) { return zt_max_rel_err(got, ref, n, 0, ZT_REL_FINITE); }

void zt_skip_without_device(void) {
    if (zt_cuda_device_count() > 0) return;
    printf("SKIPPED: no CUDA device\n");
    fflush(stdout);
    exit(ZT_EXIT_SKIP);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
double zt_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
