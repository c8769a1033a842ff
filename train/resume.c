// Resuming (train/resume.h): the settings a checkpoint records and a resume must match,
// loading one checkpoint after checking it against this run, and --resume auto's walk past
// checkpoints whose data does not load.
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
#include "engine/comm_mpi.h"
#include "train/agree.h"
#include "train/resume.h"

// Settings a resumed run must share with the checkpoint for an exact continuation
// (the world size may change; the global batch, data and schedule may not).
char *zt_resume_settings_json(const zt_train_opts *o, const zt_dataset *ds, int isolated, int64_t global_batch_blocks,
                              int64_t total_steps) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "global_batch_blocks", (double)global_batch_blocks);
    cJSON_AddNumberToObject(t, "seq_len", ds->seq_len);
    cJSON_AddNumberToObject(t, "dataset_blocks", (double)ds->total_blocks);
    // The dataset's identity: every file's name, blocks and crc32c (from dataset.json).
    cJSON *files = cJSON_AddArrayToObject(t, "dataset_files");
    for (int i = 0; i < ds->nfiles; i++) {
        char f[400];
        snprintf(f, sizeof f, "%s %lld blocks crc32c %08x", ds->files[i].name, (long long)ds->files[i].blocks,
                 ds->files[i].crc32c);
        cJSON_AddItemToArray(files, cJSON_CreateString(f));
    }
    cJSON_AddStringToObject(t, "layout", ds->per_rank ? "per-rank" : "single");
    // supervised data (version 2): the attention decides what the loss means, so a resume keeps it
    if (ds->token_flags) cJSON_AddStringToObject(t, "doc_attention", isolated ? "isolated" : "full");
    // The flags a resume must match come from the flag table (o->flag_settings, in its order:
    // evenfix, seed, lr, ...); total_steps, derived from --steps/--epochs, follows the seed.
    cJSON *flags = o->flag_settings ? cJSON_Parse(o->flag_settings) : NULL;
    while (flags && flags->child) {
        cJSON *it = cJSON_DetachItemViaPointer(flags, flags->child);
        char key[64];
        snprintf(key, sizeof key, "%s", it->string);
        cJSON_AddItemToObject(t, key, it);
        const int after = !strcmp(key, "seed");
        if (after) cJSON_AddNumberToObject(t, "total_steps", (double)total_steps);
    }
    cJSON_Delete(flags);
    if (!cJSON_GetObjectItemCaseSensitive(t, "total_steps")) cJSON_AddNumberToObject(t, "total_steps", (double)total_steps);
    char *text = cJSON_PrintUnformatted(t);
    cJSON_Delete(t);
    return text;
}

// The settings that make the length and the learning-rate schedule: what --allow-new-schedule
// lets a resume change (Megatron's --override-opt_param-scheduler does the same).
static const char *const schedule_keys[] = {"total_steps", "lr", "min_lr_ratio", "warmup", "schedule", NULL};

// The schedule settings whose values differ between two settings JSONs, as a JSON object of
// the first one's values (NULL when none differ).
static char *schedule_diff(const char *saved, const char *now) {
    cJSON *a = cJSON_Parse(saved), *b = cJSON_Parse(now), *out = cJSON_CreateObject();
    int n = 0;
    for (int i = 0; schedule_keys[i]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, schedule_keys[i]);
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, schedule_keys[i]);
        if (x && y && !cJSON_Compare(x, y, 1)) {
            cJSON_AddItemToObject(out, schedule_keys[i], cJSON_Duplicate(x, 1));
            n++;
        }
    }
    char *text = n ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(out);
    return text;
}

