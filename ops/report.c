// `zerotrain report`: read a run directory (docs/formats.md) the way the watcher does,
// without changing it, and lay its curves out as one HTML page of inline SVG plots at
// fixed positions (ops/svg.h), with the run's state, the watcher's verdict and the
// flight recorders' diagnosis. Anything missing is said on the page.
// Every string read from the run's files is untrusted: it reaches the page as text or a
// double-quoted attribute value only through zt_html_escape, and a class or data-state
// only as a word of a fixed set (run_state); numbers are printed only when finite.
#define _GNU_SOURCE
#include "ops/report.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "ops/svg.h"
#include "ops/watch.h"
#include "base/common.h"
#include "base/out_file.h"
#include "engine/flight.h"
#include "ops/fmt.h"

// ---- growable arrays -----------------------------------------------------------------
typedef struct {
    double *v;
    size_t n, cap;
} dvec;

static void dpush(dvec *a, double x) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        double *nv = zt_xmalloc(a->cap * sizeof *nv);
        if (a->n) memcpy(nv, a->v, a->n * sizeof *nv);
        free(a->v);
        a->v = nv;
    }
    a->v[a->n++] = x;
}

// ---- what the run directory holds ----------------------------------------------------
enum { M_STEP, M_EPOCH, M_LOSS, M_LR, M_GNORM, M_CLIP, M_TOKENS, M_TOKS, M_STEPT, M_COMPUTE, M_COMM, M_GPUH,
       M_GPUH_RISK, M_ELAPSED, M_MFU, M_HFU, M_TFLOPS, M_COMPUTE_PCT, M_COMM_PCT, M_NCOL };
static const char *metric_keys[M_COMPUTE_PCT] = {"step",          "epoch",       "loss",     "lr",
                                                 "grad_norm",     "clip_coef",   "tokens",   "tok_per_s",
                                                 "step_time_s",   "compute_s",   "comm_wait_s", "gpu_hours",
                                                 "gpu_hours_at_risk", "elapsed_s", "mfu", "hfu",
                                                 "tflops_per_rank"};

typedef struct {
    int rank;
    dvec step, toks;
} rank_series;

// What a JSONL reader skipped. A line with a NUL byte, one that is not JSON or JSON that
// is not an object is counted and skipped, and the lines after it are still read: a
// damaged line (a crash can leave NUL bytes behind) must not hide the rest of the run.
typedef struct {
    size_t lines, bad;  // objects read; lines skipped (an incomplete last line included)
    int partial_bad;    // the last line has no newline (being written) and could not be read
    size_t damaged;     // skipped lines other than an incomplete last one
    size_t at[4];       // the first damaged lines: line numbers (from 1) and why
    const char *why[4];
} jsonl_stats;

typedef struct {
    long long step;
    double saved_unix, save_s, bytes;
    double save_elapsed;  // seconds since the run start (NAN: unknown)
    int final, has_meta;
} ckpt_info;

typedef struct {
    int rank;
    char status[24];
    char *reason;
    char written[40];
} flight_dump;

typedef struct {
    const char *dir;
    FILE *warn;          // zt_report_opts.warn
    char note[64][320];  // "not shown" lines
    int nnotes;
    cJSON *run, *hb, *complete, *watch;
    int have_run, have_hb, have_metrics;
    // metrics.jsonl
    dvec m[M_NCOL];
    dvec ev_step, ev_loss, ev_ppl, ev_tokens;
    jsonl_stats metrics_read;
    // ranks/
    rank_series *ranks;
    int nranks;
    zt_samples power;
    int power_files, power_bad;
    flight_dump *dumps;
    int ndumps;
    int flight_files;
    // checkpoints/
    ckpt_info *ckpts;
    size_t nckpt;
    char latest[128];
    int have_tb;
    // derived
    double t_start;  // Unix seconds of the run's start (NAN: unknown)
    const char *state;  // one of run_states[]: safe in a class name and data-state
    char state_why[1200];
} run_data;

static void note(run_data *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(run_data *r, const char *fmt, ...) {
    if (r->nnotes >= 64) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->note[r->nnotes++], sizeof r->note[0], fmt, ap);
    va_end(ap);
}

// A JSON object file, or NULL with a note on the page naming it (shown as `shown`).
static cJSON *read_object(run_data *r, const char *path, const char *shown) {
    char *text = zt_read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!cJSON_IsObject(j)) {
        note(r, "%s could not be read as a JSON object (being rewritten, or damaged); its facts are missing", shown);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static cJSON *read_json_file(run_data *r, const char *name, int *exists) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    struct stat st;
    *exists = stat(path, &st) == 0;
    return *exists ? read_object(r, path, name) : NULL;
}

