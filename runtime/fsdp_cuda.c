// The GPU FSDP engine: the schedule of fsdp.c on device buffers, expressed with CUDA
// events instead of host waits.
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
// The FSDP order is that of fsdp.c: gather u+1 while u computes (forward); gather u-1
// before u's reduce-scatter on the one DATA communicator (backward).
//
// The host thread enqueues and runs ahead. It blocks (in zt_wait, under the collective
// deadline) only (a) when it is a whole pool ahead of the GPU and must reuse a slot
// whose collective request it has not yet retired: back-pressure, the GPU queue is
// full meanwhile; and (b) once per optimizer step, on the all-reduce of the loss, the
// gradient sums of squares and the stop flag, whose values it must read to clip,
// decide and log. Nothing is allocated per step: activations, pools and shards are
// allocated once here; the op layer's scratch grows stream-ordered only on first use.
//
// Data: the host turns each micro-batch's raw block words into bare ids, targets and
// (isolated documents) positions with zt_qwen3_batch, as fsdp.c does, and uploads them
// on the compute stream. Version-2 data (zt_fsdp_set_data) needs the step's global
// target count before the first gradient: one host all-reduce on `comm` per step
// (zt_fsdp_count_targets), so `comm` must then be a host comm, not the NCCL one.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/zt_cuda.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "model/qwen3_cuda_layer.h"
#include "runtime/comm_nccl.h"
#include "runtime/common.h"
#include "runtime/fsdp_internal.h"

#define P ZT_FSDP_PARAM_SLOTS
#define G ZT_FSDP_GRAD_SLOTS

struct zt_fsdp_cuda {
    zt_comm *dc;                     // NCCL comm: device buffers
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
    // pools
    zt_bf16 *pbuf[P];
    cudaEvent_t p_ready[P], p_free[P];
    zt_req *preq[P];                 // all-gather not yet retired on the host
    float *gbuf[G], *grecv[G];
    cudaEvent_t g_ready[G], g_free[G];
    zt_req *greq[G];
    int p_last, g_last;              // slots handed out last (round robin)
    int np, ng;                      // pool sizes in use (<= P, G; smaller only in tests)
    cudaEvent_t ev_grads, ev_red, ev_optim;
    // Stall accounting: a timing event pair around each wait of the compute stream on a
    // communication event; after the step's host sync, the time between the two is how
    // long compute sat idle waiting for communication (the overlap that failed).
    cudaEvent_t *tw;
    int ntw, cap_tw;
    // activations of one micro-batch
    zt_glayer_dims dm;
    zt_glayer_acts *acts;            // [L], or [1] with recompute
    int recompute;                   // keep only layer inputs; re-run each layer's forward in backward
    zt_glayer_work work;
    zt_bf16 **X;                     // [L+1] residual stream, X[l] = layer l's input
    zt_bf16 *xf, *dln, *dx;          // final-norm output, its gradient, activation gradient
    float *hrstd, *rope_cos, *rope_sin;
    uint32_t *tok_d, *tok_h;         // bare ids: device [N]; host page-locked [grad_accum * N]
    int32_t *tgt_d, *tgt_h;          // targets (-1: none), the same shapes
    int32_t *pos_d, *pos_h;          // document positions, the same shapes (uploaded only when isolated)
    // the step's all-reduce: [grad_accum losses | nunits sums of squares | stop]
    double *red_d, *red_h;
    int nred;
    int64_t act_bytes, pool_bytes;
};

