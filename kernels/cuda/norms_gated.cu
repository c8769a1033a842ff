// The two norms of Gated DeltaNet on the GPU: the L2 norm of q and k per head (transformers'
// l2norm, x * rsqrt(sum x^2 + eps)) and the gated RMSNorm of the output (Qwen3_5RMSNormGated:
// w * rmsnorm(x) * silu(z)). bf16 in and out, fp32 arithmetic and statistics, one warp per row,
// the formulas of kernels/cpu/norms_gated.c.
// defines: zt_cuda_l2norm_fwd, zt_cuda_l2norm_bwd, zt_cuda_rmsnorm_gated_fwd, zt_cuda_rmsnorm_gated_bwd
#include "kernels/cuda/cuda_internal.h"

#define NG_ROWS 8  // rows per block, one warp each

static __device__ __forceinline__ float ng_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void l2norm_fwd_kernel(bf16 *__restrict__ y, float *__restrict__ rinv, const bf16 *__restrict__ x,
                                  int64_t rows, int d, float eps) {
    const int64_t row = (int64_t)blockIdx.x * NG_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const bf16 *xr = x + row * d;
    float ss = 0.0f;
    for (int j = lane; j < d; j += 32) {
        const float f = bf2f(xr[j]);
        ss += f * f;
    }
    const float ri = 1.0f / sqrtf(warp_sum(ss) + eps);
    if (lane == 0) rinv[row] = ri;
    for (int j = lane; j < d; j += 32) y[row * d + j] = f2bf(bf2f(xr[j]) * ri);
}

// With y = x r: dx = r (dy - y (y . dy)).
__global__ void l2norm_bwd_kernel(bf16 *__restrict__ dx, const bf16 *__restrict__ dy, const bf16 *__restrict__ x,
                                  const float *__restrict__ rinv, int64_t rows, int d) {
    const int64_t row = (int64_t)blockIdx.x * NG_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const bf16 *xr = x + row * d, *gr = dy + row * d;
    const float ri = rinv[row];
    float dot = 0.0f;
    for (int j = lane; j < d; j += 32) dot += (bf2f(xr[j]) * ri) * bf2f(gr[j]);
    dot = warp_sum(dot);
    for (int j = lane; j < d; j += 32) dx[row * d + j] = f2bf(ri * (bf2f(gr[j]) - (bf2f(xr[j]) * ri) * dot));
}

// y = w (x rstd) silu(z), rstd = rsqrt(mean(x^2) + eps)
__global__ void rmsnorm_gated_fwd_kernel(bf16 *__restrict__ y, float *__restrict__ rstd, const bf16 *__restrict__ x,
                                         const bf16 *__restrict__ z, const bf16 *__restrict__ w, int64_t rows, int d,
                                         float eps) {
    const int64_t row = (int64_t)blockIdx.x * NG_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const bf16 *xr = x + row * d, *zr = z + row * d;
    float ss = 0.0f;
    for (int j = lane; j < d; j += 32) {
        const float f = bf2f(xr[j]);
        ss += f * f;
    }
    const float rs = 1.0f / sqrtf(warp_sum(ss) / (float)d + eps);
    if (lane == 0) rstd[row] = rs;
    for (int j = lane; j < d; j += 32) {
        const float zz = bf2f(zr[j]);
        y[row * d + j] = f2bf(bf2f(w[j]) * (bf2f(xr[j]) * rs) * (zz * ng_sigmoid(zz)));
    }
}

// n = x rstd, s = silu(z): dz = dy w n silu'(z); dn = dy w s; dx = rstd (dn - n mean(dn n)).
__global__ void rmsnorm_gated_bwd_kernel(bf16 *__restrict__ dx, bf16 *__restrict__ dz, const bf16 *__restrict__ dy,
                                         const bf16 *__restrict__ x, const bf16 *__restrict__ z,
                                         const bf16 *__restrict__ w, const float *__restrict__ rstd, int64_t rows,
                                         int d) {
    const int64_t row = (int64_t)blockIdx.x * NG_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const bf16 *xr = x + row * d, *zr = z + row * d, *gr = dy + row * d;
    const float rs = rstd[row];
    float dot = 0.0f;
    for (int j = lane; j < d; j += 32) {
        const float zz = bf2f(zr[j]), sg = ng_sigmoid(zz), n = bf2f(xr[j]) * rs, gw = bf2f(gr[j]) * bf2f(w[j]);
        dot += gw * (zz * sg) * n;
        dz[row * d + j] = f2bf(gw * n * (sg * (1.0f + zz * (1.0f - sg))));
    }
    const float mean = warp_sum(dot) / (float)d;
    for (int j = lane; j < d; j += 32) {
        const float zz = bf2f(zr[j]), sg = ng_sigmoid(zz);
        dx[row * d + j] = f2bf(rs * (bf2f(gr[j]) * bf2f(w[j]) * (zz * sg) - bf2f(xr[j]) * rs * mean));
    }
}

