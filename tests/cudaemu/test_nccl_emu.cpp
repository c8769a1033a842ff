// cudaemu: standalone test of the NCCL emulation (nccl.cpp): forks worlds of 1, 2 and 3 rank
// processes (no MPI) and checks every collective, type and op against host-computed values,
// the argument rejections, and that a dead, aborted or mismatched peer fails fast instead of hanging.
//
// Rank 0's ncclUniqueIds reach the others through one pipe per rank (as comm_nccl.c's
// MPI_Bcast would). The host reference has its own arithmetic (fp16 through _Float16, bf16 by
// nearest neighbour in double, integers through C++'s own division), so a mistake in nccl.cpp's
// reductions shows. Usage: test_nccl_emu [RUN] (one of the runs listed in main). Exit 0: passed.
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <type_traits>
#include <vector>

static int g_rank, g_world, g_fail, g_cases;
static uint64_t g_salt;

// One write per failure, so that the lines of concurrent ranks do not interleave.
#define FAIL(...)                                                                       \
    do {                                                                                \
        char m_[1024];                                                                  \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                           \
        fprintf(stderr, "rank %d: FAIL %s:%d: %s\n", g_rank, __FILE__, __LINE__, m_);   \
        g_fail++;                                                                       \
    } while (0)
#define CHECK(c, ...)          \
    do {                       \
        if (!(c)) FAIL(__VA_ARGS__); \
    } while (0)
#define NCK(x)                                                                                           \
    do {                                                                                                 \
        ncclResult_t r_ = (x);                                                                           \
        if (r_ != ncclSuccess) FAIL("%s: %s (%s)", #x, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
    } while (0)
#define EXPECT_NCCL(code, x)                                                                              \
    do {                                                                                                  \
        ncclResult_t r_ = (x);                                                                            \
        if (r_ != (code)) FAIL("%s returned %d (%s), expected %d", #x, (int)r_, ncclGetErrorString(r_), (int)(code)); \
    } while (0)
#define CU(x)                                                                 \
    do {                                                                      \
        cudaError_t e_ = (x);                                                 \
        if (e_ != cudaSuccess) {                                              \
            FAIL("%s: %s", #x, cudaGetErrorString(e_));                       \
            fflush(stderr);                                                   \
            _exit(3);                                                         \
        }                                                                     \
    } while (0)

static double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// ---- host reference arithmetic (independent of nccl.cpp's) --------------------------------------
static size_t esize(int dt) {
    static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return s[dt];
}
static const char *tname(int dt) {
    static const char *n[] = {"i8", "u8", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "bf16", "e4m3", "e5m2"};
    return n[dt];
}
static const char *oname(int op) {
    static const char *n[] = {"sum", "prod", "max", "min", "avg"};
    return n[op];
}

// fp16 through the compiler's _Float16 (IEEE conversions, round to nearest even).
static float h_to_f(uint16_t b) {
    _Float16 h;
    memcpy(&h, &b, 2);
    return (float)h;
}
static uint16_t f_to_h(float f) {
    _Float16 h = (_Float16)f;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static float rh(float f) { return h_to_f(f_to_h(f)); }

// bf16: the nearer of the two neighbours (ties to the even one), decided in double.
static float bf_to_f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t f_to_bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);  // toward zero, away from zero
    double dl = fabs((double)f - (double)bf_to_f(lo)), dh = fabs((double)bf_to_f(hi) - (double)f);
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}
static float rb(float f) { return bf_to_f(f_to_bf(f)); }

static float vf(float x) {  // one rounding, no contraction
    volatile float v = x;
    return v;
}
static double vd(double x) {
    volatile double v = x;
    return v;
}

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Inputs: integers over their whole range (sums and products wrap), floats with spread
// exponents (the rounding order shows), products near 1 (no overflow).
static void gen(int dt, int op, int rank, size_t n, uint64_t salt, uint8_t *out) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = mix(salt * 1000003ull + (uint64_t)rank * 7919ull + i * 104729ull);
        double sign = (h & 1) ? -1.0 : 1.0, frac = (double)((h >> 8) & 0xffffff) / 16777216.0;
        int e = op == ncclProd ? (int)((h >> 40) % 5) - 2 : (int)((h >> 40) % 17) - 8;
        double v = sign * (1.0 + frac) * ldexp(1.0, e);
        uint8_t *p = out + i * esize(dt);
        switch (dt) {
        case ncclInt8:
        case ncclUint8:
        case ncclFloat8e4m3:
        case ncclFloat8e5m2: *p = (uint8_t)h; break;
        case ncclInt32:
        case ncclUint32: memcpy(p, &h, 4); break;
        case ncclInt64:
        case ncclUint64: memcpy(p, &h, 8); break;
        case ncclFloat16: {
            uint16_t b = f_to_h((float)v);
            memcpy(p, &b, 2);
            break;
        }
        case ncclBfloat16: {
            uint16_t b = f_to_bf((float)v);
            memcpy(p, &b, 2);
            break;
        }
        case ncclFloat32: {
            float f = (float)v;
            memcpy(p, &f, 4);
            break;
        }
        case ncclFloat64: {  // all 52 fraction bits: sums are inexact, the order shows
            double d = sign * (1.0 + (double)(h >> 12) * 0x1p-52) * ldexp(1.0, e);
            memcpy(p, &d, 8);
            break;
        }
        }
    }
}

