// The Qwen3 chat template in C (data/chat.c) against Hugging Face transformers
// (tests/reference/make_chat_golden.py -> tests/golden/chat/): every golden conversation
// rendered and tokenized here, text, ids and the assistant / last / all masks compared
// token by token; then mutated mask rules that must be caught, zt_pack --input chat
// word by word against a layout built from the golden ids and masks, each
// bad-conversation error, the span-boundary normalisation check, and the template check
// refusing a tokenizer_config.json whose chat_template differs by one character.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/chat.h"
#include "base/crc32c.h"
#include "data/dataset.h"
#include "base/json_util.h"
#include "data/tokenizer.h"
#include "base/common.h"
#include "tests/support/test_util.h"

#define TOK_DIR ZT_TEST_DIR "/../assets/qwen3-tokenizer"
#define GOLDEN_JSONL ZT_GOLDEN_DIR "/chat/conversations.jsonl"
#define GOLDEN_BIN ZT_GOLDEN_DIR "/chat/expected.bin.gz"

static zt_tokenizer *tok;
static zt_encoder *enc;

typedef struct {
    uint32_t flags;  // bit 0: ends with an assistant turn
    const char *text;
    uint32_t text_len, ntok;
    const uint32_t *ids;
    const uint8_t *masks;  // bit 0 assistant, bit 1 last
} golden;