// dw partials over row chunks (in order), then the chunks summed in order: deterministic.
__global__ void rmsnorm_gated_dw_partial_kernel(float *__restrict__ partial, const bf16 *__restrict__ dy,
                                                const bf16 *__restrict__ x, const bf16 *__restrict__ z,
                                                const float *__restrict__ rstd, int64_t rows, int d,
                                                int64_t rows_per_chunk) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    if (col >= d) return;
    const int64_t r0 = chunk * rows_per_chunk, r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
    float s = 0.0f;
    for (int64_t r = r0; r < r1; r++) {
        const float zz = bf2f(z[r * d + col]);
        s += bf2f(dy[r * d + col]) * (bf2f(x[r * d + col]) * rstd[r]) * (zz * ng_sigmoid(zz));
    }
    partial[chunk * d + col] = s;
}

__global__ void rmsnorm_gated_dw_final_kernel(float *__restrict__ dw, const float *__restrict__ partial, int d,
                                              int64_t nchunks) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= d) return;
    float s = 0.0f;
    for (int64_t c = 0; c < nchunks; c++) s += partial[c * d + col];
    dw[col] += s;
}

static void ng_require(int64_t rows, int64_t d) {
    ZT_REQUIRE(rows > 0 && d > 0 && d < (1 << 30), "norm rows=%lld d=%lld", (long long)rows, (long long)d);
}

extern "C" void zt_cuda_l2norm_fwd(void *stream, zt_bf16 *y, float *rinv, const zt_bf16 *x, int64_t rows, int64_t d,
                                   float eps) {
    ng_require(rows, d);
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(l2norm_fwd_kernel, zt_blocks(rows, NG_ROWS), 32 * NG_ROWS, 0, st)((bf16 *)y, rinv, (const bf16 *)x,
                                                                              rows, (int)d, eps);
    ZT_LAUNCHED("l2norm_fwd_kernel", st);
}

extern "C" void zt_cuda_l2norm_bwd(void *stream, zt_bf16 *dx, const zt_bf16 *dy, const zt_bf16 *x, const float *rinv,
                                   int64_t rows, int64_t d) {
    ng_require(rows, d);
    ZT_REQUIRE(dx != dy, "l2norm_bwd cannot run in place (dx == dy)");
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(l2norm_bwd_kernel, zt_blocks(rows, NG_ROWS), 32 * NG_ROWS, 0, st)((bf16 *)dx, (const bf16 *)dy,
                                                                              (const bf16 *)x, rinv, rows, (int)d);
    ZT_LAUNCHED("l2norm_bwd_kernel", st);
}

extern "C" void zt_cuda_rmsnorm_gated_fwd(void *stream, zt_bf16 *y, float *rstd, const zt_bf16 *x, const zt_bf16 *z,
                                          const zt_bf16 *w, int64_t rows, int64_t d, float eps) {
    ng_require(rows, d);
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(rmsnorm_gated_fwd_kernel, zt_blocks(rows, NG_ROWS), 32 * NG_ROWS, 0, st)(
        (bf16 *)y, rstd, (const bf16 *)x, (const bf16 *)z, (const bf16 *)w, rows, (int)d, eps);
    ZT_LAUNCHED("rmsnorm_gated_fwd_kernel", st);
}

extern "C" size_t zt_cuda_rmsnorm_gated_bwd_scratch_bytes(int64_t rows, int64_t d) {
    int64_t rpc = (rows + 1023) / 1024;
    if (rpc < 64) rpc = 64;
    return (size_t)((rows + rpc - 1) / rpc * d) * sizeof(float);
}

extern "C" void zt_cuda_rmsnorm_gated_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, zt_bf16 *dz, float *dw,
                                          const zt_bf16 *dy, const zt_bf16 *x, const zt_bf16 *z, const zt_bf16 *w,
                                          const float *rstd, int64_t rows, int64_t d) {
    ng_require(rows, d);
    ZT_REQUIRE(dx && dz && dx != dy && dz != dy, "rmsnorm_gated_bwd: dx and dz are written, not in place");
    cudaStream_t st = zt_st(stream);
    if (dw) {
        int64_t rpc = (rows + 1023) / 1024;
        if (rpc < 64) rpc = 64;
        const int64_t nchunks = (rows + rpc - 1) / rpc;
        float *partial = (float *)zt_ctx_scratch(c, zt_cuda_rmsnorm_gated_bwd_scratch_bytes(rows, d), st);
        const dim3 grid(zt_blocks(d, 128), (unsigned)nchunks);
        ZT_LAUNCH(rmsnorm_gated_dw_partial_kernel, grid, 128, 0, st)(partial, (const bf16 *)dy, (const bf16 *)x,
                                                                    (const bf16 *)z, rstd, rows, (int)d, rpc);
        ZT_LAUNCHED("rmsnorm_gated_dw_partial_kernel", st);
        ZT_LAUNCH(rmsnorm_gated_dw_final_kernel, zt_blocks(d, 128), 128, 0, st)(dw, partial, (int)d, nchunks);
        ZT_LAUNCHED("rmsnorm_gated_dw_final_kernel", st);
    }
    ZT_LAUNCH(rmsnorm_gated_bwd_kernel, zt_blocks(rows, NG_ROWS), 32 * NG_ROWS, 0, st)(
        (bf16 *)dx, (bf16 *)dz, (const bf16 *)dy, (const bf16 *)x, (const bf16 *)z, (const bf16 *)w, rstd, rows,
        (int)d);
    ZT_LAUNCHED("rmsnorm_gated_bwd_kernel", st);
}
