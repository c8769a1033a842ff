// The syntax tree rendered: expressions with Python's semantics (truthiness, int/float
// arithmetic, str + list errors in Python's words), statements with jinja2's scoping (a for
// body's assignments stay in it; namespace() carries values out), {% generation %} spans counted
// as transformers' AssistantTracker counts them, and the limits on steps, output and memory.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/common.h"
#include "data/jinja_internal.h"

#define CHK(S) do { if ((S)->err) return jv_undef(NULL); } while (0)

int jerr(jstate *S, int status, const char *fmt, ...) {
    if (S->err) return -1;
    S->err = 1;
    S->res->status = status;
    S->res->line = S->line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(S->res->msg, sizeof S->res->msg, fmt, ap);
    va_end(ap);
    return -1;
}

// An undefined value used where it cannot be: its own message, as jinja2's Undefined fails.
jv jfail_undef(jstate *S, jv u) {
    if (u.s) jerr(S, ZT_JINJA_ERROR, "%s", u.s->p);
    else jerr(S, ZT_JINJA_ERROR, "undefined value");
    return jv_undef(NULL);
}

static jv lookup(jstate *S, const char *name) {
    size_t n = strlen(name);
    for (jframe *f = S->fr; f; f = f->parent) {
        jv *v = jd_get(f->vars, name, n);
        if (v) return *v;
    }
    jv *v = jd_get(S->globals, name, n);
    if (v) return *v;
    int id = jglobal_id(name);
    if (id > 0) { jv f = {.t = JV_FUNC}; f.i = id; return f; }
    char msg[160];
    snprintf(msg, sizeof msg, "'%s' is undefined", name);
    return jv_undef(js_new(S->a, msg, strlen(msg)));
}

static int step(jstate *S) {
    if (++S->steps > S->lim->max_steps)
        return jerr(S, ZT_JINJA_LIMIT, "the template ran more than %llu loop iterations and calls (limit)",
                    (unsigned long long)S->lim->max_steps);
    if (S->a->total > S->lim->max_memory)
        return jerr(S, ZT_JINJA_LIMIT, "the template's values passed %zu bytes (limit)", S->lim->max_memory);
    return 0;
}

// Room for n more bytes of values, checked before they are made (a string doubling in a loop
// would pass the limit by gigabytes before the next step).
static int room(jstate *S, size_t n) {
    if (S->a->total + n > S->lim->max_memory)
        return jerr(S, ZT_JINJA_LIMIT, "the template's values passed %zu bytes (limit)", S->lim->max_memory);
    return 0;
}

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT; }
static double fnum(jv v) { return v.t == JV_FLOAT ? v.f : (double)v.i; }

static jv type_error(jstate *S, int op, jv a, jv b) {
    static const char *sym[] = {"+", "-", "*", "/", "//", "%", "** or pow()"};
    if (op == OP_ADD && (a.t == JV_STR || a.t == JV_LIST))
        jerr(S, ZT_JINJA_ERROR, "can only concatenate %s (not \"%s\") to %s", jv_typename(a), jv_typename(b), jv_typename(a));
    else
        jerr(S, ZT_JINJA_ERROR, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op], jv_typename(a), jv_typename(b));
    return jv_undef(NULL);
}

static jv repeat(jstate *S, jv seq, int64_t k) {
    if (k < 0) k = 0;
    if (seq.t == JV_STR) {
        if ((double)seq.s->n * (double)k > (double)S->lim->max_output || room(S, seq.s->n * (size_t)k))
            return jerr(S, ZT_JINJA_LIMIT, "a string repeated past %zu bytes (limit)", S->lim->max_output), jv_undef(NULL);
        jstr *s = js_new(S->a, NULL, 0);
        s = ja_alloc(S->a, sizeof(jstr) + seq.s->n * (size_t)k + 1);
        s->n = seq.s->n * (size_t)k;
        for (int64_t i = 0; i < k; i++) memcpy(s->p + (size_t)i * seq.s->n, seq.s->p, seq.s->n);
        s->p[s->n] = 0;
        return jv_strv(s);
    }
    jlist *l = jl_new(S->a, seq.l->n * (size_t)k + 1);
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < seq.l->n; j++) jl_push(S->a, l, seq.l->v[j]);
    jv r = {.t = JV_LIST};
    r.l = l;
    return r;
}

