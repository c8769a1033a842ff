// Triage by board power: sample readers for the three log formats, the snapshot
// classifier with the field report's states, stretches, and band calibration.
// The rules are spelled out in docs/operations.md; keep the two in step.
#define _GNU_SOURCE
#include "ops/triage.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "base/json_util.h"
#include "base/common.h"
#include "ops/fmt.h"

static const char *state_names[ZT_GS_COUNT_] = {"unknown",    "compute",  "communication", "starvation",
                                                 "checkpoint", "deadlock", "idle"};

const char *zt_gpu_state_name(zt_gpu_state s) { return (unsigned)s < ZT_GS_COUNT_ ? state_names[s] : "?"; }

// ---- bands -------------------------------------------------------------------------
// B300 field table. Edges sit halfway between the nearest ends of neighbouring
// levels: idle 135 | 162.5 | 190-195 deadlock | 385 | 575-640 starvation and
// communication (told apart by utilization, not power) | 790 | 940-1040 compute.
void zt_bands_b300(zt_bands *b) {
    memset(b, 0, sizeof *b);
    snprintf(b->gpu, sizeof b->gpu, "NVIDIA B300");
    snprintf(b->source, sizeof b->source, "field report: 16 x B300, Qwen3-32B FSDP fine-tune (docs/operations.md)");
    b->level_lo[ZT_GS_IDLE] = 135, b->level_hi[ZT_GS_IDLE] = 135;
    b->level_lo[ZT_GS_DEADLOCK] = 190, b->level_hi[ZT_GS_DEADLOCK] = 195;
    b->level_lo[ZT_GS_STARVATION] = 575, b->level_hi[ZT_GS_STARVATION] = 575;
    b->level_lo[ZT_GS_COMM] = 640, b->level_hi[ZT_GS_COMM] = 640;
    b->level_lo[ZT_GS_COMPUTE] = 940, b->level_hi[ZT_GS_COMPUTE] = 1040;
    b->idle_max_w = 162.5;
    b->hang_max_w = 385;
    b->compute_min_w = 790;
    b->zero_util_max = 5;
    b->busy_util_min = 90;
    b->uneven_spread = 20;
}

int zt_bands_validate(const zt_bands *b, const char *name) {
    if (!(b->idle_max_w > 0)) return zt_err("%s: edges_w.idle_max (%g) must be above 0 W", name, b->idle_max_w);
    if (!(b->hang_max_w > b->idle_max_w))
        return zt_err("%s: edges_w.hang_max (%g) must be above edges_w.idle_max (%g)", name, b->hang_max_w,
                      b->idle_max_w);
    if (!(b->compute_min_w > b->hang_max_w))
        return zt_err("%s: edges_w.compute_min (%g) must be above edges_w.hang_max (%g)", name, b->compute_min_w,
                      b->hang_max_w);
    if (!(b->compute_min_w <= 10000))
        return zt_err("%s: edges_w.compute_min (%g) is above 10000 W: watts expected", name, b->compute_min_w);
    if (!(b->zero_util_max >= 0 && b->zero_util_max < b->busy_util_min && b->busy_util_min <= 100))
        return zt_err("%s: util_pct needs 0 <= zero_max (%g) < busy_min (%g) <= 100", name, b->zero_util_max,
                      b->busy_util_min);
    if (!(b->uneven_spread > 0 && b->uneven_spread <= 100))
        return zt_err("%s: util_pct.uneven_spread (%g) must be in (0, 100]", name, b->uneven_spread);
    for (int s = 0; s < ZT_GS_COUNT_; s++)
        if (!(b->level_lo[s] <= b->level_hi[s]))
            return zt_err("%s: levels_w.%s: [%g, %g] is not a range (lo <= hi)", name, state_names[s], b->level_lo[s],
                          b->level_hi[s]);
    return 0;
}

static int json_num(const cJSON *obj, const char *key, const char *path, const char *name, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return zt_err("%s: %s.%s is missing", name, path, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return zt_err("%s: %s.%s must be a number", name, path, key);
    *out = v->valuedouble;
    return 0;
}

static const cJSON *json_obj(const cJSON *root, const char *key, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsObject(v)) {
        zt_err("%s: \"%s\" must be an object", name, key);
        return NULL;
    }
    return v;
}

