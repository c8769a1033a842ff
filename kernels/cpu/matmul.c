// Linear layers through OpenBLAS: y = x W^T with W stored [out, in] as in HF.
// defines: cpu_matmul_fwd, cpu_matmul_bwd
#include <cblas.h>

#include "kernels/cpu/cpu_internal.h"

void cpu_matmul_fwd(float *y, const float *x, const float *w, int64_t M, int64_t K, int64_t N) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)K, w, (int)K, 0.0f, y,
                (int)N);
}

void cpu_matmul_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int64_t M, int64_t K,
                    int64_t N, int accumulate_dx) {
    if (dx)  // dx[M,K] = dy[M,N] W[N,K]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)K, (int)N, 1.0f, dy, (int)N, w, (int)K,
                    accumulate_dx ? 1.0f : 0.0f, dx, (int)K);
    if (dw)  // dW[N,K] += dy^T[N,M] x[M,K]
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)N, (int)K, (int)M, 1.0f, dy, (int)N, x, (int)K,
                    1.0f, dw, (int)K);
}
