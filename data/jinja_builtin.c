// The filters, tests, methods and globals chat templates call, with Python's and jinja2's
// behaviour (HF's tojson with ensure_ascii/indent/separators/sort_keys, attribute lookup that
// falls back to items, Python's str methods; case mapping by utf8proc's simple mappings).
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "base/common.h"
#include "data/jinja_internal.h"

static const char *const FILTERS[] = {"trim", "length", "count", "tojson", "default", "d", "string", "upper",
    "lower", "safe", "dictsort", "items", "replace", "join", "map", "list", "selectattr", "rejectattr", "select",
    "reject", "capitalize", "title", "first", "last", "int", "float", "abs", "reverse", "e", "escape", NULL};
static const char *const TESTS[] = {"defined", "undefined", "none", "string", "mapping", "iterable", "sequence",
    "number", "integer", "float", "boolean", "true", "false", "odd", "even", "divisibleby", "equalto", "eq",
    "ne", "in", "callable", "lower", "upper", "sameas", "gt", "lt", "ge", "le", "greaterthan", "lessthan", NULL};
static const char *const METHODS[] = {"get", "items", "keys", "values", "split", "rsplit", "strip", "lstrip",
    "rstrip", "startswith", "endswith", "upper", "lower", "title", "capitalize", "replace", "find", "rfind",
    "count", "index", "join", "splitlines", "isdigit", "isalpha", "isspace", "isalnum", "isupper", "islower", NULL};
static const char *const GLOBALS[] = {"", "range", "namespace", "dict", "raise_exception", "strftime_now", NULL};

static int in_list(const char *const *l, const char *name) {
    for (int i = 0; l[i]; i++)
        if (!strcmp(l[i], name)) return i;
    return -1;
}
int jfilter_known(const char *name) { return in_list(FILTERS, name) >= 0; }
int jtest_known(const char *name) { return in_list(TESTS, name) >= 0; }
int jmethod_known(const char *name) { return in_list(METHODS, name) >= 0; }
int jglobal_id(const char *name) { return name[0] ? in_list(GLOBALS, name) : -1; }

static jv list_v(jlist *l) { jv r = {.t = JV_LIST}; r.l = l; return r; }
static jv tuple2(jstate *S, jv a, jv b) {
    jlist *l = jl_new(S->a, 2);
    jl_push(S->a, l, a), jl_push(S->a, l, b);
    jv r = list_v(l);
    r.tuple = 1;
    return r;
}
static jv strv_of(jstate *S, jbuf *b) {
    jv r = jv_str(S->a, b->p ? b->p : "", b->n);
    free(b->p);
    return r;
}
static jv to_str(jstate *S, jv v) {
    if (v.t == JV_STR) return v;
    jbuf b = {0};
    jv_str_to(&b, v);
    return strv_of(S, &b);
}
static jv bad(jstate *S, const char *msg) { return jerr(S, ZT_JINJA_ERROR, "%s", msg), jv_undef(NULL); }

// jinja2's object_type_repr, for "'str object' has no attribute 'x'"
static const char *type_repr(jv v, char *t, size_t n) {  // t: the caller's buffer (workers render at once)
    if (v.t == JV_NONE) return "None";
    if (v.t == JV_NS) return "transformers.utils.chat_template_utils.TemplateNamespace object";
    snprintf(t, n, "%s object", jv_typename(v));
    return t;
}
static jv missing_attr(jstate *S, jv obj, const char *name, size_t n) {
    char msg[300];
    char t[64];
    snprintf(msg, sizeof msg, "'%s' has no attribute '%.*s'", type_repr(obj, t, sizeof t), (int)n, name);
    return jv_undef(js_new(S->a, msg, strlen(msg)));
}
static jv missing_item(jstate *S, jv obj, jv key) {
    jbuf b = {0};
    char t[64];
    jb_puts(&b, type_repr(obj, t, sizeof t));
    jb_puts(&b, " has no element ");
    jv_repr_to(&b, key);
    jv r = jv_undef(js_new(S->a, b.p, b.n));
    free(b.p);
    return r;
}

// a for loop's loop.index, .first, ... computed from the items and the position
static jv loop_attr(jstate *S, const jloop *lp, const char *name, size_t n, int *found) {
    int64_t len = (int64_t)lp->items->n, k = (int64_t)lp->i;
    *found = 1;
#define IS(s) (n == sizeof(s) - 1 && !memcmp(name, s, n))
    if (IS("index")) return jv_int(k + 1);
    if (IS("index0")) return jv_int(k);
    if (IS("revindex")) return jv_int(len - k);
    if (IS("revindex0")) return jv_int(len - k - 1);
    if (IS("first")) return jv_bool(k == 0);
    if (IS("last")) return jv_bool(k == len - 1);
    if (IS("length")) return jv_int(len);
    if (IS("depth")) return jv_int(1);
    if (IS("depth0")) return jv_int(0);
    if (IS("previtem")) return k > 0 ? lp->items->v[k - 1] : jv_undef(js_new(S->a, "there is no previous item", 25));
    if (IS("nextitem")) return k < len - 1 ? lp->items->v[k + 1] : jv_undef(js_new(S->a, "there is no next item", 21));
#undef IS
    *found = 0;
    return jv_undef(NULL);
}

