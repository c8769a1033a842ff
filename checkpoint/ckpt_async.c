// Asynchronous checkpoint save: at a save point every rank copies its shards into a host
// snapshot and a writer thread turns the snapshot into the same step-N.partial/ckpt.h5 that
// zt_ckpt_save writes (the same code: zt_ckpt_write_partial), on a communicator of its own;
// the trainer commits it (.partial -> step-N, latest, prune) at a later step boundary once
// every rank's writer has finished. Design and requirements: docs/checkpoint-format.md
// ("Asynchronous save") and docs/design.md.
// defines: zt_ckpt_snapshot_bytes, zt_ckpt_async_*
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/env.h"
#include "checkpoint/ckpt_internal.h"

#define ZT_SNAP_ALIGN 4096  // --save-io direct's block (checkpoint/ckpt_io.c ZT_IO_ALIGN)

struct zt_ckpt_async {
    MPI_Comm wcomm;             // the writer's own duplicate: never the training comm's collectives
    const zt_model_layout *lay;
    zt_ckpt_slice *slices;      // the snapshot's slices (same lo/valid as the live shards)
    zt_ckpt_shards snap;
    float *buf;                 // one allocation: master, m, v of every unit (each at its 4 KiB phase)
    int64_t bytes;              // of buf (0 without a copy)
    int copy;                   // 0: the writer reads the caller's shards themselves (GPU engine's host copies)
    const zt_ckpt_slice *src;   // copy: the live shards the writer copies first (the caller's, kept alive)
    pthread_mutex_t mu;         // copy: guards copied (the update fence waits on cv)
    pthread_cond_t cv;
    int copied;                 // copy: the snapshot is complete, the live shards may change again
    double copy_s;              // the last snapshot copy's duration (the writer's clock)
    // the save in flight
    int64_t step;               // -1: none
    int thread_live;            // created and not joined
    pthread_t thread;
    atomic_int done;            // the writer has returned (release: its results are visible)
    int rc;
    char err[ZT_ERR_MAX];
    zt_ckpt_pending *pending;
    zt_ckpt_meta meta;
    char *train_json;
    char run_dir[4096];
    double t_start, t_end;      // the writer's own clock
};

int64_t zt_ckpt_snapshot_bytes(const zt_ckpt_shards *sh) {
    int64_t b = 0;
    for (int u = 0; u < sh->nunits; u++) b += sh->unit[u].valid * (int64_t)(3 * sizeof(float));
    return b;
}

