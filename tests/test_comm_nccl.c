// NCCL process-group tests on device buffers: every collective against values computed
// on the host, at a world of 1 without MPI and (--mpi, under mpirun with one rank per
// GPU) at any world. --deadline: a collective held back on its stream past a 1 s
// deadline must abort the process with code 3 and the deadline report. --watch: the
// same collective, but the host blocks in cudaStreamSynchronize inside a watched
// region (zt_comm_watch_begin): the watchdog thread must report the host wait and
// abort (ncclCommAbort from the watchdog thread while the main thread is blocked).
// Without a CUDA device: "SKIPPED: no CUDA device", exit 77.
// UNVERIFIED: compiled only; no GPU was available when this was written.
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/comm.h"
#include "runtime/comm_nccl.h"
#include "runtime/common.h"
#include "tests/test_util.h"

#if !defined(ZT_NCCL_NO_MPI) || !ZT_NCCL_NO_MPI
#define HAVE_MPI 1
#else
#define HAVE_MPI 0
#endif

static zt_comm *C;
static zt_comm_info I;

#define MUST(x)                                                                                              \
    do {                                                                                                     \
        if ((x) < 0) {                                                                                       \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s\n", I.rank, __FILE__, __LINE__, #x, zt_errmsg()); \
            exit(2);                                                                                         \
        }                                                                                                    \
    } while (0)
#define CU(x)                                                                                                   \
    do {                                                                                                        \
        cudaError_t e_ = (x);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", I.rank, __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                                            \
        }                                                                                                       \
    } while (0)

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

// ---- device buffers --------------------------------------------------------------------
static void *dalloc(size_t bytes) {
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
// cudaMemcpy from pageable memory may return before the DMA lands, and the comm's
// streams are non-blocking (they do not wait for the legacy stream): synchronise.
static void up(void *d, const void *h, size_t bytes) {
    CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize());
}
static void down(void *h, const void *d, size_t bytes) { CU(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost)); }

// Small integers: sums over ranks stay exact in f32 and bf16 (|sum| <= 11 W).
static double val(int r, size_t i) { return (double)((int)((r * 31 + i * 17) % 23) - 11); }
// Exact for values with at most 8 significant bits (the small integers above).
static uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// ---- tests -------------------------------------------------------------------------------
static void test_info(int use_mpi) {
    CHECK(strcmp(zt_comm_backend_name(C), "nccl") == 0, "backend %s", zt_comm_backend_name(C));
    CHECK(I.world >= 1 && I.rank >= 0 && I.rank < I.world, "rank %d world %d", I.rank, I.world);
    CHECK(I.local_rank >= 0 && I.local_rank < I.local_world, "local %d/%d", I.local_rank, I.local_world);
    CHECK(I.node >= 0 && I.node < I.nnodes, "node %d/%d", I.node, I.nnodes);
    if (!use_mpi) CHECK(I.world == 1 && I.nnodes == 1 && I.local_world == 1, "no MPI but world %d", I.world);
    int dev = zt_comm_nccl_device(C), cur = -1;
    CU(cudaGetDevice(&cur));
    CHECK(dev >= 0 && dev == cur, "comm device %d, current device %d", dev, cur);
    CHECK(dev == I.local_rank, "device %d should be the node-local rank %d", dev, I.local_rank);
    void *sd = zt_comm_nccl_stream(C, ZT_CHAN_DATA), *sc = zt_comm_nccl_stream(C, ZT_CHAN_CTRL);
    CHECK(sd && sc && sd != sc, "streams data %p ctrl %p", sd, sc);
    CHECK(zt_comm_nccl_stream(C, 7) == NULL, "stream of channel 7 should be NULL");
    unsigned flags = 0;
    CU(cudaStreamGetFlags((cudaStream_t)sd, &flags));
    CHECK(flags & cudaStreamNonBlocking, "data stream flags %u", flags);
    // Everyone's rank and device, gathered: ranks in order, each GPU used once per node.
    int32_t mine[3] = {I.rank, I.node, dev};
    int32_t *d = dalloc(3 * 4), *all = dalloc((size_t)I.world * 3 * 4);
    up(d, mine, sizeof mine);
    MUST(zt_allgather(C, d, all, 3, ZT_DT_I32, "rank info"));
    int32_t *h = zt_xmalloc((size_t)I.world * 3 * 4);
    down(h, all, (size_t)I.world * 3 * 4);
    for (int r = 0; r < I.world; r++) {
        CHECK(h[3 * r] == r, "slot %d holds rank %d", r, h[3 * r]);
        for (int q = 0; q < r; q++)
            CHECK(!(h[3 * q + 1] == h[3 * r + 1] && h[3 * q + 2] == h[3 * r + 2]), "ranks %d and %d share GPU %d", q,
                  r, h[3 * r + 2]);
    }
    free(h);
    cudaFree(d), cudaFree(all);
}

static void test_allgather(void) {
    const size_t n = 7;  // odd on purpose
    size_t W = (size_t)I.world;
    float *sf = zt_xmalloc(n * 4), *rf = zt_xmalloc(W * n * 4);
    uint16_t *sb = zt_xmalloc(n * 2), *rb = zt_xmalloc(W * n * 2);
    int64_t *si = zt_xmalloc(n * 8), *ri = zt_xmalloc(W * n * 8);
    uint8_t *su = zt_xmalloc(n), *ru = zt_xmalloc(W * n);
    for (size_t i = 0; i < n; i++) {
        sf[i] = (float)(I.rank * 1000 + i);
        sb[i] = (uint16_t)(0x3f80 + I.rank * 16 + i);  // arbitrary bf16 bit patterns
        si[i] = (int64_t)I.rank << 40 | (int64_t)i;
        su[i] = (uint8_t)(I.rank * 7 + i);
    }
    void *dsf = dalloc(n * 4), *drf = dalloc(W * n * 4), *dsb = dalloc(n * 2), *drb = dalloc(W * n * 2);
    void *dsi = dalloc(n * 8), *dri = dalloc(W * n * 8), *dsu = dalloc(n), *dru = dalloc(W * n);
    up(dsf, sf, n * 4), up(dsb, sb, n * 2), up(dsi, si, n * 8), up(dsu, su, n);
    MUST(zt_allgather(C, dsf, drf, n, ZT_DT_F32, "ag f32"));
    MUST(zt_allgather(C, dsb, drb, n, ZT_DT_BF16, "ag bf16"));
    MUST(zt_allgather(C, dsi, dri, n, ZT_DT_I64, "ag i64"));
    MUST(zt_allgather(C, dsu, dru, n, ZT_DT_U8, "ag u8"));
    down(rf, drf, W * n * 4), down(rb, drb, W * n * 2), down(ri, dri, W * n * 8), down(ru, dru, W * n);
    int bad = 0;
    for (size_t r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) {
            bad += rf[r * n + i] != (float)(r * 1000 + i);
            bad += rb[r * n + i] != (uint16_t)(0x3f80 + r * 16 + i);
            bad += ri[r * n + i] != ((int64_t)r << 40 | (int64_t)i);
            bad += ru[r * n + i] != (uint8_t)(r * 7 + i);
        }
    CHECK(bad == 0, "allgather: %d wrong elements", bad);
    // In place: the shard already sits at its offset in the full buffer (the FSDP case).
    for (size_t i = 0; i < W * n; i++) rf[i] = -1;
    for (size_t i = 0; i < n; i++) rf[(size_t)I.rank * n + i] = (float)(I.rank * 1000 + i) + 0.5f;
    up(drf, rf, W * n * 4);
    MUST(zt_allgather(C, (float *)drf + (size_t)I.rank * n, drf, n, ZT_DT_F32, "ag in place"));
    down(rf, drf, W * n * 4);
    bad = 0;
    for (size_t r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) bad += rf[r * n + i] != (float)(r * 1000 + i) + 0.5f;
    CHECK(bad == 0, "allgather in place: %d wrong elements", bad);
    MUST(zt_allgather(C, NULL, NULL, 0, ZT_DT_F32, "ag empty"));
    free(sf), free(rf), free(sb), free(rb), free(si), free(ri), free(su), free(ru);
    cudaFree(dsf), cudaFree(drf), cudaFree(dsb), cudaFree(drb), cudaFree(dsi), cudaFree(dri), cudaFree(dsu),
        cudaFree(dru);
}

static void test_reduce_scatter(void) {
    const size_t n = 5;
    size_t W = (size_t)I.world;
    float *sf = zt_xmalloc(W * n * 4), rf[5], af[5], ef[5];
    double *sd = zt_xmalloc(W * n * 8), rd[5];
    int64_t *si = zt_xmalloc(W * n * 8), mi[5];
    uint16_t *sb = zt_xmalloc(W * n * 2), rb[5];
    for (size_t j = 0; j < W * n; j++) {
        sf[j] = (float)val(I.rank, j);
        sd[j] = val(I.rank, j) + 0.25;
        si[j] = (int64_t)val(I.rank, j) * 1000000007LL;
        sb[j] = f2bf((float)val(I.rank, j));
    }
    void *dsf = dalloc(W * n * 4), *dsd = dalloc(W * n * 8), *dsi = dalloc(W * n * 8), *dsb = dalloc(W * n * 2);
    void *drf = dalloc(n * 4), *daf = dalloc(n * 4), *drd = dalloc(n * 8), *dmi = dalloc(n * 8), *drb = dalloc(n * 2);
    up(dsf, sf, W * n * 4), up(dsd, sd, W * n * 8), up(dsi, si, W * n * 8), up(dsb, sb, W * n * 2);
    MUST(zt_reduce_scatter(C, dsf, drf, n, ZT_DT_F32, ZT_RED_SUM, "rs f32 sum"));
    MUST(zt_reduce_scatter(C, dsf, daf, n, ZT_DT_F32, ZT_RED_AVG, "rs f32 avg"));
    MUST(zt_reduce_scatter(C, dsd, drd, n, ZT_DT_F64, ZT_RED_SUM, "rs f64 sum"));
    MUST(zt_reduce_scatter(C, dsi, dmi, n, ZT_DT_I64, ZT_RED_MAX, "rs i64 max"));
    MUST(zt_reduce_scatter(C, dsb, drb, n, ZT_DT_BF16, ZT_RED_SUM, "rs bf16 sum"));
    down(rf, drf, n * 4), down(af, daf, n * 4), down(rd, drd, n * 8), down(mi, dmi, n * 8), down(rb, drb, n * 2);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = (size_t)I.rank * n + i;
        double s = 0, mx = -1e300;
        for (int r = 0; r < I.world; r++) {
            s += val(r, j);
            if (val(r, j) > mx) mx = val(r, j);
        }
        ef[i] = (float)s;
        bad += rf[i] != ef[i];
        bad += rd[i] != s + 0.25 * I.world;
        bad += mi[i] != (int64_t)mx * 1000000007LL;
        bad += bf2f(rb[i]) != (float)s;
        af[i] *= (float)I.world;  // compare avg * world against the sum
    }
    CHECK(bad == 0, "reduce_scatter: %d wrong elements", bad);
    CHECK_CLOSE("reduce_scatter f32 avg", af, ef, (int64_t)n, 1e-6);
    free(sf), free(sd), free(si), free(sb);
    cudaFree(dsf), cudaFree(dsd), cudaFree(dsi), cudaFree(dsb), cudaFree(drf), cudaFree(daf), cudaFree(drd),
        cudaFree(dmi), cudaFree(drb);
}

static void test_allreduce(void) {
    enum { N = 13 };
    float f[N], fs[N], fmn[N], fmx[N];
    int32_t i32[N], i32s[N];
    int64_t i64[N], i64mn[N];
    uint8_t u8[N], u8mx[N];
    double d[N], davg[N];
    for (int i = 0; i < N; i++) {
        f[i] = (float)val(I.rank, (size_t)i);
        i32[i] = (int32_t)val(I.rank, (size_t)i) * 1000;
        i64[i] = (int64_t)val(I.rank, (size_t)i) << 33;
        u8[i] = (uint8_t)(val(I.rank, (size_t)i) + 11);
        d[i] = val(I.rank, (size_t)i) * 0.5;
    }
    float *df = dalloc(sizeof f), *dfs = dalloc(sizeof f), *dfmn = dalloc(sizeof f), *dfmx = dalloc(sizeof f);
    int32_t *di32 = dalloc(sizeof i32);
    int64_t *di64 = dalloc(sizeof i64), *di64mn = dalloc(sizeof i64);
    uint8_t *du8 = dalloc(sizeof u8), *du8mx = dalloc(sizeof u8);
    double *dd = dalloc(sizeof d);
    up(df, f, sizeof f), up(di32, i32, sizeof i32), up(di64, i64, sizeof i64), up(du8, u8, sizeof u8),
        up(dd, d, sizeof d);
    MUST(zt_allreduce(C, df, dfs, N, ZT_DT_F32, ZT_RED_SUM, "ar f32 sum"));
    MUST(zt_allreduce(C, df, dfmn, N, ZT_DT_F32, ZT_RED_MIN, "ar f32 min"));
    MUST(zt_allreduce(C, df, dfmx, N, ZT_DT_F32, ZT_RED_MAX, "ar f32 max"));
    MUST(zt_allreduce(C, di32, di32, N, ZT_DT_I32, ZT_RED_SUM, "ar i32 sum in place"));
    MUST(zt_allreduce(C, di64, di64mn, N, ZT_DT_I64, ZT_RED_MIN, "ar i64 min"));
    MUST(zt_allreduce(C, du8, du8mx, N, ZT_DT_U8, ZT_RED_MAX, "ar u8 max"));
    MUST(zt_allreduce(C, dd, dd, N, ZT_DT_F64, ZT_RED_AVG, "ar f64 avg in place"));
    down(fs, dfs, sizeof fs), down(fmn, dfmn, sizeof fmn), down(fmx, dfmx, sizeof fmx), down(i32s, di32, sizeof i32s),
        down(i64mn, di64mn, sizeof i64mn), down(u8mx, du8mx, sizeof u8mx), down(davg, dd, sizeof davg);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double s = 0, mn = 1e300, mx = -1e300;
        for (int r = 0; r < I.world; r++) {
            double v = val(r, (size_t)i);
            s += v;
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
        bad += fs[i] != (float)s;
        bad += fmn[i] != (float)mn;
        bad += fmx[i] != (float)mx;
        bad += i32s[i] != (int32_t)s * 1000;
        bad += i64mn[i] != (int64_t)mn * ((int64_t)1 << 33);
        bad += u8mx[i] != (uint8_t)(mx + 11);
        bad += fabs(davg[i] - s * 0.5 / I.world) > 1e-12;
    }
    CHECK(bad == 0, "allreduce: %d wrong elements", bad);
    cudaFree(df), cudaFree(dfs), cudaFree(dfmn), cudaFree(dfmx), cudaFree(di32), cudaFree(di64), cudaFree(di64mn),
        cudaFree(du8), cudaFree(du8mx), cudaFree(dd);
}

static void test_broadcast(void) {
    enum { N = 9 };
    float *df = dalloc(N * 4);
    uint8_t *du = dalloc(N);
    for (int root = 0; root < I.world; root++) {
        float f[N];
        uint8_t u[N];
        for (int i = 0; i < N; i++) {
            f[i] = (float)(I.rank * 100 + i);  // every rank has its own values; root's must win
            u[i] = (uint8_t)(I.rank * 10 + i);
        }
        up(df, f, sizeof f), up(du, u, sizeof u);
        MUST(zt_broadcast(C, df, N, ZT_DT_F32, root, "bcast f32"));
        MUST(zt_broadcast(C, du, N, ZT_DT_U8, root, "bcast u8"));
        down(f, df, sizeof f), down(u, du, sizeof u);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += f[i] != (float)(root * 100 + i) || u[i] != (uint8_t)(root * 10 + i);
        CHECK(bad == 0, "broadcast from root %d: %d wrong elements", root, bad);
    }
    cudaFree(df), cudaFree(du);
}

static void test_barrier(void) {
    for (int k = 0; k < 3; k++) {
        if (I.rank == k % I.world) sleep_s(0.05);  // a late rank: the others wait for it
        MUST(zt_barrier(C, "barrier"));
    }
    CHECK(1, "barriers returned");
}

// Several collectives outstanding on both channels at once, completed in any order.
static void test_async(void) {
    enum { K = 6, RS = 3, N = 1000 };
    size_t W = (size_t)I.world;
    float *hs = zt_xmalloc(K * N * 4), *hr = zt_xmalloc(W * N * 4), *hg = zt_xmalloc(W * N * 4);
    float *ds[K], *dr[K], *dg[RS], *dq[RS];
    zt_req *ag[K], *rs[RS];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) hs[k * N + i] = (float)(k * 100000 + I.rank * 1000 + i);
        ds[k] = dalloc(N * 4), dr[k] = dalloc(W * N * 4);
        up(ds[k], hs + k * N, N * 4);
    }
    for (int k = 0; k < RS; k++) {
        for (size_t j = 0; j < W * N; j++) hg[j] = (float)val(I.rank + k, j);
        dg[k] = dalloc(W * N * 4), dq[k] = dalloc(N * 4);
        up(dg[k], hg, W * N * 4);
    }
    int32_t one = I.rank + 1, *dsum = dalloc(4);
    up(dsum, &one, 4);
    for (int k = 0; k < K; k++) {
        char label[32];
        snprintf(label, sizeof label, "async ag %d", k);
        ag[k] = zt_iallgather(C, ds[k], dr[k], N, ZT_DT_F32, label);
        if (!ag[k]) MUST(-1);
        if (k < RS) {
            snprintf(label, sizeof label, "async rs %d", k);
            rs[k] = zt_ireduce_scatter(C, dg[k], dq[k], N, ZT_DT_F32, ZT_RED_SUM, label);
            if (!rs[k]) MUST(-1);
        }
    }
    zt_req *ar = zt_iallreduce(C, dsum, dsum, 1, ZT_DT_I32, ZT_RED_SUM, "async ar");
    zt_req *bar = zt_ibarrier(C, "async barrier");
    if (!ar || !bar) MUST(-1);
    // Poll the newest all-gather to completion with zt_test, then wait in reverse order.
    int done = 0;
    double t0 = zt_now();
    while (!done && zt_now() - t0 < 60) {
        MUST(zt_test(C, ag[K - 1], &done));
        zt_comm_progress(C);
    }
    CHECK(done, "zt_test never saw the last all-gather complete");
    MUST(zt_wait(C, bar));
    MUST(zt_wait(C, ar));
    for (int k = RS - 1; k >= 0; k--) MUST(zt_wait(C, rs[k]));
    for (int k = K - 1; k >= 0; k--) MUST(zt_wait(C, ag[k]));
    int bad = 0;
    for (int k = 0; k < K; k++) {
        down(hr, dr[k], W * N * 4);
        for (size_t r = 0; r < W; r++)
            for (int i = 0; i < N; i++) bad += hr[r * N + i] != (float)(k * 100000 + r * 1000 + i);
    }
    for (int k = 0; k < RS; k++) {
        down(hr, dq[k], N * 4);
        for (int i = 0; i < N; i++) {
            size_t j = (size_t)I.rank * N + i;
            double s = 0;
            for (int r = 0; r < I.world; r++) s += val(r + k, j);
            bad += hr[i] != (float)s;
        }
    }
    int32_t sum = 0;
    down(&sum, dsum, 4);
    bad += sum != I.world * (I.world + 1) / 2;
    CHECK(bad == 0, "async: %d wrong elements", bad);
    for (int k = 0; k < K; k++) cudaFree(ds[k]), cudaFree(dr[k]);
    for (int k = 0; k < RS; k++) cudaFree(dg[k]), cudaFree(dq[k]);
    cudaFree(dsum);
    free(hs), free(hr), free(hg);
}

