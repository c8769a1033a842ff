// An experiment, not a kernel of the trainer: can this CPU's AMX-BF16 tile unit make attention's
// fp32 products faster at fp32's accuracy? One block product of the CPU attention (96 x 96 x 32: a
// block of scores, Q K^T at head_dim 32) three ways, each repeated from L1:
//   - the fp32 sgemm kernel the trainer uses (cpu_sgemm_packed on packed operands);
//   - AMX with bf16 operands split in two (x = hi + lo: hi*hi + hi*lo + lo*hi, 3 tile products);
//   - AMX with bf16 operands split in three (x = hi + mid + lo: the 6 products down to 2^-24).
// Each result's largest error against a double-precision product, its time and GFLOP/s; and the
// time to split one 96 x 96 fp32 block into three bf16 parts with AVX512-BF16 (what P and dS would
// cost before their products). Then a whole block of attention (pipeline() below): every product
// of one 96 x 96 block forward and backward with the conversions its operands need, fp32 kernel
// against AMX with three- and two-part splits (reps / 4 repetitions). Exit 77 where the CPU or the
// kernel lacks AMX-BF16 / AVX512-BF16.
//   build/zt_amx_split_probe [--reps N]
// docs/benchmarks.md §2.10 has this machine's figures and what they do and do not show.
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/common.h"
#include "kernels/cpu/cpu_internal.h"

#define M 96
#define N 96
#define K 32
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct {
    uint8_t palette, start, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) tile_config;

// A as bf16 rows [M][K]; B in the tile unit's pair-interleaved layout [K/2][N][2]; parts 0, 1, 2 =
// hi, mid, lo
static uint16_t A3[3][M * K] __attribute__((aligned(64))), B3[3][K * N] __attribute__((aligned(64)));
static float C[M * N] __attribute__((aligned(64)));

static uint16_t to_bf16(float x) {  // round to nearest even (no NaN here)
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// C tiles 0-3 (a 32 x 32 block of C) += A part a (rows i0..i0+31) times B part b (columns j0..j0+31)
__attribute__((target("amx-tile,amx-bf16"))) static inline void dp(int a, int b, int i0, int j0) {
    _tile_loadd(4, A3[a] + i0 * K, K * 2);
    _tile_loadd(5, A3[a] + (i0 + 16) * K, K * 2);
    _tile_loadd(6, B3[b] + j0 * 2, N * 4);
    _tile_loadd(7, B3[b] + (j0 + 16) * 2, N * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
}

// parts = 1, 3 or 6: the products of the parts, smallest first
__attribute__((target("amx-tile,amx-bf16"))) static void amx_block(int parts) {
    static const int order[6][2] = {{2, 0}, {1, 1}, {0, 2}, {1, 0}, {0, 1}, {0, 0}};
    const int first = parts == 6 ? 0 : parts == 3 ? 3 : 5;
    for (int i0 = 0; i0 < M; i0 += 32)
        for (int j0 = 0; j0 < N; j0 += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int p = first; p < 6; p++) dp(order[p][0], order[p][1], i0, j0);
            _tile_stored(0, C + i0 * N + j0, N * 4);
            _tile_stored(1, C + i0 * N + j0 + 16, N * 4);
            _tile_stored(2, C + (i0 + 16) * N + j0, N * 4);
            _tile_stored(3, C + (i0 + 16) * N + j0 + 16, N * 4);
        }
}

__attribute__((target("amx-tile"))) static void tiles_on(void) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
    __asm__ volatile("" : : "r"(&c) : "memory");  // GCC 12's ldtilecfg operand does not keep these stores
    _tile_loadconfig(&c);
}

__attribute__((target("amx-tile"))) static void tiles_off(void) { _tile_release(); }

// x (n floats, n a multiple of 16) into three bf16 parts (two when l is NULL), vectorised (round to
// nearest even)
__attribute__((target("avx512f,avx512bf16"))) static void split3(uint16_t *h, uint16_t *m, uint16_t *l, const float *x,
                                                                int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m256bh a = _mm512_cvtneps_pbh(v);
        const __m512 r1 = _mm512_sub_ps(v, _mm512_cvtpbh_ps(a));
        const __m256bh b = _mm512_cvtneps_pbh(r1);
        const __m512 r2 = _mm512_sub_ps(r1, _mm512_cvtpbh_ps(b));
        memcpy(h + i, &a, 32), memcpy(m + i, &b, 32);
        if (l) {
            const __m256bh c = _mm512_cvtneps_pbh(r2);
            memcpy(l + i, &c, 32);
        }
    }
}


