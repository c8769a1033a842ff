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

float *zt_host_buf(int64_t n) { return zt_xcalloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

float *zt_host_copy(const float *x, int64_t n) {
    float *y = zt_host_buf(n);
    memcpy(y, x, (size_t)n * sizeof(float));
    return y;
}

void zt_round_bf16(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = zt_bf16_round(x[i]);
}

zt_bf16 *zt_dev_bf16_nan(int64_t n) {
    zt_bf16 *p = zt_cuda_malloc((size_t)n * 2);
    zt_cuda_fill_nan(p, ZT_BF16, n, NULL);
    return p;
}

float *zt_dev_f32_nan(int64_t n) {
    float *p = zt_cuda_malloc((size_t)n * 4);
    zt_cuda_fill_nan(p, ZT_F32, n, NULL);
    return p;
}

int32_t *zt_dev_i32(const int32_t *x, int64_t n) {
    int32_t *d = zt_cuda_malloc((size_t)n * 4);
    zt_cuda_memcpy_h2d(d, x, (size_t)n * 4);
    return d;
}

double zt_dev_err_bf16(const zt_bf16 *dev, const float *ref, int64_t n) {
    float *h = zt_host_buf(n);
    zt_dev_get_bf16(h, dev, n);
    const double e = zt_relerr(h, ref, n);
    free(h);
    return e;
}

double zt_dev_err_f32(const float *dev, const float *ref, int64_t n) {
    float *h = zt_host_buf(n);
    zt_dev_get_f32(h, dev, n);
    const double e = zt_relerr(h, ref, n);
    free(h);
    return e;
}

double zt_dev_bytes_differ(const void *a, const void *b, size_t n) {
    unsigned char *x = zt_xmalloc(n ? n : 1), *y = zt_xmalloc(n ? n : 1);
    zt_cuda_memcpy_d2h(x, a, n);
    zt_cuda_memcpy_d2h(y, b, n);
    const double r = memcmp(x, y, n) ? 1.0 : 0.0;
    free(x), free(y);
    return r;
}

static int g_op_checks, g_op_failures;

void zt_op_report(const char *op, const char *shape, double err, double tol) {
    const int ok = err <= tol;  // NaN and inf never pass
    g_op_checks++;
    g_op_failures += !ok;
    printf("RESULT op=%s shape=%s err=%.3e tol=%.1e ok=%d\n", op, shape, err, tol, ok);
    fflush(stdout);
}

int zt_op_checks(void) { return g_op_checks; }
int zt_op_failures(void) { return g_op_failures; }
