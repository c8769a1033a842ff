// NCCL backend of the process group: device buffers, one NCCL communicator and one
// non-blocking CUDA stream per channel (data, ctrl), a timing-free CUDA event recorded
// after every collective as its handle. Bootstrapped over MPI (rank 0's ncclUniqueIds
// broadcast with MPI_Bcast), or with no MPI at all for a world of 1. The common layer
// (comm.c) polls test() and enforces the deadline; its watchdog thread polls
// async_error() (ncclCommGetAsyncError) every period; abort() releases hung NCCL
// kernels with ncclCommAbort before taking the job down, from either thread.
// Ran on one GPU (an H200, world 1: test_comm_nccl, 2026-12-04); more than one GPU never ran: the
// multi-rank paths ran only on the CPU execution of CUDA (emu_comm_nccl_*; docs/cuda.md).
#define _GNU_SOURCE
#include "engine/comm_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cuda/zt_cuda_check.h"
#include "base/common.h"

#if !defined(ZT_NCCL_NO_MPI) || !ZT_NCCL_NO_MPI
#define ZT_NCCL_MPI 1
#include "engine/comm_mpi.h"  // the node layout, computed once for both process groups
#else
#define ZT_NCCL_MPI 0
#endif

#define NCHAN 2

typedef struct nccl_self {
    ncclComm_t comm[NCHAN];  // [ZT_CHAN_DATA], [ZT_CHAN_CTRL]; NULL once aborted
    cudaStream_t stream[NCHAN];
    int dead[NCHAN];         // aborted after an asynchronous error: no more collectives
    char dead_why[NCHAN][256];
    int *barrier_buf;        // one int on the device, always 0 (0 summed stays 0)
    cudaEvent_t *pool;       // finished events for reuse
    int npool, cap;
    int rank, world, device;
    zt_comm *owner;          // the zt_comm wrapping this, for zt_comm_nccl_stream
#if ZT_NCCL_MPI
    MPI_Comm base;           // a duplicate of the MPI comm it was made over (sub-groups split it); or NULL
#endif
    struct nccl_self *next;  // registry of live NCCL comms (comm.c keeps self private)
    // Against the comm's watchdog thread (async_error every period, abort on a
    // deadline or async error). comm[] and dead[] are written by the main thread
    // (test's error path) and by abort, each under mu; the watchdog reads them under
    // mu. The collective path (start/test) reads them without it: it is their only
    // other writer, and abort keeps it out with the in_call/aborting handshake.
    pthread_mutex_t mu;
    atomic_int in_call;   // the main thread is inside start/test
    atomic_int aborting;  // abort() has begun: start/test park instead of using comm[]
} nccl_self;

static nccl_self *g_selves;
static const char *chan_name[NCHAN] = {"data", "ctrl"};

// ---- error reporting: the call, file:line, rank, device and a hint -------------------
static const char *short_file(const char *f) {
    const char *p = strstr(f, "runtime/");
    return p ? p : f;
}

static const char *cuda_hint(cudaError_t e) {
    switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
        return "no usable GPU or driver: check nvidia-smi and CUDA_VISIBLE_DEVICES";
    case cudaErrorInvalidDevice: return "device index beyond the visible GPUs (CUDA_VISIBLE_DEVICES)";
    case cudaErrorMemoryAllocation: return "out of device memory";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
        return "an earlier kernel faulted (the error is sticky); rerun with ZT_CUDA_SYNC=1 or compute-sanitizer";
    case cudaErrorInvalidValue: return "collective buffers must be device memory of this rank's GPU";
    case cudaErrorInvalidResourceHandle: return "a stream or event of another device (cudaSetDevice changed?)";
    default: return "rerun with CUDA_LAUNCH_BLOCKING=1 to localise";
    }
}

static const char *nccl_hint(ncclResult_t r) {
    switch (r) {
    case ncclUnhandledCudaError: return "a CUDA call inside NCCL failed (device fault, driver or P2P problem)";
    case ncclSystemError:
        return "a system call or the network failed (in containers: /dev/shm size, NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE)";
    case ncclInternalError: return "NCCL internal error";
    case ncclInvalidArgument: return "NCCL rejected an argument: buffers must be device memory of this rank's GPU";
    case ncclInvalidUsage:
        return "usage error: two ranks on one GPU, or ranks issuing different collectives on one channel";
    case ncclRemoteError: return "a peer rank failed or went away";
    default: return "";
    }
}

