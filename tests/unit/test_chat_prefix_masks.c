// --train-on assistant|last with chat templates that have no {% generation %} blocks (prefix
// mode, data/chat_jinja.c): pack's path (zt_chat_render_jinja + zt_chat_tokenize) against the
// spans, ids and masks transformers gives when the conversation is rendered prefix by prefix
// (tests/reference/make_chat_prefix_masks_golden.py -> tests/golden/chat_templates/
// prefix_masks.jsonl.gz): 10 trl templates x 16 conversations x 2 rules. Where the golden
// refuses a conversation, pack must refuse it for the same reason (a rendering that is not a
// prefix, a template that raises, no assistant message, an assistant message first).
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/common.h"
#include "data/chat.h"
#include "data/chat_jinja.h"
#include "data/jinja.h"
#include "data/tokenizer.h"
#include "tests/support/test_util.h"

#define TOK_JSON ZT_TEST_DIR "/../assets/qwen3-tokenizer/tokenizer.json"
#define GOLD ZT_GOLDEN_DIR "/chat_templates"

static char *read_gz(const char *path, size_t *len) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    int r;
    while ((r = gzread(f, buf + n, (unsigned)(cap - n - 1))) > 0) {
        n += (size_t)r;
        if (cap - n < 2) buf = realloc(buf, cap *= 2);
    }
    gzclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static char *next_line(char **p) {
    char *s = *p;
    if (!*s) return NULL;
    char *e = strchr(s, '\n');
    if (e) *e = 0, *p = e + 1;
    else *p = s + strlen(s);
    return s;
}

// The words of pack's message for each refusal of the golden.
static const char *refusal_words(const char *kind) {
    if (!strcmp(kind, "prefix")) return "is not a prefix of";
    if (!strcmp(kind, "none")) return "no assistant message";
    if (!strcmp(kind, "empty")) return "no prompt before it";
    return "the template ";  // raise: "the template raised: ..." or "the template failed at ..."
}

