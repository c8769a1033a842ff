// The elementwise passes of the CPU attention (kernels/cpu/attention.c): forward's softmax
// step over a key block of transposed scores (one query per column, so the vectors run across
// queries and every sum runs down a column in key order), and backward's dS from recomputed
// probabilities, each in AVX-512, AVX2 and portable C, picked with the sgemm's kernel
// (ZT_CPU_GEMM), and giving the same bits in each: the exp is one sequence of IEEE operations
// (cpu_att_exp below: a rounding to the nearest integer by adding and subtracting 1.5 * 2^23, a
// two-part ln 2, a degree-5 polynomial by fused multiply-adds, the power of two from the
// exponent bits), the same in every lane, ~1 ulp from expf and exactly 0 below -87 (where
// expf is below 2^-125); the vector versions round with one instruction and AVX-512 scales by
// 2^n with scalef, each of which gives those operations' bits (test_att_rows compares them);
// sums are per column in key order; a max is exact in any order.
// This file is compiled with -ffp-contract=off (CMakeLists.txt): a multiply and an add stay
// two roundings unless written as one fused multiply-add.
// defines: cpu_att_exp, cpu_att_rows, cpu_sigmoid
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZT_ATT_X86 1
#endif

#define EXP_LO -87.0f
#define EXP_HI 88.0f
#define LOG2E 1.44269504088896341f
#define ROUND_MAGIC 12582912.0f  // 1.5 * 2^23: x + it - it is x rounded to an integer
#define LN2_HI 0.693359375f      // ln 2 = LN2_HI - LN2_LO, LN2_HI with few mantissa bits
#define LN2_LO 2.12194440e-4f
#define P0 1.9875691500e-4f  // Cephes expf's polynomial
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

float cpu_att_exp(float x) {
    if (x != x) return x;
    if (x < EXP_LO) return 0.0f;
    if (x > EXP_HI) x = EXP_HI;
    const float n = (x * LOG2E + ROUND_MAGIC) - ROUND_MAGIC;  // |n| <= 127
    float r = fmaf(n, -LN2_HI, x);
    r = fmaf(n, LN2_LO, r);
    float y = fmaf(P0, r, P1);
    y = fmaf(y, r, P2);
    y = fmaf(y, r, P3);
    y = fmaf(y, r, P4);
    y = fmaf(y, r, P5);
    y = fmaf(y, r * r, r) + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float p2;
    memcpy(&p2, &bits, sizeof p2);
    return y * p2;
}

// ---- portable C ---------------------------------------------------------------------------
// Column i of st[n][ld]: the block's max b, m1 = max(mx, b), e = (m1 = -inf ? 0 : m1), alpha =
// exp(mx - e), st[j][i] = exp(st[j][i] - e), sum = sum * alpha + (sum over j in order).
static void col_step_generic(float *st, int64_t n, int64_t m, int64_t ld, float *mx, float *sum, float *alpha) {
    for (int64_t i = 0; i < m; i++) {
        float b = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < n; j++) b = st[j * ld + i] > b ? st[j * ld + i] : b;
        const float m1 = b > mx[i] ? b : mx[i], e = m1 == -INFINITY ? 0.0f : m1;
        alpha[i] = cpu_att_exp(mx[i] - e);
        for (int64_t j = 0; j < n; j++) {
            const float p = cpu_att_exp(st[j * ld + i] - e);
            st[j * ld + i] = p;
            s = s + p;
        }
        sum[i] = sum[i] * alpha[i] + s;
        mx[i] = m1;
    }
}

static void grad_generic(float *p, float *ds, int64_t n, float m, float inv, float di, float scale) {
    for (int64_t j = 0; j < n; j++) {
        p[j] = cpu_att_exp(p[j] - m) * inv;
        ds[j] = p[j] * (ds[j] - di) * scale;
    }
}

// s[i] = 1 / (1 + exp(0 - x[i])) with the exp above (Gated DeltaNet's SiLU and gates).
static void sigmoid_generic(float *s, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) s[i] = 1.0f / (1.0f + cpu_att_exp(0.0f - x[i]));
}

static const cpu_att_row_ops rows_generic = {col_step_generic, grad_generic, sigmoid_generic};

#ifdef ZT_ATT_X86
// ---- AVX2 + FMA: 8 lanes, the 16 partial sums in two registers -----------------------------
__attribute__((target("avx2,fma"))) static inline __m256i lanes8(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

__attribute__((target("avx2,fma"))) static inline __m256 exp8(__m256 x) {
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(EXP_HI), x);  // a NaN x stays x
    // nearest integer, ties to even: the bits of adding and subtracting ROUND_MAGIC (|n| <= 127)
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
    __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(P0), r, _mm256_set1_ps(P1));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(P2));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(P3));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(P4));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(P5));
    y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

__attribute__((target("avx2,fma"))) static void col_step_avx2(float *st, int64_t n, int64_t m, int64_t ld, float *mx,
                                                                float *sum, float *alpha) {
    for (int64_t i = 0; i < m; i += 8) {
        const __m256i k = lanes8(m - i);
        __m256 b = _mm256_set1_ps(-INFINITY), s = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j++) b = _mm256_max_ps(_mm256_maskload_ps(st + j * ld + i, k), b);
        const __m256 m0 = _mm256_maskload_ps(mx + i, k), m1 = _mm256_max_ps(b, m0);
        const __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(m1, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ), m1);
        const __m256 a = exp8(_mm256_sub_ps(m0, e));
        for (int64_t j = 0; j < n; j++) {
            const __m256 p = exp8(_mm256_sub_ps(_mm256_maskload_ps(st + j * ld + i, k), e));
            _mm256_maskstore_ps(st + j * ld + i, k, p);
            s = _mm256_add_ps(s, p);
        }
        _mm256_maskstore_ps(sum + i, k, _mm256_add_ps(_mm256_mul_ps(_mm256_maskload_ps(sum + i, k), a), s));
        _mm256_maskstore_ps(alpha + i, k, a);
        _mm256_maskstore_ps(mx + i, k, m1);
    }
}

