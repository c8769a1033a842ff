// What each rank reads at start, as "key=value" lines the ranks compare (train/input_digest.h)
// and as run.json's "inputs" record. Each input is read cheaply, once, before anything in RUN is
// touched: the model config parsed and written back by its codec, the --init files'
// fingerprints (their tensor tables and a few KiB of every tensor, never the whole weights),
// dataset.json's bytes.
#include "train/input_digest.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "data/dataset.h"
#include "model/config.h"
#include "model/family.h"
#include "train/settings_agree.h"

// A growing text of "key=value" lines.
typedef struct {
    char *s;
    size_t len, cap;
} lines_buf;

// Appends one line. A key must hold no '=' or newline and a value no newline (the comparison
// splits on them): any that a file name brings are written as '_'.
static void add_line(lines_buf *b, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_line(lines_buf *b, const char *key, const char *fmt, ...) {
    char val[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    const size_t need = strlen(key) + strlen(val) + 3;
    if (b->len + need >= b->cap) {
        b->cap = (b->len + need) * 2 + 256;
        b->s = realloc(b->s, b->cap);
        if (!b->s) zt_fatal("out of host memory describing the inputs");
    }
    char *p = b->s + b->len;
    for (const char *k = key; *k; k++) *p++ = *k == '=' || *k == '\n' ? '_' : *k;
    *p++ = '=';
    for (const char *v = val; *v; v++) *p++ = *v == '\n' ? '_' : *v;
    *p++ = '\n';
    *p = 0;
    b->len = (size_t)(p - b->s);
}

// The model config's fields, flattened ("rope_scaling.factor", "layer_types[3]"), each its
// compact JSON: a difference names the field.
static void add_config_fields(lines_buf *b, const cJSON *it, const char *prefix) {
    // the top level's prefix ends in a space ("model config "): its fields follow it without a dot
    for (int i = 0; it; it = it->next, i++) {
        char key[320];
        const int top = prefix[strlen(prefix) - 1] == ' ';
        if (it->string) snprintf(key, sizeof key, "%s%s%s", prefix, top ? "" : ".", it->string);
        else snprintf(key, sizeof key, "%s[%d]", prefix, i);
        if ((cJSON_IsObject(it) || cJSON_IsArray(it)) && it->child) {
            add_config_fields(b, it->child, key);
            continue;
        }
        char *v = cJSON_PrintUnformatted(it);
        add_line(b, key, "%s", v ? v : "?");
        free(v);
    }
}

// The model config as its codec resolves it, so that two files that say the same (another
// layout, fields the model does not read) agree and a difference names the field.
static char *model_lines(const char *path, cJSON *rec) {
    zt_model_config cfg;
    if (zt_model_config_load(&cfg, path) != 0) return NULL;
    char *text = zt_model_config_json(&cfg);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    if (!root) {
        free(text);
        return NULL;
    }
    lines_buf b = {0};
    add_config_fields(&b, root->child, "model config ");
    // not a field of the text config, but it moves every tensor's name (the family's name adapter:
    // a vision-language wrapper's prefix)
    add_line(&b, "model config (vision-language wrapper)", "%s", zt_model_hf_prefix(&cfg) ? "true" : "false");
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", zt_crc32c(0, text, strlen(text)));
    cJSON_AddStringToObject(rec, "model_config_crc32c", crc);
    cJSON_Delete(root);
    free(text);
    return b.s;
}

// Each --init safetensors file's fingerprint, keyed by its name.
static char *init_lines(const char *path, cJSON *rec) {
    char **files = NULL;
    int n = 0;
    if (zt_hf_list_files(path, &files, &n) != 0) return NULL;
    lines_buf b = {0};
    cJSON *arr = cJSON_CreateArray();
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        zt_st_fingerprint fp;
        ok = zt_st_fingerprint_file(files[i], &fp) == 0;
        if (!ok) break;
        const char *slash = strrchr(files[i], '/'), *name = slash ? slash + 1 : files[i];
        char key[320];
        snprintf(key, sizeof key, "--init %s", name);
        add_line(&b, key, "%d tensors of %llu bytes, table crc32c %08x, samples crc32c %08x", fp.ntensors,
                 (unsigned long long)fp.data_bytes, fp.table_crc32c, fp.sample_crc32c);
        cJSON *f = cJSON_CreateObject();
        char hex[16];
        cJSON_AddStringToObject(f, "file", name);
        cJSON_AddNumberToObject(f, "bytes", (double)fp.bytes);
        cJSON_AddNumberToObject(f, "data_bytes", (double)fp.data_bytes);
        cJSON_AddNumberToObject(f, "tensors", fp.ntensors);
        snprintf(hex, sizeof hex, "%08x", fp.table_crc32c);
        cJSON_AddStringToObject(f, "table_crc32c", hex);
        snprintf(hex, sizeof hex, "%08x", fp.sample_crc32c);
        cJSON_AddStringToObject(f, "sample_crc32c", hex);
        cJSON_AddNumberToObject(f, "sampled_bytes", (double)fp.sampled);
        cJSON_AddItemToArray(arr, f);
    }
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    if (!ok) {
        cJSON_Delete(arr);
        free(b.s);
        return NULL;
    }
    cJSON_AddItemToObject(rec, "init_files", arr);
    return b.s;
}

// A dataset's dataset.json: in the single layout its CRC-32C (every rank deals blocks from the
// same listing, whose files' crc32c it records); in the per-rank layout each rank trains on its own
// file by design, so only what every rank's file must share is compared.
static char *data_lines(const char *flag, const char *dir, cJSON *rec, const char *rec_key) {
    zt_dataset ds;
    const zt_dataset_opts jo = {.json_only = 1};
    if (zt_dataset_open(&ds, dir, &jo) != 0) return NULL;
    lines_buf b = {0};
    char key[64], shape[512];
    snprintf(key, sizeof key, "%s dataset.json", flag);
    snprintf(shape, sizeof shape,
             "%d file%s, seq_len %d, vocab_size %lld, eos_id %lld, tokenizer \"%.60s\", version %d, doc_attention %s",
             ds.nfiles, ds.nfiles == 1 ? "" : "s", ds.seq_len, (long long)ds.vocab_size, (long long)ds.eos_id,
             ds.tokenizer, ds.version, ds.doc_isolated ? "isolated" : "full");
    if (ds.per_rank)
        add_line(&b, key, "per-rank layout, %s", shape);
    else
        add_line(&b, key, "crc32c %08x, single layout, %lld blocks, %s", ds.json_crc32c, (long long)ds.total_blocks,
                 shape);
    cJSON *o = cJSON_AddObjectToObject(rec, rec_key);
    char hex[16];
    snprintf(hex, sizeof hex, "%08x", ds.json_crc32c);
    cJSON_AddStringToObject(o, "dataset_json_crc32c", hex);
    cJSON_AddStringToObject(o, "layout", ds.per_rank ? "per-rank" : "single");
    cJSON_AddStringToObject(o, "compared", ds.per_rank ? "the files' count, seq_len, vocabulary, eos, tokenizer, "
                                                         "version, doc_attention (each rank trains on its own file)"
                                                       : "dataset.json's bytes");
    zt_dataset_close(&ds);
    return b.s;
}

void zt_input_digest_make(zt_input_digest *d, const zt_input_paths *p) {
    memset(d, 0, sizeof *d);
    cJSON *rec = cJSON_CreateObject();
    // Reading failures are the phases' to report (agreed, named); here they only leave an input out.
    char saved[ZT_ERR_MAX];
    snprintf(saved, sizeof saved, "%s", zt_errmsg());
    if (p->model) d->lines[ZT_INPUT_MODEL] = model_lines(p->model, rec);
    if (p->init) d->lines[ZT_INPUT_INIT] = init_lines(p->init, rec);
    if (p->data) d->lines[ZT_INPUT_DATA] = data_lines("--data", p->data, rec, "data");
    if (p->eval_data) d->lines[ZT_INPUT_EVAL] = data_lines("--eval-data", p->eval_data, rec, "eval_data");
    if (saved[0]) zt_err("%s", saved);
    else zt_err_clear();
    d->json = cJSON_PrintUnformatted(rec);
    cJSON_Delete(rec);
}

int zt_input_digest_agree(MPI_Comm comm, const zt_input_digest *d) {
    int world = 1;
    MPI_Comm_size(comm, &world);
    if (world == 1) return 0;
    int mine = 0, all = 0;  // a bit per input this rank read
    for (int i = 0; i < ZT_INPUT_COUNT; i++) mine |= d->lines[i] ? 1 << i : 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_BAND, comm);
    lines_buf b = {.s = zt_xmalloc(256), .cap = 256};
    b.s[0] = 0;
    for (int i = 0; i < ZT_INPUT_COUNT; i++) {
        if (!(all & 1 << i)) continue;
        const size_t n = strlen(d->lines[i]);
        if (b.len + n + 1 >= b.cap) {
            b.cap = b.len + n + 256;
            b.s = realloc(b.s, b.cap);
            if (!b.s) zt_fatal("out of host memory comparing the inputs");
        }
        memcpy(b.s + b.len, d->lines[i], n + 1);
        b.len += n;
    }
    char msg[ZT_ERR_MAX - 512];
    const int differ = zt_settings_gather_diff(comm, b.s, NULL, msg, sizeof msg);
    free(b.s);
    if (!differ) return 0;
    return zt_err("the ranks read different inputs at the same paths (%d difference%s): %s. Each rank reads --model, "
                  "--init and --data on its own node (a copy that differs on one node, or a mount that shows another "
                  "directory at the path, does this); give every rank the same files",
                  differ, differ == 1 ? "" : "s", msg);
}

void zt_input_digest_free(zt_input_digest *d) {
    for (int i = 0; i < ZT_INPUT_COUNT; i++) free(d->lines[i]);
    free(d->json);
    memset(d, 0, sizeof *d);
}
