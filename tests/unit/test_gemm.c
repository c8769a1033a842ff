// cpu_sgemm (kernels/cpu/gemm.c) against the loop that defines it, bit for bit:
//     acc = 0; for k in 0..K-1: acc = fmaf(opA[i][k], opB[k][j], acc);
//     t = alpha == 1 ? acc : alpha * acc;  C = beta == 0 ? t : beta == 1 ? t + C : t + beta * C
// for every kernel this CPU runs (portable C, AVX2, AVX-512), all four transpose cases, shapes
// off every blocking edge (1, MR +- 1, NR +- 1, past the packing blocks), leading dimensions
// wider than the matrix, alpha and beta of 1, 0 and others, 1 and 2 threads. Also: beta == 0
// never reads C (NaN there stays out), columns and rows outside C are never written, a
// sub-block of a product has the values of the whole (the property the attention panels rely
// on), and the reference loop itself is within 1e-5 of a double-precision product (so the
// spec is a matrix product and not just self-consistent).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cpu/cpu_internal.h"
#include "tests/support/test_util.h"

static zt_rng rng;

static float *rnd(int64_t n) {
    float *p = zt_xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = (float)zt_rng_normal(&rng);
    return p;
}

static float opa(const float *A, int tA, int64_t lda, int64_t i, int64_t k) { return tA ? A[k * lda + i] : A[i * lda + k]; }
static float opb(const float *B, int tB, int64_t ldb, int64_t k, int64_t j) { return tB ? B[j * ldb + k] : B[k * ldb + j]; }

// The definition (this file is built with -ffp-contract=off: nothing below fuses but fmaf).
static void ref_sgemm(int tA, int tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc = fmaf(opa(A, tA, lda, i, k), opb(B, tB, ldb, k, j), acc);
            const float t = alpha == 1.0f ? acc : alpha * acc;
            float *c = &C[i * ldc + j];
            *c = beta == 0.0f ? t : beta == 1.0f ? t + *c : t + beta * *c;
        }
}

static int g_cases;

