// The gated delta rule (Qwen3.5's Gated DeltaNet core) on the GPU: the exact token recurrence
// of kernels/cpu/delta.c, bf16 q, k, v, o and fp32 state, gates and checkpoints.
// One thread block per (row, value head), one thread per column j of the state St [Dk, Dv]:
// the columns evolve independently, so a thread keeps its column (Dk floats) in a local array
// and needs no other thread's in the forward. The state before each chunk of 64 tokens is
// saved (the CPU kernel's layout and count), and the backward walks the chunks from last to
// first, recomputes a chunk's 64 states from its checkpoint into the context's scratch and runs
// the reverse recurrence over them; the sums over columns (dq, dk, dg, dbeta) are block
// reductions in a fixed order, dq and dk per value head into scratch, then summed over the value
// heads of each key head in order (deterministic, no atomics).
// O(S Dk Dv) per head with S sequential steps: the reference the chunked (UT-transform) kernels
// of delta_chunk.cu are tested against, and what zt_cuda_delta_fwd / _bwd run when
// ZT_CUDA_DELTA_RECUR=1 (default: the chunked form). Supports Dk <= 128 and Dv <= 128.
// defines: zt_cuda_delta_fwd, zt_cuda_delta_bwd, zt_cuda_delta_recur_fwd, zt_cuda_delta_recur_bwd,
//          zt_cuda_delta_saved_floats, zt_cuda_delta_scratch_bytes, zt_cuda_delta_recur_scratch_bytes,
//          zt_cuda_delta_supported
#include <stdlib.h>

#include "kernels/cuda/cuda_internal.h"
#include "base/env.h"

#define DELTA_CHUNK 64    // tokens between checkpoints (kernels/cpu/delta.c's ZT_DELTA_CHUNK)
#define DELTA_MAX_DK 128  // a thread's column of St lives in a local array of this size
#define DELTA_MAX_DV 128  // threads per block (rounded up to whole warps)
#define DELTA_MAX_WARPS (DELTA_MAX_DV / 32)

extern "C" int zt_cuda_delta_supported(int64_t Dk, int64_t Dv) {
    return Dk > 0 && Dk <= DELTA_MAX_DK && Dv > 0 && Dv <= DELTA_MAX_DV;
}

extern "C" int64_t zt_cuda_delta_saved_floats(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv) {
    return B * Hv * ((S + DELTA_CHUNK - 1) / DELTA_CHUNK) * Dk * Dv;
}

// Backward's scratch: per (row, value head) the 64 states of a chunk and its u, d; dq and dk per
// value head before the sum over a key head's value heads.
extern "C" size_t zt_cuda_delta_recur_scratch_bytes(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv) {
    const int64_t per_head = DELTA_CHUNK * Dk * Dv + 2 * DELTA_CHUNK * Dv + 2 * S * Dk;
    return (size_t)(B * Hv * per_head) * sizeof(float);
}

// Enough for either form (the environment picks one per call).
extern "C" size_t zt_cuda_delta_scratch_bytes(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv) {
    const size_t r = zt_cuda_delta_recur_scratch_bytes(B, S, Hv, Dk, Dv);
    const size_t c = zt_cuda_delta_chunk_scratch_bytes(B, S, Hv, Dk, Dv);
    return r > c ? r : c;
}

// ZT_CUDA_DELTA_RECUR=1: the token recurrence instead of the chunked kernels; else
// ZT_CUDA_DELTA_TC=1: the chunked form on tensor cores (delta_chunk_tc.cu) where it takes the head
// dimensions (multiples of 16 up to 128), the fp32 chunked kernels elsewhere.
static int use_recurrence(void) {
    return zt_env_on(ZT_ENV_CUDA_DELTA_RECUR);
}
static int use_tc(int64_t Dk, int64_t Dv) {
    return zt_env_on(ZT_ENV_CUDA_DELTA_TC) && zt_cuda_delta_tc_supported(Dk, Dv);
}

