// FSDP / ZeRO-3 engine: every rank owns a contiguous slice of each unit's padded
// canonical flat vector (fp32 master, Adam m and v, fp32 grad shard). A unit's full
// parameters exist only while it is in use: all-gathered just in time (unit i+1 in
// flight while unit i computes), released after its forward, re-gathered for its
// backward (unit i-1 issued before unit i's reduce-scatter), and its gradient leaves
// by reduce-scatter while the next unit computes.
// The schedule exists once (fsdp.c) over a backend table (fsdp_internal.h): the CPU
// backend (fsdp_cpu.c, fp32 on host buffers through any zt_comm) and the GPU backend
// (fsdp_cuda.c, bf16 compute with fp32 master/grads on device buffers through an NCCL
// zt_comm; built into the CUDA module, engine/cuda_module.h, loaded on demand). Callers see
// an opaque engine made by zt_fsdp_create from a backend name, and accessors.
// defines: zt_fsdp, zt_fsdp_config, zt_fsdp_create, zt_fsdp_destroy, zt_fsdp_get_step, zt_fsdp_set_step,
//          zt_fsdp_set_epoch, zt_fsdp_layout, zt_fsdp_unit_count, zt_fsdp_get_shard, zt_fsdp_step,
//          zt_fsdp_eval, zt_fsdp_eval_from, zt_fsdp_gather_full, zt_fsdp_to_device, zt_fsdp_to_host,
//          zt_fsdp_set_data, zt_fsdp_memory_usage, zt_fsdp_cuda_devices
#ifndef ZT_FSDP_H
#define ZT_FSDP_H
#include <stdint.h>

#include "kernels/cuda/attention/policy.h"  // zt_attn_kind, ZT_ATTN_*
#include "model/family.h"
#include "engine/comm.h"
#include "engine/mesh.h"
#include "engine/optim.h"

#define ZT_FSDP_ALIGN 16        // elements: a shard starts on a 64-byte boundary
#define ZT_FSDP_PARAM_SLOTS 3   // full-parameter buffers (current, prefetched, tied embedding)
#define ZT_FSDP_GRAD_SLOTS 4    // full-gradient buffers (computing, reduce-scatters in flight, tied)

// The GPU engine's attention (zt_fsdp_config.attention, zt_fsdp_opts.attention): a zt_attn_kind
// (kernels/cuda/attention/policy.h: ZT_ATTN_TILED, the default with no S x S scratch; ZT_ATTN_CUDNN;
// ZT_ATTN_GEMM), resolved by zt_attn_choose before the engine sees it.

typedef struct {
    double loss;            // mean over all trained targets of the global step (0 when it has none)
    int64_t targets;        // global trained targets in the step (every position but each block's last for
                            // plain data; masked and document-start targets excluded for supervised data)
    double grad_norm;       // global, before clipping
    double clip_coef, lr;
    int64_t tokens;         // global tokens in the step
    int nonfinite;          // 1: the loss or the gradient norm was not finite (then the update was skipped)
    int nonfinite_ranks;    // ranks whose loss was not finite (CPU engine; the GPU engine sums the loss: -1 if so)
    int stop_requested;     // ranks that passed ZT_FSDP_STOP (all-reduced with the loss: no extra collective)
    int input_bad;          // ranks that passed ZT_FSDP_INPUT_BAD or whose blocks were refused: no update was made
    int input_refused;      // 1: this rank's blocks held a token id >= the model's vocab_size (zt_err names it);
                            // it was never staged (counted in input_bad)
    double t_step, t_compute, t_comm_wait;  // this rank's seconds
    double t_update_fence;  // of t_step: waiting in the update fence before the optimizer (zt_fsdp_set_update_fence)
    int64_t bytes_gathered, bytes_scattered; // this rank's received (all-gather) / sent (reduce-scatter) bytes
    int64_t bytes_context;     // context parallelism: this rank's K/V all-gather bytes received + dK/dV
                               // reduce-scatter bytes sent over its context group (0 at C = 1)
    int64_t bytes_replicated;  // hybrid sharding: this rank's bytes sent by the replica all-reduce (ring: 2 (R-1)/R
                               // of its gradient shard's bytes; 0 at full shard)
} zt_fsdp_stats;

typedef struct {
    int64_t params, grads, optimizer, buffers, activations;  // bytes held by this rank
    // GPU engine, device bytes beside those (0 on the CPU engine): the context split's buffers (of the
    // family's create, not in activations), the op layer's scratch arena as reserved at start (ops may
    // grow it during the first step), the cuBLASLt workspace
    int64_t context, scratch, workspace;
    int64_t host_pinned;  // GPU engine: bytes of host master/Adam copies that are page-locked (0: pageable)
} zt_fsdp_memory;

typedef struct zt_fsdp zt_fsdp;  // opaque: engine/fsdp_internal.h (backends and tests only)

