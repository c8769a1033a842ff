// Optimizer pieces shared by the single-process trainer and the FSDP engine:
// AdamW over any contiguous range of a unit's flat vector (so it works on a
// shard), global-norm clipping, and the learning-rate schedule.
// defines: zt_hparams, zt_tensor_span, zt_unit_spans, zt_adamw_range, zt_clip_coef, zt_lr_at
#ifndef ZT_OPTIM_H
#define ZT_OPTIM_H
#include <stdint.h>

#include "kernels/ops.h"
#include "model/layout.h"

typedef enum { ZT_SCHED_COSINE = 0, ZT_SCHED_CONSTANT = 1 } zt_schedule;

typedef struct {
    double lr, min_lr_ratio;   // cosine decays from lr to lr * min_lr_ratio
    int64_t warmup, total_steps;
    zt_schedule schedule;
    double beta1, beta2, eps, weight_decay;
    double clip;               // max global grad norm; <= 0 disables clipping
} zt_hparams;

// The pieces of elements [lo, lo + n) of unit `u`'s flat vector that fall in each of
// its tensors, in order: k = offset from lo, len, and whether weight decay applies
// (matrices and embeddings, never norm weights). Shard padding past the unit's end
// belongs to no tensor and is left out. out has room for u->ntensors spans (a unit may hold any
// number of tensors); returns the count (<= u->ntensors).
typedef struct { int64_t k, len; int decay; } zt_tensor_span;
int zt_unit_spans(const zt_unit_layout *u, int64_t lo, int64_t n, zt_tensor_span *out);

// AdamW on elements [lo, lo + n) of unit `u`'s flat vector; p/g/m/v point at
// element lo. Weight decay applies only to the tensors marked decay (matrices,
// embeddings), never to norm weights; elements past the unit's end (shard
// padding) are left alone.
void zt_adamw_range(const zt_ops *ops, const zt_unit_layout *u, int64_t lo, int64_t n, float *p, const float *g,
                    float *m, float *v, double lr, const zt_hparams *hp, int64_t t);

// torch.nn.utils.clip_grad_norm_: coef = clip / (norm + 1e-6), clamped to 1.
double zt_clip_coef(double total_norm, double clip);

// Learning rate for optimizer step `step` (0-based): linear warmup over
// `warmup` steps reaching lr at step warmup-1, then constant or cosine to
// lr * min_lr_ratio at total_steps-1.
double zt_lr_at(const zt_hparams *hp, int64_t step);
#endif
