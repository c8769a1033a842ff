// Loads Hugging Face weights (one safetensors file, or a sharded set with
// model.safetensors.index.json) into the per-unit flat fp32 vectors. Every tensor
// of the layout must be present exactly once with the config's shape; a tensor the family
// carries (checkpoint/hf_carry.c) is passed over; names map through the family's adapter
// (zt_model_hf_prefix: a VLM wrapper's text tensors under its prefix).
// defines: zt_hf_load, zt_hf_load_slices, zt_hf_tied_head_differs, zt_hf_save, zt_hf_list_files, zt_hf_is_carried,
//          zt_hf_export_name
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint/safetensors.h"
#include "base/json_util.h"
#include "model/family.h"
#include "model/qwen3.h"
#include "base/common.h"
#include "base/out_file.h"
#include "checkpoint/hf.h"

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

// Tensors a released checkpoint may carry that the model does not use.
static int ignorable(const zt_model_layout *lay, const char *name) {
    size_t n = strlen(name);
    const char *suffix = "rotary_emb.inv_freq";
    if (n >= strlen(suffix) && !strcmp(name + n - strlen(suffix), suffix)) return 1;
    // Some tied checkpoints still store lm_head.weight, a copy of the embedding (one that is not a
    // copy makes the model untied: zt_hf_tied_head_differs).
    return lay->cfg.tie_word_embeddings && !strcmp(name, "lm_head.weight");
}

int zt_hf_is_carried(const zt_model_config *cfg, const char *name) {
    const char *const *p = cfg->family ? cfg->family->carry_prefixes : NULL;
    for (; p && *p; p++)
        if (!strncmp(name, *p, strlen(*p))) return 1;
    return 0;
}

const char *zt_hf_export_name(const char *text_prefix, const char *name, char *out, size_t n) {
    if (text_prefix && *text_prefix && !strncmp(name, "model.", 6))
        snprintf(out, n, "%s%s", text_prefix, name + 6);
    else
        snprintf(out, n, "%s", name);
    return out;
}

// The layout name a checkpoint tensor stands for: under the family's prefix P (a VLM wrapper's),
// "P X" is "model.X" and an unprefixed "model.X" is nothing of the text
// model (""); else the name itself.
static const char *layout_name(const zt_model_config *cfg, const char *name, char *buf, size_t n) {
    const char *vp = zt_model_hf_prefix(cfg);
    if (!vp) return name;
    const size_t vn = strlen(vp);
    if (!strncmp(name, vp, vn)) {
        snprintf(buf, n, "model.%s", name + vn);
        return buf;
    }
    return strncmp(name, "model.", 6) ? name : "";
}

// Where the loaded values go: per unit, elements [lo, lo + valid) of the canonical
// vector, written to dst[u] (which points at element lo). A full load is lo = 0,
// valid = numel; an FSDP rank passes its shard and reads nothing else.
typedef struct {
    const int64_t *lo, *valid;
    float *const *dst;
} slice_sink;

// seen[first[u] + k]: tensor k of unit u was read (first: the units' running tensor counts).
static int load_file(const zt_model_layout *lay, const char *path, const slice_sink *sink, char *seen,
                     const int64_t *first) {
    zt_st_file f;
    if (zt_st_open(&f, path) != 0) return -1;
    int rc = 0;
    for (int i = 0; i < f.ntensors && rc == 0; i++) {
        const zt_st_tensor *t = &f.tensors[i];
        if (zt_hf_is_carried(&lay->cfg, t->name)) continue;  // RUN/carry's, not the model's
        char mapped[300];
        const char *lname = layout_name(&lay->cfg, t->name, mapped, sizeof mapped);
        int u, k;
        if (zt_model_layout_find(lay, lname, &u, &k) != 0) {
            if (ignorable(lay, lname)) continue;
            int layer;
            if (sscanf(lname, "model.layers.%d.", &layer) == 1 && layer >= lay->cfg.num_layers)
                rc = zt_err("%s: tensor %s belongs to layer %d but the config has num_hidden_layers = %d", path,
                            t->name, layer, lay->cfg.num_layers);
            else
                rc = zt_err("%s: tensor %s is not part of a %s model with this config (tie_word_embeddings = %s)",
                            path, t->name, zt_model_title(&lay->cfg), lay->cfg.tie_word_embeddings ? "true" : "false");
            break;
        }
        const zt_tensor_desc *d = &lay->units[u].t[k];
        int ok = t->ndim == d->ndim;
        for (int j = 0; j < d->ndim && ok; j++) ok = t->shape[j] == d->shape[j];
        if (!ok) {
            char got[128] = "", *g = got, need[96] = "", *w = need;
            for (int j = 0; j < t->ndim; j++)
                g += snprintf(g, sizeof got - (size_t)(g - got), "%s%lld", j ? ", " : "", (long long)t->shape[j]);
            for (int j = 0; j < d->ndim; j++)
                w += snprintf(w, sizeof need - (size_t)(w - need), "%s%lld", j ? ", " : "", (long long)d->shape[j]);
            rc = zt_err("%s: tensor %s has shape [%s]; the config needs [%s]", path, t->name, got, need);
            break;
        }
        if (seen[first[u] + k]) {
            rc = zt_err("%s: tensor %s appears more than once in the checkpoint", path, t->name);
            break;
        }
        const int64_t a = d->offset > sink->lo[u] ? d->offset : sink->lo[u];
        const int64_t e = d->offset + d->numel, se = sink->lo[u] + sink->valid[u];
        const int64_t b = e < se ? e : se;
        if (a < b && zt_st_read_f32_range(&f, t, a - d->offset, b - a, sink->dst[u] + (a - sink->lo[u])) != 0) {
            rc = -1;
            break;
        }
        seen[first[u] + k] = 1;
    }
    zt_st_close(&f);
    return rc;
}

