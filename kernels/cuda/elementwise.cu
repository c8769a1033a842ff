// Row and element kernels: RMSNorm (also per head over head_dim), RoPE with a
// device-computed fp32 table, SwiGLU, residual add, scale. bf16 in and out, fp32
// arithmetic; same formulas as kernels/cpu/{rmsnorm,rope,swiglu,adamw}.c.
// defines: zt_cuda_rmsnorm_fwd/bwd, zt_cuda_rope_table/fwd/bwd, zt_cuda_swiglu_fwd/bwd, zt_cuda_add, zt_cuda_scale
#include "kernels/cuda/cuda_internal.h"

#define ROWS_PER_BLOCK 8  // one warp per row

// ---- RMSNorm ----------------------------------------------------------------------------------
// One warp per row. The second pass re-reads x (from L1/L2) rather than holding a
// 5120-wide row in registers.
template <bool VEC>
__global__ void rmsnorm_fwd_kernel(bf16 *__restrict__ y, float *__restrict__ rstd, const bf16 *__restrict__ x,
                                   const bf16 *__restrict__ w, int64_t rows, int d, float eps) {
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const bf16 *xr = x + row * d;
    bf16 *yr = y + row * d;
    float ss = 0.0f;
    if (VEC) {
        for (int j = lane * 8; j < d; j += 256) {
            float f[8];
            load8(f, xr + j);
#pragma unroll
            for (int e = 0; e < 8; e++) ss += f[e] * f[e];
        }
    } else {
        for (int j = lane; j < d; j += 32) {
            float f = bf2f(xr[j]);
            ss += f * f;
        }
    }
    ss = warp_sum(ss);
    const float rs = 1.0f / sqrtf(ss / (float)d + eps);  // IEEE sqrt and divide, as on the CPU
    if (lane == 0) rstd[row] = rs;
    if (VEC) {
        for (int j = lane * 8; j < d; j += 256) {
            float f[8], g[8];
            load8(f, xr + j);
            load8(g, w + j);
#pragma unroll
            for (int e = 0; e < 8; e++) f[e] = g[e] * (f[e] * rs);
            store8(yr + j, f);
        }
    } else {
        for (int j = lane; j < d; j += 32) yr[j] = f2bf(bf2f(w[j]) * (bf2f(xr[j]) * rs));
    }
}

// dx = rstd * (dy*w - xhat * mean(dy*w*xhat)), xhat = x * rstd.
template <bool VEC>
__global__ void rmsnorm_bwd_dx_kernel(bf16 *__restrict__ dx, const bf16 *__restrict__ dy, const bf16 *__restrict__ x,
                                      const bf16 *__restrict__ w, const float *__restrict__ rstd, int64_t rows, int d) {
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const bf16 *xr = x + row * d, *gr = dy + row * d;
    bf16 *dr = dx + row * d;
    const float rs = rstd[row];
    float dot = 0.0f;
    if (VEC) {
        for (int j = lane * 8; j < d; j += 256) {
            float a[8], g[8], ww[8];
            load8(a, xr + j);
            load8(g, gr + j);
            load8(ww, w + j);
#pragma unroll
            for (int e = 0; e < 8; e++) dot += g[e] * ww[e] * (a[e] * rs);
        }
    } else {
        for (int j = lane; j < d; j += 32) dot += bf2f(gr[j]) * bf2f(w[j]) * (bf2f(xr[j]) * rs);
    }
    const float mean = warp_sum(dot) / (float)d;
    if (VEC) {
        for (int j = lane * 8; j < d; j += 256) {
            float a[8], g[8], ww[8];
            load8(a, xr + j);
            load8(g, gr + j);
            load8(ww, w + j);
#pragma unroll
            for (int e = 0; e < 8; e++) a[e] = rs * (g[e] * ww[e] - a[e] * rs * mean);
            store8(dr + j, a);
        }
    } else {
        for (int j = lane; j < d; j += 32)
            dr[j] = f2bf(rs * (bf2f(gr[j]) * bf2f(w[j]) - bf2f(xr[j]) * rs * mean));
    }
}

