// Evaluation on --eval-data (train/eval.c): its dataset, opened and checked beside the training
// data, and the passes run every --eval-every steps and after the last one. Stateless for
// training: the order, RNG, optimizer and checkpoints never see it.
// defines: eval_state, EVAL_DONE, EVAL_STOPPED, EVAL_DATA_BAD
#ifndef ZT_TRAIN_EVAL_STATE_H
#define ZT_TRAIN_EVAL_STATE_H
#include "data/dataset.h"

enum { EVAL_DONE = 0, EVAL_STOPPED = 1, EVAL_DATA_BAD = 2 };

typedef struct {
    zt_dataset eds;             // --eval-data
    int eds_open;
    int signalled;              // --debug-signal-in-eval done
    int stopped;                // ranks whose stop request ended the last evaluation
} eval_state;
#endif