// Files named by model.safetensors.index.json's weight_map, deduplicated, in first-seen order.
static int index_files(const char *dir, const char *index_path, char ***files_out, int *n_out) {
    size_t len;
    char *text = zt_read_file(index_path, &len);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    char deep[160];
    const char *too_deep = root ? NULL : zt_json_depth_error(text, len, zt_json_error_col(text, len), deep, sizeof deep);
    free(text);
    if (!root) return too_deep ? zt_err("%s: %s", index_path, too_deep) : zt_err("%s: not valid JSON", index_path);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!wm || !cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return zt_err("%s: missing object \"weight_map\" {tensor name: file}", index_path);
    }
    int cap = cJSON_GetArraySize(wm), n = 0;
    char **files = zt_xcalloc((size_t)cap + 1, sizeof(char *));
    const cJSON *it;
    cJSON_ArrayForEach(it, wm) {
        if (!cJSON_IsString(it) || strchr(it->valuestring, '/')) {
            for (int i = 0; i < n; i++) free(files[i]);
            free(files);
            cJSON_Delete(root);
            return zt_err("%s: weight_map[\"%s\"] must be a file name inside %s", index_path, it->string, dir);
        }
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = !strcmp(files[i] + strlen(dir) + 1, it->valuestring);
        if (dup) continue;
        size_t len = strlen(dir) + strlen(it->valuestring) + 2;
        files[n] = zt_xmalloc(len);
        snprintf(files[n], len, "%s/%s", dir, it->valuestring);
        if (!is_file(files[n])) {
            int rc = zt_err("%s: shard %s named in weight_map (for %s) does not exist", index_path, files[n],
                            it->string);
            for (int i = 0; i <= n; i++) free(files[i]);
            free(files);
            cJSON_Delete(root);
            return rc;
        }
        n++;
    }
    cJSON_Delete(root);
    *files_out = files;
    *n_out = n;
    return 0;
}

int zt_hf_list_files(const char *path, char ***files_out, int *n_out) {
    char **files = NULL;
    int nfiles = 0;
    char buf[4200];
    struct stat st;
    if (stat(path, &st) != 0) return zt_err("%s: no such file or directory (expected a HF model directory or a .safetensors file)", path);
    if (S_ISDIR(st.st_mode)) {
        snprintf(buf, sizeof buf, "%s/model.safetensors.index.json", path);
        if (is_file(buf)) {
            if (index_files(path, buf, &files, &nfiles) != 0) return -1;
        } else {
            snprintf(buf, sizeof buf, "%s/model.safetensors", path);
            if (!is_file(buf))
                return zt_err("%s: neither model.safetensors nor model.safetensors.index.json is present", path);
            files = zt_xcalloc(2, sizeof(char *));
            files[0] = strdup(buf);
            nfiles = 1;
        }
    } else {
        files = zt_xcalloc(2, sizeof(char *));
        files[0] = strdup(path);
        nfiles = 1;
    }
    *files_out = files;
    *n_out = nfiles;
    return 0;
}

