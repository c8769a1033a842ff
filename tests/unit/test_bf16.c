// base/bf16.h against an independent reference. The reference works on the value, not
// the bits: the two bf16 neighbours of |x| are multiples of the quantum 2^(e-8) (8
// significant bits; below 2^-126 the fixed 2^-133 of bf16 subnormals), computed exactly in
// double, and the nearer wins, a tie going to the even multiple; at 2^128 and above the
// result is inf. NaN: a NaN of the same sign, quiet, with the top 6 payload bits kept.
// Edge cases first, then every upper half-word with low halves at and around the tie.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/bf16.h"
#include "tests/support/test_util.h"

// |x| rounded to nearest even on the bf16 grid, as a double (inf past the largest finite).
static double ref_round_abs(double a) {
    if (a == 0) return 0;
    int e;
    frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
    const double q = e - 1 < -126 ? ldexp(1, -133) : ldexp(1, e - 8);
    const double k = floor(a / q);  // exact: a / q is a power-of-two scaling
    const double lo = k * q, hi = (k + 1) * q;
    double r;
    if (a - lo < hi - a) r = lo;
    else if (a - lo > hi - a) r = hi;
    else r = fmod(k, 2) == 0 ? lo : hi;
    return r >= ldexp(1, 128) ? INFINITY : r;
}

static int g_bad_shown;
static void check_one(float x) {
    const uint16_t h = zt_f32_to_bf16(x);
    const float y = zt_bf16_to_f32(h);
    const uint32_t u = zt_f32_bits(x);
    int ok;
    if (isnan(x)) {
        ok = isnan(y) && signbit(y) == signbit(x) && (h & 0x0040) && (h & 0x3f) == ((u >> 16) & 0x3f);
    } else {
        const double want = ref_round_abs(fabs((double)x));
        ok = (double)fabsf(y) == want && signbit(y) == signbit(x);
    }
    zt_test_checks++;
    if (!ok) {
        zt_test_failures++;
        if (g_bad_shown++ < 20)
            fprintf(stderr, "FAIL: 0x%08x (%.9g) -> 0x%04x (%.9g), reference %.9g\n", u, x, h, y,
                    isnan(x) ? NAN : copysign(ref_round_abs(fabs((double)x)), x));
    }
}

int main(void) {
    // The reference itself, on values whose answer is known.
    CHECK(ref_round_abs(1.0 + ldexp(1, -8)) == 1.0, "tie below an odd neighbour goes down to even");
    CHECK(ref_round_abs(1.0 + 3 * ldexp(1, -8)) == 1.0 + ldexp(1, -6), "tie goes up to even");
    CHECK(ref_round_abs(ldexp(1, -134)) == 0, "half the smallest subnormal ties to 0");
    CHECK(isinf(ref_round_abs(FLT_MAX)), "FLT_MAX overflows");

    // Exact answers of the helper, bit for bit.
    const struct { uint32_t in; uint16_t out; const char *what; } cases[] = {
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x3f800000u, 0x3f80, "1"},
        {0x3f808000u, 0x3f80, "1 + 2^-8: tie, down to even"},
        {0x3f808001u, 0x3f81, "just above the tie: up"},
        {0x3f807fffu, 0x3f80, "just below the tie: down"},
        {0x3f818000u, 0x3f82, "1 + 3 2^-8: tie, up to even"},
        {0xbf818000u, 0xbf82, "negative tie, up in magnitude to even"},
        {0x00000001u, 0x0000, "smallest fp32 subnormal: to 0"},
        {0x00008000u, 0x0000, "2^-134: tie between 0 and 2^-133, to 0"},
        {0x00018000u, 0x0002, "3 2^-134: tie, up to even"},
        {0x00008001u, 0x0001, "just above 2^-134: the smallest bf16 subnormal"},
        {0x007fffffu, 0x0080, "largest fp32 subnormal: rounds up to FLT_MIN"},
        {0x00800000u, 0x0080, "FLT_MIN"},
        {0x7f7f0000u, 0x7f7f, "largest finite bf16"},
        {0x7f7f7fffu, 0x7f7f, "just below the tie above it: stays finite"},
        {0x7f7f8000u, 0x7f80, "the tie above the largest finite: to inf (even)"},
        {0x7f7fffffu, 0x7f80, "FLT_MAX: inf"},
        {0xff7fffffu, 0xff80, "-FLT_MAX: -inf"},
        {0x7f800000u, 0x7f80, "+inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x7fc00000u, 0x7fc0, "quiet NaN"},
        {0xffc00000u, 0xffc0, "negative quiet NaN: sign kept"},
        {0x7f800001u, 0x7fc0, "signalling NaN, payload below the kept bits: quiet, not inf"},
        {0x7fbfffffu, 0x7fff, "signalling NaN, full payload: quiet, top payload kept, not rounded to inf"},
        {0xff812345u, 0xffc1, "negative signalling NaN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint16_t h = zt_f32_to_bf16(zt_f32_from_bits(cases[i].in));
        CHECK(h == cases[i].out, "%s: 0x%08x -> 0x%04x, want 0x%04x", cases[i].what, cases[i].in, h, cases[i].out);
        check_one(zt_f32_from_bits(cases[i].in));
    }
    // bf16 -> fp32 is exact and round-trips every non-NaN bf16.
    int rt_bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float f = zt_bf16_to_f32((uint16_t)h);
        if (zt_f32_bits(f) != h << 16 || (!isnan(f) && zt_f32_to_bf16(f) != h)) rt_bad++;
    }
    CHECK(rt_bad == 0, "%d bf16 values do not round-trip", rt_bad);
    CHECK(zt_bf16_round(1.00390625f) == 1.0f && zt_bf16_round(-3.0f) == -3.0f, "zt_bf16_round");

    // Every upper half (all exponents and signs), low halves at and around the tie, plus a
    // pseudo-random one.
    static const uint32_t lows[] = {0x0000, 0x0001, 0x3fff, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (uint32_t hi = 0; hi < 0x10000u; hi++) {
        for (size_t j = 0; j < sizeof lows / sizeof lows[0]; j++) check_one(zt_f32_from_bits(hi << 16 | lows[j]));
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        check_one(zt_f32_from_bits(hi << 16 | (uint32_t)(s & 0xffff)));
    }
    TEST_END();
}
