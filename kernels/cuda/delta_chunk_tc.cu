// The gated delta rule's chunked (UT-transform) form with its products on tensor cores (WMMA
// 16x16x16, bf16 operands, fp32 accumulation): the same interface, spans, document handling,
// saved layout and backward partials as delta_chunk.cu (the fp32 kernels it is tested against,
// still the default), chosen by ZT_CUDA_DELTA_TC=1. One block per (row, value head, 32 state
// columns), the row's 64-token spans in order, as there; per span:
//   K K^T, Q K^T (64 x 64 over Dk), K S0, Q S0 (64 x 32 over Dk): WMMA, S0 rounded to bf16;
//   Gam (decays in double), e, the unit-lower inverse T = (I + A)^-1 by forward substitution in
//   fp32 on CUDA cores (a thread per column, as the reference);
//   Vn = T Y (Y = diag(beta)(V - diag(e) K S0)), O = P Vn (P = Gam . scale Q K^T): WMMA with T, Y,
//   P, Vn as bf16 high + low parts (x = hi + lo; the lo x lo products dropped), which keeps nearly
//   parallel keys with beta near 1 within the bf16 tolerance;
//   the state chain S0 <- e_{L-1} S0 + K^T diag(f) Vn: an fp32 accumulator (loaded, the WMMA
//   products added, stored back): the state itself stays fp32 from span to span.
// A document start is a zero decay as in delta_chunk.cu (Gam block-diagonal by document, e zero
// from the first start on, the state entering a span that opens a document zeroed and saved so).
// Backward (delta_tc_bwd_kernel): the span recomputed from its saved state (Gam from the
// cumulative log-decays), its gradients' products on tensor cores, dS carried in fp32, each block's
// parts of dq, dk, dg, dbeta summed in a fixed order by zt_cuda_delta_chunk_sum (deterministic).
// Dk, Dv multiples of 16 up to 128 (zt_cuda_delta_tc_supported; zt_cuda_delta_fwd / _bwd run the
// fp32 kernels otherwise).
// defines: zt_cuda_delta_tc_fwd, zt_cuda_delta_tc_bwd, zt_cuda_delta_tc_supported,
//          zt_cuda_delta_tc_smem_bytes
#include <mma.h>
#include <type_traits>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/delta_span.cuh"  // the span's load, Gam and e (shared with delta_chunk.cu)

using namespace nvcuda;

#define CH ZT_DELTA_CH    // tokens per span
#define DC 32            // state columns per block
#define NT 256           // threads per block (8 warps)
#define NW (NT / 32)
#define LF (CH + 4)      // fp32 [CH, CH] matrices (WMMA: ld a multiple of 4 floats)
#define LB (CH + 8)      // bf16 [CH, CH] matrices (ld a multiple of 8 bf16)
#define LS (DC + 4)      // fp32 [*, DC]
#define LSB (DC + 8)     // bf16 [*, DC]
#define TINY ZT_DELTA_TINY  // decays below are zero (as delta_chunk.cu)

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

// C [M, N] (fp32, ldc) = (acc ? C : 0) + sum over the n pairs of A_p B_p over K, operands bf16 in
// shared memory: A [M, K] row-major (TA: stored as its transpose [K, M]), B [K, N] row-major (TB:
// stored as [N, K]); the pairs share lda and ldb (a product and its bf16 low parts: A1 B1 + A2 B2 +
// A3 B3 in one accumulator). M, N, K multiples of 16; warp w takes output tiles w, w + 8, ... (the
// same tiles in every call with the same M, N). lower: C's tiles above the diagonal are skipped
// (their values are never read); tri_a 1: every A is lower triangular (its k-tiles past the output
// tile's rows are zero and skipped), 2: upper (the k-tiles before them skipped). A block barrier
// before other warps read C.
struct mma_pairs {
    const bf16 *A[3], *B[3];
    int n;
};
template <bool TA, bool TB>
static __device__ void blk_mma(float *C, int ldc, mma_pairs pr, int lda, int ldb, int M, int N, int K, bool acc,
                               bool lower = false, int tri_a = 0) {
    typedef typename std::conditional<TA, wmma::col_major, wmma::row_major>::type LA;
    typedef typename std::conditional<TB, wmma::col_major, wmma::row_major>::type LBt;
    const int w = threadIdx.x >> 5, tn = N / 16, nt = (M / 16) * tn;
    for (int t = w; t < nt; t += NW) {
        const int i0 = (t / tn) * 16, j0 = (t % tn) * 16;
        if (lower && j0 > i0) continue;
        frag_c c;
        if (acc)
            wmma::load_matrix_sync(c, C + i0 * ldc + j0, ldc, wmma::mem_row_major);
        else
            wmma::fill_fragment(c, 0.0f);
        const int kend = tri_a == 1 && i0 + 16 < K ? i0 + 16 : K;
        for (int p = 0; p < pr.n; p++)
            for (int k0 = tri_a == 2 ? i0 : 0; k0 < kend; k0 += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, LA> a;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LBt> b;
                wmma::load_matrix_sync(a, TA ? pr.A[p] + k0 * lda + i0 : pr.A[p] + i0 * lda + k0, lda);
                wmma::load_matrix_sync(b, TB ? pr.B[p] + j0 * ldb + k0 : pr.B[p] + k0 * ldb + j0, ldb);
                wmma::mma_sync(c, a, b, c);
            }
        wmma::store_matrix_sync(C + i0 * ldc + j0, c, ldc, wmma::mem_row_major);
    }
}
static __device__ __forceinline__ mma_pairs pairs(const bf16 *a1, const bf16 *b1, const bf16 *a2 = NULL,
                                                  const bf16 *b2 = NULL, const bf16 *a3 = NULL,
                                                  const bf16 *b3 = NULL) {
    mma_pairs p = {{a1, a2, a3}, {b1, b2, b3}, a3 ? 3 : a2 ? 2 : 1};
    return p;
}

