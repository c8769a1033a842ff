// libFuzzer harness: the checkpoint metadata reader (checkpoint/ckpt_h5.c: the header,
// the model config group, each unit's tensor table and its datasets' crc attributes).
// The input is a script of one attribute (or dataset) per line,
//     PATH NAME TYPE VALUE
// where PATH is "/" or a group like /model_config or /units/001 (or a dataset inside
// one), TYPE is i (int64), I (int64 list), f (double), u (uint64 list), w (uint32 list),
// s (fixed-length string), v (variable-length string, as h5py writes) or D (a float32
// dataset of VALUE elements); built into an in-memory HDF5 file (the core driver), then
// read as `zerotrain inspect` and resume read it.
// Properties: a header that is accepted holds a model config that config.json's rules
// accept too, and a unit count that matches it; the training settings and the config
// compare equal to themselves; unit tables tile their numel.
// With ZT_FUZZ_DUMP=FILE.h5 the harness prints such a script for a real checkpoint's
// metadata (how the seed corpus was made) and exits.
#include <cjson/cJSON.h>
#include <hdf5.h>

#include "checkpoint/ckpt.h"
#include "checkpoint/ckpt_internal.h"
#include "fuzz_util.h"
#include "model/config.h"
#include "base/common.h"

#define MAX_VALUES 4096
#define MAX_DS_ELEMS 65536

static hid_t ensure_group(hid_t fid, const char *path) {
    if (!strcmp(path, "/")) return H5Gopen2(fid, "/", H5P_DEFAULT);
    H5E_BEGIN_TRY {
        hid_t g = H5Oopen(fid, path, H5P_DEFAULT);
        if (g >= 0) return g;
    } H5E_END_TRY;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t g = H5Gcreate2(fid, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(lcpl);
    return g;
}

static int parse_list(const char *v, int is_signed, void *out, int max) {
    int n = 0;
    for (const char *p = v; *p && n < max;) {
        char *end;
        if (is_signed) ((int64_t *)out)[n] = strtoll(p, &end, 0);
        else ((uint64_t *)out)[n] = strtoull(p, &end, 0);
        if (end == p) break;
        n++;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',') break;
    }
    return n;
}

