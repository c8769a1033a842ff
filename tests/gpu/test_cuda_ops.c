// CPU-vs-GPU op test: every zt_cuda op against the CPU reference table
// (zt_cpu_ops, fp32) on the same bf16-rounded random inputs. Outputs are
// poisoned with NaN before each GPU call, so an unwritten element fails.
// The error is the max-norm relative error max|gpu - cpu| / max|cpu|; each op
// states its tolerance and why (docs/cuda.md has the table). Prints one
// "RESULT op=... err=... tol=... ok=..." line per check (tests/gpu/run.sh reads
// them) and a table at the end. No CUDA device: prints "SKIPPED: no CUDA device"
// and exits 77. The optional cuDNN SDPA attention (kernels/cuda/zt_cudnn_attention.h)
// is checked when it is built and the GPU supports it; otherwise one
// "RESULT op=cudnn_attention shape=- SKIPPED (<why>)" line says so.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bf16.h"
#include "kernels/cuda/zt_cuda.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "kernels/ops.h"
#include "model/rope.h"
#include "base/common.h"
#include "tests/gpu/gpu_test_util.h"
#include "data/batch.h"

// Tolerances (max-norm relative):
#define TOL_BF16 1e-2     // bf16 output: one rounding (2^-9 relative) plus fp32 accumulation order
#define TOL_BF16_ATT 2e-2 // attention backward: P and dS rounded to bf16 before the products
#define TOL_F32_GEMM 1e-4 // fp32 output of bf16 products: only the accumulation order differs
#define TOL_F32 1e-5      // fp32 element-wise arithmetic (FMA contraction on the GPU)
#define TOL_ROPE_TAB 1e-6 // cos/sin of the same fp32 angle: at most an ulp or two
#define TOL_EXACT 0.0     // copies and same-order sums
// cuDNN lse vs the GEMM path's lse (both fp32 logsumexp of the same fp32 scores): only
// the accumulation order and cuDNN's exp2/log approximations differ (~1e-6); a wrong
// mask, scale or layout moves lse by 1e-1 or more.
#define TOL_CUDNN_LSE 1e-3

typedef struct {
    char op[48];
    char shape[64];
    double err, tol;
    int ok;
} result;
static result g_res[512];  // the summary table (past 511 results the last row is reused; failures still count)
static int g_nres, g_nfail, g_nskip;

static void report(const char *op, const char *shape, double err, double tol) {
    result *r = &g_res[g_nres < 511 ? g_nres++ : 511];
    snprintf(r->op, sizeof r->op, "%s", op);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    r->err = err;
    r->tol = tol;
    r->ok = err <= tol;  // NaN/inf never pass
    if (!r->ok) g_nfail++;
    printf("RESULT op=%s shape=%s err=%.3e tol=%.1e ok=%d\n", op, shape, err, tol, r->ok);
    fflush(stdout);
}

static uint64_t g_seed = 20251201;
static uint64_t seed(void) { return g_seed++; }

// ---- matmul ----------------------------------------------------------------------------------------
static void test_matmul(zt_cuda_ctx *c, int64_t M, int64_t K, int64_t N) {
    char sh[64];
    snprintf(sh, sizeof sh, "M%lld_K%lld_N%lld", (long long)M, (long long)K, (long long)N);
    float *x = zt_host_normal(M * K, 1.0f, seed(), 1), *w = zt_host_normal(N * K, 0.05f, seed(), 1);
    float *dy = zt_host_normal(M * N, 1.0f, seed(), 1);
    zt_bf16 *gx = zt_dev_bf16(x, M * K), *gw = zt_dev_bf16(w, N * K), *gdy = zt_dev_bf16(dy, M * N);

    float *y = zt_host_buf(M * N);
    zt_cpu_ops.matmul_fwd(y, x, w, M, K, N);
    zt_bf16 *gy = zt_dev_bf16_nan(M * N);
    zt_cuda_matmul_fwd(c, NULL, gy, ZT_BF16, gx, gw, M, K, N);
    report("matmul_fwd_bf16out", sh, zt_dev_err_bf16(gy, y, M * N), TOL_BF16);
    float *gy32 = zt_dev_f32_nan(M * N);
    zt_cuda_matmul_fwd(c, NULL, gy32, ZT_F32, gx, gw, M, K, N);
    report("matmul_fwd_f32out", sh, zt_dev_err_f32(gy32, y, M * N), TOL_F32_GEMM);

    // The plan cache: the same shape again must hit, not build.
    int64_t plans0, hits0, plans1, hits1;
    zt_cuda_ctx_plan_stats(c, &plans0, &hits0, NULL);
    zt_cuda_matmul_fwd(c, NULL, gy32, ZT_F32, gx, gw, M, K, N);
    zt_cuda_ctx_plan_stats(c, &plans1, &hits1, NULL);
    report("matmul_plan_cache_hit", sh, (plans1 == plans0 && hits1 == hits0 + 1) ? 0.0 : 1.0, TOL_EXACT);

    // dx assigned; dW (fp32) accumulated onto a random start.
    float *dx = zt_host_buf(M * K), *dw0 = zt_host_normal(N * K, 0.1f, seed(), 0), *dw = zt_host_copy(dw0, N * K);
    zt_cpu_ops.matmul_bwd(dx, dw, dy, x, w, M, K, N, 0);
    zt_bf16 *gdx = zt_dev_bf16_nan(M * K);
    float *gdw = zt_dev_f32(dw0, N * K);
    zt_cuda_matmul_bwd(c, NULL, gdx, gdw, ZT_F32, gdy, gx, gw, M, K, N, 0);
    report("matmul_bwd_dx", sh, zt_dev_err_bf16(gdx, dx, M * K), TOL_BF16);
    report("matmul_bwd_dw_f32acc", sh, zt_dev_err_f32(gdw, dw, N * K), TOL_F32_GEMM);

    // accumulate_dx = 1 onto a bf16 start, dW in bf16.
    float *dx0 = zt_host_normal(M * K, 1.0f, seed(), 1), *dxa = zt_host_copy(dx0, M * K);
    float *dwb0 = zt_host_normal(N * K, 0.1f, seed(), 1), *dwb = zt_host_copy(dwb0, N * K);
    zt_cpu_ops.matmul_bwd(dxa, dwb, dy, x, w, M, K, N, 1);
    zt_bf16 *gdxa = zt_dev_bf16(dx0, M * K), *gdwb = zt_dev_bf16(dwb0, N * K);
    zt_cuda_matmul_bwd(c, NULL, gdxa, gdwb, ZT_BF16, gdy, gx, gw, M, K, N, 1);
    report("matmul_bwd_dx_accumulate", sh, zt_dev_err_bf16(gdxa, dxa, M * K), TOL_BF16);
    report("matmul_bwd_dw_bf16acc", sh, zt_dev_err_bf16(gdwb, dwb, N * K), TOL_BF16);

    void *fr[] = {x, w, dy, y, dx, dw0, dw, dx0, dxa, dwb0, dwb};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gx, gw, gdy, gy, gy32, gdx, gdw, gdxa, gdwb};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// ---- RMSNorm ----------------------------------------------------------------------------------------
static void test_rmsnorm(zt_cuda_ctx *c, int64_t rows, int64_t d) {
    char sh[64];
    snprintf(sh, sizeof sh, "rows%lld_d%lld", (long long)rows, (long long)d);
    const int64_t n = rows * d;
    const float eps = 1e-6f;
    float *x = zt_host_normal(n, 1.0f, seed(), 1), *w = zt_host_uniform(d, 0.5f, 1.5f, seed(), 1);
    float *y = zt_host_buf(n), *rstd = zt_host_buf(rows);
    zt_cpu_ops.rmsnorm_fwd(y, rstd, x, w, rows, d, eps);
    zt_bf16 *gx = zt_dev_bf16(x, n), *gw = zt_dev_bf16(w, d), *gy = zt_dev_bf16_nan(n);
    float *grstd = zt_dev_f32_nan(rows);
    zt_cuda_rmsnorm_fwd(NULL, gy, grstd, gx, gw, rows, d, eps);
    report("rmsnorm_fwd_y", sh, zt_dev_err_bf16(gy, y, n), TOL_BF16);
    report("rmsnorm_fwd_rstd", sh, zt_dev_err_f32(grstd, rstd, rows), TOL_F32);

    float *dy = zt_host_normal(n, 1.0f, seed(), 1), *dx = zt_host_buf(n);
    float *dw0 = zt_host_normal(d, 0.1f, seed(), 0), *dw = zt_host_copy(dw0, d);
    zt_cpu_ops.rmsnorm_bwd(dx, dw, dy, x, w, rstd, rows, d);
    zt_bf16 *gdy = zt_dev_bf16(dy, n), *gdx = zt_dev_bf16_nan(n);
    float *grs = zt_dev_f32(rstd, rows), *gdw = zt_dev_f32(dw0, d), *gdw2 = zt_dev_f32(dw0, d);
    zt_cuda_rmsnorm_bwd(c, NULL, gdx, gdw, gdy, gx, gw, grs, rows, d);
    report("rmsnorm_bwd_dx", sh, zt_dev_err_bf16(gdx, dx, n), TOL_BF16);
    // dw sums rows*|dy x rstd| terms in fp32 in a different order than the CPU.
    report("rmsnorm_bwd_dw", sh, zt_dev_err_f32(gdw, dw, d), 1e-4);
    zt_cuda_rmsnorm_bwd(c, NULL, NULL, gdw2, gdy, gx, gw, grs, rows, d);
    report("rmsnorm_bwd_dw_deterministic", sh, zt_dev_bytes_differ(gdw, gdw2, (size_t)d * 4), TOL_EXACT);

    void *fr[] = {x, w, y, rstd, dy, dx, dw0, dw};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gx, gw, gy, grstd, gdy, gdx, grs, gdw, gdw2};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// ---- packed documents --------------------------------------------------------------------------------
