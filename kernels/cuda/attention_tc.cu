// Causal GQA attention in 64 x 64 tiles on tensor cores (WMMA, bf16 inputs, fp32 accumulation):
// the same contract as attention_tiled.cu (o, lse, document positions, tile skipping, O(H*S)
// scratch), with every product (Q K^T, P V, dO V^T, dS K, P^T dO, dS^T Q) as 16x16x16 mma_sync.
// The softmax stays fp32 on CUDA cores: a warp's score tile goes through shared memory (the
// fragments' element layout is unspecified), P and dS are rounded to bf16 for their products.
// Deterministic: no atomics; every output element is written once by one lane, and each sum runs
// in a fixed order (key tiles for o and dQ; the group's heads, then query tiles, for dK/dV).
// The queries may be a subset of the block's rows (the _rows_ entry points: attention_tiled.cu's).
// defines: zt_cuda_attention_tc_fwd, zt_cuda_attention_tc_bwd, zt_cuda_attention_tc_rows_fwd,
//          zt_cuda_attention_tc_rows_bwd, zt_cuda_attention_tc_scratch_bytes,
//          zt_cuda_attention_tc_supported, zt_cuda_attention_flash_scratch_bytes
#include <math.h>
#include <mma.h>

#include "kernels/cuda/cuda_internal.h"

using namespace nvcuda;

// 64 queries x 64 keys per tile, 4 warps. Warp w owns rows 16w .. 16w+15 of the block's tile
// (query rows in the forward and dQ kernels, key rows in dK/dV): its products are 16-row strips,
// its scores and outputs pass through its own rows of shared memory, so between a warp's stores
// and its lanes' reads a __syncwarp suffices. Lane l handles row 16w + l/2, columns
// (l&1)*32 .. +31 of a 64-wide strip; the lane pair of a row reduces with one shuffle.
#define TQ 64
#define TK 64
#define TC_THREADS 128
#define LDP (TK + 8)   // bf16 P / dS tiles [64][72]: 16-byte rows offset, 32-byte aligned strips
#define LDF (TK + 4)   // fp32 score / output strips [64][68]

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

#include "kernels/cuda/attention_tiles.cuh"

extern "C" int zt_cuda_attention_tc_supported(int64_t D) { return D > 0 && D % 16 == 0 && D <= 128; }

// rowdot[H, Sq] (one batch row at a time) and the query tiles' key spans: attention_tiled.cu's layout.
extern "C" size_t zt_cuda_attention_tc_scratch_bytes(int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    return zt_cuda_attention_tiled_scratch_bytes(S, H, Hkv, D);
}

// 64 rows (columns 0..D-1) of a [S, ld] bf16 matrix into shared bf16 [64][LDH], 16 bytes at a
// time, unconverted; rows past S are zero.
__device__ __forceinline__ void copy_tile(bf16 *dst, int LDH, const bf16 *src, int64_t ld, int row0, int S, int D,
                                          int t) {
    const int per = D / 8;
    for (int idx = t; idx < TQ * per; idx += TC_THREADS) {
        const int r = idx / per, c = (idx % per) * 8;
        uint4 u = make_uint4(0u, 0u, 0u, 0u);
        if (row0 + r < S) u = *reinterpret_cast<const uint4 *>(src + (int64_t)(row0 + r) * ld + c);
        *reinterpret_cast<uint4 *>(dst + r * LDH + c) = u;
    }
}

// The warp's 16 x 64 strip of A B^T into its rows of Sf: A [64][LDH] rows r0.., B [64][LDH]
// (B^T read column-major), summed over nd 16-wide slices of the head dimension.
__device__ __forceinline__ void strip_abt(float *Sf, const bf16 *A, const bf16 *Bm, int LDH, int r0, int nd) {
    frag_c s[4];
#pragma unroll
    for (int n = 0; n < 4; n++) wmma::fill_fragment(s[n], 0.0f);
    for (int kk = 0; kk < nd; kk++) {
        frag_a a;
        wmma::load_matrix_sync(a, A + r0 * LDH + 16 * kk, LDH);
#pragma unroll
        for (int n = 0; n < 4; n++) {
            frag_b_col b;
            wmma::load_matrix_sync(b, Bm + 16 * n * LDH + 16 * kk, LDH);
            wmma::mma_sync(s[n], a, b, s[n]);
        }
    }
#pragma unroll
    for (int n = 0; n < 4; n++) wmma::store_matrix_sync(Sf + r0 * LDF + 16 * n, s[n], LDF, wmma::mem_row_major);
}

