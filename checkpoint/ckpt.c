// Collective checkpoint save over parallel HDF5 (MPI-IO) and its atomic commit (.partial ->
// step-N -> latest), in two phases that --async-save runs apart. The jobs around it: where
// checkpoints are (ckpt_resolve.c), agreement (ckpt_agree.c), room (ckpt_space.c), metadata
// (ckpt_meta.c), the data writes (ckpt_io.c), the load (ckpt_load.c).
// defines: zt_ckpt_save, zt_ckpt_write_partial, zt_ckpt_commit_partial, zt_ckpt_pending_*,
//          zt_ckpt_check_shards, zt_ckpt_mpio_fapl
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "base/crc32c.h"
#include "base/common.h"
#include "base/env.h"
#include "base/out_file.h"

// ---- shards -----------------------------------------------------------------------

int zt_ckpt_check_shards(const zt_model_layout *lay, const zt_ckpt_shards *sh) {
    if (!sh || sh->nunits != lay->nunits)
        return zt_err("the shards describe %d units, the model has %d", sh ? sh->nunits : 0, lay->nunits);
    for (int u = 0; u < sh->nunits; u++) {
        const zt_ckpt_slice *s = &sh->unit[u];
        if (s->numel != lay->units[u].numel)
            return zt_err("unit %d: the shard says numel %lld, the model layout has %lld", u, (long long)s->numel,
                          (long long)lay->units[u].numel);
        if (s->lo < 0 || s->valid < 0 || (s->valid > 0 && s->lo + s->valid > s->numel))
            return zt_err("unit %d: slice [%lld, %lld) is outside [0, %lld)", u, (long long)s->lo,
                          (long long)(s->lo + s->valid), (long long)s->numel);
        if (s->valid > 0 && (!s->master || !s->m || !s->v))
            return zt_err("unit %d: slice of %lld elements has a NULL master, m or v pointer", u, (long long)s->valid);
    }
    return 0;
}


// ---- crc pieces: each rank's crc32c of the parts of chunks it holds -----------------

typedef struct {
    int32_t unit, ds, rank;
    uint32_t crc;
    int64_t start, len;
} crc_piece;