jv jgetattr(jstate *S, jv obj, const char *name, size_t n) {
    if (obj.t == JV_UNDEF) return jfail_undef(S, obj);
    if (obj.t == JV_LOOP) {
        int found;
        jv v = loop_attr(S, obj.lp, name, n, &found);
        if (found) return v;
    }
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        jv *v = jd_get(obj.d, name, n);
        if (v) return *v;
    }
    return missing_attr(S, obj, name, n);
}

jv jgetitem(jstate *S, jv obj, jv key) {
    if (obj.t == JV_UNDEF) return jfail_undef(S, obj);
    if (obj.t == JV_DICT) {
        jv *v = jd_getv(obj.d, key);
        if (v) return *v;
    } else if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t len = obj.t == JV_LIST ? (int64_t)obj.l->n : (int64_t)ju_len(obj.s->p, obj.s->n);
        int64_t i = key.i < 0 ? key.i + len : key.i;
        if (i >= 0 && i < len) {
            if (obj.t == JV_LIST) return obj.l->v[i];
            size_t a = ju_off(obj.s->p, obj.s->n, i), b = ju_off(obj.s->p, obj.s->n, i + 1);
            return jv_str(S->a, obj.s->p + a, b - a);
        }
    } else if ((obj.t == JV_NS || obj.t == JV_LOOP) && key.t == JV_STR) return jgetattr(S, obj, key.s->p, key.s->n);
    if (key.t == JV_STR) return missing_attr(S, obj, key.s->p, key.s->n);
    return missing_item(S, obj, key);
}

// ---- string helpers ---------------------------------------------------------------------------
static int64_t length_of(jstate *S, jv v) {
    switch (v.t) {
    case JV_STR: return (int64_t)ju_len(v.s->p, v.s->n);
    case JV_LIST: return (int64_t)v.l->n;
    case JV_DICT: case JV_NS: return (int64_t)v.d->n;
    case JV_UNDEF: return 0;
    default: return jerr(S, ZT_JINJA_ERROR, "object of type '%s' has no len()", jv_typename(v)), -1;
    }
}

static int in_chars(const char *c, size_t cn, const char *p, size_t len) {
    for (size_t i = 0; i + len <= cn;) {
        size_t l = 1;
        while (i + l < cn && ((unsigned char)c[i + l] & 0xC0) == 0x80) l++;
        if (l == len && !memcmp(c + i, p, len)) return 1;
        i += l;
    }
    return 0;
}
// str.strip/lstrip/rstrip(chars): which ends, chars NULL for whitespace
static jv strip(jstate *S, jv s, int left, int right, jv chars) {
    const char *p = s.s->p;
    size_t b = 0, e = s.s->n, len;
    int ws = chars.t != JV_STR;
    while (left && b < e) {
        len = 1;
        while (b + len < e && ((unsigned char)p[b + len] & 0xC0) == 0x80) len++;
        if (ws ? !ju_isspace(p + b, e - b, &len) : !in_chars(chars.s->p, chars.s->n, p + b, len)) break;
        b += len;
    }
    while (right && e > b) {
        size_t k = e - 1;
        while (k > b && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
        len = e - k;
        size_t l2;
        if (ws ? !(ju_isspace(p + k, len, &l2) && l2 == len) : !in_chars(chars.s->p, chars.s->n, p + k, len)) break;
        e = k;
    }
    return jv_str(S->a, p + b, e - b);
}

// upper/lower/capitalize/title by code point with Unicode's simple case mappings (utf8proc):
// Python's full mappings differ only where one letter becomes several ("ß".upper() is "SS" there).
static jv case_map(jstate *S, jv s, int mode) {  // 0 upper, 1 lower, 2 capitalize, 3 title
    jbuf b = {0};
    int prev_cased = 0;
    for (size_t i = 0; i < s.s->n;) {
        uint32_t cp;
        int len = zt_utf8_decode_any((const unsigned char *)s.s->p + i, s.s->n - i, &cp);
        int up = mode == 0 || (mode == 2 && i == 0) || (mode == 3 && !prev_cased);
        int32_t m = up ? (mode >= 2 ? utf8proc_totitle((int32_t)cp) : utf8proc_toupper((int32_t)cp))
                       : utf8proc_tolower((int32_t)cp);
        prev_cased = utf8proc_tolower((int32_t)cp) != (int32_t)cp || utf8proc_toupper((int32_t)cp) != (int32_t)cp;
        utf8proc_uint8_t enc[4];
        if (len == 1 && cp >= 0x80) jb_put(&b, s.s->p + i, 1);  // a stray byte stays as it is
        else jb_put(&b, enc, (size_t)utf8proc_encode_char(m, enc));
        i += (size_t)len;
    }
    return strv_of(S, &b);
}

static jv split(jstate *S, jv s, jv sep, int64_t maxsplit) {
    jlist *l = jl_new(S->a, 4);
    const char *p = s.s->p;
    size_t n = s.s->n, i = 0, len;
    if (sep.t != JV_STR) {  // runs of whitespace, ends dropped
        for (;;) {
            while (i < n && ju_isspace(p + i, n - i, &len)) i += len;
            if (i >= n) break;
            size_t st = i;
            if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) {
                size_t e = n;
                jv t = jv_str(S->a, p + st, e - st);
                t = strip(S, t, 0, 1, jv_none());
                jl_push(S->a, l, t);
                break;
            }
            while (i < n && !ju_isspace(p + i, n - i, &len)) i += len;
            jl_push(S->a, l, jv_str(S->a, p + st, i - st));
        }
        return list_v(l);
    }
    if (!sep.s->n) return bad(S, "empty separator");
    size_t st = 0;
    for (i = 0; i + sep.s->n <= n;) {
        if ((maxsplit < 0 || (int64_t)l->n < maxsplit) && !memcmp(p + i, sep.s->p, sep.s->n)) {
            jl_push(S->a, l, jv_str(S->a, p + st, i - st));
            i += sep.s->n, st = i;
        } else i++;
    }
    jl_push(S->a, l, jv_str(S->a, p + st, n - st));
    return list_v(l);
}