static unsigned char *read_gz(const char *path, size_t *len) {
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (run tests/reference/make_chat_golden.py)\n", path);
        exit(2);
    }
    size_t cap = 1 << 22, n = 0;
    unsigned char *buf = zt_xmalloc(cap);
    int r;
    while ((r = gzread(f, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)r;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    gzclose(f);
    *len = n;
    return buf;
}

static uint32_t rd32(const unsigned char **p) {
    uint32_t v;
    memcpy(&v, *p, 4);
    *p += 4;
    return v;
}

// Render + tokenize one JSON line under a rule. 0, or -1 with zt_err.
static int run_line(const char *line, size_t len, zt_chat_train rule, zt_chat *c, zt_chat_tokens *t) {
    cJSON *root = cJSON_ParseWithLength(line, len);
    if (!root) return zt_err("not JSON");
    int rc = zt_chat_render(root, "messages", line, len, rule, c);
    cJSON_Delete(root);
    if (rc == 0) rc = zt_chat_tokenize(enc, tok, c, t);
    return rc;
}

typedef struct {
    int64_t conversations, tokens, text_mismatch, id_mismatch, mask_mismatch[3], refused_ok, trained[3];
} tally;

// Every golden conversation: text, ids, and the mask of each rule, token by token.
static void check_golden(const golden *g, size_t ng, char **lines, size_t *lens, tally *tl) {
    zt_chat c = {0};
    zt_chat_tokens t = {0};
    int reported = 0;
    for (size_t k = 0; k < ng; k++) {
        tl->conversations++;
        tl->tokens += g[k].ntok;
        for (int rule = 0; rule < 3; rule++) {
            const int ends_asst = g[k].flags & 1;
            if (rule != ZT_CHAT_TRAIN_ALL && !ends_asst) {
                int rc = run_line(lines[k], lens[k], (zt_chat_train)rule, &c, &t);
                if (rc == 0 || !strstr(zt_errmsg(), "not the assistant")) {
                    tl->mask_mismatch[rule]++;
                    if (reported++ < 5)
                        fprintf(stderr, "conversation %zu (line %zu): --train-on %s must be refused, got: %s\n", k,
                                k + 1, zt_chat_train_name((zt_chat_train)rule), rc ? zt_errmsg() : "rendered");
                } else {
                    tl->refused_ok++;
                }
                continue;
            }
            if (run_line(lines[k], lens[k], (zt_chat_train)rule, &c, &t)) {
                tl->text_mismatch++;
                if (reported++ < 5) fprintf(stderr, "conversation %zu (line %zu): %s\n", k, k + 1, zt_errmsg());
                continue;
            }
            if (rule == 0) {
                if (c.text.n != g[k].text_len || memcmp(c.text.p, g[k].text, c.text.n)) {
                    size_t at = 0;
                    while (at < c.text.n && at < g[k].text_len && c.text.p[at] == g[k].text[at]) at++;
                    tl->text_mismatch++;
                    if (reported++ < 5)
                        fprintf(stderr,
                                "conversation %zu (line %zu): text differs at byte %zu (%zu vs %u bytes):\n  C:  "
                                "\"%.60s\"\n  HF: \"%.60s\"\n",
                                k, k + 1, at, c.text.n, g[k].text_len, c.text.p + (at > 20 ? at - 20 : 0),
                                g[k].text + (at > 20 ? at - 20 : 0));
                }
                size_t bad = (size_t)-1;
                for (size_t i = 0; i < g[k].ntok && i < t.ids.n && bad == (size_t)-1; i++)
                    if (t.ids.ids[i] != g[k].ids[i]) bad = i;
                if (bad == (size_t)-1 && t.ids.n != g[k].ntok) bad = t.ids.n < g[k].ntok ? t.ids.n : g[k].ntok;
                if (bad != (size_t)-1) {
                    tl->id_mismatch++;
                    if (reported++ < 5)
                        fprintf(stderr, "conversation %zu (line %zu): ids differ at token %zu of %u (C %u, HF %u)\n",
                                k, k + 1, bad, g[k].ntok, bad < t.ids.n ? t.ids.ids[bad] : 0,
                                bad < g[k].ntok ? g[k].ids[bad] : 0);
                    continue;
                }
            }
            if (t.ids.n != g[k].ntok) continue;  // counted above
            for (size_t i = 0; i < t.ids.n; i++) {
                const int want = rule == ZT_CHAT_TRAIN_ALL ? 1 : (g[k].masks[i] >> rule) & 1;
                if (t.trained[i] != want) {
                    tl->mask_mismatch[rule]++;
                    if (reported++ < 5)
                        fprintf(stderr,
                                "conversation %zu (line %zu): --train-on %s: token %zu (id %u) trained %d, "
                                "transformers %d\n",
                                k, k + 1, zt_chat_train_name((zt_chat_train)rule), i, t.ids.ids[i], t.trained[i],
                                want);
                    break;
                }
            }
            tl->trained[rule] += t.ntrained;
        }
    }
    zt_chat_free(&c);
    zt_chat_tokens_free(&t);
}

// A different mask rule must not pass the golden comparison: the spans moved by `db`
// bytes at the start and `de` at the end (e.g. the "<|im_start|>assistant\n" header
// trained, or the '\n' after <|im_end|>). Returns the conversations that differ.
static int64_t mutated_mismatches(const golden *g, size_t ng, char **lines, size_t *lens, long db, long de) {
    zt_chat c = {0};
    zt_chat_tokens t = {0};
    int64_t bad = 0;
    for (size_t k = 0; k < ng && k < 300; k++) {
        if (!(g[k].flags & 1)) continue;
        cJSON *root = cJSON_ParseWithLength(lines[k], lens[k]);
        int rc = zt_chat_render(root, "messages", lines[k], lens[k], ZT_CHAT_TRAIN_ASSISTANT, &c);
        cJSON_Delete(root);
        if (rc) continue;
        for (size_t s = 0; s < c.nspans; s++) {
            c.spans[s].begin = (size_t)((long)c.spans[s].begin + db);
            c.spans[s].end = (size_t)((long)c.spans[s].end + de);
        }
        if (zt_chat_tokenize(enc, tok, &c, &t) || t.ids.n != g[k].ntok) continue;
        for (size_t i = 0; i < t.ids.n; i++)
            if (t.trained[i] != (g[k].masks[i] & 1)) {
                bad++;
                break;
            }
    }
    zt_chat_free(&c);
    zt_chat_tokens_free(&t);
    return bad;
}

// A bad conversation must be refused with a message containing `want`.
static void expect_error(const char *line, zt_chat_train rule, const char *want) {
    zt_chat c = {0};
    cJSON *root = cJSON_Parse(line);
    CHECK(root, "test line is not JSON: %s", line);
    if (!root) return;
    zt_err_clear();
    int rc = zt_chat_render(root, "messages", line, strlen(line), rule, &c);
    cJSON_Delete(root);
    CHECK(rc != 0 && strstr(zt_errmsg(), want), "%s\n  want an error with \"%s\", got %s: %s", line, want,
          rc ? "error" : "success", rc ? zt_errmsg() : "");
    zt_chat_free(&c);
}

static void test_errors(void) {
    const zt_chat_train A = ZT_CHAT_TRAIN_ASSISTANT, L = ZT_CHAT_TRAIN_LAST, ALL = ZT_CHAT_TRAIN_ALL;
    expect_error("[1, 2]", A, "the line is an array, not a JSON object with a \"messages\" member");
    expect_error("{\"text\": \"x\", \"id\": 1}", A, "no \"messages\" member (the object has \"text\", \"id\"; choose one with --field)");
    expect_error("{\"messages\": \"hi\"}", A, "member \"messages\" is a string, not an array of messages");
    expect_error("{\"messages\": []}", A, "member \"messages\" is an empty array");
    expect_error("{\"messages\": [], \"messages\": []}", A, "duplicate \"messages\" member");
    expect_error("{\"messages\": [\"hi\"]}", A, "messages[0] is a string, not an object");
    expect_error("{\"messages\": [{\"content\": \"x\"}]}", A, "messages[0]: no \"role\" member");
    expect_error("{\"messages\": [{\"role\": 3, \"content\": \"x\"}]}", A, "messages[0]: role is a number, not a string");
    expect_error("{\"messages\": [{\"role\": \"developer\", \"content\": \"x\"}]}", A,
                 "messages[0]: role \"developer\" is not one of system, user, assistant, tool");
    expect_error("{\"messages\": [{\"role\": \"user\"}]}", ALL, "messages[0] (user): no \"content\" member");
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": null}]}", ALL, "messages[0] (user): content is null");
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}", ALL,
                 "content is an array, not a string (lists of content parts are not supported)");
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": \"a\", \"content\": \"b\"}]}", ALL,
                 "messages[0] (user): duplicate \"content\" member");
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": "
                 "\"a\", \"reasoning_content\": 5}]}",
                 A, "messages[1] (assistant): reasoning_content is a number, not a string");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": {}}]}", A,
                 "messages[0] (assistant): tool_calls is an object, not an array");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [\"f\"]}]}", A,
                 "messages[0] (assistant): tool_calls[0] is a string, not an object");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"function\": "
                 "\"f\"}]}]}",
                 A, "tool_calls[0]: function is a string, not an object");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"function\": "
                 "{}}]}]}",
                 A, "tool_calls[0]: function is an empty object");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"function\": "
                 "{\"arguments\": {}}}]}]}",
                 A, "tool_calls[0].function: no \"name\" member");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"name\": 1, "
                 "\"arguments\": {}}]}]}",
                 A, "tool_calls[0]: name is a number, not a string");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"name\": "
                 "\"f\"}]}]}",
                 A, "tool_calls[0]: no \"arguments\" member");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"name\": \"f\", "
                 "\"arguments\": {\"x\": 1, \"x\": 2}}]}]}",
                 A, "tool_calls[0].arguments: duplicate key \"x\"");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"name\": \"f\", "
                 "\"arguments\": {\"x\": 01}}]}]}",
                 A, "the number 01 is not valid JSON");
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}", A,
                 "the last message (messages[0]) is from the user, not the assistant: --train-on assistant");
    expect_error("{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}, {\"role\": \"tool\", \"content\": "
                 "\"r\"}]}",
                 L, "the last message (messages[1]) is from the tool, not the assistant: --train-on last");
    // invalid UTF-8 inside a string (cJSON passes the bytes through)
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": \"a\xc3(\"}]}", ALL,
                 "messages[0] (user): content: invalid UTF-8 at byte 1 of the string (byte 0xc3)");
    // no JSON text to read number literals from: refused, not guessed
    {
        zt_chat c = {0};
        cJSON *root = cJSON_Parse("{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
                                  "[{\"name\": \"f\", \"arguments\": {\"x\": 1}}]}]}");
        int rc = zt_chat_render(root, "messages", NULL, 0, A, &c);
        CHECK(rc != 0 && strstr(zt_errmsg(), "needs the JSON text"), "numbers without the JSON text: %s", zt_errmsg());
        cJSON_Delete(root);
        zt_chat_free(&c);
    }
    // --field: another member name
    {
        zt_chat c = {0};
        const char *line = "{\"conv\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                           "\"content\": \"a\"}]}";
        cJSON *root = cJSON_Parse(line);
        int rc = zt_chat_render(root, "conv", line, strlen(line), A, &c);
        CHECK(rc == 0 && c.nspans == 1, "field \"conv\": %s", rc ? zt_errmsg() : "");
        const char *want = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\na<|im_end|>\n";
        CHECK(rc == 0 && c.text.n == strlen(want) && !memcmp(c.text.p, want, c.text.n), "rendered text");
        CHECK(rc == 0 && c.spans[0].begin == strlen("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n") &&
                  c.spans[0].end == strlen(want) - 1,
              "span [%zu, %zu)", c.spans[0].begin, c.spans[0].end);
        cJSON_Delete(root);
        zt_chat_free(&c);
    }
}

