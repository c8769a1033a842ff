// Flight recorder ring in a shared mapping: the writer side used by engine/comm.c,
// the reader and JSON / summary used on abort and by external tools. The byte layout
// is documented in flight.h; the structs below are that layout.
#define _GNU_SOURCE
#include "engine/flight.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/out_file.h"

typedef struct {
    char magic[8];
    uint32_t version, hdr_bytes, rec_bytes, capacity;
    int32_t rank, world;
    _Atomic uint64_t issued;
    // Context and status change while a watcher reads: atomics keep each field whole.
    _Atomic int64_t step, epoch;
    _Atomic int32_t micro;
    int32_t pid;
    int64_t created_ns;
    _Atomic uint32_t status;
    int32_t node;
    char host[48];
} fl_hdr_disk;

typedef struct {
    _Atomic uint32_t lock;
    uint8_t op, dtype, red, state;
    uint64_t seq, bytes, count;
    int64_t t_start, t_end, step, epoch;
    int32_t micro, root;
    uint8_t chan, pad[7];
    char label[ZT_FLIGHT_LABEL];
} fl_rec_disk;

_Static_assert(sizeof(fl_hdr_disk) == ZT_FLIGHT_HDR_BYTES, "flight header is 128 bytes");
_Static_assert(offsetof(fl_hdr_disk, issued) == 32 && offsetof(fl_hdr_disk, pid) == 60 &&
                   offsetof(fl_hdr_disk, status) == 72 && offsetof(fl_hdr_disk, host) == 80,
               "flight header layout");
_Static_assert(sizeof(fl_rec_disk) == ZT_FLIGHT_REC_BYTES, "flight record is 128 bytes");
_Static_assert(offsetof(fl_rec_disk, seq) == 8 && offsetof(fl_rec_disk, t_start) == 32 &&
                   offsetof(fl_rec_disk, micro) == 64 && offsetof(fl_rec_disk, chan) == 72 &&
                   offsetof(fl_rec_disk, label) == 80,
               "flight record layout");

struct zt_flight {
    void *map;
    size_t len;
    int fd;  // -1 for anonymous memory
    char *path;
    fl_hdr_disk *h;
    fl_rec_disk *r;
    uint32_t cap;
    uint64_t issued;
};

int64_t zt_flight_wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

const char *zt_flight_fmt_time(int64_t ns, char *buf, size_t n) {
    // Floored: a time before 1970 (a damaged file's) keeps its milliseconds in [0, 999].
    int64_t s = ns / 1000000000LL, ms = (ns % 1000000000LL) / 1000000LL;
    if (ms < 0) s -= 1, ms += 1000;
    const time_t t = (time_t)s;
    struct tm tm;
    char tmp[32] = "?";
    if (gmtime_r(&t, &tm)) strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, n, "%s.%03dZ", tmp, (int)ms);
    return buf;
}

// Seconds from `earlier` to `later` (ns): in double, as times read from a file may be
// any int64 and their difference need not fit one.
static double ns_between(int64_t later, int64_t earlier) { return ((double)later - (double)earlier) * 1e-9; }

