// The Qwen3 chat template, rendered natively (see data/chat.h and docs/tokenizer.md,
// "Chat"): the template's branches written out in C, Python's json.dumps for tool-call
// arguments (the template's tojson), and the trained mask taken from token byte offsets
// the way transformers' return_assistant_tokens_mask takes it from char offsets.
#define _GNU_SOURCE
#include "data/chat.h"

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

// ---- number literals -------------------------------------------------------------------
// cJSON keeps a number as a double, but json.dumps writes the int 1 as "1" and the float
// 1.0 as "1.0": the literal decides. cJSON builds its tree in source order, so the k-th
// number node in preorder is the k-th number literal outside strings in the text.
typedef struct {
    const cJSON *node;
    size_t off, len;
} num_ref;

typedef struct {
    const char *json;
    size_t json_len;
    const cJSON *root;
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
    collect_numbers(t, t->root);
    size_t k = 0;
    int in_str = 0;
    for (size_t i = 0; i < t->json_len; i++) {
        const char c = t->json[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < t->json_len && strchr("0123456789+-.eE", t->json[j]) && t->json[j]) j++;
            if (k < t->n) t->refs[k].off = i, t->refs[k].len = j - i;
            k++;
            i = j - 1;
        }
    }
    if (k != t->n)
        return zt_err("the line holds %zu number literals but parses to %zu numbers (internal error reading "
                      "tool-call arguments)",
                      k, t->n);
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
    if (!t->json)
        return zt_err("%s: a number in tool-call arguments needs the JSON text it was written in (int or "
                      "float literal)",
                      where);
    if (!t->built && build_numbers(t)) return -1;
    num_ref key = {.node = v};
    const num_ref *r = bsearch(&key, t->refs, t->n, sizeof *t->refs, cmp_ref_node);
    if (!r) return zt_err("%s: number not found in the line (internal error)", where);
    const char *lit = t->json + r->off;
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
        const char *s;
        size_t n;
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
enum { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL };
static const char *const role_names[] = {"system", "user", "assistant", "tool"};

typedef struct {
    int role;
    const char *content;
    size_t content_len;
    const cJSON *msg;
} msg_view;

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

// One message's role and content, checked.
static int read_message(const cJSON *m, int i, msg_view *v) {
    char where[64];
    snprintf(where, sizeof where, "messages[%d]", i);
    if (!cJSON_IsObject(m))
        return zt_err("%s is %s, not an object with \"role\" and \"content\"", where, zt_json_type_name(m));
    const cJSON *role, *content;
    if (member(m, "role", where, &role)) return -1;
    if (!role) return zt_err("%s: no \"role\" member", where);
    if (!cJSON_IsString(role)) return zt_err("%s: role is %s, not a string", where, zt_json_type_name(role));
    v->role = -1;
    for (int r = 0; r < 4; r++)
        if (!strcmp(role->valuestring, role_names[r])) v->role = r;
    if (v->role < 0)
        return zt_err("%s: role \"%.40s\" is not one of system, user, assistant, tool", where, role->valuestring);
    snprintf(where, sizeof where, "messages[%d] (%s)", i, role_names[v->role]);
    if (member(m, "content", where, &content)) return -1;
    if (!content) return zt_err("%s: no \"content\" member", where);
    if (cJSON_IsNull(content))
        return zt_err("%s: content is null (transformers drops null members and the template then fails); give "
                      "\"\" for an empty turn",
                      where);
    if (!cJSON_IsString(content))
        return zt_err("%s: content is %s, not a string%s", where, zt_json_type_name(content),
                      cJSON_IsArray(content) ? " (lists of content parts are not supported)" : "");
    if (str_view(content, where, "content", &v->content, &v->content_len)) return -1;
    v->msg = m;
    return 0;
}

// The tool calls of an assistant message, as the template writes them after the content.
static int render_tool_calls(zt_chat *c, num_table *nt, const msg_view *v, int i, size_t content_len) {
    char where[96];
    snprintf(where, sizeof where, "messages[%d] (assistant)", i);
    const cJSON *calls;
    if (member(v->msg, "tool_calls", where, &calls)) return -1;
    if (!calls || cJSON_IsNull(calls)) return 0;
    if (!cJSON_IsArray(calls)) return zt_err("%s: tool_calls is %s, not an array", where, zt_json_type_name(calls));
    int k = 0;
    for (const cJSON *tc = calls->child; tc; tc = tc->next, k++) {
        snprintf(where, sizeof where, "messages[%d] (assistant): tool_calls[%d]", i, k);
        if (!cJSON_IsObject(tc)) return zt_err("%s is %s, not an object", where, zt_json_type_name(tc));
        if (k > 0 || content_len > 0) emits(c, "\n");
        // {"function": {"name", "arguments"}} (OpenAI) or {"name", "arguments"}
        const cJSON *fn, *call = tc, *name, *args;
        if (member(tc, "function", where, &fn)) return -1;
        if (fn && !cJSON_IsNull(fn)) {
            if (!cJSON_IsObject(fn)) return zt_err("%s: function is %s, not an object", where, zt_json_type_name(fn));
            if (!fn->child) return zt_err("%s: function is an empty object", where);
            call = fn;
            snprintf(where, sizeof where, "messages[%d] (assistant): tool_calls[%d].function", i, k);
        }
        if (member(call, "name", where, &name) || member(call, "arguments", where, &args)) return -1;
        const char *s;
        size_t n;
        if (!name) return zt_err("%s: no \"name\" member", where);
        if (str_view(name, where, "name", &s, &n)) return -1;
        if (!args) return zt_err("%s: no \"arguments\" member", where);
        emits(c, "<tool_call>\n{\"name\": \"");
        emit(c, s, n);
        emits(c, "\", \"arguments\": ");
        if (cJSON_IsString(args)) {  // a string is written as it is, not as JSON
            if (str_view(args, where, "arguments", &s, &n)) return -1;
            emit(c, s, n);
        } else {
            char w2[128];
            snprintf(w2, sizeof w2, "%s.arguments", where);
            if (tojson(nt, args, w2, &c->text)) return -1;
        }
        emits(c, "}\n</tool_call>");
    }
    return 0;
}

