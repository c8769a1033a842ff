// Reads a chat line in its input format -- messages, OpenAI's fine-tuning JSONL or LLaMA-Factory's
// ShareGPT -- into the template's view of a conversation (zt_chat_conv, data/chat.h): each reader
// checks its format's rules and names the member and the rule of the first one broken.
// defines: zt_chat_read, zt_chat_detect, zt_chat_format_name/parse/field, zt_chat_conv_reset/free,
//          zt_chat_role_names
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_util.h"
#include "base/common.h"
#include "data/chat_internal.h"

// ---- input formats ------------------------------------------------------------------------
// The three formats of a line (messages, OpenAI's fine-tuning JSONL, LLaMA-Factory's ShareGPT)
// read into the template's view of a conversation (zt_chat_conv): each reader checks its
// format's rules and names the member and the rule of the first one broken; the renderer
// (data/chat_template.c) never sees a format.
const char *const zt_chat_role_names[4] = {"system", "user", "assistant", "tool"};
static const char *const format_names[] = {"auto", "messages", "openai", "sharegpt"};

const char *zt_chat_format_name(zt_chat_format f) {
    return f >= ZT_CHAT_FORMAT_AUTO && f <= ZT_CHAT_FORMAT_SHAREGPT ? format_names[f] : "?";
}

int zt_chat_format_parse(const char *s, zt_chat_format *f) {
    for (int k = 0; k < 4; k++)
        if (!strcmp(s, format_names[k])) {
            *f = (zt_chat_format)k;
            return 0;
        }
    return -1;
}

const char *zt_chat_format_field(zt_chat_format f) {
    return f == ZT_CHAT_FORMAT_SHAREGPT ? "conversations" : "messages";
}

// ---- the conversation's storage ----------------------------------------------------------
static void *grow(void *p, int *cap, int need, size_t size) {
    if (need <= *cap) return p;
    int c = *cap ? 2 * *cap : 16;
    while (c < need) c *= 2;
    p = realloc(p, (size_t)c * size);
    if (!p) zt_fatal("out of host memory for a conversation of %d items", c);
    *cap = c;
    return p;
}

static zt_chat_msg *new_msg(zt_chat_conv *cv, int role, int index, const char *where) {
    cv->msgs = grow(cv->msgs, &cv->msgs_cap, cv->nmsgs + 1, sizeof *cv->msgs);
    zt_chat_msg *m = &cv->msgs[cv->nmsgs++];
    memset(m, 0, sizeof *m);
    m->role = role;
    m->index = index;
    m->weight = 1;
    m->content = "";
    m->call0 = cv->ncalls;
    snprintf(m->where, sizeof m->where, "%s", where);
    return m;
}

static zt_chat_call *new_call(zt_chat_conv *cv, zt_chat_msg *m) {
    cv->calls = grow(cv->calls, &cv->calls_cap, cv->ncalls + 1, sizeof *cv->calls);
    zt_chat_call *c = &cv->calls[cv->ncalls++];
    memset(c, 0, sizeof *c);
    m->ncalls++;
    return c;
}

static void add_json(zt_chat_conv *cv, const cJSON *root, const char *text, size_t len) {
    cv->json = grow(cv->json, &cv->json_cap, cv->njson + 1, sizeof *cv->json);
    cv->json[cv->njson++] = (struct zt_chat_json){root, text, len};
}

void zt_chat_conv_reset(zt_chat_conv *cv) {
    for (int i = 0; i < cv->nowned; i++) cJSON_Delete(cv->owned[i]);
    cv->nowned = cv->nmsgs = cv->ncalls = cv->ntools = cv->njson = 0;
    cv->weight0 = 0;
    cv->format = ZT_CHAT_FORMAT_AUTO;
}

void zt_chat_conv_free(zt_chat_conv *cv) {
    zt_chat_conv_reset(cv);
    free(cv->msgs);
    free(cv->calls);
    free(cv->tools);
    free(cv->json);
    free(cv->owned);
    memset(cv, 0, sizeof *cv);
}

