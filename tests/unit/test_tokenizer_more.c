// Tokenizers other than the shipped Qwen3 one, against Hugging Face `tokenizers`
// (goldens written by tests/reference/make_tokenizer_golden_more.py):
//   test_tokenizer_more qwen3_5  Qwen3.5's tokenizer.json (hand-written matcher with
//                                \p{M}, ignore_merges, 33 special tokens from 248,044)
//   test_tokenizer_more pcre2    Qwen3's tokenizer.json with GPT-2's split regex,
//                                which only PCRE2 runs
// Every document must give the same ids, one thread and a pool of two alike, cut at
// every safe cut too, and decode back to the text (or what tokenizers' decode gives).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/tokenizer.h"
#include "base/common.h"
#include "tests/support/test_util.h"

#define QWEN3_JSON ZT_TEST_DIR "/../assets/qwen3-tokenizer/tokenizer.json"
#define QWEN35_GZ ZT_TEST_DIR "/data/tokenizer/qwen3_5/tokenizer.json.gz"
#define QWEN_RE_JSON                                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|" \
    "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define GPT2_RE_JSON "'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|\\\\s+"

static unsigned char *gunzip_file(const char *path, size_t *n) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 24, len = 0;
    unsigned char *buf = zt_xmalloc(cap);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) zt_fatal("out of memory");
        }
        int r = gzread(f, buf + len, (unsigned)(cap - len));
        if (r <= 0) break;
        len += (size_t)r;
    }
    gzclose(f);
    *n = len;
    return buf;
}

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = zt_xmalloc((size_t)sz + 1);
    *n = fread(buf, 1, (size_t)sz, f);
    buf[*n] = 0;
    fclose(f);
    return buf;
}

static int write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) || w != n ? -1 : 0;
}

static uint32_t rd32(const unsigned char **p) {
    uint32_t v = (uint32_t)(*p)[0] | (uint32_t)(*p)[1] << 8 | (uint32_t)(*p)[2] << 16 | (uint32_t)(*p)[3] << 24;
    *p += 4;
    return v;
}

typedef struct {
    char *text;
    size_t len;
    uint32_t *ids;
    size_t nids;
    char *decoded;
    size_t declen;
} golden_doc;

