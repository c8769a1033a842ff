// The data cursor (train/data_cursor.h): dealing the training blocks to the ranks with the
// evenfix stop, and each step's blocks of this rank, read from the epoch's seeded order. The
// pure dealing arithmetic is train/train_deal.c (tested without MPI).
// defines: zt_cursor_deal, zt_cursor_start, zt_cursor_next_batch, zt_cursor_peer_block, zt_cursor_free
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/job_shape.h"
#include "train/agree.h"
#include "train/data_cursor.h"

// Seeded Fisher-Yates; every epoch (and, for per-rank files, every rank) has its own order.
static void shuffle_blocks(block_ref *b, int64_t n, uint64_t seed, int64_t epoch, int stream) {
    zt_rng r;
    zt_rng_seed(&r, seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(epoch + 1)) ^ (0x9e3779b97f4a7c15ULL * (uint64_t)stream));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)zt_rng_below(&r, (uint64_t)i + 1);
        block_ref t = b[i];
        b[i] = b[j];
        b[j] = t;
    }
}

// Dealing and evenfix: every rank's block count (zt_deal_blocks, all-gathered), the steps
// per epoch every rank agrees on (zt_evenfix).
int zt_cursor_deal(data_cursor *c, const zt_train_opts *o, zt_comm *comm, int rank, int world, int C) {
    const zt_dataset *ds = &c->ds;
    const int wrank = rank;  // in the world; below, rank and world are the data-parallel ones
    rank /= C;
    world = zt_data_parallel_ranks(world, C);  // global_step_blocks x seq_len = zt_tokens_per_step
    c->per_rank_step = (int64_t)o->micro_batch * o->grad_accum;
    c->global_step_blocks = c->per_rank_step * world;
    int64_t *file_blocks = zt_xcalloc((size_t)(ds->nfiles > 0 ? ds->nfiles : 1), sizeof(int64_t));
    for (int i = 0; i < ds->nfiles; i++) file_blocks[i] = ds->files[i].blocks;
    const zt_deal d = {.per_rank = ds->per_rank, .file_blocks = file_blocks, .total_blocks = ds->total_blocks,
                       .world = world, .per_rank_step = c->per_rank_step};
    int64_t my_blocks = zt_deal_blocks(&d, rank);  // blocks this rank would train on in one epoch
    free(file_blocks);
    int64_t *counts = zt_xcalloc((size_t)world * C, sizeof(int64_t));
    if (zt_allgather(comm, &my_blocks, counts, 1, ZT_DT_I64, "evenfix block counts") != 0) {
        free(counts);
        return -1;
    }
    for (int k = 0; k < world; k++) counts[k] = counts[k * C];  // one count per context group (its ranks' agree)
    zt_evenfix_plan p;
    zt_evenfix(counts, world, rank, c->per_rank_step, o->evenfix, &p);
    if (wrank == 0) {
        printf("evenfix: blocks per rank min %lld, max %lld, spread %lld", (long long)p.min_blocks,
               (long long)p.max_blocks, (long long)(p.max_blocks - p.min_blocks));
        if (o->evenfix) {
            printf("; every rank stops after %lld steps per epoch; dropped %lld blocks (%.3f%% of tokens)\n",
                   (long long)p.min_steps, (long long)p.dropped, p.total ? 100.0 * p.dropped / p.total : 0.0);
            for (int i = 0; i < world && p.max_blocks != p.min_blocks; i++)
                printf("evenfix: rank %d has %lld blocks, drops %lld\n", i, (long long)counts[i],
                       (long long)(counts[i] - p.min_steps * c->per_rank_step));
        } else {
            printf("\n");
            if (p.max_steps != p.min_steps)
                fprintf(stderr,
                        "zerotrain: warning: --no-evenfix with uneven ranks: steps per epoch range from %lld to %lld; "
                        "ranks will leave the epoch at different steps and the job WILL HANG until the collective "
                        "deadline aborts it (this flag exists to reproduce that failure)\n",
                        (long long)p.min_steps, (long long)p.max_steps);
        }
    }
    free(counts);
    c->steps_per_epoch = p.steps_per_epoch;
    if (zt_train_agree(comm, c->steps_per_epoch >= 1 ||
                           zt_err("%s: rank %d gets %lld blocks, fewer than one step needs (micro-batch %d x "
                                  "grad-accum %d = %lld blocks per rank%s)",
                                  o->data, rank, (long long)my_blocks, o->micro_batch, o->grad_accum,
                                  (long long)c->per_rank_step, world > 1 ? "; more ranks than blocks?" : "") == 0,
              "checking the block count") != 0)
        return -1;
    return 0;
}