// ---- reading helpers ----------------------------------------------------------------------
// obj[key] into *out (NULL when absent). Python's json keeps the last of duplicate keys,
// cJSON's lookup the first: a duplicate is refused rather than read differently.
static int member(const cJSON *obj, const char *key, const char *where, const cJSON **out) {
    *out = NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        if (!it->string || strcmp(it->string, key)) continue;
        if (*out) return zt_err("%s: duplicate \"%s\" member", where, key);
        *out = it;
    }
    return 0;
}


static const cJSON *get(const cJSON *obj, const char *key) {
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

// The names of obj's members, for "no such member" errors.
static void member_names(const cJSON *obj, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        int w = snprintf(buf + k, len - k, "%s\"%s\"", k ? ", " : "", it->string);
        if (w < 0 || (size_t)w >= len - k) break;
        k += (size_t)w;
    }
    if (!k) snprintf(buf, len, "none");
}

// JSON text held in a string (ShareGPT's "tools" and function_call values), parsed under the
// rules a line is read with (Python's json.loads, strict): no raw control character inside a
// string, no malformed escape, no \u0000 (cJSON's strings end at NUL), one value and nothing
// after it. The tree is kept (cv->owned) and its text listed for number literals.
static int parse_nested(zt_chat_conv *cv, const char *s, size_t n, const char *where, const char *what,
                        cJSON **out) {
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (!in_str) {
            if (c == '"') in_str = 1;
            else if (c < 0x20 && c != ' ' && c != '\t' && c != '\r' && c != '\n')
                return zt_err("%s: raw control character 0x%02x at column %zu of the string (%s)", where, c, i + 1,
                              what);
            continue;
        }
        if (c == '"') {
            in_str = 0;
        } else if (c < 0x20) {
            return zt_err("%s: raw control character 0x%02x inside a JSON string at column %zu of the string (%s; "
                          "JSON requires it escaped)",
                          where, c, i + 1, what);
        } else if (c == '\\') {
            const char e = i + 1 < n ? s[i + 1] : 0;
            int ok = e && strchr("\"\\/bfnrtu", e) != NULL;
            if (ok && e == 'u')
                for (size_t k = i + 2; k < i + 6; k++) ok &= k < n && isxdigit((unsigned char)s[k]);
            if (!ok) return zt_err("%s: malformed escape at column %zu of the string (%s)", where, i + 1, what);
            if (e == 'u' && !memcmp(s + i + 2, "0000", 4))
                return zt_err("%s: \\u0000 at column %zu of the string: NUL characters are not supported (%s)", where,
                              i + 1, what);
            i += e == 'u' ? 5 : 1;
        }
    }
    const char *end = NULL;
    cJSON *t = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (!t) {
        const size_t col = end && end >= s ? (size_t)(end - s) + 1 : 1;
        char deep[160];
        if (zt_json_depth_error(s, n, col, deep, sizeof deep)) return zt_err("%s: %s (%s)", where, deep, what);
        return zt_err("%s: not valid JSON at column %zu of the string (%s)", where, col, what);
    }
    for (const char *p = end; p && p < s + n; p++)
        if (!isspace((unsigned char)*p)) {
            cJSON_Delete(t);
            return zt_err("%s: text after the JSON value at column %zu of the string (%s)", where,
                          (size_t)(p - s) + 1, what);
        }
    cv->owned = grow(cv->owned, &cv->owned_cap, cv->nowned + 1, sizeof *cv->owned);
    cv->owned[cv->nowned++] = t;
    add_json(cv, t, s, n);
    *out = t;
    return 0;
}

// "weight": absent 1; else the number 0 or 1 on an assistant turn (OpenAI's rule).
static int read_weight(const cJSON *m, int assistant, const char *where, int *weight) {
    const cJSON *w;
    if (member(m, "weight", where, &w)) return -1;
    *weight = 1;
    if (!w) return 0;
    if (!assistant)
        return zt_err("%s: \"weight\" applies to assistant turns only (it says whether the turn is trained)", where);
    if (!cJSON_IsNumber(w) || (w->valuedouble != 0 && w->valuedouble != 1))
        return zt_err("%s: weight is %s, not 0 or 1 (0: the turn is not trained, 1: it is)", where,
                      cJSON_IsNumber(w) ? "another number" : zt_json_type_name(w));
    *weight = w->valuedouble == 1;
    return 0;
}

