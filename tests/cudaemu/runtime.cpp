// cudaemu runtime core: the CUDA runtime API on the CPU. Device memory lives in one large
// reserved address range (never reused, guard page after every allocation, poisoned with
// 0xff = NaN, a bitmap of written bytes); page-locked host memory is a memfd mapped twice
// (the program's view, which the checker write- or read-protects while a copy that uses it
// is in flight, and the copy engine's view). Each stream is a queue run by its own thread.
// Happens-before is computed at enqueue time with vector clocks (one slot per stream) and
// every op's footprint is checked against unordered ops of other streams when it ends.
// See docs/cudaemu.md for the model and what it cannot show.
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "internal.h"

namespace zt_emu {

// ---- configuration -------------------------------------------------------------------------
struct config {
    int ndevices = 8;
    size_t dev_mem = (size_t)16 << 30;
    bool initcheck = true;
    bool verbose = false;
    unsigned jitter_us = 0;
    bool trace = false;
};
static config &cfg() {
    static config *c = [] {
        config *k = new config;
        const char *e;
        if ((e = getenv("ZT_EMU_DEVICES"))) k->ndevices = atoi(e);
        if ((e = getenv("ZT_EMU_DEVICE_MEMORY"))) {
            char *end = nullptr;
            double v = strtod(e, &end);
            if (end && (*end == 'G' || *end == 'g')) v *= 1 << 30;
            else if (end && (*end == 'M' || *end == 'm')) v *= 1 << 20;
            k->dev_mem = (size_t)v;
        }
        if ((e = getenv("ZT_EMU_INITCHECK"))) k->initcheck = atoi(e) != 0;
        if ((e = getenv("ZT_EMU_VERBOSE"))) k->verbose = atoi(e) != 0;
        if ((e = getenv("ZT_EMU_JITTER_US"))) k->jitter_us = (unsigned)atoi(e);
        if ((e = getenv("ZT_EMU_TRACE"))) k->trace = atoi(e) != 0;
        return k;
    }();
    return *c;
}
bool verbose() { return cfg().verbose; }

// Locks live on the heap and are never destroyed: stream threads may still run while the
// process exits (static destructors must not pull state from under them).
static std::recursive_mutex &api_mu() {
    static auto *m = new std::recursive_mutex;
    return *m;
}
static std::mutex &chk_mu() {
    static auto *m = new std::mutex;
    return *m;
}
static std::shared_mutex &alloc_mu() {
    static auto *m = new std::shared_mutex;
    return *m;
}
static std::mutex &out_mu() {
    static auto *m = new std::mutex;
    return *m;
}

thread_local op *t_op = nullptr;
thread_local bool t_in_fiber = false;
static thread_local int t_dev = 0;
static thread_local cudaError_t t_last_err = cudaSuccess;
stream *g_slot[MAX_SLOTS];
static int g_nslots = 0;
static std::atomic<int> g_sticky{0};
static std::atomic<uint64_t> g_front[MAX_SLOTS];  // the race-check frontier (see frontier_update)

void vc_join(vclock &a, const vclock &b) {
    if (a.size() < b.size()) a.resize(b.size(), 0);
    for (size_t i = 0; i < b.size(); i++)
        if (b[i] > a[i]) a[i] = b[i];
}
static vclock &host_vc() {  // what the host threads have observed complete
    static auto *v = new vclock;
    return *v;
}

void set_sticky(cudaError_t e) {
    int z = 0;
    g_sticky.compare_exchange_strong(z, (int)e);
}
cudaError_t sticky() { return (cudaError_t)g_sticky.load(); }

static double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---- reporting --------------------------------------------------------------------------------
void describe_pc(const void *pc, char *buf, size_t n) {
    if (!pc) {
        snprintf(buf, n, "?");
        return;
    }
    Dl_info di;
    if (!dladdr(pc, &di) || !di.dli_fname) {
        snprintf(buf, n, "%p", pc);
        return;
    }
    // A position-independent module is addressed relative to its load base, a fixed one
    // (ET_EXEC) absolutely; "/proc/self/exe" must be resolved here, not in addr2line.
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)di.dli_fbase;
    uintptr_t off = (uintptr_t)pc - 1 - (eh->e_type == ET_EXEC ? 0 : (uintptr_t)di.dli_fbase);
    char path[PATH_MAX];
    if (!realpath(di.dli_fname, path)) snprintf(path, sizeof path, "%s", di.dli_fname);
    char cmd[PATH_MAX + 128], line[512] = "", fn[256] = "";
    snprintf(cmd, sizeof cmd, "addr2line -f -C -e '%s' 0x%lx 2>/dev/null", path, (unsigned long)off);
    FILE *p = popen(cmd, "r");
    if (p) {
        if (fgets(fn, sizeof fn, p) && fgets(line, sizeof line, p)) {
            fn[strcspn(fn, "\n")] = 0;
            line[strcspn(line, "\n")] = 0;
        }
        pclose(p);
    }
    const char *file = strstr(line, "/work/main/") ? strstr(line, "/work/main/") + 11 : line;
    for (const char *k : {"/engine/", "/train/", "/model/", "/kernels/", "/base/", "/tests/", "/cli/", "/ops/"}) {
        const char *q = strstr(line, k);
        if (q) {
            file = q + 1;
            break;
        }
    }
    if (*fn && fn[0] != '?' && *file && file[0] != '?')
        snprintf(buf, n, "%s (%s)", fn, file);
    else if (di.dli_sname)
        snprintf(buf, n, "%s+0x%lx", di.dli_sname, (unsigned long)((uintptr_t)pc - (uintptr_t)di.dli_saddr));
    else
        snprintf(buf, n, "%s+0x%lx", di.dli_fname, (unsigned long)off);
}

static const char *short_path(const char *f) {
    if (!f) return "?";
    for (const char *k : {"kernels/", "engine/", "train/", "model/", "base/", "tests/", "cli/", "ops/"}) {
        const char *q = strstr(f, k);
        if (q) return q;
    }
    return f;
}

void describe_op(const op *o, char *buf, size_t n) {
    char site[600] = "";
    if (o->caller) {
        char pc[512];
        describe_pc(o->caller, pc, sizeof pc);
        snprintf(site, sizeof site, "called from %s", pc);
    } else {
        snprintf(site, sizeof site, "at %s:%d", short_path(o->file), o->line);
    }
    const stream *s = o->slot >= 0 ? g_slot[o->slot] : nullptr;
    snprintf(buf, n, "%s %s, op #%llu of stream %s", o->what, site, (unsigned long long)o->seq,
             s ? s->name : "?");
}

void describe_alloc(const alloc *a, char *buf, size_t n) {
    char pc[512];
    describe_pc(a->caller, pc, sizeof pc);
    snprintf(buf, n, "allocation #%llu (%s of %zu bytes at %p, device %d, from %s)%s", (unsigned long long)a->id,
             a->how, a->size, (void *)a->base, a->device, pc, a->freed.load() ? ", already freed" : "");
}

static void vreport(const char *kind, const char *fmt, va_list ap) {
    std::lock_guard<std::mutex> g(out_mu());
    fflush(stdout);
    fprintf(stderr, "cudaemu: %s: ", kind);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    fflush(stderr);
}

void violation(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport("violation", fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudaemu: exiting with code %d (a CUDA programming-model violation; see docs/cudaemu.md)\n",
            EXIT_VIOLATION);
    fflush(stderr);
    _exit(EXIT_VIOLATION);
}

cudaError_t device_fault(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport("device fault", fmt, ap);
    va_end(ap);
    set_sticky(e);
    return e;
}

cudaError_t api_error(cudaError_t e, const char *fmt, ...) {
    if (e != cudaSuccess && e != cudaErrorNotReady) t_last_err = e;
    if (fmt && cfg().verbose) {
        va_list ap;
        va_start(ap, fmt);
        vreport("api error", fmt, ap);
        va_end(ap);
    }
    return e;
}