template <class T> static void ref_int(int op, int W, const std::vector<const uint8_t *> &in, size_t n, uint8_t *out) {
    typedef typename std::make_unsigned<T>::type U;
    for (size_t i = 0; i < n; i++) {
        T x;
        memcpy(&x, in[0] + i * sizeof(T), sizeof x);
        U acc = (U)x;
        T best = x;
        for (int r = 1; r < W; r++) {
            memcpy(&x, in[r] + i * sizeof(T), sizeof x);
            if (op == ncclSum || op == ncclAvg) acc = (U)(acc + (U)x);
            if (op == ncclProd) acc = (U)(acc * (U)x);
            if (op == ncclMax && x > best) best = x;
            if (op == ncclMin && x < best) best = x;
        }
        T res = (op == ncclMax || op == ncclMin) ? best : (T)acc;
        if (op == ncclAvg) res = (T)(res / (T)W);  // C++ division truncates toward zero
        memcpy(out + i * sizeof(T), &res, sizeof res);
    }
}

// Floating point: rank order 0..W-1, the type's rounding after every step; ncclAvg is the sum
// of the inputs each multiplied by the type's 1/W.
template <class F, class V> static void ref_float(int op, int W, const std::vector<const uint8_t *> &in, size_t n,
                                                  uint8_t *out, F round, V (*ld)(const uint8_t *), void (*st)(uint8_t *, V),
                                                  size_t es) {
    const V s = round((V)(1.0 / W));
    for (size_t i = 0; i < n; i++) {
        V acc = ld(in[0] + i * es);
        if (op == ncclAvg) acc = round(acc * s);
        for (int r = 1; r < W; r++) {
            V x = ld(in[r] + i * es);
            switch (op) {
            case ncclSum: acc = round(acc + x); break;
            case ncclProd: acc = round(acc * x); break;
            case ncclMax: acc = x > acc ? x : acc; break;
            case ncclMin: acc = x < acc ? x : acc; break;
            case ncclAvg: acc = round(acc + round(x * s)); break;
            }
        }
        st(out + i * es, acc);
    }
}
static float ld_h(const uint8_t *p) { uint16_t b; memcpy(&b, p, 2); return h_to_f(b); }
static void st_h(uint8_t *p, float v) { uint16_t b = f_to_h(v); memcpy(p, &b, 2); }
static float ld_b(const uint8_t *p) { uint16_t b; memcpy(&b, p, 2); return bf_to_f(b); }
static void st_b(uint8_t *p, float v) { uint16_t b = f_to_bf(v); memcpy(p, &b, 2); }
static float ld_f(const uint8_t *p) { float v; memcpy(&v, p, 4); return v; }
static void st_f(uint8_t *p, float v) { memcpy(p, &v, 4); }
static double ld_d(const uint8_t *p) { double v; memcpy(&v, p, 8); return v; }
static void st_d(uint8_t *p, double v) { memcpy(p, &v, 8); }

static void ref_reduce(int dt, int op, int W, const std::vector<const uint8_t *> &in, size_t n, uint8_t *out) {
    switch (dt) {
    case ncclInt8: ref_int<int8_t>(op, W, in, n, out); break;
    case ncclUint8: ref_int<uint8_t>(op, W, in, n, out); break;
    case ncclInt32: ref_int<int32_t>(op, W, in, n, out); break;
    case ncclUint32: ref_int<uint32_t>(op, W, in, n, out); break;
    case ncclInt64: ref_int<int64_t>(op, W, in, n, out); break;
    case ncclUint64: ref_int<uint64_t>(op, W, in, n, out); break;
    case ncclFloat16: ref_float(op, W, in, n, out, rh, ld_h, st_h, 2); break;
    case ncclBfloat16: ref_float(op, W, in, n, out, rb, ld_b, st_b, 2); break;
    case ncclFloat32: ref_float(op, W, in, n, out, vf, ld_f, st_f, 4); break;
    case ncclFloat64: ref_float(op, W, in, n, out, vd, ld_d, st_d, 8); break;
    }
}

// ---- device helpers ---------------------------------------------------------------------------
static void *dalloc(size_t bytes) {
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
// A copy from pageable memory (or a cudaMemset) may still be in flight when the call returns,
// and the collectives' streams are non-blocking (they do not wait for the legacy stream):
// without the synchronise the emulator's checker rightly reports a race.
static void up(void *d, const void *h, size_t n) {
    CU(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize());
}
static void zero(void *d, size_t n) {
    CU(cudaMemset(d, 0, n));
    CU(cudaDeviceSynchronize());
}
static void down(void *h, const void *d, size_t n) { CU(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost)); }

static int compare(const char *what, const uint8_t *got, const uint8_t *want, size_t n, size_t es) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(got + i * es, want + i * es, es) != 0) {
            uint64_t g = 0, w = 0;
            memcpy(&g, got + i * es, es);
            memcpy(&w, want + i * es, es);
            FAIL("%s: element %zu of %zu is 0x%llx, expected 0x%llx", what, i, n, (unsigned long long)g,
                 (unsigned long long)w);
            return 1;
        }
    return 0;
}

