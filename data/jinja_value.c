// Values as a chat template sees them (Python's None, bool, int, float, str, list, dict) in an
// arena, with Python's str()/repr() and json.dumps/json.loads, which the output depends on.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/jinja_internal.h"

void *ja_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->used + n > a->head->cap) {
        size_t cap = n > (1u << 20) ? n : (1u << 20);
        jchunk *c = zt_xmalloc(sizeof(jchunk) + cap);
        c->next = a->head, c->used = 0, c->cap = cap;
        a->head = c;
    }
    void *p = a->head->mem + a->head->used;
    a->head->used += n;
    a->total += n;
    return p;
}

void ja_free(jarena *a) {
    for (jchunk *c = a->head, *nx; c; c = nx) nx = c->next, free(c);
    a->head = NULL, a->total = 0;
}

jv jv_undef(jstr *hint) { jv v = {.t = JV_UNDEF}; v.s = hint; return v; }
jv jv_none(void) { jv v = {.t = JV_NONE}; return v; }
jv jv_bool(int b) { jv v = {.t = JV_BOOL}; v.i = b != 0; return v; }
jv jv_int(int64_t i) { jv v = {.t = JV_INT}; v.i = i; return v; }
jv jv_float(double f) { jv v = {.t = JV_FLOAT}; v.f = f; return v; }
jv jv_strv(jstr *s) { jv v = {.t = JV_STR}; v.s = s; return v; }

jstr *js_new(jarena *a, const char *p, size_t n) {
    jstr *s = ja_alloc(a, sizeof(jstr) + n + 1);
    s->n = n;
    if (n) memcpy(s->p, p, n);
    s->p[n] = 0;
    return s;
}
jv jv_str(jarena *a, const char *p, size_t n) { return jv_strv(js_new(a, p, n)); }
jv jv_cstr(jarena *a, const char *p) { return jv_str(a, p, strlen(p)); }

jlist *jl_new(jarena *a, size_t cap) {
    jlist *l = ja_alloc(a, sizeof(jlist));
    l->n = 0, l->cap = cap ? cap : 4;
    l->v = ja_alloc(a, l->cap * sizeof(jv));
    return l;
}
void jl_push(jarena *a, jlist *l, jv v) {
    if (l->n == l->cap) {
        jv *nv = ja_alloc(a, 2 * l->cap * sizeof(jv));
        memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv, l->cap *= 2;
    }
    l->v[l->n++] = v;
}
jdict *jd_new(jarena *a, size_t cap) {
    jdict *d = ja_alloc(a, sizeof(jdict));
    d->n = 0, d->cap = cap ? cap : 4;
    d->k = ja_alloc(a, d->cap * sizeof(jv));
    d->v = ja_alloc(a, d->cap * sizeof(jv));
    return d;
}
jv *jd_get(const jdict *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].s->n == n && !memcmp(d->k[i].s->p, k, n)) return &d->v[i];
    return NULL;
}
jv *jd_getv(const jdict *d, jv key) {
    if (key.t == JV_STR) return jd_get(d, key.s->p, key.s->n);
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], key)) return &d->v[i];
    return NULL;
}
void jd_set(jarena *a, jdict *d, jv key, jv val) {
    jv *p = jd_getv(d, key);
    if (p) { *p = val; return; }
    if (d->n == d->cap) {
        jv *nk = ja_alloc(a, 2 * d->cap * sizeof(jv)), *nv = ja_alloc(a, 2 * d->cap * sizeof(jv));
        memcpy(nk, d->k, d->n * sizeof(jv)), memcpy(nv, d->v, d->n * sizeof(jv));
        d->k = nk, d->v = nv, d->cap *= 2;
    }
    d->k[d->n] = key, d->v[d->n++] = val;
}
void jd_setc(jarena *a, jdict *d, const char *k, jv val) { jd_set(a, d, jv_cstr(a, k), val); }

int jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.s->n != 0;
    case JV_LIST: return v.l->n != 0;
    case JV_DICT: return v.d->n != 0;
    default: return 1;
    }
}

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT; }
static double num_f(jv v) { return v.t == JV_FLOAT ? v.f : (double)v.i; }

int jv_eq(jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return a.i == b.i;
        return num_f(a) == num_f(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: case JV_BIGINT: return a.s->n == b.s->n && !memcmp(a.s->p, b.s->p, a.s->n);
    case JV_LIST:
        if (a.l->n != b.l->n) return 0;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_eq(a.l->v[i], b.l->v[i])) return 0;
        return 1;
    case JV_DICT:
        if (a.d->n != b.d->n) return 0;
        for (size_t i = 0; i < a.d->n; i++) {
            jv *o = jd_getv(b.d, a.d->k[i]);
            if (!o || !jv_eq(a.d->v[i], *o)) return 0;
        }
        return 1;
    default: return a.d == b.d;
    }
}