// ---- the address space ---------------------------------------------------------------------------
// [g_base, +DEV_SPAN): device memory; then the page-locked host view, then the copy
// engine's view of the same pages. The hooks look only at the first two.
static const size_t DEV_SPAN = (size_t)1 << 40, PIN_SPAN = (size_t)1 << 37, PAGE = 4096;
static char *g_base, *g_pin_host, *g_pin_dev;
static size_t g_dev_next, g_pin_next;  // bump offsets, under api_mu()
static int g_memfd = -1;
uintptr_t g_hook_lo = 0, g_hook_span = 0;
static size_t g_dev_used[64];
static uint64_t g_alloc_ids;

static std::map<uintptr_t, alloc *> &allocs() {  // by base, under alloc_mu()
    static auto *m = new std::map<uintptr_t, alloc *>;
    return *m;
}

static void install_segv();
static void init_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        void *r = mmap(nullptr, DEV_SPAN + 2 * PIN_SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED) {
            fprintf(stderr, "cudaemu: cannot reserve %zu GiB of address space: %s\n",
                    (DEV_SPAN + 2 * PIN_SPAN) >> 30, strerror(errno));
            _exit(EXIT_VIOLATION);
        }
        g_base = (char *)r;
        g_pin_host = g_base + DEV_SPAN;
        g_pin_dev = g_pin_host + PIN_SPAN;
        g_dev_next = PAGE;  // never hand out the first page
        g_pin_next = 0;
        g_memfd = memfd_create("cudaemu-pinned", MFD_CLOEXEC);
        if (g_memfd < 0) {
            fprintf(stderr, "cudaemu: memfd_create: %s\n", strerror(errno));
            _exit(EXIT_VIOLATION);
        }
        g_hook_lo = (uintptr_t)g_base;
        g_hook_span = DEV_SPAN + PIN_SPAN;
        for (auto &f : g_front) f.store(0);
        install_segv();
    });
}

alloc *find_alloc(uintptr_t p, bool include_freed) {
    std::shared_lock<std::shared_mutex> g(alloc_mu());
    auto &m = allocs();
    auto it = m.upper_bound(p);
    if (it == m.begin()) return nullptr;
    --it;
    alloc *a = it->second;
    if (p > (uintptr_t)a->base + a->size) return nullptr;
    if (!include_freed && a->freed.load()) return nullptr;
    return a;
}

mem_info mem_lookup(const void *p) {
    mem_info mi = {nullptr, 0, MEM_NONE, -1, 0};
    if (!p) return mi;
    init_once();
    alloc *a = find_alloc((uintptr_t)p, false);
    if (!a || (uintptr_t)p >= (uintptr_t)a->base + a->size) return mi;
    mi.base = a->base;
    mi.size = a->size;
    mi.kind = a->kind;
    mi.device = a->kind == MEM_DEVICE ? a->device : -1;
    mi.id = a->id;
    return mi;
}

bool is_device_range(const void *p, size_t bytes, int device) {
    if (!p) return false;
    alloc *a = find_alloc((uintptr_t)p, false);
    if (!a || a->kind != MEM_DEVICE) return false;
    if (device >= 0 && a->device != device) return false;
    return (uintptr_t)p + bytes <= (uintptr_t)a->base + a->size && (uintptr_t)p < (uintptr_t)a->base + a->size + (bytes == 0);
}

void *device_view(const void *p) {
    uintptr_t u = (uintptr_t)p;
    if (g_pin_host && u - (uintptr_t)g_pin_host < PIN_SPAN) return (void *)(u + PIN_SPAN);
    return (void *)p;
}

static void register_alloc(alloc *a) {
    std::unique_lock<std::shared_mutex> g(alloc_mu());
    allocs()[(uintptr_t)a->base] = a;
}

static cudaError_t dev_alloc(void **out, size_t size, const char *how, const void *caller) {
    init_once();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    const int dev = t_dev;
    const size_t r = ((size ? size : 1) + 255) & ~(size_t)255;
    if (g_dev_used[dev] + r > cfg().dev_mem)
        return api_error(cudaErrorMemoryAllocation, "%s of %zu bytes: device %d has %zu of %zu bytes in use", how,
                         size, dev, g_dev_used[dev], cfg().dev_mem);
    const size_t len = (r + PAGE - 1) & ~(PAGE - 1);
    if (g_dev_next + len + PAGE > DEV_SPAN) return api_error(cudaErrorMemoryAllocation, "address space exhausted");
    char *lo = g_base + g_dev_next;
    g_dev_next += len + PAGE;  // the page after stays PROT_NONE: a guard
    if (mprotect(lo, len, PROT_READ | PROT_WRITE) != 0)
        return api_error(cudaErrorMemoryAllocation, "mprotect: %s", strerror(errno));
    memset(lo, 0xff, len);  // NaN in fp32 and bf16
    alloc *a = new alloc;
    a->id = ++g_alloc_ids;
    a->map_lo = lo;
    a->map_len = len;
    a->base = lo + len - r;  // the allocation ends where the guard page begins (when size % 256 == 0)
    a->size = size;
    a->kind = MEM_DEVICE;
    a->device = dev;
    a->how = how;
    a->caller = caller;
    if (cfg().initcheck) a->init = (uint64_t *)calloc((r / 2 + 63) / 64 + 1, 8);
    g_dev_used[dev] += r;
    register_alloc(a);
    *out = a->base;
    return cudaSuccess;
}

static void release_mapping(alloc *a) {
    if (a->kind == MEM_DEVICE) {
        mprotect(a->map_lo, a->map_len, PROT_NONE);
        madvise(a->map_lo, a->map_len, MADV_DONTNEED);
        g_dev_used[a->device] -= ((a->size ? a->size : 1) + 255) & ~(size_t)255;
    } else if (a->kind == MEM_PINNED) {
        mmap(a->map_lo, a->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        mmap(a->map_lo + PIN_SPAN, a->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
             0);
        fallocate(g_memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a->pin_off, (off_t)a->map_len);
    }
}

// ---- ops and streams --------------------------------------------------------------------------------
static std::vector<stream *> &streams() {  // every stream ever created, under api_mu()
    static auto *v = new std::vector<stream *>;
    return *v;
}
static std::unordered_set<void *> &live_handles() {  // streams and events, under api_mu()
    static auto *s = new std::unordered_set<void *>;
    return *s;
}
static stream *g_legacy[64];

static void check_footprint(op *o);
static void stream_main(stream *s);

static stream *new_stream(unsigned flags, bool legacy, int device, const void *caller) {
    if (g_nslots >= MAX_SLOTS) {
        fprintf(stderr, "cudaemu: more than %d streams created in this process (each has a vector-clock slot)\n",
                MAX_SLOTS);
        _exit(EXIT_VIOLATION);
    }
    stream *s = new stream;
    s->slot = g_nslots++;
    s->device = device;
    s->flags = flags;
    s->legacy = legacy;
    s->caller = caller;
    s->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(s->slot + 1);
    if (legacy)
        snprintf(s->name, sizeof s->name, "legacy-default(device %d)", device);
    else
        snprintf(s->name, sizeof s->name, "#%d(device %d%s)", s->slot, device,
                 flags & cudaStreamNonBlocking ? ", non-blocking" : "");
    g_slot[s->slot] = s;
    s->vc = host_vc();
    streams().push_back(s);
    std::thread(stream_main, s).detach();
    return s;
}

static stream *legacy_stream(int device) {
    if (!g_legacy[device]) g_legacy[device] = new_stream(0, true, device, nullptr);
    return g_legacy[device];
}

// NULL: the legacy stream of the current device; nullptr if s is not a live stream.
static stream *resolve(cudaStream_t s) {
    if (!s) return legacy_stream(t_dev);
    if (!live_handles().count((void *)s)) return nullptr;
    return (stream *)(void *)s;
}

static void wait_done(int slot, uint64_t seq) {
    stream *t = g_slot[slot];
    if (t->done_seq.load() >= seq) return;
    std::unique_lock<std::mutex> g(t->mu);
    t->cv_done.wait(g, [&] { return t->done_seq.load() >= seq; });
}

// The race-check frontier: F[s] = the least seq of stream s that every op still to finish is
// known to happen after. A record with seq <= F[slot] can never race again and is pruned.
static void frontier_update() {
    const int n = g_nslots;
    std::vector<uint64_t> f(host_vc());
    f.resize((size_t)n, 0);
    for (stream *s : streams()) {
        std::lock_guard<std::mutex> g(s->mu);
        if (s->q.empty()) continue;
        const vclock &v = s->q.front()->vc;
        for (int i = 0; i < n; i++) f[i] = std::min(f[i], vc_at(v, i));
    }
    for (int i = 0; i < n; i++)
        if (f[i] > g_front[i].load()) g_front[i].store(f[i]);
}

static void prot_release();
// The host learned that everything in v has completed (a stream or event synchronisation,
// a successful query, a synchronous copy).
static void vc_str(const vclock &v, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < v.size() && k + 24 < n; i++)
        if (v[i]) k += (size_t)snprintf(buf + k, n - k, "%s%zu:%llu", k ? " " : "", i, (unsigned long long)v[i]);
}
static void host_observe(const vclock &v) {
    std::lock_guard<std::recursive_mutex> g(api_mu());
    vc_join(host_vc(), v);
    if (cfg().trace) {
        char b[512];
        vc_str(host_vc(), b, sizeof b);
        fprintf(stderr, "cudaemu trace: host observed; host clock {%s}\n", b);
    }
    prot_release();
    frontier_update();
}

