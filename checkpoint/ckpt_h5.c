// The HDF5 plumbing behind checkpoint/ckpt*.c: error capture, typed attributes, and
// the readers of ckpt.h5's self-describing parts (header, unit tensor tables, crc32c
// attributes); also the config/JSON comparisons and CRC-32C combination.
// defines: zt_h5_*, zt_ckpt_read_header, zt_ckpt_read_unit, zt_ckpt_read_crc,
//          zt_ckpt_config_diff, zt_ckpt_check_train_json, zt_crc32c_combine
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"
#include "model/family.h"
#include "base/crc32c.h"
#include "base/common.h"

const char *const zt_ckpt_ds_names[ZT_CKPT_NDS] = {"master", "adam_m", "adam_v"};

int zt_ckpt_err_prefix(const char *fmt, ...) {
    char pre[512], old[ZT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(old, sizeof old, "%s", zt_errmsg());
    return zt_err("%s: %.*s", pre, (int)(ZT_ERR_MAX - strlen(pre) - 3), old);
}

// ---- HDF5 errors --------------------------------------------------------------

void zt_h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

typedef struct {
    char *buf;
    size_t cap;
    int count;
} h5_walk;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    h5_walk *w = data;
    if (w->count >= 3 || !e->desc || !e->desc[0] || strstr(w->buf, e->desc)) return 0;
    size_t len = strlen(w->buf);
    snprintf(w->buf + len, w->cap - len, "%s%s", len ? "; " : "", e->desc);
    w->count++;
    return 0;
}

const char *zt_h5_why(void) {
    static _Thread_local char buf[1024];
    buf[0] = 0;
    h5_walk w = {buf, sizeof buf, 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);  // innermost (the real cause) first
    H5Eclear2(H5E_DEFAULT);
    if (!buf[0]) snprintf(buf, sizeof buf, "HDF5 gave no detail");
    return buf;
}

// ---- attribute writers --------------------------------------------------------

static int put_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype, hid_t space, const void *data) {
    hid_t a = H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, mtype, data) >= 0;
    if (!ok) zt_err("writing attribute %s failed: %s", name, zt_h5_why());
    if (a >= 0) H5Aclose(a);
    H5Sclose(space);
    return ok ? 0 : -1;
}

static hid_t space_n(int64_t n) {
    if (n == 1) return H5Screate(H5S_SCALAR);
    hsize_t d = (hsize_t)n;
    return H5Screate_simple(1, &d, NULL);
}

int zt_h5_put_i64(hid_t loc, const char *name, int64_t v) {
    return put_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space_n(1), &v);
}
int zt_h5_put_f64(hid_t loc, const char *name, double v) {
    return put_attr(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space_n(1), &v);
}
int zt_h5_put_u64v(hid_t loc, const char *name, const uint64_t *v, int n) {
    return put_attr(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, space_n(n), v);
}
int zt_h5_put_u32v(hid_t loc, const char *name, const uint32_t *v, int64_t n) {
    hsize_t d = (hsize_t)n;  // always an array, even of one chunk
    return put_attr(loc, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, H5Screate_simple(1, &d, NULL), v);
}
int zt_h5_put_str(hid_t loc, const char *name, const char *s) {
    hid_t t = H5Tcopy(H5T_C_S1);  // fixed length, NUL-terminated, UTF-8
    H5Tset_size(t, strlen(s) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    H5Tset_cset(t, H5T_CSET_UTF8);
    int rc = put_attr(loc, name, t, t, H5Screate(H5S_SCALAR), s);
    H5Tclose(t);
    return rc;
}

// ---- attribute readers --------------------------------------------------------

static hid_t open_attr(hid_t loc, const char *where, const char *name) {
    htri_t e = H5Aexists(loc, name);
    if (e <= 0) {
        if (e < 0)
            zt_err("%s: cannot look up attribute \"%s\": %s", where, name, zt_h5_why());
        else
            zt_err("%s: attribute \"%s\" is missing", where, name);
        return -1;
    }
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) zt_err("%s: cannot open attribute \"%s\": %s", where, name, zt_h5_why());
    return a;
}