// dw partials: block (column tile, row chunk) sums its rows in order into
// partial[chunk][col]; a second kernel adds the chunks in order. No atomics, so
// the result depends only on (rows, d) and the data.
__global__ void rmsnorm_bwd_dw_partial_kernel(float *__restrict__ partial, const bf16 *__restrict__ dy,
                                              const bf16 *__restrict__ x, const float *__restrict__ rstd,
                                              int64_t rows, int d, int64_t rows_per_chunk) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    if (col >= d) return;
    const int64_t r0 = chunk * rows_per_chunk;
    const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
    float s = 0.0f;
    for (int64_t r = r0; r < r1; r++) s += bf2f(dy[r * d + col]) * (bf2f(x[r * d + col]) * rstd[r]);
    partial[chunk * d + col] = s;
}

__global__ void rmsnorm_bwd_dw_final_kernel(float *__restrict__ dw, const float *__restrict__ partial, int d,
                                            int64_t nchunks) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= d) return;
    float s = 0.0f;
    for (int64_t c = 0; c < nchunks; c++) s += partial[c * d + col];
    dw[col] += s;
}

extern "C" void zt_cuda_rmsnorm_fwd(void *stream, zt_bf16 *y, float *rstd, const zt_bf16 *x, const zt_bf16 *w,
                                    int64_t rows, int64_t d, float eps) {
    ZT_REQUIRE(rows > 0 && d > 0 && d < (1 << 30), "rmsnorm rows=%lld d=%lld", (long long)rows, (long long)d);
    cudaStream_t st = zt_st(stream);
    const unsigned grid = zt_blocks(rows, ROWS_PER_BLOCK);
    const bool vec = d % 8 == 0 && zt_aligned16(x) && zt_aligned16(y) && zt_aligned16(w);
    if (vec)
        ZT_LAUNCH(rmsnorm_fwd_kernel<true>, grid, 32 * ROWS_PER_BLOCK, 0, st)((bf16 *)y, rstd, (const bf16 *)x,
                                                                       (const bf16 *)w, rows, (int)d, eps);
    else
        ZT_LAUNCH(rmsnorm_fwd_kernel<false>, grid, 32 * ROWS_PER_BLOCK, 0, st)((bf16 *)y, rstd, (const bf16 *)x,
                                                                        (const bf16 *)w, rows, (int)d, eps);
    ZT_LAUNCHED("rmsnorm_fwd_kernel", st);
}

extern "C" void zt_cuda_rmsnorm_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, float *dw, const zt_bf16 *dy,
                                    const zt_bf16 *x, const zt_bf16 *w, const float *rstd, int64_t rows, int64_t d) {
    ZT_REQUIRE(rows > 0 && d > 0 && d < (1 << 30), "rmsnorm rows=%lld d=%lld", (long long)rows, (long long)d);
    ZT_REQUIRE(dx != dy || dx == NULL, "rmsnorm_bwd cannot run in place (dx == dy)");
    cudaStream_t st = zt_st(stream);
    if (dw) {
        int64_t rpc = (rows + 1023) / 1024;  // at most 1024 chunks
        if (rpc < 64) rpc = 64;
        const int64_t nchunks = (rows + rpc - 1) / rpc;
        float *partial = (float *)zt_ctx_scratch(c, (size_t)(nchunks * d) * sizeof(float), st);
        dim3 grid(zt_blocks(d, 128), (unsigned)nchunks);
        ZT_LAUNCH(rmsnorm_bwd_dw_partial_kernel, grid, 128, 0, st)(partial, (const bf16 *)dy, (const bf16 *)x, rstd, rows,
                                                            (int)d, rpc);
        ZT_LAUNCHED("rmsnorm_bwd_dw_partial_kernel", st);
        ZT_LAUNCH(rmsnorm_bwd_dw_final_kernel, zt_blocks(d, 128), 128, 0, st)(dw, partial, (int)d, nchunks);
        ZT_LAUNCHED("rmsnorm_bwd_dw_final_kernel", st);
    }
    if (dx) {
        const unsigned grid = zt_blocks(rows, ROWS_PER_BLOCK);
        const bool vec = d % 8 == 0 && zt_aligned16(x) && zt_aligned16(dx) && zt_aligned16(dy) && zt_aligned16(w);
        if (vec)
            ZT_LAUNCH(rmsnorm_bwd_dx_kernel<true>, grid, 32 * ROWS_PER_BLOCK, 0, st)(
                (bf16 *)dx, (const bf16 *)dy, (const bf16 *)x, (const bf16 *)w, rstd, rows, (int)d);
        else
            ZT_LAUNCH(rmsnorm_bwd_dx_kernel<false>, grid, 32 * ROWS_PER_BLOCK, 0, st)(
                (bf16 *)dx, (const bf16 *)dy, (const bf16 *)x, (const bf16 *)w, rstd, rows, (int)d);
        ZT_LAUNCHED("rmsnorm_bwd_dx_kernel", st);
    }
}

