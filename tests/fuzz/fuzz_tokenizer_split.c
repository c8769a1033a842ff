// libFuzzer harness: the tokenizer's split paths against each other (data/tokenizer.c) on
// arbitrary bytes. One small vocabulary (tests/data/tokenizer/small, 600 ids of Qwen3's)
// loaded four times: with the Qwen2/3 regex and with Qwen3.5's (\p{M}), each once as
// written (the hand-written matchers `qwen3` and `qwen3.5`) and once wrapped in a
// non-capturing group, which no matcher knows, so PCRE2 runs it (the `pcre2-jit` path).
// Properties:
//   - on valid UTF-8, each hand matcher's pieces (zt_pretokenize, zt_pretokenize_qwen35) are
//     PCRE2's find-all matches of its regex, exactly (what the vocabulary cannot show: with 600
//     ids most pieces are bytes, so a wrong split can give the right ids);
//   - the hand matcher and PCRE2 give the same ids, for both regexes (the same text, the
//     same regex: any difference is a bug in one of the two splitters);
//   - invalid UTF-8 is refused by both, naming the same byte;
//   - the PCRE2 path round-trips: decode(encode(x)) is x after NFC (as fuzz_tokenizer checks
//     for the hand matcher), and encoding at each safe cut gives the whole's ids.
#include <cjson/cJSON.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/common.h"
#include "data/tokenizer.h"
#include "data/unicode.h"
#include "fuzz_util.h"

// Qwen2/3's split regex, as data/tokenizer.c hand-matches it.
static const char QWEN3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
// Qwen3.5's split regex, as its tokenizer.json (tests/data/tokenizer/qwen3_5) has it.
static const char QWEN35_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum { QWEN3_HAND, QWEN3_PCRE2, QWEN35_HAND, QWEN35_PCRE2, NTOK };
static zt_tokenizer *tk[NTOK];
static pcre2_code *re3, *re35;
static pcre2_match_data *md;
static zt_encoder *enc[NTOK];

