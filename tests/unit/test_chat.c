// The Qwen3 chat template in C (data/chat_template.c, data/chat.c) against Hugging Face transformers
// (tests/reference/make_chat_golden.py -> tests/golden/chat/): every golden conversation
// rendered and tokenized here, text, ids and the assistant / last / all masks compared
// token by token; then mutated mask rules that must be caught, zt_pack --input chat
// word by word against a layout built from the golden ids and masks, each
// bad-conversation error, the span-boundary normalisation check, and the template check
// refusing a tokenizer_config.json whose chat_template differs by one character.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
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
    const uint8_t *masks;  // bit 0 assistant, bit 1 last, bit 2 all (has_all; else every token)
    int has_all;
} golden;

// The mask transformers gives token i under a rule.
static int golden_mask(const golden *g, size_t i, int rule) {
    if (rule == ZT_CHAT_TRAIN_ALL) return g->has_all ? (g->masks[i] >> 2) & 1 : 1;
    return (g->masks[i] >> rule) & 1;
}

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

// Render + tokenize one JSON line in a format under a rule. 0, or -1 with zt_err.
static int run_line_as(const char *line, size_t len, zt_chat_format fmt, zt_chat_train rule, zt_chat *c,
                       zt_chat_tokens *t) {
    cJSON *root = cJSON_ParseWithLength(line, len);
    if (!root) return zt_err("not JSON");
    int rc = zt_chat_render_as(root, NULL, fmt, line, len, rule, c);
    cJSON_Delete(root);
    if (rc == 0) rc = zt_chat_tokenize(enc, tok, c, t);
    return rc;
}
static int run_line(const char *line, size_t len, zt_chat_train rule, zt_chat *c, zt_chat_tokens *t) {
    return run_line_as(line, len, ZT_CHAT_FORMAT_MESSAGES, rule, c, t);
}

typedef struct {
    int64_t conversations, tokens, text_mismatch, id_mismatch, mask_mismatch[3], refused_ok, trained[3];
    int64_t with_tools, schemas;
} tally;