static int cuda_fail(const nccl_self *s, cudaError_t e, const char *call, const char *file, int line) {
    return zt_err("%s failed at %s:%d (rank %d of %d, device %d): %s: %s; %s; CUDA error %d", call,
                  short_file(file), line, s->rank, s->world, s->device, cudaGetErrorName(e), cudaGetErrorString(e),
                  cuda_hint(e), (int)e);
}

static int nccl_fail(const nccl_self *s, ncclResult_t r, const char *call, const char *file, int line) {
    const char *last = ncclGetLastError(NULL);
    return zt_err("%s failed at %s:%d (rank %d of %d, device %d): %s%s%s; %s (NCCL_DEBUG=WARN prints NCCL's own log)",
                  call, short_file(file), line, s->rank, s->world, s->device, ncclGetErrorString(r),
                  last && *last ? ": " : "", last ? last : "", nccl_hint(r));
}

// CUDA and NCCL calls are checked with ZT_CUDA_CHECK_GOTO(call, cuda_fail, s) and
// ZT_NCCL_CHECK_GOTO(call, nccl_fail, s) (kernels/cuda/zt_cuda_check.h): on failure the
// report above sets zt_err and the function jumps to its `fail:` label.

static void warn(const nccl_self *s, const char *what) {
    fprintf(stderr, "zerotrain: rank %d: warning: %s\n", s->rank, what);
}

// ---- mappings ---------------------------------------------------------------------------
static int nccl_type(zt_dtype dt, ncclDataType_t *t) {
    switch (dt) {
    case ZT_DT_F32: *t = ncclFloat32; return 0;
    case ZT_DT_F64: *t = ncclFloat64; return 0;
    case ZT_DT_I64: *t = ncclInt64; return 0;
    case ZT_DT_I32: *t = ncclInt32; return 0;
    case ZT_DT_U8: *t = ncclUint8; return 0;
    case ZT_DT_BF16: *t = ncclBfloat16; return 0;
    default: return -1;
    }
}

static ncclRedOp_t nccl_op(zt_red red) {
    switch (red) {
    case ZT_RED_MIN: return ncclMin;
    case ZT_RED_MAX: return ncclMax;
    case ZT_RED_AVG: return ncclAvg;  // floating types only (checked by comm.c)
    default: return ncclSum;
    }
}

// ---- events: one per collective in flight, reused -------------------------------------
static int ev_get(nccl_self *s, cudaEvent_t *ev) {
    if (s->npool) {
        *ev = s->pool[--s->npool];
        return 0;
    }
    // Events belong to the device current at creation: create on the comm's device even
    // if the caller switched away, and switch back.
    int cur = -1;
    ZT_CUDA_CHECK_GOTO(cudaGetDevice(&cur), cuda_fail, s);
    if (cur != s->device) ZT_CUDA_CHECK_GOTO(cudaSetDevice(s->device), cuda_fail, s);
    cudaError_t e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
    if (cur != s->device) ZT_CUDA_CHECK_GOTO(cudaSetDevice(cur), cuda_fail, s);
    if (e != cudaSuccess) {
        cuda_fail(s, e, "cudaEventCreateWithFlags(ev, cudaEventDisableTiming)", __FILE__, __LINE__);
        goto fail;
    }
    return 0;
fail:
    return -1;
}

static void ev_put(nccl_self *s, cudaEvent_t ev) {
    if (s->npool == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        cudaEvent_t *p = realloc(s->pool, (size_t)cap * sizeof *p);
        if (!p) {
            cudaEventDestroy(ev);
            return;
        }
        s->pool = p;
        s->cap = cap;
    }
    s->pool[s->npool++] = ev;
}

