// A model family's GPU passes: the CUDA module's half of the family table (model/family.h),
// found by the family's name. The same units and contract as zt_family_cpu, on device
// buffers: parameters are a unit's gathered bf16 flat vector, gradients fp32 (+=), every
// pass enqueued on the compute stream given at creation. Built into the CUDA module with
// the family's kernels; the GPU FSDP backend (engine/fsdp_cuda.c) owns the pools, the
// staging of ids / targets / positions and the step, the family the activations.
// defines: zt_family_cuda, zt_family_cuda_context, zt_family_cuda_opts, zt_family_cuda_find
#ifndef ZT_FAMILY_CUDA_H
#define ZT_FAMILY_CUDA_H
#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/attention/policy.h"
#include "kernels/cuda/zt_cuda.h"
#include "model/hf_config.h"

// Context parallelism on the GPU (model/family.h's zt_family_context, on device buffers): C ranks
// share each block, this one holding S_local tokens of each of its rows. The exchange is the
// engine's, on the mesh's context group, and stream-ordered: what the compute stream wrote before
// the call is what is sent, and the compute stream's work enqueued after it sees the result (the
// engine orders its communication stream between the two with events). Called in the same order
// on every rank of the group; `what` names the collective in the flight recorder.
typedef struct zt_family_cuda_context {
    int C, rank;
    int64_t S, S_local;    // a block's tokens; the tokens of a block each rank holds (a row of the model)
    const int32_t *index;  // host [C * S_local]: rank r's token t is at block position index[r * S_local + t]
                           // (-1: padding), as zt_family_context.index
    void (*gather)(void *ctx, const zt_bf16 *mine, zt_bf16 *all, int64_t n, const char *what);  // bf16 all-gather
    void (*scatter)(void *ctx, const float *all, float *mine, int64_t n, const char *what);     // fp32 sum
    void *ctx;
} zt_family_cuda_context;

typedef struct {
    int recompute;  // keep only each layer's input; re-run its forward before its backward
    zt_attn_kind attention;  // TILED (default), GEMM, or CUDNN (refused where it is not built)
    const zt_family_cuda_context *cx;  // NULL: whole rows; else `create`'s S is cx->S_local (copied)
} zt_family_cuda_opts;

typedef struct zt_family_cuda {
    const char *name;  // the family's (zt_family.name)
    // 0, or -1 + zt_err when the family's GPU passes cannot take this config and sequence length
    // (called before the engine allocates anything)
    int (*check)(const zt_model_config *c, int64_t S);
    // The activations of one micro-batch (B rows of S tokens) on the current device, and
    // whatever tables the passes read (RoPE). NULL + zt_err when the shape is refused (o->cx
    // set and the family, or its chosen attention, cannot split a block).
    void *(*create)(const zt_model_config *c, zt_cuda_ctx *ctx, void *stream, int64_t B, int64_t S,
                    const zt_family_cuda_opts *o);
    void (*destroy)(void *m);
    size_t (*scratch_bytes)(const void *m);          // the op layer's scratch the passes grow to
    // Without creating a model (`plan --device cuda`, engine/rank_memory.h): the device bytes `create`
    // would ask zt_cuda_malloc for, for B rows of S tokens with these options (o->cx: S is S_local, and
    // only cx's C, S and S_local are read); *context: the part of them the context split's buffers take
    // (0 without o->cx). And the value scratch_bytes would give that model.
    int64_t (*act_bytes_for)(const zt_model_config *c, int64_t B, int64_t S, const zt_family_cuda_opts *o,
                             int64_t *context);
    size_t (*scratch_bytes_for)(const zt_model_config *c, int64_t B, int64_t S, const zt_family_cuda_opts *o);
    // A created model's context-split buffers, as create allocated them (bytes; 0 without a split).
    int64_t (*context_bytes)(const void *m);
    int (*check_data)(const void *m, int isolated);  // 0, or -1 + zt_err: data it cannot train
    // ids, targets, pos: device [B*S]; pos NULL: plain causal rows (else packed documents; under
    // context parallelism always given: each held token's RoPE position, as zt_family_cpu.set_batch)
    void (*embed_fwd)(void *m, const zt_bf16 *p, const uint32_t *ids);
    void (*layer_fwd)(void *m, int layer, const zt_bf16 *p, const int32_t *pos);
    // The head: the summed loss times `scale` into the device double *loss; dhead NULL: loss
    // only; else d(head) += into dhead and, tied (emb: the embedding's parameters), d(lm_head)
    // += into demb; the gradient of the last layer's output into the family's own buffer.
    void (*head)(void *m, const zt_bf16 *p, const zt_bf16 *emb, const int32_t *targets, float scale,
                 double *loss, float *dhead, float *demb);
    void (*layer_bwd)(void *m, int layer, const zt_bf16 *p, float *dp, const int32_t *pos);
    void (*embed_bwd)(void *m, float *dp, const uint32_t *ids);
    // Optional (NULL: not needed): the next micro-batch's positions on the host [B*S] (packed
    // documents: the engine calls it only when they are isolated and the rows whole), before
    // that micro-batch's passes are enqueued, for passes that need tables of them built on the
    // host (Qwen3's cuDNN attention: the variable-length batch, kernels/cuda/cudnn_docs.h).
    // 0, or -1 + zt_err: positions it cannot take.
    int (*set_positions)(void *m, const int32_t *pos);
    // NULL when the passes run the cuDNN attention; else why they cannot (create refuses CUDNN
    // with it, and --attention auto does not choose cuDNN for the family: zt_fsdp_cuda_cudnn_serves)
    const char *no_cudnn;
    // Optional (NULL: the passes serve cuDNN wherever no_cudnn is NULL): 1 when they run the cuDNN
    // attention for this config on this process's device and cuDNN (a head_dim over 128: the rule
    // of kernels/cuda/attention/policy.h zt_attn_cudnn_head_dim), else 0; --attention auto asks it
    // (zt_fsdp_cuda_cudnn_serves), create refuses CUDNN with the rule's message.
    int (*cudnn_serves)(const zt_model_config *c);
} zt_family_cuda;

// The GPU passes of the family named `name` in this module (model/family_cuda.c), or NULL.
const zt_family_cuda *zt_family_cuda_find(const char *name);
#endif