// Document positions of B blocks of S tokens (what zt_batch_words makes of DOC_START words
// with isolation): every block starts a document; block b adds one starting mid-block at
// q = S/4 + b % 3 that is a single token (the next starts at q + 1), one at S/2 + 3 that
// runs across the 32-key warp boundary when S > 35, a single token at the block's end, and
// on odd blocks a single token at the block's start.
static int32_t *doc_positions(int64_t B, int64_t S) {
    int32_t *pos = zt_xmalloc((size_t)(B * S) * sizeof(int32_t));
    for (int64_t b = 0; b < B; b++) {
        const int64_t q = S / 4 + b % 3, h = S / 2 + 3;
        int32_t p = 0;
        for (int64_t t = 0; t < S; t++) {
            const int start = t == 0 || t == q || t == q + 1 || t == h || t == S - 1 || (b % 2 && t == 1);
            p = start ? 0 : p + 1;
            pos[b * S + t] = p;
        }
    }
    return pos;
}
// A check that must not pass by accident: pass when the document-masked result differs
// from the plain causal one by at least `min` (relative), i.e. the positions were used.
static void report_differs(const char *op, const char *sh, double diff, double min) {
    printf("%s %s: document-masked vs plain causal differ by %.3e (need >= %.1e)\n", op, sh, diff, min);
    report(op, sh, diff >= min ? 0.0 : 1.0, TOL_EXACT);
}

// ---- RoPE ------------------------------------------------------------------------------------------
// YaRN tables (issue 37): the device's table of a YaRN config against the CPU's, which
// tests/unit/test_config.c holds to transformers; and apart from the plain table by >= 0.1,
// so that a kernel ignoring the scaling fails.
static void test_rope_yarn(int64_t S, int64_t D, double theta, double factor, int64_t orig, int no_truncate) {
    char sh[96];
    snprintf(sh, sizeof sh, "S%lld_D%lld_yarn%g_orig%lld%s", (long long)S, (long long)D, factor, (long long)orig,
             no_truncate ? "_notrunc" : "");
    zt_model_config c = {.head_dim = (int)D, .rope_theta = theta, .rope_yarn = 1, .rope_factor = factor,
                         .rope_original_max_positions = orig, .rope_no_truncate = no_truncate};
    zt_rope_freqs f;
    zt_qwen3_rope_freqs(&c, &f);
    const int64_t tn = S * (D / 2);
    float *ct = zt_host_buf(tn), *stb = zt_host_buf(tn), *cp = zt_host_buf(tn), *sp = zt_host_buf(tn);
    zt_rope_table_freqs(ct, stb, S, D, &f);
    zt_rope_table(cp, sp, S, D, theta);
    float *gct = zt_dev_f32_nan(tn), *gst = zt_dev_f32_nan(tn);
    zt_cuda_rope_table_freqs(NULL, gct, gst, S, D, &f);
    report("rope_table_yarn_cos", sh, zt_dev_err_f32(gct, ct, tn), TOL_ROPE_TAB);
    report("rope_table_yarn_sin", sh, zt_dev_err_f32(gst, stb, tn), TOL_ROPE_TAB);
    const double apart = zt_relerr(ct, cp, tn);
    printf("rope_table_yarn %s: YaRN vs plain table differ by %.3e (need >= 1e-1)\n", sh, apart);
    report("rope_table_yarn_vs_plain", sh, apart >= 0.1 ? 0.0 : 1.0, TOL_EXACT);
    zt_cuda_free(gct);
    zt_cuda_free(gst);
    free(ct), free(stb), free(cp), free(sp);
}

