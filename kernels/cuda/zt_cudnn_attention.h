// Optional causal GQA attention through cuDNN's fused flash attention (SDPA),
// kept behind this header so that no other file sees cuDNN or C++
// (kernels/cuda/attention_cudnn.cu, cuDNN frontend graph API). Selectable at run
// time, off by default until it has passed the GPU op test.
// STATUS: compiled when CMake finds cuDNN 9 (toolkit, CUDNN_ROOT or the pip wheel);
// UNVERIFIED on a GPU. Without cuDNN every call reports "not built" (docs/cuda.md).
// Packed documents (the _docs entry points): COMPILED ONLY, never run on a GPU or anywhere else
// (the CPU execution of CUDA has no cuDNN).
// defines: zt_cudnn_sdpa_built, zt_cudnn_sdpa_fwd, zt_cudnn_sdpa_bwd, zt_cudnn_sdpa_stats, zt_cudnn_version,
//          zt_cudnn_sdpa_docs_supported, zt_cudnn_sdpa_docs_fwd, zt_cudnn_sdpa_docs_bwd
#ifndef ZT_CUDNN_ATTENTION_H
#define ZT_CUDNN_ATTENTION_H
#include <stdint.h>

#include "kernels/cuda/cudnn_docs.h"
#include "kernels/cuda/zt_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

// 1 when the cuDNN SDPA path is compiled in, 0 when this is the stub.
int zt_cudnn_sdpa_built(void);
// Same layouts and meaning as zt_cuda_attention_fwd/bwd (q[B*S, H*D], k/v[B*S,
// Hkv*D], o like q, lse[B, H, S] fp32 natural-log logsumexp of the scaled scores;
// causal, H % Hkv == 0, bf16 I/O, fp32 compute, scale 1/sqrt(D); dq/dk/dv assigned).
// Needs D % 8 == 0, D <= 256, 16-byte aligned pointers and a GPU cuDNN supports
// (sm_80+). Return 0, or -1 with the reason in zt_errmsg() (the failing call, the
// shape and cuDNN's message). Ordered on `stream` like the other ops; the workspace
// comes from the context's scratch arena. The built graphs are cached in the context
// per (B, S, H, Hkv, D, direction).
int zt_cudnn_sdpa_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q, const zt_bf16 *k,
                      const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D);
int zt_cudnn_sdpa_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, const zt_bf16 *dout,
                      const zt_bf16 *o, const float *lse, const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                      int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D);
// The loaded cuDNN's version (cudnnGetVersion(): 9.6.0 = 90600); 0 when not built.
int64_t zt_cudnn_version(void);
// 1 when the loaded cuDNN builds the packed-document graphs (>= ZT_CUDNN_DOCS_MIN_VERSION); else 0
// with zt_errmsg() naming the version needed and the one loaded (or that cuDNN is not built).
int zt_cudnn_sdpa_docs_supported(void);
// Packed documents: the same layouts, results and lse[B, H, S] as zt_cuda_attention_fwd/bwd given
// the positions `t` was built from (zt_cudnn_docs_build) — query i sees keys i - pos[i] .. i —
// through cuDNN's variable-length batch. `table`: the device copy of the table (t->bytes, 16-byte
// aligned), unchanged until the call's work has run. A table padded with empty sequences needs
// cuDNN >= ZT_CUDNN_DOCS_ZERO_LEN_VERSION. Graphs cached per (B, S, H, Hkv, D, direction,
// t->n_graph). The stats go through the scratch arena (B*S*H floats after cuDNN's workspace).
int zt_cudnn_sdpa_docs_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q, const zt_bf16 *k,
                           const zt_bf16 *v, const zt_cudnn_docs_table *t, const void *table, int64_t B, int64_t S,
                           int64_t H, int64_t Hkv, int64_t D);
int zt_cudnn_sdpa_docs_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, const zt_bf16 *dout,
                           const zt_bf16 *o, const float *lse, const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                           const zt_cudnn_docs_table *t, const void *table, int64_t B, int64_t S, int64_t H,
                           int64_t Hkv, int64_t D);
// Graph cache statistics of a context (tests: a repeated shape must hit): graphs
// held, cache hits, graphs built, and backward graphs built without cuDNN's
// deterministic algorithm (none was available for the shape). All 0 when not built.
void zt_cudnn_sdpa_stats(const zt_cuda_ctx *c, int64_t *graphs, int64_t *hits, int64_t *builds,
                         int64_t *nondeterministic);

#ifdef __cplusplus
}
#endif
#endif