// Input produced on the comm's own data stream (as a producer that enqueues there, or
// waits on it, would) is ordered before the collective without a host synchronise.
static void test_stream_order(void) {
    enum { N = 4096 };
    size_t W = (size_t)I.world;
    cudaStream_t st = (cudaStream_t)zt_comm_nccl_stream(C, ZT_CHAN_DATA);
    float *h = NULL, *hr = zt_xmalloc(W * N * 4);
    CU(cudaMallocHost((void **)&h, N * 4));  // pinned: the async copy really is async
    for (int i = 0; i < N; i++) h[i] = (float)(I.rank * 7 + i);
    float *ds = dalloc(N * 4), *dr = dalloc(W * N * 4);
    CU(cudaMemsetAsync(dr, 0xff, W * N * 4, st));
    CU(cudaMemcpyAsync(ds, h, N * 4, cudaMemcpyHostToDevice, st));
    MUST(zt_allgather(C, ds, dr, N, ZT_DT_F32, "stream order"));
    down(hr, dr, W * N * 4);
    int bad = 0;
    for (size_t r = 0; r < W; r++)
        for (int i = 0; i < N; i++) bad += hr[r * N + i] != (float)(r * 7 + i);
    CHECK(bad == 0, "stream order: %d wrong elements", bad);
    cudaFreeHost(h), free(hr), cudaFree(ds), cudaFree(dr);
}

