// Checkpoint saving (train/save.h; its state: train/ckpt_state.h): the shards each save writes,
// the save policy at a step boundary, and --async-save's one save in flight: the host snapshot,
// its writer started once the copy landed, its commit at a later step boundary, its abandon.
// defines: zt_save_shards, zt_save_make_snapshot, zt_save_after_step, zt_save_maybe, zt_save_data_bad_stop,
//          zt_save_abandon, zt_save_free
#define _GNU_SOURCE
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/env.h"
#include "engine/comm_mpi.h"
#include "train/agree.h"
#include "train/run_log.h"
#include "train/save.h"

// What each save writes and each load fills: this rank's slices of every unit, and one copy of
// each shard (replica 0's under hybrid sharding; the other replicas write nothing).
void zt_save_shards(ckpt_state *ck, zt_fsdp *f) {
    const int nunits = zt_fsdp_unit_count(f);
    ck->slices = zt_xcalloc((size_t)nunits, sizeof *ck->slices);
    ck->save_slices = zt_xcalloc((size_t)nunits, sizeof *ck->save_slices);
    zt_fsdp_strategy strat;
    zt_fsdp_get_strategy(f, &strat);
    for (int u = 0; u < nunits; u++) {
        zt_fsdp_shard sh;
        zt_fsdp_get_shard(f, u, &sh);
        ck->slices[u] = (zt_ckpt_slice){sh.numel, sh.lo, sh.valid, sh.master, sh.m, sh.v};
        // One copy of each shard is written: replica 0's (hybrid sharding); the others write nothing
        ck->save_slices[u] = ck->slices[u];
        if (strat.replica > 0) ck->save_slices[u].valid = 0;
    }
    ck->shards = (zt_ckpt_shards){nunits, ck->slices};
    ck->save_shards = (zt_ckpt_shards){nunits, ck->save_slices};
}

// The node's MemAvailable in bytes (-1: unknown). Testing: ZT_DEBUG_MEM_AVAILABLE=BYTES.
static double host_mem_available(void) {
    double bytes;
    if (zt_env_f64(ZT_ENV_DEBUG_MEM_AVAILABLE, &bytes)) return bytes;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    double kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    fclose(f);
    return kib < 0 ? -1 : kib * 1024.0;
}

// --async-save: the host snapshot of this rank's shards (master, m, v), checked against the
// node's available memory first (every rank of the node holds one), then allocated and the
// writer's communicator duplicated. A refusal names the sizes.
// Under hybrid sharding the snapshot holds what this rank writes (replica 0's shards; nothing on
// the other replicas), and the replicas' checksum check runs before each snapshot.
int zt_save_make_snapshot(run_state *r) {
    if (zt_fsdp_has_snapshot(r->f)) {  // GPU engine: its page-locked host copies are the snapshot
        zt_fsdp_strategy strat;
        zt_fsdp_get_strategy(r->f, &strat);
        // the replica check reads the host copies, which the snapshot's copy fills asynchronously
        int ok = strat.replicas <= 1 ||
                 zt_err("--async-save with --shard-group %d of %d ranks (hybrid sharding) is not supported on the "
                        "cuda backend yet: run with synchronous saves, or full shard",
                        strat.shard_group, r->world) == 0;
        if (zt_train_agree_named(r, ok, "--async-save with hybrid sharding") != 0) return -1;
        ok = zt_ckpt_async_create(zt_comm_mpi_base(r->comm), zt_fsdp_layout(r->f), &r->ckpt.save_shards, 0, &r->ckpt.async) == 0;
        return zt_train_agree_named(r, ok, "--async-save snapshot") != 0 ? -1 : 0;
    }
    const int64_t bytes = zt_ckpt_snapshot_bytes(&r->ckpt.save_shards);
    zt_comm_info info;
    zt_comm_get_info(r->comm, &info);
    const int local = info.local_world > 0 ? info.local_world : 1;
    int64_t node_bytes = bytes, node_max = 0;
    if (zt_allreduce(r->comm, &bytes, &node_max, 1, ZT_DT_I64, ZT_RED_MAX, "snapshot size") != 0) return -1;
    node_bytes = node_max * local;
    const double avail = host_mem_available();
    char b1[32], b2[32], b3[32];
    int ok = 1;
    if (avail >= 0 && (double)node_bytes > avail)
        ok = zt_err("--async-save: the checkpoint snapshot needs %s of host memory per rank, %s for the %d rank%s on "
                    "this node, and the node has %s available (MemAvailable, /proc/meminfo, after the model was "
                    "built); run without --async-save, or on more nodes",
                    zt_human_bytes((double)node_max, 2, b1, sizeof b1),
                    zt_human_bytes((double)node_bytes, 2, b2, sizeof b2), local, local == 1 ? "" : "s", zt_human_bytes(avail, 2, b3, sizeof b3)) == 0;
    if (zt_train_agree_named(r, ok, "--async-save memory check") != 0) return -1;
    ok = zt_ckpt_async_create(zt_comm_mpi_base(r->comm), zt_fsdp_layout(r->f), &r->ckpt.save_shards, 1, &r->ckpt.async) == 0;
    // the writer thread copies the snapshot while the next step computes; that step's optimizer
    // update waits for the copy
    if (ok) zt_fsdp_set_update_fence(r->f, zt_ckpt_async_wait_copied, r->ckpt.async);
    return zt_train_agree_named(r, ok, "--async-save snapshot") != 0 ? -1 : 0;
}