enum { AG, RS, AR, BC, RD };
static const char *kname[] = {"AllGather", "ReduceScatter", "AllReduce", "Broadcast", "Reduce"};

static bool kind_reduces_op(int kind) { return kind == RS || kind == AR || kind == RD; }

static ncclResult_t issue(int kind, const void *s, void *r, size_t n, int dt, int op, int root, ncclComm_t c,
                          cudaStream_t st) {
    switch (kind) {
    case AG: return ncclAllGather(s, r, n, (ncclDataType_t)dt, c, st);
    case RS: return ncclReduceScatter(s, r, n, (ncclDataType_t)dt, (ncclRedOp_t)op, c, st);
    case AR: return ncclAllReduce(s, r, n, (ncclDataType_t)dt, (ncclRedOp_t)op, c, st);
    case BC: return ncclBroadcast(s, r, n, (ncclDataType_t)dt, root, c, st);
    default: return ncclReduce(s, r, n, (ncclDataType_t)dt, (ncclRedOp_t)op, root, c, st);
    }
}

// One collective against the host's expectation. Every rank runs the same cases in the same
// order (the salt advances identically), so every rank can compute every rank's input.
static void run_case(ncclComm_t comm, cudaStream_t st, int kind, int dt, int op, int root, size_t n, bool in_place) {
    const size_t es = esize(dt), W = (size_t)g_world, me = (size_t)g_rank;
    const uint64_t salt = ++g_salt;
    g_cases++;
    const size_t in_n = kind == RS ? W * n : n, out_n = kind == AG ? W * n : n;
    std::vector<std::vector<uint8_t>> in(W, std::vector<uint8_t>(in_n * es));
    std::vector<const uint8_t *> blocks(W);
    for (size_t r = 0; r < W; r++) gen(dt, op, (int)r, in_n, salt, in[r].data());
    std::vector<uint8_t> want(out_n * es, 0xa5), got(out_n * es);
    switch (kind) {
    case AG:
        for (size_t r = 0; r < W; r++) memcpy(want.data() + r * n * es, in[r].data(), n * es);
        break;
    case BC: want = in[(size_t)root]; break;
    case RS:
        for (size_t r = 0; r < W; r++) blocks[r] = in[r].data() + me * n * es;
        ref_reduce(dt, op, (int)W, blocks, n, want.data());
        break;
    default:
        for (size_t r = 0; r < W; r++) blocks[r] = in[r].data();
        if (kind == AR || me == (size_t)root) ref_reduce(dt, op, (int)W, blocks, n, want.data());
        else if (in_place) want = in[me];  // a non-root's buffer is its untouched input
        break;
    }
    char what[128];
    snprintf(what, sizeof what, "%s %s%s%s n=%zu root=%d %s", kname[kind], tname(dt), kind_reduces_op(kind) ? " " : "",
             kind_reduces_op(kind) ? oname(op) : "", n, root, in_place ? "in place" : "out of place");
    std::vector<uint8_t> sentinel(out_n * es, 0xa5);
    ncclResult_t r;
    if (!in_place) {
        // A non-root's unused buffer may be NULL (NCCL: "recvbuff may be NULL on all calls except
        // for root"; a broadcast reads sendbuff on the root only): exercised on the small size.
        bool null_send = kind == BC && me != (size_t)root && n < 100;
        bool null_recv = kind == RD && me != (size_t)root && n < 100;
        void *ds = null_send ? NULL : dalloc(in_n * es), *dr = null_recv ? NULL : dalloc(out_n * es);
        if (ds) up(ds, in[me].data(), in_n * es);
        if (dr) up(dr, sentinel.data(), out_n * es);
        r = issue(kind, ds, dr, n, dt, op, root, comm, st);
        CU(cudaStreamSynchronize(st));
        if (dr) down(got.data(), dr, out_n * es);
        else got = want;
        cudaFree(ds);
        cudaFree(dr);
    } else {
        size_t buf_n = (kind == AG || kind == RS) ? W * n : n;
        uint8_t *d = (uint8_t *)dalloc(buf_n * es);
        const void *s = d;
        void *rv = d;
        if (kind == AG) {
            std::vector<uint8_t> init(buf_n * es, 0xa5);
            memcpy(init.data() + me * n * es, in[me].data(), n * es);
            up(d, init.data(), buf_n * es);
            s = d + me * n * es;
        } else {
            up(d, in[me].data(), buf_n * es);
            if (kind == RS) rv = d + me * n * es;
        }
        r = issue(kind, s, rv, n, dt, op, root, comm, st);
        CU(cudaStreamSynchronize(st));
        down(got.data(), rv, out_n * es);
        cudaFree(d);
    }
    if (r != ncclSuccess) {
        FAIL("%s: %s (%s)", what, ncclGetErrorString(r), ncclGetLastError(NULL));
        return;
    }
    compare(what, got.data(), want.data(), out_n, es);
}

// ---- the id exchange: rank 0's ncclGetUniqueId, "broadcast" through one pipe per rank -------------
enum { NIDS = 2 };
static int g_pipe_w[8], g_pipe_r;

