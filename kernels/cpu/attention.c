// Causal grouped-query attention, the plain O(S^2) reference: query head h reads
// KV head h / (H / Hkv) without copying KV heads; probabilities are kept for backward.
// defines: cpu_attention_fwd, cpu_attention_bwd
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

void cpu_attention_fwd(float *o, float *probs, const float *q, const float *k, const float *v, int64_t B, int64_t S,
                       int64_t H, int64_t Hkv, int64_t D) {
    const int64_t group = H / Hkv, qs = H * D, kvs = Hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kh = h / group;
            for (int64_t i = 0; i < S; i++) {
                const float *qi = q + (b * S + i) * qs + h * D;
                float *p = probs + ((b * H + h) * S + i) * S;
                float mx = -INFINITY;
                for (int64_t j = 0; j <= i; j++) {
                    const float *kj = k + (b * S + j) * kvs + kh * D;
                    float dot = 0;
                    for (int64_t e = 0; e < D; e++) dot += qi[e] * kj[e];
                    p[j] = dot * scale;
                    if (p[j] > mx) mx = p[j];
                }
                double sum = 0;
                for (int64_t j = 0; j <= i; j++) {
                    p[j] = expf(p[j] - mx);
                    sum += p[j];
                }
                float inv = (float)(1.0 / sum);
                for (int64_t j = 0; j <= i; j++) p[j] *= inv;
                for (int64_t j = i + 1; j < S; j++) p[j] = 0.0f;
                float *oi = o + (b * S + i) * qs + h * D;
                for (int64_t e = 0; e < D; e++) oi[e] = 0.0f;
                for (int64_t j = 0; j <= i; j++) {
                    const float *vj = v + (b * S + j) * kvs + kh * D;
                    for (int64_t e = 0; e < D; e++) oi[e] += p[j] * vj[e];
                }
            }
        }
}

// Parallel over (batch, KV head) so the group's query heads, which all add into
// the same dK/dV rows, stay on one thread.
void cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *probs, const float *q,
                       const float *k, const float *v, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const int64_t group = H / Hkv, qs = H * D, kvs = Hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t kh = 0; kh < Hkv; kh++) {
            float *ds = (float *)__builtin_alloca((size_t)S * sizeof(float));
            for (int64_t j = 0; j < S; j++) {
                memset(dk + (b * S + j) * kvs + kh * D, 0, (size_t)D * sizeof(float));
                memset(dv + (b * S + j) * kvs + kh * D, 0, (size_t)D * sizeof(float));
            }
            for (int64_t h = kh * group; h < (kh + 1) * group; h++)
                for (int64_t i = 0; i < S; i++) {
                    const float *p = probs + ((b * H + h) * S + i) * S;
                    const float *doi = dout + (b * S + i) * qs + h * D;
                    const float *qi = q + (b * S + i) * qs + h * D;
                    double rowdot = 0;
                    for (int64_t j = 0; j <= i; j++) {
                        const float *vj = v + (b * S + j) * kvs + kh * D;
                        float *dvj = dv + (b * S + j) * kvs + kh * D;
                        float dp = 0;
                        for (int64_t e = 0; e < D; e++) {
                            dp += doi[e] * vj[e];
                            dvj[e] += p[j] * doi[e];
                        }
                        ds[j] = dp;
                        rowdot += (double)p[j] * dp;
                    }
                    float *dqi = dq + (b * S + i) * qs + h * D;
                    for (int64_t e = 0; e < D; e++) dqi[e] = 0.0f;
                    for (int64_t j = 0; j <= i; j++) {
                        float g = p[j] * (ds[j] - (float)rowdot) * scale;
                        const float *kj = k + (b * S + j) * kvs + kh * D;
                        float *dkj = dk + (b * S + j) * kvs + kh * D;
                        for (int64_t e = 0; e < D; e++) {
                            dqi[e] += g * kj[e];
                            dkj[e] += g * qi[e];
                        }
                    }
                }
        }
}
