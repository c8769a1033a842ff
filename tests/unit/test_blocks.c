// The CPU blocks (model/blocks.c) against an independent naive double-precision decoder layer:
// attention block + MLP block, in two option sets: Qwen3's (w norms, full RoPE, no output gate) and
// Qwen3.5's ((1 + w) norms, RoPE on the first rd < D dims, q_proj's per-head gate rows and
// o(att * sigmoid(gate))), both with GQA. Forward: the layer's output against the naive one (max-norm
// relative error <= 1e-5). Backward: the blocks' gradients of L = sum(r * y) for the layer input and a
// sample of every weight against central finite differences of the naive double forward (step 1e-3,
// relative error <= 1e-4; fp32 analytic gradients). And the shape check both families' CPU create run
// (model/context.c zt_context_bind_check): blocks of 1 token and a split that does not fit are refused.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/ops.h"
#include "model/blocks.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"
#include "tests/support/test_util.h"

enum { B = 2, S = 5, DM = 16, H = 4, HKV = 2, HD = 8, F = 24, N = B * S };
enum { P_IN, P_Q, P_K, P_V, P_O, P_QN, P_KN, P_POST, P_GATE, P_UP, P_DOWN, P_COUNT };

typedef struct {
    int gate, one_plus;
    int64_t rd;
    double theta;
    float *p[P_COUNT];
    int64_t n[P_COUNT];
} layer;

static zt_rng rng;

// ---- the naive layer, in double ----------------------------------------------------------------------

static void nrms(const double *x, const float *w, int one_plus, int64_t rows, int64_t d, double *y) {
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += x[r * d + i] * x[r * d + i];
        const double s = 1.0 / sqrt(ss / (double)d + 1e-6);
        for (int64_t i = 0; i < d; i++) y[r * d + i] = x[r * d + i] * s * ((one_plus ? 1.0 : 0.0) + w[i]);
    }
}

static void nmat(const double *x, const float *w, int64_t M, int64_t K, int64_t Nout, double *y) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t o = 0; o < Nout; o++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += x[m * K + k] * w[o * K + k];
            y[m * Nout + o] = s;
        }
}

// rotate_half RoPE on the first rd dims of each head, angle pos * theta^(-2i/rd)
static void nrope(double *x, int64_t nh, int64_t rd, double theta) {
    for (int64_t t = 0; t < N; t++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < rd / 2; i++) {
                const double ang = (double)(t % S) * pow(theta, -2.0 * (double)i / (double)rd);
                double *v = x + (t * nh + h) * HD;
                const double a = v[i], b = v[i + rd / 2];
                v[i] = a * cos(ang) - b * sin(ang);
                v[i + rd / 2] = b * cos(ang) + a * sin(ang);
            }
}

static double nsig(double x) { return 1.0 / (1.0 + exp(-x)); }

static void naive_layer(const layer *L, const double *x, double *y) {
    double *ln = calloc(N * DM, sizeof(double)), *qg = calloc(N * H * 2 * HD, sizeof(double));
    double *q = calloc(N * H * HD, sizeof(double)), *g = calloc(N * H * HD, sizeof(double));
    double *k = calloc(N * HKV * HD, sizeof(double)), *v = calloc(N * HKV * HD, sizeof(double));
    double *att = calloc(N * H * HD, sizeof(double)), *mid = calloc(N * DM, sizeof(double));
    double *gt = calloc(N * F, sizeof(double)), *up = calloc(N * F, sizeof(double));
    nrms(x, L->p[P_IN], L->one_plus, N, DM, ln);
    nmat(ln, L->p[P_Q], N, DM, H * HD * (L->gate ? 2 : 1), qg);
    for (int64_t i = 0; i < N * H; i++)
        for (int64_t j = 0; j < HD; j++) {
            q[i * HD + j] = L->gate ? qg[i * 2 * HD + j] : qg[i * HD + j];
            if (L->gate) g[i * HD + j] = qg[i * 2 * HD + HD + j];
        }
    nmat(ln, L->p[P_K], N, DM, HKV * HD, k);
    nmat(ln, L->p[P_V], N, DM, HKV * HD, v);
    nrms(q, L->p[P_QN], L->one_plus, N * H, HD, q);
    nrms(k, L->p[P_KN], L->one_plus, N * HKV, HD, k);
    nrope(q, H, L->rd, L->theta);
    nrope(k, HKV, L->rd, L->theta);
    for (int64_t b = 0; b < B; b++)  // causal GQA softmax attention, scale 1/sqrt(D)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                const int64_t kh = h / (H / HKV);
                double sc[S], mx = -1e300, sum = 0;
                for (int64_t j = 0; j <= i; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < HD; e++)
                        s += q[((b * S + i) * H + h) * HD + e] * k[((b * S + j) * HKV + kh) * HD + e];
                    sc[j] = s / sqrt((double)HD);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int64_t j = 0; j <= i; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int64_t e = 0; e < HD; e++) {
                    double o = 0;
                    for (int64_t j = 0; j <= i; j++) o += sc[j] / sum * v[((b * S + j) * HKV + kh) * HD + e];
                    att[((b * S + i) * H + h) * HD + e] = L->gate ? o * nsig(g[((b * S + i) * H + h) * HD + e]) : o;
                }
            }
    nmat(att, L->p[P_O], N, H * HD, DM, mid);
    for (int64_t i = 0; i < N * DM; i++) mid[i] += x[i];
    nrms(mid, L->p[P_POST], L->one_plus, N, DM, ln);
    nmat(ln, L->p[P_GATE], N, DM, F, gt);
    nmat(ln, L->p[P_UP], N, DM, F, up);
    for (int64_t i = 0; i < N * F; i++) gt[i] = gt[i] * nsig(gt[i]) * up[i];
    nmat(gt, L->p[P_DOWN], N, F, DM, y);
    for (int64_t i = 0; i < N * DM; i++) y[i] += mid[i];
    free(ln), free(qg), free(q), free(g), free(k), free(v), free(att), free(mid), free(gt), free(up);
}

