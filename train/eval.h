// Evaluation on --eval-data (train/eval.c; its state: train/eval_state.h).
// defines: zt_eval_open, zt_eval_maybe, zt_eval_free
#ifndef ZT_TRAIN_EVAL_H
#define ZT_TRAIN_EVAL_H
#include <stdint.h>

#include "train/run_state.h"

// --eval-data: every rank maps it and checks it against the training data (train: opened
// already) and the model's vocabulary; refused when an evaluation would read nothing or no
// trained target. Agreed on comm.
// data_world: the ranks evaluation blocks are dealt to (W / --context-parallel).
int zt_eval_open(eval_state *ev, const zt_train_opts *o, const data_cursor *train, int64_t vocab, zt_comm *comm,
                 int rank, int world, int data_world);
// Evaluation after `step` steps: every --eval-every steps and after the last one (last).
// EVAL_DONE, EVAL_STOPPED (a stop request ended it), EVAL_DATA_BAD (a file changed, the
// reason in zt_err), or -1. Reads r->f, r->comm and the rank; writes r->eval and the run log.
int zt_eval_maybe(const zt_train_opts *o, run_state *r, int64_t step, int last);
void zt_eval_free(eval_state *ev);
#endif
