// `zerotrain triage`: classify GPU power/utilization logs into the field report's
// states (compute, communication, data starvation, checkpoint, deadlock, idle) and
// print stretches and totals; exit 4 when a deadlock stretch is found.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "ops/power_view.h"
#include "ops/triage.h"
#include "ops/triage_defaults.h"
#include "base/common.h"
#include "ops/fmt.h"

#define TRIAGE_EXIT_DEADLOCK 4

static const char synopsis[] =
            "usage: zerotrain triage [options] FILE...\n"
            "\n"
            "Classifies GPU samples by board power and utilization. FILEs are, detected from\n"
            "their first line:\n"
            "  RUN/ranks/rank-NNNNN.power.csv   the trainer's samples (time,gpu,power_w,util_pct,...);\n"
            "                                   GPU id = the rank in the name\n"
            "  nvidia-smi --query-gpu=timestamp,index,power.draw,utilization.gpu --format=csv -l 1\n"
            "  nvidia-smi dmon -s pu [-o DT]     (without -o T: one round of GPU lines per --dmon-interval)\n"
            "Per-node logs number their GPUs in the order given (node 0's 0-7, then 8-15, ...),\n"
            "like ranks placed 8 per node. Samples of different GPUs within --window seconds\n"
            "form one snapshot, which is classified as a whole:\n"
            "  idle           every GPU at <= zero util and median power <= idle_max\n"
            "  deadlock       busy GPUs (>= busy util) at a median <= hang_max watts: spinning\n"
            "                 in a wait; one or more ranks at ~0% (or none)\n"
            "  checkpoint     the same, but only rank 0 at ~0%: it writes a checkpoint while\n"
            "                 the others wait\n"
            "  compute        median power >= compute_min\n"
            "  starvation     median power between hang_max and compute_min, uneven util\n"
            "  communication  the same with even util (every GPU >= busy, spread <= uneven)\n"
            "  unknown        anything else (e.g. all at ~0% but drawing power)\n";
static const char epilog[] =
            "\n"
            "exit: 0 no deadlock stretch, 1 bad input (the message names file:line and the rule),\n"
            "      2 usage, 4 a deadlock stretch of >= --min-deadlock snapshots was found\n";

typedef struct {
    const char *bands, *format, *html;
    double window, dmon_interval, max_gap;
    int per_sample, min_deadlock, quiet;
} triage_flags;

#define T triage_flags
static const zt_flag flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "options:"},
    {"bands", ZT_FLAG_STR, ZT_AT_STR(T, bands), "FILE", .letter = 'b',
     .help = "band file (default: the built-in B300 calibration,\nidentical to ops/bands-b300.json)"},
    {"format", ZT_FLAG_STR, ZT_AT_STR(T, format), "F", .sdef = "auto", .letter = 'f',
     .help = "auto (default), power-csv, smi-csv or dmon, for all FILEs"},
    {"window", ZT_FLAG_F64, ZT_AT_F64(T, window), "S", .fmin = 1e-3, .fmax = 3600, .def = ZT_TRIAGE_DEF_WINDOW,
     .letter = 'w', .help = "snapshot window in seconds: samples within +-S/2 (default {default})"},
    {"dmon-interval", ZT_FLAG_F64, ZT_AT_F64(T, dmon_interval), "S", .fmin = 1e-3, .fmax = 3600,
     .def = ZT_TRIAGE_DEF_DMON_INTERVAL, .help = "dmon -d period for logs without -o T (default {default})"},
    {"per-sample", ZT_FLAG_SET, ZT_AT_INT(T, per_sample), .letter = 'p', .help = "print every snapshot"},
    {"min-deadlock", ZT_FLAG_INT, ZT_AT_INT(T, min_deadlock), "N", 1, 1 << 30, .def = ZT_TRIAGE_DEF_MIN_DEADLOCK,
     .help = "a deadlock stretch of at least N snapshots sets exit 4 (default {default})"},
    {"max-gap", ZT_FLAG_F64, ZT_AT_F64(T, max_gap), "S", .fmin = 1e-3, .fmax = 1e9,
     .help = "a gap longer than S ends a stretch (default max(5, 3 x median interval))"},
    {"quiet", ZT_FLAG_SET, ZT_AT_INT(T, quiet), .letter = 'q', .help = "only totals and the verdict"},
    {"html", ZT_FLAG_STR, ZT_AT_STR(T, html), "FILE",
     .help = "also write the power picture as one self-contained HTML page:\nboard power per GPU against time over "
             "the bands, and the state\nof every snapshot as a coloured strip under it (as `zerotrain report`)"},
    {0}};
