// `zerotrain pack` on text against a plain Python packer over Hugging Face
// tokenizers (tests/reference/make_pack_golden.py -> pack_expected.json): JSON
// Lines with bad lines skipped, text lines, text files with one document big
// enough to be cut into pieces, the single and the per-rank layouts (uneven block
// counts), CRC-32C of every block file. Then each kind of bad input, with the
// file:line it must name, and --skip-bad counting instead of stopping.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/dataset.h"
#include "data/tokenizer.h"
#include "base/common.h"
#include "tests/support/test_util.h"

#define TOKENIZER_JSON ZT_TEST_DIR "/../assets/qwen3-tokenizer/tokenizer.json"
#define GOLDEN ZT_TEST_DIR "/data/tokenizer/golden.bin.gz"
#define EXPECTED ZT_TEST_DIR "/data/tokenizer/pack_expected.json"

static char root[256];
static zt_tokenizer *tok;
typedef struct {
    char *p;
    size_t n;
} text;
static text *corpus;

static const char *P(const char *fmt, ...) {
    static char ring[8][4096];
    static int k;
    char rel[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *out = ring[k++ % 8];
    snprintf(out, 4096, "%s/%s", root, rel);
    return out;
}

// The corpus documents of the golden file (the first 10,000 entries).
static text *golden_texts(size_t *n, unsigned char **raw) {
    gzFile f = gzopen(GOLDEN, "rb");
    if (!f) exit(2);
    size_t cap = 1 << 24, len = 0;
    unsigned char *buf = zt_xmalloc(cap);
    int r;
    while ((r = gzread(f, buf + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)r;
        if (len == cap) buf = realloc(buf, cap *= 2);
    }
    gzclose(f);
    const unsigned char *p = buf + 12;
    text *t = zt_xcalloc(10000, sizeof *t);
    for (int i = 0; i < 10000; i++) {
        uint32_t v;
        memcpy(&v, p, 4);
        p += 4;
        t[i].p = (char *)p;
        t[i].n = v;
        p += v;
        memcpy(&v, p, 4);
        p += 4 + 4 * (size_t)v;
        memcpy(&v, p, 4);
        p += 4;
        if (v != 0xFFFFFFFFu) p += v;
    }
    *n = 10000;
    *raw = buf;
    return t;
}

static void json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) {
        fprintf(stderr, "setup: cannot write %s\n", path);
        exit(2);
    }
}

// The inputs of make_pack_golden.py, built by the same rules.
static int n_jsonl, n_files, bad_every, blank_every;

static void write_inputs(const text *t) {
    static const char *bad_lines[] = {"{\"text\": \"unterminated", "{\"body\": \"no text member\"}",
                                      "{\"text\": 42}", "{\"text\": \"bad \xff byte\"}", "[1, 2, 3]"};
    FILE *f = fopen(P("corpus.jsonl"), "wb");
    for (int i = 0; i < n_jsonl; i++) {
        if (i % bad_every == bad_every / 2 - 1) fprintf(f, "%s\n", bad_lines[(i / bad_every) % 5]);
        if (i % blank_every == blank_every / 2) fputs("   \r\n", f);
        fprintf(f, "{\"id\": %d, \"text\": ", i);
        json_string(f, t[i].p, t[i].n);
        fputs("}\n", f);
    }
    fclose(f);
    f = fopen(P("corpus.txt"), "wb");
    for (int i = 0; i < n_jsonl; i++) {
        if (i) fputc('\n', f);
        fwrite(t[i].p, 1, t[i].n, f);
    }
    fclose(f);
    f = fopen(P("big.txt"), "wb");
    for (int i = 0; i < 10000; i++) {
        if (i) fputc('\n', f);
        fwrite(t[i].p, 1, t[i].n, f);
    }
    fclose(f);
    for (int i = 0; i < n_files; i++)
        if (t[i].n) write_file(P("doc%02d.txt", i), t[i].p, t[i].n);
}

static zt_pack_opts text_opts(zt_pack_input in, int seq_len, int per_rank, int threads) {
    zt_pack_opts o = {.input = in, .seq_len = seq_len, .vocab_size = zt_tokenizer_vocab_size(tok), .eos_id = 151643,
                      .per_rank = per_rank, .tokenizer = zt_tokenizer_hash(tok), .quiet = 1, .tok = tok,
                      .threads = threads};
    return o;
}

