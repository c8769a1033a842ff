// cudaemu: standalone test of the cuBLASLt emulation (tests/cudaemu/cublaslt.cpp). Every product
// is checked against a double-precision reference written from the column-major definition, and
// every rejection against its expected status. Exit 0: pass; 1: fail, each failure printed.
//
// Tolerances (relative max-norm, max|D - ref| / max|ref|): bf16 output 1e-2 (one bf16 rounding
// of D is 2^-9 relative); fp32 output 1e-5 (fp32 accumulation over k <= 96 of values in [-1, 1]).
// Inputs are exactly representable in their type, so the reference sees the same operands.
// Padding between columns and between batch entries of A, B and C holds NaN, so reading it shows
// up in D; D's padding holds a sentinel that must survive.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "emu.h"
#include "base/bf16.h"

static int g_failures = 0;
static int g_checks = 0;

__attribute__((format(printf, 2, 3))) static void check(bool ok, const char *fmt, ...) {
    g_checks++;
    if (ok) return;
    g_failures++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void expect(cublasStatus_t got, cublasStatus_t want, const char *what) {
    check(got == want, "%s: got %s, want %s", what, cublasLtGetStatusName(got), cublasLtGetStatusName(want));
}

#define CKCUDA(call)                                                                                    \
    do {                                                                                                \
        cudaError_t e_ = (call);                                                                        \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "FAIL: %s: %s (%s:%d)\n", #call, cudaGetErrorName(e_), __FILE__, __LINE__); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)
#define CKLT(call) expect((call), CUBLAS_STATUS_SUCCESS, #call)

// ---- values -----------------------------------------------------------------------------------------
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float urand() {  // [-1, 1)
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}
static size_t esize(int t) { return t == CUDA_R_16BF ? 2 : 4; }

// A matrix as stored: values (as floats, exactly representable in `type`) at every element
// position, NaN (or the sentinel) elsewhere.
struct hmat {
    int type;
    int64_t rows, cols, ld, stride;
    int batch;
    std::vector<float> v;
    std::vector<char> is_elem;
    int64_t idx(int b, int64_t i, int64_t j) const { return b * stride + i + j * ld; }
    float at(int b, int64_t i, int64_t j) const { return v[(size_t)idx(b, i, j)]; }
};

static hmat make_mat(int type, int64_t rows, int64_t cols, int64_t ld, int64_t stride, int batch, float fill,
                     bool random) {
    hmat m;
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    m.ld = ld;
    m.stride = stride;
    m.batch = batch;
    int64_t span = 1;
    if (rows > 0 && cols > 0) span = (int64_t)(batch - 1) * stride + (cols - 1) * ld + rows;
    m.v.assign((size_t)span, fill);
    m.is_elem.assign((size_t)span, 0);
    for (int b = 0; b < batch; b++)
        for (int64_t j = 0; j < cols; j++)
            for (int64_t i = 0; i < rows; i++) {
                size_t x = (size_t)m.idx(b, i, j);
                if (!m.is_elem[x] && random) {
                    float r = urand();
                    m.v[x] = type == CUDA_R_16BF ? zt_bf16_to_f32(zt_f32_to_bf16(r)) : r;
                }
                m.is_elem[x] = 1;
            }
    return m;
}

static std::vector<unsigned char> encode(const hmat &m) {
    std::vector<unsigned char> out(m.v.size() * esize(m.type));
    for (size_t i = 0; i < m.v.size(); i++) {
        if (m.type == CUDA_R_16BF) {
            uint16_t h = zt_f32_to_bf16(m.v[i]);
            memcpy(&out[i * 2], &h, 2);
        } else {
            memcpy(&out[i * 4], &m.v[i], 4);
        }
    }
    return out;
}

static float decode(const std::vector<unsigned char> &bytes, int type, size_t i) {
    if (type == CUDA_R_16BF) {
        uint16_t h;
        memcpy(&h, &bytes[i * 2], 2);
        return zt_bf16_to_f32(h);
    }
    float f;
    memcpy(&f, &bytes[i * 4], 4);
    return f;
}

static void *upload(const std::vector<unsigned char> &bytes) {
    void *p = nullptr;
    CKCUDA(cudaMalloc(&p, bytes.size()));
    CKCUDA(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    return p;
}

// The alignment a pointer (and, batched, its stride) guarantees, as matmul.cu computes it.
static uint32_t align_of(const void *p, int64_t stride_bytes, int batch) {
    uintptr_t a = (uintptr_t)p;
    if (batch > 1) a |= (uintptr_t)stride_bytes;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

static cublasLtMatrixLayout_t layout(int type, int64_t rows, int64_t cols, int64_t ld, int batch, int64_t stride) {
    cublasLtMatrixLayout_t l = nullptr;
    CKLT(cublasLtMatrixLayoutCreate(&l, (cudaDataType)type, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch != 1) {
        int32_t b = batch;
        CKLT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
        CKLT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return l;
}

static cublasLtMatmulDesc_t matmul_desc(int ta, int tb) {
    cublasLtMatmulDesc_t d = nullptr;
    CKLT(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CKLT(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &a, sizeof a));
    CKLT(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &b, sizeof b));
    return d;
}

static cublasLtMatmulPreference_t preference(uint32_t aa, uint32_t ab, uint32_t ac, uint32_t ad, uint64_t ws) {
    cublasLtMatmulPreference_t p = nullptr;
    CKLT(cublasLtMatmulPreferenceCreate(&p));
    CKLT(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    CKLT(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa));
    CKLT(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab));
    CKLT(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac));
    CKLT(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad));
    return p;
}

// ---- products ---------------------------------------------------------------------------------------
enum { C_SEPARATE = 0, C_INPLACE = 1, C_BROADCAST = 2, C_OMITTED = 3 };

struct gcase {
    const char *name;
    int abt, cdt;  // A/B type, C/D type
    int ta, tb;
    int64_t m, n, k;
    int pad_a, pad_b, pad_c, pad_d;  // ld = rows + pad
    int batch;
    int sa, sb, sc, sd;  // batch stride: 0 broadcasts, 1 packed with a gap of 3 elements
    float alpha, beta;
    int c_mode;
    bool null_algo;
    bool null_stream;
};

static void run_case(cublasLtHandle_t h, cudaStream_t st, const gcase &g) {
    const int64_t ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k;
    const int64_t br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
    const int64_t lda = ar + g.pad_a, ldb = br + g.pad_b, ldd = g.m + g.pad_d;
    int64_t ldc = g.c_mode == C_BROADCAST ? 0 : g.m + g.pad_c;
    const int64_t sa = g.sa ? lda * ac + 3 : 0, sb = g.sb ? ldb * bc + 3 : 0, sd = g.sd ? ldd * g.n + 3 : 0;
    int64_t sc = g.sc ? (g.c_mode == C_BROADCAST ? g.m + 3 : ldc * g.n + 3) : 0;
    const bool inplace = g.c_mode == C_INPLACE || g.c_mode == C_OMITTED;
    if (inplace) {
        ldc = ldd;
        sc = sd;
    }
    const float qnan = nanf("");
    hmat A = make_mat(g.abt, ar, ac, lda, sa, g.batch, qnan, true);
    hmat B = make_mat(g.abt, br, bc, ldb, sb, g.batch, qnan, true);
    // C: with beta == 0 every element is NaN, which must not reach D. In place, C is D's memory:
    // its elements are the C operand and its padding D's sentinel. The broadcast C is stored as
    // one column per batch entry and described with ld 0.
    hmat C;
    if (inplace) {
        C = make_mat(g.cdt, g.m, g.n, ldd, sd, g.batch, -777.0f, g.beta != 0.0f);
        if (g.beta == 0.0f)
            for (size_t i = 0; i < C.v.size(); i++)
                if (C.is_elem[i]) C.v[i] = qnan;
    } else if (g.c_mode == C_BROADCAST) {
        C = make_mat(g.cdt, g.m, 1, g.m, sc, g.batch, qnan, g.beta != 0.0f);
        C.cols = g.n;
        C.ld = 0;
    } else {
        C = make_mat(g.cdt, g.m, g.n, ldc, sc, g.batch, qnan, g.beta != 0.0f);
    }
    hmat Dm = make_mat(g.cdt, g.m, g.n, ldd, sd, g.batch, -777.0f, false);  // every position the sentinel
    const std::vector<unsigned char> a_bytes = encode(A), b_bytes = encode(B), c_bytes = encode(C);
    const std::vector<unsigned char> d_before = inplace ? c_bytes : encode(Dm);
    void *dA = upload(a_bytes), *dB = upload(b_bytes), *dC = upload(c_bytes);
    void *dD = inplace ? dC : upload(d_before);

    cublasLtMatmulDesc_t op = matmul_desc(g.ta, g.tb);
    cublasLtMatrixLayout_t la = layout(g.abt, ar, ac, lda, g.batch, sa);
    cublasLtMatrixLayout_t lb = layout(g.abt, br, bc, ldb, g.batch, sb);
    cublasLtMatrixLayout_t ld = layout(g.cdt, g.m, g.n, ldd, g.batch, sd);
    cublasLtMatrixLayout_t lc = g.c_mode == C_INPLACE   ? ld
                                : g.c_mode == C_OMITTED ? nullptr
                                                        : layout(g.cdt, g.m, g.n, ldc, g.batch, sc);
    const size_t ce = esize(g.cdt), ae = esize(g.abt);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    const cublasLtMatmulAlgo_t *algo = nullptr;
    if (!g.null_algo) {
        cublasLtMatmulPreference_t pref =
            preference(align_of(dA, sa * (int64_t)ae, g.batch), align_of(dB, sb * (int64_t)ae, g.batch),
                       align_of(dC, sc * (int64_t)ce, g.batch), align_of(dD, sd * (int64_t)ce, g.batch), 1 << 20);
        int n = -1;
        cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, ld, pref, 1, &res, &n);
        expect(s, CUBLAS_STATUS_SUCCESS, g.name);
        check(n == 1 && res.state == CUBLAS_STATUS_SUCCESS && res.workspaceSize == 0,
              "%s: heuristic returned %d results, state %d, workspace %zu", g.name, n, (int)res.state,
              res.workspaceSize);
        cublasLtMatmulPreferenceDestroy(pref);
        algo = &res.algo;
    }
    cudaStream_t use = g.null_stream ? nullptr : st;
    cublasStatus_t s =
        cublasLtMatmul(h, op, &g.alpha, dA, la, dB, lb, &g.beta, inplace ? dD : dC, lc, dD, ld, algo, nullptr, 0, use);
    expect(s, CUBLAS_STATUS_SUCCESS, g.name);
    // The op must not depend on the descriptors after the call returns.
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    if (lc && lc != ld) cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    CKCUDA(cudaStreamSynchronize(use));
    std::vector<unsigned char> d_after(d_before.size());
    CKCUDA(cudaMemcpy(d_after.data(), dD, d_after.size(), cudaMemcpyDeviceToHost));

    // Reference from the column-major definition.
    double err = 0, scale = 0;
    int64_t nan_count = 0, bad_pad = 0;
    for (int b = 0; b < g.batch; b++)
        for (int64_t j = 0; j < g.n; j++)
            for (int64_t i = 0; i < g.m; i++) {
                double s2 = 0;
                for (int64_t p = 0; p < g.k; p++) {
                    double x = g.ta ? A.at(b, p, i) : A.at(b, i, p);
                    double y = g.tb ? B.at(b, j, p) : B.at(b, p, j);
                    s2 += x * y;
                }
                double ref = (double)g.alpha * s2;
                if (g.beta != 0.0f) ref += (double)g.beta * C.at(b, i, j);
                float got = decode(d_after, g.cdt, (size_t)Dm.idx(b, i, j));
                if (isnan(got)) nan_count++;
                err = fmax(err, fabs((double)got - ref));
                scale = fmax(scale, fabs(ref));
            }
    for (size_t i = 0; i < Dm.v.size(); i++)
        if (!Dm.is_elem[i] && memcmp(&d_after[i * ce], &d_before[i * ce], ce)) bad_pad++;
    const double tol = g.cdt == CUDA_R_16BF ? 1e-2 : 1e-5;
    const double rel = err / (scale > 0 ? scale : 1.0);
    check(nan_count == 0, "%s: %lld NaN in D", g.name, (long long)nan_count);
    check(rel <= tol, "%s: relative max-norm error %.3g > %.0e", g.name, rel, tol);
    check(bad_pad == 0, "%s: %lld bytes-elements of D's padding changed", g.name, (long long)bad_pad);
    printf("  %-44s rel err %.2e (tol %.0e)\n", g.name, rel, tol);
    CKCUDA(cudaFree(dA));
    CKCUDA(cudaFree(dB));
    CKCUDA(cudaFree(dC));
    if (!inplace) CKCUDA(cudaFree(dD));
}

static void product_cases(cublasLtHandle_t h, cudaStream_t st) {
    static char names[256][64];
    int ni = 0;
    const int types[3][2] = {{CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_32F, CUDA_R_32F}};
    const char *tn[3] = {"bf16>bf16", "bf16>f32", "f32>f32"};
    const float betas[3] = {0.0f, 1.0f, 0.5f};
    // All four transpose combinations x three type combinations x beta in {0, 1, 0.5}; ld > rows
    // everywhere, alpha != 1, C != D (out of place, its own ld).
    for (int t = 0; t < 3; t++)
        for (int tr = 0; tr < 4; tr++)
            for (int bi = 0; bi < 3; bi++) {
                gcase g = {};
                snprintf(names[ni], sizeof names[ni], "%s op%c%c beta=%g", tn[t], tr & 1 ? 'T' : 'N',
                         tr & 2 ? 'T' : 'N', (double)betas[bi]);
                g.name = names[ni++];
                g.abt = types[t][0];
                g.cdt = types[t][1];
                g.ta = tr & 1;
                g.tb = (tr >> 1) & 1;
                g.m = 13;
                g.n = 7;
                g.k = 19;
                g.pad_a = 3;
                g.pad_b = 2;
                g.pad_c = 5;
                g.pad_d = 1;
                g.batch = 1;
                g.alpha = 1.5f;
                g.beta = betas[bi];
                g.c_mode = C_SEPARATE;
                run_case(h, st, g);
            }
    // Strided batches, stride 0 broadcasting A or B, in place, C broadcast (ld 0), omitted Cdesc,
    // the implicit heuristic, the NULL stream, a larger product.
    struct extra {
        const char *name;
        int t, ta, tb, m, n, k, batch, sa, sb, sc, sd, c_mode;
        float alpha, beta;
        bool null_algo, null_stream;
    } ex[] = {
        {"batch 3 strided, all strides", 0, 1, 0, 9, 11, 17, 3, 1, 1, 1, 1, C_SEPARATE, 0.75f, 0.5f, false, false},
        {"batch 3, A stride 0 (broadcast)", 0, 0, 1, 9, 11, 17, 3, 0, 1, 1, 1, C_SEPARATE, 1.25f, 1.0f, false, false},
        {"batch 3, B stride 0 (broadcast)", 1, 1, 1, 9, 11, 17, 3, 1, 0, 1, 1, C_SEPARATE, -0.5f, 0.5f, false, false},
        {"batch 4 f32, A stride 0, beta 0", 2, 0, 0, 6, 5, 8, 4, 0, 1, 1, 1, C_SEPARATE, 2.0f, 0.0f, false, false},
        {"batch 2, C stride 0 (one C)", 1, 0, 1, 7, 6, 5, 2, 1, 1, 0, 1, C_SEPARATE, 1.0f, 1.0f, false, false},
        {"in place C == D, beta 1 (dW += ..)", 0, 1, 0, 12, 10, 16, 1, 0, 0, 0, 0, C_INPLACE, 1.0f, 1.0f, false, false},
        {"in place C == D, beta 0", 1, 0, 0, 12, 10, 16, 1, 0, 0, 0, 0, C_INPLACE, 1.0f, 0.0f, false, false},
        {"in place batch 2, beta 0.5", 2, 1, 1, 5, 9, 7, 2, 1, 1, 1, 1, C_INPLACE, 1.5f, 0.5f, false, false},
        {"Cdesc omitted (= Ddesc), C == D", 0, 0, 1, 8, 8, 8, 1, 0, 0, 0, 0, C_OMITTED, 1.0f, 1.0f, false, false},
        {"C ld 0 (column broadcast)", 1, 0, 0, 10, 6, 4, 1, 0, 0, 0, 0, C_BROADCAST, 1.0f, 1.0f, false, false},
        {"C ld 0, batch 2", 0, 1, 0, 10, 6, 4, 2, 1, 1, 1, 1, C_BROADCAST, 0.5f, 2.0f, false, false},
        {"algo NULL (implicit heuristic)", 1, 1, 0, 11, 9, 13, 1, 0, 0, 0, 0, C_SEPARATE, 1.0f, 0.5f, true, false},
        {"NULL stream", 2, 0, 1, 11, 9, 13, 1, 0, 0, 0, 0, C_SEPARATE, 1.0f, 1.0f, false, true},
        {"larger 64x48x96 batch 2", 0, 1, 0, 64, 48, 96, 2, 1, 1, 1, 1, C_SEPARATE, 1.0f, 1.0f, false, false},
        {"larger f32 64x48x96", 2, 0, 1, 64, 48, 96, 1, 0, 0, 0, 0, C_SEPARATE, 0.25f, 0.0f, false, false},
        {"m = 1, n = 1", 1, 1, 0, 1, 1, 33, 1, 0, 0, 0, 0, C_SEPARATE, 1.0f, 1.0f, false, false},
    };
    for (const extra &e : ex) {
        gcase g = {};
        snprintf(names[ni], sizeof names[ni], "%s %s op%c%c", tn[e.t], e.name, e.ta ? 'T' : 'N', e.tb ? 'T' : 'N');
        g.name = names[ni++];
        g.abt = types[e.t][0];
        g.cdt = types[e.t][1];
        g.ta = e.ta;
        g.tb = e.tb;
        g.m = e.m;
        g.n = e.n;
        g.k = e.k;
        g.pad_a = 2;
        g.pad_b = 1;
        g.pad_c = 3;
        g.pad_d = 2;
        g.batch = e.batch;
        g.sa = e.sa;
        g.sb = e.sb;
        g.sc = e.sc;
        g.sd = e.sd;
        g.c_mode = e.c_mode;
        g.alpha = e.alpha;
        g.beta = e.beta;
        g.null_algo = e.null_algo;
        g.null_stream = e.null_stream;
        run_case(h, st, g);
    }
}

// ---- rejections -------------------------------------------------------------------------------------
// A valid small problem (D = A B, op NN, m 8 n 6 k 4, A/B bf16, C/D `ct`) whose pieces each case
// replaces.
struct fx {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulPreference_t pref;
    void *A, *B, *C;
    cublasLtMatmulAlgo_t algo;
    int ct;
};

static fx make_fx(cublasLtHandle_t h, int ct) {
    fx f;
    f.ct = ct;
    f.op = matmul_desc(0, 0);
    f.a = layout(CUDA_R_16BF, 8, 4, 8, 1, 0);
    f.b = layout(CUDA_R_16BF, 4, 6, 4, 1, 0);
    f.c = layout(ct, 8, 6, 8, 1, 0);
    f.pref = preference(16, 16, 16, 16, 0);
    std::vector<unsigned char> zeros(4096, 0);
    f.A = upload(zeros);  // room for offset pointers
    f.B = upload(zeros);
    f.C = upload(zeros);
    cublasLtMatmulHeuristicResult_t r;
    int n = 0;
    CKLT(cublasLtMatmulAlgoGetHeuristic(h, f.op, f.a, f.b, f.c, f.c, f.pref, 1, &r, &n));
    f.algo = r.algo;
    return f;
}

static void free_fx(fx &f) {
    cublasLtMatmulDescDestroy(f.op);
    cublasLtMatrixLayoutDestroy(f.a);
    cublasLtMatrixLayoutDestroy(f.b);
    cublasLtMatrixLayoutDestroy(f.c);
    cublasLtMatmulPreferenceDestroy(f.pref);
    CKCUDA(cudaFree(f.A));
    CKCUDA(cudaFree(f.B));
    CKCUDA(cudaFree(f.C));
}

static const float ONE = 1.0f, ZERO = 0.0f;

// The heuristic on (op, a, b, c, d) must return `want` and, unless SUCCESS, no result.
static void heur(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                 cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                 cublasStatus_t want, const char *what) {
    cublasLtMatmulHeuristicResult_t r;
    int n = -1;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, op, a, b, c, d, pref, 1, &r, &n);
    expect(s, want, what);
    if (want == CUBLAS_STATUS_SUCCESS)
        check(n == 1, "%s: %d results", what, n);
    else if (h)
        check(n == 0, "%s: returnAlgoCount %d, want 0", what, n);
}

