// Tokens -> syntax tree, following jinja2's parser (precedence, filters and tests after
// postfix, tuples, the statements chat templates use). Anything else is refused here, when the
// template is loaded, naming file:line:col and the construct.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/jinja_internal.h"

typedef struct {
    jarena *a;
    jtok *t;
    size_t i, n;
    const char *file;
    int failed;
    int has_gen;
} jparser;

static jtok *cur(jparser *P) { return &P->t[P->i]; }
static jtok *peek(jparser *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }
static int is_op(const jtok *t, const char *op) {
    return t->type == TK_OP && t->n == strlen(op) && !memcmp(t->p, op, t->n);
}
static int is_name(const jtok *t, const char *name) {
    return t->type == TK_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}
static jnode *fail(jparser *P, const jtok *t, const char *fmt, const char *what) {
    if (!P->failed) {
        char msg[300];
        snprintf(msg, sizeof msg, fmt, what);
        zt_err("%s:%d:%d: %s", P->file, t->line, t->col, msg);
    }
    P->failed = 1;
    return NULL;
}
static const char *tokname(jparser *P, const jtok *t) {
    static const char *names[] = {"end of template", "text", "'{{'", "'}}'", "'{%'", "'%}'"};
    if (t->type <= TK_BLOCK_END) return names[t->type];
    char *s = ja_alloc(P->a, t->n + 3);
    snprintf(s, t->n + 3, "'%.*s'", (int)t->n, t->p);
    return s;
}
static jnode *node(jparser *P, int kind, const jtok *t) {
    jnode *n = ja_alloc(P->a, sizeof(jnode));
    memset(n, 0, sizeof *n);
    n->kind = kind, n->line = t->line, n->col = t->col;
    return n;
}
static const char *tokstr(jparser *P, const jtok *t) {
    char *s = ja_alloc(P->a, t->n + 1);
    memcpy(s, t->p, t->n), s[t->n] = 0;
    return s;
}
static int expect_op(jparser *P, const char *op) {
    if (!is_op(cur(P), op)) {
        char what[64];
        snprintf(what, sizeof what, "expected '%s', got %s", op, tokname(P, cur(P)));
        fail(P, cur(P), "%s", what);
        return -1;
    }
    P->i++;
    return 0;
}
static const char *expect_name(jparser *P) {
    if (cur(P)->type != TK_NAME) return fail(P, cur(P), "expected a name, got %s", tokname(P, cur(P))), NULL;
    return tokstr(P, &P->t[P->i++]);
}

// a growable child list
typedef struct {
    jnode **v;
    int n, cap;
    const char **kn;
    jnode **kv;
    int nk, kcap;
} kids;
static void kid(jparser *P, kids *k, jnode *c) {
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 4;
        jnode **v = ja_alloc(P->a, (size_t)cap * sizeof *v);
        if (k->n) memcpy(v, k->v, (size_t)k->n * sizeof *v);
        k->v = v, k->cap = cap;
    }
    k->v[k->n++] = c;
}
static void kwkid(jparser *P, kids *k, const char *name, jnode *c) {
    if (k->nk == k->kcap) {
        int cap = k->kcap ? 2 * k->kcap : 4;
        const char **kn = ja_alloc(P->a, (size_t)cap * sizeof *kn);
        jnode **kv = ja_alloc(P->a, (size_t)cap * sizeof *kv);
        if (k->nk) memcpy(kn, k->kn, (size_t)k->nk * sizeof *kn), memcpy(kv, k->kv, (size_t)k->nk * sizeof *kv);
        k->kn = kn, k->kv = kv, k->kcap = cap;
    }
    k->kn[k->nk] = name, k->kv[k->nk++] = c;
}
static void give(jnode *n, kids *k) { n->v = k->v, n->n = k->n, n->kwn = k->kn, n->kwv = k->kv, n->nkw = k->nk; }

static jnode *p_expr(jparser *P);
static jnode *p_or(jparser *P);
static jnode *p_unary(jparser *P, int with_filter);
static jnode *p_primary(jparser *P);