static uint64_t rng_next(uint64_t &x) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

static void stream_main(stream *s) {
    for (;;) {
        op *o;
        {
            std::unique_lock<std::mutex> g(s->mu);
            s->cv_work.wait(g, [&] { return !s->q.empty(); });
            o = s->q.front();
        }
        for (auto &w : o->waits) wait_done(w.first, w.second);
        if (cfg().jitter_us) {
            struct timespec ts = {0, (long)(rng_next(s->rng) % cfg().jitter_us) * 1000};
            nanosleep(&ts, nullptr);
        }
        if (!g_sticky.load() && o->run) {
            t_op = o;
            cudaError_t e = cudaSuccess;
            try {
                e = o->run();
            } catch (const fault_exit &f) {
                e = f.e;
            }
            t_op = nullptr;
            if (e != cudaSuccess) set_sticky(e);
            if (!g_sticky.load()) check_footprint(o);
        }
        if (o->stamp) *o->stamp = now_s();
        {
            std::lock_guard<std::mutex> g(s->mu);
            s->q.pop_front();
            s->done_seq.store(o->seq);
        }
        s->cv_done.notify_all();
        delete o;
    }
}

static cudaError_t enqueue_op(stream *S, op *o) {
    if (g_sticky.load()) {
        delete o;
        return sticky();
    }
    // The legacy default stream waits for all prior work of the blocking streams of its
    // device, and they wait for its prior work (CUDA's implicit synchronisation).
    if (S->legacy) {
        for (stream *b : streams())
            if (b != S && !b->legacy && b->device == S->device && !(b->flags & cudaStreamNonBlocking) && !b->dying) {
                vc_join(S->vc, b->vc);
                if (b->enq_seq > b->done_seq.load()) o->waits.push_back({b->slot, b->enq_seq});
            }
    } else if (!(S->flags & cudaStreamNonBlocking) && g_legacy[S->device]) {
        stream *l = g_legacy[S->device];
        vc_join(S->vc, l->vc);
        if (l->enq_seq > l->done_seq.load()) o->waits.push_back({l->slot, l->enq_seq});
    }
    vc_join(S->vc, host_vc());  // what the host has seen complete happens before what it enqueues now
    if (S->vc.size() <= (size_t)S->slot) S->vc.resize(S->slot + 1, 0);
    S->vc[S->slot] = ++S->enq_seq;
    o->vc = S->vc;
    o->seq = S->enq_seq;
    o->slot = S->slot;
    o->device = S->device;
    if (cfg().trace) {
        char b[512];
        vc_str(o->vc, b, sizeof b);
        fprintf(stderr, "cudaemu trace: enqueue %s as op #%llu of stream %s, clock {%s}\n", o->what,
                (unsigned long long)o->seq, S->name, b);
    }
    {
        std::lock_guard<std::mutex> g(S->mu);
        S->q.push_back(o);
    }
    S->cv_work.notify_one();
    return cudaSuccess;
}

cudaError_t enqueue_at(cudaStream_t s, op *o) {
    init_once();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = resolve(s);
    if (!S) {
        cudaError_t e = api_error(cudaErrorInvalidResourceHandle, "%s: invalid stream %p", o->what, (void *)s);
        delete o;
        return e;
    }
    return enqueue_op(S, o);
}

cudaError_t enqueue_from(cudaStream_t s, const char *what, const char *file, int line, const void *caller,
                         std::function<cudaError_t()> run) {
    op *o = new op;
    o->what = what;
    o->file = file;
    o->line = line;
    o->caller = caller;
    o->run = std::move(run);
    return enqueue_at(s, o);
}

cudaError_t enqueue(cudaStream_t s, const char *what, const char *file, int line, std::function<cudaError_t()> run) {
    return enqueue_from(s, what, file, line, nullptr, std::move(run));
}

int current_device() { return t_dev; }
int stream_device(cudaStream_t s) {
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = resolve(s);
    return S ? S->device : -1;
}
const char *stream_name(cudaStream_t s) {
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = resolve(s);
    return S ? S->name : "invalid";
}

// ---- footprints and the race check -------------------------------------------------------------------
static fp_entry *fp_for(op *o, alloc *a) {
    if (o->fp_last >= 0 && o->fp[(size_t)o->fp_last].a == a) return &o->fp[(size_t)o->fp_last];
    for (size_t i = 0; i < o->fp.size(); i++)
        if (o->fp[i].a == a) {
            o->fp_last = (int)i;
            return &o->fp[i];
        }
    o->fp.push_back(fp_entry{a, UINTPTR_MAX, 0, UINTPTR_MAX, 0, false});
    o->fp_last = (int)o->fp.size() - 1;
    return &o->fp.back();
}

static inline void bits_set(uint64_t *bm, size_t b0, size_t b1) {  // [b0, b1)
    while (b0 < b1) {
        size_t w = b0 >> 6, lo = b0 & 63, hi = std::min<size_t>(64, lo + (b1 - b0));
        uint64_t m = hi == 64 ? ~0ull << lo : ((1ull << hi) - 1) & (~0ull << lo);
        if ((bm[w] & m) != m) __atomic_fetch_or(&bm[w], m, __ATOMIC_RELAXED);
        b0 += hi - lo;
    }
}
static inline size_t bits_first_clear(const uint64_t *bm, size_t b0, size_t b1) {  // b1 if none
    for (size_t b = b0; b < b1;) {
        size_t w = b >> 6, lo = b & 63, hi = std::min<size_t>(64, lo + (b1 - b));
        uint64_t m = hi == 64 ? ~0ull << lo : ((1ull << hi) - 1) & (~0ull << lo);
        uint64_t v = __atomic_load_n(&bm[w], __ATOMIC_RELAXED);
        if ((v & m) != m) return (w << 6) + (size_t)__builtin_ctzll(~v & m);
        b += hi - lo;
    }
    return b1;
}

static thread_local alloc *t_cache[8];
static thread_local unsigned t_cache_next;

static alloc *cached_alloc(uintptr_t p, size_t n) {
    for (alloc *a : t_cache)
        if (a && p >= (uintptr_t)a->base && p + n <= (uintptr_t)a->base + a->size && !a->freed.load(std::memory_order_relaxed))
            return a;
    alloc *a = find_alloc(p, true);
    if (a && !a->freed.load() && p + n <= (uintptr_t)a->base + a->size && p < (uintptr_t)a->base + a->size) {
        t_cache[t_cache_next++ & 7] = a;
        return a;
    }
    return a ? a : nullptr;  // may be freed or too short: the caller reports
}