void zt_cursor_start(data_cursor *c) {
    c->order = zt_xmalloc((size_t)(c->ds.total_blocks > 0 ? c->ds.total_blocks : 1) * sizeof(block_ref));
    c->blocks = zt_xmalloc((size_t)c->per_rank_step * sizeof(uint32_t *));
    c->batch = zt_xmalloc((size_t)(c->per_rank_step * c->ds.seq_len) * sizeof(uint32_t));
    c->epoch = -1;
}

// This rank's blocks of `step` in c->blocks: the epoch's seeded order (reshuffled when a
// new epoch starts), cut into steps of W slices (per-rank layout: this rank's own file),
// copied out of the mapped files (a file changed underneath: -1 + zt_err, never a SIGBUS;
// a block that could not be read holds zeros, valid ids for the step that then updates nothing).
// trace (--trace-blocks): the step's block ids, one line.
int zt_cursor_next_batch(data_cursor *c, zt_fsdp *f, uint64_t seed, int rank, FILE *trace, int64_t step) {
    const zt_dataset *ds = &c->ds;
    int bad = 0;
    const int64_t e = step / c->steps_per_epoch, within = step % c->steps_per_epoch;
    if (e != c->epoch) {
        c->epoch = e;
        zt_fsdp_set_epoch(f, e);
        int64_t k = 0;
        if (ds->per_rank) {
            for (int64_t b = 0; b < ds->files[rank].blocks; b++) c->order[k++] = (block_ref){rank, b};
            shuffle_blocks(c->order, k, seed, c->epoch, rank + 1);
        } else {
            for (int fi = 0; fi < ds->nfiles; fi++)
                for (int64_t b = 0; b < ds->files[fi].blocks; b++) c->order[k++] = (block_ref){fi, b};
            shuffle_blocks(c->order, k, seed, c->epoch, 0);
        }
    }
    if (trace) fprintf(trace, "%lld", (long long)step + 1);
    for (int64_t i = 0; i < c->per_rank_step; i++) {
        int64_t idx = ds->per_rank ? within * c->per_rank_step + i
                                   : within * c->global_step_blocks + (int64_t)rank * c->per_rank_step + i;
        block_ref br = c->order[idx];
        uint32_t *dst = c->batch + i * (int64_t)ds->seq_len;
        if (zt_dataset_read_block(ds, br.file, br.block, dst) != 0) {
            if (!bad++) zt_err_prefix("--data (rank %d, step %lld)", rank, (long long)step + 1);
            memset(dst, 0, (size_t)ds->seq_len * sizeof *dst);  // valid ids: the step runs, then makes no update
        }
        c->blocks[i] = dst;
        if (trace) fprintf(trace, " %d:%lld", br.file, (long long)br.block);
    }
    if (trace) fputc('\n', trace), fflush(trace);
    return bad ? -1 : 0;
}

// Where rank k's i-th block of `step` is: the epoch's global order (single layout), or rank k's
// own shuffle of its own file (per-rank layout; rank 0 keeps every rank's order for this).
block_ref zt_cursor_peer_block(data_cursor *c, uint64_t seed, int world, int64_t step, int k, int64_t i) {
    const int64_t e = step / c->steps_per_epoch, within = step % c->steps_per_epoch;
    if (!c->ds.per_rank) return c->order[within * c->global_step_blocks + (int64_t)k * c->per_rank_step + i];
    if (!c->peer_order) {
        c->peer_order = zt_xcalloc((size_t)world, sizeof *c->peer_order);
        c->peer_n = zt_xcalloc((size_t)world, sizeof *c->peer_n);
        c->peer_epoch = -1;
    }
    if (c->peer_epoch != e) {  // as zt_cursor_next_batch shuffles rank k's order
        for (int q = 0; q < world; q++) {
            const int64_t n = c->ds.files[q].blocks;
            free(c->peer_order[q]);
            c->peer_order[q] = zt_xmalloc((size_t)(n > 0 ? n : 1) * sizeof(block_ref));
            for (int64_t b = 0; b < n; b++) c->peer_order[q][b] = (block_ref){q, b};
            shuffle_blocks(c->peer_order[q], n, seed, e, q + 1);
            c->peer_n[q] = n;
        }
        c->peer_epoch = e;
    }
    return c->peer_order[k][within * c->per_rank_step + i];
}

// world: as zt_cursor_peer_block was given.
void zt_cursor_free(data_cursor *c, int world) {
    free(c->order);
    free(c->blocks);
    free(c->batch);
    for (int k = 0; c->peer_order && k < world; k++) free(c->peer_order[k]);
    free(c->peer_order);
    free(c->peer_n);
    if (c->ds_open) zt_dataset_close(&c->ds);
}
