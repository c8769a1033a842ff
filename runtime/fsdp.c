// The ZeRO-3 schedule on top of the per-unit model passes and the comm layer.
// Forward:  gather(0); for u: issue gather(u+1) -> compute u -> release u.
// Head:     prefetch the last layer, fused norm + lm_head + loss fwd/bwd, reduce-scatter.
// Backward: for u = L..1: wait gather(u), issue gather(u-1) (before u's reduce-scatter,
//           because one communicator runs collectives in issue order), compute u,
//           release u, issue reduce-scatter(u) which runs while u-1 computes.
#include "runtime/fsdp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/common.h"
#include "runtime/fsdp_internal.h"

void zt_fsdp_log(zt_fsdp *f, zt_fsdp_ev_kind k, int unit, int micro) {
    if (f->nevents == f->events_cap) {
        f->events_cap = f->events_cap ? 2 * f->events_cap : 256;
        f->events = realloc(f->events, (size_t)f->events_cap * sizeof *f->events);
        if (!f->events) zt_fatal("out of memory growing the FSDP event log");
    }
    f->events[f->nevents++] = (zt_fsdp_event){k, unit, micro, zt_now()};
}

static void ev(zt_fsdp *f, zt_fsdp_ev_kind k, int unit) { zt_fsdp_log(f, k, unit, f->micro); }

// ---- parameter pool --------------------------------------------------------

static int gather_issue(zt_fsdp *f, int unit) {
    int s = 0;
    while (s < ZT_FSDP_PARAM_SLOTS && f->pbuf_unit[s] != -1) s++;
    if (s == ZT_FSDP_PARAM_SLOTS) zt_fatal("FSDP: parameter pool exhausted gathering unit %d (schedule bug)", unit);
    const zt_fsdp_unit *u = &f->units[unit];
    char label[48];
    snprintf(label, sizeof label, "unit %d params", unit);
    f->pbuf_unit[s] = unit;
    f->preq[s] = zt_iallgather(f->comm, u->master, f->pbuf[s], (size_t)u->shard, ZT_DT_F32, label);
    if (!f->preq[s]) zt_die_on_err();
    f->bytes_ag += (int64_t)(f->world - 1) * u->shard * (int64_t)sizeof(float);
    ev(f, ZT_EV_AG_ISSUE, unit);
    return s;
}

static void gather_wait(zt_fsdp *f, int s) {
    double t0 = zt_now();
    if (zt_wait(f->comm, f->preq[s]) != 0) zt_die_on_err();
    f->t_wait += zt_now() - t0;
    f->preq[s] = NULL;
    ev(f, ZT_EV_AG_DONE, f->pbuf_unit[s]);
}

static void param_release(zt_fsdp *f, int s) { f->pbuf_unit[s] = -1; }

// ---- gradient pool -----------------------------------------------------------

static void rs_finish(zt_fsdp *f, int s) {
    zt_fsdp_unit *u = &f->units[f->gbuf_unit[s]];
    double t0 = zt_now();
    if (zt_wait(f->comm, f->greq[s]) != 0) zt_die_on_err();
    f->t_wait += zt_now() - t0;
    f->greq[s] = NULL;
    f->ops->add(u->grad, u->grad, f->grecv[s], u->shard);  // accumulate over micro-batches
    zt_fsdp_log(f, ZT_EV_RS_DONE, f->gbuf_unit[s], f->gbuf_micro[s]);
    f->gbuf_unit[s] = -1;
}

static int grad_acquire(zt_fsdp *f, int unit) {
    for (;;) {
        for (int s = 0; s < ZT_FSDP_GRAD_SLOTS; s++)
            if (f->gbuf_unit[s] == -1) {
                f->gbuf_unit[s] = unit;
                memset(f->gbuf[s], 0, (size_t)f->units[unit].padded * sizeof(float));
                return s;
            }
        int oldest = -1;  // no free slot: complete the oldest reduce-scatter in flight
        for (int s = 0; s < ZT_FSDP_GRAD_SLOTS; s++)
            if (f->greq[s] && (oldest < 0 || f->gbuf_order[s] < f->gbuf_order[oldest])) oldest = s;
        if (oldest < 0) zt_fatal("FSDP: gradient pool exhausted for unit %d (schedule bug)", unit);
        rs_finish(f, oldest);
    }
}

