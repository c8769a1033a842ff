// The Qwen3 tokenizer against Hugging Face `tokenizers`: every document of the
// golden corpus (tests/data/tokenizer/golden.bin.gz, written by
// tests/reference/make_tokenizer_golden.py) must give the same ids, one thread
// and a pool of workers alike, and decode must give back the text (or the text
// after NFC, as tokenizers' decode does). Also: loading errors and bad UTF-8.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <zlib.h>

#include "data/tokenizer.h"
#include "base/common.h"
#include "tests/support/test_util.h"

#define TOKENIZER_JSON ZT_TEST_DIR "/../assets/qwen3-tokenizer/tokenizer.json"
#define GOLDEN ZT_TEST_DIR "/data/tokenizer/golden.bin.gz"

typedef struct {
    char *text;
    size_t len;
    uint32_t *ids;
    size_t nids;
    char *decoded;  // NULL: decode gives the text back
    size_t declen;
} golden_doc;

static unsigned char *gunzip_file(const char *path, size_t *n) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 24, len = 0;
    unsigned char *buf = zt_xmalloc(cap);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
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

static golden_doc *load_golden(size_t *ndocs, unsigned char **raw) {
    size_t n;
    unsigned char *buf = gunzip_file(GOLDEN, &n);
    if (!buf || n < 12 || memcmp(buf, "ZTTOKGD1", 8)) {
        fprintf(stderr, "cannot read %s\n", GOLDEN);
        exit(1);
    }
    const unsigned char *p = buf + 8;
    uint32_t nd = rd32(&p);
    golden_doc *docs = zt_xcalloc(nd, sizeof *docs);
    for (uint32_t i = 0; i < nd; i++) {
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
    *ndocs = nd;
    *raw = buf;
    return docs;
}

static void print_mismatch(const golden_doc *d, size_t i, const zt_ids *got) {
    size_t k = 0;
    while (k < got->n && k < d->nids && got->ids[k] == d->ids[k]) k++;
    fprintf(stderr, "  doc %zu (%zu bytes, text starts \"%.40s\"): %zu ids, expected %zu; first difference at id %zu: ",
            i, d->len, d->text, got->n, d->nids, k);
    fprintf(stderr, "got %d, expected %d\n", k < got->n ? (int)got->ids[k] : -1, k < d->nids ? (int)d->ids[k] : -1);
}

static void test_golden(const zt_tokenizer *tk) {
    size_t nd;
    unsigned char *raw;
    golden_doc *docs = load_golden(&nd, &raw);
    zt_encoder *enc = zt_encoder_new(tk);
    zt_ids got = {0};
    zt_buf dec = {0};
    size_t mismatches = 0, dec_bad = 0, ntok = 0;
    double t0 = zt_now();
    for (size_t i = 0; i < nd; i++) {
        got.n = 0;
        int rc = zt_encode(enc, docs[i].text, docs[i].len, &got);
        ntok += got.n;
        if (rc || got.n != docs[i].nids || memcmp(got.ids, docs[i].ids, got.n * sizeof *got.ids)) {
            if (mismatches++ < 10) print_mismatch(&docs[i], i, &got);
            continue;
        }
        dec.n = 0;
        zt_decode(tk, got.ids, got.n, &dec);
        const char *want = docs[i].decoded ? docs[i].decoded : docs[i].text;
        size_t wlen = docs[i].decoded ? docs[i].declen : docs[i].len;
        if (dec.n != wlen || memcmp(dec.p, want, wlen)) {
            if (dec_bad++ < 10) fprintf(stderr, "  doc %zu: decode does not give the text back\n", i);
        }
    }
    double dt = zt_now() - t0;
    printf("golden: %zu documents, %zu tokens, %zu id mismatches, %zu decode mismatches (%.2f s, one thread)\n", nd,
           ntok, mismatches, dec_bad, dt);
    CHECK(nd >= 10000, "golden corpus has %zu documents", nd);
    CHECK(mismatches == 0, "%zu of %zu documents tokenize differently from tokenizers", mismatches, nd);
    CHECK(dec_bad == 0, "%zu documents do not decode back", dec_bad);

    // the same through a pool of two workers, and a second pass (warm caches)
    zt_tok_pool *pool = zt_tok_pool_new(tk, 2);
    const char **texts = zt_xmalloc(nd * sizeof *texts);
    size_t *lens = zt_xmalloc(nd * sizeof *lens);
    zt_ids *outs = zt_xcalloc(nd, sizeof *outs);
    int64_t *err = zt_xmalloc(nd * sizeof *err);
    for (size_t i = 0; i < nd; i++) {
        texts[i] = docs[i].text;
        lens[i] = docs[i].len;
    }
    for (int pass = 0; pass < 2; pass++) {
        int64_t bad = zt_tok_pool_encode(pool, texts, lens, nd, outs, err);
        size_t pm = 0;
        for (size_t i = 0; i < nd; i++)
            if (outs[i].n != docs[i].nids || memcmp(outs[i].ids, docs[i].ids, outs[i].n * sizeof(uint32_t))) pm++;
        CHECK(bad == 0 && pm == 0, "pool pass %d: %lld failed, %zu mismatches", pass, (long long)bad, pm);
    }
    // cut every document at every safe cut: the pieces' ids, joined, are the whole's
    size_t ncut_docs = 0, ncuts = 0, cut_bad = 0;
    for (size_t i = 0; i < nd; i++) {
        got.n = 0;
        size_t from = 0, cuts = 0;
        while (from < docs[i].len) {
            size_t c = zt_tokenizer_safe_cut(tk, docs[i].text, docs[i].len, from + 1);
            zt_encode(enc, docs[i].text + from, c - from, &got);
            cuts += c < docs[i].len;
            from = c;
        }
        ncuts += cuts;
        ncut_docs += cuts > 0;
        if (got.n != docs[i].nids || memcmp(got.ids, docs[i].ids, got.n * sizeof(uint32_t))) cut_bad++;
    }
    printf("safe cuts: %zu cuts in %zu documents, %zu documents differ\n", ncuts, ncut_docs, cut_bad);
    CHECK(ncut_docs > 100 && cut_bad == 0, "safe cuts: %zu of %zu cut documents differ", cut_bad, ncut_docs);

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
    free(raw);
    zt_ids_free(&got);
    free(dec.p);
    zt_encoder_free(enc);
}

static void test_basics(const zt_tokenizer *tk) {
    CHECK(zt_tokenizer_vocab_size(tk) == 151669, "vocab size %lld", (long long)zt_tokenizer_vocab_size(tk));
    CHECK(zt_tokenizer_token_id(tk, "<|endoftext|>") == 151643, "eos %lld", (long long)zt_tokenizer_token_id(tk, "<|endoftext|>"));
    CHECK(zt_tokenizer_token_id(tk, "</think>") == 151668, "</think>");
    CHECK(zt_tokenizer_token_id(tk, "no such token here") == -1, "absent token");
    CHECK(!strncmp(zt_tokenizer_hash(tk), "crc32c:", 7) && strlen(zt_tokenizer_hash(tk)) == 15, "hash %s",
          zt_tokenizer_hash(tk));

    zt_encoder *enc = zt_encoder_new(tk);
    zt_ids ids = {0};
    // "Hello world" is two tokens in Qwen3: 9707 1879
    CHECK(zt_encode(enc, "Hello world", 11, &ids) == 0 && ids.n == 2 && ids.ids[0] == 9707 && ids.ids[1] == 1879,
          "Hello world -> %zu ids", ids.n);
    // invalid UTF-8 is refused with its byte offset, and out is left as it was
    const char *bad[] = {"ab\xff", "abc\xc3", "\xe0\x80\x80", "x\xed\xa0\x80", "\xf4\x90\x80\x80", "ok\x80"};
    size_t want_off[] = {2, 3, 0, 1, 0, 2};
    for (int i = 0; i < 6; i++) {
        size_t before = ids.n;
        int rc = zt_encode(enc, bad[i], strlen(bad[i]), &ids);
        char expect[64];
        snprintf(expect, sizeof expect, "at byte %zu", want_off[i]);
        CHECK(rc == -1 && ids.n == before && strstr(zt_errmsg(), expect), "bad UTF-8 #%d: rc %d, msg: %s", i, rc,
              zt_errmsg());
    }
    // decode refuses an id outside the vocabulary
    zt_buf b = {0};
    uint32_t out_of_range[] = {9707, 151669};
    CHECK(zt_decode(tk, out_of_range, 2, &b) == -1 && strstr(zt_errmsg(), "151669"), "decode range: %s", zt_errmsg());
    free(b.p);
    zt_ids_free(&ids);
    zt_encoder_free(enc);
}

// A broken or foreign tokenizer.json is refused with a message that says why.
static void test_load_errors(void) {
    char dir[] = "/tmp/zt_tok_test_XXXXXX";
    if (!mkdtemp(dir)) return;
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    struct {
        const char *json, *expect;
    } cases[] = {
        {"{\"model\": {\"type\": \"BPE\"", "not valid JSON"},
        {"{\"model\": {\"type\": \"WordPiece\"}}", "only byte-level BPE"},
        {"{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true}}", "byte_fallback"},
        {"{\"model\": {\"type\": \"BPE\"}, \"normalizer\": {\"type\": \"NFKC\"}, \"pre_tokenizer\": null}", "NFKC"},
        {"{\"model\": {\"type\": \"BPE\"}, \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Sequence\", "
         "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\\\\s+\"}, \"behavior\": \"Isolated\", "
         "\"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}}",
         "does not compile"},
        {"{\"model\": {\"type\": \"BPE\"}, \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}",
         "pre_tokenizer Whitespace is not supported"},
        {"{\"model\": {\"type\": \"BPE\"}, \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Sequence\", "
         "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": \"Isolated\", "
         "\"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}, "
         "\"decoder\": {\"type\": \"WordPiece\"}}",
         "decoder WordPiece is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "w");
        fputs(cases[i].json, f);
        fclose(f);
        zt_tokenizer *tk = zt_tokenizer_load(path);
        CHECK(!tk && strstr(zt_errmsg(), cases[i].expect) && strstr(zt_errmsg(), path), "case %zu: %s", i,
              tk ? "loaded" : zt_errmsg());
        zt_tokenizer_free(tk);
    }
    CHECK(!zt_tokenizer_load("/nonexistent/tokenizer.json"), "missing file");
    remove(path);
    rmdir(dir);
}

int main(void) {
    double t0 = zt_now();
    zt_tokenizer *tk = zt_tokenizer_load(TOKENIZER_JSON);
    if (!tk) {
        fprintf(stderr, "FAIL: %s\n", zt_errmsg());
        return 1;
    }
    printf("loaded %s in %.2f s; utf8proc %s (Unicode %s)\n", TOKENIZER_JSON, zt_now() - t0, utf8proc_version(),
           utf8proc_unicode_version());
    // the tables mark verbatim what Unicode 16.0 knows and the reference does not;
    // a newer utf8proc may need them regenerated (data/unicode_gen.py)
    CHECK(atoi(utf8proc_unicode_version()) >= 9 && atoi(utf8proc_unicode_version()) <= 16,
          "utf8proc knows Unicode %s: regenerate data/unicode_tables.c for it", utf8proc_unicode_version());
    test_basics(tk);
    test_load_errors();
    test_golden(tk);
    zt_tokenizer_free(tk);
    TEST_END();
}
