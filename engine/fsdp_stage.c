// Staging a micro-batch for the schedule (engine/fsdp.c): the rows of the blocks as ids, targets
// and positions, each id checked against the vocabulary; under context parallelism the zig-zag
// split of a block over the context group, this rank's share of the rows, and the exchange the
// family's attention calls over the group (zt_family_context).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/fsdp_internal.h"
#include "engine/job_shape.h"
#include "data/batch.h"

// Index of the first id of ids[0..n) not below vocab, or -1.
static int64_t first_id_outside(const uint32_t *ids, int64_t n, int64_t vocab) {
    if (vocab > (int64_t)UINT32_MAX) return -1;
    uint32_t mx = 0;
    for (int64_t j = 0; j < n; j++) mx = ids[j] > mx ? ids[j] : mx;  // branch-free: vectorises
    if (mx < (uint32_t)vocab) return -1;
    for (int64_t j = 0; j < n; j++)
        if (ids[j] >= (uint32_t)vocab) return j;
    return -1;
}

// A filler row: zeros (valid ids) whose targets count nothing.
static void stage_filler(const zt_fsdp *f, uint32_t *ib, int32_t *tb, int32_t *pb) {
    const int64_t S = f->seq_len;
    memset(ib, 0, (size_t)S * sizeof(uint32_t));
    (void)zt_batch_words(ib, 1, S, f->doc_isolated, ib, tb, pb);
    (void)zt_batch_drop_row_targets(tb, 0, S);
}

int64_t zt_fsdp_stage_rows(zt_fsdp *f, const uint32_t *const *blocks, uint32_t *ids, int32_t *targets,
                           int32_t *pos) {
    const int64_t S = f->seq_len, vocab = f->lay.cfg.vocab_size;
    int64_t n = 0;
    for (int64_t b = 0; b < f->micro_batch; b++) {
        uint32_t *ib = ids + b * S;
        int32_t *tb = targets + b * S, *pb = pos ? pos + b * S : NULL;
        if (!blocks[b]) {
            stage_filler(f, ib, tb, pb);
            continue;
        }
        const int64_t got = zt_batch_words(blocks[b], 1, S, f->doc_isolated, ib, tb, pb);
        const int64_t bad = first_id_outside(ib, S, vocab);
        if (bad < 0) {
            n += got;
            continue;
        }
        if (!f->stage_refused++)
            zt_err("micro-batch %d, block %lld of it, position %lld: token id %u is not below the model's vocab_size "
                   "%lld; the block is refused (staged as a filler: no kernel reads the id) and the step makes no "
                   "update",
                   f->micro, (long long)b, (long long)bad, ib[bad], (long long)vocab);
        stage_filler(f, ib, tb, pb);
    }
    return n;
}

int64_t zt_fsdp_stage_rows_context(zt_fsdp *f, const uint32_t *const *blocks, uint32_t *ids, int32_t *targets,
                                   int32_t *pos) {
    const int64_t S = f->seq_len, Sl = f->seq_local;
    const int32_t *mine = f->ctx_index + (int64_t)f->ctx_rank * Sl;
    (void)zt_fsdp_stage_rows(f, blocks, f->ctx_ids, f->ctx_tgt, f->ctx_pos);  // whole rows: targets cross chunks
    int64_t n = 0;
    for (int64_t b = 0; b < f->micro_batch; b++)
        for (int64_t t = 0; t < Sl; t++) {
            const int64_t g = mine[t], i = b * Sl + t;
            ids[i] = g >= 0 ? f->ctx_ids[b * S + g] : 0;
            targets[i] = g >= 0 ? f->ctx_tgt[b * S + g] : -1;
            pos[i] = g >= 0 ? f->ctx_pos[b * S + g] : 0;
            n += targets[i] >= 0;
        }
    return n;
}