int zt_bands_parse(zt_bands *b, const char *text, const char *name) {
    memset(b, 0, sizeof *b);
    cJSON *root = cJSON_Parse(text);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = text; at && p < at && *p; p++) line += *p == '\n';
        char deep[160];
        const size_t n = strlen(text);
        if (zt_json_depth_error(text, n, zt_json_error_col(text, n), deep, sizeof deep))
            return zt_err("%s:%d: %s", name, line, deep);
        return zt_err("%s:%d: not valid JSON", name, line);
    }
    int rc = -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *edges, *util, *levels, *s;
    if (!cJSON_IsObject(root)) {
        zt_err("%s: a band file is a JSON object", name);
        goto out;
    }
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "zerotrain-bands") != 0) {
        zt_err("%s: \"format\" must be \"zerotrain-bands\"", name);
        goto out;
    }
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
        zt_err("%s: \"version\" must be 1 (this build reads band files of version 1)", name);
        goto out;
    }
    if ((s = cJSON_GetObjectItemCaseSensitive(root, "gpu")) && cJSON_IsString(s))
        snprintf(b->gpu, sizeof b->gpu, "%s", s->valuestring);
    if ((s = cJSON_GetObjectItemCaseSensitive(root, "source")) && cJSON_IsString(s))
        snprintf(b->source, sizeof b->source, "%s", s->valuestring);
    if (!(edges = json_obj(root, "edges_w", name)) || !(util = json_obj(root, "util_pct", name))) goto out;
    if (json_num(edges, "idle_max", "edges_w", name, &b->idle_max_w) ||
        json_num(edges, "hang_max", "edges_w", name, &b->hang_max_w) ||
        json_num(edges, "compute_min", "edges_w", name, &b->compute_min_w) ||
        json_num(util, "zero_max", "util_pct", name, &b->zero_util_max) ||
        json_num(util, "busy_min", "util_pct", name, &b->busy_util_min) ||
        json_num(util, "uneven_spread", "util_pct", name, &b->uneven_spread))
        goto out;
    levels = cJSON_GetObjectItemCaseSensitive(root, "levels_w");
    if (levels && !cJSON_IsObject(levels)) {
        zt_err("%s: \"levels_w\" must be an object of [lo, hi] pairs", name);
        goto out;
    }
    for (int st = 1; levels && st < ZT_GS_COUNT_; st++) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(levels, state_names[st]);
        if (!p) continue;
        if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(p, 0)) ||
            !cJSON_IsNumber(cJSON_GetArrayItem(p, 1))) {
            zt_err("%s: levels_w.%s must be [lo, hi] in watts", name, state_names[st]);
            goto out;
        }
        b->level_lo[st] = cJSON_GetArrayItem(p, 0)->valuedouble;
        b->level_hi[st] = cJSON_GetArrayItem(p, 1)->valuedouble;
    }
    rc = zt_bands_validate(b, name);
out:
    cJSON_Delete(root);
    return rc;
}

int zt_bands_load(zt_bands *b, const char *path) {
    char *text = zt_read_file(path, NULL);
    if (!text) return zt_err_prefix("band file");
    int rc = zt_bands_parse(b, text, path);
    free(text);
    return rc;
}

// Round to 0.1 W / 0.1 % so that written files stay readable.
static double r1(double x) { return round(x * 10.0) / 10.0; }

char *zt_bands_to_json(const zt_bands *b) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "zerotrain-bands");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "gpu", b->gpu);
    cJSON_AddStringToObject(root, "source", b->source);
    cJSON *lv = cJSON_AddObjectToObject(root, "levels_w");
    static const zt_gpu_state order[] = {ZT_GS_IDLE, ZT_GS_DEADLOCK, ZT_GS_STARVATION, ZT_GS_COMM, ZT_GS_COMPUTE};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        double pair[2] = {r1(b->level_lo[order[i]]), r1(b->level_hi[order[i]])};
        cJSON_AddItemToObject(lv, state_names[order[i]], cJSON_CreateDoubleArray(pair, 2));
    }
    cJSON *e = cJSON_AddObjectToObject(root, "edges_w");
    cJSON_AddNumberToObject(e, "idle_max", r1(b->idle_max_w));
    cJSON_AddNumberToObject(e, "hang_max", r1(b->hang_max_w));
    cJSON_AddNumberToObject(e, "compute_min", r1(b->compute_min_w));
    cJSON *u = cJSON_AddObjectToObject(root, "util_pct");
    cJSON_AddNumberToObject(u, "zero_max", r1(b->zero_util_max));
    cJSON_AddNumberToObject(u, "busy_min", r1(b->busy_util_min));
    cJSON_AddNumberToObject(u, "uneven_spread", r1(b->uneven_spread));
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(s);
    char *out = zt_xmalloc(n + 2);
    memcpy(out, s, n);
    out[n] = '\n', out[n + 1] = 0;
    cJSON_free(s);
    return out;
}

// ---- helpers -----------------------------------------------------------------------
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double zt_median(double *v, size_t n) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const char *zt_triage_fmt_time(zt_time_kind k, double t, char *buf, size_t n) {
    if (k == ZT_TK_ABS) {
        time_t s = (time_t)floor(t);
        struct tm tm;
        localtime_r(&s, &tm);
        strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
    } else if (k == ZT_TK_TIME_OF_DAY) {
        long s = (long)floor(t);
        snprintf(buf, n, "%s%02ld:%02ld:%02ld", s >= 86400 ? "+1d " : "", (s / 3600) % 24, (s / 60) % 60, s % 60);
    } else {
        snprintf(buf, n, "+%.1f s", t);
    }
    return buf;
}

// ---- sample readers ----------------------------------------------------------------
const char *zt_sample_format_name(zt_sample_format f) {
    switch (f) {
    case ZT_SF_AUTO: return "auto";
    case ZT_SF_POWER_CSV: return "power-csv";
    case ZT_SF_SMI_CSV: return "smi-csv";
    case ZT_SF_DMON: return "dmon";
    }
    return "?";
}

