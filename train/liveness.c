// The liveness tick thread and the heartbeat file (formats in docs/operations.md).
#define _GNU_SOURCE
#include "train/liveness.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/out_file.h"

struct zt_liveness {
    char path[4200];
    int rank;
    double interval_s;
    atomic_llong step;
    atomic_int stop;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

// tmp + rename: readers see the old or the new content, never a torn one; a link or special
// file at the name is refused (base/out_file.h).
static int replace_file(const char *path, const char *text) { return zt_replace_file(path, text, strlen(text), 0); }

static void tick(zt_liveness *l, const char *state) {
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    char text[512];
    snprintf(text, sizeof text,
             "{\"rank\": %d, \"pid\": %d, \"host\": \"%s\", \"time\": %.3f, \"step\": %lld, \"state\": \"%s\"}\n",
             l->rank, (int)getpid(), host, zt_wall_now(), (long long)atomic_load(&l->step), state);
    if (replace_file(l->path, text) != 0) fprintf(stderr, "zerotrain: warning: rank %d: %s\n", l->rank, zt_errmsg());
}

static void *tick_main(void *arg) {
    zt_liveness *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&l->stop)) {
        pthread_mutex_unlock(&l->mu);
        tick(l, "running");
        pthread_mutex_lock(&l->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = ts.tv_sec + 1e-9 * ts.tv_nsec + l->interval_s;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        if (!atomic_load(&l->stop)) pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

zt_liveness *zt_liveness_start(const char *run_dir, int rank, double interval_s) {
    zt_liveness *l = zt_xcalloc(1, sizeof *l);
    snprintf(l->path, sizeof l->path, "%s/ranks/rank-%05d.alive", run_dir, rank);
    l->rank = rank;
    l->interval_s = interval_s > 0 ? interval_s : 5.0;
    atomic_init(&l->step, 0);
    atomic_init(&l->stop, 0);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->thread, NULL, tick_main, l) != 0) {
        free(l);
        zt_err("rank %d: cannot start the liveness thread", rank);
        return NULL;
    }
    return l;
}

void zt_liveness_set_step(zt_liveness *l, int64_t step) {
    if (l) atomic_store(&l->step, step);
}

void zt_liveness_stop(zt_liveness *l, const char *state) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->stop, 1);
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    tick(l, state);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

// JSON has no NaN or Infinity: a value that is not finite is written as null.
static const char *num(char *buf, size_t n, const char *fmt, double v) {
    if (!isfinite(v)) snprintf(buf, n, "null");
    else snprintf(buf, n, fmt, v);
    return buf;
}

int zt_heartbeat_write(const char *run_dir, const zt_heartbeat *h) {
    char path[4200], text[4800], b[8][64];
    snprintf(path, sizeof path, "%s/heartbeat.json", run_dir);
    snprintf(text, sizeof text,
             "{\"run_id\": \"%s\", \"state\": \"%s\", \"step\": %lld, \"total_steps\": %lld, \"epoch\": %lld, "
             "\"tokens\": %lld, \"time\": %.3f, \"elapsed_s\": %s, \"step_time_s\": %s, \"tok_per_s\": %s, "
             "\"loss\": %s, \"world_size\": %d, \"gpu_hours\": %s, \"gpu_hours_per_epoch\": %s, "
             "\"gpu_hours_at_risk\": %s",
             h->run_id, h->state, (long long)h->step, (long long)h->total_steps, (long long)h->epoch,
             (long long)h->tokens, zt_wall_now(), num(b[0], 64, "%.3f", h->elapsed_s),
             num(b[1], 64, "%.6f", h->step_time_s), num(b[2], 64, "%.1f", h->tok_per_s), num(b[3], 64, "%.6f", h->loss),
             h->world_size, num(b[4], 64, "%.6f", h->gpu_hours), num(b[5], 64, "%.6f", h->gpu_hours_per_epoch),
             num(b[6], 64, "%.6f", h->gpu_hours_at_risk));
    if (h->ckpt_writing > 0) {
        size_t n = strlen(text);
        snprintf(text + n, sizeof text - n, ", \"checkpoint_writing\": {\"step\": %lld, \"for_s\": %s}",
                 (long long)h->ckpt_writing, num(b[7], 64, "%.3f", h->ckpt_writing_s));
    }
    if (h->records_lost > 0) {
        size_t n = strlen(text);
        snprintf(text + n, sizeof text - n, ", \"metrics_records_lost\": %lld", (long long)h->records_lost);
    }
    if (h->error && h->error[0]) {  // the failure, for the watcher and the report (JSON-escaped, cut at 2000 bytes)
        size_t n = strlen(text);
        n += (size_t)snprintf(text + n, sizeof text - n, ", \"error\": \"");
        for (const unsigned char *c = (const unsigned char *)h->error; *c && n + 8 < sizeof text - 8 &&
                                                                       c - (const unsigned char *)h->error < 2000; c++) {
            if (*c == '"' || *c == '\\') text[n++] = '\\', text[n++] = (char)*c;
            else if (*c < 0x20) n += (size_t)snprintf(text + n, sizeof text - n, "\\u%04x", *c);
            else text[n++] = (char)*c;
        }
        text[n] = 0;
        snprintf(text + n, sizeof text - n, "\"");
    }
    const size_t n = strlen(text);
    snprintf(text + n, sizeof text - n, "}\n");
    return replace_file(path, text);
}

