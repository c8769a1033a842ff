// `zerotrain tokenize`: the Qwen3 tokenizer from the command line. Encodes text to
// ids, decodes ids to text, and times encoding on a file (--bench) so that the
// tokenizer's own speed can be seen apart from pack's reading and writing.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "base/common.h"

static const char synopsis[] =
            "usage: zerotrain tokenize [options] [FILE]\n"
            "\n"
            "Encodes UTF-8 text (FILE, or standard input) with a tokenizer.json (Qwen3's unless\n"
            "--tokenizer names another: Qwen3.5's, any byte-level BPE with a split regex) and prints\n"
            "the ids, space-separated; with --lines, one line of ids per input line. --decode reads\n"
            "ids (separated by spaces, commas or newlines) and writes the text they stand for.\n";
static const char epilog[] =
            "\n"
            "examples:\n"
            "  echo 'Hello world' | zerotrain tokenize          # 9707 1879 198\n"
            "  echo '9707 1879' | zerotrain tokenize --decode   # Hello world\n";

typedef struct {
    const char *tokenizer;
    int lines, decode, count, bench, threads;
} tokenize_flags;

#define T tokenize_flags
static const zt_flag flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "options:"},
    {"tokenizer", ZT_FLAG_STR, ZT_AT_STR(T, tokenizer), "PATH", .sdef = ZT_DEFAULT_TOKENIZER, .letter = 't',
     .help = "tokenizer.json, or a directory holding one (default: the\nQwen3 one shipped in assets/)"},
    {"lines", ZT_FLAG_SET, ZT_AT_INT(T, lines), .letter = 'l',
     .help = "encode each line on its own (without its line end)"},
    {"decode", ZT_FLAG_SET, ZT_AT_INT(T, decode), .letter = 'd', .help = "ids in, text out"},
    {"count", ZT_FLAG_SET, ZT_AT_INT(T, count), .letter = 'c', .help = "print only the number of tokens"},
    {"bench", ZT_FLAG_SET, ZT_AT_INT(T, bench),
     .help = "encode FILE's lines as documents on --threads workers, twice\n(cold and warm word caches), and "
             "print tokens per second"},
    {"threads", ZT_FLAG_INT, ZT_AT_INT(T, threads), "N", 1, 4096, .letter = 'j',
     .help = "workers for --bench (default: one per core)"},
    {0}};
#undef T

static char *read_all(const char *path, size_t *n) {
    if (path && strcmp(path, "-")) return zt_read_file(path, n);
    size_t cap = 1 << 16, len = 0;
    char *buf = zt_xmalloc(cap);
    size_t k;
    while ((k = fread(buf + len, 1, cap - len - 1, stdin)) > 0) {
        len += k;
        if (cap - len - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) zt_fatal("out of host memory reading standard input");
        }
    }
    buf[len] = 0;
    *n = len;
    return buf;
}

static int print_ids(const zt_ids *ids, int count_only) {
    if (count_only) return printf("%zu\n", ids->n) < 0;
    for (size_t i = 0; i < ids->n; i++) printf(i ? " %u" : "%u", ids->ids[i]);
    putchar('\n');
    return 0;
}

