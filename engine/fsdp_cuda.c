// The GPU backend of the FSDP schedule (fsdp.c): the schedule's collectives and passes on
// device buffers, ordered with CUDA events instead of host waits. Built into the CUDA
// module (engine/cuda_module.h), never into the zerotrain executable.
//
// Streams: `cs` runs compute (bf16 ops, fp32 accumulation, one zt_cuda_ctx); the NCCL
// comm's DATA stream runs all-gathers, reduce-scatters and the gradient accumulation
// that follows each reduce-scatter; its CTRL stream runs the step's one all-reduce.
//
// Per pool slot, two events order the streams without the host:
//   params  p_ready[s]: recorded on DATA after the all-gather into slot s;
//                       compute waits on it before using the unit.
//           p_free[s]:  recorded on compute after the last kernel reading slot s;
//                       DATA waits on it before the next all-gather overwrites it.
//   grads   g_ready[s]: recorded on compute after the unit's backward;
//                       DATA waits on it, then reduce-scatters and adds the result
//                       into the unit's fp32 gradient shard.
//           g_free[s]:  recorded on DATA after that add; compute waits on it before
//                       zeroing the slot for another unit.
// The order of the collectives and passes is the schedule's (fsdp.c), the same as the
// CPU backend's.
//
// The host thread enqueues and runs ahead. It blocks (in zt_wait, under the collective
// deadline) only (a) when it is a whole pool ahead of the GPU and must reuse a slot
// whose collective request it has not yet retired: back-pressure, the GPU queue is
// full meanwhile; and (b) once per optimizer step, on the all-reduce of the loss, the
// gradient sums of squares and the stop flag, whose values it must read to clip,
// decide and log. Nothing is allocated per step: activations, pools and shards are
// allocated once here, and the op layer's scratch is reserved for the largest op of a step
// (it would grow stream-ordered on first use; the first step_reduce warns if it did). What
// each part takes is what memory() reports and `plan --device cuda` predicts (memory_for).
//
// Context parallelism (--context-parallel C): the family's model holds this rank's S_local tokens
// of each block and its attention calls the exchange below (cx_gather, cx_scatter) on the mesh's
// device context group. Each is ordered like the unit collectives, by two events: ev_cx_in
// recorded on compute after what it sends was written, the context group's DATA stream waiting on
// it before the collective; ev_cx_out recorded there after it, compute waiting on that before it
// reads the result (and before it writes the buffers the collective reads or writes again).
//
// Data: the host turns each micro-batch's raw block words into bare ids, targets and
// (isolated documents) positions with zt_batch_words, as the CPU backend does, and uploads
// them on the compute stream. Version-2 data (zt_fsdp_set_data) needs the step's global
// target count before the first gradient: one host all-reduce on `comm` per step
// (zt_fsdp_count_targets), so `comm` must then be a host comm, not the NCCL one.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/zt_cuda.h"
#include "kernels/cuda/zt_cuda_check.h"
#include "kernels/cuda/attention/dispatch.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "model/family_cuda.h"
#include "engine/comm_nccl.h"
#include "base/common.h"
#include "base/env.h"
#include "engine/cuda_module.h"
#include "engine/fsdp_internal.h"
#include "engine/job_shape.h"
#include "data/batch.h"

#define P ZT_FSDP_PARAM_SLOTS
#define G ZT_FSDP_GRAD_SLOTS

typedef struct {
    zt_comm *dc;                     // NCCL comm: device buffers (all W ranks: the step's control all-reduce)
    zt_comm *uc;                     // the unit collectives' NCCL comm: dc, or the mesh's shard group (hybrid)
    zt_comm *rc;                     // hybrid sharding: the mesh's replica group on the GPU (NULL when one copy)
    cudaStream_t rs;                 // rc's stream of the replica all-reduce (its CTRL channel)
    cudaEvent_t ev_rep;              // recorded on rs after the replica all-reduces
    zt_req **rreq;                   // [nunits] replica all-reduces, retired after the step's host sync
    int device;
    zt_cuda_ctx *ctx;
    cudaStream_t cs, ds, ks;         // compute, DATA (NCCL's), CTRL (NCCL's)
    // this rank's shards, per unit (pointers into one allocation each)
    float **master, **m, **v, **grad;
    zt_bf16 **pshard;                // bf16 copy of master: the all-gather's input
    float *a_master, *a_m, *a_v, *a_grad;
    zt_bf16 *a_pshard;
    int64_t shard_total;             // sum of shard sizes
    int host_pinned;                 // the host master/m/v are page-locked
    int host_mode;                   // 1 cudaMallocHost, 2 registered heap block, 0 pageable heap block
    float *host_block;               // [master | m | v] of every unit, the host copies (not for benchmarks)
    // pools (the buffers are the schedule's f->pbuf / f->gbuf)
    cudaEvent_t *p_ready, *p_free;   // [np] (keep-gathered: one slot per unit)
    zt_req **preq;                   // [np] all-gather not yet retired on the host
    float *grecv[G];
    cudaEvent_t g_ready[G], g_free[G];
    zt_req *greq[G];                 // reduce-scatter not yet retired on the host
    int gunit[G], gmicro[G];         // its unit and micro-batch (event log)
    cudaEvent_t ev_grads, ev_red, ev_optim;
    // --async-save: the checkpoint snapshot's device-to-host copy runs on a stream of its own
    // (ss) into the page-locked host copies, after ev_optim; ev_snap marks its end, and the next
    // AdamW (or to_host) waits for it on the device while snap_pending.
    cudaStream_t ss;
    cudaEvent_t ev_snap;
    int snap_pending;
    // Stall accounting: a timing event pair around each wait of the compute stream on a
    // communication event; after the step's host sync, the time between the two is how
    // long compute sat idle waiting for communication (the overlap that failed).
    cudaEvent_t *tw;
    int ntw, cap_tw;
    // the model family's GPU passes (model/family_cuda.h) and its activations of one micro-batch
    const zt_family_cuda *fc;
    void *fm;
    int64_t N;                       // tokens of a micro-batch
    uint32_t *tok_d, *tok_h;         // bare ids: device [N]; host page-locked [grad_accum * hs]
    int64_t hs;                      // host slot stride: N rounded up to whole 4 KiB pages, so that
                                     // staging a slot never writes a page an in-flight copy of
                                     // another slot reads (evaluation stages one slot while the
                                     // previous one's upload may still run)
    int32_t *tgt_d, *tgt_h;          // targets (-1: none), the same shapes
    int32_t *pos_d, *pos_h;          // document positions, the same shapes (uploaded only when isolated)
    // the step's all-reduce: [grad_accum losses | nunits sums of squares | stop]
    double *red_d, *red_h;
    int nred;
    int64_t act_bytes, pool_bytes;
    size_t scratch_start;            // the scratch arena reserved at start (a step that grows it is warned of once)
    int scratch_checked;
    // context parallelism: the mesh's device context group, its DATA stream, the two events, and
    // the exchange's collective handles not yet retired (retired after the step's host sync)
    zt_comm *xc;
    cudaStream_t xs;
    cudaEvent_t ev_cx_in, ev_cx_out;
    zt_req **xreq;
    int nx, cap_x;
} gpu_state;

