// Qwen3.5's Gated DeltaNet under context parallelism (model/qwen3_5_context.c): head sharding over
// the context group. The layer's projections stay per held token; the conv1d + gated delta rule run
// on the whole block for this rank's value heads. docs/design.md "Context parallelism for Qwen3.5".
// defines: zt_q35_cx, zt_q35_cx_create, zt_q35_cx_bytes, zt_q35_cx_free, zt_q35_cx_kv, zt_q35_cx_heads,
//          zt_q35_cx_set_batch, zt_q35_cx_mix_fwd, zt_q35_cx_mix_bwd
#ifndef ZT_QWEN3_5_CONTEXT_H
#define ZT_QWEN3_5_CONTEXT_H
#include <stdint.h>

#include "kernels/ops.h"
#include "model/context.h"
#include "model/family.h"

typedef struct zt_q35_cx zt_q35_cx;

// For B rows of blocks of cx->S tokens, this rank holding cx->S_local of each: every buffer through
// alloc (the family's counted allocator). The model's full-attention layers' K/V exchange included.
zt_q35_cx *zt_q35_cx_create(const zt_model_config *c, const zt_ops *ops, const zt_family_context *cx, int64_t B,
                            float *(*alloc)(void *ctx, int64_t n), void *ctx);
// What create allocates on the rank of the group that allocates most (plan: the peak per rank).
int64_t zt_q35_cx_bytes(const zt_model_config *c, int C, int64_t B, int64_t S, int64_t S_local);
void zt_q35_cx_free(zt_q35_cx *x);
zt_context_kv *zt_q35_cx_kv(zt_q35_cx *x);
// The value heads [*v0, *v0 + *nv) rank r of C runs in the linear layers: contiguous, uneven allowed.
void zt_q35_cx_heads(int64_t Hv, int C, int r, int64_t *v0, int64_t *nv);
// A new micro-batch: the held tokens' positions inside their documents ([B * S_local]); the whole
// block's are gathered at the next linear layer's forward.
void zt_q35_cx_set_batch(zt_q35_cx *x, const int32_t *pos);
// Between the projections and the gated norm of linear layer `layer`: qkv [N, 2 Kd + Vd], b, a [N, Hv]
// of the held tokens in; core [N, Hv, Dv] out (the delta rule's output at the held tokens, every head).
void zt_q35_cx_mix_fwd(zt_q35_cx *x, int layer, const float *qkv, const float *b, const float *a,
                       const float *wconv, const float *A_log, const float *dt, float *core);
// Its backward: dcore [N, Vd] of the held tokens in; dqkv, db, da of the held tokens out (assigned);
// the conv weight's, A_log's and dt_bias's gradients of this rank's heads accumulated (+=).
void zt_q35_cx_mix_bwd(zt_q35_cx *x, int layer, const float *dcore, const float *wconv, float *dwconv,
                       const float *A_log, float *dA, const float *dt, float *ddt, float *dqkv, float *db, float *da);
#endif
