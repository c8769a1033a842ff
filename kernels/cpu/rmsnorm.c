// RMSNorm as Qwen3 uses it (weight multiplies, no 1 + w), also applied per head
// over head_dim for q_norm/k_norm (rows = tokens * heads, d = head_dim).
// defines: cpu_rmsnorm_fwd, cpu_rmsnorm_bwd
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void cpu_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t d, float eps) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        double ss = 0;
        for (int64_t j = 0; j < d; j++) ss += (double)xr[j] * xr[j];
        float rs = 1.0f / sqrtf((float)(ss / (double)d) + eps);
        rstd[r] = rs;
        float *yr = y + r * d;
        for (int64_t j = 0; j < d; j++) yr[j] = w[j] * (xr[j] * rs);
    }
}

// With xhat = x * rstd and y = w * xhat:
//   dw += sum_rows dy * xhat;  dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), dxhat = dy * w.
void cpu_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                     int64_t rows, int64_t d) {
    if (dw)
        for (int64_t r = 0; r < rows; r++) {  // serial: deterministic accumulation order
            const float *xr = x + r * d, *gr = dy + r * d;
            for (int64_t j = 0; j < d; j++) dw[j] += gr[j] * (xr[j] * rstd[r]);
        }
    if (dx) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * d, *gr = dy + r * d;
            float rs = rstd[r];
            double dot = 0;
            for (int64_t j = 0; j < d; j++) dot += (double)gr[j] * w[j] * (xr[j] * rs);
            float mean = (float)(dot / (double)d);
            float *dxr = dx + r * d;
            for (int64_t j = 0; j < d; j++) dxr[j] = rs * (gr[j] * w[j] - xr[j] * rs * mean);
        }
    }
}