// Every golden conversation: text, ids, and the mask of each rule, token by token. Line k
// (in format fmt) is golden conversation idx[k] (idx NULL: k).
static void check_golden(const golden *gall, const uint32_t *idx, size_t ng, char **lines, size_t *lens,
                         zt_chat_format fmt, tally *tl) {
    zt_chat c = {0};
    zt_chat_tokens t = {0};
    int reported = 0;
    for (size_t k = 0; k < ng; k++) {
        const golden *gk = &gall[idx ? idx[k] : k];  // line k's conversation
        tl->conversations++;
        tl->tokens += gk->ntok;
        for (int rule = 0; rule < 3; rule++) {
            const int ends_asst = gk->flags & 1;
            if (rule != ZT_CHAT_TRAIN_ALL && !ends_asst) {
                int rc = run_line_as(lines[k], lens[k], fmt, (zt_chat_train)rule, &c, &t);
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
            if (run_line_as(lines[k], lens[k], fmt, (zt_chat_train)rule, &c, &t)) {
                tl->text_mismatch++;
                if (reported++ < 5) fprintf(stderr, "conversation %zu (line %zu): %s\n", k, k + 1, zt_errmsg());
                continue;
            }
            if (rule == ZT_CHAT_TRAIN_ALL) tl->with_tools += c.ntools > 0, tl->schemas += c.ntools;
            if (rule == 0) {
                if (c.text.n != gk->text_len || memcmp(c.text.p, gk->text, c.text.n)) {
                    size_t at = 0;
                    while (at < c.text.n && at < gk->text_len && c.text.p[at] == gk->text[at]) at++;
                    tl->text_mismatch++;
                    if (reported++ < 5)
                        fprintf(stderr,
                                "conversation %zu (line %zu): text differs at byte %zu (%zu vs %u bytes):\n  C:  "
                                "\"%.60s\"\n  HF: \"%.60s\"\n",
                                k, k + 1, at, c.text.n, gk->text_len, c.text.p + (at > 20 ? at - 20 : 0),
                                gk->text + (at > 20 ? at - 20 : 0));
                }
                size_t bad = (size_t)-1;
                for (size_t i = 0; i < gk->ntok && i < t.ids.n && bad == (size_t)-1; i++)
                    if (t.ids.ids[i] != gk->ids[i]) bad = i;
                if (bad == (size_t)-1 && t.ids.n != gk->ntok) bad = t.ids.n < gk->ntok ? t.ids.n : gk->ntok;
                if (bad != (size_t)-1) {
                    tl->id_mismatch++;
                    if (reported++ < 5)
                        fprintf(stderr, "conversation %zu (line %zu): ids differ at token %zu of %u (C %u, HF %u)\n",
                                k, k + 1, bad, gk->ntok, bad < t.ids.n ? t.ids.ids[bad] : 0,
                                bad < gk->ntok ? gk->ids[bad] : 0);
                    continue;
                }
            }
            if (t.ids.n != gk->ntok) continue;  // counted above
            for (size_t i = 0; i < t.ids.n; i++) {
                const int want = golden_mask(gk, i, rule);
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
        int inverted = 0;
        for (size_t s = 0; s < c.nspans; s++) {
            c.spans[s].begin = (size_t)((long)c.spans[s].begin + db);
            c.spans[s].end = (size_t)((long)c.spans[s].end + de);
            inverted |= c.spans[s].end <= c.spans[s].begin;
        }
        if (inverted) {  // the moved span is empty (the renderer's spans are wrong already): differs
            bad++;
            continue;
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
static void test_pack(const golden *g, size_t ng, const char *jsonl, int seq_len, int per_rank, zt_chat_train rule) {
    char dir[] = "/tmp/zt_chat_pack_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char out[256];
    snprintf(out, sizeof out, "%s/ds", dir);
    const char *in[1] = {jsonl};
    char tpl[64];
    snprintf(tpl, sizeof tpl, "qwen3 crc32c:%08x", zt_chat_template_crc());
    zt_pack_opts o = {.input = ZT_PACK_CHAT, .seq_len = seq_len, .vocab_size = zt_tokenizer_vocab_size(tok),
                      .eos_id = -1, .per_rank = per_rank, .tokenizer = zt_tokenizer_hash(tok), .quiet = 1, .tok = tok,
                      .skip_bad = 1, .threads = 2, .train_on = (int)rule, .chat_template = tpl};
    zt_pack_stats st;
    int rc = zt_pack(in, 1, out, &o, &st);
    CHECK(rc == 0, "zt_pack --input chat: %s", rc ? zt_errmsg() : "");
    if (rc) {
        zt_pack_stats_free(&st);
        return;
    }
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
            const int tr = golden_mask(&g[k], i, rule);
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
    printf("pack %s: seq_len %d, per-rank %d, --train-on %s: %lld conversations, %lld too long, %lld refused, %lld "
           "blocks, %lld trained, %lld padding: every word as expected\n",
           strrchr(jsonl, '/') + 1, seq_len, per_rank, zt_chat_train_name(rule), (long long)docs, (long long)too_long,
           (long long)bad, (long long)st.blocks, (long long)trained, (long long)padding);
    zt_pack_stats_free(&st);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "rm");
}

// ---- tools, the input formats, weights, mixtures ----------------------------------------
// tests/golden/chat_tools (tests/reference/make_chat_tools_golden.py): conversations with tool
// definitions in the messages form, the convertible ones again in OpenAI's format and in
// ShareGPT, and transformers' text, ids and weighted masks of each.
#define TOOLS_DIR ZT_GOLDEN_DIR "/chat_tools"

typedef struct {
    unsigned char *bin;
    golden *g;
    size_t ng;
    uint32_t *idx[3];  // line k of form f is conversation idx[f][k] (form 0, messages: k)
    char *text[3];     // messages, openai, sharegpt JSON Lines
    size_t text_len[3];
    char **lines[3];
    size_t *lens[3], nlines[3];
} tools_golden;

static const char *const form_file[3] = {"messages", "openai", "sharegpt"};
static const zt_chat_format form_format[3] = {ZT_CHAT_FORMAT_MESSAGES, ZT_CHAT_FORMAT_OPENAI, ZT_CHAT_FORMAT_SHAREGPT};

static void split_lines(char *text, size_t len, char ***lines, size_t **lens, size_t *n) {
    size_t k = 0;
    for (size_t i = 0; i < len; i++) k += text[i] == '\n';
    *lines = zt_xcalloc(k + 1, sizeof **lines);
    *lens = zt_xcalloc(k + 1, sizeof **lens);
    *n = 0;
    for (char *q = text, *e = text + len; q < e;) {
        char *nl = memchr(q, '\n', (size_t)(e - q));
        if (!nl) nl = e;
        (*lines)[*n] = q;
        (*lens)[(*n)++] = (size_t)(nl - q);
        q = nl + 1;
    }
}

static void load_tools(tools_golden *T) {
    memset(T, 0, sizeof *T);
    size_t blen;
    T->bin = read_gz(TOOLS_DIR "/expected.bin.gz", &blen);
    if (blen < 12 || memcmp(T->bin, "ZTCHAT02", 8)) {
        fprintf(stderr, "bad %s/expected.bin.gz\n", TOOLS_DIR);
        exit(2);
    }
    const unsigned char *p = T->bin + 8;
    T->ng = rd32(&p);
    T->g = zt_xcalloc(T->ng, sizeof *T->g);
    for (size_t k = 0; k < T->ng; k++) {
        golden *g = &T->g[k];
        g->flags = rd32(&p);
        g->text_len = rd32(&p);
        g->text = (const char *)p;
        p += g->text_len;
        g->ntok = rd32(&p);
        uint32_t *ids = zt_xmalloc(4 * (size_t)g->ntok + 4);
        memcpy(ids, p, 4 * (size_t)g->ntok);
        g->ids = ids;
        p += 4 * (size_t)g->ntok;
        g->masks = p;
        g->has_all = 1;
        p += g->ntok;
    }
    for (int f = 1; f < 3; f++) {
        const size_t n = rd32(&p);
        T->idx[f] = zt_xmalloc(4 * n + 4);
        memcpy(T->idx[f], p, 4 * n);
        p += 4 * n;
        for (size_t k = 0; k < n; k++) CHECK(T->idx[f][k] < T->ng, "%s line %zu: index %u", form_file[f], k + 1, T->idx[f][k]);
        T->nlines[f] = n;
    }
    CHECK((size_t)(p - T->bin) == blen, "chat_tools/expected.bin.gz: %zu bytes left over", blen - (size_t)(p - T->bin));
    for (int f = 0; f < 3; f++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.jsonl.gz", TOOLS_DIR, form_file[f]);
        T->text[f] = (char *)read_gz(path, &T->text_len[f]);
        size_t n;
        split_lines(T->text[f], T->text_len[f], &T->lines[f], &T->lens[f], &n);
        CHECK(n == (f ? T->nlines[f] : T->ng), "%s: %zu lines, expected.bin.gz says %zu", path, n,
              f ? T->nlines[f] : T->ng);
        T->nlines[f] = n < (f ? T->nlines[f] : T->ng) ? n : (f ? T->nlines[f] : T->ng);
    }
}

static void free_tools(tools_golden *T) {
    for (size_t k = 0; k < T->ng; k++) free((void *)T->g[k].ids);
    free(T->g);
    for (int f = 0; f < 3; f++) {
        free(T->idx[f]);
        free(T->text[f]);
        free(T->lines[f]);
        free(T->lens[f]);
    }
    free(T->bin);
}

// Writes lines (or those at idx) as a JSON Lines file.
static void write_lines(const char *path, char **lines, size_t *lens, const uint32_t *idx, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    for (size_t k = 0; k < n; k++) {
        const size_t j = idx ? idx[k] : k;
        fwrite(lines[j], 1, lens[j], f);
        fputc('\n', f);
    }
    fclose(f);
}

// Every golden conversation with tools, in each format it was written in: 0 text, 0 id and 0
// mask mismatches under every rule; the weights must matter (ignoring them must be caught).
static void test_tools_golden(tools_golden *T) {
    for (int f = 0; f < 3; f++) {
        tally tl = {0};
        check_golden(T->g, T->idx[f], T->nlines[f], T->lines[f], T->lens[f], form_format[f], &tl);
        printf("tools golden, %s form: %lld conversations (%lld with tools, %lld schemas), %lld tokens: %lld text, "
               "%lld id mismatches; mask mismatches: assistant %lld, last %lld, all %lld; trained: assistant %lld, "
               "last %lld, all %lld\n",
               form_file[f], (long long)tl.conversations, (long long)tl.with_tools, (long long)tl.schemas,
               (long long)tl.tokens, (long long)tl.text_mismatch, (long long)tl.id_mismatch,
               (long long)tl.mask_mismatch[0], (long long)tl.mask_mismatch[1], (long long)tl.mask_mismatch[2],
               (long long)tl.trained[0], (long long)tl.trained[1], (long long)tl.trained[2]);
        CHECK(tl.conversations >= (f == 0 ? 1000 : 400), "%s: only %lld conversations", form_file[f],
              (long long)tl.conversations);
        if (f == 0) CHECK(tl.with_tools >= 1000, "only %lld conversations with tools", (long long)tl.with_tools);
        CHECK(tl.text_mismatch == 0 && tl.id_mismatch == 0, "%s form: %lld text, %lld id mismatches", form_file[f],
              (long long)tl.text_mismatch, (long long)tl.id_mismatch);
        for (int r = 0; r < 3; r++)
            CHECK(tl.mask_mismatch[r] == 0, "%s form, --train-on %s: %lld mask mismatches", form_file[f],
                  zt_chat_train_name((zt_chat_train)r), (long long)tl.mask_mismatch[r]);
    }
    // the weights are in the golden masks: the same conversations rendered with every weight 1 differ
    zt_chat c = {0};
    zt_chat_tokens t = {0};
    int64_t with0 = 0, differ = 0;
    for (size_t k = 0; k < T->ng; k++) {
        cJSON *root = cJSON_ParseWithLength(T->lines[0][k], T->lens[0][k]);
        zt_chat_conv cv = {0};
        if (zt_chat_read(root, NULL, ZT_CHAT_FORMAT_MESSAGES, T->lines[0][k], T->lens[0][k], &cv) == 0 && cv.weight0 &&
            (T->g[k].flags & 1)) {
            with0++;
            for (int i = 0; i < cv.nmsgs; i++) cv.msgs[i].weight = 1;
            if (zt_chat_render_conv(&cv, ZT_CHAT_TRAIN_ASSISTANT, &c) == 0 && zt_chat_tokenize(enc, tok, &c, &t) == 0)
                for (size_t i = 0; i < t.ids.n && i < T->g[k].ntok; i++)
                    if (t.trained[i] != golden_mask(&T->g[k], i, 0)) {
                        differ++;
                        break;
                    }
        }
        zt_chat_conv_free(&cv);
        cJSON_Delete(root);
    }
    printf("tools golden: %lld conversations with a weight-0 turn; with the weights ignored %lld of them differ from "
           "transformers' masks\n",
           (long long)with0, (long long)differ);
    CHECK(with0 >= 50 && differ == with0, "weights ignored: %lld of %lld differ", (long long)differ, (long long)with0);
    zt_chat_free(&c);
    zt_chat_tokens_free(&t);
}

// The masks people worry about, stated on every golden conversation whose <|im_start|> and
// <|im_end|> tokens strictly alternate (no such text typed inside a message), in transformers'
// masks and in zerotrain's: under assistant, each assistant turn's <|im_start|>assistant\n
// header is not trained, its closing <|im_end|> is (the model learns to stop) and the "\n"
// after it is not; the empty "<think>\n\n</think>\n\n" the template adds to the last assistant
// turn is trained like the rest of the turn (under assistant and last); a weight-0 turn trains
// nothing under any rule.
static void test_masks_stated(tools_golden *T) {
    const uint32_t start = (uint32_t)zt_tokenizer_token_id(tok, "<|im_start|>"),
                   end = (uint32_t)zt_tokenizer_token_id(tok, "<|im_end|>"),
                   think = (uint32_t)zt_tokenizer_token_id(tok, "<think>"),
                   unthink = (uint32_t)zt_tokenizer_token_id(tok, "</think>");
    zt_ids tmp = {0};
    zt_encode(enc, "assistant", 9, &tmp);
    const uint32_t asst = tmp.ids[0];
    tmp.n = 0;
    zt_encode(enc, "\n", 1, &tmp);
    const uint32_t nl = tmp.ids[0];
    tmp.n = 0;
    zt_encode(enc, "\n\n", 2, &tmp);
    const uint32_t nl2 = tmp.ids[0];
    zt_ids_free(&tmp);
    zt_chat c = {0};
    zt_chat_tokens t[3];
    memset(t, 0, sizeof t);
    int64_t convs = 0, turns = 0, ends_trained = 0, w0turns = 0, empty_think = 0, bad = 0;
    for (size_t k = 0; k < T->ng; k++) {
        const golden *g = &T->g[k];
        if (!(g->flags & 1)) continue;
        int depth = 0, ok = 1;
        for (uint32_t i = 0; i < g->ntok && ok; i++) {
            if (g->ids[i] == start) ok = depth++ == 0;
            else if (g->ids[i] == end) ok = depth-- == 1;
        }
        if (!ok || depth) continue;
        int rc = 0;
        for (int r = 0; r < 3 && rc == 0; r++)
            rc = run_line(T->lines[0][k], T->lens[0][k], (zt_chat_train)r, &c, &t[r]);
        CHECK(rc == 0 && t[0].ids.n == g->ntok, "conversation %zu: %s", k, rc ? zt_errmsg() : "token count");
        if (rc || t[0].ids.n != g->ntok) continue;
        convs++;
        const zt_chat_conv *cv = &c.conv;
        int a = 0, nasst = 0;
        for (int i = 0; i < cv->nmsgs; i++) nasst += cv->msgs[i].role == ZT_CHAT_ASSISTANT;
        for (uint32_t i = 0; i + 2 < g->ntok; i++) {
            if (g->ids[i] != start || g->ids[i + 1] != asst) continue;
            int w = 1;
            for (int m = 0, seen = 0; m < cv->nmsgs; m++)
                if (cv->msgs[m].role == ZT_CHAT_ASSISTANT && seen++ == a) w = cv->msgs[m].weight;
            const int last = ++a == nasst;
            uint32_t e = i + 2;
            while (g->ids[e] != end) e++;
            turns++;
            w0turns += !w;
            // each of transformers' masks and zerotrain's
            for (int src = 0; src < 2; src++)
                for (int r = 0; r < 3; r++) {
                    const int rule_trains = r == ZT_CHAT_TRAIN_ALL || r == ZT_CHAT_TRAIN_ASSISTANT || last;
                    int m_hdr0, m_hdr1, m_end, m_after, m_any = 0;
                    (void)m_any;
#define MASK(x) (src ? t[r].trained[x] : golden_mask(g, x, r))
                    m_hdr0 = MASK(i), m_hdr1 = MASK(i + 1) || (g->ids[i + 2] == nl && MASK(i + 2)), m_end = MASK(e);
                    m_after = e + 1 < g->ntok ? MASK(e + 1) : 0;
                    for (uint32_t x = i + 2; x <= e; x++) m_any |= MASK(x);
                    if (!w) {  // a weight-0 turn: nothing of it (under all: not even a header \n merged into it)
                        m_any = 0;
                        const uint32_t from = r != ZT_CHAT_TRAIN_ALL ? i : i + 3;
                        for (uint32_t x = from; x <= e; x++) m_any |= MASK(x);
                        if (m_any) bad++;
                    } else if (r != ZT_CHAT_TRAIN_ALL) {
                        if (m_hdr0 || m_hdr1 || m_after) bad++;  // header and the \n after <|im_end|>: never
                        if (m_end != rule_trains) bad++;        // <|im_end|>: trained with its turn

                        ends_trained += src == 1 && r == 0 && m_end;
                        if (last && e > i + 7 && g->ids[i + 2] == nl && g->ids[i + 3] == think && g->ids[i + 4] == nl2 &&
                            g->ids[i + 5] == unthink && g->ids[i + 6] == nl2) {
                            if (!(MASK(i + 3) && MASK(i + 4) && MASK(i + 5) && MASK(i + 6))) bad++;
                            empty_think += src == 1 && r == ZT_CHAT_TRAIN_LAST;
                        }
                    }
#undef MASK
                }
            i = e;
        }
    }
    printf("masks stated on %lld conversations, %lld assistant turns (transformers' and zerotrain's): headers and the "
           "\\n after <|im_end|> untrained, %lld closing <|im_end|> trained, %lld empty think blocks of the last turn "
           "trained, %lld weight-0 turns with nothing trained under any rule; %lld violations\n",
           (long long)convs, (long long)turns, (long long)ends_trained, (long long)empty_think, (long long)w0turns,
           (long long)bad);
    CHECK(bad == 0 && convs > 500 && ends_trained > 1000 && empty_think > 300 && w0turns > 50,
          "masks stated: %lld violations (%lld conversations, %lld <|im_end|>, %lld empty think blocks, %lld weight-0)",
          (long long)bad, (long long)convs, (long long)ends_trained, (long long)empty_think, (long long)w0turns);
    zt_chat_free(&c);
    for (int r = 0; r < 3; r++) zt_chat_tokens_free(&t[r]);
}

// A pack of path as the test packs chat: 0 or -1 (zt_errmsg).
static int pack_chat(const char *const *in, const double *weights, int n, const char *out, int seq_len,
                     zt_chat_train rule, zt_chat_format fmt, int64_t mix_tokens, uint64_t seed, zt_pack_stats *st) {
    char tpl[64];
    snprintf(tpl, sizeof tpl, "qwen3 crc32c:%08x", zt_chat_template_crc());
    zt_pack_opts o = {.input = ZT_PACK_CHAT, .seq_len = seq_len, .vocab_size = zt_tokenizer_vocab_size(tok),
                      .eos_id = -1, .tokenizer = zt_tokenizer_hash(tok), .quiet = 1, .tok = tok, .skip_bad = 1,
                      .threads = 2, .train_on = (int)rule, .chat_template = tpl, .chat_format = (int)fmt,
                      .weights = weights, .mix_tokens = mix_tokens, .mix_seed = seed};
    return zt_pack(in, n, out, &o, st);
}

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = zt_read_file(a, &na), *y = zt_read_file(b, &nb);
    const int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

// OpenAI and ShareGPT files of the same conversations pack to the same words as the messages
// form (detected and given formats), and each format is recorded in dataset.json.
static void test_tools_pack(tools_golden *T, const char *dir) {
    char path[3][512], sub[3][512], out[640], out2[640];
    for (int f = 0; f < 3; f++) {
        snprintf(path[f], sizeof path[f], "%s/%s.jsonl", dir, form_file[f]);
        write_lines(path[f], T->lines[f], T->lens[f], NULL, T->nlines[f]);
        snprintf(sub[f], sizeof sub[f], "%s/messages-as-%s.jsonl", dir, form_file[f]);
        if (f) write_lines(sub[f], T->lines[0], T->lens[0], T->idx[f], T->nlines[f]);
    }
    test_pack(T->g, T->ng, path[0], 2048, 0, ZT_CHAT_TRAIN_ASSISTANT);
    test_pack(T->g, T->ng, path[0], 1024, 3, ZT_CHAT_TRAIN_LAST);
    test_pack(T->g, T->ng, path[0], 4096, 0, ZT_CHAT_TRAIN_ALL);
    for (int f = 1; f < 3; f++)
        for (int r = 0; r < 3; r += 2) {
            zt_pack_stats a, b, c;
            snprintf(out, sizeof out, "%s/%s-%d", dir, form_file[f], r);
            const char *in[1] = {path[f]}, *ref[1] = {sub[f]};
            int rc = pack_chat(in, NULL, 1, out, 2048, (zt_chat_train)r, ZT_CHAT_FORMAT_AUTO, 0, 0, &a);
            CHECK(rc == 0, "pack %s: %s", path[f], rc ? zt_errmsg() : "");
            snprintf(out2, sizeof out2, "%s/messages-as-%s-%d", dir, form_file[f], r);
            rc |= pack_chat(ref, NULL, 1, out2, 2048, (zt_chat_train)r, ZT_CHAT_FORMAT_AUTO, 0, 0, &b);
            CHECK(rc == 0, "pack %s: %s", sub[f], rc ? zt_errmsg() : "");
            char da[700], db[700];
            snprintf(da, sizeof da, "%s/data.u32", out);
            snprintf(db, sizeof db, "%s/data.u32", out2);
            CHECK(rc == 0 && same_file(da, db), "%s form, --train-on %s: the words differ from the messages form's",
                  form_file[f], zt_chat_train_name((zt_chat_train)r));
            CHECK(rc == 0 && a.documents == b.documents && a.trained_tokens == b.trained_tokens &&
                      a.padding_tokens == b.padding_tokens && a.blocks == b.blocks && a.bad_documents == b.bad_documents &&
                      a.conversations_too_long == b.conversations_too_long,
                  "%s form: stats differ", form_file[f]);
            CHECK(rc == 0 && a.inputs && a.inputs[0].chat_format == (int)form_format[f] &&
                      !strncmp(a.inputs[0].format_from, "line ", 5) && b.inputs &&
                      b.inputs[0].chat_format == ZT_CHAT_FORMAT_MESSAGES,
                  "%s: format read as %s (%s)", path[f],
                  a.inputs ? zt_chat_format_name((zt_chat_format)a.inputs[0].chat_format) : "?",
                  a.inputs ? a.inputs[0].format_from : "");
            // the format given instead of detected: the same bytes
            snprintf(out2, sizeof out2, "%s/%s-given-%d", dir, form_file[f], r);
            rc = pack_chat(in, NULL, 1, out2, 2048, (zt_chat_train)r, form_format[f], 0, 0, &c);
            snprintf(db, sizeof db, "%s/data.u32", out2);
            CHECK(rc == 0 && same_file(da, db) && c.inputs && !strcmp(c.inputs[0].format_from, "--format"),
                  "%s given as --format: %s", form_file[f], rc ? zt_errmsg() : "differs");
            // and dataset.json says where the conversations came from
            snprintf(db, sizeof db, "%s/dataset.json", out);
            size_t n;
            char *dj = zt_read_file(db, &n);
            char want[64];
            snprintf(want, sizeof want, "\"format\":\t\"%s\"", form_file[f]);
            CHECK(dj && strstr(dj, want) && strstr(dj, "\"inputs\":"), "%s lacks %s", db, want);
            free(dj);
            if (r == 0)
                printf("pack: %s form (%lld conversations, format from %s): the same %lld blocks, word for word, as "
                       "the messages form, under assistant and all\n",
                       form_file[f], (long long)a.documents, a.inputs ? a.inputs[0].format_from : "?",
                       (long long)a.blocks);
            zt_pack_stats_free(&a);
            zt_pack_stats_free(&b);
            zt_pack_stats_free(&c);
        }
}

// One line in one format must be refused with a message containing want.
static void expect_error_as(const char *line, zt_chat_format fmt, zt_chat_train rule, const char *want) {
    zt_chat c = {0};
    cJSON *root = cJSON_Parse(line);
    CHECK(root, "test line is not JSON: %s", line);
    if (!root) return;
    zt_err_clear();
    int rc = zt_chat_render_as(root, NULL, fmt, line, strlen(line), rule, &c);
    cJSON_Delete(root);
    CHECK(rc != 0 && strstr(zt_errmsg(), want), "%s: %s\n  want an error with \"%s\", got %s: %s",
          zt_chat_format_name(fmt), line, want, rc ? "error" : "success", rc ? zt_errmsg() : "");
    zt_chat_free(&c);
}

static void test_format_errors(void) {
    const zt_chat_train A = ZT_CHAT_TRAIN_ASSISTANT, ALL = ZT_CHAT_TRAIN_ALL;
    const zt_chat_format M = ZT_CHAT_FORMAT_MESSAGES, O = ZT_CHAT_FORMAT_OPENAI, S = ZT_CHAT_FORMAT_SHAREGPT;
#define QA "{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}"
    // tools, every format
    expect_error_as("{\"messages\": [" QA "], \"tools\": {\"name\": \"f\"}}", M, A,
                    "tools is an object, not an array of tool schemas");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [\"f\"]}", M, A, "tools[0] is a string, not an object");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"description\": \"d\"}]}", M, A, "tools[0]: no \"name\" member");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"name\": \"f\"}, {\"type\": \"tool\", \"function\": {}}]}", M, A,
                    "tools[1]: type is \"tool\", not \"function\"");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"type\": \"function\"}]}", M, A, "tools[0]: no \"function\" member");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"type\": \"function\", \"function\": {\"description\": 1}}]}",
                    M, A, "tools[0].function: no \"name\" member");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"name\": 5}]}", M, A, "tools[0]: name is a number, not a string");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"name\": \"f\", \"parameters\": {\"a\": 1, \"a\": 2}}]}", M, A,
                    "tools[0]: duplicate key \"a\"");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"name\": \"f\", \"parameters\": {\"a\": 01}}]}", M, A,
                    "tools[0]: the number 01 is not valid JSON");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"name\": \"f\"}], \"tools\": []}", M, A, "duplicate \"tools\" member");
    // weight
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\", \"weight\": 0}, {\"role\": \"assistant\", "
                    "\"content\": \"a\"}]}",
                    M, A, "messages[0] (user): \"weight\" applies to assistant turns only");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\", "
                    "\"weight\": 0.5}]}",
                    O, A, "messages[1] (assistant): weight is another number, not 0 or 1");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\", "
                    "\"weight\": \"0\"}]}",
                    M, A, "messages[1] (assistant): weight is a string, not 0 or 1");
    // openai
