// Matrix products through cuBLASLt: bf16 operands, fp32 compute, bf16 or fp32
// output. The descriptors, layouts and the heuristic's algorithm are built once
// per shape key and cached in the context (llm.c rebuilt them on every call).
// defines: zt_cuda_gemm, zt_cuda_matmul_fwd, zt_cuda_matmul_bwd, zt_plans_destroy
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"

// Everything the descriptors and the algorithm choice depend on. Zeroed with
// memset before filling so that padding bytes compare equal.
typedef struct {
    int64_t m, n, k;          // column-major (cuBLASLt) problem
    int64_t lda, ldb, ldc;    // of the cuBLASLt operands
    int64_t sa, sb, sc;       // batch strides (elements)
    int32_t batch;
    int32_t ta, tb;           // cublasOperation_t of the cuBLASLt operands
    int32_t ctype;            // zt_cuda_dtype of C/D
    uint32_t align_a, align_b, align_c;  // guaranteed byte alignment (<= 256)
} zt_plan_key;

struct zt_plan {
    zt_plan_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
};

static uint64_t key_hash(const zt_plan_key *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static uint32_t align_of(const void *p, int64_t stride_bytes, int batch) {
    uintptr_t a = (uintptr_t)p;
    if (batch > 1) a |= (uintptr_t)stride_bytes;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

static cublasLtMatrixLayout_t make_layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int32_t batch,
                                          int64_t stride) {
    cublasLtMatrixLayout_t l;
    ZT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        ZT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        ZT_CUBLAS_CHECK(
            cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return l;
}

static struct zt_plan *plan_build(zt_cuda_ctx *c, const zt_plan_key *k) {
    struct zt_plan *p = (struct zt_plan *)calloc(1, sizeof *p);
    if (!p) zt_cuda_die("calloc(zt_plan)", "out of host memory", __FILE__, __LINE__);
    p->key = *k;
    const cudaDataType_t ct = k->ctype == ZT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    ZT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = (cublasOperation_t)k->ta, tb = (cublasOperation_t)k->tb;
    ZT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    ZT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    // Stored shapes: op(A) is m x k, op(B) is k x n.
    p->a = ta == CUBLAS_OP_N ? make_layout(CUDA_R_16BF, k->m, k->k, k->lda, k->batch, k->sa)
                             : make_layout(CUDA_R_16BF, k->k, k->m, k->lda, k->batch, k->sa);
    p->b = tb == CUBLAS_OP_N ? make_layout(CUDA_R_16BF, k->k, k->n, k->ldb, k->batch, k->sb)
                             : make_layout(CUDA_R_16BF, k->n, k->k, k->ldb, k->batch, k->sb);
    p->c = make_layout(ct, k->m, k->n, k->ldc, k->batch, k->sc);

    cublasLtMatmulPreference_t pref;
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = c->workspace_bytes;
    ZT_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &k->align_a,
                                                         sizeof k->align_a));
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &k->align_b,
                                                         sizeof k->align_b));
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k->align_c,
                                                         sizeof k->align_c));
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &k->align_c,
                                                         sizeof k->align_c));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int nres = 0;
    // Checked by hand, not with ZT_CUBLAS_CHECK: a refused problem (CUBLAS_STATUS_NOT_SUPPORTED or
    // INVALID_VALUE, zero results, or a result whose state is not success) must report the
    // shape, leading dimensions and alignments, which is what a user needs to fix it.
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &res, &nres);
    ZT_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (hs != CUBLAS_STATUS_SUCCESS || nres < 1 || res.state != CUBLAS_STATUS_SUCCESS) {
        char d[512];
        snprintf(d, sizeof d,
                 "no cuBLASLt algorithm (status %d %s, %d result(s), state %d) for the column-major problem m=%lld "
                 "n=%lld k=%lld lda=%lld ldb=%lld ldc=%lld batch=%d opA=%d opB=%d C=%s align=%u/%u/%u bytes",
                 (int)hs, cublasLtGetStatusString(hs), nres, nres > 0 ? (int)res.state : -1, (long long)k->m,
                 (long long)k->n, (long long)k->k, (long long)k->lda, (long long)k->ldb, (long long)k->ldc, k->batch,
                 k->ta, k->tb, k->ctype == ZT_BF16 ? "bf16" : "fp32", k->align_a, k->align_b, k->align_c);
        zt_cuda_die("cublasLtMatmulAlgoGetHeuristic", d, __FILE__, __LINE__);
    }
    p->algo = res.algo;
    p->workspace = res.workspaceSize;
    return p;
}

static void plan_free(struct zt_plan *p) {
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->c);
    cublasLtMatmulDescDestroy(p->op);
    free(p);
}

void zt_plans_destroy(zt_cuda_ctx *c) {
    for (int64_t i = 0; i < c->plan_cap; i++)
        if (c->plans[i]) plan_free(c->plans[i]);
    free(c->plans);
    c->plans = NULL;
    c->plan_cap = c->nplans = 0;
}

static void plans_insert(struct zt_plan **tab, int64_t cap, struct zt_plan *p) {
    int64_t i = (int64_t)(key_hash(&p->key) & (uint64_t)(cap - 1));
    while (tab[i]) i = (i + 1) & (cap - 1);
    tab[i] = p;
}

