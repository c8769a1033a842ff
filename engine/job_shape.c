// The job's shape over the mesh (engine/job_shape.h): data-parallel ranks, tokens per step and
// the context split's validity rule, the one copy each of them.
#include "engine/job_shape.h"

#include <stdio.h>

#include "base/common.h"
#include "kernels/cuda/attention/policy.h"

int zt_data_parallel_ranks(int world, int context) { return context > 1 ? world / context : world; }

int64_t zt_tokens_per_step(int world, int context, int micro_batch, int grad_accum, int64_t seq_len) {
    return (int64_t)zt_data_parallel_ranks(world, context) * micro_batch * grad_accum * seq_len;
}

int zt_context_check(const zt_context_job *j) {
    const int C = j->context, G = j->shard_group, W = j->world;
    if (C < 0) return zt_err("--context-parallel %d must be >= 1", C);
    if (C <= 1) return 0;
    char group[48] = "the shard group", world[32] = "";
    if (j->shard_name && *j->shard_name) snprintf(group, sizeof group, "the %.20s shard group", j->shard_name);
    if (W > 0) snprintf(world, sizeof world, "; W = %d", W);
    if ((G > 0 && G % C != 0) || (W > 0 && (C > W || W % C != 0)))
        return zt_err("--context-parallel %d does not divide %s of %d ranks (--shard-group%s): a context group is C "
                      "consecutive ranks inside a shard group, so C must divide G (and W)",
                      C, group, G > 0 ? G : W, world);
    if (j->seq_len > 0 && 2 * (int64_t)C > j->seq_len)
        return zt_err("--context-parallel %d: blocks of %lld tokens cannot be split into 2 x %d chunks (each rank holds "
                      "an early and a late chunk); C must be at most seq_len / 2 = %lld",
                      C, (long long)j->seq_len, C, (long long)(j->seq_len / 2));
    if (j->family && !j->family->context_parallel)  // what is missing: the family's words
        return zt_err("--context-parallel %d: the %s family does not train with context parallelism (context "
                      "parallelism is not implemented for %s: its layers' sequence mixing across the split is not%s%s); "
                      "train it without --context-parallel",
                      C, j->family->name, j->family->title ? j->family->title : j->family->name,
                      j->family->context_parallel_missing ? ", e.g. " : "",
                      j->family->context_parallel_missing ? j->family->context_parallel_missing : "");
    if (j->family && j->gpu && !(j->family->context_parallel & ZT_CONTEXT_GPU))
        return zt_err("--context-parallel %d: the %s family does not train with context parallelism on the GPU yet "
                      "(%s's GPU passes take no split; its CPU passes do: --device cpu); train it on the GPU without "
                      "--context-parallel",
                      C, j->family->name, j->family->title ? j->family->title : j->family->name);
    if (j->family && j->config && j->family->context_rule && j->family->context_rule(j->config, C) != 0) return -1;
    if (j->family && j->config && j->gpu && j->family->context_rule_gpu && j->family->context_rule_gpu(j->config, C) != 0)
        return -1;
    if (zt_attn_split_check(j->attention, C) != 0) return -1;  // the attention kind's rule (policy.h)
    return 0;
}
