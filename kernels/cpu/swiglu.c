// SwiGLU gate of the Qwen3 MLP: h = silu(g) * u.
// defines: cpu_swiglu_fwd, cpu_swiglu_bwd
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void cpu_swiglu_fwd(float *h, const float *g, const float *u, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + expf(-g[i]));
        h[i] = g[i] * s * u[i];
    }
}

// silu'(z) = s (1 + z (1 - s)), s = sigmoid(z)
void cpu_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + expf(-g[i]));
        float silu = g[i] * s;
        dg[i] = dh[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        du[i] = dh[i] * silu;
    }
}
