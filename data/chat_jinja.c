// A conversation line through a Jinja chat template (data/chat_jinja.h): the variables a
// tokenizer passes, the line's messages/tools as transformers hands them over, and the trained
// spans from {% generation %} blocks.
#include "data/chat_jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "data/chat_internal.h"

static void add_var(zt_chat_jinja *cj, const char *name, const char *val, size_t n) {
    cj->vars = realloc(cj->vars, (size_t)(cj->nvars + 1) * sizeof *cj->vars);
    if (!cj->vars) zt_fatal("out of memory (template variables)");
    size_t ln = strlen(name);
    char *s = zt_xmalloc(ln + n + 2);
    memcpy(s, name, ln), s[ln] = '=', memcpy(s + ln + 1, val, n), s[ln + 1 + n] = 0;
    cj->vars[cj->nvars++] = s;
}

// the special tokens of tokenizer_config.json, as JSON strings (so that "true" stays a string)
static int special_tokens(zt_chat_jinja *cj, const char *cfgpath) {
    size_t len;
    char *txt = cfgpath ? zt_read_file(cfgpath, &len) : NULL;
    if (!txt) { zt_err_clear(); return 0; }
    cJSON *cfg = cJSON_Parse(txt);
    free(txt);
    if (!cfg) return zt_err("%s: not valid JSON", cfgpath);
    static const char *names[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
    for (int i = 0; i < 7; i++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, names[i]);
        if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (!cJSON_IsString(v)) continue;
        char *js = cJSON_PrintUnformatted(v);
        add_var(cj, names[i], js, strlen(js));
        free(js);
    }
    cJSON_Delete(cfg);
    return 0;
}

static char *template_text(const char *path, size_t *n) {
    char *txt = zt_read_file(path, n);
    if (!txt) return NULL;
    size_t pl = strlen(path);
    if (pl < 5 || strcmp(path + pl - 5, ".json")) return txt;
    cJSON *cfg = cJSON_Parse(txt);
    free(txt);
    if (!cfg) return zt_err("%s: not valid JSON", path), NULL;
    cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template"), *pick = NULL;
    if (cJSON_IsArray(t))
        for (cJSON *e = t->child; e; e = e->next)
            if (cJSON_IsString(cJSON_GetObjectItem(e, "name")) && !strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "default"))
                pick = cJSON_GetObjectItem(e, "template");
    if (cJSON_IsString(t)) pick = t;
    char *r = cJSON_IsString(pick) ? strdup(pick->valuestring) : NULL;
    cJSON_Delete(cfg);
    if (!r) return zt_err("%s: no \"chat_template\" string (or list entry named \"default\")", path), NULL;
    *n = strlen(r);
    return r;
}

// --template-var: NAME=VALUE items split at commas followed by NAME=
static int parse_vars(zt_chat_jinja *cj, const char *spec) {
    const char *p = spec;
    while (p && *p) {
        const char *eq = strchr(p, '=');
        if (!eq || eq == p) return zt_err("--template-var: expected NAME=VALUE, got \"%s\"", p);
        for (const char *q = p; q < eq; q++)
            if (!(*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (q > p && *q >= '0' && *q <= '9')))
                return zt_err("--template-var: \"%.*s\" is not a variable name", (int)(eq - p), p);
        const char *end = eq + 1, *next = NULL;
        for (; *end; end++) {
            if (*end != ',') continue;
            const char *q = end + 1;
            while (*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')) q++;
            if (q > end + 1 && *q == '=') { next = end + 1; break; }
        }
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
        add_var(cj, name, eq + 1, (size_t)(end - eq - 1));
        p = next;
    }
    return 0;
}

int zt_chat_jinja_load(zt_chat_jinja *cj, const char *path, const char *cfgpath, const char *vars) {
    memset(cj, 0, sizeof *cj);
    size_t n;
    char *src = template_text(path, &n);
    if (!src) return -1;
    cj->crc = zt_crc32c(0, src, n);
    cj->tpl = zt_jinja_parse(src, n, path);
    free(src);
    if (!cj->tpl) return -1;
    const char *base = strrchr(path, '/');
    snprintf(cj->name, sizeof cj->name, "jinja %s crc32c:%08x", base ? base + 1 : path, cj->crc);
    if (special_tokens(cj, cfgpath)) return zt_chat_jinja_free(cj), -1;
    add_var(cj, "add_generation_prompt", "false", 5);
    // strftime_now's clock: SOURCE_DATE_EPOCH (the reproducible-builds convention) when set, so
    // that a template printing today's date packs the same data on every run
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    if (epoch && *epoch) {
        char *end;
        long long t = strtoll(epoch, &end, 10);
        if (*end || t <= 0) return zt_chat_jinja_free(cj), zt_err("SOURCE_DATE_EPOCH=%s: not a positive integer", epoch);
        cj->lim.now = t;
    }
    if (parse_vars(cj, vars)) return zt_chat_jinja_free(cj), -1;
    return 0;
}

int zt_chat_template_of_dir(const char *dir, uint32_t *crc, char *path, size_t pathsz) {
    struct stat st;
    snprintf(path, pathsz, "%s/chat_template.jinja", dir);
    if (stat(path, &st) != 0) {
        snprintf(path, pathsz, "%s/tokenizer_config.json", dir);
        if (stat(path, &st) != 0) return 0;
        size_t len;
        char *txt = zt_read_file(path, &len);
        if (!txt) return -1;
        cJSON *cfg = cJSON_Parse(txt);
        free(txt);
        const int has = cfg && cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") &&
                        !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cfg, "chat_template"));
        cJSON_Delete(cfg);
        if (!has) return 0;  // not JSON is tokenizer.json's loader's to report, no template is none
    }
    size_t n;
    char *src = template_text(path, &n);
    if (!src) return -1;
    *crc = zt_crc32c(0, src, n);
    free(src);
    return 1;
}

