// Rotary position embedding, half-split layout (HF rotate_half), fp32 angles; a
// token's position is its index in the block, or in its document when packed
// documents restart at 0 (pos[]).
// defines: zt_rope_table, cpu_rope_fwd, cpu_rope_bwd
#include <math.h>

#include "kernels/ops.h"
#include "kernels/cpu/cpu_internal.h"

// Mirrors transformers' RoPE init in fp32 (kernels/rope_freqs.h: plain or YaRN), freqs =
// pos * inv_freq, cos/sin of the fp32 angle (no fast-math) times the attention factor
// (Qwen3RotaryEmbedding: `emb.cos() * attention_scaling`; exactly the plain table when 1).
void zt_rope_table_freqs(float *cos_t, float *sin_t, int64_t S, int64_t D, const zt_rope_freqs *f) {
    const int64_t half = D / 2;
    const float att = (float)f->attention;
    for (int64_t i = 0; i < half; i++) {
        const float inv_freq = zt_rope_inv_freq(f, i, D);
        for (int64_t p = 0; p < S; p++) {
            const float ang = (float)p * inv_freq;
            cos_t[p * half + i] = cosf(ang) * att;
            sin_t[p * half + i] = sinf(ang) * att;
        }
    }
}

void zt_rope_table(float *cos_t, float *sin_t, int64_t S, int64_t D, double theta) {
    const zt_rope_freqs f = {.theta = theta, .yarn = 0, .attention = 1.0};
    zt_rope_table_freqs(cos_t, sin_t, S, D, &f);
}

void cpu_rope_fwd(float *x, const float *cos_t, const float *sin_t, const int32_t *posv, int64_t B, int64_t S, int64_t nh,
                  int64_t D) {
    int64_t half = D / 2;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < B * S; t++) {
        const int64_t pos = posv ? posv[t] : t % S;
        const float *c = cos_t + pos * half, *s = sin_t + pos * half;
        for (int64_t h = 0; h < nh; h++) {
            float *v = x + (t * nh + h) * D;
            for (int64_t i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        }
    }
}

// Transpose of the rotation: dx = g cos - rotate_half(g sin) per pair.
void cpu_rope_bwd(float *dx, const float *cos_t, const float *sin_t, const int32_t *posv, int64_t B, int64_t S,
                  int64_t nh, int64_t D) {
    int64_t half = D / 2;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < B * S; t++) {
        const int64_t pos = posv ? posv[t] : t % S;
        const float *c = cos_t + pos * half, *s = sin_t + pos * half;
        for (int64_t h = 0; h < nh; h++) {
            float *v = dx + (t * nh + h) * D;
            for (int64_t i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] + b * s[i];
                v[i + half] = b * c[i] - a * s[i];
            }
        }
    }
}