static int64_t attr_npoints(hid_t a) {
    hid_t s = H5Aget_space(a);
    int64_t n = s >= 0 ? (int64_t)H5Sget_simple_extent_npoints(s) : -1;
    if (s >= 0) H5Sclose(s);
    return n;
}

static int get_num(hid_t loc, const char *where, const char *name, hid_t mtype, H5T_class_t cls, void *out,
                   int64_t n) {
    hid_t a = open_attr(loc, where, name);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a);
    int64_t np = attr_npoints(a);
    int ok = 1;
    if (H5Tget_class(t) != cls)
        ok = zt_err("%s: attribute \"%s\" has the wrong type (expected %s)", where, name,
                    cls == H5T_FLOAT ? "a float" : "an integer") == 0;
    else if (np != n)
        ok = zt_err("%s: attribute \"%s\" has %lld value%s, expected %lld", where, name, (long long)np,
                    np == 1 ? "" : "s", (long long)n) == 0;
    else if (H5Aread(a, mtype, out) < 0)
        ok = zt_err("%s: reading attribute \"%s\" failed: %s", where, name, zt_h5_why()) == 0;
    H5Tclose(t);
    H5Aclose(a);
    return ok ? 0 : -1;
}

int zt_h5_get_i64(hid_t loc, const char *where, const char *name, int64_t *v) {
    return get_num(loc, where, name, H5T_NATIVE_INT64, H5T_INTEGER, v, 1);
}
int zt_h5_get_f64(hid_t loc, const char *where, const char *name, double *v) {
    return get_num(loc, where, name, H5T_NATIVE_DOUBLE, H5T_FLOAT, v, 1);
}
int zt_h5_get_u64v(hid_t loc, const char *where, const char *name, uint64_t *v, int n) {
    return get_num(loc, where, name, H5T_NATIVE_UINT64, H5T_INTEGER, v, n);
}

int zt_h5_get_u32v(hid_t loc, const char *where, const char *name, uint32_t **v, int64_t *n) {
    hid_t a = open_attr(loc, where, name);
    if (a < 0) return -1;
    int64_t np = attr_npoints(a);
    hid_t t = H5Aget_type(a);
    int ok = H5Tget_class(t) == H5T_INTEGER ||
             zt_err("%s: attribute \"%s\" has the wrong type (expected uint32)", where, name) == 0;
    uint32_t *buf = ok ? zt_xmalloc((size_t)(np > 0 ? np : 1) * sizeof(uint32_t)) : NULL;
    if (ok && H5Aread(a, H5T_NATIVE_UINT32, buf) < 0)
        ok = zt_err("%s: reading attribute \"%s\" failed: %s", where, name, zt_h5_why()) == 0;
    H5Tclose(t);
    H5Aclose(a);
    if (!ok) {
        free(buf);
        return -1;
    }
    *v = buf;
    *n = np;
    return 0;
}

char *zt_h5_get_str(hid_t loc, const char *where, const char *name) {
    hid_t a = open_attr(loc, where, name);
    if (a < 0) return NULL;
    hid_t ft = H5Aget_type(a);
    char *out = NULL;
    if (H5Tget_class(ft) != H5T_STRING) {
        zt_err("%s: attribute \"%s\" is not a string", where, name);
    } else if (H5Tis_variable_str(ft) > 0) {  // written by another tool (h5py writes these)
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(ft));
        char *s = NULL;
        if (H5Aread(a, mt, &s) < 0)
            zt_err("%s: reading attribute \"%s\" failed: %s", where, name, zt_h5_why());
        else
            out = strdup(s ? s : "");
        if (s) H5free_memory(s);
        H5Tclose(mt);
    } else {
        size_t sz = H5Tget_size(ft);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, sz);
        H5Tset_strpad(mt, H5T_STR_NULLTERM);
        H5Tset_cset(mt, H5Tget_cset(ft));
        out = zt_xcalloc(sz + 1, 1);
        if (H5Aread(a, mt, out) < 0) {
            zt_err("%s: reading attribute \"%s\" failed: %s", where, name, zt_h5_why());
            free(out);
            out = NULL;
        }
        H5Tclose(mt);
    }
    H5Tclose(ft);
    H5Aclose(a);
    return out;
}

