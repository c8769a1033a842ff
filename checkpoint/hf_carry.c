// Tensors a family keeps but does not train (zt_family.carry_prefixes: Qwen3.5's MTP head and
// vision tower): copied byte for byte from --init into RUN/carry at a fresh start, checked against
// their manifest whenever they are read again (a resume, export, RUN/final), and written back by
// export next to the trained text weights (checkpoint/ckpt_tools.c). Layout: checkpoint/hf.h.
// defines: zt_hf_carry_write, zt_hf_carry_open, zt_hf_carry_close, zt_hf_carry_of_checkpoint
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/out_file.h"
#include "checkpoint/hf.h"
#include "model/family.h"

#define CARRY_FORMAT "zerotrain-carry"
#define CARRY_VERSION 1
static const char *const carry_files[2] = {"carried.safetensors", "config.json"};

// crc32c and size of a file, streamed. -1 + zt_err naming it.
static int file_crc(const char *path, uint32_t *crc, int64_t *bytes) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zt_err("%s: cannot open: %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    char *buf = zt_xmalloc(CHUNK);
    uint32_t c = 0;
    int64_t n = 0;
    int rc = 0;
    for (;;) {
        const ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = zt_err("%s: read failed after %lld bytes: %s", path, (long long)n, strerror(errno));
            break;
        }
        if (r == 0) break;
        c = zt_crc32c(c, buf, (size_t)r);
        n += r;
    }
    free(buf);
    close(fd);
    *crc = c;
    *bytes = n;
    return rc;
}