// --async-save: the save in flight (one at most) commits once every rank's writer has
// finished, and every rank learns that at a step boundary: a one-word all-reduce on the
// training comm (MAX of 0 = done, 1 = writing, 2 = writing past --save-timeout) while one is in
// flight. block = 1 (a save point, a stop, the last step): wait for this rank's writer first,
// under the comm watchdog for what is left of --save-timeout, so a stalled writer is reported
// and the job aborted like a stuck collective (exit 3). *waited: seconds spent waiting.
// 0: committed, or still writing (block = 0); -1 + zt_err: the write or the commit failed
// (the writers' agreed error, naming the rank and the cause; the .partial is gone, latest and
// every earlier checkpoint untouched).
// The step of the save in flight (-1: none): a GPU snapshot still copying, or a writer.
static int64_t async_inflight(const run_state *r) {
    return r->ckpt.snap_step > 0 ? r->ckpt.snap_step : zt_ckpt_async_step(r->ckpt.async);
}

// GPU engine: this rank's writer starts once the snapshot's device-to-host copy has landed in
// the host copies (asked without blocking at every step boundary; block = 1 waits, watched).
// Each rank starts its own: the writers' first collective waits for the others.
static int launch_when_copied(const zt_train_opts *o, run_state *r, int block) {
    if (r->ckpt.snap_step <= 0) return 0;
    int ready;
    if (block) {
        const double prev = zt_comm_set_timeout(r->comm, fmax(0.001, r->ckpt.async_t0 + o->save_timeout - zt_now()));
        zt_comm_watch_begin(r->comm, "checkpoint snapshot: device-to-host copy (limit: --save-timeout)");
        ready = zt_fsdp_snapshot_ready(r->f, 1);
        zt_comm_watch_end(r->comm);
        zt_comm_set_timeout(r->comm, prev);
    } else {
        ready = zt_fsdp_snapshot_ready(r->f, 0);
    }
    if (ready <= 0) return ready;
    if (zt_ckpt_async_start(r->ckpt.async, o->run_dir, &r->ckpt.snap_meta, r->ckpt.settings, &r->ckpt.save_shards) != 0)
        return zt_err_prefix("step %lld: starting the background checkpoint write", (long long)r->ckpt.snap_step);
    r->ckpt.snap_step = 0;
    return 0;
}