#define CALL(id, args) "{\"id\": \"" id "\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": " args "}}"
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": null, "
                    "\"tool_calls\": [" CALL("c1", "\"{}\"") "]}, {\"role\": \"tool\", \"content\": \"r\"}, {\"role\": "
                    "\"assistant\", \"content\": \"a\"}]}",
                    O, A, "messages[2] (tool): no \"tool_call_id\" member");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": null, "
                    "\"tool_calls\": [" CALL("c1", "\"{}\"") "]}, {\"role\": \"tool\", \"tool_call_id\": \"c2\", "
                    "\"content\": \"r\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}",
                    O, A, "messages[2] (tool): tool_call_id \"c2\" is not the id of a tool call of the assistant turn before it (1 call there)");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"\", "
                    "\"tool_calls\": [" CALL("c1", "{\"x\": 1}") "]}]}",
                    O, A, "tool_calls[0].function: arguments is an object, not a string (OpenAI's format gives the arguments as a JSON string");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"\", "
                    "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]}",
                    O, A, "messages[1] (assistant): tool_calls[0]: no \"id\" member");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"\", "
                    "\"tool_calls\": [{\"id\": \"c\", \"type\": \"fn\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]}",
                    O, A, "tool_calls[0]: type is not \"function\"");
    expect_error_as("{\"messages\": [" QA "], \"tools\": [{\"name\": \"f\"}]}", O, A,
                    "tools[0]: a bare schema (no \"type\": \"function\"); OpenAI's format wraps each tool");
    expect_error_as("{\"messages\": [" QA "], \"functions\": [{\"name\": \"f\"}]}", O, A,
                    "\"functions\" (OpenAI's legacy form of tools) is not supported");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"function\", \"name\": \"f\", "
                    "\"content\": \"r\"}]}",
                    O, ALL, "messages[1]: role \"function\" (OpenAI's legacy function calling) is not supported");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": null}]}",
                    O, A, "messages[1] (assistant): content is null");
    expect_error_as("{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": null, "
                    "\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}]}]}",
                    M, A, "(--format openai reads null content beside tool_calls as \"\")");
    // sharegpt
