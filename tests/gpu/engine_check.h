// Checks shared by the GPU engine tests (test_fsdp_cuda.c, test_fsdp_cuda_cp.c,
// test_fsdp_cuda_qwen3_5.c): how far the engine's parameters are from the reference trainer's,
// and the summed cross-entropy of a reference forward's logits.
// defines: zt_engine_param_rel, zt_logits_loss_sum
#ifndef ZT_GPU_ENGINE_CHECK_H
#define ZT_GPU_ENGINE_CHECK_H
#include <math.h>
#include <stdint.h>

#include "base/common.h"
#include "engine/fsdp_internal.h"
#include "tests/support/trainer.h"

// |gpu - cpu| / |cpu - init| over all parameters (every rank's slice): how far the GPU engine's
// parameters are from the reference's, relative to how far training moved them. sum: adds n
// doubles over the ranks in place (identity at world 1).
static inline double zt_engine_param_rel(zt_fsdp *f, const zt_trainer *ref, float *const *init,
                                         void (*sum)(double *x, int n)) {
    if (zt_fsdp_to_host(f) != 0) zt_die_on_err();
    double acc[2] = {0, 0};  // |gpu - cpu|^2, |cpu - init|^2 over this rank's slice
    for (int u = 0; u < f->nunits; u++)
        for (int64_t j = 0; j < f->units[u].valid; j++) {
            const int64_t k = f->units[u].lo + j;
            const double g = f->units[u].master[j], c = ref->params[u][k], i0 = init[u][k];
            acc[0] += (g - c) * (g - c);
            acc[1] += (c - i0) * (c - i0);
        }
    sum(acc, 2);
    return sqrt(acc[0]) / sqrt(acc[1]);
}

// Sum over the tokens with a target (>= 0) of -log softmax(logits[t])[target[t]], in double.
static inline double zt_logits_loss_sum(const float *logits, const int32_t *targets, int64_t N, int64_t V) {
    double loss = 0;
    for (int64_t t = 0; t < N; t++) {
        const int32_t tg = targets[t];
        if (tg < 0) continue;
        const float *l = logits + t * V;
        double mx = l[0], sum = 0;
        for (int64_t j = 1; j < V; j++) mx = l[j] > mx ? l[j] : mx;
        for (int64_t j = 0; j < V; j++) sum += exp(l[j] - mx);
        loss += mx + log(sum) - l[tg];
    }
    return loss;
}
#endif