// docs: positions from doc_positions (packed documents) instead of t % S; the table
// checks run only without (the table is the same).
static void test_rope(int64_t B, int64_t S, int64_t nh, int64_t D, double theta, int docs) {
    char sh[64];
    snprintf(sh, sizeof sh, "B%lld_S%lld_h%lld_D%lld%s", (long long)B, (long long)S, (long long)nh, (long long)D,
             docs ? "_docs" : "");
    const int64_t half = D / 2, tn = S * half, n = B * S * nh * D;
    float *ct = zt_host_buf(tn), *stb = zt_host_buf(tn);
    zt_rope_table(ct, stb, S, D, theta);
    if (!docs) {
        float *gct = zt_dev_f32_nan(tn), *gst = zt_dev_f32_nan(tn);
        zt_cuda_rope_table(NULL, gct, gst, S, D, theta);
        report("rope_table_cos", sh, zt_dev_err_f32(gct, ct, tn), TOL_ROPE_TAB);
        report("rope_table_sin", sh, zt_dev_err_f32(gst, stb, tn), TOL_ROPE_TAB);
        zt_cuda_free(gct);
        zt_cuda_free(gst);
    }
    int32_t *pos = docs ? doc_positions(B, S) : NULL, *gpos = docs ? zt_dev_i32(pos, B * S) : NULL;
    // the ops themselves read the CPU table, so only the rotation is compared
    float *dct = zt_dev_f32(ct, tn), *dst = zt_dev_f32(stb, tn);
    float *x = zt_host_normal(n, 1.0f, seed(), 1), *xr = zt_host_copy(x, n);
    zt_cpu_ops.rope_fwd(xr, ct, stb, pos, B, S, nh, D);
    zt_bf16 *gx = zt_dev_bf16(x, n);
    zt_cuda_rope_fwd(NULL, gx, dct, dst, gpos, B, S, nh, D);
    report(docs ? "rope_fwd_docs" : "rope_fwd", sh, zt_dev_err_bf16(gx, xr, n), TOL_BF16);
    float *xb = zt_host_copy(x, n);
    zt_cpu_ops.rope_bwd(xb, ct, stb, pos, B, S, nh, D);
    zt_bf16 *gxb = zt_dev_bf16(x, n);
    zt_cuda_rope_bwd(NULL, gxb, dct, dst, gpos, B, S, nh, D);
    report(docs ? "rope_bwd_docs" : "rope_bwd", sh, zt_dev_err_bf16(gxb, xb, n), TOL_BF16);
    if (docs) {  // the rotation by document position is not the one by block position
        float *plain = zt_host_copy(x, n);
        zt_cpu_ops.rope_fwd(plain, ct, stb, NULL, B, S, nh, D);
        report_differs("rope_fwd_docs_vs_plain", sh, zt_dev_err_bf16(gx, plain, n), 0.1);
        free(plain);
    }
    void *fr[] = {ct, stb, x, xr, xb, pos};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {dct, dst, gx, gxb, gpos};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// ---- SwiGLU ------------------------------------------------------------------------------------------
static void test_swiglu(int64_t n) {
    char sh[64];
    snprintf(sh, sizeof sh, "n%lld", (long long)n);
    float *g = zt_host_normal(n, 2.0f, seed(), 1), *u = zt_host_normal(n, 1.0f, seed(), 1);
    float *dh = zt_host_normal(n, 1.0f, seed(), 1);
    float *h = zt_host_buf(n), *dg = zt_host_buf(n), *du = zt_host_buf(n);
    zt_cpu_ops.swiglu_fwd(h, g, u, n);
    zt_cpu_ops.swiglu_bwd(dg, du, dh, g, u, n);
    zt_bf16 *gg = zt_dev_bf16(g, n), *gu = zt_dev_bf16(u, n), *gdh = zt_dev_bf16(dh, n);
    zt_bf16 *gh = zt_dev_bf16_nan(n), *gdg = zt_dev_bf16_nan(n), *gdu = zt_dev_bf16_nan(n);
    zt_cuda_swiglu_fwd(NULL, gh, gg, gu, n);
    zt_cuda_swiglu_bwd(NULL, gdg, gdu, gdh, gg, gu, n);
    report("swiglu_fwd", sh, zt_dev_err_bf16(gh, h, n), TOL_BF16);
    report("swiglu_bwd_dg", sh, zt_dev_err_bf16(gdg, dg, n), TOL_BF16);
    report("swiglu_bwd_du", sh, zt_dev_err_bf16(gdu, du, n), TOL_BF16);
    void *fr[] = {g, u, dh, h, dg, du};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gg, gu, gdh, gh, gdg, gdu};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// ---- embedding --------------------------------------------------------------------------------------------
static void test_embedding(int64_t N, int64_t d, int64_t V) {
    char sh[64];
    snprintf(sh, sizeof sh, "N%lld_d%lld_V%lld", (long long)N, (long long)d, (long long)V);
    float *w = zt_host_normal(V * d, 1.0f, seed(), 1);
    uint32_t *tok = zt_xmalloc((size_t)N * 4);
    zt_rng r;
    zt_rng_seed(&r, seed());
    for (int64_t i = 0; i < N; i++) tok[i] = (uint32_t)(i % 7 == 0 ? 3 : zt_rng_below(&r, (uint64_t)V));  // repeats
    float *x = zt_host_buf(N * d);
    zt_cpu_ops.embedding_fwd(x, w, tok, N, d);
    zt_bf16 *gw = zt_dev_bf16(w, V * d), *gx = zt_dev_bf16_nan(N * d);
    uint32_t *gtok = zt_cuda_malloc((size_t)N * 4);
    zt_cuda_memcpy_h2d(gtok, tok, (size_t)N * 4);
    zt_cuda_embedding_fwd(NULL, gx, gw, gtok, N, d, V);
    report("embedding_fwd", sh, zt_dev_err_bf16(gx, x, N * d), TOL_EXACT);

    float *dx = zt_host_normal(N * d, 1.0f, seed(), 1);
    float *dw0 = zt_host_normal(V * d, 0.1f, seed(), 0), *dw = zt_host_copy(dw0, V * d);
    zt_cpu_ops.embedding_bwd(dw, dx, tok, N, d);
    zt_bf16 *gdx = zt_dev_bf16(dx, N * d);
    float *gdw = zt_dev_f32(dw0, V * d), *gdw2 = zt_dev_f32(dw0, V * d);
    zt_cuda_embedding_bwd(NULL, gdw, gdx, gtok, N, d, V);
    zt_cuda_embedding_bwd(NULL, gdw2, gdx, gtok, N, d, V);
    // same values added in the same (token) order as the CPU: bit-exact
    report("embedding_bwd", sh, zt_dev_err_f32(gdw, dw, V * d), TOL_EXACT);
    report("embedding_bwd_deterministic", sh, zt_dev_bytes_differ(gdw, gdw2, (size_t)(V * d) * 4), TOL_EXACT);
    void *fr[] = {w, tok, x, dx, dw0, dw};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gw, gx, gtok, gdx, gdw, gdw2};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// Many documents for the tiled attention (block b % 2 == 0; odd blocks get doc_positions'
// pattern): one-token documents at the last row of a 64-row tile and at the first of the
// next (starts at t % 64 == 63 and t % 64 == 0) in the first quarter, documents of hashed
// lengths up to S/2, then one document from S/2 to S - 2 across several tiles (its query
// tiles skip every key tile before S/2) and a one-token document at S - 1.
static int32_t *doc_positions_many(int64_t B, int64_t S) {
    int32_t *pos = doc_positions(B, S);
    for (int64_t b = 0; b < B; b += 2) {
        int32_t p = 0;
        for (int64_t t = 0; t < S; t++) {
            const uint32_t hsh = (uint32_t)(t * 2654435761u) >> 20;
            const int start = t == 0 || (t < S / 4 && (t % 64 == 63 || t % 64 == 0)) ||
                              (t < S / 2 && hsh % 37 == 0) || t == S / 2 || t == S - 1;
            p = start ? 0 : p + 1;
            pos[b * S + t] = p;
        }
    }
    return pos;
}

// ---- attention ---------------------------------------------------------------------------------------------
// The GEMM path (zt_cuda_attention_fwd/bwd), the scalar tiled one (zt_cuda_attention_tiled_*) and
// the tensor-core one (zt_cuda_attention_tc_*): same contract, same checks; the tiled ones' op
// names start with "tiled_" and "tc_". kind: ATT_GEMM, ATT_TILED, ATT_TC.
typedef void attn_fwd_fn(zt_cuda_ctx *, void *, zt_bf16 *, float *, const zt_bf16 *, const zt_bf16 *,
                         const zt_bf16 *, const int32_t *, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void attn_bwd_fn(zt_cuda_ctx *, void *, zt_bf16 *, zt_bf16 *, zt_bf16 *, const zt_bf16 *, const zt_bf16 *,
                         const float *, const zt_bf16 *, const zt_bf16 *, const zt_bf16 *, const int32_t *, int64_t,
                         int64_t, int64_t, int64_t, int64_t);
enum { ATT_GEMM = 0, ATT_TILED = 1, ATT_TC = 2 };
static void op_name(char *buf, size_t n, int kind, const char *op) {
    snprintf(buf, n, "%s%s", kind == ATT_TC ? "tc_" : kind == ATT_TILED ? "tiled_" : "", op);
}

// docs: packed documents (doc_positions; 2: doc_positions_many): every output and gradient
// against the CPU reference given the same positions, lse over each query's document
// only, and the output must differ from plain causal attention's.
static void attention_check(zt_cuda_ctx *c, int tiled, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                            int docs) {
    attn_fwd_fn *fwd = tiled == ATT_TC ? zt_cuda_attention_tc_fwd : tiled ? zt_cuda_attention_tiled_fwd : zt_cuda_attention_fwd;
    attn_bwd_fn *bwd = tiled == ATT_TC ? zt_cuda_attention_tc_bwd : tiled ? zt_cuda_attention_tiled_bwd : zt_cuda_attention_bwd;
    char sh[64], op[64];
    snprintf(sh, sizeof sh, "B%lld_S%lld_H%lld_Hkv%lld_D%lld%s", (long long)B, (long long)S, (long long)H,
             (long long)Hkv, (long long)D, docs == 2 ? "_manydocs" : docs ? "_docs" : "");
#define OP(name) (op_name(op, sizeof op, tiled, name), op)
    const int64_t nq = B * S * H * D, nk = B * S * Hkv * D;
    int32_t *pos = docs == 2 ? doc_positions_many(B, S) : docs ? doc_positions(B, S) : NULL;
    int32_t *gpos = docs ? zt_dev_i32(pos, B * S) : NULL;
    float *q = zt_host_normal(nq, 1.0f, seed(), 1), *k = zt_host_normal(nk, 1.0f, seed(), 1);
    float *v = zt_host_normal(nk, 1.0f, seed(), 1), *dout = zt_host_normal(nq, 1.0f, seed(), 1);
    float *o = zt_host_buf(nq), *stats = zt_host_buf(B * H * S * 2), *dq = zt_host_buf(nq), *dk = zt_host_buf(nk), *dv = zt_host_buf(nk);
    zt_cpu_ops.attention_fwd(o, stats, q, k, v, pos, B, S, H, Hkv, D);
    zt_cpu_ops.attention_bwd(dq, dk, dv, dout, o, stats, q, k, v, pos, B, S, H, Hkv, D);
    // lse from the CPU probabilities' definition: lse_i = log sum_j exp(s_ij) over the
    // visible keys lo <= j <= i (lo = 0, or the first token of i's document)
    float *lse = zt_host_buf(B * H * S);
    const int64_t g = H / Hkv;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const float *qi = q + (b * S + i) * H * D + h * D;
                const int64_t lo = pos ? i - pos[b * S + i] : 0;
                double mx = -INFINITY, sum = 0;
                double *s = zt_xmalloc((size_t)(i + 1) * sizeof(double));
                for (int64_t j = lo; j <= i; j++) {
                    const float *kj = k + (b * S + j) * Hkv * D + (h / g) * D;
                    double dot = 0;
                    for (int64_t e = 0; e < D; e++) dot += (double)qi[e] * kj[e];
                    s[j] = dot / sqrt((double)D);
                    if (s[j] > mx) mx = s[j];
                }
                for (int64_t j = lo; j <= i; j++) sum += exp(s[j] - mx);
                lse[(b * H + h) * S + i] = (float)(mx + log(sum));
                free(s);
            }
    zt_bf16 *gq = zt_dev_bf16(q, nq), *gk = zt_dev_bf16(k, nk), *gv = zt_dev_bf16(v, nk), *gdo = zt_dev_bf16(dout, nq);
    zt_bf16 *go = zt_dev_bf16_nan(nq), *gdq = zt_dev_bf16_nan(nq), *gdk = zt_dev_bf16_nan(nk), *gdv = zt_dev_bf16_nan(nk);
    zt_bf16 *gdq2 = zt_dev_bf16_nan(nq), *gdk2 = zt_dev_bf16_nan(nk), *gdv2 = zt_dev_bf16_nan(nk), *go2 = zt_dev_bf16_nan(nq);
    float *glse = zt_dev_f32_nan(B * H * S), *glse2 = zt_dev_f32_nan(B * H * S);
    fwd(c, NULL, go, glse, gq, gk, gv, gpos, B, S, H, Hkv, D);
    report(OP("attention_fwd_o"), sh, zt_dev_err_bf16(go, o, nq), TOL_BF16);
    report(OP("attention_fwd_lse"), sh, zt_dev_err_f32(glse, lse, B * H * S), 1e-5);
    bwd(c, NULL, gdq, gdk, gdv, gdo, go, glse, gq, gk, gv, gpos, B, S, H, Hkv, D);
    report(OP("attention_bwd_dq"), sh, zt_dev_err_bf16(gdq, dq, nq), TOL_BF16_ATT);
    report(OP("attention_bwd_dk"), sh, zt_dev_err_bf16(gdk, dk, nk), TOL_BF16_ATT);
    report(OP("attention_bwd_dv"), sh, zt_dev_err_bf16(gdv, dv, nk), TOL_BF16_ATT);
    bwd(c, NULL, gdq2, gdk2, gdv2, gdo, go, glse, gq, gk, gv, gpos, B, S, H, Hkv, D);
    report(OP("attention_bwd_deterministic"), sh, zt_dev_bytes_differ(gdq, gdq2, (size_t)nq * 2), TOL_EXACT);
    if (tiled) {  // every output of a rerun bit-identical (dk/dv: the group's heads summed in one order)
        fwd(c, NULL, go2, glse2, gq, gk, gv, gpos, B, S, H, Hkv, D);
        const double d = zt_dev_bytes_differ(go, go2, (size_t)nq * 2) + zt_dev_bytes_differ(glse, glse2, (size_t)(B * H * S) * 4) +
                         zt_dev_bytes_differ(gdk, gdk2, (size_t)nk * 2) + zt_dev_bytes_differ(gdv, gdv2, (size_t)nk * 2);
        report(OP("attention_fwd_bwd_deterministic"), sh, d, TOL_EXACT);
    }
    if (docs) {  // keys of other documents really are masked: plain causal attention differs
        float *o_causal = zt_host_buf(nq);
        zt_cpu_ops.attention_fwd(o_causal, stats, q, k, v, NULL, B, S, H, Hkv, D);
        report_differs(OP("attention_fwd_docs_vs_causal"), sh, zt_dev_err_bf16(go, o_causal, nq), 0.1);
        free(o_causal);
    }
#undef OP
    void *fr[] = {q, k, v, dout, o, stats, dq, dk, dv, lse, pos};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gq, gk, gv, gdo, go, gdq, gdk, gdv, gdq2, gdk2, gdv2, go2, glse, glse2, gpos};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}
static void test_attention(zt_cuda_ctx *c, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D, int docs) {
    attention_check(c, 0, B, S, H, Hkv, D, docs);
}
static void test_attention_tiled(zt_cuda_ctx *c, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D, int docs) {
    attention_check(c, ATT_TILED, B, S, H, Hkv, D, docs);
}
static void test_attention_tc(zt_cuda_ctx *c, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D, int docs) {
    attention_check(c, ATT_TC, B, S, H, Hkv, D, docs);
}