// ---- ckpt.h5 structure --------------------------------------------------------

hid_t zt_ckpt_open_serial(const char *file) {
    zt_h5_quiet();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_sec2(fapl);
    hid_t fid = H5Fopen(file, H5F_ACC_RDONLY, fapl);
    if (fid < 0) {
        const char *why = zt_h5_why();
        if (strstr(why, "truncated file"))
            zt_err("%s: the file is truncated (shorter than its own superblock says: %s); the checkpoint is "
                   "incomplete or damaged and is refused",
                   file, why);
        else
            zt_err("%s: cannot open as HDF5: %s", file, why);
    }
    H5Pclose(fapl);
    return fid < 0 ? -1 : fid;
}

int zt_ckpt_read_header(hid_t fid, const char *path, zt_ckpt_meta *meta, zt_model_config *cfg, char **train_json,
                        char **cfg_json, int *nunits) {
    htri_t has_fmt = H5Aexists(fid, "format");
    if (has_fmt < 0)
        return zt_err("%s: cannot read the root group's attributes (damaged HDF5 metadata): %s; the checkpoint is "
                      "refused",
                      path, zt_h5_why());
    char *fmt = has_fmt > 0 ? zt_h5_get_str(fid, path, "format") : NULL;
    if (has_fmt > 0 && !fmt) return -1;
    if (!fmt)
        return zt_err("%s is not a zerotrain checkpoint (its root group has no string attribute \"format\" = \"%s\")",
                      path, ZT_CKPT_FORMAT);
    int bad = strcmp(fmt, ZT_CKPT_FORMAT) != 0;
    if (bad) zt_err("%s is not a zerotrain checkpoint: attribute format is \"%.100s\", expected \"%s\"", path, fmt,
                    ZT_CKPT_FORMAT);
    free(fmt);
    if (bad) return -1;
    int64_t ver, v;
    if (zt_h5_get_i64(fid, path, "format_version", &ver) != 0) return -1;
    if (ver < 1 || ver > ZT_CKPT_VERSION)
        return zt_err("%s: checkpoint format_version %lld is not supported (this zerotrain reads version %d)", path,
                      (long long)ver, ZT_CKPT_VERSION);
    zt_ckpt_meta m;
    memset(&m, 0, sizeof m);
    int rc = 0;
    rc |= zt_h5_get_i64(fid, path, "step", &m.step);
    rc |= zt_h5_get_i64(fid, path, "epoch", &m.epoch);
    rc |= zt_h5_get_i64(fid, path, "epoch_step", &m.epoch_step);
    rc |= zt_h5_get_i64(fid, path, "epoch_blocks", &m.epoch_blocks);
    rc |= zt_h5_get_i64(fid, path, "tokens_seen", &m.tokens_seen);
    rc |= zt_h5_get_u64v(fid, path, "seed", &m.seed, 1);
    rc |= zt_h5_get_u64v(fid, path, "rng_state", m.rng_state, 4);
    rc |= zt_h5_get_i64(fid, path, "world_size", &v);
    m.world_size = (int)v;
    rc |= zt_h5_get_f64(fid, path, "lr_last", &m.lr_last);
    rc |= zt_h5_get_i64(fid, path, "final", &v);
    m.final = (int)v;
    if (rc) return -1;
    char *rid = zt_h5_get_str(fid, path, "run_id");
    if (!rid) return -1;
    snprintf(m.run_id, sizeof m.run_id, "%s", rid);
    free(rid);
    int64_t nu;
    if (zt_h5_get_i64(fid, path, "nunits", &nu) != 0) return -1;
    if (nu < 2 || nu > 100000) return zt_err("%s: attribute nunits = %lld is out of range", path, (long long)nu);
    if (cfg) {
        char where[4200];
        snprintf(where, sizeof where, "%s: group /model_config", path);
        hid_t g = H5Gopen2(fid, "model_config", H5P_DEFAULT);
        if (g < 0) return zt_err("%s: cannot open: %s", where, zt_h5_why());
        zt_model_config c;
        memset(&c, 0, sizeof c);
        int64_t i[7], tie;
        rc = 0;
        rc |= zt_h5_get_i64(g, where, "vocab_size", &c.vocab_size);
        rc |= zt_h5_get_i64(g, where, "hidden_size", &c.hidden_size);
        rc |= zt_h5_get_i64(g, where, "intermediate_size", &c.intermediate_size);
        rc |= zt_h5_get_i64(g, where, "num_hidden_layers", &i[0]);
        rc |= zt_h5_get_i64(g, where, "num_attention_heads", &i[1]);
        rc |= zt_h5_get_i64(g, where, "num_key_value_heads", &i[2]);
        rc |= zt_h5_get_i64(g, where, "head_dim", &i[3]);
        rc |= zt_h5_get_f64(g, where, "rms_norm_eps", &c.rms_norm_eps);
        rc |= zt_h5_get_f64(g, where, "rope_theta", &c.rope_theta);
        rc |= zt_h5_get_i64(g, where, "tie_word_embeddings", &tie);
        rc |= zt_h5_get_f64(g, where, "initializer_range", &c.initializer_range);
        rc |= zt_h5_get_i64(g, where, "max_position_embeddings", &c.max_position_embeddings);
        rc |= zt_h5_get_i64(g, where, "bos_token_id", &c.bos_token_id);
        rc |= zt_h5_get_i64(g, where, "eos_token_id", &c.eos_token_id);
        char *rope_scaling = NULL;  // written only for scaled RoPE (checkpoints before it: plain)
        // Families other than Qwen3 store their whole config.json text (model_type included):
        // it goes through the same parser, and the fields above must agree with it.
        if (!rc && H5Aexists(g, "config_json") > 0) {
            char *text = zt_h5_get_str(g, where, "config_json");
            H5Gclose(g);
            if (!text) return -1;
            zt_model_config f;
            rc = zt_model_config_parse(&f, text, where);
            free(text);
            if (rc) return -1;
            if (f.vocab_size != c.vocab_size || f.hidden_size != c.hidden_size || f.num_layers != i[0] ||
                f.num_heads != i[1] || f.num_kv_heads != i[2] || f.head_dim != i[3])
                return zt_err("%s: attribute config_json disagrees with the group's size attributes", where);
            if (nu != f.num_layers + 2)
                return zt_err("%s: nunits = %lld but num_hidden_layers = %d needs %d units", path, (long long)nu,
                              f.num_layers, f.num_layers + 2);
            *cfg = f;
            goto cfg_done;
        }
        if (!rc && H5Aexists(g, "rope_scaling") > 0) {
            rope_scaling = zt_h5_get_str(g, where, "rope_scaling");
            if (!rope_scaling) rc = -1;
        }
        H5Gclose(g);
        if (rc) return -1;
        // The same rules as config.json (model/config.c): the values go through its parser,
        // so a damaged checkpoint cannot carry a config no config.json could (0 kv heads, a
        // negative layer count, a parameter count that overflows).
        if (!isfinite(c.rms_norm_eps) || !isfinite(c.rope_theta) || !isfinite(c.initializer_range))
            return zt_err("%s: rms_norm_eps, rope_theta and initializer_range must be finite numbers", where);
        if (tie != 0 && tie != 1) return zt_err("%s: tie_word_embeddings = %lld must be 0 or 1", where, (long long)tie);
        if (c.bos_token_id < -1 || c.eos_token_id < -1)
            return zt_err("%s: bos_token_id and eos_token_id must be token ids, or -1 for none", where);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "vocab_size", (double)c.vocab_size);
        cJSON_AddNumberToObject(o, "hidden_size", (double)c.hidden_size);
        cJSON_AddNumberToObject(o, "intermediate_size", (double)c.intermediate_size);
        cJSON_AddNumberToObject(o, "num_hidden_layers", (double)i[0]);
        cJSON_AddNumberToObject(o, "num_attention_heads", (double)i[1]);
        cJSON_AddNumberToObject(o, "num_key_value_heads", (double)i[2]);
        cJSON_AddNumberToObject(o, "head_dim", (double)i[3]);
        cJSON_AddNumberToObject(o, "rms_norm_eps", c.rms_norm_eps);
        cJSON_AddNumberToObject(o, "rope_theta", c.rope_theta);
        cJSON_AddBoolToObject(o, "tie_word_embeddings", (int)tie);
        cJSON_AddNumberToObject(o, "initializer_range", c.initializer_range);
        cJSON_AddNumberToObject(o, "max_position_embeddings", (double)c.max_position_embeddings);
        if (c.bos_token_id >= 0) cJSON_AddNumberToObject(o, "bos_token_id", (double)c.bos_token_id);
        if (c.eos_token_id >= 0) cJSON_AddNumberToObject(o, "eos_token_id", (double)c.eos_token_id);
        if (rope_scaling) {
            cJSON *rs = cJSON_Parse(rope_scaling);
            free(rope_scaling);
            if (!rs) {
                cJSON_Delete(o);
                return zt_err("%s: attribute rope_scaling is not JSON", where);
            }
            cJSON_AddItemToObject(o, "rope_scaling", rs);
        }
        char *text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        rc = zt_model_config_parse(&c, text, where);
        free(text);
        if (rc) return -1;
        if (nu != c.num_layers + 2)
            return zt_err("%s: nunits = %lld but num_hidden_layers = %d needs %d units", path, (long long)nu,
                          c.num_layers, c.num_layers + 2);
        *cfg = c;
    }
