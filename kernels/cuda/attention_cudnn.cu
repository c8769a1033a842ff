// cuDNN fused attention (SDPA) — STUB. Nothing here pretends to work: each call
// reports that the path is not built. Why: the cuDNN frontend headers
// (cudnn_frontend.h) are not installed where zerotrain builds, and a hand-written
// SDPA operation graph on the raw backend API (matmul, scale, causal mask, softmax
// with stats, matmul; and the backward graph) could not be checked without a GPU.
// The GEMM-based path in attention.cu is the one in use.
// defines: zt_cudnn_sdpa_built, zt_cudnn_sdpa_fwd, zt_cudnn_sdpa_bwd
#include "kernels/cuda/zt_cudnn_attention.h"
#include "runtime/common.h"

extern "C" int zt_cudnn_sdpa_built(void) { return 0; }

extern "C" int zt_cudnn_sdpa_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                 const zt_bf16 *k, const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                                 int64_t D) {
    return zt_err("cuDNN SDPA attention: not built (stub in kernels/cuda/attention_cudnn.cu; use the GEMM path)");
}

extern "C" int zt_cudnn_sdpa_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                 const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                 const zt_bf16 *k, const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                                 int64_t D) {
    return zt_err("cuDNN SDPA attention: not built (stub in kernels/cuda/attention_cudnn.cu; use the GEMM path)");
}
