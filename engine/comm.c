// Backend-neutral half of the process group: argument checks, request handles, the
// flight recorder, the deadline that turns a hung collective into a report and a job
// abort, and the watchdog thread that does the same for host waits outside the comm
// layer and for a backend's asynchronous errors. Backends (comm_mpi.c, comm_nccl.c)
// only start and poll collectives.
#define _GNU_SOURCE
#include "engine/comm.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/out_file.h"
#include "base/env.h"
#include "engine/flight.h"

#define ZT_COMM_DEFAULT_FLIGHT 256
#define ZT_WAIT_SPIN_S 0.02  // zt_wait polls (yielding) this long before it starts to sleep
#define ZT_COMM_ABORT_CODE 3
#define ZT_WATCHDOG_DEFAULT_PERIOD_MS 100
#define ZT_WATCH_LABEL 96  // bytes kept of a watch label, NUL included

struct zt_req {
    zt_coll d;
    char label[ZT_FLIGHT_LABEL];
    uint64_t seq;
    double t0;        // zt_now() when issued
    int64_t t0_wall;  // for the report and the flight record
    double timeout;   // the deadline that applies to this request, seconds
    void *h;          // backend handle; NULL once complete
    int state;        // 0 in flight, 1 done, -1 failed (err holds why)
    char *err;
    size_t *counts;       // all-to-all: the copied send_counts | recv_counts (d points into it)
    zt_req *prev, *next;  // outstanding list, oldest first
};

// The watched host wait (zt_comm_watch_begin/end). One writer (the main thread), one
// reader (the watchdog): a seqlock over fields that are each atomic, so the reader
// gets a consistent snapshot (never one region's label with another's start time)
// without the writer ever taking a lock or making a syscall.
typedef struct {
    atomic_uint seq;           // odd while the main thread rewrites the fields below
    atomic_int active;         // 0: no watched region
    atomic_int first;          // 1: the first-step allowance applied when it began
    _Atomic double t0;         // zt_now() at watch_begin (CLOCK_MONOTONIC)
    _Atomic double timeout;    // the deadline that applies, fixed at watch_begin
    atomic_ullong label[ZT_WATCH_LABEL / 8];  // the label, 8 bytes per word
} zt_watch_slot;

typedef struct {
    int active, first;
    double t0, timeout;
    char label[ZT_WATCH_LABEL];
} zt_watch_view;

struct zt_comm {
    const zt_comm_backend *be;
    const zt_comm *parent;  // zt_comm_split's child: the parent's deadlines apply (NULL: its own)
    int world_rank;         // this process's rank in the root comm: what reports call it
    // zt_comm_split_group's child: what the group is called and its members' world ranks
    // (group rank order), for the deadline report; NULL / 0 otherwise.
    char *title;
    int *members;
    int nmembers;
    void *self;
    zt_comm_info info;
    // Written by the main thread only; atomics because the watchdog thread reads them
    // (context for its report, deadlines for the applicable rule). Relaxed accesses:
    // plain loads and stores on x86-64 and aarch64, so the per-collective path pays
    // nothing for them.
    _Atomic double timeout_s, first_timeout_s;
    atomic_int warm;
    atomic_llong step, epoch;
    atomic_int micro;
    char *run_dir;
    zt_flight *fl;
    // Request list: main thread only. The watchdog reads it without synchronisation
    // only once it has decided to abort (the main thread is blocked elsewhere then;
    // a torn read costs at worst a wrong "in flight" line in a dying process).
    zt_req *head, *tail;
    int outstanding;
    // Set once by whichever thread reports first (a deadline in zt_wait/zt_test or
    // the watchdog); the other thread then parks instead of printing a second report.
    atomic_int aborting;
    zt_watch_slot watch;
    // The watchdog thread: wd_mu/wd_cv only pair the watchdog's sleep with its stop
    // signal (zt_comm_finalize); the main thread's collective path never takes them.
    pthread_t wd;
    int wd_started;
    int wd_stop;  // under wd_mu
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cv;
    long wd_period_ms;
};

#define RLX memory_order_relaxed

// ---- lifetime ----------------------------------------------------------------------
zt_comm_opts zt_comm_opts_default(void) {
    zt_comm_opts o = {ZT_COMM_DEFAULT_TIMEOUT, ZT_COMM_DEFAULT_FIRST_TIMEOUT, NULL, ZT_COMM_DEFAULT_FLIGHT};
    return o;
}

static void watchdog_stop(zt_comm *c);
static int watchdog_start(zt_comm *c);

