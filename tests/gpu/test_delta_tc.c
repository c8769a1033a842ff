// The gated delta rule's chunked form on tensor cores (kernels/cuda/delta_chunk_tc.cu) against the
// CPU reference (kernels/cpu/delta_chunk.c via zt_cpu_ops, fp32) from the same bf16-rounded inputs,
// and against the fp32 chunked kernels (delta_chunk.cu): o, the saved states, dq, dk, dv, dg, dbeta.
// GPU outputs are poisoned with NaN first, so an unwritten element fails. Errors are max-norm
// relative (max|gpu - ref| / max|ref|). Shapes: S = 1 .. 150 and one long row (S = 4,096), packed documents at and across the 64-token span edges, one-token documents,
// Hv = 3 Hk, Dk = Dv = 128, a last column block of 16, nearly parallel keys with beta near 1.
// --full (by hand): S = 4,096 at Dk = Dv = 128 too, every shape also against the fp32 kernels.
// Also: two forward and two backward runs bit-identical; ZT_CUDA_DELTA_TC=1 routes zt_cuda_delta_fwd
// / _bwd here (bit-identical), and to the fp32 chunked kernels where the head dimensions are not
// multiples of 16. Prints one "RESULT op=... err=... tol=... ok=..." line per check; exit 77 without
// a device (here: always run on the CPU execution of CUDA, tests/cudaemu).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cuda/zt_cuda.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

// Tolerances (max-norm relative). The tensor-core products take bf16 operands (the state S0, the
// inverse T, P, Y and the new values Vn are rounded to bf16 once each, as fla's chunk_gated_delta_rule
// does), so every output, fp32 ones included, is held at the bf16 tensor-core tolerances of the
// tensor-core attention (tests/gpu/test_cuda_ops.c): 1e-2 for the forward's o and saved states,
// 2e-2 for the gradients. Against the fp32 chunked kernels the same.
#define TOL_O 1e-2
#define TOL_SAVED 1e-2
#define TOL_GRAD 2e-2
#define TOL_EXACT 0.0

static uint64_t g_seed = 50505050;
static uint64_t seed(void) { return g_seed++; }
// the same bytes in two device buffers
static int same_bytes(const void *a, const void *b, size_t n) { return !zt_dev_bytes_differ(a, b, n); }

// Document starts: 0: none; 1: at S/4 + b % 3 and the token after it (a one-token document), at 64
// (a span's first token), at S/2 + 3, at the last token, odd blocks also at 1; 2: every 17 tokens
// from 5 and at 63, 64, 65, 127, 128, 129 (one-token documents at a span's last and first token),
// odd blocks also at the last token; 3 (long rows): documents of 50 .. 700 tokens across many spans,
// one-token documents at 64 k - 1 and 64 k.
static int32_t *positions(int kind, int64_t B, int64_t S) {
    if (!kind) return NULL;
    int32_t *pos = zt_xmalloc((size_t)(B * S) * sizeof(int32_t));
    for (int64_t b = 0; b < B; b++) {
        const int64_t q = S / 4 + b % 3, h = S / 2 + 3;
        int32_t p = 0;
        int64_t next = 50;
        for (int64_t t = 0; t < S; t++) {
            int start = t == 0;
            if (kind == 1) start |= t == q || t == q + 1 || t == 64 || t == h || t == S - 1 || (b % 2 && t == 1);
            if (kind == 2)
                start |= t % 17 == 5 || t == 63 || t == 64 || t == 65 || t == 127 || t == 128 || t == 129 ||
                         (b % 2 && t == S - 1);
            if (kind == 3) {
                if (t == next) start = 1, next += 50 + (next * 37) % 650;
                start |= t == 1023 || t == 1024 || t == 2047 || t == 2048;
            }
            p = start ? 0 : p + 1;
            pos[b * S + t] = p;
        }
    }
    return pos;
}

