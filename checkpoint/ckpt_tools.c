// Serial readers of a checkpoint: `zerotrain inspect` (summary + a full crc32c pass)
// and `zerotrain export` (Hugging Face safetensors, split into shards with an index).
// Both use only what ckpt.h5 itself describes (config, unit tensor tables), and export the
// tensors its run carried (RUN/carry, checkpoint/hf_carry.c) when its settings record them.
// defines: zt_ckpt_inspect, zt_ckpt_export_hf
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "base/common.h"
#include "base/out_file.h"
#include "model/family.h"

#define ZT_EXPORT_DEFAULT_SHARD 5000000000LL  // 5 GB, as transformers' save_pretrained

// Read elements [a, a + n) of dataset d (serial). -1 + zt_err naming `where`.
static int read_part(hid_t d, const char *where, int64_t a, int64_t n, float *buf) {
    hid_t fs = H5Dget_space(d);
    hsize_t start = (hsize_t)a, count = (hsize_t)n;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
    hid_t ms = H5Screate_simple(1, &count, NULL);
    herr_t rc = H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, buf);
    if (rc < 0)
        zt_err("%s: read of elements [%lld, %lld) failed: %s", where, (long long)a, (long long)(a + n), zt_h5_why());
    H5Sclose(ms);
    H5Sclose(fs);
    return rc < 0 ? -1 : 0;
}

typedef struct {
    char dir[4096], file[4200];
    hid_t fid;
    zt_ckpt_meta meta;
    zt_model_config cfg;
    char *train_json, *cfg_json;
    int nunits;
    zt_ckpt_unit_info *units;
} ckpt_reader;

static void reader_close(ckpt_reader *r) {
    if (r->fid >= 0) H5Fclose(r->fid);
    free(r->train_json);
    free(r->cfg_json);
    for (int u = 0; r->units && u < r->nunits; u++) zt_ckpt_unit_info_free(&r->units[u]);
    free(r->units);
    r->fid = -1;
    r->train_json = r->cfg_json = NULL;
    r->units = NULL;
}

static int reader_open(ckpt_reader *r, const char *path) {
    memset(r, 0, sizeof *r);
    r->fid = -1;
    if (zt_ckpt_resolve(path, r->dir, sizeof r->dir) != 0) return -1;
    snprintf(r->file, sizeof r->file, "%s/%s", r->dir, ZT_CKPT_FILE);
    r->fid = zt_ckpt_open_serial(r->file);
    if (r->fid < 0) return -1;
    if (zt_ckpt_read_header(r->fid, r->file, &r->meta, &r->cfg, &r->train_json, &r->cfg_json, &r->nunits) != 0) {
        reader_close(r);
        return -1;
    }
    r->units = zt_xcalloc((size_t)r->nunits, sizeof *r->units);
    for (int u = 0; u < r->nunits; u++)
        if (zt_ckpt_read_unit(r->fid, r->file, u, &r->units[u]) != 0) {
            reader_close(r);
            return -1;
        }
    return 0;
}

// Verify every crc32c chunk of /units/NNN/<ds>, streaming one chunk at a time.
// Returns the number of bad chunks (0 all good), or -1 when the dataset cannot be
// read; `report` gets a one-line description of the first problem.
static int64_t verify_dataset(const ckpt_reader *r, int u, int k, int64_t *nchunks_out, int64_t *offset,
                              char *report, size_t n, float **buf, int64_t *cap) {
    char where[4400], path[64];
    snprintf(path, sizeof path, "units/%03d/%s", u, zt_ckpt_ds_names[k]);
    snprintf(where, sizeof where, "%s: /%s", r->file, path);
    report[0] = 0;
    hid_t d = H5Dopen2(r->fid, path, H5P_DEFAULT);
    if (d < 0) {
        snprintf(report, n, "cannot open the dataset: %s", zt_h5_why());
        return -1;
    }
    int64_t chunk, nchunks, bad = 0;
    uint32_t *crc;
    const int64_t numel = r->units[u].numel;
    haddr_t off = H5Dget_offset(d);
    *offset = off == HADDR_UNDEF ? -1 : (int64_t)off;
    if (zt_ckpt_read_crc(d, where, numel, &chunk, &crc, &nchunks) != 0) {
        snprintf(report, n, "%s", zt_errmsg());
        H5Dclose(d);
        return -1;
    }
    *nchunks_out = nchunks;
    if (chunk > *cap) {
        free(*buf);
        *buf = zt_xmalloc((size_t)(*cap = chunk) * sizeof(float));
    }
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t a = c * chunk, len = a + chunk < numel ? chunk : numel - a;
        if (read_part(d, where, a, len, *buf) != 0) {
            snprintf(report, n, "%s", zt_errmsg());
            bad = -1;
            break;
        }
        uint32_t got;
        if (zt_ckpt_verify_range(*buf, a, len, numel, chunk, crc, &got) >= 0) {
            if (!bad++) {
                char span[256];
                zt_ckpt_span_tensors(&r->units[u], a, a + len, span, sizeof span);
                snprintf(report, n, "chunk %lld (elements [%lld, %lld): %s): stored crc32c 0x%08x, computed 0x%08x",
                         (long long)c, (long long)a, (long long)(a + len), span, crc[c], got);
            }
        }
    }
    free(crc);
    H5Dclose(d);
    return bad;
}