static int64_t num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

// Pack one configuration of pack_expected.json and compare everything.
static void run_config(const cJSON *c, int threads) {
    const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
    const char *kind = cJSON_GetObjectItemCaseSensitive(c, "input")->valuestring;
    zt_pack_input in = !strcmp(kind, "jsonl") ? ZT_PACK_JSONL : !strcmp(kind, "lines") ? ZT_PACK_TEXT_LINES : ZT_PACK_TEXT_FILES;
    zt_pack_opts o = text_opts(in, (int)num(c, "seq_len"), (int)num(c, "per_rank"), threads);
    o.skip_bad = in == ZT_PACK_JSONL;
    const char *inputs[64];
    int ninputs = 0;
    if (in == ZT_PACK_JSONL) inputs[ninputs++] = strdup(P("corpus.jsonl"));
    else if (in == ZT_PACK_TEXT_LINES) inputs[ninputs++] = strdup(P("corpus.txt"));
    else {
        inputs[ninputs++] = strdup(P("big.txt"));
        struct stat sb;
        for (int i = 0; i < n_files; i++)
            if (stat(P("doc%02d.txt", i), &sb) == 0) inputs[ninputs++] = strdup(P("doc%02d.txt", i));
    }
    char out[4096];
    snprintf(out, sizeof out, "%s/%s-t%d", root, name, threads);
    zt_pack_stats st;
    double t0 = zt_now();
    int rc = zt_pack(inputs, ninputs, out, &o, &st);
    double dt = zt_now() - t0;
    CHECK(rc == 0, "%s: pack failed: %s", name, zt_errmsg());
    for (int i = 0; i < ninputs; i++) free((void *)inputs[i]);
    if (rc) return;
    CHECK(st.documents == num(c, "documents"), "%s: documents %lld vs %lld", name, (long long)st.documents, (long long)num(c, "documents"));
    CHECK(st.tokens == num(c, "tokens"), "%s: tokens %lld vs %lld", name, (long long)st.tokens, (long long)num(c, "tokens"));
    CHECK(st.blocks == num(c, "blocks"), "%s: blocks %lld vs %lld", name, (long long)st.blocks, (long long)num(c, "blocks"));
    CHECK(st.dropped_tokens == num(c, "dropped"), "%s: dropped %lld vs %lld", name, (long long)st.dropped_tokens, (long long)num(c, "dropped"));
    CHECK(st.bad_documents == num(c, "bad_documents"), "%s: bad %lld vs %lld", name, (long long)st.bad_documents, (long long)num(c, "bad_documents"));

    zt_dataset ds;
    zt_dataset_opts dopts = {.verify_crc = 1, .check_tokens = 1};
    rc = zt_dataset_open(&ds, out, &dopts);
    CHECK(rc == 0, "%s: dataset does not verify: %s", name, zt_errmsg());
    if (rc) return;
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(c, "files");
    CHECK(ds.nfiles == cJSON_GetArraySize(files), "%s: %d files", name, ds.nfiles);
    CHECK(!strcmp(ds.tokenizer, zt_tokenizer_hash(tok)), "%s: tokenizer recorded as %s", name, ds.tokenizer);
    CHECK(ds.vocab_size == 151669 && ds.eos_id == 151643, "%s: vocab %lld eos %lld", name, (long long)ds.vocab_size, (long long)ds.eos_id);
    printf("%s (%d thread%s, %.2f s): %lld documents, %lld tokens, blocks per file:", name, threads, threads == 1 ? "" : "s",
           dt, (long long)st.documents, (long long)st.tokens);
    for (int i = 0; i < ds.nfiles && i < cJSON_GetArraySize(files); i++) {
        const cJSON *f = cJSON_GetArrayItem(files, i);
        char crc[16];
        snprintf(crc, sizeof crc, "0x%08x", ds.files[i].crc32c);
        CHECK(ds.files[i].blocks == num(f, "blocks"), "%s file %d: %lld blocks vs %lld", name, i, (long long)ds.files[i].blocks, (long long)num(f, "blocks"));
        CHECK(!strcmp(crc, cJSON_GetObjectItemCaseSensitive(f, "crc32c")->valuestring), "%s file %d: crc %s vs %s",
              name, i, crc, cJSON_GetObjectItemCaseSensitive(f, "crc32c")->valuestring);
        printf(" %lld", (long long)ds.files[i].blocks);
    }
    printf(", dropped %lld, bad %lld: as in Python\n", (long long)st.dropped_tokens, (long long)st.bad_documents);
    zt_dataset_close(&ds);
}