static int render(const cJSON *root, const char *field, num_table *nt, zt_chat_train rule, zt_chat *c) {
    if (!cJSON_IsObject(root))
        return zt_err("the line is %s, not a JSON object with a \"%s\" member", zt_json_type_name(root), field);
    const cJSON *msgs;
    if (member(root, field, "the line", &msgs)) return -1;
    if (!msgs) {
        char names[256] = "";
        size_t k = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, root) {
            int w = snprintf(names + k, sizeof names - k, "%s\"%s\"", k ? ", " : "", it->string);
            if (w < 0 || (size_t)w >= sizeof names - k) break;
            k += (size_t)w;
        }
        return zt_err("no \"%s\" member (the object has %s; choose one with --field)", field, k ? names : "none");
    }
    if (!cJSON_IsArray(msgs))
        return zt_err("member \"%s\" is %s, not an array of messages", field, zt_json_type_name(msgs));
    const int n = cJSON_GetArraySize(msgs);
    if (n == 0) return zt_err("member \"%s\" is an empty array: a conversation needs at least one message", field);
    msg_view *v = zt_xcalloc((size_t)n, sizeof *v);
    int rc = 0, i = 0;
    for (const cJSON *m = msgs->child; m && rc == 0; m = m->next, i++) rc = read_message(m, i, &v[i]);
    if (rc == 0 && rule != ZT_CHAT_TRAIN_ALL && v[n - 1].role != ROLE_ASSISTANT)
        rc = zt_err("the last message (messages[%d]) is from the %s, not the assistant: --train-on %s trains "
                    "assistant turns and needs a conversation that ends with one (--train-on all trains every "
                    "token)",
                    n - 1, role_names[v[n - 1].role], zt_chat_train_name(rule));
    if (rc) goto out;
    c->nmessages = n;

    // the last user message that is a query, not a wrapped tool response
    int lqi = n - 1;
    for (i = n - 1; i >= 0; i--)
        if (v[i].role == ROLE_USER && !(has_prefix(v[i].content, v[i].content_len, "<tool_response>") &&
                                        has_suffix(v[i].content, v[i].content_len, "</tool_response>"))) {
            lqi = i;
            break;
        }

    if (v[0].role == ROLE_SYSTEM) {
        emits(c, "<|im_start|>system\n");
        emit(c, v[0].content, v[0].content_len);
        emits(c, "<|im_end|>\n");
    }
    for (i = 0; i < n && rc == 0; i++) {
        const msg_view *m = &v[i];
        if (m->role == ROLE_USER || (m->role == ROLE_SYSTEM && i > 0)) {
            emits(c, "<|im_start|>");
            emits(c, role_names[m->role]);
            emits(c, "\n");
            emit(c, m->content, m->content_len);
            emits(c, "<|im_end|>\n");
        } else if (m->role == ROLE_ASSISTANT) {
            char where[64];
            snprintf(where, sizeof where, "messages[%d] (assistant)", i);
            const char *content = m->content, *reason = "";
            size_t cn = m->content_len, rn = 0;
            // transformers fills reasoning_content from the first non-null of these names
            static const char *const rnames[] = {"reasoning_content", "thinking", "reasoning"};
            const cJSON *r = NULL;
            for (int k = 0; k < 3 && rc == 0 && !r; k++) {
                const cJSON *x;
                rc = member(m->msg, rnames[k], where, &x);
                if (rc == 0 && x && !cJSON_IsNull(x)) r = x, rc = str_view(x, where, rnames[k], &reason, &rn);
            }
            if (rc) break;
            if (!r) {
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
            const size_t begin = c->text.n;
            if (i > lqi && (i == n - 1 || rn > 0)) {
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
            rc = render_tool_calls(c, nt, m, i, cn);
            emits(c, "<|im_end|>");
            add_span(c, begin, c->text.n);
            emits(c, "\n");
        } else if (m->role == ROLE_TOOL) {
            if (i == 0 || v[i - 1].role != ROLE_TOOL) emits(c, "<|im_start|>user");
            emits(c, "\n<tool_response>\n");
            emit(c, m->content, m->content_len);
            emits(c, "\n</tool_response>");
            if (i == n - 1 || v[i + 1].role != ROLE_TOOL) emits(c, "<|im_end|>\n");
        }
    }
    if (rc) goto out;
    if (rule == ZT_CHAT_TRAIN_ALL) {
        c->nspans = 0;
        add_span(c, 0, c->text.n);
    } else if (rule == ZT_CHAT_TRAIN_LAST && c->nspans > 1) {
        c->spans[0] = c->spans[c->nspans - 1];
        c->nspans = 1;
    }
out:
    free(v);
    return rc;
}

int zt_chat_render(const cJSON *root, const char *field, const char *json, size_t json_len, zt_chat_train rule,
                   zt_chat *out) {
    out->text.n = 0;
    out->nspans = 0;
    out->nmessages = 0;
    num_table nt = {.json = json, .json_len = json_len, .root = root};
    const int rc = render(root, field && field[0] ? field : "messages", &nt, rule, out);
    free(nt.refs);
    if (rc) {
        out->text.n = 0;
        out->nspans = 0;
    }
    return rc;
}

void zt_chat_free(zt_chat *c) {
    free(c->text.p);
    free(c->spans);
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
