// A training job's session (train/train.h zt_train_run): MPI up and down, the stop signals
// (a checkpoint at the next step boundary once training runs; before that, an exit), the
// run directory's lock held by rank 0 for the job's life, --resume auto's choice and the
// fresh-start guards, the communicators, liveness and power sampling, then the run itself
// (train.c) and the first error kept as the one reported.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/out_file.h"
#include "data/dataset.h"
#include "engine/comm_mpi.h"
#include "engine/job_shape.h"
#include "kernels/ops.h"
#include "train/agree.h"
#include "train/input_digest.h"
#include "train/liveness.h"
#include "train/loop.h"
#include "train/preflight.h"
#include "train/run_lock.h"
#include "train/run_log.h"
#include "train/settings_agree.h"
#include "train/signals.h"


// Before the communicators exist: every rank contributes ok; when any failed, every rank
// returns -1 with the lowest failing rank's message (MPI_COMM_WORLD, no deadline: nothing
// here waits on anything but the other ranks' start-up).
static int agree_start(int ok) {
    int all = 0, rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) return 0;
    int me = ok ? world : rank, first = world;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    char msg[ZT_ERR_MAX];
    snprintf(msg, sizeof msg, "%s", zt_errmsg());
    MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD);
    if (first != rank && world > 1) return zt_err("rank %d: %.2000s", first, msg);
    return zt_err("%s", msg);
}

// The comm layer's deadlines from the flags: the start-up one as given; left at its default it is
// never shorter than the steady-state one (a longer --collective-timeout raises it too). The same
// start-up deadline guards MPI's own start (zt_train_run).
static zt_comm_opts comm_opts(const zt_train_opts *o) {
    zt_comm_opts co = zt_comm_opts_default();
    if (o->collective_timeout > 0) co.timeout_s = o->collective_timeout;
    if (o->first_collective_timeout > 0) co.first_timeout_s = o->first_collective_timeout;
    if (o->first_collective_timeout == ZT_DEF_FIRST_COLLECTIVE_TIMEOUT && co.first_timeout_s < co.timeout_s)
        co.first_timeout_s = co.timeout_s;
    co.run_dir = o->run_dir;
    return co;
}

// MPI never started within the start-up deadline (a rank never joined; engine/comm_mpi.h): rank 0
// records it in RUN/heartbeat.json for the watcher, only while it can hold RUN/lock (a run
// directory another job holds is that job's), and the process then exits with code 3.
static void on_start_expired(void *ctx, int rank, int world, const char *message) {
    const zt_train_opts *o = ctx;
    (void)world;
    if (rank != 0) return;  // the heartbeat is rank 0's; unknown (-1): no launcher says who writes
    zt_run_lock *lock = NULL;
    if (o->run_lock ? zt_run_lock_acquire(o->run_dir, &lock) != 0 : zt_mkdirs(o->run_dir) != 0) return;
    // no world_size: no rank started its files in RUN/ranks, which a watcher would then look for
    const zt_heartbeat_end e = {.state = "failed", .error = message, .stopped_by_rank = -1};
    if (zt_heartbeat_mark(o->run_dir, &e) != 0)
        fprintf(stderr, "zerotrain: warning: rank 0: recording the failed start: %s\n", zt_errmsg());
    zt_run_lock_release(lock);
}

// A rank's collective deadline (or an asynchronous backend error) takes the job down with exit 3,
// past the trainer's own last heartbeat: heartbeat.json says the job was aborted, by which rank and
// why (engine/comm.h zt_comm_set_abort_hook), for `zerotrain watch` and `report`.
// With the ranks whose liveness tick had stopped by then (a process stopped, or hung with its tick
// thread): the ones the others waited for, which a post-mortem cannot tell once every process is
// gone (a launcher resumes a stopped process to end it). Read on jobs of up to 4096 ranks.
typedef struct {
    const char *run_dir;
    double alive_interval;
    const run_state *r;
} abort_ctx;

