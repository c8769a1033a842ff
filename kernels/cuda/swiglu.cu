// SwiGLU, h = silu(g) * u, and its backward: bf16 in and out, fp32 arithmetic, the
// formulas of kernels/cpu/swiglu.c.
// defines: zt_cuda_swiglu_fwd, zt_cuda_swiglu_bwd
#include "kernels/cuda/cuda_internal.h"

// expf, not __expf: the accurate exponential, as on the CPU.
__device__ __forceinline__ float sigmoidf_(float z) { return 1.0f / (1.0f + expf(-z)); }

__global__ void swiglu_fwd_kernel(bf16 *__restrict__ h, const bf16 *__restrict__ g, const bf16 *__restrict__ u,
                                  int64_t n, int vec) {
    const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (vec) {
        const int64_t i = t * 8;
        if (i >= n) return;
        float a[8], b[8];
        load8(a, g + i);
        load8(b, u + i);
#pragma unroll
        for (int e = 0; e < 8; e++) a[e] = a[e] * sigmoidf_(a[e]) * b[e];
        store8(h + i, a);
    } else {
        if (t >= n) return;
        const float z = bf2f(g[t]);
        h[t] = f2bf(z * sigmoidf_(z) * bf2f(u[t]));
    }
}

__global__ void swiglu_bwd_kernel(bf16 *__restrict__ dg, bf16 *__restrict__ du, const bf16 *__restrict__ dh,
                                  const bf16 *__restrict__ g, const bf16 *__restrict__ u, int64_t n, int vec) {
    const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (vec) {
        const int64_t i = t * 8;
        if (i >= n) return;
        float z[8], b[8], d[8], og[8], ou[8];
        load8(z, g + i);
        load8(b, u + i);
        load8(d, dh + i);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float s = sigmoidf_(z[e]);
            og[e] = d[e] * b[e] * s * (1.0f + z[e] * (1.0f - s));
            ou[e] = d[e] * (z[e] * s);
        }
        store8(dg + i, og);
        store8(du + i, ou);
    } else {
        if (t >= n) return;
        const float z = bf2f(g[t]), b = bf2f(u[t]), d = bf2f(dh[t]);
        const float s = sigmoidf_(z);
        dg[t] = f2bf(d * b * s * (1.0f + z * (1.0f - s)));
        du[t] = f2bf(d * (z * s));
    }
}

extern "C" void zt_cuda_swiglu_fwd(void *stream, zt_bf16 *h, const zt_bf16 *g, const zt_bf16 *u, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    const int vec = n % 8 == 0 && zt_aligned16(h) && zt_aligned16(g) && zt_aligned16(u);
    const int64_t threads = vec ? n / 8 : n;
    ZT_LAUNCH(swiglu_fwd_kernel, zt_blocks(threads, 256), 256, 0, st)((bf16 *)h, (const bf16 *)g, (const bf16 *)u, n, vec);
    ZT_LAUNCHED("swiglu_fwd_kernel", st);
}

extern "C" void zt_cuda_swiglu_bwd(void *stream, zt_bf16 *dg, zt_bf16 *du, const zt_bf16 *dh, const zt_bf16 *g,
                                   const zt_bf16 *u, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    const int vec = n % 8 == 0 && zt_aligned16(dg) && zt_aligned16(du) && zt_aligned16(dh) && zt_aligned16(g) &&
                    zt_aligned16(u);
    const int64_t threads = vec ? n / 8 : n;
    ZT_LAUNCH(swiglu_bwd_kernel, zt_blocks(threads, 256), 256, 0, st)((bf16 *)dg, (bf16 *)du, (const bf16 *)dh,
                                                               (const bf16 *)g, (const bf16 *)u, n, vec);
    ZT_LAUNCHED("swiglu_bwd_kernel", st);
}