static void exchange_ids(ncclUniqueId *ids) {
    if (g_rank == 0) {
        for (int k = 0; k < NIDS; k++) NCK(ncclGetUniqueId(&ids[k]));
        for (int r = 1; r < g_world; r++)
            if (write(g_pipe_w[r], ids, sizeof(ncclUniqueId) * NIDS) != (ssize_t)(sizeof(ncclUniqueId) * NIDS))
                FAIL("write ids to rank %d: %s", r, strerror(errno));
    } else {
        size_t got = 0;
        while (got < sizeof(ncclUniqueId) * NIDS) {
            ssize_t k = read(g_pipe_r, (char *)ids + got, sizeof(ncclUniqueId) * NIDS - got);
            if (k <= 0) {
                FAIL("read ids: %s", k ? strerror(errno) : "EOF");
                _exit(3);
            }
            got += (size_t)k;
        }
    }
}

// ---- scenarios ------------------------------------------------------------------------------------
static void test_queries(ncclComm_t c) {
    int v = 0, n = 0, r = -1, d = -1;
    NCK(ncclGetVersion(&v));
    CHECK(v == NCCL_VERSION_CODE && v == 22809, "version %d", v);
    NCK(ncclCommCount(c, &n));
    NCK(ncclCommUserRank(c, &r));
    NCK(ncclCommCuDevice(c, &d));
    CHECK(n == g_world && r == g_rank && d == 0, "count %d rank %d device %d", n, r, d);
    ncclResult_t ae = ncclInternalError;
    NCK(ncclCommGetAsyncError(c, &ae));
    CHECK(ae == ncclSuccess, "async error %d on a fresh communicator", (int)ae);
    CHECK(!strcmp(ncclGetErrorString(ncclRemoteError), "remote process exited or there was a network error") &&
              !strcmp(ncclGetErrorString(ncclSuccess), "no error") &&
              !strcmp(ncclGetErrorString(ncclInvalidArgument), "invalid argument (run with NCCL_DEBUG=WARN for details)"),
          "error strings");
}

static void test_collectives(ncclComm_t c, cudaStream_t st, const size_t *sizes, int nsizes) {
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        for (int dt = 0; dt < ncclNumTypes; dt++)
            for (int ip = 0; ip < 2; ip++) {
                run_case(c, st, AG, dt, ncclSum, 0, n, ip);
                for (int root = 0; root < g_world; root++) run_case(c, st, BC, dt, ncclSum, root, n, ip);
                if (dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2) continue;
                for (int op = 0; op < ncclNumOps; op++) {
                    run_case(c, st, AR, dt, op, 0, n, ip);
                    run_case(c, st, RS, dt, op, 0, n, ip);
                    run_case(c, st, RD, dt, op, (op + dt + si) % g_world, n, ip);
                }
            }
    }
}

// Empty collectives: valid (NULL buffers allowed), move nothing, keep their place in order.
static void test_zero(ncclComm_t c, cudaStream_t st) {
    NCK(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, c, st));
    NCK(ncclAllGather(NULL, NULL, 0, ncclBfloat16, c, st));
    NCK(ncclReduceScatter(NULL, NULL, 0, ncclInt64, ncclMax, c, st));
    NCK(ncclBroadcast(NULL, NULL, 0, ncclUint8, g_world - 1, c, st));
    NCK(ncclReduce(NULL, NULL, 0, ncclFloat64, ncclAvg, 0, c, st));
    CU(cudaStreamSynchronize(st));
    run_case(c, st, AR, ncclInt32, ncclSum, 0, 5, false);  // still in step afterwards
}

// Two communicators on two streams at once, interleaved; then one communicator used from both
// streams, where the second all-reduce reads what the first wrote: only the communicator's own
// ordering (NCCL serialises its launches across streams) makes the result right.
static void test_concurrent(ncclComm_t c1, ncclComm_t c2, cudaStream_t s1, cudaStream_t s2) {
    enum { K = 4, N = 3001 };
    const size_t W = (size_t)g_world;
    int32_t *a[K], *b[K], *ga[K];
    std::vector<int32_t> h(W * N);
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) h[i] = g_rank * 100000 + k * 1000 + i;
        a[k] = (int32_t *)dalloc(N * 4);
        b[k] = (int32_t *)dalloc(N * 4);
        ga[k] = (int32_t *)dalloc(W * N * 4);
        up(a[k], h.data(), N * 4);
    }
    for (int k = 0; k < K; k++) {
        NCK(ncclAllReduce(a[k], b[k], N, ncclInt32, ncclSum, c1, s1));
        NCK(ncclAllGather(a[k], ga[k], N, ncclInt32, c2, s2));
    }
    CU(cudaStreamSynchronize(s1));
    CU(cudaStreamSynchronize(s2));
    int bad = 0;
    for (int k = 0; k < K; k++) {
        down(h.data(), b[k], N * 4);
        for (int i = 0; i < N; i++) {
            int64_t s = 0;
            for (int r = 0; r < g_world; r++) s += r * 100000 + k * 1000 + i;
            bad += h[i] != (int32_t)s;
        }
        down(h.data(), ga[k], W * N * 4);
        for (size_t r = 0; r < W; r++)
            for (int i = 0; i < N; i++) bad += h[r * N + i] != (int32_t)(r * 100000 + k * 1000 + i);
    }
    CHECK(bad == 0, "two communicators on two streams: %d wrong elements", bad);
    // x -> sum(x) on s1, then in place again on s2 (no event of the program between them).
    for (int i = 0; i < N; i++) h[i] = g_rank + 1 + i;
    up(a[0], h.data(), N * 4);
    NCK(ncclAllReduce(a[0], a[0], N, ncclInt32, ncclSum, c1, s1));
    NCK(ncclAllReduce(a[0], a[0], N, ncclInt32, ncclSum, c1, s2));
    CU(cudaStreamSynchronize(s2));
    CU(cudaStreamSynchronize(s1));
    down(h.data(), a[0], N * 4);
    bad = 0;
    for (int i = 0; i < N; i++) {
        int64_t s = 0;
        for (int r = 0; r < g_world; r++) s += r + 1 + i;
        bad += h[i] != (int32_t)(s * g_world);
    }
    CHECK(bad == 0, "one communicator from two streams: %d wrong elements (ops reordered?)", bad);
    for (int k = 0; k < K; k++) cudaFree(a[k]), cudaFree(b[k]), cudaFree(ga[k]);
}

