// Backend-neutral half of the process group: argument checks, request handles, the
// flight recorder, and the deadline that turns a hung collective into a report and a
// job abort. Backends (comm_mpi.c, later NCCL) only start and poll collectives.
#define _GNU_SOURCE
#include "runtime/comm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/common.h"
#include "runtime/flight.h"

#define ZT_COMM_DEFAULT_TIMEOUT 300.0
#define ZT_COMM_DEFAULT_FIRST_TIMEOUT 1800.0
#define ZT_COMM_DEFAULT_FLIGHT 256
#define ZT_COMM_ABORT_CODE 3

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
    zt_req *prev, *next;  // outstanding list, oldest first
};

struct zt_comm {
    const zt_comm_backend *be;
    void *self;
    zt_comm_info info;
    double timeout_s, first_timeout_s;
    char *run_dir;
    int warm;
    int64_t step, epoch;
    int micro;
    zt_flight *fl;
    zt_req *head, *tail;
    int outstanding;
};

// ---- names and sizes -------------------------------------------------------------
size_t zt_dtype_size(zt_dtype dt) {
    static const size_t sz[ZT_DT_COUNT_] = {4, 8, 8, 4, 1, 2};
    return (unsigned)dt < ZT_DT_COUNT_ ? sz[dt] : 0;
}

const char *zt_dtype_name(zt_dtype dt) {
    static const char *n[ZT_DT_COUNT_] = {"f32", "f64", "i64", "i32", "u8", "bf16"};
    return (unsigned)dt < ZT_DT_COUNT_ ? n[dt] : "?";
}

const char *zt_red_name(zt_red red) {
    static const char *n[ZT_RED_COUNT_] = {"sum", "min", "max", "avg"};
    return (unsigned)red < ZT_RED_COUNT_ ? n[red] : "?";
}

const char *zt_op_name(zt_coll_op op) {
    switch (op) {
    case ZT_OP_ALLGATHER: return "allgather";
    case ZT_OP_REDUCE_SCATTER: return "reduce_scatter";
    case ZT_OP_ALLREDUCE: return "allreduce";
    case ZT_OP_BROADCAST: return "broadcast";
    case ZT_OP_BARRIER: return "barrier";
    }
    return "?";
}

// ---- lifetime ----------------------------------------------------------------------
zt_comm_opts zt_comm_opts_default(void) {
    zt_comm_opts o = {ZT_COMM_DEFAULT_TIMEOUT, ZT_COMM_DEFAULT_FIRST_TIMEOUT, NULL, ZT_COMM_DEFAULT_FLIGHT};
    return o;
}

int zt_comm_create(zt_comm **out, const zt_comm_backend *be, void *self, const zt_comm_info *info,
                   const zt_comm_opts *opts) {
    *out = NULL;
    zt_comm_opts o = opts ? *opts : zt_comm_opts_default();
    if (!(o.timeout_s > 0)) o.timeout_s = ZT_COMM_DEFAULT_TIMEOUT;  // also catches NaN
    if (!(o.first_timeout_s > 0)) o.first_timeout_s = ZT_COMM_DEFAULT_FIRST_TIMEOUT;
    if (o.flight_capacity <= 0) o.flight_capacity = ZT_COMM_DEFAULT_FLIGHT;
    zt_comm *c = zt_xcalloc(1, sizeof *c);
    c->be = be;
    c->self = self;
    c->info = *info;
    c->timeout_s = o.timeout_s;
    c->first_timeout_s = o.first_timeout_s;
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
    *out = c;
    return 0;
}

int zt_comm_finalize(zt_comm *c) {
    if (!c) return 0;
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
    free(c);
    return rc;
}

void zt_comm_get_info(const zt_comm *c, zt_comm_info *out) { *out = c->info; }
const char *zt_comm_backend_name(const zt_comm *c) { return c->be->name; }
const char *zt_comm_flight_path(const zt_comm *c) { return zt_flight_path(c->fl); }

void zt_comm_set_context(zt_comm *c, int64_t step, int64_t epoch, int micro) {
    c->step = step;
    c->epoch = epoch;
    c->micro = micro;
    zt_flight_set_context(c->fl, step, epoch, micro);
}

void zt_comm_mark_warm(zt_comm *c) { c->warm = 1; }

