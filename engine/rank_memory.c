// The memory formula of one rank (engine/rank_memory.h): the layout's padded shards, the engine's
// buffer slots and a micro-batch's saved activations, in bytes. It lives beside the engine because
// the buffers it counts are the engine's (ZT_FSDP_ALIGN, ZT_FSDP_PARAM_SLOTS, ZT_FSDP_GRAD_SLOTS); what a
// decoder layer keeps is the family's (zt_layer_plan, model/family.h).
// defines: zt_rank_memory_predict, zt_rank_memory_cpu, zt_rank_memory_cuda
#include "engine/rank_memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/cuda_module.h"
#include "engine/fsdp.h"
#include "engine/fsdp_internal.h"
#include "engine/job_shape.h"
#include "model/family.h"
#include "model/layout.h"

static double pad_to(double n, double m) { return ceil(n / m) * m; }

static int check_job(const zt_rank_memory_job *job) {
    if (job->shard_group < 1) return zt_err("shard group %d must be >= 1", job->shard_group);
    if (job->micro_batch < 1 || job->seq_len < 1)
        return zt_err("micro-batch (%d) and seq-len (%lld) must be >= 1", job->micro_batch, (long long)job->seq_len);
    if (job->reduce_bytes != 2 && job->reduce_bytes != 4)
        return zt_err("reduce dtype must be bf16 (2 bytes) or fp32 (4 bytes), got %d bytes", job->reduce_bytes);
    if (job->accum_bytes != 0 && job->accum_bytes != 2 && job->accum_bytes != 4)
        return zt_err("accumulator dtype must be bf16 (2 bytes) or fp32 (4 bytes), got %d bytes", job->accum_bytes);
    if (job->param_bytes != 0 && job->param_bytes != 2 && job->param_bytes != 4)
        return zt_err("parameter dtype must be bf16 (2 bytes) or fp32 (4 bytes), got %d bytes", job->param_bytes);
    const zt_context_job cj = {.context = job->context_parallel, .shard_group = job->shard_group,
                               .seq_len = job->seq_len};
    if (zt_context_check(&cj) != 0) return -1;  // the rule train and preflight apply (2C <= S among it)
    if (job->attention < ZT_ATTN_SCRATCH_NONE || job->attention > ZT_ATTN_SCRATCH_TILED)
        return zt_err("attention scratch kind %d is not gemm (1) or tiled (2)", job->attention);
    return 0;
}

// engine/fsdp.c: each unit padded to a multiple of shard group x ZT_FSDP_ALIGN elements; *shard =
// the elements one rank holds, *max_padded = the largest padded unit.
static void padded_units(const zt_model_layout *lay, int gs, double *shard, double *max_padded) {
    *shard = 0, *max_padded = 0;
    for (int u = 0; u < lay->nunits; u++) {
        const double padded = pad_to((double)lay->units[u].numel, (double)gs * ZT_FSDP_ALIGN);
        *shard += padded / gs;
        if (padded > *max_padded) *max_padded = padded;
    }
}

// Sharded state and the engine's full-unit buffers.
static void state_and_buffers(const zt_rank_memory_job *job, const zt_model_layout *lay, zt_rank_memory *mem) {
    const int gs = job->shard_group;
    double shard, max_unit;
    padded_units(lay, gs, &shard, &max_unit);
    const double n = (double)lay->total_numel;
    const double pb = job->param_bytes > 0 ? job->param_bytes : 2;
    mem->params = (pb == 2 ? 6.0 : 4.0) * shard;  // fp32 master (+ a bf16 all-gather source when bf16)
    const double accum = job->accum_bytes > 0 ? job->accum_bytes : 4;
    mem->grads = 4.0 * shard + (job->nosync ? accum * n : 0.0);
    mem->optimizer = 8.0 * shard;
    // ZT_FSDP_PARAM_SLOTS gathered units (keep-gathered: one per unit, as the engine allocates them);
    // ZT_FSDP_GRAD_SLOTS full-unit gradients in the reduce dtype (nosync accumulates straight into its
    // unsharded fp32 buffer and needs none).
    const int pslots = job->keep_gathered && lay->nunits > ZT_FSDP_PARAM_SLOTS ? lay->nunits : ZT_FSDP_PARAM_SLOTS;
    mem->buffers = pslots * max_unit * pb + (job->nosync ? 0.0 : ZT_FSDP_GRAD_SLOTS * max_unit * job->reduce_bytes);
}

