// Host emulation of the CUDA op layer (kernels/cuda/zt_cuda.h), of the few CUDA
// runtime calls the GPU engine makes (tests/hostcuda/cuda_runtime_api.h) and of the
// NCCL comm queries (runtime/comm_nccl.h), so that runtime/fsdp_cuda.c and
// model/qwen3_cuda_layer.c run unchanged on the CPU over the MPI comm backend.
//
// Numerics follow the GPU layer's contract: bf16 storage rounded to nearest even,
// fp32 arithmetic — each op converts its bf16 inputs to fp32, runs the fp32 CPU
// reference op (kernels/cpu) and rounds its bf16 outputs. Attention saves lse as the
// GPU does and recomputes the probabilities in backward. "Device" allocations are
// host memory poisoned with 0xFF bytes (NaN in fp32 and bf16), so an engine that
// reads memory it never wrote produces NaN instead of a plausible number.
// Streams run synchronously: this checks the engine's host logic, not its event
// ordering (that needs a GPU: tests/gpu/test_fsdp_cuda.c).
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_runtime_api.h"
#include "kernels/cuda/zt_cuda.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "kernels/ops.h"
#include "runtime/comm.h"
#include "runtime/common.h"

// ---- the CUDA runtime calls --------------------------------------------------------------
static int g_events;  // live events (a leak check for tests)
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorUnknown; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    (void)flags;
    *s = malloc(1);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    free(s);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return (void)s, cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int f) { return (void)s, (void)e, (void)f, cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = malloc(1);
    g_events++;
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) { return (void)flags, cudaEventCreate(e); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { return (void)e, (void)s, cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (e) g_events--;
    free(e);
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) { return (void)a, (void)b, *ms = 0, cudaSuccess; }
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s) {
    (void)s;
    memset(p, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    (void)kind, (void)s;
    memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    return cudaMemcpyAsync(dst, src, bytes, kind, NULL);
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorUnknown;
}
cudaError_t cudaFreeHost(void *p) { return free(p), cudaSuccess; }
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned int flags) { return (void)p, (void)bytes, (void)flags, cudaSuccess; }
cudaError_t cudaHostUnregister(void *p) { return (void)p, cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *f, size_t *t) {
    *f = (size_t)1 << 34;
    *t = (size_t)1 << 35;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorUnknown"; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "host emulation error"; }
int zt_hostcuda_live_events(void) { return g_events; }

// ---- a stream-ordered comm: what NCCL is to the engine, on MPI -------------------------------
// NCCL runs a collective on the channel's stream: a kernel enqueued after it (the
// gradient accumulation after a reduce-scatter) sees its result. Here streams run at
// once, so the collective must complete when it is issued: start() makes the blocking
// MPI call. Every rank issues the same collectives in the same order (the engine's
// contract), so blocking at issue cannot deadlock. Two communicators, as NCCL's.
typedef struct { MPI_Comm comm[2]; int rank, world; } hc_self;

static MPI_Datatype hc_type(zt_dtype dt) {
    switch (dt) {
    case ZT_DT_F32: return MPI_FLOAT;
    case ZT_DT_F64: return MPI_DOUBLE;
    case ZT_DT_I64: return MPI_INT64_T;
    case ZT_DT_I32: return MPI_INT32_T;
    case ZT_DT_U8: return MPI_UINT8_T;
    case ZT_DT_BF16: return MPI_UINT16_T;  // moved, never reduced (comm.c refuses bf16 reductions here)
    default: return MPI_DATATYPE_NULL;
    }
}
static MPI_Op hc_op(zt_red r) { return r == ZT_RED_MIN ? MPI_MIN : r == ZT_RED_MAX ? MPI_MAX : MPI_SUM; }

static int hc_start(void *self_, const zt_coll *d, void **handle) {
    hc_self *s = self_;
    MPI_Comm comm = s->comm[d->chan == ZT_CHAN_DATA ? 0 : 1];
    MPI_Datatype t = hc_type(d->dt);
    const int n = (int)d->count;
    int rc = MPI_SUCCESS;
    *handle = (void *)1;
    switch (d->op) {
    case ZT_OP_ALLGATHER: {
        const size_t esz = zt_dtype_size(d->dt);
        const int in_place = (const char *)d->send == (const char *)d->recv + (size_t)s->rank * d->count * esz;
        rc = MPI_Allgather(in_place ? MPI_IN_PLACE : d->send, n, t, d->recv, n, t, comm);
        break;
    }
    case ZT_OP_REDUCE_SCATTER: rc = MPI_Reduce_scatter_block(d->send, d->recv, n, t, hc_op(d->red), comm); break;
    case ZT_OP_ALLREDUCE:
        rc = MPI_Allreduce(d->send == d->recv ? MPI_IN_PLACE : d->send, d->recv, n, t, hc_op(d->red), comm);
        break;
    case ZT_OP_BROADCAST: rc = MPI_Bcast(d->recv, n, t, d->root, comm); break;
    case ZT_OP_BARRIER: rc = MPI_Barrier(comm); break;
    }
    if (rc != MPI_SUCCESS) return zt_err("hostcuda comm: MPI call failed (%d)", rc);
    if (d->red == ZT_RED_AVG && d->op != ZT_OP_BARRIER && d->op != ZT_OP_ALLGATHER && d->op != ZT_OP_BROADCAST) {
        const int64_t m = n;
        if (d->dt == ZT_DT_F32)
            for (int64_t i = 0; i < m; i++) ((float *)d->recv)[i] /= (float)s->world;
        else if (d->dt == ZT_DT_F64)
            for (int64_t i = 0; i < m; i++) ((double *)d->recv)[i] /= (double)s->world;
    }
    return 0;
}
static int hc_test(void *self, const zt_coll *d, void *handle, int *done) { return (void)self, (void)d, (void)handle, *done = 1, 0; }
static void hc_abort(void *self, int code) { (void)self, MPI_Abort(MPI_COMM_WORLD, code), abort(); }
static void hc_destroy(void *self_) {
    hc_self *s = self_;
    MPI_Comm_free(&s->comm[0]);
    MPI_Comm_free(&s->comm[1]);
    free(s);
}
static const zt_comm_backend hc_backend = {"hostcuda-sync", hc_start, hc_test, hc_abort, hc_destroy, NULL};

int zt_hostcuda_comm_init(zt_comm **out, MPI_Comm base, const zt_comm_opts *opts) {
    hc_self *s = zt_xcalloc(1, sizeof *s);
    MPI_Comm_rank(base, &s->rank);
    MPI_Comm_size(base, &s->world);
    MPI_Comm_dup(base, &s->comm[0]);
    MPI_Comm_dup(base, &s->comm[1]);
    zt_comm_info info = {.rank = s->rank, .world = s->world, .local_rank = s->rank, .local_world = s->world,
                         .node = 0, .nnodes = 1};
    return zt_comm_create(out, &hc_backend, s, &info, opts);
}

// The NCCL comm's entry point, for a zerotrain built on this emulation
// (zerotrain_hostcuda): the stream-ordered MPI comm instead.
int zt_comm_init_nccl(zt_comm **out, MPI_Comm base, int device, const zt_comm_opts *opts) {
    (void)device;
    return zt_hostcuda_comm_init(out, base, opts);
}

// ---- the NCCL comm queries (any comm stands in for an NCCL one) ------------------------------
static char g_stream_tag[2];
void *zt_comm_nccl_stream(zt_comm *c, int chan) { return (void)c, (chan == 0 || chan == 1) ? &g_stream_tag[chan] : NULL; }
int zt_comm_nccl_device(const zt_comm *c) { return (void)c, 0; }

// ---- bf16 ----------------------------------------------------------------------------------
static zt_bf16 f2b(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (zt_bf16)(u >> 16);
}
static float b2f(zt_bf16 b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static float *tof(const zt_bf16 *x, int64_t n) {  // fresh fp32 copy
    float *y = zt_xmalloc((size_t)(n > 0 ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) y[i] = b2f(x[i]);
    return y;
}
static void tob(zt_bf16 *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = f2b(x[i]);
}
static float *zeros(int64_t n) { return zt_xcalloc((size_t)(n > 0 ? n : 1), 4); }

// ---- device, context, memory ------------------------------------------------------------------
struct zt_cuda_ctx { int unused; };
int zt_cuda_device_count(void) { return 1; }
void zt_cuda_device_describe(char *buf, size_t n) { snprintf(buf, n, "host emulation of the CUDA op layer"); }
zt_cuda_ctx *zt_cuda_ctx_create(void) { return zt_xcalloc(1, sizeof(zt_cuda_ctx)); }
void zt_cuda_ctx_destroy(zt_cuda_ctx *c) { free(c); }
void zt_cuda_ctx_reserve(zt_cuda_ctx *c, size_t bytes, void *stream) { (void)c, (void)bytes, (void)stream; }
void zt_cuda_ctx_set_xent_chunk_rows(zt_cuda_ctx *c, int64_t rows) { (void)c, (void)rows; }
void zt_cuda_ctx_plan_stats(const zt_cuda_ctx *c, int64_t *p, int64_t *h, int64_t *m) { (void)c, *p = *h = *m = 0; }
size_t zt_cuda_attention_scratch_bytes(int64_t S, int64_t H, int64_t Hkv, int64_t D) { return (void)S, (void)H, (void)Hkv, (void)D, 0; }
void zt_cuda_sync(void *stream, const char *what) { (void)stream, (void)what; }
void *zt_cuda_malloc(size_t bytes) {
    void *p = zt_xmalloc(bytes ? bytes : 1);
    memset(p, 0xff, bytes);  // NaN in fp32 and bf16: unwritten memory shows up
    return p;
}
void zt_cuda_free(void *p) { free(p); }
void zt_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void zt_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void zt_cuda_fill_nan(void *x, zt_cuda_dtype t, int64_t n, void *stream) {
    (void)stream;
    memset(x, 0xff, (size_t)n * (t == ZT_BF16 ? 2 : 4));
}
void zt_cuda_fill(float *x, float value, int64_t n, void *stream) {
    (void)stream;
    for (int64_t i = 0; i < n; i++) x[i] = value;
}
void zt_cuda_fill_uniform(void *x, zt_cuda_dtype t, int64_t n, float lo, float hi, uint64_t seed, void *stream) {
    (void)stream;
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = (seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
        h ^= h >> 31, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 29;
        const float u = lo + (hi - lo) * (float)((h >> 40) * (1.0 / 16777216.0));
        if (t == ZT_BF16) ((zt_bf16 *)x)[i] = f2b(u);
        else ((float *)x)[i] = u;
    }
}
void zt_cuda_f32_to_bf16(zt_bf16 *y, const float *x, int64_t n, void *stream) { (void)stream, tob(y, x, n); }
void zt_cuda_bf16_to_f32(float *y, const zt_bf16 *x, int64_t n, void *stream) {
    (void)stream;
    for (int64_t i = 0; i < n; i++) y[i] = b2f(x[i]);
}

// ---- products ----------------------------------------------------------------------------------
void zt_cuda_gemm(zt_cuda_ctx *c, void *stream, void *C, zt_cuda_dtype ctype, int64_t ldc, int64_t strideC,
                  const zt_bf16 *A, int transA, int64_t lda, int64_t strideA, const zt_bf16 *B, int transB,
                  int64_t ldb, int64_t strideB, int64_t M, int64_t N, int64_t K, int64_t batch, float alpha,
                  float beta) {
    zt_fatal("hostcuda: zt_cuda_gemm is not emulated (the engine and the layer do not call it)");
}
void zt_cuda_matmul_fwd(zt_cuda_ctx *c, void *stream, void *y, zt_cuda_dtype ytype, const zt_bf16 *x,
                        const zt_bf16 *w, int64_t M, int64_t K, int64_t N) {
    float *xf = tof(x, M * K), *wf = tof(w, N * K), *yf = zeros(M * N);
    zt_cpu_ops.matmul_fwd(yf, xf, wf, M, K, N);
    if (ytype == ZT_BF16) tob(y, yf, M * N);
    else memcpy(y, yf, (size_t)(M * N) * 4);
    free(xf), free(wf), free(yf);
}
void zt_cuda_matmul_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, void *dw, zt_cuda_dtype dwtype, const zt_bf16 *dy,
                        const zt_bf16 *x, const zt_bf16 *w, int64_t M, int64_t K, int64_t N, int accumulate_dx) {
    float *dyf = tof(dy, M * N), *xf = tof(x, M * K), *wf = tof(w, N * K);
    float *dxf = dx ? (accumulate_dx ? tof(dx, M * K) : zeros(M * K)) : NULL;
    float *dwf = !dw ? NULL : dwtype == ZT_F32 ? dw : tof(dw, N * K);
    zt_cpu_ops.matmul_bwd(dxf, dwf, dyf, xf, wf, M, K, N, accumulate_dx);
    if (dx) tob(dx, dxf, M * K);
    if (dw && dwtype == ZT_BF16) tob(dw, dwf, N * K), free(dwf);
    free(dyf), free(xf), free(wf), free(dxf);
}

// ---- normalisation, position, activation ------------------------------------------------------------
void zt_cuda_rmsnorm_fwd(void *stream, zt_bf16 *y, float *rstd, const zt_bf16 *x, const zt_bf16 *w, int64_t rows,
                         int64_t d, float eps) {
    float *xf = tof(x, rows * d), *wf = tof(w, d), *yf = zeros(rows * d);
    zt_cpu_ops.rmsnorm_fwd(yf, rstd, xf, wf, rows, d, eps);
    tob(y, yf, rows * d);
    free(xf), free(wf), free(yf);
}
void zt_cuda_rmsnorm_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, float *dw, const zt_bf16 *dy, const zt_bf16 *x,
                         const zt_bf16 *w, const float *rstd, int64_t rows, int64_t d) {
    float *dyf = tof(dy, rows * d), *xf = tof(x, rows * d), *wf = tof(w, d), *dxf = dx ? zeros(rows * d) : NULL;
    zt_cpu_ops.rmsnorm_bwd(dxf, dw, dyf, xf, wf, rstd, rows, d);
    if (dx) tob(dx, dxf, rows * d);
    free(dyf), free(xf), free(wf), free(dxf);
}
void zt_cuda_rope_table(void *stream, float *cos_t, float *sin_t, int64_t S, int64_t D, double theta) {
    (void)stream;
    zt_rope_table(cos_t, sin_t, S, D, theta);
}
static void rope(int bwd, zt_bf16 *x, const float *c, const float *s, int64_t B, int64_t S, int64_t nh, int64_t D) {
    const int64_t n = B * S * nh * D;
    float *xf = tof(x, n);
    (bwd ? zt_cpu_ops.rope_bwd : zt_cpu_ops.rope_fwd)(xf, c, s, B, S, nh, D);
    tob(x, xf, n);
    free(xf);
}
void zt_cuda_rope_fwd(void *st, zt_bf16 *x, const float *c, const float *s, int64_t B, int64_t S, int64_t nh, int64_t D) {
    (void)st, rope(0, x, c, s, B, S, nh, D);
}
void zt_cuda_rope_bwd(void *st, zt_bf16 *x, const float *c, const float *s, int64_t B, int64_t S, int64_t nh, int64_t D) {
    (void)st, rope(1, x, c, s, B, S, nh, D);
}
void zt_cuda_swiglu_fwd(void *stream, zt_bf16 *h, const zt_bf16 *g, const zt_bf16 *u, int64_t n) {
    float *gf = tof(g, n), *uf = tof(u, n), *hf = zeros(n);
    zt_cpu_ops.swiglu_fwd(hf, gf, uf, n);
    tob(h, hf, n);
    free(gf), free(uf), free(hf);
}
void zt_cuda_swiglu_bwd(void *stream, zt_bf16 *dg, zt_bf16 *du, const zt_bf16 *dh, const zt_bf16 *g, const zt_bf16 *u,
                        int64_t n) {
    float *gf = tof(g, n), *uf = tof(u, n), *dhf = tof(dh, n), *dgf = zeros(n), *duf = zeros(n);
    zt_cpu_ops.swiglu_bwd(dgf, duf, dhf, gf, uf, n);
    tob(dg, dgf, n), tob(du, duf, n);
    free(gf), free(uf), free(dhf), free(dgf), free(duf);
}

// ---- embedding ----------------------------------------------------------------------------------------
void zt_cuda_embedding_fwd(void *stream, zt_bf16 *x, const zt_bf16 *w, const uint32_t *tokens, int64_t N, int64_t d,
                           int64_t V) {
    for (int64_t i = 0; i < N; i++) {
        if (tokens[i] >= (uint64_t)V) zt_fatal("hostcuda: token %u at %lld >= V %lld", tokens[i], (long long)i, (long long)V);
        memcpy(x + i * d, w + (int64_t)tokens[i] * d, (size_t)d * 2);
    }
}
void zt_cuda_embedding_bwd(void *stream, float *dw, const zt_bf16 *dx, const uint32_t *tokens, int64_t N, int64_t d,
                           int64_t V) {
    float *dxf = tof(dx, N * d);
    zt_cpu_ops.embedding_bwd(dw, dxf, tokens, N, d);
    free(dxf);
}

// ---- attention: lse saved, probabilities recomputed in backward ---------------------------------------------
void zt_cuda_attention_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q, const zt_bf16 *k,
                           const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    float *qf = tof(q, B * S * H * D), *kf = tof(k, B * S * Hkv * D), *vf = tof(v, B * S * Hkv * D);
    float *of = zeros(B * S * H * D), *probs = zeros(B * H * S * S);
    zt_cpu_ops.attention_fwd(of, probs, qf, kf, vf, B, S, H, Hkv, D);
    tob(o, of, B * S * H * D);
    const double scale = 1.0 / sqrt((double)D);
    for (int64_t b = 0; b < B; b++)  // lse of the scaled causal scores, in double
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const float *qi = qf + ((b * S + i) * H + h) * D;
                double mx = -INFINITY, sum = 0;
                for (int pass = 0; pass < 2; pass++)
                    for (int64_t j = 0; j <= i; j++) {
                        const float *kj = kf + ((b * S + j) * Hkv + h / (H / Hkv)) * D;
                        double s = 0;
                        for (int64_t e = 0; e < D; e++) s += (double)qi[e] * kj[e];
                        s *= scale;
                        if (pass == 0) mx = s > mx ? s : mx;
                        else sum += exp(s - mx);
                    }
                lse[(b * H + h) * S + i] = (float)(mx + log(sum));
            }
    free(qf), free(kf), free(vf), free(of), free(probs);
}
void zt_cuda_attention_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, const zt_bf16 *dout,
                           const zt_bf16 *o, const float *lse, const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                           int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const int64_t nq = B * S * H * D, nk = B * S * Hkv * D;
    float *qf = tof(q, nq), *kf = tof(k, nk), *vf = tof(v, nk), *df = tof(dout, nq);
    float *of = zeros(nq), *probs = zeros(B * H * S * S), *dqf = zeros(nq), *dkf = zeros(nk), *dvf = zeros(nk);
    zt_cpu_ops.attention_fwd(of, probs, qf, kf, vf, B, S, H, Hkv, D);  // recompute P (the GPU uses lse)
    zt_cpu_ops.attention_bwd(dqf, dkf, dvf, df, probs, qf, kf, vf, B, S, H, Hkv, D);
    tob(dq, dqf, nq), tob(dk, dkf, nk), tob(dv, dvf, nk);
    free(qf), free(kf), free(vf), free(df), free(of), free(probs), free(dqf), free(dkf), free(dvf);
}