static void rs_issue(zt_fsdp *f, int s) {
    const int unit = f->gbuf_unit[s];
    const zt_fsdp_unit *u = &f->units[unit];
    char label[48];
    snprintf(label, sizeof label, "unit %d grads", unit);
    f->greq[s] = zt_ireduce_scatter(f->comm, f->gbuf[s], f->grecv[s], (size_t)u->shard, ZT_DT_F32, ZT_RED_SUM, label);
    if (!f->greq[s]) zt_die_on_err();
    f->gbuf_order[s] = f->rs_seq++;
    f->gbuf_micro[s] = f->micro;
    f->bytes_rs += (int64_t)(f->world - 1) * u->shard * (int64_t)sizeof(float);
    ev(f, ZT_EV_RS_ISSUE, unit);
}

static void rs_drain(zt_fsdp *f) {
    for (;;) {
        int oldest = -1;
        for (int s = 0; s < ZT_FSDP_GRAD_SLOTS; s++)
            if (f->greq[s] && (oldest < 0 || f->gbuf_order[s] < f->gbuf_order[oldest])) oldest = s;
        if (oldest < 0) return;
        rs_finish(f, oldest);
    }
}

// ---- lifetime ----------------------------------------------------------------

// The state both engines share: the unit table, this rank's slices, and the host
// master/m/v shards initialised from `seed`. flags: ZT_FSDP_HOST_MODEL (the CPU
// engine: CPU activations, host gradient shards and pools; without it only the
// layout) and ZT_FSDP_NO_INIT (benchmarks: leave the master shards zero; seeded init
// of billions of parameters on one host thread takes a minute).
int zt_fsdp_init_host(zt_fsdp *f, zt_comm *comm, const zt_qwen3_config *cfg, const zt_ops *ops, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, int flags) {
    const int host_model = flags & ZT_FSDP_HOST_MODEL;
    memset(f, 0, sizeof *f);
    zt_comm_info info;
    zt_comm_get_info(comm, &info);
    if (micro_batch < 1 || grad_accum < 1)
        return zt_err("--micro-batch (%d) and --grad-accum (%d) must be >= 1", micro_batch, grad_accum);
    if (host_model ? zt_qwen3_create(&f->model, cfg, ops, micro_batch, seq_len) != 0
                   : zt_qwen3_layout_init(&f->model.lay, cfg) != 0)
        return -1;
    if (!host_model) {
        f->model.B = micro_batch;
        f->model.S = seq_len;
        f->model.N = micro_batch * seq_len;
    }
    f->comm = comm;
    f->rank = info.rank;
    f->world = info.world;
    f->ops = ops;
    f->hp = *hp;
    f->micro_batch = micro_batch;
    f->grad_accum = grad_accum;
    f->seq_len = seq_len;
    const zt_qwen3_layout *lay = &f->model.lay;
    f->nunits = lay->nunits;
    f->units = zt_xcalloc((size_t)f->nunits, sizeof *f->units);
    const int64_t quantum = (int64_t)f->world * ZT_FSDP_ALIGN;
    int64_t max_numel = 0;
    for (int i = 0; i < f->nunits; i++) {
        zt_fsdp_unit *u = &f->units[i];
        u->numel = lay->units[i].numel;
        u->padded = (u->numel + quantum - 1) / quantum * quantum;
        u->shard = u->padded / f->world;
        u->lo = (int64_t)f->rank * u->shard;
        int64_t v = u->numel - u->lo;
        u->valid = v < 0 ? 0 : v > u->shard ? u->shard : v;
        u->master = zt_xcalloc((size_t)u->shard, sizeof(float));
        u->m = zt_xcalloc((size_t)u->shard, sizeof(float));
        u->v = zt_xcalloc((size_t)u->shard, sizeof(float));
        u->grad = host_model ? zt_xcalloc((size_t)u->shard, sizeof(float)) : NULL;
        if (u->padded > f->max_padded) f->max_padded = u->padded;
        if (u->numel > max_numel) max_numel = u->numel;
    }
    // Same per-tensor init streams as the single-process trainer: identical values at any world size.
    float *tmp = zt_xmalloc((size_t)max_numel * sizeof(float));
    for (int i = 0; i < f->nunits && !(flags & ZT_FSDP_NO_INIT); i++) {
        zt_qwen3_init_unit(lay, i, tmp, seed);
        memcpy(f->units[i].master, tmp + f->units[i].lo, (size_t)f->units[i].valid * sizeof(float));
    }
    free(tmp);
    if (!host_model) return 0;
    for (int s = 0; s < ZT_FSDP_PARAM_SLOTS; s++) {
        f->pbuf[s] = zt_xcalloc((size_t)f->max_padded, sizeof(float));
        f->pbuf_unit[s] = -1;
    }
    for (int s = 0; s < ZT_FSDP_GRAD_SLOTS; s++) {
        f->gbuf[s] = zt_xcalloc((size_t)f->max_padded, sizeof(float));
        f->grecv[s] = zt_xcalloc((size_t)f->max_padded / f->world, sizeof(float));
        f->gbuf_unit[s] = -1;
    }
    f->dx = zt_xcalloc((size_t)(f->model.N * cfg->hidden_size), sizeof(float));
    f->batch = zt_xcalloc((size_t)(micro_batch * seq_len), sizeof(uint32_t));
    return 0;
}

