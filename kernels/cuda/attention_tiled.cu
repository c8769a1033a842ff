// Causal GQA attention in tiles (flash-attention style) without any S x S buffer: the
// forward runs an online softmax over 64-key tiles of K/V held in shared memory and keeps
// o (bf16) and lse [B,H,S] (fp32); the backward recomputes P per tile from q, k and lse.
// Tiles wholly above the diagonal are never visited, nor (with document positions) tiles
// wholly before a query tile's earliest document start. Scratch: the row dot do.o and the
// query tiles' first keys, O(H*S) (kernels/cuda/zt_cuda.h). fp32 math on CUDA cores (no
// tensor cores yet: the CPU execution of the CUDA model runs plain CUDA C++ only). Head dims:
// any multiple of 8 up to 256 (64-, 128- and 256-column variants; Qwen3 uses 128, Qwen3.5's
// gated full attention 256).
// Deterministic: no atomics; dK/dV of a key tile are summed over the group's query heads
// and query tiles by one block in a fixed order, dQ by a second kernel over key tiles.
// The queries may be a subset of the block's rows (context parallelism: a rank's held rows, each
// at its block row, against the whole block's K/V); the whole block is the map-less case.
// defines: zt_cuda_attention_tiled_fwd, zt_cuda_attention_tiled_bwd, zt_cuda_attention_tiled_rows_fwd,
//          zt_cuda_attention_tiled_rows_bwd, zt_cuda_attention_tiled_scratch_bytes
#include <math.h>

#include "kernels/cuda/cuda_internal.h"

// 64 queries x 64 keys per tile. Forward and dQ: 128 threads, thread t owns query rows
// 4*(t/8) .. +3 and, of each 64-wide row of scores, the columns t%8 + 8c (c < 8); of an
// output row the columns t%8 + 8c (c < D/8). dK/dV: 256 threads, 2 key rows each. A row's
// 8 column lanes sit in one warp, so row reductions are 3 shuffles and a row of P or dS
// that a thread writes to shared memory is read back only by its own warp (__syncwarp).
#define TQ 64
#define TK 64
#define FWD_THREADS 128
#define DKV_THREADS 256

// Shared-memory tiles of q, k, v, dO: fp32 rows padded by one word up to head_dim 128; at 256
// bf16 rows (the inputs' own values: the conversion to fp32 is exact, so the math is the same)
// padded by two elements, 129 words a row as at 128, so a tile takes the bytes of a 128-wide fp32
// one and the blocks stay within a GPU's per-block shared memory (113.5 / 145.75 / 162.5 KiB for
// the forward / dQ / dK-dV kernels at either width; fp32 at 256 would need 209 / 273 / 290 KiB).
template <int DM>
struct tile_elem {
    typedef float T;
    static constexpr int LD = DM + 1;
};
template <>
struct tile_elem<256> {
    typedef bf16 T;
    static constexpr int LD = 256 + 2;
};

#include "kernels/cuda/attention_tiles.cuh"

// rowdot[H, Sq] (one batch row at a time) and the query tiles' key spans, int2[ceil(Sq/64)]; Sq:
// the query rows (the block's S, or a context rank's held rows).
extern "C" size_t zt_cuda_attention_tiled_scratch_bytes(int64_t Sq, int64_t H, int64_t Hkv, int64_t D) {
    (void)Hkv, (void)D;
    return round256((size_t)(H * Sq) * sizeof(float)) + round256((size_t)((Sq + TQ - 1) / TQ) * 2 * sizeof(int));
}

// 64 rows of a [S, ld] bf16 matrix (columns 0..D-1) into shared [64][LD] (fp32 or bf16); rows
// past S are zero.
template <typename T>
__device__ __forceinline__ void load_tile(T *dst, int LD, const bf16 *src, int64_t ld, int row0, int S, int D, int t,
                                          int nthreads) {
    const int per = D / 8;
    for (int idx = t; idx < TQ * per; idx += nthreads) {
        const int r = idx / per, c = (idx % per) * 8;
        float f[8];
        if (row0 + r < S)
            load8(f, src + (int64_t)(row0 + r) * ld + c);
        else
#pragma unroll
            for (int e = 0; e < 8; e++) f[e] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e++) st_f32(dst, r * LD + c + e, f[e]);
    }
}

