// One optimizer step for a single process: accumulate gradients over micro-batches
// (loss = sum of token losses / all targets of the step), clip by the global norm,
// AdamW with the scheduled learning rate.
#include "tests/support/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/batch.h"
#include "engine/fsdp.h"

int zt_trainer_init(zt_trainer *t, const zt_model_config *cfg, const zt_ops *ops, int micro_batch, int grad_accum,
                    int64_t seq_len, const zt_hparams *hp, uint64_t seed) {
    memset(t, 0, sizeof *t);
    if (zt_fsdp_check_batch(micro_batch, grad_accum) != 0) return -1;
    if (zt_qwen3_create(&t->model, cfg, ops, micro_batch, seq_len) != 0) return -1;
    t->ops = ops;
    t->hp = *hp;
    t->micro_batch = micro_batch;
    t->grad_accum = grad_accum;
    t->seq_len = seq_len;
    const zt_model_layout *lay = &t->model.lay;
    float ***bufs[4] = {&t->params, &t->grads, &t->m, &t->v};
    for (int b = 0; b < 4; b++) {
        *bufs[b] = zt_xcalloc((size_t)lay->nunits, sizeof(float *));
        for (int u = 0; u < lay->nunits; u++)
            (*bufs[b])[u] = zt_xcalloc((size_t)lay->units[u].numel, sizeof(float));
    }
    for (int u = 0; u < lay->nunits; u++) zt_model_init_unit(lay, u, t->params[u], seed);
    t->batch = zt_xmalloc((size_t)(micro_batch * seq_len) * sizeof(uint32_t));
    return 0;
}

void zt_trainer_step(zt_trainer *t, const uint32_t *const *blocks, zt_step_stats *out) {
    const zt_model_layout *lay = &t->model.lay;
    const int64_t S = t->seq_len, B = t->micro_batch;
    // the loss is the mean over the step's trained targets (every target of plain data;
    // masked and document-start targets of supervised data excluded), counted first
    // because every gradient carries 1 / count
    int64_t targets = 0;
    for (int mb = 0; mb < t->grad_accum; mb++)
        for (int64_t b = 0; b < B; b++)
            targets += zt_batch_count_targets(blocks[mb * B + b], S, t->model.isolated);
    const float scale = targets ? (float)(1.0 / (double)targets) : 0.0f;
    for (int u = 0; u < lay->nunits; u++) memset(t->grads[u], 0, (size_t)lay->units[u].numel * sizeof(float));

    double loss = 0;
    for (int mb = 0; mb < t->grad_accum; mb++) {
        for (int64_t b = 0; b < B; b++)
            memcpy(t->batch + b * S, blocks[mb * B + b], (size_t)S * sizeof(uint32_t));
        loss += zt_qwen3_fwd_bwd(&t->model, t->params, t->grads, t->batch, scale);
    }

    double ss = 0;
    for (int u = 0; u < lay->nunits; u++) ss += t->ops->sumsq(t->grads[u], lay->units[u].numel);
    const double norm = sqrt(ss);
    const double coef = zt_clip_coef(norm, t->hp.clip);
    if (coef < 1.0)
        for (int u = 0; u < lay->nunits; u++) t->ops->scale(t->grads[u], (float)coef, lay->units[u].numel);

    const double lr = zt_lr_at(&t->hp, t->step);
    t->step++;
    for (int u = 0; u < lay->nunits && targets > 0; u++)  // a step with no trained target updates nothing
        zt_adamw_range(t->ops, &lay->units[u], 0, lay->units[u].numel, t->params[u], t->grads[u], t->m[u], t->v[u],
                       lr, &t->hp, t->step);

    out->loss = targets ? loss / (double)targets : 0.0;
    out->grad_norm = norm;
    out->clip_coef = coef;
    out->lr = lr;
    out->tokens = (int64_t)t->grad_accum * B * S;
    out->targets = targets;
}

void zt_trainer_free(zt_trainer *t) {
    if (!t->params) return;
    const zt_model_layout *lay = &t->model.lay;
    float **bufs[4] = {t->params, t->grads, t->m, t->v};
    for (int b = 0; b < 4; b++) {
        for (int u = 0; u < lay->nunits; u++) free(bufs[b][u]);
        free(bufs[b]);
    }
    free(t->batch);
    zt_qwen3_destroy(&t->model);
    memset(t, 0, sizeof *t);
}