static void test_groups(ncclComm_t c1, ncclComm_t c2, cudaStream_t s1, cudaStream_t s2) {
    enum { N = 700 };
    const size_t W = (size_t)g_world;
    std::vector<float> h(W * N);
    for (int i = 0; i < N; i++) h[i] = (float)(g_rank * 10 + i % 7);
    float *x = (float *)dalloc(N * 4), *y = (float *)dalloc(N * 4), *g = (float *)dalloc(W * N * 4);
    up(x, h.data(), N * 4);
    NCK(ncclGroupStart());
    NCK(ncclGroupStart());  // nested: only the outermost end enqueues
    NCK(ncclAllReduce(x, y, N, ncclFloat32, ncclMax, c1, s1));
    NCK(ncclGroupEnd());
    NCK(ncclAllGather(x, g, N, ncclFloat32, c2, s2));
    NCK(ncclGroupEnd());
    CU(cudaStreamSynchronize(s1));
    CU(cudaStreamSynchronize(s2));
    std::vector<float> hy(N), hg(W * N);
    down(hy.data(), y, N * 4);
    down(hg.data(), g, W * N * 4);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        bad += hy[i] != (float)((g_world - 1) * 10 + i % 7);
        for (size_t r = 0; r < W; r++) bad += hg[r * N + i] != (float)(r * 10 + i % 7);
    }
    CHECK(bad == 0, "group: %d wrong elements", bad);
    // A refused call fails its whole group (as in NCCL): the valid all-reduce is not enqueued.
    std::vector<float> sentinel(N, -5.0f), after(N);
    up(y, sentinel.data(), N * 4);
    NCK(ncclGroupStart());
    NCK(ncclAllReduce(x, y, N, ncclFloat32, ncclSum, c1, s1));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(x, y, N, ncclNumTypes, ncclSum, c1, s1));
    EXPECT_NCCL(ncclInvalidArgument, ncclGroupEnd());
    CU(cudaStreamSynchronize(s1));
    down(after.data(), y, N * 4);
    CHECK(after == sentinel, "a failed group enqueued its valid collective");
    EXPECT_NCCL(ncclInvalidUsage, ncclGroupEnd());  // not in a group
    cudaFree(x), cudaFree(y), cudaFree(g);
}

static void expect_last_error(const char *needle) {
    const char *m = ncclGetLastError(NULL);
    CHECK(m && strstr(m, needle), "ncclGetLastError \"%s\" should mention \"%s\"", m ? m : "(null)", needle);
}