// Shared memory: the base rounded up to 128 bytes (WMMA needs 32-byte aligned tiles), then
// `ntiles` bf16 [64][DM+8] tiles, one fp32 [64][68] strip buffer, `npd` bf16 [64][72] P/dS tiles
// and `nrow` per-row words (64 each).
template <int DM>
static size_t tc_smem_bytes(int ntiles, int npd, int nrow) {
    return 128 + (size_t)ntiles * TQ * (DM + 8) * 2 + (size_t)TQ * LDF * 4 + (size_t)npd * TQ * LDP * 2 +
           (size_t)nrow * TQ * 4;
}
__device__ __forceinline__ char *smem_base() {
    ZT_DYNAMIC_SHARED(char, raw);
    return (char *)(((uintptr_t)raw + 127) & ~(uintptr_t)127);
}

// One block per (query tile, head) of one batch row. o, q: [Sq, H*D]; k, v: [S, Hkv*D];
// lse: [H, Sq]; pos: [Sq]. qrow: NULL (the queries are the block's S rows) or query row i's block
// row (-1: padding). span: NULL (plain causal, whole block) or the query tiles' key spans.
template <int DM>
__global__ void __launch_bounds__(TC_THREADS)
    attn_tc_fwd_kernel(bf16 *__restrict__ o, float *__restrict__ lse, const bf16 *__restrict__ q,
                       const bf16 *__restrict__ k, const bf16 *__restrict__ v, const int32_t *__restrict__ pos,
                       const int32_t *__restrict__ qrow, const int2 *__restrict__ span, int Sq, int S, int H, int Hkv,
                       int D, float scale) {
    constexpr int LDH = DM + 8, NCH = DM / 64 > 0 ? DM / 64 : 1;
    bf16 *Qh = (bf16 *)smem_base(), *Kh = Qh + TQ * LDH, *Vh = Kh + TQ * LDH;
    float *Sf = (float *)(Vh + TQ * LDH);
    bf16 *Ph = (bf16 *)(Sf + TQ * LDF);
    int *rlo = (int *)(Ph + TQ * LDP), *rhi = rlo + TQ;
    const int t = threadIdx.x, w = t >> 5, lane = t & 31, r0 = 16 * w, r = r0 + lane / 2, half = lane & 1;
    const int nd = D / 16;
    const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, kh = h / (H / Hkv);  // longest rows first
    const int q0 = qt * TQ, li = q0 + r;
    const int64_t qs = (int64_t)H * D, kvs = (int64_t)Hkv * D;
    copy_tile(Qh, LDH, q + h * D, qs, q0, Sq, D, t);
    if (t < TQ) attn_row_span(rlo[t], rhi[t], pos, qrow, q0 + t, Sq);
    float m = -INFINITY, l = 0.0f, acc[NCH][32];
#pragma unroll
    for (int ch = 0; ch < NCH; ch++)
#pragma unroll
        for (int c = 0; c < 32; c++) acc[ch][c] = 0.0f;
    const int kt_end = span ? (span[qt].y < 0 ? -1 : span[qt].y / TK) : imin(q0 + TQ - 1, S - 1) / TK;
    for (int kt = span ? span[qt].x / TK : 0; kt <= kt_end; kt++) {
        const int k0 = kt * TK;
        __syncthreads();  // every warp is done with the previous K/V tile
        copy_tile(Kh, LDH, k + kh * D, kvs, k0, S, D, t);
        copy_tile(Vh, LDH, v + kh * D, kvs, k0, S, D, t);
        __syncthreads();  // K/V (and, the first time, Q, rlo and rhi) are in place
        strip_abt(Sf, Qh, Kh, LDH, r0, nd);
        __syncwarp();  // the warp's rows of Q K^T are in Sf
        const int lo = rlo[r], hi = rhi[r];
        float p[32], mt = -INFINITY;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            const int j = k0 + half * 32 + c;
            p[c] = j >= lo && j <= hi ? Sf[r * LDF + half * 32 + c] * scale : -INFINITY;
            mt = fmaxf(mt, p[c]);
        }
        const float mn = fmaxf(m, fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1)));
        const float alpha = mn == -INFINITY ? 1.0f : expf(m - mn);
        float ps = 0.0f;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            p[c] = p[c] == -INFINITY ? 0.0f : expf(p[c] - mn);
            ps += p[c];
        }
        l = l * alpha + ps + __shfl_xor_sync(0xffffffffu, ps, 1);
        m = mn;