// Shared memory of a forward block (byte offsets from the 128-byte aligned base, each array
// 128-byte aligned: WMMA tiles need 32). K, Q rows hold Dk + 8 bf16.
struct tc_smem {
    bf16 *K, *Q;               // [CH, Dk + 8]: the span's keys and (unscaled) queries
    float *Gam, *KK, *P, *T;   // [CH, LF]: decays, K K^T, Q K^T, the inverse
    bf16 *Tb, *Tl, *Pb, *Pl;   // [CH, LB]: T and P = Gam . scale Q K^T as bf16 high + low parts
    float *S0;                 // [Dk, LS]: the state entering the span (fp32, the chain)
    bf16 *S0b;                 // [Dk, LSB]: S0 for the products
    float *KS, *QS, *Vn, *O;   // [CH, LS]: K S0, Q S0, the new values, P Vn (O over KS: KS is dead by then)
    bf16 *Yb, *Yl, *Vnb, *Vnl, *Vfb, *Vfl;  // [CH, LSB]: Y, Vn, diag(f) Vn as bf16 high + low parts
    double *a;                 // [CH] exp(g), 0 at a document start
    float *e, *beta, *g;       // [CH]
    int *start;                // [CH]
};

static __host__ __device__ size_t tc_layout(tc_smem *m, char *base, int Dk) {
    size_t off = 0;
#define TAKE(p, type, n) (m->p = base ? (type *)(base + off) : NULL, off += ((size_t)(n) * sizeof(type) + 127) / 128 * 128)
    TAKE(a, double, CH);
    TAKE(K, bf16, CH * (Dk + 8)), TAKE(Q, bf16, CH * (Dk + 8));
    TAKE(Gam, float, CH * LF), TAKE(KK, float, CH * LF), TAKE(P, float, CH * LF), TAKE(T, float, CH * LF);
    TAKE(Tb, bf16, CH * LB), TAKE(Tl, bf16, CH * LB), TAKE(Pb, bf16, CH * LB), TAKE(Pl, bf16, CH * LB);
    TAKE(S0, float, Dk * LS), TAKE(S0b, bf16, Dk * LSB);
    TAKE(KS, float, CH * LS), TAKE(QS, float, CH * LS), TAKE(Vn, float, CH * LS);
    m->O = m->KS;
    TAKE(Yb, bf16, CH * LSB), TAKE(Yl, bf16, CH * LSB), TAKE(Vnb, bf16, CH * LSB), TAKE(Vnl, bf16, CH * LSB), TAKE(Vfb, bf16, CH * LSB), TAKE(Vfl, bf16, CH * LSB);
    TAKE(e, float, CH), TAKE(beta, float, CH), TAKE(g, float, CH), TAKE(start, int, CH);
#undef TAKE
    return off + 128;  // the base's alignment
}

extern "C" int zt_cuda_delta_tc_supported(int64_t Dk, int64_t Dv) {
    return Dk > 0 && Dk <= 128 && Dk % 16 == 0 && Dv > 0 && Dv <= 128 && Dv % 16 == 0;
}

struct tcb_smem;
static __host__ __device__ size_t tcb_layout(tcb_smem *m, char *base, int Dk);
extern "C" size_t zt_cuda_delta_tc_smem_bytes(int64_t Dk, int bwd);