static void mm(cublasLtHandle_t h, fx &f, cudaStream_t st, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, const void *A,
               const void *B, const void *C, void *D, const float *beta, const cublasLtMatmulAlgo_t *algo,
               cublasStatus_t want, const char *what) {
    cublasStatus_t s = cublasLtMatmul(h, op, &ONE, A, a, B, b, beta, C, c, D, d, algo, nullptr, 0, st);
    expect(s, want, what);
    (void)f;
}

static void rejection_cases(cublasLtHandle_t h, cudaStream_t st) {
    const cublasStatus_t OK = CUBLAS_STATUS_SUCCESS, IV = CUBLAS_STATUS_INVALID_VALUE, NS = CUBLAS_STATUS_NOT_SUPPORTED,
                         NI = CUBLAS_STATUS_NOT_INITIALIZED;
    fx f = make_fx(h, CUDA_R_16BF);
    // The fixture itself runs.
    mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, OK, "valid fixture");

    // Handles and NULL arguments.
    expect(cublasLtCreate(nullptr), IV, "cublasLtCreate(NULL)");
    expect(cublasLtDestroy(nullptr), IV, "cublasLtDestroy(NULL)");
    heur(nullptr, f.op, f.a, f.b, f.c, f.c, f.pref, NI, "heuristic, NULL handle");
    mm(nullptr, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, NI, "matmul, NULL handle");
    {
        cublasLtMatmulHeuristicResult_t r;
        int n = -1;
        expect(cublasLtMatmulAlgoGetHeuristic(h, f.op, f.a, f.b, f.c, f.c, f.pref, 0, &r, &n), IV,
               "heuristic, requestedAlgoCount 0");
        check(n == 0, "heuristic, requestedAlgoCount 0: returnAlgoCount %d", n);
        expect(cublasLtMatmulAlgoGetHeuristic(h, f.op, f.a, f.b, f.c, f.c, f.pref, 1, nullptr, &n), IV,
               "heuristic, NULL results");
        expect(cublasLtMatmulAlgoGetHeuristic(h, f.op, f.a, f.b, f.c, f.c, f.pref, 1, &r, nullptr), IV,
               "heuristic, NULL returnAlgoCount");
    }
    heur(h, nullptr, f.a, f.b, f.c, f.c, f.pref, IV, "heuristic, NULL operation descriptor");
    heur(h, f.op, nullptr, f.b, f.c, f.c, f.pref, IV, "heuristic, NULL Adesc");
    heur(h, f.op, f.a, f.b, f.c, nullptr, f.pref, IV, "heuristic, NULL Ddesc");
    heur(h, f.op, f.a, f.b, nullptr, f.c, f.pref, OK, "heuristic, Cdesc omitted");
    heur(h, f.op, f.a, f.b, f.c, f.c, nullptr, OK, "heuristic, NULL preference (defaults)");
    heur(h, f.op, f.a, f.a, f.c, f.c, f.pref, IV, "heuristic, layout of the wrong shape (8x4 as B)");
    mm(h, f, st, nullptr, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, IV, "matmul, NULL computeDesc");
    mm(h, f, st, f.op, f.a, f.b, f.c, nullptr, f.A, f.B, f.C, f.C, &ONE, &f.algo, IV, "matmul, NULL Ddesc");
    mm(h, f, st, f.op, f.a, f.b, f.c, f.c, nullptr, f.B, f.C, f.C, &ONE, &f.algo, IV, "matmul, NULL A");
    mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, nullptr, f.C, f.C, &ONE, &f.algo, IV, "matmul, NULL B");
    mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, nullptr, &ONE, &f.algo, IV, "matmul, NULL D");
    mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, nullptr, f.C, &ONE, &f.algo, IV, "matmul, NULL C, beta 1");
    mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, nullptr, f.C, &ZERO, &f.algo, OK,
       "matmul, NULL C, beta 0 (C unread)");
    expect(cublasLtMatmul(h, f.op, nullptr, f.A, f.a, f.B, f.b, &ONE, f.C, f.c, f.C, f.c, &f.algo, nullptr, 0, st), IV,
           "matmul, NULL alpha");
    expect(cublasLtMatmul(h, f.op, &ONE, f.A, f.a, f.B, f.b, nullptr, f.C, f.c, f.C, f.c, &f.algo, nullptr, 0, st), IV,
           "matmul, NULL beta");

    // ld < rows: accepted by cublasLtMatrixLayoutCreate (as the real library does), rejected by
    // the heuristic and by cublasLtMatmul.
    {
        cublasLtMatrixLayout_t bad = nullptr;
        expect(cublasLtMatrixLayoutCreate(&bad, CUDA_R_16BF, 8, 4, 7), OK, "layout create with ld 7 < rows 8");
        heur(h, f.op, bad, f.b, f.c, f.c, f.pref, IV, "heuristic, A ld < rows");
        mm(h, f, st, f.op, bad, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, IV, "matmul, A ld < rows");
        int64_t neg = -8;
        CKLT(cublasLtMatrixLayoutSetAttribute(bad, CUBLASLT_MATRIX_LAYOUT_LD, &neg, sizeof neg));
        heur(h, f.op, bad, f.b, f.c, f.c, f.pref, IV, "heuristic, A ld negative");
        cublasLtMatrixLayoutDestroy(bad);
        cublasLtMatrixLayout_t badd = layout(CUDA_R_16BF, 8, 6, 4, 1, 0);
        heur(h, f.op, f.a, f.b, badd, badd, f.pref, IV, "heuristic, D ld < rows");
        cublasLtMatrixLayout_t c0 = layout(CUDA_R_16BF, 8, 6, 0, 1, 0);
        heur(h, f.op, f.a, f.b, c0, f.c, f.pref, OK, "heuristic, out-of-place C ld 0 (broadcast)");
        heur(h, f.op, f.a, f.b, c0, c0, f.pref, IV, "heuristic, C == D descriptor with ld 0");
        mm(h, f, st, f.op, f.a, f.b, c0, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, IV, "matmul, C == D pointer, C ld 0");
        cublasLtMatrixLayoutDestroy(badd);
        cublasLtMatrixLayoutDestroy(c0);
    }
    // Inconsistent dimensions and batch counts.
    {
        cublasLtMatrixLayout_t b5 = layout(CUDA_R_16BF, 5, 6, 5, 1, 0);
        heur(h, f.op, f.a, b5, f.c, f.c, f.pref, IV, "heuristic, op(B) rows != op(A) cols");
        mm(h, f, st, f.op, f.a, b5, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, IV, "matmul, k mismatch");
        cublasLtMatrixLayout_t c9 = layout(CUDA_R_16BF, 9, 6, 9, 1, 0);
        heur(h, f.op, f.a, f.b, c9, c9, f.pref, IV, "heuristic, C/D rows != m");
        cublasLtMatrixLayout_t d7 = layout(CUDA_R_16BF, 8, 7, 8, 1, 0);
        heur(h, f.op, f.a, f.b, f.c, d7, f.pref, IV, "heuristic, D cols != n");
        mm(h, f, st, f.op, f.a, f.b, f.c, d7, f.A, f.B, f.C, f.A, &ONE, &f.algo, IV, "matmul, D cols != n");
        cublasLtMatrixLayout_t a2 = layout(CUDA_R_16BF, 8, 4, 8, 2, 32);
        heur(h, f.op, a2, f.b, f.c, f.c, f.pref, IV, "heuristic, batch counts differ");
        mm(h, f, st, f.op, a2, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, IV, "matmul, batch counts differ");
        int32_t zero = 0;
        CKLT(cublasLtMatrixLayoutSetAttribute(a2, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &zero, sizeof zero));
        cublasLtMatrixLayout_t b0 = layout(CUDA_R_16BF, 4, 6, 4, 1, 0), c0 = layout(CUDA_R_16BF, 8, 6, 8, 1, 0);
        CKLT(cublasLtMatrixLayoutSetAttribute(b0, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &zero, sizeof zero));
        CKLT(cublasLtMatrixLayoutSetAttribute(c0, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &zero, sizeof zero));
        heur(h, f.op, a2, b0, c0, c0, f.pref, IV, "heuristic, batch count 0");
        cublasLtMatrixLayout_t cl = layout(CUDA_R_16BF, 8, 6, 9, 1, 0);
        mm(h, f, st, f.op, f.a, f.b, cl, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, IV,
           "matmul, C == D pointer with different ld");
        for (cublasLtMatrixLayout_t l : {b5, c9, d7, a2, b0, c0, cl}) cublasLtMatrixLayoutDestroy(l);
    }
    // Type combinations outside the emulated rows of NVIDIA's table.
    {
        cublasLtMatrixLayout_t a16 = layout(CUDA_R_16F, 8, 4, 8, 1, 0), b16 = layout(CUDA_R_16F, 4, 6, 4, 1, 0);
        cublasLtMatrixLayout_t c16 = layout(CUDA_R_16F, 8, 6, 8, 1, 0);
        heur(h, f.op, a16, b16, c16, c16, f.pref, NS, "heuristic, 16F operands");
        mm(h, f, st, f.op, a16, b16, c16, c16, f.A, f.B, f.C, f.C, &ONE, &f.algo, NS, "matmul, 16F operands");
        cublasLtMatrixLayout_t b32 = layout(CUDA_R_32F, 4, 6, 4, 1, 0), a32 = layout(CUDA_R_32F, 8, 4, 8, 1, 0);
        cublasLtMatrixLayout_t c32 = layout(CUDA_R_32F, 8, 6, 8, 1, 0);
        heur(h, f.op, f.a, b32, f.c, f.c, f.pref, NS, "heuristic, A bf16 with B f32");
        heur(h, f.op, a32, b32, f.c, f.c, f.pref, NS, "heuristic, f32 operands with bf16 C/D");
        heur(h, f.op, f.a, f.b, c32, f.c, f.pref, NS, "heuristic, C f32 with D bf16");
        mm(h, f, st, f.op, f.a, f.b, c32, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, NS, "matmul, C f32 with D bf16");
        cublasLtMatrixLayout_t a8 = layout(CUDA_R_8I, 8, 4, 8, 1, 0), b8 = layout(CUDA_R_8I, 4, 6, 4, 1, 0);
        heur(h, f.op, a8, b8, c32, c32, f.pref, NS, "heuristic, 8I operands");
        cublasLtMatmulDesc_t d16, dtf32, dscale, dped;
        CKLT(cublasLtMatmulDescCreate(&d16, CUBLAS_COMPUTE_16F, CUDA_R_16F));
        CKLT(cublasLtMatmulDescCreate(&dtf32, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
        CKLT(cublasLtMatmulDescCreate(&dscale, CUBLAS_COMPUTE_32F, CUDA_R_16F));
        CKLT(cublasLtMatmulDescCreate(&dped, CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F));
        heur(h, d16, a16, b16, c16, c16, f.pref, NS, "heuristic, CUBLAS_COMPUTE_16F");
        heur(h, dtf32, a32, b32, c32, c32, f.pref, NS, "heuristic, CUBLAS_COMPUTE_32F_FAST_TF32 (not emulated)");
        heur(h, dscale, f.a, f.b, f.c, f.c, f.pref, NS, "heuristic, COMPUTE_32F with scale type 16F");
        mm(h, f, st, dscale, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, NS, "matmul, scale type 16F");
        heur(h, dped, f.a, f.b, f.c, f.c, f.pref, OK, "heuristic, CUBLAS_COMPUTE_32F_PEDANTIC");
        // An algorithm chosen for other types does not fit this call.
        cublasLtMatmulHeuristicResult_t r;
        int n = 0;
        CKLT(cublasLtMatmulAlgoGetHeuristic(h, f.op, f.a, f.b, c32, c32, f.pref, 1, &r, &n));
        mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &r.algo, IV,
           "matmul, algo chosen for f32 C/D used with bf16 C/D");
        for (cublasLtMatmulDesc_t d : {d16, dtf32, dscale, dped}) cublasLtMatmulDescDestroy(d);
        for (cublasLtMatrixLayout_t l : {a16, b16, c16, b32, a32, c32, a8, b8}) cublasLtMatrixLayoutDestroy(l);
    }
    // Descriptor settings the emulation does not offer (and a few NVIDIA does not).
    {
        struct dset {
            cublasLtMatmulDescAttributes_t attr;
            int64_t value;
            size_t size;
            cublasStatus_t want;
            const char *what;
        } ds[] = {
            {CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_RELU, 4, NS, "epilogue RELU"},
            {CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS, 4, NS, "epilogue BIAS"},
            {CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 4, NS, "epilogue GELU_AUX_BIAS"},
            {CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_DEVICE, 4, NS, "pointer mode DEVICE"},
            {CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_DEVICE_VECTOR, 4, NS,
             "pointer mode DEVICE_VECTOR"},
            {CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_T, 4, NS, "TRANSC = T"},
            {CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_CONJG, 4, NS, "TRANSA = CONJG"},
            {CUBLASLT_MATMUL_DESC_TRANSA, 7, 4, IV, "TRANSA = 7 (not an operation)"},
            {CUBLASLT_MATMUL_DESC_FILL_MODE, CUBLAS_FILL_MODE_LOWER, 4, NS, "fill mode LOWER"},
            {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, 0x1000, sizeof(void *), IV, "A scale pointer on bf16"},
            {CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, 0x1000, sizeof(void *), IV, "amax D pointer on bf16"},
            {CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, 0x1000, sizeof(void *), NS, "C scale pointer (not emulated)"},
            {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, 1, 4, NS, "A scale mode"},
        };
        for (const dset &x : ds) {
            cublasLtMatmulDesc_t d = matmul_desc(0, 0);
            CKLT(cublasLtMatmulDescSetAttribute(d, x.attr, &x.value, x.size));
            char what[128];
            snprintf(what, sizeof what, "heuristic, %s", x.what);
            heur(h, d, f.a, f.b, f.c, f.c, f.pref, x.want, what);
            snprintf(what, sizeof what, "matmul, %s", x.what);
            mm(h, f, st, d, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, x.want, what);
            cublasLtMatmulDescDestroy(d);
        }
        // Settings without effect on this product are accepted.
        cublasLtMatmulDesc_t d = matmul_desc(0, 0);
        int32_t sm = 66;
        int8_t fast = 1;
        CKLT(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm, sizeof sm));
        CKLT(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
        heur(h, d, f.a, f.b, f.c, f.c, f.pref, OK, "heuristic, SM_COUNT_TARGET and FAST_ACCUM set");
        cublasLtMatmulDescDestroy(d);
        // Layout settings.
        cublasLtMatrixLayout_t row = layout(CUDA_R_16BF, 8, 4, 8, 1, 0);
        int32_t order = CUBLASLT_ORDER_ROW;
        CKLT(cublasLtMatrixLayoutSetAttribute(row, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order));
        heur(h, f.op, row, f.b, f.c, f.c, f.pref, NS, "heuristic, A in CUBLASLT_ORDER_ROW");
        mm(h, f, st, f.op, row, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, NS, "matmul, A in ORDER_ROW");
        cublasLtMatrixLayoutDestroy(row);
        cublasLtMatrixLayout_t pa = layout(CUDA_R_16BF, 8, 4, 8, 1, 0);
        uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
        CKLT(cublasLtMatrixLayoutSetAttribute(pa, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof mode));
        heur(h, f.op, pa, f.b, f.c, f.c, f.pref, NS, "heuristic, pointer-array batch mode");
        cublasLtMatrixLayoutDestroy(pa);
    }
    // Preferences the one algorithm cannot satisfy.
    {
        cublasLtMatmulPreference_t p = preference(1, 16, 16, 16, 0);
        heur(h, f.op, f.a, f.b, f.c, f.c, p, NS, "heuristic, MIN_ALIGNMENT_A 1 < bf16 element");
        cublasLtMatmulPreferenceDestroy(p);
        p = preference(16, 16, 2, 2, 0);
        cublasLtMatrixLayout_t c32 = layout(CUDA_R_32F, 8, 6, 8, 1, 0);
        heur(h, f.op, f.a, f.b, c32, c32, p, NS, "heuristic, MIN_ALIGNMENT_C/D 2 < f32 element");
        heur(h, f.op, f.a, f.b, f.c, f.c, p, OK, "heuristic, MIN_ALIGNMENT_C/D 2 = bf16 element");
        cublasLtMatrixLayoutDestroy(c32);
        cublasLtMatmulPreferenceDestroy(p);
        p = preference(16, 16, 16, 16, 0);
        uint32_t search = CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID;
        CKLT(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &search, sizeof search));
        heur(h, f.op, f.a, f.b, f.c, f.c, p, NS, "heuristic, SEARCH_LIMITED_BY_ALGO_ID");
        cublasLtMatmulPreferenceDestroy(p);
        p = preference(16, 16, 16, 16, 0);
        uint64_t impl = ~CUBLASLT_NUMERICAL_IMPL_FLAGS_TENSOR_OP_MASK;
        CKLT(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_IMPL_MASK, &impl, sizeof impl));
        heur(h, f.op, f.a, f.b, f.c, f.c, p, NS, "heuristic, IMPL_MASK without tensor ops for bf16");
        cublasLtMatmulPreferenceDestroy(p);
    }
    // Alignment: below the element size, and below what the algorithm was chosen for.
    {
        char *A = (char *)f.A;
        mm(h, f, st, f.op, f.a, f.b, f.c, f.c, A + 1, f.B, f.C, f.C, &ONE, &f.algo, IV,
           "matmul, A misaligned below its element size");
        mm(h, f, st, f.op, f.a, f.b, f.c, f.c, A + 2, f.B, f.C, f.C, &ONE, &f.algo, IV,
           "matmul, A 2-byte aligned, algo chosen for 16");
        mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, (char *)f.C + 8, &ONE, &f.algo, IV,
           "matmul, D 8-byte aligned, algo chosen for 16");
        mm(h, f, st, f.op, f.a, f.b, f.c, f.c, A + 16, f.B, f.C, f.C, &ONE, &f.algo, OK,
           "matmul, A offset by 16, algo chosen for 16");
        mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, nullptr, OK, "matmul, algo NULL");
        mm(h, f, st, f.op, f.a, f.b, f.c, f.c, A + 2, f.B, f.C, f.C, &ONE, nullptr, OK,
           "matmul, algo NULL with A 2-byte aligned");
        // Batched: the stride decides every entry's alignment.
        cublasLtMatrixLayout_t a3 = layout(CUDA_R_16BF, 8, 4, 8, 2, 35), b3 = layout(CUDA_R_16BF, 4, 6, 4, 2, 32);
        cublasLtMatrixLayout_t c3 = layout(CUDA_R_16BF, 8, 6, 8, 2, 48);
        cublasLtMatmulHeuristicResult_t r;
        int n = 0;
        CKLT(cublasLtMatmulAlgoGetHeuristic(h, f.op, a3, b3, c3, c3, f.pref, 1, &r, &n));
        mm(h, f, st, f.op, a3, b3, c3, c3, f.A, f.B, f.C, f.C, &ONE, &r.algo, IV,
           "matmul, A batch stride 35 elements breaks the 16-byte alignment");
        for (cublasLtMatrixLayout_t l : {a3, b3, c3}) cublasLtMatrixLayoutDestroy(l);
    }
    // Algorithms and workspaces. White-box: data[3] is the workspace the algo needs (cublaslt.cpp).
    {
        cublasLtMatmulAlgo_t bogus;
        memset(&bogus, 0, sizeof bogus);
        mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &bogus, IV,
           "matmul, algo not from a heuristic");
        cublasLtMatmulAlgo_t needs = f.algo;
        needs.data[3] = 1024;
        expect(cublasLtMatmul(h, f.op, &ONE, f.A, f.a, f.B, f.b, &ONE, f.C, f.c, f.C, f.c, &needs, nullptr, 0, st), IV,
               "matmul, workspaceSizeInBytes 0 < 1024 needed");
        void *ws = nullptr;
        CKCUDA(cudaMalloc(&ws, 2048));
        expect(cublasLtMatmul(h, f.op, &ONE, f.A, f.a, f.B, f.b, &ONE, f.C, f.c, f.C, f.c, &needs, ws, 512, st), IV,
               "matmul, workspaceSizeInBytes 512 < 1024 needed");
        expect(cublasLtMatmul(h, f.op, &ONE, f.A, f.a, f.B, f.b, &ONE, f.C, f.c, f.C, f.c, &needs, ws, 1024, st), OK,
               "matmul, workspace of 1024 bytes");
        expect(cublasLtMatmul(h, f.op, &ONE, f.A, f.a, f.B, f.b, &ONE, f.C, f.c, f.C, f.c, &needs, (char *)ws + 16,
                              1024, st),
               IV, "matmul, workspace not 256-byte aligned");
        CKCUDA(cudaStreamSynchronize(st));
        CKCUDA(cudaFree(ws));
    }
    // Attribute access: ids and sizes validated, values stored as given, defaults as NVIDIA's.
    {
        cublasLtMatmulDesc_t d = matmul_desc(1, 0);
        int64_t big = 1;
        int32_t v32 = 0;
        size_t w = 0;
        expect(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &big, sizeof big), IV,
               "desc set TRANSA with 8 bytes");
        expect(cublasLtMatmulDescSetAttribute(d, (cublasLtMatmulDescAttributes_t)9, &v32, 4), IV, "desc set id 9");
        expect(cublasLtMatmulDescSetAttribute(d, (cublasLtMatmulDescAttributes_t)200, &v32, 4), IV, "desc set id 200");
        expect(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, nullptr, 4), IV, "desc set buf NULL");
        expect(cublasLtMatmulDescSetAttribute(nullptr, CUBLASLT_MATMUL_DESC_TRANSB, &v32, 4), IV,
               "desc set on NULL descriptor");
        expect(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 0, &w), OK,
               "desc get size query");
        check(w == 4, "desc get size query: %zu, want 4", w);
        expect(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 0, nullptr), IV,
               "desc get size 0, sizeWritten NULL");
        expect(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &big, 8, &w), IV,
               "desc get 8 bytes of 4");
        expect(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4, &w), IV, "desc get buf NULL");
        CKLT(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &v32, 4, &w));
        check(v32 == CUBLAS_OP_T && w == 4, "desc get TRANSA: %d (%zu bytes), want T", v32, w);
        CKLT(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_FILL_MODE, &v32, 4, nullptr));
        check(v32 == CUBLAS_FILL_MODE_FULL, "desc FILL_MODE default %d", v32);
        uint32_t ep = 0;
        CKLT(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, 4, nullptr));
        check(ep == CUBLASLT_EPILOGUE_DEFAULT, "desc EPILOGUE default %u", ep);
        CKLT(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &v32, 4, nullptr));
        check(v32 == -1, "desc BIAS_DATA_TYPE default %d", v32);
        CKLT(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &v32, 4, nullptr));
        check(v32 == CUBLAS_COMPUTE_32F, "desc COMPUTE_TYPE %d", v32);
        CKLT(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, nullptr, 0, &w));
        check(w == 1, "desc FAST_ACCUM size %zu, want 1", w);
        CKLT(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, &w));
        check(w == sizeof(void *), "desc BIAS_POINTER size %zu", w);
        cublasLtMatmulDescDestroy(d);
        expect(cublasLtMatmulDescDestroy(nullptr), OK, "desc destroy NULL");

        cublasLtMatrixLayout_t l = layout(CUDA_R_16BF, 3, 4, 5, 1, 0);
        expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &big, sizeof big), IV,
               "layout set BATCH_COUNT with 8 bytes");
        expect(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &v32, 4), IV,
               "layout set STRIDED_BATCH_OFFSET with 4 bytes");
        expect(cublasLtMatrixLayoutSetAttribute(l, (cublasLtMatrixLayoutAttribute_t)9, &v32, 4), IV, "layout set id 9");
        expect(cublasLtMatrixLayoutSetAttribute(nullptr, CUBLASLT_MATRIX_LAYOUT_LD, &big, 8), IV,
               "layout set on NULL layout");
        uint64_t rows = 0;
        int64_t ldv = 0;
        uint32_t type = 0;
        CKLT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, 8, &w));
        CKLT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ldv, 8, &w));
        CKLT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, 4, &w));
        check(rows == 3 && ldv == 5 && type == CUDA_R_16BF, "layout get rows %llu ld %lld type %u",
              (unsigned long long)rows, (long long)ldv, type);
        CKLT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &v32, 4, &w));
        check(v32 == 1, "layout BATCH_COUNT default %d", v32);
        CKLT(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &v32, 4, &w));
        check(v32 == CUBLASLT_ORDER_COL, "layout ORDER default %d", v32);
        cublasLtMatrixLayoutDestroy(l);
        expect(cublasLtMatrixLayoutDestroy(nullptr), OK, "layout destroy NULL");

        cublasLtMatmulPreference_t p = nullptr;
        CKLT(cublasLtMatmulPreferenceCreate(&p));
        uint32_t al = 0;
        uint64_t ws = 1;
        CKLT(cublasLtMatmulPreferenceGetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, 4, &w));
        CKLT(cublasLtMatmulPreferenceGetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, 8, &w));
        check(al == 256 && ws == 0, "pref defaults: alignment %u (want 256), workspace %llu (want 0)", al,
              (unsigned long long)ws);
        expect(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &al, 4), IV,
               "pref set MAX_WORKSPACE_BYTES with 4 bytes");
        expect(cublasLtMatmulPreferenceSetAttribute(p, (cublasLtMatmulPreferenceAttributes_t)2, &al, 4), IV,
               "pref set id 2");
        expect(cublasLtMatmulPreferenceSetAttribute(nullptr, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &al, 4), IV,
               "pref set on NULL preference");
        cublasLtMatmulPreferenceDestroy(p);
        expect(cublasLtMatmulPreferenceCreate(nullptr), IV, "pref create NULL");
        expect(cublasLtMatrixLayoutCreate(nullptr, CUDA_R_16BF, 1, 1, 1), IV, "layout create NULL");
        expect(cublasLtMatmulDescCreate(nullptr, CUBLAS_COMPUTE_32F, CUDA_R_32F), IV, "desc create NULL");
    }
    check(!strcmp(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED"),
          "status name of NOT_SUPPORTED: %s", cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED));
    check(!strcmp(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE),
                  "an unsupported value or parameter was passed to the function"),
          "status string of INVALID_VALUE: %s", cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE));
    check(!strcmp(cublasLtGetStatusName((cublasStatus_t)2), "unrecognized status"), "status name of 2");
    expect(cublasLtDestroy((cublasLtHandle_t)f.a), CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy of a layout");
    expect(cublasLtMatmul((cublasLtHandle_t)f.a, f.op, &ONE, f.A, f.a, f.B, f.b, &ONE, f.C, f.c, f.C, f.c, &f.algo,
                          nullptr, 0, st),
           CUBLAS_STATUS_NOT_INITIALIZED, "matmul with a layout as handle");
    {
        cublasLtHandle_t h2 = nullptr;
        CKLT(cublasLtCreate(&h2));
        CKLT(cublasLtDestroy(h2));
    }

    // An invalid stream: the product cannot be enqueued.
    cudaStream_t bogus = (cudaStream_t)(uintptr_t)0xbad0;
    if (zt_emu::stream_device(bogus) == -1)
        mm(h, f, bogus, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, CUBLAS_STATUS_EXECUTION_FAILED,
           "matmul on an invalid stream");
    else
        printf("  (skipped: the runtime does not report 0xbad0 as an invalid stream)\n");
    CKCUDA(cudaStreamSynchronize(st));
    free_fx(f);
}

