// The generic flag parser behind every command's table (cli/flags.h): getopt_long
// options, usage text, defaults, range checks, the run.json settings and the YAML run
// configuration (--config, read with libyaml; --print-config), all from the table.
#include "cli/flags.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "base/crc32c.h"
#include "cli/args.h"
#include "base/common.h"

#define FIELD(opts, e, type) ((type *)((char *)(opts) + (e)->offset))

static int is_flag(const zt_flag *e) { return e->type != ZT_FLAG_SECTION; }

static const char *choice_name(const zt_flag *e, int value) {
    for (const zt_flag_choice *c = e->choices; c && c->name; c++)
        if (c->value == value) return c->name;
    return "?";
}

void zt_flags_defaults(const zt_flag *t, void *opts) {
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        switch (e->type) {
        case ZT_FLAG_STR:
        case ZT_FLAG_OPTSTR:
        case ZT_FLAG_KEYWORD: *FIELD(opts, e, const char *) = e->sdef; break;
        case ZT_FLAG_INT:
        case ZT_FLAG_SET:
        case ZT_FLAG_CLEAR:
        case ZT_FLAG_ENUM: *FIELD(opts, e, int) = (int)e->def; break;
        case ZT_FLAG_I64: *FIELD(opts, e, int64_t) = (int64_t)e->def; break;
        case ZT_FLAG_U64: *FIELD(opts, e, uint64_t) = (uint64_t)e->def; break;
        case ZT_FLAG_F64: *FIELD(opts, e, double) = e->def; break;
        case ZT_FLAG_LIST: *FIELD(opts, e, zt_flag_list) = (zt_flag_list){0}; break;
        default: break;
        }
    }
}

static void owned_release(const void *opts);

void zt_flags_free(const zt_flag *t, void *opts) {
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++)
        if (e->type == ZT_FLAG_LIST) {
            free(FIELD(opts, e, zt_flag_list)->v);
            *FIELD(opts, e, zt_flag_list) = (zt_flag_list){0};
        }
    owned_release(opts);
}

static int takes_no_value(const zt_flag *e) {
    return e->type == ZT_FLAG_SET || e->type == ZT_FLAG_CLEAR || e->type == ZT_FLAG_LIST;
}

// "--a or --b": the list flags, for the error on an operand before any of them.
static void list_names(const zt_flag *t, char *buf, size_t n) {
    int k = 0, total = 0;
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) total += e->type == ZT_FLAG_LIST;
    size_t len = 0;
    buf[0] = 0;
    for (const zt_flag *e = t; e->type != ZT_FLAG_END && len < n; e++) {
        if (e->type != ZT_FLAG_LIST) continue;
        const char *sep = k == 0 ? "" : k == total - 1 ? " or " : ", ";
        len += (size_t)snprintf(buf + len, n - len, "%s--%s", sep, e->name);
        k++;
    }
}

static void format_default(const zt_flag *e, char *buf, size_t n) {
    switch (e->type) {
    case ZT_FLAG_INT:
    case ZT_FLAG_I64:
    case ZT_FLAG_U64: snprintf(buf, n, "%lld", (long long)e->def); break;
    case ZT_FLAG_F64: snprintf(buf, n, "%g", e->def); break;
    case ZT_FLAG_ENUM: snprintf(buf, n, "%s", choice_name(e, (int)e->def)); break;
    case ZT_FLAG_SET:
    case ZT_FLAG_CLEAR: snprintf(buf, n, "%s", e->def ? "on" : "off"); break;
    default: snprintf(buf, n, "%s", e->sdef ? e->sdef : "none"); break;
    }
}

// One flag's help: "{default}" expanded, '\n' continued on an indented line.
static void print_help(FILE *f, const zt_flag *e) {
    char def[64];
    format_default(e, def, sizeof def);
    for (const char *h = e->help ? e->help : ""; *h; h++) {
        if (!strncmp(h, "{default}", 9)) {
            fputs(def, f);
            h += 8;
        } else if (*h == '\n') {
            fprintf(f, "\n%24s", "");
        } else {
            fputc(*h, f);
        }
    }
    if (e->alias) fprintf(f, "\n%24s(also accepted as --%s)", "", e->alias);
    fputc('\n', f);
}

void zt_flags_usage(FILE *f, const zt_flag *t, const char *synopsis, const char *epilog) {
    if (synopsis) fputs(synopsis, f);
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e)) {
            fprintf(f, "\n%s\n", e->help);
            continue;
        }
        char lead[96];
        const int n = e->letter ? snprintf(lead, sizeof lead, "-%c, ", e->letter) : 0;
        snprintf(lead + n, sizeof lead - (size_t)n, "--%s%s%s", e->name, e->metavar ? " " : "",
                 e->metavar ? e->metavar : "");
        if (strlen(lead) < 21) fprintf(f, "  %-22s", lead);
        else fprintf(f, "  %s  ", lead);
        print_help(f, e);
    }
    fprintf(f, "  %-22s%s\n%24s%s\n", "--config FILE", "read the flags from a YAML file (keys: the long flag names,",
            "", "micro_batch or micro-batch); the command line overrides it");
    fprintf(f, "  %-22s%s\n", "--print-config", "print every setting, resolved, as YAML (--config reads it) and exit");
    fprintf(f, "  %-22s%s\n", "-h, --help", "this text");
    if (epilog) fputs(epilog, f);
}