// The tools: an array of JSON schemas, each {"type": "function", "function": {"name", ...}}
// (OpenAI style) or {"name", "description", "parameters"} (bare; not in OpenAI's format), each
// rendered through tojson as it is. Null, absent or [] : no tools (the template's `if tools`).
static int read_tools(zt_chat_conv *cv, const cJSON *tools, const char *what, int openai) {
    if (!tools || cJSON_IsNull(tools)) return 0;
    if (!cJSON_IsArray(tools))
        return zt_err("%s is %s, not an array of tool schemas", what, zt_json_type_name(tools));
    int k = 0;
    for (const cJSON *t = tools->child; t; t = t->next, k++) {
        char where[64];
        snprintf(where, sizeof where, "tools[%d]", k);
        static const char shape[] = "a tool is {\"type\": \"function\", \"function\": {\"name\", \"description\", "
                                    "\"parameters\"}} or, outside --format openai, {\"name\", \"description\", "
                                    "\"parameters\"}";
        if (!cJSON_IsObject(t)) return zt_err("%s is %s, not an object (%s)", where, zt_json_type_name(t), shape);
        const cJSON *type, *fn, *name, *fname = NULL;
        if (member(t, "type", where, &type) || member(t, "function", where, &fn) || member(t, "name", where, &name))
            return -1;
        if (type || fn) {
            if (!type) return zt_err("%s: a \"function\" member without \"type\": \"function\" (%s)", where, shape);
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
                return zt_err("%s: type is %s%s%s, not \"function\" (%s)", where,
                              cJSON_IsString(type) ? "\"" : zt_json_type_name(type),
                              cJSON_IsString(type) ? type->valuestring : "", cJSON_IsString(type) ? "\"" : "", shape);
            if (!fn) return zt_err("%s: no \"function\" member (%s)", where, shape);
            if (!cJSON_IsObject(fn))
                return zt_err("%s: function is %s, not an object (%s)", where, zt_json_type_name(fn), shape);
            char w2[80];
            snprintf(w2, sizeof w2, "%s.function", where);
            if (member(fn, "name", w2, &fname)) return -1;
            if (!fname) return zt_err("%s: no \"name\" member (%s)", w2, shape);
            const char *s;
            size_t n;
            if (zt_pyjson_str_view(fname, w2, "name", &s, &n)) return -1;
        } else {
            if (openai)
                return zt_err("%s: a bare schema (no \"type\": \"function\"); OpenAI's format wraps each tool as "
                              "{\"type\": \"function\", \"function\": {...}} (--format messages takes bare ones)",
                              where);
            if (!name) return zt_err("%s: no \"name\" member (%s)", where, shape);
            const char *s;
            size_t n;
            if (zt_pyjson_str_view(name, where, "name", &s, &n)) return -1;
        }
        cv->tools = grow(cv->tools, &cv->tools_cap, cv->ntools + 1, sizeof *cv->tools);
        cv->tools[cv->ntools++] = t;
    }
    return 0;
}