// The mask is mapped through NFC piece by piece; a boundary where NFC would look across
// it ('<' + U+0338 composes to U+226E) must be caught, not silently misplace the mask.
// Real span boundaries (after "<|im_start|>assistant\n", after <|im_end|>) never are:
// every combining mark after the header renders and tokenizes cleanly.
static void test_normalisation_boundaries(void) {
    zt_chat c = {0};
    zt_chat_tokens t = {0};
    const char *s = "<|im_start|>user\na<\xcc\xb8" "b<|im_end|>\n";
    zt_buf_append(&c.text, s, strlen(s));
    c.spans = zt_xmalloc(sizeof *c.spans);
    c.nspans = c.spans_cap = 1;
    const size_t lt = (size_t)(strchr(s + 12, '<') - s);  // between '<' and U+0338
    c.spans[0] = (zt_chat_span){lt + 1, strlen(s) - 1};
    int rc = zt_chat_tokenize(enc, tok, &c, &t);
    CHECK(rc != 0 && strstr(zt_errmsg(), "NFC across a template boundary"), "a span boundary inside a composition: %s",
          rc ? zt_errmsg() : "accepted");
    c.spans[0] = (zt_chat_span){lt, strlen(s) - 1};  // before '<': fine
    rc = zt_chat_tokenize(enc, tok, &c, &t);
    CHECK(rc == 0, "a span boundary before the composition: %s", rc ? zt_errmsg() : "");
    zt_chat_free(&c);

    // every combining mark of U+0300..U+036F, U+1AB0..U+1AFF, U+20D0..U+20FF, U+FE20..U+FE2F at the
    // start of an assistant turn (after the header's '\n') and of its reasoning
    int bad = 0, n = 0;
    const uint32_t ranges[][2] = {{0x300, 0x36F}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x20D0, 0x20FF}, {0xFE20, 0xFE2F}, {0x3099, 0x309A}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++)
        for (uint32_t cp = ranges[r][0]; cp <= ranges[r][1]; cp++) {
            char line[256], ch[4];
            ch[0] = (char)(0xE0 | cp >> 12), ch[1] = (char)(0x80 | (cp >> 6 & 63)), ch[2] = (char)(0x80 | (cp & 63));
            int k = cp < 0x800 ? 2 : 3;
            if (k == 2) ch[0] = (char)(0xC0 | cp >> 6), ch[1] = (char)(0x80 | (cp & 63));
            snprintf(line, sizeof line,
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"<\"}, {\"role\": \"assistant\", \"content\": "
                     "\"%.*sx\"}, {\"role\": \"user\", \"content\": \"=\"}, {\"role\": \"assistant\", \"content\": "
                     "\"%.*s\", \"reasoning_content\": \"%.*s\"}]}",
                     k, ch, k, ch, k, ch);
            n++;
            if (run_line(line, strlen(line), ZT_CHAT_TRAIN_ASSISTANT, &c, &t)) {
                if (bad++ < 3) fprintf(stderr, "U+%04X after the header: %s\n", cp, zt_errmsg());
            }
        }
    CHECK(bad == 0, "%d of %d combining marks at the start of a turn broke the span mapping", bad, n);
    printf("normalisation: %d combining marks at turn starts mapped cleanly; a boundary inside a composition refused\n", n);
    zt_chat_free(&c);
    zt_chat_tokens_free(&t);
}