int zt_comm_create(zt_comm **out, const zt_comm_backend *be, void *self, const zt_comm_info *info,
                   const zt_comm_opts *opts) {
    *out = NULL;
    zt_comm_opts o = opts ? *opts : zt_comm_opts_default();
    if (!(o.timeout_s > 0)) o.timeout_s = ZT_COMM_DEFAULT_TIMEOUT;  // also catches NaN
    if (!(o.first_timeout_s > 0)) o.first_timeout_s = fmax(ZT_COMM_DEFAULT_FIRST_TIMEOUT, o.timeout_s);
    if (o.flight_capacity <= 0) o.flight_capacity = ZT_COMM_DEFAULT_FLIGHT;
    long period_ms = ZT_WATCHDOG_DEFAULT_PERIOD_MS;
    const char *env = zt_env_str(ZT_ENV_WATCHDOG_PERIOD_MS);
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        period_ms = strtol(env, &end, 10);
        if (errno || *end || period_ms < 1 || period_ms > 60000) {
            be->destroy(self);
            return zt_err("rank %d: ZT_WATCHDOG_PERIOD_MS=\"%s\": the watchdog period must be a whole number of "
                          "milliseconds in [1, 60000] (default %d)",
                          info->rank, env, ZT_WATCHDOG_DEFAULT_PERIOD_MS);
        }
    }
    zt_comm *c = zt_xcalloc(1, sizeof *c);
    c->be = be;
    c->self = self;
    c->info = *info;
    c->world_rank = info->rank;  // a child's is set by zt_comm_split_group
    atomic_init(&c->timeout_s, o.timeout_s);
    atomic_init(&c->first_timeout_s, o.first_timeout_s);
    c->wd_period_ms = period_ms;
    if (o.run_dir) {
        c->run_dir = zt_xmalloc(strlen(o.run_dir) + 1);
        strcpy(c->run_dir, o.run_dir);
    }
    if (zt_flight_open(&c->fl, c->run_dir, info->rank, info->world, info->node, o.flight_capacity) < 0) {
        be->destroy(self);
        free(c->run_dir);
        free(c);
        return -1;
    }
    // Last, so that no failure above has a thread to stop.
    if (watchdog_start(c) < 0) {
        be->destroy(self);
        zt_flight_close(c->fl, ZT_FL_FINALIZED);
        free(c->run_dir);
        free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int zt_comm_finalize(zt_comm *c) {
    if (!c) return 0;
    // First: the watchdog polls the backend (async_error), which is destroyed below.
    watchdog_stop(c);
    int rc = 0;
    if (c->outstanding) {
        rc = zt_err(
            "rank %d: zt_comm_finalize with %d collective(s) still in flight, oldest %s(\"%s\") seq %llu; "
            "every zt_i* handle needs a zt_wait",
            c->info.rank, c->outstanding, zt_op_name(c->head->d.op), c->head->label, (unsigned long long)c->head->seq);
        // The handles are leaked on purpose: the backend may still write into them.
    }
    c->be->destroy(c->self);
    zt_flight_close(c->fl, ZT_FL_FINALIZED);
    free(c->run_dir);
    free(c->title);
    free(c->members);
    free(c);
    return rc;
}

void zt_comm_get_info(const zt_comm *c, zt_comm_info *out) { *out = c->info; }

int zt_comm_split(zt_comm *c, int color, int key, const char *name, zt_comm **out) {
    const zt_comm_group g = {NULL, name, NULL, 0};
    return zt_comm_split_group(c, color, key, &g, out);
}

// RUN/groups/ID/group.json: who the group's rank-NNNNN.flight files are (zerotrain watch reads it).
static int write_group_json(const char *dir, const zt_comm_group *g) {
    char *js = NULL, path[4200];
    size_t n = 0;
    FILE *f = open_memstream(&js, &n);
    if (!f) return zt_err("%s/group.json: out of memory", dir);
    fprintf(f, "{\"format\": \"zerotrain-group\", \"version\": 1, \"id\": \"%s\", \"title\": \"%s\", \"ranks\": [", g->id,
            g->title);
    for (int i = 0; i < g->nranks; i++) fprintf(f, "%s%d", i ? ", " : "", g->ranks[i]);
    fprintf(f, "]}\n");
    fclose(f);
    snprintf(path, sizeof path, "%s/group.json", dir);
    const int rc = zt_write_file_atomic(path, js, n);
    free(js);
    return rc;
}

int zt_comm_split_group(zt_comm *c, int color, int key, const zt_comm_group *g, zt_comm **out) {
    *out = NULL;
    const char *name = g->title ? g->title : "";
    if (!c->be->split) return zt_err("rank %d: the %s process group cannot make sub-groups", c->info.rank, c->be->name);
    zt_comm_opts o = zt_comm_opts_default();
    o.timeout_s = atomic_load_explicit(&c->timeout_s, memory_order_relaxed);
    o.first_timeout_s = atomic_load_explicit(&c->first_timeout_s, memory_order_relaxed);
    // Without an id, memory only: RUN/ranks/rank-N.flight is the parent's (a child's rank N is
    // another rank). With one, the group's own directory.
    char dir[4200] = "";
    o.run_dir = NULL;
    if (c->run_dir && g->id && g->id[0]) {
        for (const char *p = g->id; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
                  *p == '_'))
                return zt_err("rank %d: group id \"%s\": only letters, digits, - and _", c->info.rank, g->id);
        snprintf(dir, sizeof dir, "%s/groups/%s", c->run_dir, g->id);
        if (zt_out_mkdirs(c->run_dir, dir) != 0)  // real directories, never a link out of RUN
            return zt_err_prefix("rank %d: the flight recorder directory of %s", c->info.rank, name);
        o.run_dir = dir;
    }
    if (c->be->split(c->self, color, key, name, &o, out) != 0)
        return zt_err_prefix("rank %d: making the sub-group \"%s\" (color %d)", c->info.rank, name, color);
    zt_comm *k = *out;
    k->parent = c;
    k->world_rank = c->world_rank;
    if (g->title) {
        k->title = zt_xmalloc(strlen(g->title) + 1);
        strcpy(k->title, g->title);
    }
    if (g->ranks && g->nranks == k->info.world) {
        k->members = zt_xmalloc((size_t)g->nranks * sizeof *k->members);
        memcpy(k->members, g->ranks, (size_t)g->nranks * sizeof *k->members);
        k->nmembers = g->nranks;
    }
    if (dir[0] && k->info.rank == 0 && k->members && write_group_json(dir, g) != 0) {
        // The ring is written all the same; only the names in a report of the watcher are missing.
        fprintf(stderr, "zerotrain: rank %d: warning: %s\n", c->world_rank, zt_errmsg());
        zt_err_clear();
    }
    return 0;
}

