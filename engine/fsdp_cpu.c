// The CPU backend of the FSDP schedule (fsdp.c): fp32 host buffers, any zt_comm, the
// model family's CPU passes (model/family.h: f->fam->cpu on f->cpu_model). A collective's
// completion is a host wait (zt_wait, under the comm layer's deadline); a gradient slot's
// reduce-scatter is finished (waited and added into the unit's shard) when the schedule hands
// the slot out again or at the step's end.
// defines: zt_fsdp_init, zt_fsdp_cpu_backend
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/fsdp_internal.h"

#define G ZT_FSDP_GRAD_SLOTS

typedef struct {
    zt_req **preq;           // [np] the gather in flight into each parameter slot
    float *grecv[G];
    zt_req *greq[G];
    int gpend[G];            // the slot's reduce-scatter is issued and not yet added into its shard
    int local;               // a shard group of one: a unit's "gather" is its master shard itself and its
                             // "reduce-scatter" is the slot itself (no copies; the same values)
    int64_t gorder[G];       // issue order of the reduce-scatter in flight from the slot
    int gunit[G], gmicro[G]; // its unit and micro-batch
    int64_t rs_seq;
    float *dx;               // activation gradient [N, d]
    uint32_t *ids;           // staged micro-batches: bare ids [grad_accum][N]
    int32_t *tgt, *pos;      // targets and document positions [grad_accum][N]
    double *loss;            // [grad_accum] the head's loss per staged micro-batch
} cpu_state;

static cpu_state *st(const zt_fsdp *f) { return (cpu_state *)f->bs; }

// ---- pools ---------------------------------------------------------------------------------

static void gather(zt_fsdp *f, int s, int unit) {
    cpu_state *c = st(f);
    const zt_fsdp_unit *u = &f->units[unit];
    if (c->local) {  // compute reads the master shard (the whole padded unit); nothing changes it in a step
        f->pbuf[s] = u->master;
        c->preq[s] = NULL;
        return;
    }
    char label[48];
    snprintf(label, sizeof label, "unit %d params", unit);
    c->preq[s] = zt_iallgather(f->dcomm, u->master, f->pbuf[s], (size_t)u->shard, ZT_DT_F32, label);
    if (!c->preq[s]) zt_die_on_err();
    f->bytes_ag += (int64_t)(f->shard_world - 1) * u->shard * (int64_t)sizeof(float);
}

static void gather_use(zt_fsdp *f, int s) {
    cpu_state *c = st(f);
    if (!c->preq[s]) return;
    double t0 = zt_now();
    if (zt_wait(f->dcomm, c->preq[s]) != 0) zt_die_on_err();
    f->t_wait += zt_now() - t0;
    c->preq[s] = NULL;
}

static void param_done(zt_fsdp *f, int s) { (void)f, (void)s; }

// Wait for slot s's reduce-scatter and accumulate it into its unit's shard (over micro-batches).
static void rs_finish(zt_fsdp *f, int s, int unit) {
    cpu_state *c = st(f);
    zt_fsdp_unit *u = &f->units[unit];
    const float *sum = f->gbuf[s];  // a shard group of one: the slot is its own reduce-scatter
    if (c->greq[s]) {
        double t0 = zt_now();
        if (zt_wait(f->dcomm, c->greq[s]) != 0) zt_die_on_err();
        f->t_wait += zt_now() - t0;
        c->greq[s] = NULL;
        sum = c->grecv[s];
    }
    c->gpend[s] = 0;
    f->ops->add(u->grad, u->grad, sum, u->shard);
    zt_fsdp_log(f, ZT_EV_RS_DONE, unit, c->gmicro[s]);
}

static void grad_take(zt_fsdp *f, int s, int unit) {
    cpu_state *c = st(f);
    if (c->gpend[s]) rs_finish(f, s, c->gunit[s]);
    memset(f->gbuf[s], 0, (size_t)f->units[unit].padded * sizeof(float));
}

static void reduce_scatter(zt_fsdp *f, int s, int unit) {
    cpu_state *c = st(f);
    const zt_fsdp_unit *u = &f->units[unit];
    if (!c->local) {
        char label[48];
        snprintf(label, sizeof label, "unit %d grads", unit);
        c->greq[s] = zt_ireduce_scatter(f->dcomm, f->gbuf[s], c->grecv[s], (size_t)u->shard, ZT_DT_F32, ZT_RED_SUM,
                                        label);
        if (!c->greq[s]) zt_die_on_err();
    }
    c->gpend[s] = 1;
    c->gorder[s] = c->rs_seq++;
    c->gunit[s] = unit;
    c->gmicro[s] = f->micro;
    f->bytes_rs += (int64_t)(f->shard_world - 1) * u->shard * (int64_t)sizeof(float);
}

// Every reduce-scatter in flight, in issue order.
static void rs_drain(zt_fsdp *f) {
    cpu_state *c = st(f);
    for (;;) {
        int oldest = -1;
        for (int s = 0; s < f->ng; s++)
            if (c->gpend[s] && (oldest < 0 || c->gorder[s] < c->gorder[oldest])) oldest = s;
        if (oldest < 0) return;
        rs_finish(f, oldest, c->gunit[oldest]);
    }
}