static jnode *p_tuple(jparser *P, int simplified, int explicit_parens) {
    jtok *t0 = cur(P);
    kids k = {0};
    int comma = 0;
    for (;;) {
        if (k.n) {
            if (!is_op(cur(P), ",")) break;
            P->i++, comma = 1;
        }
        jtok *c = cur(P);
        if (c->type == TK_BLOCK_END || c->type == TK_VAR_END || is_op(c, ")") || is_name(c, "in") ||
            c->type == TK_EOF)
            break;
        if (is_op(c, "=") && k.n) break;
        jnode *e = simplified ? p_primary(P) : p_expr(P);
        if (!e) return NULL;
        kid(P, &k, e);
    }
    if (!comma) {
        if (k.n) return k.v[0];
        if (!explicit_parens) return fail(P, t0, "expected an expression, got %s", tokname(P, t0));
    }
    jnode *n = node(P, N_TUPLE, t0);
    give(n, &k);
    return n;
}

// (args), after the '(' : positional and name=value arguments
static int p_args(jparser *P, kids *k) {
    P->i++;
    while (!is_op(cur(P), ")")) {
        if (k->n || k->nk)
            if (expect_op(P, ",")) return -1;
        if (is_op(cur(P), ")")) break;
        if (is_op(cur(P), "*") || is_op(cur(P), "**")) return fail(P, cur(P), "%s", "*args/**kwargs in a call are not supported"), -1;
        if (cur(P)->type == TK_NAME && is_op(peek(P, 1), "=")) {
            const char *name = tokstr(P, cur(P));
            P->i += 2;
            jnode *v = p_expr(P);
            if (!v) return -1;
            kwkid(P, k, name, v);
        } else {
            if (k->nk) return fail(P, cur(P), "%s", "positional argument after a keyword argument"), -1;
            jnode *v = p_expr(P);
            if (!v) return -1;
            kid(P, k, v);
        }
    }
    P->i++;
    return 0;
}

static jnode *p_subscript(jparser *P, jnode *obj, jtok *t) {
    P->i++;
    jnode *parts[3] = {0};
    int np = 0, slice = 0;
    for (;;) {
        if (is_op(cur(P), ":")) { slice = 1, np++, P->i++; if (np > 2) return fail(P, cur(P), "%s", "bad slice"); continue; }
        if (is_op(cur(P), "]")) break;
        if (parts[np]) return fail(P, cur(P), "expected ']', got %s", tokname(P, cur(P)));
        if (!(parts[np] = p_expr(P))) return NULL;
    }
    P->i++;
    jnode *n = node(P, slice ? N_SLICE : N_GETITEM, t);
    n->a = obj;
    if (slice) n->b = parts[0], n->c = parts[1], n->d = parts[2];
    else {
        if (!parts[0]) return fail(P, t, "%s", "empty subscript");
        n->b = parts[0];
    }
    return n;
}

static jnode *p_postfix(jparser *P, jnode *n) {
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, ".")) {
            P->i++;
            jtok *a = cur(P);
            jnode *g = node(P, N_GETATTR, t);
            g->a = n;
            if (a->type == TK_NAME) g->name = tokstr(P, a);
            else if (a->type == TK_INT) {  // x.0 is x[0]
                g->kind = N_GETITEM;
                g->b = node(P, N_CONST, a), g->b->lit = jv_int(a->i);
            } else return fail(P, a, "expected an attribute name, got %s", tokname(P, a));
            P->i++;
            n = g;
        } else if (is_op(t, "[")) {
            if (!(n = p_subscript(P, n, t))) return NULL;
        } else if (is_op(t, "(")) {
            jnode *c = node(P, N_CALL, t);
            kids k = {0};
            if (p_args(P, &k)) return NULL;
            c->a = n;
            give(c, &k);
            if (n->kind == N_GETATTR && !jmethod_known(n->name))
                return fail(P, t, "the method '%s' is not supported by zerotrain's Jinja engine", n->name);
            n = c;
        } else return n;
    }
}

