// Self-test of cudaemu (the CPU execution of the CUDA model): kernels with barriers, shared
// memory, warp intrinsics and atomics give CUDA's results; the launch checks refuse what the
// driver refuses; and every class of error the emulator exists to catch is caught: each
// "bad" case runs in a child process (this binary with --case NAME) and must end with the
// expected exit status and diagnostic. Compiled as C++ by the host compiler, instrumented
// like the kernels (tests/cudaemu.cmake).
#include <cuda_runtime.h>
#include <math.h>
#include <mma.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#define ZT_DYNAMIC_SHARED_DEFINED
static int g_fail = 0, g_pass = 0;
#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (cond) {                                        \
            g_pass++;                                      \
        } else {                                           \
            g_fail++;                                      \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);    \
            printf(__VA_ARGS__);                           \
            printf("\n");                                  \
        }                                                  \
    } while (0)
#define CU(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

// ---- kernels --------------------------------------------------------------------------------------
__global__ void add_kernel(float *y, const float *a, const float *b, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = a[i] + b[i];
}
__global__ void fill_kernel(float *y, float v, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = v;
}
// Block tree reduction through static shared memory: needs a real barrier per level.
__global__ void block_sum_kernel(float *out, const float *x, int n) {
    __shared__ float sh[256];
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}
// Reverse a block through dynamic shared memory.
__global__ void reverse_kernel(int *y, const int *x) {
    ZT_DYNAMIC_SHARED(int, s);
    const int t = threadIdx.x, n = blockDim.x;
    s[t] = x[blockIdx.x * n + t];
    __syncthreads();
    y[blockIdx.x * n + t] = s[n - 1 - t];
}
// Warp intrinsics: out[8 per thread]
__global__ void warp_kernel(int *out) {
    const int lane = threadIdx.x & 31, t = threadIdx.x;
    int v = t * 3 + 1, s = v;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    out[8 * t + 0] = s;                                        // warp sum
    out[8 * t + 1] = __shfl_sync(0xffffffffu, v, 5);          // broadcast lane 5
    out[8 * t + 2] = __shfl_up_sync(0xffffffffu, v, 3);       // lanes < 3 keep theirs
    out[8 * t + 3] = __shfl_down_sync(0xffffffffu, v, 2, 8);  // within groups of 8
    out[8 * t + 4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    out[8 * t + 5] = __any_sync(0xffffffffu, lane == 7);
    out[8 * t + 6] = __all_sync(0xffffffffu, lane < 31);
    out[8 * t + 7] = __shfl_xor_sync(0xffffffffu, v, 4, 4);   // xor beyond the group: own value
}
__global__ void atomic_kernel(int *c, float *f) {
    atomicAdd(c, 1);
    atomicAdd(f, 0.5f);
    atomicMax(c + 1, (int)(blockIdx.x * blockDim.x + threadIdx.x));
}
// WMMA (<mma.h>): a [32 x K] bf16 (row-major) times B [K x 32] (b_col: B stored column-major,
// element (k, n) at b[n * K + k]; else row-major) plus C [32 x 32] fp32, by 4 warps, warp w the
// output tile (w / 2, w % 2); c_fill >= 0: C is filled with it instead of loaded (column-major).
// D is stored row-major to d and column-major to dt.
__global__ void wmma_kernel(float *d, float *dt, const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c,
                            int K, int b_col, float c_fill) {
    using namespace nvcuda;
    const int w = threadIdx.x / 32, tm = w / 2, tn = w % 2;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    if (c_fill >= 0.0f)
        wmma::fill_fragment(acc, c_fill);
    else
        wmma::load_matrix_sync(acc, c + tn * 16 * 32 + tm * 16, 32, wmma::mem_col_major);
    for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, a + tm * 16 * K + k0, K);
        if (b_col) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
            wmma::load_matrix_sync(fb, b + tn * 16 * K + k0, K);
            wmma::mma_sync(acc, fa, fb, acc);
        } else {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
            wmma::load_matrix_sync(fb, b + k0 * 32 + tn * 16, 32);
            wmma::mma_sync(acc, fa, fb, acc);
        }
    }
    wmma::store_matrix_sync(d + tm * 16 * 32 + tn * 16, acc, 32, wmma::mem_row_major);
    wmma::store_matrix_sync(dt + tn * 16 * 32 + tm * 16, acc, 32, wmma::mem_col_major);
}
// A warp writes a 16 x 16 bf16 tile to dynamic shared memory (each lane two rows' halves, not the
// elements its own fragment holds) and loads it as matrix_a: without the __syncwarp between, a
// lane's load reads what other lanes have not written yet (the 0xff poison: NaN).
__global__ void wmma_syncwarp_kernel(float *d, const __nv_bfloat16 *a, int sync) {
    using namespace nvcuda;
    ZT_DYNAMIC_SHARED(__nv_bfloat16, s);
    const int lane = threadIdx.x;
    for (int i = 0; i < 8; i++) s[(lane % 16) * 16 + (lane / 16) * 8 + i] = a[(lane % 16) * 16 + (lane / 16) * 8 + i];
    if (sync) __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(fa, s, 16);
    wmma::fill_fragment(fb, __float2bfloat16(0.0f));
    // the identity, written through the emulator's layout (element i of lane l: (31 - l) * 8 + i)
    for (int i = 0; i < fb.num_elements; i++) fb.x[i] = __float2bfloat16((float)(((31 - lane) * 8 + i) % 17 == 0));
    wmma::fill_fragment(acc, 0.0f);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

// ---- bad kernels ----
// WMMA misuse: lanes >= 16 exit before mma_sync (mode 0); the two half-warps load at different
// call sites (1); a pointer that is not 32-byte aligned (2); lanes passing different pointers (3).
__global__ void wmma_bad_kernel(float *d, const __nv_bfloat16 *a, int mode) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    const int lane = threadIdx.x;
    if (mode == 1 && lane < 16)
        wmma::load_matrix_sync(fa, a, 16);
    else
        wmma::load_matrix_sync(fa, mode == 2 ? a + 8 : mode == 3 ? a + 16 * (lane & 1) : a, 16);
    wmma::load_matrix_sync(fb, a, 16);
    if (mode == 0 && lane >= 16) return;
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}
__global__ void read_past_end_kernel(float *y, const float *x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + 1];  // one element past the row
}
__global__ void divergent_sync_kernel(float *y) {
    __shared__ float s[64];
    s[threadIdx.x] = (float)threadIdx.x;
    if (threadIdx.x < 32) __syncthreads();  // the barrier moved into a branch
    __syncthreads();
    y[threadIdx.x] = s[63 - threadIdx.x];
}
__global__ void early_exit_sync_kernel(float *y, int n) {
    if ((int)threadIdx.x >= n) return;
    __syncthreads();
    y[threadIdx.x] = 1.0f;
}
__global__ void shfl_exited_kernel(int *y) {
    if (threadIdx.x >= 16) return;
    y[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 16);
}
__global__ void trap_kernel(int *y) {
    if (threadIdx.x == 3) __trap();
    y[threadIdx.x] = 1;
}
__global__ void misaligned_kernel(float *y, const char *x) {
    *reinterpret_cast<float4 *>(y) = *reinterpret_cast<const float4 *>(x + 4);
}
__global__ void copy_kernel(float *y, const float *x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i];
}
__global__ void smem_kernel(float *y) {
    ZT_DYNAMIC_SHARED(float, s);
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    y[threadIdx.x] = s[threadIdx.x];
}