// ---- attention over held query rows (context parallelism) ----------------------------------------
// The zig-zag split of a block of S rows over C ranks, from its definition (docs/design.md): chunk
// k = [kS/2C, (k+1)S/2C) of 2C, rank r holds chunks r and 2C-1-r in that order, each rank's rows
// padded with -1 to the longest rank's count. rows[r * Sl + t] = the block row of rank r's row t.
static int64_t zigzag_rows(int64_t S, int C, int32_t **rows_out) {
    int64_t Sl = 0;
    for (int r = 0; r < C; r++) {
        const int64_t n = (r + 1) * S / (2 * C) - r * S / (2 * C) + (2 * C - r) * S / (2 * C) -
                          (2 * C - 1 - r) * S / (2 * C);
        if (n > Sl) Sl = n;
    }
    int32_t *rows = zt_xmalloc((size_t)(C * Sl) * sizeof(int32_t));
    for (int r = 0; r < C; r++) {
        int64_t t = 0;
        const int ks[2] = {r, 2 * C - 1 - r};
        for (int z = 0; z < 2; z++)
            for (int64_t g = ks[z] * S / (2 * C); g < (ks[z] + 1) * S / (2 * C); g++) rows[r * Sl + t++] = (int32_t)g;
        for (; t < Sl; t++) rows[r * Sl + t] = -1;
    }
    *rows_out = rows;
    return Sl;
}

// Documents placed against the split (docs == 3): one-token documents at the block rows that are
// the last and first rows of the held rows' 64-row tiles (rows[r * Sl + 63], [64]) on every rank
// at C = 2 and 3, and hashed starts about every 29 tokens, so most documents cross the chunk edges
// (chunks of 25-38 rows here) and ranks.
static int32_t *doc_positions_split(int64_t B, int64_t S) {
    int32_t *pos = zt_xmalloc((size_t)(B * S) * sizeof(int32_t));
    unsigned char *start = zt_xcalloc((size_t)S + 1, 1);
    start[0] = 1;
    for (int64_t t = 0; t < S; t++) start[t] |= ((uint32_t)(t * 2654435761u) >> 20) % 29 == 0;
    for (int C = 2; C <= 3; C++) {
        int32_t *rows = NULL;
        const int64_t Sl = zigzag_rows(S, C, &rows);
        for (int r = 0; r < C; r++)
            for (int64_t e = 63; e + 1 < Sl; e += 64)
                for (int z = 0; z < 2; z++) {
                    const int32_t g = rows[r * Sl + e + z];
                    if (g >= 0) start[g] = start[g + 1] = 1;
                }
        free(rows);
    }
    for (int64_t b = 0; b < B; b++) {
        int32_t p = 0;
        for (int64_t t = 0; t < S; t++) {
            p = start[t] || (b % 2 && t == 1) ? 0 : p + 1;
            pos[b * S + t] = p;
        }
    }
    free(start);
    return pos;
}

typedef void attn_rows_fwd_fn(zt_cuda_ctx *, void *, zt_bf16 *, float *, const zt_bf16 *, const zt_bf16 *,
                              const zt_bf16 *, const int32_t *, const int32_t *, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t);
typedef void attn_rows_bwd_fn(zt_cuda_ctx *, void *, zt_bf16 *, zt_bf16 *, zt_bf16 *, const zt_bf16 *,
                              const zt_bf16 *, const float *, const zt_bf16 *, const zt_bf16 *, const zt_bf16 *,
                              const int32_t *, const int32_t *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);

// The tiled kernels over each rank's held rows of a zig-zag split at C = 1, 2, 3 (the engine's
// context-parallel attention) against the same kernels over the whole block: o, lse and dq of every
// held row bit-identical to the whole block's row (a row's online softmax meets the same visible
// key tiles in the same order; fully masked tiles add exact zeros); padding rows (junk queries, dO
// and positions) give o = lse = dq = 0; dK|dV summed over the C ranks' calls (in double, as the
// engine's fp32 reduce-scatter of the bf16 rows) within TOL_BF16_ATT of the whole block's and of
// the CPU reference's (the query tiles are cut differently, so the fp32 sums run in another order);
// at C = 1 (the identity map) every output, dK|dV included, is bit-identical to the map-less call.
// docs: 0 plain causal (pos NULL), 2 doc_positions_many, 3 doc_positions_split.
static void attention_rows_check(zt_cuda_ctx *c, int kind, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                                 int docs) {
    attn_fwd_fn *fwd = kind == ATT_TC ? zt_cuda_attention_tc_fwd : zt_cuda_attention_tiled_fwd;
    attn_bwd_fn *bwd = kind == ATT_TC ? zt_cuda_attention_tc_bwd : zt_cuda_attention_tiled_bwd;
    attn_rows_fwd_fn *rfwd = kind == ATT_TC ? zt_cuda_attention_tc_rows_fwd : zt_cuda_attention_tiled_rows_fwd;
    attn_rows_bwd_fn *rbwd = kind == ATT_TC ? zt_cuda_attention_tc_rows_bwd : zt_cuda_attention_tiled_rows_bwd;
    const int64_t qs = H * D, kvs = Hkv * D, nq = B * S * qs, nk = B * S * kvs;
    float *q = zt_host_normal(nq, 1.0f, seed(), 1), *k = zt_host_normal(nk, 1.0f, seed(), 1);
    float *v = zt_host_normal(nk, 1.0f, seed(), 1), *dout = zt_host_normal(nq, 1.0f, seed(), 1);
    int32_t *pos = docs == 3 ? doc_positions_split(B, S) : docs ? doc_positions_many(B, S) : NULL;
    int32_t *gpos = pos ? zt_dev_i32(pos, B * S) : NULL;
    // the CPU reference's dK, dV (fp32 from the bf16-rounded inputs the device sees)
    float *o = zt_host_buf(nq), *stats = zt_host_buf(B * H * S * 2), *dq = zt_host_buf(nq), *dk = zt_host_buf(nk), *dv = zt_host_buf(nk);
    zt_cpu_ops.attention_fwd(o, stats, q, k, v, pos, B, S, H, Hkv, D);
    zt_cpu_ops.attention_bwd(dq, dk, dv, dout, o, stats, q, k, v, pos, B, S, H, Hkv, D);
    // the whole block on the device
    zt_bf16 *gq = zt_dev_bf16(q, nq), *gk = zt_dev_bf16(k, nk), *gv = zt_dev_bf16(v, nk), *gdo = zt_dev_bf16(dout, nq);
    zt_bf16 *go = zt_dev_bf16_nan(nq), *gdq = zt_dev_bf16_nan(nq), *gdk = zt_dev_bf16_nan(nk), *gdv = zt_dev_bf16_nan(nk);
    float *glse = zt_dev_f32_nan(B * H * S);
    fwd(c, NULL, go, glse, gq, gk, gv, gpos, B, S, H, Hkv, D);
    bwd(c, NULL, gdq, gdk, gdv, gdo, go, glse, gq, gk, gv, gpos, B, S, H, Hkv, D);
    zt_bf16 *ho = zt_xmalloc((size_t)nq * 2), *hdq = zt_xmalloc((size_t)nq * 2);
    float *hlse = zt_host_buf(B * H * S), *hdk = zt_host_buf(nk), *hdv = zt_host_buf(nk);
    zt_cuda_memcpy_d2h(ho, go, (size_t)nq * 2);
    zt_cuda_memcpy_d2h(hdq, gdq, (size_t)nq * 2);
    zt_dev_get_f32(hlse, glse, B * H * S);
    zt_dev_get_bf16(hdk, gdk, nk);
    zt_dev_get_bf16(hdv, gdv, nk);
    // bf16 copies of the host inputs, so held rows are copied bit for bit
    zt_bf16 *bq = zt_xmalloc((size_t)nq * 2), *bdo = zt_xmalloc((size_t)nq * 2);
    zt_cuda_memcpy_d2h(bq, gq, (size_t)nq * 2);
    zt_cuda_memcpy_d2h(bdo, gdo, (size_t)nq * 2);
    for (int C = 1; C <= 3; C++) {
        char sh[96], op[64];
        snprintf(sh, sizeof sh, "B%lld_S%lld_H%lld_Hkv%lld_D%lld_C%d%s", (long long)B, (long long)S, (long long)H,
                 (long long)Hkv, (long long)D, C, docs == 3 ? "_splitdocs" : docs ? "_manydocs" : "");
#define OP(name) (op_name(op, sizeof op, kind, name), op)
        int32_t *rows = NULL;
        const int64_t Sl = zigzag_rows(S, C, &rows);
        double *sk = zt_xcalloc((size_t)nk, sizeof(double)), *sv = zt_xcalloc((size_t)nk, sizeof(double));
        int64_t bad_rows = 0, bad_pad = 0, held = 0, pads = 0, same_kv = 1;
        for (int r = 0; r < C; r++) {
            for (int with_map = C == 1 ? 0 : 1; with_map <= 1; with_map++) {  // C = 1: map-less and identity
                const int32_t *rm = rows + r * Sl;
                zt_bf16 *lq = zt_xmalloc((size_t)(B * Sl * qs) * 2), *ldo = zt_xmalloc((size_t)(B * Sl * qs) * 2);
                int32_t *lpos = zt_xmalloc((size_t)(B * Sl) * sizeof(int32_t));
                for (int64_t b = 0; b < B; b++)
                    for (int64_t t = 0; t < Sl; t++) {
                        const int32_t g = rm[t];
                        for (int64_t e = 0; e < qs; e++) {  // padding rows: junk that must not leak
                            lq[(b * Sl + t) * qs + e] = g >= 0 ? bq[(b * S + g) * qs + e] : (zt_bf16)0x4100;
                            ldo[(b * Sl + t) * qs + e] = g >= 0 ? bdo[(b * S + g) * qs + e] : (zt_bf16)0xc100;
                        }
                        lpos[b * Sl + t] = g >= 0 ? (pos ? pos[b * S + g] : g) : 7777;
                    }
                zt_bf16 *dlq = zt_cuda_malloc((size_t)(B * Sl * qs) * 2), *dldo = zt_cuda_malloc((size_t)(B * Sl * qs) * 2);
                zt_cuda_memcpy_h2d(dlq, lq, (size_t)(B * Sl * qs) * 2);
                zt_cuda_memcpy_h2d(dldo, ldo, (size_t)(B * Sl * qs) * 2);
                int32_t *dpos = pos ? zt_dev_i32(lpos, B * Sl) : NULL, *dmap = zt_dev_i32(rm, Sl);
                zt_bf16 *lo = zt_dev_bf16_nan(B * Sl * qs), *ldq = zt_dev_bf16_nan(B * Sl * qs);
                zt_bf16 *ldk = zt_dev_bf16_nan(nk), *ldv = zt_dev_bf16_nan(nk);
                float *llse = zt_dev_f32_nan(B * H * Sl);
                const int32_t *qm = with_map ? dmap : NULL;
                rfwd(c, NULL, lo, llse, dlq, gk, gv, dpos, qm, B, Sl, S, H, Hkv, D);
                rbwd(c, NULL, ldq, ldk, ldv, dldo, lo, llse, dlq, gk, gv, dpos, qm, B, Sl, S, H, Hkv, D);
                zt_bf16 *hlo = zt_xmalloc((size_t)(B * Sl * qs) * 2), *hldq = zt_xmalloc((size_t)(B * Sl * qs) * 2);
                float *hllse = zt_host_buf(B * H * Sl), *hldk = zt_host_buf(nk), *hldv = zt_host_buf(nk);
                zt_cuda_memcpy_d2h(hlo, lo, (size_t)(B * Sl * qs) * 2);
                zt_cuda_memcpy_d2h(hldq, ldq, (size_t)(B * Sl * qs) * 2);
                zt_dev_get_f32(hllse, llse, B * H * Sl);
                zt_dev_get_bf16(hldk, ldk, nk);
                zt_dev_get_bf16(hldv, ldv, nk);
                for (int64_t b = 0; b < B; b++)
                    for (int64_t t = 0; t < Sl; t++) {
                        const int32_t g = rm[t];
                        int ok = 1;
                        if (g >= 0) {
                            ok &= !memcmp(hlo + (b * Sl + t) * qs, ho + (b * S + g) * qs, (size_t)qs * 2);
                            ok &= !memcmp(hldq + (b * Sl + t) * qs, hdq + (b * S + g) * qs, (size_t)qs * 2);
                            for (int64_t h = 0; h < H; h++)
                                ok &= !memcmp(&hllse[(b * H + h) * Sl + t], &hlse[(b * H + h) * S + g], 4);
                            held++, bad_rows += !ok;
                        } else {
                            for (int64_t e = 0; e < qs; e++)
                                ok &= zt_bf16_to_f32(hlo[(b * Sl + t) * qs + e]) == 0.0f &&
                                      zt_bf16_to_f32(hldq[(b * Sl + t) * qs + e]) == 0.0f;
                            for (int64_t h = 0; h < H; h++) ok &= hllse[(b * H + h) * Sl + t] == 0.0f;
                            pads++, bad_pad += !ok;
                        }
                    }
                if (C == 1)  // the identity map and the map-less call: dK|dV bit for bit too
                    same_kv &= !memcmp(hldk, hdk, (size_t)nk * 4) && !memcmp(hldv, hdv, (size_t)nk * 4);
                else
                    for (int64_t i = 0; i < nk; i++) sk[i] += hldk[i], sv[i] += hldv[i];
                void *fr[] = {lq, ldo, lpos, hlo, hldq, hllse, hldk, hldv};
                for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
                void *gf[] = {dlq, dldo, dpos, dmap, lo, ldq, ldk, ldv, llse};
                for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
            }
        }
        printf("%s %s: %lld held rows, %lld padding rows checked (over the calls); rows not bit-identical %lld, "
               "padding rows not zero %lld\n",
               OP("attention_rows"), sh, (long long)held, (long long)pads, (long long)bad_rows, (long long)bad_pad);
        report(OP("attention_rows_o_lse_dq_bits"), sh, held > 0 ? (double)bad_rows / (double)held : 1.0, TOL_EXACT);
        report(OP("attention_rows_padding_zero"), sh, (double)bad_pad, TOL_EXACT);
        if (C == 1) {
            report(OP("attention_rows_map_dkdv_bits"), sh, same_kv ? 0.0 : 1.0, TOL_EXACT);
        } else {
            float *fk = zt_host_buf(nk), *fv = zt_host_buf(nk);
            for (int64_t i = 0; i < nk; i++) fk[i] = (float)sk[i], fv[i] = (float)sv[i];
            report(OP("attention_rows_dk_sum_vs_block"), sh, zt_relerr(fk, hdk, nk), TOL_BF16_ATT);
            report(OP("attention_rows_dv_sum_vs_block"), sh, zt_relerr(fv, hdv, nk), TOL_BF16_ATT);
            report(OP("attention_rows_dk_sum_vs_cpu"), sh, zt_relerr(fk, dk, nk), TOL_BF16_ATT);
            report(OP("attention_rows_dv_sum_vs_cpu"), sh, zt_relerr(fv, dv, nk), TOL_BF16_ATT);
            free(fk), free(fv);
        }
#undef OP
        free(sk), free(sv), free(rows);
    }
    void *fr[] = {q, k, v, dout, o, stats, dq, dk, dv, pos, ho, hdq, hlse, hdk, hdv, bq, bdo};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gq, gk, gv, gdo, go, gdq, gdk, gdv, glse, gpos};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// The tiled path's scratch at Qwen3-32B's attention shapes (H 64, Hkv 8, D 128) and S =