static jv arith(jstate *S, int op, jv a, jv b) {
    if (a.t == JV_UNDEF) return jfail_undef(S, a);
    if (b.t == JV_UNDEF) return jfail_undef(S, b);
    if (is_num(a) && is_num(b)) {
        int fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
        double x = fnum(a), y = fnum(b);
        int64_t i = a.i, j = b.i;
        switch (op) {
        case OP_ADD: return fl ? jv_float(x + y) : jv_int(i + j);
        case OP_SUB: return fl ? jv_float(x - y) : jv_int(i - j);
        case OP_MUL: return fl ? jv_float(x * y) : jv_int(i * j);
        case OP_DIV:
            if (y == 0) return jerr(S, ZT_JINJA_ERROR, "division by zero"), jv_undef(NULL);
            return jv_float(x / y);
        case OP_FLOORDIV:
        case OP_MOD:
            if (y == 0) return jerr(S, ZT_JINJA_ERROR, "integer division or modulo by zero"), jv_undef(NULL);
            if (fl) return op == OP_FLOORDIV ? jv_float(floor(x / y)) : jv_float(x - y * floor(x / y));
            {
                int64_t q = i / j, r = i % j;
                if (r && ((r < 0) != (j < 0))) q--, r += j;
                return jv_int(op == OP_FLOORDIV ? q : r);
            }
        case OP_POW:
            if (!fl && j >= 0) {
                int64_t r = 1;
                for (int64_t k = 0; k < j; k++) r *= i;
                return jv_int(r);
            }
            return jv_float(pow(x, y));
        }
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        if (room(S, a.s->n + b.s->n)) return jv_undef(NULL);
        jstr *s = ja_alloc(S->a, sizeof(jstr) + a.s->n + b.s->n + 1);
        s->n = a.s->n + b.s->n;
        memcpy(s->p, a.s->p, a.s->n), memcpy(s->p + a.s->n, b.s->p, b.s->n), s->p[s->n] = 0;
        return jv_strv(s);
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST) {
        jlist *l = jl_new(S->a, a.l->n + b.l->n + 1);
        for (size_t k = 0; k < a.l->n; k++) jl_push(S->a, l, a.l->v[k]);
        for (size_t k = 0; k < b.l->n; k++) jl_push(S->a, l, b.l->v[k]);
        jv r = {.t = JV_LIST};
        r.l = l;
        return r;
    }
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(S, a, b.i);
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(S, b, a.i);
    return type_error(S, op, a, b);
}

static int cmp_order(jstate *S, jv a, jv b, int *out) {
    if (a.t == JV_UNDEF) return jfail_undef(S, a), -1;
    if (b.t == JV_UNDEF) return jfail_undef(S, b), -1;
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) *out = (a.i > b.i) - (a.i < b.i);
        else *out = (fnum(a) > fnum(b)) - (fnum(a) < fnum(b));
        return 0;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
        int c = memcmp(a.s->p, b.s->p, n);
        *out = c ? (c > 0) - (c < 0) : (a.s->n > b.s->n) - (a.s->n < b.s->n);
        return 0;
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (jv_eq(a.l->v[i], b.l->v[i])) continue;
            return cmp_order(S, a.l->v[i], b.l->v[i], out);
        }
        *out = (a.l->n > b.l->n) - (a.l->n < b.l->n);
        return 0;
    }
    return jerr(S, ZT_JINJA_ERROR, "'<' not supported between instances of '%s' and '%s'", jv_typename(a), jv_typename(b));
}

int jcontains(jstate *S, jv hay, jv needle) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            return jerr(S, ZT_JINJA_ERROR, "'in <string>' requires string as left operand, not %s", jv_typename(needle));
        if (!needle.s->n) return 1;
        for (size_t i = 0; i + needle.s->n <= hay.s->n; i++)
            if (!memcmp(hay.s->p + i, needle.s->p, needle.s->n)) return 1;
        return 0;
    case JV_LIST:
        for (size_t i = 0; i < hay.l->n; i++)
            if (jv_eq(hay.l->v[i], needle)) return 1;
        return 0;
    case JV_DICT: case JV_NS: return jd_getv(hay.d, needle) != NULL;
    case JV_UNDEF: return 0;
    default: return jerr(S, ZT_JINJA_ERROR, "argument of type '%s' is not iterable", jv_typename(hay));
    }
}

static jv compare(jstate *S, int op, jv a, jv b) {
    int c = 0;
    switch (op) {
    case OP_EQ: return jv_bool(jv_eq(a, b));
    case OP_NE: return jv_bool(!jv_eq(a, b));
    case OP_IN: case OP_NOTIN: {
        int r = jcontains(S, b, a);
        CHK(S);
        return jv_bool(op == OP_IN ? r : !r);
    }
    }
    if (cmp_order(S, a, b, &c)) return jv_undef(NULL);
    return jv_bool(op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0);
}

