// Every CPU op's backward against central finite differences of its forward on
// random inputs, plus forward checks against naive double-precision versions.
// Tolerance: max |analytic - numeric| / max |numeric| <= 1e-2 (fp32 forward,
// step 1e-3); the forward-vs-naive checks use 1e-5.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/ops.h"
#include "base/common.h"
#include "tests/support/test_util.h"

static const zt_ops *op = &zt_cpu_ops;
static zt_rng rng;

static float *rnd(int64_t n, float s) {
    float *p = zt_xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = (float)(s * zt_rng_normal(&rng));
    return p;
}
static float *zeros(int64_t n) { return zt_xcalloc((size_t)n, sizeof(float)); }

// The scalar probe: L = sum(r * y) for a fixed random r, evaluated in double.
typedef double (*eval_fn)(void *ctx);

static double dot(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// Compare analytic gradient `g` of L w.r.t. `x` with central differences on up to 64 entries.
static void fd_check(const char *name, eval_fn f, void *ctx, float *x, const float *g, int64_t n) {
    const float h = 1e-3f;
    int64_t count = n < 64 ? n : 64;
    double maxdiff = 0, maxnum = 1e-6;
    for (int64_t c = 0; c < count; c++) {
        int64_t i = n <= 64 ? c : (int64_t)zt_rng_below(&rng, (uint64_t)n);
        float old = x[i];
        x[i] = old + h;
        double lp = f(ctx);
        x[i] = old - h;
        double lm = f(ctx);
        x[i] = old;
        double num = (lp - lm) / (2.0 * h);
        double diff = fabs(num - g[i]);
        if (diff > maxdiff) maxdiff = diff;
        if (fabs(num) > maxnum) maxnum = fabs(num);
    }
    double rel = maxdiff / maxnum;
    zt_test_checks++;
    if (!(rel <= 1e-2)) {
        zt_test_failures++;
        fprintf(stderr, "FAIL finite differences %s: rel err %.3e > 1e-2\n", name, rel);
    } else {
        printf("  ok %-36s fd rel err %.2e\n", name, rel);
    }
}

// ---- matmul ----
typedef struct { float *x, *w, *y, *r; int64_t M, K, N; } mm_ctx;
static double mm_eval(void *p) {
    mm_ctx *c = p;
    op->matmul_fwd(c->y, c->x, c->w, c->M, c->K, c->N);
    return dot(c->y, c->r, c->M * c->N);
}
static void test_matmul(void) {
    mm_ctx c = {.M = 7, .K = 13, .N = 5};
    c.x = rnd(c.M * c.K, 1);
    c.w = rnd(c.N * c.K, 1);
    c.y = zeros(c.M * c.N);
    c.r = rnd(c.M * c.N, 1);
    // forward vs naive
    op->matmul_fwd(c.y, c.x, c.w, c.M, c.K, c.N);
    float *ref = zeros(c.M * c.N);
    for (int64_t i = 0; i < c.M; i++)
        for (int64_t j = 0; j < c.N; j++) {
            double s = 0;
            for (int64_t k = 0; k < c.K; k++) s += (double)c.x[i * c.K + k] * c.w[j * c.K + k];
            ref[i * c.N + j] = (float)s;
        }
    CHECK_CLOSE("matmul fwd vs naive", c.y, ref, c.M * c.N, 1e-5);
    float *dx = zeros(c.M * c.K), *dw = zeros(c.N * c.K);
    op->matmul_bwd(dx, dw, c.r, c.x, c.w, c.M, c.K, c.N, 0);
    fd_check("matmul dx", mm_eval, &c, c.x, dx, c.M * c.K);
    fd_check("matmul dw", mm_eval, &c, c.w, dw, c.N * c.K);
    // accumulate flags: dw accumulates, dx assigns unless asked to accumulate
    float *dx2 = rnd(c.M * c.K, 1), *dw2 = zeros(c.N * c.K);
    op->matmul_bwd(dx2, dw2, c.r, c.x, c.w, c.M, c.K, c.N, 0);
    op->matmul_bwd(NULL, dw2, c.r, c.x, c.w, c.M, c.K, c.N, 0);
    CHECK_CLOSE("matmul dx assigns", dx2, dx, c.M * c.K, 1e-6);
    for (int64_t i = 0; i < c.N * c.K; i++) dw2[i] *= 0.5f;
    CHECK_CLOSE("matmul dw accumulates", dw2, dw, c.N * c.K, 1e-6);
    free(c.x), free(c.w), free(c.y), free(c.r), free(ref), free(dx), free(dw), free(dx2), free(dw2);
}

// ---- embedding ----
typedef struct { float *w, *x, *r; uint32_t *tok; int64_t N, d; } emb_ctx;
static double emb_eval(void *p) {
    emb_ctx *c = p;
    op->embedding_fwd(c->x, c->w, c->tok, c->N, c->d);
    return dot(c->x, c->r, c->N * c->d);
}
static void test_embedding(void) {
    emb_ctx c = {.N = 9, .d = 6};
    int64_t V = 5;
    c.w = rnd(V * c.d, 1);
    c.x = zeros(c.N * c.d);
    c.r = rnd(c.N * c.d, 1);
    c.tok = zt_xmalloc((size_t)c.N * sizeof(uint32_t));
    for (int64_t i = 0; i < c.N; i++) c.tok[i] = (uint32_t)zt_rng_below(&rng, (uint64_t)V);  // repeats likely
    float *dw = zeros(V * c.d);
    op->embedding_bwd(dw, c.r, c.tok, c.N, c.d);
    fd_check("embedding dw", emb_eval, &c, c.w, dw, V * c.d);
    free(c.w), free(c.x), free(c.r), free(c.tok), free(dw);
}

// ---- rmsnorm ----
typedef struct { float *x, *w, *y, *rstd, *r; int64_t rows, d; } rn_ctx;
static double rn_eval(void *p) {
    rn_ctx *c = p;
    op->rmsnorm_fwd(c->y, c->rstd, c->x, c->w, c->rows, c->d, 1e-6f);
    return dot(c->y, c->r, c->rows * c->d);
}
static void test_rmsnorm(void) {
    rn_ctx c = {.rows = 6, .d = 16};
    c.x = rnd(c.rows * c.d, 1);
    c.w = rnd(c.d, 1);
    c.y = zeros(c.rows * c.d);
    c.rstd = zeros(c.rows);
    c.r = rnd(c.rows * c.d, 1);
    rn_eval(&c);
    float *ref = zeros(c.rows * c.d);
    for (int64_t i = 0; i < c.rows; i++) {
        double ss = 0;
        for (int64_t j = 0; j < c.d; j++) ss += (double)c.x[i * c.d + j] * c.x[i * c.d + j];
        double rs = 1.0 / sqrt(ss / c.d + 1e-6);
        for (int64_t j = 0; j < c.d; j++) ref[i * c.d + j] = (float)(c.w[j] * c.x[i * c.d + j] * rs);
    }
    CHECK_CLOSE("rmsnorm fwd vs naive", c.y, ref, c.rows * c.d, 1e-5);
    float *dx = zeros(c.rows * c.d), *dw = zeros(c.d);
    op->rmsnorm_bwd(dx, dw, c.r, c.x, c.w, c.rstd, c.rows, c.d);
    fd_check("rmsnorm dx", rn_eval, &c, c.x, dx, c.rows * c.d);
    fd_check("rmsnorm dw", rn_eval, &c, c.w, dw, c.d);
    free(c.x), free(c.w), free(c.y), free(c.rstd), free(c.r), free(ref), free(dx), free(dw);
}

// ---- rope ----
typedef struct { float *x, *y, *cs, *sn, *r; const int32_t *pos; int64_t B, S, nh, D; } rope_ctx;
static double rope_eval(void *p) {
    rope_ctx *c = p;
    int64_t n = c->B * c->S * c->nh * c->D;
    memcpy(c->y, c->x, (size_t)n * sizeof(float));
    op->rope_fwd(c->y, c->cs, c->sn, c->pos, c->B, c->S, c->nh, c->D);
    return dot(c->y, c->r, n);
}
// pos: NULL (positions t % S) or per-token document positions
static void test_rope(const int32_t *pos) {
    rope_ctx c = {.B = 2, .S = 5, .nh = 3, .D = 8, .pos = pos};
    int64_t n = c.B * c.S * c.nh * c.D;
    c.x = rnd(n, 1);
    c.y = zeros(n);
    c.r = rnd(n, 1);
    c.cs = zeros(c.S * c.D / 2);
    c.sn = zeros(c.S * c.D / 2);
    zt_rope_table(c.cs, c.sn, c.S, c.D, 10000.0);
    // table vs double-precision angles (fp32 angle rounding stays far below 1e-5 at these positions)
    for (int64_t p = 0; p < c.S; p++)
        for (int64_t i = 0; i < c.D / 2; i++) {
            double ang = p / pow(10000.0, 2.0 * i / c.D);
            CHECK(fabs(c.cs[p * c.D / 2 + i] - cos(ang)) < 1e-5, "rope cos table p=%lld i=%lld", (long long)p,
                  (long long)i);
        }
    rope_eval(&c);
    // naive rotate_half formula on every head of every token, at its position
    for (int64_t t = 0; t < c.B * c.S; t++)
        for (int64_t h = 0; h < c.nh; h++) {
            int64_t half = c.D / 2;
            const float *xv = c.x + (t * c.nh + h) * c.D;
            const float *yv = c.y + (t * c.nh + h) * c.D;
            float ref[8];
            for (int64_t i = 0; i < c.D; i++) {
                double ang = (double)(pos ? pos[t] : t % c.S) / pow(10000.0, 2.0 * (i % half) / c.D);
                double rot = i < half ? -xv[i + half] : xv[i - half];
                ref[i] = (float)(xv[i] * cos(ang) + rot * sin(ang));
            }
            char name[96];
            snprintf(name, sizeof name, "rope fwd vs rotate_half t=%lld h=%lld%s", (long long)t, (long long)h,
                     pos ? " (document positions)" : "");
            CHECK_CLOSE(name, yv, ref, c.D, 1e-5);
        }
    float *dx = zt_xmalloc((size_t)n * sizeof(float));
    memcpy(dx, c.r, (size_t)n * sizeof(float));
    op->rope_bwd(dx, c.cs, c.sn, c.pos, c.B, c.S, c.nh, c.D);
    fd_check(pos ? "rope dx (document positions)" : "rope dx", rope_eval, &c, c.x, dx, n);
    free(c.x), free(c.y), free(c.r), free(c.cs), free(c.sn), free(dx);
}

// ---- attention ----
typedef struct { float *q, *k, *v, *o, *st, *r; const int32_t *pos; int64_t B, S, H, Hkv, D; } att_ctx;
static double att_eval(void *ctx) {
    att_ctx *c = ctx;
    op->attention_fwd(c->o, c->st, c->q, c->k, c->v, c->pos, c->B, c->S, c->H, c->Hkv, c->D);
    return dot(c->o, c->r, c->B * c->S * c->H * c->D);
}
// pos: NULL (plain causal) or document positions: query i sees keys i - pos[i] .. i
static void test_attention(int64_t H, int64_t Hkv, const int32_t *pos) {
    att_ctx c = {.B = 2, .S = 6, .H = H, .Hkv = Hkv, .D = 4, .pos = pos};
    int64_t nq = c.B * c.S * c.H * c.D, nk = c.B * c.S * c.Hkv * c.D;
    c.q = rnd(nq, 1);
    c.k = rnd(nk, 1);
    c.v = rnd(nk, 1);
    c.o = zeros(nq);
    c.r = rnd(nq, 1);
    c.st = zeros(c.B * c.H * c.S * 2);
    att_eval(&c);
    // naive: explicit softmax over lo <= j <= i in double, KV head h / (H / Hkv)
    float *ref = zeros(nq);
    for (int64_t b = 0; b < c.B; b++)
        for (int64_t h = 0; h < c.H; h++)
            for (int64_t i = 0; i < c.S; i++) {
                int64_t kh = h / (c.H / c.Hkv), lo = pos ? i - pos[b * c.S + i] : 0;
                double s[64], mx = -1e300, z = 0;
                for (int64_t j = lo; j <= i; j++) {
                    double d = 0;
                    for (int64_t e = 0; e < c.D; e++)
                        d += (double)c.q[((b * c.S + i) * c.H + h) * c.D + e] * c.k[((b * c.S + j) * c.Hkv + kh) * c.D + e];
                    s[j] = d / sqrt((double)c.D);
                    if (s[j] > mx) mx = s[j];
                }
                for (int64_t j = lo; j <= i; j++) z += (s[j] = exp(s[j] - mx));
                for (int64_t e = 0; e < c.D; e++) {
                    double acc = 0;
                    for (int64_t j = lo; j <= i; j++) acc += s[j] / z * c.v[((b * c.S + j) * c.Hkv + kh) * c.D + e];
                    ref[((b * c.S + i) * c.H + h) * c.D + e] = (float)acc;
                }
            }
    char name[96];
    const char *tag = pos ? ", documents" : "";
    snprintf(name, sizeof name, "attention fwd vs naive H=%lld Hkv=%lld%s", (long long)H, (long long)Hkv, tag);
    CHECK_CLOSE(name, c.o, ref, nq, 1e-5);
    if (pos) {  // isolation, independently: each document alone through the plain causal op
        float *one = zeros(nq);
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t i0 = 0; i0 < c.S;) {
                int64_t n = 1;
                while (i0 + n < c.S && pos[b * c.S + i0 + n] != 0) n++;
                const int64_t t0 = b * c.S + i0;
                float *o1 = zeros(n * c.H * c.D), *p1 = zeros(c.H * n * 2);
                op->attention_fwd(o1, p1, c.q + t0 * c.H * c.D, c.k + t0 * c.Hkv * c.D, c.v + t0 * c.Hkv * c.D, NULL,
                                  1, n, c.H, c.Hkv, c.D);
                memcpy(one + t0 * c.H * c.D, o1, (size_t)(n * c.H * c.D) * sizeof(float));
                free(o1), free(p1);
                i0 += n;
            }
        snprintf(name, sizeof name, "attention documents = each document alone H=%lld Hkv=%lld", (long long)H,
                 (long long)Hkv);
        CHECK_CLOSE(name, c.o, one, nq, 1e-6);
        free(one);
    }
    float *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk);
    op->attention_bwd(dq, dk, dv, c.r, c.o, c.st, c.q, c.k, c.v, c.pos, c.B, c.S, c.H, c.Hkv, c.D);
    snprintf(name, sizeof name, "attention dq (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
    fd_check(name, att_eval, &c, c.q, dq, nq);
    snprintf(name, sizeof name, "attention dk (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
    fd_check(name, att_eval, &c, c.k, dk, nk);
    snprintf(name, sizeof name, "attention dv (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
    fd_check(name, att_eval, &c, c.v, dv, nk);
    free(c.q), free(c.k), free(c.v), free(c.o), free(c.r), free(c.st), free(ref), free(dq), free(dk), free(dv);
}

// Longer blocks than one block of query rows and keys (kernels/cpu/attention.c works in blocks
// of 96 x 96): S = 300 gives blocks of 96, 96, 96 and 12, and the documents cross the block
// edges (one starts at 140, inside the second block, another at 201 inside the third), so a block's first
// visible key, rows that see nothing of a key block and the zeroed entries around each row's
// band are exercised. Forward, dq, dk and dv against a naive double-precision forward and
// backward (tolerance 1e-5 forward, 1e-4 gradients, relative to the largest reference entry);
// then the same bits from every sgemm kernel this CPU runs and at 1 and 3 threads.
// D > 8 (40: more than one column panel of every sgemm kernel) as well: a held-rows query block whose
// last key falls inside a key block (rows [50, 100) and [200, 250): keys up to 249 of the block 192..287).
static void test_attention_panels(int64_t H, int64_t Hkv, int docs, int64_t D) {
    const int64_t B = 2, S = 300, g = H / Hkv, nq = B * S * H * D, nk = B * S * Hkv * D;
    static const int64_t doc_len[2][3] = {{40, 100, 160}, {1, 200, 99}};
    int32_t *pos = NULL;
    if (docs) {
        pos = zt_xmalloc((size_t)(B * S) * sizeof(int32_t));
        for (int64_t b = 0; b < B; b++)
            for (int64_t d = 0, t = 0; d < 3; d++)
                for (int64_t i = 0; i < doc_len[b][d]; i++) pos[b * S + t++] = (int32_t)i;
    }
    float *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *dout = rnd(nq, 1), *o = zeros(nq);
    float *st = zeros(B * H * S * 2), *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk);
    op->attention_fwd(o, st, q, k, v, pos, B, S, H, Hkv, D);
    op->attention_bwd(dq, dk, dv, dout, o, st, q, k, v, pos, B, S, H, Hkv, D);
    float *ro = zeros(nq), *rdq = zeros(nq), *rdk = zeros(nk), *rdv = zeros(nk);
    double *dk_acc = zt_xcalloc((size_t)nk, sizeof(double)), *dv_acc = zt_xcalloc((size_t)nk, sizeof(double));
    double *p = zt_xmalloc((size_t)S * sizeof(double)), *dp = zt_xmalloc((size_t)S * sizeof(double));
    const double sc = 1.0 / sqrt((double)D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t kh = h / g, lo = pos ? i - pos[b * S + i] : 0;
                const float *qi = q + ((b * S + i) * H + h) * D, *doi = dout + ((b * S + i) * H + h) * D;
                double mx = -1e300, z = 0, rowdot = 0;
                for (int64_t j = lo; j <= i; j++) {
                    const float *kj = k + ((b * S + j) * Hkv + kh) * D;
                    double d = 0;
                    for (int64_t e = 0; e < D; e++) d += (double)qi[e] * kj[e];
                    p[j] = d * sc;
                    if (p[j] > mx) mx = p[j];
                }
                for (int64_t j = lo; j <= i; j++) z += (p[j] = exp(p[j] - mx));
                for (int64_t j = lo; j <= i; j++) {
                    const float *vj = v + ((b * S + j) * Hkv + kh) * D;
                    p[j] /= z;
                    double d = 0;
                    for (int64_t e = 0; e < D; e++) d += (double)doi[e] * vj[e];
                    dp[j] = d;
                    rowdot += p[j] * d;
                }
                for (int64_t e = 0; e < D; e++) {
                    double acc = 0, gq = 0;
                    for (int64_t j = lo; j <= i; j++) {
                        const int64_t kv = ((b * S + j) * Hkv + kh) * D + e;
                        const double ds = p[j] * (dp[j] - rowdot) * sc;
                        acc += p[j] * v[kv];
                        gq += ds * k[kv];
                        dk_acc[kv] += ds * qi[e];
                        dv_acc[kv] += p[j] * doi[e];
                    }
                    ro[((b * S + i) * H + h) * D + e] = (float)acc;
                    rdq[((b * S + i) * H + h) * D + e] = (float)gq;
                }
            }
    for (int64_t i = 0; i < nk; i++) rdk[i] = (float)dk_acc[i], rdv[i] = (float)dv_acc[i];
    char name[160];
    char tag[48];
    snprintf(tag, sizeof tag, "%s%s", docs ? ", documents across blocks" : "", D == 40 ? ", D=40" : "");
    snprintf(name, sizeof name, "attention S=300 fwd (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
    CHECK_CLOSE(name, o, ro, nq, 1e-5);
    snprintf(name, sizeof name, "attention S=300 dq (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
    CHECK_CLOSE(name, dq, rdq, nq, 1e-4);
    snprintf(name, sizeof name, "attention S=300 dk (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
    CHECK_CLOSE(name, dk, rdk, nk, 1e-4);
    snprintf(name, sizeof name, "attention S=300 dv (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
    CHECK_CLOSE(name, dv, rdv, nk, 1e-4);
    static const char *isas[] = {"generic", "avx2", "avx512"};
    const char *was = cpu_sgemm_isa_id() == CPU_ISA_AVX512 ? "avx512" : cpu_sgemm_isa_id() == CPU_ISA_AVX2 ? "avx2" : "generic";
    const int threads_were = omp_get_max_threads();
    float *o2 = zeros(nq), *st2 = zeros(B * H * S * 2), *dq2 = zeros(nq), *dk2 = zeros(nk), *dv2 = zeros(nk);
    for (int x = 0; x < 3; x++)
        for (int threads = 1; threads <= 3; threads += 2) {
            if (cpu_sgemm_set_isa(isas[x]) != 0) continue;
            omp_set_num_threads(threads);
            op->attention_fwd(o2, st2, q, k, v, pos, B, S, H, Hkv, D);
            op->attention_bwd(dq2, dk2, dv2, dout, o2, st2, q, k, v, pos, B, S, H, Hkv, D);
            CHECK(!memcmp(o, o2, (size_t)nq * 4) && !memcmp(st, st2, (size_t)(B * H * S * 2) * 4) &&
                      !memcmp(dq, dq2, (size_t)nq * 4) && !memcmp(dk, dk2, (size_t)nk * 4) && !memcmp(dv, dv2, (size_t)nk * 4),
                  "attention S=300 bit-identical with the %s sgemm kernel at %d threads (H=%lld Hkv=%lld%s)", isas[x],
                  threads, (long long)H, (long long)Hkv, tag);
        }
    cpu_sgemm_set_isa(was);
    omp_set_num_threads(threads_were);
    free(o2), free(st2), free(dq2), free(dk2), free(dv2);

    // A subset of the queries against every key (attention_fwd_rows / _bwd_rows, context
    // parallelism's held tokens): rows [50, 100) and [200, 250) (the chunks 1 and 4 of 6 a rank of
    // C = 3 holds; both cross key blocks of 96 and, with documents, document starts) and two padding
    // rows (-1). Against the whole block with dO zero outside the held rows: o, stats, dq of the held
    // rows and dk, dv of every key within 1e-6 of the largest entry (the same products; dk and dv sum
    // over other query blocks); the padding rows' dq 0.
    {
        const int64_t Sq = 102;
        int32_t *qmap = zt_xmalloc((size_t)Sq * sizeof(int32_t)), *qp = zt_xmalloc((size_t)(B * Sq) * sizeof(int32_t));
        for (int64_t r = 0; r < Sq; r++) qmap[r] = r < 50 ? (int32_t)(50 + r) : r < 100 ? (int32_t)(150 + r) : -1;
        const int64_t nqr = B * Sq * H * D, w = H * D;
        float *qr = rnd(nqr, 1), *dor = zeros(nqr), *dout_m = zeros(nq);
        for (int64_t b = 0; b < B; b++)
            for (int64_t r = 0; r < Sq; r++) {
                const int64_t g = qmap[r];
                qp[b * Sq + r] = g < 0 ? 0 : pos ? pos[b * S + g] : (int32_t)g;
                if (g < 0) continue;
                memcpy(qr + (b * Sq + r) * w, q + (b * S + g) * w, (size_t)w * 4);
                memcpy(dor + (b * Sq + r) * w, dout + (b * S + g) * w, (size_t)w * 4);
                memcpy(dout_m + (b * S + g) * w, dout + (b * S + g) * w, (size_t)w * 4);
            }
        float *dq_m = zeros(nq), *dk_m = zeros(nk), *dv_m = zeros(nk);
        op->attention_bwd(dq_m, dk_m, dv_m, dout_m, o, st, q, k, v, pos, B, S, H, Hkv, D);
        float *or_ = zeros(nqr), *str = zeros(B * H * Sq * 2), *dqr = zeros(nqr), *dkr = zeros(nk), *dvr = zeros(nk);
        op->attention_fwd_rows(or_, str, qr, k, v, qp, qmap, B, Sq, S, H, Hkv, D);
        op->attention_bwd_rows(dqr, dkr, dvr, dor, or_, str, qr, k, v, qp, qmap, B, Sq, S, H, Hkv, D);
        // the held rows gathered from the whole block's results
        float *o_ref = zeros(nqr), *dq_ref = zeros(nqr), *st_ref = zeros(B * H * Sq * 2), *st_got = zeros(B * H * Sq * 2);
        for (int64_t b = 0; b < B; b++)
            for (int64_t r = 0; r < Sq; r++) {
                const int64_t g = qmap[r];
                if (g < 0) continue;
                memcpy(o_ref + (b * Sq + r) * w, o + (b * S + g) * w, (size_t)w * 4);
                memcpy(dq_ref + (b * Sq + r) * w, dq_m + (b * S + g) * w, (size_t)w * 4);
                for (int64_t h = 0; h < H; h++)
                    for (int e = 0; e < 2; e++) {
                        st_ref[((b * H + h) * Sq + r) * 2 + e] = st[((b * H + h) * S + g) * 2 + e];
                        st_got[((b * H + h) * Sq + r) * 2 + e] = str[((b * H + h) * Sq + r) * 2 + e];
                    }
            }
        float *o_got = zeros(nqr);  // padding rows left out (they see key 0 only: their own value)
        for (int64_t b = 0; b < B; b++)
            for (int64_t r = 0; r < 100; r++) memcpy(o_got + (b * Sq + r) * w, or_ + (b * Sq + r) * w, (size_t)w * 4);
        snprintf(name, sizeof name, "attention rows fwd = the block's held rows (H=%lld Hkv=%lld%s)", (long long)H,
                 (long long)Hkv, tag);
        CHECK_CLOSE(name, o_got, o_ref, nqr, 1e-6);
        snprintf(name, sizeof name, "attention rows stats (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
        CHECK_CLOSE(name, st_got, st_ref, B * H * Sq * 2, 1e-6);
        snprintf(name, sizeof name, "attention rows dq (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
        CHECK_CLOSE(name, dqr, dq_ref, nqr, 1e-6);
        snprintf(name, sizeof name, "attention rows dk (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
        CHECK_CLOSE(name, dkr, dk_m, nk, 1e-6);
        snprintf(name, sizeof name, "attention rows dv (H=%lld Hkv=%lld%s)", (long long)H, (long long)Hkv, tag);
        CHECK_CLOSE(name, dvr, dv_m, nk, 1e-6);
        free(qmap), free(qp), free(qr), free(dor), free(dout_m), free(dq_m), free(dk_m), free(dv_m), free(or_);
        free(str), free(dqr), free(dkr), free(dvr), free(o_ref), free(dq_ref), free(st_ref), free(st_got), free(o_got);
    }
    free(q), free(k), free(v), free(dout), free(o), free(st), free(dq), free(dk), free(dv), free(ro), free(rdq);
    free(rdk), free(rdv), free(dk_acc), free(dv_acc), free(p), free(dp), free(pos);
}

// ---- swiglu ----
typedef struct { float *g, *u, *h, *r; int64_t n; } sw_ctx;
static double sw_eval(void *p) {
    sw_ctx *c = p;
    op->swiglu_fwd(c->h, c->g, c->u, c->n);
    return dot(c->h, c->r, c->n);
}
static void test_swiglu(void) {
    sw_ctx c = {.n = 40};
    c.g = rnd(c.n, 2);
    c.u = rnd(c.n, 1);
    c.h = zeros(c.n);
    c.r = rnd(c.n, 1);
    sw_eval(&c);
    float *ref = zeros(c.n);
    for (int64_t i = 0; i < c.n; i++) ref[i] = (float)(c.g[i] / (1 + exp(-(double)c.g[i])) * c.u[i]);
    CHECK_CLOSE("swiglu fwd vs naive", c.h, ref, c.n, 1e-5);
    float *dg = zeros(c.n), *du = zeros(c.n);
    op->swiglu_bwd(dg, du, c.r, c.g, c.u, c.n);
    fd_check("swiglu dg", sw_eval, &c, c.g, dg, c.n);
    fd_check("swiglu du", sw_eval, &c, c.u, du, c.n);
    free(c.g), free(c.u), free(c.h), free(c.r), free(ref), free(dg), free(du);
}

// ---- fused lm_head + cross-entropy ----
typedef struct { float *x, *w; int32_t *t; int64_t N, d, V; } xe_ctx;
static double xe_eval(void *p) {
    xe_ctx *c = p;
    return op->lmhead_xent(NULL, NULL, c->x, c->w, c->t, c->N, c->d, c->V, 1.0f);
}
static void test_xent(int64_t V) {
    xe_ctx c = {.N = 11, .d = 8, .V = V};
    c.x = rnd(c.N * c.d, 1);
    c.w = rnd(c.V * c.d, 1);
    c.t = zt_xmalloc((size_t)c.N * sizeof(int32_t));
    for (int64_t i = 0; i < c.N; i++) c.t[i] = i % 4 == 3 ? -1 : (int32_t)zt_rng_below(&rng, (uint64_t)c.V);
    double loss = xe_eval(&c), ref = 0;
    for (int64_t i = 0; i < c.N; i++) {
        if (c.t[i] < 0) continue;
        double mx = -1e300, z = 0, lt = 0;
        double *l = zt_xmalloc((size_t)c.V * sizeof(double));
        for (int64_t j = 0; j < c.V; j++) {
            double s = 0;
            for (int64_t e = 0; e < c.d; e++) s += (double)c.x[i * c.d + e] * c.w[j * c.d + e];
            l[j] = s;
            if (s > mx) mx = s;
        }
        for (int64_t j = 0; j < c.V; j++) z += exp(l[j] - mx);
        lt = l[c.t[i]];
        ref += mx + log(z) - lt;
        free(l);
    }
    CHECK(fabs(loss - ref) <= 1e-5 * fabs(ref), "xent loss %.8f vs naive %.8f (V=%lld)", loss, ref, (long long)V);
    float *dx = zeros(c.N * c.d), *dw = zeros(c.V * c.d);
    op->lmhead_xent(dx, dw, c.x, c.w, c.t, c.N, c.d, c.V, 1.0f);
    char name[64];
    snprintf(name, sizeof name, "lmhead_xent dx (V=%lld)", (long long)V);
    fd_check(name, xe_eval, &c, c.x, dx, c.N * c.d);
    snprintf(name, sizeof name, "lmhead_xent dw (V=%lld)", (long long)V);
    fd_check(name, xe_eval, &c, c.w, dw, c.V * c.d);
    free(c.x), free(c.w), free(c.t), free(dx), free(dw);
}

// ---- AdamW and norms against a naive double implementation of torch's update ----
static void test_adamw(void) {
    int64_t n = 33;
    float *p = rnd(n, 1), *m = zeros(n), *v = zeros(n);
    double *pr = zt_xmalloc((size_t)n * sizeof(double)), *mr = zt_xcalloc((size_t)n, sizeof(double)),
           *vr = zt_xcalloc((size_t)n, sizeof(double));
    for (int64_t i = 0; i < n; i++) pr[i] = p[i];
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    for (int t = 1; t <= 5; t++) {
        float *g = rnd(n, 1);
        op->adamw(p, g, m, v, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t);
        for (int64_t i = 0; i < n; i++) {
            pr[i] *= 1 - lr * wd;
            mr[i] = b1 * mr[i] + (1 - b1) * g[i];
            vr[i] = b2 * vr[i] + (1 - b2) * (double)g[i] * g[i];
            double mh = mr[i] / (1 - pow(b1, t)), vh = vr[i] / (1 - pow(b2, t));
            pr[i] -= lr * mh / (sqrt(vh) + eps);
        }
        free(g);
    }
    float *pf = zeros(n);
    for (int64_t i = 0; i < n; i++) pf[i] = (float)pr[i];
    CHECK_CLOSE("adamw 5 steps vs naive double", p, pf, n, 1e-5);
    double ss = op->sumsq(p, n), ssr = 0;
    for (int64_t i = 0; i < n; i++) ssr += (double)p[i] * p[i];
    CHECK(fabs(ss - ssr) <= 1e-12 * ssr, "sumsq %.12g vs %.12g", ss, ssr);
    free(p), free(m), free(v), free(pr), free(mr), free(vr), free(pf);
}

int main(void) {
    zt_rng_seed(&rng, 1234);
    test_matmul();
    test_embedding();
    test_rmsnorm();
    // packed documents: block 0 holds [0 1 2] [3 4] [5] (a one-token document at the end),
    // block 1 [0] [1 2 3 4 5]; the rope blocks (S = 5) [0 1] [2 3 4] and [0 1 2 3] [4]
    static const int32_t att_pos[12] = {0, 1, 2, 0, 1, 0, 0, 0, 1, 2, 3, 4};
    static const int32_t rope_pos[10] = {0, 1, 0, 1, 2, 0, 1, 2, 3, 0};
    test_rope(NULL);
    test_rope(rope_pos);
    test_attention(4, 2, NULL);
    test_attention(3, 3, NULL);
    test_attention(4, 1, NULL);
    test_attention(4, 2, att_pos);
    test_attention(4, 1, att_pos);
    test_attention_panels(4, 2, 0, 8);
    test_attention_panels(4, 1, 1, 8);
    test_attention_panels(3, 3, 1, 8);
    test_attention_panels(4, 2, 0, 40);
    test_attention_panels(4, 1, 1, 40);
    test_swiglu();
    test_xent(19);
    test_xent(700000);  // wider than one 4M-float logits chunk for N=11: exercises chunking
    test_adamw();
    TEST_END();
}