// ---- the blocks of one attention pass: every product and operand conversion per 96 x 96 block ----
// fp32 side, as kernels/cpu/attention.c does them (operands packed once per head, not timed):
// forward S^T = K Q^T, O += P V; backward S, dP = dO V^T, dV += P^T dO, dK += dS^T Q, dS packed,
// dQ += dS K. AMX side (three-part splits, then two-part): the per-head operands split once (not timed) into the
// layouts the tile unit takes; per block the score-sized operands split (P forward; P^T, dS, dS^T
// backward, the transposed ones transposed first) and the same products. The elementwise passes
// (softmax, dS) are the same on both sides and left out. Checked: each AMX product against the fp32
// kernel's on the same block.
#define BQ 96  // queries (and keys) per block
#define HD 32  // head_dim
typedef struct { uint16_t *p[3]; int ld; } parts;  // three bf16 parts, row stride ld elements
static int g_products = 6;  // the pipeline's: 6 (three-part splits) or 3 (two-part: the third part unused)

static parts parts_alloc(int64_t n, int ld) {
    parts x;
    for (int i = 0; i < 3; i++) x.p[i] = aligned_alloc(64, (size_t)((n * 2 + 63) / 64 * 64));
    x.ld = ld;
    return x;
}

// X[rows][cols] (ld) as A parts [rows][cols]: vectorised, cols a multiple of 16
__attribute__((target("avx512f,avx512bf16"))) static void split_rows(parts *a, const float *X, int ld, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        split3(a->p[0] + r * a->ld, a->p[1] + r * a->ld, g_products == 6 ? a->p[2] + r * a->ld : NULL, X + r * ld, cols);
}

// X[K][N] (ld) as B parts in pairs of rows [K/2][N][2] (scalar: per-head operands, not timed)
static void split_pairs(parts *b, const float *X, int ld, int K2, int N2) {
    for (int k = 0; k < K2; k++)
        for (int j = 0; j < N2; j++) {
            float r = X[k * ld + j];
            for (int p = 0; p < 3; p++) {
                const uint16_t h = to_bf16(r);
                b->p[p][(k / 2) * b->ld + j * 2 + (k & 1)] = h;
                r -= from_bf16(h);
            }
        }
}

// C[rows][cols] (ldc) (+)= A parts [rows][Kd] times B parts [Kd/2][cols][2]; rows, cols multiples of 32, Kd of 32
__attribute__((target("amx-tile,amx-bf16"))) static void amx_product(const parts *A, const parts *B, int rows, int cols, int Kd,
                                                                     float *Cm, int ldc, int accumulate) {
    static const int order[6][2] = {{2, 0}, {1, 1}, {0, 2}, {1, 0}, {0, 1}, {0, 0}};
    const int first = 6 - g_products;
    for (int i0 = 0; i0 < rows; i0 += 32)
        for (int j0 = 0; j0 < cols; j0 += 32) {
            float *c = Cm + i0 * ldc + j0;
            if (accumulate) {
                _tile_loadd(0, c, ldc * 4);
                _tile_loadd(1, c + 16, ldc * 4);
                _tile_loadd(2, c + 16 * ldc, ldc * 4);
                _tile_loadd(3, c + 16 * ldc + 16, ldc * 4);
            } else {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
            }
            for (int k0 = 0; k0 < Kd; k0 += 32)
                for (int o = first; o < 6; o++) {
                    const uint16_t *a = A->p[order[o][0]] + i0 * A->ld + k0, *b = B->p[order[o][1]] + (k0 / 2) * B->ld + j0 * 2;
                    _tile_loadd(4, a, A->ld * 2);
                    _tile_loadd(5, a + 16 * A->ld, A->ld * 2);
                    _tile_loadd(6, b, B->ld * 2);
                    _tile_loadd(7, b + 32, B->ld * 2);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
            _tile_stored(0, c, ldc * 4);
            _tile_stored(1, c + 16, ldc * 4);
            _tile_stored(2, c + 16 * ldc, ldc * 4);
            _tile_stored(3, c + 16 * ldc + 16, ldc * 4);
        }
}

// dst[j][i] = src[i][j], n x n (n a multiple of 16), 16 x 16 blocks in registers
__attribute__((target("avx512f"))) static void transpose_sq(float *dst, const float *src, int n) {
    for (int i0 = 0; i0 < n; i0 += 16)
        for (int j0 = 0; j0 < n; j0 += 16) {
            __m512 r[16], t[16], u[16];
            for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + (i0 + i) * n + j0);
            for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            for (int i = 0; i < 16; i += 4) {
                u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
                u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
            }
            for (int c = 0; c < 4; c++) {
                const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
                const __m512 v2 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD), v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
                r[c] = _mm512_shuffle_f32x4(v0, v1, 0x88), r[c + 8] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
                r[c + 4] = _mm512_shuffle_f32x4(v2, v3, 0x88), r[c + 12] = _mm512_shuffle_f32x4(v2, v3, 0xDD);
            }
            for (int j = 0; j < 16; j++) _mm512_storeu_ps(dst + (j0 + j) * n + i0, r[j]);
        }
}

