// The gated delta rule in its chunked (UT-transform) form, the one used for training (fla's
// chunk_gated_delta_rule, transformers' torch_chunk_gated_delta_rule): within a chunk of up to 64
// tokens the recurrence of kernels/cpu/delta.c becomes a few matrix products (cpu_sgemm) around
// one 64 x 64 unit-lower-triangular inverse. Chunks are the recurrence's 64-token spans cut
// again at every document start, so no chunk holds two documents, the state before each
// multiple of 64 is saved exactly where the recurrence saves it (the GPU kernel's layout too),
// and a packed document starting at a multiple of 64 computes bit for bit what it computes alone
// (one starting elsewhere is cut into other chunks: the same to rounding).
// defines: cpu_delta_chunk_fwd, cpu_delta_chunk_bwd
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/cpu/cpu_internal.h"
#include "base/common.h"

#define CH 64  // tokens per chunk (= the recurrence's checkpoint spacing: same saved count)
#define ZT_CHUNK_TINY 0x1p-64  // decays below are zero (chunk_prep)

// The element-wise loops compiled for AVX-512, AVX2 and plain x86-64, picked per CPU as in
// delta.c; no contraction to FMA (-ffp-contract=off) and sums in a fixed order, so every clone
// gives the same bits (the products are cpu_sgemm's, which has its own per-ISA kernels).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZT_CHUNK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ZT_CHUNK_CLONES
#endif

// Per chunk of L tokens, one value head, S0 its initial state [Dk, Dv] (zero after a document
// start), G_i = g_0 + .. + g_i, e_i = exp(G_i), Gam_ij = exp(G_i - G_j) = a_{j+1} .. a_i
// (j <= i, a = exp(g): formed as products, as the recurrence decays its state; below 2^-64: 0),
// f_j = Gam_{L-1,j}, K, V, Qs = Q / sqrt(Dk) its rows:
//   A = strictly-lower(diag(beta) (Gam . K K^T)),  T = (I + A)^-1,
//   R = V - diag(e) K S0,  Y = diag(beta) R,  Vn = T Y  (row i: beta_i (v_i - u_i) of the recurrence),
//   P = lower(Gam . Qs K^T),  O = diag(e) Qs S0 + P Vn,  S_L = e_{L-1} S0 + (diag(f) K)^T Vn.
// Stacked: KQ = [K; Qs] (2L rows), X = KQ S0 = [KS; QS], Z = KQ K^T = [KK; QK].
typedef struct {
    int64_t Dk, Dv;
    float *KQ, *X, *Z, *Gam, *GK, *A, *T, *P, *R, *Y, *Vn, *e, *f, *beta;
    double *grow, *Td;  // grow: one row of Gam in double
    // backward
    float *dO, *dP, *dVn, *KdS, *dY, *dA, *D2, *dZ, *dKQ, *Vnf, *dE, *dF, *M;
    double *W;
} chunk_ws;

// Lays the workspace out from p (doubles first: p is malloc-aligned); returns its size in
// floats. p == NULL: only the size.
static size_t ws_layout(chunk_ws *w, float *p, int64_t Dk, int64_t Dv, int bwd) {
    size_t off = 0;
    w->Dk = Dk, w->Dv = Dv;
    w->grow = p ? (double *)p : NULL, off += 2 * CH;
    w->Td = p ? (double *)(p + off) : NULL, off += 2 * CH * CH;
#define TAKE(x, n) (w->x = p ? p + off : NULL, off += (size_t)(n))
    TAKE(KQ, 2 * CH * Dk), TAKE(X, 2 * CH * Dv), TAKE(Z, 2 * CH * CH), TAKE(Gam, CH * CH), TAKE(GK, CH * CH);
    TAKE(A, CH * CH), TAKE(T, CH * CH), TAKE(P, CH * CH), TAKE(R, CH * Dv), TAKE(Y, CH * Dv), TAKE(Vn, CH * Dv);
    TAKE(e, CH), TAKE(f, CH), TAKE(beta, CH);
    if (bwd) {
        TAKE(dO, CH * Dv), TAKE(dP, CH * CH), TAKE(dVn, CH * Dv), TAKE(KdS, CH * Dv), TAKE(dY, CH * Dv);
        TAKE(dA, CH * CH), TAKE(D2, 2 * CH * Dv), TAKE(dZ, 2 * CH * CH), TAKE(dKQ, 2 * CH * Dk), TAKE(Vnf, CH * Dv);
        TAKE(dE, CH), TAKE(dF, CH), TAKE(M, CH * CH);
        w->W = p ? (double *)(p + off) : NULL, off += 2 * CH;
    }
#undef TAKE
    return off;
}