// __fmul_rn / __fadd_rn: one rounding each. a * b + c with a = b = 1 + 2^-12, c = -(1 + 2^-11):
// rounded product 1 + 2^-11 (the 2^-24 term is lost), so the sum is exactly 0; an FMA keeps it
// (2^-24). The kernel reads the operands from memory so nothing is folded at compile time.
__global__ void rn_kernel(float *y, const float *x) {
    y[0] = __fadd_rn(__fmul_rn(x[0], x[1]), x[2]);
    y[1] = __fmul_rn(x[0], x[1]);
}

static float *dev(int n) {
    void *p;
    CU(cudaMalloc(&p, (size_t)n * 4));
    return (float *)p;
}

// ---- good cases ---------------------------------------------------------------------------------------
static void test_basics() {
    const int n = 1000;
    float *a = dev(n), *b = dev(n), *y = dev(n), h[1000], g[1000];
    for (int i = 0; i < n; i++) h[i] = (float)i, g[i] = 0.5f * (float)i;
    CU(cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(b, g, sizeof g, cudaMemcpyHostToDevice));
    ZT_LAUNCH(add_kernel, 3, 128, 0, nullptr)(y, a, b, n);
    CU(cudaGetLastError());
    float r[1000];
    CU(cudaMemcpy(r, y, sizeof r, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += r[i] != 1.5f * (float)i;
    CHECK(bad == 0, "add: %d wrong elements", bad);

    float *part = dev(4);
    ZT_LAUNCH(block_sum_kernel, 4, 256, 0, nullptr)(part, a, n);
    float ps[4];
    CU(cudaMemcpy(ps, part, sizeof ps, cudaMemcpyDeviceToHost));
    double tot = ps[0] + ps[1] + ps[2] + ps[3];
    CHECK(tot == 999.0 * 1000 / 2, "block sums total %.1f, want %.1f", tot, 999.0 * 1000 / 2);

    // dynamic shared memory: 3 blocks of 512 ints
    int *xi, *yi, hx[1536], hy[1536];
    CU(cudaMalloc((void **)&xi, sizeof hx));
    CU(cudaMalloc((void **)&yi, sizeof hy));
    for (int i = 0; i < 1536; i++) hx[i] = i * 7;
    CU(cudaMemcpy(xi, hx, sizeof hx, cudaMemcpyHostToDevice));
    ZT_LAUNCH(reverse_kernel, 3, 512, 512 * sizeof(int), nullptr)(yi, xi);
    CU(cudaGetLastError());
    CU(cudaMemcpy(hy, yi, sizeof hy, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int bk = 0; bk < 3; bk++)
        for (int t = 0; t < 512; t++) bad += hy[bk * 512 + t] != hx[bk * 512 + 511 - t];
    CHECK(bad == 0, "dynamic shared memory reverse: %d wrong", bad);

    // warps
    int *w, hw[64 * 8];
    CU(cudaMalloc((void **)&w, sizeof hw));
    ZT_LAUNCH(warp_kernel, 1, 64, 0, nullptr)(w);
    CU(cudaMemcpy(hw, w, sizeof hw, cudaMemcpyDeviceToHost));
    bad = 0;
    for (int t = 0; t < 64; t++) {
        const int lane = t & 31, w0 = t - lane, v = t * 3 + 1;
        int sum = 0;
        for (int l = 0; l < 32; l++) sum += (w0 + l) * 3 + 1;
        unsigned ballot = 0;
        for (int l = 0; l < 32; l++) ballot |= (l % 3 == 0 ? 1u : 0u) << l;
        const int want[8] = {sum,
                             (w0 + 5) * 3 + 1,
                             lane >= 3 ? (t - 3) * 3 + 1 : v,
                             (lane % 8) + 2 < 8 ? (t + 2) * 3 + 1 : v,
                             (int)ballot,
                             1,
                             0,
                             // xor may read an earlier group, never a later one
                             (lane ^ 4) < (lane & ~3) + 4 ? (w0 + (lane ^ 4)) * 3 + 1 : v};
        for (int k = 0; k < 8; k++)
            if (hw[8 * t + k] != want[k]) {
                if (bad++ < 5) printf("  warp t=%d k=%d got %d want %d\n", t, k, hw[8 * t + k], want[k]);
            }
    }
    CHECK(bad == 0, "warp intrinsics: %d wrong", bad);

    int *c;
    float *f;
    CU(cudaMalloc((void **)&c, 8));
    CU(cudaMalloc((void **)&f, 4));
    CU(cudaMemset(c, 0, 8));
    CU(cudaMemset(f, 0, 4));
    ZT_LAUNCH(atomic_kernel, 5, 96, 0, nullptr)(c, f);
    int hc[2];
    float hf;
    CU(cudaMemcpy(hc, c, 8, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(&hf, f, 4, cudaMemcpyDeviceToHost));
    CHECK(hc[0] == 480 && hc[1] == 479 && hf == 240.0f, "atomics: count %d max %d sum %g", hc[0], hc[1], hf);

    float *rx = dev(3), *ry = dev(2);
    const float hx3[3] = {1.0f + 0x1p-12f, 1.0f + 0x1p-12f, -(1.0f + 0x1p-11f)};
    CU(cudaMemcpy(rx, hx3, sizeof hx3, cudaMemcpyHostToDevice));
    ZT_LAUNCH(rn_kernel, 1, 1, 0, nullptr)(ry, rx);
    float hr[2];
    CU(cudaMemcpy(hr, ry, sizeof hr, cudaMemcpyDeviceToHost));
    CHECK(hr[0] == 0.0f && hr[1] == 1.0f + 0x1p-11f, "__fmul_rn/__fadd_rn: sum %a (want 0: no FMA), product %a", hr[0],
          hr[1]);
    cudaFree(rx), cudaFree(ry);
    cudaFree(a), cudaFree(b), cudaFree(y), cudaFree(part), cudaFree(xi), cudaFree(yi), cudaFree(w), cudaFree(c), cudaFree(f);
}

static void test_launch_checks() {
    float *y = dev(2048);
    ZT_LAUNCH(fill_kernel, 1, 1025, 0, nullptr)(y, 1.0f, 10);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "1025 threads per block must be refused");
    CHECK(cudaGetLastError() == cudaSuccess, "a launch error is cleared by cudaGetLastError");
    ZT_LAUNCH(fill_kernel, dim3(1, 65536), 32, 0, nullptr)(y, 1.0f, 10);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid.y 65536 must be refused");
    ZT_LAUNCH(fill_kernel, 0, 32, 0, nullptr)(y, 1.0f, 10);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "an empty grid must be refused");
    ZT_LAUNCH(fill_kernel, 1, dim3(32, 2, 65), 0, nullptr)(y, 1.0f, 10);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "block.z 65 must be refused");
    // dynamic shared memory above 48 KiB needs the attribute
    ZT_LAUNCH(smem_kernel, 1, 64, 64 << 10, nullptr)(y);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "64 KiB of dynamic shared memory without the attribute");
    CHECK(cudaFuncSetAttribute((const void *)smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 300000) ==
              cudaErrorInvalidValue,
          "more than 227 KiB cannot be allowed");
    (void)cudaGetLastError();
    CU(cudaFuncSetAttribute((const void *)smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10));
    ZT_LAUNCH(smem_kernel, 1, 64, 64 << 10, nullptr)(y);
    CHECK(cudaGetLastError() == cudaSuccess, "64 KiB with the attribute set");
    float h[64];
    CU(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 1.0f && h[63] == 1.0f, "smem kernel result %g %g", h[0], h[63]);
    cudaFree(y);
}