static void test_golden(const zt_tokenizer *tk, const char *golden) {
    size_t n;
    unsigned char *buf = gunzip_file(golden, &n);
    if (!buf || n < 12 || memcmp(buf, "ZTTOKGD1", 8)) {
        CHECK(0, "cannot read %s", golden);
        return;
    }
    const unsigned char *p = buf + 8;
    size_t nd = rd32(&p);
    golden_doc *docs = zt_xcalloc(nd, sizeof *docs);
    for (size_t i = 0; i < nd; i++) {
        docs[i].len = rd32(&p);
        docs[i].text = (char *)p;
        p += docs[i].len;
        docs[i].nids = rd32(&p);
        docs[i].ids = zt_xmalloc(docs[i].nids * sizeof(uint32_t) + 4);
        for (size_t k = 0; k < docs[i].nids; k++) docs[i].ids[k] = rd32(&p);
        uint32_t dl = rd32(&p);
        if (dl != 0xFFFFFFFFu) {
            docs[i].decoded = (char *)p;
            docs[i].declen = dl;
            p += dl;
        }
    }
    zt_encoder *enc = zt_encoder_new(tk);
    zt_ids got = {0};
    zt_buf dec = {0};
    size_t mism = 0, dec_bad = 0, ntok = 0;
    double t0 = zt_now();
    for (size_t i = 0; i < nd; i++) {
        got.n = 0;
        int rc = zt_encode(enc, docs[i].text, docs[i].len, &got);
        ntok += got.n;
        if (rc || got.n != docs[i].nids || memcmp(got.ids, docs[i].ids, got.n * sizeof *got.ids)) {
            if (mism++ < 10) {
                size_t k = 0;
                while (k < got.n && k < docs[i].nids && got.ids[k] == docs[i].ids[k]) k++;
                fprintf(stderr, "  doc %zu (%zu bytes, \"%.40s\"): %zu ids, expected %zu; first difference at %zu: got %d, "
                        "expected %d\n", i, docs[i].len, docs[i].text, got.n, docs[i].nids, k,
                        k < got.n ? (int)got.ids[k] : -1, k < docs[i].nids ? (int)docs[i].ids[k] : -1);
            }
            continue;
        }
        dec.n = 0;
        zt_decode(tk, got.ids, got.n, &dec);
        const char *want = docs[i].decoded ? docs[i].decoded : docs[i].text;
        size_t wlen = docs[i].decoded ? docs[i].declen : docs[i].len;
        if (dec.n != wlen || memcmp(dec.p, want, wlen))
            if (dec_bad++ < 10) fprintf(stderr, "  doc %zu: decode does not give the text back\n", i);
    }
    printf("golden %s: %zu documents, %zu tokens, %zu id mismatches, %zu decode mismatches (%.2f s, one thread)\n",
           golden, nd, ntok, mism, dec_bad, zt_now() - t0);
    CHECK(nd >= 2000, "golden corpus has %zu documents", nd);
    CHECK(mism == 0, "%zu of %zu documents tokenize differently from tokenizers", mism, nd);
    CHECK(dec_bad == 0, "%zu documents do not decode back", dec_bad);

    zt_tok_pool *pool = zt_tok_pool_new(tk, 2);
    const char **texts = zt_xmalloc(nd * sizeof *texts);
    size_t *lens = zt_xmalloc(nd * sizeof *lens);
    zt_ids *outs = zt_xcalloc(nd, sizeof *outs);
    int64_t *err = zt_xmalloc(nd * sizeof *err);
    for (size_t i = 0; i < nd; i++) {
        texts[i] = docs[i].text;
        lens[i] = docs[i].len;
    }
    int64_t bad = zt_tok_pool_encode(pool, texts, lens, nd, outs, err);
    size_t pm = 0;
    for (size_t i = 0; i < nd; i++)
        if (outs[i].n != docs[i].nids || memcmp(outs[i].ids, docs[i].ids, outs[i].n * sizeof(uint32_t))) pm++;
    CHECK(bad == 0 && pm == 0, "pool of 2: %lld failed, %zu mismatches", (long long)bad, pm);

    size_t ncut_docs = 0, cut_bad = 0;
    for (size_t i = 0; i < nd; i++) {
        got.n = 0;
        size_t from = 0, cuts = 0;
        while (from < docs[i].len) {
            size_t c = zt_tokenizer_safe_cut(tk, docs[i].text, docs[i].len, from + 1);
            zt_encode(enc, docs[i].text + from, c - from, &got);
            cuts += c < docs[i].len;
            from = c;
        }
        ncut_docs += cuts > 0;
        if (got.n != docs[i].nids || memcmp(got.ids, docs[i].ids, got.n * sizeof(uint32_t))) cut_bad++;
    }
    printf("safe cuts: %zu documents cut, %zu differ\n", ncut_docs, cut_bad);
    CHECK(cut_bad == 0, "safe cuts: %zu of %zu cut documents differ", cut_bad, ncut_docs);

    for (size_t i = 0; i < nd; i++) {
        zt_ids_free(&outs[i]);
        free(docs[i].ids);
    }
    zt_tok_pool_free(pool);
    free(outs);
    free(err);
    free(texts);
    free(lens);
    free(docs);
    free(buf);
    zt_ids_free(&got);
    free(dec.p);
    zt_encoder_free(enc);
}

static zt_tokenizer *load_written(const char *dir, const void *json, size_t n, char *path, size_t cap) {
    snprintf(path, cap, "%s/tokenizer.json", dir);
    if (write_all(path, json, n)) {
        CHECK(0, "cannot write %s", path);
        return NULL;
    }
    double t0 = zt_now();
    zt_tokenizer *tk = zt_tokenizer_load(path);
    if (!tk) CHECK(0, "load %s: %s", path, zt_errmsg());
    else printf("loaded %s in %.2f s, split by %s\n", path, zt_now() - t0, zt_tokenizer_split_name(tk));
    return tk;
}

static void test_qwen35(const char *dir) {
    size_t n;
    unsigned char *json = gunzip_file(QWEN35_GZ, &n);
    if (!json) {
        CHECK(0, "cannot read %s", QWEN35_GZ);
        return;
    }
    char path[512];
    zt_tokenizer *tk = load_written(dir, json, n, path, sizeof path);
    free(json);
    if (!tk) return;
    CHECK(zt_tokenizer_vocab_size(tk) == 248077, "vocab size %lld", (long long)zt_tokenizer_vocab_size(tk));
    CHECK(!strcmp(zt_tokenizer_split_name(tk), "qwen3.5"), "split %s", zt_tokenizer_split_name(tk));
    CHECK(zt_tokenizer_token_id(tk, "<|endoftext|>") == 248044, "<|endoftext|> %lld",
          (long long)zt_tokenizer_token_id(tk, "<|endoftext|>"));
    CHECK(zt_tokenizer_token_id(tk, "<|audio_pad|>") == 248076, "<|audio_pad|>");
    CHECK(zt_tokenizer_added_count(tk) == 33, "%d added tokens", zt_tokenizer_added_count(tk));
    {  // invalid UTF-8 is refused with its byte offset, as for Qwen3 (before any split)
        zt_encoder *e = zt_encoder_new(tk);
        zt_ids ids = {0};
        int rc = zt_encode(e, "a\xcc\x81\xff", 4, &ids);
        CHECK(rc == -1 && ids.n == 0 && strstr(zt_errmsg(), "at byte 3"), "bad UTF-8: rc %d, %s", rc, zt_errmsg());
        zt_ids_free(&ids);
        zt_encoder_free(e);
    }
    test_golden(tk, ZT_TEST_DIR "/data/tokenizer/golden_qwen3_5.bin.gz");
    zt_tokenizer_free(tk);
}

