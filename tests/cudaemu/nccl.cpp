// cudaemu: the NCCL emulation behind include/nccl.h. Each collective is one op on its stream,
// run in stream order by the emulator's stream thread; the rank processes (one host, started by
// mpirun or forked by a test) meet in POSIX shared memory. Semantics: NCCL 2.28.9's.
//
// Why shared memory and not MPI: the product bootstraps MPI with MPI_THREAD_FUNNELED (only its
// main thread may call MPI) and these ops run on stream threads. MPI carries only the
// ncclUniqueId (comm_nccl.c's MPI_Bcast); the id names the segment.
//
// Segment: a header, one 64-byte record per rank (pid, state, arrive/depart step counters,
// the descriptor of the collective at `arrive`), then one staging slot per rank. A collective
// is cut into chunks that fit a slot; chunk s is one step:
//   wait until every rank departed step s-1 (nobody still reads my slot), stage my part,
//   arrive = s (release), wait until every rank arrived at s (acquire), compare the
//   descriptors (a mismatch is the program's bug: named, ncclInvalidUsage), compute my output
//   from all slots, depart = s.
// Reductions run in rank order 0, 1, ..., W-1 on every rank, so every rank gets the same bits.
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

#include "emu.h"

namespace {

// ---- small utilities ------------------------------------------------------------------------
double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Spin briefly (a peer is usually a few microseconds behind), then yield, then sleep with a
// doubling interval up to 1 ms: waiting ranks must not eat the CPUs the others need.
struct backoff {
    unsigned spins = 0;
    long ns = 1000;
    void pause() {
        if (spins < 64) {
            spins++;
            cpu_relax();
            return;
        }
        if (spins < 96) {
            spins++;
            sched_yield();
            return;
        }
        timespec ts = {0, ns};
        nanosleep(&ts, nullptr);
        ns = std::min(ns * 2, 1000000L);
    }
};

void sleep_ms(long ms) {
    timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
}

template <class T> T ld_acq(const T *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
template <class T> T ld_rlx(const T *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
template <class T> void st_rel(T *p, T v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
template <class T> void st_rlx(T *p, T v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

// NCCL prints its warnings with NCCL_DEBUG=WARN (or INFO...); so does the emulation, and
// with ZT_EMU_VERBOSE=1 like the rest of cudaemu.
bool debug_on() {
    static const bool on = [] {
        const char *d = getenv("NCCL_DEBUG");
        return (d && *d && strcasecmp(d, "VERSION") != 0) || zt_emu::verbose();
    }();
    return on;
}

// ---- call-time errors: NCCL's ncclGetLastError text ------------------------------------------
// NCCL keeps one global string; here errors of a call are per calling thread (the watchdog
// thread of comm_nccl.c reads messages while the main thread may be failing a call: a shared
// buffer would tear), and asynchronous errors are per communicator (written once, below).
thread_local char t_last_error[1024];

__attribute__((format(printf, 2, 3))) ncclResult_t call_error(ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
    va_end(ap);
    if (debug_on()) fprintf(stderr, "cudaemu: nccl: [pid %d] WARN %s\n", (int)getpid(), t_last_error);
    return r;
}

// ---- types and operations ---------------------------------------------------------------------
size_t type_size(int dt) {
    switch (dt) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *type_name(int dt) {
    static const char *const n[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",     "ncclUint32",
                                    "ncclInt64",   "ncclUint64",  "ncclFloat16",   "ncclFloat32",
                                    "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
    return dt >= 0 && dt < ncclNumTypes ? n[dt] : "invalid type";
}

const char *op_name(int op) {
    static const char *const n[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
    return op >= 0 && op < ncclNumOps ? n[op] : "invalid op";
}

enum coll_kind { K_ALLGATHER, K_REDUCESCATTER, K_ALLREDUCE, K_BROADCAST, K_REDUCE };
const char *const kind_name[] = {"ncclAllGather", "ncclReduceScatter", "ncclAllReduce", "ncclBroadcast",
                                 "ncclReduce"};
bool kind_reduces(int k) { return k == K_REDUCESCATTER || k == K_ALLREDUCE || k == K_REDUCE; }
bool kind_has_root(int k) { return k == K_BROADCAST || k == K_REDUCE; }

// fp16 and bf16 are computed in float and rounded back to the type after every operation
// (round to nearest even), which is what NCCL's kernels do (__hadd / __float2bfloat16 after
// each pairwise step). float has more than twice their precision plus two bits, so rounding
// the float result again gives the correctly rounded 16-bit result.
float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) {
        float v = (float)m * 0x1p-24f;  // zero or subnormal: exact
        return sign ? -v : v;
    }
    x = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)  // inf, or nan (quieted, top payload bits kept)
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);  // >= 65520 rounds to inf
    if (ax < 0x38800000u) {                                    // below 2^-14: a subnormal or 0
        if (ax < 0x33000000u) return (uint16_t)sign;           // below 2^-25 (2^-25 ties to 0)
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000, shift = 126 - e;  // 14..24
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax - 0x38000000u;  // rebias the exponent 127 -> 15
    r += 0xfff + ((r >> 13) & 1);
    return (uint16_t)(sign | (r >> 13));
}

float b2f(uint16_t b) {
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t f2b(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);  // quiet nan
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

// A product rounded to float/double on its own: never fused with the following add into an
// FMA (GCC contracts across statements where the target has FMA), as NCCL's premultiply is a
// separate multiply.
float round_f32(float x) {
    volatile float v = x;
    return v;
}
double round_f64(double x) {
    volatile double v = x;
    return v;
}

template <class T> T ld_elt(const char *p, size_t i) {
    T v;
    memcpy(&v, p + i * sizeof(T), sizeof v);
    return v;
}
template <class T> void st_elt(char *p, size_t i, T v) { memcpy(p + i * sizeof(T), &v, sizeof v); }

// Integer types: wrapping arithmetic in the type itself (done in the unsigned twin, where
// overflow is defined). ncclAvg = the wrapped sum divided by W afterwards, truncating toward
// zero (NCCL's FuncSumPostDiv: the magnitude is divided, the sign kept).
template <class T> struct int_p {
    using V = T;
    using U = typename std::make_unsigned<T>::type;
    static constexpr bool is_int = true;
    static V ld(const char *p, size_t i) { return ld_elt<T>(p, i); }
    static void st(char *p, size_t i, V v) { st_elt<T>(p, i, v); }
    static V add(V a, V b) { return (T)(U)((U)a + (U)b); }
    static V mul(V a, V b) { return (T)(U)((U)a * (U)b); }
    static V mn(V a, V b) { return b < a ? b : a; }
    static V mx(V a, V b) { return a < b ? b : a; }
    static V avg_scale(int) { return 0; }
    static V premul(V x, V) { return x; }
    static V postdiv(V x, int n) {
        if (std::is_signed<T>::value && x < 0) {
            U mag = (U)((U)0 - (U)x), q = (U)(mag / (U)n);
            return (T)(U)((U)0 - q);
        }
        return (T)(U)((U)x / (U)n);
    }
};

// Floating types. min/max are fminf/fmaxf (NCCL's: a NaN loses to a number). ncclAvg is
// NCCL's pre-multiplied sum: every input times the type's rounding of 1/W (for fp16/bf16
// NCCL converts float(1.0/W) to the type), then summed.
struct f32_p {
    using V = float;
    static constexpr bool is_int = false;
    static V ld(const char *p, size_t i) { return ld_elt<float>(p, i); }
    static void st(char *p, size_t i, V v) { st_elt<float>(p, i, v); }
    static V add(V a, V b) { return a + b; }
    static V mul(V a, V b) { return a * b; }
    static V mn(V a, V b) { return fminf(a, b); }
    static V mx(V a, V b) { return fmaxf(a, b); }
    static V avg_scale(int n) { return (float)(1.0 / n); }
    static V premul(V x, V s) { return round_f32(x * s); }
    static V postdiv(V x, int) { return x; }
};

struct f64_p {
    using V = double;
    static constexpr bool is_int = false;
    static V ld(const char *p, size_t i) { return ld_elt<double>(p, i); }
    static void st(char *p, size_t i, V v) { st_elt<double>(p, i, v); }
    static V add(V a, V b) { return a + b; }
    static V mul(V a, V b) { return a * b; }
    static V mn(V a, V b) { return fmin(a, b); }
    static V mx(V a, V b) { return fmax(a, b); }
    static V avg_scale(int n) { return 1.0 / n; }
    static V premul(V x, V s) { return round_f64(x * s); }
    static V postdiv(V x, int) { return x; }
};

// Values are floats that the 16-bit type represents exactly; every result is rounded back.
template <float (*TO)(uint16_t), uint16_t (*FROM)(float)> struct f16_like_p {
    using V = float;
    static constexpr bool is_int = false;
    static V rnd(float x) { return TO(FROM(x)); }
    static V ld(const char *p, size_t i) { return TO(ld_elt<uint16_t>(p, i)); }
    static void st(char *p, size_t i, V v) { st_elt<uint16_t>(p, i, FROM(v)); }
    static V add(V a, V b) { return rnd(a + b); }
    static V mul(V a, V b) { return rnd(a * b); }
    static V mn(V a, V b) { return fminf(a, b); }
    static V mx(V a, V b) { return fmaxf(a, b); }
    static V avg_scale(int n) { return rnd((float)(1.0 / n)); }
    static V premul(V x, V s) { return rnd(x * s); }
    static V postdiv(V x, int) { return x; }
};
using f16_p = f16_like_p<h2f, f2h>;
using bf16_p = f16_like_p<b2f, f2b>;

using reduce_fn = void (*)(char *out, const char *const *in, int w, size_t n);

// out[i] = in[0][i] op in[1][i] op ... op in[w-1][i], left to right, rounded per step.
template <class P, int OP> void reduce_t(char *out, const char *const *in, int w, size_t n) {
    using V = typename P::V;
    const V s = P::avg_scale(w);
    for (size_t i = 0; i < n; i++) {
        V acc = P::ld(in[0], i);
        if (OP == ncclAvg && !P::is_int) acc = P::premul(acc, s);
        for (int r = 1; r < w; r++) {
            V x = P::ld(in[r], i);
            switch (OP) {
            case ncclSum: acc = P::add(acc, x); break;
            case ncclProd: acc = P::mul(acc, x); break;
            case ncclMax: acc = P::mx(acc, x); break;
            case ncclMin: acc = P::mn(acc, x); break;
            default: acc = P::add(acc, P::is_int ? x : P::premul(x, s)); break;
            }
        }
        if (OP == ncclAvg && P::is_int) acc = P::postdiv(acc, w);
        P::st(out, i, acc);
    }
}

template <class P> reduce_fn pick_op(int op) {
    switch (op) {
    case ncclSum: return reduce_t<P, ncclSum>;
    case ncclProd: return reduce_t<P, ncclProd>;
    case ncclMax: return reduce_t<P, ncclMax>;
    case ncclMin: return reduce_t<P, ncclMin>;
    case ncclAvg: return reduce_t<P, ncclAvg>;
    default: return nullptr;
    }
}

reduce_fn pick_reduce(int dt, int op) {
    switch (dt) {
    case ncclInt8: return pick_op<int_p<int8_t>>(op);
    case ncclUint8: return pick_op<int_p<uint8_t>>(op);
    case ncclInt32: return pick_op<int_p<int32_t>>(op);
    case ncclUint32: return pick_op<int_p<uint32_t>>(op);
    case ncclInt64: return pick_op<int_p<int64_t>>(op);
    case ncclUint64: return pick_op<int_p<uint64_t>>(op);
    case ncclFloat16: return pick_op<f16_p>(op);
    case ncclFloat32: return pick_op<f32_p>(op);
    case ncclFloat64: return pick_op<f64_p>(op);
    case ncclBfloat16: return pick_op<bf16_p>(op);
    default: return nullptr;  // fp8: refused at the call
    }
}

// ---- the shared segment ----------------------------------------------------------------------
const uint64_t SEG_MAGIC = 0x31434e4355454d5aull;  // "ZMEUCNC1"
const char ID_TAG[8] = "ztemu-1";
const size_t DEFAULT_STAGING = (size_t)4 << 20;

struct id_fmt {  // the bytes of an ncclUniqueId
    char tag[8];
    uint8_t rnd[16];
    int32_t pid;
};
static_assert(sizeof(id_fmt) <= NCCL_UNIQUE_ID_BYTES, "id");

enum { PEER_OK = 0, PEER_ABORTED = 1, PEER_FAILED = 2 };

struct alignas(64) rank_rec {
    int32_t pid;      // 0 until the rank joined
    int32_t state;    // PEER_*: ncclCommAbort, or an asynchronous error of its own
    uint64_t arrive;  // last step whose contribution is in this rank's slot
    uint64_t depart;  // last step this rank finished reading the slots of
    // the collective of step `arrive` (written before arrive, read after it)
    uint64_t d_count;
    uint64_t d_seq;
    int32_t d_kind, d_dt, d_op, d_root;
};
static_assert(sizeof(rank_rec) == 64, "rank record");

struct alignas(64) seg_hdr {
    uint64_t magic;  // stored last by rank 0 (release): the header is complete
    uint64_t total_bytes;
    uint64_t staging_bytes;  // per rank
    uint64_t staging_off;
    int32_t nranks;
    int32_t joined;
};

enum { LIVE = 0, FINALIZED = 1, DESTROYED = 2, ABORTED = 3 };
const uint64_t COMM_MAGIC = 0x6e63636c2d656d75ull;

}  // namespace

// The communicator. Never freed: a destroyed or aborted one stays as a tombstone, so that a
// stale handle is recognised (ncclInvalidArgument) instead of being a use after free, and so
// that ncclCommAbort from another thread (comm_nccl.c's watchdog) races with nothing that
// frees memory. Only its resources (the mapping, the event) are released.
struct ncclComm {
    uint64_t magic;
    int rank, nranks, device;
    std::atomic<int> state;
    char shm_name[96];
    // world > 1: the mapping (released once, under res_mu)
    seg_hdr *seg;
    size_t seg_bytes;
    rank_rec *ranks;
    char *staging;
    size_t staging_bytes;
    std::mutex res_mu;
    bool released;
    // issue order: tickets are taken, and ops enqueued, under enq_mu
    std::mutex enq_mu;
    uint64_t issued;              // tickets handed out
    std::atomic<uint64_t> done;   // every op with ticket <= done finished on this rank
    cudaEvent_t order_ev;         // recorded after each op (NCCL's cross-stream serialisation)
    cudaStream_t last_stream;
    bool have_last;
    uint64_t step;  // chunk counter: advanced only by the op whose turn it is
    // ncclCommAbort handshake (Dekker style, sequentially consistent): an op either sees
    // abort_flag before touching the segment, or ncclCommAbort sees it in in_op and waits.
    std::atomic<int> abort_flag;
    std::atomic<int> in_op;
    // the asynchronous error: the first one wins; its text is written before the code is
    // published and never again, so readers on any thread may keep the pointer
    std::atomic<int> async_claim;
    std::atomic<int> async_err;
    char async_msg[768];
};

namespace {

std::mutex g_reg_mu;
std::vector<ncclComm *> g_comms;  // every communicator ever made (tombstones included)
std::atomic<ncclComm *> g_last_async{nullptr};

bool known(const ncclComm *c) {
    std::lock_guard<std::mutex> g(g_reg_mu);
    return std::find(g_comms.begin(), g_comms.end(), c) != g_comms.end();
}

ncclResult_t comm_check(const ncclComm *c, const char *fn) {
    if (!c) return call_error(ncclInvalidArgument, "%s : comm argument is NULL", fn);
    if (!known(c) || c->magic != COMM_MAGIC)
        return call_error(ncclInvalidArgument, "%s : %p is not a communicator made by ncclCommInitRank", fn,
                          (const void *)c);
    int st = c->state.load();
    if (st == DESTROYED) return call_error(ncclInvalidArgument, "%s : comm %p has already been destroyed", fn, (const void *)c);
    if (st == ABORTED)
        return call_error(ncclInvalidArgument, "%s : comm %p was aborted (ncclCommAbort frees it)", fn, (const void *)c);
    return ncclSuccess;
}

__attribute__((format(printf, 4, 5))) void set_async(ncclComm *c, ncclResult_t r, bool always_print, const char *fmt,
                                                     ...) {
    int expect = 0;
    if (!c->async_claim.compare_exchange_strong(expect, 1)) return;  // the first error stays
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->async_msg, sizeof c->async_msg, fmt, ap);
    va_end(ap);
    c->async_err.store((int)r, std::memory_order_release);
    g_last_async.store(c);
    // Peers waiting on this rank see it failed instead of waiting for it forever. Called only
    // from an op (in_op held): the segment is mapped.
    if (c->ranks) st_rel(&c->ranks[c->rank].state, (int32_t)PEER_FAILED);
    if (always_print || debug_on())
        fprintf(stderr, "cudaemu: nccl: rank %d of %d: %s: %s\n", c->rank, c->nranks, ncclGetErrorString(r),
                c->async_msg);
}

// After an asynchronous error NCCL's kernels stay blocked (their peers never come) until
// ncclCommAbort releases them; the host learns of the error from ncclCommGetAsyncError. The
// op does the same: it leaves only when the communicator is aborted, without data.
void hang_until_abort(ncclComm *c) {
    while (!c->abort_flag.load()) sleep_ms(1);
}

bool process_alive(int pid) {
    if (pid <= 0) return true;
    if (kill(pid, 0) == -1 && errno == ESRCH) return false;
    // A killed child its parent has not reaped yet is a zombie, which kill() still finds.
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');  // the state letter follows the command name
    return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

struct coll {
    int kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t op;
    int root;
    ncclComm *comm;
    cudaStream_t stream;
    const void *caller;  // return address of the public call (diagnostics name the program's site)
};

void describe_coll(const coll &k, char *buf, size_t n) {
    char extra[48] = "";
    if (kind_has_root(k.kind)) snprintf(extra, sizeof extra, ", root %d", k.root);
    if (kind_reduces(k.kind))
        snprintf(buf, n, "%s(count %zu, %s, %s%s)", kind_name[k.kind], k.count, type_name(k.dt), op_name(k.op), extra);
    else
        snprintf(buf, n, "%s(count %zu, %s%s)", kind_name[k.kind], k.count, type_name(k.dt), extra);
}

// Waits until every other rank's arrive (or depart) counter reaches `target`. Every 100 ms it
// looks at the ranks it still waits for: one that exited, aborted or failed is a remote error
// (ncclRemoteError, named in ncclGetLastError), after which the op waits for ncclCommAbort.
// Returns false when the communicator was aborted: the op ends without data.
bool wait_peers(ncclComm *c, bool arrive, uint64_t target, const coll &k, uint64_t seq) {
    backoff b;
    double next_look = now_s() + 0.1;
    for (;;) {
        if (c->abort_flag.load()) return false;
        bool all = true;
        for (int r = 0; r < c->nranks && all; r++)
            if (r != c->rank) all = ld_acq(arrive ? &c->ranks[r].arrive : &c->ranks[r].depart) >= target;
        if (all) return true;
        b.pause();
        double t = now_s();
        if (t < next_look) continue;
        next_look = t + 0.1;
        for (int r = 0; r < c->nranks; r++) {
            if (r == c->rank || ld_acq(arrive ? &c->ranks[r].arrive : &c->ranks[r].depart) >= target) continue;
            int st = ld_acq(&c->ranks[r].state), pid = ld_acq(&c->ranks[r].pid);
            const char *why = st == PEER_ABORTED   ? "aborted the communicator (ncclCommAbort)"
                              : st == PEER_FAILED  ? "failed with an asynchronous error of its own"
                              : !process_alive(pid) ? "exited"
                                                    : nullptr;
            if (!why) continue;
            char what[160];
            describe_coll(k, what, sizeof what);
            set_async(c, ncclRemoteError, false,
                      "rank %d (pid %d) %s while rank %d waited for it in %s, collective #%llu on this communicator",
                      r, pid, why, c->rank, what, (unsigned long long)seq);
            hang_until_abort(c);
            return false;
        }
    }
}

// After the arrive barrier: every rank must be at the same collective. NCCL would hang or
// mix the data; the emulation names both calls.
bool same_collective(ncclComm *c, const coll &k, uint64_t seq) {
    for (int r = 0; r < c->nranks; r++) {
        if (r == c->rank) continue;
        const rank_rec *p = &c->ranks[r];
        coll o = k;
        o.kind = ld_rlx(&p->d_kind);
        o.dt = (ncclDataType_t)ld_rlx(&p->d_dt);
        o.op = (ncclRedOp_t)ld_rlx(&p->d_op);
        o.root = ld_rlx(&p->d_root);
        o.count = ld_rlx(&p->d_count);
        bool same = o.kind == k.kind && o.dt == k.dt && o.count == k.count &&
                    (!kind_reduces(k.kind) || o.op == k.op) && (!kind_has_root(k.kind) || o.root == k.root);
        if (same) continue;
        char mine[160], theirs[160];
        describe_coll(k, mine, sizeof mine);
        describe_coll(o, theirs, sizeof theirs);
        set_async(c, ncclInvalidUsage, true,
                  "collective mismatch: rank %d issued %s (its collective #%llu on this communicator) while rank %d "
                  "issued %s (its #%llu): every rank must issue the same collectives with the same count, type, op "
                  "and root, in the same order",
                  c->rank, mine, (unsigned long long)seq, r, theirs, (unsigned long long)ld_rlx(&p->d_seq));
        return false;
    }
    return true;
}

char *slot(ncclComm *c, int r) { return c->staging + (size_t)r * c->staging_bytes; }

// The body of one collective, on the stream thread, when it is this communicator's turn.
void run_coll(ncclComm *c, const coll &k, uint64_t seq) {
    const size_t es = type_size(k.dt), W = (size_t)c->nranks, me = (size_t)c->rank, n = k.count;
    const char *send = (const char *)k.send;
    char *recv = (char *)k.recv;
    const bool root = (size_t)k.root == me;
    if (n == 0) return;  // NCCL discards empty collectives; this one only kept its place in order
    // The exact footprint, declared before any byte is touched (in place: both, overlapping).
    switch (k.kind) {
    case K_ALLGATHER:
        zt_emu::record_read(send, n * es);
        zt_emu::record_write(recv, W * n * es);
        break;
    case K_REDUCESCATTER:
        zt_emu::record_read(send, W * n * es);
        zt_emu::record_write(recv, n * es);
        break;
    case K_ALLREDUCE:
        zt_emu::record_read(send, n * es);
        zt_emu::record_write(recv, n * es);
        break;
    case K_BROADCAST:
        if (root) zt_emu::record_read(send, n * es);
        zt_emu::record_write(recv, n * es);
        break;
    case K_REDUCE:
        zt_emu::record_read(send, n * es);
        if (root) zt_emu::record_write(recv, n * es);
        break;
    }
    reduce_fn red = kind_reduces(k.kind) ? pick_reduce(k.dt, k.op) : nullptr;
    if (W == 1) {
        // One rank: every reduction of a single input is the input (ncclAvg: x * 1.0, x / 1).
        if (recv && recv != send) memmove(recv, send, n * es);
        return;
    }
    // Elements per step: a reduce-scatter stages a piece of each of the W blocks.
    const size_t per = k.kind == K_REDUCESCATTER ? c->staging_bytes / (W * es) : c->staging_bytes / es;
    std::vector<const char *> ins(W);
    rank_rec *my = &c->ranks[me];
    for (size_t off = 0; off < n; off += per) {
        const size_t m = std::min(per, n - off);
        const uint64_t step = ++c->step;
        if (!wait_peers(c, false, step - 1, k, seq)) return;  // my slot is free again
        char *mine = slot(c, (int)me);
        switch (k.kind) {
        case K_ALLGATHER:
        case K_ALLREDUCE:
        case K_REDUCE: memcpy(mine, send + off * es, m * es); break;
        case K_BROADCAST:
            if (root) memcpy(mine, send + off * es, m * es);
            break;
        case K_REDUCESCATTER:
            for (size_t q = 0; q < W; q++) memcpy(mine + q * m * es, send + (q * n + off) * es, m * es);
            break;
        }
        st_rlx(&my->d_kind, (int32_t)k.kind);
        st_rlx(&my->d_dt, (int32_t)k.dt);
        st_rlx(&my->d_op, (int32_t)k.op);
        st_rlx(&my->d_root, (int32_t)k.root);
        st_rlx(&my->d_count, (uint64_t)n);
        st_rlx(&my->d_seq, seq);
        st_rel(&my->arrive, step);
        if (!wait_peers(c, true, step, k, seq)) return;
        if (!same_collective(c, k, seq)) {
            hang_until_abort(c);
            return;
        }
        switch (k.kind) {
        case K_ALLGATHER:
            for (size_t r = 0; r < W; r++) {
                char *dst = recv + (r * n + off) * es;
                if (dst != send + off * es) memcpy(dst, slot(c, (int)r), m * es);  // in place: mine is there
            }
            break;
        case K_BROADCAST:
            if (!(root && recv == send)) memcpy(recv + off * es, slot(c, k.root), m * es);  // in place: there
            break;
        case K_REDUCESCATTER:
            for (size_t r = 0; r < W; r++) ins[r] = slot(c, (int)r) + me * m * es;
            red(recv + off * es, ins.data(), (int)W, m);
            break;
        case K_ALLREDUCE:
        case K_REDUCE:
            if (k.kind == K_REDUCE && !root) break;
            for (size_t r = 0; r < W; r++) ins[r] = slot(c, (int)r);
            red(recv + off * es, ins.data(), (int)W, m);
            break;
        }
        st_rel(&my->depart, step);
    }
}

bool wait_turn(ncclComm *c, uint64_t ticket) {
    backoff b;
    while (c->done.load(std::memory_order_acquire) + 1 < ticket) {
        if (c->abort_flag.load()) return false;
        b.pause();
    }
    return true;
}

void mark_done(ncclComm *c, uint64_t ticket) {
    uint64_t d = c->done.load();
    while (d < ticket && !c->done.compare_exchange_weak(d, ticket)) {
    }
}

ncclResult_t cuda_failed(const char *fn, const char *call, cudaError_t e) {
    return call_error(ncclUnhandledCudaError, "%s : %s failed: %s (%s)", fn, call, cudaGetErrorName(e),
                      cudaGetErrorString(e));
}

// Enqueue one checked collective. Ops of one communicator must run in their enqueue order on
// every rank, also when the program uses the communicator from two streams: each op waits
// (on its stream thread) for the previous ticket to finish, and, as NCCL serialises a
// communicator's launches across streams, the stream of op k waits for an event recorded
// after op k-1, so the emulator's ordering checker sees that edge too.
ncclResult_t enqueue_coll_impl(const coll &k) {
    ncclComm *c = k.comm;
    const char *fn = kind_name[k.kind];
    std::lock_guard<std::mutex> g(c->enq_mu);
    if (c->state.load() != LIVE || c->abort_flag.load())
        return call_error(ncclInvalidArgument, "%s : comm %p was destroyed, finalized or aborted before ncclGroupEnd",
                          fn, (void *)c);
    // NCCL launches on the communicator's device, where a NULL stream is that device's legacy
    // stream; the emulator's NULL is the current device's.
    int cur = -1;
    bool switched = false;
    if (!k.stream && cudaGetDevice(&cur) == cudaSuccess && cur != c->device) {
        if (cudaSetDevice(c->device) != cudaSuccess) return call_error(ncclUnhandledCudaError, "%s : cudaSetDevice(%d) failed", fn, c->device);
        switched = true;
    }
    ncclResult_t res = ncclSuccess;
    cudaError_t e;
    if (c->have_last && c->last_stream != k.stream &&
        (e = cudaStreamWaitEvent(k.stream, c->order_ev, 0)) != cudaSuccess) {
        res = cuda_failed(fn, "cudaStreamWaitEvent(stream, communicator's order event)", e);
    } else {
        const uint64_t ticket = ++c->issued;
        e = zt_emu::enqueue_from(k.stream, fn, __FILE__, __LINE__, k.caller, [c, k, ticket]() -> cudaError_t {
            c->in_op.fetch_add(1);
            if (!c->abort_flag.load() && wait_turn(c, ticket)) {
                if (c->async_err.load(std::memory_order_acquire) == ncclSuccess) {
                    try {
                        run_coll(c, k, ticket);
                    } catch (const zt_emu::fault_exit &) {  // a bad buffer: the emulator's device fault
                        mark_done(c, ticket);
                        c->in_op.fetch_sub(1);
                        throw;
                    } catch (...) {  // nothing else may escape into the stream thread
                        set_async(c, ncclSystemError, true, "%s: out of host memory on the stream thread", kind_name[k.kind]);
                    }
                } else if (k.count)
                    hang_until_abort(c);  // a communicator in error: as its NCCL kernels would
            }
            mark_done(c, ticket);
            c->in_op.fetch_sub(1);
            return cudaSuccess;
        });
        if (e != cudaSuccess) {
            c->issued--;  // nothing took this ticket: the next op must not wait for it
            res = call_error(ncclUnhandledCudaError, "%s : the collective could not be enqueued on stream %s: %s (%s)",
                             fn, zt_emu::stream_name(k.stream), cudaGetErrorName(e), cudaGetErrorString(e));
        } else if ((e = cudaEventRecord(c->order_ev, k.stream)) != cudaSuccess) {
            c->have_last = false;
            res = cuda_failed(fn, "cudaEventRecord(communicator's order event, stream)", e);
        } else {
            c->last_stream = k.stream;
            c->have_last = true;
        }
    }
    if (switched) cudaSetDevice(cur);
    return res;
}

ncclResult_t enqueue_coll(const coll &k) {
    try {  // the op's closure is allocated: no C++ exception crosses the C API
        return enqueue_coll_impl(k);
    } catch (...) {
        return call_error(ncclSystemError, "%s : could not enqueue the collective (out of host memory?)", kind_name[k.kind]);
    }
}

// ---- groups: thread-local, nesting --------------------------------------------------------------
thread_local int t_group_depth;
thread_local ncclResult_t t_group_err;
thread_local std::vector<coll> t_group_ops;

ncclResult_t group_err(ncclResult_t r) {
    if (r != ncclSuccess && t_group_depth > 0 && t_group_err == ncclSuccess) t_group_err = r;
    return r;
}

void describe_mem(const void *p, size_t bytes, int device, char *buf, size_t n) {
    zt_emu::mem_info m = zt_emu::mem_lookup(p);
    switch (m.kind) {
    case zt_emu::MEM_DEVICE:
        if (m.device != device)
            snprintf(buf, n, "device memory of device %d", m.device);
        else
            snprintf(buf, n, "the range ends %zu bytes past its %zu-byte allocation",
                     (size_t)((const char *)p + bytes - (m.base + m.size)), m.size);
        break;
    case zt_emu::MEM_PINNED: snprintf(buf, n, "page-locked host memory"); break;
    case zt_emu::MEM_REGISTERED: snprintf(buf, n, "host memory registered with cudaHostRegister"); break;
    default: snprintf(buf, n, p ? "not memory of the CUDA runtime (host memory?)" : "NULL"); break;
    }
}

ncclResult_t check_buf(const ncclComm *c, const char *fn, const char *what, const void *p, size_t bytes) {
    if (zt_emu::is_device_range(p, bytes, c->device)) return ncclSuccess;
    char why[160];
    describe_mem(p, bytes, c->device, why, sizeof why);
    return call_error(ncclInvalidArgument, "%s : %s %p (%zu bytes) is not device memory of the communicator's device %d: %s",
                      fn, what, p, bytes, c->device, why);
}

bool disjoint(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x + na <= y || y + nb <= x;
}

// Checks at the call, as NCCL's ncclEnqueueCheck/ArgsCheck (comm, readiness, root, type, op),
// plus what NCCL checks only with NCCL_CHECK_POINTERS=1 or not at all: buffers must be device
// memory of the communicator's device and big enough, overlapping buffers must be NCCL's
// in-place form, the stream must belong to the communicator's device.
ncclResult_t collective(int kind, const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream, const void *caller) {
    const char *fn = kind_name[kind];
    ncclResult_t r = comm_check(comm, fn);
    if (r != ncclSuccess) return group_err(r);
    ncclComm *c = comm;
    if (c->state.load() == FINALIZED)
        return group_err(call_error(ncclInvalidUsage, "%s : comm %p was finalized (ncclCommFinalize)", fn, (void *)c));
    int ae = c->async_err.load(std::memory_order_acquire);
    if (ae != ncclSuccess)  // ncclCommEnsureReady: the communicator's error is the call's
        return group_err(call_error((ncclResult_t)ae, "%s : the communicator has an asynchronous error: %s", fn, c->async_msg));
    if (root < 0 || root >= c->nranks)
        return group_err(call_error(ncclInvalidArgument, "%s : invalid root %d (root should be in the 0..%d range)", fn,
                                    root, c->nranks - 1));
    if ((int)dt < 0 || (int)dt >= ncclNumTypes)
        return group_err(call_error(ncclInvalidArgument, "%s : invalid type %d", fn, (int)dt));
    if ((int)op < 0 || (long long)op > (long long)ncclMaxRedOp)
        return group_err(call_error(ncclInvalidArgument, "%s : invalid reduction operation %d", fn, (int)op));
    if ((int)op >= (int)ncclNumOps)  // a user-created op: none exist here
        return group_err(call_error(ncclInvalidArgument, "%s : reduction operation %d unknown to this communicator", fn, (int)op));
    const size_t es = type_size(dt), W = (size_t)c->nranks, me = (size_t)c->rank;
    size_t nb = 0, wide = 0;
    if (__builtin_mul_overflow(count, es, &nb) || __builtin_mul_overflow(nb, W, &wide))
        return group_err(call_error(ncclInvalidArgument, "%s : count %zu of %s overflows the address space", fn, count,
                                    type_name(dt)));
    if (stream) {
        int sd = zt_emu::stream_device(stream);
        if (sd < 0) return group_err(call_error(ncclInvalidArgument, "%s : stream %p is not a valid stream", fn, (void *)stream));
        if (sd != c->device)
            return group_err(call_error(ncclInvalidArgument,
                                        "%s : stream %s belongs to device %d but the communicator's device is %d", fn,
                                        zt_emu::stream_name(stream), sd, c->device));
    }
    if (count > 0) {  // NCCL discards empty collectives before looking at their buffers
        if (kind_reduces(kind) && (dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2))
            return group_err(call_error(ncclInvalidArgument,
                                        "%s : FP8 reductions are not emulated (NCCL supports them from sm90 on)", fn));
        const void *a = send;
        size_t na = nb, nr = nb;
        bool use_send = true, use_recv = true, in_place = false;
        switch (kind) {
        case K_ALLGATHER:
            nr = wide;
            in_place = send == (const char *)recv + me * nb;
            break;
        case K_REDUCESCATTER:
            na = wide;
            in_place = recv == (const char *)send + me * nb;
            break;
        case K_BROADCAST:
            use_send = me == (size_t)root;
            in_place = send == recv;
            break;
        case K_REDUCE:
            use_recv = me == (size_t)root;
            in_place = send == recv;
            break;
        default: in_place = send == recv; break;
        }
        if (use_send && (r = check_buf(c, fn, "sendbuff", a, na)) != ncclSuccess) return group_err(r);
        if (use_recv && (r = check_buf(c, fn, "recvbuff", recv, nr)) != ncclSuccess) return group_err(r);
        if (use_send && use_recv && !in_place && !disjoint(a, na, recv, nr))
            return group_err(call_error(ncclInvalidArgument,
                                        "%s : sendbuff %p (%zu bytes) and recvbuff %p (%zu bytes) overlap without being "
                                        "NCCL's in-place form (NCCL's result would be undefined)",
                                        fn, a, na, recv, nr));
    }
    coll k = {kind, send, recv, count, dt, kind_reduces(kind) ? op : ncclSum, kind_has_root(kind) ? root : 0, c, stream,
              caller};
    if (t_group_depth > 0) {
        try {
            t_group_ops.push_back(k);
        } catch (...) {  // no C++ exception crosses the C API
            return group_err(call_error(ncclSystemError, "%s : out of host memory", fn));
        }
        return ncclSuccess;
    }
    return enqueue_coll(k);
}

// ---- communicator creation ------------------------------------------------------------------
double env_seconds(const char *name, double dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end = nullptr;
    double s = strtod(v, &end);
    return end != v && s > 0 ? s : dflt;
}

size_t staging_bytes_for(int nranks) {
    size_t s = DEFAULT_STAGING;
    const char *v = getenv("ZT_EMU_NCCL_STAGING_BYTES");  // tests: small slots, many chunks
    if (v && *v) {
        long long x = atoll(v);
        if (x > 0) s = (size_t)x;
    }
    s = std::max(s, (size_t)4096);
    s = std::max(s, (size_t)64 * (size_t)nranks);  // a reduce-scatter step needs 8 bytes per rank
    return (s + 63) & ~(size_t)63;
}

void shm_name_of(const id_fmt &f, char *out, size_t n) {
    char hex[2 * sizeof f.rnd + 9];
    for (size_t i = 0; i < sizeof f.rnd; i++) snprintf(hex + 2 * i, 3, "%02x", f.rnd[i]);
    snprintf(hex + 2 * sizeof f.rnd, 9, "%08x", (unsigned)f.pid);
    snprintf(out, n, "/ztemu-nccl-%s", hex);
}

ncclResult_t init_fail(ncclComm *c, void *map, size_t bytes, bool unlink) {
    if (map) munmap(map, bytes);
    if (unlink) shm_unlink(c->shm_name);
    return ncclSystemError;  // the message is already in t_last_error
}

// Rank 0 creates and sizes the segment; the others open it once it is complete; everyone
// waits until all nranks joined; the last to join unlinks the name, so that nothing is left
// in /dev/shm whatever happens to the processes afterwards.
ncclResult_t rendezvous(ncclComm *c) {
    const double limit = env_seconds("ZT_EMU_NCCL_INIT_TIMEOUT", 120), deadline = now_s() + limit;
    const int me = c->rank, W = c->nranks;
    void *map = nullptr;
    size_t total = 0;
    seg_hdr *h = nullptr;
    if (me == 0) {
        const size_t staging = staging_bytes_for(W);
        const size_t off = (sizeof(seg_hdr) + (size_t)W * sizeof(rank_rec) + 63) & ~(size_t)63;
        total = off + (size_t)W * staging;
        int fd = shm_open(c->shm_name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0) {
            if (errno == EEXIST)
                return call_error(ncclInvalidUsage,
                                  "ncclCommInitRank : rank 0: this ncclUniqueId was already used for another "
                                  "communicator (%s exists): call ncclGetUniqueId once per communicator",
                                  c->shm_name);
            return call_error(ncclSystemError, "ncclCommInitRank : rank 0: shm_open(%s) failed: %s (is /dev/shm writable?)",
                              c->shm_name, strerror(errno));
        }
        int fe = ftruncate(fd, (off_t)total) == 0 ? 0 : errno;
        // Reserve the pages now: a full /dev/shm would otherwise be a SIGBUS in a collective.
        if (!fe) fe = posix_fallocate(fd, 0, (off_t)total);
        if (fe == EOPNOTSUPP || fe == EINVAL) fe = 0;
        if (fe) {
            close(fd);
            call_error(ncclSystemError,
                       "ncclCommInitRank : rank 0: cannot reserve %zu bytes for %s in /dev/shm: %s (the size of /dev/shm "
                       "limits the emulated communicators; ZT_EMU_NCCL_STAGING_BYTES sets the per-rank staging)",
                       total, c->shm_name, strerror(fe));
            return init_fail(c, nullptr, 0, true);
        }
        map = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        fe = errno;
        close(fd);
        if (map == MAP_FAILED) {
            call_error(ncclSystemError, "ncclCommInitRank : rank 0: mmap of %zu bytes failed: %s", total, strerror(fe));
            return init_fail(c, nullptr, 0, true);
        }
        h = (seg_hdr *)map;
        h->total_bytes = total;
        h->staging_bytes = staging;
        h->staging_off = off;
        h->nranks = W;
        rank_rec *rr = (rank_rec *)(h + 1);
        st_rlx(&rr[0].pid, (int32_t)getpid());
        st_rlx(&h->joined, 1);
        st_rel(&h->magic, SEG_MAGIC);
    } else {
        backoff b;
        for (;;) {
            if (now_s() > deadline) {
                call_error(ncclSystemError,
                           "ncclCommInitRank : rank %d of %d: timed out after %g s: rank 0 never created %s (did rank 0 "
                           "call ncclCommInitRank with this id? ZT_EMU_NCCL_INIT_TIMEOUT sets the limit)",
                           me, W, limit, c->shm_name);
                return init_fail(c, nullptr, 0, true);
            }
            int fd = shm_open(c->shm_name, O_RDWR, 0);
            if (fd < 0) {
                if (errno != ENOENT)
                    return call_error(ncclSystemError, "ncclCommInitRank : rank %d: shm_open(%s) failed: %s", me,
                                      c->shm_name, strerror(errno));
                b.pause();
                continue;
            }
            struct stat st;
            void *m = MAP_FAILED;
            if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(seg_hdr))
                m = mmap(nullptr, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            close(fd);
            if (m == MAP_FAILED) {
                b.pause();
                continue;
            }
            if (ld_acq(&((seg_hdr *)m)->magic) != SEG_MAGIC) {  // rank 0 is still filling it in
                munmap(m, (size_t)st.st_size);
                b.pause();
                continue;
            }
            map = m;
            total = (size_t)st.st_size;
            h = (seg_hdr *)m;
            break;
        }
        if (h->nranks != W || h->total_bytes != total) {
            call_error(ncclInvalidArgument,
                       "ncclCommInitRank : rank %d was given nranks %d but rank 0 created the communicator with %d",
                       me, W, h->nranks);
            init_fail(c, map, total, false);
            return ncclInvalidArgument;
        }
        rank_rec *rr = (rank_rec *)(h + 1);
        int32_t zero = 0;
        if (!__atomic_compare_exchange_n(&rr[me].pid, &zero, (int32_t)getpid(), false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE)) {
            call_error(ncclInvalidUsage, "ncclCommInitRank : rank %d of this communicator was already taken by pid %d",
                       me, (int)zero);
            init_fail(c, map, total, false);
            return ncclInvalidUsage;
        }
        if (__atomic_add_fetch(&h->joined, 1, __ATOMIC_ACQ_REL) == W) shm_unlink(c->shm_name);
    }
    rank_rec *rr = (rank_rec *)(h + 1);
    backoff b;
    while (ld_acq(&h->joined) < W) {
        if (now_s() > deadline) {
            char missing[256] = "";
            size_t l = 0;
            for (int r = 0; r < W && l + 16 < sizeof missing; r++)
                if (!ld_acq(&rr[r].pid)) l += (size_t)snprintf(missing + l, sizeof missing - l, "%s%d", l ? " " : "", r);
            call_error(ncclSystemError,
                       "ncclCommInitRank : rank %d of %d: timed out after %g s waiting for the other ranks to join (%d "
                       "of %d joined; missing: %s; ZT_EMU_NCCL_INIT_TIMEOUT sets the limit)",
                       me, W, limit, ld_acq(&h->joined), W, missing);
            return init_fail(c, map, total, true);
        }
        b.pause();
    }
    c->seg = h;
    c->seg_bytes = total;
    c->ranks = rr;
    c->staging = (char *)map + h->staging_off;
    c->staging_bytes = h->staging_bytes;
    return ncclSuccess;
}

// Frees the mapping once (Destroy, or Abort when no op is inside).
void release(ncclComm *c) {
    std::lock_guard<std::mutex> g(c->res_mu);
    if (c->released) return;
    c->released = true;
    if (c->seg) munmap(c->seg, c->seg_bytes);
}

// Waits until every op enqueued so far finished on this rank (NCCL's finalize flushes them),
// or the communicator failed or was aborted.
ncclResult_t drain(ncclComm *c) {
    uint64_t target;
    {
        std::lock_guard<std::mutex> g(c->enq_mu);
        target = c->issued;
    }
    backoff b;
    while (c->done.load(std::memory_order_acquire) < target) {
        if (c->abort_flag.load()) return ncclSuccess;
        int ae = c->async_err.load(std::memory_order_acquire);
        if (ae != ncclSuccess) return (ncclResult_t)ae;
        b.pause();
    }
    return ncclSuccess;
}

ncclResult_t ready(ncclComm *c, const char *fn) {  // ncclCommEnsureReady
    int ae = c->async_err.load(std::memory_order_acquire);
    if (ae == ncclSuccess) return ncclSuccess;
    return call_error((ncclResult_t)ae, "%s : the communicator has an asynchronous error: %s", fn, c->async_msg);
}

}  // namespace

// ---- the API -----------------------------------------------------------------------------------
extern "C" {

ncclResult_t ncclGetVersion(int *version) {
    if (!version) return call_error(ncclInvalidArgument, "ncclGetVersion : version argument is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t code) {
    switch (code) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

// The communicator's asynchronous error when it has one; else the calling thread's last
// failed call; else the most recent asynchronous error of any communicator ("could be
// unrelated to the current call", as NCCL's documentation warns). Never cleared.
const char *ncclGetLastError(ncclComm_t comm) {
    if (comm && known(comm) && comm->async_err.load(std::memory_order_acquire) != ncclSuccess) return comm->async_msg;
    if (t_last_error[0]) return t_last_error;
    ncclComm *a = g_last_async.load();
    return a ? a->async_msg : t_last_error;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *out) {
    if (!out) return call_error(ncclInvalidArgument, "GetUniqueId : out argument is NULL");
    id_fmt f;
    memset(&f, 0, sizeof f);
    memcpy(f.tag, ID_TAG, sizeof f.tag);
    if (getrandom(f.rnd, sizeof f.rnd, 0) != (ssize_t)sizeof f.rnd) {
        // No entropy source: time and a counter still make the name unique on this host.
        static std::atomic<uint64_t> counter{0};
        uint64_t t = (uint64_t)(now_s() * 1e9), k = counter.fetch_add(1) + 1;
        memcpy(f.rnd, &t, 8);
        memcpy(f.rnd + 8, &k, 8);
    }
    f.pid = (int32_t)getpid();
    memset(out, 0, sizeof *out);
    memcpy(out->internal, &f, sizeof f);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    if (!out) return call_error(ncclInvalidArgument, "CommInitRank : newcomm argument is NULL");
    *out = nullptr;
    if (t_group_depth > 0)
        return call_error(ncclInvalidUsage,
                          "ncclCommInitRank inside ncclGroupStart/ncclGroupEnd is not emulated (one thread per rank)");
    if (nranks < 1) return call_error(ncclInvalidArgument, "invalid device count (%d) requested", nranks);
    if (rank < 0 || rank >= nranks) return call_error(ncclInvalidArgument, "rank %d exceeds ndev=%d", rank, nranks);
    id_fmt f;
    memcpy(&f, id.internal, sizeof f);
    if (memcmp(f.tag, ID_TAG, sizeof f.tag) != 0)
        return call_error(ncclInvalidArgument,
                          "ncclCommInitRank : rank %d: the ncclUniqueId was not made by ncclGetUniqueId (was it "
                          "broadcast to this rank?)",
                          rank);
    ncclComm *c = new (std::nothrow) ncclComm();
    if (!c) return call_error(ncclSystemError, "ncclCommInitRank : out of host memory");
    c->magic = COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->device = zt_emu::current_device();  // NCCL's rule: the device current at init
    shm_name_of(f, c->shm_name, sizeof c->shm_name);
    cudaError_t e = cudaEventCreateWithFlags(&c->order_ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        ncclResult_t r = cuda_failed("ncclCommInitRank", "cudaEventCreateWithFlags", e);
        delete c;
        return r;
    }
    if (nranks > 1) {
        ncclResult_t r = rendezvous(c);
        if (r != ncclSuccess) {
            cudaEventDestroy(c->order_ev);
            delete c;
            return r;
        }
    }
    try {
        std::lock_guard<std::mutex> g(g_reg_mu);
        g_comms.push_back(c);
    } catch (...) {
        release(c);
        cudaEventDestroy(c->order_ev);
        delete c;
        return call_error(ncclSystemError, "ncclCommInitRank : out of host memory");
    }
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    ncclResult_t r = comm_check(comm, "ncclCommFinalize");
    if (r != ncclSuccess || (r = ready(comm, "ncclCommFinalize")) != ncclSuccess) return r;
    if (comm->state.load() == FINALIZED)
        return call_error(ncclInvalidArgument, "ncclCommFinalize : comm %p was already finalized", (void *)comm);
    if ((r = drain(comm)) != ncclSuccess) return ready(comm, "ncclCommFinalize");
    int live = LIVE;
    comm->state.compare_exchange_strong(live, FINALIZED);
    return ncclSuccess;
}

// NCCL: flushes (finalizes) first if the program did not; a communicator with an
// asynchronous error is not destroyed but returns the error: it must be aborted.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    ncclResult_t r = comm_check(comm, "ncclCommDestroy");
    if (r != ncclSuccess || (r = ready(comm, "ncclCommDestroy")) != ncclSuccess) return r;
    if (comm->state.load() == LIVE) {
        if (drain(comm) != ncclSuccess) return ready(comm, "ncclCommDestroy");
        int live = LIVE;
        comm->state.compare_exchange_strong(live, FINALIZED);
    }
    int fin = FINALIZED;
    if (!comm->state.compare_exchange_strong(fin, DESTROYED)) return ncclSuccess;  // aborted meanwhile
    release(comm);
    {
        std::lock_guard<std::mutex> g(comm->enq_mu);
        cudaEventDestroy(comm->order_ev);
        comm->order_ev = nullptr;
    }
    return ncclSuccess;
}

// May run on another thread while the owner waits on the communicator (comm_nccl.c's
// watchdog): it only sets flags, waits up to 2 s for an op inside the segment to leave (ops
// look at the flag at least every millisecond), and unmaps only when none is inside. Ops
// still queued see the flag when they start and end without touching anything. Peers see
// this rank aborted: their waits for it become ncclRemoteError.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    ncclResult_t r = comm_check(comm, "ncclCommAbort");
    if (r != ncclSuccess) return r;
    int st = comm->state.load();
    do {
        if (st == DESTROYED || st == ABORTED)
            return call_error(ncclInvalidArgument, "ncclCommAbort : comm %p was already destroyed or aborted", (void *)comm);
    } while (!comm->state.compare_exchange_weak(st, ABORTED));
    comm->abort_flag.store(1);
    {
        std::lock_guard<std::mutex> g(comm->res_mu);
        if (!comm->released && comm->ranks) st_rel(&comm->ranks[comm->rank].state, (int32_t)PEER_ABORTED);
    }
    for (int i = 0; i < 2000 && comm->in_op.load() > 0; i++) sleep_ms(1);
    if (comm->in_op.load() == 0)
        release(comm);
    else if (debug_on())
        fprintf(stderr, "cudaemu: nccl: rank %d: ncclCommAbort: an op is still inside after 2 s; its mapping is kept\n",
                comm->rank);
    // The order event is left alone: an enqueue on the owner thread may be using it.
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
    ncclResult_t r = comm_check(comm, "ncclGetAsyncError");
    if (r != ncclSuccess) return r;
    if (!asyncError) return call_error(ncclInvalidArgument, "ncclGetAsyncError : asyncError argument is NULL");
    *asyncError = (ncclResult_t)comm->async_err.load(std::memory_order_acquire);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
    ncclResult_t r = comm_check(comm, "CommCount");
    if (r != ncclSuccess) return r;
    if (!count) return call_error(ncclInvalidArgument, "CommCount : count argument is NULL");
    if ((r = ready(comm, "CommCount")) != ncclSuccess) return r;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
    ncclResult_t r = comm_check(comm, "CommCuDevice");
    if (r != ncclSuccess) return r;
    if (!device) return call_error(ncclInvalidArgument, "CommCuDevice : devid argument is NULL");
    if ((r = ready(comm, "CommCuDevice")) != ncclSuccess) return r;
    *device = comm->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
    ncclResult_t r = comm_check(comm, "CommUserRank");
    if (r != ncclSuccess) return r;
    if (!rank) return call_error(ncclInvalidArgument, "CommUserRank : rank argument is NULL");
    if ((r = ready(comm, "CommUserRank")) != ncclSuccess) return r;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    return collective(K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream, __builtin_return_address(0));
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return collective(K_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream, __builtin_return_address(0));
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return collective(K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream, __builtin_return_address(0));
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    return collective(K_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream, __builtin_return_address(0));
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
    return collective(K_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream, __builtin_return_address(0));
}

ncclResult_t ncclGroupStart(void) {
    t_group_depth++;
    return ncclSuccess;
}

// The outermost end enqueues the group's collectives in issue order. As in NCCL, a call of
// the group that failed fails the whole group: nothing of it is enqueued.
ncclResult_t ncclGroupEnd(void) {
    if (t_group_depth == 0) return call_error(ncclInvalidUsage, "ncclGroupEnd: not in a group call.");
    if (--t_group_depth > 0) return ncclSuccess;
    std::vector<coll> ops;
    ops.swap(t_group_ops);
    ncclResult_t r = t_group_err;
    t_group_err = ncclSuccess;
    if (r != ncclSuccess) return r;
    for (const coll &k : ops)
        if ((r = enqueue_coll(k)) != ncclSuccess) return r;
    return ncclSuccess;
}

}  // extern "C"
