// The gated delta rule (Qwen3.5's Gated DeltaNet core) as the exact token recurrence per
// (row, value head): the reference that test_delta_ops holds the chunked form (delta_chunk.c,
// the one zt_cpu_ops runs) to, with the same saved layout. State St [Dk, Dv] row-major so that
// every inner loop runs over Dv contiguously. Forward keeps the state before each chunk of
// ZT_DELTA_CHUNK tokens (the checkpoints, `saved`: B * Hv * ceil(S / 64) * Dk * Dv floats);
// backward walks the chunks from last to first, recomputes a chunk's states from its checkpoint
// into a thread-local buffer (64 * Dk * min(Dv, 64) floats: one column block, below) and runs
// the reverse recurrence over them. Documents restart inside a chunk by zeroing.
// The columns of St evolve independently (only dq, dk, dg, dbeta sum over them), so both
// directions run on blocks of ZT_DELTA_COLS columns (the chunk's buffer of states: 2 MiB at
// Dk = 128, L2-sized), and the forward has Dv / 64 tasks per (row, head).
// defines: cpu_delta_recur_fwd, cpu_delta_recur_bwd, zt_delta_saved_floats
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/cpu/cpu_internal.h"
#include "base/common.h"

// Tokens between checkpoints: the saved states are (S / 64) x the size of one state per
// (row, head), and backward's buffer holds 64 states of a column block.
#define ZT_DELTA_CHUNK 64
// Columns of St per block (four AVX-512 vectors). At Dk = Dv = 128, S = 2048, 12 heads, one
// thread, forward + backward took 0.52 s with blocks of 64 or 128 columns, 0.64 s with 32 and
// 0.85 s with 16 (each row's dot products end in a horizontal sum).
#define ZT_DELTA_COLS 64

// The loops over Dv are compiled for AVX-512, AVX2+FMA and plain x86-64; the loader picks
// one per CPU (ifunc). The results differ by rounding between them, never within a run.
// CMakeLists.txt compiles this file with -fassociative-math so that the `omp simd`
// reductions end in a shuffle tree, not 16 scalar adds (0.70 s -> 0.55 s in the case above).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZT_DELTA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ZT_DELTA_CLONES
#endif

int64_t zt_delta_saved_floats(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv) {
    const int64_t nchunks = (S + ZT_DELTA_CHUNK - 1) / ZT_DELTA_CHUNK;
    return B * Hv * nchunks * Dk * Dv;
}

// Token t of block b starts a document: the state restarts from zero before it.
static inline int doc_start(const int32_t *pos, int64_t b, int64_t S, int64_t t) {
    return t == 0 || (pos && pos[b * S + t] == 0);
}

static void check_shapes(int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    if (Hk <= 0 || Hv <= 0 || Hv % Hk != 0 || Dk <= 0 || Dv <= 0)
        zt_fatal("delta rule: Hv = %lld must be a positive multiple of Hk = %lld (Dk %lld, Dv %lld)", (long long)Hv,
                 (long long)Hk, (long long)Dk, (long long)Dv);
}

