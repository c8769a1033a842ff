// The tokenizer's binary cache (data/tokenizer_cache.c): a second load of the same
// tokenizer.json reads the cache, and the tokenizer it gives encodes the golden corpus to
// Hugging Face tokenizers' ids (tests/data/tokenizer/golden.bin.gz, Qwen3) and decodes
// every id as the JSON-loaded one does. A cache file that is corrupt (a flipped byte),
// truncated, forged (an id out of range under a recomputed checksum) or stale (another
// tokenizer.json's cache under this one's name) is not used: the load parses the JSON, gives
// the same ids, and rewrites the file. An unwritable cache directory and
// ZT_TOKENIZER_CACHE=off load from the JSON. A split regex that is not UTF-8 is refused.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "data/tokenizer.h"
#include "data/unicode.h"
#include "tests/support/test_util.h"

#define QWEN3_JSON ZT_TEST_DIR "/../assets/qwen3-tokenizer/tokenizer.json"
#define SMALL_JSON ZT_TEST_DIR "/data/tokenizer/small/tokenizer.json"
#define GOLDEN ZT_TEST_DIR "/data/tokenizer/golden.bin.gz"

static char cache_dir[256];

static unsigned char *gunzip_file(const char *path, size_t *n) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 24, len = 0;
    unsigned char *buf = zt_xmalloc(cap);
    for (;;) {
        if (len == cap) buf = realloc(buf, cap *= 2);
        int r = gzread(f, buf + len, (unsigned)(cap - len));
        if (r <= 0) break;
        len += (size_t)r;
    }
    gzclose(f);
    *n = len;
    return buf;
}

static uint32_t rd32(const unsigned char **p) {
    uint32_t v = (uint32_t)(*p)[0] | (uint32_t)(*p)[1] << 8 | (uint32_t)(*p)[2] << 16 | (uint32_t)(*p)[3] << 24;
    *p += 4;
    return v;
}

// Every golden document encoded by tk: the number whose ids differ from tokenizers'.
static size_t golden_mismatches(const zt_tokenizer *tk, size_t *ndocs) {
    size_t n;
    unsigned char *buf = gunzip_file(GOLDEN, &n);
    if (!buf || n < 12 || memcmp(buf, "ZTTOKGD1", 8)) {
        fprintf(stderr, "cannot read %s\n", GOLDEN);
        exit(1);
    }
    const unsigned char *p = buf + 8;
    const uint32_t nd = rd32(&p);
    zt_encoder *enc = zt_encoder_new(tk);
    zt_ids got = {0};
    size_t bad = 0;
    for (uint32_t i = 0; i < nd; i++) {
        const uint32_t len = rd32(&p);
        const char *text = (const char *)p;
        p += len;
        const uint32_t nids = rd32(&p);
        got.n = 0;
        int rc = zt_encode(enc, text, len, &got);
        int same = rc == 0 && got.n == nids;
        for (uint32_t k = 0; k < nids; k++) {
            const uint32_t id = rd32(&p);
            if (same && got.ids[k] != id) same = 0;
        }
        const uint32_t dl = rd32(&p);
        if (dl != 0xFFFFFFFFu) p += dl;
        bad += !same;
    }
    zt_ids_free(&got);
    zt_encoder_free(enc);
    free(buf);
    *ndocs = nd;
    return bad;
}

// Decode of every id and a few encodings, a against b: the number of differences.
static size_t differences(const zt_tokenizer *a, const zt_tokenizer *b) {
    size_t diff = 0;
    if (zt_tokenizer_vocab_size(a) != zt_tokenizer_vocab_size(b) || strcmp(zt_tokenizer_hash(a), zt_tokenizer_hash(b)) ||
        strcmp(zt_tokenizer_split_name(a), zt_tokenizer_split_name(b)) ||
        zt_tokenizer_added_count(a) != zt_tokenizer_added_count(b))
        return 1;
    zt_buf da = {0}, db = {0};
    for (uint32_t id = 0; id < (uint32_t)zt_tokenizer_vocab_size(a); id++) {
        da.n = db.n = 0;
        const int ra = zt_decode(a, &id, 1, &da), rb = zt_decode(b, &id, 1, &db);
        if (ra != rb || (ra == 0 && (da.n != db.n || memcmp(da.p, db.p, da.n)))) diff++;
    }
    for (int k = 0; k < zt_tokenizer_added_count(a); k++) {
        size_t la, lb;
        uint32_t ia, ib;
        const char *ta = zt_tokenizer_added(a, k, &la, &ia), *tb = zt_tokenizer_added(b, k, &lb, &ib);
        if (la != lb || ia != ib || memcmp(ta, tb, la)) diff++;
    }
    static const char *texts[] = {"Hello world, héllo wörld! 12345 <|im_start|>user\n  indented\r\n\tcode();",
                                  "don't they're WE'LL   spaces\n\n\nend<|endoftext|>", "e\xcc\x81 \xe4\xbd\xa0\xe5\xa5\xbd"};
    zt_encoder *ea = zt_encoder_new(a), *eb = zt_encoder_new(b);
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        zt_ids ia = {0}, ib = {0};
        zt_encode(ea, texts[t], strlen(texts[t]), &ia);
        zt_encode(eb, texts[t], strlen(texts[t]), &ib);
        if (ia.n != ib.n || memcmp(ia.ids, ib.ids, ia.n * sizeof *ia.ids)) diff++;
        zt_ids_free(&ia);
        zt_ids_free(&ib);
    }
    zt_encoder_free(ea);
    zt_encoder_free(eb);
    free(da.p);
    free(db.p);
    return diff;
}

