// Template source -> tokens, as jinja2's lexer makes them with trim_blocks and lstrip_blocks on
// (transformers' settings): text between tags, {{ }} / {% %} with their contents, comments and
// {% raw %} dropped or kept as text, whitespace control (- and +) applied here.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/jinja_internal.h"

typedef struct {
    jarena *a;
    const char *s;
    size_t n;
    const char *file;
    jtok *t;
    size_t nt, cap;
    size_t lc_pos;  // line/column known up to here
    int lc_line, lc_col;
} jlex;

static void where(jlex *L, size_t pos, int *line, int *col) {
    if (pos < L->lc_pos) L->lc_pos = 0, L->lc_line = 1, L->lc_col = 1;
    for (; L->lc_pos < pos; L->lc_pos++) {
        if (L->s[L->lc_pos] == '\n') L->lc_line++, L->lc_col = 1;
        else if (((unsigned char)L->s[L->lc_pos] & 0xC0) != 0x80) L->lc_col++;
    }
    *line = L->lc_line, *col = L->lc_col;
}

static int lex_fail(jlex *L, size_t pos, const char *what) {
    int line, col;
    where(L, pos, &line, &col);
    return zt_err("%s:%d:%d: %s", L->file, line, col, what);
}

static jtok *push(jlex *L, int type, size_t pos, size_t len) {
    if (L->nt == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 256;
        jtok *nt = ja_alloc(L->a, L->cap * sizeof(jtok));
        if (L->nt) memcpy(nt, L->t, L->nt * sizeof(jtok));
        L->t = nt;
    }
    jtok *t = &L->t[L->nt++];
    memset(t, 0, sizeof *t);
    t->type = type, t->p = L->s + pos, t->n = len;
    where(L, pos, &t->line, &t->col);
    return t;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static size_t skip_ws(const char *s, size_t n, size_t p) {
    while (p < n && is_ws(s[p])) p++;
    return p;
}
// Python str.rstrip(): the length without trailing whitespace
static size_t rstrip_len(const char *s, size_t n) {
    size_t keep = 0, i = 0, len;
    while (i < n) {
        int sp = ju_isspace(s + i, n - i, &len);
        i += len;
        if (!sp) keep = i;
    }
    return keep;
}

// The text before a tag, as OptionalLStrip leaves it: sign '-' strips all whitespace before
// the tag; otherwise lstrip_blocks drops the spaces between the line start and a block or comment.
static size_t strip_text(const char *s, size_t n, char sign, int is_var, int line_starting) {
    if (sign == '-') return rstrip_len(s, n);
    if (sign == '+' || is_var) return n;
    size_t l = n;
    while (l > 0 && s[l - 1] != '\n') l--;
    if (l == 0 && !line_starting) return n;
    if (l == n) return n;
    for (size_t i = l; i < n;) {
        size_t len;
        if (!ju_isspace(s + i, n - i, &len) || s[i] == '\n') return n;
        i += len;
    }
    return l;
}

static void emit_data(jlex *L, size_t pos, size_t len) {
    if (!len) return;
    jtok *t = push(L, TK_DATA, pos, len);
    t->s = js_new(L->a, L->s + pos, len);
}

// A block end at p: "-%}" + whitespace, "+%}", "%}" + one newline. Returns the end, 0 if none.
static size_t block_end(const char *s, size_t n, size_t p) {
    if (p + 3 <= n && s[p] == '-' && s[p + 1] == '%' && s[p + 2] == '}') return skip_ws(s, n, p + 3);
    if (p + 3 <= n && s[p] == '+' && s[p + 1] == '%' && s[p + 2] == '}') return p + 3;
    if (p + 2 <= n && s[p] == '%' && s[p + 1] == '}') return p + 2 + (p + 2 < n && s[p + 2] == '\n');
    return 0;
}

// {% raw %}...{% endraw %} starting at j (the '{'): 1 handled (data emitted, *pos after it),
// 0 not a raw tag, -1 error.
static int lex_raw(jlex *L, size_t j, char sign, size_t *pos, int *line_starting) {
    const char *s = L->s;
    size_t p = skip_ws(s, L->n, j + 2 + (sign != 0));
    if (p + 3 > L->n || memcmp(s + p, "raw", 3)) return 0;
    p = skip_ws(s, L->n, p + 3);
    size_t q;
    if (p + 3 <= L->n && !memcmp(s + p, "-%}", 3)) q = skip_ws(s, L->n, p + 3);
    else if (p + 2 <= L->n && !memcmp(s + p, "%}", 2)) q = p + 2;
    else return 0;
    int ls = s[q - 1] == '\n';
    for (size_t k = q; k + 1 < L->n; k++) {
        if (s[k] != '{' || s[k + 1] != '%') continue;
        char sg = k + 2 < L->n && (s[k + 2] == '-' || s[k + 2] == '+') ? s[k + 2] : 0;
        size_t r = skip_ws(s, L->n, k + 2 + (sg != 0));
        if (r + 6 > L->n || memcmp(s + r, "endraw", 6)) continue;
        size_t e = block_end(s, L->n, skip_ws(s, L->n, r + 6));
        if (!e) continue;
        emit_data(L, q, strip_text(s + q, k - q, sg, 0, ls));
        *pos = e, *line_starting = s[e - 1] == '\n';
        return 1;
    }
    return lex_fail(L, j, "missing end of raw directive ({% endraw %})");
}

// Jinja's string literal: backslash escapes as Python's unicode-escape reads them.
static jstr *unescape(jarena *a, const char *p, size_t n) {
    jbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\\' || i + 1 >= n) { jb_putc(&b, p[i]); continue; }
        char c = p[++i];
        const char *m = strchr("n\nt\tr\rb\bf\fv\va\a\\\\''\"\"0\0", c);
        if (c && m && ((m - "n\nt\tr\rb\bf\fv\va\a\\\\''\"\"0\0") % 2 == 0) && c != '0') { jb_putc(&b, m[1]); continue; }
        int w = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (w && i + w < n) {
            char h[9];
            memcpy(h, p + i + 1, (size_t)w), h[w] = 0;
            char *end;
            unsigned long cp = strtoul(h, &end, 16);
            if (!*end) {
                char u[4];
                int len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
                if (len == 1) u[0] = (char)cp;
                else if (len == 2) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63));
                else if (len == 3) u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63));
                else u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63));
                jb_put(&b, u, (size_t)len);
                i += (size_t)w;
                continue;
            }
        }
        if (c >= '0' && c <= '7') {  // octal
            int v = 0, k = 0;
            while (k < 3 && i < n && p[i] >= '0' && p[i] <= '7') v = v * 8 + (p[i++] - '0'), k++;
            i--;
            jb_putc(&b, (char)v);
            continue;
        }
        jb_putc(&b, '\\'), jb_putc(&b, c);
    }
    jstr *s = js_new(a, b.p ? b.p : "", b.n);
    free(b.p);
    return s;
}

