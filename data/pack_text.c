// Text inputs of `zerotrain pack`. Input is read in batches of records (lines or
// whole files); per batch, the workers turn records into documents (JSON parsing
// included), long documents are cut at safe points into pieces so that one huge
// document still keeps every worker busy, the workers tokenize the pieces, and the
// documents go to the block writer in input order. A bad document stops the pack
// with file:line and the rule it broke, or is counted and skipped (skip_bad).
// Chat lines are read in their input's format (given, or detected from its first lines),
// rendered, tokenized whole and masked by the workers (data/chat.c) and go to the block writer
// as version 2 words.
#define _GNU_SOURCE
#include "base/json_util.h"
#include "data/pack_text.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat.h"
#include "data/chat_jinja.h"
#include "data/tokenizer.h"
#include "base/common.h"

// Sizes, variables only so that tests/fuzz/fuzz_jsonl.c can shrink them to a few bytes
// (and so reach every batch boundary and every cut with small inputs).
static size_t batch_bytes_max = (size_t)32 << 20;  // text per batch
static size_t line_slack = (size_t)1 << 20;        // read-buffer room past a batch for its last line
#define BATCH_RECORDS 100000
static size_t piece_bytes = (size_t)1 << 20;      // documents longer than twice this are cut (at safe points)
static zt_tok_pool *kept_pool;                     // fuzz_jsonl: one pool for every call (NULL: one per call)
#define MAX_WARNINGS 10                 // skipped documents reported one by one

typedef struct {
    int input;
    int64_t line;        // 1-based line of jsonl/lines records; 0 for a whole file
    const char *raw;     // the record's bytes (inside the batch buffer or a file buffer)
    size_t rawlen;
    const char *text;    // the document: raw, or the JSON string member
    size_t len;
    cJSON *json;         // parsed line, owns text for jsonl
    char *owned;         // the member decoded here instead (it holds \u0000), or NULL
    char *err;           // why the record is not a document (malloc'd), or NULL
    int blank;           // a blank line: not a document, not an error
    size_t piece0, npieces;
    uint32_t *words;     // chat: the conversation's version 2 words (malloc'd)
    size_t nwords;
    int64_t ntrained;
} record;

typedef struct {
    const zt_pack_opts *o;
    const zt_pack_sink *sink;
    zt_pack_stats *st;
    const char *const *inputs;
    int ninputs;
    zt_tok_pool *pool;
    int nthreads;
    const char *field;
    record *rec;
    size_t nrec, rec_cap;
    // pieces of the current batch
    const char **ptext;
    size_t *plen, *prec, *poff;
    zt_ids *pids;
    int64_t *perr;
    size_t npieces, piece_cap, pids_cap;
    int64_t warned, warned_long;
    // chat: per worker, an encoder and scratch (a conversation is encoded whole, then masked)
    zt_encoder **enc;
    zt_chat *chat;
    zt_chat_tokens *ctok;
    zt_chat_jinja_scratch *jscr;  // chat with a Jinja template: per worker
    int *formats;  // chat: each input's zt_chat_format
} text_reader;

static char *msgf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *msgf(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return strdup(buf);
}

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

// An escaped NUL (\u0000, with an odd run of backslashes before the u): cJSON's
// strings end at the first NUL, so such a document would be cut short silently.
static int has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') continue;
        size_t k = i;
        while (k < n && s[k] == '\\') k++;
        if (((k - i) & 1) && k + 5 <= n && s[k] == 'u' && !memcmp(s + k + 1, "0000", 4)) return 1;
        i = k;
    }
    return 0;
}