static void progress(zt_fsdp *f) { zt_comm_progress(f->dcomm); }
// The same from inside a layer pass, between its ops: the gather of the next unit and the
// reduce-scatters behind move while this unit computes (the family's set_progress hook).
static void progress_between_ops(void *f) { zt_comm_progress(((zt_fsdp *)f)->dcomm); }

// ---- data ---------------------------------------------------------------------------------

// A slot holds this rank's tokens of each block: all of them, or under context parallelism its
// seq_local tokens (then with their positions, always).
static int64_t stage(zt_fsdp *f, const uint32_t *const *blocks, int slot) {
    cpu_state *c = st(f);
    const size_t at = (size_t)slot * (size_t)(f->micro_batch * f->seq_local);
    if (f->ctx_world > 1) return zt_fsdp_stage_rows_context(f, blocks, c->ids + at, c->tgt + at, c->pos + at);
    return zt_fsdp_stage_rows(f, blocks, c->ids + at, c->tgt + at, c->pos + at);
}

static void use_batch(zt_fsdp *f, int slot) {
    cpu_state *c = st(f);
    const size_t N = (size_t)(f->micro_batch * f->seq_local);
    f->fam->cpu->set_batch(f->cpu_model, c->ids + slot * N, c->tgt + slot * N,
                           f->doc_isolated || f->ctx_world > 1 ? c->pos + slot * N : NULL);  // positions: when needed
}

// ---- unit passes ----------------------------------------------------------------------------

static void embed_fwd(zt_fsdp *f, const void *p) { f->fam->cpu->embed_fwd(f->cpu_model, p); }
static void layer_fwd(zt_fsdp *f, int l, const void *p) { f->fam->cpu->layer_fwd(f->cpu_model, l, p); }

static void head(zt_fsdp *f, int mb, const void *p, const void *emb, float *dhead, float *demb, float scale) {
    st(f)->loss[mb] = f->fam->cpu->head(f->cpu_model, p, emb, scale, st(f)->dx, dhead, demb);
}

static void layer_bwd(zt_fsdp *f, int l, const void *p, float *dp) {
    f->fam->cpu->layer_bwd(f->cpu_model, l, p, dp, st(f)->dx);
}
static void embed_bwd(zt_fsdp *f, float *dp) { f->fam->cpu->embed_bwd(f->cpu_model, st(f)->dx, dp); }

// ---- the step ---------------------------------------------------------------------------------

static void step_begin(zt_fsdp *f) {
    for (int i = 0; i < f->nunits; i++) memset(f->units[i].grad, 0, (size_t)f->units[i].shard * sizeof(float));
}

// Hybrid sharding: every unit's gradient shard summed over the replicas (all issued, then all
// waited, in unit order on every rank), in place.
static int reduce_replicas(zt_fsdp *f) {
    rs_drain(f);
    zt_req **req = zt_xcalloc((size_t)f->nunits, sizeof *req);
    const double tw = zt_now();
    int rc = 0;
    for (int i = 0; i < f->nunits && rc == 0; i++) {
        zt_fsdp_unit *u = &f->units[i];
        char label[48];
        snprintf(label, sizeof label, "unit %d grads over replicas", i);
        req[i] = zt_iallreduce(f->replica_comm, u->grad, u->grad, (size_t)u->shard, ZT_DT_F32, ZT_RED_SUM, label);
        if (!req[i]) rc = -1;
        f->bytes_rep += 2 * (int64_t)(f->replicas - 1) * u->shard * (int64_t)sizeof(float) / f->replicas;
    }
    for (int i = 0; i < f->nunits; i++)
        if (req[i] && zt_wait(f->replica_comm, req[i]) != 0) rc = -1;
    f->t_wait += zt_now() - tw;
    free(req);
    return rc;
}

// One control all-reduce: summed loss, non-finite flag, grad sum of squares, stop requests.
// The sum of squares is the one full gradient's: with replicas (hybrid sharding) each shard
// is counted on replica 0 only, not R times.
static int step_reduce(zt_fsdp *f, int stop_request, zt_fsdp_reduced *r) {
    rs_drain(f);
    double loss = 0;
    for (int mb = 0; mb < f->grad_accum; mb++) loss += st(f)->loss[mb];
    double red[4] = {loss, isfinite(loss) ? 0.0 : 1.0, 0.0, (double)stop_request};
    for (int i = 0; i < f->nunits && f->replica == 0; i++) red[2] += f->ops->sumsq(f->units[i].grad, f->units[i].valid);
    if (!isfinite(red[0])) red[0] = 0;  // the flag carries it; keep the sum finite
    double tw = zt_now();
    if (zt_allreduce(f->comm, red, red, 4, ZT_DT_F64, ZT_RED_SUM, "step loss/grad-norm") != 0) return -1;
    f->t_wait += zt_now() - tw;
    *r = (zt_fsdp_reduced){.loss = red[0], .sumsq = red[2], .nonfinite_ranks = (int)red[1], .stop = (int)red[3],
                           .comm_wait = f->t_wait};
    return 0;
}