// fsync of a directory (the renames in it); a file system that cannot is let be.
static void fsync_dir(const char *dir) {
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void free_files(char **files, int n) {
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
}

// carried.safetensors, config.json and manifest.json into tmp (a fresh directory).
static int write_carry_files(const zt_model_layout *lay, const char *init, const char *config_path, const char *tmp,
                             zt_st_file *st, int nfiles, int ntensors) {
    char path[4400];
    zt_st_writer *w = zt_st_writer_new();
    zt_st_writer_metadata(w, "format", "pt");
    cJSON *man = cJSON_CreateObject();
    cJSON_AddStringToObject(man, "format", CARRY_FORMAT);
    cJSON_AddNumberToObject(man, "format_version", CARRY_VERSION);
    char real[PATH_MAX];
    cJSON_AddStringToObject(man, "source", realpath(init, real) ? real : init);
    cJSON_AddStringToObject(man, "config_source", realpath(config_path, real) ? real : config_path);
    cJSON_AddStringToObject(man, "family", lay->cfg.family ? lay->cfg.family->name : "");
    cJSON *pre = cJSON_AddArrayToObject(man, "prefixes");
    for (const char *const *p = lay->cfg.family->carry_prefixes; p && *p; p++)
        cJSON_AddItemToArray(pre, cJSON_CreateString(*p));
    cJSON_AddStringToObject(man, "text_prefix", zt_model_hf_prefix(&lay->cfg) ? zt_model_hf_prefix(&lay->cfg) : "");
    cJSON_AddNumberToObject(man, "ntensors", ntensors);
    cJSON *names = cJSON_AddArrayToObject(man, "tensors");
    int rc = 0;
    for (int i = 0; i < nfiles && rc == 0; i++)
        for (int k = 0; k < st[i].ntensors && rc == 0; k++) {
            const zt_st_tensor *t = &st[i].tensors[k];
            if (!zt_hf_is_carried(&lay->cfg, t->name)) continue;
            rc = zt_st_writer_add_raw(w, t->name, t->dtype_name, t->ndim, t->shape, st[i].map + t->begin,
                                      t->end - t->begin);
            if (rc != 0) zt_err_prefix("%s", st[i].path);
            cJSON_AddItemToArray(names, cJSON_CreateString(t->name));
        }
    snprintf(path, sizeof path, "%s/%s", tmp, carry_files[0]);
    if (rc == 0) rc = zt_st_write(w, path);
    zt_st_writer_free(w);
    if (rc == 0) {  // the input's config.json, byte for byte
        size_t len;
        char *text = zt_read_file(config_path, &len);
        snprintf(path, sizeof path, "%s/%s", tmp, carry_files[1]);
        rc = text ? zt_write_file_atomic(path, text, len) : -1;
        free(text);
    }
    cJSON *files = cJSON_AddObjectToObject(man, "files");
    for (int i = 0; i < 2 && rc == 0; i++) {
        uint32_t crc;
        int64_t bytes;
        snprintf(path, sizeof path, "%s/%s", tmp, carry_files[i]);
        rc = file_crc(path, &crc, &bytes);
        char hex[16];
        snprintf(hex, sizeof hex, "%08x", crc);
        cJSON *f = cJSON_AddObjectToObject(files, carry_files[i]);
        cJSON_AddNumberToObject(f, "bytes", (double)bytes);
        cJSON_AddStringToObject(f, "crc32c", hex);
    }
    if (rc == 0) {  // last: a directory with a manifest is complete
        char *text = cJSON_Print(man);
        snprintf(path, sizeof path, "%s/manifest.json", tmp);
        rc = zt_write_file_atomic(path, text, strlen(text));
        free(text);
    }
    cJSON_Delete(man);
    return rc;
}

int zt_hf_carry_write(const zt_model_layout *lay, const char *init, const char *config_path, const char *run_dir,
                      int *ntensors) {
    *ntensors = 0;
    char dir[4200], tmp[4300];
    snprintf(dir, sizeof dir, "%s/carry", run_dir);
    snprintf(tmp, sizeof tmp, "%s/carry.partial", run_dir);
    // What an earlier run or an interrupted write left is not this run's (a link: removed itself).
    if (zt_remove_tree(tmp) != 0 || zt_remove_tree(dir) != 0) return -1;
    const char *const *pre = lay->cfg.family ? lay->cfg.family->carry_prefixes : NULL;
    if (!pre || !*pre) return 0;
    char **files = NULL;
    int nfiles = 0;
    if (zt_hf_list_files(init, &files, &nfiles) != 0) return -1;
    zt_st_file *st = zt_xcalloc((size_t)nfiles, sizeof *st);
    int opened = 0, rc = 0;
    for (; opened < nfiles && rc == 0; opened++) rc = zt_st_open(&st[opened], files[opened]);
    if (rc != 0) opened--;  // the failed one closed itself
    int n = 0;
    for (int i = 0; i < opened && rc == 0; i++)
        for (int k = 0; k < st[i].ntensors; k++) n += zt_hf_is_carried(&lay->cfg, st[i].tensors[k].name);
    if (rc == 0 && n > 0 && lay->cfg.family->check_carried) {  // what is carried is what the config says
        const char **names = zt_xcalloc((size_t)n, sizeof *names);
        int j = 0;
        for (int i = 0; i < opened; i++)
            for (int k = 0; k < st[i].ntensors; k++)
                if (zt_hf_is_carried(&lay->cfg, st[i].tensors[k].name)) names[j++] = st[i].tensors[k].name;
        rc = lay->cfg.family->check_carried(&lay->cfg, names, n);
        if (rc != 0) zt_err_prefix("%s", config_path);
        free(names);
    }
    if (rc == 0 && n > 0) {
        rc = zt_out_mkdir(tmp);
        if (rc == 0) rc = write_carry_files(lay, init, config_path, tmp, st, nfiles, n);
        if (rc == 0 && rename(tmp, dir) != 0) rc = zt_err("%s: rename to %s failed: %s", tmp, dir, strerror(errno));
        if (rc == 0) fsync_dir(run_dir);
        if (rc != 0) zt_remove_tree(tmp);
    }
    for (int i = 0; i < opened; i++) zt_st_close(&st[i]);
    free(st);
    free_files(files, nfiles);
    if (rc != 0) return zt_err_prefix("carrying the tensors of %s into %s", init, dir);
    *ntensors = n;
    return 0;
}

void zt_hf_carry_close(zt_hf_carry *c) {
    if (c->st.fd >= 0 || c->st.map) zt_st_close(&c->st);
    free(c->config_json);
    c->config_json = NULL;
}

int zt_hf_carry_open(zt_hf_carry *c, const char *dir) {
    memset(c, 0, sizeof *c);
    c->st.fd = -1;
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    char path[4400];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    size_t len;
    char *text = zt_read_file(path, &len);
    if (!text) return -1;
    c->manifest_crc = zt_crc32c(0, text, len);
    snprintf(c->record, sizeof c->record, "manifest.json crc32c %08x", c->manifest_crc);
    cJSON *m = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(m, "source");
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(m, "text_prefix");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(m, "files");
    int rc = 0;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CARRY_FORMAT) || !cJSON_IsString(src) ||
        !cJSON_IsString(tp) || strlen(tp->valuestring) >= sizeof c->text_prefix || !cJSON_IsObject(files))
        rc = zt_err("%s: not a carry manifest (format \"%s\" with source, text_prefix and files)", path, CARRY_FORMAT);
    if (rc == 0) {
        snprintf(c->source, sizeof c->source, "%s", src->valuestring);
        snprintf(c->text_prefix, sizeof c->text_prefix, "%s", tp->valuestring);
    }
    for (int i = 0; i < 2 && rc == 0; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(files, carry_files[i]);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(f, "bytes"), *h = cJSON_GetObjectItemCaseSensitive(f, "crc32c");
        snprintf(path, sizeof path, "%s/%s", dir, carry_files[i]);
        uint32_t crc;
        int64_t bytes;
        if (!cJSON_IsNumber(b) || !cJSON_IsString(h)) {
            rc = zt_err("%s/manifest.json: files.\"%s\" needs bytes and crc32c", dir, carry_files[i]);
        } else if (file_crc(path, &crc, &bytes) != 0) {
            rc = zt_err_prefix("the carried tensors of %s", c->source);
        } else {
            char hex[16];
            snprintf(hex, sizeof hex, "%08x", crc);
            if (bytes != (int64_t)b->valuedouble || strcmp(hex, h->valuestring))
                rc = zt_err("%s: %lld bytes with crc32c %s, but manifest.json records %lld bytes with crc32c %s: the "
                            "tensors carried from %s are damaged; nothing of them is written (copy them again from "
                            "the source: a fresh run with --init writes RUN/carry anew)",
                            path, (long long)bytes, hex, (long long)b->valuedouble, h->valuestring, c->source);
        }
    }
    cJSON_Delete(m);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/%s", dir, carry_files[1]);
        c->config_json = zt_read_file(path, &c->config_len);
        rc = c->config_json ? 0 : -1;
    }
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/%s", dir, carry_files[0]);
        rc = zt_st_open(&c->st, path);
        if (rc != 0) c->st.fd = -1;
    }
    if (rc != 0) zt_hf_carry_close(c);
    return rc;
}

