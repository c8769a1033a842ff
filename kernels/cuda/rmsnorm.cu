// RMSNorm as Qwen3 uses it (weight multiplies), also per head over head_dim for
// q_norm/k_norm: bf16 in and out, fp32 arithmetic, the formulas of kernels/cpu/rmsnorm.c.
// defines: zt_cuda_rmsnorm_fwd, zt_cuda_rmsnorm_bwd
#include "kernels/cuda/cuda_internal.h"

#define ROWS_PER_BLOCK 8  // one warp per row

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

// dw's per-chunk partial sums: at most 1024 chunks of at least 64 rows, d floats each
static int64_t dw_chunks(int64_t rows) {
    int64_t rpc = (rows + 1023) / 1024;
    if (rpc < 64) rpc = 64;
    return (rows + rpc - 1) / rpc;
}

extern "C" size_t zt_cuda_rmsnorm_bwd_scratch_bytes(int64_t rows, int64_t d) {
    return (size_t)(dw_chunks(rows) * d) * sizeof(float);
}

extern "C" void zt_cuda_rmsnorm_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, float *dw, const zt_bf16 *dy,
                                    const zt_bf16 *x, const zt_bf16 *w, const float *rstd, int64_t rows, int64_t d) {
    ZT_REQUIRE(rows > 0 && d > 0 && d < (1 << 30), "rmsnorm rows=%lld d=%lld", (long long)rows, (long long)d);
    ZT_REQUIRE(dx != dy || dx == NULL, "rmsnorm_bwd cannot run in place (dx == dy)");
    cudaStream_t st = zt_st(stream);
    if (dw) {
        int64_t rpc = (rows + 1023) / 1024;  // at most 1024 chunks (dw_chunks)
        if (rpc < 64) rpc = 64;
        const int64_t nchunks = dw_chunks(rows);
        float *partial = (float *)zt_ctx_scratch(c, zt_cuda_rmsnorm_bwd_scratch_bytes(rows, d), st);
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