static int parse_value(const zt_flag *e, const char *v, void *opts) {
    char flag[96];
    snprintf(flag, sizeof flag, "--%s", e->name);
    int64_t iv;
    switch (e->type) {
    case ZT_FLAG_STR: *FIELD(opts, e, const char *) = v; return 0;
    case ZT_FLAG_INT:
        if (zt_arg_i64(flag, v, e->imin, e->imax, &iv) != 0) return -1;
        *FIELD(opts, e, int) = (int)iv;
        return 0;
    case ZT_FLAG_I64: return zt_arg_i64(flag, v, e->imin, e->imax, FIELD(opts, e, int64_t));
    case ZT_FLAG_U64:
        if (zt_arg_i64(flag, v, e->imin, e->imax, &iv) != 0) return -1;
        *FIELD(opts, e, uint64_t) = (uint64_t)iv;
        return 0;
    case ZT_FLAG_F64: return zt_arg_f64(flag, v, e->fmin, e->fmax, FIELD(opts, e, double));
    case ZT_FLAG_ENUM:
    case ZT_FLAG_KEYWORD: {
        for (const zt_flag_choice *c = e->choices; c && c->name; c++)
            if (!strcmp(v, c->name)) {
                if (e->type == ZT_FLAG_ENUM) *FIELD(opts, e, int) = c->value;
                else *FIELD(opts, e, const char *) = c->name;
                return 0;
            }
        char list[256] = "";
        size_t n = 0;
        for (const zt_flag_choice *c = e->choices; c && c->name; c++) {
            const char *sep = c == e->choices ? "" : (c + 1)->name ? ", " : " or ";
            n += (size_t)snprintf(list + n, n < sizeof list ? sizeof list - n : 0, "%s%s", sep, c->name);
        }
        return zt_err("%s %s: expected %s", flag, v, list);
    }
    default: return zt_err("%s: internal error: a flag of type %d takes no value", flag, (int)e->type);
    }
}

// ---- what a config file leaves in opts: its strings, its path and checksum ----
// Strings read from a file live as long as the options (argv's live as long as the process):
// one record per options struct, released by zt_flags_free.
typedef struct owned {
    const void *opts;
    char *path;      // the --config file read into opts (NULL: none)
    uint32_t crc;    // CRC-32C of its bytes
    char **strs;
    int n, cap;
    struct owned *next;
} owned;
static owned *g_owned;

static owned *owned_for(const void *opts) {
    for (owned *o = g_owned; o; o = o->next)
        if (o->opts == opts) return o;
    owned *o = zt_xcalloc(1, sizeof *o);
    o->opts = opts;
    o->next = g_owned;
    g_owned = o;
    return o;
}

static const char *own_str(const void *opts, const char *s, size_t len) {
    owned *o = owned_for(opts);
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 16;
        o->strs = realloc(o->strs, (size_t)o->cap * sizeof *o->strs);
        if (!o->strs) zt_fatal("out of memory reading a config file");
    }
    char *c = zt_xmalloc(len + 1);
    memcpy(c, s, len);
    c[len] = 0;
    o->strs[o->n++] = c;
    return c;
}

static void owned_release(const void *opts) {
    for (owned **p = &g_owned; *p; p = &(*p)->next)
        if ((*p)->opts == opts) {
            owned *o = *p;
            *p = o->next;
            for (int i = 0; i < o->n; i++) free(o->strs[i]);
            free(o->strs);
            free(o->path);
            free(o);
            return;
        }
}

int zt_flags_config_file(const void *opts, const char **path, uint32_t *crc32c) {
    for (const owned *o = g_owned; o; o = o->next)
        if (o->opts == opts && o->path) {
            if (path) *path = o->path;
            if (crc32c) *crc32c = o->crc;
            return 1;
        }
    return 0;
}

// ---- keys: the long flag names, '-' and '_' alike ----

static int key_eq(const char *a, const char *b) {
    if (!a || !b) return 0;
    for (; *a && *b; a++, b++)
        if (*a != *b && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_'))) return 0;
    return *a == *b;
}

// A "no-X" flag's positive spelling X (NULL for other flags).
static const char *positive_name(const zt_flag *e, const char *name) {
    return e->type == ZT_FLAG_CLEAR && name && !strncmp(name, "no-", 3) ? name + 3 : NULL;
}

// The YAML key a flag is printed under: its name with '_' for '-', "no-X" flags as X.
static void print_key(const zt_flag *e, char *buf, size_t n) {
    const char *p = positive_name(e, e->name);
    snprintf(buf, n, "%s", p ? p : e->name);
    for (char *c = buf; *c; c++)
        if (*c == '-') *c = '_';
}

// The flag `key` names in table t, and whether it is a "no-X" flag's positive spelling.
static const zt_flag *find_key(const zt_flag *t, const char *key, int *positive) {
    for (const zt_flag *e = t; t && e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e)) continue;
        const char *names[2] = {e->name, e->alias};
        for (int k = 0; k < 2; k++) {
            if (key_eq(key, names[k])) return *positive = 0, e;
            if (key_eq(key, positive_name(e, names[k]))) return *positive = 1, e;
        }
    }
    return NULL;
}

static const zt_flag *table_end(const zt_flag *t) {
    while (t->type != ZT_FLAG_END) t++;
    return t;
}

static size_t edit_distance(const char *a, const char *b) {
    const size_t n = strlen(a), m = strlen(b);
    size_t *row = zt_xcalloc(m + 1, sizeof *row);
    for (size_t j = 0; j <= m; j++) row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            const char x = a[i - 1] == '-' ? '_' : a[i - 1], y = b[j - 1] == '-' ? '_' : b[j - 1];
            const size_t sub = diag + (x != y), up = row[j] + 1, left = row[j - 1] + 1, tmp = row[j];
            row[j] = sub < up ? (sub < left ? sub : left) : (up < left ? up : left);
            diag = tmp;
        }
    }
    const size_t d = row[m];
    free(row);
    return d;
}

// The first letter of each '-'/'_'-separated word: learning_rate -> lr.
static void initials(const char *s, char *out, size_t n) {
    size_t k = 0;
    for (const char *c = s; *c && k + 1 < n; c++)
        if (c == s || c[-1] == '-' || c[-1] == '_') out[k++] = *c;
    out[k] = 0;
}

// How far key is from a valid name: the edit distance, or 1 when one spells the other's
// initials (learning_rate for lr).
static size_t key_distance(const char *key, const char *name) {
    char a[64], b[64];
    initials(key, a, sizeof a);
    initials(name, b, sizeof b);
    const size_t d = edit_distance(key, name);
    return d > 1 && ((strlen(a) > 1 && key_eq(a, name)) || (strlen(b) > 1 && key_eq(b, key))) ? 1 : d;
}

