// libFuzzer harness: the safetensors reader (checkpoint/safetensors.c), every read
// path. The input is the file; its last 16 bytes also pick an element range for
// zt_st_read_f32_range (arbitrary, possibly negative or past the end).
// Properties: a file that opens has tensors whose byte ranges lie inside the file and
// tile the data area in order; reading any tensor either succeeds or refuses, and a
// range read outside the tensor is refused; the metadata lookup never overruns.
#include <float.h>

#include "checkpoint/safetensors.h"
#include "fuzz_util.h"
#include "base/common.h"

#define MAX_READ_ELEMS ((int64_t)1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("x.safetensors", data, size);
    zt_st_file f;
    if (zt_st_open(&f, path) != 0) {
        FUZZ_ASSERT(zt_errmsg()[0], "a refused file must say why");
        return 0;
    }
    int64_t pick[2] = {0, 0};
    if (size >= 16) memcpy(pick, data + size - 16, 16);
    uint64_t prev_end = 0;
    for (int i = 0; i < f.ntensors; i++) {
        const zt_st_tensor *t = &f.tensors[i];
        FUZZ_ASSERT(t->begin <= t->end && t->end <= f.size, "tensor %s [%llu, %llu) outside the %zu-byte file", t->name,
                    (unsigned long long)t->begin, (unsigned long long)t->end, f.size);
        FUZZ_ASSERT(t->dtype == ZT_ST_OTHER || t->end - t->begin == (uint64_t)t->numel * zt_st_dtype_size(t->dtype),
                    "tensor %s: %llu bytes for %lld elements of %s", t->name,
                    (unsigned long long)(t->end - t->begin), (long long)t->numel, zt_st_dtype_name(t->dtype));
        FUZZ_ASSERT(i == 0 || t->begin >= prev_end, "tensor %s overlaps the one before", t->name);
        prev_end = t->end;
        FUZZ_ASSERT(zt_st_find(&f, t->name) != NULL, "tensor %s not found by name", t->name);
        if (t->numel <= MAX_READ_ELEMS) {
            float *out = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
            int64_t *iout = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(int64_t));
            zt_st_read_f32(&f, t, out);
            zt_st_read_i64(&f, t, iout);
            // a range inside the tensor must read when the whole tensor reads
            if (t->numel > 0) {
                int64_t first = (int64_t)((uint64_t)pick[0] % (uint64_t)t->numel);
                int64_t count = (int64_t)((uint64_t)pick[1] % (uint64_t)(t->numel - first + 1));
                int whole = zt_st_read_f32(&f, t, out) == 0;
                int part = zt_st_read_f32_range(&f, t, first, count, out) == 0;
                FUZZ_ASSERT(whole == part, "tensor %s: whole read %d but range [%lld, +%lld) read %d", t->name, whole,
                            (long long)first, (long long)count, part);
            }
            free(out);
            free(iout);
        }
        // ranges outside the tensor are refused, never read
        float one;
        int64_t bad_first[] = {-1, t->numel, INT64_MAX, pick[0] < 0 ? pick[0] : -pick[0] - 1};
        for (int k = 0; k < 4; k++)
            FUZZ_ASSERT(zt_st_read_f32_range(&f, t, bad_first[k], 1, &one) != 0, "tensor %s: range at %lld accepted",
                        t->name, (long long)bad_first[k]);
        FUZZ_ASSERT(t->numel == INT64_MAX || zt_st_read_f32_range(&f, t, 0, t->numel + 1, &one) != 0,
                    "tensor %s: %lld + 1 elements accepted", t->name, (long long)t->numel);
        FUZZ_ASSERT(zt_st_read_f32_range(&f, t, 1, INT64_MAX, &one) != 0, "tensor %s: count INT64_MAX accepted",
                    t->name);
    }
    char meta[64];
    zt_st_metadata(&f, "format", meta, sizeof meta);
    zt_st_metadata(&f, "", meta, 1);
    // a name no tensor has: longer than every name in the file (a fixed string would not
    // do: libFuzzer learns the strings zt_st_find compares against and writes them in)
    size_t longest = 0;
    for (int i = 0; i < f.ntensors; i++)
        if (strlen(f.tensors[i].name) > longest) longest = strlen(f.tensors[i].name);
    char *absent = malloc(longest + 2);
    memset(absent, 'z', longest + 1);
    absent[longest + 1] = 0;
    FUZZ_ASSERT(zt_st_find(&f, absent) == NULL, "an absent name (%zu bytes) was found", longest + 1);
    free(absent);
    zt_st_close(&f);
    return 0;
}
