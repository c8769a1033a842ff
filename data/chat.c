// The Qwen3 chat template, rendered natively (see data/chat.h and docs/tokenizer.md,
// "Chat"): the template's branches written out in C (the tools block included), Python's
// json.dumps for tool schemas and tool-call arguments (the template's tojson), and the trained
// mask taken from token byte offsets the way transformers' return_assistant_tokens_mask takes
// it from char offsets. A line is first read, in its input format, into the template's view of it.
#define _GNU_SOURCE
#include "data/chat.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/json_util.h"
#include "base/common.h"

// The chat_template member of assets/qwen3-tokenizer/tokenizer_config.json, byte for byte:
// the only template zt_chat_render implements (zt_chat_check_template refuses any other).
static const char qwen3_template[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- messages[0].content + '\\n\\n' }}\n"
    "    {%- endif %}\n"
    "    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n"
    "    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == \"user\" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n"
    "        {%- set ns.multi_step_tool = false %}\n"
    "        {%- set ns.last_query_index = index %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {%- set content = message.content %}\n"
    "        {%- set reasoning_content = '' %}\n"
    "        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}\n"
    "            {%- set reasoning_content = message.reasoning_content %}\n"
    "        {%- else %}\n"
    "            {%- if '</think>' in message.content %}\n"
    "                {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}\n"
    "                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n"
    "            {%- endif %}\n"
    "        {%- endif %}\n"
    "        {%- if loop.index0 > ns.last_query_index %}\n"
    "            {%- if loop.last or (not loop.last and reasoning_content) %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}\n"
    "            {%- else %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "            {%- endif %}\n"
    "        {%- else %}\n"
    "            {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if (loop.first and content) or (not loop.first) %}\n"
    "                    {{- '\\n' }}\n"
    "                {%- endif %}\n"
    "                {%- if tool_call.function %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    "                {{- '<tool_call>\\n{\"name\": \"' }}\n"
    "                {{- tool_call.name }}\n"
    "                {{- '\", \"arguments\": ' }}\n"
    "                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n"
    "                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n"
    "                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}";

const char *zt_chat_template_text(size_t *len) {
    if (len) *len = sizeof qwen3_template - 1;
    return qwen3_template;
}

uint32_t zt_chat_template_crc(void) { return zt_crc32c(0, qwen3_template, sizeof qwen3_template - 1); }

const char *zt_chat_train_name(zt_chat_train rule) {
    return rule == ZT_CHAT_TRAIN_LAST ? "last" : rule == ZT_CHAT_TRAIN_ALL ? "all" : "assistant";
}

int zt_chat_train_parse(const char *s, zt_chat_train *rule) {
    if (!strcmp(s, "assistant")) *rule = ZT_CHAT_TRAIN_ASSISTANT;
    else if (!strcmp(s, "last")) *rule = ZT_CHAT_TRAIN_LAST;
    else if (!strcmp(s, "all")) *rule = ZT_CHAT_TRAIN_ALL;
    else return -1;
    return 0;
}

int zt_chat_check_template(const char *path, uint32_t *crc) {
    size_t len;
    char *text = zt_read_file(path, &len);
    if (!text) {
        char why[ZT_ERR_MAX];  // zt_read_file's message, which names the file
        snprintf(why, sizeof why, "%s", zt_errmsg());
        return zt_err("%.1500s: --input chat takes the chat template from the tokenizer_config.json beside "
                      "tokenizer.json",
                      why);
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    char deep[160];
    const char *too_deep = root ? NULL : zt_json_depth_error(text, len, zt_json_error_col(text, len), deep, sizeof deep);
    free(text);
    int rc = 0;
    const cJSON *t = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "chat_template") : NULL;
    const size_t want_len = sizeof qwen3_template - 1;
    const uint32_t want = zt_chat_template_crc();
    if (!root) rc = too_deep ? zt_err("%s: %s", path, too_deep) : zt_err("%s: not valid JSON", path);
    else if (!t) rc = zt_err("%s: no \"chat_template\" member; --input chat needs the Qwen3 chat template", path);
    else if (!cJSON_IsString(t))
        rc = zt_err("%s: \"chat_template\" is not a string (named template lists are not supported); --input chat "
                    "needs the Qwen3 chat template",
                    path);
    else {
        const size_t n = strlen(t->valuestring);
        const uint32_t got = zt_crc32c(0, t->valuestring, n);
        if (n != want_len || memcmp(t->valuestring, qwen3_template, n)) {
            size_t at = 0;
            while (at < n && at < want_len && t->valuestring[at] == qwen3_template[at]) at++;
            rc = zt_err("%s: the chat_template (%zu bytes, crc32c:%08x) differs from the Qwen3 template zerotrain "
                        "implements (%zu bytes, crc32c:%08x) from byte %zu on; zerotrain renders only that template, "
                        "natively, so a conversation rendered under this one would not match what the model was "
                        "trained on",
                        path, n, got, want_len, want, at);
        } else if (crc) {
            *crc = got;
        }
    }
    cJSON_Delete(root);
    return rc;
}

