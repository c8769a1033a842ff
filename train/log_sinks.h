// Where a run's records go (train/run_log.c writes every one of them from one record): the
// metrics files, TensorBoard, the --trace-blocks file and the terminal's progress line.
// defines: log_sinks, zt_sinks_close
#ifndef ZT_TRAIN_LOG_SINKS_H
#define ZT_TRAIN_LOG_SINKS_H
#include <stdio.h>

#include "train/line_file.h"
#include "train/tboard.h"

typedef struct {
    zt_line_file *metrics;       // rank 0: RUN/metrics.jsonl (whole lines; lost records counted)
    zt_line_file *rank_metrics;  // every rank: its own times and bytes per step
    zt_tb *tb;                   // rank 0: RUN/tb (the run's curves)
    zt_tb *tb_rank;              // every rank: RUN/tb/ranks/rank-N (its own)
    FILE *trace;                 // --trace-blocks: RUN/ranks/rank-N.blocks
    int progress_tty;            // rank 0 on a terminal: a progress line rewritten in place
} log_sinks;

void zt_sinks_close(log_sinks *s);
#endif