// An access of the current op to [p, p + n): bounds, initialisation, footprint.
static void record(uintptr_t p, size_t n, bool write, bool check_align, bool explicit_call) {
    op *o = t_op;
    alloc *a = cached_alloc(p, n ? n : 1);
    const bool ok = a && !a->freed.load() && p >= (uintptr_t)a->base && p + n <= (uintptr_t)a->base + a->size &&
                    (n > 0 || p < (uintptr_t)a->base + a->size + 1);
    if (!ok) {
        char where[256] = "", what[900] = "", ad[700] = "";
        kernel_where(where, sizeof where);
        if (o) describe_op(o, what, sizeof what);
        alloc *near = a ? a : find_alloc(p, true);
        if (!near) {  // the allocation just below, for "N bytes past the end"
            std::shared_lock<std::shared_mutex> g(alloc_mu());
            auto it = allocs().upper_bound(p);
            if (it != allocs().begin()) near = std::prev(it)->second;
        }
        if (near) {
            describe_alloc(near, ad, sizeof ad);
            const long long rel = (long long)(p - (uintptr_t)near->base);
            char pos[128];
            if (rel >= (long long)near->size)
                snprintf(pos, sizeof pos, "%lld bytes past the end of", rel - (long long)near->size);
            else
                snprintf(pos, sizeof pos, "at offset %lld of", rel);
            device_fault(cudaErrorIllegalAddress, "illegal address: %s %zu bytes at %p, %s %s%s%s; in %s",
                         write ? "write of" : "read of", n, (void *)p, pos, ad, *where ? "; " : "", where, what);
        } else {
            device_fault(cudaErrorIllegalAddress, "illegal address: %s %zu bytes at %p (no allocation there)%s%s; in %s",
                         write ? "write of" : "read of", n, (void *)p, *where ? "; " : "", where, what);
        }
        if (t_in_fiber) kernel_abort(cudaErrorIllegalAddress);
        throw fault_exit{cudaErrorIllegalAddress};
    }
    if (check_align && n > 1 && (p & (n - 1))) {
        char where[256] = "", what[900] = "";
        kernel_where(where, sizeof where);
        if (o) describe_op(o, what, sizeof what);
        device_fault(cudaErrorMisalignedAddress, "misaligned address: %zu-byte %s at %p (offset %lld of allocation #%llu); %s; in %s",
                     n, write ? "store" : "load", (void *)p, (long long)(p - (uintptr_t)a->base),
                     (unsigned long long)a->id, where, what);
        if (t_in_fiber) kernel_abort(cudaErrorMisalignedAddress);
        throw fault_exit{cudaErrorMisalignedAddress};
    }
    if (a->kind == MEM_DEVICE && a->device != o->device) {
        device_fault(cudaErrorIllegalAddress, "an op on device %d accessed memory of device %d (%p); peer access is not enabled in this emulation",
                     o->device, a->device, (void *)p);
        if (t_in_fiber) kernel_abort(cudaErrorIllegalAddress);
        throw fault_exit{cudaErrorIllegalAddress};
    }
    if (a->init && n) {
        const size_t off = p - (uintptr_t)a->base;
        if (write) {
            bits_set(a->init, off / 2, (off + n + 1) / 2);
        } else {
            size_t c = bits_first_clear(a->init, off / 2, (off + n + 1) / 2);
            if (c != (off + n + 1) / 2) {
                char where[256] = "", what[900] = "", ad[700];
                kernel_where(where, sizeof where);
                describe_op(o, what, sizeof what);
                describe_alloc(a, ad, sizeof ad);
                violation("read of uninitialised device memory: %zu bytes at offset %zu of %s; byte %zu was never "
                          "written (device memory from cudaMalloc has no defined contents on a GPU)%s%s; in %s",
                          n, off, ad, c * 2, *where ? "; " : "", where, what);
            }
        }
    }
    (void)explicit_call;
    fp_entry *e = fp_for(o, a);
    if (write) {
        if (p < e->wlo) e->wlo = p;
        if (p + n > e->whi) e->whi = p + n;
    } else {
        if (p < e->rlo) e->rlo = p;
        if (p + n > e->rhi) e->rhi = p + n;
    }
}

void access_slow(uintptr_t addr, size_t n, bool write, bool check_align, const void *pc) {
    if (!t_op) {
        // Instrumented host code: page-locked memory is the host's (its protection catches
        // accesses during a copy); device memory is not reachable from the host on a GPU.
        if (addr - (uintptr_t)g_base < DEV_SPAN) {
            alloc *a = find_alloc(addr, true);
            char ad[700] = "no allocation";
            if (a) describe_alloc(a, ad, sizeof ad);
            char where[512];
            describe_pc(pc, where, sizeof where);
            violation("host code %s %zu bytes of device memory at %p (%s) in %s: device memory is not host-accessible "
                      "on a GPU (copy it with cudaMemcpy)",
                      write ? "wrote" : "read", n, (void *)addr, ad, where);
        }
        return;
    }
    record(addr, n, write, check_align, false);
}

void record_read(const void *p, size_t bytes) {
    if (!t_op) violation("zt_emu::record_read outside a stream op");
    record((uintptr_t)p, bytes, false, false, true);
}
void record_write(void *p, size_t bytes) {
    if (!t_op) violation("zt_emu::record_write outside a stream op");
    record((uintptr_t)p, bytes, true, false, true);
}

static bool overlap(uintptr_t a0, uintptr_t a1, uintptr_t b0, uintptr_t b1) { return a0 < b1 && b0 < a1 && a0 < a1 && b0 < b1; }

static void report_race(const op *o, const fp_entry &e, const access_rec &r) {
    char ad[700], a[900], b[900], rb[900];
    describe_alloc(e.a, ad, sizeof ad);
    describe_op(o, b, sizeof b);
    op fake;
    fake.what = r.what;
    fake.file = r.file;
    fake.line = r.line;
    fake.caller = r.caller;
    fake.seq = r.seq;
    fake.slot = r.slot;
    describe_op(&fake, a, sizeof a);
    auto rng = [](char *buf, size_t n, const char *k, uintptr_t lo, uintptr_t hi, const char *base) {
        if (lo < hi) snprintf(buf, n, "%s [%td, %td)", k, (const char *)lo - base, (const char *)hi - base);
        else buf[0] = 0;
    };
    char r1[96], w1[96], r2[96], w2[96];
    rng(r1, sizeof r1, "reads", r.rlo, r.rhi, e.a->base);
    rng(w1, sizeof w1, "writes", r.wlo, r.whi, e.a->base);
    rng(r2, sizeof r2, "reads", e.rlo, e.rhi, e.a->base);
    rng(w2, sizeof w2, "writes", e.wlo, e.whi, e.a->base);
    snprintf(rb, sizeof rb, "%s%s%s", r1, *r1 && *w1 ? ", " : "", w1);
    violation("unordered accesses (a data race between streams) on %s:\n  first:  %s %s%s\n  second: %s %s%s%s%s\n"
              "  nothing orders them: no event recorded after the first is waited for by the second's stream "
              "(cudaStreamWaitEvent), and the host did not synchronise between them; on a GPU they may run "
              "concurrently or in either order",
              ad, a, rb, r.pseudo ? " (the allocation's stream-ordered lifetime)" : "", b, r2, *r2 && *w2 ? ", " : "",
              w2, e.pseudo ? " (the allocation's stream-ordered lifetime)" : "");
}

// Each finished op's footprint is compared with the records of the other streams that it is
// not ordered after: those are the newest ones of each slot (seq > the op's clock for that
// slot), so the scan walks each slot's records backwards and stops at the first ordered one.
static const size_t MAX_RECS_PER_SLOT = 1 << 16;  // beyond: the oldest are dropped (only a check lost)
static void check_footprint(op *o) {
    if (o->fp.empty()) return;
    std::lock_guard<std::mutex> g(chk_mu());
    for (const fp_entry &e : o->fp) {
        alloc *a = e.a;
        std::deque<access_rec> *mine = nullptr;
        for (auto &sl : a->recs) {
            std::deque<access_rec> &d = sl.second;
            const uint64_t front = g_front[sl.first].load();
            while (!d.empty() && d.front().seq <= front) d.pop_front();  // can never race again
            if (sl.first == o->slot) {  // same stream: in order
                mine = &d;
                continue;
            }
            const uint64_t seen = vc_at(o->vc, sl.first);
            for (auto it = d.rbegin(); it != d.rend() && it->seq > seen; ++it) {
                const access_rec &r = *it;
                const bool c = overlap(r.wlo, r.whi, e.wlo, e.whi) || overlap(r.wlo, r.whi, e.rlo, e.rhi) ||
                               overlap(r.rlo, r.rhi, e.wlo, e.whi);
                if (c) report_race(o, e, r);
            }
        }
        if (!mine) {
            a->recs.push_back({o->slot, std::deque<access_rec>()});
            mine = &a->recs.back().second;
        }
        if (mine->size() >= MAX_RECS_PER_SLOT) mine->pop_front();
        mine->push_back(access_rec{o->slot, o->seq, e.rlo, e.rhi, e.wlo, e.whi, o->what, o->file, o->line, o->caller,
                                   e.pseudo});
    }
}