static __device__ __forceinline__ bool doc_start(const int32_t *pos, int64_t row, int t) {
    return t == 0 || (pos && pos[row] == 0);
}

// Grid (Hv, B), block round32(Dv). q, k [B*S, Hk, Dk]; v, o [B*S, Hv, Dv]; g, beta [B*S, Hv].
__global__ void delta_fwd_kernel(bf16 *__restrict__ o, float *__restrict__ saved, const bf16 *__restrict__ q,
                                 const bf16 *__restrict__ k, const bf16 *__restrict__ v, const float *__restrict__ g,
                                 const float *__restrict__ beta, const int32_t *__restrict__ pos, int S, int Hk,
                                 int Hv, int Dk, int Dv, float scale) {
    const int h = blockIdx.x, b = blockIdx.y, j = threadIdx.x, kh = h / (Hv / Hk);
    if (j >= Dv) return;  // no barriers below: every thread works on its own column
    const int nch = (S + DELTA_CHUNK - 1) / DELTA_CHUNK;
    float *sv = saved + (int64_t)(b * Hv + h) * nch * Dk * Dv + j;
    float St[DELTA_MAX_DK];
    for (int i = 0; i < Dk; i++) St[i] = 0.0f;
    for (int t = 0; t < S; t++) {
        const int64_t row = (int64_t)b * S + t;
        if (doc_start(pos, row, t))
            for (int i = 0; i < Dk; i++) St[i] = 0.0f;
        if (t % DELTA_CHUNK == 0)
            for (int i = 0; i < Dk; i++) sv[((int64_t)(t / DELTA_CHUNK) * Dk + i) * Dv] = St[i];
        const bf16 *kt = k + (row * Hk + kh) * Dk, *qt = q + (row * Hk + kh) * Dk;
        const float a = expf(g[row * Hv + h]), bt = beta[row * Hv + h];
        float u = 0.0f;
        for (int i = 0; i < Dk; i++) u += bf2f(kt[i]) * St[i];
        u *= a;
        const float d = bt * (bf2f(v[(row * Hv + h) * Dv + j]) - u);
        float oj = 0.0f;
        for (int i = 0; i < Dk; i++) {
            St[i] = a * St[i] + bf2f(kt[i]) * d;
            oj += (bf2f(qt[i]) * scale) * St[i];
        }
        o[(row * Hv + h) * Dv + j] = f2bf(oj);
    }
}

// The sum over the block's threads, the same value in every thread, in a fixed order.
static __device__ float delta_block_sum(float v, float *sm) {
    v = warp_sum(v);
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();  // the previous call's readers are done with sm
    if ((threadIdx.x & 31) == 0) sm[w] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < nw; i++) s += sm[i];
    return s;
}

