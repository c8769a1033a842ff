// The bytes one rank holds while the FSDP engine trains a config under a sharding: its shards of
// the parameters, gradients and Adam state, the gathered-unit and full-gradient buffers the engine
// allocates (its slot counts, engine/fsdp.h) and one micro-batch's saved activations. The one
// memory formula: the planner (ops/plan.c) and the preflight gate's keep-gathered check
// (train/preflight.c) both call it; docs/plan.md states its assumptions.
// defines: zt_rank_memory_job, zt_rank_memory, zt_rank_memory_predict
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
} zt_rank_memory_job;

// Bytes held by one rank.
typedef struct {
    double params;        // fp32 master shard (+ a bf16 parameter shard, the all-gather source, when bf16)
    double grads;         // fp32 gradient shard (+ the unsharded accumulator for nosync)
    double optimizer;     // fp32 Adam m and v shards
    double buffers;       // gathered-unit parameter buffers + full-unit gradient buffers
    double activations;   // saved activations of one micro-batch, with or without recompute (per job)
    double act_no_recompute, act_recompute;  // both variants
    double total;         // params + grads + optimizer + buffers + activations
} zt_rank_memory;

// 0, or -1 + zt_err (a job field out of range, a config without a layout).
int zt_rank_memory_predict(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *out);
#endif
