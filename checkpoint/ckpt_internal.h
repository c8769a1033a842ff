// Private to checkpoint/ckpt*.c: HDF5 error capture, attribute helpers, and the
// readers of the self-describing parts of ckpt.h5 (header attributes, unit tensor
// tables, crc32c attributes) shared by load, inspect and export; the save's two phases; and
// what the files of the save and load share (the save's context and hooks, agreement, room).
// defines: zt_h5_*, zt_ckpt_unit_info, zt_ckpt_read_*, zt_ckpt_*_name helpers, zt_ckpt_save_ctx,
//          zt_ckpt_save_hooks, zt_ckpt_agreement
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
    int ndim;           // 1..3
    int64_t shape[3];   // unused trailing entries 0
    int64_t offset, numel;
} zt_ckpt_tensor;

// "[4096]", "[1024, 4096]", "[64, 1, 4]": a tensor's shape as the messages and inspect print it.
static inline const char *zt_ckpt_shape_text(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int j = 0; j < ndim && o < n; j++) o += (size_t)snprintf(buf + o, n - o, "%s%lld", j ? ", " : "", (long long)shape[j]);
    if (o < n) snprintf(buf + o, n - o, "]");
    return buf;
}

typedef struct {
    int64_t numel;
    char kind[16];   // "embed", "layer", "head"
    int64_t layer;   // decoder layer index, -1 otherwise
    int ntensors;
    zt_ckpt_tensor *t;  // [ntensors] (malloc'd: a unit holds any number; zt_ckpt_unit_info_free)
} zt_ckpt_unit_info;
void zt_ckpt_unit_info_free(zt_ckpt_unit_info *ui);

// Root attributes: format check, meta, typed model config, optional JSON texts
// (malloc'd; pass NULL to skip), unit count.
int zt_ckpt_read_header(hid_t fid, const char *path, zt_ckpt_meta *meta, zt_model_config *cfg, char **train_json,
                        char **cfg_json, int *nunits);
// /units/NNN group attributes (validated: tensors tile [0, numel) in order). On failure ui holds
// nothing to free; on success free it with zt_ckpt_unit_info_free.
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

// ---- the save and load of checkpoint/ckpt.c, split by job -----------------------------------

// ckpt.c: the shards' checks; the MPI-IO file access of a save (writing) or a load.
int zt_ckpt_check_shards(const zt_model_layout *lay, const zt_ckpt_shards *sh);
hid_t zt_ckpt_mpio_fapl(MPI_Comm comm, int writing);
// Dataset k (0 master, 1 adam_m, 2 adam_v) of a slice.
static inline const float *zt_ckpt_slice_ptr(const zt_ckpt_slice *s, int k) {
    return k == 0 ? s->master : k == 1 ? s->m : s->v;
}

// The test and fault hooks of one save (base/env.h, docs/design.md), read once at its start.
typedef struct {
    int64_t fail_after_bytes;  // ZT_CKPT_FAIL_AFTER_BYTES for this step: injected ENOSPC, -1 off
    int no_space_check;        // ZT_CKPT_NO_SPACE_CHECK
    int no_reserve;            // ZT_CKPT_NO_RESERVE
    int no_odirect;            // ZT_CKPT_DEBUG_NO_ODIRECT: every O_DIRECT write fails with EINVAL
    int64_t crc_chunk;         // ZT_CKPT_CRC_CHUNK (rank 0's is used), 0 unset
    int stall;                 // ZT_CKPT_DEBUG_STALL_RANK is this rank, for this step
    unsigned stall_s;          // ZT_CKPT_DEBUG_STALL_S (3600)
    const char *pause_s;       // ZT_CKPT_DEBUG_PAUSE_S for this step, NULL off
    int debug_io;              // ZT_CKPT_DEBUG_IO
    int debug_h5;              // ZT_CKPT_DEBUG_H5
} zt_ckpt_save_hooks;

