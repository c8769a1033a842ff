// Collective checkpoint save and load over parallel HDF5 (MPI-IO), the atomic commit
// (.partial -> step-N -> latest), pruning, and resolution of `latest`. Every failure
// is agreed across ranks so that all of them return -1 with the same message.
// defines: zt_ckpt_save, zt_ckpt_load, zt_ckpt_resolve, zt_ckpt_open_meta
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "base/crc32c.h"
#include "base/common.h"
#include "base/out_file.h"

#ifndef ZT_VERSION
#define ZT_VERSION "dev"
#endif

// ---- small file-system helpers ----------------------------------------------------

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int fsync_path(const char *p, int dir) {
    int fd = open(p, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return zt_err("%s: cannot open to flush: %s", p, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && !(dir && (e == EINVAL || e == EROFS)))  // some file systems cannot sync a directory
        return zt_err("%s: fsync failed: %s", p, strerror(e));
    return 0;
}

static int is_step_name(const char *name, int64_t *step) {
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
static int read_latest(const char *ckdir, char *out, size_t n, int *exists) {
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
        if (!is_step_name(e->d_name, &s) || strlen(e->d_name) >= sizeof v->name) continue;
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
    if (read_latest(ckdir, name, sizeof name, &exists) != 0) return -1;
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
    if (!is_step_name(name, NULL))
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
    if (is_dir(q)) return resolve_latest(q, q, out, n);
    snprintf(q, sizeof q, "%s/latest", p);
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    if (is_file(q) || !strcmp(base, "checkpoints")) return resolve_latest(p, p, out, n);
    if (is_step_name(base, NULL))
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
        if (!is_step_name(base, NULL) && strcmp(e->d_name, "latest") != 0) continue;
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

// ---- agreement --------------------------------------------------------------------

// Wait for a request without keeping a core busy: the MPI library's blocking calls poll
// without pause, which takes a core from the training ranks while an --async-save writer
// waits for a slower peer (every unit ends in an agreement). Test, yield a few times, then
// sleep in growing steps up to 1 ms.
static void wait_quietly(MPI_Request *rq) {
    long ns = 0;
    for (int spins = 0;; spins++) {
        int done = 0;
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (spins < 50) {
            sched_yield();
            continue;
        }
        ns = ns == 0 ? 20000 : ns >= 500000 ? 1000000 : 2 * ns;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
    }
}

// Collective: 0 when every rank is ok; otherwise every rank gets the message of the
// lowest failing rank ("rank R: ...", plus how many others failed) and -1.
static int agree(MPI_Comm comm, int ok) {
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    int mine[2] = {ok ? INT_MAX : rank, ok ? 0 : 1}, red[2];
    MPI_Request rq[2];
    MPI_Iallreduce(&mine[0], &red[0], 1, MPI_INT, MPI_MIN, comm, &rq[0]);
    MPI_Iallreduce(&mine[1], &red[1], 1, MPI_INT, MPI_SUM, comm, &rq[1]);
    wait_quietly(&rq[0]);
    wait_quietly(&rq[1]);
    if (red[0] == INT_MAX) return 0;
    char msg[ZT_ERR_MAX];
    if (rank == red[0]) snprintf(msg, sizeof msg, "%s", zt_errmsg());
    MPI_Bcast(msg, sizeof msg, MPI_CHAR, red[0], comm);
    if (world == 1 || red[1] == world)  // every rank failed: they all say the same
        zt_err("%s", msg);
    else if (red[1] > 1)
        zt_err("rank %d (and %d other rank%s): %.1900s", red[0], red[1] - 1, red[1] > 2 ? "s" : "", msg);
    else
        zt_err("rank %d: %.1950s", red[0], msg);
    return -1;
}

// A sequence of agreements: once one has failed (every rank holds the same message),
// later ones are skipped so the message is not wrapped twice. 0 while all is well.
typedef struct {
    MPI_Comm comm;
    int failed;
} agreement;

static int agree_step(agreement *a, int *ok) {
    if (!a->failed && agree(a->comm, *ok) != 0) a->failed = 1;
    if (a->failed) *ok = 0;
    return a->failed ? -1 : 0;
}

// ---- shards -----------------------------------------------------------------------

static int check_shards(const zt_model_layout *lay, const zt_ckpt_shards *sh) {
    if (!sh || sh->nunits != lay->nunits)
        return zt_err("the shards describe %d units, the model has %d", sh ? sh->nunits : 0, lay->nunits);
    for (int u = 0; u < sh->nunits; u++) {
        const zt_ckpt_slice *s = &sh->unit[u];
        if (s->numel != lay->units[u].numel)
            return zt_err("unit %d: the shard says numel %lld, the model layout has %lld", u, (long long)s->numel,
                          (long long)lay->units[u].numel);
        if (s->lo < 0 || s->valid < 0 || (s->valid > 0 && s->lo + s->valid > s->numel))
            return zt_err("unit %d: slice [%lld, %lld) is outside [0, %lld)", u, (long long)s->lo,
                          (long long)(s->lo + s->valid), (long long)s->numel);
        if (s->valid > 0 && (!s->master || !s->m || !s->v))
            return zt_err("unit %d: slice of %lld elements has a NULL master, m or v pointer", u, (long long)s->valid);
    }
    return 0;
}

static const float *slice_ptr(const zt_ckpt_slice *s, int k) { return k == 0 ? s->master : k == 1 ? s->m : s->v; }

static void tensors_of(const zt_unit_layout *ul, zt_ckpt_unit_info *ui) {
    memset(ui, 0, sizeof *ui);
    ui->numel = ul->numel;
    ui->layer = ul->layer;
    snprintf(ui->kind, sizeof ui->kind, "%s",
             ul->kind == ZT_UNIT_EMBED ? "embed" : ul->kind == ZT_UNIT_LAYER ? "layer" : "head");
    ui->ntensors = ul->ntensors;
    for (int i = 0; i < ul->ntensors; i++) {
        zt_ckpt_tensor *t = &ui->t[i];
        snprintf(t->name, sizeof t->name, "%s", ul->t[i].name);
        t->ndim = ul->t[i].ndim;
        t->shape[0] = ul->t[i].shape[0];
        t->shape[1] = ul->t[i].ndim == 2 ? ul->t[i].shape[1] : 0;
        t->offset = ul->t[i].offset;
        t->numel = ul->t[i].numel;
    }
}

// ---- crc pieces: each rank's crc32c of the parts of chunks it holds -----------------

typedef struct {
    int32_t unit, ds, rank;
    uint32_t crc;
    int64_t start, len;
} crc_piece;

static int cmp_piece(const void *x, const void *y) {
    const crc_piece *a = x, *b = y;
    if (a->unit != b->unit) return a->unit < b->unit ? -1 : 1;
    if (a->ds != b->ds) return a->ds < b->ds ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

// All ranks end with identical per-chunk crc arrays crc[u * 3 + k] (or the same error):
// pieces are all-gathered and combined in element order, which also proves that the
// ranks' slices tile every unit exactly once.
static int gather_crcs(MPI_Comm comm, const zt_model_layout *lay, const zt_ckpt_shards *sh, int64_t chunk,
                       uint32_t **crc) {
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    int64_t cap = 0;
    for (int u = 0; u < sh->nunits; u++)
        if (sh->unit[u].valid > 0) cap += ZT_CKPT_NDS * (sh->unit[u].valid / chunk + 2);
    crc_piece *mine = zt_xmalloc((size_t)(cap > 0 ? cap : 1) * sizeof *mine);
    int64_t n = 0;
    for (int u = 0; u < sh->nunits; u++) {
        const zt_ckpt_slice *s = &sh->unit[u];
        for (int k = 0; k < ZT_CKPT_NDS && s->valid > 0; k++) {
            const float *p = slice_ptr(s, k);
            for (int64_t c = s->lo / chunk; c * chunk < s->lo + s->valid; c++) {
                int64_t a = c * chunk > s->lo ? c * chunk : s->lo;
                int64_t b = (c + 1) * chunk < s->lo + s->valid ? (c + 1) * chunk : s->lo + s->valid;
                mine[n++] = (crc_piece){u, k, rank, zt_crc32c(0, p + (a - s->lo), (size_t)(b - a) * sizeof(float)),
                                        a, b - a};
            }
        }
    }
    int bytes = (int)(n * (int64_t)sizeof(crc_piece));
    int *counts = zt_xmalloc((size_t)world * sizeof(int)), *displs = zt_xmalloc((size_t)world * sizeof(int));
    MPI_Allgather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, comm);
    int64_t total = 0;
    for (int r = 0; r < world; r++) displs[r] = (int)total, total += counts[r];
    crc_piece *all = zt_xmalloc((size_t)(total > 0 ? total : 1));
    MPI_Allgatherv(mine, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, comm);
    free(mine);
    free(counts);
    free(displs);
    int64_t np = total / (int64_t)sizeof(crc_piece);
    qsort(all, (size_t)np, sizeof *all, cmp_piece);

    int rc = 0;
    int64_t i = 0;
    for (int u = 0; u < lay->nunits && rc == 0; u++) {
        const int64_t numel = lay->units[u].numel, nchunks = (numel + chunk - 1) / chunk;
        for (int k = 0; k < ZT_CKPT_NDS && rc == 0; k++) {
            uint32_t *out = crc[u * ZT_CKPT_NDS + k] = zt_xcalloc((size_t)nchunks, sizeof(uint32_t));
            int64_t next = 0;
            uint32_t acc = 0;
            int prev_rank = -1;
            for (; i < np && all[i].unit == u && all[i].ds == k; i++) {
                const crc_piece *p = &all[i];
                if (p->start != next) {
                    rc = p->start > next
                             ? zt_err("unit %d: no rank holds elements [%lld, %lld) of its %lld (the ranks' slices "
                                      "must tile the unit's canonical vector exactly once)",
                                      u, (long long)next, (long long)p->start, (long long)numel)
                             : zt_err("unit %d: elements from %lld are held by both rank %d and rank %d (the ranks' "
                                      "slices must tile the unit's canonical vector exactly once)",
                                      u, (long long)p->start, prev_rank, p->rank);
                    break;
                }
                acc = p->start % chunk == 0 ? p->crc : zt_crc32c_combine(acc, p->crc, (uint64_t)p->len * 4);
                next += p->len;
                prev_rank = p->rank;
                if (next % chunk == 0 || next == numel) out[(next - 1) / chunk] = acc;
            }
            if (rc == 0 && next != numel)
                rc = zt_err("unit %d: no rank holds elements [%lld, %lld) of its %lld (the ranks' slices must tile "
                            "the unit's canonical vector exactly once)",
                            u, (long long)next, (long long)numel, (long long)numel);
        }
    }
    free(all);
    return rc;
}

// ---- save -------------------------------------------------------------------------

typedef struct {
    MPI_Comm comm;
    int rank, world;
    const zt_model_layout *lay;
    const zt_ckpt_shards *sh;
    int64_t step, chunk;
    char ckdir[4096], name[64], final_dir[4200], partial[4300], file[4400];
    char prev[256];      // what latest named before this save ("" if none)
    uint32_t **crc;      // [nunits * 3]
    hid_t fid, dxpl;
    hid_t *ds;           // [nunits * 3]
    int64_t budget;      // ZT_CKPT_FAIL_AFTER_BYTES (injected ENOSPC), -1 off
    int64_t bytes_written;
    // --save-io direct|posix: the datasets' bytes go straight to the file at their offsets
    int io;              // ZT_SAVE_IO_*
    int fd, dfd;         // the file, buffered / O_DIRECT (-1: none)
    int no_odirect;      // testing: ZT_CKPT_DEBUG_NO_ODIRECT, every O_DIRECT write fails with EINVAL
    int64_t *off;        // [nunits * 3] file offset of each dataset's first byte
    char *bounce;        // ZT_IO_ALIGN-aligned staging for O_DIRECT writes
    int64_t direct_bytes, buffered_bytes;
} save_ctx;

static int64_t estimate_bytes(const zt_model_layout *lay) {
    int64_t b = 64 * 1024;  // superblock, root and config attributes, meta.json
    for (int u = 0; u < lay->nunits; u++) {
        int64_t ds = lay->units[u].numel * (int64_t)sizeof(float);
        b += ZT_CKPT_NDS * (ds + 4096 + (ds >= (16 << 20) ? (1 << 20) : 0));  // header + alignment padding
    }
    return b;
}

static int space_check(const char *dir, int64_t need) {
    const char *off = getenv("ZT_CKPT_NO_SPACE_CHECK");
    if (off && *off && strcmp(off, "0")) return 0;
    struct statvfs vs;
    if (statvfs(dir, &vs) != 0) return 0;  // unknown: let the writes tell
    int64_t avail = (int64_t)vs.f_bavail * (int64_t)vs.f_frsize;
    if (avail < need)
        return zt_err("not enough space: the checkpoint needs about %.1f MiB and %s has %.1f MiB free (No space left "
                      "on device); free space or lower --keep-last",
                      need / 1048576.0, dir, avail / 1048576.0);
    return 0;
}

// Reserve the file's blocks up front (fallocate, KEEP_SIZE) so that neither the data
// writes nor HDF5's metadata flush in H5Fclose can meet a full disk: HDF5 1.10 does
// not agree on a metadata write error across ranks, and ranks can then wait in
// different barriers inside H5Fclose for ever. File systems without fallocate are
// left to the free-space check. ZT_CKPT_NO_RESERVE=1 turns it off (tests).
static int reserve_space(const char *file, int64_t bytes) {
    const char *off = getenv("ZT_CKPT_NO_RESERVE");
    if (off && *off && strcmp(off, "0")) return 0;
    int fd = open(file, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return zt_err("cannot open to reserve space: %s", strerror(errno));
    int rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes);
    int e = errno;
    close(fd);
    if (rc != 0 && e != EOPNOTSUPP && e != ENOSYS)
        return zt_err("reserving %.1f MiB for the file failed: %s", bytes / 1048576.0, strerror(e));
    return 0;
}

// After a failure, give HDF5's metadata flush in H5Fclose room to complete on every
// rank (the file is discarded anyway): drop the data and any reservation.
static void release_space(const char *file) {
    if (truncate(file, 0) != 0 && errno != ENOENT)
        fprintf(stderr, "zerotrain: warning: %s: cannot truncate after a failed save: %s\n", file, strerror(errno));
}

static int write_units_json(hid_t g, const zt_unit_layout *ul) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < ul->ntensors; i++) {
        const zt_tensor_desc *t = &ul->t[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON *shp = cJSON_AddArrayToObject(o, "shape");
        for (int j = 0; j < t->ndim; j++) cJSON_AddItemToArray(shp, cJSON_CreateNumber((double)t->shape[j]));
        cJSON_AddNumberToObject(o, "offset", (double)t->offset);
        cJSON_AddItemToArray(arr, o);
    }
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    int rc = zt_h5_put_str(g, "tensors", s);
    free(s);
    return rc;
}

// Collective metadata: root attributes, /model_config, /units/NNN groups and their
// datasets with crc32c attributes. Every rank passes identical values.
static int write_metadata(save_ctx *c, const zt_ckpt_meta *m, const char *train_json) {
    hid_t f = c->fid;
    const zt_model_config *cfg = &c->lay->cfg;
    int rc = 0;
    rc |= zt_h5_put_str(f, "format", ZT_CKPT_FORMAT);
    rc |= zt_h5_put_i64(f, "format_version", ZT_CKPT_VERSION);
    rc |= zt_h5_put_str(f, "zerotrain_version", ZT_VERSION);
    rc |= zt_h5_put_i64(f, "step", m->step);
    rc |= zt_h5_put_i64(f, "epoch", m->epoch);
    rc |= zt_h5_put_i64(f, "epoch_step", m->epoch_step);
    rc |= zt_h5_put_i64(f, "epoch_blocks", m->epoch_blocks);
    rc |= zt_h5_put_i64(f, "tokens_seen", m->tokens_seen);
    rc |= zt_h5_put_u64v(f, "seed", &m->seed, 1);
    rc |= zt_h5_put_u64v(f, "rng_state", m->rng_state, 4);
    rc |= zt_h5_put_i64(f, "world_size", c->world);
    rc |= zt_h5_put_str(f, "run_id", m->run_id);
    rc |= zt_h5_put_f64(f, "lr_last", m->lr_last);
    rc |= zt_h5_put_i64(f, "final", m->final ? 1 : 0);
    rc |= zt_h5_put_i64(f, "nunits", c->lay->nunits);
    char *cj = zt_model_config_json(cfg);
    rc |= zt_h5_put_str(f, "model_config_json", cj);
    free(cj);
    rc |= zt_h5_put_str(f, "train_json", train_json ? train_json : "");
    if (rc) return -1;

    hid_t g = H5Gcreate2(f, "model_config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return zt_err("creating group /model_config failed: %s", zt_h5_why());
    rc |= zt_h5_put_i64(g, "vocab_size", cfg->vocab_size);
    rc |= zt_h5_put_i64(g, "hidden_size", cfg->hidden_size);
    rc |= zt_h5_put_i64(g, "intermediate_size", cfg->intermediate_size);
    rc |= zt_h5_put_i64(g, "num_hidden_layers", cfg->num_layers);
    rc |= zt_h5_put_i64(g, "num_attention_heads", cfg->num_heads);
    rc |= zt_h5_put_i64(g, "num_key_value_heads", cfg->num_kv_heads);
    rc |= zt_h5_put_i64(g, "head_dim", cfg->head_dim);
    rc |= zt_h5_put_f64(g, "rms_norm_eps", cfg->rms_norm_eps);
    rc |= zt_h5_put_f64(g, "rope_theta", cfg->rope_theta);
    rc |= zt_h5_put_i64(g, "tie_word_embeddings", cfg->tie_word_embeddings ? 1 : 0);
    rc |= zt_h5_put_f64(g, "initializer_range", cfg->initializer_range);
    rc |= zt_h5_put_i64(g, "max_position_embeddings", cfg->max_position_embeddings);
    rc |= zt_h5_put_i64(g, "bos_token_id", cfg->bos_token_id);
    rc |= zt_h5_put_i64(g, "eos_token_id", cfg->eos_token_id);
    if (cfg->rope_yarn) {  // RoPE scaling: config.json's rope_scaling object, as text (absent: plain RoPE)
        char *cj = zt_model_config_json(cfg);
        cJSON *root = cJSON_Parse(cj);
        char *rs = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "rope_scaling"));
        rc |= zt_h5_put_str(g, "rope_scaling", rs);
        free(rs);
        cJSON_Delete(root);
        free(cj);
    }
    H5Gclose(g);
    if (rc) return -1;

    hid_t units = H5Gcreate2(f, "units", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (units < 0) return zt_err("creating group /units failed: %s", zt_h5_why());
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);            // plain byte ranges: simple for MPI-IO and other readers
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);  // what parallel HDF5 requires anyway
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);    // every element is written once, by its owner
    for (int u = 0; u < c->lay->nunits && rc == 0; u++) {
        const zt_unit_layout *ul = &c->lay->units[u];
        char gname[32];
        snprintf(gname, sizeof gname, "%03d", u);
        hid_t ug = H5Gcreate2(units, gname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (ug < 0) {
            rc = zt_err("creating group /units/%s failed: %s", gname, zt_h5_why());
            break;
        }
        rc |= zt_h5_put_str(ug, "kind", ul->kind == ZT_UNIT_EMBED ? "embed" : ul->kind == ZT_UNIT_LAYER ? "layer" : "head");
        rc |= zt_h5_put_i64(ug, "layer", ul->layer);
        rc |= zt_h5_put_i64(ug, "numel", ul->numel);
        rc |= write_units_json(ug, ul);
        hsize_t dims = (hsize_t)ul->numel;
        const int64_t nchunks = (ul->numel + c->chunk - 1) / c->chunk;
        for (int k = 0; k < ZT_CKPT_NDS && rc == 0; k++) {
            hid_t space = H5Screate_simple(1, &dims, NULL);
            hid_t d = H5Dcreate2(ug, zt_ckpt_ds_names[k], H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            H5Sclose(space);
            if (d < 0) {
                rc = zt_err("creating dataset /units/%s/%s failed: %s", gname, zt_ckpt_ds_names[k], zt_h5_why());
                break;
            }
            c->ds[u * ZT_CKPT_NDS + k] = d;
            rc |= zt_h5_put_i64(d, "crc32c_chunk_elems", c->chunk);
            rc |= zt_h5_put_u32v(d, "crc32c", c->crc[u * ZT_CKPT_NDS + k], nchunks);
        }
        H5Gclose(ug);
    }
    H5Pclose(dcpl);
    H5Gclose(units);
    return rc ? -1 : 0;
}

// ---- --save-io: the datasets' bytes written by each rank at their file offsets ------

#define ZT_IO_ALIGN 4096          // O_DIRECT's offset, length and buffer alignment (safe everywhere)
#define ZT_IO_BOUNCE (8 << 20)    // staging for O_DIRECT writes from memory that is not aligned

static int save_io_mode = ZT_SAVE_IO_DIRECT;
static int64_t last_direct_bytes, last_buffered_bytes;  // this rank's last save (any thread; one save at a time)
void zt_ckpt_set_save_io(int mode) { save_io_mode = mode; }
int zt_ckpt_get_save_io(void) { return save_io_mode; }
void zt_ckpt_last_save_io(int64_t *direct, int64_t *buffered) {
    *direct = last_direct_bytes;
    *buffered = last_buffered_bytes;
}

static int pwrite_all(int fd, const char *p, int64_t n, int64_t at) {
    while (n > 0) {
        ssize_t w = pwrite(fd, p, (size_t)n, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) return errno = ENOSPC, -1;
        p += w, n -= w, at += w;
    }
    return 0;
}

// Every rank, after the datasets exist (their space is allocated at creation): the file
// offsets, a buffered descriptor and (direct) an O_DIRECT one. A file system that refuses
// O_DIRECT (EINVAL) gets pwrite for everything.
static int open_raw(save_ctx *c) {
    const int nds = c->lay->nunits * ZT_CKPT_NDS;
    c->off = zt_xmalloc((size_t)nds * sizeof(int64_t));
    for (int i = 0; i < nds; i++) {
        haddr_t a = H5Dget_offset(c->ds[i]);
        if (a == HADDR_UNDEF)
            return zt_err("/units/%03d/%s: HDF5 gives no file offset for the dataset (its space is not allocated)",
                          i / ZT_CKPT_NDS, zt_ckpt_ds_names[i % ZT_CKPT_NDS]);
        c->off[i] = (int64_t)a;
    }
    // the file HDF5 just created in the fresh .partial directory (O_NOFOLLOW: never a link)
    c->fd = open(c->file, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (c->fd < 0) return zt_err("cannot open the file for its data writes: %s", strerror(errno));
    if (c->io == ZT_SAVE_IO_DIRECT) {
        const char *e = getenv("ZT_CKPT_DEBUG_NO_ODIRECT");
        c->no_odirect = e && *e && strcmp(e, "0");
        c->dfd = open(c->file, O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC);
        void *b = NULL;
        if (c->dfd >= 0 && posix_memalign(&b, ZT_IO_ALIGN, ZT_IO_BOUNCE) != 0) close(c->dfd), c->dfd = -1;
        c->bounce = b;
    }
    return 0;
}

static void close_raw(save_ctx *c) {
    if (c->fd >= 0) close(c->fd), c->fd = -1;
    if (c->dfd >= 0) close(c->dfd), c->dfd = -1;
}

// n bytes from src to file offset pos: the whole ZT_IO_ALIGN blocks inside [pos, pos + n)
// with O_DIRECT (from src itself where it is aligned, else through the bounce buffer),
// the partial blocks at the two ends (shared with a neighbour's slice or with HDF5's
// metadata) with pwrite. -1 with errno set.
static int write_raw(save_ctx *c, const char *src, int64_t pos, int64_t n) {
    int64_t x = pos;
    const int64_t a = (pos + ZT_IO_ALIGN - 1) / ZT_IO_ALIGN * ZT_IO_ALIGN, b = (pos + n) / ZT_IO_ALIGN * ZT_IO_ALIGN;
    if (c->dfd >= 0 && b > a) {
        if (pwrite_all(c->fd, src, a - pos, pos) != 0) return -1;
        c->buffered_bytes += a - pos;
        x = a;
        while (x < b) {
            const int64_t len = b - x < ZT_IO_BOUNCE ? b - x : ZT_IO_BOUNCE;
            const char *from = src + (x - pos);
            if ((uintptr_t)from % ZT_IO_ALIGN) from = memcpy(c->bounce, from, (size_t)len);
            ssize_t w = pwrite(c->dfd, from, (size_t)len, (off_t)x);
            if (c->no_odirect) w = -1, errno = EINVAL;  // testing: a file system without it
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && errno == EINVAL) {  // the file system takes no O_DIRECT here: pwrite from now on
                close(c->dfd), c->dfd = -1;
                break;
            }
            if (w > 0) x += w, c->direct_bytes += w;
            if (w != len) break;  // a short write or an error: the rest through pwrite, which names it
        }
    }
    if (pwrite_all(c->fd, src + (x - pos), pos + n - x, x) != 0) return -1;
    c->buffered_bytes += pos + n - x;
    return 0;
}

// Why a data write failed: errno, or (a short write without one) the file system's free space.
static void write_cause(const save_ctx *c, int e, int64_t bytes, char *cause, size_t n) {
    struct statvfs vs;
    if (e == ENOSPC || e == EDQUOT || e == EIO)
        snprintf(cause, n, "%s", strerror(e));
    else if (statvfs(c->partial, &vs) == 0 && (int64_t)vs.f_bavail * (int64_t)vs.f_frsize < bytes)
        snprintf(cause, n, "%s (%lld bytes free on the file system)", strerror(ENOSPC),
                 (long long)vs.f_bavail * (long long)vs.f_frsize);
    else
        snprintf(cause, n, "%s", e ? strerror(e) : "I/O error (short write)");
}

// This rank writes elements [lo, lo + valid) (or nothing). With --save-io mpiio a
// collective (every rank calls it, with nothing selected when it holds nothing).
static int write_slice(save_ctx *c, int u, int k) {
    const zt_ckpt_slice *s = &c->sh->unit[u];
    hid_t d = c->ds[u * ZT_CKPT_NDS + k];
    const int64_t bytes = s->valid * (int64_t)sizeof(float);
    int inject = c->budget >= 0 && s->valid > 0 && c->bytes_written + bytes > c->budget;
    char cause[256];
    if (c->io != ZT_SAVE_IO_MPIIO && !inject) {
        if (s->valid == 0) return 0;
        const int64_t at = c->off[u * ZT_CKPT_NDS + k] + s->lo * (int64_t)sizeof(float);
        errno = 0;
        if (write_raw(c, (const char *)slice_ptr(s, k), at, bytes) != 0) {
            write_cause(c, errno, bytes, cause, sizeof cause);
            return zt_err("/units/%03d/%s: write of elements [%lld, %lld) (file bytes [%lld, %lld)) failed: %s", u,
                          zt_ckpt_ds_names[k], (long long)s->lo, (long long)(s->lo + s->valid), (long long)at,
                          (long long)(at + bytes), cause);
        }
        c->bytes_written += bytes;
        return 0;
    }
    hid_t fs = H5Dget_space(d);
    hsize_t one = 1;
    hid_t ms;
    if (s->valid > 0 && !inject) {
        hsize_t start = (hsize_t)s->lo, count = (hsize_t)s->valid;
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
        ms = H5Screate_simple(1, &count, NULL);
    } else {  // still take part in the collective write, with nothing selected
        H5Sselect_none(fs);
        ms = H5Screate_simple(1, &one, NULL);
        H5Sselect_none(ms);
    }
    static const float dummy = 0;
    const float *p = s->valid > 0 ? slice_ptr(s, k) : &dummy;
    herr_t rc = 0;
    int e = 0;
    char why[1024] = "";
    if (c->io == ZT_SAVE_IO_MPIIO) {
        errno = 0;
        rc = H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, c->dxpl, p);
        e = errno;  // MPI-IO's write(2) error; HDF5's stack does not carry it
        if (rc < 0 && getenv("ZT_CKPT_DEBUG_H5")) H5Eprint2(H5E_DEFAULT, stderr);
        if (rc < 0) snprintf(why, sizeof why, "%s", zt_h5_why());  // before any other HDF5 call clears the stack
    }
    H5Sclose(ms);
    H5Sclose(fs);
    if (inject)
        return zt_err("/units/%03d/%s: write failed after %lld bytes: No space left on device (injected by "
                      "ZT_CKPT_FAIL_AFTER_BYTES=%lld)",
                      u, zt_ckpt_ds_names[k], (long long)c->bytes_written, (long long)c->budget);
    if (rc < 0) {
        // MPI-IO reports a full disk as a short write without errno; ask the file system.
        write_cause(c, e, bytes, cause, sizeof cause);
        return zt_err("/units/%03d/%s: write of elements [%lld, %lld) failed: %s (HDF5: %s)", u, zt_ckpt_ds_names[k],
                      (long long)s->lo, (long long)(s->lo + s->valid), cause, why);
    }
    c->bytes_written += bytes;
    return 0;
}