#define H(v) "{\"from\": \"human\", \"value\": \"" v "\"}"
#define G(v) "{\"from\": \"gpt\", \"value\": \"" v "\"}"
    expect_error_as("{\"conversations\": [" H("q") ", " H("q2") "]}", S, A,
                    "conversations[1] (human): a \"human\" turn where LLaMA-Factory expects gpt or function_call");
    expect_error_as("{\"conversations\": [" G("a") "]}", S, A,
                    "conversations[0] (gpt): a \"gpt\" turn where LLaMA-Factory expects human or observation");
    expect_error_as("{\"conversations\": [" H("q") ", " G("a") ", " H("q2") "]}", S, ALL,
                    "member \"conversations\" has 3 turns after the system turn; LLaMA-Factory needs an even number");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"system\", \"value\": \"s\"}]}", S, A,
                    "conversations[1] (system): a system turn is only read first");
    expect_error_as("{\"conversations\": [{\"from\": \"bot\", \"value\": \"x\"}]}", S, A,
                    "conversations[0]: from \"bot\" is not one of system, human, gpt, function_call, observation");
    expect_error_as("{\"conversations\": [{\"from\": \"human\"}]}", S, A, "conversations[0] (human): no \"value\" member");
    expect_error_as("{\"conversations\": [{\"value\": \"x\"}]}", S, A, "conversations[0]: no \"from\" member");
    expect_error_as("{\"conversations\": [{\"from\": \"human\", \"value\": 3}]}", S, A,
                    "conversations[0] (human): value is a number, not a string");
    expect_error_as("{\"conversations\": [{\"from\": \"system\", \"value\": \"s\"}]}", S, ALL,
                    "member \"conversations\" holds only a system turn");
    expect_error_as("{\"messages\": [" QA "]}", S, A, "no \"conversations\" member (the object has \"messages\"; choose one with --field)");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"function_call\", \"value\": \"f(x)\"}]}", S, A,
                    "conversations[1] (function_call): value: not valid JSON at column 1 of the string (a function_call value is JSON");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"function_call\", \"value\": \"{\\\"name\\\": \\\"f\\\"}\"}]}",
                    S, A, "conversations[1] (function_call): value: no \"arguments\" member");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"function_call\", \"value\": \"[{\\\"name\\\": \\\"f\\\", "
                    "\\\"arguments\\\": {}}, {\\\"arguments\\\": {}}]\"}]}",
                    S, A, "conversations[1] (function_call): value[1]: no \"name\" member");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"function_call\", \"value\": \"[]\"}]}", S, A,
                    "conversations[1] (function_call): value is an empty array");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"function_call\", \"value\": \"{\\\"name\\\": \\\"f\\\", "
                    "\\\"arguments\\\": {}} x\"}]}",
                    S, A, "value: text after the JSON value at column 32 of the string");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"function_call\", \"value\": \"{\\\"name\\\": \\\"f\\\", "
                    "\\\"arguments\\\": \\\"\\\\u0000\\\"}\"}]}",
                    S, A, "\\u0000 at column 29 of the string: NUL characters are not supported");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"function_call\", \"value\": \"{\\\"name\\\": \\\"f\\\", "
                    "\\\"arguments\\\": \\\"a\\nb\\\"}\"}]}",
                    S, A, "raw control character 0x0a inside a JSON string at column 30 of the string");
    expect_error_as("{\"conversations\": [" H("q") ", " G("a") "], \"tools\": \"[{\\\"name\\\": \"}", S, A,
                    "tools: not valid JSON at column");
    expect_error_as("{\"conversations\": [" H("q") ", " G("a") "], \"tools\": \"{\\\"name\\\": \\\"f\\\"}\"}", S, A,
                    "tools (the JSON in the string) is an object, not an array of tool schemas");
    expect_error_as("{\"conversations\": [" H("q") ", " G("a") "], \"tools\": 3}", S, A,
                    "tools is a number, not an array of tool schemas");
    expect_error_as("{\"conversations\": [" H("q") ", " G("a") "], \"system\": 3}", S, A, "system: the member is a number");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"gpt\", \"value\": \"a\", \"weight\": 2}]}", S, A,
                    "conversations[1] (gpt): weight is another number, not 0 or 1");
    expect_error_as("{\"conversations\": [" H("q") ", {\"from\": \"function_call\", \"value\": \"{\\\"name\\\": \\\"f\\\", "
                    "\\\"arguments\\\": {\\\"n\\\": 01}}\"}]}",
                    S, A, "conversations[1] (function_call): value.arguments: the number 01 is not valid JSON");
