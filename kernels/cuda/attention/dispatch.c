// The CUDA backend's attention dispatcher (kernels/cuda/attention/dispatch.h): the only code
// that maps a kind to an implementation. Host C, compiled into zt_cuda beside the kernels.
#include "kernels/cuda/attention/dispatch.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "base/common.h"
#include "kernels/cuda/zt_cudnn_attention.h"

static int scalar_tiles(int64_t D) {
    const zt_attn_test_overrides *t = zt_attn_test_overrides_get ? zt_attn_test_overrides_get() : NULL;
    return (t && t->scalar_tiles) || !zt_cuda_attention_tc_supported(D);
}

static void die(const char *cond, const char *msg) { zt_cuda_die(cond, msg, __FILE__, __LINE__); }

// cuDNN keeps packed documents apart only through the table of the same positions (the family
// builds it from the host positions, kernels/cuda/cudnn_docs.h); positions without one would be
// attended across without a word, so that is a precondition failure.
static void check_call(const zt_attn_call *a) {
    if (a->kind == ZT_ATTN_CUDNN && a->pos && (!a->docs || !a->docs_table))
        die("precondition pos == NULL || docs != NULL",
            "the cuDNN attention cannot keep packed documents apart without their table (the family builds "
            "it from the host positions: set_positions); use the tiled attention (--attention tiled) or "
            "--doc-attention full");
    if (a->qrow && !zt_attn_takes_rows(a->kind)) {
        char msg[160];
        // (no zt_attn_kind_name: policy.c is in zt_kernels, which the CUDA module does not link)
        snprintf(msg, sizeof msg, "the %s attention takes no held rows of a context split (the caller stages the "
                 "whole block, or refuses the kind)", a->kind == ZT_ATTN_GEMM ? "GEMM" : "cuDNN");
        die("precondition qrow == NULL || zt_attn_takes_rows(kind)", msg);
    }
    if (a->kind != ZT_ATTN_TILED && a->kind != ZT_ATTN_CUDNN && a->kind != ZT_ATTN_GEMM)
        die("precondition kind is TILED, CUDNN or GEMM", "an attention call needs a resolved kind (zt_attn_choose)");
}

void zt_attn_fwd(zt_cuda_ctx *c, void *st, const zt_attn_call *a, zt_bf16 *o, float *lse, const zt_bf16 *q,
                 const zt_bf16 *k, const zt_bf16 *v) {
    check_call(a);
    const int64_t B = a->B, S = a->S, H = a->H, Hkv = a->Hkv, D = a->D;
    if (a->kind == ZT_ATTN_CUDNN) {
        const int rc = a->pos ? zt_cudnn_sdpa_docs_fwd(c, st, o, lse, q, k, v, a->docs, a->docs_table, B, S, H, Hkv, D)
                              : zt_cudnn_sdpa_fwd(c, st, o, lse, q, k, v, B, S, H, Hkv, D);
        if (rc) zt_fatal("%s", zt_errmsg());
    } else if (a->kind == ZT_ATTN_GEMM) {
        zt_cuda_attention_fwd(c, st, o, lse, q, k, v, a->pos, B, S, H, Hkv, D);
    } else if (a->qrow) {  // TILED on held rows
        (scalar_tiles(D) ? zt_cuda_attention_tiled_rows_fwd : zt_cuda_attention_tc_rows_fwd)(
            c, st, o, lse, q, k, v, a->pos, a->qrow, B, a->Sq, S, H, Hkv, D);
    } else {  // TILED: tensor cores where they apply
        (scalar_tiles(D) ? zt_cuda_attention_tiled_fwd : zt_cuda_attention_tc_fwd)(c, st, o, lse, q, k, v, a->pos, B,
                                                                                     S, H, Hkv, D);
    }
}

void zt_attn_bwd(zt_cuda_ctx *c, void *st, const zt_attn_call *a, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                 const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q, const zt_bf16 *k,
                 const zt_bf16 *v) {
    check_call(a);
    const int64_t B = a->B, S = a->S, H = a->H, Hkv = a->Hkv, D = a->D;
    if (a->kind == ZT_ATTN_CUDNN) {
        const int rc = a->pos ? zt_cudnn_sdpa_docs_bwd(c, st, dq, dk, dv, dout, o, lse, q, k, v, a->docs,
                                                       a->docs_table, B, S, H, Hkv, D)
                              : zt_cudnn_sdpa_bwd(c, st, dq, dk, dv, dout, o, lse, q, k, v, B, S, H, Hkv, D);
        if (rc) zt_fatal("%s", zt_errmsg());
    } else if (a->kind == ZT_ATTN_GEMM) {
        zt_cuda_attention_bwd(c, st, dq, dk, dv, dout, o, lse, q, k, v, a->pos, B, S, H, Hkv, D);
    } else if (a->qrow) {
        (scalar_tiles(D) ? zt_cuda_attention_tiled_rows_bwd : zt_cuda_attention_tc_rows_bwd)(
            c, st, dq, dk, dv, dout, o, lse, q, k, v, a->pos, a->qrow, B, a->Sq, S, H, Hkv, D);
    } else {
        (scalar_tiles(D) ? zt_cuda_attention_tiled_bwd : zt_cuda_attention_tc_bwd)(c, st, dq, dk, dv, dout, o, lse,
                                                                                     q, k, v, a->pos, B, S, H, Hkv, D);
    }
}

int zt_attn_takes_rows(zt_attn_kind kind) { return kind == ZT_ATTN_TILED; }

size_t zt_attn_scratch_bytes(zt_attn_kind kind, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    return kind == ZT_ATTN_GEMM ? zt_cuda_attention_scratch_bytes(S, H, Hkv, D)
                                : zt_cuda_attention_flash_scratch_bytes(Sq, H, Hkv, D);
}

int zt_attn_usable(int kind) {
    if (kind == ZT_ATTN_TILED || kind == ZT_ATTN_GEMM) return 0;
    if (kind != ZT_ATTN_CUDNN) return zt_err("attention kind %d: not one of tiled, cudnn, gemm", kind);
    const zt_attn_test_overrides *t = zt_attn_test_overrides_get ? zt_attn_test_overrides_get() : NULL;
    if (!zt_cudnn_sdpa_built() && !(t && t->cudnn_unbuilt_ok))
        return zt_err("--attention cudnn: this build has no cuDNN attention (cuDNN was not found at configure "
                      "time; see docs/cuda.md); use --attention tiled");
    return 0;
}

int zt_attn_cudnn_head_dim_here(int64_t D) {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return zt_err("--attention cudnn: the device's compute capability could not be read");
    }
    return zt_attn_cudnn_head_dim(D, 10 * major + minor, zt_cudnn_version());
}
