// The CPU backend's matrix product: C = alpha op(A) op(B) + beta C, row-major, with one
// rounding order on every CPU and at every shape. Each element's K products are summed by
// fused multiply-adds in the order k = 0, 1, ..., K-1 into one fp32 accumulator that starts
// at +0; then t = alpha * acc (skipped when alpha == 1) and C = t (beta == 0: C is not
// read), t + C (beta == 1) or t + beta * C. That is exactly
//     acc = 0; for (k = 0; k < K; k++) acc = fmaf(opA[i][k], opB[k][j], acc);
// so the AVX-512 kernel, the AVX2 kernel and the portable C kernel give the same bits, on
// any machine, whatever the blocking, the thread count or the product's shape (a sub-block
// of a product has the values of the whole; tests/unit/test_gemm.c holds all of it to the
// loop above bit for bit). OpenBLAS, which this replaced, rounds differently per kernel
// (its pinned OPENBLAS_CORETYPE) and per shape.
//
// Layout (BLIS-style): op(B) is packed K x NC at a time into panels of NR columns
// (pb[k * NR + c]), op(A) MC x K at a time into panels of MR rows (pa[k * MR + r]), both
// padded with zeros (padding reaches only rows and columns that are never stored); the
// micro-kernel keeps an MR x NR tile of accumulators in registers over K. A long K (more than
// GEMM_KC_MIN) is cut into equal blocks of at most GEMM_KC: between blocks a tile's accumulators go to a scratch
// tile as they are (an fp32 store and load change no bit) and the next block's kernel starts
// from them, so each element is still the one chain of fused multiply-adds over k = 0..K-1 and
// the alpha/beta epilogue runs once, after the last block (the panels of a 12 x 32 tile over
// K = 8,192 are 1.4 MiB, past L2: 45 GFLOP/s against 123-160 at K <= 2,048 on this VM). Outside an OpenMP parallel region the
// packing and the tiles are shared among the threads (each tile by one thread, so the
// values do not depend on the thread count); inside one (attention's per-head loop) a call
// runs on its own thread. Packing buffers are kept per thread and reused; the AVX-512 and
// AVX2 packers transpose 16 x 16 / 8 x 8 blocks in registers where a panel crosses the
// source's rows (the portable packer is scalar).
// defines: cpu_sgemm, cpu_sgemm_isa, cpu_sgemm_isa_id, cpu_sgemm_set_isa, cpu_sgemm_pack_a, cpu_sgemm_pack_b,
//          cpu_sgemm_packed, cpu_sgemm_packed_at, cpu_sgemm_packed_floats, cpu_sgemm_nr, zt_cpu_gemm_kernel
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/env.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/ops.h"

#ifdef _OPENMP
#include <omp.h>
#else
static int omp_get_level(void) { return 0; }
static int omp_get_max_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
static int omp_get_num_threads(void) { return 1; }
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZT_GEMM_X86 1
#endif

// pa[k * aks + r], pb[k * bks + c]: aks = MR and bks = NR for packed panels; a row stride for an
// operand read in place (cpu_sgemm_packed_at). acc_in: NULL, or a whole MR x NR tile (row stride NR)
// the accumulators start from in place of +0; acc_out: NULL (the epilogue into C), or the tile the
// accumulators are stored to as they are (C untouched): the blocks of a K cut into pieces.
typedef void (*gemm_kernel)(int64_t K, const float *pa, int64_t aks, const float *pb, int64_t bks, float *C,
                            int64_t ldc, int mr, int nr, float alpha, float beta, const float *acc_in, float *acc_out);

// pack_a: rows [i0, i0 + rows) of op(A), all of K, into one panel of MR rows (pa[k * MR + r]);
// pack_b: columns [j0, j0 + cols) of op(B) into one panel of NR columns (pb[k * NR + c]); both
// write zeros where rows or columns are missing.
typedef void (*gemm_pack)(float *dst, int trans, const float *X, int64_t ld, int64_t first, int64_t count, int64_t K,
                          int width);

typedef struct {
    const char *name;
    int MR, NR;
    gemm_kernel kern;
    gemm_pack pack_a, pack_b;
} gemm_isa;

// alpha/beta epilogue of one element (the reference's exact operations)
static inline float epilogue(float acc, float alpha, float beta, const float *c) {
    const float t = alpha == 1.0f ? acc : alpha * acc;
    if (beta == 0.0f) return t;
    return beta == 1.0f ? t + *c : t + beta * *c;
}

