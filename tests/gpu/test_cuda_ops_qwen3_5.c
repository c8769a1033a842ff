// CPU-vs-GPU op test of Qwen3.5's kernels (Gated DeltaNet and the gated attention): each
// zt_cuda op against the CPU reference (kernels/cpu via zt_cpu_ops, fp32, or model/qwen3_5.c's
// element-wise formulas) on the same bf16-rounded random inputs, with packed documents, Hv = 3 Hk,
// sequence lengths that are not a multiple of the delta rule's 64-token chunk, and the 27B's
// Dk = Dv = 128. GPU outputs are poisoned with NaN first, so an unwritten element fails. The
// error is the max-norm relative error max|gpu - cpu| / max|cpu|; tolerances are stated below.
// The delta rule runs twice on the GPU: the chunked kernels (the default) and the token recurrence,
// each against the CPU reference, and against each other; --chunk: the chunked form against the
// CPU only (what tests/cudaemu/mutate.py's DF and DB rows run).
// Prints one "RESULT op=... err=... tol=... ok=..." line per check. Exit 77 without a device.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cuda/zt_cuda.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

// Tolerances (max-norm relative), as tests/gpu/test_cuda_ops.c:
#define TOL_BF16 1e-2   // a bf16 output: one rounding (2^-9) plus fp32 arithmetic in another order
#define TOL_F32 1e-5    // fp32 element-wise results and statistics (FMA contraction, device expf)
#define TOL_F32_SUM 1e-4  // fp32 sums over tokens or rows in another order
// The delta rule's fp32 checkpoints, dg and dbeta: the same bf16 inputs, fp32 recurrences over up
// to 200 tokens whose dot products run in another order (CPU SIMD lanes vs one thread per column,
// block sums); measured on the CPU execution of CUDA: <= 4e-7.
#define TOL_DELTA_F32 1e-5
#define TOL_EXACT 0.0

static uint64_t g_seed = 35353535;
static uint64_t seed(void) { return g_seed++; }
// Document positions of B blocks of S tokens: every block starts a document; others start at
// S/4 + b % 3 (a one-token document), at 64 (the delta rule's chunk boundary, when S > 64), at
// S/2 + 3, and at the block's last token; odd blocks also at token 1.
static int32_t *doc_positions(int64_t B, int64_t S) {
    int32_t *pos = zt_xmalloc((size_t)(B * S) * sizeof(int32_t));
    for (int64_t b = 0; b < B; b++) {
        const int64_t q = S / 4 + b % 3, h = S / 2 + 3;
        int32_t p = 0;
        for (int64_t t = 0; t < S; t++) {
            const int start = t == 0 || t == q || t == q + 1 || t == 64 || t == h || t == S - 1 || (b % 2 && t == 1);
            p = start ? 0 : p + 1;
            pos[b * S + t] = p;
        }
    }
    return pos;
}

// ---- conv1d + SiLU -----------------------------------------------------------------------------
static void test_conv1d(zt_cuda_ctx *c, int64_t B, int64_t S, int64_t C, int64_t K, int docs) {
    char sh[64];
    snprintf(sh, sizeof sh, "B%lld_S%lld_C%lld_K%lld%s", (long long)B, (long long)S, (long long)C, (long long)K,
             docs ? "_docs" : "");
    const int64_t N = B * S, n = N * C;
    int32_t *pos = docs ? doc_positions(B, S) : NULL, *gpos = docs ? zt_dev_i32(pos, N) : NULL;
    float *x = zt_host_normal(n, 1.0f, seed(), 1), *w = zt_host_normal(C * K, 0.4f, seed(), 1);
    float *dy = zt_host_normal(n, 1.0f, seed(), 1);
    float *y = zt_host_buf(n), *pre = zt_host_buf(n), *dx = zt_host_buf(n), *dw = zt_host_buf(C * K);
    zt_cpu_ops.conv1d_silu_fwd(y, pre, x, w, pos, B, S, C, K);
    zt_bf16 *gx = zt_dev_bf16(x, n), *gw = zt_dev_bf16(w, C * K), *gdy = zt_dev_bf16(dy, n);
    zt_bf16 *gy = zt_dev_bf16_nan(n), *gpre = zt_dev_bf16_nan(n), *gdx = zt_dev_bf16_nan(n);
    zt_cuda_conv1d_silu_fwd(NULL, gy, gpre, gx, gw, gpos, B, S, C, K);
    zt_op_report("conv1d_silu_fwd_y", sh, zt_dev_err_bf16(gy, y, n), TOL_BF16);
    zt_op_report("conv1d_silu_fwd_pre", sh, zt_dev_err_bf16(gpre, pre, n), TOL_BF16);
    // the CPU backward from the GPU's saved (bf16) pre-activation, as the GPU reads it
    zt_dev_get_bf16(pre, gpre, n);
    float *dw0 = zt_host_normal(C * K, 0.1f, seed(), 0);
    memcpy(dw, dw0, (size_t)(C * K) * sizeof(float));
    zt_cpu_ops.conv1d_silu_bwd(dx, dw, dy, pre, x, w, pos, B, S, C, K);
    float *gdw = zt_dev_f32(dw0, C * K), *gdw2 = zt_dev_f32(dw0, C * K);
    zt_cuda_conv1d_silu_bwd(c, NULL, gdx, gdw, gdy, gpre, gx, gw, gpos, B, S, C, K);
    zt_op_report("conv1d_silu_bwd_dx", sh, zt_dev_err_bf16(gdx, dx, n), TOL_BF16);
    zt_op_report("conv1d_silu_bwd_dw", sh, zt_dev_err_f32(gdw, dw, C * K), TOL_F32_SUM);
    zt_cuda_conv1d_silu_bwd(c, NULL, NULL, gdw2, gdy, gpre, gx, gw, gpos, B, S, C, K);
    zt_op_report("conv1d_silu_bwd_dw_deterministic", sh, zt_dev_bytes_differ(gdw, gdw2, (size_t)(C * K) * 4), TOL_EXACT);
    void *fr[] = {pos, x, w, dy, y, pre, dx, dw, dw0};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gpos, gx, gw, gdy, gy, gpre, gdx, gdw, gdw2};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++)
        if (gf[i]) zt_cuda_free(gf[i]);
}

