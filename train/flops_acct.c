// FLOP accounting (train/flops_acct.h): each step's model FLOPs over the real document lengths
// (model/flops.h, the planner's exact formula), this rank's and on rank 0 every rank's, and the
// job's sums the summary's MFU is computed from. The peak is device_info.c's.
// defines: zt_flops_step, zt_flops_account, zt_flops_free
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/common.h"
#include "data/batch.h"
#include "model/flops.h"
#include "train/flops_acct.h"

// One block's sum of document lengths squared (model/flops.h): S^2 for full attention, each
// packed document's own length under isolation.
static double block_sq(flops_acct *fa, const data_cursor *c, const uint32_t *words) {
    const int64_t S = c->ds.seq_len;
    if (!c->isolated) return (double)S * (double)S;
    zt_batch_words(words, 1, S, 1, fa->fl_ids, fa->fl_tg, fa->fl_pos);
    return zt_doc_sq_sum(fa->fl_pos, S);
}

// The model FLOPs of `step` (model/flops.h, the planner's exact formula): this rank's blocks,
// and on rank 0 every rank's (under isolation read from the dataset: documents differ by rank),
// plus what --recompute adds on the cuda backend (hardware FLOPs). Outside the timed step.
void zt_flops_step(flops_acct *fa, data_cursor *c, const zt_model_config *cfg, uint64_t seed, int recompute,
                   int rank, int world, int C, int64_t step) {
    const int64_t S = c->ds.seq_len, n = c->per_rank_step;
    const double tokens = (double)(n * S);
    if (c->isolated && !fa->fl_words) {
        fa->fl_words = zt_xmalloc((size_t)S * sizeof *fa->fl_words);
        fa->fl_ids = zt_xmalloc((size_t)S * sizeof *fa->fl_ids);
        fa->fl_tg = zt_xmalloc((size_t)S * sizeof *fa->fl_tg);
        fa->fl_pos = zt_xmalloc((size_t)S * sizeof *fa->fl_pos);
    }
    double sq = 0;
    for (int64_t i = 0; i < n; i++) sq += block_sq(fa, c, c->blocks[i]);
    fa->flops_rank = zt_model_train_flops(cfg, tokens, sq) / C;  // a context group's ranks share the work
    fa->hw_extra_rank = recompute ? zt_model_recompute_flops(cfg, tokens, sq) / C : 0;
    if (rank != 0) return;
    double sq_all = sq;
    if (!c->isolated) {
        sq_all = sq * world;
    } else {
        char pending[ZT_ERR_MAX];  // a read error here must not replace one the step will report
        snprintf(pending, sizeof pending, "%s", zt_errmsg());
        for (int k = 1; k < world && isfinite(sq_all); k++)
            for (int64_t i = 0; i < n && isfinite(sq_all); i++) {
                const block_ref b = zt_cursor_peer_block(c, seed, world, step, k, i);
                if (zt_dataset_read_block(&c->ds, b.file, b.block, fa->fl_words) != 0) {
                    sq_all = NAN;  // that rank reports it; this step's FLOPs are unknown
                    zt_err("%s", pending);
                } else {
                    sq_all += block_sq(fa, c, fa->fl_words);
                }
            }
    }
    fa->flops_all = zt_model_train_flops(cfg, tokens * world, sq_all);
    fa->hw_extra_all = recompute ? zt_model_recompute_flops(cfg, tokens * world, sq_all) : 0;
}

void zt_flops_account(flops_acct *fa, int rank, double t_step) {
    const double flops = rank == 0 ? fa->flops_all : fa->flops_rank;  // rank 0: the run's
    if (isfinite(flops)) {  // (unknown for a step whose peer block did not read)
        fa->t_step_sum += t_step;
        fa->flops_sum += flops;
        fa->hw_extra_sum += rank == 0 ? fa->hw_extra_all : fa->hw_extra_rank;
    }
}

void zt_flops_free(flops_acct *fa) {
    free(fa->fl_words), free(fa->fl_ids), free(fa->fl_tg), free(fa->fl_pos);
    fa->fl_words = fa->fl_ids = NULL;
    fa->fl_tg = fa->fl_pos = NULL;
}
