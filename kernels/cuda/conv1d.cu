// Causal depthwise conv1d + SiLU (Gated DeltaNet's short convolution), token-major x[B*S, C],
// w[C, K]: bf16 in and out, fp32 arithmetic, the formulas of kernels/cpu/conv1d.c. A tap before
// its token's document start reads zero, so packed documents stay apart.
// defines: zt_cuda_conv1d_silu_fwd, zt_cuda_conv1d_silu_bwd
#include "kernels/cuda/cuda_internal.h"

#define CONV_MAX_K 8

static __device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

// The first token that token t of block b may read (its document's first token).
static __device__ __forceinline__ int64_t doc_first(const int32_t *pos, int64_t row, int64_t t) {
    return pos ? t - pos[row] : 0;
}

// One thread per (token, channel).
__global__ void conv1d_silu_fwd_kernel(bf16 *__restrict__ y, bf16 *__restrict__ pre, const bf16 *__restrict__ x,
                                       const bf16 *__restrict__ w, const int32_t *__restrict__ pos, int64_t BS,
                                       int64_t S, int C, int K) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= BS * C) return;
    const int c = (int)(idx % C);
    const int64_t row = idx / C, t = row % S, b = row / S, lo = doc_first(pos, row, t);
    if (lo < 0 || lo > t) {
        if (c == 0) printf("zt_cuda_conv1d: document position %d of token %lld is outside [0, %lld]\n", pos[row],
                           (long long)t, (long long)t);
        __trap();
    }
    float p = 0.0f;
    for (int j = 0; j < K; j++) {  // tap j reads token t - (K - 1) + j
        const int64_t s = t - (K - 1) + j;
        if (s < lo) continue;
        p += bf2f(w[(int64_t)c * K + j]) * bf2f(x[(b * S + s) * C + c]);
    }
    pre[idx] = f2bf(p);
    y[idx] = f2bf(p * sigm(p));
}

static __device__ __forceinline__ float dsilu_dy(float dy, float p) {
    const float s = sigm(p);
    return dy * (s * (1.0f + p * (1.0f - s)));
}

// dx[s] = sum over the tokens t in [s, s + K - 1] of s's document: w[:, s - t + K - 1] dpre[t].
__global__ void conv1d_silu_bwd_dx_kernel(bf16 *__restrict__ dx, const bf16 *__restrict__ dy,
                                          const bf16 *__restrict__ pre, const bf16 *__restrict__ w,
                                          const int32_t *__restrict__ pos, int64_t BS, int64_t S, int C, int K) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= BS * C) return;
    const int c = (int)(idx % C);
    const int64_t row = idx / C, s = row % S, b = row / S;
    float acc = 0.0f;
    for (int64_t t = s; t < S && t < s + K; t++) {
        const int64_t rt = b * S + t;
        if (doc_first(pos, rt, t) > s) break;  // t (and every later token) is in a later document
        const float dp = dsilu_dy(bf2f(dy[rt * C + c]), bf2f(pre[rt * C + c]));
        acc += bf2f(w[(int64_t)c * K + (s - t + K - 1)]) * dp;
    }
    dx[idx] = f2bf(acc);
}

// dw partials: block (channel tile, row chunk) sums its rows in order into partial[chunk][c*K + j];
// a second kernel adds the chunks in order (no atomics: deterministic).
__global__ void conv1d_silu_bwd_dw_partial_kernel(float *__restrict__ partial, const bf16 *__restrict__ dy,
                                                  const bf16 *__restrict__ pre, const bf16 *__restrict__ x,
                                                  const int32_t *__restrict__ pos, int64_t BS, int64_t S, int C,
                                                  int K, int64_t rows_per_chunk) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    if (c >= C) return;
    const int64_t r0 = chunk * rows_per_chunk, r1 = r0 + rows_per_chunk < BS ? r0 + rows_per_chunk : BS;
    float acc[CONV_MAX_K];
    for (int j = 0; j < K; j++) acc[j] = 0.0f;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t t = r % S, lo = doc_first(pos, r, t);
        const float dp = dsilu_dy(bf2f(dy[r * C + c]), bf2f(pre[r * C + c]));
        for (int j = 0; j < K; j++) {
            const int64_t s = t - (K - 1) + j;
            if (s < lo) continue;
            acc[j] += dp * bf2f(x[(r - t + s) * C + c]);
        }
    }
    for (int j = 0; j < K; j++) partial[chunk * C * K + (int64_t)c * K + j] = acc[j];
}