// ---- l2norm and the gated RMSNorm ---------------------------------------------------------------
static void test_l2norm(int64_t rows, int64_t d) {
    char sh[64];
    snprintf(sh, sizeof sh, "rows%lld_d%lld", (long long)rows, (long long)d);
    const int64_t n = rows * d;
    float *x = zt_host_normal(n, 1.0f, seed(), 1), *dy = zt_host_normal(n, 1.0f, seed(), 1);
    float *y = zt_host_buf(n), *ri = zt_host_buf(rows), *dx = zt_host_buf(n);
    zt_cpu_ops.l2norm_fwd(y, ri, x, rows, d, 1e-6f);
    zt_cpu_ops.l2norm_bwd(dx, dy, x, ri, rows, d);
    zt_bf16 *gx = zt_dev_bf16(x, n), *gdy = zt_dev_bf16(dy, n), *gy = zt_dev_bf16_nan(n), *gdx = zt_dev_bf16_nan(n);
    float *gri = zt_dev_f32_nan(rows);
    zt_cuda_l2norm_fwd(NULL, gy, gri, gx, rows, d, 1e-6f);
    zt_op_report("l2norm_fwd_y", sh, zt_dev_err_bf16(gy, y, n), TOL_BF16);
    zt_op_report("l2norm_fwd_rinv", sh, zt_dev_err_f32(gri, ri, rows), TOL_F32);
    zt_cuda_l2norm_bwd(NULL, gdx, gdy, gx, gri, rows, d);
    zt_op_report("l2norm_bwd_dx", sh, zt_dev_err_bf16(gdx, dx, n), TOL_BF16);
    void *fr[] = {x, dy, y, ri, dx};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gx, gdy, gy, gdx, gri};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

static void test_rmsnorm_gated(zt_cuda_ctx *c, int64_t rows, int64_t d) {
    char sh[64];
    snprintf(sh, sizeof sh, "rows%lld_d%lld", (long long)rows, (long long)d);
    const int64_t n = rows * d;
    const float eps = 1e-6f;
    float *x = zt_host_normal(n, 1.0f, seed(), 1), *z = zt_host_normal(n, 2.0f, seed(), 1);
    float *w = zt_host_uniform(d, 0.5f, 1.5f, seed(), 1), *dy = zt_host_normal(n, 1.0f, seed(), 1);
    float *y = zt_host_buf(n), *rs = zt_host_buf(rows), *dx = zt_host_buf(n), *dz = zt_host_buf(n);
    float *dw0 = zt_host_normal(d, 0.1f, seed(), 0), *dw = zt_host_buf(d);
    memcpy(dw, dw0, (size_t)d * sizeof(float));
    zt_cpu_ops.rmsnorm_gated_fwd(y, rs, x, z, w, rows, d, eps);
    zt_cpu_ops.rmsnorm_gated_bwd(dx, dz, dw, dy, x, z, w, rs, rows, d);
    zt_bf16 *gx = zt_dev_bf16(x, n), *gz = zt_dev_bf16(z, n), *gw = zt_dev_bf16(w, d), *gdy = zt_dev_bf16(dy, n);
    zt_bf16 *gy = zt_dev_bf16_nan(n), *gdx = zt_dev_bf16_nan(n), *gdz = zt_dev_bf16_nan(n);
    float *grs = zt_dev_f32_nan(rows), *gdw = zt_dev_f32(dw0, d);
    zt_cuda_rmsnorm_gated_fwd(NULL, gy, grs, gx, gz, gw, rows, d, eps);
    zt_op_report("rmsnorm_gated_fwd_y", sh, zt_dev_err_bf16(gy, y, n), TOL_BF16);
    zt_op_report("rmsnorm_gated_fwd_rstd", sh, zt_dev_err_f32(grs, rs, rows), TOL_F32);
    zt_cuda_rmsnorm_gated_bwd(c, NULL, gdx, gdz, gdw, gdy, gx, gz, gw, grs, rows, d);
    zt_op_report("rmsnorm_gated_bwd_dx", sh, zt_dev_err_bf16(gdx, dx, n), TOL_BF16);
    zt_op_report("rmsnorm_gated_bwd_dz", sh, zt_dev_err_bf16(gdz, dz, n), TOL_BF16);
    zt_op_report("rmsnorm_gated_bwd_dw", sh, zt_dev_err_f32(gdw, dw, d), TOL_F32_SUM);
    void *fr[] = {x, z, w, dy, y, rs, dx, dz, dw0, dw};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gx, gz, gw, gdy, gy, gdx, gdz, grs, gdw};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// ---- the gated delta rule ------------------------------------------------------------------------
