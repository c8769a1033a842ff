// Half-split RoPE in place, with a device-computed fp32 cos/sin table: bf16 in and
// out, fp32 arithmetic, the formulas of kernels/cpu/rope.c.
// Partial RoPE (Qwen3.5): the first rd dims of each head of D rotated, the rest untouched.
// defines: zt_cuda_rope_table, zt_cuda_rope_fwd, zt_cuda_rope_bwd, zt_cuda_rope_table_fwd, zt_cuda_rope_table_bwd,
//          zt_cuda_rope_partial_fwd, zt_cuda_rope_partial_bwd, zt_cuda_rope_partial_table_fwd,
//          zt_cuda_rope_partial_table_bwd
#include "kernels/cuda/cuda_internal.h"
#include "kernels/rope_freqs.h"

// torch's fp32 arithmetic: inv_freq from kernels/rope_freqs.h (plain 1 / theta^(2i/D), or
// YaRN's blend; theta^x in double rounded to fp32), angle = pos * inv_freq in fp32; cos/sin
// evaluated in double and rounded, so the table matches a correctly rounded host cosf/sinf
// (no fast-math approximations), then times the attention factor (1 when plain: exact).
__global__ void rope_table_kernel(float *cos_t, float *sin_t, int64_t S, int half, int D, zt_rope_freqs f) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= S * half) return;
    const int64_t p = idx / half;
    const int i = (int)(idx % half);
    const float inv_freq = zt_rope_inv_freq(&f, i, D);
    const float ang = __fmul_rn((float)p, inv_freq);
    const float att = (float)f.attention;
    cos_t[idx] = __fmul_rn((float)cos((double)ang), att);
    sin_t[idx] = __fmul_rn((float)sin((double)ang), att);
}

// pos (NULL: t % S) is each token's position, e.g. inside its packed document; a
// position outside the table's T rows traps the kernel (it would read past cos/sin).
template <bool BWD>
__global__ void rope_kernel(bf16 *__restrict__ x, const float *__restrict__ cos_t, const float *__restrict__ sin_t,
                            const int32_t *__restrict__ posv, int64_t BS, int64_t S, int64_t T, int nh, int half,
                            int stride) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;  // over (token, head, i < half)
    if (idx >= BS * nh * half) return;
    const int i = (int)(idx % half);
    const int64_t th = idx / half;  // token * nh + head
    const int64_t t = th / nh;
    const int64_t pos = posv ? (int64_t)posv[t] : t % S;
    if (pos < 0 || pos >= T) {
        if (th % nh == 0 && i == 0)
            printf("zt_cuda_rope: position %lld of token %lld is outside the table [0, %lld)\n", (long long)pos,
                   (long long)t, (long long)T);
        __trap();
    }
    bf16 *v = x + th * stride;  // a head's first 2 * half elements rotate (stride: the head's size)
    const float c = cos_t[pos * half + i], s = sin_t[pos * half + i];
    const float a = bf2f(v[i]), b = bf2f(v[i + half]);
    if (!BWD) {
        v[i] = f2bf(a * c - b * s);
        v[i + half] = f2bf(b * c + a * s);
    } else {  // transpose of the rotation
        v[i] = f2bf(a * c + b * s);
        v[i + half] = f2bf(b * c - a * s);
    }
}

extern "C" void zt_cuda_rope_table_freqs(void *stream, float *cos_t, float *sin_t, int64_t S, int64_t D,
                                         const zt_rope_freqs *f) {
    ZT_REQUIRE(S > 0 && D > 0 && D % 2 == 0, "rope table S=%lld D=%lld (D must be even)", (long long)S, (long long)D);
    ZT_REQUIRE(f && f->theta > 0 && f->attention > 0 && (!f->yarn || (f->factor > 0 && f->high != f->low)),
               "rope table frequencies (theta %g, yarn %d, factor %g, range %g..%g, attention %g)", f ? f->theta : 0.0,
               f ? f->yarn : 0, f ? f->factor : 0.0, f ? f->low : 0.0, f ? f->high : 0.0, f ? f->attention : 0.0);
    cudaStream_t st = zt_st(stream);
    const int64_t n = S * (D / 2);
    ZT_LAUNCH(rope_table_kernel, zt_blocks(n, 256), 256, 0, st)(cos_t, sin_t, S, (int)(D / 2), (int)D, *f);
    ZT_LAUNCHED("rope_table_kernel", st);
}

