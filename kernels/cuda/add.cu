// Element-wise y = a + b (the residual adds), fp32 arithmetic for either storage
// type (bf16 rounds once, at the store).
// defines: zt_cuda_add
#include "kernels/cuda/cuda_internal.h"

template <typename T>
__global__ void add_kernel(T *y, const T *a, const T *b, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st_f32(y, i, ld_f32(a, i) + ld_f32(b, i));
}

extern "C" void zt_cuda_add(void *stream, void *y, const void *a, const void *b, zt_cuda_dtype t, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    if (t == ZT_BF16)
        ZT_LAUNCH(add_kernel<bf16>, zt_stride_blocks(n), 256, 0, st)((bf16 *)y, (const bf16 *)a, (const bf16 *)b, n);
    else
        ZT_LAUNCH(add_kernel<float>, zt_stride_blocks(n), 256, 0, st)((float *)y, (const float *)a, (const float *)b,
                                                                      n);
    ZT_LAUNCHED("add_kernel", st);
}
