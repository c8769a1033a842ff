// Where checkpoints are and which to load: the step-N directories of RUN/checkpoints, `latest`
// (read, and written by the commit), resolution of a path to a complete checkpoint, --resume
// auto's candidates, and retention (--keep-last pruning, clearing stale and half-removed ones).
// defines: zt_ckpt_resolve, zt_ckpt_open_meta, zt_ckpt_scan_run, zt_ckpt_auto_candidates,
//          zt_ckpt_clear_removing, zt_ckpt_free_paths, zt_ckpt_read_latest, zt_ckpt_write_latest, zt_ckpt_prune
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "base/common.h"
#include "base/out_file.h"

// ---- small file-system helpers ----------------------------------------------------

int zt_ckpt_is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int zt_ckpt_fsync_path(const char *p, int dir) {
    int fd = open(p, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return zt_err("%s: cannot open to flush: %s", p, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && !(dir && (e == EINVAL || e == EROFS)))  // some file systems cannot sync a directory
        return zt_err("%s: fsync failed: %s", p, strerror(e));
    return 0;
}

int zt_ckpt_is_step_name(const char *name, int64_t *step) {
    if (strncmp(name, "step-", 5) != 0 || !name[5]) return 0;
    int64_t v = 0;
    for (const char *c = name + 5; *c; c++) {
        if (*c < '0' || *c > '9' || v > INT64_MAX / 10 - 10) return 0;
        v = v * 10 + (*c - '0');
    }
    if (step) *step = v;
    return 1;
}

// Contents of CKDIR/latest, trimmed; "" when absent (with *exists = 0).
int zt_ckpt_read_latest(const char *ckdir, char *out, size_t n, int *exists) {
    char p[4200];
    snprintf(p, sizeof p, "%s/latest", ckdir);
    out[0] = 0;
    *exists = is_file(p);
    if (!*exists) return 0;
    char *s = zt_read_file(p, NULL);
    if (!s) return -1;
    char *b = s, *e;
    while (*b == ' ' || *b == '\t' || *b == '\n' || *b == '\r') b++;
    e = b + strlen(b);
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) e--;
    *e = 0;
    snprintf(out, n, "%s", b);
    free(s);
    return 0;
}

typedef struct {
    int64_t step;
    char name[64];
} step_dir;

static int cmp_step_desc(const void *x, const void *y) {
    const step_dir *a = x, *b = y;
    return a->step < b->step ? 1 : a->step > b->step ? -1 : 0;
}

// Complete checkpoints (step-N directories holding ckpt.h5) in ckdir, newest first.
static int list_complete(const char *ckdir, step_dir **out) {
    DIR *d = opendir(ckdir);
    *out = NULL;
    if (!d) return 0;
    int n = 0, cap = 16;
    step_dir *v = zt_xmalloc((size_t)cap * sizeof *v);
    struct dirent *e;
    char p[4400];
    while ((e = readdir(d))) {
        int64_t s;
        if (!zt_ckpt_is_step_name(e->d_name, &s) || strlen(e->d_name) >= sizeof v->name) continue;
        snprintf(p, sizeof p, "%s/%s/%s", ckdir, e->d_name, ZT_CKPT_FILE);
        if (!is_file(p)) continue;
        if (n == cap) v = realloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[n].step = s;
        snprintf(v[n].name, sizeof v[n].name, "%s", e->d_name);
        n++;
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, cmp_step_desc);
    *out = v;
    return n;
}

static void list_names(const step_dir *v, int n, char *out, size_t len) {
    out[0] = 0;
    for (int i = 0; i < n && i < 8; i++) {
        size_t l = strlen(out);
        snprintf(out + l, len - l, "%s%s", i ? ", " : "", v[i].name);
    }
    if (n > 8) {
        size_t l = strlen(out);
        snprintf(out + l, len - l, ", ... (%d in all)", n);
    }
}

// ---- resolution -------------------------------------------------------------------

static int has_partial_suffix(const char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    return n >= 8 && !strncmp(p + n - 8, ".partial", 8);
}