int zt_sample_format_parse(const char *s, zt_sample_format *out) {
    static const zt_sample_format all[] = {ZT_SF_AUTO, ZT_SF_POWER_CSV, ZT_SF_SMI_CSV, ZT_SF_DMON};
    for (size_t i = 0; i < 4; i++)
        if (!strcmp(s, zt_sample_format_name(all[i]))) return *out = all[i], 0;
    return zt_err("--format: '%s' is not one of auto, power-csv, smi-csv, dmon", s);
}

void zt_samples_init(zt_samples *set) { memset(set, 0, sizeof *set); }

void zt_samples_free(zt_samples *set) {
    free(set->s);
    memset(set, 0, sizeof *set);
}

static void push(zt_samples *set, double t, int dev, double p, double u) {
    if (set->n == set->cap) {
        set->cap = set->cap ? set->cap * 2 : 1024;
        zt_gpu_sample *ns = zt_xmalloc(set->cap * sizeof *ns);
        if (set->n) memcpy(ns, set->s, set->n * sizeof *ns);
        free(set->s);
        set->s = ns;
    }
    set->s[set->n++] = (zt_gpu_sample){t, dev, p, u};
}

// A line iterator over text in memory (LF or CRLF), counting lines from 1.
typedef struct {
    const char *p, *end;
    int line;
    char buf[4096];
} line_iter;

static int next_line(line_iter *it, const char *name, char **out) {
    if (it->p >= it->end) return 0;
    const char *nl = memchr(it->p, '\n', (size_t)(it->end - it->p));
    const char *stop = nl ? nl : it->end;
    size_t n = (size_t)(stop - it->p);
    it->line++;
    if (n >= sizeof it->buf) return zt_err("%s:%d: line longer than %zu bytes: not a sample log", name, it->line,
                                           sizeof it->buf - 1);
    memcpy(it->buf, it->p, n);
    if (n && it->buf[n - 1] == '\r') n--;
    it->buf[n] = 0;
    it->p = nl ? nl + 1 : it->end;
    *out = it->buf;
    return 1;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

static int blank(const char *s) {
    while (isspace((unsigned char)*s)) s++;
    return *s == 0;
}

// Split `s` in place at `sep` (0: runs of whitespace) into at most max fields.
static int split(char *s, char sep, char **f, int max) {
    int n = 0;
    if (sep) {
        for (;;) {
            if (n == max) return max + 1;
            f[n++] = s;
            char *c = strchr(s, sep);
            if (!c) break;
            *c = 0;
            s = c + 1;
        }
        for (int i = 0; i < n; i++) f[i] = trim(f[i]);
        return n;
    }
    char *save = NULL;
    for (char *tok = strtok_r(s, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        if (n == max) return max + 1;
        f[n++] = tok;
    }
    return n;
}

// A number, with an optional unit suffix (" W", "%", " MiB") that must match `unit`.
static int parse_value(const char *name, int line, const char *col, const char *s, const char *unit, double lo,
                       double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v))
        return zt_err("%s:%d: %s is '%s', not a number%s", name, line, col, s,
                      s[0] == '[' || s[0] == '-' ? " (this GPU does not report it; triage needs it)" : "");
    while (*end == ' ') end++;
    if (*end && !(unit && !strcmp(end, unit)))
        return zt_err("%s:%d: %s is '%s': unexpected text after the number%s%s%s", name, line, col, s,
                      unit ? " (only '" : "", unit ? unit : "", unit ? "' may follow)" : "");
    if (v < lo || v > hi) return zt_err("%s:%d: %s %g outside [%g, %g]", name, line, col, v, lo, hi);
    *out = v;
    return 0;
}

static int parse_int_field(const char *name, int line, const char *col, const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno) return zt_err("%s:%d: %s is '%s', not an integer", name, line, col, s);
    if (v < lo || v > hi) return zt_err("%s:%d: %s %ld outside [%d, %d]", name, line, col, v, lo, hi);
    *out = (int)v;
    return 0;
}

// "2025/11/29 13:45:01.123" (nvidia-smi) or with '-' date separators: local time.
static int parse_smi_time(const char *name, int line, const char *s, double *out) {
    int Y, M, D, h, m, n = 0;
    double sec;
    if (sscanf(s, "%d%*[/-]%d%*[/-]%d %d:%d:%lf%n", &Y, &M, &D, &h, &m, &sec, &n) != 6 || s[n] != 0 || M < 1 ||
        M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec < 0 || sec >= 61)
        return zt_err("%s:%d: timestamp '%s' is not YYYY/MM/DD HH:MM:SS[.fff]", name, line, s);
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m,
                    .tm_sec = (int)sec, .tm_isdst = -1};
    time_t t = mktime(&tm);
    *out = (double)t + (sec - floor(sec));
    return 0;
}

static int hms(const char *s, double *out) {
    int h, m, n = 0;
    double sec;
    if (sscanf(s, "%d:%d:%lf%n", &h, &m, &sec, &n) != 3 || s[n] || h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 ||
        sec >= 61)
        return -1;
    *out = h * 3600.0 + m * 60.0 + sec;
    return 0;
}