// Many documents for the delta rule's 64-token spans: starts every 17 tokens from 5, and at 63, 64,
// 65, 127, 128, 129 (one-token documents at a span's last and first token), odd blocks also at the
// last token.
static int32_t *doc_positions_many(int64_t B, int64_t S) {
    int32_t *pos = zt_xmalloc((size_t)(B * S) * sizeof(int32_t));
    for (int64_t b = 0; b < B; b++) {
        int32_t p = 0;
        for (int64_t t = 0; t < S; t++) {
            const int start = t == 0 || t % 17 == 5 || t == 63 || t == 64 || t == 65 || t == 127 || t == 128 ||
                              t == 129 || (b % 2 && t == S - 1);
            p = start ? 0 : p + 1;
            pos[b * S + t] = p;
        }
    }
    return pos;
}

// One form's GPU results (device buffers) for the same inputs.
typedef struct {
    zt_bf16 *o, *dq, *dk, *dv;
    float *saved, *dg, *db;
} delta_out;
enum { FORM_DEFAULT, FORM_RECUR };
static void delta_gpu(zt_cuda_ctx *c, delta_out *r, int form, const zt_bf16 *gq, const zt_bf16 *gk,
                      const zt_bf16 *gv, const zt_bf16 *gdo, const float *gg, const float *gb, const int32_t *gpos,
                      int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, int fwd_only) {
    const int64_t N = B * S, nq = N * Hk * Dk, nv = N * Hv * Dv, ng = N * Hv;
    r->o = zt_dev_bf16_nan(nv), r->saved = zt_dev_f32_nan(zt_delta_saved_floats(B, S, Hv, Dk, Dv));
    (form == FORM_RECUR ? zt_cuda_delta_recur_fwd : zt_cuda_delta_fwd)(NULL, r->o, r->saved, gq, gk, gv, gg, gb, gpos,
                                                                        B, S, Hk, Hv, Dk, Dv);
    r->dq = r->dk = r->dv = NULL, r->dg = r->db = NULL;
    if (fwd_only) return;
    r->dq = zt_dev_bf16_nan(nq), r->dk = zt_dev_bf16_nan(nq), r->dv = zt_dev_bf16_nan(nv), r->dg = zt_dev_f32_nan(ng), r->db = zt_dev_f32_nan(ng);
    (form == FORM_RECUR ? zt_cuda_delta_recur_bwd : zt_cuda_delta_bwd)(c, NULL, r->dq, r->dk, r->dv, r->dg, r->db, gdo,
                                                                        r->saved, gq, gk, gv, gg, gb, gpos, B, S, Hk,
                                                                        Hv, Dk, Dv);
}
static void delta_out_free(delta_out *r) {
    void *p[] = {r->o, r->dq, r->dk, r->dv, r->saved, r->dg, r->db};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) zt_cuda_free(p[i]);
}
// the same bytes in two device buffers
static int same_bytes(const void *a, const void *b, size_t n) { return !zt_dev_bytes_differ(a, b, n); }

// Largest errors per output, printed at the end: [0] the chunked form (the default) vs the CPU,
// [1] the GPU recurrence vs the CPU, [2] chunked vs the GPU recurrence.
static double g_delta_max[3][7];
static void note(int set, int i, double e) { g_delta_max[set][i] = fmax(g_delta_max[set][i], e); }
static int g_chunk_only;  // --chunk: the chunked form against the CPU only (mutate.py's DF, DB rows)