// One case: C has `pad` spare columns and a spare row of sentinels; the result must equal the
// reference bit for bit and the sentinels must be untouched.
static void one_case(const char *isa, int tA, int tB, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                     int64_t pad) {
    const int64_t lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
    const int64_t arows = tA ? K : M, brows = tB ? N : K;
    float *A = rnd(arows * lda + 1), *B = rnd(brows * ldb + 1);
    float *C = rnd((M + 1) * ldc), *R = zt_xmalloc((size_t)((M + 1) * ldc) * sizeof(float));
    if (beta == 0.0f)  // must not be read
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = NAN;
    memcpy(R, C, (size_t)((M + 1) * ldc) * sizeof(float));
    ref_sgemm(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc);
    cpu_sgemm(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    int64_t bad = -1;
    for (int64_t i = 0; i < (M + 1) * ldc && bad < 0; i++)
        if (memcmp(&C[i], &R[i], sizeof(float)) != 0) bad = i;
    CHECK(bad < 0, "%s tA=%d tB=%d M=%lld N=%lld K=%lld alpha=%g beta=%g pad=%lld: element %lld (row %lld col %lld) "
                   "%.9g, the definition gives %.9g",
          isa, tA, tB, (long long)M, (long long)N, (long long)K, alpha, beta, (long long)pad, (long long)bad,
          (long long)(bad / ldc), (long long)(bad % ldc), bad >= 0 ? C[bad] : 0.0, bad >= 0 ? R[bad] : 0.0);
    g_cases++;
    free(A), free(B), free(C), free(R);
}

static void all_cases(const char *isa) {
    // around MR (4, 6, 12) and NR (8, 16, 32) of every kernel, and a few larger
    const int64_t dims[] = {1, 3, 5, 7, 11, 12, 13, 17, 31, 33, 47, 70};
    const float ab[][2] = {{1, 0}, {1, 1}, {0.7f, 0}, {1, 0.3f}, {-1.3f, 1}, {0.6f, -0.45f}};
    int c = 0;
    for (int tA = 0; tA < 2; tA++)
        for (int tB = 0; tB < 2; tB++)
            for (int mi = 0; mi < 12; mi++)
                for (int ni = 0; ni < 12; ni += 1 + (mi % 2)) {
                    const int64_t K = dims[(mi * 5 + ni * 7 + tA * 3 + tB) % 12];
                    const float *x = ab[(c++) % 6];
                    one_case(isa, tA, tB, dims[mi], dims[ni], K, x[0], x[1], (mi + ni) % 3);
                }
    // K = 0: C = beta C (alpha times an empty sum is 0)
    one_case(isa, 0, 1, 5, 9, 0, 1, 0.5f, 1);
    // past the packing blocks (A blocks of 48 Ki floats, B blocks of 512 Ki floats): K = 3000
    // gives A blocks of 12-16 rows and B blocks of ~170 columns
    one_case(isa, 0, 1, 40, 400, 3000, 1, 1, 3);
    one_case(isa, 1, 0, 37, 190, 2900, 0.5f, 0, 0);
    // K cut into blocks (kernels/cpu/gemm.c: past GEMM_KC_MIN = 1,536 into equal blocks of at most
    // GEMM_KC = 512): the accumulators carried between blocks keep the one chain; K just past the
    // threshold (4 blocks of 385, 384), a multiple of the block, and not; every transpose case
    one_case(isa, 0, 0, 29, 70, 1537, 1, 1, 1);
    one_case(isa, 1, 1, 13, 33, 2048, -1.3f, 1, 0);
    one_case(isa, 1, 0, 50, 65, 2305, 0.6f, -0.45f, 2);
    one_case(isa, 0, 0, 24, 64, 4100, 1, 0, 0);
    // ... with several blocks of rows and of columns (K = 1,537: blocks of 385 and 384, A blocks of
    // 120 rows, B blocks of 1,344 columns): each block of op(B) is packed once per block of K and the
    // accumulators of every row block wait for the next block of K (the blocking is the same code for
    // every kernel; the portable one is left out here: ~1 GFLOP/s)
    if (strcmp(isa, "generic") != 0) one_case(isa, 1, 0, 130, 1400, 1537, 1, 1, 1);
}

int main(void) {
    zt_rng_seed(&rng, 2026);
    const char *names[] = {"generic", "avx2", "avx512"};
    int ran = 0;
    for (int n = 0; n < 3; n++) {
        if (cpu_sgemm_set_isa(names[n]) != 0) {
            printf("skip: this CPU does not run the %s kernel\n", names[n]);
            continue;
        }
        ran++;
        omp_set_num_threads(1);
        all_cases(names[n]);
        omp_set_num_threads(2);  // shared packing and tiles: the same bits
        all_cases(names[n]);
        omp_set_num_threads(1);
        printf("%s (%s): %d cases equal to the definition\n", names[n], cpu_sgemm_isa(), g_cases);
    }
    CHECK(ran >= 1, "no kernel ran");

    // A sub-block of a product has the values of the whole (rows 5..40, columns 3..70 of a
    // 64 x 96 x 200 product, as attention's panels take a product's rows).
    cpu_sgemm_set_isa(names[ran == 3 ? 2 : 0]);
    {
        const int64_t M = 64, N = 96, K = 200;
        float *A = rnd(M * K), *B = rnd(N * K), *C = zt_xmalloc((size_t)(M * N) * sizeof(float));
        float *S = zt_xmalloc((size_t)(M * N) * sizeof(float));
        cpu_sgemm(0, 1, M, N, K, 1, A, K, B, K, 0, C, N);
        cpu_sgemm(0, 1, 35, 67, K, 1, A + 5 * K, K, B + 3 * K, K, 0, S, N);
        int same = 1;
        for (int64_t i = 0; i < 35; i++)
            for (int64_t j = 0; j < 67; j++) same &= memcmp(&S[i * N + j], &C[(i + 5) * N + j + 3], 4) == 0;
        CHECK(same, "a sub-block of the product differs from the same elements of the whole product");
        // the definition is a matrix product: within 1e-5 of double precision (relative to max |C|)
        double maxd = 0, maxc = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double d = 0;
                for (int64_t k = 0; k < K; k++) d += (double)A[i * K + k] * B[j * K + k];
                maxd = fmax(maxd, fabs(d - C[i * N + j]));
                maxc = fmax(maxc, fabs(d));
            }
        CHECK(maxd / maxc <= 1e-5, "fp32 product %.3g from double precision relative to max |C| (tolerance 1e-5)",
              maxd / maxc);
        printf("sub-block equal to the whole; %.2g from double precision (relative)\n", maxd / maxc);
        free(A), free(B), free(C), free(S);
    }
    TEST_END();
}