const char *jv_typename(jv v) {
    static const char *names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
                                  "Namespace", "builtin_function_or_method", "Macro", "int", "LoopContext"};
    if (v.t == JV_LIST && v.tuple) return "tuple";
    return names[v.t];
}

// ---- text -------------------------------------------------------------------------------------
void jb_put(jbuf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *np = realloc(b->p, c);
        if (!np) zt_fatal("out of memory (%zu bytes of template output)", c);
        b->p = np, b->cap = c;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void jb_puts(jbuf *b, const char *s) { jb_put(b, s, strlen(s)); }
void jb_putc(jbuf *b, char c) { jb_put(b, &c, 1); }

// The p-digit neighbour of t ("[-]d.ddde+XX") one unit away in its last digit (dir +1 or -1),
// into out. 0, or -1 when the digits would leave d.ddd (a carry out of the first digit).
static int float_neighbour(const char *t, int dir, char *out, size_t outn) {
    snprintf(out, outn, "%s", t);
    char *e = strchr(out, 'e');
    if (!e) return -1;
    for (char *q = e - 1; q >= out; q--) {
        if (*q == '.') continue;
        if (*q < '0' || *q > '9') return -1;
        if (dir > 0 && *q < '9') { (*q)++; return 0; }
        if (dir < 0 && *q > '0') { (*q)--; return (q == out || (q == out + 1 && out[0] == '-')) && *q == '0' ? -1 : 0; }
        *q = dir > 0 ? '0' : '9';
    }
    return -1;
}

// repr(float): the shortest digits that read back (Python's repr, David Gay's shortest: of the
// p-digit strings that read back, the nearest), exponent form below 1e-4 and from 1e16.
void jv_float_repr(jbuf *b, double f) {
    char t[64], u[64];
    if (isnan(f)) { jb_puts(b, "nan"); return; }
    if (isinf(f)) { jb_puts(b, f < 0 ? "-inf" : "inf"); return; }
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*e", p - 1, f);
        double r = strtod(t, NULL);
        if (r == f) break;
        if (p < 17 && !float_neighbour(t, (r < f) == (f > 0) ? 1 : -1, u, sizeof u) && strtod(u, NULL) == f) {
            memcpy(t, u, sizeof t);
            break;
        }
    }
    // t = [-]d.ddde[+-]XX: digits and exponent
    char dig[32];
    int nd = 0, neg = t[0] == '-';
    const char *q = t + neg;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') dig[nd++] = *q;
    int e = atoi(q + 1);
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    if (neg) jb_putc(b, '-');
    if (e < -4 || e >= 16) {
        jb_putc(b, dig[0]);
        if (nd > 1) jb_putc(b, '.'), jb_put(b, dig + 1, nd - 1);
        snprintf(t, sizeof t, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        jb_puts(b, t);
    } else if (e < 0) {
        jb_puts(b, "0.");
        for (int i = 0; i < -e - 1; i++) jb_putc(b, '0');
        jb_put(b, dig, nd);
    } else {
        for (int i = 0; i <= e; i++) jb_putc(b, i < nd ? dig[i] : '0');
        jb_putc(b, '.');
        if (nd > e + 1) jb_put(b, dig + e + 1, nd - e - 1);
        else jb_putc(b, '0');
    }
}

static void str_repr(jbuf *b, const jstr *s) {
    int dq = memchr(s->p, '\'', s->n) && !memchr(s->p, '"', s->n);
    char q = dq ? '"' : '\'';
    jb_putc(b, q);
    for (size_t i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->p[i];
        char t[8];
        if (c == '\\') jb_puts(b, "\\\\");
        else if (c == (unsigned char)q) jb_putc(b, '\\'), jb_putc(b, q);
        else if (c == '\n') jb_puts(b, "\\n");
        else if (c == '\r') jb_puts(b, "\\r");
        else if (c == '\t') jb_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) snprintf(t, sizeof t, "\\x%02x", c), jb_puts(b, t);
        else if (c == 0xC2 && i + 1 < s->n && (unsigned char)s->p[i + 1] < 0xA0)  // U+0080..U+009F
            snprintf(t, sizeof t, "\\x%02x", (unsigned char)s->p[i + 1]), jb_puts(b, t), i++;
        else jb_putc(b, (char)c);
    }
    jb_putc(b, q);
}

