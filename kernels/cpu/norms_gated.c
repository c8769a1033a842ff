// The two norms of Gated DeltaNet: the L2 norm of q and k per head (transformers' l2norm,
// eps inside the root: x * rsqrt(sum x^2 + eps)) and the gated RMSNorm of the output
// (Qwen3_5RMSNormGated: w * rmsnorm(x) * silu(z), computed in fp32).
// defines: cpu_l2norm_fwd, cpu_l2norm_bwd, cpu_rmsnorm_gated_fwd, cpu_rmsnorm_gated_bwd
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_internal.h"
#include "base/common.h"

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

// The gate's sigmoid of one row (cpu_sigmoid: vectorised, the same bits on every CPU) into a
// buffer of the calling thread, kept between calls.
static _Thread_local float *tl_sig;
static _Thread_local int64_t tl_sig_n;
static const float *row_sigmoid(const float *z, int64_t d) {
    if (d > tl_sig_n) {
        free(tl_sig);
        tl_sig = zt_xmalloc((size_t)d * sizeof(float));
        tl_sig_n = d;
    }
    cpu_sigmoid(tl_sig, z, d);
    return tl_sig;
}

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
        cpu_sigmoid(yr, zr, d);
        for (int64_t j = 0; j < d; j++) yr[j] = w[j] * (xr[j] * rs) * (zr[j] * yr[j]);
    }
}

// With n = x rstd, s = silu(z), y = w n s:
//   dz = dy w n silu'(z), silu'(z) = sig(z) (1 + z (1 - sig(z)));  dw += sum_rows dy n s;
//   dn = dy w s;  dx = rstd (dn - n mean(dn n)).
void cpu_rmsnorm_gated_bwd(float *dx, float *dz, float *dw, const float *dy, const float *x, const float *z,
                           const float *w, const float *rstd, int64_t rows, int64_t d) {
    if (dw)
        for (int64_t r = 0; r < rows; r++) {  // serial: deterministic accumulation order
            const float *xr = x + r * d, *zr = z + r * d, *gr = dy + r * d, *sg = row_sigmoid(zr, d);
            for (int64_t j = 0; j < d; j++) dw[j] += gr[j] * (xr[j] * rstd[r]) * (zr[j] * sg[j]);
        }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d, *zr = z + r * d, *gr = dy + r * d, *sg = row_sigmoid(zr, d);
        const float rs = rstd[r];
        double dot = 0;
        for (int64_t j = 0; j < d; j++) {
            const float n = xr[j] * rs;
            dot += (double)(gr[j] * w[j] * (zr[j] * sg[j])) * n;
            if (dz) dz[r * d + j] = gr[j] * w[j] * n * (sg[j] * (1.0f + zr[j] * (1.0f - sg[j])));
        }
        const float mean = (float)(dot / (double)d);
        if (dx)
            for (int64_t j = 0; j < d; j++) dx[r * d + j] = rs * (gr[j] * w[j] * (zr[j] * sg[j]) - xr[j] * rs * mean);
    }
}