static jnode *p_filter_test(jparser *P, jnode *n) {
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, "|")) {
            P->i++;
            jtok *nt = cur(P);
            jnode *f = node(P, N_FILTER, nt);
            if (!(f->name = expect_name(P))) return NULL;
            if (!jfilter_known(f->name)) return fail(P, nt, "the filter '%s' is not supported by zerotrain's Jinja engine", f->name);
            kids k = {0};
            if (is_op(cur(P), "(") && p_args(P, &k)) return NULL;
            f->a = n;
            give(f, &k);
            n = f;
        } else if (is_name(t, "is")) {
            P->i++;
            jnode *f = node(P, N_TEST, t);
            if (is_name(cur(P), "not")) f->op = 1, P->i++;
            jtok *nt = cur(P);
            if (!(f->name = expect_name(P))) return NULL;
            if (!jtest_known(f->name)) return fail(P, nt, "the test '%s' is not supported by zerotrain's Jinja engine", f->name);
            kids k = {0};
            jtok *c = cur(P);
            if (is_op(c, "(")) {
                if (p_args(P, &k)) return NULL;
            } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
                        is_op(c, "[") || is_op(c, "{")) &&
                       !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
                if (is_name(c, "is")) return fail(P, c, "%s", "'is is' is not valid");
                jnode *arg = p_primary(P);
                if (!arg || !(arg = p_postfix(P, arg))) return NULL;
                kid(P, &k, arg);
            }
            f->a = n;
            give(f, &k);
            n = f;
        } else if (is_op(t, "(")) {
            jnode *c = node(P, N_CALL, t);
            kids k = {0};
            if (p_args(P, &k)) return NULL;
            c->a = n;
            give(c, &k);
            n = c;
        } else return n;
    }
}

static jnode *p_literal_seq(jparser *P, jtok *t) {
    int dict = is_op(t, "{");
    const char *close = dict ? "}" : "]";
    P->i++;
    kids k = {0};
    while (!is_op(cur(P), close)) {
        if (k.n && expect_op(P, ",")) return NULL;
        if (is_op(cur(P), close)) break;
        jnode *e = p_expr(P);
        if (!e) return NULL;
        kid(P, &k, e);
        if (dict) {
            if (expect_op(P, ":")) return NULL;
            if (!(e = p_expr(P))) return NULL;
            kid(P, &k, e);
        }
    }
    P->i++;
    jnode *n = node(P, dict ? N_DICT : N_LIST, t);
    give(n, &k);
    return n;
}

static jnode *p_primary(jparser *P) {
    jtok *t = cur(P);
    jnode *n;
    if (t->type == TK_NAME) {
        P->i++;
        n = node(P, N_CONST, t);
        if (is_name(t, "true") || is_name(t, "True")) n->lit = jv_bool(1);
        else if (is_name(t, "false") || is_name(t, "False")) n->lit = jv_bool(0);
        else if (is_name(t, "none") || is_name(t, "None")) n->lit = jv_none();
        else n->kind = N_NAME, n->name = tokstr(P, t);
        return n;
    }
    if (t->type == TK_STRING) {
        jbuf b = {0};
        while (cur(P)->type == TK_STRING) jb_put(&b, cur(P)->s->p, cur(P)->s->n), P->i++;
        n = node(P, N_CONST, t);
        n->lit = jv_str(P->a, b.p ? b.p : "", b.n);
        free(b.p);
        return n;
    }
    if (t->type == TK_INT || t->type == TK_FLOAT) {
        P->i++;
        n = node(P, N_CONST, t);
        n->lit = t->type == TK_INT ? jv_int(t->i) : jv_float(t->f);
        return n;
    }
    if (is_op(t, "(")) {
        P->i++;
        n = p_tuple(P, 0, 1);
        if (!n || expect_op(P, ")")) return NULL;
        return n;
    }
    if (is_op(t, "[") || is_op(t, "{")) return p_literal_seq(P, t);
    return fail(P, t, "unexpected %s", tokname(P, t));
}

static jnode *p_unary(jparser *P, int with_filter) {
    jtok *t = cur(P);
    jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        P->i++;
        n = node(P, is_op(t, "-") ? N_NEG : N_POS, t);
        if (!(n->a = p_unary(P, 0))) return NULL;
    } else if (!(n = p_primary(P))) return NULL;
    if (!(n = p_postfix(P, n))) return NULL;
    if (with_filter) n = p_filter_test(P, n);
    return n;
}

