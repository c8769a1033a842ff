// The run-directory lock (train/run_lock.h). flock(2) rather than a lock file whose
// existence is the lock: existence outlives a crashed holder and needs a staleness guess
// (a pid on another node cannot be checked); a flock dies with its holder. The directory is
// flock'ed as well as the file, so that removing the file does not free the run.
#define _GNU_SOURCE
#include "train/run_lock.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/env.h"
#include "base/out_file.h"

struct zt_run_lock {
    int fd;
    int dir_fd;          // RUN itself, flock'ed too (-1: the file system cannot lock a directory)
    int warned;          // the lock file was found removed (said once)
    char run_dir[4200];
    char path[4200];
    char host[256];
    char run_id[80];     // as recorded (zt_run_lock_set_run_id)
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

// Another job holds RUN: its refusal, naming the holder as RUN/lock describes it (fd: that file,
// or -1 when it is gone: removed while the holder runs).
static int refuse_held(const char *run_dir, const char *path, int fd) {
    char who[600];
    if (fd >= 0) describe_holder(fd, who, sizeof who);
    else snprintf(who, sizeof who, "a job whose lock file %.400s is missing: removed while it runs, or not yet "
                                   "written by a job starting", path);
    return zt_err("%s is in use by another job (%s; %s is locked). Two jobs on one run directory would mix "
                  "their checkpoints and logs: wait for that job to end, stop it (SIGUSR1 to its ranks saves "
                  "and exits), or pick another --run-dir",
                  run_dir, who, fd >= 0 ? path : run_dir);
}

static void free_lock(zt_run_lock *l) {
    if (l->fd >= 0) close(l->fd);
    if (l->dir_fd >= 0) close(l->dir_fd);
    free(l);
}

int zt_run_lock_acquire(const char *run_dir, zt_run_lock **out) {
    *out = NULL;
    if (zt_mkdirs(run_dir) != 0) return -1;
    zt_run_lock *l = zt_xcalloc(1, sizeof *l);
    l->fd = l->dir_fd = -1;
    snprintf(l->run_dir, sizeof l->run_dir, "%s", run_dir);
    snprintf(l->path, sizeof l->path, "%s/lock", run_dir);
    // The directory itself is locked first: removing RUN/lock (rm, a cleanup script) then frees
    // nothing, and a second job is refused while this one runs. A file system that cannot lock a
    // directory (NFS: flock needs a file open for writing) is left to the file's lock, and the
    // holder checks at every commit that RUN/lock is still its file (zt_run_lock_verify).
    if (!zt_env_on(ZT_ENV_DEBUG_RUN_LOCK_FILE_ONLY)) {  // tests: that fallback
        l->dir_fd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (l->dir_fd >= 0 && flock(l->dir_fd, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            close(l->dir_fd);
            l->dir_fd = -1;
            if (e == EWOULDBLOCK) {
                const int fd = open(l->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                const int rc = refuse_held(run_dir, l->path, fd);
                if (fd >= 0) close(fd);
                free_lock(l);
                return rc;
            }
        }
    }
    // A link (or anything but a regular file) at RUN/lock is refused, never written through.
    l->fd = zt_out_open(l->path, ZT_OUT_KEEP);
    if (l->fd < 0) {
        free_lock(l);
        return zt_err_prefix("the run directory's lock file");
    }
    if (flock(l->fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        int rc;
        if (e == EWOULDBLOCK) {
            rc = refuse_held(run_dir, l->path, l->fd);
        } else {
            rc = zt_err("%s: cannot lock (flock: %s): this file system does not support locks; mount it with lock "
                        "support (Lustre: -o flock; NFS: without nolock) or, if you make sure by other means that one "
                        "job at a time uses this run directory, pass --no-run-lock",
                        l->path, strerror(e));
        }
        free_lock(l);
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

int zt_run_lock_verify(zt_run_lock *l) {
    if (!l) return 0;
    struct stat held, now;
    const int same = fstat(l->fd, &held) == 0 && lstat(l->path, &now) == 0 && held.st_dev == now.st_dev &&
                     held.st_ino == now.st_ino;
    if (same) return 0;
    if (l->dir_fd >= 0) {
        // RUN itself is still locked, so no other job is in: the file is written again, so that
        // a job refused from now on is told who holds the run
        const int fd = zt_out_open(l->path, ZT_OUT_KEEP);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
            close(l->fd);
            l->fd = fd;
            if (write_holder(l, l->run_id) == 0) {
                fprintf(stderr, "zerotrain: warning: %s was removed or replaced while this job holds %s (the "
                                "directory itself stays locked: no other job got in); written again\n",
                        l->path, l->run_dir);
                return 0;
            }
        } else if (fd >= 0) {
            close(fd);
        }
        if (!l->warned)
            fprintf(stderr, "zerotrain: warning: %s was removed or replaced while this job holds %s, and cannot be "
                            "written again (%s); the directory itself stays locked: no other job gets in\n",
                    l->path, l->run_dir, zt_errmsg());
        l->warned = 1;
        return 0;
    }
    return zt_err("%s was removed or replaced while this job held it (this file system cannot lock the directory "
                  "itself): another job may now be using %s, and the two would mix their checkpoints and logs; "
                  "this job stops before its next commit. Check for another job, then continue the run with "
                  "--resume",
                  l->path, l->run_dir);
}

int zt_run_lock_set_run_id(zt_run_lock *l, const char *run_id) {
    if (!l) return 0;
    snprintf(l->run_id, sizeof l->run_id, "%s", run_id ? run_id : "");
    return write_holder(l, run_id);
}

void zt_run_lock_release(zt_run_lock *l) {
    if (!l) return;
    flock(l->fd, LOCK_UN);
    if (l->dir_fd >= 0) flock(l->dir_fd, LOCK_UN);
    free_lock(l);
}