// One small input, one rule: pack must fail naming file:line and the rule, and
// with skip_bad count the document and go on: blocks of 2 tokens, so that the good
// document (a word and its eos) fills one; with no good document there is nothing to
// train on and the pack is refused as such (issue 47), the bad one still counted.
static void bad_case(zt_pack_input in, const char *content, size_t n, const char *field, const char *expect,
                     int64_t good_docs) {
    static int k;
    char path[4096], out[4096];
    snprintf(path, sizeof path, "%s/bad%d.%s", root, k, in == ZT_PACK_JSONL ? "jsonl" : "txt");
    snprintf(out, sizeof out, "%s/badout%d", root, k++);
    write_file(path, content, n);
    zt_pack_opts o = text_opts(in, 4, 0, 2);
    o.field = field;
    const char *inputs[] = {path};
    zt_pack_stats st;
    int rc = zt_pack(inputs, 1, out, &o, &st);
    CHECK(rc == -1 && strstr(zt_errmsg(), expect) && strstr(zt_errmsg(), path), "expected failure with '%s', got rc %d: %s",
          expect, rc, rc ? zt_errmsg() : "");
    if (getenv("ZT_TEST_VERBOSE")) printf("  error ok: %s\n", zt_errmsg());
    struct stat sb;
    char js[4200];
    snprintf(js, sizeof js, "%s/dataset.json", out);
    CHECK(stat(js, &sb) != 0, "a failed pack leaves no dataset.json");
    o.skip_bad = 1;
    o.seq_len = 2;
    strcat(out, "-skip");
    rc = zt_pack(inputs, 1, out, &o, &st);
    if (good_docs > 0)
        CHECK(rc == 0 && st.bad_documents == 1 && st.documents == good_docs,
              "skip_bad on '%s': rc %d, %lld bad, %lld good", expect, rc, (long long)st.bad_documents,
              (long long)st.documents);
    else
        CHECK(rc == -1 && strstr(zt_errmsg(), "pack: no block: the inputs gave 0 documents") &&
                  st.bad_documents == 1 && st.documents == 0,
              "skip_bad on '%s' (no good document): rc %d, %lld bad, %lld good: %s", expect, rc,
              (long long)st.bad_documents, (long long)st.documents, rc ? zt_errmsg() : "");
}

#define S(lit) lit, sizeof(lit) - 1

