// The run itself (train/train.c): the phases, then the training loop.
// defines: zt_train_body, zt_train_cleanup
#ifndef ZT_TRAIN_LOOP_H
#define ZT_TRAIN_LOOP_H
#include "train/run_state.h"

int zt_train_body(const zt_train_opts *o, run_state *r);
void zt_train_cleanup(run_state *r);  // every file, buffer and engine of the run
#endif