int zt_ckpt_async_create(MPI_Comm comm, const zt_model_layout *lay, const zt_ckpt_shards *sh, int copy,
                         zt_ckpt_async **out) {
    *out = NULL;
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
        return zt_err("asynchronous checkpoints need an MPI library initialised with MPI_THREAD_MULTIPLE (the "
                      "writer thread calls MPI-IO while the training thread runs collectives); this one provides "
                      "thread level %d (MPI_THREAD_MULTIPLE is %d): use an MPI built with thread support (Open MPI "
                      ">= 3 has it by default) or drop --async-save",
                      provided, MPI_THREAD_MULTIPLE);
    zt_ckpt_async *a = zt_xcalloc(1, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    a->copied = 1;
    a->lay = lay;
    a->step = -1;
    a->copy = copy;
    a->bytes = copy ? zt_ckpt_snapshot_bytes(sh) : 0;
    // Each slice starts at an address congruent to its first byte's offset in a dataset (lo * 4)
    // modulo 4 KiB: the datasets of a unit of 16 MiB or more start on 1 MiB boundaries of the
    // file, so --save-io direct writes their whole blocks from the snapshot itself, without
    // staging them. At most 3 x 4 KiB more per unit.
    const int64_t alloc = a->bytes > 0 ? a->bytes + (int64_t)sh->nunits * 3 * ZT_SNAP_ALIGN : 1;
    void *mem = NULL;
    a->buf = posix_memalign(&mem, ZT_SNAP_ALIGN, (size_t)alloc) == 0 ? mem : NULL;
    if (!a->buf) {
        const int64_t bytes = a->bytes;
        free(a);
        return zt_err("asynchronous checkpoints: cannot allocate the %.1f MiB host snapshot of this rank's shards",
                      bytes / 1048576.0);
    }
    memset(a->buf, 0, (size_t)alloc);  // touch every page now, not at the first save
    a->slices = zt_xcalloc((size_t)sh->nunits, sizeof *a->slices);
    char *p = (char *)a->buf;
    for (int u = 0; u < sh->nunits; u++) {
        const zt_ckpt_slice *s = &sh->unit[u];
        a->slices[u] = (zt_ckpt_slice){s->numel, s->lo, s->valid, NULL, NULL, NULL};
        if (s->valid > 0 && copy) {
            float **dst[3] = {&a->slices[u].master, &a->slices[u].m, &a->slices[u].v};
            const int64_t phase = s->lo * (int64_t)sizeof(float) % ZT_SNAP_ALIGN;
            for (int k = 0; k < 3; k++) {
                p += (phase - (int64_t)((uintptr_t)p % ZT_SNAP_ALIGN) + ZT_SNAP_ALIGN) % ZT_SNAP_ALIGN;
                *dst[k] = (float *)p;
                p += s->valid * (int64_t)sizeof(float);
            }
        }
    }
    a->snap = (zt_ckpt_shards){sh->nunits, a->slices};
    if (MPI_Comm_dup(comm, &a->wcomm) != MPI_SUCCESS) {
        free(a->slices), free(a->buf), free(a);
        return zt_err("asynchronous checkpoints: MPI_Comm_dup of the writer's communicator failed");
    }
    MPI_Comm_set_name(a->wcomm, "zerotrain-ckpt-writer");
    *out = a;
    return 0;
}

int64_t zt_ckpt_async_bytes(const zt_ckpt_async *a) { return a ? a->bytes : 0; }
int64_t zt_ckpt_async_step(const zt_ckpt_async *a) { return a ? a->step : -1; }
int zt_ckpt_async_done(const zt_ckpt_async *a) { return a && atomic_load_explicit(&a->done, memory_order_acquire); }
double zt_ckpt_async_write_seconds(const zt_ckpt_async *a) { return a->t_end - a->t_start; }

// The snapshot: master, m and v of every unit into the host buffer. On the writer thread, while
// the next step's forward and backward (which only read them) run; the step's optimizer update
// waits for it in zt_ckpt_async_wait_copied (the engine's update fence).
// Testing: ZT_CKPT_DEBUG_COPY_DELAY_S=S delays the copy by S seconds (the update fence must hold
// the next update back until it is done: tests/cli/async_cli.sh, case identical).
static void copy_snapshot(zt_ckpt_async *a) {
    const double t = zt_now();
    double delay;
    if (zt_env_f64(ZT_ENV_CKPT_DEBUG_COPY_DELAY_S, &delay)) usleep((useconds_t)(delay * 1e6));
    for (int u = 0; u < a->snap.nunits; u++) {
        const zt_ckpt_slice *s = &a->src[u], *d = &a->slices[u];
        if (s->valid <= 0) continue;
        memcpy(d->master, s->master, (size_t)s->valid * sizeof(float));
        memcpy(d->m, s->m, (size_t)s->valid * sizeof(float));
        memcpy(d->v, s->v, (size_t)s->valid * sizeof(float));
    }
    a->copy_s = zt_now() - t;
    pthread_mutex_lock(&a->mu);
    a->copied = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void *writer_main(void *arg) {
    zt_ckpt_async *a = arg;
    a->t_start = zt_now();
    if (a->copy) copy_snapshot(a);  // at the training thread's priority: the next update waits for it
    // The training thread comes first: the write runs at nice +10 (Linux: a thread's own nice
    // value), so where cores are short the background write slows down, not the steps. Failing
    // to lower it changes nothing else.
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    a->rc = zt_ckpt_write_partial(a->wcomm, a->run_dir, &a->meta, a->lay, a->train_json, &a->snap, &a->pending);
    if (a->rc != 0) snprintf(a->err, sizeof a->err, "%s", zt_errmsg());  // zt_err is per thread
    a->t_end = zt_now();
    atomic_store_explicit(&a->done, 1, memory_order_release);
    return NULL;
}

int zt_ckpt_async_start(zt_ckpt_async *a, const char *run_dir, const zt_ckpt_meta *meta, const char *train_json,
                        const zt_ckpt_shards *sh) {
    if (a->step >= 0) return zt_err("a checkpoint save (step %lld) is still in flight", (long long)a->step);
    if (sh->nunits != a->snap.nunits) return zt_err("the shards changed shape since the snapshot was allocated");
    for (int u = 0; u < sh->nunits && !a->copy; u++) a->slices[u] = sh->unit[u];  // the caller's own buffers
    for (int u = 0; u < sh->nunits && a->copy; u++) {
        const zt_ckpt_slice *s = &sh->unit[u], *d = &a->slices[u];
        if (s->valid != d->valid || s->lo != d->lo)
            return zt_err("unit %d: the shard changed shape since the snapshot was allocated", u);
    }
    a->src = sh->unit;  // copied by the writer thread first (copy_snapshot)
    a->copied = !a->copy;
    a->meta = *meta;
    free(a->train_json);
    a->train_json = train_json ? strdup(train_json) : NULL;
    snprintf(a->run_dir, sizeof a->run_dir, "%s", run_dir);
    a->rc = 0;
    a->err[0] = 0;
    a->pending = NULL;
    atomic_store(&a->done, 0);
    // The stop signals belong to the training thread (train/signals.c): the writer never takes one.
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1), sigaddset(&block, SIGTERM), sigaddset(&block, SIGINT), sigaddset(&block, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    const int e = pthread_create(&a->thread, NULL, writer_main, a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        a->copied = 1;
        return zt_err("cannot start the checkpoint writer thread: %s", strerror(e));
    }
    pthread_setname_np(a->thread, "zt-ckpt-write");
    a->thread_live = 1;
    a->step = meta->step;
    return 0;
}

double zt_ckpt_async_wait_copied(void *arg) {
    zt_ckpt_async *a = arg;
    if (!a || !a->copy) return 0.0;
    pthread_mutex_lock(&a->mu);
    double waited = 0.0;
    if (!a->copied) {
        const double t = zt_now();
        while (!a->copied) pthread_cond_wait(&a->cv, &a->mu);
        waited = zt_now() - t;
    }
    pthread_mutex_unlock(&a->mu);
    return waited;
}

int zt_ckpt_async_copied(const zt_ckpt_async *a, double *copy_s) {
    if (!a) return 1;
    pthread_mutex_lock((pthread_mutex_t *)&a->mu);
    const int c = a->copied;
    pthread_mutex_unlock((pthread_mutex_t *)&a->mu);
    if (c && copy_s) *copy_s = a->copy_s;
    return c;
}

void zt_ckpt_async_join(zt_ckpt_async *a) {
    if (!a || !a->thread_live) return;
    pthread_join(a->thread, NULL);
    a->thread_live = 0;
}

int zt_ckpt_async_commit(zt_ckpt_async *a, MPI_Comm comm, int keep_last, char *out_path, size_t out_len) {
    zt_ckpt_async_join(a);
    const int64_t step = a->step;
    a->step = -1;
    if (a->rc != 0) return zt_err("%s", a->err);  // the writers agreed on it: the same on every rank
    zt_ckpt_pending *p = a->pending;
    a->pending = NULL;
    if (!p) return zt_err("saving checkpoint step %lld: the background writer left nothing to commit",
                          (long long)step);
    return zt_ckpt_commit_partial(comm, p, keep_last, out_path, out_len);
}

void zt_ckpt_async_abandon(zt_ckpt_async *a) {
    if (!a) return;
    zt_ckpt_async_join(a);
    zt_ckpt_pending_free(a->pending);  // step-N.partial stays: the next save or start clears it
    a->pending = NULL;
    a->step = -1;
}

void zt_ckpt_async_destroy(zt_ckpt_async *a) {
    if (!a) return;
    zt_ckpt_async_abandon(a);
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && a->wcomm != MPI_COMM_NULL) MPI_Comm_free(&a->wcomm);
    free(a->train_json);
    free(a->slices);
    free(a->buf);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}