static void test_template_check(void) {
    uint32_t crc = 0;
    int rc = zt_chat_check_template(TOK_DIR "/tokenizer_config.json", &crc);
    CHECK(rc == 0, "shipped tokenizer_config.json: %s", rc ? zt_errmsg() : "");
    CHECK(crc == zt_chat_template_crc(), "crc %08x vs %08x", crc, zt_chat_template_crc());
    printf("template: the shipped chat_template is the implemented one (crc32c:%08x)\n", crc);

    char dir[] = "/tmp/zt_chat_tpl_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    size_t len;
    char *cfg = zt_read_file(TOK_DIR "/tokenizer_config.json", &len);
    CHECK(cfg != NULL, "read config");
    char *at = strstr(cfg, "last_query_index=messages|length - 1");  // one character changed: "- 1" -> "- 2"
    CHECK(at != NULL, "template text not found in the config");
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (at) {
        at[strlen("last_query_index=messages|length - ")] = '2';
        FILE *f = fopen(path, "wb");
        fwrite(cfg, 1, len, f);
        fclose(f);
        rc = zt_chat_check_template(path, &crc);
        char want[128];
        snprintf(want, sizeof want, "implements (4116 bytes, crc32c:%08x)", zt_chat_template_crc());
        CHECK(rc != 0 && strstr(zt_errmsg(), path) && strstr(zt_errmsg(), "differs from the Qwen3 template") &&
                  strstr(zt_errmsg(), want) && strstr(zt_errmsg(), "4116 bytes, crc32c:"),
              "a changed template: %s", rc ? zt_errmsg() : "accepted");
        printf("template: one character changed is refused: %s\n", zt_errmsg());
    }
    FILE *f = fopen(path, "wb");
    fputs("{\"bos_token\": null}", f);
    fclose(f);
    rc = zt_chat_check_template(path, &crc);
    CHECK(rc != 0 && strstr(zt_errmsg(), "no \"chat_template\" member"), "no member: %s", zt_errmsg());
    unlink(path);
    rc = zt_chat_check_template(path, &crc);
    CHECK(rc != 0 && strstr(zt_errmsg(), "tokenizer_config.json: cannot open") &&
              strstr(zt_errmsg(), "takes the chat template from the tokenizer_config.json beside"), "missing file: %s", zt_errmsg());
    rmdir(dir);
    free(cfg);
}

