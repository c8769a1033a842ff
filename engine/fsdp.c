// The ZeRO-3 schedule, once, for every backend (fsdp_internal.h): the CPU one
// (fsdp_cpu.c) and the GPU one (fsdp_cuda.c).
// Forward:  gather(0); for u: issue gather(u+1) -> compute u -> release u.
// Head:     prefetch the last layer, fused norm + lm_head + loss fwd/bwd, reduce-scatter.
// Backward: for u = L..1: use gather(u), issue gather(u-1) (before u's reduce-scatter,
//           because one communicator runs collectives in issue order), compute u,
//           release u, issue reduce-scatter(u) which runs while u-1 computes.
// Step:     the backend's reduction of [loss | non-finite | grad sum of squares | stop],
//           then the same clip / lr / skip decision on every rank and AdamW per unit.
// Staging a micro-batch (its rows, the context split and the exchange over the context group):
// fsdp_stage.c.
#include "engine/fsdp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/cuda_module.h"
#include "engine/fsdp_internal.h"
#include "engine/job_shape.h"
#include "model/family_cuda.h"  // zt_family_cuda.no_cudnn (the table is the module's)
#include "data/batch.h"
#include "data/dataset.h"  // ZT_TOK_ID_MASK

void zt_fsdp_log(zt_fsdp *f, zt_fsdp_ev_kind k, int unit, int micro) {
    if (f->nevents == f->events_cap) {
        f->events_cap = f->events_cap ? 2 * f->events_cap : 256;
        f->events = realloc(f->events, (size_t)f->events_cap * sizeof *f->events);
        if (!f->events) zt_fatal("out of memory growing the FSDP event log");
    }
    f->events[f->nevents++] = (zt_fsdp_event){k, unit, micro, zt_now()};
}

static void ev(zt_fsdp *f, zt_fsdp_ev_kind k, int unit) { zt_fsdp_log(f, k, unit, f->micro); }

// ---- pools: round robin over the free slots -----------------------------------------
// The slot reused is the one released longest ago, so a gather or a gradient slot rarely
// waits for the work that last used it.

static int gather_issue(zt_fsdp *f, int unit) {
    int s = -1;
    for (int k = 1; k <= f->np && s < 0; k++)
        if (f->pbuf_unit[(f->p_last + k) % f->np] == -1) s = (f->p_last + k) % f->np;
    if (s < 0) zt_fatal("FSDP: parameter pool exhausted gathering unit %d (schedule bug)", unit);
    f->p_last = s;
    f->pbuf_unit[s] = unit;
    f->be->gather(f, s, unit);
    ev(f, ZT_EV_AG_ISSUE, unit);
    return s;
}

static const void *gather_use(zt_fsdp *f, int s) {
    f->be->gather_use(f, s);
    ev(f, ZT_EV_AG_DONE, f->pbuf_unit[s]);  // GPU backend: enqueue order, not GPU time
    return f->pbuf[s];
}

static void param_release(zt_fsdp *f, int s) {  // reshard after use
    f->be->param_done(f, s);
    f->pbuf_unit[s] = -1;
}

static int grad_acquire(zt_fsdp *f, int unit) {
    int s = -1;
    for (int k = 1; k <= f->ng && s < 0; k++)
        if (f->gbuf_unit[(f->g_last + k) % f->ng] == -1) s = (f->g_last + k) % f->ng;
    if (s < 0) zt_fatal("FSDP: gradient pool exhausted for unit %d (schedule bug)", unit);
    f->g_last = s;
    f->gbuf_unit[s] = unit;
    f->be->grad_take(f, s, unit);
    return s;
}

static void rs_issue(zt_fsdp *f, int s) {
    const int unit = f->gbuf_unit[s];
    f->be->reduce_scatter(f, s, unit);
    ev(f, ZT_EV_RS_ISSUE, unit);
    f->gbuf_unit[s] = -1;  // the backend retires the collective before the slot's next use
}

static void progress(zt_fsdp *f) {
    if (f->be->progress) f->be->progress(f);
}

// ---- one micro-batch ---------------------------------------------------------------------

