// `zerotrain calibrate`: derive a band file for another GPU model from samples of a
// known-healthy run and of a known-idle period (method in docs/operations.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "ops/triage.h"
#include "ops/triage_defaults.h"
#include "base/common.h"
#include "base/out_file.h"

static const char synopsis[] =
            "usage: zerotrain calibrate --healthy FILE... --idle FILE... -o BANDS.json [options]\n"
            "\n"
            "Reads samples in any format `zerotrain triage` reads. The compute level is the\n"
            "median power of the healthy run's busy samples (util >= 90%), its range median\n"
            "+- k sigma (sigma = 1.4826 MAD); the idle range likewise from the idle samples.\n"
            "Deadlock, starvation and communication levels keep the B300 ratios between idle\n"
            "and compute; edges sit halfway between neighbouring levels; utilization limits\n"
            "are the B300 ones (the shapes carry over).\n";

typedef struct {
    zt_flag_list healthy, idle;
    const char *output, *gpu, *format;
    double k, dmon_interval;
} calibrate_flags;

#define T calibrate_flags
static const zt_flag flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "options:"},
    {"healthy", ZT_FLAG_LIST, ZT_AT_LIST(T, healthy), "FILE...",
     .help = "samples of a known-healthy training run (mostly compute)"},
    {"idle", ZT_FLAG_LIST, ZT_AT_LIST(T, idle), "FILE...", .help = "samples of the same GPUs with nothing running"},
    {"output", ZT_FLAG_STR, ZT_AT_STR(T, output), "FILE", .letter = 'o', .help = "band file to write (atomically)"},
    {"gpu", ZT_FLAG_STR, ZT_AT_STR(T, gpu), "NAME", .help = "GPU model recorded in the file (default \"calibrated\")"},
    {"k", ZT_FLAG_F64, ZT_AT_F64(T, k), "K", .fmin = 0.1, .fmax = 20, .def = ZT_CALIB_DEF_K, .letter = 'k',
     .help = "range half-width in sigmas (default {default})"},
    {"format", ZT_FLAG_STR, ZT_AT_STR(T, format), "F", .sdef = "auto", .letter = 'f',
     .help = "auto (default), power-csv, smi-csv or dmon"},
    {"dmon-interval", ZT_FLAG_F64, ZT_AT_F64(T, dmon_interval), "S", .fmin = 1e-3, .fmax = 3600,
     .def = ZT_TRIAGE_DEF_DMON_INTERVAL, .help = "dmon -d period for logs without -o T (default {default})"},
    {0}};
#undef T

int zt_cmd_calibrate(int argc, char **argv) {
    calibrate_flags f;
    zt_samples hs, is;
    zt_samples_init(&hs);
    zt_samples_init(&is);
    int rc = zt_flags_parse("calibrate", flags, &f, argc, argv, synopsis, NULL);
    if (rc) {
        rc = rc == 1 ? 0 : 2;
        goto done;
    }
    rc = 2;
    const char **hf = f.healthy.v, **idf = f.idle.v, *out = f.output, *gpu = f.gpu;
    const int nh = f.healthy.n, ni = f.idle.n;
    const double k = f.k, dmon_interval = f.dmon_interval;
    zt_sample_format fmt;
    if (zt_sample_format_parse(f.format, &fmt) != 0) {
        fprintf(stderr, "zerotrain calibrate: error: %s\n", zt_errmsg());
        goto done;
    }
    if (!nh || !ni || !out) {
        fprintf(stderr, "zerotrain calibrate: error: %s\n\n",
                !nh ? "no --healthy files" : !ni ? "no --idle files" : "no output file (-o BANDS.json)");
        zt_flags_usage(stderr, flags, synopsis, NULL);
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
    zt_flags_free(flags, &f);
    return rc;
}
