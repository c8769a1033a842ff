// The seam between the one FSDP schedule (fsdp.c) and its backends: the CPU one
// (fsdp_cpu.c) and the GPU one (fsdp_cuda.c, in the CUDA module). Not for callers.
//
// The schedule owns the order: which unit is gathered when, which pool slot it goes
// to (round robin over the free slots of each pool), when a slot is released, when a
// unit's gradient leaves, accumulation over micro-batches, the step's clip / lr /
// non-finite decision and the evaluation rounds. A backend owns the buffers and how a
// collective or a pass is carried out: host waits (CPU) or CUDA events between streams
// (GPU). Every hook is called on every rank in the same order.
// The engine's struct and its test knobs are here too: tests and benchmarks include this
// header to look inside (the event log, the pools) and to shrink the pools; the trainer
// includes only engine/fsdp.h.
// defines: zt_fsdp (the struct), zt_fsdp_unit, zt_fsdp_event, zt_fsdp_opts, zt_fsdp_init, zt_fsdp_init_cuda,
//          zt_fsdp_free, zt_fsdp_log, zt_fsdp_backend, zt_fsdp_reduced, zt_fsdp_init_host,
//          zt_fsdp_count_targets, zt_fsdp_stage_rows, zt_fsdp_stage_rows_context, zt_context_split
//          and zt_fsdp_context_stage_init, zt_fsdp_family_context (fsdp_stage.c),
//          zt_fsdp_cpu_backend
#ifndef ZT_FSDP_INTERNAL_H
#define ZT_FSDP_INTERNAL_H
#include "engine/fsdp.h"
#include "engine/mesh.h"

typedef struct {
    int64_t numel;    // unpadded elements of the unit
    int64_t padded;   // multiple of world * ZT_FSDP_ALIGN
    int64_t shard;    // padded / world
    int64_t lo;       // rank * shard: this rank's slice of the canonical vector
    int64_t valid;    // elements of the slice inside the unpadded unit (the rest is padding)
    float *master, *m, *v, *grad;  // [shard]
} zt_fsdp_unit;

// Instrumentation: the order in which collectives were issued and compute ran,
// so tests (and curious users) can see that the overlap schedule is real.
typedef enum {
    ZT_EV_AG_ISSUE, ZT_EV_AG_DONE, ZT_EV_RS_ISSUE, ZT_EV_RS_DONE, ZT_EV_FWD_START, ZT_EV_FWD_END,
    ZT_EV_BWD_START, ZT_EV_BWD_END
} zt_fsdp_ev_kind;
// `micro` is the micro-batch the collective or compute belongs to (a reduce-scatter
// issued in micro-batch 0 may complete during micro-batch 1).
typedef struct { zt_fsdp_ev_kind kind; int unit; int micro; double t; } zt_fsdp_event;

struct zt_fsdp_backend;  // engine/fsdp_internal.h

// Engine options (the GPU backend's; the CPU backend has none of these). Zero = default.
typedef struct zt_fsdp_opts {
    int recompute;          // keep only each layer's input; re-run its forward before its backward
                            // (one more forward per step; identical results: the ops are deterministic)
    int attention;          // ZT_ATTN_TILED (0), ZT_ATTN_CUDNN (refused when not built: zt_attn_usable), ZT_ATTN_GEMM
    int param_slots;        // tests: smaller pools (0 = ZT_FSDP_PARAM_SLOTS; >= 2, or 3 when tied)
    int grad_slots;         //        (0 = ZT_FSDP_GRAD_SLOTS; >= 1)
    float bench_uniform;    // benchmarks: > 0 draws parameters uniform in [-a, a) on the device instead
                            // of the seeded host init (a minute saved at 32B shapes)
    // Sharding strategy (both backends' constructors read these three):
    int shard_group;        // G: shard over groups of G consecutive ranks, replicate across the W/G groups
                            // (hybrid sharding); 0 = W (full shard). Must divide W, and equal the mesh's.
    const zt_mesh *mesh;    // where the groups come from (engine/mesh.h): comm must be its world group, and
                            // for the GPU engine dcomm its device world. Needed for G < W; NULL: full shard
    int keep_gathered;      // 1: a unit's gathered parameters stay from its forward to its backward (no
                            // backward re-gather; FSDP's reshard_after_forward=False); 0: reshard after forward
    int context;            // C: context parallelism, C consecutive ranks share each block (the mesh's
                            // context groups; C must divide G and equal the mesh's); 0 or 1: none. Both
                            // backends (the GPU one takes the mesh's device context group)
    int no_seed_init;       // 1: master shards left zero, no seeded draw (zt_fsdp_config.no_seed_init). Both
} zt_fsdp_opts;

