// zerotrain's Jinja engine (data/jinja*.c) against transformers 5.25's apply_chat_template
// (tests/reference/make_chat_templates_golden.py -> tests/golden/chat_templates/): every trl
// 1.16.0 template on every corpus conversation, in C without Python. Checked per render: the
// text byte for byte; where transformers raised, that the engine raises too (raise_exception:
// the same message; other errors: Python's message where the engine words it the same, counted
// apart); the {% generation %} byte spans; the Qwen3 ids of the text; the assistant mask from
// the spans against return_assistant_tokens_mask. For the Qwen3.5/3.6/3.8 templates also the
// Qwen3.5 ids and masks (tests/data/tokenizer/qwen3_5, expected_qwen3_5.jsonl.gz from
// tests/reference/make_chat_templates_q35_golden.py). Prints the counts of templates x conversations.
//   test_jinja_templates [GOLDEN_DIR [TEMPLATE_FILTER]]
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/common.h"
#include "data/chat.h"
#include "data/chat_jinja.h"
#include "data/jinja.h"
#include "data/tokenizer.h"
#include "tests/support/test_util.h"

#define TOK_JSON ZT_TEST_DIR "/../assets/qwen3-tokenizer/tokenizer.json"
#define TOK35_GZ ZT_TEST_DIR "/data/tokenizer/qwen3_5/tokenizer.json.gz"

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

typedef struct {
    char *line;  // the corpus line (JSON)
    cJSON *vars;
} corpus_case;

// the mask transformers derives from the spans (apply_chat_template, return_assistant_tokens_mask):
// a token is 1 when it overlaps the current span, spans walked in order against token offsets
static int mask_matches(const zt_tokenizer *tk, const zt_ids *ids, const zt_jinja_result *r, const cJSON *mask) {
    size_t off = 0, si = 0;
    zt_buf dec = {0};
    int ok = cJSON_GetArraySize(mask) == (int)ids->n;
    for (size_t i = 0; ok && i < ids->n; i++) {
        dec.n = 0;
        zt_decode(tk, &ids->ids[i], 1, &dec);
        size_t ts = off, te = off + dec.n;
        off = te;
        while (si < r->nspans && ts >= r->spans[si][1]) si++;
        int m = si < r->nspans && te > r->spans[si][0];
        ok = m == cJSON_GetArrayItem(mask, (int)i)->valueint;
    }
    free(dec.p);
    return ok;
}

// The built-in Qwen3 renderer (data/chat_template.c, pack's fast path) against the engine running
// assets/qwen3-tokenizer's chat_template on the chat goldens' conversations: the same text.
static int fastpath_check(const char *path, int gz, zt_chat_format fmt) {
    size_t len;
    char *all = gz ? read_gz(path, &len) : zt_read_file(path, &len);
    CHECK(all != NULL, "cannot read %s", path);
    if (!all) return 0;
    zt_chat_jinja cj;
    int rc = zt_chat_jinja_load(&cj, ZT_TEST_DIR "/../assets/qwen3-tokenizer/tokenizer_config.json",
                                ZT_TEST_DIR "/../assets/qwen3-tokenizer/tokenizer_config.json", NULL);
    CHECK(rc == 0, "qwen3 template: %s", zt_errmsg());
    if (rc) return free(all), 0;
    zt_chat_jinja_scratch sc = {0};
    zt_chat a = {0}, b = {0};
    int n = 0, same = 0, both_refuse = 0;
    for (char *p = all, *l; (l = next_line(&p));) {
        cJSON *root = cJSON_Parse(l);
        if (!root) continue;
        if (fmt == ZT_CHAT_FORMAT_MESSAGES && strstr(l, "\"weight\"")) {  // zt_chat_render_jinja refuses it
            cJSON_Delete(root);
            continue;
        }
        int ra = zt_chat_render_as(root, NULL, fmt, l, strlen(l), ZT_CHAT_TRAIN_ALL, &a);
        int rb = zt_chat_render_jinja(&cj, root, fmt, l, strlen(l), NULL, ZT_CHAT_TRAIN_ALL, &sc, &b);
        if (!ra && rb && strstr(zt_errmsg(), "\"weight\" is not supported")) {  // a weight-0 turn
            cJSON_Delete(root);
            continue;
        }
        n++;
        if ((ra || rb) && getenv("ZT_JINJA_DIFF") && !(ra && rb))
            fprintf(stderr, "  conversation %d: built-in %s, engine %s\n", n, ra ? "refuses" : "renders", rb ? zt_errmsg() : "renders");
        if (ra || rb) {  // both refuse, or it is a disagreement
            CHECK(ra && rb, "%s conversation %d: only one of the built-in renderer and the engine refuses", path, n);
            both_refuse += ra && rb;
            cJSON_Delete(root);
            continue;
        }
        int ok = a.text.n == b.text.n && !memcmp(a.text.p, b.text.p, a.text.n);
        CHECK(ok, "%s conversation %d: the built-in Qwen3 renderer and the engine differ", path, n);
        if (!ok && getenv("ZT_JINJA_DIFF")) {
            size_t k = 0;
            while (k < a.text.n && k < b.text.n && a.text.p[k] == b.text.p[k]) k++;
            fprintf(stderr, "  at byte %zu\n  built-in: %.100s\n  engine:   %.100s\n", k, a.text.p + k, b.text.p + k);
        }
        same += ok;
        cJSON_Delete(root);
    }
    printf("qwen3 fast path vs engine on %s (%s): %d conversations, %d texts equal, %d refused by both\n", path,
           zt_chat_format_name(fmt), n, same, both_refuse);
    CHECK(same > 0, "no conversation compared");
    zt_chat_free(&a), zt_chat_free(&b);
    zt_chat_jinja_scratch_free(&sc);
    zt_chat_jinja_free(&cj);
    free(all);
    return same;
}

