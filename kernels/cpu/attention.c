// Causal grouped-query attention, the reference (optionally document-causal: with
// pos[], a query sees only its own document's earlier tokens): per (batch, head) the score and
// value products go through OpenBLAS (the masked upper triangle is computed and
// zeroed: simple, and still far faster than scalar loops); query head h reads KV
// head h / (H / Hkv) in place, never copied. Probabilities are kept for backward.
// defines: cpu_attention_fwd, cpu_attention_bwd
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "base/common.h"

// OpenBLAS extensions. Inside our OpenMP loop each thread runs its own small GEMMs,
// so OpenBLAS must not start threads of its own there (nested pools thrash a busy
// machine: measured 12x slower); its thread count is restored afterwards.
int openblas_get_num_threads(void);
void openblas_set_num_threads(int);

// The first key query i of block b may see: 0, or its document's first token.
static inline int64_t first_key(const int32_t *pos, int64_t b, int64_t S, int64_t i) {
    return pos ? i - pos[b * S + i] : 0;
}

void cpu_attention_fwd(float *o, float *probs, const float *q, const float *k, const float *v, const int32_t *pos,
                       int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const int64_t group = H / Hkv, qs = H * D, kvs = Hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
    const int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kh = h / group;
            const float *Q = q + b * S * qs + h * D, *K = k + b * S * kvs + kh * D, *V = v + b * S * kvs + kh * D;
            float *P = probs + (b * H + h) * S * S;
            // scores = Q K^T / sqrt(D)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)S, (int)S, (int)D, scale, Q, (int)qs, K,
                        (int)kvs, 0.0f, P, (int)S);
            for (int64_t i = 0; i < S; i++) {  // causal softmax: key j visible from query i iff lo <= j <= i
                const int64_t lo = first_key(pos, b, S, i);
                float *p = P + i * S, mx = -INFINITY;
                for (int64_t j = lo; j <= i; j++) mx = p[j] > mx ? p[j] : mx;
                double sum = 0;
                for (int64_t j = lo; j <= i; j++) {
                    p[j] = expf(p[j] - mx);
                    sum += p[j];
                }
                const float inv = (float)(1.0 / sum);
                for (int64_t j = 0; j < lo; j++) p[j] = 0.0f;
                for (int64_t j = lo; j <= i; j++) p[j] *= inv;
                for (int64_t j = i + 1; j < S; j++) p[j] = 0.0f;
            }
            // O = P V
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)S, (int)D, (int)S, 1.0f, P, (int)S, V,
                        (int)kvs, 0.0f, o + b * S * qs + h * D, (int)qs);
        }
    openblas_set_num_threads(blas_threads);
}

// Parallel over (batch, KV head): the group's query heads all add into the same
// dK/dV rows, so they stay on one thread.
//   dP = dO V^T;  dV += P^T dO;  dS = P * (dP - rowsum(P * dP)) / sqrt(D);  dQ = dS K;  dK += dS^T Q
void cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs, const float *q,
                       const float *k, const float *v, const int32_t *pos, int64_t B, int64_t S, int64_t H,
                       int64_t Hkv, int64_t D) {
    const int64_t group = H / Hkv, qs = H * D, kvs = Hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
    const int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
#pragma omp parallel
    {
        float *dS = zt_xmalloc((size_t)(S * S) * sizeof(float));
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
                    const float *P = probs + (b * H + h) * S * S;
                    const float *dO = dout + b * S * qs + h * D, *Q = q + b * S * qs + h * D;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)S, (int)S, (int)D, 1.0f, dO, (int)qs, V,
                                (int)kvs, 0.0f, dS, (int)S);  // dP
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)S, (int)D, (int)S, 1.0f, P, (int)S, dO,
                                (int)qs, 1.0f, dV, (int)kvs);
                    for (int64_t i = 0; i < S; i++) {
                        const float *p = P + i * S;
                        float *ds = dS + i * S;
                        const int64_t lo = first_key(pos, b, S, i);
                        double rowdot = 0;
                        for (int64_t j = lo; j <= i; j++) rowdot += (double)p[j] * ds[j];
                        for (int64_t j = 0; j < lo; j++) ds[j] = 0.0f;
                        for (int64_t j = lo; j <= i; j++) ds[j] = p[j] * (ds[j] - (float)rowdot) * scale;
                        for (int64_t j = i + 1; j < S; j++) ds[j] = 0.0f;
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)S, (int)D, (int)S, 1.0f, dS, (int)S, K,
                                (int)kvs, 0.0f, dq + b * S * qs + h * D, (int)qs);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)S, (int)D, (int)S, 1.0f, dS, (int)S, Q,
                                (int)qs, 1.0f, dK, (int)kvs);
                }
            }
        free(dS);
    }
    openblas_set_num_threads(blas_threads);
}
