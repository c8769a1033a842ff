// Token embedding lookup and its gradient (a deterministic scatter-add in token order).
// defines: cpu_embedding_fwd, cpu_embedding_bwd
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

void cpu_embedding_fwd(float *x, const float *w, const uint32_t *tokens, int64_t N, int64_t d) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) memcpy(x + i * d, w + (int64_t)tokens[i] * d, (size_t)d * sizeof(float));
}

void cpu_embedding_bwd(float *dw, const float *dx, const uint32_t *tokens, int64_t N, int64_t d) {
    // Serial over tokens so repeated tokens always sum in the same order.
    for (int64_t i = 0; i < N; i++) {
        float *row = dw + (int64_t)tokens[i] * d;
        const float *g = dx + i * d;
        for (int64_t j = 0; j < d; j++) row[j] += g[j];
    }
}