// The valid key nearest to `key` (this table's and its companion's), as printed.
static void nearest_key(const zt_flag *t, const char *key, char *out, size_t n) {
    size_t best = (size_t)-1;
    out[0] = 0;
    const zt_flag *tables[2] = {t, table_end(t)->config_also};
    for (int k = 0; k < 2; k++)
        for (const zt_flag *e = tables[k]; e && e->type != ZT_FLAG_END; e++) {
            if (!is_flag(e)) continue;
            const char *names[4] = {e->name, positive_name(e, e->name), e->alias, positive_name(e, e->alias)};
            for (int i = 0; i < 4; i++) {
                if (!names[i]) continue;
                const size_t d = key_distance(key, names[i]);
                if (d < best) {
                    best = d;
                    snprintf(out, n, "%s", names[i]);
                    for (char *c = out; *c; c++)
                        if (*c == '-') *c = '_';
                }
            }
        }
}

// ---- reading a file (libyaml's document loader) ----

typedef struct {
    const char *path;
    yaml_document_t *doc;
    const zt_flag *t;
    void *opts;
    const zt_flag **seen;  // flags already set by the file, and the line (from 1) of each
    int *seen_line;
    int nseen, cap;
} cfg_ctx;

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

static int cfg_err(const cfg_ctx *c, const yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cfg_err(const cfg_ctx *c, const yaml_node_t *n, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return zt_err("%s:%d: %s", c->path, n ? line_of(n) : 1, msg);
}

static const char *node_kind(const yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a value";
}

static const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

// YAML's null: a plain empty, ~ or null scalar.
static int is_null(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    const char *s = scalar(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

// YAML's booleans (1.1: true/false, yes/no, on/off in three casings), plain scalars only.
static int bool_of(const yaml_node_t *n, int *b) {
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    for (int i = 0; i < 9; i++) {
        if (!strcmp(scalar(n), yes[i])) return *b = 1, 1;
        if (!strcmp(scalar(n), no[i])) return *b = 0, 1;
    }
    return 0;
}

// The flag's default into opts (what a null value means).
static void set_default(const zt_flag *e, void *opts) {
    const zt_flag one[2] = {*e, {0}};
    if (e->type == ZT_FLAG_LIST) free(FIELD(opts, e, zt_flag_list)->v);
    zt_flags_defaults(one, opts);
}

static int set_from_node(cfg_ctx *c, const zt_flag *e, int positive, const yaml_node_t *v) {
    void *opts = c->opts;
    const char *what = e->type == ZT_FLAG_SET || e->type == ZT_FLAG_CLEAR ? "true or false"
                       : e->type == ZT_FLAG_STR || e->type == ZT_FLAG_OPTSTR ? "a string"
                       : e->type == ZT_FLAG_LIST                             ? "a list of strings"
                       : e->type == ZT_FLAG_ENUM || e->type == ZT_FLAG_KEYWORD ? "one of its choices"
                                                                              : "a number";
    if (is_null(v)) {
        set_default(e, opts);
        return 0;
    }
    int b;
    switch (e->type) {
    case ZT_FLAG_SET:
    case ZT_FLAG_CLEAR:
        if (!bool_of(v, &b))
            return v->type == YAML_SCALAR_NODE
                       ? cfg_err(c, v, "--%s: expected true or false, not '%s'", e->name, scalar(v))
                       : cfg_err(c, v, "--%s: expected true or false, not %s", e->name, node_kind(v));
        *FIELD(opts, e, int) = e->type == ZT_FLAG_SET || positive ? b : !b;
        return 0;
    case ZT_FLAG_LIST: {
        zt_flag_list *l = FIELD(opts, e, zt_flag_list);
        const int n = v->type == YAML_SEQUENCE_NODE ? (int)(v->data.sequence.items.top - v->data.sequence.items.start)
                      : v->type == YAML_SCALAR_NODE  ? 1
                                                     : -1;
        if (n < 0) return cfg_err(c, v, "--%s: expected %s, not %s", e->name, what, node_kind(v));
        free(l->v);
        l->v = zt_xcalloc((size_t)n + 1, sizeof *l->v);
        l->n = 0;
        for (int i = 0; i < n; i++) {
            const yaml_node_t *it = v->type == YAML_SCALAR_NODE
                                        ? v
                                        : yaml_document_get_node(c->doc, v->data.sequence.items.start[i]);
            if (!it || it->type != YAML_SCALAR_NODE)
                return cfg_err(c, it ? it : v, "--%s: expected %s, not a list holding %s", e->name, what,
                               it ? node_kind(it) : "nothing");
            l->v[l->n++] = own_str(opts, scalar(it), it->data.scalar.length);
        }
        return 0;
    }
    default: break;
    }
    if (v->type != YAML_SCALAR_NODE) return cfg_err(c, v, "--%s: expected %s, not %s", e->name, what, node_kind(v));
    const char *text = own_str(opts, scalar(v), v->data.scalar.length);
    if (strlen(text) != v->data.scalar.length) return cfg_err(c, v, "--%s: the value holds a NUL character", e->name);
    switch (e->type) {
    case ZT_FLAG_STR: *FIELD(opts, e, const char *) = text; return 0;
    case ZT_FLAG_OPTSTR:  // true: the flag alone (--resume); false: not given
        if (bool_of(v, &b)) *FIELD(opts, e, const char *) = b ? e->bare : NULL;
        else *FIELD(opts, e, const char *) = text;
        return 0;
    default:
        if (parse_value(e, text, opts) != 0) return zt_err_prefix("%s:%d", c->path, line_of(v));
        return 0;
    }
}

// One `key: value` pair, at the top level (section NULL) or inside a section.
static int apply_pair(cfg_ctx *c, const yaml_node_t *k, const yaml_node_t *v, const char *section) {
    if (!k || !v) return cfg_err(c, k ? k : v, "an incomplete key: value pair");
    if (k->type != YAML_SCALAR_NODE) return cfg_err(c, k, "a key must be a flag name, not %s", node_kind(k));
    const char *key = scalar(k);
    if (strlen(key) != k->data.scalar.length) return cfg_err(c, k, "a key holds a NUL character");
    int positive = 0;
    const zt_flag *e = find_key(c->t, key, &positive);
    const zt_flag *other = e ? NULL : find_key(table_end(c->t)->config_also, key, &positive);
    if (e || other) {
        const zt_flag *which = e ? e : other;
        for (int i = 0; i < c->nseen; i++)
            if (c->seen[i] == which)
                return cfg_err(c, k, "duplicate key '%s': --%s is set at line %d already", key, which->name,
                               c->seen_line[i]);
        if (c->nseen == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 32;
            c->seen = realloc(c->seen, (size_t)c->cap * sizeof *c->seen);
            c->seen_line = realloc(c->seen_line, (size_t)c->cap * sizeof *c->seen_line);
            if (!c->seen || !c->seen_line) zt_fatal("out of memory reading a config file");
        }
        c->seen[c->nseen] = which;
        c->seen_line[c->nseen++] = line_of(k);
        return e ? set_from_node(c, e, positive, v) : 0;  // the other command's key is its own business
    }
    if (!section && v->type == YAML_MAPPING_NODE) {  // a section: its pairs are flags
        for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++)
            if (apply_pair(c, yaml_document_get_node(c->doc, p->key), yaml_document_get_node(c->doc, p->value), key))
                return -1;
        return 0;
    }
    char near[96];
    nearest_key(c->t, key, near, sizeof near);
    if (section && v->type == YAML_MAPPING_NODE)
        return cfg_err(c, k, "'%s' in section '%s': sections hold flags, not other sections (nearest valid key: %s)",
                       key, section, near);
    return cfg_err(c, k, "unknown key '%s'%s%s%s (nearest valid key: %s)", key, section ? " in section '" : "",
                   section ? section : "", section ? "'" : "", near);
}

// ---- the bounds of a run file ----
// A run file is a mapping of flags, sections of flags and a list for a list flag: three levels,
// a few hundred bytes. These bounds sit far above that and keep what a hostile file costs small:
// libyaml's scanner takes time quadratic in the nesting of flow collections, libyaml finds an
// alias's anchor by a linear search, and the walk copies an aliased value once per use.
#define ZT_CONFIG_MAX_BYTES (1 << 20)        // the file
#define ZT_CONFIG_MAX_DEPTH 8                // collections nested, aliases expanded
#define ZT_CONFIG_MAX_ANCHORS 1000           // anchors defined (&name)
#define ZT_CONFIG_MAX_ALIAS_NODES 10000      // nodes the aliases (*name) produce, all uses together
#define ZT_CONFIG_MAX_ALIAS_BYTES (1 << 20)  // and scalar bytes they produce

// Line and column (from 1) of byte `offset` of the file as libyaml counts them: a line ends at
// LF, CR, CR LF, U+0085, U+2028 or U+2029; a column is a character. libyaml's reader errors
// (bad UTF-8, control characters) give only the offset.
static void position_of(const char *text, size_t len, size_t offset, yaml_encoding_t enc, int *line, int *col) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, l = 0, c = 0;
    if (offset > len) offset = len;
    if (enc == YAML_UTF16LE_ENCODING || enc == YAML_UTF16BE_ENCODING) {
        const int lo = enc == YAML_UTF16LE_ENCODING ? 0 : 1;  // the low byte's place in a unit
        for (i = 2; i + 1 < len && i < offset; i += 2) {         // after the BOM
            const unsigned u = (unsigned)s[i + lo] | (unsigned)s[i + 1 - lo] << 8;
            const unsigned next = i + 3 < len ? ((unsigned)s[i + 2 + lo] | (unsigned)s[i + 3 - lo] << 8) : 0;
            if (u == '\n' || u == 0x85 || u == 0x2028 || u == 0x2029 || (u == '\r' && next != '\n')) l++, c = 0;
            else if (u != '\r' && !(u >= 0xdc00 && u <= 0xdfff)) c++;  // a low surrogate ends a character
        }
    } else {
        if (len >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf) i = 3;
        for (; i < offset; i++) {
            if (s[i] == '\n' || (s[i] == '\r' && (i + 1 >= len || s[i + 1] != '\n'))) l++, c = 0;
            else if (i + 1 < len && s[i] == 0xc2 && s[i + 1] == 0x85) l++, c = 0, i++;
            else if (i + 2 < len && s[i] == 0xe2 && s[i + 1] == 0x80 && (s[i + 2] == 0xa8 || s[i + 2] == 0xa9))
                l++, c = 0, i += 2;
            else if (s[i] != '\r' && (s[i] & 0xc0) != 0x80) c++;
        }
    }
    *line = (int)l + 1;
    *col = (int)c + 1;
}

// "FILE:LINE:COL: not YAML: ..." for a parser that failed on the file's text.
static int yaml_failure(const char *path, const yaml_parser_t *p, const char *text, size_t len) {
    if (p->error == YAML_READER_ERROR) {  // a byte the reader refuses: no mark, an offset
        int line, col;
        position_of(text, len, p->problem_offset, p->encoding, &line, &col);
        const char *problem = p->problem ? p->problem : "unreadable text";
        const unsigned v = (unsigned)(p->problem_value < 0 ? 0 : p->problem_value);
        char what[32];
        if (strstr(problem, "character")) snprintf(what, sizeof what, "U+%04X", v);  // a code point
        else snprintf(what, sizeof what, "0x%02x", v);                                // an octet
        return zt_err("%s:%d:%d: not YAML: %s (%s, byte %zu of the file)", path, line, col, problem, what,
                      p->problem_offset);
    }
    if (p->error == YAML_MEMORY_ERROR) zt_fatal("%s: out of memory reading the config file", path);
    return zt_err("%s:%d:%d: not YAML: %s%s%s", path, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                  p->problem ? p->problem : "syntax error", p->context ? " " : "", p->context ? p->context : "");
}

// The file's bytes, read to its end (a /proc file has st_size 0 and holds text), at most
// ZT_CONFIG_MAX_BYTES of them. NULL + zt_err.
static char *read_config_text(const char *path, size_t *len_out) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        zt_err("%s: cannot read the config file: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        zt_err("%s: cannot read the config file: not a regular file", path);
        return NULL;
    }
    size_t len = 0;
    int over = 0;
    char *buf = zt_read_fd(fd, path, ZT_CONFIG_MAX_BYTES, 0, &len, &over);
    close(fd);
    if (!buf) return NULL;
    if (over) {
        int line, col;
        position_of(buf, len, ZT_CONFIG_MAX_BYTES, YAML_UTF8_ENCODING, &line, &col);
        zt_err("%s:%d: the config file goes on past %d bytes, the most a run file may hold (it sets flags; a list "
               "of thousands of files belongs in a file a flag names)",
               path, line, ZT_CONFIG_MAX_BYTES);
        free(buf);
        return NULL;
    }
    *len_out = len;
    return buf;
}