// acc[i][c] += sum_e A[r0 + i][e] * B[tx + 8c][e]: rows of A against rows of B (scores).
template <int R, typename T>
__device__ __forceinline__ void dot_rows(float (&acc)[R][8], const T *A, const T *Bm, int LD, int r0, int tx, int D) {
    for (int e = 0; e < D; e++) {
        float a[R], b[8];
#pragma unroll
        for (int i = 0; i < R; i++) a[i] = ld_f32(A, (r0 + i) * LD + e);
#pragma unroll
        for (int c = 0; c < 8; c++) b[c] = ld_f32(Bm, (tx + 8 * c) * LD + e);
#pragma unroll
        for (int i = 0; i < R; i++)
#pragma unroll
            for (int c = 0; c < 8; c++) acc[i][c] += a[i] * b[c];
    }
}

// acc[i][c] += sum_j P[r0 + i][j] * Bm[j][tx + 8c] over j < 64, c < nc (P [64][LDP], Bm [64][LD]).
template <int R, int NC, typename T>
__device__ __forceinline__ void mul_tile(float (&acc)[R][NC], const float *P, int LDP, const T *Bm, int LD, int r0,
                                         int tx, int nc) {
    for (int j = 0; j < TK; j++) {
        float p[R];
#pragma unroll
        for (int i = 0; i < R; i++) p[i] = P[(r0 + i) * LDP + j];
#pragma unroll
        for (int c = 0; c < NC; c++)
            if (c < nc) {
                const float b = ld_f32(Bm, j * LD + tx + 8 * c);
#pragma unroll
                for (int i = 0; i < R; i++) acc[i][c] += p[i] * b;
            }
    }
}

__device__ __forceinline__ float max8(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
}
__device__ __forceinline__ float sum8(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    return v + __shfl_xor_sync(0xffffffffu, v, 4);
}

// Shared memory of the forward and dQ kernels: Q and dO (dQ) or Q (forward), K, V as rows
// padded to LD (a row per lane reads without bank conflicts: tile_elem), P or dS [64][65] fp32.
template <int DM>
static size_t fwd_smem_bytes(int with_do) {
    return (size_t)((3 + with_do) * TQ * tile_elem<DM>::LD) * sizeof(typename tile_elem<DM>::T) +
           (size_t)(TQ * (TK + 1)) * sizeof(float) + 2 * TQ * sizeof(int);
}

