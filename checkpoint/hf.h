// Hugging Face interchange of a Qwen3 model's weights: safetensors in (checkpoint/hf_weights.c,
// also by slices for an FSDP rank) and out; the checkpoint export is zt_ckpt_export_hf
// (checkpoint/ckpt.h).
// defines: zt_hf_load, zt_hf_load_slices, zt_hf_save
#ifndef ZT_CHECKPOINT_HF_H
#define ZT_CHECKPOINT_HF_H
#include <stdint.h>

#include "model/layout.h"

// Hugging Face weights: `path` is a directory (model.safetensors or a sharded
// model.safetensors.index.json) or a single .safetensors file. Fills every
// unit's full vector (fp32). Errors name the file, the tensor and the rule.
int zt_hf_load(const zt_model_layout *lay, const char *path, float *const *params);
// The same checks, but only elements [lo[u], lo[u] + valid[u]) of each unit's canonical
// vector are read, into dst[u] (pointing at element lo[u]): an FSDP rank loads its
// shard without ever holding the whole model.
int zt_hf_load_slices(const zt_model_layout *lay, const char *path, const int64_t *lo, const int64_t *valid,
                            float *const *dst);
// Write config.json + model.safetensors (dtype: ZT_ST_BF16 or ZT_ST_F32) into dir.
int zt_hf_save(const zt_model_layout *lay, float *const *params, const char *dir, int dtype);
#endif