// a . b in 16 lanes summed in a fixed tree: the same bits wherever a and b sit in memory (a
// vectorised reduction that peels to an alignment would not be: a packed document's rows sit
// elsewhere than the same document's alone).
static inline float rowdot(const float *a, const float *b, int64_t n) {
    float acc[16] = {0};
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int l = 0; l < 16; l++) acc[l] += a[c + l] * b[c + l];
    for (int l = 0; c < n; c++, l++) acc[l] += a[c] * b[c];
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

// The forward of one chunk up to Vn and P (the backward recomputes exactly this).
// q, k rows qstride apart; v vstride; g, beta gstride. S0 == NULL: a zero state.
ZT_CHUNK_CLONES static void chunk_prep(chunk_ws *w, const float *q, const float *k, const float *v, const float *g,
                       const float *beta, const float *S0, int64_t L, int64_t qstride, int64_t vstride,
                       int64_t gstride, float scale) {
    const int64_t Dk = w->Dk, Dv = w->Dv;
    float *K = w->KQ, *Qs = w->KQ + L * Dk;
    for (int64_t i = 0; i < L; i++) {
        memcpy(K + i * Dk, k + i * qstride, (size_t)Dk * sizeof(float));
        const float *qi = q + i * qstride;
        for (int64_t c = 0; c < Dk; c++) Qs[i * Dk + c] = qi[c] * scale;
    }
    // Decays below 2^-64 are flushed to zero: they weigh less than fp32 can see against the
    // chunk's own terms, and as denormals in the products they cost the sgemm ~10x (a head
    // whose g is -20 per token reaches them in four tokens).
    double G = 0;
    for (int64_t i = 0; i < L; i++) {
        G += (double)g[i * gstride];
        const double e = exp(G);
        w->e[i] = e < ZT_CHUNK_TINY ? 0.0f : (float)e;
        w->beta[i] = beta[i * gstride];
    }
    // Gam (ld L, zero above the diagonal): row i = row i-1 times a_i (in double, as the
    // recurrence decays its state token by token)
    float *Gam = w->Gam;
    double *grow = w->grow;
    for (int64_t i = 0; i < L; i++) {
        float *Gi = Gam + i * L;
        const double ai = exp((double)g[i * gstride]);
#pragma omp simd
        for (int64_t j = 0; j < i; j++) {
            const double x = grow[j] * ai;
            grow[j] = x < ZT_CHUNK_TINY ? 0.0 : x;
            Gi[j] = (float)grow[j];
        }
        grow[i] = 1.0, Gi[i] = 1.0f;
        for (int64_t j = i + 1; j < L; j++) Gi[j] = 0.0f;
    }
    for (int64_t j = 0; j < L; j++) w->f[j] = Gam[(L - 1) * L + j];
    // X = KQ S0 [2L, Dv], Z = KQ K^T [2L, L]
    if (S0) cpu_sgemm(0, 0, 2 * L, Dv, Dk, 1.0f, w->KQ, Dk, S0, Dv, 0.0f, w->X, Dv);
    cpu_sgemm(0, 1, 2 * L, L, Dk, 1.0f, w->KQ, Dk, K, Dk, 0.0f, w->Z, L);
    // GK = strictly-lower(Gam . KK), A = diag(beta) GK, P = Gam . QK (Gam is zero above the diagonal)
    const float *KK = w->Z, *QK = w->Z + L * L;
    for (int64_t i = 0; i < L; i++) {
        const float bi = w->beta[i], *Gi = Gam + i * L;
        float *GKi = w->GK + i * L, *Ai = w->A + i * L, *Pi = w->P + i * L;
#pragma omp simd
        for (int64_t j = 0; j < L; j++) {
            const float gk = Gi[j] * KK[i * L + j];
            GKi[j] = gk;
            Ai[j] = bi * gk;
            Pi[j] = Gi[j] * QK[i * L + j];
        }
        GKi[i] = Ai[i] = 0.0f;
    }
    // T = (I + A)^-1 in double, row by row: T_i = e_i - sum_{m < i} A_im T_m
    double *Td = w->Td;
    for (int64_t i = 0; i < L; i++) {
        double *Ti = Td + i * CH;
        for (int64_t j = 0; j < L; j++) Ti[j] = j == i ? 1.0 : 0.0;
        for (int64_t m = 0; m < i; m++) {
            const double a = w->A[i * L + m];
            const double *Tm = Td + m * CH;
#pragma omp simd
            for (int64_t j = 0; j <= m; j++) Ti[j] -= a * Tm[j];
        }
        for (int64_t j = 0; j < L; j++) w->T[i * L + j] = fabs(Ti[j]) < ZT_CHUNK_TINY ? 0.0f : (float)Ti[j];
    }
    // R = V - diag(e) KS;  Y = diag(beta) R;  Vn = T Y
    for (int64_t i = 0; i < L; i++) {
        const float *vi = v + i * vstride, *ks = w->X + i * Dv, ei = w->e[i], bi = w->beta[i];
        float *Ri = w->R + i * Dv, *Yi = w->Y + i * Dv;
        if (S0) {
#pragma omp simd
            for (int64_t c = 0; c < Dv; c++) Ri[c] = vi[c] - ei * ks[c];
        } else {
            memcpy(Ri, vi, (size_t)Dv * sizeof(float));
        }
#pragma omp simd
        for (int64_t c = 0; c < Dv; c++) Yi[c] = bi * Ri[c];
    }
    cpu_sgemm(0, 0, L, Dv, L, 1.0f, w->T, L, w->Y, Dv, 0.0f, w->Vn, Dv);
}