static jv replace(jstate *S, jv s, jv old, jv new_, int64_t count) {
    if (old.t != JV_STR || new_.t != JV_STR) return bad(S, "replace() argument must be str");
    jbuf b = {0};
    const char *p = s.s->p;
    size_t n = s.s->n, i = 0;
    int64_t done = 0;
    if (!old.s->n) {
        for (size_t k = 0; k <= n; k++) {
            if (count < 0 || done < count) jb_put(&b, new_.s->p, new_.s->n), done++;
            if (k < n) jb_putc(&b, p[k]);
        }
        return strv_of(S, &b);
    }
    while (i < n) {
        if ((count < 0 || done < count) && i + old.s->n <= n && !memcmp(p + i, old.s->p, old.s->n)) {
            jb_put(&b, new_.s->p, new_.s->n);
            i += old.s->n, done++;
        } else jb_putc(&b, p[i++]);
    }
    return strv_of(S, &b);
}

static int affix(jv s, jv x, int end) {
    if (x.t != JV_STR || x.s->n > s.s->n) return 0;
    return !memcmp(s.s->p + (end ? s.s->n - x.s->n : 0), x.s->p, x.s->n);
}
static jv starts_ends(jstate *S, jv s, jv x, int end) {
    if (x.t == JV_LIST && x.tuple) {
        for (size_t i = 0; i < x.l->n; i++)
            if (affix(s, x.l->v[i], end)) return jv_bool(1);
        return jv_bool(0);
    }
    if (x.t != JV_STR)
        return jerr(S, ZT_JINJA_ERROR, "%s first arg must be str or a tuple of str, not %s",
                    end ? "endswith" : "startswith", jv_typename(x)), jv_undef(NULL);
    return jv_bool(affix(s, x, end));
}

static jv find(jv s, jv x, int rev) {
    if (x.t != JV_STR) return jv_int(-1);
    int64_t found = -1;
    for (size_t i = 0; i + x.s->n <= s.s->n; i++)
        if (!memcmp(s.s->p + i, x.s->p, x.s->n)) {
            found = (int64_t)ju_len(s.s->p, i);
            if (!rev) break;
        }
    return jv_int(found);
}

// ---- methods ----------------------------------------------------------------------------------
static jv kwarg(const char **kwn, jv *kwv, int nkw, const char *name, jv *args, int nargs, int pos, jv dflt) {
    for (int i = 0; i < nkw; i++)
        if (!strcmp(kwn[i], name)) return kwv[i];
    return pos < nargs ? args[pos] : dflt;
}

static jv dict_items(jstate *S, jv d, int what) {  // 0 items, 1 keys, 2 values
    jlist *l = jl_new(S->a, d.d->n + 1);
    for (size_t i = 0; i < d.d->n; i++)
        jl_push(S->a, l, what == 0 ? tuple2(S, d.d->k[i], d.d->v[i]) : what == 1 ? d.d->k[i] : d.d->v[i]);
    return list_v(l);
}