static jv concat(jstate *S, jv a, jv b) {
    if (room(S, (a.t == JV_STR ? a.s->n : 64) + (b.t == JV_STR ? b.s->n : 64))) return jv_undef(NULL);
    jbuf t = {0};
    jv_str_to(&t, a);
    jv_str_to(&t, b);
    jv r = jv_str(S->a, t.p ? t.p : "", t.n);
    free(t.p);
    return r;
}

// Python slicing obj[start:stop:step] on a list or a str (by code points).
static jv slice(jstate *S, jv obj, jv st, jv sp, jv stp) {
    if (obj.t == JV_UNDEF) return jfail_undef(S, obj);
    if (obj.t != JV_LIST && obj.t != JV_STR)
        return jerr(S, ZT_JINJA_ERROR, "'%s' object is not subscriptable", jv_typename(obj)), jv_undef(NULL);
    int64_t len = obj.t == JV_LIST ? (int64_t)obj.l->n : (int64_t)ju_len(obj.s->p, obj.s->n);
    int64_t k = stp.t == JV_NONE || stp.t == JV_UNDEF ? 1 : stp.i;
    if (k == 0) return jerr(S, ZT_JINJA_ERROR, "slice step cannot be zero"), jv_undef(NULL);
    int64_t lo, hi;
    if (st.t == JV_NONE || st.t == JV_UNDEF) lo = k > 0 ? 0 : len - 1;
    else {
        lo = st.i < 0 ? st.i + len : st.i;
        if (lo < 0) lo = k > 0 ? 0 : -1;
        if (lo >= len) lo = k > 0 ? len : len - 1;
    }
    if (sp.t == JV_NONE || sp.t == JV_UNDEF) hi = k > 0 ? len : -1;
    else {
        hi = sp.i < 0 ? sp.i + len : sp.i;
        if (hi < 0) hi = k > 0 ? 0 : -1;
        if (hi >= len) hi = k > 0 ? len : len - 1;
    }
    if (obj.t == JV_LIST) {
        jlist *l = jl_new(S->a, 4);
        for (int64_t i = lo; k > 0 ? i < hi : i > hi; i += k) jl_push(S->a, l, obj.l->v[i]);
        jv r = {.t = JV_LIST};
        r.l = l;
        return r;
    }
    jbuf t = {0};
    for (int64_t i = lo; k > 0 ? i < hi : i > hi; i += k) {
        size_t a = ju_off(obj.s->p, obj.s->n, i), b = ju_off(obj.s->p, obj.s->n, i + 1);
        jb_put(&t, obj.s->p + a, b - a);
    }
    jv r = jv_str(S->a, t.p ? t.p : "", t.n);
    free(t.p);
    return r;
}

typedef struct {
    jv *v;
    const char **kn;
    jv *kv;
    int n, nk;
} jargs;

static int eval_args(jstate *S, const jnode *n, jargs *A) {
    A->n = n->n, A->nk = n->nkw;
    A->v = ja_alloc(S->a, (size_t)(n->n + 1) * sizeof(jv));
    A->kv = ja_alloc(S->a, (size_t)(n->nkw + 1) * sizeof(jv));
    A->kn = n->kwn;
    for (int i = 0; i < n->n; i++) {
        A->v[i] = jeval(S, n->v[i]);
        if (S->err) return -1;
    }
    for (int i = 0; i < n->nkw; i++) {
        A->kv[i] = jeval(S, n->kwv[i]);
        if (S->err) return -1;
    }
    return 0;
}

static jv eval_call(jstate *S, const jnode *n) {
    const jnode *fn = n->a;
    jargs A;
    if (fn->kind == N_GETATTR) {
        jv obj = jeval(S, fn->a);
        CHK(S);
        if (obj.t == JV_UNDEF) return jfail_undef(S, obj);
        if (obj.t == JV_STR || obj.t == JV_DICT || obj.t == JV_LIST) {
            if (eval_args(S, n, &A)) return jv_undef(NULL);
            S->line = n->line;
            return jmethod(S, obj, fn->name, A.v, A.n, A.kn, A.kv, A.nk);
        }
    }
    jv f = jeval(S, fn);
    CHK(S);
    if (eval_args(S, n, &A)) return jv_undef(NULL);
    S->line = n->line;
    if (f.t == JV_FUNC) return jcall_global(S, (int)f.i, A.v, A.n, A.kn, A.kv, A.nk);
    if (f.t == JV_MACRO) return jcall_macro(S, f, A.v, A.n, A.kn, A.kv, A.nk, NULL);
    if (f.t == JV_UNDEF) return jfail_undef(S, f);
    return jerr(S, ZT_JINJA_ERROR, "'%s' object is not callable", jv_typename(f)), jv_undef(NULL);
}

