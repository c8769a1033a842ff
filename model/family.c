// The model families this build knows, and the zt_model_* functions that reach a family
// through a config's table (model/family.h). Adding a family: its table in model/, one line
// in `families` below, its codec (model/<family>_codec.c, listed in model/hf_config.c) and its
// GPU passes in model/family_cuda.c.
// defines: zt_family_list, zt_family_find, zt_model_preset, zt_model_layout_init, zt_model_init_unit,
//          zt_model_param_count, zt_model_max_positions, zt_model_flops_matmul_per_token,
//          zt_model_train_flops, zt_model_recompute_flops, zt_model_layer_kinds, zt_model_layer_plan,
//          zt_model_hf_prefix
#include "model/family.h"

#include <string.h>

#include "base/common.h"
#include "model/flops.h"
#include "model/qwen3.h"
#include "model/qwen3_5.h"

static const zt_family *const families[] = {&zt_qwen3_family, &zt_qwen3_5_family, NULL};

const zt_family *const *zt_family_list(void) { return families; }

const zt_family *zt_family_find(const char *model_type) {
    for (int i = 0; families[i]; i++)
        if (!strcmp(families[i]->model_type, model_type)) return families[i];
    return NULL;
}

static const struct {
    const char *name;
    void (*fill)(zt_model_config *c);
} presets[] = {{"qwen3-32b", zt_qwen3_32b_config}, {"qwen3.5-27b", zt_qwen3_5_27b_config}};

int zt_model_preset(const char *name, zt_model_config *c) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, name)) {
            presets[i].fill(c);
            return 0;
        }
    return zt_err("no built-in model config named \"%s\"", name);
}

// A config that names no family is a programming error (the codec always sets one).
static const zt_family *fam(const zt_model_config *c) {
    if (!c->family) zt_fatal("a model config without its family table (zt_model_config.family is NULL)");
    return c->family;
}

int zt_model_layout_init(zt_model_layout *lay, const zt_model_config *c) { return fam(c)->layout_init(lay, c); }
void zt_model_init_unit(const zt_model_layout *lay, int unit, float *params, uint64_t seed) {
    fam(&lay->cfg)->init_unit(lay, unit, params, seed);
}
int64_t zt_model_param_count(const zt_model_config *c) { return fam(c)->param_count(c); }
int64_t zt_model_max_positions(const zt_model_config *c) { return fam(c)->max_positions(c); }
double zt_model_flops_matmul_per_token(const zt_model_config *c) { return fam(c)->flops_matmul_per_token(c); }
double zt_model_train_flops(const zt_model_config *c, double tokens, double sum_sq) {
    return fam(c)->flops_matmul_per_token(c) * tokens + fam(c)->flops_mixing(c, sum_sq);
}
double zt_model_recompute_flops(const zt_model_config *c, double tokens, double sum_sq) {
    return fam(c)->recompute_flops(c, tokens, sum_sq);
}

int zt_model_layer_kinds(const zt_model_config *c, int n[ZT_LAYER_KINDS]) {
    for (int k = 0; k < ZT_LAYER_KINDS; k++) n[k] = 0;
    for (int l = 0; l < c->num_layers; l++) {
        const int k = fam(c)->layer_kind(c, l);
        if (k < 0 || k >= ZT_LAYER_KINDS) zt_fatal("%s: layer %d has kind %d, outside 0..%d", fam(c)->name, l, k,
                                                   ZT_LAYER_KINDS - 1);
        n[k]++;
    }
    int present = 0;
    for (int k = 0; k < ZT_LAYER_KINDS; k++) present += n[k] > 0;
    return present;
}

const char *zt_model_hf_prefix(const zt_model_config *c) {
    const char *p = c->family && c->family->hf_prefix ? c->family->hf_prefix(c) : NULL;
    return p && *p ? p : NULL;
}

void zt_model_layer_plan(const zt_model_config *c, int kind, int64_t S, zt_layer_plan *out) {
    memset(out, 0, sizeof *out);
    fam(c)->layer_plan(c, kind, S, out);
}