static void update(zt_fsdp *f, int i, double coef, double lr) {
    zt_fsdp_unit *u = &f->units[i];
    if (coef < 1.0) f->ops->scale(u->grad, (float)coef, u->shard);
    zt_adamw_range(f->ops, &f->lay.units[i], u->lo, u->valid, u->master, u->grad, u->m, u->v, lr, &f->hp,
                   f->step);
}

// ---- evaluation ---------------------------------------------------------------------------------

static int eval_losses(zt_fsdp *f, int k, double *sum) {
    for (int j = 0; j < k; j++) *sum += st(f)->loss[j];
    return 0;
}

static int allreduce_f64(zt_fsdp *f, double *v, int n, const char *what) {
    return zt_allreduce(f->comm, v, v, (size_t)n, ZT_DT_F64, ZT_RED_SUM, what);
}

// ---- lifetime -------------------------------------------------------------------------------------

static void memory(const zt_fsdp *f, zt_fsdp_memory *m) {
    for (int i = 0; i < f->nunits; i++) {
        int64_t b = f->units[i].shard * (int64_t)sizeof(float);
        m->params += b;
        m->grads += b;
        m->optimizer += 2 * b;
    }
    m->buffers = st(f)->local ? (int64_t)sizeof(float) * G * f->max_padded  // no gather or receive buffers
                              : (int64_t)sizeof(float) * (f->np * f->max_padded +
                                                          G * (f->max_padded + f->max_padded / f->shard_world));
    m->activations = f->fam->cpu->act_bytes(f->cpu_model) +
                     (int64_t)sizeof(float) * f->micro_batch * f->seq_local * f->lay.cfg.hidden_size;
}

static void cpu_free(zt_fsdp *f) {
    cpu_state *c = st(f);
    if (!c) return;
    for (int s = 0; s < f->np && !c->local; s++) free(f->pbuf[s]);  // local: they point at master shards
    for (int s = 0; s < G; s++) {
        free(f->gbuf[s]);
        free(c->grecv[s]);
    }
    free(c->dx), free(c->ids), free(c->tgt), free(c->pos), free(c->loss), free(c->preq);
    free(c);
    f->bs = NULL;
}

const zt_fsdp_backend zt_fsdp_cpu_backend = {
    .name = "cpu",
    ZT_FSDP_BACKEND_HOOKS,
    .progress = progress,
    .reduce_replicas = reduce_replicas,
    .free = cpu_free,
};

int zt_fsdp_init(zt_fsdp *f, zt_comm *comm, const zt_model_config *cfg, const zt_ops *ops, int micro_batch,
                 int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed) {
    return zt_fsdp_init_opts(f, comm, cfg, ops, micro_batch, grad_accum, seq_len, hp, seed, NULL);
}

int zt_fsdp_init_opts(zt_fsdp *f, zt_comm *comm, const zt_model_config *cfg, const zt_ops *ops, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, const zt_fsdp_opts *opts) {
    const int flags = ZT_FSDP_HOST_MODEL | (opts && opts->no_seed_init ? ZT_FSDP_NO_INIT : 0);
    if (zt_fsdp_init_host(f, comm, cfg, ops, micro_batch, grad_accum, seq_len, hp, seed, flags, opts) != 0)
        return -1;
    cpu_state *c = zt_xcalloc(1, sizeof *c);
    f->be = &zt_fsdp_cpu_backend;
    f->bs = c;
    for (int i = 0; i < f->nunits; i++) f->units[i].grad = zt_xcalloc((size_t)f->units[i].shard, sizeof(float));
    c->preq = zt_xcalloc((size_t)f->np, sizeof *c->preq);
    c->local = f->shard_world == 1;
    for (int s = 0; s < f->np && !c->local; s++) f->pbuf[s] = zt_xcalloc((size_t)f->max_padded, sizeof(float));
    for (int s = 0; s < G; s++) {
        f->gbuf[s] = zt_xcalloc((size_t)f->max_padded, sizeof(float));
        if (!c->local) c->grecv[s] = zt_xcalloc((size_t)f->max_padded / f->shard_world, sizeof(float));
    }
    const size_t N = (size_t)(micro_batch * f->seq_local), slots = (size_t)grad_accum;
    c->dx = zt_xcalloc(N * (size_t)cfg->hidden_size, sizeof(float));
    c->ids = zt_xcalloc(slots * N, sizeof(uint32_t));
    c->tgt = zt_xcalloc(slots * N, sizeof(int32_t));
    c->pos = zt_xcalloc(slots * N, sizeof(int32_t));
    c->loss = zt_xcalloc(slots, sizeof(double));
    if (f->shard_world > 1) f->fam->cpu->set_progress(f->cpu_model, progress_between_ops, f);
    return 0;
}
