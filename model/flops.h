// FLOPs of training Qwen3 (forward + backward), in the planner's exact convention
// (docs/plan.md, `zerotrain plan`'s "the GPU executes" figure): 6 per matmul parameter per
// token (forward 2, backward 4; the embedding lookup and the norms do no matmul work, the
// lm_head does) and, per layer, the attention scores and values over the keys each query
// sees: a document of n tokens counts n^2 / 2 query-key pairs (S / 2 keys per query, the
// planner's causal halving), 12 FLOPs per pair, head and head dimension (QK^T and PV,
// forward and backward). Packed documents kept apart (--doc-attention isolated) count each
// document's own n^2 / 2. What a run's MFU is measured with (train/run_log.c).
// Any family's count goes through its table (model/family.h): zt_model_train_flops = matmul
// FLOPs per token x tokens + the family's sequence-mixing FLOPs (Qwen3: attention).
// defines: zt_qwen3_matmul_params, zt_qwen3_flops_matmul_per_token, zt_qwen3_flops_attention,
//          zt_qwen3_recompute_flops, zt_doc_sq_sum; declares the dispatching zt_model_flops_matmul_per_token,
//          zt_model_train_flops, zt_model_recompute_flops (model/family.c)
#ifndef ZT_MODEL_FLOPS_H
#define ZT_MODEL_FLOPS_H
#include <stdint.h>

#include "model/hf_config.h"

// Parameters that take part in a matmul: every decoder layer's q, k, v, o, gate, up, down
// and the lm_head (tied or not); no embedding lookup, no norm weights.
double zt_qwen3_matmul_params(const zt_model_config *c);
// 6 x zt_qwen3_matmul_params: the matmul FLOPs of one trained token.
double zt_qwen3_flops_matmul_per_token(const zt_model_config *c);
// The attention FLOPs of documents whose lengths squared sum to sum_sq: 6 L H D sum_sq.
double zt_qwen3_flops_attention(const zt_model_config *c, double sum_sq);
// Sum over the documents of one block of their length squared. pos: zt_batch_words's
// document positions (a document starts where pos is 0); NULL: one document of S tokens.
double zt_doc_sq_sum(const int32_t *pos, int64_t S);
// What --recompute adds: one more forward of every decoder layer (a third of its FLOPs).
double zt_qwen3_recompute_flops(const zt_model_config *c, double tokens, double sum_sq);

// Any family (through c->family): the matmul FLOPs of one trained token; FLOPs of training
// `tokens` tokens whose documents' lengths squared sum to sum_sq; what --recompute adds.
double zt_model_flops_matmul_per_token(const zt_model_config *c);
double zt_model_train_flops(const zt_model_config *c, double tokens, double sum_sq);
double zt_model_recompute_flops(const zt_model_config *c, double tokens, double sum_sq);
#endif
