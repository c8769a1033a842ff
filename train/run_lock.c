// The run-directory lock (train/run_lock.h). flock(2) rather than a lock file whose
// existence is the lock: existence outlives a crashed holder and needs a staleness guess
// (a pid on another node cannot be checked); a flock dies with its holder.
#define _GNU_SOURCE
#include "train/run_lock.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"

struct zt_run_lock {
    int fd;
    char path[4200];
    char host[256];
    char since[32];
    double since_unix;
};

static int write_holder(zt_run_lock *l, const char *run_id) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "host", l->host);
    cJSON_AddNumberToObject(j, "pid", (double)getpid());
    cJSON_AddStringToObject(j, "run_id", run_id ? run_id : "");
    cJSON_AddStringToObject(j, "since", l->since);
    cJSON_AddNumberToObject(j, "since_unix", l->since_unix);
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    const size_t n = strlen(text);
    int rc = 0;
    if (ftruncate(l->fd, 0) != 0 || pwrite(l->fd, text, n, 0) != (ssize_t)n || pwrite(l->fd, "\n", 1, (off_t)n) != 1)
        rc = zt_err("%s: cannot record the lock's holder: %s", l->path, strerror(errno));
    free(text);
    return rc;
}

// "host node3, pid 4711, run id 20261201T...-ab12cd, since 2026-12-01T21:04:05Z (12 min ago)"
static void describe_holder(int fd, char *out, size_t n) {
    char buf[2048];
    const ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    buf[k > 0 ? k : 0] = 0;
    cJSON *j = cJSON_Parse(buf);
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(j, "host"), *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "run_id"), *since = cJSON_GetObjectItemCaseSensitive(j, "since");
    const cJSON *su = cJSON_GetObjectItemCaseSensitive(j, "since_unix");
    if (!cJSON_IsString(host) || !cJSON_IsNumber(pid)) {
        snprintf(out, n, "a job that has not recorded itself yet");
    } else {
        char ago[48] = "";
        if (cJSON_IsNumber(su)) {
            const double s = zt_wall_now() - su->valuedouble;
            if (s >= 0 && s < 120) snprintf(ago, sizeof ago, " (%.0f s ago)", s);
            else if (s >= 0) snprintf(ago, sizeof ago, " (%.0f min ago)", s / 60);
        }
        snprintf(out, n, "host %.200s, pid %lld, run id %.80s, since %.40s%s", host->valuestring,
                 (long long)pid->valuedouble, cJSON_IsString(id) && id->valuestring[0] ? id->valuestring : "(not yet known)",
                 cJSON_IsString(since) ? since->valuestring : "?", ago);
    }
    cJSON_Delete(j);
}

int zt_run_lock_acquire(const char *run_dir, zt_run_lock **out) {
    *out = NULL;
    if (zt_mkdirs(run_dir) != 0) return -1;
    zt_run_lock *l = zt_xcalloc(1, sizeof *l);
    snprintf(l->path, sizeof l->path, "%s/lock", run_dir);
    l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (l->fd < 0) {
        const int e = errno;
        free(l);
        return zt_err("%s: cannot open the run directory's lock file: %s", run_dir, strerror(e));
    }
    if (flock(l->fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        int rc;
        if (e == EWOULDBLOCK) {
            char who[600];
            describe_holder(l->fd, who, sizeof who);
            rc = zt_err("%s is in use by another job (%s; %s is locked). Two jobs on one run directory would mix "
                        "their checkpoints and logs: wait for that job to end, stop it (SIGUSR1 to its ranks saves "
                        "and exits), or pick another --run-dir",
                        run_dir, who, l->path);
        } else {
            rc = zt_err("%s: cannot lock (flock: %s): this file system does not support locks; mount it with lock "
                        "support (Lustre: -o flock; NFS: without nolock) or, if you make sure by other means that one "
                        "job at a time uses this run directory, pass --no-run-lock",
                        l->path, strerror(e));
        }
        close(l->fd);
        free(l);
        return rc;
    }
    gethostname(l->host, sizeof l->host - 1);
    l->since_unix = zt_wall_now();
    const time_t now = (time_t)l->since_unix;
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(l->since, sizeof l->since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (write_holder(l, NULL) != 0) {
        zt_run_lock_release(l);
        return -1;
    }
    *out = l;
    return 0;
}

int zt_run_lock_set_run_id(zt_run_lock *l, const char *run_id) { return l ? write_holder(l, run_id) : 0; }

void zt_run_lock_release(zt_run_lock *l) {
    if (!l) return;
    flock(l->fd, LOCK_UN);
    close(l->fd);
    free(l);
}