// ---- page-locked memory in flight -------------------------------------------------------------------
struct prot {
    alloc *a;
    size_t lo, hi;  // page-aligned offsets in the allocation's mapping
    int mode;       // PROT_NONE (a copy writes it) or PROT_READ (a copy reads it)
    int slot;
    uint64_t seq;
    const char *what;
    const void *caller;
};
static std::vector<prot> &prots() {  // under api_mu()
    static auto *v = new std::vector<prot>;
    return *v;
}

static void prot_apply(alloc *a) {
    const size_t np = a->map_len / PAGE;
    std::vector<int> mode(np, PROT_READ | PROT_WRITE);
    for (const prot &p : prots())
        if (p.a == a)
            for (size_t i = p.lo / PAGE; i < p.hi / PAGE; i++) mode[i] &= p.mode;
    for (size_t i = 0; i < np;) {
        size_t j = i;
        while (j < np && mode[j] == mode[i]) j++;
        mprotect(a->map_lo + i * PAGE, (j - i) * PAGE, mode[i]);
        i = j;
    }
}

static void prot_add(alloc *a, const void *p, size_t n, int mode, int slot, uint64_t seq, const char *what,
                     const void *caller) {
    const size_t off = (size_t)((const char *)p - a->map_lo);
    prot x{a, off & ~(PAGE - 1), (off + n + PAGE - 1) & ~(PAGE - 1), mode, slot, seq, what, caller};
    prots().push_back(x);
    prot_apply(a);
}

static void prot_release() {
    auto &v = prots();
    std::vector<alloc *> touched;
    size_t k = 0;
    for (size_t i = 0; i < v.size(); i++) {
        if (vc_at(host_vc(), v[i].slot) >= v[i].seq) {
            if (std::find(touched.begin(), touched.end(), v[i].a) == touched.end()) touched.push_back(v[i].a);
        } else {
            v[k++] = v[i];
        }
    }
    v.resize(k);
    for (alloc *a : touched)
        if (!a->freed.load()) prot_apply(a);
}

// ---- the SIGSEGV handler: host accesses to memory in flight, and device-memory faults of
// uninstrumented code --------------------------------------------------------------------------------
static struct sigaction g_old_segv;
static void segv_handler(int sig, siginfo_t *si, void *uc) {
    const uintptr_t addr = (uintptr_t)si->si_addr;
    if (g_base && addr - (uintptr_t)g_pin_host < PIN_SPAN) {
        char msg[1600] = "";
        if (api_mu().try_lock()) {
            for (const prot &p : prots())
                if (addr >= (uintptr_t)p.a->map_lo + p.lo && addr < (uintptr_t)p.a->map_lo + p.hi) {
                    char pc[512];
                    describe_pc(p.caller, pc, sizeof pc);
                    snprintf(msg, sizeof msg, "%s called from %s, op #%llu of stream %s (the copy %s this memory)",
                             p.what, pc, (unsigned long long)p.seq, g_slot[p.slot]->name,
                             p.mode == PROT_NONE ? "writes" : "reads");
                    break;
                }
            api_mu().unlock();
        }
        violation("host access to page-locked memory at %p while an asynchronous copy that uses it is not known to "
                  "be complete: %s; synchronise with that stream or an event recorded after the copy "
                  "(cudaStreamSynchronize, cudaEventSynchronize, a successful query) before touching the buffer",
                  (void *)addr, *msg ? msg : "(a cudaMemcpyAsync)");
    }
    if (g_base && addr - (uintptr_t)g_base < DEV_SPAN) {
        char where[900] = "";
        if (t_op) describe_op(t_op, where, sizeof where);
        violation("access to device memory at %p outside any live allocation (past an allocation's end into its guard "
                  "page, or freed) by %s code%s%s",
                  (void *)addr, t_op ? "emulated device" : "host", t_op ? " of " : "", where);
    }
    // Not ours: hand it on.
    if (g_old_segv.sa_flags & SA_SIGINFO && g_old_segv.sa_sigaction)
        g_old_segv.sa_sigaction(sig, si, uc);
    else if (g_old_segv.sa_handler != SIG_IGN && g_old_segv.sa_handler != SIG_DFL && g_old_segv.sa_handler)
        g_old_segv.sa_handler(sig);
    else {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}
static void install_segv() {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    struct sigaction cur;
    sigaction(SIGSEGV, nullptr, &cur);
    if (cur.sa_sigaction == segv_handler) return;
    sigaction(SIGSEGV, &sa, &g_old_segv);
}

}  // namespace zt_emu

using namespace zt_emu;

// =====================================================================================================
// The CUDA runtime API
// =====================================================================================================
#define CALLER __builtin_return_address(0)
#define API_ENTER()                                  \
    init_once();                                     \
    install_segv_if_lost();                          \
    if (g_sticky.load()) return sticky();

static void install_segv_if_lost() {
    // MPI and other libraries may install their own SIGSEGV handler after us.
    static thread_local unsigned n;
    if ((n++ & 255) == 0) install_segv();
}

static struct {
    cudaError_t e;
    const char *name, *str;
} g_errs[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorContextIsDestroyed, "cudaErrorContextIsDestroyed", "context is destroyed"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress", "misaligned address"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

extern "C" {

const char *cudaGetErrorName(cudaError_t e) {
    for (auto &x : g_errs)
        if (x.e == e) return x.name;
    return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t e) {
    for (auto &x : g_errs)
        if (x.e == e) return x.str;
    return "unrecognized error code";
}
cudaError_t cudaGetLastError(void) {
    if (g_sticky.load()) return sticky();  // sticky: reported again, never cleared
    cudaError_t e = t_last_err;
    t_last_err = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_sticky.load() ? sticky() : t_last_err; }

// ---- devices ----
cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return api_error(cudaErrorInvalidValue, "cudaGetDeviceCount(NULL)");
    *count = 0;
    if (cfg().ndevices <= 0) return api_error(cudaErrorNoDevice, "ZT_EMU_DEVICES=0");
    *count = std::min(cfg().ndevices, 64);
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    if (!device) return api_error(cudaErrorInvalidValue, "cudaGetDevice(NULL)");
    *device = t_dev;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= std::min(cfg().ndevices, 64))
        return api_error(cudaErrorInvalidDevice, "cudaSetDevice(%d): %d device(s)", device, cfg().ndevices);
    t_dev = device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
    if (!p) return api_error(cudaErrorInvalidValue, "cudaGetDeviceProperties(NULL)");
    if (device < 0 || device >= std::min(cfg().ndevices, 64)) return api_error(cudaErrorInvalidDevice, "device %d", device);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudaemu %d (CPU execution of the CUDA model, sm_90 limits)", device);
    p->totalGlobalMem = cfg().dev_mem;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 232448;  // H100/H200: 227 KiB with cudaFuncSetAttribute
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->l2CacheSize = 50 << 20;
    p->unifiedAddressing = 1;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int device) {
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e) return e;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)p.sharedMemPerBlockOptin; break;
    default: return api_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d not emulated", (int)attr);
    }
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    API_ENTER();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    if (free_bytes) *free_bytes = cfg().dev_mem - g_dev_used[t_dev];
    if (total_bytes) *total_bytes = cfg().dev_mem;
    return cudaSuccess;
}