// ---- the backend ----------------------------------------------------------------------
// Handshake with abort() running on the watchdog thread (Dekker style, sequentially
// consistent atomics): either this thread sees `aborting` and parks before touching a
// communicator, or abort() sees `in_call` and waits for it to leave. Two atomic stores
// and a load per start/test: the collective path takes no lock.
static void call_enter(nccl_self *s) {
    atomic_store(&s->in_call, 1);
    if (atomic_load(&s->aborting)) {
        atomic_store(&s->in_call, 0);
        for (;;) pause();  // the aborting thread takes the process down
    }
}

static void call_leave(nccl_self *s) { atomic_store(&s->in_call, 0); }

static int start_impl(void *self_, const zt_coll *d, void **handle) {
    nccl_self *s = self_;
    *handle = NULL;
    int ch = d->chan == ZT_CHAN_DATA ? 0 : 1;
    if (s->dead[ch])
        return zt_err("the %s channel's NCCL communicator was aborted after an earlier error (%s); no further "
                      "collectives can run on it",
                      chan_name[ch], s->dead_why[ch]);
    if (d->op == ZT_OP_ALLTOALL)  // the exchange context parallelism's Qwen3.5 CPU path uses
        return zt_err("alltoall is not implemented on the NCCL backend (it needs grouped ncclSend/ncclRecv, which "
                      "the CUDA emulator does not provide yet); use all-gather / reduce-scatter on GPUs");
    ncclDataType_t t = ncclFloat32;
    if (d->op != ZT_OP_BARRIER && nccl_type(d->dt, &t) < 0) return zt_err("no NCCL type for dtype %d", (int)d->dt);
    ncclComm_t comm = s->comm[ch];
    cudaStream_t st = s->stream[ch];
    cudaEvent_t ev = NULL;
    if (ev_get(s, &ev) < 0) return -1;
    // A zero-count collective moves nothing; its event alone keeps the stream order
    // (every rank passes the same count, so no rank is left waiting).
    if (d->count || d->op == ZT_OP_BARRIER) {
        switch (d->op) {
        case ZT_OP_ALLGATHER:  // in place (send == recv + rank * block) is NCCL's in-place form too
            ZT_NCCL_CHECK_GOTO(ncclAllGather(d->send, d->recv, d->count, t, comm, st), nccl_fail, s);
            break;
        case ZT_OP_REDUCE_SCATTER:
            ZT_NCCL_CHECK_GOTO(ncclReduceScatter(d->send, d->recv, d->count, t, nccl_op(d->red), comm, st), nccl_fail,
                               s);
            break;
        case ZT_OP_ALLREDUCE:
            ZT_NCCL_CHECK_GOTO(ncclAllReduce(d->send, d->recv, d->count, t, nccl_op(d->red), comm, st), nccl_fail, s);
            break;
        case ZT_OP_BROADCAST:
            ZT_NCCL_CHECK_GOTO(ncclBroadcast(d->send, d->recv, d->count, t, d->root, comm, st), nccl_fail, s);
            break;
        case ZT_OP_BARRIER:
            ZT_NCCL_CHECK_GOTO(ncclAllReduce(s->barrier_buf, s->barrier_buf, 1, ncclInt32, ncclSum, comm, st),
                               nccl_fail, s);
            break;
        case ZT_OP_ALLTOALL: break;  // refused above
        }
    }
    ZT_CUDA_CHECK_GOTO(cudaEventRecord(ev, st), cuda_fail, s);
    *handle = (void *)ev;
    return 0;
fail:
    ev_put(s, ev);
    return -1;
}

