// The watcher's rules (docs/operations.md, "zerotrain watch"): complete.json wins;
// a "failed" report is FAILED; a stale liveness tick is CRASHED; with every tick
// fresh, a step counter stalled past max(min-stall, factor x median step time) or the
// deadlock power signature on consecutive samples is HUNG. Then the flight recorders
// name who is in which collective.
#define _GNU_SOURCE
#include "ops/watch.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "engine/comm.h"
#include "base/common.h"
#include "base/out_file.h"
#include "engine/flight.h"
#include "train/train_defaults.h"
#include "ops/fmt.h"

static const char *ws_names[] = {"STARTING", "RUNNING", "COMPLETE", "CRASHED", "HUNG", "FAILED", "STOPPED"};

const char *zt_watch_state_name(zt_watch_state s) { return (unsigned)s <= ZT_WS_STOPPED ? ws_names[s] : "?"; }

int zt_watch_state_final(zt_watch_state s) { return s >= ZT_WS_COMPLETE; }

int zt_watch_exit_code(zt_watch_state s) {
    switch (s) {
    case ZT_WS_COMPLETE: return ZT_WATCH_EXIT_COMPLETE;
    case ZT_WS_CRASHED: return ZT_WATCH_EXIT_CRASHED;
    case ZT_WS_HUNG: return ZT_WATCH_EXIT_HUNG;
    case ZT_WS_FAILED: return ZT_WATCH_EXIT_FAILED;
    case ZT_WS_STOPPED: return ZT_WATCH_EXIT_STOPPED;
    default: return ZT_WATCH_EXIT_RUNNING;
    }
}

void zt_watch_opts_default(zt_watch_opts *o) {
    memset(o, 0, sizeof *o);
    o->alive_interval = ZT_DEF_ALIVE_INTERVAL;
    o->stall_factor = ZT_WATCH_DEF_STALL_FACTOR;
    o->min_stall = ZT_WATCH_DEF_MIN_STALL;
    o->startup_grace = ZT_WATCH_DEF_STARTUP_GRACE;
    o->power_samples = ZT_WATCH_DEF_POWER_SAMPLES;
    zt_bands_b300(&o->bands);
}

double zt_watch_stale_after(const zt_watch_opts *o) { return fmax(3.0 * o->alive_interval, 15.0); }

int zt_watch_init(zt_watch *w, const char *run_dir, const zt_watch_opts *o) {
    memset(w, 0, sizeof *w);
    size_t n = strlen(run_dir);
    w->run_dir = zt_xmalloc(n + 1);
    memcpy(w->run_dir, run_dir, n + 1);
    while (n > 1 && w->run_dir[n - 1] == '/') w->run_dir[--n] = 0;
    if (o)
        w->o = *o;
    else
        zt_watch_opts_default(&w->o);
    w->step_seen = LLONG_MIN;
    return 0;
}

void zt_watch_free(zt_watch *w) {
    free(w->run_dir);
    free(w->ranks);
    free(w->details);
    memset(w, 0, sizeof *w);
}

static void warn(zt_watch *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(zt_watch *w, const char *fmt, ...) {
    size_t at = strlen(w->warnings);
    if (at + 2 >= sizeof w->warnings) return;
    if (at) w->warnings[at++] = '\n', w->warnings[at] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->warnings + at, sizeof w->warnings - at, fmt, ap);
    va_end(ap);
}