// What a node holds, aliases expanded: nodes, scalar bytes and nesting (a scalar 0, a
// collection 1 + its deepest child).
typedef struct {
    int64_t nodes, bytes;
    int height;
} node_size;

typedef struct {
    char *anchor;  // the collection's &name (NULL: none); open until its end
    node_size size;
} open_collection;

typedef struct {
    char *name;
    node_size size;
} anchor_size;

static void add_child(open_collection *stack, int depth, node_size child) {
    if (depth == 0) return;
    node_size *p = &stack[depth - 1].size;
    p->nodes += child.nodes, p->bytes += child.bytes;
    if (child.height + 1 > p->height) p->height = child.height + 1;
}

// Reads the file's events once before libyaml's loader builds it: refuses, at the line where it
// happens, nesting past ZT_CONFIG_MAX_DEPTH (before libyaml's scanner reads far into it) and
// aliases that expand past the limits above; reports a syntax or encoding error as the loader
// would. 0, or -1 + zt_err.
static int check_bounds(const char *path, const char *text, size_t len) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) zt_fatal("libyaml: cannot initialise a parser");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    open_collection stack[ZT_CONFIG_MAX_DEPTH];
    anchor_size *anchors = NULL;
    int depth = 0, nanchors = 0, rc = 0, done = 0;
    int64_t alias_nodes = 0, alias_bytes = 0;
    while (rc == 0 && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = yaml_failure(path, &p, text, len);
            break;
        }
        const int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
        const char *anchor = NULL;
        node_size size = {0};
        int closed = 0;  // a node complete: added to its parent, its anchor recorded
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_SCALAR_EVENT:
            anchor = (const char *)ev.data.scalar.anchor;
            size = (node_size){1, (int64_t)ev.data.scalar.length, 0};
            closed = 1;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
            if (depth == ZT_CONFIG_MAX_DEPTH) {
                rc = zt_err("%s:%d:%d: collections nested more than %d deep, the most a run file may nest (a mapping "
                            "of flags, a section of them, a list)",
                            path, line, col, ZT_CONFIG_MAX_DEPTH);
                break;
            }
            const yaml_char_t *a = ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.anchor
                                                                         : ev.data.mapping_start.anchor;
            stack[depth++] = (open_collection){a ? strdup((const char *)a) : NULL, {1, 0, 1}};
            break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (depth == 0) break;  // unbalanced: libyaml's parser never gives it
            depth--;
            size = stack[depth].size;
            anchor = stack[depth].anchor;
            closed = 1;
            break;
        case YAML_ALIAS_EVENT: {
            const char *name = (const char *)ev.data.alias.anchor;
            for (int i = 0; i < depth; i++)
                if (stack[i].anchor && !strcmp(stack[i].anchor, name)) {
                    rc = zt_err("%s:%d:%d: the alias *%s stands inside the collection it names (a cycle)", path, line,
                                col, name);
                    break;
                }
            const anchor_size *found = NULL;
            for (int i = nanchors - 1; rc == 0 && i >= 0 && !found; i--)
                if (!strcmp(anchors[i].name, name)) found = &anchors[i];
            if (rc || !found) break;  // an undefined alias: the loader says so
            size = found->size;
            alias_nodes += size.nodes, alias_bytes += size.bytes;
            if (alias_nodes > ZT_CONFIG_MAX_ALIAS_NODES || alias_bytes > ZT_CONFIG_MAX_ALIAS_BYTES)
                rc = zt_err("%s:%d:%d: the aliases expand past the limit of a run file at *%s: %lld nodes and %lld "
                            "bytes by here, at most %d nodes and %d bytes",
                            path, line, col, name, (long long)alias_nodes, (long long)alias_bytes,
                            ZT_CONFIG_MAX_ALIAS_NODES, ZT_CONFIG_MAX_ALIAS_BYTES);
            else if (depth + size.height > ZT_CONFIG_MAX_DEPTH)
                rc = zt_err("%s:%d:%d: the alias *%s nests collections %d deep here, more than the %d a run file "
                            "may nest (a mapping of flags, a section of them, a list)",
                            path, line, col, name, depth + size.height, ZT_CONFIG_MAX_DEPTH);
            add_child(stack, depth, size);
            break;
        }
        default: break;
        }
        if (rc == 0 && closed) {
            add_child(stack, depth, size);
            if (anchor) {
                if (nanchors == ZT_CONFIG_MAX_ANCHORS)
                    rc = zt_err("%s:%d:%d: more than %d anchors (&%s), the most a run file may define", path, line,
                                col, ZT_CONFIG_MAX_ANCHORS, anchor);
                else {
                    if (nanchors % 64 == 0) {
                        anchor_size *a = realloc(anchors, (size_t)(nanchors + 64) * sizeof *anchors);
                        if (!a) zt_fatal("out of memory reading a config file");
                        anchors = a;
                    }
                    anchors[nanchors++] = (anchor_size){strdup(anchor), size};
                }
            }
        }
        if (closed && ev.type != YAML_SCALAR_EVENT) free(stack[depth].anchor), stack[depth].anchor = NULL;
        yaml_event_delete(&ev);
    }
    for (int i = 0; i < depth; i++) free(stack[i].anchor);
    for (int i = 0; i < nanchors; i++) free(anchors[i].name);
    free(anchors);
    yaml_parser_delete(&p);
    return rc;
}