cfg_done:
    if (train_json && !(*train_json = zt_h5_get_str(fid, path, "train_json"))) return -1;
    if (cfg_json && !(*cfg_json = zt_h5_get_str(fid, path, "model_config_json"))) {
        if (train_json) {  // the caller owns *train_json on success only: leave it NULL, not dangling
            free(*train_json);
            *train_json = NULL;
        }
        return -1;
    }
    if (meta) *meta = m;
    if (nunits) *nunits = (int)nu;
    return 0;
}

// A JSON number that is a whole count a file can hold: finite, integral, 0..2^53.
#define JSON_COUNT_MAX ((int64_t)1 << 53)
static int json_count(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    const double x = v->valuedouble;
    if (!(x >= 0 && x <= (double)JSON_COUNT_MAX) || x != floor(x)) return 0;
    *out = (int64_t)x;
    return 1;
}

int zt_ckpt_read_unit(hid_t fid, const char *path, int u, zt_ckpt_unit_info *ui) {
    char gname[32], where[4200];
    snprintf(gname, sizeof gname, "units/%03d", u);
    snprintf(where, sizeof where, "%s: group /%s", path, gname);
    memset(ui, 0, sizeof *ui);
    htri_t ex = H5Lexists(fid, "units", H5P_DEFAULT);
    if (ex > 0) ex = H5Lexists(fid, gname, H5P_DEFAULT);
    if (ex <= 0) return zt_err("%s: group /%s is missing", path, gname);
    hid_t g = H5Gopen2(fid, gname, H5P_DEFAULT);
    if (g < 0) return zt_err("%s: cannot open: %s", where, zt_h5_why());
    int rc = zt_h5_get_i64(g, where, "numel", &ui->numel) | zt_h5_get_i64(g, where, "layer", &ui->layer);
    char *kind = rc ? NULL : zt_h5_get_str(g, where, "kind");
    char *tj = kind ? zt_h5_get_str(g, where, "tensors") : NULL;
    H5Gclose(g);
    if (!tj) {
        free(kind);
        return -1;
    }
    snprintf(ui->kind, sizeof ui->kind, "%s", kind);
    free(kind);
    cJSON *arr = cJSON_Parse(tj);
    free(tj);
    rc = 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1)
        rc = zt_err("%s: attribute \"tensors\" must be a JSON array of 1 or more {name, shape, offset}", where);
    else
        ui->t = zt_xcalloc((size_t)cJSON_GetArraySize(arr), sizeof *ui->t);
    int64_t next = 0;
    const cJSON *it;
    if (rc == 0) cJSON_ArrayForEach(it, arr) {
            zt_ckpt_tensor *t = &ui->t[ui->ntensors];
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
            const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
            const cJSON *of = cJSON_GetObjectItemCaseSensitive(it, "offset");
            int n = cJSON_IsArray(sh) ? cJSON_GetArraySize(sh) : 0;
            if (!cJSON_IsString(nm) || !cJSON_IsNumber(of) || n < 1 || n > 3) {
                rc = zt_err("%s: tensors[%d] needs a string name, a shape of 1 to 3 numbers and a number offset",
                            where, ui->ntensors);
                break;
            }
            snprintf(t->name, sizeof t->name, "%s", nm->valuestring);
            t->ndim = n;
            t->numel = 1;
            int bad_num = !json_count(of, &t->offset);
            for (int j = 0; j < n && !bad_num; j++)
                bad_num = !json_count(cJSON_GetArrayItem(sh, j), &t->shape[j]) ||
                          __builtin_mul_overflow(t->numel, t->shape[j], &t->numel) || t->numel > JSON_COUNT_MAX;
            if (bad_num) {
                rc = zt_err("%s: tensor %s: shape and offset must be whole numbers in [0, 2^53] (and so must "
                            "their product)", where, t->name);
                break;
            }
            if (t->offset != next || t->numel < 1) {
                rc = zt_err("%s: tensor %s starts at offset %lld, expected %lld (tensors must tile the unit in order)",
                            where, t->name, (long long)t->offset, (long long)next);
                break;
            }
            next += t->numel;
            ui->ntensors++;
        }
    cJSON_Delete(arr);
    if (rc == 0 && next != ui->numel)
        rc = zt_err("%s: the tensors cover %lld elements but numel = %lld", where, (long long)next,
                    (long long)ui->numel);
    if (rc != 0) zt_ckpt_unit_info_free(ui);
    return rc;
}