static gpu_state *st(const zt_fsdp *f) { return (gpu_state *)f->bs; }


// The visible devices, or 0 with the CUDA runtime's reason in zt_err (what `--device auto`
// says when it takes the cpu backend on a host with an NVIDIA driver).
static int devices(void) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver" error
        zt_err("cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return 0;
    }
    if (n < 1) zt_err("cudaGetDeviceCount: no device");
    return n;
}

static void describe(zt_comm *dcomm, char *buf, size_t n) {
    const int dev = zt_comm_nccl_device(dcomm);
    char d[128] = "?";
    if (dev >= 0 && cudaSetDevice(dev) == cudaSuccess) zt_cuda_device_describe(d, sizeof d);
    snprintf(buf, n, "cuda backend: %s (device %d), bf16 compute, NCCL", d, dev);
}

static void *dalloc(size_t bytes, int64_t *acct) {
    void *p = zt_cuda_malloc(bytes ? bytes : 16);
    if (acct) *acct += (int64_t)bytes;
    return p;
}

// Retire a collective request if it is done (no blocking); a NULL request is fine.
static void retire_if_done(zt_fsdp *f, zt_req **r) {
    if (!*r) return;
    int done = 0;
    if (zt_test(f->dcomm, *r, &done) != 0) zt_die_on_err();
    if (!done) return;
    if (zt_wait(f->dcomm, *r) != 0) zt_die_on_err();
    *r = NULL;
}

// Retire it for certain (back-pressure; deadline-guarded).
static void retire(zt_fsdp *f, zt_req **r) {
    if (!*r) return;
    double t0 = zt_now();
    if (zt_wait(f->dcomm, *r) != 0) zt_die_on_err();
    f->t_wait += zt_now() - t0;
    *r = NULL;
}

// The compute stream waits for `ev` (recorded on a comm stream), timed when there is room.
static void compute_wait(gpu_state *c, cudaEvent_t ev) {
    const int timed = c->ntw + 2 <= c->cap_tw;
    if (timed) ZT_CUDA_CHECK(cudaEventRecord(c->tw[c->ntw], c->cs));
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->cs, ev, 0));
    if (timed) {
        ZT_CUDA_CHECK(cudaEventRecord(c->tw[c->ntw + 1], c->cs));
        c->ntw += 2;
    }
}

// ---- pools ---------------------------------------------------------------------------------

static void gather(zt_fsdp *f, int s, int unit) {
    gpu_state *c = st(f);
    retire(f, &c->preq[s]);  // the slot's previous all-gather (long done unless the host ran a pool ahead)
    const zt_fsdp_unit *u = &f->units[unit];
    char label[48];
    snprintf(label, sizeof label, "unit %d params", unit);
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->ds, c->p_free[s], 0));  // compute has finished reading the slot
    c->preq[s] = zt_iallgather(c->uc, c->pshard[unit], f->pbuf[s], (size_t)u->shard, ZT_DT_BF16, label);
    if (!c->preq[s]) zt_die_on_err();
    ZT_CUDA_CHECK(cudaEventRecord(c->p_ready[s], c->ds));
    f->bytes_ag += (int64_t)(f->shard_world - 1) * u->shard * 2;
}

// Compute waits for the slot's all-gather (on the GPU, not here).
static void gather_use(zt_fsdp *f, int s) {
    gpu_state *c = st(f);
    compute_wait(c, c->p_ready[s]);
    retire_if_done(f, &c->preq[s]);  // also polls the deadline
}

static void param_done(zt_fsdp *f, int s) { ZT_CUDA_CHECK(cudaEventRecord(st(f)->p_free[s], st(f)->cs)); }

static void grad_take(zt_fsdp *f, int s, int unit) {
    gpu_state *c = st(f);
    compute_wait(c, c->g_free[s]);  // its last reduce-scatter and add are done
    ZT_CUDA_CHECK(cudaMemsetAsync(f->gbuf[s], 0, (size_t)f->units[unit].padded * sizeof(float), c->cs));
}

// The slot's previous reduce-scatter, retired on the host (it is then done on the GPU).
static void rs_retire(zt_fsdp *f, int s) {
    gpu_state *c = st(f);
    if (!c->greq[s]) return;
    retire(f, &c->greq[s]);
    zt_fsdp_log(f, ZT_EV_RS_DONE, c->gunit[s], c->gmicro[s]);  // host-observed, not GPU time
}

// After the unit's backward: reduce-scatter on DATA, then add into the gradient shard.
static void reduce_scatter(zt_fsdp *f, int s, int unit) {
    gpu_state *c = st(f);
    const zt_fsdp_unit *u = &f->units[unit];
    rs_retire(f, s);
    char label[48];
    snprintf(label, sizeof label, "unit %d grads", unit);
    ZT_CUDA_CHECK(cudaEventRecord(c->g_ready[s], c->cs));
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->ds, c->g_ready[s], 0));
    c->greq[s] = zt_ireduce_scatter(c->uc, f->gbuf[s], c->grecv[s], (size_t)u->shard, ZT_DT_F32, ZT_RED_SUM, label);
    if (!c->greq[s]) zt_die_on_err();
    c->gunit[s] = unit;
    c->gmicro[s] = f->micro;
    zt_cuda_add(c->ds, c->grad[unit], c->grad[unit], c->grecv[s], ZT_F32, u->shard);  // over micro-batches
    ZT_CUDA_CHECK(cudaEventRecord(c->g_free[s], c->ds));
    f->bytes_rs += (int64_t)(f->shard_world - 1) * u->shard * (int64_t)sizeof(float);
}

// ---- context parallelism ----------------------------------------------------------------------

// The exchange's handles: retired when done; when the list is full, all of them (back-pressure).
static void cx_retire(zt_fsdp *f, int block) {
    gpu_state *c = st(f);
    int k = 0;
    for (int i = 0; i < c->nx; i++) {
        int done = 1;
        if (!block && zt_test(c->xc, c->xreq[i], &done) != 0) zt_die_on_err();
        if (done && zt_wait(c->xc, c->xreq[i]) != 0) zt_die_on_err();
        if (!done) c->xreq[k++] = c->xreq[i];
    }
    c->nx = k;
}

// One collective of the family's attention on the context group's DATA stream, between compute's
// writes of `send` and its reads of `recv` (file comment: ev_cx_in, ev_cx_out).
static void cx_collective(zt_fsdp *f, int scatter, const void *send, void *recv, int64_t n, const char *what) {
    gpu_state *c = st(f);
    if (c->nx == c->cap_x) cx_retire(f, 1);
    ZT_CUDA_CHECK(cudaEventRecord(c->ev_cx_in, c->cs));
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->xs, c->ev_cx_in, 0));
    zt_req *rq = scatter ? zt_ireduce_scatter(c->xc, send, recv, (size_t)n, ZT_DT_F32, ZT_RED_SUM, what)
                         : zt_iallgather(c->xc, send, recv, (size_t)n, ZT_DT_BF16, what);
    if (!rq) zt_die_on_err();
    c->xreq[c->nx++] = rq;
    ZT_CUDA_CHECK(cudaEventRecord(c->ev_cx_out, c->xs));
    compute_wait(c, c->ev_cx_out);
    f->bytes_ctx += (int64_t)(f->ctx_world - 1) * n * (scatter ? 4 : 2);  // received (gather), sent (scatter)
}
static void cx_gather(void *ctx, const zt_bf16 *mine, zt_bf16 *all, int64_t n, const char *what) {
    cx_collective(ctx, 0, mine, all, n, what);
}
static void cx_scatter(void *ctx, const float *all, float *mine, int64_t n, const char *what) {
    cx_collective(ctx, 1, all, mine, n, what);
}

