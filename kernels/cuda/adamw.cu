// AdamW on fp32 master shards (also writing the bf16 parameter copy) and the
// deterministic sum of squares for the global gradient norm.
// defines: zt_cuda_adamw, zt_cuda_sumsq
#include <math.h>

#include "kernels/cuda/cuda_internal.h"

// Same order of operations as kernels/cpu/adamw.c (torch.optim.AdamW).
__global__ void adamw_kernel(float *__restrict__ p, bf16 *__restrict__ pb, const float *__restrict__ g,
                             float *__restrict__ m, float *__restrict__ v, int64_t n, float beta1, float beta2,
                             float eps, float step_size, float bc2_sqrt, float decay) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float gi = g[i];
        const float pi = p[i] * decay;
        const float mi = m[i] + (1.0f - beta1) * (gi - m[i]);
        const float vi = v[i] * beta2 + (1.0f - beta2) * gi * gi;
        const float denom = sqrtf(vi) / bc2_sqrt + eps;
        const float np = pi - step_size * (mi / denom);
        p[i] = np;
        m[i] = mi;
        v[i] = vi;
        if (pb) pb[i] = f2bf(np);
    }
}

extern "C" void zt_cuda_adamw(void *stream, float *p, zt_bf16 *p_bf16, const float *g, float *m, float *v, int64_t n,
                              float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t) {
    ZT_REQUIRE(t >= 1, "adamw step t=%lld must be >= 1", (long long)t);
    if (n <= 0) return;
    // torch computes these scalars in double (Python floats) before the fp32 tensor ops.
    const double bc1 = 1.0 - pow((double)beta1, (double)t);
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)t));
    const float step_size = (float)((double)lr / bc1);
    const float decay = (float)(1.0 - (double)lr * (double)weight_decay);
    cudaStream_t st = zt_st(stream);
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    ZT_LAUNCH(adamw_kernel, (unsigned)blocks, 256, 0, st)(p, (bf16 *)p_bf16, g, m, v, n, beta1, beta2, eps, step_size,
                                                   bc2_sqrt, decay);
    ZT_LAUNCHED("adamw_kernel", st);
}

// Pass 1: a grid that depends only on n; each thread accumulates a fixed strided
// subset in double, each block reduces in a fixed tree into partial[block].
// Pass 2: one block adds the partials in a fixed order.
#define SUMSQ_THREADS 256
#define SUMSQ_MAX_BLOCKS 1024

__device__ double block_sum_double(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    return sh[0];
}

__global__ void sumsq_partial_kernel(double *__restrict__ partial, const float *__restrict__ x, int64_t n) {
    __shared__ double sh[SUMSQ_THREADS];
    double s = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double xi = x[i];
        s += xi * xi;
    }
    s = block_sum_double(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sumsq_final_kernel(double *__restrict__ out, const double *__restrict__ partial, int nblocks) {
    __shared__ double sh[SUMSQ_MAX_BLOCKS];
    double s = 0;
    for (int i = threadIdx.x; i < nblocks; i += blockDim.x) s += partial[i];
    s = block_sum_double(s, sh);
    if (threadIdx.x == 0) *out = s;
}

extern "C" size_t zt_cuda_sumsq_scratch_bytes(int64_t n) {
    int64_t blocks = (n + SUMSQ_THREADS * 8 - 1) / (SUMSQ_THREADS * 8);
    if (blocks > SUMSQ_MAX_BLOCKS) blocks = SUMSQ_MAX_BLOCKS;
    if (blocks < 1) blocks = 1;
    return (size_t)blocks * sizeof(double);
}

extern "C" void zt_cuda_sumsq(zt_cuda_ctx *c, void *stream, double *out, const float *x, int64_t n) {
    cudaStream_t st = zt_st(stream);
    int64_t blocks = (n + SUMSQ_THREADS * 8 - 1) / (SUMSQ_THREADS * 8);
    if (blocks > SUMSQ_MAX_BLOCKS) blocks = SUMSQ_MAX_BLOCKS;
    if (blocks < 1) blocks = 1;
    double *partial = (double *)zt_ctx_scratch(c, zt_cuda_sumsq_scratch_bytes(n), st);
    ZT_LAUNCH(sumsq_partial_kernel, (unsigned)blocks, SUMSQ_THREADS, 0, st)(partial, x, n);
    ZT_LAUNCHED("sumsq_partial_kernel", st);
    ZT_LAUNCH(sumsq_final_kernel, 1, SUMSQ_MAX_BLOCKS, 0, st)(out, partial, (int)blocks);
    ZT_LAUNCHED("sumsq_final_kernel", st);
}