// base/json_util.h's depth check against cJSON itself: 1000 levels parse, 1001 do not and
// are said to be too deep at the column where cJSON stopped; brackets inside strings do not
// count; a text malformed before it gets that deep is not called too deep.
static void test_json_depth(void) {
    const size_t d = CJSON_NESTING_LIMIT + 100;
    char *s = zt_xmalloc(2 * d + 64), deep[160];
    for (size_t depth = CJSON_NESTING_LIMIT; depth <= CJSON_NESTING_LIMIT + 1; depth++) {
        memset(s, '[', depth);
        memset(s + depth, ']', depth);
        s[2 * depth] = 0;
        cJSON *j = cJSON_Parse(s);
        const size_t at = zt_json_too_deep_at(s, 2 * depth), col = zt_json_error_col(s, 2 * depth);
        const char *msg = j ? NULL : zt_json_depth_error(s, 2 * depth, col, deep, sizeof deep);
        if (depth == CJSON_NESTING_LIMIT)
            CHECK(j && at == 0, "%zu levels: cJSON %s, too deep at %zu", depth, j ? "parses" : "refuses", at);
        else
            CHECK(!j && at == depth && col == depth && msg &&
                      strstr(msg, "nested deeper than 1000 levels (cJSON's limit CJSON_NESTING_LIMIT) at column 1001"),
                  "%zu levels: too deep at %zu, cJSON stopped at %zu: %s", depth, at, col, msg ? msg : "(none)");
        cJSON_Delete(j);
    }
    // the same brackets inside a string (with an escaped quote before them) are text
    s[0] = '"', s[1] = '\\', s[2] = '"';
    memset(s + 3, '[', d);
    s[3 + d] = '"', s[4 + d] = 0;
    CHECK(zt_json_too_deep_at(s, 4 + d) == 0, "brackets inside a string counted");
    // malformed at column 2, deep later: malformed
    s[0] = '{', s[1] = 'x';
    memset(s + 2, '[', d);
    s[2 + d] = 0;
    cJSON *j = cJSON_Parse(s);
    CHECK(!j && zt_json_depth_error(s, 2 + d, zt_json_error_col(s, 2 + d), deep, sizeof deep) == NULL,
          "malformed at column 2 called too deep");
    cJSON_Delete(j);
    free(s);
    printf("json depth: cJSON's nesting limit is said as such\n");
}