static int resolve_latest(const char *ckdir, const char *shown, char *out, size_t n) {
    char name[256];
    int exists;
    if (zt_ckpt_read_latest(ckdir, name, sizeof name, &exists) != 0) return -1;
    step_dir *v;
    int nc = list_complete(ckdir, &v);
    char avail[1024];
    list_names(v, nc, avail, sizeof avail);
    free(v);
    if (!exists)
        return zt_err("%s/latest is missing, so there is no checkpoint to resume from%s%s%s", shown,
                      nc ? " by default; complete checkpoints there: " : " (and no complete checkpoint is there)",
                      avail, nc ? " (pass one of them explicitly)" : "");
    if (has_partial_suffix(name))
        return zt_err("%s/latest names %s, an incomplete (.partial) checkpoint; it is never loaded", shown, name);
    if (!zt_ckpt_is_step_name(name, NULL))
        return zt_err("%s/latest holds \"%.100s\", which is not a checkpoint directory name (step-NNNNNNNN)", shown,
                      name);
    char p[4400];
    snprintf(p, sizeof p, "%s/%s/%s", ckdir, name, ZT_CKPT_FILE);
    if (!is_file(p))
        return zt_err("%s/latest names %s, but %s/%s/%s does not exist (dangling latest)%s%s", shown, name, shown,
                      name, ZT_CKPT_FILE, nc ? "; complete checkpoints there: " : "; no complete checkpoint is there",
                      avail);
    snprintf(out, n, "%s/%s", ckdir, name);
    return 0;
}

int zt_ckpt_resolve(const char *path, char *out, size_t n) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/') p[--len] = 0;
    const char *file = ZT_CKPT_FILE;
    if (len > strlen(file) && !strcmp(p + len - strlen(file), file) && p[len - strlen(file) - 1] == '/') {
        p[len - strlen(file) - 1] = 0;  // a path to ckpt.h5: its directory
    }
    if (has_partial_suffix(p))
        return zt_err("%s is an incomplete checkpoint (.partial: its save never finished); it is never loaded. "
                      "Use RUN/checkpoints/latest or a complete step-NNNNNNNN directory",
                      p);
    struct stat st;
    if (stat(p, &st) != 0) return zt_err("%s: no such checkpoint, checkpoints or run directory", p);
    char q[4200];
    snprintf(q, sizeof q, "%s/%s", p, ZT_CKPT_FILE);
    if (is_file(q)) {
        snprintf(out, n, "%s", p);
        return 0;
    }
    snprintf(q, sizeof q, "%s/checkpoints", p);
    if (zt_ckpt_is_dir(q)) return resolve_latest(q, q, out, n);
    snprintf(q, sizeof q, "%s/latest", p);
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    if (is_file(q) || !strcmp(base, "checkpoints")) return resolve_latest(p, p, out, n);
    if (zt_ckpt_is_step_name(base, NULL))
        return zt_err("%s/%s does not exist: this checkpoint directory is incomplete or damaged", p, ZT_CKPT_FILE);
    return zt_err("%s is neither a checkpoint directory (with %s), a run directory (with checkpoints/latest) nor a "
                  "checkpoints directory",
                  p, ZT_CKPT_FILE);
}

int zt_ckpt_open_meta(const char *ckpt_dir, zt_ckpt_meta *meta, zt_model_config *cfg, char **train_json) {
    char dir[4096], file[4200];
    if (zt_ckpt_resolve(ckpt_dir, dir, sizeof dir) != 0) return -1;
    snprintf(file, sizeof file, "%s/%s", dir, ZT_CKPT_FILE);
    hid_t fid = zt_ckpt_open_serial(file);
    if (fid < 0) return -1;
    int rc = zt_ckpt_read_header(fid, file, meta, cfg, train_json, NULL, NULL);
    H5Fclose(fid);
    return rc;
}

int zt_ckpt_scan_run(const char *run_dir, char *names, size_t n) {
    char ck[4200];
    snprintf(ck, sizeof ck, "%s/checkpoints", run_dir);
    if (names && n) names[0] = 0;
    DIR *d = opendir(ck);
    if (!d) return 0;
    int count = 0;
    size_t used = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char base[256];
        snprintf(base, sizeof base, "%s", e->d_name);
        size_t bl = strlen(base);
        if (bl > 8 && !strcmp(base + bl - 8, ".partial")) base[bl - 8] = 0;
        if (!zt_ckpt_is_step_name(base, NULL) && strcmp(e->d_name, "latest") != 0) continue;
        count++;
        if (names && used + strlen(e->d_name) + 3 < n)
            used += (size_t)snprintf(names + used, n - used, "%s%s", used ? ", " : "", e->d_name);
    }
    closedir(d);
    return count;
}