// Grid (Hv * ncb, B), block NT. q, k [B*S, Hk, Dk]; v, o [B*S, Hv, Dv]; g, beta [B*S, Hv].
__global__ void __launch_bounds__(NT) delta_tc_fwd_kernel(bf16 *__restrict__ o, float *__restrict__ saved,
                                                          const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                                                          const bf16 *__restrict__ v, const float *__restrict__ g,
                                                          const float *__restrict__ beta,
                                                          const int32_t *__restrict__ pos, int S, int Hk, int Hv,
                                                          int Dk, int Dv, float scale) {
    ZT_DYNAMIC_SHARED(char, raw);
    tc_smem m;
    tc_layout(&m, (char *)(((uintptr_t)raw + 127) & ~(uintptr_t)127), Dk);
    const int ncb = (Dv + DC - 1) / DC, h = blockIdx.x / ncb, cb = blockIdx.x % ncb, b = blockIdx.y;
    const int kh = h / (Hv / Hk), c0 = cb * DC, nc = Dv - c0 < DC ? Dv - c0 : DC, tid = threadIdx.x;
    const int LK = Dk + 8, nch = (S + CH - 1) / CH;
    float *sv = saved + (int64_t)(b * Hv + h) * nch * Dk * Dv + c0;
    for (int x = tid; x < Dk * DC; x += NT) m.S0[(x / DC) * LS + x % DC] = 0.0f;  // as each thread's elements below
    for (int ch = 0; ch < nch; ch++) {
        const int t0 = ch * CH, L = S - t0 < CH ? S - t0 : CH;
        // No barrier before the load: after TF6 only e, Q S0 and O are read, none of which the load
        // writes, and each thread saves and rounds the S0 elements it zeroes (a barrier here survived
        // its removal on the CPU execution of CUDA: it ordered nothing).
        zt_delta_span_load(m.K, m.Q, LK, m.start, m.g, m.beta, m.a, k, q, g, beta, pos, b, h, kh, S, Hk, Hv, Dk, t0, L,
                           NT);
        const bool opens = zt_delta_doc_start(pos, (int64_t)b * S + t0, t0);
        for (int x = tid; x < Dk * DC; x += NT) {  // the state entering the span, saved (0 at a start)
            const int r = x / DC, c = x % DC;
            if (opens) m.S0[r * LS + c] = 0.0f;
            if (c < nc) sv[((int64_t)ch * Dk + r) * Dv + c] = m.S0[r * LS + c];
            m.S0b[r * LSB + c] = f2bf(m.S0[r * LS + c]);
        }
        __syncthreads();  // TF1: K, Q, the gates, a, S0 and its bf16 copy are in place
        zt_delta_span_gam_e(m.Gam, LF, m.e, m.a, m.g, m.start, L);  // Gam in double products, as the reference
        const int ncp = (nc + 15) & ~15;  // the block's columns, whole 16-wide tiles
        blk_mma<false, true>(m.KK, LF, pairs(m.K, m.K), LK, LK, CH, CH, Dk, false, true);
        blk_mma<false, true>(m.P, LF, pairs(m.Q, m.K), LK, LK, CH, CH, Dk, false, true);
        blk_mma<false, false>(m.KS, LS, pairs(m.K, m.S0b), LK, LSB, CH, ncp, Dk, false);
        blk_mma<false, false>(m.QS, LS, pairs(m.Q, m.S0b), LK, LSB, CH, ncp, Dk, false);
        __syncthreads();  // TF2: Gam, e, K K^T, Q K^T, K S0, Q S0 are in place
        if (tid < CH) {  // T = (I + A)^-1 column j by forward substitution, A_ij = beta_i (Gam_ij K_i . K_j)
            const int j = tid;
            for (int i = 0; i < j; i++) m.T[i * LF + j] = 0.0f, m.Tb[i * LB + j] = m.Tl[i * LB + j] = f2bf(0.0f);
            m.T[j * LF + j] = 1.0f, m.Tb[j * LB + j] = f2bf(1.0f), m.Tl[j * LB + j] = f2bf(0.0f);
            for (int i = j + 1; i < CH; i++) {
                float s = 0.0f;
                for (int mm = j; mm < i; mm++)
                    s += (m.beta[i] * (m.Gam[i * LF + mm] * m.KK[i * LF + mm])) * m.T[mm * LF + j];
                const bf16 hi = f2bf(-s);
                m.T[i * LF + j] = -s, m.Tb[i * LB + j] = hi, m.Tl[i * LB + j] = f2bf(-s - bf2f(hi));
            }
        }
        for (int x = tid; x < CH * CH; x += NT) {  // P = Gam . scale Q K^T, lower, in bf16
            const int i = x / CH, j = x % CH;
            const float p = j <= i ? m.Gam[i * LF + j] * (scale * m.P[i * LF + j]) : 0.0f;
            const bf16 hi = f2bf(p);
            m.Pb[i * LB + j] = hi, m.Pl[i * LB + j] = f2bf(p - bf2f(hi));
        }
        for (int x = tid; x < CH * DC; x += NT) {  // Y = diag(beta) (V - diag(e) K S0), in bf16
            const int i = x / DC, c = x % DC;
            const float vi = i < L && c < nc ? bf2f(v[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c]) : 0.0f;
            const float y = c < nc ? m.beta[i] * (vi - m.e[i] * m.KS[i * LS + c]) : 0.0f;
            const bf16 hi = f2bf(y);
            m.Yb[i * LSB + c] = hi, m.Yl[i * LSB + c] = f2bf(y - bf2f(hi));
        }
        __syncthreads();  // TF3: T, P, Y are in place
        // Vn = T Y as Tb Yb + Tl Yb + Tb Yl
        blk_mma<false, false>(m.Vn, LS, pairs(m.Tb, m.Yb, m.Tl, m.Yb, m.Tb, m.Yl), LB, LSB, CH, ncp, CH, false, false, 1);
        __syncthreads();  // TF4: Vn is in place
        const bool more = t0 + L < S;
        for (int x = tid; x < CH * DC; x += NT) {  // Vn and diag(f) Vn in bf16, f_i = Gam_{L-1, i}
            const int i = x / DC, c = x % DC;
            const float vn = m.Vn[i * LS + c];
            const float vf = m.Gam[(L - 1) * LF + i] * vn;
            const bf16 hn = f2bf(vn), hf = f2bf(vf);
            m.Vnb[i * LSB + c] = hn, m.Vnl[i * LSB + c] = f2bf(vn - bf2f(hn));
            m.Vfb[i * LSB + c] = hf, m.Vfl[i * LSB + c] = f2bf(vf - bf2f(hf));
        }
        if (more)
            for (int x = tid; x < Dk * DC; x += NT) m.S0[(x / DC) * LS + x % DC] *= m.e[L - 1];
        __syncthreads();  // TF5: Vn, diag(f) Vn in bf16 and e_{L-1} S0 are in place
        // O = P Vn as Pb Vnb + Pb Vnl + Pl Vnb; S0 += K^T diag(f) Vn as K^T (Vfb + Vfl)
        blk_mma<false, false>(m.O, LS, pairs(m.Pb, m.Vnb, m.Pb, m.Vnl, m.Pl, m.Vnb), LB, LSB, CH, ncp, CH, false, false, 1);
        if (more) blk_mma<true, false>(m.S0, LS, pairs(m.K, m.Vfb, m.K, m.Vfl), LK, LSB, Dk, ncp, CH, true);
        __syncthreads();  // TF6: P Vn is in place
        for (int x = tid; x < CH * DC; x += NT) {  // o = diag(e) scale Q S0 + P Vn
            const int i = x / DC, c = x % DC;
            if (c >= nc || i >= L) continue;
            o[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c] =
                f2bf(m.e[i] * (scale * m.QS[i * LS + c]) + m.O[i * LS + c]);
        }
    }
}