// One block per (query tile, head) of one batch row. o, q: [Sq, H*D]; k, v: [S, Hkv*D];
// lse: [H, Sq]; pos: [Sq]. qrow: NULL (the queries are the block's S rows) or query row i's block
// row (-1: padding). span: NULL (plain causal, whole block) or the query tiles' key spans.
template <int DM>
__global__ void __launch_bounds__(FWD_THREADS)
    attn_tiled_fwd_kernel(bf16 *__restrict__ o, float *__restrict__ lse, const bf16 *__restrict__ q,
                          const bf16 *__restrict__ k, const bf16 *__restrict__ v, const int32_t *__restrict__ pos,
                          const int32_t *__restrict__ qrow, const int2 *__restrict__ span, int Sq, int S, int H,
                          int Hkv, int D, float scale) {
    typedef typename tile_elem<DM>::T T;
    constexpr int LD = tile_elem<DM>::LD, LDP = TK + 1, NC = DM / 8;
    ZT_DYNAMIC_SHARED(float, smem);
    T *Qs = (T *)smem, *Ks = Qs + TQ * LD, *Vs = Ks + TQ * LD;
    float *Ps = (float *)(Vs + TQ * LD);
    int *rlo = (int *)(Ps + TQ * LDP), *rhi = rlo + TQ;
    const int t = threadIdx.x, ty = t >> 3, tx = t & 7, r0 = ty * 4, nc = D / 8;
    const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, kh = h / (H / Hkv);  // longest rows first
    const int q0 = qt * TQ;
    const int64_t qs = (int64_t)H * D, kvs = (int64_t)Hkv * D;
    load_tile(Qs, LD, q + h * D, qs, q0, Sq, D, t, FWD_THREADS);
    if (t < TQ) attn_row_span(rlo[t], rhi[t], pos, qrow, q0 + t, Sq);
    float m[4], l[4], acc[4][NC];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY, l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++) acc[i][c] = 0.0f;
    }
    const int kt_end = span ? (span[qt].y < 0 ? -1 : span[qt].y / TK) : imin(q0 + TQ - 1, S - 1) / TK;
    for (int kt = span ? span[qt].x / TK : 0; kt <= kt_end; kt++) {
        const int k0 = kt * TK;
        __syncthreads();  // every warp is done with the previous K/V tile and its rows of P
        load_tile(Ks, LD, k + kh * D, kvs, k0, S, D, t, FWD_THREADS);
        load_tile(Vs, LD, v + kh * D, kvs, k0, S, D, t, FWD_THREADS);
        __syncthreads();  // K/V (and, the first time, Q, rlo and rhi) are in place
        float s[4][8] = {};
        dot_rows<4>(s, Qs, Ks, LD, r0, tx, D);
        float p[4][8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int lo = rlo[r0 + i], hi = rhi[r0 + i];
            float mt = -INFINITY;
#pragma unroll
            for (int c = 0; c < 8; c++) {
                const int j = k0 + tx + 8 * c;
                s[i][c] = j >= lo && j <= hi ? s[i][c] * scale : -INFINITY;
                mt = fmaxf(mt, s[i][c]);
            }
            const float mn = fmaxf(m[i], max8(mt));
            const float alpha = mn == -INFINITY ? 1.0f : expf(m[i] - mn);
            float ps = 0.0f;
#pragma unroll
            for (int c = 0; c < 8; c++) {
                p[i][c] = s[i][c] == -INFINITY ? 0.0f : expf(s[i][c] - mn);
                ps += p[i][c];
            }
            l[i] = l[i] * alpha + sum8(ps);
            m[i] = mn;
#pragma unroll
            for (int c = 0; c < NC; c++) acc[i][c] *= alpha;
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int c = 0; c < 8; c++) Ps[(r0 + i) * LDP + tx + 8 * c] = p[i][c];
        __syncwarp();  // the row's 8 lanes (one warp) wrote P
        mul_tile<4, NC>(acc, Ps, LDP, Vs, LD, r0, tx, nc);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int li = q0 + r0 + i;
        if (li >= Sq) continue;
        const bool ok = !qrow || qrow[li] >= 0;  // a padding row sees no key: o = 0, lse = 0
        const float inv = 1.0f / l[i];
        bf16 *orow = o + li * qs + h * D;
#pragma unroll
        for (int c = 0; c < NC; c++)
            if (c < nc) orow[tx + 8 * c] = f2bf(ok ? acc[i][c] * inv : 0.0f);
        if (tx == 0) lse[(int64_t)h * Sq + li] = ok ? m[i] + logf(l[i]) : 0.0f;
    }
}

// P and dS of one score tile, in place: s holds q.k (unscaled), dp holds dO.v.
__device__ __forceinline__ void tile_p_ds(float &s, float &dp, bool vis, float lse, float rowdot, float scale) {
    const float p = vis ? expf(s * scale - lse) : 0.0f;
    dp = p * (dp - rowdot) * scale;
    s = p;
}