void zt_ckpt_unit_info_free(zt_ckpt_unit_info *ui) {
    free(ui->t);
    ui->t = NULL;
    ui->ntensors = 0;
}

int zt_ckpt_read_crc(hid_t ds, const char *where, int64_t numel, int64_t *chunk, uint32_t **crc, int64_t *nchunks) {
    hid_t s = H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    int nd = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
    if (nd == 1) H5Sget_simple_extent_dims(s, dims, NULL);
    if (s >= 0) H5Sclose(s);
    if (nd != 1 || (int64_t)dims[0] != numel)
        return zt_err("%s: dataset shape is not [%lld] (rank %d, %lld elements)", where, (long long)numel, nd,
                      (long long)dims[0]);
    hid_t t = H5Dget_type(ds);
    int isf32 = t >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 4;
    if (t >= 0) H5Tclose(t);
    if (!isf32) return zt_err("%s: dataset type is not 32-bit float", where);
    if (zt_h5_get_i64(ds, where, "crc32c_chunk_elems", chunk) != 0) return -1;
    if (*chunk < 1 || *chunk > JSON_COUNT_MAX)
        return zt_err("%s: crc32c_chunk_elems = %lld must be in [1, 2^53]", where, (long long)*chunk);
    int64_t want = numel / *chunk + (numel % *chunk != 0);  // no numel + chunk - 1: it may wrap
    if (zt_h5_get_u32v(ds, where, "crc32c", crc, nchunks) != 0) return -1;
    if (*nchunks != want) {
        free(*crc);
        return zt_err("%s: attribute crc32c has %lld values, but %lld elements in chunks of %lld need %lld", where,
                      (long long)*nchunks, (long long)numel, (long long)*chunk, (long long)want);
    }
    return 0;
}