int main(void) {
    size_t len;
    char *corpus = zt_read_file(GOLD "/corpus.jsonl", &len);
    char *gold = read_gz(GOLD "/prefix_masks.jsonl.gz", &len);
    if (!corpus || !gold) {
        fprintf(stderr, "cannot read the goldens in %s\n", GOLD);
        return 1;
    }
    char *lines[256];
    int ncases = 0;
    for (char *p = corpus, *l; (l = next_line(&p)) && ncases < 256;) lines[ncases++] = l;
    zt_tokenizer *tk = zt_tokenizer_load(TOK_JSON);
    zt_encoder *enc = tk ? zt_encoder_new(tk) : NULL;
    CHECK(enc != NULL, "Qwen3 tokenizer: %s", zt_errmsg());
    if (!enc) TEST_END();

    char *gp = gold;
    cJSON *meta = cJSON_Parse(next_line(&gp));
    const cJSON *special = cJSON_GetObjectItem(meta, "special_tokens");
    zt_chat_jinja_scratch sc = {0};
    zt_chat chat = {0};
    zt_chat_tokens tok = {0};
    zt_chat_jinja cj = {.lim = {.now = 1796644800}};  // 2026-12-07 12:00:00 UTC, as the goldens
    char tname[256] = "";
    int total = 0, trained = 0, refused = 0, same = 0, templates = 0;
    for (char *l; (l = next_line(&gp));) {
        cJSON *rec = cJSON_Parse(l);
        const char *t = cJSON_GetObjectItem(rec, "t")->valuestring;
        const int ci = cJSON_GetObjectItem(rec, "c")->valueint;
        const char *rule_name = cJSON_GetObjectItem(rec, "rule")->valuestring;
        const zt_chat_train rule = strcmp(rule_name, "last") ? ZT_CHAT_TRAIN_ASSISTANT : ZT_CHAT_TRAIN_LAST;
        if (strcmp(t, tname)) {  // a new template
            zt_jinja_free(cj.tpl);
            char path[512];
            snprintf(path, sizeof path, "%s/templates/%s", GOLD, t);
            size_t n;
            char *src = zt_read_file(path, &n);
            cj.tpl = src ? zt_jinja_parse(src, n, t) : NULL;
            free(src);
            CHECK(cj.tpl && !zt_jinja_has_generation(cj.tpl), "%s: %s", t, cj.tpl ? "has generation blocks" : zt_errmsg());
            snprintf(tname, sizeof tname, "%s", t);
            templates++;
        }
        // the variables pack gives: the tokenizer's special tokens, add_generation_prompt=false, the case's
        char *vv[24];
        int nv = 0;
        for (cJSON *s = special ? special->child : NULL; s && nv < 12; s = s->next) {
            char *js = cJSON_PrintUnformatted(s);
            if (asprintf(&vv[nv++], "%s=%s", s->string, js) < 0) return 1;
            free(js);
        }
        vv[nv++] = strdup("add_generation_prompt=false");
        cJSON *c = cJSON_Parse(lines[ci]);
        for (cJSON *v = cJSON_GetObjectItem(c, "vars") ? cJSON_GetObjectItem(c, "vars")->child : NULL; v && nv < 24;
             v = v->next)
            if (asprintf(&vv[nv++], "%s=%s", v->string, cJSON_IsTrue(v) ? "true" : "false") < 0) return 1;
        cj.vars = vv, cj.nvars = nv;
        total++;
        const int rc = zt_chat_render_jinja(&cj, c, ZT_CHAT_FORMAT_MESSAGES, lines[ci], strlen(lines[ci]), NULL, rule,
                                            &sc, &chat);
        const cJSON *err = cJSON_GetObjectItem(rec, "error");
        int ok = 0;
        if (err) {
            refused++;
            ok = rc != 0 && strstr(zt_errmsg(), refusal_words(err->valuestring));
            CHECK(ok, "%s case %d --train-on %s: transformers refuses (%s), pack %s: %s", t, ci, rule_name,
                  err->valuestring, rc ? "refuses" : "packs", rc ? zt_errmsg() : "");
        } else {
            trained++;
            const char *text = cJSON_GetObjectItem(rec, "text")->valuestring;
            const cJSON *spans = cJSON_GetObjectItem(rec, "spans"), *ids = cJSON_GetObjectItem(rec, "ids"),
                        *mask = cJSON_GetObjectItem(rec, "mask");
            ok = rc == 0 && chat.text.n == strlen(text) && !memcmp(chat.text.p, text, chat.text.n);
            CHECK(ok, "%s case %d --train-on %s: text differs (%s)", t, ci, rule_name, rc ? zt_errmsg() : "");
            // spans: pack keeps them merged where they overlap or touch (data/chat_jinja.c); the golden
            // lists one per turn
            size_t want[64][2], nw = 0;
            for (int k = 0; k < cJSON_GetArraySize(spans) && nw < 64; k++) {
                const size_t b = (size_t)cJSON_GetArrayItem(cJSON_GetArrayItem(spans, k), 0)->valuedouble,
                             e = (size_t)cJSON_GetArrayItem(cJSON_GetArrayItem(spans, k), 1)->valuedouble;
                if (nw && b <= want[nw - 1][1]) {
                    if (e > want[nw - 1][1]) want[nw - 1][1] = e;
                } else {
                    want[nw][0] = b, want[nw][1] = e, nw++;
                }
            }
            int sok = ok && chat.nspans == nw;
            for (size_t k = 0; sok && k < nw; k++) sok = chat.spans[k].begin == want[k][0] && chat.spans[k].end == want[k][1];
            CHECK(sok, "%s case %d --train-on %s: trained spans differ (%zu here)", t, ci, rule_name, chat.nspans);
            int iok = sok && !zt_chat_tokenize(enc, tk, &chat, &tok) && (int)tok.ids.n == cJSON_GetArraySize(ids);
            for (size_t k = 0; iok && k < tok.ids.n; k++)
                iok = tok.ids.ids[k] == (uint32_t)cJSON_GetArrayItem(ids, (int)k)->valuedouble &&
                      tok.trained[k] == cJSON_GetArrayItem(mask, (int)k)->valueint;
            CHECK(iok, "%s case %d --train-on %s: ids or mask differ", t, ci, rule_name);
            ok = iok;
        }
        same += ok;
        for (int i = 0; i < nv; i++) free(vv[i]);
        cJSON_Delete(c);
        cJSON_Delete(rec);
    }
    printf("prefix mode: %d templates, %d conversations x rules: %d trained (spans, ids, masks), %d refused for the "
           "golden's reason; %d equal\n", templates, total, trained, refused, same);
    CHECK(templates == 10 && total == 320 && trained > 100 && refused > 50, "the golden is not the one expected");
    zt_jinja_free(cj.tpl);
    zt_chat_jinja_scratch_free(&sc);
    zt_chat_free(&chat);
    zt_chat_tokens_free(&tok);
    zt_encoder_free(enc);
    zt_tokenizer_free(tk);
    cJSON_Delete(meta);
    free(corpus);
    free(gold);
    TEST_END();
}