// dQ: one block per (query tile, head), over the key tiles its rows see (layouts as the forward's).
template <int DM>
__global__ void __launch_bounds__(FWD_THREADS)
    attn_tiled_dq_kernel(bf16 *__restrict__ dq, const bf16 *__restrict__ dout, const float *__restrict__ lse,
                         const float *__restrict__ rowdot, const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                         const bf16 *__restrict__ v, const int32_t *__restrict__ pos, const int32_t *__restrict__ qrow,
                         const int2 *__restrict__ span, int Sq, int S, int H, int Hkv, int D, float scale) {
    typedef typename tile_elem<DM>::T T;
    constexpr int LD = tile_elem<DM>::LD, LDP = TK + 1, NC = DM / 8;
    ZT_DYNAMIC_SHARED(float, smem);
    T *Qs = (T *)smem, *dOs = Qs + TQ * LD, *Ks = dOs + TQ * LD, *Vs = Ks + TQ * LD;
    float *dSs = (float *)(Vs + TQ * LD);
    int *rlo = (int *)(dSs + TQ * LDP), *rhi = rlo + TQ;
    const int t = threadIdx.x, ty = t >> 3, tx = t & 7, r0 = ty * 4, nc = D / 8;
    const int qt = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, kh = h / (H / Hkv);
    const int q0 = qt * TQ;
    const int64_t qs = (int64_t)H * D, kvs = (int64_t)Hkv * D;
    load_tile(Qs, LD, q + h * D, qs, q0, Sq, D, t, FWD_THREADS);
    load_tile(dOs, LD, dout + h * D, qs, q0, Sq, D, t, FWD_THREADS);
    if (t < TQ) attn_row_span(rlo[t], rhi[t], pos, qrow, q0 + t, Sq);
    float ls[4], rd[4], acc[4][NC];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int li = q0 + r0 + i;
        ls[i] = li < Sq ? lse[(int64_t)h * Sq + li] : 0.0f;
        rd[i] = li < Sq ? rowdot[(int64_t)h * Sq + li] : 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++) acc[i][c] = 0.0f;
    }
    const int kt_end = span ? (span[qt].y < 0 ? -1 : span[qt].y / TK) : imin(q0 + TQ - 1, S - 1) / TK;
    for (int kt = span ? span[qt].x / TK : 0; kt <= kt_end; kt++) {
        const int k0 = kt * TK;
        __syncthreads();  // every warp is done with the previous K/V tile and its rows of dS
        load_tile(Ks, LD, k + kh * D, kvs, k0, S, D, t, FWD_THREADS);
        load_tile(Vs, LD, v + kh * D, kvs, k0, S, D, t, FWD_THREADS);
        __syncthreads();  // K/V (and, the first time, Q, dO, rlo and rhi) are in place
        float s[4][8] = {}, dp[4][8] = {};
        dot_rows<4>(s, Qs, Ks, LD, r0, tx, D);
        dot_rows<4>(dp, dOs, Vs, LD, r0, tx, D);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int lo = rlo[r0 + i], hi = rhi[r0 + i];
#pragma unroll
            for (int c = 0; c < 8; c++) {
                const int j = k0 + tx + 8 * c;
                tile_p_ds(s[i][c], dp[i][c], j >= lo && j <= hi, ls[i], rd[i], scale);
                dSs[(r0 + i) * LDP + tx + 8 * c] = dp[i][c];
            }
        }
        __syncwarp();  // the row's 8 lanes (one warp) wrote dS
        mul_tile<4, NC>(acc, dSs, LDP, Ks, LD, r0, tx, nc);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int li = q0 + r0 + i;
        if (li >= Sq) continue;
        bf16 *row = dq + li * qs + h * D;
#pragma unroll
        for (int c = 0; c < NC; c++)
            if (c < nc) row[tx + 8 * c] = f2bf(acc[i][c]);
    }
}

template <int DM>
static size_t dkv_smem_bytes() {
    return (size_t)(4 * TQ * tile_elem<DM>::LD) * sizeof(typename tile_elem<DM>::T) +
           (size_t)(2 * TK * (TQ + 1) + 2 * TQ) * sizeof(float) + 2 * TQ * sizeof(int);
}