// A raw control character (< 0x20) where JSON forbids it: anywhere inside a string (JSON
// requires \uXXXX there; cJSON accepts them, and a raw NUL cut the document short without
// a word), or outside strings other than whitespace. The offset, or -1.
// Also a malformed escape inside a string (*bad_escape = 1): cJSON reads "\u12" or "\uZZZZ"
// as \u0000 and so cut the document there without a word.
static int64_t raw_control_at(const char *s, size_t n, int *bad_escape) {
    int in_str = 0;
    *bad_escape = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (in_str) {
            if (c == '\\') {
                const char e = i + 1 < n ? s[i + 1] : 0;
                int ok = e && strchr("\"\\/bfnrtu", e) != NULL;
                if (ok && e == 'u')
                    for (size_t k = i + 2; k < i + 6; k++) ok &= k < n && isxdigit((unsigned char)s[k]);
                if (!ok) {
                    *bad_escape = 1;
                    return (int64_t)i;
                }
                i += e == 'u' ? 5 : 1;
            } else if (c == '"') in_str = 0;
            else if (c < 0x20) return (int64_t)i;
        } else if (c == '"') {
            in_str = 1;
        } else if (c < 0x20 && c != ' ' && c != '\t' && c != '\r' && c != '\n') {
            return (int64_t)i;
        }
    }
    return -1;
}

// ---- the string member with \u0000, decoded here ------------------------------------
// cJSON's strings end at the first NUL, so a member holding \u0000 (valid JSON, which
// Hugging Face tokenizers encodes like any other character) is decoded by this minimal
// scanner over the line cJSON has already validated, keeping the length.
static const char *js_ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    return p;
}
static const char *js_skip_string(const char *p, const char *e) {  // at the opening quote
    for (p++; p < e && *p != '"'; p++)
        if (*p == '\\') p++;
    return p < e ? p + 1 : e;
}
static const char *js_skip_value(const char *p, const char *e) {
    p = js_ws(p, e);
    if (p < e && *p == '"') return js_skip_string(p, e);
    if (p < e && (*p == '{' || *p == '[')) {
        int depth = 0;
        while (p < e) {
            if (*p == '"') {
                p = js_skip_string(p, e);
                continue;
            }
            if (*p == '{' || *p == '[') depth++;
            if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
            p++;
        }
        return e;
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t') p++;
    return p;
}
static int js_hex4(const char *p, const char *e, uint32_t *v) {
    if (e - p < 4) return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}
// The decoded bytes of the string at p (its opening quote); UTF-16 escapes to UTF-8.
static char *js_decode(const char *p, const char *e, size_t *len) {
    char *out = malloc((size_t)(e - p) + 1), *o = out;
    if (!out) return NULL;
    for (p++; p < e && *p != '"'; p++) {
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        if (++p >= e) break;
        uint32_t cp = 0;
        switch (*p) {
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u':
            if (js_hex4(p + 1, e, &cp)) goto bad;
            p += 4;
            if (cp >= 0xd800 && cp < 0xdc00) {  // a surrogate pair
                uint32_t lo;
                if (e - p < 7 || p[1] != '\\' || p[2] != 'u' || js_hex4(p + 3, e, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    goto bad;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p += 6;
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                goto bad;
            }
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xc0 | cp >> 6), *o++ = (char)(0x80 | (cp & 63));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xe0 | cp >> 12), *o++ = (char)(0x80 | (cp >> 6 & 63)), *o++ = (char)(0x80 | (cp & 63));
            } else {
                *o++ = (char)(0xf0 | cp >> 18), *o++ = (char)(0x80 | (cp >> 12 & 63));
                *o++ = (char)(0x80 | (cp >> 6 & 63)), *o++ = (char)(0x80 | (cp & 63));
            }
            continue;
        default: *o++ = *p; continue;  // \" \\ \/
        }
    }
    *len = (size_t)(o - out);
    return out;
bad:
    free(out);
    return NULL;
}
static char *member_bytes(const char *raw, size_t n, const char *key, size_t *len) {
    const char *p = js_ws(raw, raw + n), *e = raw + n;
    if (p >= e || *p != '{') return NULL;
    for (p++;;) {
        p = js_ws(p, e);
        if (p >= e || *p != '"') return NULL;
        size_t kl = 0;
        char *k = js_decode(p, e, &kl);
        if (!k) return NULL;
        const int match = kl == strlen(key) && !memcmp(k, key, kl);
        free(k);
        p = js_ws(js_skip_string(p, e), e);
        if (p >= e || *p != ':') return NULL;
        p = js_ws(p + 1, e);
        if (match) return p < e && *p == '"' ? js_decode(p, e, len) : NULL;
        p = js_ws(js_skip_value(p, e), e);
        if (p >= e || *p != ',') return NULL;
        p++;
    }
}

