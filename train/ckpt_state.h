// What the run saves and what it resumed from (train/save.c, train/resume.c): the shards every
// checkpoint writes, the settings it records, the last committed one, and --async-save's one
// save in flight (its host snapshot, writer and the step it holds).
// defines: ckpt_state
#ifndef ZT_TRAIN_CKPT_STATE_H
#define ZT_TRAIN_CKPT_STATE_H
#include <stdint.h>

#include "checkpoint/ckpt.h"

typedef struct {
    char *settings;            // train_settings_json: what a resume must match
    zt_ckpt_slice *slices;     // this rank's slices of every unit (checkpoint save and load)
    zt_ckpt_shards shards;
    zt_ckpt_slice *save_slices;  // what this rank writes: its slices, or none on a replica > 0 (hybrid sharding)
    zt_ckpt_shards save_shards;
    char ckpt_path[4200];      // the checkpoint resumed from, then the last one saved
    int64_t saved_step;        // the step of the last checkpoint this job committed (-1: none)
    double t_durable;          // when the last checkpoint committed (GPU-hours at risk)

    // --async-save
    zt_ckpt_async *async;      // the host snapshot and its writer (NULL: synchronous saves)
    double async_t0;           // when the save in flight was started (its --save-timeout runs from here)
    int64_t snap_step;         // GPU engine: a snapshot copy of this step is queued, its writer not yet
                               // started (0: none)
    zt_ckpt_meta snap_meta;    // that save's training state
    int64_t copy_step;         // CPU engine: the writer is copying this step's snapshot; its "copied"
                               // event is not yet logged (0: none)

    // what resuming found
    char **resume_candidates;  // --resume auto: the checkpoints to try in order (NULL-terminated)
    int data_changed;          // resumed with --allow-new-data on files other than the checkpoint's
    char *schedule_before;     // resumed with --allow-new-schedule on another schedule: the checkpoint's
                               // (JSON: total_steps, lr, ... that differ), else NULL
} ckpt_state;
#endif
