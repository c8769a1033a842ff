// cudaemu: the device side of CUDA C++ for .cu files compiled by the host compiler.
// Kernels are plain functions; a launch (ZT_LAUNCH, which is `kernel<<<...>>>` under nvcc)
// enqueues the grid on its stream, where tests/cudaemu/kernel.cpp runs every block's
// threads as cooperative fibers: __syncthreads is a real barrier of the block, warp
// intrinsics meet their 32 lanes, built-in variables are per thread. Intrinsics are
// macros so that diagnostics name the file and line of the call. Included from
// cuda_runtime.h in C++ only.
#ifndef ZT_CUDAEMU_DEVICE_H
#define ZT_CUDAEMU_DEVICE_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"

// ---- qualifiers ---------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
// One instance per host thread, and every block runs all its threads on one host thread,
// one block at a time: the block's threads share it, as shared memory is shared.
#define __shared__ static thread_local
#define __constant__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

// ---- vector types and built-in variables -----------------------------------------------------
struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
#define ZT_EMU_VEC2(T, N, A) \
    struct __attribute__((aligned(A))) N { T x, y; }; \
    static inline N make_##N(T x, T y) { return N{x, y}; }
#define ZT_EMU_VEC4(T, N, A) \
    struct __attribute__((aligned(A))) N { T x, y, z, w; }; \
    static inline N make_##N(T x, T y, T z, T w) { return N{x, y, z, w}; }
ZT_EMU_VEC2(float, float2, 8)
ZT_EMU_VEC4(float, float4, 16)
ZT_EMU_VEC2(int, int2, 8)
ZT_EMU_VEC4(int, int4, 16)
ZT_EMU_VEC2(unsigned int, uint2, 8)
ZT_EMU_VEC4(unsigned int, uint4, 16)
ZT_EMU_VEC2(double, double2, 16)
ZT_EMU_VEC2(unsigned short, ushort2, 4)
ZT_EMU_VEC4(unsigned short, ushort4, 8)
#undef ZT_EMU_VEC2
#undef ZT_EMU_VEC4
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }

// Set by the block scheduler for the thread (fiber) that runs.
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
static constexpr int warpSize = 32;

// ---- intrinsics -----------------------------------------------------------------------------
namespace zt_emu {
enum warp_kind { W_SHFL = 1, W_SHFL_UP, W_SHFL_DOWN, W_SHFL_XOR, W_BALLOT, W_ANY, W_ALL, W_SYNCWARP, W_COLLECTIVE };
void k_syncthreads(const char *file, int line);
uint64_t k_warp(int kind, unsigned mask, uint64_t value, int arg, int width, const char *file, int line);
unsigned k_activemask();
// A warp collective with a payload (the WMMA calls, <mma.h>): all 32 lanes of the warp must
// reach the same call site (a lane that exited or waits elsewhere is a violation); then fn
// runs once, on the block's scheduler, with the 32 lanes' payloads in lane order. A string fn
// returns is reported as a violation.
typedef const char *(*warp_coll_fn)(void *const lanes[32]);
void k_warp_collective(const char *what, warp_coll_fn fn, void *payload, const char *file, int line);
[[noreturn]] void k_trap(const char *file, int line);
void *k_dynamic_smem();
long long k_clock64();

template <class T>
static inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    return b;
}
template <class T>
static inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof v);
    return v;
}
template <class T>
static inline T shfl_at(int kind, const char *file, int line, unsigned mask, T var, int arg, int width = 32) {
    return from_bits<T>(k_warp(kind, mask, to_bits(var), arg, width, file, line));
}

// Atomics run in the (uninstrumented) runtime: they record a read and a write of the word.
int atomic_add_i32(int *p, int v);
unsigned atomic_add_u32(unsigned *p, unsigned v);
unsigned long long atomic_add_u64(unsigned long long *p, unsigned long long v);
float atomic_add_f32(float *p, float v);
double atomic_add_f64(double *p, double v);
int atomic_max_i32(int *p, int v);
int atomic_min_i32(int *p, int v);
unsigned atomic_max_u32(unsigned *p, unsigned v);
unsigned atomic_min_u32(unsigned *p, unsigned v);
int atomic_exch_i32(int *p, int v);
unsigned atomic_exch_u32(unsigned *p, unsigned v);
int atomic_cas_i32(int *p, int cmp, int v);
unsigned atomic_cas_u32(unsigned *p, unsigned cmp, unsigned v);
unsigned long long atomic_cas_u64(unsigned long long *p, unsigned long long cmp, unsigned long long v);
void thread_fence();
}  // namespace zt_emu

#define __syncthreads() ::zt_emu::k_syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) ((void)::zt_emu::k_warp(::zt_emu::W_SYNCWARP, zt_emu_mask_or_all(__VA_ARGS__), 0, 0, 32, __FILE__, __LINE__))
static inline unsigned zt_emu_mask_or_all(unsigned m = 0xffffffffu) { return m; }
#define __shfl_sync(...) ::zt_emu::shfl_at(::zt_emu::W_SHFL, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ::zt_emu::shfl_at(::zt_emu::W_SHFL_UP, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) ::zt_emu::shfl_at(::zt_emu::W_SHFL_DOWN, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::zt_emu::shfl_at(::zt_emu::W_SHFL_XOR, __FILE__, __LINE__, __VA_ARGS__)
#define __ballot_sync(mask, pred) \
    ((unsigned)::zt_emu::k_warp(::zt_emu::W_BALLOT, (mask), (pred) ? 1u : 0u, 0, 32, __FILE__, __LINE__))