static jnode *binop(jparser *P, jtok *t, int op, jnode *a, jnode *b) {
    if (!b) return NULL;
    jnode *n = node(P, N_BINOP, t);
    n->op = op, n->a = a, n->b = b;
    return n;
}
static jnode *p_pow(jparser *P) {
    jnode *n = p_unary(P, 1);
    while (n && is_op(cur(P), "**")) {
        jtok *t = &P->t[P->i++];
        n = binop(P, t, OP_POW, n, p_unary(P, 1));
    }
    return n;
}
static jnode *p_math2(jparser *P) {
    jnode *n = p_pow(P);
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : -1;
        if (!n || op < 0) return n;
        P->i++;
        n = binop(P, t, op, n, p_pow(P));
    }
}
static jnode *p_concat(jparser *P) {
    jnode *n = p_math2(P);
    while (n && is_op(cur(P), "~")) {
        jtok *t = &P->t[P->i++];
        n = binop(P, t, OP_CONCAT, n, p_math2(P));
    }
    return n;
}
static jnode *p_math1(jparser *P) {
    jnode *n = p_concat(P);
    while (n && (is_op(cur(P), "+") || is_op(cur(P), "-"))) {
        jtok *t = &P->t[P->i++];
        n = binop(P, t, is_op(t, "+") ? OP_ADD : OP_SUB, n, p_concat(P));
    }
    return n;
}
static jnode *p_compare(jparser *P) {
    jnode *n = p_math1(P);
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, "==") ? OP_EQ : is_op(t, "!=") ? OP_NE : is_op(t, "<") ? OP_LT : is_op(t, "<=") ? OP_LE
                 : is_op(t, ">") ? OP_GT : is_op(t, ">=") ? OP_GE : is_name(t, "in") ? OP_IN
                 : (is_name(t, "not") && is_name(peek(P, 1), "in")) ? OP_NOTIN : -1;
        if (!n || op < 0) return n;
        P->i += op == OP_NOTIN ? 2 : 1;
        n = binop(P, t, op, n, p_math1(P));
        if (n) n->kind = N_CMP;
    }
}
static jnode *p_not(jparser *P) {
    if (is_name(cur(P), "not")) {
        jnode *n = node(P, N_NOT, &P->t[P->i++]);
        return (n->a = p_not(P)) ? n : NULL;
    }
    return p_compare(P);
}
static jnode *p_and(jparser *P) {
    jnode *n = p_not(P);
    while (n && is_name(cur(P), "and")) {
        jnode *b = node(P, N_AND, &P->t[P->i++]);
        b->a = n;
        if (!(b->b = p_not(P))) return NULL;
        n = b;
    }
    return n;
}
static jnode *p_or(jparser *P) {
    jnode *n = p_and(P);
    while (n && is_name(cur(P), "or")) {
        jnode *b = node(P, N_OR, &P->t[P->i++]);
        b->a = n;
        if (!(b->b = p_and(P))) return NULL;
        n = b;
    }
    return n;
}
static jnode *p_expr(jparser *P) {
    jnode *n = p_or(P);
    while (n && is_name(cur(P), "if")) {
        jnode *c = node(P, N_COND, &P->t[P->i++]);
        c->a = n;
        if (!(c->b = p_or(P))) return NULL;
        if (is_name(cur(P), "else")) {
            P->i++;
            if (!(c->c = p_expr(P))) return NULL;
        }
        n = c;
    }
    return n;
}

// ---- statements -------------------------------------------------------------------------------
static jnode *p_body(jparser *P, const char *const *ends);

static int end_block(jparser *P) {
    if (cur(P)->type != TK_BLOCK_END) return fail(P, cur(P), "expected '%%}', got %s", tokname(P, cur(P))), -1;
    P->i++;
    return 0;
}
// after a body ended at "{% NAME": consume NAME and its %}
static int close_tag(jparser *P) {
    P->i++;
    return end_block(P);
}