int zt_ckpt_inspect(const char *ckpt_dir, FILE *out) {
    ckpt_reader r;
    if (reader_open(&r, ckpt_dir) != 0) return -1;
    struct stat st;
    char b1[32], b2[32];
    const zt_ckpt_meta *m = &r.meta;
    const zt_model_config *c = &r.cfg;
    fprintf(out, "checkpoint: %s\n", r.dir);
    fprintf(out, "file: %s (%s)\n", r.file,
            stat(r.file, &st) == 0 ? zt_human_bytes((double)st.st_size, 1, b1, sizeof b1) : "?");
    char *ver = zt_h5_get_str(r.fid, r.file, "zerotrain_version");
    fprintf(out, "format: %s version %d, written by zerotrain %s\n", ZT_CKPT_FORMAT, ZT_CKPT_VERSION, ver ? ver : "?");
    free(ver);
    fprintf(out, "step: %lld\n", (long long)m->step);
    fprintf(out, "epoch: %lld (steps done in it: %lld, blocks consumed: %lld)\n", (long long)m->epoch,
            (long long)m->epoch_step, (long long)m->epoch_blocks);
    fprintf(out, "tokens seen: %lld\n", (long long)m->tokens_seen);
    fprintf(out, "world size at save: %d\n", m->world_size);
    fprintf(out, "run id: %s\n", m->run_id);
    fprintf(out, "seed: %llu, rng state: %016llx %016llx %016llx %016llx\n", (unsigned long long)m->seed,
            (unsigned long long)m->rng_state[0], (unsigned long long)m->rng_state[1],
            (unsigned long long)m->rng_state[2], (unsigned long long)m->rng_state[3]);
    fprintf(out, "last lr: %.6g\n", m->lr_last);
    fprintf(out, "final: %s\n", m->final ? "yes (the run finished)" : "no");
    fprintf(out,
            "model: %s, vocab_size %lld, hidden_size %lld, intermediate_size %lld, num_hidden_layers %d, "
            "num_attention_heads %d, num_key_value_heads %d, head_dim %d, rms_norm_eps %g, rope_theta %g, "
            "tie_word_embeddings %s, max_position_embeddings %lld, bos_token_id %lld, eos_token_id %lld\n",
            zt_model_title(c), (long long)c->vocab_size, (long long)c->hidden_size, (long long)c->intermediate_size, c->num_layers,
            c->num_heads, c->num_kv_heads, c->head_dim, c->rms_norm_eps, c->rope_theta,
            c->tie_word_embeddings ? "true" : "false", (long long)c->max_position_embeddings,
            (long long)c->bos_token_id, (long long)c->eos_token_id);
    if (c->rope_yarn)
        fprintf(out, "rope scaling: YaRN, factor %g, original_max_position_embeddings %lld (%lld positions)\n",
                c->rope_factor, (long long)c->rope_original_max_positions, (long long)zt_model_max_positions(c));
    fprintf(out, "train: %s\n", r.train_json[0] ? r.train_json : "(none recorded)");
    int64_t total = 0;
    for (int u = 0; u < r.nunits; u++) total += r.units[u].numel;
    fprintf(out, "units: %d, %lld parameters (fp32 master + Adam m + v = %s)\n", r.nunits, (long long)total,
            zt_human_bytes(12.0 * (double)total, 1, b2, sizeof b2));

    int64_t bad_total = 0, chunks_total = 0, unreadable = 0, nds = 0;
    float *buf = NULL;
    int64_t cap = 0;
    for (int u = 0; u < r.nunits; u++) {
        const zt_ckpt_unit_info *ui = &r.units[u];
        char lbl[64];
        fprintf(out, "unit %03d  %s, %lld elements\n", u, zt_ckpt_unit_label(ui, lbl, sizeof lbl),
                (long long)ui->numel);
        for (int i = 0; i < ui->ntensors; i++) {
            const zt_ckpt_tensor *t = &ui->t[i];
            char shape[80];
            zt_ckpt_shape_text(t->ndim, t->shape, shape, sizeof shape);
            fprintf(out, "  %-52s %-14s offset %lld\n", t->name, shape, (long long)t->offset);
        }
        for (int k = 0; k < ZT_CKPT_NDS; k++) {
            char report[1024];
            int64_t nch = 0, off = -1;
            int64_t bad = verify_dataset(&r, u, k, &nch, &off, report, sizeof report, &buf, &cap);
            nds++;
            chunks_total += nch;
            if (bad == 0)
                fprintf(out, "  /units/%03d/%-7s fp32 at file bytes [%lld, %lld), crc32c ok (%lld chunk%s)\n", u,
                        zt_ckpt_ds_names[k], (long long)off, (long long)(off + ui->numel * 4), (long long)nch,
                        nch == 1 ? "" : "s");
            else if (bad < 0)
                unreadable++, fprintf(out, "  /units/%03d/%-7s UNREADABLE: %s\n", u, zt_ckpt_ds_names[k], report);
            else
                bad_total += bad, fprintf(out, "  /units/%03d/%-7s CRC32C MISMATCH in %lld of %lld chunks; first: %s\n",
                                          u, zt_ckpt_ds_names[k], (long long)bad, (long long)nch, report);
        }
    }
    free(buf);
    int rc = 0;
    if (bad_total == 0 && unreadable == 0) {
        fprintf(out, "checksums: ok (%lld chunks in %lld datasets verified)\n", (long long)chunks_total,
                (long long)nds);
    } else {
        fprintf(out, "checksums: FAILED (%lld bad chunk%s, %lld unreadable dataset%s): this checkpoint is corrupt\n",
                (long long)bad_total, bad_total == 1 ? "" : "s", (long long)unreadable, unreadable == 1 ? "" : "s");
        rc = zt_err("%s: checksum verification failed (%lld bad chunk%s, %lld unreadable dataset%s)", r.file,
                    (long long)bad_total, bad_total == 1 ? "" : "s", (long long)unreadable,
                    unreadable == 1 ? "" : "s");
    }
    reader_close(&r);
    return rc;
}