// What an engine is built for. Every rank passes the same values.
typedef struct {
    const char *backend;           // "cpu" (fp32 on the host, any zt_comm) or "cuda" (bf16 on the GPU, the module)
    zt_comm *comm;                 // host collectives (target counts, gather_full; the CPU backend's everything)
    zt_comm *dcomm;                // cuda: the NCCL comm of the unit collectives (zt_cuda_comm_init); cpu: unused
    const zt_model_config *cfg;
    int micro_batch, grad_accum;
    int64_t seq_len;
    zt_hparams hp;
    uint64_t seed;                 // parameters initialised from it exactly as the reference trainer does
    int recompute;                 // cuda: keep only each layer's input, re-run its forward before its backward
    int attention;                 // cuda: ZT_ATTN_TILED (0), ZT_ATTN_CUDNN (refused when not built), ZT_ATTN_GEMM
    int shard_group;               // G: shard over groups of G consecutive ranks, replicate across W/G (hybrid
                                   // sharding); 0 = W (full shard). Must divide W (zt_fsdp_check_shard_group)
    const zt_mesh *mesh;           // the process groups (engine/mesh.h; its G = shard_group): comm is its world
                                   // group, dcomm its device world. Needed for G < W; NULL: full shard
    int keep_gathered;             // 1: parameters stay gathered from a unit's forward to its backward (no
                                   // backward re-gather; --reshard-after-forward false)
    int context;                   // C: context parallelism over the mesh's context groups (C consecutive
                                   // ranks share each block; C divides G); 0 or 1: none. cpu only
    int no_seed_init;              // 1: leave the master shards zero instead of drawing the seeded init: the
                                   // caller writes every value before the first step (--init). The draw is
                                   // serial per tensor (its streams fix the values): minutes at 32B shapes
                                   // on one rank, all of it overwritten
} zt_fsdp_config;

// 0, or -1 + zt_err when G (0 = the world) does not divide the world.
int zt_fsdp_check_shard_group(int shard_group, int world);
// The strategy of an engine: shard group size G, replicas R = W / G, this rank's replica
// index (0..R-1; replica 0 of each group writes checkpoints) and keep-gathered.
typedef struct {
    int shard_group, replicas, replica, shard_rank, keep_gathered;
    int context;  // C (1: none): ranks sharing each block
} zt_fsdp_strategy;
void zt_fsdp_get_strategy(const zt_fsdp *f, zt_fsdp_strategy *out);
// Collective over all ranks: every replica of a shard holds the same bytes (CRC-32C of this
// rank's master, Adam m and v over every unit, all-gathered). 0, or -1 + the same zt_err on
// every rank naming each rank whose state differs from its replica 0's. A no-op (0) when R = 1.
// Test hook: ZT_TEST_CORRUPT_REPLICA=N flips one bit of rank N's first master element first.
int zt_fsdp_check_replicas(zt_fsdp *f);

// The batch shape every engine and trainer accepts: 0, or -1 + zt_err naming both flags.
int zt_fsdp_check_batch(int micro_batch, int grad_accum);
// Collective. 0 and *out, or -1 + zt_err (an unknown backend, the CUDA module missing, ...).
int zt_fsdp_create(const zt_fsdp_config *c, zt_fsdp **out);
void zt_fsdp_destroy(zt_fsdp *f);  // NULL is fine

// What the trainer and the checkpoints need of an engine.
int64_t zt_fsdp_get_step(const zt_fsdp *f);          // optimizer steps done
void zt_fsdp_set_step(zt_fsdp *f, int64_t step);     // after a resume: Adam's bias correction and the LR go on
void zt_fsdp_set_epoch(zt_fsdp *f, int64_t epoch);   // shown in deadline reports
const zt_model_layout *zt_fsdp_layout(const zt_fsdp *f);
int zt_fsdp_unit_count(const zt_fsdp *f);
// This rank's slice of unit u's canonical vector: elements [lo, lo + shard), of which the
// first `valid` lie inside the unpadded unit; master/m/v are the host copies (on the GPU
// engine: page-locked, moved with zt_fsdp_to_device / zt_fsdp_to_host).
typedef struct {
    int64_t numel, lo, shard, valid;
    float *master, *m, *v;
} zt_fsdp_shard;
void zt_fsdp_get_shard(const zt_fsdp *f, int u, zt_fsdp_shard *out);

