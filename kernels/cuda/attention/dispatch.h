// The CUDA backend's one attention call: the model families hand it q, k, v, the document
// positions and the context split's held rows, and it runs the kind chosen by the policy
// (kernels/cuda/attention/policy.h). The implementations, one file each: attention.cu (GEMM:
// cuBLASLt + fused softmax), attention_tiled.cu (scalar tiles), attention_tc.cu (tensor-core
// tiles), attention_cudnn.cu (cuDNN SDPA). The families never call them directly.
// defines: zt_attn_call, zt_attn_fwd, zt_attn_bwd, zt_attn_takes_rows, zt_attn_scratch_bytes,
//          zt_attn_usable, zt_attn_cudnn_head_dim_here, zt_attn_test_overrides (tests only)
#ifndef ZT_ATTN_DISPATCH_H
#define ZT_ATTN_DISPATCH_H
#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/attention/policy.h"
#include "kernels/cuda/cudnn_docs.h"
#include "kernels/cuda/zt_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

// One attention call. Layouts as zt_cuda_attention_fwd: q, o, dout, dq [B, Sq, H*D]; k, v, dk, dv
// [B, S, Hkv*D]; lse [B, H, Sq] fp32 (saved for backward); causal GQA, scale 1/sqrt(D).
typedef struct {
    zt_attn_kind kind;  // TILED, CUDNN or GEMM (never AUTO)
    int64_t B, S, H, Hkv, D;
    // NULL: query i sees keys 0..i; else device int32 [B, Sq] document positions (query at row a
    // with position p sees keys a - p .. a: packed documents stay apart)
    const int32_t *pos;
    // NULL: the queries are the S rows (Sq ignored). Else a context split's Sq held rows
    // (device int32 [Sq]: each query's block row, -1: padding): TILED only (zt_attn_takes_rows);
    // dk, dv are then these queries' share (the sum over the group's ranks is the block's)
    const int32_t *qrow;
    int64_t Sq;
    // CUDNN with pos: the micro-batch's document table (kernels/cuda/cudnn_docs.h) and its device
    // copy; positions without it are a precondition failure (cuDNN would attend across documents)
    const zt_cudnn_docs_table *docs;
    const void *docs_table;
} zt_attn_call;

void zt_attn_fwd(zt_cuda_ctx *c, void *stream, const zt_attn_call *a, zt_bf16 *o, float *lse, const zt_bf16 *q,
                 const zt_bf16 *k, const zt_bf16 *v);
// dq, dk, dv assigned.
void zt_attn_bwd(zt_cuda_ctx *c, void *stream, const zt_attn_call *a, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                 const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q, const zt_bf16 *k,
                 const zt_bf16 *v);
// 1 when the kind runs a context split's held rows in place (TILED); 0 when the caller must stage
// the whole block's queries (GEMM) or cannot split at all (CUDNN: no positions under a split).
int zt_attn_takes_rows(zt_attn_kind kind);
// The scratch one call takes from the context's arena: Sq query rows against S keys (Sq = S
// without a split). GEMM: one KV-head group's S x S scores over the whole block; TILED: O(H*Sq);
// CUDNN: as TILED (cuDNN grows the arena for its own workspace).
size_t zt_attn_scratch_bytes(zt_attn_kind kind, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D);
// 0 when this build runs the kind; else -1 + zt_err (CUDNN without cuDNN; AUTO or out of range).
int zt_attn_usable(int kind);

// policy.h's cuDNN head_dim rule (zt_attn_cudnn_head_dim) for the current device's compute
// capability and the cuDNN this process loaded (0 without cuDNN): 0, or -1 + zt_err.
int zt_attn_cudnn_head_dim_here(int64_t D);

// Tests only. tests/support/attention_test.c (linked into the test programs, never into the
// product) defines this function and its setters; the product has no definition, so the weak
// reference is NULL there and these choices cannot be reached from it.
typedef struct {
    int scalar_tiles;      // TILED: the scalar tiled kernels even where the tensor-core ones apply
    int cudnn_unbuilt_ok;  // zt_attn_usable accepts CUDNN in a build without it (to reach the
                           // engine's and the families' refusals; no cuDNN call may then run)
} zt_attn_test_overrides;
const zt_attn_test_overrides *zt_attn_test_overrides_get(void) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