// A failed CUDA call is fatal with the CUDA layer's exit code (ZT_EXIT_CUDA).
#define CK(call)                                                                                                  \
    do {                                                                                                          \
        cudaError_t e_ = (call);                                                                                  \
        if (e_ != cudaSuccess) {                                                                                  \
            char d_[160];                                                                                         \
            snprintf(d_, sizeof d_, "%s (%s)", cudaGetErrorString(e_), cudaGetErrorName(e_));                     \
            zt_cuda_die("GPU FSDP engine: " #call, d_, __FILE__, __LINE__);                                       \
        }                                                                                                         \
    } while (0)

int zt_fsdp_cuda_available(void) { return 1; }
int zt_fsdp_cuda_devices(void) { return zt_cuda_device_count(); }
static int g_recompute;
void zt_fsdp_cuda_set_recompute(int on) { g_recompute = on != 0; }
static int g_pool_p, g_pool_g;
int zt_fsdp_cuda_set_pools(int param_slots, int grad_slots) {
    if (param_slots < 0 || param_slots > P || (param_slots && param_slots < 2) || grad_slots < 0 || grad_slots > G)
        return zt_err("GPU FSDP pools: %d parameter slot(s) (2..%d, 0 = %d) and %d gradient slot(s) (1..%d, 0 = %d)",
                      param_slots, P, P, grad_slots, G, G);
    g_pool_p = param_slots;
    g_pool_g = grad_slots;
    return 0;
}
int zt_fsdp_cuda_set_attention(int cudnn) {
    if (cudnn && !zt_cudnn_sdpa_built())
        return zt_err("--attention cudnn: this build has no cuDNN attention (cuDNN was not found at configure "
                      "time; see docs/cuda.md); use --attention gemm");
    zt_glayer_use_cudnn = cudnn != 0;
    return 0;
}
void zt_fsdp_cuda_describe(zt_comm *dcomm, char *buf, size_t n) {
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
    if (zt_test(f->cu->dc, *r, &done) != 0) zt_die_on_err();
    if (!done) return;
    if (zt_wait(f->cu->dc, *r) != 0) zt_die_on_err();
    *r = NULL;
}

// Retire it for certain (back-pressure; deadline-guarded).
static void retire(zt_fsdp *f, zt_req **r) {
    if (!*r) return;
    double t0 = zt_now();
    if (zt_wait(f->cu->dc, *r) != 0) zt_die_on_err();
    f->t_wait += zt_now() - t0;
    *r = NULL;
}

// The compute stream waits for `ev` (recorded on a comm stream), timed when there is room.
static void compute_wait(zt_fsdp_cuda *c, cudaEvent_t ev) {
    const int timed = c->ntw + 2 <= c->cap_tw;
    if (timed) CK(cudaEventRecord(c->tw[c->ntw], c->cs));
    CK(cudaStreamWaitEvent(c->cs, ev, 0));
    if (timed) {
        CK(cudaEventRecord(c->tw[c->ntw + 1], c->cs));
        c->ntw += 2;
    }
}

// ---- parameters ------------------------------------------------------------------------

static int gather_issue(zt_fsdp *f, int unit) {
    zt_fsdp_cuda *c = f->cu;
    // Round robin over the free slots: the slot reused is the one released longest ago,
    // so an all-gather rarely waits for compute still reading its buffer.
    int s = -1;
    for (int k = 1; k <= c->np && s < 0; k++)
        if (f->pbuf_unit[(c->p_last + k) % c->np] == -1) s = (c->p_last + k) % c->np;
    if (s < 0) zt_fatal("GPU FSDP: parameter pool exhausted gathering unit %d (schedule bug)", unit);
    c->p_last = s;
    retire(f, &c->preq[s]);  // the slot's previous all-gather (long done unless the host ran a pool ahead)
    const zt_fsdp_unit *u = &f->units[unit];
    char label[48];
    snprintf(label, sizeof label, "unit %d params", unit);
    f->pbuf_unit[s] = unit;
    CK(cudaStreamWaitEvent(c->ds, c->p_free[s], 0));  // compute has finished reading the slot
    c->preq[s] = zt_iallgather(c->dc, c->pshard[unit], c->pbuf[s], (size_t)u->shard, ZT_DT_BF16, label);
    if (!c->preq[s]) zt_die_on_err();
    CK(cudaEventRecord(c->p_ready[s], c->ds));
    f->bytes_ag += (int64_t)(f->world - 1) * u->shard * 2;
    zt_fsdp_log(f, ZT_EV_AG_ISSUE, unit, f->micro);
    return s;
}

// Compute waits for the slot's all-gather (on the GPU, not here).
static const zt_bf16 *gather_use(zt_fsdp *f, int s) {
    zt_fsdp_cuda *c = f->cu;
    compute_wait(c, c->p_ready[s]);
    retire_if_done(f, &c->preq[s]);  // also polls the deadline
    zt_fsdp_log(f, ZT_EV_AG_DONE, f->pbuf_unit[s], f->micro);  // enqueue order, not GPU time
    return c->pbuf[s];
}

static void param_release(zt_fsdp *f, int s) {
    CK(cudaEventRecord(f->cu->p_free[s], f->cu->cs));
    f->pbuf_unit[s] = -1;
}

// ---- gradients ---------------------------------------------------------------------------

static int grad_acquire(zt_fsdp *f, int unit) {
    zt_fsdp_cuda *c = f->cu;
    int s = -1;  // round robin, as for parameters: reuse waits on the oldest reduce-scatter
    for (int k = 1; k <= c->ng && s < 0; k++)
        if (f->gbuf_unit[(c->g_last + k) % c->ng] == -1) s = (c->g_last + k) % c->ng;
    if (s < 0) zt_fatal("GPU FSDP: gradient pool exhausted for unit %d (schedule bug)", unit);
    c->g_last = s;
    f->gbuf_unit[s] = unit;
    compute_wait(c, c->g_free[s]);  // its last reduce-scatter and add are done
    CK(cudaMemsetAsync(c->gbuf[s], 0, (size_t)f->units[unit].padded * sizeof(float), c->cs));
    return s;
}

// After the unit's backward: reduce-scatter on DATA, then add into the gradient shard.
static void rs_issue(zt_fsdp *f, int s) {
    zt_fsdp_cuda *c = f->cu;
    const int unit = f->gbuf_unit[s];
    const zt_fsdp_unit *u = &f->units[unit];
    retire(f, &c->greq[s]);
    char label[48];
    snprintf(label, sizeof label, "unit %d grads", unit);
    CK(cudaEventRecord(c->g_ready[s], c->cs));
    CK(cudaStreamWaitEvent(c->ds, c->g_ready[s], 0));
    c->greq[s] = zt_ireduce_scatter(c->dc, c->gbuf[s], c->grecv[s], (size_t)u->shard, ZT_DT_F32, ZT_RED_SUM, label);
    if (!c->greq[s]) zt_die_on_err();
    zt_cuda_add(c->ds, c->grad[unit], c->grad[unit], c->grecv[s], ZT_F32, u->shard);  // over micro-batches
    CK(cudaEventRecord(c->g_free[s], c->ds));
    f->bytes_rs += (int64_t)(f->world - 1) * u->shard * (int64_t)sizeof(float);
    zt_fsdp_log(f, ZT_EV_RS_ISSUE, unit, f->micro);
    f->gbuf_unit[s] = -1;  // reusable at once: the next user waits on g_free on the GPU
}

// ---- one micro-batch ----------------------------------------------------------------------

// Host slot `slot`'s micro-batch (ids, targets and, isolated, positions) to the device,
// on the compute stream: ordered before every kernel of the micro-batch.
static void upload_batch(zt_fsdp *f, int slot) {
    zt_fsdp_cuda *c = f->cu;
    const int64_t N = c->dm.N;
    CK(cudaMemcpyAsync(c->tok_d, c->tok_h + (size_t)slot * N, (size_t)N * 4, cudaMemcpyHostToDevice, c->cs));
    CK(cudaMemcpyAsync(c->tgt_d, c->tgt_h + (size_t)slot * N, (size_t)N * 4, cudaMemcpyHostToDevice, c->cs));
    if (f->doc_isolated)
        CK(cudaMemcpyAsync(c->pos_d, c->pos_h + (size_t)slot * N, (size_t)N * 4, cudaMemcpyHostToDevice, c->cs));
}

// Raw block words of one micro-batch into host slot `slot`: bare ids (flags cleared, in
// place), targets and positions, as fsdp.c's micro_step. A NULL block (an evaluation
// filler, zt_fsdp_eval) runs as zeros whose targets count nothing. Returns the target count.
static int64_t stage_batch(zt_fsdp *f, const uint32_t *const *blocks, int slot) {
    zt_fsdp_cuda *c = f->cu;
    const int64_t S = f->seq_len, B = f->micro_batch, N = B * S;
    uint32_t *ids = c->tok_h + (size_t)slot * N;
    int32_t *tgt = c->tgt_h + (size_t)slot * N;
    for (int64_t b = 0; b < B; b++) {
        if (blocks[b]) memcpy(ids + b * S, blocks[b], (size_t)S * sizeof(uint32_t));
        else memset(ids + b * S, 0, (size_t)S * sizeof(uint32_t));
    }
    int64_t n = zt_qwen3_batch(ids, B, S, f->doc_isolated, ids, tgt, f->doc_isolated ? c->pos_h + (size_t)slot * N : NULL);
    for (int64_t b = 0; b < B; b++)
        if (!blocks[b]) n -= zt_qwen3_drop_row_targets(tgt, b, S);
    return n;
}

// The document positions the layers use: NULL for plain causal attention.
static const int32_t *layer_pos(const zt_fsdp *f) { return f->doc_isolated ? f->cu->pos_d : NULL; }

// Forward through units 0..L, each gathered while its predecessor computes. Returns the
// head's slot (its gather already waited for) and, tied, the embedding's in *s_emb.
static int forward_units(zt_fsdp *f, int *s_emb) {
    zt_fsdp_cuda *c = f->cu;
    const zt_qwen3_config *cfg = &f->model.lay.cfg;
    const int L = cfg->num_layers, head = L + 1, tied = cfg->tie_word_embeddings;
    const int64_t N = c->dm.N, d = cfg->hidden_size, V = cfg->vocab_size;
    int s_cur = gather_issue(f, 0);
    *s_emb = -1;
    const zt_bf16 *p = gather_use(f, s_cur);
    for (int u = 0; u <= L; u++) {
        int s_next = gather_issue(f, u + 1);
        if (u + 1 == head && tied) *s_emb = gather_issue(f, 0);  // lm_head is the embedding
        zt_fsdp_log(f, ZT_EV_FWD_START, u, f->micro);
        if (u == 0)
            zt_cuda_embedding_fwd(c->cs, c->X[0], p, c->tok_d, N, d, V);
        else
            zt_glayer_fwd(c->ctx, c->cs, &c->dm, p, c->rope_cos, c->rope_sin, layer_pos(f), c->X[u - 1], c->X[u],
                          &c->acts[c->recompute ? 0 : u - 1], NULL);
        zt_fsdp_log(f, ZT_EV_FWD_END, u, f->micro);
        param_release(f, s_cur);
        s_cur = s_next;
        p = gather_use(f, s_cur);
    }
    return s_cur;
}

static void micro_step(zt_fsdp *f, int mb, float scale) {
    zt_fsdp_cuda *c = f->cu;
    const zt_qwen3_config *cfg = &f->model.lay.cfg;
    const int L = cfg->num_layers, head = L + 1, tied = cfg->tie_word_embeddings;
    const int64_t N = c->dm.N, d = cfg->hidden_size, V = cfg->vocab_size;
    cudaStream_t cs = c->cs;
    upload_batch(f, mb);

    // forward
    int s_emb;
    int s_cur = forward_units(f, &s_emb);
    const zt_bf16 *p = c->pbuf[s_cur];

    // head: final norm, fused lm_head + cross-entropy (chunked, never N x V), backward
    const zt_bf16 *emb = tied ? gather_use(f, s_emb) : NULL;
    int s_layer = gather_issue(f, L);  // the last layer, for its backward
    const zt_unit_layout *hl = &f->model.lay.units[head];
    const zt_bf16 *lm_w = tied ? emb : p + hl->t[1].offset;
    int g_head = grad_acquire(f, head);
    int g_emb = tied ? grad_acquire(f, 0) : -1;
    float *dlm = tied ? c->gbuf[g_emb] : c->gbuf[g_head] + hl->t[1].offset;
    zt_fsdp_log(f, ZT_EV_BWD_START, head, f->micro);
    zt_cuda_rmsnorm_fwd(cs, c->xf, c->hrstd, c->X[L], p + hl->t[0].offset, N, d, (float)cfg->rms_norm_eps);
    zt_cuda_lmhead_xent(c->ctx, cs, c->red_d + mb, c->dln, dlm, ZT_F32, c->xf, lm_w, c->tgt_d, N, d, V, scale);
    zt_cuda_rmsnorm_bwd(c->ctx, cs, c->dx, c->gbuf[g_head] + hl->t[0].offset, c->dln, c->X[L], p + hl->t[0].offset, c->hrstd, N, d);
    zt_fsdp_log(f, ZT_EV_BWD_END, head, f->micro);
    param_release(f, s_cur);
    if (tied) param_release(f, s_emb);
    rs_issue(f, g_head);

    // backward through the layers
    s_cur = s_layer;
    for (int u = L; u >= 1; u--) {
        p = gather_use(f, s_cur);
        int s_prev = u - 1 >= 1 ? gather_issue(f, u - 1) : -1;  // before this unit's reduce-scatter
        int g = grad_acquire(f, u);
        zt_fsdp_log(f, ZT_EV_BWD_START, u, f->micro);
        if (c->recompute)  // the saved tensors again, from the kept input (X[u] is rewritten
                           // with the same values: the ops are deterministic)
            zt_glayer_fwd(c->ctx, cs, &c->dm, p, c->rope_cos, c->rope_sin, layer_pos(f), c->X[u - 1], c->X[u],
                          &c->acts[0], NULL);
        zt_glayer_bwd(c->ctx, cs, &c->dm, p, c->gbuf[g], c->rope_cos, c->rope_sin, layer_pos(f), c->X[u - 1],
                      &c->acts[c->recompute ? 0 : u - 1], &c->work, c->dx, NULL);
        zt_fsdp_log(f, ZT_EV_BWD_END, u, f->micro);
        param_release(f, s_cur);
        rs_issue(f, g);
        s_cur = s_prev;
    }

    // embedding backward: token ids only, deterministic (no float atomics)
    if (!tied) g_emb = grad_acquire(f, 0);
    zt_fsdp_log(f, ZT_EV_BWD_START, 0, f->micro);
    zt_cuda_embedding_bwd(cs, c->gbuf[g_emb], c->dx, c->tok_d, N, d, V);
    zt_fsdp_log(f, ZT_EV_BWD_END, 0, f->micro);
    rs_issue(f, g_emb);
}

int zt_fsdp_cuda_check_data(zt_fsdp *f, int isolated) {
    (void)f;
    if (isolated && zt_glayer_use_cudnn)
        return zt_err("--attention cudnn cannot keep packed documents apart; use --attention gemm or "
                      "--doc-attention full");
    return 0;
}

// The step's trained targets over all ranks, as fsdp.c counts them.
// Version-2 data needs one host all-reduce, which an NCCL comm cannot take.
static int count_targets(zt_fsdp *f, const uint32_t *const *blocks, int nblocks, int64_t *targets) {
    if (f->token_flags && f->comm == f->cu->dc)
        return zt_err("GPU FSDP engine: version-2 data (loss masks, documents) needs a host comm beside the NCCL "
                      "one to count each step's targets (zt_fsdp_init_cuda's comm; it is the NCCL comm here)");
    zt_comm_set_context(f->comm, f->step + 1, f->epoch, 0);
    return zt_fsdp_count_targets(f, blocks, nblocks, "step trained targets", targets);
}

int zt_fsdp_cuda_step(zt_fsdp *f, const uint32_t *const *blocks, int stop_request, zt_fsdp_stats *out) {
    zt_fsdp_cuda *c = f->cu;
    const double t0 = zt_now();
    const int64_t S = f->seq_len, B = f->micro_batch;
    f->t_wait = 0;
    f->bytes_ag = f->bytes_rs = 0;
    f->nevents = 0;
    int64_t targets;
    if (count_targets(f, blocks, (int)(f->grad_accum * B), &targets)) return -1;
    const float scale = targets ? (float)(1.0 / (double)targets) : 0.0f;

    // The batch into page-locked memory (the previous step's copies finished: the host
    // waited on that step's all-reduce, which the compute stream ordered after them).
    for (int mb = 0; mb < f->grad_accum; mb++) (void)stage_batch(f, blocks + (size_t)mb * B, mb);
    // DATA must see the previous optimizer update (new bf16 shards, gradients read)
    // before it gathers parameters or zeroes and accumulates gradient shards.
    CK(cudaStreamWaitEvent(c->ds, c->ev_optim, 0));
    CK(cudaMemsetAsync(c->a_grad, 0, (size_t)c->shard_total * sizeof(float), c->ds));
    for (int mb = 0; mb < f->grad_accum; mb++) {
        f->micro = mb;
        zt_comm_set_context(c->dc, f->step + 1, f->epoch, mb);
        micro_step(f, mb, scale);
    }

    // One all-reduce: [losses | sums of squares per unit | stop], all float64.
    CK(cudaEventRecord(c->ev_grads, c->ds));
    compute_wait(c, c->ev_grads);
    double *sq = c->red_d + f->grad_accum;
    CK(cudaMemsetAsync(sq, 0, (size_t)(f->nunits + 1) * sizeof(double), c->cs));
    for (int i = 0; i < f->nunits; i++)
        if (f->units[i].valid > 0) zt_cuda_sumsq(c->ctx, c->cs, sq + i, c->grad[i], f->units[i].valid);
    c->red_h[c->nred - 1] = stop_request ? 1.0 : 0.0;
    CK(cudaMemcpyAsync(c->red_d + c->nred - 1, c->red_h + c->nred - 1, sizeof(double), cudaMemcpyHostToDevice, c->cs));
    CK(cudaEventRecord(c->ev_red, c->cs));
    CK(cudaStreamWaitEvent(c->ks, c->ev_red, 0));
    zt_req *rq = zt_iallreduce(c->dc, c->red_d, c->red_d, (size_t)c->nred, ZT_DT_F64, ZT_RED_SUM,
                               "step loss/grad-norm");
    if (!rq) return -1;
    CK(cudaMemcpyAsync(c->red_h, c->red_d, (size_t)c->nred * sizeof(double), cudaMemcpyDeviceToHost, c->ks));
    double t_host = zt_now();
    if (zt_wait(c->dc, rq) != 0) return -1;  // the host's one wait per step (deadline-guarded)
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize(ctrl stream): step results to the host");
    CK(cudaStreamSynchronize(c->ks));        // the 8-byte-per-entry copy queued behind it
    zt_comm_watch_end(c->dc);
    f->t_wait += zt_now() - t_host;
    double stall = 0;  // every timing event precedes ev_red on the compute stream: complete
    for (int i = 0; i + 1 < c->ntw; i += 2) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, c->tw[i], c->tw[i + 1]));
        stall += ms * 1e-3;
    }
    c->ntw = 0;
    for (int s = 0; s < c->np; s++) retire_if_done(f, &c->preq[s]);
    for (int s = 0; s < c->ng; s++) retire(f, &c->greq[s]);  // done: the all-reduce came after them on the GPU

    double loss = 0, sumsq = 0;
    for (int mb = 0; mb < f->grad_accum; mb++) loss += c->red_h[mb];
    for (int i = 0; i < f->nunits; i++) sumsq += c->red_h[f->grad_accum + i];
    const double norm = sqrt(sumsq);
    const int nonfinite = !isfinite(loss) || !isfinite(norm);  // NaN/inf anywhere survives the sum
    const double coef = zt_clip_coef(norm, f->hp.clip);
    const double lr = zt_lr_at(&f->hp, f->step);
    f->step++;
    if (!nonfinite && targets > 0) {  // the same decision on every rank: it comes from the all-reduced values
        for (int i = 0; i < f->nunits; i++) {
            zt_fsdp_unit *u = &f->units[i];
            if (u->valid <= 0) continue;
            if (coef < 1.0) zt_cuda_scale(c->cs, c->grad[i], ZT_F32, (float)coef, u->valid);
            zt_tensor_span sp[ZT_UNIT_MAX_TENSORS];  // per tensor: no weight decay on norm weights
            const int ns = zt_unit_spans(&f->model.lay.units[i], u->lo, u->valid, sp);
            for (int t = 0; t < ns; t++) {
                const int64_t k = sp[t].k;
                zt_cuda_adamw(c->cs, c->master[i] + k, c->pshard[i] + k, c->grad[i] + k, c->m[i] + k, c->v[i] + k,
                              sp[t].len, (float)lr, (float)f->hp.beta1, (float)f->hp.beta2, (float)f->hp.eps,
                              sp[t].decay ? (float)f->hp.weight_decay : 0.0f, f->step);
            }
        }
    }
    CK(cudaEventRecord(c->ev_optim, c->cs));
    out->loss = targets ? loss / (double)targets : 0.0;
    out->targets = targets;
    out->grad_norm = norm;
    out->clip_coef = coef;
    out->lr = lr;
    out->tokens = (int64_t)f->world * f->grad_accum * B * S;
    out->nonfinite = nonfinite;
    out->nonfinite_ranks = isfinite(loss) ? 0 : -1;  // the losses were summed: which ranks is unknown
    out->stop_requested = (int)c->red_h[c->nred - 1];
    out->t_step = zt_now() - t0;
    // The GPU's view: time the compute stream stood waiting for communication. (The host's
    // own blocking, f->t_wait, is back-pressure and the step's one read, not a stall.)
    out->t_comm_wait = stall;
    out->t_compute = out->t_step - stall;
    out->bytes_gathered = f->bytes_ag;
    out->bytes_scattered = f->bytes_rs;
    return 0;
}

