// Python's json.dumps(v, ensure_ascii=False), what the chat template's tojson filter writes for tool
// schemas and tool-call arguments: Python's int and float reprs (the literal in the line decides which),
// its string escapes, its separators, and the refusals where Python would read a value differently.
// defines: zt_pyjson_dumps, zt_pyjson_str_view
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_util.h"
#include "base/common.h"
#include "data/chat_internal.h"

// A string we will render: its bytes, which must be UTF-8.
int zt_pyjson_str_view(const cJSON *v, const char *where, const char *what, const char **s, size_t *n) {
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
// number node in preorder is the k-th number literal outside strings in the text. A
// conversation's values come from the line and from JSON held in its strings (ShareGPT):
// each tree is matched with its own text (zt_chat_conv.json).
static void collect_numbers(zt_pyjson_numbers *t, const cJSON *v) {
    if (cJSON_IsNumber(v)) {
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 64;
            t->refs = realloc(t->refs, t->cap * sizeof *t->refs);
            if (!t->refs) zt_fatal("out of host memory for %zu number literals", t->cap);
        }
        t->refs[t->n++] = (zt_pyjson_num_ref){.node = v};
    }
    for (const cJSON *c = (cJSON_IsArray(v) || cJSON_IsObject(v)) ? v->child : NULL; c; c = c->next)
        collect_numbers(t, c);
}

static int cmp_ref_node(const void *a, const void *b) {
    const zt_pyjson_num_ref *x = a, *y = b;
    return x->node < y->node ? -1 : x->node > y->node;
}

static int build_numbers(zt_pyjson_numbers *t) {
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
                if (first + k < t->n) t->refs[first + k] = (zt_pyjson_num_ref){t->refs[first + k].node, src->text, i, e - i};
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

static int number_json(zt_pyjson_numbers *t, const cJSON *v, const char *where, zt_buf *out) {
    if (!t->built && build_numbers(t)) return -1;
    zt_pyjson_num_ref key = {.node = v};
    const zt_pyjson_num_ref *r = bsearch(&key, t->refs, t->n, sizeof *t->refs, cmp_ref_node);
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
int zt_pyjson_dumps(zt_pyjson_numbers *t, const cJSON *v, const char *where, zt_buf *out) {
    if (cJSON_IsNull(v)) zt_buf_append(out, "null", 4);
    else if (cJSON_IsTrue(v)) zt_buf_append(out, "true", 4);
    else if (cJSON_IsFalse(v)) zt_buf_append(out, "false", 5);
    else if (cJSON_IsNumber(v)) return number_json(t, v, where, out);
    else if (cJSON_IsString(v)) {
        const char *s = NULL;
        size_t n = 0;
        if (zt_pyjson_str_view(v, where, "a string", &s, &n)) return -1;
        json_string(s, n, out);
    } else if (cJSON_IsArray(v)) {
        zt_buf_append(out, "[", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) zt_buf_append(out, ", ", 2);
            if (zt_pyjson_dumps(t, c, where, out)) return -1;
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
            if (zt_pyjson_dumps(t, c, where, out)) return -1;
        }
        zt_buf_append(out, "}", 1);
    } else {
        return zt_err("%s: a value of unknown JSON type", where);
    }
    return 0;
}