// The chunk from c0: up to the next multiple of 64 or the document's end t1.
static inline int64_t chunk_len(int64_t c0, int64_t t1) {
    const int64_t e = (c0 / CH + 1) * CH;
    return (e < t1 ? e : t1) - c0;
}

// One document's chunks [t0, t1) of one (row, value head), forward: o rows, the state saved
// before each chunk after the first.
ZT_CHUNK_CLONES static void doc_fwd(chunk_ws *w, float *o, float *saved, float *St, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta, int64_t t0, int64_t t1,
                                    int64_t qstride, int64_t vstride, int64_t gstride, float scale) {
    const int64_t Dk = w->Dk, Dv = w->Dv;
    for (int64_t c0 = t0, L; c0 < t1; c0 += L) {
        L = chunk_len(c0, t1);
        const float *S0 = c0 == t0 ? NULL : St;  // c0 > t0: a multiple of 64
        if (S0) memcpy(saved + (c0 / CH) * Dk * Dv, St, (size_t)(Dk * Dv) * sizeof(float));
        chunk_prep(w, q + c0 * qstride, k + c0 * qstride, v + c0 * vstride, g + c0 * gstride, beta + c0 * gstride,
                   S0, L, qstride, vstride, gstride, scale);
        // O = diag(e) QS + P Vn
        float *O = o + c0 * vstride;
        if (S0)
            for (int64_t i = 0; i < L; i++) {
                const float *qs = w->X + (L + i) * Dv, ei = w->e[i];
                float *Oi = O + i * vstride;
#pragma omp simd
                for (int64_t c = 0; c < Dv; c++) Oi[c] = ei * qs[c];
            }
        cpu_sgemm(0, 0, L, Dv, L, 1.0f, w->P, L, w->Vn, Dv, S0 ? 1.0f : 0.0f, O, vstride);
        if (c0 + L < t1) {  // S_L = e_{L-1} S0 + (diag(f) K)^T Vn, in place (KQ's K rows scaled)
            float *K = w->KQ;
            for (int64_t i = 0; i < L; i++) {
                const float fi = w->f[i];
#pragma omp simd
                for (int64_t c = 0; c < Dk; c++) K[i * Dk + c] *= fi;
            }
            cpu_sgemm(1, 0, Dk, Dv, L, 1.0f, K, Dk, w->Vn, Dv, S0 ? w->e[L - 1] : 0.0f, St, Dv);
        }
    }
}