int zt_flags_read_config(const zt_flag *t, void *opts, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return zt_err("%s: cannot read the config file: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return zt_err("%s: cannot read the config file: not a regular file", path);
    size_t len;
    char *text = read_config_text(path, &len);
    if (!text) return -1;
    if (check_bounds(path, text, len) != 0) {
        free(text);
        return -1;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) zt_fatal("libyaml: cannot initialise a parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int rc = 0;
    cfg_ctx c = {.path = path, .doc = &doc, .t = t, .opts = opts};
    if (!yaml_parser_load(&parser, &doc)) {
        rc = yaml_failure(path, &parser, text, len);
        yaml_parser_delete(&parser);
        free(text);
        return rc;
    }
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type != YAML_MAPPING_NODE) {
        rc = cfg_err(&c, root, "the file is %s, not a mapping of flag names to values (`lr: 3e-4`, one per line)",
                     node_kind(root));
    } else if (root) {
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; rc == 0 && p < root->data.mapping.pairs.top; p++)
            rc = apply_pair(&c, yaml_document_get_node(&doc, p->key), yaml_document_get_node(&doc, p->value), NULL);
    }
    yaml_document_delete(&doc);
    if (rc == 0) {  // one document per file: a second one would be read by nothing
        yaml_document_t next;
        if (!yaml_parser_load(&parser, &next)) {
            rc = yaml_failure(path, &parser, text, len);
        } else {
            const yaml_node_t *r2 = yaml_document_get_root_node(&next);
            if (r2) rc = zt_err("%s:%d: a second YAML document ('---'): a config file holds one mapping", path,
                                (int)next.start_mark.line + 1);
            yaml_document_delete(&next);
        }
    }
    yaml_parser_delete(&parser);
    free(c.seen);
    free(c.seen_line);
    if (rc == 0) {
        owned *o = owned_for(opts);
        free(o->path);
        o->path = zt_xmalloc(strlen(path) + 1);
        strcpy(o->path, path);
        o->crc = zt_crc32c(0, text, len);
    }
    free(text);
    return rc;
}