static int async_settle(const zt_train_opts *o, run_state *r, int64_t step, int block, double *waited) {
    *waited = 0;
    if (launch_when_copied(o, r, block) < 0) return -1;
    const int64_t ck = async_inflight(r);
    if (ck < 0) return 0;
    const double deadline = r->ckpt.async_t0 + o->save_timeout;
    if (!block) {
        int64_t state = r->ckpt.snap_step <= 0 && zt_ckpt_async_done(r->ckpt.async) ? 0 : zt_now() > deadline ? 2 : 1;
        if (zt_allreduce(r->comm, &state, &state, 1, ZT_DT_I64, ZT_RED_MAX, "checkpoint writer state") != 0) return -1;
        if (state == 1) return 0;
        // 2: some rank's writer is past --save-timeout; every rank waits under the watchdog
        if (launch_when_copied(o, r, 1) < 0) return -1;
    }
    const double tw = zt_now();
    if (!zt_ckpt_async_done(r->ckpt.async)) {
        char label[96];
        snprintf(label, sizeof label, "background checkpoint write of step %lld (limit: --save-timeout)", (long long)ck);
        const double prev = zt_comm_set_timeout(r->comm, fmax(0.001, deadline - zt_now()));
        zt_comm_watch_begin(r->comm, label);
        zt_ckpt_async_join(r->ckpt.async);
        zt_comm_watch_end(r->comm);
        zt_comm_set_timeout(r->comm, prev);
    }
    *waited = zt_now() - tw;
    const double write_s = zt_ckpt_async_write_seconds(r->ckpt.async);
    // rank 0 renames and moves latest; every rank agrees (today's commit, under the same watch)
    const double prev = zt_comm_set_timeout(r->comm, fmax(o->save_timeout, r->copts.timeout_s));
    zt_comm_watch_begin(r->comm, "checkpoint commit (rename, latest; limit: --save-timeout)");
    const int rc = zt_ckpt_async_commit(r->ckpt.async, zt_comm_mpi_base(r->comm), o->keep_last, r->ckpt.ckpt_path, sizeof r->ckpt.ckpt_path);
    zt_comm_watch_end(r->comm);
    zt_comm_set_timeout(r->comm, prev);
    if (rc != 0)
        return zt_err_prefix("step %lld: the checkpoint written in the background (found failed at step %lld)",
                             (long long)ck, (long long)step);
    r->ckpt.saved_step = ck;
    r->ckpt.t_durable = r->ckpt.async_t0;  // the state of step ck is safe since its snapshot
    zt_runlog_ckpt(&r->sinks, r->rank, step, "commit", ck, NAN, *waited, NAN, write_s);
    if (r->rank == 0) {
        zt_runlog_clear_progress();
        printf("checkpoint: step %lld -> %s (written in the background in %.2f s, committed after step %lld)\n",
               (long long)ck, r->ckpt.ckpt_path, write_s, (long long)step);
        if (*waited > 0.0005) printf("checkpoint: waited %.2f s for the write of step %lld\n", *waited, (long long)ck);
        fflush(stdout);
    }
    return 0;
}

// --async-save at a save point (not the last step's, not a stop's): the snapshot of `step`,
// its writer started (GPU engine: once the device-to-host copy has landed), training goes on.
// ts: when the save point began (training is blocked from there); waited: of it, for the previous write.
static int start_background_save(const zt_train_opts *o, run_state *r, const zt_ckpt_meta *meta, int64_t step,
                                 double ts, double waited) {
    const double tsnap = zt_now();
    int ok;
    if (zt_fsdp_has_snapshot(r->f)) {  // GPU engine: the copy is queued; the writer starts once it landed
        r->ckpt.snap_meta = *meta;
        ok = zt_fsdp_snapshot_begin(r->f) == 0;
        if (ok) r->ckpt.snap_step = step;
    } else {  // hybrid sharding: the replicas agree that they hold replica 0's bytes first
        ok = zt_fsdp_check_replicas(r->f) == 0 &&
             zt_ckpt_async_start(r->ckpt.async, o->run_dir, meta, r->ckpt.settings, &r->ckpt.save_shards) == 0;
    }
    if (zt_train_agree(r->comm, ok, "starting the background checkpoint write") != 0)
        return zt_err_prefix("step %lld", (long long)step);
    r->ckpt.async_t0 = zt_now();
    const double snap_s = r->ckpt.async_t0 - tsnap, blocked = r->ckpt.async_t0 - ts;
    const int dev = zt_fsdp_has_snapshot(r->f);
    if (!dev) r->ckpt.copy_step = step;
    zt_runlog_ckpt(&r->sinks, r->rank, step, "snapshot", step, blocked, waited, dev ? snap_s : NAN, NAN);
    if (r->rank == 0) {
        zt_runlog_clear_progress();
        printf("checkpoint: step %lld snapshot %s %.3f s (training blocked %.3f s%s), writing in the background\n",
               (long long)step,
               dev ? "(device-to-host on its own stream) queued in"
                   : "copied by the writer thread while the next step computes (its update waits for it); started in",
               snap_s, blocked, waited > 0.0005 ? ", of it waiting for the previous write" : "");
        fflush(stdout);
    }
    return 0;
}