static cudaError_t sync_streams(int device, bool all_devices) {
    std::vector<std::pair<stream *, uint64_t>> w;
    {
        std::lock_guard<std::recursive_mutex> g(api_mu());
        for (stream *s : streams())
            if (all_devices || s->device == device) w.push_back({s, s->enq_seq});
    }
    vclock v;
    for (auto &x : w) {
        wait_done(x.first->slot, x.second);
        if (v.size() <= (size_t)x.first->slot) v.resize(x.first->slot + 1, 0);
        v[x.first->slot] = std::max(v[x.first->slot], x.second);
    }
    // Everything enqueued on those streams up to now has completed, and with it what it waited for.
    {
        std::lock_guard<std::recursive_mutex> g(api_mu());
        for (auto &x : w) vc_join(v, x.first->vc);
    }
    host_observe(v);
    return sticky();
}
// Wait until the device's queued work has run, without the host learning anything from
// it: cudaFree "may perform implicit synchronization" (NVIDIA's words), so the emulator
// makes the memory safe to release but a program must not rely on that for ordering.
static void drain_streams(int device, bool all_devices) {
    std::vector<std::pair<stream *, uint64_t>> w;
    {
        std::lock_guard<std::recursive_mutex> g(api_mu());
        for (stream *s : streams())
            if (all_devices || s->device == device) w.push_back({s, s->enq_seq});
    }
    for (auto &x : w) wait_done(x.first->slot, x.second);
}

// Freeing memory that an op used which the host has not synchronised with: on a GPU the
// op may still be running (cudaFree's synchronisation is not guaranteed).
static void check_free(alloc *a, const char *what, const void *caller) {
    std::lock_guard<std::mutex> g(chk_mu());
    for (auto &sl : a->recs) {
        if (sl.second.empty()) continue;
        const access_rec &r = sl.second.back();
        if (r.pseudo || r.seq <= vc_at(host_vc(), sl.first)) continue;
        char ad[700], o[900], pc[512];
        describe_alloc(a, ad, sizeof ad);
        op fake;
        fake.what = r.what, fake.file = r.file, fake.line = r.line, fake.caller = r.caller, fake.seq = r.seq,
        fake.slot = r.slot;
        describe_op(&fake, o, sizeof o);
        describe_pc(caller, pc, sizeof pc);
        violation("%s of %s in %s while %s used it and the host has not synchronised with that stream since "
                  "(cudaFree is not guaranteed to wait for the device: synchronise first, or free with "
                  "cudaFreeAsync on the stream)",
                  what, ad, pc, o);
    }
}

cudaError_t cudaDeviceSynchronize(void) {
    init_once();
    return sync_streams(t_dev, false);
}
cudaError_t cudaDeviceReset(void) {
    init_once();
    return sync_streams(t_dev, false);
}

// ---- memory ----
cudaError_t cudaMalloc(void **p, size_t bytes) {
    API_ENTER();
    if (!p) return api_error(cudaErrorInvalidValue, "cudaMalloc(NULL, %zu)", bytes);
    return dev_alloc(p, bytes, "cudaMalloc", CALLER);
}

cudaError_t cudaFree(void *p) {
    API_ENTER();
    if (!p) return cudaSuccess;
    alloc *a = find_alloc((uintptr_t)p, true);
    if (!a || a->base != (char *)p || a->kind != MEM_DEVICE)
        return api_error(cudaErrorInvalidValue, "cudaFree(%p): not the start of a device allocation", p);
    if (a->freed.load()) return api_error(cudaErrorInvalidValue, "cudaFree(%p): allocation #%llu freed twice", p, (unsigned long long)a->id);
    // The emulator waits for the device (work still queued may use the memory) but does not
    // count that as the host's synchronisation: an unsynchronised user is a violation.
    drain_streams(a->device, false);
    check_free(a, "cudaFree", CALLER);
    std::lock_guard<std::recursive_mutex> g(api_mu());
    a->freed.store(true);
    release_mapping(a);
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
    API_ENTER();
    if (!p) return api_error(cudaErrorInvalidValue, "cudaMallocAsync(NULL)");
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = resolve(s);
    if (!S) return api_error(cudaErrorInvalidResourceHandle, "cudaMallocAsync: invalid stream");
    cudaError_t e = dev_alloc(p, bytes, "cudaMallocAsync", CALLER);
    if (e) return e;
    alloc *a = find_alloc((uintptr_t)*p, false);
    // The memory belongs to work ordered after this point of stream s: a pseudo write of the
    // whole range makes an unordered use from another stream a reported race.
    op *o = new op;
    o->what = "cudaMallocAsync";
    o->caller = CALLER;
    o->run = [a]() {
        fp_entry e{a, UINTPTR_MAX, 0, (uintptr_t)a->base, (uintptr_t)a->base + std::max<size_t>(a->size, 1), true};
        t_op->fp.push_back(e);
        return cudaSuccess;
    };
    return enqueue_op(S, o);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    API_ENTER();
    if (!p) return cudaSuccess;
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = resolve(s);
    if (!S) return api_error(cudaErrorInvalidResourceHandle, "cudaFreeAsync: invalid stream");
    alloc *a = find_alloc((uintptr_t)p, true);
    if (!a || a->base != (char *)p || a->kind != MEM_DEVICE || a->freed.load())
        return api_error(cudaErrorInvalidValue, "cudaFreeAsync(%p): not a live device allocation", p);
    op *o = new op;
    o->what = "cudaFreeAsync";
    o->caller = CALLER;
    o->run = [a]() {
        fp_entry e{a, UINTPTR_MAX, 0, (uintptr_t)a->base, (uintptr_t)a->base + std::max<size_t>(a->size, 1), true};
        t_op->fp.push_back(e);
        check_footprint(t_op);  // against unordered users, before the memory goes
        t_op->fp.clear();
        std::lock_guard<std::recursive_mutex> g(api_mu());
        a->freed.store(true);
        release_mapping(a);
        return cudaSuccess;
    };
    return enqueue_op(S, o);
}

static cudaError_t pinned_alloc(void **out, size_t size, const char *how, const void *caller) {
    init_once();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    const size_t len = ((size ? size : 1) + PAGE - 1) & ~(PAGE - 1);
    if (g_pin_next + len + PAGE > PIN_SPAN) return api_error(cudaErrorMemoryAllocation, "page-locked space exhausted");
    const size_t off = g_pin_next;
    g_pin_next += len + PAGE;
    if (ftruncate(g_memfd, (off_t)g_pin_next) != 0) return api_error(cudaErrorMemoryAllocation, "ftruncate: %s", strerror(errno));
    char *h = g_pin_host + off, *d = g_pin_dev + off;
    if (mmap(h, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, g_memfd, (off_t)off) == MAP_FAILED ||
        mmap(d, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, g_memfd, (off_t)off) == MAP_FAILED)
        return api_error(cudaErrorMemoryAllocation, "mmap of page-locked memory: %s", strerror(errno));
    memset(h, 0xff, len);
    alloc *a = new alloc;
    a->id = ++g_alloc_ids;
    a->base = h;
    a->size = size;
    a->map_lo = h;
    a->map_len = len;
    a->kind = MEM_PINNED;
    a->device = -1;
    a->how = how;
    a->caller = caller;
    a->pin_off = off;
    register_alloc(a);
    *out = h;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    API_ENTER();
    if (!p) return api_error(cudaErrorInvalidValue, "cudaMallocHost(NULL)");
    return pinned_alloc(p, bytes, "cudaMallocHost", CALLER);
}
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags) {
    API_ENTER();
    if (!p) return api_error(cudaErrorInvalidValue, "cudaHostAlloc(NULL)");
    return pinned_alloc(p, bytes, "cudaHostAlloc", CALLER);
}
cudaError_t cudaFreeHost(void *p) {
    API_ENTER();
    if (!p) return cudaSuccess;
    alloc *a = find_alloc((uintptr_t)p, true);
    if (!a || a->base != (char *)p || a->kind != MEM_PINNED || a->freed.load())
        return api_error(cudaErrorInvalidValue, "cudaFreeHost(%p): not a live cudaMallocHost allocation", p);
    drain_streams(0, true);
    check_free(a, "cudaFreeHost", CALLER);
    std::lock_guard<std::recursive_mutex> g(api_mu());
    for (const prot &x : prots())
        if (x.a == a) violation("cudaFreeHost(%p) while a copy that uses it is not known to be complete", p);
    a->freed.store(true);
    release_mapping(a);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned int flags) {
    API_ENTER();
    if (!p || !bytes) return api_error(cudaErrorInvalidValue, "cudaHostRegister(%p, %zu)", p, bytes);
    std::lock_guard<std::recursive_mutex> g(api_mu());
    // The driver pins whole pages: a range sharing a page with an earlier registration (or
    // page-locked memory) is refused, as on a GPU machine.
    const uintptr_t lo = (uintptr_t)p & ~(PAGE - 1), hi = ((uintptr_t)p + bytes + PAGE - 1) & ~(PAGE - 1);
    {
        std::shared_lock<std::shared_mutex> s(alloc_mu());
        for (auto &kv : allocs()) {
            alloc *a = kv.second;
            if (a->freed.load() || a->kind == MEM_DEVICE) continue;
            const uintptr_t alo = (uintptr_t)a->base & ~(PAGE - 1),
                            ahi = ((uintptr_t)a->base + a->size + PAGE - 1) & ~(PAGE - 1);
            if (lo < ahi && alo < hi)
                return api_error(cudaErrorHostMemoryAlreadyRegistered,
                                 "cudaHostRegister(%p, %zu): its pages overlap %s #%llu at %p", p, bytes, a->how,
                                 (unsigned long long)a->id, (void *)a->base);
        }
    }
    if ((uintptr_t)p - (uintptr_t)g_base < DEV_SPAN + 2 * PIN_SPAN)
        return api_error(cudaErrorInvalidValue, "cudaHostRegister(%p): device or page-locked memory", p);
    alloc *a = new alloc;
    a->id = ++g_alloc_ids;
    a->base = (char *)p;
    a->size = bytes;
    a->map_lo = (char *)lo;
    a->map_len = hi - lo;
    a->kind = MEM_REGISTERED;
    a->device = -1;
    a->how = "cudaHostRegister";
    a->caller = CALLER;
    register_alloc(a);
    return cudaSuccess;
}
cudaError_t cudaHostUnregister(void *p) {
    API_ENTER();
    alloc *a = p ? find_alloc((uintptr_t)p, false) : nullptr;
    if (!a || a->base != (char *)p || a->kind != MEM_REGISTERED)
        return api_error(cudaErrorHostMemoryNotRegistered, "cudaHostUnregister(%p): not registered", p);
    std::unique_lock<std::shared_mutex> g(alloc_mu());
    a->freed.store(true);
    allocs().erase((uintptr_t)a->base);  // host memory may be registered again later
    return cudaSuccess;
}