// ---- writing: --print-config and run.json's "config" ----

// A value the flag cannot be given ("not given": --steps 0, --threads 0, plan's unset -1, an
// enum outside its choices), printed as null so that reading it back keeps the default.
static int is_unset(const zt_flag *e, const void *opts) {
    const void *p = (const char *)opts + e->offset;
    switch (e->type) {
    case ZT_FLAG_INT: return *(const int *)p < e->imin || *(const int *)p > e->imax;
    case ZT_FLAG_I64: return *(const int64_t *)p < e->imin || *(const int64_t *)p > e->imax;
    case ZT_FLAG_U64: return *(const uint64_t *)p < (uint64_t)e->imin || *(const uint64_t *)p > (uint64_t)e->imax;
    case ZT_FLAG_F64: return !(*(const double *)p >= e->fmin && *(const double *)p <= e->fmax);
    case ZT_FLAG_ENUM: return !strcmp(choice_name(e, *(const int *)p), "?");
    case ZT_FLAG_STR:
    case ZT_FLAG_OPTSTR:
    case ZT_FLAG_KEYWORD: return *(const char *const *)p == NULL;
    default: return 0;
    }
}

// The shortest decimal that reads back as the same double.
static void fmt_f64(double v, char *buf, size_t n) {
    if (v == (double)(long long)v && fabs(v) < 1e15) {  // 300, not 3e+02
        snprintf(buf, n, "%lld", (long long)v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

// The UTF-8 character at s: its length in bytes (its code point in *cp), or 0 where s holds
// none: a bad octet, a sequence cut short, an overlong form, a surrogate or past U+10FFFF, as
// libyaml's reader refuses them.
static int utf8_char(const unsigned char *s, uint32_t *cp) {
    if (s[0] < 0x80) return *cp = s[0], 1;
    const int n = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
                  : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                  : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                 : 0;
    if (!n) return 0;
    uint32_t v = s[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) || (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff) return 0;
    return *cp = v, n;
}

// Whether YAML reads code point cp, written as it is in a scalar, back as itself: printable
// (libyaml's reader refuses the rest) and no line break (U+0085, U+2028, U+2029 are breaks in
// YAML 1.1, folded like a newline), nor the byte order mark.
static int yaml_raw_ok(uint32_t cp) {
    return (cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xd7ff && cp != 0x2028 && cp != 0x2029) ||
           (cp >= 0xe000 && cp <= 0xfffd && cp != 0xfeff) || (cp >= 0x10000 && cp <= 0x10ffff);
}

// 0 when s is UTF-8 text, which YAML can hold (escaped where need be); else -1 + zt_err naming
// the flag: YAML holds Unicode text only, so no run file can give such a value back.
static int yaml_writable(const zt_flag *e, int item, const char *s) {
    uint32_t cp;
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        const int n = utf8_char(c, &cp);
        if (n) {
            c += n;
            continue;
        }
        char which[32] = "";
        if (item >= 0) snprintf(which, sizeof which, " (item %d)", item + 1);
        return zt_err("--%s%s: the value is not UTF-8 text (byte 0x%02x at byte %zu of it): a YAML run file holds "
                      "UTF-8 only, so --print-config cannot write it in a file --config reads back; give this value "
                      "on the command line instead (or rename the path)",
                      e->name, which, *c, (size_t)(c - (const unsigned char *)s));
    }
    return 0;
}

// A YAML scalar for a string (UTF-8, yaml_writable): plain when YAML reads it back as this
// string, else double-quoted with an escape for each character that cannot stand as it is.
static void yaml_string(FILE *f, const char *s) {
    static const char *const special[] = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"};
    int plain = *s && strchr("-?:,[]{}#&*!|>'\"%@`", *s) == NULL && s[strlen(s) - 1] != ' ' && *s != ' ';
    uint32_t cp;
    for (const char *c = s; plain && *c; c++) {
        const int n = utf8_char((const unsigned char *)c, &cp);
        plain = n && yaml_raw_ok(cp) && !(*c == ':' && (c[1] == ' ' || !c[1])) && !(*c == '#' && c > s && c[-1] == ' ');
        if (n > 1) c += n - 1;
    }
    for (size_t i = 0; plain && i < sizeof special / sizeof special[0]; i++)
        plain = strcasecmp(s, special[i]) != 0;
    char *end;
    errno = 0;
    (void)strtod(s, &end);
    if (plain && *end == 0) plain = 0;  // a number
    if (plain && (!strncasecmp(s, ".inf", 4) || !strncasecmp(s, ".nan", 4) || !strncmp(s, "0x", 2) ||
                  !strncmp(s, "0o", 2)))
        plain = 0;
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        const int n = utf8_char(c, &cp);
        if (!n) cp = *c;  // not UTF-8: refused before printing (yaml_writable); never reached
        if (cp == '"' || cp == '\\') fprintf(f, "\\%c", (int)cp);
        else if (cp == '\n') fputs("\\n", f);
        else if (cp == '\t') fputs("\\t", f);
        else if (yaml_raw_ok(cp)) fwrite(c, 1, (size_t)n, f);
        else if (cp <= 0xff) fprintf(f, "\\x%02x", (unsigned)cp);  // controls, U+0085
        else if (cp <= 0xffff) fprintf(f, "\\u%04x", (unsigned)cp);  // U+2028, U+2029, U+FEFF, U+FFFE
        else fprintf(f, "\\U%08x", (unsigned)cp);
        c += n ? n : 1;
    }
    fputc('"', f);
}

int zt_flags_print_config(FILE *f, const char *cmd, const zt_flag *t, const void *opts) {
    // every string checked before a line is printed: a refusal prints nothing
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e) || is_unset(e, opts)) continue;
        const void *p = (const char *)opts + e->offset;
        if (e->type == ZT_FLAG_LIST) {
            const zt_flag_list *l = p;
            for (int i = 0; i < l->n; i++)
                if (yaml_writable(e, i, l->v[i])) return -1;
        } else if (e->type == ZT_FLAG_STR || e->type == ZT_FLAG_OPTSTR || e->type == ZT_FLAG_KEYWORD) {
            if (yaml_writable(e, -1, *(const char *const *)p)) return -1;
        }
    }
    fprintf(f, "# zerotrain %s: every setting, resolved (defaults, then --config FILE, then the command line).\n"
               "# Read back with `zerotrain %s --config FILE`; the command line overrides the file.\n"
               "# Keys are the long flag names (micro_batch or micro-batch); null is the flag's default.\n",
            cmd, cmd);
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e)) {
            fprintf(f, "\n# ");
            for (const char *h = e->help ? e->help : ""; *h; h++) fputc(*h == '\n' ? ' ' : *h, f);
            fputc('\n', f);
            continue;
        }
        char key[96], num[64];
        print_key(e, key, sizeof key);
        fprintf(f, "%s:", key);
        const void *p = (const char *)opts + e->offset;
        if (is_unset(e, opts)) {
            fputs(" null\n", f);
            continue;
        }
        switch (e->type) {
        case ZT_FLAG_INT: fprintf(f, " %d", *(const int *)p); break;
        case ZT_FLAG_I64: fprintf(f, " %lld", (long long)*(const int64_t *)p); break;
        case ZT_FLAG_U64: fprintf(f, " %llu", (unsigned long long)*(const uint64_t *)p); break;
        case ZT_FLAG_F64: fmt_f64(*(const double *)p, num, sizeof num), fprintf(f, " %s", num); break;
        case ZT_FLAG_SET: fputs(*(const int *)p ? " true" : " false", f); break;
        case ZT_FLAG_CLEAR: {  // printed under the positive name: evenfix: true
            const int on = *(const int *)p;
            fputs(positive_name(e, e->name) ? (on ? " true" : " false") : (on ? " false" : " true"), f);
            break;
        }
        case ZT_FLAG_ENUM: fprintf(f, " %s", choice_name(e, *(const int *)p)); break;
        case ZT_FLAG_LIST: {
            const zt_flag_list *l = p;
            if (!l->n) fputs(" []", f);
            for (int i = 0; i < l->n; i++) fputs("\n  - ", f), yaml_string(f, l->v[i]);
            break;
        }
        default: fputc(' ', f), yaml_string(f, *(const char *const *)p);
        }
        fputc('\n', f);
    }
    return 0;
}