static int write_meta_json(const save_ctx *c, const zt_ckpt_meta *m, double seconds) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", ZT_CKPT_FORMAT);
    cJSON_AddNumberToObject(o, "format_version", ZT_CKPT_VERSION);
    cJSON_AddStringToObject(o, "note", "human-readable summary; ckpt.h5 is authoritative");
    cJSON_AddStringToObject(o, "file", ZT_CKPT_FILE);
    struct stat st;
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", c->partial, ZT_CKPT_FILE);
    cJSON_AddNumberToObject(o, "file_bytes", stat(p, &st) == 0 ? (double)st.st_size : -1);
    cJSON_AddNumberToObject(o, "step", (double)m->step);
    cJSON_AddNumberToObject(o, "epoch", (double)m->epoch);
    cJSON_AddNumberToObject(o, "epoch_step", (double)m->epoch_step);
    cJSON_AddNumberToObject(o, "epoch_blocks", (double)m->epoch_blocks);
    cJSON_AddNumberToObject(o, "tokens_seen", (double)m->tokens_seen);
    cJSON_AddNumberToObject(o, "world_size", c->world);
    cJSON_AddStringToObject(o, "run_id", m->run_id);
    cJSON_AddBoolToObject(o, "final", m->final);
    cJSON_AddNumberToObject(o, "crc32c_chunk_elems", (double)c->chunk);
    cJSON_AddNumberToObject(o, "saved_unix", (double)time(NULL));
    cJSON_AddNumberToObject(o, "save_seconds", seconds);
    char *cj = zt_model_config_json(&c->lay->cfg);
    cJSON_AddItemToObject(o, "model_config", cJSON_Parse(cj));
    free(cj);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    snprintf(p, sizeof p, "%s/meta.json", c->partial);
    int rc = zt_write_file_atomic(p, text, strlen(text));
    free(text);
    return rc;
}