static double maxdiff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void pipeline(int reps) {
    zt_rng rng;
    zt_rng_seed(&rng, 11);
    static float Q[BQ * HD], Kk[BQ * HD], V[BQ * HD], dO[BQ * HD], P[BQ * BQ], dS[BQ * BQ], PT[BQ * BQ], dST[BQ * BQ];
    for (int i = 0; i < BQ * HD; i++) Q[i] = (float)zt_rng_normal(&rng), Kk[i] = (float)zt_rng_normal(&rng);
    for (int i = 0; i < BQ * HD; i++) V[i] = (float)zt_rng_normal(&rng), dO[i] = (float)zt_rng_normal(&rng);
    for (int i = 0; i < BQ * BQ; i++) P[i] = (float)zt_rng_uniform(&rng) / 32, dS[i] = (float)zt_rng_normal(&rng) / 32;
    const float scale = 0.17677669f;
    transpose_sq(PT, P, BQ);
    // fp32 side: the packed per-head operands (attention.c's)
    const int64_t na = cpu_sgemm_packed_floats('A', BQ, HD), nb = cpu_sgemm_packed_floats('B', BQ, HD);
    const int64_t nbd = cpu_sgemm_packed_floats('B', HD, BQ), npa = cpu_sgemm_packed_floats('A', BQ, BQ);
    float *pk = zt_xmalloc((size_t)na * 4), *pq = zt_xmalloc((size_t)nb * 4), *pv = zt_xmalloc((size_t)nbd * 4);
    float *qa = zt_xmalloc((size_t)na * 4), *oa = zt_xmalloc((size_t)na * 4), *kt = zt_xmalloc((size_t)nb * 4);
    float *vt = zt_xmalloc((size_t)nb * 4), *ob = zt_xmalloc((size_t)nbd * 4), *qb = zt_xmalloc((size_t)nbd * 4);
    float *kb = zt_xmalloc((size_t)nbd * 4), *pds = zt_xmalloc((size_t)npa * 4);
    cpu_sgemm_pack_a(pk, 0, Kk, HD, BQ, HD), cpu_sgemm_pack_b(pq, 1, Q, HD, HD, BQ), cpu_sgemm_pack_b(pv, 0, V, HD, BQ, HD);
    cpu_sgemm_pack_a(qa, 0, Q, HD, BQ, HD), cpu_sgemm_pack_a(oa, 0, dO, HD, BQ, HD), cpu_sgemm_pack_b(kt, 1, Kk, HD, HD, BQ);
    cpu_sgemm_pack_b(vt, 1, V, HD, HD, BQ), cpu_sgemm_pack_b(ob, 0, dO, HD, BQ, HD), cpu_sgemm_pack_b(qb, 0, Q, HD, BQ, HD);
    cpu_sgemm_pack_b(kb, 0, Kk, HD, BQ, HD);
    static float S1[BQ * BQ], O1[BQ * HD], dP1[BQ * BQ], dV1[BQ * HD], dK1[BQ * HD], dQ1[BQ * HD];
    static float S2[BQ * BQ], O2[BQ * HD], dP2[BQ * BQ], dV2[BQ * HD], dK2[BQ * HD], dQ2[BQ * HD];
    double t0 = zt_now();
    for (int r = 0; r < reps; r++) {
        cpu_sgemm_packed(BQ, BQ, HD, scale, pk, pq, 0.0f, S1, BQ);       // S^T = K Q^T
        cpu_sgemm_packed_at(BQ, HD, BQ, 1.0f, PT, BQ, pv, r > 0, O1, HD);  // O += P V (P^T, as forward's S^T, in place)
    }
    const double f_fwd = (zt_now() - t0) / reps;
    t0 = zt_now();
    for (int r = 0; r < reps; r++) {
        cpu_sgemm_packed(BQ, BQ, HD, scale, qa, kt, 0.0f, S1, BQ);        // S
        cpu_sgemm_packed(BQ, BQ, HD, 1.0f, oa, vt, 0.0f, dP1, BQ);        // dP = dO V^T
        cpu_sgemm_packed_at(BQ, HD, BQ, 1.0f, P, BQ, ob, r > 0, dV1, HD);  // dV += P^T dO
        cpu_sgemm_packed_at(BQ, HD, BQ, 1.0f, dS, BQ, qb, r > 0, dK1, HD); // dK += dS^T Q
        cpu_sgemm_pack_a(pds, 0, dS, BQ, BQ, BQ);
        cpu_sgemm_packed(BQ, HD, BQ, 1.0f, pds, kb, r > 0, dQ1, HD);       // dQ += dS K
    }
    const double f_bwd = (zt_now() - t0) / reps;
    for (int variant = 0; variant < 2; variant++) {
    g_products = variant == 0 ? 6 : 3;
    // AMX side: per-head operands split once
        parts aQ = parts_alloc(BQ * HD, HD), adO = parts_alloc(BQ * HD, HD), bKT = parts_alloc(HD * BQ, 2 * BQ);
        parts bVT = parts_alloc(HD * BQ, 2 * BQ), bV = parts_alloc(BQ * HD, 2 * HD), bdO = parts_alloc(BQ * HD, 2 * HD);
        parts bQ = parts_alloc(BQ * HD, 2 * HD), bK = parts_alloc(BQ * HD, 2 * HD);
        parts aP = parts_alloc(BQ * BQ, BQ), aPT = parts_alloc(BQ * BQ, BQ), adS = parts_alloc(BQ * BQ, BQ), adST = parts_alloc(BQ * BQ, BQ);
        static float KT[HD * BQ], VT[HD * BQ];
        for (int i = 0; i < BQ; i++)
            for (int d = 0; d < HD; d++) KT[d * BQ + i] = Kk[i * HD + d], VT[d * BQ + i] = V[i * HD + d];
        split_rows(&aQ, Q, HD, BQ, HD), split_rows(&adO, dO, HD, BQ, HD);
        split_pairs(&bKT, KT, BQ, HD, BQ), split_pairs(&bVT, VT, BQ, HD, BQ);
        split_pairs(&bV, V, HD, BQ, HD), split_pairs(&bdO, dO, HD, BQ, HD), split_pairs(&bQ, Q, HD, BQ, HD), split_pairs(&bK, Kk, HD, BQ, HD);
        tiles_on();
        t0 = zt_now();
        for (int r = 0; r < reps; r++) {
            amx_product(&aQ, &bKT, BQ, BQ, HD, S2, BQ, 0);  // S = Q K^T (scaled with the softmax pass)
            split_rows(&aP, P, BQ, BQ, BQ);
            amx_product(&aP, &bV, BQ, HD, BQ, O2, HD, r > 0);  // O += P V
        }
        const double a_fwd = (zt_now() - t0) / reps;
        t0 = zt_now();
        for (int r = 0; r < reps; r++) {
            amx_product(&aQ, &bKT, BQ, BQ, HD, S2, BQ, 0);   // S
            amx_product(&adO, &bVT, BQ, BQ, HD, dP2, BQ, 0); // dP
            transpose_sq(PT, P, BQ);
            split_rows(&aPT, PT, BQ, BQ, BQ);
            amx_product(&aPT, &bdO, BQ, HD, BQ, dV2, HD, r > 0);  // dV += P^T dO
            transpose_sq(dST, dS, BQ);
            split_rows(&adST, dST, BQ, BQ, BQ);
            amx_product(&adST, &bQ, BQ, HD, BQ, dK2, HD, r > 0);  // dK += dS^T Q
            split_rows(&adS, dS, BQ, BQ, BQ);
            amx_product(&adS, &bK, BQ, HD, BQ, dQ2, HD, r > 0);   // dQ += dS K
        }
        const double a_bwd = (zt_now() - t0) / reps;
        tiles_off();
        // the same products once more, alone, to compare (the loops above accumulate reps times)
        cpu_sgemm_packed_at(BQ, HD, BQ, 1.0f, PT, BQ, pv, 0.0f, O1, HD);
        cpu_sgemm_packed_at(BQ, HD, BQ, 1.0f, P, BQ, ob, 0.0f, dV1, HD);
        cpu_sgemm_packed_at(BQ, HD, BQ, 1.0f, dS, BQ, qb, 0.0f, dK1, HD);
        cpu_sgemm_packed(BQ, HD, BQ, 1.0f, pds, kb, 0.0f, dQ1, HD);
        tiles_on();
        amx_product(&aP, &bV, BQ, HD, BQ, O2, HD, 0);
        amx_product(&aPT, &bdO, BQ, HD, BQ, dV2, HD, 0);
        amx_product(&adST, &bQ, BQ, HD, BQ, dK2, HD, 0);
        amx_product(&adS, &bK, BQ, HD, BQ, dQ2, HD, 0);
        tiles_off();
        cpu_sgemm_packed(BQ, BQ, HD, 1.0f, qa, kt, 0.0f, S1, BQ);
        printf("\none 96 x 96 block of attention at head_dim 32, its products and operand conversions (not the softmax / dS\n"
               "passes), AMX with %s-part splits (%d tile products per product):\n", g_products == 6 ? "three" : "two", g_products);
        printf("  largest |AMX - fp32 kernel|: S %.1e, dP %.1e, O %.1e, dV %.1e, dK %.1e, dQ %.1e\n", maxdiff(S1, S2, BQ * BQ),
               maxdiff(dP1, dP2, BQ * BQ), maxdiff(O1, O2, BQ * HD), maxdiff(dV1, dV2, BQ * HD), maxdiff(dK1, dK2, BQ * HD),
               maxdiff(dQ1, dQ2, BQ * HD));
        printf("  forward:  fp32 kernel %.3f us, AMX with P split %.3f us (%.2fx)\n", f_fwd * 1e6, a_fwd * 1e6, f_fwd / a_fwd);
        printf("  backward: fp32 kernel %.3f us (incl. dS packed), AMX with P^T, dS^T transposed and P^T, dS, dS^T split %.3f us (%.2fx)\n",
               f_bwd * 1e6, a_bwd * 1e6, f_bwd / a_bwd);
        printf("  both:     %.3f us against %.3f us (%.2fx)\n", f_fwd * 1e6 + f_bwd * 1e6, a_fwd * 1e6 + a_bwd * 1e6,
               (f_fwd + f_bwd) / (a_fwd + a_bwd));
        parts *all[] = {&aQ, &adO, &bKT, &bVT, &bV, &bdO, &bQ, &bK, &aP, &aPT, &adS, &adST};
        for (int i = 0; i < 12; i++)
            for (int p = 0; p < 3; p++) free(all[i]->p[p]);
    }
    free(pk), free(pq), free(pv), free(qa), free(oa), free(kt), free(vt), free(ob), free(qb), free(kb), free(pds);
}