static void test_streams() {
    const int n = 4096;
    float *a = dev(n), *b = dev(n);
    cudaStream_t s1, s2;
    CU(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t e, t0, t1;
    CU(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CU(cudaEventCreate(&t0));
    CU(cudaEventCreate(&t1));
    float hv[4096];
    for (int it = 0; it < 20; it++) {  // producer on s1, consumer on s2 ordered by an event
        CU(cudaEventRecord(t0, s1));
        ZT_LAUNCH(fill_kernel, 8, 128, 0, s1)(a, (float)it, n);
        CU(cudaEventRecord(e, s1));
        CU(cudaEventRecord(t1, s1));
        CU(cudaStreamWaitEvent(s2, e, 0));
        ZT_LAUNCH(copy_kernel, 8, 128, 0, s2)(b, a, n);
        CU(cudaMemcpyAsync(hv, b, sizeof hv, cudaMemcpyDeviceToHost, s2));  // pageable: returns when done
        int bad = 0;
        for (int i = 0; i < n; i++) bad += hv[i] != (float)it;
        CHECK(bad == 0, "iteration %d: %d stale elements", it, bad);
        // the next iteration's fill on s1 overwrites a: s1 must wait for s2's read
        CU(cudaEventRecord(e, s2));
        CU(cudaStreamWaitEvent(s1, e, 0));
    }
    CU(cudaStreamSynchronize(s1));
    float ms = -1;
    CU(cudaEventElapsedTime(&ms, t0, t1));
    CHECK(ms >= 0, "elapsed time %g ms", ms);
    CHECK(cudaEventElapsedTime(&ms, e, t1) == cudaErrorInvalidResourceHandle, "timing a DisableTiming event");
    (void)cudaGetLastError();
    CHECK(cudaEventQuery(e) == cudaSuccess, "query of a completed event");
    // pinned copies really are asynchronous and ordered by the stream
    float *hp;
    CU(cudaMallocHost((void **)&hp, n * 4));
    for (int i = 0; i < n; i++) hp[i] = (float)(i % 17);
    CU(cudaMemcpyAsync(a, hp, n * 4, cudaMemcpyHostToDevice, s1));
    ZT_LAUNCH(copy_kernel, 4, 256, 0, s1)(b, a, n);
    CU(cudaMemcpyAsync(hp, b, n * 4, cudaMemcpyDeviceToHost, s1));
    CU(cudaStreamSynchronize(s1));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += hp[i] != (float)(i % 17);
    CHECK(bad == 0, "pinned round trip: %d wrong", bad);
    // registration is by page: a second range on a shared page is refused (as on a GPU machine)
    char *heap = (char *)malloc(3 * 4096);
    char *pg = (char *)(((uintptr_t)heap + 4095) & ~(uintptr_t)4095);
    CU(cudaHostRegister(pg, 100, cudaHostRegisterDefault));
    CHECK(cudaHostRegister(pg + 200, 100, cudaHostRegisterDefault) == cudaErrorHostMemoryAlreadyRegistered,
          "two registrations on one page");
    (void)cudaGetLastError();
    CU(cudaHostUnregister(pg));
    free(heap);
    // the legacy stream orders blocking streams
    cudaStream_t sb;
    CU(cudaStreamCreate(&sb));
    ZT_LAUNCH(fill_kernel, 4, 256, 0, sb)(a, 3.0f, n);
    ZT_LAUNCH(copy_kernel, 4, 256, 0, nullptr)(b, a, n);  // waits for sb's fill implicitly
    CU(cudaMemcpy(hv, b, sizeof hv, cudaMemcpyDeviceToHost));
    CHECK(hv[0] == 3.0f && hv[n - 1] == 3.0f, "legacy stream after a blocking stream: %g", hv[0]);
    // stream-ordered allocation used on its own stream
    float *tmp;
    CU(cudaMallocAsync((void **)&tmp, n * 4, s1));
    ZT_LAUNCH(fill_kernel, 4, 256, 0, s1)(tmp, 2.0f, n);
    ZT_LAUNCH(copy_kernel, 4, 256, 0, s1)(a, tmp, n);
    CU(cudaFreeAsync(tmp, s1));
    CU(cudaStreamSynchronize(s1));
    CU(cudaMemcpy(hv, a, sizeof hv, cudaMemcpyDeviceToHost));
    CHECK(hv[7] == 2.0f, "stream-ordered allocation: %g", hv[7]);
    CU(cudaFreeHost(hp));
    cudaFree(a), cudaFree(b);
}

// WMMA: the product against the model's rounding computed on the host (products exact, each
// 16-term k-step plus the accumulator summed in double, rounded once to fp32), both B layouts,
// C loaded column-major or filled, D stored both ways; and the lanes' own loads.
static float bf_round(float f) { return __bfloat162float(__float2bfloat16(f)); }
static void test_wmma() {
    const int K = 48;
    float ha[32 * K], hb[K * 32], hc[32 * 32];
    __nv_bfloat16 ba[32 * K], bb[K * 32], bbc[32 * K];
    unsigned r = 12345;
    auto rnd = [&r]() { r = r * 1103515245u + 12345u; return ((float)((r >> 8) & 0xffff) / 65536.0f - 0.5f) * 4.0f; };
    for (int i = 0; i < 32 * K; i++) ha[i] = bf_round(rnd()), ba[i] = __float2bfloat16(ha[i]);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < 32; n++) {
            hb[k * 32 + n] = bf_round(rnd());
            bb[k * 32 + n] = __float2bfloat16(hb[k * 32 + n]);
            bbc[n * K + k] = bb[k * 32 + n];
        }
    for (int i = 0; i < 32 * 32; i++) hc[i] = rnd();  // hc[n * 32 + m]: C column-major
    void *da, *db, *dbc, *dc, *dd, *ddt;
    CU(cudaMalloc(&da, sizeof ba));
    CU(cudaMalloc(&db, sizeof bb));
    CU(cudaMalloc(&dbc, sizeof bbc));
    CU(cudaMalloc(&dc, sizeof hc));
    CU(cudaMalloc(&dd, sizeof hc));
    CU(cudaMalloc(&ddt, sizeof hc));
    CU(cudaMemcpy(da, ba, sizeof ba, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(db, bb, sizeof bb, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dbc, bbc, sizeof bbc, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dc, hc, sizeof hc, cudaMemcpyHostToDevice));
    for (int mode = 0; mode < 3; mode++) {  // 0: B row-major, C loaded; 1: B column-major; 2: C filled 0.25
        const int b_col = mode == 1;
        ZT_LAUNCH(wmma_kernel, 1, 128, 0, nullptr)((float *)dd, (float *)ddt, (const __nv_bfloat16 *)da,
                                                   (const __nv_bfloat16 *)(b_col ? dbc : db), (const float *)dc, K,
                                                   b_col, mode == 2 ? 0.25f : -1.0f);
        float hd[32 * 32], hdt[32 * 32];
        CU(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(hdt, ddt, sizeof hdt, cudaMemcpyDeviceToHost));
        int bad = 0, bad_t = 0;
        double maxrel = 0;
        for (int m = 0; m < 32; m++)
            for (int n = 0; n < 32; n++) {
                float acc = mode == 2 ? 0.25f : hc[n * 32 + m];
                double exact = acc;
                for (int k0 = 0; k0 < K; k0 += 16) {
                    double s = acc;
                    for (int k = k0; k < k0 + 16; k++) s += (double)ha[m * K + k] * hb[k * 32 + n];
                    acc = (float)s;
                }
                for (int k = 0; k < K; k++) exact += (double)ha[m * K + k] * hb[k * 32 + n];
                bad += hd[m * 32 + n] != acc;
                bad_t += hdt[n * 32 + m] != acc;
                const double e = fabs(hd[m * 32 + n] - exact) / (fabs(exact) + 1.0);
                if (e > maxrel) maxrel = e;
            }
        CHECK(bad == 0 && bad_t == 0, "wmma mode %d: %d (row-major) / %d (column-major) elements differ from the model",
              mode, bad, bad_t);
        CHECK(maxrel < 1e-6, "wmma mode %d: %.3g from the exact product", mode, maxrel);
    }
    // the lanes' own loads: with the __syncwarp the identity product returns the tile; without it
    // the lanes that load first read the 0xff poison of shared memory (NaN)
    for (int sync = 1; sync >= 0; sync--) {
        ZT_LAUNCH(wmma_syncwarp_kernel, 1, 32, 512, nullptr)((float *)dd, (const __nv_bfloat16 *)da, sync);
        float hd[256];
        CU(cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost));
        int nan = 0, bad = 0;
        for (int i = 0; i < 256; i++) nan += hd[i] != hd[i], bad += hd[i] != ha[i];
        if (sync)
            CHECK(bad == 0, "wmma after __syncwarp: %d elements differ", bad);
        else
            CHECK(nan > 0, "wmma without __syncwarp: no lane read an unwritten element");
    }
    cudaFree(da), cudaFree(db), cudaFree(dbc), cudaFree(dc), cudaFree(dd), cudaFree(ddt);
}

// ---- bad cases (each in a child process) -------------------------------------------------------------
static int bad_case(const char *name) {
    const int n = 256;
    float *x = dev(n), *y = dev(n);
    CU(cudaMemset(x, 0, n * 4));
    CU(cudaDeviceSynchronize());  // the memset ran on the legacy stream, which non-blocking streams do not wait for
    if (!strcmp(name, "oob")) {
        ZT_LAUNCH(read_past_end_kernel, 1, 256, 0, nullptr)(y, x, n);
        cudaError_t e = cudaDeviceSynchronize();
        printf("sync: %s\n", cudaGetErrorName(e));
        return e == cudaErrorIllegalAddress ? 10 : 0;
    }
    if (!strcmp(name, "divergent_sync")) ZT_LAUNCH(divergent_sync_kernel, 1, 64, 0, nullptr)(y);
    if (!strcmp(name, "early_exit_sync")) ZT_LAUNCH(early_exit_sync_kernel, 1, 64, 0, nullptr)(y, 40);
    if (!strcmp(name, "shfl_exited")) ZT_LAUNCH(shfl_exited_kernel, 1, 32, 0, nullptr)((int *)y);
    if (!strncmp(name, "wmma_", 5)) {
        const int mode = !strcmp(name, "wmma_divergent") ? 0 : !strcmp(name, "wmma_sites") ? 1
                       : !strcmp(name, "wmma_misaligned") ? 2 : 3;
        void *a;
        CU(cudaMalloc(&a, 2 * 1024));
        CU(cudaMemset(a, 0, 2 * 1024));
        CU(cudaDeviceSynchronize());
        ZT_LAUNCH(wmma_bad_kernel, 1, 32, 0, nullptr)(y, (const __nv_bfloat16 *)a, mode);
    }
    if (!strcmp(name, "trap")) {
        ZT_LAUNCH(trap_kernel, 1, 32, 0, nullptr)((int *)y);
        cudaError_t e = cudaDeviceSynchronize();
        return e == cudaErrorLaunchFailure && cudaMemset(y, 0, 4) == cudaErrorLaunchFailure ? 10 : 0;
    }
    if (!strcmp(name, "misaligned")) {
        ZT_LAUNCH(misaligned_kernel, 1, 1, 0, nullptr)(y, (const char *)x);
        return cudaDeviceSynchronize() == cudaErrorMisalignedAddress ? 10 : 0;
    }
    if (!strcmp(name, "uninit")) {
        float *u = dev(n);
        ZT_LAUNCH(copy_kernel, 1, 256, 0, nullptr)(y, u, n);
    }
    if (!strcmp(name, "host_ptr")) {
        static float host[256];
        ZT_LAUNCH(copy_kernel, 1, 256, 0, nullptr)(y, host, n);
    }
    if (!strcmp(name, "host_deref")) {
        volatile float v = y[3];  // this file is instrumented like the product's GPU host code
        (void)v;
    }
    if (!strcmp(name, "use_after_free")) {
        cudaFree(x);
        ZT_LAUNCH(copy_kernel, 1, 256, 0, nullptr)(y, x, n);
    }
    cudaStream_t s1, s2;
    CU(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    if (!strcmp(name, "race") || !strcmp(name, "race_ordered")) {
        ZT_LAUNCH(fill_kernel, 1, 256, 0, s1)(x, 1.0f, n);
        if (!strcmp(name, "race_ordered")) {
            cudaEvent_t e;
            CU(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            CU(cudaEventRecord(e, s1));
            CU(cudaStreamWaitEvent(s2, e, 0));
        }
        ZT_LAUNCH(copy_kernel, 1, 256, 0, s2)(y, x, n);
    }
    if (!strcmp(name, "race_legacy_nonblocking")) {
        ZT_LAUNCH(fill_kernel, 1, 256, 0, s1)(x, 1.0f, n);
        ZT_LAUNCH(copy_kernel, 1, 256, 0, nullptr)(y, x, n);  // the legacy stream does not wait for non-blocking streams
    }
    if (!strcmp(name, "race_mallocasync")) {
        float *t;
        CU(cudaMallocAsync((void **)&t, n * 4, s1));
        ZT_LAUNCH(fill_kernel, 1, 256, 0, s2)(t, 1.0f, n);
    }
    if (!strcmp(name, "pinned_in_flight")) {
        float *hp;
        CU(cudaMallocHost((void **)&hp, n * 4));
        CU(cudaMemcpyAsync(hp, x, n * 4, cudaMemcpyDeviceToHost, s1));
        printf("value %g\n", hp[0]);  // read before synchronising with s1
    }
    if (!strcmp(name, "pinned_in_flight_synced")) {
        float *hp;
        CU(cudaMallocHost((void **)&hp, n * 4));
        CU(cudaMemcpyAsync(hp, x, n * 4, cudaMemcpyDeviceToHost, s1));
        CU(cudaStreamSynchronize(s1));
        hp[0] += 1.0f;
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("case %s ended: %s\n", name, cudaGetErrorName(e));
    return e == cudaSuccess ? 0 : 1;
}

extern char **environ;
// Run this binary with --case NAME; the status and stderr come back.
static int run_case(const char *self, const char *name, std::string *err) {
    int fd[2];
    if (pipe(fd)) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    char *argv[] = {(char *)self, (char *)"--case", (char *)name, nullptr};
    pid_t pid;
    if (posix_spawn(&pid, self, &fa, nullptr, argv, environ)) return -1;
    close(fd[1]);
    char buf[4096];
    ssize_t k;
    while ((k = read(fd[0], buf, sizeof buf)) > 0) err->append(buf, (size_t)k);
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--case")) return bad_case(argv[2]);
    test_basics();
    test_launch_checks();
    test_streams();
    test_wmma();
    struct {
        const char *name;
        int status;
        const char *needle;
    } cases[] = {
        {"oob", 10, "0 bytes past the end of allocation"},
        {"divergent_sync", 86, "__syncthreads reached at different places"},
        {"early_exit_sync", 86, "have already exited"},
        {"shfl_exited", 86, "has exited"},
        {"wmma_divergent", 86, "must be called by all 32 lanes"},
        {"wmma_sites", 86, "the warp's lanes diverged"},
        {"wmma_misaligned", 86, "not 32-byte (256-bit) aligned"},
        {"wmma_args", 86, "must be the same in every lane"},
        {"trap", 10, "__trap()"},
        {"misaligned", 10, "misaligned address"},
        {"uninit", 86, "uninitialised device memory"},
        {"host_ptr", 86, "not device memory"},
        {"host_deref", 86, "device memory is not host-accessible"},
        {"use_after_free", 86, "not device memory"},
        {"race", 86, "unordered accesses"},
        {"race_ordered", 0, ""},
        {"race_legacy_nonblocking", 86, "unordered accesses"},
        {"race_mallocasync", 86, "stream-ordered lifetime"},
        {"pinned_in_flight", 86, "host access to page-locked memory"},
        {"pinned_in_flight_synced", 0, ""},
    };
    for (auto &c : cases) {
        std::string err;
        const int st = run_case("/proc/self/exe", c.name, &err);
        const bool ok = st == c.status && (!*c.needle || err.find(c.needle) != std::string::npos);
        CHECK(ok, "case %s: exit %d (want %d), stderr:\n%s", c.name, st, c.status, err.c_str());
        if (ok) printf("case %-26s exit %d as expected\n", c.name, st);
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