// ---- backward ------------------------------------------------------------------------------------
// Shared memory of a backward block (Dk = 128: within an H100's 227 KiB). Gam is not kept: its
// entries come from the cumulative log-decays (gam_at), the matrices share slots over the span:
//   T       the inverse, then dP = dO Vn^T, then -dA = dY Vn^T (fp32, [CH, LF])
//   P       Q K^T, then P = Gam . scale Q K^T, then dP . P, then dP . P + dA . A (what dg sums)
//   GK      K K^T, then Gam . K K^T (A = diag(beta) GK)
//   Tb, Tl  T's bf16 parts, then M1 = dA . diag(beta) Gam's;  Pb, Pl  P's, then M2 = dP . Gam's
//   X2      Q S0, then Vn, then dVn (fp32 [CH, LS]);  X1  K dS, then dY;  KS  K S0, then the warps'
//           staging of dk, dq tiles
//   s0, s1  Y's bf16 parts, then dVn's, then -e dR and scale e dO;  s6  dY (bf16)
struct tcb_smem {
    bf16 *K, *Q;                        // [CH, Dk + 8]
    float *GK, *P, *T;                  // [CH, LF]
    bf16 *Tb, *Tl, *Pb, *Pl;            // [CH, LB]
    bf16 *S0b, *dSb;                    // [Dk, LSB]: the state entering the span, its gradient leaving it
    float *dS;                          // [Dk, LS]: the state's gradient (fp32, the chain)
    float *KS, *X1, *X2;                // [CH, LS]
    bf16 *s0, *s1, *Vnb, *Vnl, *Vfb, *dOb, *s6;  // [CH, LSB]
    double *cum;                        // [CH] g_0 + .. + g_i
    float *e, *f, *beta, *g, *dE, *dEq, *dF, *db, *red;  // [CH] (red: [NT])
    int *seg;                           // [CH] the last document start at or before i (-1: none)
};

static __host__ __device__ size_t tcb_layout(tcb_smem *m, char *base, int Dk) {
    size_t off = 0;
#define TAKE(p, type, n) (m->p = base ? (type *)(base + off) : NULL, off += ((size_t)(n) * sizeof(type) + 127) / 128 * 128)
    TAKE(cum, double, CH);
    TAKE(K, bf16, CH * (Dk + 8)), TAKE(Q, bf16, CH * (Dk + 8));
    TAKE(GK, float, CH * LF), TAKE(P, float, CH * LF), TAKE(T, float, CH * LF);
    TAKE(Tb, bf16, CH * LB), TAKE(Tl, bf16, CH * LB), TAKE(Pb, bf16, CH * LB), TAKE(Pl, bf16, CH * LB);
    TAKE(S0b, bf16, Dk * LSB), TAKE(dSb, bf16, Dk * LSB), TAKE(dS, float, Dk * LS);
    TAKE(KS, float, CH * LS), TAKE(X1, float, CH * LS), TAKE(X2, float, CH * LS);
    TAKE(s0, bf16, CH * LSB), TAKE(s1, bf16, CH * LSB), TAKE(Vnb, bf16, CH * LSB), TAKE(Vnl, bf16, CH * LSB);
    TAKE(Vfb, bf16, CH * LSB), TAKE(dOb, bf16, CH * LSB), TAKE(s6, bf16, CH * LSB);
    TAKE(e, float, CH), TAKE(f, float, CH), TAKE(beta, float, CH), TAKE(g, float, CH), TAKE(dE, float, CH);
    TAKE(dEq, float, CH), TAKE(dF, float, CH), TAKE(db, float, CH), TAKE(red, float, NT), TAKE(seg, int, CH);
#undef TAKE
    return off + 128;
}

// Gam_ij = a_{j+1} .. a_i: zero above the diagonal and across a document start, else
// exp(cum_i - cum_j) in double, flushed below 2^-64 (the forward's products of a, to rounding).
static __device__ __forceinline__ float gam_at(const tcb_smem &m, int i, int j) {
    if (j > i || m.seg[i] > j) return 0.0f;
    const double x = exp(m.cum[i] - m.cum[j]);
    return x < TINY ? 0.0f : (float)x;
}

static __device__ __forceinline__ void split_bf16(bf16 *hi, bf16 *lo, float x) {
    const bf16 h = f2bf(x);
    *hi = h;
    if (lo) *lo = f2bf(x - bf2f(h));
}

// After TB13: this block's parts of dk and dq for the span's rows, each warp its 16 x 16 tiles of
// [CH, Dk] (through its staging, rows < L to the partials):
//   dk = (M1 + M1^T) K + scale M2^T Q + (-e dR) S0^T + (f Vn) dS^T,  dq = scale M2 K + (scale e dO) S0^T.
static __device__ void tcb_dkdq(const tcb_smem &m, float *__restrict__ dkp, float *__restrict__ dqp, int64_t part,
                                int t0, int L, int Dk, int ncp, float scale) {
    typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa_r;
    typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> fa_c;
    typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb_r;
    typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb_c;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, LK = Dk + 8, tn = Dk / 16;
    float *stage = m.KS + w * 256;
    for (int t = w; t < (CH / 16) * tn * 2; t += NW) {
        const int isq = t >= (CH / 16) * tn, tt = isq ? t - (CH / 16) * tn : t;
        const int i0 = (tt / tn) * 16, r0 = (tt % tn) * 16;
        frag_c c, cs;  // c: unscaled terms, cs: terms times scale
        wmma::fill_fragment(c, 0.0f);
        wmma::fill_fragment(cs, 0.0f);
        fa_r ar;
        fa_c ac;
        fb_r br;
        fb_c bc;
        if (!isq) {
            for (int k0 = 0; k0 < CH; k0 += 16) {
                wmma::load_matrix_sync(br, m.K + k0 * LK + r0, LK);
                if (k0 <= i0) {  // M1 (lower): its k-tiles up to the row tile
                    wmma::load_matrix_sync(ar, m.Tb + i0 * LB + k0, LB), wmma::mma_sync(c, ar, br, c);
                    wmma::load_matrix_sync(ar, m.Tl + i0 * LB + k0, LB), wmma::mma_sync(c, ar, br, c);
                }
                if (k0 >= i0) {  // M1^T, M2^T (upper): from the row tile on
                    wmma::load_matrix_sync(ac, m.Tb + k0 * LB + i0, LB), wmma::mma_sync(c, ac, br, c);
                    wmma::load_matrix_sync(ac, m.Tl + k0 * LB + i0, LB), wmma::mma_sync(c, ac, br, c);
                    wmma::load_matrix_sync(br, m.Q + k0 * LK + r0, LK);
                    wmma::load_matrix_sync(ac, m.Pb + k0 * LB + i0, LB), wmma::mma_sync(cs, ac, br, cs);
                    wmma::load_matrix_sync(ac, m.Pl + k0 * LB + i0, LB), wmma::mma_sync(cs, ac, br, cs);
                }
            }
            for (int k0 = 0; k0 < ncp; k0 += 16) {  // (-e dR) S0^T + (f Vn) dS^T over the block's columns
                wmma::load_matrix_sync(ar, m.s0 + i0 * LSB + k0, LSB);
                wmma::load_matrix_sync(bc, m.S0b + r0 * LSB + k0, LSB), wmma::mma_sync(c, ar, bc, c);
                wmma::load_matrix_sync(ar, m.Vfb + i0 * LSB + k0, LSB);
                wmma::load_matrix_sync(bc, m.dSb + r0 * LSB + k0, LSB), wmma::mma_sync(c, ar, bc, c);
            }
        } else {
            for (int k0 = 0; k0 <= i0; k0 += 16) {  // M2 (lower) K
                wmma::load_matrix_sync(br, m.K + k0 * LK + r0, LK);
                wmma::load_matrix_sync(ar, m.Pb + i0 * LB + k0, LB), wmma::mma_sync(cs, ar, br, cs);
                wmma::load_matrix_sync(ar, m.Pl + i0 * LB + k0, LB), wmma::mma_sync(cs, ar, br, cs);
            }
            for (int k0 = 0; k0 < ncp; k0 += 16) {  // (scale e dO) S0^T
                wmma::load_matrix_sync(ar, m.s1 + i0 * LSB + k0, LSB);
                wmma::load_matrix_sync(bc, m.S0b + r0 * LSB + k0, LSB), wmma::mma_sync(c, ar, bc, c);
            }
        }
        for (int x = 0; x < c.num_elements; x++) c.x[x] += scale * cs.x[x];
        __syncwarp();  // the lanes' reads of the previous tile are done
        wmma::store_matrix_sync(stage, c, 16, wmma::mem_row_major);
        __syncwarp();
        float *dst = isq ? dqp : dkp;
        for (int x = lane; x < 256; x += 32) {
            const int i = i0 + x / 16;
            if (i < L) dst[(part + t0 + i) * Dk + r0 + x % 16] = stage[x];
        }
    }
}