// ---- data ------------------------------------------------------------------------------------

// One micro-batch into host slot `slot` (zt_fsdp_stage_rows). The slot is free: the host
// synchronised with the last step or evaluation round that read it. A block holding an id
// outside the vocabulary is staged as a filler there, on the host: it is never uploaded, so
// the embedding gather and the loss never index with it (zt_fsdp_step then updates nothing).
static int64_t stage(zt_fsdp *f, const uint32_t *const *blocks, int slot) {
    gpu_state *c = st(f);
    const size_t at = (size_t)slot * (size_t)c->hs;
    if (f->ctx_world > 1)  // this rank's tokens of each block, always with positions
        return zt_fsdp_stage_rows_context(f, blocks, c->tok_h + at, c->tgt_h + at, c->pos_h + at);
    return zt_fsdp_stage_rows(f, blocks, c->tok_h + at, c->tgt_h + at, f->doc_isolated ? c->pos_h + at : NULL);
}

// Host slot `slot` to the device on the compute stream: ordered before every kernel of the micro-batch.
static void use_batch(zt_fsdp *f, int slot) {
    gpu_state *c = st(f);
    const int64_t N = c->N;
    ZT_CUDA_CHECK(cudaMemcpyAsync(c->tok_d, c->tok_h + (size_t)slot * c->hs, (size_t)N * 4, cudaMemcpyHostToDevice, c->cs));
    ZT_CUDA_CHECK(cudaMemcpyAsync(c->tgt_d, c->tgt_h + (size_t)slot * c->hs, (size_t)N * 4, cudaMemcpyHostToDevice, c->cs));
    if (f->doc_isolated || f->ctx_world > 1)
        ZT_CUDA_CHECK(cudaMemcpyAsync(c->pos_d, c->pos_h + (size_t)slot * c->hs, (size_t)N * 4, cudaMemcpyHostToDevice, c->cs));
    // host-side tables of the documents (Qwen3's cuDNN attention), before the passes that read them
    if (f->doc_isolated && f->ctx_world == 1 && c->fc->set_positions &&
        c->fc->set_positions(c->fm, c->pos_h + (size_t)slot * c->hs) != 0)
        zt_fatal("micro-batch %d: %s", f->micro, zt_errmsg());
}

// ---- unit passes ---------------------------------------------------------------------------------

// The positions the layers use: NULL for plain causal rows (always given under context parallelism).
static const int32_t *layer_pos(const zt_fsdp *f) {
    return f->doc_isolated || f->ctx_world > 1 ? st(f)->pos_d : NULL;
}

static void embed_fwd(zt_fsdp *f, const void *p) { st(f)->fc->embed_fwd(st(f)->fm, p, st(f)->tok_d); }
static void layer_fwd(zt_fsdp *f, int l, const void *p) { st(f)->fc->layer_fwd(st(f)->fm, l, p, layer_pos(f)); }

static void head(zt_fsdp *f, int mb, const void *p, const void *emb, float *dhead, float *demb, float scale) {
    gpu_state *c = st(f);
    c->fc->head(c->fm, p, emb, c->tgt_d, scale, c->red_d + mb, dhead, demb);
}

static void layer_bwd(zt_fsdp *f, int l, const void *p, float *dp) {
    st(f)->fc->layer_bwd(st(f)->fm, l, p, dp, layer_pos(f));
}
static void embed_bwd(zt_fsdp *f, float *dp) { st(f)->fc->embed_bwd(st(f)->fm, dp, st(f)->tok_d); }

// ---- the step ---------------------------------------------------------------------------------------

// DATA must see the previous optimizer update (new bf16 shards, gradients read) before it
// gathers parameters or zeroes and accumulates gradient shards.
static void step_begin(zt_fsdp *f) {
    gpu_state *c = st(f);
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->ds, c->ev_optim, 0));
    ZT_CUDA_CHECK(cudaMemsetAsync(c->a_grad, 0, (size_t)c->shard_total * sizeof(float), c->ds));
}

// Hybrid sharding, once per step: the replica stream waits for every reduce-scatter's add into
// the gradient shards (DATA), sums each unit's shard over the replicas in place, and DATA waits
// for that before anything reads the shards (the step's sums of squares, the update, the next
// step's zeroing all come after DATA).
static int reduce_replicas(zt_fsdp *f) {
    gpu_state *c = st(f);
    ZT_CUDA_CHECK(cudaEventRecord(c->ev_grads, c->ds));  // after every reduce-scatter's add
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->rs, c->ev_grads, 0));
    zt_req **rq = c->rreq;
    int rc = 0;
    for (int i = 0; i < f->nunits && rc == 0; i++) {
        const zt_fsdp_unit *u = &f->units[i];
        char label[48];
        snprintf(label, sizeof label, "unit %d grads over replicas", i);
        rq[i] = zt_iallreduce(c->rc, c->grad[i], c->grad[i], (size_t)u->shard, ZT_DT_F32, ZT_RED_SUM, label);
        if (!rq[i]) rc = -1;
        f->bytes_rep += 2 * (int64_t)(f->replicas - 1) * u->shard * (int64_t)sizeof(float) / f->replicas;
    }
    ZT_CUDA_CHECK(cudaEventRecord(c->ev_rep, c->rs));
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->ds, c->ev_rep, 0));
    return rc;  // the handles are retired by step_reduce once the host has synchronised (no host wait here)
}

