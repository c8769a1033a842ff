// Linear layers: y = x W^T with W stored [out, in] as in HF (cpu_sgemm, kernels/cpu/gemm.c).
// defines: cpu_matmul_fwd, cpu_matmul_bwd
#include "kernels/cpu/cpu_internal.h"

void cpu_matmul_fwd(float *y, const float *x, const float *w, int64_t M, int64_t K, int64_t N) {
    cpu_sgemm(0, 1, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
}

void cpu_matmul_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int64_t M, int64_t K,
                    int64_t N, int accumulate_dx) {
    if (dx)  // dx[M,K] = dy[M,N] W[N,K]
        cpu_sgemm(0, 0, M, K, N, 1.0f, dy, N, w, K, accumulate_dx ? 1.0f : 0.0f, dx, K);
    if (dw)  // dW[N,K] += dy^T[N,M] x[M,K]
        cpu_sgemm(1, 0, N, K, M, 1.0f, dy, N, x, K, 1.0f, dw, K);
}