#undef T

typedef struct {
    double p_med, p_lo, p_hi, u_lo, u_hi;
} stretch_stats;

static void stretch_summary(const zt_snapshot *s, const zt_stretch *st, stretch_stats *o) {
    size_t n = st->last - st->first + 1;
    double *pm = zt_xmalloc(n * sizeof *pm);
    o->p_lo = o->u_lo = INFINITY, o->p_hi = o->u_hi = -INFINITY;
    for (size_t i = st->first; i <= st->last; i++) {
        pm[i - st->first] = s[i].p_med;
        o->p_lo = fmin(o->p_lo, s[i].p_min), o->p_hi = fmax(o->p_hi, s[i].p_max);
        o->u_lo = fmin(o->u_lo, s[i].u_min), o->u_hi = fmax(o->u_hi, s[i].u_max);
    }
    o->p_med = zt_median(pm, n);
    free(pm);
}

int zt_cmd_triage(int argc, char **argv) {
    triage_flags f;
    int first;  // the first FILE
    const int prc = zt_flags_parse_operands("triage", flags, &f, argc, argv, synopsis, epilog, &first);
    if (prc) return prc == 1 ? 0 : 2;
    const char *bands_path = f.bands, *html = f.html;
    const double window = f.window, dmon_interval = f.dmon_interval;
    double max_gap = f.max_gap;
    const int64_t min_deadlock = f.min_deadlock;
    const int per_sample = f.per_sample, quiet = f.quiet;
    zt_sample_format fmt;
    if (zt_sample_format_parse(f.format, &fmt) != 0) {
        fprintf(stderr, "zerotrain triage: error: %s\n", zt_errmsg());
        return 2;
    }
    if (first >= argc) {
        fprintf(stderr, "zerotrain triage: error: no sample files given\n\n");
        zt_flags_usage(stderr, flags, synopsis, epilog);
        return 2;
    }
    zt_bands b;
    if (bands_path ? zt_bands_load(&b, bands_path) : (zt_bands_b300(&b), 0)) {
        fprintf(stderr, "zerotrain triage: error: %s\n", zt_errmsg());
        return 1;
    }
    zt_samples set;
    zt_samples_init(&set);
    for (int i = first; i < argc; i++)
        if (zt_samples_read(&set, argv[i], fmt, dmon_interval) < 0) {
            fprintf(stderr, "zerotrain triage: error: %s\n", zt_errmsg());
            zt_samples_free(&set);
            return 1;
        }
    zt_samples_sort(&set);
    zt_snapshot *snaps;
    zt_stretch *st;
    size_t ns, nst;
    zt_snapshots_build(&set, &b, window, &snaps, &ns);
    double med = zt_snapshots_median_interval(snaps, ns);
    if (max_gap <= 0) max_gap = fmax(5.0, 3.0 * med);
    zt_stretches_build(snaps, ns, max_gap, &st, &nst);

    char t1[40], t2[40], d1[32];
    size_t partial = 0;
    int *ids;
    const int ngpu = zt_samples_gpu_ids(&set, &ids);  // distinct GPUs: ids need not be dense
    free(ids);
    for (size_t i = 0; i < ns; i++) partial += snaps[i].n < ngpu;
    printf("triage: %d GPU%s in %d file%s, %zu snapshots (%zu partial), %s .. %s, every %.2g s; bands: %s (%s)\n",
           ngpu, ngpu == 1 ? "" : "s", set.nfiles, set.nfiles == 1 ? "" : "s", ns, partial,
           zt_triage_fmt_time(set.kind, snaps[0].t, t1, sizeof t1),
           zt_triage_fmt_time(set.kind, snaps[ns - 1].t, t2, sizeof t2), med, b.gpu,
           bands_path ? bands_path : "built in");
    if (per_sample && !quiet) {
        printf("snapshots:\n");
        for (size_t i = 0; i < ns; i++) {
            const zt_snapshot *s = &snaps[i];
            printf("  %s  %-13s %2d/%d GPUs  power med %6.1f W (%.0f-%.0f)  util %3.0f-%3.0f%%", 
                   zt_triage_fmt_time(set.kind, s->t, t1, sizeof t1), zt_gpu_state_name(s->state), s->n, ngpu,
                   s->p_med, s->p_min, s->p_max, s->u_min, s->u_max);
            if (s->nzero && s->nzero < s->n) printf("  at 0%%: %s", s->zero);
            putchar('\n');
        }
    }
    if (!quiet) {
        printf("stretches:\n");
        for (size_t i = 0; i < nst; i++) {
            stretch_stats ss;
            stretch_summary(snaps, &st[i], &ss);
            printf("  %s  %-9s %-13s %5zu snapshot%s  power med %6.1f W (%.0f-%.0f)  util %3.0f-%3.0f%%",
                   zt_triage_fmt_time(set.kind, st[i].t0, t1, sizeof t1),
                   zt_fmt_dur(st[i].seconds, d1, sizeof d1), zt_gpu_state_name(st[i].state),
                   st[i].last - st[i].first + 1, st[i].last == st[i].first ? " " : "s", ss.p_med, ss.p_lo, ss.p_hi,
                   ss.u_lo, ss.u_hi);
            if ((st[i].state == ZT_GS_DEADLOCK || st[i].state == ZT_GS_CHECKPOINT) && st[i].zero[0])
                printf("  at 0%%: GPU %s", st[i].zero);
            putchar('\n');
        }
    }
    double secs[ZT_GS_COUNT_] = {0}, total = 0;
    size_t cnt[ZT_GS_COUNT_] = {0};
    for (size_t i = 0; i < nst; i++) {
        secs[st[i].state] += st[i].seconds;
        cnt[st[i].state] += st[i].last - st[i].first + 1;
        total += st[i].seconds;
    }
    printf("totals:\n");
    static const zt_gpu_state order[] = {ZT_GS_COMPUTE, ZT_GS_COMM,  ZT_GS_STARVATION, ZT_GS_CHECKPOINT,
                                         ZT_GS_DEADLOCK, ZT_GS_IDLE, ZT_GS_UNKNOWN};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        zt_gpu_state s = order[k];
        printf("  %-13s %7zu snapshots  %9s  %5.1f%%\n", zt_gpu_state_name(s), cnt[s],
               zt_fmt_dur(secs[s], d1, sizeof d1), total > 0 ? 100.0 * secs[s] / total : 0.0);
    }
    // Verdict: deadlock stretches long enough to trust, the longest named.
    size_t ndl = 0, longest = 0;
    for (size_t i = 0; i < nst; i++)
        if (st[i].state == ZT_GS_DEADLOCK && st[i].last - st[i].first + 1 >= (size_t)min_deadlock) {
            if (ndl == 0 || st[i].seconds > st[longest].seconds) longest = i;
            ndl++;
        }
    int rc = 0;
    if (ndl) {
        printf("verdict: DEADLOCK: %zu stretch%s of >= %lld snapshots; longest %s from %s, GPU%s at 0%%: %s\n", ndl,
               ndl == 1 ? "" : "es", (long long)min_deadlock, zt_fmt_dur(st[longest].seconds, d1, sizeof d1),
               zt_triage_fmt_time(set.kind, st[longest].t0, t1, sizeof t1), strchr(st[longest].zero, ',') || strchr(st[longest].zero, '-') ? "s" : "",
               st[longest].zero[0] ? st[longest].zero : "none (all busy at low power)");
        rc = TRIAGE_EXIT_DEADLOCK;
    } else {
        double busy = secs[ZT_GS_COMPUTE] + secs[ZT_GS_COMM] + secs[ZT_GS_STARVATION];
        printf("verdict: no deadlock; compute %.1f%% of the busy time, communication %.1f%%, starvation %.1f%%\n",
               busy > 0 ? 100 * secs[ZT_GS_COMPUTE] / busy : 0.0, busy > 0 ? 100 * secs[ZT_GS_COMM] / busy : 0.0,
               busy > 0 ? 100 * secs[ZT_GS_STARVATION] / busy : 0.0);
    }
    if (html) {
        zt_power_class pc = {.snaps = snaps, .ns = ns, .st = st, .nst = nst, .median_interval = med, .max_gap = max_gap};
        if (zt_triage_html(html, &set, &b, bands_path ? bands_path : "built in", &pc, argv + first, argc - first,
                           (int)min_deadlock) != 0) {
            fprintf(stderr, "zerotrain triage: error: --html: %s\n", zt_errmsg());
            rc = 1;
        } else {
            printf("html: %s\n", html);
        }
    }
    free(snaps);
    free(st);
    zt_samples_free(&set);
    return rc;
}
