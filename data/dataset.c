// Opens a `zerotrain pack` dataset directory: parses and validates dataset.json,
// checks each block file's size against it, maps the files read-only, and on
// request re-checks the crc32c and every token id before training touches them.
#define _GNU_SOURCE
#include "data/dataset.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/json_util.h"
#include "base/common.h"
#include "data/chat_jinja.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "block files are little-endian uint32 and are mapped in place: a big-endian host needs a byte-swapping reader"
#endif

// Tokens per OpenMP work item in the id scan: large enough to amortise scheduling,
// small enough that two cores and sixteen cores both balance.
#define ZT_SCAN_CHUNK ((int64_t)1 << 16)
// Largest integer a JSON number (a double) holds exactly.
#define ZT_JSON_INT_MAX ((int64_t)1 << 53)

// Line and column (1-based) of byte offset `off` in `text`, for JSON syntax errors.
static void line_col(const char *text, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

// A short rendering of a JSON value for error messages ("got ...").
static void json_repr(const cJSON *item, char *out, size_t n) {
    char *s = cJSON_PrintUnformatted(item);
    if (!s) {
        snprintf(out, n, "?");
        return;
    }
    if (strlen(s) > 60) snprintf(out, n, "%.57s...", s);
    else snprintf(out, n, "%s", s);
    cJSON_free(s);
}

// Reads integer field `key` of `obj` into *out. Absent fields are an error when
// `required`, else *out is left alone and 0 returned. `ctx` is the JSON path prefix.
static int json_int(const char *jpath, const cJSON *obj, const char *ctx, const char *key, int required,
                    int64_t lo, int64_t hi, int64_t *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) return zt_err("%s: %s%s: required field is missing", jpath, ctx, key);
        return 0;
    }
    double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    if (!(v >= (double)lo && v <= (double)hi) || v != floor(v)) {
        char got[80];
        json_repr(it, got, sizeof got);
        return zt_err("%s: %s%s: must be an integer in [%lld, %lld], got %s", jpath, ctx, key, (long long)lo,
                      (long long)hi, got);
    }
    *out = (int64_t)v;
    return 0;
}

// Reads string field `key` into out[n]; absent is an error only when `required`.
static int json_str(const char *jpath, const cJSON *obj, const char *ctx, const char *key, int required, char *out,
                    size_t n) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) return zt_err("%s: %s%s: required field is missing", jpath, ctx, key);
        return 0;
    }
    if (!cJSON_IsString(it)) {
        char got[80];
        json_repr(it, got, sizeof got);
        return zt_err("%s: %s%s: must be a string, got %s", jpath, ctx, key, got);
    }
    if (strlen(it->valuestring) >= n)
        return zt_err("%s: %s%s: longer than %zu characters", jpath, ctx, key, n - 1);
    snprintf(out, n, "%s", it->valuestring);
    return 0;
}