// Worker side, a chat line parsed by prepare_record: render the conversation, tokenize
// it whole, mask it, and make its words. Sets r->words, or r->err.
static void prepare_conversation(text_reader *tr, record *r) {
    if (has_nul_escape(r->raw, r->rawlen)) {
        r->err = msgf("the line holds \\u0000: --input chat does not support NUL characters in conversations");
        return;
    }
    const int w = omp_get_thread_num();
    zt_chat *c = &tr->chat[w];
    zt_chat_tokens *t = &tr->ctok[w];
    const int rendered = tr->o->jinja ? zt_chat_render_jinja(tr->o->jinja, r->json, (zt_chat_format)tr->formats[r->input],
                                                             r->raw, r->rawlen, tr->o->field,
                                                             (zt_chat_train)tr->o->train_on, &tr->jscr[w], c)
                                      : zt_chat_render_as(r->json, tr->o->field, (zt_chat_format)tr->formats[r->input],
                                                          r->raw, r->rawlen, (zt_chat_train)tr->o->train_on, c);
    if (rendered || zt_chat_tokenize(tr->enc[w], tr->o->tok, c, t)) {
        r->err = strdup(zt_errmsg());
        return;
    }
    r->nwords = t->ids.n;
    r->ntrained = t->ntrained;
    if (r->nwords > (size_t)tr->o->seq_len) return;  // too long: only the count is needed
    r->words = malloc(r->nwords * sizeof *r->words);
    if (!r->words) zt_fatal("out of host memory for a %zu-token conversation", r->nwords);
    for (size_t i = 0; i < r->nwords; i++)
        r->words[i] = t->ids.ids[i] | (i == 0 ? ZT_TOK_DOC_START : 0) | (t->trained[i] ? 0 : ZT_TOK_NO_LOSS);
}