// ---- evaluation ---------------------------------------------------------------------------

// One micro-batch forward through the units and the head's loss (no gradients) into the
// device double *loss.
static void eval_micro(zt_fsdp *f, int slot, double *loss) {
    zt_fsdp_cuda *c = f->cu;
    const zt_qwen3_config *cfg = &f->model.lay.cfg;
    const int L = cfg->num_layers, tied = cfg->tie_word_embeddings;
    const int64_t N = c->dm.N, d = cfg->hidden_size, V = cfg->vocab_size;
    upload_batch(f, slot);
    int s_emb;
    const int s_cur = forward_units(f, &s_emb);
    const zt_bf16 *p = c->pbuf[s_cur];
    const zt_unit_layout *hl = &f->model.lay.units[L + 1];
    const zt_bf16 *lm_w = tied ? gather_use(f, s_emb) : p + hl->t[1].offset;
    zt_cuda_rmsnorm_fwd(c->cs, c->xf, c->hrstd, c->X[L], p + hl->t[0].offset, N, d, (float)cfg->rms_norm_eps);
    zt_cuda_lmhead_xent(c->ctx, c->cs, loss, NULL, NULL, ZT_F32, c->xf, lm_w, c->tgt_d, N, d, V, 1.0f);  // loss only
    param_release(f, s_cur);
    if (tied) param_release(f, s_emb);
}

