// The tiled attentions' shared pieces (attention_tiled.cu's scalar kernels, attention_tc.cu's
// tensor-core ones): the scratch layout's rounding, a query row's visible keys (its block row and
// document start: the queries may be a subset of the block's rows), each 64-query tile's first and
// last visible key, and each row's dO . O. Included by both; the kernels are static, one copy per file (device code
// is not linked across .cu files here). Needs TQ (query rows per tile) defined before it.
// defines: round256, imin, attn_row_span, attn_tile_span_kernel, attn_rowdot_kernel, allow_smem, tile_spans
#ifndef ZT_ATTENTION_TILES_CUH
#define ZT_ATTENTION_TILES_CUH
static inline size_t round256(size_t x) { return (x + 255) & ~(size_t)255; }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// The keys query row li (of Sq) may see: lo .. hi, from its block row a (qrow[li], or li when qrow
// is NULL: the whole block) and its document position (pos[li]; NULL: plain causal, lo = 0). A
// padding row (qrow[li] < 0) and a row past Sq see none: lo = 0, hi = -1.
__device__ __forceinline__ void attn_row_span(int &lo, int &hi, const int32_t *pos, const int32_t *qrow, int li,
                                              int Sq) {
    lo = 0, hi = -1;
    if (li >= Sq) return;
    const int a = qrow ? qrow[li] : li;
    if (a < 0) return;
    hi = a, lo = pos ? a - pos[li] : 0;
}

// span[t] = (the first key any query of tile t may see: its earliest document start, the last:
// its latest block row); (S, -1) for a tile of padding only. A position outside 0..a or a block
// row past the S keys traps: it would unmask keys that do not exist.
static __global__ void attn_tile_span_kernel(int2 *__restrict__ span, const int32_t *__restrict__ pos,
                                             const int32_t *__restrict__ qrow, int Sq, int S, int ntiles) {
    const int tile = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (tile >= ntiles) return;
    int lo = S, hi = -1;
    for (int i = tile * TQ + lane; i < Sq && i < (tile + 1) * TQ; i += 32) {
        const int a = qrow ? qrow[i] : i, p = pos ? pos[i] : a;
        if (a < 0) continue;
        if (p < 0 || p > a || a >= S) {
            printf("zt_cuda_attention: document position %d of query %d is outside [0, %d] (its block row %d of %d)\n",
                   p, i, a, a, S);
            __trap();
        }
        lo = imin(lo, a - p), hi = hi > a ? hi : a;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        lo = imin(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        const int h2 = __shfl_xor_sync(0xffffffffu, hi, o);
        hi = hi > h2 ? hi : h2;
    }
    if (lane == 0) span[tile] = make_int2(lo, hi);
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

// A kernel's dynamic shared memory allowed up to `bytes` (past the 48 KiB default).
// The dimensions both tiled attentions take: B, Sq, S, H, Hkv, D positive, H a multiple of Hkv, S
// and Sq below 2^30, a query rows' map wherever Sq != S (each kernel checks its own head_dim rule
// after this, then check_attention_aligned).
static void check_attention_dims(int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                                 const int32_t *qrow) {
    ZT_REQUIRE(B > 0 && S > 0 && Sq > 0 && H > 0 && Hkv > 0 && D > 0 && H % Hkv == 0 && S < (1 << 30) &&
                   Sq < (1 << 30) && (qrow || Sq == S),
               "attention B=%lld Sq=%lld S=%lld H=%lld Hkv=%lld D=%lld (H must be a multiple of Hkv; Sq != S needs "
               "the query rows' map)", (long long)B, (long long)Sq, (long long)S, (long long)H, (long long)Hkv,
               (long long)D);
}

// Each of the n operands 16-byte aligned (who: "tiled attention" / "tensor-core attention").
static void check_attention_aligned(const char *who, const void *const *ptrs, int n) {
    for (int i = 0; i < n; i++)
        ZT_REQUIRE(zt_aligned16(ptrs[i]), "%s: operand %d is not 16-byte aligned (%p)", who, i, ptrs[i]);
}

template <typename F>
static void allow_smem(F *kernel, size_t bytes) {
    ZT_CUDA_CHECK(cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// The query tiles' key spans (attn_tile_span_kernel) into the scratch after the H * Sq row dots;
// NULL for plain causal attention over the whole block (no positions, no query map: the diagonal
// bounds each tile).
static const int2 *tile_spans(cudaStream_t st, char *scratch, const int32_t *pos, const int32_t *qrow, int64_t Sq,
                              int64_t S, int64_t H) {
    if (!pos && !qrow) return NULL;
    int2 *sp = (int2 *)(scratch + round256((size_t)(H * Sq) * sizeof(float)));
    const int ntiles = (int)((Sq + TQ - 1) / TQ);
    ZT_LAUNCH(attn_tile_span_kernel, zt_blocks(ntiles, 4), 128, 0, st)(sp, pos, qrow, (int)Sq, (int)S, ntiles);
    ZT_LAUNCHED("attn_tile_span_kernel", st);
    return sp;
}

#endif