// docs: 0 none, 1 doc_positions, 2 doc_positions_many; + DELTA_HARD: nearly parallel keys (each
// key head's keys one direction plus 10% noise), beta in [0.9, 1), g in [-0.05, 0): A's entries near
// 1, the hardest case for the chunked form's fp32 inverse.
#define DELTA_HARD 4
static void test_delta(zt_cuda_ctx *c, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, int mode) {
    const int docs = mode & 3, hard = mode & DELTA_HARD;
    char sh[80];
    snprintf(sh, sizeof sh, "B%lld_S%lld_Hk%lld_Hv%lld_Dk%lld_Dv%lld%s%s", (long long)B, (long long)S, (long long)Hk,
             (long long)Hv, (long long)Dk, (long long)Dv, docs == 2 ? "_manydocs" : docs ? "_docs" : "",
             hard ? "_hard" : "");
    const int64_t N = B * S, nq = N * Hk * Dk, nv = N * Hv * Dv, ng = N * Hv;
    int32_t *pos = docs == 2 ? doc_positions_many(B, S) : docs ? doc_positions(B, S) : NULL;
    int32_t *gpos = docs ? zt_dev_i32(pos, N) : NULL;
    // q, k: l2-normalised rows (as the model feeds them), rounded to bf16
    float *q = zt_host_normal(nq, 1.0f, seed(), 0), *k = zt_host_normal(nq, hard ? 0.1f : 1.0f, seed(), 0), *ri = zt_host_buf(N * Hk);
    if (hard) {
        float *dir = zt_host_normal(Hk * Dk, 1.0f, seed(), 0);
        for (int64_t i = 0; i < nq; i++) k[i] += dir[i % (Hk * Dk)];
        free(dir);
    }
    zt_cpu_ops.l2norm_fwd(q, ri, q, N * Hk, Dk, 1e-6f);
    zt_cpu_ops.l2norm_fwd(k, ri, k, N * Hk, Dk, 1e-6f);
    zt_round_bf16(q, nq), zt_round_bf16(k, nq);
    float *v = zt_host_normal(nv, 1.0f, seed(), 1);
    float *g = hard ? zt_host_uniform(ng, -0.05f, -0.001f, seed(), 0) : zt_host_uniform(ng, -1.5f, -0.01f, seed(), 0);
    float *beta = hard ? zt_host_uniform(ng, 0.9f, 0.999f, seed(), 0) : zt_host_uniform(ng, 0.05f, 0.95f, seed(), 0);
    float *dout = zt_host_normal(nv, 1.0f, seed(), 1);
    const int64_t ns = zt_delta_saved_floats(B, S, Hv, Dk, Dv);
    float *o = zt_host_buf(nv), *saved = zt_host_buf(ns), *dq = zt_host_buf(nq), *dk = zt_host_buf(nq), *dv = zt_host_buf(nv), *dg = zt_host_buf(ng),
          *db = zt_host_buf(ng);
    zt_cpu_ops.delta_fwd(o, saved, q, k, v, g, beta, pos, B, S, Hk, Hv, Dk, Dv);
    zt_cpu_ops.delta_bwd(dq, dk, dv, dg, db, dout, saved, q, k, v, g, beta, pos, B, S, Hk, Hv, Dk, Dv);
    zt_bf16 *gq = zt_dev_bf16(q, nq), *gk = zt_dev_bf16(k, nq), *gv = zt_dev_bf16(v, nv), *gdo = zt_dev_bf16(dout, nv);
    float *gg = zt_dev_f32(g, ng), *gb = zt_dev_f32(beta, ng);
    zt_op_report("delta_saved_floats_as_cpu", sh, zt_cuda_delta_saved_floats(B, S, Hv, Dk, Dv) == ns ? 0.0 : 1.0, TOL_EXACT);
    // the default (chunked) form and the recurrence, each against the CPU reference
    delta_out run[2];
    const char *pre[2] = {"delta", "delta_recur"};
    run[FORM_RECUR].o = NULL;
    for (int f = 0; f < (g_chunk_only ? 1 : 2); f++) {
        delta_out *r = &run[f];
        char op[64];
        delta_gpu(c, r, f, gq, gk, gv, gdo, gg, gb, gpos, B, S, Hk, Hv, Dk, Dv, 0);
        double e;
#define CHECK(name, i, err, tol) \
    (snprintf(op, sizeof op, "%s_%s", pre[f], name), zt_op_report(op, sh, e = (err), tol), note(f, i, e))
        CHECK("fwd_o", 0, zt_dev_err_bf16(r->o, o, nv), TOL_BF16);
        CHECK("fwd_saved", 1, zt_dev_err_f32(r->saved, saved, ns), TOL_DELTA_F32);
        CHECK("bwd_dq", 2, zt_dev_err_bf16(r->dq, dq, nq), TOL_BF16);
        CHECK("bwd_dk", 3, zt_dev_err_bf16(r->dk, dk, nq), TOL_BF16);
        CHECK("bwd_dv", 4, zt_dev_err_bf16(r->dv, dv, nv), TOL_BF16);
        CHECK("bwd_dg", 5, zt_dev_err_f32(r->dg, dg, ng), TOL_DELTA_F32);
        CHECK("bwd_dbeta", 6, zt_dev_err_f32(r->db, db, ng), TOL_DELTA_F32);
#undef CHECK
        delta_out r2;  // a second backward from the same saved states: bit-identical
        r2.o = NULL, r2.saved = NULL;
        r2.dq = zt_dev_bf16_nan(nq), r2.dk = zt_dev_bf16_nan(nq), r2.dv = zt_dev_bf16_nan(nv), r2.dg = zt_dev_f32_nan(ng), r2.db = zt_dev_f32_nan(ng);
        (f == FORM_RECUR ? zt_cuda_delta_recur_bwd : zt_cuda_delta_bwd)(c, NULL, r2.dq, r2.dk, r2.dv, r2.dg, r2.db, gdo,
                                                                         r->saved, gq, gk, gv, gg, gb, gpos, B, S, Hk,
                                                                         Hv, Dk, Dv);
        const int same = same_bytes(r->dq, r2.dq, (size_t)nq * 2) && same_bytes(r->dk, r2.dk, (size_t)nq * 2) &&
                         same_bytes(r->dv, r2.dv, (size_t)nv * 2) && same_bytes(r->dg, r2.dg, (size_t)ng * 4) &&
                         same_bytes(r->db, r2.db, (size_t)ng * 4);
        snprintf(op, sizeof op, "%s_bwd_deterministic", pre[f]);
        zt_op_report(op, sh, same ? 0.0 : 1.0, TOL_EXACT);
        delta_out_free(&r2);
    }
    // chunked vs the GPU recurrence (the recurrence's results as the reference)
    if (!g_chunk_only) {
        const delta_out *a = &run[FORM_DEFAULT], *r = &run[FORM_RECUR];
        float *ho = zt_host_buf(nv), *hs = zt_host_buf(ns), *hq = zt_host_buf(nq), *hk = zt_host_buf(nq), *hv = zt_host_buf(nv), *hg = zt_host_buf(ng), *hb = zt_host_buf(ng);
        zt_dev_get_bf16(ho, r->o, nv), zt_dev_get_f32(hs, r->saved, ns), zt_dev_get_bf16(hq, r->dq, nq);
        zt_dev_get_bf16(hk, r->dk, nq), zt_dev_get_bf16(hv, r->dv, nv), zt_dev_get_f32(hg, r->dg, ng);
        zt_dev_get_f32(hb, r->db, ng);
        double e;
        zt_op_report("delta_chunk_vs_recur_o", sh, e = zt_dev_err_bf16(a->o, ho, nv), TOL_BF16), note(2, 0, e);
        zt_op_report("delta_chunk_vs_recur_saved", sh, e = zt_dev_err_f32(a->saved, hs, ns), TOL_DELTA_F32), note(2, 1, e);
        zt_op_report("delta_chunk_vs_recur_dq", sh, e = zt_dev_err_bf16(a->dq, hq, nq), TOL_BF16), note(2, 2, e);
        zt_op_report("delta_chunk_vs_recur_dk", sh, e = zt_dev_err_bf16(a->dk, hk, nq), TOL_BF16), note(2, 3, e);
        zt_op_report("delta_chunk_vs_recur_dv", sh, e = zt_dev_err_bf16(a->dv, hv, nv), TOL_BF16), note(2, 4, e);
        zt_op_report("delta_chunk_vs_recur_dg", sh, e = zt_dev_err_f32(a->dg, hg, ng), TOL_DELTA_F32), note(2, 5, e);
        zt_op_report("delta_chunk_vs_recur_dbeta", sh, e = zt_dev_err_f32(a->db, hb, ng), TOL_DELTA_F32), note(2, 6, e);
        void *fr[] = {ho, hs, hq, hk, hv, hg, hb};
        for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    }
    // ZT_CUDA_DELTA_RECUR=1 makes zt_cuda_delta_fwd the recurrence: bit-identical to it by name
    if (!g_chunk_only) {
        delta_out e1;
        setenv("ZT_CUDA_DELTA_RECUR", "1", 1);
        delta_gpu(c, &e1, FORM_DEFAULT, gq, gk, gv, gdo, gg, gb, gpos, B, S, Hk, Hv, Dk, Dv, 1);
        unsetenv("ZT_CUDA_DELTA_RECUR");
        zt_op_report("delta_env_recur_is_recurrence", sh,
               same_bytes(e1.o, run[FORM_RECUR].o, (size_t)nv * 2) && same_bytes(e1.saved, run[FORM_RECUR].saved, (size_t)ns * 4)
                   ? 0.0
                   : 1.0,
               TOL_EXACT);
        delta_out_free(&e1);
    }
    delta_out_free(&run[0]);
    if (!g_chunk_only) delta_out_free(&run[1]);
    void *fr[] = {pos, q, k, ri, v, g, beta, dout, o, saved, dq, dk, dv, dg, db};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gpos, gq, gk, gv, gdo, gg, gb};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++)
        if (gf[i]) zt_cuda_free(gf[i]);
}