// As fsdp.c's zt_fsdp_eval: forward only, the same gather schedule, one all-reduce of
// {loss sum, targets} (on the NCCL comm's CTRL channel, from device memory). Micro-batches
// run in rounds of grad_accum, the host slots' count: after each round the host reads the
// round's losses (summed in micro-batch order) and may refill the slots. Parameters,
// optimizer state, gradients and the step counter are not touched.
int zt_fsdp_cuda_eval(zt_fsdp *f, const uint32_t *const *blocks, int nmicro, double *loss_sum, int64_t *targets) {
    zt_fsdp_cuda *c = f->cu;
    const int64_t B = f->micro_batch;
    const int saved_micro = f->micro;
    double red[2] = {0, 0};
    CK(cudaStreamWaitEvent(c->ds, c->ev_optim, 0));  // DATA gathers what the last update wrote
    for (int m0 = 0; m0 < nmicro; m0 += f->grad_accum) {
        const int k = nmicro - m0 < f->grad_accum ? nmicro - m0 : f->grad_accum;
        // the slots are free: the host synchronised with the last round (or step) that read them
        for (int j = 0; j < k; j++) red[1] += (double)stage_batch(f, blocks + (size_t)(m0 + j) * B, j);
        for (int j = 0; j < k; j++) {
            f->micro = m0 + j;
            eval_micro(f, j, c->red_d + j);
        }
        CK(cudaMemcpyAsync(c->red_h, c->red_d, (size_t)k * sizeof(double), cudaMemcpyDeviceToHost, c->cs));
        zt_comm_watch_begin(c->dc, "cudaStreamSynchronize: evaluation losses to the host");
        CK(cudaStreamSynchronize(c->cs));
        zt_comm_watch_end(c->dc);
        for (int j = 0; j < k; j++) red[0] += c->red_h[j];
    }
    f->micro = saved_micro;
    c->ntw = 0;  // the stall timers of the evaluation's waits are not a step's
    for (int s = 0; s < c->np; s++) retire_if_done(f, &c->preq[s]);

    // {loss sum, targets}: exact in double (counts < 2^53), on every rank the same
    c->red_h[0] = red[0];
    c->red_h[1] = red[1];
    CK(cudaMemcpyAsync(c->red_d, c->red_h, 2 * sizeof(double), cudaMemcpyHostToDevice, c->ks));
    zt_req *rq = zt_iallreduce(c->dc, c->red_d, c->red_d, 2, ZT_DT_F64, ZT_RED_SUM, "eval loss");
    if (!rq) return -1;
    CK(cudaMemcpyAsync(c->red_h, c->red_d, 2 * sizeof(double), cudaMemcpyDeviceToHost, c->ks));
    if (zt_wait(c->dc, rq) != 0) return -1;
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize(ctrl stream): evaluation loss to the host");
    CK(cudaStreamSynchronize(c->ks));
    zt_comm_watch_end(c->dc);
    *loss_sum = c->red_h[0];
    *targets = (int64_t)c->red_h[1];
    return 0;
}