static void on_abort(void *ctx, int world_rank, const char *headline) {
    const abort_ctx *a = ctx;
    char err[1400];
    snprintf(err, sizeof err, "rank %d: %.1200s (aborted the job, exit code 3)", world_rank, headline);
    const int W = a->r->world, scan = W <= 4096;
    int *quiet = scan ? zt_xcalloc((size_t)W, sizeof(int)) : NULL;
    const double older = 2 * a->alive_interval + 1;  // a tick is rewritten every interval
    const zt_heartbeat_end e = {.state = "aborted", .error = err, .stopped_by_rank = world_rank,
                                .run_id = a->r->run_id, .world = W, .not_ticking = quiet,
                                .n_not_ticking = scan ? zt_liveness_not_ticking(a->run_dir, W, older, quiet) : 0,
                                .ticks_older_than_s = older};
    const int rc = zt_heartbeat_mark(a->run_dir, &e);
    free(quiet);
    if (rc != 0)
        fprintf(stderr, "zerotrain: rank %d: recording the abort in heartbeat.json: %s\n", world_rank, zt_errmsg());
}

// --context-parallel, checked on every rank before RUN is created or locked, so that a split that
// cannot run leaves nothing behind (engine/job_shape.h: C against the shard group, a number here
// and `node` once its layout is read when the mesh is made; the block length and the family when
// dataset.json and the config read, else where they are read) and the cuDNN attention, which
// takes no positions. 1, or 0 + zt_err.
static int context_ok(const zt_train_opts *o, int world) {
    if (o->context_parallel <= 1) return 1;
    const char *sg = o->shard_group;
    zt_context_job cj = {.context = o->context_parallel, .world = world,
                         .shard_group = sg && *sg && strcmp(sg, "node") && atoi(sg) > 0 ? atoi(sg) : world,
                         .seq_len = zt_dataset_peek_seq_len(o->data)};
    zt_model_config cfg;
    if (zt_model_config_load(&cfg, o->model ? o->model : o->init) == 0) cj.family = cfg.family, cj.config = &cfg;
    cj.gpu = o->device == ZT_DEVICE_CUDA;
    cj.attention = o->device != ZT_DEVICE_CPU ? o->attention : ZT_ATTN_TILED;  // the CPU has one attention
    zt_err_clear();
    return zt_context_check(&cj) == 0;
}