// Rank of a trainer file named ".../rank-NNNNN.power.csv" (at most 9 digits); -1 otherwise.
static int rank_from_name(const char *name) {
    const char *b = strrchr(name, '/');
    b = b ? b + 1 : name;
    if (strncmp(b, "rank-", 5) != 0) return -1;
    int r = 0, digits = 0;
    for (b += 5; *b >= '0' && *b <= '9'; b++)
        if (++digits > 9) return -1;
        else r = 10 * r + (*b - '0');
    return digits && !strcmp(b, ".power.csv") ? r : -1;
}

// dev_base + a GPU index column: per-node numbering must stay an int.
static int dev_id(const char *name, int line, int dev_base, int g, int *out) {
    if (g >= INT_MAX - dev_base)
        return zt_err("%s:%d: GPU %d after %d GPUs of earlier files: more GPUs than this tool numbers", name, line, g,
                      dev_base);
    *out = dev_base + g;
    return 0;
}

#define MAXCOL 64

static int read_power_csv(zt_samples *set, line_iter *it, const char *name, int dev_base, zt_time_kind *kind) {
    char *line, *f[MAXCOL + 1];
    int rc, ncol = 0, ct = -1, cg = -1, cp = -1, cu = -1;
    int rank = rank_from_name(name);
    *kind = ZT_TK_ABS;
    while ((rc = next_line(it, name, &line)) > 0) {
        if (blank(line)) continue;
        if (ncol == 0) {
            ncol = split(line, ',', f, MAXCOL);
            for (int i = 0; i < ncol && i < MAXCOL; i++) {
                if (!strcmp(f[i], "time")) ct = i;
                if (!strcmp(f[i], "gpu")) cg = i;
                if (!strcmp(f[i], "power_w")) cp = i;
                if (!strcmp(f[i], "util_pct")) cu = i;
            }
            const char *miss = ct < 0 ? "time" : cp < 0 ? "power_w" : cu < 0 ? "util_pct" : (rank < 0 && cg < 0) ? "gpu" : NULL;
            if (ncol > MAXCOL) return zt_err("%s:%d: more than %d columns", name, it->line, MAXCOL);
            if (miss)
                return zt_err("%s:%d: power.csv header lacks column '%s' (expected time,gpu,power_w,util_pct,mem_used_mib)",
                              name, it->line, miss);
            continue;
        }
        int n = split(line, ',', f, MAXCOL);
        if (n != ncol) return zt_err("%s:%d: %d fields, the header has %d", name, it->line, n, ncol);
        double t, p, u;
        int g = 0;
        if (parse_value(name, it->line, "time", f[ct], NULL, 0, 1e11, &t) ||
            parse_value(name, it->line, "power_w", f[cp], NULL, 0, 10000, &p) ||
            parse_value(name, it->line, "util_pct", f[cu], NULL, 0, 100, &u))
            return -1;
        if (cg >= 0 && parse_int_field(name, it->line, "gpu", f[cg], 0, 1 << 20, &g)) return -1;
        int dev = rank;
        if (rank < 0 && dev_id(name, it->line, dev_base, g, &dev)) return -1;
        push(set, t, dev, p, u);
    }
    if (rc < 0) return -1;
    return ncol ? 0 : zt_err("%s: empty file", name);
}

static const char *smi_col_name(char *s) {
    char *br = strstr(s, " [");
    if (br) *br = 0;
    return s;
}

static int read_smi_csv(zt_samples *set, line_iter *it, const char *name, int dev_base, zt_time_kind *kind) {
    char *line, *f[MAXCOL + 1];
    int rc, ncol = 0, ct = -1, ci = -1, cp = -1, cu = -1;
    *kind = ZT_TK_ABS;
    while ((rc = next_line(it, name, &line)) > 0) {
        if (blank(line)) continue;
        if (ncol == 0) {
            ncol = split(line, ',', f, MAXCOL);
            if (ncol > MAXCOL) return zt_err("%s:%d: more than %d columns", name, it->line, MAXCOL);
            for (int i = 0; i < ncol; i++) {
                const char *c = smi_col_name(f[i]);
                if (!strcmp(c, "timestamp")) ct = i;
                if (!strcmp(c, "index")) ci = i;
                if (!strcmp(c, "power.draw") || (cp < 0 && !strncmp(c, "power.draw.", 11))) cp = i;
                if (!strcmp(c, "utilization.gpu")) cu = i;
            }
            const char *miss = ct < 0 ? "timestamp" : ci < 0 ? "index" : cp < 0 ? "power.draw" : cu < 0 ? "utilization.gpu" : NULL;
            if (miss)
                return zt_err("%s:%d: nvidia-smi CSV header lacks '%s' (run nvidia-smi "
                              "--query-gpu=timestamp,index,power.draw,utilization.gpu --format=csv -l 1)",
                              name, it->line, miss);
            continue;
        }
        int n = split(line, ',', f, MAXCOL);
        if (n != ncol) return zt_err("%s:%d: %d fields, the header has %d", name, it->line, n, ncol);
        double t = 0, p, u;
        int g;
        if (parse_smi_time(name, it->line, f[ct], &t) ||
            parse_int_field(name, it->line, "index", f[ci], 0, 1 << 20, &g) ||
            parse_value(name, it->line, "power.draw", f[cp], "W", 0, 10000, &p) ||
            parse_value(name, it->line, "utilization.gpu", f[cu], "%", 0, 100, &u) ||
            dev_id(name, it->line, dev_base, g, &g))
            return -1;
        push(set, t, g, p, u);
    }
    if (rc < 0) return -1;
    return ncol ? 0 : zt_err("%s: empty file", name);
}