// One all-reduce: [losses | sums of squares per unit | stop], all float64. Hybrid sharding:
// a shard's sum of squares counts on replica 0 only (the norm of the one full gradient).
static int step_reduce(zt_fsdp *f, int stop_request, zt_fsdp_reduced *r) {
    gpu_state *c = st(f);
    ZT_CUDA_CHECK(cudaEventRecord(c->ev_grads, c->ds));
    compute_wait(c, c->ev_grads);
    double *sq = c->red_d + f->grad_accum;
    ZT_CUDA_CHECK(cudaMemsetAsync(sq, 0, (size_t)(f->nunits + 1) * sizeof(double), c->cs));
    for (int i = 0; i < f->nunits; i++)
        if (f->units[i].valid > 0 && f->replica == 0) zt_cuda_sumsq(c->ctx, c->cs, sq + i, c->grad[i], f->units[i].valid);
    c->red_h[c->nred - 1] = (double)stop_request;
    ZT_CUDA_CHECK(cudaMemcpyAsync(c->red_d + c->nred - 1, c->red_h + c->nred - 1, sizeof(double), cudaMemcpyHostToDevice, c->cs));
    ZT_CUDA_CHECK(cudaEventRecord(c->ev_red, c->cs));
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->ks, c->ev_red, 0));
    zt_req *rq = zt_iallreduce(c->dc, c->red_d, c->red_d, (size_t)c->nred, ZT_DT_F64, ZT_RED_SUM,
                               "step loss/grad-norm");
    if (!rq) return -1;
    ZT_CUDA_CHECK(cudaMemcpyAsync(c->red_h, c->red_d, (size_t)c->nred * sizeof(double), cudaMemcpyDeviceToHost, c->ks));
    double t_host = zt_now();
    if (zt_wait(c->dc, rq) != 0) return -1;  // the host's one wait per step (deadline-guarded)
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize(ctrl stream): step results to the host");
    ZT_CUDA_CHECK(cudaStreamSynchronize(c->ks));        // the 8-byte-per-entry copy queued behind it
    zt_comm_watch_end(c->dc);
    f->t_wait += zt_now() - t_host;
    double stall = 0;  // every timing event precedes ev_red on the compute stream: complete
    for (int i = 0; i + 1 < c->ntw; i += 2) {
        float ms = 0;
        ZT_CUDA_CHECK(cudaEventElapsedTime(&ms, c->tw[i], c->tw[i + 1]));
        stall += ms * 1e-3;
    }
    c->ntw = 0;
    if (!c->scratch_checked) {  // every op of a step has run: the reservation covered them, or run.json understates
        size_t now = 0;
        zt_cuda_ctx_device_bytes(c->ctx, NULL, &now);
        if (now > c->scratch_start)
            fprintf(stderr, "zerotrain: rank %d: warning: the op layer's scratch arena grew from %zu to %zu bytes in "
                            "the first step (run.json's memory_per_rank_bytes.scratch is the reservation at start)\n",
                    f->rank, c->scratch_start, now);
        c->scratch_checked = 1;
    }
    for (int s = 0; s < f->np; s++) retire_if_done(f, &c->preq[s]);
    for (int s = 0; s < f->ng; s++) rs_retire(f, s);  // done: the all-reduce came after them on the GPU
    if (c->xc) cx_retire(f, 1);                        // done: compute waited for each before ev_red
    for (int i = 0; c->rc && i < f->nunits; i++)       // the replica all-reduces too (DATA waited for them)
        if (c->rreq[i]) {
            if (zt_wait(c->rc, c->rreq[i]) != 0) return -1;
            c->rreq[i] = NULL;
        }

    double loss = 0, sumsq = 0;
    for (int mb = 0; mb < f->grad_accum; mb++) loss += c->red_h[mb];
    for (int i = 0; i < f->nunits; i++) sumsq += c->red_h[f->grad_accum + i];
    // The GPU's view of comm_wait: time the compute stream stood waiting for communication.
    // (The host's own blocking, f->t_wait, is back-pressure and the step's one read, not a stall.)
    *r = (zt_fsdp_reduced){.loss = loss, .sumsq = sumsq, .nonfinite_ranks = isfinite(loss) ? 0 : -1,
                           .stop = (int)c->red_h[c->nred - 1], .comm_wait = stall};
    return 0;  // NaN/inf anywhere survives the sums; the losses were summed: which ranks is unknown (-1)
}

static void update(zt_fsdp *f, int i, double coef, double lr) {
    gpu_state *c = st(f);
    const zt_fsdp_unit *u = &f->units[i];
    // AdamW rewrites master, m and v in place: not before the snapshot's copy has read them
    if (c->snap_pending) {
        ZT_CUDA_CHECK(cudaStreamWaitEvent(c->cs, c->ev_snap, 0));
        c->snap_pending = 0;
    }
    if (coef < 1.0) zt_cuda_scale(c->cs, c->grad[i], ZT_F32, (float)coef, u->valid);
    const zt_unit_layout *ul = &f->lay.units[i];  // per tensor: no weight decay on norm weights
    zt_tensor_span *sp = zt_xmalloc((size_t)(ul->ntensors > 0 ? ul->ntensors : 1) * sizeof *sp);
    const int ns = zt_unit_spans(ul, u->lo, u->valid, sp);
    for (int t = 0; t < ns; t++) {
        const int64_t k = sp[t].k;
        zt_cuda_adamw(c->cs, c->master[i] + k, c->pshard[i] + k, c->grad[i] + k, c->m[i] + k, c->v[i] + k, sp[t].len,
                      (float)lr, (float)f->hp.beta1, (float)f->hp.beta2, (float)f->hp.eps,
                      sp[t].decay ? (float)f->hp.weight_decay : 0.0f, f->step);
    }
    free(sp);  // the launches took the spans by value
}

// The next step's (or evaluation's) gathers wait for the update (or for nothing new).
static void step_end(zt_fsdp *f) { ZT_CUDA_CHECK(cudaEventRecord(st(f)->ev_optim, st(f)->cs)); }

// ---- evaluation ---------------------------------------------------------------------------------------

static void eval_begin(zt_fsdp *f) { ZT_CUDA_CHECK(cudaStreamWaitEvent(st(f)->ds, st(f)->ev_optim, 0)); }

// The round's losses to the host (the host slots may then be refilled).
static int eval_losses(zt_fsdp *f, int k, double *sum) {
    gpu_state *c = st(f);
    ZT_CUDA_CHECK(cudaMemcpyAsync(c->red_h, c->red_d, (size_t)k * sizeof(double), cudaMemcpyDeviceToHost, c->cs));
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize: evaluation losses to the host");
    ZT_CUDA_CHECK(cudaStreamSynchronize(c->cs));
    zt_comm_watch_end(c->dc);
    if (c->xc) cx_retire(f, 1);  // compute waited for every exchange of the round
    for (int j = 0; j < k; j++) *sum += c->red_h[j];
    return 0;
}

static void eval_end(zt_fsdp *f) {
    gpu_state *c = st(f);
    c->ntw = 0;  // the stall timers of the evaluation's waits are not a step's
    for (int s = 0; s < f->np; s++) retire_if_done(f, &c->preq[s]);
}

// On the NCCL comm's CTRL channel, from device memory.
static int allreduce_f64(zt_fsdp *f, double *v, int n, const char *what) {
    gpu_state *c = st(f);
    memcpy(c->red_h, v, (size_t)n * sizeof(double));
    ZT_CUDA_CHECK(cudaMemcpyAsync(c->red_d, c->red_h, (size_t)n * sizeof(double), cudaMemcpyHostToDevice, c->ks));
    zt_req *rq = zt_iallreduce(c->dc, c->red_d, c->red_d, (size_t)n, ZT_DT_F64, ZT_RED_SUM, what);
    if (!rq) return -1;
    ZT_CUDA_CHECK(cudaMemcpyAsync(c->red_h, c->red_d, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost, c->ks));
    if (zt_wait(c->dc, rq) != 0) return -1;
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize(ctrl stream): evaluation loss to the host");
    ZT_CUDA_CHECK(cudaStreamSynchronize(c->ks));
    zt_comm_watch_end(c->dc);
    memcpy(v, c->red_h, (size_t)n * sizeof(double));
    return 0;
}

// ---- host <-> device ----------------------------------------------------------------------

