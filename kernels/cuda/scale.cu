// Element-wise x *= s in place (gradient clipping), fp32 arithmetic for either
// storage type (bf16 rounds once, at the store).
// defines: zt_cuda_scale
#include "kernels/cuda/cuda_internal.h"

template <typename T>
__global__ void scale_kernel(T *x, float s, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st_f32(x, i, ld_f32(x, i) * s);
}

extern "C" void zt_cuda_scale(void *stream, void *x, zt_cuda_dtype t, float s, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    if (t == ZT_BF16)
        ZT_LAUNCH(scale_kernel<bf16>, zt_stride_blocks(n), 256, 0, st)((bf16 *)x, s, n);
    else
        ZT_LAUNCH(scale_kernel<float>, zt_stride_blocks(n), 256, 0, st)((float *)x, s, n);
    ZT_LAUNCHED("scale_kernel", st);
}