static int write_latest(const char *ckdir, const char *name) {
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
    return fsync_path(ckdir, 1);
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
static void prune(const char *ckdir, const char *keep, int keep_last) {
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

// Rank 0, after every rank's data is on disk: meta.json, .partial -> final, latest.
// *committed = 1 once the final directory exists (then it is never removed).
static int commit(save_ctx *c, const zt_ckpt_meta *m, double t0, int *committed) {
    if (write_meta_json(c, m, zt_now() - t0) != 0 || fsync_path(c->partial, 1) != 0) return -1;
    char old[4300] = "";
    // saving the same step again: replace, keeping the old one until done (a link of that name is
    // renamed and removed itself, never followed)
    if (is_dir(c->final_dir)) {
        snprintf(old, sizeof old, "%s.replaced", c->final_dir);
        if (zt_remove_tree(old) != 0) return -1;
        if (rename(c->final_dir, old) != 0)
            return zt_err("cannot move the existing %s aside: %s", c->final_dir, strerror(errno));
    }
    if (rename(c->partial, c->final_dir) != 0) {
        int e = errno;
        if (old[0]) rename(old, c->final_dir);
        return zt_err("cannot rename %s to %s: %s", c->partial, c->final_dir, strerror(e));
    }
    *committed = 1;
    if (fsync_path(c->ckdir, 1) != 0) return -1;
    if (write_latest(c->ckdir, c->name) != 0) return -1;
    if (old[0] && zt_remove_tree(old) != 0) fprintf(stderr, "zerotrain: warning: %s\n", zt_errmsg());
    return 0;
}

static int save_fail(save_ctx *c, int committed) {
    char msg[ZT_ERR_MAX];
    snprintf(msg, sizeof msg, "%s", zt_errmsg());
    if (committed)
        return zt_err("saving checkpoint step %lld: %s/%s was written completely, but: %.1200s; latest still names "
                      "%s",
                      (long long)c->step, c->ckdir, c->name, msg, c->prev[0] ? c->prev : "nothing");
    if (c->rank == 0) zt_remove_tree(c->partial);  // best effort; the error below is what matters
    MPI_Barrier(c->comm);                 // no rank returns before the .partial directory is gone
    if (c->prev[0])
        return zt_err("saving checkpoint step %lld to %s: %.1200s; nothing was committed: the previous checkpoint %s "
                      "is untouched and latest still names it",
                      (long long)c->step, c->file, msg, c->prev);
    return zt_err("saving checkpoint step %lld to %s: %.1200s; nothing was committed (there is no earlier checkpoint)",
                  (long long)c->step, c->file, msg);
}

static void close_all(save_ctx *c) {
    close_raw(c);
    for (int i = 0; c->ds && i < c->lay->nunits * ZT_CKPT_NDS; i++)
        if (c->ds[i] >= 0) H5Dclose(c->ds[i]), c->ds[i] = -1;
    if (c->dxpl >= 0) H5Pclose(c->dxpl), c->dxpl = -1;
    if (c->fid >= 0) H5Fclose(c->fid), c->fid = -1;
}

static void free_ctx(save_ctx *c) {
    for (int i = 0; c->crc && i < c->lay->nunits * ZT_CKPT_NDS; i++) free(c->crc[i]);
    free(c->crc);
    free(c->ds);
    free(c->off);
    free(c->bounce);
    c->off = NULL, c->bounce = NULL;
}

static hid_t mpio_fapl(MPI_Comm comm, int writing) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);  // checksummed metadata; HDF5 >= 1.10 reads it
    H5Pset_all_coll_metadata_ops(fapl, 1);  // one rank reads metadata and broadcasts it
    if (writing) {
        H5Pset_coll_metadata_write(fapl, 1);
        H5Pset_alignment(fapl, 16 << 20, 1 << 20);  // big datasets start on 1 MiB boundaries (parallel file systems)
    }
    return fapl;
}

