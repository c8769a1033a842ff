// Minimal assertion helpers for the C tests: every check prints what it compared,
// failures are counted, and main returns non-zero if any check failed.
#ifndef ZT_TEST_UTIL_H
#define ZT_TEST_UTIL_H
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int zt_test_failures __attribute__((unused)) = 0;
static int zt_test_checks __attribute__((unused)) = 0;

// A float's bit pattern and back (bf16 and dtype tests).
static inline uint32_t zt_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float zt_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        zt_test_checks++;                                                    \
        if (!(cond)) {                                                       \
            zt_test_failures++;                                              \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

// The max-norm relative error used by every test: max |got - ref| / max |ref|. The
// corner cases follow one of two conventions, kept per call site:
//   ZT_REL_FLOOR  (CHECK_CLOSE, st_compare): the denominator is max(max |ref|, floor_);
//                 a NaN difference makes the result NaN (which fails every "<= tol").
//   ZT_REL_FINITE (the GPU tests' zt_relerr): a non-finite got (an unwritten, poisoned
//                 element) gives +inf, NaN differences against ref are skipped, and an
//                 all-zero ref gives the absolute error; floor_ is unused.
typedef enum { ZT_REL_FLOOR = 0, ZT_REL_FINITE = 1 } zt_rel_mode;

static inline double zt_max_rel_err(const float *got, const float *ref, int64_t n, double floor_, zt_rel_mode mode) {
    const int finite = mode == ZT_REL_FINITE;
    double md = 0, mb = finite ? 0 : floor_;
    for (int64_t i = 0; i < n; i++) {
        if (finite && !isfinite(got[i])) return INFINITY;
        double d = fabs((double)got[i] - (double)ref[i]);
        if (finite ? d > md : !(d <= md)) md = d;  // FLOOR: NaN-safe, NaN makes md NaN
        if (fabs((double)ref[i]) > mb) mb = fabs((double)ref[i]);
    }
    if (finite && mb == 0) return md;
    return md / mb;
}

// max |a-b| / max(max|b|, floor) (ZT_REL_FLOOR).
static inline double zt_rel_err(const float *a, const float *b, int64_t n, double floor_) {
    return zt_max_rel_err(a, b, n, floor_, ZT_REL_FLOOR);
}

#define CHECK_CLOSE(name, a, b, n, tol)                                                     \
    do {                                                                                    \
        double _e = zt_rel_err((a), (b), (n), 1e-30);                                       \
        zt_test_checks++;                                                                   \
        if (!(_e <= (tol))) {                                                               \
            zt_test_failures++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s rel err %.3e > tol %.1e\n", __FILE__, __LINE__, \
                    (name), _e, (double)(tol));                                             \
        } else if (getenv("ZT_TEST_VERBOSE")) {                                             \
            printf("  ok %-48s rel err %.3e (tol %.0e)\n", (name), _e, (double)(tol));      \
        }                                                                                   \
    } while (0)

// A test that made no check passes nothing: it fails (a skip exits 77 before reaching here).
#define TEST_END()                                                                 \
    do {                                                                           \
        printf("%d checks, %d failed\n", zt_test_checks, zt_test_failures);        \
        if (zt_test_checks == 0) fprintf(stderr, "FAIL: the test made no check\n"); \
        return zt_test_failures || zt_test_checks == 0 ? 1 : 0;                    \
    } while (0)
#endif
