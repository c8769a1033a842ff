// The memory formula of one rank (engine/rank_memory.h): the layout's padded shards, the engine's
// buffer slots and a micro-batch's saved activations, in bytes. It lives beside the engine because
// the buffers it counts are the engine's (ZT_FSDP_ALIGN, ZT_FSDP_PARAM_SLOTS, ZT_FSDP_GRAD_SLOTS).
// defines: zt_rank_memory_predict
#include "engine/rank_memory.h"

#include <math.h>
#include <string.h>

#include "base/common.h"
#include "engine/fsdp.h"
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
    const int C = job->context_parallel;
    if (C < 0) return zt_err("context parallel %d must be >= 1 (or 0: none)", C);
    if (C > 1 && job->shard_group % C)
        return zt_err("--context-parallel %d does not divide the shard group of %d ranks (C consecutive ranks of a "
                      "shard group share each block)", C, job->shard_group);
    if (C > job->seq_len)
        return zt_err("--context-parallel %d is more ranks than the %lld tokens of a block (--seq-len): each rank "
                      "needs at least one", C, (long long)job->seq_len);
    if (job->attention < ZT_ATTN_SCRATCH_NONE || job->attention > ZT_ATTN_SCRATCH_TILED)
        return zt_err("attention scratch kind %d is not gemm (1) or tiled (2)", job->attention);
    return 0;
}

// Sharded state and the engine's full-unit buffers.
static void state_and_buffers(const zt_rank_memory_job *job, const zt_model_layout *lay, zt_rank_memory *mem) {
    const int gs = job->shard_group;
    double shard = 0, max_unit = 0;
    for (int u = 0; u < lay->nunits; u++) {
        double padded = pad_to((double)lay->units[u].numel, (double)gs * ZT_FSDP_ALIGN);
        shard += padded / gs;
        if (padded > max_unit) max_unit = padded;
    }
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

// Saved activations of one micro-batch, bf16 with flash attention (no S x S matrix):
// per token and layer x, ln1, x_mid, ln2 (4d); q before and after norm+RoPE and the
// attention output (3 H D); k before and after, v (3 Hkv D); gate, up, silu*up (3F);
// fp32 rstd of both norms and of q/k norms per head, and the softmax log-sum-exp.
// With context parallelism each rank holds S/C tokens of the block.
static void activations(const zt_model_config *c, const zt_rank_memory_job *job, zt_rank_memory *mem) {
    const double C = job->context_parallel > 1 ? job->context_parallel : 1;
    const double T = (double)job->micro_batch * (double)job->seq_len / C;
    const double d = (double)c->hidden_size, F = (double)c->intermediate_size, D = c->head_dim;
    const double H = c->num_heads, Hkv = c->num_kv_heads, V = (double)c->vocab_size, L = c->num_layers;
    const double layer = T * (2.0 * (4 * d + 3 * H * D + 3 * Hkv * D + 3 * F) + 4.0 * (2 + 2 * H + Hkv));
    // head: final-norm output (bf16) + fp32 logits of the micro-batch (gradient in place);
    // backward workspace: gradients of one layer's activations (dx, dh, dq, dk, dv, datt, dgate, dup, dact).
    const double head = T * (2.0 * d + 4.0 * V);
    const double work = T * 2.0 * (2 * d + 2 * H * D + 2 * Hkv * D + 3 * F);
    mem->act_no_recompute = L * layer + head + work;
    mem->act_recompute = L * T * d * 2.0 + layer + head + work;  // checkpointed layer inputs + one live layer
    mem->activations = job->recompute ? mem->act_recompute : mem->act_no_recompute;
}

// Context parallelism's K/V buffers and the attention's own scratch (docs/plan.md). The attention
// ops run one (batch row, KV-head group) at a time, so the scratch does not grow with the micro-batch.
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
    activations(c, job, out);
    attention_terms(c, job, out);
    out->total = out->params + out->grads + out->optimizer + out->buffers + out->activations;
    if (job->context_parallel > 0) out->total += out->cp_kv + out->attention;
    zt_model_layout_free(&lay);
    return 0;
}