// What the write phase hands the commit phase: the save's context (names, the previous
// `latest`), the stored state and when the save began.
struct zt_ckpt_pending {
    save_ctx c;
    zt_ckpt_meta m;
    double t0;
};

// Testing: ZT_CKPT_DEBUG_<what>_STEP=N limits a hook to the save of step N (unset: every save).
static int hook_step_matches(const char *var, int64_t step) {
    const char *s = getenv(var);
    return !(s && *s) || strtoll(s, NULL, 10) == step;
}

int zt_ckpt_write_partial(MPI_Comm comm, const char *run_dir, const zt_ckpt_meta *meta_in, const zt_model_layout *lay,
                          const char *train_json, const zt_ckpt_shards *sh, zt_ckpt_pending **out) {
    *out = NULL;
    const double t0 = zt_now();
    zt_h5_quiet();
    zt_ckpt_pending *p = zt_xcalloc(1, sizeof *p);
    save_ctx *c = &p->c;
    c->comm = comm;
    c->lay = lay;
    c->sh = sh;
    c->fid = c->dxpl = -1;
    c->fd = c->dfd = -1;
    c->io = save_io_mode;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->world);
    zt_ckpt_meta m = *meta_in;
    m.world_size = c->world;
    c->step = m.step;
    p->t0 = t0;
    snprintf(c->ckdir, sizeof c->ckdir, "%s/checkpoints", run_dir);
    snprintf(c->name, sizeof c->name, "step-%08lld", (long long)m.step);
    snprintf(c->final_dir, sizeof c->final_dir, "%s/%s", c->ckdir, c->name);
    snprintf(c->partial, sizeof c->partial, "%s.partial", c->final_dir);
    snprintf(c->file, sizeof c->file, "%s/%s", c->partial, ZT_CKPT_FILE);
    const char *inj = getenv("ZT_CKPT_FAIL_AFTER_BYTES");
    c->budget = inj && *inj && hook_step_matches("ZT_CKPT_DEBUG_FAIL_STEP", m.step) ? strtoll(inj, NULL, 10) : -1;

    int ok = (m.step >= 0 || zt_err("step %lld is negative", (long long)m.step) == 0) && check_shards(lay, sh) == 0;
    if (agree(comm, ok) != 0) {
        free(p);
        return zt_ckpt_err_prefix("saving checkpoint step %lld", (long long)m.step), -1;
    }

    // The symmetric barrier: every rank has finished the same step before any byte is written.
    MPI_Request brq;
    MPI_Ibarrier(comm, &brq);
    wait_quietly(&brq);
    // Testing: ZT_CKPT_DEBUG_STALL_RANK=R stalls rank R here for ZT_CKPT_DEBUG_STALL_S seconds
    // (default 3600), as a rank stuck in I/O would, while its peers wait inside HDF5's
    // collectives; the comm watchdog must turn that into a report (tests/cli/dist_cli.sh).
    // ZT_CKPT_DEBUG_STALL_STEP=N: only in the save of step N.
    const char *stall = getenv("ZT_CKPT_DEBUG_STALL_RANK");
    if (stall && *stall && atoi(stall) == c->rank && hook_step_matches("ZT_CKPT_DEBUG_STALL_STEP", m.step)) {
        const char *secs = getenv("ZT_CKPT_DEBUG_STALL_S");
        fprintf(stderr, "zerotrain: rank %d: ZT_CKPT_DEBUG_STALL_RANK: stalling inside the checkpoint save of step %lld\n",
                c->rank, (long long)m.step);
        sleep(secs && *secs ? (unsigned)atoi(secs) : 3600u);
    }

    if (c->rank == 0) {
        const char *e = getenv("ZT_CKPT_CRC_CHUNK");
        c->chunk = e && *e ? strtoll(e, NULL, 10) : ZT_CKPT_CRC_CHUNK_DEFAULT;
        if (c->chunk < 1) c->chunk = ZT_CKPT_CRC_CHUNK_DEFAULT;
        int exists;
        read_latest(c->ckdir, c->prev, sizeof c->prev, &exists);
    }
    MPI_Bcast(&c->chunk, 1, MPI_INT64_T, 0, comm);
    MPI_Bcast(c->prev, sizeof c->prev, MPI_CHAR, 0, comm);
    c->crc = zt_xcalloc((size_t)lay->nunits * ZT_CKPT_NDS, sizeof(uint32_t *));
    c->ds = zt_xmalloc((size_t)lay->nunits * ZT_CKPT_NDS * sizeof(hid_t));
    for (int i = 0; i < lay->nunits * ZT_CKPT_NDS; i++) c->ds[i] = -1;

    // Checksums first (from memory): also proves the slices tile every unit.
    ok = gather_crcs(comm, lay, sh, c->chunk, c->crc) == 0;  // identical result on every rank
    if (!ok) {
        zt_ckpt_err_prefix("saving checkpoint step %lld", (long long)m.step);
        free_ctx(c);
        free(p);
        return -1;
    }

    if (c->rank == 0) {
        // RUN/checkpoints a real directory (a link out of RUN is refused); step-N.partial made
        // fresh by mkdir after a stale one (or a link of that name, removed itself) is gone, so
        // HDF5 and MPI-IO create ckpt.h5 in a directory of this save's own
        ok = zt_out_mkdirs(run_dir, c->ckdir) == 0 && zt_remove_tree(c->partial) == 0 &&
             space_check(c->ckdir, estimate_bytes(lay)) == 0;
        if (ok && mkdir(c->partial, 0755) != 0) ok = zt_err("%s: cannot create: %s", c->partial, strerror(errno)) == 0;
    }
    if (agree(comm, ok) != 0) {
        int rc = save_fail(c, 0);
        free_ctx(c);
        free(p);
        return rc;
    }

    agreement ag = {comm, 0};
    hid_t fapl = mpio_fapl(comm, 1);
    c->fid = H5Fcreate(c->file, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    ok = c->fid >= 0 || zt_err("cannot create the file: %s", zt_h5_why()) == 0;
    H5Pclose(fapl);
    if (c->rank == 0 && ok) ok = reserve_space(c->file, estimate_bytes(lay)) == 0;
    if (agree_step(&ag, &ok) == 0) {
        c->dxpl = H5Pcreate(H5P_DATASET_XFER);
        H5Pset_dxpl_mpio(c->dxpl, H5FD_MPIO_COLLECTIVE);
        ok = write_metadata(c, &m, train_json) == 0;
    }
    agree_step(&ag, &ok);
    if (c->io != ZT_SAVE_IO_MPIIO && !ag.failed) {
        ok = open_raw(c) == 0;
        agree_step(&ag, &ok);
    }
    // Testing: ZT_CKPT_DEBUG_PAUSE_S=S pauses every rank for S seconds once half of the units
    // are written (ZT_CKPT_DEBUG_PAUSE_STEP=N: only in the save of step N), after saying so on
    // stderr: the moment a test kills a rank or signals the job in the middle of a write.
    const char *pause_s = getenv("ZT_CKPT_DEBUG_PAUSE_S");
    const int pause_unit = pause_s && *pause_s && hook_step_matches("ZT_CKPT_DEBUG_PAUSE_STEP", m.step)
                               ? lay->nunits / 2 : -1;
    for (int u = 0; u < lay->nunits && !ag.failed; u++) {
        if (u == pause_unit) {
            fprintf(stderr, "zerotrain: rank %d: ZT_CKPT_DEBUG_PAUSE_S: pausing the checkpoint write of step %lld "
                            "after %d of %d units for %s s\n", c->rank, (long long)m.step, u, lay->nunits, pause_s);
            fflush(stderr);
            usleep((useconds_t)(atof(pause_s) * 1e6));
        }
        for (int k = 0; k < ZT_CKPT_NDS; k++)
            if (write_slice(c, u, k) != 0) ok = 0;  // keeps taking part in the unit's collective writes
        agree_step(&ag, &ok);                        // every rank learns of any failure, unit by unit
    }
    close_raw(c);
    last_direct_bytes = c->direct_bytes, last_buffered_bytes = c->buffered_bytes;
    if (getenv("ZT_CKPT_DEBUG_IO") && c->io != ZT_SAVE_IO_MPIIO)
        fprintf(stderr, "zerotrain: rank %d: checkpoint step %lld data: %lld bytes with O_DIRECT, %lld with pwrite\n",
                c->rank, (long long)m.step, (long long)c->direct_bytes, (long long)c->buffered_bytes);
    if (ag.failed && c->rank == 0 && c->fid >= 0) release_space(c->file);
    // Close (flushes metadata and data through MPI-IO), then fsync on every rank.
    for (int i = 0; i < lay->nunits * ZT_CKPT_NDS; i++)
        if (c->ds[i] >= 0) H5Dclose(c->ds[i]), c->ds[i] = -1;
    if (c->dxpl >= 0) H5Pclose(c->dxpl);
    c->dxpl = -1;
    if (c->fid >= 0) {
        herr_t rc = H5Fclose(c->fid);
        c->fid = -1;
        if (ok && rc < 0) ok = zt_err("closing (flushing) the file failed: %s", zt_h5_why()) == 0;
    }
    if (ok) ok = fsync_path(c->file, 0) == 0;
    if (agree_step(&ag, &ok) != 0) {
        close_all(c);
        int rc = save_fail(c, 0);
        free_ctx(c);
        free(p);
        return rc;
    }
    p->m = m;
    p->c.sh = NULL;  // the data is on disk: the commit never reads the shards
    *out = p;
    return 0;
}

