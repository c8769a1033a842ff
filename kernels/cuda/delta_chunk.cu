// The gated delta rule on the GPU in its chunked (UT-transform) form, the GPU twin of
// kernels/cpu/delta_chunk.c and the default behind zt_cuda_delta_fwd / _bwd (delta.cu keeps the
// token recurrence: ZT_CUDA_DELTA_RECUR=1). Same interface, same saved layout (the state before
// every 64-token span), bf16 q, k, v, o and fp32 state, gates and arithmetic.
//
// A chunk is a 64-token span. A document start at token s inside it is the decay a_s = 0 (the
// recurrence zeroes its state there): then Gam_ij = a_{j+1}..a_i is zero across documents, so
// A, T and P are block-diagonal and the span computes exactly what the CPU kernel's chunks cut at
// document starts compute (to summation order); e_i = a_0..a_i is zero from the first start on,
// so a span that opens a document ignores the incoming state, and the state's gradient leaving
// it is zero.
// The state's columns evolve independently (S' = e S + (diag(f) K)^T (U - W S) column by column),
// so one block runs one (row, value head, block of DC = 32 state columns) through the row's spans
// in order, the state block in shared memory; within a span the products run over the block's
// 256 threads in fp32 (decays in double as the CPU does, the 64 x 64 unit-lower inverse by
// forward substitution in fp32, a thread per column). The span's Dv-independent work (Gam, K K^T,
// Q K^T, the inverse) is redone by each column block. Backward walks the spans from last to
// first per column block, recomputes the span from its saved state and carries dS [Dk, DC];
// its sums over the state's columns (dq, dk, dg, dbeta) leave each block as partials in scratch,
// summed over column blocks and the value heads of a key head by one kernel in a fixed order
// (deterministic, no atomics). Dk, Dv <= 128 (zt_cuda_delta_supported).
// defines: zt_cuda_delta_chunk_fwd, zt_cuda_delta_chunk_bwd, zt_cuda_delta_chunk_scratch_bytes,
//          zt_cuda_delta_chunk_smem_bytes, zt_cuda_delta_chunk_sum
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/delta_span.cuh"  // the span's load, Gam and e (shared with delta_chunk_tc.cu)

#define CH ZT_DELTA_CH  // tokens per span (= the recurrence's checkpoint spacing)
#define DC 32         // state columns per block
#define NT 256        // threads per block
#define LDL (CH + 1)  // L x L matrices: a thread per column reads without bank conflicts
#define LDC (DC + 1)  // [*, DC] matrices

// Shared memory of one block (dynamic: byte offsets from its base, each array 16-byte aligned).
// K, Q rows hold Dk + 2 bf16: an odd number of 4-byte words when Dk % 4 == 0, so threads reading
// one column of different rows hit different banks. At Dk = 128: 152,064 B forward, 212,736 B
// backward (zt_cuda_delta_chunk_smem_bytes): one block per SM on an H100 (228 KB per SM).
struct chunk_smem {
    bf16 *K, *Q;                // [CH, Dk + 2]: the span's keys and (unscaled) queries
    float *Gam, *KK, *P, *T;    // [CH, LDL]: decays, K K^T, Q K^T -> P, T (backward: -> dA)
    float *dP;                  // backward: dO Vn^T
    float *S0, *dS;             // [Dk, LDC]: the state entering the span; backward: its gradient
    float *KS, *QS, *R, *Vn;    // [CH, LDC]: K S0, Qs S0, V - e KS (forward: Y), the new values
    float *dO, *X1, *X2;        // backward: dO, K dS -> dY, dVn -> dR
    double *a;                  // [CH] exp(g), 0 at a document start
    float *e, *beta, *g, *dE, *dF, *db, *red;  // [CH] (red: [NT])
    int *start;                 // [CH] token starts a document
};