// ---- JSON helpers ----------------------------------------------------------------------
// A string we will render: its bytes, which must be UTF-8.
static int str_view(const cJSON *v, const char *where, const char *what, const char **s, size_t *n) {
    if (!cJSON_IsString(v)) return zt_err("%s: %s is %s, not a string", where, what, zt_json_type_name(v));
    *s = v->valuestring;
    *n = strlen(v->valuestring);
    const size_t ok = zt_utf8_valid_prefix(*s, *n);
    if (ok != *n)
        return zt_err("%s: %s: invalid UTF-8 at byte %zu of the string (byte 0x%02x)", where, what, ok,
                      (unsigned char)(*s)[ok]);
    return 0;
}

// ---- input formats ------------------------------------------------------------------------
// The three formats of a line (messages, OpenAI's fine-tuning JSONL, LLaMA-Factory's ShareGPT)
// read into the template's view of a conversation (zt_chat_conv): each reader checks its
// format's rules and names the member and the rule of the first one broken; the renderer
// below never sees a format.
static const char *const role_names[] = {"system", "user", "assistant", "tool"};
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
            if (str_view(fname, w2, "name", &s, &n)) return -1;
        } else {
            if (openai)
                return zt_err("%s: a bare schema (no \"type\": \"function\"); OpenAI's format wraps each tool as "
                              "{\"type\": \"function\", \"function\": {...}} (--format messages takes bare ones)",
                              where);
            if (!name) return zt_err("%s: no \"name\" member (%s)", where, shape);
            const char *s;
            size_t n;
            if (str_view(name, where, "name", &s, &n)) return -1;
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
            if (str_view(id, where, "id", &s, &n)) return -1;
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
        if (str_view(name, where, "name", &c->name, &c->name_len)) return -1;
        if (!args) return zt_err("%s: no \"arguments\" member", where);
        if (openai && !cJSON_IsString(args))
            return zt_err("%s: arguments is %s, not a string (OpenAI's format gives the arguments as a JSON string; "
                          "--format messages takes a JSON value)",
                          where, zt_json_type_name(args));
        if (cJSON_IsString(args)) {
            const char *s;
            size_t n;
            if (str_view(args, where, "arguments", &s, &n)) return -1;
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
        if (x && !cJSON_IsNull(x)) return str_view(x, m->where, names[k], &m->reasoning, &m->reasoning_len);
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
            if (!strcmp(role->valuestring, role_names[k])) r = k;
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
        snprintf(where, sizeof where, "messages[%d] (%s)", i, role_names[r]);
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
        } else if ((rc = str_view(content, where, "content", &m->content, &m->content_len))) {
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
            if ((rc = str_view(id, where, "tool_call_id", &s, &n))) break;
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
        if (str_view(name, w, "name", &c->name, &c->name_len)) return -1;
        if (!args) return zt_err("%s: no \"arguments\" member (%s)", w, shape);
        if (cJSON_IsString(args)) {
            const char *a;
            size_t an;
            if (str_view(args, w, "arguments", &a, &an)) return -1;
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
        if (str_view(tools, "tools", "the string", &s, &n)) return -1;
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
        if (str_view(value, where, "value", &s, &n)) return -1;
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
            if (str_view(system, "system", "the member", &ss, &sn)) return -1;
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

// ---- number literals -------------------------------------------------------------------
// cJSON keeps a number as a double, but json.dumps writes the int 1 as "1" and the float
// 1.0 as "1.0": the literal decides. cJSON builds its tree in source order, so the k-th
// number node in preorder is the k-th number literal outside strings in the text. A
// conversation's values come from the line and from JSON held in its strings (ShareGPT):
// each tree is matched with its own text (zt_chat_conv.json).
typedef struct {
    const cJSON *node;
    const char *text;  // the text the literal is in (NULL: not known)
    size_t off, len;
} num_ref;

typedef struct {
    const zt_chat_conv *cv;
    int built;
    num_ref *refs;
    size_t n, cap;
} num_table;

static void collect_numbers(num_table *t, const cJSON *v) {
    if (cJSON_IsNumber(v)) {
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 64;
            t->refs = realloc(t->refs, t->cap * sizeof *t->refs);
            if (!t->refs) zt_fatal("out of host memory for %zu number literals", t->cap);
        }
        t->refs[t->n++] = (num_ref){.node = v};
    }
    for (const cJSON *c = (cJSON_IsArray(v) || cJSON_IsObject(v)) ? v->child : NULL; c; c = c->next)
        collect_numbers(t, c);
}

static int cmp_ref_node(const void *a, const void *b) {
    const num_ref *x = a, *y = b;
    return x->node < y->node ? -1 : x->node > y->node;
}

static int build_numbers(num_table *t) {
    for (int j = 0; j < t->cv->njson; j++) {
        const struct zt_chat_json *src = &t->cv->json[j];
        const size_t first = t->n;
        collect_numbers(t, src->root);
        if (!src->text) continue;
        size_t k = 0;
        int in_str = 0;
        for (size_t i = 0; i < src->len; i++) {
            const char c = src->text[i];
            if (in_str) {
                if (c == '\\') i++;
                else if (c == '"') in_str = 0;
            } else if (c == '"') {
                in_str = 1;
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                size_t e = i;
                while (e < src->len && strchr("0123456789+-.eE", src->text[e]) && src->text[e]) e++;
                if (first + k < t->n) t->refs[first + k] = (num_ref){t->refs[first + k].node, src->text, i, e - i};
                k++;
                i = e - 1;
            }
        }
        if (first + k != t->n)
            return zt_err("the %s holds %zu number literals but parses to %zu numbers (internal error reading "
                          "numbers to render)",
                          j ? "JSON in a string" : "line", k, t->n - first);
    }
    qsort(t->refs, t->n, sizeof *t->refs, cmp_ref_node);
    t->built = 1;
    return 0;
}

// JSON's number grammar (cJSON accepts more, e.g. 01 and 1.); sets *is_float for a
// fraction or an exponent.
static int json_number_ok(const char *s, size_t n, int *is_float) {
    size_t i = 0;
    *is_float = 0;
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') i++;
    else if (i < n && s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    else return 0;
    if (i < n && s[i] == '.') {
        *is_float = 1;
        if (++i >= n || s[i] < '0' || s[i] > '9') return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        *is_float = 1;
        if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    return i == n;
}

// The shortest digits that read back to x > 0 (finite), as Python's repr finds them (David
// Gay's mode 0: fewest digits, and of those the nearest to x): digits d1..dn and decpt
// with x = 0.d1..dn * 10^decpt. At each length, the correctly rounded candidate first,
// then its neighbour on the other side of x (the rounding interval of a power of two is
// lopsided, so the nearest may miss it while the other one hits).
static int shortest_digits(double x, char *digits, int *decpt) {
    char buf[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        uint64_t m = 0;
        int e;
        const char *q = buf;
        for (; *q && *q != 'e'; q++)
            if (*q >= '0' && *q <= '9') m = m * 10 + (uint64_t)(*q - '0');
        e = atoi(q + 1);
        const double back = strtod(buf, NULL);
        uint64_t pow = 1;
        for (int k = 1; k < p; k++) pow *= 10;  // 10^(p-1): m is in [pow, 10 pow)
        int hit = back == x;
        if (!hit) {
            uint64_t m2 = back > x ? m - 1 : m + 1;
            int e2 = e;
            if (m2 == 10 * pow) m2 = pow, e2++;
            else if (m2 < pow) m2 = 10 * pow - 1, e2--;
            snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)m2, e2 - (p - 1));
            if (strtod(buf, NULL) == x) hit = 1, m = m2, e = e2;
        }
        if (hit) {
            char d[24];
            int nd = snprintf(d, sizeof d, "%llu", (unsigned long long)m);
            while (nd > 1 && d[nd - 1] == '0') nd--;
            memcpy(digits, d, (size_t)nd);
            digits[nd] = 0;
            *decpt = e + 1;
            return nd;
        }
    }
    zt_fatal("no 17-digit decimal reads back to %a", x);  // %.16e always does
}

// repr(float) as Python 3 writes it (json.dumps uses float.__repr__; NaN/inf as JSON's
// extension names, allow_nan being the default).
static void py_float(double v, zt_buf *out) {
    char s[64];
    if (isnan(v)) {
        zt_buf_append(out, "NaN", 3);
        return;
    }
    if (isinf(v)) {
        if (v < 0) zt_buf_append(out, "-Infinity", 9);
        else zt_buf_append(out, "Infinity", 8);
        return;
    }
    if (v == 0) {
        if (signbit(v)) zt_buf_append(out, "-0.0", 4);
        else zt_buf_append(out, "0.0", 3);
        return;
    }
    if (v < 0) zt_buf_append(out, "-", 1);
    char d[24];
    int decpt;
    const int nd = shortest_digits(fabs(v), d, &decpt);
    size_t k = 0;
    if (decpt > -4 && decpt <= 16) {  // Python's repr: fixed notation for 1e-4 <= |v| < 1e16
        if (decpt <= 0) {
            s[k++] = '0', s[k++] = '.';
            for (int i = 0; i < -decpt; i++) s[k++] = '0';
            memcpy(s + k, d, (size_t)nd), k += (size_t)nd;
        } else if (decpt >= nd) {
            memcpy(s + k, d, (size_t)nd), k += (size_t)nd;
            for (int i = nd; i < decpt; i++) s[k++] = '0';
            s[k++] = '.', s[k++] = '0';
        } else {
            memcpy(s + k, d, (size_t)decpt), k += (size_t)decpt;
            s[k++] = '.';
            memcpy(s + k, d + decpt, (size_t)(nd - decpt)), k += (size_t)(nd - decpt);
        }
    } else {
        s[k++] = d[0];
        if (nd > 1) {
            s[k++] = '.';
            memcpy(s + k, d + 1, (size_t)nd - 1), k += (size_t)nd - 1;
        }
        const int e = decpt - 1;
        k += (size_t)snprintf(s + k, sizeof s - k, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    zt_buf_append(out, s, k);
}

static int number_json(num_table *t, const cJSON *v, const char *where, zt_buf *out) {
    if (!t->built && build_numbers(t)) return -1;
    num_ref key = {.node = v};
    const num_ref *r = bsearch(&key, t->refs, t->n, sizeof *t->refs, cmp_ref_node);
    if (!r) return zt_err("%s: number not found in the line (internal error)", where);
    if (!r->text)
        return zt_err("%s: a number to render needs the JSON text it was written in (int or float literal)", where);
    const char *lit = r->text + r->off;
    int is_float;
    if (!json_number_ok(lit, r->len, &is_float))
        return zt_err("%s: the number %.*s is not valid JSON (Python's json refuses it)", where,
                      (int)(r->len > 40 ? 40 : r->len), lit);
    if (!is_float) {  // Python reads an int exactly and writes its digits back; -0 is 0
        if (r->len == 2 && lit[0] == '-' && lit[1] == '0') zt_buf_append(out, "0", 1);
        else zt_buf_append(out, lit, r->len);
        return 0;
    }
    char tmp[512];
    if (r->len >= sizeof tmp)
        return zt_err("%s: the number literal is %zu characters long; longer than 511 is not supported", where,
                      r->len);
    memcpy(tmp, lit, r->len);
    tmp[r->len] = 0;
    py_float(strtod(tmp, NULL), out);  // both strtod and Python's float() round correctly
    return 0;
}

// A JSON string as json.dumps(ensure_ascii=False) writes it: " \ and the C0 controls
// escaped (\n \r \t \b \f by name, the rest \u00xx), everything else as is.
static void json_string(const char *s, size_t n, zt_buf *out) {
    zt_buf_append(out, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        zt_buf_append(out, s + run, i - run);
        run = i + 1;
        char e[8];
        switch (c) {
        case '"': zt_buf_append(out, "\\\"", 2); break;
        case '\\': zt_buf_append(out, "\\\\", 2); break;
        case '\n': zt_buf_append(out, "\\n", 2); break;
        case '\r': zt_buf_append(out, "\\r", 2); break;
        case '\t': zt_buf_append(out, "\\t", 2); break;
        case '\b': zt_buf_append(out, "\\b", 2); break;
        case '\f': zt_buf_append(out, "\\f", 2); break;
        default: snprintf(e, sizeof e, "\\u%04x", c), zt_buf_append(out, e, 6); break;
        }
    }
    zt_buf_append(out, s + run, n - run);
    zt_buf_append(out, "\"", 1);
}

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

// json.dumps(v, ensure_ascii=False) with the default separators ", " and ": ".
static int tojson(num_table *t, const cJSON *v, const char *where, zt_buf *out) {
    if (cJSON_IsNull(v)) zt_buf_append(out, "null", 4);
    else if (cJSON_IsTrue(v)) zt_buf_append(out, "true", 4);
    else if (cJSON_IsFalse(v)) zt_buf_append(out, "false", 5);
    else if (cJSON_IsNumber(v)) return number_json(t, v, where, out);
    else if (cJSON_IsString(v)) {
        const char *s = NULL;
        size_t n = 0;
        if (str_view(v, where, "a string", &s, &n)) return -1;
        json_string(s, n, out);
    } else if (cJSON_IsArray(v)) {
        zt_buf_append(out, "[", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) zt_buf_append(out, ", ", 2);
            if (tojson(t, c, where, out)) return -1;
        }
        zt_buf_append(out, "]", 1);
    } else if (cJSON_IsObject(v)) {
        // Python's dict keeps one value per key (the last); refuse rather than guess
        size_t k = 0;
        for (const cJSON *c = v->child; c; c = c->next) k++;
        if (k > 1) {
            const cJSON **keys = zt_xmalloc(k * sizeof *keys);
            size_t i = 0;
            for (const cJSON *c = v->child; c; c = c->next) keys[i++] = c;
            qsort(keys, k, sizeof *keys, cmp_key);
            int dup = -1;
            for (i = 1; i < k && dup < 0; i++)
                if (!strcmp(keys[i]->string, keys[i - 1]->string)) dup = (int)i;
            if (dup >= 0) zt_err("%s: duplicate key \"%s\" (Python's json keeps only the last value)", where, keys[dup]->string);
            free(keys);
            if (dup >= 0) return -1;
        }
        zt_buf_append(out, "{", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) zt_buf_append(out, ", ", 2);
            const size_t kn = strlen(c->string);
            if (zt_utf8_valid_prefix(c->string, kn) != kn) return zt_err("%s: a key is not valid UTF-8", where);
            json_string(c->string, kn, out);
            zt_buf_append(out, ": ", 2);
            if (tojson(t, c, where, out)) return -1;
        }
        zt_buf_append(out, "}", 1);
    } else {
        return zt_err("%s: a value of unknown JSON type", where);
    }
    return 0;
}

// ---- rendering ---------------------------------------------------------------------------

static void emit(zt_chat *c, const char *s, size_t n) { zt_buf_append(&c->text, s, n); }
static void emits(zt_chat *c, const char *s) { zt_buf_append(&c->text, s, strlen(s)); }

static void add_span(zt_chat *c, size_t b, size_t e) {
    if (c->nspans == c->spans_cap) {
        c->spans_cap = c->spans_cap ? 2 * c->spans_cap : 8;
        c->spans = realloc(c->spans, c->spans_cap * sizeof *c->spans);
        if (!c->spans) zt_fatal("out of host memory for %zu spans", c->spans_cap);
    }
    c->spans[c->nspans++] = (zt_chat_span){b, e};
}

static int has_prefix(const char *s, size_t n, const char *p) {
    const size_t k = strlen(p);
    return n >= k && !memcmp(s, p, k);
}
static int has_suffix(const char *s, size_t n, const char *p) {
    const size_t k = strlen(p);
    return n >= k && !memcmp(s + n - k, p, k);
}
// Start of the last occurrence of p in s[0, n), or NULL.
static const char *find_last(const char *s, size_t n, const char *p) {
    const size_t k = strlen(p);
    const char *last = NULL;
    for (const char *q = s; (q = memmem(q, n - (size_t)(q - s), p, k)); q++) last = q;
    return last;
}
// Python's str.lstrip('\n') / rstrip('\n') on a view.
static void lstrip_nl(const char **s, size_t *n) {
    while (*n && **s == '\n') (*s)++, (*n)--;
}
static void rstrip_nl(const char **s, size_t *n) {
    while (*n && (*s)[*n - 1] == '\n') (*n)--;
}

// The template's tools block: "# Tools" and each schema through tojson, inside the system turn
// (after the first message's content and "\n\n" when that message is a system one).
static const char tools_intro[] = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                                  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char tools_outro[] = "\n</tools>\n\nFor each function call, return a json object with function name and "
                                  "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
                                  "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

// The tool calls of an assistant message, as the template writes them after the content.
static int render_tool_calls(zt_chat *c, num_table *nt, const zt_chat_conv *cv, const zt_chat_msg *m,
                             size_t content_len) {
    for (int k = 0; k < m->ncalls; k++) {
        const zt_chat_call *call = &cv->calls[m->call0 + k];
        if (k > 0 || content_len > 0) emits(c, "\n");
        emits(c, "<tool_call>\n{\"name\": \"");
        emit(c, call->name, call->name_len);
        emits(c, "\", \"arguments\": ");
        if (cJSON_IsString(call->args)) {  // a string is written as it is, not as JSON
            emits(c, call->args->valuestring);
        } else {
            char where[160];
            snprintf(where, sizeof where, "%s.arguments", call->where);
            if (tojson(nt, call->args, where, &c->text)) return -1;
        }
        emits(c, "}\n</tool_call>");
    }
    return 0;
}

// An assistant turn from its header on; its span is [*begin, *end): after the header through <|im_end|>.
static int render_assistant(zt_chat *c, num_table *nt, const zt_chat_conv *cv, const zt_chat_msg *m, int thinks,
                            size_t *begin, size_t *end) {
    const char *content = m->content, *reason = "";
    size_t cn = m->content_len, rn = 0;
    if (m->reasoning) {
        reason = m->reasoning, rn = m->reasoning_len;
    } else {
        const char *close = memmem(content, cn, "</think>", 8);
        if (close) {
            const char *last = find_last(content, cn, "</think>");
            const char *before = content;
            size_t bn = (size_t)(close - content);
            rstrip_nl(&before, &bn);
            const char *open = find_last(before, bn, "<think>");
            if (open) bn -= (size_t)(open + 7 - before), before = open + 7;
            lstrip_nl(&before, &bn);
            reason = before, rn = bn;
            cn -= (size_t)(last + 8 - content);
            content = last + 8;
            lstrip_nl(&content, &cn);
        }
    }
    emits(c, "<|im_start|>assistant\n");
    *begin = c->text.n;
    if (thinks == 2 || (thinks == 1 && rn > 0)) {  // the last message always, a later one with reasoning
        const char *rs = reason, *cs = content;
        size_t rsn = rn, csn = cn;
        lstrip_nl(&rs, &rsn);
        rstrip_nl(&rs, &rsn);
        lstrip_nl(&cs, &csn);
        emits(c, "<think>\n");
        emit(c, rs, rsn);
        emits(c, "\n</think>\n\n");
        emit(c, cs, csn);
    } else {
        emit(c, content, cn);
    }
    if (render_tool_calls(c, nt, cv, m, cn)) return -1;
    emits(c, "<|im_end|>");
    *end = c->text.n;
    emits(c, "\n");
    return 0;
}

static int render(const zt_chat_conv *cv, num_table *nt, zt_chat_train rule, zt_chat *c) {
    const int n = cv->nmsgs;
    const zt_chat_msg *v = cv->msgs;
    if (n == 0) return zt_err("the conversation has no message");
    if (rule != ZT_CHAT_TRAIN_ALL && v[n - 1].role != ZT_CHAT_ASSISTANT) {
        const char *paren = strstr(v[n - 1].where, " (");
        return zt_err("the last message (%.*s) is from the %s, not the assistant: --train-on %s trains assistant "
                      "turns and needs a conversation that ends with one (--train-on all trains every token)",
                      paren ? (int)(paren - v[n - 1].where) : (int)strlen(v[n - 1].where), v[n - 1].where,
                      role_names[v[n - 1].role], zt_chat_train_name(rule));
    }
    c->nmessages = n;

    // the last user message that is a query, not a wrapped tool response
    int lqi = n - 1, i;
    for (i = n - 1; i >= 0; i--)
        if (v[i].role == ZT_CHAT_USER && !(has_prefix(v[i].content, v[i].content_len, "<tool_response>") &&
                                           has_suffix(v[i].content, v[i].content_len, "</tool_response>"))) {
            lqi = i;
            break;
        }

    if (cv->ntools > 0) {
        emits(c, "<|im_start|>system\n");
        if (v[0].role == ZT_CHAT_SYSTEM) {
            emit(c, v[0].content, v[0].content_len);
            emits(c, "\n\n");
        }
        emits(c, tools_intro);
        for (int k = 0; k < cv->ntools; k++) {
            char where[32];
            snprintf(where, sizeof where, "tools[%d]", k);
            emits(c, "\n");
            if (tojson(nt, cv->tools[k], where, &c->text)) return -1;
        }
        emits(c, tools_outro);
    } else if (v[0].role == ZT_CHAT_SYSTEM) {
        emits(c, "<|im_start|>system\n");
        emit(c, v[0].content, v[0].content_len);
        emits(c, "<|im_end|>\n");
    }
    // every assistant turn's span, then the rule picks: weights[k] of span k
    int *weights = zt_xmalloc(((size_t)n + 1) * sizeof *weights), rc = 0;
    for (i = 0; i < n && rc == 0; i++) {
        const zt_chat_msg *m = &v[i];
        if (m->role == ZT_CHAT_USER || (m->role == ZT_CHAT_SYSTEM && i > 0)) {
            emits(c, "<|im_start|>");
            emits(c, role_names[m->role]);
            emits(c, "\n");
            emit(c, m->content, m->content_len);
            emits(c, "<|im_end|>\n");
        } else if (m->role == ZT_CHAT_ASSISTANT) {
            size_t b = 0, e = 0;
            rc = render_assistant(c, nt, cv, m, i > lqi ? (i == n - 1 ? 2 : 1) : 0, &b, &e);
            weights[c->nspans] = m->weight;
            add_span(c, b, e);
        } else if (m->role == ZT_CHAT_TOOL) {
            if (i == 0 || v[i - 1].role != ZT_CHAT_TOOL) emits(c, "<|im_start|>user");
            emits(c, "\n<tool_response>\n");
            emit(c, m->content, m->content_len);
            emits(c, "\n</tool_response>");
            if (i == n - 1 || v[i + 1].role != ZT_CHAT_TOOL) emits(c, "<|im_end|>\n");
        }
    }
    if (rc == 0) {
        const size_t ns = c->nspans;
        size_t k = 0;
        if (rule == ZT_CHAT_TRAIN_ASSISTANT) {
            for (size_t s = 0; s < ns; s++)
                if (weights[s]) c->spans[k++] = c->spans[s];
            c->nspans = k;
        } else if (rule == ZT_CHAT_TRAIN_LAST) {
            if (ns && weights[ns - 1]) c->spans[k++] = c->spans[ns - 1];
            c->nspans = k;
        } else {  // all: everything but the weight-0 turns
            zt_chat_span *held = zt_xmalloc((ns + 1) * sizeof *held);
            size_t nh = 0, at = 0;
            for (size_t s = 0; s < ns; s++)
                if (!weights[s]) held[nh++] = c->spans[s];
            c->nspans = 0;
            for (size_t s = 0; s < nh; s++) {
                if (held[s].begin > at) add_span(c, at, held[s].begin);
                at = held[s].end;
            }
            if (c->text.n > at) add_span(c, at, c->text.n);
            free(held);
        }
    }
    free(weights);
    c->ntools = cv->ntools;
    c->weight0 = cv->weight0;
    return rc;
}

int zt_chat_render_conv(const zt_chat_conv *cv, zt_chat_train rule, zt_chat *out) {
    out->text.n = 0;
    out->nspans = 0;
    out->nmessages = out->ntools = out->weight0 = 0;
    num_table nt = {.cv = cv};
    const int rc = render(cv, &nt, rule, out);
    free(nt.refs);
    if (rc) {
        out->text.n = 0;
        out->nspans = 0;
    }
    return rc;
}

int zt_chat_render_as(const cJSON *root, const char *field, zt_chat_format fmt, const char *json, size_t json_len,
                      zt_chat_train rule, zt_chat *out) {
    out->text.n = 0;
    out->nspans = 0;
    out->nmessages = out->ntools = out->weight0 = 0;
    if (zt_chat_read(root, field, fmt, json, json_len, &out->conv)) return -1;
    return zt_chat_render_conv(&out->conv, rule, out);
}

int zt_chat_render(const cJSON *root, const char *field, const char *json, size_t json_len, zt_chat_train rule,
                   zt_chat *out) {
    return zt_chat_render_as(root, field, ZT_CHAT_FORMAT_MESSAGES, json, json_len, rule, out);
}

void zt_chat_free(zt_chat *c) {
    free(c->text.p);
    free(c->spans);
    zt_chat_conv_free(&c->conv);
    memset(c, 0, sizeof *c);
}

// ---- tokens and the mask -----------------------------------------------------------------
// s[0, n) normalised as the tokenizer normalises it: added tokens found on the raw text
// (leftmost, longest first, as zt_encode finds them) kept as they are, NFC between them.
static int normalise_append(const zt_tokenizer *tk, const unsigned char *first, const char *s, size_t n,
                            zt_buf *out, zt_buf *tmp) {
    size_t seg = 0, i = 0;
    const int na = zt_tokenizer_added_count(tk);
    for (;;) {
        size_t alen = 0;
        for (; i < n && !alen; i++) {
            if (!first[(unsigned char)s[i]]) continue;
            for (int k = 0; k < na && !alen; k++) {
                size_t len;
                const char *a = zt_tokenizer_added(tk, k, &len, NULL);
                if (len <= n - i && !memcmp(a, s + i, len)) alen = len;
            }
        }
        const size_t end = alen ? i - 1 : n;  // the loop stepped past the token's first byte
        const int r = zt_nfc(s + seg, end - seg, tmp);
        if (r < 0) return -1;
        if (r == 1) zt_buf_append(out, tmp->p, tmp->n);
        else zt_buf_append(out, s + seg, end - seg);
        if (!alen) return 0;
        zt_buf_append(out, s + end, alen);
        i = seg = end + alen;
    }
}

int zt_chat_tokenize(zt_encoder *enc, const zt_tokenizer *tk, const zt_chat *c, zt_chat_tokens *t) {
    t->ids.n = 0;
    t->ntrained = 0;
    for (size_t k = 0; k < c->nspans; k++) {  // what the mapping below relies on
        const zt_chat_span *sp = &c->spans[k];
        const unsigned char *p = (const unsigned char *)c->text.p;
        if (sp->begin >= sp->end || sp->end > c->text.n || (k && sp->begin < c->spans[k - 1].end) ||
            (p[sp->begin] & 0xC0) == 0x80 || (sp->end < c->text.n && (p[sp->end] & 0xC0) == 0x80))
            return zt_err("trained span %zu [%zu, %zu) of a %zu-byte text: spans must be in order, disjoint, non-empty "
                          "and start and end on character boundaries (internal error)",
                          k, sp->begin, sp->end, c->text.n);
    }
    if (zt_encode(enc, c->text.p, c->text.n, &t->ids)) return -1;
    const size_t n = t->ids.n;
    if (n > t->trained_cap) {
        t->trained_cap = n + n / 2 + 16;
        t->trained = realloc(t->trained, t->trained_cap);
        if (!t->trained) zt_fatal("out of host memory for a %zu-token mask", n);
    }
    unsigned char first[256] = {0};
    for (int k = 0; k < zt_tokenizer_added_count(tk); k++) first[(unsigned char)zt_tokenizer_added(tk, k, NULL, NULL)[0]] = 1;

    // the spans in the normalised text: the text normalised in pieces cut at every span boundary
    if (2 * c->nspans > t->cuts_cap) {
        t->cuts_cap = 2 * c->nspans + 8;
        t->cuts = realloc(t->cuts, t->cuts_cap * sizeof *t->cuts);
        if (!t->cuts) zt_fatal("out of host memory for %zu span boundaries", t->cuts_cap);
    }
    t->norm.n = 0;
    size_t prev = 0;
    for (size_t k = 0; k < 2 * c->nspans; k++) {
        const size_t at = k & 1 ? c->spans[k / 2].end : c->spans[k / 2].begin;
        if (normalise_append(tk, first, c->text.p + prev, at - prev, &t->norm, &t->tmp)) return -1;
        t->cuts[k] = t->norm.n;
        prev = at;
    }
    if (normalise_append(tk, first, c->text.p + prev, c->text.n - prev, &t->norm, &t->tmp)) return -1;

    // token offsets from the decoded bytes; a token is trained iff it overlaps a span
    t->dec.n = 0;
    size_t s = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t a = t->dec.n;
        if (zt_decode(tk, &t->ids.ids[i], 1, &t->dec)) return -1;
        const size_t b = t->dec.n;
        while (s < c->nspans && t->cuts[2 * s + 1] <= a) s++;
        t->trained[i] = s < c->nspans && b > t->cuts[2 * s];
        t->ntrained += t->trained[i];
    }
    if (t->dec.n != t->norm.n || memcmp(t->dec.p, t->norm.p, t->dec.n)) {
        size_t at = 0;
        while (at < t->dec.n && at < t->norm.n && t->dec.p[at] == t->norm.p[at]) at++;
        return zt_err("the tokens decode to text that differs from the rendered text normalised turn by turn, at "
                      "byte %zu of the normalised text (NFC across a template boundary?); the mask would be "
                      "misplaced",
                      at);
    }
    return 0;
}

void zt_chat_tokens_free(zt_chat_tokens *t) {
    zt_ids_free(&t->ids);
    free(t->trained);
    free(t->norm.p);
    free(t->dec.p);
    free(t->tmp.p);
    free(t->cuts);
    memset(t, 0, sizeof *t);
}
