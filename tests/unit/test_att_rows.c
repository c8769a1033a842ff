// Attention's elementwise passes (kernels/cpu/attention_rows.c) in every instruction set this CPU
// runs give the bits of the portable C, over the whole range of their exp: grad() with m = 0,
// inv = 1, di = 0, scale = 1 returns exp(x) itself, so the AVX2 and AVX-512 vector exps are
// compared with cpu_att_exp lane by lane on a dense grid of [-100, 100], every float near the
// clamps (-87, 88), near each rounding tie of x * log2(e) = k + 1/2 (the nearest-integer step),
// zeros, subnormals, infinities and NaN, in vectors of every length 1..40 (the masked tails).
// col_step and sigmoid on random blocks with the same bits too. And cpu_att_exp itself against
// double precision: within 2 ulp on [-87, 88], 0 below -87.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cpu/cpu_internal.h"
#include "tests/support/test_util.h"

static float *g_x;  // the inputs
static int64_t g_n;

static void push(float x) {
    if (g_n % 4096 == 0) {
        float *p = realloc(g_x, (size_t)(g_n + 4096) * sizeof(float));
        if (!p) zt_fatal("out of memory");
        g_x = p;
    }
    g_x[g_n++] = x;
}

static void inputs(void) {
    for (double x = -100; x <= 100; x += 1.0 / 256) push((float)x);
    const float edges[] = {-87.0f, 88.0f, -88.0f, 87.0f, 0.0f, -104.0f, 89.0f};
    for (int e = 0; e < 7; e++) {
        float x = edges[e];
        for (int i = 0; i < 200; i++) x = nextafterf(x, -INFINITY);
        for (int i = 0; i < 400; i++) push(x), x = nextafterf(x, INFINITY);
    }
    for (int k = -127; k <= 127; k++) {  // x * log2(e) within a few ulp of k + 1/2 (ties included)
        float x = (float)((k + 0.5) / 1.44269504088896341);
        for (int i = 0; i < 8; i++) x = nextafterf(x, -INFINITY);
        for (int i = 0; i < 16; i++) push(x), x = nextafterf(x, INFINITY);
    }
    const float special[] = {-0.0f, 1e-45f, -1e-45f, 1e-39f, -1e-39f, 1.17549435e-38f, INFINITY, -INFINITY, NAN, -NAN};
    for (int i = 0; i < 10; i++) push(special[i]);
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b); }

int main(void) {
    inputs();
    // cpu_att_exp against double precision
    double worst = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < g_n; i++) {
        const float x = g_x[i], e = cpu_att_exp(x);
        if (x != x) {
            bad += e == e;
            continue;
        }
        if (x < -87.0f) {
            bad += e != 0.0f;
            continue;
        }
        if (x > 88.0f) continue;  // clamped to exp(88)
        const double r = exp((double)x), ulp = ldexp(1.0, ilogb(r) - 23);
        const double u = fabs((double)e - r) / ulp;
        worst = u > worst ? u : worst;
    }
    CHECK(bad == 0 && worst <= 2.0, "cpu_att_exp: %lld wrong below -87 or at NaN, %.2f ulp from exp at worst", (long long)bad,
          worst);
    printf("cpu_att_exp: %lld inputs, %.2f ulp from double precision at worst on [-87, 88]\n", (long long)g_n, worst);

    const char *names[] = {"generic", "avx2", "avx512"};
    float *p = zt_xmalloc((size_t)g_n * sizeof(float)), *ds = zt_xmalloc((size_t)g_n * sizeof(float));
    float *ref = zt_xmalloc((size_t)g_n * sizeof(float));
    for (int64_t i = 0; i < g_n; i++) ref[i] = cpu_att_exp(g_x[i]);
    zt_rng rng;
    zt_rng_seed(&rng, 7);
    enum { N = 37, M = 45 };  // a col_step block: 37 keys x 45 queries (a masked tail in every ISA)
    float st0[N * M], st_ref[N * M], mx_ref[M], sum_ref[M], al_ref[M], sg_ref[257], xs[257];
    for (int i = 0; i < N * M; i++) st0[i] = (float)(4 * zt_rng_normal(&rng));
    for (int i = 0; i < 257; i++) xs[i] = (float)(20 * zt_rng_normal(&rng));
    int ran = 0;
    for (int s = 0; s < 3; s++) {
        if (cpu_sgemm_set_isa(names[s]) != 0) {
            printf("skip: this CPU does not run the %s kernel\n", names[s]);
            continue;
        }
        ran++;
        const cpu_att_row_ops *ops = cpu_att_rows();
        // exp through grad, whole and in vectors of every length 1..40
        memcpy(p, g_x, (size_t)g_n * sizeof(float));
        for (int64_t i = 0; i < g_n; i++) ds[i] = 1.0f;
        int64_t off = 0;
        for (int len = 1; off < g_n; len = len % 40 + 1) {
            const int64_t n = g_n - off < len ? g_n - off : len;
            ops->grad(p + off, ds + off, n, 0.0f, 1.0f, 0.0f, 1.0f);
            off += n;
        }
        int64_t diff = 0, first = -1;
        for (int64_t i = 0; i < g_n; i++)
            if (!same_bits(p[i], ref[i])) diff++, first = first < 0 ? i : first;
        CHECK(diff == 0, "%s: exp differs from cpu_att_exp at %lld of %lld inputs (first x = %.9g: %.9g, want %.9g)",
              names[s], (long long)diff, (long long)g_n, first >= 0 ? g_x[first] : 0.0, first >= 0 ? p[first] : 0.0,
              first >= 0 ? ref[first] : 0.0);
        // col_step on a block, then sigmoid
        float st[N * M], mx[M], sum[M], al[M], sg[257];
        memcpy(st, st0, sizeof st);
        for (int i = 0; i < M; i++) mx[i] = i % 3 ? -INFINITY : 1.5f, sum[i] = i % 3 ? 0.0f : 2.0f;
        ops->col_step(st, N, M, M, mx, sum, al);
        ops->sigmoid(sg, xs, 257);
        if (s == 0) {
            memcpy(st_ref, st, sizeof st), memcpy(mx_ref, mx, sizeof mx), memcpy(sum_ref, sum, sizeof sum);
            memcpy(al_ref, al, sizeof al), memcpy(sg_ref, sg, sizeof sg);
        } else {
            CHECK(!memcmp(st, st_ref, sizeof st) && !memcmp(mx, mx_ref, sizeof mx) && !memcmp(sum, sum_ref, sizeof sum) &&
                      !memcmp(al, al_ref, sizeof al),
                  "%s: col_step differs from the portable C", names[s]);
            CHECK(!memcmp(sg, sg_ref, sizeof sg), "%s: sigmoid differs from the portable C", names[s]);
        }
        printf("%s: exp of %lld inputs, col_step and sigmoid %s the portable C's bits\n", names[s], (long long)g_n,
               diff ? "NOT" : "=");
    }
    CHECK(ran >= 1, "no kernel ran");
    free(p), free(ds), free(ref), free(g_x);
    TEST_END();
}