// dK, dV: one block per (key tile, KV head), over the group's query heads and the query
// tiles that see the key tile, in that fixed order. 256 threads: thread t owns key rows
// 2*(t/8) .. +1; of a 64-query tile the columns t%8 + 8c; of dK/dV the columns t%8 + 8c.
// With qrow the dK/dV are of the given queries only (a context rank's share of the block's).
template <int DM>
__global__ void __launch_bounds__(DKV_THREADS)
    attn_tiled_dkv_kernel(bf16 *__restrict__ dk, bf16 *__restrict__ dv, const bf16 *__restrict__ dout,
                          const float *__restrict__ lse, const float *__restrict__ rowdot, const bf16 *__restrict__ q,
                          const bf16 *__restrict__ k, const bf16 *__restrict__ v, const int32_t *__restrict__ pos,
                          const int32_t *__restrict__ qrow, const int2 *__restrict__ span, int Sq, int S, int H,
                          int Hkv, int D, float scale) {
    typedef typename tile_elem<DM>::T T;
    constexpr int LD = tile_elem<DM>::LD, LDP = TQ + 1, NC = DM / 8;
    ZT_DYNAMIC_SHARED(float, smem);
    T *Ks = (T *)smem, *Vs = Ks + TK * LD, *Qs = Vs + TK * LD, *dOs = Qs + TQ * LD;
    float *Ps = (float *)(dOs + TQ * LD);
    float *dSs = Ps + TK * LDP, *lses = dSs + TK * LDP, *rds = lses + TQ;
    int *rlo = (int *)(rds + TQ), *rhi = rlo + TQ;
    const int t = threadIdx.x, ty = t >> 3, tx = t & 7, r0 = ty * 2, nc = D / 8;
    const int kt = blockIdx.x, kh = blockIdx.y, g = H / Hkv, k0 = kt * TK;
    const int64_t qs = (int64_t)H * D, kvs = (int64_t)Hkv * D;
    const int ntiles = (Sq + TQ - 1) / TQ, k_last = imin(k0 + TK - 1, S - 1);
    load_tile(Ks, LD, k + kh * D, kvs, k0, S, D, t, DKV_THREADS);
    load_tile(Vs, LD, v + kh * D, kvs, k0, S, D, t, DKV_THREADS);
    float adk[2][NC], adv[2][NC];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int c = 0; c < NC; c++) adk[i][c] = adv[i][c] = 0.0f;
    for (int hg = 0; hg < g; hg++) {
        const int h = kh * g + hg;
        for (int qt = qrow ? 0 : kt; qt < ntiles; qt++) {
            // every row's document starts after this key tile, or every row is before it
            if (span && (span[qt].x > k_last || span[qt].y < k0)) continue;
            const int q0 = qt * TQ;
            __syncthreads();  // every warp is done with the previous Q/dO tile and its rows of P, dS
            load_tile(Qs, LD, q + h * D, qs, q0, Sq, D, t, DKV_THREADS);
            load_tile(dOs, LD, dout + h * D, qs, q0, Sq, D, t, DKV_THREADS);
            if (t < TQ) {
                const int li = q0 + t;
                attn_row_span(rlo[t], rhi[t], pos, qrow, li, Sq);
                lses[t] = li < Sq ? lse[(int64_t)h * Sq + li] : 0.0f;
                rds[t] = li < Sq ? rowdot[(int64_t)h * Sq + li] : 0.0f;
            }
            __syncthreads();  // Q, dO, lse, rowdot (and, the first time, K/V) are in place
            float s[2][8] = {}, dp[2][8] = {};
            dot_rows<2>(s, Ks, Qs, LD, r0, tx, D);   // s[i][c] = k_{r0+i} . q_{tx+8c}
            dot_rows<2>(dp, Vs, dOs, LD, r0, tx, D);  // dp[i][c] = v_{r0+i} . dO_{tx+8c}
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int j = k0 + r0 + i;
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    const int qc = tx + 8 * c;
                    tile_p_ds(s[i][c], dp[i][c], j >= rlo[qc] && j <= rhi[qc], lses[qc], rds[qc], scale);
                    Ps[(r0 + i) * LDP + qc] = s[i][c];
                    dSs[(r0 + i) * LDP + qc] = dp[i][c];
                }
            }
            __syncwarp();  // the key row's 8 lanes (one warp) wrote P and dS
            mul_tile<2, NC>(adv, Ps, LDP, dOs, LD, r0, tx, nc);   // dV += P^T dO
            mul_tile<2, NC>(adk, dSs, LDP, Qs, LD, r0, tx, nc);  // dK += dS^T Q
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int j = k0 + r0 + i;
        if (j >= S) continue;
