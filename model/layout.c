// Parameter layout: which HF tensors live in which FSDP unit, in what order, at
// what offset of the unit's flat vector. This order is the canonical one that
// shards, checkpoints and all-gathers all agree on. The lookups are any family's; the
// layout, the initial values and the counts here are Qwen3's (its family table: model/qwen3.c).
// defines: zt_layout_add_tensor, zt_model_layout_free, zt_model_layout_find, zt_qwen3_layout_init, zt_qwen3_init_unit,
//          zt_qwen3_param_count, zt_qwen3_max_positions
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/layout.h"
#include "base/common.h"

int zt_layout_add_tensor(zt_unit_layout *u, const char *name, int ndim, const int64_t *shape) {
    if (ndim < 1 || ndim > 3) return zt_err("layout: tensor %s: a tensor has 1 to 3 dimensions, not %d", name, ndim);
    if (u->ntensors >= u->cap) {
        if (u->cap > INT_MAX / 4) return zt_err("layout: tensor %s: a unit of %d tensors is too many", name, u->ntensors);
        u->cap = u->cap ? 2 * u->cap : 16;
        zt_tensor_desc *nt = realloc(u->t, (size_t)u->cap * sizeof *u->t);
        if (!nt) zt_fatal("layout: out of memory for unit of %d tensors", u->cap);
        u->t = nt;
    }
    zt_tensor_desc *t = &u->t[u->ntensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->numel = 1;
    for (int j = 0; j < ndim; j++) t->shape[j] = shape[j], t->numel *= shape[j];
    t->offset = u->numel;
    t->decay = ndim >= 2;  // matrices (and a conv kernel) decay; norm weights and biases do not
    u->numel += t->numel;
    return 0;
}

// Qwen3's tensors: [rows, cols], or a vector when cols is 0.
static void add_tensor(zt_unit_layout *u, const char *name, int64_t rows, int64_t cols) {
    const int64_t shape[2] = {rows, cols};
    zt_layout_add_tensor(u, name, cols ? 2 : 1, shape);
}

int zt_qwen3_layout_init(zt_model_layout *lay, const zt_model_config *cfg) {
    memset(lay, 0, sizeof *lay);
    lay->cfg = *cfg;
    const int64_t d = cfg->hidden_size, F = cfg->intermediate_size, D = cfg->head_dim;
    const int64_t H = cfg->num_heads, Hkv = cfg->num_kv_heads, V = cfg->vocab_size;
    const int L = cfg->num_layers;
    lay->nunits = L + 2;
    lay->units = zt_xcalloc((size_t)lay->nunits, sizeof *lay->units);
    char n[96];

    zt_unit_layout *u = &lay->units[0];
    u->kind = ZT_UNIT_EMBED;
    u->layer = -1;
    add_tensor(u, "model.embed_tokens.weight", V, d);

    for (int l = 0; l < L; l++) {
        u = &lay->units[1 + l];
        u->kind = ZT_UNIT_LAYER;
        u->layer = l;
        static const char *const names[ZT_L_NTENSORS] = {
            "input_layernorm.weight",  "self_attn.q_proj.weight", "self_attn.k_proj.weight",
            "self_attn.v_proj.weight", "self_attn.o_proj.weight", "self_attn.q_norm.weight",
            "self_attn.k_norm.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
            "mlp.up_proj.weight",      "mlp.down_proj.weight"};
        int64_t shape[ZT_L_NTENSORS][2];
        zt_qwen3_layer_shapes(d, F, H, Hkv, D, shape);
        for (int t = 0; t < ZT_L_NTENSORS; t++) {
            snprintf(n, sizeof n, "model.layers.%d.%s", l, names[t]);
            add_tensor(u, n, shape[t][0], shape[t][1]);
        }
    }

    u = &lay->units[L + 1];
    u->kind = ZT_UNIT_HEAD;
    u->layer = -1;
    add_tensor(u, "model.norm.weight", d, 0);
    if (!cfg->tie_word_embeddings) add_tensor(u, "lm_head.weight", V, d);

    for (int i = 0; i < lay->nunits; i++) lay->total_numel += lay->units[i].numel;
    return 0;
}

void zt_model_layout_free(zt_model_layout *lay) {
    for (int u = 0; lay->units && u < lay->nunits; u++) free(lay->units[u].t);
    free(lay->units);
    lay->units = NULL;
}

int zt_model_layout_find(const zt_model_layout *lay, const char *name, int *unit, int *idx) {
    for (int u = 0; u < lay->nunits; u++)
        for (int i = 0; i < lay->units[u].ntensors; i++)
            if (!strcmp(lay->units[u].t[i].name, name)) {
                *unit = u;
                *idx = i;
                return 0;
            }
    return -1;
}

void zt_qwen3_init_unit(const zt_model_layout *lay, int unit, float *params, uint64_t seed) {
    const zt_unit_layout *u = &lay->units[unit];
    const double std = lay->cfg.initializer_range;
    for (int i = 0; i < u->ntensors; i++) {
        const zt_tensor_desc *t = &u->t[i];
        float *p = params + t->offset;
        if (t->ndim == 1) {  // RMSNorm weights start at 1
            for (int64_t j = 0; j < t->numel; j++) p[j] = 1.0f;
            continue;
        }
        zt_rng r;
        zt_rng_seed(&r, seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(unit * 64 + i + 1)));
        for (int64_t j = 0; j < t->numel; j++) p[j] = (float)(std * zt_rng_normal(&r));
    }
}

int64_t zt_qwen3_max_positions(const zt_model_config *c) {
    if (!c->rope_yarn) return c->max_position_embeddings;
    const double scaled = c->rope_factor * (double)c->rope_original_max_positions;
    return scaled > (double)c->max_position_embeddings && scaled < 9e18 ? (int64_t)scaled : c->max_position_embeddings;
}

// -1 when a product or sum overflows int64 (a config that passed the parser's ranges never does).
int64_t zt_qwen3_param_count(const zt_model_config *c) {
    const __int128 d = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    const __int128 H = c->num_heads, Hkv = c->num_kv_heads, V = c->vocab_size;
    const __int128 layer = 2 * d + H * D * d + 2 * Hkv * D * d + d * H * D + 2 * D + 3 * F * d;
    const __int128 n = V * d * (c->tie_word_embeddings ? 1 : 2) + d + layer * c->num_layers;
    return n < 0 || n > (__int128)INT64_MAX ? -1 : (int64_t)n;
}
