// FSDP / ZeRO-3 engine: every rank owns a contiguous slice of each unit's padded
// canonical flat vector (fp32 master, Adam m and v, fp32 grad shard). A unit's full
// parameters exist only while it is in use: all-gathered just in time (unit i+1 in
// flight while unit i computes), released after its forward, re-gathered for its
// backward (unit i-1 issued before unit i's reduce-scatter), and its gradient leaves
// by reduce-scatter while the next unit computes.
// The schedule exists once (fsdp.c) over a backend table (fsdp_internal.h): the CPU
// backend (fsdp_cpu.c, fp32 on host buffers through any zt_comm) and the GPU backend
// (fsdp_cuda.c, bf16 compute with fp32 master/grads on device buffers through an NCCL
// zt_comm; built into the CUDA module, engine/cuda_module.h, loaded on demand), selected
// by zt_fsdp_init / zt_fsdp_init_cuda.
// defines: zt_fsdp, zt_fsdp_opts, zt_fsdp_init, zt_fsdp_init_cuda, zt_fsdp_step, zt_fsdp_eval, zt_fsdp_eval_from,
//          zt_fsdp_gather_full, zt_fsdp_to_device, zt_fsdp_to_host, zt_fsdp_free, zt_fsdp_event
#ifndef ZT_FSDP_H
#define ZT_FSDP_H
#include <stdint.h>

#include "model/qwen3.h"
#include "engine/comm.h"
#include "engine/optim.h"

#define ZT_FSDP_ALIGN 16        // elements: a shard starts on a 64-byte boundary
#define ZT_FSDP_PARAM_SLOTS 3   // full-parameter buffers (current, prefetched, tied embedding)
#define ZT_FSDP_GRAD_SLOTS 4    // full-gradient buffers (computing, reduce-scatters in flight, tied)

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
    int input_bad;          // ranks that passed ZT_FSDP_INPUT_BAD: the step made no update
    double t_step, t_compute, t_comm_wait;  // this rank's seconds
    int64_t bytes_gathered, bytes_scattered; // this rank's received (all-gather) / sent (reduce-scatter) bytes
} zt_fsdp_stats;

typedef struct {
    int64_t params, grads, optimizer, buffers, activations;  // bytes held by this rank
    int64_t host_pinned;  // GPU engine: bytes of host master/Adam copies that are page-locked (0: pageable)
} zt_fsdp_memory;

struct zt_fsdp_backend;  // engine/fsdp_internal.h

// Engine options (the GPU backend's; the CPU backend has none of these). Zero = default.
#define ZT_FSDP_CUDNN_FORCE 2
typedef struct {
    int recompute;          // keep only each layer's input; re-run its forward before its backward
                            // (one more forward per step; identical results: the ops are deterministic)
    int attention_cudnn;    // 1: cuDNN fused flash attention (refused when not built); 0: cuBLASLt products +
                            // fused softmax; ZT_FSDP_CUDNN_FORCE: tests only, cuDNN selected even in a build
                            // without it, to reach the engine's refusals before any attention runs
    int param_slots;        // tests: smaller pools (0 = ZT_FSDP_PARAM_SLOTS; >= 2, or 3 when tied)
    int grad_slots;         //        (0 = ZT_FSDP_GRAD_SLOTS; >= 1)
    float bench_uniform;    // benchmarks: > 0 draws parameters uniform in [-a, a) on the device instead
                            // of the seeded host init (a minute saved at 32B shapes)
} zt_fsdp_opts;

typedef struct zt_fsdp {
    zt_comm *comm;            // host collectives (gather_full, target counts, the CPU engine's everything)
    zt_comm *dcomm;           // the unit collectives: comm (CPU backend) or the NCCL comm (GPU backend)
    int rank, world;
    const struct zt_fsdp_backend *be;
    void *bs;                 // the backend's state
    zt_qwen3 model;           // the layout; CPU backend: also the activations of one micro-batch
    const zt_ops *ops;
    zt_hparams hp;
    int micro_batch, grad_accum;
    int64_t seq_len;
    int nunits;
    zt_fsdp_unit *units;
    int64_t max_padded;
    // pools, owned by the schedule (fsdp.c), buffers by the backend: slots handed out round robin
    int np, ng;               // pool sizes in use (<= ZT_FSDP_*_SLOTS; smaller only in tests)
    void *pbuf[ZT_FSDP_PARAM_SLOTS];   // full-unit parameters (backend element type: fp32 or bf16)
    int pbuf_unit[ZT_FSDP_PARAM_SLOTS];  // unit held for compute, -1 free
    float *gbuf[ZT_FSDP_GRAD_SLOTS];   // full-unit fp32 gradients
    int gbuf_unit[ZT_FSDP_GRAD_SLOTS];   // unit whose backward writes it, -1 once reduce-scattered
    int p_last, g_last;       // slots handed out last
    int64_t step;             // optimizer steps done
    // per-step counters
    double t_wait;
    int64_t bytes_ag, bytes_rs;
    // event log (cleared at the start of each step)
    zt_fsdp_event *events;
    int nevents, events_cap;
    int micro;
    int64_t epoch;            // set by the training loop; shown in deadline reports
    int token_flags;          // blocks hold version-2 words (data/dataset.h): targets are counted per step
    int doc_isolated;         // packed documents attend only to themselves, RoPE restarts per document
} zt_fsdp;

// Collective: every rank calls it with the same config. Parameters are initialised
// from `seed` exactly as the single-process trainer does (independent of world).
int zt_fsdp_init(zt_fsdp *f, zt_comm *comm, const zt_qwen3_config *cfg, const zt_ops *ops, int micro_batch,
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
int zt_fsdp_init_cuda(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_qwen3_config *cfg, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed,
                      const zt_fsdp_opts *opts);
int zt_fsdp_cuda_available(void);  // the CUDA module loads (this loads it)
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
// One optimizer step; blocks holds this rank's micro_batch * grad_accum blocks.
// flags: ZT_FSDP_STOP (e.g. a signal arrived), counted over ranks into out->stop_requested;
// ZT_FSDP_INPUT_BAD (this rank's blocks could not be read: they hold zeros), counted into
// out->input_bad: when any rank says so, no rank updates and the step counter stays (the
// step did not happen). Both ride on the step's one control all-reduce.
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
void zt_fsdp_free(zt_fsdp *f);

// For the backends only: append to the event log.
void zt_fsdp_log(zt_fsdp *f, zt_fsdp_ev_kind k, int unit, int micro);
#endif
