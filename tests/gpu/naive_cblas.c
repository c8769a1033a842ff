// cblas_sgemm without OpenBLAS, for the ZT_GPU_ONLY build (a GPU machine that
// cannot install OpenBLAS). kernels/cpu/{matmul,xent}.c call cblas_sgemm; this
// file provides that one symbol so the CPU reference ops link unchanged. It is a
// plain fp32 row-at-a-time product parallelised over rows of C with OpenMP: slow
// next to OpenBLAS but exact enough to be the reference (fp32 accumulation).
// defines: cblas_sgemm
#include <stdlib.h>
#include <string.h>

#include "cblas.h"

// Row-major C[M,N] = alpha op(A) op(B) + beta C (beta == 0: C is not read).
static void sgemm_rowmajor(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                           int ldb, float beta, float *C, int ldc) {
#pragma omp parallel
    {
        float *arow = malloc((size_t)(K > 0 ? K : 1) * sizeof(float));
        float *acc = malloc((size_t)(N > 0 ? N : 1) * sizeof(float));
#pragma omp for schedule(static)
        for (int i = 0; i < M; i++) {
            for (int k = 0; k < K; k++) arow[k] = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
            if (!tb) {  // acc += a_ik * B[k, :]  (contiguous, vectorises)
                memset(acc, 0, (size_t)N * sizeof(float));
                for (int k = 0; k < K; k++) {
                    const float a = arow[k];
                    const float *b = B + (size_t)k * ldb;
                    for (int j = 0; j < N; j++) acc[j] += a * b[j];
                }
            } else {  // acc[j] = dot(a_i, B[j, :])
                for (int j = 0; j < N; j++) {
                    const float *b = B + (size_t)j * ldb;
                    float s = 0.0f;
                    for (int k = 0; k < K; k++) s += arow[k] * b[k];
                    acc[j] = s;
                }
            }
            float *c = C + (size_t)i * ldc;
            if (beta == 0.0f)
                for (int j = 0; j < N; j++) c[j] = alpha * acc[j];
            else
                for (int j = 0; j < N; j++) c[j] = alpha * acc[j] + beta * c[j];
        }
        free(arow);
        free(acc);
    }
}

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA, enum CBLAS_TRANSPOSE transB, int M, int N, int K,
                 float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    const int ta = transA != CblasNoTrans, tb = transB != CblasNoTrans;
    if (order == CblasRowMajor)
        sgemm_rowmajor(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else  // column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T
        sgemm_rowmajor(tb, ta, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
}

// OpenBLAS threading controls (kernels/cpu/attention.c pins OpenBLAS to one thread
// inside its OpenMP loops); the naive sgemm above is single-threaded per call.
static int g_naive_threads = 1;
void openblas_set_num_threads(int n) { g_naive_threads = n > 0 ? n : 1; }
int openblas_get_num_threads(void) { return g_naive_threads; }