// One span of the backward as its phases below see it (delta_tc_bwd_kernel's loop).
struct tcb_span {
    int b, h, kh, c0, nc, t0, L, S, Hk, Hv, Dk, Dv, ncp, ch;
    const float *sv;  // the saved states of this (row, head), from this block's first column
    int64_t part;     // this block's partials of this (row, head)
    float scale;
};

// Before TB2: the span's K, Q, gates, start flags, S0 and dS in bf16, dO.
static __device__ void tcb_load(const tcb_smem &m, const tcb_span &sp, const bf16 *__restrict__ q,
                                const bf16 *__restrict__ k, const float *__restrict__ g,
                                const float *__restrict__ beta, const int32_t *__restrict__ pos,
                                const bf16 *__restrict__ dout) {
    const int b = sp.b, h = sp.h, kh = sp.kh, c0 = sp.c0, nc = sp.nc, t0 = sp.t0, L = sp.L, S = sp.S, Hk = sp.Hk, Hv = sp.Hv, Dk = sp.Dk, Dv = sp.Dv, ch = sp.ch;
    const int tid = threadIdx.x;
    const int LK = sp.Dk + 8;
    const float *sv = sp.sv;
    // the start flags into seg here (the segments below)
    zt_delta_span_load(m.K, m.Q, LK, m.seg, m.g, m.beta, NULL, k, q, g, beta, pos, b, h, kh, S, Hk, Hv, Dk, t0, L, NT);
    for (int x = tid; x < Dk * DC; x += NT) {
        const int r = x / DC, c = x % DC;
        m.S0b[r * LSB + c] = f2bf(c < nc ? sv[((int64_t)ch * Dk + r) * Dv + c] : 0.0f);
        m.dSb[r * LSB + c] = f2bf(m.dS[r * LS + c]);
    }
    for (int x = tid; x < CH * DC; x += NT) {
        const int i = x / DC, c = x % DC;
        m.dOb[i * LSB + c] = i < L && c < nc ? dout[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c] : f2bf(0.0f);
    }
}

// Between TB4 and TB5: f, dEq; GK = Gam . K K^T; P = Gam . scale Q K^T and its bf16 parts; Y's parts.
static __device__ void tcb_gam_py(const tcb_smem &m, const tcb_span &sp, const bf16 *__restrict__ v) {
    const int b = sp.b, h = sp.h, c0 = sp.c0, nc = sp.nc, t0 = sp.t0, L = sp.L, S = sp.S, Hv = sp.Hv, Dv = sp.Dv, ncp = sp.ncp;
    const int tid = threadIdx.x;
    const float scale = sp.scale;
    if (tid < CH) {  // f_i = Gam_{L-1, i}; dEq_i = scale Q S0_i . dO_i
        const int i = tid;
        m.f[i] = i < L ? gam_at(m, L - 1, i) : 0.0f;
        float s_ = 0.0f;
        for (int c = 0; c < ncp; c++) s_ += scale * m.X2[i * LS + c] * bf2f(m.dOb[i * LSB + c]);
        m.dEq[i] = s_;
    }
    for (int x = tid; x < CH * CH; x += NT) {  // GK = Gam . K K^T; P = Gam . scale Q K^T and its bf16 parts
        const int i = x / CH, j = x % CH;
        const float gm = gam_at(m, i, j);
        m.GK[i * LF + j] = j < i ? gm * m.GK[i * LF + j] : 0.0f;
        const float p = j <= i ? gm * (scale * m.P[i * LF + j]) : 0.0f;
        m.P[i * LF + j] = p;
        split_bf16(&m.Pb[i * LB + j], &m.Pl[i * LB + j], p);
    }
    for (int x = tid; x < CH * DC; x += NT) {  // Y = diag(beta) (V - diag(e) K S0), its bf16 parts
        const int i = x / DC, c = x % DC;
        const float vi = i < L && c < nc ? bf2f(v[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c]) : 0.0f;
        split_bf16(&m.s0[i * LSB + c], &m.s1[i * LSB + c], c < nc ? m.beta[i] * (vi - m.e[i] * m.KS[i * LS + c]) : 0.0f);
    }
}