// Copies. Host memory is page-locked (cudaMallocHost / cudaHostRegister) or pageable; the
// host-side synchronisation follows NVIDIA's "API synchronization behavior" page.
enum { M_PAGEABLE = 0, M_DEV = 1, M_PIN = 2, M_REG = 3 };
static int classify(const void *p, size_t n, alloc **out) {
    *out = nullptr;
    alloc *a = find_alloc((uintptr_t)p, false);
    if (!a || (uintptr_t)p >= (uintptr_t)a->base + a->size + (n == 0)) {
        if ((uintptr_t)p - (uintptr_t)g_base < DEV_SPAN) return -1;  // freed or never allocated device memory
        return M_PAGEABLE;
    }
    *out = a;
    if (a->kind == MEM_DEVICE) return (uintptr_t)p + n <= (uintptr_t)a->base + a->size ? M_DEV : -2;
    if ((uintptr_t)p + n > (uintptr_t)a->base + a->size) return M_PAGEABLE;  // only partly locked
    return a->kind == MEM_PINNED ? M_PIN : M_REG;
}

static const char *kind_name(cudaMemcpyKind k) {
    switch (k) {
    case cudaMemcpyHostToHost: return "HostToHost";
    case cudaMemcpyHostToDevice: return "HostToDevice";
    case cudaMemcpyDeviceToHost: return "DeviceToHost";
    case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
    default: return "Default";
    }
}