#pragma unroll
        for (int c = 0; c < 32; c++) Ph[r * LDP + half * 32 + c] = f2bf(p[c]);
        __syncwarp();  // the warp's rows of P are in Ph, and its lanes have read their scores
        frag_a pa[4];
#pragma unroll
        for (int kk = 0; kk < 4; kk++) wmma::load_matrix_sync(pa[kk], Ph + r0 * LDP + 16 * kk, LDP);
#pragma unroll
        for (int ch = 0; ch < NCH; ch++) {  // P V in 64-column chunks of the head dimension, through Sf
            const int c0 = 64 * ch;
            if (c0 >= D) break;
#pragma unroll
            for (int n = 0; n < 4; n++) {
                if (c0 + 16 * n >= D) break;
                frag_c ov;
                wmma::fill_fragment(ov, 0.0f);
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    frag_b_row b;
                    wmma::load_matrix_sync(b, Vh + 16 * kk * LDH + c0 + 16 * n, LDH);
                    wmma::mma_sync(ov, pa[kk], b, ov);
                }
                wmma::store_matrix_sync(Sf + r0 * LDF + 16 * n, ov, LDF, wmma::mem_row_major);
            }
            __syncwarp();  // the chunk of P V is in the warp's rows of Sf
#pragma unroll
            for (int c = 0; c < 32; c++)
                if (c0 + half * 32 + c < D) acc[ch][c] = acc[ch][c] * alpha + Sf[r * LDF + half * 32 + c];
            __syncwarp();  // its lanes have read the chunk before the next one overwrites it
        }
    }
    if (li < Sq) {
        const bool ok = !qrow || qrow[li] >= 0;  // a padding row sees no key: o = 0, lse = 0
        const float inv = 1.0f / l;
        bf16 *orow = o + li * qs + h * D;
#pragma unroll
        for (int ch = 0; ch < NCH; ch++)
#pragma unroll
            for (int c = 0; c < 32; c++)
                if (64 * ch + half * 32 + c < D) orow[64 * ch + half * 32 + c] = f2bf(ok ? acc[ch][c] * inv : 0.0f);
        if (half == 0) lse[(int64_t)h * Sq + li] = ok ? m + logf(l) : 0.0f;
    }
}

// A warp's 16 x D accumulators (nd fragments) as bf16: the lane's row of them to `out` (when
// row_ok: the row exists), through the warp's rows of Sf in 64-column chunks.
template <int DM>
__device__ __forceinline__ void strip_out(bf16 *out, frag_c (&f)[DM / 16], float *Sf, int r0, int lane,
                                          int nd, bool row_ok) {
    const int r = r0 + lane / 2, half = lane & 1;
#pragma unroll
    for (int c0 = 0; c0 < DM; c0 += 64) {
        if (c0 >= 16 * nd) break;
#pragma unroll
        for (int n = 0; n < 4; n++)
            if (c0 / 16 + n < nd) wmma::store_matrix_sync(Sf + r0 * LDF + 16 * n, f[c0 / 16 + n], LDF, wmma::mem_row_major);
        __syncwarp();  // the chunk is in the warp's rows of Sf
        if (row_ok)
#pragma unroll
            for (int c = 0; c < 32; c++)
                if (c0 + half * 32 + c < 16 * nd) out[c0 + half * 32 + c] = f2bf(Sf[r * LDF + half * 32 + c]);
        __syncwarp();  // read before the next chunk overwrites it
    }
}