// The chunked kernels' memory at the 27B's linear layers (B 1, S 8,192, Hv 48, Dk = Dv 128): the
// numbers docs/design.md states, and shared memory within an H100's 227 KiB per block.
static void test_delta_memory(void) {
    const char *sh = "B1_S8192_Hv48_Dk128_Dv128";
    zt_op_report("delta_chunk_scratch_bytes_27b", sh,
           zt_cuda_delta_chunk_scratch_bytes(1, 8192, 48, 128, 128) == 1623195648ull ? 0.0 : 1.0, TOL_EXACT);
    zt_op_report("delta_recur_scratch_bytes_27b", sh,
           zt_cuda_delta_recur_scratch_bytes(1, 8192, 48, 128, 128) == 607125504ull ? 0.0 : 1.0, TOL_EXACT);
    zt_op_report("delta_scratch_bytes_is_max", sh,
           zt_cuda_delta_scratch_bytes(1, 8192, 48, 128, 128) == 1623195648ull &&
                   zt_cuda_delta_scratch_bytes(2, 40, 3, 8, 12) == zt_cuda_delta_recur_scratch_bytes(2, 40, 3, 8, 12)
               ? 0.0
               : 1.0,
           TOL_EXACT);
    zt_op_report("delta_saved_floats_27b", sh, zt_cuda_delta_saved_floats(1, 8192, 48, 128, 128) == 100663296ll ? 0.0 : 1.0,
           TOL_EXACT);
    const size_t f = zt_cuda_delta_chunk_smem_bytes(128, 0), b = zt_cuda_delta_chunk_smem_bytes(128, 1);
    printf("delta chunk shared memory per block at Dk 128: forward %zu B, backward %zu B\n", f, b);
    zt_op_report("delta_chunk_smem_fwd_dk128", "Dk128", f == 152064 && f <= 227 * 1024 ? 0.0 : 1.0, TOL_EXACT);
    zt_op_report("delta_chunk_smem_bwd_dk128", "Dk128", b == 212736 && b <= 227 * 1024 ? 0.0 : 1.0, TOL_EXACT);
}