// One token of the forward recurrence on St [Dk, Dv] (in place); writes
// u = a St-1^T k and d = beta (v - u) (backward keeps them), and o = St^T qs when o != NULL.
static inline __attribute__((always_inline)) void token_fwd(float *St, float *u, float *d, float *o,
                                                            const float *qs, const float *k, const float *v, float a,
                                                            float beta, int64_t Dk, int64_t Dv) {
    for (int64_t j = 0; j < Dv; j++) u[j] = 0.0f;
    for (int64_t i = 0; i < Dk; i++) {
        const float *Si = St + i * Dv, ki = k[i];
#pragma omp simd
        for (int64_t j = 0; j < Dv; j++) u[j] += ki * Si[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < Dv; j++) {
        u[j] *= a;
        d[j] = beta * (v[j] - u[j]);
    }
    if (o)
        for (int64_t j = 0; j < Dv; j++) o[j] = 0.0f;
    for (int64_t i = 0; i < Dk; i++) {
        float *Si = St + i * Dv;
        const float ki = k[i];
#pragma omp simd
        for (int64_t j = 0; j < Dv; j++) Si[j] = a * Si[j] + ki * d[j];
        if (o) {
            const float qi = qs[i];
#pragma omp simd
            for (int64_t j = 0; j < Dv; j++) o[j] += qi * Si[j];
        }
    }
}

// St [Dk, W] <-> columns j0 .. j0 + W of a saved state [Dk, Dv].
static inline void block_out(float *dst, const float *St, int64_t Dk, int64_t Dv, int64_t W) {
    for (int64_t i = 0; i < Dk; i++) memcpy(dst + i * Dv, St + i * W, (size_t)W * sizeof(float));
}
static inline void block_in(float *St, const float *src, int64_t Dk, int64_t Dv, int64_t W) {
    for (int64_t i = 0; i < Dk; i++) memcpy(St + i * W, src + i * Dv, (size_t)W * sizeof(float));
}

// The forward of one (row b, value head h, block of W columns): v, o, saved point at the
// block's first column; strides are in floats between tokens.
ZT_DELTA_CLONES static void head_fwd(float *o, float *saved, float *St, float *u, float *d, float *qs,
                                     const float *q, const float *k, const float *v, const float *g,
                                     const float *beta, const int32_t *pos, int64_t b, int64_t S, int64_t qstride,
                                     int64_t vstride, int64_t gstride, int64_t Dk, int64_t Dv, int64_t W,
                                     float scale) {
    for (int64_t t = 0; t < S; t++) {
        if (doc_start(pos, b, S, t)) memset(St, 0, (size_t)(Dk * W) * sizeof(float));
        if (t % ZT_DELTA_CHUNK == 0) block_out(saved + (t / ZT_DELTA_CHUNK) * Dk * Dv, St, Dk, Dv, W);
        const float *qt = q + t * qstride;
        for (int64_t i = 0; i < Dk; i++) qs[i] = qt[i] * scale;
        token_fwd(St, u, d, o + t * vstride, qs, k + t * qstride, v + t * vstride, expf(g[t * gstride]),
                  beta[t * gstride], Dk, W);
    }
}

void cpu_delta_recur_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                         const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv,
                         int64_t Dk, int64_t Dv) {
    check_shapes(Hk, Hv, Dk, Dv);
    const int64_t group = Hv / Hk, nchunks = (S + ZT_DELTA_CHUNK - 1) / ZT_DELTA_CHUNK;
    const int64_t Wmax = Dv < ZT_DELTA_COLS ? Dv : ZT_DELTA_COLS, nblk = (Dv + Wmax - 1) / Wmax;
    const float scale = (float)(1.0 / sqrt((double)Dk));
#pragma omp parallel
    {
        float *St = zt_xmalloc((size_t)(Dk * Wmax + 2 * Wmax + Dk) * sizeof(float));
        float *u = St + Dk * Wmax, *d = u + Wmax, *qs = d + Wmax;
#pragma omp for collapse(3) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hv; h++)
                for (int64_t jb = 0; jb < nblk; jb++) {
                    const int64_t kh = h / group, j0 = jb * Wmax, W = j0 + Wmax < Dv ? Wmax : Dv - j0;
                    head_fwd(o + b * S * Hv * Dv + h * Dv + j0, saved + (b * Hv + h) * nchunks * Dk * Dv + j0, St,
                             u, d, qs, q + b * S * Hk * Dk + kh * Dk, k + b * S * Hk * Dk + kh * Dk,
                             v + b * S * Hv * Dv + h * Dv + j0, g + b * S * Hv + h, beta + b * S * Hv + h, pos, b, S,
                             Hk * Dk, Hv * Dv, Hv, Dk, Dv, W, scale);
                }
        free(St);
    }
}

