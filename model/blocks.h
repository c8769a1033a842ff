// The CPU blocks a decoder layer is composed of, written once for every family (issue 48): the
// RMSNorm, the GQA attention block (input norm, q/k/v projections, q/k RMSNorm, RoPE, attention
// through the op table or across a context split, o projection, residual) and the SwiGLU MLP block
// (post norm, gate/up, SiLU * up, down, residual). What a family differs in is an option of the block:
// the norms' weight applied as (1 + w) (Qwen3.5), an output gate on the attention (Qwen3.5's q_proj
// yields per head D query rows then D gate rows; the o projection reads att * sigmoid(gate)), RoPE on the
// first rd of each head's D dims only (partial rotary), head_dim any. Qwen3's layer is attention + MLP
// (model/qwen3.c); Qwen3.5's full-attention layer the same with its options, its linear layer its own
// mixing (Gated DeltaNet) between the block's norm and MLP (model/qwen3_5.c).
// Gradients: parameter gradients accumulate (+=), activation gradients are assigned.
// defines: zt_block_env, zt_block_norm_fwd/bwd, zt_attn_{shape,params,grads,acts,work}, zt_attn_params_at,
//          zt_attn_grads_at, zt_block_attention_fwd/bwd, zt_mlp_{params,grads,acts,work}, zt_mlp_params_at,
//          zt_mlp_grads_at, zt_block_mlp_fwd/bwd, zt_attn_layer_{acts,work}, zt_block_attn_layer_fwd/bwd
#ifndef ZT_MODEL_BLOCKS_H
#define ZT_MODEL_BLOCKS_H
#include <stdint.h>

#include "kernels/ops.h"
#include "model/context.h"
#include "model/layout.h"

// What every block of a pass needs: the op table, the norms' epsilon and weight convention, and the
// engine's progress hook (called between ops when set; it never changes a value).
typedef struct {
    const zt_ops *ops;
    float eps;
    int norm_one_plus;  // 1: RMSNorm weights are applied as (1 + w) (Qwen3_5RMSNorm; init 0)
    float *w1;          // norm_one_plus: scratch of max(hidden, head_dim) floats for the 1 + w
    void (*progress)(void *ctx);
    void *progress_ctx;
} zt_block_env;

// RMSNorm over rows of d: y = x * rstd * w (or (1 + w)); backward: dx assigned, dw +=.
void zt_block_norm_fwd(const zt_block_env *e, float *y, float *rstd, const float *x, const float *w, int64_t rows,
                       int64_t d);
void zt_block_norm_bwd(const zt_block_env *e, float *dx, float *dw, const float *dy, const float *x, const float *w,
                       const float *rstd, int64_t rows, int64_t d);

// ---- the GQA attention block: x_mid = x + o(attn(rope(qnorm(q(ln1))), rope(knorm(k(ln1))), v(ln1))), ln1 = norm(x)
typedef struct {
    int64_t B, S, d, H, Hkv, D;  // B rows of S held tokens; hidden d; H query, Hkv key/value heads of D
    int64_t rd;                  // rotary dims of each head (== D: full RoPE; < D: the first rd only)
    int out_gate;                // 1: q_proj is [H * 2D, d] (q | gate per head), o reads att * sigmoid(gate)
    const float *rope_cos, *rope_sin;  // [S_block, rd / 2]
    const int32_t *pos;          // each token's position (packed documents, a context split); NULL: its index
    zt_context_kv *kv;           // non-NULL: a context split (model/context.h: K/V exchanged over the group)
    int layer;                   // names the exchange's collectives
    float *rot;                  // rd < D: scratch [B * S * max(H, Hkv) * rd] for the rotated slice
} zt_attn_shape;

typedef struct { const float *in_norm, *q, *k, *v, *o, *q_norm, *k_norm; } zt_attn_params;
typedef struct { float *in_norm, *q, *k, *v, *o, *q_norm, *k_norm; } zt_attn_grads;
// The tensors of a unit from index i on, in Hugging Face's order: input norm, q, k, v, o, q_norm, k_norm.
zt_attn_params zt_attn_params_at(const zt_unit_layout *u, const float *p, int i);
zt_attn_grads zt_attn_grads_at(const zt_unit_layout *u, float *dp, int i);