static jv str_method(jstate *S, jv s, const char *m, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    jv none = jv_none();
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = kwarg(kwn, kwv, nkw, "sep", a, na, 0, none);
        jv mx = kwarg(kwn, kwv, nkw, "maxsplit", a, na, 1, jv_int(-1));
        if (!strcmp(m, "rsplit") && mx.i >= 0) return bad(S, "rsplit with maxsplit is not supported");
        return split(S, s, sep, mx.i);
    }
    if (!strcmp(m, "strip")) return strip(S, s, 1, 1, na ? a[0] : none);
    if (!strcmp(m, "lstrip")) return strip(S, s, 1, 0, na ? a[0] : none);
    if (!strcmp(m, "rstrip")) return strip(S, s, 0, 1, na ? a[0] : none);
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        if (na != 1) return bad(S, "startswith/endswith take one argument here");
        return starts_ends(S, s, a[0], m[0] == 'e');
    }
    if (!strcmp(m, "upper")) return case_map(S, s, 0);
    if (!strcmp(m, "lower")) return case_map(S, s, 1);
    if (!strcmp(m, "capitalize")) return case_map(S, case_map(S, s, 1), 2);
    if (!strcmp(m, "title")) return case_map(S, s, 3);
    if (!strcmp(m, "replace")) {
        if (na < 2) return bad(S, "replace expected at least 2 arguments");
        return replace(S, s, a[0], a[1], na > 2 ? a[2].i : -1);
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind")) return na ? find(s, a[0], m[0] == 'r') : bad(S, "find expected an argument");
    if (!strcmp(m, "count")) {
        if (!na || a[0].t != JV_STR || !a[0].s->n) return bad(S, "count expected a non-empty str");
        int64_t c = 0;
        for (size_t i = 0; i + a[0].s->n <= s.s->n;)
            if (!memcmp(s.s->p + i, a[0].s->p, a[0].s->n)) c++, i += a[0].s->n;
            else i++;
        return jv_int(c);
    }
    if (!strcmp(m, "join")) {
        if (!na || a[0].t != JV_LIST) return bad(S, "join expected a list");
        jbuf b = {0};
        for (size_t i = 0; i < a[0].l->n; i++) {
            if (a[0].l->v[i].t != JV_STR) return free(b.p), bad(S, "sequence item: expected str instance");
            if (i) jb_put(&b, s.s->p, s.s->n);
            jb_put(&b, a[0].l->v[i].s->p, a[0].l->v[i].s->n);
        }
        return strv_of(S, &b);
    }
    if (!strcmp(m, "splitlines")) {
        jlist *l = jl_new(S->a, 4);
        size_t st = 0;
        for (size_t i = 0; i < s.s->n; i++)
            if (s.s->p[i] == '\n') jl_push(S->a, l, jv_str(S->a, s.s->p + st, i - st)), st = i + 1;
        if (st < s.s->n) jl_push(S->a, l, jv_str(S->a, s.s->p + st, s.s->n - st));
        return list_v(l);
    }
    if (!strncmp(m, "is", 2)) {
        int ok = s.s->n > 0;
        for (size_t i = 0; i < s.s->n && ok; i++) {
            unsigned char c = (unsigned char)s.s->p[i];
            ok = !strcmp(m, "isdigit") ? isdigit(c) : !strcmp(m, "isalpha") ? isalpha(c) : !strcmp(m, "isspace") ? isspace(c)
                 : !strcmp(m, "isalnum") ? isalnum(c) : !strcmp(m, "isupper") ? !islower(c) : !isupper(c);
        }
        return jv_bool(ok);
    }
    return jfail_undef(S, missing_attr(S, s, m, strlen(m)));
}

jv jmethod(jstate *S, jv obj, const char *m, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    if (obj.t == JV_STR) return str_method(S, obj, m, a, na, kwn, kwv, nkw);
    if (obj.t == JV_DICT) {
        if (!strcmp(m, "get")) {
            if (!na) return bad(S, "get expected at least 1 argument, got 0");
            jv *v = jd_getv(obj.d, a[0]);
            return v ? *v : na > 1 ? a[1] : jv_none();
        }
        if (!strcmp(m, "items")) return dict_items(S, obj, 0);
        if (!strcmp(m, "keys")) return dict_items(S, obj, 1);
        if (!strcmp(m, "values")) return dict_items(S, obj, 2);
        jv f = jgetattr(S, obj, m, strlen(m));  // a member that holds a macro
        if (f.t == JV_MACRO) return jcall_macro(S, f, a, na, kwn, kwv, nkw, NULL);
        if (f.t == JV_UNDEF) return jfail_undef(S, f);
        return jerr(S, ZT_JINJA_ERROR, "'%s' object is not callable", jv_typename(f)), jv_undef(NULL);
    }
    if (obj.t == JV_LIST && (!strcmp(m, "index") || !strcmp(m, "count")) && na == 1) {
        int64_t c = 0;
        for (size_t i = 0; i < obj.l->n; i++)
            if (jv_eq(obj.l->v[i], a[0])) {
                if (m[0] == 'i') return jv_int((int64_t)i);
                c++;
            }
        if (m[0] == 'i') return bad(S, "value is not in list");
        return jv_int(c);
    }
    return jfail_undef(S, missing_attr(S, obj, m, strlen(m)));
}