// Forward through units 0..L, each gathered while its predecessor computes. Returns the
// head's slot (ready for use) and, tied, the embedding's (issued or kept, not yet used) in
// *s_emb. keep (keep-gathered training): a layer's slot is not released after its forward but
// kept for its backward (f->kept[u]), and so is the tied embedding's for the head; the untied
// embedding is released as before (its backward needs no parameters).
static int forward_units(zt_fsdp *f, int keep, int *s_emb) {
    const int L = f->lay.cfg.num_layers, head = L + 1, tied = f->lay.cfg.tie_word_embeddings;
    int s_cur = gather_issue(f, 0);
    *s_emb = -1;
    const void *p = gather_use(f, s_cur);
    for (int u = 0; u <= L; u++) {
        int s_next = gather_issue(f, u + 1);
        if (u + 1 == head && tied) *s_emb = keep ? f->kept[0] : gather_issue(f, 0);  // lm_head is the embedding
        ev(f, ZT_EV_FWD_START, u);
        if (u == 0)
            f->be->embed_fwd(f, p);
        else
            f->be->layer_fwd(f, u - 1, p);
        ev(f, ZT_EV_FWD_END, u);
        if (keep && (u >= 1 || tied))
            f->kept[u] = s_cur;
        else
            param_release(f, s_cur);
        progress(f);
        s_cur = s_next;
        p = gather_use(f, s_cur);
    }
    return s_cur;
}

// Forward, the head's loss and backward of staged micro-batch `mb`, each unit's gradient
// reduce-scattered while the next unit computes. Keep-gathered: the layers' parameters are
// still resident from the forward, so the backward issues no gather.
static void train_micro(zt_fsdp *f, int mb, float scale) {
    const int L = f->lay.cfg.num_layers, head = L + 1, tied = f->lay.cfg.tie_word_embeddings;
    const int keep = f->keep_gathered;
    f->be->use_batch(f, mb);
    int s_emb;
    int s_cur = forward_units(f, keep, &s_emb);
    const void *emb = tied ? (keep ? f->pbuf[s_emb] : gather_use(f, s_emb)) : NULL;

    // head: fused final norm + lm_head + cross-entropy, forward and backward
    int s_layer = keep ? f->kept[L] : gather_issue(f, L);  // the last layer, for its backward
    int g_head = grad_acquire(f, head);
    int g_emb = tied ? grad_acquire(f, 0) : -1;
    ev(f, ZT_EV_BWD_START, head);
    f->be->head(f, mb, f->pbuf[s_cur], emb, f->gbuf[g_head], tied ? f->gbuf[g_emb] : NULL, scale);
    ev(f, ZT_EV_BWD_END, head);
    param_release(f, s_cur);
    if (tied) param_release(f, s_emb);
    if (keep && tied) f->kept[0] = -1;
    rs_issue(f, g_head);

    // backward through the layers
    s_cur = s_layer;
    for (int u = L; u >= 1; u--) {
        const void *p;
        int s_prev;
        if (keep) {
            p = f->pbuf[s_cur];
            s_prev = u - 1 >= 1 ? f->kept[u - 1] : -1;
            f->kept[u] = -1;
        } else {
            p = gather_use(f, s_cur);
            s_prev = u - 1 >= 1 ? gather_issue(f, u - 1) : -1;  // before this unit's reduce-scatter
        }
        int g = grad_acquire(f, u);
        ev(f, ZT_EV_BWD_START, u);
        f->be->layer_bwd(f, u - 1, p, f->gbuf[g]);
        ev(f, ZT_EV_BWD_END, u);
        param_release(f, s_cur);
        rs_issue(f, g);
        progress(f);
        s_cur = s_prev;
    }

    // embedding backward needs no parameters, only the token ids
    if (!tied) g_emb = grad_acquire(f, 0);
    ev(f, ZT_EV_BWD_START, 0);
    f->be->embed_bwd(f, f->gbuf[g_emb]);
    ev(f, ZT_EV_BWD_END, 0);
    rs_issue(f, g_emb);
}

// Forward and the head's loss only (evaluation) of staged micro-batch `slot`.
static void eval_micro(zt_fsdp *f, int slot) {
    const int tied = f->lay.cfg.tie_word_embeddings;
    f->be->use_batch(f, slot);
    int s_emb;
    const int s_cur = forward_units(f, 0, &s_emb);
    const void *emb = tied ? gather_use(f, s_emb) : NULL;
    f->be->head(f, slot, f->pbuf[s_cur], emb, NULL, NULL, 1.0f);
    param_release(f, s_cur);
    if (tied) param_release(f, s_emb);
}