// Grid (Hv, B), block round32(Dv). Per token, with P = a St-1 (a = exp(g)), u = P^T k,
// d = beta (v - u), St = P + k d^T, o = St^T qs and dS the gradient of St (kernels/cpu/delta.c):
//   dS += qs do^T;  dqs = a St-1 do + k (d . do);  dk = dS d + P du;  dd = dS^T k;  dv = beta dd;
//   dbeta = dd . (v - u);  du = -beta dd;  dP = dS + k du^T;  dg = a <dP, St-1>;  dS(t-1) = a dP.
// dqh, dkh [B, Hv, S, Dk] (per value head), dv, dg, dbeta assigned.
__global__ void delta_bwd_kernel(float *__restrict__ dqh, float *__restrict__ dkh, bf16 *__restrict__ dv,
                                 float *__restrict__ dg, float *__restrict__ dbeta, float *__restrict__ work,
                                 const bf16 *__restrict__ dout, const float *__restrict__ saved,
                                 const bf16 *__restrict__ q, const bf16 *__restrict__ k, const bf16 *__restrict__ v,
                                 const float *__restrict__ g, const float *__restrict__ beta,
                                 const int32_t *__restrict__ pos, int S, int Hk, int Hv, int Dk, int Dv, float scale) {
    const int h = blockIdx.x, b = blockIdx.y, j = threadIdx.x, kh = h / (Hv / Hk);
    const int w = j >> 5, lane = j & 31;
    const bool col = j < Dv;
    const int nch = (S + DELTA_CHUNK - 1) / DELTA_CHUNK;
    __shared__ float red[3][DELTA_MAX_WARPS][DELTA_MAX_DK];
    __shared__ float sm[DELTA_MAX_WARPS];
    const int64_t bh = (int64_t)b * Hv + h;
    float *Sbuf = work + bh * ((int64_t)DELTA_CHUNK * Dk * Dv + 2 * DELTA_CHUNK * Dv);
    float *ubuf = Sbuf + (int64_t)DELTA_CHUNK * Dk * Dv, *dbuf = ubuf + DELTA_CHUNK * Dv;
    const float *sv = saved + bh * nch * Dk * Dv;
    float *dqo = dqh + bh * S * Dk, *dko = dkh + bh * S * Dk;
    float St[DELTA_MAX_DK], dS[DELTA_MAX_DK];
    for (int i = 0; i < Dk; i++) dS[i] = 0.0f;
    for (int c = nch - 1; c >= 0; c--) {
        const int t0 = c * DELTA_CHUNK, t1 = t0 + DELTA_CHUNK < S ? t0 + DELTA_CHUNK : S;
        if (col) {  // recompute the chunk: Sbuf[t - t0] = the state token t reads
            for (int i = 0; i < Dk; i++) St[i] = sv[((int64_t)c * Dk + i) * Dv + j];
            for (int t = t0; t < t1; t++) {
                const int64_t row = (int64_t)b * S + t;
                if (doc_start(pos, row, t))
                    for (int i = 0; i < Dk; i++) St[i] = 0.0f;
                float *Sp = Sbuf + (int64_t)(t - t0) * Dk * Dv + j;
                for (int i = 0; i < Dk; i++) Sp[(int64_t)i * Dv] = St[i];
                const bf16 *kt = k + (row * Hk + kh) * Dk;
                const float a = expf(g[row * Hv + h]), bt = beta[row * Hv + h];
                float u = 0.0f;
                for (int i = 0; i < Dk; i++) u += bf2f(kt[i]) * St[i];
                u *= a;
                const float d = bt * (bf2f(v[(row * Hv + h) * Dv + j]) - u);
                ubuf[(t - t0) * Dv + j] = u;
                dbuf[(t - t0) * Dv + j] = d;
                for (int i = 0; i < Dk; i++) St[i] = a * St[i] + bf2f(kt[i]) * d;
            }
        }
        for (int t = t1 - 1; t >= t0; t--) {
            const int64_t row = (int64_t)b * S + t;
            const bf16 *kt = k + (row * Hk + kh) * Dk, *qt = q + (row * Hk + kh) * Dk;
            const float a = expf(g[row * Hv + h]), bt = beta[row * Hv + h];
            const float *Sp = Sbuf + (int64_t)(t - t0) * Dk * Dv + j;
            float u = 0.0f, d = 0.0f, doj = 0.0f, vj = 0.0f;
            if (col) {
                u = ubuf[(t - t0) * Dv + j];
                d = dbuf[(t - t0) * Dv + j];
                doj = bf2f(dout[(row * Hv + h) * Dv + j]);
                vj = bf2f(v[(row * Hv + h) * Dv + j]);
            }
            const float ddo = delta_block_sum(d * doj, sm);
            // pass 1: dS += qs do^T; the sums over columns for dq and the dS d part of dk; dd = dS^T k
            float dd = 0.0f;
            for (int i = 0; i < Dk; i++) {
                const float x = col ? dS[i] + bf2f(qt[i]) * scale * doj : 0.0f;
                const float sp = col ? Sp[(int64_t)i * Dv] : 0.0f;
                if (col) dS[i] = x;
                const float sdo = warp_sum(sp * doj), dsd = warp_sum(x * d);
                if (lane == 0) red[0][w][i] = sdo, red[1][w][i] = dsd;
                dd += bf2f(kt[i]) * x;
            }
            if (col) dv[(row * Hv + h) * Dv + j] = f2bf(bt * dd);
            const float db = delta_block_sum(col ? dd * (vj - u) : 0.0f, sm);
            const float du = -bt * dd;
            // pass 2: the P du part of dk; dg; dS <- a (dS + k du^T)
            float gs = 0.0f;
            for (int i = 0; i < Dk; i++) {
                const float x = col ? dS[i] + bf2f(kt[i]) * du : 0.0f;
                const float sp = col ? Sp[(int64_t)i * Dv] : 0.0f;
                const float sdu = warp_sum(sp * du);
                if (lane == 0) red[2][w][i] = sdu;
                gs += sp * x;
                if (col) dS[i] = a * x;
            }
            gs = delta_block_sum(gs, sm);  // its barriers also order red[] for the reads below
            for (int i = j; i < Dk; i += blockDim.x) {
                float sdo = 0.0f, dsd = 0.0f, sdu = 0.0f;
                for (int ww = 0; ww < (int)(blockDim.x >> 5); ww++)
                    sdo += red[0][ww][i], dsd += red[1][ww][i], sdu += red[2][ww][i];
                dqo[(int64_t)t * Dk + i] = scale * (a * sdo + bf2f(kt[i]) * ddo);
                dko[(int64_t)t * Dk + i] = dsd + a * sdu;
            }
            if (j == 0) {
                dg[row * Hv + h] = a * gs;
                dbeta[row * Hv + h] = db;
            }
            if (doc_start(pos, row, t))
                for (int i = 0; i < Dk; i++) dS[i] = 0.0f;
            __syncthreads();  // red[] is read above before the next token's pass 1 writes it
        }
    }
}