// Refused at the call with NCCL's codes; refused calls leave every rank in step.
static void test_rejections(ncclComm_t c, cudaStream_t st) {
    const size_t W = (size_t)g_world;
    float *d = (float *)dalloc(64 * 4 * W), host[64];
    float *pinned = NULL;
    CU(cudaMallocHost((void **)&pinned, 64 * 4));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, NULL, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, (ncclComm_t)(void *)host, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclNumTypes, ncclSum, c, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, (ncclDataType_t)-1, ncclSum, c, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, ncclNumOps, c, st));
    expect_last_error("unknown to this communicator");
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, (ncclRedOp_t)-1, c, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclBroadcast(d, d, 4, ncclFloat32, g_world, c, st));
    expect_last_error("invalid root");
    EXPECT_NCCL(ncclInvalidArgument, ncclBroadcast(d, d, 4, ncclFloat32, -1, c, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclReduce(d, d, 4, ncclFloat32, ncclSum, g_world, c, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(host, d, 4, ncclFloat32, ncclSum, c, st));
    expect_last_error("not device memory");
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, pinned, 4, ncclFloat32, ncclSum, c, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 65 * W, ncclFloat32, ncclSum, c, st));  // past the end
    if (g_world > 1) {
        // The all-gather's receive buffer holds W blocks; one block's room is not enough.
        float *small = (float *)dalloc(8 * 4);
        EXPECT_NCCL(ncclInvalidArgument, ncclAllGather(d, small, 8, ncclFloat32, c, st));
        // Overlapping, but not the in-place form (NCCL: undefined).
        EXPECT_NCCL(ncclInvalidArgument, ncclReduceScatter(d, d + 1, 4, ncclFloat32, ncclSum, c, st));
        expect_last_error("in-place");
        cudaFree(small);
    }
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d + 1, 4, ncclFloat32, ncclSum, c, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, SIZE_MAX / 2, ncclFloat32, ncclSum, c, st));
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat8e4m3, ncclSum, c, st));
    int ndev = 0;
    CU(cudaGetDeviceCount(&ndev));
    if (ndev >= 2) {
        cudaStream_t other;
        float *d1 = NULL;
        CU(cudaSetDevice(1));
        CU(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
        CU(cudaMalloc((void **)&d1, 16 * 4));
        CU(cudaSetDevice(0));
        EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, c, other));
        expect_last_error("device");
        EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d1, d1, 4, ncclFloat32, ncclSum, c, st));
        expect_last_error("device memory of device 1");
        CU(cudaStreamDestroy(other));
        cudaFree(d1);
    }
    int n = 0;
    EXPECT_NCCL(ncclInvalidArgument, ncclCommCount(c, NULL));
    EXPECT_NCCL(ncclInvalidArgument, ncclCommGetAsyncError(c, NULL));
    EXPECT_NCCL(ncclInvalidArgument, ncclCommCount(NULL, &n));
    EXPECT_NCCL(ncclInvalidArgument, ncclGetVersion(NULL));
    EXPECT_NCCL(ncclInvalidArgument, ncclGetUniqueId(NULL));
    ncclComm_t bad = (ncclComm_t)(void *)host;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    EXPECT_NCCL(ncclInvalidArgument, ncclCommInitRank(&bad, 2, id, 0));  // not an id of ncclGetUniqueId
    CHECK(bad == NULL, "a failed ncclCommInitRank must set *comm = NULL");
    NCK(ncclGetUniqueId(&id));
    EXPECT_NCCL(ncclInvalidArgument, ncclCommInitRank(&bad, 0, id, 0));
    EXPECT_NCCL(ncclInvalidArgument, ncclCommInitRank(&bad, 2, id, 2));
    EXPECT_NCCL(ncclInvalidArgument, ncclCommInitRank(&bad, 2, id, -1));
    EXPECT_NCCL(ncclInvalidArgument, ncclCommInitRank(NULL, 1, id, 0));
    // ncclAvg on integer types is allowed (NCCL: sum, then divide): checked by the reductions.
    run_case(c, st, AR, ncclInt64, ncclAvg, 0, 9, false);  // and every rank is still in step
    cudaFreeHost(pinned);
    cudaFree(d);
}

static void test_lifecycle(ncclComm_t c1, ncclComm_t c2) {
    NCK(ncclCommFinalize(c1));
    EXPECT_NCCL(ncclInvalidArgument, ncclCommFinalize(c1));  // twice
    NCK(ncclCommDestroy(c1));
    NCK(ncclCommDestroy(c2));  // finalizes itself
    EXPECT_NCCL(ncclInvalidArgument, ncclCommDestroy(c1));
    float *d = (float *)dalloc(16);
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, c2, NULL));
    expect_last_error("destroyed");
    cudaFree(d);
    NCK(ncclCommDestroy(NULL));
    NCK(ncclCommAbort(NULL));
    NCK(ncclCommFinalize(NULL));
}