static int test_impl(void *self_, const zt_coll *d, void *handle, int *done) {
    nccl_self *s = self_;
    cudaEvent_t ev = (cudaEvent_t)handle;
    int ch = d->chan == ZT_CHAN_DATA ? 0 : 1;
    *done = 0;
    if (s->dead[ch]) {
        // The communicator was aborted (by another request's test): aborted kernels
        // end, so this event may well complete, but the data is not to be trusted.
        cudaEventDestroy(ev);
        return zt_err("the %s channel's NCCL communicator was aborted after an error (%s)", chan_name[ch],
                      s->dead_why[ch]);
    }
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) {
        ev_put(s, ev);
        *done = 1;
        return 0;
    }
    if (e != cudaErrorNotReady) {
        // A sticky device error: the event is unusable; the handle is released here.
        cudaEventDestroy(ev);
        return cuda_fail(s, e, "cudaEventQuery(collective's event)", __FILE__, __LINE__);
    }
    (void)cudaGetLastError();  // "not ready" is no error: never let the op layer's checks see it
    ncclResult_t async = ncclSuccess, r = ncclCommGetAsyncError(s->comm[ch], &async);
    if (r != ncclSuccess) {
        cudaEventDestroy(ev);
        return nccl_fail(s, r, "ncclCommGetAsyncError", __FILE__, __LINE__);
    }
    if (async == ncclSuccess || async == ncclInProgress) return 0;
    // The communicator failed (a peer died, the network broke): its kernels may never
    // finish, so abort it now; later collectives on this channel are refused. Under mu:
    // the watchdog may be querying this communicator right now. Once it is marked dead
    // the watchdog leaves it alone: this error reaches the caller through zt_wait.
    pthread_mutex_lock(&s->mu);
    const char *last = ncclGetLastError(s->comm[ch]);
    snprintf(s->dead_why[ch], sizeof s->dead_why[ch], "%s%s%s", ncclGetErrorString(async),
             last && *last ? ": " : "", last ? last : "");
    ncclCommAbort(s->comm[ch]);
    s->comm[ch] = NULL;
    s->dead[ch] = 1;
    pthread_mutex_unlock(&s->mu);
    cudaEventDestroy(ev);  // released once the aborted work drains
    return zt_err("NCCL asynchronous error on the %s communicator (rank %d of %d, device %d): %s; %s; the "
                  "communicator was aborted",
                  chan_name[ch], s->rank, s->world, s->device, s->dead_why[ch], nccl_hint(async));
}

static int nccl_start(void *self_, const zt_coll *d, void **handle) {
    call_enter(self_);
    int rc = start_impl(self_, d, handle);
    call_leave(self_);
    return rc;
}

static int nccl_test(void *self_, const zt_coll *d, void *handle, int *done) {
    call_enter(self_);
    int rc = test_impl(self_, d, handle, done);
    call_leave(self_);
    return rc;
}

