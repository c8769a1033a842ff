// The CUDA backend's blocks that the GPU families compose, written once: the pre-norm GQA
// attention block (RMSNorm, q/k/v projections, QK-norm, RoPE, the attention through the one
// dispatcher kernels/cuda/attention/dispatch.h or across a context split, o projection, residual)
// and the pre-norm SwiGLU MLP block (RMSNorm, gate/up, SwiGLU, down, residual), forward and
// backward, on the zt_cuda ops. Qwen3 (model/qwen3_cuda_layer.c) is the two blocks as they come;
// Qwen3.5 (model/qwen3_5_cuda_family.c) sets the options its layers differ by: an output gate
// (q_proj's per-head D query rows then D gate rows, a sigmoid gate on the attention output), a
// partial rotary slice (rd of D), the (1 + w) norm weights; its Gated DeltaNet layers use the MLP
// block and the norm-weight rule only. The op sequence is each family's from before the blocks
// (model/qwen3.c, model/qwen3_5.c are the spec), so the results are the same to the bit.
// Parameters bf16, gradients fp32 accumulated (+=), activation gradients assigned.
// defines: zt_cuda_block_dims, zt_cuda_block_acts, zt_cuda_block_work, zt_cuda_attn_off, zt_cuda_mlp_off,
//          zt_cuda_norm_weight, zt_cuda_attn_block_fwd, zt_cuda_attn_block_bwd,
//          zt_cuda_mlp_block_fwd, zt_cuda_mlp_block_bwd, zt_cuda_docs_stage, zt_cuda_docs_stage_*,
//          zt_cuda_docs_check, zt_gprof, zt_gprof_*
#ifndef ZT_BLOCKS_CUDA_H
#define ZT_BLOCKS_CUDA_H
#include <stdint.h>

#include "kernels/cuda/attention/policy.h"
#include "kernels/cuda/cudnn_docs.h"
#include "kernels/cuda/zt_cuda.h"

struct zt_qwen3_cuda_cx;

typedef struct {
    int64_t B, S, N;              // micro-batch, sequence, N = B*S tokens
    int64_t d, F, H, Hkv, D;      // hidden, intermediate, heads, KV heads, head_dim
    float eps;
    zt_attn_kind attention;  // TILED (0, default: no S x S scratch), GEMM (cuBLASLt + softmax), CUDNN
    // Context parallelism: S is this rank's S_local tokens of blocks of cx->Sb; RoPE reads the
    // block's table at the given positions and attention runs across the split
    // (model/qwen3_cuda_context.c). NULL: whole rows.
    struct zt_qwen3_cuda_cx *cx;
    // CUDNN with packed documents: the micro-batch's document table (kernels/cuda/cudnn_docs.h) and
    // its device copy, set by the family before the micro-batch's passes; NULL: none staged.
    const zt_cudnn_docs_table *docs;
    const void *docs_table;
    // ---- the options the families' layers differ by (0 / NULL: Qwen3's) ----
    // RoPE: 0: all D dims, tables [S, D/2] (zt_cuda_rope_*; the context split's block table);
    // > 0: the first rd dims of each head, tables [S, rd/2] (zt_cuda_rope_partial_*; the block's table
    // under a context split: zt_cuda_rope_partial_table_*)
    int64_t rd;
    // 1: q_proj gives 2 H D columns (per head D query rows, then D gate rows) and the attention
    // output is multiplied by sigmoid(gate) before o_proj (acts ogate, gated; work qg, dqg, dgated, dgate)
    int out_gate;
    // NULL: RMSNorm multiplies by w. Else by 1 + w (Qwen3.5), formed in bf16 into w1 (as wide as the
    // widest norm, d or D) right before each use (zt_cuda_norm_weight)
    zt_bf16 *w1;
} zt_cuda_block_dims;

// Saved activations of one layer (device); the attention block's and the MLP block's.
typedef struct {
    zt_bf16 *ln1, *q_pre, *k_pre, *q, *k, *v, *att, *x_mid, *ln2, *gate, *up, *h;
    float *rstd1, *rstd2, *qn_rstd, *kn_rstd, *lse;
    zt_bf16 *ogate, *gated;  // out_gate only: the gate rows [N, H D], sigmoid(ogate) * att
} zt_cuda_block_acts;
// Workspaces shared by all layers (device): the backward's, and the gated q_proj output.
typedef struct {
    zt_bf16 *dh, *dg, *du, *dln, *dmid, *datt, *dq, *dk, *dv, *dqp, *dkp;
    zt_bf16 *qg, *dqg, *dgated, *dgate;  // out_gate only: q_proj's output [N, 2 H D] and its gradient,
                                         // d(gated), d(ogate) [N, H D]
} zt_cuda_block_work;