// A config whose family names its text weights under a prefix (a VLM wrapper's): a checkpoint with
// no tensor under it is refused before any tensor is read (its "model.*" names would each be
// refused on their own).
static int check_text_prefix(const zt_model_config *cfg, const char *path, char *const *files, int nfiles) {
    const char *vp = zt_model_hf_prefix(cfg);
    int found = 0;
    for (int i = 0; i < nfiles && !found; i++) {
        zt_st_file f;
        if (zt_st_open(&f, files[i]) != 0) return -1;
        for (int k = 0; k < f.ntensors && !found; k++) found = !strncmp(f.tensors[k].name, vp, strlen(vp));
        zt_st_close(&f);
    }
    if (found) return 0;
    return zt_err("%s: the config is a vision-language wrapper's (%s), whose text weights are named %s*, but no "
                  "tensor has that prefix (%d file%s searched); give the checkpoint the config was saved with, or a "
                  "text-only config for text-only weights",
                  nfiles == 1 ? files[0] : path, zt_model_title(cfg), vp, nfiles, nfiles == 1 ? "" : "s");
}

static int load_hf(const zt_model_layout *lay, const char *path, const slice_sink *sink) {
    char **files = NULL;
    int nfiles = 0;
    if (zt_hf_list_files(path, &files, &nfiles) != 0) return -1;
    if (zt_model_hf_prefix(&lay->cfg) && check_text_prefix(&lay->cfg, path, files, nfiles) != 0) {
        for (int i = 0; i < nfiles; i++) free(files[i]);
        free(files);
        return -1;
    }
    int64_t *first = zt_xcalloc((size_t)lay->nunits + 1, sizeof *first);  // any number of tensors per unit
    for (int u = 0; u < lay->nunits; u++) first[u + 1] = first[u] + lay->units[u].ntensors;
    char *seen = zt_xcalloc((size_t)(first[lay->nunits] > 0 ? first[lay->nunits] : 1), 1);
    int rc = 0;
    for (int i = 0; i < nfiles && rc == 0; i++) rc = load_file(lay, files[i], sink, seen, first);
    for (int u = 0; u < lay->nunits && rc == 0; u++)
        for (int k = 0; k < lay->units[u].ntensors && rc == 0; k++)
            if (!seen[first[u] + k]) {
                char name[300];
                zt_hf_export_name(zt_model_hf_prefix(&lay->cfg), lay->units[u].t[k].name, name, sizeof name);
                rc = zt_err("%s: tensor %s is missing from the checkpoint (%d file%s searched)", path, name, nfiles,
                            nfiles == 1 ? "" : "s");
            }
    for (int i = 0; i < nfiles; i++) free(files[i]);
    free(files);
    free(seen);
    free(first);
    return rc;
}

// The first element where two tensors of the same shape differ, compared chunk by chunk as fp32
// (nothing larger than a chunk is held): -1 when equal everywhere, -2 + zt_err on a read error.
static int64_t first_difference(const zt_st_file *fa, const zt_st_tensor *a, const zt_st_file *fb,
                                const zt_st_tensor *b, float *va, float *vb) {
    enum { CHUNK = 1 << 16 };
    float *x = zt_xmalloc(CHUNK * sizeof(float)), *y = zt_xmalloc(CHUNK * sizeof(float));
    int64_t at = -1;
    for (int64_t i = 0; i < a->numel && at == -1; i += CHUNK) {
        const int64_t n = a->numel - i < CHUNK ? a->numel - i : CHUNK;
        if (zt_st_read_f32_range(fa, a, i, n, x) != 0 || zt_st_read_f32_range(fb, b, i, n, y) != 0) {
            at = -2;
            break;
        }
        for (int64_t k = 0; k < n; k++)
            if (x[k] != y[k]) {  // torch.equal's rule: values, not bits (-0 == 0; NaN never equal)
                at = i + k, *va = x[k], *vb = y[k];
                break;
            }
    }
    free(x);
    free(y);
    return at;
}