static double jnum(const cJSON *o, const char *k) {
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// Lines of a JSONL file; fn gets each parsed object. Returns -1 when the file is absent.
static int read_jsonl(run_data *r, const char *path, void (*fn)(run_data *, cJSON *, void *), void *arg,
                      jsonl_stats *st) {
    size_t len;
    char *text = zt_read_file(path, &len);  // len + 1 bytes: text[len] may be written
    if (!text) return -1;
    memset(st, 0, sizeof *st);
    size_t lineno = 0;
    for (char *line = text, *end = text + len; line < end; lineno++) {
        char *nl = memchr(line, '\n', (size_t)(end - line)), *stop = nl ? nl : end;
        *stop = 0;
        const char *why = NULL;
        if (memchr(line, 0, (size_t)(stop - line))) {
            why = "a NUL byte";
        } else if (line[strspn(line, " \t\r")]) {
            cJSON *j = cJSON_Parse(line);
            if (!j)
                why = "not JSON";
            else if (!cJSON_IsObject(j))
                why = "not a JSON object";
            else
                st->lines++, fn(r, j, arg);
            cJSON_Delete(j);
        }
        if (why) {
            st->bad++;
            if (!nl) {
                st->partial_bad = 1;
            } else {
                if (st->damaged < 4) st->at[st->damaged] = lineno + 1, st->why[st->damaged] = why;
                st->damaged++;
            }
        }
        line = stop + 1;
    }
    free(text);
    return 0;
}

// A note on the page for what read_jsonl skipped, and a warning on stderr for damaged
// lines (an incomplete last line is what a live run's file looks like: the page says it).
static void note_skipped(run_data *r, const char *shown, const jsonl_stats *st, const char *partial_why) {
    if (!st->bad) return;
    char list[240] = "";
    size_t at = 0;
    for (size_t i = 0; i < st->damaged && i < 4 && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%sline %zu (%s)", i ? ", " : "", st->at[i], st->why[i]);
    if (st->damaged > 4 && at < sizeof list) snprintf(list + at, sizeof list - at, ", and %zu more", st->damaged - 4);
    note(r, "%s: %zu line%s could not be read%s%s%s", shown, st->bad, st->bad == 1 ? "" : "s",
         st->partial_bad ? partial_why : "", st->damaged ? "; skipped, the rest is drawn: " : "", list);
    if (st->damaged && r->warn)
        fprintf(r->warn, "zerotrain report: warning: %s/%s: skipped %zu line%s that could not be read: %s\n", r->dir,
                shown, st->damaged, st->damaged == 1 ? "" : "s", list);
}

static void metrics_line(run_data *r, cJSON *j, void *unused) {
    (void)unused;
    double loss = jnum(j, "loss"), ev = jnum(j, "eval_loss");
    if (isfinite(jnum(j, "step")) && cJSON_GetObjectItemCaseSensitive(j, "loss")) {
        for (int k = 0; k < M_COMPUTE_PCT; k++) dpush(&r->m[k], jnum(j, metric_keys[k]));
        double st = jnum(j, "step_time_s");
        dpush(&r->m[M_COMPUTE_PCT], st > 0 ? 100 * jnum(j, "compute_s") / st : NAN);
        dpush(&r->m[M_COMM_PCT], st > 0 ? 100 * jnum(j, "comm_wait_s") / st : NAN);
        (void)loss;
    } else if (isfinite(ev)) {
        dpush(&r->ev_step, jnum(j, "step"));
        dpush(&r->ev_loss, ev);
        dpush(&r->ev_ppl, jnum(j, "eval_ppl"));
    }
}

static void rank_line(run_data *r, cJSON *j, void *arg) {
    (void)r;
    rank_series *s = arg;
    dpush(&s->step, jnum(j, "step"));
    dpush(&s->toks, jnum(j, "tok_per_s"));
}

static int cmp_rank(const void *a, const void *b) {
    return ((const rank_series *)a)->rank - ((const rank_series *)b)->rank;
}
static int cmp_ckpt(const void *a, const void *b) {
    long long x = ((const ckpt_info *)a)->step, y = ((const ckpt_info *)b)->step;
    return (x > y) - (x < y);
}
static int cmp_dump(const void *a, const void *b) {
    return ((const flight_dump *)a)->rank - ((const flight_dump *)b)->rank;
}

// A power.csv being appended to may end in half a line: keep whole lines only.
static void read_power(run_data *r, const char *path) {
    size_t len;
    char *text = zt_read_file(path, &len);
    if (!text) {
        r->power_bad++;
        note(r, "%s", zt_errmsg());
        return;
    }
    while (len > 0 && text[len - 1] != '\n') len--;
    if (zt_samples_parse(&r->power, text, len, path, ZT_SF_POWER_CSV, 1.0, -1) < 0) {
        r->power_bad++;
        note(r, "power samples skipped: %s", zt_errmsg());
    } else {
        r->power_files++;
    }
    free(text);
}

static void read_flight_dump(run_data *r, const char *path, int rank) {
    cJSON *j = read_object(r, path, path);
    if (!j) return;
    r->dumps = realloc(r->dumps, (size_t)(r->ndumps + 1) * sizeof *r->dumps);
    if (!r->dumps) zt_fatal("out of memory");
    flight_dump *d = &r->dumps[r->ndumps++];
    memset(d, 0, sizeof *d);
    d->rank = rank;
    const char *status = jstr(j, "status"), *written = jstr(j, "written"), *reason = jstr(j, "reason");
    snprintf(d->status, sizeof d->status, "%s", status ? status : "?");
    snprintf(d->written, sizeof d->written, "%s", written ? written : "");
    d->reason = strdup(reason ? reason : "");
    cJSON_Delete(j);
}

static void scan_ranks(run_data *r) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/ranks", r->dir);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char **power_paths = NULL;
    int np = 0;
    while ((e = readdir(d))) {
        int rank, n = 0;
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (sscanf(e->d_name, "rank-%d.metrics.jsonl%n", &rank, &n) == 1 && n > 0 && !e->d_name[n]) {
            r->ranks = realloc(r->ranks, (size_t)(r->nranks + 1) * sizeof *r->ranks);
            if (!r->ranks) zt_fatal("out of memory");
            rank_series *s = &r->ranks[r->nranks];
            memset(s, 0, sizeof *s);
            s->rank = rank;
            jsonl_stats js;
            if (read_jsonl(r, path, rank_line, s, &js) == 0) {
                r->nranks++;
                char shown[300];
                snprintf(shown, sizeof shown, "ranks/%s", e->d_name);
                note_skipped(r, shown, &js,
                             " (the last one is incomplete: being written, or the process died mid-write)");
            }
        } else if ((n = 0, sscanf(e->d_name, "rank-%d.power.csv%n", &rank, &n) == 1) && n > 0 && !e->d_name[n]) {
            power_paths = realloc(power_paths, (size_t)(np + 1) * sizeof *power_paths);
            power_paths[np++] = strdup(path);
        } else if ((n = 0, sscanf(e->d_name, "rank-%d.flight.json%n", &rank, &n) == 1) && n > 0 && !e->d_name[n]) {
            read_flight_dump(r, path, rank);
        } else if ((n = 0, sscanf(e->d_name, "rank-%d.flight%n", &rank, &n) == 1) && n > 0 && !e->d_name[n]) {
            r->flight_files++;
        }
    }
    closedir(d);
    // power files in rank order, so that GPU ids are the ranks whatever readdir's order
    for (int i = 1; i < np; i++)
        for (int j = i; j > 0 && strcmp(power_paths[j - 1], power_paths[j]) > 0; j--) {
            char *t = power_paths[j];
            power_paths[j] = power_paths[j - 1], power_paths[j - 1] = t;
        }
    for (int i = 0; i < np; i++) read_power(r, power_paths[i]), free(power_paths[i]);
    free(power_paths);
    if (r->nranks > 1) qsort(r->ranks, (size_t)r->nranks, sizeof *r->ranks, cmp_rank);
    if (r->ndumps > 1) qsort(r->dumps, (size_t)r->ndumps, sizeof *r->dumps, cmp_dump);
    zt_samples_sort(&r->power);
}

static void scan_checkpoints(run_data *r) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints", r->dir);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    size_t cap = 0;
    while ((e = readdir(d))) {
        long long step;
        int n = 0;
        if (sscanf(e->d_name, "step-%lld%n", &step, &n) != 1 || n <= 0 || e->d_name[n]) continue;  // not .partial
        if (r->nckpt == cap) {
            cap = cap ? 2 * cap : 16;
            r->ckpts = realloc(r->ckpts, cap * sizeof *r->ckpts);
            if (!r->ckpts) zt_fatal("out of memory");
        }
        ckpt_info *c = &r->ckpts[r->nckpt++];
        memset(c, 0, sizeof *c);
        c->step = step, c->saved_unix = c->save_s = c->bytes = NAN;
        char path[4600];
        snprintf(path, sizeof path, "%s/%s/meta.json", dir, e->d_name);
        char *text = zt_read_file(path, NULL);
        cJSON *j = text ? cJSON_Parse(text) : NULL;
        free(text);
        if (cJSON_IsObject(j)) {
            c->has_meta = 1;
            c->saved_unix = jnum(j, "saved_unix");
            c->save_s = jnum(j, "save_seconds");
            c->bytes = jnum(j, "file_bytes");
            c->final = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "final"));
        }
        cJSON_Delete(j);
    }
    closedir(d);
    if (r->nckpt > 1) qsort(r->ckpts, r->nckpt, sizeof *r->ckpts, cmp_ckpt);
    char path[4300];
    snprintf(path, sizeof path, "%s/latest", dir);
    char *t = zt_read_file(path, NULL);
    if (t) {
        snprintf(r->latest, sizeof r->latest, "%.*s", (int)strcspn(t, "\r\n"), t);
        free(t);
    }
}