#pragma unroll
        for (int c = 0; c < NC; c++)
            if (c < nc) {
                dk[(int64_t)j * kvs + kh * D + tx + 8 * c] = f2bf(adk[i][c]);
                dv[(int64_t)j * kvs + kh * D + tx + 8 * c] = f2bf(adv[i][c]);
            }
    }
}

static void check_shape(const void *const *ptrs, int n, int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv,
                        int64_t D, const int32_t *qrow) {
    check_attention_dims(B, Sq, S, H, Hkv, D, qrow);
    ZT_REQUIRE(D % 8 == 0 && D <= 256 && H * Sq < (1ll << 31) / 128,
               "tiled attention: head_dim %lld must be a multiple of 8 and at most 256 (H*Sq = %lld)", (long long)D,
               (long long)(H * Sq));
    check_attention_aligned("tiled attention", ptrs, n);
}

template <int DM>
static void fwd_launch(cudaStream_t st, bf16 *o, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                       const int32_t *pos, const int32_t *qrow, const int2 *sp, int Sq, int S, int H, int Hkv, int D,
                       float scale) {
    const size_t smem = fwd_smem_bytes<DM>(0);
    allow_smem(attn_tiled_fwd_kernel<DM>, smem);
    const dim3 grid((unsigned)((Sq + TQ - 1) / TQ), (unsigned)H);
    ZT_LAUNCH(attn_tiled_fwd_kernel<DM>, grid, FWD_THREADS, smem, st)(o, lse, q, k, v, pos, qrow, sp, Sq, S, H, Hkv,
                                                                       D, scale);
    ZT_LAUNCHED("attn_tiled_fwd_kernel", st);
}

template <int DM>
static void bwd_launch(cudaStream_t st, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const float *lse,
                       const float *rowdot, const bf16 *q, const bf16 *k, const bf16 *v, const int32_t *pos,
                       const int32_t *qrow, const int2 *sp, int Sq, int S, int H, int Hkv, int D, float scale) {
    const unsigned nqt = (unsigned)((Sq + TQ - 1) / TQ), nkt = (unsigned)((S + TK - 1) / TK);
    const size_t smem_dq = fwd_smem_bytes<DM>(1), smem_dkv = dkv_smem_bytes<DM>();
    allow_smem(attn_tiled_dq_kernel<DM>, smem_dq);
    allow_smem(attn_tiled_dkv_kernel<DM>, smem_dkv);
    ZT_LAUNCH(attn_tiled_dq_kernel<DM>, dim3(nqt, (unsigned)H), FWD_THREADS, smem_dq, st)(
        dq, dout, lse, rowdot, q, k, v, pos, qrow, sp, Sq, S, H, Hkv, D, scale);
    ZT_LAUNCHED("attn_tiled_dq_kernel", st);
    ZT_LAUNCH(attn_tiled_dkv_kernel<DM>, dim3(nkt, (unsigned)Hkv), DKV_THREADS, smem_dkv, st)(
        dk, dv, dout, lse, rowdot, q, k, v, pos, qrow, sp, Sq, S, H, Hkv, D, scale);
    ZT_LAUNCHED("attn_tiled_dkv_kernel", st);
}

extern "C" void zt_cuda_attention_tiled_rows_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse,
                                                 const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                                                 const int32_t *pos, const int32_t *qrow, int64_t B, int64_t Sq,
                                                 int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const void *ptrs[] = {o, q, k, v};
    check_shape(ptrs, 4, B, Sq, S, H, Hkv, D, qrow);
    cudaStream_t st = zt_st(stream);
    const float scale = 1.0f / sqrtf((float)D);
    char *scratch =
        pos || qrow ? (char *)zt_ctx_scratch(c, zt_cuda_attention_tiled_scratch_bytes(Sq, H, Hkv, D), st) : NULL;
    const int64_t qs = H * D, kvs = Hkv * D;
    for (int64_t b = 0; b < B; b++) {  // one batch row at a time: the scratch does not grow with B
        const int32_t *pb = pos ? pos + b * Sq : NULL;
        const int2 *sp = tile_spans(st, scratch, pb, qrow, Sq, S, H);
        bf16 *ob = (bf16 *)o + b * Sq * qs;
        const bf16 *qb = (const bf16 *)q + b * Sq * qs, *kb = (const bf16 *)k + b * S * kvs,
                   *vb = (const bf16 *)v + b * S * kvs;
        float *lb = lse + b * H * Sq;
        if (D <= 64)
            fwd_launch<64>(st, ob, lb, qb, kb, vb, pb, qrow, sp, (int)Sq, (int)S, (int)H, (int)Hkv, (int)D, scale);
        else if (D <= 128)
            fwd_launch<128>(st, ob, lb, qb, kb, vb, pb, qrow, sp, (int)Sq, (int)S, (int)H, (int)Hkv, (int)D, scale);
        else
            fwd_launch<256>(st, ob, lb, qb, kb, vb, pb, qrow, sp, (int)Sq, (int)S, (int)H, (int)Hkv, (int)D, scale);
    }
}