// Big enough that NCCL uses its real pipelines (several chunks per channel).
static void test_large(void) {
    size_t n = ((size_t)1 << 20) + 3, W = (size_t)I.world;
    uint16_t *sb = zt_xmalloc(n * 2), *rb = zt_xmalloc(W * n * 2);
    for (size_t i = 0; i < n; i++) sb[i] = (uint16_t)((I.rank * 40503u + i * 2654435761u) >> 7);
    void *dsb = dalloc(n * 2), *drb = dalloc(W * n * 2);
    up(dsb, sb, n * 2);
    MUST(zt_allgather(C, dsb, drb, n, ZT_DT_BF16, "large ag bf16"));
    down(rb, drb, W * n * 2);
    size_t bad = 0;
    for (size_t r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) bad += rb[r * n + i] != (uint16_t)((r * 40503u + i * 2654435761u) >> 7);
    CHECK(bad == 0, "large allgather bf16: %zu wrong elements", bad);
    free(sb), free(rb), cudaFree(dsb), cudaFree(drb);

    size_t m = ((size_t)1 << 20) + 1;
    float *sf = zt_xmalloc(W * m * 4), *rf = zt_xmalloc(m * 4);
    for (size_t j = 0; j < W * m; j++) sf[j] = (float)val(I.rank, j);
    void *dsf = dalloc(W * m * 4), *drf = dalloc(m * 4);
    up(dsf, sf, W * m * 4);
    MUST(zt_reduce_scatter(C, dsf, drf, m, ZT_DT_F32, ZT_RED_SUM, "large rs f32"));
    down(rf, drf, m * 4);
    bad = 0;
    for (size_t i = 0; i < m; i++) {
        size_t j = (size_t)I.rank * m + i;
        double s = 0;
        for (int r = 0; r < I.world; r++) s += val(r, j);
        bad += rf[i] != (float)s;
    }
    CHECK(bad == 0, "large reduce_scatter f32: %zu wrong elements", bad);
    free(sf), free(rf), cudaFree(dsf), cudaFree(drf);
}