// "0x1234abcd" (1-8 hex digits after 0x) -> value.
static int parse_crc_hex(const char *s, uint32_t *out) {
    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return -1;
    size_t n = strlen(s + 2);
    if (n < 1 || n > 8) return -1;
    uint32_t v = 0;
    for (const char *p = s + 2; *p; p++) {
        int d;
        if (*p >= '0' && *p <= '9') d = *p - '0';
        else if (*p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F') d = *p - 'A' + 10;
        else return -1;
        v = (v << 4) | (uint32_t)d;
    }
    *out = v;
    return 0;
}

// A file name in dataset.json must stay inside the dataset directory.
static int safe_name(const char *s) {
    return s[0] && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && strcmp(s, "dataset.json");
}

static int parse_files(zt_dataset *ds, const char *jpath, const cJSON *files) {
    if (!cJSON_IsArray(files)) {
        char got[80];
        json_repr(files, got, sizeof got);
        return zt_err("%s: files: must be an array of {name, blocks, tokens, crc32c}, got %s", jpath, got);
    }
    int n = cJSON_GetArraySize(files);
    if (n < 1) return zt_err("%s: files: is empty; a dataset needs at least one block file", jpath);
    ds->files = zt_xcalloc((size_t)n, sizeof *ds->files);
    ds->nfiles = n;
    int i = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, files) {
        zt_data_file *df = &ds->files[i];
        char ctx[48];
        snprintf(ctx, sizeof ctx, "files[%d].", i);
        if (!cJSON_IsObject(f)) return zt_err("%s: files[%d]: must be an object {name, blocks, tokens, crc32c}", jpath, i);
        char crc[32];
        if (json_str(jpath, f, ctx, "name", 1, df->name, sizeof df->name) ||
            json_int(jpath, f, ctx, "blocks", 1, 0, ZT_JSON_INT_MAX, &df->blocks) ||
            json_int(jpath, f, ctx, "tokens", 1, 0, ZT_JSON_INT_MAX, &df->tokens) ||
            json_str(jpath, f, ctx, "crc32c", 1, crc, sizeof crc))
            return -1;
        if (!safe_name(df->name))
            return zt_err("%s: %sname: \"%s\" is not a plain file name inside the dataset directory", jpath, ctx,
                          df->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(ds->files[j].name, df->name))
                return zt_err("%s: %sname: \"%s\" is listed twice (also files[%d])", jpath, ctx, df->name, j);
        if (parse_crc_hex(crc, &df->crc32c))
            return zt_err("%s: %scrc32c: \"%s\" is not a hex checksum like \"0x1234abcd\"", jpath, ctx, crc);
        int64_t want;
        if (__builtin_mul_overflow(df->blocks, (int64_t)ds->seq_len, &want) || want > ZT_JSON_INT_MAX)
            return zt_err("%s: %sblocks: %lld blocks of seq_len %d is more tokens than can exist (over 2^53)", jpath,
                          ctx, (long long)df->blocks, ds->seq_len);
        if (df->tokens != want)
            return zt_err("%s: %stokens: %lld is not blocks * seq_len = %lld * %d = %lld", jpath, ctx,
                          (long long)df->tokens, (long long)df->blocks, ds->seq_len, (long long)want);
        if ((size_t)snprintf(df->path, sizeof df->path, "%s/%s", ds->dir, df->name) >= sizeof df->path)
            return zt_err("%s: %sname: path %s/%s is too long", jpath, ctx, ds->dir, df->name);
        i++;
    }
    return 0;
}