// Worker side, per record: find the document and check what can be checked
// before tokenizing. Sets r->text/len, or r->err, or r->blank.
static void prepare_record(text_reader *tr, record *r) {
    r->text = r->raw;
    r->len = r->rawlen;
    if (tr->o->input == ZT_PACK_TEXT_FILES) {
        if (r->len == 0) r->err = msgf("empty document (the file has 0 bytes)");
        return;
    }
    if (r->len && r->raw[r->len - 1] == '\r') r->len--;  // CR LF line ends
    if (tr->o->input == ZT_PACK_TEXT_LINES) {
        if (r->len == 0) r->blank = 1;
        return;
    }
    // JSON Lines
    if (is_blank(r->raw, r->rawlen)) {
        r->blank = 1;
        return;
    }
    int bad_escape;
    const int64_t ctl = raw_control_at(r->raw, r->rawlen, &bad_escape);
    if (ctl >= 0 && bad_escape) {
        char esc[7];
        size_t k = 0;
        for (; k < 6 && (size_t)ctl + k < r->rawlen; k++) {
            const unsigned char e = (unsigned char)r->raw[ctl + k];
            esc[k] = e >= 0x20 && e < 0x7f ? (char)e : '?';
        }
        esc[k] = 0;
        r->err = msgf("malformed escape \"%s\" at column %lld: JSON allows only \\\" \\\\ \\/ \\b \\f \\n \\r "
                      "\\t and \\u with four hex digits",
                      esc, (long long)ctl + 1);
        return;
    }
    if (ctl >= 0) {
        r->err = msgf("raw control character 0x%02x at column %lld: JSON requires it escaped (\\u%04x) inside a "
                      "string, and allows only whitespace outside one",
                      (unsigned char)r->raw[ctl], (long long)ctl + 1, (unsigned char)r->raw[ctl]);
        return;
    }
    const char *end = NULL;
    r->json = cJSON_ParseWithLengthOpts(r->raw, r->rawlen, &end, 0);
    if (!r->json) {
        size_t col = end && end >= r->raw ? (size_t)(end - r->raw) + 1 : 1;
        char deep[160];
        if (zt_json_depth_error(r->raw, r->rawlen, col, deep, sizeof deep)) {
            r->err = msgf("%s", deep);
            return;
        }
        size_t from = col > 20 ? col - 21 : 0, n = r->rawlen - from < 40 ? r->rawlen - from : 40;
        char near[41];
        for (size_t i = 0; i < n; i++) near[i] = (r->raw[from + i] >= 32 && r->raw[from + i] < 127) ? r->raw[from + i] : '?';
        near[n] = 0;
        r->err = msgf("malformed JSON at column %zu (near \"%s\"); each line must be one JSON object", col, near);
        return;
    }
    if (end && !is_blank(end, (size_t)(r->raw + r->rawlen - end))) {
        while (*end == ' ' || *end == '\t') end++;
        r->err = msgf("text after the JSON value at column %zu; each line must hold exactly one JSON object",
                      (size_t)(end - r->raw) + 1);
        return;
    }
    if (tr->o->input == ZT_PACK_CHAT) {
        prepare_conversation(tr, r);
        cJSON_Delete(r->json);  // the words are all that is kept
        r->json = NULL;
        return;
    }
    if (!cJSON_IsObject(r->json)) {
        r->err = msgf("the line is %s, not a JSON object with a \"%s\" member", zt_json_type_name(r->json), tr->field);
        return;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, tr->field);
    if (!v) {
        char names[256] = "";
        size_t k = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, r->json) {
            int w = snprintf(names + k, sizeof names - k, "%s\"%s\"", k ? ", " : "", it->string);
            if (w < 0 || (size_t)w >= sizeof names - k) break;
            k += (size_t)w;
        }
        r->err = msgf("no \"%s\" member (the object has %s; choose one with --field)", tr->field, k ? names : "none");
        return;
    }
    if (!cJSON_IsString(v)) {
        r->err = msgf("member \"%s\" is %s, not a string", tr->field, zt_json_type_name(v));
        return;
    }
    if (has_nul_escape(r->raw, r->rawlen)) {  // cJSON's copy ends at the NUL: decode the member here
        r->owned = member_bytes(r->raw, r->rawlen, tr->field, &r->len);
        if (!r->owned) {
            r->err = msgf("member \"%s\" holds \\u0000 and could not be decoded (a lone UTF-16 surrogate?)",
                          tr->field);
            return;
        }
        r->text = r->owned;
    } else {
        r->text = v->valuestring;
        r->len = strlen(v->valuestring);
    }
    if (r->len == 0) r->err = msgf("empty document (member \"%s\" is \"\")", tr->field);
}

static void add_piece(text_reader *tr, size_t rec, size_t off, size_t len) {
    if (tr->npieces == tr->piece_cap) {
        size_t cap = tr->piece_cap ? 2 * tr->piece_cap : 1024;
        tr->ptext = realloc(tr->ptext, cap * sizeof *tr->ptext);
        tr->plen = realloc(tr->plen, cap * sizeof *tr->plen);
        tr->prec = realloc(tr->prec, cap * sizeof *tr->prec);
        tr->poff = realloc(tr->poff, cap * sizeof *tr->poff);
        tr->perr = realloc(tr->perr, cap * sizeof *tr->perr);
        tr->pids = realloc(tr->pids, cap * sizeof *tr->pids);
        if (!tr->ptext || !tr->plen || !tr->prec || !tr->poff || !tr->perr || !tr->pids)
            zt_fatal("out of host memory for %zu document pieces", cap);
        memset(tr->pids + tr->piece_cap, 0, (cap - tr->piece_cap) * sizeof *tr->pids);
        tr->piece_cap = cap;
    }
    size_t k = tr->npieces++;
    tr->ptext[k] = tr->rec[rec].text + off;
    tr->plen[k] = len;
    tr->prec[k] = rec;
    tr->poff[k] = off;
}