static void test_errors(void) {
    float *d = dalloc(64 * 4 * (size_t)I.world);
    CHECK(!zt_ireduce_scatter(C, d, d, 4, ZT_DT_F32, ZT_RED_SUM, "rs overlap") && strstr(zt_errmsg(), "overlap"),
          "overlapping reduce_scatter: %s", zt_errmsg());
    CHECK(!zt_ibroadcast(C, d, 4, ZT_DT_F32, I.world, "bad root") && strstr(zt_errmsg(), "root"), "bad root: %s",
          zt_errmsg());
    CHECK(!zt_iallreduce(C, d, d, 4, ZT_DT_I32, ZT_RED_AVG, "int avg") && strstr(zt_errmsg(), "avg"), "int avg: %s",
          zt_errmsg());
    MUST(zt_barrier(C, "after refused calls"));  // refused calls left every rank in step
    cudaFree(d);
}

// The collective is queued behind a host function that sleeps past the deadline:
// the common layer must report it and the backend must abort the process (code 3).
static void CUDART_CB slow_host_fn(void *arg) { sleep_s(*(double *)arg); }

static int run_deadline(const char *run_dir) {
    zt_comm_opts o = zt_comm_opts_default();
    o.timeout_s = 1;
    o.first_timeout_s = 1;
    o.run_dir = run_dir;
    MUST(zt_comm_init_nccl_single(&C, -1, &o));
    zt_comm_get_info(C, &I);
    static double hold = 8;
    CU(cudaLaunchHostFunc((cudaStream_t)zt_comm_nccl_stream(C, ZT_CHAN_DATA), slow_host_fn, &hold));
    float *d = dalloc(16 * 4);
    MUST(zt_allgather(C, d, d, 16, ZT_DT_F32, "held back"));
    printf("the held-back collective completed; the deadline did not fire\n");
    return 0;  // the ctest wrapper treats exit 0 as failure
}