int zt_fsdp_cuda_available(void);  // the CUDA module loads (this loads it)
int zt_fsdp_cuda_cudnn_built(void);  // the loaded CUDA module has the cuDNN attention path
// ... and the GPU passes of cfg's model family run it (Qwen3.5's gated attention does not):
// what --attention auto asks before it chooses cuDNN
int zt_fsdp_cuda_cudnn_serves(const zt_model_config *cfg);
// CUDA devices visible to this process: 0 without the module, or (unless `load`) when no
// NVIDIA driver is present, so that `--device auto` on a CPU host never loads the module.
int zt_fsdp_cuda_devices(int load);
// Why the last zt_fsdp_cuda_devices that looked for a GPU (--device cuda, or auto on a host
// with an NVIDIA driver) found none: the module's load error (every path tried and why), or
// "the CUDA module /abs/path (...) loaded but sees no CUDA device: <CUDA's reason>". NULL when it did not
// look (no driver) or found a device.
const char *zt_fsdp_cuda_why_none(void);
// "cuda backend: NVIDIA H200, sm_90, 132 SMs, 139.8 GiB (device 0)" for an NCCL comm's GPU.
void zt_fsdp_cuda_describe(zt_comm *dcomm, char *buf, size_t n);
// Host copies <-> device state (GPU engine; no-ops on the CPU engine). to_device after
// loading weights or a checkpoint into units[].master/m/v; to_host before reading them.
int zt_fsdp_to_device(zt_fsdp *f);
int zt_fsdp_to_host(zt_fsdp *f);
// --async-save on the GPU engine: the host copies become the checkpoint's snapshot without
// stopping the loop. snapshot_begin queues the device-to-host copy of master, m and v on the
// engine's own snapshot stream, ordered after the last optimizer update by an event (on the
// device), and the next update waits for the copy's event (on the device). snapshot_ready: 1
// once the copy is complete and the host copies may be read, 0 while it runs (wait = 1: block
// until it is). The host copies must not be read or changed in between. has_snapshot: 0 on the
// CPU engine (its shards are the host copies; the caller copies them).
int zt_fsdp_has_snapshot(const zt_fsdp *f);
// --async-save on the CPU engine (whose shards are the host copies): fence(arg) is called in every
// step before the optimizer rewrites master, m and v, and returns once whatever still reads them
// (the checkpoint writer copying its snapshot) has finished, with the seconds it waited (reported as
// zt_fsdp_stats.t_update_fence). NULL: none.
void zt_fsdp_set_update_fence(zt_fsdp *f, double (*fence)(void *arg), void *arg);
int zt_fsdp_snapshot_begin(zt_fsdp *f);
int zt_fsdp_snapshot_ready(zt_fsdp *f, int wait);
// One optimizer step; blocks holds this rank's micro_batch * grad_accum blocks.
// flags: ZT_FSDP_STOP (e.g. a signal arrived), counted over ranks into out->stop_requested;
// ZT_FSDP_INPUT_BAD (this rank's blocks could not be read: they hold zeros), counted into
// out->input_bad: when any rank says so, no rank updates and the step counter stays (the
// step did not happen). Both ride on the step's one control all-reduce. A block holding a
// token id >= the model's vocab_size is refused at staging whatever the flags (never read by
// a kernel): out->input_refused, zt_err naming it, and counted into input_bad like the flag.
#define ZT_FSDP_STOP 1
#define ZT_FSDP_INPUT_BAD 2
int zt_fsdp_step(zt_fsdp *f, const uint32_t *const *blocks, int flags, zt_fsdp_stats *out);
// What the blocks hold, before the first step (every rank the same): token_flags for
// version-2 words (loss masks, document starts), isolated for document-causal attention
// and per-document RoPE positions (needs token_flags). The GPU engine refuses isolation
// with cuDNN attention (its causal graph would attend across documents).
int zt_fsdp_set_data(zt_fsdp *f, int token_flags, int isolated);
// Collective evaluation: the mean loss of nmicro micro-batches (micro_batch blocks each,
// blocks[i * micro_batch + b]) on every rank, forward only. Every rank must pass the same
// nmicro (the collectives match unit by unit); a NULL block is a filler that runs but
// counts nothing, so ranks with fewer blocks keep step. Returns the global summed loss
// and target count; parameters, optimizer state, the step counter and gradients are
// untouched.
int zt_fsdp_eval(zt_fsdp *f, const uint32_t *const *blocks, int nmicro, double *loss_sum, int64_t *targets);
// The same pass with micro-batches fetched one at a time. fetch fills blocks[0..micro_batch)
// of micro-batch m (NULL: a filler) and returns 0, or -1 + zt_err when this rank's input is
// bad. With stop (nonzero: this rank asks the pass to end, e.g. a stop signal), every rank
// agrees before each micro-batch (an all-reduce on the host comm): a stop or a bad input on
// any rank ends the pass there on every rank (out->stopped / out->bad count the ranks; no
// loss is returned; this rank's own reason, if it had one, is in zt_err). Without stop no
// agreement is made and fetch must not fail.
typedef struct {
    int (*fetch)(void *ctx, int m, const uint32_t **blocks);
    int (*stop)(void *ctx);
    void *ctx;
} zt_fsdp_eval_source;
typedef struct {
    double loss_sum;
    int64_t targets;
    int micro_done;  // micro-batches evaluated
    int stopped;     // ranks that asked to stop (the pass ended early)
    int bad;         // ranks whose input was bad (the pass ended early)
} zt_fsdp_eval_result;
int zt_fsdp_eval_from(zt_fsdp *f, int nmicro, const zt_fsdp_eval_source *src, zt_fsdp_eval_result *out);
// Collective: assemble full per-unit parameter vectors (unpadded) on every rank.
int zt_fsdp_gather_full(zt_fsdp *f, float **full);
void zt_fsdp_memory_usage(const zt_fsdp *f, zt_fsdp_memory *m);

#endif