static int to_device(zt_fsdp *f) {
    gpu_state *c = st(f);
    for (int i = 0; i < f->nunits; i++) {
        const zt_fsdp_unit *u = &f->units[i];
        const size_t b = (size_t)u->shard * sizeof(float);
        ZT_CUDA_CHECK(cudaMemcpyAsync(c->master[i], u->master, b, cudaMemcpyHostToDevice, c->cs));
        ZT_CUDA_CHECK(cudaMemcpyAsync(c->m[i], u->m, b, cudaMemcpyHostToDevice, c->cs));
        ZT_CUDA_CHECK(cudaMemcpyAsync(c->v[i], u->v, b, cudaMemcpyHostToDevice, c->cs));
        zt_cuda_f32_to_bf16(c->pshard[i], c->master[i], u->shard, c->cs);
    }
    // The host waits for the upload: its page-locked copies may change after return, and
    // everything enqueued afterwards (the next step's gathers on DATA) is ordered after it.
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize: master/Adam state to the GPU");
    ZT_CUDA_CHECK(cudaStreamSynchronize(c->cs));         // the host buffers may change after return
    zt_comm_watch_end(c->dc);
    return 0;
}

// Queue the device state (master, m, v of every unit) into the host copies on stream s
// (a CUDA error ends the process: ZT_CUDA_CHECK).
static void queue_state_to_host(zt_fsdp *f, cudaStream_t s) {
    gpu_state *c = st(f);
    for (int i = 0; i < f->nunits; i++) {
        const zt_fsdp_unit *u = &f->units[i];
        const size_t b = (size_t)u->shard * sizeof(float);
        ZT_CUDA_CHECK(cudaMemcpyAsync(u->master, c->master[i], b, cudaMemcpyDeviceToHost, s));
        ZT_CUDA_CHECK(cudaMemcpyAsync(u->m, c->m[i], b, cudaMemcpyDeviceToHost, s));
        ZT_CUDA_CHECK(cudaMemcpyAsync(u->v, c->v[i], b, cudaMemcpyDeviceToHost, s));
    }
}

static int to_host(zt_fsdp *f) {
    gpu_state *c = st(f);
    if (c->snap_pending) ZT_CUDA_CHECK(cudaStreamWaitEvent(c->cs, c->ev_snap, 0));  // same host buffers
    queue_state_to_host(f, c->cs);
    // The compute stream's queue ends with work that waited (on the GPU) for this step's
    // collectives, so a peer that never joined would block this forever: watched.
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize: GPU state to the host for a checkpoint");
    ZT_CUDA_CHECK(cudaStreamSynchronize(c->cs));
    zt_comm_watch_end(c->dc);
    return 0;
}

// --async-save: the host copies become the checkpoint's snapshot without stopping the loop.
// The copy waits (on the device) for the last optimizer update and runs on its own stream,
// beside the next step's forward and backward; only the next AdamW waits for it.
// Testing (ZT_CKPT_DEBUG_COPY_DELAY_S): the snapshot stream sleeps before its copy, so a writer
// that did not wait for the copy reads the host copies while it is still to come.
static void CUDART_CB snapshot_delay(void *us) { usleep((useconds_t)(uintptr_t)us); }

static int snapshot_begin(zt_fsdp *f) {
    gpu_state *c = st(f);
    if (!c->host_pinned && c->host_mode == 0)
        return zt_err("the GPU engine's host copies are not page-locked: an asynchronous snapshot needs them");
    ZT_CUDA_CHECK(cudaStreamWaitEvent(c->ss, c->ev_optim, 0));
    double delay;
    if (zt_env_f64(ZT_ENV_CKPT_DEBUG_COPY_DELAY_S, &delay) && delay > 0)
        ZT_CUDA_CHECK(cudaLaunchHostFunc(c->ss, snapshot_delay, (void *)(uintptr_t)(delay * 1e6)));
    queue_state_to_host(f, c->ss);
    ZT_CUDA_CHECK(cudaEventRecord(c->ev_snap, c->ss));
    c->snap_pending = 1;
    return 0;
}

// 1 once the snapshot's copy is complete (the host may read the copies), 0 while it runs;
// wait = 1 blocks until then (the caller watches it: the copy is queued behind nothing that
// waits for peers, but a device fault would show here).
static int snapshot_ready(zt_fsdp *f, int wait) {
    gpu_state *c = st(f);
    if (wait) {
        ZT_CUDA_CHECK(cudaEventSynchronize(c->ev_snap));
        return 1;
    }
    const cudaError_t e = cudaEventQuery(c->ev_snap);
    if (e == cudaErrorNotReady) return 0;
    ZT_CUDA_CHECK(e);
    return 1;
}

// ---- lifetime -------------------------------------------------------------------------------

static int check_data(zt_fsdp *f, int isolated) { return st(f)->fc->check_data(st(f)->fm, isolated); }

static void memory(const zt_fsdp *f, zt_fsdp_memory *m) {
    const gpu_state *c = st(f);
    m->params = c->shard_total * 4 + c->shard_total * 2;  // fp32 master + bf16 gather input
    m->grads = c->shard_total * 4;
    m->optimizer = c->shard_total * 8;
    m->buffers = c->pool_bytes;
    m->context = c->fc->context_bytes ? c->fc->context_bytes(c->fm) : 0;
    m->activations = c->act_bytes - m->context;
    size_t ws = 0, sc = 0;
    zt_cuda_ctx_device_bytes(c->ctx, &ws, &sc);
    m->workspace = (int64_t)ws, m->scratch = (int64_t)sc;
    m->host_pinned = c->host_pinned ? 3 * c->shard_total * 4 : 0;
}

static void gpu_free(zt_fsdp *f) {
    gpu_state *c = st(f);
    if (!c) return;
    cudaStreamSynchronize(c->ss);  // a snapshot copy still reading the device state
    cudaStreamSynchronize(c->cs);
    for (int s = 0; s < f->np; s++)
        if (c->preq[s]) zt_wait(c->uc, c->preq[s]);
    for (int s = 0; s < f->ng; s++)
        if (c->greq[s]) zt_wait(c->uc, c->greq[s]);
    for (int i = 0; c->rreq && i < f->nunits; i++)
        if (c->rreq[i]) zt_wait(c->rc, c->rreq[i]);
    for (int i = 0; i < c->nx; i++) zt_wait(c->xc, c->xreq[i]);
    free(c->xreq);
    if (c->ev_cx_in) cudaEventDestroy(c->ev_cx_in), cudaEventDestroy(c->ev_cx_out);
    if (c->host_block) {  // the host shards live in the engine's block: zt_fsdp_free must not free() them
        if (c->host_mode == 1)
            cudaFreeHost(c->host_block);
        else {
            if (c->host_mode == 2) cudaHostUnregister(c->host_block);
            free(c->host_block);
        }
        for (int i = 0; i < f->nunits; i++) f->units[i].master = f->units[i].m = f->units[i].v = NULL;
    }
    if (c->fm) c->fc->destroy(c->fm);
    void *dv[] = {c->tok_d, c->tgt_d, c->pos_d, c->red_d, c->a_master, c->a_m, c->a_v, c->a_grad, c->a_pshard};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) zt_cuda_free(dv[i]);
    for (int s = 0; s < f->np; s++) {
        zt_cuda_free(f->pbuf[s]);
        f->pbuf[s] = NULL;
        cudaEventDestroy(c->p_ready[s]);
        cudaEventDestroy(c->p_free[s]);
    }
    for (int s = 0; s < f->ng; s++) {
        zt_cuda_free(f->gbuf[s]);
        f->gbuf[s] = NULL;
        zt_cuda_free(c->grecv[s]);
        cudaEventDestroy(c->g_ready[s]);
        cudaEventDestroy(c->g_free[s]);
    }
    cudaEventDestroy(c->ev_grads);
    cudaEventDestroy(c->ev_red);
    cudaEventDestroy(c->ev_optim);
    cudaEventDestroy(c->ev_snap);
    cudaStreamDestroy(c->ss);
    for (int i = 0; i < c->cap_tw; i++) cudaEventDestroy(c->tw[i]);
    free(c->tw);
    cudaFreeHost(c->tok_h);
    cudaFreeHost(c->tgt_h);
    cudaFreeHost(c->pos_h);
    cudaFreeHost(c->red_h);
    zt_cuda_ctx_destroy(c->ctx);
    cudaStreamDestroy(c->cs);
    free(c->master), free(c->m), free(c->v), free(c->grad), free(c->pshard);
    free(c->p_ready), free(c->p_free), free(c->preq);
    if (c->ev_rep) cudaEventDestroy(c->ev_rep);
    free(c->rreq);
    free(c);
    f->bs = NULL;
}