// --resume: this rank's slices of the canonical vectors, at any world size, after the
// checkpoint's model config, settings and data cursor are checked against this run.
// *load_failed = 1 (on every rank alike) when the checkpoint itself does not read: its
// ckpt.h5 truncated, empty, zeroed or otherwise not HDF5 on some rank, or its data failing a
// checksum: --resume auto then tries the next candidate. A mismatch with this run, or ranks
// that resolved different checkpoints, is not that (an older checkpoint would not fit either,
// and nothing is known to be damaged): *load_failed = 0.
static int resume_one(const zt_train_opts *o, run_state *r, const char *from, int *load_failed) {
    const zt_dataset *ds = &r->data.ds;
    const double t0 = zt_now();
    *load_failed = 0;
    int ok = zt_ckpt_resolve(strcmp(from, "latest") ? from : o->run_dir, r->ckpt.ckpt_path,
                             sizeof r->ckpt.ckpt_path) == 0;
    const char *ckpt_path = r->ckpt.ckpt_path;
    zt_ckpt_meta meta;
    zt_model_config saved_cfg;
    char *saved = NULL, diff[1024];
    if (ok) ok = zt_ckpt_open_meta(ckpt_path, &meta, &saved_cfg, &saved) == 0;
    int64_t unreadable = !ok;  // it does not resolve or its header does not read (before any comparison)
    if (ok && zt_ckpt_config_diff(&saved_cfg, &r->cfg, diff, sizeof diff) > 0)
        ok = zt_err("--resume %s: the model config differs from the checkpoint's: %s", ckpt_path, diff) == 0;
    // The dataset's identity (dataset_files, dataset_blocks) is compared like any other
    // setting, with its own way out; a checkpoint written before dataset_files existed
    // has none to compare.
    int has_files = 0, data_differs = 0;
    if (ok && saved && *saved) {
        cJSON *sj = cJSON_Parse(saved), *nj = cJSON_Parse(r->ckpt.settings);
        has_files = cJSON_GetObjectItemCaseSensitive(sj, "dataset_files") != NULL;
        for (int k = 0; k < 2 && has_files; k++) {
            const char *key = k ? "dataset_blocks" : "dataset_files";
            data_differs |= !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(sj, key),
                                           cJSON_GetObjectItemCaseSensitive(nj, key), 1);
        }
        cJSON_Delete(sj);
        cJSON_Delete(nj);
        const char *may_differ[8] = {NULL};
        int nd = 0;
        if (!has_files || o->allow_new_data) may_differ[nd++] = "dataset_files";
        if (o->allow_new_data) may_differ[nd++] = "dataset_blocks";
        for (int i = 0; o->allow_new_schedule && schedule_keys[i]; i++) may_differ[nd++] = schedule_keys[i];
        char *sched_before = schedule_diff(saved, r->ckpt.settings);
        ok = zt_ckpt_check_train_json(saved, r->ckpt.settings, may_differ) == 0;
        if (!ok && (data_differs || sched_before)) {
            char why[ZT_ERR_MAX];
            snprintf(why, sizeof why, "%s", zt_errmsg());
            zt_err("%.1500s (%s%s%s)", why,
                   data_differs ? "this run's dataset is not the one the checkpoint trained on; pass --allow-new-data "
                                  "to continue on it anyway" : "",
                   data_differs && sched_before && !o->allow_new_schedule ? "; " : "",
                   sched_before && !o->allow_new_schedule
                       ? "to continue this run for another number of steps or with another learning-rate schedule, "
                         "pass --allow-new-schedule: the schedule is then recomputed over the new total steps and the "
                         "steps already taken keep their numbers" : "");
        }
        if (!ok) zt_err_prefix("--resume %s", ckpt_path);
        r->ckpt.data_changed = ok && data_differs;
        free(r->ckpt.schedule_before);
        r->ckpt.schedule_before = ok ? sched_before : NULL;
        if (!ok) free(sched_before);
    }
    free(saved);
    if (ok && ds->per_rank && meta.world_size != r->world)
        ok = zt_err("--resume %s: saved by %d ranks on a per-rank dataset; it can only continue on %d ranks",
                    ckpt_path, meta.world_size, meta.world_size) == 0;
    const int64_t spe = r->data.steps_per_epoch;
    if (ok && (meta.epoch != meta.step / spe || meta.epoch_step != meta.step % spe))
        ok = zt_err("--resume %s: its data cursor (epoch %lld, step %lld of the epoch) does not match %lld steps "
                    "per epoch of this run", ckpt_path, (long long)meta.epoch, (long long)meta.epoch_step,
                    (long long)r->data.steps_per_epoch) == 0;
    // A run cannot end before the steps it has taken (--allow-new-schedule lets --steps change, not
    // go back): it would record the run complete at that earlier step over a later checkpoint.
    if (ok && meta.step > r->total_steps)
        ok = zt_err("--resume %s: the checkpoint is at step %lld, past this run's %lld total steps (--steps/--epochs): "
                    "a run cannot end before the steps it has already taken; give --steps %lld or more (to continue "
                    "it, with --allow-new-schedule), or resume an earlier checkpoint",
                    ckpt_path, (long long)meta.step, (long long)r->total_steps, (long long)meta.step) == 0;
    // Every rank learns the lowest failing rank's reason, and whether any rank could not read it.
    const int agreed = zt_train_agree_named(r, ok, "reading the checkpoint to resume");
    if (agreed < 0) return -1;
    if (agreed > 0) {
        if (zt_allreduce(r->comm, &unreadable, &unreadable, 1, ZT_DT_I64, ZT_RED_MAX, "checkpoint readable?") != 0)
            return -1;
        *load_failed = unreadable != 0;
        return -1;
    }
    // Collective: refuses ranks that resolved different checkpoints (not a damaged one), a model
    // config that differs (naming the fields) and bad checksums.
    zt_comm_watch_begin(r->comm, "checkpoint load (HDF5 collective read)");  // first-step deadline applies
    const int load_rc = zt_ckpt_load(zt_comm_mpi_base(r->comm), ckpt_path, zt_fsdp_layout(r->f), &meta, &r->ckpt.shards);
    zt_comm_watch_end(r->comm);
    if (load_rc != 0) {
        *load_failed = load_rc != ZT_CKPT_LOAD_DIFFERENT;
        return zt_err_prefix("--resume");
    }
    r->progress.start_step = meta.step;
    r->progress.tokens_seen = meta.tokens_seen;
    snprintf(r->run_id, sizeof r->run_id, "%s", meta.run_id);  // one logical run across restarts
    zt_fsdp_set_step(r->f, meta.step);  // Adam's bias-correction step and the LR schedule continue
    r->progress.step = meta.step;
    if (r->rank == 0)
        printf("resume: %s: step %lld (epoch %lld, %lld steps into it), saved by %d rank%s, loaded by %d (%.2f s)\n",
               ckpt_path, (long long)meta.step, (long long)meta.epoch, (long long)meta.epoch_step, meta.world_size,
               meta.world_size == 1 ? "" : "s", r->world, zt_now() - t0);
    if (r->ckpt.schedule_before && r->rank == 0) {
        // Only the rate differs from what the old schedule would have given: Adam's state and
        // step count, the data order and the step numbers all continue.
        zt_hparams old = r->hp;
        cJSON *b = cJSON_Parse(r->ckpt.schedule_before);
        const cJSON *v;
        if ((v = cJSON_GetObjectItemCaseSensitive(b, "total_steps")) && cJSON_IsNumber(v)) old.total_steps = (int64_t)v->valuedouble;
        if ((v = cJSON_GetObjectItemCaseSensitive(b, "lr")) && cJSON_IsNumber(v)) old.lr = v->valuedouble;
        if ((v = cJSON_GetObjectItemCaseSensitive(b, "min_lr_ratio")) && cJSON_IsNumber(v)) old.min_lr_ratio = v->valuedouble;
        if ((v = cJSON_GetObjectItemCaseSensitive(b, "warmup")) && cJSON_IsNumber(v)) old.warmup = (int64_t)v->valuedouble;
        if ((v = cJSON_GetObjectItemCaseSensitive(b, "schedule")) && cJSON_IsString(v))
            old.schedule = !strcmp(v->valuestring, "constant") ? ZT_SCHED_CONSTANT : ZT_SCHED_COSINE;
        cJSON_Delete(b);
        const int64_t k = r->progress.start_step;
        char was[64] = "the old schedule ended there";
        if (k < old.total_steps) snprintf(was, sizeof was, "the old one would have given %.6g", zt_lr_at(&old, k));
        printf("resume: --allow-new-schedule: the checkpoint's schedule %s becomes %lld steps in all; steps 1-%lld "
               "keep their numbers and step %lld continues on the new schedule at learning rate %.6g (%s)\n",
               r->ckpt.schedule_before, (long long)r->total_steps, (long long)k, (long long)k + 1, zt_lr_at(&r->hp, k),
               was);
    }
    if (r->progress.start_step >= r->total_steps && r->rank == 0)
        printf("resume: the checkpoint is already at step %lld of %lld; nothing to train (to train on, give a larger "
               "--steps with --allow-new-schedule)\n",
               (long long)r->progress.start_step, (long long)r->total_steps);
    return 0;
}