void zt_chat_jinja_free(zt_chat_jinja *cj) {
    zt_jinja_free(cj->tpl);
    for (int i = 0; i < cj->nvars; i++) free(cj->vars[i]);
    free(cj->vars);
    memset(cj, 0, sizeof *cj);
}

void zt_chat_jinja_scratch_free(zt_chat_jinja_scratch *s) {
    zt_jinja_vars_free(s->vars);
    free(s->line.p);
    zt_jinja_result_free(&s->res);
    free(s->prompt.p);
    memset(s, 0, sizeof *s);
}

// Spans in order; an empty one is kept where it is not inside or at the end of the one before:
// transformers marks a token that straddles it (zt_chat_tokenize walks spans the same way).
static void add_span(zt_chat *out, size_t b, size_t e) {
    if (b > e) return;
    if (out->nspans && b <= out->spans[out->nspans - 1].end) {  // overlapping or touching: one span
        if (e > out->spans[out->nspans - 1].end) out->spans[out->nspans - 1].end = e;
        return;
    }
    if (out->nspans == out->spans_cap) {
        out->spans_cap = out->spans_cap ? 2 * out->spans_cap : 8;
        out->spans = realloc(out->spans, out->spans_cap * sizeof *out->spans);
        if (!out->spans) zt_fatal("out of memory (trained spans)");
    }
    out->spans[out->nspans].begin = b, out->spans[out->nspans].end = e;
    out->nspans++;
}

static void json_text(zt_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    zt_buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') zt_buf_append(b, "\\", 1), zt_buf_append(b, s + i, 1);
        else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            zt_buf_append(b, e, 6);
        } else zt_buf_append(b, s + i, 1);
    }
    zt_buf_append(b, "\"", 1);
}

// A conversation read by chat_read.c (OpenAI, ShareGPT) as the messages line transformers would
// be given: {"messages": [{"role", "content", "reasoning_content"?, "tool_calls"?}], "tools"?}.
// Tool-call arguments and tools that are JSON values go through zt_pyjson_dumps, which writes each
// number as its literal was (1 and 1.0 stay apart). 0, or -1 + zt_err.
#define PUT(b, lit) zt_buf_append((b), (lit), sizeof(lit) - 1)
static int conv_line(const zt_chat_conv *cv, zt_buf *b) {
    zt_pyjson_numbers nums = {.cv = cv};
    int rc = 0;
    b->n = 0;
    PUT(b, "{\"messages\": [");
    for (int i = 0; i < cv->nmsgs && !rc; i++) {
        const zt_chat_msg *m = &cv->msgs[i];
        if (i) PUT(b, ", ");
        PUT(b, "{\"role\": ");
        json_text(b, zt_chat_role_names[m->role], strlen(zt_chat_role_names[m->role]));
        PUT(b, ", \"content\": ");
        json_text(b, m->content, m->content_len);
        if (m->reasoning) {
            PUT(b, ", \"reasoning_content\": ");
            json_text(b, m->reasoning, m->reasoning_len);
        }
        if (m->ncalls) PUT(b, ", \"tool_calls\": [");
        for (int k = 0; k < m->ncalls && !rc; k++) {
            const zt_chat_call *c = &cv->calls[m->call0 + k];
            if (k) PUT(b, ", ");
            PUT(b, "{\"type\": \"function\", \"function\": {\"name\": ");
            json_text(b, c->name, c->name_len);
            PUT(b, ", \"arguments\": ");
            if (cJSON_IsString(c->args)) json_text(b, c->args->valuestring, strlen(c->args->valuestring));
            else rc = zt_pyjson_dumps(&nums, c->args, c->where, b);
            PUT(b, "}}");
        }
        if (m->ncalls) PUT(b, "]");
        PUT(b, "}");
    }
    PUT(b, "]");
    if (cv->ntools) PUT(b, ", \"tools\": [");
    for (int i = 0; i < cv->ntools && !rc; i++) {
        if (i) PUT(b, ", ");
        rc = zt_pyjson_dumps(&nums, cv->tools[i], "tools", b);
    }
    if (cv->ntools) PUT(b, "]");
    PUT(b, "}");
    free(nums.refs);
    return rc;
}