#undef H
#undef G
#undef CALL
#undef QA
    printf("format errors: every malformed case of the tools, weight, openai and sharegpt rules named\n");
}

// zt_chat_detect: what a line shows, and whether that decides.
static void test_detect(void) {
    const zt_chat_format M = ZT_CHAT_FORMAT_MESSAGES, O = ZT_CHAT_FORMAT_OPENAI, S = ZT_CHAT_FORMAT_SHAREGPT,
                         U = ZT_CHAT_FORMAT_AUTO;
    struct {
        const char *line, *field;
        zt_chat_format want;
        int decisive;
    } cases[] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}", NULL, M, 0},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"weight\": 0}]}", NULL, M, 0},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c\", \"type\": "
         "\"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]}",
         NULL, M, 0},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", "
         "\"function\": {\"name\": \"f\", \"arguments\": {}}}]}]}",
         NULL, M, 1},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"name\": \"f\", "
         "\"arguments\": \"{}\"}]}]}",
         NULL, M, 1},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tools\": [{\"name\": \"f\"}]}", NULL, M, 1},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tools\": [{\"type\": \"function\"}]}", NULL, M, 0},
        {"{\"messages\": [{\"role\": \"tool\", \"tool_call_id\": \"c\", \"content\": \"r\"}]}", NULL, O, 1},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"function\": {}}]}]}", NULL, O, 1},
        {"{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {}}]}]}", NULL, O, 1},
        {"{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}]}", NULL, S, 1},
        {"{\"chat\": [{\"from\": \"human\", \"value\": \"q\"}]}", "chat", S, 1},
        {"{\"chat\": [{\"from\": \"human\", \"value\": \"q\"}]}", NULL, U, 0},
        {"{\"messages\": []}", NULL, U, 0},
        {"[1]", NULL, U, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cJSON *root = cJSON_Parse(cases[k].line);
        const char *why = NULL;
        int sure = -1;
        const zt_chat_format f = zt_chat_detect(root, cases[k].field, &sure, &why);
        CHECK(f == cases[k].want && sure == cases[k].decisive && (f == U) == (why == NULL),
              "detect %s: %s%s (%s), want %s%s", cases[k].line, zt_chat_format_name(f), sure ? ", decisive" : "",
              why ? why : "-", zt_chat_format_name(cases[k].want), cases[k].decisive ? ", decisive" : "");
        cJSON_Delete(root);
    }
    printf("detect: %zu lines read as the format they show\n", sizeof cases / sizeof cases[0]);
}