// zt_pack --input chat on the golden file against a layout built here from the golden
// ids and masks: conversations in order (per rank: dealt round-robin), each inside one
// block, DOC_START on its first word, NO_LOSS where transformers' mask is 0, a block's
// rest padded when the next one does not fit, the last block padded, the too long and
// the refused ones skipped; every word of every file compared, and the counts.
static void test_pack(const golden *g, size_t ng, int seq_len, int per_rank, zt_chat_train rule) {
    char dir[] = "/tmp/zt_chat_pack_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char out[256];
    snprintf(out, sizeof out, "%s/ds", dir);
    const char *in[1] = {GOLDEN_JSONL};
    char tpl[64];
    snprintf(tpl, sizeof tpl, "qwen3 crc32c:%08x", zt_chat_template_crc());
    zt_pack_opts o = {.input = ZT_PACK_CHAT, .seq_len = seq_len, .vocab_size = zt_tokenizer_vocab_size(tok),
                      .eos_id = -1, .per_rank = per_rank, .tokenizer = zt_tokenizer_hash(tok), .quiet = 1, .tok = tok,
                      .skip_bad = 1, .threads = 2, .train_on = (int)rule, .chat_template = tpl};
    zt_pack_stats st;
    int rc = zt_pack(in, 1, out, &o, &st);
    CHECK(rc == 0, "zt_pack --input chat: %s", rc ? zt_errmsg() : "");
    if (rc) return;
    const int nw = per_rank > 0 ? per_rank : 1;
    const uint32_t pad = (uint32_t)zt_tokenizer_token_id(tok, "<|endoftext|>");
    zt_ids *want = zt_xcalloc((size_t)nw, sizeof *want);
    int64_t docs = 0, too_long = 0, bad = 0, trained = 0, padding = 0;
    for (size_t k = 0; k < ng; k++) {
        if (rule != ZT_CHAT_TRAIN_ALL && !(g[k].flags & 1)) {
            bad++;
            continue;
        }
        if (g[k].ntok > (uint32_t)seq_len) {
            too_long++;
            continue;
        }
        zt_ids *w = &want[docs++ % nw];
        const size_t pos = w->n % (size_t)seq_len;
        if (pos && pos + g[k].ntok > (size_t)seq_len)
            for (size_t i = pos; i < (size_t)seq_len; i++, padding++)
                zt_ids_push(w, pad | ZT_TOK_NO_LOSS | (i == pos ? ZT_TOK_DOC_START : 0));
        for (uint32_t i = 0; i < g[k].ntok; i++) {
            const int tr = rule == ZT_CHAT_TRAIN_ALL ? 1 : (g[k].masks[i] >> rule) & 1;
            zt_ids_push(w, g[k].ids[i] | (i == 0 ? ZT_TOK_DOC_START : 0) | (tr ? 0 : ZT_TOK_NO_LOSS));
            trained += tr;
        }
    }
    for (int f = 0; f < nw; f++) {
        const size_t pos = want[f].n % (size_t)seq_len;
        if (pos)
            for (size_t i = pos; i < (size_t)seq_len; i++, padding++)
                zt_ids_push(&want[f], pad | ZT_TOK_NO_LOSS | (i == pos ? ZT_TOK_DOC_START : 0));
        char path[512];
        if (per_rank > 0) snprintf(path, sizeof path, "%s/rank-%05d.u32", out, f);
        else snprintf(path, sizeof path, "%s/data.u32", out);
        size_t len;
        char *data = zt_read_file(path, &len);
        CHECK(data && len == want[f].n * 4, "%s: %zu bytes, want %zu", path, data ? len : 0, want[f].n * 4);
        size_t at = 0;
        while (data && at < want[f].n && at * 4 < len && !memcmp(data + at * 4, &want[f].ids[at], 4)) at++;
        CHECK(data && at == want[f].n, "%s: word %zu (block %zu, position %zu) differs from the expected layout", path,
              at, at / (size_t)seq_len, at % (size_t)seq_len);
        free(data);
        zt_ids_free(&want[f]);
    }
    free(want);
    CHECK(st.documents == docs && st.conversations_too_long == too_long && st.bad_documents == bad &&
              st.trained_tokens == trained && st.padding_tokens == padding && st.dropped_tokens == 0 &&
              st.tokens == st.blocks * seq_len,
          "stats: %lld conversations (want %lld), %lld too long (%lld), %lld bad (%lld), %lld trained (%lld), %lld "
          "padding (%lld), %lld dropped",
          (long long)st.documents, (long long)docs, (long long)st.conversations_too_long, (long long)too_long,
          (long long)st.bad_documents, (long long)bad, (long long)st.trained_tokens, (long long)trained,
          (long long)st.padding_tokens, (long long)padding, (long long)st.dropped_tokens);
    // the reader takes it: version 2, flags, isolated, trained_tokens
    zt_dataset ds;
    zt_dataset_opts dopts = {.verify_crc = 1, .check_tokens = 1};
    rc = zt_dataset_open(&ds, out, &dopts);
    CHECK(rc == 0, "zt_dataset_open: %s", rc ? zt_errmsg() : "");
    if (rc == 0) {
        CHECK(ds.version == ZT_DATASET_VERSION_FLAGS && ds.token_flags && ds.doc_isolated &&
                  ds.trained_tokens == trained && ds.total_blocks == st.blocks,
              "dataset.json as read: version %d, token_flags %d, isolated %d, trained %lld", ds.version,
              ds.token_flags, ds.doc_isolated, (long long)ds.trained_tokens);
        zt_dataset_close(&ds);
    }
    printf("pack: seq_len %d, per-rank %d, --train-on %s: %lld conversations, %lld too long, %lld refused, %lld "
           "blocks, %lld trained, %lld padding: every word as expected\n",
           seq_len, per_rank, zt_chat_train_name(rule), (long long)docs, (long long)too_long, (long long)bad,
           (long long)st.blocks, (long long)trained, (long long)padding);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "rm");
}