// ---- element-wise pieces (model/qwen3_5.c's formulas) --------------------------------------------
static float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplusf_(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
static float dsoftplusf_(float x) {
    if (x > 20.0f) return 1.0f;
    const float e = expf(x);
    return e / (e + 1.0f);
}

static void test_sigmoid_gate(int64_t n) {
    char sh[32];
    snprintf(sh, sizeof sh, "n%lld", (long long)n);
    float *att = zt_host_normal(n, 1.0f, seed(), 1), *gate = zt_host_normal(n, 3.0f, seed(), 1);
    float *dy = zt_host_normal(n, 1.0f, seed(), 1), *y = zt_host_buf(n), *da = zt_host_buf(n), *dgt = zt_host_buf(n);
    for (int64_t i = 0; i < n; i++) {
        const float s = sigmoidf_(gate[i]);
        y[i] = att[i] * s;
        da[i] = dy[i] * s;
        dgt[i] = dy[i] * att[i] * s * (1.0f - s);
    }
    zt_bf16 *ga = zt_dev_bf16(att, n), *gg = zt_dev_bf16(gate, n), *gdy = zt_dev_bf16(dy, n);
    zt_bf16 *gy = zt_dev_bf16_nan(n), *gda = zt_dev_bf16_nan(n), *gdg = zt_dev_bf16_nan(n);
    zt_cuda_sigmoid_gate_fwd(NULL, gy, ga, gg, n);
    zt_cuda_sigmoid_gate_bwd(NULL, gda, gdg, gdy, ga, gg, n);
    zt_op_report("sigmoid_gate_fwd", sh, zt_dev_err_bf16(gy, y, n), TOL_BF16);
    zt_op_report("sigmoid_gate_bwd_datt", sh, zt_dev_err_bf16(gda, da, n), TOL_BF16);
    zt_op_report("sigmoid_gate_bwd_dgate", sh, zt_dev_err_bf16(gdg, dgt, n), TOL_BF16);
    void *fr[] = {att, gate, dy, y, da, dgt};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {ga, gg, gdy, gy, gda, gdg};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// beta, g and their backward; a + dt_bias crosses softplus's threshold 20 on some tokens.
static void test_delta_gates(int64_t N, int64_t Hv) {
    char sh[32];
    snprintf(sh, sizeof sh, "N%lld_Hv%lld", (long long)N, (long long)Hv);
    const int64_t n = N * Hv;
    float *b = zt_host_normal(n, 2.0f, seed(), 0), *a = zt_host_normal(n, 3.0f, seed(), 0);
    for (int64_t i = 0; i < n; i += 7) a[i] = 19.0f + (float)(i % 3);  // 19, 20, 21 + dt: both sides
    float *A_log = zt_host_uniform(Hv, -4.0f, 2.7f, seed(), 1), *dt = zt_host_uniform(Hv, -1.0f, 1.5f, seed(), 1);
    float *dg = zt_host_normal(n, 1.0f, seed(), 0), *dbeta = zt_host_normal(n, 1.0f, seed(), 0);
    float *beta = zt_host_buf(n), *g = zt_host_buf(n), *da = zt_host_buf(n), *db = zt_host_buf(n);
    float *dA0 = zt_host_normal(Hv, 0.1f, seed(), 0), *ddt0 = zt_host_normal(Hv, 0.1f, seed(), 0);
    double *dA = zt_xcalloc((size_t)Hv, sizeof(double)), *ddt = zt_xcalloc((size_t)Hv, sizeof(double));
    for (int64_t t = 0; t < N; t++)
        for (int64_t h = 0; h < Hv; h++) {
            const int64_t i = t * Hv + h;
            beta[i] = sigmoidf_(b[i]);
            g[i] = -expf(A_log[h]) * softplusf_(a[i] + dt[h]);
            da[i] = dg[i] * -expf(A_log[h]) * dsoftplusf_(a[i] + dt[h]);
            db[i] = dbeta[i] * beta[i] * (1.0f - beta[i]);
            dA[h] += (double)dg[i] * g[i];
            ddt[h] += da[i];
        }
    float *dAf = zt_host_buf(Hv), *ddtf = zt_host_buf(Hv);
    for (int64_t h = 0; h < Hv; h++) dAf[h] = (float)(dA0[h] + dA[h]), ddtf[h] = (float)(ddt0[h] + ddt[h]);
    float *gbv = zt_dev_f32(b, n), *gav = zt_dev_f32(a, n), *gbeta = zt_dev_f32_nan(n), *gg = zt_dev_f32_nan(n);
    zt_bf16 *gA = zt_dev_bf16(A_log, Hv), *gdt = zt_dev_bf16(dt, Hv), *gda = zt_dev_bf16_nan(n), *gdb = zt_dev_bf16_nan(n);
    zt_cuda_delta_gates_fwd(NULL, gbeta, gg, gbv, gav, gA, gdt, N, Hv);
    zt_op_report("delta_gates_beta", sh, zt_dev_err_f32(gbeta, beta, n), TOL_F32);
    zt_op_report("delta_gates_g", sh, zt_dev_err_f32(gg, g, n), TOL_F32);
    float *gdg = zt_dev_f32(dg, n), *gdbeta = zt_dev_f32(dbeta, n), *gdA = zt_dev_f32(dA0, Hv), *gddt = zt_dev_f32(ddt0, Hv);
    float *gbeta_ref = zt_dev_f32(beta, n), *gg_ref = zt_dev_f32(g, n);
    zt_cuda_delta_gates_bwd(NULL, gdb, gda, gdA, gddt, gdg, gdbeta, gav, gbeta_ref, gg_ref, gA, gdt, N, Hv);
    zt_op_report("delta_gates_bwd_da", sh, zt_dev_err_bf16(gda, da, n), TOL_BF16);
    zt_op_report("delta_gates_bwd_db", sh, zt_dev_err_bf16(gdb, db, n), TOL_BF16);
    zt_op_report("delta_gates_bwd_dA_log", sh, zt_dev_err_f32(gdA, dAf, Hv), TOL_F32_SUM);
    zt_op_report("delta_gates_bwd_ddt_bias", sh, zt_dev_err_f32(gddt, ddtf, Hv), TOL_F32_SUM);
    void *fr[] = {b, a, A_log, dt, dg, dbeta, beta, g, da, db, dA0, ddt0, dA, ddt, dAf, ddtf};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gbv, gav, gbeta, gg, gA, gdt, gda, gdb, gdg, gdbeta, gdA, gddt, gbeta_ref, gg_ref};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// Partial RoPE: the CPU op on the first rd of each head (as model/qwen3_5.c's rope_partial), the
// rest of each head unchanged, bit for bit.
static void test_rope_partial(int64_t B, int64_t S, int64_t nh, int64_t D, int64_t rd, int docs) {
    char sh[64];
    snprintf(sh, sizeof sh, "B%lld_S%lld_h%lld_D%lld_rd%lld%s", (long long)B, (long long)S, (long long)nh,
             (long long)D, (long long)rd, docs ? "_docs" : "");
    const int64_t N = B * S, n = N * nh * D;
    int32_t *pos = docs ? doc_positions(B, S) : NULL, *gpos = docs ? zt_dev_i32(pos, N) : NULL;
    float *cs = zt_host_buf(S * rd / 2), *sn = zt_host_buf(S * rd / 2);
    zt_rope_table(cs, sn, S, rd, 1e7);
    float *gcs = zt_dev_f32(cs, S * rd / 2), *gsn = zt_dev_f32(sn, S * rd / 2);
    for (int bwd = 0; bwd < 2; bwd++) {
        float *x = zt_host_normal(n, 1.0f, seed(), 1), *rot = zt_host_buf(N * nh * rd), *ref = zt_host_buf(n);
        memcpy(ref, x, (size_t)n * sizeof(float));
        for (int64_t i = 0; i < N * nh; i++) memcpy(rot + i * rd, x + i * D, (size_t)rd * sizeof(float));
        (bwd ? zt_cpu_ops.rope_bwd : zt_cpu_ops.rope_fwd)(rot, cs, sn, pos, B, S, nh, rd);
        for (int64_t i = 0; i < N * nh; i++) memcpy(ref + i * D, rot + i * rd, (size_t)rd * sizeof(float));
        zt_bf16 *gx = zt_dev_bf16(x, n);
        (bwd ? zt_cuda_rope_partial_bwd : zt_cuda_rope_partial_fwd)(NULL, gx, gcs, gsn, gpos, B, S, nh, D, rd);
        float *got = zt_host_buf(n);
        zt_dev_get_bf16(got, gx, n);
        double same = 0;  // the unrotated tail of every head: untouched
        for (int64_t i = 0; i < N * nh; i++)
            for (int64_t j = rd; j < D; j++) same += got[i * D + j] != x[i * D + j];
        zt_op_report(bwd ? "rope_partial_bwd" : "rope_partial_fwd", sh, zt_relerr(got, ref, n), TOL_BF16);
        zt_op_report(bwd ? "rope_partial_bwd_tail_unchanged" : "rope_partial_fwd_tail_unchanged", sh, same, TOL_EXACT);
        free(x), free(rot), free(ref), free(got);
        zt_cuda_free(gx);
    }
    free(pos), free(cs), free(sn);
    zt_cuda_free(gcs), zt_cuda_free(gsn);
    if (gpos) zt_cuda_free(gpos);
}

static void test_small_copies(void) {
    const int64_t rows = 37, cols = 12, lds = 40, ldd = 24, n = 100;
    float *src = zt_host_normal(rows * lds, 1.0f, seed(), 1), *w = zt_host_normal(n, 0.05f, seed(), 1);
    float *ref = zt_host_buf(rows * ldd), *one = zt_host_buf(n), *got = zt_host_buf(rows * ldd);
    for (int64_t i = 0; i < n; i++) one[i] = zt_bf16_round(1.0f + w[i]);
    zt_bf16 *gs = zt_dev_bf16(src, rows * lds), *gd = zt_dev_bf16(ref, rows * ldd), *gw = zt_dev_bf16(w, n);
    zt_bf16 *g1 = zt_dev_bf16_nan(n);
    zt_cuda_copy_cols(NULL, gd + 5, ldd, gs + 3, lds, rows, cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) ref[r * ldd + 5 + c] = src[r * lds + 3 + c];
    zt_dev_get_bf16(got, gd, rows * ldd);
    double diff = 0;
    for (int64_t i = 0; i < rows * ldd; i++) diff += got[i] != ref[i];
    zt_op_report("copy_cols", "rows37_cols12", diff, TOL_EXACT);
    zt_cuda_one_plus(NULL, g1, gw, n);
    zt_op_report("one_plus", "n100", zt_dev_err_bf16(g1, one, n), TOL_EXACT);
    free(src), free(w), free(ref), free(one), free(got);
    zt_cuda_free(gs), zt_cuda_free(gd), zt_cuda_free(gw), zt_cuda_free(g1);
}

int main(int argc, char **argv) {
    zt_skip_without_device();
    int quick = 0;
    for (int i = 1; i < argc; i++) quick |= !strcmp(argv[i], "--quick"), g_chunk_only |= !strcmp(argv[i], "--chunk");
    zt_cuda_ctx *c = zt_cuda_ctx_create();
    const double t0 = zt_now();
    if (!g_chunk_only) {
        test_conv1d(c, 2, 70, 40, 4, 0);
        test_conv1d(c, 3, 70, 40, 4, 1);
        test_conv1d(c, 2, 150, 33, 3, 1);
        test_l2norm(300, 8);
        test_l2norm(77, 128);
        test_rmsnorm_gated(c, 300, 12);
        test_rmsnorm_gated(c, 150, 128);
    }
    // the delta rule: Hv = 3 Hk, S not a multiple of 64 (and one below it), Dv not a whole warp
    test_delta_memory();
    test_delta(c, 2, 150, 2, 6, 16, 24, 0);
    test_delta(c, 3, 150, 2, 6, 16, 24, 1);
    test_delta(c, 2, 40, 1, 3, 8, 12, 1);
    test_delta(c, 2, 140, 2, 4, 16, 40, 2);  // Hv = 2 Hk, two column blocks (32 + 8), many documents
    test_delta(c, 1, 130, 1, 3, 128, 128, 1);  // the 27B's head dims (Dk = Dv = 128)
    test_delta(c, 1, 1, 1, 1, 8, 8, 0);        // one token; Hv = Hk
    test_delta(c, 2, 128, 1, 2, 32, 32, DELTA_HARD);  // two whole spans, nearly parallel keys, slow decay
    if (!quick) test_delta(c, 1, 200, 2, 4, 64, 96, 0);
    if (!g_chunk_only) {
        test_sigmoid_gate(1000);
        test_delta_gates(300, 6);
        test_delta_gates(77, 48);
        test_rope_partial(2, 40, 4, 16, 4, 0);
        test_rope_partial(3, 70, 3, 32, 8, 1);
        test_small_copies();
    }
    zt_cuda_sync(NULL, "test_cuda_ops_qwen3_5");
    zt_cuda_ctx_destroy(c);
    const char *names[] = {"o", "saved", "dq", "dk", "dv", "dg", "dbeta"};
    const char *sets[] = {"chunked (default) vs CPU", "recurrence vs CPU", "chunked vs GPU recurrence"};
    for (int s = 0; s < (g_chunk_only ? 1 : 3); s++) {
        printf("delta rule, %s, largest errors over the shapes:", sets[s]);
        for (int i = 0; i < 7; i++) printf(" %s %.2e", names[i], g_delta_max[s][i]);
        printf("\n");
    }
    printf("%d passed, %d failed; %.1f s\n", zt_op_checks() - zt_op_failures(), zt_op_failures(), zt_now() - t0);
    return zt_op_failures() || !zt_op_checks() ? 1 : 0;  // a run that checked nothing fails
}