__attribute__((target("avx2,fma"))) static void grad_avx2(float *p, float *ds, int64_t n, float m, float inv,
                                                            float di, float scale) {
    const __m256 mv = _mm256_set1_ps(m), iv = _mm256_set1_ps(inv), dv = _mm256_set1_ps(di), sv = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < n; j += 8) {
        const __m256i k = lanes8(n - j);
        const __m256 pj = _mm256_mul_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(p + j, k), mv)), iv);
        const __m256 dj = _mm256_mul_ps(_mm256_mul_ps(pj, _mm256_sub_ps(_mm256_maskload_ps(ds + j, k), dv)), sv);
        _mm256_maskstore_ps(p + j, k, pj);
        _mm256_maskstore_ps(ds + j, k, dj);
    }
}

__attribute__((target("avx2,fma"))) static void sigmoid_avx2(float *s, const float *x, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        const __m256i k = lanes8(n - i);
        const __m256 e = exp8(_mm256_sub_ps(zero, _mm256_maskload_ps(x + i, k)));
        _mm256_maskstore_ps(s + i, k, _mm256_div_ps(one, _mm256_add_ps(one, e)));
    }
}

static const cpu_att_row_ops rows_avx2 = {col_step_avx2, grad_avx2, sigmoid_avx2};

// ---- AVX-512: 16 lanes --------------------------------------------------------------------
static inline __mmask16 lanes16(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u); }

__attribute__((target("avx512f,avx2,fma"))) static inline __m512 exp16(__m512 x) {
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_LO), _CMP_NLT_UQ);  // not below: x >= lo or NaN
    x = _mm512_min_ps(_mm512_set1_ps(EXP_HI), x);
    // nearest integer, ties to even: the bits of adding and subtracting ROUND_MAGIC (|n| <= 127)
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(P0), r, _mm512_set1_ps(P1));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(P2));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(P3));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(P4));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(P5));
    y = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    // y * 2^n in one rounding, as y times the power of two built from its exponent bits (n is an
    // integer in [-126, 127], so 2^n is a normal float)
    return _mm512_maskz_scalef_ps(keep, y, n);
}

__attribute__((target("avx512f,avx2,fma"))) static void col_step_avx512(float *st, int64_t n, int64_t m, int64_t ld,
                                                                          float *mx, float *sum, float *alpha) {
    for (int64_t i = 0; i < m; i += 16) {
        const __mmask16 k = lanes16(m - i);
        __m512 b = _mm512_set1_ps(-INFINITY), s = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j++) b = _mm512_max_ps(_mm512_maskz_loadu_ps(k, st + j * ld + i), b);
        const __m512 m0 = _mm512_maskz_loadu_ps(k, mx + i), m1 = _mm512_max_ps(b, m0);
        const __m512 e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m1, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ), m1);
        const __m512 a = exp16(_mm512_sub_ps(m0, e));
        for (int64_t j = 0; j < n; j++) {
            const __m512 p = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, st + j * ld + i), e));
            _mm512_mask_storeu_ps(st + j * ld + i, k, p);
            s = _mm512_add_ps(s, p);
        }
        _mm512_mask_storeu_ps(sum + i, k, _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, sum + i), a), s));
        _mm512_mask_storeu_ps(alpha + i, k, a);
        _mm512_mask_storeu_ps(mx + i, k, m1);
    }
}

__attribute__((target("avx512f,avx2,fma"))) static void grad_avx512(float *p, float *ds, int64_t n, float m, float inv,
                                                                      float di, float scale) {
    const __m512 mv = _mm512_set1_ps(m), iv = _mm512_set1_ps(inv), dv = _mm512_set1_ps(di), sv = _mm512_set1_ps(scale);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = lanes16(n - j);
        const __m512 pj = _mm512_mul_ps(exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, p + j), mv)), iv);
        const __m512 dj = _mm512_mul_ps(_mm512_mul_ps(pj, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, ds + j), dv)), sv);
        _mm512_mask_storeu_ps(p + j, k, pj);
        _mm512_mask_storeu_ps(ds + j, k, dj);
    }
}

__attribute__((target("avx512f,avx2,fma"))) static void sigmoid_avx512(float *s, const float *x, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = lanes16(n - i);
        const __m512 e = exp16(_mm512_sub_ps(zero, _mm512_maskz_loadu_ps(k, x + i)));
        _mm512_mask_storeu_ps(s + i, k, _mm512_div_ps(one, _mm512_add_ps(one, e)));
    }
}

static const cpu_att_row_ops rows_avx512 = {col_step_avx512, grad_avx512, sigmoid_avx512};
#endif

const cpu_att_row_ops *cpu_att_rows(void) {
#ifdef ZT_ATT_X86
    switch (cpu_sgemm_isa_id()) {
    case CPU_ISA_AVX512: return &rows_avx512;
    case CPU_ISA_AVX2: return &rows_avx2;
    default: break;
    }
#endif
    return &rows_generic;
}

void cpu_sigmoid(float *s, const float *x, int64_t n) { cpu_att_rows()->sigmoid(s, x, n); }