static int cmp_piece(const void *x, const void *y) {
    const crc_piece *a = x, *b = y;
    if (a->unit != b->unit) return a->unit < b->unit ? -1 : 1;
    if (a->ds != b->ds) return a->ds < b->ds ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

// All ranks end with identical per-chunk crc arrays crc[u * 3 + k] (or the same error):
// pieces are all-gathered and combined in element order, which also proves that the
// ranks' slices tile every unit exactly once.
static int gather_crcs(MPI_Comm comm, const zt_model_layout *lay, const zt_ckpt_shards *sh, int64_t chunk,
                       uint32_t **crc) {
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    int64_t cap = 0;
    for (int u = 0; u < sh->nunits; u++)
        if (sh->unit[u].valid > 0) cap += ZT_CKPT_NDS * (sh->unit[u].valid / chunk + 2);
    crc_piece *mine = zt_xmalloc((size_t)(cap > 0 ? cap : 1) * sizeof *mine);
    int64_t n = 0;
    for (int u = 0; u < sh->nunits; u++) {
        const zt_ckpt_slice *s = &sh->unit[u];
        for (int k = 0; k < ZT_CKPT_NDS && s->valid > 0; k++) {
            const float *p = zt_ckpt_slice_ptr(s, k);
            for (int64_t c = s->lo / chunk; c * chunk < s->lo + s->valid; c++) {
                int64_t a = c * chunk > s->lo ? c * chunk : s->lo;
                int64_t b = (c + 1) * chunk < s->lo + s->valid ? (c + 1) * chunk : s->lo + s->valid;
                mine[n++] = (crc_piece){u, k, rank, zt_crc32c(0, p + (a - s->lo), (size_t)(b - a) * sizeof(float)),
                                        a, b - a};
            }
        }
    }
    int bytes = (int)(n * (int64_t)sizeof(crc_piece));
    int *counts = zt_xmalloc((size_t)world * sizeof(int)), *displs = zt_xmalloc((size_t)world * sizeof(int));
    MPI_Allgather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, comm);
    int64_t total = 0;
    for (int r = 0; r < world; r++) displs[r] = (int)total, total += counts[r];
    crc_piece *all = zt_xmalloc((size_t)(total > 0 ? total : 1));
    MPI_Allgatherv(mine, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, comm);
    free(mine);
    free(counts);
    free(displs);
    int64_t np = total / (int64_t)sizeof(crc_piece);
    qsort(all, (size_t)np, sizeof *all, cmp_piece);

    int rc = 0;
    int64_t i = 0;
    for (int u = 0; u < lay->nunits && rc == 0; u++) {
        const int64_t numel = lay->units[u].numel, nchunks = (numel + chunk - 1) / chunk;
        for (int k = 0; k < ZT_CKPT_NDS && rc == 0; k++) {
            uint32_t *out = crc[u * ZT_CKPT_NDS + k] = zt_xcalloc((size_t)nchunks, sizeof(uint32_t));
            int64_t next = 0;
            uint32_t acc = 0;
            int prev_rank = -1;
            for (; i < np && all[i].unit == u && all[i].ds == k; i++) {
                const crc_piece *p = &all[i];
                if (p->start != next) {
                    rc = p->start > next
                             ? zt_err("unit %d: no rank holds elements [%lld, %lld) of its %lld (the ranks' slices "
                                      "must tile the unit's canonical vector exactly once)",
                                      u, (long long)next, (long long)p->start, (long long)numel)
                             : zt_err("unit %d: elements from %lld are held by both rank %d and rank %d (the ranks' "
                                      "slices must tile the unit's canonical vector exactly once)",
                                      u, (long long)p->start, prev_rank, p->rank);
                    break;
                }
                acc = p->start % chunk == 0 ? p->crc : zt_crc32c_combine(acc, p->crc, (uint64_t)p->len * 4);
                next += p->len;
                prev_rank = p->rank;
                if (next % chunk == 0 || next == numel) out[(next - 1) / chunk] = acc;
            }
            if (rc == 0 && next != numel)
                rc = zt_err("unit %d: no rank holds elements [%lld, %lld) of its %lld (the ranks' slices must tile "
                            "the unit's canonical vector exactly once)",
                            u, (long long)next, (long long)numel, (long long)numel);
        }
    }
    free(all);
    return rc;
}

// ---- save -------------------------------------------------------------------------

// Rank 0, after every rank's data is on disk: meta.json, .partial -> final, latest.
// *committed = 1 once the final directory exists (then it is never removed).
static int commit(zt_ckpt_save_ctx *c, const zt_ckpt_meta *m, double t0, int *committed) {
    if (zt_ckpt_write_meta_json(c, m, zt_now() - t0) != 0 || zt_ckpt_fsync_path(c->partial, 1) != 0) return -1;
    char old[4300] = "";
    // saving the same step again: replace, keeping the old one until done (a link of that name is
    // renamed and removed itself, never followed)
    if (zt_ckpt_is_dir(c->final_dir)) {
        snprintf(old, sizeof old, "%s.replaced", c->final_dir);
        if (zt_remove_tree(old) != 0) return -1;
        if (rename(c->final_dir, old) != 0)
            return zt_err("cannot move the existing %s aside: %s", c->final_dir, strerror(errno));
    }
    if (rename(c->partial, c->final_dir) != 0) {
        int e = errno;
        if (old[0]) rename(old, c->final_dir);
        return zt_err("cannot rename %s to %s: %s", c->partial, c->final_dir, strerror(e));
    }
    *committed = 1;
    if (zt_ckpt_fsync_path(c->ckdir, 1) != 0) return -1;
    if (zt_ckpt_write_latest(c->ckdir, c->name) != 0) return -1;
    if (old[0] && zt_remove_tree(old) != 0) fprintf(stderr, "zerotrain: warning: %s\n", zt_errmsg());
    return 0;
}