// ---- messages and openai ---------------------------------------------------------------
// The tool calls of an assistant message: {"function": {"name", "arguments"}} or {"name",
// "arguments"} (messages); {"id", "type": "function", "function": {"name", "arguments": a JSON
// string}} (openai). ids collects the call ids (openai) for the tool messages after it.
static int read_calls(zt_chat_conv *cv, zt_chat_msg *m, const cJSON *calls, int openai, const cJSON ***ids,
                      int *nids, int *ids_cap) {
    char where[112];
    if (!calls || cJSON_IsNull(calls)) return 0;
    if (!cJSON_IsArray(calls)) return zt_err("%s: tool_calls is %s, not an array", m->where, zt_json_type_name(calls));
    int k = 0;
    for (const cJSON *tc = calls->child; tc; tc = tc->next, k++) {
        snprintf(where, sizeof where, "%s: tool_calls[%d]", m->where, k);
        if (!cJSON_IsObject(tc)) return zt_err("%s is %s, not an object", where, zt_json_type_name(tc));
        const cJSON *fn, *call = tc, *name, *args;
        if (member(tc, "function", where, &fn)) return -1;
        if (openai) {
            const cJSON *id, *type;
            static const char shape[] = "OpenAI's format: {\"id\", \"type\": \"function\", \"function\": {\"name\", "
                                        "\"arguments\": a JSON string}}";
            if (member(tc, "id", where, &id) || member(tc, "type", where, &type)) return -1;
            if (!id) return zt_err("%s: no \"id\" member (%s)", where, shape);
            const char *s;
            size_t n;
            if (zt_pyjson_str_view(id, where, "id", &s, &n)) return -1;
            if (!type) return zt_err("%s: no \"type\" member (%s)", where, shape);
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
                return zt_err("%s: type is not \"function\" (%s)", where, shape);
            if (!fn || !cJSON_IsObject(fn))
                return zt_err("%s: function is %s, not an object (%s)", where, fn ? zt_json_type_name(fn) : "missing",
                              shape);
            *ids = (const cJSON **)grow((void *)*ids, ids_cap, *nids + 1, sizeof **ids);
            (*ids)[(*nids)++] = id;
        }
        if (fn && !cJSON_IsNull(fn)) {
            if (!cJSON_IsObject(fn)) return zt_err("%s: function is %s, not an object", where, zt_json_type_name(fn));
            if (!fn->child) return zt_err("%s: function is an empty object", where);
            call = fn;
            snprintf(where, sizeof where, "%s: tool_calls[%d].function", m->where, k);
        }
        if (member(call, "name", where, &name) || member(call, "arguments", where, &args)) return -1;
        if (!name) return zt_err("%s: no \"name\" member", where);
        zt_chat_call *c = new_call(cv, m);
        snprintf(c->where, sizeof c->where, "%s", where);
        if (zt_pyjson_str_view(name, where, "name", &c->name, &c->name_len)) return -1;
        if (!args) return zt_err("%s: no \"arguments\" member", where);
        if (openai && !cJSON_IsString(args))
            return zt_err("%s: arguments is %s, not a string (OpenAI's format gives the arguments as a JSON string; "
                          "--format messages takes a JSON value)",
                          where, zt_json_type_name(args));
        if (cJSON_IsString(args)) {
            const char *s;
            size_t n;
            if (zt_pyjson_str_view(args, where, "arguments", &s, &n)) return -1;
        }
        c->args = args;
    }
    return 0;
}

// Reasoning as transformers fills reasoning_content: the first non-null of these names.
static int read_reasoning(const cJSON *msg, zt_chat_msg *m) {
    static const char *const names[] = {"reasoning_content", "thinking", "reasoning"};
    for (int k = 0; k < 3; k++) {
        const cJSON *x;
        if (member(msg, names[k], m->where, &x)) return -1;
        if (x && !cJSON_IsNull(x)) return zt_pyjson_str_view(x, m->where, names[k], &m->reasoning, &m->reasoning_len);
    }
    return 0;
}