// ---- portable C: 4 x 8 ------------------------------------------------------------------
static void kern_generic(int64_t K, const float *pa, int64_t aks, const float *pb, int64_t bks, float *C, int64_t ldc,
                         int mr, int nr, float alpha, float beta, const float *acc_in, float *acc_out) {
    float acc[4][8];
    if (acc_in) memcpy(acc, acc_in, sizeof acc);
    else memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < K; k++) {
        const float *a = pa + k * aks, *b = pb + k * bks;
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 8; c++) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    if (acc_out) {
        memcpy(acc_out, acc, sizeof acc);
        return;
    }
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++) C[r * ldc + c] = epilogue(acc[r][c], alpha, beta, &C[r * ldc + c]);
}

#ifdef ZT_GEMM_X86
// The accumulators are named variables, not an array: gcc keeps an array of vectors in
// memory across the loop (a store per multiply-add), named ones in registers.
#define ZT_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define ZT_ROWS12(X) ZT_ROWS6(X) X(6) X(7) X(8) X(9) X(10) X(11)

// Lane masks of the first n of 8 (AVX2) or 16 (AVX-512) floats, for the edges of C and of
// the packed panels.
__attribute__((target("avx2,fma"))) static inline __m256i lanes8(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __mmask16 lanes16(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u); }

// ---- AVX2 + FMA: 6 x 16 (12 ymm accumulators) ---------------------------------------------
__attribute__((target("avx2,fma"))) static void store_avx2(float *c, __m256 t, int n, float alpha, float beta) {
    if (n <= 0) return;
    if (alpha != 1.0f) t = _mm256_mul_ps(_mm256_set1_ps(alpha), t);
    if (n >= 8) {
        if (beta != 0.0f)
            t = _mm256_add_ps(t, beta == 1.0f ? _mm256_loadu_ps(c)
                                              : _mm256_mul_ps(_mm256_set1_ps(beta), _mm256_loadu_ps(c)));
        _mm256_storeu_ps(c, t);
    } else {
        const __m256i m = lanes8(n);
        if (beta != 0.0f) {
            const __m256 old = _mm256_maskload_ps(c, m);
            t = _mm256_add_ps(t, beta == 1.0f ? old : _mm256_mul_ps(_mm256_set1_ps(beta), old));
        }
        _mm256_maskstore_ps(c, m, t);
    }
}

