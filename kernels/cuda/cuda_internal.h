// Internals shared by the kernels/cuda/*.cu files (CUDA C++ only, never included
// from C): launch and precondition checks, bf16 vector helpers, the context structure.
// The checked-call macros (ZT_CUDA_CHECK, ZT_CUBLAS_CHECK) are in zt_cuda_check.h.
// defines: ZT_LAUNCHED, ZT_REQUIRE, zt_cuda_ctx (struct), scratch helpers
#ifndef ZT_CUDA_INTERNAL_H
#define ZT_CUDA_INTERNAL_H
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/zt_cuda.h"
#include "kernels/cuda/zt_cuda_check.h"

typedef __nv_bfloat16 bf16;

// Kernel launches are written ZT_LAUNCH(kernel, grid, block, smem, stream)(args): under
// nvcc that is kernel<<<grid, block, smem, stream>>>(args); the CPU execution of the CUDA
// model (tests/cudaemu, test only) defines it first to run the same kernel source.
#ifndef ZT_LAUNCH
#define ZT_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#endif
// Dynamic shared memory, declared inside a kernel: ZT_DYNAMIC_SHARED(float, buf);
#ifndef ZT_DYNAMIC_SHARED
#define ZT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

// ---- launch and precondition checks: each names itself, the file and the line ------
// After a kernel launch: the launch error now, and with ZT_CUDA_SYNC=1 the execution error.
extern "C" void zt_cuda_launched_at(const char *kernel, cudaStream_t st, const char *file, int line);
extern "C" int zt_cuda_sync_every_op(void);

#define ZT_LAUNCHED(name, st) zt_cuda_launched_at((name), (st), __FILE__, __LINE__)
// Shape and argument preconditions at an op's boundary.
#define ZT_REQUIRE(cond, ...)                                                        \
    do {                                                                             \
        if (!(cond)) {                                                               \
            char zt_req_buf_[512];                                                   \
            snprintf(zt_req_buf_, sizeof zt_req_buf_, __VA_ARGS__);                  \
            zt_cuda_die("precondition " #cond, zt_req_buf_, __FILE__, __LINE__);     \
        }                                                                            \
    } while (0)

static inline cudaStream_t zt_st(void *s) { return (cudaStream_t)s; }
static inline unsigned zt_blocks(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }
// Blocks of 256 threads for a grid-stride loop over n elements: one per 256, at most
// 65536 (the loop covers the rest), at least 1.
static inline unsigned zt_stride_blocks(int64_t n) {
    int64_t b = (n + 255) / 256;
    return (unsigned)(b > 65536 ? 65536 : (b < 1 ? 1 : b));
}

// ---- the context ------------------------------------------------------------------
struct zt_plan;  // defined in matmul.cu
struct zt_cuda_ctx {
    int device;
    cublasLtHandle_t lt;
    void *workspace;           // cuBLASLt workspace, allocated once
    size_t workspace_bytes;
    struct zt_plan **plans;    // open-addressing hash table of matmul plans
    int64_t nplans, plan_cap, plan_hits, plan_misses;
    void *scratch;             // grows stream-ordered; see zt_ctx_scratch
    size_t scratch_bytes;
    int64_t xent_chunk_rows;   // 0 = automatic
    void *cudnn;               // cuDNN handle + SDPA graph cache (attention_cudnn.cu), created on first use
};
// A scratch area of at least `bytes`, valid for work ordered on `st` after this call.
void *zt_ctx_scratch(zt_cuda_ctx *c, size_t bytes, cudaStream_t st);
void zt_plans_destroy(zt_cuda_ctx *c);
void zt_cudnn_ctx_release(zt_cuda_ctx *c);  // attention_cudnn.cu (a no-op without cuDNN)

// ---- bf16 helpers -------------------------------------------------------------------
__device__ __forceinline__ float bf2f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 f2bf(float x) { return __float2bfloat16_rn(x); }
// 8 bf16 = 16 bytes, the unit of vectorised loads and stores.
// The 16 bytes move as one uint4; memcpy reinterprets them as bf16 pairs without the
// aliasing violation of a pointer cast (registers only on the GPU; a host compiler with
// strict aliasing would otherwise be free to drop the stores, as g++ warned).
__device__ __forceinline__ void load8(float *f, const bf16 *p) {
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    __nv_bfloat162 h[4];
    memcpy(h, &u, sizeof u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 t = __bfloat1622float2(h[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}
__device__ __forceinline__ void store8(bf16 *p, const float *f) {
    __nv_bfloat162 h[4];
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    uint4 u;
    memcpy(&u, h, sizeof u);
    *reinterpret_cast<uint4 *>(p) = u;
}
static inline int zt_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }
// An element as fp32 and back, for ops that take either storage type (add, scale).
template <typename T>
__device__ __forceinline__ float ld_f32(const T *p, int64_t i);
template <>
__device__ __forceinline__ float ld_f32<float>(const float *p, int64_t i) { return p[i]; }
template <>
__device__ __forceinline__ float ld_f32<bf16>(const bf16 *p, int64_t i) { return bf2f(p[i]); }
__device__ __forceinline__ void st_f32(float *p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st_f32(bf16 *p, int64_t i, float v) { p[i] = f2bf(v); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
#endif
