// What a 64-token span of the chunked gated delta rule loads and derives in the same way in the
// fp32 kernels (delta_chunk.cu) and the tensor-core ones (delta_chunk_tc.cu), so that the rules
// of documents and decays have one owner: a document start (the first token of a row, or a
// position 0), the span's keys, queries and gates, the decays a = exp(g) (0 at a start: the
// recurrence zeroes its state there), Gam_ij = a_{j+1} .. a_i (lower, decays multiplied in double
// as the CPU's chunk_prep and flushed to 0 below 2^-64) and e_i = a_0 .. a_i (0 from the span's
// first document start on). Included by those two files only.
// defines: ZT_DELTA_CH, ZT_DELTA_TINY, zt_delta_doc_start, zt_delta_span_load, zt_delta_span_gam_e
#ifndef ZT_DELTA_SPAN_CUH
#define ZT_DELTA_SPAN_CUH
#include "kernels/cuda/cuda_internal.h"

#define ZT_DELTA_CH 64         // tokens per span (= the recurrence's checkpoint spacing)
#define ZT_DELTA_TINY 0x1p-64  // decays below are zero (kernels/cpu/delta_chunk.c's ZT_CHUNK_TINY)

static __device__ __forceinline__ bool zt_delta_doc_start(const int32_t *pos, int64_t row, int t) {
    return t == 0 || (pos && pos[row] == 0);
}

// The span [t0, t0 + L) of row b, value head h (key head kh), by a block of nt threads: the keys
// and queries into K, Q (rows of ldk bf16, zeros past L), and per token the start flag, g, beta
// (past L: a start, 0, 0) and a (a NULL: not computed). No barrier: the caller's follows.
static __device__ __forceinline__ void zt_delta_span_load(bf16 *K, bf16 *Q, int ldk, int *start, float *gs,
                                                          float *bs, double *a, const bf16 *k, const bf16 *q,
                                                          const float *g, const float *beta, const int32_t *pos,
                                                          int b, int h, int kh, int S, int Hk, int Hv, int Dk,
                                                          int t0, int L, int nt) {
    const int tid = threadIdx.x;
    for (int x = tid; x < ZT_DELTA_CH * Dk; x += nt) {
        const int i = x / Dk, c = x % Dk;
        const int64_t at = (((int64_t)b * S + t0 + i) * Hk + kh) * Dk + c;
        K[i * ldk + c] = i < L ? k[at] : f2bf(0.0f);
        Q[i * ldk + c] = i < L ? q[at] : f2bf(0.0f);
    }
    for (int i = tid; i < ZT_DELTA_CH; i += nt) {
        const int64_t row = (int64_t)b * S + t0 + i;
        const bool in = i < L;
        start[i] = in ? zt_delta_doc_start(pos, row, t0 + i) : 1;
        gs[i] = in ? g[row * Hv + h] : 0.0f;
        bs[i] = in ? beta[row * Hv + h] : 0.0f;
        if (a) a[i] = start[i] ? 0.0 : exp((double)gs[i]);
    }
}

// Gam (rows of ld floats, zero above the diagonal) by threads 0 .. CH-1, a column each, and e by
// threads CH .. 2 CH-1, from a, g and start (after the load's barrier). The other threads return.
static __device__ __forceinline__ void zt_delta_span_gam_e(float *Gam, int ld, float *e, const double *a,
                                                           const float *g, const int *start, int L) {
    const int tid = threadIdx.x;
    if (tid < ZT_DELTA_CH) {  // column j of Gam
        const int j = tid;
        double x = 1.0;
        for (int i = 0; i < ZT_DELTA_CH; i++) {
            if (i > j) {
                x *= a[i];
                x = x < ZT_DELTA_TINY ? 0.0 : x;
            }
            Gam[i * ld + j] = i < j ? 0.0f : (float)x;
        }
    } else if (tid < 2 * ZT_DELTA_CH) {  // e_i = exp(g_0 + .. + g_i), 0 from the span's first document start on
        const int i = tid - ZT_DELTA_CH;
        double G = 0.0;
        bool zero = false;
        for (int s = 0; s <= i; s++) G += (double)g[s], zero = zero || start[s];
        const double ei = exp(G);
        e[i] = zero || i >= L || ei < ZT_DELTA_TINY ? 0.0f : (float)ei;
    }
}
#endif