// Last, because it leaves the context broken: an operand outside device memory is a device
// fault when the op runs (cublasLtMatmul itself cannot know), then the error is sticky.
static void fault_case(cublasLtHandle_t h, cudaStream_t st) {
    fx f = make_fx(h, CUDA_R_16BF);
    static unsigned char host_a[4096] __attribute__((aligned(256)));
    memset(host_a, 0, sizeof host_a);
    mm(h, f, st, f.op, f.a, f.b, f.c, f.c, host_a, f.B, f.C, f.C, &ONE, &f.algo, CUBLAS_STATUS_SUCCESS,
       "matmul with a host A: accepted at the call");
    cudaError_t e = cudaStreamSynchronize(st);
    check(e == cudaErrorIllegalAddress, "host A: stream sync returned %s, want cudaErrorIllegalAddress",
          cudaGetErrorName(e));
    mm(h, f, st, f.op, f.a, f.b, f.c, f.c, f.A, f.B, f.C, f.C, &ONE, &f.algo, CUBLAS_STATUS_EXECUTION_FAILED,
       "matmul after a device fault (sticky error)");
    // Host-side objects go; the runtime calls now return the sticky error, which is expected.
    cublasLtMatmulDescDestroy(f.op);
    cublasLtMatrixLayoutDestroy(f.a);
    cublasLtMatrixLayoutDestroy(f.b);
    cublasLtMatrixLayoutDestroy(f.c);
    cublasLtMatmulPreferenceDestroy(f.pref);
    (void)cudaFree(f.A);
    (void)cudaFree(f.B);
    (void)cudaFree(f.C);
    (void)cudaStreamDestroy(st);
}

int main() {
    cublasLtHandle_t h = nullptr;
    CKLT(cublasLtCreate(&h));
    cudaStream_t st = nullptr;
    CKCUDA(cudaStreamCreate(&st));
    printf("products:\n");
    product_cases(h, st);
    printf("rejections:\n");
    rejection_cases(h, st);
    printf("device fault:\n");
    fault_case(h, st);
    // Destroy synchronises the device, whose sticky error is not the handle's.
    expect(cublasLtDestroy(h), CUBLAS_STATUS_SUCCESS, "cublasLtDestroy after a device fault");
    if (g_failures) {
        printf("test_cublaslt: %d of %d checks FAILED\n", g_failures, g_checks);
        return 1;
    }
    printf("test_cublaslt: all %d checks passed\n", g_checks);
    return 0;
}