// Watchdog thread, every period. ncclCommGetAsyncError is documented for exactly this
// use (polled from another thread while the owner thread is busy or blocked); a
// channel the main thread already aborted (dead) is skipped: its error went back
// through zt_wait.
static int nccl_async_error(void *self_, char *msg, size_t n) {
    nccl_self *s = self_;
    // trylock: never wait on the main thread's abort of a failed communicator; the
    // next period looks again.
    if (pthread_mutex_trylock(&s->mu) != 0) return 0;
    int bad = 0;
    for (int ch = 0; ch < NCHAN && !bad; ch++) {
        if (!s->comm[ch] || s->dead[ch]) continue;
        ncclResult_t async = ncclSuccess, r = ncclCommGetAsyncError(s->comm[ch], &async);
        if (r != ncclSuccess) {
            snprintf(msg, n, "ncclCommGetAsyncError on the %s channel's communicator failed: %s (device %d)",
                     chan_name[ch], ncclGetErrorString(r), s->device);
            bad = 1;
        } else if (async != ncclSuccess && async != ncclInProgress) {
            const char *last = ncclGetLastError(s->comm[ch]), *hint = nccl_hint(async);
            snprintf(msg, n, "NCCL asynchronous error on the %s channel: %s (%s)%s%s (device %d)", chan_name[ch],
                     ncclGetErrorString(async), last && *last ? last : "ncclGetLastError: no detail",
                     *hint ? "; " : "", hint, s->device);
            bad = 1;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return bad;
}

// Called by the common layer on a deadline (main thread) or by its watchdog (a watched
// host wait past its deadline, an asynchronous error). On the watchdog thread the
// main thread may be inside start/test, or blocked in cudaStreamSynchronize behind a
// hung collective (the case ncclCommAbort is documented for: it may be called while
// another thread uses or waits on the communicator).
static void nccl_abort(void *self_, int code) {
    nccl_self *s = self_;
    atomic_store(&s->aborting, 1);
    // A start/test already inside gets 2 s to leave; one stuck inside NCCL (e.g.
    // connecting to a dead peer) is what the abort below releases, so go ahead anyway.
    for (int i = 0; i < 2000 && atomic_load(&s->in_call); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    int locked = pthread_mutex_timedlock(&s->mu, &until) == 0;
    if (s->device >= 0) cudaSetDevice(s->device);  // the device is per thread
    // A collective whose peers never arrive keeps its kernel spinning on the GPU;
    // ncclCommAbort stops it so this process can exit and the GPU is released.
    for (int ch = 0; ch < NCHAN; ch++)
        if (s->comm[ch]) {
            ncclCommAbort(s->comm[ch]);
            s->comm[ch] = NULL;
            s->dead[ch] = 1;
        }
    if (locked) pthread_mutex_unlock(&s->mu);
#if ZT_NCCL_MPI
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    // No MPI (world 1), or MPI_Abort returned: leave without exit handlers, which
    // could block in the CUDA runtime's teardown; the report and dump are written.
    fflush(stdout);
    fflush(stderr);
    _exit(code);
}

static void unregister(nccl_self *s) {
    for (nccl_self **p = &g_selves; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            return;
        }
}

static void nccl_destroy(void *self_) {
    nccl_self *s = self_;
    if (!s) return;
    unregister(s);
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess) cur = -1;
    if (s->device >= 0) cudaSetDevice(s->device);
    char msg[512];
    int any_busy = 0;
    for (int ch = 0; ch < NCHAN; ch++) {
        if (!s->comm[ch]) continue;
        // ncclCommDestroy waits for queued work. Give a straggling collective 10 s;
        // one that is still queued then (a handle never waited for, a peer gone)
        // would block forever, so that communicator is aborted instead.
        // (A stream in a sticky error state counts as busy too.)
        cudaError_t e = cudaSuccess;
        for (int i = 0; s->stream[ch] && i < 10000 && (e = cudaStreamQuery(s->stream[ch])) == cudaErrorNotReady;
             i++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        (void)cudaGetLastError();
        int busy = e != cudaSuccess;
        any_busy |= busy;
        ncclResult_t r = busy ? ncclCommAbort(s->comm[ch]) : ncclCommDestroy(s->comm[ch]);
        if (busy) {
            snprintf(msg, sizeof msg,
                     "the %s channel's stream was %s at finalize; aborted its NCCL communicator instead of "
                     "destroying it",
                     chan_name[ch], e == cudaErrorNotReady ? "still busy after 10 s" : cudaGetErrorString(e));
            warn(s, msg);
        }
        if (r != ncclSuccess) {
            snprintf(msg, sizeof msg, "%s of the %s communicator: %s", busy ? "ncclCommAbort" : "ncclCommDestroy",
                     chan_name[ch], ncclGetErrorString(r));
            warn(s, msg);
        }
        s->comm[ch] = NULL;
    }
    for (int i = 0; i < s->npool; i++) cudaEventDestroy(s->pool[i]);
    // cudaFree may synchronize the device, i.e. wait for the stream that did not drain:
    // then the 4-byte barrier word is left behind rather than blocking finalize.
    if (s->barrier_buf && !any_busy) cudaFree(s->barrier_buf);
    for (int ch = 0; ch < NCHAN; ch++)
        if (s->stream[ch]) cudaStreamDestroy(s->stream[ch]);
    (void)cudaGetLastError();
    if (cur >= 0 && cur != s->device) cudaSetDevice(cur);
    pthread_mutex_destroy(&s->mu);
#if ZT_NCCL_MPI
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && s->base != MPI_COMM_NULL) MPI_Comm_free(&s->base);
#endif
    free(s->pool);
    free(s);
}

#if ZT_NCCL_MPI
static int nccl_split(void *self_, int color, int key, const char *name, const zt_comm_opts *opts, zt_comm **out);
#else
#define nccl_split NULL
#endif
static const zt_comm_backend nccl_backend = {
    "nccl", nccl_start, nccl_test, nccl_abort, nccl_destroy, nccl_async_error, nccl_split,
};

// ---- creation --------------------------------------------------------------------------
static nccl_self *self_new(int rank, int world) {
    nccl_self *s = zt_xcalloc(1, sizeof *s);
    s->rank = rank;
    s->world = world;
    s->device = -1;
#if ZT_NCCL_MPI
    s->base = MPI_COMM_NULL;
#endif
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->in_call, 0);
    atomic_init(&s->aborting, 0);
    return s;
}

// The GPU, the two streams and the barrier word: everything before NCCL's own init.
static int setup_local(nccl_self *s, int device, int local_rank, int local_world) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        return zt_err("rank %d: no usable CUDA device (cudaGetDeviceCount: %s); the NCCL backend needs one GPU "
                      "per rank",
                      s->rank, e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    int dev = device >= 0 ? device : local_rank;
    if (dev >= n) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        if (device >= 0)
            return zt_err("rank %d: device %d requested but %d GPU(s) are visible (CUDA_VISIBLE_DEVICES=%s)", s->rank,
                          device, n, vis ? vis : "unset");
        return zt_err("rank %d is rank %d of %d on its node but only %d GPU(s) are visible there "
                      "(CUDA_VISIBLE_DEVICES=%s): start at most %d ranks per node, one per GPU",
                      s->rank, local_rank, local_world, n, vis ? vis : "unset", n);
    }
    s->device = dev;
    ZT_CUDA_CHECK_GOTO(cudaSetDevice(dev), cuda_fail, s);
    for (int ch = 0; ch < NCHAN; ch++)
        ZT_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s->stream[ch], cudaStreamNonBlocking), cuda_fail, s);
    ZT_CUDA_CHECK_GOTO(cudaMalloc((void **)&s->barrier_buf, sizeof(int)), cuda_fail, s);
    // On the ctrl stream, so it is ordered before every barrier (a non-blocking stream
    // does not wait for the legacy default stream).
    ZT_CUDA_CHECK_GOTO(cudaMemsetAsync(s->barrier_buf, 0, sizeof(int), s->stream[ZT_CHAN_CTRL]), cuda_fail, s);
    return 0;
