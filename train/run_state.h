// One run's state: the job's settings (who this rank is, the communicators, the engine, what
// is trained) and its parts, each owning its fields and acted on by its own file:
//   data      data_cursor  (data_cursor.h)  the dataset, dealing and evenfix, the epoch's order
//   eval      eval_state   (eval_state.h)   --eval-data and its passes (eval.c)
//   ckpt      ckpt_state   (ckpt_state.h)   checkpoints saved and resumed, --async-save (save.c, resume.c)
//   sinks     log_sinks    (log_sinks.h)    metrics.jsonl, TensorBoard, the trace (run_log.c)
//   flops     flops_acct   (flops_acct.h)   FLOPs and MFU (flops_acct.c, device_info.c)
//   progress  run_progress (below)          the loop's running totals (train.c)
// session.c (the job: MPI, the lock, the first error) over train.c (the phases and the loop)
// over the parts' files, run_log.c (every output, from one metrics record) and resume.c, with
// agree.c and signals.c below them all. Not for other layers.
// defines: run_state, run_progress
#ifndef ZT_TRAIN_RUN_STATE_H
#define ZT_TRAIN_RUN_STATE_H
#include <stdint.h>
#include <stdio.h>

#include "engine/comm.h"
#include "engine/mesh.h"
#include "engine/fsdp.h"
#include "model/qwen3.h"
#include "train/ckpt_state.h"
#include "train/data_cursor.h"
#include "train/eval_state.h"
#include "train/flops_acct.h"
#include "train/liveness.h"
#include "train/log_sinks.h"
#include "train/power.h"
#include "train/run_lock.h"
#include "train/train.h"

// Where the loop is and what it has done so far.
typedef struct {
    int64_t step;             // optimizer steps completed
    int64_t start_step;       // the step this job started from (a resumed checkpoint's, else 0)
    int64_t steps_run, tokens_seen;
    double t_loop;            // when the loop started
    double loss_first, loss_last, lr_last, t_wait_total, t_compute_total;
} run_progress;

// All state of one run, so that cleanup is one function.
typedef struct {
    zt_mesh *mesh;            // the process groups (engine/mesh.h), built once by the session; owns the comms
    zt_comm *comm;            // MPI: the mesh's world group (evenfix, agreement, the CPU engine)
    zt_comm *dcomm;           // NCCL: the mesh's device world, the GPU engine's collectives (cuda only)
    zt_comm_opts copts;
    int cuda;                 // the GPU engine runs this job
    int rank, world;
    // Data parallelism is over the context groups (--context-parallel C: C consecutive ranks share
    // each block): this rank's group and their count, W / C (rank and W at C = 1). Dealing,
    // evenfix, evaluation and the FLOP count are over them.
    int data_rank, data_world, context;
    zt_fsdp *f;               // the engine (opaque: engine/fsdp.h)
    zt_run_lock *lock;        // rank 0: RUN/lock, held for the job's life
    zt_liveness *alive;
    zt_power_sampler *power;
    char run_id[64];

    // what this run is: filled by the phases before the loop
    double t_start;
    int threads;
    zt_model_config cfg;
    char backend[192];
    int64_t total_steps;
    zt_hparams hp;
    char carry[64];           // RUN/carry's record in the training settings ("" when nothing is carried)
    const char *inputs_json;  // what this rank read at start (train/input_digest.h): run.json's "inputs"

    data_cursor data;
    eval_state eval;
    ckpt_state ckpt;
    log_sinks sinks;
    flops_acct flops;
    run_progress progress;
} run_state;
#endif