typedef struct {
    zt_encoder *enc;
    const zt_tokenizer *tk;
    zt_chat_jinja_scratch sc;
    zt_chat chat;
    zt_chat_tokens tok;
} pack_scratch;

// pack's path, zt_chat_render_jinja (--train-on assistant) + zt_chat_tokenize, against
// transformers' ids (got, checked equal before) and mask: 1 when compared equal, 0 when the
// template marked nothing (pack refuses such a line under assistant, and says so)
static int pack_path(pack_scratch *pk, zt_jinja *tpl, zt_jinja_limits lim, const cJSON *special, const corpus_case *cc,
                     const zt_ids *got, const cJSON *mask, const char *t, int ci) {
    zt_chat_jinja cj = {.tpl = tpl, .lim = lim};
    char *vv[16];
    int nv = 0;
    for (cJSON *s = special ? special->child : NULL; s && nv < 8; s = s->next) {
        char *js = cJSON_PrintUnformatted(s);
        vv[nv] = malloc(strlen(s->string) + strlen(js) + 2);
        sprintf(vv[nv++], "%s=%s", s->string, js);
        free(js);
    }
    vv[nv++] = strdup("add_generation_prompt=false");
    for (cJSON *v = cc->vars ? cc->vars->child : NULL; v && nv < 16; v = v->next) {
        vv[nv] = malloc(strlen(v->string) + 8);
        sprintf(vv[nv++], "%s=%s", v->string, cJSON_IsTrue(v) ? "true" : "false");
    }
    cj.vars = vv, cj.nvars = nv;
    cJSON *root = cJSON_Parse(cc->line);
    int prc = zt_chat_render_jinja(&cj, root, ZT_CHAT_FORMAT_MESSAGES, cc->line, strlen(cc->line), NULL, ZT_CHAT_TRAIN_ASSISTANT, &pk->sc,
                                   &pk->chat);
    int pok = 0, nspans = (int)pk->sc.res.nspans;
    if (!prc && !zt_chat_tokenize(pk->enc, pk->tk, &pk->chat, &pk->tok) && pk->tok.ids.n == got->n) {
        pok = 1;
        for (size_t i = 0; i < got->n && pok; i++)
            pok = pk->tok.ids.ids[i] == got->ids[i] && pk->tok.trained[i] == cJSON_GetArrayItem(mask, (int)i)->valueint;
    } else if (prc && !nspans)
        pok = 1;
    CHECK(pok, "%s case %d: pack's ids/mask (zt_chat_render_jinja + zt_chat_tokenize) differ: %s", t, ci,
          prc ? zt_errmsg() : "");
    cJSON_Delete(root);
    for (int i = 0; i < nv; i++) free(vv[i]);
    return pok && !prc;
}

