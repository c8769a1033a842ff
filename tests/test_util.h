// Minimal assertion helpers for the C tests: every check prints what it compared,
// failures are counted, and main returns non-zero if any check failed.
#ifndef ZT_TEST_UTIL_H
#define ZT_TEST_UTIL_H
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

static int zt_test_failures __attribute__((unused)) = 0;
static int zt_test_checks __attribute__((unused)) = 0;

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

// max |a-b| / max(max|b|, floor): the relative error used across the tests.
static inline double zt_rel_err(const float *a, const float *b, int64_t n, double floor_) {
    double md = 0, mb = floor_;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= md)) md = d;  // NaN-safe: NaN makes md NaN
        if (fabs((double)b[i]) > mb) mb = fabs((double)b[i]);
    }
    return md / mb;
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

#define TEST_END()                                                                 \
    do {                                                                           \
        printf("%d checks, %d failed\n", zt_test_checks, zt_test_failures);        \
        return zt_test_failures ? 1 : 0;                                           \
    } while (0)
#endif
