// What each rank reads at start, fingerprinted so the ranks can compare it (train/input_digest.c).
// zt_settings_agree compares the flags, so every rank names the same --model, --init and --data;
// but each rank reads those paths on its own node, and a stale copy on one node or a mount that
// shows another directory at the path trained silently: a model config that differs (mixed
// losses), two --init weight sets (each rank loading its shard from its own: a mix of two
// checkpoints), or two datasets of the same shape. These digests, gathered and compared like the
// settings before anything in RUN is touched, refuse that, naming the input, the file and the
// ranks; run.json records rank 0's ("inputs").
// defines: zt_input_paths, zt_input_digest, zt_input_digest_make, zt_input_digest_agree,
//          zt_input_digest_free
#ifndef ZT_TRAIN_INPUT_DIGEST_H
#define ZT_TRAIN_INPUT_DIGEST_H
#include <mpi.h>

// The paths a job reads at start (NULL: not given).
typedef struct {
    const char *model;      // the model config: --model, else --init (a config.json or a directory holding one)
    const char *init;       // --init: the safetensors files of a Hugging Face directory or one file
    const char *data;       // --data
    const char *eval_data;  // --eval-data
} zt_input_paths;

enum { ZT_INPUT_MODEL, ZT_INPUT_INIT, ZT_INPUT_DATA, ZT_INPUT_EVAL, ZT_INPUT_COUNT };

typedef struct {
    char *lines[ZT_INPUT_COUNT];  // per input, its "key=value\n" lines (NULL: not given, or this rank
                                  // could not read it: the phase that reads it reports why)
    char *json;                   // the record for run.json's "inputs" (a JSON object's text)
} zt_input_digest;

// This rank's digests of what the paths hold, cheaply: the model config as resolved (field by
// field: two files that say the same agree), each --init safetensors file's fingerprint
// (checkpoint/safetensors.h: size, tensor table, sampled bytes), each dataset's dataset.json
// (its CRC-32C: it records every block file's crc32c; in a per-rank layout, where each rank
// trains on its own file by design, only what must agree: seq_len, vocabulary, tokenizer, ...).
// Never fails: an input this rank cannot read is left out (lines NULL).
void zt_input_digest_make(zt_input_digest *d, const zt_input_paths *p);
// Collective over comm: 0 when every rank read the same; -1 on every rank + zt_err naming each
// difference (the input, the file or field, its values and the ranks holding each). An input
// some rank could not read is not compared (reading it fails later, agreed and named).
int zt_input_digest_agree(MPI_Comm comm, const zt_input_digest *d);
void zt_input_digest_free(zt_input_digest *d);
#endif