static int save_fail(zt_ckpt_save_ctx *c, int committed) {
    char msg[ZT_ERR_MAX];
    snprintf(msg, sizeof msg, "%s", zt_errmsg());
    if (committed)
        return zt_err("saving checkpoint step %lld: %s/%s was written completely, but: %.1200s; latest still names "
                      "%s",
                      (long long)c->step, c->ckdir, c->name, msg, c->prev[0] ? c->prev : "nothing");
    if (c->rank == 0) zt_remove_tree(c->partial);  // best effort; the error below is what matters
    MPI_Barrier(c->comm);                 // no rank returns before the .partial directory is gone
    if (c->prev[0])
        return zt_err("saving checkpoint step %lld to %s: %.1200s; nothing was committed: the previous checkpoint %s "
                      "is untouched and latest still names it",
                      (long long)c->step, c->file, msg, c->prev);
    return zt_err("saving checkpoint step %lld to %s: %.1200s; nothing was committed (there is no earlier checkpoint)",
                  (long long)c->step, c->file, msg);
}

static void close_all(zt_ckpt_save_ctx *c) {
    zt_ckpt_close_raw(c);
    for (int i = 0; c->ds && i < c->lay->nunits * ZT_CKPT_NDS; i++)
        if (c->ds[i] >= 0) H5Dclose(c->ds[i]), c->ds[i] = -1;
    if (c->dxpl >= 0) H5Pclose(c->dxpl), c->dxpl = -1;
    if (c->fid >= 0) H5Fclose(c->fid), c->fid = -1;
}

static void free_ctx(zt_ckpt_save_ctx *c) {
    for (int i = 0; c->crc && i < c->lay->nunits * ZT_CKPT_NDS; i++) free(c->crc[i]);
    free(c->crc);
    free(c->ds);
    free(c->off);
    free(c->bounce);
    c->off = NULL, c->bounce = NULL;
}

hid_t zt_ckpt_mpio_fapl(MPI_Comm comm, int writing) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);  // checksummed metadata; HDF5 >= 1.10 reads it
    H5Pset_all_coll_metadata_ops(fapl, 1);  // one rank reads metadata and broadcasts it
    if (writing) {
        H5Pset_coll_metadata_write(fapl, 1);
        H5Pset_alignment(fapl, 16 << 20, 1 << 20);  // big datasets start on 1 MiB boundaries (parallel file systems)
    }
    return fapl;
}

// What the write phase hands the commit phase: the save's context (names, the previous
// `latest`), the stored state and when the save began.
struct zt_ckpt_pending {
    zt_ckpt_save_ctx c;
    zt_ckpt_meta m;
    double t0;
};

// Testing: ZT_CKPT_DEBUG_<what>_STEP=N limits a hook to the save of step N (unset: every save).
static int hook_step_matches(zt_env_var v, int64_t step) {
    int64_t n;
    return !zt_env_i64(v, &n) || n == step;
}

// The save's test and fault hooks (base/env.h), read once, at its start.
static void read_hooks(zt_ckpt_save_hooks *h, int rank, int64_t step) {
    int64_t v;
    h->fail_after_bytes = zt_env_i64(ZT_ENV_CKPT_FAIL_AFTER_BYTES, &v) &&
                                  hook_step_matches(ZT_ENV_CKPT_DEBUG_FAIL_STEP, step) ? v : -1;
    h->no_space_check = zt_env_on(ZT_ENV_CKPT_NO_SPACE_CHECK);
    h->no_reserve = zt_env_on(ZT_ENV_CKPT_NO_RESERVE);
    h->no_odirect = zt_env_on(ZT_ENV_CKPT_DEBUG_NO_ODIRECT);
    h->crc_chunk = zt_env_i64(ZT_ENV_CKPT_CRC_CHUNK, &v) ? v : 0;
    const char *stall = zt_env_str(ZT_ENV_CKPT_DEBUG_STALL_RANK), *secs = zt_env_str(ZT_ENV_CKPT_DEBUG_STALL_S);
    h->stall = stall && *stall && atoi(stall) == rank && hook_step_matches(ZT_ENV_CKPT_DEBUG_STALL_STEP, step);
    h->stall_s = secs && *secs ? (unsigned)atoi(secs) : 3600u;
    const char *pause = zt_env_str(ZT_ENV_CKPT_DEBUG_PAUSE_S);
    h->pause_s = pause && *pause && hook_step_matches(ZT_ENV_CKPT_DEBUG_PAUSE_STEP, step) ? pause : NULL;
    h->debug_io = zt_env_str(ZT_ENV_CKPT_DEBUG_IO) != NULL;  // set at all, whatever its value
    h->debug_h5 = zt_env_str(ZT_ENV_CKPT_DEBUG_H5) != NULL;
}