static int parse_json(zt_dataset *ds, const char *jpath, const char *text, size_t len) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        int line, col;
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        line_col(text, off, &line, &col);
        char deep[160];
        if (zt_json_depth_error(text, len, off + 1, deep, sizeof deep)) return zt_err("%s: %s", jpath, deep);
        return zt_err("%s: line %d column %d: not valid JSON (a damaged or hand-edited file? re-run `zerotrain "
                      "pack` into a new directory)",
                      jpath, line, col);
    }
    int rc = -1;
    char format[64] = "";
    int64_t version = 0, seq_len = 0;
    if (!cJSON_IsObject(root)) {
        zt_err("%s: top level must be a JSON object", jpath);
        goto out;
    }
    if (json_str(jpath, root, "", "format", 1, format, sizeof format)) goto out;
    if (strcmp(format, ZT_DATASET_FORMAT)) {
        zt_err("%s: format: \"%s\" is not \"%s\" (not a zerotrain token dataset)", jpath, format, ZT_DATASET_FORMAT);
        goto out;
    }
    if (json_int(jpath, root, "", "version", 1, 0, ZT_JSON_INT_MAX, &version)) goto out;
    if (version != ZT_DATASET_VERSION && version != ZT_DATASET_VERSION_FLAGS) {
        zt_err("%s: version: %lld is not supported (this zerotrain reads versions %d and %d%s)", jpath,
               (long long)version, ZT_DATASET_VERSION, ZT_DATASET_VERSION_FLAGS,
               version > ZT_DATASET_VERSION_FLAGS ? "; the dataset was written by a newer zerotrain" : "");
        goto out;
    }
    ds->version = (int)version;
    ds->trained_tokens = -1;
    if (version == ZT_DATASET_VERSION_FLAGS) {
        // the flag bits are fixed by the format; a dataset claiming others was not written by pack
        const cJSON *tf = cJSON_GetObjectItemCaseSensitive(root, "token_flags");
        int64_t ds_bit = -1, nl_bit = -1;
        if (!cJSON_IsObject(tf)) {
            zt_err("%s: token_flags: version 2 needs {\"doc_start_bit\": 30, \"no_loss_bit\": 31}", jpath);
            goto out;
        }
        if (json_int(jpath, tf, "token_flags.", "doc_start_bit", 1, 0, 31, &ds_bit) ||
            json_int(jpath, tf, "token_flags.", "no_loss_bit", 1, 0, 31, &nl_bit))
            goto out;
        if (ds_bit != 30 || nl_bit != 31) {
            zt_err("%s: token_flags: doc_start_bit %lld, no_loss_bit %lld; version 2 words use bit 30 for a "
                   "document start and bit 31 for no loss",
                   jpath, (long long)ds_bit, (long long)nl_bit);
            goto out;
        }
        ds->token_flags = 1;
        if (json_int(jpath, root, "", "trained_tokens", 0, 0, ZT_JSON_INT_MAX, &ds->trained_tokens)) goto out;
    }
    char attn[32] = "full";
    if (json_str(jpath, root, "", "doc_attention", 0, attn, sizeof attn)) goto out;
    if (strcmp(attn, "full") && strcmp(attn, "isolated")) {
        zt_err("%s: doc_attention: \"%s\" is not one of \"isolated\", \"full\"", jpath, attn);
        goto out;
    }
    if (!strcmp(attn, "isolated") && !ds->token_flags) {
        zt_err("%s: doc_attention: \"isolated\" needs document boundaries, which only version 2 datasets store",
               jpath);
        goto out;
    }
    ds->doc_isolated = !strcmp(attn, "isolated");
    // A block needs at least 2 tokens to give one (input, target) pair.
    if (json_int(jpath, root, "", "seq_len", 1, 2, (int64_t)1 << 30, &seq_len)) goto out;
    if (seq_len > ZT_SEQ_LEN_MAX) {
        zt_err("%s: seq_len: %lld is above the maximum of %d tokens per block (Qwen3's YaRN range, 4 x 32,768; the "
               "longest block pack writes and this loader is tested at): repack with --seq-len %d or less",
               jpath, (long long)seq_len, ZT_SEQ_LEN_MAX, ZT_SEQ_LEN_MAX);
        goto out;
    }
    ds->seq_len = (int)seq_len;
    // Token ids are uint32, so a vocabulary above 2^32 could not be addressed.
    if (json_int(jpath, root, "", "vocab_size", 1, 1, (int64_t)1 << 32, &ds->vocab_size)) goto out;
    ds->eos_id = -1;
    if (json_int(jpath, root, "", "eos_id", 0, 0, ds->vocab_size - 1, &ds->eos_id)) goto out;
    if (json_str(jpath, root, "", "tokenizer", 0, ds->tokenizer, sizeof ds->tokenizer)) goto out;
    if (json_str(jpath, root, "", "chat_template", 0, ds->chat_template, sizeof ds->chat_template)) goto out;
    if (json_str(jpath, root, "", "model_chat_template", 0, ds->model_chat_template, sizeof ds->model_chat_template))
        goto out;
    char layout[32] = "single";
    if (json_str(jpath, root, "", "layout", 0, layout, sizeof layout)) goto out;
    if (strcmp(layout, "single") && strcmp(layout, "per-rank")) {
        zt_err("%s: layout: \"%s\" is not one of \"single\", \"per-rank\"", jpath, layout);
        goto out;
    }
    ds->per_rank = !strcmp(layout, "per-rank");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (!files) {
        zt_err("%s: files: required field is missing", jpath);
        goto out;
    }
    rc = parse_files(ds, jpath, files);
