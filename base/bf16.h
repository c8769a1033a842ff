// fp32 <-> bf16 on the host: the one conversion the checkpoint writer, the export and
// the tests use. Round to nearest, ties to even; a value past the largest finite bf16
// (after rounding) becomes inf of its sign; a NaN stays a NaN of its sign, quiet, with
// the top 6 payload bits kept (rounding could carry a payload into the exponent or
// truncate it to zero, both giving inf). The device's __float2bfloat16_rn
// (kernels/cuda/cuda_internal.h, f2bf) rounds every non-NaN the same way, but gives every
// NaN the canonical 0x7fff. Tested against a reference on doubles by tests/unit/test_bf16.c.
// defines: zt_f32_to_bf16, zt_bf16_to_f32, zt_bf16_round
#ifndef ZT_BF16_H
#define ZT_BF16_H
#include <stdint.h>
#include <string.h>

static inline uint16_t zt_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);  // NaN: quiet, sign kept
    // Add 0x7fff plus the lowest kept bit: above half rounds up, below down, a tie to
    // even. The carry out of the mantissa bumps the exponent, up to inf.
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float zt_bf16_to_f32(uint16_t h) {  // exact
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// x rounded to the nearest bf16, as fp32.
static inline float zt_bf16_round(float x) { return zt_bf16_to_f32(zt_f32_to_bf16(x)); }
#endif