// ---- data ------------------------------------------------------------------------------------

// ---- the step ------------------------------------------------------------------------------

int zt_fsdp_count_targets(zt_fsdp *f, const uint32_t *const *blocks, int nblocks, const char *what, int64_t *global) {
    const int64_t S = f->seq_len;
    if (!f->token_flags) {
        *global = (int64_t)f->data_world * nblocks * (S - 1);  // a context group's ranks share its blocks
        return 0;
    }
    if (!strcmp(zt_comm_backend_name(f->comm), "nccl"))
        return zt_err("FSDP engine: version-2 data (loss masks, documents) needs a host comm beside the NCCL one to "
                      "count each step's targets (zt_fsdp_init_cuda's comm; it is the NCCL comm here)");
    double n = 0;  // a context group's blocks counted once, by its first rank
    for (int i = 0; i < nblocks && f->ctx_rank == 0; i++) n += (double)zt_batch_count_targets(blocks[i], S, f->doc_isolated);
    double tw = zt_now();
    int rc = zt_allreduce(f->comm, &n, &n, 1, ZT_DT_F64, ZT_RED_SUM, what);  // exact: counts < 2^53
    f->t_wait += zt_now() - tw;
    *global = (int64_t)n;
    return rc;
}

// The two flags summed over ranks in one number: stops in the low bits, bad inputs above
// (exact in the float64 all-reduce for any world size below 2^16).
#define ZT_FSDP_BAD_UNIT 65536

int zt_fsdp_step(zt_fsdp *f, const uint32_t *const *blocks, int flags, zt_fsdp_stats *out) {
    const double t0 = zt_now();
    const int64_t S = f->seq_len, B = f->micro_batch;
    f->t_wait = 0;
    f->bytes_ag = f->bytes_rs = f->bytes_rep = f->bytes_ctx = 0;
    f->nevents = 0;
    zt_comm_set_context(f->comm, f->step + 1, f->epoch, 0);  // 1-based step in progress
    int64_t targets;
    if (zt_fsdp_count_targets(f, blocks, (int)(f->grad_accum * B), "step trained targets", &targets)) return -1;
    const float scale = targets ? (float)(1.0 / (double)targets) : 0.0f;

    f->stage_refused = 0;
    for (int mb = 0; mb < f->grad_accum; mb++) {
        f->micro = mb;
        (void)f->be->stage(f, blocks + (size_t)mb * B, mb);
    }
    const int refused = f->stage_refused > 0;  // an id outside the vocabulary: this rank's input is bad
    f->be->step_begin(f);
    for (int mb = 0; mb < f->grad_accum; mb++) {
        f->micro = mb;
        zt_comm_set_context(f->dcomm, f->step + 1, f->epoch, mb);
        if (f->ctx_comm) zt_comm_set_context(f->ctx_comm, f->step + 1, f->epoch, mb);
        train_micro(f, mb, scale);
    }
    // Hybrid sharding: the group-reduced gradient shards summed over the replicas, once per step.
    if (f->replicas > 1) {
        zt_comm_set_context(f->replica_comm, f->step + 1, f->epoch, f->grad_accum - 1);
        if (f->be->reduce_replicas(f) != 0) return -1;
    }
    zt_fsdp_reduced r;
    const int packed = (flags & ZT_FSDP_STOP ? 1 : 0) + ((flags & ZT_FSDP_INPUT_BAD) || refused ? ZT_FSDP_BAD_UNIT : 0);
    if (f->be->step_reduce(f, packed, &r) != 0) return -1;
    const int bad = r.stop / ZT_FSDP_BAD_UNIT;
    r.stop %= ZT_FSDP_BAD_UNIT;

    const double norm = sqrt(r.sumsq);
    const int nonfinite = r.nonfinite_ranks != 0 || !isfinite(r.loss) || !isfinite(norm);
    const double coef = zt_clip_coef(norm, f->hp.clip);
    const double lr = zt_lr_at(&f->hp, f->step);
    if (!bad) f->step++;
    // master, m and v are rewritten below: not before a reader outside the engine is done with them
    out->t_update_fence = f->update_fence ? f->update_fence(f->update_fence_arg) : 0.0;
    if (!nonfinite && targets > 0 && !bad)  // the same decision on every rank: it comes from the all-reduced values
        for (int i = 0; i < f->nunits; i++)
            if (f->units[i].valid > 0) f->be->update(f, i, coef, lr);
    if (f->be->step_end) f->be->step_end(f);
    out->loss = targets ? r.loss / (double)targets : 0.0;
    out->targets = targets;
    out->grad_norm = norm;
    out->clip_coef = coef;
    out->lr = lr;
    out->tokens = (int64_t)f->data_world * f->grad_accum * B * S;
    out->nonfinite = nonfinite;
    out->nonfinite_ranks = r.nonfinite_ranks;
    out->stop_requested = r.stop;
    out->input_bad = bad;
    out->input_refused = refused;
    out->t_step = zt_now() - t0;
    out->t_comm_wait = r.comm_wait;
    out->t_compute = out->t_step - r.comm_wait;
    out->bytes_gathered = f->bytes_ag;
    out->bytes_scattered = f->bytes_rs;
    out->bytes_replicated = f->bytes_rep;
    out->bytes_context = f->bytes_ctx;
    return 0;
}