struct zt_fsdp {
    zt_comm *comm;            // host collectives over all W ranks (target counts, the step's control all-reduce)
    zt_comm *dcomm;           // the unit collectives over the shard group: comm (CPU backend, full shard), the
                              // NCCL comm (GPU backend), or the group's sub-comm (hybrid sharding)
    int rank, world;          // in comm: data parallelism is over all W ranks
    // Hybrid sharding: groups of G = shard_world consecutive ranks each hold one full copy of the
    // sharded state; this rank is shard_rank of its group, and replica (= rank / G) of R = W / G
    // copies. Full shard: G = W, R = 1. The groups are the mesh's (opts.mesh), never made here.
    int shard_world, shard_rank, replica, replicas;
    zt_comm *gcomm_host;      // host comm of the shard group (gather_full): the mesh's ZT_MESH_SHARD (comm at G = W)
    zt_comm *replica_comm;    // the mesh's ZT_MESH_REPLICATE: the ranks holding the same shard (NULL when R = 1)
    int keep_gathered;        // a unit's parameters stay gathered from its forward to its backward
    // Context parallelism: C = ctx_world consecutive ranks share each block (the mesh's context
    // group, ctx_comm; NULL when C = 1), this one holding seq_local tokens of each (two chunks:
    // ctx_index, as zt_family_context.index). Data parallelism is over data_world = W / C groups.
    int ctx_world, ctx_rank, data_rank, data_world;
    zt_comm *ctx_comm;
    int64_t seq_local;        // tokens of a block this rank holds (seq_len at C = 1)
    int32_t *ctx_index;       // [C * seq_local]
    uint32_t *ctx_ids;        // [micro_batch * seq_len] whole rows staged before this rank's tokens are picked
    int32_t *ctx_tgt, *ctx_pos;
    double (*update_fence)(void *arg);  // zt_fsdp_set_update_fence (NULL: none)
    void *update_fence_arg;
    int *kept;                // [nunits] the slot holding unit u between its forward and backward, -1 none
    const struct zt_fsdp_backend *be;
    void *bs;                 // the backend's state
    const zt_family *fam;     // the model family (cfg->family): layout, init, the CPU passes; the GPU
                              // backend finds the family's GPU passes by fam->name (model/family_cuda.h)
    zt_model_layout lay;      // the units' layout; lay.cfg is the config
    void *cpu_model;          // CPU backend: the family's model bound to one micro-batch (its activations)
    const zt_ops *ops;
    zt_hparams hp;
    int micro_batch, grad_accum;
    int64_t seq_len;
    int nunits;
    zt_fsdp_unit *units;
    int64_t max_padded;
    // pools, owned by the schedule (fsdp.c), buffers by the backend: slots handed out round robin
    int np, ng;               // pool sizes in use (ZT_FSDP_*_SLOTS; smaller only in tests; keep-gathered:
                              // one parameter slot per unit)
    void **pbuf;              // [np] full-unit parameters (backend element type: fp32 or bf16)
    int *pbuf_unit;           // [np] unit held for compute, -1 free
    float *gbuf[ZT_FSDP_GRAD_SLOTS];   // full-unit fp32 gradients
    int gbuf_unit[ZT_FSDP_GRAD_SLOTS];   // unit whose backward writes it, -1 once reduce-scattered
    int p_last, g_last;       // slots handed out last
    int64_t step;             // optimizer steps done
    // per-step counters
    double t_wait;
    int64_t bytes_ctx;        // received by the context all-gathers + sent by the context reduce-scatters
    int64_t bytes_ag, bytes_rs, bytes_rep;  // received by all-gathers, sent by reduce-scatters, moved by the
                                            // replica all-reduce (2 (R-1)/R of the shard bytes, ring)
    // event log (cleared at the start of each step)
    zt_fsdp_event *events;
    int nevents, events_cap;
    int micro;
    int64_t epoch;            // set by the training loop; shown in deadline reports
    int token_flags;          // blocks hold version-2 words (data/dataset.h): targets are counted per step
    int doc_isolated;         // packed documents attend only to themselves, RoPE restarts per document
    int64_t stage_refused;    // rows zt_fsdp_stage_rows refused (an id >= vocab_size) since the caller zeroed it
};