extern "C" void zt_cuda_rope_table(void *stream, float *cos_t, float *sin_t, int64_t S, int64_t D, double theta) {
    const zt_rope_freqs f = {theta, 0, 0.0, 0.0, 0.0, 1.0};
    zt_cuda_rope_table_freqs(stream, cos_t, sin_t, S, D, &f);
}

// T: the table's rows (S, unless a row holds part of a longer block: context parallelism)
static void rope_launch(bool bwd, void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t,
                        const int32_t *pos, int64_t B, int64_t S, int64_t nh, int64_t D, int64_t rd, int64_t T = 0) {
    if (T == 0) T = S;
    ZT_REQUIRE(B > 0 && S > 0 && nh > 0 && D > 0 && rd > 0 && rd % 2 == 0 && rd <= D && (T == S || pos),
               "rope B=%lld S=%lld heads=%lld D=%lld rotary=%lld table %lld (a table longer than a row needs pos)",
               (long long)B, (long long)S, (long long)nh, (long long)D, (long long)rd, (long long)T);
    cudaStream_t st = zt_st(stream);
    const int64_t n = B * S * nh * (rd / 2);
    if (bwd)
        ZT_LAUNCH(rope_kernel<true>, zt_blocks(n, 256), 256, 0, st)((bf16 *)x, cos_t, sin_t, pos, B * S, S, T,
                                                                    (int)nh, (int)(rd / 2), (int)D);
    else
        ZT_LAUNCH(rope_kernel<false>, zt_blocks(n, 256), 256, 0, st)((bf16 *)x, cos_t, sin_t, pos, B * S, S, T,
                                                                     (int)nh, (int)(rd / 2), (int)D);
    ZT_LAUNCHED(bwd ? "rope_kernel<bwd>" : "rope_kernel<fwd>", st);
}

extern "C" void zt_cuda_rope_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t, const int32_t *pos,
                                 int64_t B, int64_t S, int64_t nh, int64_t D) {
    ZT_REQUIRE(D % 2 == 0, "rope D=%lld must be even", (long long)D);
    rope_launch(false, stream, x, cos_t, sin_t, pos, B, S, nh, D, D);
}
extern "C" void zt_cuda_rope_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t,
                                 const int32_t *pos, int64_t B, int64_t S, int64_t nh, int64_t D) {
    ZT_REQUIRE(D % 2 == 0, "rope D=%lld must be even", (long long)D);
    rope_launch(true, stream, dx, cos_t, sin_t, pos, B, S, nh, D, D);
}
extern "C" void zt_cuda_rope_table_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t, int64_t T,
                                       const int32_t *pos, int64_t B, int64_t S, int64_t nh, int64_t D) {
    ZT_REQUIRE(D % 2 == 0, "rope D=%lld must be even", (long long)D);
    rope_launch(false, stream, x, cos_t, sin_t, pos, B, S, nh, D, D, T);
}
extern "C" void zt_cuda_rope_table_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t, int64_t T,
                                       const int32_t *pos, int64_t B, int64_t S, int64_t nh, int64_t D) {
    ZT_REQUIRE(D % 2 == 0, "rope D=%lld must be even", (long long)D);
    rope_launch(true, stream, dx, cos_t, sin_t, pos, B, S, nh, D, D, T);
}
extern "C" void zt_cuda_rope_partial_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t,
                                         const int32_t *pos, int64_t B, int64_t S, int64_t nh, int64_t D, int64_t rd) {
    rope_launch(false, stream, x, cos_t, sin_t, pos, B, S, nh, D, rd);
}
extern "C" void zt_cuda_rope_partial_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t,
                                         const int32_t *pos, int64_t B, int64_t S, int64_t nh, int64_t D, int64_t rd) {
    rope_launch(true, stream, dx, cos_t, sin_t, pos, B, S, nh, D, rd);
}
extern "C" void zt_cuda_rope_partial_table_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t,
                                               int64_t T, const int32_t *pos, int64_t B, int64_t S, int64_t nh,
                                               int64_t D, int64_t rd) {
    rope_launch(false, stream, x, cos_t, sin_t, pos, B, S, nh, D, rd, T);
}
extern "C" void zt_cuda_rope_partial_table_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t,
                                               int64_t T, const int32_t *pos, int64_t B, int64_t S, int64_t nh,
                                               int64_t D, int64_t rd) {
    rope_launch(true, stream, dx, cos_t, sin_t, pos, B, S, nh, D, rd, T);
}