// One save's state, from zt_ckpt_write_partial to zt_ckpt_commit_partial.
typedef struct {
    MPI_Comm comm;
    int rank, world;
    const zt_model_layout *lay;
    const zt_ckpt_shards *sh;
    int64_t step, chunk;
    char ckdir[4096], name[64], final_dir[4200], partial[4300], file[4400];
    char prev[256];      // what latest named before this save ("" if none)
    uint32_t **crc;      // [nunits * 3]
    hid_t fid, dxpl;
    hid_t *ds;           // [nunits * 3]
    zt_ckpt_save_hooks hooks;
    int64_t bytes_written;
    // --save-io direct|posix: the datasets' bytes go straight to the file at their offsets
    int io;              // ZT_SAVE_IO_*
    int fd, dfd;         // the file, buffered / O_DIRECT (-1: none)
    int64_t *off;        // [nunits * 3] file offset of each dataset's first byte
    char *bounce;        // ZT_IO_ALIGN-aligned staging for O_DIRECT writes
    int64_t direct_bytes, buffered_bytes;
} zt_ckpt_save_ctx;

// ckpt_resolve.c: directories and `latest`.
int zt_ckpt_is_dir(const char *p);
// fsync of a file, or of a directory (dir = 1; a file system that cannot is let be).
int zt_ckpt_fsync_path(const char *p, int dir);
// "step-N" (digits only): 1 and *step (may be NULL) = N.
int zt_ckpt_is_step_name(const char *name, int64_t *step);
// Contents of CKDIR/latest, trimmed; "" when absent (with *exists = 0).
int zt_ckpt_read_latest(const char *ckdir, char *out, size_t n, int *exists);
// CKDIR/latest = name, atomically (latest.tmp, fsync, rename, fsync of CKDIR).
int zt_ckpt_write_latest(const char *ckdir, const char *name);
// Complete checkpoints beyond keep_last (never `keep`) and stale directories removed; warns only.
void zt_ckpt_prune(const char *ckdir, const char *keep, int keep_last);

// ckpt_agree.c. Collective: 0 when every rank is ok; otherwise every rank gets the message of
// the lowest failing rank ("rank R: ...", plus how many others failed) and -1.
int zt_ckpt_agree(MPI_Comm comm, int ok);
// A sequence of agreements: once one has failed (every rank holds the same message),
// later ones are skipped so the message is not wrapped twice. 0 while all is well.
typedef struct {
    MPI_Comm comm;
    int failed;
} zt_ckpt_agreement;
int zt_ckpt_agree_step(zt_ckpt_agreement *a, int *ok);
// MPI_Wait that sleeps instead of spinning a core.
void zt_ckpt_wait_quietly(MPI_Request *rq);
// Collective: 0 when every rank's file is the same one, else ZT_CKPT_LOAD_DIFFERENT + zt_err.
int zt_ckpt_agree_same_file(MPI_Comm comm, const char *dir, const char *file);

// ckpt_space.c
int64_t zt_ckpt_estimate_bytes(const zt_model_layout *lay);
int zt_ckpt_space_check(const char *dir, int64_t need);
int zt_ckpt_reserve_space(const char *file, int64_t bytes);
void zt_ckpt_release_space(const char *file);

// ckpt_meta.c: collective metadata (every rank passes identical values); rank 0's meta.json.
int zt_ckpt_write_metadata(zt_ckpt_save_ctx *c, const zt_ckpt_meta *m, const char *train_json);
int zt_ckpt_write_meta_json(const zt_ckpt_save_ctx *c, const zt_ckpt_meta *m, double seconds);

// ckpt_io.c: --save-io direct|posix opens the file for its raw writes (every rank, after the
// datasets exist); each slice written (a collective with --save-io mpiio); when the units are
// written, the descriptors closed and this rank's byte counts kept (zt_ckpt_last_save_io).
int zt_ckpt_open_raw(zt_ckpt_save_ctx *c);
void zt_ckpt_close_raw(zt_ckpt_save_ctx *c);
int zt_ckpt_write_slice(zt_ckpt_save_ctx *c, int u, int k);
void zt_ckpt_raw_done(zt_ckpt_save_ctx *c);
#endif
