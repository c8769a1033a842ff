// What the Jinja files of data/ share, not for callers: values (Python's types as templates
// see them), the arena they live in, tokens, the syntax tree and the render state.
// defines: jv, jstr, jlist, jdict, jarena, jtok, jnode, jstate and their helpers
#ifndef ZT_JINJA_INTERNAL_H
#define ZT_JINJA_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "data/jinja.h"

// ---- arena: every value of a render, every node of a template -------------------------------
typedef struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} jchunk;
typedef struct {
    jchunk *head;
    size_t total;  // bytes handed out (the memory limit reads it)
} jarena;
void *ja_alloc(jarena *a, size_t n);
void ja_free(jarena *a);

// ---- values -----------------------------------------------------------------------------------
// JV_BIGINT: an integer literal of the input beyond int64 (Python's int has no bound), kept as its
// digits (.s): written back exactly, compared, not computed with
enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_FUNC, JV_MACRO, JV_BIGINT, JV_LOOP };
typedef struct jstr {
    size_t n;
    char p[];  // NUL-terminated too
} jstr;
struct jlist;
struct jdict;
struct jnode;
typedef struct {
    uint8_t t;
    uint8_t tuple;  // a list written (a, b): repr with parentheses
    union {
        int64_t i;                // INT, BOOL, FUNC (builtin id)
        double f;                 // FLOAT
        jstr *s;                  // STR; UNDEF: the hint ("'x' is undefined") or NULL
        struct jlist *l;          // LIST
        struct jdict *d;          // DICT, NS
        const struct jnode *m;    // MACRO
        struct jloop *lp;         // LOOP: a for loop's `loop`
    };
} jv;
typedef struct jloop {
    struct jlist *items;
    size_t i;
} jloop;
typedef struct jlist {
    size_t n, cap;
    jv *v;
} jlist;
typedef struct jdict {
    size_t n, cap;
    jv *k, *v;  // insertion order
} jdict;

jv jv_undef(jstr *hint);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_strv(jstr *s);
jstr *js_new(jarena *a, const char *p, size_t n);
jv jv_str(jarena *a, const char *p, size_t n);
jv jv_cstr(jarena *a, const char *p);
jlist *jl_new(jarena *a, size_t cap);
void jl_push(jarena *a, jlist *l, jv v);
jdict *jd_new(jarena *a, size_t cap);
jv *jd_get(const jdict *d, const char *k, size_t n);  // NULL: absent
jv *jd_getv(const jdict *d, jv key);
void jd_set(jarena *a, jdict *d, jv key, jv val);
void jd_setc(jarena *a, jdict *d, const char *k, jv val);
int jv_truthy(jv v);
int jv_eq(jv a, jv b);
const char *jv_typename(jv v);  // Python's: "str", "list", "dict", "int", ...

// growable text
typedef struct {
    char *p;
    size_t n, cap;
} jbuf;
void jb_put(jbuf *b, const void *s, size_t n);
void jb_puts(jbuf *b, const char *s);
void jb_putc(jbuf *b, char c);

void jv_str_to(jbuf *b, jv v);   // Python str(v) (undefined: ""), as {{ v }} writes it
void jv_repr_to(jbuf *b, jv v);  // Python repr(v)
void jv_float_repr(jbuf *b, double f);
typedef struct {
    int ensure_ascii, sort_keys;
    const char *indent;  // NULL: none
    size_t indent_n;
    const char *item_sep, *key_sep;
    size_t item_sep_n, key_sep_n;
} jjson_opts;
int jv_json_to(jbuf *b, jv v, const jjson_opts *o, int depth, char *err, size_t errn);  // json.dumps
// json.loads of text into a value in a (ints stay ints, object order kept); 0, or -1 + msg in err.
int jv_json_parse(jarena *a, const char *s, size_t n, jv *out, char *err, size_t errn);