static void test_pcre2(const char *dir) {
    size_t n;
    char *json = read_all(QWEN3_JSON, &n);
    if (!json) {
        CHECK(0, "cannot read %s", QWEN3_JSON);
        return;
    }
    char *at = strstr(json, QWEN_RE_JSON);
    CHECK(at != NULL, "the Qwen regex is not in %s", QWEN3_JSON);
    if (!at) return;
    size_t pre = (size_t)(at - json), old = strlen(QWEN_RE_JSON), neu = strlen(GPT2_RE_JSON);
    char *out = zt_xmalloc(n - old + neu + 1);
    memcpy(out, json, pre);
    memcpy(out + pre, GPT2_RE_JSON, neu);
    memcpy(out + pre + neu, at + old, n - pre - old);
    char path[512];
    zt_tokenizer *tk = load_written(dir, out, n - old + neu, path, sizeof path);
    free(out);
    free(json);
    if (!tk) return;
    CHECK(!strcmp(zt_tokenizer_split_name(tk), "pcre2") || !strcmp(zt_tokenizer_split_name(tk), "pcre2-jit"), "split %s",
          zt_tokenizer_split_name(tk));
    test_golden(tk, ZT_TEST_DIR "/data/tokenizer/golden_pcre2.bin.gz");
    zt_tokenizer_free(tk);
}

// model.ignore_merges on a tiny byte-level vocabulary (the 256 bytes, "xyz" = 256, "xy" = 257,
// one merge x+y) split by \s+|\S+ (PCRE2): a word that is a vocab entry is its id, else merges
// apply. Expected ids from tokenizers 0.23.3 on the same JSON: "xyz xyzz" -> 256 32 257 122 122
// with ignore_merges, 257 122 32 257 122 122 without.
static void test_ignore_merges(const char *dir) {
    int n = 0, cp[256];
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cp[b] = printable ? b : 256 + n++;
    }
    for (int im = 0; im < 2; im++) {
        zt_buf j = {0};
        char tmp[160];
        const char *head = "{\"added_tokens\": [], \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Sequence\", "
                           "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+|\\\\S+\"}, "
                           "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": "
                           "false, \"use_regex\": false}]}, \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": "
                           "\"BPE\", \"ignore_merges\": ";
        zt_buf_append(&j, head, strlen(head));
        zt_buf_append(&j, im ? "true" : "false", im ? 4 : 5);
        zt_buf_append(&j, ", \"vocab\": {", 12);
        for (int b = 0; b < 256; b++) {
            int c = cp[b], k;
            if (c == '"' || c == '\\') k = snprintf(tmp, sizeof tmp, "\"\\%c\": %d, ", c, b);
            else if (c < 0x80) k = snprintf(tmp, sizeof tmp, "\"%c\": %d, ", c, b);
            else k = snprintf(tmp, sizeof tmp, "\"%c%c\": %d, ", 0xC0 | (c >> 6), 0x80 | (c & 0x3F), b);
            zt_buf_append(&j, tmp, (size_t)k);
        }
        const char *tail = "\"xyz\": 256, \"xy\": 257}, \"merges\": [[\"x\", \"y\"]]}}";
        zt_buf_append(&j, tail, strlen(tail));
        char path[512];
        zt_tokenizer *tk = load_written(dir, j.p, j.n, path, sizeof path);
        free(j.p);
        if (!tk) return;
        zt_encoder *e = zt_encoder_new(tk);
        zt_ids ids = {0};
        zt_encode(e, "xyz xyzz", 8, &ids);
        static const uint32_t want_im[] = {256, 32, 257, 122, 122}, want_no[] = {257, 122, 32, 257, 122, 122};
        const uint32_t *want = im ? want_im : want_no;
        size_t nw = im ? 5 : 6;
        CHECK(ids.n == nw && !memcmp(ids.ids, want, nw * sizeof *want), "ignore_merges %d: %zu ids (first %u)", im,
              ids.n, ids.n ? ids.ids[0] : 0);
        zt_ids_free(&ids);
        zt_encoder_free(e);
        zt_tokenizer_free(tk);
    }
}

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "qwen3_5") && strcmp(argv[1], "pcre2"))) {
        fprintf(stderr, "usage: test_tokenizer_more qwen3_5|pcre2\n");
        return 2;
    }
    char dir[] = "/tmp/zt_tok_more_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    if (!strcmp(argv[1], "qwen3_5")) test_qwen35(dir);
    else {
        test_pcre2(dir);
        test_ignore_merges(dir);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    remove(path);
    rmdir(dir);
    TEST_END();
}