// Parse a JSON file. NULL with *exists = 0 when absent; NULL with *exists = 1 when
// unreadable or not JSON (a warning is recorded).
static cJSON *read_json(zt_watch *w, const char *path, int *exists) {
    struct stat st;
    *exists = stat(path, &st) == 0;
    if (!*exists) return NULL;
    char *text = zt_read_file(path, NULL);
    if (!text) {
        warn(w, "%s", zt_errmsg());
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(j)) {
        warn(w, "%s: not a JSON object", path);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static double jnum(const cJSON *o, const char *k, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

// A whole number of a run file as an integer: anything else (1e300, a fraction's excess,
// inf from 1e999) is `dflt`, never an out-of-range conversion.
static long long jint(const cJSON *o, const char *k, long long dflt) {
    const double v = jnum(o, k, NAN);
    return v >= -9.2e18 && v <= 9.2e18 ? (long long)v : dflt;
}

static void jstr(const cJSON *o, const char *k, char *dst, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    snprintf(dst, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

// A rank index above any job's: plan's --world limit. A file named beyond it is no rank's.
#define ZT_WATCH_MAX_RANK ((1 << 20) - 1)

void zt_watch_read_heartbeat(zt_watch *w) {
    char path[4200];
    int exists;
    snprintf(path, sizeof path, "%s/heartbeat.json", w->run_dir);
    cJSON *j = read_json(w, path, &exists);
    if (!j) return;  // absent, or a warning; keep what the last poll read
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(j, "state");
    if (!cJSON_IsNumber(step) || !cJSON_IsString(state)) {
        warn(w, "%s: no numeric \"step\" or string \"state\"", path);
        cJSON_Delete(j);
        return;
    }
    zt_watch_hb *h = &w->hb;
    h->have = 1;
    jstr(j, "run_id", h->run_id, sizeof h->run_id);
    jstr(j, "state", h->state, sizeof h->state);
    jstr(j, "error", h->error, sizeof h->error);
    h->stopped_by_rank = (int)jint(j, "stopped_by_rank", -1);
    h->state_time = jnum(j, "state_time", 0);
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(j, "ranks_not_ticking");
    h->not_ticking_n = -1;
    h->not_ticking[0] = 0;
    if (cJSON_IsArray(nt)) {  // the aborting rank's view of the ticks at the abort (train/liveness.h)
        int n = 0, cap = 0, *rs = NULL;
        for (const cJSON *x = nt->child; x; x = x->next)
            if (cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= ZT_WATCH_MAX_RANK)
                zt_int_push(&rs, &n, &cap, (int)x->valuedouble);
        h->not_ticking_n = n;
        zt_rank_list(rs, n, h->not_ticking, sizeof h->not_ticking);
        free(rs);
        h->ticks_older_than_s = jnum(j, "ticks_older_than_s", 0);
    }
    h->step = jint(j, "step", -1);
    h->total_steps = jint(j, "total_steps", 0);
    h->epoch = jint(j, "epoch", 0);
    h->tokens = jint(j, "tokens", 0);
    h->time = jnum(j, "time", 0);
    h->elapsed_s = jnum(j, "elapsed_s", 0);
    h->step_time_s = jnum(j, "step_time_s", 0);
    h->tok_per_s = jnum(j, "tok_per_s", 0);
    h->loss = jnum(j, "loss", NAN);
    h->world_size = jnum(j, "world_size", NAN);
    const cJSON *cw = cJSON_GetObjectItemCaseSensitive(j, "checkpoint_writing");
    h->ckpt_writing = cJSON_IsObject(cw) ? jint(cw, "step", 0) : 0;
    h->ckpt_writing_s = cJSON_IsObject(cw) ? jnum(cw, "for_s", 0) : 0;
    cJSON_Delete(j);
}


static int cmp_int(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// The ranks with a rank-N.alive or rank-N.flight file in RUN/ranks: returns the largest
// (-1 if none); *dense is how many of ranks 0, 1, 2, ... in order have one (k: ranks
// 0..k-1 all do, rank k does not) and *distinct how many ranks have one.
static int scan_ranks(const char *run_dir, int *dense, int *distinct) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/ranks", run_dir);
    *dense = *distinct = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int *seen = NULL, n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *p = e->d_name;
        if (strncmp(p, "rank-", 5) != 0) continue;
        int r = 0, digits = 0;
        for (p += 5; *p >= '0' && *p <= '9' && r <= ZT_WATCH_MAX_RANK; p++, digits++) r = 10 * r + (*p - '0');
        if (!digits || r > ZT_WATCH_MAX_RANK || (strcmp(p, ".alive") != 0 && strcmp(p, ".flight") != 0)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            int *ns = zt_xmalloc((size_t)cap * sizeof *ns);
            if (n) memcpy(ns, seen, (size_t)n * sizeof *ns);
            free(seen);
            seen = ns;
        }
        seen[n++] = r;
    }
    closedir(d);
    if (n) qsort(seen, (size_t)n, sizeof *seen, cmp_int);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || seen[i] != seen[i - 1]) {
            if (seen[i] == k && *dense == k) *dense = k + 1;
            k++;
        }
    const int maxr = n ? seen[n - 1] : -1;
    free(seen);
    *distinct = k;
    return maxr;
}

int zt_watch_world(const char *run_dir, const char *src, double claimed, char *why, size_t whylen) {
    why[0] = 0;
    int dense, nfiles;
    const int maxr = scan_ranks(run_dir, &dense, &nfiles);
    if (isnan(claimed)) return maxr + 1;
    // Rank 0's recorder: written by the process that writes heartbeat.json and run.json.
    char path[4200];
    snprintf(path, sizeof path, "%s/ranks/rank-00000.flight", run_dir);
    zt_flight_hdr h;
    zt_flight_rec *recs = NULL;
    int n, rec_world = -1;
    if (zt_flight_read_rank(path, 0, &h, &recs, &n) == 0) rec_world = h.world;
    free(recs);
    zt_err_clear();
    // What the files show: rank 0's recorder's world when every rank below it has a file,
    // else the ranks 0..k-1 that all have one (at least 1: someone wrote `src`).
    const int borne = rec_world >= 1 && rec_world <= dense;
    const int fallback = borne ? rec_world : dense > 1 ? dense : 1;
    char evidence[4400], highest[32] = "", says[64] = "";
    if (nfiles) snprintf(highest, sizeof highest, ", the highest %d", maxr);
    if (rec_world > 0) snprintf(says, sizeof says, "; rank 0's flight recorder says world %d", rec_world);
    snprintf(evidence, sizeof evidence, "%s/ranks holds files of %d rank%s%s%s", run_dir, nfiles,
             nfiles == 1 ? "" : "s", highest, says);
    const int whole = claimed >= 1 && claimed <= INT_MAX && claimed == floor(claimed);
    const int W = whole ? (int)claimed : 0;
    struct stat st;
    if (!whole)
        snprintf(why, whylen, "%s: world_size %.17g cannot be true: not a whole number of ranks >= 1 (%s); judging "
                 "%d rank%s", src, claimed, evidence, fallback, fallback == 1 ? "" : "s");
    else if (W > dense && W != fallback)
        snprintf(why, whylen, "%s: world_size %d cannot be true: every rank creates its flight recorder and liveness "
                 "tick in RUN/ranks before the first step, and rank %d has neither (%s; is RUN on storage every node "
                 "shares?); judging %d rank%s", src, W, dense, evidence, fallback, fallback == 1 ? "" : "s");
    else if (borne && W != rec_world && stat(src, &st) == 0 &&
             (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec >= h.created_ns)
        snprintf(why, whylen, "%s: world_size %d cannot be true: it was written after rank 0's flight recorder %s, "
                 "by the same job, and that says world %d; judging %d rank%s", src, W, path, rec_world, fallback,
                 fallback == 1 ? "" : "s");
    else
        return W;
    return fallback;
}

static void read_ticks(zt_watch *w, double now) {
    for (int r = 0; r < w->world; r++) {
        zt_watch_rank *k = &w->ranks[r];
        char path[4200];
        int exists;
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.alive", w->run_dir, r);
        cJSON *j = read_json(w, path, &exists);
        k->present = exists;
        const cJSON *t = j ? cJSON_GetObjectItemCaseSensitive(j, "time") : NULL;
        if (j && !cJSON_IsNumber(t)) warn(w, "%s: no numeric \"time\"", path);
        if (cJSON_IsNumber(t)) {
            if (!k->seen) {
                // First sight: dated by the time inside (a future time counts as now).
                k->seen = 1;
                k->value = t->valuedouble;
                k->since = fmin(now, t->valuedouble);
            } else if (t->valuedouble != k->value) {
                k->value = t->valuedouble;
                k->since = now;
            }
            const long long pid = jint(j, "pid", 0);
            k->pid = pid > 0 && pid <= INT_MAX ? (int)pid : 0;
            k->step = jint(j, "step", 0);
            jstr(j, "host", k->host, sizeof k->host);
            jstr(j, "state", k->state, sizeof k->state);
        } else if (!k->seen) {
            k->since = w->t_start;  // never seen: its age counts from the watcher's start
        }
        k->age = now - k->since;
        cJSON_Delete(j);
    }
}

// step_time_s of the last (up to 20) lines of RUN/metrics.jsonl.
static double median_step_time(zt_watch *w) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", w->run_dir);
    double v[20];
    int n = 0;
    FILE *f = fopen(path, "rb");
    if (f) {
        char buf[16384];
        long off = 0;
        if (fseek(f, 0, SEEK_END) == 0) {
            long size = ftell(f);
            off = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
            fseek(f, off, SEEK_SET);
        }
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        char *p = buf;
        if (off > 0) p = strchr(buf, '\n') ? strchr(buf, '\n') + 1 : buf + len;  // skip the cut line
        double all[400];
        int na = 0;
        for (char *save = NULL, *line = strtok_r(p, "\n", &save); line && na < 400; line = strtok_r(NULL, "\n", &save)) {
            cJSON *j = cJSON_Parse(line);
            double st = jnum(j, "step_time_s", -1);
            if (st > 0) all[na++] = st;
            cJSON_Delete(j);
        }
        for (int i = na > 20 ? na - 20 : 0; i < na; i++) v[n++] = all[i];
    }
    if (n == 0 && w->hb.have && w->hb.step_time_s > 0) v[n++] = w->hb.step_time_s;
    return zt_median(v, (size_t)n);
}

// Text = first line of the file + its last `tail` bytes (whole lines).
static char *read_head_tail(const char *path, size_t tail, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char head[1024];
    if (!fgets(head, sizeof head, f)) {
        fclose(f);
        return NULL;
    }
    size_t hl = strlen(head);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long off = size - (long)tail > (long)hl ? size - (long)tail : (long)hl;
    fseek(f, off, SEEK_SET);
    char *buf = zt_xmalloc(hl + tail + 2);
    memcpy(buf, head, hl);
    size_t n = fread(buf + hl, 1, tail, f);
    fclose(f);
    buf[hl + n] = 0;
    if (off > (long)hl) {  // drop the partial first line of the tail
        char *nl = strchr(buf + hl, '\n');
        size_t skip = nl ? (size_t)(nl + 1 - (buf + hl)) : n;
        memmove(buf + hl, buf + hl + skip, n - skip + 1);
        n -= skip;
    }
    // drop a partial last line (the sampler may be mid-write)
    size_t total = hl + n;
    while (total > hl && buf[total - 1] != '\n') total--;
    buf[total] = 0;
    *len = total;
    return buf;
}

// The deadlock signature: the last power_samples snapshots, each with every power file
// present, all classified deadlock. Returns 1 and fills `why` on a match.
static int power_signature(zt_watch *w, char *why, size_t whylen) {
    w->power_state = ZT_GS_UNKNOWN;
    w->power_n = 0;
    if (w->o.power_samples <= 0 || w->world <= 0) return 0;
    zt_samples set;
    zt_samples_init(&set);
    for (int r = 0; r < w->world; r++) {
        char path[4200];
        size_t len;
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.power.csv", w->run_dir, r);
        char *text = read_head_tail(path, 4096, &len);
        if (!text) continue;
        if (zt_samples_parse(&set, text, len, path, ZT_SF_POWER_CSV, 1.0, -1) < 0)
            warn(w, "%s", zt_errmsg());
        else
            w->power_n++;
        free(text);
    }
    int hit = 0;
    if (set.n && w->power_n) {
        zt_samples_sort(&set);
        zt_snapshot *s;
        size_t ns;
        zt_snapshots_build(&set, &w->o.bands, 1.0, &s, &ns);
        for (size_t i = ns; i-- > 0;)
            if (s[i].n == w->power_n) {
                w->power_state = s[i].state;
                break;
            }
        double newest_tick = 0;
        for (int r = 0; r < w->world; r++) newest_tick = fmax(newest_tick, w->ranks[r].value);
        size_t k = (size_t)w->o.power_samples;
        if (ns >= k) {
            hit = 1;
            for (size_t i = ns - k; i < ns; i++)
                if (s[i].n != w->power_n || s[i].state != ZT_GS_DEADLOCK) hit = 0;
            // Old samples (a sampler that stopped) say nothing about now.
            if (newest_tick > 0 && s[ns - 1].t < newest_tick - zt_watch_stale_after(&w->o)) hit = 0;
            if (hit)
                snprintf(why, whylen,
                         "deadlock power signature on the last %zu samples: busy GPUs at a median %.0f W (hang band <= "
                         "%.0f W), at 0%% util: %s",
                         k, s[ns - 1].p_busy_med, w->o.bands.hang_max_w, s[ns - 1].zero[0] ? s[ns - 1].zero : "none");
        }
        free(s);
    }
    zt_samples_free(&set);
    return hit;
}

static void rank_list_where(const zt_watch *w, int (*pred)(const zt_watch_rank *, double), double arg, char *buf,
                            size_t n, int *count) {
    int *r = zt_xmalloc((size_t)(w->world + 1) * sizeof *r), k = 0;
    for (int i = 0; i < w->world; i++)
        if (pred(&w->ranks[i], arg)) r[k++] = i;
    zt_rank_list(r, k, buf, n);
    *count = k;
    free(r);
}

// What this host can see of a rank whose tick stopped: its process, when the tick names
// this host. The text goes after "rank N ".
typedef enum { PROBE_UNKNOWN, PROBE_GONE, PROBE_STOPPED, PROBE_ALIVE } rank_probe;

static int same_host(const char *a, const char *b) {
    size_t la = strcspn(a, "."), lb = strcspn(b, ".");
    return la && la == lb && !strncmp(a, b, la);
}

static rank_probe probe_rank(const zt_watch_rank *k, char *buf, size_t n) {
    char me[256] = "";
    gethostname(me, sizeof me - 1);
    if (!k->seen || k->pid <= 0 || !k->host[0]) {
        snprintf(buf, n, "stopped answering (its tick names no host and pid)");
        return PROBE_UNKNOWN;
    }
    if (!same_host(k->host, me)) {
        snprintf(buf, n, "stopped answering (pid %d on host %s; the watcher runs on %s and cannot look at it)", k->pid,
                 k->host, me[0] ? me : "?");
        return PROBE_UNKNOWN;
    }
    char path[64], st[512] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", k->pid);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(st, 1, sizeof st - 1, f) : 0;
    if (f) fclose(f);
    st[len] = 0;
    // "PID (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
    char *open = strchr(st, '('), *close = strrchr(st, ')');
    if (!f || !open || !close || close < open) {
        snprintf(buf, n, "is gone (process %d no longer exists on this host: killed or crashed)", k->pid);
        return PROBE_GONE;
    }
    *close = 0;
    char state = close[1] == ' ' ? close[2] : '?';
    if (!strstr(open + 1, "zerotrain")) {  // the pid was reused by another program
        snprintf(buf, n, "is gone (process %d on this host is now \"%s\", not zerotrain: killed or crashed)", k->pid,
                 open + 1);
        return PROBE_GONE;
    }
    if (state == 'T' || state == 't') {
        snprintf(buf, n, "is stopped (process %d on this host is in state %c: SIGSTOP, or a debugger holds it)", k->pid,
                 state);
        return PROBE_STOPPED;
    }
    if (state == 'Z' || state == 'X') {
        snprintf(buf, n, "is gone (process %d on this host has exited: state %c)", k->pid, state);
        return PROBE_GONE;
    }
    snprintf(buf, n, "is alive but not ticking (process %d on this host, state %c: its tick thread is blocked, e.g. on a "
             "hung file system)", k->pid, state);
    return PROBE_ALIVE;
}

static int is_stale(const zt_watch_rank *k, double lim) { return k->age > lim; }
static int is_failed(const zt_watch_rank *k, double unused) { return k->seen && !strcmp(k->state, "failed"); }
static int is_done_stale(const zt_watch_rank *k, double lim) { return k->age > lim && !strcmp(k->state, "done"); }
static int is_missing(const zt_watch_rank *k, double lim) { return k->age > lim && !k->seen; }

zt_watch_state zt_watch_poll(zt_watch *w, double now) {
    if (w->polls++ == 0) w->t_start = now;
    w->warnings[0] = w->reason[0] = 0;
    w->nstale = 0;
    w->stall_s = w->stall_bound_s = 0;
    char path[4200], list[256];
    int exists, cnt;

    snprintf(path, sizeof path, "%s/complete.json", w->run_dir);
    cJSON *c = read_json(w, path, &exists);
    if (c) {
        jstr(c, "final", w->complete_final, sizeof w->complete_final);
        snprintf(w->reason, sizeof w->reason, "complete.json: step %lld, final %s", jint(c, "step", -1),
                 w->complete_final[0] ? w->complete_final : "(none)");
        cJSON_Delete(c);
        zt_watch_read_heartbeat(w);
        return w->state = ZT_WS_COMPLETE;
    }
    zt_watch_read_heartbeat(w);
    char hb_path[4200], why[8192];
    snprintf(hb_path, sizeof hb_path, "%s/heartbeat.json", w->run_dir);
    // The heartbeat's world bounds the work of every poll: checked against the files present.
    int world = zt_watch_world(w->run_dir, hb_path, w->hb.have ? w->hb.world_size : NAN, why, sizeof why);
    if (why[0]) warn(w, "%s", why);
    if (world > w->ranks_cap) {
        zt_watch_rank *nr = zt_xcalloc((size_t)world, sizeof *nr);
        if (w->ranks_cap) memcpy(nr, w->ranks, (size_t)w->ranks_cap * sizeof *nr);
        free(w->ranks);
        w->ranks = nr;
        w->ranks_cap = world;
    }
    w->world = world;
    read_ticks(w, now);
    int npresent = 0;
    for (int r = 0; r < world; r++) npresent += w->ranks[r].seen;

    if (!w->hb.have && npresent == 0) {
        if (now - w->t_start > w->o.startup_grace) {
            snprintf(w->reason, sizeof w->reason,
                     "no heartbeat.json and no liveness tick in %s/ranks within the startup grace (%.0f s)", w->run_dir,
                     w->o.startup_grace);
            return w->state = ZT_WS_CRASHED;
        }
        return w->state = ZT_WS_STARTING;
    }
    if (w->hb.have && !strcmp(w->hb.state, "failed")) {
        snprintf(w->reason, sizeof w->reason, "heartbeat.json: the trainer reported failure at step %lld%s%.900s",
                 w->hb.step, w->hb.error[0] ? ": " : "", w->hb.error);
        return w->state = ZT_WS_FAILED;
    }
    if (w->hb.have && !strcmp(w->hb.state, "aborted")) {  // a hang the job's own deadline caught (exit 3)
        char who[32] = "a rank";
        if (w->hb.stopped_by_rank >= 0) snprintf(who, sizeof who, "rank %d", w->hb.stopped_by_rank);
        snprintf(w->reason, sizeof w->reason, "heartbeat.json: %s hit the collective deadline and aborted the job "
                 "after step %lld: %.900s", who, w->hb.step, w->hb.error[0] ? w->hb.error : "(no reason recorded)");
        return w->state = ZT_WS_HUNG;
    }
    if (w->hb.have && !strcmp(w->hb.state, "stopped")) {
        snprintf(w->reason, sizeof w->reason,
                 "heartbeat.json: the trainer stopped on a signal at step %lld after committing a checkpoint; "
                 "continue with `zerotrain train ... --resume`", w->hb.step);
        return w->state = ZT_WS_STOPPED;
    }
    rank_list_where(w, is_failed, 0, list, sizeof list, &cnt);
    if (cnt) {
        snprintf(w->reason, sizeof w->reason, "rank%s %s reported failure (state \"failed\" in the liveness tick)",
                 cnt > 1 ? "s" : "", list);
        return w->state = ZT_WS_FAILED;
    }

    double lim = zt_watch_stale_after(&w->o);
    rank_list_where(w, is_stale, lim, list, sizeof list, &w->nstale);
    if (w->nstale) {
        double oldest = 0;
        int worst = 0, ndone, nmiss;
        for (int r = 0; r < world; r++)
            if (w->ranks[r].age > oldest) oldest = w->ranks[r].age, worst = r;
        char dl[256], ml[256];
        rank_list_where(w, is_done_stale, lim, dl, sizeof dl, &ndone);
        rank_list_where(w, is_missing, lim, ml, sizeof ml, &nmiss);
        const zt_watch_rank *k = &w->ranks[worst];
        // Every stale rank stopped (SIGSTOP, a debugger) and none gone: the job hangs, nothing crashed.
        int nstopped = 0;
        char why[512], other[512];
        for (int r = 0; r < world; r++)
            if (r != worst && is_stale(&w->ranks[r], lim)) nstopped += probe_rank(&w->ranks[r], other, sizeof other) == PROBE_STOPPED;
        nstopped += probe_rank(k, why, sizeof why) == PROBE_STOPPED;  // `why` describes the oldest
        if (nstopped == w->nstale) {
            snprintf(w->reason, sizeof w->reason,
                     "rank%s %s stopped answering: rank %d %s; its liveness tick is %.0f s old", w->nstale > 1 ? "s" : "",
                     list, worst, why, k->age);
            return w->state = ZT_WS_HUNG;
        }
        int at = snprintf(w->reason, sizeof w->reason,
                          "liveness ticks stopped: rank%s %s (%d of %d) not updated for over %.0f s (oldest: rank %d, "
                          "%.0f s, host %s, pid %d)",
                          w->nstale > 1 ? "s" : "", list, w->nstale, world, lim, worst, k->age,
                          k->host[0] ? k->host : "?", k->pid);
        if (ndone && at < (int)sizeof w->reason)
            at += snprintf(w->reason + at, sizeof w->reason - at, "; rank%s %s finished (\"done\")", ndone > 1 ? "s" : "", dl);
        if (nmiss && at < (int)sizeof w->reason)
            at += snprintf(w->reason + at, sizeof w->reason - at, "; rank%s %s never wrote a tick", nmiss > 1 ? "s" : "", ml);
        if (at < (int)sizeof w->reason)
            at += snprintf(w->reason + at, sizeof w->reason - at, "; rank %d %s", worst, why);
        if (at < (int)sizeof w->reason) snprintf(w->reason + at, sizeof w->reason - at, "; no complete.json");
        return w->state = ZT_WS_CRASHED;
    }

    // Every tick is fresh: is the job making progress?
    long long step = w->hb.have ? w->hb.step : -1;
    if (step != w->step_seen) {
        w->step_since = w->step_seen == LLONG_MIN && w->hb.have && w->hb.time > 0 ? fmin(now, w->hb.time)
                        : w->step_seen == LLONG_MIN                            ? w->t_start
                                                                               : now;
        w->step_seen = step;
    }
    w->median_step_s = median_step_time(w);
    int first = step <= 0 || w->median_step_s <= 0;
    w->stall_bound_s = first ? fmax(w->o.min_stall, w->o.startup_grace)
                             : fmax(w->o.min_stall, w->o.stall_factor * w->median_step_s);
    w->stall_s = now - w->step_since;
    if (w->stall_s > w->stall_bound_s) {
        if (first)
            snprintf(w->reason, sizeof w->reason,
                     "no step completed in %.0f s (bound %.0f s = max(--min-stall %.0f, --startup-grace %.0f)) while "
                     "every liveness tick is fresh",
                     w->stall_s, w->stall_bound_s, w->o.min_stall, w->o.startup_grace);
        else
            snprintf(w->reason, sizeof w->reason,
                     "step %lld has not advanced for %.0f s (bound %.0f s = max(--min-stall %.0f, %.3g x median step "
                     "time %.3g s)) while every liveness tick is fresh",
                     step, w->stall_s, w->stall_bound_s, w->o.min_stall, w->o.stall_factor, w->median_step_s);
        power_signature(w, path, sizeof path);
        return w->state = ZT_WS_HUNG;
    }
    if (power_signature(w, w->reason, sizeof w->reason)) return w->state = ZT_WS_HUNG;
    return w->state = ZT_WS_RUNNING;
}

// ---- diagnosis ------------------------------------------------------------------
typedef struct {
    int incoll;
    zt_coll_op op;
    uint64_t seq;
    char label[ZT_FLIGHT_LABEL];
    char text[160];
    int *ranks, n, cap;
} diag_group;

static void diag_add(diag_group *g, int rank) {  // grows: world lists of world entries would be quadratic
    zt_int_push(&g->ranks, &g->n, &g->cap, rank);
}

static int group_cmp(const void *a, const void *b) {
    const diag_group *x = a, *y = b;
    if (x->n != y->n) return x->n - y->n;
    return x->ranks[0] - y->ranks[0];
}

// ---- the process-group mesh's groups (engine/mesh.h): RUN/groups/ID and RUN/nccl/groups/ID ----
// Under hybrid sharding most collectives run on a shard or replica group, whose rings are
// RUN/groups/ID/ranks/rank-NNNNN.flight by the rank inside the group; group.json says which
// world ranks those are. A ring whose process is not the one of the world rank's own ring
// (another job's, left in a reused run directory) is not read.
typedef struct {
    char dir[4200];
    char where[64];   // "RUN/groups/shard-1"
    char title[160];  // "shard group 1 (ranks 2-3)"
    int *ranks, n;
} watch_group;

typedef struct {
    int have;  // this world rank's position in a group: rec, in the group title
    zt_flight_rec rec;
    const watch_group *g;
} group_pos;

static void world_ring_owner(const char *base_dir, int rank, int *pid, char *host, size_t hn) {
    char path[4400];
    snprintf(path, sizeof path, "%s/ranks/rank-%05d.flight", base_dir, rank);
    zt_flight_hdr h;
    zt_flight_rec *recs = NULL;
    int n = 0;
    *pid = -1;
    host[0] = 0;
    if (zt_flight_read_rank(path, rank, &h, &recs, &n) == 0) {
        *pid = h.pid;
        snprintf(host, hn, "%s", h.host);
    }
    free(recs);
    zt_err_clear();
}

// Appends the groups under BASE/groups (BASE: the run directory, or its nccl/) to *gs.
static void load_groups(const char *run_dir, const char *sub, int world, watch_group **gs, int *ng, int *cap) {
    char base[4200], gdir[4300];
    snprintf(base, sizeof base, "%s%s%s", run_dir, sub[0] ? "/" : "", sub);
    snprintf(gdir, sizeof gdir, "%s/groups", base);
    DIR *d = opendir(gdir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4600];
        snprintf(path, sizeof path, "%s/%s/group.json", gdir, e->d_name);
        char *txt = zt_read_file(path, NULL);
        cJSON *j = txt ? cJSON_Parse(txt) : NULL;
        free(txt);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "title"), *rk = cJSON_GetObjectItemCaseSensitive(j, "ranks");
        const int n = cJSON_IsArray(rk) ? cJSON_GetArraySize(rk) : 0;
        if (!cJSON_IsString(t) || n < 1 || n > world) {
            cJSON_Delete(j);
            zt_err_clear();
            continue;
        }
        if (*ng == *cap) {
            const int ncap = *cap ? 2 * *cap : 8;
            watch_group *grown = realloc(*gs, (size_t)ncap * sizeof **gs);
            if (!grown) {
                cJSON_Delete(j);
                break;
            }
            *gs = grown;
            *cap = ncap;
        }
        watch_group *g = &(*gs)[*ng];
        memset(g, 0, sizeof *g);
        snprintf(g->dir, sizeof g->dir, "%.3900s/%.200s", gdir, e->d_name);
        snprintf(g->where, sizeof g->where, "RUN/%s%s%.40s", sub[0] ? "nccl/" : "", "groups/", e->d_name);
        snprintf(g->title, sizeof g->title, "%s", t->valuestring);
        g->ranks = zt_xmalloc((size_t)n * sizeof *g->ranks);
        int ok = 1;
        for (int i = 0; i < n; i++) {
            const cJSON *x = cJSON_GetArrayItem(rk, i);
            g->ranks[i] = cJSON_IsNumber(x) ? (int)x->valuedouble : -1;
            if (g->ranks[i] < 0 || g->ranks[i] >= world) ok = 0;
        }
        g->n = n;
        cJSON_Delete(j);
        if (ok)
            (*ng)++;
        else
            free(g->ranks);
    }
    closedir(d);
}

// For each world rank, the collective it is blocked on in one of its groups (a WAITING or
// TIMED_OUT record first, else the oldest in flight), read from rings of its own process.
static void group_positions(const char *run_dir, int world, const watch_group *gs, int ng, group_pos *pos) {
    for (int k = 0; k < ng; k++) {
        const watch_group *g = &gs[k];
        const int nccl = strncmp(g->where, "RUN/nccl/", 9) == 0;
        char base[4200];
        snprintf(base, sizeof base, "%s%s", run_dir, nccl ? "/nccl" : "");
        for (int i = 0; i < g->n; i++) {
            char path[4400], host[48];
            snprintf(path, sizeof path, "%s/ranks/rank-%05d.flight", g->dir, i);
            zt_flight_hdr h;
            zt_flight_rec *recs = NULL;
            int n = 0, pid;
            if (zt_flight_read_rank(path, i, &h, &recs, &n) != 0) {
                zt_err_clear();
                continue;
            }
            world_ring_owner(base, g->ranks[i], &pid, host, sizeof host);
            const zt_flight_rec *cur = zt_flight_current(recs, n);
            if (cur && pid == h.pid && !strcmp(host, h.host)) {
                group_pos *p = &pos[g->ranks[i]];
                const int blocked = cur->state == ZT_FL_WAITING || cur->state == ZT_FL_TIMED_OUT;
                const int had_blocked = p->have && (p->rec.state == ZT_FL_WAITING || p->rec.state == ZT_FL_TIMED_OUT);
                if (!p->have || (blocked && !had_blocked)) {
                    p->have = 1;
                    p->rec = *cur;
                    p->g = g;
                }
            }
            free(recs);
        }
    }
}


// Where each rank's flight recorder says it is, grouped by position.
typedef struct {
    diag_group *g;
    int ng, nrec;               // groups; recorders read
    int *aborted, nab;          // ranks whose recorder says aborted at the deadline
    int nrefused;               // recorders present but refused
    char refused[1200];         // the first refused recorder's error, for the diagnosis
} positions;

static void read_positions(const zt_watch *w, int world, const group_pos *gpos, positions *ps) {
    ps->g = zt_xcalloc((size_t)world + 2, sizeof *ps->g);
    ps->aborted = zt_xmalloc((size_t)world * sizeof(int));
    for (int r = 0; r < world; r++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.flight", w->run_dir, r);
        zt_flight_hdr h;
        zt_flight_rec *recs = NULL;
        int n = 0;
        diag_group key = {0};
        if (zt_flight_read_rank(path, r, &h, &recs, &n) < 0) {
            // absent: the rank never started its process group; present: a file no writer leaves
            const int present = access(path, F_OK) == 0;
            snprintf(key.text, sizeof key.text, present ? "flight recorder refused" : "no flight recorder");
            if (present && !ps->nrefused++) snprintf(ps->refused, sizeof ps->refused, "%s", zt_errmsg());
        } else {
            ps->nrec++;
            if (h.status == ZT_FL_ABORTED) ps->aborted[ps->nab++] = r;
            const zt_flight_rec *cur = zt_flight_current(recs, n);
            // A rank blocked in one of its mesh groups (a shard group's all-gather, the replicas'
            // all-reduce) is named there, with the group, unless the world's comm holds it.
            const group_pos *gp = &gpos[r];
            const int world_blocked = cur && (cur->state == ZT_FL_WAITING || cur->state == ZT_FL_TIMED_OUT);
            if (gp->have && !world_blocked &&
                (!cur || gp->rec.state == ZT_FL_WAITING || gp->rec.state == ZT_FL_TIMED_OUT)) {
                key.incoll = 1, key.op = gp->rec.op, key.seq = gp->rec.seq;
                memcpy(key.label, gp->rec.label, sizeof key.label);
                snprintf(key.text, sizeof key.text, "%.90s: %s(\"%s\") seq %llu", gp->g->title, zt_op_name(gp->rec.op),
                         gp->rec.label, (unsigned long long)gp->rec.seq);
            } else if (cur) {
                key.incoll = 1, key.op = cur->op, key.seq = cur->seq;
                memcpy(key.label, cur->label, sizeof key.label);
                snprintf(key.text, sizeof key.text, "%s(\"%s\") seq %llu", zt_op_name(cur->op), cur->label,
                         (unsigned long long)cur->seq);
            } else {
                snprintf(key.text, sizeof key.text, "in no collective");
            }
        }
        free(recs);
        int i = 0;
        while (i < ps->ng && strcmp(ps->g[i].text, key.text) != 0) i++;
        if (i == ps->ng) ps->g[ps->ng++] = key;
        diag_add(&ps->g[i], r);
    }
    qsort(ps->g, (size_t)ps->ng, sizeof *ps->g, group_cmp);
}

// The groups into the diagnosis ("ranks 0-2: all_reduce(...) seq 7; rank 3: ..."); counts the ranks
// in no collective and the distinct collectives (op and call site) the others are in.
static size_t list_groups(zt_watch *w, const positions *ps, int *nidle, int *ndistinct_op) {
    size_t at = 0;
    for (int i = 0; i < ps->ng; i++) {
        const diag_group *g = ps->g;
        char rl[512];
        zt_rank_list(g[i].ranks, g[i].n, rl, sizeof rl);
        if (at < sizeof w->diagnosis)
            at += (size_t)snprintf(w->diagnosis + at, sizeof w->diagnosis - at, "%s%s %s: %s", i ? "; " : "",
                                   g[i].n > 1 ? "ranks" : "rank", rl, g[i].text);
        if (g[i].incoll) {
            int same = 0;
            for (int j = 0; j < i; j++)
                if (g[j].incoll && g[j].op == g[i].op && !strcmp(g[j].label, g[i].label)) same = 1;
            *ndistinct_op += !same;
        } else {
            *nidle += g[i].n;
        }
    }
    return at;
}

// Ranks whose liveness tick stopped: the first of them to stop explains the others'
// waits, whatever collective each was in (a kill -9, a crash, a SIGSTOP). The lead rank
// (-1: none) and its verdict in buf.
static int stale_verdict(const zt_watch *w, int world, char *buf, size_t n) {
    double lim = zt_watch_stale_after(&w->o);
    int lead = -1, nstale = 0, *stale = zt_xmalloc((size_t)world * sizeof(int));
    for (int r = 0; r < world && r < w->ranks_cap; r++)
        if (w->ranks[r].seen && is_stale(&w->ranks[r], lim)) {
            stale[nstale++] = r;
            if (lead < 0 || w->ranks[r].value < w->ranks[lead].value) lead = r;
        }
    buf[0] = 0;
    if (lead >= 0) {
        char why[512], rl[256];
        probe_rank(&w->ranks[lead], why, sizeof why);
        size_t sv = (size_t)snprintf(buf, n, " \xe2\x80\x94 rank %d %s; its liveness tick "
                                     "is %.0f s old", lead, why, w->ranks[lead].age);
        if (nstale > 1 && sv < n) {
            zt_rank_list(stale, nstale, rl, sizeof rl);
            double later = 0;
            for (int i = 0; i < nstale; i++) later = fmax(later, w->ranks[stale[i]].value - w->ranks[lead].value);
            sv += (size_t)snprintf(buf + sv, n - sv,
                                   " (ranks %s stopped ticking, the others up to %.1f s after it)", rl, later);
        }
        if (sv < n)
            snprintf(buf + sv, n - sv,
                     ": the positions are where each rank was when the ticks stopped, not a program-order bug");
    }
    free(stale);
    return lead;
}

// A job its own collective deadline aborted (heartbeat.json "aborted", stopped_by_rank A): every
// process is gone, so every tick stopped within the abort's grace and the oldest names no one (a
// launcher even resumes a stopped process to end it). What tells is which ranks had stopped ticking
// well before the abort: a stopped process, or one hung with its tick thread, is the rank the others
// waited for. A recorded, A's own view at the abort (ranks_not_ticking); else the ticks' times
// against the abort's (state_time). 1 and the verdict in buf when some rank had; 0 when none had
// (the flight recorders' verdict applies: a mismatch, a rank outside collectives, the transport).
static int abort_verdict(const zt_watch *w, int world, char *buf, size_t n) {
    const int A = w->hb.stopped_by_rank;
    char who[32] = "a rank";
    if (A >= 0) snprintf(who, sizeof who, "rank %d", A);
    if (w->hb.not_ticking_n > 0) {
        snprintf(buf, n, " \xe2\x80\x94 %s hit the collective deadline and aborted the job; rank%s %s had stopped "
                 "ticking by then (a tick older than %.3g s: a process stopped, or hung with its tick thread): the "
                 "rank%s the others waited for", who, w->hb.not_ticking_n > 1 ? "s" : "", w->hb.not_ticking,
                 w->hb.ticks_older_than_s, w->hb.not_ticking_n > 1 ? "s" : "");
        return 1;
    }
    // A tick is rewritten every alive interval: one more than two intervals older than the abort stopped before it
    const double slack = 2 * w->o.alive_interval + 1, t_abort = w->hb.state_time;
    if (w->hb.not_ticking_n == 0 || !(t_abort > 0)) return 0;
    int *quiet = zt_xmalloc((size_t)(world > 0 ? world : 1) * sizeof(int)), nq = 0;
    double most = 0;
    for (int r = 0; r < world && r < w->ranks_cap; r++)
        if (w->ranks[r].seen && t_abort - w->ranks[r].value > slack) {
            quiet[nq++] = r;
            most = fmax(most, t_abort - w->ranks[r].value);
        }
    char rl[256];
    if (nq) {
        zt_rank_list(quiet, nq, rl, sizeof rl);
        snprintf(buf, n, " \xe2\x80\x94 %s hit the collective deadline and aborted the job; rank%s %s had stopped "
                 "ticking before it (up to %.1f s before the abort: a process stopped, or hung with its tick thread): "
                 "the rank%s the others waited for", who, nq > 1 ? "s" : "", rl, most, nq > 1 ? "s" : "");
    }
    free(quiet);
    return nq > 0;
}

// Details: each rank's tick, then the flight recorder summary (and the NCCL comm's).
static void write_details(const zt_watch *w, int world, int nrec, const watch_group *mg, int nmg,
                          const group_pos *gpos, FILE *d) {
    for (int r = 0; r < world && r < w->ranks_cap; r++) {
        const zt_watch_rank *k = &w->ranks[r];
        if (k->seen)
            fprintf(d, "  rank %d: tick %.0f s ago (host %s, pid %d, step %lld, %s)\n", r, k->age, k->host, k->pid,
                    k->step, k->state);
        else
            fprintf(d, "  rank %d: no liveness tick\n", r);
    }
    if (nrec) zt_flight_summarize_dir(w->run_dir, world, d, "  ");
    // --device cuda: the NCCL comm (parameters, gradients, the step all-reduce) keeps its
    // own rings in RUN/nccl/ranks; during a step that is where a stuck rank shows.
    char ndir[4200], nfile[4300];
    snprintf(ndir, sizeof ndir, "%s/nccl", w->run_dir);
    snprintf(nfile, sizeof nfile, "%s/ranks/rank-00000.flight", ndir);
    if (access(nfile, R_OK) == 0) {
        fprintf(d, "  NCCL comm (RUN/nccl/ranks):\n");
        zt_flight_summarize_dir(ndir, world, d, "  ");
    }
    // The mesh's groups some rank is in a collective of (at most 16; by world rank).
    int shown = 0, more = 0;
    for (int k = 0; k < nmg; k++) {
        int busy = 0;
        for (int i = 0; i < mg[k].n; i++) busy |= gpos[mg[k].ranks[i]].have && gpos[mg[k].ranks[i]].g == &mg[k];
        if (!busy) continue;
        if (shown++ >= 16) {
            more++;
            continue;
        }
        fprintf(d, "  %s, %s:\n", mg[k].title, mg[k].where);
        zt_flight_summarize_group(mg[k].dir, mg[k].n, mg[k].ranks, d, "  ");
    }
    if (more) fprintf(d, "  ... and %d more group%s with collectives in flight\n", more, more > 1 ? "s" : "");
}

void zt_watch_diagnose(zt_watch *w, double now) {
    int world = w->world;
    int dense, nfiles;
    if (world <= 0) world = scan_ranks(w->run_dir, &dense, &nfiles) + 1;
    w->diagnosis[0] = 0;
    free(w->details);
    w->details = NULL;
    size_t dlen = 0;
    FILE *d = open_memstream(&w->details, &dlen);
    if (world <= 0) {
        snprintf(w->diagnosis, sizeof w->diagnosis, "no ranks found in %s/ranks", w->run_dir);
        fclose(d);
        return;
    }
    watch_group *mg = NULL;
    int nmg = 0, mcap = 0;
    load_groups(w->run_dir, "", world, &mg, &nmg, &mcap);
    load_groups(w->run_dir, "nccl", world, &mg, &nmg, &mcap);
    group_pos *gpos = zt_xcalloc((size_t)world, sizeof *gpos);
    group_positions(w->run_dir, world, mg, nmg, gpos);
    positions ps = {0};
    read_positions(w, world, gpos, &ps);
    int nidle = 0, ndistinct_op = 0;
    size_t at = list_groups(w, &ps, &nidle, &ndistinct_op);
    int ngroups_coll = 0;
    for (int i = 0; i < ps.ng; i++) ngroups_coll += ps.g[i].incoll;
    char stale_why[1024];
    const int lead = stale_verdict(w, world, stale_why, sizeof stale_why);
    char stopped_verdict[256];
    snprintf(stopped_verdict, sizeof stopped_verdict,
             " \xe2\x80\x94 the run stopped cleanly on a signal at step %lld after committing a checkpoint: nothing is "
             "stuck", w->hb.step);
    // after a deadline abort every tick stopped with the job: the oldest says nothing (abort_verdict)
    char aborted_why[1024];
    const int was_aborted = w->hb.have && !strcmp(w->hb.state, "aborted");
    const int named = was_aborted && abort_verdict(w, world, aborted_why, sizeof aborted_why);
    const char *verdict;
    if (named)
        verdict = aborted_why;
    else if (w->state == ZT_WS_STOPPED)
        verdict = stopped_verdict;
    else if (w->state == ZT_WS_FAILED)
        verdict = " \xe2\x80\x94 the trainer reported the failure itself (its error output says why); these are the "
                  "positions it left";
    else if (lead >= 0 && !was_aborted)
        verdict = stale_why;
    else if (ps.nrec == 0)
        verdict = " \xe2\x80\x94 no flight recorders: the job died before its process group started, or RUN/ranks is not shared";
    else if (ngroups_coll > 1)
        verdict = ndistinct_op > 1 ? " \xe2\x80\x94 collective mismatch"
                                   : " \xe2\x80\x94 collective mismatch (same call site at different sequence numbers)";
    else if (ngroups_coll == 1 && nidle)
        verdict = " \xe2\x80\x94 the ranks in no collective are stuck outside collectives (compute, I/O, data) "
                  "while the others wait for them";
    else if (ngroups_coll == 1)
        verdict = " \xe2\x80\x94 every rank is in the same collective: the transport is stuck (network, NCCL), not "
                  "the program order";
    else
        verdict = " \xe2\x80\x94 no rank is in a collective: stuck in compute, I/O or data loading, or exited";
    if (at < sizeof w->diagnosis) at += (size_t)snprintf(w->diagnosis + at, sizeof w->diagnosis - at, "%s", verdict);
    if (ps.nab && at < sizeof w->diagnosis) {
        char rl[256];
        zt_rank_list(ps.aborted, ps.nab, rl, sizeof rl);
        at += (size_t)snprintf(w->diagnosis + at, sizeof w->diagnosis - at,
                               " (rank%s %s aborted at the collective deadline)", ps.nab > 1 ? "s" : "", rl);
    }
    if (ps.nrefused && at < sizeof w->diagnosis)
        snprintf(w->diagnosis + at, sizeof w->diagnosis - at, "; %d flight recorder%s refused: %s%s", ps.nrefused,
                 ps.nrefused > 1 ? "s" : "", ps.refused, ps.nrefused > 1 ? " (the others: details)" : "");
    write_details(w, world, ps.nrec, mg, nmg, gpos, d);
    fclose(d);
    for (int k = 0; k < nmg; k++) free(mg[k].ranks);
    free(mg);
    free(gpos);
    (void)now;
    for (int i = 0; i < ps.ng; i++) free(ps.g[i].ranks);
    free(ps.g);
    free(ps.aborted);
}

// ---- output -----------------------------------------------------------------------
int zt_watch_write_json(const zt_watch *w, double now) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "zerotrain-watch");
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "state", zt_watch_state_name(w->state));
    cJSON_AddNumberToObject(o, "exit_code", zt_watch_exit_code(w->state));
    cJSON_AddStringToObject(o, "reason", w->reason);
    cJSON_AddStringToObject(o, "diagnosis", w->diagnosis);
    cJSON_AddNumberToObject(o, "time", now);
    cJSON_AddStringToObject(o, "run_dir", w->run_dir);
    if (w->hb.have) {
        cJSON_AddStringToObject(o, "run_id", w->hb.run_id);
        cJSON_AddNumberToObject(o, "step", (double)w->hb.step);
        cJSON_AddNumberToObject(o, "total_steps", (double)w->hb.total_steps);
        cJSON_AddNumberToObject(o, "heartbeat_age_s", now - w->hb.time);
        if (w->hb.ckpt_writing > 0) cJSON_AddNumberToObject(o, "checkpoint_writing_step", (double)w->hb.ckpt_writing);
    }
    cJSON_AddNumberToObject(o, "world", w->world);
    cJSON_AddNumberToObject(o, "stall_s", w->stall_s);
    cJSON_AddNumberToObject(o, "stall_bound_s", w->stall_bound_s);
    cJSON_AddNumberToObject(o, "median_step_s", w->median_step_s);
    cJSON_AddNumberToObject(o, "stale_after_s", zt_watch_stale_after(&w->o));
    cJSON_AddStringToObject(o, "power_state", w->power_n ? zt_gpu_state_name(w->power_state) : "none");
    cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
    for (int r = 0; r < w->world && r < w->ranks_cap; r++) {
        const zt_watch_rank *k = &w->ranks[r];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "rank", r);
        cJSON_AddBoolToObject(x, "tick_seen", k->seen);
        cJSON_AddNumberToObject(x, "tick_age_s", k->age);
        cJSON_AddStringToObject(x, "host", k->host);
        cJSON_AddNumberToObject(x, "pid", k->pid);
        cJSON_AddNumberToObject(x, "step", (double)k->step);
        cJSON_AddStringToObject(x, "state", k->state);
        cJSON_AddItemToArray(ranks, x);
    }
    cJSON *det = cJSON_AddArrayToObject(o, "details");
    if (w->details) {
        char *copy = strdup(w->details);
        for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            cJSON_AddItemToArray(det, cJSON_CreateString(l + strspn(l, " ")));
        free(copy);
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    char path[4200];
    snprintf(path, sizeof path, "%s/watch.json", w->run_dir);
    size_t n = strlen(text);
    char *buf = zt_xmalloc(n + 2);
    memcpy(buf, text, n);
    buf[n] = '\n';
    cJSON_free(text);
    int rc = zt_write_file_atomic(path, buf, n + 1);
    free(buf);
    return rc;
}