const char *zt_comm_title(const zt_comm *c) { return c->title ? c->title : ""; }
const char *zt_comm_backend_name(const zt_comm *c) { return c->be->name; }
void *zt_comm_backend_self(const zt_comm *c) { return c->self; }
const char *zt_comm_flight_path(const zt_comm *c) { return zt_flight_path(c->fl); }

void zt_comm_set_context(zt_comm *c, int64_t step, int64_t epoch, int micro) {
    atomic_store_explicit(&c->step, step, RLX);
    atomic_store_explicit(&c->epoch, epoch, RLX);
    atomic_store_explicit(&c->micro, micro, RLX);
    zt_flight_set_context(c->fl, step, epoch, micro);
}

void zt_comm_mark_warm(zt_comm *c) { atomic_store_explicit(&c->warm, 1, RLX); }

double zt_comm_set_timeout(zt_comm *c, double timeout_s) {
    double old = atomic_load_explicit(&c->timeout_s, RLX);
    if (timeout_s > 0) atomic_store_explicit(&c->timeout_s, timeout_s, RLX);
    return old;
}

// The deadline for something that starts now, collective or watched host wait:
// timeout_s once warm; before that the first-step allowance, as given (also when shorter:
// `train --first-collective-timeout` is honoured; the session raises its default instead).
static double applicable_timeout(const zt_comm *c, int *first) {
    if (c->parent) return applicable_timeout(c->parent, first);
    double t = atomic_load_explicit(&c->timeout_s, RLX);
    int warm = atomic_load_explicit(&c->warm, RLX);
    if (first) *first = !warm;
    return warm ? t : atomic_load_explicit(&c->first_timeout_s, RLX);
}

// ---- watched host waits and the watchdog thread ---------------------------------------
static void watch_write_begin(zt_watch_slot *w) {
    unsigned s = atomic_load_explicit(&w->seq, RLX);
    atomic_store_explicit(&w->seq, s + 1, RLX);
    atomic_thread_fence(memory_order_release);
}

static void watch_write_end(zt_watch_slot *w) {
    unsigned s = atomic_load_explicit(&w->seq, RLX);
    atomic_store_explicit(&w->seq, s + 1, memory_order_release);
}

void zt_comm_watch_begin(zt_comm *c, const char *label) {
    if (!c) return;
    int first = 0;
    double timeout = applicable_timeout(c, &first), t0 = zt_now();
    // The label is packed into words before the seqlock is opened, so the reader's
    // retry window stays a dozen stores long.
    unsigned long long words[ZT_WATCH_LABEL / 8] = {0};
    if (label) {
        size_t n = strnlen(label, ZT_WATCH_LABEL - 1);
        memcpy(words, label, n);
    }
    zt_watch_slot *w = &c->watch;
    watch_write_begin(w);
    atomic_store_explicit(&w->t0, t0, RLX);
    atomic_store_explicit(&w->timeout, timeout, RLX);
    atomic_store_explicit(&w->first, first, RLX);
    for (int i = 0; i < ZT_WATCH_LABEL / 8; i++) atomic_store_explicit(&w->label[i], words[i], RLX);
    atomic_store_explicit(&w->active, 1, RLX);
    watch_write_end(w);
}

void zt_comm_watch_end(zt_comm *c) {
    if (!c) return;
    watch_write_begin(&c->watch);
    atomic_store_explicit(&c->watch.active, 0, RLX);
    watch_write_end(&c->watch);
}

// Consistent copy of the watch slot; 0 if the writer kept it busy (then the next
// period looks again: a region that outlives its deadline is still caught).
static int watch_read(zt_comm *c, zt_watch_view *v) {
    zt_watch_slot *w = &c->watch;
    for (int tries = 0; tries < 1000; tries++) {
        unsigned s1 = atomic_load_explicit(&w->seq, memory_order_acquire);
        if (s1 & 1) continue;
        v->active = atomic_load_explicit(&w->active, RLX);
        v->first = atomic_load_explicit(&w->first, RLX);
        v->t0 = atomic_load_explicit(&w->t0, RLX);
        v->timeout = atomic_load_explicit(&w->timeout, RLX);
        unsigned long long words[ZT_WATCH_LABEL / 8];
        for (int i = 0; i < ZT_WATCH_LABEL / 8; i++) words[i] = atomic_load_explicit(&w->label[i], RLX);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&w->seq, RLX) != s1) continue;
        memcpy(v->label, words, sizeof v->label);
        v->label[ZT_WATCH_LABEL - 1] = 0;
        return 1;
    }
    return 0;
}

static void report_and_abort(zt_comm *c, zt_req *stuck, const char *headline, const char *rule, const char *reason,
                             double timeout) __attribute__((noreturn));