// ---- RoPE ----------------------------------------------------------------------------------------
// torch's fp32 arithmetic: inv_freq = 1 / theta^(2i/D) rounded to fp32, angle =
// pos * inv_freq in fp32; cos/sin evaluated in double and rounded, so the table
// matches a correctly rounded host cosf/sinf (no fast-math approximations).
__global__ void rope_table_kernel(float *cos_t, float *sin_t, int64_t S, int half, int D, float theta) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= S * half) return;
    const int64_t p = idx / half;
    const int i = (int)(idx % half);
    const float expo = (float)(2 * i) / (float)D;
    const float inv_freq = 1.0f / (float)pow((double)theta, (double)expo);
    const float ang = (float)p * inv_freq;
    cos_t[idx] = (float)cos((double)ang);
    sin_t[idx] = (float)sin((double)ang);
}

// pos (NULL: t % S) is each token's position, e.g. inside its packed document; a
// position outside the table traps the kernel (it would read past cos/sin).
template <bool BWD>
__global__ void rope_kernel(bf16 *__restrict__ x, const float *__restrict__ cos_t, const float *__restrict__ sin_t,
                            const int32_t *__restrict__ posv, int64_t BS, int64_t S, int nh, int half) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;  // over (token, head, i < half)
    if (idx >= BS * nh * half) return;
    const int i = (int)(idx % half);
    const int64_t th = idx / half;  // token * nh + head
    const int64_t t = th / nh;
    const int64_t pos = posv ? (int64_t)posv[t] : t % S;
    if (pos < 0 || pos >= S) {
        if (th % nh == 0 && i == 0)
            printf("zt_cuda_rope: position %lld of token %lld is outside the table [0, %lld)\n", (long long)pos,
                   (long long)t, (long long)S);
        __trap();
    }
    bf16 *v = x + th * 2 * half;
    const float c = cos_t[pos * half + i], s = sin_t[pos * half + i];
    const float a = bf2f(v[i]), b = bf2f(v[i + half]);
    if (!BWD) {
        v[i] = f2bf(a * c - b * s);
        v[i + half] = f2bf(b * c + a * s);
    } else {  // transpose of the rotation
        v[i] = f2bf(a * c + b * s);
        v[i + half] = f2bf(b * c - a * s);
    }
}

extern "C" void zt_cuda_rope_table(void *stream, float *cos_t, float *sin_t, int64_t S, int64_t D, double theta) {
    ZT_REQUIRE(S > 0 && D > 0 && D % 2 == 0, "rope table S=%lld D=%lld (D must be even)", (long long)S, (long long)D);
    cudaStream_t st = zt_st(stream);
    const int64_t n = S * (D / 2);
    ZT_LAUNCH(rope_table_kernel, zt_blocks(n, 256), 256, 0, st)(cos_t, sin_t, S, (int)(D / 2), (int)D, (float)theta);
    ZT_LAUNCHED("rope_table_kernel", st);
}