// ---- fused lm_head + cross-entropy ------------------------------------------------------------------------
void zt_cuda_lmhead_xent(zt_cuda_ctx *c, void *stream, double *loss_sum, zt_bf16 *dx, void *dw, zt_cuda_dtype dwtype,
                         const zt_bf16 *x, const zt_bf16 *w, const int32_t *targets, int64_t N, int64_t d, int64_t V,
                         float scale) {
    float *xf = tof(x, N * d), *wf = tof(w, V * d), *dxf = dx ? zeros(N * d) : NULL;
    float *dwf = !dw ? NULL : dwtype == ZT_F32 ? dw : tof(dw, V * d);
    *loss_sum = zt_cpu_ops.lmhead_xent(dxf, dwf, xf, wf, targets, N, d, V, scale);
    if (dx) tob(dx, dxf, N * d);
    if (dw && dwtype == ZT_BF16) tob(dw, dwf, V * d), free(dwf);
    free(xf), free(wf), free(dxf);
}

// ---- optimizer and reductions ---------------------------------------------------------------------------------
void zt_cuda_adamw(void *stream, float *p, zt_bf16 *p_bf16, const float *g, float *m, float *v, int64_t n, float lr,
                   float beta1, float beta2, float eps, float weight_decay, int64_t t) {
    zt_cpu_ops.adamw(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
    if (p_bf16) tob(p_bf16, p, n);
}
void zt_cuda_sumsq(zt_cuda_ctx *c, void *stream, double *out, const float *x, int64_t n) { *out = zt_cpu_ops.sumsq(x, n); }
void zt_cuda_scale(void *stream, void *x, zt_cuda_dtype t, float s, int64_t n) {
    if (t == ZT_F32) {
        zt_cpu_ops.scale(x, s, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) ((zt_bf16 *)x)[i] = f2b(b2f(((zt_bf16 *)x)[i]) * s);
}
void zt_cuda_add(void *stream, void *y, const void *a, const void *b, zt_cuda_dtype t, int64_t n) {
    if (t == ZT_F32) {
        zt_cpu_ops.add(y, a, b, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        ((zt_bf16 *)y)[i] = f2b(b2f(((const zt_bf16 *)a)[i]) + b2f(((const zt_bf16 *)b)[i]));
}

// ---- cuDNN: not emulated -----------------------------------------------------------------------------------------
int zt_cudnn_sdpa_built(void) { return 0; }
int zt_cudnn_sdpa_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q, const zt_bf16 *k,
                      const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    return zt_err("hostcuda: no cuDNN");
}
int zt_cudnn_sdpa_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, const zt_bf16 *dout,
                      const zt_bf16 *o, const float *lse, const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                      int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    return zt_err("hostcuda: no cuDNN");
}
void zt_cudnn_sdpa_stats(const zt_cuda_ctx *c, int64_t *graphs, int64_t *hits, int64_t *builds, int64_t *nondet) {
    (void)c, *graphs = *hits = *builds = *nondet = 0;
}