fail:
    return -1;
}

static int init_comms(nccl_self *s, const ncclUniqueId id[NCHAN]) {
    for (int ch = 0; ch < NCHAN; ch++)
        ZT_NCCL_CHECK_GOTO(ncclCommInitRank(&s->comm[ch], s->world, id[ch], s->rank), nccl_fail, s);
    return 0;
fail:
    return -1;
}

// Wrap into a zt_comm (which destroys s on failure) and register it.
static int finish(zt_comm **out, nccl_self *s, const zt_comm_info *info, const zt_comm_opts *opts) {
    if (zt_comm_create(out, &nccl_backend, s, info, opts) < 0) return -1;
    s->owner = *out;
    s->next = g_selves;
    g_selves = s;
    return 0;
}

int zt_comm_init_nccl_single(zt_comm **out, int device, const zt_comm_opts *opts) {
    *out = NULL;
    zt_comm_info info = {0, 1, 0, 1, 0, 1};
    nccl_self *s = self_new(0, 1);
    ncclUniqueId id[NCHAN];
    if (setup_local(s, device, 0, 1) < 0) goto fail;
    for (int ch = 0; ch < NCHAN; ch++) ZT_NCCL_CHECK_GOTO(ncclGetUniqueId(&id[ch]), nccl_fail, s);
    if (init_comms(s, id) < 0) goto fail;
    if (finish(out, s, &info, opts) < 0) return zt_err_prefix("zt_comm_init_nccl (world 1, no MPI)");
    return 0;
fail:
    nccl_destroy(s);
    return zt_err_prefix("zt_comm_init_nccl (world 1, no MPI)");
}

#if ZT_NCCL_MPI
static int mpi_fail(int rc, const char *call) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return zt_err("%s failed: %s", call, msg);
}