typedef struct {
    zt_bf16 *o, *dq, *dk, *dv;
    float *saved, *dg, *db;
} delta_out;
enum { FORM_TC, FORM_CHUNK, FORM_DISPATCH };
static void run_form(zt_cuda_ctx *c, delta_out *r, int form, const zt_bf16 *gq, const zt_bf16 *gk, const zt_bf16 *gv,
                     const zt_bf16 *gdo, const float *gg, const float *gb, const int32_t *gpos, int64_t B, int64_t S,
                     int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
    const int64_t N = B * S, nq = N * Hk * Dk, nv = N * Hv * Dv, ng = N * Hv;
    r->o = zt_dev_bf16_nan(nv), r->saved = zt_dev_f32_nan(zt_cuda_delta_saved_floats(B, S, Hv, Dk, Dv));
    (form == FORM_TC ? zt_cuda_delta_tc_fwd : form == FORM_CHUNK ? zt_cuda_delta_chunk_fwd : zt_cuda_delta_fwd)(
        NULL, r->o, r->saved, gq, gk, gv, gg, gb, gpos, B, S, Hk, Hv, Dk, Dv);
    r->dq = zt_dev_bf16_nan(nq), r->dk = zt_dev_bf16_nan(nq), r->dv = zt_dev_bf16_nan(nv), r->dg = zt_dev_f32_nan(ng), r->db = zt_dev_f32_nan(ng);
    (form == FORM_TC ? zt_cuda_delta_tc_bwd : form == FORM_CHUNK ? zt_cuda_delta_chunk_bwd : zt_cuda_delta_bwd)(
        c, NULL, r->dq, r->dk, r->dv, r->dg, r->db, gdo, r->saved, gq, gk, gv, gg, gb, gpos, B, S, Hk, Hv, Dk, Dv);
}
static void out_free(delta_out *r) {
    void *p[] = {r->o, r->dq, r->dk, r->dv, r->saved, r->dg, r->db};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) zt_cuda_free(p[i]);
}
static int same_out(const delta_out *a, const delta_out *b, int64_t nq, int64_t nv, int64_t ng, int64_t ns) {
    return same_bytes(a->o, b->o, (size_t)nv * 2) && same_bytes(a->saved, b->saved, (size_t)ns * 4) &&
           same_bytes(a->dq, b->dq, (size_t)nq * 2) && same_bytes(a->dk, b->dk, (size_t)nq * 2) &&
           same_bytes(a->dv, b->dv, (size_t)nv * 2) && same_bytes(a->dg, b->dg, (size_t)ng * 4) &&
           same_bytes(a->db, b->db, (size_t)ng * 4);
}

static double g_max[2][7];  // largest errors: [0] vs the CPU, [1] vs the fp32 chunked kernels