static int read_dmon(zt_samples *set, line_iter *it, const char *name, int dev_base, double interval,
                     zt_time_kind *kind) {
    char *line, *f[MAXCOL + 1];
    int rc, ncol = 0, cd = -1, ctm = -1, cg = -1, cp = -1, cs = -1;
    int last_gpu = -1;
    long round = -1;
    double prev_tod = -1, day = 0;
    while ((rc = next_line(it, name, &line)) > 0) {
        if (blank(line)) continue;
        if (line[0] == '#') {
            char *s = line;
            while (*s == '#') s++;
            int n = split(s, 0, f, MAXCOL);
            int g = -1, p = -1, sm = -1, d = -1, tm = -1;
            for (int i = 0; i < n && i < MAXCOL; i++) {
                if (!strcmp(f[i], "gpu")) g = i;
                if (!strcmp(f[i], "pwr")) p = i;
                if (!strcmp(f[i], "sm")) sm = i;
                if (!strcmp(f[i], "Date")) d = i;
                if (!strcmp(f[i], "Time")) tm = i;
            }
            if (g < 0) continue;  // the units line (# Idx W C ...) or a comment
            if (p < 0 || sm < 0)
                return zt_err("%s:%d: dmon header lacks the '%s' column (run nvidia-smi dmon -s pu, optionally -o DT)",
                              name, it->line, p < 0 ? "pwr" : "sm");
            if (ncol && (n != ncol || g != cg || p != cp || sm != cs || d != cd || tm != ctm))
                return zt_err("%s:%d: dmon header differs from the first one; concatenated logs of different "
                              "dmon options cannot be read as one", name, it->line);
            ncol = n, cg = g, cp = p, cs = sm, cd = d, ctm = tm;
            continue;
        }
        if (!ncol)
            return zt_err("%s:%d: sample before the dmon header line (# gpu pwr ... sm ...)", name, it->line);
        int n = split(line, 0, f, MAXCOL);
        if (n != ncol) return zt_err("%s:%d: %d fields, the dmon header has %d", name, it->line, n, ncol);
        double p, u, t = 0;
        int g;
        if (parse_int_field(name, it->line, "gpu", f[cg], 0, 1 << 20, &g) ||
            parse_value(name, it->line, "pwr", f[cp], NULL, 0, 10000, &p) ||
            parse_value(name, it->line, "sm", f[cs], NULL, 0, 100, &u))
            return -1;
        if (ctm >= 0) {
            double tod;
            if (hms(f[ctm], &tod) < 0)
                return zt_err("%s:%d: Time '%s' is not HH:MM:SS", name, it->line, f[ctm]);
            if (cd >= 0) {
                int Y, M, D, k = 0;
                if (sscanf(f[cd], "%4d%2d%2d%n", &Y, &M, &D, &k) != 3 || f[cd][k] || M < 1 || M > 12 || D < 1 || D > 31)
                    return zt_err("%s:%d: Date '%s' is not YYYYMMDD", name, it->line, f[cd]);
                struct tm tmv = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_isdst = -1};
                tmv.tm_hour = (int)(tod / 3600), tmv.tm_min = (int)fmod(tod / 60, 60), tmv.tm_sec = (int)fmod(tod, 60);
                t = (double)mktime(&tmv) + (tod - floor(tod));
                *kind = ZT_TK_ABS;
            } else {
                // Only the time of day: a step back by more than 12 h is the next day.
                if (prev_tod >= 0 && tod < prev_tod - 43200) day += 86400;
                prev_tod = tod;
                t = day + tod;
                *kind = ZT_TK_TIME_OF_DAY;
            }
        } else {
            if (cd >= 0)
                return zt_err("%s:%d: dmon log has a Date but no Time column; use -o DT or -o T", name, it->line);
            // No clock: a new round of GPU lines starts when the index does not grow.
            if (g <= last_gpu || round < 0) round++;
            last_gpu = g;
            t = (double)round * interval;
            *kind = ZT_TK_INDEX;
        }
        if (dev_id(name, it->line, dev_base, g, &g)) return -1;
        push(set, t, g, p, u);
    }
    if (rc < 0) return -1;
    return ncol ? 0 : zt_err("%s: no dmon header line (# gpu pwr ... sm ...)", name);
}

static const char *kind_name(zt_time_kind k) {
    return k == ZT_TK_ABS ? "absolute time" : k == ZT_TK_TIME_OF_DAY ? "time of day only (dmon -o T)" : "no time (dmon without -o T)";
}