// 32,768: O(S*D) per head group, no S x S term (the GEMM path's would be ~103 GB).
static void test_attention_scratch(void) {
    const int64_t S = 32768, H = 64, Hkv = 8, D = 128;
    const size_t tiled = zt_cuda_attention_tiled_scratch_bytes(S, H, Hkv, D);
    const size_t gemm = zt_cuda_attention_scratch_bytes(S, H, Hkv, D);
    printf("attention scratch at H=64 Hkv=8 D=128 S=32768: tiled %zu bytes (%.1f MB), GEMM path %zu bytes (%.1f GB)\n",
           tiled, tiled / 1e6, gemm, gemm / 1e9);
    // O(S*D): at most a few fp32 values per (head, token), i.e. linear in S; and < 1 GB.
    const int linear = zt_cuda_attention_tiled_scratch_bytes(2 * S, H, Hkv, D) <= 2 * tiled + 4096;
    report("tiled_attention_scratch_32B_S32768", "H64_Hkv8_D128_S32768",
           tiled < (size_t)1e9 && tiled <= (size_t)(H * S * 8) && linear ? 0.0 : 1.0, TOL_EXACT);
    // the tensor-core kernels and the layers' dispatch (attention_tc.cu): the same bound
    const size_t tc = zt_cuda_attention_tc_scratch_bytes(S, H, Hkv, D);
    const size_t flash = zt_cuda_attention_flash_scratch_bytes(S, H, Hkv, D);
    printf("attention scratch at H=64 Hkv=8 D=128 S=32768: tensor-core %zu bytes, the layers' tiled path %zu bytes\n",
           tc, flash);
    const int tc_linear = zt_cuda_attention_tc_scratch_bytes(2 * S, H, Hkv, D) <= 2 * tc + 4096 &&
                          zt_cuda_attention_flash_scratch_bytes(2 * S, H, Hkv, D) <= 2 * flash + 4096;
    report("tc_attention_scratch_32B_S32768", "H64_Hkv8_D128_S32768",
           tc <= (size_t)(H * S * 8) && flash <= (size_t)(H * S * 8) && flash >= tc && flash >= tiled && tc_linear
               ? 0.0
               : 1.0,
           TOL_EXACT);
}

// ---- cuDNN fused attention (optional) ------------------------------------------------------------------
// Why the cuDNN checks cannot run here, or NULL when they can.
static const char *cudnn_skip_reason(void) {
    if (!zt_cudnn_sdpa_built()) return "cuDNN not built";
    int dev = 0;
    struct cudaDeviceProp p;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess)
        return "cannot query the device";
    if (p.major < 8) return "GPU older than sm_80: no cuDNN fused attention";
    return NULL;
}

