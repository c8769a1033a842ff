// Causal grouped-query attention from cuBLASLt strided-batched products and fused
// softmax kernels, one (batch, KV head) group at a time: the group's H/Hkv query
// heads are the batch, and K/V are read in place with batch stride 0 (no copies).
// Forward keeps lse[B,H,S] (fp32); backward recomputes the probabilities. With
// document positions (pos), the softmax kernels also mask the keys before the query's
// document: packed documents never attend to each other.
// Scratch per group (fp32 scores and dP, bf16 P and dS, fp32 per-head dK/dV):
// g*S*S*12 + g*S*D*8 + g*S*4 bytes (g = H/Hkv); Qwen3-32B at S=2048: ~420 MB.
// The full S x S square is computed and the upper triangle masked: half of the
// score FLOPs are wasted (a flash-attention kernel, e.g. cuDNN's, skips them).
// defines: zt_cuda_attention_fwd, zt_cuda_attention_bwd, zt_cuda_attention_scratch_bytes
#include <math.h>

#include "kernels/cuda/cuda_internal.h"

#define WARPS 8

static size_t round256(size_t x) { return (x + 255) & ~(size_t)255; }

typedef struct {
    float *scores, *dp, *rowdot, *dks, *dvs;
    bf16 *p, *ds;
} attn_scratch;

static size_t scratch_layout(attn_scratch *a, char *base, int64_t S, int64_t g, int64_t D) {
    size_t off = 0;
    const size_t ss = (size_t)(g * S * S);
#define TAKE(field, type, n)                                   \
    do {                                                       \
        if (a) a->field = (type *)(base + off);                \
        off += round256((size_t)(n) * sizeof(type));           \
    } while (0)
    TAKE(scores, float, ss);
    TAKE(dp, float, ss);
    TAKE(p, bf16, ss);
    TAKE(ds, bf16, ss);
    TAKE(dks, float, g * S * D);
    TAKE(dvs, float, g * S * D);
    TAKE(rowdot, float, g * S);
#undef TAKE
    return off;
}

extern "C" size_t zt_cuda_attention_scratch_bytes(int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    return scratch_layout(NULL, NULL, S, H / Hkv, D);
}

// The first key query i may see: 0, or the first token of its document (pos = this
// block's document positions, pos[i] = i's position in its document). A position
// that is not one (outside 0..i) traps: it would unmask keys that do not exist.
__device__ __forceinline__ int first_key(const int32_t *__restrict__ pos, int i) {
    if (!pos) return 0;
    const int p = pos[i];
    if (p < 0 || p > i) {
        if ((threadIdx.x & 31) == 0)
            printf("zt_cuda_attention: document position %d of query %d is outside [0, %d]\n", p, i, i);
        __trap();
    }
    return i - p;
}

// One warp per score row (head-in-group hg, query i): masked softmax in fp32 over the
// visible keys lo..i, P in bf16 (zeros outside them), lse = max + log(sum).
__global__ void causal_softmax_fwd_kernel(bf16 *__restrict__ P, float *__restrict__ lse,
                                          const float *__restrict__ sc, const int32_t *__restrict__ pos, int S,
                                          int64_t rows) {
    const int64_t row = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const int i = (int)(row % S), lo = first_key(pos, i);
    const float *s = sc + row * S;
    bf16 *p = P + row * S;
    float m = -INFINITY;
    for (int j = lo + lane; j <= i; j += 32) m = fmaxf(m, s[j]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lo + lane; j <= i; j += 32) sum += expf(s[j] - m);
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    for (int j = lane; j < S; j += 32) p[j] = f2bf(j >= lo && j <= i ? expf(s[j] - m) * inv : 0.0f);
    if (lane == 0) lse[row] = m + logf(sum);
}

