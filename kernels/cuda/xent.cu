// lm_head fused with cross-entropy, a chunk of rows at a time: logits for the
// chunk go to fp32 scratch (never N x V at once), one block per row computes the
// logsumexp and writes the scaled dlogits (bf16), and two products turn those into
// dx and dW. Chunk = 2^26 logits by default (256 MiB fp32 + 128 MiB bf16).
// defines: zt_cuda_lmhead_xent
#include <math.h>

#include "kernels/cuda/cuda_internal.h"

#define XENT_THREADS 1024
#define XENT_DEFAULT_LOGITS (1ll << 26)

// Online (max, sum of exp) pair; an empty pair is (-inf, 0).
__device__ __forceinline__ void lse_combine(float &m, float &s, float m2, float s2) {
    if (m2 == -INFINITY) return;
    if (m == -INFINITY) {
        m = m2;
        s = s2;
        return;
    }
    const float M = fmaxf(m, m2);
    s = s * expf(m - M) + s2 * expf(m2 - M);
    m = M;
}

__global__ void xent_row_kernel(bf16 *__restrict__ dlog, double *__restrict__ rowloss,
                                const float *__restrict__ logits, const int32_t *__restrict__ targets, int64_t V,
                                float scale, int want_grad) {
    __shared__ float sm[32], ss[32];
    __shared__ float s_lse;
    const int64_t r = blockIdx.x;
    const float *l = logits + r * V;
    bf16 *dl = dlog + r * V;
    const int32_t tgt = targets[r];
    if (tgt < 0) {  // no target: contributes neither loss nor gradient
        if (threadIdx.x == 0) rowloss[r] = 0.0;
        if (want_grad)
            for (int64_t j = threadIdx.x; j < V; j += blockDim.x) dl[j] = f2bf(0.0f);
        return;
    }
    if (tgt >= V) {
        if (threadIdx.x == 0) printf("zt_cuda_lmhead_xent: target %d of row %lld >= vocab %lld\n", tgt, (long long)r, (long long)V);
        __trap();
    }
    float m = -INFINITY, s = 0.0f;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
        const float x = l[j];
        if (x > m) {
            s = (m == -INFINITY ? 0.0f : s * expf(m - x)) + 1.0f;
            m = x;
        } else {
            s += expf(x - m);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        lse_combine(m, s, m2, s2);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        const int nw = blockDim.x / 32;
        m = lane < nw ? sm[lane] : -INFINITY;
        s = lane < nw ? ss[lane] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            lse_combine(m, s, m2, s2);
        }
        if (lane == 0) {
            const float lse = m + logf(s);
            s_lse = lse;
            rowloss[r] = (double)lse - (double)l[tgt];
        }
    }
    __syncthreads();
    if (!want_grad) return;
    const float lse = s_lse;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
        float g = expf(l[j] - lse) * scale;
        if (j == tgt) g -= scale;
        dl[j] = f2bf(g);
    }
}

// Fixed-order sum of the per-row losses in double.
__global__ void xent_loss_sum_kernel(double *__restrict__ out, const double *__restrict__ rowloss, int64_t N) {
    __shared__ double sh[XENT_THREADS];
    double s = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += rowloss[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = sh[0];
}

static size_t r256(size_t x) { return (x + 255) & ~(size_t)255; }

// The scratch one call takes: a chunk's fp32 logits, its bf16 logit gradients (want_grad) and a double per row.
static size_t xent_scratch(int64_t chunk_rows, int64_t N, int64_t V, int want_grad) {
    int64_t chunk = chunk_rows ? chunk_rows : XENT_DEFAULT_LOGITS / V;
    if (chunk < 1) chunk = 1;
    if (chunk > N) chunk = N;
    return r256((size_t)(chunk * V) * sizeof(float)) + (want_grad ? r256((size_t)(chunk * V) * sizeof(bf16)) : 0) +
           (size_t)N * sizeof(double);
}

extern "C" size_t zt_cuda_lmhead_xent_scratch_bytes(int64_t N, int64_t V) { return xent_scratch(0, N, V, 1); }

extern "C" void zt_cuda_lmhead_xent(zt_cuda_ctx *c, void *stream, double *loss_sum, zt_bf16 *dx, void *dw,
                                    zt_cuda_dtype dwtype, const zt_bf16 *x, const zt_bf16 *w, const int32_t *targets,
                                    int64_t N, int64_t d, int64_t V, float scale) {
    ZT_REQUIRE(N > 0 && d > 0 && V > 0, "lmhead_xent N=%lld d=%lld V=%lld", (long long)N, (long long)d,
               (long long)V);
    cudaStream_t st = zt_st(stream);
    int64_t chunk = c->xent_chunk_rows ? c->xent_chunk_rows : XENT_DEFAULT_LOGITS / V;
    if (chunk < 1) chunk = 1;
    if (chunk > N) chunk = N;
    const int want_grad = dx != NULL || dw != NULL;
    const size_t lbytes = r256((size_t)(chunk * V) * sizeof(float));
    const size_t gbytes = want_grad ? r256((size_t)(chunk * V) * sizeof(bf16)) : 0;
    char *base = (char *)zt_ctx_scratch(c, xent_scratch(c->xent_chunk_rows, N, V, want_grad), st);
    float *logits = (float *)base;
    bf16 *dlog = (bf16 *)(base + lbytes);
    double *rowloss = (double *)(base + lbytes + gbytes);
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
        const int64_t T = N - r0 < chunk ? N - r0 : chunk;
        const zt_bf16 *xc = x + r0 * d;
        // logits[T,V] = x_c W^T (fp32 out)
        zt_cuda_gemm(c, stream, logits, ZT_F32, V, 0, xc, 0, d, 0, w, 1, d, 0, T, V, d, 1, 1.0f, 0.0f);
        ZT_LAUNCH(xent_row_kernel, (unsigned)T, XENT_THREADS, 0, st)(dlog, rowloss + r0, logits, targets + r0, V, scale,
                                                              want_grad);
        ZT_LAUNCHED("xent_row_kernel", st);
        if (dx)  // dx_c[T,d] = dlogits[T,V] W[V,d]
            zt_cuda_gemm(c, stream, dx + r0 * d, ZT_BF16, d, 0, (const zt_bf16 *)dlog, 0, V, 0, w, 0, d, 0, T, d, V,
                         1, 1.0f, 0.0f);
        if (dw)  // dW[V,d] += dlogits^T[V,T] x_c[T,d]
            zt_cuda_gemm(c, stream, dw, dwtype, d, 0, (const zt_bf16 *)dlog, 1, V, 0, xc, 0, d, 0, V, d, T, 1, 1.0f,
                         1.0f);
    }
    if (loss_sum) {
        ZT_LAUNCH(xent_loss_sum_kernel, 1, XENT_THREADS, 0, st)(loss_sum, rowloss, N);
        ZT_LAUNCHED("xent_loss_sum_kernel", st);
    }
}