// A record that is not a document: stop, or count it and go on.
static int bad_document(text_reader *tr, const record *r, const char *why) {
    const char *in = tr->inputs[r->input];
    if (!tr->o->skip_bad) {
        if (r->line) return zt_err("%s:%lld: %s (--skip-bad counts and skips bad documents instead)", in, (long long)r->line, why);
        return zt_err("%s: %s (--skip-bad counts and skips bad documents instead)", in, why);
    }
    tr->st->bad_documents++;
    if (tr->st->inputs) tr->st->inputs[r->input].bad_documents++;
    if (!tr->o->quiet && tr->warned++ < MAX_WARNINGS) {
        if (r->line) fprintf(stderr, "pack: skipping %s:%lld: %s\n", in, (long long)r->line, why);
        else fprintf(stderr, "pack: skipping %s: %s\n", in, why);
        if (tr->warned == MAX_WARNINGS) fprintf(stderr, "pack: (further skipped documents are only counted)\n");
    }
    return 0;
}

static void free_records(text_reader *tr) {
    for (size_t i = 0; i < tr->nrec; i++) {
        free(tr->rec[i].err);
        free(tr->rec[i].owned);
        free(tr->rec[i].words);
        cJSON_Delete(tr->rec[i].json);
    }
    tr->nrec = 0;
}

// Chat: the batch's conversations, already words, to the sink in input order; one longer
// than a block is skipped (a conversation is never split), counted and reported.
static int finish_chat_batch(text_reader *tr) {
    int rc = 0;
    for (size_t i = 0; i < tr->nrec && rc == 0; i++) {
        const record *r = &tr->rec[i];
        if (r->blank) continue;
        if (r->err) {
            rc = bad_document(tr, r, r->err);
        } else if (r->nwords > (size_t)tr->o->seq_len) {
            tr->st->conversations_too_long++;
            if (tr->st->inputs) tr->st->inputs[r->input].too_long++;
            if (!tr->o->quiet && tr->warned_long++ < MAX_WARNINGS) {
                fprintf(stderr,
                        "pack: skipping %s:%lld: the conversation has %zu tokens, more than --seq-len %d (a "
                        "conversation is never split across blocks)\n",
                        tr->inputs[r->input], (long long)r->line, r->nwords, tr->o->seq_len);
                if (tr->warned_long == MAX_WARNINGS)
                    fprintf(stderr, "pack: (further conversations longer than --seq-len are only counted)\n");
            }
        } else {
            rc = tr->sink->put_conversation(tr->sink->ctx, r->words, r->nwords, r->ntrained);
            if (tr->st->inputs) {
                zt_pack_input_stats *in = &tr->st->inputs[r->input];
                in->documents++, in->tokens += (int64_t)r->nwords, in->trained += r->ntrained;
            }
        }
    }
    free_records(tr);
    return rc;
}