static void put_line(hid_t fid, char *line) {
    char *name = strchr(line, ' ');
    if (!name) return;
    *name++ = 0;
    char *type = strchr(name, ' ');
    if (!type) return;
    *type++ = 0;
    char *val = type[0] && type[1] == ' ' ? type + 2 : type + strlen(type);
    if (line[0] != '/' || !name[0]) return;
    H5E_BEGIN_TRY {
        if (type[0] == 'D') {
            long long n = strtoll(val, NULL, 0);
            if (n < 0 || n > MAX_DS_ELEMS) n = 0;
            hid_t g = ensure_group(fid, line);
            if (g >= 0) {
                hsize_t dims[1] = {(hsize_t)n};
                hid_t sp = H5Screate_simple(1, dims, NULL);
                hid_t d = H5Dcreate2(g, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
                if (d >= 0) H5Dclose(d);
                H5Sclose(sp);
                H5Oclose(g);
            }
        } else {
            hid_t loc = ensure_group(fid, line);
            if (loc >= 0) {
                if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
                static uint64_t vals[MAX_VALUES];
                hid_t t = -1, mt = -1, sp = -1;
                hsize_t n = 1;
                const void *buf = vals;
                double dv;
                char *sv = val;
                switch (type[0]) {
                case 'i': vals[0] = (uint64_t)strtoll(val, NULL, 0); t = H5T_STD_I64LE, mt = H5T_NATIVE_INT64; break;
                case 'I': n = (hsize_t)parse_list(val, 1, vals, MAX_VALUES); t = H5T_STD_I64LE, mt = H5T_NATIVE_INT64; break;
                case 'u': n = (hsize_t)parse_list(val, 0, vals, MAX_VALUES); t = H5T_STD_U64LE, mt = H5T_NATIVE_UINT64; break;
                case 'w': {
                    n = (hsize_t)parse_list(val, 0, vals, MAX_VALUES);
                    uint32_t *w = (uint32_t *)vals;  // narrowed in place, front to back
                    for (hsize_t k = 0; k < n; k++) w[k] = (uint32_t)vals[k];
                    t = H5T_STD_U32LE, mt = H5T_NATIVE_UINT32;
                    break;
                }
                case 'f': dv = strtod(val, NULL), buf = &dv, t = H5T_IEEE_F64LE, mt = H5T_NATIVE_DOUBLE; break;
                case 's':
                    t = mt = H5Tcopy(H5T_C_S1);
                    H5Tset_size(t, strlen(val) + 1);
                    buf = val;
                    break;
                case 'v':
                    t = mt = H5Tcopy(H5T_C_S1);
                    H5Tset_size(t, H5T_VARIABLE);
                    buf = &sv;
                    break;
                default: break;
                }
                if (t >= 0 && n > 0) {
                    sp = (type[0] == 's' || type[0] == 'v' || type[0] == 'i' || type[0] == 'f')
                             ? H5Screate(H5S_SCALAR)
                             : H5Screate_simple(1, &n, NULL);
                    hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
                    if (a >= 0) {
                        H5Awrite(a, mt, buf);
                        H5Aclose(a);
                    }
                    H5Sclose(sp);
                }
                if (type[0] == 's' || type[0] == 'v') H5Tclose(t);
                H5Oclose(loc);
            }
        }
    } H5E_END_TRY;
}

// ---- ZT_FUZZ_DUMP: a real checkpoint's metadata as a script ---------------------
static herr_t dump_attr(hid_t loc, const char *name, const H5A_info_t *info, void *path) {
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), t = H5Aget_type(a), s = H5Aget_space(a);
    hssize_t n = H5Sget_simple_extent_npoints(s);
    int scalar = H5Sget_simple_extent_type(s) == H5S_SCALAR;
    H5T_class_t c = H5Tget_class(t);
    if (c == H5T_STRING) {
        char *v = NULL;
        if (H5Tis_variable_str(t) > 0) {
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Aread(a, mt, &v);
            printf("%s %s v %s\n", (const char *)path, name, v ? v : "");
            H5free_memory(v);
            H5Tclose(mt);
        } else {
            size_t sz = H5Tget_size(t);
            v = calloc(sz + 1, 1);
            H5Aread(a, t, v);
            for (char *p = v; *p; p++)
                if (*p == '\n') *p = ' ';  // one line per attribute (JSON does not care)
            printf("%s %s s %s\n", (const char *)path, name, v);
            free(v);
        }
    } else if (c == H5T_FLOAT) {
        double d;
        H5Aread(a, H5T_NATIVE_DOUBLE, &d);
        printf("%s %s f %.17g\n", (const char *)path, name, d);
    } else if (c == H5T_INTEGER) {
        int sgn = H5Tget_sign(t) == H5T_SGN_2;
        int u32 = H5Tget_size(t) == 4 && !sgn;
        uint64_t *v = calloc((size_t)n, 8);
        H5Aread(a, sgn ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64, v);
        printf("%s %s %c ", (const char *)path, name, sgn ? (scalar ? 'i' : 'I') : (u32 ? 'w' : 'u'));
        for (hssize_t k = 0; k < n; k++) printf(sgn ? "%s%lld" : "%s%llu", k ? "," : "", (long long)v[k]);
        printf("\n");
        free(v);
    }
    H5Sclose(s);
    H5Tclose(t);
    H5Aclose(a);
    return 0;
}