void jv_repr_to(jbuf *b, jv v) {
    switch (v.t) {
    case JV_STR: str_repr(b, v.s); return;
    case JV_LIST:
        jb_putc(b, v.tuple ? '(' : '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jb_puts(b, ", ");
            jv_repr_to(b, v.l->v[i]);
        }
        if (v.tuple && v.l->n == 1) jb_putc(b, ',');
        jb_putc(b, v.tuple ? ')' : ']');
        return;
    case JV_DICT:
        jb_putc(b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) jb_puts(b, ", ");
            jv_repr_to(b, v.d->k[i]);
            jb_puts(b, ": ");
            jv_repr_to(b, v.d->v[i]);
        }
        jb_putc(b, '}');
        return;
    default: jv_str_to(b, v);
    }
}

void jv_str_to(jbuf *b, jv v) {
    char t[32];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: jb_puts(b, "None"); return;
    case JV_BOOL: jb_puts(b, v.i ? "True" : "False"); return;
    case JV_INT: snprintf(t, sizeof t, "%lld", (long long)v.i), jb_puts(b, t); return;
    case JV_FLOAT: jv_float_repr(b, v.f); return;
    case JV_STR: case JV_BIGINT: jb_put(b, v.s->p, v.s->n); return;
    case JV_NS:
        jb_puts(b, "<Namespace ");
        jv dv = {.t = JV_DICT};
        dv.d = v.d;
        jv_repr_to(b, dv);
        jb_putc(b, '>');
        return;
    case JV_FUNC: jb_puts(b, "<built-in function>"); return;
    case JV_MACRO: jb_puts(b, "<Macro>"); return;
    case JV_LOOP: jb_puts(b, "<LoopContext>"); return;
    default: jv_repr_to(b, v);
    }
}

// ---- json.dumps -------------------------------------------------------------------------------
static void json_str(jbuf *b, const char *p, size_t n, int ascii) {
    jb_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        char t[16];
        if (c == '"') jb_puts(b, "\\\"");
        else if (c == '\\') jb_puts(b, "\\\\");
        else if (c == '\n') jb_puts(b, "\\n");
        else if (c == '\r') jb_puts(b, "\\r");
        else if (c == '\t') jb_puts(b, "\\t");
        else if (c == '\b') jb_puts(b, "\\b");
        else if (c == '\f') jb_puts(b, "\\f");
        else if (c < 0x20 || (ascii && c == 0x7f)) snprintf(t, sizeof t, "\\u%04x", c), jb_puts(b, t);
        else if (c >= 0x80 && ascii) {
            uint32_t cp;
            int len = zt_utf8_decode_any((const unsigned char *)p + i, n - i, &cp);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else snprintf(t, sizeof t, "\\u%04x", cp);
            jb_puts(b, t);
            i += len - 1;
        } else jb_putc(b, (char)c);
    }
    jb_putc(b, '"');
}

static void json_nl(jbuf *b, const jjson_opts *o, int depth) {
    jb_putc(b, '\n');
    for (int i = 0; i < depth; i++) jb_put(b, o->indent, o->indent_n);
}

static int json_key_cmp(const void *x, const void *y) {
    const jv *a = *(const jv *const *)x, *b = *(const jv *const *)y;
    size_t n = a->s->n < b->s->n ? a->s->n : b->s->n;
    int c = memcmp(a->s->p, b->s->p, n);
    return c ? c : (a->s->n > b->s->n) - (a->s->n < b->s->n);
}

static int json_dict(jbuf *b, jv v, const jjson_opts *o, int depth, char *err, size_t errn) {
    if (!v.d->n) { jb_puts(b, "{}"); return 0; }
    size_t n = v.d->n;
    const jv **keys = zt_xmalloc(n * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = &v.d->k[i];
    if (o->sort_keys) qsort(keys, n, sizeof *keys, json_key_cmp);
    jb_putc(b, '{');
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i) jb_put(b, o->item_sep, o->item_sep_n);
        if (o->indent) json_nl(b, o, depth + 1);
        const jv *k = keys[i];
        size_t idx = (size_t)(k - v.d->k);
        if (k->t == JV_STR) json_str(b, k->s->p, k->s->n, o->ensure_ascii);
        else {
            jbuf t = {0};
            jv_str_to(&t, *k);
            json_str(b, t.p ? t.p : "", t.n, o->ensure_ascii);
            free(t.p);
        }
        jb_put(b, o->key_sep, o->key_sep_n);
        rc = jv_json_to(b, v.d->v[idx], o, depth + 1, err, errn);
    }
    free(keys);
    if (rc) return rc;
    if (o->indent) json_nl(b, o, depth);
    jb_putc(b, '}');
    return 0;
}