void zt_ckpt_span_tensors(const zt_ckpt_unit_info *ui, int64_t a, int64_t b, char *out, size_t n) {
    int first = -1, last = -1;
    for (int i = 0; i < ui->ntensors; i++) {
        const zt_ckpt_tensor *t = &ui->t[i];
        if (t->offset < b && t->offset + t->numel > a) {
            if (first < 0) first = i;
            last = i;
        }
    }
    if (first < 0)
        snprintf(out, n, "no tensor");
    else if (first == last)
        snprintf(out, n, "%s", ui->t[first].name);
    else
        snprintf(out, n, "%s .. %s", ui->t[first].name, ui->t[last].name);
}

const char *zt_ckpt_unit_label(const zt_ckpt_unit_info *ui, char *buf, size_t n) {
    if (!strcmp(ui->kind, "embed"))
        snprintf(buf, n, "embedding");
    else if (!strcmp(ui->kind, "layer"))
        snprintf(buf, n, "decoder layer %lld", (long long)ui->layer);
    else if (!strcmp(ui->kind, "head"))
        snprintf(buf, n, ui->ntensors > 1 ? "final norm + lm_head" : "final norm");
    else
        snprintf(buf, n, "%s", ui->kind);
    return buf;
}

int64_t zt_ckpt_verify_range(const float *data, int64_t a, int64_t n, int64_t numel, int64_t chunk,
                             const uint32_t *crc, uint32_t *computed) {
    for (int64_t c = (a + chunk - 1) / chunk; c * chunk < a + n; c++) {
        int64_t s = c * chunk, e = s + chunk < numel ? s + chunk : numel;
        if (e > a + n) break;
        uint32_t got = zt_crc32c(0, data + (s - a), (size_t)(e - s) * sizeof(float));
        if (got != crc[c]) {
            *computed = got;
            return c;
        }
    }
    return -1;
}