// Saved for backward (N = B S tokens): ln1 [N, d], rstd1 [N]; q_pre, q [N, H, D]; k_pre, k, v [N, Hkv, D];
// qn_rstd [N, H], kn_rstd [N, Hkv]; att_stats [B, H, S, 2]; att [N, H, D]. out_gate: qg [N, H, 2D], gate and
// gated [N, H, D] (NULL without).
typedef struct {
    float *ln1, *rstd1, *q_pre, *k_pre, *q, *k, *v, *qn_rstd, *kn_rstd, *att_stats, *att;
    float *qg, *gate, *gated;
} zt_attn_acts;
// Backward workspaces: dln [N, d]; datt, dq, dqp [N, H, D]; dk, dv, dkp [N, Hkv, D]; out_gate: dgated,
// dgate [N, H, D], dqg [N, H, 2D].
typedef struct { float *dln, *datt, *dq, *dk, *dv, *dqp, *dkp, *dgated, *dgate, *dqg; } zt_attn_work;

void zt_block_attention_fwd(const zt_block_env *e, const zt_attn_shape *s, const zt_attn_params *w,
                            const zt_attn_acts *a, const float *x, float *x_mid);
// dmid: d(loss)/d(x_mid), the residual's included; dx out (assigned): d(loss)/d(x).
void zt_block_attention_bwd(const zt_block_env *e, const zt_attn_shape *s, const zt_attn_params *w,
                            const zt_attn_grads *dw, const zt_attn_acts *a, const zt_attn_work *ws, const float *x,
                            const float *dmid, float *dx);

// ---- the SwiGLU MLP block: y = x_mid + down(silu(gate(ln2)) * up(ln2)), ln2 = norm(x_mid) ---------------
typedef struct { const float *norm, *gate, *up, *down; } zt_mlp_params;
typedef struct { float *norm, *gate, *up, *down; } zt_mlp_grads;
// The tensors of a unit from index i on: post-attention norm, gate, up, down.
zt_mlp_params zt_mlp_params_at(const zt_unit_layout *u, const float *p, int i);
zt_mlp_grads zt_mlp_grads_at(const zt_unit_layout *u, float *dp, int i);

typedef struct { float *ln2, *rstd2, *gate, *up, *h; } zt_mlp_acts;  // [N, d], [N], [N, F] x 3
typedef struct { float *dh, *dg, *du, *dln; } zt_mlp_work;           // [N, F] x 3, [N, d]

void zt_block_mlp_fwd(const zt_block_env *e, const zt_mlp_params *w, const zt_mlp_acts *a, const float *x_mid,
                      float *y, int64_t N, int64_t d, int64_t F);
// dy: d(loss)/dy; dmid out (assigned): d(loss)/d(x_mid), the residual included.
void zt_block_mlp_bwd(const zt_block_env *e, const zt_mlp_params *w, const zt_mlp_grads *dw, const zt_mlp_acts *a,
                      const zt_mlp_work *ws, const float *x_mid, const float *dy, float *dmid, int64_t N, int64_t d,
                      int64_t F);

// ---- the attention decoder layer: y = mlp(x_mid), x_mid = attention(x) --------------------------------
// Its unit's tensors in model/layout.h's ZT_L_* order (Hugging Face's; Qwen3.5's full-attention layers'
// too): the attention block's from ZT_L_INPUT_NORM, the MLP's from ZT_L_POST_NORM.
typedef struct {
    zt_attn_acts at;
    float *x_mid;  // [N, d]
    zt_mlp_acts mlp;
} zt_attn_layer_acts;
typedef struct {
    zt_attn_work at;  // at.dln and mlp.dln may be one buffer
    zt_mlp_work mlp;
    float *dmid;      // [N, d]
} zt_attn_layer_work;

void zt_block_attn_layer_fwd(const zt_block_env *e, const zt_attn_shape *s, const zt_unit_layout *u, const float *p,
                             const zt_attn_layer_acts *a, const float *x, float *y, int64_t F);
// dx: d(loss)/dy on entry, d(loss)/dx on return (in place).
void zt_block_attn_layer_bwd(const zt_block_env *e, const zt_attn_shape *s, const zt_unit_layout *u, const float *p,
                             float *dp, const zt_attn_layer_acts *a, const zt_attn_layer_work *ws, const float *x,
                             float *dx, int64_t F);
#endif