static jv eval_seq(jstate *S, const jnode *n) {
    jv r = {.t = n->kind == N_DICT ? JV_DICT : JV_LIST};
    r.tuple = n->kind == N_TUPLE;
    if (n->kind == N_DICT) r.d = jd_new(S->a, (size_t)n->n / 2 + 1);
    else r.l = jl_new(S->a, (size_t)n->n + 1);
    for (int i = 0; i < n->n; i++) {
        jv v = jeval(S, n->v[i]);
        CHK(S);
        if (n->kind != N_DICT) { jl_push(S->a, r.l, v); continue; }
        jv val = jeval(S, n->v[++i]);
        CHK(S);
        jd_set(S->a, r.d, v, val);
    }
    return r;
}

jv jeval(jstate *S, const jnode *n) {
    S->line = n->line;
    switch (n->kind) {
    case N_CONST: return n->lit;
    case N_NAME: return lookup(S, n->name);
    case N_LIST: case N_TUPLE: case N_DICT: return eval_seq(S, n);
    case N_GETATTR: {
        jv o = jeval(S, n->a);
        CHK(S);
        return jgetattr(S, o, n->name, strlen(n->name));
    }
    case N_GETITEM: {
        jv o = jeval(S, n->a);
        CHK(S);
        jv k = jeval(S, n->b);
        CHK(S);
        return jgetitem(S, o, k);
    }
    case N_SLICE: {
        jv o = jeval(S, n->a), parts[3];
        CHK(S);
        const jnode *pn[3] = {n->b, n->c, n->d};
        for (int i = 0; i < 3; i++) {
            parts[i] = pn[i] ? jeval(S, pn[i]) : jv_none();
            CHK(S);
            if (parts[i].t != JV_NONE && parts[i].t != JV_INT && parts[i].t != JV_BOOL)
                return jerr(S, ZT_JINJA_ERROR, "slice indices must be integers or None"), jv_undef(NULL);
        }
        return slice(S, o, parts[0], parts[1], parts[2]);
    }
    case N_CALL: return eval_call(S, n);
    case N_FILTER: {
        jv x = jeval(S, n->a);
        CHK(S);
        jargs A;
        if (eval_args(S, n, &A)) return jv_undef(NULL);
        S->line = n->line;
        return jfilter(S, n->name, x, A.v, A.n, A.kn, A.kv, A.nk);
    }
    case N_TEST: {
        jv x = jeval(S, n->a);
        CHK(S);
        jargs A;
        if (eval_args(S, n, &A)) return jv_undef(NULL);
        S->line = n->line;
        int r = jtest(S, n->name, x, A.v, A.n);
        CHK(S);
        return jv_bool(n->op ? !r : r);
    }
    case N_BINOP: case N_CMP: {
        jv a = jeval(S, n->a);
        CHK(S);
        jv b = jeval(S, n->b);
        CHK(S);
        S->line = n->line;
        if (n->kind == N_CMP) return compare(S, n->op, a, b);
        if (n->op == OP_CONCAT) return concat(S, a, b);
        return arith(S, n->op, a, b);
    }
    case N_NOT: {
        jv a = jeval(S, n->a);
        CHK(S);
        return jv_bool(!jv_truthy(a));
    }
    case N_NEG: case N_POS: {
        jv a = jeval(S, n->a);
        CHK(S);
        if (a.t == JV_UNDEF) return jfail_undef(S, a);
        if (!is_num(a))
            return jerr(S, ZT_JINJA_ERROR, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', jv_typename(a)), jv_undef(NULL);
        if (n->kind == N_POS) return a.t == JV_BOOL ? jv_int(a.i) : a;
        return a.t == JV_FLOAT ? jv_float(-a.f) : jv_int(-a.i);
    }
    case N_AND: case N_OR: {
        jv a = jeval(S, n->a);
        CHK(S);
        if (jv_truthy(a) == (n->kind == N_OR)) return a;
        return jeval(S, n->b);
    }
    case N_COND: {
        jv c = jeval(S, n->b);
        CHK(S);
        if (jv_truthy(c)) return jeval(S, n->a);
        if (n->c) return jeval(S, n->c);
        return jv_undef(NULL);
    }
    }
    return jerr(S, ZT_JINJA_ERROR, "internal: node %d is not an expression", n->kind), jv_undef(NULL);
}

// ---- statements -------------------------------------------------------------------------------
static int out_put(jstate *S, const char *p, size_t n) {
    if (S->out->n + n > S->lim->max_output)
        return jerr(S, ZT_JINJA_LIMIT, "the template's output passed %zu bytes (limit)", S->lim->max_output);
    jb_put(S->out, p, n);
    return 0;
}

static void set_var(jstate *S, const char *name, jv v) { jd_setc(S->a, S->fr->vars, name, v); }

static int assign(jstate *S, const jnode *target, jv v) {
    if (target->kind == N_NAME) { set_var(S, target->name, v); return 0; }
    if (target->kind == N_GETATTR) {  // namespace attribute
        jv ns = jeval(S, target->a);
        if (S->err) return -1;
        if (ns.t != JV_NS) return jerr(S, ZT_JINJA_ERROR, "cannot assign attribute on non-namespace object");
        jd_setc(S->a, ns.d, target->name, v);
        return 0;
    }
    // tuple unpacking
    if (v.t != JV_LIST) return jerr(S, ZT_JINJA_ERROR, "cannot unpack non-iterable %s object", jv_typename(v));
    if ((int)v.l->n != target->n)
        return jerr(S, ZT_JINJA_ERROR, v.l->n > (size_t)target->n ? "too many values to unpack (expected %d)"
                                                                   : "not enough values to unpack (expected %d)", target->n);
    for (int i = 0; i < target->n; i++) set_var(S, target->v[i]->name, v.l->v[i]);
    return 0;
}

static jv capture(jstate *S, const jnode *body, int *rc) {
    jbuf b = {0}, *saved = S->out;
    S->out = &b;
    *rc = jexec(S, body);
    S->out = saved;
    jv r = jv_str(S->a, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

// the items a for loop walks: a list, a dict's keys, a string's characters
static jlist *iter_items(jstate *S, jv it) {
    jlist *l;
    switch (it.t) {
    case JV_LIST: return it.l;
    case JV_UNDEF: return jl_new(S->a, 1);
    case JV_DICT:
        l = jl_new(S->a, it.d->n + 1);
        for (size_t i = 0; i < it.d->n; i++) jl_push(S->a, l, it.d->k[i]);
        return l;
    case JV_STR:
        l = jl_new(S->a, it.s->n + 1);
        for (size_t i = 0; i < it.s->n;) {
            size_t j = i + 1;
            while (j < it.s->n && ((unsigned char)it.s->p[j] & 0xC0) == 0x80) j++;
            jl_push(S->a, l, jv_str(S->a, it.s->p + i, j - i));
            i = j;
        }
        return l;
    default:
        jerr(S, ZT_JINJA_ERROR, "'%s' object is not iterable", jv_typename(it));
        return NULL;
    }
}

static int exec_for(jstate *S, const jnode *n) {
    jv it = jeval(S, n->b);
    if (S->err) return -1;
    jlist *items = iter_items(S, it);
    if (!items) return -1;
    jframe fr = {.parent = S->fr}, *saved = S->fr;
    if (n->e) {  // {% for x in xs if cond %}: the loop sees only the items that pass
        jlist *kept = jl_new(S->a, items->n + 1);
        for (size_t i = 0; i < items->n; i++) {
            fr.vars = jd_new(S->a, 4);
            S->fr = &fr;
            int rc = assign(S, n->a, items->v[i]);
            jv c = rc ? jv_undef(NULL) : jeval(S, n->e);
            S->fr = saved;
            if (S->err) return -1;
            if (jv_truthy(c)) jl_push(S->a, kept, items->v[i]);
        }
        items = kept;
    }
    int rc = 0;
    jdict *vars = jd_new(S->a, 8);  // the body's scope, emptied for each item (nothing else refers to it)
    for (size_t i = 0; i < items->n; i++) {
        if (step(S)) return -1;
        vars->n = 0;
        fr.vars = vars;
        S->fr = &fr;
        jv lv = {.t = JV_LOOP};
        lv.lp = ja_alloc(S->a, sizeof(jloop));
        lv.lp->items = items, lv.lp->i = i;
        set_var(S, "loop", lv);
        rc = assign(S, n->a, items->v[i]);
        if (!rc) rc = jexec(S, n->c);
        S->fr = saved;
        if (rc < 0) return -1;
        if (rc == 1) break;
        rc = 0;
    }
    if (!items->n && n->d) return jexec(S, n->d);
    return 0;
}

static int exec_generation(jstate *S, const jnode *n) {
    size_t start = S->rootout->n;  // transformers: len("".join(rendered_blocks)) when the block runs
    int rc;
    jv body = capture(S, n->c, &rc);
    if (rc < 0) return -1;
    zt_jinja_result *r = S->res;
    if (r->nspans == r->spans_cap) {
        r->spans_cap = r->spans_cap ? 2 * r->spans_cap : 16;
        r->spans = realloc(r->spans, r->spans_cap * sizeof *r->spans);
        if (!r->spans) zt_fatal("out of memory (generation spans)");
    }
    r->spans[r->nspans][0] = start, r->spans[r->nspans][1] = start + body.s->n;
    r->nspans++;
    if (out_put(S, body.s->p, body.s->n)) return -1;
    return rc;
}

static int exec_body(jstate *S, const jnode *n) {
    for (int i = 0; i < n->n; i++) {
        int rc = jexec(S, n->v[i]);
        if (rc) return rc;
    }
    return 0;
}

int jexec(jstate *S, const jnode *n) {
    if (S->err) return -1;
    S->line = n->line;
    switch (n->kind) {
    case N_BODY: return exec_body(S, n);
    case N_DATA: return out_put(S, n->lit.s->p, n->lit.s->n);
    case N_OUTPUT: {
        jv v = jeval(S, n->a);
        if (S->err) return -1;
        if (v.t == JV_STR) return out_put(S, v.s->p, v.s->n);
        jbuf t = {0};
        jv_str_to(&t, v);
        int rc = out_put(S, t.p ? t.p : "", t.n);
        free(t.p);
        return rc;
    }
    case N_IF: {
        jv c = jeval(S, n->a);
        if (S->err) return -1;
        if (jv_truthy(c)) return jexec(S, n->b);
        return n->c ? jexec(S, n->c) : 0;
    }
    case N_FOR: return exec_for(S, n);
    case N_SET: {
        jv v = jeval(S, n->b);
        if (S->err) return -1;
        return assign(S, n->a, v);
    }
    case N_SETBLOCK: {
        int rc;
        jv v = capture(S, n->c, &rc);
        if (rc < 0) return -1;
        return assign(S, n->a, v);
    }
    case N_MACRO: {
        jv m = {.t = JV_MACRO};
        m.m = n;
        set_var(S, n->name, m);
        return 0;
    }
    case N_CALLBLOCK: {
        const jnode *c = n->a;
        jv f = jeval(S, c->a);
        if (S->err) return -1;
        if (f.t != JV_MACRO) return jerr(S, ZT_JINJA_ERROR, "a call block needs a macro");
        jargs A;
        if (eval_args(S, c, &A)) return -1;
        jv r = jcall_macro(S, f, A.v, A.n, A.kn, A.kv, A.nk, n);
        if (S->err) return -1;
        return out_put(S, r.s->p, r.s->n);
    }
    case N_GENERATION: return exec_generation(S, n);
    case N_BREAK: return 1;
    case N_CONTINUE: return 2;
    }
    return jerr(S, ZT_JINJA_ERROR, "internal: node %d is not a statement", n->kind);
}

jv jcall_macro(jstate *S, jv m, jv *args, int nargs, const char **kwn, jv *kwv, int nkw, const jnode *caller) {
    const jnode *mn = m.m;
    if (step(S)) return jv_undef(NULL);
    if (S->depth >= S->lim->max_depth)
        return jerr(S, ZT_JINJA_LIMIT, "macro calls nested deeper than %d (limit)", S->lim->max_depth), jv_undef(NULL);
    if (nargs > mn->nkw)
        return jerr(S, ZT_JINJA_ERROR, "macro '%s' takes not more than %d argument(s)", mn->name, mn->nkw), jv_undef(NULL);
    jframe fr = {.vars = jd_new(S->a, (size_t)mn->nkw + 2), .parent = S->root}, *saved = S->fr;
    S->fr = &fr;
    for (int i = 0; i < mn->nkw && !S->err; i++) {
        jv v = i < nargs ? args[i] : jv_undef(NULL);
        int given = i < nargs;
        for (int k = 0; k < nkw; k++)
            if (!strcmp(kwn[k], mn->kwn[i])) v = kwv[k], given = 1;
        if (!given) {
            if (mn->kwv[i]) v = jeval(S, mn->kwv[i]);
            else {
                char msg[200];
                snprintf(msg, sizeof msg, "parameter '%s' was not provided", mn->kwn[i]);
                v = jv_undef(js_new(S->a, msg, strlen(msg)));
            }
        }
        set_var(S, mn->kwn[i], v);
    }
    for (int k = 0; k < nkw && !S->err; k++) {
        int found = 0;
        for (int i = 0; i < mn->nkw; i++) found |= !strcmp(kwn[k], mn->kwn[i]);
        if (!found) jerr(S, ZT_JINJA_ERROR, "macro '%s' takes no keyword argument '%s'", mn->name, kwn[k]);
    }
    if (caller) {
        jv c = {.t = JV_MACRO};
        jnode *cm = ja_alloc(S->a, sizeof(jnode));
        memset(cm, 0, sizeof *cm);
        cm->kind = N_MACRO, cm->name = "caller", cm->c = caller->c, cm->line = caller->line;
        c.m = cm;
        set_var(S, "caller", c);
    }
    jv r = jv_undef(NULL);
    if (!S->err) {
        int rc;
        S->depth++;
        r = capture(S, mn->c, &rc);
        S->depth--;
    }
    S->fr = saved;
    return S->err ? jv_undef(NULL) : r;
}

// ---- the entry --------------------------------------------------------------------------------
struct zt_jinja_vars {
    jarena a;
    jdict *d;
};

zt_jinja_vars *zt_jinja_vars_new(void) {
    zt_jinja_vars *v = zt_xcalloc(1, sizeof *v);
    v->d = jd_new(&v->a, 16);
    return v;
}
void zt_jinja_vars_free(zt_jinja_vars *v) {
    if (!v) return;
    ja_free(&v->a);
    free(v);
}
void zt_jinja_vars_reset(zt_jinja_vars *v) {
    ja_free(&v->a);
    v->d = jd_new(&v->a, 16);
}

int zt_jinja_set_json(zt_jinja_vars *v, const char *name, const char *json, size_t n) {
    jv val;
    char err[200];
    if (jv_json_parse(&v->a, json, n, &val, err, sizeof err)) return zt_err("template variable %s: %s", name, err);
    jd_setc(&v->a, v->d, name, val);
    return 0;
}
int zt_jinja_set_str(zt_jinja_vars *v, const char *name, const char *s, size_t n) {
    jd_setc(&v->a, v->d, name, jv_str(&v->a, s, n));
    return 0;
}

// transformers' _normalize_chat_messages (null members dropped) and _alias_reasoning_fields
static jv hf_message(jarena *a, jv m) {
    if (m.t != JV_DICT) return m;
    jdict *d = jd_new(a, m.d->n + 2);
    for (size_t i = 0; i < m.d->n; i++)
        if (m.d->v[i].t != JV_NONE) jd_set(a, d, m.d->k[i], m.d->v[i]);
    static const char *fields[] = {"reasoning_content", "thinking", "reasoning"};
    jv *r = NULL;
    for (int i = 0; i < 3 && !r; i++) r = jd_get(d, fields[i], strlen(fields[i]));
    if (!r) { jv o = {.t = JV_DICT}; o.d = d; return o; }
    jv reasoning = *r;
    jdict *o = jd_new(a, d->n + 2);
    jd_setc(a, o, "thinking", reasoning);
    for (size_t i = 0; i < d->n; i++) jd_set(a, o, d->k[i], d->v[i]);
    jd_setc(a, o, "reasoning_content", reasoning);
    jv ov = {.t = JV_DICT};
    ov.d = o;
    return ov;
}

int zt_jinja_set_messages(zt_jinja_vars *v, const char *json, size_t n) {
    jv val;
    char err[200];
    if (jv_json_parse(&v->a, json, n, &val, err, sizeof err)) return zt_err("messages: %s", err);
    if (val.t != JV_LIST) return zt_err("messages: not a JSON array");
    for (size_t i = 0; i < val.l->n; i++) val.l->v[i] = hf_message(&v->a, val.l->v[i]);
    jd_setc(&v->a, v->d, "messages", val);
    return 0;
}

int zt_jinja_set_line(zt_jinja_vars *v, const char *json, size_t n, const char *field) {
    jv root;
    char err[200];
    if (jv_json_parse(&v->a, json, n, &root, err, sizeof err)) return zt_err("not JSON: %s", err);
    if (root.t != JV_DICT) return zt_err("the line is not a JSON object");
    if (!field || !*field) field = "messages";
    jv *m = jd_get(root.d, field, strlen(field));
    if (!m || m->t != JV_LIST) return zt_err("no \"%s\" array", field);
    for (size_t i = 0; i < m->l->n; i++) m->l->v[i] = hf_message(&v->a, m->l->v[i]);
    jd_setc(&v->a, v->d, "messages", *m);
    jv *tools = jd_get(root.d, "tools", 5);
    jd_setc(&v->a, v->d, "tools", tools ? *tools : jv_none());
    jv *docs = jd_get(root.d, "documents", 9);
    jd_setc(&v->a, v->d, "documents", docs ? *docs : jv_none());
    return 0;
}

static jlist *messages_list(zt_jinja_vars *v) {
    jv *m = jd_get(v->d, "messages", 8);
    return m && m->t == JV_LIST ? m->l : NULL;
}
size_t zt_jinja_messages_count(zt_jinja_vars *v) {
    jlist *l = messages_list(v);
    return l ? l->n : 0;
}
int zt_jinja_message_role_is(zt_jinja_vars *v, size_t i, const char *role) {
    jlist *l = messages_list(v);
    if (!l || i >= l->n || l->v[i].t != JV_DICT) return 0;
    jv *r = jd_get(l->v[i].d, "role", 4);
    return r && r->t == JV_STR && r->s->n == strlen(role) && !memcmp(r->s->p, role, r->s->n);
}
void zt_jinja_messages_prefix(zt_jinja_vars *v, size_t k) {
    jlist *l = messages_list(v);
    if (!l || k >= l->n) return;
    jlist *p = jl_new(&v->a, k ? k : 1);
    for (size_t i = 0; i < k; i++) jl_push(&v->a, p, l->v[i]);
    jv pv = {.t = JV_LIST};
    pv.l = p;
    jd_setc(&v->a, v->d, "messages", pv);
}

int zt_jinja_set_arg(zt_jinja_vars *v, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return zt_err("template variable '%s': expected NAME=VALUE", arg);
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
    const char *val = eq + 1;
    size_t n = strlen(val);
    if (!strcasecmp(val, "true") || !strcasecmp(val, "false")) {
        jd_setc(&v->a, v->d, name, jv_bool(tolower((unsigned char)val[0]) == 't'));
        return 0;
    }
    if (!strcasecmp(val, "none") || !strcasecmp(val, "null")) {
        jd_setc(&v->a, v->d, name, jv_none());
        return 0;
    }
    jv parsed;
    if (n && !jv_json_parse(&v->a, val, n, &parsed, NULL, 0)) {
        jd_setc(&v->a, v->d, name, parsed);
        return 0;
    }
    return zt_jinja_set_str(v, name, val, n);
}

int zt_jinja_render(const zt_jinja *t, zt_jinja_vars *vars, const zt_jinja_limits *lim_in, zt_jinja_result *res) {
    zt_jinja_limits lim = lim_in ? *lim_in : (zt_jinja_limits){0};
    if (!lim.max_steps) lim.max_steps = 10000000;
    if (!lim.max_output) lim.max_output = 64u << 20;
    if (!lim.max_memory) lim.max_memory = (size_t)1 << 30;
    if (!lim.max_depth) lim.max_depth = 200;
    jarena a = {0};
    jbuf out = {0};
    res->status = 0, res->msg[0] = 0, res->line = 0, res->nspans = 0;
    jframe root = {.vars = jd_new(&a, 16)};
    jstate S = {.a = &a, .t = t, .root = &root, .fr = &root, .globals = vars->d, .out = &out, .rootout = &out,
                .res = res, .lim = &lim, .now = lim.now ? lim.now : (int64_t)time(NULL)};
    jexec(&S, t->root);
    res->n = 0;
    if (!S.err) {
        if (res->cap < out.n + 1) {
            res->cap = out.n + 1;
            res->text = realloc(res->text, res->cap);
            if (!res->text) zt_fatal("out of memory (template output)");
        }
        if (out.n) memcpy(res->text, out.p, out.n);
        res->text[out.n] = 0;
        res->n = out.n;
    }
    free(out.p);
    ja_free(&a);
    return res->status;
}

void zt_jinja_result_free(zt_jinja_result *res) {
    free(res->text);
    free(res->spans);
    memset(res, 0, sizeof *res);
}