static jnode *p_assign_target(jparser *P, int allow_attr) {
    jtok *t = cur(P);
    if (allow_attr && t->type == TK_NAME && is_op(peek(P, 1), ".")) {
        jnode *n = node(P, N_GETATTR, t);
        n->a = node(P, N_NAME, t);
        n->a->name = tokstr(P, t);
        P->i += 2;
        if (!(n->name = expect_name(P))) return NULL;
        return n;
    }
    jnode *n = p_tuple(P, 1, 0);
    if (!n) return NULL;
    if (n->kind == N_TUPLE) {
        for (int i = 0; i < n->n; i++)
            if (n->v[i]->kind != N_NAME) return fail(P, t, "%s", "can't assign to this target");
    } else if (n->kind != N_NAME) return fail(P, t, "%s", "can't assign to this target");
    return n;
}

static jnode *p_for(jparser *P, jtok *t) {
    jnode *n = node(P, N_FOR, t);
    if (!(n->a = p_assign_target(P, 0))) return NULL;
    if (!is_name(cur(P), "in")) return fail(P, cur(P), "expected 'in', got %s", tokname(P, cur(P)));
    P->i++;
    // the iterable: a tuple without conditional expressions (jinja: with_condexpr=False)
    if (!(n->b = p_or(P))) return NULL;
    if (is_name(cur(P), "if")) {
        P->i++;
        if (!(n->e = p_expr(P))) return NULL;
    }
    if (is_name(cur(P), "recursive")) return fail(P, cur(P), "%s", "recursive for loops are not supported");
    if (end_block(P)) return NULL;
    static const char *const ends[] = {"endfor", "else", NULL};
    if (!(n->c = p_body(P, ends))) return NULL;
    if (is_name(cur(P), "else")) {
        if (close_tag(P)) return NULL;
        static const char *const e2[] = {"endfor", NULL};
        if (!(n->d = p_body(P, e2))) return NULL;
    }
    return close_tag(P) ? NULL : n;
}

static jnode *p_if(jparser *P, jtok *t) {
    jnode *n = node(P, N_IF, t);
    if (!(n->a = p_tuple(P, 0, 0)) || end_block(P)) return NULL;
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    if (!(n->b = p_body(P, ends))) return NULL;
    jtok *e = cur(P);
    if (is_name(e, "elif")) {
        P->i++;
        return (n->c = p_if(P, e)) ? n : NULL;  // the elif's p_if consumes the endif
    }
    if (is_name(e, "else")) {
        if (close_tag(P)) return NULL;
        static const char *const e2[] = {"endif", NULL};
        if (!(n->c = p_body(P, e2))) return NULL;
    }
    return close_tag(P) ? NULL : n;
}

static jnode *p_set(jparser *P, jtok *t) {
    jnode *n = node(P, N_SET, t);
    if (!(n->a = p_assign_target(P, 1))) return NULL;
    if (is_op(cur(P), "=")) {
        P->i++;
        if (!(n->b = p_tuple(P, 0, 0)) || end_block(P)) return NULL;
        return n;
    }
    if (is_op(cur(P), "|")) return fail(P, cur(P), "%s", "a filter on a block set is not supported");
    if (end_block(P)) return NULL;
    n->kind = N_SETBLOCK;
    static const char *const ends[] = {"endset", NULL};
    if (!(n->c = p_body(P, ends))) return NULL;
    return close_tag(P) ? NULL : n;
}

static jnode *p_macro(jparser *P, jtok *t) {
    jnode *n = node(P, N_MACRO, t);
    if (!(n->name = expect_name(P)) || expect_op(P, "(")) return NULL;
    kids k = {0};
    while (!is_op(cur(P), ")")) {
        if (k.nk && expect_op(P, ",")) return NULL;
        const char *pn = expect_name(P);
        if (!pn) return NULL;
        jnode *def = NULL;
        if (is_op(cur(P), "=")) {
            P->i++;
            if (!(def = p_expr(P))) return NULL;
        }
        kwkid(P, &k, pn, def);
    }
    P->i++;
    if (end_block(P)) return NULL;
    give(n, &k);
    static const char *const ends[] = {"endmacro", NULL};
    if (!(n->c = p_body(P, ends))) return NULL;
    return close_tag(P) ? NULL : n;
}