// Everything between taking the run directory and handing it back: --resume auto's choice,
// the fresh-start guards, the communicators, the run itself. Every early refusal here is
// agreed (agree_start), so all ranks return together.
static int train_locked(zt_train_opts *eff, run_state *r, char ***candidates) {
    const zt_train_opts *o = eff;
    // --resume auto (what a requeued batch job wants): continue from RUN/checkpoints/latest,
    // or, when latest is missing or damaged, from the newest complete checkpoint that
    // reads; start fresh only when the run directory holds no checkpoint at all; refuse when
    // checkpoints are there but none can be resumed from. Never start over saved work. The
    // candidates are loaded in order: one whose data checksums fail is skipped, named.
    if (eff->resume && !strcmp(eff->resume, "auto")) {
        char note[2600];
        const int rc = zt_ckpt_auto_candidates(eff->run_dir, candidates, note, sizeof note);
        if (agree_start(rc >= 0) != 0) return -1;
        if (rc > 0) {
            eff->resume = (*candidates)[0];
            if (note[0] && r->rank == 0) fprintf(stderr, "zerotrain: warning: %s\n", note);
        } else {
            eff->resume = NULL;
            eff->overwrite = 1;  // an earlier attempt that never checkpointed (run.json only): start clean
            zt_err_clear();
        }
    }
    // A fresh run's id from the start, so that a second job's refusal names it (a resumed run
    // takes its checkpoint's when it loads).
    if (!eff->resume && r->rank == 0) {
        zt_runlog_make_run_id(r->run_id, sizeof r->run_id);
        zt_run_lock_set_run_id(r->lock, r->run_id);
    }
    // Checked before anything is written, so every rank sees the same answer.
    char path[4200], found[1024];
    snprintf(path, sizeof path, "%s/run.json", o->run_dir);
    struct stat st;
    // Every name this rank writes in RUN: a link or special file there is refused first, before
    // anything is written or removed (the prune below would follow a linked checkpoints/).
    int ok = zt_runlog_check_outputs(o, r->rank) == 0;
    if (ok && !o->overwrite && !o->resume && stat(path, &st) == 0)
        ok = zt_err("%s already exists: this run directory holds a run; continue it with --resume, pick a new "
                    "--run-dir, or pass --overwrite",
                    path) == 0;
    // Saved checkpoints block a fresh start even without run.json (--keep-last would delete them).
    if (ok && !o->overwrite && !o->resume && zt_ckpt_scan_run(o->run_dir, found, sizeof found) > 0)
        ok = zt_err("%s/checkpoints holds %s: this run directory holds saved work; continue it with --resume "
                    "(auto, latest or a step directory), pick a new --run-dir, or pass --overwrite to discard it",
                    o->run_dir, found) == 0;
    snprintf(path, sizeof path, "%s/ranks", o->run_dir);
    if (ok) ok = zt_out_mkdirs(o->run_dir, path) == 0;  // a real directory, never a link out of RUN
    // A prune a crashed job left half done (only the job holding the lock may clear it).
    if (ok && r->rank == 0) ok = zt_ckpt_clear_removing(o->run_dir, stdout) == 0;
    if (agree_start(ok) != 0) return -1;

    const zt_comm_opts co = comm_opts(o);
    r->copts = co;
    // The process groups, once for the job: the world, --shard-group resolved on it (`node` reads
    // its node layout), then the mesh of shard, replica and context groups (engine/mesh.h), which owns them
    // all. Everything after asks the mesh for the group it means.
    zt_comm *world = NULL;
    if (zt_comm_init_mpi(&world, MPI_COMM_WORLD, &co) != 0) return -1;
    int G = r->world;
    ok = zt_shard_group_resolve(world, o->shard_group, r->world, &G) == 0;
    if (zt_train_agree(world, ok, "resolving --shard-group") == 0) {
        ok = zt_mesh_create(world, &(zt_mesh_dims){.shard = G, .context = o->context_parallel}, 1, &r->mesh) == 0;
        if (zt_train_agree(world, ok, "making the process groups") != 0) zt_mesh_free(r->mesh), r->mesh = NULL;
    }
    if (!r->mesh) {
        char msg[ZT_ERR_MAX];
        snprintf(msg, sizeof msg, "%s", zt_errmsg());
        zt_comm_finalize(world);
        return zt_err("%s", msg);
    }
    r->comm = zt_mesh_group(r->mesh, ZT_MESH_WORLD);
    const abort_ctx actx = {o->run_dir, o->alive_interval > 0 ? o->alive_interval : 5.0, r};
    zt_comm_set_abort_hook(on_abort, (void *)&actx);  // until the comms are finalized below
    zt_comm_info info;
    zt_comm_get_info(r->comm, &info);
    r->alive = zt_liveness_start(o->run_dir, r->rank, o->alive_interval);
    // Power telemetry whenever this rank's GPU is visible to NVML (health is judged by
    // board power, not utilization); silently absent on machines without NVIDIA GPUs.
    r->power = zt_power_start(o->run_dir, r->rank, info.local_rank, 1.0);
    r->ckpt.resume_candidates = *candidates;
    const int rc = zt_train_body(o, r);
    // The first error is the one reported: what cleaning up and the last heartbeat run into
    // afterwards (a full disk fails both) is appended, never substituted.
    char first[ZT_ERR_MAX] = "";
    if (rc != 0) snprintf(first, sizeof first, "%s", zt_errmsg());
    const int64_t records_lost = zt_line_lost(r->sinks.metrics);  // the files close in cleanup
    zt_train_cleanup(r);
    zt_power_stop(r->power);
    zt_liveness_stop(r->alive, rc == 0 ? "done" : "failed");
    if (rc != 0 && r->rank == 0 && r->run_id[0]) {
        zt_heartbeat hb = {.run_id = r->run_id, .state = "failed", .step = r->progress.step,
                           .total_steps = r->total_steps, .epoch = r->data.epoch, .tokens = r->progress.tokens_seen,
                           .loss = r->progress.loss_last, .world_size = r->world,
                           .elapsed_s = zt_now() - r->t_start, .error = first, .records_lost = records_lost};
        if (zt_heartbeat_write(o->run_dir, &hb) != 0) {
            const size_t n = strlen(first);
            snprintf(first + n, sizeof first - n, " (then, recording the failure: %.600s)", zt_errmsg());
        }
    }
    if (rc != 0) {  // failures are agreed (every rank is here); name the rank in multi-rank jobs
        int named = -1, at = 0;  // already "rank N: ..." (an agreed error names the rank that had it)
        if (sscanf(first, "rank %d:%n", &named, &at) == 1 && at > 0) named = 1;
        if (r->world > 1 && named != 1) zt_err("rank %d: %.3000s", r->rank, first);
        else zt_err("%s", first);
    }
    // After the engine's buffers are gone (run_cleanup). An NCCL comm the mesh never took (its
    // creation failed on another rank) is finalized on its own.
    if (r->dcomm && zt_mesh_device_group(r->mesh, ZT_MESH_WORLD) != r->dcomm) zt_comm_finalize(r->dcomm);
    zt_mesh_free(r->mesh);
    zt_comm_set_abort_hook(NULL, NULL);
    return rc;
}