// L = sum(r * y) of the naive layer on x (fp32 values read in double)
static double naive_loss(const layer *L, const float *x, const float *r) {
    double xd[N * DM], y[N * DM], s = 0;
    for (int64_t i = 0; i < N * DM; i++) xd[i] = x[i];
    naive_layer(L, xd, y);
    for (int64_t i = 0; i < N * DM; i++) s += r[i] * y[i];
    return s;
}

// ---- the blocks -------------------------------------------------------------------------------------

static float *rnd(int64_t n, double s, double mean) {
    float *p = zt_xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = (float)(mean + s * zt_rng_normal(&rng));
    return p;
}
static float *zf(int64_t n) { return zt_xcalloc((size_t)n, sizeof(float)); }

static void run_case(const char *name, int gate, int one_plus, int64_t rd) {
    layer L = {.gate = gate, .one_plus = one_plus, .rd = rd, .theta = 10000.0};
    const int64_t nq = H * HD * (gate ? 2 : 1);
    const int64_t n[P_COUNT] = {DM, nq * DM, HKV * HD * DM, HKV * HD * DM, DM * H * HD, HD, HD, DM, F * DM, F * DM,
                                DM * F};
    const double norm_mean = one_plus ? 0.0 : 1.0;  // the norm's effective weight near 1 either way
    for (int i = 0; i < P_COUNT; i++) {
        L.n[i] = n[i];
        const int is_norm = i == P_IN || i == P_QN || i == P_KN || i == P_POST;
        L.p[i] = is_norm ? rnd(n[i], 0.2, norm_mean) : rnd(n[i], 0.3, 0.0);
    }
    float *x = rnd(N * DM, 1.0, 0.0), *r = rnd(N * DM, 1.0, 0.0);
    float cosr[S * HD / 2], sinr[S * HD / 2];
    zt_rope_table(cosr, sinr, S, rd, L.theta);
    float *w1 = zf(DM);
    zt_block_env e = {.ops = &zt_cpu_ops, .eps = 1e-6f, .norm_one_plus = one_plus, .w1 = w1};
    zt_attn_shape s = {.B = B, .S = S, .d = DM, .H = H, .Hkv = HKV, .D = HD, .rd = rd, .out_gate = gate,
                       .rope_cos = cosr, .rope_sin = sinr, .rot = zf(N * H * rd)};
    zt_attn_params aw = {L.p[P_IN], L.p[P_Q], L.p[P_K], L.p[P_V], L.p[P_O], L.p[P_QN], L.p[P_KN]};
    zt_mlp_params mw = {L.p[P_POST], L.p[P_GATE], L.p[P_UP], L.p[P_DOWN]};
    float *g[P_COUNT];
    for (int i = 0; i < P_COUNT; i++) g[i] = zf(n[i]);
    zt_attn_grads ag = {g[P_IN], g[P_Q], g[P_K], g[P_V], g[P_O], g[P_QN], g[P_KN]};
    zt_mlp_grads mg = {g[P_POST], g[P_GATE], g[P_UP], g[P_DOWN]};
    const int64_t hd = N * H * HD, kd = N * HKV * HD;
    zt_attn_acts aa = {zf(N * DM), zf(N), zf(hd), zf(kd), zf(hd), zf(kd), zf(kd), zf(N * H), zf(N * HKV),
                       zf(B * H * S * 2), zf(hd), zf(2 * hd), zf(hd), zf(hd)};
    zt_mlp_acts ma = {zf(N * DM), zf(N), zf(N * F), zf(N * F), zf(N * F)};
    zt_attn_work aws = {zf(N * DM), zf(hd), zf(hd), zf(kd), zf(kd), zf(hd), zf(kd), zf(hd), zf(hd), zf(2 * hd)};
    zt_mlp_work mws = {zf(N * F), zf(N * F), zf(N * F), zf(N * DM)};
    float *mid = zf(N * DM), *y = zf(N * DM), *dmid = zf(N * DM), *dx = zf(N * DM);

    zt_block_attention_fwd(&e, &s, &aw, &aa, x, mid);
    zt_block_mlp_fwd(&e, &mw, &ma, mid, y, N, DM, F);
    double xd[N * DM], yd[N * DM];
    for (int64_t i = 0; i < N * DM; i++) xd[i] = x[i];
    naive_layer(&L, xd, yd);
    double md = 0, mb = 0;
    for (int64_t i = 0; i < N * DM; i++) {
        md = fmax(md, fabs(y[i] - yd[i]));
        mb = fmax(mb, fabs(yd[i]));
    }
    CHECK(md / mb <= 1e-5, "%s forward vs naive: rel err %.3e", name, md / mb);
    printf("  %s forward vs naive double: rel err %.2e\n", name, md / mb);

    zt_block_mlp_bwd(&e, &mw, &mg, &ma, &mws, mid, r, dmid, N, DM, F);
    zt_block_attention_bwd(&e, &s, &aw, &ag, &aa, &aws, x, dmid, dx);

    // central differences of the naive loss: the input and up to 24 entries of each weight
    static const char *const pname[P_COUNT] = {"input_norm", "q_proj", "k_proj", "v_proj", "o_proj", "q_norm",
                                               "k_norm", "post_norm", "gate_proj", "up_proj", "down_proj"};
    for (int t = -1; t < P_COUNT; t++) {
        float *v = t < 0 ? x : L.p[t];
        const float *an = t < 0 ? dx : g[t];
        const int64_t nv = t < 0 ? N * DM : n[t];
        double mdiff = 0, mnum = 1e-8;
        for (int c = 0; c < 24; c++) {
            const int64_t i = nv <= 24 ? c % nv : (int64_t)zt_rng_below(&rng, (uint64_t)nv);
            const float old = v[i];
            const double h = 1e-3;  // on a float: the step taken is what the float moved
            v[i] = (float)(old + h);
            const double hp = (double)v[i] - old, lp = naive_loss(&L, x, r);
            v[i] = (float)(old - h);
            const double hm = old - (double)v[i], lm = naive_loss(&L, x, r);
            v[i] = old;
            const double num = (lp - lm) / (hp + hm);
            mdiff = fmax(mdiff, fabs(num - an[i]));
            mnum = fmax(mnum, fabs(num));
        }
        const char *what = t < 0 ? "input x" : pname[t];
        CHECK(mdiff / mnum <= 1e-4, "%s d/d(%s) vs finite differences: rel err %.3e", name, what, mdiff / mnum);
        printf("  %s d/d(%-10s) vs finite differences: rel err %.2e\n", name, what, mdiff / mnum);
    }
}

