// The training loop of `zerotrain train` on W MPI ranks (W = 1 without mpirun):
// data dealing with the evenfix stop, the FSDP engine, symmetric epoch ends,
// logging to the terminal, RUN/run.json and RUN/metrics.jsonl.
// defines: zt_train_opts, zt_train_run, zt_deal_blocks, zt_evenfix
#ifndef ZT_TRAIN_H
#define ZT_TRAIN_H
#include <stdint.h>

#include "engine/fsdp.h"  // ZT_ATTN_* (kernels/cuda/attention/policy.h: the kinds, AUTO and its policy)
#include "engine/optim.h"
#include "train/preflight.h"
#include "train/train_defaults.h"

typedef enum { ZT_DEVICE_AUTO = 0, ZT_DEVICE_CPU = 1, ZT_DEVICE_CUDA = 2 } zt_device;
typedef enum { ZT_DOC_ATTN_DATASET = 0, ZT_DOC_ATTN_FULL = 1, ZT_DOC_ATTN_ISOLATED = 2 } zt_doc_attention;

typedef struct {
    zt_device device;        // AUTO: cuda when built with the GPU engine and every rank sees a GPU
    int attention;           // cuda: ZT_ATTN_TILED / _CUDNN / _GEMM, or ZT_ATTN_AUTO (zt_attn_choose)
    int recompute;           // cuda: activation recomputation (keep layer inputs only)
    const char *model;       // config.json or HF directory (may be NULL when init is given)
    const char *init;        // HF weights directory or .safetensors (NULL: random init from seed)
    const char *data;        // dataset directory
    int doc_attention;       // ZT_DOC_ATTN_*: DATASET follows dataset.json (isolated for chat datasets)
    const char *eval_data;   // held-out dataset directory (NULL: no evaluation)
    int64_t eval_every;      // evaluate every N steps (0: only at the end) when eval_data is set
    int64_t eval_batches;    // micro-batches per rank per evaluation (0: as many as every rank has)
    const char *run_dir;
    int64_t steps;           // > 0: train exactly this many optimizer steps
    int64_t epochs;          // used when steps == 0
    int micro_batch, grad_accum;
    const char *shard_group;    // NULL: full shard over W; "node": the ranks per node; else G (hybrid sharding)
    int reshard_after_forward;  // 0: keep-gathered (no backward re-gather); default 1
    int context_parallel;       // C: ranks sharing each block (context parallelism); default 1: none
    zt_hparams hp;
    uint64_t seed;
    int threads;             // 0: OMP_NUM_THREADS, else the node's cores split between its ranks
    int log_every;
    int overwrite;           // allow an existing run directory to be reused
    int allow_new_data;      // --resume on a dataset whose files differ from the checkpoint's
    int allow_new_schedule;  // --resume with another length (total steps) or learning-rate schedule
    int allow_long_seq;      // seq_len > max_position_embeddings passes the preflight gate
    int verify_crc;          // crc32c of every data file before training (--no-verify-crc clears it)
    int save_final;          // write RUN/final/ (HF config.json + model.safetensors)
    int tensorboard;         // write RUN/tb/ event files (default 1)
    int save_dtype;          // ZT_ST_BF16 or ZT_ST_F32
    int evenfix;             // stop every rank at the global minimum block count (default 1)
    double collective_timeout, first_collective_timeout;  // seconds; 0 = defaults
    double save_timeout;     // seconds a checkpoint save or load may take (HDF5's own barriers inside
                             // are watched by the comm watchdog); default 1800
    int preflight;           // run the six-check gate first (default 1)
    int keep_last;           // complete checkpoints to keep (0: all); preflight sizes the disk check with it
    int async_save;          // --async-save: snapshot at the save point, write in the background, commit at a
                             // later step boundary (checkpoint/ckpt_async.c); the final and stop saves stay
                             // synchronous
    int save_io;             // --save-io: ZT_SAVE_IO_DIRECT (default), _POSIX or _MPIIO (checkpoint/ckpt.h)
    int64_t save_every;      // checkpoint every N steps (0: only at epoch ends, on a stop signal, at the end)
    const char *resume;      // NULL: fresh; "latest": RUN/checkpoints/latest; "auto": latest if any, else
                             // fresh; else a checkpoint path
    int trace_blocks;        // debugging: every rank logs its block ids per step to RUN/ranks/rank-N.blocks
    int64_t debug_signal_at_step;  // testing: rank 0 raises SIGUSR1 after this step (0: never)
    int64_t debug_signal_in_eval;  // testing: the last rank raises SIGUSR1 before this micro-batch (1-based)
                                   // of the first evaluation (0: never)
    int run_lock;            // hold RUN/lock (flock) for the job's life (default 1; train/run_lock.h)
    double alive_interval;   // seconds between RUN/ranks/rank-N.alive ticks (default 5)
    const char *flag_settings;  // JSON object: the flag values a resume must match (seed, lr, ...), written
                                // by the flag table (cli/flags.c); train_settings_json adds the derived ones
    double peak_tflops;      // dense peak per rank MFU is measured against (0: the device's, or a CPU probe)
    // where the run's configuration came from (run.json "config"); set by the CLI
    const char *config_json;    // every flag's resolved value, keyed as --print-config prints them
    int has_config_file;        // --config FILE given
    const char *config_file;
    uint32_t config_crc32c;     // CRC-32C of the file's bytes
    int argc;                   // the command line after `train`
    const char *const *argv;
} zt_train_opts;

// Dealing one epoch's blocks to ranks (no MPI: a function of the layout and the rank).
typedef struct {
    int per_rank;                // per-rank layout: rank i trains on file i only
    const int64_t *file_blocks;  // per-rank layout: blocks of each rank's file
    int64_t total_blocks;        // single layout: blocks of the global order
    int world;
    int64_t per_rank_step;       // micro-batch x grad-accum
} zt_deal;

// What the evenfix stop makes of every rank's block count.
typedef struct {
    int64_t min_blocks, max_blocks;  // over the ranks
    int64_t min_steps, max_steps;    // whole steps per epoch over the ranks
    int64_t steps_per_epoch;         // this rank's: min_steps with evenfix, else its own whole steps
    int64_t dropped, total;          // blocks evenfix leaves out of the epoch / all dealt blocks
} zt_evenfix_plan;

// Blocks `rank` would train on in one epoch (single layout: full global steps plus its share
// of the last partial one).
int64_t zt_deal_blocks(const zt_deal *d, int rank);
// counts: every rank's zt_deal_blocks (train.c all-gathers them).
void zt_evenfix(const int64_t *counts, int world, int rank, int64_t per_rank_step, int evenfix, zt_evenfix_plan *p);

void zt_train_defaults(zt_train_opts *o);
int zt_train_run(const zt_train_opts *o);
#endif
