// The gated delta rule's chunked (UT-transform) form with its products on tensor cores (WMMA
// 16x16x16, bf16 operands, fp32 accumulation): the same interface, spans, document handling and
// saved layout as delta_chunk.cu (the fp32 reference it is tested against, and still the default),
// chosen by ZT_CUDA_DELTA_TC=1. One block per (row, value head, 32 state columns), the row's
// 64-token spans in order, as there; per span:
//   K K^T, Q K^T (64 x 64 over Dk), K S0, Q S0 (64 x 32 over Dk): WMMA, S0 rounded to bf16;
//   Gam (decays in double), e, the unit-lower inverse T = (I + A)^-1 by forward substitution in
//   fp32 on CUDA cores (a thread per column, as the reference), then rounded to bf16;
//   Vn = T Y (Y = diag(beta)(V - diag(e) K S0) in bf16), O = P Vn (P = Gam . scale Q K^T in bf16):
//   WMMA; the state chain S0 <- e_{L-1} S0 + K^T diag(f) Vn: an fp32 accumulator (loaded, one
//   WMMA product added, stored back): the state itself stays fp32 from span to span.
// A document start is a zero decay as in delta_chunk.cu (Gam block-diagonal by document, e zero
// from the first start on, the state entering a span that opens a document zeroed and saved so).
// Backward: the reference kernels (delta_chunk.cu) from this forward's saved states.
// Dk, Dv multiples of 16 up to 128 (zt_cuda_delta_tc_supported); otherwise the reference runs.
// defines: zt_cuda_delta_tc_fwd, zt_cuda_delta_tc_bwd, zt_cuda_delta_tc_supported,
//          zt_cuda_delta_tc_smem_bytes
#include <mma.h>
#include <type_traits>

#include "kernels/cuda/cuda_internal.h"

using namespace nvcuda;

#define CH 64            // tokens per span
#define DC 32            // state columns per block
#define NT 256           // threads per block (8 warps)
#define NW (NT / 32)
#define LF (CH + 4)      // fp32 [CH, CH] matrices (WMMA: ld a multiple of 4 floats)
#define LB (CH + 8)      // bf16 [CH, CH] matrices (ld a multiple of 8 bf16)
#define LS (DC + 4)      // fp32 [*, DC]
#define LSB (DC + 8)     // bf16 [*, DC]
#define TINY 0x1p-64     // decays below are zero (as delta_chunk.cu)

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

extern "C" size_t zt_cuda_delta_tc_smem_bytes(int64_t Dk, int bwd) {
    (void)bwd;  // the backward runs the reference kernels
    tc_smem m;
    return tc_layout(&m, NULL, (int)Dk);
}