out:
    cJSON_Delete(root);
    return rc;
}


// ---- a file that changes under its mapping ----------------------------------------------
// Reading a mapped page past a file's new end raises SIGBUS, and a file rewritten in place
// (cp over it) silently feeds other tokens. zt_dataset_read_block copies a block under a
// guard (a SIGBUS inside the copy jumps back and becomes an error) between two checks of the
// file's size, modification and status change times against those at open, then checks the
// copied ids against the vocabulary. Elsewhere (the checksum pass at
// open), the handler names the mapped file the fault hit before the process ends as it would.

#define ZT_MAP_REGISTRY 1024
static struct { const char *addr; size_t len; const char *path; } g_maps[ZT_MAP_REGISTRY];
static pthread_mutex_t g_maps_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction g_prev_bus;
static pthread_once_t g_bus_once = PTHREAD_ONCE_INIT;
static __thread sigjmp_buf *volatile t_guard;

static void put_str(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    if (t_guard) siglongjmp(*t_guard, 1);
    const char *a = si ? (const char *)si->si_addr : NULL;
    for (int i = 0; a && i < ZT_MAP_REGISTRY; i++)
        if (g_maps[i].addr && a >= g_maps[i].addr && a < g_maps[i].addr + g_maps[i].len) {
            put_str("zerotrain: error: SIGBUS reading ");
            put_str(g_maps[i].path);
            put_str(": the file changed while it was in use (truncated or rewritten in place); the process ends\n");
            break;
        }
    if ((g_prev_bus.sa_flags & SA_SIGINFO) && g_prev_bus.sa_sigaction) {
        g_prev_bus.sa_sigaction(sig, si, uc);
    } else if (!(g_prev_bus.sa_flags & SA_SIGINFO) && g_prev_bus.sa_handler != SIG_DFL &&
               g_prev_bus.sa_handler != SIG_IGN) {
        g_prev_bus.sa_handler(sig);
    }
    signal(SIGBUS, SIG_DFL);  // the faulting access runs again and ends the process with SIGBUS
}

static void install_sigbus(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_prev_bus);
}

