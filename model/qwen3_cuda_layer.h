// A Qwen3 decoder layer (forward and backward) built from the zt_cuda ops, in
// the same sequence as model/qwen3.c: used by the layer benchmark and by the tiny
// GPU training run. Parameters are one bf16 flat vector in the canonical unit
// order (model/layout.c); gradients one fp32 flat vector, accumulated (+=).
// Used by the GPU FSDP engine (runtime/fsdp_cuda.c), the layer benchmark and train_tiny.
// defines: zt_glayer_dims, zt_glayer_acts, zt_glayer_work, zt_glayer_*, zt_gprof
#ifndef ZT_QWEN3_CUDA_LAYER_H
#define ZT_QWEN3_CUDA_LAYER_H
#include <stdint.h>

#include "kernels/cuda/zt_cuda.h"

typedef struct {
    int64_t B, S, N;              // micro-batch, sequence, N = B*S tokens
    int64_t d, F, H, Hkv, D;      // hidden, intermediate, heads, KV heads, head_dim
    float eps;
} zt_glayer_dims;

// Offsets (elements) of the 11 tensors in a layer unit, canonical order:
// input_norm, q, k, v, o, q_norm, k_norm, post_norm, gate, up, down.
enum { ZG_IN_NORM, ZG_Q, ZG_K, ZG_V, ZG_O, ZG_QNORM, ZG_KNORM, ZG_POST_NORM, ZG_GATE, ZG_UP, ZG_DOWN, ZG_NT };
void zt_glayer_offsets(const zt_glayer_dims *dm, int64_t off[ZG_NT + 1]);  // off[ZG_NT] = numel

// Saved activations of one layer (device).
typedef struct {
    zt_bf16 *ln1, *q_pre, *k_pre, *q, *k, *v, *att, *x_mid, *ln2, *gate, *up, *h;
    float *rstd1, *rstd2, *qn_rstd, *kn_rstd, *lse;
} zt_glayer_acts;
// Backward workspaces shared by all layers (device).
typedef struct {
    zt_bf16 *dh, *dg, *du, *dln, *dmid, *datt, *dq, *dk, *dv, *dqp, *dkp;
} zt_glayer_work;

void zt_glayer_acts_alloc(zt_glayer_acts *a, const zt_glayer_dims *dm);
void zt_glayer_acts_free(zt_glayer_acts *a);
void zt_glayer_work_alloc(zt_glayer_work *w, const zt_glayer_dims *dm);
void zt_glayer_work_free(zt_glayer_work *w);

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

// Attention backend: 0 = cuBLASLt GEMM path (default), 1 = cuDNN SDPA (fails
// with "not built" while attention_cudnn.cu is a stub).
extern int zt_glayer_use_cudnn;

// x -> y (y != x). rope tables [S, D/2]. pos: NULL (positions t % S, plain causal
// attention), or device int32 [B*S] positions inside packed documents (zt_qwen3_batch):
// RoPE restarts per document and attention stays inside it. The cuDNN attention
// cannot mask documents: with zt_glayer_use_cudnn, a non-NULL pos is fatal.
void zt_glayer_fwd(zt_cuda_ctx *c, void *stream, const zt_glayer_dims *dm, const zt_bf16 *params,
                   const float *rope_cos, const float *rope_sin, const int32_t *pos, const zt_bf16 *x, zt_bf16 *y,
                   zt_glayer_acts *a, zt_gprof *prof);
// dx holds d(loss)/dy on entry and d(loss)/dx on return; dparams += . pos as forward.
void zt_glayer_bwd(zt_cuda_ctx *c, void *stream, const zt_glayer_dims *dm, const zt_bf16 *params, float *dparams,
                   const float *rope_cos, const float *rope_sin, const int32_t *pos, const zt_bf16 *x,
                   const zt_glayer_acts *a, zt_glayer_work *w, zt_bf16 *dx, zt_gprof *prof);

// Model FLOPs of one layer, forward + backward (backward = 2 x forward), with the
// causal attention products counted at half the S x S square:
//   matmuls 6 N (d*H*D + 2 d*Hkv*D + H*D*d + 3 d*F) + attention 3 * 4 B S^2 H D / 2.
double zt_glayer_flops(const zt_glayer_dims *dm);
#endif