static int run_watch(const char *run_dir) {
    zt_comm_opts o = zt_comm_opts_default();
    o.timeout_s = 1;
    o.first_timeout_s = 1;
    o.run_dir = run_dir;
    MUST(zt_comm_init_nccl_single(&C, -1, &o));
    zt_comm_get_info(C, &I);
    static double hold = 8;
    cudaStream_t st = (cudaStream_t)zt_comm_nccl_stream(C, ZT_CHAN_DATA);
    CU(cudaLaunchHostFunc(st, slow_host_fn, &hold));
    float *d = dalloc(16 * 4);
    zt_req *r = zt_iallgather(C, d, d, 16, ZT_DT_F32, "held back");
    MUST(r ? 0 : -1);
    zt_comm_watch_begin(C, "cudaStreamSynchronize after step");
    CU(cudaStreamSynchronize(st));
    zt_comm_watch_end(C);
    printf("cudaStreamSynchronize returned; the watchdog did not fire\n");
    return 0;  // the ctest wrapper treats exit 0 as failure
}

// Finalize while a collective is still queued (a handle never waited for, a stream held by
// a 25 s host function): the backend must give the stream 10 s to drain and then abort the
// communicator instead of destroying it, so that finalize returns instead of blocking in
// ncclCommDestroy (which waits for queued work) for as long as the stream is stuck.
static int run_finalize_busy(const char *run_dir) {
    zt_comm_opts o = zt_comm_opts_default();
    o.run_dir = run_dir;
    MUST(zt_comm_init_nccl_single(&C, -1, &o));
    zt_comm_get_info(C, &I);
    static double hold = 25;
    cudaStream_t st = (cudaStream_t)zt_comm_nccl_stream(C, ZT_CHAN_DATA);
    float *d = dalloc(16 * 4);
    CU(cudaMemsetAsync(d, 0, 16 * 4, st));
    CU(cudaLaunchHostFunc(st, slow_host_fn, &hold));
    zt_req *r = zt_iallgather(C, d, d, 16, ZT_DT_F32, "never waited");
    MUST(r ? 0 : -1);
    const double t0 = zt_now();
    const int fin = zt_comm_finalize(C);
    const double dt = zt_now() - t0;
    printf("finalize returned %d after %.1f s (%s)\n", fin, dt, fin ? zt_errmsg() : "no error");
    return fin != 0 && dt >= 9.0 && dt < 20.0 ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *run_dir = NULL;
    int use_mpi = 0, count_devices = 0, deadline = 0, watch = 0, finalize_busy = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--run-dir") && i + 1 < argc)
            run_dir = argv[++i];
        else if (!strcmp(argv[i], "--mpi"))
            use_mpi = 1;
        else if (!strcmp(argv[i], "--finalize-busy"))
            finalize_busy = 1;
        else if (!strcmp(argv[i], "--count-devices"))
            count_devices = 1;
        else if (!strcmp(argv[i], "--deadline"))
            deadline = 1;
        else if (!strcmp(argv[i], "--watch"))
            watch = 1;
        else {
            fprintf(stderr, "usage: test_comm_nccl [--run-dir DIR] [--mpi] | --count-devices | --deadline | --watch | --finalize-busy\n");
            return 2;
        }
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev <= 0) {
        printf("SKIPPED: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    if (count_devices) {
        printf("%d\n", ndev);
        return 0;
    }
    if (deadline) return run_deadline(run_dir);
    if (watch) return run_watch(run_dir);
    if (finalize_busy) return run_finalize_busy(run_dir);
    zt_comm_opts o = zt_comm_opts_default();
    o.run_dir = run_dir;
    o.timeout_s = 60;  // a test that hangs should say so within a minute
    o.first_timeout_s = 120;
#if HAVE_MPI
    if (use_mpi) {
        int provided = 0;
        if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "MPI_Init_thread failed\n");
            return 2;
        }
    }
    MUST(zt_comm_init_nccl(&C, use_mpi ? MPI_COMM_WORLD : MPI_COMM_NULL, -1, &o));