static __host__ __device__ size_t smem_layout(chunk_smem *m, char *base, int Dk, int bwd) {
    size_t off = 0;
#define TAKE(p, type, n) (m->p = base ? (type *)(base + off) : NULL, off += ((size_t)(n) * sizeof(type) + 15) / 16 * 16)
    TAKE(a, double, CH);
    TAKE(K, bf16, CH * (Dk + 2)), TAKE(Q, bf16, CH * (Dk + 2));
    TAKE(Gam, float, CH * LDL), TAKE(KK, float, CH * LDL), TAKE(P, float, CH * LDL), TAKE(T, float, CH * LDL);
    TAKE(S0, float, Dk * LDC), TAKE(KS, float, CH * LDC), TAKE(QS, float, CH * LDC), TAKE(R, float, CH * LDC);
    TAKE(Vn, float, CH * LDC);
    TAKE(e, float, CH), TAKE(beta, float, CH), TAKE(g, float, CH), TAKE(start, int, CH);
    if (bwd) {
        TAKE(dP, float, CH * LDL), TAKE(dS, float, Dk * LDC), TAKE(dO, float, CH * LDC), TAKE(X1, float, CH * LDC);
        TAKE(X2, float, CH * LDC), TAKE(dE, float, CH), TAKE(dF, float, CH), TAKE(db, float, CH);
        TAKE(red, float, NT);
    } else {
        m->dP = m->dS = m->dO = m->X1 = m->X2 = m->dE = m->dF = m->db = m->red = NULL;
    }
#undef TAKE
    return off;
}

extern "C" size_t zt_cuda_delta_chunk_smem_bytes(int64_t Dk, int bwd) {
    chunk_smem m;
    return smem_layout(&m, NULL, (int)Dk, bwd);
}

// The span [t0, t0 + L) of row b, value head h (key head kh), columns [c0, c0 + nc): loads K, Q,
// the gates and document starts, and a = exp(g) (0 at a start). Then the barrier.
static __device__ void span_load(const chunk_smem &m, const bf16 *k, const bf16 *q, const float *g,
                                 const float *beta, const int32_t *pos, int b, int h, int kh, int S, int Hk,
                                 int Hv, int Dk, int t0, int L) {
    zt_delta_span_load(m.K, m.Q, Dk + 2, m.start, m.g, m.beta, m.a, k, q, g, beta, pos, b, h, kh, S, Hk, Hv, Dk, t0,
                       L, NT);
}

// The span's Dv-independent matrices (after span_load's barrier): Gam (lower, in double products
// as the CPU's chunk_prep, flushed below 2^-64), e, K K^T and Q K^T (lower; zero above).
static __device__ void span_gram(const chunk_smem &m, int Dk, int L) {
    const int tid = threadIdx.x, LK = Dk + 2;
    zt_delta_span_gam_e(m.Gam, LDL, m.e, m.a, m.g, m.start, L);
    for (int x = tid; x < CH * CH; x += NT) {
        const int i = x / CH, j = x % CH;
        float kk = 0.0f, qk = 0.0f;
        if (j <= i)
            for (int c = 0; c < Dk; c++) {
                const float kj = bf2f(m.K[j * LK + c]);
                kk += bf2f(m.K[i * LK + c]) * kj;
                qk += bf2f(m.Q[i * LK + c]) * kj;
            }
        m.KK[i * LDL + j] = kk;
        m.P[i * LDL + j] = qk;
    }
}

// KS = K S0, QS = scale Q S0 over the block's nc columns (0 beyond them).
static __device__ void span_ks(const chunk_smem &m, int Dk, int nc, float scale) {
    const int LK = Dk + 2;
    for (int x = threadIdx.x; x < CH * DC; x += NT) {
        const int i = x / DC, c = x % DC;
        float ks = 0.0f, qs = 0.0f;
        for (int r = 0; r < Dk && c < nc; r++) {
            const float s = m.S0[r * LDC + c];
            ks += bf2f(m.K[i * LK + r]) * s;
            qs += bf2f(m.Q[i * LK + r]) * s;
        }
        m.KS[i * LDC + c] = ks;
        m.QS[i * LDC + c] = scale * qs;
    }
}

// A_ij = beta_i (Gam_ij K_i . K_j) for j < i (the CPU's expression order).
static __device__ __forceinline__ float A_at(const chunk_smem &m, int i, int j) {
    return j < i ? m.beta[i] * (m.Gam[i * LDL + j] * m.KK[i * LDL + j]) : 0.0f;
}