// Decode one code point at s (n bytes left); invalid bytes read as themselves, length 1.
static inline int zt_utf8_decode_any(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if ((size_t)len > n) len = 1;
    if (len == 1) { *cp = c; return 1; }
    uint32_t v = c & (0x3Fu >> (len - 1));
    for (int i = 1; i < len; i++) v = (v << 6) | (s[i] & 0x3Fu);
    *cp = v;
    return len;
}
// UTF-8 helpers: code points of s, and the byte offset of code point i (clamped).
size_t ju_len(const char *s, size_t n);
size_t ju_off(const char *s, size_t n, int64_t i);
int ju_isspace(const char *s, size_t n, size_t *len);  // a Python str.isspace() code point at s

// ---- tokens and nodes -------------------------------------------------------------------------
enum { TK_EOF, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END, TK_NAME, TK_STRING, TK_INT,
       TK_FLOAT, TK_OP };
typedef struct {
    int type;
    int line, col;
    const char *p;  // source text (names, operators)
    size_t n;
    jstr *s;        // DATA and STRING: the value
    int64_t i;
    double f;
} jtok;
int jinja_lex(jarena *a, const char *src, size_t n, const char *file, jtok **toks, size_t *ntoks);

enum {
    N_BODY, N_DATA, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_GENERATION, N_BREAK,
    N_CONTINUE,
    N_CONST, N_NAME, N_LIST, N_TUPLE, N_DICT, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_BINOP,
    N_NOT, N_NEG, N_POS, N_AND, N_OR, N_COND, N_CMP,
};
// binary and comparison operators
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT,
       OP_GE, OP_IN, OP_NOTIN };
typedef struct jnode {
    int kind, op, line, col;
    jv lit;             // CONST, DATA
    const char *name;   // NAME, GETATTR, FILTER, TEST, MACRO, SET (namespace attribute), FOR (loop name)
    struct jnode *a, *b, *c, *d, *e;
    struct jnode **v;   // children: body statements, list items, args, dict key/value pairs, macro params
    int n;
    const char **kwn;   // keyword argument names (CALL, FILTER, TEST) / macro param names
    struct jnode **kwv; // their values / macro param defaults (NULL: none)
    int nkw;
} jnode;

struct zt_jinja {
    jarena a;
    jnode *root;
    int has_gen;
    char file[256];
};

// ---- render state -----------------------------------------------------------------------------
typedef struct jframe {
    jdict *vars;
    struct jframe *parent;
} jframe;
typedef struct jstate {
    jarena *a;
    const zt_jinja *t;
    jframe *root, *fr;
    jdict *globals;
    jbuf *out;       // where output goes now
    jbuf *rootout;   // the top-level output (generation spans count from its length)
    zt_jinja_result *res;
    int err;         // set: unwinding (res->status, res->msg say why)
    int line;        // of the node being evaluated
    uint64_t steps;  // loop iterations and calls, against the limit
    int depth;       // macro call depth
    const zt_jinja_limits *lim;
    int64_t now;     // strftime_now's time (Unix seconds, UTC)
} jstate;

int jerr(jstate *S, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
jv jeval(jstate *S, const jnode *n);
int jexec(jstate *S, const jnode *n);  // 0, 1 break, 2 continue, -1 error
jv jfail_undef(jstate *S, jv u);  // use of an undefined value: its message as the error
int jcontains(jstate *S, jv hay, jv needle);  // Python's `needle in hay`; -1 error
jv jcall_macro(jstate *S, jv m, jv *args, int nargs, const char **kwn, jv *kwv, int nkw, const jnode *caller);

// builtins (data/jinja_builtin.c)
int jfilter_known(const char *name);
int jtest_known(const char *name);
int jmethod_known(const char *name);
int jglobal_id(const char *name);  // > 0: a builtin function
jv jfilter(jstate *S, const char *name, jv x, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);
int jtest(jstate *S, const char *name, jv x, jv *args, int nargs);  // 0/1, -1 error
jv jmethod(jstate *S, jv obj, const char *name, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);
jv jcall_global(jstate *S, int id, jv *args, int nargs, const char **kwn, jv *kwv, int nkw);
jv jgetattr(jstate *S, jv obj, const char *name, size_t n);
jv jgetitem(jstate *S, jv obj, jv key);
#endif
