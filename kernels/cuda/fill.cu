// Device fills: a constant, quiet NaN (tests poison outputs with it) and seeded
// uniform values (a counter-based generator: the same seed gives the same data on any grid).
// defines: zt_cuda_fill, zt_cuda_fill_nan, zt_cuda_fill_uniform
#include "kernels/cuda/cuda_internal.h"

__global__ void fill_u16_kernel(uint16_t *x, uint16_t v, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = v;
}
__global__ void fill_f32_kernel(float *x, float v, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = v;
}
__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
template <typename T>
__global__ void fill_uniform_kernel(T *x, int64_t n, float lo, float hi, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float u = (float)(splitmix64(seed * 0x2545f4914f6cdd1dull + (uint64_t)i) >> 40) * (1.0f / 16777216.0f);
        x[i] = (T)(lo + (hi - lo) * u);
    }
}

extern "C" void zt_cuda_fill_nan(void *x, zt_cuda_dtype t, int64_t n, void *stream) {
    if (n <= 0) return;
    if (t == ZT_BF16) {
        ZT_LAUNCH(fill_u16_kernel, zt_stride_blocks(n), 256, 0, zt_st(stream))((uint16_t *)x, 0x7fc0, n);
        ZT_LAUNCHED("fill_u16_kernel", zt_st(stream));
    } else {
        ZT_LAUNCH(fill_f32_kernel, zt_stride_blocks(n), 256, 0, zt_st(stream))((float *)x, __builtin_nanf(""), n);
        ZT_LAUNCHED("fill_f32_kernel", zt_st(stream));
    }
}

extern "C" void zt_cuda_fill_uniform(void *x, zt_cuda_dtype t, int64_t n, float lo, float hi, uint64_t seed,
                                     void *stream) {
    if (n <= 0) return;
    if (t == ZT_BF16)
        ZT_LAUNCH(fill_uniform_kernel<bf16>, zt_stride_blocks(n), 256, 0, zt_st(stream))((bf16 *)x, n, lo, hi,
                                                                                          seed);
    else
        ZT_LAUNCH(fill_uniform_kernel<float>, zt_stride_blocks(n), 256, 0, zt_st(stream))((float *)x, n, lo, hi,
                                                                                           seed);
    ZT_LAUNCHED("fill_uniform_kernel", zt_st(stream));
}

extern "C" void zt_cuda_fill(float *x, float value, int64_t n, void *stream) {
    if (n <= 0) return;
    ZT_LAUNCH(fill_f32_kernel, zt_stride_blocks(n), 256, 0, zt_st(stream))(x, value, n);
    ZT_LAUNCHED("fill_f32_kernel", zt_st(stream));
}