static const zt_fsdp_backend gpu_backend = {
    .name = "cuda",
    ZT_FSDP_BACKEND_HOOKS,
    .reduce_replicas = reduce_replicas,
    .step_end = step_end,
    .eval_begin = eval_begin,
    .eval_end = eval_end,
    .check_data = check_data,
    .to_device = to_device,
    .to_host = to_host,
    .snapshot_begin = snapshot_begin,
    .snapshot_ready = snapshot_ready,
    .free = gpu_free,
};

// ---- construction ---------------------------------------------------------------------------

// What the engine refuses before it allocates anything: 0, or -1 + zt_err (and f zeroed).
static int check_engine(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_model_config *cfg, int64_t seq_len,
                        const zt_fsdp_opts *o, const zt_family_cuda **fc) {
    memset(f, 0, sizeof *f);
    if (o->param_slots < 0 || o->param_slots > P || (o->param_slots && o->param_slots < 2) || o->grad_slots < 0 ||
        o->grad_slots > G)
        return zt_err("GPU FSDP pools: %d parameter slot(s) (2..%d, 0 = %d) and %d gradient slot(s) (1..%d, 0 = %d)",
                      o->param_slots, P, P, o->grad_slots, G, G);
    if (zt_attn_usable(o->attention) != 0) return -1;
    if (zt_comm_nccl_device(dcomm) < 0)
        return zt_err("GPU FSDP engine: the data comm is a %s comm; it needs an NCCL one (engine/comm_nccl.h)",
                      zt_comm_backend_name(dcomm));
    zt_comm_info ci, di;
    zt_comm_get_info(comm, &ci);
    zt_comm_get_info(dcomm, &di);
    if (ci.rank != di.rank || ci.world != di.world)
        return zt_err("GPU FSDP engine: the host comm (rank %d of %d) and the NCCL comm (rank %d of %d) disagree",
                      ci.rank, ci.world, di.rank, di.world);
    if (!cfg->family) return zt_err("GPU FSDP engine: the model config names no model family");
    *fc = zt_family_cuda_find(cfg->family->name);
    if (!*fc)
        return zt_err("GPU FSDP engine: this CUDA module has no GPU passes for the model family \"%s\"",
                      cfg->family->name);
    if ((*fc)->check(cfg, seq_len) != 0) return -1;
    if (cfg->tie_word_embeddings && o->param_slots && o->param_slots < 3)
        return zt_err("GPU FSDP engine: a tied lm_head needs 3 parameter slots (the last layer, the head and the "
                      "embedding at once); %d set", o->param_slots);
    return 0;
}

// Hybrid sharding: the mesh's shard and replica groups on the GPU; then the streams.
static int make_streams(zt_fsdp *f, gpu_state *c, zt_comm *dcomm, const zt_fsdp_opts *o) {
    c->dc = c->uc = dcomm;
    if (f->shard_world < f->world) {
        if (zt_mesh_device_group(o->mesh, ZT_MESH_WORLD) != dcomm)
            return zt_err("GPU FSDP engine: hybrid sharding needs the mesh's device groups of this NCCL comm "
                          "(zt_mesh_attach_device)");
        c->uc = zt_mesh_device_group(o->mesh, ZT_MESH_SHARD);
        c->rc = zt_mesh_device_group(o->mesh, ZT_MESH_REPLICATE);
    }
    if (f->ctx_world > 1) {  // context parallelism: the exchange on the mesh's device context group
        c->xc = o->mesh ? zt_mesh_device_group(o->mesh, ZT_MESH_CONTEXT) : NULL;
        if (!c->xc || zt_comm_nccl_device(c->xc) < 0)
            return zt_err("GPU FSDP engine: context parallelism needs the mesh's device context groups of this NCCL "
                          "comm (zt_mesh_attach_device)");
        c->xs = (cudaStream_t)zt_comm_nccl_stream(c->xc, ZT_CHAN_DATA);
        f->ctx_comm = c->xc;  // the step's context for its flight recorder
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_cx_in, cudaEventDisableTiming));
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_cx_out, cudaEventDisableTiming));
        c->cap_x = 6 * (f->nunits - 2) * f->grad_accum + 8;  // per micro-batch and layer: gathers and scatters
        c->xreq = zt_xcalloc((size_t)c->cap_x, sizeof *c->xreq);  // (forward, recompute, backward; Qwen3.5: 3 + 3)
    }
    f->dcomm = c->uc;
    c->ds = (cudaStream_t)zt_comm_nccl_stream(c->uc, ZT_CHAN_DATA);
    c->ks = (cudaStream_t)zt_comm_nccl_stream(dcomm, ZT_CHAN_CTRL);
    if (c->rc) {
        c->rs = (cudaStream_t)zt_comm_nccl_stream(c->rc, ZT_CHAN_CTRL);
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_rep, cudaEventDisableTiming));
        c->rreq = zt_xcalloc((size_t)f->nunits, sizeof *c->rreq);
    }
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking));
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&c->ss, cudaStreamNonBlocking));
    return 0;
}

// This rank's shards on the device: one allocation per kind, a pointer per unit into each.
static void alloc_shards(zt_fsdp *f, gpu_state *c) {
    const int U = f->nunits;
    for (int i = 0; i < U; i++) c->shard_total += f->units[i].shard;
    const size_t st = (size_t)c->shard_total;
    c->a_master = dalloc(st * 4, NULL);
    c->a_m = dalloc(st * 4, NULL);
    c->a_v = dalloc(st * 4, NULL);
    c->a_grad = dalloc(st * 4, NULL);
    c->a_pshard = dalloc(st * 2, NULL);
    c->master = zt_xcalloc((size_t)U, sizeof(float *));
    c->m = zt_xcalloc((size_t)U, sizeof(float *));
    c->v = zt_xcalloc((size_t)U, sizeof(float *));
    c->grad = zt_xcalloc((size_t)U, sizeof(float *));
    c->pshard = zt_xcalloc((size_t)U, sizeof(zt_bf16 *));
    for (int i = 0; i < U; i++) {
        const int64_t at = i ? (int64_t)(c->master[i - 1] - c->a_master) + f->units[i - 1].shard : 0;
        c->master[i] = c->a_master + at;
        c->m[i] = c->a_m + at;
        c->v[i] = c->a_v + at;
        c->grad[i] = c->a_grad + at;
        c->pshard[i] = c->a_pshard + at;
    }
}