int64_t zt_context_split(int64_t S, int C, int32_t **index) {
    *index = NULL;
    if (C < 2) return S;
    if (zt_context_check(&(zt_context_job){.context = C, .seq_len = S}) != 0) return -1;  // 2C <= S
    const int64_t K = 2 * (int64_t)C;
#define CHUNK_AT(k) ((k) * S / K)
    int64_t Sl = 0;
    for (int r = 0; r < C; r++) {
        const int64_t n = CHUNK_AT(r + 1) - CHUNK_AT(r) + CHUNK_AT(K - r) - CHUNK_AT(K - 1 - r);
        Sl = n > Sl ? n : Sl;
    }
    int32_t *ix = zt_xmalloc((size_t)(C * Sl) * sizeof(int32_t));
    for (int r = 0; r < C; r++) {
        int64_t t = 0;
        const int64_t chunks[2] = {r, K - 1 - r};
        for (int c = 0; c < 2; c++)
            for (int64_t g = CHUNK_AT(chunks[c]); g < CHUNK_AT(chunks[c] + 1); g++) ix[r * Sl + t++] = (int32_t)g;
        while (t < Sl) ix[r * Sl + t++] = -1;
    }
#undef CHUNK_AT
    *index = ix;
    return Sl;
}

// The exchange a family's attention calls under context parallelism (zt_family_context): over
// the mesh's context group, deadline-guarded and named in its flight recorder like every
// collective; a failure ends the process with the report (as the unit collectives do).
static void context_gather(void *ctx, const float *mine, float *all, int64_t n, const char *what) {
    zt_fsdp *f = ctx;
    const double t0 = zt_now();
    if (zt_allgather(f->ctx_comm, mine, all, (size_t)n, ZT_DT_F32, what) != 0) zt_die_on_err();
    f->t_wait += zt_now() - t0;
    f->bytes_ctx += (int64_t)(f->ctx_world - 1) * n * (int64_t)sizeof(float);
}

static void context_scatter(void *ctx, const float *all, float *mine, int64_t n, const char *what) {
    zt_fsdp *f = ctx;
    const double t0 = zt_now();
    if (zt_reduce_scatter(f->ctx_comm, all, mine, (size_t)n, ZT_DT_F32, ZT_RED_SUM, what) != 0) zt_die_on_err();
    f->t_wait += zt_now() - t0;
    f->bytes_ctx += (int64_t)(f->ctx_world - 1) * n * (int64_t)sizeof(float);
}

static void context_alltoall(void *ctx, const float *send, const int64_t *send_n, float *recv, const int64_t *recv_n,
                             const char *what) {
    zt_fsdp *f = ctx;
    const double t0 = zt_now();
    size_t *sc = zt_xmalloc(2 * (size_t)f->ctx_world * sizeof(size_t)), *rc = sc + f->ctx_world;
    int64_t got = 0;
    for (int r = 0; r < f->ctx_world; r++) {
        sc[r] = (size_t)send_n[r], rc[r] = (size_t)recv_n[r];
        if (r != f->ctx_rank) got += recv_n[r];
    }
    if (zt_alltoall(f->ctx_comm, send, sc, recv, rc, ZT_DT_F32, what) != 0) zt_die_on_err();
    free(sc);
    f->t_wait += zt_now() - t0;
    f->bytes_ctx += got * (int64_t)sizeof(float);  // what came from the other ranks
}

void zt_fsdp_context_stage_init(zt_fsdp *f) {  // whole rows are staged before this rank's tokens are picked
    const size_t n = (size_t)(f->micro_batch * f->seq_len);
    f->ctx_ids = zt_xcalloc(n, sizeof(uint32_t));
    f->ctx_tgt = zt_xcalloc(n, sizeof(int32_t));
    f->ctx_pos = zt_xcalloc(n, sizeof(int32_t));
}

zt_family_context zt_fsdp_family_context(zt_fsdp *f) {
    return (zt_family_context){.C = f->ctx_world, .rank = f->ctx_rank, .S = f->seq_len, .S_local = f->seq_local,
                               .index = f->ctx_index, .gather = context_gather, .scatter = context_scatter,
                               .alltoall = context_alltoall, .ctx = f};
}
