// NCCL process-group tests on device buffers: the checks every backend passes
// (tests/support/comm_suite.h: every collective against values computed on the host, async
// handles, refused calls) plus NCCL's own (device and streams, stream order), at a
// world of 1 without MPI and (--mpi, under mpirun with one rank per GPU) at any world. --deadline: a collective held back on its stream past a 1 s
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

#include "engine/comm.h"
#include "engine/comm_nccl.h"
#include "base/common.h"
#include "tests/support/comm_suite.h"
#include "tests/support/test_util.h"

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
static void dfree(void *d) { cudaFree(d); }
// The suite's buffers: device memory; NCCL reduces bf16.
static const zt_comm_suite_mem device_mem = {dalloc, dfree, up, down, 1};

// ---- tests -------------------------------------------------------------------------------
static void test_info(int use_mpi) {
    CHECK(strcmp(zt_comm_backend_name(C), "nccl") == 0, "backend %s", zt_comm_backend_name(C));
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
    zt_comm_suite_init(C, &device_mem);
    zt_comm_suite_info();
    test_info(use_mpi);
    zt_comm_suite_allgather();
    zt_comm_suite_reduce_scatter();
    zt_comm_suite_allreduce();
    zt_comm_suite_broadcast();
    zt_comm_suite_barrier();
    zt_comm_suite_async();
    test_stream_order();
    zt_comm_suite_large();
    zt_comm_suite_errors();
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
