// Dealing an epoch's blocks to ranks and the evenfix stop (train/train_deal.c), checked
// against a block-by-block simulation of the same rules: the global order cut into steps
// of W slices of micro-batch x grad-accum blocks; a rank trains a step only when its
// slice is full; evenfix stops every rank at the fewest steps any rank can run.
#include <stdint.h>
#include <stdlib.h>

#include "train/train.h"
#include "tests/support/test_util.h"

// The naive model: walk the blocks one by one and hand each to the rank whose slice it
// falls in; count per rank, then the whole steps of every rank.
static void naive(int per_rank, const int64_t *file_blocks, int64_t total, int world, int64_t prs, int evenfix,
                  int64_t *counts, int64_t *spe, int64_t *dropped) {
    for (int r = 0; r < world; r++) counts[r] = 0;
    if (per_rank) {
        for (int r = 0; r < world; r++)
            for (int64_t b = 0; b < file_blocks[r]; b++) counts[r]++;
    } else {
        for (int64_t g = 0; g < total; g++) counts[(g % (prs * world)) / prs]++;
    }
    int64_t min_steps = -1, sum = 0;
    for (int r = 0; r < world; r++) {
        int64_t steps = 0, left = counts[r];
        while (left >= prs) left -= prs, steps++;
        if (min_steps < 0 || steps < min_steps) min_steps = steps;
        spe[r] = steps;
        sum += counts[r];
    }
    for (int r = 0; r < world; r++)
        if (evenfix) spe[r] = min_steps;
    *dropped = sum - min_steps * prs * world;
}

static void check_case(int per_rank, const int64_t *file_blocks, int64_t total, int world, int64_t prs, int evenfix) {
    int64_t *want = calloc((size_t)world, sizeof *want), *got = calloc((size_t)world, sizeof *got);
    int64_t *spe = calloc((size_t)world, sizeof *spe), dropped;
    naive(per_rank, file_blocks, total, world, prs, evenfix, want, spe, &dropped);
    const zt_deal d = {.per_rank = per_rank, .file_blocks = file_blocks, .total_blocks = total, .world = world,
                       .per_rank_step = prs};
    for (int r = 0; r < world; r++) {
        got[r] = zt_deal_blocks(&d, r);
        CHECK(got[r] == want[r], "%s layout, %lld blocks, W=%d, step %lld: rank %d gets %lld blocks, naive %lld",
              per_rank ? "per-rank" : "single", (long long)total, world, (long long)prs, r, (long long)got[r],
              (long long)want[r]);
    }
    for (int r = 0; r < world; r++) {
        zt_evenfix_plan p;
        zt_evenfix(got, world, r, prs, evenfix, &p);
        CHECK(p.steps_per_epoch == spe[r], "W=%d step %lld evenfix %d: rank %d runs %lld steps per epoch, naive %lld",
              world, (long long)prs, evenfix, r, (long long)p.steps_per_epoch, (long long)spe[r]);
        CHECK(p.dropped == dropped, "W=%d step %lld: evenfix drops %lld blocks, naive %lld", world, (long long)prs,
              (long long)p.dropped, (long long)dropped);
    }
    free(want), free(got), free(spe);
}

int main(void) {
    // single layout: every total around multiples of the global step, several W and steps
    for (int world = 1; world <= 5; world++)
        for (int64_t prs = 1; prs <= 4; prs++)
            for (int64_t total = 0; total <= 3 * prs * world + 2; total++)
                for (int evenfix = 0; evenfix < 2; evenfix++) check_case(0, NULL, total, world, prs, evenfix);
    // per-rank layout: uneven files (the field run's epoch-end deadlock)
    const int64_t files[4] = {10, 7, 12, 9};
    for (int64_t prs = 1; prs <= 5; prs++)
        for (int evenfix = 0; evenfix < 2; evenfix++) check_case(1, files, 38, 4, prs, evenfix);
    // a known answer: 10 blocks, W = 3, 2 blocks per step -> 4, 4, 2; evenfix stops all at 1 step
    const zt_deal d = {.per_rank = 0, .total_blocks = 10, .world = 3, .per_rank_step = 2};
    int64_t c[3] = {zt_deal_blocks(&d, 0), zt_deal_blocks(&d, 1), zt_deal_blocks(&d, 2)};
    CHECK(c[0] == 4 && c[1] == 4 && c[2] == 2, "10 blocks over 3 ranks of 2: %lld %lld %lld", (long long)c[0],
          (long long)c[1], (long long)c[2]);
    zt_evenfix_plan p;
    zt_evenfix(c, 3, 0, 2, 1, &p);
    CHECK(p.steps_per_epoch == 1 && p.dropped == 4 && p.min_blocks == 2 && p.max_blocks == 4,
          "evenfix of 4,4,2: %lld steps, %lld dropped", (long long)p.steps_per_epoch, (long long)p.dropped);
    TEST_END();
}