// dQ: one block per (query tile, head), over the key tiles its rows see (layouts as the forward's).
template <int DM>
__global__ void __launch_bounds__(TC_THREADS)
    attn_tc_dq_kernel(bf16 *__restrict__ dq, const bf16 *__restrict__ dout, const float *__restrict__ lse,
                      const float *__restrict__ rowdot, const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                      const bf16 *__restrict__ v, const int32_t *__restrict__ pos, const int32_t *__restrict__ qrow,
                      const int2 *__restrict__ span, int Sq, int S, int H, int Hkv, int D, float scale) {
    constexpr int LDH = DM + 8, NO = DM / 16;
    bf16 *Qh = (bf16 *)smem_base(), *dOh = Qh + TQ * LDH, *Kh = dOh + TQ * LDH, *Vh = Kh + TQ * LDH;
    float *Sf = (float *)(Vh + TQ * LDH);
    bf16 *dSh = (bf16 *)(Sf + TQ * LDF);
    int *rlo = (int *)(dSh + TQ * LDP), *rhi = rlo + TQ;
    const int t = threadIdx.x, w = t >> 5, lane = t & 31, r0 = 16 * w, r = r0 + lane / 2, half = lane & 1;
    const int nd = D / 16;
    const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, kh = h / (H / Hkv);
    const int q0 = qt * TQ, li = q0 + r;
    const int64_t qs = (int64_t)H * D, kvs = (int64_t)Hkv * D;
    copy_tile(Qh, LDH, q + h * D, qs, q0, Sq, D, t);
    copy_tile(dOh, LDH, dout + h * D, qs, q0, Sq, D, t);
    if (t < TQ) attn_row_span(rlo[t], rhi[t], pos, qrow, q0 + t, Sq);
    const float ls = li < Sq ? lse[(int64_t)h * Sq + li] : 0.0f, rd = li < Sq ? rowdot[(int64_t)h * Sq + li] : 0.0f;
    frag_c dqf[NO];
#pragma unroll
    for (int n = 0; n < NO; n++) wmma::fill_fragment(dqf[n], 0.0f);
    const int kt_end = span ? (span[qt].y < 0 ? -1 : span[qt].y / TK) : imin(q0 + TQ - 1, S - 1) / TK;
    for (int kt = span ? span[qt].x / TK : 0; kt <= kt_end; kt++) {
        const int k0 = kt * TK;
        __syncthreads();  // every warp is done with the previous K/V tile and dS rows
        copy_tile(Kh, LDH, k + kh * D, kvs, k0, S, D, t);
        copy_tile(Vh, LDH, v + kh * D, kvs, k0, S, D, t);
        __syncthreads();  // K/V (and, the first time, Q, dO, rlo and rhi) are in place
        strip_abt(Sf, Qh, Kh, LDH, r0, nd);
        __syncwarp();  // the warp's score rows are in Sf
        const int lo = rlo[r], hi = rhi[r];
        float p[32];
#pragma unroll
        for (int c = 0; c < 32; c++) {
            const int j = k0 + half * 32 + c;
            p[c] = j >= lo && j <= hi ? expf(Sf[r * LDF + half * 32 + c] * scale - ls) : 0.0f;
        }
        __syncwarp();  // its lanes have read their scores before dO V^T overwrites them
        strip_abt(Sf, dOh, Vh, LDH, r0, nd);
        __syncwarp();  // the warp's rows of dP are in Sf
#pragma unroll
        for (int c = 0; c < 32; c++)
            dSh[r * LDP + half * 32 + c] = f2bf(p[c] * (Sf[r * LDF + half * 32 + c] - rd) * scale);
        __syncwarp();  // the warp's rows of dS are in dSh
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {  // dQ += dS K
            frag_a a;
            wmma::load_matrix_sync(a, dSh + r0 * LDP + 16 * kk, LDP);
#pragma unroll
            for (int n = 0; n < NO; n++)
                if (n < nd) {
                    frag_b_row b;
                    wmma::load_matrix_sync(b, Kh + 16 * kk * LDH + 16 * n, LDH);
                    wmma::mma_sync(dqf[n], a, b, dqf[n]);
                }
        }
    }
    // Sf's rows were last read before the barrier above dSh's loads.
    strip_out<DM>(dq + (int64_t)imin(li, Sq - 1) * qs + h * D, dqf, Sf, r0, lane, nd, li < Sq);
}