int zt_ckpt_auto_candidates(const char *run_dir, char ***paths, char *note, size_t note_n) {
    *paths = NULL;
    if (note && note_n) note[0] = 0;
    char ck[4200], first[4096] = "", latest_why[1024] = "";
    snprintf(ck, sizeof ck, "%s/checkpoints", run_dir);
    if (zt_ckpt_resolve(run_dir, first, sizeof first) != 0) snprintf(latest_why, sizeof latest_why, "%s", zt_errmsg());
    if (first[0]) {  // latest names a complete directory: its ckpt.h5 must read too (truncated, empty, zeroed: no)
        zt_ckpt_meta meta;
        zt_model_config cfg;
        if (zt_ckpt_open_meta(first, &meta, &cfg, NULL) != 0) {
            const char *base = strrchr(first, '/');
            snprintf(latest_why, sizeof latest_why, "%.600s/latest names %.100s, whose %s does not read (below)", ck,
                     base ? base + 1 : first, ZT_CKPT_FILE);
            first[0] = 0;  // it is listed with the others, and skipped with its reason
        }
    }
    step_dir *v;
    const int nc = list_complete(ck, &v);
    char **out = zt_xcalloc((size_t)nc + 1, sizeof *out);
    int n = 0;
    if (first[0]) out[n++] = strdup(first);  // latest is good: the normal case, tried first
    char tried[3072] = "";
    size_t used = 0;
    for (int i = 0; i < nc; i++) {
        char dir[4400];
        snprintf(dir, sizeof dir, "%s/%s", ck, v[i].name);
        if (first[0] && !strcmp(dir, first)) continue;
        zt_ckpt_meta meta;
        zt_model_config cfg;
        if (zt_ckpt_open_meta(dir, &meta, &cfg, NULL) == 0) {
            out[n++] = strdup(dir);
        } else if (used < sizeof tried) {  // named with its reason ("step-N: ckpt.h5: ...": the path once)
            const char *why = zt_errmsg();
            const size_t dl = strlen(dir);
            if (!strncmp(why, dir, dl) && why[dl] == '/') why += dl + 1;
            used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s: %.400s", used ? "; " : "", v[i].name,
                                     why);
        }
    }
    free(v);
    if (n > 0) {
        if (note && !first[0]) {
            const char *base = strrchr(out[0], '/');
            snprintf(note, note_n,
                     "--resume auto: %.600s; resuming from %s, the newest complete checkpoint whose metadata reads%s%.900s%s",
                     latest_why, base ? base + 1 : out[0], used ? " (skipped: " : "", used ? tried : "", used ? ")" : "");
        } else if (note && used) {  // latest reads; older ones that do not are no candidates if it fails to load
            snprintf(note, note_n, "--resume auto: not a candidate, the metadata does not read: %.1500s", tried);
        }
        *paths = out;
        return n;
    }
    free(out);
    char names[1024];
    const int any = zt_ckpt_scan_run(run_dir, names, sizeof names);
    if (!any) {  // no checkpoint at all: a fresh start is what auto means
        zt_err("%s/checkpoints holds no checkpoint", run_dir);
        return 0;
    }
    return zt_err("--resume auto: %s/checkpoints holds %s but none can be resumed from (latest: %.500s%s%.1200s); "
                  "refusing to start over them: name one with --resume PATH, or pass --overwrite to discard them",
                  run_dir, names, latest_why, used ? "; " : "", used ? tried : "");
}