int main(void) {
    double t0 = zt_now();
    tok = zt_tokenizer_load(TOK_DIR "/tokenizer.json");
    if (!tok) {
        fprintf(stderr, "%s\n", zt_errmsg());
        return 2;
    }
    enc = zt_encoder_new(tok);

    size_t blen, jlen;
    unsigned char *bin = read_gz(GOLDEN_BIN, &blen);
    char *jsonl = zt_read_file(GOLDEN_JSONL, &jlen);
    if (!jsonl || blen < 12 || memcmp(bin, "ZTCHAT01", 8)) {
        fprintf(stderr, "bad golden files\n");
        return 2;
    }
    const unsigned char *p = bin + 8;
    const size_t ng = rd32(&p);
    golden *g = zt_xcalloc(ng, sizeof *g);
    char **lines = zt_xcalloc(ng, sizeof *lines);
    size_t *lens = zt_xcalloc(ng, sizeof *lens);
    char *q = jsonl;
    for (size_t k = 0; k < ng; k++) {
        g[k].flags = rd32(&p);
        g[k].text_len = rd32(&p);
        g[k].text = (const char *)p;
        p += g[k].text_len;
        g[k].ntok = rd32(&p);
        uint32_t *ids = zt_xmalloc(4 * (size_t)g[k].ntok + 4);  // the file's are not 4-byte aligned
        memcpy(ids, p, 4 * (size_t)g[k].ntok);
        g[k].ids = ids;
        p += 4 * (size_t)g[k].ntok;
        g[k].masks = p;
        p += g[k].ntok;
        char *nl = strchr(q, '\n');
        if (!nl) {
            fprintf(stderr, "conversations.jsonl has fewer lines than expected.bin.gz\n");
            return 2;
        }
        lines[k] = q;
        lens[k] = (size_t)(nl - q);
        q = nl + 1;
    }
    CHECK((size_t)(p - bin) == blen, "expected.bin.gz: %zu bytes left over", blen - (size_t)(p - bin));

    tally tl = {0};
    check_golden(g, ng, lines, lens, &tl);
    printf("golden: %lld conversations, %lld tokens (transformers 5.24): %lld text, %lld id mismatches; mask "
           "mismatches: assistant %lld, last %lld, all %lld; %lld refusals of assistant/last on conversations not "
           "ending with the assistant\n",
           (long long)tl.conversations, (long long)tl.tokens, (long long)tl.text_mismatch, (long long)tl.id_mismatch,
           (long long)tl.mask_mismatch[0], (long long)tl.mask_mismatch[1], (long long)tl.mask_mismatch[2],
           (long long)tl.refused_ok);
    printf("golden: trained tokens: assistant %lld, last %lld, all %lld\n", (long long)tl.trained[0],
           (long long)tl.trained[1], (long long)tl.trained[2]);
    CHECK(tl.conversations >= 2000, "only %lld golden conversations", (long long)tl.conversations);
    CHECK(tl.text_mismatch == 0 && tl.id_mismatch == 0, "%lld text, %lld id mismatches", (long long)tl.text_mismatch,
          (long long)tl.id_mismatch);
    for (int r = 0; r < 3; r++)
        CHECK(tl.mask_mismatch[r] == 0, "--train-on %s: %lld mask mismatches", zt_chat_train_name((zt_chat_train)r),
              (long long)tl.mask_mismatch[r]);

    // the comparison must catch a changed rule
    const long hdr = (long)strlen("<|im_start|>assistant\n");
    const int64_t m1 = mutated_mismatches(g, ng, lines, lens, -hdr, 0);
    const int64_t m2 = mutated_mismatches(g, ng, lines, lens, -1, 0);
    const int64_t m3 = mutated_mismatches(g, ng, lines, lens, 0, 1);
    const int64_t m4 = mutated_mismatches(g, ng, lines, lens, 0, -(long)strlen("<|im_end|>"));
    printf("mutations (of the first 300 conversations): header trained %lld differ, its '\\n' trained %lld, the '\\n' "
           "after <|im_end|> trained %lld, <|im_end|> untrained %lld\n",
           (long long)m1, (long long)m2, (long long)m3, (long long)m4);
    CHECK(m1 > 0 && m2 > 0 && m3 > 0 && m4 > 0, "a changed mask rule went unnoticed");

    test_pack(g, ng, 512, 0, ZT_CHAT_TRAIN_ASSISTANT);
    test_pack(g, ng, 300, 3, ZT_CHAT_TRAIN_LAST);
    test_pack(g, ng, 1024, 0, ZT_CHAT_TRAIN_ALL);

    test_errors();
    test_normalisation_boundaries();
    test_template_check();
    test_json_depth();

    for (size_t k = 0; k < ng; k++) free((void *)g[k].ids);
    free(g);
    free(lines);
    free(lens);
    free(bin);
    free(jsonl);
    zt_encoder_free(enc);
    zt_tokenizer_free(tok);
    printf("%.2f s\n", zt_now() - t0);
    TEST_END();
}