static int read_role_messages(zt_chat_conv *cv, const cJSON *root, const char *field, int openai) {
    const cJSON *msgs, *tools;
    if (member(root, field, "the line", &msgs)) return -1;
    if (!msgs) {
        char names[256];
        member_names(root, names, sizeof names);
        return zt_err("no \"%s\" member (the object has %s; choose one with --field)", field, names);
    }
    if (!cJSON_IsArray(msgs))
        return zt_err("member \"%s\" is %s, not an array of messages", field, zt_json_type_name(msgs));
    if (!msgs->child)
        return zt_err("member \"%s\" is an empty array: a conversation needs at least one message", field);
    if (member(root, "tools", "the line", &tools) || read_tools(cv, tools, "tools", openai)) return -1;
    if (openai) {
        const cJSON *legacy;
        if (member(root, "functions", "the line", &legacy)) return -1;
        if (legacy)
            return zt_err("\"functions\" (OpenAI's legacy form of tools) is not supported: give \"tools\": "
                          "[{\"type\": \"function\", \"function\": {...}}] and tool_calls");
    }
    const cJSON **ids = NULL;  // openai: the call ids of the last assistant turn with tool calls
    int nids = 0, ids_cap = 0, rc = 0, i = 0;
    for (const cJSON *msg = msgs->child; msg && rc == 0; msg = msg->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "messages[%d]", i);
        if (!cJSON_IsObject(msg)) {
            rc = zt_err("%s is %s, not an object with \"role\" and \"content\"", where, zt_json_type_name(msg));
            break;
        }
        const cJSON *role, *content, *calls = NULL;
        if ((rc = member(msg, "role", where, &role))) break;
        if (!role) {
            rc = zt_err("%s: no \"role\" member", where);
            break;
        }
        if (!cJSON_IsString(role)) {
            rc = zt_err("%s: role is %s, not a string", where, zt_json_type_name(role));
            break;
        }
        int r = -1;
        for (int k = 0; k < 4; k++)
            if (!strcmp(role->valuestring, zt_chat_role_names[k])) r = k;
        if (r < 0) {
            if (openai && !strcmp(role->valuestring, "function"))
                rc = zt_err("%s: role \"function\" (OpenAI's legacy function calling) is not supported: give the "
                            "assistant's tool_calls and \"tool\" messages",
                            where);
            else
                rc = zt_err("%s: role \"%.40s\" is not one of system, user, assistant, tool", where,
                            role->valuestring);
            break;
        }
        snprintf(where, sizeof where, "messages[%d] (%s)", i, zt_chat_role_names[r]);
        zt_chat_msg *m = new_msg(cv, r, i, where);
        if (r == ZT_CHAT_ASSISTANT && (rc = member(msg, "tool_calls", where, &calls))) break;
        const int has_calls = cJSON_IsArray(calls) && calls->child;
        if ((rc = member(msg, "content", where, &content))) break;
        if (openai && r == ZT_CHAT_ASSISTANT && has_calls && (!content || cJSON_IsNull(content))) {
            m->content = "", m->content_len = 0;  // OpenAI's assistant turn that only calls tools
        } else if (!content) {
            rc = zt_err("%s: no \"content\" member", where);
            break;
        } else if (cJSON_IsNull(content)) {
            rc = zt_err("%s: content is null (transformers drops null members and the template then fails); give "
                        "\"\" for an empty turn%s",
                        where, !openai && has_calls ? " (--format openai reads null content beside tool_calls as \"\")"
                                                    : "");
            break;
        } else if (!cJSON_IsString(content)) {
            rc = zt_err("%s: content is %s, not a string%s", where, zt_json_type_name(content),
                        cJSON_IsArray(content) ? " (lists of content parts are not supported)" : "");
            break;
        } else if ((rc = zt_pyjson_str_view(content, where, "content", &m->content, &m->content_len))) {
            break;
        }
        if ((rc = read_weight(msg, r == ZT_CHAT_ASSISTANT, where, &m->weight))) break;
        cv->weight0 += m->weight == 0;
        if (r == ZT_CHAT_ASSISTANT) {
            if (openai) {
                const cJSON *fc;
                if ((rc = member(msg, "function_call", where, &fc))) break;
                if (fc) {
                    rc = zt_err("%s: \"function_call\" (OpenAI's legacy function calling) is not supported: give "
                                "tool_calls",
                                where);
                    break;
                }
                if (has_calls) nids = 0;
            }
            if ((rc = read_reasoning(msg, m)) || (rc = read_calls(cv, m, calls, openai, &ids, &nids, &ids_cap))) break;
        } else if (openai && r == ZT_CHAT_TOOL) {
            const cJSON *id;
            if ((rc = member(msg, "tool_call_id", where, &id))) break;
            if (!id) {
                rc = zt_err("%s: no \"tool_call_id\" member (OpenAI's format names the call a tool message answers)",
                            where);
                break;
            }
            const char *s;
            size_t n;
            if ((rc = zt_pyjson_str_view(id, where, "tool_call_id", &s, &n))) break;
            int found = 0;
            for (int k = 0; k < nids && !found; k++) found = !strcmp(ids[k]->valuestring, s);
            if (!found) {
                rc = zt_err("%s: tool_call_id \"%.60s\" is not the id of a tool call of the assistant turn before it "
                            "(%d call%s there)",
                            where, s, nids, nids == 1 ? "" : "s");
                break;
            }
        }
    }
    free(ids);
    return rc;
}