void zt_watch_status_line(const zt_watch *w, double now, char *buf, size_t n) {
    char d1[32], d2[32];
    if (w->state == ZT_WS_STARTING) {
        snprintf(buf, n, "STARTING: waiting for %s/heartbeat.json or ranks/*.alive (%s of %s startup grace)",
                 w->run_dir, zt_fmt_dur(now - w->t_start, d1, sizeof d1),
                 zt_fmt_dur(w->o.startup_grace, d2, sizeof d2));
        return;
    }
    size_t at = (size_t)snprintf(buf, n, "%s", zt_watch_state_name(w->state));
    const zt_watch_hb *h = &w->hb;
#define ADD(...)                                                               \
    do {                                                                       \
        if (at < n) at += (size_t)snprintf(buf + at, n - at, __VA_ARGS__);    \
    } while (0)
    if (h->have) {
        ADD(" step %lld", h->step);
        if (h->total_steps > 0) ADD("/%lld (%.1f%%)", h->total_steps, 100.0 * (double)h->step / (double)h->total_steps);
        if (h->tok_per_s >= 1000)
            ADD(" | %.1fk tok/s", h->tok_per_s / 1000);
        else
            ADD(" | %.0f tok/s", h->tok_per_s);
        double per = w->median_step_s > 0 ? w->median_step_s : h->step_time_s;
        if (h->total_steps > 0 && per > 0)
            ADD(" | ETA %s", zt_fmt_dur((double)(h->total_steps - h->step) * per, d1, sizeof d1));
        else
            ADD(" | ETA ?");
        if (isfinite(h->loss)) ADD(" | loss %.4f", h->loss);
        if (h->ckpt_writing > 0)
            ADD(" | checkpoint of step %lld writing in the background (%s at the last heartbeat)", h->ckpt_writing,
                zt_fmt_dur(h->ckpt_writing_s, d1, sizeof d1));
        ADD(" | heartbeat %s ago", zt_fmt_dur(fmax(0, now - h->time), d1, sizeof d1));
    } else {
        ADD(" | no heartbeat yet (first step running)");
    }
    double oldest = 0;
    int fresh = 0;
    for (int r = 0; r < w->world && r < w->ranks_cap; r++) {
        oldest = fmax(oldest, w->ranks[r].age);
        fresh += w->ranks[r].age <= zt_watch_stale_after(&w->o);
    }
    ADD(" | ticks %d/%d fresh (oldest %s)", fresh, w->world, zt_fmt_dur(oldest, d1, sizeof d1));
    if (w->power_n) ADD(" | power %s", zt_gpu_state_name(w->power_state));
#undef ADD
}
