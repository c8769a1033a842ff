// fp32 <-> bf16 conversions on the device. fp32 -> bf16 is the hardware conversion
// (__float2bfloat16_rn): round to nearest even, the algorithm of the host's zt_f32_to_bf16
// (base/bf16.h) for every non-NaN; a NaN becomes the canonical 0x7fff, where the host
// keeps its sign and payload. bf16 -> fp32 is exact.
// defines: zt_cuda_f32_to_bf16, zt_cuda_bf16_to_f32
#include "kernels/cuda/cuda_internal.h"

__global__ void f32_to_bf16_kernel(bf16 *y, const float *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = f2bf(x[i]);
}
__global__ void bf16_to_f32_kernel(float *y, const bf16 *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = bf2f(x[i]);
}

extern "C" void zt_cuda_f32_to_bf16(zt_bf16 *y, const float *x, int64_t n, void *stream) {
    if (n <= 0) return;
    ZT_LAUNCH(f32_to_bf16_kernel, zt_stride_blocks(n), 256, 0, zt_st(stream))((bf16 *)y, x, n);
    ZT_LAUNCHED("f32_to_bf16_kernel", zt_st(stream));
}

extern "C" void zt_cuda_bf16_to_f32(float *y, const zt_bf16 *x, int64_t n, void *stream) {
    if (n <= 0) return;
    ZT_LAUNCH(bf16_to_f32_kernel, zt_stride_blocks(n), 256, 0, zt_st(stream))(y, (const bf16 *)x, n);
    ZT_LAUNCHED("bf16_to_f32_kernel", zt_st(stream));
}