// ---- export ---------------------------------------------------------------------

typedef struct {
    int unit, idx;  // tensor idx of unit; unit -1: carried tensor idx of carried.safetensors
    int file;       // shard index
    int64_t bytes;
} export_item;

// Load unit u's master vector, verifying every chunk. malloc'd or NULL + zt_err.
static float *load_master(const ckpt_reader *r, int u) {
    char where[4400], path[64];
    snprintf(path, sizeof path, "units/%03d/master", u);
    snprintf(where, sizeof where, "%s: /%s", r->file, path);
    hid_t d = H5Dopen2(r->fid, path, H5P_DEFAULT);
    if (d < 0) {
        zt_err("%s: cannot open the dataset: %s", where, zt_h5_why());
        return NULL;
    }
    int64_t chunk, nchunks;
    uint32_t *crc;
    const int64_t numel = r->units[u].numel;
    float *v = NULL;
    if (zt_ckpt_read_crc(d, where, numel, &chunk, &crc, &nchunks) == 0) {
        v = zt_xmalloc((size_t)numel * sizeof(float));
        uint32_t got;
        int64_t bad;
        if (read_part(d, where, 0, numel, v) != 0) {
            free(v);
            v = NULL;
        } else if ((bad = zt_ckpt_verify_range(v, 0, numel, numel, chunk, crc, &got)) >= 0) {
            char span[256];
            int64_t a = bad * chunk, b = a + chunk < numel ? a + chunk : numel;
            zt_ckpt_span_tensors(&r->units[u], a, b, span, sizeof span);
            zt_err("%s: crc32c mismatch in chunk %lld (elements [%lld, %lld): %s): stored 0x%08x, computed 0x%08x; "
                   "the checkpoint is corrupt and is not exported",
                   where, (long long)bad, (long long)a, (long long)b, span, crc[bad], got);
            free(v);
            v = NULL;
        }
        free(crc);
    }
    H5Dclose(d);
    return v;
}

