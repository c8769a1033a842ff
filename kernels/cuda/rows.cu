// Rows moved by a map: context parallelism's placement of a rank's held rows at their rows of
// the whole block (queries, gathered K/V, positions, log-sum-exps) and back (the attention's
// output and gradients), one launch per kind of row (model/qwen3_cuda_context.c).
// defines: zt_cuda_rows_gather, zt_cuda_rows_gather_to_f32
#include "kernels/cuda/cuda_internal.h"

// One thread per 4-byte word of the destination; rows where map < 0 are zeroed.
__global__ void rows_gather_kernel(uint32_t *__restrict__ dst, const uint32_t *__restrict__ src,
                                   const int32_t *__restrict__ map, int64_t nb, int64_t rows, int64_t src_rows,
                                   int64_t words) {
    const int64_t n_all = nb * rows * words;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_all; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t w = i % words, r = i / words, n = r / rows, m = map[r % rows];
        dst[i] = m >= 0 ? src[(n * src_rows + m) * words + w] : 0u;
    }
}

__global__ void rows_gather_f32_kernel(float *__restrict__ dst, const bf16 *__restrict__ src,
                                       const int32_t *__restrict__ map, int64_t nb, int64_t rows, int64_t src_rows,
                                       int64_t cols) {
    const int64_t n_all = nb * rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_all; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % cols, r = i / cols, n = r / rows, m = map[r % rows];
        dst[i] = m >= 0 ? bf2f(src[(n * src_rows + m) * cols + c]) : 0.0f;
    }
}

static void check_rows(const void *dst, const void *src, const int32_t *map, int64_t nb, int64_t rows,
                       int64_t src_rows, int64_t width) {
    ZT_REQUIRE(dst && src && map && nb >= 0 && rows >= 0 && src_rows >= 0 && width > 0,
               "rows gather nb=%lld rows=%lld src_rows=%lld width=%lld", (long long)nb, (long long)rows,
               (long long)src_rows, (long long)width);
    ZT_REQUIRE(((uintptr_t)dst & 3) == 0 && ((uintptr_t)src & 3) == 0, "rows gather: operands not 4-byte aligned");
}

extern "C" void zt_cuda_rows_gather(void *stream, void *dst, const void *src, const int32_t *map, int64_t nb,
                                    int64_t rows, int64_t src_rows, int64_t words) {
    check_rows(dst, src, map, nb, rows, src_rows, words);
    if (nb * rows == 0) return;
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(rows_gather_kernel, zt_stride_blocks(nb * rows * words), 256, 0, st)(
        (uint32_t *)dst, (const uint32_t *)src, map, nb, rows, src_rows, words);
    ZT_LAUNCHED("rows_gather_kernel", st);
}

extern "C" void zt_cuda_rows_gather_to_f32(void *stream, float *dst, const zt_bf16 *src, const int32_t *map,
                                           int64_t nb, int64_t rows, int64_t src_rows, int64_t cols) {
    check_rows(dst, src, map, nb, rows, src_rows, cols);
    if (nb * rows == 0) return;
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(rows_gather_f32_kernel, zt_stride_blocks(nb * rows * cols), 256, 0, st)(
        dst, (const bf16 *)src, map, nb, rows, src_rows, cols);
    ZT_LAUNCHED("rows_gather_f32_kernel", st);
}