// The host copies (checkpoints, --init) in one page-locked block: cudaMallocHost, so
// transfers run at full PCIe speed and are truly asynchronous. (Registering the separate
// small heap blocks of zt_fsdp_init_host page by page failed whenever two of them shared
// a page, and the engine then fell back to pageable copies without a word.) If the
// block cannot be had, a page-aligned heap block is registered instead; if that fails
// too, the copies stay pageable and the engine says so.
static void pin_host_copies(zt_fsdp *f, gpu_state *c) {
    const size_t st = (size_t)c->shard_total, hb = 3 * st * sizeof(float);
    float *h = NULL;
    c->host_mode = 0;
    if (cudaMallocHost((void **)&h, hb) == cudaSuccess) {
        c->host_mode = 1;
    } else {
        (void)cudaGetLastError();
        if (posix_memalign((void **)&h, 4096, hb) != 0) zt_fatal("GPU FSDP engine: out of host memory (%zu bytes)", hb);
        if (cudaHostRegister(h, hb, cudaHostRegisterDefault) == cudaSuccess) {
            c->host_mode = 2;
        } else {
            (void)cudaGetLastError();
            fprintf(stderr, "zerotrain: rank %d: warning: could not page-lock %.1f MB of host state for the GPU "
                            "engine (cudaMallocHost and cudaHostRegister failed; check `ulimit -l`): checkpoint "
                            "and --init transfers use pageable copies\n",
                    f->rank, hb / 1e6);
        }
    }
    c->host_block = h;
    for (int i = 0; i < f->nunits; i++) {  // the seeded init values move into the block
        zt_fsdp_unit *u = &f->units[i];
        const int64_t at = (int64_t)(c->master[i] - c->a_master);
        const size_t b = (size_t)u->shard * sizeof(float);
        memcpy(h + at, u->master, b);
        memcpy(h + st + at, u->m, b);
        memcpy(h + 2 * st + at, u->v, b);
        free(u->master), free(u->m), free(u->v);
        u->master = h + at;
        u->m = h + st + at;
        u->v = h + 2 * st + at;
    }
    c->host_pinned = c->host_mode != 0;
}

// The schedule's pools on the device, their events, and the stall timers.
static void make_pools(zt_fsdp *f, gpu_state *c, const zt_fsdp_opts *o, int pcap, int grad_accum) {
    f->np = o->keep_gathered ? pcap : o->param_slots ? o->param_slots : P;
    f->ng = o->grad_slots ? o->grad_slots : G;
    for (int s = 0; s < f->np; s++) {
        f->pbuf[s] = dalloc((size_t)f->max_padded * 2, &c->pool_bytes);
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->p_ready[s], cudaEventDisableTiming));
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->p_free[s], cudaEventDisableTiming));
    }
    for (int s = 0; s < f->ng; s++) {
        f->gbuf[s] = dalloc((size_t)f->max_padded * 4, &c->pool_bytes);
        c->grecv[s] = dalloc((size_t)(f->max_padded / f->shard_world) * 4, &c->pool_bytes);
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->g_ready[s], cudaEventDisableTiming));
        ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->g_free[s], cudaEventDisableTiming));
    }
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_grads, cudaEventDisableTiming));
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_red, cudaEventDisableTiming));
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_optim, cudaEventDisableTiming));
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&c->ev_snap, cudaEventDisableTiming));
    // waits of the compute stream per step: per micro-batch one per gathered unit use
    // (at most 2 per unit plus the tied embedding's) and per gradient slot taken (one per
    // unit), plus the step's end: 3 L + 8 per micro-batch with L = nunits - 2 layers
    // (context parallelism: up to 6 more per layer, the exchange's: Qwen3.5's linear layers with recompute)
    c->cap_tw = 2 * (((f->ctx_world > 1 ? 9 : 3) * (f->nunits - 2) + 8) * grad_accum + 2);
    c->tw = zt_xcalloc((size_t)c->cap_tw, sizeof(cudaEvent_t));
    for (int i = 0; i < c->cap_tw; i++) ZT_CUDA_CHECK(cudaEventCreate(&c->tw[i]));
}

// The family's activations of one micro-batch, the staged ids / targets / positions (device,
// and page-locked host slots) and the step's reduction buffer; act_bytes: what they took.
static int make_activations(zt_fsdp *f, gpu_state *c, const zt_model_config *cfg, const zt_fsdp_opts *o) {
    const int64_t N = (int64_t)f->micro_batch * f->seq_local;  // this rank's tokens (seq_len without a split)
    c->N = N;
    const int64_t asked0 = zt_cuda_malloc_bytes();  // the sizes asked, not the allocator's rounding
    const zt_attn_kind att = (zt_attn_kind)o->attention;  // check_engine: zt_attn_usable
    const zt_family_cuda_context cx = {.C = f->ctx_world, .rank = f->ctx_rank, .S = f->seq_len,
                                       .S_local = f->seq_local, .index = f->ctx_index, .gather = cx_gather,
                                       .scatter = cx_scatter, .ctx = f};
    const zt_family_cuda_opts fo = {.recompute = o->recompute != 0, .attention = att,
                                    .cx = f->ctx_world > 1 ? &cx : NULL};
    if (!(c->fm = c->fc->create(cfg, c->ctx, c->cs, f->micro_batch, f->seq_local, &fo))) return -1;
    c->tok_d = zt_cuda_malloc((size_t)N * 4);
    c->tgt_d = zt_cuda_malloc((size_t)N * 4);
    c->pos_d = zt_cuda_malloc((size_t)N * 4);
    c->hs = (N + 1023) / 1024 * 1024;
    ZT_CUDA_CHECK(cudaMallocHost((void **)&c->tok_h, (size_t)(f->grad_accum * c->hs) * 4));
    ZT_CUDA_CHECK(cudaMallocHost((void **)&c->tgt_h, (size_t)(f->grad_accum * c->hs) * 4));
    ZT_CUDA_CHECK(cudaMallocHost((void **)&c->pos_h, (size_t)(f->grad_accum * c->hs) * 4));
    c->nred = f->grad_accum + f->nunits + 1;
    c->red_d = zt_cuda_malloc((size_t)c->nred * sizeof(double));
    ZT_CUDA_CHECK(cudaMallocHost((void **)&c->red_h, (size_t)c->nred * sizeof(double)));
    c->act_bytes = zt_cuda_malloc_bytes() - asked0;
    // The passes' scratch (the largest of the attention over one KV-head group, the lm_head chunk, the
    // norms' partials, ...) and the gradient norm's partials, reserved now rather than grown inside
    // the first step (step_reduce says when it still grew).
    const size_t passes = c->fc->scratch_bytes(c->fm);
    const size_t norm = zt_cuda_sumsq_scratch_bytes(f->max_padded / f->shard_world);
    zt_cuda_ctx_reserve(c->ctx, passes > norm ? passes : norm, c->cs);
    zt_cuda_ctx_device_bytes(c->ctx, NULL, &c->scratch_start);
    return 0;
}