// The save's context: its communicator, names and hooks; nothing opened yet.
static zt_ckpt_pending *begin_save(MPI_Comm comm, const char *run_dir, const zt_ckpt_meta *meta_in,
                                   const zt_model_layout *lay, const zt_ckpt_shards *sh, double t0) {
    zt_ckpt_pending *p = zt_xcalloc(1, sizeof *p);
    zt_ckpt_save_ctx *c = &p->c;
    c->comm = comm;
    c->lay = lay;
    c->sh = sh;
    c->fid = c->dxpl = -1;
    c->fd = c->dfd = -1;
    c->io = zt_ckpt_get_save_io();
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->world);
    p->m = *meta_in;
    p->m.world_size = c->world;
    c->step = p->m.step;
    p->t0 = t0;
    snprintf(c->ckdir, sizeof c->ckdir, "%s/checkpoints", run_dir);
    snprintf(c->name, sizeof c->name, "step-%08lld", (long long)c->step);
    snprintf(c->final_dir, sizeof c->final_dir, "%s/%s", c->ckdir, c->name);
    snprintf(c->partial, sizeof c->partial, "%s.partial", c->final_dir);
    snprintf(c->file, sizeof c->file, "%s/%s", c->partial, ZT_CKPT_FILE);
    read_hooks(&c->hooks, c->rank, c->step);
    return p;
}

// Rank 0: RUN/checkpoints a real directory (a link out of RUN is refused); step-N.partial made
// fresh by mkdir after a stale one (or a link of that name, removed itself) is gone, so
// HDF5 and MPI-IO create ckpt.h5 in a directory of this save's own. 1 when done.
static int make_partial_dir(zt_ckpt_save_ctx *c, const char *run_dir) {
    int ok = zt_out_mkdirs(run_dir, c->ckdir) == 0 && zt_remove_tree(c->partial) == 0 &&
             (c->hooks.no_space_check || zt_ckpt_space_check(c->ckdir, zt_ckpt_estimate_bytes(c->lay)) == 0);
    if (ok && mkdir(c->partial, 0755) != 0) ok = zt_err("%s: cannot create: %s", c->partial, strerror(errno)) == 0;
    return ok;
}

// Every unit's three datasets, each unit agreed (a failure stops the loop on every rank).
// Testing: ZT_CKPT_DEBUG_PAUSE_S=S pauses every rank for S seconds once half of the units
// are written (ZT_CKPT_DEBUG_PAUSE_STEP=N: only in the save of step N), after saying so on
// stderr: the moment a test kills a rank or signals the job in the middle of a write.
static void write_units(zt_ckpt_save_ctx *c, zt_ckpt_agreement *ag, int *ok) {
    const int nunits = c->lay->nunits, pause_unit = c->hooks.pause_s ? nunits / 2 : -1;
    for (int u = 0; u < nunits && !ag->failed; u++) {
        if (u == pause_unit) {
            fprintf(stderr, "zerotrain: rank %d: ZT_CKPT_DEBUG_PAUSE_S: pausing the checkpoint write of step %lld "
                            "after %d of %d units for %s s\n", c->rank, (long long)c->step, u, nunits, c->hooks.pause_s);
            fflush(stderr);
            usleep((useconds_t)(atof(c->hooks.pause_s) * 1e6));
        }
        for (int k = 0; k < ZT_CKPT_NDS; k++)
            if (zt_ckpt_write_slice(c, u, k) != 0) *ok = 0;  // keeps taking part in the unit's collective writes
        zt_ckpt_agree_step(ag, ok);                           // every rank learns of any failure, unit by unit
    }
}

