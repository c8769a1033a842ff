// The Qwen3 chat template, rendered natively (docs/tokenizer.md, "Chat"): the template's text and
// the check that a tokenizer_config.json holds it, and its branches written out in C (the tools block
// included) over a zt_chat_conv, with the byte spans a --train-on rule trains.
// defines: zt_chat_template_text, zt_chat_template_crc, zt_chat_check_template, zt_chat_train_name/parse,
//          zt_chat_render_conv
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/json_util.h"
#include "base/common.h"
#include "data/chat_internal.h"

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
static int render_tool_calls(zt_chat *c, zt_pyjson_numbers *nt, const zt_chat_conv *cv, const zt_chat_msg *m,
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
            if (zt_pyjson_dumps(nt, call->args, where, &c->text)) return -1;
        }
        emits(c, "}\n</tool_call>");
    }
    return 0;
}

// An assistant turn from its header on; its span is [*begin, *end): after the header through <|im_end|>.
static int render_assistant(zt_chat *c, zt_pyjson_numbers *nt, const zt_chat_conv *cv, const zt_chat_msg *m, int thinks,
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

static int render(const zt_chat_conv *cv, zt_pyjson_numbers *nt, zt_chat_train rule, zt_chat *c) {
    const int n = cv->nmsgs;
    const zt_chat_msg *v = cv->msgs;
    if (n == 0) return zt_err("the conversation has no message");
    if (rule != ZT_CHAT_TRAIN_ALL && v[n - 1].role != ZT_CHAT_ASSISTANT) {
        const char *paren = strstr(v[n - 1].where, " (");
        return zt_err("the last message (%.*s) is from the %s, not the assistant: --train-on %s trains assistant "
                      "turns and needs a conversation that ends with one (--train-on all trains every token)",
                      paren ? (int)(paren - v[n - 1].where) : (int)strlen(v[n - 1].where), v[n - 1].where,
                      zt_chat_role_names[v[n - 1].role], zt_chat_train_name(rule));
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
            if (zt_pyjson_dumps(nt, cv->tools[k], where, &c->text)) return -1;
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
            emits(c, zt_chat_role_names[m->role]);
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
    zt_pyjson_numbers nt = {.cv = cv};
    const int rc = render(cv, &nt, rule, out);
    free(nt.refs);
    if (rc) {
        out->text.n = 0;
        out->nspans = 0;
    }
    return rc;
}