// dq[row, kh, i] = sum over the value heads h of key head kh of dqh[b, h, t, i] (in order), bf16.
__global__ void delta_sum_heads_kernel(bf16 *__restrict__ dq, bf16 *__restrict__ dk, const float *__restrict__ dqh,
                                       const float *__restrict__ dkh, int64_t B, int S, int Hk, int Hv, int Dk) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;  // over (b, t, kh, i)
    if (idx >= B * S * Hk * Dk) return;
    const int i = (int)(idx % Dk);
    const int kh = (int)((idx / Dk) % Hk);
    const int64_t bt = idx / ((int64_t)Dk * Hk), b = bt / S, t = bt % S;
    const int group = Hv / Hk;
    float sq = 0.0f, sk = 0.0f;
    for (int h = kh * group; h < (kh + 1) * group; h++) {
        const int64_t at = ((b * Hv + h) * S + t) * Dk + i;
        sq += dqh[at];
        sk += dkh[at];
    }
    dq[idx] = f2bf(sq);
    dk[idx] = f2bf(sk);
}

static void delta_require(int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    ZT_REQUIRE(B > 0 && S > 0 && S < (1 << 30) && Hk > 0 && Hv > 0 && Hv % Hk == 0 && B < 65536 && Hv < (1 << 30),
               "delta rule B=%lld S=%lld Hk=%lld Hv=%lld (Hv must be a multiple of Hk)", (long long)B, (long long)S,
               (long long)Hk, (long long)Hv);
    ZT_REQUIRE(zt_cuda_delta_supported(Dk, Dv), "delta rule Dk=%lld Dv=%lld: this kernel takes Dk <= %d, Dv <= %d",
               (long long)Dk, (long long)Dv, DELTA_MAX_DK, DELTA_MAX_DV);
}