// The constructors zt_fsdp_create dispatches to (tests call them for the knobs).
// Collective: every rank calls it with the same config. Parameters are initialised
// from `seed` exactly as the single-process trainer does (independent of world).
int zt_fsdp_init(zt_fsdp *f, zt_comm *comm, const zt_model_config *cfg, const zt_ops *ops, int micro_batch,
                 int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed);
// The GPU engine, from the CUDA module (engine/cuda_module.h; loaded on first use).
// Master weights, Adam moments and gradient shards are fp32 on the GPU of `dcomm`, an NCCL
// comm (zt_cuda_comm_init) that carries the bf16 all-gathers, the fp32 reduce-scatters and
// the step's all-reduce; compute runs in bf16 on its own stream. `comm` serves host-side
// collectives (zt_fsdp_gather_full, and the per-step trained-target count of version-2
// data: zt_fsdp_set_data) and may be dcomm itself when those are not used.
// units[i].master/m/v stay as page-locked host copies for checkpoints and --init:
// move them with zt_fsdp_to_device / zt_fsdp_to_host. units[i].grad is NULL.
// opts NULL = defaults. Without the module: -1 with an error naming what was looked for.
int zt_fsdp_init_cuda(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_model_config *cfg, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed,
                      const zt_fsdp_opts *opts);
void zt_fsdp_free(zt_fsdp *f);  // the state zt_fsdp_init* made; f itself stays
// For the backends only: append to the event log.
void zt_fsdp_log(zt_fsdp *f, zt_fsdp_ev_kind k, int unit, int micro);

// What a backend's step reduction returns (the values are global: all-reduced).
typedef struct {
    double loss;          // summed over the step's micro-batches and ranks
    double sumsq;         // gradient sum of squares over every unit's valid range
    int nonfinite_ranks;  // ranks whose loss was not finite; -1: some, not known which
    int stop;             // ranks that requested a stop
    double comm_wait;     // this rank's seconds of compute waiting for communication
} zt_fsdp_reduced;