// ---- tests ------------------------------------------------------------------------------------
int jtest(jstate *S, const char *t, jv x, jv *a, int na) {
    jv y = na ? a[0] : jv_undef(NULL);
    if (!strcmp(t, "defined")) return x.t != JV_UNDEF;
    if (!strcmp(t, "undefined")) return x.t == JV_UNDEF;
    if (!strcmp(t, "none")) return x.t == JV_NONE;
    if (!strcmp(t, "string")) return x.t == JV_STR;
    if (!strcmp(t, "mapping")) return x.t == JV_DICT;
    if (!strcmp(t, "iterable")) return x.t == JV_STR || x.t == JV_LIST || x.t == JV_DICT || x.t == JV_UNDEF;
    if (!strcmp(t, "sequence")) return x.t == JV_STR || x.t == JV_LIST || x.t == JV_DICT || x.t == JV_UNDEF;
    if (!strcmp(t, "number")) return x.t == JV_INT || x.t == JV_FLOAT || x.t == JV_BOOL || x.t == JV_BIGINT;
    if (!strcmp(t, "integer")) return x.t == JV_INT || x.t == JV_BIGINT;
    if (!strcmp(t, "float")) return x.t == JV_FLOAT;
    if (!strcmp(t, "boolean")) return x.t == JV_BOOL;
    if (!strcmp(t, "true")) return x.t == JV_BOOL && x.i;
    if (!strcmp(t, "false")) return x.t == JV_BOOL && !x.i;
    if (!strcmp(t, "callable")) return x.t == JV_FUNC || x.t == JV_MACRO;
    if (!strcmp(t, "odd") || !strcmp(t, "even") || !strcmp(t, "divisibleby")) {
        if (x.t != JV_INT && x.t != JV_BOOL) return jerr(S, ZT_JINJA_ERROR, "test '%s' needs an integer", t);
        if (t[0] == 'd') return y.t == JV_INT && y.i ? x.i % y.i == 0 : jerr(S, ZT_JINJA_ERROR, "divisibleby needs a non-zero integer");
        return (int)((x.i % 2 + 2) % 2) == (t[0] == 'o');
    }
    if (!strcmp(t, "equalto") || !strcmp(t, "eq")) return jv_eq(x, y);
    if (!strcmp(t, "ne")) return !jv_eq(x, y);
    if (!strcmp(t, "sameas")) return x.t == y.t && (x.t == JV_NONE || x.t == JV_UNDEF || (x.t == JV_BOOL && x.i == y.i) || jv_eq(x, y));
    if (!strcmp(t, "in")) return jcontains(S, y, x);
    if (!strcmp(t, "lower") || !strcmp(t, "upper")) {
        if (x.t != JV_STR) return 0;
        jv m = case_map(S, x, t[0] == 'l');
        return jv_eq(m, x);
    }
    int c;
    double dx = x.t == JV_FLOAT ? x.f : (double)x.i, dy = y.t == JV_FLOAT ? y.f : (double)y.i;
    if ((x.t != JV_INT && x.t != JV_FLOAT) || (y.t != JV_INT && y.t != JV_FLOAT))
        return jerr(S, ZT_JINJA_ERROR, "test '%s' compares numbers here", t);
    c = (dx > dy) - (dx < dy);
    if (!strcmp(t, "gt") || !strcmp(t, "greaterthan")) return c > 0;
    if (!strcmp(t, "lt") || !strcmp(t, "lessthan")) return c < 0;
    if (!strcmp(t, "ge")) return c >= 0;
    return c <= 0;
}

// ---- filters ----------------------------------------------------------------------------------
static jv f_tojson(jstate *S, jv x, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    jv ea = kwarg(kwn, kwv, nkw, "ensure_ascii", a, na, 0, jv_bool(0));
    jv ind = kwarg(kwn, kwv, nkw, "indent", a, na, 1, jv_none());
    jv sep = kwarg(kwn, kwv, nkw, "separators", a, na, 2, jv_none());
    jv sk = kwarg(kwn, kwv, nkw, "sort_keys", a, na, 3, jv_bool(0));
    jjson_opts o = {.ensure_ascii = jv_truthy(ea), .sort_keys = jv_truthy(sk), .item_sep = ", ", .item_sep_n = 2,
                    .key_sep = ": ", .key_sep_n = 2};
    char spaces[64];
    if (ind.t == JV_INT) {
        int k = ind.i < 0 ? 0 : ind.i > 63 ? 63 : (int)ind.i;
        memset(spaces, ' ', (size_t)k);
        o.indent = spaces, o.indent_n = (size_t)k;
    } else if (ind.t == JV_STR) o.indent = ind.s->p, o.indent_n = ind.s->n;
    if (o.indent) o.item_sep = ",", o.item_sep_n = 1;
    if (sep.t == JV_LIST && sep.l->n == 2 && sep.l->v[0].t == JV_STR && sep.l->v[1].t == JV_STR) {
        o.item_sep = sep.l->v[0].s->p, o.item_sep_n = sep.l->v[0].s->n;
        o.key_sep = sep.l->v[1].s->p, o.key_sep_n = sep.l->v[1].s->n;
    }
    jbuf b = {0};
    char err[200];
    if (jv_json_to(&b, x, &o, 0, err, sizeof err)) return free(b.p), bad(S, err);
    return strv_of(S, &b);
}