// T = (I + A)^-1, unit lower: thread j < CH solves column j by forward substitution (no barrier
// inside: a column needs only itself), T_ij = -sum_{j <= m < i} A_im T_mj.
static __device__ void span_inverse(const chunk_smem &m) {
    const int j = threadIdx.x;
    if (j >= CH) return;
    for (int i = 0; i < j; i++) m.T[i * LDL + j] = 0.0f;
    m.T[j * LDL + j] = 1.0f;
    for (int i = j + 1; i < CH; i++) {
        float s = 0.0f;
        for (int mm = j; mm < i; mm++) s += A_at(m, i, mm) * m.T[mm * LDL + j];
        m.T[i * LDL + j] = -s;
    }
}

// Grid (Hv * ncb, B), block NT. q, k [B*S, Hk, Dk]; v, o [B*S, Hv, Dv]; g, beta [B*S, Hv].
__global__ void __launch_bounds__(NT) delta_chunk_fwd_kernel(bf16 *__restrict__ o, float *__restrict__ saved,
                                                             const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                                                             const bf16 *__restrict__ v,
                                                             const float *__restrict__ g,
                                                             const float *__restrict__ beta,
                                                             const int32_t *__restrict__ pos, int S, int Hk, int Hv,
                                                             int Dk, int Dv, float scale) {
    ZT_DYNAMIC_SHARED(char, raw);
    chunk_smem m;
    smem_layout(&m, raw, Dk, 0);
    const int ncb = (Dv + DC - 1) / DC, h = blockIdx.x / ncb, cb = blockIdx.x % ncb, b = blockIdx.y;
    const int kh = h / (Hv / Hk), c0 = cb * DC, nc = Dv - c0 < DC ? Dv - c0 : DC, tid = threadIdx.x;
    const int nch = (S + CH - 1) / CH;
    float *sv = saved + (int64_t)(b * Hv + h) * nch * Dk * Dv + c0;
    for (int x = tid; x < Dk * DC; x += NT) m.S0[(x / DC) * LDC + x % DC] = 0.0f;
    for (int ch = 0; ch < nch; ch++) {
        const int t0 = ch * CH, L = S - t0 < CH ? S - t0 : CH;
        __syncthreads();  // DF1: every thread is done with the previous span (K, Q, Gam, S0's update)
        span_load(m, k, q, g, beta, pos, b, h, kh, S, Hk, Hv, Dk, t0, L);
        const bool opens = zt_delta_doc_start(pos, (int64_t)b * S + t0, t0);
        for (int x = tid; x < Dk * DC; x += NT) {  // the state entering the span, saved (0 at a start)
            const int r = x / DC, c = x % DC;
            if (opens) m.S0[r * LDC + c] = 0.0f;
            if (c < nc) sv[((int64_t)ch * Dk + r) * Dv + c] = m.S0[r * LDC + c];
        }
        __syncthreads();  // DF2: K, Q, the gates, a and S0 are in place
        span_gram(m, Dk, L);
        span_ks(m, Dk, nc, scale);
        __syncthreads();  // DF3: Gam, e, K K^T, Q K^T, KS, QS are in place
        span_inverse(m);
        for (int x = tid; x < CH * CH; x += NT) {  // P = Gam . Q K^T (scaled), lower
            const int i = x / CH, j = x % CH;
            m.P[i * LDL + j] = j <= i ? m.Gam[i * LDL + j] * (scale * m.P[i * LDL + j]) : 0.0f;
        }
        for (int x = tid; x < CH * DC; x += NT) {  // Y = diag(beta) (V - diag(e) KS), in R
            const int i = x / DC, c = x % DC;
            if (c >= nc) continue;
            const float vi = i < L ? bf2f(v[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c]) : 0.0f;
            m.R[i * LDC + c] = m.beta[i] * (vi - m.e[i] * m.KS[i * LDC + c]);
        }
        __syncthreads();  // DF4: T, P, Y are in place
        for (int x = tid; x < CH * DC; x += NT) {  // Vn = T Y
            const int i = x / DC, c = x % DC;
            if (c >= nc) continue;
            float s = 0.0f;
            for (int j = 0; j <= i; j++) s += m.T[i * LDL + j] * m.R[j * LDC + c];
            m.Vn[i * LDC + c] = s;
        }
        __syncthreads();  // DF5: Vn is in place
        for (int x = tid; x < CH * DC; x += NT) {  // O = diag(e) QS + P Vn
            const int i = x / DC, c = x % DC;
            if (c >= nc || i >= L) continue;
            float s = m.e[i] * m.QS[i * LDC + c];
            for (int j = 0; j <= i; j++) s += m.P[i * LDL + j] * m.Vn[j * LDC + c];
            o[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c] = f2bf(s);
        }
        if (t0 + L < S) {  // S0 <- e_{L-1} S0 + (diag(f) K)^T Vn, f_i = Gam_{L-1, i}: each thread its elements
            const float eL = m.e[L - 1];
            for (int x = tid; x < Dk * DC; x += NT) {
                const int r = x / DC, c = x % DC;
                if (c >= nc) continue;
                float s = 0.0f;
                for (int i = 0; i < L; i++) s += (m.Gam[(L - 1) * LDL + i] * bf2f(m.K[i * (Dk + 2) + r])) * m.Vn[i * LDC + c];
                m.S0[r * LDC + c] = eL * m.S0[r * LDC + c] + s;
            }
        }
    }
}