static void register_map(const zt_data_file *f, int add) {
    pthread_once(&g_bus_once, install_sigbus);
    pthread_mutex_lock(&g_maps_mu);
    for (int i = 0; i < ZT_MAP_REGISTRY; i++) {
        if (add && !g_maps[i].addr) {
            g_maps[i].len = f->bytes, g_maps[i].path = f->path;
            __atomic_store_n(&g_maps[i].addr, (const char *)f->data, __ATOMIC_RELEASE);
            break;
        }
        if (!add && g_maps[i].addr == (const char *)f->data) {
            __atomic_store_n(&g_maps[i].addr, NULL, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&g_maps_mu);
}

static int same_time(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

static void fmt_time(struct timespec t, char *out, size_t n) {
    struct tm tm;
    time_t s = t.tv_sec;
    gmtime_r(&s, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "%s.%09ldZ", day, (long)t.tv_nsec);
}

// 1 and why when the path no longer names the opened file (removed, or another file renamed
// over it: the mapping stays on the old inode, so the data is no longer what the directory
// holds and a resume would read the other file); else 0.
static int path_moved(const zt_data_file *f, char *why, size_t n) {
    struct stat ps;
    if (stat(f->path, &ps) != 0) {
        snprintf(why, n, "the path no longer names it (%s): removed or renamed", strerror(errno));
        return 1;
    }
    if ((uint64_t)ps.st_dev != f->dev || (uint64_t)ps.st_ino != f->ino) {
        snprintf(why, n,
                 "the path now names another file (inode %llu, training opened inode %llu): it was replaced, e.g. "
                 "renamed over by rsync without --inplace or by an editor",
                 (unsigned long long)ps.st_ino, (unsigned long long)f->ino);
        return 1;
    }
    return 0;
}

// 0 when the file is the one opened, with the size and times it had at open; else 1 and why.
// One fstat: every change to the opened file moves its ctime, being unlinked or renamed over
// too (its link count falls), so the path is looked up (to say which) only once ctime moved.
static int file_changed(const zt_data_file *f, char *why, size_t n) {
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        snprintf(why, n, "it cannot be examined any more: %s", strerror(errno));
        return 1;
    }
    if ((uint64_t)st.st_size != (uint64_t)f->bytes) {
        snprintf(why, n, "it now holds %lld bytes, %zu when training opened it", (long long)st.st_size, f->bytes);
        return 1;
    }
    if (!same_time(st.st_mtim, f->mtime)) {
        snprintf(why, n, "it was written to after training opened it (same size, new modification time)");
        return 1;
    }
    if (!same_time(st.st_ctim, f->ctime)) {
        // mtime and size as at open, ctime moved: unlinked or renamed over (its link count fell),
        // written with the modification time put back (touch -r, rsync --inplace -t), or its
        // mode or owner changed; either way the bytes are no longer known to be the packed ones
        if (path_moved(f, why, n)) return 1;
        char was[48], now[48];
        fmt_time(f->ctime, was, sizeof was);
        fmt_time(st.st_ctim, now, sizeof now);
        snprintf(why, n,
                 "its status change time moved from %s to %s while its size and modification time stayed: it was "
                 "rewritten in place with its modification time restored (touch -r, rsync --inplace -t), or its "
                 "mode, owner or links changed",
                 was, now);
        return 1;
    }
    return 0;
}

// Index of the first word of w[0..n) whose id is >= limit, or -1 (limit > 2^32 - 1: none).
static int64_t first_id_out_of_range(const uint32_t *w, int64_t n, int64_t limit, uint32_t id_mask) {
    if (limit > (int64_t)UINT32_MAX) return -1;
    uint32_t mx = 0;
    for (int64_t j = 0; j < n; j++) mx = (w[j] & id_mask) > mx ? (w[j] & id_mask) : mx;  // branch-free: vectorises
    if (mx < (uint32_t)limit) return -1;
    for (int64_t j = 0; j < n; j++)
        if ((w[j] & id_mask) >= (uint32_t)limit) return j;
    return -1;
}

int zt_copy_guarded(void *dst, const void *src, size_t n) {
    pthread_once(&g_bus_once, install_sigbus);
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1)) {  // SIGBUS inside the copy: the pages are gone
        t_guard = NULL;
        return -1;
    }
    t_guard = &jb;
    memcpy(dst, src, n);
    t_guard = NULL;
    return 0;
}

int zt_dataset_read_block(const zt_dataset *ds, int file, int64_t block, uint32_t *dst) {
    if (file < 0 || file >= ds->nfiles || block < 0 || block >= ds->files[file].blocks)
        return zt_err("%s: block %lld of file %d is out of range", ds->dir, (long long)block, file);
    const zt_data_file *f = &ds->files[file];
    const size_t n = (size_t)ds->seq_len * sizeof(uint32_t);
    char why[600];
    if (file_changed(f, why, sizeof why)) goto changed;
    if (zt_copy_guarded(dst, f->data + block * (int64_t)ds->seq_len, n) != 0) {
        snprintf(why, sizeof why, "reading it raised SIGBUS: it was truncated under the mapping");
        goto changed;
    }
    if (file_changed(f, why, sizeof why)) goto changed;
    // The ids were checked at open; one out of range now means other bytes than the packed ones
    // (a change the file's times do not show): it must never reach an embedding lookup.
    const uint32_t id_mask = ds->token_flags ? ZT_TOK_ID_MASK : UINT32_MAX;
    const int64_t bad = first_id_out_of_range(dst, ds->seq_len, ds->vocab_size, id_mask);
    if (bad >= 0) {
        snprintf(why, sizeof why, "position %lld of block %lld holds token id %u, not below vocab_size %lld",
                 (long long)bad, (long long)block, dst[bad] & id_mask, (long long)ds->vocab_size);
        goto changed;
    }
    return 0;
changed:
    return zt_err("%s: the file changed while training (%s); block %lld cannot be read as the data packed into "
                  "it (dataset.json's crc32c 0x%08x)",
                  f->path, why, (long long)block, f->crc32c);
}