#define __any_sync(mask, pred) ((int)::zt_emu::k_warp(::zt_emu::W_ANY, (mask), (pred) ? 1u : 0u, 0, 32, __FILE__, __LINE__))
#define __all_sync(mask, pred) ((int)::zt_emu::k_warp(::zt_emu::W_ALL, (mask), (pred) ? 1u : 0u, 0, 32, __FILE__, __LINE__))
#define __activemask() ::zt_emu::k_activemask()
#define __trap() ::zt_emu::k_trap(__FILE__, __LINE__)
#define __threadfence() ::zt_emu::thread_fence()
#define __threadfence_block() ::zt_emu::thread_fence()
#define ZT_DYNAMIC_SHARED(type, name) type *name = (type *)::zt_emu::k_dynamic_smem()

static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline long long clock64() { return ::zt_emu::k_clock64(); }
template <class T>
static inline T __ldg(const T *p) { return *p; }
// The fast-math intrinsics evaluate with the accurate host functions (glibc declares
// __expf and __logf itself, as aliases of expf and logf).
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
// Round-to-nearest products and sums that are never contracted into an FMA (nvcc contracts a
// plain a * b + c): one rounding each, as IEEE operations on the host are. The host
// compiler's baseline x86-64 has no FMA to contract them into.
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }

static inline int atomicAdd(int *p, int v) { return ::zt_emu::atomic_add_i32(p, v); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return ::zt_emu::atomic_add_u32(p, v); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return ::zt_emu::atomic_add_u64(p, v);
}
static inline float atomicAdd(float *p, float v) { return ::zt_emu::atomic_add_f32(p, v); }
static inline double atomicAdd(double *p, double v) { return ::zt_emu::atomic_add_f64(p, v); }
static inline int atomicSub(int *p, int v) { return ::zt_emu::atomic_add_i32(p, -v); }
static inline unsigned atomicSub(unsigned *p, unsigned v) { return ::zt_emu::atomic_add_u32(p, 0u - v); }
static inline int atomicMax(int *p, int v) { return ::zt_emu::atomic_max_i32(p, v); }
static inline int atomicMin(int *p, int v) { return ::zt_emu::atomic_min_i32(p, v); }
static inline unsigned atomicMax(unsigned *p, unsigned v) { return ::zt_emu::atomic_max_u32(p, v); }
static inline unsigned atomicMin(unsigned *p, unsigned v) { return ::zt_emu::atomic_min_u32(p, v); }
static inline int atomicExch(int *p, int v) { return ::zt_emu::atomic_exch_i32(p, v); }
static inline unsigned atomicExch(unsigned *p, unsigned v) { return ::zt_emu::atomic_exch_u32(p, v); }
static inline int atomicCAS(int *p, int c, int v) { return ::zt_emu::atomic_cas_i32(p, c, v); }
static inline unsigned atomicCAS(unsigned *p, unsigned c, unsigned v) { return ::zt_emu::atomic_cas_u32(p, c, v); }
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long c, unsigned long long v) {
    return ::zt_emu::atomic_cas_u64(p, c, v);
}

// ---- kernel launch ---------------------------------------------------------------------------
namespace zt_emu {
// Enqueue a grid: validates the configuration as the driver does (the error becomes the
// calling thread's last error, cudaGetLastError) and each pointer argument.
void launch_kernel(const char *name, const char *file, int line, const void *fn, dim3 grid, dim3 block,
                   size_t smem, cudaStream_t stream, std::function<void()> body, const void *const *ptr_args,
                   const int *ptr_index, int nptr);

template <class T>
static inline void note_ptr(const void **ptrs, int *idx, int &n, int i, const T &v) {
    if constexpr (std::is_pointer<T>::value) {
        if (n < 32) {
            ptrs[n] = (const void *)v;
            idx[n++] = i;
        }
    }
}

template <class... P>
struct launcher {
    void (*fn)(P...);
    const char *name, *file;
    int line;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    // Kernel arguments are copied at the launch, as CUDA does.
    void operator()(P... args) const {
        const void *ptrs[32];
        int idx[32], n = 0, i = 0;
        (note_ptr(ptrs, idx, n, i++, args), ...);
        auto f = fn;
        std::tuple<typename std::decay<P>::type...> a(args...);
        launch_kernel(name, file, line, (const void *)fn, grid, block, smem, stream,
                      [f, a]() { std::apply(f, a); }, ptrs, idx, n);
    }
};
template <class... P>
static inline launcher<P...> launcher_for(void (*fn)(P...), const char *name, dim3 grid, dim3 block, size_t smem,
                                          cudaStream_t stream, const char *file, int line) {
    return launcher<P...>{fn, name, file, line, grid, block, smem, stream};
}
}  // namespace zt_emu

// kernel<<<grid, block, smem, stream>>>(args) is written ZT_LAUNCH(kernel, grid, block, smem, stream)(args).
#define ZT_LAUNCH(kernel, grid, block, smem, stream) \
    ::zt_emu::launcher_for(kernel, #kernel, (grid), (block), (smem), (stream), __FILE__, __LINE__)
#endif