__global__ void conv1d_dw_sum_kernel(float *__restrict__ dw, const float *__restrict__ partial, int64_t n,
                                  int64_t nchunks) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int64_t c = 0; c < nchunks; c++) s += partial[c * n + i];
    dw[i] += s;
}

static void conv_require(int64_t B, int64_t S, int64_t C, int64_t K) {
    ZT_REQUIRE(B > 0 && S > 0 && C > 0 && C < (1 << 30) && K > 0 && K <= CONV_MAX_K,
               "conv1d B=%lld S=%lld C=%lld K=%lld (K <= %d)", (long long)B, (long long)S, (long long)C,
               (long long)K, CONV_MAX_K);
}

extern "C" void zt_cuda_conv1d_silu_fwd(void *stream, zt_bf16 *y, zt_bf16 *pre, const zt_bf16 *x, const zt_bf16 *w,
                                        const int32_t *pos, int64_t B, int64_t S, int64_t C, int64_t K) {
    conv_require(B, S, C, K);
    cudaStream_t st = zt_st(stream);
    const int64_t n = B * S * C;
    ZT_LAUNCH(conv1d_silu_fwd_kernel, zt_blocks(n, 256), 256, 0, st)((bf16 *)y, (bf16 *)pre, (const bf16 *)x,
                                                                     (const bf16 *)w, pos, B * S, S, (int)C, (int)K);
    ZT_LAUNCHED("conv1d_silu_fwd_kernel", st);
}

extern "C" void zt_cuda_conv1d_silu_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, float *dw, const zt_bf16 *dy,
                                        const zt_bf16 *pre, const zt_bf16 *x, const zt_bf16 *w, const int32_t *pos,
                                        int64_t B, int64_t S, int64_t C, int64_t K) {
    conv_require(B, S, C, K);
    cudaStream_t st = zt_st(stream);
    const int64_t BS = B * S;
    if (dw) {
        int64_t rpc = (BS + 255) / 256;  // at most 256 chunks
        if (rpc < 64) rpc = 64;
        const int64_t nchunks = (BS + rpc - 1) / rpc;
        float *partial = (float *)zt_ctx_scratch(c, (size_t)(nchunks * C * K) * sizeof(float), st);
        const dim3 grid(zt_blocks(C, 128), (unsigned)nchunks);
        ZT_LAUNCH(conv1d_silu_bwd_dw_partial_kernel, grid, 128, 0, st)(partial, (const bf16 *)dy, (const bf16 *)pre,
                                                                      (const bf16 *)x, pos, BS, S, (int)C, (int)K,
                                                                      rpc);
        ZT_LAUNCHED("conv1d_silu_bwd_dw_partial_kernel", st);
        ZT_LAUNCH(conv1d_dw_sum_kernel, zt_blocks(C * K, 256), 256, 0, st)(dw, partial, C * K, nchunks);
        ZT_LAUNCHED("conv1d_dw_sum_kernel", st);
    }
    if (dx) {
        const int64_t n = BS * C;
        ZT_LAUNCH(conv1d_silu_bwd_dx_kernel, zt_blocks(n, 256), 256, 0, st)((bf16 *)dx, (const bf16 *)dy,
                                                                            (const bf16 *)pre, (const bf16 *)w, pos,
                                                                            BS, S, (int)C, (int)K);
        ZT_LAUNCHED("conv1d_silu_bwd_dx_kernel", st);
    }
}
