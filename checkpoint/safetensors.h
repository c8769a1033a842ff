// safetensors reader and writer (Hugging Face's format): u64 little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets}}, then the data.
// Reader validates everything in ../docs/formats.md before handing out a tensor.
// defines: zt_st_file, zt_st_open, zt_st_find, zt_st_read_f32, zt_st_writer_* (zt_st_writer_add_raw: bytes as they are),
//          zt_st_fingerprint_file
#ifndef ZT_SAFETENSORS_H
#define ZT_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#include "base/bf16.h"

typedef enum { ZT_ST_F32, ZT_ST_BF16, ZT_ST_F16, ZT_ST_F64, ZT_ST_I64, ZT_ST_I32, ZT_ST_U32, ZT_ST_U8, ZT_ST_OTHER } zt_st_dtype;

typedef struct {
    char name[256];
    zt_st_dtype dtype;
    char dtype_name[12];     // as the header spells it ("BF16", "F8_E4M3", ...)
    int ndim;
    int64_t shape[8];
    int64_t numel;
    uint64_t begin, end;     // absolute byte offsets in the file
} zt_st_tensor;

typedef struct {
    char path[4096];
    int fd;
    const uint8_t *map;      // whole file mapped
    size_t size;
    int ntensors;
    zt_st_tensor *tensors;
} zt_st_file;

// Open and validate: header length within file and <= 100 MB, valid JSON,
// known dtypes, data_offsets contiguous from 0 with no gaps/overlaps, inside the
// file, end - begin == numel * dtype size. -1 + zt_err naming the file and tensor.
int zt_st_open(zt_st_file *f, const char *path);
void zt_st_close(zt_st_file *f);
const zt_st_tensor *zt_st_find(const zt_st_file *f, const char *name);
// Convert a F32/BF16/F16/F64 tensor to fp32 into out (numel floats).
int zt_st_read_f32(const zt_st_file *f, const zt_st_tensor *t, float *out);
// Elements [first, first + count) of the tensor (row-major flat index) into out.
int zt_st_read_f32_range(const zt_st_file *f, const zt_st_tensor *t, int64_t first, int64_t count, float *out);
// Copy a I32/I64/U32 tensor into int64 out.
int zt_st_read_i64(const zt_st_file *f, const zt_st_tensor *t, int64_t *out);
const char *zt_st_dtype_name(zt_st_dtype d);
// Copy the __metadata__ string for `key` into out; -1 + zt_err when absent.
int zt_st_metadata(const zt_st_file *f, const char *key, char *out, size_t out_len);
size_t zt_st_dtype_size(zt_st_dtype d);

// Writer: add tensors (data copied on add is NOT required: pointers must stay
// valid until zt_st_write), then write atomically (tmp + rename).
typedef struct zt_st_writer zt_st_writer;
zt_st_writer *zt_st_writer_new(void);
// data holds numel fp32 values; stored as `dtype` (F32 or BF16, round-to-nearest-even).
int zt_st_writer_add_f32(zt_st_writer *w, const char *name, const float *data, int ndim, const int64_t *shape,
                         zt_st_dtype dtype);
// A tensor of any whole-byte dtype (dtype_name as the format spells it: "BF16", "I8", "F8_E4M3",
// ...) whose nbytes bytes are written as they are (a tensor carried through bit-identically).
int zt_st_writer_add_raw(zt_st_writer *w, const char *name, const char *dtype_name, int ndim, const int64_t *shape,
                         const void *data, uint64_t nbytes);
int zt_st_writer_metadata(zt_st_writer *w, const char *key, const char *value);
int zt_st_write(zt_st_writer *w, const char *path);
void zt_st_writer_free(zt_st_writer *w);

// A cheap fingerprint of a safetensors file, to tell two copies apart without reading either whole
// (a 32B model's --init is ~65 GB): its tensors' bytes; the CRC-32C of its tensor table (each
// tensor's name, dtype, shape and offsets in the data, in file order; __metadata__ and the
// header's layout are not part of it, so the same tensors written by another tool agree); and
// the CRC-32C of samples of every tensor's bytes, its first, middle and last ZT_ST_SAMPLE_BYTES
// (a tensor of at most 3 x that, whole), read with pread. Two fine-tunes of one model share the
// table but differ in nearly every element, so the samples tell them apart; an edit confined to
// bytes between the samples is not seen (docs/operations.md, "Ranks that read different files").
// Qwen3-32B (bf16): 707 tensors, about 6.9 MB read in about 1,600 reads.
#define ZT_ST_SAMPLE_BYTES 4096
typedef struct {
    uint64_t bytes;           // the file's size
    uint64_t data_bytes;      // its tensors' bytes (the file less its header)
    int ntensors;
    uint32_t table_crc32c;    // of the tensor table
    uint32_t sample_crc32c;   // of the sampled bytes, in file order
    uint64_t sampled;         // bytes read for sample_crc32c
} zt_st_fingerprint;
// -1 + zt_err (the file does not open as zt_st_open's, or a read failed).
int zt_st_fingerprint_file(const char *path, zt_st_fingerprint *fp);

// fp32 <-> bf16 (zt_f32_to_bf16, zt_bf16_to_f32) are in base/bf16.h; fp16 -> fp32 (exact):
float zt_f16_to_f32(uint16_t h);
#endif
