// lm_head fused with cross-entropy: logits exist for one chunk of rows at a
// time, so a 151,936-column vocabulary never needs N x V floats.
// defines: cpu_lmhead_xent
#include <math.h>
#include <stdlib.h>

#include "base/common.h"
#include "kernels/cpu/cpu_internal.h"

#define XENT_CHUNK_FLOATS (4 << 20)  // 16 MiB of logits per chunk

double cpu_lmhead_xent(float *dx, float *dw, const float *x, const float *w, const int32_t *targets, int64_t N,
                       int64_t d, int64_t V, float scale) {
    int64_t chunk = XENT_CHUNK_FLOATS / V;
    if (chunk < 1) chunk = 1;
    if (chunk > N) chunk = N;
    float *logits = zt_xmalloc((size_t)(chunk * V) * sizeof(float));
    double loss = 0;
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
        int64_t T = N - r0 < chunk ? N - r0 : chunk;
        const float *xc = x + r0 * d;
        cpu_sgemm(0, 1, T, V, d, 1.0f, xc, d, w, d, 0.0f, logits, V);
        double chunk_loss = 0;
#pragma omp parallel for schedule(static) reduction(+ : chunk_loss)
        for (int64_t i = 0; i < T; i++) {
            float *l = logits + i * V;
            int32_t tgt = targets[r0 + i];
            if (tgt < 0) {  // no target: contributes neither loss nor gradient
                if (dx || dw)
                    for (int64_t j = 0; j < V; j++) l[j] = 0.0f;
                continue;
            }
            float mx = -INFINITY;
            for (int64_t j = 0; j < V; j++) mx = l[j] > mx ? l[j] : mx;
            double sum = 0;
            for (int64_t j = 0; j < V; j++) sum += exp((double)(l[j] - mx));
            double lse = (double)mx + log(sum);
            chunk_loss += lse - (double)l[tgt];
            if (dx || dw) {
                for (int64_t j = 0; j < V; j++) l[j] = (float)exp((double)l[j] - lse) * scale;
                l[tgt] -= scale;
            }
        }
        loss += chunk_loss;
        if (dx)
            cpu_sgemm(0, 0, T, d, V, 1.0f, logits, V, w, d, 0.0f, dx + r0 * d, d);
        if (dw)
            cpu_sgemm(1, 0, V, d, T, 1.0f, logits, V, xc, d, 1.0f, dw, d);
    }
    free(logits);
    return loss;
}