__attribute__((target("avx2,fma"))) static void kern_avx2(int64_t K, const float *pa, int64_t aks, const float *pb,
                                                            int64_t bks, float *C, int64_t ldc, int mr, int nr,
                                                            float alpha, float beta, const float *acc_in,
                                                            float *acc_out) {
#define ZT_DECL(r)                                                                                  \
    __m256 c##r##0 = acc_in ? _mm256_loadu_ps(acc_in + r * 16) : _mm256_setzero_ps(),               \
           c##r##1 = acc_in ? _mm256_loadu_ps(acc_in + r * 16 + 8) : _mm256_setzero_ps();
    ZT_ROWS6(ZT_DECL)
#undef ZT_DECL
    for (int64_t k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(pb + k * bks), b1 = _mm256_loadu_ps(pb + k * bks + 8);
        const float *a = pa + k * aks;
#define ZT_FMA(r)                                             \
    {                                                         \
        const __m256 ar = _mm256_broadcast_ss(a + r);         \
        c##r##0 = _mm256_fmadd_ps(ar, b0, c##r##0);           \
        c##r##1 = _mm256_fmadd_ps(ar, b1, c##r##1);           \
    }
        ZT_ROWS6(ZT_FMA)
#undef ZT_FMA
    }
    if (acc_out) {
#define ZT_KEEP(r) _mm256_storeu_ps(acc_out + r * 16, c##r##0), _mm256_storeu_ps(acc_out + r * 16 + 8, c##r##1);
        ZT_ROWS6(ZT_KEEP)
#undef ZT_KEEP
        return;
    }
#define ZT_STORE(r)                                                   \
    if (r < mr) {                                                     \
        store_avx2(C + r * ldc, c##r##0, nr, alpha, beta);            \
        store_avx2(C + r * ldc + 8, c##r##1, nr - 8, alpha, beta);    \
    }
    ZT_ROWS6(ZT_STORE)
#undef ZT_STORE
}

// ---- AVX-512: 12 x 32 (24 zmm accumulators) -----------------------------------------------
__attribute__((target("avx512f"))) static void store_avx512(float *c, __m512 t, int n, float alpha, float beta) {
    if (n <= 0) return;
    const __mmask16 m = lanes16(n);
    if (alpha != 1.0f) t = _mm512_mul_ps(_mm512_set1_ps(alpha), t);
    if (beta != 0.0f) {
        const __m512 old = _mm512_maskz_loadu_ps(m, c);
        t = _mm512_add_ps(t, beta == 1.0f ? old : _mm512_mul_ps(_mm512_set1_ps(beta), old));
    }
    _mm512_mask_storeu_ps(c, m, t);
}

__attribute__((target("avx512f"))) static void kern_avx512(int64_t K, const float *pa, int64_t aks, const float *pb,
                                                             int64_t bks, float *C, int64_t ldc, int mr, int nr,
                                                             float alpha, float beta, const float *acc_in,
                                                             float *acc_out) {
#define ZT_DECL(r)                                                                                  \
    __m512 c##r##0 = acc_in ? _mm512_loadu_ps(acc_in + r * 32) : _mm512_setzero_ps(),               \
           c##r##1 = acc_in ? _mm512_loadu_ps(acc_in + r * 32 + 16) : _mm512_setzero_ps();
    ZT_ROWS12(ZT_DECL)
#undef ZT_DECL
    for (int64_t k = 0; k < K; k++) {
        const __m512 b0 = _mm512_loadu_ps(pb + k * bks), b1 = _mm512_loadu_ps(pb + k * bks + 16);
        const float *a = pa + k * aks;
#define ZT_FMA(r)                                             \
    {                                                         \
        const __m512 ar = _mm512_set1_ps(a[r]);               \
        c##r##0 = _mm512_fmadd_ps(ar, b0, c##r##0);           \
        c##r##1 = _mm512_fmadd_ps(ar, b1, c##r##1);           \
    }
        ZT_ROWS12(ZT_FMA)
#undef ZT_FMA
    }
    if (acc_out) {
#define ZT_KEEP(r) _mm512_storeu_ps(acc_out + r * 32, c##r##0), _mm512_storeu_ps(acc_out + r * 32 + 16, c##r##1);
        ZT_ROWS12(ZT_KEEP)
#undef ZT_KEEP
        return;
    }
    if (mr == 12 && nr == 32 && alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {  // a whole tile, the usual case
#define ZT_STORE(r)                                                                                          \
    _mm512_storeu_ps(C + r * ldc, beta == 0.0f ? c##r##0 : _mm512_add_ps(c##r##0, _mm512_loadu_ps(C + r * ldc)));  \
    _mm512_storeu_ps(C + r * ldc + 16,                                                                       \
                     beta == 0.0f ? c##r##1 : _mm512_add_ps(c##r##1, _mm512_loadu_ps(C + r * ldc + 16)));
        ZT_ROWS12(ZT_STORE)
#undef ZT_STORE
        return;
    }
    if (mr == 12 && nr == 32 && beta == 0.0f) {  // a whole tile scaled (attention's scores): alpha * t as store_avx512
        const __m512 av = _mm512_set1_ps(alpha);
#define ZT_STORE(r)                                                  \
    _mm512_storeu_ps(C + r * ldc, _mm512_mul_ps(av, c##r##0));       \
    _mm512_storeu_ps(C + r * ldc + 16, _mm512_mul_ps(av, c##r##1));
        ZT_ROWS12(ZT_STORE)
#undef ZT_STORE
        return;
    }
#define ZT_STORE(r)                                                    \
    if (r < mr) {                                                      \
        store_avx512(C + r * ldc, c##r##0, nr, alpha, beta);           \
        store_avx512(C + r * ldc + 16, c##r##1, nr - 16, alpha, beta); \
    }
    ZT_ROWS12(ZT_STORE)
#undef ZT_STORE
}
#endif

// ---- packing ----------------------------------------------------------------------------
// Rows [i0, i0 + mc) of op(A), all of K, into panels of MR rows.
static void pack_a_scalar(float *dst, int tA, const float *A, int64_t lda, int64_t i0, int64_t rows, int64_t K,
                         int MR) {
    if (rows < MR) memset(dst, 0, (size_t)(K * MR) * sizeof(float));
    if (tA) {  // op(A)[i][k] = A[k * lda + i]: MR values contiguous per k
        for (int64_t k = 0; k < K; k++) memcpy(dst + k * MR, A + k * lda + i0, (size_t)rows * sizeof(float));
    } else {
        for (int64_t r = 0; r < rows; r++) {
            const float *src = A + (i0 + r) * lda;
            for (int64_t k = 0; k < K; k++) dst[k * MR + r] = src[k];
        }
    }
}

// Columns [j0, j0 + cols) of op(B), all of K, into one panel of NR columns.
static void pack_b_scalar(float *dst, int tB, const float *B, int64_t ldb, int64_t j0, int64_t cols, int64_t K,
                         int NR) {
    if (cols < NR) memset(dst, 0, (size_t)(K * NR) * sizeof(float));
    if (tB) {  // op(B)[k][j] = B[j * ldb + k]
        for (int64_t c = 0; c < cols; c++) {
            const float *src = B + (j0 + c) * ldb;
            for (int64_t k = 0; k < K; k++) dst[k * NR + c] = src[k];
        }
    } else {
        for (int64_t k = 0; k < K; k++) memcpy(dst + k * NR, B + k * ldb + j0, (size_t)cols * sizeof(float));
    }
}

#ifdef ZT_GEMM_X86
// AVX2 packing: the same with 8 x 8 blocks (MR = 6, NR = 16).
__attribute__((target("avx2,fma"))) static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {  // column c in the low halves of u[c], u[4 + c]; column c + 4 in the high ones
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

// dst[k * width + off + i] = src[i * ld + k] for i < n (0 for n <= i < 8), k < K; `keep` masks the
// lanes stored per k.
__attribute__((target("avx2,fma"))) static void pack_cross8(float *dst, int width, int off, __m256i keep,
                                                              const float *src, int64_t ld, int64_t n, int64_t K) {
    __m256 r[8];
    for (int64_t k0 = 0; k0 < K; k0 += 8) {
        const int64_t nk = K - k0 < 8 ? K - k0 : 8;
        const __m256i mk = lanes8(nk);
        for (int i = 0; i < 8; i++) r[i] = i < n ? _mm256_maskload_ps(src + i * ld + k0, mk) : _mm256_setzero_ps();
        transpose8(r);
        for (int64_t kk = 0; kk < nk; kk++) _mm256_maskstore_ps(dst + (k0 + kk) * width + off, keep, r[kk]);
    }
}

__attribute__((target("avx2,fma"))) static void pack_a_avx2(float *dst, int tA, const float *A, int64_t lda,
                                                              int64_t i0, int64_t rows, int64_t K, int MR) {
    const __m256i keep = lanes8(MR);  // MR = 6
    if (tA) {
        const __m256i m = lanes8(rows);
        for (int64_t k = 0; k < K; k++) _mm256_maskstore_ps(dst + k * MR, keep, _mm256_maskload_ps(A + k * lda + i0, m));
    } else {
        pack_cross8(dst, MR, 0, keep, A + i0 * lda, lda, rows, K);
    }
}

__attribute__((target("avx2,fma"))) static void pack_b_avx2(float *dst, int tB, const float *B, int64_t ldb,
                                                              int64_t j0, int64_t cols, int64_t K, int NR) {
    if (tB) {
        for (int h = 0; h < NR; h += 8) pack_cross8(dst, NR, h, lanes8(8), B + (j0 + h) * ldb, ldb, cols - h, K);
    } else {
        const __m256i m0 = lanes8(cols), m1 = lanes8(cols - 8);  // NR = 16
        for (int64_t k = 0; k < K; k++) {
            const float *src = B + k * ldb + j0;
            _mm256_storeu_ps(dst + k * NR, _mm256_maskload_ps(src, m0));
            _mm256_storeu_ps(dst + k * NR + 8, _mm256_maskload_ps(src + 8, m1));
        }
    }
}

// AVX-512 packing: 16 x 16 blocks transposed in registers where the panel's order crosses the
// source's rows; masked loads stop at the matrix's edge and fill the padding with zeros.
__attribute__((target("avx512f"))) static inline void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: [a0 b0 a1 b1], [a2 b2 a3 b3]
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {  // per lane: [a0 b0 c0 d0], [a1 b1 c1 d1], [a2 ...], [a3 ...]
        u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {  // column c + 4 * lane sits in lane `lane` of u[c], u[4 + c], u[8 + c], u[12 + c]
        const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        const __m512 v2 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD), v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(v0, v1, 0x88);
        r[c + 8] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
        r[c + 4] = _mm512_shuffle_f32x4(v2, v3, 0x88);
        r[c + 12] = _mm512_shuffle_f32x4(v2, v3, 0xDD);
    }
}

// dst[k * width + off + i] = src[i * ld + k] for i < n (0 for n <= i < 16), k < K; `keep` masks the
// lanes stored per k (width 12: the first 12).
__attribute__((target("avx512f"))) static void pack_cross16(float *dst, int width, int off, __mmask16 keep,
                                                              const float *src, int64_t ld, int64_t n, int64_t K) {
    __m512 r[16];
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
        const int64_t nk = K - k0 < 16 ? K - k0 : 16;
        const __mmask16 mk = lanes16(nk);
        for (int i = 0; i < 16; i++) r[i] = i < n ? _mm512_maskz_loadu_ps(mk, src + i * ld + k0) : _mm512_setzero_ps();
        transpose16(r);
        for (int64_t kk = 0; kk < nk; kk++) _mm512_mask_storeu_ps(dst + (k0 + kk) * width + off, keep, r[kk]);
    }
}

__attribute__((target("avx512f"))) static void pack_a_avx512(float *dst, int tA, const float *A, int64_t lda,
                                                               int64_t i0, int64_t rows, int64_t K, int MR) {
    const __mmask16 keep = lanes16(MR);  // MR = 12
    if (tA) {  // op(A)[i][k] = A[k * lda + i]: MR values contiguous per k
        const __mmask16 m = lanes16(rows);
        for (int64_t k = 0; k < K; k++) _mm512_mask_storeu_ps(dst + k * MR, keep, _mm512_maskz_loadu_ps(m, A + k * lda + i0));
    } else {
        pack_cross16(dst, MR, 0, keep, A + i0 * lda, lda, rows, K);
    }
}

__attribute__((target("avx512f"))) static void pack_b_avx512(float *dst, int tB, const float *B, int64_t ldb,
                                                               int64_t j0, int64_t cols, int64_t K, int NR) {
    if (tB) {  // op(B)[k][j] = B[j * ldb + k]: 16 columns at a time
        for (int h = 0; h < NR; h += 16)
            pack_cross16(dst, NR, h, 0xFFFF, B + (j0 + h) * ldb, ldb, cols - h, K);
    } else {
        const __mmask16 m0 = lanes16(cols), m1 = lanes16(cols - 16);  // NR = 32
        for (int64_t k = 0; k < K; k++) {
            const float *src = B + k * ldb + j0;
            _mm512_storeu_ps(dst + k * NR, _mm512_maskz_loadu_ps(m0, src));
            _mm512_storeu_ps(dst + k * NR + 16, _mm512_maskz_loadu_ps(m1, src + 16));
        }
    }
}
#endif

static const gemm_isa isa_generic = {"portable C", 4, 8, kern_generic, pack_a_scalar, pack_b_scalar};
#ifdef ZT_GEMM_X86
static const gemm_isa isa_avx2 = {"AVX2", 6, 16, kern_avx2, pack_a_avx2, pack_b_avx2};
static const gemm_isa isa_avx512 = {"AVX-512", 12, 32, kern_avx512, pack_a_avx512, pack_b_avx512};
#endif

static const gemm_isa *g_isa;  // NULL after init: ZT_CPU_GEMM names no kernel this CPU runs
static pthread_once_t g_isa_once = PTHREAD_ONCE_INIT;

static const gemm_isa *isa_by_name(const char *s) {
    if (!strcmp(s, "generic")) return &isa_generic;
#ifdef ZT_GEMM_X86
    if (!strcmp(s, "avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &isa_avx2;
    if (!strcmp(s, "avx512") && __builtin_cpu_supports("avx512f")) return &isa_avx512;
#endif
    return NULL;
}

// The widest kernel the CPU runs; ZT_CPU_GEMM=generic|avx2|avx512 picks a narrower one (the
// values are the same: tests run all three and compare).
static void isa_init(void) {
#ifdef ZT_GEMM_X86
    __builtin_cpu_init();
#endif
    const char *env = zt_env_str(ZT_ENV_CPU_GEMM);
    if (env && *env) {
        g_isa = isa_by_name(env);
        return;
    }
    g_isa = &isa_generic;
#ifdef ZT_GEMM_X86
    if (__builtin_cpu_supports("avx512f"))
        g_isa = &isa_avx512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        g_isa = &isa_avx2;
#endif
}

static const char *bad_env(void) {
    zt_err("ZT_CPU_GEMM=%s: not one of generic, avx2, avx512 that this CPU runs", zt_env_str(ZT_ENV_CPU_GEMM));
    return NULL;
}

static const gemm_isa *isa_get(void) {
    pthread_once(&g_isa_once, isa_init);
    if (!g_isa) {  // the trainer refuses this at start (zt_cpu_gemm_kernel); other callers stop here
        bad_env();
        zt_fatal("%s", zt_errmsg());
    }
    return g_isa;
}

const char *cpu_sgemm_isa(void) { return isa_get()->name; }

int cpu_sgemm_isa_id(void) {
    const gemm_isa *i = isa_get();
#ifdef ZT_GEMM_X86
    if (i == &isa_avx512) return CPU_ISA_AVX512;
    if (i == &isa_avx2) return CPU_ISA_AVX2;
#endif
    (void)i;
    return CPU_ISA_GENERIC;
}

const char *zt_cpu_gemm_kernel(void) {
    pthread_once(&g_isa_once, isa_init);
    return g_isa ? g_isa->name : bad_env();
}

int cpu_sgemm_set_isa(const char *name) {
    pthread_once(&g_isa_once, isa_init);
    const gemm_isa *i = isa_by_name(name);
    if (!i) return -1;
    g_isa = i;
    return 0;
}

// ---- packed operands, for products that reuse one (attention's blocks) --------------------
// The same panels and kernel as cpu_sgemm, so the same bits; one thread, no buffer of its own.
int64_t cpu_sgemm_packed_floats(int which, int64_t rows, int64_t K) {
    const gemm_isa *isa = isa_get();
    const int R = which == 'A' ? isa->MR : isa->NR;
    return (rows + R - 1) / R * R * (K > 0 ? K : 0);
}

int cpu_sgemm_nr(void) { return isa_get()->NR; }

void cpu_sgemm_pack_a(float *pa, int tA, const float *A, int64_t lda, int64_t M, int64_t K) {
    const gemm_isa *isa = isa_get();
    for (int64_t i0 = 0; i0 < M; i0 += isa->MR)
        isa->pack_a(pa + i0 * K, tA, A, lda, i0, M - i0 < isa->MR ? M - i0 : isa->MR, K, isa->MR);
}

void cpu_sgemm_pack_b(float *pb, int tB, const float *B, int64_t ldb, int64_t K, int64_t N) {
    const gemm_isa *isa = isa_get();
    for (int64_t j0 = 0; j0 < N; j0 += isa->NR)
        isa->pack_b(pb + j0 * K, tB, B, ldb, j0, N - j0 < isa->NR ? N - j0 : isa->NR, K, isa->NR);
}

void cpu_sgemm_packed(int64_t M, int64_t N, int64_t K, float alpha, const float *pa, const float *pb, float beta, float *C,
                      int64_t ldc) {
    const gemm_isa *isa = isa_get();
    for (int64_t j0 = 0; j0 < N; j0 += isa->NR)
        for (int64_t i0 = 0; i0 < M; i0 += isa->MR)
            isa->kern(K, pa + i0 * K, isa->MR, pb + j0 * K, isa->NR, C + i0 * ldc + j0, ldc,
                      (int)(M - i0 < isa->MR ? M - i0 : isa->MR), (int)(N - j0 < isa->NR ? N - j0 : isa->NR), alpha, beta, NULL, NULL);
}

void cpu_sgemm_packed_at(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *pb,
                         float beta, float *C, int64_t ldc) {
    const gemm_isa *isa = isa_get();
    for (int64_t j0 = 0; j0 < N; j0 += isa->NR)
        for (int64_t i0 = 0; i0 < M; i0 += isa->MR)
            isa->kern(K, A + i0, lda, pb + j0 * K, isa->NR, C + i0 * ldc + j0, ldc,
                      (int)(M - i0 < isa->MR ? M - i0 : isa->MR), (int)(N - j0 < isa->NR ? N - j0 : isa->NR), alpha, beta, NULL, NULL);
}

// A per-thread packing buffer, kept between calls.
static _Thread_local float *tl_buf;
static _Thread_local size_t tl_cap;

static float *pack_buffer(size_t floats) {
    if (floats > tl_cap) {
        free(tl_buf);
        tl_cap = floats + floats / 4;
        void *p = NULL;
        if (posix_memalign(&p, 64, tl_cap * sizeof(float))) zt_fatal("out of memory: %zu bytes of GEMM packing", tl_cap * 4);
        tl_buf = p;
    }
    return tl_buf;
}

// A block of op(A) of ~192 KiB (stays in L2 while B's panels stream past it), op(B) of ~2 MiB.
#define GEMM_A_FLOATS (48 * 1024)
#define GEMM_B_FLOATS (512 * 1024)
// Below this many multiply-adds a call runs on one thread.
#define GEMM_PARALLEL_MIN (1 << 18)
// A K longer than GEMM_KC_MIN is cut into equal blocks of at most GEMM_KC (the panels of one block
// stay in L1/L2); a shorter K runs whole (cutting K = 512 or 1,024 into blocks of 384 cost 10-20%
// at 2 threads). Chosen on this VM's AVX-512 core over 384 / 512 / 768 / 1,024 (docs/benchmarks.md).
#ifndef GEMM_KC
#define GEMM_KC 512
#endif
// K cut: the tiles' accumulators between K's blocks, all of M x nc, at most ~4 MiB (nc shrinks for a tall M).
#define GEMM_ACC_FLOATS (1024 * 1024)
#ifndef GEMM_KC_MIN
#define GEMM_KC_MIN 1536
#endif

typedef struct {
    const gemm_isa *isa;
    int tA, tB;
    int64_t M, N, K, lda, ldb, ldc;
    const float *A, *B;
    float *C, *bufA, *bufB;
    float *acc;  // K cut into blocks: the partial sums of every tile of an (ic, jc) block, tile by tile
    int64_t kc;  // K's block (K itself when it is not cut)
    float alpha, beta;
} gemm_job;

// Part [lo, hi) of n items for thread t of nt.
static void share(int64_t n, int t, int nt, int64_t *lo, int64_t *hi) {
    *lo = n * t / nt;
    *hi = n * (t + 1) / nt;
}

// The AVX2 and AVX-512 kernels can leave the upper halves of the vector registers marked in use
// on the calling thread; every legacy-SSE instruction after that (the baseline x86-64 code of the
// other ops) then carries a false dependency on them. Measured: the Gated DeltaNet's conv1d + SiLU
// right after the projections took 0.36 s instead of 0.011 s on the main thread of a 2-thread
// layer (benchmarks/deltanet_layer_vs_torch.py; the layer 1.01 s -> 0.70 s). Each thread clears
// them when its share of a product is done (no value changes).
#ifdef ZT_GEMM_X86
__attribute__((target("avx"))) static void upper_clear(void) { _mm256_zeroupper(); }
#else
static void upper_clear(void) {}
#endif

// Phases of one (jc, ic) block and one block of K (from pc, kb long); thread t of nt takes its
// share of each, with a barrier after the tiles' phase (and between packing and tiles) when nt > 1.
static void pack_b_phase(const gemm_job *g, int64_t jc, int64_t npan, int64_t pc, int64_t kb, int t, int nt) {
    const int NR = g->isa->NR;
    const float *B = g->tB ? g->B + pc : g->B + pc * g->ldb;
    int64_t lo, hi;
    share(npan, t, nt, &lo, &hi);
    for (int64_t p = lo; p < hi; p++) {
        const int64_t j0 = jc + p * NR, cols = g->N - j0 < NR ? g->N - j0 : NR;
        g->isa->pack_b(g->bufB + p * NR * kb, g->tB, B, g->ldb, j0, cols, kb, NR);
    }
}

static void pack_a_phase(const gemm_job *g, int64_t ic, int64_t mpan, int64_t pc, int64_t kb, int t, int nt) {
    const int MR = g->isa->MR;
    const float *A = g->tA ? g->A + pc * g->lda : g->A + pc;
    int64_t lo, hi;
    share(mpan, t, nt, &lo, &hi);
    for (int64_t p = lo; p < hi; p++) {
        const int64_t i0 = ic + p * MR, rows = g->M - i0 < MR ? g->M - i0 : MR;
        g->isa->pack_a(g->bufA + p * MR * kb, g->tA, A, g->lda, i0, rows, kb, MR);
    }
}

// Every tile of the block: B's panel outer (it stays in L1 over A's panels). K cut into blocks:
// tile (q, p)'s accumulators live at g->acc + (q * apan + a0 + p) * MR * NR between blocks (apan:
// panels of A the scratch holds per panel of B, a0: this block's first), loaded when not the
// first block (first) and stored instead of the epilogue when not the last (last).
static void tiles_phase(const gemm_job *g, int64_t jc, int64_t npan, int64_t ic, int64_t mpan, int64_t kb, int first,
                        int last, int64_t apan, int64_t a0, int t, int nt) {
    const int MR = g->isa->MR, NR = g->isa->NR;
    int64_t lo, hi;
    share(npan * mpan, t, nt, &lo, &hi);
    for (int64_t x = lo; x < hi; x++) {
        const int64_t q = x / mpan, p = x % mpan;
        const int64_t i0 = ic + p * MR, j0 = jc + q * NR;
        const int mr = (int)(g->M - i0 < MR ? g->M - i0 : MR), nr = (int)(g->N - j0 < NR ? g->N - j0 : NR);
        float *acc = g->acc ? g->acc + (q * apan + a0 + p) * MR * NR : NULL;
        g->isa->kern(kb, g->bufA + p * MR * kb, MR, g->bufB + q * NR * kb, NR, g->C + i0 * g->ldc + j0, g->ldc, mr, nr,
                     g->alpha, g->beta, first ? NULL : acc, last ? NULL : acc);
    }
}

static inline void phase_end(int nt) {
    if (nt > 1) {
#pragma omp barrier
    }
}

// K whole: for each (jc, ic) block, op(B)'s panels (packed once per jc, at ic == 0), op(A)'s, every tile.
// K cut into blocks: for each jc and each block of K, op(B)'s panels once, then for each ic op(A)'s
// panels and every tile, whose accumulators wait in g->acc (all of M's tiles for this jc) for the
// next block of K: so each block of op(B) is packed once, not once per ic (it was: 27 times for
// the Gated DeltaNet's in_proj_qkv weight gradient, M = 2,560, K = 2,048).
static void gemm_blocks(const gemm_job *g, int64_t mc, int64_t nc, int t, int nt) {
    const int MR = g->isa->MR, NR = g->isa->NR;
    const int64_t K = g->K, Mpan = (g->M + MR - 1) / MR;
    for (int64_t jc = 0; jc < g->N; jc += nc) {
        const int64_t ncb = g->N - jc < nc ? g->N - jc : nc, npan = (ncb + NR - 1) / NR;
        if (K <= g->kc) {
            for (int64_t ic = 0; ic < g->M; ic += mc) {
                const int64_t mpan = ((g->M - ic < mc ? g->M - ic : mc) + MR - 1) / MR;
                if (ic == 0) pack_b_phase(g, jc, npan, 0, K, t, nt);
                pack_a_phase(g, ic, mpan, 0, K, t, nt);
                phase_end(nt);
                tiles_phase(g, jc, npan, ic, mpan, K, 1, 1, 0, 0, t, nt);
                phase_end(nt);
            }
            continue;
        }
        for (int64_t pc = 0; pc < K; pc += g->kc) {
            const int64_t kb = K - pc < g->kc ? K - pc : g->kc;
            pack_b_phase(g, jc, npan, pc, kb, t, nt);
            for (int64_t ic = 0; ic < g->M; ic += mc) {
                const int64_t mpan = ((g->M - ic < mc ? g->M - ic : mc) + MR - 1) / MR;
                pack_a_phase(g, ic, mpan, pc, kb, t, nt);
                phase_end(nt);
                tiles_phase(g, jc, npan, ic, mpan, kb, pc == 0, pc + kb >= K, Mpan, ic / MR, t, nt);
                phase_end(nt);
            }
        }
    }
    if (g->isa != &isa_generic) upper_clear();
}

void cpu_sgemm(int tA, int tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    const gemm_isa *isa = isa_get();
    const int MR = isa->MR, NR = isa->NR;
    const int64_t Kp = K > 0 ? K : 0, nkb = Kp > GEMM_KC_MIN ? (Kp + GEMM_KC - 1) / GEMM_KC : 1;
    const int64_t kc = (Kp + nkb - 1) / nkb, kk = kc > 0 ? kc : 1;  // equal blocks (the last one shorter)
    int64_t mc = GEMM_A_FLOATS / kk / MR * MR, nc = GEMM_B_FLOATS / kk / NR * NR;
    if (mc < MR) mc = MR;
    if (nc < NR) nc = NR;
    const int64_t Mp = (M + MR - 1) / MR * MR, Np = (N + NR - 1) / NR * NR;
    if (mc > Mp) mc = Mp;
    if (Kp > kc) {  // K cut: the accumulators of every tile of M x nc wait between K's blocks
        const int64_t cap = GEMM_ACC_FLOATS / Mp / NR * NR;
        if (nc > cap) nc = cap < NR ? NR : cap;
    }
    if (nc > Np) nc = Np;
    gemm_job g = {isa, tA, tB, M, N, Kp, lda, ldb, ldc, A, B, C, NULL, NULL, NULL, kc, alpha, beta};
    const int64_t acc = Kp > kc ? Mp * nc : 0;  // padded tiles of all of M for one jc
    g.bufB = pack_buffer((size_t)((mc + nc) * kc + acc) + 16);
    g.bufA = g.bufB + nc * kc;
    g.acc = acc ? g.bufA + mc * kc : NULL;
    const int threads = omp_get_level() > 0 ? 1 : omp_get_max_threads();
    if (threads > 1 && (double)M * (double)N * (double)Kp >= GEMM_PARALLEL_MIN) {
#pragma omp parallel
        gemm_blocks(&g, mc, nc, omp_get_thread_num(), omp_get_num_threads());
    } else {
        gemm_blocks(&g, mc, nc, 0, 1);
    }
}