typedef struct zt_fsdp_backend {
    const char *name;
    // ---- pools: the schedule picks slot s for unit u ----
    void (*gather)(zt_fsdp *f, int s, int u);          // issue u's all-gather into pbuf[s]
    void (*gather_use)(zt_fsdp *f, int s);             // compute is about to read pbuf[s]
    void (*param_done)(zt_fsdp *f, int s);             // compute has finished reading pbuf[s]
    void (*grad_take)(zt_fsdp *f, int s, int u);       // gbuf[s] zeroed for u's backward
    void (*reduce_scatter)(zt_fsdp *f, int s, int u);  // after u's backward: reduce-scatter, add to u's shard
    void (*progress)(zt_fsdp *f);                      // between units; may be NULL
    // ---- data: micro-batches staged into slots 0..grad_accum-1 ----
    // raw block words -> ids, targets, positions; a NULL block is a filler counting nothing.
    // Returns the slot's targets.
    int64_t (*stage)(zt_fsdp *f, const uint32_t *const *blocks, int slot);
    void (*use_batch)(zt_fsdp *f, int slot);           // the passes that follow read this slot
    // ---- unit passes (p: the unit's gathered parameters; dp: its gradient slot, +=) ----
    void (*embed_fwd)(zt_fsdp *f, const void *p);
    void (*layer_fwd)(zt_fsdp *f, int layer, const void *p);
    // Final norm + lm_head + cross-entropy; the loss of micro-batch `mb` kept by the
    // backend. emb: the embedding's parameters when tied (else NULL). dhead NULL: loss only.
    void (*head)(zt_fsdp *f, int mb, const void *p, const void *emb, float *dhead, float *demb, float scale);
    void (*layer_bwd)(zt_fsdp *f, int layer, const void *p, float *dp);
    void (*embed_bwd)(zt_fsdp *f, float *dp);
    // ---- the step ----
    void (*step_begin)(zt_fsdp *f);                    // gradient shards to zero
    // after the last micro-batch; stop_request is summed over ranks into r->stop as it is (the
    // schedule packs a stop and a bad input into it: zt_fsdp_step)
    int (*step_reduce)(zt_fsdp *f, int stop_request, zt_fsdp_reduced *r);
    // hybrid sharding (R > 1), before step_reduce: every reduce-scatter retired, then each unit's
    // gradient shard summed over the replicas (replica_comm), so every copy takes the same step.
    // step_reduce then counts a shard's sum of squares on replica 0 only. May be NULL (then the
    // backend refuses R > 1 at construction).
    int (*reduce_replicas)(zt_fsdp *f);
    void (*update)(zt_fsdp *f, int u, double coef, double lr);  // clip + AdamW on u's valid range
    void (*step_end)(zt_fsdp *f);                      // may be NULL
    // ---- evaluation ----
    void (*eval_begin)(zt_fsdp *f);                    // may be NULL
    int (*eval_losses)(zt_fsdp *f, int k, double *sum);  // *sum += losses of slots 0..k-1, in order
    int (*allreduce_f64)(zt_fsdp *f, double *v, int n, const char *what);
    void (*eval_end)(zt_fsdp *f);                      // may be NULL
    // ---- lifetime ----
    int (*check_data)(zt_fsdp *f, int isolated);       // may be NULL
    int (*to_device)(zt_fsdp *f);                      // may be NULL (host engine)
    int (*to_host)(zt_fsdp *f);                        // may be NULL
    // --async-save (may be NULL: the caller copies the host shards itself): the device state into
    // the host copies without stopping the loop; ready: 1 once the copy is complete (wait: block)
    int (*snapshot_begin)(zt_fsdp *f);
    int (*snapshot_ready)(zt_fsdp *f, int wait);
    void (*memory)(const zt_fsdp *f, zt_fsdp_memory *m);
    void (*free)(zt_fsdp *f);                          // the backend's state; the common state stays
} zt_fsdp_backend;

// The hooks every backend has, as static functions of its file under these names: a
// backend's table is {.name = ..., ZT_FSDP_BACKEND_HOOKS, <its optional hooks>, .free = ...}.
#define ZT_FSDP_BACKEND_HOOKS                                                                                  \
    .gather = gather, .gather_use = gather_use, .param_done = param_done, .grad_take = grad_take,               \
    .reduce_scatter = reduce_scatter, .stage = stage, .use_batch = use_batch, .embed_fwd = embed_fwd,           \
    .layer_fwd = layer_fwd, .head = head, .layer_bwd = layer_bwd, .embed_bwd = embed_bwd,                       \
    .step_begin = step_begin, .step_reduce = step_reduce, .update = update, .eval_losses = eval_losses,         \
    .allreduce_f64 = allreduce_f64, .memory = memory

extern const zt_fsdp_backend zt_fsdp_cpu_backend;