int zt_hf_carry_of_checkpoint(const char *ckpt_dir, const char *train_json, zt_hf_carry *c, int *present) {
    *present = 0;
    cJSON *t = train_json && *train_json ? cJSON_Parse(train_json) : NULL;
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(t, ZT_HF_CARRY_KEY);
    char want[64] = "";
    if (cJSON_IsString(rec)) snprintf(want, sizeof want, "%s", rec->valuestring);
    const int recorded = rec != NULL;
    cJSON_Delete(t);
    if (!recorded) return 0;
    // RUN/checkpoints/step-N -> RUN/carry
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", ckpt_dir);
    for (int up = 0; up < 2; up++) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') dir[--n] = 0;
        char *slash = strrchr(dir, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == dir) dir[1] = 0;
        else *slash = 0;
    }
    const size_t n = strlen(dir);
    snprintf(dir + n, sizeof dir - n, "/carry");
    struct stat st;
    if (stat(dir, &st) != 0)
        return zt_err("%s was trained with tensors carried from --init (training settings: carry \"%s\"), but %s, "
                      "where they are kept next to the run's checkpoints/, is missing: export the checkpoint from "
                      "inside its run directory",
                      ckpt_dir, want, dir);
    if (zt_hf_carry_open(c, dir) != 0) return -1;
    if (strcmp(c->record, want)) {
        zt_err("%s: its manifest is %s, but the checkpoint %s records %s: these carried tensors are not the ones this "
               "run started from",
               dir, c->record, ckpt_dir, want);
        zt_hf_carry_close(c);
        return -1;
    }
    *present = 1;
    return 0;
}