// Same inputs and CPU reference as test_attention, through zt_cudnn_sdpa_fwd/bwd: o and
// dq/dk/dv vs the CPU (same tolerances as the GEMM path), lse vs the GEMM path's lse.
// A failed cuDNN call (returns -1) is reported with its message and counts as a failure
// of every check it would have fed.
static void test_cudnn_attention(zt_cuda_ctx *c, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    char sh[64];
    snprintf(sh, sizeof sh, "B%lld_S%lld_H%lld_Hkv%lld_D%lld", (long long)B, (long long)S, (long long)H,
             (long long)Hkv, (long long)D);
    const int64_t nq = B * S * H * D, nk = B * S * Hkv * D, nl = B * H * S;
    float *q = zt_host_normal(nq, 1.0f, seed(), 1), *k = zt_host_normal(nk, 1.0f, seed(), 1);
    float *v = zt_host_normal(nk, 1.0f, seed(), 1), *dout = zt_host_normal(nq, 1.0f, seed(), 1);
    float *o = zt_host_buf(nq), *stats = zt_host_buf(B * H * S * 2), *dq = zt_host_buf(nq), *dk = zt_host_buf(nk), *dv = zt_host_buf(nk);
    zt_cpu_ops.attention_fwd(o, stats, q, k, v, NULL, B, S, H, Hkv, D);
    zt_cpu_ops.attention_bwd(dq, dk, dv, dout, o, stats, q, k, v, NULL, B, S, H, Hkv, D);
    zt_bf16 *gq = zt_dev_bf16(q, nq), *gk = zt_dev_bf16(k, nk), *gv = zt_dev_bf16(v, nk), *gdo = zt_dev_bf16(dout, nq);
    zt_bf16 *go = zt_dev_bf16_nan(nq), *gdq = zt_dev_bf16_nan(nq), *gdk = zt_dev_bf16_nan(nk), *gdv = zt_dev_bf16_nan(nk);
    zt_bf16 *gdq2 = zt_dev_bf16_nan(nq), *gdk2 = zt_dev_bf16_nan(nk), *gdv2 = zt_dev_bf16_nan(nk), *go_gemm = zt_dev_bf16_nan(nq);
    float *glse = zt_dev_f32_nan(nl), *glse_gemm = zt_dev_f32_nan(nl);
    zt_cuda_attention_fwd(c, NULL, go_gemm, glse_gemm, gq, gk, gv, NULL, B, S, H, Hkv, D);
    float *lse_gemm = zt_host_buf(nl);
    zt_dev_get_f32(lse_gemm, glse_gemm, nl);

    if (zt_cudnn_sdpa_fwd(c, NULL, go, glse, gq, gk, gv, B, S, H, Hkv, D) != 0) {
        printf("cudnn_attention %s: forward failed: %s\n", sh, zt_errmsg());
        report("cudnn_attention_fwd_o", sh, INFINITY, TOL_BF16);
    } else {
        zt_cuda_sync(NULL, "cudnn attention forward");
        report("cudnn_attention_fwd_o", sh, zt_dev_err_bf16(go, o, nq), TOL_BF16);
        report("cudnn_attention_fwd_lse_vs_gemm", sh, zt_dev_err_f32(glse, lse_gemm, nl), TOL_CUDNN_LSE);
        // the same shape again: the cached graph, not a rebuild
        int64_t hits0, builds0, hits1, builds1;
        zt_cudnn_sdpa_stats(c, NULL, &hits0, &builds0, NULL);
        const int rc = zt_cudnn_sdpa_fwd(c, NULL, go, glse, gq, gk, gv, B, S, H, Hkv, D);
        zt_cudnn_sdpa_stats(c, NULL, &hits1, &builds1, NULL);
        report("cudnn_graph_cache_hit", sh, (rc == 0 && hits1 == hits0 + 1 && builds1 == builds0) ? 0.0 : 1.0,
               TOL_EXACT);
        // backward from cuDNN's own o and lse
        if (zt_cudnn_sdpa_bwd(c, NULL, gdq, gdk, gdv, gdo, go, glse, gq, gk, gv, B, S, H, Hkv, D) != 0) {
            printf("cudnn_attention %s: backward failed: %s\n", sh, zt_errmsg());
            report("cudnn_attention_bwd_dq", sh, INFINITY, TOL_BF16_ATT);
        } else {
            zt_cuda_sync(NULL, "cudnn attention backward");
            report("cudnn_attention_bwd_dq", sh, zt_dev_err_bf16(gdq, dq, nq), TOL_BF16_ATT);
            report("cudnn_attention_bwd_dk", sh, zt_dev_err_bf16(gdk, dk, nk), TOL_BF16_ATT);
            report("cudnn_attention_bwd_dv", sh, zt_dev_err_bf16(gdv, dv, nk), TOL_BF16_ATT);
            // zerotrain's rule: bit-identical gradients on a rerun (cuDNN's deterministic
            // algorithm; zt_cudnn_sdpa_stats counts shapes where cuDNN had none)
            int64_t nondet = 0;
            const int rc2 = zt_cudnn_sdpa_bwd(c, NULL, gdq2, gdk2, gdv2, gdo, go, glse, gq, gk, gv, B, S, H, Hkv, D);
            zt_cudnn_sdpa_stats(c, NULL, NULL, NULL, &nondet);
            if (nondet) printf("cudnn_attention: %lld backward graph(s) built without the deterministic algorithm\n",
                               (long long)nondet);
            report("cudnn_attention_bwd_deterministic", sh,
                   rc2 == 0 ? zt_dev_bytes_differ(gdq, gdq2, (size_t)nq * 2) + zt_dev_bytes_differ(gdk, gdk2, (size_t)nk * 2) +
                                  zt_dev_bytes_differ(gdv, gdv2, (size_t)nk * 2)
                            : 1.0,
                   TOL_EXACT);
        }
    }
    void *fr[] = {q, k, v, dout, o, stats, dq, dk, dv, lse_gemm};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gq, gk, gv, gdo, go, gdq, gdk, gdv, gdq2, gdk2, gdv2, go_gemm, glse, glse_gemm};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// Packed documents through cuDNN's variable-length batch (zt_cudnn_sdpa_docs_fwd/bwd, the table
// from zt_cudnn_docs_build over the same positions as the tiled/GEMM checks: doc_positions, or
// doc_positions_many with docs == 2): o and dq/dk/dv vs the CPU reference given the positions (the
// GEMM path's tolerances), lse vs the GEMM path given them, the output unlike plain causal
// attention's (documents really are kept apart), a cached graph on the same table, and a
// bit-identical backward on a rerun. Padded with empty sequences where the loaded cuDNN allows
// them (>= 9.25). Written for the next GPU run: never run yet (cuDNN is absent from the CPU
// execution of CUDA).
static void test_cudnn_attention_docs(zt_cuda_ctx *c, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                                      int docs) {
    char sh[80];
    snprintf(sh, sizeof sh, "B%lld_S%lld_H%lld_Hkv%lld_D%lld%s", (long long)B, (long long)S, (long long)H,
             (long long)Hkv, (long long)D, docs == 2 ? "_manydocs" : "_docs");
    if (!zt_cudnn_sdpa_docs_supported()) {
        printf("RESULT op=cudnn_attention_docs shape=%s SKIPPED (%s)\n", sh, zt_errmsg());
        g_nskip++;
        return;
    }
    const int64_t nq = B * S * H * D, nk = B * S * Hkv * D, nl = B * H * S;
    int32_t *pos = docs == 2 ? doc_positions_many(B, S) : doc_positions(B, S), *gpos = zt_dev_i32(pos, B * S);
    zt_cudnn_docs_table t;
    const size_t cap = zt_cudnn_docs_bytes(2 * B * S);
    void *table = zt_xmalloc(cap), *gtable = zt_cuda_malloc(cap);
    const int pad = zt_cudnn_version() >= ZT_CUDNN_DOCS_ZERO_LEN_VERSION;
    if (zt_cudnn_docs_build(pos, B, S, H, Hkv, D, pad, table, cap, &t) != 0) zt_die_on_err();
    zt_cuda_memcpy_h2d(gtable, table, t.bytes);
    printf("cudnn_attention_docs %s: %lld documents, %lld sequences in the graph, longest %lld\n", sh,
           (long long)t.n_docs, (long long)t.n_graph, (long long)t.max_len);
    float *q = zt_host_normal(nq, 1.0f, seed(), 1), *k = zt_host_normal(nk, 1.0f, seed(), 1);
    float *v = zt_host_normal(nk, 1.0f, seed(), 1), *dout = zt_host_normal(nq, 1.0f, seed(), 1);
    float *o = zt_host_buf(nq), *o_plain = zt_host_buf(nq), *stats = zt_host_buf(B * H * S * 2), *dq = zt_host_buf(nq), *dk = zt_host_buf(nk);
    float *dv = zt_host_buf(nk);
    zt_cpu_ops.attention_fwd(o, stats, q, k, v, pos, B, S, H, Hkv, D);
    zt_cpu_ops.attention_bwd(dq, dk, dv, dout, o, stats, q, k, v, pos, B, S, H, Hkv, D);
    zt_cpu_ops.attention_fwd(o_plain, stats, q, k, v, NULL, B, S, H, Hkv, D);
    zt_bf16 *gq = zt_dev_bf16(q, nq), *gk = zt_dev_bf16(k, nk), *gv = zt_dev_bf16(v, nk), *gdo = zt_dev_bf16(dout, nq);
    zt_bf16 *go = zt_dev_bf16_nan(nq), *gdq = zt_dev_bf16_nan(nq), *gdk = zt_dev_bf16_nan(nk), *gdv = zt_dev_bf16_nan(nk);
    zt_bf16 *gdq2 = zt_dev_bf16_nan(nq), *gdk2 = zt_dev_bf16_nan(nk), *gdv2 = zt_dev_bf16_nan(nk), *go_gemm = zt_dev_bf16_nan(nq);
    float *glse = zt_dev_f32_nan(nl), *glse_gemm = zt_dev_f32_nan(nl), *lse_gemm = zt_host_buf(nl);
    zt_cuda_attention_fwd(c, NULL, go_gemm, glse_gemm, gq, gk, gv, gpos, B, S, H, Hkv, D);
    zt_dev_get_f32(lse_gemm, glse_gemm, nl);
    if (zt_cudnn_sdpa_docs_fwd(c, NULL, go, glse, gq, gk, gv, &t, gtable, B, S, H, Hkv, D) != 0) {
        printf("cudnn_attention_docs %s: forward failed: %s\n", sh, zt_errmsg());
        report("cudnn_attention_docs_fwd_o", sh, INFINITY, TOL_BF16);
    } else {
        zt_cuda_sync(NULL, "cudnn attention forward, packed documents");
        report("cudnn_attention_docs_fwd_o", sh, zt_dev_err_bf16(go, o, nq), TOL_BF16);
        report("cudnn_attention_docs_fwd_lse_vs_gemm", sh, zt_dev_err_f32(glse, lse_gemm, nl), TOL_CUDNN_LSE);
        const double apart = zt_dev_err_bf16(go, o_plain, nq);  // plain causal attention's output is another
        printf("cudnn_attention_docs %s: output vs plain causal attention %.3f (relative)\n", sh, apart);
        report("cudnn_attention_docs_differs_from_causal", sh, apart > 0.05 ? 0.0 : 1.0, TOL_EXACT);
        int64_t hits0, builds0, hits1, builds1;
        zt_cudnn_sdpa_stats(c, NULL, &hits0, &builds0, NULL);
        const int rc = zt_cudnn_sdpa_docs_fwd(c, NULL, go, glse, gq, gk, gv, &t, gtable, B, S, H, Hkv, D);
        zt_cudnn_sdpa_stats(c, NULL, &hits1, &builds1, NULL);
        report("cudnn_docs_graph_cache_hit", sh, (rc == 0 && hits1 == hits0 + 1 && builds1 == builds0) ? 0.0 : 1.0,
               TOL_EXACT);
        if (zt_cudnn_sdpa_docs_bwd(c, NULL, gdq, gdk, gdv, gdo, go, glse, gq, gk, gv, &t, gtable, B, S, H, Hkv, D) !=
            0) {
            printf("cudnn_attention_docs %s: backward failed: %s\n", sh, zt_errmsg());
            report("cudnn_attention_docs_bwd_dq", sh, INFINITY, TOL_BF16_ATT);
        } else {
            zt_cuda_sync(NULL, "cudnn attention backward, packed documents");
            report("cudnn_attention_docs_bwd_dq", sh, zt_dev_err_bf16(gdq, dq, nq), TOL_BF16_ATT);
            report("cudnn_attention_docs_bwd_dk", sh, zt_dev_err_bf16(gdk, dk, nk), TOL_BF16_ATT);
            report("cudnn_attention_docs_bwd_dv", sh, zt_dev_err_bf16(gdv, dv, nk), TOL_BF16_ATT);
            const int rc2 =
                zt_cudnn_sdpa_docs_bwd(c, NULL, gdq2, gdk2, gdv2, gdo, go, glse, gq, gk, gv, &t, gtable, B, S, H, Hkv, D);
            report("cudnn_attention_docs_bwd_deterministic", sh,
                   rc2 == 0 ? zt_dev_bytes_differ(gdq, gdq2, (size_t)nq * 2) + zt_dev_bytes_differ(gdk, gdk2, (size_t)nk * 2) +
                                  zt_dev_bytes_differ(gdv, gdv2, (size_t)nk * 2)
                            : 1.0,
                   TOL_EXACT);
        }
    }
    void *fr[] = {q, k, v, dout, o, o_plain, stats, dq, dk, dv, lse_gemm, pos, table};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gq, gk, gv, gdo, go, gdq, gdk, gdv, gdq2, gdk2, gdv2, go_gemm, glse, glse_gemm, gpos, gtable};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// ---- fused lm_head + cross-entropy ---------------------------------------------------------------------