// ---- host <-> device ----------------------------------------------------------------------

int zt_fsdp_to_device(zt_fsdp *f) {
    zt_fsdp_cuda *c = f->cu;
    if (!c) return 0;
    for (int i = 0; i < f->nunits; i++) {
        const zt_fsdp_unit *u = &f->units[i];
        const size_t b = (size_t)u->shard * sizeof(float);
        CK(cudaMemcpyAsync(c->master[i], u->master, b, cudaMemcpyHostToDevice, c->cs));
        CK(cudaMemcpyAsync(c->m[i], u->m, b, cudaMemcpyHostToDevice, c->cs));
        CK(cudaMemcpyAsync(c->v[i], u->v, b, cudaMemcpyHostToDevice, c->cs));
        zt_cuda_f32_to_bf16(c->pshard[i], c->master[i], u->shard, c->cs);
    }
    // The host waits for the upload: its page-locked copies may change after return, and
    // everything enqueued afterwards (the next step's gathers on DATA) is ordered after it.
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize: master/Adam state to the GPU");
    CK(cudaStreamSynchronize(c->cs));         // the host buffers may change after return
    zt_comm_watch_end(c->dc);
    return 0;
}

int zt_fsdp_to_host(zt_fsdp *f) {
    zt_fsdp_cuda *c = f->cu;
    if (!c) return 0;
    for (int i = 0; i < f->nunits; i++) {
        const zt_fsdp_unit *u = &f->units[i];
        const size_t b = (size_t)u->shard * sizeof(float);
        CK(cudaMemcpyAsync(u->master, c->master[i], b, cudaMemcpyDeviceToHost, c->cs));
        CK(cudaMemcpyAsync(u->m, c->m[i], b, cudaMemcpyDeviceToHost, c->cs));
        CK(cudaMemcpyAsync(u->v, c->v[i], b, cudaMemcpyDeviceToHost, c->cs));
    }
    // The compute stream's queue ends with work that waited (on the GPU) for this step's
    // collectives, so a peer that never joined would block this forever: watched.
    zt_comm_watch_begin(c->dc, "cudaStreamSynchronize: GPU state to the host for a checkpoint");
    CK(cudaStreamSynchronize(c->cs));
    zt_comm_watch_end(c->dc);
    return 0;
}

