// Hugging Face interchange of a Qwen3 model's weights: safetensors in (checkpoint/hf_weights.c,
// also by slices for an FSDP rank) and out; the checkpoint export is zt_ckpt_export_hf
// (checkpoint/ckpt.h).
// A family may carry tensors it does not train (zt_family.carry_prefixes: Qwen3.5's MTP head and
// vision tower): --init skips them, and the trainer copies them byte for byte into RUN/carry
// (checkpoint/hf_carry.c), from where export and RUN/final write them back.
// defines: zt_hf_load, zt_hf_load_slices, zt_hf_tied_head_differs, zt_hf_save, zt_hf_list_files, zt_hf_is_carried,
//          zt_hf_export_name, zt_hf_carry (zt_hf_carry_write, zt_hf_carry_open, zt_hf_carry_close, zt_hf_carry_of_checkpoint)
#ifndef ZT_CHECKPOINT_HF_H
#define ZT_CHECKPOINT_HF_H
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/safetensors.h"
#include "model/layout.h"

// A checkpoint's tensor names are the layout's, except where the family's name adapter gives a
// prefix P for the text model's "model.X" tensors, which the checkpoint then names "P X"
// (zt_model_hf_prefix, model/family.h: a vision-language wrapper's); this folder names no prefix.

// Hugging Face weights: `path` is a directory (model.safetensors or a sharded
// model.safetensors.index.json) or a single .safetensors file. Fills every
// unit's full vector (fp32). Errors name the file, the tensor and the rule.
int zt_hf_load(const zt_model_layout *lay, const char *path, float *const *params);
// The same checks, but only elements [lo[u], lo[u] + valid[u]) of each unit's canonical
// vector are read, into dst[u] (pointing at element lo[u]): an FSDP rank loads its
// shard without ever holding the whole model.
int zt_hf_load_slices(const zt_model_layout *lay, const char *path, const int64_t *lo, const int64_t *valid,
                            float *const *dst);
// A tied config (cfg->tie_word_embeddings) whose checkpoint at `path` also stores an lm_head.weight
// that is not the embedding's copy: *distinct = 1 and `detail` says where they first differ.
// transformers 5 then does not tie the two (PreTrainedModel.tie_weights: both present with
// different values, "we will NOT tie them", with a warning) and keeps the stored head; a loader
// that took the config's word would drop it. 0 when the config is untied, the head absent, or equal
// values (a copy, which the load passes over); -1 + zt_err on a read error.
int zt_hf_tied_head_differs(const zt_model_config *cfg, const char *path, int *distinct, char *detail, size_t n);
// Write config.json + model.safetensors (dtype: ZT_ST_BF16 or ZT_ST_F32) into dir (names as
// zt_hf_export_name with the family's prefix, zt_model_hf_prefix(&lay->cfg)).
int zt_hf_save(const zt_model_layout *lay, float *const *params, const char *dir, int dtype);

// The safetensors files of a HF checkpoint path (a directory with model.safetensors or a sharded
// index, or one file): *files malloc'd (each entry too), *n of them. -1 + zt_err.
int zt_hf_list_files(const char *path, char ***files, int *n);
// 1 when the family of cfg carries the checkpoint tensor `name` (a carry_prefixes match).
int zt_hf_is_carried(const zt_model_config *cfg, const char *name);
// The checkpoint name of layout tensor `name`: text_prefix (NULL: none) in place of its "model."
// ("model.norm.weight" -> "P norm.weight"); other names as they are.
const char *zt_hf_export_name(const char *text_prefix, const char *name, char *out, size_t n);

// ---- carried tensors: RUN/carry ----------------------------------------------------------
// RUN/carry/carried.safetensors  every carried tensor of --init: name, dtype, shape and bytes as read
// RUN/carry/config.json          the input's config.json, byte for byte
// RUN/carry/manifest.json        source paths, the text prefix, the names, each file's bytes and crc32c
// Written once by rank 0 at a fresh start (RUN/carry.partial, renamed); the training settings
// record the manifest's crc32c (ZT_HF_CARRY_KEY), so a checkpoint names the carry it belongs to.
#define ZT_HF_CARRY_KEY "carry"
typedef struct {
    char dir[4096];
    char source[4096];        // the --init path it was copied from
    char text_prefix[32];     // the family's zt_model_hf_prefix, or "" (the layout's own names)
    char *config_json;        // config.json's bytes (config_len), NUL-terminated
    size_t config_len;
    uint32_t manifest_crc;    // crc32c of manifest.json's bytes
    char record[64];          // "manifest.json crc32c xxxxxxxx": the settings' ZT_HF_CARRY_KEY value
    zt_st_file st;            // carried.safetensors, mapped (fd -1 when not open)
} zt_hf_carry;

// Collects the tensors of the checkpoint at `init` that lay's family carries and writes them with
// config_path's bytes (the input's config.json) into run_dir/carry, replacing what was there.
// *ntensors: how many (0: none; nothing written and run_dir/carry removed). -1 + zt_err.
int zt_hf_carry_write(const zt_model_layout *lay, const char *init, const char *config_path, const char *run_dir,
                      int *ntensors);
// Opens dir (RUN/carry) and verifies its files against manifest.json (bytes, crc32c). -1 + zt_err
// naming the damaged file.
int zt_hf_carry_open(zt_hf_carry *c, const char *dir);
void zt_hf_carry_close(zt_hf_carry *c);
// The carry of a checkpoint: train_json (its training settings) records one (*present = 1) or not
// (0, c untouched). Found as RUN/carry of the run directory the checkpoint (RUN/checkpoints/step-N)
// is in, opened and checked against the record. -1 + zt_err when recorded but absent or different.
int zt_hf_carry_of_checkpoint(const char *ckpt_dir, const char *train_json, zt_hf_carry *c, int *present);
#endif
