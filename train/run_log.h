// The run log (train/run_log.c): run.json, metrics.jsonl and the rank files, TensorBoard,
// the heartbeat, the terminal's lines, complete.json.
// defines: zt_runlog_make_run_id, zt_runlog_clear_progress, zt_runlog_plan, zt_runlog_check_outputs,
//          zt_runlog_open, zt_runlog_step, zt_runlog_ckpt,
//          zt_runlog_eval, zt_runlog_summary, zt_runlog_stopped, zt_runlog_complete, zt_runlog_truncate,
//          zt_sinks_close (train/log_sinks.h)
#ifndef ZT_TRAIN_RUN_LOG_H
#define ZT_TRAIN_RUN_LOG_H
#include <stddef.h>
#include <stdint.h>

#include "train/run_state.h"

void zt_runlog_make_run_id(char *out, size_t n);
void zt_runlog_clear_progress(void);   // the terminal's progress line gives way to other output
void zt_runlog_plan(const zt_train_opts *o, const run_state *r, const zt_fsdp_memory *mem);
// Before anything is written in RUN: every name this rank writes there (rank 0: run.json,
// metrics.jsonl, heartbeat.json, complete.json, checkpoints/, tb/; every rank: its RUN/ranks
// files) holds nothing or what zerotrain writes there; a link or special file is refused, named.
int zt_runlog_check_outputs(const zt_train_opts *o, int rank);
int zt_runlog_open(const zt_train_opts *o, run_state *r, const zt_fsdp_memory *mem);
void zt_runlog_step(const zt_train_opts *o, run_state *r, int64_t step, const zt_fsdp_stats *s);
// --async-save's checkpoint events (rank 0): metrics.jsonl and TensorBoard (ckpt/*); NAN: not there.
void zt_runlog_ckpt(log_sinks *sk, int rank, int64_t step, const char *event, int64_t ckpt_step, double blocked_s,
                    double wait_s, double snapshot_s, double write_s);
// One evaluation's line, record and points (rank 0).
void zt_runlog_eval(log_sinks *sk, int rank, int64_t step, int64_t blocks, int64_t targets, double loss,
                    double seconds);
void zt_runlog_summary(const run_state *r, int stopped);
void zt_runlog_stopped(const zt_train_opts *o, const run_state *r);
// rank_records_lost: the records of every rank's RUN/ranks file a full disk refused (summed).
int zt_runlog_complete(const zt_train_opts *o, const run_state *r, int64_t rank_records_lost);
// A resumed run continues after step `keep`: the lines of a metrics file for later steps go.
int zt_runlog_truncate(const char *path, int64_t keep);
#endif