int zt_fsdp_init(zt_fsdp *f, zt_comm *comm, const zt_qwen3_config *cfg, const zt_ops *ops, int micro_batch,
                 int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed) {
    return zt_fsdp_init_host(f, comm, cfg, ops, micro_batch, grad_accum, seq_len, hp, seed, ZT_FSDP_HOST_MODEL);
}

#ifndef ZT_HAVE_CUDA_FSDP
int zt_fsdp_cuda_available(void) { return 0; }
int zt_fsdp_cuda_devices(void) { return 0; }
void zt_fsdp_cuda_set_recompute(int on) { (void)on; }
int zt_fsdp_cuda_set_pools(int param_slots, int grad_slots) {
    return param_slots || grad_slots ? zt_err("GPU FSDP pools: no GPU engine in this build") : 0;
}
int zt_fsdp_cuda_set_attention(int cudnn) { return cudnn ? zt_err("--attention cudnn: no GPU engine in this build") : 0; }
void zt_fsdp_cuda_describe(zt_comm *dcomm, char *buf, size_t n) {
    (void)dcomm;
    snprintf(buf, n, "cuda backend: not built");
}
int zt_fsdp_init_cuda(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_qwen3_config *cfg, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed) {
    (void)comm, (void)dcomm, (void)cfg, (void)micro_batch, (void)grad_accum, (void)seq_len, (void)hp, (void)seed;
    memset(f, 0, sizeof *f);
    return zt_err("--device cuda: this zerotrain was built without the GPU engine (it needs the CUDA toolkit and "
                  "NCCL at configure time; see docs/cuda.md)");
}
int zt_fsdp_init_cuda_bench(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_qwen3_config *cfg, int micro_batch,
                            int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, float a) {
    (void)a;
    return zt_fsdp_init_cuda(f, comm, dcomm, cfg, micro_batch, grad_accum, seq_len, hp, seed);
}
int zt_fsdp_to_device(zt_fsdp *f) { return f->cu ? zt_err("GPU engine not built") : 0; }
int zt_fsdp_to_host(zt_fsdp *f) { return f->cu ? zt_err("GPU engine not built") : 0; }
#endif