#define MPI_CHECK(call)               \
    do {                              \
        int rc_ = (call);             \
        if (rc_ != MPI_SUCCESS) {     \
            mpi_fail(rc_, #call);     \
            goto fail;                \
        }                             \
    } while (0)

// The communicators over `base` (collective over it): the GPU (`device`, or the node-local
// rank), the unique ids from base's rank 0, ncclCommInitRank per channel. Keeps a duplicate
// of base for sub-groups.
static int init_over(zt_comm **out, MPI_Comm base, int device, const zt_comm_opts *opts) {
    zt_comm_info info = {0};
    if (zt_mpi_node_layout(base, &info) < 0) return -1;
    nccl_self *s = self_new(info.rank, info.world);
    MPI_CHECK(MPI_Comm_dup(base, &s->base));
    // Every rank learns whether every rank got its GPU before anyone enters NCCL's
    // blocking init: one rank without a GPU fails the job instead of hanging the rest.
    char why[ZT_ERR_MAX] = "";
    int ok = setup_local(s, device, info.local_rank, info.local_world) == 0, all_ok = 0;
    if (!ok) snprintf(why, sizeof why, "%s", zt_errmsg());
    MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, base));
    if (!all_ok) {
        if (ok)
            zt_err("another rank could not set up its GPU (its own log says why)");
        else
            zt_err("%s", why);
        goto fail;
    }
    // Rank 0 makes one id per channel; the broadcast carries whether that worked.
    struct {
        int ok;
        ncclUniqueId id[NCHAN];
    } boot;
    memset(&boot, 0, sizeof boot);
    if (info.rank == 0) {
        boot.ok = 1;
        for (int ch = 0; ch < NCHAN && boot.ok; ch++) {
            ncclResult_t r = ncclGetUniqueId(&boot.id[ch]);
            if (r != ncclSuccess) {
                nccl_fail(s, r, "ncclGetUniqueId(&boot.id[ch])", __FILE__, __LINE__);
                snprintf(why, sizeof why, "%s", zt_errmsg());
                boot.ok = 0;
            }
        }
    }
    MPI_CHECK(MPI_Bcast(&boot, (int)sizeof boot, MPI_BYTE, 0, base));
    if (!boot.ok) {
        if (info.rank == 0)
            zt_err("%s", why);
        else
            zt_err("rank 0 could not create the NCCL unique ids (rank 0's log says why)");
        goto fail;
    }
    if (init_comms(s, boot.id) < 0) goto fail;
    return finish(out, s, &info, opts);
fail:
    nccl_destroy(s);
    return -1;
}

int zt_comm_init_nccl(zt_comm **out, MPI_Comm base, int device, const zt_comm_opts *opts) {
    *out = NULL;
    if (base == MPI_COMM_NULL) return zt_comm_init_nccl_single(out, device, opts);
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        return zt_err("zt_comm_init_nccl: MPI is not initialised (call zt_mpi_init_once first, or pass "
                      "MPI_COMM_NULL for a world of 1 without MPI)");
    if (init_over(out, base, device, opts) != 0) return zt_err_prefix("zt_comm_init_nccl");
    return 0;
}

// A sub-group: its own NCCL communicators (per group, bootstrapped like the parent's over
// the MPI comm split the same way) on the parent's GPU. Per-group ncclCommInitRank rather
// than ncclCommSplit, which the CPU execution of CUDA (tests/cudaemu) does not provide.
static int nccl_split(void *self_, int color, int key, const char *name, const zt_comm_opts *opts, zt_comm **out) {
    const nccl_self *p = self_;
    (void)name;
    if (p->base == MPI_COMM_NULL)
        return zt_err("an NCCL comm made without MPI (a world of 1) cannot make sub-groups");
    MPI_Comm sub = MPI_COMM_NULL;
    int rc = MPI_Comm_split(p->base, color, key, &sub);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_split");
    rc = init_over(out, sub, p->device, opts);
    MPI_Comm_free(&sub);
    return rc;
}
#endif

// ---- accessors -------------------------------------------------------------------------
static nccl_self *lookup(const zt_comm *c) {
    for (nccl_self *s = g_selves; s; s = s->next)
        if (s->owner == c) return s;
    return NULL;
}

void *zt_comm_nccl_stream(zt_comm *c, int chan) {
    nccl_self *s = lookup(c);
    if (!s || (chan != ZT_CHAN_DATA && chan != ZT_CHAN_CTRL)) return NULL;
    return (void *)s->stream[chan];
}

int zt_comm_nccl_device(const zt_comm *c) {
    const nccl_self *s = lookup(c);
    return s ? s->device : -1;
}