extern "C" void zt_cuda_delta_recur_fwd(void *stream, zt_bf16 *o, float *saved, const zt_bf16 *q, const zt_bf16 *k,
                                  const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos, int64_t B,
                                  int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    delta_require(B, S, Hk, Hv, Dk, Dv);
    cudaStream_t st = zt_st(stream);
    const dim3 grid((unsigned)Hv, (unsigned)B);
    const unsigned threads = (unsigned)((Dv + 31) / 32 * 32);
    ZT_LAUNCH(delta_fwd_kernel, grid, threads, 0, st)((bf16 *)o, saved, (const bf16 *)q, (const bf16 *)k,
                                                      (const bf16 *)v, g, beta, pos, (int)S, (int)Hk, (int)Hv,
                                                      (int)Dk, (int)Dv, (float)(1.0 / sqrt((double)Dk)));
    ZT_LAUNCHED("delta_fwd_kernel", st);
}

extern "C" void zt_cuda_delta_recur_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, float *dg,
                                  float *dbeta, const zt_bf16 *dout, const float *saved, const zt_bf16 *q,
                                  const zt_bf16 *k, const zt_bf16 *v, const float *g, const float *beta,
                                  const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk,
                                  int64_t Dv) {
    delta_require(B, S, Hk, Hv, Dk, Dv);
    cudaStream_t st = zt_st(stream);
    float *work = (float *)zt_ctx_scratch(c, zt_cuda_delta_recur_scratch_bytes(B, S, Hv, Dk, Dv), st);
    float *dqh = work + B * Hv * (DELTA_CHUNK * Dk * Dv + 2 * DELTA_CHUNK * Dv), *dkh = dqh + B * Hv * S * Dk;
    const dim3 grid((unsigned)Hv, (unsigned)B);
    const unsigned threads = (unsigned)((Dv + 31) / 32 * 32);
    ZT_LAUNCH(delta_bwd_kernel, grid, threads, 0, st)(dqh, dkh, (bf16 *)dv, dg, dbeta, work, (const bf16 *)dout, saved,
                                                      (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, g, beta, pos,
                                                      (int)S, (int)Hk, (int)Hv, (int)Dk, (int)Dv,
                                                      (float)(1.0 / sqrt((double)Dk)));
    ZT_LAUNCHED("delta_bwd_kernel", st);
    const int64_t n = B * S * Hk * Dk;
    ZT_LAUNCH(delta_sum_heads_kernel, zt_blocks(n, 256), 256, 0, st)((bf16 *)dq, (bf16 *)dk, dqh, dkh, B, (int)S,
                                                                     (int)Hk, (int)Hv, (int)Dk);
    ZT_LAUNCHED("delta_sum_heads_kernel", st);
}

extern "C" void zt_cuda_delta_fwd(void *stream, zt_bf16 *o, float *saved, const zt_bf16 *q, const zt_bf16 *k,
                                  const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos, int64_t B,
                                  int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    (use_recurrence() ? zt_cuda_delta_recur_fwd
                      : use_tc(Dk, Dv) ? zt_cuda_delta_tc_fwd
                                       : zt_cuda_delta_chunk_fwd)(stream, o, saved, q, k, v, g, beta, pos, B,
                                                                           S, Hk, Hv, Dk, Dv);
}

extern "C" void zt_cuda_delta_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, float *dg,
                                  float *dbeta, const zt_bf16 *dout, const float *saved, const zt_bf16 *q,
                                  const zt_bf16 *k, const zt_bf16 *v, const float *g, const float *beta,
                                  const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk,
                                  int64_t Dv) {
    (use_recurrence() ? zt_cuda_delta_recur_bwd
                      : use_tc(Dk, Dv) ? zt_cuda_delta_tc_bwd
                                       : zt_cuda_delta_chunk_bwd)(c, stream, dq, dk, dv, dg, dbeta, dout,
                                                                           saved, q, k, v, g, beta, pos, B, S, Hk, Hv,
                                                                           Dk, Dv);
}