static void rope_launch(bool bwd, void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t,
                        const int32_t *pos, int64_t B, int64_t S, int64_t nh, int64_t D) {
    ZT_REQUIRE(B > 0 && S > 0 && nh > 0 && D > 0 && D % 2 == 0, "rope B=%lld S=%lld heads=%lld D=%lld", (long long)B,
               (long long)S, (long long)nh, (long long)D);
    cudaStream_t st = zt_st(stream);
    const int64_t n = B * S * nh * (D / 2);
    if (bwd)
        ZT_LAUNCH(rope_kernel<true>, zt_blocks(n, 256), 256, 0, st)((bf16 *)x, cos_t, sin_t, pos, B * S, S, (int)nh,
                                                                    (int)(D / 2));
    else
        ZT_LAUNCH(rope_kernel<false>, zt_blocks(n, 256), 256, 0, st)((bf16 *)x, cos_t, sin_t, pos, B * S, S, (int)nh,
                                                                     (int)(D / 2));
    ZT_LAUNCHED(bwd ? "rope_kernel<bwd>" : "rope_kernel<fwd>", st);
}

extern "C" void zt_cuda_rope_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t, const int32_t *pos,
                                 int64_t B, int64_t S, int64_t nh, int64_t D) {
    rope_launch(false, stream, x, cos_t, sin_t, pos, B, S, nh, D);
}
extern "C" void zt_cuda_rope_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t,
                                 const int32_t *pos, int64_t B, int64_t S, int64_t nh, int64_t D) {
    rope_launch(true, stream, dx, cos_t, sin_t, pos, B, S, nh, D);
}

// ---- SwiGLU ------------------------------------------------------------------------------------------
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

// ---- residual add and scale (fp32 arithmetic for either storage type) ------------------------------------
template <typename T>
__device__ __forceinline__ float ld_(const T *p, int64_t i);
template <>
__device__ __forceinline__ float ld_<float>(const float *p, int64_t i) { return p[i]; }
template <>
__device__ __forceinline__ float ld_<bf16>(const bf16 *p, int64_t i) { return bf2f(p[i]); }
__device__ __forceinline__ void st_(float *p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st_(bf16 *p, int64_t i, float v) { p[i] = f2bf(v); }

template <typename T>
__global__ void add_kernel(T *y, const T *a, const T *b, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st_(y, i, ld_(a, i) + ld_(b, i));
}
template <typename T>
__global__ void scale_kernel(T *x, float s, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st_(x, i, ld_(x, i) * s);
}

static unsigned stride_grid(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b > 65536 ? 65536 : (b < 1 ? 1 : b));
}

extern "C" void zt_cuda_add(void *stream, void *y, const void *a, const void *b, zt_cuda_dtype t, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    if (t == ZT_BF16)
        ZT_LAUNCH(add_kernel<bf16>, stride_grid(n), 256, 0, st)((bf16 *)y, (const bf16 *)a, (const bf16 *)b, n);
    else
        ZT_LAUNCH(add_kernel<float>, stride_grid(n), 256, 0, st)((float *)y, (const float *)a, (const float *)b, n);
    ZT_LAUNCHED("add_kernel", st);
}

extern "C" void zt_cuda_scale(void *stream, void *x, zt_cuda_dtype t, float s, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    if (t == ZT_BF16)
        ZT_LAUNCH(scale_kernel<bf16>, stride_grid(n), 256, 0, st)((bf16 *)x, s, n);
    else
        ZT_LAUNCH(scale_kernel<float>, stride_grid(n), 256, 0, st)((float *)x, s, n);
    ZT_LAUNCHED("scale_kernel", st);
}