int zt_hf_tied_head_differs(const zt_model_config *cfg, const char *path, int *distinct, char *detail, size_t n) {
    *distinct = 0;
    if (n) detail[0] = 0;
    if (!cfg->tie_word_embeddings) return 0;
    char **files = NULL;
    int nfiles = 0;
    if (zt_hf_list_files(path, &files, &nfiles) != 0) return -1;
    char emb_name[128];
    zt_hf_export_name(zt_model_hf_prefix(cfg), "model.embed_tokens.weight", emb_name, sizeof emb_name);
    zt_st_file *st = zt_xcalloc((size_t)nfiles, sizeof *st);
    int opened = 0, rc = 0, hf = -1, ef = -1;
    const zt_st_tensor *head = NULL, *emb = NULL;
    for (; opened < nfiles && rc == 0; opened++) {
        rc = zt_st_open(&st[opened], files[opened]);
        if (rc != 0) break;
        const zt_st_tensor *t;
        if (!head && (t = zt_st_find(&st[opened], "lm_head.weight"))) head = t, hf = opened;
        if (!emb && (t = zt_st_find(&st[opened], emb_name))) emb = t, ef = opened;
    }
    // Without lm_head.weight there is nothing to tell apart; without the embedding the load refuses
    // the checkpoint by name.
    if (rc == 0 && head && emb) {
        int same_shape = head->ndim == emb->ndim;
        for (int j = 0; j < head->ndim && same_shape; j++) same_shape = head->shape[j] == emb->shape[j];
        float a = 0, b = 0;
        const int64_t at = same_shape ? first_difference(&st[hf], head, &st[ef], emb, &a, &b) : 0;
        if (at == -2) {
            rc = -1;
        } else if (!same_shape) {
            *distinct = 1;
            snprintf(detail, n, "lm_head.weight's shape is not %s's", emb_name);
        } else if (at >= 0) {
            *distinct = 1;
            const int64_t cols = head->ndim == 2 ? head->shape[1] : 1;
            snprintf(detail, n, "lm_head.weight differs from %s, first at [%lld, %lld]: %.9g against %.9g", emb_name,
                     (long long)(at / cols), (long long)(at % cols), (double)a, (double)b);
        }
    }
    for (int i = 0; i < opened; i++) zt_st_close(&st[i]);
    free(st);
    for (int i = 0; i < nfiles; i++) free(files[i]);
    free(files);
    return rc;
}

int zt_hf_load(const zt_model_layout *lay, const char *path, float *const *params) {
    int distinct = 0;
    char detail[400];
    if (zt_hf_tied_head_differs(&lay->cfg, path, &distinct, detail, sizeof detail) != 0) return -1;
    if (distinct)
        return zt_err("%s: the config ties lm_head.weight to the embedding (tie_word_embeddings true), but %s: "
                      "transformers keeps the two apart; load it with an untied config (tie_word_embeddings false)",
                      path, detail);
    int64_t *lo = zt_xcalloc((size_t)lay->nunits, sizeof(int64_t)), *valid = zt_xcalloc((size_t)lay->nunits, sizeof(int64_t));
    for (int u = 0; u < lay->nunits; u++) valid[u] = lay->units[u].numel;
    const slice_sink sink = {lo, valid, params};
    int rc = load_hf(lay, path, &sink);
    free(lo);
    free(valid);
    return rc;
}

int zt_hf_load_slices(const zt_model_layout *lay, const char *path, const int64_t *lo, const int64_t *valid,
                            float *const *dst) {
    const slice_sink sink = {lo, valid, dst};
    return load_hf(lay, path, &sink);
}

// Writes config.json and model.safetensors (HF names) for the given full unit
// vectors; dtype is ZT_ST_BF16 or ZT_ST_F32. Files are written atomically.
int zt_hf_save(const zt_model_layout *lay, float *const *params, const char *dir, int dtype) {
    if (zt_mkdirs(dir) != 0) return -1;
    char path[4200];
    char *cfg = zt_model_config_json(&lay->cfg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = zt_write_file_atomic(path, cfg, strlen(cfg));
    free(cfg);
    if (rc != 0) return -1;
    zt_st_writer *w = zt_st_writer_new();
    zt_st_writer_metadata(w, "format", "pt");
    for (int u = 0; u < lay->nunits && rc == 0; u++)
        for (int k = 0; k < lay->units[u].ntensors && rc == 0; k++) {
            const zt_tensor_desc *d = &lay->units[u].t[k];
            char name[300];
            zt_hf_export_name(zt_model_hf_prefix(&lay->cfg), d->name, name, sizeof name);
            rc = zt_st_writer_add_f32(w, name, params[u] + d->offset, d->ndim, d->shape, (zt_st_dtype)dtype);
        }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (rc == 0) rc = zt_st_write(w, path);
    zt_st_writer_free(w);
    return rc;
}