// The one cache file in the directory (its path in out); 0 when there is not exactly one.
static int only_cache_file(char *out, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/tokenizer-*.bin 2>/dev/null", cache_dir);
    FILE *p = popen(cmd, "r");
    int count = 0;
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (!count) snprintf(out, n, "%s", line);
        count++;
    }
    pclose(p);
    return count == 1;
}

static void clear_cache(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -f %s/tokenizer-*.bin", cache_dir);
    if (system(cmd) != 0) fprintf(stderr, "%s failed\n", cmd);
}

static void patch(const char *path, long off, const void *bytes, size_t n) {
    FILE *f = fopen(path, "r+b");
    fseek(f, off, SEEK_SET);
    fwrite(bytes, 1, n, f);
    fclose(f);
}

// The header is 48 bytes (payload length at 32, payload CRC-32C at 40); the payload's scalars
// start with six 8-byte and six 4-byte fields, then byte_id[256].
#define HDR 48
#define BYTE_ID_AT (HDR + 6 * 8 + 6 * 4)

static void rechecksum(const char *path) {
    size_t n;
    char *data = zt_read_file(path, &n);
    const uint32_t crc = zt_crc32c(0, data + HDR, n - HDR);
    patch(path, 40, &crc, 4);
    free(data);
}

// One fault: break the cache file of SMALL_JSON with how(), load: from the JSON, the same
// tables as ref, and the file rewritten so that the next load reads it.
static void fault_case(const char *name, const zt_tokenizer *ref, void (*how)(const char *path)) {
    char path[1024];
    clear_cache();
    zt_tokenizer_free(zt_tokenizer_load(SMALL_JSON));  // writes the cache
    CHECK(only_cache_file(path, sizeof path), "%s: no cache file written", name);
    how(path);
    zt_tokenizer *tk = zt_tokenizer_load(SMALL_JSON);
    CHECK(tk && !zt_tokenizer_from_cache(tk), "%s: the broken cache was used", name);
    CHECK(tk && differences(tk, ref) == 0, "%s: the tokenizer differs", name);
    zt_tokenizer_free(tk);
    tk = zt_tokenizer_load(SMALL_JSON);
    CHECK(tk && zt_tokenizer_from_cache(tk) && differences(tk, ref) == 0, "%s: the cache was not rewritten", name);
    zt_tokenizer_free(tk);
    printf("fault %-10s: ignored, parsed, rewritten\n", name);
}