// A weight-0 turn in the three formats: the same text, nothing of that turn trained, the
// other turns as before.
static void test_weight0(void) {
    const char *lines[3] = {
        "{\"messages\": [{\"role\": \"user\", \"content\": \"q1\"}, {\"role\": \"assistant\", \"content\": \"bad answer\", "
        "\"weight\": 0}, {\"role\": \"user\", \"content\": \"q2\"}, {\"role\": \"assistant\", \"content\": \"good\"}], "
        "\"tools\": [{\"name\": \"f\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"q1\"}, {\"role\": \"assistant\", \"content\": \"bad answer\", "
        "\"weight\": 0}, {\"role\": \"user\", \"content\": \"q2\"}, {\"role\": \"assistant\", \"content\": \"good\", "
        "\"weight\": 1}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}",
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"q1\"}, {\"from\": \"gpt\", \"value\": \"bad answer\", "
        "\"weight\": 0}, {\"from\": \"human\", \"value\": \"q2\"}, {\"from\": \"gpt\", \"value\": \"good\"}], \"tools\": "
        "\"[{\\\"name\\\": \\\"f\\\"}]\"}"};
    zt_chat c = {0};
    zt_chat_tokens t = {0};
    zt_buf ref = {0};
    for (int f = 0; f < 3; f++) {
        for (int r = 0; r < 3; r++) {
            const int rc = run_line_as(lines[f], strlen(lines[f]), form_format[f], (zt_chat_train)r, &c, &t);
            CHECK(rc == 0, "%s: %s", form_file[f], rc ? zt_errmsg() : "");
            if (rc) continue;
            const char *bad = memmem(c.text.p, c.text.n, "bad answer", 10), *good = memmem(c.text.p, c.text.n, "good", 4);
            const size_t b0 = (size_t)(bad - c.text.p);
            // no span touches the weight-0 turn; the other turn is trained (assistant, last) or all the rest (all)
            int touches = 0, good_in = 0;
            for (size_t s = 0; s < c.nspans; s++) {
                touches |= c.spans[s].begin < b0 + 20 && c.spans[s].end > b0;  // "bad answer<|im_end|>"
                good_in |= c.spans[s].begin <= (size_t)(good - c.text.p) && c.spans[s].end > (size_t)(good - c.text.p);
            }
            CHECK(!touches && good_in && c.weight0 == 1, "%s, --train-on %s: a weight-0 turn is trained (%zu spans)",
                  form_file[f], zt_chat_train_name((zt_chat_train)r), c.nspans);
            if (f == 0 && r == 0) zt_buf_append(&ref, c.text.p, c.text.n);
            if (r == 0 && f == 2)
                CHECK(c.text.n == ref.n && !memcmp(c.text.p, ref.p, ref.n), "sharegpt renders differently from messages");
        }
    }
    // weight 0 on the last turn: --train-on last trains nothing, --train-on assistant the first turn
    const char *w0last = "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": "
                         "\"a\"}, {\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"b\", "
                         "\"weight\": 0}]}";
    int rc = run_line(w0last, strlen(w0last), ZT_CHAT_TRAIN_LAST, &c, &t);
    CHECK(rc == 0 && c.nspans == 0 && t.ntrained == 0, "--train-on last with the last turn weight 0: %zu spans", c.nspans);
    rc = run_line(w0last, strlen(w0last), ZT_CHAT_TRAIN_ASSISTANT, &c, &t);
    CHECK(rc == 0 && c.nspans == 1 && t.ntrained > 0, "--train-on assistant: %zu spans", c.nspans);
    free(ref.p);
    zt_chat_free(&c);
    zt_chat_tokens_free(&t);
    printf("weight 0: in messages, openai and sharegpt, the turn trains nothing under assistant, last and all\n");
}

