// Causal grouped-query attention, the reference (optionally document-causal: with
// pos[], a query sees only its own document's earlier tokens), in panels of query rows:
// a panel's scores cover only the keys some row of it may see (from the panel's first
// visible key to its last row), so the masked upper triangle is computed only inside a
// panel's diagonal block, and no [B,H,S,S] probability tensor exists. Per row the softmax
// is the exact one (the row's max, a double sum, 1/sum); max and 1/sum are saved, and
// backward recomputes each panel's probabilities from q and k with the same products.
// Every product is a cpu_sgemm on a panel (its values do not depend on the panel's shape);
// query head h reads KV head h / (H / Hkv) in place, never copied.
// defines: cpu_attention_fwd, cpu_attention_bwd
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "base/common.h"

// Query rows per panel: wide enough for sgemm to run at speed, narrow enough that the
// panel's scores (ZT_ATT_PANEL x S floats per thread) stay near the cache (64 and 128 ran
// at the same speed at S = 256 and 1024). Inside the OpenMP loop below each thread runs
// its own products (cpu_sgemm does not start threads inside a parallel region).
#define ZT_ATT_PANEL 128

// The first key query i of block b may see: 0, or its document's first token.
static inline int64_t first_key(const int32_t *pos, int64_t b, int64_t S, int64_t i) {
    return pos ? i - pos[b * S + i] : 0;
}

// The first key any query of rows [i0, i1) may see.
static int64_t panel_first_key(const int32_t *pos, int64_t b, int64_t S, int64_t i0, int64_t i1) {
    int64_t lo = i0;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t f = first_key(pos, b, S, i);
        lo = f < lo ? f : lo;
    }
    return lo;
}

// sc[m, n] = Q[i0:i1] K[klo:i1]^T / sqrt(D): the panel's scores, row r is query i0 + r,
// column c is key klo + c. The same call in forward and backward gives the same values.
static void panel_scores(float *sc, const float *Q, const float *K, int64_t qs, int64_t kvs, int64_t i0, int64_t m,
                         int64_t klo, int64_t n, int64_t D, float scale) {
    cpu_sgemm(0, 1, m, n, D, scale, Q + i0 * qs, qs, K + klo * kvs, kvs, 0.0f, sc, n);
}

// stats[B, H, S, 2]: per query row its softmax max and 1/sum.
void cpu_attention_fwd(float *o, float *stats, const float *q, const float *k, const float *v, const int32_t *pos,
                       int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const int64_t group = H / Hkv, qs = H * D, kvs = Hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel
    {
        float *P = zt_xmalloc((size_t)(ZT_ATT_PANEL * S) * sizeof(float));
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t kh = h / group;
                const float *Q = q + b * S * qs + h * D, *K = k + b * S * kvs + kh * D, *V = v + b * S * kvs + kh * D;
                float *st = stats + (b * H + h) * S * 2;
                for (int64_t i0 = 0; i0 < S; i0 += ZT_ATT_PANEL) {
                    const int64_t i1 = i0 + ZT_ATT_PANEL < S ? i0 + ZT_ATT_PANEL : S, m = i1 - i0;
                    const int64_t klo = panel_first_key(pos, b, S, i0, i1), n = i1 - klo;
                    panel_scores(P, Q, K, qs, kvs, i0, m, klo, n, D, scale);
                    for (int64_t i = i0; i < i1; i++) {  // key j visible from query i iff lo <= j <= i
                        const int64_t lo = first_key(pos, b, S, i);
                        float *p = P + (i - i0) * n - klo, mx = -INFINITY;  // p[j]: key j
                        for (int64_t j = lo; j <= i; j++) mx = p[j] > mx ? p[j] : mx;
                        double sum = 0;
                        for (int64_t j = lo; j <= i; j++) {
                            p[j] = expf(p[j] - mx);
                            sum += p[j];
                        }
                        const float inv = (float)(1.0 / sum);
                        for (int64_t j = klo; j < lo; j++) p[j] = 0.0f;
                        for (int64_t j = lo; j <= i; j++) p[j] *= inv;
                        for (int64_t j = i + 1; j < i1; j++) p[j] = 0.0f;
                        st[2 * i] = mx;
                        st[2 * i + 1] = inv;
                    }
                    // O[i0:i1] = P V[klo:i1]
                    cpu_sgemm(0, 0, m, D, n, 1.0f, P, n, V + klo * kvs, kvs, 0.0f, o + b * S * qs + i0 * qs + h * D, qs);
                }
            }
        free(P);
    }
}

