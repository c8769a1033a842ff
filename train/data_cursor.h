// The data cursor (train/data_cursor.c): the training dataset, how its blocks are dealt to
// the ranks (evenfix: every rank stops each epoch at the same step), and where the run is in
// it: the epoch's seeded order and this rank's blocks of the current step.
// defines: block_ref, data_cursor, zt_cursor_deal, zt_cursor_start, zt_cursor_next_batch,
//          zt_cursor_peer_block, zt_cursor_free
#ifndef ZT_TRAIN_DATA_CURSOR_H
#define ZT_TRAIN_DATA_CURSOR_H
#include <stdint.h>
#include <stdio.h>

#include "data/dataset.h"
#include "engine/comm.h"
#include "engine/fsdp.h"
#include "train/train.h"

typedef struct { int file; int64_t block; } block_ref;

typedef struct {
    zt_dataset ds;
    int ds_open;
    int isolated;               // packed documents kept apart (--doc-attention)
    int64_t per_rank_step;      // micro-batch x grad-accum blocks per rank and step
    int64_t global_step_blocks;
    int64_t steps_per_epoch;    // after evenfix
    int64_t epoch;              // of the order below (-1: none shuffled yet)
    block_ref *order;           // the epoch's order (per-rank layout: this rank's file's)
    const uint32_t **blocks;    // this rank's blocks of the step, pointing into batch
    uint32_t *batch;            // this rank's blocks of the step, copied out of the mapped files
    block_ref **peer_order;     // rank 0, per-rank layout with isolated documents: every rank's epoch order
    int64_t *peer_n;
    int64_t peer_epoch;
} data_cursor;

// Dealing and evenfix over the open dataset: every rank's block count (all-gathered), the
// steps per epoch every rank agrees on. Agreed; -1 on every rank when any failed.
// C: ranks sharing each block (--context-parallel): dealt over the W / C data-parallel ranks.
int zt_cursor_deal(data_cursor *c, const zt_train_opts *o, zt_comm *comm, int rank, int world, int C);
// Before the first step: the order and the step's buffers.
void zt_cursor_start(data_cursor *c);
// This rank's blocks of `step` in c->blocks (a new epoch reshuffles and tells the engine);
// -1 + zt_err when a file changed underneath (the blocks that did not read hold zeros).
int zt_cursor_next_batch(data_cursor *c, zt_fsdp *f, uint64_t seed, int rank, FILE *trace, int64_t step);
// Where rank k's i-th block of `step` is (rank 0 uses it to count every rank's FLOPs).
block_ref zt_cursor_peer_block(data_cursor *c, uint64_t seed, int world, int64_t step, int k, int64_t i);
void zt_cursor_free(data_cursor *c, int world);
#endif