static __device__ __forceinline__ bool doc_start(const int32_t *pos, int64_t row, int t) {
    return t == 0 || (pos && pos[row] == 0);
}

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
    for (int x = tid; x < Dk * LS; x += NT) m.S0[x] = 0.0f;
    for (int ch = 0; ch < nch; ch++) {
        const int t0 = ch * CH, L = S - t0 < CH ? S - t0 : CH;
        __syncthreads();  // TF1: every thread is done with the previous span (its products, S0's update)
        for (int x = tid; x < CH * Dk; x += NT) {
            const int i = x / Dk, c = x % Dk;
            const int64_t at = (((int64_t)b * S + t0 + i) * Hk + kh) * Dk + c;
            m.K[i * LK + c] = i < L ? k[at] : f2bf(0.0f);
            m.Q[i * LK + c] = i < L ? q[at] : f2bf(0.0f);
        }
        for (int i = tid; i < CH; i += NT) {
            const int64_t row = (int64_t)b * S + t0 + i;
            const bool in = i < L;
            m.start[i] = in ? doc_start(pos, row, t0 + i) : 1;
            m.g[i] = in ? g[row * Hv + h] : 0.0f;
            m.beta[i] = in ? beta[row * Hv + h] : 0.0f;
            m.a[i] = m.start[i] ? 0.0 : exp((double)m.g[i]);
        }
        const bool opens = doc_start(pos, (int64_t)b * S + t0, t0);
        for (int x = tid; x < Dk * DC; x += NT) {  // the state entering the span, saved (0 at a start)
            const int r = x / DC, c = x % DC;
            if (opens) m.S0[r * LS + c] = 0.0f;
            if (c < nc) sv[((int64_t)ch * Dk + r) * Dv + c] = m.S0[r * LS + c];
            m.S0b[r * LSB + c] = f2bf(m.S0[r * LS + c]);
        }
        __syncthreads();  // TF2: K, Q, the gates, a, S0 and its bf16 copy are in place
        if (tid < CH) {  // column j of Gam (double products, as the reference)
            const int j = tid;
            double x = 1.0;
            for (int i = 0; i < CH; i++) {
                if (i > j) {
                    x *= m.a[i];
                    x = x < TINY ? 0.0 : x;
                }
                m.Gam[i * LF + j] = i < j ? 0.0f : (float)x;
            }
        } else if (tid < 2 * CH) {  // e_i = exp(g_0 + .. + g_i), 0 from the span's first document start on
            const int i = tid - CH;
            double G = 0.0;
            bool zero = false;
            for (int s = 0; s <= i; s++) G += (double)m.g[s], zero = zero || m.start[s];
            const double ei = exp(G);
            m.e[i] = zero || i >= L || ei < TINY ? 0.0f : (float)ei;
        }
        const int ncp = (nc + 15) & ~15;  // the block's columns, whole 16-wide tiles
        blk_mma<false, true>(m.KK, LF, pairs(m.K, m.K), LK, LK, CH, CH, Dk, false, true);
        blk_mma<false, true>(m.P, LF, pairs(m.Q, m.K), LK, LK, CH, CH, Dk, false, true);
        blk_mma<false, false>(m.KS, LS, pairs(m.K, m.S0b), LK, LSB, CH, ncp, Dk, false);
        blk_mma<false, false>(m.QS, LS, pairs(m.Q, m.S0b), LK, LSB, CH, ncp, Dk, false);
        __syncthreads();  // TF3: Gam, e, K K^T, Q K^T, K S0, Q S0 are in place
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
        __syncthreads();  // TF4: T, P, Y are in place
        // Vn = T Y as Tb Yb + Tl Yb + Tb Yl
        blk_mma<false, false>(m.Vn, LS, pairs(m.Tb, m.Yb, m.Tl, m.Yb, m.Tb, m.Yl), LB, LSB, CH, ncp, CH, false, false, 1);
        __syncthreads();  // TF5: Vn is in place
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
        __syncthreads();  // TF6: Vn, diag(f) Vn in bf16 and e_{L-1} S0 are in place
        // O = P Vn as Pb Vnb + Pb Vnl + Pl Vnb; S0 += K^T diag(f) Vn as K^T (Vfb + Vfl)
        blk_mma<false, false>(m.O, LS, pairs(m.Pb, m.Vnb, m.Pb, m.Vnl, m.Pl, m.Vnb), LB, LSB, CH, ncp, CH, false, false, 1);
        if (more) blk_mma<true, false>(m.S0, LS, pairs(m.K, m.Vfb, m.K, m.Vfl), LK, LSB, Dk, ncp, CH, true);
        __syncthreads();  // TF7: P Vn is in place
        for (int x = tid; x < CH * DC; x += NT) {  // o = diag(e) scale Q S0 + P Vn
            const int i = x / DC, c = x % DC;
            if (c >= nc || i >= L) continue;
            o[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c] =
                f2bf(m.e[i] * (scale * m.QS[i * LS + c]) + m.O[i * LS + c]);
        }
    }
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
    zt_cuda_delta_chunk_bwd(c, stream, dq, dk, dv, dg, dbeta, dout, saved, q, k, v, g, beta, pos, B, S, Hk, Hv, Dk, Dv);
}