// ---- lifetime -------------------------------------------------------------------------------

static int init_cuda(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_qwen3_config *cfg, int micro_batch,
                     int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, int bench, float a);

int zt_fsdp_init_cuda(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_qwen3_config *cfg, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed) {
    return init_cuda(f, comm, dcomm, cfg, micro_batch, grad_accum, seq_len, hp, seed, 0, 0.0f);
}

int zt_fsdp_init_cuda_bench(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_qwen3_config *cfg, int micro_batch,
                            int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, float a) {
    return init_cuda(f, comm, dcomm, cfg, micro_batch, grad_accum, seq_len, hp, seed, 1, a);
}

static int init_cuda(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_qwen3_config *cfg, int micro_batch,
                     int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, int bench, float a) {
    const int device = zt_comm_nccl_device(dcomm);
    if (device < 0) {
        memset(f, 0, sizeof *f);
        return zt_err("GPU FSDP engine: the data comm is a %s comm; it needs an NCCL one (runtime/comm_nccl.h)",
                      zt_comm_backend_name(dcomm));
    }
    zt_comm_info ci, di;
    zt_comm_get_info(comm, &ci);
    zt_comm_get_info(dcomm, &di);
    if (ci.rank != di.rank || ci.world != di.world) {
        memset(f, 0, sizeof *f);
        return zt_err("GPU FSDP engine: the host comm (rank %d of %d) and the NCCL comm (rank %d of %d) disagree",
                      ci.rank, ci.world, di.rank, di.world);
    }
    if (cfg->head_dim % 2 || seq_len < 2) {
        memset(f, 0, sizeof *f);
        return zt_err("GPU FSDP engine: head_dim (%d) must be even and seq_len (%lld) >= 2", cfg->head_dim,
                      (long long)seq_len);
    }
    if (cfg->tie_word_embeddings && g_pool_p && g_pool_p < 3) {
        memset(f, 0, sizeof *f);
        return zt_err("GPU FSDP engine: a tied lm_head needs 3 parameter slots (the last layer, the head and the "
                      "embedding at once); %d set", g_pool_p);
    }
    if (zt_fsdp_init_host(f, comm, cfg, NULL, micro_batch, grad_accum, seq_len, hp, seed,
                          bench ? ZT_FSDP_NO_INIT : 0) != 0)
        return -1;
    zt_fsdp_cuda *c = zt_xcalloc(1, sizeof *c);
    f->cu = c;
    c->dc = dcomm;
    c->device = device;
    CK(cudaSetDevice(device));
    c->ds = (cudaStream_t)zt_comm_nccl_stream(dcomm, ZT_CHAN_DATA);
    c->ks = (cudaStream_t)zt_comm_nccl_stream(dcomm, ZT_CHAN_CTRL);
    CK(cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking));
    c->ctx = zt_cuda_ctx_create();
    const int U = f->nunits, L = cfg->num_layers;

    // shards: one allocation per kind
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
    // The host copies (checkpoints, --init) in one page-locked block: cudaMallocHost, so
    // transfers run at full PCIe speed and are truly asynchronous. (Registering the separate
    // small heap blocks of zt_fsdp_init_host page by page failed whenever two of them shared
    // a page, and the engine then fell back to pageable copies without a word.) If the
    // block cannot be had, a page-aligned heap block is registered instead; if that fails
    // too, the copies stay pageable and the engine says so.
    c->host_pinned = 0;
    if (!bench) {
        const size_t hb = 3 * st * sizeof(float);
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
        for (int i = 0; i < U; i++) {  // the seeded init values move into the block
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

    // pools
    c->np = g_pool_p ? g_pool_p : P;
    c->ng = g_pool_g ? g_pool_g : G;
    for (int s = 0; s < c->np; s++) {
        c->pbuf[s] = dalloc((size_t)f->max_padded * 2, &c->pool_bytes);
        CK(cudaEventCreateWithFlags(&c->p_ready[s], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&c->p_free[s], cudaEventDisableTiming));
        f->pbuf_unit[s] = -1;
    }
    for (int s = 0; s < c->ng; s++) {
        c->gbuf[s] = dalloc((size_t)f->max_padded * 4, &c->pool_bytes);
        c->grecv[s] = dalloc((size_t)(f->max_padded / f->world) * 4, &c->pool_bytes);
        CK(cudaEventCreateWithFlags(&c->g_ready[s], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&c->g_free[s], cudaEventDisableTiming));
        f->gbuf_unit[s] = -1;
    }
    CK(cudaEventCreateWithFlags(&c->ev_grads, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&c->ev_red, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&c->ev_optim, cudaEventDisableTiming));
    // waits of the compute stream per step: per micro-batch one per gathered unit use
    // (2L + 4 at most) and per gradient slot taken (L + 2), plus the step's end
    c->cap_tw = 2 * ((3 * cfg->num_layers + 8) * grad_accum + 2);
    c->tw = zt_xcalloc((size_t)c->cap_tw, sizeof(cudaEvent_t));
    for (int i = 0; i < c->cap_tw; i++) CK(cudaEventCreate(&c->tw[i]));

    // activations
    const int64_t N = (int64_t)micro_batch * seq_len, d = cfg->hidden_size;
    c->dm = (zt_glayer_dims){.B = micro_batch, .S = seq_len, .N = N, .d = d, .F = cfg->intermediate_size,
                             .H = cfg->num_heads, .Hkv = cfg->num_kv_heads, .D = cfg->head_dim,
                             .eps = (float)cfg->rms_norm_eps};
    int64_t off[ZG_NT + 1];
    zt_glayer_offsets(&c->dm, off);
    for (int t = 0; t < ZG_NT && L > 0; t++)
        if (f->model.lay.units[1].t[t].offset != off[t])
            zt_fatal("GPU FSDP: the CUDA layer's tensor offsets disagree with model/layout.c at %s",
                     f->model.lay.units[1].t[t].name);
    c->recompute = g_recompute;
    const int nacts = c->recompute ? (L > 0) : L;
    c->acts = zt_xcalloc((size_t)(L > 0 ? L : 1), sizeof *c->acts);
    size_t free0 = 0, total = 0;
    CK(cudaMemGetInfo(&free0, &total));
    for (int l = 0; l < nacts; l++) zt_glayer_acts_alloc(&c->acts[l], &c->dm);
    zt_glayer_work_alloc(&c->work, &c->dm);
    c->X = zt_xcalloc((size_t)L + 1, sizeof(zt_bf16 *));
    for (int l = 0; l <= L; l++) c->X[l] = zt_cuda_malloc((size_t)(N * d) * 2);
    c->xf = zt_cuda_malloc((size_t)(N * d) * 2);
    c->dln = zt_cuda_malloc((size_t)(N * d) * 2);
    c->dx = zt_cuda_malloc((size_t)(N * d) * 2);
    c->hrstd = zt_cuda_malloc((size_t)N * 4);
    c->rope_cos = zt_cuda_malloc((size_t)(seq_len * cfg->head_dim / 2) * 4);
    c->rope_sin = zt_cuda_malloc((size_t)(seq_len * cfg->head_dim / 2) * 4);
    zt_cuda_rope_table(c->cs, c->rope_cos, c->rope_sin, seq_len, cfg->head_dim, cfg->rope_theta);
    c->tok_d = zt_cuda_malloc((size_t)N * 4);
    c->tgt_d = zt_cuda_malloc((size_t)N * 4);
    c->pos_d = zt_cuda_malloc((size_t)N * 4);
    CK(cudaMallocHost((void **)&c->tok_h, (size_t)(grad_accum * N) * 4));
    CK(cudaMallocHost((void **)&c->tgt_h, (size_t)(grad_accum * N) * 4));
    CK(cudaMallocHost((void **)&c->pos_h, (size_t)(grad_accum * N) * 4));
    c->nred = grad_accum + U + 1;
    c->red_d = zt_cuda_malloc((size_t)c->nred * sizeof(double));
    CK(cudaMallocHost((void **)&c->red_h, (size_t)c->nred * sizeof(double)));
    size_t free1 = 0;
    CK(cudaMemGetInfo(&free1, &total));
    c->act_bytes = (int64_t)(free0 - free1);
    // Scratch for attention (one KV-head group) and the lm_head chunk, reserved now
    // rather than grown inside the first step.
    zt_cuda_ctx_reserve(c->ctx,
                        zt_cuda_attention_scratch_bytes(seq_len, cfg->num_heads, cfg->num_kv_heads, cfg->head_dim),
                        c->cs);

    // state: the host init values (seeded, world-independent) to the device
    if (!bench) zt_fsdp_to_device(f);
    if (bench) {  // device-drawn values instead (padding stays zero: only the valid range)
        CK(cudaMemsetAsync(c->a_master, 0, st * 4, c->cs));
        CK(cudaMemsetAsync(c->a_m, 0, st * 4, c->cs));
        CK(cudaMemsetAsync(c->a_v, 0, st * 4, c->cs));
        for (int i = 0; i < U; i++) {
            if (f->units[i].valid <= 0) continue;
            zt_cuda_fill_uniform(c->master[i], ZT_F32, f->units[i].valid, -a, a, seed + (uint64_t)i, c->cs);
            zt_cuda_f32_to_bf16(c->pshard[i], c->master[i], f->units[i].shard, c->cs);
        }
        CK(cudaEventRecord(c->ev_optim, c->cs));  // the first step's gathers wait for the drawn shards
    }
    return 0;
}

void zt_fsdp_cuda_memory(const zt_fsdp *f, zt_fsdp_memory *m) {
    const zt_fsdp_cuda *c = f->cu;
    m->params = c->shard_total * 4 + c->shard_total * 2;  // fp32 master + bf16 gather input
    m->grads = c->shard_total * 4;
    m->optimizer = c->shard_total * 8;
    m->buffers = c->pool_bytes;
    m->activations = c->act_bytes;
    m->host_pinned = c->host_pinned ? 3 * c->shard_total * 4 : 0;
}

void zt_fsdp_cuda_free(zt_fsdp *f) {
    zt_fsdp_cuda *c = f->cu;
    if (!c) return;
    cudaStreamSynchronize(c->cs);
    for (int s = 0; s < c->np; s++)
        if (c->preq[s]) zt_wait(c->dc, c->preq[s]);
    for (int s = 0; s < c->ng; s++)
        if (c->greq[s]) zt_wait(c->dc, c->greq[s]);
    if (c->host_block) {  // the host shards live in the engine's block: zt_fsdp_free must not free() them
        if (c->host_mode == 1)
            cudaFreeHost(c->host_block);
        else {
            if (c->host_mode == 2) cudaHostUnregister(c->host_block);
            free(c->host_block);
        }
        for (int i = 0; i < f->nunits; i++) f->units[i].master = f->units[i].m = f->units[i].v = NULL;
    }
    const int L = f->model.lay.cfg.num_layers;
    for (int l = 0; l < (c->recompute ? (L > 0) : L); l++) zt_glayer_acts_free(&c->acts[l]);
    zt_glayer_work_free(&c->work);
    for (int l = 0; l <= L; l++) zt_cuda_free(c->X[l]);
    void *dv[] = {c->xf, c->dln, c->dx, c->hrstd, c->rope_cos, c->rope_sin, c->tok_d, c->tgt_d, c->pos_d, c->red_d,
                  c->a_master, c->a_m, c->a_v, c->a_grad, c->a_pshard};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) zt_cuda_free(dv[i]);
    for (int s = 0; s < c->np; s++) {
        zt_cuda_free(c->pbuf[s]);
        cudaEventDestroy(c->p_ready[s]);
        cudaEventDestroy(c->p_free[s]);
    }
    for (int s = 0; s < c->ng; s++) {
        zt_cuda_free(c->gbuf[s]);
        zt_cuda_free(c->grecv[s]);
        cudaEventDestroy(c->g_ready[s]);
        cudaEventDestroy(c->g_free[s]);
    }
    cudaEventDestroy(c->ev_grads);
    cudaEventDestroy(c->ev_red);
    cudaEventDestroy(c->ev_optim);
    for (int i = 0; i < c->cap_tw; i++) cudaEventDestroy(c->tw[i]);
    free(c->tw);
    cudaFreeHost(c->tok_h);
    cudaFreeHost(c->tgt_h);
    cudaFreeHost(c->pos_h);
    cudaFreeHost(c->red_h);
    zt_cuda_ctx_destroy(c->ctx);
    cudaStreamDestroy(c->cs);
    free(c->acts), free(c->X), free(c->master), free(c->m), free(c->v), free(c->grad), free(c->pshard);
    free(c);
    f->cu = NULL;
}
