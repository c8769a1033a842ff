// An experiment, not a kernel of the trainer: can this CPU's AMX-BF16 tile unit make attention's
// fp32 products faster at fp32's accuracy? One block product of the CPU attention (96 x 96 x 32: a
// block of scores, Q K^T at head_dim 32) three ways, each repeated from L1:
//   - the fp32 AVX-512 sgemm kernel the trainer uses (cpu_sgemm_packed, alpha 1/sqrt(32));
//   - AMX with bf16 operands split in two (x = hi + lo: hi*hi + hi*lo + lo*hi, 3 tile products);
//   - AMX with bf16 operands split in three (x = hi + mid + lo: the 6 products down to 2^-24).
// Each result's largest error against a double-precision product, its time and GFLOP/s; and the
// time to split one 96 x 96 fp32 block into three bf16 parts with AVX512-BF16 (what P and dS would
// cost before their products). Exit 77 where the CPU or the kernel lacks AMX-BF16 / AVX512-BF16.
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

// x (n floats, n a multiple of 16) into three bf16 parts, vectorised (round to nearest even)
__attribute__((target("avx512f,avx512bf16"))) static void split3(uint16_t *h, uint16_t *m, uint16_t *l, const float *x,
                                                                int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m256bh a = _mm512_cvtneps_pbh(v);
        const __m512 r1 = _mm512_sub_ps(v, _mm512_cvtpbh_ps(a));
        const __m256bh b = _mm512_cvtneps_pbh(r1);
        const __m512 r2 = _mm512_sub_ps(r1, _mm512_cvtpbh_ps(b));
        const __m256bh c = _mm512_cvtneps_pbh(r2);
        memcpy(h + i, &a, 32), memcpy(m + i, &b, 32), memcpy(l + i, &c, 32);
    }
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
    printf("block %d x %d x %d, max |C| %.1f, best of one run of %d repetitions, one thread\n", M, N, K, maxref, reps);
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
    free(pa), free(pb);
    return 0;
}
