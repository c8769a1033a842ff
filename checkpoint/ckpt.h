// Sharded training checkpoints: one HDF5 file written collectively by every rank
// through parallel HDF5 (MPI-IO), each rank writing its own slice of every unit's
// canonical flat vector (fp32 master, Adam m, Adam v), crc32c per fixed-size chunk,
// committed by renaming RUN/checkpoints/step-NNNNNNNN.partial/ and then `latest`.
// Reads at any world size (reshard), Hugging Face export, inspection.
// The file format is described in docs/checkpoint-format.md.
// defines: zt_ckpt_meta, zt_ckpt_slice, zt_ckpt_shards, zt_ckpt_save, zt_ckpt_resolve,
//          zt_ckpt_open_meta, zt_ckpt_load, zt_ckpt_export_hf, zt_ckpt_inspect,
//          zt_ckpt_config_diff, zt_ckpt_check_train_json, zt_crc32c_combine
#ifndef ZT_CKPT_H
#define ZT_CKPT_H
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/qwen3.h"

#define ZT_CKPT_FORMAT "zerotrain-checkpoint"
#define ZT_CKPT_VERSION 1
#define ZT_CKPT_FILE "ckpt.h5"
#define ZT_CKPT_CRC_CHUNK_DEFAULT (1 << 20)  // elements (4 MiB of fp32) per crc32c

// Training state that is not parameters. Everything here is stored as HDF5
// attributes on the file's root group (names in docs/checkpoint-format.md).
typedef struct {
    int64_t step;          // optimizer steps completed (the next step to run is step + 1)
    int64_t epoch;         // epoch the next step belongs to
    int64_t epoch_step;    // steps already done inside `epoch` (the data cursor, in steps)
    int64_t epoch_blocks;  // blocks of the epoch's global order already consumed (cursor in blocks,
                           // what a run at another world size needs)
    int64_t tokens_seen;   // global tokens trained on so far
    uint64_t seed;         // the run's --seed
    uint64_t rng_state[4]; // any generator state the loop carries (e.g. zt_rng.s)
    int world_size;        // ranks at save (filled in by zt_ckpt_save from the communicator)
    char run_id[64];
    double lr_last;        // learning rate of the last step (informational)
    int final;             // 1: the run's final checkpoint (training finished)
} zt_ckpt_meta;

// One rank's view of one unit: elements [lo, lo + valid) of the unit's unpadded
// canonical vector of numel elements; master, m, v point at element lo. With
// engine/fsdp.h: numel = u->numel, lo = u->lo, valid = u->valid (0 on ranks whose
// slice is all padding), master = u->master, m = u->m, v = u->v.
typedef struct {
    int64_t numel, lo, valid;
    float *master, *m, *v;
} zt_ckpt_slice;

typedef struct {
    int nunits;           // must equal the model's unit count (num_hidden_layers + 2)
    zt_ckpt_slice *unit;  // [nunits]
} zt_ckpt_shards;

// ---- collective (every rank of comm calls it with the same arguments except sh) ----

// Save step meta->step into RUN/checkpoints/step-NNNNNNNN/ckpt.h5 (+ meta.json).
// lay (model/qwen3.h) gives the config and each unit's tensor table, which the file
// stores so that export, inspect and other tools need no model code.
// Sequence: barrier; rank 0 checks free space and creates step-N.partial/; collective
// H5Fcreate; rank 0 reserves the file's blocks (fallocate); crc32c pieces are
// all-gathered and combined into per-chunk attributes; every rank writes its slices
// (ok flag all-reduced after each unit); H5Fclose; every rank fsyncs the file; rank 0 writes
// meta.json, renames .partial -> step-N, fsyncs the directory, points `latest` at it
// (tmp + rename + fsync), then removes complete checkpoints beyond keep_last (0: keep
// all; never the new one) and stale .partial directories. Any failure on any rank
// fails the save on every rank (-1 + the same zt_err on all), removes the .partial
// directory and leaves `latest` and earlier checkpoints untouched.
// train_json: the caller's training settings (opaque JSON text, may be NULL).
// out_path (may be NULL) receives the committed directory on success.
// Test hooks (environment): ZT_CKPT_FAIL_AFTER_BYTES=N makes this rank's data writes
// fail like ENOSPC once it has written N bytes; ZT_CKPT_NO_SPACE_CHECK=1 skips the
// free-space check; ZT_CKPT_NO_RESERVE=1 skips the reservation; ZT_CKPT_CRC_CHUNK=E
// sets elements per crc32c chunk (rank 0's value).
// How the datasets' bytes reach the file is zt_ckpt_set_save_io's choice (default direct).
int zt_ckpt_save(MPI_Comm comm, const char *run_dir, const zt_ckpt_meta *meta, const zt_model_layout *lay,
                 const char *train_json, const zt_ckpt_shards *sh, int keep_last, char *out_path, size_t out_len);