// One token inside a tag at p; returns the position after it, 0 on error.
static size_t lex_token(jlex *L, size_t p, int *depth) {
    const char *s = L->s;
    size_t n = L->n, q = p;
    char c = s[p];
    if (c == '\'' || c == '"') {
        for (q = p + 1; q < n && s[q] != c; q++)
            if (s[q] == '\\') q++;
        if (q >= n) return lex_fail(L, p, "unterminated string literal"), 0;
        jtok *t = push(L, TK_STRING, p, q + 1 - p);
        t->s = unescape(L->a, s + p + 1, q - p - 1);
        return q + 1;
    }
    if (c >= '0' && c <= '9') {
        int isf = 0;
        while (q < n && ((s[q] >= '0' && s[q] <= '9') || s[q] == '_')) q++;
        if (q + 1 < n && s[q] == '.' && s[q + 1] >= '0' && s[q + 1] <= '9') {
            isf = 1, q++;
            while (q < n && ((s[q] >= '0' && s[q] <= '9') || s[q] == '_')) q++;
        }
        if (q < n && (s[q] == 'e' || s[q] == 'E')) {
            size_t r = q + 1 + (q + 1 < n && (s[q + 1] == '+' || s[q + 1] == '-'));
            if (r < n && s[r] >= '0' && s[r] <= '9') {
                isf = 1, q = r;
                while (q < n && s[q] >= '0' && s[q] <= '9') q++;
            }
        }
        char buf[64];
        size_t k = 0;
        for (size_t i = p; i < q && k < 63; i++)
            if (s[i] != '_') buf[k++] = s[i];
        buf[k] = 0;
        jtok *t = push(L, isf ? TK_FLOAT : TK_INT, p, q - p);
        if (isf) t->f = strtod(buf, NULL);
        else t->i = strtoll(buf, NULL, 10);
        return q;
    }
    if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        while (q < n && (s[q] == '_' || (s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z') ||
                         (s[q] >= '0' && s[q] <= '9')))
            q++;
        push(L, TK_NAME, p, q - p);
        return q;
    }
    static const char *two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (int i = 0; i < 6; i++)
        if (p + 1 < n && s[p] == two[i][0] && s[p + 1] == two[i][1]) return push(L, TK_OP, p, 2), p + 2;
    if (strchr("+-/*%~[](){}<>=.:|,;", c) && c) {
        if (c == '(' || c == '[' || c == '{') (*depth)++;
        if (c == ')' || c == ']' || c == '}') (*depth)--;
        push(L, TK_OP, p, 1);
        return p + 1;
    }
    return lex_fail(L, p, "unexpected character in a tag"), 0;
}