// Collective, in the fresh .partial directory: ckpt.h5 created (rank 0 reserves its blocks), its
// metadata, every unit's data; then closed (flushing metadata and data through MPI-IO) and
// fsynced on every rank. 0, or -1 with the same zt_err on every rank.
static int write_file(zt_ckpt_save_ctx *c, const zt_ckpt_meta *m, const char *train_json) {
    const zt_model_layout *lay = c->lay;
    zt_ckpt_agreement ag = {c->comm, 0};
    hid_t fapl = zt_ckpt_mpio_fapl(c->comm, 1);
    c->fid = H5Fcreate(c->file, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    int ok = c->fid >= 0 || zt_err("cannot create the file: %s", zt_h5_why()) == 0;
    H5Pclose(fapl);
    if (c->rank == 0 && ok && !c->hooks.no_reserve)
        ok = zt_ckpt_reserve_space(c->file, zt_ckpt_estimate_bytes(lay)) == 0;
    if (zt_ckpt_agree_step(&ag, &ok) == 0) {
        c->dxpl = H5Pcreate(H5P_DATASET_XFER);
        H5Pset_dxpl_mpio(c->dxpl, H5FD_MPIO_COLLECTIVE);
        ok = zt_ckpt_write_metadata(c, m, train_json) == 0;
    }
    zt_ckpt_agree_step(&ag, &ok);
    if (c->io != ZT_SAVE_IO_MPIIO && !ag.failed) {
        ok = zt_ckpt_open_raw(c) == 0;
        zt_ckpt_agree_step(&ag, &ok);
    }
    write_units(c, &ag, &ok);
    zt_ckpt_raw_done(c);
    if (ag.failed && c->rank == 0 && c->fid >= 0) zt_ckpt_release_space(c->file);
    // Close (flushes metadata and data through MPI-IO), then fsync on every rank.
    for (int i = 0; i < lay->nunits * ZT_CKPT_NDS; i++)
        if (c->ds[i] >= 0) H5Dclose(c->ds[i]), c->ds[i] = -1;
    if (c->dxpl >= 0) H5Pclose(c->dxpl);
    c->dxpl = -1;
    if (c->fid >= 0) {
        herr_t rc = H5Fclose(c->fid);
        c->fid = -1;
        if (ok && rc < 0) ok = zt_err("closing (flushing) the file failed: %s", zt_h5_why()) == 0;
    }
    if (ok) ok = zt_ckpt_fsync_path(c->file, 0) == 0;
    return zt_ckpt_agree_step(&ag, &ok);
}

int zt_ckpt_write_partial(MPI_Comm comm, const char *run_dir, const zt_ckpt_meta *meta_in, const zt_model_layout *lay,
                          const char *train_json, const zt_ckpt_shards *sh, zt_ckpt_pending **out) {
    *out = NULL;
    const double t0 = zt_now();
    zt_h5_quiet();
    zt_ckpt_pending *p = begin_save(comm, run_dir, meta_in, lay, sh, t0);
    zt_ckpt_save_ctx *c = &p->c;
    const int64_t step = c->step;

    int ok = (step >= 0 || zt_err("step %lld is negative", (long long)step) == 0) && zt_ckpt_check_shards(lay, sh) == 0;
    if (zt_ckpt_agree(comm, ok) != 0) {
        free(p);
        return zt_ckpt_err_prefix("saving checkpoint step %lld", (long long)step), -1;
    }

    // The symmetric barrier: every rank has finished the same step before any byte is written.
    MPI_Request brq;
    MPI_Ibarrier(comm, &brq);
    zt_ckpt_wait_quietly(&brq);
    // Testing: ZT_CKPT_DEBUG_STALL_RANK=R stalls rank R here for ZT_CKPT_DEBUG_STALL_S seconds
    // (default 3600), as a rank stuck in I/O would, while its peers wait inside HDF5's
    // collectives; the comm watchdog must turn that into a report (tests/cli/dist_cli.sh).
    // ZT_CKPT_DEBUG_STALL_STEP=N: only in the save of step N.
    if (c->hooks.stall) {
        fprintf(stderr, "zerotrain: rank %d: ZT_CKPT_DEBUG_STALL_RANK: stalling inside the checkpoint save of step %lld\n",
                c->rank, (long long)step);
        sleep(c->hooks.stall_s);
    }

    if (c->rank == 0) {
        c->chunk = c->hooks.crc_chunk >= 1 ? c->hooks.crc_chunk : ZT_CKPT_CRC_CHUNK_DEFAULT;
        int exists;
        zt_ckpt_read_latest(c->ckdir, c->prev, sizeof c->prev, &exists);
    }
    MPI_Bcast(&c->chunk, 1, MPI_INT64_T, 0, comm);
    MPI_Bcast(c->prev, sizeof c->prev, MPI_CHAR, 0, comm);
    c->crc = zt_xcalloc((size_t)lay->nunits * ZT_CKPT_NDS, sizeof(uint32_t *));
    c->ds = zt_xmalloc((size_t)lay->nunits * ZT_CKPT_NDS * sizeof(hid_t));
    for (int i = 0; i < lay->nunits * ZT_CKPT_NDS; i++) c->ds[i] = -1;

    // Checksums first (from memory): also proves the slices tile every unit.
    ok = gather_crcs(comm, lay, sh, c->chunk, c->crc) == 0;  // identical result on every rank
    if (!ok) {
        zt_ckpt_err_prefix("saving checkpoint step %lld", (long long)step);
        free_ctx(c);
        free(p);
        return -1;
    }

    if (c->rank == 0) ok = make_partial_dir(c, run_dir);
    if (zt_ckpt_agree(comm, ok) != 0 || write_file(c, &p->m, train_json) != 0) {
        close_all(c);
        int rc = save_fail(c, 0);
        free_ctx(c);
        free(p);
        return rc;
    }
    p->c.sh = NULL;  // the data is on disk: the commit never reads the shards
    *out = p;
    return 0;
}

int64_t zt_ckpt_pending_step(const zt_ckpt_pending *p) { return p->c.step; }

void zt_ckpt_pending_free(zt_ckpt_pending *p) {
    if (!p) return;
    free_ctx(&p->c);
    free(p);
}

int zt_ckpt_commit_partial(MPI_Comm comm, zt_ckpt_pending *p, int keep_last, char *out_path, size_t out_len) {
    zt_ckpt_save_ctx *c = &p->c;
    c->comm = comm;  // may differ from the write phase's (the background writer's own)
    int ok = 1, committed = 0;
    if (c->rank == 0) {
        ok = commit(c, &p->m, p->t0, &committed) == 0;
        if (ok) zt_ckpt_prune(c->ckdir, c->name, keep_last);
    }
    MPI_Bcast(&committed, 1, MPI_INT, 0, comm);
    int rc = 0;
    if (zt_ckpt_agree(comm, ok) != 0) rc = save_fail(c, committed);
    else if (out_path) snprintf(out_path, out_len, "%s", c->final_dir);
    zt_ckpt_pending_free(p);
    return rc;
}

int zt_ckpt_save(MPI_Comm comm, const char *run_dir, const zt_ckpt_meta *meta_in, const zt_model_layout *lay,
                 const char *train_json, const zt_ckpt_shards *sh, int keep_last, char *out_path, size_t out_len) {
    zt_ckpt_pending *p;
    if (zt_ckpt_write_partial(comm, run_dir, meta_in, lay, train_json, sh, &p) != 0) return -1;
    return zt_ckpt_commit_partial(comm, p, keep_last, out_path, out_len);
}