// Turn the batch's records into documents and hand them to the sink.
static int run_batch(text_reader *tr) {
    if (tr->nrec == 0) return 0;
    long long n = (long long)tr->nrec;
#pragma omp parallel for num_threads(tr->nthreads) schedule(dynamic, 64)
    for (long long i = 0; i < n; i++) prepare_record(tr, &tr->rec[i]);
    if (tr->o->input == ZT_PACK_CHAT) return finish_chat_batch(tr);

    // pieces: whole documents, long ones cut at safe points
    tr->npieces = 0;
    for (size_t i = 0; i < tr->nrec; i++) {
        record *r = &tr->rec[i];
        r->piece0 = tr->npieces;
        if (r->err || r->blank) {
            r->npieces = 0;
            continue;
        }
        for (size_t from = 0; from < r->len;) {
            size_t cut = r->len;
            if (r->len - from > 2 * piece_bytes) cut = zt_tokenizer_safe_cut(tr->o->tok, r->text, r->len, from + piece_bytes);
            add_piece(tr, i, from, cut - from);
            from = cut;
        }
        r->npieces = tr->npieces - r->piece0;
    }
    zt_tok_pool_encode(tr->pool, tr->ptext, tr->plen, tr->npieces, tr->pids, tr->perr);

    int rc = 0;
    for (size_t i = 0; i < tr->nrec && rc == 0; i++) {
        record *r = &tr->rec[i];
        if (r->blank) continue;
        if (r->err) {
            rc = bad_document(tr, r, r->err);
            continue;
        }
        int64_t bad_at = -1;
        for (size_t k = r->piece0; k < r->piece0 + r->npieces && bad_at < 0; k++)
            if (tr->perr[k] >= 0) bad_at = (int64_t)tr->poff[k] + tr->perr[k];
        if (bad_at >= 0) {
            char why[256];
            unsigned char b = (unsigned char)r->text[bad_at];
            if (tr->o->input == ZT_PACK_JSONL)
                snprintf(why, sizeof why, "member \"%s\": invalid UTF-8 at byte %lld of the string (byte 0x%02x)",
                         tr->field, (long long)bad_at, b);
            else if (tr->o->input == ZT_PACK_TEXT_LINES)
                snprintf(why, sizeof why, "invalid UTF-8 at column %lld (byte 0x%02x)", (long long)bad_at + 1, b);
            else
                snprintf(why, sizeof why, "invalid UTF-8 at byte offset %lld (byte 0x%02x)", (long long)bad_at, b);
            rc = bad_document(tr, r, why);
            continue;
        }
        tr->sink->begin_doc(tr->sink->ctx);
        int64_t ntok = tr->o->eos_id >= 0;
        for (size_t k = r->piece0; k < r->piece0 + r->npieces && rc == 0; k++) {
            rc = tr->sink->put(tr->sink->ctx, tr->pids[k].ids, tr->pids[k].n);
            ntok += (int64_t)tr->pids[k].n;
        }
        if (rc == 0) rc = tr->sink->end_doc(tr->sink->ctx);
        if (tr->st->inputs) tr->st->inputs[r->input].documents++, tr->st->inputs[r->input].tokens += ntok;
    }
    free_records(tr);
    return rc;
}

static record *new_record(text_reader *tr, int input, int64_t line, const char *raw, size_t len) {
    if (tr->nrec == tr->rec_cap) {
        tr->rec_cap = tr->rec_cap ? 2 * tr->rec_cap : 4096;
        tr->rec = realloc(tr->rec, tr->rec_cap * sizeof *tr->rec);
        if (!tr->rec) zt_fatal("out of host memory for %zu records", tr->rec_cap);
    }
    record *r = &tr->rec[tr->nrec++];
    memset(r, 0, sizeof *r);
    r->input = input;
    r->line = line;
    r->raw = raw;
    r->rawlen = len;
    return r;
}