// The inside of {{ }} or {% %} from p: tokens up to the end marker; returns the end, 0 on error.
static size_t lex_tag(jlex *L, size_t p, int is_var) {
    const char *s = L->s;
    int depth = 0;
    for (;;) {
        p = skip_ws(s, L->n, p);
        if (p >= L->n) return lex_fail(L, p, is_var ? "missing '}}'" : "missing '%}'"), 0;
        if (depth <= 0) {
            if (is_var) {
                if (p + 3 <= L->n && !memcmp(s + p, "-}}", 3)) return push(L, TK_VAR_END, p, 3), skip_ws(s, L->n, p + 3);
                if (p + 2 <= L->n && !memcmp(s + p, "}}", 2)) return push(L, TK_VAR_END, p, 2), p + 2;
            } else {
                size_t e = block_end(s, L->n, p);
                if (e) return push(L, TK_BLOCK_END, p, e - p), e;
            }
        }
        p = lex_token(L, p, &depth);
        if (!p) return 0;
    }
}

// Newlines as jinja2 sees them (\r\n and \r read as \n) and one trailing newline dropped
// (keep_trailing_newline is off).
static char *normalise(const char *src, size_t n, size_t *out_n) {
    char *s = zt_xmalloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else s[k++] = src[i];
    }
    if (k && s[k - 1] == '\n') k--;
    s[k] = 0;
    *out_n = k;
    return s;
}

static int lex_comment(jlex *L, size_t j, size_t *pos, int *line_starting) {
    const char *s = L->s;
    for (size_t k = j + 2; k + 1 < L->n; k++) {
        if (s[k] != '#' || s[k + 1] != '}') continue;
        size_t e;
        if (k > j + 2 && s[k - 1] == '-') e = skip_ws(s, L->n, k + 2);
        else if (k > j + 2 && s[k - 1] == '+') e = k + 2;
        else e = k + 2 + (k + 2 < L->n && s[k + 2] == '\n');
        *pos = e, *line_starting = s[e - 1] == '\n';
        return 0;
    }
    return lex_fail(L, j, "missing end of comment tag");
}

int jinja_lex(jarena *a, const char *src, size_t srcn, const char *file, jtok **toks, size_t *ntoks) {
    size_t n;
    char *s = normalise(src, srcn, &n);
    char *keep = ja_alloc(a, n + 1);  // tokens point into the normalised text
    memcpy(keep, s, n + 1);
    free(s);
    jlex L = {.a = a, .s = keep, .n = n, .file = file, .lc_line = 1, .lc_col = 1};
    size_t pos = 0;
    int line_starting = 1;
    while (pos < n) {
        size_t j = pos;
        while (j + 1 < n && !(L.s[j] == '{' && (L.s[j + 1] == '{' || L.s[j + 1] == '%' || L.s[j + 1] == '#'))) j++;
        if (j + 1 >= n) { emit_data(&L, pos, n - pos); break; }
        char kind = L.s[j + 1];
        char sign = j + 2 < n && (L.s[j + 2] == '-' || L.s[j + 2] == '+') ? L.s[j + 2] : 0;
        emit_data(&L, pos, strip_text(L.s + pos, j - pos, sign, kind == '{', line_starting));
        if (kind == '%') {
            int r = lex_raw(&L, j, sign, &pos, &line_starting);
            if (r < 0) return -1;
            if (r) continue;
        }
        if (kind == '#') {
            if (lex_comment(&L, j, &pos, &line_starting)) return -1;
            continue;
        }
        push(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, j, 2 + (sign != 0));
        size_t e = lex_tag(&L, j + 2 + (sign != 0), kind == '{');
        if (!e) return -1;
        pos = e, line_starting = L.s[e - 1] == '\n';
    }
    push(&L, TK_EOF, n, 0);
    *toks = L.t, *ntoks = L.nt;
    return 0;
}