char *zt_flags_config_json(const zt_flag *t, const void *opts) {
    cJSON *o = cJSON_CreateObject();
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e)) continue;
        char key[96];
        print_key(e, key, sizeof key);
        const void *p = (const char *)opts + e->offset;
        if (is_unset(e, opts)) {
            cJSON_AddNullToObject(o, key);
            continue;
        }
        switch (e->type) {
        case ZT_FLAG_INT: cJSON_AddNumberToObject(o, key, *(const int *)p); break;
        case ZT_FLAG_I64: cJSON_AddNumberToObject(o, key, (double)*(const int64_t *)p); break;
        case ZT_FLAG_U64: cJSON_AddNumberToObject(o, key, (double)*(const uint64_t *)p); break;
        case ZT_FLAG_F64: cJSON_AddNumberToObject(o, key, *(const double *)p); break;
        case ZT_FLAG_SET: cJSON_AddBoolToObject(o, key, *(const int *)p); break;
        case ZT_FLAG_CLEAR: cJSON_AddBoolToObject(o, key, positive_name(e, e->name) ? *(const int *)p : !*(const int *)p); break;
        case ZT_FLAG_ENUM: cJSON_AddStringToObject(o, key, choice_name(e, *(const int *)p)); break;
        case ZT_FLAG_LIST: {
            const zt_flag_list *l = p;
            cJSON *a = cJSON_AddArrayToObject(o, key);
            for (int i = 0; i < l->n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(l->v[i]));
            break;
        }
        default: cJSON_AddStringToObject(o, key, *(const char *const *)p);
        }
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

enum { OPT_CONFIG = 0x10000, OPT_PRINT_CONFIG };

// --config FILE (or --config=FILE) in argv, found before getopt runs: the file is read first,
// so that every flag on the command line overrides it wherever it stands. NULL: none;
// `twice` when it is given more than once.
static const char *config_arg(int argc, char **argv, int *twice) {
    const char *path = NULL;
    *twice = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--")) break;
        if (!strcmp(a, "--config") && i + 1 < argc) v = argv[++i];
        else if (!strncmp(a, "--config=", 9)) v = a + 9;
        if (v && path) *twice = 1;
        if (v) path = v;
    }
    return path;
}

