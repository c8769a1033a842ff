// Single-process training state and one optimizer step (grad accumulation,
// global-norm clipping, AdamW). The FSDP engine reuses the same pieces on shards.
// defines: zt_trainer, zt_trainer_init, zt_trainer_step, zt_trainer_free
#ifndef ZT_TRAINER_H
#define ZT_TRAINER_H
#include <stdint.h>

#include "model/qwen3.h"
#include "engine/optim.h"

typedef struct {
    zt_qwen3 model;            // bound to the micro-batch shape
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
#endif
