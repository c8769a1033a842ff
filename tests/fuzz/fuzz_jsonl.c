// libFuzzer harness: the JSON Lines document reader of `zerotrain pack`
// (data/pack_text.c, compiled into this harness so that it can reach the file's
// statics). Input: the first byte picks tiny batch/line/piece sizes, the rest is the
// .jsonl file (member "text").
// Properties:
//   - with --skip-bad the pack never fails, and every non-blank line is either a
//     document or counted as bad; without it, a failure names FILE:LINE;
//   - the documents and their ids are the same with tiny read buffers and pieces as
//     with large ones (batch boundaries, line carry-over and safe cuts change nothing);
//   - the own string scanner (member_bytes, used for members holding \u0000) agrees
//     with cJSON on every line cJSON decodes completely.
#include "data/pack_text.c"

#include "fuzz_util.h"

static zt_tokenizer *tk;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    tk = fuzz_load_tokenizer("fuzz_jsonl");
    kept_pool = zt_tok_pool_new(tk, 1);  // its word caches are not reset between inputs: hits and misses both run
    return 0;
}

typedef struct {
    zt_ids ids;        // every document's ids, one after the other
    int64_t *ends;     // where each document ends in ids
    size_t ndocs, cap;
} collect;

static void c_begin(void *ctx) { (void)ctx; }
static int c_put(void *ctx, const uint32_t *ids, size_t n) {
    collect *c = ctx;
    for (size_t i = 0; i < n; i++) zt_ids_push(&c->ids, ids[i]);
    return 0;
}
static int c_end(void *ctx) {
    collect *c = ctx;
    if (c->ndocs == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->ends = realloc(c->ends, c->cap * sizeof *c->ends);
    }
    c->ends[c->ndocs++] = (int64_t)c->ids.n;
    return 0;
}
static void c_progress(void *ctx, const char *input) { (void)ctx, (void)input; }

static int run(const char *path, int skip_bad, size_t batch, size_t slack, size_t piece, collect *c,
               zt_pack_stats *st) {
    batch_bytes_max = batch, line_slack = slack, piece_bytes = piece;
    memset(c, 0, sizeof *c);
    memset(st, 0, sizeof *st);
    zt_pack_opts o = {.input = ZT_PACK_JSONL, .seq_len = 16, .vocab_size = zt_tokenizer_vocab_size(tk), .eos_id = -1,
                      .tok = tk, .field = "text", .skip_bad = skip_bad, .threads = 1, .quiet = 1};
    zt_pack_sink sink = {.ctx = c, .begin_doc = c_begin, .put = c_put, .end_doc = c_end, .progress = c_progress};
    const char *in[1] = {path};
    return zt_pack_text(in, 1, &o, &sink, st);
}

static void drop(collect *c) {
    zt_ids_free(&c->ids);
    free(c->ends);
}

// member_bytes against cJSON, on a line prepare_record would take as a document.
static void check_scanner(const char *line, size_t len) {
    if (len && line[len - 1] == '\r') len--;
    int bad_escape;
    if (is_blank(line, len) || raw_control_at(line, len, &bad_escape) >= 0 || has_nul_escape(line, len)) return;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (j && end && is_blank(end, (size_t)(line + len - end)) && cJSON_IsObject(j)) {
        // cJSON's keys end at a NUL too: only lines without \u0000 anywhere are compared
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "text");
        if (cJSON_IsString(v)) {
            size_t n = 0;
            char *mb = member_bytes(line, len, "text", &n);
            FUZZ_ASSERT(mb && n == strlen(v->valuestring) && !memcmp(mb, v->valuestring, n),
                        "member_bytes %s (%zu bytes) but cJSON decodes %zu bytes", mb ? "differs" : "failed", n,
                        strlen(v->valuestring));
            free(mb);
        }
    }
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t knob = data[0];
    data++, size--;
    const char *path = fuzz_write("in.jsonl", data, size);
    // lines, as read_lines splits them
    int64_t nonblank = 0;
    for (size_t pos = 0; pos < size;) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;
        nonblank += !is_blank((const char *)data + pos, len);
        check_scanner((const char *)data + pos, len);
        pos += len + 1;
    }
    collect small, large;
    zt_pack_stats s1, s2;
    int rc1 = run(path, 1, 1 + (knob & 15), 1 + (knob >> 4 & 3), 1 + (knob >> 6), &small, &s1);
    FUZZ_ASSERT(rc1 == 0, "--skip-bad failed: %s", zt_errmsg());
    // (stats.documents is pack.c's count, made in its sink; here the sink counts)
    FUZZ_ASSERT((int64_t)small.ndocs + s1.bad_documents == nonblank, "%zu documents + %lld bad, but %lld non-blank lines",
                small.ndocs, (long long)s1.bad_documents, (long long)nonblank);
    int rc2 = run(path, 1, (size_t)1 << 16, (size_t)1 << 16, (size_t)1 << 20, &large, &s2);
    FUZZ_ASSERT(rc2 == 0 && large.ndocs == small.ndocs && large.ids.n == small.ids.n &&
                    (small.ids.n == 0 || !memcmp(large.ids.ids, small.ids.ids, small.ids.n * 4)) &&
                    (small.ndocs == 0 || !memcmp(large.ends, small.ends, small.ndocs * sizeof *small.ends)),
                "tiny buffers (knob 0x%02x): %zu documents, %zu ids; large: %zu documents, %zu ids", knob, small.ndocs,
                small.ids.n, large.ndocs, large.ids.n);
    drop(&small);
    drop(&large);
    // without --skip-bad: the first bad line is named as FILE:LINE
    int rc3 = run(path, 0, (size_t)1 << 16, (size_t)1 << 16, (size_t)1 << 20, &large, &s2);
    if (rc3 != 0) {
        char want[700];
        snprintf(want, sizeof want, "%s:", path);
        FUZZ_ASSERT(!strncmp(zt_errmsg(), want, strlen(want)) && zt_errmsg()[strlen(want)] >= '1' &&
                        zt_errmsg()[strlen(want)] <= '9',
                    "the error does not start with FILE:LINE: %s", zt_errmsg());
        FUZZ_ASSERT(s1.bad_documents > 0, "failed without --skip-bad, but --skip-bad found no bad document: %s",
                    zt_errmsg());
    } else {
        FUZZ_ASSERT(s1.bad_documents == 0, "--skip-bad skipped %lld documents, but without it the pack passed",
                    (long long)s1.bad_documents);
    }
    drop(&large);
    return 0;
}