int zt_fsdp_gather_full(zt_fsdp *f, float **full) {
    if (zt_fsdp_to_host(f) != 0) return -1;
    float *tmp = zt_xmalloc((size_t)f->max_padded * sizeof(float));
    for (int i = 0; i < f->nunits; i++) {
        const zt_fsdp_unit *u = &f->units[i];
        if (zt_allgather(f->comm, u->master, tmp, (size_t)u->shard, ZT_DT_F32, "gather full params") != 0) {
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
#ifdef ZT_HAVE_CUDA_FSDP
    if (f->cu) {
        zt_fsdp_cuda_memory(f, m);
        return;
    }
#endif
    for (int i = 0; i < f->nunits; i++) {
        int64_t b = f->units[i].shard * (int64_t)sizeof(float);
        m->params += b;
        m->grads += b;
        m->optimizer += 2 * b;
    }
    m->buffers = (int64_t)sizeof(float) * (ZT_FSDP_PARAM_SLOTS * f->max_padded +
                                           ZT_FSDP_GRAD_SLOTS * (f->max_padded + f->max_padded / f->world));
    m->activations = f->model.act_bytes + (int64_t)sizeof(float) * f->model.N * f->model.lay.cfg.hidden_size;
}

void zt_fsdp_free(zt_fsdp *f) {
    if (!f->units) return;
#ifdef ZT_HAVE_CUDA_FSDP
    if (f->cu) zt_fsdp_cuda_free(f);  // unpins the host shards too
#endif
    for (int i = 0; i < f->nunits; i++) {
        free(f->units[i].master);
        free(f->units[i].m);
        free(f->units[i].v);
        free(f->units[i].grad);
    }
    free(f->units);
    for (int s = 0; s < ZT_FSDP_PARAM_SLOTS; s++) free(f->pbuf[s]);
    for (int s = 0; s < ZT_FSDP_GRAD_SLOTS; s++) {
        free(f->gbuf[s]);
        free(f->grecv[s]);
    }
    free(f->dx);
    free(f->batch);
    free(f->events);
    if (f->model.ops)
        zt_qwen3_destroy(&f->model);
    else
        zt_qwen3_layout_free(&f->model.lay);  // GPU engine: no host model was built
    memset(f, 0, sizeof *f);
}

// ---- one micro-batch -----------------------------------------------------------

int zt_fsdp_set_data(zt_fsdp *f, int token_flags, int isolated) {
    if (isolated && !token_flags)
        return zt_err("isolated document attention needs document boundaries: a version 2 dataset (zerotrain pack "
                      "--input chat)");
#ifdef ZT_HAVE_CUDA_FSDP
    if (f->cu && zt_fsdp_cuda_check_data(f, isolated)) return -1;
#endif
    f->token_flags = token_flags;
    f->doc_isolated = isolated;
    f->model.isolated = isolated;
    return 0;
}

int zt_fsdp_count_targets(zt_fsdp *f, const uint32_t *const *blocks, int nblocks, const char *what, int64_t *global) {
    const int64_t S = f->seq_len;
    if (!f->token_flags) {
        *global = (int64_t)f->world * nblocks * (S - 1);
        return 0;
    }
    double n = 0;
    for (int i = 0; i < nblocks; i++) n += (double)zt_qwen3_count_targets(blocks[i], S, f->doc_isolated);
    double tw = zt_now();
    int rc = zt_allreduce(f->comm, &n, &n, 1, ZT_DT_F64, ZT_RED_SUM, what);  // exact: counts < 2^53
    f->t_wait += zt_now() - tw;
    *global = (int64_t)n;
    return rc;
}

// One micro-batch through the units: forward, then (train) the head's loss and
// backward with gradients reduce-scattered, or (!train) the head's loss only.
// live (eval only, may be NULL): live[b] == 0 makes block b a filler whose targets count nothing.
static double micro_step(zt_fsdp *f, const uint32_t *raw, float scale, int train, const uint8_t *live) {
    zt_qwen3 *m = &f->model;
    const int L = m->lay.cfg.num_layers, head = L + 1;
    const int tied = m->lay.cfg.tie_word_embeddings;
    m->ntargets = zt_qwen3_batch(raw, m->B, m->S, f->doc_isolated, m->ids, m->targets, m->pos);
    for (int64_t b = 0; live && b < m->B; b++)
        if (!live[b]) m->ntargets -= zt_qwen3_drop_row_targets(m->targets, b, m->S);
    const uint32_t *tokens = m->ids;

    // forward: units 0..L, each gathered while its predecessor computes
    int s_cur = gather_issue(f, 0), s_emb = -1;
    gather_wait(f, s_cur);
    for (int u = 0; u <= L; u++) {
        int s_next = gather_issue(f, u + 1);
        if (u + 1 == head && tied) s_emb = gather_issue(f, 0);  // lm_head is the embedding
        ev(f, ZT_EV_FWD_START, u);
        if (u == 0)
            zt_qwen3_embed_fwd(m, f->pbuf[s_cur], tokens);
        else
            zt_qwen3_layer_fwd(m, u - 1, f->pbuf[s_cur]);
        ev(f, ZT_EV_FWD_END, u);
        param_release(f, s_cur);  // reshard after forward
        zt_comm_progress(f->comm);
        gather_wait(f, s_next);
        if (s_emb >= 0 && u + 1 == head) gather_wait(f, s_emb);
        s_cur = s_next;
    }

    if (!train) {  // evaluation: the head's loss, no gradients, nothing left in flight
        const zt_unit_layout *hl = &m->lay.units[head];
        const float *lm_w = tied ? f->pbuf[s_emb] : f->pbuf[s_cur] + hl->t[1].offset;
        double loss = zt_qwen3_head_fwd_bwd(m, f->pbuf[s_cur], lm_w, m->targets, 1.0f, NULL, NULL, NULL);
        param_release(f, s_cur);
        if (tied) param_release(f, s_emb);
        return loss;
    }

    // head: fused final norm + lm_head + cross-entropy, forward and backward
    int s_layer = gather_issue(f, L);  // the last layer, for its backward
    const zt_unit_layout *hl = &m->lay.units[head];
    const float *lm_w = tied ? f->pbuf[s_emb] : f->pbuf[s_cur] + hl->t[1].offset;
    int g_head = grad_acquire(f, head);
    int g_emb = tied ? grad_acquire(f, 0) : -1;
    float *dlm = tied ? f->gbuf[g_emb] : f->gbuf[g_head] + hl->t[1].offset;
    ev(f, ZT_EV_BWD_START, head);
    double loss = zt_qwen3_head_fwd_bwd(m, f->pbuf[s_cur], lm_w, m->targets, scale, f->dx, f->gbuf[g_head], dlm);
    ev(f, ZT_EV_BWD_END, head);
    param_release(f, s_cur);
    if (tied) param_release(f, s_emb);
    rs_issue(f, g_head);

    // backward through the layers
    s_cur = s_layer;
    for (int u = L; u >= 1; u--) {
        gather_wait(f, s_cur);
        int s_prev = u - 1 >= 1 ? gather_issue(f, u - 1) : -1;  // before this unit's reduce-scatter
        int g = grad_acquire(f, u);
        ev(f, ZT_EV_BWD_START, u);
        zt_qwen3_layer_bwd(m, u - 1, f->pbuf[s_cur], f->gbuf[g], f->dx);
        ev(f, ZT_EV_BWD_END, u);
        param_release(f, s_cur);
        rs_issue(f, g);
        zt_comm_progress(f->comm);
        s_cur = s_prev;
    }

    // embedding backward needs no parameters, only the token ids
    if (!tied) g_emb = grad_acquire(f, 0);
    ev(f, ZT_EV_BWD_START, 0);
    zt_qwen3_embed_bwd(m, tokens, f->dx, f->gbuf[g_emb]);
    ev(f, ZT_EV_BWD_END, 0);
    rs_issue(f, g_emb);
    return loss;
}

int zt_fsdp_step(zt_fsdp *f, const uint32_t *const *blocks, int stop_request, zt_fsdp_stats *out) {
#ifdef ZT_HAVE_CUDA_FSDP
    if (f->cu) return zt_fsdp_cuda_step(f, blocks, stop_request, out);
#endif
    const double t0 = zt_now();
    const int64_t S = f->seq_len, B = f->micro_batch;
    f->t_wait = 0;
    f->bytes_ag = f->bytes_rs = 0;
    f->nevents = 0;
    zt_comm_set_context(f->comm, f->step + 1, f->epoch, 0);
    int64_t targets;
    if (zt_fsdp_count_targets(f, blocks, (int)(f->grad_accum * B), "step trained targets", &targets)) return -1;
    const float scale = targets ? (float)(1.0 / (double)targets) : 0.0f;
    for (int i = 0; i < f->nunits; i++) memset(f->units[i].grad, 0, (size_t)f->units[i].shard * sizeof(float));

    double loss = 0;
    for (int mb = 0; mb < f->grad_accum; mb++) {
        f->micro = mb;
        zt_comm_set_context(f->comm, f->step + 1, f->epoch, mb);  // 1-based step in progress
        for (int64_t b = 0; b < B; b++) memcpy(f->batch + b * S, blocks[mb * B + b], (size_t)S * sizeof(uint32_t));
        loss += micro_step(f, f->batch, scale, 1, NULL);
    }
    rs_drain(f);

    // One control all-reduce per step: summed loss, non-finite flag, grad sum of squares, stop requests.
    double red[4] = {loss, isfinite(loss) ? 0.0 : 1.0, 0.0, stop_request ? 1.0 : 0.0};
    for (int i = 0; i < f->nunits; i++) red[2] += f->ops->sumsq(f->units[i].grad, f->units[i].valid);
    if (!isfinite(red[0])) red[0] = 0;  // the flag carries it; keep the sum finite
    double tw = zt_now();
    if (zt_allreduce(f->comm, red, red, 4, ZT_DT_F64, ZT_RED_SUM, "step loss/grad-norm") != 0) return -1;
    f->t_wait += zt_now() - tw;

    const double norm = sqrt(red[2]);
    const int nonfinite = red[1] > 0 || !isfinite(norm);
    const double coef = zt_clip_coef(norm, f->hp.clip);
    const double lr = zt_lr_at(&f->hp, f->step);
    f->step++;
    if (!nonfinite && targets > 0) {  // the same decision on every rank: it comes from the all-reduced values
        for (int i = 0; i < f->nunits; i++) {
            zt_fsdp_unit *u = &f->units[i];
            if (coef < 1.0) f->ops->scale(u->grad, (float)coef, u->shard);
            if (u->valid > 0)
                zt_adamw_range(f->ops, &f->model.lay.units[i], u->lo, u->valid, u->master, u->grad, u->m, u->v, lr,
                               &f->hp, f->step);
        }
    }
    out->loss = targets ? red[0] / (double)targets : 0.0;
    out->targets = targets;
    out->grad_norm = norm;
    out->clip_coef = coef;
    out->lr = lr;
    out->tokens = (int64_t)f->world * f->grad_accum * B * S;
    out->nonfinite = nonfinite;
    out->nonfinite_ranks = (int)red[1];
    out->stop_requested = (int)red[3];
    out->t_step = zt_now() - t0;
    out->t_comm_wait = f->t_wait;
    out->t_compute = out->t_step - f->t_wait;
    out->bytes_gathered = f->bytes_ag;
    out->bytes_scattered = f->bytes_rs;
    return 0;
}

int zt_fsdp_eval(zt_fsdp *f, const uint32_t *const *blocks, int nmicro, double *loss_sum, int64_t *targets) {
#ifdef ZT_HAVE_CUDA_FSDP
    if (f->cu) return zt_fsdp_cuda_eval(f, blocks, nmicro, loss_sum, targets);
#endif
    const int64_t S = f->seq_len, B = f->micro_batch;
    const int saved_micro = f->micro;
    double red[2] = {0, 0};
    uint8_t *live = zt_xmalloc((size_t)B);
    for (int mb = 0; mb < nmicro; mb++) {
        f->micro = mb;
        for (int64_t b = 0; b < B; b++) {
            const uint32_t *blk = blocks[mb * B + b];
            live[b] = blk != NULL;
            if (blk) memcpy(f->batch + b * S, blk, (size_t)S * sizeof(uint32_t));
            else memset(f->batch + b * S, 0, (size_t)S * sizeof(uint32_t));
        }
        red[0] += micro_step(f, f->batch, 1.0f, 0, live);
        red[1] += (double)f->model.ntargets;
    }
    free(live);
    f->micro = saved_micro;
    if (zt_allreduce(f->comm, red, red, 2, ZT_DT_F64, ZT_RED_SUM, "eval loss") != 0) return -1;
    *loss_sum = red[0];
    *targets = (int64_t)red[1];
    return 0;
}
