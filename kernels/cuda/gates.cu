// Qwen3.5's element-wise pieces on the GPU, the formulas of model/qwen3_5.c: the full-attention
// layers' sigmoid output gate, Gated DeltaNet's beta = sigmoid(b) and decay
// g = -exp(A_log) softplus(a + dt_bias) (torch's softplus: threshold 20), the (1 + w) weight of
// Qwen3.5's RMSNorms, and a strided copy of column ranges (splitting q_proj's per-head query and
// gate rows, the conv output's q | k | v channels, and joining their gradients).
// defines: zt_cuda_sigmoid_gate_fwd, zt_cuda_sigmoid_gate_bwd, zt_cuda_delta_gates_fwd,
//          zt_cuda_delta_gates_bwd, zt_cuda_one_plus, zt_cuda_copy_cols
#include "kernels/cuda/cuda_internal.h"

static __device__ __forceinline__ float gt_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static __device__ __forceinline__ float gt_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
static __device__ __forceinline__ float gt_dsoftplus(float x) {
    if (x > 20.0f) return 1.0f;
    const float e = expf(x);
    return e / (e + 1.0f);
}

__global__ void sigmoid_gate_fwd_kernel(bf16 *__restrict__ y, const bf16 *__restrict__ att,
                                        const bf16 *__restrict__ gate, int64_t n) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = f2bf(bf2f(att[i]) * gt_sigmoid(bf2f(gate[i])));
}

__global__ void sigmoid_gate_bwd_kernel(bf16 *__restrict__ datt, bf16 *__restrict__ dgate, const bf16 *__restrict__ dy,
                                        const bf16 *__restrict__ att, const bf16 *__restrict__ gate, int64_t n) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float s = gt_sigmoid(bf2f(gate[i])), d = bf2f(dy[i]);
    datt[i] = f2bf(d * s);
    dgate[i] = f2bf(d * bf2f(att[i]) * s * (1.0f - s));
}

// beta, g, b, a [N, Hv] fp32; A_log, dt_bias [Hv] (the layer's bf16 parameters).
__global__ void delta_gates_fwd_kernel(float *__restrict__ beta, float *__restrict__ g, const float *__restrict__ b,
                                       const float *__restrict__ a, const bf16 *__restrict__ A_log,
                                       const bf16 *__restrict__ dt, int64_t N, int Hv) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= N * Hv) return;
    const int h = (int)(i % Hv);
    beta[i] = gt_sigmoid(b[i]);
    g[i] = -expf(bf2f(A_log[h])) * gt_softplus(a[i] + bf2f(dt[h]));
}

#define GATES_THREADS 256
// One block per value head h: da, db of its tokens, and dA_log[h] += sum_t dg g, ddt[h] += sum_t da
// (per-thread sums in token order, then a fixed tree: deterministic).
__global__ void delta_gates_bwd_kernel(bf16 *__restrict__ db, bf16 *__restrict__ da, float *__restrict__ dA_log,
                                       float *__restrict__ ddt, const float *__restrict__ dg,
                                       const float *__restrict__ dbeta, const float *__restrict__ a,
                                       const float *__restrict__ beta, const float *__restrict__ g,
                                       const bf16 *__restrict__ A_log, const bf16 *__restrict__ dt, int64_t N, int Hv) {
    const int h = blockIdx.x, tid = threadIdx.x;
    __shared__ float sA[GATES_THREADS], sdt[GATES_THREADS];
    const float nA = -expf(bf2f(A_log[h])), dth = bf2f(dt[h]);
    float accA = 0.0f, accdt = 0.0f;
    for (int64_t t = tid; t < N; t += GATES_THREADS) {
        const int64_t i = t * Hv + h;
        const float dgi = dg[i];
        accA += dgi * g[i];  // g = -exp(A_log) sp: dg/dA_log = g
        const float dai = dgi * nA * gt_dsoftplus(a[i] + dth);
        da[i] = f2bf(dai);
        accdt += dai;
        db[i] = f2bf(dbeta[i] * beta[i] * (1.0f - beta[i]));
    }
    sA[tid] = accA;
    sdt[tid] = accdt;
    __syncthreads();
    for (int s = GATES_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) sA[tid] += sA[tid + s], sdt[tid] += sdt[tid + s];
        __syncthreads();
    }
    if (tid == 0) dA_log[h] += sA[0], ddt[h] += sdt[0];
}