double zt_comm_set_timeout(zt_comm *c, double timeout_s) {
    double old = c->timeout_s;
    if (timeout_s > 0) c->timeout_s = timeout_s;
    return old;
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
    if (d->count > SIZE_MAX / es / mult)
        return zt_err("%s(\"%s\"): %zu %s elements x %zu overflow size_t", op, label, d->count, zt_dtype_name(d->dt),
                      mult);
    size_t block = d->count * es, full = block * mult;
    if (d->count && (!d->recv || (d->op != ZT_OP_BROADCAST && !d->send)))
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
    snprintf(r->label, sizeof r->label, "%s", label);
    r->timeout = c->warm ? c->timeout_s : fmax(c->timeout_s, c->first_timeout_s);
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
    fr.step = c->step;
    fr.epoch = c->epoch;
    fr.micro = c->micro;
    snprintf(fr.label, sizeof fr.label, "%s", label);
    r->seq = zt_flight_begin(c->fl, &fr);
    if (c->be->start(c->self, &r->d, &r->h) < 0) {
        zt_flight_update(c->fl, r->seq, ZT_FL_FAILED, zt_flight_wall_ns());
        zt_err_prefix("rank %d: %s(\"%s\") seq %llu", c->info.rank, zt_op_name(d->op), r->label,
                      (unsigned long long)r->seq);
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
    zt_coll d = {ZT_OP_ALLGATHER, ZT_CHAN_DATA, dt, ZT_RED_SUM, send, recv, count_per_rank, -1};
    return issue(c, &d, label);
}

zt_req *zt_ireduce_scatter(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, zt_red red,
                           const char *label) {
    zt_coll d = {ZT_OP_REDUCE_SCATTER, ZT_CHAN_DATA, dt, red, send, recv, count_per_rank, -1};
    return issue(c, &d, label);
}

zt_req *zt_iallreduce(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype dt, zt_red red,
                      const char *label) {
    zt_coll d = {ZT_OP_ALLREDUCE, ZT_CHAN_CTRL, dt, red, send, recv, count, -1};
    return issue(c, &d, label);
}

zt_req *zt_ibroadcast(zt_comm *c, void *buf, size_t count, zt_dtype dt, int root, const char *label) {
    zt_coll d = {ZT_OP_BROADCAST, ZT_CHAN_CTRL, dt, ZT_RED_SUM, buf, buf, count, root};
    return issue(c, &d, label);
}

zt_req *zt_ibarrier(zt_comm *c, const char *label) {
    zt_coll d = {ZT_OP_BARRIER, ZT_CHAN_CTRL, ZT_DT_U8, ZT_RED_SUM, NULL, NULL, 0, -1};
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
            // Spin ~50 us for the fast case, then sleep 20 us doubling to 1 ms: a rank
            // that waits long (a straggler, a hang) must not hold a core at 100%.
            if (now - start < 50e-6) continue;
            sleep_ns = sleep_ns ? (sleep_ns * 2 > 1000000 ? 1000000 : sleep_ns * 2) : 20000;
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
        }
    }
    int rc = 0;
    if (s < 0) rc = zt_err("%s", r->err);
    free(r->err);
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

// The report goes out as one write so that lines of different ranks, all timing out
// together, do not interleave mid-line.
static void deadline_abort(zt_comm *c, zt_req *r) {
    int rank = c->info.rank;
    int64_t now_wall = zt_flight_wall_ns();
    char pre[48];
    snprintf(pre, sizeof pre, "zerotrain: rank %d: ", rank);
    zt_flight_update(c->fl, r->seq, ZT_FL_TIMED_OUT, 0);
    zt_flight_set_status(c->fl, ZT_FL_ABORTED);

    char *buf = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&buf, &len);
    if (!o) o = stderr;
    fprintf(o, "%scollective deadline exceeded after %g s: stuck in ", pre, r->timeout);
    describe(o, c, r, now_wall);
    fprintf(o, "; step %lld epoch %lld micro %d\n", (long long)c->step, (long long)c->epoch, c->micro);
    for (zt_req *q = c->head; q; q = q->next) {
        if (q == r) continue;
        fprintf(o, "%salso in flight: ", pre);
        describe(o, c, q, now_wall);
        fputc('\n', o);
    }

    zt_flight_hdr h;
    zt_flight_rec *recs;
    int n;
    zt_flight_snapshot(c->fl, &h, &recs, &n);
    char reason[512];
    snprintf(reason, sizeof reason, "collective deadline exceeded after %g s in %s(\"%s\") seq %llu", r->timeout,
             zt_op_name(r->d.op), r->label, (unsigned long long)r->seq);
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
        fprintf(o, "%swhat every rank's flight recorder says:\n", pre);
        zt_flight_summarize_dir(c->run_dir, c->info.world, o, pre);
    } else if (!c->run_dir) {
        fprintf(o, "%sno run directory: this rank's flight recorder follows\n", pre);
        zt_flight_json(o, &h, recs, n, reason);
    }
    free(recs);
    // Peers stuck in the same hang reach their deadlines moments later; a short grace
    // lets them print their side before the abort takes the whole job down.
    double grace = fmin(10.0, fmax(1.0, 0.1 * r->timeout));
    fprintf(o, "%saborting the job in %.0f s (code %d)\n", pre, grace, ZT_COMM_ABORT_CODE);
    if (o != stderr) {
        fclose(o);
        fwrite(buf, 1, len, stderr);
        free(buf);
    }
    fflush(stderr);
    struct timespec ts = {(time_t)grace, (long)((grace - floor(grace)) * 1e9)};
    nanosleep(&ts, NULL);
    c->be->abort(c->self, ZT_COMM_ABORT_CODE);
    abort();  // a backend abort that returned is a bug; still never hang
}