int64_t zt_ckpt_pending_step(const zt_ckpt_pending *p) { return p->c.step; }

void zt_ckpt_pending_free(zt_ckpt_pending *p) {
    if (!p) return;
    free_ctx(&p->c);
    free(p);
}

int zt_ckpt_commit_partial(MPI_Comm comm, zt_ckpt_pending *p, int keep_last, char *out_path, size_t out_len) {
    save_ctx *c = &p->c;
    c->comm = comm;  // may differ from the write phase's (the background writer's own)
    int ok = 1, committed = 0;
    if (c->rank == 0) {
        ok = commit(c, &p->m, p->t0, &committed) == 0;
        if (ok) prune(c->ckdir, c->name, keep_last);
    }
    MPI_Bcast(&committed, 1, MPI_INT, 0, comm);
    int rc = 0;
    if (agree(comm, ok) != 0) rc = save_fail(c, committed);
    else if (out_path) snprintf(out_path, out_len, "%s", c->final_dir);
    zt_ckpt_pending_free(p);
    return rc;
}

int zt_ckpt_save(MPI_Comm comm, const char *run_dir, const zt_ckpt_meta *meta_in, const zt_model_layout *lay,
                 const char *train_json, const zt_ckpt_shards *sh, int keep_last, char *out_path, size_t out_len) {
    zt_ckpt_pending *p;
    if (zt_ckpt_write_partial(comm, run_dir, meta_in, lay, train_json, sh, &p) != 0) return -1;
    return zt_ckpt_commit_partial(comm, p, keep_last, out_path, out_len);
}

