// zerotrain's CPU sgemm (kernels/cpu/gemm.c) against OpenBLAS's cblas_sgemm, side by side in
// one process, on the products a training step runs (the head-to-head's default and larger
// configs, forward, dx and dW shapes, and attention's panels). One thread by default.
//   build/zt_gemm_bench [--reps N] [--threads T] [--kernels avx512,avx2,generic]
// Each row: the shape, each kernel's GFLOP/s (best of 3 timings of N repetitions) and the
// ratio to OpenBLAS's, and the largest difference between the two results relative to max |C|
// (they round differently; the value is printed, not asserted). OpenBLAS runs the kernels it
// picks from the CPU or OPENBLAS_CORETYPE, which the output names.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_internal.h"

char *openblas_get_corename(void);
void openblas_set_num_threads(int);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    const char *what;
    int tA, tB, M, N, K;
} shape;

// y = x W^T is (0,1, tokens, out, in); dx = dy W is (0,0, tokens, in, out); dW += dy^T x is (1,0, out, in, tokens)
static const shape shapes[] = {
    {"default q fwd", 0, 1, 256, 384, 256},     {"default k/v fwd", 0, 1, 256, 192, 256},
    {"default o fwd", 0, 1, 256, 256, 384},     {"default gate/up fwd", 0, 1, 256, 768, 256},
    {"default down fwd", 0, 1, 256, 256, 768},  {"default gate dx", 0, 0, 256, 256, 768},
    {"default gate dW", 1, 0, 768, 256, 256},   {"default lm_head", 0, 1, 256, 257, 256},
    {"attn scores 128x128x96", 0, 1, 128, 128, 96}, {"attn P.V 128x96x128", 0, 0, 128, 96, 128},
    {"attn dK 128x96x128", 1, 0, 128, 96, 128}, {"larger gate fwd", 0, 1, 1024, 2816, 1024},
    {"larger down dx", 0, 0, 1024, 2816, 1024}, {"larger down dW", 1, 0, 1024, 2816, 1024},
};

static double time_it(int reps, void (*f)(const shape *, const float *, const float *, float *, int),
                      const shape *s, const float *A, const float *B, float *C, int which) {
    double best = 1e30;
    f(s, A, B, C, which);  // warm (packing buffers, caches)
    for (int t = 0; t < 3; t++) {
        const double t0 = now();
        for (int r = 0; r < reps; r++) f(s, A, B, C, which);
        const double dt = (now() - t0) / reps;
        best = dt < best ? dt : best;
    }
    return best;
}

static void run_zt(const shape *s, const float *A, const float *B, float *C, int which) {
    (void)which;
    cpu_sgemm(s->tA, s->tB, s->M, s->N, s->K, 1.0f, A, s->tA ? s->M : s->K, B, s->tB ? s->K : s->N, 0.0f, C, s->N);
}

static void run_blas(const shape *s, const float *A, const float *B, float *C, int which) {
    (void)which;
    cblas_sgemm(CblasRowMajor, s->tA ? CblasTrans : CblasNoTrans, s->tB ? CblasTrans : CblasNoTrans, s->M, s->N, s->K,
                1.0f, A, s->tA ? s->M : s->K, B, s->tB ? s->K : s->N, 0.0f, C, s->N);
}

int main(int argc, char **argv) {
    int reps = 20, threads = 1;
    const char *kernels = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc)
            kernels = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--reps N] [--threads T] [--kernels avx512,avx2,generic]\n", argv[0]);
            return 2;
        }
    }
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    const char *all[] = {"avx512", "avx2", "generic"};
    const char *use[3];
    int nk = 0;
    for (int k = 0; k < 3; k++) {
        if (kernels && !strstr(kernels, all[k])) continue;
        if (!kernels && k == 2) continue;  // the portable kernel is a fallback, ~100x slower on x86
        if (cpu_sgemm_set_isa(all[k]) == 0) use[nk++] = all[k];
    }
    printf("OpenBLAS kernels: %s; %d thread(s); best of 3 x %d repetitions\n\n", openblas_get_corename(), threads, reps);
    printf("| product | op | M x N x K | OpenBLAS GFLOP/s |");
    for (int k = 0; k < nk; k++) printf(" %s GFLOP/s | ratio |", use[k]);
    printf(" max diff |\n|---|---|---|---:|");
    for (int k = 0; k < nk; k++) printf("---:|---:|");
    printf("---:|\n");
    double logsum[3] = {0};
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    srand(1);
    for (int i = 0; i < ns; i++) {
        const shape *s = &shapes[i];
        float *A = malloc(sizeof(float) * (size_t)s->M * s->K), *B = malloc(sizeof(float) * (size_t)s->K * s->N);
        float *C = malloc(sizeof(float) * (size_t)s->M * s->N), *D = malloc(sizeof(float) * (size_t)s->M * s->N);
        for (long j = 0; j < (long)s->M * s->K; j++) A[j] = (float)rand() / RAND_MAX - 0.5f;
        for (long j = 0; j < (long)s->K * s->N; j++) B[j] = (float)rand() / RAND_MAX - 0.5f;
        const double flop = 2.0 * s->M * s->N * s->K;
        const double tb = time_it(reps, run_blas, s, A, B, D, 0);
        printf("| %s | %c%c | %d x %d x %d | %.1f |", s->what, s->tA ? 'T' : 'N', s->tB ? 'T' : 'N', s->M, s->N, s->K,
               flop / tb / 1e9);
        for (int k = 0; k < nk; k++) {
            cpu_sgemm_set_isa(use[k]);
            const double tz = time_it(reps, run_zt, s, A, B, C, 0);
            printf(" %.1f | %.2fx |", flop / tz / 1e9, tb / tz);
            logsum[k] += log(tb / tz);
        }
        double md = 0, mc = 0;
        for (long j = 0; j < (long)s->M * s->N; j++) {
            md = fmax(md, fabs((double)C[j] - D[j]));
            mc = fmax(mc, fabs((double)D[j]));
        }
        printf(" %.1e |\n", md / (mc > 0 ? mc : 1));
        free(A), free(B), free(C), free(D);
    }
    printf("\ngeometric mean of the ratios:");
    for (int k = 0; k < nk; k++) printf(" %s %.2fx", use[k], exp(logsum[k] / ns));
    printf("\n");
    return 0;
}