// 1 + zt_err when a block of micro-batch m holds an id the model's vocabulary lacks (the ids
// as staging reads them: zt_batch_words keeps the low 30 bits of a word); 0 when none does.
static int blocks_outside_vocab(const zt_fsdp *f, const uint32_t *const *blocks, int m) {
    const int64_t S = f->seq_len, vocab = f->lay.cfg.vocab_size;
    if (vocab > (int64_t)ZT_TOK_ID_MASK) return 0;
    for (int64_t b = 0; b < f->micro_batch; b++) {
        if (!blocks[b]) continue;
        for (int64_t j = 0; j < S; j++)
            if ((blocks[b][j] & ZT_TOK_ID_MASK) >= (uint32_t)vocab)
                return zt_err("evaluation micro-batch %d, block %lld of it, position %lld: token id %u is not below "
                              "the model's vocab_size %lld; the block is refused",
                              m, (long long)b, (long long)j, blocks[b][j] & ZT_TOK_ID_MASK, (long long)vocab),
                       1;
    }
    return 0;
}

// Micro-batches use the staging slots round robin; after every grad_accum of them (a round)
// the backend hands the round's losses to the host (summed in micro-batch order), so a slot
// is refilled only after its last use has finished. With src->stop, every rank agrees before
// each micro-batch whether to go on (an all-reduce of [stop, bad] on the host comm): a stop
// request or a bad input on any rank ends the pass on every rank at the same micro-batch.
int zt_fsdp_eval_from(zt_fsdp *f, int nmicro, const zt_fsdp_eval_source *src, zt_fsdp_eval_result *out) {
    const int64_t B = f->micro_batch;
    const int saved_micro = f->micro;
    const uint32_t **blocks = zt_xcalloc((size_t)B, sizeof *blocks);
    double red[2] = {0, 0};
    memset(out, 0, sizeof *out);
    char why[ZT_ERR_MAX] = "";
    int rc = 0, pending = 0;
    f->stage_refused = 0;
    if (f->be->eval_begin) f->be->eval_begin(f);
    for (int m = 0; m < nmicro; m++) {
        int64_t flags[2] = {0, 0};  // ranks that want to stop, ranks whose input is bad
        if (src->stop && src->stop(src->ctx)) flags[0] = 1;
        if (!flags[0] && src->fetch(src->ctx, m, blocks) != 0) {
            flags[1] = 1;
            snprintf(why, sizeof why, "%s", zt_errmsg());
        } else if (!flags[0] && src->stop && blocks_outside_vocab(f, blocks, m)) {
            flags[1] = 1;  // agreed like a bad fetch, before anything is staged
            snprintf(why, sizeof why, "%s", zt_errmsg());
        }
        if (src->stop) {
            const double tw = zt_now();
            rc = zt_allreduce(f->comm, flags, flags, 2, ZT_DT_I64, ZT_RED_SUM, "evaluation: go on?");
            f->t_wait += zt_now() - tw;
            if (rc != 0) break;
        }
        if (flags[0] || flags[1]) {
            out->stopped = (int)flags[0];
            out->bad = (int)flags[1];
            break;
        }
        const int slot = m % f->grad_accum;
        f->micro = m;
        red[1] += (double)f->be->stage(f, blocks, slot);  // (without src->stop a bad id becomes a filler: below)
        eval_micro(f, slot);
        pending++;
        if (slot == f->grad_accum - 1 || m == nmicro - 1) {
            if ((rc = f->be->eval_losses(f, pending, &red[0])) != 0) break;
            pending = 0;
        }
        out->micro_done = m + 1;
    }
    double dropped = 0;  // an ended pass: the round's losses are read (the device drained) and dropped
    if (rc == 0 && pending) rc = f->be->eval_losses(f, pending, &dropped);
    f->micro = saved_micro;
    if (f->be->eval_end) f->be->eval_end(f);
    free(blocks);
    if (rc != 0) return -1;
    if (out->stopped || out->bad) {
        if (why[0]) zt_err("%s", why);  // this rank's own reason; the others know only that one failed
        return 0;
    }
    // {loss sum, targets}: exact in double (counts < 2^53), on every rank the same
    if (f->be->allreduce_f64(f, red, 2, "eval loss") != 0) return -1;
    out->loss_sum = red[0];
    out->targets = (int64_t)red[1];
    // no agreement (src->stop NULL) and a block refused at staging: the collectives all ran, the
    // sum lacks that block; this rank fails with the reason (zt_err, from the staging)
    if (f->stage_refused) return zt_err_prefix("evaluation");
    return 0;
}

