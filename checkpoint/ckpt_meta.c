// What a save writes besides the tensors' bytes: ckpt.h5's root attributes, /model_config and the
// /units/NNN groups with their datasets and crc32c attributes (collective), and meta.json.
// defines: zt_ckpt_write_metadata, zt_ckpt_write_meta_json
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint/ckpt_internal.h"
#include "model/family.h"
#include "base/common.h"
#include "base/out_file.h"

#ifndef ZT_VERSION
#define ZT_VERSION "dev"
#endif

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
int zt_ckpt_write_metadata(zt_ckpt_save_ctx *c, const zt_ckpt_meta *m, const char *train_json) {
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
    if (cfg->family && cfg->family->ckpt_config_json) {  // a family whose fields these do not cover: its config.json
        char *cj = zt_model_config_json(cfg);
        rc |= zt_h5_put_str(g, "config_json", cj);
        free(cj);
    }
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

int zt_ckpt_write_meta_json(const zt_ckpt_save_ctx *c, const zt_ckpt_meta *m, double seconds) {
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