// Where the blocks' weights sit: element offsets into the layer unit's bf16 parameters p (and
// its fp32 gradients dp, the same layout), each tensor [out, in] as the family's layout has it.
typedef struct {
    int64_t in_norm, q, k, v, o, q_norm, k_norm;
} zt_cuda_attn_off;
typedef struct {
    int64_t norm, gate, up, down;
} zt_cuda_mlp_off;

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
// Record the event after the op `name` (p NULL: nothing).
void zt_gprof_mark(zt_gprof *p, void *stream, const char *name);

// The weight a norm multiplies by under dm's rule: w itself, or 1 + w formed into dm->w1 (n
// elements) on the stream, valid until the next call.
const zt_bf16 *zt_cuda_norm_weight(const zt_cuda_block_dims *dm, void *stream, const zt_bf16 *w, int64_t n);

// x -> a->x_mid = x + o_proj(attention(...)). rope tables as dm->rd says. pos: NULL (positions
// t % S, plain causal attention), or device int32 [B*S] positions inside packed documents: RoPE
// restarts per document and attention stays inside it (CUDNN needs dm->docs with them).
// wk: out_gate's q_proj output (wk->qg); unused (may be NULL) without the gate.
void zt_cuda_attn_block_fwd(zt_cuda_ctx *c, void *stream, const zt_cuda_block_dims *dm, const zt_bf16 *p,
                            const zt_cuda_attn_off *off, const float *rope_cos, const float *rope_sin,
                            const int32_t *pos, const zt_bf16 *x, zt_cuda_block_acts *a, zt_cuda_block_work *wk,
                            zt_gprof *prof);
// wk->dmid holds d(loss)/d(x_mid) (the residual's included); dx = d(loss)/dx (assigned); dp += .
void zt_cuda_attn_block_bwd(zt_cuda_ctx *c, void *stream, const zt_cuda_block_dims *dm, const zt_bf16 *p, float *dp,
                            const zt_cuda_attn_off *off, const float *rope_cos, const float *rope_sin,
                            const int32_t *pos, const zt_bf16 *x, const zt_cuda_block_acts *a,
                            zt_cuda_block_work *wk, zt_bf16 *dx, zt_gprof *prof);
// a->x_mid -> y = x_mid + down(silu(gate(ln2)) * up(ln2)), ln2 = RMSNorm(x_mid) (saved: ln2, rstd2,
// gate, up, h).
void zt_cuda_mlp_block_fwd(zt_cuda_ctx *c, void *stream, const zt_cuda_block_dims *dm, const zt_bf16 *p,
                           const zt_cuda_mlp_off *off, zt_cuda_block_acts *a, zt_bf16 *y, zt_gprof *prof);
// dy = d(loss)/dy -> wk->dmid = d(loss)/d(x_mid), the residual included; dp += .
void zt_cuda_mlp_block_bwd(zt_cuda_ctx *c, void *stream, const zt_cuda_block_dims *dm, const zt_bf16 *p, float *dp,
                           const zt_cuda_mlp_off *off, const zt_cuda_block_acts *a, zt_cuda_block_work *wk,
                           const zt_bf16 *dy, zt_gprof *prof);

// ---- the cuDNN attention's packed documents: the micro-batch's table, staged for the block ----------
// A family's set_positions (model/family_cuda.h) builds the next micro-batch's table (cuDNN's
// variable-length batch, kernels/cuda/cudnn_docs.h) into one of two page-locked host buffers (each
// reused once the copy out of it two micro-batches ago has run: its event) and copies it to one
// device buffer on the compute stream (stream order keeps the previous micro-batch's reads before it).
// Empty sequences pad the count to a power of two where cuDNN allows them (>= 9.25), so a run builds
// few graphs; below that each distinct count is its own graph. Compiled only: cuDNN has not run
// packed documents on a GPU.
typedef struct {
    void *h[2], *d;
    void *ev[2];  // cudaEvent_t
    size_t cap;   // bytes of each: the table for 2 N sequences (any positions)
    int next;
    zt_cudnn_docs_table table;
} zt_cuda_docs_stage;
// Device bytes init takes (zt_cuda_malloc) for N = B S tokens.
int64_t zt_cuda_docs_stage_bytes(int64_t N);
void zt_cuda_docs_stage_init(zt_cuda_docs_stage *s, int64_t N);
void zt_cuda_docs_stage_free(zt_cuda_docs_stage *s);  // a zeroed stage: nothing
// The table of pos (host [B*S], dm's B, S, H, Hkv, D) built and its upload enqueued on stream: 0, and
// the block's dm->docs, dm->docs_table may point at s->table, s->d; or -1 + zt_err.
int zt_cuda_docs_stage_put(zt_cuda_docs_stage *s, void *stream, const int32_t *pos, const zt_cuda_block_dims *dm);
// The families' check_data rule: isolated documents with the cuDNN attention need its
// variable-length batch (cuDNN >= 9.6.0): 0, or -1 + zt_err naming the versions below that.
int zt_cuda_docs_check(zt_attn_kind attention, int isolated);
#endif