static cudaError_t memcpy_impl(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s, bool async,
                               const void *caller) {
    API_ENTER();
    const char *what = async ? "cudaMemcpyAsync" : "cudaMemcpy";
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return api_error(cudaErrorInvalidValue, "%s: NULL pointer", what);
    alloc *da, *sa;
    const int dk = classify(dst, n, &da), sk = classify(src, n, &sa);
    if (dk < 0 || sk < 0)
        return api_error(cudaErrorInvalidValue, "%s(%p <- %p, %zu bytes): the device range is %s", what, dst, src, n,
                         (dk == -2 || sk == -2) ? "longer than its allocation" : "not in a live allocation");
    const bool ddev = dk == M_DEV, sdev = sk == M_DEV;
    cudaMemcpyKind k = kind;
    if (k == cudaMemcpyDefault)
        k = ddev ? (sdev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                 : (sdev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    const bool want_ddev = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
    const bool want_sdev = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
    if ((int)k < 0 || (int)k > 3) return api_error(cudaErrorInvalidMemcpyDirection, "%s: kind %d", what, (int)kind);
    if (want_ddev != ddev || want_sdev != sdev)
        return api_error(cudaErrorInvalidValue, "%s(%s): destination %p is %s memory and source %p is %s memory", what,
                         kind_name(kind), dst, ddev ? "device" : "host", src, sdev ? "device" : "host");
    if (k == cudaMemcpyHostToHost) {  // fully synchronous, on the host
        memmove(dst, src, n);
        return cudaSuccess;
    }
    std::unique_lock<std::recursive_mutex> g(api_mu());
    stream *S = async ? resolve(s) : legacy_stream(t_dev);
    if (!S) return api_error(cudaErrorInvalidResourceHandle, "%s: invalid stream %p", what, (void *)s);
    if ((ddev && da->device != S->device) || (sdev && sa->device != S->device))
        return api_error(cudaErrorInvalidValue, "%s: device memory of another device than the stream's", what);
    // Pageable host source: staged now, so the caller may reuse its buffer on return.
    char *staged = nullptr;
    if (k == cudaMemcpyHostToDevice && sk == M_PAGEABLE) {
        if (!async) {  // "a stream sync is performed before the copy is initiated"
            const uint64_t upto = S->enq_seq;
            g.unlock();
            wait_done(S->slot, upto);
            g.lock();
        }
        staged = (char *)malloc(n);
        memcpy(staged, src, n);
    }
    op *o = new op;
    o->what = async ? (k == cudaMemcpyHostToDevice ? "cudaMemcpyAsync(HostToDevice)"
                       : k == cudaMemcpyDeviceToHost ? "cudaMemcpyAsync(DeviceToHost)"
                                                     : "cudaMemcpyAsync(DeviceToDevice)")
                    : (k == cudaMemcpyHostToDevice ? "cudaMemcpy(HostToDevice)"
                       : k == cudaMemcpyDeviceToHost ? "cudaMemcpy(DeviceToHost)"
                                                     : "cudaMemcpy(DeviceToDevice)");
    o->caller = caller;
    const bool track_src = sdev || sk == M_PIN || sk == M_REG, track_dst = ddev || dk == M_PIN || dk == M_REG;
    o->run = [=]() {
        if (track_src && !staged) record_read(src, n);
        if (track_dst) record_write(dst, n);
        memmove(device_view(dst), staged ? staged : device_view(src), n);
        free(staged);
        return cudaSuccess;
    };
    const char *what_op = o->what;
    cudaError_t e = enqueue_op(S, o);  // o may complete and be deleted at once: use S's state (api_mu held)
    if (e) return e;
    const int slot = S->slot;
    const uint64_t seq = S->enq_seq;
    vclock vc = S->vc;
    // The program's view of page-locked memory in flight is protected until the host is
    // known to have synchronised with the copy.
    if (dk == M_PIN) prot_add(da, dst, n, PROT_NONE, slot, seq, what_op, caller);
    if (sk == M_PIN) prot_add(sa, src, n, PROT_READ, slot, seq, what_op, caller);
    // Does the host wait for the copy?
    bool wait = false;
    if (async)
        wait = k == cudaMemcpyDeviceToHost && dk == M_PAGEABLE;  // returns only once the copy has completed
    else
        wait = k == cudaMemcpyDeviceToHost || (k == cudaMemcpyHostToDevice && sk != M_PAGEABLE);
    g.unlock();
    if (wait) {
        wait_done(slot, seq);
        host_observe(vc);
    }
    return sticky();
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    return memcpy_impl(dst, src, bytes, kind, nullptr, false, CALLER);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    return memcpy_impl(dst, src, bytes, kind, s, true, CALLER);
}

static cudaError_t memset_impl(void *p, int value, size_t n, cudaStream_t s, bool async, const void *caller) {
    API_ENTER();
    const char *what = async ? "cudaMemsetAsync" : "cudaMemset";
    if (n == 0) return cudaSuccess;
    if (!is_device_range(p, n, -1))
        return api_error(cudaErrorInvalidValue, "%s(%p, %zu bytes): not inside one live device allocation", what, p, n);
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = async ? resolve(s) : legacy_stream(t_dev);
    if (!S) return api_error(cudaErrorInvalidResourceHandle, "%s: invalid stream", what);
    op *o = new op;
    o->what = what;
    o->caller = caller;
    o->run = [=]() {
        record_write(p, n);
        memset(p, value, n);
        return cudaSuccess;
    };
    return enqueue_op(S, o);  // asynchronous with respect to the host (device memory)
}
cudaError_t cudaMemset(void *p, int value, size_t bytes) { return memset_impl(p, value, bytes, nullptr, false, CALLER); }
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s) {
    return memset_impl(p, value, bytes, s, true, CALLER);
}

// ---- streams ----
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    API_ENTER();
    if (!s) return api_error(cudaErrorInvalidValue, "cudaStreamCreate(NULL)");
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = new_stream(flags & cudaStreamNonBlocking, false, t_dev, CALLER);
    live_handles().insert(S);
    *s = (cudaStream_t)(void *)S;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    init_once();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    if (!s || !live_handles().count((void *)s)) return api_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy(%p)", (void *)s);
    stream *S = (stream *)(void *)s;
    live_handles().erase((void *)s);
    S->dying = true;  // its queued work still runs (the thread stays); the handle is gone
    return cudaSuccess;
}
cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags) {
    init_once();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = resolve(s);
    if (!S || !flags) return api_error(cudaErrorInvalidResourceHandle, "cudaStreamGetFlags");
    *flags = S->flags;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    API_ENTER();
    stream *S;
    uint64_t upto;
    vclock v;
    {
        std::lock_guard<std::recursive_mutex> g(api_mu());
        S = resolve(s);
        if (!S) return api_error(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize(%p)", (void *)s);
        upto = S->enq_seq;
        v = S->vc;
    }
    wait_done(S->slot, upto);
    host_observe(v);
    return sticky();
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
    API_ENTER();
    stream *S;
    uint64_t upto;
    vclock v;
    {
        std::lock_guard<std::recursive_mutex> g(api_mu());
        S = resolve(s);
        if (!S) return api_error(cudaErrorInvalidResourceHandle, "cudaStreamQuery(%p)", (void *)s);
        upto = S->enq_seq;
        v = S->vc;
    }
    if (S->done_seq.load() < upto) return cudaErrorNotReady;
    host_observe(v);
    return sticky();
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data) {
    API_ENTER();
    if (!fn) return api_error(cudaErrorInvalidValue, "cudaLaunchHostFunc(NULL)");
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = resolve(s);
    if (!S) return api_error(cudaErrorInvalidResourceHandle, "cudaLaunchHostFunc: invalid stream");
    op *o = new op;
    o->what = "cudaLaunchHostFunc";
    o->caller = CALLER;
    o->run = [fn, data]() {
        op *me = t_op;
        t_op = nullptr;  // host code: its memory accesses are the host's
        fn(data);
        t_op = me;
        return cudaSuccess;
    };
    return enqueue_op(S, o);
}

// ---- events ----
struct zt_emu_event {
    unsigned flags;
    int device;
    bool recorded;
    int slot;
    uint64_t seq;
    vclock vc;
    std::shared_ptr<double> stamp;
};
static int g_live_events;
// Test hook: events created and not yet destroyed (a leak check).
int zt_cudaemu_live_events(void) {
    std::lock_guard<std::recursive_mutex> g(api_mu());
    return g_live_events;
}
static zt_emu_event *ev_of(cudaEvent_t e) {
    if (!e || !live_handles().count((void *)e)) return nullptr;
    return (zt_emu_event *)(void *)e;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    API_ENTER();
    if (!e) return api_error(cudaErrorInvalidValue, "cudaEventCreate(NULL)");
    std::lock_guard<std::recursive_mutex> g(api_mu());
    zt_emu_event *x = new zt_emu_event{flags, t_dev, false, -1, 0, {}, nullptr};
    live_handles().insert(x);
    g_live_events++;
    *e = (cudaEvent_t)(void *)x;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    init_once();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    zt_emu_event *x = ev_of(e);
    if (!x) return api_error(cudaErrorInvalidResourceHandle, "cudaEventDestroy(%p)", (void *)e);
    live_handles().erase(x);
    g_live_events--;
    delete x;  // the ops keep their own stamp (shared_ptr)
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    API_ENTER();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    zt_emu_event *x = ev_of(e);
    if (!x) return api_error(cudaErrorInvalidResourceHandle, "cudaEventRecord: invalid event %p", (void *)e);
    stream *S = resolve(s);
    if (!S) return api_error(cudaErrorInvalidResourceHandle, "cudaEventRecord: invalid stream %p", (void *)s);
    if (S->device != x->device)
        return api_error(cudaErrorInvalidResourceHandle, "cudaEventRecord: event of device %d on a stream of device %d",
                         x->device, S->device);
    op *o = new op;
    o->what = "cudaEventRecord";
    o->caller = CALLER;
    o->stamp = std::make_shared<double>(0.0);
    x->stamp = o->stamp;
    cudaError_t r = enqueue_op(S, o);  // o may be gone already: S's state is the op's (api_mu held)
    if (r) return r;
    x->recorded = true;
    x->slot = S->slot;
    x->seq = S->enq_seq;
    x->vc = S->vc;
    return cudaSuccess;
}
static bool ev_done(const zt_emu_event *x) { return g_slot[x->slot]->done_seq.load() >= x->seq; }
cudaError_t cudaEventQuery(cudaEvent_t e) {
    API_ENTER();
    vclock v;
    {
        std::lock_guard<std::recursive_mutex> g(api_mu());
        zt_emu_event *x = ev_of(e);
        if (!x) return api_error(cudaErrorInvalidResourceHandle, "cudaEventQuery: invalid event %p", (void *)e);
        if (!x->recorded) return cudaSuccess;  // never recorded: "completed"
        if (!ev_done(x)) return cudaErrorNotReady;
        v = x->vc;
    }
    host_observe(v);
    return sticky();
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    API_ENTER();
    int slot;
    uint64_t seq;
    vclock v;
    {
        std::lock_guard<std::recursive_mutex> g(api_mu());
        zt_emu_event *x = ev_of(e);
        if (!x) return api_error(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: invalid event %p", (void *)e);
        if (!x->recorded) return cudaSuccess;
        slot = x->slot, seq = x->seq, v = x->vc;
    }
    wait_done(slot, seq);
    host_observe(v);
    return sticky();
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    API_ENTER();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    zt_emu_event *x = ev_of(a), *y = ev_of(b);
    if (!ms || !x || !y) return api_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: invalid event");
    if ((x->flags | y->flags) & cudaEventDisableTiming)
        return api_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was created with cudaEventDisableTiming");
    if (!x->recorded || !y->recorded) return api_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: event never recorded");
    if (!ev_done(x) || !ev_done(y)) return cudaErrorNotReady;
    *ms = (float)((*y->stamp - *x->stamp) * 1e3);
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
    API_ENTER();
    std::lock_guard<std::recursive_mutex> g(api_mu());
    stream *S = resolve(s);
    zt_emu_event *x = ev_of(e);
    if (!S || !x) return api_error(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: invalid %s", S ? "event" : "stream");
    if (!x->recorded) return cudaSuccess;  // "returns immediately" for an event never recorded
    // Work enqueued on s from now on waits for the event's recorded point: both the
    // execution (the wait op) and the happens-before relation (the clock join).
    vc_join(S->vc, x->vc);
    op *o = new op;
    o->what = "cudaStreamWaitEvent";
    o->caller = CALLER;
    o->waits.push_back({x->slot, x->seq});
    return enqueue_op(S, o);
}

}  // extern "C"
