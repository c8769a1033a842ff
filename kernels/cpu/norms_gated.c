// The two norms of Gated DeltaNet: the L2 norm of q and k per head (transformers' l2norm,
// eps inside the root: x * rsqrt(sum x^2 + eps)) and the gated RMSNorm of the output
// (Qwen3_5RMSNormGated: w * rmsnorm(x) * silu(z), computed in fp32).
// defines: cpu_l2norm_fwd, cpu_l2norm_bwd, cpu_rmsnorm_gated_fwd, cpu_rmsnorm_gated_bwd
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void cpu_l2norm_fwd(float *y, float *rinv, const float *x, int64_t rows, int64_t d, float eps) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        double ss = 0;
        for (int64_t j = 0; j < d; j++) ss += (double)xr[j] * xr[j];
        const float ri = 1.0f / sqrtf((float)ss + eps);
        rinv[r] = ri;
        float *yr = y + r * d;
        for (int64_t j = 0; j < d; j++) yr[j] = xr[j] * ri;
    }
}

// With y = x r, r = (sum x^2 + eps)^-1/2: dx = r (dy - y (y . dy)).
void cpu_l2norm_bwd(float *dx, const float *dy, const float *x, const float *rinv, int64_t rows, int64_t d) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d, *gr = dy + r * d;
        const float ri = rinv[r];
        double dot = 0;
        for (int64_t j = 0; j < d; j++) dot += (double)(xr[j] * ri) * gr[j];
        const float yd = (float)dot;
        float *dxr = dx + r * d;
        for (int64_t j = 0; j < d; j++) dxr[j] = ri * (gr[j] - (xr[j] * ri) * yd);
    }
}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void cpu_rmsnorm_gated_fwd(float *y, float *rstd, const float *x, const float *z, const float *w, int64_t rows,
                           int64_t d, float eps) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d, *zr = z + r * d;
        double ss = 0;
        for (int64_t j = 0; j < d; j++) ss += (double)xr[j] * xr[j];
        const float rs = 1.0f / sqrtf((float)(ss / (double)d) + eps);
        rstd[r] = rs;
        float *yr = y + r * d;
        for (int64_t j = 0; j < d; j++) yr[j] = w[j] * (xr[j] * rs) * (zr[j] * sigmoidf(zr[j]));
    }
}

// With n = x rstd, s = silu(z), y = w n s:
//   dz = dy w n silu'(z), silu'(z) = sig(z) (1 + z (1 - sig(z)));  dw += sum_rows dy n s;
//   dn = dy w s;  dx = rstd (dn - n mean(dn n)).
void cpu_rmsnorm_gated_bwd(float *dx, float *dz, float *dw, const float *dy, const float *x, const float *z,
                           const float *w, const float *rstd, int64_t rows, int64_t d) {
    if (dw)
        for (int64_t r = 0; r < rows; r++) {  // serial: deterministic accumulation order
            const float *xr = x + r * d, *zr = z + r * d, *gr = dy + r * d;
            for (int64_t j = 0; j < d; j++) dw[j] += gr[j] * (xr[j] * rstd[r]) * (zr[j] * sigmoidf(zr[j]));
        }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d, *zr = z + r * d, *gr = dy + r * d;
        const float rs = rstd[r];
        double dot = 0;
        for (int64_t j = 0; j < d; j++) {
            const float sg = sigmoidf(zr[j]), n = xr[j] * rs;
            dot += (double)(gr[j] * w[j] * (zr[j] * sg)) * n;
            if (dz) dz[r * d + j] = gr[j] * w[j] * n * (sg * (1.0f + zr[j] * (1.0f - sg)));
        }
        const float mean = (float)(dot / (double)d);
        if (dx)
            for (int64_t j = 0; j < d; j++) {
                const float sg = sigmoidf(zr[j]);
                dx[r * d + j] = rs * (gr[j] * w[j] * (zr[j] * sg) - xr[j] * rs * mean);
            }
    }
}