// JSON Lines and text lines: big reads, records are the complete lines.
static int read_lines(text_reader *tr, int input) {
    const char *path = tr->inputs[input];
    FILE *f = fopen(path, "rb");
    if (!f) return zt_err("%s: cannot open input: %s", path, strerror(errno));
    size_t cap = batch_bytes_max + line_slack, n = 0;
    char *buf = zt_xmalloc(cap);
    int64_t line = 0;
    int rc = 0, eof = 0;
    while (rc == 0) {
        if (!eof) {
            if (n == cap) {  // one line longer than the buffer: grow it
                cap *= 2;
                char *nb = realloc(buf, cap);
                if (!nb) zt_fatal("out of host memory for a %zu-byte line", cap);
                buf = nb;
            }
            size_t k = fread(buf + n, 1, cap - n, f);
            if (k == 0) {
                if (ferror(f)) {
                    rc = zt_err("%s: read failed near line %lld: %s", path, (long long)line + 1, strerror(errno));
                    break;
                }
                eof = 1;
            }
            n += k;
            tr->st->bytes_in += (int64_t)k;
        }
        // complete lines become records; at EOF the rest is the last line
        size_t pos = 0;
        while (tr->nrec < BATCH_RECORDS) {
            char *nl = memchr(buf + pos, '\n', n - pos);
            if (!nl) {
                if (eof && pos < n) {
                    new_record(tr, input, ++line, buf + pos, n - pos);
                    pos = n;
                }
                break;
            }
            new_record(tr, input, ++line, buf + pos, (size_t)(nl - (buf + pos)));
            pos = (size_t)(nl - buf) + 1;
        }
        if (tr->nrec) {  // records point into buf: finish them before moving it
            rc = run_batch(tr);
            tr->sink->progress(tr->sink->ctx, path);
        }
        memmove(buf, buf + pos, n - pos);
        n -= pos;
        if (eof && n == 0) break;
    }
    free(buf);
    fclose(f);
    return rc;
}

// Text files: each file is one record; files are gathered into batches.
static int read_files(text_reader *tr) {
    char **bufs = zt_xcalloc((size_t)BATCH_RECORDS, sizeof *bufs);
    size_t nb = 0, batch_bytes = 0;
    int rc = 0;
    for (int i = 0; i < tr->ninputs && rc == 0; i++) {
        size_t len;
        char *text = zt_read_file(tr->inputs[i], &len);
        if (!text) {
            rc = -1;
            break;
        }
        tr->st->bytes_in += (int64_t)len;
        bufs[nb++] = text;
        new_record(tr, i, 0, text, len);
        batch_bytes += len;
        if (batch_bytes >= batch_bytes_max || nb == BATCH_RECORDS || i + 1 == tr->ninputs) {
            rc = run_batch(tr);
            tr->sink->progress(tr->sink->ctx, tr->inputs[i]);
            for (size_t k = 0; k < nb; k++) free(bufs[k]);
            nb = 0;
            batch_bytes = 0;
        }
    }
    for (size_t k = 0; k < nb; k++) free(bufs[k]);
    tr->nrec = 0;
    free(bufs);
    return rc;
}

// --format auto: the format a chat input's first lines show (zt_chat_detect on each of the
// first DETECT_LINES non-blank lines, or DETECT_BYTES): the first line that decides (ShareGPT
// turns, or a member only one of OpenAI's format and the messages form has), else messages
// (also when no line tells: the lines' own errors then say why).
#define DETECT_LINES 1000
#define DETECT_BYTES ((int64_t)4 << 20)
static int detect_format(const char *path, const zt_pack_opts *o, int *format, char *from, size_t from_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return zt_err("%s: cannot open input: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0, seen = 0, bytes = 0, messages_at = 0;
    zt_chat_format found = ZT_CHAT_FORMAT_AUTO;
    const char *why = NULL;
    while (found == ZT_CHAT_FORMAT_AUTO && seen < DETECT_LINES && bytes < DETECT_BYTES &&
           (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        bytes += len;
        if (is_blank(line, (size_t)len)) continue;
        seen++;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)len);
        const char *w = NULL;
        int sure = 0;
        const zt_chat_format d = j ? zt_chat_detect(j, o->field, &sure, &w) : ZT_CHAT_FORMAT_AUTO;
        cJSON_Delete(j);
        if (sure) found = d, why = w;
        else if (d == ZT_CHAT_FORMAT_MESSAGES && !messages_at) messages_at = lineno, why = w;
    }
    free(line);
    fclose(f);
    if (found != ZT_CHAT_FORMAT_AUTO) {
        *format = (int)found;
        snprintf(from, from_len, "line %lld has %s", (long long)lineno, why);
    } else if (messages_at) {
        *format = ZT_CHAT_FORMAT_MESSAGES;
        snprintf(from, from_len, "line %lld has %s; none of the first %lld has a member of one format only",
                 (long long)messages_at, why, (long long)seen);
    } else {
        *format = ZT_CHAT_FORMAT_MESSAGES;
        snprintf(from, from_len, "no line of the first %lld tells the format: read as messages", (long long)seen);
    }
    return 0;
}

