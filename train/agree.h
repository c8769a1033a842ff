// Agreement of every rank on a phase's outcome (train/agree.c).
// defines: zt_train_agree, zt_train_agree_named
#ifndef ZT_TRAIN_AGREE_H
#define ZT_TRAIN_AGREE_H
#include "train/run_state.h"

// Every rank contributes whether its last phase succeeded; all learn whether all did.
int zt_train_agree(zt_comm *c, int ok, const char *phase);
// The same, every rank ending up with the lowest failing rank's message. 0: all ok; 1: some
// rank failed (zt_err says why); -1: the collective failed.
int zt_train_agree_named(run_state *r, int ok, const char *phase);
#endif