// --save-io: how a save writes the datasets' bytes (the metadata always goes through
// parallel HDF5, and the file is the same byte for byte either way).
//   ZT_SAVE_IO_DIRECT  every rank writes its slices itself at the dataset's file offset
//                      (H5Dget_offset): the whole 4 KiB blocks it owns with O_DIRECT (no page-cache
//                      copy), the partial blocks at its slice's two ends with pwrite; O_DIRECT
//                      refused by the file system (EINVAL) falls back to pwrite for the rest
//   ZT_SAVE_IO_POSIX   the same with pwrite only (through the page cache)
//   ZT_SAVE_IO_MPIIO   H5Dwrite, collective MPI-IO (the library's two-phase aggregation)
// Process-wide; set before the first save (and before --async-save's writer starts).
enum { ZT_SAVE_IO_DIRECT = 0, ZT_SAVE_IO_POSIX = 1, ZT_SAVE_IO_MPIIO = 2 };
void zt_ckpt_set_save_io(int mode);
int zt_ckpt_get_save_io(void);
// This rank's data bytes of its last save written with O_DIRECT / with pwrite (0 / 0 with mpiio).
// Testing: ZT_CKPT_DEBUG_NO_ODIRECT=1 makes every O_DIRECT write fail with EINVAL (the fallback);
// ZT_CKPT_DEBUG_IO=1 prints both counts per rank on stderr after each save.
void zt_ckpt_last_save_io(int64_t *direct, int64_t *buffered);

// Read this rank's slices (any world size: sh describes the slices of the current
// run) and verify their crc32c chunks: chunk c is verified by the rank whose slice
// holds its first element, so together the ranks verify every chunk of every dataset.
// Refuses a .partial directory, a file that is not a zerotrain checkpoint, a model
// config that differs from lay->cfg (the message names every differing field) and a
// tensor table that differs from lay's. meta (may be NULL) receives the stored state.
// Each rank resolves ckpt_dir itself (a run directory's latest, ...); when the ranks
// resolved different files (size and modification time of ckpt.h5 compared), nothing is
// read and every rank returns ZT_CKPT_LOAD_DIFFERENT with a message naming each checkpoint
// and its ranks: not a damaged checkpoint (--resume auto must not fall back past it). Any
// other failure: -1.
#define ZT_CKPT_LOAD_DIFFERENT (-2)
int zt_ckpt_load(MPI_Comm comm, const char *ckpt_dir, const zt_model_layout *lay, zt_ckpt_meta *meta,
                 const zt_ckpt_shards *sh);

// ---- serial ----

// Resolve a RUN directory (via RUN/checkpoints/latest), a checkpoints directory (via
// its latest), a step directory, or a ckpt.h5 path to a complete step directory.
// Refuses *.partial, a missing or dangling latest (naming the complete checkpoints
// that are there), and a directory without ckpt.h5.
int zt_ckpt_resolve(const char *path, char *out, size_t n);

// Checkpoint entries of RUN/checkpoints: step-NNNNNNNN directories, complete or .partial,
// and a latest file. Returns how many (0: none); their names, comma-separated, in names
// (may be NULL). The fresh-start guard and --resume auto use it: a run directory with any
// checkpoint is never started over without --overwrite.
int zt_ckpt_scan_run(const char *run_dir, char *names, size_t n);

// --resume auto: the checkpoints to try, best first: RUN/checkpoints/latest when it
// resolves, then every other complete step directory whose metadata reads, newest first
// (the trainer loads them in that order and falls back past one whose data checksums fail).
// > 0: how many, *paths a NULL-terminated malloc'd list (zt_ckpt_free_paths); note says why
// latest was not used and what was skipped, when it was not. 0: RUN holds no checkpoint at
// all (a fresh start is right). -1 + zt_err: checkpoints are there but none can be resumed
// from (the message names them and why).
int zt_ckpt_auto_candidates(const char *run_dir, char ***paths, char *note, size_t note_n);
void zt_ckpt_free_paths(char **paths);

// Deletes RUN/checkpoints/step-N.removing directories (a prune interrupted by a crash;
// pruning renames a checkpoint to that name before deleting it), naming each on log.
// Only for the job holding the run directory's lock. 0, or -1 + zt_err.
int zt_ckpt_clear_removing(const char *run_dir, FILE *log);

// Attributes only (no parameter data, no checksum pass). cfg and train_json may be
// NULL; *train_json is malloc'd ("" when the checkpoint has none).
int zt_ckpt_open_meta(const char *ckpt_dir, zt_ckpt_meta *meta, zt_model_config *cfg, char **train_json);

// Hugging Face export of the fp32 master weights: config.json plus model.safetensors,
// or model-0000i-of-0000n.safetensors + model.safetensors.index.json when the tensors
// exceed max_shard_bytes (<= 0: 5 GB). dtype: ZT_ST_BF16 or ZT_ST_F32. Every crc32c
// chunk of the master datasets is verified first. out_dir must not exist or be empty.
int zt_ckpt_export_hf(const char *ckpt_dir, const char *out_dir, int dtype, int64_t max_shard_bytes);