#else
    if (use_mpi) {
        fprintf(stderr, "--mpi: this build has no MPI (ZT_NCCL_NO_MPI)\n");
        return 2;
    }
    MUST(zt_comm_init_nccl_single(&C, -1, &o));
#endif
    zt_comm_get_info(C, &I);
    double t0 = zt_now();
    // A barrier before the host has synchronised with anything: the backend's barrier word
    // must be ready for it through stream order alone (it is zeroed on the ctrl stream).
    MUST(zt_barrier(C, "first"));
    test_info(use_mpi);
    test_allgather();
    test_reduce_scatter();
    test_allreduce();
    test_broadcast();
    test_barrier();
    test_async();
    test_stream_order();
    test_large();
    test_errors();
    zt_comm_mark_warm(C);
    // The verdict of every rank, summed over the ctrl channel itself.
    int32_t *dfails = dalloc(4), fails = zt_test_failures, total = 0;
    up(dfails, &fails, 4);
    MUST(zt_allreduce(C, dfails, dfails, 1, ZT_DT_I32, ZT_RED_SUM, "verdict"));
    down(&total, dfails, 4);
    cudaFree(dfails);
    int fin = zt_comm_finalize(C);
    CHECK(fin == 0, "finalize: %s", zt_errmsg());
    if (I.rank == 0) printf("nccl world %d: %.2f s; ", I.world, zt_now() - t0);
#if HAVE_MPI
    if (use_mpi) MPI_Finalize();
#endif
    if (I.rank != 0) return zt_test_failures ? 1 : 0;
    if (total && !zt_test_failures) zt_test_failures = total;
    TEST_END();
}