static void test_bad_inputs(void) {
    bad_case(ZT_PACK_JSONL, S("{\"text\": \"ok\"}\n\n{\"text\": \"a\" \"b\"}\n"), NULL, ":3: malformed JSON at column", 1);
    bad_case(ZT_PACK_JSONL, S("{\"text\": \"ok\"}\n{\"body\": \"x\", \"id\": 3}\n"), NULL,
             ":2: no \"text\" member (the object has \"body\", \"id\"; choose one with --field)", 1);
    bad_case(ZT_PACK_JSONL, S("{\"body\": \"ok\"}\n{\"text\": \"x\"}\n"), "body", ":2: no \"body\" member", 1);
    bad_case(ZT_PACK_JSONL, S("{\"text\": [\"x\"]}\n{\"text\": \"ok\"}\n"), NULL, ":1: member \"text\" is an array, not a string", 1);
    bad_case(ZT_PACK_JSONL, S("{\"text\": \"ok\"}\r\n{\"text\": \"\"}\r\n"), NULL, ":2: empty document (member \"text\" is \"\")", 1);
    bad_case(ZT_PACK_JSONL, S("{\"text\": \"ok\"}\n{\"text\": \"caf\xc3\"}\n"), NULL,
             ":2: member \"text\": invalid UTF-8 at byte 3 of the string (byte 0xc3)", 1);
    bad_case(ZT_PACK_JSONL, S("\"just a string\"\n{\"text\": \"ok\"}\n"), NULL, ":1: the line is a string, not a JSON object", 1);
    bad_case(ZT_PACK_JSONL, S("{\"text\": \"ok\"} {\"text\": \"two\"}\n{\"text\": \"ok\"}\n"), NULL, ":1: text after the JSON value at column 16", 1);
    // a raw control character inside a string is invalid JSON (a raw NUL used to cut the
    // document short silently); the escaped \u0000 is valid and is packed (see below)
    bad_case(ZT_PACK_JSONL, S("{\"text\": \"nul \x00 here\"}\n{\"text\": \"ok\"}\n"), NULL,
             ":1: raw control character 0x00 at column 15", 1);
    bad_case(ZT_PACK_JSONL, S("{\"text\": \"ok\"}\n{\"text\": \"tab\there\"}\n"), NULL,
             ":2: raw control character 0x09 at column 14", 1);
    bad_case(ZT_PACK_TEXT_LINES, S("fine\n\nab\xed\xa0\x80z\n"), NULL, ":3: invalid UTF-8 at column 3 (byte 0xed)", 1);
    bad_case(ZT_PACK_TEXT_FILES, "", 0, NULL, ": empty document (the file has 0 bytes)", 0);
    bad_case(ZT_PACK_TEXT_FILES, S("a\xff"), NULL, ": invalid UTF-8 at byte offset 1 (byte 0xff)", 0);

    // the big JSON Lines input without skip_bad stops at its first bad line: the
    // first empty document, or the injected line 200
    int64_t line = 0, first_bad = 0;
    for (int i = 0; i < n_jsonl && !first_bad; i++) {
        if (i % bad_every == bad_every / 2 - 1 && ++line) first_bad = line;
        if (i % blank_every == blank_every / 2) line++;
        line++;
        if (!first_bad && corpus[i].n == 0) first_bad = line;
    }
    char want[64];
    snprintf(want, sizeof want, "corpus.jsonl:%lld: ", (long long)first_bad);
    zt_pack_opts o = text_opts(ZT_PACK_JSONL, 2048, 0, 2);
    const char *inputs[] = {P("corpus.jsonl")};
    zt_pack_stats st;
    int rc = zt_pack(inputs, 1, P("nostop"), &o, &st);
    CHECK(rc == -1 && strstr(zt_errmsg(), want), "first bad line %lld: %s", (long long)first_bad, zt_errmsg());
    // a tokenizer is required, and its vocabulary must fit
    o.tok = NULL;
    CHECK(zt_pack(inputs, 1, P("notok"), &o, &st) == -1 && strstr(zt_errmsg(), "needs a tokenizer"), "%s", zt_errmsg());
    o = text_opts(ZT_PACK_JSONL, 2048, 0, 2);
    o.vocab_size = 1000;
    CHECK(zt_pack(inputs, 1, P("smallvocab"), &o, &st) == -1 && strstr(zt_errmsg(), "smaller than the tokenizer"), "%s",
          zt_errmsg());
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

int main(void) {
    tok = zt_tokenizer_load(TOKENIZER_JSON);
    if (!tok) {
        fprintf(stderr, "FAIL: %s\n", zt_errmsg());
        return 1;
    }
    size_t elen;
    char *etext = zt_read_file(EXPECTED, &elen);
    cJSON *exp = etext ? cJSON_Parse(etext) : NULL;
    if (!exp) {
        fprintf(stderr, "FAIL: cannot read %s\n", EXPECTED);
        return 1;
    }
    n_jsonl = (int)num(exp, "n_jsonl");
    n_files = (int)num(exp, "n_files");
    bad_every = (int)num(exp, "bad_every");
    blank_every = (int)num(exp, "blank_every");
    snprintf(root, sizeof root, "/tmp/zt_pack_text_XXXXXX");
    if (!mkdtemp(root)) return 2;
    size_t nt;
    unsigned char *raw;
    text *t = golden_texts(&nt, &raw);
    corpus = t;
    write_inputs(t);

    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(exp, "configs")) run_config(c, 2);
    run_config(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(exp, "configs"), 0), 1);  // one worker: same bytes
    test_bad_inputs();

    nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    cJSON_Delete(exp);
    free(etext);
    free(t);
    free(raw);
    zt_tokenizer_free(tok);
    TEST_END();
}