// --resume: one checkpoint; --resume auto: its candidates in order, past any that does not
// read (a truncated, empty or zeroed ckpt.h5, a checksum), naming each skipped and why. The
// load is collective and agreed, so every rank moves to its next candidate together; a rank
// out of candidates ends the walk on every rank.
int zt_resume_from_checkpoint(const zt_train_opts *o, run_state *r) {
    char **cand = r->ckpt.resume_candidates;
    const int is_auto = cand && cand[0] && o->resume == cand[0];
    if (!is_auto) {
        int load_failed;
        return resume_one(o, r, o->resume, &load_failed);
    }
    char skipped[4096] = "";
    int nskipped = 0;
    for (int i = 0;; i++) {
        int64_t have = cand[i] != NULL;
        if (zt_allreduce(r->comm, &have, &have, 1, ZT_DT_I64, ZT_RED_MIN, "--resume auto: next candidate") != 0)
            return -1;
        if (!have) break;
        int load_failed;
        if (resume_one(o, r, cand[i], &load_failed) == 0) {
            if (skipped[0] && r->rank == 0)
                fprintf(stderr, "zerotrain: warning: --resume auto: skipped %d checkpoint%s: %s; resumed from %s "
                                "instead\n",
                        nskipped, nskipped == 1 ? "" : "s", skipped, r->ckpt.ckpt_path);
            return 0;
        }
        // a mismatch of config or settings (an older checkpoint would not fit either), or ranks that
        // resolved different checkpoints (none is damaged): not a reason to fall back
        if (!load_failed) return -1;
        const size_t n = strlen(skipped);
        snprintf(skipped + n, sizeof skipped - n, "%s%s: %.1200s", n ? "; " : "", cand[i], zt_errmsg());
        nskipped++;
        if (r->rank == 0)
            fprintf(stderr, "zerotrain: warning: --resume auto: %s does not load (%.1500s)%s\n", cand[i], zt_errmsg(),
                    cand[i + 1] ? "; trying the next newest checkpoint" : "");
    }
    return zt_err("--resume auto: no checkpoint of %s/checkpoints loads: %.3000s; refusing to start over them: name "
                  "one with --resume PATH, or pass --overwrite to discard them",
                  o->run_dir, skipped);
}