static void watch_abort(zt_comm *c, const zt_watch_view *v) __attribute__((noreturn));
static void watch_abort(zt_comm *c, const zt_watch_view *v) {
    char t[40], headline[400], rule[400], reason[300];
    const char *label = v->label[0] ? v->label : "(unlabelled)";
    double ago = zt_now() - v->t0;
    int64_t t0_wall = zt_flight_wall_ns() - (int64_t)(ago * 1e9);
    snprintf(headline, sizeof headline,
             "collective deadline exceeded after %g s: stuck in \"%s\" (host wait outside the comm layer), started "
             "%.1f s ago at %s",
             v->timeout, label, ago, zt_flight_fmt_time(t0_wall, t, sizeof t));
    snprintf(reason, sizeof reason, "collective deadline exceeded after %g s in host wait \"%s\" (outside the comm layer)",
             v->timeout, label);
    // Which rule fired, and how to live with it when the wait was legitimate.
    snprintf(rule, sizeof rule,
             "a host wait between zt_comm_watch_begin and zt_comm_watch_end gets the collective deadline (%s, %g s); "
             "one that legitimately takes longer needs zt_comm_set_timeout before zt_comm_watch_begin",
             v->first ? "first_timeout_s: the first step was not done when it began" : "timeout_s", v->timeout);
    report_and_abort(c, NULL, headline, rule, reason, v->timeout);
}

// One watchdog period: the watched region against its deadline, then the backend's
// asynchronous errors. Returns only when neither fired.
static void watchdog_check(zt_comm *c) {
    if (atomic_load(&c->aborting)) return;
    zt_watch_view v;
    if (watch_read(c, &v) && v.active && zt_now() - v.t0 > v.timeout) watch_abort(c, &v);
    if (c->be->async_error) {
        char msg[512] = "";
        if (c->be->async_error(c->self, msg, sizeof msg)) {
            char reason[600];
            snprintf(reason, sizeof reason, "%s", msg[0] ? msg : "asynchronous backend error (no detail)");
            report_and_abort(c, NULL, reason, NULL, reason, applicable_timeout(c, NULL));
        }
    }
}

static void *watchdog_main(void *arg) {
    zt_comm *c = arg;
    pthread_mutex_lock(&c->wd_mu);
    while (!c->wd_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long ns = (long long)ts.tv_nsec + (long long)c->wd_period_ms * 1000000LL;
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        while (!c->wd_stop && pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &ts) != ETIMEDOUT) {
        }
        if (c->wd_stop) break;
        // Unlocked while checking: finalize must be able to signal even while the
        // watchdog is busy in the backend's async_error.
        pthread_mutex_unlock(&c->wd_mu);
        watchdog_check(c);
        pthread_mutex_lock(&c->wd_mu);
    }
    pthread_mutex_unlock(&c->wd_mu);
    return NULL;
}

static int watchdog_start(zt_comm *c) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);  // a wall-clock step must not stretch a period
    pthread_cond_init(&c->wd_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->wd_mu, NULL);
    // Created with every signal blocked, so process-directed signals (SIGUSR1/SIGTERM
    // for the graceful stop, SIGINT) keep going to the main thread as before.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&c->wd, NULL, watchdog_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        pthread_cond_destroy(&c->wd_cv);
        pthread_mutex_destroy(&c->wd_mu);
        return zt_err("rank %d: cannot start the comm watchdog thread: %s", c->info.rank, strerror(e));
    }
    c->wd_started = 1;
    return 0;
}

static void watchdog_stop(zt_comm *c) {
    if (!c->wd_started) return;
    pthread_mutex_lock(&c->wd_mu);
    c->wd_stop = 1;
    pthread_cond_signal(&c->wd_cv);
    pthread_mutex_unlock(&c->wd_mu);
    // A watchdog that is reporting never returns (it aborts the job), so neither does
    // this join: the process ends inside it, which is the point.
    pthread_join(c->wd, NULL);
    pthread_cond_destroy(&c->wd_cv);
    pthread_mutex_destroy(&c->wd_mu);
    c->wd_started = 0;
}

// ---- issuing -----------------------------------------------------------------------
static int is_float(zt_dtype dt) { return dt == ZT_DT_F32 || dt == ZT_DT_F64 || dt == ZT_DT_BF16; }

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