static herr_t dump_obj(hid_t o, const char *name, const H5O_info_t *info, void *unused) {
    char path[1024];
    snprintf(path, sizeof path, "/%s", strcmp(name, ".") ? name : "");
    if (strcmp(name, ".") == 0) snprintf(path, sizeof path, "/");
    if (info->type == H5O_TYPE_DATASET) {
        hid_t d = H5Dopen2(o, name, H5P_DEFAULT), s = H5Dget_space(d);
        char parent[1024];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        *slash = 0;
        printf("%s %s D %lld\n", parent[0] ? parent : "/", slash + 1, (long long)H5Sget_simple_extent_npoints(s));
        H5Sclose(s);
        H5Dclose(d);
    }
    hid_t obj = H5Oopen(o, name, H5P_DEFAULT);
    H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, NULL, dump_attr, path);
    H5Oclose(obj);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    zt_h5_quiet();
    const char *dump = getenv("ZT_FUZZ_DUMP");
    if (dump) {
        hid_t fid = H5Fopen(dump, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (fid < 0) {
            fprintf(stderr, "cannot open %s\n", dump);
            exit(1);
        }
        H5Ovisit2(fid, H5_INDEX_NAME, H5_ITER_INC, dump_obj, NULL, H5O_INFO_BASIC);
        H5Fclose(fid);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 16, 0);  // in memory, never written
    static int serial;
    char name[64];
    snprintf(name, sizeof name, "fuzz-%d.h5", serial++);
    hid_t fid = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (fid < 0) abort();
    char *text = fuzz_cstr(data, size);
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        put_line(fid, line);
    free(text);

    const char *path = "fuzz/ckpt.h5";
    zt_ckpt_meta meta;
    zt_model_config cfg;
    char *train_json = NULL, *cfg_json = NULL;
    int nunits = 0;
    if (zt_ckpt_read_header(fid, path, &meta, &cfg, &train_json, &cfg_json, &nunits) != 0) {
        FUZZ_ASSERT(zt_errmsg()[0], "a refused header must say why");
        FUZZ_ASSERT(!train_json && !cfg_json, "a refused header left strings for the caller");
        H5Fclose(fid);
        return 0;
    }
    // the config is one config.json's rules accept, with its unit count
    char *json = zt_model_config_json(&cfg);
    zt_model_config back;
    FUZZ_ASSERT(zt_model_config_parse(&back, json, "fuzz/written") == 0,
                "the checkpoint's model config is accepted, but config.json's rules refuse it: %s\n%s", zt_errmsg(),
                json);
    free(json);
    FUZZ_ASSERT(nunits == cfg.num_layers + 2, "nunits %d for %d layers", nunits, cfg.num_layers);
    char diff[1500];
    FUZZ_ASSERT(zt_ckpt_config_diff(&cfg, &cfg, diff, sizeof diff) == 0, "a config differs from itself: %s", diff);
    int self = zt_ckpt_check_train_json(train_json, train_json, NULL);
    cJSON *tj = cJSON_Parse(train_json);
    FUZZ_ASSERT(self == 0 || !cJSON_IsObject(tj) || strstr(zt_errmsg(), "appears twice") ||
                    strstr(zt_errmsg(), "is not finite"),
                "training settings differ from themselves: %s", zt_errmsg());
    cJSON_Delete(tj);
    zt_model_config parsed;
    zt_model_config_parse(&parsed, cfg_json, "fuzz/model_config_json");
    for (int u = 0; u < nunits && u < 64; u++) {
        zt_ckpt_unit_info ui;
        if (zt_ckpt_read_unit(fid, path, u, &ui) != 0) continue;
        int64_t sum = 0;
        for (int i = 0; i < ui.ntensors; i++) sum += ui.t[i].numel;
        FUZZ_ASSERT(sum == ui.numel, "unit %d: tensors hold %lld of %lld elements", u, (long long)sum,
                    (long long)ui.numel);
        char buf[512];
        zt_ckpt_unit_label(&ui, buf, sizeof buf);
        zt_ckpt_span_tensors(&ui, 0, ui.numel, buf, sizeof buf);
        zt_ckpt_span_tensors(&ui, ui.numel / 2, ui.numel / 2 + 1, buf, sizeof buf);
        zt_ckpt_unit_info_free(&ui);
        for (int k = 0; k < ZT_CKPT_NDS; k++) {
            char dname[64], where[128];
            snprintf(dname, sizeof dname, "units/%03d/%s", u, zt_ckpt_ds_names[k]);
            snprintf(where, sizeof where, "%s: /%s", path, dname);
            hid_t d = -1;
            H5E_BEGIN_TRY { d = H5Dopen2(fid, dname, H5P_DEFAULT); } H5E_END_TRY;
            if (d < 0) continue;
            int64_t chunk = 0, nch = 0;
            uint32_t *crc = NULL;
            if (zt_ckpt_read_crc(d, where, ui.numel, &chunk, &crc, &nch) == 0) {
                FUZZ_ASSERT(chunk >= 1 && nch == (ui.numel + chunk - 1) / chunk, "%s: %lld crcs for %lld elements "
                            "in chunks of %lld", where, (long long)nch, (long long)ui.numel, (long long)chunk);
                free(crc);
            }
            H5Dclose(d);
        }
    }
    free(train_json);
    free(cfg_json);
    H5Fclose(fid);
    return 0;
}