__global__ void one_plus_kernel(bf16 *__restrict__ y, const bf16 *__restrict__ w, int64_t n) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = f2bf(1.0f + bf2f(w[i]));
}

__global__ void copy_cols_kernel(bf16 *__restrict__ dst, int64_t ldd, const bf16 *__restrict__ src, int64_t lds,
                                 int64_t rows, int64_t cols) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    const int64_t r = i / cols, c = i % cols;
    dst[r * ldd + c] = src[r * lds + c];
}

extern "C" void zt_cuda_sigmoid_gate_fwd(void *stream, zt_bf16 *y, const zt_bf16 *att, const zt_bf16 *gate, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(sigmoid_gate_fwd_kernel, zt_blocks(n, 256), 256, 0, st)((bf16 *)y, (const bf16 *)att,
                                                                      (const bf16 *)gate, n);
    ZT_LAUNCHED("sigmoid_gate_fwd_kernel", st);
}

extern "C" void zt_cuda_sigmoid_gate_bwd(void *stream, zt_bf16 *datt, zt_bf16 *dgate, const zt_bf16 *dy,
                                         const zt_bf16 *att, const zt_bf16 *gate, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(sigmoid_gate_bwd_kernel, zt_blocks(n, 256), 256, 0, st)((bf16 *)datt, (bf16 *)dgate, (const bf16 *)dy,
                                                                      (const bf16 *)att, (const bf16 *)gate, n);
    ZT_LAUNCHED("sigmoid_gate_bwd_kernel", st);
}

extern "C" void zt_cuda_delta_gates_fwd(void *stream, float *beta, float *g, const float *b, const float *a,
                                        const zt_bf16 *A_log, const zt_bf16 *dt_bias, int64_t N, int64_t Hv) {
    ZT_REQUIRE(N > 0 && Hv > 0 && Hv < (1 << 30), "delta gates N=%lld Hv=%lld", (long long)N, (long long)Hv);
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(delta_gates_fwd_kernel, zt_blocks(N * Hv, 256), 256, 0, st)(beta, g, b, a, (const bf16 *)A_log,
                                                                          (const bf16 *)dt_bias, N, (int)Hv);
    ZT_LAUNCHED("delta_gates_fwd_kernel", st);
}

extern "C" void zt_cuda_delta_gates_bwd(void *stream, zt_bf16 *db, zt_bf16 *da, float *dA_log, float *ddt_bias,
                                        const float *dg, const float *dbeta, const float *a, const float *beta,
                                        const float *g, const zt_bf16 *A_log, const zt_bf16 *dt_bias, int64_t N,
                                        int64_t Hv) {
    ZT_REQUIRE(N > 0 && Hv > 0 && Hv < 65536, "delta gates N=%lld Hv=%lld", (long long)N, (long long)Hv);
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(delta_gates_bwd_kernel, (unsigned)Hv, GATES_THREADS, 0, st)(
        (bf16 *)db, (bf16 *)da, dA_log, ddt_bias, dg, dbeta, a, beta, g, (const bf16 *)A_log, (const bf16 *)dt_bias,
        N, (int)Hv);
    ZT_LAUNCHED("delta_gates_bwd_kernel", st);
}

extern "C" void zt_cuda_one_plus(void *stream, zt_bf16 *y, const zt_bf16 *w, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(one_plus_kernel, zt_blocks(n, 256), 256, 0, st)((bf16 *)y, (const bf16 *)w, n);
    ZT_LAUNCHED("one_plus_kernel", st);
}

extern "C" void zt_cuda_copy_cols(void *stream, zt_bf16 *dst, int64_t ldd, const zt_bf16 *src, int64_t lds,
                                  int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return;
    ZT_REQUIRE(cols <= ldd && cols <= lds, "copy_cols cols=%lld ldd=%lld lds=%lld", (long long)cols, (long long)ldd,
               (long long)lds);
    cudaStream_t st = zt_st(stream);
    ZT_LAUNCH(copy_cols_kernel, zt_blocks(rows * cols, 256), 256, 0, st)((bf16 *)dst, ldd, (const bf16 *)src, lds,
                                                                         rows, cols);
    ZT_LAUNCHED("copy_cols_kernel", st);
}
