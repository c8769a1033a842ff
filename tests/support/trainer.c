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
    if (cfg->family && cfg->family != &zt_qwen3_family) {
        t->fam = cfg->family;
        t->fm = t->fam->cpu->create(cfg, ops, micro_batch, seq_len, NULL);
        if (!t->fm || zt_model_layout_init(&t->flay, cfg) != 0) return -1;
    } else if (zt_qwen3_create(&t->model, cfg, ops, micro_batch, seq_len) != 0) {
        return -1;
    }
    t->ops = ops;
    t->hp = *hp;
    t->micro_batch = micro_batch;
    t->grad_accum = grad_accum;
    t->seq_len = seq_len;
    const zt_model_layout *lay = zt_trainer_layout(t);
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

const zt_model_layout *zt_trainer_layout(const zt_trainer *t) { return t->fm ? &t->flay : &t->model.lay; }

double zt_family_fwd_bwd(const zt_family *f, void *m, const zt_model_layout *lay, float *const *params,
                         float *const *grads, const uint32_t *words, int64_t B, int64_t S, int isolated, float scale,
                         int64_t *ntargets, float *logits) {
    const int L = lay->cfg.num_layers, tied = lay->cfg.tie_word_embeddings;
    const int64_t N = B * S;
    uint32_t *ids = zt_xmalloc((size_t)N * sizeof(uint32_t));
    int32_t *targets = zt_xmalloc((size_t)N * sizeof(int32_t)), *pos = zt_xmalloc((size_t)N * sizeof(int32_t));
    const int64_t nt = zt_batch_words(words, B, S, isolated, ids, targets, pos);
    if (ntargets) *ntargets = nt;
    f->cpu->set_batch(m, ids, targets, isolated ? pos : NULL);
    f->cpu->embed_fwd(m, params[0]);
    for (int l = 0; l < L; l++) f->cpu->layer_fwd(m, l, params[1 + l]);
    if (logits) f->cpu->logits(m, params[L + 1], tied ? params[0] : NULL, logits);
    float *dx = zt_xmalloc((size_t)(N * lay->cfg.hidden_size) * sizeof(float));
    const double loss = f->cpu->head(m, params[L + 1], tied ? params[0] : NULL, scale, dx, grads[L + 1],
                                     tied ? grads[0] : NULL);
    for (int l = L - 1; l >= 0; l--) f->cpu->layer_bwd(m, l, params[1 + l], grads[1 + l], dx);
    f->cpu->embed_bwd(m, dx, grads[0]);
    free(dx), free(ids), free(targets), free(pos);
    return loss;
}

void zt_trainer_step(zt_trainer *t, const uint32_t *const *blocks, zt_step_stats *out) {
    const zt_model_layout *lay = zt_trainer_layout(t);
    const int isolated = t->fm ? t->isolated : t->model.isolated;
    const int64_t S = t->seq_len, B = t->micro_batch;
    // the loss is the mean over the step's trained targets (every target of plain data;
    // masked and document-start targets of supervised data excluded), counted first
    // because every gradient carries 1 / count
    int64_t targets = 0;
    for (int mb = 0; mb < t->grad_accum; mb++)
        for (int64_t b = 0; b < B; b++)
            targets += zt_batch_count_targets(blocks[mb * B + b], S, isolated);
    const float scale = targets ? (float)(1.0 / (double)targets) : 0.0f;
    for (int u = 0; u < lay->nunits; u++) memset(t->grads[u], 0, (size_t)lay->units[u].numel * sizeof(float));

    double loss = 0;
    for (int mb = 0; mb < t->grad_accum; mb++) {
        for (int64_t b = 0; b < B; b++)
            memcpy(t->batch + b * S, blocks[mb * B + b], (size_t)S * sizeof(uint32_t));
        if (t->fm)
            loss += zt_family_fwd_bwd(t->fam, t->fm, lay, t->params, t->grads, t->batch, B, S, isolated, scale, NULL,
                                      NULL);
        else
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
    const zt_model_layout *lay = zt_trainer_layout(t);
    float **bufs[4] = {t->params, t->grads, t->m, t->v};
    for (int b = 0; b < 4; b++) {
        for (int u = 0; u < lay->nunits; u++) free(bufs[b][u]);
        free(bufs[b]);
    }
    free(t->batch);
    if (t->fm) {
        t->fam->cpu->destroy(t->fm);
        zt_model_layout_free(&t->flay);
    } else {
        zt_qwen3_destroy(&t->model);
    }
    memset(t, 0, sizeof *t);
}
