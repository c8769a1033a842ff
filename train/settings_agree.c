// Every rank's settings agree before a job touches anything (train/settings_agree.h): each
// rank's resolved flags and its run file's CRC-32C as "key=value" lines, gathered on rank 0,
// compared there, the verdict broadcast so that every rank refuses with the same message.
#include "train/settings_agree.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

static int is_per_rank(const char *key, const char *const *per_rank) {
    for (int i = 0; per_rank && per_rank[i]; i++)
        if (!strcmp(key, per_rank[i])) return 1;
    return 0;
}

// This rank's settings as lines "key=value" (the value as compact JSON), then the run
// file's CRC: the bytes compared, so a file that differs only in a comment is a difference
// too (run.json records rank 0's file and CRC for every rank).
static char *settings_text(const char *json, const char *config_file, unsigned crc, const char *const *per_rank) {
    size_t cap = 256, len = 0;
    char *t = zt_xmalloc(cap);
    t[0] = 0;
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *it = root ? root->child : NULL;
        for (;; it = it->next) {
            char *val = NULL;
            const char *key;
            if (pass == 0) {
                if (!it) break;
                key = it->string;
                if (!key || is_per_rank(key, per_rank)) continue;
                val = cJSON_PrintUnformatted(it);
            } else {
                key = "config_file_crc32c";
                char buf[32] = "none";
                if (config_file) snprintf(buf, sizeof buf, "%08x", crc);
                val = strdup(buf);
            }
            const size_t need = strlen(key) + strlen(val ? val : "?") + 3;
            while (len + need >= cap) cap *= 2;
            t = realloc(t, cap);
            if (!t) zt_fatal("out of host memory comparing the ranks' settings");
            len += (size_t)snprintf(t + len, cap - len, "%s=%s\n", key, val ? val : "?");
            free(val);
            if (pass == 1) break;
        }
    }
    cJSON_Delete(root);
    return t;
}

// The value of `key` in a settings text (a pointer into it, its length in *n), or NULL.
static const char *find_value(const char *text, const char *key, size_t *n) {
    const size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol) eol = p + strlen(p);
        if ((size_t)(eol - p) > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            *n = (size_t)(eol - p) - kl - 1;
            return p + kl + 1;
        }
        p = *eol ? eol + 1 : eol;
    }
    return NULL;
}

// Appends to out (bounded) what printf would print.
static void append(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *out, size_t cap, const char *fmt, ...) {
    const size_t n = strlen(out);
    if (n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, cap - n, fmt, ap);
    va_end(ap);
}

// "rank 3" or "ranks 0-1,4" for the ranks r with mark[r] set.
static void append_ranks(char *out, size_t cap, const unsigned char *mark, int n) {
    int count = 0;
    for (int r = 0; r < n; r++) count += mark[r];
    append(out, cap, count == 1 ? "rank " : "ranks ");
    int first = 1;
    for (int r = 0; r < n; r++) {
        if (!mark[r]) continue;
        int e = r;
        while (e + 1 < n && mark[e + 1]) e++;
        append(out, cap, e > r ? "%s%d-%d" : "%s%d", first ? "" : ",", r, e);
        first = 0;
        r = e;
    }
}

// Marks (in mark, and in done) the ranks from r on whose value of key equals rank r's;
// returns rank r's value (NULL: not set) and its length in *len.
static const char *same_value(const char *const *texts, int n, const char *key, int r, unsigned char *mark,
                              unsigned char *done, size_t *len) {
    const char *vr = find_value(texts[r], key, len);
    memset(mark, 0, (size_t)n);
    for (int q = r; q < n; q++) {
        size_t lq = 0;
        const char *vq = find_value(texts[q], key, &lq);
        if ((!vr && !vq) || (vr && vq && *len == lq && !memcmp(vr, vq, lq))) mark[q] = done[q] = 1;
    }
    return vr;
}

