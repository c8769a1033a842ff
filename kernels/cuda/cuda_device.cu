// CUDA backend plumbing: device queries, checked-call reporting, the op context
// (cuBLASLt handle, workspace, scratch arena), memory helpers.
// defines: zt_cuda_device_count, zt_cuda_device_describe, zt_cuda_die, zt_cuda_check_at,
//          zt_cublas_check_at, zt_cuda_launched_at, zt_cuda_sync, zt_cuda_ctx_*,
//          zt_cuda_malloc/free/memcpy
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"
#include "base/env.h"

extern "C" int zt_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

extern "C" void zt_cuda_device_describe(char *buf, size_t n) {
    int dev = 0;
    cudaDeviceProp p;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        snprintf(buf, n, "no CUDA device");
        return;
    }
    snprintf(buf, n, "%s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB", p.name, p.major, p.minor, p.multiProcessorCount,
             (double)p.totalGlobalMem / (1 << 30), p.l2CacheSize >> 20);
}

// ---- errors ------------------------------------------------------------------------------
extern "C" void zt_cuda_die(const char *what, const char *detail, const char *file, int line) {
    int dev = -1;
    cudaGetDevice(&dev);
    fprintf(stderr, "zerotrain: error: %s failed at %s:%d (device %d): %s\n", what, file, line, dev, detail);
    fprintf(stderr,
            "hint: an asynchronous kernel error is reported at a later call; rerun with ZT_CUDA_SYNC=1 to name "
            "the failing op, and with compute-sanitizer for a bad memory access\n");
    exit(ZT_EXIT_CUDA);
}

extern "C" void zt_cuda_check_at(cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return;
    char d[256];
    snprintf(d, sizeof d, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    zt_cuda_die(call, d, file, line);
}

extern "C" void zt_cublas_check_at(int status, const char *call, const char *file, int line) {
    const cublasStatus_t s = (cublasStatus_t)status;
    if (s == CUBLAS_STATUS_SUCCESS) return;
    char d[256];
    snprintf(d, sizeof d, "cuBLAS status %d (%s)", (int)s, cublasLtGetStatusString(s));
    zt_cuda_die(call, d, file, line);
}

static int g_sync_every_op = -1;
extern "C" int zt_cuda_sync_every_op(void) {
    if (g_sync_every_op < 0) g_sync_every_op = zt_env_on(ZT_ENV_CUDA_SYNC);
    return g_sync_every_op;
}

extern "C" void zt_cuda_launched_at(const char *kernel, cudaStream_t st, const char *file, int line) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && zt_cuda_sync_every_op()) e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) {
        char d[256];
        snprintf(d, sizeof d, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        char w[160];
        snprintf(w, sizeof w, "kernel %s", kernel);
        zt_cuda_die(w, d, file, line);
    }
}

extern "C" void zt_cuda_sync(void *stream, const char *what) {
    cudaError_t e = cudaStreamSynchronize(zt_st(stream));
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        char d[256];
        snprintf(d, sizeof d, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        zt_cuda_die(what, d, "zt_cuda_sync", 0);
    }
}

// ---- context ---------------------------------------------------------------------------------
// 32 MiB: what NVIDIA recommends for cuBLASLt on Hopper and later.
#define ZT_LT_WORKSPACE (32u << 20)

extern "C" zt_cuda_ctx *zt_cuda_ctx_create(void) {
    zt_cuda_ctx *c = (zt_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) zt_cuda_die("calloc(zt_cuda_ctx)", "out of host memory", __FILE__, __LINE__);
    ZT_CUDA_CHECK(cudaGetDevice(&c->device));
    ZT_CUBLAS_CHECK(cublasLtCreate(&c->lt));
    c->workspace_bytes = ZT_LT_WORKSPACE;
    ZT_CUDA_CHECK(cudaMalloc(&c->workspace, c->workspace_bytes));
    return c;
}

extern "C" void zt_cuda_ctx_destroy(zt_cuda_ctx *c) {
    if (!c) return;
    ZT_CUDA_CHECK(cudaDeviceSynchronize());
    zt_plans_destroy(c);
    zt_cudnn_ctx_release(c);
    if (c->scratch) ZT_CUDA_CHECK(cudaFree(c->scratch));
    ZT_CUDA_CHECK(cudaFree(c->workspace));
    ZT_CUBLAS_CHECK(cublasLtDestroy(c->lt));
    free(c);
}

extern "C" size_t zt_cuda_ctx_scratch_size(size_t bytes) {
    const size_t want = bytes + bytes / 8;  // some headroom against repeated growth
    return (want + 255) & ~(size_t)255;
}

extern "C" size_t zt_cuda_ctx_workspace_size(void) { return ZT_LT_WORKSPACE; }

extern "C" void zt_cuda_ctx_device_bytes(const zt_cuda_ctx *c, size_t *workspace, size_t *scratch) {
    if (workspace) *workspace = c->workspace_bytes;
    if (scratch) *scratch = c->scratch_bytes;
}

void *zt_ctx_scratch(zt_cuda_ctx *c, size_t bytes, cudaStream_t st) {
    if (bytes <= c->scratch_bytes) return c->scratch;
    const size_t want = zt_cuda_ctx_scratch_size(bytes);
    // Stream-ordered: the old area is released after the work already queued on
    // st, and the new one is usable by work queued after this point.
    if (c->scratch) ZT_CUDA_CHECK(cudaFreeAsync(c->scratch, st));
    ZT_CUDA_CHECK(cudaMallocAsync(&c->scratch, want, st));
    c->scratch_bytes = want;
    return c->scratch;
}

extern "C" void zt_cuda_ctx_reserve(zt_cuda_ctx *c, size_t bytes, void *stream) {
    zt_ctx_scratch(c, bytes, zt_st(stream));
}

extern "C" void zt_cuda_ctx_set_xent_chunk_rows(zt_cuda_ctx *c, int64_t rows) { c->xent_chunk_rows = rows > 0 ? rows : 0; }

extern "C" void zt_cuda_ctx_plan_stats(const zt_cuda_ctx *c, int64_t *plans, int64_t *hits, int64_t *misses) {
    if (plans) *plans = c->nplans;
    if (hits) *hits = c->plan_hits;
    if (misses) *misses = c->plan_misses;
}

// ---- memory -------------------------------------------------------------------------------------
// What zt_cuda_malloc was asked for (zt_cuda_malloc_bytes); allocations are made by the host thread
// that builds an engine or a test, never by two threads at once.
static int64_t g_malloc_bytes;

extern "C" int64_t zt_cuda_malloc_bytes(void) { return g_malloc_bytes; }

extern "C" void *zt_cuda_malloc(size_t bytes) {
    g_malloc_bytes += (int64_t)bytes;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        char d[256];
        snprintf(d, sizeof d, "%s while allocating %zu bytes (%.2f GiB)", cudaGetErrorString(e), bytes,
                 (double)bytes / (1 << 30));
        zt_cuda_die("cudaMalloc", d, __FILE__, __LINE__);
    }
    return p;
}
extern "C" void zt_cuda_free(void *p) {
    if (p) ZT_CUDA_CHECK(cudaFree(p));
}
extern "C" void zt_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes) {
    ZT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
extern "C" void zt_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes) {
    ZT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