// Local, deterministic checks: every rank rejects the same call the same way, so a
// rejected call never leaves the ranks out of step.
static int check_args(const zt_comm *c, const zt_coll *d, const char *label) {
    const char *op = zt_op_name(d->op);
    int world = c->info.world;
    if (d->op == ZT_OP_BARRIER) return 0;
    size_t es = zt_dtype_size(d->dt);
    if (!es) return zt_err("%s(\"%s\"): unknown dtype %d", op, label, (int)d->dt);
    if ((unsigned)d->red >= ZT_RED_COUNT_) return zt_err("%s(\"%s\"): unknown reduction %d", op, label, (int)d->red);
    if (d->red == ZT_RED_AVG && !is_float(d->dt))
        return zt_err("%s(\"%s\"): reduction avg needs a floating-point dtype, got %s (use sum and divide)", op, label,
                      zt_dtype_name(d->dt));
    size_t mult = (d->op == ZT_OP_ALLGATHER || d->op == ZT_OP_REDUCE_SCATTER) ? (size_t)world : 1;
    if (d->op == ZT_OP_ALLTOALL) mult = 1;  // count: the sum of send_counts (checked below)
    if (d->count > SIZE_MAX / es / mult)
        return zt_err("%s(\"%s\"): %zu %s elements x %zu overflow size_t", op, label, d->count, zt_dtype_name(d->dt),
                      mult);
    size_t block = d->count * es, full = block * mult;
    if (d->count && d->op != ZT_OP_ALLTOALL && (!d->recv || (d->op != ZT_OP_BROADCAST && !d->send)))
        return zt_err("%s(\"%s\"): NULL buffer for %zu elements", op, label, d->count);
    switch (d->op) {
    case ZT_OP_ALLGATHER:
        if (overlaps(d->send, block, d->recv, full) && d->send != (const char *)d->recv + (size_t)c->info.rank * block)
            return zt_err(
                "allgather(\"%s\"): send overlaps recv but is not rank %d's block of it (in place means "
                "send == recv + rank * count)",
                label, c->info.rank);
        break;
    case ZT_OP_REDUCE_SCATTER:
        if (overlaps(d->send, full, d->recv, block))
            return zt_err("reduce_scatter(\"%s\"): send and recv overlap; use separate buffers", label);
        break;
    case ZT_OP_ALLREDUCE:
        if (d->send != d->recv && overlaps(d->send, block, d->recv, block))
            return zt_err("allreduce(\"%s\"): send and recv partly overlap (in place means send == recv)", label);
        break;
    case ZT_OP_BROADCAST:
        if (d->root < 0 || d->root >= world)
            return zt_err("broadcast(\"%s\"): root %d outside [0, %d)", label, d->root, world);
        break;
    case ZT_OP_ALLTOALL: {
        if (!d->send_counts || !d->recv_counts) return zt_err("alltoall(\"%s\"): NULL counts", label);
        size_t ns = 0, nr = 0;
        for (int r = 0; r < world; r++) {
            if (d->send_counts[r] > SIZE_MAX / es - ns || d->recv_counts[r] > SIZE_MAX / es - nr)
                return zt_err("alltoall(\"%s\"): the counts overflow size_t", label);
            ns += d->send_counts[r], nr += d->recv_counts[r];
        }
        if ((ns && !d->send) || (nr && !d->recv))
            return zt_err("alltoall(\"%s\"): NULL buffer for %zu elements", label, ns ? ns : nr);
        if (overlaps(d->send, ns * es, d->recv, nr * es))
            return zt_err("alltoall(\"%s\"): send and recv overlap; use separate buffers", label);
        break;
    }
    default: break;
    }
    return 0;
}

static uint64_t coll_bytes(const zt_comm *c, const zt_coll *d) {
    uint64_t b = (uint64_t)d->count * zt_dtype_size(d->dt);
    return (d->op == ZT_OP_ALLGATHER || d->op == ZT_OP_REDUCE_SCATTER) ? b * (uint64_t)c->info.world : b;
}

static zt_req *issue(zt_comm *c, const zt_coll *d, const char *label) {
    if (!c) {
        zt_err("%s(\"%s\"): NULL comm", zt_op_name(d->op), label ? label : "");
        return NULL;
    }
    if (!label) label = "";
    if (check_args(c, d, label) < 0) {
        zt_err_prefix("rank %d", c->info.rank);
        return NULL;
    }
    zt_req *r = zt_xcalloc(1, sizeof *r);
    r->d = *d;
    if (d->op == ZT_OP_ALLTOALL) {  // the caller's arrays may change before the wait
        const size_t w = (size_t)c->info.world;
        r->counts = zt_xmalloc(2 * w * sizeof(size_t));
        memcpy(r->counts, d->send_counts, w * sizeof(size_t));
        memcpy(r->counts + w, d->recv_counts, w * sizeof(size_t));
        r->d.send_counts = r->counts, r->d.recv_counts = r->counts + w;
    }
    snprintf(r->label, sizeof r->label, "%s", label);
    r->timeout = applicable_timeout(c, NULL);
    r->t0 = zt_now();
    r->t0_wall = zt_flight_wall_ns();
    // Recorded before the backend starts it, so a crash inside the backend still
    // leaves this collective in the ring.
    zt_flight_rec fr = {0};
    fr.op = d->op;
    fr.dtype = d->dt;
    fr.red = d->red;
    fr.state = ZT_FL_ISSUED;
    fr.chan = d->chan;
    fr.root = d->root;
    fr.bytes = coll_bytes(c, d);
    fr.count = d->count;
    fr.t_start_ns = r->t0_wall;
    fr.step = atomic_load_explicit(&c->step, RLX);
    fr.epoch = atomic_load_explicit(&c->epoch, RLX);
    fr.micro = atomic_load_explicit(&c->micro, RLX);
    snprintf(fr.label, sizeof fr.label, "%s", label);
    r->seq = zt_flight_begin(c->fl, &fr);
    if (c->be->start(c->self, &r->d, &r->h) < 0) {
        zt_flight_update(c->fl, r->seq, ZT_FL_FAILED, zt_flight_wall_ns());
        zt_err_prefix("rank %d: %s(\"%s\") seq %llu", c->info.rank, zt_op_name(d->op), r->label,
                      (unsigned long long)r->seq);
        free(r->counts);
        free(r);
        return NULL;
    }
    r->prev = c->tail;
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->outstanding++;
    return r;
}