static void flip_byte(const char *path) {
    struct stat st;
    stat(path, &st);
    size_t n;
    char *d = zt_read_file(path, &n);
    unsigned char c = (unsigned char)d[n / 2] ^ 0x10;
    patch(path, (long)(n / 2), &c, 1);
    free(d);
}
static void truncate_half(const char *path) {
    struct stat st;
    stat(path, &st);
    CHECK(truncate(path, st.st_size / 2) == 0, "truncate");
}
static void forge_id(const char *path) {
    const uint32_t big = 0x7FFFFFFFu;
    patch(path, BYTE_ID_AT + 4 * 'a', &big, 4);  // byte 'a' -> an id beyond the vocabulary
    rechecksum(path);
}
static void forge_length(const char *path) {
    const uint64_t huge = (uint64_t)1 << 40;  // the vocab_size scalar
    patch(path, HDR, &huge, 8);
    rechecksum(path);
}
static char stale_src[1024];
static void stale(const char *path) {  // another tokenizer.json's cache under this one's name
    size_t n;
    char *d = zt_read_file(stale_src, &n);
    FILE *f = fopen(path, "wb");
    fwrite(d, 1, n, f);
    fclose(f);
    free(d);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "%s/zt_tokcache_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(cache_dir) != NULL, "mkdtemp");
    setenv("ZT_TOKENIZER_CACHE", cache_dir, 1);

    // Qwen3: the first load parses and writes the cache, the second reads it
    double t0 = zt_now();
    zt_tokenizer *json = zt_tokenizer_load(QWEN3_JSON);
    const double t_json = zt_now() - t0;
    CHECK(json && !zt_tokenizer_from_cache(json), "first load: %s", json ? "from the cache" : zt_errmsg());
    t0 = zt_now();
    zt_tokenizer *cached = zt_tokenizer_load(QWEN3_JSON);
    const double t_cache = zt_now() - t0;
    CHECK(cached && zt_tokenizer_from_cache(cached), "second load did not read the cache");
    printf("Qwen3 tokenizer.json: load with parse %.3f s (cache written), from the cache %.3f s\n", t_json, t_cache);
    CHECK(differences(cached, json) == 0, "the cached tokenizer differs from the parsed one");
    size_t nd, bad = golden_mismatches(cached, &nd);
    printf("golden (tokenizers' ids): %zu documents, %zu mismatches, cached tokenizer\n", nd, bad);
    CHECK(nd >= 10000 && bad == 0, "%zu of %zu documents differ from tokenizers", bad, nd);
    zt_tokenizer_free(cached);
    zt_tokenizer_free(json);
    char qwen3_cache[1024];
    CHECK(only_cache_file(qwen3_cache, sizeof qwen3_cache), "one cache file for Qwen3");
    snprintf(stale_src, sizeof stale_src, "%s/qwen3.bin", cache_dir);
    CHECK(rename(qwen3_cache, stale_src) == 0, "keep the Qwen3 cache aside");

    // the faults, on a small tokenizer.json (600 ids) to keep each parse short
    setenv("ZT_TOKENIZER_CACHE", "off", 1);
    zt_tokenizer *ref = zt_tokenizer_load(SMALL_JSON);
    CHECK(ref && !zt_tokenizer_from_cache(ref), "off: %s", ref ? "read a cache" : zt_errmsg());
    setenv("ZT_TOKENIZER_CACHE", cache_dir, 1);
    fault_case("corrupt", ref, flip_byte);
    fault_case("truncated", ref, truncate_half);
    fault_case("forged-id", ref, forge_id);
    fault_case("forged-len", ref, forge_length);
    fault_case("stale", ref, stale);

    // a cache directory that cannot be made: loads parse, nothing breaks
    char blocked[512];
    snprintf(blocked, sizeof blocked, "%s/qwen3.bin/cache", cache_dir);  // under a regular file
    setenv("ZT_TOKENIZER_CACHE", blocked, 1);
    for (int k = 0; k < 2; k++) {
        zt_tokenizer *tk = zt_tokenizer_load(SMALL_JSON);
        CHECK(tk && !zt_tokenizer_from_cache(tk) && differences(tk, ref) == 0, "unwritable directory, load %d", k);
        zt_tokenizer_free(tk);
    }
    printf("unwritable cache directory: loads parse the JSON\n");

    // a split regex that is not UTF-8 (cJSON passes such bytes through): refused naming the field,
    // never compiled as if it were valid (fuzz_tokenizer_cache found PCRE2 reading out of bounds)
    setenv("ZT_TOKENIZER_CACHE", cache_dir, 1);
    size_t n;
    char *text = zt_read_file(SMALL_JSON, &n);
    const char *qwen_re = strstr(text, "\"Regex\": \"");
    CHECK(qwen_re != NULL, "no Regex in %s", SMALL_JSON);
    char badpath[512];
    snprintf(badpath, sizeof badpath, "%s/bad_regex.json", cache_dir);
    FILE *f = fopen(badpath, "wb");
    const size_t at = (size_t)(qwen_re - text) + strlen("\"Regex\": \"");
    fwrite(text, 1, at, f);
    fputs("a\xf4\x90\x80\x80|", f);  // beyond U+10FFFF
    fwrite(text + at, 1, n - at, f);
    fclose(f);
    free(text);
    zt_tokenizer *badtk = zt_tokenizer_load(badpath);
    CHECK(!badtk && strstr(zt_errmsg(), "pattern.Regex does not compile") && strstr(zt_errmsg(), "UTF-8"),
          "a regex that is not UTF-8: %s", badtk ? "loaded" : zt_errmsg());
    zt_tokenizer_free(badtk);
    printf("a split regex that is not UTF-8: refused (%.60s...)\n", zt_errmsg());
    zt_tokenizer_free(ref);

    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    if (system(cmd) != 0) fprintf(stderr, "%s failed\n", cmd);
    TEST_END();
}