// ---- mixtures ----
// The conversations a chat pack holds, as (input, line) pairs found by their words.
typedef struct {
    uint64_t hash;
    uint32_t input, item;
} word_key;

static uint64_t hash_words(const uint32_t *w, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ w[i]) * 1099511628211ull;
    return h ^ n;
}
static int cmp_key64(const void *a, const void *b) {
    const word_key *x = a, *y = b;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

// counts[input][item]: how many times each packable conversation of each input is in the pack.
static int64_t count_conversations(const char *data_path, const word_key *keys, size_t nkeys, int64_t **counts,
                                   int64_t *unknown) {
    size_t len;
    uint32_t *w = (uint32_t *)zt_read_file(data_path, &len);
    const uint32_t pad = (uint32_t)zt_tokenizer_token_id(tok, "<|endoftext|>");
    const size_t n = w ? len / 4 : 0;
    int64_t docs = 0;
    *unknown = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && !(w[j] & ZT_TOK_DOC_START)) j++;
        if ((w[i] & ZT_TOK_ID_MASK) != pad) {
            word_key key = {.hash = hash_words(w + i, j - i)};
            const word_key *hit = bsearch(&key, keys, nkeys, sizeof *keys, cmp_key64);
            if (hit) counts[hit->input][hit->item]++;
            else (*unknown)++;
            docs++;
        }
        i = j;
    }
    free(w);
    return docs;
}

