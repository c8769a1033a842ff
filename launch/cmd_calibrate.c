// `zerotrain calibrate`: derive a band file for another GPU model from samples of a
// known-healthy run and of a known-idle period (method in docs/operations.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch/args.h"
#include "launch/commands.h"
#include "launch/triage.h"
#include "runtime/common.h"

static void calibrate_usage(FILE *out) {
    fprintf(out,
            "usage: zerotrain calibrate --healthy FILE... --idle FILE... -o BANDS.json [options]\n"
            "\n"
            "Reads samples in any format `zerotrain triage` reads. The compute level is the\n"
            "median power of the healthy run's busy samples (util >= 90%%), its range median\n"
            "+- k sigma (sigma = 1.4826 MAD); the idle range likewise from the idle samples.\n"
            "Deadlock, starvation and communication levels keep the B300 ratios between idle\n"
            "and compute; edges sit halfway between neighbouring levels; utilization limits\n"
            "are the B300 ones (the shapes carry over).\n"
            "\n"
            "options:\n"
            "      --healthy FILE...  samples of a known-healthy training run (mostly compute)\n"
            "      --idle FILE...     samples of the same GPUs with nothing running\n"
            "  -o, --output FILE      band file to write (atomically)\n"
            "      --gpu NAME         GPU model recorded in the file (default \"calibrated\")\n"
            "  -k, --k K              range half-width in sigmas (default 2)\n"
            "  -f, --format F         auto (default), power-csv, smi-csv or dmon\n"
            "      --dmon-interval S  dmon -d period for logs without -o T (default 1)\n"
            "  -h, --help             this text\n");
}

int zt_cmd_calibrate(int argc, char **argv) {
    const char **hf = zt_xcalloc((size_t)argc, sizeof *hf), **idf = zt_xcalloc((size_t)argc, sizeof *idf);
    int nh = 0, ni = 0, list = 0, rc = 2;
    const char *out = NULL, *gpu = NULL;
    double k = 2.0, dmon_interval = 1.0;
    zt_sample_format fmt = ZT_SF_AUTO;
    zt_samples hs, is;
    zt_samples_init(&hs);
    zt_samples_init(&is);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int need = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--gpu") || !strcmp(a, "-k") ||
                   !strcmp(a, "--k") || !strcmp(a, "-f") || !strcmp(a, "--format") || !strcmp(a, "--dmon-interval");
        if (need && i + 1 >= argc) {
            fprintf(stderr, "zerotrain calibrate: error: %s needs a value\n", a);
            goto done;
        }
        int bad = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            calibrate_usage(stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "--healthy")) {
            list = 1;
        } else if (!strcmp(a, "--idle")) {
            list = 2;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = argv[++i];
        } else if (!strcmp(a, "--gpu")) {
            gpu = argv[++i];
        } else if (!strcmp(a, "-k") || !strcmp(a, "--k")) {
            bad = zt_arg_f64("--k", argv[++i], 0.1, 20, &k);
        } else if (!strcmp(a, "-f") || !strcmp(a, "--format")) {
            bad = zt_sample_format_parse(argv[++i], &fmt);
        } else if (!strcmp(a, "--dmon-interval")) {
            bad = zt_arg_f64("--dmon-interval", argv[++i], 1e-3, 3600, &dmon_interval);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "zerotrain calibrate: error: unknown option '%s'\n\n", a);
            calibrate_usage(stderr);
            goto done;
        } else if (list == 1) {
            hf[nh++] = a;
        } else if (list == 2) {
            idf[ni++] = a;
        } else {
            fprintf(stderr, "zerotrain calibrate: error: '%s': say whether it is --healthy or --idle\n", a);
            goto done;
        }
        if (bad) {
            fprintf(stderr, "zerotrain calibrate: error: %s\n", zt_errmsg());
            goto done;
        }
    }
    if (!nh || !ni || !out) {
        fprintf(stderr, "zerotrain calibrate: error: %s\n\n",
                !nh ? "no --healthy files" : !ni ? "no --idle files" : "no output file (-o BANDS.json)");
        calibrate_usage(stderr);
        goto done;
    }
    rc = 1;
    for (int i = 0; i < nh; i++)
        if (zt_samples_read(&hs, hf[i], fmt, dmon_interval) < 0) goto fail;
    for (int i = 0; i < ni; i++)
        if (zt_samples_read(&is, idf[i], fmt, dmon_interval) < 0) goto fail;
    zt_bands b;
    zt_calib_info info;
    zt_calib_opts o = {.k = k, .gpu = gpu};
    if (zt_calibrate(&hs, &is, &o, &b, &info) < 0) goto fail;
    char *json = zt_bands_to_json(&b);
    if (zt_write_file_atomic(out, json, strlen(json)) < 0) {
        free(json);
        goto fail;
    }
    free(json);
    printf("calibrate: healthy %zu of %zu samples busy, median %.1f W (sigma %.1f); idle %zu samples, median %.1f W "
           "(sigma %.1f)\n",
           info.healthy_used, info.healthy_total, info.healthy_med, info.healthy_sigma, info.idle_used, info.idle_med,
           info.idle_sigma);
    printf("calibrate: levels idle %.0f-%.0f, deadlock %.0f-%.0f, starvation %.0f, communication %.0f, compute "
           "%.0f-%.0f W\n",
           b.level_lo[ZT_GS_IDLE], b.level_hi[ZT_GS_IDLE], b.level_lo[ZT_GS_DEADLOCK], b.level_hi[ZT_GS_DEADLOCK],
           b.level_lo[ZT_GS_STARVATION], b.level_lo[ZT_GS_COMM], b.level_lo[ZT_GS_COMPUTE],
           b.level_hi[ZT_GS_COMPUTE]);
    printf("calibrate: edges idle <= %.1f W, hang <= %.1f W, compute >= %.1f W -> %s\n", b.idle_max_w, b.hang_max_w,
           b.compute_min_w, out);
    if (info.clamped & 1)
        printf("calibrate: warning: the idle samples are noisy; the idle range was capped halfway to deadlock\n");
    if (info.clamped & 2)
        printf("calibrate: warning: the healthy samples are noisy; the compute range was capped halfway above "
               "communication (was the healthy run really healthy?)\n");
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "zerotrain calibrate: error: %s\n", zt_errmsg());
done:
    zt_samples_free(&hs);
    zt_samples_free(&is);
    free(hf);
    free(idf);
    return rc;
}