// Parallel over (batch, KV head): the group's query heads all add into the same
// dK/dV rows, so they stay on one thread. Per panel of query rows:
//   P recomputed from the saved max and 1/sum;  dP = dO V^T;  dS = P * (dP - rowsum(P * dP)) / sqrt(D);
//   dQ = dS K;  dK += dS^T Q;  dV += P^T dO
void cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *stats, const float *q,
                       const float *k, const float *v, const int32_t *pos, int64_t B, int64_t S, int64_t H,
                       int64_t Hkv, int64_t D) {
    const int64_t group = H / Hkv, qs = H * D, kvs = Hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel
    {
        float *P = zt_xmalloc((size_t)(ZT_ATT_PANEL * S) * sizeof(float));
        float *dS = zt_xmalloc((size_t)(ZT_ATT_PANEL * S) * sizeof(float));
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t kh = 0; kh < Hkv; kh++) {
                const float *K = k + b * S * kvs + kh * D, *V = v + b * S * kvs + kh * D;
                float *dK = dk + b * S * kvs + kh * D, *dV = dv + b * S * kvs + kh * D;
                for (int64_t j = 0; j < S; j++) {
                    memset(dK + j * kvs, 0, (size_t)D * sizeof(float));
                    memset(dV + j * kvs, 0, (size_t)D * sizeof(float));
                }
                for (int64_t h = kh * group; h < (kh + 1) * group; h++) {
                    const float *dO = dout + b * S * qs + h * D, *Q = q + b * S * qs + h * D;
                    const float *st = stats + (b * H + h) * S * 2;
                    for (int64_t i0 = 0; i0 < S; i0 += ZT_ATT_PANEL) {
                        const int64_t i1 = i0 + ZT_ATT_PANEL < S ? i0 + ZT_ATT_PANEL : S, m = i1 - i0;
                        const int64_t klo = panel_first_key(pos, b, S, i0, i1), n = i1 - klo;
                        panel_scores(P, Q, K, qs, kvs, i0, m, klo, n, D, scale);
                        cpu_sgemm(0, 1, m, n, D, 1.0f, dO + i0 * qs, qs, V + klo * kvs, kvs, 0.0f, dS, n);  // dP
                        for (int64_t i = i0; i < i1; i++) {
                            const int64_t lo = first_key(pos, b, S, i);
                            float *p = P + (i - i0) * n - klo, *ds = dS + (i - i0) * n - klo;
                            const float mx = st[2 * i], inv = st[2 * i + 1];
                            double rowdot = 0;
                            for (int64_t j = lo; j <= i; j++) {
                                p[j] = expf(p[j] - mx) * inv;
                                rowdot += (double)p[j] * ds[j];
                            }
                            for (int64_t j = klo; j < lo; j++) p[j] = ds[j] = 0.0f;
                            for (int64_t j = lo; j <= i; j++) ds[j] = p[j] * (ds[j] - (float)rowdot) * scale;
                            for (int64_t j = i + 1; j < i1; j++) p[j] = ds[j] = 0.0f;
                        }
                        cpu_sgemm(0, 0, m, D, n, 1.0f, dS, n, K + klo * kvs, kvs, 0.0f,
                                  dq + b * S * qs + i0 * qs + h * D, qs);
                        cpu_sgemm(1, 0, n, D, m, 1.0f, dS, n, Q + i0 * qs, qs, 1.0f, dK + klo * kvs, kvs);
                        cpu_sgemm(1, 0, n, D, m, 1.0f, P, n, dO + i0 * qs, qs, 1.0f, dV + klo * kvs, kvs);
                    }
                }
            }
        free(P);
        free(dS);
    }
}