typedef struct {
    const uint32_t *const *blocks;
    int64_t B;
} array_source;

static int array_fetch(void *ctx, int m, const uint32_t **blocks) {
    const array_source *a = ctx;
    memcpy(blocks, a->blocks + (size_t)m * (size_t)a->B, (size_t)a->B * sizeof *blocks);
    return 0;
}

int zt_fsdp_eval(zt_fsdp *f, const uint32_t *const *blocks, int nmicro, double *loss_sum, int64_t *targets) {
    array_source a = {blocks, f->micro_batch};
    const zt_fsdp_eval_source src = {.fetch = array_fetch, .ctx = &a};
    zt_fsdp_eval_result res;
    if (zt_fsdp_eval_from(f, nmicro, &src, &res) != 0) return -1;
    *loss_sum = res.loss_sum;
    *targets = res.targets;
    return 0;
}

// ---- lifetime ------------------------------------------------------------------------------

// flags: ZT_FSDP_HOST_MODEL (the CPU backend: the CPU model's activations; without it only
// the layout) and ZT_FSDP_NO_INIT (benchmarks, and --init, which writes every value: leave the
// master shards zero; seeded init of billions of parameters on one host thread takes minutes).
// The shard group and replica comms of hybrid sharding (G < W), the mesh's (engine/mesh.h):
// groups of G consecutive ranks; replica group = the ranks at the same position of every group.
static int take_groups(zt_fsdp *f, zt_comm *comm, const zt_mesh *mesh, int G, int C) {
    f->shard_world = G;
    f->shard_rank = f->rank % G;
    f->replica = f->rank / G;
    f->replicas = f->world / G;
    f->gcomm_host = comm;
    // Context parallelism: C consecutive ranks of a shard group share each block (engine/mesh.h).
    f->ctx_world = C;
    f->ctx_rank = f->rank % C;
    f->data_rank = f->rank / C;
    f->data_world = zt_data_parallel_ranks(f->world, C);
    if (C > 1) {
        if (zt_context_check(&(zt_context_job){.context = C, .shard_group = G, .world = f->world}) != 0) return -1;
        if (!mesh || zt_mesh_group(mesh, ZT_MESH_WORLD) != comm || zt_mesh_size(mesh, ZT_MESH_CONTEXT) != C)
            return zt_err("context parallelism (C = %d) takes its context groups from the process-group mesh "
                          "(zt_fsdp_opts.mesh, engine/mesh.h) of the engine's world with context groups of %d", C, C);
        f->ctx_comm = zt_mesh_group(mesh, ZT_MESH_CONTEXT);
    }
    if (G == f->world) return 0;
    if (!mesh)
        return zt_err("hybrid sharding (G = %d of %d ranks) takes its groups from a process-group mesh "
                      "(zt_fsdp_opts.mesh, engine/mesh.h)", G, f->world);
    if (zt_mesh_group(mesh, ZT_MESH_WORLD) != comm || zt_mesh_size(mesh, ZT_MESH_SHARD) != G)
        return zt_err("hybrid sharding: the mesh (world comm %s the engine's, shard groups of %d) does not match "
                      "G = %d", zt_mesh_group(mesh, ZT_MESH_WORLD) == comm ? "is" : "is not",
                      zt_mesh_size(mesh, ZT_MESH_SHARD), G);
    f->gcomm_host = zt_mesh_group(mesh, ZT_MESH_SHARD);
    f->replica_comm = zt_mesh_group(mesh, ZT_MESH_REPLICATE);
    return 0;
}