static int key_less(jstate *S, jv a, jv b, int cs) {
    if (!cs && a.t == JV_STR) a = case_map(S, a, 1);
    if (!cs && b.t == JV_STR) b = case_map(S, b, 1);
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
        int c = memcmp(a.s->p, b.s->p, n);
        return c ? c < 0 : a.s->n < b.s->n;
    }
    double x = a.t == JV_FLOAT ? a.f : (double)a.i, y = b.t == JV_FLOAT ? b.f : (double)b.i;
    return x < y;
}

static jv f_dictsort(jstate *S, jv x, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    if (x.t == JV_UNDEF) return jfail_undef(S, x);  // jinja2 calls value.items()
    if (x.t != JV_DICT) return bad(S, "Can only get item pairs from a mapping.");
    int cs = jv_truthy(kwarg(kwn, kwv, nkw, "case_sensitive", a, na, 0, jv_bool(0)));
    int by_value = 0;
    jv by = kwarg(kwn, kwv, nkw, "by", a, na, 1, jv_none());
    if (by.t == JV_STR && !strcmp(by.s->p, "value")) by_value = 1;
    int rev = jv_truthy(kwarg(kwn, kwv, nkw, "reverse", a, na, 2, jv_bool(0)));
    jv items = dict_items(S, x, 0);
    jlist *l = items.l;
    for (size_t i = 1; i < l->n; i++)  // stable insertion sort: dicts here are small
        for (size_t j = i; j > 0; j--) {
            jv p = l->v[j - 1].l->v[by_value], q = l->v[j].l->v[by_value];
            if (!(rev ? key_less(S, p, q, cs) : key_less(S, q, p, cs))) break;
            jv t = l->v[j]; l->v[j] = l->v[j - 1]; l->v[j - 1] = t;
        }
    return items;
}

static jv f_list(jstate *S, jv x);
static jv f_select(jstate *S, const char *name, jv x, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    int attr = !strcmp(name, "selectattr") || !strcmp(name, "rejectattr");
    int keep = !strcmp(name, "selectattr") || !strcmp(name, "select");
    if (x.t != JV_LIST) x = f_list(S, x);  // a string's characters, a dict's keys
    if (S->err) return jv_undef(NULL);
    if (attr && (!na || a[0].t != JV_STR)) return bad(S, "selectattr/rejectattr need an attribute name");
    int ti = attr ? 1 : 0;
    (void)kwn, (void)kwv, (void)nkw;
    const char *test = na > ti && a[ti].t == JV_STR ? a[ti].s->p : NULL;
    if (test && !jtest_known(test)) return jerr(S, ZT_JINJA_ERROR, "No test named '%s'.", test), jv_undef(NULL);
    jlist *l = jl_new(S->a, x.l->n + 1);
    for (size_t i = 0; i < x.l->n; i++) {
        jv v = x.l->v[i];
        if (attr) {
            if (v.t == JV_DICT || v.t == JV_NS) {
                jv *p = jd_get(v.d, a[0].s->p, a[0].s->n);
                v = p ? *p : jv_undef(NULL);
            } else v = jv_undef(NULL);
        }
        int r = test ? jtest(S, test, v, a + ti + 1, na - ti - 1) : jv_truthy(v);
        if (S->err) return jv_undef(NULL);
        if (r == keep) jl_push(S->a, l, x.l->v[i]);
    }
    return list_v(l);
}

static jv f_map(jstate *S, jv x, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    jlist *in = x.t == JV_LIST ? x.l : NULL, *l;
    if (x.t == JV_UNDEF) return list_v(jl_new(S->a, 1));
    if (x.t == JV_DICT) in = dict_items(S, x, 1).l;
    if (!in) return bad(S, "map needs a list here");
    l = jl_new(S->a, in->n + 1);
    jv attr = kwarg(kwn, kwv, nkw, "attribute", NULL, 0, 0, jv_undef(NULL));
    jv dflt = kwarg(kwn, kwv, nkw, "default", NULL, 0, 0, jv_undef(NULL));
    for (size_t i = 0; i < in->n; i++) {
        jv v = in->v[i];
        if (attr.t == JV_STR) {
            v = v.t == JV_UNDEF ? jfail_undef(S, v) : jgetattr(S, v, attr.s->p, attr.s->n);
            if (v.t == JV_UNDEF && dflt.t != JV_UNDEF) v = dflt;
        } else if (na && a[0].t == JV_STR) {
            if (!jfilter_known(a[0].s->p)) return jerr(S, ZT_JINJA_ERROR, "No filter named '%s'.", a[0].s->p), jv_undef(NULL);
            v = jfilter(S, a[0].s->p, v, a + 1, na - 1, NULL, NULL, 0);
        } else return bad(S, "map needs a filter name or attribute=");
        if (S->err) return jv_undef(NULL);
        jl_push(S->a, l, v);
    }
    return list_v(l);
}

