// Private to checkpoint/ckpt*.c: HDF5 error capture, attribute helpers, and the
// readers of the self-describing parts of ckpt.h5 (header attributes, unit tensor
// tables, crc32c attributes) shared by load, inspect and export.
// defines: zt_h5_*, zt_ckpt_unit_info, zt_ckpt_read_*, zt_ckpt_*_name helpers
#ifndef ZT_CKPT_INTERNAL_H
#define ZT_CKPT_INTERNAL_H
#include <hdf5.h>

#include "checkpoint/ckpt.h"
#include "model/hf_config.h"  // the config codec: stored in and validated from the header

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint crc32c values are defined over little-endian fp32 bytes; add byte swapping for this host"
#endif

#define ZT_CKPT_NDS 3
extern const char *const zt_ckpt_ds_names[ZT_CKPT_NDS];  // "master", "adam_m", "adam_v"

// "<prefix>: <current message>" keeping the whole message (up to ZT_ERR_MAX). -1.
int zt_ckpt_err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Silence HDF5's automatic stack printing (errors are reported through zt_err).
void zt_h5_quiet(void);
// The innermost HDF5 error descriptions of the current stack ("truncated file: eof =
// ..."), joined by "; ", then the stack is cleared. Thread-local buffer.
const char *zt_h5_why(void);

// Attributes on any object (file, group, dataset). Writers: 0 or -1 + zt_err.
int zt_h5_put_i64(hid_t loc, const char *name, int64_t v);
int zt_h5_put_f64(hid_t loc, const char *name, double v);
int zt_h5_put_u64v(hid_t loc, const char *name, const uint64_t *v, int n);
int zt_h5_put_u32v(hid_t loc, const char *name, const uint32_t *v, int64_t n);
int zt_h5_put_str(hid_t loc, const char *name, const char *s);
// Readers name `where` (file and object) in their errors.
int zt_h5_get_i64(hid_t loc, const char *where, const char *name, int64_t *v);
int zt_h5_get_f64(hid_t loc, const char *where, const char *name, double *v);
int zt_h5_get_u64v(hid_t loc, const char *where, const char *name, uint64_t *v, int n);
// *v malloc'd, *n elements.
int zt_h5_get_u32v(hid_t loc, const char *where, const char *name, uint32_t **v, int64_t *n);
// malloc'd NUL-terminated string, or NULL + zt_err.
char *zt_h5_get_str(hid_t loc, const char *where, const char *name);

// One unit's tensor table as stored in /units/NNN attribute "tensors".
typedef struct {
    char name[96];
    int ndim;
    int64_t shape[2];
    int64_t offset, numel;
} zt_ckpt_tensor;

typedef struct {
    int64_t numel;
    char kind[16];   // "embed", "layer", "head"
    int64_t layer;   // decoder layer index, -1 otherwise
    int ntensors;
    zt_ckpt_tensor t[ZT_UNIT_MAX_TENSORS];
} zt_ckpt_unit_info;

// Root attributes: format check, meta, typed model config, optional JSON texts
// (malloc'd; pass NULL to skip), unit count.
int zt_ckpt_read_header(hid_t fid, const char *path, zt_ckpt_meta *meta, zt_model_config *cfg, char **train_json,
                        char **cfg_json, int *nunits);
// /units/NNN group attributes (validated: tensors tile [0, numel) in order).
int zt_ckpt_read_unit(hid_t fid, const char *path, int u, zt_ckpt_unit_info *ui);
// A dataset's numel and crc32c attributes, checked for consistency. *crc malloc'd.
int zt_ckpt_read_crc(hid_t ds, const char *where, int64_t numel, int64_t *chunk, uint32_t **crc, int64_t *nchunks);
// "model.layers.0.self_attn.q_proj.weight .. model.layers.0.mlp.up_proj.weight": the
// tensors that elements [a, b) of a unit overlap.
void zt_ckpt_span_tensors(const zt_ckpt_unit_info *ui, int64_t a, int64_t b, char *out, size_t n);
// "embedding", "decoder layer 3", "final norm + lm_head"
const char *zt_ckpt_unit_label(const zt_ckpt_unit_info *ui, char *buf, size_t n);
// Hugging Face config.json text for cfg (malloc'd); the same keys as model/config.c.
// Serial open for reading (sec2 driver); -1 + zt_err naming the file and the reason.
hid_t zt_ckpt_open_serial(const char *file);
// Verify chunks of data[0, n) that holds elements [a, a + n) of a dataset whose
// chunks are chunk elements long, for every chunk c whose range lies inside it.
// Returns the first bad chunk index or -1 when all match; *computed gets its crc.
int64_t zt_ckpt_verify_range(const float *data, int64_t a, int64_t n, int64_t numel, int64_t chunk,
                             const uint32_t *crc, uint32_t *computed);

// A save split in two (zt_ckpt_save is one after the other; the background writer of
// checkpoint/ckpt_async.c runs the first on its own thread and communicator, the trainer the
// second at a later step boundary).
// Phase 1, collective on comm: checksums, step-N.partial/ckpt.h5 written and fsynced on every
// rank. On failure: .partial removed, -1 + the same zt_err on every rank, *out NULL.
typedef struct zt_ckpt_pending zt_ckpt_pending;
int zt_ckpt_write_partial(MPI_Comm comm, const char *run_dir, const zt_ckpt_meta *meta, const zt_model_layout *lay,
                          const char *train_json, const zt_ckpt_shards *sh, zt_ckpt_pending **out);
// Phase 2, collective on comm (any communicator over the same ranks): rank 0 writes meta.json,
// renames .partial -> step-N, moves latest, prunes to keep_last; agreed. Frees p.
int zt_ckpt_commit_partial(MPI_Comm comm, zt_ckpt_pending *p, int keep_last, char *out_path, size_t out_len);
int64_t zt_ckpt_pending_step(const zt_ckpt_pending *p);
void zt_ckpt_pending_free(zt_ckpt_pending *p);
#endif