static int weight_member(const cJSON *root, const char *field) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, field);
    int i = 0;
    for (const cJSON *e = m ? m->child : NULL; e; e = e->next, i++)
        if (cJSON_GetObjectItemCaseSensitive(e, "weight")) return i;
    return -1;
}

// One rendering of the line into sc->res: its first k messages (SIZE_MAX: all), with
// add_generation_prompt set to agp (-1: as the variables say). The vars are set afresh each time
// (a template's top-level {% set %} must not reach the next rendering). With turns non-NULL, the
// indices of the assistant messages (rule last: the final one) into a malloc'd *turns.
static int render_with(const zt_chat_jinja *cj, const char *json, size_t n, const char *fname, size_t k, int agp,
                       zt_chat_train rule, zt_chat_jinja_scratch *sc, size_t **turns, size_t *nturns) {
    if (!sc->vars) sc->vars = zt_jinja_vars_new();
    zt_jinja_vars_reset(sc->vars);
    if (zt_jinja_set_line(sc->vars, json, n, fname)) return -1;
    for (int i = 0; i < cj->nvars; i++)
        if (zt_jinja_set_arg(sc->vars, cj->vars[i])) return -1;
    if (agp >= 0 && zt_jinja_set_arg(sc->vars, agp ? "add_generation_prompt=true" : "add_generation_prompt=false"))
        return -1;
    if (turns) {
        const size_t m = zt_jinja_messages_count(sc->vars);
        *turns = zt_xmalloc((m + 1) * sizeof **turns);
        *nturns = 0;
        for (size_t i = 0; i < m; i++)
            if (zt_jinja_message_role_is(sc->vars, i, "assistant")) {
                if (rule == ZT_CHAT_TRAIN_LAST) *nturns = 0;
                (*turns)[(*nturns)++] = i;
            }
    }
    if (k != SIZE_MAX) zt_jinja_messages_prefix(sc->vars, k);
    int st = zt_jinja_render(cj->tpl, sc->vars, &cj->lim, &sc->res);
    if (st == ZT_JINJA_RAISED) return zt_err("the template raised: %s", sc->res.msg);
    if (st != ZT_JINJA_OK) return zt_err("the template failed at its line %d: %s", sc->res.line, sc->res.msg);
    return 0;
}