// dK, dV: one block per (key tile, KV head), over the group's query heads and the query tiles
// that see the key tile, in that fixed order. Warp w owns key rows 16w .. 16w+15. With qrow the
// dK/dV are of the given queries only (a context rank's share of the block's).
template <int DM>
__global__ void __launch_bounds__(TC_THREADS)
    attn_tc_dkv_kernel(bf16 *__restrict__ dk, bf16 *__restrict__ dv, const bf16 *__restrict__ dout,
                       const float *__restrict__ lse, const float *__restrict__ rowdot, const bf16 *__restrict__ q,
                       const bf16 *__restrict__ k, const bf16 *__restrict__ v, const int32_t *__restrict__ pos,
                       const int32_t *__restrict__ qrow, const int2 *__restrict__ span, int Sq, int S, int H, int Hkv,
                       int D, float scale) {
    constexpr int LDH = DM + 8, NO = DM / 16;
    bf16 *Kh = (bf16 *)smem_base(), *Vh = Kh + TK * LDH, *Qh = Vh + TK * LDH, *dOh = Qh + TQ * LDH;
    float *Sf = (float *)(dOh + TQ * LDH);
    bf16 *Ph = (bf16 *)(Sf + TK * LDF), *dSh = Ph + TK * LDP;
    float *lses = (float *)(dSh + TK * LDP), *rds = lses + TQ;
    int *rlo = (int *)(rds + TQ), *rhi = rlo + TQ;
    const int t = threadIdx.x, w = t >> 5, lane = t & 31, r0 = 16 * w, r = r0 + lane / 2, half = lane & 1;
    const int nd = D / 16;
    const int kt = blockIdx.x, kh = blockIdx.y, g = H / Hkv, k0 = kt * TK, j = k0 + r;
    const int64_t qs = (int64_t)H * D, kvs = (int64_t)Hkv * D;
    const int ntiles = (Sq + TQ - 1) / TQ, k_last = imin(k0 + TK - 1, S - 1);
    copy_tile(Kh, LDH, k + kh * D, kvs, k0, S, D, t);
    copy_tile(Vh, LDH, v + kh * D, kvs, k0, S, D, t);
    frag_c dkf[NO], dvf[NO];
#pragma unroll
    for (int n = 0; n < NO; n++) wmma::fill_fragment(dkf[n], 0.0f), wmma::fill_fragment(dvf[n], 0.0f);
    for (int hg = 0; hg < g; hg++) {
        const int h = kh * g + hg;
        for (int qt = qrow ? 0 : kt; qt < ntiles; qt++) {
            // every row's document starts after this key tile, or every row is before it
            if (span && (span[qt].x > k_last || span[qt].y < k0)) continue;
            const int q0 = qt * TQ;
            __syncthreads();  // every warp is done with the previous Q/dO tile and its rows of P, dS
            copy_tile(Qh, LDH, q + h * D, qs, q0, Sq, D, t);
            copy_tile(dOh, LDH, dout + h * D, qs, q0, Sq, D, t);
            if (t < TQ) {
                const int i = q0 + t;
                attn_row_span(rlo[t], rhi[t], pos, qrow, i, Sq);
                lses[t] = i < Sq ? lse[(int64_t)h * Sq + i] : 0.0f;
                rds[t] = i < Sq ? rowdot[(int64_t)h * Sq + i] : 0.0f;
            }
            __syncthreads();  // Q, dO, lse, rowdot (and, the first time, K/V) are in place
            strip_abt(Sf, Kh, Qh, LDH, r0, nd);  // S^T: key rows x query columns
            __syncwarp();  // the warp's rows of S^T are in Sf
            float p[32];
#pragma unroll
            for (int c = 0; c < 32; c++) {
                const int qc = half * 32 + c;
                p[c] = j >= rlo[qc] && j <= rhi[qc] ? expf(Sf[r * LDF + qc] * scale - lses[qc]) : 0.0f;
                Ph[r * LDP + qc] = f2bf(p[c]);
            }
            __syncwarp();  // its lanes have read S^T before V dO^T overwrites it
            strip_abt(Sf, Vh, dOh, LDH, r0, nd);  // dP^T
            __syncwarp();  // the warp's rows of dP^T are in Sf
#pragma unroll
            for (int c = 0; c < 32; c++) {
                const int qc = half * 32 + c;
                dSh[r * LDP + qc] = f2bf(p[c] * (Sf[r * LDF + qc] - rds[qc]) * scale);
            }
            __syncwarp();  // the warp's rows of P^T and dS^T are in Ph, dSh
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {  // dV += P^T dO, dK += dS^T Q over the tile's 64 queries
                frag_a ap, as;
                wmma::load_matrix_sync(as, dSh + r0 * LDP + 16 * kk, LDP);
                wmma::load_matrix_sync(ap, Ph + r0 * LDP + 16 * kk, LDP);
#pragma unroll
                for (int n = 0; n < NO; n++)
                    if (n < nd) {
                        frag_b_row b;
                        wmma::load_matrix_sync(b, dOh + 16 * kk * LDH + 16 * n, LDH);
                        wmma::mma_sync(dvf[n], ap, b, dvf[n]);
                        wmma::load_matrix_sync(b, Qh + 16 * kk * LDH + 16 * n, LDH);
                        wmma::mma_sync(dkf[n], as, b, dkf[n]);
                    }
            }
        }
    }
    // Sf's rows were last read before the barrier above the P^T / dS^T loads.
    const int jj = imin(j, S - 1);
    strip_out<DM>(dk + (int64_t)jj * kvs + kh * D, dkf, Sf, r0, lane, nd, j < S);
    strip_out<DM>(dv + (int64_t)jj * kvs + kh * D, dvf, Sf, r0, lane, nd, j < S);
}