// Backward, after DB8: dbeta (its dA part added) and dg of the span's rows into this block's partials.
static __device__ void span_bwd_gates(const chunk_smem &m, float *__restrict__ dgp, float *__restrict__ dbp,
                                      int64_t part, int t0, int L) {
    const int tid = threadIdx.x;
    if (tid < CH) {
        const int i = tid, s_ = tid;
        float sd = 0.0f;
        for (int x = 0; x < NT; x++) sd += m.red[x];
        // dbeta_i += dA_i . (Gam . K K^T)_i
        float db = m.db[i];
        for (int j = 0; j < i; j++) db += m.T[i * LDL + j] * (m.Gam[i * LDL + j] * m.KK[i * LDL + j]);
        // dg_s = sum_{i >= s} dE_i + sum_{j < s} dF_j + sum_{i >= s, j < s} M_ij
        float pe = 0.0f, pf = 0.0f, pm = 0.0f;
        for (int r = CH - 1; r >= s_; r--) pe += r == L - 1 ? m.dE[r] + m.e[L - 1] * sd : m.dE[r];
        for (int j = 0; j < s_; j++) pf += m.dF[j];
        for (int r = s_; r < CH; r++)
            for (int j = 0; j < s_; j++)
                pm += m.T[r * LDL + j] * A_at(m, r, j) + m.dP[r * LDL + j] * m.P[r * LDL + j];
        if (i < L) {
            dbp[part + t0 + i] = db;
            dgp[part + t0 + s_] = pe + pf + pm;
        }
    }
}

// Backward, after DB8: this block's parts of dk and dq for the span's rows.
static __device__ void span_bwd_dkdq(const chunk_smem &m, float *__restrict__ dkp, float *__restrict__ dqp,
                                     int64_t part, int t0, int L, int Dk, int nc, float scale) {
    const int tid = threadIdx.x, LK = Dk + 2;
    for (int x = tid; x < CH * Dk; x += NT) {  // the block's parts of dk, dq
        const int i = x / Dk, r = x % Dk;
        if (i >= L) continue;
        float sk = 0.0f, sq = 0.0f;
        for (int j = 0; j < CH; j++) {
            const float kj = bf2f(m.K[j * LK + r]), qj = bf2f(m.Q[j * LK + r]);
            if (j < i) {
                sk += (m.T[i * LDL + j] * (m.beta[i] * m.Gam[i * LDL + j])) * kj;
            } else if (j > i) {
                sk += (m.T[j * LDL + i] * (m.beta[j] * m.Gam[j * LDL + i])) * kj;
            }
            if (j >= i) sk += (m.dP[j * LDL + i] * m.Gam[j * LDL + i]) * (scale * qj);
            if (j <= i) sq += (m.dP[i * LDL + j] * m.Gam[i * LDL + j]) * kj;
        }
        const float ei = m.e[i], fi = m.Gam[(L - 1) * LDL + i];
        float zk = 0.0f, zq = 0.0f, zs = 0.0f;
        for (int c = 0; c < nc; c++) {
            const float s0 = m.S0[r * LDC + c];
            zk += m.X2[i * LDC + c] * s0;
            zq += m.dO[i * LDC + c] * s0;
            zs += m.Vn[i * LDC + c] * m.dS[r * LDC + c];
        }
        dkp[(part + t0 + i) * Dk + r] = sk - ei * zk + fi * zs;
        dqp[(part + t0 + i) * Dk + r] = scale * (sq + ei * zq);
    }
}