// 1 when p is absent or an empty directory; else 0 with `held` naming what is in it (the first
// few entries, a link with its target: the refusal says what would have been written over).
static int dir_is_empty_or_absent(const char *p, char *held, size_t n) {
    held[0] = 0;
    DIR *d = opendir(p);
    if (!d) {
        if (errno == ENOENT) return 1;
        snprintf(held, n, "what cannot be listed: %s", strerror(errno));
        return 0;
    }
    struct dirent *e;
    int count = 0;
    size_t o = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (count++ >= 3) continue;
        char path[4400], to[1024] = "";
        snprintf(path, sizeof path, "%s/%s", p, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
            const ssize_t k = readlink(path, to, sizeof to - 1);
            to[k > 0 ? k : 0] = 0;
        }
        if (o < n)
            o += (size_t)snprintf(held + o, n - o, "%s%s%s%.600s", count > 1 ? ", " : "", path,
                                  to[0] ? ", a symbolic link to " : "", to);
    }
    closedir(d);
    if (count > 3 && o < n) snprintf(held + o, n - o, " and %d more", count - 3);
    return count == 0;
}

int zt_ckpt_export_hf(const char *ckpt_dir, const char *out_dir, int dtype, int64_t max_shard_bytes) {
    if (dtype != ZT_ST_BF16 && dtype != ZT_ST_F32) return zt_err("export: dtype must be bf16 or fp32");
    if (max_shard_bytes <= 0) max_shard_bytes = ZT_EXPORT_DEFAULT_SHARD;
    struct stat st;
    char held[2400];
    if (stat(out_dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return zt_err("%s exists and is not a directory; choose a new output directory", out_dir);
    if (stat(out_dir, &st) != 0 && lstat(out_dir, &st) == 0)  // a link to nothing: mkdir would not make it
        return zt_out_check_dir(out_dir);
    if (!dir_is_empty_or_absent(out_dir, held, sizeof held))
        return zt_err("%s exists and is not empty (it holds %s); choose a new output directory (nothing was "
                      "written)",
                      out_dir, held);
    ckpt_reader r;
    if (reader_open(&r, ckpt_dir) != 0) return -1;
    // What the run carried (RUN/carry), verified; the text weights then take the input's names.
    zt_hf_carry carry;
    int carried = 0;
    if (zt_hf_carry_of_checkpoint(r.dir, r.train_json, &carry, &carried) != 0) {
        reader_close(&r);
        return zt_ckpt_err_prefix("export of %s to %s", ckpt_dir, out_dir), -1;
    }
    const char *text_prefix = carried ? carry.text_prefix : zt_model_hf_prefix(&r.cfg);

    // Plan: tensors in canonical order, then the carried ones, a new shard whenever the next
    // tensor would overflow the current one (a tensor larger than the limit gets a shard of its own).
    const size_t esz = zt_st_dtype_size((zt_st_dtype)dtype);
    int nitems = carried ? carry.st.ntensors : 0;
    for (int u = 0; u < r.nunits; u++) nitems += r.units[u].ntensors;
    export_item *it = zt_xcalloc((size_t)nitems, sizeof *it);
    int nfiles = 0, i = 0;
    int64_t cur = 0, total = 0;
    for (int u = 0; u < r.nunits; u++)
        for (int k = 0; k < r.units[u].ntensors; k++, i++) {
            int64_t b = r.units[u].t[k].numel * (int64_t)esz;
            if (nfiles == 0 || (cur > 0 && cur + b > max_shard_bytes)) nfiles++, cur = 0;
            it[i] = (export_item){u, k, nfiles - 1, b};
            cur += b;
            total += b;
        }
    for (int k = 0; carried && k < carry.st.ntensors; k++, i++) {
        const int64_t b = (int64_t)(carry.st.tensors[k].end - carry.st.tensors[k].begin);
        if (nfiles == 0 || (cur > 0 && cur + b > max_shard_bytes)) nfiles++, cur = 0;
        it[i] = (export_item){-1, k, nfiles - 1, b};
        cur += b;
        total += b;
    }
    int *last_file = zt_xmalloc((size_t)r.nunits * sizeof(int));  // free a unit after its last shard
    for (i = 0; i < nitems; i++)
        if (it[i].unit >= 0) last_file[it[i].unit] = it[i].file;

    int rc = zt_mkdirs(out_dir);
    float **full = zt_xcalloc((size_t)r.nunits, sizeof(float *));
    cJSON *index = cJSON_CreateObject();
    cJSON *md = cJSON_AddObjectToObject(index, "metadata");
    cJSON_AddNumberToObject(md, "total_size", (double)total);
    cJSON *wm = cJSON_AddObjectToObject(index, "weight_map");
    char fname[128], path[4400];
    for (int f = 0; f < nfiles && rc == 0; f++) {
        if (nfiles == 1)
            snprintf(fname, sizeof fname, "model.safetensors");
        else
            snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", f + 1, nfiles);
        zt_st_writer *w = zt_st_writer_new();
        zt_st_writer_metadata(w, "format", "pt");
        for (i = 0; i < nitems && rc == 0; i++) {
            if (it[i].file != f) continue;
            const int u = it[i].unit;
            if (u < 0) {  // carried: name, dtype, shape and bytes as the input had them
                const zt_st_tensor *t = &carry.st.tensors[it[i].idx];
                rc = zt_st_writer_add_raw(w, t->name, t->dtype_name, t->ndim, t->shape, carry.st.map + t->begin,
                                          t->end - t->begin);
                cJSON_AddStringToObject(wm, t->name, fname);
                continue;
            }
            if (!full[u] && !(full[u] = load_master(&r, u))) {
                rc = -1;
                break;
            }
            const zt_ckpt_tensor *t = &r.units[u].t[it[i].idx];
            char name[300];
            zt_hf_export_name(text_prefix, t->name, name, sizeof name);
            rc = zt_st_writer_add_f32(w, name, full[u] + t->offset, t->ndim, t->shape, (zt_st_dtype)dtype);
            cJSON_AddStringToObject(wm, name, fname);
        }
        snprintf(path, sizeof path, "%s/%s", out_dir, fname);
        if (rc == 0) rc = zt_st_write(w, path);
        zt_st_writer_free(w);
        for (int u = 0; u < r.nunits; u++)
            if (full[u] && last_file[u] <= f) free(full[u]), full[u] = NULL;
    }
    if (rc == 0 && nfiles > 1) {
        char *text = cJSON_Print(index);
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", out_dir);
        rc = zt_write_file_atomic(path, text, strlen(text));
        free(text);
    }
    if (rc == 0 && carried) {  // config.json last: the input's, byte for byte (the class it came from)
        snprintf(path, sizeof path, "%s/config.json", out_dir);
        rc = zt_write_file_atomic(path, carry.config_json, carry.config_len);
    } else if (rc == 0) {  // config.json last: a directory with it is a complete export
        cJSON *cj = cJSON_Parse(r.cfg_json);
        if (!cJSON_IsObject(cj)) {
            rc = zt_err("%s: attribute model_config_json is not a JSON object", r.file);
        } else {
            cJSON_DeleteItemFromObjectCaseSensitive(cj, "torch_dtype");
            cJSON_AddStringToObject(cj, "torch_dtype", dtype == ZT_ST_BF16 ? "bfloat16" : "float32");
            char *text = cJSON_Print(cj);
            snprintf(path, sizeof path, "%s/config.json", out_dir);
            rc = zt_write_file_atomic(path, text, strlen(text));
            free(text);
        }
        cJSON_Delete(cj);
    }
    cJSON_Delete(index);
    for (int u = 0; u < r.nunits; u++) free(full[u]);
    free(full);
    free(last_file);
    free(it);
    if (carried) zt_hf_carry_close(&carry);
    reader_close(&r);
    if (rc != 0) return zt_ckpt_err_prefix("export of %s to %s", ckpt_dir, out_dir), -1;
    return 0;
}
