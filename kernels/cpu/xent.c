// lm_head fused with cross-entropy: logits exist for one chunk of rows at a
// time, so a 151,936-column vocabulary never needs N x V floats.
// defines: cpu_lmhead_xent
#include <cblas.h>
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)V, (int)d, 1.0f, xc, (int)d, w, (int)d,
                    0.0f, logits, (int)V);
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)d, (int)V, 1.0f, logits, (int)V, w,
                        (int)d, 0.0f, dx + r0 * d, (int)d);
        if (dw)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)V, (int)d, (int)T, 1.0f, logits, (int)V, xc,
                        (int)d, 1.0f, dw, (int)d);
    }
    free(logits);
    return loss;
}