// Backward of one (row b, value head h, block of W columns), adding into dq, dk (shared by
// the value heads of a key head and the column blocks) and dg, dbeta (shared by the column
// blocks), assigning the block's columns of dv. Per token, with P = a St-1 (a = exp(g)),
// u = P^T k, d = beta (v - u), St = P + k d^T, o = St^T qs and dS the gradient of St:
//   dS += qs do^T;  dqs = St do = a St-1 do + k (d . do);  dk = dS d + P du;
//   dd = dS^T k;  dv = beta dd;  dbeta = dd . (v - u);  du = -beta dd;
//   dP = dS + k du^T;  dg = a <dP, St-1>;  dS(t-1) = a dP  (zero before a document start).
// work: Dk*W (state) + Dk*W (dS) + 64*Dk*W (states before each token of a chunk)
// + 2*64*W (u, d per token) + 2*W + Dk floats.
ZT_DELTA_CLONES static void head_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, float *work,
                                     const float *dout, const float *saved, const float *q, const float *k,
                                     const float *v, const float *g, const float *beta, const int32_t *pos, int64_t b,
                                     int64_t S, int64_t qstride, int64_t vstride, int64_t gstride, int64_t Dk,
                                     int64_t Dvfull, int64_t Dv, float scale) {
    // Dv here is the block's width W; Dvfull the saved states' row length
    const int64_t DkDv = Dk * Dv, C = ZT_DELTA_CHUNK, nchunks = (S + C - 1) / C;
    float *St = work, *dS = St + DkDv, *Sbuf = dS + DkDv, *ubuf = Sbuf + C * DkDv, *dbuf = ubuf + C * Dv;
    float *dd = dbuf + C * Dv, *du = dd + Dv, *qs = du + Dv;
    memset(dS, 0, (size_t)DkDv * sizeof(float));
    for (int64_t c = nchunks - 1; c >= 0; c--) {
        const int64_t t0 = c * C, t1 = t0 + C < S ? t0 + C : S;
        // recompute the chunk: Sbuf[t - t0] = the state token t reads (after a document restart)
        block_in(St, saved + c * Dk * Dvfull, Dk, Dvfull, Dv);
        for (int64_t t = t0; t < t1; t++) {
            if (doc_start(pos, b, S, t)) memset(St, 0, (size_t)DkDv * sizeof(float));
            memcpy(Sbuf + (t - t0) * DkDv, St, (size_t)DkDv * sizeof(float));
            token_fwd(St, ubuf + (t - t0) * Dv, dbuf + (t - t0) * Dv, NULL, NULL, k + t * qstride, v + t * vstride,
                      expf(g[t * gstride]), beta[t * gstride], Dk, Dv);
        }
        for (int64_t t = t1 - 1; t >= t0; t--) {
            const float *Sp = Sbuf + (t - t0) * DkDv, *u = ubuf + (t - t0) * Dv, *d = dbuf + (t - t0) * Dv;
            const float *kt = k + t * qstride, *qt = q + t * qstride, *vt = v + t * vstride, *dot = dout + t * vstride;
            float *dqt = dq + t * qstride, *dkt = dk + t * qstride;
            const float a = expf(g[t * gstride]), bt = beta[t * gstride];
            for (int64_t i = 0; i < Dk; i++) qs[i] = qt[i] * scale;
            float ddo = 0.0f;
#pragma omp simd reduction(+ : ddo)
            for (int64_t j = 0; j < Dv; j++) ddo += d[j] * dot[j];
            for (int64_t j = 0; j < Dv; j++) dd[j] = 0.0f;
            // pass 1: dS += qs do^T; dq; the dS d part of dk; dd = dS^T k
            for (int64_t i = 0; i < Dk; i++) {
                float *dSi = dS + i * Dv;
                const float *Spi = Sp + i * Dv, qi = qs[i], ki = kt[i];
                float sdo = 0.0f, dsd = 0.0f;
#pragma omp simd reduction(+ : sdo, dsd)
                for (int64_t j = 0; j < Dv; j++) {
                    const float x = dSi[j] + qi * dot[j];
                    dSi[j] = x;
                    sdo += Spi[j] * dot[j];
                    dsd += x * d[j];
                    dd[j] += ki * x;
                }
                dqt[i] += scale * (a * sdo + ki * ddo);
                dkt[i] += dsd;
            }
            float db = 0.0f;
#pragma omp simd reduction(+ : db)
            for (int64_t j = 0; j < Dv; j++) {
                dv[t * vstride + j] = bt * dd[j];
                db += dd[j] * (vt[j] - u[j]);
                du[j] = -bt * dd[j];
            }
            dbeta[t * gstride] += db;
            // pass 2: the P du part of dk; dg; dS <- a (dS + k du^T)
            float gs = 0.0f;
            for (int64_t i = 0; i < Dk; i++) {
                float *dSi = dS + i * Dv;
                const float *Spi = Sp + i * Dv, ki = kt[i];
                float sdu = 0.0f, sdp = 0.0f;
#pragma omp simd reduction(+ : sdu, sdp)
                for (int64_t j = 0; j < Dv; j++) {
                    const float x = dSi[j] + ki * du[j];
                    sdu += Spi[j] * du[j];
                    sdp += Spi[j] * x;
                    dSi[j] = a * x;
                }
                dkt[i] += a * sdu;
                gs += sdp;
            }
            dg[t * gstride] += a * gs;
            if (doc_start(pos, b, S, t)) memset(dS, 0, (size_t)DkDv * sizeof(float));
        }
    }
}

