// Resuming (train/resume.c).
// defines: zt_resume_settings_json, zt_resume_from_checkpoint
#ifndef ZT_TRAIN_RESUME_H
#define ZT_TRAIN_RESUME_H
#include <stdint.h>

#include "train/run_state.h"

// The settings a resumed run must share with its checkpoint (JSON, malloc'd).
char *zt_resume_settings_json(const zt_train_opts *o, const zt_dataset *ds, int isolated, int64_t global_batch_blocks,
                              int64_t total_steps);
// --resume: this rank's slices from the checkpoint after its config, settings and data cursor
// are checked; --resume auto: its candidates in order, past one whose data does not load.
int zt_resume_from_checkpoint(const zt_train_opts *o, run_state *r);
#endif
