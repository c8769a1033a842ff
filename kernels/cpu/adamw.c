// AdamW with torch.optim.AdamW's exact order of operations, plus the helpers
// for global-norm clipping.
// defines: cpu_adamw, cpu_sumsq, cpu_scale, cpu_add
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void cpu_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1, float beta2, float eps,
               float weight_decay, int64_t t) {
    // torch computes these scalars in double (Python floats) before the fp32 tensor ops.
    const double bc1 = 1.0 - pow((double)beta1, (double)t);
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, (double)t));
    const float step_size = (float)((double)lr / bc1);
    const float decay = (float)(1.0 - (double)lr * (double)weight_decay);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i] * decay;
        float mi = m[i] + (1.0f - beta1) * (g[i] - m[i]);  // torch: exp_avg.lerp_(grad, 1 - beta1)
        float vi = v[i] * beta2 + (1.0f - beta2) * g[i] * g[i];
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = pi - step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
}

double cpu_sumsq(const float *x, int64_t n) {
    double s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

void cpu_scale(float *x, float s, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

void cpu_add(float *y, const float *a, const float *b, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}