int zt_dataset_check_unchanged(const zt_dataset *ds, int file) {
    char why[600];
    if (file < 0 || file >= ds->nfiles || !file_changed(&ds->files[file], why, sizeof why)) return 0;
    return zt_err("%s: the file changed while training (%s)", ds->files[file].path, why);
}

// Size check and read-only map of one block file (its descriptor stays open: the change check).
static int map_file(const zt_dataset *ds, zt_data_file *f) {
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return zt_err("%s: cannot open (listed in %s/dataset.json): %s", f->path, ds->dir, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return zt_err("%s: cannot stat: %s", f->path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return zt_err("%s: not a regular file", f->path);
    }
    uint64_t size = (uint64_t)st.st_size, bb = 4 * (uint64_t)ds->seq_len;
    if (size % bb) {
        close(fd);
        return zt_err("%s: truncated: %llu bytes is not a whole number of %d-token blocks (4*%d = %llu bytes "
                      "each); last block has %llu bytes",
                      f->path, (unsigned long long)size, ds->seq_len, ds->seq_len, (unsigned long long)bb,
                      (unsigned long long)(size % bb));
    }
    if ((int64_t)(size / bb) != f->blocks) {
        close(fd);
        return zt_err("%s: holds %llu blocks (%llu bytes / 4 / seq_len %d) but dataset.json says %lld blocks",
                      f->path, (unsigned long long)(size / bb), (unsigned long long)size, ds->seq_len,
                      (long long)f->blocks);
    }
    f->bytes = (size_t)size;
    f->data = NULL;
    if (size > 0) {
        void *p = mmap(NULL, f->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return zt_err("%s: mmap of %zu bytes failed: %s", f->path, f->bytes, strerror(e));
        }
        f->data = p;
        register_map(f, 1);
    }
    f->fd = fd;
    f->fd_open = 1;
    f->mtime = st.st_mtim;
    f->ctime = st.st_ctim;
    f->dev = (uint64_t)st.st_dev;
    f->ino = (uint64_t)st.st_ino;
    return 0;
}

// Index of the first token >= lim in d[0..n), or -1. Chunks run in parallel; the
// min-reduction keeps the answer the lowest index whatever the thread timing.
static int64_t first_bad_token(const uint32_t *d, int64_t n, uint32_t lim, uint32_t id_mask) {
    int64_t nch = (n + ZT_SCAN_CHUNK - 1) / ZT_SCAN_CHUNK, first = INT64_MAX;
#pragma omp parallel for schedule(dynamic, 4) reduction(min : first) if (nch > 1)
    for (int64_t c = 0; c < nch; c++) {
        const uint32_t *p = d + c * ZT_SCAN_CHUNK;
        int64_t m = n - c * ZT_SCAN_CHUNK < ZT_SCAN_CHUNK ? n - c * ZT_SCAN_CHUNK : ZT_SCAN_CHUNK;
        uint32_t mx = 0;
        for (int64_t j = 0; j < m; j++) mx = (p[j] & id_mask) > mx ? (p[j] & id_mask) : mx;  // branch-free: vectorises
        if (mx < lim) continue;
        for (int64_t j = 0; j < m; j++)
            if ((p[j] & id_mask) >= lim) {
                if (c * ZT_SCAN_CHUNK + j < first) first = c * ZT_SCAN_CHUNK + j;
                break;
            }
    }
    return first == INT64_MAX ? -1 : first;
}

// Files this process checks: all, or (with nparts > 1) every nparts-th, so the
// ranks of a job split the work.
static int mine(const zt_dataset_opts *o, int i) { return o->nparts <= 1 || i % o->nparts == o->part; }

static int verify_crcs(const zt_dataset *ds, const zt_dataset_opts *o) {
    uint32_t *actual = zt_xcalloc((size_t)ds->nfiles, sizeof *actual);
    (void)zt_crc32c_hw_available();  // run the one-time init before the threads
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < ds->nfiles; i++)
        if (mine(o, i)) actual[i] = zt_crc32c(0, ds->files[i].data, ds->files[i].bytes);
    int rc = 0;
    for (int i = 0; i < ds->nfiles; i++)
        if (mine(o, i) && actual[i] != ds->files[i].crc32c) {
            rc = zt_err("%s: crc32c mismatch: dataset.json says 0x%08x, file has 0x%08x (the file changed or is "
                        "damaged since `zerotrain pack` wrote it)",
                        ds->files[i].path, ds->files[i].crc32c, actual[i]);
            break;
        }
    free(actual);
    return rc;
}