static jv f_join(jstate *S, jv x, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    jv sep = kwarg(kwn, kwv, nkw, "d", a, na, 0, jv_str(S->a, "", 0));
    jv attr = kwarg(kwn, kwv, nkw, "attribute", a, na, 1, jv_none());
    if (x.t == JV_UNDEF) return jv_str(S->a, "", 0);
    jlist *l = x.t == JV_LIST ? x.l : x.t == JV_DICT ? dict_items(S, x, 1).l : NULL;
    if (x.t == JV_STR) return x;  // "".join(str): the characters joined by sep
    if (!l) return jerr(S, ZT_JINJA_ERROR, "'%s' object is not iterable", jv_typename(x)), jv_undef(NULL);
    jbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i) jv_str_to(&b, sep);
        jv v = l->v[i];
        if (attr.t == JV_STR) v = jgetattr(S, v, attr.s->p, attr.s->n);
        if (S->err) return free(b.p), jv_undef(NULL);
        jv_str_to(&b, v);
    }
    return strv_of(S, &b);
}

static jv f_list(jstate *S, jv x) {
    if (x.t == JV_LIST) {
        jlist *l = jl_new(S->a, x.l->n + 1);
        for (size_t i = 0; i < x.l->n; i++) jl_push(S->a, l, x.l->v[i]);
        return list_v(l);
    }
    if (x.t == JV_DICT) return dict_items(S, x, 1);
    if (x.t == JV_UNDEF) return list_v(jl_new(S->a, 1));
    if (x.t == JV_STR) {
        jlist *l = jl_new(S->a, x.s->n + 1);
        for (size_t i = 0; i < x.s->n;) {
            size_t j = i + 1;
            while (j < x.s->n && ((unsigned char)x.s->p[j] & 0xC0) == 0x80) j++;
            jl_push(S->a, l, jv_str(S->a, x.s->p + i, j - i));
            i = j;
        }
        return list_v(l);
    }
    return jerr(S, ZT_JINJA_ERROR, "'%s' object is not iterable", jv_typename(x)), jv_undef(NULL);
}

static jv f_number(jstate *S, jv x, jv *a, int na, int to_int) {
    if (x.t == JV_UNDEF) return jfail_undef(S, x);  // int(Undefined) raises
    jv dflt = na ? a[0] : to_int ? jv_int(0) : jv_float(0);
    if (x.t == JV_INT || x.t == JV_BOOL) return to_int ? jv_int(x.i) : jv_float((double)x.i);
    if (x.t == JV_FLOAT) return to_int ? jv_int((int64_t)x.f) : x;
    if (x.t == JV_STR) {
        jv t = strip(S, x, 1, 1, jv_none());
        char *end;
        if (to_int) {
            long long v = strtoll(t.s->p, &end, 10);
            if (t.s->n && !*end) return jv_int(v);
        }
        double d = strtod(t.s->p, &end);
        if (t.s->n && !*end) return to_int ? jv_int((int64_t)d) : jv_float(d);
    }
    return dflt;
}