// Prefix mode (zt_chat_render_jinja): each turn's [len P, len F) into out->spans; out->text is
// the whole conversation's rendering.
static int prefix_spans(const zt_chat_jinja *cj, const char *json, size_t n, const char *fname, zt_chat_train rule,
                        zt_chat_jinja_scratch *sc, const size_t *turns, size_t nturns, zt_chat *out) {
    const char *rn = zt_chat_train_name(rule);
    if (!nturns)
        return zt_err("no assistant message: nothing to train under --train-on %s", rn);
    for (size_t t = 0; t < nturns; t++) {
        const size_t i = turns[t];
        if (i == 0)
            return zt_err("message 0 is the assistant's: there is no prompt before it to render, so --train-on %s "
                          "cannot find its text without {%% generation %%} blocks", rn);
        char why[1200];
        if (render_with(cj, json, n, fname, i, 1, rule, sc, NULL, NULL)) {
            snprintf(why, sizeof why, "%s", zt_errmsg());
            return zt_err("%s (rendering messages[:%zu] with the generation prompt, to find message %zu's text for "
                          "--train-on %s)", why, i, i, rn);
        }
        sc->prompt.n = 0;
        zt_buf_append(&sc->prompt, sc->res.text, sc->res.n);
        if (render_with(cj, json, n, fname, i + 1, 0, rule, sc, NULL, NULL)) {
            snprintf(why, sizeof why, "%s", zt_errmsg());
            return zt_err("%s (rendering messages[:%zu], to find message %zu's text for --train-on %s)", why, i + 1, i,
                          rn);
        }
        const char *which = NULL;
        size_t at = 0;
        if (sc->prompt.n > sc->res.n || memcmp(sc->prompt.p, sc->res.text, sc->prompt.n)) which = "with the generation prompt";
        else if (sc->res.n > out->text.n || memcmp(sc->res.text, out->text.p, sc->res.n)) which = "";
        if (which) {
            const char *a = *which ? sc->prompt.p : sc->res.text, *b = *which ? sc->res.text : out->text.p;
            const size_t an = *which ? sc->prompt.n : sc->res.n, bn = *which ? sc->res.n : out->text.n;
            while (at < an && at < bn && a[at] == b[at]) at++;
            return zt_err("the template's rendering of messages[:%zu]%s%s is not a prefix of its rendering of %s "
                          "(they differ at byte %zu), so --train-on %s cannot find message %zu's text\n  hint: a "
                          "template with {%% generation %%} blocks (trl's *_training.jinja) or --train-on %s",
                          *which ? i : i + 1, *which ? " " : "", which, *which ? "the next one" : "the whole conversation",
                          at, rn, i, rule == ZT_CHAT_TRAIN_LAST ? "all" : "last or all");
        }
        add_span(out, sc->prompt.n, sc->res.n);
    }
    return 0;
}

int zt_chat_render_jinja(const zt_chat_jinja *cj, const cJSON *root, zt_chat_format fmt, const char *json, size_t n,
                         const char *field, zt_chat_train rule, zt_chat_jinja_scratch *sc, zt_chat *out) {
    out->text.n = 0, out->nspans = 0, out->nmessages = out->ntools = out->weight0 = 0;
    const char *fname = field && *field ? field : zt_chat_format_field(fmt);
    if (fmt == ZT_CHAT_FORMAT_OPENAI || fmt == ZT_CHAT_FORMAT_SHAREGPT) {  // the messages chat_read.c reaches
        if (zt_chat_read(root, field, fmt, json, n, &out->conv)) return -1;
        for (int i = 0; i < out->conv.nmsgs; i++)
            if (!out->conv.msgs[i].weight)
                return zt_err("%s: \"weight\" is not supported with a Jinja chat template (--chat-template); mark "
                              "trained turns with {%% generation %%} blocks instead", out->conv.msgs[i].where);
        if (conv_line(&out->conv, &sc->line)) return -1;
        json = sc->line.p, n = sc->line.n, fname = "messages";
    } else {
        int w = root ? weight_member(root, fname) : -1;
        if (w >= 0)
            return zt_err("%s[%d]: \"weight\" is not supported with a Jinja chat template (--chat-template); mark "
                          "trained turns with {%% generation %%} blocks instead", fname, w);
    }
    size_t turns_n = 0, *turns = NULL;
    if (render_with(cj, json, n, fname, SIZE_MAX, -1, rule, sc, &turns, &turns_n)) {
        free(turns);
        return -1;
    }
    zt_buf_append(&out->text, sc->res.text, sc->res.n);
    if (rule == ZT_CHAT_TRAIN_ALL) {
        free(turns);
        add_span(out, 0, sc->res.n);
        return 0;
    }
    if (!zt_jinja_has_generation(cj->tpl)) {
        const int rc = prefix_spans(cj, json, n, fname, rule, sc, turns, turns_n, out);
        free(turns);
        return rc;
    }
    free(turns);
    for (size_t i = 0; i < sc->res.nspans; i++) {
        if (rule == ZT_CHAT_TRAIN_LAST && i + 1 < sc->res.nspans) continue;
        add_span(out, sc->res.spans[i][0], sc->res.spans[i][1]);
    }
    if (!out->nspans)
        return zt_err("the template marked no {%% generation %%} text in this conversation: nothing to train under "
                      "--train-on %s", zt_chat_train_name(rule));
    return 0;
}