int zt_heartbeat_mark(const char *run_dir, const zt_heartbeat_end *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/heartbeat.json", run_dir);
    char *text = zt_read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    zt_err_clear();
    if (!cJSON_IsObject(j)) {  // none yet (or unreadable): what the watcher needs to read it
        cJSON_Delete(j);
        j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "run_id", e->run_id ? e->run_id : "");
        cJSON_AddNumberToObject(j, "step", 0);
        cJSON_AddNumberToObject(j, "time", zt_wall_now());
        if (e->world > 0) cJSON_AddNumberToObject(j, "world_size", e->world);
    }
    // The first record of an ending stays (the first error is the one reported): a second rank
    // aborting at its own deadline moments later, or a stopped rank resumed after the job ended.
    const cJSON *was = cJSON_GetObjectItemCaseSensitive(j, "state");
    if (cJSON_IsString(was) && !strcmp(was->valuestring, e->state)) {
        cJSON_Delete(j);
        return 0;
    }
    // "time" stays the last step's (what the watcher times the steps by); "state_time" is this record's
    static const char *const keys[] = {"state", "state_time", "error", "stopped_by_rank", "ranks_not_ticking",
                                       "ticks_older_than_s"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) cJSON_DeleteItemFromObjectCaseSensitive(j, keys[i]);
    cJSON_AddStringToObject(j, "state", e->state);
    cJSON_AddNumberToObject(j, "state_time", zt_wall_now());
    if (e->error && *e->error) cJSON_AddStringToObject(j, "error", e->error);
    if (e->stopped_by_rank >= 0) cJSON_AddNumberToObject(j, "stopped_by_rank", e->stopped_by_rank);
    if (e->not_ticking) {
        cJSON_AddItemToObject(j, "ranks_not_ticking", cJSON_CreateIntArray(e->not_ticking, e->n_not_ticking));
        cJSON_AddNumberToObject(j, "ticks_older_than_s", e->ticks_older_than_s);
    }
    // one line in zt_heartbeat_write's layout ("key": value, ...), which readers of the file may grep
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (!f) zt_fatal("out of host memory for %s", path);
    fputc('{', f);
    for (const cJSON *m = j->child; m; m = m->next) {
        cJSON *key = cJSON_CreateString(m->string ? m->string : "");  // escaped as JSON text
        char *v = cJSON_PrintUnformatted(m), *k = key ? cJSON_PrintUnformatted(key) : NULL;
        fprintf(f, "%s%s: %s", m == j->child ? "" : ", ", k ? k : "\"\"", v ? v : "null");
        cJSON_free(v);
        cJSON_free(k);
        cJSON_Delete(key);
    }
    fputs("}\n", f);
    fclose(f);
    cJSON_Delete(j);
    const int rc = replace_file(path, line);
    free(line);
    return rc;
}

int zt_liveness_not_ticking(const char *run_dir, int world, double older_than_s, int *out) {
    const double now = zt_wall_now();
    int n = 0;
    for (int r = 0; r < world; r++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.alive", run_dir, r);
        char *text = zt_read_file(path, NULL);
        cJSON *j = text ? cJSON_Parse(text) : NULL;
        free(text);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "time");
        if (cJSON_IsNumber(t) && now - t->valuedouble > older_than_s) out[n++] = r;
        cJSON_Delete(j);
    }
    zt_err_clear();
    return n;
}