// hard: nearly parallel keys (one direction per key head plus 10% noise), beta in [0.9, 1), g in
// [-0.05, 0): A's entries near 1, the hardest case for the inverse and the bf16 rounding of T.
// cmp: also against the fp32 chunked kernels, and through the switch (ZT_CUDA_DELTA_TC=1).
static void test_delta_tc(zt_cuda_ctx *c, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv,
                          int docs, int hard, int cmp) {
    char sh[96];
    snprintf(sh, sizeof sh, "B%lld_S%lld_Hk%lld_Hv%lld_Dk%lld_Dv%lld%s%s", (long long)B, (long long)S, (long long)Hk,
             (long long)Hv, (long long)Dk, (long long)Dv, docs ? (docs == 1 ? "_docs" : "_manydocs") : "",
             hard ? "_hard" : "");
    const double t0 = zt_now();
    const int64_t N = B * S, nq = N * Hk * Dk, nv = N * Hv * Dv, ng = N * Hv;
    const int64_t ns = zt_cuda_delta_saved_floats(B, S, Hv, Dk, Dv);
    int32_t *pos = positions(docs, B, S);
    int32_t *gpos = NULL;
    if (pos) gpos = zt_cuda_malloc((size_t)N * 4), zt_cuda_memcpy_h2d(gpos, pos, (size_t)N * 4);
    float *q = zt_host_normal(nq, 1.0f, seed(), 0), *k = zt_host_normal(nq, hard ? 0.1f : 1.0f, seed(), 0);
    float *ri = zt_host_buf(N * Hk);
    if (hard) {
        float *dir = zt_host_normal(Hk * Dk, 1.0f, seed(), 0);
        for (int64_t i = 0; i < nq; i++) k[i] += dir[i % (Hk * Dk)];
        free(dir);
    }
    zt_cpu_ops.l2norm_fwd(q, ri, q, N * Hk, Dk, 1e-6f);  // l2-normalised rows, as the model feeds them
    zt_cpu_ops.l2norm_fwd(k, ri, k, N * Hk, Dk, 1e-6f);
    zt_round_bf16(q, nq), zt_round_bf16(k, nq);
    float *v = zt_host_normal(nv, 1.0f, seed(), 1), *dout = zt_host_normal(nv, 1.0f, seed(), 1);
    float *g = hard ? zt_host_uniform(ng, -0.05f, -0.001f, seed(), 0) : zt_host_uniform(ng, -1.5f, -0.01f, seed(), 0);
    float *beta = hard ? zt_host_uniform(ng, 0.9f, 0.999f, seed(), 0) : zt_host_uniform(ng, 0.05f, 0.95f, seed(), 0);
    float *o = zt_host_buf(nv), *saved = zt_host_buf(ns), *dq = zt_host_buf(nq), *dk = zt_host_buf(nq), *dv = zt_host_buf(nv), *dg = zt_host_buf(ng),
          *db = zt_host_buf(ng);
    zt_cpu_ops.delta_fwd(o, saved, q, k, v, g, beta, pos, B, S, Hk, Hv, Dk, Dv);
    zt_cpu_ops.delta_bwd(dq, dk, dv, dg, db, dout, saved, q, k, v, g, beta, pos, B, S, Hk, Hv, Dk, Dv);
    zt_bf16 *gq = zt_dev_bf16(q, nq), *gk = zt_dev_bf16(k, nq), *gv = zt_dev_bf16(v, nv), *gdo = zt_dev_bf16(dout, nv);
    float *gg = zt_dev_f32(g, ng), *gb = zt_dev_f32(beta, ng);

    delta_out tc, tc2, ch;
    run_form(c, &tc, FORM_TC, gq, gk, gv, gdo, gg, gb, gpos, B, S, Hk, Hv, Dk, Dv);
    double e;
#define CHECK(set, i, name, err, tol) (zt_op_report(name, sh, e = (err), tol), g_max[set][i] = fmax(g_max[set][i], e))
    CHECK(0, 0, "delta_tc_fwd_o", zt_dev_err_bf16(tc.o, o, nv), TOL_O);
    CHECK(0, 1, "delta_tc_fwd_saved", zt_dev_err_f32(tc.saved, saved, ns), TOL_SAVED);
    CHECK(0, 2, "delta_tc_bwd_dq", zt_dev_err_bf16(tc.dq, dq, nq), TOL_GRAD);
    CHECK(0, 3, "delta_tc_bwd_dk", zt_dev_err_bf16(tc.dk, dk, nq), TOL_GRAD);
    CHECK(0, 4, "delta_tc_bwd_dv", zt_dev_err_bf16(tc.dv, dv, nv), TOL_GRAD);
    CHECK(0, 5, "delta_tc_bwd_dg", zt_dev_err_f32(tc.dg, dg, ng), TOL_GRAD);
    CHECK(0, 6, "delta_tc_bwd_dbeta", zt_dev_err_f32(tc.db, db, ng), TOL_GRAD);
    // a second run: forward and backward bit-identical
    run_form(c, &tc2, FORM_TC, gq, gk, gv, gdo, gg, gb, gpos, B, S, Hk, Hv, Dk, Dv);
    zt_op_report("delta_tc_rerun_bit_identical", sh, same_out(&tc, &tc2, nq, nv, ng, ns) ? 0.0 : 1.0, TOL_EXACT);
    out_free(&tc2);
    // against the fp32 chunked kernels (their results as the reference)
    if (cmp) {
        run_form(c, &ch, FORM_CHUNK, gq, gk, gv, gdo, gg, gb, gpos, B, S, Hk, Hv, Dk, Dv);
        float *h = zt_host_buf(nv > ns ? (nv > nq ? nv : nq) : (ns > nq ? ns : nq));
        zt_dev_get_bf16(h, ch.o, nv), CHECK(1, 0, "delta_tc_vs_chunk_o", zt_dev_err_bf16(tc.o, h, nv), TOL_O);
        zt_dev_get_f32(h, ch.saved, ns), CHECK(1, 1, "delta_tc_vs_chunk_saved", zt_dev_err_f32(tc.saved, h, ns), TOL_SAVED);
        zt_dev_get_bf16(h, ch.dq, nq), CHECK(1, 2, "delta_tc_vs_chunk_dq", zt_dev_err_bf16(tc.dq, h, nq), TOL_GRAD);
        zt_dev_get_bf16(h, ch.dk, nq), CHECK(1, 3, "delta_tc_vs_chunk_dk", zt_dev_err_bf16(tc.dk, h, nq), TOL_GRAD);
        zt_dev_get_bf16(h, ch.dv, nv), CHECK(1, 4, "delta_tc_vs_chunk_dv", zt_dev_err_bf16(tc.dv, h, nv), TOL_GRAD);
        zt_dev_get_f32(h, ch.dg, ng), CHECK(1, 5, "delta_tc_vs_chunk_dg", zt_dev_err_f32(tc.dg, h, ng), TOL_GRAD);
        zt_dev_get_f32(h, ch.db, ng), CHECK(1, 6, "delta_tc_vs_chunk_dbeta", zt_dev_err_f32(tc.db, h, ng), TOL_GRAD);
        free(h);
        out_free(&ch);
        // the switch: ZT_CUDA_DELTA_TC=1 makes zt_cuda_delta_fwd / _bwd these kernels
        delta_out sw;
        setenv("ZT_CUDA_DELTA_TC", "1", 1);
        run_form(c, &sw, FORM_DISPATCH, gq, gk, gv, gdo, gg, gb, gpos, B, S, Hk, Hv, Dk, Dv);
        unsetenv("ZT_CUDA_DELTA_TC");
        zt_op_report("delta_tc_env_switch_is_tc", sh, same_out(&sw, &tc, nq, nv, ng, ns) ? 0.0 : 1.0, TOL_EXACT);
        out_free(&sw);
    }
#undef CHECK
    out_free(&tc);
    void *fr[] = {pos, q, k, ri, v, g, beta, dout, o, saved, dq, dk, dv, dg, db};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gpos, gq, gk, gv, gdo, gg, gb};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++)
        if (gf[i]) zt_cuda_free(gf[i]);
    printf("  %s: %.1f s\n", sh, zt_now() - t0);
}