// ---- load -------------------------------------------------------------------------

// Collective read of elements [a, a + n) of d into buf (n may be 0). -1 + zt_err.
static int read_range(hid_t d, const char *where, hid_t dxpl, int64_t a, int64_t n, float *buf) {
    hid_t fs = H5Dget_space(d);
    hsize_t one = 1;
    hid_t ms;
    static float dummy;
    if (n > 0) {
        hsize_t start = (hsize_t)a, count = (hsize_t)n;
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
        ms = H5Screate_simple(1, &count, NULL);
    } else {
        H5Sselect_none(fs);
        ms = H5Screate_simple(1, &one, NULL);
        H5Sselect_none(ms);
        buf = &dummy;
    }
    herr_t rc = H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, dxpl, buf);
    if (rc < 0) zt_err("%s: read of elements [%lld, %lld) failed: %s", where, (long long)a, (long long)(a + n),
                       zt_h5_why());
    H5Sclose(ms);
    H5Sclose(fs);
    return rc < 0 ? -1 : 0;
}

static int compare_tables(const char *file, int u, const zt_ckpt_unit_info *got, const zt_unit_layout *want) {
    zt_ckpt_unit_info w;
    tensors_of(want, &w);
    if (got->numel != w.numel || got->ntensors != w.ntensors)
        return zt_err("%s: unit %d holds %d tensors in %lld elements; the run's model has %d tensors in %lld", file,
                      u, got->ntensors, (long long)got->numel, w.ntensors, (long long)w.numel);
    for (int i = 0; i < w.ntensors; i++) {
        const zt_ckpt_tensor *a = &got->t[i], *b = &w.t[i];
        if (strcmp(a->name, b->name) || a->offset != b->offset || a->ndim != b->ndim || a->shape[0] != b->shape[0] ||
            (a->ndim == 2 && a->shape[1] != b->shape[1]))
            return zt_err("%s: unit %d tensor %d is %s at offset %lld in the checkpoint, but %s at offset %lld in the "
                          "run's model layout",
                          file, u, i, a->name, (long long)a->offset, b->name, (long long)b->offset);
    }
    return 0;
}

