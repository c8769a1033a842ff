// The parameter layout of a model: which Hugging Face tensors live in which FSDP unit, in
// what order, at what offset of the unit's flat vector. Unit 0 = embedding; units 1..L =
// decoder layers; unit L+1 = the head. The family builds it (model/family.h); the passes,
// the engines and the checkpoints all read it. Qwen3's layout: model/layout.c.
// defines: zt_model_layout, zt_unit_layout, zt_tensor_desc, ZT_L_*, zt_qwen3_layer_shapes,
//          zt_layout_add_tensor (a unit's tensor list grows: any count), zt_model_layout_init/free/find,
//          zt_model_init_unit, zt_qwen3_layout_init, zt_qwen3_init_unit,
//          zt_qwen3_param_count, zt_qwen3_max_positions
#ifndef ZT_LAYOUT_H
#define ZT_LAYOUT_H
#include <stdint.h>

#include "model/config.h"

typedef enum { ZT_UNIT_EMBED = 0, ZT_UNIT_LAYER = 1, ZT_UNIT_HEAD = 2 } zt_unit_kind;

// Tensor order inside a decoder-layer unit (the canonical flat order).
enum {
    ZT_L_INPUT_NORM, ZT_L_Q, ZT_L_K, ZT_L_V, ZT_L_O, ZT_L_QNORM, ZT_L_KNORM, ZT_L_POST_NORM,
    ZT_L_GATE, ZT_L_UP, ZT_L_DOWN, ZT_L_NTENSORS
};

// Shapes [rows, cols] (cols 0: a vector) of a decoder layer's tensors in that order: the one
// definition model/layout.c (the unit layout) and the CUDA layer (its offsets) both use.
static inline void zt_qwen3_layer_shapes(int64_t d, int64_t F, int64_t H, int64_t Hkv, int64_t D,
                                         int64_t shape[ZT_L_NTENSORS][2]) {
    const int64_t s[ZT_L_NTENSORS][2] = {{d, 0},       {H * D, d}, {Hkv * D, d}, {Hkv * D, d}, {d, H * D}, {D, 0},
                                         {D, 0},       {d, 0},     {F, d},       {F, d},       {d, F}};
    for (int i = 0; i < ZT_L_NTENSORS; i++) shape[i][0] = s[i][0], shape[i][1] = s[i][1];
}

typedef struct {
    char name[96];      // Hugging Face tensor name
    int ndim;           // 1, 2 or 3 (Qwen3.5's conv1d.weight [C, 1, K])
    int64_t shape[3];   // [out, in] for matrices; unused trailing entries 0
    int64_t offset;     // element offset inside the unit's flat vector
    int64_t numel;
    int decay;          // weight decay applies (matrices and embeddings, not norm weights)
} zt_tensor_desc;

typedef struct {
    zt_unit_kind kind;
    int layer;          // decoder layer index for ZT_UNIT_LAYER, else -1
    int ntensors;
    zt_tensor_desc *t;  // [ntensors]: grown by zt_layout_add_tensor (any count: an MoE layer has
                        // hundreds), freed by zt_model_layout_free
    int cap;            // entries allocated at t
    int64_t numel;      // unpadded elements in the unit
} zt_unit_layout;

typedef struct {
    zt_model_config cfg;
    int nunits;
    zt_unit_layout *units;
    int64_t total_numel;
} zt_model_layout;

// The layout of cfg's family (cfg->family->layout_init; model/family.c); free with
// zt_model_layout_free (which frees every unit's tensor list).
int zt_model_layout_init(zt_model_layout *lay, const zt_model_config *cfg);
void zt_model_layout_free(zt_model_layout *lay);
// Appends a tensor of ndim (1..3) dimensions to unit u at the end of its flat vector (the unit's
// list grows as needed); weight decay applies when ndim >= 2. -1 + zt_err on a bad ndim or a
// count past INT_MAX / 2.
int zt_layout_add_tensor(zt_unit_layout *u, const char *name, int ndim, const int64_t *shape);
// Find a tensor by HF name; returns 0 and sets *unit/*idx, or -1.
int zt_model_layout_find(const zt_model_layout *lay, const char *name, int *unit, int *idx);
// A unit's initial values, by its family (model/family.c). Each tensor draws from its own
// stream (seed, unit, tensor), so the values do not depend on how units are later sharded.
void zt_model_init_unit(const zt_model_layout *lay, int unit, float *params, uint64_t seed);

// Qwen3's (its family table, model/qwen3.c, points at these): the layout (unit 0 = embedding;
// units 1..L = decoder layers; unit L+1 = final norm (+ lm_head when untied)); transformers-style
// init, N(0, initializer_range) for matrices, 1 for norms; the parameter count (tied embeddings
// counted once; -1 on overflow); the RoPE's range (max_position_embeddings, or with YaRN the
// scaled range factor x original_max_position_embeddings when that is larger).
int zt_qwen3_layout_init(zt_model_layout *lay, const zt_model_config *cfg);
void zt_qwen3_init_unit(const zt_model_layout *lay, int unit, float *params, uint64_t seed);
int64_t zt_qwen3_param_count(const zt_model_config *c);
int64_t zt_qwen3_max_positions(const zt_model_config *c);
#endif