// ---- sharegpt ----------------------------------------------------------------------------
// LLaMA-Factory's reading (data/converter.py, SharegptDatasetConverter): an optional first
// "system" turn (else the top-level "system" member), then turns alternating human|observation
// and gpt|function_call, an even number of them; "tools" a JSON string or an array.
enum { SG_SYSTEM, SG_HUMAN, SG_GPT, SG_FUNCTION_CALL, SG_OBSERVATION };
static const char *const sg_names[] = {"system", "human", "gpt", "function_call", "observation"};

// A function_call value: JSON {"name", "arguments"} or a list of them, optionally after
// reasoning: a value that does not start with { or [ (after white space) holds "<think>...
// </think>" first, and the text through the first </think> becomes the turn's content, which
// the template splits off as reasoning.
static int read_function_call(zt_chat_conv *cv, zt_chat_msg *m, const char *s, size_t n) {
    static const char shape[] = "a function_call value is JSON {\"name\", \"arguments\"} or a list of them, "
                                "optionally after <think>...</think>";
    size_t lead = 0;
    while (lead < n && (s[lead] == ' ' || s[lead] == '\t' || s[lead] == '\r' || s[lead] == '\n')) lead++;
    const char *close = lead < n && s[lead] != '{' && s[lead] != '[' ? memmem(s, n, "</think>", 8) : NULL;
    if (close) {
        m->content = s, m->content_len = (size_t)(close + 8 - s);
        n -= m->content_len, s += m->content_len;
    }
    char where[96];
    snprintf(where, sizeof where, "%s: value", m->where);
    cJSON *v;
    if (parse_nested(cv, s, n, where, shape, &v)) return -1;
    const cJSON *calls = v, *one = NULL;
    if (cJSON_IsObject(v)) one = v;
    else if (!cJSON_IsArray(v) || !v->child)
        return zt_err("%s is %s (%s)", where, cJSON_IsArray(v) ? "an empty array" : zt_json_type_name(v), shape);
    int k = 0;
    for (const cJSON *tc = one ? one : calls->child; tc; tc = one ? NULL : tc->next, k++) {
        char w[112];
        if (one) snprintf(w, sizeof w, "%s", where);
        else snprintf(w, sizeof w, "%s[%d]", where, k);
        if (!cJSON_IsObject(tc)) return zt_err("%s is %s, not an object (%s)", w, zt_json_type_name(tc), shape);
        const cJSON *name, *args;
        if (member(tc, "name", w, &name) || member(tc, "arguments", w, &args)) return -1;
        if (!name) return zt_err("%s: no \"name\" member (%s)", w, shape);
        zt_chat_call *c = new_call(cv, m);
        snprintf(c->where, sizeof c->where, "%s", w);
        if (zt_pyjson_str_view(name, w, "name", &c->name, &c->name_len)) return -1;
        if (!args) return zt_err("%s: no \"arguments\" member (%s)", w, shape);
        if (cJSON_IsString(args)) {
            const char *a;
            size_t an;
            if (zt_pyjson_str_view(args, w, "arguments", &a, &an)) return -1;
        }
        c->args = args;
    }
    return 0;
}