// The Qwen3.5 tokenizer from its gzip'd fixture (through a temporary file: the loader reads a path).
static zt_tokenizer *load_qwen3_5(void) {
    size_t n;
    char *js = read_gz(TOK35_GZ, &n);
    if (!js) return NULL;
    char tmp[] = "/tmp/zt_q35_tok_XXXXXX";
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int ok = f && fwrite(js, 1, n, f) == n;
    if (f) fclose(f);
    free(js);
    zt_tokenizer *tk = ok ? zt_tokenizer_load(tmp) : NULL;
    if (fd >= 0) unlink(tmp);
    return tk;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ZT_GOLDEN_DIR "/chat_templates";
    const char *only = argc > 2 ? argv[2] : NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus.jsonl", dir);
    size_t len;
    char *corpus = zt_read_file(path, &len);
    snprintf(path, sizeof path, "%s/expected.jsonl.gz", dir);
    char *gold = read_gz(path, &len);
    if (!corpus || !gold) { fprintf(stderr, "cannot read the goldens in %s\n", dir); return 1; }
    corpus_case cases[256];
    int ncases = 0;
    for (char *p = corpus, *l; (l = next_line(&p)) && ncases < 256;) {
        cJSON *c = cJSON_Parse(l);
        cases[ncases].line = l;
        cases[ncases++].vars = cJSON_GetObjectItem(c, "vars");
    }
    zt_tokenizer *tk = zt_tokenizer_load(TOK_JSON);
    zt_encoder *enc = tk ? zt_encoder_new(tk) : NULL;
    CHECK(enc != NULL, "Qwen3 tokenizer: %s", zt_errmsg());
    // Qwen3.5 ids and masks of the qwen3_5/3_6/3_8 templates: one record per rendered (template, case)
    snprintf(path, sizeof path, "%s/expected_qwen3_5.jsonl.gz", dir);
    char *gold35 = read_gz(path, &len);
    CHECK(gold35 != NULL, "cannot read %s", path);
    cJSON *q35 = cJSON_CreateArray();
    for (char *p = gold35, *l; gold35 && (l = next_line(&p));) cJSON_AddItemToArray(q35, cJSON_Parse(l));
    zt_tokenizer *tk35 = load_qwen3_5();
    zt_encoder *enc35 = tk35 ? zt_encoder_new(tk35) : NULL;
    CHECK(enc35 != NULL, "Qwen3.5 tokenizer: %s", zt_errmsg());
    int ids35 = 0, masks35 = 0, want35 = 0;
    char *gp = gold;
    cJSON *meta = cJSON_Parse(next_line(&gp));
    cJSON *special = cJSON_GetObjectItem(meta, "special_tokens");
    zt_jinja_limits lim = {.now = 1796644800};  // 2026-12-07 12:00:00 UTC, as the goldens
    zt_jinja_vars *vars = zt_jinja_vars_new();
    zt_jinja_result res = {0};
    zt_jinja *tpl = NULL;
    char tname[256] = "";
    int packmasks = 0;
    pack_scratch pk = {.enc = enc, .tk = tk};
    int renders = 0, texts = 0, raised = 0, errors = 0, errors_same = 0, spans = 0, idss = 0, masks = 0, tfail = 0;
    for (char *l; (l = next_line(&gp));) {
        cJSON *rec = cJSON_Parse(l);
        const char *t = cJSON_GetObjectItem(rec, "t")->valuestring;
        int ci = cJSON_GetObjectItem(rec, "c")->valueint;
        if (only && !strstr(t, only)) { cJSON_Delete(rec); continue; }
        if (strcmp(t, tname)) {
            zt_jinja_free(tpl);
            snprintf(tname, sizeof tname, "%s", t);
            snprintf(path, sizeof path, "%s/%s%s", dir, strncmp(t, "extra/", 6) ? "templates/" : "", t);
            char *src = zt_read_file(path, &len);
            tpl = src ? zt_jinja_parse(src, len, t) : NULL;
            free(src);
            CHECK(tpl != NULL, "%s: %s", t, zt_errmsg());
            if (!tpl) tfail++;
        }
        if (!tpl) { cJSON_Delete(rec); continue; }
        zt_jinja_vars_reset(vars);
        for (cJSON *s = special ? special->child : NULL; s; s = s->next)
            zt_jinja_set_str(vars, s->string, s->valuestring, strlen(s->valuestring));
        CHECK(!zt_jinja_set_line(vars, cases[ci].line, strlen(cases[ci].line), NULL), "case %d: %s", ci, zt_errmsg());
        char arg[256];
        snprintf(arg, sizeof arg, "add_generation_prompt=false");
        zt_jinja_set_arg(vars, arg);
        for (cJSON *v = cases[ci].vars ? cases[ci].vars->child : NULL; v; v = v->next) {
            snprintf(arg, sizeof arg, "%s=%s", v->string, cJSON_IsTrue(v) ? "true" : "false");
            zt_jinja_set_arg(vars, arg);
        }
        int st = zt_jinja_render(tpl, vars, &lim, &res);
        renders++;
        cJSON *err = cJSON_GetObjectItem(rec, "error");
        if (err) {
            const char *kind = cJSON_GetObjectItem(rec, "kind")->valuestring;
            int is_raise = !strcmp(kind, "TemplateError");
            CHECK(st == (is_raise ? ZT_JINJA_RAISED : ZT_JINJA_ERROR), "%s case %d: expected %s \"%s\", got status %d (%s)",
                  t, ci, kind, err->valuestring, st, st ? res.msg : "rendered");
            if (is_raise) {
                CHECK(!strcmp(res.msg, err->valuestring), "%s case %d: raise_exception message \"%s\" != \"%s\"", t, ci,
                      res.msg, err->valuestring);
                raised++;
            } else {
                errors++;
                int same = st == ZT_JINJA_ERROR && !strcmp(res.msg, err->valuestring);
                errors_same += same;
                CHECK(same, "%s case %d: error \"%s\", transformers: \"%s\"", t, ci, res.msg, err->valuestring);
                if (!same && getenv("ZT_JINJA_DIFF"))
                    fprintf(stderr, "  %s case %d: Python: %s | here: %s\n", t, ci, err->valuestring, res.msg);
            }
            cJSON_Delete(rec);
            continue;
        }
        const char *want = cJSON_GetObjectItem(rec, "text")->valuestring;
        int ok = st == ZT_JINJA_OK && res.n == strlen(want) && !memcmp(res.text, want, res.n);
        CHECK(ok, "%s case %d: text differs (status %d%s%s)", t, ci, st, st ? ": " : "", st ? res.msg : "");
        if (!ok && st == ZT_JINJA_OK && getenv("ZT_JINJA_DIFF")) {
            size_t k = 0;
            while (k < res.n && want[k] == res.text[k]) k++;
            fprintf(stderr, "  first difference at byte %zu\n  want: %.120s\n  got:  %.120s\n", k, want + k, res.text + k);
        }
        texts += ok;
        cJSON *sp = cJSON_GetObjectItem(rec, "spans");
        if (sp && ok) {
            int sok = cJSON_GetArraySize(sp) == (int)res.nspans;
            for (int i = 0; sok && i < (int)res.nspans; i++) {
                cJSON *p = cJSON_GetArrayItem(sp, i);
                sok = (size_t)cJSON_GetArrayItem(p, 0)->valuedouble == res.spans[i][0] &&
                      (size_t)cJSON_GetArrayItem(p, 1)->valuedouble == res.spans[i][1];
            }
            CHECK(sok, "%s case %d: generation spans differ (%zu spans here, %d in the golden)", t, ci, res.nspans,
                  cJSON_GetArraySize(sp));
            spans += sok;
        }
        cJSON *ids = cJSON_GetObjectItem(rec, "ids");
        if (ids && ok && enc) {
            zt_ids got = {0};
            zt_encode(enc, res.text, res.n, &got);
            int iok = cJSON_GetArraySize(ids) == (int)got.n;
            for (size_t i = 0; iok && i < got.n; i++) iok = (uint32_t)cJSON_GetArrayItem(ids, (int)i)->valuedouble == got.ids[i];
            CHECK(iok, "%s case %d: ids differ", t, ci);
            idss += iok;
            cJSON *mask = cJSON_GetObjectItem(rec, "mask");
            if (mask && iok) {
                int mok = mask_matches(tk, &got, &res, mask);
                CHECK(mok, "%s case %d: assistant mask differs from return_assistant_tokens_mask", t, ci);
                masks += mok;
                packmasks += pack_path(&pk, tpl, lim, special, &cases[ci], &got, mask, t, ci);
            }
            zt_ids_free(&got);
        }
        cJSON *r35 = NULL;
        for (cJSON *r = q35->child; r && !r35; r = r->next)
            if (!strcmp(cJSON_GetObjectItem(r, "t")->valuestring, t) && cJSON_GetObjectItem(r, "c")->valueint == ci) r35 = r;
        if (r35) want35++;
        if (r35 && ok && enc35) {
            cJSON *ids5 = cJSON_GetObjectItem(r35, "ids"), *mask5 = cJSON_GetObjectItem(r35, "mask");
            zt_ids got = {0};
            zt_encode(enc35, res.text, res.n, &got);
            int iok = cJSON_GetArraySize(ids5) == (int)got.n;
            for (size_t i = 0; iok && i < got.n; i++) iok = (uint32_t)cJSON_GetArrayItem(ids5, (int)i)->valuedouble == got.ids[i];
            CHECK(iok, "%s case %d: Qwen3.5 ids differ", t, ci);
            ids35 += iok;
            if (mask5 && iok) {
                int mok = mask_matches(tk35, &got, &res, mask5);
                CHECK(mok, "%s case %d: Qwen3.5 assistant mask differs from return_assistant_tokens_mask", t, ci);
                masks35 += mok;
            }
            zt_ids_free(&got);
        }
        cJSON_Delete(rec);
    }
    printf("Qwen3.5 tokenizer on the qwen3_5/qwen3_6/qwen3_8 templates: %d renders, ids equal %d, masks equal %d\n",
           want35, ids35, masks35);
    if (!only) CHECK(want35 == cJSON_GetArraySize(q35) && want35 > 0, "%d Qwen3.5 records, %d met", cJSON_GetArraySize(q35), want35);
    printf("templates x conversations compared: %d (texts equal %d, raise_exception equal %d, other errors raised "
           "by both %d (same message %d), generation spans equal %d, ids equal %d, masks equal %d (pack's path %d), templates refused %d)\n",
           renders, texts, raised, errors, errors_same, spans, idss, masks, packmasks, tfail);
    zt_chat_jinja_scratch_free(&pk.sc);
    zt_chat_free(&pk.chat);
    zt_chat_tokens_free(&pk.tok);
    CHECK(renders > 0, "nothing compared");
    if (!only) {
        fastpath_check(ZT_GOLDEN_DIR "/chat/conversations.jsonl", 0, ZT_CHAT_FORMAT_MESSAGES);
        fastpath_check(ZT_GOLDEN_DIR "/chat_tools/messages.jsonl.gz", 1, ZT_CHAT_FORMAT_MESSAGES);
        fastpath_check(ZT_GOLDEN_DIR "/chat_tools/openai.jsonl.gz", 1, ZT_CHAT_FORMAT_OPENAI);
        fastpath_check(ZT_GOLDEN_DIR "/chat_tools/sharegpt.jsonl.gz", 1, ZT_CHAT_FORMAT_SHAREGPT);
    }
    zt_jinja_free(tpl);
    zt_jinja_result_free(&res);
    zt_jinja_vars_free(vars);
    if (enc) zt_encoder_free(enc);
    if (tk) zt_tokenizer_free(tk);
    if (enc35) zt_encoder_free(enc35);
    if (tk35) zt_tokenizer_free(tk35);
    cJSON_Delete(q35);
    free(gold35);
    free(corpus), free(gold);
    TEST_END();
}