// Mixtures of the tools conversations (ending with the assistant, at most seq_len tokens) and
// the plain golden conversations: every conversation taken is one of the inputs', each input's
// conversations taken a whole number of passes plus a prefix of a fixed order (counts e or e+1),
// its tokens within half a conversation of its share; the same seed gives the same bytes,
// another seed another order of the same conversations; a small input is taken several times.
static void test_mixture(tools_golden *T, const golden *g0, size_t ng0, char **lines0, size_t *lens0, const char *dir) {
    const int seq = 1024;
    char in_path[2][512];
    snprintf(in_path[0], sizeof in_path[0], "%s/mix-tools.jsonl", dir);
    snprintf(in_path[1], sizeof in_path[1], "%s/mix-plain.jsonl", dir);
    const size_t nin[2] = {300, 500};
    write_lines(in_path[0], T->lines[0], T->lens[0], NULL, nin[0]);
    write_lines(in_path[1], lines0, lens0, NULL, nin[1]);
    const golden *gs[2] = {T->g, g0};
    (void)ng0;
    // the words each input's packable conversations become, keyed by their hash
    word_key *keys = zt_xcalloc(nin[0] + nin[1], sizeof *keys);
    int64_t *tokens[2], *trained[2], total[2] = {0, 0}, ndocs[2] = {0, 0};
    size_t nkeys = 0;
    zt_ids w = {0};
    for (int s = 0; s < 2; s++) {
        tokens[s] = zt_xcalloc(nin[s], sizeof *tokens[s]);
        trained[s] = zt_xcalloc(nin[s], sizeof *trained[s]);
        for (size_t k = 0; k < nin[s]; k++) {
            const golden *g = &gs[s][k];
            if (!(g->flags & 1) || g->ntok > (uint32_t)seq) continue;
            w.n = 0;
            for (uint32_t i = 0; i < g->ntok; i++) {
                const int tr = golden_mask(g, i, 0);
                zt_ids_push(&w, g->ids[i] | (i == 0 ? ZT_TOK_DOC_START : 0) | (tr ? 0 : ZT_TOK_NO_LOSS));
                trained[s][k] += tr;
            }
            tokens[s][k] = g->ntok;
            total[s] += g->ntok;
            ndocs[s]++;
            keys[nkeys++] = (word_key){hash_words(w.ids, w.n), (uint32_t)s, (uint32_t)k};
        }
    }
    zt_ids_free(&w);
    qsort(keys, nkeys, sizeof *keys, cmp_key64);
    for (size_t k = 1; k < nkeys; k++) CHECK(keys[k].hash != keys[k - 1].hash, "two conversations with one hash");

    struct {
        double w[2];
        int64_t size;
    } mixes[] = {{{0.7, 0.3}, 0}, {{1, 1}, 600000}, {{3, 1}, 150000}};
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++) {
        const char *in[2] = {in_path[0], in_path[1]};
        zt_pack_stats st[3];
        char out[3][600], data[3][1900], js[3][1900];
        const uint64_t seeds[3] = {1234, 1234, 99};
        int rc = 0;
        for (int v = 0; v < 3 && rc == 0; v++) {
            snprintf(out[v], sizeof out[v], "%.500s/mix%zu-%d", dir, m, v);
            snprintf(data[v], sizeof data[v], "%s/data.u32", out[v]);
            snprintf(js[v], sizeof js[v], "%s/dataset.json", out[v]);
            rc = pack_chat(in, mixes[m].w, 2, out[v], seq, ZT_CHAT_TRAIN_ASSISTANT, ZT_CHAT_FORMAT_AUTO, mixes[m].size,
                           seeds[v], &st[v]);
            CHECK(rc == 0, "mixture %zu: %s", m, rc ? zt_errmsg() : "");
        }
        if (rc) continue;
        // the same seed: the same bytes; another seed: another order
        CHECK(same_file(data[0], data[1]) && same_file(js[0], js[1]), "mixture %zu: the same seed gave other bytes", m);
        CHECK(!same_file(data[0], data[2]), "mixture %zu: another seed gave the same order", m);
        int64_t *counts[3][2];
        for (int v = 0; v < 3; v++) {
            for (int s = 0; s < 2; s++) counts[v][s] = zt_xcalloc(nin[s], sizeof **counts);
            int64_t unknown;
            const int64_t docs = count_conversations(data[v], keys, nkeys, counts[v], &unknown);
            CHECK(unknown == 0 && docs == st[v].documents, "mixture %zu seed %llu: %lld conversations not from an input, "
                  "%lld found, %lld packed", m, (unsigned long long)seeds[v], (long long)unknown, (long long)docs,
                  (long long)st[v].documents);
        }
        const double wsum = mixes[m].w[0] + mixes[m].w[1];
        const int64_t size = st[0].mix_tokens;
        if (!mixes[m].size) {  // the default: the largest mixture that repeats no input
            const double want = fmin(total[0] / (mixes[m].w[0] / wsum), total[1] / (mixes[m].w[1] / wsum));
            CHECK(llabs(size - (int64_t)floor(want + 0.5)) <= 1, "default size %lld, want %.0f", (long long)size, want);
        } else {
            CHECK(size == mixes[m].size, "size %lld, want %lld", (long long)size, (long long)mixes[m].size);
        }
        for (int s = 0; s < 2; s++) {
            const zt_pack_input_stats *in = &st[0].inputs[s];
            const double share = mixes[m].w[s] / wsum, quota = share * (double)size;
            int64_t taken = 0, ttok = 0, ttrained = 0, lo = INT64_MAX, hi = 0, maxdoc = 0, nhi = 0;
            for (size_t k = 0; k < nin[s]; k++) {
                if (!tokens[s][k]) continue;
                const int64_t c = counts[0][s][k];
                CHECK(c == counts[2][s][k], "mixture %zu input %d line %zu: %lld times with seed 1234, %lld with 99", m, s,
                      k + 1, (long long)c, (long long)counts[2][s][k]);
                taken += c, ttok += c * tokens[s][k], ttrained += c * trained[s][k];
                lo = c < lo ? c : lo, hi = c > hi ? c : hi;
                maxdoc = tokens[s][k] > maxdoc ? tokens[s][k] : maxdoc;
            }
            for (size_t k = 0; k < nin[s]; k++) nhi += tokens[s][k] && counts[0][s][k] == hi;
            CHECK(hi - lo <= 1, "mixture %zu input %d: conversations taken between %lld and %lld times", m, s,
                  (long long)lo, (long long)hi);
            CHECK(in->documents == ndocs[s] && in->tokens == total[s] && in->taken_documents == taken &&
                      in->taken_tokens == ttok && in->taken_trained == ttrained && fabs(in->share - share) < 1e-12 &&
                      fabs(in->epochs - (double)ttok / (double)total[s]) < 1e-12,
                  "mixture %zu input %d: stats %lld/%lld documents, %lld/%lld tokens, taken %lld (%lld), %lld tokens "
                  "(%lld), %lld trained (%lld), %.4f epochs",
                  m, s, (long long)in->documents, (long long)ndocs[s], (long long)in->tokens, (long long)total[s],
                  (long long)in->taken_documents, (long long)taken, (long long)in->taken_tokens, (long long)ttok,
                  (long long)in->taken_trained, (long long)ttrained, in->epochs);
            CHECK(fabs((double)ttok - quota) <= 0.5 * (double)maxdoc + 1, "mixture %zu input %d: %lld tokens for a "
                  "share of %.0f", m, s, (long long)ttok, quota);
            for (int v = 1; v < 3; v++)
                CHECK(st[v].inputs[s].taken_documents == taken && st[v].inputs[s].taken_tokens == ttok &&
                          st[v].inputs[s].taken_trained == ttrained,
                      "mixture %zu input %d: counts differ with seed %llu", m, s, (unsigned long long)seeds[v]);
            printf("mixture %zu (weights %g:%g, %lld tokens), input %d: %lld conversations, taken %lld times "
                   "(%lld..%lld each, %lld at the most), %lld tokens for a share of %.0f, %.4f epochs, %lld trained\n",
                   m, mixes[m].w[0], mixes[m].w[1], (long long)size, s, (long long)ndocs[s], (long long)taken,
                   (long long)lo, (long long)hi, (long long)nhi, (long long)ttok, quota, in->epochs,
                   (long long)ttrained);
        }
        for (int v = 0; v < 3; v++) {
            for (int s = 0; s < 2; s++) free(counts[v][s]);
            zt_pack_stats_free(&st[v]);
        }
    }
    for (int s = 0; s < 2; s++) free(tokens[s]), free(trained[s]);
    free(keys);
    printf("mixture: same seed -> same bytes, another seed -> another order of the same conversations\n");
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
    check_golden(g, NULL, ng, lines, lens, ZT_CHAT_FORMAT_MESSAGES, &tl);
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

    test_pack(g, ng, GOLDEN_JSONL, 512, 0, ZT_CHAT_TRAIN_ASSISTANT);
    test_pack(g, ng, GOLDEN_JSONL, 300, 3, ZT_CHAT_TRAIN_LAST);
    test_pack(g, ng, GOLDEN_JSONL, 1024, 0, ZT_CHAT_TRAIN_ALL);

    test_errors();
    test_normalisation_boundaries();
    test_template_check();
    test_json_depth();

    // tools, the OpenAI and ShareGPT formats, weights, mixtures
    tools_golden T;
    load_tools(&T);
    test_tools_golden(&T);
    test_masks_stated(&T);
    char dir[] = "/tmp/zt_chat_tools_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    test_tools_pack(&T, dir);
    test_mixture(&T, g, ng, lines, lens, dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "rm");
    test_format_errors();
    test_detect();
    test_weight0();
    free_tools(&T);

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
