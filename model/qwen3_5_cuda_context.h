// Qwen3.5's Gated DeltaNet across a context-parallel split on the GPU (model/qwen3_5_cuda_context.c):
// model/qwen3_5_context.c's head sharding on device buffers, with the engine's collectives
// (zt_family_cuda_context: NCCL on a GPU, the MPI comm under the CPU execution of CUDA). The
// full-attention layers' exchange is Qwen3's (model/qwen3_cuda_context.c), created here too.
// defines: zt_q35_gcx, zt_q35_gcx_bytes, zt_q35_gcx_create, zt_q35_gcx_free, zt_q35_gcx_attention,
//          zt_q35_gcx_at, zt_q35_gcx_mix_fwd, zt_q35_gcx_mix_bwd
#ifndef ZT_QWEN3_5_CUDA_CONTEXT_H
#define ZT_QWEN3_5_CUDA_CONTEXT_H
#include <stdint.h>

#include "kernels/cuda/zt_cuda.h"
#include "model/family_cuda.h"
#include "model/hf_config.h"
#include "model/qwen3_cuda_layer.h"

typedef struct zt_q35_gcx zt_q35_gcx;

// Device bytes create allocates for B rows of S_local tokens of blocks of S tokens, C ranks (the
// rank with most: the value heads are spread evenly, C dividing the key heads), Qwen3's K/V exchange
// included when a layer is full attention. recompute: one linear layer's saved block tensors serve
// every linear layer. Counted by the same walk that allocates.
int64_t zt_q35_gcx_bytes(const zt_model_config *c, int C, int64_t B, int64_t S, int64_t S_local, int recompute,
                         zt_attn_kind attention);
// NULL + zt_err where the split cannot run (the family's GPU rule: model/qwen3_5.c context_rule_gpu;
// odd row widths; the attention kind's rule). The maps are uploaded on `stream`.
zt_q35_gcx *zt_q35_gcx_create(const zt_model_config *c, const zt_family_cuda_context *x, int64_t B, int recompute,
                              zt_attn_kind attention, void *stream);
void zt_q35_gcx_free(zt_q35_gcx *g);
// The layer and pass ("forward", "recompute", "backward") the collectives' labels name; a forward pass
// of the first linear layer gathers the micro-batch's positions (pos: device [B * S_local]).
void zt_q35_gcx_at(zt_q35_gcx *g, int layer, const char *pass);
// Qwen3's exchange for the full-attention layers (NULL: the model has none).
zt_qwen3_cuda_cx *zt_q35_gcx_attention(zt_q35_gcx *g);
// Held rows [B * S_local]: qkv [., Kd2 + Vd] bf16 (before the conv), b, a [., Hv] fp32 (in_proj_b / _a
// outputs), the conv weight [Cch, K], A_log, dt_bias [Hv] bf16 -> core [., Vd] bf16 (the delta rule's
// output at the held tokens, every head).
void zt_q35_gcx_mix_fwd(zt_q35_gcx *g, void *stream, const int32_t *pos, const zt_bf16 *qkv, const float *b,
                        const float *a, const zt_bf16 *wconv, const zt_bf16 *A_log, const zt_bf16 *dt, zt_bf16 *core);
// dcore [., Vd] bf16 (held rows) -> dqkv [., Cch], db, da [., Hv] bf16 (assigned, held rows); dwconv,
// dA_log, ddt fp32 += (this rank's channels and heads over the whole block; the others' 0).
void zt_q35_gcx_mix_bwd(zt_q35_gcx *g, zt_cuda_ctx *c, void *stream, const zt_bf16 *dcore, const zt_bf16 *wconv,
                        float *dwconv, const zt_bf16 *A_log, float *dA_log, const zt_bf16 *dt, float *ddt,
                        zt_bf16 *dqkv, zt_bf16 *db, zt_bf16 *da);
// The largest op scratch the split's kernels take (the delta rule's backward over the block's rows for
// this rank's value heads, the conv's dw partials).
size_t zt_q35_gcx_scratch_bytes(const zt_model_config *c, int C, int64_t B, int64_t S);
#endif
