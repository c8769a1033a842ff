// cudaemu: <cuda_bf16.h>, the bfloat16 types and conversions zerotrain's kernels use, with
// the device's rounding: float -> bf16 rounds to nearest even (cvt.rn.bf16.f32), NaN
// becomes the canonical 0x7fff as the hardware instruction gives; bf16 -> float is exact.
#ifndef ZT_CUDAEMU_BF16_H
#define ZT_CUDAEMU_BF16_H
#include <stdint.h>
#include <string.h>

#include "cudaemu_device.h"

static inline unsigned short zt_emu_f2bf_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;  // NaN (sign dropped, as cvt.rn.bf16.f32)
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
static inline unsigned short zt_emu_d2bf_rn(double d) {
    // Round the double directly (no double rounding through float): keep 8 mantissa bits.
    if (d != d) return 0x7fffu;
    float f = (float)d;  // exact when representable; otherwise fix the rounding below
    unsigned short r = zt_emu_f2bf_rn(f);
    uint32_t u = (uint32_t)r << 16;
    float back;
    memcpy(&back, &u, 4);
    // candidates r and its neighbours: pick the nearest to d (ties to even)
    unsigned short best = r;
    double bd = (double)back - d;
    if (bd < 0) bd = -bd;
    for (int k = -1; k <= 1; k += 2) {
        unsigned short c = (unsigned short)(r + k);
        uint32_t cu = (uint32_t)c << 16;
        float cf;
        memcpy(&cf, &cu, 4);
        if (cf != cf) continue;
        double cd = (double)cf - d;
        if (cd < 0) cd = -cd;
        if (cd < bd || (cd == bd && !(c & 1))) {
            best = c;
            bd = cd;
        }
    }
    return best;
}
static inline float zt_emu_bf2f(unsigned short b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(zt_emu_f2bf_rn(f)) {}
    __nv_bfloat16(double d) : __x(zt_emu_d2bf_rn(d)) {}
    __nv_bfloat16(int i) : __x(zt_emu_d2bf_rn((double)i)) {}
    __nv_bfloat16(unsigned int i) : __x(zt_emu_d2bf_rn((double)i)) {}
    __nv_bfloat16(long long i) : __x(zt_emu_d2bf_rn((double)i)) {}
    operator float() const { return zt_emu_bf2f(__x); }
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

static inline __nv_bfloat16 zt_emu_bf_bits(unsigned short b) {
    __nv_bfloat16 h;
    h.__x = b;
    return h;
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return zt_emu_bf_bits(zt_emu_f2bf_rn(f)); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return zt_emu_bf_bits(zt_emu_f2bf_rn(f)); }
static inline __nv_bfloat16 __double2bfloat16(double d) { return zt_emu_bf_bits(zt_emu_d2bf_rn(d)); }
static inline float __bfloat162float(__nv_bfloat16 h) { return zt_emu_bf2f(h.__x); }
static inline float __low2float(__nv_bfloat162 h) { return zt_emu_bf2f(h.x.__x); }
static inline float __high2float(__nv_bfloat162 h) { return zt_emu_bf2f(h.y.__x); }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{zt_emu_bf2f(h.x.__x), zt_emu_bf2f(h.y.__x)}; }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162{a, b}; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return zt_emu_bf_bits(u); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
// Arithmetic as sm_80+ does it: in fp32, one rounding to bf16.
static inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16_rn((float)a + (float)b); }
static inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16_rn((float)a * (float)b); }
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    return __float2bfloat16_rn(fmaf((float)a, (float)b, (float)c));
}
#endif
