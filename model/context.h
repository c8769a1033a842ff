// Family-neutral pieces of context parallelism (model/family.h zt_family_context) that a family's
// CPU passes call: the reorder between a rank's held tokens and the whole block's rows, the
// all-gather / reduce-scatter of per-token rows over the context group in block order, and the
// softmax attention's K/V exchange (Qwen3's and Qwen3.5's full-attention layers: model/context.c).
// defines: zt_context_bind_check, zt_context_to_block, zt_context_from_block, zt_context_gather_rows,
//          zt_context_scatter_rows, zt_context_kv, zt_context_kv_init, zt_context_kv_bytes, zt_context_kv_free,
//          zt_context_attention_fwd, zt_context_attention_bwd
#ifndef ZT_MODEL_CONTEXT_H
#define ZT_MODEL_CONTEXT_H
#include <stdint.h>

#include "model/family.h"

// What a family's CPU passes bind to (its cpu.create): B rows of blocks of S tokens, S >= 2, and a context
// split (NULL: none) that fits those blocks. 0, or zt_err's -1 naming what does not fit.
int zt_context_bind_check(int64_t B, int64_t S, const zt_family_context *cx);

// Rank r's held rows src [B * S_local, w] (held-token order) into the whole blocks' rows dst
// [B * S, w] (block order; padding skipped), and back (from_block: padding rows zeroed).
void zt_context_to_block(const zt_family_context *cx, int r, int64_t B, const float *src, float *dst, int64_t w);
void zt_context_from_block(const zt_family_context *cx, int r, int64_t B, const float *src, float *dst, int64_t w);

// block [B * S, w] = every rank's mine [B * S_local, w] in block order, by one all-gather named `what`
// (all: scratch of C * B * S_local * w floats). Rows no rank holds are left as they were.
void zt_context_gather_rows(const zt_family_context *cx, int64_t B, const float *mine, float *all, float *block,
                            int64_t w, const char *what);
// mine [B * S_local, w] = the sum over the group's ranks of their block [B * S, w] at this rank's held
// rows, by one reduce-scatter named `what` (all: scratch of C * B * S_local * w floats).
void zt_context_scatter_rows(const zt_family_context *cx, int64_t B, const float *block, float *all, float *mine,
                             int64_t w, const char *what);

// Softmax attention under the split: this rank's queries against the whole block's K and V, gathered
// after RoPE (nothing of block size kept between passes but these buffers).
typedef struct {
    zt_family_context cx;  // index points at `index` (a copy)
    int32_t *index;        // [C * S_local]
    int64_t B, kvs;        // rows; K (and V) floats per token
    float *kv_mine, *kv_all;  // [2 N kvs] this rank's K|V (dK|dV); [C][2 N kvs] the group's
    float *k, *v;             // [B * S, kvs] the whole blocks' K and V (dK, dV), block order
} zt_context_kv;

// Its buffers through alloc (the family's counted allocator; ctx passed back); zt_context_kv_bytes:
// what they take (a family's act_bytes_for).
void zt_context_kv_init(zt_context_kv *x, const zt_family_context *cx, int64_t B, int64_t kvs,
                        float *(*alloc)(void *ctx, int64_t n), void *ctx);
int64_t zt_context_kv_bytes(int C, int64_t B, int64_t S, int64_t S_local, int64_t kvs);
void zt_context_kv_free(zt_context_kv *x);

// The op table's attention over this rank's held queries (q [B * S_local, H, D]; pos: each held token's
// RoPE position, a token at block row g with position p sees keys g - p .. g), K/V gathered over the group
// ("layer L K/V context all-gather (forward|backward)"). Backward: dq of the held queries, and dk, dv of
// this rank's own keys (the group's contributions summed: "layer L dK/dV context reduce-scatter").
void zt_context_attention_fwd(zt_context_kv *x, const zt_ops *ops, int layer, float *att, float *stats,
                              const float *q, const float *k, const float *v, const int32_t *pos, int64_t H,
                              int64_t Hkv, int64_t D);
void zt_context_attention_bwd(zt_context_kv *x, const zt_ops *ops, int layer, float *dq, float *dk, float *dv,
                              const float *datt, const float *att, const float *stats, const float *q,
                              const float *k, const float *v, const int32_t *pos, int64_t H, int64_t Hkv, int64_t D);
#endif