int jv_json_to(jbuf *b, jv v, const jjson_opts *o, int depth, char *err, size_t errn) {
    if (depth > 1000) return snprintf(err, errn, "maximum recursion depth exceeded"), -1;
    switch (v.t) {
    case JV_NONE: jb_puts(b, "null"); return 0;
    case JV_BOOL: jb_puts(b, v.i ? "true" : "false"); return 0;
    case JV_INT: case JV_BIGINT: jv_str_to(b, v); return 0;
    case JV_FLOAT:
        if (isnan(v.f)) jb_puts(b, "NaN");
        else if (isinf(v.f)) jb_puts(b, v.f < 0 ? "-Infinity" : "Infinity");
        else jv_float_repr(b, v.f);
        return 0;
    case JV_STR: json_str(b, v.s->p, v.s->n, o->ensure_ascii); return 0;
    case JV_LIST:
        if (!v.l->n) { jb_puts(b, "[]"); return 0; }
        jb_putc(b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jb_put(b, o->item_sep, o->item_sep_n);
            if (o->indent) json_nl(b, o, depth + 1);
            if (jv_json_to(b, v.l->v[i], o, depth + 1, err, errn)) return -1;
        }
        if (o->indent) json_nl(b, o, depth);
        jb_putc(b, ']');
        return 0;
    case JV_DICT: return json_dict(b, v, o, depth, err, errn);
    default:
        snprintf(err, errn, "Object of type %s is not JSON serializable", jv_typename(v));
        return -1;
    }
}

// ---- json.loads -------------------------------------------------------------------------------
typedef struct {
    jarena *a;
    const char *s, *e;
    char *err;
    size_t errn;
    int depth;
} jparse;

static void jp_ws(jparse *P) {
    while (P->s < P->e && (*P->s == ' ' || *P->s == '\t' || *P->s == '\n' || *P->s == '\r')) P->s++;
}
static int jp_fail(jparse *P, const char *what) {
    if (P->err) snprintf(P->err, P->errn, "%s", what);
    return -1;
}
static void put_utf8(jbuf *b, uint32_t cp) {
    char t[4];
    if (cp < 0x80) t[0] = (char)cp, jb_put(b, t, 1);
    else if (cp < 0x800) t[0] = (char)(0xC0 | cp >> 6), t[1] = (char)(0x80 | (cp & 63)), jb_put(b, t, 2);
    else if (cp < 0x10000)
        t[0] = (char)(0xE0 | cp >> 12), t[1] = (char)(0x80 | ((cp >> 6) & 63)), t[2] = (char)(0x80 | (cp & 63)),
        jb_put(b, t, 3);
    else
        t[0] = (char)(0xF0 | cp >> 18), t[1] = (char)(0x80 | ((cp >> 12) & 63)),
        t[2] = (char)(0x80 | ((cp >> 6) & 63)), t[3] = (char)(0x80 | (cp & 63)), jb_put(b, t, 4);
}
static int hex4(const char *p, uint32_t *cp) {
    *cp = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *cp = *cp * 16 + (uint32_t)d;
    }
    return 0;
}

static int jp_string(jparse *P, jstr **out) {
    jbuf b = {0};
    P->s++;
    for (;;) {
        if (P->s >= P->e) return free(b.p), jp_fail(P, "unterminated string");
        char c = *P->s++;
        if (c == '"') break;
        if ((unsigned char)c < 0x20) return free(b.p), jp_fail(P, "control character in string");
        if (c != '\\') { jb_putc(&b, c); continue; }
        if (P->s >= P->e) return free(b.p), jp_fail(P, "bad escape");
        c = *P->s++;
        const char *map = "\"\"\\\\//b\bf\fn\nr\rt\t";
        const char *m = strchr(map, c);
        if (c && c != 'u' && m && ((m - map) % 2 == 0)) { jb_putc(&b, m[1]); continue; }
        uint32_t cp, lo;
        if (c != 'u' || P->e - P->s < 4 || hex4(P->s, &cp)) return free(b.p), jp_fail(P, "bad escape");
        P->s += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && P->e - P->s >= 6 && P->s[0] == '\\' && P->s[1] == 'u' &&
            !hex4(P->s + 2, &lo) && lo >= 0xDC00 && lo < 0xE000)
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00), P->s += 6;
        put_utf8(&b, cp);
    }
    *out = js_new(P->a, b.p ? b.p : "", b.n);
    free(b.p);
    return 0;
}