static void test_xent(zt_cuda_ctx *c, int64_t N, int64_t d, int64_t V, int64_t chunk) {
    char sh[64];
    snprintf(sh, sizeof sh, "N%lld_d%lld_V%lld_chunk%lld", (long long)N, (long long)d, (long long)V, (long long)chunk);
    float *x = zt_host_normal(N * d, 1.0f, seed(), 1), *w = zt_host_normal(V * d, 0.2f, seed(), 1);
    int32_t *tg = zt_xmalloc((size_t)N * 4);
    zt_rng r;
    zt_rng_seed(&r, seed());
    for (int64_t i = 0; i < N; i++) tg[i] = (i % 11 == 10) ? -1 : (int32_t)zt_rng_below(&r, (uint64_t)V);
    const float scale = 1.0f / (float)N;
    float *dx = zt_host_buf(N * d), *dw0 = zt_host_normal(V * d, 0.01f, seed(), 0), *dw = zt_host_copy(dw0, V * d);
    const double loss = zt_cpu_ops.lmhead_xent(dx, dw, x, w, tg, N, d, V, scale);
    zt_bf16 *gx = zt_dev_bf16(x, N * d), *gw = zt_dev_bf16(w, V * d), *gdx = zt_dev_bf16_nan(N * d);
    float *gdw = zt_dev_f32(dw0, V * d);
    int32_t *gtg = zt_cuda_malloc((size_t)N * 4);
    zt_cuda_memcpy_h2d(gtg, tg, (size_t)N * 4);
    double *gloss = zt_cuda_malloc(2 * sizeof(double)), hl[2];
    zt_cuda_fill_nan(gloss, ZT_F32, 4, NULL);
    zt_cuda_ctx_set_xent_chunk_rows(c, chunk);
    zt_cuda_lmhead_xent(c, NULL, gloss, gdx, gdw, ZT_F32, gx, gw, gtg, N, d, V, scale);
    zt_cuda_lmhead_xent(c, NULL, gloss + 1, NULL, NULL, ZT_F32, gx, gw, gtg, N, d, V, scale);  // loss only
    zt_cuda_ctx_set_xent_chunk_rows(c, 0);
    zt_cuda_memcpy_d2h(hl, gloss, sizeof hl);
    report("xent_loss", sh, isfinite(hl[0]) ? fabs(hl[0] - loss) / fabs(loss) : INFINITY, 1e-5);
    report("xent_loss_only_matches", sh, hl[0] == hl[1] ? 0.0 : 1.0, TOL_EXACT);
    report("xent_dx", sh, zt_dev_err_bf16(gdx, dx, N * d), TOL_BF16);
    // dlogits rounded to bf16 before the dW product
    report("xent_dw_f32acc", sh, zt_dev_err_f32(gdw, dw, V * d), TOL_BF16);
    void *fr[] = {x, w, tg, dx, dw0, dw};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gx, gw, gdx, gdw, gtg, gloss};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// ---- optimizer, reductions, element-wise --------------------------------------------------------------
static void test_adamw(int64_t n) {
    char sh[64];
    snprintf(sh, sizeof sh, "n%lld", (long long)n);
    float *p = zt_host_normal(n, 1.0f, seed(), 0), *g = zt_host_normal(n, 0.1f, seed(), 0);
    float *m = zt_host_normal(n, 0.01f, seed(), 0), *v = zt_host_uniform(n, 0.0f, 1e-3f, seed(), 0);
    float *gp = zt_dev_f32(p, n), *gg = zt_dev_f32(g, n), *gm = zt_dev_f32(m, n), *gv = zt_dev_f32(v, n);
    zt_bf16 *gpb = zt_dev_bf16_nan(n);
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    const int64_t t = 7;
    zt_cpu_ops.adamw(p, g, m, v, n, lr, b1, b2, eps, wd, t);
    zt_cuda_adamw(NULL, gp, gpb, gg, gm, gv, n, lr, b1, b2, eps, wd, t);
    report("adamw_p", sh, zt_dev_err_f32(gp, p, n), TOL_F32);
    report("adamw_m", sh, zt_dev_err_f32(gm, m, n), TOL_F32);
    report("adamw_v", sh, zt_dev_err_f32(gv, v, n), TOL_F32);
    float *pb = zt_host_copy(p, n);
    for (int64_t i = 0; i < n; i++) pb[i] = zt_bf16_round(pb[i]);
    report("adamw_p_bf16_copy", sh, zt_dev_err_bf16(gpb, pb, n), TOL_BF16);
    void *fr[] = {p, g, m, v, pb};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gp, gg, gm, gv, gpb};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

static void test_reductions(zt_cuda_ctx *c, int64_t n) {
    char sh[64];
    snprintf(sh, sizeof sh, "n%lld", (long long)n);
    float *x = zt_host_normal(n, 1.0f, seed(), 0), *y = zt_host_normal(n, 1.0f, seed(), 0);
    float *gx = zt_dev_f32(x, n), *gy = zt_dev_f32(y, n);
    double ref = zt_cpu_ops.sumsq(x, n), got[2];
    double *gs = zt_cuda_malloc(2 * sizeof(double));
    zt_cuda_sumsq(c, NULL, gs, gx, n);
    zt_cuda_sumsq(c, NULL, gs + 1, gx, n);
    zt_cuda_memcpy_d2h(got, gs, sizeof got);
    report("sumsq", sh, isfinite(got[0]) ? fabs(got[0] - ref) / ref : INFINITY, 1e-12);
    report("sumsq_deterministic", sh, got[0] == got[1] ? 0.0 : 1.0, TOL_EXACT);

    // fp32 add and scale: the same single rounding as the CPU
    float *sum = zt_host_buf(n);
    zt_cpu_ops.add(sum, x, y, n);
    float *gsum = zt_dev_f32_nan(n);
    zt_cuda_add(NULL, gsum, gx, gy, ZT_F32, n);
    report("add_f32", sh, zt_dev_err_f32(gsum, sum, n), TOL_EXACT);
    zt_cpu_ops.scale(sum, 0.37f, n);
    zt_cuda_scale(NULL, gsum, ZT_F32, 0.37f, n);
    report("scale_f32", sh, zt_dev_err_f32(gsum, sum, n), TOL_EXACT);
    // bf16 add in place (y = a + y) and scale: fp32 arithmetic, one rounding
    for (int64_t i = 0; i < n; i++) {
        x[i] = zt_bf16_round(x[i]);
        y[i] = zt_bf16_round(y[i]);
    }
    zt_bf16 *bx = zt_dev_bf16(x, n), *by = zt_dev_bf16(y, n);
    for (int64_t i = 0; i < n; i++) sum[i] = zt_bf16_round(x[i] + y[i]);
    zt_cuda_add(NULL, by, bx, by, ZT_BF16, n);
    report("add_bf16_inplace", sh, zt_dev_err_bf16(by, sum, n), TOL_EXACT);
    for (int64_t i = 0; i < n; i++) sum[i] = zt_bf16_round(sum[i] * 0.37f);
    zt_cuda_scale(NULL, by, ZT_BF16, 0.37f, n);
    report("scale_bf16", sh, zt_dev_err_bf16(by, sum, n), TOL_EXACT);
    // casts
    float *x32 = zt_host_normal(n, 3.0f, seed(), 0), *xr = zt_host_copy(x32, n);
    for (int64_t i = 0; i < n; i++) xr[i] = zt_bf16_round(xr[i]);
    float *g32 = zt_dev_f32(x32, n), *back = zt_dev_f32_nan(n);
    zt_bf16 *gb = zt_dev_bf16_nan(n);
    zt_cuda_f32_to_bf16(gb, g32, n, NULL);
    report("cast_f32_to_bf16", sh, zt_dev_err_bf16(gb, xr, n), TOL_EXACT);
    zt_cuda_bf16_to_f32(back, gb, n, NULL);
    report("cast_bf16_to_f32", sh, zt_dev_err_f32(back, xr, n), TOL_EXACT);
    void *fr[] = {x, y, sum, x32, xr};
    for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) free(fr[i]);
    void *gf[] = {gx, gy, gs, gsum, bx, by, g32, back, gb};
    for (size_t i = 0; i < sizeof gf / sizeof gf[0]; i++) zt_cuda_free(gf[i]);
}