int zt_samples_parse(zt_samples *set, const char *text, size_t len, const char *name, zt_sample_format fmt,
                     double dmon_interval, int dev_base) {
    line_iter it = {.p = text, .end = text + len};
    if (fmt == ZT_SF_AUTO) {
        line_iter peek = it;
        char *line = NULL;
        int rc;
        while ((rc = next_line(&peek, name, &line)) > 0 && blank(line)) {
        }
        if (rc < 0) return -1;
        if (rc == 0) return zt_err("%s: empty file", name);
        if (line[0] == '#')
            fmt = ZT_SF_DMON;
        else if (strstr(line, "power_w"))
            fmt = ZT_SF_POWER_CSV;
        else if (strstr(line, "power.draw") || strstr(line, "utilization.gpu") || strstr(line, "timestamp"))
            fmt = ZT_SF_SMI_CSV;
        else
            return zt_err("%s:%d: unknown sample format: the first line is neither a power.csv header "
                          "(time,gpu,power_w,util_pct,...), an nvidia-smi --query-gpu CSV header (timestamp, index, "
                          "power.draw [W], utilization.gpu [%%]) nor an nvidia-smi dmon header (# gpu pwr ... sm ...)",
                          name, peek.line);
    }
    if (dev_base < 0) dev_base = set->ndev;
    size_t n0 = set->n;
    zt_time_kind kind = ZT_TK_ABS;
    int rc = fmt == ZT_SF_POWER_CSV ? read_power_csv(set, &it, name, dev_base, &kind)
             : fmt == ZT_SF_SMI_CSV ? read_smi_csv(set, &it, name, dev_base, &kind)
                                    : read_dmon(set, &it, name, dev_base, dmon_interval, &kind);
    if (rc == 0 && set->n == n0) rc = zt_err("%s: no samples after the header", name);
    if (rc == 0 && set->nfiles > 0 && kind != set->kind)
        rc = zt_err("%s: its samples have %s, but %s has %s: files whose clocks differ cannot be grouped into "
                    "snapshots; triage them separately",
                    name, kind_name(kind), set->first_file, kind_name(set->kind));
    if (rc < 0) {
        set->n = n0;
        return -1;
    }
    if (set->nfiles++ == 0) {
        set->kind = kind;
        snprintf(set->first_file, sizeof set->first_file, "%s", name);
    }
    for (size_t i = n0; i < set->n; i++)
        if (set->s[i].dev + 1 > set->ndev) set->ndev = set->s[i].dev + 1;
    return 0;
}

int zt_samples_read(zt_samples *set, const char *path, zt_sample_format fmt, double dmon_interval) {
    size_t len;
    char *text = zt_read_file(path, &len);
    if (!text) return -1;
    int rc = zt_samples_parse(set, text, len, path, fmt, dmon_interval, -1);
    free(text);
    return rc;
}

static int cmp_sample(const void *a, const void *b) {
    const zt_gpu_sample *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->dev > y->dev) - (x->dev < y->dev);
}

void zt_samples_sort(zt_samples *set) {
    if (set->n) qsort(set->s, set->n, sizeof *set->s, cmp_sample);
}

static int cmp_int(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int zt_samples_gpu_ids(const zt_samples *set, int **ids) {
    int *v = zt_xmalloc((set->n + 1) * sizeof *v);
    for (size_t i = 0; i < set->n; i++) v[i] = set->s[i].dev;
    if (set->n) qsort(v, set->n, sizeof *v, cmp_int);
    int k = 0;
    for (size_t i = 0; i < set->n; i++)
        if (k == 0 || v[k - 1] != v[i]) v[k++] = v[i];
    *ids = v;
    return k;
}

int zt_gpu_slot(const int *ids, int n, int id) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id ? lo : -1;
}

// ---- classification ----------------------------------------------------------------
void zt_classify(const zt_bands *b, const double *power, const double *util, const int *dev, int n, zt_snapshot *o) {
    double t = o->t;
    memset(o, 0, sizeof *o);
    o->t = t;
    o->n = n;
    o->state = ZT_GS_UNKNOWN;
    if (n <= 0) return;
    double *pw = zt_xmalloc((size_t)n * sizeof *pw), *pb = zt_xmalloc((size_t)n * sizeof *pb);
    int *zero = zt_xmalloc((size_t)n * sizeof *zero);
    int nb = 0;
    o->p_min = o->u_min = INFINITY, o->p_max = o->u_max = -INFINITY;
    for (int i = 0; i < n; i++) {
        pw[i] = power[i];
        o->p_min = fmin(o->p_min, power[i]), o->p_max = fmax(o->p_max, power[i]);
        o->u_min = fmin(o->u_min, util[i]), o->u_max = fmax(o->u_max, util[i]);
        o->u_mean += util[i] / n;
        if (util[i] <= b->zero_util_max) zero[o->nzero++] = dev[i];
        if (util[i] >= b->busy_util_min) pb[nb++] = power[i];
    }
    o->nbusy = nb;
    o->p_med = zt_median(pw, (size_t)n);
    o->p_busy_med = zt_median(pb, (size_t)nb);
    // rank list of the idle GPUs, sorted
    for (int i = 1; i < o->nzero; i++)
        for (int j = i; j > 0 && zero[j - 1] > zero[j]; j--) {
            int x = zero[j];
            zero[j] = zero[j - 1], zero[j - 1] = x;
        }
    zt_rank_list(zero, o->nzero, o->zero, sizeof o->zero);
    int uneven = (o->u_max - o->u_min) > b->uneven_spread || o->u_min < b->busy_util_min;
    if (o->nzero == n)
        o->state = o->p_med <= b->idle_max_w ? ZT_GS_IDLE : ZT_GS_UNKNOWN;
    else if (nb > 0 && o->p_busy_med <= b->hang_max_w)
        // Busy GPUs drawing little power are spinning in a wait. Only rank 0 idle: it
        // is writing a checkpoint while the others wait for it.
        o->state = (o->nzero == 1 && zero[0] == 0) ? ZT_GS_CHECKPOINT : ZT_GS_DEADLOCK;
    else if (o->p_med >= b->compute_min_w)
        o->state = ZT_GS_COMPUTE;
    else if (o->p_med > b->hang_max_w)
        o->state = uneven ? ZT_GS_STARVATION : ZT_GS_COMM;
    free(pw);
    free(pb);
    free(zero);
}