int zt_train_run(const zt_train_opts *opts) {
    zt_train_opts eff = *opts;
    const zt_train_opts *o = &eff;
    if (!o->model && !o->init) return zt_err("no model: give --model CONFIG.json|HF_DIR (or --init HF_DIR)");
    // The flag table refuses these with the flag's range; this guards other callers of the API.
    if (zt_fsdp_check_batch(o->micro_batch, o->grad_accum) != 0) return -1;
    if (!zt_cpu_gemm_kernel()) return -1;  // a bad ZT_CPU_GEMM: refused before RUN is touched
    // SIGUSR1 / SIGTERM: a checkpoint at the next step boundary once training runs; before
    // that (the module, the data, the checkpoint still loading) the process exits at once.
    zt_signals_install();
    // --async-save: the checkpoint writer thread calls MPI-IO beside the training thread. MPI's own
    // start waits for every rank of the job: under the start-up deadline.
    const zt_mpi_start_deadline sd = {.deadline_s = comm_opts(o).first_timeout_s,
                                      .source = "--first-collective-timeout", .on_expiry = on_start_expired,
                                      .ctx = (void *)o};
    if (zt_mpi_init_guarded(o->async_save ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &sd) != 0) return -1;

    run_state r;
    memset(&r, 0, sizeof r);
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.world);
    // Every rank's resolved settings and run file agree before anything is touched: a rank
    // that differs (a stale run file on one node) would train silently wrong or hang. The
    // CPU threads per rank are a node's own resource and change no result.
    static const char *const per_rank[] = {"threads", NULL};
    // Then what each rank reads at those paths (train/input_digest.h): the same flags can name
    // other files on another node, or under another mount.
    zt_input_digest inputs;
    memset(&inputs, 0, sizeof inputs);
    int agreed = zt_settings_agree(MPI_COMM_WORLD, o->config_json, o->has_config_file ? o->config_file : NULL,
                                   o->config_crc32c, per_rank) == 0;
    if (agreed) {
        const zt_input_paths ip = {.model = o->model ? o->model : o->init, .init = o->init, .data = o->data,
                                   .eval_data = o->eval_data};
        zt_input_digest_make(&inputs, &ip);
        agreed = zt_input_digest_agree(MPI_COMM_WORLD, &inputs) == 0;
    }
    if (!agreed) {
        char msg[ZT_ERR_MAX];
        snprintf(msg, sizeof msg, "%s", zt_errmsg());
        zt_input_digest_free(&inputs);
        zt_mpi_finalize_once();
        return zt_err("%s", msg);
    }
    if (agree_start(context_ok(o, r.world)) != 0) {
        char msg[ZT_ERR_MAX];
        snprintf(msg, sizeof msg, "%s", zt_errmsg());
        zt_input_digest_free(&inputs);
        zt_mpi_finalize_once();
        return zt_err("%s", msg);
    }
    r.inputs_json = inputs.json;  // rank 0's goes into run.json
    // One job per run directory: rank 0 holds RUN/lock until the job ends, before anything in
    // RUN is read for a decision or written (train/run_lock.h).
    zt_run_lock *lock = NULL;
    int ok = 1;
    if (r.rank == 0 && o->run_lock) ok = zt_run_lock_acquire(o->run_dir, &lock) == 0;
    else if (r.rank == 0) ok = zt_mkdirs(o->run_dir) == 0;
    r.lock = lock;
    char **candidates = NULL;
    int rc = agree_start(ok);
    if (rc == 0) rc = train_locked(&eff, &r, &candidates);
    zt_ckpt_free_paths(candidates);
    char msg[ZT_ERR_MAX];
    snprintf(msg, sizeof msg, "%s", zt_errmsg());
    zt_run_lock_release(lock);
    zt_input_digest_free(&inputs);
    zt_signals_exit_on_stop(0);
    zt_mpi_finalize_once();
    if (rc != 0) zt_err("%s", msg);
    return rc;
}
