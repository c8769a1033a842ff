// The Qwen3 decoder layer and the head (final norm + lm_head + cross-entropy) on the GPU,
// built from the zt_cuda ops in the same sequence as model/qwen3.c. Parameters are one
// bf16 flat vector in the canonical unit order (model/layout.c: the offsets come from
// its zt_qwen3_layer_shapes); gradients one fp32 flat vector, accumulated (+=).
// Used by the GPU FSDP backend (engine/fsdp_cuda.c), the layer benchmark and train_tiny.
// defines: zt_qwen3_cuda_dims, zt_qwen3_cuda_acts, zt_qwen3_cuda_work, zt_qwen3_cuda_head_acts, zt_qwen3_cuda_*, zt_gprof
#ifndef ZT_QWEN3_CUDA_LAYER_H
#define ZT_QWEN3_CUDA_LAYER_H
#include <stdint.h>

#include "kernels/cuda/zt_cuda.h"
#include "model/layout.h"

typedef struct {
    int64_t B, S, N;              // micro-batch, sequence, N = B*S tokens
    int64_t d, F, H, Hkv, D;      // hidden, intermediate, heads, KV heads, head_dim
    float eps;
    zt_cuda_attn_kind attention;  // TILED (0, default: no S x S scratch), GEMM (cuBLASLt + softmax), CUDNN
} zt_qwen3_cuda_dims;

// Offsets (elements) of the layer's tensors (ZT_L_* order, model/qwen3.h); off[ZT_L_NTENSORS] = numel.
void zt_qwen3_cuda_layer_offsets(const zt_qwen3_cuda_dims *dm, int64_t off[ZT_L_NTENSORS + 1]);

// Saved activations of one layer (device).
typedef struct {
    zt_bf16 *ln1, *q_pre, *k_pre, *q, *k, *v, *att, *x_mid, *ln2, *gate, *up, *h;
    float *rstd1, *rstd2, *qn_rstd, *kn_rstd, *lse;
} zt_qwen3_cuda_acts;
// Backward workspaces shared by all layers (device).
typedef struct {
    zt_bf16 *dh, *dg, *du, *dln, *dmid, *datt, *dq, *dk, *dv, *dqp, *dkp;
} zt_qwen3_cuda_work;

void zt_qwen3_cuda_acts_alloc(zt_qwen3_cuda_acts *a, const zt_qwen3_cuda_dims *dm);
void zt_qwen3_cuda_acts_free(zt_qwen3_cuda_acts *a);
void zt_qwen3_cuda_work_alloc(zt_qwen3_cuda_work *w, const zt_qwen3_cuda_dims *dm);
void zt_qwen3_cuda_work_free(zt_qwen3_cuda_work *w);

// Optional per-op timing: when non-NULL, an event is recorded after every op.
#define ZT_GPROF_MAX 96
typedef struct {
    int n;
    const char *name[ZT_GPROF_MAX];
    void *ev[ZT_GPROF_MAX];  // cudaEvent_t, created by zt_gprof_init
    void *start;
} zt_gprof;
void zt_gprof_init(zt_gprof *p);
void zt_gprof_free(zt_gprof *p);
// Print time per op name, summed, after the stream has been synchronised.
void zt_gprof_report(const zt_gprof *p, const char *title);

// x -> y (y != x). rope tables [S, D/2]. pos: NULL (positions t % S, plain causal
// attention), or device int32 [B*S] positions inside packed documents (zt_batch_words):
// RoPE restarts per document and attention stays inside it. The cuDNN attention
// cannot mask documents: with ZT_CUDA_ATTN_CUDNN, a non-NULL pos is fatal.
void zt_qwen3_cuda_layer_fwd(zt_cuda_ctx *c, void *stream, const zt_qwen3_cuda_dims *dm, const zt_bf16 *params,
                   const float *rope_cos, const float *rope_sin, const int32_t *pos, const zt_bf16 *x, zt_bf16 *y,
                   zt_qwen3_cuda_acts *a, zt_gprof *prof);
// dx holds d(loss)/dy on entry and d(loss)/dx on return; dparams += . pos as forward.
void zt_qwen3_cuda_layer_bwd(zt_cuda_ctx *c, void *stream, const zt_qwen3_cuda_dims *dm, const zt_bf16 *params, float *dparams,
                   const float *rope_cos, const float *rope_sin, const int32_t *pos, const zt_bf16 *x,
                   const zt_qwen3_cuda_acts *a, zt_qwen3_cuda_work *w, zt_bf16 *dx, zt_gprof *prof);

// The head's device buffers of one micro-batch: final-norm output, its rstd, d(norm output).
typedef struct {
    zt_bf16 *xf, *dln;  // [N, d]
    float *rstd;        // [N]
} zt_qwen3_cuda_head_acts;
// Final RMSNorm (norm_w) + fused lm_head (lm_w [V, d]) + cross-entropy, chunked (never
// N x V), on x = the last layer's output; the summed loss (times scale) into the device
// double *loss. With dnorm: backward too, d(norm_w) += into dnorm, d(lm_w) += into dlm
// (fp32), d(loss)/dx written to dx. dnorm NULL: loss only (dlm, dx unused).
void zt_qwen3_cuda_head_fwd_bwd(zt_cuda_ctx *c, void *stream, const zt_qwen3_cuda_dims *dm, int64_t V, const zt_bf16 *norm_w,
                    const zt_bf16 *lm_w, const zt_bf16 *x, const int32_t *targets, float scale, double *loss,
                    zt_qwen3_cuda_head_acts *a, float *dnorm, float *dlm, zt_bf16 *dx);

// Model FLOPs of one layer, forward + backward (backward = 2 x forward), with the
// causal attention products counted at half the S x S square:
//   matmuls 6 N (d*H*D + 2 d*Hkv*D + H*D*d + 3 d*F) + attention 3 * 4 B S^2 H D / 2.
double zt_qwen3_cuda_layer_flops(const zt_qwen3_cuda_dims *dm);
#endif