// Backward, after DB9: the state's gradient carried to the span before,
// dS <- e_{L-1} dS + Qs^T diag(e) dO - K^T diag(e) dR: each thread its elements.
static __device__ void span_bwd_state(const chunk_smem &m, int L, int Dk, float scale) {
    const int tid = threadIdx.x, LK = Dk + 2;
    const float eL = m.e[L - 1];
    for (int x = tid; x < Dk * DC; x += NT) {
        const int r = x / DC, c = x % DC;
        float s = 0.0f;
        for (int i = 0; i < L; i++)
            s += m.e[i] * ((scale * bf2f(m.Q[i * LK + r])) * m.dO[i * LDC + c] -
                           bf2f(m.K[i * LK + r]) * m.X2[i * LDC + c]);
        m.dS[r * LDC + c] = eL * m.dS[r * LDC + c] + s;
    }
}

// Backward, grid and block as the forward. dv assigned (the block's columns); the block's parts of
// dq, dk [ncb, B, Hv, S, Dk] and dg, dbeta [ncb, B, Hv, S] assigned into scratch. Per span, with
// Y = diag(beta) R, Vn = T Y, P = Gam . Qs K^T and dS the gradient of the state leaving the span:
//   dP = dO Vn^T;  dVn = P^T dO + diag(f) K dS;  dY = T^T dVn;  dA = -dY Vn^T (strictly lower);
//   dR = diag(beta) dY = dv;  dbeta = rows of dY . R + dA . (Gam . K K^T);
//   dE_i = e_i (QS_i . dO_i - KS_i . dR_i),  dF_i = f_i (K dS)_i . Vn_i;
//   dk_i = sum_{j<i} dA_ij beta_i Gam_ij K_j + sum_{j>i} dA_ji beta_j Gam_ji K_j + sum_{j>=i} dP_ji Gam_ji Qs_j
//          - e_i (dR S0^T)_i + f_i (Vn dS^T)_i;   dq_i = scale (sum_{j<=i} dP_ij Gam_ij K_j + e_i (dO S0^T)_i);
//   dg_s = sum_{i>=s} dE_i + sum_{j<s} dF_j + sum_{i>=s, j<s} (dA . A + dP . P)_ij  (dE_{L-1} += e_{L-1} <S0, dS>);
//   dS <- e_{L-1} dS + Qs^T diag(e) dO - K^T diag(e) dR.
__global__ void __launch_bounds__(NT) delta_chunk_bwd_kernel(float *__restrict__ dqp, float *__restrict__ dkp,
                                                             float *__restrict__ dgp, float *__restrict__ dbp,
                                                             bf16 *__restrict__ dv, const bf16 *__restrict__ dout,
                                                             const float *__restrict__ saved,
                                                             const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                                                             const bf16 *__restrict__ v, const float *__restrict__ g,
                                                             const float *__restrict__ beta,
                                                             const int32_t *__restrict__ pos, int B, int S, int Hk,
                                                             int Hv, int Dk, int Dv, float scale) {
    ZT_DYNAMIC_SHARED(char, raw);
    chunk_smem m;
    smem_layout(&m, raw, Dk, 1);
    const int ncb = (Dv + DC - 1) / DC, h = blockIdx.x / ncb, cb = blockIdx.x % ncb, b = blockIdx.y;
    const int kh = h / (Hv / Hk), c0 = cb * DC, nc = Dv - c0 < DC ? Dv - c0 : DC, tid = threadIdx.x, LK = Dk + 2;
    const int nch = (S + CH - 1) / CH;
    const float *sv = saved + (int64_t)(b * Hv + h) * nch * Dk * Dv + c0;
    const int64_t part = (((int64_t)cb * B + b) * Hv + h) * S;  // this block's rows of the partials
    for (int x = tid; x < Dk * DC; x += NT) m.dS[(x / DC) * LDC + x % DC] = 0.0f;
    for (int ch = nch - 1; ch >= 0; ch--) {
        const int t0 = ch * CH, L = S - t0 < CH ? S - t0 : CH;
        __syncthreads();  // DB1: every thread is done with the later span (and dS's update is complete)
        span_load(m, k, q, g, beta, pos, b, h, kh, S, Hk, Hv, Dk, t0, L);
        for (int x = tid; x < Dk * DC; x += NT) {
            const int r = x / DC, c = x % DC;
            m.S0[r * LDC + c] = c < nc ? sv[((int64_t)ch * Dk + r) * Dv + c] : 0.0f;
        }
        for (int x = tid; x < CH * DC; x += NT) {
            const int i = x / DC, c = x % DC;
            m.dO[i * LDC + c] = i < L && c < nc ? bf2f(dout[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c]) : 0.0f;
        }
        __syncthreads();  // DB2: K, Q, the gates, a, S0, dO are in place
        span_gram(m, Dk, L);
        span_ks(m, Dk, nc, scale);
        for (int x = tid; x < CH * DC; x += NT) {  // X1 = K dS
            const int i = x / DC, c = x % DC;
            float s = 0.0f;
            for (int r = 0; r < Dk; r++) s += bf2f(m.K[i * LK + r]) * m.dS[r * LDC + c];
            m.X1[i * LDC + c] = s;
        }
        __syncthreads();  // DB3: Gam, e, K K^T, Q K^T, KS, QS, K dS are in place
        span_inverse(m);
        for (int x = tid; x < CH * CH; x += NT) {  // P = Gam . Q K^T (scaled), lower
            const int i = x / CH, j = x % CH;
            m.P[i * LDL + j] = j <= i ? m.Gam[i * LDL + j] * (scale * m.P[i * LDL + j]) : 0.0f;
        }
        for (int x = tid; x < CH * DC; x += NT) {  // R = V - diag(e) KS
            const int i = x / DC, c = x % DC;
            const float vi = i < L && c < nc ? bf2f(v[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c]) : 0.0f;
            m.R[i * LDC + c] = vi - m.e[i] * m.KS[i * LDC + c];
        }
        __syncthreads();  // DB4: T, P, R are in place
        for (int x = tid; x < CH * DC; x += NT) {  // Vn = T diag(beta) R
            const int i = x / DC, c = x % DC;
            float s = 0.0f;
            for (int j = 0; j <= i; j++) s += m.T[i * LDL + j] * (m.beta[j] * m.R[j * LDC + c]);
            m.Vn[i * LDC + c] = s;
        }
        __syncthreads();  // DB5: Vn is in place
        for (int x = tid; x < CH * CH; x += NT) {  // dP = dO Vn^T (lower)
            const int i = x / CH, j = x % CH;
            float s = 0.0f;
            if (j <= i)
                for (int c = 0; c < nc; c++) s += m.dO[i * LDC + c] * m.Vn[j * LDC + c];
            m.dP[i * LDL + j] = s;
        }
        for (int x = tid; x < CH * DC; x += NT) {  // X2 = dVn = P^T dO + diag(f) K dS
            const int i = x / DC, c = x % DC;
            float s = 0.0f;
            for (int j = i; j < CH; j++) s += m.P[j * LDL + i] * m.dO[j * LDC + c];
            m.X2[i * LDC + c] = s + m.Gam[(L - 1) * LDL + i] * m.X1[i * LDC + c];
        }
        if (tid < CH) {  // dF_i = f_i (K dS)_i . Vn_i
            const int i = tid;
            float s = 0.0f;
            for (int c = 0; c < nc; c++) s += m.X1[i * LDC + c] * m.Vn[i * LDC + c];
            m.dF[i] = i < L ? s * m.Gam[(L - 1) * LDL + i] : 0.0f;
        }
        __syncthreads();  // DB6: dP, dVn, dF are in place (and K dS read)
        for (int x = tid; x < CH * DC; x += NT) {  // X1 = dY = T^T dVn
            const int i = x / DC, c = x % DC;
            float s = 0.0f;
            for (int j = i; j < CH; j++) s += m.T[j * LDL + i] * m.X2[j * LDC + c];
            m.X1[i * LDC + c] = s;
        }
        __syncthreads();  // DB7: dY is in place (and T read)
        for (int x = tid; x < CH * CH; x += NT) {  // dA = -dY Vn^T (strictly lower), in T
            const int i = x / CH, j = x % CH;
            float s = 0.0f;
            if (j < i)
                for (int c = 0; c < nc; c++) s += m.X1[i * LDC + c] * m.Vn[j * LDC + c];
            m.T[i * LDL + j] = -s;
        }
        for (int x = tid; x < CH * DC; x += NT) {  // dR = diag(beta) dY: dv
            const int i = x / DC, c = x % DC;
            const float dr = m.beta[i] * m.X1[i * LDC + c];
            m.X2[i * LDC + c] = dr;
            if (i < L && c < nc) dv[(((int64_t)b * S + t0 + i) * Hv + h) * Dv + c0 + c] = f2bf(dr);
        }
        if (tid < CH) {  // dbeta's R part; dE_i = e_i (QS_i . dO_i - KS_i . dR_i)
            const int i = tid;
            float db = 0.0f, dr = 0.0f, dq = 0.0f;
            for (int c = 0; c < nc; c++) {
                const float dy = m.X1[i * LDC + c];
                db += dy * m.R[i * LDC + c];
                dr += (m.beta[i] * dy) * m.KS[i * LDC + c];
                dq += m.dO[i * LDC + c] * m.QS[i * LDC + c];
            }
            m.db[i] = db;
            m.dE[i] = m.e[i] * (dq - dr);
        }
        {  // <S0, dS>, this thread's share (summed in a fixed order below)
            float s = 0.0f;
            for (int x = tid; x < Dk * DC; x += NT) s += m.S0[(x / DC) * LDC + x % DC] * m.dS[(x / DC) * LDC + x % DC];
            m.red[tid] = s;
        }
        __syncthreads();  // DB8: dA, dR, dbeta's R part, dE and the <S0, dS> shares are in place
        span_bwd_gates(m, dgp, dbp, part, t0, L);
        span_bwd_dkdq(m, dkp, dqp, part, t0, L, Dk, nc, scale);
        __syncthreads();  // DB9: dS (read above for dk and <S0, dS>) may be overwritten
        span_bwd_state(m, L, Dk, scale);
    }
}