int zt_flags_parse_operands(const char *cmd, const zt_flag *t, void *opts, int argc, char **argv,
                            const char *synopsis, const char *epilog, int *first) {
    int n = 0, in_order = 0;
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        n += is_flag(e) ? 1 + (e->alias != NULL) : 0;
        in_order |= e->type == ZT_FLAG_LIST;
    }
    struct option *lo = zt_xcalloc((size_t)n + 4, sizeof *lo);
    int k = 0;
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e)) continue;
        const int has = takes_no_value(e)            ? no_argument
                        : e->type == ZT_FLAG_OPTSTR ? optional_argument
                                                    : required_argument;
        lo[k++] = (struct option){e->name, has, 0, 256 + (int)(e - t)};
        if (e->alias) lo[k++] = (struct option){e->alias, has, 0, 256 + (int)(e - t)};
    }
    lo[k++] = (struct option){"config", required_argument, 0, OPT_CONFIG};
    lo[k++] = (struct option){"print-config", no_argument, 0, OPT_PRINT_CONFIG};
    lo[k++] = (struct option){"help", no_argument, 0, 'h'};
    // a leading '-': getopt returns each operand in place (as 1) instead of moving it to the end
    char shorts[128];
    size_t ns = 0;
    if (in_order) shorts[ns++] = '-';
    shorts[ns++] = 'h';
    for (const zt_flag *e = t; e->type != ZT_FLAG_END && ns + 3 < sizeof shorts; e++) {
        if (!is_flag(e) || !e->letter) continue;
        shorts[ns++] = e->letter;
        if (!takes_no_value(e)) shorts[ns++] = ':';
        if (e->type == ZT_FLAG_OPTSTR) shorts[ns++] = ':';
    }
    shorts[ns] = 0;
    zt_flags_defaults(t, opts);
    int c, rc = 0, print_config = 0, twice = 0;
    // defaults < the config file < the command line
    const char *cfg = config_arg(argc, argv, &twice);
    if (twice) {
        fprintf(stderr, "zerotrain %s: error: --config is given more than once (one file per run)\n", cmd);
        rc = 2;
    } else if (cfg && zt_flags_read_config(t, opts, cfg) != 0) {
        fprintf(stderr, "zerotrain %s: error: %s\n", cmd, zt_errmsg());
        rc = 2;
    }
    // a list flag on the command line replaces the file's list (its first occurrence; later ones add)
    unsigned char *list_given = zt_xcalloc((size_t)(table_end(t) - t) + 1, 1);
    zt_flag_list *list = NULL;  // in order: the list the next operand joins
    optind = 0;  // glibc: 0 re-initialises getopt (its ordering mode too) for a second table in one process
    while (rc == 0 && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        for (const zt_flag *e = t; c != 'h' && c < 256 && e->type != ZT_FLAG_END; e++)
            if (is_flag(e) && e->letter && e->letter == c) c = 256 + (int)(e - t);
        if (c == 'h') {
            zt_flags_usage(stdout, t, synopsis, epilog);
            rc = 1;
            break;
        }
        if (c == OPT_CONFIG) continue;  // read before the command line
        if (c == OPT_PRINT_CONFIG) {
            print_config = 1;
            continue;
        }
        if (c == 1 && in_order) {
            if (!list) {
                char names[256];
                list_names(t, names, sizeof names);
                fprintf(stderr, "zerotrain %s: error: '%s': say whether it is %s\n", cmd, optarg, names);
                rc = 2;
                break;
            }
            list->v[list->n++] = optarg;
            continue;
        }
        if (c < 256) {  // getopt has named the bad option
            zt_flags_usage(stderr, t, synopsis, epilog);
            rc = 2;
            break;
        }
        const zt_flag *e = &t[c - 256];
        int err = 0;
        if (e->type == ZT_FLAG_SET) *FIELD(opts, e, int) = 1;
        else if (e->type == ZT_FLAG_CLEAR) *FIELD(opts, e, int) = 0;
        else if (e->type == ZT_FLAG_LIST) {
            list = FIELD(opts, e, zt_flag_list);
            if (!list_given[e - t]) {
                free(list->v);
                list->v = zt_xcalloc((size_t)argc, sizeof *list->v);
                list->n = 0;
                list_given[e - t] = 1;
            }
        }
        else if (e->type == ZT_FLAG_OPTSTR) {
            // --x alone takes .bare; --x V (or --x=V) takes V
            if (optarg) *FIELD(opts, e, const char *) = optarg;
            else if (optind < argc && argv[optind][0] != '-') *FIELD(opts, e, const char *) = argv[optind++];
            else *FIELD(opts, e, const char *) = e->bare;
        } else {
            err = parse_value(e, optarg, opts);
        }
        if (err) {
            fprintf(stderr, "zerotrain %s: error: %s\n", cmd, zt_errmsg());
            rc = 2;
        }
    }
    if (rc == 0 && !first && optind < argc) {
        fprintf(stderr, "zerotrain %s: error: unexpected argument '%s'\n", cmd, argv[optind]);
        rc = 2;
    }
    if (rc == 0 && print_config) {
        rc = 1;
        if (zt_flags_print_config(stdout, cmd, t, opts) != 0) {
            fprintf(stderr, "zerotrain %s: error: %s\n", cmd, zt_errmsg());
            rc = 2;
        }
    }
    if (first) *first = optind;
    free(list_given);
    free(lo);
    return rc;
}

int zt_flags_parse(const char *cmd, const zt_flag *t, void *opts, int argc, char **argv, const char *synopsis,
                   const char *epilog) {
    return zt_flags_parse_operands(cmd, t, opts, argc, argv, synopsis, epilog, NULL);
}

char *zt_flags_settings_json(const zt_flag *t, const void *opts) {
    cJSON *o = cJSON_CreateObject();
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e) || !e->setting) continue;
        const void *p = (const char *)opts + e->offset;
        switch (e->type) {
        case ZT_FLAG_INT: cJSON_AddNumberToObject(o, e->setting, *(const int *)p); break;
        case ZT_FLAG_I64: cJSON_AddNumberToObject(o, e->setting, (double)*(const int64_t *)p); break;
        case ZT_FLAG_U64: cJSON_AddNumberToObject(o, e->setting, (double)*(const uint64_t *)p); break;
        case ZT_FLAG_F64: cJSON_AddNumberToObject(o, e->setting, *(const double *)p); break;
        case ZT_FLAG_SET:
        case ZT_FLAG_CLEAR: cJSON_AddBoolToObject(o, e->setting, *(const int *)p); break;
        case ZT_FLAG_ENUM: cJSON_AddStringToObject(o, e->setting, choice_name(e, *(const int *)p)); break;
        case ZT_FLAG_LIST: {
            const zt_flag_list *l = p;
            cJSON *a = cJSON_AddArrayToObject(o, e->setting);
            for (int i = 0; i < l->n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(l->v[i]));
            break;
        }
        default: {
            const char *s = *(const char *const *)p;
            cJSON_AddStringToObject(o, e->setting, s ? s : "");
        }
        }
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}
