// The FLOP count of Qwen3 training (model/flops.h): the planner's exact formula, with the
// attention term over the real document lengths (Qwen3's family table points here), and
// any family's document lengths; and the planner's counts of a Qwen3 layer (zt_qwen3_layer_plan).
#include "model/flops.h"

#include <stdio.h>

#include "model/qwen3.h"

static double layer_matmul_params(const zt_model_config *c) {
    const double d = (double)c->hidden_size, F = (double)c->intermediate_size, D = c->head_dim;
    const double H = c->num_heads, Hkv = c->num_kv_heads;
    return 2 * H * D * d + 2 * Hkv * D * d + 3 * F * d;  // q and o, k and v, gate, up and down
}

double zt_qwen3_matmul_params(const zt_model_config *c) {
    return c->num_layers * layer_matmul_params(c) + (double)c->vocab_size * (double)c->hidden_size;
}

double zt_qwen3_flops_matmul_per_token(const zt_model_config *c) { return 6.0 * zt_qwen3_matmul_params(c); }

double zt_qwen3_flops_attention(const zt_model_config *c, double sum_sq) {
    return 6.0 * c->num_layers * (double)c->num_heads * c->head_dim * sum_sq;
}

double zt_doc_sq_sum(const int32_t *pos, int64_t S) {
    if (!pos) return (double)S * (double)S;
    double sum = 0;
    int64_t run = 0;
    for (int64_t t = 0; t < S; t++) {
        if (t > 0 && pos[t] != pos[t - 1] + 1) {  // a new document
            sum += (double)run * (double)run;
            run = 0;
        }
        run++;
    }
    return sum + (double)run * (double)run;
}

double zt_qwen3_recompute_flops(const zt_model_config *c, double tokens, double sum_sq) {
    return (6.0 * c->num_layers * layer_matmul_params(c) * tokens + zt_qwen3_flops_attention(c, sum_sq)) / 3.0;
}

// The planner's counts of a Qwen3 layer (model/family.h zt_layer_plan), what the GPU layer keeps with a
// flash kernel (no S x S matrix): per token the layer's input x, ln1, x_mid, ln2 (4d); q before and after
// norm+RoPE and the attention output (3 H D); k before and after, v (3 Hkv D); gate, up, silu*up (3F);
// fp32 rstd of both norms and of the q/k norms per head, and the softmax log-sum-exp per head. The
// backward workspace: the gradients of one layer's activations (dx, dh, dq, dk, dv, datt, dgate, dup, dact).
int zt_qwen3_layer_kind(const zt_model_config *c, int layer) {
    (void)c, (void)layer;
    return 0;
}

void zt_qwen3_layer_plan(const zt_model_config *c, int kind, int64_t S, zt_layer_plan *out) {
    (void)kind;
    const double d = (double)c->hidden_size, F = (double)c->intermediate_size, D = c->head_dim;
    const double H = c->num_heads, Hkv = c->num_kv_heads;
    snprintf(out->name, sizeof out->name, "attention");
    out->values = 4 * d + 3 * H * D + 3 * Hkv * D + 3 * F;
    out->stats = 2 + 2 * H + Hkv;
    out->row_stats = 0;
    out->work = 2 * d + 2 * H * D + 2 * Hkv * D + 3 * F;
    out->flops = 6.0 * layer_matmul_params(c) * (double)S + 6.0 * H * D * (double)S * (double)S;
    out->attention = 1;
}
