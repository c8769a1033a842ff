// The Qwen3 decoder layer and the head (final norm + lm_head + cross-entropy) on the GPU: the
// layer is the attention and MLP blocks of model/blocks_cuda.h (the zt_cuda ops in the same
// sequence as model/qwen3.c). Parameters are one
// bf16 flat vector in the canonical unit order (model/layout.c: the offsets come from
// its zt_qwen3_layer_shapes); gradients one fp32 flat vector, accumulated (+=).
// Used by the GPU FSDP backend (engine/fsdp_cuda.c), the layer benchmark and train_tiny.
// defines: zt_qwen3_cuda_dims, zt_qwen3_cuda_acts, zt_qwen3_cuda_work (the blocks' types), zt_qwen3_cuda_head_acts,
//          zt_qwen3_cuda_*,
//          zt_qwen3_cuda_cx (model/qwen3_cuda_context.c: the attention across a context-parallel split)
#ifndef ZT_QWEN3_CUDA_LAYER_H
#define ZT_QWEN3_CUDA_LAYER_H
#include <stdint.h>

#include "kernels/cuda/cudnn_docs.h"
#include "kernels/cuda/zt_cuda.h"
#include "model/blocks_cuda.h"
#include "model/family_cuda.h"
#include "model/layout.h"

// The layer is the two blocks of model/blocks_cuda.h with no options set: its dims, saved tensors
// and workspaces are the blocks'.
typedef zt_cuda_block_dims zt_qwen3_cuda_dims;
typedef zt_cuda_block_acts zt_qwen3_cuda_acts;
typedef zt_cuda_block_work zt_qwen3_cuda_work;

// Offsets (elements) of the layer's tensors (ZT_L_* order, model/qwen3.h); off[ZT_L_NTENSORS] = numel.
void zt_qwen3_cuda_layer_offsets(const zt_qwen3_cuda_dims *dm, int64_t off[ZT_L_NTENSORS + 1]);

// Qwen3's set of a layer's saved tensors and of the workspaces (no output gate: ogate, gated, qg,
// dqg, dgated, dgate NULL).
void zt_qwen3_cuda_acts_alloc(zt_qwen3_cuda_acts *a, const zt_qwen3_cuda_dims *dm);
void zt_qwen3_cuda_acts_free(zt_qwen3_cuda_acts *a);
void zt_qwen3_cuda_work_alloc(zt_qwen3_cuda_work *w, const zt_qwen3_cuda_dims *dm);
void zt_qwen3_cuda_work_free(zt_qwen3_cuda_work *w);

// x -> y (y != x). rope tables [S, D/2]. pos: NULL (positions t % S, plain causal
// attention), or device int32 [B*S] positions inside packed documents (zt_batch_words):
// RoPE restarts per document and attention stays inside it. With ZT_ATTN_CUDNN a non-NULL
// pos needs dm->docs (the table of the same positions; cuDNN's variable-length batch), else it is fatal.
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

// ---- context parallelism (model/qwen3_cuda_context.c) -------------------------------------------
// The GPU version of model/qwen3_context.c: after RoPE the layer all-gathers K|V (bf16) over the
// context group, places every rank's rows at their block rows and its own queries in a zeroed
// whole-block query buffer, and runs the layer's attention (tiled or GEMM) over the whole block
// with block positions (a row this rank does not hold gets position 0: it sees only its own key,
// with a zero query and, in the backward, a zero dO). The backward re-gathers K|V, runs the
// attention's backward over the block and reduce-scatters dK|dV (fp32) to their owners.
typedef struct zt_qwen3_cuda_cx {
    zt_family_cuda_context x;     // x.index points at index_h
    int32_t *index_h;             // [C * S_local]
    int64_t B, Sb, Sl;            // rows, a block's tokens, this rank's tokens per row
    int layer;                    // the layer now running (the collectives' labels)
    const char *pass;             // "forward", "recompute", "backward"
    int kv_layer;                 // k_blk, v_blk hold this layer's K|V from --recompute's re-run (-1: none)
    const zt_bf16 *kv_k, *kv_v;   // ... gathered from these
    int32_t *q_in, *q_out, *kv_in, *index;  // device maps (rows.cu): block row <- held row, held <- block
                                             // (and the tiled attention's query rows), block row <- gathered
                                             // K/V row, rank r's held rows <- block; q_in: GEMM path only
    zt_bf16 *kv_mine, *kv_all;               // [2 B Sl kvs], [C 2 B Sl kvs]: this rank's K|V, the group's
    zt_bf16 *k_blk, *v_blk;                  // [B Sb kvs] the block's K, V
    // the GEMM path only (it takes equal-length Q and K; NULL for the tiled attention):
    int32_t *pos_blk;                          // [B * Sb] positions of the whole block (0: rows held elsewhere)
    zt_bf16 *q_blk, *o_blk, *do_blk, *dq_blk;  // [B Sb H D] the whole block's Q, O, dO, dQ
    float *lse_blk;                            // [B H Sb]
    float *kv_all32, *kv_mine32;             // [C 2 B Sl kvs], [2 B Sl kvs]: dK|dV rank-major, this rank's sum
} zt_qwen3_cuda_cx;

// Device bytes of the buffers above for rows of dm->S = S_local tokens of blocks of Sb, C ranks
// (the whole-block query side only when dm->attention is the GEMM path).
int64_t zt_qwen3_cuda_cx_bytes(const zt_qwen3_cuda_dims *dm, int C, int64_t Sb);
// 0, or -1 + zt_err when the attention cannot run across a split (cuDNN: it takes no positions).
int zt_qwen3_cuda_cx_check(const zt_family_cuda_context *x, zt_attn_kind attention);
// NULL + zt_err as zt_qwen3_cuda_cx_check. The maps are uploaded on `stream` (the passes' stream).
zt_qwen3_cuda_cx *zt_qwen3_cuda_cx_create(const zt_family_cuda_context *x, const zt_qwen3_cuda_dims *dm, void *stream);
void zt_qwen3_cuda_cx_free(zt_qwen3_cuda_cx *cx);
// a->q, a->k, a->v after RoPE -> a->att, a->lse (this rank's rows). pos: device [B * S_local].
void zt_qwen3_cuda_cx_attention_fwd(zt_cuda_ctx *c, void *stream, const zt_qwen3_cuda_dims *dm, const int32_t *pos,
                                    zt_qwen3_cuda_acts *a);
// w->datt -> w->dq, w->dk, w->dv (dK, dV: the group's sum for this rank's keys).
void zt_qwen3_cuda_cx_attention_bwd(zt_cuda_ctx *c, void *stream, const zt_qwen3_cuda_dims *dm, const int32_t *pos,
                                    const zt_qwen3_cuda_acts *a, zt_qwen3_cuda_work *w);

// Model FLOPs of one layer, forward + backward (backward = 2 x forward), with the
// causal attention products counted at half the S x S square:
//   matmuls 6 N (d*H*D + 2 d*Hkv*D + H*D*d + 3 d*F) + attention 3 * 4 B S^2 H D / 2.
double zt_qwen3_cuda_layer_flops(const zt_qwen3_cuda_dims *dm);
#endif