static void check_shape(const void *const *ptrs, int n, int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv,
                        int64_t D, const int32_t *qrow) {
    check_attention_dims(B, Sq, S, H, Hkv, D, qrow);
    ZT_REQUIRE(zt_cuda_attention_tc_supported(D) && H * Sq < (1ll << 31) / 128,
               "tensor-core attention: head_dim %lld must be a multiple of 16 and at most 128 (H*Sq = %lld)",
               (long long)D, (long long)(H * Sq));
    check_attention_aligned("tensor-core attention", ptrs, n);
}

template <int DM>
static void fwd_launch(cudaStream_t st, bf16 *o, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                       const int32_t *pos, const int32_t *qrow, const int2 *sp, int Sq, int S, int H, int Hkv, int D,
                       float scale) {
    const size_t smem = tc_smem_bytes<DM>(3, 1, 2);
    allow_smem(attn_tc_fwd_kernel<DM>, smem);
    const dim3 grid((unsigned)((Sq + TQ - 1) / TQ), (unsigned)H);
    ZT_LAUNCH(attn_tc_fwd_kernel<DM>, grid, TC_THREADS, smem, st)(o, lse, q, k, v, pos, qrow, sp, Sq, S, H, Hkv, D,
                                                                   scale);
    ZT_LAUNCHED("attn_tc_fwd_kernel", st);
}

template <int DM>
static void bwd_launch(cudaStream_t st, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const float *lse,
                       const float *rowdot, const bf16 *q, const bf16 *k, const bf16 *v, const int32_t *pos,
                       const int32_t *qrow, const int2 *sp, int Sq, int S, int H, int Hkv, int D, float scale) {
    const unsigned nqt = (unsigned)((Sq + TQ - 1) / TQ), nkt = (unsigned)((S + TK - 1) / TK);
    const size_t smem_dq = tc_smem_bytes<DM>(4, 1, 2), smem_dkv = tc_smem_bytes<DM>(4, 2, 4);
    allow_smem(attn_tc_dq_kernel<DM>, smem_dq);
    allow_smem(attn_tc_dkv_kernel<DM>, smem_dkv);
    ZT_LAUNCH(attn_tc_dq_kernel<DM>, dim3(nqt, (unsigned)H), TC_THREADS, smem_dq, st)(
        dq, dout, lse, rowdot, q, k, v, pos, qrow, sp, Sq, S, H, Hkv, D, scale);
    ZT_LAUNCHED("attn_tc_dq_kernel", st);
    ZT_LAUNCH(attn_tc_dkv_kernel<DM>, dim3(nkt, (unsigned)Hkv), TC_THREADS, smem_dkv, st)(
        dk, dv, dout, lse, rowdot, q, k, v, pos, qrow, sp, Sq, S, H, Hkv, D, scale);
    ZT_LAUNCHED("attn_tc_dkv_kernel", st);
}