void cpu_delta_recur_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                         const float *q, const float *k, const float *v, const float *g, const float *beta,
                         const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    check_shapes(Hk, Hv, Dk, Dv);
    const int64_t group = Hv / Hk, nchunks = (S + ZT_DELTA_CHUNK - 1) / ZT_DELTA_CHUNK;
    const float scale = (float)(1.0 / sqrt((double)Dk));
    const int64_t Wmax = Dv < ZT_DELTA_COLS ? Dv : ZT_DELTA_COLS, nblk = (Dv + Wmax - 1) / Wmax;
    const size_t work = (size_t)((2 + ZT_DELTA_CHUNK) * Dk * Wmax + 2 * ZT_DELTA_CHUNK * Wmax + 2 * Wmax + Dk);
    // One task per (row, key head): its value heads and column blocks add into the same dq,
    // dk rows (and a head's blocks into its dg, dbeta) in one order, whatever the thread count.
#pragma omp parallel
    {
        float *wk = zt_xmalloc(work * sizeof(float));
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t kh = 0; kh < Hk; kh++) {
                float *dqb = dq + b * S * Hk * Dk + kh * Dk, *dkb = dk + b * S * Hk * Dk + kh * Dk;
                for (int64_t t = 0; t < S; t++) {
                    memset(dqb + t * Hk * Dk, 0, (size_t)Dk * sizeof(float));
                    memset(dkb + t * Hk * Dk, 0, (size_t)Dk * sizeof(float));
                }
                for (int64_t h = kh * group; h < (kh + 1) * group; h++) {
                    const int64_t go = b * S * Hv + h;
                    for (int64_t t = 0; t < S; t++) dg[go + t * Hv] = dbeta[go + t * Hv] = 0.0f;
                    for (int64_t jb = 0; jb < nblk; jb++) {
                        const int64_t j0 = jb * Wmax, W = j0 + Wmax < Dv ? Wmax : Dv - j0;
                        const int64_t vo = b * S * Hv * Dv + h * Dv + j0;
                        head_bwd(dqb, dkb, dv + vo, dg + go, dbeta + go, wk, dout + vo,
                                 saved + (b * Hv + h) * nchunks * Dk * Dv + j0, q + b * S * Hk * Dk + kh * Dk,
                                 k + b * S * Hk * Dk + kh * Dk, v + vo, g + go, beta + go, pos, b, S, Hk * Dk,
                                 Hv * Dv, Hv, Dk, Dv, W, scale);
                    }
                }
            }
        free(wk);
    }
}