// Benchmarks: device-drawn parameters instead of the seeded host init (padding stays zero:
// only the valid range), uniform in [-a, a).
static void draw_uniform(zt_fsdp *f, gpu_state *c, float a, uint64_t seed) {
    const size_t st = (size_t)c->shard_total;
    ZT_CUDA_CHECK(cudaMemsetAsync(c->a_master, 0, st * 4, c->cs));
    ZT_CUDA_CHECK(cudaMemsetAsync(c->a_m, 0, st * 4, c->cs));
    ZT_CUDA_CHECK(cudaMemsetAsync(c->a_v, 0, st * 4, c->cs));
    for (int i = 0; i < f->nunits; i++) {
        if (f->units[i].valid <= 0) continue;
        zt_cuda_fill_uniform(c->master[i], ZT_F32, f->units[i].valid, -a, a, seed + (uint64_t)i, c->cs);
        zt_cuda_f32_to_bf16(c->pshard[i], c->master[i], f->units[i].shard, c->cs);
    }
    ZT_CUDA_CHECK(cudaEventRecord(c->ev_optim, c->cs));  // the first step's gathers wait for the drawn shards
}

int zt_fsdp_cuda_engine_init(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_model_config *cfg, int micro_batch,
                             int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed,
                             const zt_fsdp_opts *opts) {
    const zt_fsdp_opts o = opts ? *opts : (zt_fsdp_opts){0};
    const int bench = o.bench_uniform > 0;
    const zt_family_cuda *fc = NULL;
    if (check_engine(f, comm, dcomm, cfg, seq_len, &o, &fc) != 0) return -1;
    // keep-gathered: the schedule's pool of one parameter slot per unit (o.param_slots does not apply);
    // hybrid sharding: the mesh's host groups of `comm` (gather_full), its device groups below
    const zt_fsdp_opts host_opts = {.keep_gathered = o.keep_gathered, .shard_group = o.shard_group, .mesh = o.mesh,
                                    .context = o.context};
    if (zt_fsdp_init_host(f, comm, cfg, NULL, micro_batch, grad_accum, seq_len, hp, seed,
                          bench || o.no_seed_init ? ZT_FSDP_NO_INIT : 0, &host_opts) != 0)
        return -1;
    gpu_state *c = zt_xcalloc(1, sizeof *c);
    f->be = &gpu_backend;
    f->bs = c;
    c->fc = fc;
    const int pcap = f->np;  // init_host's pool: P, or one slot per unit when keep-gathered
    c->p_ready = zt_xcalloc((size_t)pcap, sizeof *c->p_ready);
    c->p_free = zt_xcalloc((size_t)pcap, sizeof *c->p_free);
    c->preq = zt_xcalloc((size_t)pcap, sizeof *c->preq);
    c->device = zt_comm_nccl_device(dcomm);
    ZT_CUDA_CHECK(cudaSetDevice(c->device));
    if (make_streams(f, c, dcomm, &o) != 0) return -1;
    c->ctx = zt_cuda_ctx_create();
    alloc_shards(f, c);
    c->host_pinned = 0;
    if (!bench) pin_host_copies(f, c);
    make_pools(f, c, &o, pcap, grad_accum);
    if (make_activations(f, c, cfg, &o) != 0) return -1;
    if (!bench) to_device(f);  // the host init values (seeded, world-independent) to the device
    if (bench) draw_uniform(f, c, o.bench_uniform, seed);
    return 0;
}

// ---- the module's entry point (engine/cuda_module.h) ------------------------------------------

static int comm_init(zt_comm **out, void *mpi_comm, int device, const zt_comm_opts *o) {
#if !defined(ZT_NCCL_NO_MPI) || !ZT_NCCL_NO_MPI
    return zt_comm_init_nccl(out, mpi_comm ? *(MPI_Comm *)mpi_comm : MPI_COMM_NULL, device, o);
#else
    (void)mpi_comm;
    return zt_comm_init_nccl_single(out, device, o);
#endif
}

static const void *family(const char *name) { return zt_family_cuda_find(name); }

// What make_activations and the context would allocate for this job (cuda_module.h memory_for): the
// family's create and scratch by its own count, the staging buffers as make_activations sizes them.
static int memory_for(const zt_model_config *cfg, int micro_batch, int grad_accum, int64_t seq_len, int64_t S_local,
                      int C, int recompute, int attention, int64_t max_shard, zt_fsdp_memory *out) {
    const zt_family_cuda *fc = cfg->family ? zt_family_cuda_find(cfg->family->name) : NULL;
    if (!fc || !fc->act_bytes_for || !fc->scratch_bytes_for)
        return zt_err("this CUDA module cannot count the GPU passes' memory of the model family \"%s\"",
                      cfg->family ? cfg->family->name : "(none)");
    if (fc->check(cfg, seq_len) != 0) return -1;
    if (zt_context_check(&(zt_context_job){.context = C, .family = cfg->family, .config = cfg, .gpu = 1}) != 0) return -1;
    const zt_family_cuda_context cx = {.C = C, .S = seq_len, .S_local = S_local};
    const zt_family_cuda_opts fo = {.recompute = recompute != 0,
                                    .attention = attention == ZT_ATTN_GEMM ? ZT_ATTN_GEMM : ZT_ATTN_TILED,
                                    .cx = C > 1 ? &cx : NULL};
    const int64_t N = (int64_t)micro_batch * S_local, nunits = cfg->num_layers + 2;
    int64_t context = 0;
    const int64_t family = fc->act_bytes_for(cfg, micro_batch, S_local, &fo, &context);
    const int64_t staging = 3 * N * 4 + (grad_accum + nunits + 1) * (int64_t)sizeof(double);  // tok, tgt, pos; red
    out->activations = family - context + staging;
    out->context = context;
    const size_t passes = fc->scratch_bytes_for(cfg, micro_batch, S_local, &fo);
    const size_t norm = zt_cuda_sumsq_scratch_bytes(max_shard);
    out->scratch = (int64_t)zt_cuda_ctx_scratch_size(passes > norm ? passes : norm);
    out->workspace = (int64_t)zt_cuda_ctx_workspace_size();
    return 0;
}

static const zt_cuda_module module = {
    .api_version = ZT_CUDA_MODULE_API,
    .version = ZT_VERSION,
    .devices = devices,
    .describe = describe,
    .comm_init = comm_init,
    .engine_init = zt_fsdp_cuda_engine_init,
    .cudnn_built = zt_cudnn_sdpa_built,
    .family = family,
    .memory_for = memory_for,
};

const zt_cuda_module *zt_cuda_module_entry(void) { return &module; }

// Linked statically into a program, the table is there at start (engine/cuda_module.c).
__attribute__((constructor)) static void register_module(void) { zt_cuda_module_register(&module); }