// Token t of row b starts a document.
static inline int doc_start(const int32_t *pos, int64_t b, int64_t S, int64_t t) {
    return t == 0 || (pos && pos[b * S + t] == 0);
}
static inline int64_t doc_end(const int32_t *pos, int64_t b, int64_t S, int64_t t0) {
    int64_t t = t0 + 1;
    while (t < S && !doc_start(pos, b, S, t)) t++;
    return t;
}

static void check_shapes(int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    if (Hk <= 0 || Hv <= 0 || Hv % Hk != 0 || Dk <= 0 || Dv <= 0)
        zt_fatal("delta rule: Hv = %lld must be a positive multiple of Hk = %lld (Dk %lld, Dv %lld)", (long long)Hv,
                 (long long)Hk, (long long)Dk, (long long)Dv);
}

void cpu_delta_chunk_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                         const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv,
                         int64_t Dk, int64_t Dv) {
    check_shapes(Hk, Hv, Dk, Dv);
    const int64_t group = Hv / Hk, nchunks = (S + CH - 1) / CH;
    const float scale = (float)(1.0 / sqrt((double)Dk));
#pragma omp parallel
    {
        chunk_ws w;
        const size_t nw = ws_layout(&w, NULL, Dk, Dv, 0);
        float *buf = zt_xmalloc((nw + (size_t)(Dk * Dv)) * sizeof(float)), *St = buf + nw;
        ws_layout(&w, buf, Dk, Dv, 0);
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hv; h++) {
                const int64_t kh = h / group;
                float *sv = saved + (b * Hv + h) * nchunks * Dk * Dv;
                memset(sv, 0, (size_t)(nchunks * Dk * Dv) * sizeof(float));
                for (int64_t t0 = 0; t0 < S;) {
                    const int64_t t1 = doc_end(pos, b, S, t0);
                    doc_fwd(&w, o + b * S * Hv * Dv + h * Dv, sv, St, q + b * S * Hk * Dk + kh * Dk,
                            k + b * S * Hk * Dk + kh * Dk, v + b * S * Hv * Dv + h * Dv, g + b * S * Hv + h,
                            beta + b * S * Hv + h, t0, t1, Hk * Dk, Hv * Dv, Hv, scale);
                    t0 = t1;
                }
            }
        free(buf);
    }
}