// rowdot[hg, i] = sum_e dO[i, hg, e] * O[i, hg, e]  (= sum_j P_ij dP_ij)
__global__ void attn_rowdot_kernel(float *__restrict__ rowdot, const bf16 *__restrict__ dout,
                                   const bf16 *__restrict__ o, int S, int g, int D, int64_t ld) {
    const int64_t row = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;  // hg * S + i
    const int lane = threadIdx.x & 31;
    if (row >= (int64_t)g * S) return;
    const int hg = (int)(row / S), i = (int)(row % S);
    const bf16 *a = dout + i * ld + hg * D, *b = o + i * ld + hg * D;
    float s = 0.0f;
    for (int e = lane; e < D; e += 32) s += bf2f(a[e]) * bf2f(b[e]);
    s = warp_sum(s);
    if (lane == 0) rowdot[row] = s;
}

// P = exp(s - lse), dS = P * (dP - rowdot) * scale, both bf16, zero outside the
// visible keys lo..i (above the diagonal, and before the query's document).
__global__ void causal_softmax_bwd_kernel(bf16 *__restrict__ P, bf16 *__restrict__ dS, const float *__restrict__ sc,
                                          const float *__restrict__ dp, const float *__restrict__ lse,
                                          const float *__restrict__ rowdot, const int32_t *__restrict__ pos, int S,
                                          int64_t rows, float scale) {
    const int64_t row = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const int i = (int)(row % S), lo = first_key(pos, i);
    const float l = lse[row], rd = rowdot[row];
    const float *s = sc + row * S, *d = dp + row * S;
    bf16 *pp = P + row * S, *dd = dS + row * S;
    for (int j = lane; j < S; j += 32) {
        float p = 0.0f, ds = 0.0f;
        if (j >= lo && j <= i) {
            p = expf(s[j] - l);
            ds = p * (d[j] - rd) * scale;
        }
        pp[j] = f2bf(p);
        dd[j] = f2bf(ds);
    }
}

// dK[j, e] = sum over the group's heads of the per-head partials, fixed order.
__global__ void attn_group_sum_kernel(bf16 *__restrict__ dk, bf16 *__restrict__ dv, const float *__restrict__ dks,
                                      const float *__restrict__ dvs, int S, int g, int D, int64_t ld) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= (int64_t)S * D) return;
    const int64_t j = idx / D, e = idx % D;
    float a = 0.0f, b = 0.0f;
    for (int h = 0; h < g; h++) {
        a += dks[(int64_t)h * S * D + idx];
        b += dvs[(int64_t)h * S * D + idx];
    }
    dk[j * ld + e] = f2bf(a);
    dv[j * ld + e] = f2bf(b);
}

static void check_shape(int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    ZT_REQUIRE(B > 0 && S > 0 && H > 0 && Hkv > 0 && D > 0 && H % Hkv == 0 && S < (1 << 30),
               "attention B=%lld S=%lld H=%lld Hkv=%lld D=%lld (H must be a multiple of Hkv)", (long long)B,
               (long long)S, (long long)H, (long long)Hkv, (long long)D);
}

extern "C" void zt_cuda_attention_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                      const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S,
                                      int64_t H, int64_t Hkv, int64_t D) {
    check_shape(B, S, H, Hkv, D);
    cudaStream_t st = zt_st(stream);
    const int64_t g = H / Hkv, qs = H * D, kvs = Hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
    attn_scratch a;
    char *base = (char *)zt_ctx_scratch(c, zt_cuda_attention_scratch_bytes(S, H, Hkv, D), st);
    scratch_layout(&a, base, S, g, D);
    const int64_t rows = g * S;
    for (int64_t b = 0; b < B; b++)
        for (int64_t kh = 0; kh < Hkv; kh++) {
            const zt_bf16 *qg = q + b * S * qs + kh * g * D;
            const zt_bf16 *kg = k + b * S * kvs + kh * D;
            const zt_bf16 *vg = v + b * S * kvs + kh * D;
            zt_bf16 *og = o + b * S * qs + kh * g * D;
            // scores[hg] = scale * Q_hg K^T   (M=S queries, N=S keys, K=D)
            zt_cuda_gemm(c, stream, a.scores, ZT_F32, S, S * S, qg, 0, qs, D, kg, 1, kvs, 0, S, S, D, g, scale, 0.0f);
            ZT_LAUNCH(causal_softmax_fwd_kernel, zt_blocks(rows, WARPS), 32 * WARPS, 0, st)(
                a.p, lse + (b * H + kh * g) * S, a.scores, pos ? pos + b * S : NULL, (int)S, rows);
            ZT_LAUNCHED("causal_softmax_fwd_kernel", st);
            // O_hg = P_hg V   (M=S, N=D, K=S), written straight into o's head columns
            zt_cuda_gemm(c, stream, og, ZT_BF16, qs, D, (const zt_bf16 *)a.p, 0, S, S * S, vg, 0, kvs, 0, S, D, S, g,
                         1.0f, 0.0f);
        }
}