// ZT_CUDA_DELTA_TC=1 with head dimensions the tensor-core kernels do not take (Dv = 24): the fp32
// chunked kernels run (bit-identical to them); and what the kernels take.
static void test_switch_fallback(zt_cuda_ctx *c) {
    const int64_t B = 1, S = 70, Hk = 1, Hv = 2, Dk = 16, Dv = 24, N = B * S;
    const int64_t nq = N * Hk * Dk, nv = N * Hv * Dv, ng = N * Hv, ns = zt_cuda_delta_saved_floats(B, S, Hv, Dk, Dv);
    float *q = zt_host_normal(nq, 0.25f, seed(), 1), *k = zt_host_normal(nq, 0.25f, seed(), 1);
    float *v = zt_host_normal(nv, 1.0f, seed(), 1), *g = zt_host_uniform(ng, -1.0f, -0.01f, seed(), 0);
    float *beta = zt_host_uniform(ng, 0.1f, 0.9f, seed(), 0);
    zt_bf16 *gq = zt_dev_bf16(q, nq), *gk = zt_dev_bf16(k, nq), *gv = zt_dev_bf16(v, nv), *gdo = zt_dev_bf16(v, nv);
    float *gg = zt_dev_f32(g, ng), *gb = zt_dev_f32(beta, ng);
    delta_out sw, ch;
    setenv("ZT_CUDA_DELTA_TC", "1", 1);
    run_form(c, &sw, FORM_DISPATCH, gq, gk, gv, gdo, gg, gb, NULL, B, S, Hk, Hv, Dk, Dv);
    unsetenv("ZT_CUDA_DELTA_TC");
    run_form(c, &ch, FORM_CHUNK, gq, gk, gv, gdo, gg, gb, NULL, B, S, Hk, Hv, Dk, Dv);
    zt_op_report("delta_tc_env_switch_fallback_dv24", "B1_S70_Hk1_Hv2_Dk16_Dv24",
           same_out(&sw, &ch, nq, nv, ng, ns) ? 0.0 : 1.0, TOL_EXACT);
    zt_op_report("delta_tc_supported", "Dk_Dv",
           zt_cuda_delta_tc_supported(128, 128) && zt_cuda_delta_tc_supported(16, 48) &&
                   !zt_cuda_delta_tc_supported(16, 24) && !zt_cuda_delta_tc_supported(8, 16) &&
                   !zt_cuda_delta_tc_supported(144, 128)
               ? 0.0
               : 1.0,
           TOL_EXACT);
    const size_t f = zt_cuda_delta_tc_smem_bytes(128, 0), b = zt_cuda_delta_tc_smem_bytes(128, 1);
    printf("tensor-core delta rule shared memory per block at Dk 128: forward %zu B, backward %zu B\n", f, b);
    zt_op_report("delta_tc_smem_dk128_fits", "Dk128", f <= 227 * 1024 && b <= 227 * 1024 ? 0.0 : 1.0, TOL_EXACT);
    out_free(&sw), out_free(&ch);
    void *fr[] = {q, k, v, g, beta};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gq, gk, gv, gdo, gg, gb};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