// Backward of one document [t0, t1) of one (row, value head): dv, dg, dbeta assigned, dq, dk
// added (the value heads of a key head share them). dS: [Dk, Dv] work for the state's gradient.
ZT_CHUNK_CLONES static void doc_bwd(chunk_ws *w, float *dq, float *dk, float *dv, float *dg, float *dbeta,
                                    float *dS, const float *dout, const float *saved, const float *q, const float *k,
                                    const float *v, const float *g, const float *beta, int64_t t0, int64_t t1,
                                    int64_t qstride, int64_t vstride, int64_t gstride, float scale) {
    const int64_t Dk = w->Dk, Dv = w->Dv;
    int dS_zero = 1;
    for (int64_t c1 = t1; c1 > t0;) {
        const int64_t c0 = (c1 - 1) / CH * CH > t0 ? (c1 - 1) / CH * CH : t0, L = c1 - c0;
        c1 = c0;
        const float *S0 = c0 == t0 ? NULL : saved + (c0 / CH) * Dk * Dv;
        chunk_prep(w, q + c0 * qstride, k + c0 * qstride, v + c0 * vstride, g + c0 * gstride, beta + c0 * gstride,
                   S0, L, qstride, vstride, gstride, scale);
        const float *K = w->KQ, *dO = w->dO;
        for (int64_t i = 0; i < L; i++) memcpy(w->dO + i * Dv, dout + (c0 + i) * vstride, (size_t)Dv * sizeof(float));
        // The gate's gradient in three parts, each summed where g_s enters (no cancelling sums):
        // e_i holds g_s for s <= i, f_j for j < s, Gam_ij (in A, P) for j < s <= i.
        float *dE = w->dE, *dF = w->dF, *M = w->M;
        // dP = dO Vn^T;  dVn = P^T dO + diag(f) K dS
        cpu_sgemm(0, 1, L, L, Dv, 1.0f, dO, Dv, w->Vn, Dv, 0.0f, w->dP, L);
        cpu_sgemm(1, 0, L, Dv, L, 1.0f, w->P, L, dO, Dv, 0.0f, w->dVn, Dv);
        for (int64_t i = 0; i < L; i++) dE[i] = dF[i] = 0.0f;
        if (!dS_zero) {
            cpu_sgemm(0, 0, L, Dv, Dk, 1.0f, K, Dk, dS, Dv, 0.0f, w->KdS, Dv);
            for (int64_t i = 0; i < L; i++) {
                const float fi = w->f[i], *kd = w->KdS + i * Dv, *vn = w->Vn + i * Dv;
                float *dvn = w->dVn + i * Dv, *vnf = w->Vnf + i * Dv;
                dF[i] = rowdot(kd, vn, Dv) * fi;  // df_i f_i
#pragma omp simd
                for (int64_t c = 0; c < Dv; c++) dvn[c] += fi * kd[c], vnf[c] = fi * vn[c];
            }
        }
        // dY = T^T dVn;  dA = -dY Vn^T (strictly lower used)
        cpu_sgemm(1, 0, L, Dv, L, 1.0f, w->T, L, w->dVn, Dv, 0.0f, w->dY, Dv);
        cpu_sgemm(0, 1, L, L, Dv, -1.0f, w->dY, Dv, w->Vn, Dv, 0.0f, w->dA, L);
        // D2 = [dKS; dQS] = [-diag(e beta) dY; diag(e) dO];  dv = diag(beta) dY
        float *dKS = w->D2, *dQS = w->D2 + L * Dv;
        for (int64_t i = 0; i < L; i++) {
            const float bi = w->beta[i], ei = w->e[i], *doi = w->dO + i * Dv;
            float *dy = w->dY + i * Dv, *dvi = dv + (c0 + i) * vstride;
            const float db = rowdot(dy, w->R + i * Dv, Dv);
#pragma omp simd
            for (int64_t c = 0; c < Dv; c++) dy[c] *= bi, dvi[c] = dy[c];  // dY -> dR = dv
            if (S0) {
                // de_i = -dR_i . KS_i + dO_i . QS_i
                const float de = -rowdot(dy, w->X + i * Dv, Dv) + rowdot(doi, w->X + (L + i) * Dv, Dv);
                dE[i] = de * ei;
#pragma omp simd
                for (int64_t c = 0; c < Dv; c++) dKS[i * Dv + c] = -ei * dy[c], dQS[i * Dv + c] = ei * doi[c];
            }
            dbeta[(c0 + i) * gstride] = db;  // the A part is added below
        }
        // through A and P: dKK = strictly-lower(dA . beta Gam), dQK = dP . Gam,
        // dbeta += rows of dA . GK; M = dA . A + dP . P, Gam_ij's gradient times Gam_ij
        float *dKK = w->dZ, *dQK = w->dZ + L * L;
        for (int64_t i = 0; i < L; i++) {
            const float bi = w->beta[i], *Gi = w->Gam + i * L, *dAi = w->dA + i * L, *dPi = w->dP + i * L;
            const float *Ai = w->A + i * L, *Pi = w->P + i * L;
            float *dKKi = dKK + i * L, *dQKi = dQK + i * L, *Mi = M + i * L;
#pragma omp simd
            for (int64_t j = 0; j < L; j++) {
                Mi[j] = dAi[j] * Ai[j] + dPi[j] * Pi[j];
                dKKi[j] = dAi[j] * (bi * Gi[j]);
                dQKi[j] = dPi[j] * Gi[j];
            }
            dKKi[i] = 0.0f;
            for (int64_t j = i + 1; j < L; j++) dKKi[j] = 0.0f;
            dbeta[(c0 + i) * gstride] += rowdot(dAi, w->GK + i * L, L);
        }
        // dKQ = dZ K + [D2 S0^T];  dKQ[K rows] += dZ^T KQ + diag(f) Vn dS^T
        cpu_sgemm(0, 0, 2 * L, Dk, L, 1.0f, w->dZ, L, K, Dk, 0.0f, w->dKQ, Dk);
        if (S0) cpu_sgemm(0, 1, 2 * L, Dk, Dv, 1.0f, w->D2, Dv, S0, Dv, 1.0f, w->dKQ, Dk);
        cpu_sgemm(1, 0, L, Dk, 2 * L, 1.0f, w->dZ, L, w->KQ, Dk, 1.0f, w->dKQ, Dk);
        if (!dS_zero) cpu_sgemm(0, 1, L, Dk, Dv, 1.0f, w->Vnf, Dv, dS, Dv, 1.0f, w->dKQ, Dk);
        for (int64_t i = 0; i < L; i++) {
            float *dki = dk + (c0 + i) * qstride, *dqi = dq + (c0 + i) * qstride;
            const float *gk = w->dKQ + i * Dk, *gq = w->dKQ + (L + i) * Dk;
#pragma omp simd
            for (int64_t c = 0; c < Dk; c++) dki[c] += gk[c], dqi[c] += scale * gq[c];
        }
        // dS0 = e_{L-1} dS + KQ^T D2; e_{L-1} also gains <S0, dS>
        if (S0) {
            if (!dS_zero) {
                float s = 0.0f;
                for (int64_t i = 0; i < Dk; i++) s += rowdot(S0 + i * Dv, dS + i * Dv, Dv);
                dE[L - 1] += s * w->e[L - 1];
            }
            cpu_sgemm(1, 0, Dk, Dv, 2 * L, 1.0f, w->KQ, Dk, w->D2, Dv, dS_zero ? 0.0f : w->e[L - 1], dS, Dv);
            dS_zero = 0;
        }
        // dg_s = sum_{i >= s} dE_i + sum_{j < s} dF_j + sum_{i >= s, j < s} M_ij (in double)
        double *W = w->W;
        for (int64_t s2 = 0; s2 < L; s2++) W[s2] = 0.0;
        for (int64_t i = 1; i < L; i++) {  // row i adds sum_{j < s} M_ij to every s in 1..i
            double p = 0.0;
            for (int64_t s2 = 1; s2 <= i; s2++) p += M[i * L + s2 - 1], W[s2] += p;
        }
        double pe = 0.0, pf = 0.0;
        for (int64_t s2 = 0; s2 < L; s2++) pf += s2 > 0 ? dF[s2 - 1] : 0.0, W[s2] += pf;
        for (int64_t s2 = L - 1; s2 >= 0; s2--) pe += dE[s2], dg[(c0 + s2) * gstride] = (float)(W[s2] + pe);
    }
}

