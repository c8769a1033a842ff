// `zerotrain triage`: classify GPU power/utilization logs into the field report's
// states (compute, communication, data starvation, checkpoint, deadlock, idle) and
// print stretches and totals; exit 4 when a deadlock stretch is found.
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch/args.h"
#include "launch/commands.h"
#include "launch/report.h"
#include "launch/triage.h"
#include "runtime/common.h"

#define TRIAGE_EXIT_DEADLOCK 4

static void triage_usage(FILE *out) {
    fprintf(out,
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
            "                 in a wait; one or more ranks at ~0%% (or none)\n"
            "  checkpoint     the same, but only rank 0 at ~0%%: it writes a checkpoint while\n"
            "                 the others wait\n"
            "  compute        median power >= compute_min\n"
            "  starvation     median power between hang_max and compute_min, uneven util\n"
            "  communication  the same with even util (every GPU >= busy, spread <= uneven)\n"
            "  unknown        anything else (e.g. all at ~0%% but drawing power)\n"
            "\n"
            "options:\n"
            "  -b, --bands FILE       band file (default: the built-in B300 calibration,\n"
            "                         identical to launch/bands-b300.json)\n"
            "  -f, --format F         auto (default), power-csv, smi-csv or dmon, for all FILEs\n"
            "  -w, --window S         snapshot window in seconds (default 1.0: +-0.5 s)\n"
            "      --dmon-interval S  dmon -d period for logs without -o T (default 1)\n"
            "  -p, --per-sample       print every snapshot\n"
            "      --min-deadlock N   a deadlock stretch of at least N snapshots sets exit 4 (default 2)\n"
            "      --max-gap S        a gap longer than S ends a stretch (default max(5, 3 x median interval))\n"
            "  -q, --quiet            only totals and the verdict\n"
            "      --html FILE        also write the power picture as one self-contained HTML page:\n"
            "                         board power per GPU against time over the bands, and the state\n"
            "                         of every snapshot as a coloured strip under it (as `zerotrain report`)\n"
            "  -h, --help             this text\n"
            "\n"
            "exit: 0 no deadlock stretch, 1 bad input (the message names file:line and the rule),\n"
            "      2 usage, 4 a deadlock stretch of >= --min-deadlock snapshots was found\n");
}

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
    static const struct option longopts[] = {
        {"bands", required_argument, 0, 'b'},   {"format", required_argument, 0, 'f'},
        {"window", required_argument, 0, 'w'},  {"dmon-interval", required_argument, 0, 1},
        {"per-sample", no_argument, 0, 'p'},    {"min-deadlock", required_argument, 0, 2},
        {"max-gap", required_argument, 0, 3},   {"quiet", no_argument, 0, 'q'},
        {"html", required_argument, 0, 4},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *bands_path = NULL, *html = NULL;
    zt_sample_format fmt = ZT_SF_AUTO;
    double window = 1.0, dmon_interval = 1.0, max_gap = 0;
    int64_t min_deadlock = 2;
    int per_sample = 0, quiet = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "b:f:w:pqh", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'b': bands_path = optarg; break;
        case 'f': bad = zt_sample_format_parse(optarg, &fmt); break;
        case 'w': bad = zt_arg_f64("--window", optarg, 1e-3, 3600, &window); break;
        case 1: bad = zt_arg_f64("--dmon-interval", optarg, 1e-3, 3600, &dmon_interval); break;
        case 'p': per_sample = 1; break;
        case 2: bad = zt_arg_i64("--min-deadlock", optarg, 1, 1 << 30, &min_deadlock); break;
        case 3: bad = zt_arg_f64("--max-gap", optarg, 1e-3, 1e9, &max_gap); break;
        case 'q': quiet = 1; break;
        case 4: html = optarg; break;
        case 'h': triage_usage(stdout); return 0;
        default: triage_usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "zerotrain triage: error: %s\n", zt_errmsg());
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "zerotrain triage: error: no sample files given\n\n");
        triage_usage(stderr);
        return 2;
    }
    zt_bands b;
    if (bands_path ? zt_bands_load(&b, bands_path) : (zt_bands_b300(&b), 0)) {
        fprintf(stderr, "zerotrain triage: error: %s\n", zt_errmsg());
        return 1;
    }
    zt_samples set;
    zt_samples_init(&set);
    for (int i = optind; i < argc; i++)
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
    for (size_t i = 0; i < ns; i++) partial += snaps[i].n < set.ndev;
    printf("triage: %d GPU%s in %d file%s, %zu snapshots (%zu partial), %s .. %s, every %.2g s; bands: %s (%s)\n",
           set.ndev, set.ndev == 1 ? "" : "s", set.nfiles, set.nfiles == 1 ? "" : "s", ns, partial,
           zt_triage_fmt_time(set.kind, snaps[0].t, t1, sizeof t1),
           zt_triage_fmt_time(set.kind, snaps[ns - 1].t, t2, sizeof t2), med, b.gpu,
           bands_path ? bands_path : "built in");
    if (per_sample && !quiet) {
        printf("snapshots:\n");
        for (size_t i = 0; i < ns; i++) {
            const zt_snapshot *s = &snaps[i];
            printf("  %s  %-13s %2d/%d GPUs  power med %6.1f W (%.0f-%.0f)  util %3.0f-%3.0f%%", 
                   zt_triage_fmt_time(set.kind, s->t, t1, sizeof t1), zt_gpu_state_name(s->state), s->n, set.ndev,
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
                   zt_triage_fmt_dur(st[i].seconds, d1, sizeof d1), zt_gpu_state_name(st[i].state),
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
               zt_triage_fmt_dur(secs[s], d1, sizeof d1), total > 0 ? 100.0 * secs[s] / total : 0.0);
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
               ndl == 1 ? "" : "es", (long long)min_deadlock, zt_triage_fmt_dur(st[longest].seconds, d1, sizeof d1),
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
        if (zt_triage_html(html, &set, &b, bands_path ? bands_path : "built in", &pc, argv + optind, argc - optind,
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