zt_req *zt_iallgather(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, const char *label) {
    zt_coll d = {ZT_OP_ALLGATHER, ZT_CHAN_DATA, dt, ZT_RED_SUM, send, recv, count_per_rank, -1, NULL, NULL};
    return issue(c, &d, label);
}

zt_req *zt_ireduce_scatter(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, zt_red red,
                           const char *label) {
    zt_coll d = {ZT_OP_REDUCE_SCATTER, ZT_CHAN_DATA, dt, red, send, recv, count_per_rank, -1, NULL, NULL};
    return issue(c, &d, label);
}

zt_req *zt_iallreduce(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype dt, zt_red red,
                      const char *label) {
    zt_coll d = {ZT_OP_ALLREDUCE, ZT_CHAN_CTRL, dt, red, send, recv, count, -1, NULL, NULL};
    return issue(c, &d, label);
}

zt_req *zt_ibroadcast(zt_comm *c, void *buf, size_t count, zt_dtype dt, int root, const char *label) {
    zt_coll d = {ZT_OP_BROADCAST, ZT_CHAN_CTRL, dt, ZT_RED_SUM, buf, buf, count, root, NULL, NULL};
    return issue(c, &d, label);
}

zt_req *zt_ibarrier(zt_comm *c, const char *label) {
    zt_coll d = {ZT_OP_BARRIER, ZT_CHAN_CTRL, ZT_DT_U8, ZT_RED_SUM, NULL, NULL, 0, -1, NULL, NULL};
    return issue(c, &d, label);
}

zt_req *zt_ialltoall(zt_comm *c, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                     zt_dtype dt, const char *label) {
    size_t n = 0;
    if (c && send_counts)
        for (int r = 0; r < c->info.world; r++) n += send_counts[r];  // overflow: check_args refuses the call
    zt_coll d = {ZT_OP_ALLTOALL, ZT_CHAN_DATA, dt, ZT_RED_SUM, send, recv, n, -1, send_counts, recv_counts};
    return issue(c, &d, label);
}

// ---- completion --------------------------------------------------------------------
static void unlink_req(zt_comm *c, zt_req *r) {
    if (r->prev)
        r->prev->next = r->next;
    else
        c->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        c->tail = r->prev;
    r->prev = r->next = NULL;
    c->outstanding--;
}

// 1 done, 0 still running, -1 failed (r->err says why).
static int poll_req(zt_comm *c, zt_req *r) {
    if (r->state) return r->state;
    int done = 0;
    if (c->be->test(c->self, &r->d, r->h, &done) < 0) {
        char msg[ZT_ERR_MAX];
        snprintf(msg, sizeof msg, "rank %d: %s(\"%s\") seq %llu failed: %s", c->info.rank, zt_op_name(r->d.op),
                 r->label, (unsigned long long)r->seq, zt_errmsg());
        r->err = zt_xmalloc(strlen(msg) + 1);
        strcpy(r->err, msg);
        r->state = -1;
        r->h = NULL;
        zt_flight_update(c->fl, r->seq, ZT_FL_FAILED, zt_flight_wall_ns());
        unlink_req(c, r);
        return -1;
    }
    if (!done) return 0;
    r->state = 1;
    r->h = NULL;
    zt_flight_update(c->fl, r->seq, ZT_FL_DONE, zt_flight_wall_ns());
    unlink_req(c, r);
    return 1;
}

static void deadline_abort(zt_comm *c, zt_req *r) __attribute__((noreturn));

int zt_test(zt_comm *c, zt_req *r, int *done) {
    *done = 0;
    if (!c || !r) return zt_err("zt_test: NULL %s (did the zt_i* call fail?)", c ? "request" : "comm");
    int s = poll_req(c, r);
    if (s < 0) return zt_err("%s", r->err);
    *done = s;
    if (!s) {
        if (zt_now() - r->t0 > r->timeout) deadline_abort(c, r);
    }
    return 0;
}

int zt_wait(zt_comm *c, zt_req *r) {
    if (!c || !r) return zt_err("zt_wait: NULL %s (did the zt_i* call fail?)", c ? "request" : "comm");
    int s = poll_req(c, r);
    if (s == 0) {
        zt_flight_update(c->fl, r->seq, ZT_FL_WAITING, 0);
        double start = zt_now();
        long sleep_ns = 0;
        while ((s = poll_req(c, r)) == 0) {
            double now = zt_now();
            if (now - r->t0 > r->timeout) deadline_abort(c, r);
            // A collective moves only while its ranks call into the library (MPI progresses
            // inside test calls): a waiter that sleeps between polls stalls every fragment
            // of a transfer for the sleep, on both sides. So poll, yielding the core to
            // anything runnable, for ZT_WAIT_SPIN_S; past that (a straggler, a hang) sleep
            // 20 us doubling to 1 ms, so a long wait does not hold a core at 100%.
            if (now - start < ZT_WAIT_SPIN_S) {
                sched_yield();
                continue;
            }
            sleep_ns = sleep_ns ? (sleep_ns * 2 > 1000000 ? 1000000 : sleep_ns * 2) : 20000;
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
        }
    }
    int rc = 0;
    if (s < 0) rc = zt_err("%s", r->err);
    free(r->err);
    free(r->counts);
    free(r);
    return rc;
}

void zt_comm_progress(zt_comm *c) {
    // Testing one request runs the library's whole progress engine (MPI progresses
    // every pending operation inside any test call).
    if (c && c->head) poll_req(c, c->head);
}