static int decode_ids(const zt_tokenizer *tk, const char *text, size_t n) {
    zt_ids ids = {0};
    for (size_t i = 0; i < n;) {
        while (i < n && (text[i] == ' ' || text[i] == ',' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) i++;
        if (i >= n) break;
        char *end;
        unsigned long long v = strtoull(text + i, &end, 10);
        if (end == text + i || v > UINT32_MAX) {
            fprintf(stderr, "zerotrain: error: --decode: \"%.20s\" at byte %zu is not a token id\n", text + i, i);
            zt_ids_free(&ids);
            return 1;
        }
        zt_ids_push(&ids, (uint32_t)v);
        i = (size_t)(end - text);
    }
    zt_buf out = {0};
    int rc = zt_decode(tk, ids.ids, ids.n, &out);
    if (rc) fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
    else fwrite(out.p, 1, out.n, stdout);
    free(out.p);
    zt_ids_free(&ids);
    return rc ? 1 : 0;
}

// Lines of text as documents: pointers into text, without line ends.
static size_t split_lines(char *text, size_t n, const char ***docs, size_t **lens) {
    size_t cap = 1024, nd = 0;
    *docs = zt_xmalloc(cap * sizeof **docs);
    *lens = zt_xmalloc(cap * sizeof **lens);
    for (size_t i = 0; i < n;) {
        char *nl = memchr(text + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - text) : n, len = e - i;
        if (len && text[i + len - 1] == '\r') len--;
        if (nd == cap) {
            cap *= 2;
            *docs = realloc(*docs, cap * sizeof **docs);
            *lens = realloc(*lens, cap * sizeof **lens);
            if (!*docs || !*lens) zt_fatal("out of host memory");
        }
        (*docs)[nd] = text + i;
        (*lens)[nd++] = len;
        i = e + 1;
    }
    return nd;
}

static int bench(const zt_tokenizer *tk, char *text, size_t n, int threads) {
    const char **docs;
    size_t *lens;
    size_t nd = split_lines(text, n, &docs, &lens);
    zt_ids *outs = zt_xcalloc(nd ? nd : 1, sizeof *outs);
    int64_t *err = zt_xmalloc((nd ? nd : 1) * sizeof *err);
    zt_tok_pool *pool = zt_tok_pool_new(tk, threads);
    for (int pass = 0; pass < 2; pass++) {
        double t0 = zt_now();
        int64_t bad = zt_tok_pool_encode(pool, docs, lens, nd, outs, err);
        double dt = zt_now() - t0;
        size_t ntok = 0;
        for (size_t i = 0; i < nd; i++) ntok += outs[i].n;
        printf("%s caches: %zu lines, %.1f MB, %zu tokens, %lld bad lines, %d worker%s: %.3f s, %.2fM tok/s, %.1f MB/s\n",
               pass ? "warm" : "cold", nd, (double)n / 1e6, ntok, (long long)bad, zt_tok_pool_threads(pool),
               zt_tok_pool_threads(pool) == 1 ? "" : "s", dt, (double)ntok / 1e6 / dt, (double)n / 1e6 / dt);
    }
    for (size_t i = 0; i < nd; i++) zt_ids_free(&outs[i]);
    zt_tok_pool_free(pool);
    free(outs);
    free(err);
    free(docs);
    free(lens);
    return 0;
}

int zt_cmd_tokenize(int argc, char **argv) {
    tokenize_flags f;
    int first;
    // a usage error exits 1 as before (not the table's 2)
    const int prc = zt_flags_parse_operands("tokenize", flags, &f, argc, argv, synopsis, epilog, &first);
    if (prc) return prc == 1 ? 0 : 1;
    const char *tpath = f.tokenizer;
    const int lines = f.lines, decode = f.decode, count = f.count, do_bench = f.bench, threads = f.threads;
    if (argc - first > 1) {
        fprintf(stderr, "zerotrain: error: tokenize takes at most one FILE\n");
        return 1;
    }
    char path[4096];
    size_t pl = strlen(tpath);
    if (pl >= 5 && !strcmp(tpath + pl - 5, ".json")) snprintf(path, sizeof path, "%s", tpath);
    else snprintf(path, sizeof path, "%s/tokenizer.json", tpath);
    zt_tokenizer *tk = zt_tokenizer_load(path);
    if (!tk) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 1;
    }
    size_t n;
    char *text = read_all(first < argc ? argv[first] : NULL, &n);
    if (!text) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        zt_tokenizer_free(tk);
        return 1;
    }
    int rc = 0;
    if (do_bench) rc = bench(tk, text, n, threads);
    else if (decode) rc = decode_ids(tk, text, n);
    else {
        zt_encoder *enc = zt_encoder_new(tk);
        zt_ids ids = {0};
        const char **docs = NULL;
        size_t *lens = NULL, nd = 1;
        if (lines) nd = split_lines(text, n, &docs, &lens);
        for (size_t i = 0; i < nd && rc == 0; i++) {
            ids.n = 0;
            const char *d = lines ? docs[i] : text;
            size_t len = lines ? lens[i] : n;
            if (zt_encode(enc, d, len, &ids)) {
                if (lines) fprintf(stderr, "zerotrain: error: line %zu: %s\n", i + 1, zt_errmsg());
                else fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
                rc = 1;
            } else {
                print_ids(&ids, count);
            }
        }
        free(docs);
        free(lens);
        zt_ids_free(&ids);
        zt_encoder_free(enc);
    }
    free(text);
    zt_tokenizer_free(tk);
    return rc;
}