// 20261201T114115Z-a8369e -> Unix seconds (UTC), NAN if the id is not of that form.
static double run_id_time(const char *id) {
    struct tm tm = {0};
    int n = 0;
    if (!id || sscanf(id, "%4d%2d%2dT%2d%2d%2dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                      &tm.tm_sec, &n) != 6 || n == 0)
        return NAN;
    tm.tm_year -= 1900, tm.tm_mon -= 1;
    return (double)timegm(&tm);
}

static double last(const dvec *a) { return a->n ? a->v[a->n - 1] : NAN; }

static double last_finite(const dvec *a) {
    for (size_t i = a->n; i-- > 0;)
        if (isfinite(a->v[i])) return a->v[i];
    return NAN;
}

// The states a page can show: the badge's class (st-NAME) and data-state are one of these
// words, whatever the run's files say; a state no word fits is "unknown".
static const char *const run_states[] = {"complete", "running", "starting", "hung",
                                         "crashed",  "failed",  "stopped",  "unknown"};

// The word of run_states[] that s names (any case), else "unknown".
static const char *run_state(const char *s) {
    for (size_t i = 0; s && i < sizeof run_states / sizeof run_states[0]; i++)
        if (!strcasecmp(s, run_states[i])) return run_states[i];
    return "unknown";
}

// "%.0f" of a finite number, else "?": no "nan" or "inf" reaches the page.
static const char *fmt_count(double v, char *buf, size_t n) {
    if (isfinite(v))
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "?");
    return buf;
}

// The run's state: complete.json > the trainer's own failed/stopped > a rank that hit
// the collective deadline (heartbeat.json "aborted", else the flight dumps) > the watcher's
// final verdict > running (or starting).
static void decide_state(run_data *r) {
    const char *hbs = jstr(r->hb, "state");
    const char *ws = jstr(r->watch, "state");
    char b1[32];
    if (r->complete) {
        r->state = run_state("complete");
        const char *fin = jstr(r->complete, "final");
        snprintf(r->state_why, sizeof r->state_why, "complete.json: step %s committed, final weights %s",
                 fmt_count(jnum(r->complete, "step"), b1, sizeof b1), fin && fin[0] ? fin : "not written");
        return;
    }
    if (hbs && (!strcmp(hbs, "failed") || !strcmp(hbs, "stopped"))) {
        r->state = run_state(hbs);
        if (!strcmp(hbs, "failed"))
            snprintf(r->state_why, sizeof r->state_why,
                     "heartbeat.json: the trainer reported failure at step %s (its error output says why)",
                     fmt_count(jnum(r->hb, "step"), b1, sizeof b1));
        else
            snprintf(r->state_why, sizeof r->state_why,
                     "heartbeat.json: stopped on a signal at step %s after committing a checkpoint; continue with "
                     "`zerotrain train ... --resume`",
                     fmt_count(jnum(r->hb, "step"), b1, sizeof b1));
        return;
    }
    if (hbs && !strcmp(hbs, "aborted")) {  // the job's own deadline caught a hang (train/liveness.h)
        const char *err = jstr(r->hb, "error");
        const double by = jnum(r->hb, "stopped_by_rank");
        char who[48] = "a rank", b2[32];
        if (isfinite(by) && by >= 0) snprintf(who, sizeof who, "rank %s", fmt_count(by, b2, sizeof b2));
        r->state = run_state("hung");
        snprintf(r->state_why, sizeof r->state_why, "heartbeat.json: %s hit the collective deadline and aborted the job "
                 "after step %s: %s", who, fmt_count(jnum(r->hb, "step"), b1, sizeof b1),
                 err && err[0] ? err : "(no reason recorded)");
        return;
    }
    int aborted = 0;
    for (int i = 0; i < r->ndumps; i++) aborted += !strcmp(r->dumps[i].status, "aborted");
    if (aborted) {
        r->state = run_state("hung");
        int at = snprintf(r->state_why, sizeof r->state_why,
                          "%d rank%s hit the collective deadline and aborted the job (ranks/rank-N.flight.json)",
                          aborted, aborted == 1 ? "" : "s");
        for (int i = 0; i < r->ndumps && at < (int)sizeof r->state_why; i++)
            if (!strcmp(r->dumps[i].status, "aborted") && r->dumps[i].reason[0]) {
                snprintf(r->state_why + at, sizeof r->state_why - at, ": %s", r->dumps[i].reason);
                break;
            }
        return;
    }
    if (ws && strcmp(ws, "RUNNING") && strcmp(ws, "STARTING") && strcmp(ws, "COMPLETE")) {
        r->state = run_state(ws);  // HUNG, CRASHED, FAILED, STOPPED; anything else: unknown
        snprintf(r->state_why, sizeof r->state_why, "watch.json: %s: %s", ws,
                 jstr(r->watch, "reason") ? jstr(r->watch, "reason") : "");
        return;
    }
    if (!r->have_hb && !r->have_metrics) {
        r->state = run_state("starting");
        snprintf(r->state_why, sizeof r->state_why, "run.json only: no step has finished yet");
        return;
    }
    r->state = run_state("running");
    double age = time(NULL) - jnum(r->hb, "time");
    char d1[32];
    if (isfinite(age))
        snprintf(r->state_why, sizeof r->state_why,
                 "no complete.json: the run is live, or ended without finishing; last heartbeat %s ago (`zerotrain "
                 "watch --once RUN` gives a verdict)",
                 zt_fmt_dur(fmax(0, age), d1, sizeof d1));
    else
        snprintf(r->state_why, sizeof r->state_why, "no complete.json and no heartbeat.json: the run is live, or ended "
                 "without finishing");
}

static int load(run_data *r, const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0) return zt_err("%s: cannot read the run directory: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return zt_err("%s: is not a directory (give the run directory, the --run-dir of zerotrain train)", dir);
    r->dir = dir;
    int e_run, e_hb, e_c, e_w;
    r->run = read_json_file(r, "run.json", &e_run);
    r->hb = read_json_file(r, "heartbeat.json", &e_hb);
    r->complete = read_json_file(r, "complete.json", &e_c);
    r->watch = read_json_file(r, "watch.json", &e_w);
    r->have_run = e_run, r->have_hb = e_hb;
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    r->have_metrics = read_jsonl(r, path, metrics_line, NULL, &r->metrics_read) == 0;
    if (!e_run && !e_hb && !r->have_metrics)
        return zt_err("%s is not a run directory: it has none of run.json, heartbeat.json, metrics.jsonl (zerotrain "
                      "train --run-dir writes run.json at its start)",
                      dir);
    zt_samples_init(&r->power);
    scan_ranks(r);
    scan_checkpoints(r);
    snprintf(path, sizeof path, "%s/tb", dir);
    r->have_tb = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    // eval points on the token axis: the tokens of the train line with the same step
    for (size_t i = 0; i < r->ev_step.n; i++) {
        double tok = NAN;
        for (size_t k = r->m[M_STEP].n; k-- > 0;)
            if (r->m[M_STEP].v[k] == r->ev_step.v[i]) {
                tok = r->m[M_TOKENS].v[k];
                break;
            }
        dpush(&r->ev_tokens, tok);
    }
    double hbt = jnum(r->hb, "time"), hbe = jnum(r->hb, "elapsed_s");
    r->t_start = isfinite(hbt) && isfinite(hbe) ? hbt - hbe : run_id_time(jstr(r->run, "run_id"));
    // When each checkpoint was committed: meta.json's saved_unix has 1-s resolution, so
    // take the middle of its second, kept between the end of its step and the next step's.
    for (size_t i = 0; i < r->nckpt; i++) {
        ckpt_info *c = &r->ckpts[i];
        c->save_elapsed = NAN;
        if (!isfinite(c->saved_unix) || !isfinite(r->t_start)) continue;
        double t = c->saved_unix + 0.5 - r->t_start, lo = -INFINITY, hi = INFINITY;
        for (size_t k = 0; k < r->m[M_STEP].n; k++) {
            if (r->m[M_STEP].v[k] == (double)c->step) lo = r->m[M_ELAPSED].v[k];
            if (r->m[M_STEP].v[k] == (double)c->step + 1) hi = r->m[M_ELAPSED].v[k];
        }
        c->save_elapsed = fmax(0, fmin(fmax(t, lo), hi));
    }
    decide_state(r);
    // what cannot be shown
    if (!e_run) note(r, "no run.json: model, world size and settings are unknown");
    if (!r->have_metrics)
        note(r, "no metrics.jsonl yet: no step has finished, so there are no curves");
    else if (!r->m[M_STEP].n)
        note(r, "metrics.jsonl has no step lines yet");
    note_skipped(r, "metrics.jsonl", &r->metrics_read, " (the last one is being written)");
    if (r->have_metrics && !r->ev_step.n)
        note(r, "no evaluation lines in metrics.jsonl (train with --eval-data DIR [--eval-every N]): eval loss not "
                "shown");
    if (!r->nranks) note(r, "no ranks/rank-N.metrics.jsonl: tok/s per rank not shown");
    if (!r->power.n)
        note(r, "no power samples (ranks/rank-N.power.csv is written only where NVML sees a GPU): no power picture");
    if (!r->nckpt) note(r, "no checkpoints in checkpoints/ yet");
    for (size_t i = 0; i < r->nckpt; i++)
        if (!r->ckpts[i].has_meta)
            note(r, "checkpoints/step-%08lld has no readable meta.json: its time is unknown", r->ckpts[i].step);
    if (!r->complete && strcmp(r->state, "starting") != 0)
        note(r, "no complete.json: the run is live, or it ended without finishing (see the state)");
    if (!e_hb) note(r, "no heartbeat.json: progress and GPU-hours projection unknown");
    if (!isfinite(r->t_start)) note(r, "the run's start time is unknown: times are from the first sample");
    return 0;
}

static void run_free(run_data *r) {
    cJSON_Delete(r->run);
    cJSON_Delete(r->hb);
    cJSON_Delete(r->complete);
    cJSON_Delete(r->watch);
    for (int k = 0; k < M_NCOL; k++) free(r->m[k].v);
    free(r->ev_step.v), free(r->ev_loss.v), free(r->ev_ppl.v), free(r->ev_tokens.v);
    for (int i = 0; i < r->nranks; i++) free(r->ranks[i].step.v), free(r->ranks[i].toks.v);
    free(r->ranks);
    for (int i = 0; i < r->ndumps; i++) free(r->dumps[i].reason);
    free(r->dumps);
    free(r->ckpts);
    zt_samples_free(&r->power);
}

// ---- the page ------------------------------------------------------------------------
#define PAGE_W 1320
#define COL_W 645
#define ROW_H 300
#define HEAD_H 250

static const char *C_TRAIN = "#1f77b4", *C_EVAL = "#ff7f0e", *C_GREEN = "#2ca02c", *C_RED = "#d62728",
                  *C_PURPLE = "#9467bd", *C_GREY = "#7f7f7f";
static const char *rank_palette[16] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                       "#e377c2", "#17becf", "#bcbd22", "#393b79", "#637939", "#8c6d31",
                                       "#843c39", "#7b4173", "#3182bd", "#636363"};