// dq[row, kh, r] = sum over key head kh's value heads h, then over column blocks, of the partials
// (in that order); dg, dbeta [row, h] = the sum over column blocks.
__global__ void delta_chunk_sum_kernel(bf16 *__restrict__ dq, bf16 *__restrict__ dk, float *__restrict__ dg,
                                       float *__restrict__ dbeta, const float *__restrict__ dqp,
                                       const float *__restrict__ dkp, const float *__restrict__ dgp,
                                       const float *__restrict__ dbp, int64_t B, int S, int Hk, int Hv, int Dk,
                                       int ncb) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;  // over (b, t, kh, r), then (b, t, h)
    const int64_t nq = B * S * Hk * Dk, ng = B * S * Hv;
    const int group = Hv / Hk;
    if (idx < nq) {
        const int r = (int)(idx % Dk), kh = (int)((idx / Dk) % Hk);
        const int64_t bt = idx / ((int64_t)Dk * Hk), b = bt / S, t = bt % S;
        float sq = 0.0f, sk = 0.0f;
        for (int h = kh * group; h < (kh + 1) * group; h++)
            for (int cb = 0; cb < ncb; cb++) {
                const int64_t at = ((((int64_t)cb * B + b) * Hv + h) * S + t) * Dk + r;
                sq += dqp[at];
                sk += dkp[at];
            }
        dq[idx] = f2bf(sq);
        dk[idx] = f2bf(sk);
    } else if (idx < nq + ng) {
        const int64_t x = idx - nq, h = x % Hv, bt = x / Hv, b = bt / S, t = bt % S;
        float sg = 0.0f, sb = 0.0f;
        for (int cb = 0; cb < ncb; cb++) {
            const int64_t at = (((int64_t)cb * B + b) * Hv + h) * S + t;
            sg += dgp[at];
            sb += dbp[at];
        }
        dg[x] = sg;
        dbeta[x] = sb;
    }
}

