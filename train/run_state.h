// One run's state, shared by the trainer's files: session.c (the job: MPI, the lock, the
// first error) over train.c (the phases and the loop) over run_log.c (every output, from one
// metrics record) and resume.c (what a resume must match, --resume auto's fallback), with
// agree.c and signals.c below them all. Not for other layers.
// defines: run_state, block_ref
#ifndef ZT_TRAIN_RUN_STATE_H
#define ZT_TRAIN_RUN_STATE_H
#include <stdint.h>
#include <stdio.h>

#include "checkpoint/ckpt.h"
#include "data/dataset.h"
#include "engine/comm.h"
#include "engine/mesh.h"
#include "engine/fsdp.h"
#include "model/qwen3.h"
#include "train/line_file.h"
#include "train/liveness.h"
#include "train/power.h"
#include "train/run_lock.h"
#include "train/tboard.h"
#include "train/train.h"

typedef struct { int file; int64_t block; } block_ref;

// Where the peak FLOP/s MFU is measured against comes from (train/device_info.c).
typedef enum { ZT_PEAK_UNKNOWN = 0, ZT_PEAK_PRESET, ZT_PEAK_GIVEN, ZT_PEAK_CPU_PROBE } zt_peak_kind;

// All state of one run, so that cleanup is one function.
typedef struct {
    zt_mesh *mesh;            // the process groups (engine/mesh.h), built once by the session; owns the comms
    zt_comm *comm;            // MPI: the mesh's world group (evenfix, agreement, the CPU engine)
    zt_comm *dcomm;           // NCCL: the mesh's device world, the GPU engine's collectives (cuda only)
    zt_comm_opts copts;
    int cuda;                 // the GPU engine runs this job
    int rank, world;
    zt_dataset ds;
    int ds_open;
    zt_dataset eds;           // --eval-data
    int eds_open;
    int isolated;             // packed documents kept apart (--doc-attention)
    zt_fsdp *f;               // the engine (opaque: engine/fsdp.h)
    int data_changed;         // resumed with --allow-new-data on files other than the checkpoint's
    char *schedule_before;    // resumed with --allow-new-schedule on another schedule: the checkpoint's
                              // (JSON: total_steps, lr, ... that differ), else NULL
    block_ref *order;
    const uint32_t **blocks;
    zt_line_file *metrics;    // rank 0: RUN/metrics.jsonl (whole lines; lost records counted)
    zt_line_file *rank_metrics;  // every rank: its own times and bytes per step
    zt_tb *tb;                // rank 0: RUN/tb (the run's curves)
    zt_tb *tb_rank;           // every rank: RUN/tb/ranks/rank-N (its own)
    FILE *trace;
    zt_liveness *alive;
    zt_power_sampler *power;
    char run_id[64];
    int64_t step;             // optimizer steps completed

    // what this run is: filled by the phases before the loop
    double t_start;
    int threads;
    zt_model_config cfg;
    char backend[192];
    int64_t per_rank_step;    // micro-batch x grad-accum blocks per rank and step
    int64_t global_step_blocks;
    int64_t steps_per_epoch;  // after evenfix
    int64_t total_steps;
    zt_hparams hp;
    char *settings;           // train_settings_json: what a resume must match
    zt_ckpt_slice *slices;    // this rank's slices of every unit (checkpoint save and load)
    zt_ckpt_shards shards;
    zt_ckpt_slice *save_slices;  // what this rank writes: its slices, or none on a replica > 0 (hybrid sharding)
    zt_ckpt_shards save_shards;
    char ckpt_path[4200];     // the checkpoint resumed from, then the last one saved
    int64_t start_step;

    // the loop's running totals
    int64_t epoch, steps_run, tokens_seen;
    double t_loop, t_durable;  // t_durable: when the last checkpoint committed (GPU-hours at risk)
    double loss_first, loss_last, lr_last, t_wait_total, t_compute_total;
    int progress_tty;          // rank 0 on a terminal: a progress line rewritten in place
    int64_t saved_step;        // the step of the last checkpoint this job committed (-1: none)
    zt_ckpt_async *async;      // --async-save: the host snapshot and its writer (NULL: synchronous saves)
    double async_t0;           // when the save in flight was started (its --save-timeout runs from here)
    int64_t snap_step;         // GPU engine: a snapshot copy of this step is queued, its writer not yet
                               // started (0: none)
    zt_ckpt_meta snap_meta;    // that save's training state
    int64_t copy_step;         // CPU engine: the writer is copying this step's snapshot; its "copied"
                               // event is not yet logged (0: none)
    uint32_t *batch;           // this rank's blocks of the step, copied out of the mapped files
    int eval_signalled;        // --debug-signal-in-eval done
    int eval_stopped;          // ranks whose stop request ended the last evaluation

    zt_run_lock *lock;         // rank 0: RUN/lock, held for the job's life
    char **resume_candidates;  // --resume auto: the checkpoints to try in order (NULL-terminated)

    // what the run ran on and the FLOPs of each step (MFU; train/device_info.c, model/flops.h)
    char device_name[160];     // the GPU (CUDA runtime's name) or the CPU (/proc/cpuinfo)
    double peak_flops;         // dense peak per rank (NAN: unknown): rank 0's is the run's
    zt_peak_kind peak_kind;
    char peak_source[400];
    double flops_rank;         // model FLOPs of this rank's blocks in the last step
    double flops_all;          // rank 0: of every rank's blocks (NAN: unknown)
    double hw_extra_rank, hw_extra_all;  // what --recompute adds (0 without it)
    double flops_sum, hw_extra_sum, t_step_sum;  // over the steps of this job (rank 0: every rank's)
    uint32_t *fl_words, *fl_ids;  // one block's words and ids, and its document positions
    int32_t *fl_tg, *fl_pos;
    block_ref **peer_order;    // rank 0, per-rank layout with isolated documents: every rank's epoch order
    int64_t *peer_n;
    int64_t peer_epoch;
} run_state;
#endif