static void scenario_full(void) {
    ncclUniqueId ids[NIDS];
    exchange_ids(ids);
    ncclComm_t c1 = NULL, c2 = NULL;
    NCK(ncclCommInitRank(&c1, g_world, ids[0], g_rank));
    NCK(ncclCommInitRank(&c2, g_world, ids[1], g_rank));
    if (!c1 || !c2) _exit(3);
    cudaStream_t s1, s2;
    CU(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    test_queries(c1);
    // ZT_EMU_NCCL_STAGING_BYTES=4096 (set by the parent): 1500 elements of 8 bytes are three
    // chunks, a reduce-scatter at W = 3 nine.
    const size_t sizes[] = {7, 1500};
    test_collectives(c1, s1, sizes, 2);
    run_case(c1, NULL, AR, ncclFloat32, ncclSum, 0, 33, false);  // the legacy stream
    test_zero(c1, s1);
    test_concurrent(c1, c2, s1, s2);
    test_groups(c1, c2, s1, s2);
    test_rejections(c1, s1);
    test_lifecycle(c1, c2);
    CU(cudaStreamDestroy(s1));
    CU(cudaStreamDestroy(s2));
}

// The default 4 MiB staging: transfers several times larger.
static void scenario_large(void) {
    ncclUniqueId ids[NIDS];
    exchange_ids(ids);
    ncclComm_t c = NULL;
    NCK(ncclCommInitRank(&c, g_world, ids[0], g_rank));
    if (!c) _exit(3);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    run_case(c, st, AR, ncclFloat32, ncclSum, 0, (size_t)3 << 20, false);      // 12 MiB
    run_case(c, st, RS, ncclBfloat16, ncclSum, 0, (size_t)1 << 20, true);      // 2 MiB per block
    run_case(c, st, AG, ncclFloat64, ncclSum, 0, ((size_t)1 << 20) + 3, false);  // 8 MiB per rank
    run_case(c, st, BC, ncclUint8, ncclSum, g_world - 1, ((size_t)9 << 20) + 1, true);
    run_case(c, st, RD, ncclInt64, ncclAvg, 0, ((size_t)1 << 20) + 5, false);
    NCK(ncclCommDestroy(c));
    CU(cudaStreamDestroy(st));
}

// Waits for the communicator's asynchronous error (the watchdog's view), within `limit` s.
static ncclResult_t await_async(ncclComm_t c, double limit, double *took) {
    double t0 = now_s();
    ncclResult_t ae = ncclSuccess;
    while (now_s() - t0 < limit) {
        if (ncclCommGetAsyncError(c, &ae) != ncclSuccess) return ncclInternalError;
        if (ae != ncclSuccess) break;
        usleep(10000);
    }
    *took = now_s() - t0;
    return ae;
}

// After the error the collective stays blocked (as NCCL's kernel would) until ncclCommAbort.
static void abort_and_drain(ncclComm_t c, cudaStream_t st) {
    CHECK(cudaStreamQuery(st) == cudaErrorNotReady, "the failed collective should wait for ncclCommAbort");
    (void)cudaGetLastError();
    double t0 = now_s();
    NCK(ncclCommAbort(c));
    CU(cudaStreamSynchronize(st));
    CHECK(now_s() - t0 < 3, "ncclCommAbort + synchronize took %.1f s", now_s() - t0);
    float x;
    EXPECT_NCCL(ncclInvalidArgument, ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, st));  // gone
}

// A rank is killed; the survivors' waits turn into ncclRemoteError naming it.
static void scenario_death(void) {
    ncclUniqueId ids[NIDS];
    exchange_ids(ids);
    ncclComm_t c = NULL;
    NCK(ncclCommInitRank(&c, g_world, ids[0], g_rank));
    if (!c) _exit(3);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    run_case(c, st, AR, ncclInt32, ncclSum, 0, 100, false);
    const int victim = g_world - 1;
    if (g_rank == victim) {
        fflush(stderr);
        raise(SIGKILL);
    }
    float *d = (float *)dalloc(1000 * 4);
    zero(d, 1000 * 4);
    NCK(ncclAllReduce(d, d, 1000, ncclFloat32, ncclSum, c, st));
    double took = 0;
    ncclResult_t ae = await_async(c, 10, &took);
    CHECK(ae == ncclRemoteError, "async error %d after %.1f s, expected ncclRemoteError", (int)ae, took);
    CHECK(took < 5, "the dead peer was noticed after %.1f s", took);
    char want[32];
    snprintf(want, sizeof want, "rank %d", victim);
    const char *m = ncclGetLastError(c);
    CHECK(m && strstr(m, want) && strstr(m, "exited"), "ncclGetLastError(comm) \"%s\" should name %s", m ? m : "", want);
    EXPECT_NCCL(ncclRemoteError, ncclAllReduce(d, d, 1000, ncclFloat32, ncclSum, c, st));  // the comm's error
    EXPECT_NCCL(ncclRemoteError, ncclCommDestroy(c));  // NCCL: not destroyed; abort it
    abort_and_drain(c, st);
    cudaFree(d);
}

// A rank aborts its communicator; the other's wait turns into ncclRemoteError.
static void scenario_peer_abort(void) {
    ncclUniqueId ids[NIDS];
    exchange_ids(ids);
    ncclComm_t c = NULL;
    NCK(ncclCommInitRank(&c, g_world, ids[0], g_rank));
    if (!c) _exit(3);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    if (g_rank == 1) {
        NCK(ncclCommAbort(c));
        return;
    }
    float *d = (float *)dalloc(64);
    zero(d, 64);
    NCK(ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, c, st));
    double took = 0;
    ncclResult_t ae = await_async(c, 10, &took);
    CHECK(ae == ncclRemoteError && took < 5, "async error %d after %.1f s", (int)ae, took);
    const char *m = ncclGetLastError(c);
    CHECK(m && strstr(m, "rank 1") && strstr(m, "aborted"), "ncclGetLastError(comm): \"%s\"", m ? m : "");
    abort_and_drain(c, st);
    cudaFree(d);
}

// Ranks issue different collectives: both get ncclInvalidUsage naming the two calls.
static void scenario_mismatch(void) {
    ncclUniqueId ids[NIDS];
    exchange_ids(ids);
    ncclComm_t c = NULL;
    NCK(ncclCommInitRank(&c, g_world, ids[0], g_rank));
    if (!c) _exit(3);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float *d = (float *)dalloc(64 * 4);
    zero(d, 64 * 4);
    if (g_rank == 0) NCK(ncclAllReduce(d, d, 8, ncclFloat32, ncclSum, c, st));
    else NCK(ncclAllGather(d, d + 8 * g_rank, 8, ncclFloat32, c, st));
    double took = 0;
    ncclResult_t ae = await_async(c, 10, &took);
    CHECK(ae == ncclInvalidUsage, "async error %d after %.1f s, expected ncclInvalidUsage", (int)ae, took);
    const char *m = ncclGetLastError(c);
    CHECK(m && strstr(m, "mismatch") && strstr(m, "ncclAllReduce") && strstr(m, "ncclAllGather"),
          "ncclGetLastError(comm): \"%s\"", m ? m : "");
    abort_and_drain(c, st);
    cudaFree(d);
}

