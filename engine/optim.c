// AdamW on flat ranges, gradient clipping and the LR schedule.
#include "engine/optim.h"

#include <math.h>
#include <stdlib.h>

#include "base/common.h"

int zt_unit_spans(const zt_unit_layout *u, int64_t lo, int64_t n, zt_tensor_span *out) {
    const int64_t hi = lo + n;
    int c = 0;
    for (int i = 0; i < u->ntensors; i++) {
        const zt_tensor_desc *d = &u->t[i];
        int64_t a = d->offset > lo ? d->offset : lo;
        int64_t b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
        if (a < b) out[c++] = (zt_tensor_span){a - lo, b - a, d->decay};
    }
    return c;
}

void zt_adamw_range(const zt_ops *ops, const zt_unit_layout *u, int64_t lo, int64_t n, float *p, const float *g,
                    float *m, float *v, double lr, const zt_hparams *hp, int64_t t) {
    zt_tensor_span *sp = zt_xmalloc((size_t)(u->ntensors > 0 ? u->ntensors : 1) * sizeof *sp);
    const int ns = zt_unit_spans(u, lo, n, sp);
    for (int i = 0; i < ns; i++) {
        const int64_t k = sp[i].k;
        ops->adamw(p + k, g + k, m + k, v + k, sp[i].len, (float)lr, (float)hp->beta1, (float)hp->beta2,
                   (float)hp->eps, sp[i].decay ? (float)hp->weight_decay : 0.0f, t);
    }
    free(sp);
}

double zt_clip_coef(double total_norm, double clip) {
    if (clip <= 0) return 1.0;
    double c = clip / (total_norm + 1e-6);
    return c < 1.0 ? c : 1.0;
}

double zt_lr_at(const zt_hparams *hp, int64_t step) {
    if (hp->warmup > 0 && step < hp->warmup) return hp->lr * (double)(step + 1) / (double)hp->warmup;
    if (hp->schedule == ZT_SCHED_CONSTANT) return hp->lr;
    int64_t span = hp->total_steps - 1 - hp->warmup;
    if (span <= 0) return hp->lr;
    double progress = (double)(step - hp->warmup) / (double)span;
    if (progress > 1) progress = 1;
    double cosine = 0.5 * (1.0 + cos(M_PI * progress));
    return hp->lr * (hp->min_lr_ratio + (1.0 - hp->min_lr_ratio) * cosine);
}