const char *zt_flight_fmt_bytes(uint64_t b, char *buf, size_t n) {
    if (b < 1024)
        snprintf(buf, n, "%llu B", (unsigned long long)b);
    else if (b < (1ull << 20))
        snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else if (b < (1ull << 30))
        snprintf(buf, n, "%.1f MiB", (double)b / (1024.0 * 1024.0));
    else
        snprintf(buf, n, "%.2f GiB", (double)b / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

const char *zt_flight_state_name(zt_flight_state s) {
    switch (s) {
    case ZT_FL_EMPTY: return "empty";
    case ZT_FL_ISSUED: return "in_flight";
    case ZT_FL_WAITING: return "waiting";
    case ZT_FL_DONE: return "done";
    case ZT_FL_TIMED_OUT: return "timed_out";
    case ZT_FL_FAILED: return "failed";
    }
    return "?";
}

static const char *status_name(uint32_t s) {
    return s == ZT_FL_RUNNING ? "running" : s == ZT_FL_FINALIZED ? "finalized" : s == ZT_FL_ABORTED ? "aborted" : "?";
}

// ---- seqlock ---------------------------------------------------------------------
// One writer per ring, so the writer needs no read-modify-write; readers may live in
// other processes and retry around a concurrent update.
static void rec_write_begin(fl_rec_disk *d) {
    uint32_t v = atomic_load_explicit(&d->lock, memory_order_relaxed);
    atomic_store_explicit(&d->lock, v + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
}

static void rec_write_end(fl_rec_disk *d) {
    uint32_t v = atomic_load_explicit(&d->lock, memory_order_relaxed);
    atomic_store_explicit(&d->lock, v + 1, memory_order_release);
}

// `budget` counts the yields left to the whole ring's read: a live writer holds one record
// odd for microseconds, so waiting is worth a little; a dead or damaged file whose every
// record is odd must not cost capacity x the per-record wait.
static void rec_read(const fl_rec_disk *d, fl_rec_disk *out, int *budget) {
    for (int tries = 0; tries < 10000; tries++) {
        uint32_t v1 = atomic_load_explicit((_Atomic uint32_t *)&d->lock, memory_order_acquire);
        if (v1 & 1) {
            if (*budget <= 0) break;
            --*budget;
            sched_yield();
            continue;
        }
        memcpy(out, d, sizeof *out);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit((_Atomic uint32_t *)&d->lock, memory_order_relaxed) == v1) return;
    }
    // A writer that died mid-update leaves the lock odd forever: take what is there.
    memcpy(out, d, sizeof *out);
}

// ---- writer ----------------------------------------------------------------------
int zt_flight_open(zt_flight **out, const char *run_dir, int rank, int world, int node, int capacity) {
    *out = NULL;
    if (capacity < 1 || capacity > (1 << 20))
        return zt_err("flight recorder: capacity %d out of range [1, 1048576]", capacity);
    size_t len = ZT_FLIGHT_HDR_BYTES + (size_t)capacity * ZT_FLIGHT_REC_BYTES;
    zt_flight *f = zt_xcalloc(1, sizeof *f);
    f->fd = -1;
    f->len = len;
    f->cap = (uint32_t)capacity;
    char tmp[4096];
    if (run_dir) {
        char dir[4000];
        snprintf(dir, sizeof dir, "%s/ranks", run_dir);
        if (zt_out_mkdirs(run_dir, dir) < 0) {  // a real directory, never a link out of RUN
            free(f);
            return zt_err_prefix("flight recorder for rank %d", rank);
        }
        size_t plen = strlen(dir) + 32;
        f->path = zt_xmalloc(plen);
        snprintf(f->path, plen, "%s/rank-%05d.flight", dir, rank);
        // Built under a temporary name and renamed: a watcher that still maps the
        // previous run's file keeps a valid (old) inode instead of a SIGBUS.
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", f->path, (int)getpid());
        // New (O_EXCL | O_NOFOLLOW), and a link at the final name is refused before it is replaced.
        if (zt_out_check(f->path) != 0 || (f->fd = zt_out_create_fresh(tmp)) < 0) {
            zt_err_prefix("flight recorder");
            goto fail;
        }
        // Reserve the blocks, not just the size: a sparse file on a full disk maps fine and
        // then kills the process with SIGBUS at the first store into a page with no block.
        const int fe = posix_fallocate(f->fd, 0, (off_t)len);
        if (fe != 0) {
            zt_err("flight recorder: cannot reserve %zu bytes for %s: %s%s", len, tmp, strerror(fe),
                   fe == ENOSPC ? " (the run directory's file system is full: free space or pick another --run-dir)"
                                : "");
            goto fail;
        }
        f->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
    } else {
        f->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        zt_err("flight recorder: mmap of %zu bytes for rank %d failed: %s", len, rank, strerror(errno));
        goto fail;
    }
    f->h = f->map;
    f->r = (fl_rec_disk *)((char *)f->map + ZT_FLIGHT_HDR_BYTES);
    memcpy(f->h->magic, ZT_FLIGHT_MAGIC, 8);
    f->h->version = ZT_FLIGHT_VERSION;
    f->h->hdr_bytes = ZT_FLIGHT_HDR_BYTES;
    f->h->rec_bytes = ZT_FLIGHT_REC_BYTES;
    f->h->capacity = (uint32_t)capacity;
    f->h->rank = rank;
    f->h->world = world;
    f->h->node = node;
    f->h->pid = (int32_t)getpid();
    f->h->created_ns = zt_flight_wall_ns();
    gethostname(f->h->host, sizeof f->h->host - 1);
    f->h->host[sizeof f->h->host - 1] = 0;
    // rename() replaces a link at the name itself, never its target (and one found is refused above)
    if (f->path && rename(tmp, f->path) < 0) {
        zt_err("flight recorder: cannot rename %s to %s: %s", tmp, f->path, strerror(errno));
        goto fail;
    }
    *out = f;
    return 0;
fail:
    if (f->map) munmap(f->map, len);
    if (f->fd >= 0) {
        close(f->fd);
        unlink(tmp);
    }
    free(f->path);
    free(f);
    return -1;
}

uint64_t zt_flight_begin(zt_flight *f, zt_flight_rec *rec) {
    uint64_t seq = ++f->issued;
    rec->seq = seq;
    fl_rec_disk *d = &f->r[(seq - 1) % f->cap];
    rec_write_begin(d);
    d->op = (uint8_t)rec->op;
    d->dtype = (uint8_t)rec->dtype;
    d->red = (uint8_t)rec->red;
    d->state = (uint8_t)rec->state;
    d->seq = seq;
    d->bytes = rec->bytes;
    d->count = rec->count;
    d->t_start = rec->t_start_ns;
    d->t_end = rec->t_end_ns;
    d->step = rec->step;
    d->epoch = rec->epoch;
    d->micro = rec->micro;
    d->root = rec->root;
    d->chan = (uint8_t)rec->chan;
    memset(d->pad, 0, sizeof d->pad);
    memset(d->label, 0, sizeof d->label);
    snprintf(d->label, sizeof d->label, "%s", rec->label);
    rec_write_end(d);
    // Published after the record: a reader that sees `issued` sees the record too.
    atomic_store_explicit(&f->h->issued, seq, memory_order_release);
    return seq;
}

void zt_flight_update(zt_flight *f, uint64_t seq, zt_flight_state state, int64_t t_end_ns) {
    if (seq == 0 || seq > f->issued || f->issued - seq >= f->cap) return;  // overwritten already
    fl_rec_disk *d = &f->r[(seq - 1) % f->cap];
    rec_write_begin(d);
    d->state = (uint8_t)state;
    if (t_end_ns) d->t_end = t_end_ns;
    rec_write_end(d);
}

void zt_flight_set_context(zt_flight *f, int64_t step, int64_t epoch, int micro) {
    atomic_store_explicit(&f->h->step, step, memory_order_relaxed);
    atomic_store_explicit(&f->h->epoch, epoch, memory_order_relaxed);
    atomic_store_explicit(&f->h->micro, micro, memory_order_relaxed);
}

void zt_flight_set_status(zt_flight *f, uint32_t status) {
    atomic_store_explicit(&f->h->status, status, memory_order_release);
    // Pages reach the file without this too; MS_SYNC makes the dying state durable
    // for a watcher on another machine before MPI_Abort takes the process down.
    if (f->fd >= 0) msync(f->map, f->len, MS_SYNC);
}

const char *zt_flight_path(const zt_flight *f) { return f ? f->path : NULL; }

void zt_flight_close(zt_flight *f, uint32_t status) {
    if (!f) return;
    zt_flight_set_status(f, status);
    munmap(f->map, f->len);
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f);
}

// ---- decoding --------------------------------------------------------------------
static void decode_hdr(const fl_hdr_disk *h, zt_flight_hdr *o) {
    memset(o, 0, sizeof *o);
    o->rank = h->rank;
    o->world = h->world;
    o->capacity = (int)h->capacity;
    o->node = h->node;
    o->pid = h->pid;
    o->status = atomic_load_explicit((_Atomic uint32_t *)&h->status, memory_order_relaxed);
    o->issued = atomic_load_explicit((_Atomic uint64_t *)&h->issued, memory_order_acquire);
    o->step = atomic_load_explicit((_Atomic int64_t *)&h->step, memory_order_relaxed);
    o->epoch = atomic_load_explicit((_Atomic int64_t *)&h->epoch, memory_order_relaxed);
    o->micro = atomic_load_explicit((_Atomic int32_t *)&h->micro, memory_order_relaxed);
    o->created_ns = h->created_ns;
    memcpy(o->host, h->host, sizeof o->host);
    o->host[sizeof o->host - 1] = 0;
}

// Records still in the ring, oldest first. Slots overwritten while we copy (seq no
// longer the expected one) are skipped rather than shown out of order. `cap` is the
// capacity the caller validated (not re-read from a mapping another process may write).
// The work is bounded by cap whatever `issued` says, and an `issued` no writer could have
// left is refused (-1 + zt_err naming `name`): the writer stores a record, then counts it,
// so the newest slot holds seq `issued`, or a later one of the same slot if it has since
// moved on.
static int decode_ring(const fl_hdr_disk *h, const fl_rec_disk *ring, uint64_t cap, const char *name,
                       zt_flight_hdr *hdr, zt_flight_rec **recs, int *n) {
    *recs = NULL;
    *n = 0;
    decode_hdr(h, hdr);
    hdr->capacity = (int)cap;
    const uint64_t last = hdr->issued, count = last < cap ? last : cap, first = last - count + 1;
    int budget = 1000;  // yields for records a writer holds mid-update, the whole ring together
    if (last > 0) {
        fl_rec_disk d;
        rec_read(&ring[(last - 1) % cap], &d, &budget);
        if (d.seq < last || (d.seq - last) % cap != 0)
            return zt_err("%s: flight recorder header field \"issued\" is %llu, which cannot be true: the newest "
                          "record's slot %llu holds seq %llu (a writer stores a record before it counts it)",
                          name, (unsigned long long)last, (unsigned long long)((last - 1) % cap),
                          (unsigned long long)d.seq);
    }
    zt_flight_rec *out = zt_xcalloc((size_t)count, sizeof *out);
    int k = 0;
    for (uint64_t i = 0; i < count; i++) {
        const uint64_t s = first + i;
        fl_rec_disk d;
        rec_read(&ring[(s - 1) % cap], &d, &budget);
        if (d.seq != s) continue;
        zt_flight_rec *o = &out[k++];
        o->seq = d.seq;
        o->op = (zt_coll_op)d.op;
        o->dtype = (zt_dtype)d.dtype;
        o->red = (zt_red)d.red;
        o->state = (zt_flight_state)d.state;
        o->chan = (zt_chan)d.chan;
        o->root = d.root;
        o->bytes = d.bytes;
        o->count = d.count;
        o->t_start_ns = d.t_start;
        o->t_end_ns = d.t_end;
        o->step = d.step;
        o->epoch = d.epoch;
        o->micro = d.micro;
        memcpy(o->label, d.label, sizeof o->label);
        o->label[sizeof o->label - 1] = 0;
        // The writer's labels are plain text: a control byte from a damaged file would
        // reach the terminal and the JSON as is.
        for (char *c = o->label; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    }
    *recs = out;
    *n = k;
    return 0;
}

int zt_flight_snapshot(const zt_flight *f, zt_flight_hdr *hdr, zt_flight_rec **recs, int *n) {
    return decode_ring(f->h, f->r, f->cap, f->path ? f->path : "flight recorder", hdr, recs, n);
}

int zt_flight_read(const char *path, zt_flight_hdr *hdr, zt_flight_rec **recs, int *n) {
    *recs = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zt_err("%s: cannot open flight recorder: %s", path, strerror(errno));
    struct stat st;
    fl_hdr_disk h;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return zt_err("%s: cannot stat flight recorder: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return zt_err("%s: not a flight recorder: %s", path, S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    }
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        close(fd);
        return zt_err("%s: truncated flight recorder: %lld bytes, the header alone is %d", path, (long long)st.st_size,
                      ZT_FLIGHT_HDR_BYTES);
    }
    if (memcmp(h.magic, ZT_FLIGHT_MAGIC, 8) != 0) {
        close(fd);
        return zt_err("%s: not a zerotrain flight recorder (magic is not \"%s\")", path, ZT_FLIGHT_MAGIC);
    }
    if (h.version != ZT_FLIGHT_VERSION || h.hdr_bytes != ZT_FLIGHT_HDR_BYTES || h.rec_bytes != ZT_FLIGHT_REC_BYTES) {
        close(fd);
        return zt_err(
            "%s: flight recorder version %u (header %u, record %u bytes); this build reads version %d "
            "(%d, %d)",
            path, h.version, h.hdr_bytes, h.rec_bytes, ZT_FLIGHT_VERSION, ZT_FLIGHT_HDR_BYTES, ZT_FLIGHT_REC_BYTES);
    }
    const uint32_t cap = h.capacity;
    size_t len = ZT_FLIGHT_HDR_BYTES + (size_t)cap * ZT_FLIGHT_REC_BYTES;
    if (cap < 1 || cap > (1u << 20) || (size_t)st.st_size < len) {
        close(fd);
        return zt_err("%s: flight recorder of %lld bytes, but its header says %u records (%zu bytes)", path,
                      (long long)st.st_size, cap, len);
    }
    // Fields no writer leaves (zt_flight_open checks what it is given; the status is one of three).
    const uint32_t status = atomic_load_explicit(&h.status, memory_order_relaxed);
    if (h.world < 1 || h.rank < 0 || h.rank >= h.world || status > ZT_FL_ABORTED) {
        close(fd);
        return zt_err("%s: flight recorder header cannot be true: rank %d, world %d, status %u (a writer leaves "
                      "0 <= rank < world and status 0, 1 or 2)", path, h.rank, h.world, status);
    }
    // Mapped shared, not read(): the seqlock needs to see the writer's live stores.
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return zt_err("%s: mmap failed: %s", path, strerror(errno));
    const int rc = decode_ring(map, (const fl_rec_disk *)((const char *)map + ZT_FLIGHT_HDR_BYTES), cap, path, hdr,
                               recs, n);
    munmap(map, len);
    return rc;
}

int zt_flight_read_rank(const char *path, int rank, zt_flight_hdr *hdr, zt_flight_rec **recs, int *n) {
    if (zt_flight_read(path, hdr, recs, n) < 0) return -1;
    if (hdr->rank == rank) return 0;
    free(*recs);
    *recs = NULL;
    *n = 0;
    return zt_err("%s: flight recorder header cannot be true: it says rank %d, the file is rank %d's", path,
                  hdr->rank, rank);
}

const zt_flight_rec *zt_flight_current(const zt_flight_rec *recs, int n) {
    for (int i = n - 1; i >= 0; i--)
        if (recs[i].state == ZT_FL_WAITING || recs[i].state == ZT_FL_TIMED_OUT) return &recs[i];
    for (int i = 0; i < n; i++)
        if (recs[i].state == ZT_FL_ISSUED) return &recs[i];
    return NULL;
}

// ---- JSON --------------------------------------------------------------------------
static void json_str(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

int zt_flight_json(FILE *out, const zt_flight_hdr *h, const zt_flight_rec *recs, int n, const char *reason) {
    char t1[40], t2[40];
    int64_t now = zt_flight_wall_ns();
    const zt_flight_rec *cur = zt_flight_current(recs, n);
    fprintf(out, "{\n  \"format\": \"zerotrain-flight\",\n  \"version\": %d,\n", ZT_FLIGHT_VERSION);
    fprintf(out, "  \"rank\": %d,\n  \"world\": %d,\n  \"node\": %d,\n  \"host\": ", h->rank, h->world, h->node);
    json_str(out, h->host);
    fprintf(out, ",\n  \"pid\": %d,\n  \"status\": \"%s\",\n  \"reason\": ", h->pid, status_name(h->status));
    if (reason)
        json_str(out, reason);
    else
        fputs("null", out);
    fprintf(out, ",\n  \"created\": \"%s\",\n  \"written\": \"%s\",\n",
            zt_flight_fmt_time(h->created_ns, t1, sizeof t1), zt_flight_fmt_time(now, t2, sizeof t2));
    fprintf(out, "  \"step\": %lld,\n  \"epoch\": %lld,\n  \"micro\": %d,\n", (long long)h->step, (long long)h->epoch,
            h->micro);
    fprintf(out, "  \"issued\": %llu,\n  \"capacity\": %d,\n", (unsigned long long)h->issued, h->capacity);
    if (cur)
        fprintf(out, "  \"current\": %llu,\n", (unsigned long long)cur->seq);
    else
        fputs("  \"current\": null,\n", out);
    fputs("  \"collectives\": [", out);
    for (int i = 0; i < n; i++) {
        const zt_flight_rec *r = &recs[i];
        int64_t end = r->t_end_ns ? r->t_end_ns : now;
        fprintf(out, "%s\n    {\"seq\": %llu, \"op\": \"%s\", \"label\": ", i ? "," : "", (unsigned long long)r->seq,
                zt_op_name(r->op));
        json_str(out, r->label);
        fprintf(out, ", \"state\": \"%s\", \"channel\": \"%s\"", zt_flight_state_name(r->state),
                r->chan == ZT_CHAN_CTRL ? "ctrl" : "data");
        // dtype means nothing for a barrier, the reduction only for reducing ops
        if (r->op == ZT_OP_BARRIER)
            fputs(", \"dtype\": null", out);
        else
            fprintf(out, ", \"dtype\": \"%s\"", zt_dtype_name(r->dtype));
        if (r->op == ZT_OP_REDUCE_SCATTER || r->op == ZT_OP_ALLREDUCE)
            fprintf(out, ", \"red\": \"%s\"", zt_red_name(r->red));
        else
            fputs(", \"red\": null", out);
        fprintf(out, ", \"count\": %llu, \"bytes\": %llu, \"root\": %d", (unsigned long long)r->count,
                (unsigned long long)r->bytes, r->root);
        fprintf(out, ", \"start\": \"%s\", \"end\": ", zt_flight_fmt_time(r->t_start_ns, t1, sizeof t1));
        if (r->t_end_ns)
            fprintf(out, "\"%s\"", zt_flight_fmt_time(r->t_end_ns, t2, sizeof t2));
        else
            fputs("null", out);
        fprintf(out, ", \"seconds\": %.6f, \"step\": %lld, \"epoch\": %lld, \"micro\": %d}",
                ns_between(end, r->t_start_ns), (long long)r->step, (long long)r->epoch, r->micro);
    }
    fputs(n ? "\n  ]\n}\n" : "]\n}\n", out);
    return ferror(out) ? zt_err("flight recorder: writing JSON failed") : 0;
}

// ---- summary across ranks ----------------------------------------------------------
static void print_rank_list(FILE *out, const int *ranks, int n) {
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1) j++;
        fprintf(out, "%s%d", i ? "," : "", ranks[i]);
        if (j > i) fprintf(out, "-%d", ranks[j]);
        i = j + 1;
    }
}

typedef struct {
    zt_coll_op op;
    uint64_t seq;
    char label[ZT_FLIGHT_LABEL];
    int *ranks;
    int n, cap;
} fl_group;

// Rank lists grow as ranks join: `world` lists of `world` entries each would be quadratic.
static void group_add(fl_group *g, int rank) { zt_int_push(&g->ranks, &g->n, &g->cap, rank); }

int zt_flight_summarize_dir(const char *run_dir, int world, FILE *out, const char *prefix) {
    return zt_flight_summarize_group(run_dir, world, NULL, out, prefix);
}

int zt_flight_summarize_group(const char *run_dir, int world, const int *names, FILE *out, const char *prefix) {
    if (!run_dir || world < 1) return zt_err("flight summary: no run directory or world %d", world);
    fl_group *groups = zt_xcalloc((size_t)world + 1, sizeof *groups);
    int *idle = zt_xcalloc((size_t)world, sizeof *idle), nidle = 0, ngroups = 0;
    int64_t now = zt_flight_wall_ns();
    int per_rank = world <= 64;  // beyond that only the grouped lines are readable
    for (int rank = 0; rank < world; rank++) {
        char path[4096], b[32];
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.flight", run_dir, rank);
        zt_flight_hdr h;
        zt_flight_rec *recs;
        int n;
        if (zt_flight_read_rank(path, rank, &h, &recs, &n) < 0) {
            if (per_rank)
                fprintf(out, "%srank %d: %s (%s)\n", prefix, names ? names[rank] : rank,
                        access(path, F_OK) == 0 ? "flight recorder refused" : "no flight recorder", zt_errmsg());
            idle[nidle++] = names ? names[rank] : rank;
            continue;
        }
        const zt_flight_rec *cur = zt_flight_current(recs, n);
        if (cur) {
            if (per_rank)
                fprintf(out,
                        "%srank %d: in %s(\"%s\") seq %llu (%s), %s, for %.1f s; step %lld epoch %lld micro %d%s\n",
                        prefix, names ? names[rank] : rank, zt_op_name(cur->op), cur->label, (unsigned long long)cur->seq,
                        zt_flight_state_name(cur->state), zt_flight_fmt_bytes(cur->bytes, b, sizeof b),
                        ns_between(now, cur->t_start_ns), (long long)h.step, (long long)h.epoch, h.micro,
                        h.status == ZT_FL_RUNNING   ? ""
                        : h.status == ZT_FL_ABORTED ? " [aborted]"
                                                    : " [finalized]");
            int g = 0;
            while (g < ngroups &&
                   !(groups[g].op == cur->op && groups[g].seq == cur->seq && strcmp(groups[g].label, cur->label) == 0))
                g++;
            if (g == ngroups) {
                groups[g].op = cur->op;
                groups[g].seq = cur->seq;
                memcpy(groups[g].label, cur->label, sizeof groups[g].label);
                ngroups++;
            }
            group_add(&groups[g], names ? names[rank] : rank);
        } else {
            idle[nidle++] = names ? names[rank] : rank;
            if (!per_rank) {
            } else if (n > 0) {
                const zt_flight_rec *l = &recs[n - 1];
                fprintf(out, "%srank %d: no collective in flight (%s); last %s(\"%s\") seq %llu %s %.1f s ago\n",
                        prefix, names ? names[rank] : rank, status_name(h.status), zt_op_name(l->op), l->label, (unsigned long long)l->seq,
                        zt_flight_state_name(l->state),
                        ns_between(now, l->t_end_ns ? l->t_end_ns : l->t_start_ns));
            } else {
                fprintf(out, "%srank %d: no collectives yet (%s)\n", prefix, names ? names[rank] : rank,
                        status_name(h.status));
            }
        }
        free(recs);
    }
    for (int g = 0; g < ngroups; g++) {
        fprintf(out, "%s%d rank%s in %s(\"%s\") seq %llu: ", prefix, groups[g].n, groups[g].n == 1 ? "" : "s",
                zt_op_name(groups[g].op), groups[g].label, (unsigned long long)groups[g].seq);
        print_rank_list(out, groups[g].ranks, groups[g].n);
        fputc('\n', out);
        free(groups[g].ranks);
    }
    if (nidle) {
        fprintf(out, "%s%d rank%s in no collective: ", prefix, nidle, nidle == 1 ? "" : "s");
        print_rank_list(out, idle, nidle);
        fputc('\n', out);
    }
    if (ngroups > 1 || (ngroups == 1 && nidle))
        fprintf(out, "%smismatch: the ranks are not all in the same collective\n", prefix);
    free(groups);
    free(idle);
    return ngroups;
}
