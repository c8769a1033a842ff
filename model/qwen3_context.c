// Qwen3's attention under context parallelism (model/family.h zt_family_context): the K/V exchange
// is the family-neutral one (model/context.c: K and V all-gathered after RoPE, the held queries
// against the whole block's keys, dK/dV reduce-scattered back to their ranks); this file binds it
// to Qwen3's activations and workspaces.
// defines: zt_qwen3_cx_alloc, zt_qwen3_cx_free, zt_qwen3_cx_attention_fwd, zt_qwen3_cx_attention_bwd
#include "model/qwen3.h"

void zt_qwen3_cx_alloc(zt_qwen3 *m, float *(*alloc)(void *m, int64_t n)) {
    const zt_model_config *c = &m->lay.cfg;
    zt_context_kv_init(&m->cp_kv, &m->cx, m->B, (int64_t)c->num_kv_heads * c->head_dim, alloc, m);
    m->cx.index = m->cp_kv.index;
}

void zt_qwen3_cx_free(zt_qwen3 *m) {
    if (m->cp) zt_context_kv_free(&m->cp_kv);
}

void zt_qwen3_cx_attention_fwd(zt_qwen3 *m, int layer, zt_layer_acts *a) {
    const zt_model_config *c = &m->lay.cfg;
    zt_context_attention_fwd(&m->cp_kv, m->ops, layer, a->att, a->att_stats, a->q, a->k, a->v, m->pos, c->num_heads,
                             c->num_kv_heads, c->head_dim);
}

void zt_qwen3_cx_attention_bwd(zt_qwen3 *m, int layer, zt_layer_acts *a) {
    const zt_model_config *c = &m->lay.cfg;
    zt_context_attention_bwd(&m->cp_kv, m->ops, layer, m->w_dq, m->w_dk, m->w_dv, m->w_datt, a->att, a->att_stats,
                             a->q, a->k, a->v, m->pos, c->num_heads, c->num_kv_heads, c->head_dim);
}
