// Qwen3's attention under context parallelism (model/family.h zt_family_context): the K/V exchange
// is the family-neutral one (model/context.c: K and V all-gathered after RoPE, the held queries
// against the whole block's keys, dK/dV reduce-scattered back to their ranks), run by the attention
// block (model/blocks.c); this file sizes it for Qwen3's heads.
// defines: zt_qwen3_cx_alloc, zt_qwen3_cx_free
#include "model/qwen3.h"

void zt_qwen3_cx_alloc(zt_qwen3 *m, float *(*alloc)(void *m, int64_t n)) {
    const zt_model_config *c = &m->lay.cfg;
    zt_context_kv_init(&m->cp_kv, &m->cx, m->B, (int64_t)c->num_kv_heads * c->head_dim, alloc, m);
    m->cx.index = m->cp_kv.index;
}

void zt_qwen3_cx_free(zt_qwen3 *m) {
    if (m->cp) zt_context_kv_free(&m->cp_kv);
}