static int read_sharegpt(zt_chat_conv *cv, const cJSON *root, const char *field) {
    const cJSON *turns, *system, *tools;
    if (member(root, field, "the line", &turns)) return -1;
    if (!turns) {
        char names[256];
        member_names(root, names, sizeof names);
        return zt_err("no \"%s\" member (the object has %s; choose one with --field)", field, names);
    }
    if (!cJSON_IsArray(turns))
        return zt_err("member \"%s\" is %s, not an array of turns", field, zt_json_type_name(turns));
    if (!turns->child) return zt_err("member \"%s\" is an empty array: a conversation needs at least one turn", field);
    if (member(root, "system", "the line", &system) || member(root, "tools", "the line", &tools)) return -1;
    if (cJSON_IsString(tools)) {  // LLaMA-Factory's column: a JSON string ("" for none)
        const char *s;
        size_t n;
        if (zt_pyjson_str_view(tools, "tools", "the string", &s, &n)) return -1;
        size_t k = 0;
        while (k < n && isspace((unsigned char)s[k])) k++;
        if (k < n) {
            cJSON *t;
            if (parse_nested(cv, s, n, "tools", "a JSON array of tool schemas", &t)) return -1;
            if (read_tools(cv, t, "tools (the JSON in the string)", 0)) return -1;
        }
    } else if (read_tools(cv, tools, "tools", 0)) {
        return -1;
    }
    int i = 0, t = 0;  // t: the turn's place after the system turn
    for (const cJSON *turn = turns->child; turn; turn = turn->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "%s[%d]", field, i);
        if (!cJSON_IsObject(turn))
            return zt_err("%s is %s, not an object with \"from\" and \"value\"", where, zt_json_type_name(turn));
        const cJSON *from, *value;
        if (member(turn, "from", where, &from) || member(turn, "value", where, &value)) return -1;
        if (!from) return zt_err("%s: no \"from\" member", where);
        if (!cJSON_IsString(from)) return zt_err("%s: from is %s, not a string", where, zt_json_type_name(from));
        int tag = -1;
        for (int k = 0; k < 5; k++)
            if (!strcmp(from->valuestring, sg_names[k])) tag = k;
        if (tag < 0)
            return zt_err("%s: from \"%.40s\" is not one of system, human, gpt, function_call, observation", where,
                          from->valuestring);
        snprintf(where, sizeof where, "%s[%d] (%s)", field, i, sg_names[tag]);
        if (!value) return zt_err("%s: no \"value\" member", where);
        const char *s;
        size_t n;
        if (zt_pyjson_str_view(value, where, "value", &s, &n)) return -1;
        if (tag == SG_SYSTEM) {
            if (i > 0)
                return zt_err("%s: a system turn is only read first (LLaMA-Factory's rule; the top-level \"system\" "
                              "member is the other place for it)",
                              where);
            zt_chat_msg *m = new_msg(cv, ZT_CHAT_SYSTEM, i, where);
            m->content = s, m->content_len = n;
            continue;
        }
        const int want_assistant = t % 2;
        if ((tag == SG_GPT || tag == SG_FUNCTION_CALL) != want_assistant)
            return zt_err("%s: a \"%s\" turn where LLaMA-Factory expects %s (after the optional system turn, turns "
                          "alternate human|observation, gpt|function_call)",
                          where, sg_names[tag], want_assistant ? "gpt or function_call" : "human or observation");
        if (t == 0 && system && !cJSON_IsNull(system)) {  // the "system" column, when no system turn came first
            const char *ss;
            size_t sn;
            if (zt_pyjson_str_view(system, "system", "the member", &ss, &sn)) return -1;
            if (cv->nmsgs == 0 && sn > 0) {
                zt_chat_msg *m = new_msg(cv, ZT_CHAT_SYSTEM, -1, "system");
                m->content = ss, m->content_len = sn;
            }
        }
        t++;
        static const int role_of[] = {ZT_CHAT_SYSTEM, ZT_CHAT_USER, ZT_CHAT_ASSISTANT, ZT_CHAT_ASSISTANT, ZT_CHAT_TOOL};
        zt_chat_msg *m = new_msg(cv, role_of[tag], i, where);
        if (read_weight(turn, m->role == ZT_CHAT_ASSISTANT, where, &m->weight)) return -1;
        cv->weight0 += m->weight == 0;
        if (tag == SG_FUNCTION_CALL) {
            if (read_function_call(cv, m, s, n)) return -1;
        } else {
            m->content = s, m->content_len = n;
        }
    }
    if (t == 0) return zt_err("member \"%s\" holds only a system turn", field);
    if (t % 2)
        return zt_err("member \"%s\" has %d turns after the system turn; LLaMA-Factory needs an even number (a "
                      "conversation ends with a gpt or function_call turn)",
                      field, t);
    return 0;
}