enum { ZT_FSDP_HOST_MODEL = 1, ZT_FSDP_NO_INIT = 2 };
// The state both backends share: the unit table, this rank's slices, and the host
// master/m/v shards initialised from `seed` (unless ZT_FSDP_NO_INIT). ZT_FSDP_HOST_MODEL:
// the CPU model's activations for one micro-batch (else only the layout).
int zt_fsdp_init_host(zt_fsdp *f, zt_comm *comm, const zt_model_config *cfg, const zt_ops *ops, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, int flags,
                      const zt_fsdp_opts *opts);
// (opts: the sharding strategy, may be NULL = full shard, reshard after forward. With G < W it
// takes the shard group's and the replicas' comms from opts->mesh: gcomm_host, and for the CPU
// backend dcomm. Keep-gathered sizes the parameter pool at one slot per unit.)
// The CPU backend's constructor with the options (zt_fsdp_init = this with none).
int zt_fsdp_init_opts(zt_fsdp *f, zt_comm *comm, const zt_model_config *cfg, const zt_ops *ops, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, const zt_fsdp_opts *opts);
// The trained targets of `nblocks` blocks of this rank, summed over all ranks (one
// all-reduce on the host comm, tagged `what`) when f->token_flags; W * nblocks * (S - 1) otherwise.
int zt_fsdp_count_targets(zt_fsdp *f, const uint32_t *const *blocks, int nblocks, const char *what, int64_t *global);

// A backend's `stage`: the raw block words of one micro-batch (blocks[0..micro_batch), row
// b at ids/targets/pos + b * seq_len) as bare ids, targets and (pos non-NULL) document
// positions (zt_batch_words, row by row, straight from the blocks); a NULL block is a filler
// of zeros whose targets count nothing. Returns the micro-batch's trained targets.
// Every staged id is checked against the model's vocab_size (targets are ids too): a row
// holding one outside it is staged as a filler instead, so no embedding or loss kernel ever
// indexes with it; f->stage_refused counts the row and zt_err names the first (micro-batch
// f->micro, its row, the position, the id). Callers make such a step update nothing.
int64_t zt_fsdp_stage_rows(zt_fsdp *f, const uint32_t *const *blocks, uint32_t *ids, int32_t *targets,
                           int32_t *pos);
// The same under context parallelism (C > 1): the rows of this rank's held tokens, seq_local per
// block (ids, targets, pos [micro_batch * seq_local]; pos always written: each token's RoPE position,
// its block position or, isolated, its document position; padding: id 0, no target, position 0).
// Returns the held tokens' targets.
int64_t zt_fsdp_stage_rows_context(zt_fsdp *f, const uint32_t *const *blocks, uint32_t *ids, int32_t *targets,
                                   int32_t *pos);
// The zig-zag split of a block of S tokens over C ranks: 2C chunks (chunk k = [k S / 2C,
// (k + 1) S / 2C)); rank r holds chunks r and 2C - 1 - r, an early and a late one, so every rank
// has about the same causal attention work. index[r * S_local + t] as zt_family_context.index;
// returns S_local (the longest rank's count), or -1 + zt_err when a chunk would be empty (2C > S).
int64_t zt_context_split(int64_t S, int C, int32_t **index);
// Under context parallelism (after the groups are taken): the whole-row staging buffers
// zt_fsdp_stage_rows_context picks this rank's tokens from, and the zt_family_context a family's
// create takes: the split, and the exchange over the context group (deadline-guarded, named in the
// flight recorder, its bytes counted in bytes_ctx).
void zt_fsdp_context_stage_init(zt_fsdp *f);
zt_family_context zt_fsdp_family_context(zt_fsdp *f);

// The GPU backend's constructor (fsdp_cuda.c, inside the CUDA module; reached through
// engine/cuda_module.h).
int zt_fsdp_cuda_engine_init(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_model_config *cfg, int micro_batch,
                             int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed,
                             const zt_fsdp_opts *opts);
#endif