extern "C" void zt_cuda_attention_tiled_rows_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                                 const zt_bf16 *dout, const zt_bf16 *o, const float *lse,
                                                 const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                                                 const int32_t *pos, const int32_t *qrow, int64_t B, int64_t Sq,
                                                 int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const void *ptrs[] = {dq, dk, dv, dout, q, k, v};
    check_shape(ptrs, 7, B, Sq, S, H, Hkv, D, qrow);
    cudaStream_t st = zt_st(stream);
    const float scale = 1.0f / sqrtf((float)D);
    char *scratch = (char *)zt_ctx_scratch(c, zt_cuda_attention_tiled_scratch_bytes(Sq, H, Hkv, D), st);
    float *rowdot = (float *)scratch;
    const int64_t qs = H * D, kvs = Hkv * D;
    for (int64_t b = 0; b < B; b++) {
        const int32_t *pb = pos ? pos + b * Sq : NULL;
        const int2 *sp = tile_spans(st, scratch, pb, qrow, Sq, S, H);
        const int64_t qo = b * Sq * qs, ko = b * S * kvs;
        ZT_LAUNCH(attn_rowdot_kernel, zt_blocks(H * Sq, 8), 256, 0, st)(
            rowdot, (const bf16 *)dout + qo, (const bf16 *)o + qo, (int)Sq, (int)H, (int)D);
        ZT_LAUNCHED("attn_rowdot_kernel", st);
        bf16 *dqb = (bf16 *)dq + qo, *dkb = (bf16 *)dk + ko, *dvb = (bf16 *)dv + ko;
        const bf16 *dob = (const bf16 *)dout + qo, *qb = (const bf16 *)q + qo, *kb = (const bf16 *)k + ko,
                   *vb = (const bf16 *)v + ko;
        const float *lb = lse + b * H * Sq;
        if (D <= 64)
            bwd_launch<64>(st, dqb, dkb, dvb, dob, lb, rowdot, qb, kb, vb, pb, qrow, sp, (int)Sq, (int)S, (int)H,
                           (int)Hkv, (int)D, scale);
        else if (D <= 128)
            bwd_launch<128>(st, dqb, dkb, dvb, dob, lb, rowdot, qb, kb, vb, pb, qrow, sp, (int)Sq, (int)S, (int)H,
                            (int)Hkv, (int)D, scale);
        else
            bwd_launch<256>(st, dqb, dkb, dvb, dob, lb, rowdot, qb, kb, vb, pb, qrow, sp, (int)Sq, (int)S, (int)H,
                            (int)Hkv, (int)D, scale);
    }
}

extern "C" void zt_cuda_attention_tiled_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                            const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, int64_t B,
                                            int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    zt_cuda_attention_tiled_rows_fwd(c, stream, o, lse, q, k, v, pos, NULL, B, S, S, H, Hkv, D);
}

extern "C" void zt_cuda_attention_tiled_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                            const zt_bf16 *dout, const zt_bf16 *o, const float *lse,
                                            const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos,
                                            int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    zt_cuda_attention_tiled_rows_bwd(c, stream, dq, dk, dv, dout, o, lse, q, k, v, pos, NULL, B, S, S, H, Hkv, D);
}