static int jp_value(jparse *P, jv *out);
static int jp_container(jparse *P, jv *out) {
    int obj = *P->s++ == '{';
    if (++P->depth > 512) return jp_fail(P, "nesting too deep");
    jlist *l = obj ? NULL : jl_new(P->a, 4);
    jdict *d = obj ? jd_new(P->a, 4) : NULL;
    jp_ws(P);
    if (P->s < P->e && *P->s == (obj ? '}' : ']')) P->s++;
    else
        for (;;) {
            jv k, v;
            if (obj) {
                jp_ws(P);
                if (P->s >= P->e || *P->s != '"') return jp_fail(P, "expected a key");
                jstr *ks;
                if (jp_string(P, &ks)) return -1;
                jp_ws(P);
                if (P->s >= P->e || *P->s++ != ':') return jp_fail(P, "expected ':'");
                k = jv_strv(ks);
            }
            if (jp_value(P, &v)) return -1;
            if (obj) jd_set(P->a, d, k, v);
            else jl_push(P->a, l, v);
            jp_ws(P);
            if (P->s < P->e && *P->s == ',') { P->s++; continue; }
            if (P->s < P->e && *P->s == (obj ? '}' : ']')) { P->s++; break; }
            return jp_fail(P, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    P->depth--;
    out->t = obj ? JV_DICT : JV_LIST, out->tuple = 0;
    if (obj) out->d = d;
    else out->l = l;
    return 0;
}

static int jp_value(jparse *P, jv *out) {
    jp_ws(P);
    if (P->s >= P->e) return jp_fail(P, "unexpected end");
    char c = *P->s;
    if (c == '{' || c == '[') return jp_container(P, out);
    if (c == '"') {
        jstr *s;
        if (jp_string(P, &s)) return -1;
        *out = jv_strv(s);
        return 0;
    }
    static const char *words[] = {"true", "false", "null", "NaN", "Infinity", "-Infinity"};
    for (int i = 0; i < 6; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(P->e - P->s) >= n && !memcmp(P->s, words[i], n)) {
            P->s += n;
            *out = i == 0 ? jv_bool(1) : i == 1 ? jv_bool(0) : i == 2 ? jv_none() : jv_float(i == 3 ? NAN : i == 4 ? INFINITY : -INFINITY);
            return 0;
        }
    }
    const char *st = P->s;
    int isf = 0;
    if (P->s < P->e && *P->s == '-') P->s++;
    while (P->s < P->e && ((*P->s >= '0' && *P->s <= '9') || strchr(".eE+-", *P->s))) {
        if (strchr(".eE", *P->s)) isf = 1;
        P->s++;
    }
    if (P->s == st) return jp_fail(P, "unexpected character");
    char t[512];
    size_t n = (size_t)(P->s - st);
    if (n >= sizeof t) n = sizeof t - 1;
    memcpy(t, st, n), t[n] = 0;
    char *end;
    errno = 0;
    if (isf) *out = jv_float(strtod(t, &end));
    else *out = jv_int(strtoll(t, &end, 10));
    if (*end || n != (size_t)(P->s - st)) return jp_fail(P, "bad number");
    if (!isf && errno == ERANGE) {  // beyond int64: kept as its digits
        out->t = JV_BIGINT;
        out->s = js_new(P->a, st, n);
    }
    return 0;
}

int jv_json_parse(jarena *a, const char *s, size_t n, jv *out, char *err, size_t errn) {
    jparse P = {a, s, s + n, err, errn, 0};
    if (jp_value(&P, out)) return -1;
    jp_ws(&P);
    if (P.s != P.e) return jp_fail(&P, "extra data after the value");
    return 0;
}

// ---- UTF-8 ------------------------------------------------------------------------------------
size_t ju_len(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}
size_t ju_off(const char *s, size_t n, int64_t i) {
    size_t off = 0;
    if (i <= 0) return 0;
    for (; off < n; off++)
        if (((unsigned char)s[off] & 0xC0) != 0x80 && i-- == 0) return off;
    return n;
}
int ju_isspace(const char *s, size_t n, size_t *len) {
    unsigned char c = (unsigned char)s[0];
    *len = 1;
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
    uint32_t cp;
    *len = (size_t)zt_utf8_decode_any((const unsigned char *)s, n, &cp);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
