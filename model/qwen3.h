// The Qwen3 dense model: parameter layout per FSDP unit and the forward/backward
// of each unit, written so that an FSDP engine can gather one unit, run it, and
// release it. Unit 0 = embedding; units 1..L = decoder layers; unit L+1 = final
// norm (+ lm_head when untied; tied models read unit 0's matrix as lm_head).
// defines: zt_qwen3, zt_layer_acts, zt_qwen3_* unit functions (the layout: model/layout.h)
#ifndef ZT_QWEN3_H
#define ZT_QWEN3_H
#include <stdint.h>

#include "kernels/ops.h"
#include "model/blocks.h"
#include "model/config.h"
#include "model/context.h"
#include "model/family.h"
#include "model/layout.h"

// Saved activations of one decoder layer for a micro-batch of N = B*S tokens: the attention block's,
// its output x_mid (the MLP's input) and the MLP block's (model/blocks.h).
typedef zt_attn_layer_acts zt_layer_acts;

// The model bound to a micro-batch shape: ops table, RoPE tables, activations.
typedef struct {
    zt_model_layout lay;
    const zt_ops *ops;
    int64_t B, S, N;
    float *rope_cos, *rope_sin;  // [S, D/2]
    float **x;                   // L+1 residual-stream buffers [N, d]: x[l] is layer l's input
    zt_layer_acts *acts;         // one per layer
    float *head_xf, *head_rstd;  // final-norm output and its rstd
    // backward workspaces (activation gradients are assigned, never accumulated): the layer's
    // (model/blocks.h); work.at.dln is work.mlp.dln, and the head's d(final norm output)
    zt_attn_layer_work work;
    int32_t *targets;            // [N]
    uint32_t *ids;               // [N] bare token ids of the micro-batch (flag bits cleared)
    int32_t *pos;                // [N] positions inside each packed document (used when isolated)
    int isolated;                // 1: packed documents attend only to themselves, RoPE restarts per document
    int64_t ntargets;            // targets of the last zt_batch_words / zt_qwen3_fwd_bwd
    int64_t act_bytes;           // bytes of activations and workspaces held for one micro-batch
    // Context parallelism (model/qwen3_context.c; cp = 0: whole rows): this rank holds S = S_local
    // tokens of each block of S_block; cx is the split and the engine's exchange (index copied).
    int cp;
    int64_t S_block;
    zt_family_context cx;
    zt_context_kv cp_kv;         // the K/V exchange (model/context.h; its copy of cx.index)
    // Called between the ops of a layer pass when set (an FSDP engine drives its pending
    // collectives there: MPI moves a transfer only inside its calls). Never changes a value.
    void (*progress)(void *ctx);
    void *progress_ctx;
} zt_qwen3;

int zt_qwen3_create(zt_qwen3 *m, const zt_model_config *cfg, const zt_ops *ops, int64_t B, int64_t S);
// The same under context parallelism (cx non-NULL: B rows of cx->S_local tokens of blocks of S = cx->S).
int zt_qwen3_create_cx(zt_qwen3 *m, const zt_model_config *cfg, const zt_ops *ops, int64_t B, int64_t S,
                       const zt_family_context *cx);
// model/qwen3_context.c: the K/V exchange of attention across the split (model/context.h; the
// attention block, model/blocks.c, runs it: K/V all-gathered over the context group after RoPE, dK/dV
// of keys held elsewhere reduce-scattered back).
void zt_qwen3_cx_alloc(zt_qwen3 *m, float *(*alloc)(void *m, int64_t n));
void zt_qwen3_cx_free(zt_qwen3 *m);
void zt_qwen3_destroy(zt_qwen3 *m);

// ---- per-unit passes (params point at the unit's full flat vector) ----
void zt_qwen3_embed_fwd(zt_qwen3 *m, const float *emb_params, const uint32_t *tokens);  // -> m->x[0]
void zt_qwen3_layer_fwd(zt_qwen3 *m, int layer, const float *params);                   // m->x[l] -> m->x[l+1]
// Final norm + lm_head + cross-entropy on m->x[L]. lm_w is the lm_head matrix
// (inside head_params when untied, the embedding when tied). Returns the summed
// loss; with grads: dx (written to `dx`), d(head params) += and d(lm_w) +=,
// all scaled by `scale` (1 / targets in the step).
double zt_qwen3_head_fwd_bwd(zt_qwen3 *m, const float *head_params, const float *lm_w, const int32_t *targets,
                             float scale, float *dx, float *dhead, float *dlm_w);
// dx holds d(loss)/d(x[l+1]) on entry and d(loss)/d(x[l]) on return (in place).
void zt_qwen3_layer_bwd(zt_qwen3 *m, int layer, const float *params, float *dparams, float *dx);
void zt_qwen3_embed_bwd(zt_qwen3 *m, const uint32_t *tokens, const float *dx, float *demb);

// Targets for a micro-batch: position t predicts token t+1; a block's last position has none.
void zt_qwen3_targets(const uint32_t *tokens, int64_t B, int64_t S, int32_t *targets);
// Whole-model helpers for a single process holding every unit's full vector.
// Forward + backward of one micro-batch of raw block words (data/batch.h decodes them;
// m->isolated applies);
// grads accumulate. Returns summed loss over the targets (m->ntargets of them).
double zt_qwen3_fwd_bwd(zt_qwen3 *m, float *const *params, float *const *grads, const uint32_t *tokens, float scale);
// Forward only, writing full logits [N, V] (for tests and evaluation on small vocabularies).
void zt_qwen3_logits(zt_qwen3 *m, float *const *params, const uint32_t *tokens, float *logits);
// Pointer to the lm_head matrix among full unit vectors.
const float *zt_qwen3_lm_head(const zt_model_layout *lay, float *const *params);

// The Qwen3 family's table (model/family.h): the layout, init, counts and the CPU passes above.
extern const zt_family zt_qwen3_family;
// The planner's counts of a Qwen3 decoder layer (model/flops.c; model/family.h zt_layer_plan): one
// kind, "attention".
int zt_qwen3_layer_kind(const zt_model_config *c, int layer);
void zt_qwen3_layer_plan(const zt_model_config *c, int kind, int64_t S, zt_layer_plan *out);
// Qwen3-32B's config.json fields (QWEN3.md), built in so that `plan` needs no file (zt_model_preset).
void zt_qwen3_32b_config(zt_model_config *c);
#endif