int zt_fsdp_check_shard_group(int shard_group, int world) {
    if (shard_group < 0 || shard_group > world || (shard_group > 0 && world % shard_group != 0))
        return zt_err("--shard-group %d does not divide the world of %d ranks: the shards are held by groups of G "
                      "consecutive ranks and replicated W/G times, so G must be a divisor of %d (or 0 / the "
                      "world: full shard)", shard_group, world, world);
    return 0;
}

int zt_fsdp_init_host(zt_fsdp *f, zt_comm *comm, const zt_model_config *cfg, const zt_ops *ops, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, int flags,
                      const zt_fsdp_opts *opts) {
    const int host_model = flags & ZT_FSDP_HOST_MODEL;
    memset(f, 0, sizeof *f);
    zt_comm_info info;
    zt_comm_get_info(comm, &info);
    if (zt_fsdp_check_batch(micro_batch, grad_accum) != 0) return -1;
    const int G = opts && opts->shard_group > 0 ? opts->shard_group : info.world;
    if (zt_fsdp_check_shard_group(G, info.world) != 0) return -1;
    if (!cfg->family) return zt_err("FSDP engine: the model config names no model family");
    f->fam = cfg->family;
    const int C = opts && opts->context > 1 ? opts->context : 1;
    if (zt_context_check(&(zt_context_job){.context = C, .seq_len = seq_len, .family = cfg->family, .config = cfg}) != 0)
        return -1;
    if (zt_model_layout_init(&f->lay, cfg) != 0) return -1;
    f->seq_local = zt_context_split(seq_len, C, &f->ctx_index);
    if (f->seq_local < 0) return -1;
    f->comm = f->dcomm = comm;
    f->rank = info.rank;
    f->world = info.world;
    f->ops = ops;
    f->hp = *hp;
    f->micro_batch = micro_batch;
    f->grad_accum = grad_accum;
    f->seq_len = seq_len;
    const zt_model_layout *lay = &f->lay;
    f->nunits = lay->nunits;
    f->units = zt_xcalloc((size_t)f->nunits, sizeof *f->units);
    if (take_groups(f, comm, opts ? opts->mesh : NULL, G, C) != 0) return -1;
    f->dcomm = f->gcomm_host;
    if (C > 1) zt_fsdp_context_stage_init(f);
    if (host_model && C > 1) {  // the family's model holds this rank's tokens; attention exchanges over the group
        const zt_family_context cx = zt_fsdp_family_context(f);
        if (!(f->cpu_model = f->fam->cpu->create(cfg, ops, micro_batch, seq_len, &cx))) return -1;
    } else if (host_model && !(f->cpu_model = f->fam->cpu->create(cfg, ops, micro_batch, seq_len, NULL))) {
        return -1;
    }
    // Keep-gathered: every unit may be resident at once (forward holds units 0..u and u+1 in flight).
    f->keep_gathered = opts && opts->keep_gathered;
    f->np = f->keep_gathered ? (f->nunits > ZT_FSDP_PARAM_SLOTS ? f->nunits : ZT_FSDP_PARAM_SLOTS)
                             : ZT_FSDP_PARAM_SLOTS;
    f->ng = ZT_FSDP_GRAD_SLOTS;
    f->pbuf = zt_xcalloc((size_t)f->np, sizeof *f->pbuf);
    f->pbuf_unit = zt_xcalloc((size_t)f->np, sizeof *f->pbuf_unit);
    f->kept = zt_xcalloc((size_t)f->nunits, sizeof *f->kept);
    for (int s = 0; s < f->np; s++) f->pbuf_unit[s] = -1;
    for (int u = 0; u < f->nunits; u++) f->kept[u] = -1;
    for (int s = 0; s < ZT_FSDP_GRAD_SLOTS; s++) f->gbuf_unit[s] = -1;
    const int64_t quantum = (int64_t)f->shard_world * ZT_FSDP_ALIGN;
    int64_t max_numel = 0;
    for (int i = 0; i < f->nunits; i++) {
        zt_fsdp_unit *u = &f->units[i];
        u->numel = lay->units[i].numel;
        u->padded = (u->numel + quantum - 1) / quantum * quantum;
        u->shard = u->padded / f->shard_world;
        u->lo = (int64_t)f->shard_rank * u->shard;
        int64_t v = u->numel - u->lo;
        u->valid = v < 0 ? 0 : v > u->shard ? u->shard : v;
        u->master = zt_xcalloc((size_t)u->shard, sizeof(float));
        u->m = zt_xcalloc((size_t)u->shard, sizeof(float));
        u->v = zt_xcalloc((size_t)u->shard, sizeof(float));
        if (u->padded > f->max_padded) f->max_padded = u->padded;
        if (u->numel > max_numel) max_numel = u->numel;
    }
    // Same per-tensor init streams as the single-process trainer: identical values at any world size.
    float *tmp = zt_xmalloc((size_t)max_numel * sizeof(float));
    for (int i = 0; i < f->nunits && !(flags & ZT_FSDP_NO_INIT); i++) {
        zt_model_init_unit(lay, i, tmp, seed);
        memcpy(f->units[i].master, tmp + f->units[i].lo, (size_t)f->units[i].valid * sizeof(float));
    }
    free(tmp);
    return 0;
}

