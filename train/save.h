// Checkpoint saving (train/save.c; its state: train/ckpt_state.h).
// defines: zt_save_shards, zt_save_make_snapshot, zt_save_after_step, zt_save_maybe, zt_save_data_bad_stop,
//          zt_save_abandon, zt_save_free
#ifndef ZT_TRAIN_SAVE_H
#define ZT_TRAIN_SAVE_H
#include <stdint.h>

#include "train/run_state.h"

// The slices of the engine's shards every save writes and every load fills (after the engine is built).
void zt_save_shards(ckpt_state *ck, zt_fsdp *f);
// --async-save: the host snapshot and its writer, checked against the node's memory. Agreed.
int zt_save_make_snapshot(run_state *r);
// After the record of `step`: --async-save's "copied" event, and the commit of a write in
// flight that every rank has finished (asked without blocking).
int zt_save_after_step(const zt_train_opts *o, run_state *r, int64_t step, const zt_fsdp_stats *s);
// The checkpoint policy after `step` steps: epoch ends, --save-every, the last step (last) and
// a stop (stop); --async-save snapshots where it may and writes in the background.
int zt_save_maybe(const zt_train_opts *o, run_state *r, int64_t step, int last, int stop);
// The input changed under the job after `step` good steps: that step checkpointed (unless it
// is saved already), then the data error, always -1.
int zt_save_data_bad_stop(const zt_train_opts *o, run_state *r, int64_t step);
// The run failed: a write in flight is waited for (watched) and dropped uncommitted; zt_err kept.
void zt_save_abandon(const zt_train_opts *o, run_state *r);
void zt_save_free(ckpt_state *ck);
#endif