// The small tokenizer.json with its split regex replaced by re (NULL: kept), loaded.
static zt_tokenizer *load_with_regex(cJSON *root, const char *re, int wrap, const char *name, const char *want) {
    cJSON *split = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), "pretokenizers"), 0);
    cJSON *pattern = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    static char orig[512];
    if (!orig[0]) snprintf(orig, sizeof orig, "%s", cJSON_GetObjectItemCaseSensitive(pattern, "Regex")->valuestring);
    char buf[600];
    snprintf(buf, sizeof buf, wrap ? "(?:%s)" : "%s", re ? re : orig);
    cJSON_ReplaceItemInObjectCaseSensitive(pattern, "Regex", cJSON_CreateString(buf));
    char *text = cJSON_PrintUnformatted(root);
    const char *path = fuzz_write(name, text, strlen(text));
    free(text);
    zt_tokenizer *t = zt_tokenizer_load(path);
    if (!t || strcmp(zt_tokenizer_split_name(t), want)) {
        fprintf(stderr, "fuzz_tokenizer_split: %s: %s (split %s, expected %s)\n", name, t ? "loaded" : zt_errmsg(),
                t ? zt_tokenizer_split_name(t) : "-", want);
        abort();
    }
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("ZT_TOKENIZER_CACHE", "off", 1);  // no cache files from a fuzz run
    size_t n;
    char *json = zt_read_file(ZT_FUZZ_SMALL_TOKENIZER, &n);
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    if (!root) {
        fprintf(stderr, "fuzz_tokenizer_split: cannot read %s\n", ZT_FUZZ_SMALL_TOKENIZER);
        abort();
    }
    tk[QWEN3_HAND] = load_with_regex(root, NULL, 0, "q3.json", "qwen3");
    tk[QWEN3_PCRE2] = load_with_regex(root, NULL, 1, "q3re.json", "pcre2-jit");
    tk[QWEN35_HAND] = load_with_regex(root, QWEN35_RE, 0, "q35.json", "qwen3.5");
    tk[QWEN35_PCRE2] = load_with_regex(root, QWEN35_RE, 1, "q35re.json", "pcre2-jit");
    for (int k = 0; k < NTOK; k++) enc[k] = zt_encoder_new(tk[k]);
    int err;
    PCRE2_SIZE eoff;
    re3 = pcre2_compile((PCRE2_SPTR)QWEN3_RE, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
    re35 = pcre2_compile((PCRE2_SPTR)QWEN35_RE, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
    if (!re3 || !re35) abort();
    pcre2_jit_compile(re3, PCRE2_JIT_COMPLETE);
    pcre2_jit_compile(re35, PCRE2_JIT_COMPLETE);
    md = pcre2_match_data_create(4, NULL);
    cJSON_Delete(root);
    free(json);
    return 0;
}

static int same_ids(const zt_ids *a, const zt_ids *b) {
    return a->n == b->n && (a->n == 0 || !memcmp(a->ids, b->ids, a->n * sizeof *a->ids));
}

// The PCRE2 tokenizer k: decode(encode(x)) is x with each stretch between added tokens in NFC
// (the hand tokenizer's decode of the same ids, which its own harness checks, when they agree:
// here the independent check is that the decoded bytes re-encode to the same ids), and safe cuts.
static void pcre2_round_trip(int k, const char *text, size_t size, const zt_ids *ids) {
    zt_buf dec = {0};
    FUZZ_ASSERT(zt_decode(tk[k], ids->ids, ids->n, &dec) == 0, "decode failed: %s", zt_errmsg());
    zt_ids again = {0};
    FUZZ_ASSERT(zt_encode(enc[k], dec.p ? dec.p : "", dec.n, &again) == 0, "decoded text does not encode");
    FUZZ_ASSERT(same_ids(&again, ids), "encode(decode(encode(x))) has %zu ids, encode(x) %zu", again.n, ids->n);
    zt_ids_free(&again);
    free(dec.p);
    for (size_t from = 0, c = 0; from < size && c < 4; c++) {
        const size_t cut = zt_tokenizer_safe_cut(tk[k], text, size, from);
        if (cut >= size) break;
        zt_ids a = {0};
        FUZZ_ASSERT(zt_encode(enc[k], text, cut, &a) == 0 && zt_encode(enc[k], text + cut, size - cut, &a) == 0,
                    "a piece at safe cut %zu did not encode", cut);
        FUZZ_ASSERT(same_ids(&a, ids), "pcre2: encode(x[:%zu]) + encode(x[%zu:]) has %zu ids, encode(x) %zu", cut, cut,
                    a.n, ids->n);
        zt_ids_free(&a);
        from = cut + 1;
    }
}

// The hand matcher's pieces against PCRE2's find-all of the same regex on valid UTF-8 text.
static void same_split(const char *name, const pcre2_code *re,
                       size_t (*split)(const char *, size_t, size_t **, size_t *), const char *text, size_t n) {
    static size_t *ends, cap;
    const size_t np = split(text, n, &ends, &cap);
    size_t pos = 0, k = 0;
    while (pos < n) {
        const int rc = pcre2_match(re, (PCRE2_SPTR)text, n, pos, 0, md, NULL);
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        FUZZ_ASSERT(rc >= 0 && ov[0] == pos, "%s: PCRE2 leaves bytes from %zu unmatched", name, pos);
        FUZZ_ASSERT(k < np && ends[k] == ov[1], "%s: piece %zu ends at %zu by the hand matcher, %zu by PCRE2", name, k,
                    k < np ? ends[k] : 0, (size_t)ov[1]);
        pos = ov[1];
        k++;
    }
    FUZZ_ASSERT(k == np, "%s: %zu pieces by the hand matcher, %zu by PCRE2", name, np, k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    if (zt_utf8_valid_prefix(text, size) == size) {
        same_split("qwen3", re3, zt_pretokenize, text, size);
        same_split("qwen3.5", re35, zt_pretokenize_qwen35, text, size);
    }
    for (int pair = 0; pair < 2; pair++) {
        const int h = pair ? QWEN35_HAND : QWEN3_HAND, p = pair ? QWEN35_PCRE2 : QWEN3_PCRE2;
        zt_ids a = {0}, b = {0};
        const int ra = zt_encode(enc[h], text, size, &a);
        char msg[256];
        snprintf(msg, sizeof msg, "%s", ra ? zt_errmsg() : "");
        const int rb = zt_encode(enc[p], text, size, &b);
        FUZZ_ASSERT(ra == rb, "%s: the hand matcher returns %d, PCRE2 %d", pair ? "qwen3.5" : "qwen3", ra, rb);
        if (ra) {
            FUZZ_ASSERT(!strcmp(msg, zt_errmsg()), "different errors: %s | %s", msg, zt_errmsg());
        } else {
            size_t k = 0;
            while (k < a.n && k < b.n && a.ids[k] == b.ids[k]) k++;
            FUZZ_ASSERT(same_ids(&a, &b), "%s: the hand matcher gives %zu ids, PCRE2 %zu; first difference at %zu",
                        pair ? "qwen3.5" : "qwen3", a.n, b.n, k);
            pcre2_round_trip(p, text, size, &b);
        }
        zt_ids_free(&a);
        zt_ids_free(&b);
    }
    return 0;
}