int zt_fsdp_cuda_available(void) { return zt_cuda_module_load() != NULL; }

int zt_fsdp_cuda_cudnn_built(void) {
    const zt_cuda_module *m = zt_cuda_module_load();
    return m && m->cudnn_built && m->cudnn_built();
}

int zt_fsdp_cuda_cudnn_serves(const zt_model_config *cfg) {
    if (!zt_fsdp_cuda_cudnn_built() || !cfg->family) return 0;
    const zt_family_cuda *fc = zt_cuda_module_load()->family(cfg->family->name);
    return fc && !fc->no_cudnn && (!fc->cudnn_serves || fc->cudnn_serves(cfg));
}

static char g_no_cuda[ZT_ERR_MAX];  // why the last zt_fsdp_cuda_devices that looked found none

int zt_fsdp_cuda_devices(int load) {
    if (!load && !zt_cuda_module_loaded() && !zt_cuda_driver_present()) return 0;
    const zt_cuda_module *m = zt_cuda_module_load();
    if (!m) {
        snprintf(g_no_cuda, sizeof g_no_cuda, "%s", zt_errmsg());
        return 0;
    }
    zt_err_clear();
    const int n = m->devices();
    g_no_cuda[0] = 0;
    if (n < 1) {
        char mod[ZT_ERR_MAX];
        snprintf(g_no_cuda, sizeof g_no_cuda, "the CUDA module %.1500s loaded but sees no CUDA device: %.400s (check "
                 "CUDA_VISIBLE_DEVICES and the driver: nvidia-smi)", zt_cuda_module_describe(mod, sizeof mod),
                 zt_errmsg());
    }
    return n;
}

const char *zt_fsdp_cuda_why_none(void) { return g_no_cuda[0] ? g_no_cuda : NULL; }

void zt_fsdp_cuda_describe(zt_comm *dcomm, char *buf, size_t n) {
    const zt_cuda_module *m = zt_cuda_module_load();
    if (m)
        m->describe(dcomm, buf, n);
    else
        snprintf(buf, n, "cuda backend: not available (%s)", zt_errmsg());
}

