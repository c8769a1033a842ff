// The bytes one rank holds while the FSDP engine trains a config under a sharding: its shards of
// the parameters, gradients and Adam state, the gathered-unit and full-gradient buffers the engine
// allocates (its slot counts, engine/fsdp.h) and one micro-batch's saved activations. The one
// memory formula: the planner (ops/plan.c) and the preflight gate's keep-gathered check
// (train/preflight.c) both call it; docs/plan.md states its assumptions.
// defines: zt_rank_memory_job, zt_rank_memory, zt_rank_memory_predict, zt_rank_memory_cpu, zt_rank_memory_cuda
#ifndef ZT_RANK_MEMORY_H
#define ZT_RANK_MEMORY_H
#include <stdint.h>

#include "model/config.h"

typedef struct {
    int shard_group;     // ranks each unit is sharded over (the world for a full shard)
    int micro_batch;
    int64_t seq_len;
    int param_bytes;     // gathered parameter dtype: 2 (bf16; 0 means 2, the GPU engine) or 4 (fp32, the CPU engine)
    int reduce_bytes;    // gradient reduction dtype: 4 (fp32) or 2 (bf16)
    int accum_bytes;     // the unsharded gradient accumulator (nosync): 4 (fp32; 0 means 4) or 2 (bf16)
    int nosync;          // gradients accumulate unsharded, one reduce-scatter per step (no gradient buffers)
    int recompute;       // full activation recomputation (checkpoint every decoder layer)
    int keep_gathered;   // every unit's gathered parameters resident at once (max(units, slots) buffers)
    // Context parallelism and the attention's own scratch (0, 0: neither, the formula as it was before
    // them). context_parallel C >= 1: C consecutive ranks of a shard group share each block, each
    // holding S/C of its tokens (activations of S/C tokens, the block's gathered K/V when C > 1);
    // the sharded state is unchanged (sharded over shard group x context ranks as before).
    int context_parallel;
    int attention;       // ZT_ATTN_SCRATCH_*: whose scratch counts in the total (0: none counted)
    int grad_accum;      // zt_rank_memory_cuda only: micro-batches per step (the step's reduction buffer); 0 means 1
} zt_rank_memory_job;

// The two GPU attention paths (docs/plan.md): the GEMM one (kernels/cuda/attention.cu) holds the
// scores of one KV-head group, O(S^2); a tiled (flash) one holds O(S D).
enum { ZT_ATTN_SCRATCH_NONE = 0, ZT_ATTN_SCRATCH_GEMM = 1, ZT_ATTN_SCRATCH_TILED = 2 };

// Bytes held by one rank.
typedef struct {
    double params;        // fp32 master shard (+ a bf16 parameter shard, the all-gather source, when bf16)
    double grads;         // fp32 gradient shard (+ the unsharded accumulator for nosync)
    double optimizer;     // fp32 Adam m and v shards
    double buffers;       // gathered-unit parameter buffers + full-unit gradient buffers
    double activations;   // saved activations of one micro-batch, with or without recompute (per job): the
                          // family's layer kinds (model/family.h zt_layer_plan) summed over the layers
    double act_no_recompute, act_recompute;  // both variants
    // with job.context_parallel >= 1 and a layer with softmax attention (zt_layer_plan.attention; 0 otherwise):
    double cp_kv;         // C > 1: one layer's K and V gathered over the context group (bf16) and the
                          // block's dK, dV before their reduce-scatter (fp32): 12 B S Hkv D
    double attn_gemm;     // GEMM attention scratch of one KV-head group, Sq = S/C queries against S keys:
                          // 12 g Sq S + 8 g S D + 4 g Sq (g = H / Hkv; C = 1: zt_cuda_attention_scratch_bytes)
    double attn_tiled;    // a tiled attention's scratch of one KV-head group: o (bf16), lse, row dot and
                          // dq (fp32) of its g Sq query rows, fp32 dk and dv of the S keys: g Sq (6 D + 8) + 8 S D
    double attention;     // the counted one (job.attention), 0 when none
    double cp_heads;      // C > 1: the family's split beyond the K/V exchange (zt_family.context_plan: Qwen3.5's
                          // head-sharded Gated DeltaNet buffers); 0 without one
    double total;         // params + grads + optimizer + buffers + activations + cp_kv + cp_heads + attention
    // zt_rank_memory_cuda only (0 elsewhere): the GPU engine's device parts beside the five above
    double context;       // the context split's buffers (model/qwen3_cuda_context.c)
    double scratch;       // the op layer's scratch arena as the engine reserves it
    double workspace;     // the cuBLASLt workspace
} zt_rank_memory;

// 0, or -1 + zt_err (a job field out of range, a config without a layout).
int zt_rank_memory_predict(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *out);

// The CPU engine's bytes per rank, as engine/fsdp_cpu.c allocates and reports them (run.json's
// memory_per_rank_bytes; `plan --device cpu`): fp32 master, gradient and Adam m, v shards; its fp32
// gathered-unit, full-gradient and receive buffers (none to gather with a shard group of one); the
// family's activations and workspaces (zt_family_cpu.act_bytes_for) and the engine's d(input) row.
// Everything is fp32 and the CPU engine keeps every layer's activations, so the job's dtype fields
// and recompute are not read; context_parallel C > 1 splits each block (its whole-block buffers
// are in the family's count). Fills params, grads, optimizer, buffers, activations, total.
int zt_rank_memory_cpu(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *out);

// The GPU engine's device bytes per rank, as engine/fsdp_cuda.c allocates and reports them (run.json's
// memory_per_rank_bytes of a `train --device cuda` run; `plan --device cuda`): the fp32 master, gradient
// and Adam m, v shards and the bf16 all-gather source; the bf16 gathered-unit buffers, the fp32
// full-gradient buffers and their reduce-scatter receive buffers; and, through the CUDA module (loaded
// here: -1 + zt_err without one), the family's activations and workspaces, the staging buffers, the
// context split's buffers, the scratch arena and the cuBLASLt workspace (cuda_module.h memory_for).
// Sizes are those asked of cudaMalloc; the allocator's rounding, the CUDA context, cuBLASLt's and NCCL's
// own memory are in neither number. job.attention: ZT_ATTN_SCRATCH_GEMM or _TILED (0: GEMM); the
// dtype fields are not read (the engine gathers bf16 and reduces fp32). Fills params, grads,
// optimizer, buffers, activations, context, scratch, workspace, total.
int zt_rank_memory_cuda(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *out);
#endif