int zt_allgather(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, const char *label) {
    zt_req *r = zt_iallgather(c, send, recv, count_per_rank, dt, label);
    return r ? zt_wait(c, r) : -1;
}

int zt_reduce_scatter(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, zt_red red,
                      const char *label) {
    zt_req *r = zt_ireduce_scatter(c, send, recv, count_per_rank, dt, red, label);
    return r ? zt_wait(c, r) : -1;
}

int zt_allreduce(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype dt, zt_red red, const char *label) {
    zt_req *r = zt_iallreduce(c, send, recv, count, dt, red, label);
    return r ? zt_wait(c, r) : -1;
}

int zt_broadcast(zt_comm *c, void *buf, size_t count, zt_dtype dt, int root, const char *label) {
    zt_req *r = zt_ibroadcast(c, buf, count, dt, root, label);
    return r ? zt_wait(c, r) : -1;
}

int zt_barrier(zt_comm *c, const char *label) {
    zt_req *r = zt_ibarrier(c, label);
    return r ? zt_wait(c, r) : -1;
}

int zt_alltoall(zt_comm *c, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                zt_dtype dt, const char *label) {
    zt_req *r = zt_ialltoall(c, send, send_counts, recv, recv_counts, dt, label);
    return r ? zt_wait(c, r) : -1;
}

// ---- flight dump and the deadline report ---------------------------------------------
int zt_comm_dump_flight(zt_comm *c, FILE *out) {
    zt_flight_hdr h;
    zt_flight_rec *recs;
    int n;
    zt_flight_snapshot(c->fl, &h, &recs, &n);
    int rc = zt_flight_json(out, &h, recs, n, NULL);
    free(recs);
    return rc;
}

static void describe(FILE *o, const zt_comm *c, const zt_req *r, int64_t now_wall) {
    char b[32], t[40];
    fprintf(o, "%s(\"%s\") seq %llu, %s, started %.1f s ago at %s", zt_op_name(r->d.op), r->label,
            (unsigned long long)r->seq, zt_flight_fmt_bytes(coll_bytes(c, &r->d), b, sizeof b),
            (double)(now_wall - r->t0_wall) * 1e-9, zt_flight_fmt_time(r->t0_wall, t, sizeof t));
}

// A collective past its deadline inside zt_wait/zt_test (main thread).
static void deadline_abort(zt_comm *c, zt_req *r) {
    char *head = NULL, reason[512];
    size_t hn = 0;
    FILE *h = open_memstream(&head, &hn);
    if (h) {
        fprintf(h, "collective deadline exceeded after %g s", r->timeout);
        if (c->title) fprintf(h, " in %s, as its rank %d of %d", c->title, c->info.rank, c->info.world);
        fprintf(h, ": stuck in ");
        describe(h, c, r, zt_flight_wall_ns());
        fclose(h);
    }
    snprintf(reason, sizeof reason, "collective deadline exceeded after %g s in %s%s%s(\"%s\") seq %llu", r->timeout,
             c->title ? c->title : "", c->title ? ": " : "", zt_op_name(r->d.op), r->label, (unsigned long long)r->seq);
    report_and_abort(c, r, head ? head : reason, NULL, reason, r->timeout);
}

// zt_comm_set_abort_hook's function and its context: set before the job's collectives start,
// read once by the first abort in the process (hook_fired).
static _Atomic(zt_comm_abort_hook) abort_hook;
static _Atomic(void *) abort_hook_ctx;
static atomic_int hook_fired;

void zt_comm_set_abort_hook(zt_comm_abort_hook fn, void *ctx) {
    atomic_store(&abort_hook_ctx, ctx);
    atomic_store(&abort_hook, fn);
}

typedef struct {
    zt_comm_abort_hook fn;
    void *ctx;
    int rank;
    char headline[1024];
} hook_call;

static void *hook_thread(void *arg) {
    hook_call *h = arg;
    h->fn(h->ctx, h->rank, h->headline);
    free(h);
    return NULL;
}

// On its own detached thread: a hook that blocks (a file write on the hung file system that may be
// why the job hangs) must not hold up the abort, which follows the grace period whatever it does.
static void call_abort_hook(int rank, const char *headline) {
    const zt_comm_abort_hook fn = atomic_load(&abort_hook);
    int expected = 0;
    if (!fn || !atomic_compare_exchange_strong(&hook_fired, &expected, 1)) return;
    hook_call *h = malloc(sizeof *h);
    if (!h) return;
    *h = (hook_call){.fn = fn, .ctx = atomic_load(&abort_hook_ctx), .rank = rank};
    snprintf(h->headline, sizeof h->headline, "%s", headline);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, hook_thread, h) != 0) free(h);
    pthread_attr_destroy(&at);
}