static jnode *p_statement(jparser *P) {
    jtok *b = &P->t[P->i++];  // '{%'
    jtok *t = cur(P);
    if (t->type != TK_NAME) return fail(P, t, "expected a statement name, got %s", tokname(P, t));
    P->i++;
    if (is_name(t, "for")) return p_for(P, t);
    if (is_name(t, "if")) return p_if(P, t);
    if (is_name(t, "set")) return p_set(P, t);
    if (is_name(t, "macro")) return p_macro(P, t);
    if (is_name(t, "break") || is_name(t, "continue")) {
        jnode *n = node(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        return end_block(P) ? NULL : n;
    }
    if (is_name(t, "generation")) {
        jnode *n = node(P, N_GENERATION, t);
        P->has_gen = 1;
        if (end_block(P)) return NULL;
        static const char *const ends[] = {"endgeneration", NULL};
        if (!(n->c = p_body(P, ends))) return NULL;
        return close_tag(P) ? NULL : n;
    }
    if (is_name(t, "call")) {
        jnode *n = node(P, N_CALLBLOCK, t);
        if (is_op(cur(P), "(")) return fail(P, cur(P), "%s", "call blocks with caller arguments are not supported");
        if (!(n->a = p_expr(P)) || n->a->kind != N_CALL) return P->failed ? NULL : fail(P, t, "%s", "expected a macro call after 'call'");
        if (end_block(P)) return NULL;
        static const char *const ends[] = {"endcall", NULL};
        if (!(n->c = p_body(P, ends))) return NULL;
        return close_tag(P) ? NULL : n;
    }
    (void)b;
    return fail(P, t, "the statement '{%% %s %%}' is not supported by zerotrain's Jinja engine", tokstr(P, t));
}

// Statements and text up to "{% END" for an END of ends (left at END) or the end of the template.
static jnode *p_body(jparser *P, const char *const *ends) {
    jnode *body = node(P, N_BODY, cur(P));
    kids k = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->type == TK_EOF) {
            if (ends) return fail(P, t, "unexpected end of template, expected '{%% %s %%}'", ends[0]);
            break;
        }
        if (t->type == TK_DATA) {
            jnode *d = node(P, N_DATA, t);
            d->lit = jv_strv(t->s);
            kid(P, &k, d), P->i++;
        } else if (t->type == TK_VAR_BEGIN) {
            jnode *o = node(P, N_OUTPUT, t);
            P->i++;
            if (!(o->a = p_tuple(P, 0, 0))) return NULL;
            if (cur(P)->type != TK_VAR_END) return fail(P, cur(P), "expected '}}', got %s", tokname(P, cur(P)));
            P->i++;
            kid(P, &k, o);
        } else if (t->type == TK_BLOCK_BEGIN) {
            jtok *nt = peek(P, 1);
            for (int i = 0; ends && ends[i]; i++)
                if (is_name(nt, ends[i])) {
                    P->i++;
                    give(body, &k);
                    return body;
                }
            jnode *s = p_statement(P);
            if (!s) return NULL;
            kid(P, &k, s);
        } else return fail(P, t, "unexpected %s", tokname(P, t));
    }
    give(body, &k);
    return body;
}

zt_jinja *zt_jinja_parse(const char *src, size_t n, const char *file) {
    zt_jinja *t = zt_xcalloc(1, sizeof *t);
    snprintf(t->file, sizeof t->file, "%s", file ? file : "<template>");
    jparser P = {.a = &t->a, .file = t->file};
    if (jinja_lex(&t->a, src, n, t->file, &P.t, &P.n)) return zt_jinja_free(t), NULL;
    t->root = p_body(&P, NULL);
    if (!t->root) return zt_jinja_free(t), NULL;
    t->has_gen = P.has_gen;
    return t;
}

void zt_jinja_free(zt_jinja *t) {
    if (!t) return;
    ja_free(&t->a);
    free(t);
}

int zt_jinja_has_generation(const zt_jinja *t) { return t->has_gen; }