extern "C" void zt_cuda_attention_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                      const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                      const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S,
                                      int64_t H, int64_t Hkv, int64_t D) {
    check_shape(B, S, H, Hkv, D);
    cudaStream_t st = zt_st(stream);
    const int64_t g = H / Hkv, qs = H * D, kvs = Hkv * D;
    const float scale = 1.0f / sqrtf((float)D);
    attn_scratch a;
    char *base = (char *)zt_ctx_scratch(c, zt_cuda_attention_scratch_bytes(S, H, Hkv, D), st);
    scratch_layout(&a, base, S, g, D);
    const int64_t rows = g * S;
    for (int64_t b = 0; b < B; b++)
        for (int64_t kh = 0; kh < Hkv; kh++) {
            const int64_t qoff = b * S * qs + kh * g * D, kvoff = b * S * kvs + kh * D;
            const zt_bf16 *qg = q + qoff, *dog = dout + qoff, *og = o + qoff;
            const zt_bf16 *kg = k + kvoff, *vg = v + kvoff;
            ZT_LAUNCH(attn_rowdot_kernel, zt_blocks(rows, WARPS), 32 * WARPS, 0, st)(a.rowdot, (const bf16 *)dog,
                                                                              (const bf16 *)og, (int)S, (int)g,
                                                                              (int)D, qs);
            ZT_LAUNCHED("attn_rowdot_kernel", st);
            // recompute scores; dP = dO V^T
            zt_cuda_gemm(c, stream, a.scores, ZT_F32, S, S * S, qg, 0, qs, D, kg, 1, kvs, 0, S, S, D, g, scale, 0.0f);
            zt_cuda_gemm(c, stream, a.dp, ZT_F32, S, S * S, dog, 0, qs, D, vg, 1, kvs, 0, S, S, D, g, 1.0f, 0.0f);
            ZT_LAUNCH(causal_softmax_bwd_kernel, zt_blocks(rows, WARPS), 32 * WARPS, 0, st)(
                a.p, a.ds, a.scores, a.dp, lse + (b * H + kh * g) * S, a.rowdot, pos ? pos + b * S : NULL, (int)S,
                rows, scale);
            ZT_LAUNCHED("causal_softmax_bwd_kernel", st);
            // per head: dV_hg = P^T dO, dK_hg = dS^T Q (fp32 partials), dQ_hg = dS K (bf16, in place)
            zt_cuda_gemm(c, stream, a.dvs, ZT_F32, D, S * D, (const zt_bf16 *)a.p, 1, S, S * S, dog, 0, qs, D, S, D,
                         S, g, 1.0f, 0.0f);
            zt_cuda_gemm(c, stream, a.dks, ZT_F32, D, S * D, (const zt_bf16 *)a.ds, 1, S, S * S, qg, 0, qs, D, S, D,
                         S, g, 1.0f, 0.0f);
            zt_cuda_gemm(c, stream, dq + qoff, ZT_BF16, qs, D, (const zt_bf16 *)a.ds, 0, S, S * S, kg, 0, kvs, 0, S,
                         D, S, g, 1.0f, 0.0f);
            ZT_LAUNCH(attn_group_sum_kernel, zt_blocks(S * D, 256), 256, 0, st)((bf16 *)(dk + kvoff), (bf16 *)(dv + kvoff),
                                                                         a.dks, a.dvs, (int)S, (int)g, (int)D, kvs);
            ZT_LAUNCHED("attn_group_sum_kernel", st);
        }
}