static void refuses(const char *name, void *m, const char *want) {
    CHECK(m == NULL && strstr(zt_errmsg(), want), "%s: created %p, message \"%s\"", name, m, zt_errmsg());
    if (m == NULL) printf("  %s refused: %s\n", name, zt_errmsg());
}

static void bind_checks(void) {
    zt_model_config c;
    memset(&c, 0, sizeof c);
    int32_t index[4] = {0, 1, 2, 3};
    const zt_family_context bad = {.C = 2, .rank = 0, .S = 8, .S_local = 2, .index = index};  // no callbacks
    const zt_family *fams[2] = {&zt_qwen3_family, &zt_qwen3_5_family};
    for (int f = 0; f < 2; f++) {
        refuses(fams[f]->name, fams[f]->cpu->create(&c, &zt_cpu_ops, 1, 1, NULL), "need at least one block of 2");
        refuses(fams[f]->name, fams[f]->cpu->create(&c, &zt_cpu_ops, 1, 8, &bad), "does not fit blocks of 8");
    }
}

int main(void) {
    zt_rng_seed(&rng, 48);
    bind_checks();
    run_case("qwen3 options (w norms, full RoPE, no gate)", 0, 0, HD);
    run_case("qwen3.5 options ((1+w) norms, RoPE on 4 of 8, gate)", 1, 1, 4);
    TEST_END();
}
