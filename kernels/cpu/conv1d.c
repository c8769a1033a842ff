// Causal depthwise conv1d + SiLU (Gated DeltaNet's short convolution over the q, k, v
// projections; transformers' causal_conv1d_fn with padding K - 1 and no bias), token-major
// so that every inner loop runs over the channels; a tap before its token's document
// start reads zero, so packed documents stay apart.
// defines: cpu_conv1d_silu_fwd, cpu_conv1d_silu_bwd
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "base/common.h"

// Channels per task of the dw reduction: each task sums its channels over every token in
// order, so dw does not depend on the thread count. Wide enough that each token's slice of a
// row is a long contiguous read (blocks of 64 read 256 bytes every 10 KiB at C = 2,560: a cache
// miss per row that no prefetcher follows across pages; 0.13 s of a 2,048-token layer's
// backward, 10x this).
#define ZT_CONV_CBLK 1024

// The first token that token t of block b may read: its document's first token.
static inline int64_t doc_first(const int32_t *pos, int64_t b, int64_t S, int64_t t) {
    return pos ? t - pos[b * S + t] : 0;
}

// wt[j, c] = w[c, j]: tap j of every channel contiguous.
static float *taps_major(const float *w, int64_t C, int64_t K) {
    float *wt = zt_xmalloc((size_t)(C * K) * sizeof(float));
    for (int64_t c = 0; c < C; c++)
        for (int64_t j = 0; j < K; j++) wt[j * C + c] = w[c * K + j];
    return wt;
}

void cpu_conv1d_silu_fwd(float *y, float *pre, const float *x, const float *w, const int32_t *pos, int64_t B,
                         int64_t S, int64_t C, int64_t K) {
    float *wt = taps_major(w, C, K);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < S; t++) {
            const int64_t lo = doc_first(pos, b, S, t), row = b * S + t;
            float *p = pre + row * C;
            memset(p, 0, (size_t)C * sizeof(float));
            for (int64_t j = 0; j < K; j++) {  // tap j reads token t - (K - 1) + j
                const int64_t s = t - (K - 1) + j;
                if (s < lo) continue;
                const float *xs = x + (b * S + s) * C, *wj = wt + j * C;
                for (int64_t c = 0; c < C; c++) p[c] += wj[c] * xs[c];
            }
            float *yr = y + row * C;
            cpu_sigmoid(yr, p, C);
            for (int64_t c = 0; c < C; c++) yr[c] = p[c] * yr[c];
        }
    free(wt);
}

// dpre = dy silu'(pre), silu'(p) = s (1 + p (1 - s)) with s = sigmoid(p);
// dx[s] = sum over the tokens t in [s, s + K - 1] of s's document: w[:, s - t + K - 1] dpre[t];
// dw[c, j] += sum_t dpre[t, c] x[t - (K - 1) + j, c] over the taps that read a token.
void cpu_conv1d_silu_bwd(float *dx, float *dw, const float *dy, const float *pre, const float *x, const float *w,
                         const int32_t *pos, int64_t B, int64_t S, int64_t C, int64_t K) {
    const int64_t N = B * S;
    float *dpre = zt_xmalloc((size_t)(N * C) * sizeof(float));
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; r++) {
        const float *pr = pre + r * C, *gr = dy + r * C;
        float *dr = dpre + r * C;
        cpu_sigmoid(dr, pr, C);
        for (int64_t c = 0; c < C; c++) {
            const float s = dr[c];
            dr[c] = gr[c] * (s * (1.0f + pr[c] * (1.0f - s)));
        }
    }
    if (dx) {
        float *wt = taps_major(w, C, K);
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++) {
                float *dxr = dx + (b * S + s) * C;
                memset(dxr, 0, (size_t)C * sizeof(float));
                for (int64_t t = s; t < S && t < s + K; t++) {
                    if (doc_first(pos, b, S, t) > s) break;  // t (and every later token) is in a later document
                    const float *dp = dpre + (b * S + t) * C, *wj = wt + (s - t + K - 1) * C;
                    for (int64_t c = 0; c < C; c++) dxr[c] += wj[c] * dp[c];
                }
            }
        free(wt);
    }
    if (dw) {
        const int64_t nblk = (C + ZT_CONV_CBLK - 1) / ZT_CONV_CBLK;
#pragma omp parallel
        {
            double *acc = zt_xmalloc((size_t)(K * ZT_CONV_CBLK) * sizeof(double));
#pragma omp for schedule(static)
            for (int64_t blk = 0; blk < nblk; blk++) {
                const int64_t c0 = blk * ZT_CONV_CBLK, nc = c0 + ZT_CONV_CBLK < C ? ZT_CONV_CBLK : C - c0;
                memset(acc, 0, (size_t)(K * ZT_CONV_CBLK) * sizeof(double));
                for (int64_t b = 0; b < B; b++)
                    for (int64_t t = 0; t < S; t++) {
                        const int64_t lo = doc_first(pos, b, S, t);
                        const float *dp = dpre + (b * S + t) * C + c0;
                        for (int64_t j = 0; j < K; j++) {
                            const int64_t s = t - (K - 1) + j;
                            if (s < lo) continue;
                            const float *xs = x + (b * S + s) * C + c0;
                            double *aj = acc + j * ZT_CONV_CBLK;
                            for (int64_t c = 0; c < nc; c++) aj[c] += (double)dp[c] * xs[c];
                        }
                    }
                for (int64_t c = 0; c < nc; c++)
                    for (int64_t j = 0; j < K; j++) dw[(c0 + c) * K + j] += (float)acc[j * ZT_CONV_CBLK + c];
            }
            free(acc);
        }
    }
    free(dpre);
}
