// Collective checkpoint load over parallel HDF5: every rank reads its new slices of the canonical
// vectors (the world size may differ from the save's) and verifies the crc32c of every chunk that
// starts in them; the model's tensor tables must match. Every failure is agreed.
// defines: zt_ckpt_load
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"
#include "base/crc32c.h"
#include "base/common.h"

static void tensors_of(const zt_unit_layout *ul, zt_ckpt_unit_info *ui) {
    memset(ui, 0, sizeof *ui);
    ui->numel = ul->numel;
    ui->layer = ul->layer;
    snprintf(ui->kind, sizeof ui->kind, "%s",
             ul->kind == ZT_UNIT_EMBED ? "embed" : ul->kind == ZT_UNIT_LAYER ? "layer" : "head");
    ui->ntensors = ul->ntensors;
    ui->t = zt_xcalloc((size_t)(ul->ntensors > 0 ? ul->ntensors : 1), sizeof *ui->t);
    for (int i = 0; i < ul->ntensors; i++) {
        zt_ckpt_tensor *t = &ui->t[i];
        snprintf(t->name, sizeof t->name, "%s", ul->t[i].name);
        t->ndim = ul->t[i].ndim;
        for (int j = 0; j < 3; j++) t->shape[j] = j < ul->t[i].ndim ? ul->t[i].shape[j] : 0;
        t->offset = ul->t[i].offset;
        t->numel = ul->t[i].numel;
    }
}

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

static int compare_with(const char *file, int u, const zt_ckpt_unit_info *got, const zt_ckpt_unit_info *want) {
    const zt_ckpt_unit_info w = *want;
    if (got->numel != w.numel || got->ntensors != w.ntensors)
        return zt_err("%s: unit %d holds %d tensors in %lld elements; the run's model has %d tensors in %lld", file,
                      u, got->ntensors, (long long)got->numel, w.ntensors, (long long)w.numel);
    for (int i = 0; i < w.ntensors; i++) {
        const zt_ckpt_tensor *a = &got->t[i], *b = &w.t[i];
        int same_shape = a->ndim == b->ndim;
        for (int j = 0; j < b->ndim && same_shape; j++) same_shape = a->shape[j] == b->shape[j];
        if (strcmp(a->name, b->name) || a->offset != b->offset || !same_shape)
            return zt_err("%s: unit %d tensor %d is %s at offset %lld in the checkpoint, but %s at offset %lld in the "
                          "run's model layout",
                          file, u, i, a->name, (long long)a->offset, b->name, (long long)b->offset);
    }
    return 0;
}

static int compare_tables(const char *file, int u, const zt_ckpt_unit_info *got, const zt_unit_layout *want) {
    zt_ckpt_unit_info w;
    tensors_of(want, &w);
    const int rc = compare_with(file, u, got, &w);
    zt_ckpt_unit_info_free(&w);
    return rc;
}

int zt_ckpt_load(MPI_Comm comm, const char *ckpt_dir, const zt_model_layout *lay, zt_ckpt_meta *meta_out,
                 const zt_ckpt_shards *sh) {
    zt_h5_quiet();
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    char dir[4096], file[4200];
    int ok = zt_ckpt_resolve(ckpt_dir, dir, sizeof dir) == 0 && zt_ckpt_check_shards(lay, sh) == 0;
    if (zt_ckpt_agree(comm, ok) != 0) return zt_ckpt_err_prefix("loading checkpoint"), -1;
    snprintf(file, sizeof file, "%s/%s", dir, ZT_CKPT_FILE);
    if (zt_ckpt_agree_same_file(comm, dir, file) != 0) return zt_ckpt_err_prefix("loading checkpoint"), ZT_CKPT_LOAD_DIFFERENT;

    hid_t fapl = zt_ckpt_mpio_fapl(comm, 0);
    hid_t fid = H5Fopen(file, H5F_ACC_RDONLY, fapl);
    if (fid < 0) {
        const char *why = zt_h5_why();
        ok = zt_err(strstr(why, "truncated file") ? "%s: the file is truncated (shorter than its own superblock says: "
                                                    "%s); the checkpoint is incomplete or damaged and is refused"
                                                  : "%s: cannot open as HDF5: %s",
                    file, why) == 0;
    }
    H5Pclose(fapl);
    if (zt_ckpt_agree(comm, ok) != 0) {
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
    zt_ckpt_agreement ag = {comm, 0};
    if (zt_ckpt_agree_step(&ag, &ok) == 0) {
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
            if (zt_ckpt_agree_step(&ag, &ok) == 0) {
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
                    float *dst = (float *)zt_ckpt_slice_ptr(s, k);
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
                zt_ckpt_agree_step(&ag, &ok);
            }
            for (int k = 0; k < ZT_CKPT_NDS; k++) {
                if (d[k] >= 0) H5Dclose(d[k]);
                free(crc[k]);
            }
        }
    }
    free(tail);
    for (int u = 0; u < lay->nunits; u++) zt_ckpt_unit_info_free(&ui[u]);
    free(ui);
    H5Pclose(dxpl);
    herr_t cr = H5Fclose(fid);
    if (ok && cr < 0) ok = zt_err("%s: close failed: %s", file, zt_h5_why()) == 0;
    if (zt_ckpt_agree_step(&ag, &ok) != 0) return zt_ckpt_err_prefix("loading checkpoint"), -1;
    if (meta_out) *meta_out = meta;
    return 0;
}
