// libFuzzer harness: the tokenizer's binary cache (data/tokenizer_cache.c) is never trusted.
// The cache file of a small tokenizer.json (tests/data/tokenizer/small, 600 ids) is written once;
// each input is a list of patches to its payload (5 bytes each: a 32-bit offset, taken modulo
// the payload's length, and the byte to write there; a first byte 0xFF also truncates the
// payload at the first patch's offset), after which the payload checksum is recomputed, so
// that every input reaches the structural checks a corrupt file would never pass. Properties:
//   - loading never crashes or reads out of bounds (ASan, UBSan);
//   - a load that did not use the cache gives the tokenizer the JSON gives (the same decode of
//     every id, the same ids on sample texts);
//   - a load that used the cache gives a tokenizer that encodes and decodes the sample texts
//     without error, every id inside its vocabulary.
#include <string.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "data/tokenizer.h"
#include "data/unicode.h"
#include "fuzz_util.h"

#define HDR 48  // the cache header; the payload length at 32, its CRC-32C at 40

static zt_tokenizer *ref;
static char cache_path[1024];
static char *orig;  // the valid cache file
static size_t orig_n;

static const char *texts[] = {"Hello world, h\xc3\xa9llo! 12345 <|im_start|>user\n  x\r\n\tcode();",
                              "don't WE'LL   spaces\n\n\nend<|endoftext|>", "e\xcc\x81 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/cache", fuzz_dir());
    setenv("ZT_TOKENIZER_CACHE", "off", 1);
    ref = zt_tokenizer_load(ZT_FUZZ_SMALL_TOKENIZER);
    setenv("ZT_TOKENIZER_CACHE", dir, 1);
    zt_tokenizer *first = zt_tokenizer_load(ZT_FUZZ_SMALL_TOKENIZER);  // writes the cache
    zt_tokenizer *second = zt_tokenizer_load(ZT_FUZZ_SMALL_TOKENIZER);
    if (!ref || !first || !second || !zt_tokenizer_from_cache(second)) {
        fprintf(stderr, "fuzz_tokenizer_cache: no cache written in %s: %s\n", dir, zt_errmsg());
        abort();
    }
    zt_tokenizer_free(first);
    zt_tokenizer_free(second);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls %s/tokenizer-*.bin", dir);
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(cache_path, sizeof cache_path, p)) abort();
    pclose(p);
    cache_path[strcspn(cache_path, "\n")] = 0;
    orig = zt_read_file(cache_path, &orig_n);
    if (!orig || orig_n <= HDR) abort();
    return 0;
}

static void check_tokenizer(zt_tokenizer *tk) {
    const int cached = zt_tokenizer_from_cache(tk);
    zt_encoder *e = zt_encoder_new(tk), *er = zt_encoder_new(ref);
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        zt_ids a = {0}, b = {0};
        FUZZ_ASSERT(zt_encode(e, texts[t], strlen(texts[t]), &a) == 0, "encode failed: %s", zt_errmsg());
        for (size_t k = 0; k < a.n; k++)
            FUZZ_ASSERT(a.ids[k] < (uint32_t)zt_tokenizer_vocab_size(tk), "id %u beyond the vocabulary %lld", a.ids[k],
                        (long long)zt_tokenizer_vocab_size(tk));
        zt_buf d = {0};
        FUZZ_ASSERT(zt_decode(tk, a.ids, a.n, &d) == 0 || cached, "decode failed: %s", zt_errmsg());
        if (!cached) {
            zt_encode(er, texts[t], strlen(texts[t]), &b);
            FUZZ_ASSERT(a.n == b.n && !memcmp(a.ids, b.ids, a.n * sizeof *a.ids),
                        "the JSON-loaded tokenizer differs from the reference");
        }
        free(d.p);
        zt_ids_free(&a);
        zt_ids_free(&b);
    }
    if (!cached) {
        zt_buf da = {0}, db = {0};
        for (uint32_t id = 0; id < (uint32_t)zt_tokenizer_vocab_size(ref); id++) {
            da.n = db.n = 0;
            FUZZ_ASSERT(zt_decode(tk, &id, 1, &da) == zt_decode(ref, &id, 1, &db) && da.n == db.n &&
                            !memcmp(da.p, db.p, da.n), "decode of id %u differs from the reference", id);
        }
        free(da.p);
        free(db.p);
    }
    zt_encoder_free(e);
    zt_encoder_free(er);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(orig_n);
    memcpy(buf, orig, orig_n);
    size_t n = orig_n;
    const size_t payload = orig_n - HDR;
    for (size_t i = 0; i + 5 <= size; i += 5) {
        uint32_t off;
        memcpy(&off, data + i, 4);
        buf[HDR + off % payload] = (char)data[i + 4];
    }
    if (size >= 5 && data[0] == 0xFF) {  // truncate at the first patch's offset
        uint32_t off;
        memcpy(&off, data + 1, 4);
        n = HDR + off % payload;
    }
    const uint64_t plen = n - HDR;
    memcpy(buf + 32, &plen, 8);
    const uint32_t crc = zt_crc32c(0, buf + HDR, plen);
    memcpy(buf + 40, &crc, 4);
    FILE *f = fopen(cache_path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) abort();
    free(buf);
    zt_tokenizer *tk = zt_tokenizer_load(ZT_FUZZ_SMALL_TOKENIZER);
    FUZZ_ASSERT(tk != NULL, "the load failed: %s", zt_errmsg());
    check_tokenizer(tk);
    zt_tokenizer_free(tk);
    return 0;
}