static struct zt_plan *plan_get(zt_cuda_ctx *c, const zt_plan_key *k) {
    if (c->plan_cap) {
        int64_t i = (int64_t)(key_hash(k) & (uint64_t)(c->plan_cap - 1));
        while (c->plans[i]) {
            if (!memcmp(&c->plans[i]->key, k, sizeof *k)) {
                c->plan_hits++;
                return c->plans[i];
            }
            i = (i + 1) & (c->plan_cap - 1);
        }
    }
    c->plan_misses++;
    if (2 * (c->nplans + 1) > c->plan_cap) {  // keep the load factor under 1/2
        int64_t cap = c->plan_cap ? 2 * c->plan_cap : 64;
        struct zt_plan **tab = (struct zt_plan **)calloc((size_t)cap, sizeof *tab);
        if (!tab) zt_cuda_die("calloc(plan table)", "out of host memory", __FILE__, __LINE__);
        for (int64_t i = 0; i < c->plan_cap; i++)
            if (c->plans[i]) plans_insert(tab, cap, c->plans[i]);
        free(c->plans);
        c->plans = tab;
        c->plan_cap = cap;
    }
    struct zt_plan *p = plan_build(c, k);
    plans_insert(c->plans, c->plan_cap, p);
    c->nplans++;
    return p;
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's first
// operand is B and its second is A, with m = N and n = M.
extern "C" void zt_cuda_gemm(zt_cuda_ctx *c, void *stream, void *C, zt_cuda_dtype ctype, int64_t ldc, int64_t strideC,
                             const zt_bf16 *A, int transA, int64_t lda, int64_t strideA, const zt_bf16 *B, int transB,
                             int64_t ldb, int64_t strideB, int64_t M, int64_t N, int64_t K, int64_t batch,
                             float alpha, float beta) {
    ZT_REQUIRE(M > 0 && N > 0 && K > 0 && batch > 0 && batch < (1ll << 31),
               "gemm shape M=%lld N=%lld K=%lld batch=%lld must be positive", (long long)M, (long long)N,
               (long long)K, (long long)batch);
    ZT_REQUIRE(ldc >= N && lda >= (transA ? M : K) && ldb >= (transB ? K : N),
               "gemm leading dimensions lda=%lld ldb=%lld ldc=%lld too small for M=%lld N=%lld K=%lld",
               (long long)lda, (long long)ldb, (long long)ldc, (long long)M, (long long)N, (long long)K);
    ZT_REQUIRE(ctype == ZT_BF16 || ctype == ZT_F32, "gemm output dtype %d", (int)ctype);
    const int64_t csize = ctype == ZT_BF16 ? 2 : 4;
    zt_plan_key k;
    memset(&k, 0, sizeof k);
    k.m = N;
    k.n = M;
    k.k = K;
    k.ta = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    k.tb = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    k.lda = ldb;
    k.ldb = lda;
    k.ldc = ldc;
    k.batch = (int32_t)batch;
    if (batch > 1) {
        k.sa = strideB;
        k.sb = strideA;
        k.sc = strideC;
    }
    k.ctype = ctype;
    k.align_a = align_of(B, strideB * 2, (int)batch);
    k.align_b = align_of(A, strideA * 2, (int)batch);
    k.align_c = align_of(C, strideC * csize, (int)batch);
    struct zt_plan *p = plan_get(c, &k);
    ZT_CUBLAS_CHECK(cublasLtMatmul(c->lt, p->op, &alpha, B, p->a, A, p->b, &beta, C, p->c, C, p->c, &p->algo,
                                   c->workspace, p->workspace, zt_st(stream)));
    if (zt_cuda_sync_every_op()) ZT_CUDA_CHECK(cudaStreamSynchronize(zt_st(stream)));
}

extern "C" void zt_cuda_matmul_fwd(zt_cuda_ctx *c, void *stream, void *y, zt_cuda_dtype ytype, const zt_bf16 *x,
                                   const zt_bf16 *w, int64_t M, int64_t K, int64_t N) {
    // y[M,N] = x[M,K] W[N,K]^T
    zt_cuda_gemm(c, stream, y, ytype, N, 0, x, 0, K, 0, w, 1, K, 0, M, N, K, 1, 1.0f, 0.0f);
}

extern "C" void zt_cuda_matmul_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, void *dw, zt_cuda_dtype dwtype,
                                   const zt_bf16 *dy, const zt_bf16 *x, const zt_bf16 *w, int64_t M, int64_t K,
                                   int64_t N, int accumulate_dx) {
    if (dx)  // dx[M,K] = dy[M,N] W[N,K]
        zt_cuda_gemm(c, stream, dx, ZT_BF16, K, 0, dy, 0, N, 0, w, 0, K, 0, M, K, N, 1, 1.0f,
                     accumulate_dx ? 1.0f : 0.0f);
    if (dw)  // dW[N,K] += dy^T[N,M] x[M,K]
        zt_cuda_gemm(c, stream, dw, dwtype, K, 0, dy, 1, N, 0, x, 0, K, 0, N, K, M, 1, 1.0f, 1.0f);
}