static int cpu_has(unsigned bit_edx_leaf7, unsigned bit_eax_leaf7_1) {
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    const int edx_ok = (d >> bit_edx_leaf7) & 1u;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
    return edx_ok && ((a >> bit_eax_leaf7_1) & 1u);
}

int main(int argc, char **argv) {
    int reps = 200000;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else zt_fatal("unknown argument %s (see the head of benchmarks/amx_split_probe.c)", argv[i]);
    // AMX-TILE (leaf 7 EDX bit 24), AMX-BF16 (bit 22), AVX512-BF16 (leaf 7 subleaf 1 EAX bit 5)
    if (!cpu_has(24, 5) || !cpu_has(22, 5)) {
        printf("skipped: this CPU has no AMX-BF16 or AVX512-BF16\n");
        return 77;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        printf("skipped: the kernel refuses AMX tile data to this process\n");
        return 77;
    }
    zt_rng rng;
    zt_rng_seed(&rng, 3);
    static float A[M * K], B[K * N], Cf[M * N], P[M * N];
    for (int i = 0; i < M * K; i++) A[i] = (float)zt_rng_normal(&rng);
    for (int i = 0; i < K * N; i++) B[i] = (float)zt_rng_normal(&rng);
    for (int i = 0; i < M * N; i++) P[i] = (float)zt_rng_uniform(&rng);
    for (int i = 0; i < M * K; i++) {
        float r = A[i];
        for (int p = 0; p < 3; p++) A3[p][i] = to_bf16(r), r -= from_bf16(A3[p][i]);
    }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) {
            const int at = (k / 2) * N * 2 + j * 2 + (k & 1);
            float r = B[k * N + j];
            for (int p = 0; p < 3; p++) B3[p][at] = to_bf16(r), r -= from_bf16(B3[p][at]);
        }
    double ref[M * N], maxref = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double d = 0;
            for (int k = 0; k < K; k++) d += (double)A[i * K + k] * B[k * N + j];
            ref[i * N + j] = d, maxref = fmax(maxref, fabs(d));
        }
    const double flop = 2.0 * M * N * K;

    float *pa = zt_xmalloc((size_t)cpu_sgemm_packed_floats('A', M, K) * 4), *pb = zt_xmalloc((size_t)cpu_sgemm_packed_floats('B', N, K) * 4);
    cpu_sgemm_pack_a(pa, 0, A, K, M, K);
    cpu_sgemm_pack_b(pb, 0, B, N, K, N);
    double t0 = zt_now();
    for (int r = 0; r < reps; r++) cpu_sgemm_packed(M, N, K, 1.0f, pa, pb, 0.0f, Cf, N);
    const double tf = (zt_now() - t0) / reps;
    double ef = 0;
    for (int i = 0; i < M * N; i++) ef = fmax(ef, fabs(Cf[i] - ref[i]));
    printf("block %d x %d x %d, max |C| %.1f, times the mean of %d repetitions, one thread\n", M, N, K, maxref, reps);
    printf("fp32 sgemm kernel (%s): %.3f us (%.0f GFLOP/s), max abs error %.2e\n", cpu_sgemm_isa(), tf * 1e6, flop / tf * 1e-9, ef);
    tiles_on();
    const int parts[3] = {1, 3, 6};
    for (int x = 0; x < 3; x++) {
        t0 = zt_now();
        for (int r = 0; r < reps; r++) amx_block(parts[x]);
        const double t = (zt_now() - t0) / reps;
        double e = 0;
        for (int i = 0; i < M * N; i++) e = fmax(e, fabs(C[i] - ref[i]));
        printf("AMX bf16, %d tile product%s: %.3f us (%.0f GFLOP/s, %.2fx the fp32 kernel), max abs error %.2e\n",
               parts[x], parts[x] > 1 ? "s" : "", t * 1e6, flop / t * 1e-9, tf / t, e);
    }
    tiles_off();
    static uint16_t h[M * N], m[M * N], l[M * N];
    t0 = zt_now();
    for (int r = 0; r < reps; r++) {
        split3(h, m, l, P, M * N);
        __asm__ volatile("" : : "r"(h), "r"(m), "r"(l) : "memory");
    }
    const double ts = (zt_now() - t0) / reps;
    printf("splitting a %d x %d fp32 block into three bf16 parts: %.3f us\n", M, N, ts * 1e6);
    pipeline(reps / 4 > 0 ? reps / 4 : 1);
    free(pa), free(pb);
    return 0;
}