// What identifies the file a rank is about to load: its size and modification time (the
// same file seen from every node of a shared file system has both; another checkpoint, or a
// stale copy of one, does not).
typedef struct {
    int64_t size, mtime_s, mtime_ns;
} file_ident;

// " (step N)" for a step-NNNNNNNN directory, "" otherwise.
static void step_of(const char *dir, char *out, size_t n) {
    const char *base = strrchr(dir, '/');
    int64_t step;
    out[0] = 0;
    if (is_step_name(base ? base + 1 : dir, &step)) snprintf(out, n, " (step %lld)", (long long)step);
}

// Collective, after every rank resolved `dir`: 0 when every rank's ckpt.h5 is the same file
// (size and modification time); else ZT_CKPT_LOAD_DIFFERENT + the same zt_err on every rank,
// naming each distinct checkpoint and the ranks that resolved it. A collective open of
// different files would mix them: HDF5 reads the metadata on one rank and broadcasts it, so the
// other ranks' data meets another file's checksums (reported as corruption) or a later
// collective write splits between two directories and hangs.
static int agree_same_file(MPI_Comm comm, const char *dir, const char *file) {
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    struct stat st;
    file_ident me = {-1, 0, 0};
    if (stat(file, &st) == 0) me = (file_ident){(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
    int64_t mine[3] = {me.size, me.mtime_s, me.mtime_ns}, lo[3], hi[3];
    MPI_Allreduce(mine, lo, 3, MPI_INT64_T, MPI_MIN, comm);
    MPI_Allreduce(mine, hi, 3, MPI_INT64_T, MPI_MAX, comm);
    if (!memcmp(lo, hi, sizeof lo)) return 0;
    // they differ: every rank's identity and directory, for a message that names them all
    enum { PATH = 512 };
    int64_t *ids = zt_xmalloc((size_t)world * 3 * sizeof(int64_t));
    char *paths = zt_xmalloc((size_t)world * PATH), here[PATH];
    snprintf(here, sizeof here, "%.*s", PATH - 1, dir);  // a longer path is shown cut
    MPI_Allgather(mine, 3, MPI_INT64_T, ids, 3, MPI_INT64_T, comm);
    MPI_Allgather(here, PATH, MPI_CHAR, paths, PATH, MPI_CHAR, comm);
    char msg[ZT_ERR_MAX - 512];
    size_t used = (size_t)snprintf(msg, sizeof msg, "the ranks resolved different checkpoints:");
    int *group = zt_xmalloc((size_t)world * sizeof(int)), ngroups = 0;
    for (int r = 0; r < world; r++) group[r] = -1;
    for (int r = 0; r < world && used < sizeof msg; r++) {
        if (group[r] >= 0) continue;
        int count = 0;
        char ranks[256] = "";
        size_t rl = 0;
        for (int q = r; q < world; q++) {
            if (group[q] >= 0 || memcmp(ids + 3 * q, ids + 3 * r, 3 * sizeof(int64_t))) continue;
            group[q] = ngroups;
            if (count++ < 8 && rl < sizeof ranks)  // at most eight ranks named per checkpoint, then a count
                rl += (size_t)snprintf(ranks + rl, sizeof ranks - rl, "%s%d", count > 1 ? ", " : "", q);
        }
        if (count > 8) snprintf(ranks + rl, sizeof ranks - rl, " and %d more", count - 8);
        char step[48], what[96] = "missing";
        const char *pr = paths + (size_t)r * PATH;
        step_of(pr, step, sizeof step);
        const int64_t *id = ids + 3 * r;
        if (id[0] >= 0) {
            struct tm tm;
            time_t t = (time_t)id[1];
            gmtime_r(&t, &tm);
            char day[32];
            strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
            snprintf(what, sizeof what, "%lld bytes, modified %s.%09lldZ", (long long)id[0], day, (long long)id[2]);
        }
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%s rank%s %s: %s%s (%s: %s)", ngroups ? ";" : "",
                                 count == 1 ? "" : "s", ranks, pr, step, ZT_CKPT_FILE, what);
        ngroups++;
    }
    free(group);
    free(ids);
    free(paths);
    zt_err("%.3000s. Every rank must load the same checkpoint: their views of the run directory differ (a node "
           "with its own or a stale copy of it?) or latest moved while they read it; nothing was loaded. The "
           "checkpoints themselves are not known to be damaged",
           msg);
    return ZT_CKPT_LOAD_DIFFERENT;
}

int zt_ckpt_load(MPI_Comm comm, const char *ckpt_dir, const zt_model_layout *lay, zt_ckpt_meta *meta_out,
                 const zt_ckpt_shards *sh) {
    zt_h5_quiet();
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    char dir[4096], file[4200];
    int ok = zt_ckpt_resolve(ckpt_dir, dir, sizeof dir) == 0 && check_shards(lay, sh) == 0;
    if (agree(comm, ok) != 0) return zt_ckpt_err_prefix("loading checkpoint"), -1;
    snprintf(file, sizeof file, "%s/%s", dir, ZT_CKPT_FILE);
    if (agree_same_file(comm, dir, file) != 0) return zt_ckpt_err_prefix("loading checkpoint"), ZT_CKPT_LOAD_DIFFERENT;

    hid_t fapl = mpio_fapl(comm, 0);
    hid_t fid = H5Fopen(file, H5F_ACC_RDONLY, fapl);
    if (fid < 0) {
        const char *why = zt_h5_why();
        ok = zt_err(strstr(why, "truncated file") ? "%s: the file is truncated (shorter than its own superblock says: "
                                                    "%s); the checkpoint is incomplete or damaged and is refused"
                                                  : "%s: cannot open as HDF5: %s",
                    file, why) == 0;
    }
    H5Pclose(fapl);
    if (agree(comm, ok) != 0) {
        if (fid >= 0) H5Fclose(fid);
        return zt_ckpt_err_prefix("loading checkpoint"), -1;
    }
    zt_ckpt_meta meta;
    zt_model_config cfg;
    int nunits = 0;
    ok = zt_ckpt_read_header(fid, file, &meta, &cfg, NULL, NULL, &nunits) == 0;
    if (ok) {
        char diff[1500];
        if (zt_ckpt_config_diff(&cfg, &lay->cfg, diff, sizeof diff) > 0)
            ok = zt_err("%s was saved for a different model: %s", dir, diff) == 0;
    }
    zt_ckpt_unit_info *ui = zt_xcalloc((size_t)lay->nunits, sizeof *ui);
    for (int u = 0; u < lay->nunits && ok; u++)
        ok = zt_ckpt_read_unit(fid, file, u, &ui[u]) == 0 && compare_tables(file, u, &ui[u], &lay->units[u]) == 0;

    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    float *tail = NULL;
    int64_t tail_cap = 0;
    agreement ag = {comm, 0};
    if (agree_step(&ag, &ok) == 0) {
        for (int u = 0; u < lay->nunits && ok; u++) {
            const zt_ckpt_slice *s = &sh->unit[u];
            hid_t d[ZT_CKPT_NDS] = {-1, -1, -1};
            uint32_t *crc[ZT_CKPT_NDS] = {NULL, NULL, NULL};
            int64_t chunk[ZT_CKPT_NDS] = {0}, nch;
            char where[ZT_CKPT_NDS][4400];
            for (int k = 0; k < ZT_CKPT_NDS && ok; k++) {
                snprintf(where[k], sizeof where[k], "%s: /units/%03d/%s", file, u, zt_ckpt_ds_names[k]);
                d[k] = H5Dopen2(fid, where[k] + strlen(file) + 2, H5P_DEFAULT);
                if (d[k] < 0)
                    ok = zt_err("%s: cannot open the dataset: %s", where[k], zt_h5_why()) == 0;
                else
                    ok = zt_ckpt_read_crc(d[k], where[k], s->numel, &chunk[k], &crc[k], &nch) == 0;
            }
            if (agree_step(&ag, &ok) == 0) {
                for (int k = 0; k < ZT_CKPT_NDS; k++) {
                    // This rank verifies the chunks that start inside its slice; the last of them may
                    // run past the slice, so read that tail too.
                    const int64_t ch = chunk[k], end = s->lo + s->valid;
                    const int64_t c0 = (s->lo + ch - 1) / ch, c1 = s->valid > 0 ? (end - 1) / ch : -1;
                    int64_t tail_end = end;
                    if (c1 >= c0) tail_end = (c1 + 1) * ch < s->numel ? (c1 + 1) * ch : s->numel;
                    if (tail_end < end) tail_end = end;
                    const int64_t nt = tail_end - end;
                    if (nt > tail_cap) {
                        free(tail);
                        tail = zt_xmalloc((size_t)(tail_cap = nt) * sizeof(float));
                    }
                    float *dst = (float *)slice_ptr(s, k);
                    int r1 = read_range(d[k], where[k], dxpl, s->lo, s->valid, dst);
                    int r2 = read_range(d[k], where[k], dxpl, end, nt, tail);  // collective: always called
                    if (r1 != 0 || r2 != 0) {
                        ok = 0;
                        continue;  // the remaining collective reads still happen
                    }
                    for (int64_t cc = c0; cc <= c1 && ok; cc++) {
                        int64_t a = cc * ch, b = a + ch < s->numel ? a + ch : s->numel;
                        int64_t in = (b < end ? b : end) - a;
                        uint32_t got = zt_crc32c(0, dst + (a - s->lo), (size_t)in * sizeof(float));
                        if (b > end) got = zt_crc32c(got, tail, (size_t)(b - end) * sizeof(float));
                        if (got != crc[k][cc]) {
                            char lbl[64], span[256];
                            zt_ckpt_span_tensors(&ui[u], a, b, span, sizeof span);
                            ok = zt_err("%s (unit %d, %s): crc32c mismatch in chunk %lld (elements [%lld, %lld) of "
                                        "%lld: %s): stored 0x%08x, computed 0x%08x; the checkpoint is corrupt and is "
                                        "refused (an earlier checkpoint may still be intact)",
                                        where[k], u, zt_ckpt_unit_label(&ui[u], lbl, sizeof lbl), (long long)cc,
                                        (long long)a, (long long)b, (long long)s->numel, span, crc[k][cc], got) == 0;
                        }
                    }
                }
                agree_step(&ag, &ok);
            }
            for (int k = 0; k < ZT_CKPT_NDS; k++) {
                if (d[k] >= 0) H5Dclose(d[k]);
                free(crc[k]);
            }
        }
    }
    free(tail);
    free(ui);
    H5Pclose(dxpl);
    herr_t cr = H5Fclose(fid);
    if (ok && cr < 0) ok = zt_err("%s: close failed: %s", file, zt_h5_why()) == 0;
    if (agree_step(&ag, &ok) != 0) return zt_ckpt_err_prefix("loading checkpoint"), -1;
    if (meta_out) *meta_out = meta;
    return 0;
}
