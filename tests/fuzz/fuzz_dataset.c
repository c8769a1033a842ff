// libFuzzer harness: a dataset directory (data/dataset.c): dataset.json and its block
// files. Input: dataset.json's bytes, then after the first NUL byte the block files as
// [u16 little-endian length][bytes] records, written in order as data.u32,
// rank-00000.u32 ... rank-00003.u32 (the names the packer uses; dataset.json decides
// which it lists). Every check is on (crc, token ids).
// Properties: a dataset that opens has blocks whose bytes lie inside its mapped files,
// every token of every block is < the vocabulary, and total_blocks is the files' sum.
#include "data/dataset.h"
#include "fuzz_util.h"
#include "base/common.h"

static const char *names[] = {"data.u32", "rank-00000.u32", "rank-00001.u32", "rank-00002.u32", "rank-00003.u32"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t jlen = nul ? (size_t)(nul - data) : size;
    fuzz_write("dataset.json", data, jlen);
    size_t at = nul ? jlen + 1 : size;
    for (int i = 0; i < 5; i++) {
        if (at + 2 <= size) {
            size_t n = (size_t)data[at] | (size_t)data[at + 1] << 8;
            at += 2;
            if (n > size - at) n = size - at;
            fuzz_write(names[i], data + at, n);
            at += n;
        } else {
            fuzz_unlink(names[i]);
        }
    }
    zt_dataset ds;
    zt_dataset_opts o = {.verify_crc = 1, .check_tokens = 1, .model_vocab = 0};
    if (zt_dataset_open(&ds, fuzz_dir(), &o) != 0) {
        FUZZ_ASSERT(zt_errmsg()[0], "a refused dataset must say why");
        return 0;
    }
    FUZZ_ASSERT(ds.seq_len >= 1 && ds.vocab_size >= 1, "seq_len %d vocab %lld", ds.seq_len, (long long)ds.vocab_size);
    int64_t total = 0;
    for (int i = 0; i < ds.nfiles; i++) {
        const zt_data_file *f = &ds.files[i];
        FUZZ_ASSERT(f->blocks >= 0 && (uint64_t)f->blocks * (uint64_t)ds.seq_len * 4 == f->bytes,
                    "%s: %lld blocks of %d tokens in %zu bytes", f->name, (long long)f->blocks, ds.seq_len, f->bytes);
        total += f->blocks;
        for (int64_t b = 0; b < f->blocks; b++) {
            const uint32_t *blk = zt_dataset_block(&ds, i, b);
            for (int k = 0; k < ds.seq_len; k++)  // ASan: inside the mapping
                FUZZ_ASSERT(blk[k] < (uint64_t)ds.vocab_size, "%s block %lld position %d: id %u >= vocab %lld",
                            f->name, (long long)b, k, blk[k], (long long)ds.vocab_size);
        }
    }
    FUZZ_ASSERT(total == ds.total_blocks, "total_blocks %lld, files sum to %lld", (long long)ds.total_blocks,
                (long long)total);
    zt_dataset_close(&ds);
    return 0;
}