static int check_tokens(const zt_dataset *ds, const zt_dataset_opts *o) {
    const int64_t model_vocab = o->model_vocab;
    int64_t limit = model_vocab > 0 ? model_vocab : ds->vocab_size;
    if (model_vocab > 0 && ds->vocab_size > model_vocab)
        return zt_err("%s/dataset.json: dataset vocab_size %lld exceeds model vocab_size %lld (tokenized for a "
                      "different model?)",
                      ds->dir, (long long)ds->vocab_size, (long long)model_vocab);
    if (limit > (int64_t)UINT32_MAX) return 0;  // every uint32 is a valid id
    for (int i = 0; i < ds->nfiles; i++) {
        if (!mine(o, i)) continue;
        const zt_data_file *f = &ds->files[i];
        const uint32_t id_mask = ds->token_flags ? ZT_TOK_ID_MASK : UINT32_MAX;
        int64_t bad = f->data ? first_bad_token(f->data, f->tokens, (uint32_t)limit, id_mask) : -1;
        if (bad >= 0)
            return zt_err("%s: block %lld position %lld: token id %u >= vocab_size %lld%s%s", f->path,
                          (long long)(bad / ds->seq_len), (long long)(bad % ds->seq_len), f->data[bad] & id_mask,
                          (long long)limit, model_vocab > 0 ? " (the model's)" : " (from dataset.json)",
                          !ds->token_flags && f->data[bad] > ZT_TOK_ID_MASK
                              ? "; a version 1 dataset holds bare ids (flag bits need version 2)"
                              : "");
    }
    return 0;
}

int zt_dataset_open(zt_dataset *ds, const char *dir, const zt_dataset_opts *opts) {
    static const zt_dataset_opts no_checks = {0};
    if (!opts) opts = &no_checks;
    memset(ds, 0, sizeof *ds);
    ds->eos_id = -1;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;  // "out/" and "out" name the same dataset
    if (dl + sizeof "/dataset.json" > sizeof ds->dir) return zt_err("%s: dataset path is too long", dir);
    memcpy(ds->dir, dir, dl);
    ds->dir[dl] = 0;

    char jpath[sizeof ds->dir + 16];
    snprintf(jpath, sizeof jpath, "%s/dataset.json", ds->dir);
    struct stat st;
    if (stat(jpath, &st) != 0) {
        if (errno == ENOENT) {
            if (stat(ds->dir, &st) != 0)
                return zt_err("%s: dataset directory does not exist; make one with `zerotrain pack INPUT... -o %s`",
                              ds->dir, ds->dir);
            return zt_err("%s: not found, so %s is not a dataset directory (or its pack did not finish); make one "
                          "with `zerotrain pack INPUT... -o DIR`",
                          jpath, ds->dir);
        }
        return zt_err("%s: cannot stat: %s", jpath, strerror(errno));
    }
    size_t len = 0;
    char *text = zt_read_file(jpath, &len);
    if (!text) return -1;
    ds->json_crc32c = zt_crc32c(0, text, len);
    int rc = parse_json(ds, jpath, text, len);
    free(text);
    for (int i = 0; rc == 0 && i < ds->nfiles; i++) {
        if (!opts->json_only) rc = map_file(ds, &ds->files[i]);
        ds->total_blocks += ds->files[i].blocks;
    }
    if (rc == 0 && opts->verify_crc && !opts->json_only) rc = verify_crcs(ds, opts);
    if (rc == 0 && opts->check_tokens && !opts->json_only) rc = check_tokens(ds, opts);
    if (rc != 0) {
        char msg[ZT_ERR_MAX];
        snprintf(msg, sizeof msg, "%s", zt_errmsg());
        zt_dataset_close(ds);
        return zt_err("%s", msg);
    }
    return 0;
}