// Saved activations of one micro-batch in the GPU plan's dtypes: the family's counts of each kind of
// decoder layer (zt_layer_plan: bf16 values, fp32 statistics and per-row state), summed over the layers;
// the head; one layer's backward workspace (the largest kind's). With context parallelism each rank
// holds S/C tokens of the block. Returns whether any layer attends over the S keys (softmax attention).
static int activations(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *mem) {
    const double C = job->context_parallel > 1 ? job->context_parallel : 1;
    const double T = (double)job->micro_batch * (double)job->seq_len / C, B = job->micro_batch;
    const double d = (double)c->hidden_size, V = (double)c->vocab_size, L = c->num_layers;
    int n[ZT_LAYER_KINDS], attention = 0;
    zt_model_layer_kinds(c, n);
    double layers = 0, live = 0, work = 0;
    for (int k = 0; k < ZT_LAYER_KINDS; k++) {
        if (!n[k]) continue;
        zt_layer_plan p;
        zt_model_layer_plan(c, k, (int64_t)ceil((double)job->seq_len / C), &p);
        const double layer = T * (2.0 * p.values + 4.0 * p.stats) + B * 4.0 * p.row_stats;
        layers += n[k] * layer;
        live = fmax(live, layer);
        work = fmax(work, T * 2.0 * p.work);
        attention |= p.attention;
    }
    // head: final-norm output (bf16) + fp32 logits of the micro-batch (gradient in place)
    const double head = T * (2.0 * d + 4.0 * V);
    mem->act_no_recompute = layers + head + work;
    mem->act_recompute = L * T * d * 2.0 + live + head + work;  // checkpointed layer inputs + one live layer
    mem->activations = job->recompute ? mem->act_recompute : mem->act_no_recompute;
    return attention;
}

// Context parallelism's K/V buffers and the attention's own scratch (docs/plan.md), of the layers with
// softmax attention (none: 0). The attention ops run one (batch row, KV-head group) at a time and one
// layer at a time, so the scratch grows neither with the micro-batch nor with the layers.
static void attention_terms(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *mem) {
    if (job->context_parallel < 1) return;
    const double C = job->context_parallel, S = (double)job->seq_len, Sq = S / C, B = job->micro_batch;
    const double g = (double)c->num_heads / c->num_kv_heads, D = c->head_dim, Hkv = c->num_kv_heads;
    mem->cp_kv = C > 1 ? B * S * Hkv * D * (2.0 * 2 + 2.0 * 4) : 0.0;
    mem->attn_gemm = 12.0 * g * Sq * S + 8.0 * g * S * D + 4.0 * g * Sq;
    mem->attn_tiled = g * Sq * (6.0 * D + 8.0) + 8.0 * S * D;
    mem->attention = job->attention == ZT_ATTN_SCRATCH_GEMM    ? mem->attn_gemm
                     : job->attention == ZT_ATTN_SCRATCH_TILED ? mem->attn_tiled
                                                                : 0.0;
}

int zt_rank_memory_predict(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *out) {
    memset(out, 0, sizeof *out);
    if (check_job(job) != 0) return -1;
    zt_model_layout lay;
    if (zt_model_layout_init(&lay, c) != 0) return -1;
    state_and_buffers(job, &lay, out);
    if (activations(c, job, out)) attention_terms(c, job, out);
    if (job->context_parallel > 1 && c->family && c->family->context_plan) {
        zt_context_split_plan sp;
        if (c->family->context_plan(c, job->context_parallel, job->micro_batch, job->seq_len, job->recompute, &sp) != 0) {
            zt_model_layout_free(&lay);
            return -1;
        }
        out->cp_heads = sp.bytes;
    }
    out->total = out->params + out->grads + out->optimizer + out->buffers + out->activations;
    if (job->context_parallel > 0) out->total += out->cp_kv + out->cp_heads + out->attention;
    zt_model_layout_free(&lay);
    return 0;
}