// The tiled attention (the GPU layer's default): the GEMM path's shapes, a length that is not
// a multiple of the 64-row tile, many documents with one-token documents at tile edges, and
// S = 4096 with few heads (the CPU execution of the CUDA model is slow).
static void test_attention_tiled_all(zt_cuda_ctx *c, int quick) {
    test_attention_scratch();
    test_attention_tiled(c, 2, 128, 8, 2, 128, 0);
    test_attention_tiled(c, 2, 128, 8, 2, 128, 1);
    test_attention_tiled(c, 1, 16, 4, 2, 16, 0);
    test_attention_tiled(c, 2, 33, 4, 1, 8, 0);
    test_attention_tiled(c, 2, 40, 4, 2, 16, 1);
    test_attention_tiled(c, 3, 33, 4, 1, 8, 1);
    test_attention_tiled(c, 2, 1000, 4, 2, 64, 0);
    test_attention_tiled(c, 2, 1000, 4, 2, 64, 2);
    // head_dim 256 (Qwen3.5's gated full attention; bf16 tiles in shared memory): S across the
    // 64-row tile edges, documents, many documents (one-token documents at tile edges), GQA;
    // and 192, the 256-wide kernels with columns left over
    test_attention_tiled(c, 1, 130, 4, 2, 256, 0);
    test_attention_tiled(c, 2, 130, 4, 2, 256, 1);
    test_attention_tiled(c, 2, 300, 2, 1, 256, 2);
    test_attention_tiled(c, 1, 70, 2, 1, 192, 1);
    if (!quick) {
        test_attention_tiled(c, 1, 256, 16, 2, 64, 0);  // GQA ratio 8 as Qwen3-32B
        test_attention_tiled(c, 1, 4096, 2, 1, 64, 0);
        test_attention_tiled(c, 2, 4096, 2, 1, 64, 2);
    }
    // a rank's held rows of a zig-zag split (context parallelism) at C = 1, 2, 3: S = 151 leaves
    // uneven chunks and padding rows at C = 2 and 3, held tiles straddle the rank's two chunks
    attention_rows_check(c, ATT_TILED, 2, 151, 4, 2, 64, 3);
    attention_rows_check(c, ATT_TILED, 1, 100, 2, 1, 32, 0);
    if (!quick) attention_rows_check(c, ATT_TILED, 1, 151, 2, 1, 256, 2);
}

// The tensor-core attention (the layers' tiled path where head_dim % 16 == 0, <= 128): lengths
// inside one tile, crossing tile edges (16, 33, 40, 128, 256, 1000), head_dim 16, 64, 128, GQA
// ratios 2, 4, 8, packed documents (one-token documents at tile edges, many documents).
static void test_attention_tc_all(zt_cuda_ctx *c, int quick) {
    test_attention_tc(c, 2, 128, 8, 2, 128, 0);
    test_attention_tc(c, 2, 128, 8, 2, 128, 1);
    test_attention_tc(c, 1, 16, 4, 2, 16, 0);
    test_attention_tc(c, 2, 33, 4, 1, 64, 0);
    test_attention_tc(c, 2, 40, 4, 2, 16, 1);
    test_attention_tc(c, 3, 33, 4, 1, 128, 1);
    test_attention_tc(c, 1, 256, 8, 1, 64, 2);  // GQA ratio 8 as Qwen3-32B, many documents
    test_attention_tc(c, 2, 1000, 4, 2, 64, 0);
    test_attention_tc(c, 2, 1000, 4, 2, 64, 2);
    test_attention_tc(c, 1, 1000, 2, 1, 128, 2);
    if (!quick) test_attention_tc(c, 1, 4096, 2, 1, 128, 2);
    attention_rows_check(c, ATT_TC, 2, 151, 4, 2, 64, 3);  // held rows, as the tiled ones'
    attention_rows_check(c, ATT_TC, 1, 100, 4, 1, 128, 0);
    if (!quick) attention_rows_check(c, ATT_TC, 1, 300, 4, 2, 64, 2);
}

int main(int argc, char **argv) {
    zt_skip_without_device();
    char dev[256];
    zt_cuda_device_describe(dev, sizeof dev);
    printf("test_cuda_ops on %s\n", dev);
    // --tiled / --tc: only that attention's shapes, the quick ones (mutate.py's rows) or with --full
    // all of them; --no-tiles: everything but those two attentions (the CPU execution of CUDA runs
    // the three as separate tests, so no shape runs twice and they can run side by side)
    int quick = 0, tiled_only = 0, tc_only = 0, full = 0, no_tiles = 0;
    for (int i = 1; i < argc; i++) {
        quick |= !strcmp(argv[i], "--quick");
        tiled_only |= !strcmp(argv[i], "--tiled");
        tc_only |= !strcmp(argv[i], "--tc");
        full |= !strcmp(argv[i], "--full");
        no_tiles |= !strcmp(argv[i], "--no-tiles");
    }
    zt_cuda_ctx *c = zt_cuda_ctx_create();
    double t0 = zt_now();
    const char *cudnn_skip = "not run (--tiled / --tc)";
    if (tiled_only) {
        test_attention_tiled_all(c, !full);
        goto done;
    }
    if (tc_only) {
        test_attention_tc_all(c, !full);
        goto done;
    }

    // Shapes with aligned leading dimensions first (the layouts the model uses) ...
    test_matmul(c, 257, 384, 320);
    test_rmsnorm(c, 300, 5120);     // hidden-size rows
    test_rmsnorm(c, 16384, 128);    // per-head q/k norm
    test_rope(2, 64, 8, 128, 1e6, 0);
    test_rope(1, 4096, 1, 128, 1e6, 0);  // long table: angles up to 4095 rad
    test_rope_yarn(4096, 128, 1e6, 4.0, 32768, 0);  // Qwen3's published YaRN setting
    test_rope_yarn(300, 32, 1e4, 16.0, 4096, 1);    // no truncation: fractional ramp ends
    test_swiglu(1 << 20);
    test_embedding(4096, 256, 1000);
    test_attention(c, 2, 128, 8, 2, 128, 0);
    if (!quick) test_attention(c, 1, 256, 16, 2, 64, 0);  // GQA ratio 8 as Qwen3-32B
    test_xent(c, 300, 256, 5000, 64);  // 5 chunks, the last ragged
    test_adamw((1 << 20) + 5);
    test_reductions(c, (1 << 22) + 3);
    // ... then odd shapes (vector-path fallbacks, unaligned leading dimensions).
    // Kept last: a missing cuBLASLt algorithm is fatal and would hide later checks.
    test_rmsnorm(c, 77, 100);
    test_swiglu((1 << 16) + 3);
    test_embedding(333, 36, 97);
    test_matmul(c, 33, 40, 24);
    test_attention(c, 1, 16, 4, 2, 16, 0);  // tests/golden/tiny_untied_gqa attention shape
    test_attention(c, 2, 33, 4, 1, 8, 0);
    // Packed documents (supervised data, isolated): RoPE by document position, attention
    // inside each document. Tiny shapes; S = 40 puts a document across the warp's 32 keys.
    test_rope(3, 40, 4, 64, 1e6, 1);
    test_attention(c, 2, 40, 4, 2, 16, 1);
    test_attention(c, 3, 33, 4, 1, 8, 1);
    if (!no_tiles) {
        test_attention_tiled_all(c, quick);
        test_attention_tc_all(c, quick);
    }
    test_xent(c, 37, 48, 1003, 8);
    // The optional cuDNN SDPA path (not the default attention; see docs/cuda.md).
    cudnn_skip = cudnn_skip_reason();
    if (cudnn_skip) {
        printf("RESULT op=cudnn_attention shape=- SKIPPED (%s)\n", cudnn_skip);
        g_nskip++;
    } else {
        test_cudnn_attention(c, 2, 128, 8, 2, 128);
        if (!quick) {
            test_cudnn_attention(c, 1, 256, 16, 2, 64);  // GQA ratio 8 as Qwen3-32B
            test_cudnn_attention(c, 2, 100, 16, 2, 64);  // GQA 8, S not a multiple of 64
            test_cudnn_attention(c, 1, 16, 4, 2, 16);    // tiny_untied_gqa attention shape
            test_cudnn_attention(c, 2, 33, 4, 1, 16);    // odd S, one KV head
        }
        // packed documents (issue 37): cuDNN's variable-length batch; one-token documents, a
        // document across 64-key tiles, GQA 4 and 8, S not a multiple of 64
        test_cudnn_attention_docs(c, 3, 40, 4, 1, 16, 1);
        test_cudnn_attention_docs(c, 2, 300, 8, 2, 64, 2);
        if (!quick) {
            test_cudnn_attention_docs(c, 2, 1024, 16, 2, 128, 2);
            test_cudnn_attention_docs(c, 1, 2048, 64, 8, 128, 2);  // Qwen3-32B's heads
        }
    }
done:
    zt_cuda_sync(NULL, "test_cuda_ops");
    int64_t plans, hits, misses;
    zt_cuda_ctx_plan_stats(c, &plans, &hits, &misses);
    zt_cuda_ctx_destroy(c);

    printf("\n%-32s %-28s %11s %9s  %s\n", "op", "shape", "rel err", "tol", "status");
    for (int i = 0; i < g_nres; i++)
        printf("%-32s %-28s %11.3e %9.1e  %s\n", g_res[i].op, g_res[i].shape, g_res[i].err, g_res[i].tol,
               g_res[i].ok ? "ok" : "FAIL");
    printf("matmul plans cached: %lld (hits %lld, misses %lld); %.1f s\n", (long long)plans, (long long)hits,
           (long long)misses, zt_now() - t0);
    if (cudnn_skip) printf("cuDNN SDPA attention: SKIPPED (%s)\n", cudnn_skip);
    if (g_nskip)
        printf("%d passed, %d failed, %d skipped\n", g_nres - g_nfail, g_nfail, g_nskip);
    else
        printf("%d passed, %d failed\n", g_nres - g_nfail, g_nfail);
    return g_nfail ? 1 : 0;
}