// Between TB11 and TB12: dY in bf16, dv, -e dR, scale e dO; dbeta's R part and dE; the <S0, dS> shares.
static __device__ void tcb_dy(const tcb_smem &m, const tcb_span &sp, const bf16 *__restrict__ v,
                              bf16 *__restrict__ dv) {
    const int b = sp.b, h = sp.h, c0 = sp.c0, nc = sp.nc, t0 = sp.t0, L = sp.L, S = sp.S, Hv = sp.Hv;
    const int Dk = sp.Dk, Dv = sp.Dv, ch = sp.ch, tid = threadIdx.x;
    const float *sv = sp.sv;
    const float scale = sp.scale;
    for (int x = tid; x < CH * DC; x += NT) {  // dY in bf16; dR = diag(beta) dY: dv; -e dR and scale e dO in bf16
        const int i = x / DC, c = x % DC;
        const float dy = m.X1[i * LS + c], dr = m.beta[i] * dy;
        m.s6[i * LSB + c] = f2bf(dy);
        m.s0[i * LSB + c] = f2bf(-m.e[i] * dr);
        m.s1[i * LSB + c] = f2bf(scale * m.e[i] * bf2f(m.dOb[i * LSB + c]));
        if (i < L && c < nc) dv[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c] = f2bf(dr);
    }
    if (tid < CH) {  // dbeta's R part (R = V - e K S0); dE_i = e_i (Q S0_i . dO_i - K S0_i . dR_i)
        const int i = tid;
        float db = 0.0f, dr = 0.0f;
        for (int c = 0; c < nc; c++) {
            const float dy = m.X1[i * LS + c], ks = m.KS[i * LS + c];
            const float vi = i < L ? bf2f(v[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c]) : 0.0f;
            db += dy * (vi - m.e[i] * ks);
            dr += (m.beta[i] * dy) * ks;
        }
        m.db[i] = db;
        m.dE[i] = m.e[i] * (m.dEq[i] - dr);
    }
    {  // <S0, dS>, this thread's share (fp32 S0 from the saved states; summed in a fixed order)
        float s_ = 0.0f;
        for (int x = tid; x < Dk * DC; x += NT) {
            const int r = x / DC, c = x % DC;
            if (c < nc) s_ += sv[((int64_t)ch * Dk + r) * Dv + c] * m.dS[r * LS + c];
        }
        m.red[tid] = s_;
    }
}

// After TB14: dg and dbeta of the span's rows, to the partials.
static __device__ void tcb_dg(const tcb_smem &m, const tcb_span &sp, float *__restrict__ dgp,
                              float *__restrict__ dbp) {
    const int t0 = sp.t0, L = sp.L;
    const int tid = threadIdx.x;
    const int64_t part = sp.part;
    if (tid < CH) {  // dg_s = sum_{i >= s} dE_i + sum_{j < s} dF_j + sum_{i >= s, j < s} (dA . A + dP . P)_ij
        const int s_ = tid;
        float sd = 0.0f;
        for (int x = 0; x < NT; x++) sd += m.red[x];
        float pe = 0.0f, pf = 0.0f, pm = 0.0f;
        for (int r = CH - 1; r >= s_; r--) pe += r == L - 1 ? m.dE[r] + m.e[L - 1] * sd : m.dE[r];
        for (int j = 0; j < s_; j++) pf += m.dF[j];
        for (int r = s_; r < CH; r++)
            for (int j = 0; j < s_; j++) pm += m.P[r * LF + j];
        if (s_ < L) {
            dbp[part + t0 + s_] = m.db[s_];
            dgp[part + t0 + s_] = pe + pf + pm;
        }
    }
}