int zt_pack_text(const char *const *inputs, int ninputs, const zt_pack_opts *o, const zt_pack_sink *sink,
                 zt_pack_stats *st) {
    if (!o->tok) return zt_err("pack: text input needs a tokenizer (opts.tok)");
    text_reader tr = {.o = o, .sink = sink, .st = st, .inputs = inputs, .ninputs = ninputs};
    const int chat = o->input == ZT_PACK_CHAT;
    if (chat && !sink->put_conversation) return zt_err("pack: --input chat needs a sink for whole conversations");
    tr.field = o->field && o->field[0] ? o->field : chat ? "messages" : "text";
    if (chat) {  // the workers encode whole conversations themselves: no pool
        tr.nthreads = o->threads > 0 ? o->threads : omp_get_num_procs();
        tr.enc = zt_xcalloc((size_t)tr.nthreads, sizeof *tr.enc);
        tr.chat = zt_xcalloc((size_t)tr.nthreads, sizeof *tr.chat);
        tr.ctok = zt_xcalloc((size_t)tr.nthreads, sizeof *tr.ctok);
        tr.jscr = zt_xcalloc((size_t)tr.nthreads, sizeof *tr.jscr);
        for (int w = 0; w < tr.nthreads; w++) tr.enc[w] = zt_encoder_new(o->tok);
    } else {
        tr.pool = kept_pool ? kept_pool : zt_tok_pool_new(o->tok, o->threads);
        tr.nthreads = zt_tok_pool_threads(tr.pool);
    }
    int rc = 0;
    if (chat) {  // each input's format, before any of it is read
        tr.formats = zt_xcalloc((size_t)ninputs, sizeof *tr.formats);
        for (int i = 0; i < ninputs && rc == 0; i++) {
            char from[128] = "--format";
            tr.formats[i] = o->chat_format;
            if (o->chat_format == ZT_CHAT_FORMAT_AUTO)
                rc = detect_format(inputs[i], o, &tr.formats[i], from, sizeof from);
            if (rc) break;
            if (st->inputs) {
                st->inputs[i].chat_format = tr.formats[i];
                snprintf(st->inputs[i].format_from, sizeof st->inputs[i].format_from, "%s", from);
            }
            if (!o->quiet)
                fprintf(stderr, "pack: %s: %s format (%s)\n", inputs[i],
                        zt_chat_format_name((zt_chat_format)tr.formats[i]), from);
        }
    }
    if (rc == 0 && o->input == ZT_PACK_TEXT_FILES) rc = read_files(&tr);
    for (int i = 0; i < ninputs && rc == 0 && o->input != ZT_PACK_TEXT_FILES; i++) rc = read_lines(&tr, i);
    for (size_t k = 0; k < tr.piece_cap; k++) zt_ids_free(&tr.pids[k]);
    free(tr.pids);
    free(tr.ptext);
    free(tr.plen);
    free(tr.prec);
    free(tr.poff);
    free(tr.perr);
    free(tr.rec);
    for (int w = 0; chat && w < tr.nthreads; w++) {
        zt_encoder_free(tr.enc[w]);
        zt_chat_free(&tr.chat[w]);
        zt_chat_tokens_free(&tr.ctok[w]);
        zt_chat_jinja_scratch_free(&tr.jscr[w]);
    }
    free(tr.enc);
    free(tr.chat);
    free(tr.ctok);
    free(tr.jscr);
    free(tr.formats);
    if (tr.pool && tr.pool != kept_pool) zt_tok_pool_free(tr.pool);
    return rc;
}