// The one report of every abort path: a collective past its deadline (stuck != NULL,
// main thread), a watched host wait past its deadline or a backend's asynchronous
// error (stuck == NULL, watchdog thread). headline is the first line after the rank
// prefix, rule (optional) a second line naming the rule; reason goes into the flight
// dump; timeout sizes the grace period.
//
// From the watchdog thread the request list and the flight ring are read while the
// main thread may in principle still touch them. That is accepted: the main thread is
// blocked outside the comm layer (that is why the watchdog fired), the ring has its
// own seqlock, and the worst a torn read of the list can do is garble a line of a
// report whose process is about to be killed anyway.
//
// The report goes out as one write so that lines of different ranks, all timing out
// together, do not interleave mid-line.
static void report_and_abort(zt_comm *c, zt_req *stuck, const char *headline, const char *rule, const char *reason,
                             double timeout) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&c->aborting, &expected, 1)) {
        // The other thread is reporting and will take the job down: wait for it
        // instead of printing a second, interleaved report.
        for (;;) pause();
    }
    int rank = c->world_rank;  // a group's rank inside it is named in the headline
    int64_t now_wall = zt_flight_wall_ns();
    char pre[48];
    snprintf(pre, sizeof pre, "zerotrain: rank %d: ", rank);
    if (stuck) zt_flight_update(c->fl, stuck->seq, ZT_FL_TIMED_OUT, 0);
    zt_flight_set_status(c->fl, ZT_FL_ABORTED);

    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    if (!o) o = stderr;
    fprintf(o, "%s%s; step %lld epoch %lld micro %d\n", pre, headline,
            (long long)atomic_load_explicit(&c->step, RLX), (long long)atomic_load_explicit(&c->epoch, RLX),
            atomic_load_explicit(&c->micro, RLX));
    if (rule) fprintf(o, "%s%s\n", pre, rule);
    for (zt_req *q = c->head; q; q = q->next) {
        if (q == stuck) continue;
        fprintf(o, "%s%s in flight: ", pre, stuck ? "also" : "collective");
        describe(o, c, q, now_wall);
        fputc('\n', o);
    }

    zt_flight_hdr h;
    zt_flight_rec *recs;
    int n;
    zt_flight_snapshot(c->fl, &h, &recs, &n);
    const char *ring = zt_flight_path(c->fl);
    if (ring) {
        char path[4200];
        snprintf(path, sizeof path, "%s.json", ring);
        char *js = NULL;
        size_t jn = 0;
        FILE *jf = open_memstream(&js, &jn);
        int ok = jf && zt_flight_json(jf, &h, recs, n, reason) == 0;
        if (jf) fclose(jf);
        if (ok && zt_write_file_atomic(path, js, jn) == 0)
            fprintf(o, "%sflight recorder dump: %s (live ring: %s)\n", pre, path, ring);
        else
            fprintf(o, "%scannot write the flight recorder dump %s: %s\n", pre, path, zt_errmsg());
        free(js);
    }
    int shown = 0;
    for (int i = n - 1; i >= 0 && shown < 5; i--) {
        if (recs[i].state != ZT_FL_DONE) continue;
        char b[32];
        fprintf(o, "%srecently done: %s(\"%s\") seq %llu, %s, %.3f s\n", pre, zt_op_name(recs[i].op), recs[i].label,
                (unsigned long long)recs[i].seq, zt_flight_fmt_bytes(recs[i].bytes, b, sizeof b),
                (double)(recs[i].t_end_ns - recs[i].t_start_ns) * 1e-9);
        shown++;
    }
    // Every stuck rank reads every ring: fine at 16 ranks, a storm of reads on a shared
    // file system at thousands, where one reader per node is enough.
    if (c->run_dir && (c->info.world <= 64 || c->info.local_rank == 0)) {
        if (c->title) {
            fprintf(o, "%swhat the flight recorders of %s say (world ranks):\n", pre, c->title);
            zt_flight_summarize_group(c->run_dir, c->info.world, c->members, o, pre);
        } else {
            fprintf(o, "%swhat every rank's flight recorder says:\n", pre);
            zt_flight_summarize_dir(c->run_dir, c->info.world, o, pre);
        }
    } else if (!c->run_dir) {
        fprintf(o, "%sno run directory: this rank's flight recorder follows\n", pre);
        zt_flight_json(o, &h, recs, n, reason);
    }
    // A group's hang is often explained by where its missing members are in the world's comm.
    const zt_comm *root = c;
    while (root->parent) root = root->parent;
    if (root != c && root->run_dir && (root->info.world <= 64 || root->info.local_rank == 0)) {
        fprintf(o, "%swhat every rank's flight recorder says (world):\n", pre);
        zt_flight_summarize_dir(root->run_dir, root->info.world, o, pre);
    }
    free(recs);
    // Peers stuck in the same hang reach their deadlines moments later; a short grace
    // lets them print their side before the abort takes the whole job down.
    double grace = fmin(10.0, fmax(1.0, 0.1 * timeout));
    fprintf(o, "%saborting the job in %.0f s (code %d)\n", pre, grace, ZT_COMM_ABORT_CODE);
    if (o != stderr) {
        fclose(o);
        fwrite(buf, 1, len, stderr);
        free(buf);
    }
    fflush(stderr);
    call_abort_hook(rank, headline);  // the trainer's record of the abort (heartbeat.json), during the grace
    struct timespec ts = {(time_t)grace, (long)((grace - floor(grace)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    // From the watchdog thread this is an MPI_Abort (or ncclCommAbort) off the main
    // thread: outside what MPI_THREAD_FUNNELED promises, but MPI_Abort only asks the
    // launcher to kill the job (Open MPI, MPICH) and NCCL documents ncclCommAbort as
    // callable while another thread is inside NCCL. Tested: tests/cli/comm_watchdog.sh.
    c->be->abort(c->self, ZT_COMM_ABORT_CODE);
    abort();  // a backend abort that returned is a bug; still never hang
}
