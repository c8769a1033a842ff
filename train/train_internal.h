// The trainer's shared state and what its files call across: train.c (the phases and the
// loop), run_log.c (every output of a run, from one metrics record), resume.c (what a resume
// must match, and --resume auto's fallback), session.c (MPI, stop signals, the run
// directory's lock). Not for other layers.
// defines: run_state, block_ref, zt_train_agree, zt_train_agree_named, zt_train_body, zt_train_cleanup,
//          zt_session_stop_signal, zt_session_stop_exits, zt_runlog_*, zt_resume_*
#ifndef ZT_TRAIN_INTERNAL_H
#define ZT_TRAIN_INTERNAL_H
#include <stdint.h>
#include <stdio.h>

#include "checkpoint/ckpt.h"
#include "data/dataset.h"
#include "engine/comm.h"
#include "engine/fsdp.h"
#include "model/qwen3.h"
#include "train/liveness.h"
#include "train/run_lock.h"
#include "train/tboard.h"
#include "train/train.h"

typedef struct { int file; int64_t block; } block_ref;

// All state of one run, so that cleanup is one function.
typedef struct {
    zt_comm *comm;            // MPI: host collectives (evenfix, agreement, the CPU engine)
    zt_comm *dcomm;           // NCCL: the GPU engine's collectives on device buffers (cuda only)
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
    block_ref *order;
    const uint32_t **blocks;
    FILE *metrics;
    FILE *rank_metrics;       // every rank: its own times and bytes per step
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
    zt_qwen3_config cfg;
    char backend[192];
    int64_t per_rank_step;    // micro-batch x grad-accum blocks per rank and step
    int64_t global_step_blocks;
    int64_t steps_per_epoch;  // after evenfix
    int64_t total_steps;
    zt_hparams hp;
    char *settings;           // train_settings_json: what a resume must match
    zt_ckpt_slice *slices;    // this rank's slices of every unit (checkpoint save and load)
    zt_ckpt_shards shards;
    char ckpt_path[4200];     // the checkpoint resumed from, then the last one saved
    int64_t start_step;

    // the loop's running totals
    int64_t epoch, steps_run, tokens_seen;
    double t_loop, t_durable;  // t_durable: when the last checkpoint committed (GPU-hours at risk)
    double loss_first, loss_last, lr_last, t_wait_total, t_compute_total;
    int progress_tty;          // rank 0 on a terminal: a progress line rewritten in place
    int64_t saved_step;        // the step of the last checkpoint this job committed (-1: none)
    uint32_t *batch;           // this rank's blocks of the step, copied out of the mapped files
    int eval_signalled;        // --debug-signal-in-eval done
    int eval_stopped;          // ranks whose stop request ended the last evaluation

    zt_run_lock *lock;         // rank 0: RUN/lock, held for the job's life
    char **resume_candidates;  // --resume auto: the checkpoints to try in order (NULL-terminated)
} run_state;

// ---- train.c ----
// Every rank contributes whether its last phase succeeded; all learn whether all did.
int zt_train_agree(zt_comm *c, int ok, const char *phase);
// The same, every rank ending up with the lowest failing rank's message. 0: all ok; 1: some
// rank failed (zt_err says why); -1: the collective failed.
int zt_train_agree_named(run_state *r, int ok, const char *phase);
int zt_train_body(const zt_train_opts *o, run_state *r);  // the phases, then the loop
void zt_train_cleanup(run_state *r);

// ---- session.c ----
int zt_session_stop_signal(void);       // the stop signal that arrived (0: none)
void zt_session_stop_exits(int on);     // 1: a stop signal ends the process at once (outside the loop)

// ---- run_log.c ----
void zt_runlog_make_run_id(char *out, size_t n);
void zt_runlog_clear_progress(void);   // the terminal's progress line gives way to other output
void zt_runlog_plan(const zt_train_opts *o, const run_state *r, const zt_fsdp_memory *mem);
int zt_runlog_open(const zt_train_opts *o, run_state *r, const zt_fsdp_memory *mem);
void zt_runlog_step(const zt_train_opts *o, run_state *r, int64_t step, const zt_fsdp_stats *s);
void zt_runlog_eval(run_state *r, int64_t step, int64_t blocks, int64_t targets, double loss, double seconds);
void zt_runlog_summary(const run_state *r, int stopped);
void zt_runlog_stopped(const zt_train_opts *o, const run_state *r);
int zt_runlog_complete(const zt_train_opts *o, const run_state *r);

// ---- resume.c ----
char *zt_resume_settings_json(const zt_train_opts *o, const zt_dataset *ds, int isolated, int64_t global_batch_blocks,
                              int64_t total_steps);
int zt_resume_from_checkpoint(const zt_train_opts *o, run_state *r);
int zt_resume_truncate_jsonl(const char *path, int64_t keep);
#endif