// ---- detection and the entry point --------------------------------------------------------
zt_chat_format zt_chat_detect(const cJSON *root, const char *field, int *decisive, const char **why) {
    const char *w = NULL;
    int sure = 0;
    zt_chat_format f = ZT_CHAT_FORMAT_AUTO;
    const cJSON *arr = NULL;
    if (field && field[0]) arr = get(root, field);
    else if (!(arr = get(root, "messages"))) arr = get(root, "conversations");
    if (cJSON_IsArray(arr)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
            if (get(e, "role")) {
                f = ZT_CHAT_FORMAT_MESSAGES, w = "\"role\" messages";
                break;
            }
            if (get(e, "from") || get(e, "value")) {
                f = ZT_CHAT_FORMAT_SHAREGPT, w = "turns of \"from\" and \"value\"", sure = 1;
                break;
            }
        }
    }
    // role messages: a member only one of the two formats has decides; the first such wins
    const cJSON *tools = get(root, "tools"), *t;
    for (t = f == ZT_CHAT_FORMAT_MESSAGES && cJSON_IsArray(tools) ? tools->child : NULL; t && !sure; t = t->next)
        if (cJSON_IsObject(t) && !get(t, "type")) f = ZT_CHAT_FORMAT_MESSAGES, w = "a bare tool schema", sure = 1;
    const cJSON *m;
    for (m = f == ZT_CHAT_FORMAT_MESSAGES ? arr->child : NULL; m && !sure; m = m->next) {
        const cJSON *calls = get(m, "tool_calls"), *content = get(m, "content"), *tc;
        if (get(m, "tool_call_id")) {
            f = ZT_CHAT_FORMAT_OPENAI, w = "a tool message with \"tool_call_id\"", sure = 1;
            break;
        }
        if (cJSON_IsArray(calls) && calls->child && (!content || cJSON_IsNull(content))) {
            f = ZT_CHAT_FORMAT_OPENAI, w = "null or no content beside tool_calls", sure = 1;
            break;
        }
        for (tc = cJSON_IsArray(calls) ? calls->child : NULL; tc && !sure; tc = tc->next) {
            const cJSON *fn = get(tc, "function");
            if (cJSON_IsObject(tc) && !cJSON_IsObject(fn))
                f = ZT_CHAT_FORMAT_MESSAGES, w = "a tool call without \"function\"", sure = 1;
            else if (cJSON_IsObject(fn) && get(fn, "arguments") && !cJSON_IsString(get(fn, "arguments")))
                f = ZT_CHAT_FORMAT_MESSAGES, w = "tool-call arguments that are not a string", sure = 1;
        }
    }
    if (decisive) *decisive = sure;
    if (why) *why = w;
    return f;
}

int zt_chat_read(const cJSON *root, const char *field, zt_chat_format fmt, const char *json, size_t json_len,
                 zt_chat_conv *cv) {
    zt_chat_conv_reset(cv);
    if (fmt == ZT_CHAT_FORMAT_AUTO) {
        fmt = zt_chat_detect(root, field, NULL, NULL);
        if (fmt == ZT_CHAT_FORMAT_AUTO) fmt = ZT_CHAT_FORMAT_MESSAGES;
    }
    cv->format = fmt;
    if (!field || !field[0]) field = zt_chat_format_field(fmt);
    if (!cJSON_IsObject(root))
        return zt_err("the line is %s, not a JSON object with a \"%s\" member", zt_json_type_name(root), field);
    add_json(cv, root, json, json_len);
    const int rc = fmt == ZT_CHAT_FORMAT_SHAREGPT ? read_sharegpt(cv, root, field)
                                                   : read_role_messages(cv, root, field, fmt == ZT_CHAT_FORMAT_OPENAI);
    if (rc) zt_chat_conv_reset(cv);
    return rc;
}