// The partials: dq, dk [ncb, B, Hv, S, Dk] and dg, dbeta [ncb, B, Hv, S] fp32, ncb = ceil(Dv / 32).
extern "C" size_t zt_cuda_delta_chunk_scratch_bytes(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv) {
    const int64_t ncb = (Dv + DC - 1) / DC;
    return (size_t)(ncb * B * Hv * S * (2 * Dk + 2)) * sizeof(float);
}

template <typename F>
static void allow_smem(F *kernel, size_t bytes) {
    ZT_CUDA_CHECK(cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

static void chunk_require(int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    ZT_REQUIRE(B > 0 && S > 0 && S < (1 << 30) && Hk > 0 && Hv > 0 && Hv % Hk == 0 && B < 65536 &&
                   Hv * ((Dv + DC - 1) / DC) < (1 << 30),
               "delta rule B=%lld S=%lld Hk=%lld Hv=%lld (Hv must be a multiple of Hk)", (long long)B, (long long)S,
               (long long)Hk, (long long)Hv);
    ZT_REQUIRE(zt_cuda_delta_supported(Dk, Dv), "delta rule Dk=%lld Dv=%lld: the kernels take Dk <= 128, Dv <= 128",
               (long long)Dk, (long long)Dv);
}

extern "C" void zt_cuda_delta_chunk_fwd(void *stream, zt_bf16 *o, float *saved, const zt_bf16 *q, const zt_bf16 *k,
                                        const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos,
                                        int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    chunk_require(B, S, Hk, Hv, Dk, Dv);
    cudaStream_t st = zt_st(stream);
    const size_t smem = zt_cuda_delta_chunk_smem_bytes(Dk, 0);
    allow_smem(delta_chunk_fwd_kernel, smem);
    const dim3 grid((unsigned)(Hv * ((Dv + DC - 1) / DC)), (unsigned)B);
    ZT_LAUNCH(delta_chunk_fwd_kernel, grid, NT, smem, st)((bf16 *)o, saved, (const bf16 *)q, (const bf16 *)k,
                                                          (const bf16 *)v, g, beta, pos, (int)S, (int)Hk, (int)Hv,
                                                          (int)Dk, (int)Dv, (float)(1.0 / sqrt((double)Dk)));
    ZT_LAUNCHED("delta_chunk_fwd_kernel", st);
}

extern "C" void zt_cuda_delta_chunk_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                        float *dg, float *dbeta, const zt_bf16 *dout, const float *saved,
                                        const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v, const float *g,
                                        const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk,
                                        int64_t Hv, int64_t Dk, int64_t Dv) {
    chunk_require(B, S, Hk, Hv, Dk, Dv);
    cudaStream_t st = zt_st(stream);
    const int64_t ncb = (Dv + DC - 1) / DC, np = ncb * B * Hv * S;
    float *dqp = (float *)zt_ctx_scratch(c, zt_cuda_delta_chunk_scratch_bytes(B, S, Hv, Dk, Dv), st);
    float *dkp = dqp + np * Dk, *dgp = dkp + np * Dk, *dbp = dgp + np;
    const size_t smem = zt_cuda_delta_chunk_smem_bytes(Dk, 1);
    allow_smem(delta_chunk_bwd_kernel, smem);
    const dim3 grid((unsigned)(Hv * ncb), (unsigned)B);
    ZT_LAUNCH(delta_chunk_bwd_kernel, grid, NT, smem, st)(dqp, dkp, dgp, dbp, (bf16 *)dv, (const bf16 *)dout, saved,
                                                          (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, g, beta,
                                                          pos, (int)B, (int)S, (int)Hk, (int)Hv, (int)Dk, (int)Dv,
                                                          (float)(1.0 / sqrt((double)Dk)));
    ZT_LAUNCHED("delta_chunk_bwd_kernel", st);
    zt_cuda_delta_chunk_sum(st, dq, dk, dg, dbeta, dqp, dkp, dgp, dbp, B, S, Hk, Hv, Dk, Dv);
}

// The column blocks' partials summed in a fixed order (delta_chunk_tc.cu's backward shares them).
extern "C" void zt_cuda_delta_chunk_sum(void *stream, zt_bf16 *dq, zt_bf16 *dk, float *dg, float *dbeta,
                                        const float *dqp, const float *dkp, const float *dgp, const float *dbp,
                                        int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    cudaStream_t st = zt_st(stream);
    const int64_t ncb = (Dv + DC - 1) / DC, n = B * S * Hk * Dk + B * S * Hv;
    ZT_LAUNCH(delta_chunk_sum_kernel, zt_blocks(n, 256), 256, 0, st)((bf16 *)dq, (bf16 *)dk, dg, dbeta, dqp, dkp,
                                                                     dgp, dbp, B, (int)S, (int)Hk, (int)Hv, (int)Dk,
                                                                     (int)ncb);
    ZT_LAUNCHED("delta_chunk_sum_kernel", st);
}