// Grid and block as the forward; the partials as delta_chunk.cu's (dq, dk [ncb, B, Hv, S, Dk], dg, dbeta
// [ncb, B, Hv, S], summed by zt_cuda_delta_chunk_sum). Per span, from its saved state (the formulas of
// delta_chunk_bwd_kernel), dS the gradient of the state leaving it.
__global__ void __launch_bounds__(NT) delta_tc_bwd_kernel(float *__restrict__ dqp, float *__restrict__ dkp,
                                                          float *__restrict__ dgp, float *__restrict__ dbp,
                                                          bf16 *__restrict__ dv, const bf16 *__restrict__ dout,
                                                          const float *__restrict__ saved,
                                                          const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                                                          const bf16 *__restrict__ v, const float *__restrict__ g,
                                                          const float *__restrict__ beta,
                                                          const int32_t *__restrict__ pos, int B, int S, int Hk,
                                                          int Hv, int Dk, int Dv, float scale) {
    ZT_DYNAMIC_SHARED(char, raw);
    tcb_smem m;
    tcb_layout(&m, (char *)(((uintptr_t)raw + 127) & ~(uintptr_t)127), Dk);
    const int ncb = (Dv + DC - 1) / DC, h = blockIdx.x / ncb, cb = blockIdx.x % ncb, b = blockIdx.y;
    const int kh = h / (Hv / Hk), c0 = cb * DC, nc = Dv - c0 < DC ? Dv - c0 : DC, tid = threadIdx.x;
    const int LK = Dk + 8, nch = (S + CH - 1) / CH, ncp = (nc + 15) & ~15;
    const float *sv = saved + (int64_t)(b * Hv + h) * nch * Dk * Dv + c0;
    const int64_t part = (((int64_t)cb * B + b) * Hv + h) * S;
    for (int x = tid; x < Dk * LS; x += NT) m.dS[x] = 0.0f;
    for (int ch = nch - 1; ch >= 0; ch--) {
        const int t0 = ch * CH, L = S - t0 < CH ? S - t0 : CH;
        const tcb_span sp = {b, h, kh, c0, nc, t0, L, S, Hk, Hv, Dk, Dv, ncp, ch, sv, part, scale};
        __syncthreads();  // TB1: every thread is done with the later span (and dS's update is complete)
        tcb_load(m, sp, q, k, g, beta, pos, dout);
        __syncthreads();  // TB2: K, Q, the gates, the start flags, S0, dS, dO are in place
        if (tid < CH) {  // row i: the cumulative log-decay and its segment
            const int i = tid;
            double G = 0.0;
            int sg = -1;
            for (int s_ = 0; s_ <= i; s_++) G += (double)m.g[s_], sg = m.seg[s_] ? s_ : sg;
            m.cum[i] = G;
            m.dE[i] = (float)sg;  // parked until TB3 (seg still holds the flags others read)
        } else if (tid < 2 * CH) {  // e_i, 0 from the span's first document start on
            const int i = tid - CH;
            double G = 0.0;
            bool zero = false;
            for (int s_ = 0; s_ <= i; s_++) G += (double)m.g[s_], zero = zero || m.seg[s_];
            const double ei = exp(G);
            m.e[i] = zero || i >= L || ei < TINY ? 0.0f : (float)ei;
        }
        blk_mma<false, true>(m.GK, LF, pairs(m.K, m.K), LK, LK, CH, CH, Dk, false, true);
        blk_mma<false, true>(m.P, LF, pairs(m.Q, m.K), LK, LK, CH, CH, Dk, false, true);
        blk_mma<false, false>(m.KS, LS, pairs(m.K, m.S0b), LK, LSB, CH, ncp, Dk, false);
        blk_mma<false, false>(m.X2, LS, pairs(m.Q, m.S0b), LK, LSB, CH, ncp, Dk, false);  // Q S0
        blk_mma<false, false>(m.X1, LS, pairs(m.K, m.dSb), LK, LSB, CH, ncp, Dk, false);  // K dS
        __syncthreads();  // TB3: cum, e, K K^T, Q K^T, K S0, Q S0, K dS are in place
        if (tid < CH) m.seg[tid] = (int)m.dE[tid];
        __syncthreads();  // TB4: the segments are in place
        tcb_gam_py(m, sp, v);
        __syncthreads();  // TB5: f, dEq, GK, P and its parts, Y's parts are in place (Q S0 read)
        if (tid < CH) {  // T = (I + A)^-1, column j, A_ij = beta_i GK_ij (the forward's expression order)
            const int j = tid;
            for (int i = 0; i < j; i++) m.T[i * LF + j] = 0.0f, m.Tb[i * LB + j] = m.Tl[i * LB + j] = f2bf(0.0f);
            m.T[j * LF + j] = 1.0f, m.Tb[j * LB + j] = f2bf(1.0f), m.Tl[j * LB + j] = f2bf(0.0f);
            for (int i = j + 1; i < CH; i++) {
                float s_ = 0.0f;
                for (int mm = j; mm < i; mm++) s_ += (m.beta[i] * m.GK[i * LF + mm]) * m.T[mm * LF + j];
                m.T[i * LF + j] = -s_;
                split_bf16(&m.Tb[i * LB + j], &m.Tl[i * LB + j], -s_);
            }
        }
        __syncthreads();  // TB6: T's parts are in place
        blk_mma<false, false>(m.X2, LS, pairs(m.Tb, m.s0, m.Tl, m.s0, m.Tb, m.s1), LB, LSB, CH, ncp, CH, false, false, 1);
        __syncthreads();  // TB7: Vn = T Y is in place
        for (int x = tid; x < CH * DC; x += NT) {  // Vn's bf16 parts, diag(f) Vn
            const int i = x / DC, c = x % DC;
            const float vn = m.X2[i * LS + c];
            split_bf16(&m.Vnb[i * LSB + c], &m.Vnl[i * LSB + c], vn);
            m.Vfb[i * LSB + c] = f2bf(m.f[i] * vn);
        }
        if (tid < CH) {  // dF_i = f_i (K dS)_i . Vn_i
            const int i = tid;
            float s_ = 0.0f;
            for (int c = 0; c < ncp; c++) s_ += m.X1[i * LS + c] * m.X2[i * LS + c];
            m.dF[i] = i < L ? s_ * m.f[i] : 0.0f;
        }
        __syncthreads();  // TB8: Vn's parts, diag(f) Vn, dF are in place (Vn in X2 read)
        blk_mma<false, true>(m.T, LF, pairs(m.dOb, m.Vnb, m.dOb, m.Vnl), LSB, LSB, CH, CH, ncp, false, true);  // dP
        blk_mma<true, false>(m.X2, LS, pairs(m.Pb, m.dOb, m.Pl, m.dOb), LB, LSB, CH, ncp, CH, false, false, 2);  // P^T dO
        __syncthreads();  // TB9: dP, P^T dO are in place
        for (int x = tid; x < CH * DC; x += NT) {  // dVn = P^T dO + diag(f) K dS, its bf16 parts (Y's slots)
            const int i = x / DC, c = x % DC;
            const float d = m.X2[i * LS + c] + m.f[i] * m.X1[i * LS + c];
            split_bf16(&m.s0[i * LSB + c], &m.s1[i * LSB + c], d);
        }
        for (int x = tid; x < CH * CH; x += NT) {  // M2 = dP . Gam (lower, with the diagonal); P <- dP . P
            const int i = x / CH, j = x % CH;
            const float dp = j <= i ? m.T[i * LF + j] : 0.0f;
            split_bf16(&m.Pb[i * LB + j], &m.Pl[i * LB + j], dp * gam_at(m, i, j));
            m.P[i * LF + j] = dp * m.P[i * LF + j];
        }
        __syncthreads();  // TB10: dVn's parts, M2's parts, dP . P are in place (dP, P's parts read)
        blk_mma<true, false>(m.X1, LS, pairs(m.Tb, m.s0, m.Tl, m.s0, m.Tb, m.s1), LB, LSB, CH, ncp, CH, false, false, 2);  // dY = T^T dVn
        __syncthreads();  // TB11: dY is in place (K dS, T's parts read)
        tcb_dy(m, sp, v, dv);
        __syncthreads();  // TB12: dY in bf16, -e dR, scale e dO, dbeta's R part, dE, the shares are in place
        blk_mma<false, true>(m.T, LF, pairs(m.s6, m.Vnb, m.s6, m.Vnl), LSB, LSB, CH, CH, ncp, false, true);  // -dA
        for (int x = tid; x < Dk * DC; x += NT) m.dS[(x / DC) * LS + x % DC] *= m.e[L - 1];
        __syncthreads();  // TB13: -dA = dY Vn^T and e_{L-1} dS are in place
        for (int x = tid; x < CH * CH; x += NT) {  // M1 = dA . diag(beta) Gam (strictly lower); P += dA . A
            const int i = x / CH, j = x % CH;
            const float da = j < i ? -m.T[i * LF + j] : 0.0f;
            split_bf16(&m.Tb[i * LB + j], &m.Tl[i * LB + j], da * (m.beta[i] * gam_at(m, i, j)));
            m.P[i * LF + j] += da * (m.beta[i] * m.GK[i * LF + j]);
        }
        if (tid < CH) {  // dbeta_i += dA_i . (Gam . K K^T)_i
            const int i = tid;
            float s_ = m.db[i];
            for (int j = 0; j < i; j++) s_ += -m.T[i * LF + j] * m.GK[i * LF + j];
            m.db[i] = s_;
        }
        __syncthreads();  // TB14: M1's parts, dP . P + dA . A, dbeta are in place
        tcb_dg(m, sp, dgp, dbp);
        tcb_dkdq(m, dkp, dqp, part, t0, L, Dk, ncp, scale);
        // dS <- e_{L-1} dS + Q^T (scale e dO) + K^T (-e dR): the accumulator tiles are this warp's alone
        blk_mma<true, false>(m.dS, LS, pairs(m.Q, m.s1, m.K, m.s0), LK, LSB, Dk, ncp, CH, true);
    }
}