extern "C" void zt_cuda_attention_tc_rows_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                              const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos,
                                              const int32_t *qrow, int64_t B, int64_t Sq, int64_t S, int64_t H,
                                              int64_t Hkv, int64_t D) {
    const void *ptrs[] = {o, q, k, v};
    check_shape(ptrs, 4, B, Sq, S, H, Hkv, D, qrow);
    cudaStream_t st = zt_st(stream);
    const float scale = 1.0f / sqrtf((float)D);
    char *scratch =
        pos || qrow ? (char *)zt_ctx_scratch(c, zt_cuda_attention_tc_scratch_bytes(Sq, H, Hkv, D), st) : NULL;
    const int64_t qs = H * D, kvs = Hkv * D;
    for (int64_t b = 0; b < B; b++) {  // one batch row at a time: the scratch does not grow with B
        const int32_t *pb = pos ? pos + b * Sq : NULL;
        const int2 *sp = tile_spans(st, scratch, pb, qrow, Sq, S, H);
        bf16 *ob = (bf16 *)o + b * Sq * qs;
        const bf16 *qb = (const bf16 *)q + b * Sq * qs, *kb = (const bf16 *)k + b * S * kvs,
                   *vb = (const bf16 *)v + b * S * kvs;
        if (D <= 64)
            fwd_launch<64>(st, ob, lse + b * H * Sq, qb, kb, vb, pb, qrow, sp, (int)Sq, (int)S, (int)H, (int)Hkv,
                           (int)D, scale);
        else
            fwd_launch<128>(st, ob, lse + b * H * Sq, qb, kb, vb, pb, qrow, sp, (int)Sq, (int)S, (int)H, (int)Hkv,
                            (int)D, scale);
    }
}

extern "C" void zt_cuda_attention_tc_rows_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                              const zt_bf16 *dout, const zt_bf16 *o, const float *lse,
                                              const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                                              const int32_t *pos, const int32_t *qrow, int64_t B, int64_t Sq,
                                              int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const void *ptrs[] = {dq, dk, dv, dout, q, k, v};
    check_shape(ptrs, 7, B, Sq, S, H, Hkv, D, qrow);
    cudaStream_t st = zt_st(stream);
    const float scale = 1.0f / sqrtf((float)D);
    char *scratch = (char *)zt_ctx_scratch(c, zt_cuda_attention_tc_scratch_bytes(Sq, H, Hkv, D), st);
    float *rowdot = (float *)scratch;
    const int64_t qs = H * D, kvs = Hkv * D;
    for (int64_t b = 0; b < B; b++) {
        const int32_t *pb = pos ? pos + b * Sq : NULL;
        const int2 *sp = tile_spans(st, scratch, pb, qrow, Sq, S, H);
        const int64_t qo = b * Sq * qs, ko = b * S * kvs;
        ZT_LAUNCH(attn_rowdot_kernel, zt_blocks(H * Sq, 8), 256, 0, st)(
            rowdot, (const bf16 *)dout + qo, (const bf16 *)o + qo, (int)Sq, (int)H, (int)D);
        ZT_LAUNCHED("attn_rowdot_kernel", st);
        if (D <= 64)
            bwd_launch<64>(st, (bf16 *)dq + qo, (bf16 *)dk + ko, (bf16 *)dv + ko, (const bf16 *)dout + qo,
                           lse + b * H * Sq, rowdot, (const bf16 *)q + qo, (const bf16 *)k + ko, (const bf16 *)v + ko,
                           pb, qrow, sp, (int)Sq, (int)S, (int)H, (int)Hkv, (int)D, scale);
        else
            bwd_launch<128>(st, (bf16 *)dq + qo, (bf16 *)dk + ko, (bf16 *)dv + ko, (const bf16 *)dout + qo,
                            lse + b * H * Sq, rowdot, (const bf16 *)q + qo, (const bf16 *)k + ko, (const bf16 *)v + ko,
                            pb, qrow, sp, (int)Sq, (int)S, (int)H, (int)Hkv, (int)D, scale);
    }
}

extern "C" void zt_cuda_attention_tc_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                         const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S,
                                         int64_t H, int64_t Hkv, int64_t D) {
    zt_cuda_attention_tc_rows_fwd(c, stream, o, lse, q, k, v, pos, NULL, B, S, S, H, Hkv, D);
}

extern "C" void zt_cuda_attention_tc_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                         const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                         const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S,
                                         int64_t H, int64_t Hkv, int64_t D) {
    zt_cuda_attention_tc_rows_bwd(c, stream, dq, dk, dv, dout, o, lse, q, k, v, pos, NULL, B, S, S, H, Hkv, D);
}

// ---- the tiled kind's scratch: tensor cores where they apply, the scalar tiled kernels otherwise ------
// (the choice between them: kernels/cuda/attention/dispatch.c)
extern "C" size_t zt_cuda_attention_flash_scratch_bytes(int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const size_t a = zt_cuda_attention_tc_scratch_bytes(S, H, Hkv, D),
                 b = zt_cuda_attention_tiled_scratch_bytes(S, H, Hkv, D);
    return a > b ? a : b;
}
