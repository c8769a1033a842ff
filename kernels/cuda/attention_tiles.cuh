// The tiled attentions' shared pieces (attention_tiled.cu's scalar kernels, attention_tc.cu's
// tensor-core ones): the scratch layout's rounding, the first visible key of each 64-query tile,
// and each row's dO . O. Included by both; the kernels are static, one copy per file (device code
// is not linked across .cu files here). Needs TQ (query rows per tile) defined before it.
// defines: round256, imin, attn_tile_lo_kernel, attn_rowdot_kernel
#ifndef ZT_ATTENTION_TILES_CUH
#define ZT_ATTENTION_TILES_CUH
static inline size_t round256(size_t x) { return (x + 255) & ~(size_t)255; }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// tile_lo[t] = the first key any query of tile t may see (its earliest document start). A
// position outside 0..i traps: it would unmask keys that do not exist.
static __global__ void attn_tile_lo_kernel(int *__restrict__ tile_lo, const int32_t *__restrict__ pos, int S, int ntiles) {
    const int tile = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (tile >= ntiles) return;
    int lo = S;
    for (int i = tile * TQ + lane; i < S && i < (tile + 1) * TQ; i += 32) {
        const int p = pos[i];
        if (p < 0 || p > i) {
            printf("zt_cuda_attention: document position %d of query %d is outside [0, %d]\n", p, i, i);
            __trap();
        }
        lo = imin(lo, i - p);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) lo = imin(lo, __shfl_xor_sync(0xffffffffu, lo, o));
    if (lane == 0) tile_lo[tile] = lo;
}

// rowdot[h, i] = sum_e dO[i, h, e] * O[i, h, e]  (= sum_j P_ij dP_ij), one warp per row.
static __global__ void attn_rowdot_kernel(float *__restrict__ rowdot, const bf16 *__restrict__ dout,
                                         const bf16 *__restrict__ o, int S, int H, int D) {
    const int64_t row = (int64_t)blockIdx.x * 8 + threadIdx.x / 32;  // h * S + i
    const int lane = threadIdx.x & 31;
    if (row >= (int64_t)H * S) return;
    const int h = (int)(row / S), i = (int)(row % S);
    const bf16 *a = dout + ((int64_t)i * H + h) * D, *b = o + ((int64_t)i * H + h) * D;
    float s = 0.0f;
    for (int e = lane; e < D; e += 32) s += bf2f(a[e]) * bf2f(b[e]);
    s = warp_sum(s);
    if (lane == 0) rowdot[row] = s;
}

#endif
