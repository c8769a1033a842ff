// The generic flag parser behind every command's table (cli/flags.h): getopt_long
// options, usage text, defaults, range checks and the run.json settings, all from the table.
#include "cli/flags.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

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

void zt_flags_free(const zt_flag *t, void *opts) {
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++)
        if (e->type == ZT_FLAG_LIST) {
            free(FIELD(opts, e, zt_flag_list)->v);
            *FIELD(opts, e, zt_flag_list) = (zt_flag_list){0};
        }
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

int zt_flags_parse_operands(const char *cmd, const zt_flag *t, void *opts, int argc, char **argv,
                            const char *synopsis, const char *epilog, int *first) {
    int n = 0, in_order = 0;
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        n += is_flag(e) ? 1 + (e->alias != NULL) : 0;
        in_order |= e->type == ZT_FLAG_LIST;
    }
    struct option *lo = zt_xcalloc((size_t)n + 2, sizeof *lo);
    int k = 0;
    for (const zt_flag *e = t; e->type != ZT_FLAG_END; e++) {
        if (!is_flag(e)) continue;
        const int has = takes_no_value(e)            ? no_argument
                        : e->type == ZT_FLAG_OPTSTR ? optional_argument
                                                    : required_argument;
        lo[k++] = (struct option){e->name, has, 0, 256 + (int)(e - t)};
        if (e->alias) lo[k++] = (struct option){e->alias, has, 0, 256 + (int)(e - t)};
    }
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
    int c, rc = 0;
    zt_flag_list *list = NULL;  // in order: the list the next operand joins
    optind = 1;
    while (rc == 0 && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        for (const zt_flag *e = t; c != 'h' && c < 256 && e->type != ZT_FLAG_END; e++)
            if (is_flag(e) && e->letter && e->letter == c) c = 256 + (int)(e - t);
        if (c == 'h') {
            zt_flags_usage(stdout, t, synopsis, epilog);
            rc = 1;
            break;
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
            if (!list->v) list->v = zt_xcalloc((size_t)argc, sizeof *list->v);
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
    if (first) *first = optind;
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
