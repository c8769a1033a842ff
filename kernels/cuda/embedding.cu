// Token embedding lookup and its deterministic gradient (no float atomics).
// defines: zt_cuda_embedding_fwd, zt_cuda_embedding_bwd
#include "kernels/cuda/cuda_internal.h"

__global__ void embedding_fwd_kernel(bf16 *__restrict__ x, const bf16 *__restrict__ w,
                                     const uint32_t *__restrict__ tokens, int64_t N, int d, int64_t V, int vec) {
    const int64_t j = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) * (vec ? 8 : 1);
    for (int64_t row = blockIdx.y; row < N; row += gridDim.y) {  // tokens along y, columns along x
        const uint32_t tok = tokens[row];
        if (tok >= V) {
            if (threadIdx.x == 0 && blockIdx.x == 0)
                printf("zt_cuda_embedding_fwd: token %u at position %lld is >= vocab size %lld\n", tok,
                       (long long)row, (long long)V);
            __trap();
        }
        if (j >= d) continue;
        if (vec)
            *reinterpret_cast<uint4 *>(x + row * d + j) = *reinterpret_cast<const uint4 *>(w + (int64_t)tok * d + j);
        else
            x[row * d + j] = w[(int64_t)tok * d + j];
    }
}

// Block (row range r0..r0+ROWS, column tile) owns dw[r0..r0+ROWS, tile]: every
// warp scans the token list 32 at a time, a ballot finds the tokens in its range,
// and the owning thread adds those rows in token order. Each dw element has one
// writer and a fixed summation order, so the result is reproducible bit for bit
// and equal in order to the CPU reference.
#define EMB_ROWS 64
__global__ void embedding_bwd_kernel(float *__restrict__ dw, const bf16 *__restrict__ dx,
                                     const uint32_t *__restrict__ tokens, int64_t N, int d, int64_t V) {
    const int64_t r0 = (int64_t)blockIdx.x * EMB_ROWS;
    const int64_t r1 = r0 + EMB_ROWS < V ? r0 + EMB_ROWS : V;
    const int col = blockIdx.y * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    for (int64_t base = 0; base < N; base += 32) {
        const int64_t i = base + lane;
        const uint32_t t = i < N ? tokens[i] : 0xffffffffu;
        unsigned mask = __ballot_sync(0xffffffffu, t >= r0 && t < r1);
        while (mask) {
            const int b = __ffs(mask) - 1;
            mask &= mask - 1;
            const uint32_t tok = __shfl_sync(0xffffffffu, t, b);
            if (col < d) dw[(int64_t)tok * d + col] += bf2f(dx[(base + b) * d + col]);
        }
    }
}

extern "C" void zt_cuda_embedding_fwd(void *stream, zt_bf16 *x, const zt_bf16 *w, const uint32_t *tokens, int64_t N,
                                      int64_t d, int64_t V) {
    ZT_REQUIRE(N > 0 && d > 0 && d < (1 << 30) && V > 0,
               "embedding N=%lld d=%lld V=%lld", (long long)N, (long long)d, (long long)V);
    cudaStream_t st = zt_st(stream);
    const int vec = d % 8 == 0 && zt_aligned16(x) && zt_aligned16(w);
    const int64_t per_row = vec ? d / 8 : d;
    dim3 grid(zt_blocks(per_row, 128), (unsigned)(N < 65535 ? N : 65535));
    ZT_LAUNCH(embedding_fwd_kernel, grid, 128, 0, st)((bf16 *)x, (const bf16 *)w, tokens, N, (int)d, V, vec);
    ZT_LAUNCHED("embedding_fwd_kernel", st);
}

extern "C" void zt_cuda_embedding_bwd(void *stream, float *dw, const zt_bf16 *dx, const uint32_t *tokens, int64_t N,
                                      int64_t d, int64_t V) {
    ZT_REQUIRE(N > 0 && d > 0 && d < (1 << 30) && V > 0, "embedding N=%lld d=%lld V=%lld", (long long)N,
               (long long)d, (long long)V);
    cudaStream_t st = zt_st(stream);
    dim3 grid((unsigned)((V + EMB_ROWS - 1) / EMB_ROWS), zt_blocks(d, 256));
    ZT_REQUIRE(grid.y <= 65535, "embedding_bwd: d=%lld too wide", (long long)d);
    ZT_LAUNCH(embedding_bwd_kernel, grid, 256, 0, st)(dw, (const bf16 *)dx, tokens, N, (int)d, V);
    ZT_LAUNCHED("embedding_bwd_kernel", st);
}