// ---- config and JSON ------------------------------------------------------------

static void appendf(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *out, size_t n, const char *fmt, ...) {
    size_t len = strlen(out);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + len, n - len, fmt, ap);
    va_end(ap);
}

int zt_ckpt_config_diff(const zt_model_config *a, const zt_model_config *b, char *out, size_t n) {
    int k = 0;
    if (n) out[0] = 0;
#define DI(field, name)                                                                                        \
    if ((int64_t)a->field != (int64_t)b->field)                                                                \
        appendf(out, n, "%scheckpoint has %s %lld, the run has %lld", k++ ? "; " : "", name, (long long)a->field, \
                (long long)b->field);
#define DF(field, name)                                                                                         \
    if (a->field != b->field)                                                                                   \
        appendf(out, n, "%scheckpoint has %s %.17g, the run has %.17g", k++ ? "; " : "", name, a->field, b->field);
    DI(vocab_size, "vocab_size")
    DI(hidden_size, "hidden_size")
    DI(intermediate_size, "intermediate_size")
    DI(num_layers, "num_hidden_layers")
    DI(num_heads, "num_attention_heads")
    DI(num_kv_heads, "num_key_value_heads")
    DI(head_dim, "head_dim")
    DF(rms_norm_eps, "rms_norm_eps")
    DF(rope_theta, "rope_theta")
    if (!a->tie_word_embeddings != !b->tie_word_embeddings)
        appendf(out, n, "%scheckpoint has tie_word_embeddings %s, the run has %s", k++ ? "; " : "",
                a->tie_word_embeddings ? "true" : "false", b->tie_word_embeddings ? "true" : "false");
    DI(max_position_embeddings, "max_position_embeddings")
    if (!a->rope_yarn != !b->rope_yarn)
        appendf(out, n, "%scheckpoint has %s RoPE, the run has %s", k++ ? "; " : "", a->rope_yarn ? "YaRN" : "plain",
                b->rope_yarn ? "YaRN" : "plain");
    if (a->rope_yarn && b->rope_yarn) {
        DF(rope_factor, "rope_scaling.factor")
        DI(rope_original_max_positions, "rope_scaling.original_max_position_embeddings")
        DF(rope_attention_factor, "rope_scaling.attention_factor (0: not given)")
        DF(rope_beta_fast, "rope_scaling.beta_fast (0: not given)")
        DF(rope_beta_slow, "rope_scaling.beta_slow (0: not given)")
        DF(rope_mscale, "rope_scaling.mscale (0: not given)")
        DF(rope_mscale_all_dim, "rope_scaling.mscale_all_dim (0: not given)")
        DI(rope_no_truncate, "rope_scaling.truncate false")
    }
    DI(bos_token_id, "bos_token_id")
    DI(eos_token_id, "eos_token_id")
    const char *fa = zt_model_family_name(a), *fb = zt_model_family_name(b);
    if (strcmp(fa, fb) != 0)
        appendf(out, n, "%scheckpoint has model family %s, the run has %s", k++ ? "; " : "", fa, fb);
    else if (a->family && a->family->config_diff)  // what the family adds (model/family.h)
        k = a->family->config_diff(a, b, out, n, k);
#undef DI
#undef DF
    return k;
}