void cpu_delta_chunk_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout,
                         const float *saved, const float *q, const float *k, const float *v, const float *g,
                         const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv,
                         int64_t Dk, int64_t Dv) {
    check_shapes(Hk, Hv, Dk, Dv);
    const int64_t group = Hv / Hk, nchunks = (S + CH - 1) / CH;
    const float scale = (float)(1.0 / sqrt((double)Dk));
    // One task per (row, key head): its value heads add into the same dq, dk rows in one order,
    // whatever the thread count.
#pragma omp parallel
    {
        chunk_ws w;
        const size_t nw = ws_layout(&w, NULL, Dk, Dv, 1);
        float *buf = zt_xmalloc((nw + (size_t)(Dk * Dv)) * sizeof(float)), *dS = buf + nw;
        ws_layout(&w, buf, Dk, Dv, 1);
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t kh = 0; kh < Hk; kh++) {
                float *dqb = dq + b * S * Hk * Dk + kh * Dk, *dkb = dk + b * S * Hk * Dk + kh * Dk;
                for (int64_t t = 0; t < S; t++) {
                    memset(dqb + t * Hk * Dk, 0, (size_t)Dk * sizeof(float));
                    memset(dkb + t * Hk * Dk, 0, (size_t)Dk * sizeof(float));
                }
                for (int64_t h = kh * group; h < (kh + 1) * group; h++) {
                    const int64_t go = b * S * Hv + h, vo = b * S * Hv * Dv + h * Dv;
                    for (int64_t t0 = 0; t0 < S;) {
                        const int64_t t1 = doc_end(pos, b, S, t0);
                        doc_bwd(&w, dqb, dkb, dv + vo, dg + go, dbeta + go, dS, dout + vo,
                                saved + (b * Hv + h) * nchunks * Dk * Dv, q + b * S * Hk * Dk + kh * Dk,
                                k + b * S * Hk * Dk + kh * Dk, v + vo, g + go, beta + go, t0, t1, Hk * Dk, Hv * Dv,
                                Hv, scale);
                        t0 = t1;
                    }
                }
            }
        free(buf);
    }
}
