// Single-process training state and one optimizer step (grad accumulation,
// global-norm clipping, AdamW). The FSDP engine reuses the same pieces on shards.
// defines: zt_trainer, zt_trainer_init, zt_trainer_step, zt_trainer_free
#ifndef ZT_TRAINER_H
#define ZT_TRAINER_H
#include <stdint.h>

#include "model/qwen3.h"
#include "engine/optim.h"

typedef struct {
    zt_qwen3 model;            // bound to the micro-batch shape (Qwen3 configs)
    // Any other family: its CPU passes on a bound model (fm), its layout, and whether packed
    // documents are isolated (what model.isolated says for Qwen3)
    const zt_family *fam;
    void *fm;
    zt_model_layout flay;
    int isolated;
    const zt_ops *ops;
    zt_hparams hp;
    int micro_batch, grad_accum;
    int64_t seq_len;
    float **params, **grads, **m, **v;  // full per-unit vectors
    int64_t step;              // optimizer steps completed
    uint32_t *batch;           // contiguous micro-batch tokens [micro_batch * seq_len]
} zt_trainer;

typedef struct {
    double loss;               // mean cross-entropy over the step's targets
    double grad_norm;          // global norm before clipping
    double clip_coef;
    double lr;
    int64_t tokens, targets;
} zt_step_stats;

// Parameters are initialised from `seed` (transformers-style); load HF weights
// afterwards with zt_hf_load(&t->model.lay, path, t->params) to override.
int zt_trainer_init(zt_trainer *t, const zt_model_config *cfg, const zt_ops *ops, int micro_batch, int grad_accum,
                    int64_t seq_len, const zt_hparams *hp, uint64_t seed);
// One optimizer step over micro_batch * grad_accum blocks of seq_len tokens.
void zt_trainer_step(zt_trainer *t, const uint32_t *const *blocks, zt_step_stats *out);
void zt_trainer_free(zt_trainer *t);
// The trainer's layout (either model's).
const zt_model_layout *zt_trainer_layout(const zt_trainer *t);
// Forward + backward of one micro-batch of B blocks of S raw words through a family's CPU passes
// on a bound model m (params and grads: full unit vectors; grads accumulate). Returns the summed
// loss; *ntargets the trained targets. logits: when non-NULL, the forward's logits [B*S, V] too
// (the family must offer them).
double zt_family_fwd_bwd(const zt_family *f, void *m, const zt_model_layout *lay, float *const *params,
                         float *const *grads, const uint32_t *words, int64_t B, int64_t S, int isolated, float scale,
                         int64_t *ntargets, float *logits);
#endif
