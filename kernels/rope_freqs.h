// RoPE's frequencies, plain or YaRN, as one formula for the CPU table (kernels/cpu/rope.c)
// and the GPU's (kernels/cuda/rope.cu): transformers' fp32 arithmetic step by step, every
// product and sum rounded on its own (the CUDA side uses the _rn intrinsics, which nvcc never
// contracts into an FMA; baseline x86-64 C has no FMA to contract to).
// defines: zt_rope_freqs, zt_rope_inv_freq
#ifndef ZT_KERNELS_ROPE_FREQS_H
#define ZT_KERNELS_ROPE_FREQS_H
#include <math.h>
#include <stdint.h>

// What a rope table is made from (model/rope.c fills it from a config).
typedef struct {
    double theta;      // base of the wavelengths (rope_theta)
    int yarn;          // 0: plain RoPE; 1: YaRN (rope_type "yarn")
    double factor;     // yarn: position interpolation factor
    double low, high;  // yarn: the correction range, in frequency indices (the ramp's ends)
    double attention;  // cos and sin are multiplied by it (yarn's attention factor; 1 when plain)
} zt_rope_freqs;

#if defined(__CUDACC__) || defined(ZT_CUDAEMU_DEVICE_H)  // nvcc, or a .cu file on the CPU execution
#define ZT_ROPE_HD __host__ __device__
#else
#define ZT_ROPE_HD
#endif
#if defined(__CUDA_ARCH__) || defined(ZT_CUDAEMU_DEVICE_H)  // device code
#define ZT_ROPE_MUL(a, b) __fmul_rn(a, b)
#define ZT_ROPE_ADD(a, b) __fadd_rn(a, b)
#define ZT_ROPE_POW(b, e) ((float)pow((double)(b), (double)(e)))  // correctly rounded, as glibc's powf
#else
#define ZT_ROPE_MUL(a, b) ((a) * (b))
#define ZT_ROPE_ADD(a, b) ((a) + (b))
#define ZT_ROPE_POW(b, e) powf(b, e)
#endif

// inv_freq of frequency i (0 <= i < D/2), as transformers computes it in fp32:
//   plain: 1 / theta^(2i/D)
//   yarn (_compute_yarn_parameters): pos = theta^(2i/D); extrapolation 1/pos, interpolation
//   1/(factor*pos), ramp = clamp((i - low) / (high - low), 0, 1), e = 1 - ramp,
//   inv_freq = interpolation * (1 - e) + extrapolation * e.
ZT_ROPE_HD static inline float zt_rope_inv_freq(const zt_rope_freqs *f, int64_t i, int64_t D) {
    const float expo = (float)(2 * i) / (float)D;
    const float pos = ZT_ROPE_POW((float)f->theta, expo);
    const float extrapolation = 1.0f / pos;
    if (!f->yarn) return extrapolation;
    const float interpolation = 1.0f / ZT_ROPE_MUL((float)f->factor, pos);
    float ramp = ZT_ROPE_ADD((float)i, -(float)f->low) / (float)(f->high - f->low);
    ramp = ramp < 0.0f ? 0.0f : (ramp > 1.0f ? 1.0f : ramp);
    const float e = ZT_ROPE_ADD(1.0f, -ramp);
    return ZT_ROPE_ADD(ZT_ROPE_MUL(interpolation, ZT_ROPE_ADD(1.0f, -e)), ZT_ROPE_MUL(extrapolation, e));
}
#endif
