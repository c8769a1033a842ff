// Every default of the train and preflight flags, in one place: the flag tables
// (cli/cmd_train.c, cli/cmd_preflight.c) print and apply them, and
// zt_train_defaults / zt_preflight_defaults / zt_comm_opts_default use the same macros.
#ifndef ZT_TRAIN_DEFAULTS_H
#define ZT_TRAIN_DEFAULTS_H
#include "engine/comm.h"

// data, batch and the gate (train and preflight)
#define ZT_DEF_MICRO_BATCH 1
#define ZT_DEF_GRAD_ACCUM 1
#define ZT_DEF_EVENFIX 1
#define ZT_DEF_KEEP_LAST 2
#define ZT_DEF_SAVE_IO 0     // ZT_SAVE_IO_DIRECT: docs/checkpoint-format.md "How the bytes are written"
#define ZT_DEF_ASYNC_SAVE 0  // docs/checkpoint-format.md "Asynchronous save": why off by default
#define ZT_DEF_VERIFY_CRC 1
#define ZT_DEF_ALLOW_LONG_SEQ 0

// length
#define ZT_DEF_EPOCHS 1
#define ZT_DEF_STEPS 0  // 0: --epochs worth

// optimizer (AdamW)
#define ZT_DEF_LR 1e-4
#define ZT_DEF_MIN_LR_RATIO 0.1
#define ZT_DEF_WARMUP 0
#define ZT_DEF_WEIGHT_DECAY 0.1
#define ZT_DEF_BETA1 0.9
#define ZT_DEF_BETA2 0.95
#define ZT_DEF_ADAM_EPS 1e-8
#define ZT_DEF_CLIP 1.0
#define ZT_DEF_SEED 1234

// output
#define ZT_DEF_LOG_EVERY 1
#define ZT_DEF_SAVE_FINAL 1
#define ZT_DEF_TENSORBOARD 1
#define ZT_DEF_PREFLIGHT 1
#define ZT_DEF_RUN_LOCK 1

// deadlines (seconds)
#define ZT_DEF_COLLECTIVE_TIMEOUT ZT_COMM_DEFAULT_TIMEOUT              // engine/comm.h
#define ZT_DEF_FIRST_COLLECTIVE_TIMEOUT ZT_COMM_DEFAULT_FIRST_TIMEOUT  // engine/comm.h
#define ZT_DEF_SAVE_TIMEOUT 1800.0             // a checkpoint save or load
#define ZT_DEF_ALIVE_INTERVAL 5.0              // RUN/ranks/rank-N.alive ticks
#endif
