// Dealing an epoch's blocks to ranks and the evenfix stop, as plain arithmetic over
// every rank's counts: train.c all-gathers the counts and calls these, and
// tests/unit/test_train_deal.c checks them against a block-by-block simulation without MPI.
#include <stdint.h>

#include "train/train.h"

int64_t zt_deal_blocks(const zt_deal *d, int rank) {
    if (d->per_rank) return d->file_blocks[rank];  // each rank owns one file
    // single layout: the global order cut into steps of W slices of per_rank_step blocks;
    // the last, partial step gives each rank what reaches its slice
    const int64_t global_step = d->per_rank_step * d->world;
    int64_t mine = d->total_blocks / global_step * d->per_rank_step;
    const int64_t extra = d->total_blocks % global_step - (int64_t)rank * d->per_rank_step;
    mine += extra < 0 ? 0 : extra > d->per_rank_step ? d->per_rank_step : extra;
    return mine;
}

void zt_evenfix(const int64_t *counts, int world, int rank, int64_t per_rank_step, int evenfix, zt_evenfix_plan *p) {
    p->min_blocks = INT64_MAX;
    p->max_blocks = 0;
    p->total = 0;
    for (int i = 0; i < world; i++) {
        if (counts[i] < p->min_blocks) p->min_blocks = counts[i];
        if (counts[i] > p->max_blocks) p->max_blocks = counts[i];
        p->total += counts[i];
    }
    p->min_steps = p->min_blocks / per_rank_step;
    p->max_steps = p->max_blocks / per_rank_step;
    p->dropped = p->total - p->min_steps * per_rank_step * world;
    // evenfix: every rank stops at the global minimum, so all leave the epoch at the same step
    p->steps_per_epoch = evenfix ? p->min_steps : counts[rank] / per_rank_step;
}