int zt_ckpt_clear_removing(const char *run_dir, FILE *log) {
    char ck[4200], p[4500];
    snprintf(ck, sizeof ck, "%s/checkpoints", run_dir);
    struct stat st;
    if (lstat(ck, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;  // nothing, or a link: never cleared through
    DIR *d = opendir(ck);
    if (!d) return 0;
    int n = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "step-", 5) || len < 9 || strcmp(e->d_name + len - 9, ".removing")) continue;
        snprintf(p, sizeof p, "%s/%s", ck, e->d_name);
        if (zt_remove_tree(p) != 0) rc = -1;
        else n++;
        if (log && rc == 0) fprintf(log, "checkpoints: removed %s (a removal an earlier job did not finish)\n", p);
    }
    closedir(d);
    return rc;
}

void zt_ckpt_free_paths(char **paths) {
    for (int i = 0; paths && paths[i]; i++) free(paths[i]);
    free(paths);
}

// ---- retention: removing checkpoints, replacing latest ------------------------------

// A checkpoint is removed by renaming it to step-N.removing first (one atomic step that
// takes it out of every listing), then deleting that: a crash in between leaves only a
// name that the next save or start clears, never a step-N/ holding half its files.
static int remove_checkpoint_dir(const char *ckdir, const char *name) {
    char from[4400], to[4500];
    snprintf(from, sizeof from, "%s/%s", ckdir, name);
    snprintf(to, sizeof to, "%s.removing", from);
    if (zt_remove_tree(to) != 0) return -1;
    if (rename(from, to) != 0) return zt_err("%s: cannot move aside to remove it: %s", from, strerror(errno));
    return zt_remove_tree(to);
}

int zt_ckpt_write_latest(const char *ckdir, const char *name) {
    char tmp[4200], dst[4200], text[128];
    snprintf(tmp, sizeof tmp, "%s/latest.tmp", ckdir);
    snprintf(dst, sizeof dst, "%s/latest", ckdir);
    snprintf(text, sizeof text, "%s\n", name);
    // latest.tmp new (O_EXCL | O_NOFOLLOW; a stale regular one removed), a link at latest refused:
    // rename() would replace such a link itself, never its target, but one planted there is named
    if (zt_out_check(dst) != 0) return -1;
    int fd = zt_out_create_fresh(tmp);
    if (fd < 0) return -1;
    ssize_t w = write(fd, text, strlen(text));
    int e = errno;
    if (w != (ssize_t)strlen(text) || fsync(fd) != 0) {
        if (w >= 0) e = errno ? errno : ENOSPC;
        close(fd);
        unlink(tmp);
        return zt_err("%s: write failed: %s", tmp, strerror(e));
    }
    if (close(fd) != 0 || rename(tmp, dst) != 0) {
        e = errno;
        unlink(tmp);
        return zt_err("%s: cannot replace %s: %s", tmp, dst, strerror(e));
    }
    return zt_ckpt_fsync_path(ckdir, 1);
}

// step-N.partial (a save that never finished), step-N.replaced (an interrupted re-save) or
// step-N.removing (an interrupted prune).
static int is_stale_name(const char *name) {
    size_t n = strlen(name);
    return strncmp(name, "step-", 5) == 0 &&
           (has_partial_suffix(name) || (n > 9 && !strcmp(name + n - 9, ".replaced")) ||
            (n > 9 && !strcmp(name + n - 9, ".removing")));
}

// Remove complete checkpoints beyond keep_last (never `keep`) and stale .partial
// directories. Failures only warn: the new checkpoint is already committed.
void zt_ckpt_prune(const char *ckdir, const char *keep, int keep_last) {
    step_dir *v;
    int n = list_complete(ckdir, &v), kept = 1;
    char p[4400];
    for (int i = 0; i < n && keep_last > 0; i++) {
        if (!strcmp(v[i].name, keep)) continue;
        if (kept < keep_last) {
            kept++;
            continue;
        }
        if (remove_checkpoint_dir(ckdir, v[i].name) != 0)
            fprintf(stderr, "zerotrain: warning: --keep-last: %s\n", zt_errmsg());
    }
    free(v);
    DIR *d = opendir(ckdir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (is_stale_name(e->d_name)) {
            snprintf(p, sizeof p, "%s/%s", ckdir, e->d_name);
            if (zt_remove_tree(p) != 0) fprintf(stderr, "zerotrain: warning: removing a stale directory: %s\n", zt_errmsg());
        }
    if (d) closedir(d);
}