// Print step, epoch, world size, run id, config, the unit/tensor list, and verify
// every crc32c chunk of every dataset. 0 when all checksums match, -1 otherwise.
int zt_ckpt_inspect(const char *ckpt_dir, FILE *out);

// ---- helpers ----

// Names every field that differs ("checkpoint has hidden_size 48, the run has 64;
// ...") into out; returns the number of differing fields. initializer_range is not
// compared (it only matters for a fresh init).
int zt_ckpt_config_diff(const zt_model_config *ckpt, const zt_model_config *run, char *out, size_t n);

// Compare two JSON objects key by key (top level; nested values compared whole),
// ignoring the keys in `ignore` (NULL-terminated list, may be NULL). 0 when equal,
// else -1 + zt_err naming each differing key with both values.
int zt_ckpt_check_train_json(const char *saved, const char *now, const char *const *ignore);

// ---- asynchronous save (checkpoint/ckpt_async.c; docs/checkpoint-format.md) ----
// A host snapshot of this rank's shards and a writer thread that writes it with
// zt_ckpt_save's own code on a duplicate of the communicator; the caller commits at a later
// step boundary. Needs MPI_THREAD_MULTIPLE. HDF5 is used by the writer thread only while a
// save is in flight: the caller makes no other checkpoint call until it is committed or
// abandoned (the HDF5 library is not built thread-safe).
typedef struct zt_ckpt_async zt_ckpt_async;
// Bytes of the snapshot: this rank's valid elements of every unit x (master, m, v) x 4.
int64_t zt_ckpt_snapshot_bytes(const zt_ckpt_shards *sh);
// Collective on comm: refuses an MPI without MPI_THREAD_MULTIPLE, allocates (and touches) the
// snapshot for sh's slices, duplicates comm for the writer. copy = 0: no snapshot buffer; the
// writer reads the shards passed to zt_ckpt_async_start themselves, which the caller keeps
// unchanged until the save is committed or abandoned (the GPU engine's host copies, filled by
// its own device-to-host snapshot). 0 or -1 + zt_err.
int zt_ckpt_async_create(MPI_Comm comm, const zt_model_layout *lay, const zt_ckpt_shards *sh, int copy,
                         zt_ckpt_async **out);
int64_t zt_ckpt_async_bytes(const zt_ckpt_async *a);
// Local (no collective): start the writer for meta->step, which (copy = 1) first copies sh (the
// same slices as at create; the caller keeps them alive and unchanged until
// zt_ckpt_async_wait_copied returns) into the snapshot. Refused while a save is in flight.
// 0 or -1 + zt_err.
int zt_ckpt_async_start(zt_ckpt_async *a, const char *run_dir, const zt_ckpt_meta *meta, const char *train_json,
                        const zt_ckpt_shards *sh);
int64_t zt_ckpt_async_step(const zt_ckpt_async *a);   // the step in flight, -1 when none
int zt_ckpt_async_done(const zt_ckpt_async *a);       // this rank's writer has finished (no wait)
// copy = 1: the snapshot copy itself runs on the writer thread, first, while the caller's next
// step reads the shards; before anything changes them again (the optimizer update) the caller
// waits in zt_ckpt_async_wait_copied (arg: the zt_ckpt_async; the seconds it waited; 0 at once
// when no copy is pending; fits zt_fsdp_set_update_fence). zt_ckpt_async_copied: 1 once the copy is
// complete (*copy_s: how long it took).
double zt_ckpt_async_wait_copied(void *arg);
int zt_ckpt_async_copied(const zt_ckpt_async *a, double *copy_s);
void zt_ckpt_async_join(zt_ckpt_async *a);            // wait for this rank's writer
double zt_ckpt_async_write_seconds(const zt_ckpt_async *a);  // the last write's duration (after join)
// Collective on comm once every rank's writer has finished (the caller agrees on that first):
// joins, then commits as zt_ckpt_save does (meta.json, .partial -> step-N, latest, prune to
// keep_last), or returns the writers' agreed error (the .partial already removed). Either way
// nothing is in flight afterwards.
int zt_ckpt_async_commit(zt_ckpt_async *a, MPI_Comm comm, int keep_last, char *out_path, size_t out_len);
// Local: wait for the writer and drop its result uncommitted (error paths).
void zt_ckpt_async_abandon(zt_ckpt_async *a);
void zt_ckpt_async_destroy(zt_ckpt_async *a);  // abandon, free the communicator and the snapshot

// CRC-32C of A||B from crc(A), crc(B) and len(B) (zlib's crc32_combine for the
// Castagnoli polynomial): how slices written by different ranks get one chunk crc.
uint32_t zt_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
#endif