int zt_settings_diff(const char *const *texts, int n, const char *const *per_rank, char *out, size_t cap) {
    out[0] = 0;
    // The common case in one pass: every rank sent rank 0's text (the key-by-key search below
    // grows as ranks^2 x keys, which a large job with long texts would feel).
    int same = 1;
    for (int r = 1; r < n && same; r++) same = !strcmp(texts[r], texts[0]);
    if (same) return 0;
    int differ = 0;
    unsigned char *done = zt_xcalloc((size_t)n, 1), *mark = zt_xcalloc((size_t)n, 1);
    // every key any rank has, in the order of the first rank that has it
    for (int kr = 0; kr < n; kr++) {
        for (const char *p = texts[kr]; *p;) {
            const char *eq = strchr(p, '='), *eol = strchr(p, '\n');
            if (!eol) eol = p + strlen(p);
            char key[320] = "";
            if (eq && eq < eol) snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
            p = *eol ? eol + 1 : eol;
            if (!key[0] || is_per_rank(key, per_rank)) continue;
            size_t l0;
            int named_before = 0;  // an earlier rank's text has this key: compared already
            for (int q = 0; q < kr && !named_before; q++) named_before = find_value(texts[q], key, &l0) != NULL;
            if (named_before) continue;
            memset(done, 0, (size_t)n);
            size_t l;
            same_value(texts, n, key, 0, mark, done, &l);
            int all = 1;
            for (int q = 0; q < n; q++) all &= done[q];
            if (all) continue;  // the common case: every rank has rank 0's value
            // a setting that differs: each value with the ranks holding it, in rank order
            differ++;
            append(out, cap, "%s%s: ", differ > 1 ? "; " : "", key);
            memset(done, 0, (size_t)n);
            for (int r = 0, shown = 0; r < n; r++) {
                if (done[r]) continue;
                const char *v = same_value(texts, n, key, r, mark, done, &l);
                if (v) append(out, cap, "%s%.*s on ", shown ? ", " : "", (int)(l > 200 ? 200 : l), v);
                else append(out, cap, "%s(not set) on ", shown ? ", " : "");
                append_ranks(out, cap, mark, n);
                shown++;
            }
        }
    }
    free(done);
    free(mark);
    return differ;
}

int zt_settings_gather_diff(MPI_Comm comm, const char *mine, const char *const *per_rank, char *msg, size_t cap) {
    int rank = 0, world = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    msg[0] = 0;
    if (world == 1) return 0;
    int len = (int)strlen(mine) + 1;
    int *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (rank == 0) {
        lens = zt_xcalloc((size_t)world, sizeof *lens);
        displs = zt_xcalloc((size_t)world, sizeof *displs);
    }
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, comm);
    if (rank == 0) {
        size_t total = 0;
        for (int r = 0; r < world; r++) {
            displs[r] = (int)total;
            total += (size_t)lens[r];
        }
        all = zt_xmalloc(total);
    }
    MPI_Gatherv(mine, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, comm);
    int differ = 0;
    if (rank == 0) {
        const char **texts = zt_xcalloc((size_t)world, sizeof *texts);
        for (int r = 0; r < world; r++) texts[r] = all + displs[r];
        differ = zt_settings_diff(texts, world, per_rank, msg, cap);
        free(texts);
    }
    MPI_Bcast(&differ, 1, MPI_INT, 0, comm);
    if (differ) MPI_Bcast(msg, (int)cap, MPI_CHAR, 0, comm);
    free(all);
    free(lens);
    free(displs);
    return differ;
}

int zt_settings_agree(MPI_Comm comm, const char *settings_json, const char *config_file, unsigned config_crc32c,
                      const char *const *per_rank) {
    int world = 1;
    MPI_Comm_size(comm, &world);
    if (world == 1) return 0;
    char *mine = settings_text(settings_json, config_file, config_crc32c, per_rank);
    char msg[ZT_ERR_MAX - 256];
    const int differ = zt_settings_gather_diff(comm, mine, per_rank, msg, sizeof msg);
    free(mine);
    if (!differ) return 0;
    return zt_err("the ranks' settings differ (%d setting%s): %s. Every rank resolves its own flags and reads its own "
                  "--config file (a stale copy of a run file on one node does this); start every rank with the same "
                  "flags and the same run file",
                  differ, differ == 1 ? "" : "s", msg);
}