int main(int argc, char **argv) {
    zt_skip_without_device();
    int full = 0;
    for (int i = 1; i < argc; i++) full |= !strcmp(argv[i], "--full");
    zt_cuda_ctx *c = zt_cuda_ctx_create();
    const double t0 = zt_now();
    test_switch_fallback(c);
    test_delta_tc(c, 1, 150, 2, 6, 16, 48, 0, 0, 1);    // Hv = 3 Hk, two column blocks (32 + 16), S % 64 != 0
    test_delta_tc(c, 3, 150, 2, 6, 16, 32, 1, 0, 0);    // documents at and across span edges, one-token ones
    test_delta_tc(c, 2, 140, 2, 4, 32, 32, 2, 0, 1);    // many documents, one-token ones at span edges
    test_delta_tc(c, 1, 130, 1, 3, 128, 128, 1, 0, full);  // the 27B's head dims, Hv = 3 Hk
    test_delta_tc(c, 1, 1, 1, 1, 16, 16, 0, 0, 1);      // one token
    test_delta_tc(c, 2, 128, 1, 2, 32, 32, 0, 1, 1);    // two whole spans, nearly parallel keys, slow decay
    if (full) {
        test_delta_tc(c, 1, 4096, 1, 3, 128, 128, 3, 0, 1);  // the long row at the 27B's head dims
        test_delta_tc(c, 2, 200, 2, 4, 64, 96, 2, 0, 1);
        test_delta_tc(c, 1, 4096, 1, 1, 128, 128, 0, 1, 1);
    } else {
        test_delta_tc(c, 1, 4096, 1, 1, 16, 16, 3, 0, 0);  // the long row: 64 spans, documents across them
    }
    zt_cuda_sync(NULL, "test_delta_tc");
    zt_cuda_ctx_destroy(c);
    const char *names[] = {"o", "saved", "dq", "dk", "dv", "dg", "dbeta"};
    const char *sets[] = {"vs CPU", "vs fp32 chunked kernels"};
    for (int s = 0; s < 2; s++) {
        printf("tensor-core delta rule, %s, largest errors over the shapes:", sets[s]);
        for (int i = 0; i < 7; i++) printf(" %s %.2e", names[i], g_max[s][i]);
        printf("\n");
    }
    printf("%d passed, %d failed; %.1f s\n", zt_op_checks() - zt_op_failures(), zt_op_failures(), zt_now() - t0);
    return zt_op_failures() || !zt_op_checks() ? 1 : 0;  // a run that checked nothing fails
}
