// The shape of a training job over the mesh (engine/mesh.h), in one place for every caller:
// how many ranks hold distinct data (data parallelism is over the W / C context groups, each
// sharing its blocks: train/data_cursor.c deals over them), how many tokens one optimizer step
// trains, and the one validity rule of a context split. The trainer (run.json, its start line),
// the session and the preflight gate, the engines and the planner (ops/plan.c, which must not
// reach into train/) all call these, so they cannot disagree.
// defines: zt_data_parallel_ranks, zt_tokens_per_step, zt_context_job, zt_context_check
#ifndef ZT_JOB_SHAPE_H
#define ZT_JOB_SHAPE_H
#include <stdint.h>

#include "model/family.h"

#ifdef __cplusplus
extern "C" {
#endif

// The ranks that train distinct blocks: W / C (C ranks of a context group share each block;
// C of 0 or 1: none, W).
int zt_data_parallel_ranks(int world, int context);

// Tokens one optimizer step trains over the whole job: data-parallel ranks x micro-batch x
// grad-accum x seq_len (C ranks share a block, so a block counts once, not C times).
int64_t zt_tokens_per_step(int world, int context, int micro_batch, int grad_accum, int64_t seq_len);

// What a context split is checked against; a member left 0 / NULL is not known to the caller
// yet and that part of the rule is skipped (a caller that knows it later checks again).
typedef struct {
    int context;                 // C: ranks sharing each block (0 or 1: no split; always valid)
    int shard_group;             // G: C consecutive ranks of a shard group share a block, so C | G
    int world;                   // W (C | G | W)
    int64_t seq_len;             // S: a block is cut into 2C chunks, so 2C <= S
    const zt_family *family;     // its table says whether its layers take a split
    const zt_model_config *config;  // the model (with family: the family's own rule, zt_family.context_rule)
    int gpu;                     // 1: the GPU passes run it (the family's table must say ZT_CONTEXT_GPU)
    int attention;               // the GPU attention asked (zt_attn_kind; 0, tiled: any), e.g. cuDNN takes no split
    const char *shard_name;      // how the message names the shard group ("full", "hsdp"; NULL: none)
} zt_context_job;

// 0, or -1 + zt_err naming the numbers and the rule: C < 0; C does not divide G (or W); 2C > S;
// a family without context parallelism; the family's own rule for the config (Qwen3.5: C <= its
// value heads); an attention kind that takes no split (zt_attn_split_check: cuDNN). Pure: callers
// check it on every rank before anything is written (the session before it takes RUN/lock, preflight, the engines, plan).
int zt_context_check(const zt_context_job *j);

#ifdef __cplusplus
}
#endif
#endif