const uint32_t *zt_dataset_block(const zt_dataset *ds, int file, int64_t block) {
    if (file < 0 || file >= ds->nfiles || block < 0 || block >= ds->files[file].blocks) return NULL;
    return ds->files[file].data + block * (int64_t)ds->seq_len;
}

void zt_dataset_close(zt_dataset *ds) {
    for (int i = 0; i < ds->nfiles; i++) {
        if (ds->files[i].data) {
            register_map(&ds->files[i], 0);
            munmap((void *)ds->files[i].data, ds->files[i].bytes);
        }
        if (ds->files[i].fd_open) close(ds->files[i].fd);
    }
    free(ds->files);
    memset(ds, 0, sizeof *ds);
    ds->eos_id = -1;
}

int64_t zt_dataset_peek_seq_len(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/dataset.json", dir ? dir : ".");
    char *text = zt_read_file(path, NULL);
    if (!text) {
        zt_err_clear();
        return 0;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "seq_len");
    const int64_t s = cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 1e15 ? (int64_t)v->valuedouble : 0;
    cJSON_Delete(j);
    return s;
}

static int check_tokenizer(const zt_dataset *ds, const char *data_dir, const char *model_dir) {
    if (!model_dir || strncmp(ds->tokenizer, "crc32c:", 7)) return 0;
    struct stat st;
    if (stat(model_dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", model_dir);
    if (stat(path, &st) != 0) return 0;
    size_t len;
    char *text = zt_read_file(path, &len);
    if (!text) return -1;
    char model_hash[32];
    snprintf(model_hash, sizeof model_hash, "crc32c:%08x", zt_crc32c(0, text, len));
    free(text);
    if (!strcmp(model_hash, ds->tokenizer)) return 0;
    return zt_err("%s/dataset.json: the data was packed with tokenizer %s, but the model's %s is %s: its token ids "
                  "would be read as another vocabulary's\n  hint: pack the data again with --tokenizer %s",
                  data_dir, ds->tokenizer, path, model_hash, model_dir);
}

int zt_dataset_check_template(const zt_dataset *ds, const char *data_dir, const char *model_dir) {
    const char *rec = strstr(ds->chat_template, "crc32c:");
    if (!model_dir || !rec) return 0;
    struct stat st;
    if (stat(model_dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    char path[4200];
    uint32_t crc;
    const int has = zt_chat_template_of_dir(model_dir, &crc, path, sizeof path);
    if (has <= 0) return has;
    char model_hash[32];
    snprintf(model_hash, sizeof model_hash, "crc32c:%08x", crc);
    if (!strncmp(rec, model_hash, strlen(model_hash)) || !strcmp(ds->model_chat_template, model_hash)) return 0;
    return zt_err("%s/dataset.json: the data was rendered with chat template %s%s%s%s, but the model's %s is %s: "
                  "its turns, thinking and tool calls would be laid out as another template's\n"
                  "  hint: pack the data again with --tokenizer %s (its template, or --chat-template FILE for a "
                  "variant such as trl's *_training.jinja: dataset.json then records the model's template "
                  "beside it)",
                  data_dir, ds->chat_template, ds->model_chat_template[0] ? " (packed for the template " : "",
                  ds->model_chat_template, ds->model_chat_template[0] ? ")" : "", path, model_hash, model_dir);
}

int zt_dataset_check_tokenizer(const zt_dataset *ds, const char *data_dir, const char *model_dir) {
    if (check_tokenizer(ds, data_dir, model_dir)) return -1;
    return zt_dataset_check_template(ds, data_dir, model_dir);
}