// The first number that is not finite (JSON has no inf or NaN: cJSON reads 1e999 as inf,
// which compares unequal to itself and prints as null), or NULL.
static const cJSON *nonfinite(const cJSON *v) {
    if (cJSON_IsNumber(v)) return isfinite(v->valuedouble) ? NULL : v;
    const cJSON *it, *bad = NULL;
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) cJSON_ArrayForEach(it, v) if (!bad) bad = nonfinite(it);
    return bad;
}

int zt_ckpt_check_train_json(const char *saved, const char *now, const char *const *ignore) {
    cJSON *a = cJSON_Parse(saved ? saved : "{}"), *b = cJSON_Parse(now ? now : "{}");
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b)) {
        cJSON_Delete(a);
        cJSON_Delete(b);
        return zt_err("training settings: %s JSON is not an object", !cJSON_IsObject(a) ? "the checkpoint's" : "the run's");
    }
    // A key twice (a damaged or hand-edited checkpoint) would be compared with its first
    // copy, and an infinite number with itself, and either reported as a difference of
    // the run: say what it is instead.
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *it, *obj = pass == 0 ? a : b, *inf = nonfinite(obj);
        if (inf) {
            zt_err("training settings: a number%s%.100s%s in the %s JSON is not finite", inf->string ? " (\"" : "",
                   inf->string ? inf->string : "", inf->string ? "\")" : "", pass == 0 ? "checkpoint's" : "run's");
            cJSON_Delete(a);
            cJSON_Delete(b);
            return -1;
        }
        cJSON_ArrayForEach(it, obj) if (cJSON_GetObjectItemCaseSensitive(obj, it->string) != it) {
            zt_err("training settings: \"%.100s\" appears twice in the %s JSON", it->string,
                   pass == 0 ? "checkpoint's" : "run's");
            cJSON_Delete(a);
            cJSON_Delete(b);
            return -1;
        }
    }
    char msg[ZT_ERR_MAX] = "";
    int k = 0;
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *it, *obj = pass == 0 ? a : b;
        cJSON_ArrayForEach(it, obj) {
            int skip = 0;
            for (int i = 0; ignore && ignore[i] && !skip; i++) skip = !strcmp(ignore[i], it->string);
            if (skip) continue;
            const cJSON *other = cJSON_GetObjectItemCaseSensitive(pass == 0 ? b : a, it->string);
            if (pass == 1 && other) continue;  // compared in pass 0
            if (!other) {
                appendf(msg, sizeof msg, "%s%s is set only in the %s", k++ ? "; " : "", it->string,
                        pass == 0 ? "checkpoint" : "run");
            } else if (!cJSON_Compare(it, other, 1)) {
                char *x = cJSON_PrintUnformatted(it), *y = cJSON_PrintUnformatted(other);
                appendf(msg, sizeof msg, "%scheckpoint has %s %.200s, the run has %.200s", k++ ? "; " : "", it->string,
                        x, y);
                free(x);
                free(y);
            }
        }
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    if (k) return zt_err("the run's training settings differ from the checkpoint's: %s", msg);
    return 0;
}

// ---- CRC-32C combination (zlib's crc32_combine, GF(2) matrix method) ------------

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) sq[n] = gf2_times(mat, mat[n]);
}

uint32_t zt_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
    if (len2 == 0) return crc1;
    uint32_t even[32], odd[32];
    odd[0] = 0x82F63B78u;  // reflected Castagnoli polynomial: the operator for one zero bit
    uint32_t row = 1;
    for (int n = 1; n < 32; n++, row <<= 1) odd[n] = row;
    gf2_square(even, odd);  // two zero bits
    gf2_square(odd, even);  // four zero bits
    do {                    // apply len2 zero bytes to crc1
        gf2_square(even, odd);
        if (len2 & 1) crc1 = gf2_times(even, crc1);
        len2 >>= 1;
        if (!len2) break;
        gf2_square(odd, even);
        if (len2 & 1) crc1 = gf2_times(odd, crc1);
        len2 >>= 1;
    } while (len2);
    return crc1 ^ crc2;
}