extern "C" size_t zt_cuda_delta_tc_smem_bytes(int64_t Dk, int bwd) {
    if (bwd) {
        tcb_smem m;
        return tcb_layout(&m, NULL, (int)Dk);
    }
    tc_smem m;
    return tc_layout(&m, NULL, (int)Dk);
}

template <typename F>
static void allow_smem(F *kernel, size_t bytes) {
    ZT_CUDA_CHECK(cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

static void tc_require(int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    ZT_REQUIRE(B > 0 && S > 0 && S < (1 << 30) && Hk > 0 && Hv > 0 && Hv % Hk == 0 && B < 65536 &&
                   Hv * ((Dv + DC - 1) / DC) < (1 << 30),
               "delta rule B=%lld S=%lld Hk=%lld Hv=%lld (Hv must be a multiple of Hk)", (long long)B, (long long)S,
               (long long)Hk, (long long)Hv);
    ZT_REQUIRE(zt_cuda_delta_tc_supported(Dk, Dv),
               "tensor-core delta rule Dk=%lld Dv=%lld: the kernels take multiples of 16 up to 128", (long long)Dk,
               (long long)Dv);
}

extern "C" void zt_cuda_delta_tc_fwd(void *stream, zt_bf16 *o, float *saved, const zt_bf16 *q, const zt_bf16 *k,
                                     const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos,
                                     int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    tc_require(B, S, Hk, Hv, Dk, Dv);
    cudaStream_t st = zt_st(stream);
    const size_t smem = zt_cuda_delta_tc_smem_bytes(Dk, 0);
    allow_smem(delta_tc_fwd_kernel, smem);
    const dim3 grid((unsigned)(Hv * ((Dv + DC - 1) / DC)), (unsigned)B);
    ZT_LAUNCH(delta_tc_fwd_kernel, grid, NT, smem, st)((bf16 *)o, saved, (const bf16 *)q, (const bf16 *)k,
                                                       (const bf16 *)v, g, beta, pos, (int)S, (int)Hk, (int)Hv,
                                                       (int)Dk, (int)Dv, (float)(1.0 / sqrt((double)Dk)));
    ZT_LAUNCHED("delta_tc_fwd_kernel", st);
}

extern "C" void zt_cuda_delta_tc_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, float *dg,
                                     float *dbeta, const zt_bf16 *dout, const float *saved, const zt_bf16 *q,
                                     const zt_bf16 *k, const zt_bf16 *v, const float *g, const float *beta,
                                     const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk,
                                     int64_t Dv) {
    tc_require(B, S, Hk, Hv, Dk, Dv);
    cudaStream_t st = zt_st(stream);
    const int64_t ncb = (Dv + DC - 1) / DC, np = ncb * B * Hv * S;
    float *dqp = (float *)zt_ctx_scratch(c, zt_cuda_delta_chunk_scratch_bytes(B, S, Hv, Dk, Dv), st);
    float *dkp = dqp + np * Dk, *dgp = dkp + np * Dk, *dbp = dgp + np;
    const size_t smem = zt_cuda_delta_tc_smem_bytes(Dk, 1);
    allow_smem(delta_tc_bwd_kernel, smem);
    const dim3 grid((unsigned)(Hv * ncb), (unsigned)B);
    ZT_LAUNCH(delta_tc_bwd_kernel, grid, NT, smem, st)(dqp, dkp, dgp, dbp, (bf16 *)dv, (const bf16 *)dout, saved,
                                                       (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, g, beta,
                                                       pos, (int)B, (int)S, (int)Hk, (int)Hv, (int)Dk, (int)Dv,
                                                       (float)(1.0 / sqrt((double)Dk)));
    ZT_LAUNCHED("delta_tc_bwd_kernel", st);
    zt_cuda_delta_chunk_sum(st, dq, dk, dg, dbeta, dqp, dkp, dgp, dbp, B, S, Hk, Hv, Dk, Dv);
}