int zt_fsdp_init_cuda(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_model_config *cfg, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed,
                      const zt_fsdp_opts *opts) {
    memset(f, 0, sizeof *f);
    const zt_cuda_module *m = zt_cuda_module_load();
    if (!m) return -1;
    if (!cfg->family) return zt_err("FSDP engine: the model config names no model family");
    if (!m->family(cfg->family->name))
        return zt_err("the CUDA module has no GPU passes for the model family \"%s\" (model/family_cuda.c)",
                      cfg->family->name);
    if (opts && zt_context_check(&(zt_context_job){.context = opts->context, .family = cfg->family, .config = cfg,
                                                   .gpu = 1}) != 0)
        return -1;
    zt_fsdp_opts o = {0};
    if (opts) o = *opts;
    return m->engine_init(f, comm, dcomm, cfg, micro_batch, grad_accum, seq_len, hp, seed, &o);
}

int zt_fsdp_to_device(zt_fsdp *f) { return f->be && f->be->to_device ? f->be->to_device(f) : 0; }
int zt_fsdp_to_host(zt_fsdp *f) { return f->be && f->be->to_host ? f->be->to_host(f) : 0; }
void zt_fsdp_set_update_fence(zt_fsdp *f, double (*fence)(void *arg), void *arg) {
    f->update_fence = fence;
    f->update_fence_arg = arg;
}
int zt_fsdp_has_snapshot(const zt_fsdp *f) { return f->be && f->be->snapshot_begin && f->be->snapshot_ready; }
int zt_fsdp_snapshot_begin(zt_fsdp *f) {
    return zt_fsdp_has_snapshot(f) ? f->be->snapshot_begin(f) : zt_err("this engine has no device snapshot");
}
int zt_fsdp_snapshot_ready(zt_fsdp *f, int wait) { return zt_fsdp_has_snapshot(f) ? f->be->snapshot_ready(f, wait) : 1; }

int zt_fsdp_gather_full(zt_fsdp *f, float **full) {
    if (zt_fsdp_to_host(f) != 0) return -1;
    float *tmp = zt_xmalloc((size_t)f->max_padded * sizeof(float));
    for (int i = 0; i < f->nunits; i++) {
        const zt_fsdp_unit *u = &f->units[i];
        if (zt_allgather(f->gcomm_host, u->master, tmp, (size_t)u->shard, ZT_DT_F32, "gather full params") != 0) {
            free(tmp);
            return -1;
        }
        memcpy(full[i], tmp, (size_t)u->numel * sizeof(float));
    }
    free(tmp);
    return 0;
}

void zt_fsdp_memory_usage(const zt_fsdp *f, zt_fsdp_memory *m) {
    memset(m, 0, sizeof *m);
    if (f->be) f->be->memory(f, m);
}

int zt_fsdp_set_data(zt_fsdp *f, int token_flags, int isolated) {
    if (isolated && !token_flags)
        return zt_err("isolated document attention needs document boundaries: a version 2 dataset (zerotrain pack "
                      "--input chat)");
    if (f->be->check_data && f->be->check_data(f, isolated)) return -1;
    f->token_flags = token_flags;
    f->doc_isolated = isolated;
    return 0;
}

void zt_fsdp_free(zt_fsdp *f) {
    if (!f->units) {  // a constructor that failed before the units: the layout and model it made
        free(f->ctx_index);
        if (f->cpu_model) f->fam->cpu->destroy(f->cpu_model);
        zt_model_layout_free(&f->lay);
        memset(f, 0, sizeof *f);
        return;
    }
    if (f->be) f->be->free(f);  // the GPU backend unpins (and owns) the host shards
    for (int i = 0; i < f->nunits; i++) {
        free(f->units[i].master);
        free(f->units[i].m);
        free(f->units[i].v);
        free(f->units[i].grad);
    }
    free(f->units);
    free(f->events);
    free(f->pbuf), free(f->pbuf_unit), free(f->kept);
    free(f->ctx_index), free(f->ctx_ids), free(f->ctx_tgt), free(f->ctx_pos);
    if (f->cpu_model) f->fam->cpu->destroy(f->cpu_model);
    zt_model_layout_free(&f->lay);
    memset(f, 0, sizeof *f);
}

int zt_fsdp_check_batch(int micro_batch, int grad_accum) {
    if (micro_batch < 1 || grad_accum < 1)
        return zt_err("--micro-batch (%d) and --grad-accum (%d) must be >= 1", micro_batch, grad_accum);
    return 0;
}