// The checkpoint policy after `step` steps: at each epoch end (behind a barrier every rank
// reaches), every --save-every steps, at the last step, and when a stop was requested.
// --async-save: a save point first waits for (and commits) a save still in flight, then takes
// the snapshot and lets training go on; the last step's and a stop's save wait for it and
// then save synchronously as without the flag (the job ends with everything committed).
int zt_save_maybe(const zt_train_opts *o, run_state *r, int64_t step, int last, int stop) {
    if (step == r->ckpt.saved_step) return 0;  // committed already (a stop right after a save point)
    double waited = 0;
    // a stop for the step whose save is in flight (a data error after a save point): commit it
    if (r->ckpt.async && async_inflight(r) == step) return async_settle(o, r, step, 1, &waited);
    const int epoch_end = step % r->data.steps_per_epoch == 0;
    if (epoch_end) {
        zt_comm_set_context(r->comm, step, r->data.epoch, -1);  // steps completed so far
        if (zt_barrier(r->comm, "epoch-end save") != 0) return -1;
    }
    if (!(epoch_end || last || stop || (o->save_every > 0 && step % o->save_every == 0))) return 0;
    // The run directory still this job's before it commits anything to it: RUN/lock removed
    // where RUN itself cannot be locked would let a second job in (train/run_lock.h).
    const int lock_rc = zt_train_agree_named(r, r->rank != 0 || zt_run_lock_verify(r->lock) == 0,
                                             "checking the run directory's lock");
    if (lock_rc != 0) return lock_rc < 0 ? -1 : zt_err_prefix("step %lld: checkpoint refused", (long long)step);
    const double ts = zt_now();
    // Deadline-guarded: a rank that is not here is reported instead of hanging in HDF5's own barrier.
    if (!epoch_end && zt_barrier(r->comm, "checkpoint save") != 0) return -1;
    zt_ckpt_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.step = step;
    meta.epoch = step / r->data.steps_per_epoch;
    meta.epoch_step = step % r->data.steps_per_epoch;
    meta.epoch_blocks = meta.epoch_step * (r->data.ds.per_rank ? r->data.per_rank_step : r->data.global_step_blocks);
    meta.tokens_seen = r->progress.tokens_seen;
    meta.seed = o->seed;
    meta.world_size = r->world;
    snprintf(meta.run_id, sizeof meta.run_id, "%s", r->run_id);
    meta.lr_last = r->progress.lr_last;
    meta.final = last;
    // at most one save in flight: this save point waits for the previous write (and says so)
    if (r->ckpt.async && async_settle(o, r, step, 1, &waited) != 0) return -1;
    if (r->ckpt.async && !last && !stop) return start_background_save(o, r, &meta, step, ts, waited);
    if (zt_fsdp_to_host(r->f) != 0) return -1;  // GPU engine: device state to the host copies
    // Hybrid sharding: the replicas that do not write agree that they hold replica 0's bytes.
    if (zt_fsdp_check_replicas(r->f) != 0) return zt_err_prefix("step %lld: checkpoint refused", (long long)step);
    // HDF5 runs its own MPI barriers inside the collective write; the comm watchdog
    // gives them a deadline (--save-timeout) and the usual report instead of a silent hang.
    const double prev_timeout = zt_comm_set_timeout(r->comm, fmax(o->save_timeout, r->copts.timeout_s));
    zt_comm_watch_begin(r->comm, "checkpoint save (HDF5 collective write; limit: --save-timeout)");
    const int save_rc = zt_ckpt_save(zt_comm_mpi_base(r->comm), o->run_dir, &meta, zt_fsdp_layout(r->f), r->ckpt.settings, &r->ckpt.save_shards,
                                     o->keep_last, r->ckpt.ckpt_path, sizeof r->ckpt.ckpt_path);
    zt_comm_watch_end(r->comm);
    zt_comm_set_timeout(r->comm, prev_timeout);
    if (save_rc != 0) return zt_err_prefix("step %lld", (long long)step);
    r->ckpt.saved_step = step;
    r->ckpt.t_durable = zt_now();
    if (r->ckpt.async) zt_runlog_ckpt(&r->sinks, r->rank, step, "sync", step, r->ckpt.t_durable - ts, waited, NAN, NAN);
    if (r->rank == 0) {
        zt_runlog_clear_progress();
        printf("checkpoint: step %lld -> %s (%.2f s)\n", (long long)step, r->ckpt.ckpt_path, r->ckpt.t_durable - ts);
    }
    return 0;
}