static zt_svg_plot plot_at(const char *id, const char *title, const char *xl, const char *yl, int col, int top) {
    return (zt_svg_plot){.id = id, .title = title, .xlabel = xl, .ylabel = yl, .left = 10 + col * (COL_W + 10),
                         .top = top, .width = COL_W, .height = ROW_H, .xmin = NAN, .xmax = NAN, .ymin = NAN,
                         .ymax = NAN};
}

static zt_svg_series line(const char *name, const char *colour, const dvec *x, const dvec *y) {
    return (zt_svg_series){.name = name, .colour = colour, .x = x->v, .y = y->v, .n = x->n < y->n ? x->n : y->n,
                           .style = ZT_SVG_LINE};
}

// Series without points are left out (no legend entry for a curve that is not there);
// a plot with none says why.
static void plot_or_empty(FILE *f, zt_svg_plot *p, const zt_svg_series *s, size_t ns, const char *why) {
    zt_svg_series keep[20];
    size_t nk = 0;
    for (size_t i = 0; i < ns && nk < 20; i++)
        if (zt_svg_count(p, &s[i])) keep[nk++] = s[i];
    if (nk)
        zt_svg_plot_write(f, p, keep, nk);
    else
        zt_svg_empty(f, p, why);
}

static void fact(FILE *f, const char *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fact(FILE *f, const char *k, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fputs("<td class=\"k\">", f);
    zt_html_escape(f, k);
    fputs("</td><td>", f);
    zt_html_escape(f, buf);
    fputs("</td>", f);
}

static const char *fmt_si(double v, char *buf, size_t n) {
    if (!isfinite(v)) return snprintf(buf, n, "-"), buf;
    if (fabs(v) >= 1e9) snprintf(buf, n, "%.2fG", v / 1e9);
    else if (fabs(v) >= 1e6) snprintf(buf, n, "%.2fM", v / 1e6);
    else if (fabs(v) >= 1e4) snprintf(buf, n, "%.1fk", v / 1e3);
    else snprintf(buf, n, "%.0f", v);
    return buf;
}

static void header(FILE *f, const run_data *r) {
    char b1[64], b2[64], d1[32];
    const char *id = jstr(r->run, "run_id") ? jstr(r->run, "run_id") : jstr(r->hb, "run_id");
    fprintf(f, "<div class=\"block\" id=\"summary\" style=\"left:10px;top:10px;width:%dpx;height:%dpx\">\n",
            PAGE_W - 20, HEAD_H);
    fputs("<h1>zerotrain run ", f);
    zt_html_escape(f, id ? id : "(no run id)");
    const char *state = run_state(r->state);  // a word of the fixed set: class and data-state
    fprintf(f, " <span class=\"badge st-%s\" id=\"state\" data-state=\"%s\">", state, state);
    for (const char *p = state; *p; p++) fputc(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p, f);
    fputs("</span></h1>\n<table class=\"facts\">\n<tr>", f);
    // model
    const cJSON *mc = r->run ? cJSON_GetObjectItemCaseSensitive(r->run, "model_config") : NULL;
    // run.json: "model" is --model (empty with --init alone), "init" the weights or "random"
    const char *model = jstr(r->run, "model"), *init = jstr(r->run, "init");
    int has_model = model && model[0], has_init = init && init[0] && strcmp(init, "random");
    fact(f, "model", "%s%s%s%s", has_model ? model : has_init ? "" : "?", has_model && has_init ? ", " : "",
         has_init ? "weights from " : init ? " (random init)" : "", has_init ? init : "");
    if (mc) {
        char n[5][32];
        fact(f, "config", "%s layers, hidden %s, %s heads (%s kv), vocab %s, %s params",
             fmt_count(jnum(mc, "num_hidden_layers"), n[0], sizeof n[0]),
             fmt_count(jnum(mc, "hidden_size"), n[1], sizeof n[1]),
             fmt_count(jnum(mc, "num_attention_heads"), n[2], sizeof n[2]),
             fmt_count(jnum(mc, "num_key_value_heads"), n[3], sizeof n[3]),
             fmt_count(jnum(mc, "vocab_size"), n[4], sizeof n[4]), fmt_si(jnum(r->run, "param_count"), b1, sizeof b1));
    } else
        fact(f, "config", "-");
    fputs("</tr>\n<tr>", f);
    double world = jnum(r->run, "world_size");
    if (!isfinite(world)) world = jnum(r->hb, "world_size");
    fact(f, "world size", "%s%s%s", isfinite(world) ? (snprintf(b1, sizeof b1, "%.0f", world), b1) : "?",
         jstr(r->run, "backend") ? ", " : "", jstr(r->run, "backend") ? jstr(r->run, "backend") : "");
    const cJSON *tr = r->run ? cJSON_GetObjectItemCaseSensitive(r->run, "train") : NULL;
    double total = jnum(r->hb, "total_steps");
    if (!isfinite(total)) total = jnum(tr, "total_steps");
    double step = last(&r->m[M_STEP]);
    if (!isfinite(step)) step = jnum(r->hb, "step");
    fact(f, "steps", "%s / %s%s", isfinite(step) ? (snprintf(b1, sizeof b1, "%.0f", step), b1) : "0",
         isfinite(total) ? (snprintf(b2, sizeof b2, "%.0f", total), b2) : "?",
         isfinite(last(&r->m[M_EPOCH])) ? (snprintf(d1, sizeof d1, ", epoch %.0f", last(&r->m[M_EPOCH])), d1) : "");
    fputs("</tr>\n<tr>", f);
    double loss = last(&r->m[M_LOSS]);
    fact(f, "last loss", "%s", isfinite(loss) ? (snprintf(b1, sizeof b1, "%.4f (step %.0f)", loss, step), b1) : "-");
    if (r->ev_step.n) {
        double ppl = last(&r->ev_ppl);  // the loss is finite: only such lines are kept
        fact(f, "last eval loss", "%.4f%s%s (step %s, %zu evaluations)", last(&r->ev_loss),
             isfinite(ppl) ? ", ppl " : "", isfinite(ppl) ? (snprintf(b1, sizeof b1, "%.3f", ppl), b1) : "",
             fmt_count(last(&r->ev_step), b2, sizeof b2), r->ev_step.n);
    } else
        fact(f, "last eval loss", "none");
    fputs("</tr>\n<tr>", f);
    double toks = last(&r->m[M_TOKS]);
    fact(f, "tokens", "%s seen, %s tok/s last step", fmt_si(last(&r->m[M_TOKENS]), b1, sizeof b1),
         fmt_si(toks, b2, sizeof b2));
    double el = last(&r->m[M_ELAPSED]);
    if (isfinite(jnum(r->hb, "elapsed_s"))) el = jnum(r->hb, "elapsed_s");
    fact(f, "elapsed", "%s", isfinite(el) ? zt_fmt_dur(el, d1, sizeof d1) : "-");
    fputs("</tr>\n<tr>", f);
    // heartbeat.json's figures, else metrics.jsonl's last ones; a figure neither has is left out
    double gh = jnum(r->hb, "gpu_hours"), risk = jnum(r->hb, "gpu_hours_at_risk");
    if (!isfinite(gh)) gh = last_finite(&r->m[M_GPUH]);
    if (!isfinite(risk)) risk = last_finite(&r->m[M_GPUH_RISK]);
    const double ghv[3] = {gh, jnum(r->hb, "gpu_hours_per_epoch"), risk};
    const char *ghw[3] = {"spent", "per epoch projected", "at risk"};
    char ghs[160] = "";
    for (int i = 0, at = 0; i < 3; i++)
        if (isfinite(ghv[i]) && at < (int)sizeof ghs)
            at += snprintf(ghs + at, sizeof ghs - at, "%s%.4f %s", at ? ", " : "", ghv[i], ghw[i]);
    fact(f, "GPU-hours", "%s", ghs[0] ? ghs : "-");
    // --async-save: the heartbeat names a write in flight (step, for how long)
    const cJSON *cw = r->hb ? cJSON_GetObjectItemCaseSensitive(r->hb, "checkpoint_writing") : NULL;
    char writing[96] = "";
    if (cJSON_IsObject(cw) && isfinite(jnum(cw, "step")))
        snprintf(writing, sizeof writing, "; step %.0f being written in the background (for %s at the last heartbeat)",
                 jnum(cw, "step"), isfinite(jnum(cw, "for_s")) ? zt_fmt_dur(fmax(0, jnum(cw, "for_s")), d1, sizeof d1) : "?");
    fact(f, "checkpoints", "%zu in checkpoints/%s%s%s", r->nckpt, r->latest[0] ? ", latest " : "", r->latest, writing);
    fputs("</tr>\n</table>\n", f);
    fprintf(f, "<p id=\"state-why\"%s>", strcmp(r->state, "complete") && strcmp(r->state, "running") &&
                                                 strcmp(r->state, "starting") ? " class=\"verdict\"" : "");
    zt_html_escape(f, r->state_why);
    fputs("</p>\n", f);
    const char *wd = jstr(r->watch, "diagnosis");
    if (r->watch) {
        fputs("<p id=\"watcher\"><b>watcher</b> (watch.json): ", f);
        zt_html_escape(f, jstr(r->watch, "state") ? jstr(r->watch, "state") : "?");
        fputs(": ", f);
        zt_html_escape(f, jstr(r->watch, "reason") ? jstr(r->watch, "reason") : "");
        if (wd && wd[0]) {
            fputs("<br><b>diagnosis</b>: ", f);
            zt_html_escape(f, wd);
        }
        fputs("</p>\n", f);
    }
    fputs("</div>\n", f);
}

// The flight recorders' diagnosis, computed now from RUN/ranks/rank-N.flight (the
// watcher's grouping; ticks are left out: the job is over or the watcher has its say),
// with heartbeat.json's record of a deadline abort (the ranks that had stopped ticking then).
// The world size is run.json's (else heartbeat.json's), as far as the files allow it.
static void flight_diagnosis(run_data *r, char **diag, char **details) {
    *diag = *details = NULL;
    if (!r->flight_files) return;
    zt_watch w;
    zt_watch_init(&w, r->dir, NULL);
    char src[4200], why[8192];
    double world = jnum(r->run, "world_size");
    snprintf(src, sizeof src, "%s/%s", r->dir, !isnan(world) || !r->hb ? "run.json" : "heartbeat.json");
    if (isnan(world)) world = jnum(r->hb, "world_size");
    w.world = zt_watch_world(r->dir, src, world, why, sizeof why);
    if (why[0]) note(r, "%s", why);
    w.state = ZT_WS_HUNG;
    zt_watch_read_heartbeat(&w);  // a deadline abort's record (heartbeat.json "aborted") names the ranks
    zt_watch_diagnose(&w, (double)time(NULL));
    *diag = strdup(w.diagnosis);
    *details = w.details ? strdup(w.details) : NULL;
    zt_watch_free(&w);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

// The details block's height: its text is laid out from the top, about 19 px a line (a
// long line wraps once), so that the page's stated size holds all of it.
static int details_height(const run_data *r, const char *diag, const char *fdetails) {
    int lines = 12 + 2 * r->nnotes + 2 * r->ndumps + (diag ? 3 : 0) + count_lines(fdetails);
    const cJSON *det = r->watch ? cJSON_GetObjectItemCaseSensitive(r->watch, "details") : NULL;
    if (r->watch) lines += 4 + (cJSON_IsArray(det) ? cJSON_GetArraySize(det) : 0);
    int h = 40 + 19 * lines;
    return h < 300 ? 300 : h;
}

static void details(FILE *f, const run_data *r, int top, int height, const char *diag, const char *fdetails) {
    fprintf(f, "<div class=\"block\" id=\"details\" style=\"left:10px;top:%dpx;width:%dpx;height:%dpx\">\n", top,
            PAGE_W - 20, height);
    int bad = strcmp(r->state, "complete") && strcmp(r->state, "running") && strcmp(r->state, "starting");
    if (bad || r->ndumps || r->watch) {
        fputs("<h2>Verdict and diagnosis</h2>\n", f);
        fputs("<p><b>state</b>: ", f);
        zt_html_escape(f, r->state_why);
        fputs("</p>\n", f);
        if (r->watch) {
            fputs("<p><b>watcher</b> (watch.json): <span id=\"watch-verdict\">", f);
            zt_html_escape(f, jstr(r->watch, "state") ? jstr(r->watch, "state") : "?");
            fputs(": ", f);
            zt_html_escape(f, jstr(r->watch, "reason") ? jstr(r->watch, "reason") : "");
            fputs("</span></p>\n", f);
            const cJSON *det = cJSON_GetObjectItemCaseSensitive(r->watch, "details");
            if (cJSON_IsArray(det) && cJSON_GetArraySize(det) > 0) {
                fputs("<pre id=\"watch-details\">", f);
                const cJSON *l;
                cJSON_ArrayForEach(l, det) if (cJSON_IsString(l)) zt_html_escape(f, l->valuestring), fputc('\n', f);
                fputs("</pre>\n", f);
            }
        }
        for (int i = 0; i < r->ndumps; i++) {
            fprintf(f, "<p class=\"deadline\" data-rank=\"%d\"><b>rank %d</b> (ranks/rank-%05d.flight.json, ",
                    r->dumps[i].rank, r->dumps[i].rank, r->dumps[i].rank);
            zt_html_escape(f, r->dumps[i].status);
            if (r->dumps[i].written[0]) {
                fputs(", written ", f);
                zt_html_escape(f, r->dumps[i].written);
            }
            fputs("): ", f);
            zt_html_escape(f, r->dumps[i].reason[0] ? r->dumps[i].reason : "(no reason recorded)");
            fputs("</p>\n", f);
        }
        if (diag) {
            fputs("<p><b>flight recorders</b> (ranks/rank-N.flight, read now): <span id=\"diagnosis\">", f);
            zt_html_escape(f, diag);
            fputs("</span></p>\n", f);
            if (fdetails) {
                fputs("<pre id=\"flight-details\">", f);
                zt_html_escape(f, fdetails);
                fputs("</pre>\n", f);
            }
        }
    }
    fputs("<h2>Not shown</h2>\n<ul class=\"missing\" id=\"missing\">\n", f);
    for (int i = 0; i < r->nnotes; i++) {
        fputs("<li>", f);
        zt_html_escape(f, r->note[i]);
        fputs("</li>\n", f);
    }
    if (!r->nnotes) fputs("<li>nothing: every piece of the run directory was there</li>\n", f);
    fputs("</ul>\n<h2>TensorBoard</h2>\n<p>", f);
    if (r->have_tb) {
        fputs("The trainer also writes TensorBoard event files: <code>tensorboard --logdir ", f);
        zt_html_escape(f, r->dir);
        fputs("/tb</code> (rank 0's scalars in tb/, each rank's in tb/ranks/rank-N).", f);
    } else {
        fputs("no tb/ directory (run with TensorBoard output on, the default, to get one).", f);
    }
    fputs("</p>\n<h2>Read</h2>\n<p>", f);
    fprintf(f, "metrics.jsonl: %zu step lines, %zu evaluation lines; ranks/: %d metrics files, %d power files (%zu "
               "samples), %d flight recorders, %d deadline dumps; checkpoints/: %zu",
            r->m[M_STEP].n, r->ev_step.n, r->nranks, r->power_files, r->power.n, r->flight_files, r->ndumps, r->nckpt);
    char tb[40];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(tb, sizeof tb, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(f, "; page written %s.</p>\n</div>\n", tb);
}

// The power picture across the page, on the run's clock when its start is known, with the
// checkpoint saves marked.
static void power_plot(FILE *f, const run_data *r, const zt_report_opts *o, int top, int height) {
    double t0 = isfinite(r->t_start) ? r->t_start : r->power.n ? r->power.s[0].t : 0;
    double *marks = zt_xmalloc((r->nckpt + 1) * sizeof *marks);
    size_t nmarks = 0;
    for (size_t i = 0; i < r->nckpt; i++)
        if (isfinite(r->ckpts[i].save_elapsed)) marks[nmarks++] = r->t_start + r->ckpts[i].save_elapsed;
    if (r->power.n) {
        zt_power_class pc;
        zt_power_classify(&r->power, &o->bands, o->window > 0 ? o->window : 1.0, 0, &pc);
        zt_power_view v = {.id = "power", .left = 10, .top = top, .width = PAGE_W - 20, .t0 = t0,
                           .t0_what = isfinite(r->t_start) ? "the run start" : "the first sample", .marks = marks,
                           .nmarks = nmarks, .min_deadlock = 2};
        zt_power_svg(f, &v, &r->power, &o->bands, &pc);
        zt_power_class_free(&pc);
    } else {
        zt_svg_plot p = {.id = "power", .title = "Board power per GPU over the triage bands", .xlabel = "time",
                         .ylabel = "W", .left = 10, .top = top, .width = PAGE_W - 20, .height = height,
                         .xmin = NAN, .xmax = NAN, .ymin = NAN, .ymax = NAN};
        zt_svg_empty(f, &p, "no power samples: ranks/rank-N.power.csv is written only where NVML sees a GPU");
    }
    free(marks);
}

// Two rows: loss against step and against tokens; learning rate and gradient norm.
static void loss_rows(FILE *f, const run_data *r, int top) {
    zt_svg_series s[2];
    zt_svg_plot p = plot_at("loss", "Loss", "step", "loss", 0, top);
    s[0] = line("train loss", C_TRAIN, &r->m[M_STEP], &r->m[M_LOSS]);
    s[1] = line("eval loss", C_EVAL, &r->ev_step, &r->ev_loss);
    s[1].style = ZT_SVG_LINE | ZT_SVG_MARKERS;
    plot_or_empty(f, &p, s, 2, "no step lines in metrics.jsonl yet");
    p = plot_at("loss-tokens", "Loss against tokens seen", "tokens", "loss", 1, top);
    s[0] = line("train loss", C_TRAIN, &r->m[M_TOKENS], &r->m[M_LOSS]);
    s[1] = line("eval loss", C_EVAL, &r->ev_tokens, &r->ev_loss);
    s[1].style = ZT_SVG_LINE | ZT_SVG_MARKERS;
    plot_or_empty(f, &p, s, 2, "no step lines in metrics.jsonl yet");
    top += ROW_H + 10;
    p = plot_at("lr", "Learning rate", "step", "lr", 0, top);
    p.y_zero = 1;
    s[0] = line("", C_TRAIN, &r->m[M_STEP], &r->m[M_LR]);
    plot_or_empty(f, &p, s, 1, "no step lines in metrics.jsonl yet");
    char gt[96];
    double clip = jnum(r->run ? cJSON_GetObjectItemCaseSensitive(r->run, "train") : NULL, "clip");
    if (isfinite(clip) && clip > 0)
        snprintf(gt, sizeof gt, "Gradient norm (before clipping to %g)", clip);
    else
        snprintf(gt, sizeof gt, "Gradient norm");
    p = plot_at("grad-norm", gt, "step", "global grad norm", 1, top);
    p.y_zero = 1;
    s[0] = line("", C_PURPLE, &r->m[M_STEP], &r->m[M_GNORM]);
    plot_or_empty(f, &p, s, 1, "no step lines in metrics.jsonl yet");
}

// tok/s per rank (the first 16); compute vs comm-wait share.
static void throughput_row(FILE *f, const run_data *r, int top) {
    zt_svg_series s[16];
    zt_svg_plot p = plot_at("tok-per-rank", "Throughput per rank (ranks/rank-N.metrics.jsonl)", "step", "tok/s", 0,
                            top);
    p.y_zero = 1;
    int nr = r->nranks < 16 ? r->nranks : 16;
    char rnames[16][24];
    for (int i = 0; i < nr; i++) {
        snprintf(rnames[i], sizeof rnames[i], "rank %d", r->ranks[i].rank);
        s[i] = line(rnames[i], rank_palette[i % 16], &r->ranks[i].step, &r->ranks[i].toks);
    }
    plot_or_empty(f, &p, s, (size_t)nr, "no ranks/rank-N.metrics.jsonl");
    p = plot_at("comm-share", "Compute vs communication wait, share of each step (rank 0)", "step",
                "% of step time", 1, top);
    p.ymin = 0, p.ymax = 100;
    s[0] = line("compute", C_GREEN, &r->m[M_STEP], &r->m[M_COMPUTE_PCT]);
    s[1] = line("comm wait", C_RED, &r->m[M_STEP], &r->m[M_COMM_PCT]);
    plot_or_empty(f, &p, s, 2, "no step lines in metrics.jsonl yet");
}

// Progress and checkpoint saves on the elapsed-time axis.
static void progress_plot(FILE *f, const run_data *r, int top) {
    zt_svg_series s[2];
    dvec ck_t = {0}, ck_s = {0};
    for (size_t i = 0; i < r->nckpt; i++)
        if (isfinite(r->ckpts[i].save_elapsed))
            dpush(&ck_t, r->ckpts[i].save_elapsed), dpush(&ck_s, (double)r->ckpts[i].step);
    const char *unit;
    double span = fmax(last(&r->m[M_ELAPSED]), ck_t.n ? ck_t.v[ck_t.n - 1] : 0);
    double div = zt_svg_time_unit(isfinite(span) ? span : 0, &unit);
    dvec el = {0}, ckx = {0};
    for (size_t i = 0; i < r->m[M_ELAPSED].n; i++) dpush(&el, r->m[M_ELAPSED].v[i] / div);
    for (size_t i = 0; i < ck_t.n; i++) dpush(&ckx, ck_t.v[i] / div);
    char xl[64];
    snprintf(xl, sizeof xl, "elapsed since the run start (%s)", unit);
    zt_svg_plot p = plot_at("checkpoints", "Progress and checkpoint saves", xl, "step", 0, top);
    p.y_zero = 1;
    s[0] = line("step reached", C_TRAIN, &el, &r->m[M_STEP]);
    s[1] = line("checkpoint committed (meta.json)", C_PURPLE, &ckx, &ck_s);
    s[1].style = ZT_SVG_MARKERS;
    plot_or_empty(f, &p, s, 2, "no step lines and no checkpoints yet");
    free(ck_t.v), free(ck_s.v), free(el.v), free(ckx.v);
}

// GPU-hours spent, at risk, and projected to the last step.
static void gpu_hours_plot(FILE *f, const run_data *r, int top) {
    zt_svg_series s[3];
    dvec px = {0}, py = {0};
    int live = !strcmp(r->state, "running");
    size_t n = r->m[M_STEP].n;
    double total = jnum(r->hb, "total_steps");
    if (!isfinite(total))
        total = jnum(r->run ? cJSON_GetObjectItemCaseSensitive(r->run, "train") : NULL, "total_steps");
    if (live && n >= 2 && isfinite(total) && total > r->m[M_STEP].v[n - 1]) {
        size_t a = n > 50 ? n - 50 : 0;
        double ds = r->m[M_STEP].v[n - 1] - r->m[M_STEP].v[a], dg = r->m[M_GPUH].v[n - 1] - r->m[M_GPUH].v[a];
        double proj = r->m[M_GPUH].v[n - 1] + dg / ds * (total - r->m[M_STEP].v[n - 1]);
        if (ds > 0 && isfinite(proj)) {
            dpush(&px, r->m[M_STEP].v[n - 1]), dpush(&py, r->m[M_GPUH].v[n - 1]);
            dpush(&px, total), dpush(&py, proj);
        }
    }
    char gh_title[128];
    if (px.n)
        snprintf(gh_title, sizeof gh_title, "GPU-hours: spent, at risk, projected to step %.0f: %.4g", total, py.v[1]);
    else
        snprintf(gh_title, sizeof gh_title, "GPU-hours: spent and at risk%s",
                 live ? "" : " (no projection: not running)");
    zt_svg_plot p = plot_at("gpu-hours", gh_title, "step", "GPU-hours (rank-hours on cpu)", 1, top);
    p.y_zero = 1;
    if (px.n) p.xmax = total;
    s[0] = line("spent", C_TRAIN, &r->m[M_STEP], &r->m[M_GPUH]);
    s[1] = line("at risk (since the last checkpoint)", C_RED, &r->m[M_STEP], &r->m[M_GPUH_RISK]);
    s[1].dashed = 1;  // equal to "spent" until the first checkpoint: the solid line shows through
    s[2] = line("projected", C_GREY, &px, &py);
    s[2].dashed = 1;
    plot_or_empty(f, &p, s, px.n ? 3 : 2, "no step lines in metrics.jsonl yet");
    free(px.v), free(py.v);
}

// MFU (and HFU with --recompute) against the peak run.json names, across the page.
static void mfu_plot(FILE *f, const run_data *r, int top) {
    zt_svg_series s[2];
    const cJSON *dev = r->run ? cJSON_GetObjectItemCaseSensitive(r->run, "device") : NULL;
    const double peak = jnum(dev, "peak_tflops_per_rank");
    const char *kind = jstr(dev, "peak_kind");
    char mt[256];
    if (isfinite(peak))
        snprintf(mt, sizeof mt, "MFU: model FLOPs per second per rank / %.4g TFLOP/s (%s), %.4g TFLOP/s per rank last",
                 peak,
                 kind && !strcmp(kind, "cpu_gemm_probe") ? "a CPU fp32 GEMM probe measured at start, not a GPU peak"
                 : kind && !strcmp(kind, "given")        ? "--peak-tflops"
                                                         : "the GPU preset's dense bf16 peak",
                 last_finite(&r->m[M_TFLOPS]));
    else
        snprintf(mt, sizeof mt, "MFU: model FLOPs per second per rank / the device's peak%s",
                 dev ? " (unknown for this run: --peak-tflops)" : "");
    zt_svg_plot p = plot_at("mfu", mt, "step", "% of peak", 0, top);
    p.width = PAGE_W - 20;
    p.y_zero = 1;
    dvec mfu_pct = {0}, hfu_pct = {0};
    for (size_t i = 0; i < r->m[M_MFU].n; i++) dpush(&mfu_pct, 100 * r->m[M_MFU].v[i]);
    for (size_t i = 0; i < r->m[M_HFU].n; i++) dpush(&hfu_pct, 100 * r->m[M_HFU].v[i]);
    s[0] = line("MFU (model FLOPs)", C_GREEN, &r->m[M_STEP], &mfu_pct);
    s[1] = line("HFU (with the recomputed forward)", C_PURPLE, &r->m[M_STEP], &hfu_pct);
    s[1].dashed = 1;
    plot_or_empty(f, &p, s, 2, "no mfu in metrics.jsonl (a run of a zerotrain before it, or no known peak)");
    free(mfu_pct.v), free(hfu_pct.v);
}

// The one-line summary for the terminal; the diagnosis quotes the flight recorders' labels, so
// control bytes become '?'.
static void write_summary(const run_data *r, int nplots, const char *diag, char *summary, size_t sn) {
    snprintf(summary, sn, "state %s; %d plots; %zu steps, %zu evaluations, %d ranks, %zu checkpoints, %zu power "
             "samples%s%s",
             r->state, nplots, r->m[M_STEP].n, r->ev_step.n, r->nranks, r->nckpt, r->power.n,
             diag ? "; diagnosis: " : "", diag ? diag : "");
    for (char *c = summary; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
}

int zt_report_write(const char *run_dir, const char *out_path, const zt_report_opts *o, char *summary, size_t sn) {
    run_data r;
    memset(&r, 0, sizeof r);
    zt_samples_init(&r.power);
    r.warn = o->warn;
    if (load(&r, run_dir) != 0) {
        run_free(&r);
        return -1;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    const int power_top = 10 + HEAD_H + 10;
    const int power_h = r.power.n ? zt_power_svg_height(&r.power, PAGE_W - 20) : 140;
    const int grid_top = power_top + power_h + 10;
    const int details_top = grid_top + 5 * (ROW_H + 10);
    const char *id = jstr(r.run, "run_id") ? jstr(r.run, "run_id") : jstr(r.hb, "run_id");
    char title[200];
    snprintf(title, sizeof title, "zerotrain report: %s", id ? id : run_dir);
    char *diag = NULL, *fdet = NULL;
    int bad = strcmp(r.state, "complete") && strcmp(r.state, "running") && strcmp(r.state, "starting");
    if (bad || r.ndumps) flight_diagnosis(&r, &diag, &fdet);
    if (r.nranks > 16) note(&r, "tok/s per rank: the first 16 of %d ranks are drawn", r.nranks);
    const int details_h = details_height(&r, diag, fdet);
    zt_html_page_begin(f, title, PAGE_W, details_top + details_h + 10);
    header(f, &r);

    // The power picture, then a grid of five rows: 1 + 9 plots.
    power_plot(f, &r, o, power_top, power_h);
    int top = grid_top;
    loss_rows(f, &r, top);  // rows 1 and 2
    top += 2 * (ROW_H + 10);
    throughput_row(f, &r, top);
    top += ROW_H + 10;
    progress_plot(f, &r, top);
    gpu_hours_plot(f, &r, top);
    top += ROW_H + 10;
    mfu_plot(f, &r, top);
    const int nplots = 1 + 9;

    details(f, &r, details_top, details_h, diag, fdet);
    zt_html_page_end(f);
    fclose(f);
    int rc = zt_write_file_atomic(out_path, buf, len);
    if (rc == 0 && summary) write_summary(&r, nplots, diag, summary, sn);
    free(buf);
    free(diag);
    free(fdet);
    run_free(&r);
    return rc;
}
