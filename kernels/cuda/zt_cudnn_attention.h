// Optional causal GQA attention through cuDNN's fused flash attention (SDPA),
// kept behind this header so that no other file sees cuDNN. Selectable at run
// time, off by default until it has passed the GPU op test.
// STATUS: not built. The cuDNN frontend (cudnn_frontend.h) is not installed on the
// build machines, and the SDPA graph written against the raw backend API has not
// been written; every call reports "not built" (see docs/cuda.md).
// defines: zt_cudnn_sdpa_built, zt_cudnn_sdpa_fwd, zt_cudnn_sdpa_bwd
#ifndef ZT_CUDNN_ATTENTION_H
#define ZT_CUDNN_ATTENTION_H
#include <stdint.h>

#include "kernels/cuda/zt_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

// 1 when the cuDNN SDPA path is compiled in, 0 when this is the stub.
int zt_cudnn_sdpa_built(void);
// Same layouts and meaning as zt_cuda_attention_fwd/bwd (q[B*S, H*D], k/v[B*S,
// Hkv*D], lse[B, H, S]). Return 0, or -1 with the reason in zt_errmsg().
int zt_cudnn_sdpa_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q, const zt_bf16 *k,
                      const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D);
int zt_cudnn_sdpa_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, const zt_bf16 *dout,
                      const zt_bf16 *o, const float *lse, const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                      int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D);

#ifdef __cplusplus
}
#endif
#endif