jv jfilter(jstate *S, const char *f, jv x, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    if (!strcmp(f, "default") || !strcmp(f, "d")) {
        jv dv = kwarg(kwn, kwv, nkw, "default_value", a, na, 0, jv_str(S->a, "", 0));
        int boolean = jv_truthy(kwarg(kwn, kwv, nkw, "boolean", a, na, 1, jv_bool(0)));
        return x.t == JV_UNDEF || (boolean && !jv_truthy(x)) ? dv : x;
    }
    if (!strcmp(f, "tojson")) return f_tojson(S, x, a, na, kwn, kwv, nkw);
    if (!strcmp(f, "length") || !strcmp(f, "count")) {
        int64_t n = length_of(S, x);
        return S->err ? jv_undef(NULL) : jv_int(n);
    }
    if (!strcmp(f, "string") || !strcmp(f, "safe") || !strcmp(f, "e") || !strcmp(f, "escape")) return to_str(S, x);
    if (!strcmp(f, "items")) {
        if (x.t == JV_UNDEF) return list_v(jl_new(S->a, 1));
        if (x.t != JV_DICT) return bad(S, "Can only get item pairs from a mapping.");
        return dict_items(S, x, 0);
    }
    if (!strcmp(f, "dictsort")) return f_dictsort(S, x, a, na, kwn, kwv, nkw);
    if (!strcmp(f, "join")) return f_join(S, x, a, na, kwn, kwv, nkw);
    if (!strcmp(f, "map")) return f_map(S, x, a, na, kwn, kwv, nkw);
    if (!strcmp(f, "list")) return f_list(S, x);
    if (!strcmp(f, "selectattr") || !strcmp(f, "rejectattr") || !strcmp(f, "select") || !strcmp(f, "reject"))
        return f_select(S, f, x, a, na, kwn, kwv, nkw);
    if (!strcmp(f, "first") || !strcmp(f, "last")) {
        jv l = f_list(S, x);
        if (S->err) return l;
        if (!l.l->n) {
            char msg[64];
            snprintf(msg, sizeof msg, "No %s item, sequence was empty.", f);
            return jv_undef(js_new(S->a, msg, strlen(msg)));
        }
        return l.l->v[f[0] == 'f' ? 0 : l.l->n - 1];
    }
    if (!strcmp(f, "int") || !strcmp(f, "float")) return f_number(S, x, a, na, f[0] == 'i');
    if (!strcmp(f, "abs")) {
        if (x.t == JV_UNDEF) return jfail_undef(S, x);
        if (x.t == JV_FLOAT) return jv_float(x.f < 0 ? -x.f : x.f);
        if (x.t == JV_INT || x.t == JV_BOOL) return jv_int(x.i < 0 ? -x.i : x.i);
        return jerr(S, ZT_JINJA_ERROR, "bad operand type for abs(): '%s'", jv_typename(x)), jv_undef(NULL);
    }
    if (!strcmp(f, "reverse")) {
        jv l = x.t == JV_STR ? f_list(S, x) : f_list(S, x);
        if (S->err) return l;
        jlist *r = jl_new(S->a, l.l->n + 1);
        for (size_t i = l.l->n; i-- > 0;) jl_push(S->a, r, l.l->v[i]);
        if (x.t != JV_STR) return list_v(r);
        jbuf b = {0};
        for (size_t i = 0; i < r->n; i++) jb_put(&b, r->v[i].s->p, r->v[i].s->n);
        return strv_of(S, &b);
    }
    // the string filters: their argument as str (jinja2 calls str() on it / soft_str)
    jv s = to_str(S, x);
    if (!strcmp(f, "trim")) return strip(S, s, 1, 1, na ? a[0] : jv_none());
    if (!strcmp(f, "upper")) return case_map(S, s, 0);
    if (!strcmp(f, "lower")) return case_map(S, s, 1);
    if (!strcmp(f, "capitalize")) return case_map(S, case_map(S, s, 1), 2);
    if (!strcmp(f, "title")) return case_map(S, case_map(S, s, 1), 3);
    if (!strcmp(f, "replace")) {
        if (na < 2) return bad(S, "replace needs old and new");
        return replace(S, s, to_str(S, a[0]), to_str(S, a[1]), na > 2 ? a[2].i : -1);
    }
    return jerr(S, ZT_JINJA_ERROR, "No filter named '%s'.", f), jv_undef(NULL);
}

// ---- globals ----------------------------------------------------------------------------------
jv jcall_global(jstate *S, int id, jv *a, int na, const char **kwn, jv *kwv, int nkw) {
    const char *g = GLOBALS[id];
    if (!strcmp(g, "raise_exception")) {
        jv m = to_str(S, na ? a[0] : jv_str(S->a, "", 0));
        jerr(S, ZT_JINJA_RAISED, "%s", m.s->p);
        return jv_undef(NULL);
    }
    if (!strcmp(g, "range")) {
        int64_t st = 0, sp, k = 1;
        for (int i = 0; i < na; i++)
            if (a[i].t != JV_INT && a[i].t != JV_BOOL) return bad(S, "range() arguments must be integers");
        if (na == 1) sp = a[0].i;
        else if (na >= 2) st = a[0].i, sp = a[1].i, k = na > 2 ? a[2].i : 1;
        else return bad(S, "range expected at least 1 argument, got 0");
        if (!k) return bad(S, "range() arg 3 must not be zero");
        int64_t cnt = k > 0 ? (sp > st ? (sp - st + k - 1) / k : 0) : (st > sp ? (st - sp - k - 1) / -k : 0);
        if ((uint64_t)cnt > S->lim->max_steps)
            return jerr(S, ZT_JINJA_LIMIT, "range of %lld items passes the step limit", (long long)cnt), jv_undef(NULL);
        jlist *l = jl_new(S->a, (size_t)cnt + 1);
        for (int64_t i = 0; i < cnt; i++) jl_push(S->a, l, jv_int(st + i * k));
        return list_v(l);
    }
    if (!strcmp(g, "namespace") || !strcmp(g, "dict")) {
        jdict *d = jd_new(S->a, (size_t)nkw + 4);
        if (na == 1 && a[0].t == JV_DICT)
            for (size_t i = 0; i < a[0].d->n; i++) jd_set(S->a, d, a[0].d->k[i], a[0].d->v[i]);
        else if (na) return bad(S, "namespace()/dict() take keyword arguments or one mapping here");
        for (int i = 0; i < nkw; i++) jd_setc(S->a, d, kwn[i], kwv[i]);
        jv r = {.t = g[0] == 'n' ? JV_NS : JV_DICT};
        r.d = d;
        return r;
    }
    if (!strcmp(g, "strftime_now")) {
        if (na != 1 || a[0].t != JV_STR) return bad(S, "strftime_now takes one format string");
        time_t t = (time_t)S->now;
        struct tm tm;
        gmtime_r(&t, &tm);
        char buf[512];
        size_t n = strftime(buf, sizeof buf, a[0].s->p, &tm);
        return jv_str(S->a, buf, n);
    }
    return bad(S, "unknown global");
}