int zt_rank_memory_cpu(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *out) {
    memset(out, 0, sizeof *out);
    if (check_job(job) != 0) return -1;
    if (!c->family || !c->family->cpu || !c->family->cpu->act_bytes_for)
        return zt_err("the %s family does not state its CPU activation bytes", c->family ? c->family->name : "(none)");
    const int C = job->context_parallel > 1 ? job->context_parallel : 1;
    if (zt_context_check(&(zt_context_job){.context = C, .family = c->family, .config = c}) != 0) return -1;
    int32_t *index = NULL;
    const int64_t S = job->seq_len, Sl = zt_context_split(S, C, &index);
    free(index);
    if (Sl < 0) return -1;
    const int64_t B = job->micro_batch, act = c->family->cpu->act_bytes_for(c, B, S, C, Sl);
    if (act < 0) return zt_err("the %s family's CPU model takes no context split of %d", c->family->name, C);
    zt_model_layout lay;
    if (zt_model_layout_init(&lay, c) != 0) return -1;
    const double gs = job->shard_group;
    double shard, max_padded;
    padded_units(&lay, job->shard_group, &shard, &max_padded);
    out->params = 4.0 * shard;
    out->grads = 4.0 * shard;
    out->optimizer = 8.0 * shard;
    // engine/fsdp_cpu.c memory(): a shard group of one computes on the master shards (gradient slots only)
    const int np = job->keep_gathered && lay.nunits > ZT_FSDP_PARAM_SLOTS ? lay.nunits : ZT_FSDP_PARAM_SLOTS;
    out->buffers = job->shard_group == 1
                       ? 4.0 * ZT_FSDP_GRAD_SLOTS * max_padded
                       : 4.0 * (np * max_padded + ZT_FSDP_GRAD_SLOTS * (max_padded + max_padded / gs));
    out->activations = (double)act + 4.0 * (double)(B * Sl) * (double)c->hidden_size;
    out->act_no_recompute = out->activations;
    out->total = out->params + out->grads + out->optimizer + out->buffers + out->activations;
    zt_model_layout_free(&lay);
    return 0;
}

int zt_rank_memory_cuda(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *out) {
    memset(out, 0, sizeof *out);
    if (check_job(job) != 0) return -1;
    const int C = job->context_parallel > 1 ? job->context_parallel : 1;
    int32_t *index = NULL;
    const int64_t S = job->seq_len, Sl = zt_context_split(S, C, &index);
    free(index);
    if (Sl < 0) return -1;
    const zt_cuda_module *mod = zt_cuda_module_load();
    if (!mod) return -1;
    zt_model_layout lay;
    if (zt_model_layout_init(&lay, c) != 0) return -1;
    const double gs = job->shard_group;
    double shard, max_padded;
    padded_units(&lay, job->shard_group, &shard, &max_padded);
    zt_fsdp_memory dev = {0};
    const int attention = job->attention == ZT_ATTN_SCRATCH_TILED ? ZT_ATTN_TILED : ZT_ATTN_GEMM;
    if (mod->memory_for(c, job->micro_batch, job->grad_accum > 0 ? job->grad_accum : 1, S, Sl, C, job->recompute,
                        attention, (int64_t)(max_padded / gs), &dev) != 0) {
        zt_model_layout_free(&lay);
        return -1;
    }
    out->params = 6.0 * shard;  // fp32 master + bf16 all-gather source
    out->grads = 4.0 * shard;
    out->optimizer = 8.0 * shard;
    // engine/fsdp_cuda.c make_pools: bf16 parameter slots (keep-gathered: one per unit), fp32 gradient
    // slots and each one's fp32 receive buffer of a shard
    const int np = job->keep_gathered && lay.nunits > ZT_FSDP_PARAM_SLOTS ? lay.nunits : ZT_FSDP_PARAM_SLOTS;
    out->buffers = 2.0 * np * max_padded + 4.0 * ZT_FSDP_GRAD_SLOTS * (max_padded + max_padded / gs);
    out->activations = (double)dev.activations;
    out->act_no_recompute = out->act_recompute = out->activations;
    out->context = (double)dev.context;
    out->scratch = (double)dev.scratch;
    out->workspace = (double)dev.workspace;
    out->total = out->params + out->grads + out->optimizer + out->buffers + out->activations + out->context +
                 out->scratch + out->workspace;
    zt_model_layout_free(&lay);
    return 0;
}