int zt_snapshots_build(const zt_samples *set, const zt_bands *b, double window, zt_snapshot **out, size_t *nout) {
    *out = NULL;
    *nout = 0;
    if (!(window > 0)) return zt_err("snapshot window %g s must be positive", window);
    size_t cap = 64, ns = 0;
    zt_snapshot *snaps = zt_xmalloc(cap * sizeof *snaps);
    int *ids;
    int ngpu = zt_samples_gpu_ids(set, &ids), ndev = ngpu > 0 ? ngpu : 1;
    size_t *stamp = zt_xcalloc((size_t)ndev, sizeof *stamp);  // snapshot index + 1 that holds the GPU
    double *p = zt_xmalloc((size_t)ndev * sizeof *p), *u = zt_xmalloc((size_t)ndev * sizeof *u);
    int *d = zt_xmalloc((size_t)ndev * sizeof *d);
    for (size_t i = 0; i < set->n;) {
        double t0 = set->s[i].t, tsum = 0;
        int k = 0;
        size_t j = i;
        for (; j < set->n && set->s[j].t - t0 < window; j++) {
            const zt_gpu_sample *s = &set->s[j];
            const int slot = zt_gpu_slot(ids, ngpu, s->dev);
            if (stamp[slot] == ns + 1) break;  // this GPU again: the next snapshot starts here
            stamp[slot] = ns + 1;
            p[k] = s->power_w, u[k] = s->util_pct, d[k] = s->dev;
            tsum += s->t;
            k++;
        }
        if (ns == cap) {
            cap *= 2;
            zt_snapshot *nsn = zt_xmalloc(cap * sizeof *nsn);
            memcpy(nsn, snaps, ns * sizeof *nsn);
            free(snaps);
            snaps = nsn;
        }
        snaps[ns].t = tsum / k;
        zt_classify(b, p, u, d, k, &snaps[ns]);
        ns++;
        i = j;
    }
    free(ids);
    free(stamp);
    free(p);
    free(u);
    free(d);
    *out = snaps;
    *nout = ns;
    return 0;
}

double zt_snapshots_median_interval(const zt_snapshot *s, size_t n) {
    if (n < 2) return 1.0;
    double *dt = zt_xmalloc((n - 1) * sizeof *dt);
    for (size_t i = 1; i < n; i++) dt[i - 1] = s[i].t - s[i - 1].t;
    double m = zt_median(dt, n - 1);
    free(dt);
    return m > 0 ? m : 1.0;
}

int zt_stretches_build(const zt_snapshot *s, size_t n, double max_gap, zt_stretch **out, size_t *nout) {
    *out = NULL;
    *nout = 0;
    if (n == 0) return 0;
    double med = zt_snapshots_median_interval(s, n);
    zt_stretch *st = zt_xmalloc(n * sizeof *st);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int gap = i > 0 && s[i].t - s[i - 1].t > max_gap;
        if (i == 0 || gap || s[i].state != st[k - 1].state) {
            st[k] = (zt_stretch){.state = s[i].state, .first = i, .last = i, .t0 = s[i].t, .t1 = s[i].t};
            snprintf(st[k].zero, sizeof st[k].zero, "%s", s[i].zero);
            k++;
        }
        zt_stretch *c = &st[k - 1];
        c->last = i;
        c->t1 = s[i].t;
        int cont = i + 1 < n && s[i + 1].t - s[i].t <= max_gap;
        c->seconds = (cont ? s[i + 1].t : s[i].t + med) - c->t0;
    }
    *out = st;
    *nout = k;
    return 0;
}

// ---- calibration -------------------------------------------------------------------
static void med_sigma(double *v, size_t n, double *med, double *sigma) {
    *med = zt_median(v, n);
    for (size_t i = 0; i < n; i++) v[i] = fabs(v[i] - *med);
    *sigma = 1.4826 * zt_median(v, n);
}