// The input changed under the job after `step` good steps: every rank checkpoints that step
// (unless nothing was trained since the run started or it is saved already), then fails with
// the data error (kept first; a failing save is appended).
int zt_save_data_bad_stop(const zt_train_opts *o, run_state *r, int64_t step) {
    char why[ZT_ERR_MAX];
    snprintf(why, sizeof why, "%s", zt_errmsg());
    if (r->progress.steps_run == 0 || step == r->ckpt.saved_step)
        return zt_err("%.3000s; nothing trained since the last checkpoint (step %lld)", why, (long long)step);
    if (zt_save_maybe(o, r, step, 0, 1) != 0) {
        char save[ZT_ERR_MAX];
        snprintf(save, sizeof save, "%s", zt_errmsg());
        return zt_err("%.2000s; and the checkpoint of step %lld failed: %.1500s", why, (long long)step, save);
    }
    return zt_err("%.3000s; the checkpoint of step %lld, the last good step, is committed (%s): restore the file "
                  "and continue with --resume (or pack the data anew and add --allow-new-data)",
                  why, (long long)step, r->ckpt.ckpt_path);
}

// After a step's record: --async-save, CPU engine: the snapshot copy is complete (this step's
// update waited for it); then a write in flight that every rank has finished commits here.
int zt_save_after_step(const zt_train_opts *o, run_state *r, int64_t step, const zt_fsdp_stats *s) {
    double copy_s;
    if (r->ckpt.copy_step > 0 && zt_ckpt_async_copied(r->ckpt.async, &copy_s)) {
        zt_runlog_ckpt(&r->sinks, r->rank, step + 1, "copied", r->ckpt.copy_step, s->t_update_fence, NAN, copy_s, NAN);
        r->ckpt.copy_step = 0;
    }
    double waited;
    if (r->ckpt.async && async_settle(o, r, step + 1, 0, &waited) != 0) return -1;
    return 0;
}

void zt_save_abandon(const zt_train_opts *o, run_state *r) {
    if (!r->ckpt.async || async_inflight(r) < 0) return;
    // The run failed with a write in flight: wait for it (watched, --save-timeout) and drop it
    // uncommitted; its .partial is cleared by the next save. The last committed checkpoint
    // and latest stay as they are.
    char keep[ZT_ERR_MAX];
    snprintf(keep, sizeof keep, "%s", zt_errmsg());
    zt_comm_set_timeout(r->comm, fmax(0.001, r->ckpt.async_t0 + o->save_timeout - zt_now()));
    zt_comm_watch_begin(r->comm, "background checkpoint write (run failing; limit: --save-timeout)");
    if (r->ckpt.snap_step > 0 && zt_fsdp_snapshot_ready(r->f, 1) == 1 &&  // every rank's writer must take part
        zt_ckpt_async_start(r->ckpt.async, o->run_dir, &r->ckpt.snap_meta, r->ckpt.settings, &r->ckpt.save_shards) == 0)
        r->ckpt.snap_step = 0;
    zt_ckpt_async_abandon(r->ckpt.async);
    zt_comm_watch_end(r->comm);
    zt_err("%s", keep);
}

void zt_save_free(ckpt_state *ck) {
    free(ck->settings);
    free(ck->schedule_before);
    // a write still in flight is waited for and dropped, never committed; first, as its writer may
    // still be copying the shards that save_slices describes
    zt_ckpt_async_destroy(ck->async);
    ck->async = NULL;
    free(ck->slices);
    free(ck->save_slices);
    ck->settings = ck->schedule_before = NULL;
    ck->slices = ck->save_slices = NULL;
}