// Alone in a world of 2: ncclSystemError after ZT_EMU_NCCL_INIT_TIMEOUT, with the reason.
static void scenario_init_timeout(void) {
    setenv("ZT_EMU_NCCL_INIT_TIMEOUT", "1", 1);
    for (int rank = 0; rank < 2; rank++) {
        ncclUniqueId id;
        NCK(ncclGetUniqueId(&id));
        ncclComm_t c = (ncclComm_t)(void *)&id;
        double t0 = now_s();
        EXPECT_NCCL(ncclSystemError, ncclCommInitRank(&c, 2, id, rank));
        double took = now_s() - t0;
        CHECK(took >= 0.9 && took < 5, "timed out after %.1f s", took);
        CHECK(c == NULL, "*comm after a failed init");
        expect_last_error("timed out");
    }
}

// ---- the parent: fork the ranks, supervise, reap ----------------------------------------------------
static int count_shm(void) {
    int n = 0;
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    while (struct dirent *e = readdir(d)) n += !strncmp(e->d_name, "ztemu-nccl-", 11);
    closedir(d);
    return n;
}

typedef void (*scenario_fn)(void);

// Runs `fn` in `world` processes; `killed` is the rank expected to die of SIGKILL (or -1).
static int run_world(const char *name, scenario_fn fn, int world, const char *staging, int killed) {
    double t0 = now_s();
    int fds[8][2];
    pid_t pids[8];
    for (int r = 0; r < world; r++)
        if (pipe(fds[r]) != 0) {
            perror("pipe");
            return 1;
        }
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[r] == 0) {
            g_rank = r;
            g_world = world;
            for (int q = 0; q < world; q++) {
                g_pipe_w[q] = fds[q][1];
                if (q != r) close(fds[q][0]);
            }
            g_pipe_r = fds[r][0];
            if (staging) setenv("ZT_EMU_NCCL_STAGING_BYTES", staging, 1);
            else unsetenv("ZT_EMU_NCCL_STAGING_BYTES");
            alarm(170);  // a hang must not outlive the parent's patience
            fn();
            if (g_rank == 0 && g_cases) printf("  %s: %d collectives checked against the host\n", name, g_cases);
            fflush(stdout);
            fflush(stderr);
            _exit(g_fail ? 1 : 0);
        }
    }
    for (int r = 0; r < world; r++) close(fds[r][0]), close(fds[r][1]);
    int bad = 0, left = world;
    bool done[8] = {false};
    while (left > 0) {
        int status = 0;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p == 0) {
            if (now_s() - t0 > 180) {
                fprintf(stderr, "%s: timed out; killing the ranks\n", name);
                for (int r = 0; r < world; r++)
                    if (!done[r]) kill(pids[r], SIGKILL);
                bad++;
                t0 = 1e18;  // report once, then reap
            }
            usleep(2000);
            continue;
        }
        if (p < 0) break;
        for (int r = 0; r < world; r++)
            if (pids[r] == p) {
                done[r] = true;
                left--;
                bool ok = r == killed ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                                      : WIFEXITED(status) && WEXITSTATUS(status) == 0;
                if (!ok) {
                    fprintf(stderr, "%s: rank %d ended with %s %d\n", name, r,
                            WIFEXITED(status) ? "exit code" : "signal",
                            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                    bad++;
                }
            }
    }
    printf("%s %s (world %d, %.1f s)\n", bad ? "FAIL" : "PASS", name, world, now_s() - t0 < 1e17 ? now_s() - t0 : 0.0);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    int shm_before = count_shm(), failed = 0;
    struct {
        const char *name;
        scenario_fn fn;
        int world;
        const char *staging;
        int killed;
    } runs[] = {
        {"w1", scenario_full, 1, "4096", -1},
        {"w2", scenario_full, 2, "4096", -1},
        {"w3", scenario_full, 3, "4096", -1},
        {"w3-large", scenario_large, 3, NULL, -1},
        {"w2-large", scenario_large, 2, NULL, -1},
        {"init-timeout", scenario_init_timeout, 1, NULL, -1},
        {"peer-death", scenario_death, 3, NULL, 2},
        {"peer-abort", scenario_peer_abort, 2, NULL, -1},
        {"mismatch", scenario_mismatch, 2, NULL, -1},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        if (!only || !strcmp(only, runs[i].name))
            failed += run_world(runs[i].name, runs[i].fn, runs[i].world, runs[i].staging, runs[i].killed);
    int shm_after = count_shm();
    if (shm_after != shm_before) {
        printf("FAIL /dev/shm: %d ztemu-nccl-* entries before, %d after\n", shm_before, shm_after);
        failed++;
    }
    printf("%s: %d run(s) failed\n", failed ? "FAILED" : "ALL PASSED", failed);
    return failed ? 1 : 0;
}