int zt_calibrate(const zt_samples *healthy, const zt_samples *idle, const zt_calib_opts *o, zt_bands *out,
                 zt_calib_info *info) {
    zt_bands ref;
    zt_bands_b300(&ref);
    memset(info, 0, sizeof *info);
    double k = o && o->k > 0 ? o->k : 2.0;
    double *hv = zt_xmalloc((healthy->n + 1) * sizeof *hv), *iv = zt_xmalloc((idle->n + 1) * sizeof *iv);
    size_t nh = 0, ni = 0;
    // Healthy samples count only while busy: a healthy run has comm and data phases too,
    // but its busy samples are dominated by compute.
    for (size_t i = 0; i < healthy->n; i++)
        if (healthy->s[i].util_pct >= ref.busy_util_min) hv[nh++] = healthy->s[i].power_w;
    for (size_t i = 0; i < idle->n; i++) iv[ni++] = idle->s[i].power_w;
    info->healthy_total = healthy->n, info->healthy_used = nh, info->idle_used = ni;
    int rc = -1;
    if (nh < 10) {
        zt_err("calibrate: only %zu of %zu healthy samples are busy (>= %g%% util); at least 10 are needed (are "
               "--healthy and --idle swapped?)",
               nh, healthy->n, ref.busy_util_min);
        goto out;
    }
    if (ni < 10) {
        zt_err("calibrate: %zu idle samples; at least 10 are needed", ni);
        goto out;
    }
    double C, sc, I, si;
    med_sigma(hv, nh, &C, &sc);
    med_sigma(iv, ni, &I, &si);
    info->healthy_med = C, info->healthy_sigma = sc, info->idle_med = I, info->idle_sigma = si;
    if (!(C > 1.5 * I && C - I > 50)) {
        zt_err("calibrate: the healthy median (%.1f W) is not clearly above the idle median (%.1f W): are --healthy "
               "and --idle swapped, or was the healthy run not computing?",
               C, I);
        goto out;
    }
    // B300 levels as fractions of the idle-to-compute span (idle 135 W = 0, compute
    // centre 990 W = 1), carried over to the new GPU.
    double ib = 0.5 * (ref.level_lo[ZT_GS_IDLE] + ref.level_hi[ZT_GS_IDLE]);
    double cb = 0.5 * (ref.level_lo[ZT_GS_COMPUTE] + ref.level_hi[ZT_GS_COMPUTE]);
    memset(out, 0, sizeof *out);
    for (int s = 0; s < ZT_GS_COUNT_; s++) {
        if (s == ZT_GS_IDLE || s == ZT_GS_COMPUTE || s == ZT_GS_UNKNOWN || s == ZT_GS_CHECKPOINT) continue;
        out->level_lo[s] = I + (ref.level_lo[s] - ib) / (cb - ib) * (C - I);
        out->level_hi[s] = I + (ref.level_hi[s] - ib) / (cb - ib) * (C - I);
    }
    out->level_lo[ZT_GS_IDLE] = I - k * si, out->level_hi[ZT_GS_IDLE] = I + k * si;
    out->level_lo[ZT_GS_COMPUTE] = C - k * sc, out->level_hi[ZT_GS_COMPUTE] = C + k * sc;
    // A noisy run must not push a range across its neighbour's level.
    double idle_cap = I + 0.5 * (out->level_lo[ZT_GS_DEADLOCK] - I);
    double comm_hi = fmax(out->level_hi[ZT_GS_COMM], out->level_hi[ZT_GS_STARVATION]);
    double comp_floor = comm_hi + 0.5 * (C - comm_hi);
    if (out->level_hi[ZT_GS_IDLE] > idle_cap) out->level_hi[ZT_GS_IDLE] = idle_cap, info->clamped |= 1;
    if (out->level_lo[ZT_GS_COMPUTE] < comp_floor) out->level_lo[ZT_GS_COMPUTE] = comp_floor, info->clamped |= 2;
    out->idle_max_w = 0.5 * (out->level_hi[ZT_GS_IDLE] + out->level_lo[ZT_GS_DEADLOCK]);
    out->hang_max_w = 0.5 * (out->level_hi[ZT_GS_DEADLOCK] + out->level_lo[ZT_GS_STARVATION]);
    out->compute_min_w = 0.5 * (comm_hi + out->level_lo[ZT_GS_COMPUTE]);
    out->zero_util_max = ref.zero_util_max;
    out->busy_util_min = ref.busy_util_min;
    out->uneven_spread = ref.uneven_spread;
    snprintf(out->gpu, sizeof out->gpu, "%s", o && o->gpu ? o->gpu : "calibrated");
    snprintf(out->source, sizeof out->source,
             "zerotrain calibrate: healthy median %.1f W (sigma %.1f, %zu busy samples), idle median %.1f W (sigma "
             "%.1f, %zu samples), k %.2g, B300 ratios",
             C, sc, nh, I, si, ni, k);
    rc = zt_bands_validate(out, "calibrate");
out:
    free(hv);
    free(iv);
    return rc;
}
